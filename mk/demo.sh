#!/bin/sh
# make demo: runs a real program (GNU sort of a generated 24 MiB file, with a
# 64 MiB sort buffer) under tiermalloc with a 16 MiB top-tier budget, and
# prints tiermalloc's per-tier table at exit. On a host with one NUMA node the
# program runs inside the tiered VM (tests/vm/run, 2tier), so the table shows
# two real tiers; on a host with several nodes it runs here.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
lib=$top/build/libtiermalloc.so
work=${TMPDIR:-/tmp}/tiermalloc-demo
mkdir -p "$work"
# Varied lines, generated the same way every time.
awk 'BEGIN { srand(42); for (i = 0; i < 600000; i++) printf "%08d %s-%d\n", int(rand() * 1e8), "row", i }' > "$work/input.txt"
run='LD_PRELOAD='"$lib"' TIERMALLOC_TOPTIER_MAX=16M TIERMALLOC_STATS=text sort -S 64M -o '"$work"'/sorted.txt '"$work"'/input.txt && echo "sorted $(wc -l < '"$work"'/sorted.txt) lines; first: $(head -c 17 '"$work"'/sorted.txt)"'
nodes=$(cat /sys/devices/system/node/online 2>/dev/null || echo 0)
echo "demo: sort under tiermalloc, top tier limited to 16 MiB (TIERMALLOC_TOPTIER_MAX=16M)"
if [ "$nodes" != 0 ]; then
  echo "demo: this host has NUMA nodes $nodes; running here"
  sh -c "$run"
else
  echo "demo: this host has one NUMA node; running in the tiered VM (node0: DRAM with the CPUs, node1: CPU-less CXL-like)"
  "$top/tests/vm/run" --topology 2tier -- sh -c "$run"
fi
