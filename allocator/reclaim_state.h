/*
 * reclaim_state: what the reclaim files (reclaim*.c, reclaim.h says which
 * holds which job) share, and what nothing else includes: reclaim's state
 * (rc, its counters: defined in reclaim.c), what a pass measures and hands
 * from step to step, and the functions one of them calls in another.
 */
#ifndef TM_RECLAIM_STATE_H
#define TM_RECLAIM_STATE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "budget.h"
#include "chunkmap.h"
#include "hotness.h"
#include "kfile.h"
#include "nodemask.h"
#include "options.h"
#include "tiermalloc.h"
#include "topology.h"

enum { RC_ALWAYS, RC_PRESSURE, RC_OFF };   /* TIERMALLOC_RECLAIM, in the table's order */
#define RC_BUCKETS 16                       /* ages by powers of two: 0, 1, 2-3, 4-7 ... ticks */
#define RC_HEAT_RANKS 8                     /* chunks the accessed bits saw, by heat (rc_rank) */
#define RC_RANKS (RC_HEAT_RANKS + RC_BUCKETS)
#define RC_MS 1000000ull

/* How often numa_maps is read for pages above their chunks' tier, at the
 * most and at the least (rc_stray_scan). */
#define RC_STRAY_SCAN_NS 1000000000ull
#define RC_STRAY_SCAN_MAX_NS 4000000000ull

/* A chunk stays where reclaim last moved it, up or down, at least this long
 * before promotion or an exchange moves it again, or it is handed to the
 * kernel's NUMA balancing: nothing ping-pongs. */
#define RC_COOLDOWN_TICKS (10000u / TM_HOTNESS_TICK_MS)
#define RC_HOLD_MAX_NS 2000000000ull   /* the kernel's promotions held off at most this long (rc_hold_wanted) */

/* Reclaim's state, one a process (defined in reclaim.c). */
typedef struct rc_s {
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
  bool hand_one_tier_said;                     /* one kernel memory tier: said once that nothing is handed */
  uint64_t hand_read_ns;                       /* when the mode was last read */
  uint64_t up_from[TIER_MAX_TIERS];            /* bytes of handed tier-t chunks on faster tiers, last read */
  uint64_t up_to[TIER_MAX_TIERS];              /* the same bytes, by the tier they are on */
  uint64_t down_from[TIER_MAX_TIERS];          /* bytes of tier-t chunks on slower tiers, last read */
  uint64_t down_to[TIER_MAX_TIERS];            /* the same bytes, by the tier they are on */
  /* Tier 0 held by the kernel's own demotion (rc_cgroup_demotes): reclaim
   * asks the kernel's reclaim, through the cgroup's memory.reclaim, for tier
   * 0's excess, and the kernel demotes the pages its LRU finds coldest. */
  bool kdemote;                                /* on now */
  int kdemote_said;                            /* the state last said (-1: none yet) */
  tm_nodemask_t hand_nodes[TIER_MAX_TIERS];    /* tier t's nodes and every faster tier's */
  bool holding;                                /* the handed chunks bound without the flag (rc_hold_kernel) */
  bool hold_left;                              /* some were busy at the last change: done again */
  uint64_t hold_since;                         /* when the hold began */
  bool hold_spent;                             /* it ran out: none again until tier 0 is under its start */
  uint64_t kother;                             /* tier 0's anonymous bytes outside the heap, at the last pass */
} rc_t;
extern rc_t rc;

/* Written by the reclaim thread only, read by stats. */
extern _Atomic uint64_t rc_demoted[TIER_MAX_TIERS], rc_promoted[TIER_MAX_TIERS],
    rc_paged[TIER_MAX_TIERS], rc_failed[TIER_MAX_TIERS], rc_passes, rc_cpu_ns;
extern _Atomic int rc_state;
extern _Atomic bool rc_unheld;   /* the lowest tier is above its max, and nothing can be paged out */
extern _Atomic bool rc_handing;  /* rc.hand, for the stats */
extern _Atomic bool rc_kdemoting;  /* rc.kdemote, for the stats */
extern _Atomic uint64_t rc_kdemoted;   /* bytes the kernel demoted when reclaim asked */
extern _Atomic uint64_t rc_kholds;     /* times the kernel's promotions were held off */

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

/* What protection lets leave a tier, in both of the figures a tier's hold
 * is measured in: resident pages of its movable chunks, and committed bytes
 * (used). UINT64_MAX: no bound. */
typedef struct rc_room_s {
  uint64_t pages, bytes;
} rc_room_t;

/* Chunks ranked for promotion and exchange. */
typedef struct {
  tm_chunk_t *c;
  unsigned heat, age;
  uint32_t bytes;
} rc_pick_t;

#define RC_PICK_MAX 8u

/* What the lowest tier is over by, in pages (rc_lowest_excess): hard, at
 * once; soft, at the pageout rate. */
typedef struct rc_excess_s {
  uint64_t hard, soft;
} rc_excess_t;

/* *v += n, as two relaxed accesses: only the reclaim thread writes v. */
static inline void rc_add(_Atomic uint64_t *v, uint64_t n)
{
  atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + n,
                        memory_order_relaxed);
}

/* The hysteresis of a limit: RECLAIM_HYSTERESIS of it, at least one chunk. */
static inline uint64_t rc_hysteresis(uint64_t limit)
{
  uint64_t h = tm_option_size(TM_OPTION_RECLAIM_HYSTERESIS, limit);
  return h < TM_CHUNK_SIZE ? TM_CHUNK_SIZE : h;
}

/* Adds to *allowance what `rate` allows over elapsed_ns, up to one
 * idle period's worth (and at least a chunk, or a slow rate never moves). */
static inline void rc_accrue(uint64_t *allowance, uint64_t rate, uint64_t elapsed_ns)
{
  uint64_t burst = (uint64_t)((unsigned __int128)rate * rc.period_max / 1000000000u);
  if (burst < TM_CHUNK_SIZE) burst = TM_CHUNK_SIZE;
  *allowance += (uint64_t)((unsigned __int128)rate * elapsed_ns / 1000000000u);
  if (*allowance > burst) *allowance = burst;
}

/* c is a chunk below tier 0 with pieces up on tier 0 (chunkmap.h: only a
 * chunk below has a record). */
static inline bool rc_has_pieces_up(tm_chunk_t *c)
{
  return tm_chunk_tier(c) != 0 && tm_chunk_pieces_up(c);
}

/* c holds committed bytes and is neither kept nor pinned: reclaim may move it. */
static inline bool rc_movable(tm_chunk_t *c)
{
  return tm_chunk_bytes(c) != 0 &&
         !(atomic_load_explicit(&c->flags, memory_order_relaxed) & (TM_CHUNK_KEEP | TM_CHUNK_PIN));
}

/* ---- reclaim_measure.c: what a pass sees ---------------------------------- */

/* The order demotion and pageout take c in, the highest first (< RC_RANKS). */
unsigned rc_rank(tm_chunk_t *c);
/* One sweep of the chunk map into *s: pages by tier, movable chunks by rank,
 * the strays to move and the chunks to hand at this pass. */
void rc_measure(rc_scan_t *s);
/* Bytes reclaim has moved below tier 0, less those it moved up. */
int64_t rc_own_below(void);
/* Reads numa_maps when due: marks stray the chunks with pages above their
 * tier, and counts handed chunks' pages there (rc.up_from, rc.up_to). */
void rc_stray_scan(uint64_t now);
/* 1: swap is on; 0: no swap; 2: the cgroup may not swap. */
int rc_swap_detect(void);

/* ---- reclaim_cgroup.c: the cgroup ------------------------------------------ */

/* A cgroup v2 value file of the process's cgroup into *v (TM_CGROUP_UNLIMITED
 * for "max"); false when it cannot be read. */
bool rc_cgroup_value(const char *file, uint64_t *v);
/* The budget of tier t came from the cgroup, which other processes share. */
bool rc_shared(unsigned t);
/* Another process is in the cgroup too. */
bool rc_cgroup_has_others(void);
/* The cgroup's anonymous bytes by tier into anon[TIER_MAX_TIERS]; false when
 * memory.numa_stat cannot be read. */
bool rc_cgroup_anon(uint64_t *anon);
/* Bytes this process demotes from tier t as its share of the cgroup's
 * excess there (anon: rc_cgroup_anon's); 0 when it is not over or alone. */
uint64_t rc_shared_excess(unsigned t, const uint64_t *anon, const rc_scan_t *s);
/* The cgroup is within the hysteresis of its limit: its memory.current into
 * *cur, by how much it is over limit - hysteresis into *over. */
bool rc_cgroup_near(uint64_t *cur, uint64_t *over);
/* Why the kernel's own demotion cannot hold tier 0 for this process, or
 * NULL when it can: not in secure execution, demotion_enabled, the cgroup's
 * memory.reclaim writable,
 * the process alone in a cgroup of its own (the kernel's reclaim takes from
 * the whole cgroup), and no swap for it (else memory.reclaim would page out
 * the lowest tier too, within its limits). */
const char *rc_cgroup_demote_blocked(void);
/* Asks the kernel's reclaim for `want` bytes of the cgroup through its
 * memory.reclaim; returns the bytes it demoted (the cgroup's pgdemote_direct
 * before and after; `want` when it succeeded and memory.stat does not count
 * demotions), 0 when it failed. */
uint64_t rc_cgroup_demote(uint64_t want);
/* Bytes this process pages out as its share of the cgroup near its limit. */
uint64_t rc_cgroup_pageout(const rc_scan_t *s);
/* The budgets should be derived again (a period count, or a limit changed). */
bool rc_budgets_stale(uint64_t now);
/* Derives the budgets again; the cgroup's files held and watched anew. */
void rc_refresh(uint64_t now);

/* ---- reclaim_decide.c: what moves ------------------------------------------- */

/* Why nothing can be paged out now, or NULL when pageout can act. */
const char *rc_pageout_blocked(void);
/* Bytes to demote from tier t now, within *room (protection); *over set
 * when it is more than 0, *hard how far the tier is above max. */
uint64_t rc_demote_want(unsigned t, uint64_t elapsed_ns, uint64_t extra, uint64_t used,
                        uint64_t held, uint64_t resident, rc_room_t *room, bool *over,
                        uint64_t *hard);
/* After a pass that demoted from tier t: more can go now. */
bool rc_more_now(unsigned t, bool hard_left);
/* Resident bytes of tier t that pageout may take (UINT64_MAX: all). */
uint64_t rc_pageable(const rc_scan_t *s, unsigned t);
/* Pages to page out of the lowest tier, which holds `pages`. */
rc_excess_t rc_lowest_excess(uint64_t pages);
/* c may move up or be exchanged down (its own VMA, its cool-down over). */
bool rc_settled(tm_chunk_t *c);
/* Bytes tier t may still take under its placement limit less the
 * hysteresis; UINT64_MAX: unlimited. */
uint64_t rc_room_below_high(unsigned t, bool margin);
/* The chunks of tier t that heat u (graded or not) may replace, the coldest
 * first: up to max into out[]; returns how many. */
unsigned rc_colder(unsigned t, unsigned u, bool graded, rc_pick_t *out, unsigned max);
/* The chunks of tier t to move up, the hottest first: up to max into out[];
 * returns how many. */
unsigned rc_hottest(unsigned t, rc_pick_t *out, unsigned max);
/* c, of tier t with res bytes resident, is to be handed to NUMA balancing. */
bool rc_hand_candidate(tm_chunk_t *c, unsigned t, uint64_t res);
/* Whether the kernel's promotions into the handed heap are to be held off
 * now that tier 0 holds `held` bytes (rc.holding: whether they are). */
bool rc_hold_wanted(uint64_t held, uint64_t now);
/* Chooses the chunks the next read of the accessed bits reads per piece. */
void rc_sample_pieces(void);

/* ---- reclaim_move.c: moving it ---------------------------------------------- */

/* Demotes (or pages out) up to `want` bytes of tier t's chunks, by rank,
 * within room; returns the bytes done. */
uint64_t rc_act(rc_scan_t *s, unsigned t, uint64_t want, rc_room_t room, bool pageout,
                uint64_t seen_until);
/* Moves up to `want` bytes of tier t's hottest chunks up to t-1; returns the
 * bytes promoted. */
uint64_t rc_promote(unsigned t, uint64_t want);
/* After a read of the accessed bits: moves up to `want` bytes of the pieces
 * it saw up to tier 0; returns the bytes promoted. */
uint64_t rc_promote_pieces(uint64_t want);
/* Whether chunks are handed to NUMA balancing now (rc.hand). */
void rc_hand_update(uint64_t now);
/* Hands the chunks *s found ready. */
void rc_hand(const rc_scan_t *s);
/* Holds the kernel's promotions off the handed chunks (hold), or lets them
 * in again; nothing when that is so already. */
void rc_hold_kernel(bool hold);
/* Moves the strays *s found to their chunks' tier (a pinned chunk's to tier
 * 0); true when some pages moved down. */
bool rc_move_strays(const rc_scan_t *s);
/* Asks the kernel to demote `want` bytes of tier 0 (rc.kdemote); returns
 * the bytes it demoted, counted as demoted from tier 0. */
uint64_t rc_kernel_demote(uint64_t want);
/* Gives back up to `want` bytes of the pages on tier t the kernel promoted
 * of handed chunks (handback.h), counted as demoted from t; returns them. */
uint64_t rc_give_back(unsigned t, uint64_t want, uint64_t now);

#endif
