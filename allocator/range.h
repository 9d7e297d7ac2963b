/*
 * range: one reserved address range per tier.
 *
 * All ranges live in one reservation, tier i at base + i*stride, each of
 * `size` bytes (the first 2 MiB an unused PROT_NONE guard) followed by more
 * PROT_NONE guard up to the next stride (stride > size),
 * so "which tier owns p" is a subtract, a shift and a compare, and the
 * kernel never merges two tiers' VMAs. Each range carries its tier's
 * mempolicy, set once (a chunk of it may be bound to another tier later,
 * policy.c). Extents are carved from a range by a lock-free bump
 * pointer and never given back to it: jemalloc retains the address space and
 * returns the pages (purge), so a range only ever grows.
 */
#ifndef TM_RANGE_H
#define TM_RANGE_H

#include <stddef.h>
#include <stdint.h>

#include "os.h"
#include "topology.h"

#define TM_RANGE_OTHER TIER_MAX_TIERS  /* index of memory outside every range */

typedef struct tm_ranges_s {
  uintptr_t base;      /* 0 when no range is set up */
  unsigned shift;      /* log2(stride) */
  unsigned n;          /* number of ranges = tiers, 0 when inactive */
  size_t size;         /* usable bytes of each range */
} tm_ranges_t;

/* Read-only after tm_ranges_init; read on the malloc fast path. */
extern tm_ranges_t tm_ranges;

/* Range (tier) index of p, or TM_RANGE_OTHER. Fast path: no memory access
 * beyond the read-only tm_ranges. */
static inline unsigned tm_range_index(const void *p)
{
  uintptr_t i = ((uintptr_t)p - tm_ranges.base) >> tm_ranges.shift;
  return i < tm_ranges.n ? (unsigned)i : TM_RANGE_OTHER;
}

/* The address span that tm_range_index maps to i (< tm_ranges.n): p is in
 * it iff (uintptr_t)p - tm_range_lo(i) < tm_range_span(). */
static inline uintptr_t tm_range_lo(unsigned i)
{
  return tm_ranges.base + ((uintptr_t)i << tm_ranges.shift);
}

static inline uintptr_t tm_range_span(void)
{
  return (uintptr_t)1 << tm_ranges.shift;
}

/* Reserves a range of `size` bytes (rounded to 2 MiB, at least 62 MiB) for
 * each tier of topo and binds each to its tier's nodes (skipped for a single
 * tier). Under an address-space limit (RLIMIT_AS) all ranges together take
 * at most half of it. When the reservation fails it retries with half the
 * size down to 62 MiB; then it leaves the ranges inactive (every pointer is
 * TM_RANGE_OTHER). Returns 0 or a positive errno; warns once on failure.
 * huge_min: carves of at least this many bytes also ask for huge pages
 * (os->huge); 0 for every carve, SIZE_MAX for none. */
int tm_ranges_init(const tm_topology_t *topo, size_t size, size_t huge_min,
                   const tm_os_t *os);

/* Carves size bytes aligned to `align` (a power of two, >= page) from range
 * i and makes them readable and writable (os->commit). NULL when the range is
 * exhausted or that fails. Counts the bytes as mapped on tier i (what
 * jemalloc holds committed of them is counted per chunk, chunkmap.h). A
 * failure to get huge pages is not a failure of the carve. */
void *tm_range_carve(unsigned i, size_t size, size_t align);

/* The end of what range i has carved so far: every extent of it lies in
 * [tm_range_lo(i), tm_range_end(i)). */
uintptr_t tm_range_end(unsigned i);

/* Bytes carved from range i so far: address space, which only grows. */
uint64_t tm_range_mapped(unsigned i);

/* The OS primitives in use (tm_os_linux, or a test double). */
const tm_os_t *tm_range_os(void);

#endif
