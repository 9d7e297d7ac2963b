#!/usr/bin/env python3
"""make test-layers: the include rules of README's "How it works".

A module of allocator/ is its .c and .h; it depends on each allocator/
module whose header either includes. Fails (exit 1, one line each) when
allocator/ includes a header of shim/, or when the dependencies form a
circle (a lower module calling up; notify.h is the way down-to-up news
travels). Prints "layers: ok, N modules" otherwise.
"""
import os
import re
import sys

top = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
alloc = os.path.join(top, "allocator")
shim_headers = {f for f in os.listdir(os.path.join(top, "shim")) if f.endswith(".h")}
include = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)

mods = sorted({f[:-2] for f in os.listdir(alloc) if f.endswith((".c", ".h"))})
deps, bad = {m: set() for m in mods}, []
for m in mods:
    for ext in (".c", ".h"):
        path = os.path.join(alloc, m + ext)
        if not os.path.exists(path):
            continue
        for inc in include.findall(open(path, encoding="utf-8").read()):
            name = os.path.basename(inc)
            if name in shim_headers or inc.startswith("shim/") or "../shim" in inc:
                bad.append("layers: allocator/%s%s includes shim's %s" % (m, ext, inc))
            elif name.endswith(".h") and name[:-2] in deps and name[:-2] != m:
                deps[m].add(name[:-2])

# Depth-first search; a grey module met again closes a circle.
state, path = {}, []


def visit(m):
    state[m] = "grey"
    path.append(m)
    for d in sorted(deps[m]):
        if state.get(d) == "grey":
            bad.append("layers: include circle: " + " -> ".join(path[path.index(d):] + [d]))
        elif d not in state:
            visit(d)
    path.pop()
    state[m] = "black"


for m in mods:
    if m not in state:
        visit(m)
for line in bad:
    print(line)
if bad:
    sys.exit(1)
print("layers: ok, %d modules, no circle, no shim header" % len(mods))
