/*
 * jemap: the mappings jemalloc made itself with mmap (mk/private-jemalloc.sh
 * routes its mmap/munmap here). Outside the tier ranges, these are the only
 * places a tiermalloc pointer can be: extents jemalloc created before the
 * extent hooks were installed, served later to allocations that jemalloc
 * makes reentrantly on arena 0. Any other pointer is glibc's.
 */
#ifndef TM_JEMAP_H
#define TM_JEMAP_H

#include <stdbool.h>
#include <stddef.h>

/* True when p lies in a mapping jemalloc made (and has not unmapped), or
 * when the table overflowed and the answer is unknown (then every pointer
 * outside the ranges is taken as jemalloc's, as before tiermalloc kept it). */
bool tm_jemap_contains(const void *p);

/* Maps size bytes aligned to align (a power of two >= page) outside every
 * range, for when the ranges are full, and records it like jemalloc's own
 * mappings. The memory is unplaced (tier_of says TIER_NONE). NULL on failure. */
void *tm_jemap_alloc(size_t size, size_t align);

/* Fork child: the table's lock may have been held by a thread that is gone. */
void tm_jemap_postfork_child(void);

#endif
