#!/bin/sh
# mk/demo-kernel.sh: `make demo`'s second part, tiermalloc tiering with the
# kernel (issue 31). mk/demo.sh runs it as root in the tiered VM, in the same
# boot as the first part:
#   sh mk/demo-kernel.sh TIERQ LIBTIERMALLOC TIERCTL
# bench/tierq (a 256 MiB heap of objects of 64 B to 256 KiB whose zipfian
# popularity is shuffled against their allocation order, so the hot bytes are
# scattered over every page; a thread reads and writes them) runs twice under
# tiermalloc with a 64 MiB top-tier high and TIERMALLOC_NUMA_BALANCING=tiering,
# each time alone in a cgroup of its own that may not swap, swap off: the same
# command both times; only the kernel's two switches differ:
#   1. numa_balancing=0, demotion_enabled=0: tiermalloc alone (its accessed
#      bits choose what stays on node0);
#   2. demotion_enabled=1, and numa_balancing=2 (tiering) from when the heap
#      is built: tiermalloc hands its heap to NUMA balancing within a second,
#      the kernel's hint faults promote the hot pages, and tiermalloc holds
#      tier 0 to its high by asking the cgroup's memory.reclaim for the
#      excess (the kernel's LRU demotes it).
# Each run is stopped at tierq's phase change (half its run), after
# DEMO_SECONDS (16) of samples: the share of the accesses node0 serves and the
# heap's MiB there every 2 s (move_pages), then what tierctl status says of
# the process (who holds tier 0, kernel_demoted), and a conclusion computed
# from the two runs. Where tiermalloc says the kernel's demotion does not
# hold tier 0 (a kernel without memory tiers, or one memory tier for every
# node), that is printed instead of a conclusion.
set -u
tq=$1 lib=$2 tierctl=$3
heap=256 budget=64 secs=${DEMO_SECONDS:-16}
work=/tmp/tiermalloc-demo-kernel
nb=/proc/sys/kernel/numa_balancing dem=/sys/kernel/mm/numa/demotion_enabled
mkdir -p "$work"
echo
echo "demo, part 2: tiermalloc with the kernel's NUMA balancing. bench/tierq, a $heap MiB heap whose hot objects" \
  "(zipfian, shuffled against the allocation order) are scattered over every page, top-tier high ${budget} MiB," \
  "TIERMALLOC_NUMA_BALANCING=tiering, alone in a cgroup with memory.swap.max=0; twice, only the kernel's switches differ:"
if [ ! -w "$nb" ] || [ ! -w "$dem" ]; then
  echo "demo: this kernel has no NUMA balancing or no demotion switch ($nb, $dem): part 2 skipped"
  exit 0
fi
swapoff -a 2>/dev/null || true   # else the kernel's reclaim would page out rather than demote

# run NAME NUMA_BALANCING DEMOTION: tierq under tiermalloc in cgroup
# tiermalloc-demo-NAME until its phase change; tierctl status then; stopped.
# NUMA balancing is switched on once the heap is built and its ranks drawn
# (tiermalloc reads the mode once a second and hands its heap over): the
# kernel's first scans of a new range, which it makes whatever the access,
# then see the program's accesses rather than the heap being filled.
run() {
  name=$1 cg=/sys/fs/cgroup/tiermalloc-demo-$1
  echo 0 > "$nb"
  echo "$3" > "$dem"
  mkdir -p "$cg" && echo 0 > "$cg/memory.swap.max" || { echo "demo: cannot make cgroup $cg"; return 1; }
  : > "$work/$name.out"
  sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' sh "$cg" \
    env LD_PRELOAD="$lib" TIERMALLOC_TOPTIER_HIGH=${budget}M TIERMALLOC_NUMA_BALANCING=tiering TIERMALLOC_VERBOSE=1 \
    "$tq" run --heap $heap --budget $budget --seconds $((2 * secs)) > "$work/$name.out" 2> "$work/$name.err" &
  pid=$!
  i=0   # the heap built, or 60 s
  while ! grep -q '^tierq objects=' "$work/$name.out" && kill -0 $pid 2>/dev/null && [ $i -lt 600 ]; do
    sleep 0.1
    i=$((i + 1))
  done
  echo "$2" > "$nb"
  i=0   # the first sample after the phase change, or 120 s
  while ! grep -q ' after$' "$work/$name.out" && kill -0 $pid 2>/dev/null && [ $i -lt 1200 ]; do
    sleep 0.1
    i=$((i + 1))
  done
  "$tierctl" status $pid > "$work/$name.status" 2>&1
  kill $pid 2>/dev/null
  wait $pid 2>/dev/null
  rmdir "$cg" 2>/dev/null
  echo 0 > "$nb"
  echo 0 > "$dem"
  # One line of samples, one of where they ended, tierctl's word.
  awk -v budget=$budget '
    /^t=/ && !/ after$/ {
      for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
      ts = ts sprintf(" %.0f", v["t"]); sh = sh sprintf(" %.0f", 100 * v["share"]); mib = mib sprintf(" %.0f", v["top_mib"])
      last = sprintf("  at %.0f s: %.1f MiB of the heap on node0 (high %d MiB), serving %.1f %% of the accesses" \
                     " (the hottest %d MiB would serve %.1f %%)", v["t"], v["top_mib"], budget, 100 * v["share"],
                     budget, 100 * v["oracle"])
      res = sprintf("%s %s %s", v["share"], v["top_mib"], v["oracle"]) }
    END {
      if (!res) { print "  tierq printed no sample"; exit }
      print "  node0'"'"'s share of the accesses, %, at" ts " s:" sh "; heap MiB on node0:" mib
      print last
      print res > "/dev/stderr" }' "$work/$name.out" 2> "$work/$name.res"
  if [ ! -s "$work/$name.res" ]; then
    sed 's/^/  /' "$work/$name.err" | grep -v 'jemalloc' | tail -5
    return 1
  fi
  grep -q '^numa balancing' "$work/$name.status" || { sed 's/^/  tierctl status: /' "$work/$name.status" | tail -3; return 0; }
  awk '/^numa balancing/ { sub(/^numa balancing +/, ""); sub(/ policies that may allow it: [^;]*;/, ""); nb = $0 }
       /^0 / && NF >= 12 && !t0 { t0 = 1; t = sprintf("tier 0 resident %s %s, high %s %s", $9, $10, $11, $12) }
       /^(kernel_demoted|kernel_undone|handed_given_back) / { k = k sprintf("; %s %s %s", $1, $2, $3) }
       END { print "  tierctl status: numa balancing " nb "\n  tierctl status: " t k }' "$work/$name.status"
}

echo "1. numa_balancing=0, demotion_enabled=0: tiermalloc alone (its accessed bits choose what stays on node0)"
run alone 0 0
echo "2. demotion_enabled=1, numa_balancing=2 once the heap is built: the kernel's hint faults promote hot pages," \
  "its LRU demotes what tiermalloc asks of the cgroup's memory.reclaim (tier 0's excess over its high)"
run kernel 2 1
if [ ! -s "$work/alone.res" ] || [ ! -s "$work/kernel.res" ]; then
  echo "demo: a run of part 2 failed (above); no conclusion"
  exit 0
fi
if ! grep -q "tier 0 held by the kernel's own demotion" "$work/kernel.status"; then
  why=$(grep -h "one memory tier\|tier 0 held by tiermalloc's moves" "$work/kernel.err" | head -1)
  echo "demo: tiermalloc says the kernel's own demotion did not hold tier 0 here${why:+ (${why#tiermalloc: })}," \
    "so run 2 is not the kernel and tiermalloc together; no conclusion"
  exit 0
fi
read a_share a_mib oracle < "$work/alone.res"
read k_share k_mib k_oracle < "$work/kernel.res"
awk -v a=$a_share -v am=$a_mib -v k=$k_share -v km=$k_mib -v o=$k_oracle -v b=$budget -v s=$secs 'BEGIN {
  verdict = k > a * 1.1 ? sprintf("%.1f times as much as tiermalloc alone", k / a) \
          : k < a * 0.9 ? "less than tiermalloc alone" : "about as much as tiermalloc alone"
  printf "demo: with the kernel, node0 served %.1f %% of the accesses after %d s, %s (%.1f %%), %.0f %% of what" \
         " the hottest %d MiB would; %.1f against %.1f MiB of the heap on node0, for a high of %d MiB\n",
         100 * k, s, verdict, 100 * a, 100 * k / o, b, km, am, b }'
