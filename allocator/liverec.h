/*
 * liverec: the live record's seqlock (tier_live_t, include/tiermalloc.h):
 * one writer's update, and a reader's consistent copy. Pure: no I/O, no
 * allocation, no lock; the writer (live.c) serialises its own writes, and
 * a reader (tierctl, in another process) never makes the writer wait.
 */
#ifndef TM_LIVEREC_H
#define TM_LIVEREC_H

#include <stdint.h>

#include "tiermalloc.h"

/* Writes *s and the header fields given into *r: seq odd while it writes,
 * even again after. */
void tm_liverec_write(tier_live_t *r, const tier_stats_t *s, uint32_t publisher,
                      uint64_t published_ns, uint64_t resident_ns, uint64_t interval_ns);

/* Copies *r (size bytes of it, as mapped) into *out when it holds a whole
 * snapshot. Returns 0; EAGAIN when a write was under way at each of `tries`
 * attempts; EPROTO when it is not a record (magic) or of another version,
 * or shorter than a tier_live_t (truncated). */
int tm_liverec_read(const volatile tier_live_t *r, uint64_t size, tier_live_t *out, unsigned tries);

#endif
