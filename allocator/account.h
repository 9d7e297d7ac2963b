/*
 * account: bytes allocated per tier, from per-thread counters.
 *
 * Every thread has a tm_thread_t in static TLS. jemalloc keeps, per thread,
 * the cumulative usable bytes it allocated and freed; the shim reads that
 * counter before and after each call, and adds the difference to the
 * thread's counter of the tier the pointer lies in. That is two loads and a
 * plain store: no lock, no syscall, no atomic read-modify-write, and exact
 * usable sizes without a size lookup.
 *
 * Live threads are linked in a registry (mutex, slow path only); an exiting
 * thread folds its counters into the totals of dead threads. Calls made while
 * a thread cannot count (during start-up, after its exit began) are counted
 * on shared atomics, which is rare and off the fast path.
 */
#ifndef TM_ACCOUNT_H
#define TM_ACCOUNT_H

#include <stddef.h>
#include <stdint.h>

#include "range.h"

#define TM_NCOUNT (TIER_MAX_TIERS + 1)   /* tiers, then TM_RANGE_OTHER */

typedef enum tm_thread_state_e {
  TM_THREAD_NEW = 0,     /* not set up yet (zeroed TLS) */
  TM_THREAD_BUSY,        /* inside its own set-up: nested calls do not count here */
  TM_THREAD_READY,
  TM_THREAD_DEAD,        /* its exit began; late calls count on shared atomics */
} tm_thread_state_t;

typedef struct tm_thread_s {
  int state;
  const uint64_t *allocp;      /* jemalloc's thread.allocatedp */
  const uint64_t *deallocp;    /* jemalloc's thread.deallocatedp */
  uint64_t alloc[TM_NCOUNT];   /* usable bytes allocated, by range index */
  uint64_t freed[TM_NCOUNT];
  unsigned tcache[TIER_MAX_TIERS];  /* explicit tcache + 1 for tier_malloc; 0: none */
  struct tm_thread_s *next, *prev;
} tm_thread_t;

extern __thread tm_thread_t tm_tls __attribute__((tls_model("initial-exec")));

/* Single-writer counter: only the owning thread writes, others read it with a
 * relaxed load, so a relaxed load+store is enough (no locked instruction). */
static inline void tm_count_add(uint64_t *c, uint64_t delta)
{
  __atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + delta, __ATOMIC_RELAXED);
}

/* The calling thread, ready to count; NULL when it cannot count now. Starts
 * tiermalloc on the first call of the process. */
static inline tm_thread_t *tm_thread(void)
{
  tm_thread_t *t = &tm_tls;
  if (__builtin_expect(t->state == TM_THREAD_READY, 1)) return t;
  extern tm_thread_t *tm_thread_prepare(void);
  return tm_thread_prepare();
}

/* Counts a call made while the thread could not count (tm_thread() was NULL):
 * usable bytes of p allocated or freed, on shared atomics. */
void tm_account_late(const void *p, size_t usable, int freed);

/* Live bytes per range index (allocated - freed over all threads, dead and
 * alive; never negative). out has TM_NCOUNT entries. */
void tm_account_allocated(uint64_t out[TM_NCOUNT]);

/* Called once by start-up: creates the thread-exit key and fork handlers. */
int tm_account_init(void);

#endif
