/* reclaim's decisions, one pass at a time, with the kernel's part behind a
 * test double of the OS primitives: it keeps the node of each chunk's pages
 * (so move_pages answers as the kernel would after an mbind MPOL_MF_MOVE),
 * can leave some pages behind, and pages out by dropping the pages. The
 * real mechanism is checked on a tiered kernel in tests/vm/test_reclaim.c:
 * the same claims (max at once, high at a rate, min and low kept, pressure
 * mode, pageout only with swap, data intact) against move_pages, numa_maps
 * and memory.numa_stat. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arena.h"
#include "budget.h"
#include "capture.h"
#include "chunkmap.h"
#include "clock.h"
#include "handback.h"
#include "hint.h"
#include "hotness.h"
#include "migrate.h"
#include "je.h"
#include "options.h"
#include "policy.h"
#include "range.h"
#include "reclaim.h"
#include "site.h"
#include "tmptree.h"
#include "topology.h"

#define MiB ((uint64_t)1 << 20)
#define RT_CHUNKS 4096   /* 2 ranges of 1 GiB */

static struct {
  int8_t node[RT_CHUNKS];    /* node of the chunk's pages; -1: its range's */
  int8_t left[RT_CHUNKS];    /* node the stuck pages stayed on */
  int stuck[RT_CHUNKS];      /* pages the last move left behind */
  int fail_pages;            /* pages each move leaves behind */
  int moves, pageouts, pushes, splits, hands;
  int holds, unholds;        /* handed chunks bound without the kernel's scanning, and with it again */
  bool unscanned[RT_CHUNKS]; /* the chunk's policy lets NUMA balancing neither scan nor promote */
  bool push_works;           /* push moves the pages (else they stay: the node is full) */
  int push_busy;             /* of them, the first pages' status says -EBUSY (a huge page's other entries) */
  unsigned kernel_takes;     /* chunk index + 1 whose pages on node0 the kernel demotes once memory.reclaim is asked */
  /* Chunks whose pages each have a node of their own (pages the kernel's
   * NUMA balancing promoted one by one): where and push answer per page. */
  struct {
    tm_chunk_t *c;
    int8_t node[TM_CHUNK_SIZE / 4096];
  } pp[4];
  int npp;
} rt;

static int8_t *rt_page_node(const void *page)
{
  for (int k = 0; k < rt.npp; k++)
    if (rt.pp[k].c == tm_chunk_of(page)) return &rt.pp[k].node[((uintptr_t)page & (TM_CHUNK_SIZE - 1)) >> 12];
  return NULL;
}

static unsigned rt_index(const void *p)
{
  return (unsigned)(tm_chunk_of(p) - tm_chunks);
}

static int rt_reserve(size_t size, void **out) { return tm_os_linux.reserve(size, out); }
static int rt_commit(void *p, size_t size) { return tm_os_linux.commit(p, size); }
static int rt_purge(void *p, size_t size, int lazy) { return tm_os_linux.purge(p, size, lazy); }
static int rt_huge(void *p, size_t size) { return 0; }
static int rt_resident(void *p, size_t size, unsigned char *vec) { return tm_os_linux.resident(p, size, vec); }

/* A bind moves no page: an empty chunk's next pages go there (placement);
 * a chunk with pages keeps them where they are (a move binds first). */
static int rt_bind(void *p, size_t size, const tm_nodemask_t *nodes, int first_node)
{
  for (uintptr_t a = (uintptr_t)p; a < (uintptr_t)p + size; a += TM_CHUNK_SIZE) {
    tm_chunk_t *c = tm_chunk_of((void *)a);
    if (c && tm_chunk_bytes(c) == 0) rt.node[rt_index((void *)a)] = (int8_t)first_node;
  }
  return 0;
}

static int rt_move(void *p, size_t size, const tm_nodemask_t *nodes, int first_node)
{
  cr_assert_eq(size, TM_CHUNK_SIZE, "reclaim moves one chunk at a time");
  unsigned i = rt_index(p);
  int8_t from = rt.node[i] >= 0 ? rt.node[i] : (int8_t)tm_chunk_home(tm_chunk_of(p));
  rt.left[i] = rt.stuck[i] ? rt.left[i] : from;
  rt.stuck[i] = rt.fail_pages;
  rt.node[i] = (int8_t)first_node;
  rt.moves++;
  return 0;
}

static uint64_t rt_reclaim_asked(void);

static int rt_where(void *const *pages, int n, int *node)
{
  unsigned char vec[1];
  /* The kernel's reclaim took them when it was asked (the write is the
   * test's file: its effect shows at the next look). */
  if (rt.kernel_takes && rt_reclaim_asked() > 0) {
    unsigned i = rt.kernel_takes - 1;
    rt.stuck[i] = 0;
    rt.node[i] = (int8_t)tm_chunk_tier(&tm_chunks[i]);   /* node t is tier t's */
    rt.kernel_takes = 0;
  }
  for (int k = 0; k < n; k++) {
    unsigned i = rt_index(pages[k]);
    /* A per-page chunk's pages are there, as push moves them: whether the
     * test touched each (mincore) is beside the point (a chunk's first page
     * untouched made its undone demotion go unseen, 1 run in 30). */
    const int8_t *own = rt_page_node(pages[k]);
    if (own) {
      node[k] = *own;
      continue;
    }
    if (mincore((void *)((uintptr_t)pages[k] & ~(uintptr_t)4095), 4096, vec) != 0 || !(vec[0] & 1)) {
      node[k] = -ENOENT;
      continue;
    }
    int page = (int)(((uintptr_t)pages[k] & (TM_CHUNK_SIZE - 1)) >> 12);
    int8_t home = (int8_t)tm_chunk_home(tm_chunk_of(pages[k]));
    node[k] = page < rt.stuck[i] ? rt.left[i] : rt.node[i] >= 0 ? rt.node[i] : home;
  }
  return 0;
}

/* move_pages to a node: the chunk's pages go there when push_works. */
static int rt_push(void *const *pages, int n, int node, int *status)
{
  rt.pushes++;
  for (int k = 0; k < n; k++) {
    unsigned i = rt_index(pages[k]);
    int8_t *own = rt_page_node(pages[k]);
    if (own && rt.push_works) *own = (int8_t)node;
    else if (rt.push_works) rt.stuck[i] = 0, rt.node[i] = (int8_t)node;
    status[k] = !rt.push_works ? -ENOMEM : k < rt.push_busy ? -EBUSY : node;
  }
  return 0;
}

/* Pieces: nothing to change in the double (its pages stay where they are). */
static int rt_pieces(void *p, const tm_nodemask_t *nodes, int first_node)
{
  rt.splits++;
  return 0;
}

/* Handing to NUMA balancing: the policy alone (no page moves). */
static int rt_hand(void *p, size_t size, const tm_nodemask_t *nodes, bool scan)
{
  cr_assert_eq(size, TM_CHUNK_SIZE, "reclaim hands one chunk at a time");
  /* A tier-1 chunk on node0 and node1; a tier-0 chunk (the kernel demoting) on node0. */
  cr_assert(tm_nodemask_test(nodes, 0), "tier 0's node, which the kernel promotes to");
  unsigned i = rt_index(p);
  if (scan && rt.unscanned[i]) rt.unholds++;
  else if (scan) rt.hands++;
  else rt.holds++;
  rt.unscanned[i] = !scan;
  return 0;
}

/* Handed chunks whose policy lets the kernel promote now, and not. */
static void rt_scanned(int *yes, int *no)
{
  *yes = *no = 0;
  for (unsigned i = 0; i < tm_ranges.n * tm_chunks_per_range && i < RT_CHUNKS; i++)
    if (atomic_load_explicit(&tm_chunks[i].flags, memory_order_relaxed) & TM_CHUNK_HANDED) {
      if (rt.unscanned[i]) ++*no;
      else ++*yes;
    }
}

/* As swap would: the pages are no longer resident. */
static int rt_pageout(void *p, size_t size)
{
  rt.pageouts++;
  return madvise(p, size, MADV_DONTNEED) == 0 ? 0 : errno;
}

static const tm_os_t rt_os = { .reserve = rt_reserve, .commit = rt_commit, .bind = rt_bind,
                               .purge = rt_purge, .huge = rt_huge, .move = rt_move,
                               .where = rt_where, .push = rt_push, .pageout = rt_pageout,
                               .resident = rt_resident, .pieces = rt_pieces, .hand = rt_hand };

static tm_topology_t rt_topo;

/* Sets the options (NULL-terminated "TIERMALLOC_X=v"), derives the budgets
 * again and re-reads reclaim's options, as a changed cgroup would. */
static void rt_limits(char **env)
{
  tm_options_init_from(env, false);
  tm_budget_init(&rt_topo, "/nonexistent");
  tm_reclaim_init(&rt_topo, tmptree);
}

/* Two tiers (DRAM + CXL fixture, node0 and node1), budgets unlimited, a
 * fixture tree for node meminfo, swaps and max_map_count. */
static void rt_setup(void)
{
  memset(rt.node, -1, sizeof rt.node);
  tmptree_make("dram-cxl-6.12");
  tmptree_put("proc/swaps", "Filename\tType\tSize\tUsed\tPriority\n/dev/zram0 partition\t262140\t0\t100\n");
  tmptree_put("proc/sys/vm/max_map_count", "65530\n");
  char *none[] = { NULL };
  tm_options_init_from(none, false);
  cr_assert_eq(tm_topology_discover(&rt_topo, "tests/fixtures/dram-cxl-6.12", NULL), 0);
  cr_assert_eq(tm_ranges_init(&rt_topo, (size_t)1 << 30, SIZE_MAX, &rt_os), 0);
  cr_assert_eq(tm_chunkmap_init(), 0);
  tm_budget_init(&rt_topo, "/nonexistent");
  tm_policy_init(&rt_topo);
  cr_assert_eq(tm_arenas_init(2), 0);
  tm_arena_drain_unplaced();
  tm_policy_baseline();
  tm_reclaim_init(&rt_topo, tmptree);
  tm_arena_thread_bind();
}

static void rt_teardown(void)
{
  tmptree_cleanup();
}

TestSuite(reclaim, .init = rt_setup, .fini = rt_teardown);

/* n MiB in 1 MiB blocks, every page touched. */
static void rt_fill(void **p, int n)
{
  for (int i = 0; i < n; i++) {
    p[i] = tmje_mallocx(MiB, MALLOCX_TCACHE_NONE);
    cr_assert_not_null(p[i]);
    memset(p[i], i + 1, MiB);
  }
}

static void rt_free(void **p, int n)
{
  for (int i = 0; i < n; i++) tmje_dallocx(p[i], MALLOCX_TCACHE_NONE);
}

/* Resident bytes of the chunks on tier t (mincore) but the start-up
 * metadata's, what protection counts. */
static uint64_t rt_resident_on(unsigned t)
{
  uint64_t n = 0;
  for (unsigned i = 0; i < tm_ranges.n; i++)
    for (uintptr_t a = tm_range_lo(i); a < tm_range_end(i); a += TM_CHUNK_SIZE) {
      tm_chunk_t *c = tm_chunk_of((void *)a);
      if (tm_chunk_bytes(c) && tm_chunk_tier(c) == t && !(atomic_load(&c->flags) & TM_CHUNK_KEEP))
        n += tm_migrate_resident(c);
    }
  return n;
}

/* What tier t holds as reclaim measures it: the larger of its used
 * (committed bytes) and its pages (huge pages can cover a chunk's
 * uncommitted part). */
static uint64_t rt_held(unsigned t)
{
  uint64_t used = tm_policy_used(t), res = rt_resident_on(t);
  return used > res ? used : res;
}

/* Tier 0 keeps at least `floor` bytes of pages, and no more than a chunk's
 * worth of them beyond it. */
#define rt_expect_kept(floor, what)                                                                \
  do {                                                                                             \
    uint64_t res_ = rt_resident_on(0);                                                                \
    cr_expect_geq(res_, (floor), "%s: %llu KiB resident", what, (unsigned long long)(res_ >> 10)); \
    cr_expect_lt(res_, (floor) + 2 * TM_CHUNK_SIZE, "%s: %llu KiB resident", what,                 \
                 (unsigned long long)(res_ >> 10));                                                \
  } while (0)

static tier_stats_t rt_stats(void)
{
  tier_stats_t s;
  memset(&s, 0, sizeof s);
  tm_reclaim_stats(&s);
  return s;
}

Test(reclaim, is_not_needed_without_a_budget)
{
  cr_expect(!tm_reclaim_needed());
  char *env[] = { "TIERMALLOC_TOPTIER_HIGH=16M", NULL };
  rt_limits(env);
  cr_expect(tm_reclaim_needed());
  char *off[] = { "TIERMALLOC_TOPTIER_HIGH=16M", "TIERMALLOC_RECLAIM=off", NULL };
  rt_limits(off);
  cr_expect(!tm_reclaim_needed(), "RECLAIM=off");
}

Test(reclaim, above_max_demotes_at_once_whatever_the_rate)
{
  void *p[64];
  rt_fill(p, 64);
  cr_assert_geq(tm_policy_used(0), 64 * MiB);
  char *env[] = { "TIERMALLOC_TOPTIER_MAX=16M", "TIERMALLOC_RECLAIM_RATE=1M", NULL };
  rt_limits(env);
  tm_reclaim_pass();
  cr_expect_leq(tm_policy_used(0), 16 * MiB, "one pass: %llu MiB left",
                (unsigned long long)(tm_policy_used(0) / MiB));
  cr_expect_geq(tm_policy_used(0), 14 * MiB, "no further than max, at once");
  tier_stats_t s = rt_stats();
  cr_expect_geq(s.tier[0].reclaim.demoted, 46 * MiB);
  cr_expect_eq(s.tier[0].reclaim.failed, 0);
  cr_expect_eq(s.reclaim_passes, 1);
  /* tier_of follows. */
  unsigned below = 0;
  for (int i = 0; i < 64; i++) below += tm_chunk_tier(tm_chunk_of(p[i])) == 1;
  cr_expect_geq(below, 46);
  rt_free(p, 64);
}

Test(reclaim, above_high_moves_at_the_rate_down_to_the_hysteresis)
{
  void *p[64];
  rt_fill(p, 64);
  uint64_t used0 = tm_policy_used(0);
  /* 40 MiB/s: 4 MiB in the first pass (one period_min of 100 ms). */
  char *env[] = { "TIERMALLOC_TOPTIER_HIGH=16M", "TIERMALLOC_RECLAIM_RATE=40M",
                  "TIERMALLOC_RECLAIM_HYSTERESIS=4M", NULL };
  rt_limits(env);
  cr_expect_gt(tm_reclaim_pass(), 0, "the rate's allowance spent: the next pass waits");
  cr_expect_eq(used0 - tm_policy_used(0), 4 * MiB, "moved %llu MiB",
               (unsigned long long)((used0 - tm_policy_used(0)) / MiB));
  cr_expect_eq(rt_stats().reclaim_state, TIER_RECLAIM_DEMOTING);
  /* With the rate unbounded it goes down to high - hysteresis, no further. */
  char *fast[] = { "TIERMALLOC_TOPTIER_HIGH=16M", "TIERMALLOC_RECLAIM_RATE=1T",
                   "TIERMALLOC_RECLAIM_HYSTERESIS=4M", NULL };
  rt_limits(fast);
  tm_reclaim_pass();
  uint64_t held = rt_held(0);
  cr_expect(held <= 12 * MiB && held > 10 * MiB, "holds %llu KiB", (unsigned long long)(held >> 10));
  uint64_t used1 = tm_policy_used(0);
  tm_reclaim_pass();
  cr_expect_eq(tm_policy_used(0), used1, "nothing more once under");
  cr_expect_eq(rt_stats().reclaim_state, TIER_RECLAIM_IDLE);
  rt_free(p, 64);
}

Test(reclaim, min_is_never_demoted)
{
  void *p[64];
  rt_fill(p, 64);
  char *env[] = { "TIERMALLOC_TOPTIER_MIN=12M", "TIERMALLOC_TOPTIER_HIGH=16M",
                  "TIERMALLOC_RECLAIM_HYSTERESIS=100%", "TIERMALLOC_RECLAIM_RATE=1T", NULL };
  rt_limits(env);
  tm_reclaim_pass();
  tm_reclaim_pass();
  rt_expect_kept(12 * MiB, "min 12M");
  rt_free(p, 64);
}

Test(reclaim, a_min_above_high_stops_demotion_at_min)
{
  void *p[64];
  rt_fill(p, 64);
  char *env[] = { "TIERMALLOC_TOPTIER_MIN=24M", "TIERMALLOC_TOPTIER_HIGH=8M",
                  "TIERMALLOC_RECLAIM_RATE=1T", NULL };
  rt_limits(env);
  tm_reclaim_pass();
  rt_expect_kept(24 * MiB, "min 24M above high 8M");
  rt_free(p, 64);
}

/* Node 0 of the fixture has 476 MiB free of 502 MiB. */
Test(reclaim, low_is_demoted_only_when_the_nodes_are_short)
{
  void *p[64];
  rt_fill(p, 64);
  char *env[] = { "TIERMALLOC_TOPTIER_LOW=12M", "TIERMALLOC_TOPTIER_HIGH=16M",
                  "TIERMALLOC_RECLAIM_HYSTERESIS=100%", "TIERMALLOC_RECLAIM_RATE=1T", NULL };
  rt_limits(env);
  tm_reclaim_pass();
  rt_expect_kept(12 * MiB, "kept at low while node 0 has free memory");
  /* Over high again, now with node 0 short of free memory. */
  char *none[] = { NULL };
  rt_limits(none);
  void *q[32];
  rt_fill(q, 32);
  char *shrt[] = { "TIERMALLOC_TOPTIER_LOW=12M", "TIERMALLOC_TOPTIER_HIGH=16M",
                   "TIERMALLOC_RECLAIM_HYSTERESIS=100%", "TIERMALLOC_RECLAIM_RATE=1T",
                   "TIERMALLOC_RECLAIM_PRESSURE_FREE=99%", NULL };
  rt_limits(shrt);
  tm_reclaim_pass();
  cr_expect_eq(tm_policy_used(0), 0, "below low under pressure: used %llu MiB",
               (unsigned long long)(tm_policy_used(0) / MiB));
  rt_free(q, 32);
  rt_free(p, 64);
}

Test(reclaim, pressure_mode_waits_for_the_nodes_to_be_short_but_not_for_max)
{
  void *p[64];
  rt_fill(p, 64);
  char *env[] = { "TIERMALLOC_RECLAIM=pressure", "TIERMALLOC_TOPTIER_HIGH=16M",
                  "TIERMALLOC_TOPTIER_MAX=48M", "TIERMALLOC_RECLAIM_RATE=1T", NULL };
  rt_limits(env);
  tm_reclaim_pass();
  uint64_t held = rt_held(0);
  cr_expect(held <= 48 * MiB && held > 46 * MiB, "above high, at max: node 0 is not short (%llu KiB)",
            (unsigned long long)(held >> 10));
  tmptree_put("sys/devices/system/node/node0/meminfo",
                "Node 0 MemTotal:         514356 kB\nNode 0 MemFree:            9000 kB\n");
  tm_reclaim_pass();
  cr_expect_leq(tm_policy_used(0), 16 * MiB - 2 * MiB, "short: down to high - hysteresis");
  rt_free(p, 64);
}

Test(reclaim, coldest_chunks_go_first)
{
  void *old[8], *young[8];
  tm_hotness_tick();
  rt_fill(old, 8);
  usleep(3 * TM_HOTNESS_TICK_MS * 1000);
  tm_hotness_tick();
  rt_fill(young, 8);
  /* Room for all but two chunks: fewer than the old blocks fill alone (a
   * chunk shared by the last old and the first young block is young). */
  uint64_t used = tm_policy_used(0);
  char max[64];
  snprintf(max, sizeof max, "TIERMALLOC_TOPTIER_MAX=%llu", (unsigned long long)(used - 2 * TM_CHUNK_SIZE));
  char *env[] = { max, NULL };
  rt_limits(env);
  tm_reclaim_pass();
  cr_assert_lt(tm_policy_used(0), used);
  for (int i = 0; i < 8; i++)
    cr_expect_eq(tm_chunk_tier(tm_chunk_of(young[i])), 0, "young block %d stays on top", i);
  unsigned moved = 0;
  for (int i = 0; i < 8; i++) moved += tm_chunk_tier(tm_chunk_of(old[i])) == 1;
  cr_expect_gt(moved, 0);
  rt_free(old, 8);
  rt_free(young, 8);
}

/* Chunks of the arenas' start-up metadata are read on every allocation;
 * their commit age is the oldest of all, yet they stay. */
Test(reclaim, start_up_metadata_is_kept)
{
  void *p[16];
  rt_fill(p, 16);
  char *env[] = { "TIERMALLOC_TOPTIER_MAX=0", NULL };
  rt_limits(env);
  tm_reclaim_pass();
  cr_expect_eq(tm_policy_used(0), 0);
  unsigned kept = 0;
  for (uintptr_t a = tm_range_lo(0); a < tm_range_end(0); a += TM_CHUNK_SIZE) {
    tm_chunk_t *c = tm_chunk_of((void *)a);
    if (!(atomic_load(&c->flags) & TM_CHUNK_KEEP)) continue;
    kept++;
    cr_expect_eq(tm_chunk_tier(c), 0, "a metadata chunk was moved");
  }
  cr_expect_gt(kept, 0, "start-up marked its metadata's chunks");
  rt_free(p, 16);
}

Test(reclaim, pages_left_behind_count_as_failed_and_are_moved_again)
{
  void *p[16];
  rt_fill(p, 16);
  rt.fail_pages = 100;
  char *env[] = { "TIERMALLOC_TOPTIER_MAX=4M", "TIERMALLOC_RECLAIM_PERIOD_MIN_MS=10", NULL };
  rt_limits(env);
  tm_reclaim_pass();
  tier_stats_t s = rt_stats();
  uint64_t moves = (uint64_t)rt.moves;
  cr_assert_gt(moves, 0);
  cr_expect_gt(s.tier[0].reclaim.failed, 0);
  cr_expect_leq(s.tier[0].reclaim.failed, moves * 100 * 4096, "%llu",
                (unsigned long long)s.tier[0].reclaim.failed);
  cr_expect_eq(s.tier[0].reclaim.failed % 4096, 0);
  cr_expect_leq(s.tier[0].reclaim.demoted, moves * (TM_CHUNK_SIZE - 100 * 4096),
                "pages left behind are never counted as demoted");
  rt.fail_pages = 0;
  usleep(20 * 1000);   /* strays wait for the next full pass */
  tm_reclaim_pass();
  cr_expect_gt((uint64_t)rt.moves, moves, "stray chunks moved again at the next pass");
  tier_stats_t s2 = rt_stats();
  cr_expect_gt(s2.tier[0].reclaim.demoted, s.tier[0].reclaim.demoted);
  rt_free(p, 16);
}

/* A chunk's pages move with move_pages (push), after a bind; the move by
 * policy (mbind MPOL_MF_MOVE, which would leave pages behind here) is only
 * for pages push could not place, and none were left. Pages whose status is
 * an error (as a huge page's other entries can be) are looked up: they moved,
 * and count. */
Test(reclaim, a_chunk_moves_with_move_pages_and_by_policy_only_what_it_could_not_place)
{
  void *p[16];
  rt_fill(p, 16);
  rt.fail_pages = 100;
  rt.push_works = true;
  rt.push_busy = 511;
  char *env[] = { "TIERMALLOC_TOPTIER_MAX=4M", NULL };
  rt_limits(env);
  tm_reclaim_pass();
  tier_stats_t s = rt_stats();
  cr_assert_gt(rt.pushes, 0);
  cr_expect_eq(rt.moves, 0, "%d moves by policy", rt.moves);
  cr_expect_eq(s.tier[0].reclaim.failed, 0, "the pages whose status was -EBUSY were found moved");
  cr_expect_geq(s.tier[0].reclaim.demoted, (uint64_t)rt.pushes * TM_CHUNK_SIZE / 2, "all its pages count");
  rt_free(p, 16);
}

/* The kernel put the pages of a tier-1 chunk on node0 (a huge page it took
 * from any node): numa_maps says so, and the next pass moves them down; a
 * tier-1 chunk whose pages are on node1 is left alone. */
Test(reclaim, pages_the_kernel_put_above_their_chunks_tier_are_moved_down)
{
  char *env[] = { "TIERMALLOC_TOPTIER_HIGH=4M", NULL };
  rt_limits(env);
  void *p[16];
  rt_fill(p, 16);
  tm_chunk_t *above = NULL, *fine = NULL;
  for (int k = 0; k < 16; k++) {
    tm_chunk_t *c = tm_chunk_of(p[k]);
    if (tm_chunk_tier(c) != 1 || tm_chunk_of((char *)p[k] + MiB - 1) != c) continue;
    if (!above) above = c;
    else if (c != above && !fine) fine = c;
  }
  cr_assert(above && fine, "two chunks placed on tier 1");
  unsigned a = (unsigned)(above - tm_chunks), f = (unsigned)(fine - tm_chunks);
  rt.left[a] = 0;
  rt.stuck[a] = (int)(TM_CHUNK_SIZE / 4096);   /* every page on node0 */
  char maps[512];
  uintptr_t x = tm_chunk_addr(above), y = tm_chunk_addr(fine);
  snprintf(maps, sizeof maps, "%lx prefer:1 anon=512 dirty=512 N0=512 kernelpagesize_kB=4\n"
           "%lx prefer:1 anon=512 dirty=512 N1=512 kernelpagesize_kB=4\n",
           (unsigned long)(x < y ? x : y), (unsigned long)(x < y ? y : x));
  if (x > y) {   /* the lines are in address order: swap what they say */
    snprintf(maps, sizeof maps, "%lx prefer:1 anon=512 dirty=512 N1=512 kernelpagesize_kB=4\n"
             "%lx prefer:1 anon=512 dirty=512 N0=512 kernelpagesize_kB=4\n", (unsigned long)y, (unsigned long)x);
  }
  tmptree_put("proc/self/numa_maps", maps);
  int moves = rt.moves;
  tm_reclaim_pass();
  cr_expect_eq(rt.stuck[a], 0, "its pages moved");
  cr_expect_eq(rt.node[a], 1);
  cr_expect_eq(rt.moves, moves + 1, "the chunk on node1 was not moved: %d moves", rt.moves - moves);
  cr_expect_eq(tm_chunk_tier(above), 1);
  tier_stats_t s = rt_stats();
  cr_expect_eq(s.tier[0].reclaim.demoted, TM_CHUNK_SIZE, "its pages counted as demoted from tier 0");
  (void)f;
  rt_free(p, 16);
}

/* TIERMALLOC_NUMA_BALANCING=tiering hands the chunks below tier 0 to NUMA
 * balancing only while the kernel is in tiering mode (2 or 3), and the stats
 * say so. */
Test(reclaim, chunks_below_are_handed_to_numa_balancing_only_in_tiering_mode)
{
  void *p[32];
  tmptree_put("proc/sys/kernel/numa_balancing", "1\n");
  char *env[] = { "TIERMALLOC_TOPTIER_HIGH=16M", "TIERMALLOC_NUMA_BALANCING=tiering", NULL };
  rt_limits(env);
  rt_fill(p, 32);   /* placed: 16 MiB on tier 0, the rest on tier 1, none moved (no cool-down) */
  tm_reclaim_pass();
  cr_expect_eq(rt.hands, 0, "normal mode: nothing handed");
  cr_expect_eq(rt_stats().numa_balancing_heap, 0);
  tmptree_put("proc/sys/kernel/numa_balancing", "2\n");
  rt_limits(env);
  tm_reclaim_pass();
  cr_expect_gt(rt.hands, 0, "tiering mode: the chunks below are handed");
  cr_expect_eq(rt_stats().numa_balancing_heap, 1);
  unsigned handed = 0, above = 0;
  for (unsigned i = 0; i < tm_ranges.n; i++)
    for (uintptr_t a = tm_range_lo(i); a < tm_range_end(i); a += TM_CHUNK_SIZE) {
      tm_chunk_t *c = tm_chunk_of((void *)a);
      bool h = atomic_load(&c->flags) & TM_CHUNK_HANDED;
      handed += h;
      above += h && tm_chunk_tier(c) == 0;
    }
  cr_expect_eq((int)handed, rt.hands);
  cr_expect_eq(above, 0, "never a chunk of tier 0");
  char *off[] = { "TIERMALLOC_TOPTIER_HIGH=16M", NULL };
  int hands = rt.hands;
  rt_limits(off);
  tm_reclaim_pass();
  cr_expect_eq(rt.hands, hands, "TIERMALLOC_NUMA_BALANCING=off (the default): none");
  rt_free(p, 32);
}

/* 32 MiB at p[] (tier 0's max 16 MiB), and a pass that hands what is below;
 * then the kernel moves every page of three handed chunks (up[]) to node0,
 * as numa_maps says: 6 MiB over tier 0's max with what placement put there.
 * Returns 3. */
static unsigned rt_promote_three(void **p, tm_chunk_t **up)
{
  rt_fill(p, 32);
  tm_reclaim_pass();
  unsigned n = 0;
  char maps[1024] = "";
  for (int k = 0; k < 32 && n < 3; k++) {
    tm_chunk_t *c = tm_chunk_of(p[k]);
    if (tm_chunk_tier(c) != 1 || !(atomic_load(&c->flags) & TM_CHUNK_HANDED) || (n && up[n - 1] == c)) continue;
    up[n++] = c;
    unsigned a = (unsigned)(c - tm_chunks);
    rt.left[a] = 0;
    rt.stuck[a] = (int)(TM_CHUNK_SIZE / 4096);
    size_t len = strlen(maps);
    snprintf(maps + len, sizeof maps - len,
             "%lx prefer (many)=static|balancing:0-1 anon=512 dirty=512 N0=512 kernelpagesize_kB=4\n",
             (unsigned long)tm_chunk_addr(c));
  }
  cr_assert_eq(n, 3, "three handed chunks on tier 1");
  tmptree_put("proc/self/numa_maps", maps);
  return n;
}

/* A handed chunk's pages the kernel promoted stay on tier 0 and count there:
 * tier 0, over its max with them, gives up its own chunks, not them. */
Test(reclaim, pages_the_kernel_promoted_stay_and_tier0_gives_up_its_own_chunks)
{
  void *p[32];
  tmptree_put("proc/sys/kernel/numa_balancing", "2\n");
  char *env[] = { "TIERMALLOC_TOPTIER_MAX=16M", "TIERMALLOC_NUMA_BALANCING=tiering", NULL };
  rt_limits(env);
  tm_chunk_t *up[3];
  unsigned n = rt_promote_three(p, up);
  rt_limits(env);   /* the next pass a full one (and the counts from 0) */
  tm_reclaim_pass();
  for (unsigned i = 0; i < n; i++) {
    unsigned a = (unsigned)(up[i] - tm_chunks);
    cr_expect_eq(rt.stuck[a], (int)(TM_CHUNK_SIZE / 4096), "the promoted pages stay on node0");
    cr_expect_eq(tm_chunk_tier(up[i]), 1);
    cr_expect(atomic_load(&up[i]->flags) & TM_CHUNK_HANDED, "still handed");
  }
  cr_expect_geq(rt_stats().tier[0].reclaim.demoted, TM_CHUNK_SIZE,
                "tier 0, over its max by the promoted chunks, gave up chunks of its own");
  rt_free(p, 32);
}

/* Pages of the per-page chunk k on node n. */
static int rt_pages_on(int k, int n)
{
  int count = 0;
  for (unsigned i = 0; i < TM_CHUNK_SIZE / 4096; i++) count += rt.pp[k].node[i] == n;
  return count;
}

/* The pages of a handed chunk the kernel promoted go back down one by one
 * (handback.h): only as many as asked, the chunk staying handed on its
 * tier; a page given back and promoted again within 10 s is an undone
 * demotion, counted and given back last; pages promoted since the last
 * look go before older ones. */
Test(reclaim, pages_the_kernel_promoted_go_back_one_by_one_newest_first_undone_last)
{
  void *p[32];
  tmptree_put("proc/sys/kernel/numa_balancing", "2\n");
  char *env[] = { "TIERMALLOC_TOPTIER_HIGH=16M", "TIERMALLOC_NUMA_BALANCING=tiering", NULL };
  rt_limits(env);
  rt_fill(p, 32);
  tm_reclaim_pass();
  tm_chunk_t *c = NULL;
  for (int k = 0; k < 32 && !c; k++)
    if (tm_chunk_tier(tm_chunk_of(p[k])) == 1 && (atomic_load(&tm_chunk_of(p[k])->flags) & TM_CHUNK_HANDED))
      c = tm_chunk_of(p[k]);
  cr_assert_not_null(c, "a handed chunk on tier 1");
  /* The kernel promoted its first 256 pages. */
  rt.pp[0].c = c;
  rt.npp = 1;
  for (unsigned i = 0; i < 512; i++) rt.pp[0].node[i] = i < 256 ? 0 : 1;
  rt.push_works = true;
  const uint64_t s = 1000000000ull;
  uint64_t failed = 0;
  tm_handback_reset();
  /* The other handed chunks' pages on their tier (the double puts a chunk
   * bound away from its range's tier on its home node until a move). */
  for (unsigned i = 0; i < tm_ranges.n; i++)
    for (uintptr_t a = tm_range_lo(i); a < tm_range_end(i); a += TM_CHUNK_SIZE)
      if (atomic_load(&tm_chunk_of((void *)a)->flags) & TM_CHUNK_HANDED) rt.node[rt_index((void *)a)] = 1;
  cr_expect_eq(tm_handback_give(0, 128 * 4096, 10 * s, &failed), 128 * 4096);
  cr_expect_eq(rt_pages_on(0, 0), 128, "128 pages given back, 128 still up");
  cr_expect_eq(rt.pp[0].node[0], 1, "the first first");
  cr_expect_eq(tm_chunk_tier(c), 1);
  cr_expect(atomic_load(&c->flags) & TM_CHUNK_HANDED, "still handed");
  cr_expect_eq(tm_handback_given(), 128 * 4096);
  /* The kernel promotes 32 of them again, and 10 pages never up before. */
  for (unsigned i = 0; i < 32; i++) rt.pp[0].node[i] = 0;
  for (unsigned i = 300; i < 310; i++) rt.pp[0].node[i] = 0;
  tm_handback_check(15 * s);
  cr_expect_eq(tm_handback_undone(), 32 * 4096, "32 demotions undone within 10 s");
  /* The pages promoted since the last look go first (the kernel promotes
   * the hottest first: on bench/tier-quality's zipfian heap giving back
   * the oldest first kept 0.24 of the accesses on top, the newest 0.48). */
  cr_expect_eq(tm_handback_give(0, 10 * 4096, 16 * s, &failed), 10 * 4096);
  for (unsigned i = 300; i < 310; i++) cr_expect_eq(rt.pp[0].node[i], 1, "page %u, the newest, given back", i);
  /* Then the 128 older pages up, before the 32 kept. */
  cr_expect_eq(tm_handback_give(0, 128 * 4096, 16 * s, &failed), 128 * 4096);
  cr_expect_eq(rt_pages_on(0, 0), 32);
  for (unsigned i = 0; i < 32; i++) cr_expect_eq(rt.pp[0].node[i], 0, "page %u kept", i);
  /* The kept ones go last, but they go: the limit is held. */
  cr_expect_eq(tm_handback_give(0, 4 * MiB, 17 * s, &failed), 32 * 4096);
  cr_expect_eq(rt_pages_on(0, 0), 0);
  cr_expect_eq(failed, 0);
  /* Down for more than 10 s: no more undone. */
  tm_handback_check(40 * s);
  cr_expect_eq(tm_handback_undone(), 32 * 4096);
  rt_free(p, 32);
}

/* In a pass: tier 0 over its max by pages the kernel promoted, with no
 * chunk of its own to give, gives back just the excess of them, page by
 * page; the chunk stays handed on its tier, and the stats count it. */
Test(reclaim, a_pass_over_max_by_promoted_pages_gives_back_the_excess_page_by_page)
{
  void *p[16];
  tmptree_put("proc/sys/kernel/numa_balancing", "2\n");
  char *env[] = { "TIERMALLOC_TOPTIER_MAX=512K", "TIERMALLOC_NUMA_BALANCING=tiering", NULL };
  rt_limits(env);
  rt_fill(p, 16);   /* no chunk fits under tier 0's max: all on tier 1 */
  tm_reclaim_pass();
  tm_chunk_t *c = NULL;
  for (int k = 0; k < 16 && !c; k++)
    if (atomic_load(&tm_chunk_of(p[k])->flags) & TM_CHUNK_HANDED) c = tm_chunk_of(p[k]);
  cr_assert_not_null(c, "a handed chunk");
  cr_assert_eq(tm_policy_used(0), 0, "tier 0 has nothing of its own");
  for (unsigned i = 0; i < tm_ranges.n; i++)
    for (uintptr_t a = tm_range_lo(i); a < tm_range_end(i); a += TM_CHUNK_SIZE)
      if (atomic_load(&tm_chunk_of((void *)a)->flags) & TM_CHUNK_HANDED) rt.node[rt_index((void *)a)] = 1;
  rt.pp[0].c = c;
  rt.npp = 1;
  for (unsigned i = 0; i < 512; i++) rt.pp[0].node[i] = i < 256 ? 0 : 1;   /* 1 MiB promoted */
  rt.push_works = true;
  char maps[256];
  snprintf(maps, sizeof maps, "%lx prefer (many)=static|balancing:0-1 anon=512 dirty=512 N0=256 N1=256 "
           "kernelpagesize_kB=4\n", (unsigned long)tm_chunk_addr(c));
  tmptree_put("proc/self/numa_maps", maps);
  rt_limits(env);
  tm_reclaim_pass();
  int up = rt_pages_on(0, 0);
  cr_expect_leq(up * 4096, 512 * 1024, "%d pages still on node0: above tier 0's max of 512 KiB", up);
  cr_expect_geq(up * 4096, 512 * 1024 - 64 * 1024, "%d pages still on node0: more than the excess given back", up);
  cr_expect_eq(tm_chunk_tier(c), 1);
  cr_expect(atomic_load(&c->flags) & TM_CHUNK_HANDED, "still handed");
  tier_stats_t st;
  memset(&st, 0, sizeof st);
  tm_reclaim_stats(&st);
  cr_expect_eq(st.tier[0].reclaim.demoted, (uint64_t)(256 - up) * 4096, "counted as demoted from tier 0");
  cr_expect_eq(tm_handback_given(), (uint64_t)(256 - up) * 4096);
  rt_free(p, 16);
}

/* The budgets from the fixture's cgroup (app/worker) under the test's tree. */
static void rt_limits_cgroup(char **env)
{
  tm_options_init_from(env, false);
  tm_budget_init(&rt_topo, tmptree);
  tm_reclaim_init(&rt_topo, tmptree);
}

/* The cgroup's anonymous bytes on node0 and node1 (memory.numa_stat). */
static void rt_numa_stat(uint64_t n0, uint64_t n1)
{
  char text[128];
  snprintf(text, sizeof text, "anon N0=%llu N1=%llu\nfile N0=0 N1=0\n", (unsigned long long)n0,
           (unsigned long long)n1);
  tmptree_put("sys/fs/cgroup/app/worker/memory.numa_stat", text);
}

/* What the test's memory.reclaim was last asked for (bytes; 0: nothing). */
static uint64_t rt_reclaim_asked(void)
{
  char buf[64] = "";
  FILE *f = fopen(tmptree_path("sys/fs/cgroup/app/worker/memory.reclaim"), "r");
  if (f) {
    if (!fgets(buf, sizeof buf, f)) buf[0] = '\0';
    fclose(f);
  }
  return strtoull(buf, NULL, 10);
}

/* Everything the kernel's own demotion needs (reclaim_cgroup.c):
 * demotion_enabled, no swap, the process alone in its cgroup, whose
 * memory.stat has no pgdemote_direct. */
static void rt_kernel_may_demote(void)
{
  tmptree_put("sys/kernel/mm/numa/demotion_enabled", "true\n");
  tmptree_put("proc/swaps", "Filename\tType\tSize\tUsed\tPriority\n");
  tmptree_put("sys/fs/cgroup/app/worker/memory.stat", "anon 0\nfile 0\n");
  tmptree_put("sys/fs/cgroup/app/worker/cgroup.procs", "4242\n");
}

/* NUMA balancing in tiering mode, the cgroup's memory.reclaim there and
 * nothing on its nodes yet, and the environment's limits alone (neither
 * protection nor limits from the parent), read. */
static void rt_tiering_cgroup(char **env)
{
  tmptree_put("proc/sys/kernel/numa_balancing", "2\n");
  tmptree_put("sys/fs/cgroup/app/worker/memory.reclaim", "");
  rt_numa_stat(0, 0);
  const char *none[][2] = { { "memory.min", "0\n" }, { "memory.low", "0\n" }, { "memory.high", "max\n" },
                            { "memory.max", "max\n" } };
  for (unsigned k = 0; k < 4; k++) {
    char rel[64];
    snprintf(rel, sizeof rel, "sys/fs/cgroup/app/%s", none[k][0]);
    tmptree_put(rel, none[k][1]);
  }
  rt_limits_cgroup(env);
}

/* Tier 0 over its max by pages the kernel promoted, in 32 MiB of which
 * placement put 16 on tier 0: three handed chunks' pages on node0. */
static void rt_promoted_over_max(void **p, char **env)
{
  rt_tiering_cgroup(env);
  tm_chunk_t *up[3];
  rt_promote_three(p, up);
  rt_numa_stat(rt_resident_on(0) + 6 * MiB, 0);   /* the cgroup's anon on node0, as the kernel counts it */
  rt_limits_cgroup(env);   /* the next pass a full one (and the counts from 0) */
}

/* The kernel's own demotion (demotion_enabled, a cgroup of the process's
 * own, no swap): reclaim asks it, through memory.reclaim, for tier 0's
 * excess, and moves nothing of tier 0 itself; the stats say so and count
 * what the kernel demoted (here a kernel whose memory.stat has no
 * pgdemote_direct: what it was asked, as it succeeded). */
Test(reclaim, with_the_kernel_demoting_tier0s_excess_is_asked_of_memory_reclaim)
{
  void *p[32];
  rt_kernel_may_demote();
  char *env[] = { "TIERMALLOC_TOPTIER_MAX=16M", "TIERMALLOC_NUMA_BALANCING=tiering", "TIERMALLOC_RECLAIM_RATE=1T",
                  NULL };
  rt_promoted_over_max(p, env);
  uint64_t own = tm_policy_used(0), excess = rt_resident_on(0) + 6 * MiB - 16 * MiB;
  tm_reclaim_pass();
  uint64_t asked = rt_reclaim_asked();
  cr_expect_eq(asked, excess, "asked the kernel for %llu KiB, the excess is %llu KiB", (unsigned long long)(asked >> 10),
               (unsigned long long)(excess >> 10));
  cr_expect_eq(tm_policy_used(0), own, "tier 0's own chunks stay: the kernel chooses its pages");
  tier_stats_t st = rt_stats();
  cr_expect_eq(st.numa_balancing_demotes, 1);
  cr_expect_eq(st.kernel_demoted, asked);
  cr_expect_eq(st.kernel_held, 0, "the hold is TIERMALLOC_NUMA_BALANCING_HOLD's, off by default");
  cr_expect_eq(rt.holds, 0);
  cr_expect_eq(st.tier[0].reclaim.demoted, asked);
  /* Between passes, the kernel promoting 4 MiB more: the next wake, not a
   * full pass, reads memory.numa_stat and asks for them. */
  tmptree_put("sys/fs/cgroup/app/worker/memory.reclaim", "");
  rt_numa_stat(16 * MiB + 4 * MiB, 0);
  uint64_t passes = rt_stats().reclaim_passes;
  tm_reclaim_pass();
  cr_expect_eq(rt_stats().reclaim_passes, passes, "not a full pass");
  cr_expect_eq(rt_reclaim_asked(), 4 * MiB, "asked %llu KiB", (unsigned long long)(rt_reclaim_asked() >> 10));
  cr_expect_eq(rt_stats().kernel_demoted, asked + 4 * MiB);
  rt_free(p, 32);
}

/* The kernel promotes a scan's hot pages in a burst faster than its own
 * reclaim demotes them: above high by more than half the hysteresis (16
 * MiB, 2 MiB: 17 MiB) its promotions are held off the heap, every handed
 * chunk bound without MPOL_F_NUMA_BALANCING before the kernel is asked for
 * the excess, and let in again once tier 0 is back at its high; between the high and that, they are let in (the
 * exchange its LRU makes). Two seconds at most; only with
 * TIERMALLOC_NUMA_BALANCING_HOLD. */
Test(reclaim, the_kernels_promotions_are_held_off_above_high_until_tier0_is_back_at_it)
{
  void *p[32];
  rt_kernel_may_demote();
  char *env[] = { "TIERMALLOC_TOPTIER_HIGH=16M", "TIERMALLOC_NUMA_BALANCING=tiering", "TIERMALLOC_RECLAIM_RATE=1T",
                  "TIERMALLOC_NUMA_BALANCING_HOLD=1", NULL };
  rt_promoted_over_max(p, env);
  int yes, no;
  rt_scanned(&yes, &no);
  cr_assert_gt(yes, 3, "chunks handed: %d", yes);
  cr_assert_eq(no, 0);
  cr_assert_gt(rt_resident_on(0) + 6 * MiB, 17 * MiB, "tier 0 over high and half the hysteresis");
  tm_reclaim_pass();
  rt_scanned(&yes, &no);
  cr_expect_eq(yes, 0, "%d handed chunks still let the kernel promote", yes);
  cr_expect_gt(no, 3);
  cr_expect_gt(rt_reclaim_asked(), 0, "the excess asked of the kernel too");
  cr_expect_eq(rt_stats().kernel_held, 1);
  int holds = rt.holds;
  /* Over high still: held. */
  rt_numa_stat(16 * MiB + 512 * 1024, 0);
  tm_reclaim_pass();
  cr_expect_eq(rt.unholds, 0);
  cr_expect_eq(rt.holds, holds, "not bound again");
  /* At high: let in again. */
  rt_numa_stat(16 * MiB, 0);
  tm_reclaim_pass();
  rt_scanned(&yes, &no);
  cr_expect_eq(no, 0, "%d handed chunks still held", no);
  cr_expect_eq(rt.unholds, holds);
  /* Over high by less than half the hysteresis: let in. */
  rt_numa_stat(16 * MiB + 768 * 1024, 0);
  tm_reclaim_pass();
  rt_scanned(&yes, &no);
  cr_expect_eq(no, 0);
  cr_expect_eq(rt_stats().kernel_held, 1);
  /* An excess reclaim does not bring back (anonymous memory of the cgroup's
   * the heap is not): held two seconds at most, then not again until tier 0
   * is below where the hold began. */
  rt_numa_stat(18 * MiB, 0);
  tm_reclaim_pass();
  cr_expect_eq(rt_stats().kernel_held, 2);
  usleep(2100 * 1000);
  tm_reclaim_pass();
  rt_scanned(&yes, &no);
  cr_expect_eq(no, 0, "%d handed chunks held after two seconds", no);
  tm_reclaim_pass();
  cr_expect_eq(rt_stats().kernel_held, 2, "not held again at once");
  rt_numa_stat(16 * MiB + 512 * 1024, 0);
  tm_reclaim_pass();
  rt_numa_stat(18 * MiB, 0);
  tm_reclaim_pass();
  cr_expect_eq(rt_stats().kernel_held, 3, "held again once tier 0 went below and above");
  /* A fork child inherits the held policies and none of the state: its
   * first look within the high lets them in again. */
  rt_limits_cgroup(env);
  tm_reclaim_postfork_child();
  rt_numa_stat(15 * MiB, 0);
  tm_reclaim_pass();
  rt_scanned(&yes, &no);
  cr_expect_eq(no, 0, "%d handed chunks still held in the child", no);
  rt_free(p, 32);
}

/* Tier 0 over its high by anonymous memory outside the heap (the cgroup's,
 * which the kernel's demotion counts): no promotion of the kernel's, so
 * they are not held off; the excess is still asked of the kernel. */
Test(reclaim, tier0s_memory_outside_the_heap_does_not_hold_the_kernels_promotions)
{
  void *p[32];
  rt_kernel_may_demote();
  char *env[] = { "TIERMALLOC_TOPTIER_HIGH=16M", "TIERMALLOC_NUMA_BALANCING=tiering", "TIERMALLOC_RECLAIM_RATE=1T",
                  "TIERMALLOC_NUMA_BALANCING_HOLD=1", NULL };
  rt_tiering_cgroup(env);
  rt_fill(p, 32);
  tm_reclaim_pass();
  int yes, no;
  rt_scanned(&yes, &no);
  cr_assert_gt(yes, 3, "chunks handed: %d", yes);
  cr_assert_leq(rt_resident_on(0), 16 * MiB, "the heap within the high on tier 0");
  rt_numa_stat(rt_resident_on(0) + 8 * MiB, 0);   /* 8 MiB of the cgroup's outside the heap */
  rt_limits_cgroup(env);
  tm_reclaim_pass();
  tm_reclaim_pass();
  rt_scanned(&yes, &no);
  cr_expect_eq(no, 0, "%d handed chunks held", no);
  cr_expect_eq(rt_stats().kernel_held, 0);
  cr_expect_gt(rt_reclaim_asked(), 0, "the excess asked of the kernel");
  rt_free(p, 32);
}

/* The kernel's demotions undone (handback.h): memory.reclaim does not say
 * which pages the kernel's LRU took, so a sample of the handed heap's pages
 * (4 a chunk) is looked up after each ask and between; one the kernel took
 * off tier 0 and found there again within 10 s counts for the 128 pages it
 * stands for. What tiermalloc moved down itself, or came back later than
 * 10 s, is not counted. */
Test(reclaim, the_kernels_demotions_undone_are_counted_from_a_sample)
{
  void *p[32];
  rt_kernel_may_demote();
  char *env[] = { "TIERMALLOC_TOPTIER_MAX=16M", "TIERMALLOC_NUMA_BALANCING=tiering", "TIERMALLOC_RECLAIM_RATE=1T",
                  NULL };
  rt_promoted_over_max(p, env);
  unsigned a = 0;
  for (int k = 0; k < 32 && !a; k++) {
    unsigned i = rt_index(p[k]);
    if (tm_chunk_tier(tm_chunk_of(p[k])) == 1 && rt.stuck[i] == (int)(TM_CHUNK_SIZE / 4096)) a = i + 1;
  }
  cr_assert(a, "a chunk whose pages the kernel promoted");
  tmptree_put("sys/fs/cgroup/app/worker/memory.reclaim", "");
  rt.kernel_takes = a;
  tm_reclaim_pass();
  cr_assert_gt(rt_reclaim_asked(), 0, "the kernel was asked");
  cr_assert_eq(rt.kernel_takes, 0, "and took the chunk's pages");
  cr_expect_eq(tm_handback_kernel_undone(), 0, "none back yet");
  uint64_t now = tm_clock_ns(CLOCK_MONOTONIC), s = 1000000000ull;
  rt.stuck[a - 1] = (int)(TM_CHUNK_SIZE / 4096);   /* the kernel promotes them again */
  tm_handback_look(now + 2 * s, TM_HANDBACK_TICK);
  cr_expect_eq(tm_handback_kernel_undone(), 4 * TM_HANDBACK_SAMPLE_STRIDE * 4096, "the chunk's 4 sampled pages: %llu KiB", (unsigned long long)(tm_handback_kernel_undone() >> 10));
  /* Demoted at an ask again, back after 11 s: a demotion that held. */
  tm_handback_look(now + 3 * s, TM_HANDBACK_BEFORE);
  rt.stuck[a - 1] = 0;
  tm_handback_look(now + 3 * s, TM_HANDBACK_AFTER);
  rt.stuck[a - 1] = (int)(TM_CHUNK_SIZE / 4096);
  tm_handback_look(now + 14 * s, TM_HANDBACK_TICK);
  cr_expect_eq(tm_handback_kernel_undone(), 4 * TM_HANDBACK_SAMPLE_STRIDE * 4096, "not counted again: %llu KiB", (unsigned long long)(tm_handback_kernel_undone() >> 10));
  /* Down by tiermalloc's own move (rc_moved says so), back within 10 s. */
  rt.stuck[a - 1] = 0;
  tm_handback_moved();
  tm_handback_look(now + 16 * s, TM_HANDBACK_TICK);
  rt.stuck[a - 1] = (int)(TM_CHUNK_SIZE / 4096);
  tm_handback_look(now + 18 * s, TM_HANDBACK_TICK);
  cr_expect_eq(tm_handback_kernel_undone(), 4 * TM_HANDBACK_SAMPLE_STRIDE * 4096, "not the kernel's");
  rt_free(p, 32);
}

/* The kernel is asked for no more than tier 0's protection allows: above a
 * high of 16 MiB with a min of 16 MiB, down to the min, not to the high
 * less the hysteresis. */
Test(reclaim, the_kernel_is_asked_within_tier0s_protection)
{
  void *p[32];
  rt_kernel_may_demote();
  char *env[] = { "TIERMALLOC_TOPTIER_HIGH=16M", "TIERMALLOC_TOPTIER_MIN=16M", "TIERMALLOC_NUMA_BALANCING=tiering",
                  "TIERMALLOC_RECLAIM_RATE=1T", NULL };
  rt_promoted_over_max(p, env);
  uint64_t excess = rt_resident_on(0) + 6 * MiB - 16 * MiB;
  tm_reclaim_pass();
  cr_expect_eq(rt_reclaim_asked(), excess, "asked the kernel for %llu KiB, the excess over the min is %llu KiB",
               (unsigned long long)(rt_reclaim_asked() >> 10), (unsigned long long)(excess >> 10));
  rt_free(p, 32);
}

/* The wake between passes asks what a pass would: with
 * TIERMALLOC_RECLAIM=pressure, tier 0 above its high is left while the
 * nodes have room, by the pass and by the wake alike. */
Test(reclaim, the_kernel_is_asked_as_a_pass_would_in_pressure_mode)
{
  void *p[32];
  rt_kernel_may_demote();
  char *env[] = { "TIERMALLOC_TOPTIER_HIGH=16M", "TIERMALLOC_RECLAIM=pressure", "TIERMALLOC_NUMA_BALANCING=tiering",
                  "TIERMALLOC_RECLAIM_RATE=1T", NULL };
  rt_promoted_over_max(p, env);
  tm_reclaim_pass();
  cr_expect_eq(rt_reclaim_asked(), 0, "a pass asked the kernel with the nodes not short");
  /* Back under the high at a pass, then a burst before the next. */
  rt_limits_cgroup(env);
  rt_numa_stat(8 * MiB, 0);
  tm_reclaim_pass();
  rt_numa_stat(16 * MiB + 8 * MiB, 0);
  uint64_t passes = rt_stats().reclaim_passes;
  tm_reclaim_pass();
  cr_expect_eq(rt_stats().reclaim_passes, passes, "not a full pass");
  cr_expect_eq(rt_reclaim_asked(), 0, "the wake between passes asked the kernel with the nodes not short");
  cr_expect_eq(rt_stats().numa_balancing_demotes, 1);
  rt_free(p, 32);
}

/* What the kernel did not demote (its memory.stat's pgdemote_direct did not
 * move: every page of tier 0 in use), reclaim moves itself. */
Test(reclaim, what_the_kernel_does_not_demote_reclaim_moves_itself)
{
  void *p[32];
  tmptree_put("sys/fs/cgroup/app/worker/cgroup.procs", "4242\n");
  tmptree_put("sys/kernel/mm/numa/demotion_enabled", "true\n");
  tmptree_put("proc/swaps", "Filename\tType\tSize\tUsed\tPriority\n");
  char *env[] = { "TIERMALLOC_TOPTIER_MAX=16M", "TIERMALLOC_NUMA_BALANCING=tiering", "TIERMALLOC_RECLAIM_RATE=1T",
                  NULL };
  rt_promoted_over_max(p, env);
  uint64_t own = tm_policy_used(0);
  tm_reclaim_pass();
  cr_expect_gt(rt_reclaim_asked(), 0, "the kernel was asked");
  tier_stats_t st = rt_stats();
  cr_expect_eq(st.kernel_demoted, 0, "pgdemote_direct did not move");
  cr_expect_lt(tm_policy_used(0), own, "tier 0 gave up chunks of its own instead");
  rt_free(p, 32);
}

/* Where the kernel would not demote as asked, it is not asked: reclaim
 * moves tier 0's pages itself. */
static void rt_kernel_not_asked(const char *rel, const char *text)
{
  void *p[32];
  tmptree_put("sys/fs/cgroup/app/worker/cgroup.procs", "4242\n");
  tmptree_put("sys/kernel/mm/numa/demotion_enabled", "true\n");
  tmptree_put("proc/swaps", "Filename\tType\tSize\tUsed\tPriority\n");
  tmptree_put(rel, text);
  char *env[] = { "TIERMALLOC_TOPTIER_MAX=16M", "TIERMALLOC_NUMA_BALANCING=tiering", "TIERMALLOC_RECLAIM_RATE=1T",
                  NULL };
  rt_promoted_over_max(p, env);
  uint64_t own = tm_policy_used(0);
  tm_reclaim_pass();
  cr_expect_eq(rt_reclaim_asked(), 0, "%s: %s, yet the kernel was asked", rel, text);
  cr_expect_eq(rt_stats().numa_balancing_demotes, 0);
  cr_expect_lt(tm_policy_used(0), own, "%s: tier 0 gave up chunks of its own", rel);
  rt_free(p, 32);
}

Test(reclaim, the_kernel_is_not_asked_to_demote_where_it_does_not_demote)
{
  rt_kernel_not_asked("sys/kernel/mm/numa/demotion_enabled", "false\n");
}

Test(reclaim, the_kernel_is_not_asked_to_demote_where_its_reclaim_would_swap)
{
  rt_kernel_not_asked("proc/swaps", "Filename\tType\tSize\tUsed\tPriority\n/dev/zram0 partition\t262140\t0\t100\n");
}

/* In secure execution the environment's word writes no cgroup file. */
Test(reclaim, the_kernel_is_not_asked_to_demote_in_secure_execution)
{
  void *p[32];
  tmptree_put("sys/fs/cgroup/app/worker/cgroup.procs", "4242\n");
  tmptree_put("sys/kernel/mm/numa/demotion_enabled", "true\n");
  tmptree_put("proc/swaps", "Filename\tType\tSize\tUsed\tPriority\n");
  char *env[] = { "TIERMALLOC_TOPTIER_MAX=16M", "TIERMALLOC_NUMA_BALANCING=tiering", "TIERMALLOC_RECLAIM_RATE=1T",
                  NULL };
  rt_promoted_over_max(p, env);
  tmptree_put("sys/fs/cgroup/app/worker/memory.reclaim", "");
  tm_options_init_from(env, true);
  tm_budget_init(&rt_topo, tmptree);
  tm_reclaim_init(&rt_topo, tmptree);
  tm_reclaim_pass();
  cr_expect_eq(rt_reclaim_asked(), 0, "secure execution, yet the kernel was asked");
  cr_expect_eq(rt_stats().numa_balancing_demotes, 0);
  rt_free(p, 32);
}

Test(reclaim, the_kernel_is_not_asked_to_demote_for_a_cgroup_shared_with_others)
{
  rt_kernel_not_asked("sys/fs/cgroup/app/worker/cgroup.procs", "4242\n4343\n");
}

/* The first chunk on tier 1 that holds one of the n blocks at p[] whole;
 * NULL if none. */
static tm_chunk_t *rt_tier1_chunk(void **p, int n)
{
  for (int k = 0; k < n; k++)
    if (tm_chunk_tier(tm_chunk_of(p[k])) == 1 && tm_chunk_of((char *)p[k] + MiB - 1) == tm_chunk_of(p[k]))
      return tm_chunk_of(p[k]);
  return NULL;
}

/* numa_maps with one line: chunk c's 512 pages on node. */
static void rt_numa_maps_one(tm_chunk_t *c, int node)
{
  char maps[256];
  snprintf(maps, sizeof maps, "%lx prefer:1 anon=512 dirty=512 N%d=512 kernelpagesize_kB=4\n",
           (unsigned long)tm_chunk_addr(c), node);
  tmptree_put("proc/self/numa_maps", maps);
}

/* The kernel put every page of c on node0: the double and numa_maps say
 * so. Returns c's index in the double. */
static unsigned rt_stray_on_node0(tm_chunk_t *c)
{
  unsigned a = (unsigned)(c - tm_chunks);
  rt.left[a] = 0;
  rt.stuck[a] = (int)(TM_CHUNK_SIZE / 4096);
  rt_numa_maps_one(c, 0);
  return a;
}

/* numa_maps is read for such pages RC_STRAY_SCAN_NS (1 s) after the last
 * read, and each such read that finds none doubles that (a heap that does
 * not grow gains no pages to stray): a chunk whose pages the kernel put on
 * node0 after one empty read is moved down 2 s after it, not 1. */
Test(reclaim, a_read_for_strays_that_finds_none_doubles_the_time_to_the_next)
{
  char *env[] = { "TIERMALLOC_TOPTIER_HIGH=4M", "TIERMALLOC_RECLAIM_PERIOD_MIN_MS=10",
                  "TIERMALLOC_RECLAIM_PERIOD_MAX_MS=10", NULL };
  rt_limits(env);
  void *p[16];
  rt_fill(p, 16);
  tm_chunk_t *c = rt_tier1_chunk(p, 16);
  cr_assert(c != NULL, "a chunk placed on tier 1");
  rt_numa_maps_one(c, 1);
  /* The first read (timed) finds none; the passes after it settle the
   * demotion, each read they make being one the heap's growth called for. */
  for (int k = 0; k < 6; k++) {
    tm_reclaim_pass();
    usleep(12 * 1000);   /* the next is a full pass */
  }
  unsigned a = rt_stray_on_node0(c);
  int moves = rt.moves;
  usleep(1200 * 1000);
  tm_reclaim_pass();
  cr_expect_eq(rt.moves, moves, "numa_maps read again 1.2 s after a read that found none");
  cr_expect_eq(rt.stuck[a], (int)(TM_CHUNK_SIZE / 4096));
  usleep(1000 * 1000);
  tm_reclaim_pass();
  cr_expect_eq(rt.stuck[a], 0, "not read 2.2 s after it: its pages not moved");
  rt_free(p, 16);
}

/* Growth below that reclaim's own demotion made calls for no read of
 * numa_maps (it found those pages there itself): a chunk whose pages the
 * kernel put on node0 after the drain is moved down at the next timed read
 * (2 s after the first, which found none), not at the passes in between. */
Test(reclaim, growth_below_from_demotion_calls_for_no_read_for_strays)
{
  void *p[16];
  rt_fill(p, 16);   /* all on tier 0: no limit yet */
  tmptree_put("proc/self/numa_maps", "");
  char *env[] = { "TIERMALLOC_TOPTIER_MAX=4M", "TIERMALLOC_RECLAIM_PERIOD_MIN_MS=10",
                  "TIERMALLOC_RECLAIM_PERIOD_MAX_MS=10", NULL };
  rt_limits(env);
  tm_reclaim_pass();   /* the first read (timed, none found), and the drain (above max: at once) */
  tm_chunk_t *c = rt_tier1_chunk(p, 16);
  cr_assert(c != NULL, "a chunk demoted to tier 1");
  cr_assert_geq(rt_stats().tier[0].reclaim.demoted, 8 * MiB);
  unsigned a = rt_stray_on_node0(c);
  int moves = rt.moves;
  for (int k = 0; k < 4; k++) {
    usleep(12 * 1000);
    tm_reclaim_pass();
  }
  cr_expect_eq(rt.moves, moves, "numa_maps read for the growth demotion made: %d moves", rt.moves - moves);
  cr_expect_eq(rt.stuck[a], (int)(TM_CHUNK_SIZE / 4096));
  usleep(2100 * 1000);
  tm_reclaim_pass();
  cr_expect_eq(rt.stuck[a], 0, "not read at the timed read either: its pages not moved");
  rt_free(p, 16);
}

Test(reclaim, the_lowest_tier_above_its_high_is_pageout)
{
  void *p[32];
  char *spill[] = { "TIERMALLOC_TOPTIER_MAX=0", NULL };
  rt_limits(spill);
  rt_fill(p, 32);   /* nearly all of it on tier 1 (a block may end in a chunk placed before) */
  cr_assert_geq(tm_policy_used(1), 30 * MiB);
  char *env[] = { "TIERMALLOC_TOPTIER_MAX=0", "TIERMALLOC_TIER1_HIGH=8M",
                  "TIERMALLOC_RECLAIM_HYSTERESIS=2M", "TIERMALLOC_RECLAIM_PAGEOUT_RATE=1T", NULL };
  rt_limits(env);
  tm_reclaim_pass();
  tier_stats_t s = rt_stats();
  cr_expect_geq(s.tier[1].reclaim.pageout, 24 * MiB - 2 * MiB, "%llu",
                (unsigned long long)s.tier[1].reclaim.pageout);
  cr_expect_leq(s.tier[1].reclaim.pageout, 32 * MiB);
  cr_expect_eq(s.pageout_available, 1);
  cr_expect_eq(s.tier[0].reclaim.pageout, 0, "only the lowest tier is paged out");
  rt_free(p, 32);
}

/* Swapping while a tier above has room in its budget is the kernel's failure
 * tiermalloc avoids: the lowest tier over its high by less than that room is
 * left alone. */
Test(reclaim, nothing_is_pageout_while_a_tier_above_has_room)
{
  void *p[32];
  char *spill[] = { "TIERMALLOC_TOPTIER_MAX=0", NULL };
  rt_limits(spill);
  rt_fill(p, 32);   /* all of it on tier 1 */
  char *env[] = { "TIERMALLOC_TOPTIER_MAX=64M", "TIERMALLOC_TIER1_HIGH=8M",
                  "TIERMALLOC_RECLAIM_HYSTERESIS=2M", "TIERMALLOC_RECLAIM_PAGEOUT_RATE=1T", NULL };
  rt_limits(env);
  tm_reclaim_pass();
  cr_expect_eq(rt_stats().tier[1].reclaim.pageout, 0, "tier 0 has 64 MiB of room");
  cr_expect_eq(rt.pageouts, 0);
  char *less[] = { "TIERMALLOC_TOPTIER_MAX=16M", "TIERMALLOC_TIER1_HIGH=8M",
                   "TIERMALLOC_RECLAIM_HYSTERESIS=2M", "TIERMALLOC_RECLAIM_PAGEOUT_RATE=1T", NULL };
  rt_limits(less);
  tm_reclaim_pass();
  uint64_t po = rt_stats().tier[1].reclaim.pageout;
  cr_expect_geq(po, 6 * MiB, "26 MiB over, 16 MiB of room above: %llu KiB", (unsigned long long)(po >> 10));
  cr_expect_leq(po, 12 * MiB, "26 MiB over, 16 MiB of room above: %llu KiB", (unsigned long long)(po >> 10));
  rt_free(p, 32);
}

Test(reclaim, without_swap_nothing_is_pageout_and_it_is_said_once)
{
  tmptree_put("proc/swaps", "Filename\tType\tSize\tUsed\tPriority\n");
  void *p[16];
  char *spill[] = { "TIERMALLOC_TOPTIER_MAX=0", NULL };
  rt_limits(spill);
  rt_fill(p, 16);
  char *env[] = { "TIERMALLOC_TOPTIER_MAX=0", "TIERMALLOC_TIER1_HIGH=4M", NULL };
  rt_limits(env);
  capture_begin();
  tm_reclaim_pass();
  tm_reclaim_pass();
  const char *out = capture_end();
  cr_expect_eq(capture_count_lines(out), 1, "%s", out);
  cr_expect(strstr(out, "no swap") != NULL, "%s", out);
  cr_expect_eq(rt.pageouts, 0);
  tier_stats_t s = rt_stats();
  cr_expect_eq(s.tier[1].reclaim.pageout, 0);
  cr_expect_eq(s.pageout_available, 0);
  rt_free(p, 16);
}

/* ---- each limit of the lowest tier, set alone (tier 0's max 0 leaves no
 * room above, so the lowest tier's own limit decides) ---- */

/* 32 MiB on tier 1, then the budgets of env (tier 0's max 0 added). */
static void rt_lowest_with(void **p, char **env)
{
  char *spill[] = { "TIERMALLOC_TOPTIER_MAX=0", NULL };
  rt_limits(spill);
  rt_fill(p, 32);
  cr_assert_geq(tm_policy_used(1), 30 * MiB);
  rt_limits(env);
}

Test(reclaim, the_lowest_tier_min_or_low_alone_pages_out_nothing)
{
  void *p[32];
  char *min[] = { "TIERMALLOC_TOPTIER_MAX=0", "TIERMALLOC_TIER1_MIN=8M", NULL };
  rt_lowest_with(p, min);
  tm_reclaim_pass();
  char *low[] = { "TIERMALLOC_TOPTIER_MAX=0", "TIERMALLOC_TIER1_LOW=8M", NULL };
  rt_limits(low);
  tm_reclaim_pass();
  cr_expect_eq(rt.pageouts, 0, "min and low only protect");
  cr_expect_eq(rt_stats().tier[1].reclaim.pageout, 0);
  rt_free(p, 32);
}

Test(reclaim, the_lowest_tier_above_its_high_is_pageout_at_the_rate)
{
  void *p[32];
  char *env[] = { "TIERMALLOC_TOPTIER_MAX=0", "TIERMALLOC_TIER1_HIGH=8M",
                  "TIERMALLOC_RECLAIM_PAGEOUT_RATE=2M", NULL };
  rt_lowest_with(p, env);
  tm_reclaim_pass();
  uint64_t po = rt_stats().tier[1].reclaim.pageout;
  cr_expect_gt(po, 0);
  /* The first pass's allowance (a tenth of a second at 2 MiB/s), and the
   * rest of the chunk that crossed it. */
  cr_expect_leq(po, MiB / 5 + TM_CHUNK_SIZE, "one pass at 2 MiB/s: %llu KiB",
                (unsigned long long)(po >> 10));
  rt_free(p, 32);
}

Test(reclaim, the_lowest_tier_above_its_max_is_pageout_at_once_whatever_the_rate)
{
  void *p[32];
  char *env[] = { "TIERMALLOC_TOPTIER_MAX=0", "TIERMALLOC_TIER1_MAX=8M",
                  "TIERMALLOC_RECLAIM_PAGEOUT_RATE=1M", NULL };
  rt_lowest_with(p, env);
  cr_expect(tm_reclaim_needed());
  tm_reclaim_pass();
  tier_stats_t s = rt_stats();
  uint64_t left = rt_resident_on(1);
  cr_expect_leq(left, 8 * MiB, "one pass: %llu KiB resident", (unsigned long long)(left >> 10));
  cr_expect_geq(left, 8 * MiB - TM_CHUNK_SIZE, "no further than max: %llu KiB resident",
                (unsigned long long)(left >> 10));
  cr_expect_geq(s.tier[1].reclaim.pageout, 22 * MiB);
  cr_expect_eq(s.tier[1].budget.max_not_held, 0);
  cr_expect_eq(s.reclaim_state, TIER_RECLAIM_PAGING_OUT);
  cr_expect_eq(s.tier[0].reclaim.pageout, 0);
  rt_free(p, 32);
}

Test(reclaim, the_lowest_tier_over_its_max_by_less_than_the_room_above_is_left_alone)
{
  void *p[32];
  char *env[] = { "TIERMALLOC_TOPTIER_MAX=64M", "TIERMALLOC_TIER1_MAX=8M", NULL };
  rt_lowest_with(p, env);
  tm_reclaim_pass();
  cr_expect_eq(rt.pageouts, 0, "tier 0 has 64 MiB of room");
  cr_expect_eq(rt_stats().reclaim_state, TIER_RECLAIM_IDLE);
  char *less[] = { "TIERMALLOC_TOPTIER_MAX=16M", "TIERMALLOC_TIER1_MAX=8M", NULL };
  rt_limits(less);
  tm_reclaim_pass();
  uint64_t left = rt_resident_on(1), room = 16 * MiB - tm_policy_used(0);
  cr_expect_leq(left, 8 * MiB + room, "max plus the room above (%llu KiB): %llu KiB",
                (unsigned long long)(room >> 10), (unsigned long long)(left >> 10));
  cr_expect_geq(left, 8 * MiB + room - TM_CHUNK_SIZE, "max plus the room above (%llu KiB): %llu KiB",
                (unsigned long long)(room >> 10), (unsigned long long)(left >> 10));
  rt_free(p, 32);
}

Test(reclaim, pressure_mode_pages_out_above_high_only_when_the_nodes_are_short_but_not_above_max)
{
  void *p[32];
  char *env[] = { "TIERMALLOC_RECLAIM=pressure", "TIERMALLOC_TOPTIER_MAX=0", "TIERMALLOC_TIER1_HIGH=8M",
                  "TIERMALLOC_TIER1_MAX=24M", "TIERMALLOC_RECLAIM_PAGEOUT_RATE=1T", NULL };
  rt_lowest_with(p, env);
  tm_reclaim_pass();
  uint64_t left = rt_resident_on(1);
  cr_expect(left <= 24 * MiB && left >= 22 * MiB, "at max, above high: node 1 is not short (%llu KiB)",
            (unsigned long long)(left >> 10));
  tmptree_put("sys/devices/system/node/node1/meminfo",
              "Node 1 MemTotal:        1028376 kB\nNode 1 MemFree:            9000 kB\n");
  tm_reclaim_pass();
  left = rt_resident_on(1);
  cr_expect_leq(left, 8 * MiB, "short: down to high - hysteresis (%llu KiB)", (unsigned long long)(left >> 10));
  rt_free(p, 32);
}

/* No swap, or pageout off: the max is said not to be held, once, in the
 * warning and in the stats; nothing is counted; swap turned on later lets
 * it be held. */
Test(reclaim, a_lowest_tier_max_without_swap_is_said_not_held)
{
  tmptree_put("proc/swaps", "Filename\tType\tSize\tUsed\tPriority\n");
  void *p[32];
  char *env[] = { "TIERMALLOC_TOPTIER_MAX=0", "TIERMALLOC_TIER1_MAX=8M", NULL };
  rt_lowest_with(p, env);
  capture_begin();
  tm_reclaim_pass();
  tm_reclaim_pass();
  const char *out = capture_end();
  cr_expect_eq(capture_count_lines(out), 1, "%s", out);
  cr_expect(strstr(out, "tier 1 is above its max (8.0 MiB)") != NULL, "%s", out);
  cr_expect(strstr(out, "no swap is on") != NULL, "%s", out);
  cr_expect_eq(rt.pageouts, 0);
  tier_stats_t s = rt_stats();
  cr_expect_eq(s.tier[1].reclaim.pageout, 0);
  cr_expect_eq(s.tier[1].budget.max_not_held, 1);
  cr_expect_eq(s.tier[0].budget.max_not_held, 0);
  cr_expect_eq(s.reclaim_state, TIER_RECLAIM_MAX_NOT_HELD);
  tmptree_put("proc/swaps", "Filename\tType\tSize\tUsed\tPriority\n/dev/zram0 partition\t262140\t0\t100\n");
  tm_reclaim_pass();
  s = rt_stats();
  cr_expect_eq(s.tier[1].budget.max_not_held, 0, "swap is on now");
  cr_expect_leq(rt_resident_on(1), 8 * MiB);
  rt_free(p, 32);
}

Test(reclaim, a_lowest_tier_max_with_pageout_off_is_said_not_held)
{
  void *p[32];
  char *env[] = { "TIERMALLOC_TOPTIER_MAX=0", "TIERMALLOC_TIER1_MAX=8M",
                  "TIERMALLOC_RECLAIM_PAGEOUT=0", NULL };
  rt_lowest_with(p, env);
  cr_expect(tm_reclaim_needed(), "the thread runs to say so");
  capture_begin();
  tm_reclaim_pass();
  const char *out = capture_end();
  cr_expect(strstr(out, "TIERMALLOC_RECLAIM_PAGEOUT is off") != NULL, "%s", out);
  cr_expect_eq(rt.pageouts, 0);
  cr_expect_eq(rt_stats().tier[1].budget.max_not_held, 1);
  rt_free(p, 32);
}

/* ---- promotion (the accessed bits; their scan is tests/unit/test_hotness.c,
 * so these set the chunks' ages by hand). Whole chunks: these turn pieces
 * off (TIERMALLOC_HOTNESS_PIECES=0), under which a chunk in huge pages or
 * less than half hot is never promoted whole; the pieces' tests follow at
 * the end. ---- */

static void rt_accessed_tree(void)
{
  tmptree_put("proc/self/clear_refs", "");
  tmptree_put("proc/self/smaps", "10000-12000 rw-p 00000000 00:00 0 \nReferenced:          0 kB\n");
}

/* c hot (accessed now, and seen at the bits' last two reads) or cold (not
 * for a minute). */
static void rt_heat_one(tm_chunk_t *c, bool hot, uint16_t now)
{
  atomic_store(&c->age, (uint16_t)(hot ? now : now - 600));
  if (hot) atomic_fetch_or(&c->flags, TM_CHUNK_SEEN | TM_CHUNK_STEADY);
  else atomic_fetch_and(&c->flags, (uint16_t)~(TM_CHUNK_SEEN | TM_CHUNK_STEADY));
}

/* Every committed chunk hot or cold. */
static void rt_heat_all(bool hot)
{
  tm_hotness_tick();
  uint16_t now = atomic_load(&tm_hotness_now);
  for (unsigned i = 0; i < tm_ranges.n; i++)
    for (uintptr_t a = tm_range_lo(i); a < tm_range_end(i); a += TM_CHUNK_SIZE)
      if (tm_chunk_bytes(tm_chunk_of((void *)a))) rt_heat_one(tm_chunk_of((void *)a), hot, now);
}

/* The chunks of blocks b[first..last) (2 MiB, one chunk each) hot or cold. */
static void rt_heat(void **b, int first, int last, bool hot)
{
  tm_hotness_tick();
  uint16_t now = atomic_load(&tm_hotness_now);
  for (int i = first; i < last; i++) rt_heat_one(tm_chunk_of(b[i]), hot, now);
}

/* The chunks of blocks b[first..last) as hot as `heat` (hotness.h). */
static void rt_set_heat(void **b, int first, int last, unsigned heat)
{
  for (int i = first; i < last; i++) atomic_store(&tm_chunk_of(b[i])->heat, (uint8_t)heat);
}

/* Every committed chunk of tier 0 hot, as hot as `heat`; every one below
 * cold. */
static void rt_heat_tiers(unsigned heat)
{
  tm_hotness_tick();
  uint16_t now = atomic_load(&tm_hotness_now);
  for (unsigned i = 0; i < tm_ranges.n; i++)
    for (uintptr_t a = tm_range_lo(i); a < tm_range_end(i); a += TM_CHUNK_SIZE) {
      tm_chunk_t *c = tm_chunk_of((void *)a);
      if (!tm_chunk_bytes(c)) continue;
      rt_heat_one(c, tm_chunk_tier(c) == 0, now);
      atomic_store(&c->heat, (uint8_t)(tm_chunk_tier(c) == 0 ? heat : 0));
    }
}

static unsigned rt_chunks_on(void **b, int first, int last, unsigned t)
{
  unsigned n = 0;
  for (int i = first; i < last; i++) n += tm_chunk_tier(tm_chunk_of(b[i])) == t;
  return n;
}

/* n blocks of 2 MiB, one chunk each, every page written; with `only`
 * (a tier), only blocks whose chunk is there (a chunk placed earlier by
 * other memory may be on another: those blocks are given back). */
static void rt_fill_chunks(void **b, int n, int only)
{
  void *spare[16];
  int ns = 0;
  for (int i = 0; i < n;) {
    void *p = tmje_mallocx(TM_CHUNK_SIZE, MALLOCX_TCACHE_NONE | MALLOCX_ALIGN(TM_CHUNK_SIZE));
    cr_assert_not_null(p);
    memset(p, i + 1, TM_CHUNK_SIZE);
    if (only < 0 || tm_chunk_tier(tm_chunk_of(p)) == (unsigned)only) b[i++] = p;
    else if (ns < 16) spare[ns++] = p;
    else cr_assert_fail("blocks keep landing on other tiers");
  }
  for (int i = 0; i < ns; i++) tmje_dallocx(spare[i], MALLOCX_TCACHE_NONE);
}

/* 16 chunks on tier 1, the first 4 hot and the rest cold (as is everything
 * else), under `env`, after enough scans of the accessed bits that cold can
 * be told. */
static void rt_hot_below(void **b, char **env)
{
  rt_accessed_tree();
  char *spill[] = { "TIERMALLOC_TOPTIER_MAX=0", NULL };
  rt_limits(spill);
  rt_fill_chunks(b, 16, 1);
  rt_limits(env);
  for (int i = 0; i <= (int)TM_HOTNESS_COLD_SCANS; i++) {
    tm_hotness_scan(TM_SCAN_DUE);
    usleep(110 * 1000);
  }
  rt_heat_all(false);
  rt_heat(b, 0, 4, true);
}

Test(reclaim, hot_chunks_below_move_up_into_the_room_under_high)
{
  void *p[16];
  char *env[] = { "TIERMALLOC_HOTNESS=accessed", "TIERMALLOC_HOTNESS_PIECES=0", "TIERMALLOC_TOPTIER_HIGH=64M",
                  "TIERMALLOC_HOTNESS_INTERVAL_MS=100", NULL };
  rt_hot_below(p, env);
  cr_assert_str_eq(tm_hotness_signal(), "accessed bits");
  tm_reclaim_pass();
  cr_expect_eq(rt_chunks_on(p, 0, 4, 0), 4, "the 4 hot chunks are on tier 0");
  cr_expect_eq(rt_chunks_on(p, 4, 16, 0), 0, "no cold chunk moved up");
  tier_stats_t s = rt_stats();
  cr_expect_eq(s.tier[0].reclaim.promoted, 8 * MiB, "%llu", (unsigned long long)s.tier[0].reclaim.promoted);
  cr_expect_eq(s.reclaim_state, TIER_RECLAIM_PROMOTING);
  cr_expect_eq(s.tier[0].reclaim.demoted, 0);
  rt_free(p, 16);
}

Test(reclaim, a_chunk_seen_at_one_read_only_is_not_promoted)
{
  void *p[16];
  char *env[] = { "TIERMALLOC_HOTNESS=accessed", "TIERMALLOC_HOTNESS_PIECES=0", "TIERMALLOC_TOPTIER_HIGH=64M",
                  "TIERMALLOC_HOTNESS_INTERVAL_MS=100", NULL };
  rt_hot_below(p, env);
  for (int i = 0; i < 4; i++) atomic_fetch_and(&tm_chunk_of(p[i])->flags, (uint16_t)~TM_CHUNK_STEADY);
  tm_reclaim_pass();
  cr_expect_eq(rt_chunks_on(p, 0, 16, 0), 0, "written once, as a fill is: not promoted");
  cr_expect_eq(rt_stats().tier[0].reclaim.promoted, 0);
  rt_free(p, 16);
}

Test(reclaim, promotion_stops_short_of_high_less_the_hysteresis)
{
  void *p[16];
  char *env[] = { "TIERMALLOC_HOTNESS=accessed", "TIERMALLOC_HOTNESS_PIECES=0", "TIERMALLOC_TOPTIER_HIGH=8M",
                  "TIERMALLOC_RECLAIM_HYSTERESIS=2M", "TIERMALLOC_HOTNESS_INTERVAL_MS=100", NULL };
  rt_hot_below(p, env);
  rt_heat_all(true);   /* nothing on tier 0 cold: room alone */
  uint64_t before = tm_policy_used(0);
  tm_reclaim_pass();
  tm_reclaim_pass();
  cr_expect_leq(tm_policy_used(0), 6 * MiB, "used %llu KiB (before %llu KiB)",
                (unsigned long long)(tm_policy_used(0) >> 10), (unsigned long long)(before >> 10));
  cr_expect_geq(rt_chunks_on(p, 0, 4, 0), 1);
  cr_expect_eq(rt_stats().tier[0].reclaim.demoted, 0, "nothing on tier 0 is cold: no exchange");
  rt_free(p, 16);
}

Test(reclaim, a_full_tier_exchanges_its_cold_chunks_for_hot_ones_below)
{
  void *top[8], *p[16];
  rt_accessed_tree();
  char *first[] = { "TIERMALLOC_HOTNESS=accessed", "TIERMALLOC_TOPTIER_HIGH=64M", NULL };
  rt_limits(first);             /* so its chunks are measured too */
  rt_fill_chunks(top, 8, -1);   /* 16 MiB on tier 0 */
  char *env[] = { "TIERMALLOC_HOTNESS=accessed", "TIERMALLOC_HOTNESS_PIECES=0", "TIERMALLOC_TOPTIER_HIGH=16M",
                  "TIERMALLOC_HOTNESS_INTERVAL_MS=100", NULL };
  rt_hot_below(p, env);
  uint64_t used0 = tm_policy_used(0);
  tm_reclaim_pass();
  cr_expect_eq(rt_chunks_on(p, 0, 4, 0), 4, "the hot chunks went up");
  tier_stats_t s = rt_stats();
  cr_expect_geq(s.tier[0].reclaim.demoted, 8 * MiB - 64 * 1024, "as many cold ones went down");
  cr_expect_leq(tm_policy_used(0), used0 + TM_CHUNK_SIZE, "tier 0 holds what it held");
  rt_free(p, 16);
  rt_free(top, 8);
}

/* A tier placement filled to its high: each chunk that goes up takes one
 * down, not the hysteresis with it (bench/tier-quality's zipfian heap lost
 * a fifth of the accesses tier 0 served when the first exchange took four
 * chunks down for one up). */
Test(reclaim, an_exchange_into_a_full_tier_demotes_as_much_as_it_promotes)
{
  void *top[7], *p[16];
  rt_accessed_tree();
  char *first[] = { "TIERMALLOC_HOTNESS=accessed", "TIERMALLOC_TOPTIER_HIGH=64M", NULL };
  rt_limits(first);
  rt_fill_chunks(top, 7, -1);   /* 14 MiB on tier 0: under high, over high less the hysteresis */
  char *env[] = { "TIERMALLOC_HOTNESS=accessed", "TIERMALLOC_HOTNESS_PIECES=0", "TIERMALLOC_TOPTIER_HIGH=16M",
                  "TIERMALLOC_RECLAIM_HYSTERESIS=4M", "TIERMALLOC_HOTNESS_INTERVAL_MS=100", NULL };
  rt_hot_below(p, env);
  uint64_t used0 = tm_policy_used(0);
  tm_reclaim_pass();
  cr_expect_eq(rt_chunks_on(p, 0, 4, 0), 4, "the hot chunks went up");
  tier_stats_t s = rt_stats();
  cr_expect_leq(s.tier[0].reclaim.demoted, 8 * MiB + 64 * 1024, "%llu KiB demoted for 8 MiB promoted",
                (unsigned long long)(s.tier[0].reclaim.demoted >> 10));
  cr_expect_geq(tm_policy_used(0) + 64 * 1024, used0, "tier 0 holds what it held: %llu of %llu KiB",
                (unsigned long long)(tm_policy_used(0) >> 10), (unsigned long long)(used0 >> 10));
  rt_free(p, 16);
  rt_free(top, 7);
}

Test(reclaim, a_chunk_moved_stays_through_the_cool_down_and_hot_data_is_never_exchanged)
{
  void *p[16];
  char *env[] = { "TIERMALLOC_HOTNESS=accessed", "TIERMALLOC_HOTNESS_PIECES=0", "TIERMALLOC_TOPTIER_HIGH=8M",
                  "TIERMALLOC_RECLAIM_HYSTERESIS=2M", "TIERMALLOC_HOTNESS_INTERVAL_MS=100", NULL };
  rt_hot_below(p, env);
  rt_heat_all(true);
  rt_heat(p, 4, 16, false);
  tm_reclaim_pass();
  unsigned up = rt_chunks_on(p, 0, 4, 0);
  cr_assert_geq(up, 1);
  /* Hot everywhere: the tier is full, nothing on it is cold to exchange. */
  rt_heat_all(true);
  tm_reclaim_pass();
  cr_expect_eq(rt_stats().tier[0].reclaim.demoted, 0, "a hot chunk is never exchanged");
  /* What went up turns cold at once and more turns hot below: the tier is
   * full, and its only cold chunks moved moments ago. */
  rt_heat_all(false);
  rt_heat(p, 0, 16, true);
  for (int i = 0; i < 4; i++)
    if (tm_chunk_tier(tm_chunk_of(p[i])) == 0) rt_heat(p, i, i + 1, false);
  tm_reclaim_pass();
  cr_expect_eq(rt_chunks_on(p, 0, 4, 0), up, "nothing moved back down within the cool-down");
  cr_expect_eq(rt_stats().tier[0].reclaim.demoted, 0);
  rt_free(p, 16);
}

static int rt_by_address(const void *a, const void *b)
{
  uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
  return (x > y) - (x < y);
}

/* Tier 0 full: 8 chunks top[] (of all[9]: start-up metadata can share a
 * chunk, which reclaim never moves) and a chunk's worth short of high less
 * the hysteresis (2 MiB); 16 chunks p[] on tier 1; the accessed bits read
 * often enough to tell cold; tier 0 hot (heat 125), the rest cold. With
 * top0_left, top[0]'s chunk holds only that many bytes committed (as after
 * jemalloc's purge; rt_full_top_end commits them again). */
static void rt_full_top_with(void **all, void **top, void **p, uint32_t top0_left)
{
  rt_accessed_tree();
  char *first[] = { "TIERMALLOC_HOTNESS=accessed", "TIERMALLOC_TOPTIER_HIGH=64M", NULL };
  rt_limits(first);
  rt_fill_chunks(all, 9, 0);
  int ntop = 0;
  for (int i = 0; i < 9; i++)
    if (ntop < 8 && !(atomic_load(&tm_chunk_of(all[i])->flags) & TM_CHUNK_KEEP)) top[ntop++] = all[i];
  cr_assert_eq(ntop, 8);
  char *spill[] = { "TIERMALLOC_HOTNESS=accessed", "TIERMALLOC_TOPTIER_MAX=0", NULL };
  rt_limits(spill);
  rt_fill_chunks(p, 16, 1);
  if (top0_left) tm_chunk_decommit_bytes(tm_chunk_of(top[0]), TM_CHUNK_SIZE - top0_left);
  char high[64];
  snprintf(high, sizeof high, "TIERMALLOC_TOPTIER_HIGH=%llu", (unsigned long long)(tm_policy_used(0) + 3 * MiB));
  char *env[] = { "TIERMALLOC_HOTNESS=accessed", "TIERMALLOC_HOTNESS_PIECES=0", high, "TIERMALLOC_HOTNESS_INTERVAL_MS=100", NULL };
  rt_limits(env);
  for (int i = 0; i <= (int)TM_HOTNESS_COLD_SCANS; i++) {
    tm_hotness_scan(TM_SCAN_DUE);
    usleep(110 * 1000);
  }
  rt_heat_tiers(125);
}

static void rt_full_top(void **all, void **top, void **p)
{
  rt_full_top_with(all, top, p, 0);
}

/* A tier full of chunks the accessed bits all see (none cold, as under a
 * load that touches every chunk in each interval): a chunk below much
 * hotter than the least hot on top takes its place; one about as hot does
 * not. */
Test(reclaim, a_full_tier_exchanges_its_least_hot_chunks_for_much_hotter_ones_below)
{
  void *all[9], *top[8], *p[16];
  rt_full_top(all, top, p);
  rt_set_heat(top, 0, 2, 30);   /* the two least hot on top */
  rt_set_heat(top, 2, 8, 115);
  rt_heat(p, 0, 4, true);
  rt_set_heat(p, 0, 2, 120);    /* much hotter */
  rt_set_heat(p, 2, 4, 35);     /* hotter, within the margin */
  uint64_t used0 = tm_policy_used(0);
  tm_reclaim_pass();
  cr_expect_eq(rt_chunks_on(p, 0, 2, 0), 2, "the much hotter chunks went up");
  cr_expect_eq(rt_chunks_on(p, 2, 16, 0), 0, "none about as hot as what is on top, none cold");
  cr_expect_eq(rt_chunks_on(top, 0, 2, 1), 2, "the two least hot went down");
  cr_expect_eq(rt_chunks_on(top, 2, 8, 0), 6, "the rest stayed");
  cr_expect_leq(tm_policy_used(0), used0 + TM_CHUNK_SIZE, "tier 0 holds what it held");
  cr_expect_eq(rt_stats().tier[0].reclaim.promoted, 4 * MiB);
  rt_free(p, 16);
  rt_free(all, 9);
}

/* A heat is how widely a chunk is used, not how much: below four times the
 * heat of what it would replace, a chunk stays where it is (on a zipfian
 * heap, exchanges at heats up to three times apart lost tier 0 a tenth of
 * the accesses it served). Four times: the test above. */
Test(reclaim, a_chunk_three_times_as_hot_as_the_least_hot_on_top_stays_below)
{
  void *all[9], *top[8], *p[16];
  rt_full_top(all, top, p);
  rt_set_heat(top, 0, 2, 30);   /* the two least hot on top */
  rt_set_heat(top, 2, 8, 125);
  rt_heat(p, 0, 4, true);
  rt_set_heat(p, 0, 4, 90);
  tm_reclaim_pass();
  cr_expect_eq(rt_chunks_on(p, 0, 16, 0), 0, "nothing three times as hot went up");
  cr_expect_eq(rt_chunks_on(top, 0, 8, 0), 8, "nothing on top went down");
  cr_expect_eq(rt_stats().tier[0].reclaim.demoted, 0);
  rt_free(p, 16);
  rt_free(all, 9);
}

/* Heat in huge pages does not grade a chunk (one accessed bit for all of
 * it): a chunk below in huge pages is exchanged for one on top in huge
 * pages well below its heat, never for a graded one, however cold. */
Test(reclaim, heat_read_from_huge_pages_compares_only_with_heat_read_from_huge_pages)
{
  void *all[9], *top[8], *p[16];
  rt_full_top(all, top, p);
  rt_set_heat(top, 0, 2, 20 | TM_HOTNESS_HEAT_HUGE);
  rt_set_heat(top, 2, 8, 10);   /* graded, and colder */
  rt_heat(p, 0, 4, true);
  rt_set_heat(p, 0, 2, 127 | TM_HOTNESS_HEAT_HUGE);
  rt_set_heat(p, 2, 4, 15);     /* graded, within the margin of the graded on top */
  cr_assert(!tm_hotness_graded(tm_chunk_of(p[0])) && tm_hotness_graded(tm_chunk_of(top[2])));
  cr_assert_eq(tm_hotness_heat(tm_chunk_of(p[0])), 127);
  tm_reclaim_pass();
  cr_expect_eq(rt_chunks_on(p, 0, 2, 0), 2, "the two in huge pages went up");
  cr_expect_eq(rt_chunks_on(top, 0, 2, 1), 2, "in place of the two in huge pages on top");
  cr_expect_eq(rt_chunks_on(top, 2, 8, 0), 6, "not of the graded ones, though colder");
  cr_expect_eq(rt_chunks_on(p, 2, 16, 0), 0);
  rt_free(p, 16);
  rt_free(all, 9);
}

/* Among equally cold chunks on top, an exchange takes the fullest: a chunk
 * that holds a few KiB frees next to nothing (in the VM, four such made no
 * room for one chunk, and nothing moved up). */
Test(reclaim, an_exchange_takes_the_fullest_of_equally_cold_chunks)
{
  void *all[9], *top[8], *p[16];
  const uint32_t left = 64 * 1024;
  rt_full_top_with(all, top, p, left);
  tm_chunk_t *small = tm_chunk_of(top[0]);
  rt_heat(top, 0, 3, false);
  rt_set_heat(top, 0, 3, 0);
  rt_heat(p, 0, 1, true);
  rt_set_heat(p, 0, 1, 100);
  tm_reclaim_pass();
  cr_expect_eq(rt_chunks_on(p, 0, 1, 0), 1, "the hot chunk went up");
  cr_expect_eq(tm_chunk_tier(small), 0u, "the chunk of a few KiB stayed");
  cr_expect_eq(rt_chunks_on(top, 1, 3, 1), 1, "one full cold chunk made the room");
  tm_chunk_commit_bytes(small, TM_CHUNK_SIZE - left);
  rt_free(p, 16);
  rt_free(all, 9);
}

Test(reclaim, promotion_takes_the_hottest_chunks_first)
{
  void *p[16];
  char *env[] = { "TIERMALLOC_HOTNESS=accessed", "TIERMALLOC_HOTNESS_PIECES=0", "TIERMALLOC_TOPTIER_HIGH=64M",
                  "TIERMALLOC_RECLAIM_PROMOTE_RATE=40M", "TIERMALLOC_HOTNESS_INTERVAL_MS=100", NULL };
  rt_hot_below(p, env);
  rt_set_heat(p, 0, 4, 25);
  rt_set_heat(p, 2, 3, 100);
  rt_set_heat(p, 3, 4, 75);
  tm_reclaim_pass();   /* the first pass accrues a tenth of a second: two chunks */
  cr_expect_eq(tm_chunk_tier(tm_chunk_of(p[2])), 0, "the hottest went up");
  cr_expect_eq(tm_chunk_tier(tm_chunk_of(p[3])), 0, "and the next");
  cr_expect_eq(rt_chunks_on(p, 0, 2, 0), 0, "the least hot wait");
  rt_free(p, 16);
}

/* 16 chunks on tier 0, p[] in address order, the accessed bits read often
 * enough to tell cold, under a max `over` chunks below what tier 0 holds
 * (returned). */
static uint64_t rt_sorted_over_max(void **p, unsigned over)
{
  rt_accessed_tree();
  rt_fill_chunks(p, 16, 0);
  qsort(p, 16, sizeof p[0], rt_by_address);
  char max[64];
  uint64_t limit = tm_policy_used(0) - over * TM_CHUNK_SIZE;
  snprintf(max, sizeof max, "TIERMALLOC_TOPTIER_MAX=%llu", (unsigned long long)limit);
  char *env[] = { "TIERMALLOC_HOTNESS=accessed", "TIERMALLOC_HOTNESS_INTERVAL_MS=100", max, NULL };
  rt_limits(env);
  for (int i = 0; i <= (int)TM_HOTNESS_COLD_SCANS; i++) {
    usleep(110 * 1000);
    tm_hotness_tick();
    tm_hotness_scan(TM_SCAN_DUE);
  }
  return limit;
}

/* Every chunk of the tier seen in the last interval: demotion takes the least
 * hot first, wherever they are. */
Test(reclaim, among_chunks_all_seen_the_least_hot_are_demoted_first)
{
  void *p[16];
  uint64_t limit = rt_sorted_over_max(p, 4);
  rt_heat_tiers(125);
  rt_set_heat(p, 12, 16, 10);   /* the highest addresses, the least hot */
  tm_reclaim_pass();
  cr_expect_leq(tm_policy_used(0), limit, "down to the max");
  cr_expect_eq(rt_chunks_on(p, 12, 16, 1), 4, "the least hot went down");
  cr_expect_eq(rt_chunks_on(p, 0, 12, 0), 12, "the hotter, at lower addresses, stayed");
  rt_free(p, 16);
}

/* The accessed bits' scan late (a busy pass puts it off), so the chunks seen
 * at it are nearly as old as those not seen: old enough to share a log2
 * bucket of age with them. The unseen still go first, all of them, even from
 * higher addresses. */
Test(reclaim, a_chunk_seen_in_the_last_interval_is_demoted_after_every_unseen_one)
{
  void *p[16];
  uint64_t limit = rt_sorted_over_max(p, 8);
  uint16_t read = atomic_load(&tm_hotness_now), since = 0;
  while (since < 17) {   /* 17..31 ticks since the scan: bucket 5 */
    usleep(50 * 1000);
    tm_hotness_tick();
    since = (uint16_t)(atomic_load(&tm_hotness_now) - read);
  }
  cr_assert_lt(since, 25, "the clock jumped %u ticks", since);
  for (unsigned i = 0; i < tm_ranges.n; i++)   /* unseen since two ticks before the scan */
    for (uintptr_t a = tm_range_lo(i); a < tm_range_end(i); a += TM_CHUNK_SIZE)
      if (tm_chunk_bytes(tm_chunk_of((void *)a))) atomic_store(&tm_chunk_of((void *)a)->age, (uint16_t)(read - 2));
  for (int i = 0; i < 4; i++) atomic_store(&tm_chunk_of(p[i])->age, read);   /* seen at it */
  unsigned seen = tm_hotness_age(tm_chunk_of(p[0])), unseen = tm_hotness_age(tm_chunk_of(p[4]));
  cr_assert(tm_hotness_hot(tm_chunk_of(p[0])) && !tm_hotness_hot(tm_chunk_of(p[4])));
  cr_assert_eq(seen >> 4, unseen >> 4, "the same bucket: ages %u and %u", seen, unseen);
  tm_reclaim_pass();
  cr_expect_leq(tm_policy_used(0), limit, "unseen chunks demoted down to the max");
  cr_expect_eq(rt_chunks_on(p, 0, 4, 0), 4, "the 4 seen, at the lowest addresses, stay on top");
  rt_free(p, 16);
}

/* 16 chunks on tier 0, every one seen at the last read of the accessed bits
 * (as data written just before is), under `limit` (an env entry) set 8 chunks
 * below what tier 0 holds. */
static void rt_all_seen(void **p, const char *limit)
{
  rt_accessed_tree();
  rt_fill_chunks(p, 16, 0);
  char lim[64];
  snprintf(lim, sizeof lim, "%s=%llu", limit, (unsigned long long)(tm_policy_used(0) - 8 * TM_CHUNK_SIZE));
  char *env[] = { "TIERMALLOC_HOTNESS=accessed", "TIERMALLOC_HOTNESS_INTERVAL_MS=100",
                  "TIERMALLOC_RECLAIM_HYSTERESIS=2M", lim, NULL };
  rt_limits(env);
  for (int i = 0; i <= (int)TM_HOTNESS_COLD_SCANS; i++) {
    usleep(110 * 1000);
    tm_hotness_tick();
    tm_hotness_scan(TM_SCAN_DUE);
  }
  rt_heat_all(true);
  cr_assert(tm_hotness_hot(tm_chunk_of(p[0])));
}

Test(reclaim, above_high_chunks_seen_in_the_last_interval_wait_for_the_next_read_of_the_bits)
{
  void *p[16];
  rt_all_seen(p, "TIERMALLOC_TOPTIER_HIGH");
  uint64_t before = tm_policy_used(0);
  tm_reclaim_pass();
  cr_expect_eq(tm_policy_used(0), before, "nothing demoted before the bits are read again");
  cr_expect_eq(rt_stats().reclaim_state, TIER_RECLAIM_IDLE, "nothing done yet");
  /* A pass reads them once the interval is over (its scan not put off while
   * demotion waits); the fixture's smaps has no page referenced: written
   * once, not read since. */
  for (int i = 0; i < 4 && tm_policy_used(0) == before; i++) {
    usleep(110 * 1000);
    tm_reclaim_pass();
  }
  cr_expect_lt(tm_policy_used(0), before - 6 * TM_CHUNK_SIZE, "demoted once the bits were read: %llu KiB",
               (unsigned long long)(tm_policy_used(0) >> 10));
  rt_free(p, 16);
}

Test(reclaim, the_pass_after_the_read_demotion_waited_for_comes_at_once)
{
  void *p[16];
  rt_all_seen(p, "TIERMALLOC_TOPTIER_HIGH");
  uint64_t before = tm_policy_used(0);
  cr_expect_gt(tm_reclaim_pass(), 0, "nothing to do before the read");
  uint64_t wait = 1;
  for (int i = 0; i < 4 && wait != 0 && tm_policy_used(0) == before; i++) {
    usleep(110 * 1000);
    wait = tm_reclaim_pass();
  }
  cr_expect_eq(wait, 0, "the pass that read the bits asks for the next at once");
  cr_expect_eq(tm_policy_used(0), before, "nothing demoted before the read");
  tm_reclaim_pass();
  cr_expect_lt(tm_policy_used(0), before - 6 * TM_CHUNK_SIZE, "demoted by the very next pass: %llu KiB",
               (unsigned long long)(tm_policy_used(0) >> 10));
  rt_free(p, 16);
}

Test(reclaim, above_max_chunks_seen_in_the_last_interval_do_not_wait)
{
  void *p[16];
  rt_all_seen(p, "TIERMALLOC_TOPTIER_MAX");
  uint64_t before = tm_policy_used(0);
  tm_reclaim_pass();
  cr_expect_leq(tm_policy_used(0), before - 8 * TM_CHUNK_SIZE, "max held at once");
  rt_free(p, 16);
}

Test(reclaim, the_commit_age_promotes_nothing)
{
  void *p[16];
  char *env[] = { "TIERMALLOC_HOTNESS=commit-age", "TIERMALLOC_TOPTIER_HIGH=64M", NULL };
  rt_hot_below(p, env);
  tm_reclaim_pass();
  cr_expect_eq(rt_stats().tier[0].reclaim.promoted, 0);
  cr_expect_eq(rt_chunks_on(p, 0, 16, 0), 0);
  rt_free(p, 16);
}

Test(reclaim, the_promotion_rate_bounds_what_a_pass_moves_up)
{
  void *p[16];
  char *env[] = { "TIERMALLOC_HOTNESS=accessed", "TIERMALLOC_HOTNESS_PIECES=0", "TIERMALLOC_TOPTIER_HIGH=64M",
                  "TIERMALLOC_RECLAIM_PROMOTE_RATE=4M", "TIERMALLOC_HOTNESS_INTERVAL_MS=100", NULL };
  rt_hot_below(p, env);
  tm_reclaim_pass();   /* the first pass accrues a tenth of a second: less than a chunk */
  cr_expect_eq(rt_stats().tier[0].reclaim.promoted, 0);
  rt_free(p, 16);
}

/* ---- hints and pins (hint.h) ---- */

Test(reclaim, a_pin_beyond_the_top_tiers_min_is_refused_and_pins_nothing)
{
  void *b[4];
  char *env[] = { "TIERMALLOC_TOPTIER_MIN=4M", NULL };
  rt_limits(env);
  rt_fill_chunks(b, 4, -1);
  cr_expect_eq(tm_pin(b[0], TM_CHUNK_SIZE), 0);
  cr_expect_eq(tm_pin(b[1], 1), 0, "a byte pins its chunk");
  cr_expect_eq(tm_pinned(), 4 * MiB);
  cr_expect_eq(tm_pin(b[2], TM_CHUNK_SIZE), ENOSPC, "past tier 0's min");
  cr_expect_eq(tm_pinned(), 4 * MiB, "nothing more pinned");
  cr_expect_eq(tm_pin(b[0], TM_CHUNK_SIZE), 0, "pinned again: no more counted");
  cr_expect_eq(tm_unpin(b[0], TM_CHUNK_SIZE), 0);
  cr_expect_eq(tm_pin(b[2], TM_CHUNK_SIZE), 0, "room again");
  int local;
  cr_expect_eq(tm_pin(&local, sizeof local), EINVAL, "not tiermalloc's memory");
  cr_expect_eq(tm_pin(b[3], 0), EINVAL);
  rt_free(b, 4);
}

Test(reclaim, a_pinned_chunk_moves_to_the_top_tier_and_is_never_moved_down)
{
  void *b[8];
  char *spill[] = { "TIERMALLOC_TOPTIER_MAX=0", NULL };
  rt_limits(spill);
  rt_fill_chunks(b, 8, 1);
  char *env[] = { "TIERMALLOC_TOPTIER_MIN=4M", "TIERMALLOC_TOPTIER_MAX=4M", NULL };
  rt_limits(env);
  cr_assert_eq(tm_pin(b[2], TM_CHUNK_SIZE), 0);
  cr_expect_eq(tm_chunk_tier(tm_chunk_of(b[2])), 0, "moved up at once");
  cr_expect_eq(rt.node[rt_index(b[2])], 0, "its pages too");
  char *none[] = { "TIERMALLOC_TOPTIER_MIN=4M", "TIERMALLOC_TOPTIER_MAX=4M", "TIERMALLOC_RECLAIM_RATE=1T", NULL };
  rt_limits(none);
  rt_heat_all(false);
  for (int i = 0; i < 3; i++) tm_reclaim_pass();
  cr_expect_eq(tm_chunk_tier(tm_chunk_of(b[2])), 0, "pinned: never demoted");
  cr_expect_eq(tm_unpin(b[2], TM_CHUNK_SIZE), 0);
  cr_expect_eq(tm_pinned(), 0);
  rt_limits(spill);
  rt_heat_all(false);
  tm_reclaim_pass();
  cr_expect_eq(tm_chunk_tier(tm_chunk_of(b[2])), 1, "unpinned: demoted like the rest");
  rt_free(b, 8);
}

Test(reclaim, a_pin_whose_move_lost_a_race_is_moved_up_at_the_next_pass)
{
  void *b[4];
  char *spill[] = { "TIERMALLOC_TOPTIER_MAX=0", NULL };
  rt_limits(spill);
  rt_fill_chunks(b, 4, 1);
  char *env[] = { "TIERMALLOC_TOPTIER_MIN=4M", "TIERMALLOC_TOPTIER_MAX=4M", NULL };
  rt_limits(env);
  tm_chunk_t *c = tm_chunk_of(b[1]);
  cr_assert(tm_chunk_hold(c), "held, as reclaim holds a chunk it moves");
  cr_assert_eq(tm_pin(b[1], TM_CHUNK_SIZE), 0, "the pin is taken");
  cr_expect_eq(tm_chunk_tier(c), 1, "its move found the chunk held (EBUSY)");
  tm_chunk_release(c);
  tm_reclaim_pass();
  cr_expect_eq(tm_chunk_tier(c), 0, "moved up by the next pass");
  cr_expect_eq(rt.node[rt_index(b[1])], 0, "its pages too");
  cr_expect_eq(tm_unpin(b[1], TM_CHUNK_SIZE), 0);
  rt_free(b, 4);
}

Test(reclaim, hints_make_chunks_young_or_cold)
{
  void *b[3];
  tm_hotness_tick();
  rt_fill_chunks(b, 3, -1);
  tm_hotness_tick();
  tm_chunk_t *c0 = tm_chunk_of(b[0]), *c1 = tm_chunk_of(b[1]);
  cr_expect_eq(tm_hint(b[0], TM_CHUNK_SIZE, TIER_HINT_COLD), 0);
  cr_expect_eq(tm_hotness_age(c0), TM_HOTNESS_AGE_MAX, "cold: as old as can be");
  cr_expect_eq(tm_hint(b[0], TM_CHUNK_SIZE, TIER_HINT_HOT), 0);
  cr_expect_eq(tm_hotness_age(c0), 0, "hot: young");
  cr_expect_eq(tm_hint((char *)b[1] + 4096, TM_CHUNK_SIZE - 8192, TIER_HINT_COLD), 0);
  cr_expect_lt(tm_hotness_age(c1), TM_HOTNESS_AGE_MAX, "a chunk only partly in the range is not called cold");
  cr_expect_eq(tm_hint(b[2], TM_CHUNK_SIZE, 3), EINVAL);
  int local;
  cr_expect_eq(tm_hint(&local, sizeof local, TIER_HINT_HOT), EINVAL);
  rt_free(b, 3);
}

/* Each chunk moved away from its neighbours' tier costs up to two VMAs. */
Test(reclaim, vmas_stay_under_half_of_max_map_count)
{
  tmptree_put("proc/sys/vm/max_map_count", "8\n");
  void *p[32];
  rt_fill(p, 32);
  char *env[] = { "TIERMALLOC_TOPTIER_MAX=0", NULL };
  rt_limits(env);
  for (int i = 0; i < 4; i++) tm_reclaim_pass();
  unsigned runs = 0, prev = 0;
  for (uintptr_t a = tm_range_lo(0); a < tm_range_end(0); a += TM_CHUNK_SIZE) {
    unsigned t = tm_chunk_tier(tm_chunk_of((void *)a));
    runs += t != prev;
    prev = t;
  }
  cr_expect_leq(runs, 4 + 2, "%u boundaries between tiers in range 0", runs);
  cr_expect_gt(rt_stats().tier[0].reclaim.demoted, 0, "it still demotes next to what moved");
  rt_free(p, 32);
}

/* Tier 0's high: 50% of memory.high 64M = 32M, shared by the cgroup. */
Test(reclaim, a_process_alone_in_its_cgroup_keeps_what_its_own_budget_allows)
{
  void *p[24];
  rt_fill(p, 24);
  uint64_t used = tm_policy_used(0);
  tmptree_put("sys/fs/cgroup/app/worker/memory.high", "67108864\n");
  rt_numa_stat(used + 2 * MiB, 0);
  char *env[] = { "TIERMALLOC_TOPTIER_RATIO=50%", "TIERMALLOC_RECLAIM_RATE=1T", NULL };
  rt_limits_cgroup(env);
  cr_assert_eq(tm_budget_get(0, TM_LIMIT_HIGH), 32 * MiB);
  tm_reclaim_pass();
  cr_expect_eq(tm_policy_used(0), used, "below its high, alone: nothing to demote");
  rt_free(p, 24);
}

/* A process alone in its cgroup has anonymous memory outside its heap (its
 * stacks, its binary's data): the cgroup's count is above what the heap
 * holds, and that is not another process's share. */
Test(reclaim, a_process_alone_does_not_take_its_own_other_memory_for_another_process)
{
  void *p[24];
  rt_fill(p, 24);
  uint64_t used = tm_policy_used(0);
  tmptree_put("sys/fs/cgroup/app/worker/memory.high", "67108864\n");
  tmptree_put("sys/fs/cgroup/app/worker/cgroup.procs", "4242\n");
  rt_numa_stat(used + 40 * MiB, 0);
  char *env[] = { "TIERMALLOC_TOPTIER_RATIO=50%", "TIERMALLOC_RECLAIM_RATE=1T", NULL };
  rt_limits_cgroup(env);
  tm_reclaim_pass();
  cr_expect_eq(tm_policy_used(0), used, "alone, below its own high: nothing to demote");
  rt_free(p, 24);
}

Test(reclaim, processes_sharing_a_cgroup_each_demote_their_share_of_the_excess)
{
  void *p[24];
  rt_fill(p, 24);
  uint64_t used = tm_policy_used(0);
  tmptree_put("sys/fs/cgroup/app/worker/memory.high", "67108864\n");
  /* Another process holds 40 MiB more on node 0: the cgroup is 32 MiB or
   * so over. */
  tmptree_put("sys/fs/cgroup/app/worker/cgroup.procs", "4242\n4343\n");
  rt_numa_stat(used + 40 * MiB, 0);
  char *env[] = { "TIERMALLOC_TOPTIER_RATIO=50%", "TIERMALLOC_RECLAIM_RATE=1T", NULL };
  rt_limits_cgroup(env);
  tm_reclaim_pass();
  uint64_t moved = used - tm_policy_used(0);
  cr_expect_geq(moved, 8 * MiB, "its share of the excess: moved %llu MiB",
                (unsigned long long)(moved / MiB));
  cr_expect_leq(moved, 16 * MiB, "no more than its share: moved %llu MiB",
                (unsigned long long)(moved / MiB));
  rt_free(p, 24);
}

Test(reclaim, a_cgroup_near_its_memory_high_pages_out_its_coldest)
{
  void *p[24];
  rt_fill(p, 24);
  tmptree_put("sys/fs/cgroup/app/worker/memory.high", "41943040\n");   /* 40M */
  tmptree_put("sys/fs/cgroup/app/worker/memory.current", "50331648\n");   /* 48M */
  char *env[] = { "TIERMALLOC_TOPTIER_HIGH=64M", "TIERMALLOC_TIER1_HIGH=128M",
                  "TIERMALLOC_RECLAIM_PAGEOUT_RATE=1T", NULL };
  rt_limits_cgroup(env);
  tm_reclaim_pass();
  tier_stats_t s = rt_stats();
  cr_expect_geq(s.tier[0].reclaim.pageout, 4 * MiB, "%llu",
                (unsigned long long)s.tier[0].reclaim.pageout);
  cr_expect_leq(s.tier[0].reclaim.pageout, 14 * MiB, "its share of 10 MiB over (+ margin)");
  cr_expect_eq(s.tier[0].reclaim.demoted, 0);
  rt_free(p, 24);
}

/* ---- allocation sites (site.h): the table and the verdicts, with a thread
 * record of the test's own whose countdown the test sets; the
 * routing and the placement on a tiered kernel are tests/vm/test_site.c's ---- */

/* Sites active: the accessed bits, a budget (so hotness is tracked), samples
 * every 4 KiB on average, and the bits read often enough to call chunks cold. */
static tm_thread_t rt_site_env(void)
{
  rt_accessed_tree();
  char *env[] = { "TIERMALLOC_HOTNESS=accessed", "TIERMALLOC_HOTNESS_INTERVAL_MS=100",
                  "TIERMALLOC_TOPTIER_HIGH=512M", "TIERMALLOC_SITE_SAMPLE=4K", NULL };
  rt_limits(env);
  for (int i = 0; i <= (int)TM_HOTNESS_COLD_SCANS; i++) {
    usleep(110 * 1000);
    tm_hotness_tick();
    tm_hotness_scan(TM_SCAN_DUE);
  }
  return (tm_thread_t){ .site_left = 0 };
}

/* n samples of `size` bytes at the call site ra. */
static void rt_sample(tm_thread_t *t, uintptr_t ra, int n, size_t size)
{
  for (int i = 0; i < n; i++) {
    t->site_left = UINT64_MAX;
    tm_site_sample(t, (const void *)ra, size);
  }
}

Test(reclaim, sampling_is_by_bytes_with_the_gap_within_half_the_mean)
{
  tm_thread_t t = rt_site_env();
  tm_site_sample(&t, (const void *)0x1000, 16);
  for (int i = 0; i < 200; i++) {
    t.site_left = UINT64_MAX;
    tm_site_sample(&t, (const void *)0x1000, 16);
    cr_assert(t.site_left >= 2048 && t.site_left <= 6144, "gap %llu", (unsigned long long)t.site_left);
  }
  uint64_t samples;
  unsigned apart, cold, tried;
  tm_site_counts(&samples, &apart, &cold, &tried);
  cr_expect_eq(samples, 201);
  cr_expect_eq(apart, 0, "no verdict yet");
}

Test(reclaim, sampling_waits_while_sites_are_inactive)
{
  rt_accessed_tree();
  char *env[] = { "TIERMALLOC_HOTNESS=accessed", NULL };   /* no budget: nothing tracked */
  rt_limits(env);
  tm_thread_t t = { .site_left = 0 };
  tm_site_sample(&t, (const void *)0x1000, 16);
  cr_expect(t.site_left >= 256 << 10 && t.site_left <= 768 << 10, "looks again after about 512 KiB: %llu",
            (unsigned long long)t.site_left);
  uint64_t samples;
  unsigned apart, cold, tried;
  tm_site_counts(&samples, &apart, &cold, &tried);
  cr_expect_eq(samples, 0);
}

Test(reclaim, the_table_is_bounded_and_keeps_the_most_sampled_sites)
{
  tm_thread_t t = rt_site_env();
  rt_sample(&t, 0xa000, 6, 16);                      /* one site sampled often */
  for (uintptr_t i = 0; i < 3 * TM_SITE_MAX; i++)    /* many sampled once, evicting each other */
    rt_sample(&t, 0x100000 + i * 16, 1, 16);
  rt_sample(&t, 0xb000, TM_SITE_MIN_SAMPLES - 1, 16); /* one sampled too seldom */
  tm_site_evaluate();
  tm_site_info_t info[TM_SITE_SLOTS];
  cr_assert_eq(tm_site_list(info, TM_SITE_SLOTS), 1, "one trial a verdict");
  cr_expect_eq(info[0].frames[0], (const void *)0xa000, "the most sampled site survived eviction");
  tm_site_evaluate();
  cr_expect_eq(tm_site_list(info, TM_SITE_SLOTS), 1, "no other site was sampled enough");
  tm_arena_thread_exit(&t);
}

/* Calls of the site ra routed out of n, and the flags of the last routed. */
static unsigned rt_routed(tm_thread_t *t, uintptr_t ra, unsigned n, int *flags)
{
  unsigned routed = 0;
  for (unsigned i = 0; i < n; i++) {
    int f = tm_site_flags(t, (const void *)ra);
    if (f && flags) *flags = f;
    routed += f != 0;
  }
  return routed;
}

/* Of n calls at ra through the fast path's test, those it sends to the
 * slow path; each must be routed there (the skip count leaves the others
 * on the fast path, and only them). */
static unsigned rt_taken(tm_thread_t *t, uintptr_t ra, unsigned n)
{
  unsigned taken = 0, routed = 0;
  for (unsigned i = 0; i < n; i++)
    if (tm_site_take(t, (const void *)ra)) {
      taken++;
      routed += tm_site_flags(t, (const void *)ra) != 0;
    }
  cr_expect_eq(routed, taken, "every call the fast path lets through is routed: %u of %u", routed, taken);
  return taken;
}

/* A trial for call site 0xa000; returns its MALLOCX flags. */
static int rt_site_slot(tm_thread_t *t)
{
  rt_sample(t, 0xa000, TM_SITE_MIN_SAMPLES, 16);
  tm_site_evaluate();
  int flags = 0;
  unsigned routed = rt_routed(t, 0xa000, 64 * TM_SITE_TRIAL_SHARE, &flags);
  cr_assert(routed >= 40 && routed <= 88, "on trial, about one call in %d routed: %u of %d", TM_SITE_TRIAL_SHARE,
            routed, 64 * TM_SITE_TRIAL_SHARE);
  cr_assert_neq(flags, 0);
  cr_assert(tm_site_routing);
  cr_assert(tm_site_routed((const void *)0xa000));
  return flags;
}

/* Chunks marked as a site's (site_measure counts them for its verdict). */
static unsigned rt_site_chunks(void)
{
  unsigned n = 0;
  for (unsigned i = 0; i < tm_ranges.n; i++)
    for (uintptr_t a = tm_range_lo(i); a < tm_range_end(i); a += TM_CHUNK_SIZE)
      n += atomic_load(&tm_chunk_of((void *)a)->site) != 0;
  return n;
}

/* jemalloc takes a new arena's metadata block through its hooks; that
 * chunk, written once and rarely read, aged into "cold" and gave a hot
 * site a cold verdict (CI, 3tier). */
Test(reclaim, a_site_arenas_metadata_is_not_counted_as_the_sites_memory)
{
  tm_thread_t t = rt_site_env();
  rt_sample(&t, 0xa000, TM_SITE_MIN_SAMPLES, 16);
  tm_site_evaluate();
  uint64_t samples;
  unsigned apart, cold, tried;
  tm_site_counts(&samples, &apart, &cold, &tried);
  cr_assert_eq(apart, 1, "the site is on trial, its arena made");
  cr_expect_eq(rt_site_chunks(), 0, "no chunk is the site's before it allocates");
  tm_arena_thread_exit(&t);
}

Test(reclaim, a_site_on_trial_is_routed_to_chunks_of_its_own)
{
  tm_thread_t t = rt_site_env();
  int flags = rt_site_slot(&t);
  cr_expect_eq(rt_routed(&t, 0xa010, 64, NULL), 0, "another site is not routed");
  unsigned taken = rt_taken(&t, 0xa000, 8000);
  cr_expect(taken >= 800 && taken <= 1200, "the fast path keeps all but about one call in %d: %u of 8000 left it",
            TM_SITE_TRIAL_SHARE, taken);
  cr_expect(!tm_site_routed((const void *)0xa010) || tm_site_hash((const void *)0xa010) == tm_site_hash((const void *)0xa000),
            "the filter passes other calls on the fast path");
  void *p = tmje_mallocx(100, flags), *q = tmje_mallocx(100, MALLOCX_TCACHE_NONE);
  cr_assert(p && q);
  cr_expect_eq(atomic_load(&tm_chunk_of(p)->site), 1, "the slot's chunk");
  cr_expect_eq(atomic_load(&tm_chunk_of(q)->site), 0, "malloc's chunk is no site's");
  cr_expect_eq(tm_chunk_tier(tm_chunk_of(p)), 0, "a new site's memory starts on top");
  tmje_dallocx(p, flags);
  tmje_dallocx(q, MALLOCX_TCACHE_NONE);
  tm_arena_thread_exit(&t);
}

Test(reclaim, a_site_not_found_cold_on_trial_goes_back_to_the_shared_arenas)
{
  tm_thread_t t = rt_site_env();
  int flags = rt_site_slot(&t);
  void *p = tmje_mallocx(TM_CHUNK_SIZE, flags);
  cr_assert_not_null(p);
  /* The first verdict sees the chunk new: it does not count. */
  for (int i = 0; i <= TM_SITE_TRIAL; i++) {
    cr_expect_gt(rt_routed(&t, 0xa000, 16 * TM_SITE_TRIAL_SHARE, NULL), 0, "routed at verdict %d", i);
    rt_heat_all(true);
    tm_site_evaluate();
  }
  cr_expect_eq(rt_routed(&t, 0xa000, 64, NULL), 0, "not routed after %d verdicts hot, the chunk not new",
               TM_SITE_TRIAL);
  uint64_t samples;
  unsigned apart, cold, tried;
  tm_site_counts(&samples, &apart, &cold, &tried);
  cr_expect_eq(apart, 0);
  cr_expect_eq(tried, 1);
  rt_sample(&t, 0xa000, 2 * TM_SITE_MIN_SAMPLES, 16);
  tm_site_evaluate();
  tm_site_counts(&samples, &apart, &cold, &tried);
  cr_expect_eq(tried, 1, "not tried again while its entry lives");
  tmje_dallocx(p, flags);
  tm_arena_thread_exit(&t);
}

/* A site that fills chunks over many reads is judged once it stops: what it
 * wrote since the last read cannot be cold yet (CI, flat and 3tier: a cold
 * site's trial was spent while the test's grow still wrote its chunks). */
Test(reclaim, a_site_whose_memory_grows_stays_on_trial_till_it_stops_or_the_longest_trial_ends)
{
  tm_thread_t t = rt_site_env();
  int flags = rt_site_slot(&t);
  void *p[TM_SITE_TRIAL_MAX];
  for (int i = 0; i < TM_SITE_TRIAL_MAX; i++) {
    cr_expect_gt(rt_routed(&t, 0xa000, 16 * TM_SITE_TRIAL_SHARE, NULL), 0, "routed at verdict %d, still growing", i);
    p[i] = tmje_mallocx(64 * 1024, flags);
    cr_assert_not_null(p[i]);
    memset(p[i], 1, 64 * 1024);
    rt_heat_all(true);
    tm_site_evaluate();
  }
  cr_expect_eq(rt_routed(&t, 0xa000, 64, NULL), 0, "not routed after %d verdicts, however it grew", TM_SITE_TRIAL_MAX);
  for (int i = 0; i < TM_SITE_TRIAL_MAX; i++) tmje_dallocx(p[i], flags);
  tm_arena_thread_exit(&t);
}

/* And once it stops growing, the memory it wrote can prove cold. */
Test(reclaim, a_site_that_stops_growing_is_judged_on_what_it_wrote)
{
  tm_thread_t t = rt_site_env();
  int flags = rt_site_slot(&t);
  void *p[3 * TM_SITE_TRIAL];
  for (int i = 0; i < 3 * TM_SITE_TRIAL; i++) {
    p[i] = tmje_mallocx(TM_CHUNK_SIZE / 4, flags);
    cr_assert_not_null(p[i]);
    memset(p[i], 1, TM_CHUNK_SIZE / 4);
    rt_heat_all(true);
    tm_site_evaluate();
  }
  cr_expect_gt(rt_routed(&t, 0xa000, 16 * TM_SITE_TRIAL_SHARE, NULL), 0, "on trial after %d verdicts growing",
               3 * TM_SITE_TRIAL);
  rt_heat_all(false);
  tm_site_evaluate();
  uint64_t samples;
  unsigned apart, cold, tried;
  tm_site_counts(&samples, &apart, &cold, &tried);
  cr_expect_eq(cold, 1, "found cold once its memory is");
  for (int i = 0; i < 3 * TM_SITE_TRIAL; i++) tmje_dallocx(p[i], flags);
  tm_arena_thread_exit(&t);
}

Test(reclaim, a_site_whose_memory_proves_cold_places_new_memory_below_till_it_is_hot)
{
  tm_thread_t t = rt_site_env();
  int flags = rt_site_slot(&t);
  void *p[3];
  for (int i = 0; i < 3; i++) {
    p[i] = tmje_mallocx(TM_CHUNK_SIZE, flags);
    cr_assert_not_null(p[i]);
    memset(p[i], 1, TM_CHUNK_SIZE);
  }
  rt_heat_all(false);
  int moves = rt.moves;
  tm_site_evaluate();
  uint64_t samples;
  unsigned apart, cold, tried;
  tm_site_counts(&samples, &apart, &cold, &tried);
  cr_expect_eq(cold, 1, "3 cold chunks, none hot: cold");
  void *n = tmje_mallocx(TM_CHUNK_SIZE, flags);
  cr_assert_not_null(n);
  cr_expect_eq(tm_chunk_tier(tm_chunk_of(n)), 1, "new memory placed below");
  cr_expect_eq(rt.moves, moves, "without a migration");
  cr_expect_eq(rt_routed(&t, 0xa000, 64, NULL), 64, "cold: every call routed");
  cr_expect_eq(rt_taken(&t, 0xa000, 64), 64, "cold: every call leaves the fast path");
  tm_site_info_t info;
  cr_assert_eq(tm_site_list(&info, 1), 1);
  cr_expect(info.cold_verdict);
  cr_expect_geq(info.cold, 6 * MiB, "its cold bytes as last measured: %llu", (unsigned long long)info.cold);
  rt_heat_all(true);
  tm_site_evaluate();
  tm_site_counts(&samples, &apart, &cold, &tried);
  cr_expect_eq(cold, 0, "hot again");
  cr_expect_eq(rt_routed(&t, 0xa000, 64, NULL), 0, "back to the shared arenas");
  cr_expect_eq(rt_taken(&t, 0xa000, 64), 0, "on the fast path again");
  void *m = tmje_mallocx(TM_CHUNK_SIZE, flags);
  cr_assert_not_null(m);
  cr_expect_eq(tm_chunk_tier(tm_chunk_of(m)), 0, "what its arena still places goes on top again");
  for (int i = 0; i < 3; i++) tmje_dallocx(p[i], flags);
  tmje_dallocx(n, flags);
  tmje_dallocx(m, flags);
  tm_arena_thread_exit(&t);
}

/* Pieces up (chunkmap.h): their bytes count on tier 0 and tier_of's answer
 * for their pages is 0, never more bytes than the chunk has committed,
 * until the chunk moves whole or loses a committed byte. */
Test(reclaim, pieces_up_count_on_tier_0_until_the_chunk_moves_or_shrinks)
{
  tm_chunk_t *c = tm_chunk_of((void *)(tm_range_lo(1) + 300 * TM_CHUNK_SIZE));
  const uint32_t piece = 1u << TM_PIECE_SHIFT;
  uint64_t c0 = tm_chunk_committed(0), c1 = tm_chunk_committed(1);
  cr_assert(tm_chunk_commit_bytes(c, MiB), "empty: the caller places it");
  cr_assert(tm_chunk_reserve(1, MiB, UINT64_MAX));
  tm_chunk_place(c, 1);
  uintptr_t a = tm_chunk_addr(c);
  cr_assert(tm_chunk_hold(c));
  tm_chunk_shift(c, 0x5, 2 * piece);
  tm_chunk_release(c);
  cr_expect_eq(tm_chunk_committed(0), c0 + 2 * piece);
  cr_expect_eq(tm_chunk_committed(1), c1 + MiB - 2 * piece);
  cr_expect_eq(tm_chunk_tier_at(c, (void *)a), 0);
  cr_expect_eq(tm_chunk_tier_at(c, (void *)(a + piece)), 1);
  cr_expect_eq(tm_chunk_tier_at(c, (void *)(a + 2 * piece + 100)), 0);
  cr_expect_eq(tm_chunk_tier(c), 1, "the chunk's own tier stays");
  cr_assert(tm_chunk_hold(c));
  tm_chunk_shift(c, 0xff00, 4 * MiB);
  tm_chunk_release(c);
  cr_expect_eq(tm_chunk_shifted(c), MiB, "no more than it has committed");
  cr_expect_eq(tm_chunk_committed(0), c0 + MiB);
  cr_expect_eq(tm_chunk_committed(1), c1);
  cr_assert(tm_chunk_hold(c));
  tm_chunk_move(c, 1);   /* a whole move, even to its own tier (the pieces come back down) */
  tm_chunk_release(c);
  cr_expect_eq(tm_chunk_pieces_up(c), 0);
  cr_expect_eq(tm_chunk_committed(0), c0);
  cr_expect_eq(tm_chunk_committed(1), c1 + MiB);
  cr_assert(tm_chunk_hold(c));
  tm_chunk_shift(c, 0x1, piece);
  tm_chunk_release(c);
  cr_expect(!tm_chunk_decommit_bytes(c, 4096));
  cr_expect_eq(tm_chunk_pieces_up(c), 0, "a decommit drops the record");
  cr_expect_eq(tm_chunk_committed(0), c0);
  cr_expect_eq(tm_chunk_committed(1), c1 + MiB - 4096);
  cr_expect(tm_chunk_decommit_bytes(c, MiB - 4096));
  tm_chunk_emptied(c);
  cr_expect_eq(tm_chunk_committed(1), c1);
}

/* smaps for the chunks of blocks b[0..n): each as 32 piece VMAs of 64 kB
 * resident, the pieces in ref[i] referenced. */
static void rt_pieces_smaps(void **b, const uint32_t *ref, int n)
{
  static char buf[64 * 1024];
  int len = 0;
  for (int i = 0; i < n; i++)
    for (unsigned k = 0; k < TM_PIECES; k++) {
      uintptr_t a = tm_chunk_addr(tm_chunk_of(b[i])) + ((uintptr_t)k << TM_PIECE_SHIFT);
      len += snprintf(buf + len, sizeof buf - (size_t)len,
                      "%lx-%lx rw-p 00000000 00:00 0 \nRss:                64 kB\nReferenced:         %u kB\n",
                      (unsigned long)a, (unsigned long)(a + (1u << TM_PIECE_SHIFT)), ref[i] >> k & 1 ? 64u : 0u);
    }
  tmptree_put("proc/self/smaps", buf);
}

/* Chunks below tier 0 that the bits saw (at one read: not for whole-chunk
 * promotion) are read per piece: split for the scan that clears the bits,
 * read at the next. A chunk with 4 pieces seen has those moved up alone
 * (its record and tier 0's figures say so, its tier stays); one with 20 of
 * 32 seen is not mixed and moves nothing; nor does one with none. After
 * a read whose pieces moved nothing, the next pass reads per piece only a
 * chunk in huge pages. */
Test(reclaim, the_seen_pieces_of_a_mixed_chunk_below_move_up_alone)
{
  void *p[16];
  char *env[] = { "TIERMALLOC_HOTNESS=accessed", "TIERMALLOC_TOPTIER_HIGH=64M",
                  "TIERMALLOC_HOTNESS_INTERVAL_MS=100", "TIERMALLOC_RECLAIM_PERIOD_MAX_MS=100", NULL };
  rt_hot_below(p, env);
  rt.push_works = true;
  for (int i = 0; i < 16; i++) atomic_fetch_or(&tm_chunk_of(p[i])->flags, TM_CHUNK_SPLIT);
  for (int i = 0; i < 4; i++) atomic_fetch_and(&tm_chunk_of(p[i])->flags, (uint16_t)~TM_CHUNK_STEADY);
  usleep(110 * 1000);
  tm_reclaim_pass();
  cr_expect_eq(rt.splits, 4, "the 4 chunks below the bits saw are split for the next read: %d", rt.splits);
  uint32_t ref[4] = { 0xf0, 0xfffff, 0, 0 };
  rt_pieces_smaps(p, ref, 4);
  uint64_t used0 = tm_policy_used(0);
  usleep(110 * 1000);
  rt_heat(p, 0, 4, true);
  for (int i = 0; i < 4; i++) atomic_fetch_and(&tm_chunk_of(p[i])->flags, (uint16_t)~TM_CHUNK_STEADY);
  tm_reclaim_pass();
  tm_chunk_t *c = tm_chunk_of(p[0]);
  cr_expect_eq(tm_chunk_pieces_up(c), 0xf0, "pieces 4-7 up: %#x", tm_chunk_pieces_up(c));
  cr_expect_eq(tm_chunk_tier(c), 1, "the chunk stays on tier 1");
  cr_expect_eq(tm_chunk_tier_at(c, (char *)tm_chunk_addr(c) + (5u << TM_PIECE_SHIFT)), 0);
  cr_expect_eq(tm_chunk_pieces_up(tm_chunk_of(p[1])), 0, "20 of 32 pieces seen: not mixed");
  cr_expect_eq(rt_chunks_on(p, 0, 16, 0), 0, "no chunk moved up whole");
  tier_stats_t s = rt_stats();
  cr_expect_eq(s.tier[0].reclaim.promoted, 4u << TM_PIECE_SHIFT, "%llu", (unsigned long long)s.tier[0].reclaim.promoted);
  cr_expect_eq(tm_policy_used(0), used0 + (4u << TM_PIECE_SHIFT), "tier 0 counts the pieces' bytes");
  /* p[2], p[3] and p[1] were split again; this read moves nothing. */
  int splits = rt.splits;
  cr_expect_gt(splits, 4, "read per piece again");
  uint32_t none[4] = { 0xf0, 0, 0, 0 };
  rt_pieces_smaps(p, none, 4);
  usleep(110 * 1000);
  rt_heat(p, 0, 4, true);
  for (int i = 0; i < 4; i++) atomic_fetch_and(&tm_chunk_of(p[i])->flags, (uint16_t)~TM_CHUNK_STEADY);
  tm_reclaim_pass();   /* reads what the last pass split (nothing to move), and splits again */
  splits = rt.splits;
  /* Backing off, all but a chunk in huge pages newly hot: nothing else
   * grades it, and only a graded chunk moves up whole (a phase change
   * stalled in CI). */
  rt_set_heat(p, 4, 5, TM_HOTNESS_HEAT_MAX | TM_HOTNESS_HEAT_HUGE);
  rt_heat(p, 4, 5, true);
  usleep(110 * 1000);
  tm_reclaim_pass();
  cr_expect_eq(rt.splits, splits + 1,
               "after a read that moved nothing, the next pass reads per piece only the chunk in huge pages: "
               "%d splits, %d before", rt.splits, splits);
  rt_free(p, 16);
}

/* While pieces are read, whole-chunk promotion takes only chunks known not
 * to be mixed: graded (4 KiB pages) with half of the most heat or more. A
 * chunk less hot, or in huge pages (not graded yet), stays for its pieces. */
Test(reclaim, while_pieces_are_read_only_chunks_hot_as_a_whole_move_up_whole)
{
  void *p[16];
  char *env[] = { "TIERMALLOC_HOTNESS=accessed", "TIERMALLOC_TOPTIER_HIGH=64M",
                  "TIERMALLOC_HOTNESS_INTERVAL_MS=100", NULL };
  rt_hot_below(p, env);
  rt_set_heat(p, 0, 1, TM_HOTNESS_HEAT_MAX / 2 - 1);                       /* graded, under half */
  rt_set_heat(p, 1, 2, TM_HOTNESS_HEAT_MAX | TM_HOTNESS_HEAT_HUGE);        /* huge pages */
  rt_set_heat(p, 2, 4, TM_HOTNESS_HEAT_MAX / 2);                           /* graded, half */
  tm_reclaim_pass();
  cr_expect_eq(rt_chunks_on(p, 0, 2, 0), 0, "mixed, or not known: left for their pieces");
  cr_expect_eq(rt_chunks_on(p, 2, 4, 0), 2, "hot as a whole: moved up whole");
  rt_free(p, 16);
}
