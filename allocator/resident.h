/*
 * resident: bytes backed by pages, per tier, measured from the kernel.
 *
 * Reads a numa_maps file (/proc/self/numa_maps in production, a fixture in
 * tests) and, for every mapping that starts in [lo, hi), adds each node's
 * page count (N<node>=<pages> times kernelpagesize_kB) to the tier of that
 * node. Pages are counted where they are, whichever range they belong to.
 * Cost: the kernel walks the process's page tables, about 2-4 ms per 0.5 GiB
 * resident; so it runs on demand (tier_stats_get), never on the fast path.
 * Never allocates.
 */
#ifndef TM_RESIDENT_H
#define TM_RESIDENT_H

#include <stdint.h>

#include "topology.h"

typedef struct tm_resident_s {
  uint64_t tier[TIER_MAX_TIERS];
  uint64_t other;        /* on nodes that are in no tier */
} tm_resident_t;

/* Returns 0, or a positive errno when the file cannot be read (out is then
 * all zero). */
int tm_resident_measure(const char *path, const tm_topology_t *topo, uintptr_t lo, uintptr_t hi,
                        tm_resident_t *out);

/* The same walk, mapping by mapping: fn gets each mapping that starts in
 * [lo, hi), in the file's (address) order, with its bytes on each tier and,
 * at [TIER_MAX_TIERS], on no tier. 0 or a positive errno. */
typedef void (*tm_resident_fn)(uintptr_t start, const uint64_t bytes[TIER_MAX_TIERS + 1], void *arg);
int tm_resident_each(const char *path, const tm_topology_t *topo, uintptr_t lo, uintptr_t hi,
                     tm_resident_fn fn, void *arg);

#endif
