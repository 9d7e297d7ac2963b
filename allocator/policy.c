#include "policy.h"

#include "options.h"
#include "range.h"

static uint64_t policy_max[TIER_MAX_TIERS];
static uint64_t policy_baseline[TIER_MAX_TIERS];   /* arenas' start-up metadata */
static unsigned policy_ntiers;

void tm_policy_init(const tm_topology_t *topo)
{
  policy_ntiers = (unsigned)topo->ntiers;
  for (unsigned t = 0; t < TIER_MAX_TIERS; t++) policy_max[t] = UINT64_MAX;
  /* A budget only means something when there is a tier to spill into, and
   * a percentage of an unknown capacity is no budget. */
  uint64_t cap = topo->tier[0].capacity;
  if (policy_ntiers > 1 && !(tm_option(TM_OPTION_TOPTIER_MAX)->percent && cap == 0))
    policy_max[0] = tm_option_size(TM_OPTION_TOPTIER_MAX, cap);
}

uint64_t tm_policy_max(unsigned t)
{
  return t < TIER_MAX_TIERS ? policy_max[t] : UINT64_MAX;
}

void tm_policy_baseline(void)
{
  for (unsigned t = 0; t < policy_ntiers; t++) policy_baseline[t] = tm_range_mapped(t);
}

static int policy_has_room(unsigned t, size_t size)
{
  uint64_t used = tm_range_mapped(t) - policy_baseline[t];
  return used + size >= used && used + size <= policy_max[t];
}

void *tm_policy_carve(unsigned pref, int pinned, size_t size, size_t align)
{
  if (pinned) return tm_range_carve(pref, size, align);
  /* Within budgets: the preferred tier, then each tier below it. */
  for (unsigned t = pref; t < policy_ntiers; t++) {
    if (!policy_has_room(t, size)) continue;
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
