/* liverec: the live record's seqlock. A reader racing a writer keeps only
 * whole snapshots, never waits on it, and refuses what is not a record. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "liverec.h"

/* Every figure of snapshot k is k: a torn copy mixes two values. */
static void lr_fill(tier_stats_t *s, uint64_t k)
{
  memset(s, 0, sizeof *s);
  s->version = TIER_STATS_VERSION;
  s->ntiers = TIER_MAX_TIERS;
  s->reclaim_passes = k;
  for (unsigned t = 0; t < TIER_MAX_TIERS; t++) {
#define X(name, unit, doc) s->tier[t].name = k;
    TIER_STATS_TIER_FIELDS(X)
#undef X
    s->tier[t].reclaim.demoted = k;
    s->tier[t].budget.max = k;
  }
  s->site[TIER_STATS_SITES - 1].sampled = k;
}

static bool lr_whole(const tier_live_t *r)
{
  uint64_t k = r->stats.reclaim_passes;
  if (r->published_ns != k || r->interval_ns != k) return false;
  for (unsigned t = 0; t < TIER_MAX_TIERS; t++) {
#define X(name, unit, doc) if (r->stats.tier[t].name != k) return false;
    TIER_STATS_TIER_FIELDS(X)
#undef X
    if (r->stats.tier[t].reclaim.demoted != k || r->stats.tier[t].budget.max != k) return false;
  }
  return r->stats.site[TIER_STATS_SITES - 1].sampled == k;
}

static tier_live_t lr_rec;
static atomic_bool lr_stop;
static atomic_ulong lr_writes;

static void *lr_writer(void *arg)
{
  (void)arg;
  tier_stats_t s;
  for (uint64_t k = 1; !atomic_load(&lr_stop); k++) {
    lr_fill(&s, k);
    tm_liverec_write(&lr_rec, &s, TIER_LIVE_THREAD, k, k, k);
    atomic_fetch_add(&lr_writes, 1);
  }
  return NULL;
}

Test(liverec, a_reader_racing_the_writer_keeps_only_whole_snapshots, .timeout = 60)
{
  memset(&lr_rec, 0, sizeof lr_rec);
  lr_rec.magic = TIER_LIVE_MAGIC;
  lr_rec.version = TIER_LIVE_VERSION;
  lr_rec.size = sizeof lr_rec;
  tier_stats_t s;
  lr_fill(&s, 0);
  tm_liverec_write(&lr_rec, &s, TIER_LIVE_THREAD, 0, 0, 0);
  atomic_store(&lr_stop, false);
  pthread_t w;
  cr_assert_eq(pthread_create(&w, NULL, lr_writer, NULL), 0);
  unsigned kept = 0, busy = 0, newer = 0;
  uint64_t last = 0;
  static tier_live_t copy;
  /* Until both have done enough (the machine may be busy), or 10 s. */
  for (unsigned i = 0; i < 2000000 && (kept < 1000 || newer < 100 || atomic_load(&lr_writes) < 10000); i++) {
    int err = tm_liverec_read(&lr_rec, sizeof lr_rec, &copy, 64);
    if (err == EAGAIN) {
      busy++;
      continue;
    }
    cr_assert_eq(err, 0);
    cr_assert(lr_whole(&copy), "a torn copy was kept: passes %llu, tier 3 resident %llu",
              (unsigned long long)copy.stats.reclaim_passes, (unsigned long long)copy.stats.tier[3].resident);
    cr_assert_geq(copy.stats.reclaim_passes, last, "snapshots go forward");
    newer += copy.stats.reclaim_passes > last;
    last = copy.stats.reclaim_passes;
    kept++;
  }
  atomic_store(&lr_stop, true);
  pthread_join(w, NULL);
  cr_expect_geq(kept, 1000, "kept %u, busy %u", kept, busy);
  cr_expect_geq(newer, 100, "the reader saw the writer move on %u times", newer);
  cr_expect_eq(lr_rec.seq % 2, 0, "seq even when no write is under way");
}

Test(liverec, a_write_under_way_is_busy_and_a_non_record_is_refused)
{
  static tier_live_t r, out;
  memset(&r, 0, sizeof r);
  r.magic = TIER_LIVE_MAGIC;
  r.version = TIER_LIVE_VERSION;
  r.size = sizeof r;
  r.seq = 7;   /* odd: a writer is (or died) in the middle */
  cr_expect_eq(tm_liverec_read(&r, sizeof r, &out, 3), EAGAIN);
  r.seq = 8;
  cr_expect_eq(tm_liverec_read(&r, sizeof r, &out, 3), 0);
  cr_expect_eq(tm_liverec_read(&r, sizeof r - 1, &out, 3), EPROTO, "truncated");
  r.version = TIER_LIVE_VERSION + 1;
  cr_expect_eq(tm_liverec_read(&r, sizeof r, &out, 3), EPROTO, "another version");
  r.version = TIER_LIVE_VERSION;
  r.magic = 0;
  cr_expect_eq(tm_liverec_read(&r, sizeof r, &out, 3), EPROTO, "no magic: not a record, or one being made");
}

/* ---- resident measured from outside (tm_liverec_measure) ------------------
 * Against the captured numa_maps of a 6.12 guest (DRAM node0 + CXL node1):
 * the record's node masks say which tier each node is on, its ranges which
 * mappings count; the sums are tests/unit/test_resident.c's, by hand. */
#define LR_MAPS "tests/fixtures/dram-cxl-6.12/proc/numa_maps-example"

static void lr_two_tiers(tier_live_t *r, uint64_t base, uint64_t end)
{
  memset(r, 0, sizeof *r);
  r->stats.ntiers = 2;
  r->stats.tier[0].nodes[0] = 1u << 0;
  r->stats.tier[1].nodes[0] = 1u << 1;
  r->stats.tier[0].resident = 111;   /* the process's own figures, to be replaced */
  r->stats.tier[1].resident = 222;
  r->stats.resident_other = 333;
  r->range_base = base;
  r->range_end = end;
}

Test(liverec, measure_counts_each_node_on_its_tier_in_the_records_ranges)
{
  static tier_live_t r;
  lr_two_tiers(&r, 0, UINT64_MAX);
  cr_assert_eq(tm_liverec_measure(&r, LR_MAPS), 0);
  cr_expect_eq(r.stats.tier[0].resident, 24883200ull);   /* node0: 6075 pages */
  cr_expect_eq(r.stats.tier[1].resident, 13631488ull);   /* node1: 3328 pages */
  cr_expect_eq(r.stats.resident_other, 0);
  /* Only the mapping that starts in the range: 8 MiB bound to node1. */
  lr_two_tiers(&r, 0x7f0ce1a00000, 0x7f0ce1a00001);
  cr_assert_eq(tm_liverec_measure(&r, LR_MAPS), 0);
  cr_expect_eq(r.stats.tier[0].resident, 0);
  cr_expect_eq(r.stats.tier[1].resident, 8ull << 20);
}

Test(liverec, measure_counts_a_node_of_no_tier_as_other)
{
  static tier_live_t r;
  lr_two_tiers(&r, 0, UINT64_MAX);
  r.stats.ntiers = 1;   /* node1's tier is not in the record */
  cr_assert_eq(tm_liverec_measure(&r, LR_MAPS), 0);
  cr_expect_eq(r.stats.tier[0].resident, 24883200ull);
  cr_expect_eq(r.stats.tier[1].resident, 0);
  cr_expect_eq(r.stats.resident_other, 13631488ull);
}

Test(liverec, measure_that_cannot_read_leaves_the_records_figures)
{
  static tier_live_t r;
  lr_two_tiers(&r, 0, UINT64_MAX);
  cr_expect_eq(tm_liverec_measure(&r, "tests/fixtures/no-such-numa_maps"), ENOENT);
  cr_expect_eq(r.stats.tier[0].resident, 111);
  cr_expect_eq(r.stats.tier[1].resident, 222);
  cr_expect_eq(r.stats.resident_other, 333);
  lr_two_tiers(&r, 0, 0);   /* a record without ranges (start-up found none) */
  cr_expect_eq(tm_liverec_measure(&r, LR_MAPS), ERANGE);
  cr_expect_eq(r.stats.tier[0].resident, 111);
}
