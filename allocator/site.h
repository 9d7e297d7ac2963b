/*
 * site: allocation-site placement (TIERMALLOC_SITES), with the accessed bits
 * as the hotness source, while hotness is tracked (a budget makes placement
 * matter) and a reclaim thread reads the bits (hotness.h).
 *
 *   sampling     each thread samples one allocation of about every
 *                SITE_SAMPLE bytes it asks for (a countdown in the
 *                thread's record: one subtract on the fast path) and
 *                records its site: the return address of the malloc,
 *                calloc or operator new call, the routing key, with a few
 *                frames unwound by libunwind to name it in the stats. The
 *                table is bounded (TM_SITE_MAX); a new site replaces the one
 *                with the fewest sampled bytes not on trial; sampled bytes
 *                halve at each verdict, so old sites fade.
 *   trial        the untried site sampled most (TM_SITE_MIN_SAMPLES samples
 *                or more) is put on trial, one a verdict, up to
 *                TM_SITE_SLOTS at once and TM_SITE_ARENAS in the process's
 *                life: an arena of its own whose extents are whole chunks
 *                (tm_chunk_t.site), so its memory shares no chunk with
 *                another site's and the accessed bits measure it apart.
 *                One of its calls in TM_SITE_TRIAL_SHARE, drawn, goes to
 *                that arena, through a tcache of the thread's own: a sample
 *                of its memory. The calls between stay on the fast path
 *                (a count of the thread's, tm_site_take).
 *   verdict      after each scan that read the bits: a site on trial whose
 *                cold chunks hold at least TM_SITE_COLD_RATIO times the
 *                bytes of its hot ones (and a chunk or more) is cold: all its
 *                calls go to its arena, whose new chunks are placed from
 *                tier 1 down: the site's new memory goes below with no
 *                migration, and reclaim
 *                demotes its old memory as it does any cold chunk. A site
 *                not found cold within TM_SITE_TRIAL verdicts (counted while
 *                its arena holds memory and has not grown since the verdict
 *                before: memory written since the last read cannot be cold
 *                yet, and a site filling its chunks over many reads would
 *                otherwise be judged on the chunk it is writing; at most
 *                TM_SITE_TRIAL_MAX verdicts with memory in all), or cold no more (its chunks used
 *                at two reads in a row, tm_hotness_steady, hold more than
 *                its cold ones: a cold site's new blocks are written as they
 *                are allocated, and a burst of them is hot at one read with
 *                no sign that the site's memory is used), goes back to the
 *                automatic arenas: the fast path again, no routing cost. It is not
 *                tried again while its entry lives.
 *
 * Not done: realloc and aligned allocations are neither sampled nor routed;
 * a site is one return address, so a malloc wrapper is one site for all its
 * callers; a block freed goes to the freeing thread's own tcache, which can
 * hand it to another site's allocation of the same size.
 */
#ifndef TM_SITE_H
#define TM_SITE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "account.h"
#include "tiermalloc.h"

#define TM_SITE_MAX 256        /* sites in the table */
#define TM_SITE_FRAMES 4       /* frames kept per site, for the report */
#define TM_SITE_MIN_SAMPLES 4  /* samples before a site is put on trial */
#define TM_SITE_COLD_RATIO 3   /* cold bytes to hot bytes for a cold verdict */
#define TM_SITE_TRIAL 4        /* verdicts a site stays on trial without being found cold */
#define TM_SITE_TRIAL_MAX 16   /* ... however long its memory grows */
#define TM_SITE_TRIAL_SHARE 8  /* a site on trial routes one call in this many */
#define TM_SITE_SLOTS 8        /* sites routed at once (on trial, or cold) */
#define TM_SITE_FILTER 1024    /* routing filter entries (a power of two) */

_Static_assert(TM_SITE_SLOTS == TIER_STATS_SITES && TM_SITE_FRAMES == TIER_STATS_SITE_FRAMES,
               "the stats show every site routed, every frame");

/* Set once some site is routed: allocations look their site up. Written
 * once (0 to 1) by the reclaim thread; read with relaxed loads. Hidden,
 * so the fast path reaches both directly, not through the GOT: its test is
 * one compare with memory. */
extern uint8_t tm_site_routing __attribute__((visibility("hidden")));

/* Per return-address hash: the arena + 1 of a routed site that may have it,
 * with TM_SITE_ALL once it is found cold; 0 none. */
extern uint8_t tm_site_filter[TM_SITE_FILTER] __attribute__((visibility("hidden")));
#define TM_SITE_ALL 0x80u    /* every call routed (a cold verdict) */
#define TM_SITE_ARENA 0x7fu  /* the arena + 1 */

static inline unsigned tm_site_hash(const void *ra)
{
  return (unsigned)(((uintptr_t)ra * 0x9e3779b97f4a7c15ull) >> (64 - 10)) & (TM_SITE_FILTER - 1);
}

/* Counts `size` bytes asked for by t; true when a sample is due (the count
 * went below 0; any size, however large, counts). On the fast path, a
 * subtract and a carry test. A new thread's 0 makes its first call sample,
 * which sets the first gap. */
static inline bool tm_site_count(tm_thread_t *t, size_t size)
{
  return __builtin_sub_overflow(t->site_left, (uint64_t)size, &t->site_left);
}

/* On the slow path, after tm_site_count: the count went below 0 (it wrapped
 * to TM_SITE_DUE or above; gaps are far below it). */
#define TM_SITE_DUE ((uint64_t)1 << 63)
static inline bool tm_site_due(const tm_thread_t *t)
{
  return t->site_left >= TM_SITE_DUE;
}

/* The filter's byte for the call at ra: 0 at once while no site is
 * routed; else a hash and a byte of the filter. */
static inline unsigned tm_site_filter_of(const void *ra)
{
  if (__builtin_expect(!__atomic_load_n(&tm_site_routing, __ATOMIC_RELAXED), 1)) return 0;
  return __atomic_load_n(&tm_site_filter[tm_site_hash(ra)], __ATOMIC_RELAXED);
}

/* The call at ra may be a routed site's (the slow path checks the site). */
static inline bool tm_site_routed(const void *ra)
{
  return tm_site_filter_of(ra) != 0;
}

/* The fast path's test: the call at ra should take the slow path to be
 * routed. While no site is routed, one compare; else a hash and a byte of
 * the filter; for a site on trial, the thread's skip count too: it leaves
 * the calls between two routed ones on the fast path (the slow path draws
 * the next count, uniform in [0, 2 TM_SITE_TRIAL_SHARE - 2]: one call in
 * TM_SITE_TRIAL_SHARE routed, drawn, so no pattern of the program's calls
 * stays in step with it). The count is the thread's, a plain store. */
static inline bool tm_site_take(tm_thread_t *t, const void *ra)
{
  unsigned f = tm_site_filter_of(ra);
  if (f == 0) return false;
  if ((f & TM_SITE_ALL) || t->site_skip == 0) return true;
  t->site_skip--;
  return false;
}

/* Options and state; after the options and hotness are initialised. */
void tm_site_init(unsigned ntiers);

/* MALLOCX flags of the arena of the site `ra` if this call is routed, with
 * the thread's tcache for it; 0 otherwise (a plain malloc then). Off the
 * fast path, for every call that reaches the slow path with tm_site_routed
 * (a sample due, or tm_site_take): a site on trial routes the call only when
 * the thread's skip count is spent, and draws the next. */
int tm_site_flags(tm_thread_t *t, const void *ra);

/* Records a sample of `size` bytes at `ra` and sets t's countdown to the next,
 * then says so (tm_notify_allocated). Never blocks: a sample that would wait
 * for the table is dropped. */
void tm_site_sample(tm_thread_t *t, const void *ra, size_t size);

/* After a scan that read the accessed bits (the reclaim thread): trials for
 * sites sampled enough, verdicts, decay. */
void tm_site_evaluate(void);

/* What the report shows. */
typedef struct tm_site_info_s {
  const void *frames[TM_SITE_FRAMES];   /* frames[0] is the call site */
  uint64_t sampled;                     /* bytes sampled (decayed) */
  uint64_t hot, cold;                   /* bytes of its arena's hot and cold chunks, last verdict */
  int arena;                            /* its trial's site arena */
  bool cold_verdict;
} tm_site_info_t;

/* The sites routed now (on trial, or cold), up to n; returns how many. */
unsigned tm_site_list(tm_site_info_t *out, unsigned n);

/* Samples taken; sites routed now, and cold now; trials so far. */
void tm_site_counts(uint64_t *samples, unsigned *routed, unsigned *cold, unsigned *tried);

/* Fork (fork.c): the table's lock. */
void tm_site_prefork(void);
void tm_site_postfork_parent(void);
void tm_site_postfork_child(void);

#endif
