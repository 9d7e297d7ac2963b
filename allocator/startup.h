/*
 * startup: brings tiermalloc up once per process, before jemalloc serves its
 * first allocation: options, topology, ranges, policy, accounting, arenas.
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

/* Called when a second thread starts counting: with
 * TIERMALLOC_BACKGROUND_THREAD=auto (or on, in a fork child), starts
 * jemalloc's background thread. */
void tm_start_second_thread(void);

/* Called when the last thread that used the allocator has exited: stops
 * jemalloc's background threads, which would otherwise keep alive a process
 * whose threads all ended by pthread_exit. The next second thread starts
 * them again. */
void tm_start_no_thread_left(void);

/* Fork child: jemalloc's background thread did not survive the fork (jemalloc
 * marks it disabled in the child); the child's next thread starts it again. */
void tm_start_postfork_child(void);

/* True once start-up finished. */
bool tm_started(void);

/* The topology in use (valid after tm_start). */
const tm_topology_t *tm_topology(void);

#endif
