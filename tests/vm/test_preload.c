/* Real programs under LD_PRELOAD=libtiermalloc.so in the guest: python3
 * (PYTHONMALLOC=malloc, so every object comes from malloc) and sqlite3.
 * Their heap is on the top tier by default, and mostly on tier 1 with a
 * 16 MiB top-tier budget; checked with tiermalloc's exit stats (JSON, resident
 * measured from numa_maps) and, for python, with the process's own
 * /proc/self/numa_maps per node. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vmtest.h"

#define PYTHON "/usr/bin/python3"
#define SQLITE "/usr/bin/sqlite3"

/* 64 x 1 MiB of varied bytes kept alive, then this process's bytes per node
 * from numa_maps, as "N0=<bytes> N1=<bytes> ...". */
static const char py_script[] =
  "pat = bytes(range(256)) * 4096\n"
  "keep = []\n"
  "for i in range(64):\n"
  "    b = bytearray(pat)\n"
  "    b[0:8] = i.to_bytes(8, 'little')\n"
  "    keep.append(b)\n"
  "tot = {}\n"
  "for line in open('/proc/self/numa_maps'):\n"
  "    f = line.split()\n"
  "    kb = 4\n"
  "    for x in f:\n"
  "        if x.startswith('kernelpagesize_kB='):\n"
  "            kb = int(x.split('=')[1])\n"
  "    for x in f:\n"
  "        if x[0] == 'N' and '=' in x:\n"
  "            n, v = x[1:].split('=')\n"
  "            tot[int(n)] = tot.get(int(n), 0) + int(v) * kb * 1024\n"
  "print(' '.join('N%d=%d' % (n, tot[n]) for n in sorted(tot)))\n";

typedef struct tier_json_s {
  long long used, resident;
} tier_json_t;

/* Reads TIERMALLOC_STATS=json output from path into per-tier values. */
static int read_stats_json(const char *path, tier_json_t *tiers, int ntiers)
{
  char buf[8192];
  if (vm_read_file(path, buf, sizeof buf) != 0) return -1;
  for (int t = 0; t < ntiers; t++) {
    char key[32];
    snprintf(key, sizeof key, "{\"tier\":%d,", t);
    const char *p = strstr(buf, key);
    if (!p) return -1;
    tiers[t].used = vm_json_num(p, "used_bytes");
    tiers[t].resident = vm_json_num(p, "resident_bytes");
  }
  return 0;
}

static unsigned long long node_bytes(const char *out, int node)
{
  char key[16];
  snprintf(key, sizeof key, "N%d=", node);
  const char *p = strstr(out, key);
  return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

/* Runs argv preloaded, with the stats in a file; budget NULL: no budget. */
static void run_preloaded(char *const argv[], const char *budget, const char *tag, char *out, size_t size,
                          tier_json_t *tiers, int ntiers)
{
  char preload[4200], stats_file[128], budget_env[64];
  snprintf(preload, sizeof preload, "LD_PRELOAD=%s", vm_libtiermalloc());
  snprintf(stats_file, sizeof stats_file, "TIERMALLOC_STATS_FILE=/tmp/vmtest-%s-%d.json", tag, (int)getpid());
  snprintf(budget_env, sizeof budget_env, "TIERMALLOC_TOPTIER_MAX=%s", budget ? budget : "100%");
  /* The stats are printed at exit, after the program freed its heap. A heap
   * past 64 MiB starts jemalloc's background thread, which begins giving
   * freed pages back at once (gradually over the decay time): a long decay
   * keeps the freed heap where it was placed until the stats see it. */
  char *env[] = { preload, "PYTHONMALLOC=malloc", "TIERMALLOC_STATS=json", stats_file, budget_env,
                  "TIERMALLOC_DIRTY_DECAY_MS=600000", NULL };
  const char *path = strchr(stats_file, '=') + 1;
  unlink(path);
  int rc = vm_run(argv, env, out, size);
  cr_assert_eq(rc, 0, "%s under tiermalloc exited %d:\n%s", argv[0], rc, out);
  cr_assert_eq(read_stats_json(path, tiers, ntiers), 0, "%s: no stats in %s", argv[0], path);
  unlink(path);
}

/* Heavy programs: not beside the burst tests. */
TestSuite(preload, .init = vm_quiet_shared);

Test(preload, python_heap_on_the_top_tier)
{
  const vm_topology_t *topo = vm_topology();
  cr_assert_eq(access(PYTHON, X_OK), 0, PYTHON " is needed (make deps)");
  char *argv[] = { PYTHON, "-c", (char *)py_script, NULL };
  char out[512];
  tier_json_t tiers[TIER_MAX_TIERS];
  run_preloaded(argv, NULL, "py", out, sizeof out, tiers, topo->ntiers);
  cr_expect_geq(tiers[0].resident, 64 * VM_MIB, "%s: python's tier 0 resident %lld", topo->name,
                tiers[0].resident);
  for (int t = 1; t < topo->ntiers; t++)
    cr_expect_lt(tiers[t].resident, 2 * VM_MIB, "%s: tier %d resident %lld without a budget", topo->name, t,
                 tiers[t].resident);
  unsigned long long top = node_bytes(out, vm_tier_node(topo, 0));
  cr_expect_geq(top, 64 * VM_MIB, "%s: python has %llu bytes on node %d (tier 0); numa_maps: %s", topo->name,
                top, vm_tier_node(topo, 0), out);
}

/* Runs argv (python3 -c py_script, maybe behind a wrapper) with a 16 MiB
 * top-tier budget and checks that most of the 64 MiB heap is on tier 1;
 * `limit` names the run's extra constraint in messages ("" for none). */
static void python_below_16MiB(char *const argv[], const char *tag, const char *limit)
{
  const vm_topology_t *topo = vm_topology();
  cr_assert_eq(access(PYTHON, X_OK), 0, PYTHON " is needed (make deps)");
  char out[512];
  tier_json_t tiers[TIER_MAX_TIERS];
  run_preloaded(argv, "16M", tag, out, sizeof out, tiers, topo->ntiers);
  cr_expect_leq(tiers[0].used, 16 * VM_MIB, "%s: tier 0 holds %lld, over the budget", topo->name,
                tiers[0].used);
  cr_expect_leq(tiers[0].resident, VM_BUDGET_16M_TIER0, "%s: tier 0 resident %lld", topo->name,
                tiers[0].resident);
  /* 64 MiB heap, 16 MiB budget: at least 48 MiB would not fit on tier 0,
   * minus what python itself keeps there; "most of it" is 40 MiB. */
  cr_expect_geq(tiers[1].resident, 40 * VM_MIB, "%s: tier 1 resident %lld (64 MiB heap, 16 MiB budget%s)",
                topo->name, tiers[1].resident, limit);
  unsigned long long low = node_bytes(out, vm_tier_node(topo, 1));
  cr_expect_geq(low, 40 * VM_MIB, "%s: python has %llu bytes on node %d (tier 1); numa_maps: %s", topo->name,
                low, vm_tier_node(topo, 1), out);
}

Test(preload, python_heap_below_a_16MiB_top_tier)
{
  char *argv[] = { PYTHON, "-c", (char *)py_script, NULL };
  python_below_16MiB(argv, "py16", "");
}

Test(preload, sqlite_heap_below_a_16MiB_top_tier)
{
  const vm_topology_t *topo = vm_topology();
  cr_assert_eq(access(SQLITE, X_OK), 0, SQLITE " is needed (make deps)");
  /* 40 MB of blobs in an in-memory database: its pages are malloc'd. */
  char *argv[] = { SQLITE, ":memory:",
                   "PRAGMA cache_size=-200000; CREATE TABLE t(x BLOB);"
                   "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<40000)"
                   " INSERT INTO t SELECT randomblob(1000) FROM c;"
                   "SELECT count(*), sum(length(x)) FROM t;",
                   NULL };
  char out[512];
  tier_json_t tiers[TIER_MAX_TIERS];
  run_preloaded(argv, "16M", "sqlite", out, sizeof out, tiers, topo->ntiers);
  cr_expect_str_eq(out, "40000|40000000\n");
  cr_expect_leq(tiers[0].used, 16 * VM_MIB, "%s: tier 0 holds %lld, over the budget", topo->name,
                tiers[0].used);
  cr_expect_leq(tiers[0].resident, VM_BUDGET_16M_TIER0, "%s: tier 0 resident %lld", topo->name,
                tiers[0].resident);
  cr_expect_geq(tiers[1].resident, 24 * VM_MIB, "%s: sqlite's tier 1 resident %lld", topo->name,
                tiers[1].resident);
}

/* Under an address-space limit (ulimit -v; here prlimit --as), which the
 * ranges' reservation counts against, they shrink to fit (unit test:
 * hooks/ranges_take_at_most_half_of_an_address_space_limit) and the heap is
 * still placed, below the budget as without a limit. */
Test(preload, python_heap_placed_under_an_address_space_limit)
{
  cr_assert_eq(access("/usr/bin/prlimit", X_OK), 0, "/usr/bin/prlimit (util-linux) is needed");
  char *argv[] = { "/usr/bin/prlimit", "--as=2000000000", PYTHON, "-c", (char *)py_script, NULL };
  python_below_16MiB(argv, "py-as", ", 2 GB limit");
}
