/*
 * account: bytes allocated per tier, from per-thread counters.
 *
 * Every thread has a tm_thread_t in static TLS. jemalloc keeps, per thread,
 * the cumulative usable bytes it allocated and freed. Consecutive calls of a
 * thread almost always hit one tier, so a thread counts in runs: while its
 * allocations stay on tier `alloc_run`, nothing is written at all, and the
 * run's bytes are jemalloc's counter minus `alloc_seen`. Only when a pointer
 * lands on another tier is the run closed (tm_account_switch_*, off line).
 * The fast path is one subtract and compare of the pointer against the open
 * run's address span, kept in TLS: no lock, no syscall, no atomic
 * read-modify-write, no size lookup, and exact usable sizes. Readers add each
 * live thread's open run.
 *
 * Live threads are linked in a registry (mutex, slow path only); an exiting
 * thread folds its counters into the totals of dead threads. A thread's
 * set-up and exit are thread.c's. Calls made while
 * a thread cannot count (during start-up, after its exit began) are counted
 * on shared atomics, which is rare and off the fast path.
 */
#ifndef TM_ACCOUNT_H
#define TM_ACCOUNT_H

#include <stdbool.h>
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

#define TM_NO_RUN 0xffu   /* run of a thread that is not READY: every call is slow */
#define TM_SITE_ARENAS 16 /* arenas for allocation sites, one a trial (site.h) */

typedef struct tm_thread_s {
  /* The fast paths' view of the open runs: p is on the run's tier iff
   * (uintptr_t)p - lo < len. len 0: no run (every call is slow). Set only
   * together with the run index (account_open_* in account.c). */
  uintptr_t alloc_lo, alloc_len;
  uintptr_t free_lo, free_len;
  unsigned alloc_run;          /* tier of the open allocation run, or TM_NO_RUN (never OTHER) */
  unsigned free_run;           /* tier of the open free run, or TM_NO_RUN (never OTHER) */
  int state;
  const uint64_t *allocp;      /* jemalloc's thread.allocatedp */
  uint64_t site_left;          /* bytes to ask for before the next sample (site.h) */
  const uint64_t *deallocp;    /* jemalloc's thread.deallocatedp */
  uint64_t alloc_seen;         /* *allocp when the open run began */
  uint64_t freed_seen;
  uint64_t alloc[TM_NCOUNT];   /* usable bytes allocated in closed runs, by range index */
  uint64_t freed[TM_NCOUNT];
  unsigned tcache[TIER_MAX_TIERS];  /* explicit tcache + 1 for tier_malloc; 0: none */
  unsigned site_tcache[TM_SITE_ARENAS];  /* explicit tcache + 1 for each site arena; 0: none */
  uint32_t site_rand;          /* the thread's generator for sampling and trial shares (site.c) */
  uint32_t site_skip;          /* calls of sites on trial to leave unrouted before the next (site.h) */
  int internal;                /* one of jemalloc's background threads */
  void (*deferred)(void);      /* run at the next allocation (tm_account_defer) */
  struct tm_thread_s *next, *prev;
} tm_thread_t;

extern __thread tm_thread_t tm_tls __attribute__((tls_model("initial-exec")));

/* Single-writer counter: only the owning thread writes, others read it with a
 * relaxed load, so a relaxed load+store is enough (no locked instruction). */
static inline void tm_count_add(uint64_t *c, uint64_t delta)
{
  __atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + delta, __ATOMIC_RELAXED);
}

/* A READY thread just allocated p (NULL: nothing was allocated) on a tier
 * other than its open run: closes the run and opens one on p's tier.
 * Returns p, so the allocation paths can tail-call it. */
void *tm_account_switch_alloc(tm_thread_t *t, void *p);

/* A READY thread is about to free p, on range index i != its free run. */
void tm_account_switch_free(tm_thread_t *t, const void *p, unsigned i);

/* Runs fn on t's next allocation, after jemalloc has returned it (none of
 * jemalloc's locks held): for work an extent hook must not do itself, such
 * as starting a thread. t is the calling thread and READY. It costs the fast
 * path nothing: the open allocation run is cut short, so that allocation
 * takes the slow path, which runs fn once. */
void tm_account_defer(tm_thread_t *t, void (*fn)(void));

/* `usable` bytes of a block outside every range, which jemalloc counts (or
 * just counted) as freed by a READY thread: counts them on OTHER and keeps
 * them out of the open free run. */
void tm_account_freed_other(tm_thread_t *t, size_t usable);

/* p is outside the thread's open allocation (free) run, or there is none. */
static inline int tm_off_alloc_run(const tm_thread_t *t, const void *p)
{
  return (uintptr_t)p - t->alloc_lo >= t->alloc_len;
}

static inline int tm_off_free_run(const tm_thread_t *t, const void *p)
{
  return (uintptr_t)p - t->free_lo >= t->free_len;
}

/* After an allocation by a READY thread; returns p. */
static inline void *tm_count_alloc(tm_thread_t *t, void *p)
{
  if (__builtin_expect(tm_off_alloc_run(t, p), 0)) return tm_account_switch_alloc(t, p);
  return p;
}

/* Counts a call made while the thread could not count (tm_thread() was NULL):
 * usable bytes of p allocated or freed, on shared atomics. */
void tm_account_late(const void *p, size_t usable, int freed);

/* Live bytes per range index (allocated - freed over all threads, dead and
 * alive; never negative). out has TM_NCOUNT entries. */
void tm_account_allocated(uint64_t out[TM_NCOUNT]);

/* Opens t's runs (its allocated/deallocated pointers set) and links it into
 * the registry. Returns true when another program thread (not one of
 * jemalloc's) was registered already: t makes the process multi-threaded. */
bool tm_account_register(tm_thread_t *t);

/* Folds t's counts into the dead threads' and unlinks it. Returns true when
 * no program thread is left registered. */
bool tm_account_unregister(tm_thread_t *t);

/* Fork handlers (fork.c calls them in its order). */
void tm_account_prefork(void);
void tm_account_postfork_parent(void);
void tm_account_postfork_child(void);

#endif
