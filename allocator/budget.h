/*
 * budget: each tier's min <= low <= high <= max, in bytes, and why.
 *
 * Sources, per tier and per limit, the first that applies:
 *   1. the environment: TIERMALLOC_TOPTIER_<L> for tier 0, TIERMALLOC_TIER<k>_<L>
 *      for tier k: bytes, or a percentage of the tier's capacity;
 *   2. the kernel's own file (tier 0 only): memory.toptier_<l> of the cgroup,
 *      the proposal's interface;
 *   3. the cgroup's memory.<l> (v1: limit and soft limit), ancestors applied,
 *      scaled by the tier's share: capacity(tier) / capacity(all allowed
 *      nodes), as the proposal scales toptier_X; or, with
 *      TIERMALLOC_TOPTIER_RATIO=r%, r% for tier 0 and the rest split among the
 *      lower tiers by capacity;
 *   4. none: min and low 0, high and max unlimited.
 * Then clamped, with one warning per tier, so that high <= max, min and low
 * <= max, and no finite limit exceeds the tier's capacity; low is raised to
 * min when below it. min and low may exceed high, as in memcg: protection
 * wins over the high watermark.
 *
 * What the limits do: new memory never goes to a tier at or above its high
 * or its max (placement, policy.c); min and low are protection for reclaim;
 * the lowest tier's high and max are where pageout starts (reclaim).
 */
#ifndef TM_BUDGET_H
#define TM_BUDGET_H

#include <stdbool.h>
#include <stdint.h>

#include "cgroup.h"
#include "topology.h"

#define TM_BUDGET_UNLIMITED TIER_UNLIMITED

/* Sources are tier_budget_source_t of include/tiermalloc.h (TIER_BUDGET_*). */

typedef struct tm_budget_limit_s {
  uint64_t bytes;             /* TM_BUDGET_UNLIMITED: none (max, high); 0: none (min, low) */
  tier_budget_source_t source;
  uint64_t raw;               /* the value the source gave, before scaling */
  uint64_t num, den;          /* bytes = raw * num / den (den 0: not scaled) */
  bool clamped;               /* lowered to keep the order or the capacity */
} tm_budget_limit_t;

typedef struct tm_budgets_s {
  int ntiers;
  tm_budget_limit_t tier[TIER_MAX_TIERS][TM_LIMIT_COUNT];
  tm_cgroup_limits_t cgroup;  /* what the cgroup said (paths for the explanation) */
} tm_budgets_t;

/* Derives *out from the options in force, the topology and the cgroup's
 * limits. Warns (one line per tier) about what it clamps and about a
 * percentage of an unknown capacity (ignored). Pure otherwise. */
void tm_budget_derive(const tm_topology_t *topo, const tm_cgroup_limits_t *cg,
                      tm_budgets_t *out);

/* The limit as one line of text, e.g.
 * "max 102.4 MiB = cgroup /app memory.max 300.0 MiB x 512.0 MiB / 1536.0 MiB".
 * Returns buf. */
const char *tm_budget_explain(const tm_budgets_t *b, unsigned tier, unsigned limit, char *buf,
                              int size);

/* Where tier `tier`'s budget as a whole came from: the highest-precedence
 * source among its four limits (TIER_BUDGET_NONE when none is set). */
tier_budget_source_t tm_budget_tier_source(const tm_budgets_t *b, unsigned tier);

/* The limit names, "min", "low", "high", "max". */
extern const char *const tm_limit_names[TM_LIMIT_COUNT];

/* ---- the budgets in force ----------------------------------------------------- */

/* Reads the cgroup under root ("" for the running system) and derives the
 * budgets in force. Once, at start-up. */
void tm_budget_init(const tm_topology_t *topo, const char *root);

/* Re-reads the cgroup and derives again when the last read is at least
 * TM_BUDGET_REFRESH_NS old, so a change to the cgroup takes effect for new
 * memory within a second or so of the program's next carve or commit. For
 * the allocator's slow path (extent hooks): it never blocks (a concurrent
 * refresh wins), never allocates, and costs a coarse clock read when it is
 * not due. A warning it has already given is not repeated. */
#define TM_BUDGET_REFRESH_NS 1000000000ull
void tm_budget_refresh(void);

/* The same whatever the age of the last read: the reclaim thread's, once a
 * pass, so a lowered limit is acted on within one reclaim period. */
void tm_budget_refresh_now(void);

/* The limit in force (relaxed atomic read; any thread, any time). */
uint64_t tm_budget_get(unsigned tier, unsigned limit);

/* Bytes of new memory tier t may hold: the lower of its high and max, and
 * of its capacity when known (TM_BUDGET_UNLIMITED: no bound). */
uint64_t tm_budget_placement_limit(unsigned tier);

/* A copy of the budgets in force, for stats and the start-up report. */
void tm_budget_snapshot(tm_budgets_t *out);

/* Fork handlers (fork.c). */
void tm_budget_prefork(void);
void tm_budget_postfork_parent(void);
void tm_budget_postfork_child(void);

#endif
