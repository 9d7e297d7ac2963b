#!/bin/sh
# make demo: runs a real program (CPython on its system malloc, sorting and
# indexing 400k generated records, about 100 MiB of heap in small objects)
# under tiermalloc with a 16 MiB top-tier budget, and prints tiermalloc's
# per-tier table at exit: 16 MiB of the heap on tier 0, the rest on tier 1. On a host with one NUMA node the
# program runs inside the tiered VM (tests/vm/run, 2tier), so the table shows
# two real tiers; on a host with several nodes it runs here.
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
PY
run='PYTHONMALLOC=malloc LD_PRELOAD='"$lib"' TIERMALLOC_TOPTIER_MAX=16M TIERMALLOC_STATS=text '"$py"' '"$work"'/demo.py'
nodes=$(cat /sys/devices/system/node/online 2>/dev/null || echo 0)
echo "demo: python3 under tiermalloc, top tier limited to 16 MiB (TIERMALLOC_TOPTIER_MAX=16M)"
if [ "$nodes" != 0 ]; then
  echo "demo: this host has NUMA nodes $nodes; running here"
  sh -c "$run"
else
  echo "demo: this host has one NUMA node; running in the tiered VM (node0: DRAM with the CPUs, node1: CPU-less CXL-like)"
  "$top/tests/vm/run" --topology 2tier -- sh -c "$run"
fi
