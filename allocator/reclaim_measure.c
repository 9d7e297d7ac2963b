/*
 * reclaim_measure: what a pass sees: each chunk's tier, rank and resident
 * pages (mincore), the pages above their chunk's tier (numa_maps), and
 * whether there is swap.
 */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "budget.h"
#include "chunkmap.h"
#include "hotness.h"
#include "kfile.h"
#include "migrate.h"
#include "range.h"
#include "reclaim_state.h"
#include "resident.h"

/* ---- measuring ------------------------------------------------------------ */

static unsigned rc_bucket(unsigned age)
{
  unsigned b = 0;
  while (age > 0 && b + 1 < RC_BUCKETS) {
    age >>= 1;
    b++;
  }
  return b;
}

/* The order demotion and pageout take chunks in, the highest first: above
 * RC_HEAT_RANKS, the log2 of the age; below, the chunks the accessed bits
 * saw in the last interval, behind every chunk they did not see, the least
 * hot first (hottest: 0). By the age alone, such a chunk, stamped at a scan
 * a busy pass had put off, shared a bucket with unseen ones stamped a little
 * earlier, and went in address order with them (in CI, 6 of 10 hot chunks
 * demoted before 15 cold ones); and under a load that sees every chunk in
 * each interval, all went in address order. */
unsigned rc_rank(tm_chunk_t *c)
{
  if (!tm_hotness_hot(c)) return RC_HEAT_RANKS + rc_bucket(tm_hotness_age(c));
  return RC_HEAT_RANKS - 1 - tm_hotness_heat(c) * RC_HEAT_RANKS / (TM_HOTNESS_HEAT_MAX + 1);
}

/* Pages the kernel moved off their chunks' tier count where they are: from[t]
 * bytes of tier t's chunks (counted there by mincore), to[u] bytes on tier u. */
static void rc_count_where(rc_scan_t *s, const uint64_t *from, const uint64_t *to)
{
  for (unsigned t = 0; t < rc.ntiers; t++) {
    uint64_t off = from[t] < s->budgeted[t] ? from[t] : s->budgeted[t];
    s->resident[t] -= off < s->resident[t] ? off : s->resident[t];
    s->budgeted[t] = s->budgeted[t] - off + to[t];
    s->resident[t] += to[t];
  }
}

void rc_measure(rc_scan_t *s)
{
  memset(s, 0, sizeof *s);
  for (unsigned i = 0; i < tm_ranges.n; i++) {
    unsigned prev = i;
    for (uintptr_t w = tm_range_lo(i); w < tm_range_end(i); w += TM_MIGRATE_RUN * TM_CHUNK_SIZE) {
      /* A window of chunks, measured with one mincore if any has bytes. */
      tm_chunk_t *c0 = tm_chunk_of((void *)w);
      uintptr_t left = (tm_range_end(i) - w + TM_CHUNK_SIZE - 1) >> TM_CHUNK_SHIFT;
      unsigned n = left < TM_MIGRATE_RUN ? (unsigned)left : TM_MIGRATE_RUN;
      uint64_t res[TM_MIGRATE_RUN];
      bool any = false;
      for (unsigned k = 0; k < n && !any; k++) any = tm_chunk_bytes(c0 + k) != 0;
      if (any) tm_migrate_resident_run(c0, n, res);
      for (unsigned k = 0; k < n; k++) {
        tm_chunk_t *c = c0 + k;
        unsigned t = tm_chunk_tier(c);
        s->boundaries += t != prev;
        prev = t;
        if (tm_chunk_bytes(c) == 0) continue;
        /* Its pieces up (chunkmap.h) count on tier 0, as much as is there. */
        uint64_t up = tm_chunk_shifted(c) < res[k] ? tm_chunk_shifted(c) : res[k];
        s->resident[t] += res[k] - up;
        s->resident[0] += up;
        if (!(atomic_load_explicit(&c->flags, memory_order_relaxed) & TM_CHUNK_BASE)) {
          s->budgeted[t] += res[k] - up;
          s->budgeted[0] += up;
        }
        /* Pages back in a chunk reclaim paged out: the program used it since.
         * The one access the allocator sees; it makes the chunk young, so a
         * working set is not paged out again and again. */
        uint16_t f = atomic_load_explicit(&c->flags, memory_order_relaxed);
        if ((f & TM_CHUNK_PAGED) && res[k] > 0) {
          atomic_store_explicit(&c->flags, (uint16_t)(f & ~TM_CHUNK_PAGED), memory_order_relaxed);
          tm_hotness_touch(c);
        }
        /* A pinned chunk below tier 0: tier_pin's move lost a race with a
         * move of reclaim's (EBUSY). Up at this pass, with the strays. */
        if ((atomic_load_explicit(&c->flags, memory_order_relaxed) & TM_CHUNK_PIN) && t != 0 &&
            s->nstray < sizeof s->stray / sizeof s->stray[0])
          s->stray[s->nstray++] = c;
        if (!rc_movable(c)) continue;
        s->movable[t] += res[k] - up;
        s->movable[0] += up;
        s->hist[t][rc_rank(c)]++;
        if (rc_has_pieces_up(c)) s->hist[0][0]++;   /* rc_act: the hottest of tier 0 */
        if ((atomic_load_explicit(&c->flags, memory_order_relaxed) & TM_CHUNK_STRAY) &&
            s->nstray < sizeof s->stray / sizeof s->stray[0])
          s->stray[s->nstray++] = c;
        else if (rc_hand_candidate(c, t, res[k]) && s->nhand < sizeof s->hand / sizeof s->hand[0])
          s->hand[s->nhand++] = c;
      }
    }
  }
  /* Handed chunks' pages the kernel moved up count where they are, and
   * pages its reclaim moved down (demotion_enabled). */
  rc_count_where(s, rc.up_from, rc.up_to);
  rc_count_where(s, rc.down_from, rc.down_to);
}

/* ---- pages above their chunk's tier --------------------------------------- */

/* The kernel may put a chunk's pages on a faster tier than the chunk's:
 * MPOL_PREFERRED_MANY falls back to any node when its own cannot give a
 * page at once without reclaim, which is the rule for a huge page on a
 * fragmented node (in the 2tier VM, node1 fragmented: 45 MiB of tier 1's
 * chunks on node0, against tier 0's high of 32 MiB). Budgets count a chunk's
 * bytes on the chunk's tier, so such pages escaped the faster tier's limits.
 * While a tier above the lowest has a limit, at a pass after one that found
 * a chunk's worth more resident below tier 0 than at the last scan (pages
 * come when the program first touches what was placed), or a timed gap
 * after it, numa_maps names the mappings with pages above their chunks'
 * tier; their chunks are marked stray, and the same pass moves their pages
 * to their tier (rc_measure collects strays). A scan costs what the stats'
 * resident figure does (the kernel walks the page tables: 2-4 ms per 0.5
 * GiB resident, 15-20 ms per 256 MiB under TCG). The gap is RC_STRAY_SCAN_NS
 * and doubles at each timed scan that finds none, up to
 * RC_STRAY_SCAN_MAX_NS: pages that stray as they come are resident growth,
 * which calls for a scan at once; the timed scan is for pages the kernel
 * moves up by itself (its NUMA balancing's promotion), found within 4 s.
 * While chunks are handed to NUMA balancing (above) the read is at every
 * pass, and a handed chunk's pages above are counted, not marked. */

typedef struct {
  uintptr_t start;   /* the mapping read last; 0: none */
  int fastest;       /* the fastest tier holding its pages; -1: none */
  unsigned marked;   /* chunks marked stray */
  uint64_t bytes[TIER_MAX_TIERS];   /* the mapping's, by tier */
} rc_stray_scan_t;

/* A mapping of chunks (one policy, so all of one tier): its pages on slower
 * tiers, which the kernel's reclaim demoted (demotion_enabled), are counted
 * there (rc.down_*). If its chunks are handed, its pages on faster tiers are
 * counted there too (rc.up_*). True while the heap is handed: they stay,
 * and a tier over its limit gives them back page by page (handback.h);
 * false once it is not, and they go back as strays. */
static bool rc_stray_handed(const rc_stray_scan_t *k, uintptr_t end)
{
  for (uintptr_t a = k->start & ~(uintptr_t)(TM_CHUNK_SIZE - 1); a < end; a += TM_CHUNK_SIZE) {
    tm_chunk_t *c = tm_chunk_of((void *)a);
    if (c == NULL || tm_chunk_bytes(c) == 0) continue;
    unsigned t = tm_chunk_tier(c);
    for (unsigned u = t + 1; u < rc.ntiers; u++) {
      rc.down_to[u] += k->bytes[u];
      rc.down_from[t] += k->bytes[u];
    }
    if (!(atomic_load_explicit(&c->flags, memory_order_relaxed) & TM_CHUNK_HANDED)) return false;
    for (unsigned u = 0; u < t; u++) {
      rc.up_to[u] += k->bytes[u];
      rc.up_from[t] += k->bytes[u];
    }
    return rc.hand;
  }
  return false;
}

/* Marks the chunks of the mapping k->start..end below its fastest pages. */
static void rc_stray_mark(rc_stray_scan_t *k, uintptr_t end)
{
  if (k->start == 0 || k->fastest < 0) return;
  uintptr_t range_end = tm_range_end(tm_range_index((void *)k->start));
  if (end > range_end) end = range_end;
  if (rc_stray_handed(k, end)) return;
  for (uintptr_t a = k->start & ~(uintptr_t)(TM_CHUNK_SIZE - 1); a < end; a += TM_CHUNK_SIZE) {
    tm_chunk_t *c = tm_chunk_of((void *)a);
    /* Not one with pieces up: they are above it on purpose. */
    if (c != NULL && (int)tm_chunk_tier(c) > k->fastest && rc_movable(c) && !rc_has_pieces_up(c)) {
      atomic_fetch_or_explicit(&c->flags, TM_CHUNK_STRAY, memory_order_relaxed);
      k->marked++;
    }
  }
}

static void rc_stray_line(uintptr_t start, const uint64_t bytes[TIER_MAX_TIERS + 1], void *arg)
{
  rc_stray_scan_t *k = arg;
  rc_stray_mark(k, start);   /* a mapping ends where the next begins, or before */
  k->start = start;
  k->fastest = -1;
  for (unsigned t = 0; t < rc.ntiers; t++) {
    k->bytes[t] = bytes[t];
    if (bytes[t] && k->fastest < 0) k->fastest = (int)t;
  }
}

/* Bytes reclaim has moved from tier 0 to the tiers below, less those it
 * moved up: what of the growth below is its own (pages it found there). */
int64_t rc_own_below(void)
{
  return (int64_t)(atomic_load_explicit(&rc_demoted[0], memory_order_relaxed) -
                   atomic_load_explicit(&rc_promoted[0], memory_order_relaxed));
}

void rc_stray_scan(uint64_t now)
{
  if (rc.ntiers < 2 || tm_ranges.n == 0) return;
  /* Growth below that demotion made is no call for a scan: in the 2tier
   * VM a scan followed every pass of a drain (15-20 ms per 256 MiB). */
  int64_t below = (int64_t)rc.below, own = rc.below_own;
  int64_t grown = below - (int64_t)rc.stray_below - (own - rc.stray_own);
  bool timed = now - rc.stray_ns >= rc.stray_gap;
  /* Handed, at every pass: the pages the kernel promoted count where they
   * are, and reclaim gives them back; not while the kernel's own demotion
   * holds tier 0 (its memory.numa_stat says what tier 0 holds). */
  if (!timed && grown < (int64_t)TM_CHUNK_SIZE && !(rc.hand && !rc.kdemote)) return;
  bool limited = false;
  for (unsigned t = 0; t + 1 < rc.ntiers; t++)
    limited |= tm_budget_placement_limit(t) != TM_BUDGET_UNLIMITED;
  char path[TM_KFILE_PATH_MAX];
  if (!limited || tm_kfile_path(path, rc.root, "/proc/self/numa_maps", NULL, -1, NULL) != 0) return;
  rc.stray_ns = now;
  rc.stray_below = (uint64_t)below;
  rc.stray_own = own;
  memset(rc.up_from, 0, sizeof rc.up_from);
  memset(rc.up_to, 0, sizeof rc.up_to);
  memset(rc.down_from, 0, sizeof rc.down_from);
  memset(rc.down_to, 0, sizeof rc.down_to);
  rc_stray_scan_t k = { 0, -1, 0, { 0 } };
  uintptr_t hi = tm_ranges.base + ((uintptr_t)tm_ranges.n << tm_ranges.shift);
  if (tm_resident_each(path, rc.topo, tm_ranges.base, hi, rc_stray_line, &k) == 0)
    rc_stray_mark(&k, UINTPTR_MAX);
  if (k.marked) rc.stray_gap = RC_STRAY_SCAN_NS;
  else if (timed) rc.stray_gap = rc.stray_gap * 2 < RC_STRAY_SCAN_MAX_NS ? rc.stray_gap * 2 : RC_STRAY_SCAN_MAX_NS;
}

/* 1: swap is on (/proc/swaps lists a device or file, and the cgroup's
 * memory.swap.max is not 0); 0: no swap; 2: the cgroup may not swap. */
int rc_swap_detect(void)
{
  char buf[512], path[TM_KFILE_PATH_MAX];
  int n = tm_kfile_path(path, rc.root, "/proc/swaps", NULL, -1, NULL) == 0
              ? tm_kfile_read(path, buf, sizeof buf)
              : -ENAMETOOLONG;
  const char *nl = n > 0 ? memchr(buf, '\n', (size_t)n) : NULL;
  if (!(n == -EFBIG || (nl && nl[1] != '\0'))) return 0;
  uint64_t cg_swap = UINT64_MAX;
  return rc_cgroup_value("memory.swap.max", &cg_swap) && cg_swap == 0 ? 2 : 1;
}
