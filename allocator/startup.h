/*
 * startup: brings tiermalloc up once per process, before jemalloc serves its
 * first allocation: options, topology, ranges, chunk map, budgets, policy,
 * fork handling, arenas, the library's threads.
 * Allocates nothing. A failure at any step leaves a working allocator (at
 * worst plain jemalloc with every tier unplaced) and one warning line.
 */
#ifndef TM_STARTUP_H
#define TM_STARTUP_H

#include <stdbool.h>

#include "topology.h"

/* Runs start-up on the first call; later calls return 0 at once. Another
 * thread's concurrent call waits for it. Returns EBUSY to a nested call made
 * from within start-up on the same thread. */
int tm_start(void);

/* True once start-up finished. */
bool tm_started(void);

/* The topology in use (valid after tm_start). */
const tm_topology_t *tm_topology(void);

/* The policies this kernel lets allow NUMA balancing (balancing.h's
 * TM_BALANCING_* bits), probed once at start-up on tier 0's first node. */
unsigned tm_startup_numa_balancing_policies(void);

#endif
