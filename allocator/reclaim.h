/*
 * reclaim: holds each tier's watermarks (budget.h) by moving memory that is
 * already there; placement (policy.c) only steers new memory. It decides;
 * migrate.c moves and verifies; hotness.c says what is cold; background.c
 * runs the passes on the library's reclaim thread.
 *
 * A full pass runs every period: RECLAIM_PERIOD_MIN_MS while a tier is over
 * a watermark, doubling up to RECLAIM_PERIOD_MAX_MS while none is. Between
 * passes the thread sleeps until a write to memory.high or memory.max of
 * the cgroup or of one of its three nearest ancestors wakes it (watch.h),
 * and the budgets are then derived again; also every RC_REFRESH periods (a
 * move to another cgroup). Without inotify it wakes four times a period to
 * read the cgroup's own two (held open, with pread), and derives the
 * budgets every RC_REFRESH_POLLED periods for the ancestors'. Each wake also
 * checks the counters (a tier's used against its high and max, the cgroup's
 * memory.current against its limit).
 * A full pass:
 *   - measures, per chunk, its tier, its commit age and its resident pages
 *     (mincore, 16 chunks a call), summed per tier;
 *   - for each tier but the lowest, top first, compares `used` (its
 *     committed bytes) with high, and what it holds (the larger of used and
 *     its pages as measured: huge pages can cover uncommitted parts) with
 *     max:
 *       above max: demotes the coldest chunks to the next tier down until
 *         it holds <= max, at once;
 *       above high (mode always; mode pressure only while the tier's nodes
 *         are short of free memory): demotes until it holds <= high -
 *         hysteresis, at most RECLAIM_RATE bytes a second;
 *       never below min (neither its pages nor its used); below low only
 *         while the nodes are short;
 *     what a tier receives counts on it in the same pass, so an overfull
 *     middle tier passes its coldest on down;
 *   - shares a cgroup's budget with the other processes in it: when the
 *     budget came from the cgroup (v2) and the cgroup's anonymous memory on
 *     the tier's nodes (memory.numa_stat) is above the limit while other
 *     processes hold part of it, this one demotes its share of the excess,
 *     in proportion to its own resident bytes there (at the same rate, and
 *     within the same protection);
 *   - pages out (MADV_PAGEOUT) the coldest chunks of the lowest tier while its
 *     pages (start-up metadata aside) are above its max (at once) or its
 *     high (down to high - hysteresis, at RECLAIM_PAGEOUT_RATE) by more than
 *     the room left in the budgets of the tiers above (swap only once the
 *     whole budget is spent), and, when the cgroup as a whole is within the
 *     hysteresis of its memory.high or memory.max, this process's share of
 *     the excess from the lowest tier up (at the rate); never below a tier's
 *     min (nor its low unless its nodes are short); only when there is swap
 *     (said once when there is none; nothing is then counted). A lowest tier
 *     above its max that cannot be paged out (no swap, pageout off) is said
 *     once, and the stats show "max not held" until it is held again;
 *   - keeps the VMAs it creates (each run of chunks bound away from its range's
 *     tier) under half of vm.max_map_count: past that it only moves chunks
 *     next to one already on the target tier.
 * Chunks marked TM_CHUNK_KEEP (pinned arenas, start-up metadata) are never
 * moved. Nothing here runs on the malloc fast path; nothing here allocates or
 * calls into jemalloc.
 *
 * The files, one job each: reclaim.c runs the pass (the order of its steps,
 * when one is due, the waits, the stats); reclaim_measure.c says what it
 * sees (chunks by tier and rank, pages above their chunk's tier, swap);
 * reclaim_cgroup.c reads the cgroup (its files held open, its limits
 * watched, the budgets derived again, this process's share of its excess);
 * reclaim_decide.c decides what moves (how much each tier gives and takes,
 * which chunks); reclaim_move.c moves it, through migrate.c, and
 * handback.c gives back, page by page, what the kernel's NUMA balancing
 * promoted of handed chunks; reclaim_state.h holds what they share
 * (RC_REFRESH and RC_REFRESH_POLLED are reclaim_cgroup.c's).
 */
#ifndef TM_RECLAIM_H
#define TM_RECLAIM_H

#include <stdbool.h>
#include <stdint.h>

#include "budget.h"
#include "tiermalloc.h"
#include "topology.h"

/* Reads the options, and resets the counters; start-up, after the budgets.
 * root: where /sys and /proc are read ("" for the running system, or a
 * fixture tree): node meminfo, /proc/swaps, vm.max_map_count. */
void tm_reclaim_init(const tm_topology_t *topo, const char *root);

/* Some limit can be crossed now (a finite high or max on a tier reclaim acts
 * on) and TIERMALLOC_RECLAIM is not off: the thread is worth running. */
bool tm_reclaim_needed(void);

/* One pass; returns the nanoseconds to wait before the next: 0 when more
 * can be demoted now (a tier still above max, or draining above high within
 * the rate, after a pass that demoted; or the accessed bits demotion waited
 * for were just read). Only the reclaim thread calls it. */
uint64_t tm_reclaim_pass(void);

/* A write to a watched limit file woke the thread (watch.h): the next pass
 * derives the budgets again. */
void tm_reclaim_woken(void);
/* The thread stopped (tm_reclaim_pass is not being called). */
void tm_reclaim_stopped(void);

/* Fills the reclaim fields of *s. */
void tm_reclaim_stats(tier_stats_t *s);

/* Fork child: no reclaim thread; its counters start from zero. */
void tm_reclaim_postfork_child(void);

#endif
