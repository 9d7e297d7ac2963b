#include "account.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "je.h"

/* No runs until the thread is READY: the fast paths' compares fail. */
__thread tm_thread_t tm_tls __attribute__((tls_model("initial-exec"))) = {
  .alloc_run = TM_NO_RUN,
  .free_run = TM_NO_RUN,
};

/* The span of a run on tier `run` (TM_NO_RUN: none). A tier the ranges do
 * not have (they are inactive) has an empty span. */
static void account_span(unsigned run, uintptr_t *lo, uintptr_t *len)
{
  *lo = run < tm_ranges.n ? tm_range_lo(run) : 0;
  *len = run < tm_ranges.n ? tm_range_span() : 0;
}

/* Open t's allocation (free) run on tier `run`, with its span. */
static void account_open_alloc(tm_thread_t *t, unsigned run)
{
  t->alloc_run = run;
  account_span(run, &t->alloc_lo, &t->alloc_len);
}

static void account_open_free(tm_thread_t *t, unsigned run)
{
  t->free_run = run;
  account_span(run, &t->free_lo, &t->free_len);
}

static pthread_mutex_t account_lock = PTHREAD_MUTEX_INITIALIZER;
static tm_thread_t *account_threads;          /* registry of READY threads */
static unsigned account_app_threads;          /* of them, not internal */
static uint64_t account_dead_alloc[TM_NCOUNT]; /* folded from exited threads */
static uint64_t account_dead_freed[TM_NCOUNT];
static _Atomic uint64_t account_late_alloc[TM_NCOUNT];
static _Atomic uint64_t account_late_freed[TM_NCOUNT];

/* Closes t's open runs (its owner, or a reader of a thread that cannot run:
 * exiting, or gone in a fork child). */
static void account_close_runs(tm_thread_t *t)
{
  if (t->alloc_run != TM_NO_RUN) {
    uint64_t now = *t->allocp, nowf = *t->deallocp;
    tm_count_add(&t->alloc[t->alloc_run], now - t->alloc_seen);
    tm_count_add(&t->freed[t->free_run], nowf - t->freed_seen);
    t->alloc_seen = now;
    t->freed_seen = nowf;
  }
}

static void account_unlink_locked(tm_thread_t *t)
{
  account_close_runs(t);
  account_open_alloc(t, TM_NO_RUN);
  account_open_free(t, TM_NO_RUN);
  for (int i = 0; i < TM_NCOUNT; i++) {
    account_dead_alloc[i] += __atomic_load_n(&t->alloc[i], __ATOMIC_RELAXED);
    account_dead_freed[i] += __atomic_load_n(&t->freed[i], __ATOMIC_RELAXED);
    t->alloc[i] = t->freed[i] = 0;
  }
  if (!t->internal) account_app_threads--;
  if (t->prev) t->prev->next = t->next;
  else account_threads = t->next;
  if (t->next) t->next->prev = t->prev;
  t->next = t->prev = NULL;
}

void tm_account_defer(tm_thread_t *t, void (*fn)(void))
{
  t->deferred = fn;
  t->alloc_len = 0;   /* the run's tier stays: tm_account_switch_alloc closes it */
}

/* The deferred work of the calling thread, once. */
static void account_run_deferred(tm_thread_t *t)
{
  void (*fn)(void) = t->deferred;
  t->deferred = NULL;
  fn();
}

void *tm_account_switch_alloc(tm_thread_t *t, void *p)
{
  if (t->deferred) account_run_deferred(t);
  if (p == NULL) return NULL;
  unsigned i = tm_range_index(p);
  uint64_t usable = tmje_malloc_usable_size(p);
  /* The open run ended just before p; memory outside the ranges never opens
   * a run (it is rare), it is counted at once. */
  uint64_t start = *t->allocp - usable;
  tm_count_add(&t->alloc[t->alloc_run], start - t->alloc_seen);
  if (i == TM_RANGE_OTHER) {
    tm_count_add(&t->alloc[i], usable);
    t->alloc_seen = start + usable;
  } else {
    t->alloc_seen = start;
    account_open_alloc(t, i);
  }
  return p;
}

void tm_account_freed_other(tm_thread_t *t, size_t usable)
{
  tm_count_add(&t->freed[TM_RANGE_OTHER], usable);
  t->freed_seen += usable;
}

void tm_account_switch_free(tm_thread_t *t, const void *p, unsigned i)
{
  uint64_t now = *t->deallocp;
  tm_count_add(&t->freed[t->free_run], now - t->freed_seen);
  t->freed_seen = now;
  if (i == TM_RANGE_OTHER) {
    /* Never a free run on OTHER: the fast path would then take glibc's
     * pointers (and NULL) for jemalloc's. The free about to happen is
     * counted there now. */
    tm_account_freed_other(t, tmje_malloc_usable_size((void *)p));
  } else {
    account_open_free(t, i);
  }
}

bool tm_account_register(tm_thread_t *t)
{
  t->alloc_seen = *t->allocp;
  t->freed_seen = *t->deallocp;
  account_open_alloc(t, 0);
  account_open_free(t, 0);
  pthread_mutex_lock(&account_lock);
  bool second = !t->internal && account_app_threads++ > 0;
  t->next = account_threads;
  if (t->next) t->next->prev = t;
  account_threads = t;
  pthread_mutex_unlock(&account_lock);
  return second;
}

bool tm_account_unregister(tm_thread_t *t)
{
  pthread_mutex_lock(&account_lock);
  account_unlink_locked(t);
  bool last = !t->internal && account_app_threads == 0;
  pthread_mutex_unlock(&account_lock);
  return last;
}

void tm_account_late(const void *p, size_t usable, int freed)
{
  unsigned i = tm_range_index(p);
  atomic_fetch_add_explicit(freed ? &account_late_freed[i] : &account_late_alloc[i], usable,
                            memory_order_relaxed);
}

void tm_account_allocated(uint64_t out[TM_NCOUNT])
{
  uint64_t a[TM_NCOUNT], f[TM_NCOUNT];
  pthread_mutex_lock(&account_lock);
  for (int i = 0; i < TM_NCOUNT; i++) {
    a[i] = account_dead_alloc[i] + atomic_load_explicit(&account_late_alloc[i], memory_order_relaxed);
    f[i] = account_dead_freed[i] + atomic_load_explicit(&account_late_freed[i], memory_order_relaxed);
  }
  for (tm_thread_t *t = account_threads; t; t = t->next) {
    for (int i = 0; i < TM_NCOUNT; i++) {
      a[i] += __atomic_load_n(&t->alloc[i], __ATOMIC_RELAXED);
      f[i] += __atomic_load_n(&t->freed[i], __ATOMIC_RELAXED);
    }
    /* The open runs, read racily from a live thread: a snapshot may be a
     * call behind, never torn (aligned 64-bit loads). */
    unsigned ar = __atomic_load_n(&t->alloc_run, __ATOMIC_RELAXED);
    unsigned fr = __atomic_load_n(&t->free_run, __ATOMIC_RELAXED);
    if (ar < TM_NCOUNT && fr < TM_NCOUNT) {
      a[ar] += __atomic_load_n(t->allocp, __ATOMIC_RELAXED) - __atomic_load_n(&t->alloc_seen, __ATOMIC_RELAXED);
      f[fr] += __atomic_load_n(t->deallocp, __ATOMIC_RELAXED) - __atomic_load_n(&t->freed_seen, __ATOMIC_RELAXED);
    }
  }
  pthread_mutex_unlock(&account_lock);
  /* Threads are read one after another, so a block freed by one thread may be
   * seen before its allocation by another: clamp, never report negative. */
  for (int i = 0; i < TM_NCOUNT; i++) out[i] = a[i] > f[i] ? a[i] - f[i] : 0;
}

void tm_account_prefork(void)
{
  pthread_mutex_lock(&account_lock);
}

void tm_account_postfork_parent(void)
{
  pthread_mutex_unlock(&account_lock);
}

/* Only the forking thread exists in the child: the other registered threads'
 * TLS blocks are gone with their threads (their stacks may be reused), so
 * fold their counts in and drop them before anyone reads the registry. */
void tm_account_postfork_child(void)
{
  tm_thread_t *self = &tm_tls;
  tm_thread_t *t = account_threads;
  while (t) {
    tm_thread_t *next = t->next;
    if (t != self) account_unlink_locked(t);
    t = next;
  }
  pthread_mutex_init(&account_lock, NULL);
}
