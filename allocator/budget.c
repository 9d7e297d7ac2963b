#include "budget.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "log.h"
#include "options.h"

const char *const tm_limit_names[TM_LIMIT_COUNT] = { "min", "low", "high", "max" };

/* ---- derivation ------------------------------------------------------------------ */

/* v * num / den without overflow (num <= den, so the result fits). */
static uint64_t budget_scale(uint64_t v, uint64_t num, uint64_t den)
{
  return den == 0 ? v : (uint64_t)((unsigned __int128)v * num / den);
}

/* A limit that is "no limit": unlimited for high and max, 0 for min and low. */
static uint64_t budget_none(unsigned limit)
{
  return limit >= TM_LIMIT_HIGH ? TM_BUDGET_UNLIMITED : 0;
}

/* The environment's value of the limit, if it set one that can be used. */
static bool budget_from_env(const tm_topology_t *topo, unsigned t, unsigned l,
                            tm_budget_limit_t *out)
{
  tm_option_id_t id = tm_option_budget(t, l);
  const tm_option_value_t *v = tm_option(id);
  if (!v->set) return false;
  uint64_t cap = topo->tier[t].capacity;
  if (v->percent && cap == 0) {
    tm_warn("TIERMALLOC_%s=%llu%%: tier %u's capacity is unknown; ignored",
            tm_option_descs[id].name, (unsigned long long)v->num, t);
    return false;
  }
  out->source = TIER_BUDGET_ENV;
  out->bytes = out->raw = tm_option_size(id, cap);
  return true;
}

/* Tier t's share of the cgroup's limits, as num / den. */
static void budget_share(const tm_topology_t *topo, unsigned t, uint64_t *num, uint64_t *den,
                         bool *ratio)
{
  uint64_t total = 0, lower = 0;
  for (int i = 0; i < topo->ntiers; i++) total += topo->tier[i].capacity;
  for (int i = 1; i < topo->ntiers; i++) lower += topo->tier[i].capacity;
  const tm_option_value_t *r = tm_option(TM_OPTION_TOPTIER_RATIO);
  *ratio = r->set;
  if (r->set && t == 0) {
    *num = r->num;
    *den = 100;
  } else if (r->set) {
    /* (100 - r)% of the limit, split among the lower tiers by capacity. */
    *num = (100 - r->num) * topo->tier[t].capacity;
    *den = 100 * lower;
  } else {
    *num = topo->tier[t].capacity;
    *den = total;
  }
  if (*den == 0) {   /* capacities unknown: the whole limit */
    *num = 1;
    *den = 1;
  }
}

static bool budget_from_cgroup(const tm_topology_t *topo, const tm_cgroup_limits_t *cg,
                               unsigned t, unsigned l, tm_budget_limit_t *out)
{
  if (t == 0 && cg->has_toptier[l]) {
    out->source = TIER_BUDGET_KERNEL;
    out->bytes = out->raw = cg->toptier[l];
    return true;
  }
  uint64_t v = cg->limit[l];
  if (cg->version == TM_CGROUP_NONE || v == budget_none(l) || v == TM_CGROUP_UNLIMITED)
    return false;
  bool ratio;
  budget_share(topo, t, &out->num, &out->den, &ratio);
  out->source = ratio ? TIER_BUDGET_RATIO
                      : cg->version == TM_CGROUP_V1 ? TIER_BUDGET_CGROUP_V1 : TIER_BUDGET_CGROUP_V2;
  out->raw = v;
  out->bytes = budget_scale(v, out->num, out->den);
  return true;
}

/* min <= low <= high <= max, and no finite limit above the capacity. Each
 * clamp is marked (tm_budget_explain shows it); a warning is said only for
 * a contradiction the environment made, which its author can fix. A cgroup
 * limit above the machine or a memory.high above memory.max is ordinary
 * memcg configuration, so its clamps are silent. */
static void budget_clamp(const tm_topology_t *topo, unsigned t, tm_budget_limit_t *b)
{
  uint64_t cap = topo->tier[t].capacity;
  bool contradiction = false;
  if (cap > 0 && b[TM_LIMIT_MAX].bytes != TM_BUDGET_UNLIMITED && b[TM_LIMIT_MAX].bytes > cap) {
    b[TM_LIMIT_MAX].bytes = cap;
    b[TM_LIMIT_MAX].clamped = true;
  }
  /* high is bounded by max; min and low by max only, as in memcg, where
   * memory.min above memory.high is allowed and protects what it says (reclaim
   * then stops at min); a min above low is kept, and low raised to it (memcg
   * protects the larger of the two). */
  static const int above[TM_LIMIT_COUNT] = { TM_LIMIT_MAX, TM_LIMIT_MAX, TM_LIMIT_MAX, -1 };
  for (int l = TM_LIMIT_HIGH; l >= TM_LIMIT_MIN; l--) {
    uint64_t up = b[above[l]].bytes;
    uint64_t bound = cap > 0 && up == TM_BUDGET_UNLIMITED ? cap : up;
    if (b[l].bytes != budget_none((unsigned)l) && b[l].bytes > bound) {
      b[l].bytes = bound;
      b[l].clamped = true;
      bool to_capacity = up == TM_BUDGET_UNLIMITED || b[above[l]].clamped;
      if (!to_capacity && (b[l].source == TIER_BUDGET_ENV || b[above[l]].source == TIER_BUDGET_ENV))
        contradiction = true;
    }
  }
  if (b[TM_LIMIT_LOW].bytes < b[TM_LIMIT_MIN].bytes) b[TM_LIMIT_LOW].bytes = b[TM_LIMIT_MIN].bytes;
  if (contradiction)
    tm_warn("tier %u: budget out of order; clamped so that min <= low <= high <= max <= capacity", t);
}

void tm_budget_derive(const tm_topology_t *topo, const tm_cgroup_limits_t *cg,
                      tm_budgets_t *out)
{
  memset(out, 0, sizeof *out);
  out->ntiers = topo->ntiers;
  out->cgroup = *cg;
  for (unsigned t = 0; t < (unsigned)topo->ntiers; t++) {
    tm_budget_limit_t *b = out->tier[t];
    for (unsigned l = 0; l < TM_LIMIT_COUNT; l++) {
      b[l].bytes = budget_none(l);
      if (!budget_from_env(topo, t, l, &b[l])) budget_from_cgroup(topo, cg, t, l, &b[l]);
    }
    budget_clamp(topo, t, b);
  }
}

tier_budget_source_t tm_budget_tier_source(const tm_budgets_t *b, unsigned tier)
{
  /* tier_budget_source_t is in precedence order, NONE aside. */
  tier_budget_source_t src = TIER_BUDGET_NONE;
  for (unsigned l = 0; l < TM_LIMIT_COUNT; l++) {
    tier_budget_source_t x = b->tier[tier][l].source;
    if (x != TIER_BUDGET_NONE && (src == TIER_BUDGET_NONE || x < src)) src = x;
  }
  return src;
}

static const char *budget_bytes(uint64_t v, char *buf, size_t size)
{
  static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
  if (v == TM_BUDGET_UNLIMITED) {
    snprintf(buf, size, "unlimited");
    return buf;
  }
  double d = (double)v;
  int u = 0;
  while (d >= 1024 && u < 5) { d /= 1024; u++; }
  if (u == 0) snprintf(buf, size, "%llu B", (unsigned long long)v);
  else snprintf(buf, size, u >= 3 ? "%.2f %s" : "%.1f %s", d, unit[u]);
  return buf;
}

/* The cgroup file a limit comes from. */
static const char *budget_cgroup_file(const tm_cgroup_limits_t *cg, unsigned l)
{
  static const char *const v1[TM_LIMIT_COUNT] = { "-", "-", "memory.soft_limit_in_bytes",
                                                  "memory.limit_in_bytes" };
  static const char *const v2[TM_LIMIT_COUNT] = { "memory.min", "memory.low", "memory.high",
                                                  "memory.max" };
  return cg->version == TM_CGROUP_V1 ? v1[l] : v2[l];
}

const char *tm_budget_explain(const tm_budgets_t *b, unsigned tier, unsigned limit, char *buf,
                              int size)
{
  const tm_budget_limit_t *x = &b->tier[tier][limit];
  const tm_cgroup_limits_t *cg = &b->cgroup;
  char v[32], raw[32], num[32], den[32];
  budget_bytes(x->bytes, v, sizeof v);
  const char *name = tm_limit_names[limit];
  const char *clamped = x->clamped ? " (clamped)" : "";
  switch (x->source) {
  case TIER_BUDGET_NONE:
    snprintf(buf, (size_t)size, "%s %s (no limit set)", name, v);
    break;
  case TIER_BUDGET_ENV:
    snprintf(buf, (size_t)size, "%s %s = TIERMALLOC_%s%s", name, v,
             tm_option_descs[tm_option_budget(tier, limit)].name, clamped);
    break;
  case TIER_BUDGET_KERNEL:
    snprintf(buf, (size_t)size, "%s %s = cgroup %s memory.toptier_%s%s", name, v, cg->path, name,
             clamped);
    break;
  case TIER_BUDGET_RATIO:
  case TIER_BUDGET_CGROUP_V1:
  case TIER_BUDGET_CGROUP_V2:
    budget_bytes(x->raw, raw, sizeof raw);
    if (x->source == TIER_BUDGET_RATIO && tier == 0) {
      snprintf(num, sizeof num, "%llu%%", (unsigned long long)x->num);
      snprintf(buf, (size_t)size, "%s %s = cgroup %s %s %s × TIERMALLOC_TOPTIER_RATIO %s%s", name,
               v, cg->from[limit], budget_cgroup_file(cg, limit), raw, num, clamped);
    } else {
      budget_bytes(x->num, num, sizeof num);
      budget_bytes(x->den, den, sizeof den);
      snprintf(buf, (size_t)size, "%s %s = cgroup %s %s %s × %s / %s%s", name, v, cg->from[limit],
               budget_cgroup_file(cg, limit), raw, num, den, clamped);
    }
    break;
  }
  return buf;
}

/* ---- the budgets in force ------------------------------------------------------ */

static pthread_mutex_t budget_lock = PTHREAD_MUTEX_INITIALIZER;
static tm_budgets_t budget_cur;                  /* under budget_lock */
static _Atomic uint64_t budget_bytes_now[TIER_MAX_TIERS][TM_LIMIT_COUNT];
static _Atomic uint64_t budget_place_now[TIER_MAX_TIERS];
static _Atomic uint64_t budget_read_ns;          /* when the cgroup was last read */
static const tm_topology_t *budget_topo;
static char budget_root[128];

/* Derives from a fresh read of the cgroup and publishes. Under budget_lock. */
static void budget_load_locked(void)
{
  tm_cgroup_limits_t cg;
  tm_cgroup_read(budget_root, &cg);
  tm_budget_derive(budget_topo, &cg, &budget_cur);
  for (unsigned t = 0; t < TIER_MAX_TIERS; t++) {
    uint64_t place = TM_BUDGET_UNLIMITED;
    for (unsigned l = 0; l < TM_LIMIT_COUNT; l++) {
      uint64_t v = (int)t < budget_cur.ntiers ? budget_cur.tier[t][l].bytes : budget_none(l);
      atomic_store_explicit(&budget_bytes_now[t][l], v, memory_order_relaxed);
    }
    if ((int)t < budget_cur.ntiers) {
      uint64_t high = budget_cur.tier[t][TM_LIMIT_HIGH].bytes;
      uint64_t max = budget_cur.tier[t][TM_LIMIT_MAX].bytes;
      uint64_t cap = budget_topo->tier[t].capacity;
      place = high < max ? high : max;
      if (cap > 0 && cap < place) place = cap;
    }
    atomic_store_explicit(&budget_place_now[t], place, memory_order_relaxed);
  }
  atomic_store_explicit(&budget_read_ns, tm_clock_ns(CLOCK_MONOTONIC_COARSE), memory_order_relaxed);
}

void tm_budget_init(const tm_topology_t *topo, const char *root)
{
  budget_topo = topo;
  snprintf(budget_root, sizeof budget_root, "%s", root ? root : "");
  pthread_mutex_lock(&budget_lock);
  budget_load_locked();
  pthread_mutex_unlock(&budget_lock);
}

static void budget_refresh_older(uint64_t age_ns)
{
  if (budget_topo == NULL) return;
  uint64_t now = tm_clock_ns(CLOCK_MONOTONIC_COARSE);
  if (now - atomic_load_explicit(&budget_read_ns, memory_order_relaxed) < age_ns) return;
  if (pthread_mutex_trylock(&budget_lock) != 0) return;
  tm_log_quiet_repeats(true);
  budget_load_locked();
  tm_log_quiet_repeats(false);
  pthread_mutex_unlock(&budget_lock);
}

void tm_budget_refresh(void)
{
  budget_refresh_older(TM_BUDGET_REFRESH_NS);
}

void tm_budget_refresh_now(void)
{
  budget_refresh_older(0);
}

uint64_t tm_budget_get(unsigned tier, unsigned limit)
{
  if (tier >= TIER_MAX_TIERS || limit >= TM_LIMIT_COUNT) return TM_BUDGET_UNLIMITED;
  return atomic_load_explicit(&budget_bytes_now[tier][limit], memory_order_relaxed);
}

uint64_t tm_budget_placement_limit(unsigned tier)
{
  if (tier >= TIER_MAX_TIERS) return TM_BUDGET_UNLIMITED;
  return atomic_load_explicit(&budget_place_now[tier], memory_order_relaxed);
}

void tm_budget_snapshot(tm_budgets_t *out)
{
  pthread_mutex_lock(&budget_lock);
  *out = budget_cur;
  pthread_mutex_unlock(&budget_lock);
}

void tm_budget_prefork(void)
{
  pthread_mutex_lock(&budget_lock);
}

void tm_budget_postfork_parent(void)
{
  pthread_mutex_unlock(&budget_lock);
}

void tm_budget_postfork_child(void)
{
  pthread_mutex_init(&budget_lock, NULL);
}
