/*
 * reclaim_decide: what moves: how much each tier must give up (demotion,
 * pageout) and may take (promotion), within its protection and the rates,
 * and which chunks: the coldest to replace, the hottest to move up, those
 * to hand to NUMA balancing, those to read per piece. Moving them is
 * reclaim_move.c's.
 */
#include <stdatomic.h>
#include <time.h>

#include "budget.h"
#include "chunkmap.h"
#include "clock.h"
#include "hotness.h"
#include "kfile.h"
#include "options.h"
#include "policy.h"
#include "range.h"
#include "reclaim_state.h"

/* ---- demotion and pageout: how much --------------------------------------- */

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

/* Why nothing can be paged out now, or NULL when pageout can act (swap is
 * checked again each time pageout is wanted: it may be turned on or off
 * while the program runs). */
const char *rc_pageout_blocked(void)
{
  if (!rc.pageout) return "TIERMALLOC_RECLAIM_PAGEOUT is off";
  int st = rc_swap_detect();
  rc.swap = st == 1;
  return st == 1 ? NULL : st == 0 ? "no swap is on" : "the cgroup's memory.swap.max is 0";
}

static const rc_room_t rc_no_bound = { UINT64_MAX, UINT64_MAX };

/* Bytes to demote from tier t now. used: its committed bytes (placement's
 * figure, live), what high is held in; held: the larger of used and its
 * pages as measured, what max is held in (huge pages over chunks'
 * uncommitted parts can put the pages above used: the hard limit takes that
 * back, the soft one does not drain a hysteresis for it). resident: its
 * pages in chunks reclaim may move, the figure protection is measured in.
 * extra: bytes of pages this process answers for of the cgroup's excess. */
uint64_t rc_demote_want(unsigned t, uint64_t elapsed_ns, uint64_t extra, uint64_t used,
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
     * be more than its committed bytes (a huge page) or fewer (untouched).
     * Its used counts what the kernel moved to it (handed, `used`). */
    uint64_t committed = used > tm_policy_used(t) ? used : tm_policy_used(t);
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
bool rc_more_now(unsigned t, bool hard_left)
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
uint64_t rc_pageable(const rc_scan_t *s, unsigned t)
{
  uint64_t floor = tm_budget_get(t, TM_LIMIT_MIN), low = tm_budget_get(t, TM_LIMIT_LOW);
  if (low > floor && !rc_short(t)) floor = low;
  if (floor == 0) return UINT64_MAX;
  return s->movable[t] > floor ? s->movable[t] - floor : 0;
}

/* Bytes of pages to page out of the lowest tier, whose pages (start-up
 * metadata's aside, as the budgets count) are `pages`. Its limits are held
 * in pages: pageout frees pages, not committed bytes. hard: what is over its
 * max, at once; soft: what is over its high - hysteresis, at the pageout
 * rate. Each less the room left in the budgets of the tiers above: the
 * process's budget as a whole is not spent, and nothing goes to swap while
 * memory it may use is free (the kernel's failure this avoids is swapping
 * with a tier nearly empty). */
rc_excess_t rc_lowest_excess(uint64_t pages)
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

/* ---- promotion ------------------------------------------------------------ */

/* c may move up or be exchanged down: the accessed bits measure it (a VMA
 * of its own, so moving it adds no VMA either), and it has not moved for
 * RC_COOLDOWN_TICKS. */
bool rc_settled(tm_chunk_t *c)
{
  return (atomic_load_explicit(&c->flags, memory_order_relaxed) & TM_CHUNK_SPLIT) &&
         tm_hotness_since_moved(c) >= RC_COOLDOWN_TICKS;
}

/* Bytes tier t may still take before it reaches its placement limit (the
 * smaller of high and max), less the hysteresis when `margin`: promotion
 * into free room stops short of what would make reclaim demote again; an
 * exchange, which leaves the tier's usage as it was, may fill it to the
 * limit. UINT64_MAX: unlimited. */
uint64_t rc_room_below_high(unsigned t, bool margin)
{
  uint64_t lim = tm_budget_placement_limit(t);
  if (lim == TM_BUDGET_UNLIMITED) return UINT64_MAX;
  uint64_t hyst = margin ? rc_hysteresis(lim) : 0, used = tm_policy_used(t);
  uint64_t target = lim > hyst ? lim - hyst : 0;
  return target > used ? target - used : 0;
}

/* An exchange moves a chunk of a lower tier up in place of one of the tier
 * above only when the one above is cold, or when their heats compare (both
 * graded, or both read from huge pages: tm_hotness_graded) and the lower
 * one's is four times the other's at least, and RC_EXCHANGE_MARGIN above
 * it (counted in TM_HOTNESS_HEAT_MAX). A heat is the share of a chunk's
 * pages seen in a window: how widely it is used, not how much; one very
 * hot object in a chunk of cold ones reads low. On bench/tier-quality's
 * zipfian heap, where every chunk is seen at every read, exchanges at
 * heats 1.3 to 3 times apart (a quarter apart was enough) moved 18-47 MiB
 * in 30 s and lost 0.03-0.11 of the accesses tier 0 served, which then
 * fell below first touch's per MiB; at four times, 2 MiB moved and the
 * share kept (0.34 at 25 %, 0.55 at 50 %). The VM's hot set beside chunks
 * read a little (one page in 16) is 16 times apart. */
#define RC_EXCHANGE_MARGIN 8u

static bool rc_may_replace(unsigned u, bool graded, tm_chunk_t *down)
{
  if (tm_hotness_cold(down)) return true;
  if (graded != tm_hotness_graded(down)) return false;
  unsigned d = tm_hotness_heat(down);
  return u > d + RC_EXCHANGE_MARGIN && u >= 4 * d;
}

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
unsigned rc_colder(unsigned t, unsigned u, bool graded, rc_pick_t *out, unsigned max)
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
unsigned rc_hottest(unsigned t, rc_pick_t *out, unsigned max)
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
 * the handed chunks' pages above go back, page by page and only as many as
 * the excess, the chunks staying handed (handback.h). With every node in one
 * kernel memory tier nothing is handed (the kernel would promote nothing:
 * tm_balancing_tiers_apart), said once. tiermalloc's own
 * promotion stops meanwhile: the kernel chooses. In the 2tier VM (6.12)
 * the kernel's scanner comes to the handed heap in its first two sequences
 * and then only about every 90 s (a VMA the scanning thread took no hint
 * fault in is scanned one a call, when no other is left): 1792 of 2048 hot
 * pages on tier 0 within 6 s, 2047 after about 100 s (bench/README,
 * "Handing the heap to NUMA balancing"). */

bool rc_hand_candidate(tm_chunk_t *c, unsigned t, uint64_t res)
{
  /* Tier 0's too while the kernel demotes: a page it demotes from one can
   * come back up on a hint fault. */
  if (!rc.hand || (t == 0 && !rc.kdemote)) return false;
  uint16_t f = atomic_load_explicit(&c->flags, memory_order_relaxed);
  uint64_t committed = tm_chunk_bytes(c);
  return !(f & (TM_CHUNK_HANDED | TM_CHUNK_KEEP | TM_CHUNK_PIN | TM_CHUNK_BASE)) && committed == TM_CHUNK_SIZE &&
         res * 4 >= committed * 3 && !tm_chunk_pieces_up(c) && tm_hotness_since_moved(c) >= RC_COOLDOWN_TICKS;
}

/* The kernel promotes a scan's hot pages in a burst: 15-36 MiB within 1-4 s
 * in the 2tier VM, where its reclaim, asked through memory.reclaim, demoted
 * 7-16 MiB a second, so tier 0 went 7-16 % over its high before it caught
 * up (bench/README, "The kernel's bursts against its own reclaim"). Its
 * promotions are let in up to half the hysteresis above high, room for the
 * exchange its LRU makes (hot pages up, the coldest down), and held off
 * above that, and above max, until tier 0 is back at its high (its max):
 * the hot pages faulting meanwhile wait for the scanner's next pass, so only
 * with TIERMALLOC_NUMA_BALANCING_HOLD (the VM test of demotions undone saw
 * none in 3 of 5 runs with it on: bench/README). At most
 * RC_HOLD_MAX_NS, then not again until tier 0 is below where it began:
 * what reclaim cannot bring back by then is not the kernel's promotions
 * (under the kernel's demotion tier 0 counts every anonymous page of the
 * cgroup there; in the 2tier VM a 4 MiB high held for good starved the heap,
 * 1.5 MiB of it on node0 under a hot set of 8). `held` is the heap's part
 * (the caller's): the rest of tier 0 is no promotion of the kernel's. */
bool rc_hold_wanted(uint64_t held, uint64_t now)
{
  if (!tm_option(TM_OPTION_NUMA_BALANCING_HOLD)->num) return false;
  uint64_t high = tm_budget_get(0, TM_LIMIT_HIGH), max = tm_budget_get(0, TM_LIMIT_MAX);
  uint64_t on = high == TM_BUDGET_UNLIMITED ? TM_BUDGET_UNLIMITED : high + rc_hysteresis(high) / 2;
  uint64_t off = high;
  if (max < on) on = max;
  if (max < off) off = max;
  if (on == TM_BUDGET_UNLIMITED) return false;
  if (rc.holding) {
    if (held <= off) return false;
    if (now - rc.hold_since <= RC_HOLD_MAX_NS) return true;
    rc.hold_spent = true;
    return false;
  }
  if (rc.hold_spent && held <= on) rc.hold_spent = false;
  return !rc.hold_spent && held > on;
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

void rc_sample_pieces(void)
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
