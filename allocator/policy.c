#include "policy.h"

#include "budget.h"
#include "chunkmap.h"
#include "hotness.h"
#include "notify.h"
#include "range.h"

static const tm_topology_t *policy_topo;
static unsigned policy_ntiers;
static uint64_t policy_baseline[TIER_MAX_TIERS];   /* committed bytes of start-up metadata */

void tm_policy_init(const tm_topology_t *topo)
{
  policy_topo = topo;
  policy_ntiers = (unsigned)topo->ntiers;
}

/* The metadata's chunks are also kept out of reclaim: jemalloc reads them on
 * every allocation, and their commit age is the oldest of all. */
void tm_policy_baseline(void)
{
  for (unsigned t = 0; t < policy_ntiers; t++) policy_baseline[t] = tm_chunk_committed(t);
  for (unsigned i = 0; i < tm_ranges.n && tm_chunks; i++) {
    for (uintptr_t a = tm_range_lo(i); a < tm_range_end(i); a += TM_CHUNK_SIZE) {
      tm_chunk_t *c = tm_chunk_of((void *)a);
      if (tm_chunk_bytes(c))
        atomic_fetch_or_explicit(&c->flags, TM_CHUNK_KEEP | TM_CHUNK_BASE, memory_order_relaxed);
    }
  }
}

uint64_t tm_policy_used(unsigned t)
{
  uint64_t c = tm_chunk_committed(t);
  return c > policy_baseline[t] ? c - policy_baseline[t] : 0;
}

/* Committed bytes tier t may hold (UINT64_MAX: unbounded). The lowest tier is
 * never bounded for placement: there is nowhere further down to go, and its
 * high and max are for pageout. A single tier has no budget to place by. */
static uint64_t policy_limit(unsigned t)
{
  uint64_t limit = tm_budget_placement_limit(t);
  if (t + 1 >= policy_ntiers || limit == TM_BUDGET_UNLIMITED) return UINT64_MAX;
  return limit + policy_baseline[t];
}

static int policy_has_room(unsigned t)
{
  return tm_chunk_committed(t) < policy_limit(t);
}

void *tm_policy_carve(unsigned pref, int pinned, int whole, size_t size, size_t align)
{
  tm_budget_refresh();
  if (pinned || whole) {
    size = (size + TM_CHUNK_SIZE - 1) & ~(TM_CHUNK_SIZE - 1);
    if (align < TM_CHUNK_SIZE) align = TM_CHUNK_SIZE;
  }
  if (pinned) return tm_range_carve(pref, size, align);
  for (unsigned t = pref; t < policy_ntiers; t++) {
    if (!policy_has_room(t)) continue;
    void *p = tm_range_carve(t, size, align);
    if (p) return p;
  }
  /* Every budget is spent: never fail an allocation for a budget; take the
   * lowest tier with address space left, then any. */
  for (unsigned t = policy_ntiers; t-- > 0;) {
    void *p = tm_range_carve(t, size, align);
    if (p) return p;
  }
  return NULL;
}

/* The tier for an empty chunk of an arena that prefers `pref`, whose first n
 * committed bytes are reserved there. */
static unsigned policy_choose(unsigned pref, uint32_t n)
{
  for (unsigned t = pref; t + 1 < policy_ntiers; t++)
    if (tm_chunk_reserve(t, n, policy_limit(t))) return t;
  unsigned last = policy_ntiers ? policy_ntiers - 1 : 0;
  tm_chunk_reserve(last, n, UINT64_MAX);
  return last;
}

static void policy_place(tm_chunk_t *c, uint32_t n, unsigned pref, int pinned)
{
  unsigned home = tm_chunk_home(c), cur = tm_chunk_tier(c);
  unsigned t;
  if (pinned || (atomic_load_explicit(&c->flags, memory_order_relaxed) & TM_CHUNK_PIN)) {
    /* A pinned arena's chunk stays home; a chunk tier_pin pinned goes to
     * tier 0, whatever the budgets (it counts against tier 0's min). */
    t = pinned ? home : 0;
    tm_chunk_reserve(t, n, UINT64_MAX);
  } else {
    t = policy_choose(pref < policy_ntiers ? pref : 0, n);
  }
  /* A chunk the accessed bits are read for is bound even on its own tier, so
   * it is a VMA of its own (hotness.h); one bound to another tier is too. */
  bool split = tm_hotness_split(c);
  if (t != cur || split) {
    const tm_tier_t *tier = &policy_topo->tier[t];
    int err = tm_range_os()->bind((void *)tm_chunk_addr(c), TM_CHUNK_SIZE, &tier->nodes,
                                  tier->first_node);
    if (err != 0) {
      /* Pages go where the chunk was bound: count them there. */
      tm_chunk_unreserve(t, n);
      tm_chunk_reserve(cur, n, UINT64_MAX);
      t = cur;
    }
  }
  if (pinned) atomic_fetch_or_explicit(&c->flags, TM_CHUNK_KEEP, memory_order_relaxed);
  tm_chunk_place(c, t);
}

void tm_policy_commit(void *p, size_t size, unsigned pref, int pinned)
{
  uintptr_t a = (uintptr_t)p, end = a + size;
  if (tm_chunk_of(p) == NULL) return;
  tm_budget_refresh();
  while (a < end) {
    uintptr_t next = (a & ~(TM_CHUNK_SIZE - 1)) + TM_CHUNK_SIZE;
    uint32_t n = (uint32_t)((next < end ? next : end) - a);
    tm_chunk_t *c = tm_chunk_of((void *)a);
    if (tm_chunk_commit_bytes(c, n)) policy_place(c, n, pref, pinned);
    tm_hotness_touch(c);
    a += n;
  }
  tm_notify_committed();
}

void tm_policy_decommit(void *p, size_t size)
{
  uintptr_t a = (uintptr_t)p, end = a + size;
  if (tm_chunk_of(p) == NULL) return;
  while (a < end) {
    uintptr_t next = (a & ~(TM_CHUNK_SIZE - 1)) + TM_CHUNK_SIZE;
    uint32_t n = (uint32_t)((next < end ? next : end) - a);
    tm_chunk_t *c = tm_chunk_of((void *)a);
    if (tm_chunk_decommit_bytes(c, n)) {
      tm_range_os()->purge((void *)tm_chunk_addr(c), TM_CHUNK_SIZE, 0);
      tm_chunk_emptied(c);
    }
    a += n;
  }
}
