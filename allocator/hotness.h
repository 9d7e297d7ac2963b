/*
 * hotness: which chunks reclaim calls cold. One interface, so the access
 * tracking to come (page-table access bits, PAGEMAP_SCAN) replaces the signal
 * without touching reclaim.
 *
 * The signal today is the commit age: the time since the allocator last
 * committed memory in the chunk (jemalloc handed it out fresh, or reused it
 * after giving its pages back). It sees allocation, not access: a chunk of
 * long-lived data that is read all the time looks as cold as one nobody
 * reads. It is what a malloc knows for free, and the generational rule
 * behind it holds for most heaps: memory allocated recently is used most,
 * and what survived long without the allocator touching it is mostly read
 * rarely. Stats name the signal (tier_stats_t.cold_signal).
 *
 * Times are in units of TM_HOTNESS_TICK_MS, kept in 16 bits: ages beyond
 * TM_HOTNESS_AGE_MAX ticks (about 55 minutes) are all equally old.
 */
#ifndef TM_HOTNESS_H
#define TM_HOTNESS_H

#include <stdatomic.h>
#include <stdint.h>

#include "chunkmap.h"

#define TM_HOTNESS_TICK_MS 100
#define TM_HOTNESS_AGE_MAX 32767u

/* The clock chunks are stamped with; the reclaim thread advances it. */
extern _Atomic uint16_t tm_hotness_now;

/* The allocator used c (committed memory in it): it is young again. Slow
 * path only (extent hooks): one relaxed store. */
static inline void tm_hotness_touch(tm_chunk_t *c)
{
  atomic_store_explicit(&c->age, atomic_load_explicit(&tm_hotness_now, memory_order_relaxed),
                        memory_order_relaxed);
}

/* Advances the clock to now (the reclaim thread, each pass). */
void tm_hotness_tick(void);

/* How cold c is: its age in ticks, 0..TM_HOTNESS_AGE_MAX (larger is colder).
 * Keeps very old stamps from wrapping around to look young. */
unsigned tm_hotness_age(tm_chunk_t *c);

/* The name of the signal, for stats ("commit age"). */
const char *tm_hotness_signal(void);

#endif
