/* stats: the text and JSON forms of one snapshot, field by field. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "statsfmt.h"
#include "statsbuf.h"


static tier_stats_t fmt_sample(void)
{
  tier_stats_t s;
  memset(&s, 0, sizeof s);
  s.version = TIER_STATS_VERSION;
  s.ntiers = 2;
  s.unplaced_allocated = 7;
  s.resident_other = 0;
  s.resident_sample_ns = 1500000;
  s.tier[0] = (tier_stats_tier_t){ .capacity = 512ull << 20, .mapped = 32ull << 20,
                                   .committed = 32ull << 20, .used = 30ull << 20,
                                   .allocated = 3ull << 20, .resident = 5ull << 20,
                                   .nodes = { 1 },
                                   .budget = { .min = 0, .low = 1024, .high = 64ull << 20,
                                               .max = 100ull << 20,
                                               .source = TIER_BUDGET_CGROUP_V2 } };
  s.tier[1] = (tier_stats_tier_t){ .capacity = 1ull << 30, .mapped = 10, .committed = 10,
                                   .used = 0, .allocated = 9, .resident = 0, .nodes = { 6 },
                                   .budget = { .high = TIER_UNLIMITED, .max = TIER_UNLIMITED } };
  s.tier[0].reclaim = (__typeof__(s.tier[0].reclaim)){ .demoted = 4ull << 20, .pageout = 0,
                                                       .failed = 8192 };
  s.tier[1].reclaim.pageout = 2ull << 20;
  s.reclaim_passes = 12;
  s.reclaim_cpu_ns = 2500000;
  s.reclaim_mode = TIER_RECLAIM_PRESSURE;
  s.reclaim_state = TIER_RECLAIM_DEMOTING;
  strcpy(s.cold_signal, "commit age");
  strcpy(s.cgroup, "/app/\"w\"");
  s.numa_balancing = 2;
  s.numa_balancing_policies = 3;
  return s;
}

Test(stats_format, json_has_every_field_once)
{
  tier_stats_t s = fmt_sample();
  statsbuf_t b = { .n = 0 };
  tm_stats_format(&s, NULL, statsbuf_write, &b, TIER_STATS_JSON);
  cr_expect_str_eq(b.s,
    "{\"version\":11,\"ntiers\":2,\"unplaced_allocated_bytes\":7,\"resident_other_bytes\":0,"
    "\"resident_sample_ns\":1500000,\"reclaim_passes\":12,\"reclaim_cpu_ns\":2500000,\"tiers\":["
    "{\"tier\":0,\"nodes\":\"0\",\"capacity_bytes\":536870912,\"mapped_bytes\":33554432,"
    "\"committed_bytes\":33554432,\"used_bytes\":31457280,\"allocated_bytes\":3145728,"
    "\"resident_bytes\":5242880,\"demoted_bytes\":4194304,\"promoted_bytes\":0,\"pageout_bytes\":0,"
    "\"failed_bytes\":8192,"
    "\"budget\":{\"min\":0,\"low\":1024,\"high\":67108864,\"max\":104857600,\"source\":\"cgroup v2\",\"max_held\":true}},"
    "{\"tier\":1,\"nodes\":\"1-2\",\"capacity_bytes\":1073741824,\"mapped_bytes\":10,\"committed_bytes\":10,"
    "\"used_bytes\":0,\"allocated_bytes\":9,\"resident_bytes\":0,"
    "\"demoted_bytes\":0,\"promoted_bytes\":0,\"pageout_bytes\":2097152,\"failed_bytes\":0,"
    "\"budget\":{\"min\":0,\"low\":0,\"high\":null,\"max\":null,\"source\":\"none\",\"max_held\":true}}],"
    "\"cgroup\":\"/app/\\\"w\\\"\",\"reclaim_mode\":\"pressure\",\"reclaim_state\":\"demoting\","
    "\"cold_signal\":\"commit age\",\"pageout_available\":false,"
    "\"numa_balancing\":2,\"numa_balancing_policies\":\"preferred-many and bind\",\"numa_balancing_heap\":false,"
    "\"numa_balancing_demotes\":false,\"site_samples\":0,\"sites_apart\":0,\"sites_cold\":0,\"sites_tried\":0,"
    "\"handed_given_back_bytes\":0,\"handed_undone_bytes\":0,\"kernel_demoted_bytes\":0,\"kernel_undone_bytes\":0,\"kernel_held\":0,\"sites\":[]}\n");
}

/* A record read by tierctl: JSON and Prometheus carry how old it is, how
 * often its thread publishes, and who measured its resident bytes when. */
Test(stats_format, a_records_ages_are_in_json_and_prometheus)
{
  tier_stats_t s = fmt_sample();
  tm_stats_record_t g = { .published_age_ns = 50000000, .interval_ns = 100000000, .resident_age_ns = 0,
                          .publisher = "thread", .resident_by = "tierctl" };
  tm_stats_who_t who = { 42, "db", true, &g };
  statsbuf_t b = { .n = 0 };
  tm_stats_format(&s, &who, statsbuf_write, &b, TIER_STATS_JSON);
  cr_expect(strstr(b.s, "\"pid\":42,\"command\":\"db\",\"publisher\":\"thread\",\"publish_interval_ns\":100000000,"
                        "\"published_age_ns\":50000000,\"resident_by\":\"tierctl\",\"resident_age_ns\":0,") != NULL,
            "%s", b.s);
  statsbuf_t p = { .n = 0 };
  const tier_stats_t *all[] = { &s };
  tm_stats_format_prom(all, &who, 1, statsbuf_write, &p);
  cr_expect(strstr(p.s, "# TYPE tiermalloc_record_age_seconds gauge\n"
                        "tiermalloc_record_age_seconds{pid=\"42\",command=\"db\"} 0.050000000\n") != NULL, "%s", p.s);
  cr_expect(strstr(p.s, "tiermalloc_record_interval_seconds{pid=\"42\",command=\"db\"} 0.100000000\n") != NULL, "%s", p.s);
  cr_expect(strstr(p.s, "tiermalloc_resident_age_seconds{pid=\"42\",command=\"db\"} 0.000000000\n") != NULL, "%s", p.s);
  /* The process's own stats (no record) have no ages. */
  statsbuf_t q = { .n = 0 };
  tm_stats_who_t self = { 42, "db", false, NULL };
  tm_stats_format_prom(all, &self, 1, statsbuf_write, &q);
  cr_expect(strstr(q.s, "tiermalloc_record_age_seconds") == NULL, "%s", q.s);
}

Test(stats_format, text_is_a_table_with_units)
{
  tier_stats_t s = fmt_sample();
  statsbuf_t b = { .n = 0 };
  tm_stats_format(&s, NULL, statsbuf_write, &b, TIER_STATS_TEXT);
  cr_expect(strstr(b.s, "tiermalloc: 2 tiers\n") == b.s, "%s", b.s);
  cr_expect(strstr(b.s, "\nnuma balancing       tiering (2); policies that may allow it: preferred-many and bind; "
                        "the heap: not scanned (its policies do not allow it)\n") != NULL, "%s", b.s);
#define X(name, unit, doc) cr_expect(strstr(b.s, #name) != NULL, "text lacks " #name);
  TIER_STATS_TIER_FIELDS(X)
  TIER_STATS_GLOBAL_FIELDS(X)
  TIER_STATS_SITE_FIELDS(X)
  TIER_STATS_HANDED_FIELDS(X)
  TIER_STATS_BUDGET_FIELDS(X)
  TIER_STATS_RECLAIM_FIELDS(X)
#undef X
  cr_expect(strstr(b.s, "unlimited") != NULL, "%s", b.s);
  cr_expect(strstr(b.s, "reclaim              pressure, demoting; cold: commit age; pageout "
                        "unavailable") != NULL, "%s", b.s);
  cr_expect(strstr(b.s, "4.0 MiB") != NULL, "%s", b.s);
  cr_expect(strstr(b.s, "cgroup v2") != NULL, "%s", b.s);
  cr_expect(strstr(b.s, "100.0 MiB") != NULL, "%s", b.s);
  cr_expect(strstr(b.s, "512.0 MiB") != NULL, "%s", b.s);
  cr_expect(strstr(b.s, "1-2") != NULL);
  cr_expect(strstr(b.s, "1.500 ms") != NULL, "%s", b.s);
  /* Where the bytes are now, against the limits, first; the home-tier
   * figures apart, in a table that says so. */
  const char *now = strstr(b.s, "\ntier nodes "), *home = strstr(b.s, "\ntier home ");
  cr_assert(now && home && now < home, "%s", b.s);
  const char *now_end = strchr(now + 1, '\n'), *home_end = strchr(home + 1, '\n');
  cr_expect(strstr(now, "resident") < now_end && strstr(now, " high ") < now_end && strstr(now, " max ") < now_end,
            "%s", b.s);
  cr_expect(strstr(now, "allocated") > home && strstr(home, "allocated") < home_end, "%s", b.s);
  cr_expect(strstr(home, "mapped") < home_end && strstr(home, "by home tier") < home_end, "%s", b.s);
  cr_expect(strstr(b.s, "\n0    0               512.0 MiB       32.0 MiB       30.0 MiB        5.0 MiB       64.0 MiB      100.0 MiB\n")
            != NULL, "tier 0 now: capacity, committed, used, resident, high, max: %s", b.s);
}

/* A max reclaim cannot hold is said where the max is shown, and in the state. */
Test(stats_format, a_max_not_held_is_shown_in_both_forms)
{
  tier_stats_t s = fmt_sample();
  s.tier[1].budget.max = 64ull << 20;
  s.tier[1].budget.source = TIER_BUDGET_ENV;
  s.tier[1].budget.max_not_held = 1;
  s.reclaim_state = TIER_RECLAIM_MAX_NOT_HELD;
  statsbuf_t b = { .n = 0 };
  tm_stats_format(&s, NULL, statsbuf_write, &b, TIER_STATS_TEXT);
  cr_expect(strstr(b.s, "  env; above max, NOT HELD (nothing can be paged out)\n") != NULL, "%s", b.s);
  cr_expect(strstr(b.s, "pressure, max not held;") != NULL, "%s", b.s);
  b.n = 0;
  tm_stats_format(&s, NULL, statsbuf_write, &b, TIER_STATS_JSON);
  cr_expect(strstr(b.s, "\"source\":\"env\",\"max_held\":false}") != NULL, "%s", b.s);
  cr_expect(strstr(b.s, "\"reclaim_state\":\"max not held\"") != NULL, "%s", b.s);
}

/* The sites given chunks of their own, named by the loader's symbols (a
 * function libc exports stands in for a call site). */
Test(stats_format, sites_apart_are_named_by_their_frames_in_both_forms)
{
  tier_stats_t s = fmt_sample();
  s.sites_apart = 1;
  s.sites_cold = 1;
  s.site[0] = (tier_stats_site_t){ .frames = { (uint64_t)(uintptr_t)getpid + 4, 0x10 },
                                   .sampled = 1 << 20, .hot = 0, .cold = 6ull << 20, .cold_verdict = 1 };
  statsbuf_t b = { .n = 0 };
  tm_stats_format(&s, NULL, statsbuf_write, &b, TIER_STATS_TEXT);
  cr_expect(strstr(b.s, "\nsite new memory") != NULL, "%s", b.s);
  cr_expect(strstr(b.s, "\n0    below      ") != NULL, "%s", b.s);
  cr_expect(strstr(b.s, "6.0 MiB  __getpid+0x4 (libc.so.6) <- 0x10\n") != NULL,
            "named by the loader, or a number where no object holds it: %s", b.s);
  b.n = 0;
  tm_stats_format(&s, NULL, statsbuf_write, &b, TIER_STATS_JSON);
  cr_expect(strstr(b.s, ",\"sampled\":1048576,\"hot\":0,\"cold\":6291456,\"cold_verdict\":true}]}") != NULL,
            "%s", b.s);
  cr_expect(strstr(b.s, "\"sites\":[{\"frames\":[\"") != NULL, "%s", b.s);
}

/* The Prometheus form: names with their unit, HELP and TYPE once per family,
 * counters for the sums since start-up, +Inf for no limit, labels escaped. */
Test(stats_format, prometheus_families_for_two_processes)
{
  tier_stats_t a = fmt_sample(), b2 = fmt_sample();
  b2.tier[0].resident = 1;
  const tier_stats_t *s[] = { &a, &b2 };
  tm_stats_who_t who[] = { { 10, "app", true, NULL }, { 11, "x\"y", true, NULL } };
  statsbuf_t b = { .n = 0 };
  tm_stats_format_prom(s, who, 2, statsbuf_write, &b);
  cr_expect(strstr(b.s, "# HELP tiermalloc_tier_resident_bytes bytes of the process's tiered ranges") != NULL,
            "%s", b.s);
  cr_expect(strstr(b.s, "# TYPE tiermalloc_tier_resident_bytes gauge\n"
                        "tiermalloc_tier_resident_bytes{pid=\"10\",command=\"app\",tier=\"0\",nodes=\"0\"} 5242880\n"
                        "tiermalloc_tier_resident_bytes{pid=\"10\",command=\"app\",tier=\"1\",nodes=\"1-2\"} 0\n"
                        "tiermalloc_tier_resident_bytes{pid=\"11\",command=\"x\\\"y\",tier=\"0\",nodes=\"0\"} 1\n") != NULL,
            "%s", b.s);
  cr_expect(strstr(b.s, "# TYPE tiermalloc_tier_demoted_bytes_total counter\n"
                        "tiermalloc_tier_demoted_bytes_total{pid=\"10\",command=\"app\",tier=\"0\",nodes=\"0\"} 4194304\n") != NULL,
            "%s", b.s);
  cr_expect(strstr(b.s, "tiermalloc_tier_pageout_bytes_total{pid=\"10\",command=\"app\",tier=\"1\",nodes=\"1-2\"} 2097152\n") != NULL,
            "%s", b.s);
  cr_expect(strstr(b.s, "tiermalloc_tier_budget_bytes{pid=\"10\",command=\"app\",tier=\"0\",nodes=\"0\",limit=\"high\","
                        "source=\"cgroup v2\"} 67108864\n") != NULL, "%s", b.s);
  cr_expect(strstr(b.s, "tiermalloc_tier_budget_bytes{pid=\"10\",command=\"app\",tier=\"1\",nodes=\"1-2\",limit=\"max\","
                        "source=\"none\"} +Inf\n") != NULL, "%s", b.s);
  cr_expect(strstr(b.s, "# TYPE tiermalloc_reclaim_cpu_seconds_total counter\n"
                        "tiermalloc_reclaim_cpu_seconds_total{pid=\"10\",command=\"app\"} 0.002500000\n") != NULL, "%s", b.s);
  cr_expect(strstr(b.s, "# TYPE tiermalloc_reclaim_passes_total counter\n") != NULL, "%s", b.s);
  cr_expect(strstr(b.s, "# TYPE tiermalloc_resident_sample_seconds gauge\n") != NULL, "%s", b.s);
  cr_expect(strstr(b.s, "# TYPE tiermalloc_sites_apart gauge\n") != NULL, "%s", b.s);
  cr_expect(strstr(b.s, "# TYPE tiermalloc_handed_undone_bytes_total counter\n") != NULL, "%s", b.s);
  cr_expect(strstr(b.s, "tiermalloc_reclaim_state{pid=\"11\",command=\"x\\\"y\",state=\"demoting\"} 1\n") != NULL, "%s", b.s);
  cr_expect(strstr(b.s, "tiermalloc_info{pid=\"10\",command=\"app\",cgroup=\"/app/\\\"w\\\"\",reclaim_mode=\"pressure\","
                        "cold_signal=\"commit age\",stats_version=\"11\"} 1\n") != NULL, "%s", b.s);
  /* Each family's HELP and TYPE once, every line a comment or a sample. */
  unsigned helps = 0, types = 0;
  for (const char *l = b.s; *l; l = strchr(l, '\n') + 1) {
    if (strncmp(l, "# HELP ", 7) == 0) helps++;
    else if (strncmp(l, "# TYPE ", 7) == 0) types++;
    else cr_expect(strncmp(l, "tiermalloc_", 11) == 0, "line %.80s", l);
    if (!strchr(l, '\n')) break;
  }
  unsigned families = 3 /* info, numa_balancing, reclaim_state */ + 2 /* budget, max_held */;
#define X(name, unit, doc) families++;
  TIER_STATS_GLOBAL_FIELDS(X)
  TIER_STATS_SITE_FIELDS(X)
  TIER_STATS_HANDED_FIELDS(X)
  TIER_STATS_TIER_FIELDS(X)
  TIER_STATS_RECLAIM_FIELDS(X)
#undef X
  cr_expect_eq(helps, families);
  cr_expect_eq(types, families);
}

/* A record read from another process prints its frames as addresses, and
 * JSON names the process. */
Test(stats_format, a_foreign_record_names_its_process_and_prints_frames_as_addresses)
{
  tier_stats_t s = fmt_sample();
  s.sites_apart = 1;
  s.site[0] = (tier_stats_site_t){ .frames = { (uint64_t)(uintptr_t)getpid + 4 } };
  tm_stats_who_t who = { 42, "db", true, NULL };
  statsbuf_t b = { .n = 0 };
  tm_stats_format(&s, &who, statsbuf_write, &b, TIER_STATS_JSON);
  const char *head = "{\"version\":11,\"pid\":42,\"command\":\"db\",\"ntiers\":2,";
  cr_expect(strncmp(b.s, head, strlen(head)) == 0, "%s", b.s);
  cr_expect(strstr(b.s, "getpid") == NULL, "%s", b.s);
  cr_expect(strstr(b.s, "\"frames\":[\"0x") != NULL, "%s", b.s);
}

/* The whole Prometheus form of one process, against a golden file
 * (tests/unit/golden/stats.prom; TM_GOLDEN_WRITE=1 rewrites it, to be
 * reviewed like any change). */
Test(stats_format, prometheus_matches_the_golden_file)
{
  tier_stats_t s = fmt_sample();
  tm_stats_who_t who = { 4242, "app", true, NULL };
  statsbuf_t b = { .n = 0 };
  tm_stats_format(&s, &who, statsbuf_write, &b, TIER_STATS_PROM);
  const char *path = "tests/unit/golden/stats.prom";
  if (getenv("TM_GOLDEN_WRITE")) {
    FILE *w = fopen(path, "w");
    cr_assert_not_null(w);
    fputs(b.s, w);
    fclose(w);
  }
  static char want[65536];
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f, "%s (run from the top of the tree)", path);
  size_t n = fread(want, 1, sizeof want - 1, f);
  fclose(f);
  want[n] = '\0';
  cr_expect_str_eq(b.s, want);
}
