/*
 * handback: a tier's budget held around the kernel's NUMA balancing.
 *
 * A chunk handed to NUMA balancing (reclaim: TIERMALLOC_NUMA_BALANCING=
 * tiering) keeps its tier; the kernel promotes its hot pages, one by one,
 * to the tier of the CPUs, where they count. When that tier is over its
 * limit with none of its own chunks left to demote, this gives such pages
 * back to their chunks' tier, page by page and only as many as the excess,
 * the chunks staying handed (taking a chunk back whole, as reclaim did
 * first, emptied tier 0: on bench/tier-quality's zipfian heap, 128 MiB at a
 * 25 % budget, 117 MiB demoted in 20 s, none left on top, 0.06 of the
 * accesses served there). The choice, by what the kernel did:
 *   - a page given back that the kernel promoted again within
 *     TM_HANDBACK_UNDONE_NS is a demotion undone: counted (the quality
 *     signal to drive down), and given back last for TM_HANDBACK_LAST_NS;
 *   - the pages promoted since the last look go first, older ones after:
 *     the kernel promotes a page on a hint fault soon after its scan, so
 *     the hottest come up first and what it adds later is colder (on that
 *     heap, oldest first kept 0.24 of the accesses on top, newest first
 *     0.48, at 30 MiB against a budget of 32);
 *   - those undone lately last, but they go: the limit is held. Kept out for
 *     good, in the 2tier VM with a hot set twice tier 0's high (8 MiB
 *     against 4), the kernel promoted 7.3 of the 7.6 MiB given back again
 *     within 10 s and tier 0 stayed at 7.2 MiB, over its high: where the
 *     hot set is larger than the budget, some pages go up and down, and
 *     the undone count says how many.
 * There is no finer signal to rank them by: the accessed bits are read per
 * VMA, and handed chunks merge into one.
 * A call looks at 64 handed chunks at most (a move_pages lookup each), from
 * where the last one stopped, and moves pages with one call per chunk given
 * back from; the bookkeeping is bounded (HB_* in handback.c) and allocates
 * nothing. Only the reclaim thread calls these.
 */
#ifndef TM_HANDBACK_H
#define TM_HANDBACK_H

#include <stdint.h>

#define TM_HANDBACK_UNDONE_NS (10ull * 1000000000ull)
#define TM_HANDBACK_LAST_NS (30ull * 1000000000ull)

/* Moves up to `want` bytes of pages of handed chunks that are on tier t, a
 * faster tier than their chunks', back to their chunks' tier (see above).
 * now: CLOCK_MONOTONIC ns. Returns the bytes moved (found there after);
 * adds the pages asked that did not move to *failed. */
uint64_t tm_handback_give(unsigned t, uint64_t want, uint64_t now, uint64_t *failed);

/* Looks up the pages given back within TM_HANDBACK_UNDONE_NS: each found on
 * a faster tier than its chunk's again is an undone demotion. One
 * move_pages call per 512 pages; nothing when none is pending. */
void tm_handback_check(uint64_t now);

/* Bytes given back, and of those found promoted again, since start-up. */
uint64_t tm_handback_given(void);
uint64_t tm_handback_undone(void);

/* The kernel's own demotions undone. An ask of the cgroup's memory.reclaim
 * (reclaim_cgroup.c) does not say which pages the kernel's LRU took, so a
 * sample of the handed heap's pages is watched: HB_SAMPLE_PER_CHUNK a
 * chunk, each standing for the TM_HANDBACK_SAMPLE_STRIDE pages around it,
 * looked up (one move_pages call) after an ask, at most every
 * HB_LOOK_ASK_NS, and once a second between. A page of the sample on tier
 * 0 at one look and below it at the next is one the kernel demoted (at an
 * ask, or kswapd); found
 * on tier 0 again within TM_HANDBACK_UNDONE_NS, it is a demotion undone,
 * counted for the pages it stands for (an estimate: 512 KiB a sampled
 * page; past HB_SAMPLE_MAX pages, 2 GiB of handed heap, scaled by the
 * chunks not sampled). After tiermalloc's own moves down
 * (tm_handback_moved) the sample is looked up again before the next ask,
 * so what they took is not the kernel's. Looking before and after every
 * ask (up to 20 lookups of 1024 pages a second while the kernel's bursts
 * came) doubled the reclaim thread's CPU at a 10 % budget under TCG. */
#define TM_HANDBACK_SAMPLE_STRIDE 128u

typedef enum tm_handback_look_e {
  TM_HANDBACK_TICK,     /* between asks: at most once a second */
  TM_HANDBACK_BEFORE,   /* just before an ask: only after tiermalloc's own moves down, or if never looked */
  TM_HANDBACK_AFTER,    /* just after it (at most every HB_LOOK_ASK_NS): what left tier 0 since, the kernel demoted */
} tm_handback_look_t;

void tm_handback_look(uint64_t now, tm_handback_look_t why);

/* Reclaim moved pages down itself (the sample's next look is not the
 * kernel's). */
void tm_handback_moved(void);

/* Bytes of the kernel's demotions found undone (the estimate above). */
uint64_t tm_handback_kernel_undone(void);

/* Forgets everything (start-up, and a fork's child). */
void tm_handback_reset(void);

#endif
