/*
 * reclaim: the pass, and reclaim.h's API: the order of a pass's steps, when
 * one is due, how long the thread waits between them, its CPU time, and the
 * stats. What a pass sees, decides and moves is in the other reclaim files
 * (reclaim.h).
 */
#include "reclaim.h"

#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "budget.h"
#include "chunkmap.h"
#include "clock.h"
#include "handback.h"
#include "hotness.h"
#include "kfile.h"
#include "log.h"
#include "migrate.h"
#include "options.h"
#include "policy.h"
#include "reclaim_state.h"
#include "site.h"
#include "text.h"
#include "watch.h"

rc_t rc;

/* Written by the reclaim thread only, read by stats. */
_Atomic uint64_t rc_demoted[TIER_MAX_TIERS], rc_promoted[TIER_MAX_TIERS], rc_paged[TIER_MAX_TIERS],
    rc_failed[TIER_MAX_TIERS], rc_passes, rc_cpu_ns;
_Atomic int rc_state;
_Atomic bool rc_unheld;
_Atomic bool rc_handing;
_Atomic bool rc_kdemoting;
_Atomic uint64_t rc_kdemoted;
_Atomic uint64_t rc_kholds;

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
  rc.hand = false;
  tm_handback_reset();
  rc.hand_read_ns = 0;
  memset(rc.up_from, 0, sizeof rc.up_from);
  memset(rc.up_to, 0, sizeof rc.up_to);
  memset(rc.down_from, 0, sizeof rc.down_from);
  memset(rc.down_to, 0, sizeof rc.down_to);
  rc.kdemote = false;
  rc.kdemote_said = -1;
  atomic_store_explicit(&rc_handing, false, memory_order_relaxed);
  atomic_store_explicit(&rc_kdemoting, false, memory_order_relaxed);
  atomic_store_explicit(&rc_kdemoted, 0, memory_order_relaxed);
  atomic_store_explicit(&rc_kholds, 0, memory_order_relaxed);
  rc.holding = rc.hold_left = rc.hold_spent = false;
  rc.kother = 0;
  atomic_store_explicit(&rc_unheld, false, memory_order_relaxed);
  atomic_store_explicit(&rc_passes, 0, memory_order_relaxed);
  atomic_store_explicit(&rc_cpu_ns, 0, memory_order_relaxed);
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

/* What tier 0 holds while the kernel demotes: the cgroup's anonymous
 * memory on its nodes (memory.numa_stat: one small read, no page-table
 * walk), which is what the kernel's reclaim takes from, the process being
 * alone in it. False when it cannot be read. */
static bool rc_kernel_held(uint64_t *held)
{
  uint64_t anon[TIER_MAX_TIERS];
  if (!rc_cgroup_anon(anon)) return false;
  *held = anon[0];
  return true;
}

/* Between passes while the kernel demotes: its promotions come in bursts
 * (a scan's worth of hint faults within a second), so tier 0 is looked at
 * every RECLAIM_PERIOD_MIN_MS, at the cost of one read of memory.numa_stat,
 * and what a pass would ask of the kernel (rc_demote_want: the watermarks,
 * the mode, protection and the rate) is asked at once. */
static void rc_kernel_watch(void)
{
  uint64_t held, hard;
  rc_room_t room;
  bool over = false;
  uint64_t now = tm_clock_ns(CLOCK_MONOTONIC);
  tm_handback_look(now, TM_HANDBACK_TICK);   /* demotions undone */
  if (!rc_kernel_held(&held)) return;
  /* Before the ask (its reclaim takes time); on the heap's part: what else
   * the cgroup holds there is no promotion of the kernel's. */
  rc_hold_kernel(rc_hold_wanted(held > rc.kother ? held - rc.kother : 0, now));
  uint64_t want = rc_demote_want(0, 0, 0, held, held, held, &room, &over, &hard);
  if (want > room.pages) want = room.pages;
  if (want == 0) return;
  uint64_t done = rc_kernel_demote(want);
  rc.allowance[0] = rc.allowance[0] > done ? rc.allowance[0] - done : 0;
  if (done) atomic_store_explicit(&rc_state, TIER_RECLAIM_DEMOTING, memory_order_relaxed);
}

static uint64_t rc_wait(uint64_t now)
{
  uint64_t wait = rc_wait_pass(now), due = tm_hotness_read_due();
  if (rc.kdemote && wait > rc.period_min) wait = rc.period_min;   /* rc_kernel_watch */
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

uint64_t tm_reclaim_pass(void)
{
  uint64_t now = tm_clock_ns(CLOCK_MONOTONIC);
  if (!rc.cpu_seen) rc.cpu_seen = tm_clock_ns(CLOCK_THREAD_CPUTIME_ID);
  tm_hotness_tick();
  if (rc_budgets_stale(now)) rc_refresh(now);
  if (rc.last_full_ns && !rc_due(now)) {
    if (rc.kdemote) rc_kernel_watch();
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
  if (rc_move_strays(&s)) {
    state = TIER_RECLAIM_DEMOTING;
    over = true;   /* look again soon: more may have landed meanwhile */
  }
  tm_handback_check(now);
  for (unsigned t = 0; t + 1 < rc.ntiers; t++) {
    uint64_t extra = shared && rc_shared(t) ? rc_shared_excess(t, anon, &s) : 0;
    rc_room_t room;
    /* Handed chunks' pages the kernel moved up are used where they are; with
     * the kernel demoting, tier 0 is what it holds, wherever the chunks. */
    bool kernel = t == 0 && rc.kdemote;
    uint64_t used = tm_policy_used(t) + (rc.hand ? rc.up_to[t] : 0);
    if (kernel && !rc_kernel_held(&used)) used = s.budgeted[0];   /* the heap's pages there, as measured */
    if (kernel) rc.kother = used > s.budgeted[0] ? used - s.budgeted[0] : 0;
    if (t == 0 && rc.hand) rc_hold_kernel(rc_hold_wanted(kernel ? used - rc.kother : used, now));
    uint64_t held = kernel || s.budgeted[t] <= used ? used : s.budgeted[t];
    uint64_t hard;
    uint64_t want = rc_demote_want(t, elapsed, extra, used, held, kernel ? used : s.movable[t], &room, &over, &hard);
    if (want == 0) continue;
    /* The kernel's LRU chooses, page by page, among all of tier 0's pages,
     * within the protection (min, low); what it did not demote, reclaim's
     * own moves do below. */
    uint64_t by_kernel = kernel ? rc_kernel_demote(want < room.pages ? want : room.pages) : 0;
    if (by_kernel >= want) {
      rc.allowance[t] = rc.allowance[t] > by_kernel ? rc.allowance[t] - by_kernel : 0;
      state = TIER_RECLAIM_DEMOTING;
      atomic_store_explicit(&rc_state, state, memory_order_relaxed);
      continue;
    }
    want -= by_kernel;
    hard = hard > by_kernel ? hard - by_kernel : 0;
    if (room.pages != UINT64_MAX) room.pages = room.pages > by_kernel ? room.pages - by_kernel : 0;
    if (room.bytes != UINT64_MAX) room.bytes = room.bytes > by_kernel ? room.bytes - by_kernel : 0;
    /* Above high, a chunk the accessed bits saw in the last interval waits
     * for their next read after the tier went over: the data the program
     * wrote just before (filled once, never read again) was seen too, and
     * only that read tells it from the data it reads all the time. Above
     * max nothing waits. */
    if (rc.draining[t] && !rc.drain_read[t]) rc.drain_read[t] = tm_hotness_read_after(rc.drain_tick[t]);
    bool wait = rc.draining[t] && !rc.drain_read[t];
    uint64_t done = rc_act(&s, t, want, room, false, wait ? hard : UINT64_MAX);
    /* None of its own left to give: the pages of handed chunks the kernel
     * promoted go back, page by page, as many as the excess (handback.h). */
    uint64_t left = wait ? (hard > done ? hard - done : 0) : want - done;
    if (rc.hand && left && rc.up_to[t]) done += rc_give_back(t, left, now);
    done += by_kernel;
    if (wait && done < want) rc.want_bits = true;
    rc.allowance[t] = rc.allowance[t] > done ? rc.allowance[t] - done : 0;
    if (done && rc_more_now(t, hard > done)) again = true;
    if (done) state = TIER_RECLAIM_DEMOTING;
    atomic_store_explicit(&rc_state, state, memory_order_relaxed);
  }
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
  s->numa_balancing_demotes = atomic_load_explicit(&rc_kdemoting, memory_order_relaxed);
  s->kernel_held = atomic_load_explicit(&rc_kholds, memory_order_relaxed);
  s->kernel_demoted = atomic_load_explicit(&rc_kdemoted, memory_order_relaxed);
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
  /* Its handed chunks may be held (the parent's policies, where the hold is
   * on): the child's first look lets them in again unless it holds them. */
  rc.hold_left = tm_option(TM_OPTION_NUMA_BALANCING_HOLD)->num != 0;
  tm_reclaim_stopped();
}
