#include "reclaim.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "balancing.h"
#include "budget.h"
#include "chunkmap.h"
#include "clock.h"
#include "hotness.h"
#include "kfile.h"
#include "log.h"
#include "migrate.h"
#include "notify.h"
#include "options.h"
#include "policy.h"
#include "range.h"
#include "resident.h"
#include "site.h"
#include "text.h"
#include "watch.h"

enum { RC_ALWAYS, RC_PRESSURE, RC_OFF };   /* TIERMALLOC_RECLAIM, in the table's order */
#define RC_BUCKETS 16                       /* ages by powers of two: 0, 1, 2-3, 4-7 ... ticks */
#define RC_HEAT_RANKS 8                     /* chunks the accessed bits saw, by heat (rc_rank) */
#define RC_RANKS (RC_HEAT_RANKS + RC_BUCKETS)
#define RC_MS 1000000ull
/* The budgets are derived again at least every RC_REFRESH periods (a move
 * to another cgroup, the nodes' sizes, and the limits of ancestors above
 * RC_WATCH_LEVELS), or RC_REFRESH_POLLED while no write can wake the thread
 * (the ancestors' limits are then seen only so). */
#define RC_REFRESH 60u
#define RC_REFRESH_POLLED 10u
#define RC_WATCH_LEVELS 4u   /* the cgroup and its three nearest ancestors */

/* The cgroup files read at every wake, kept open and read with pread: under
 * TCG, opening a cgroup file costs about 0.5 ms, and two opens ten times a
 * second were 1 % of a core. pread never moves an offset nor consumes
 * anything, so even if the program closed one of these and reused its number
 * it would take nothing from the program; and one is closed only while it is
 * still the file opened (same device and inode). */
static const char *const rc_held_names[] = { "memory.high", "memory.max", "memory.current" };
#define RC_HELD (sizeof rc_held_names / sizeof rc_held_names[0])
static struct {
  int fd;   /* -1: not open */
  dev_t dev;
  ino_t ino;
} rc_held[RC_HELD] = { { -1, 0, 0 }, { -1, 0, 0 }, { -1, 0, 0 } };

/* How often numa_maps is read for pages above their chunks' tier, at the
 * most and at the least (rc_stray_scan). */
#define RC_STRAY_SCAN_NS 1000000000ull
#define RC_STRAY_SCAN_MAX_NS 4000000000ull

/* A chunk stays where reclaim last moved it, up or down, at least this long
 * before promotion or an exchange moves it again, or it is handed to the
 * kernel's NUMA balancing: nothing ping-pongs. */
#define RC_COOLDOWN_TICKS (10000u / TM_HOTNESS_TICK_MS)

static struct {
  const tm_topology_t *topo;
  char root[TM_KFILE_PATH_MAX / 2];           /* where /sys and /proc are read ("" normally) */
  unsigned ntiers;
  int mode;
  uint64_t period_min, period_max, period;    /* ns */
  uint64_t rate;                               /* bytes per second above high */
  uint64_t pageout_rate;                       /* bytes per second paged out */
  uint64_t promote_rate;                       /* bytes per second promoted (0: none) */
  uint64_t promote_allowance;
  bool pageout;
  uint64_t last_full_ns;                       /* when the last full pass began */
  uint64_t stray_ns;                           /* when numa_maps was last read for strays */
  uint64_t stray_gap;                          /* and how long after that it is read again */
  uint64_t stray_below;                        /* bytes resident below tier 0 then */
  int64_t stray_own;                           /* and the bytes reclaim had moved below net then */
  uint64_t below;                              /* bytes resident below tier 0 at the last pass */
  int64_t below_own;                           /* and rc_own_below() when it was measured */
  uint64_t allowance[TIER_MAX_TIERS];          /* bytes the rate still allows */
  uint64_t pageout_allowance;
  bool draining[TIER_MAX_TIERS];               /* above high, not yet under high - hysteresis */
  uint16_t drain_tick[TIER_MAX_TIERS];         /* the hotness clock when draining began */
  bool drain_read[TIER_MAX_TIERS];             /* the accessed bits were read since */
  bool want_bits;                              /* demotion waits for the accessed bits' next read */
  uint64_t vma_limit;                          /* policy boundaries reclaim may create */
  int swap;                                    /* 0 none, 1 on (rc_pageout_blocked) */
  uint64_t refreshed_ns;                       /* when the budgets were last derived */
  uint64_t lowest_resident;                    /* the lowest tier's pages, as last measured */
  uint64_t lowest_used;                        /* and its used then */
  uint64_t cg_seen[2];                         /* the cgroup's memory.high, .max then */
  bool cg_watch;                               /* they can be read: checked each wake */
  bool notified;                               /* and a write to them wakes the thread (watch.h) */
  uint64_t cpu_seen;                           /* the thread's CPU clock at the last account */
  bool swap_said, max_said;
  tm_budgets_t budgets;                        /* this pass's, with the cgroup's paths */
  bool move_failed_said;
  unsigned piece_idle;                         /* reads in a row whose pieces moved nothing */
  unsigned piece_skip;                         /* reads to let pass before pieces are read again */
  bool piece_no_room;                          /* pieces seen found no room nor chunk to replace */
  /* Handing chunks to the kernel's NUMA balancing (TIERMALLOC_NUMA_BALANCING,
   * rc_hand_update). */
  bool hand;                                   /* on now: the kernel is in its tiering mode */
  bool hand_refused;                           /* the kernel refused the policy: not tried again */
  bool hand_over;                              /* tier 0 stayed over its limit with none of its own to move */
  uint64_t hand_read_ns;                       /* when the mode was last read */
  uint64_t up_from[TIER_MAX_TIERS];            /* bytes of handed tier-t chunks on faster tiers, last read */
  uint64_t up_to[TIER_MAX_TIERS];              /* the same bytes, by the tier they are on */
  tm_nodemask_t hand_nodes[TIER_MAX_TIERS];    /* tier t's nodes and every faster tier's */
} rc;

/* Written by the reclaim thread only, read by stats. */
static _Atomic uint64_t rc_demoted[TIER_MAX_TIERS], rc_promoted[TIER_MAX_TIERS],
    rc_paged[TIER_MAX_TIERS], rc_failed[TIER_MAX_TIERS], rc_passes, rc_cpu_ns;
static _Atomic int rc_state;
static _Atomic bool rc_unheld;   /* the lowest tier is above its max, and nothing can be paged out */
static _Atomic bool rc_handing;  /* rc.hand, for the stats */

/* What one sweep of the chunk map found. */
typedef struct rc_scan_s {
  uint64_t resident[TIER_MAX_TIERS];            /* bytes, mincore */
  uint64_t budgeted[TIER_MAX_TIERS];            /* of which in the budgets (not start-up metadata) */
  uint64_t movable[TIER_MAX_TIERS];             /* of which in chunks reclaim may move */
  uint32_t hist[TIER_MAX_TIERS][RC_RANKS];      /* movable chunks by rank (rc_rank) */
  uint64_t boundaries;                          /* adjacent chunks bound to different tiers */
  tm_chunk_t *stray[64];
  unsigned nstray;
  tm_chunk_t *hand[64];                         /* chunks to hand to NUMA balancing at this pass */
  unsigned nhand;
} rc_scan_t;

static bool rc_cgroup_value(const char *file, uint64_t *v);
static int rc_swap_detect(void);

static void rc_reset(void)
{
  for (unsigned t = 0; t < TIER_MAX_TIERS; t++) {
    atomic_store_explicit(&rc_demoted[t], 0, memory_order_relaxed);
    atomic_store_explicit(&rc_promoted[t], 0, memory_order_relaxed);
    atomic_store_explicit(&rc_paged[t], 0, memory_order_relaxed);
    atomic_store_explicit(&rc_failed[t], 0, memory_order_relaxed);
    rc.allowance[t] = 0;
    rc.draining[t] = false;
  }
  rc.want_bits = false;
  rc.piece_idle = rc.piece_skip = 0;
  rc.piece_no_room = false;
  rc.pageout_allowance = 0;
  rc.promote_allowance = 0;
  rc.stray_ns = 0;
  rc.stray_gap = RC_STRAY_SCAN_NS;
  rc.stray_below = 0;
  rc.stray_own = rc.below_own = 0;
  rc.below = 0;
  rc.hand = rc.hand_over = false;
  rc.hand_read_ns = 0;
  memset(rc.up_from, 0, sizeof rc.up_from);
  memset(rc.up_to, 0, sizeof rc.up_to);
  atomic_store_explicit(&rc_handing, false, memory_order_relaxed);
  atomic_store_explicit(&rc_unheld, false, memory_order_relaxed);
  atomic_store_explicit(&rc_passes, 0, memory_order_relaxed);
  atomic_store_explicit(&rc_cpu_ns, 0, memory_order_relaxed);
}

static void rc_add(_Atomic uint64_t *v, uint64_t n)
{
  atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + n,
                        memory_order_relaxed);
}

/* The hysteresis of a limit: RECLAIM_HYSTERESIS of it, at least one chunk. */
static uint64_t rc_hysteresis(uint64_t limit)
{
  uint64_t h = tm_option_size(TM_OPTION_RECLAIM_HYSTERESIS, limit);
  return h < TM_CHUNK_SIZE ? TM_CHUNK_SIZE : h;
}

/* Adds to *allowance what `rate` allows over elapsed_ns, up to one
 * idle period's worth (and at least a chunk, or a slow rate never moves). */
static void rc_accrue(uint64_t *allowance, uint64_t rate, uint64_t elapsed_ns)
{
  uint64_t burst = (uint64_t)((unsigned __int128)rate * rc.period_max / 1000000000u);
  if (burst < TM_CHUNK_SIZE) burst = TM_CHUNK_SIZE;
  *allowance += (uint64_t)((unsigned __int128)rate * elapsed_ns / 1000000000u);
  if (*allowance > burst) *allowance = burst;
}

void tm_reclaim_init(const tm_topology_t *topo, const char *root)
{
  memset(&rc, 0, sizeof rc);
  rc_reset();
  rc.topo = topo;
  strncpy(rc.root, root, sizeof rc.root - 1);
  rc.ntiers = (unsigned)topo->ntiers;
  rc.mode = (int)tm_option(TM_OPTION_RECLAIM)->num;
  uint64_t lo = tm_option(TM_OPTION_RECLAIM_PERIOD_MIN_MS)->num;
  uint64_t hi = tm_option(TM_OPTION_RECLAIM_PERIOD_MAX_MS)->num;
  if (lo < 10) lo = 10;
  if (lo > 60000) lo = 60000;
  if (hi < lo) hi = lo;
  if (hi > 60000) hi = 60000;
  rc.period_min = lo * RC_MS;
  rc.period_max = hi * RC_MS;
  rc.period = rc.period_min;
  rc.rate = tm_option(TM_OPTION_RECLAIM_RATE)->num;
  rc.pageout = tm_option(TM_OPTION_RECLAIM_PAGEOUT)->num != 0;
  rc.pageout_rate = tm_option(TM_OPTION_RECLAIM_PAGEOUT_RATE)->num;
  rc.promote_rate = tm_option(TM_OPTION_RECLAIM_PROMOTE_RATE)->num;
  for (unsigned t = 0; t < rc.ntiers; t++)
    for (unsigned u = 0; u <= t; u++) tm_nodemask_or(&rc.hand_nodes[t], &topo->tier[u].nodes);
  char buf[64], path[TM_KFILE_PATH_MAX];
  uint64_t maps = 65530;   /* the kernel's default */
  int n = tm_kfile_path(path, rc.root, "/proc/sys/vm/max_map_count", NULL, -1, NULL) == 0
              ? tm_kfile_read(path, buf, sizeof buf)
              : -1;
  uint64_t v;
  if (n > 1 && buf[n - 1] == '\n' && tm_text_parse_u64(buf, buf + n - 1, &v) == 0 && v > 0)
    maps = v;
  rc.vma_limit = maps / 2;
  tm_hotness_init(root, maps / 4);   /* chunks of a VMA of their own: another quarter */
  tm_site_init(rc.ntiers);
  tm_migrate_init(topo);
  tm_budget_snapshot(&rc.budgets);
  rc.swap = rc_swap_detect() == 1;
  tm_hotness_track(tm_reclaim_needed());
}

static bool rc_limited(unsigned t)
{
  return tm_budget_get(t, TM_LIMIT_HIGH) != TM_BUDGET_UNLIMITED ||
         tm_budget_get(t, TM_LIMIT_MAX) != TM_BUDGET_UNLIMITED;
}

bool tm_reclaim_needed(void)
{
  if (rc.mode == RC_OFF || tm_chunks == NULL || rc.ntiers == 0) return false;
  for (unsigned t = 0; t + 1 < rc.ntiers; t++)
    if (rc_limited(t)) return true;
  /* The lowest tier's max, even with pageout off: the thread then says that
   * it cannot be held, where the stats show it. */
  return (rc.pageout && rc_limited(rc.ntiers - 1)) ||
         tm_budget_get(rc.ntiers - 1, TM_LIMIT_MAX) != TM_BUDGET_UNLIMITED;
}

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
static unsigned rc_rank(tm_chunk_t *c)
{
  if (!tm_hotness_hot(c)) return RC_HEAT_RANKS + rc_bucket(tm_hotness_age(c));
  return RC_HEAT_RANKS - 1 - tm_hotness_heat(c) * RC_HEAT_RANKS / (TM_HOTNESS_HEAT_MAX + 1);
}

/* c is a chunk below tier 0 with pieces up on tier 0 (chunkmap.h: only a
 * chunk below has a record). */
static bool rc_has_pieces_up(tm_chunk_t *c)
{
  return tm_chunk_tier(c) != 0 && tm_chunk_pieces_up(c);
}

static bool rc_movable(tm_chunk_t *c)
{
  return tm_chunk_bytes(c) != 0 &&
         !(atomic_load_explicit(&c->flags, memory_order_relaxed) & (TM_CHUNK_KEEP | TM_CHUNK_PIN));
}

/* ---- handing chunks to the kernel's NUMA balancing --------------------------
 * In its tiering mode (kernel.numa_balancing 2 or 3) the kernel samples each
 * page's accesses with hint faults and promotes the hot pages of CPU-less
 * nodes to the CPU's node: per page, reads included, where the accessed bits
 * see one bit per page per window (on a heap whose hot objects are scattered
 * tiermalloc's own ranking did no better than chance; the kernel's reached
 * 0.8-0.96 of the best placement). It scans only ranges whose policy carries
 * MPOL_F_NUMA_BALANCING and promotes only to a node in the policy's mask, so
 * a chunk below tier 0 is handed to it: bound anew, no page moved, on its
 * tier's nodes and every faster tier's. That mask would also put the chunk's
 * new pages on the faster nodes, so a chunk is handed only once it is
 * committed whole and three quarters of it are there (placement has done its
 * work; what faults later counts where it lands: handed as soon as they were
 * committed, the 2tier VM's chunks of 4 KiB objects took all their pages on
 * node0, 47 MiB against a high of 24), and never within RC_COOLDOWN_TICKS of
 * a move (the budgets moved it). Pages the kernel moved up are counted on the
 * tier they are on (numa_maps, read at every pass: rc_stray_scan), in the
 * budgets as in the figures, and are not moved back as strays: tier 0 over
 * its limit gives up its own coldest chunks first; only when none is left do
 * the handed chunks' pages above go down (rc.hand_over). tiermalloc's own
 * promotion stops meanwhile: the kernel chooses. In the 2tier VM (6.12)
 * the kernel's scanner comes to the handed heap in its first two sequences
 * and then only about every 90 s (a VMA the scanning thread took no hint
 * fault in is scanned one a call, when no other is left): 1792 of 2048 hot
 * pages on tier 0 within 6 s, 2047 after about 100 s (bench/README,
 * "Handing the heap to NUMA balancing"). */

static bool rc_hand_candidate(tm_chunk_t *c, unsigned t, uint64_t res)
{
  if (!rc.hand || t == 0) return false;
  uint16_t f = atomic_load_explicit(&c->flags, memory_order_relaxed);
  uint64_t committed = tm_chunk_bytes(c);
  return !(f & (TM_CHUNK_HANDED | TM_CHUNK_KEEP | TM_CHUNK_PIN | TM_CHUNK_BASE)) && committed == TM_CHUNK_SIZE &&
         res * 4 >= committed * 3 && !tm_chunk_pieces_up(c) && tm_hotness_since_moved(c) >= RC_COOLDOWN_TICKS;
}

static void rc_measure(rc_scan_t *s)
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
  /* Handed chunks' pages the kernel moved up count where they are. */
  for (unsigned t = 1; t < rc.ntiers; t++) {
    uint64_t up = rc.up_from[t] < s->budgeted[t] ? rc.up_from[t] : s->budgeted[t];
    s->resident[t] -= up < s->resident[t] ? up : s->resident[t];
    s->budgeted[t] -= up;
  }
  for (unsigned u = 0; u + 1 < rc.ntiers; u++) {
    s->resident[u] += rc.up_to[u];
    s->budgeted[u] += rc.up_to[u];
  }
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

/* A mapping of handed chunks (one policy, so all of one tier, all handed):
 * its pages on faster tiers are counted there (rc.up_*). True when they
 * stay: tier 0 is not over its limit with nothing of its own to give. */
static bool rc_stray_handed(const rc_stray_scan_t *k, uintptr_t end)
{
  for (uintptr_t a = k->start & ~(uintptr_t)(TM_CHUNK_SIZE - 1); a < end; a += TM_CHUNK_SIZE) {
    tm_chunk_t *c = tm_chunk_of((void *)a);
    if (c == NULL || tm_chunk_bytes(c) == 0) continue;
    if (!(atomic_load_explicit(&c->flags, memory_order_relaxed) & TM_CHUNK_HANDED)) return false;
    unsigned t = tm_chunk_tier(c);
    for (unsigned u = 0; u < t; u++) {
      rc.up_to[u] += k->bytes[u];
      rc.up_from[t] += k->bytes[u];
    }
    return rc.hand && !rc.hand_over;
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
static int64_t rc_own_below(void)
{
  return (int64_t)(atomic_load_explicit(&rc_demoted[0], memory_order_relaxed) -
                   atomic_load_explicit(&rc_promoted[0], memory_order_relaxed));
}

static void rc_stray_scan(uint64_t now)
{
  if (rc.ntiers < 2 || tm_ranges.n == 0) return;
  /* Growth below that demotion made is no call for a scan: in the 2tier
   * VM a scan followed every pass of a drain (15-20 ms per 256 MiB). */
  int64_t below = (int64_t)rc.below, own = rc.below_own;
  int64_t grown = below - (int64_t)rc.stray_below - (own - rc.stray_own);
  bool timed = now - rc.stray_ns >= rc.stray_gap;
  if (!timed && grown < (int64_t)TM_CHUNK_SIZE && !rc.hand) return;
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
  rc_stray_scan_t k = { 0, -1, 0, { 0 } };
  uintptr_t hi = tm_ranges.base + ((uintptr_t)tm_ranges.n << tm_ranges.shift);
  if (tm_resident_each(path, rc.topo, tm_ranges.base, hi, rc_stray_line, &k) == 0)
    rc_stray_mark(&k, UINTPTR_MAX);
  if (k.marked) rc.stray_gap = RC_STRAY_SCAN_NS;
  else if (timed) rc.stray_gap = rc.stray_gap * 2 < RC_STRAY_SCAN_MAX_NS ? rc.stray_gap * 2 : RC_STRAY_SCAN_MAX_NS;
}

/* The nodes of tier t have less free memory than RECLAIM_PRESSURE_FREE. */
static bool rc_short(unsigned t)
{
  const tm_tier_t *tier = &rc.topo->tier[t];
  uint64_t free_bytes = 0;
  for (int n = 0; n < TIER_MAX_NODES; n++) {
    if (!tm_nodemask_test(&tier->nodes, n)) continue;
    char path[TM_KFILE_PATH_MAX];
    uint64_t v = 0;
    if (tm_kfile_path(path, rc.root, "/sys/devices/system/node", "node", n, "meminfo") != 0 ||
        tm_kfile_read_meminfo(path, "MemFree", &v) != 0)
      return false;   /* cannot tell: no pressure claimed */
    free_bytes += v;
  }
  return free_bytes < tm_option_size(TM_OPTION_RECLAIM_PRESSURE_FREE, tier->capacity);
}

/* 1: swap is on (/proc/swaps lists a device or file, and the cgroup's
 * memory.swap.max is not 0); 0: no swap; 2: the cgroup may not swap. */
static int rc_swap_detect(void)
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

/* Why nothing can be paged out now, or NULL when pageout can act (swap is
 * checked again each time pageout is wanted: it may be turned on or off
 * while the program runs). */
static const char *rc_pageout_blocked(void)
{
  if (!rc.pageout) return "TIERMALLOC_RECLAIM_PAGEOUT is off";
  int st = rc_swap_detect();
  rc.swap = st == 1;
  return st == 1 ? NULL : st == 0 ? "no swap is on" : "the cgroup's memory.swap.max is 0";
}

/* ---- the cgroup, shared with other processes -------------------------------- */

/* The budget of tier t came from the cgroup, which other processes share. */
static bool rc_shared(unsigned t)
{
  const tm_budgets_t *b = &rc.budgets;
  if (b->cgroup.version != TM_CGROUP_V2 || !b->cgroup.dir[0]) return false;
  for (unsigned l = TM_LIMIT_HIGH; l <= TM_LIMIT_MAX; l++) {
    tier_budget_source_t src = b->tier[t][l].source;
    if (src == TIER_BUDGET_CGROUP_V2 || src == TIER_BUDGET_KERNEL || src == TIER_BUDGET_RATIO)
      return true;
  }
  return false;
}

/* path[TM_KFILE_PATH_MAX] = the process's cgroup directory (its first dirlen
 * bytes: an ancestor's) + "/" + file; false when there is no directory or
 * the path is too long. */
static bool rc_cgroup_path_in(size_t dirlen, const char *file, char *path)
{
  int n = (int)dirlen;
  if (dirlen == 0 || dirlen >= TM_KFILE_PATH_MAX) return false;
  memcpy(path, rc.budgets.cgroup.dir, dirlen);
  path[dirlen] = '\0';
  return !tm_text_append(path, TM_KFILE_PATH_MAX, &n, "/") &&
         !tm_text_append(path, TM_KFILE_PATH_MAX, &n, file);
}

static bool rc_cgroup_path(const char *file, char *path)
{
  return rc_cgroup_path_in(strlen(rc.budgets.cgroup.dir), file, path);
}

/* Another process is in the cgroup too (cgroup.procs lists more than one):
 * only then is the cgroup's memory on a tier not all this process's, heap
 * or not (its stacks, its binary's data and what it maps itself count there
 * too, and a process alone would demote its heap to make room for them). */
static bool rc_cgroup_has_others(void)
{
  char path[TM_KFILE_PATH_MAX], buf[256];
  if (!rc_cgroup_path("cgroup.procs", path)) return false;
  int len = tm_kfile_read(path, buf, sizeof buf);
  if (len == -EFBIG) return true;   /* a long list */
  if (len <= 0) return false;
  const char *nl = memchr(buf, '\n', (size_t)len);
  return nl && nl + 1 < buf + len;
}

/* Anonymous bytes of the whole cgroup on each tier, from the "anon N0=.. N1=.."
 * line of its memory.numa_stat. false when it cannot be read. */
static bool rc_cgroup_anon(uint64_t *anon)
{
  char path[TM_KFILE_PATH_MAX];
  if (!rc_cgroup_path("memory.numa_stat", path)) return false;
  tm_kfile_lines_t r;
  if (tm_kfile_lines_open(&r, path) != 0) return false;
  char line[1024];
  int cut, len;
  bool found = false;
  memset(anon, 0, sizeof(uint64_t) * TIER_MAX_TIERS);
  while (!found && (len = tm_kfile_next_line(&r, line, sizeof line, &cut)) >= 0) {
    if (strncmp(line, "anon ", 5) != 0) continue;
    found = true;
    for (char *p = line + 5; *p;) {
      while (*p == ' ') p++;
      char *e = p;
      while (*e && *e != ' ') e++;
      char *eq = memchr(p, '=', (size_t)(e - p));
      uint64_t node, bytes;
      if (p[0] == 'N' && eq && tm_text_parse_u64(p + 1, eq, &node) == 0 &&
          tm_text_parse_u64(eq + 1, e, &bytes) == 0 && node < TIER_MAX_NODES &&
          rc.topo->node_tier[node] >= 0)
        anon[rc.topo->node_tier[node]] += bytes;
      p = e;
    }
  }
  close(r.fd);
  return found;
}

/* Bytes this process should demote from tier t for its cgroup: when other
 * processes of the cgroup hold memory on the tier too and together they are
 * above its high (or max), each demotes its share of the excess, in
 * proportion to what it holds there, so together they get back under it
 * without any of them giving up more than its share. */
static uint64_t rc_shared_excess(unsigned t, const uint64_t *anon, const rc_scan_t *s)
{
  uint64_t mine = s->resident[t], all = anon[t];
  uint64_t high = tm_budget_get(t, TM_LIMIT_HIGH), max = tm_budget_get(t, TM_LIMIT_MAX);
  uint64_t limit = high < max ? high : max;
  if (limit == TM_BUDGET_UNLIMITED || mine == 0 || all <= limit) return 0;
  uint64_t others = all > mine ? all - mine : 0;
  if (others < TM_CHUNK_SIZE * 4) return 0;   /* alone: its own watermarks apply */
  return (uint64_t)((unsigned __int128)(all - limit) * mine / all);
}

static void rc_held_close(void)
{
  for (unsigned k = 0; k < RC_HELD; k++) {
    struct stat st;
    if (rc_held[k].fd >= 0 && fstat(rc_held[k].fd, &st) == 0 && st.st_dev == rc_held[k].dev &&
        st.st_ino == rc_held[k].ino)
      close(rc_held[k].fd);
    rc_held[k].fd = -1;
  }
}

/* Opens the held files of the process's cgroup (v2), after each derive: the
 * cgroup may have changed. */
static void rc_held_open(void)
{
  rc_held_close();
  if (rc.budgets.cgroup.version != TM_CGROUP_V2) return;
  for (unsigned k = 0; k < RC_HELD; k++) {
    char path[TM_KFILE_PATH_MAX];
    struct stat st;
    int fd = rc_cgroup_path(rc_held_names[k], path) ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    if (fd >= 0 && fstat(fd, &st) != 0) {
      close(fd);
      fd = -1;
    }
    rc_held[k].fd = fd;
    rc_held[k].dev = fd >= 0 ? st.st_dev : 0;
    rc_held[k].ino = fd >= 0 ? st.st_ino : 0;
  }
}

/* A cgroup v2 value file of the process's cgroup: digits, or "max". */
static bool rc_cgroup_value(const char *file, uint64_t *v)
{
  char path[TM_KFILE_PATH_MAX], buf[32];
  for (unsigned k = 0; k < RC_HELD; k++) {
    if (strcmp(file, rc_held_names[k]) != 0 || rc_held[k].fd < 0) continue;
    /* false: gone (the cgroup was removed) or not ours any more; derive again */
    ssize_t n = pread(rc_held[k].fd, buf, sizeof buf, 0);
    return n > 0 && (size_t)n < sizeof buf && tm_cgroup_parse_value(buf, (int)n, false, v) == NULL;
  }
  if (!rc_cgroup_path(file, path)) return false;
  int len = tm_kfile_read(path, buf, sizeof buf);
  return len > 0 && tm_cgroup_parse_value(buf, len, false, v) == NULL;
}

/* Bytes this process should page out because its cgroup as a whole is near
 * its memory.high or memory.max (within the hysteresis): the excess, in
 * proportion to this process's share of the cgroup's memory. 0 otherwise. */
/* The cgroup (v2) is within the hysteresis of its memory.high or memory.max
 * (the nearer, ancestors applied): its memory.current into *cur and by how
 * much it is over limit - hysteresis into *over. One small read. */
static bool rc_cgroup_near(uint64_t *cur, uint64_t *over)
{
  const tm_cgroup_limits_t *cg = &rc.budgets.cgroup;
  uint64_t limit = cg->limit[TM_LIMIT_HIGH] < cg->limit[TM_LIMIT_MAX] ? cg->limit[TM_LIMIT_HIGH]
                                                                        : cg->limit[TM_LIMIT_MAX];
  if (cg->version != TM_CGROUP_V2 || limit == TM_CGROUP_UNLIMITED ||
      !rc_cgroup_value("memory.current", cur))
    return false;
  uint64_t margin = rc_hysteresis(limit);
  if (*cur + margin <= limit || *cur == 0) return false;
  *over = *cur + margin - limit;
  return true;
}

static uint64_t rc_cgroup_pageout(const rc_scan_t *s)
{
  uint64_t cur, over;
  if (!rc_cgroup_near(&cur, &over)) return 0;
  uint64_t mine = 0;
  for (unsigned t = 0; t < rc.ntiers; t++) mine += s->resident[t];
  if (mine > cur) mine = cur;
  return (uint64_t)((unsigned __int128)over * mine / cur);
}

/* ---- acting --------------------------------------------------------------- */

/* Counts a move of c from tier `from` to `to` that migrate.c reported in *n
 * (down: demoted and failed on `from`; up: promoted on `to`) and stamps it
 * moved, for promotion's cool-down. */
static void rc_moved(tm_chunk_t *c, unsigned from, unsigned to, const tm_migrate_counts_t *n)
{
  if (to > from) {
    rc_add(&rc_demoted[from], n->moved);
    rc_add(&rc_failed[from], n->failed);
  } else {
    rc_add(&rc_promoted[to], n->moved);
  }
  tm_hotness_moved(c);
  tm_notify_progress();
}

/* c is next to a chunk bound to tier `to` (moving it adds no VMA). */
static bool rc_next_to(tm_chunk_t *c, unsigned to)
{
  uintptr_t a = tm_chunk_addr(c);
  unsigned i = tm_range_index((void *)a);
  if (a > tm_range_lo(i) && tm_chunk_tier(c - 1) == to) return true;
  return a + TM_CHUNK_SIZE < tm_range_end(i) && tm_chunk_tier(c + 1) == to;
}

/* What protection lets leave a tier, in both of the figures a tier's hold
 * is measured in: resident pages of its movable chunks, and committed bytes
 * (used). UINT64_MAX: no bound. */
typedef struct rc_room_s {
  uint64_t pages, bytes;
} rc_room_t;

static const rc_room_t rc_no_bound = { UINT64_MAX, UINT64_MAX };

/* Takes a chunk of `res` resident and `bytes` committed bytes out of *room;
 * false, leaving it as it was, when either does not fit. */
static bool rc_room_take(rc_room_t *room, uint64_t res, uint64_t bytes)
{
  if ((room->pages != UINT64_MAX && res > room->pages) ||
      (room->bytes != UINT64_MAX && bytes > room->bytes))
    return false;
  if (room->pages != UINT64_MAX) room->pages -= res;
  if (room->bytes != UINT64_MAX) room->bytes -= bytes;
  return true;
}

/* Demotes the coldest movable chunks of tier t to t+1, or pages out the
 * coldest of t (pageout), until `want` bytes are done (as used or as pages,
 * whichever a chunk frees more of, for demotion; pages for pageout), within
 * `room` (protection: a chunk that does not fit is passed over), and taking
 * chunks the accessed bits saw in the last interval (ranks below
 * RC_HEAT_RANKS) only while fewer than `seen_until` bytes are done. Returns
 * the bytes done. */
static uint64_t rc_act(rc_scan_t *s, unsigned t, uint64_t want, rc_room_t room, bool pageout,
                       uint64_t seen_until)
{
  uint64_t done = 0;
  bool tight = s->boundaries >= rc.vma_limit;
  for (unsigned b = RC_RANKS; b-- > 0 && done < want;) {
    if (s->hist[t][b] == 0) continue;
    uint64_t upto = b < RC_HEAT_RANKS && seen_until < want ? seen_until : want;
    for (unsigned i = 0; i < tm_ranges.n && done < upto; i++) {
      for (uintptr_t a = tm_range_lo(i); a < tm_range_end(i) && done < upto; a += TM_CHUNK_SIZE) {
        tm_chunk_t *c = tm_chunk_of((void *)a);
        /* A chunk below with pieces on tier 0: they go back down to it,
         * known hot, so last (rank 0), and never paged out from here. */
        bool pieces = t == 0 && !pageout && rc_has_pieces_up(c);
        if ((!pieces && tm_chunk_tier(c) != t) || !rc_movable(c) || (pieces ? 0 : rc_rank(c)) != b)
          continue;
        tm_migrate_counts_t n = {0};
        uint64_t up = pieces ? tm_chunk_shifted(c) : 0;
        if (room.pages != UINT64_MAX || room.bytes != UINT64_MAX) {
          if (!rc_room_take(&room, room.pages == UINT64_MAX ? 0 : pieces ? up : tm_migrate_resident(c),
                            pieces ? up : tm_chunk_bytes(c)))
            continue;
        }
        if (pieces) {
          if (tm_migrate_chunk(c, tm_chunk_tier(c), &n) != 0) continue;
          rc_add(&rc_demoted[0], n.moved);
          rc_add(&rc_failed[0], n.failed);
          tm_hotness_moved(c);
          s->hist[0][0]--;
          done += n.moved > up ? n.moved : up;
          continue;
        }
        if (pageout) {
          if (tm_migrate_pageout(c, &n) != 0) continue;
          atomic_fetch_or_explicit(&c->flags, TM_CHUNK_PAGED, memory_order_relaxed);
          rc_add(&rc_paged[t], n.moved);
          tm_notify_progress();
          /* What it asked for counts as done: pages written to swap can stay
           * in the swap cache, resident to mincore, and counting only those
           * mincore no longer sees sent every chunk of the heap to pageout at
           * each pass (the demo used 7.4 s of CPU in 8 s). */
          done += n.asked;
          continue;
        }
        if (tight && !rc_next_to(c, t + 1)) continue;
        uint64_t bytes = tm_chunk_bytes(c);
        int err = tm_migrate_chunk(c, t + 1, &n);
        if (err == EBUSY) continue;
        if (err != 0) {
          if (!rc.move_failed_said)
            tm_warn("cannot move pages to tier %u (mbind: %s); retrying each pass", t + 1,
                    tm_kfile_errstr(err));
          rc.move_failed_said = true;
          rc_add(&rc_failed[t], tm_chunk_bytes(c));
          return done;
        }
        rc_moved(c, t, t + 1, &n);
        s->hist[t][b]--;
        s->hist[t + 1][rc_rank(c)]++;
        s->boundaries += 2;   /* at most; the next pass counts them again */
        /* What it took off the tier, counted as the budget counts it or as
         * the pages it moved, whichever is more. */
        done += n.moved > bytes ? n.moved : bytes;
      }
    }
  }
  return done;
}

/* Bytes to demote from tier t now. used: its committed bytes (placement's
 * figure, live), what high is held in; held: the larger of used and its
 * pages as measured, what max is held in (huge pages over chunks'
 * uncommitted parts can put the pages above used: the hard limit takes that
 * back, the soft one does not drain a hysteresis for it). resident: its
 * pages in chunks reclaim may move, the figure protection is measured in.
 * extra: bytes of pages this process answers for of the cgroup's excess. */
static uint64_t rc_demote_want(unsigned t, uint64_t elapsed_ns, uint64_t extra, uint64_t used,
                               uint64_t held, uint64_t resident, rc_room_t *room, bool *over,
                               uint64_t *hard)
{
  *room = rc_no_bound;
  *hard = 0;
  uint64_t min = tm_budget_get(t, TM_LIMIT_MIN), low = tm_budget_get(t, TM_LIMIT_LOW);
  uint64_t high = tm_budget_get(t, TM_LIMIT_HIGH), max = tm_budget_get(t, TM_LIMIT_MAX);
  uint64_t hyst = rc_hysteresis(high == TM_BUDGET_UNLIMITED ? 0 : high);
  rc_accrue(&rc.allowance[t], rc.rate, elapsed_ns);   /* within the limits too */
  if (high != TM_BUDGET_UNLIMITED && used > high && !rc.draining[t]) {
    rc.draining[t] = true;
    rc.drain_tick[t] = atomic_load_explicit(&tm_hotness_now, memory_order_relaxed);
    rc.drain_read[t] = false;
  }
  bool shrt = false, shrt_known = false;
  uint64_t want = 0;
  const uint64_t mask = TM_CHUNK_SIZE - 1;
  if (max != TM_BUDGET_UNLIMITED && held > max) want = *hard = held - max;   /* at once */
  if (rc.draining[t] && high != TM_BUDGET_UNLIMITED) {
    if (rc.mode == RC_PRESSURE) {
      shrt = rc_short(t);
      shrt_known = true;
    }
    if (rc.mode == RC_ALWAYS || shrt) {
      uint64_t target = high > hyst ? high - hyst : 0;
      uint64_t more = used > target ? used - target : 0;
      /* As far as the rate allows, in whole chunks. */
      if (more > want) {
        uint64_t step = more - want, cap = rc.allowance[t] & ~mask;
        want += step < cap ? step : cap;
      }
    }
    if (used <= (high > hyst ? high - hyst : 0)) rc.draining[t] = false;
  }
  if (extra > want) {
    uint64_t step = extra - want, cap = rc.allowance[t] & ~mask;
    want += step < cap ? step : cap;
  }
  if (want == 0) return 0;
  /* Protection: never below min; below low only when the nodes are short. */
  uint64_t floor = min;
  if (low > floor && resident - (want < resident ? want : resident) < low) {
    if (!shrt_known) shrt = rc_short(t);
    if (!shrt) floor = low;
  }
  if (floor > 0) {
    /* Neither its pages nor its used go below the floor: a chunk's pages can
     * be more than its committed bytes (a huge page) or fewer (untouched). */
    uint64_t committed = tm_policy_used(t);
    if (resident <= floor || committed <= floor) return 0;
    room->pages = resident - floor;
    room->bytes = committed - floor;
  }
  if (want == 0) return 0;
  *over = true;
  return want;
}

/* After a pass that demoted from tier t: more of it can go now, and the
 * next pass follows at once instead of a period later. It is still above
 * max (hard_left), or still draining above high less the hysteresis with
 * the rate's allowance for another chunk by the next pass, which accrues
 * what the pass took (the rate holds: the allowance only grows with time).
 * A burst was drained over several passes with RECLAIM_PERIOD_MIN_MS
 * between them: a pass stops short of the last chunk or two (it counts a
 * chunk's moved pages where they are more than its used), or spends the
 * allowance it started with, and each wait was 100 ms of a 400 ms drain. */
static bool rc_more_now(unsigned t, bool hard_left)
{
  if (hard_left) return true;
  uint64_t high = tm_budget_get(t, TM_LIMIT_HIGH);
  if (!rc.draining[t] || high == TM_BUDGET_UNLIMITED) return false;
  uint64_t next = rc.allowance[t], hyst = rc_hysteresis(high);
  rc_accrue(&next, rc.rate, tm_clock_ns(CLOCK_MONOTONIC) - rc.last_full_ns);
  return next >= TM_CHUNK_SIZE && tm_policy_used(t) > (high > hyst ? high - hyst : 0);
}

/* Resident bytes of tier t that pageout may take (UINT64_MAX: all): min and
 * low protect the tier from pageout as from demotion (low only while its
 * nodes have free memory). */
static uint64_t rc_pageable(const rc_scan_t *s, unsigned t)
{
  uint64_t floor = tm_budget_get(t, TM_LIMIT_MIN), low = tm_budget_get(t, TM_LIMIT_LOW);
  if (low > floor && !rc_short(t)) floor = low;
  if (floor == 0) return UINT64_MAX;
  return s->movable[t] > floor ? s->movable[t] - floor : 0;
}

/* ---- promotion ------------------------------------------------------------ */

/* c may move up or be exchanged down: the accessed bits measure it (a VMA
 * of its own, so moving it adds no VMA either), and it has not moved for
 * RC_COOLDOWN_TICKS. */
static bool rc_settled(tm_chunk_t *c)
{
  return (atomic_load_explicit(&c->flags, memory_order_relaxed) & TM_CHUNK_SPLIT) &&
         tm_hotness_since_moved(c) >= RC_COOLDOWN_TICKS;
}

/* Bytes tier t may still take before it reaches its placement limit (the
 * smaller of high and max) less the hysteresis: promotion stops short of
 * what would make reclaim demote again. UINT64_MAX: unlimited. */
static uint64_t rc_room_below_high(unsigned t)
{
  uint64_t lim = tm_budget_placement_limit(t);
  if (lim == TM_BUDGET_UNLIMITED) return UINT64_MAX;
  uint64_t target = lim > rc_hysteresis(lim) ? lim - rc_hysteresis(lim) : 0, used = tm_policy_used(t);
  return target > used ? target - used : 0;
}

/* An exchange moves a chunk of a lower tier up in place of one of the tier
 * above only when the one above is cold, or when their heats compare (both
 * graded, or both read from huge pages: tm_hotness_graded) and the lower
 * one's is this much above the other's, counted in TM_HOTNESS_HEAT_MAX (a quarter of the upper one's
 * heat, and at least RC_EXCHANGE_MARGIN): two chunks about as hot stay where
 * they are. */
#define RC_EXCHANGE_MARGIN 8u

static bool rc_may_replace(unsigned u, bool graded, tm_chunk_t *down)
{
  if (tm_hotness_cold(down)) return true;
  if (graded != tm_hotness_graded(down)) return false;
  unsigned d = tm_hotness_heat(down);
  return u > d + (d / 4 > RC_EXCHANGE_MARGIN ? d / 4 : RC_EXCHANGE_MARGIN);
}

/* Chunks ranked for promotion and exchange. */
typedef struct {
  tm_chunk_t *c;
  unsigned heat, age;
  uint32_t bytes;
} rc_pick_t;

#define RC_PICK_MAX 8u

/* Offers k to best[0..*n), kept sorted by `before` (a goes first), at most
 * max (<= RC_PICK_MAX) long: the last is dropped when full. */
static void rc_pick_offer(rc_pick_t *best, unsigned *n, unsigned max, rc_pick_t k,
                          bool (*before)(const rc_pick_t *, const rc_pick_t *))
{
  unsigned at = *n;
  while (at > 0 && before(&k, &best[at - 1])) at--;
  if (at == max) return;
  for (unsigned j = (*n < max ? *n : max - 1); j > at; j--) best[j] = best[j - 1];
  best[at] = k;
  if (*n < max) (*n)++;
}

static rc_pick_t rc_pick(tm_chunk_t *c)
{
  return (rc_pick_t){ c, tm_hotness_heat(c), tm_hotness_age(c), tm_chunk_bytes(c) };
}

/* The coldest first: the lowest heat; then the fullest, as a chunk of a few
 * KiB frees next to nothing; then the oldest. */
static bool rc_colder_first(const rc_pick_t *a, const rc_pick_t *b)
{
  if (a->heat != b->heat) return a->heat < b->heat;
  if (a->bytes != b->bytes) return a->bytes > b->bytes;
  return a->age > b->age;
}

/* The hottest first; then the fullest. */
static bool rc_hotter_first(const rc_pick_t *a, const rc_pick_t *b)
{
  if (a->heat != b->heat) return a->heat > b->heat;
  return a->bytes > b->bytes;
}

/* The chunks of tier t that something of heat u (graded or not) may take
 * the place of (movable, settled, rc_may_replace), the coldest first: up to
 * max into out[]; returns how many. Of tier 0, also chunks below with
 * pieces up gone cold (their bytes: the pieces'): a chunk's heat is not its
 * pieces', which were the hot part of it. */
static unsigned rc_colder(unsigned t, unsigned u, bool graded, rc_pick_t *out, unsigned max)
{
  unsigned n = 0;
  for (unsigned i = 0; i < tm_ranges.n; i++)
    for (uintptr_t a = tm_range_lo(i); a < tm_range_end(i); a += TM_CHUNK_SIZE) {
      tm_chunk_t *c = tm_chunk_of((void *)a);
      bool pieces = t == 0 && rc_has_pieces_up(c);
      if ((pieces || tm_chunk_tier(c) == t) && rc_movable(c) && rc_settled(c) &&
          (pieces ? tm_hotness_cold(c) : rc_may_replace(u, graded, c))) {
        rc_pick_t k = rc_pick(c);
        if (pieces) k.bytes = tm_chunk_shifted(c);
        rc_pick_offer(out, &n, max, k, rc_colder_first);
      }
    }
  return n;
}

/* The movable, settled chunks of tier t the accessed bits saw at each of
 * their last two reads (a fill seen once does not move up: in CI it brought
 * cold chunks up, which then sat out the cool-down on top), the hottest
 * first: up to max into out[]; returns how many. While pieces are read,
 * only a chunk known not to be mixed: in 4 KiB pages (a huge page is read
 * per piece first, which grades it), with half of the most heat or more,
 * and no pieces up. A mixed chunk's hot pieces move up alone; moved whole,
 * its cold part came up too and sat out the cool-down on top (the mixed
 * VM test took up to 9.4 s, or failed). */
static unsigned rc_hottest(unsigned t, rc_pick_t *out, unsigned max)
{
  unsigned n = 0;
  for (unsigned i = 0; i < tm_ranges.n; i++)
    for (uintptr_t a = tm_range_lo(i); a < tm_range_end(i); a += TM_CHUNK_SIZE) {
      tm_chunk_t *c = tm_chunk_of((void *)a);
      if (tm_chunk_tier(c) == t && rc_movable(c) && tm_hotness_steady(c) && rc_settled(c) &&
          !rc_has_pieces_up(c) &&
          !(tm_hotness_pieces_on() && (!tm_hotness_graded(c) || tm_hotness_heat(c) < TM_HOTNESS_HEAT_MAX / 2)))
        rc_pick_offer(out, &n, max, rc_pick(c), rc_hotter_first);
    }
  return n;
}

/* Room under tier t's high (less the hysteresis) for `bytes` of heat u
 * (graded or not) coming from below: what is there, or what demoting to
 * t+1 the colder chunks of t that it may replace makes (rc_colder; a few:
 * the tier may stand a little above the mark, and chunks hold different
 * amounts), none unless those found make enough room: an exchange that
 * cannot finish moves nothing. RC_ROOM_STOP when a move failed. */
typedef enum { RC_ROOM_NONE, RC_ROOM_MADE, RC_ROOM_STOP } rc_room_made_t;

static rc_room_made_t rc_make_room(unsigned t, uint64_t bytes, unsigned u, bool graded)
{
  uint64_t room = rc_room_below_high(t);
  if (room >= bytes) return RC_ROOM_MADE;
  rc_pick_t cold[4];
  unsigned nc = rc_colder(t, u, graded, cold, 4), k = 0;
  uint64_t freed = 0;
  while (k < nc && room + freed < bytes) freed += cold[k++].bytes;
  if (room + freed < bytes) return RC_ROOM_NONE;
  for (unsigned j = 0; j < k; j++) {
    tm_migrate_counts_t n = {0};
    unsigned to = tm_chunk_tier(cold[j].c) > t ? tm_chunk_tier(cold[j].c) : t + 1;   /* pieces: back down */
    if (tm_migrate_chunk(cold[j].c, to, &n) != 0) return RC_ROOM_STOP;
    rc_moved(cold[j].c, t, to, &n);
  }
  return rc_room_below_high(t) >= bytes ? RC_ROOM_MADE : RC_ROOM_STOP;
}

/* Moves the hot chunks of tier t (>= 1) up to t-1, the hottest first (of
 * RC_PICK_MAX a pass), at most `want` bytes: into the room under t-1's high,
 * or in exchange for colder chunks of t-1 (rc_make_room; demoted to t
 * first, so the tier's usage stays as it was and its min and low are kept).
 * None that moved in the last RC_COOLDOWN_TICKS moves, and a chunk that
 * failed to move waits as long. Returns the bytes promoted. */
static uint64_t rc_promote(unsigned t, uint64_t want)
{
  uint64_t done = 0;
  rc_pick_t up[RC_PICK_MAX];
  unsigned nup = rc_hottest(t, up, RC_PICK_MAX);
  for (unsigned i = 0; i < nup && done < want; i++) {
    tm_chunk_t *c = up[i].c;
    uint64_t bytes = tm_chunk_bytes(c);
    tm_migrate_counts_t n = {0};
    rc_room_made_t made = rc_make_room(t - 1, bytes, tm_hotness_heat(c), tm_hotness_graded(c));
    if (made == RC_ROOM_STOP) return done;
    if (made == RC_ROOM_NONE) continue;   /* as hot as what it would replace */
    if (tm_migrate_chunk(c, t - 1, &n) != 0) {
      tm_hotness_moved(c);
      continue;
    }
    rc_moved(c, t, t - 1, &n);
    done += bytes;
  }
  return done;
}

/* ---- pieces --------------------------------------------------------------- */

/* Pieces (chunkmap.h) are read where a chunk is mixed: chunks below tier 0
 * that the bits saw, whose hot pieces may move up alone; and, while pieces
 * seen found neither room nor a chunk to replace on tier 0, chunks of tier
 * 0 in huge pages, which a read per piece grades (a huge page has one
 * accessed bit: hotness.h), so an exchange can tell them from the pieces
 * (such a chunk stays in 4 KiB pages: not without need). At most
 * TIERMALLOC_HOTNESS_PIECES a read, TM_HOTNESS_SAMPLE_MAX / 4 (8) of tier 0
 * at most, taken in turn from a cursor over the chunk map so each gets its read. */
static struct {
  unsigned range;
  uintptr_t at;
} rc_cursor;

/* Which of the two c is, if either: 1 a chunk below, 2 one of tier 0 in
 * huge pages; 0 neither. */
static int rc_piece_candidate(tm_chunk_t *c)
{
  if (!rc_movable(c) || !tm_hotness_hot(c) ||
      !(atomic_load_explicit(&c->flags, memory_order_relaxed) & TM_CHUNK_SPLIT))
    return 0;
  return tm_chunk_tier(c) != 0 ? 1 : !tm_hotness_graded(c) ? 2 : 0;
}

/* The chunks range i has carved so far: the cursor's bound. The map holds
 * every chunk of the reservation, and walking all of it at each pass of an
 * idle process was 60 % of its reclaim thread's CPU (perf in the 2tier VM). */
static uint64_t rc_carved_chunks(unsigned i)
{
  return (tm_range_end(i) - tm_range_lo(i) + TM_CHUNK_SIZE - 1) >> TM_CHUNK_SHIFT;
}

static void rc_sample_pieces(void)
{
  if (!tm_hotness_pieces_on() || !rc.promote_rate || rc.ntiers < 2 || rc.below == 0 ||
      !tm_hotness_tracking() || tm_ranges.n == 0)
    return;
  unsigned top = 0;
  uint64_t total = 0;
  for (unsigned i = 0; i < tm_ranges.n; i++) total += rc_carved_chunks(i);
  for (uint64_t k = 0; k < total; k++) {
    while (rc_cursor.range >= tm_ranges.n || rc_cursor.at >= rc_carved_chunks(rc_cursor.range)) {
      rc_cursor.at = 0;
      rc_cursor.range = rc_cursor.range + 1 < tm_ranges.n ? rc_cursor.range + 1 : 0;
    }
    tm_chunk_t *c = tm_chunks + rc_cursor.range * tm_chunks_per_range + rc_cursor.at++;
    int kind = rc_piece_candidate(c);
    bool upper = kind == 2;
    if (!kind || (upper && (!rc.piece_no_room || top >= TM_HOTNESS_SAMPLE_MAX / 4))) continue;
    /* Backing off, a chunk below in huge pages is read per piece all the
     * same: nothing else grades it, and only a graded chunk moves up whole
     * (rc_hottest). A phase change in the 3tier VM stalled 7 s and more: the
     * first read saw some of the new hot chunks, graded them and moved none
     * in pieces, and the rest waited out the back-off (CI, fc11). */
    if (rc.piece_skip && (upper || tm_hotness_graded(c))) continue;
    if (!tm_hotness_sample(c)) break;   /* full */
    top += upper;
  }
}

/* After a read: the pieces the bits saw, of chunks below tier 0, move up
 * (tm_migrate_pieces) into the room under tier 0's high, or in exchange for
 * colder chunks of tier 0 (rc_make_room: a piece used in the interval is
 * as hot as a graded chunk can be), within the promotion rate. A chunk
 * with more than half of its pieces seen is not mixed: promotion takes it
 * whole, if at all (on bench/tier-quality's zipfian heap nearly every piece
 * of every chunk is seen in an interval; moving pieces there cost four
 * times the reclaim CPU for no gain). A chunk whose pieces moved starts its
 * cool-down: its pieces are not exchanged down again before it ends. Reads
 * whose pieces moved nothing make the next reads per piece rarer
 * (rc_sample_pieces): every 2nd, 4th, ... 16th read, but for chunks in huge
 * pages. Returns the bytes promoted. */
#define RC_PIECE_IDLE_MAX 4u

static uint64_t rc_promote_pieces(uint64_t want)
{
  tm_chunk_t *c[TM_HOTNESS_SAMPLE_MAX];
  uint32_t seen[TM_HOTNESS_SAMPLE_MAX];
  unsigned n = tm_hotness_pieces_seen(c, seen, TM_HOTNESS_SAMPLE_MAX);
  uint64_t done = 0;
  if (n) rc.piece_no_room = false;
  for (unsigned i = 0; i < n && done < want; i++) {
    unsigned t = tm_chunk_tier(c[i]);
    if (t == 0 || !rc_movable(c[i])) continue;
    /* Pieces up that this read did not see: all back down first (which of
     * the bytes are theirs is not kept), once the cool-down allows. */
    if ((tm_chunk_pieces_up(c[i]) & ~seen[i]) && rc_settled(c[i])) {
      tm_migrate_counts_t m = {0};
      if (tm_migrate_chunk(c[i], t, &m) != 0) continue;
      rc_moved(c[i], 0, t, &m);
    }
    uint32_t more = seen[i] & ~tm_chunk_pieces_up(c[i]);
    if (!more || __builtin_popcount(seen[i]) > (int)TM_PIECES / 2) continue;
    uint64_t bytes = (uint64_t)__builtin_popcount(more) << TM_PIECE_SHIFT;
    rc_room_made_t made = rc_make_room(0, bytes, TM_HOTNESS_HEAT_MAX, true);
    if (made == RC_ROOM_STOP) break;
    if (made == RC_ROOM_NONE) {
      rc.piece_no_room = true;
      continue;
    }
    tm_migrate_counts_t m = {0};
    if (tm_migrate_pieces(c[i], more, &m) != 0) continue;
    rc_add(&rc_promoted[0], m.moved);
    tm_hotness_moved(c[i]);
    done += m.moved;
  }
  if (rc.piece_skip) {   /* one read less to skip, or none if pieces moved */
    rc.piece_skip = done ? 0 : rc.piece_skip - 1;
    if (done) rc.piece_idle = 0;
  } else if (n && want >= TM_CHUNK_SIZE) {
    rc.piece_idle = done ? 0 : rc.piece_idle < RC_PIECE_IDLE_MAX ? rc.piece_idle + 1 : RC_PIECE_IDLE_MAX;
    rc.piece_skip = (1u << rc.piece_idle) - 1;
  }
  return done;
}

/* The budgets should be derived again: RC_REFRESH periods have passed, or
 * the cgroup's own memory.high or memory.max changed (or cannot be read any
 * more). Two preads while the cgroup has them. */
static bool rc_budgets_stale(uint64_t now)
{
  uint64_t every = (rc.notified && tm_watch_active() ? RC_REFRESH : RC_REFRESH_POLLED) * rc.period_max;
  bool stale = rc.refreshed_ns == 0 || now - rc.refreshed_ns >= every;
  if (rc.cg_watch) {
    uint64_t v[2] = { 0, 0 };
    stale |= !rc_cgroup_value("memory.high", &v[0]) || !rc_cgroup_value("memory.max", &v[1]) ||
             v[0] != rc.cg_seen[0] || v[1] != rc.cg_seen[1];
  }
  return stale;
}

/* Watches memory.high and memory.max of the cgroup and of its nearest
 * ancestors (RC_WATCH_LEVELS, the root cgroup excluded: it has neither), so
 * that a write to any of them wakes the thread. */
static bool rc_watch_limits(void)
{
  static char paths[RC_WATCH_LEVELS * 2][TM_KFILE_PATH_MAX];
  const char *list[RC_WATCH_LEVELS * 2];
  const tm_cgroup_limits_t *cg = &rc.budgets.cgroup;
  unsigned n = 0, levels = 0;
  for (const char *p = cg->path; *p; p++) levels += *p == '/' && p[1] != '\0';
  size_t len = strlen(cg->dir);
  for (unsigned k = 0; k < levels && k < RC_WATCH_LEVELS; k++) {
    for (unsigned f = 0; f < 2; f++, n++) {
      if (!rc_cgroup_path_in(len, f ? "memory.max" : "memory.high", paths[n])) return false;
      list[n] = paths[n];
    }
    while (len > 0 && cg->dir[len - 1] != '/') len--;   /* the parent's directory */
    if (len > 0) len--;
  }
  /* An ancestor's file that cannot be watched is left to the periodic
   * derive; the cgroup's own two must be. */
  return n > 0 && (tm_watch_files(list, n) || tm_watch_files(list, 2));
}

/* The budgets again, and the cgroup files watched from now on. */
static void rc_refresh(uint64_t now)
{
  tm_budget_refresh_now();
  tm_budget_snapshot(&rc.budgets);
  tm_hotness_track(tm_reclaim_needed());
  rc.refreshed_ns = now;
  rc_held_open();
  rc.cg_watch = rc_held[0].fd >= 0 && rc_held[1].fd >= 0 &&
                rc_cgroup_value("memory.high", &rc.cg_seen[0]) &&
                rc_cgroup_value("memory.max", &rc.cg_seen[1]);
  rc.notified = rc.cg_watch && rc_watch_limits();
}

/* Bytes of pages to page out of the lowest tier, whose pages (start-up
 * metadata's aside, as the budgets count) are `pages`. Its limits are held
 * in pages: pageout frees pages, not committed bytes. hard: what is over its
 * max, at once; soft: what is over its high - hysteresis, at the pageout
 * rate. Each less the room left in the budgets of the tiers above: the
 * process's budget as a whole is not spent, and nothing goes to swap while
 * memory it may use is free (the kernel's failure this avoids is swapping
 * with a tier nearly empty). */
typedef struct rc_excess_s {
  uint64_t hard, soft;
} rc_excess_t;

static rc_excess_t rc_lowest_excess(uint64_t pages)
{
  rc_excess_t ex = { 0, 0 };
  unsigned last = rc.ntiers - 1;
  uint64_t high = tm_budget_get(last, TM_LIMIT_HIGH), max = tm_budget_get(last, TM_LIMIT_MAX);
  if (max != TM_BUDGET_UNLIMITED && pages > max) ex.hard = pages - max;
  /* Above high, as for demotion: in mode pressure only while its nodes are
   * short of free memory. */
  if (high != TM_BUDGET_UNLIMITED && pages > high && (rc.mode != RC_PRESSURE || rc_short(last))) {
    uint64_t hyst = rc_hysteresis(high);
    ex.soft = pages - (high > hyst ? high - hyst : 0);
  }
  for (unsigned t = 0; t < last && (ex.hard || ex.soft); t++) {
    uint64_t lim = tm_budget_placement_limit(t), used = tm_policy_used(t);
    uint64_t room = lim == TM_BUDGET_UNLIMITED ? UINT64_MAX : lim > used ? lim - used : 0;
    ex.hard = ex.hard > room ? ex.hard - room : 0;
    ex.soft = ex.soft > room ? ex.soft - room : 0;
  }
  return ex;
}

/* A full pass is due: its period has passed, or the counters alone show a
 * tier over a watermark (used is at least what is resident, so no pageout
 * can be needed below it), a drain under way, or the cgroup near its limit.
 * Costs a few atomic reads and one cgroup file. Stray chunks wait for the
 * period: pages a fork child still shares cannot move until it exits or
 * writes them, and retrying them every wake would only burn CPU. */
static bool rc_due(uint64_t now)
{
  if (now - rc.last_full_ns >= rc.period) return true;
  for (unsigned t = 0; t + 1 < rc.ntiers; t++) {
    uint64_t high = tm_budget_get(t, TM_LIMIT_HIGH), max = tm_budget_get(t, TM_LIMIT_MAX);
    uint64_t limit = max < high ? max : high;
    if (rc.draining[t] || (limit != TM_BUDGET_UNLIMITED && tm_policy_used(t) > limit)) return true;
  }
  /* Pageout, only where it can act: the lowest tier's pages as last
   * measured (less what was paged out since, plus what was committed there
   * since) over its high or max beyond the room above, or the cgroup near
   * its limit; neither without swap. */
  if (atomic_load_explicit(&rc_unheld, memory_order_relaxed))
    return rc.pageout && rc_swap_detect() == 1;   /* swap turned on: the max can be held now */
  if (!rc.pageout || !rc.swap) return false;
  unsigned last = rc.ntiers - 1;
  uint64_t used = tm_policy_used(last);
  rc_excess_t ex = rc_lowest_excess(rc.lowest_resident +
                                    (used > rc.lowest_used ? used - rc.lowest_used : 0));
  uint64_t cur, over;
  return ex.hard || ex.soft || rc_cgroup_near(&cur, &over);
}

/* Adds the thread's CPU time since the last call to reclaim_cpu_ns: the
 * passes and the wait between them (waking and sleeping cost CPU too, most
 * of it while idle), read once a wake. */
static void rc_cpu_account(void)
{
  uint64_t c = tm_clock_ns(CLOCK_THREAD_CPUTIME_ID);
  if (rc.cpu_seen && c > rc.cpu_seen) rc_add(&rc_cpu_ns, c - rc.cpu_seen);
  rc.cpu_seen = c;
}

/* How long the thread may sleep now (before the accessed bits are due:
 * rc_wait): RECLAIM_PERIOD_MIN_MS while a tier is
 * over a watermark; otherwise until the next full pass is due. While the
 * cgroup's own limits are read at each wake and a write to them cannot wake
 * the thread (no inotify), it wakes four times a period (at least every
 * RECLAIM_PERIOD_MIN_MS) to read them. Nothing else can cross a limit
 * between passes: new memory never lands above high. */
static uint64_t rc_wait_pass(uint64_t now)
{
  if (rc.period == rc.period_min) return rc.period_min;
  for (unsigned t = 0; t + 1 < rc.ntiers; t++)
    if (rc.draining[t]) return rc.period_min;
  uint64_t next = rc.last_full_ns + rc.period;
  uint64_t wait = next > now + rc.period_min ? next - now : rc.period_min;
  uint64_t watch = rc.period / 4 > rc.period_min ? rc.period / 4 : rc.period_min;
  bool woken = rc.notified && tm_watch_active();
  return rc.cg_watch && !woken && watch < wait ? watch : wait;
}

static uint64_t rc_wait(uint64_t now)
{
  uint64_t wait = rc_wait_pass(now), due = tm_hotness_read_due();
  /* The accessed bits are due first (a window's end, or a read per piece):
   * the thread wakes to read them. */
  if (due) {
    uint64_t left = due > now + RC_MS ? due - now : RC_MS;
    if (left < wait) return left;
  }
  return wait;
}

/* The accessed bits' scan (tm_hotness_scan), and what waits for a read. */
static void rc_scan_hotness(tm_scan_pace_t pace)
{
  if (tm_hotness_scan(pace)) {
    rc.want_bits = false;
    tm_site_evaluate();
    if (rc.promote_rate && !rc.hand) {
      uint64_t up = rc_promote_pieces(rc.promote_allowance);
      rc.promote_allowance = rc.promote_allowance > up ? rc.promote_allowance - up : 0;
    }
  }
}

/* Whether to hand chunks now: the option, and the kernel's mode read again
 * at most once a second (an administrator may switch it). */
static void rc_hand_update(uint64_t now)
{
  if (rc.hand_read_ns && now - rc.hand_read_ns < 1000000000ull) return;
  rc.hand_read_ns = now;
  int mode = tm_balancing_mode(rc.root);
  rc.hand = tm_option(TM_OPTION_NUMA_BALANCING)->num == 1 && !rc.hand_refused && rc.ntiers > 1 && mode > 0 &&
            (mode & 2) && tm_range_os()->hand != NULL;
  atomic_store_explicit(&rc_handing, rc.hand, memory_order_relaxed);
}

/* Hands the chunks this pass found ready (rc_hand_candidate). */
static void rc_hand(const rc_scan_t *s)
{
  for (unsigned i = 0; i < s->nhand && rc.hand; i++) {
    tm_chunk_t *c = s->hand[i];
    int err = tm_migrate_hand(c, &rc.hand_nodes[tm_chunk_tier(c)]);
    if (err != 0 && err != EBUSY) {
      rc.hand_refused = true;
      rc.hand = false;
      atomic_store_explicit(&rc_handing, false, memory_order_relaxed);
      tm_warn("the kernel refused MPOL_F_NUMA_BALANCING on the heap (%s); NUMA balancing cannot promote its "
              "pages, and tiermalloc's own promotion goes on",
              strerror(err));
    }
  }
}

uint64_t tm_reclaim_pass(void)
{
  uint64_t now = tm_clock_ns(CLOCK_MONOTONIC);
  if (!rc.cpu_seen) rc.cpu_seen = tm_clock_ns(CLOCK_THREAD_CPUTIME_ID);
  tm_hotness_tick();
  if (rc_budgets_stale(now)) rc_refresh(now);
  if (rc.last_full_ns && !rc_due(now)) {
    if (tm_hotness_read_due()) rc_scan_hotness(TM_SCAN_DUE);   /* a window's end, or pieces' read */
    rc_cpu_account();
    return rc_wait(now);
  }
  uint64_t elapsed = rc.last_full_ns ? now - rc.last_full_ns : rc.period_min;
  rc.last_full_ns = now;
  rc_scan_t s;
  rc_hand_update(now);
  rc_stray_scan(now);
  rc_measure(&s);
  rc_hand(&s);
  rc.below = 0;
  for (unsigned t = 1; t < rc.ntiers; t++) rc.below += s.resident[t];
  rc.below_own = rc_own_below();
  uint64_t anon[TIER_MAX_TIERS];
  bool shared = false;
  for (unsigned t = 0; t + 1 < rc.ntiers && !shared; t++) shared = rc_shared(t);
  if (shared && (!rc_cgroup_has_others() || !rc_cgroup_anon(anon))) shared = false;
  bool over = false, more = false, paging = false, again = false;
  int state = TIER_RECLAIM_IDLE;
  for (unsigned i = 0; i < s.nstray; i++) {
    tm_migrate_counts_t n = {0};
    tm_chunk_t *c = s.stray[i];
    unsigned t = tm_chunk_tier(c);
    if (atomic_load_explicit(&c->flags, memory_order_relaxed) & TM_CHUNK_PIN) {
      if (t != 0 && tm_migrate_chunk(c, 0, &n) == 0) rc_moved(c, t, 0, &n);
      continue;
    }
    if (t > 0 && tm_migrate_chunk(c, t, &n) == 0) {
      rc_add(&rc_demoted[t - 1], n.moved);
      rc_add(&rc_failed[t - 1], n.failed);
      if (n.moved) {
        state = TIER_RECLAIM_DEMOTING;
        over = true;   /* look again soon: more may have landed meanwhile */
      }
    }
  }
  bool tier0_short = false;   /* tier 0 over, with less of its own to move than that */
  for (unsigned t = 0; t + 1 < rc.ntiers; t++) {
    uint64_t extra = shared && rc_shared(t) ? rc_shared_excess(t, anon, &s) : 0;
    rc_room_t room;
    /* Handed chunks' pages the kernel moved up are used where they are. */
    uint64_t used = tm_policy_used(t) + (rc.hand ? rc.up_to[t] : 0);
    uint64_t held = s.budgeted[t] > used ? s.budgeted[t] : used;
    uint64_t hard;
    uint64_t want = rc_demote_want(t, elapsed, extra, used, held, s.movable[t], &room, &over, &hard);
    if (want == 0) continue;
    /* Above high, a chunk the accessed bits saw in the last interval waits
     * for their next read after the tier went over: the data the program
     * wrote just before (filled once, never read again) was seen too, and
     * only that read tells it from the data it reads all the time. Above
     * max nothing waits. */
    if (rc.draining[t] && !rc.drain_read[t]) rc.drain_read[t] = tm_hotness_read_after(rc.drain_tick[t]);
    bool wait = rc.draining[t] && !rc.drain_read[t];
    uint64_t done = rc_act(&s, t, want, room, false, wait ? hard : UINT64_MAX);
    if (wait && done < want) rc.want_bits = true;
    if (t == 0) tier0_short = done < want && !wait;
    rc.allowance[t] = rc.allowance[t] > done ? rc.allowance[t] - done : 0;
    if (done && rc_more_now(t, hard > done)) again = true;
    if (done) state = TIER_RECLAIM_DEMOTING;
    atomic_store_explicit(&rc_state, state, memory_order_relaxed);
  }
  rc.hand_over = rc.hand && tier0_short;
  /* Promotion, from the top down, at RECLAIM_PROMOTE_RATE: after demotion,
   * so a tier over its watermarks never takes more. Not while the kernel
   * promotes handed chunks' pages. */
  if (rc.promote_rate && !rc.hand) {
    rc_accrue(&rc.promote_allowance, rc.promote_rate, elapsed);
    for (unsigned t = 1; t < rc.ntiers && rc.promote_allowance >= TM_CHUNK_SIZE; t++) {
      uint64_t up = rc_promote(t, rc.promote_allowance);
      rc.promote_allowance = rc.promote_allowance > up ? rc.promote_allowance - up : 0;
      if (up) {
        more = true;   /* more may follow at the next wake */
        if (state == TIER_RECLAIM_IDLE) state = TIER_RECLAIM_PROMOTING;
      }
    }
  }
  /* Pageout: the lowest tier above its max or its high; or the whole
   * cgroup near its limit, from the lowest tier up. */
  unsigned last = rc.ntiers - 1;
  rc_excess_t ex = rc_lowest_excess(s.budgeted[last]);
  rc.lowest_resident = s.budgeted[last];
  rc.lowest_used = tm_policy_used(last);
  uint64_t whole = rc.pageout ? rc_cgroup_pageout(&s) : 0;
  const char *blocked = ex.hard || ex.soft || whole ? rc_pageout_blocked() : NULL;
  bool unheld = ex.hard && blocked;
  atomic_store_explicit(&rc_unheld, unheld, memory_order_relaxed);
  if (unheld && !rc.max_said) {
    rc.max_said = true;
    tm_warn("tier %u is above its max (%.1f MiB) and cannot be brought back under it: %s, so "
            "nothing can be paged out; the stats say \"max not held\"",
            last, (double)tm_budget_get(last, TM_LIMIT_MAX) / (1 << 20), blocked);
  } else if (blocked && rc.pageout && !unheld && !rc.swap_said) {
    rc.swap_said = true;
    tm_warn("%s, so nothing can be paged out (MADV_PAGEOUT would do nothing); none is counted",
            blocked);
  }
  if (unheld) rc.swap_said = true;   /* one line says it */
  if (!blocked && (ex.hard || ex.soft || whole)) {
    /* Above high and for the cgroup, at RECLAIM_PAGEOUT_RATE: swapping is
     * the costliest thing reclaim does (zram compresses every page; at 256
     * MiB/s, the demo's cgroup held near its limit took 6 s of a TCG core in
     * 8 s). Above max, at once, as the tiers above are held. */
    rc_accrue(&rc.pageout_allowance, rc.pageout_rate, elapsed);
    uint64_t out = ex.soft < rc.pageout_allowance ? ex.soft : rc.pageout_allowance;
    if (ex.hard > out) out = ex.hard;
    if (whole > rc.pageout_allowance) whole = rc.pageout_allowance;
    atomic_store_explicit(&rc_state, TIER_RECLAIM_PAGING_OUT, memory_order_relaxed);
    rc_room_t room = { rc_pageable(&s, last), UINT64_MAX };
    uint64_t done = out ? rc_act(&s, last, out, room, true, UINT64_MAX) : 0;
    for (unsigned t = rc.ntiers; t-- > 0 && done < whole;) {
      room.pages = rc_pageable(&s, t);
      if (room.pages) done += rc_act(&s, t, whole - done, room, true, UINT64_MAX);
    }
    rc.pageout_allowance = rc.pageout_allowance > done ? rc.pageout_allowance - done : 0;
    rc.lowest_resident = rc.lowest_resident > done ? rc.lowest_resident - done : 0;
    paging = over = true;
    state = TIER_RECLAIM_PAGING_OUT;
  }
  if (unheld) state = TIER_RECLAIM_MAX_NOT_HELD;
  atomic_store_explicit(&rc_state, over || more || paging || unheld ? state : TIER_RECLAIM_IDLE,
                        memory_order_relaxed);
  /* Chunks to read per piece at the scan below; not while a limit is being
   * brought back: a read per piece makes the scan slower (in the VM, high
   * was held in 2.3 s, not 2). */
  bool draining = false;
  for (unsigned t = 0; t + 1 < rc.ntiers; t++) draining |= rc.draining[t];
  if (!draining && !rc.want_bits && state != TIER_RECLAIM_DEMOTING && !paging && !unheld && !rc.hand)
    rc_sample_pieces();
  /* After the moves, so a limit to hold never waits for it. */
  /* Soon (not after an interval) while demotion waits for it: high is held
   * within the 2 s the README promises, and a short window still tells data
   * read all the time from data written once before. */
  bool bits_wanted = rc.want_bits;
  rc_scan_hotness(rc.want_bits ? TM_SCAN_SOON : over ? TM_SCAN_BUSY : TM_SCAN_DUE);
  /* Demotion waited for this read: what it held back may go now. */
  if (bits_wanted && !rc.want_bits) again = true;
  /* Short while anything moves. Chunks waiting to be read per piece do not
   * shorten it: the thread wakes for their read (tm_hotness_read_due), which
   * at a period of 1 s alone came every 0.8-1.7 s at a 500 ms interval, and
   * at the shortest period made an idle 256 MiB heap's thread pass every
   * 100 ms for 6 s of every 6 (mincore and numa_maps each time: 4x the CPU
   * in the 2tier VM). */
  rc.period = over || more
                  ? rc.period_min
                  : (rc.period * 2 > rc.period_max ? rc.period_max : rc.period * 2);
  rc_add(&rc_passes, 1);
  rc_cpu_account();
  return again ? 0 : rc_wait(now);
}

void tm_reclaim_woken(void)
{
  rc.refreshed_ns = 0;
}

void tm_reclaim_stopped(void)
{
  atomic_store_explicit(&rc_state, TIER_RECLAIM_STOPPED, memory_order_relaxed);
  rc.last_full_ns = 0;
  rc.cpu_seen = 0;
  rc.refreshed_ns = 0;   /* a new thread derives them again, and watches the files anew */
}

void tm_reclaim_stats(tier_stats_t *s)
{
  static const uint32_t modes[] = { TIER_RECLAIM_ALWAYS, TIER_RECLAIM_PRESSURE, TIER_RECLAIM_OFF };
  s->reclaim_mode = modes[rc.mode];
  s->reclaim_state = (uint32_t)atomic_load_explicit(&rc_state, memory_order_relaxed);
  s->reclaim_passes = atomic_load_explicit(&rc_passes, memory_order_relaxed);
  s->reclaim_cpu_ns = atomic_load_explicit(&rc_cpu_ns, memory_order_relaxed);
  s->pageout_available = rc.swap == 1;
  s->numa_balancing_heap = atomic_load_explicit(&rc_handing, memory_order_relaxed);
  strncpy(s->cold_signal, tm_hotness_signal(), sizeof s->cold_signal - 1);
  unsigned apart, cold, tried;
  tm_site_counts(&s->site_samples, &apart, &cold, &tried);
  s->sites_cold = cold;
  s->sites_tried = tried;
  tm_site_info_t info[TM_SITE_SLOTS];
  s->sites_apart = tm_site_list(info, TM_SITE_SLOTS);
  for (unsigned k = 0; k < s->sites_apart; k++) {
    tier_stats_site_t *o = &s->site[k];
    for (unsigned f = 0; f < TM_SITE_FRAMES; f++) o->frames[f] = (uint64_t)(uintptr_t)info[k].frames[f];
    o->sampled = info[k].sampled;
    o->hot = info[k].hot;
    o->cold = info[k].cold;
    o->cold_verdict = info[k].cold_verdict;
  }
  for (unsigned t = 0; t < TIER_MAX_TIERS; t++) {
    s->tier[t].reclaim.demoted = atomic_load_explicit(&rc_demoted[t], memory_order_relaxed);
    s->tier[t].reclaim.promoted = atomic_load_explicit(&rc_promoted[t], memory_order_relaxed);
    s->tier[t].reclaim.pageout = atomic_load_explicit(&rc_paged[t], memory_order_relaxed);
    s->tier[t].reclaim.failed = atomic_load_explicit(&rc_failed[t], memory_order_relaxed);
    s->tier[t].budget.max_not_held =
        t + 1 == rc.ntiers && atomic_load_explicit(&rc_unheld, memory_order_relaxed);
  }
}

void tm_reclaim_postfork_child(void)
{
  rc_reset();
  tm_reclaim_stopped();
}
