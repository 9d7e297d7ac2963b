#!/bin/sh
# make demo: runs a real program (CPython on its system malloc, sorting and
# indexing 400k generated records, about 160 MiB of heap in small objects)
# under tiermalloc in a cgroup, and shows the watermarks held:
#   1. memory.high=600M: tiermalloc derives a top-tier high of 600 MiB x the
#      top tier's share of the memory (512 MiB of 1536 in the VM, so about
#      200 MiB), and the whole heap fits on the top tier;
#   2. the program lowers its own cgroup's memory.high to 300M (a top-tier
#      high of about 100 MiB): tiermalloc's reclaim thread demotes the
#      coldest chunks to the CXL node within a second or two, and, with
#      TIERMALLOC_TIER1_HIGH=24M, pages the coldest of those out to zram;
#      meanwhile a thread reads the first 10,000 records made (the oldest
#      memory: what the commit age would take first), and the program then
#      asks the kernel (move_pages) where they are, and where the others are;
#   3. the program checks its records (same digest) and exits.
# It prints the derived budgets and why, the kernel's count of the process's
# memory per node before and after (numa_maps), what tierctl sees from
# outside while the program runs (tierctl ps, and a timeline recorded with
# tierctl record, drawn in characters with tierctl plot), and tiermalloc's
# table at exit with the bytes demoted and paged out. On a host with one NUMA node the
# program runs inside the tiered VM (tests/vm/run, 2tier, 256 MiB of zram);
# on a host with several nodes it runs here, with a 16 MiB
# TIERMALLOC_TOPTIER_MAX instead of a cgroup (which needs root and cgroup v2).
# Part 2, in the same boot of the VM only (it switches the kernel's NUMA
# balancing and demotion, which are not the demo's to change on a host):
# mk/demo-kernel.sh, bench/tierq's scattered hot set under a 64 MiB top-tier
# high, swap off, twice: tiermalloc alone, then with the kernel's NUMA
# balancing (tiering mode) promoting and its demotion holding the high; the
# share of the accesses node0 serves in each, and tierctl status's word on
# who holds tier 0.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
lib=$top/build/libtiermalloc.so
work=${TMPDIR:-/tmp}/tiermalloc-demo
mkdir -p "$work"
py=$(command -v /usr/bin/python3 || command -v python3)
cat > "$work/demo.py" <<'PY'
import ctypes, hashlib, os, random, signal, subprocess, threading, time
random.seed(42)
rows = [(random.randrange(10**8), "row-%d" % i, [i] * 4) for i in range(400000)]
# The hot records: the first 10,000 made, so the oldest memory of the heap
# (what the commit age would call coldest), read all through the lowering.
hot, cold = rows[:10000], rows[10000::9]
index = {name: key for key, name, _ in rows}
rows.sort()

def digest():
    h = hashlib.sha256()
    for key, name, l in rows:
        h.update(b"%d %s %d;" % (key, name.encode(), sum(l)))
    return h.hexdigest()[:16]

def per_node():
    nodes = {}
    for line in open("/proc/self/numa_maps"):
        f = line.split()
        kb = 4
        for x in f:
            if x.startswith("kernelpagesize_kB="):
                kb = int(x.split("=")[1])
        for x in f:
            if x[0] == "N" and "=" in x:
                n, v = x[1:].split("=")
                nodes[int(n)] = nodes.get(int(n), 0) + int(v) * kb * 1024
    return ", ".join("node%d %.1f MiB" % (n, nodes[n] / 2**20) for n in sorted(nodes))

def swapped():
    for line in open("/proc/self/status"):
        if line.startswith("VmSwap:"):
            return line.split(None, 1)[1].strip()
    return "?"

numa = ctypes.CDLL("libnuma.so.1")
numa.move_pages.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.POINTER(ctypes.c_void_p),
                            ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int), ctypes.c_int]
def where(records, top):
    """Share of the records' objects (tuple, name, list) whose page is on
    node `top`, asked of the kernel with move_pages(2), 4000 records at most."""
    objs = [id(o) for r in records[::max(1, len(records) // 4000)] for o in (r, r[1], r[2])]
    n = len(objs)
    pages = (ctypes.c_void_p * n)(*[a & ~4095 for a in objs])
    status = (ctypes.c_int * n)()
    if numa.move_pages(0, n, pages, None, status, 0) != 0:
        return "move_pages failed"
    on = sum(1 for s in status if s == top)
    out = sum(1 for s in status if s < 0)
    return "%.0f %% on node%d%s" % (100.0 * on / n, top, ", %.1f %% not resident" % (100.0 * out / n) if out else "")

reading = True
def reader():
    x = 0
    while reading:
        for key, name, l in hot:
            x += key + l[0] + len(name)
threading.Thread(target=reader, daemon=True).start()

before = digest()
print("sorted %d records, indexed %d names, digest %s" % (len(rows), len(index), before))
print("the kernel (numa_maps) with the records live: " + per_node())
cg = os.environ.get("DEMO_CGROUP")
tierctl = os.environ.get("DEMO_TIERCTL")
# tierctl runs without the library (it only reads this process's live record).
plain = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("TIERMALLOC_")}
def tierctl_run(*args):
    return subprocess.run([tierctl] + list(args), env=plain, capture_output=True, text=True).stdout
rec = None
if cg and tierctl:
    csv = "/tmp/tiermalloc-demo-run.csv"
    rec = subprocess.Popen([tierctl, "record", str(os.getpid()), "-i", "100ms", "-o", csv], env=plain,
                           stderr=subprocess.DEVNULL)
    time.sleep(1)
if cg:
    open(cg + "/memory.high", "w").write("300M\n")
    print("lowered %s/memory.high to 300M; waiting 3 s" % cg)
    time.sleep(3)
    print("the kernel (numa_maps) 3 s later: %s; swapped out (VmSwap): %s" % (per_node(), swapped()))
if rec:
    print("tierctl top, from outside, at that moment (tier 0's pages now against its high; the tier below):")
    print(tierctl_run("top", "-n", "1"), end="")
    rec.send_signal(signal.SIGINT)
    rec.wait()
    print("tierctl record, then tierctl plot: this process's MiB on each tier every 100 ms while its cgroup's "
          "memory.high went from 600M to 300M at about 1 s: tier 0's pages (*) fall under its new high (#) "
          "within a few seconds (the VM copies pages at 30-45 MiB/s), demoted to tier 1, whose own high of "
          "24 MiB sends the excess to swap:")
    print(tierctl_run("plot", csv, "-o", "-"), end="")
    # The host turns this into a PNG (the guest's files do not outlive it).
    print("CSV-BEGIN")
    print(open(csv).read(), end="")
    print("CSV-END")
reading = False
print("where the records are now (move_pages): the hot ones (the first 10,000 made, read all the "
      "while): %s; the other 390,000: %s" % (where(hot, 0), where(cold, 0)))
after = digest()
print("records checked after reclaim: digest %s, %s" % (after, "intact" if after == before else "CHANGED"))
PY
run='PYTHONMALLOC=malloc LD_PRELOAD='"$lib"' TIERMALLOC_STATS=text '"$py"' '"$work"'/demo.py'
# In the guest: a cgroup of its own with memory.max=300M, the program in it.
in_cgroup='cg=/sys/fs/cgroup/tiermalloc-demo; mkdir -p $cg && echo 600M > $cg/memory.high &&
echo "demo: cgroup $cg, memory.high=600M; lower tier high TIERMALLOC_TIER1_HIGH=24M (then pageout to zram)" &&
(echo 0 > $cg/cgroup.procs && DEMO_CGROUP=$cg DEMO_TIERCTL='"$top"'/build/tierctl TIERMALLOC_TIER1_HIGH=24M TIERMALLOC_VERBOSE=1 exec sh -c "$0") 2>&1 |
grep -v "jemalloc:\|ranges"
if [ -x "$1" ]; then sh "$2/mk/demo-kernel.sh" "$1" "$2/build/libtiermalloc.so" "$2/build/tierctl"
else echo "demo: part 2 skipped: $1 missing (make demo builds it)"; fi'
nodes=$(cat /sys/devices/system/node/online 2>/dev/null || echo 0)
if [ "$nodes" != 0 ]; then
  echo "demo: this host has NUMA nodes $nodes; running here, top tier limited to 16 MiB (TIERMALLOC_TOPTIER_MAX=16M)"
  TIERMALLOC_TOPTIER_MAX=16M sh -c "$run"
  echo "demo: part 2 (tiermalloc with the kernel's NUMA balancing and demotion) runs in the tiered VM only:" \
    "it switches kernel.numa_balancing and demotion_enabled, this host's own; skipped"
else
  echo "demo: this host has one NUMA node; running in the tiered VM (node0: DRAM with the CPUs, node1: CPU-less CXL-like)"
  "$top/tests/vm/run" --topology 2tier --timeout 420 -- sh -c "$in_cgroup" "$run" "$top/build/bench/tierq" "$top" |
    tee "$work/out.txt" |
    sed '/^CSV-BEGIN$/,/^CSV-END$/d'
  sed -n '/^CSV-BEGIN$/,/^CSV-END$/p' "$work/out.txt" | sed '1d;$d' > "$work/run.csv"
  if [ -s "$work/run.csv" ] && "$top/build/tierctl" plot "$work/run.csv" -o "$work/run.png"; then
    echo "demo: part 1's timeline (CPython) as a PNG: $work/run.png (data: $work/run.csv)"
  fi
fi
