/*
 * liverec: what the writer (live.c) and a reader (tierctl, in another
 * process) of the live record (tier_live_t, include/tiermalloc.h) must agree
 * on: its seqlock (one writer's update, a reader's consistent copy; no
 * allocation, no lock: the writer serialises its own writes, and a reader
 * never makes it wait) and how a record names its pid namespace.
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

/* Measures the resident bytes of r's process from outside: its numa_maps
 * (/proc/<pid>/numa_maps, or a fixture), over the record's ranges
 * [range_base, range_end), each node counted on the tier whose node mask
 * in r->stats holds it, as the process counts its own (resident.h). On
 * success writes them into r->stats (tier[].resident, resident_other) and
 * returns 0; else a positive errno (EACCES: another user's process, or one
 * that is not dumpable; ENOENT: it ended; ERANGE: the record names no
 * ranges) and r is left as it was. Reads the file once; never allocates. */
int tm_liverec_measure(tier_live_t *r, const char *numa_maps);

/* The calling process's pid namespace as a record's pid_ns names it (the
 * inode of /proc/self/ns/pid); 0 when unknown. */
uint64_t tm_liverec_pid_ns(void);

#endif
