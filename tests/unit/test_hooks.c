/* arena hooks and placement, with the OS primitives behind a recording
 * pass-through double (the shape of jemalloc's test/include/test/
 * extent_hooks.h). The private jemalloc here is the unit binary's own copy.
 * The same placement is checked for real, on a two-node kernel, in tests/vm. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>
#include <sys/wait.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "arena.h"
#include "budget.h"
#include "chunkmap.h"
#include "fork.h"
#include "options.h"
#include "policy.h"
#include "range.h"
#include "topology.h"

static struct {
  int reserve, bind, commit, purge, huge;
  size_t huge_min_seen;   /* smallest size asked for huge pages */
  size_t commit_bytes[TIER_MAX_TIERS + 1];
  size_t purge_bytes[TIER_MAX_TIERS + 1];
  tm_nodemask_t bound[TIER_MAX_TIERS];
} hk;

static int hk_reserve(size_t size, void **out)
{
  hk.reserve++;
  return tm_os_linux.reserve(size, out);
}

static int hk_commit(void *p, size_t size)
{
  hk.commit++;
  hk.commit_bytes[tm_range_index(p)] += size;
  return tm_os_linux.commit(p, size);
}

static int hk_bind(void *p, size_t size, const tm_nodemask_t *nodes, int first_node)
{
  if (hk.bind < TIER_MAX_TIERS) hk.bound[hk.bind] = *nodes;
  hk.bind++;
  tm_os_linux.bind(p, size, nodes, first_node);   /* node1 does not exist on a one-node host */
  return 0;
}

static int hk_purge(void *p, size_t size, int lazy)
{
  hk.purge++;
  hk.purge_bytes[tm_range_index(p)] += size;
  return tm_os_linux.purge(p, size, lazy);
}

static int hk_huge(void *p, size_t size)
{
  if (hk.huge++ == 0 || size < hk.huge_min_seen) hk.huge_min_seen = size;
  return tm_os_linux.huge(p, size);
}

static const tm_os_t hk_os = { .reserve = hk_reserve, .commit = hk_commit, .bind = hk_bind,
                               .purge = hk_purge, .huge = hk_huge };

#define HK_HUGE_MIN ((size_t)4 << 20)

static tm_topology_t hk_topo;   /* the budgets and the policy keep a pointer to it */

/* Two tiers (the DRAM + CXL fixture), 1 GiB ranges, huge pages for carves
 * of 4 MiB and more (TIERMALLOC_THP=auto), hooks on every arena, and a
 * top-tier budget from the environment only (no cgroup under the root the
 * budgets read). */
static void hk_setup(const char *toptier_max)
{
  char opt[64];
  snprintf(opt, sizeof opt, "TIERMALLOC_TOPTIER_MAX=%s", toptier_max);
  char *env[] = { opt, NULL };
  tm_options_init_from(env, false);
  cr_assert_eq(tm_topology_discover(&hk_topo, "tests/fixtures/dram-cxl-6.12", NULL), 0);
  cr_assert_eq(tm_ranges_init(&hk_topo, (size_t)1 << 30, HK_HUGE_MIN, &hk_os), 0);
  cr_assert_eq(tm_chunkmap_init(), 0);
  tm_budget_init(&hk_topo, "/nonexistent");
  tm_policy_init(&hk_topo);
  cr_assert_eq(tm_arenas_init(2), 0);
  tm_arena_drain_unplaced();   /* as at start-up: arena 0's pre-hook rest is out of use */
  tm_policy_baseline();
}

/* Current tier of p's chunk. */
static unsigned hk_tier(const void *p)
{
  tm_chunk_t *c = tm_chunk_of(p);
  cr_assert_not_null(c, "%p is outside the ranges", p);
  return tm_chunk_tier(c);
}

Test(hooks, ranges_are_reserved_once_and_bound_per_tier)
{
  hk_setup("100%");
  cr_expect_eq(hk.reserve, 1);
  cr_expect_eq(hk.bind, 2);
  cr_expect_eq(hk.bound[0].w[0], 1u, "tier 0 -> node0");
  cr_expect_eq(hk.bound[1].w[0], 2u, "tier 1 -> node1");
  cr_expect_eq(tm_ranges.n, 2u);
}

/* Checked for real under ulimit -v in tests/preload. */
Test(hooks, ranges_take_at_most_half_of_an_address_space_limit)
{
  unsigned long long vm_pages = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  cr_assert(f != NULL && fscanf(f, "%llu", &vm_pages) == 1);
  fclose(f);
  rlim_t limit = (rlim_t)vm_pages * 4096 + ((rlim_t)8 << 30);
  struct rlimit rl = { limit, limit };
  cr_assert_eq(setrlimit(RLIMIT_AS, &rl), 0);
  tm_topology_t topo;
  cr_assert_eq(tm_topology_discover(&topo, "tests/fixtures/dram-cxl-6.12", NULL), 0);
  cr_assert_eq(tm_ranges_init(&topo, (size_t)1 << 40, SIZE_MAX, &hk_os), 0, "TIERMALLOC_RESERVE=1T");
  cr_expect_eq(tm_ranges.n, 2u);
  cr_expect_leq((uint64_t)tm_ranges.n << tm_ranges.shift, limit / 2);
  cr_expect_eq(hk.reserve, 1, "sized to fit at the first try");
  cr_expect_eq(tm_ranges.size, ((size_t)2 << 30) - ((size_t)2 << 20), "2 GiB strides, 2 MiB guards");
}

typedef struct hk_bound_s {
  pthread_barrier_t *all_bound;   /* NULL: do not wait for the others */
  unsigned arena;                 /* thread.arena after binding */
  unsigned range;                 /* range index of a 100000-byte allocation */
  int purges;                     /* purges during the thread's start */
} hk_bound_t;

static void *hk_bind_and_alloc(void *arg)
{
  hk_bound_t *b = arg;
  int purges = hk.purge;
  tm_arena_thread_bind();
  tm_arena_thread_bind();   /* once per thread */
  void *p = tmje_mallocx(100000, MALLOCX_TCACHE_NONE);
  b->purges = hk.purge - purges;
  size_t sz = sizeof b->arena;
  tmje_mallctl("thread.arena", &b->arena, &sz, NULL, 0);
  b->range = p ? tm_range_index(p) : TM_RANGE_OTHER;
  /* Held until every thread has its arena: jemalloc spreads live threads. */
  if (b->all_bound) pthread_barrier_wait(b->all_bound);
  if (p) tmje_dallocx(p, MALLOCX_TCACHE_NONE);
  return NULL;
}

static extent_hooks_t *hk_hooks_of(unsigned arena)
{
  char name[64];
  snprintf(name, sizeof name, "arena.%u.extent_hooks", arena);
  extent_hooks_t *h = NULL;
  size_t sz = sizeof h;
  cr_assert_eq(tmje_mallctl(name, &h, &sz, NULL, 0), 0, "%s", name);
  return h;
}

Test(hooks, automatic_arenas_place_on_the_top_tier)
{
  hk_setup("100%");
  unsigned nauto = 0;
  size_t sz = sizeof nauto;
  cr_assert_eq(tmje_mallctl("opt.narenas", &nauto, &sz, NULL, 0), 0);
  /* Arena creation carved the arenas' metadata; count only what follows. */
  size_t tier1_before = hk.commit_bytes[1];
  enum { N = 4 };
  pthread_barrier_t all_bound;
  pthread_barrier_init(&all_bound, NULL, N);
  hk_bound_t b[N];
  pthread_t th[N];
  for (int i = 0; i < N; i++) {
    b[i] = (hk_bound_t){ .all_bound = &all_bound };
    cr_assert_eq(pthread_create(&th[i], NULL, hk_bind_and_alloc, &b[i]), 0);
  }
  for (int i = 0; i < N; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < N; i++) {
    /* jemalloc's own choice, always an automatic arena tiermalloc hooked first. */
    cr_expect_lt(b[i].arena, nauto, "thread %d", i);
    cr_expect_eq(hk_hooks_of(b[i].arena), tm_arena_hooks(0, false), "thread %d: arena %u", i, b[i].arena);
    cr_expect_eq(b[i].range, 0u, "thread %d: arena %u", i, b[i].arena);
  }
  cr_expect_gt(hk.commit_bytes[0], 0);
  cr_expect_eq(hk.commit_bytes[1], tier1_before, "nothing placed on tier 1");
  cr_expect_eq(tm_range_mapped(0), hk.commit_bytes[0], "mapped counts exactly what was committed");
}

/* jemalloc purges every dirty page of an arena that a thread.arena move
 * leaves without threads; a thread start must not move threads, so the
 * dirty pages stay for reuse. */
Test(hooks, thread_start_purges_no_arena)
{
  hk_setup("100%");
  tm_arena_thread_bind();
  /* Dirty extents in arena 0, the arena jemalloc picks first, and in this
   * thread's own arena. */
  int flags[] = { MALLOCX_ARENA(0) | MALLOCX_TCACHE_NONE, MALLOCX_TCACHE_NONE };
  for (int f = 0; f < 2; f++) {
    void *p = tmje_mallocx(100000, flags[f]);
    cr_assert_not_null(p);
    tmje_dallocx(p, flags[f]);
  }
  for (int i = 0; i < 4; i++) {
    hk_bound_t b = { 0 };
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, hk_bind_and_alloc, &b), 0);
    pthread_join(th, NULL);
    cr_expect_eq(b.purges, 0, "thread %d purged %d times while it started", i, b.purges);
  }
}

Test(hooks, pinned_arena_places_on_its_tier_only)
{
  hk_setup("100%");
  void *p = tmje_mallocx(3 << 20, tm_arena_pinned_flags(1) | MALLOCX_TCACHE_NONE);
  cr_assert_not_null(p);
  cr_expect_eq(tm_range_index(p), 1u);
  void *q = tmje_mallocx(64, tm_arena_pinned_flags(1) | MALLOCX_TCACHE_NONE);
  cr_expect_eq(tm_range_index(q), 1u);
  cr_expect_gt(hk.commit_bytes[1], 3u << 20);
  tmje_dallocx(p, MALLOCX_TCACHE_NONE);
  tmje_dallocx(q, MALLOCX_TCACHE_NONE);
}

Test(hooks, purge_returns_pages_of_freed_extents)
{
  hk_setup("100%");
  void *p = tmje_mallocx(8 << 20, tm_arena_pinned_flags(1) | MALLOCX_TCACHE_NONE);
  cr_assert_not_null(p);
  memset(p, 1, 8 << 20);
  tmje_dallocx(p, MALLOCX_TCACHE_NONE);
  unsigned ind = (unsigned)(tm_arena_pinned_flags(1) >> 20) - 1;
  char name[64];
  snprintf(name, sizeof name, "arena.%u.purge", ind);
  cr_assert_eq(tmje_mallctl(name, NULL, NULL, NULL, 0), 0);
  cr_expect_geq(hk.purge_bytes[1], (size_t)8 << 20);
}

Test(hooks, over_the_top_tier_budget_chunks_go_down_a_tier)
{
  hk_setup("4M");
  cr_expect_eq(tm_budget_get(0, TM_LIMIT_MAX), 4u << 20);
  void *p[8];
  tm_arena_thread_bind();
  for (int i = 0; i < 8; i++) {
    p[i] = tmje_mallocx(2 << 20, MALLOCX_TCACHE_NONE);
    cr_assert_not_null(p[i]);
  }
  cr_expect_leq(tm_policy_used(0), 4u << 20, "tier 0 stays within its budget (%llu)",
                (unsigned long long)tm_policy_used(0));
  cr_expect_eq(hk_tier(p[7]), 1u, "later blocks are on tier 1");
  for (int i = 0; i < 8; i++) tmje_dallocx(p[i], MALLOCX_TCACHE_NONE);
}

/* One extent across the budget boundary: its first chunks on tier 0 up to
 * the budget, the rest bound to tier 1 (and told so by the chunk map). */
Test(hooks, one_extent_spans_the_budget_boundary)
{
  hk_setup("6M");
  int flags = MALLOCX_ARENA(0) | MALLOCX_TCACHE_NONE;
  int binds = hk.bind;
  char *p = tmje_mallocx(16 << 20, flags);
  cr_assert_not_null(p);
  cr_expect_eq(tm_range_index(p), 0u, "carved from the top tier's range (its home)");
  cr_expect_eq(hk_tier(p), 0u, "the first chunk is on tier 0");
  cr_expect_eq(hk_tier(p + (16 << 20) - 1), 1u, "the last chunk is on tier 1");
  cr_expect_gt(hk.bind, binds, "spilled chunks were bound to tier 1's nodes");
  uint64_t used = tm_policy_used(0);
  cr_expect(used <= (6u << 20) && used >= (4u << 20),
            "tier 0 holds %llu bytes of its 6 MiB budget (within one chunk, never past it)",
            (unsigned long long)used);
  /* Every chunk of the block, in order: tier 0, then tier 1, never back. */
  unsigned last = 0;
  for (size_t off = 0; off < (16u << 20); off += TM_CHUNK_SIZE) {
    unsigned t = hk_tier(p + off);
    cr_expect_geq(t, last, "chunk at +%zu MiB is on tier %u after tier %u", off >> 20, t, last);
    last = t;
  }
  tmje_dallocx(p, flags);
}

/* The budget is checked against a live figure: once jemalloc gives the pages
 * of a freed peak back (decommit), the top tier takes new memory again. */
Test(hooks, budget_recovers_after_a_peak_is_freed)
{
  hk_setup("8M");
  int flags = MALLOCX_ARENA(0) | MALLOCX_TCACHE_NONE;
  char *peak = tmje_mallocx(32 << 20, flags);
  cr_assert_not_null(peak);
  cr_expect_geq(tm_policy_used(0), 6u << 20, "the peak filled the budget");
  cr_expect_eq(hk_tier(peak + (32 << 20) - 1), 1u, "and spilled");
  tmje_dallocx(peak, flags);
  cr_assert_eq(tmje_mallctl("arena.0.purge", NULL, NULL, NULL, 0), 0);
  cr_expect_lt(tm_policy_used(0), 2u << 20, "tier 0 still holds %llu bytes after the purge",
               (unsigned long long)tm_policy_used(0));
  char *again = tmje_mallocx(4 << 20, flags);
  cr_assert_not_null(again);
  cr_expect_eq(hk_tier(again), 0u, "new memory is on tier 0 again");
  cr_expect_eq(hk_tier(again + (4 << 20) - 1), 0u);
  tmje_dallocx(again, flags);
}

/* A chunk left with no committed byte gives all of its 2 MiB back, not only
 * the part just decommitted: pages of it that jemalloc never committed (a
 * huge page faulted in for a neighbour) would otherwise stay resident. */
Test(hooks, an_emptied_chunk_gives_back_all_its_pages)
{
  hk_setup("100%");
  char *chunk = (char *)tm_range_lo(0) + ((size_t)600 << 20);
  tm_policy_commit(chunk, 256 << 10, 0, 0);
  tm_policy_commit(chunk + (1 << 20), 256 << 10, 0, 0);
  size_t before = hk.purge_bytes[0];
  tm_policy_decommit(chunk, 256 << 10);
  cr_expect_eq(hk.purge_bytes[0], before, "the chunk still holds committed bytes");
  tm_policy_decommit(chunk + (1 << 20), 256 << 10);
  cr_expect_eq(hk.purge_bytes[0], before + TM_CHUNK_SIZE, "the emptied chunk was given back whole");
  cr_expect_eq(atomic_load(&tm_chunk_of(chunk)->committed), 0u);
}

/* Threads that commit and decommit their own parts of the same chunks at
 * once: every chunk is placed once per emptiness, and the live figures come
 * back to exactly what they were. */
typedef struct hk_churn_s {
  char *base;      /* 8 chunks of range 0 that no extent uses */
  unsigned slot;   /* this thread's 256 KiB of each chunk */
} hk_churn_t;

static void *hk_churn(void *arg)
{
  hk_churn_t *c = arg;
  for (int round = 0; round < 2000; round++) {
    for (int k = 0; k < 8; k++) {
      char *p = c->base + (size_t)k * TM_CHUNK_SIZE + (size_t)c->slot * (256 << 10);
      tm_policy_commit(p, 256 << 10, 0, 0);
      tm_policy_decommit(p, 256 << 10);
    }
  }
  return NULL;
}

Test(hooks, concurrent_commits_into_shared_chunks_keep_exact_counts)
{
  hk_setup("6M");
  uint64_t committed[2] = { tm_chunk_committed(0), tm_chunk_committed(1) };
  uint64_t charged[2] = { tm_chunk_charged(0), tm_chunk_charged(1) };
  char *base = (char *)tm_range_lo(0) + ((size_t)512 << 20);
  enum { N = 4 };
  pthread_t th[N];
  hk_churn_t arg[N];
  for (unsigned i = 0; i < N; i++) {
    arg[i] = (hk_churn_t){ base, i };
    cr_assert_eq(pthread_create(&th[i], NULL, hk_churn, &arg[i]), 0);
  }
  for (unsigned i = 0; i < N; i++) pthread_join(th[i], NULL);
  for (unsigned t = 0; t < 2; t++) {
    cr_expect_eq(tm_chunk_committed(t), committed[t], "tier %u committed", t);
    cr_expect_eq(tm_chunk_charged(t), charged[t], "tier %u charged chunks", t);
  }
  for (int k = 0; k < 8; k++)
    cr_expect_eq(atomic_load(&tm_chunk_of(base + (size_t)k * TM_CHUNK_SIZE)->committed), 0u,
                 "chunk %d", k);
}

/* A fork while other threads place and empty chunks: the child inherits no
 * chunk marked busy (it would wait on it for good), because the fork waits
 * for those threads (fork.c). */
static atomic_bool hk_stop;

static void *hk_churn_until_stopped(void *arg)
{
  hk_churn_t *c = arg;
  while (!atomic_load(&hk_stop))
    for (int k = 0; k < 8; k++) {
      char *p = c->base + (size_t)k * TM_CHUNK_SIZE + (size_t)c->slot * (256 << 10);
      tm_policy_commit(p, 256 << 10, 0, 0);
      tm_policy_decommit(p, 256 << 10);
    }
  return NULL;
}

Test(hooks, fork_child_finds_no_chunk_held_busy, .timeout = 60)
{
  hk_setup("6M");
  tm_fork_init();
  char *base = (char *)tm_range_lo(0) + ((size_t)700 << 20);
  pthread_t th[3];
  hk_churn_t arg[3];
  for (unsigned i = 0; i < 3; i++) {
    arg[i] = (hk_churn_t){ base, i };
    cr_assert_eq(pthread_create(&th[i], NULL, hk_churn_until_stopped, &arg[i]), 0);
  }
  int hung = 0;
  for (int f = 0; f < 40 && !hung; f++) {
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
      for (int k = 0; k < 8; k++) {   /* the slot no parent thread uses */
        char *p = base + (size_t)k * TM_CHUNK_SIZE + 3 * (256 << 10);
        tm_policy_commit(p, 256 << 10, 0, 0);
        tm_policy_decommit(p, 256 << 10);
      }
      _exit(0);
    }
    int status = 0;
    pid_t done = 0;
    for (int i = 0; i < 500 && (done = waitpid(pid, &status, WNOHANG)) == 0; i++) usleep(10000);
    if (done == 0) {
      hung = f + 1;
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
    } else {
      cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d: status %#x", f, status);
    }
  }
  atomic_store(&hk_stop, true);
  for (unsigned i = 0; i < 3; i++) pthread_join(th[i], NULL);
  cr_expect_eq(hung, 0, "fork %d: the child hung on a chunk held busy at the fork", hung);
}

Test(hooks, percentage_budget_is_of_top_tier_capacity)
{
  hk_setup("50%");
  /* node0 of the fixture: MemTotal 514356 kB. */
  cr_expect_eq(hk_topo.tier[0].capacity, 514356ull * 1024);
  cr_expect_eq(tm_budget_get(0, TM_LIMIT_MAX), hk_topo.tier[0].capacity / 2);
  cr_expect_eq(tm_budget_get(1, TM_LIMIT_MAX), TM_BUDGET_UNLIMITED);
}

Test(hooks, merge_only_within_a_tier_and_dalloc_retains)
{
  hk_setup("100%");
  extent_hooks_t *h = tm_arena_hooks(0, false);
  char *r0 = (char *)tm_ranges.base + (2 << 20);
  char *r1 = (char *)tm_ranges.base + ((uintptr_t)1 << tm_ranges.shift) + (2 << 20);
  cr_expect(h->merge(h, r0, 4096, r0 + 4096, 4096, true, 0) == false, "same tier: merge");
  cr_expect(h->merge(h, r0, 4096, r1, 4096, true, 0) == true, "two tiers: refuse");
  cr_expect(h->dalloc(h, r0, 4096, true, 0) == true, "address space is retained");
  bool zero = false, commit = false;
  cr_expect_null(h->alloc(h, r0, 4096, 4096, &zero, &commit, 0), "no in-place extension");
}

Test(hooks, huge_pages_only_for_carves_from_the_threshold)
{
  hk_setup("100%");
  int flags = tm_arena_pinned_flags(0) | MALLOCX_TCACHE_NONE;
  /* Arena metadata and a small heap: 2 MiB blocks and a first grow. */
  void *small = tmje_mallocx(100000, flags);
  cr_assert_not_null(small);
  cr_expect_eq(hk.huge, 0, "%d carves below %zu bytes asked for huge pages", hk.huge, HK_HUGE_MIN);
  int commits = hk.commit;
  void *big = tmje_mallocx(8 << 20, flags);
  cr_assert_not_null(big);
  cr_expect_gt(hk.commit, commits, "the 8 MiB block needed a new carve");
  cr_expect_eq(hk.huge, 1);
  cr_expect_geq(hk.huge_min_seen, HK_HUGE_MIN, "a carve of %zu bytes asked for huge pages", hk.huge_min_seen);
  tmje_dallocx(big, flags);
  tmje_dallocx(small, flags);
}

/* jemalloc made arena 0 before it applied oversize_threshold:0; without the
 * fix-up, arena 0 purged each freed extent of 8 MiB or more at once. */
Test(hooks, arena_0_keeps_a_freed_large_extent_for_reuse)
{
  hk_setup("100%");
  int flags = MALLOCX_ARENA(0) | MALLOCX_TCACHE_NONE;
  void *p = tmje_mallocx(16 << 20, flags);
  cr_assert_not_null(p);
  int purges = hk.purge, commits = hk.commit;
  tmje_dallocx(p, flags);
  cr_expect_eq(hk.purge, purges, "freeing 16 MiB in arena 0 purged it");
  void *q = tmje_mallocx(16 << 20, flags);
  cr_assert_not_null(q);
  cr_expect_eq(hk.commit, commits, "the freed extent is reused, no new carve");
  tmje_dallocx(q, flags);
}
