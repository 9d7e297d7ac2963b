/*
 * budget: per-tier min/low/high/max from the environment, the kernel's
 * toptier files and the cgroup, on captured topologies. The same derivation
 * is checked for real, in a cgroup of the tiered VM, in tests/vm.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>

#include <string.h>

#include "budget.h"
#include "options.h"

#define MiB (1024ull * 1024)

static tm_topology_t bt_topo;
static tm_budgets_t bt;

/* The topology of a fixture tree and its cgroup, with the given variables. */
static void bt_derive_fixture(const char *tree, char **env)
{
  char *none[] = { NULL };
  tm_options_init_from(env ? env : none, false);
  char root[128];
  snprintf(root, sizeof root, "tests/fixtures/%s", tree);
  cr_assert_eq(tm_topology_discover(&bt_topo, root, NULL), 0);
  tm_cgroup_limits_t cg;
  tm_cgroup_read(root, &cg);
  tm_budget_derive(&bt_topo, &cg, &bt);
}

static uint64_t bt_cap(int t) { return bt_topo.tier[t].capacity; }

static uint64_t bt_total(void)
{
  uint64_t s = 0;
  for (int t = 0; t < bt_topo.ntiers; t++) s += bt_cap(t);
  return s;
}

static uint64_t bt_scaled(uint64_t v, int t)
{
  return (uint64_t)((unsigned __int128)v * bt_cap(t) / bt_total());
}

static const tm_budget_limit_t *bt_limit(int t, unsigned l) { return &bt.tier[t][l]; }

/* A cgroup's limits made by hand. */
static tm_cgroup_limits_t bt_cgroup(tm_cgroup_version_t v, uint64_t min, uint64_t low,
                                    uint64_t high, uint64_t max)
{
  tm_cgroup_limits_t cg;
  memset(&cg, 0, sizeof cg);
  cg.version = v;
  strcpy(cg.path, "/svc");
  uint64_t vals[TM_LIMIT_COUNT] = { min, low, high, max };
  for (unsigned l = 0; l < TM_LIMIT_COUNT; l++) {
    cg.limit[l] = vals[l];
    strcpy(cg.from[l], "/svc");
  }
  return cg;
}

Test(budget, cgroup_v2_limits_are_scaled_by_each_tiers_capacity, .init = cr_redirect_stderr)
{
  /* /app: high 200 MiB, max 300 MiB; the process is in /app/worker (no limits). */
  bt_derive_fixture("dram-cxl-6.12", NULL);
  cr_assert_eq(bt.ntiers, 2);
  for (int t = 0; t < 2; t++) {
    cr_expect_eq(bt_limit(t, TM_LIMIT_MAX)->bytes, bt_scaled(300 * MiB, t), "tier %d max", t);
    cr_expect_eq(bt_limit(t, TM_LIMIT_HIGH)->bytes, bt_scaled(200 * MiB, t), "tier %d high", t);
    cr_expect_eq(bt_limit(t, TM_LIMIT_MAX)->source, TIER_BUDGET_CGROUP_V2);
    cr_expect_eq(bt_limit(t, TM_LIMIT_MIN)->bytes, 0, "worker's own memory.min is 0");
    cr_expect_eq(bt_limit(t, TM_LIMIT_LOW)->source, TIER_BUDGET_NONE);
  }
  /* 300 MiB x 512 MiB / 1.5 GiB: about a third. */
  cr_expect(bt_limit(0, TM_LIMIT_MAX)->bytes > 95 * MiB && bt_limit(0, TM_LIMIT_MAX)->bytes < 105 * MiB);
  char why[256];
  tm_budget_explain(&bt, 0, TM_LIMIT_MAX, why, sizeof why);
  cr_expect(strstr(why, "= cgroup /app memory.max 300.0 MiB × ") != NULL, "%s", why);
  cr_assert_stderr_eq_str("");
}

Test(budget, three_tiers_each_get_their_own_share, .init = cr_redirect_stderr)
{
  bt_derive_fixture("hbm-dram-cxl-6.12", NULL);
  cr_assert_eq(bt.ntiers, 3);
  uint64_t sum = 0;
  for (int t = 0; t < 3; t++) {
    cr_expect_eq(bt_limit(t, TM_LIMIT_MAX)->bytes, bt_scaled(300 * MiB, t), "tier %d", t);
    sum += bt_limit(t, TM_LIMIT_MAX)->bytes;
  }
  cr_expect(sum <= 300 * MiB && sum > 300 * MiB - 3, "the shares add up to the limit: %llu",
            (unsigned long long)sum);
}

Test(budget, environment_beats_the_cgroup_and_clamps_what_it_contradicts,
     .init = cr_redirect_stderr)
{
  char *env[] = { "TIERMALLOC_TOPTIER_MAX=64M", NULL };
  bt_derive_fixture("dram-cxl-6.12", env);
  cr_expect_eq(bt_limit(0, TM_LIMIT_MAX)->bytes, 64 * MiB);
  cr_expect_eq(bt_limit(0, TM_LIMIT_MAX)->source, TIER_BUDGET_ENV);
  /* The cgroup's high scaled is about 68 MiB, above the 64 MiB max: clamped. */
  cr_expect_eq(bt_limit(0, TM_LIMIT_HIGH)->source, TIER_BUDGET_CGROUP_V2);
  cr_expect_eq(bt_limit(0, TM_LIMIT_HIGH)->bytes, 64 * MiB);
  cr_expect(bt_limit(0, TM_LIMIT_HIGH)->clamped);
  cr_expect_eq(bt_limit(1, TM_LIMIT_MAX)->source, TIER_BUDGET_CGROUP_V2, "tier 1 is the cgroup's");
  cr_expect_eq(tm_budget_tier_source(&bt, 0), TIER_BUDGET_ENV, "the strongest of tier 0's sources");
  cr_expect_eq(tm_budget_tier_source(&bt, 1), TIER_BUDGET_CGROUP_V2);
  cr_assert_stderr_eq_str("tiermalloc: tier 0: budget out of order; "
                          "clamped so that min <= low <= high <= max <= capacity\n");
}

Test(budget, percentages_are_of_the_tiers_own_capacity, .init = cr_redirect_stderr)
{
  char *env[] = { "TIERMALLOC_TOPTIER_HIGH=10%", "TIERMALLOC_TIER1_MAX=50%", NULL };
  bt_derive_fixture("dram-cxl-6.12", env);
  cr_expect_eq(bt_limit(0, TM_LIMIT_HIGH)->bytes, bt_cap(0) / 10);
  cr_expect_eq(bt_limit(1, TM_LIMIT_MAX)->bytes, bt_cap(1) / 2);
  cr_expect_eq(bt_limit(1, TM_LIMIT_MAX)->source, TIER_BUDGET_ENV);
}

Test(budget, kernel_toptier_files_beat_the_scaled_cgroup, .init = cr_redirect_stderr)
{
  bt_derive_fixture("dram-cxl-6.12", NULL);
  tm_cgroup_limits_t cg = bt_cgroup(TM_CGROUP_V2, 0, 0, 200 * MiB, 300 * MiB);
  cg.has_toptier[TM_LIMIT_MAX] = true;
  cg.toptier[TM_LIMIT_MAX] = 90 * MiB;
  tm_budget_derive(&bt_topo, &cg, &bt);
  cr_expect_eq(bt_limit(0, TM_LIMIT_MAX)->bytes, 90 * MiB);
  cr_expect_eq(bt_limit(0, TM_LIMIT_MAX)->source, TIER_BUDGET_KERNEL);
  cr_expect_eq(bt_limit(0, TM_LIMIT_HIGH)->source, TIER_BUDGET_CGROUP_V2, "no toptier_high file");
  cr_expect_eq(bt_limit(1, TM_LIMIT_MAX)->source, TIER_BUDGET_CGROUP_V2, "toptier is tier 0's");
  char why[256];
  tm_budget_explain(&bt, 0, TM_LIMIT_MAX, why, sizeof why);
  cr_expect_str_eq(why, "max 90.0 MiB = cgroup /svc memory.toptier_max");
}

Test(budget, ratio_gives_the_top_tier_its_share_and_the_rest_below, .init = cr_redirect_stderr)
{
  char *env[] = { "TIERMALLOC_TOPTIER_RATIO=25%", NULL };
  bt_derive_fixture("dram-cxl-6.12", env);
  cr_expect_eq(bt_limit(0, TM_LIMIT_MAX)->bytes, 75 * MiB);
  cr_expect_eq(bt_limit(0, TM_LIMIT_MAX)->source, TIER_BUDGET_RATIO);
  cr_expect_eq(bt_limit(1, TM_LIMIT_MAX)->bytes, 225 * MiB);
}

Test(budget, cgroup_v1_limit_is_max_and_soft_limit_is_high, .init = cr_redirect_stderr)
{
  bt_derive_fixture("host-single-node", NULL);
  tm_cgroup_limits_t cg = bt_cgroup(TM_CGROUP_V1, 0, 0, 1024 * MiB, 2048 * MiB);
  tm_budget_derive(&bt_topo, &cg, &bt);
  cr_assert_eq(bt.ntiers, 1);
  cr_expect_eq(bt_limit(0, TM_LIMIT_MAX)->bytes, 2048 * MiB, "one tier: the whole limit");
  cr_expect_eq(bt_limit(0, TM_LIMIT_HIGH)->bytes, 1024 * MiB);
  cr_expect_eq(bt_limit(0, TM_LIMIT_MAX)->source, TIER_BUDGET_CGROUP_V1);
  char why[256];
  tm_budget_explain(&bt, 0, TM_LIMIT_HIGH, why, sizeof why);
  cr_expect(strstr(why, "memory.soft_limit_in_bytes 1.00 GiB") != NULL, "%s", why);
}

Test(budget, out_of_order_limits_are_clamped_with_one_warning, .init = cr_redirect_stderr)
{
  char *env[] = { "TIERMALLOC_TOPTIER_MIN=100M", "TIERMALLOC_TOPTIER_LOW=50M",
                  "TIERMALLOC_TOPTIER_HIGH=80M", "TIERMALLOC_TOPTIER_MAX=60M", NULL };
  bt_derive_fixture("dram-cxl-6.12", env);
  cr_expect_eq(bt_limit(0, TM_LIMIT_MAX)->bytes, 60 * MiB);
  cr_expect_eq(bt_limit(0, TM_LIMIT_HIGH)->bytes, 60 * MiB);
  cr_expect_eq(bt_limit(0, TM_LIMIT_MIN)->bytes, 60 * MiB, "min: at most high");
  cr_expect_eq(bt_limit(0, TM_LIMIT_LOW)->bytes, 60 * MiB, "low: raised to min");
  cr_assert_stderr_eq_str("tiermalloc: tier 0: budget out of order; "
                          "clamped so that min <= low <= high <= max <= capacity\n");
}

/* memcg protects the larger of min and low; a min alone is not lost. */
Test(budget, a_min_above_low_raises_low_without_a_warning, .init = cr_redirect_stderr)
{
  char *env[] = { "TIERMALLOC_TOPTIER_MIN=40M", "TIERMALLOC_TOPTIER_HIGH=80M", NULL };
  bt_derive_fixture("dram-cxl-6.12", env);
  cr_expect_eq(bt_limit(0, TM_LIMIT_MIN)->bytes, 40 * MiB);
  cr_expect_eq(bt_limit(0, TM_LIMIT_LOW)->bytes, 40 * MiB);
  cr_assert_stderr_eq_str("");
}

/* As memory.min above memory.high in memcg: protection wins over high. */
Test(budget, a_min_above_high_is_kept, .init = cr_redirect_stderr)
{
  char *env[] = { "TIERMALLOC_TOPTIER_MIN=48M", "TIERMALLOC_TOPTIER_HIGH=24M", NULL };
  bt_derive_fixture("dram-cxl-6.12", env);
  cr_expect_eq(bt_limit(0, TM_LIMIT_MIN)->bytes, 48 * MiB);
  cr_expect_eq(bt_limit(0, TM_LIMIT_HIGH)->bytes, 24 * MiB);
  cr_assert_stderr_eq_str("");
}

Test(budget, a_limit_above_the_capacity_is_clamped_to_it, .init = cr_redirect_stderr)
{
  char *env[] = { "TIERMALLOC_TOPTIER_MAX=100G", "TIERMALLOC_TOPTIER_HIGH=200G", NULL };
  bt_derive_fixture("dram-cxl-6.12", env);
  cr_expect_eq(bt_limit(0, TM_LIMIT_MAX)->bytes, bt_cap(0));
  cr_expect(bt_limit(0, TM_LIMIT_MAX)->clamped);
  cr_expect_eq(bt_limit(0, TM_LIMIT_HIGH)->bytes, bt_cap(0), "high above max, both above the capacity");
  cr_expect(bt_limit(0, TM_LIMIT_HIGH)->clamped);
  cr_assert_stderr_eq_str("", "as good as unlimited: nothing to warn of");
}

/* A container's limits are its orchestrator's, often above the machine, and
 * memcg allows memory.high above memory.max: clamped, marked, never warned
 * of (each derive would repeat it). With TOPTIER_RATIO=10%, tier 1's 90% of
 * 4 GiB is far above its 1 GiB. */
Test(budget, cgroup_limits_above_the_machine_are_clamped_silently, .init = cr_redirect_stderr)
{
  char *env[] = { "TIERMALLOC_TOPTIER_RATIO=10%", NULL };
  bt_derive_fixture("dram-cxl-6.12", env);
  tm_cgroup_limits_t cg;
  tm_cgroup_read("tests/fixtures/dram-cxl-6.12", &cg);
  cr_assert_eq(cg.version, TM_CGROUP_V2);
  cg.limit[TM_LIMIT_MAX] = 4096 * MiB;
  cg.limit[TM_LIMIT_HIGH] = 8192 * MiB;
  tm_budget_derive(&bt_topo, &cg, &bt);
  cr_expect_eq(bt_limit(0, TM_LIMIT_MAX)->bytes, 4096 * MiB / 10, "10%% of memory.max");
  cr_expect_eq(bt_limit(0, TM_LIMIT_HIGH)->bytes, 4096 * MiB / 10, "high held at max");
  cr_expect(bt_limit(0, TM_LIMIT_HIGH)->clamped);
  cr_expect_eq(bt_limit(1, TM_LIMIT_MAX)->bytes, bt_cap(1));
  cr_expect(bt_limit(1, TM_LIMIT_MAX)->clamped);
  cr_assert_stderr_eq_str("");
}

Test(budget, no_source_means_no_limit, .init = cr_redirect_stderr)
{
  char *none[] = { NULL };
  tm_options_init_from(none, false);
  cr_assert_eq(tm_topology_discover(&bt_topo, "tests/fixtures/dram-cxl-6.12", NULL), 0);
  tm_cgroup_limits_t cg;
  tm_cgroup_read("/nonexistent", &cg);
  cr_expect_eq(cg.version, TM_CGROUP_NONE);
  tm_budget_derive(&bt_topo, &cg, &bt);
  for (int t = 0; t < 2; t++) {
    cr_expect_eq(bt_limit(t, TM_LIMIT_MIN)->bytes, 0);
    cr_expect_eq(bt_limit(t, TM_LIMIT_LOW)->bytes, 0);
    cr_expect_eq(bt_limit(t, TM_LIMIT_HIGH)->bytes, TM_BUDGET_UNLIMITED);
    cr_expect_eq(bt_limit(t, TM_LIMIT_MAX)->bytes, TM_BUDGET_UNLIMITED);
    for (unsigned l = 0; l < TM_LIMIT_COUNT; l++)
      cr_expect_eq(bt_limit(t, l)->source, TIER_BUDGET_NONE);
  }
  cr_assert_stderr_eq_str("");
}

Test(budget, a_percentage_of_an_unknown_capacity_is_ignored, .init = cr_redirect_stderr)
{
  char *env[] = { "TIERMALLOC_TOPTIER_MAX=50%", NULL };
  tm_options_init_from(env, false);
  memset(&bt_topo, 0, sizeof bt_topo);
  bt_topo.ntiers = 2;   /* capacities unknown (0) */
  tm_cgroup_limits_t cg = bt_cgroup(TM_CGROUP_NONE, 0, 0, TM_CGROUP_UNLIMITED,
                                    TM_CGROUP_UNLIMITED);
  tm_budget_derive(&bt_topo, &cg, &bt);
  cr_expect_eq(bt_limit(0, TM_LIMIT_MAX)->bytes, TM_BUDGET_UNLIMITED);
  cr_assert_stderr_eq_str("tiermalloc: TIERMALLOC_TOPTIER_MAX=50%: tier 0's capacity is unknown; "
                          "ignored\n");
}
