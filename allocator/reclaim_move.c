/*
 * reclaim_move: the moves a pass makes, through migrate.c, and their
 * counts: demotion and pageout, promotion and exchanges, pieces up, strays
 * back to their tier, chunks handed to NUMA balancing. What moves is
 * reclaim_decide.c's.
 */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "balancing.h"
#include "chunkmap.h"
#include "clock.h"
#include "handback.h"
#include "hotness.h"
#include "kfile.h"
#include "log.h"
#include "migrate.h"
#include "notify.h"
#include "options.h"
#include "range.h"
#include "reclaim_state.h"

/* ---- acting --------------------------------------------------------------- */

/* Counts a move of c from tier `from` to `to` that migrate.c reported in *n
 * (down: demoted and failed on `from`; up: promoted on `to`) and stamps it
 * moved, for promotion's cool-down. */
static void rc_moved(tm_chunk_t *c, unsigned from, unsigned to, const tm_migrate_counts_t *n)
{
  if (to > from) {
    rc_add(&rc_demoted[from], n->moved);
    rc_add(&rc_failed[from], n->failed);
    tm_handback_moved();
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
 * the bytes done. It chooses as it moves: the order is rc_rank's
 * (reclaim_measure.c), how much and within what room the pass's
 * (rc_demote_want, rc_lowest_excess, rc_pageable: reclaim_decide.c). */
uint64_t rc_act(rc_scan_t *s, unsigned t, uint64_t want, rc_room_t room, bool pageout,
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

/* ---- promotion ------------------------------------------------------------ */

/* Room under tier t's high for `bytes` of heat u (graded or not) coming
 * from below: what is there below high less the hysteresis, or what
 * demoting to t+1 the colder chunks of t that it may replace makes below
 * high itself (rc_colder; one at least, a few: chunks hold different
 * amounts), none unless those found make enough room: an exchange that cannot finish moves
 * nothing. An exchange demotes as much as it promotes, not the hysteresis
 * too: counted from high less the hysteresis, the first exchange into a
 * tier placement had filled to its high took four chunks down for one up
 * (bench/tier-quality's zipfian heap at 25 %: 7.4 MiB of tier 0 demoted in
 * 2.5 s, a fifth of the accesses it served lost with them). RC_ROOM_STOP
 * when a move failed. */
typedef enum { RC_ROOM_NONE, RC_ROOM_MADE, RC_ROOM_STOP } rc_room_made_t;

static rc_room_made_t rc_make_room(unsigned t, uint64_t bytes, unsigned u, bool graded)
{
  if (rc_room_below_high(t, true) >= bytes) return RC_ROOM_MADE;
  uint64_t room = rc_room_below_high(t, false);
  rc_pick_t cold[4];
  unsigned nc = rc_colder(t, u, graded, cold, 4), k = 0;
  uint64_t freed = 0;
  while (k < nc && (k == 0 || room + freed < bytes)) freed += cold[k++].bytes;
  if (k == 0 || room + freed < bytes) return RC_ROOM_NONE;
  for (unsigned j = 0; j < k; j++) {
    tm_migrate_counts_t n = {0};
    unsigned to = tm_chunk_tier(cold[j].c) > t ? tm_chunk_tier(cold[j].c) : t + 1;   /* pieces: back down */
    if (tm_migrate_chunk(cold[j].c, to, &n) != 0) return RC_ROOM_STOP;
    rc_moved(cold[j].c, t, to, &n);
  }
  return rc_room_below_high(t, false) >= bytes ? RC_ROOM_MADE : RC_ROOM_STOP;
}

/* Moves the hot chunks of tier t (>= 1) up to t-1, the hottest first (of
 * RC_PICK_MAX a pass), at most `want` bytes: into the room under t-1's high,
 * or in exchange for colder chunks of t-1 (rc_make_room; demoted to t
 * first, so the tier's usage stays as it was and its min and low are kept).
 * None that moved in the last RC_COOLDOWN_TICKS moves, and a chunk that
 * failed to move waits as long. Returns the bytes promoted. */
uint64_t rc_promote(unsigned t, uint64_t want)
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

uint64_t rc_promote_pieces(uint64_t want)
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

/* ---- handing chunks to the kernel's NUMA balancing --------------------------
 * Why and which: reclaim_decide.c, above rc_hand_candidate. */

/* Whether to hand chunks now: the option, and the kernel's mode read again
 * at most once a second (an administrator may switch it). */
void rc_hand_update(uint64_t now)
{
  if (rc.hand_read_ns && now - rc.hand_read_ns < 1000000000ull) return;
  rc.hand_read_ns = now;
  int mode = tm_balancing_mode(rc.root);
  bool want = tm_option(TM_OPTION_NUMA_BALANCING)->num == 1 && !rc.hand_refused && rc.ntiers > 1 && mode > 0 &&
              (mode & 2) && tm_range_os()->hand != NULL;
  /* The kernel's tiering mode promotes only from nodes it ranks below its
   * top tier: with every node in one kernel memory tier it would promote
   * nothing, and handed chunks' new pages would go to tier 0's nodes. */
  bool apart = tm_balancing_tiers_apart(rc.topo) != 0;
  if (want && !apart && !rc.hand_one_tier_said) {
    rc.hand_one_tier_said = true;
    tm_warn("TIERMALLOC_NUMA_BALANCING=tiering: the kernel puts every node in one memory tier, so its tiering mode "
            "promotes nothing to tier 0; the heap is not handed over, and tiermalloc's own promotion goes on");
  }
  rc.hand = want && apart;
  atomic_store_explicit(&rc_handing, rc.hand, memory_order_relaxed);
  /* With the heap handed, the kernel's own demotion holds tier 0 where it
   * can: its hint faults choose what goes up, its LRU what comes down. */
  const char *why = rc.hand ? rc_cgroup_demote_blocked() : "the heap is not handed to NUMA balancing";
  rc.kdemote = why == NULL;
  atomic_store_explicit(&rc_kdemoting, rc.kdemote, memory_order_relaxed);
  if (rc.hand && (int)rc.kdemote != rc.kdemote_said) {
    rc.kdemote_said = rc.kdemote;
    if (tm_option(TM_OPTION_VERBOSE)->num) {
      if (why) tm_warn("numa balancing: tier 0 held by tiermalloc's moves: %s", why);
      else tm_warn("numa balancing: tier 0 held by the kernel's own demotion (the cgroup's memory.reclaim)");
    }
  }
}

/* Asks the kernel (rc_cgroup_demote), with a look at handback's sample
 * after (and before, when reclaim moved pages down itself since): what left
 * tier 0 since, the kernel demoted. */
uint64_t rc_kernel_demote(uint64_t want)
{
  tm_handback_look(tm_clock_ns(CLOCK_MONOTONIC), TM_HANDBACK_BEFORE);
  uint64_t down = rc_cgroup_demote(want);
  tm_handback_look(tm_clock_ns(CLOCK_MONOTONIC), TM_HANDBACK_AFTER);
  rc_add(&rc_demoted[0], down);
  rc_add(&rc_kdemoted, down);
  return down;
}

/* Hands the chunks this pass found ready (rc_hand_candidate). */
void rc_hand(const rc_scan_t *s)
{
  for (unsigned i = 0; i < s->nhand && rc.hand; i++) {
    tm_chunk_t *c = s->hand[i];
    int err = tm_migrate_hand(c, &rc.hand_nodes[tm_chunk_tier(c)], !rc.holding);
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

void rc_hold_kernel(bool hold)
{
  if (hold == rc.holding && !rc.hold_left) return;
  bool left = false;
  for (unsigned i = 0; i < tm_ranges.n; i++)
    for (uintptr_t a = tm_range_lo(i); a < tm_range_end(i); a += TM_CHUNK_SIZE) {
      tm_chunk_t *c = tm_chunk_of((void *)a);
      if (!(atomic_load_explicit(&c->flags, memory_order_relaxed) & TM_CHUNK_HANDED)) continue;
      /* Busy (a move, or its emptying, which unhands it): again next time. */
      if (tm_migrate_hand(c, &rc.hand_nodes[tm_chunk_tier(c)], !hold) == EBUSY) left = true;
    }
  if (hold && !rc.holding) {
    rc_add(&rc_kholds, 1);
    rc.hold_since = tm_clock_ns(CLOCK_MONOTONIC);
  }
  rc.holding = hold;
  rc.hold_left = left;
}

/* ---- strays --------------------------------------------------------------- */

/* rc_measure collected them: chunks marked stray by rc_stray_scan, and
 * pinned chunks below tier 0. */
bool rc_move_strays(const rc_scan_t *s)
{
  bool down = false;
  for (unsigned i = 0; i < s->nstray; i++) {
    tm_migrate_counts_t n = {0};
    tm_chunk_t *c = s->stray[i];
    unsigned t = tm_chunk_tier(c);
    if (atomic_load_explicit(&c->flags, memory_order_relaxed) & TM_CHUNK_PIN) {
      if (t != 0 && tm_migrate_chunk(c, 0, &n) == 0) rc_moved(c, t, 0, &n);
      continue;
    }
    if (t > 0 && tm_migrate_chunk(c, t, &n) == 0) {
      rc_add(&rc_demoted[t - 1], n.moved);
      rc_add(&rc_failed[t - 1], n.failed);
      if (n.moved) down = true;
    }
  }
  return down;
}

uint64_t rc_give_back(unsigned t, uint64_t want, uint64_t now)
{
  uint64_t failed = 0, back = tm_handback_give(t, want, now, &failed);
  rc_add(&rc_demoted[t], back);
  rc_add(&rc_failed[t], failed);
  rc.up_to[t] -= back < rc.up_to[t] ? back : rc.up_to[t];
  return back;
}
