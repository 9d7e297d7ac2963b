/* Budgets from the cgroup, against the kernel. Each test makes its own
 * cgroup(s) under /sys/fs/cgroup (vmtest-budget-<pid>), runs a child of this
 * binary inside (it joins before exec, so tiermalloc reads that cgroup from
 * its first malloc), and removes them. What tiermalloc derives is checked
 * against the node capacities (MemTotal of each tier's node), and where the
 * memory went against move_pages, the child's /proc/self/numa_maps and the
 * cgroup's memory.numa_stat. The children run with TIERMALLOC_VERBOSE=1 and
 * stderr captured, so a failure message shows tiermalloc's own explanation.
 *
 * Topologies: the 2-tier claims hold wherever tiermalloc makes two or more
 * tiers: 2tier, 3tier, and flat (one kernel tier, but tiermalloc puts the CPU
 * node above the CPU-less one, README). Only
 * each_tier_gets_its_own_share_in_3tier needs three and skips elsewhere.
 * make test-vm runs only the wide/ suite in wide. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "vmtest.h"

#define OUT_SIZE (64 * 1024)
#define HEAP_TIMEOUT_MS (180 * 1000)   /* 200 MiB touched under TCG, with another test */

static vm_proc_t child = { .in = -1, .out = -1 };
static char cg_parent[128], cg_leaf[128];

/* After the test, failed or not: the child killed, the cgroups removed. */
static void budget_fini(void)
{
  vm_proc_kill(&child);
  if (cg_leaf[0]) vm_cgroup_remove(cg_leaf);
  if (cg_parent[0]) vm_cgroup_remove(cg_parent);
  cg_leaf[0] = cg_parent[0] = 0;
}

static void remove_cgroups(void)
{
  if (cg_leaf[0]) cr_expect_eq(vm_cgroup_remove(cg_leaf), 0, "rmdir %s", cg_leaf);
  if (cg_parent[0]) cr_expect_eq(vm_cgroup_remove(cg_parent), 0, "rmdir %s", cg_parent);
  cg_leaf[0] = cg_parent[0] = 0;
}

/* /sys/fs/cgroup/vmtest-budget-<pid> into cg_parent; its name into name. */
static void make_cgroup(char *name, size_t size)
{
  snprintf(name, size, "vmtest-budget-%d", (int)getpid());
  vm_cgroup_make(cg_parent, sizeof cg_parent, name);
}

static int within_page(uint64_t a, uint64_t b)
{
  return (a > b ? a - b : b - a) <= 4096;
}

#define MIB(x) ((double)(x) / VM_MIB)

/* ---- the child's report --------------------------------------------------- */

/* The line of text that starts with prefix (at a line start), or NULL. */
static const char *line_of(const char *text, const char *prefix)
{
  size_t n = strlen(prefix);
  for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
    if (strncmp(l, prefix, n) == 0) return l;
  return NULL;
}

/* The number after " key=" in the line; fails the test when absent. */
static unsigned long long kv(const char *line, const char *key, const char *out)
{
  char pat[48];
  snprintf(pat, sizeof pat, " %s=", key);
  const char *eol = strchr(line, '\n');
  const char *p = strstr(line, pat);
  cr_assert(p && (!eol || p < eol), "no %s= in the child's line:\n%.*s\nwhole output:\n%s", key,
            eol ? (int)(eol - line) : (int)strlen(line), line, out);
  return strtoull(p + strlen(pat), NULL, 10);
}

/* The " N<i>=<v>" figures of a line, added into v[]. */
static void node_figures(const char *line, unsigned long long v[VM_MAX_NODES])
{
  const char *eol = strchr(line, '\n');
  for (const char *p = strstr(line, " N"); p && (!eol || p < eol); p = strstr(p + 1, " N")) {
    int n;
    unsigned long long x;
    if (sscanf(p, " N%d=%llu", &n, &x) == 2 && n >= 0 && n < VM_MAX_NODES) v[n] += x;
  }
}

typedef struct tier_line_s {
  unsigned long long capacity, used, resident, min, low, high, max, source, parts, span;
  unsigned long long pages[VM_MAX_NODES];   /* of the parts tier_of() puts on the tier */
} tier_line_t;

typedef struct heap_run_s {
  char out[OUT_SIZE];
  int ntiers;
  unsigned long long blocks, untiered, absent;
  char cgroup[256];
  tier_line_t tier[TIER_MAX_TIERS];
  unsigned long long maps[VM_MAX_NODES];    /* the child's tiered numa_maps bytes per node */
  uint64_t anon[VM_MAX_NODES];              /* the cgroup's memory.numa_stat anon */
  int have_anon;
} heap_run_t;

static void parse_heap(heap_run_t *r)
{
  const char *out = r->out;
  cr_assert(strstr(out, "error") == NULL, "%s", out);
  const char *l = line_of(out, "count=");
  cr_assert_not_null(l, "no report from the child:\n%s", out);
  cr_assert_eq(sscanf(l, "count=%d", &r->ntiers), 1, "%s", out);
  r->blocks = kv(l, "blocks", out);
  r->untiered = kv(l, "untiered", out);
  r->absent = kv(l, "absent", out);
  const char *cg = strstr(l, " cgroup=");
  const char *eol = strchr(l, '\n');
  if (cg && eol && cg < eol) snprintf(r->cgroup, sizeof r->cgroup, "%.*s", (int)(eol - cg - 8), cg + 8);
  for (int t = 0; t < r->ntiers && t < TIER_MAX_TIERS; t++) {
    char key[32];
    snprintf(key, sizeof key, "tier=%d ", t);
    const char *tl = line_of(out, key);
    cr_assert_not_null(tl, "no line for tier %d:\n%s", t, out);
    tier_line_t *x = &r->tier[t];
    x->capacity = kv(tl, "capacity", out);
    x->used = kv(tl, "used", out);
    x->resident = kv(tl, "resident", out);
    x->min = kv(tl, "min", out);
    x->low = kv(tl, "low", out);
    x->high = kv(tl, "high", out);
    x->max = kv(tl, "max", out);
    x->source = kv(tl, "source", out);
    x->parts = kv(tl, "parts", out);
    x->span = kv(tl, "span", out);
    node_figures(tl, x->pages);
  }
  const char *ml = line_of(out, "maps");
  cr_assert_not_null(ml, "%s", out);
  node_figures(ml, r->maps);
}

/* Runs the heap child (heap_mib in blocks of block_mib) with env, in cgroup
 * cg (NULL: this process's); with cg, reads its memory.numa_stat while the
 * child holds the heap. */
static void run_heap(heap_run_t *r, const char *cg, unsigned heap_mib, unsigned block_mib,
                     char *const extra[])
{
  char heap[48], block[48];
  snprintf(heap, sizeof heap, "VMTEST_HEAP_MIB=%u", heap_mib);
  snprintf(block, sizeof block, "VMTEST_BLOCK_MIB=%u", block_mib);
  char *env[16] = { "VMTEST_CHILD=heap", "VMTEST_HOLD=1", "TIERMALLOC_VERBOSE=1", heap, block };
  int k = 5;
  for (int i = 0; extra && extra[i] && k < 15; i++) env[k++] = extra[i];
  env[k] = NULL;
  char *argv[] = { (char *)vm_self(), NULL };
  /* The reclaim lock shared while the child lives: heaps of 128-200 MiB,
   * touched, measured and reclaimed, run beside each other, never beside
   * the timed tests that hold it alone (a burst past max took 3.1-3.3 s
   * against 3 beside them). */
  int lock_fd = vm_flock(VM_RECLAIM_LOCK, LOCK_SH);
  cr_assert_geq(lock_fd, 0);
  vm_spawn(&child, argv, env, cg, VM_SPAWN_STDERR);
  const char *ready = vm_proc_expect(&child, "ready", HEAP_TIMEOUT_MS);
  /* The kernel folds each CPU's counts into the cgroup's at least every 2 s,
   * and at a read only past a threshold: read at once, numa_stat had 5 MiB
   * of the heap's node0 pages still to come (CI, 3tier). */
  if (ready && cg) {
    usleep(2100 * 1000);
    memset(r->anon, 0, sizeof r->anon);
    r->have_anon = vm_cgroup_numa_anon(cg, r->anon) == 0;
  }
  int rc = vm_proc_wait(&child);
  close(lock_fd);
  snprintf(r->out, sizeof r->out, "%s", child.buf);
  vm_proc_kill(&child);
  cr_assert_not_null(ready, "the child did not report (exit %d):\n%s", rc, r->out);
  cr_assert_eq(rc, 0, "child exited %d:\n%s", rc, r->out);
  parse_heap(r);
}

/* Lower of high and max: what placement fills a tier to. */
static unsigned long long place_limit(const tier_line_t *x)
{
  return x->high < x->max ? x->high : x->max;
}

/* Every part is on the node of the tier tier_of() gives it; every tier but
 * the last holds at most its placement limit, and tier 0 all of it but two
 * chunks; the kernel's numa_maps and numa_stat agree. */
static void check_placement(const vm_topology_t *topo, const heap_run_t *r, unsigned heap_mib)
{
  const char *out = r->out;
  cr_expect_eq(r->untiered, 0, "%llu blocks outside every tier:\n%s", r->untiered, out);
  cr_expect_eq(r->absent, 0, "%llu touched pages not present:\n%s", r->absent, out);
  unsigned long long all = 0;
  for (int t = 0; t < r->ntiers; t++) {
    const tier_line_t *x = &r->tier[t];
    int node = vm_tier_node(topo, t);
    unsigned long long on = x->pages[node], total = 0;
    for (int n = 0; n < VM_MAX_NODES; n++) total += x->pages[n];
    all += total;
    cr_expect_eq(on, total, "%s tier %d: %llu of the %llu pages of its parts are on node %d:\n%s",
                 topo->name, t, on, total, node, out);
    if (t + 1 < r->ntiers) {
      unsigned long long lim = place_limit(x);
      cr_expect_leq(x->used, lim, "%s tier %d: used %.1f MiB, over its limit %.1f MiB:\n%s", topo->name,
                    t, MIB(x->used), MIB(lim), out);
      /* Tiermalloc's tiered pages on the node: the budget and at most the
       * two start-up base blocks (VM_BUDGET_16M_TIER0). */
      cr_expect_leq(r->maps[node], lim + 4 * VM_MIB,
                    "%s tier %d: numa_maps shows %.1f MiB of tiered pages on node %d, limit %.1f MiB:\n%s",
                    topo->name, t, MIB(r->maps[node]), node, MIB(lim), out);
    }
  }
  /* Filled to within three chunks (VM_FILL_SLACK); past a high, down to the
   * hysteresis below it (5 %). */
  unsigned long long lim0 = place_limit(&r->tier[0]);
  unsigned long long hyst = r->tier[0].high < r->tier[0].max ? lim0 / 20 : 0;
  cr_expect_geq(r->tier[0].used + VM_FILL_SLACK + hyst, lim0,
                "%s: tier 0 used %.1f MiB, more than three chunks and %.1f MiB under %.1f MiB:\n%s", topo->name,
                MIB(r->tier[0].used), MIB(hyst), MIB(lim0), out);
  /* Every page of the heap was counted, on some tier. */
  cr_expect_geq(all * 4096, (unsigned long long)heap_mib * VM_MIB, "%s: %llu pages counted for %u MiB:\n%s",
                topo->name, all, heap_mib, out);
  if (!r->have_anon) return;
  /* The cgroup's anon per node: the heap's pages of each tier are there; on
   * tier 0's node, no more than its limit and what is not tiered (stacks,
   * libraries' data, jemalloc's start-up memory: 16 MiB is ample). */
  char anon[256] = "";
  for (int n = 0; n < topo->nnodes; n++)
    snprintf(anon + strlen(anon), sizeof anon - strlen(anon), " N%d=%.1fMiB", n, MIB(r->anon[n]));
  for (int t = 0; t < r->ntiers; t++) {
    int node = vm_tier_node(topo, t);
    uint64_t heap_there = r->tier[t].pages[node] * 4096;
    cr_expect_geq(r->anon[node] + VM_MIB, heap_there,
                  "%s tier %d: memory.numa_stat anon on node %d is %.1f MiB, the heap has %.1f MiB there "
                  "(anon%s):\n%s", topo->name, t, node, MIB(r->anon[node]), MIB(heap_there), anon, out);
  }
  int n0 = vm_tier_node(topo, 0);
  cr_expect_leq(r->anon[n0], lim0 + 16 * VM_MIB,
                "%s: memory.numa_stat anon on tier 0's node %d is %.1f MiB, its limit %.1f MiB (anon%s):\n%s",
                topo->name, n0, MIB(r->anon[n0]), MIB(lim0), anon, out);
}

/* The capacities the child reports are the nodes' MemTotal. */
static void check_caps(const vm_caps_t *c, const heap_run_t *r)
{
  cr_assert_eq(r->ntiers, c->ntiers, "%s", r->out);
  for (int t = 0; t < c->ntiers; t++)
    cr_expect_eq(r->tier[t].capacity, c->cap[t], "tier %d capacity %llu, MemTotal of its nodes %llu:\n%s", t,
                 r->tier[t].capacity, (unsigned long long)c->cap[t], r->out);
}

/* ---- the tests ------------------------------------------------------------ */

Test(budget, cgroup_max_alone_gives_the_scaled_top_tier_max, .fini = budget_fini)
{
  const vm_topology_t *topo = vm_topology();
  vm_caps_t c = vm_caps(topo);
  char name[64], want_cg[80];
  make_cgroup(name, sizeof name);
  vm_cgroup_set(cg_parent, "memory.max", "300M");
  static heap_run_t r;
  run_heap(&r, cg_parent, 200, 1, NULL);
  snprintf(want_cg, sizeof want_cg, "/%s", name);
  cr_expect_str_eq(r.cgroup, want_cg, "%s", r.out);
  check_caps(&c, &r);
  for (int t = 0; t < r.ntiers; t++) {
    uint64_t want = vm_scaled(&c, 300 * VM_MIB, t);
    cr_expect(within_page(r.tier[t].max, want), "%s tier %d: max %llu, want 300 MiB x %llu / %llu = %llu:\n%s",
              topo->name, t, r.tier[t].max, (unsigned long long)c.cap[t], (unsigned long long)c.total,
              (unsigned long long)want, r.out);
    cr_expect_eq(r.tier[t].source, TIER_BUDGET_CGROUP_V2, "tier %d source %llu:\n%s", t, r.tier[t].source, r.out);
    cr_expect_eq(r.tier[t].high, TIER_UNLIMITED, "tier %d high %llu:\n%s", t, r.tier[t].high, r.out);
    cr_expect(r.tier[t].min == 0 && r.tier[t].low == 0, "tier %d min/low:\n%s", t, r.out);
  }
  check_placement(topo, &r, 200);
  remove_cgroups();
}

Test(budget, cgroup_high_alone_does_the_same_with_high, .fini = budget_fini)
{
  const vm_topology_t *topo = vm_topology();
  vm_caps_t c = vm_caps(topo);
  char name[64];
  make_cgroup(name, sizeof name);
  /* The program uses about 200 MiB: far from 400M, so nothing throttles. */
  vm_cgroup_set(cg_parent, "memory.high", "400M");
  static heap_run_t r;
  run_heap(&r, cg_parent, 200, 1, NULL);
  check_caps(&c, &r);
  for (int t = 0; t < r.ntiers; t++) {
    uint64_t want = vm_scaled(&c, 400 * VM_MIB, t);
    cr_expect(within_page(r.tier[t].high, want), "%s tier %d: high %llu, want 400 MiB x %llu / %llu = %llu:\n%s",
              topo->name, t, r.tier[t].high, (unsigned long long)c.cap[t], (unsigned long long)c.total,
              (unsigned long long)want, r.out);
    cr_expect_eq(r.tier[t].max, TIER_UNLIMITED, "tier %d max %llu:\n%s", t, r.tier[t].max, r.out);
    cr_expect_eq(r.tier[t].source, TIER_BUDGET_CGROUP_V2, "tier %d source %llu:\n%s", t, r.tier[t].source, r.out);
  }
  check_placement(topo, &r, 200);
  remove_cgroups();
}

Test(budget, environment_beats_the_cgroup, .fini = budget_fini)
{
  const vm_topology_t *topo = vm_topology();
  vm_caps_t c = vm_caps(topo);
  char name[64];
  make_cgroup(name, sizeof name);
  vm_cgroup_set(cg_parent, "memory.max", "300M");
  static heap_run_t r;
  char *env[] = { "TIERMALLOC_TOPTIER_MAX=32M", NULL };
  run_heap(&r, cg_parent, 100, 1, env);
  cr_expect_eq(r.tier[0].max, 32 * VM_MIB, "tier 0 max %llu, want 32 MiB from the environment:\n%s",
               r.tier[0].max, r.out);
  cr_expect_eq(r.tier[0].source, TIER_BUDGET_ENV, "tier 0 source %llu, want env:\n%s", r.tier[0].source, r.out);
  cr_expect_leq(r.tier[0].used, 32 * VM_MIB, "tier 0 used %llu:\n%s", r.tier[0].used, r.out);
  /* The lower tiers still get their share of the cgroup's max. */
  for (int t = 1; t < r.ntiers; t++) {
    uint64_t want = vm_scaled(&c, 300 * VM_MIB, t);
    cr_expect(within_page(r.tier[t].max, want), "tier %d max %llu, want %llu:\n%s", t, r.tier[t].max,
              (unsigned long long)want, r.out);
    cr_expect_eq(r.tier[t].source, TIER_BUDGET_CGROUP_V2, "tier %d source %llu:\n%s", t, r.tier[t].source, r.out);
  }
  check_placement(topo, &r, 100);
  remove_cgroups();
}

Test(budget, parent_limit_applies_to_a_child_cgroup, .fini = budget_fini)
{
  const vm_topology_t *topo = vm_topology();
  vm_caps_t c = vm_caps(topo);
  char name[64], leaf[96], want_cg[128], want_from[128];
  make_cgroup(name, sizeof name);
  vm_cgroup_set(cg_parent, "memory.max", "300M");
  vm_cgroup_set(cg_parent, "cgroup.subtree_control", "+memory");
  snprintf(leaf, sizeof leaf, "%s/leaf", name);
  vm_cgroup_make(cg_leaf, sizeof cg_leaf, leaf);
  char own[64], own_path[160];
  snprintf(own_path, sizeof own_path, "%s/memory.max", cg_leaf);
  cr_assert_eq(vm_read_file(own_path, own, sizeof own), 0);
  cr_assert_str_eq(own, "max", "the child cgroup has a limit of its own: %s", own);
  static heap_run_t r;
  run_heap(&r, cg_leaf, 150, 1, NULL);
  snprintf(want_cg, sizeof want_cg, "/%s", leaf);
  cr_expect_str_eq(r.cgroup, want_cg, "%s", r.out);
  uint64_t want = vm_scaled(&c, 300 * VM_MIB, 0);
  cr_expect(within_page(r.tier[0].max, want), "%s: tier 0 max %llu, want the parent's 300 MiB x %llu / %llu = %llu:\n%s",
            topo->name, r.tier[0].max, (unsigned long long)c.cap[0], (unsigned long long)c.total,
            (unsigned long long)want, r.out);
  cr_expect_eq(r.tier[0].source, TIER_BUDGET_CGROUP_V2, "%s", r.out);
  /* TIERMALLOC_VERBOSE names the parent as the cgroup the limit came from. */
  snprintf(want_from, sizeof want_from, "= cgroup /%s memory.max", name);
  cr_expect(strstr(r.out, want_from) != NULL, "no '%s' in the explanation:\n%s", want_from, r.out);
  check_placement(topo, &r, 150);
  remove_cgroups();
}

Test(budget, each_tier_gets_its_own_share_in_3tier, .fini = budget_fini)
{
  const vm_topology_t *topo = vm_topology();
  if (topo->ntiers != 3)
    cr_skip_test("needs three tiers; tiermalloc makes %d in the %s guest", topo->ntiers, topo->name);
  vm_caps_t c = vm_caps(topo);
  char name[64];
  make_cgroup(name, sizeof name);
  vm_cgroup_set(cg_parent, "memory.max", "300M");
  static heap_run_t r;
  /* 200 MiB: more than tiers 0 and 1 together may hold (about 60 + 112). */
  run_heap(&r, cg_parent, 200, 1, NULL);
  check_caps(&c, &r);
  for (int t = 0; t < 3; t++) {
    uint64_t want = vm_scaled(&c, 300 * VM_MIB, t);
    cr_expect(within_page(r.tier[t].max, want), "tier %d (node %d): max %llu, want 300 MiB x %llu / %llu = %llu:\n%s",
              t, vm_tier_node(topo, t), r.tier[t].max, (unsigned long long)c.cap[t],
              (unsigned long long)c.total, (unsigned long long)want, r.out);
    cr_expect_eq(r.tier[t].source, TIER_BUDGET_CGROUP_V2, "tier %d source %llu:\n%s", t, r.tier[t].source, r.out);
  }
  cr_assert_gt(200 * VM_MIB, r.tier[0].max + r.tier[1].max, "the heap must overflow tiers 0 and 1:\n%s", r.out);
  /* Tier 1 too is filled to its own share, and no further. */
  cr_expect_geq(r.tier[1].used, r.tier[1].max * 95 / 100, "tier 1 used %.1f MiB of %.1f:\n%s", MIB(r.tier[1].used),
                MIB(r.tier[1].max), r.out);
  cr_expect_gt(r.tier[2].pages[vm_tier_node(topo, 2)], 0, "nothing went to tier 2:\n%s", r.out);
  check_placement(topo, &r, 200);
  remove_cgroups();
}

/* The child keeps 64 MiB on tier 0 throughout. memory.max goes 1G -> 150M
 * -> 1G: tier 0's share goes from well above 64 MiB to below it and back,
 * so tier 0 is full exactly while the low limit is in force. 1G (not less)
 * leaves tier 0 enough room that the child's probes cannot fill it before
 * the re-read in the smallest top tier (3tier's HBM node: 1G gives about 200
 * MiB, 600M would give 120). The child keeps asking for new memory (the
 * cgroup is re-read only when jemalloc carves or commits some, at most once
 * a second), and frees its probes on tier 0 (TIERMALLOC_DIRTY_DECAY_MS=0
 * gives their pages back at once) before the limit goes up again. This is
 * the budgets steering new memory alone (TIERMALLOC_RECLAIM=off): the
 * reclaim thread would demote the oldest chunks, the 64 MiB's, under the
 * lowered max, and the free would then leave room under it, so the way up
 * could not tell the raised limit from that room (it failed so in 2 of 5
 * flat runs). A lowered memory.max with reclaim on is the reclaim suite's
 * burst_past_max. */
Test(budget, changing_memory_max_moves_new_memory_within_2s, .fini = budget_fini)
{
  const vm_topology_t *topo = vm_topology();
  vm_caps_t c = vm_caps(topo);
  char name[64];
  make_cgroup(name, sizeof name);
  vm_cgroup_set(cg_parent, "memory.max", "1G");
  uint64_t big = vm_scaled(&c, 1024 * VM_MIB, 0), small = vm_scaled(&c, 150 * VM_MIB, 0);
  cr_assert(small < 64 * VM_MIB && big > 128 * VM_MIB,
            "%s: tier 0's share of 150M (%.1f MiB) must be under the 64 MiB kept, of 1G (%.1f MiB) well above",
            topo->name, MIB(small), MIB(big));
  char *env[] = { "VMTEST_CHILD=phases", "TIERMALLOC_DIRTY_DECAY_MS=0", "TIERMALLOC_RECLAIM=off",
                  "TIERMALLOC_VERBOSE=1", NULL };
  char *argv[] = { (char *)vm_self(), NULL };
  vm_spawn(&child, argv, env, cg_parent, VM_SPAWN_STDERR);

  const char *l = vm_proc_expect(&child, "A ", 120 * 1000);
  cr_assert_not_null(l, "no A line:\n%s", child.buf);
  cr_assert_eq(kv(l, "tier0", child.buf), 16, "the 64 MiB are not all on tier 0:\n%s", child.buf);
  cr_expect_eq(kv(l, "off", child.buf), 0, "pages of the 64 MiB off tier 0's node:\n%s", child.buf);
  cr_expect(within_page(kv(l, "max0", child.buf), big), "tier 0 max, want %llu:\n%s", (unsigned long long)big,
            child.buf);

  /* Down: new memory leaves tier 0 within 2 s. */
  vm_cgroup_set(cg_parent, "memory.max", "150M");
  cr_assert_eq(vm_proc_say(&child, "move 1"), 0);
  l = vm_proc_expect(&child, "move 1 ", 60 * 1000);
  cr_assert_not_null(l, "no answer to move 1:\n%s", child.buf);
  cr_expect_eq((int)kv(l, "tier", child.buf), 1, "%s: new memory did not go to tier 1:\n%s", topo->name, child.buf);
  cr_expect_leq(kv(l, "ms", child.buf), 2000, "new memory reached tier 1 only after %llu ms:\n%s",
                kv(l, "ms", child.buf), child.buf);
  cr_expect(kv(l, "on", child.buf) > 0 && kv(l, "off", child.buf) == 0,
            "the block on tier 1 is not on its node:\n%s", child.buf);
  cr_expect(within_page(kv(l, "max0", child.buf), small), "tier 0 max after the change, want %llu:\n%s",
            (unsigned long long)small, child.buf);

  /* Tier 0 keeps only the 64 MiB: still full under 150M. */
  cr_assert_eq(vm_proc_say(&child, "free"), 0);
  l = vm_proc_expect(&child, "free ", 60 * 1000);
  cr_assert_not_null(l, "no answer to free:\n%s", child.buf);
  cr_assert_geq(kv(l, "used0", child.buf), small, "tier 0 is not full after the free:\n%s", child.buf);

  /* Up: new memory comes back to tier 0 within 2 s. */
  vm_cgroup_set(cg_parent, "memory.max", "1G");
  cr_assert_eq(vm_proc_say(&child, "move 0"), 0);
  l = vm_proc_expect(&child, "move 0 ", 60 * 1000);
  cr_assert_not_null(l, "no answer to move 0:\n%s", child.buf);
  cr_expect_eq((int)kv(l, "tier", child.buf), 0, "new memory did not come back to tier 0:\n%s", child.buf);
  cr_expect_leq(kv(l, "ms", child.buf), 2000, "new memory came back to tier 0 only after %llu ms:\n%s",
                kv(l, "ms", child.buf), child.buf);
  cr_expect(kv(l, "on", child.buf) > 0 && kv(l, "off", child.buf) == 0,
            "the block on tier 0 is not on its node:\n%s", child.buf);
  cr_expect(within_page(kv(l, "max0", child.buf), big), "tier 0 max after raising, want %llu:\n%s",
            (unsigned long long)big, child.buf);

  int rc = vm_proc_wait(&child);
  cr_expect_eq(rc, 0, "child exited %d:\n%s", rc, child.buf);
  vm_proc_kill(&child);
  remove_cgroups();
}

/* TIERMALLOC_TOPTIER_MAX=6M and one 32 MiB malloc: its one extent is carved
 * while tier 0 has room, and its chunks are placed one by one, so the block
 * spans the boundary. No cgroup: the test's own (the root) has no limits. */
Test(budget, tier_of_agrees_with_move_pages_across_the_boundary, .fini = budget_fini)
{
  const vm_topology_t *topo = vm_topology();
  static heap_run_t r;
  char *env[] = { "VMTEST_CHILD=heap", "VMTEST_HEAP_MIB=32", "VMTEST_BLOCK_MIB=32", "VMTEST_PARTS=1",
                  "TIERMALLOC_TOPTIER_MAX=6M", "TIERMALLOC_VERBOSE=1", NULL };
  char *argv[] = { (char *)vm_self(), NULL };
  int rc = vm_run_in(argv, env, NULL, r.out, sizeof r.out);
  cr_assert_eq(rc, 0, "child exited %d:\n%s", rc, r.out);
  parse_heap(&r);
  cr_assert_eq(r.blocks, 1, "%s", r.out);
  cr_expect_eq(r.untiered, 0, "%s", r.out);
  int seen[TIER_MAX_TIERS] = { 0 }, nparts = 0;
  unsigned long long len = 0;
  for (const char *p = line_of(r.out, "part "); p; p = line_of(strchr(p, '\n') + 1, "part ")) {
    int t = (int)kv(p, "tier", r.out);
    cr_assert(t >= 0 && t < topo->ntiers, "%s", r.out);
    seen[t]++;
    nparts++;
    len += kv(p, "len", r.out);
    unsigned long long pages[VM_MAX_NODES] = { 0 }, total = 0;
    node_figures(p, pages);
    for (int n = 0; n < VM_MAX_NODES; n++) total += pages[n];
    int node = vm_tier_node(topo, t);
    cr_expect_eq(kv(p, "absent", r.out), 0, "%s", r.out);
    cr_expect(total > 0 && pages[node] == total, "%s: part at +%llu, tier_of %d: %llu of %llu pages on node %d:\n%s",
              topo->name, kv(p, "off", r.out), t, pages[node], total, node, r.out);
  }
  cr_expect_eq(len, 32 * VM_MIB, "the parts cover %llu bytes:\n%s", len, r.out);
  cr_expect(seen[0] > 0 && seen[1] > 0, "%s: the block has %d parts on tier 0 and %d on tier 1, want both:\n%s",
            topo->name, seen[0], seen[1], r.out);
  cr_expect_leq(r.tier[0].used, 6 * VM_MIB, "%s", r.out);
}

/* A huge page the kernel cannot take from a fragmented node of a lower tier
 * without reclaim it takes from a faster node (MPOL_PREFERRED_MANY falls
 * back at once), and budgets count a chunk's bytes on the chunk's tier: 45
 * MiB of tier 1's chunks once sat on node0 against tier 0's 32 MiB high.
 * Reclaim finds such pages in numa_maps and moves them to their chunks'
 * tier, so the high holds in pages too. Pages put above without the heap
 * growing below are found by the timed read, whose gap doubles up to 4 s
 * while reads find none (reclaim_measure.c, RC_STRAY_SCAN_MAX_NS), and moved at the
 * same pass: back within 5 s, and the child waits 8. The child puts 40 MiB
 * of tier 1's blocks on tier 0's node itself (move_pages), as that fallback
 * does: a fragmented node cannot be kept fragmented beside the tests that
 * run in parallel with this one. */
Test(budget, pages_put_above_their_chunks_tier_are_moved_down, .fini = budget_fini)
{
  const vm_topology_t *topo = vm_topology();
  if (topo->ntiers < 2) cr_skip_test("%s: one tier, no page can be above its chunk's tier", topo->name);
  int top = vm_tier_node(topo, 0), below = vm_tier_node(topo, 1);
  static heap_run_t r;
  char *extra[] = { "TIERMALLOC_TOPTIER_HIGH=32M", "TIERMALLOC_THP=always", "VMTEST_MISPLACE_MIB=40", NULL };
  run_heap(&r, NULL, 128, 1, extra);
  const char *m = line_of(r.out, "misplace ");
  cr_assert_not_null(m, "%s", r.out);
  cr_expect_geq(kv(m, "pages", r.out), 40 * VM_MIB / 4096 * 9 / 10, "%s: the child moved too few pages up:\n%s",
                topo->name, r.out);
  long long back = (long long)kv(m, "back_ms", r.out);
  cr_expect(back >= 0 && back <= 5000, "%s: the pages put on node%d were back after %lld ms (-1: not in 8 s), "
            "want 5 s (the timed read's gap, at most 4 s, then the move):\n%s", topo->name, top, back, r.out);
  const char *t0 = line_of(r.out, "tier=0 ");
  cr_expect_gt(kv(t0, "demoted", r.out), 0, "%s: reclaim counted no move down:\n%s", topo->name, r.out);
  unsigned long long total = 0;
  for (int n = 0; n < VM_MAX_NODES; n++) total += r.tier[1].pages[n];
  cr_expect_eq(r.tier[1].pages[below], total, "%s: %llu of the %llu pages of tier 1's parts on node%d:\n%s",
               topo->name, r.tier[1].pages[below], total, below, r.out);
  /* On node0, tier 0's committed bytes and what huge pages fill around
   * them in its own chunks (TIERMALLOC_THP=always: a chunk's uncommitted
   * rest; two chunks' worth is ample), not tier 1's. */
  const char *c0 = strstr(t0, " committed=");
  unsigned long long committed = c0 ? strtoull(c0 + 11, NULL, 10) : 0;
  cr_expect_leq(r.maps[top], committed + 4 * VM_MIB, "%s: %.1f MiB of the heap on node%d, tier 0 committed %.1f MiB:\n%s",
                topo->name, MIB(r.maps[top]), top, MIB(committed), r.out);
  cr_expect_leq(r.tier[0].used, 32 * VM_MIB, "%s: tier 0 used %.1f MiB:\n%s", topo->name, MIB(r.tier[0].used), r.out);
}
