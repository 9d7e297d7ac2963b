#!/bin/sh
# make demo: runs a real program (CPython on its system malloc, sorting and
# indexing 400k generated records, about 160 MiB of heap in small objects)
# under tiermalloc in a cgroup with memory.max=300M, and prints how
# tiermalloc derived the top-tier budget from it (300 MiB x the top tier's
# share of the memory: 512 MiB of 1536 in the VM, so about 100 MiB), the
# kernel's own count of the process's memory per node while its records are
# live (numa_maps), and tiermalloc's per-tier table at exit. On a host with one NUMA node the program runs
# inside the tiered VM (tests/vm/run, 2tier), so the table shows two real
# tiers; on a host with several nodes it runs here, with a 16 MiB
# TIERMALLOC_TOPTIER_MAX instead of a cgroup (which needs root and cgroup v2).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
lib=$top/build/libtiermalloc.so
work=${TMPDIR:-/tmp}/tiermalloc-demo
mkdir -p "$work"
py=$(command -v /usr/bin/python3 || command -v python3)
cat > "$work/demo.py" <<'PY'
import random, hashlib
random.seed(42)
rows = [(random.randrange(10**8), "row-%d" % i, [i] * 4) for i in range(400000)]
index = {name: key for key, name, _ in rows}
rows.sort()
digest = hashlib.sha256("".join(r[1] for r in rows[:1000]).encode()).hexdigest()[:16]
print("sorted %d records, indexed %d names, digest %s" % (len(rows), len(index), digest))
# Where the kernel put this process's memory now, from its own numa_maps.
per_node = {}
for line in open("/proc/self/numa_maps"):
    f = line.split()
    kb = 4
    for x in f:
        if x.startswith("kernelpagesize_kB="):
            kb = int(x.split("=")[1])
    for x in f:
        if x[0] == "N" and "=" in x:
            n, v = x[1:].split("=")
            per_node[int(n)] = per_node.get(int(n), 0) + int(v) * kb * 1024
print("the kernel (numa_maps) with the records live: " +
      ", ".join("node%d %.1f MiB" % (n, per_node[n] / 2**20) for n in sorted(per_node)))
PY
run='PYTHONMALLOC=malloc LD_PRELOAD='"$lib"' TIERMALLOC_STATS=text '"$py"' '"$work"'/demo.py'
# In the guest: a cgroup of its own with memory.max=300M, the program in it.
in_cgroup='cg=/sys/fs/cgroup/tiermalloc-demo; mkdir -p $cg && echo 300M > $cg/memory.max &&
echo "demo: cgroup $cg, memory.max=300M" &&
(echo 0 > $cg/cgroup.procs && TIERMALLOC_VERBOSE=1 exec sh -c "$0") 2>&1 | grep -v "jemalloc:\|ranges"'
nodes=$(cat /sys/devices/system/node/online 2>/dev/null || echo 0)
if [ "$nodes" != 0 ]; then
  echo "demo: this host has NUMA nodes $nodes; running here, top tier limited to 16 MiB (TIERMALLOC_TOPTIER_MAX=16M)"
  TIERMALLOC_TOPTIER_MAX=16M sh -c "$run"
else
  echo "demo: this host has one NUMA node; running in the tiered VM (node0: DRAM with the CPUs, node1: CPU-less CXL-like)"
  "$top/tests/vm/run" --topology 2tier -- sh -c "$in_cgroup" "$run"
fi
