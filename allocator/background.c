#include "background.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <time.h>

#include "account.h"
#include "budget.h"
#include "clock.h"
#include "je.h"
#include "log.h"
#include "notify.h"
#include "options.h"
#include "range.h"
#include "reclaim.h"
#include "watch.h"

enum { BG_AUTO, BG_ON, BG_OFF };   /* TIERMALLOC_BACKGROUND_THREAD */
static atomic_bool bg_running;
static uint64_t bg_init_ns;   /* CLOCK_MONOTONIC_COARSE at start-up (a fork child: at the fork) */

static void bg_start(void)
{
  if (atomic_exchange_explicit(&bg_running, true, memory_order_relaxed)) return;
  bool on = true;
  if (tmje_mallctl("background_thread", NULL, NULL, &on, sizeof on) != 0)
    tm_warn("cannot start jemalloc's background thread; threads purge their own pages");
}

/* Without it, jemalloc purges a whole arena each time the last thread bound
 * to it exits (tcache_destroy), which made a thread-churning benchmark 3-4x
 * slower; a program that only ever had one thread does not need it. */
void tm_background_second_thread(void)
{
  if (tm_option(TM_OPTION_BACKGROUND_THREAD)->num != BG_OFF) bg_start();
}

/* Started once the heap has held this much: a program that never grows so
 * far never has much to give back, and gets no thread. */
#define BG_HEAP_MIN ((uint64_t)64 << 20)

static uint64_t bg_heap_mapped(void)
{
  uint64_t mapped = 0;
  for (unsigned t = 0; t < tm_ranges.n; t++) mapped += tm_range_mapped(t);
  return mapped;
}

/* ---- the library's thread -------------------------------------------------
 * One thread does the library's periodic work. It publishes the live record
 * (the tick, live.h) every interval, and, from the first wake at which some
 * limit can be crossed (tm_reclaim_needed), runs reclaim's passes as well:
 * it is then the reclaim thread (TM_RECLAIM_THREAD_NAME; before,
 * TM_PUBLISH_THREAD_NAME). While it only publishes it derives the budgets
 * again once a second (tm_budget_refresh), so a limit written to an idle
 * process's cgroup is held, and shown, without waiting for an allocation.
 * It never calls malloc or jemalloc: the only locks it takes are the chunk
 * map's fork lock (shared, for one chunk at a time), the budgets' (only
 * tried), the account's registry and the record's (for a snapshot, never
 * across a call out) and rc_mu, which it never holds across a pass. So a
 * thread that exits or forks, whatever it holds, never waits on it for
 * longer than one chunk's move, and joining it from the last thread's exit
 * cannot deadlock. */
static pthread_mutex_t rc_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t rc_cv;
static bool rc_cv_ok, rc_stop;
static pthread_t rc_thread;
static atomic_bool rc_running;    /* started and not yet joined */
static atomic_bool rc_failed;     /* it could not be started (not retried): commits publish */

static const tm_background_tick_t *_Atomic rc_tick;

void tm_background_set_tick(const tm_background_tick_t *t)
{
  atomic_store_explicit(&rc_tick, t, memory_order_release);
}

static uint64_t bg_tick(bool on_thread)
{
  const tm_background_tick_t *t = atomic_load_explicit(&rc_tick, memory_order_acquire);
  return t ? t->tick(on_thread) : UINT64_MAX;
}

static bool bg_tick_due(void)
{
  const tm_background_tick_t *t = atomic_load_explicit(&rc_tick, memory_order_acquire);
  return t && t->due();
}

/* The thread is wanted for the record alone. */
static bool bg_publisher_wanted(void)
{
  const tm_background_tick_t *t = atomic_load_explicit(&rc_tick, memory_order_acquire);
  return t != NULL && t->wants_thread();
}

static void *rc_main(void *arg)
{
  (void)arg;
  prctl(PR_SET_NAME, TM_PUBLISH_THREAD_NAME);
  /* Sleeps in tm_watch_wait while it can (a write to the cgroup's limits
   * wakes it, and so does rc_stop_and_join); on the condition variable
   * otherwise. A pass runs when the last one's wait has passed or a limit
   * was written; the tick (the live record) may wake it in between. */
  bool reclaiming = false, watching = false;
  uint64_t next_pass = 0;
  pthread_mutex_lock(&rc_mu);
  while (!rc_stop) {
    pthread_mutex_unlock(&rc_mu);
    if (!reclaiming) {
      tm_budget_refresh();
      if (tm_reclaim_needed()) {
        reclaiming = true;
        prctl(PR_SET_NAME, TM_RECLAIM_THREAD_NAME);
        watching = tm_watch_start();
        next_pass = 0;
      }
    }
    if (reclaiming && tm_clock_ns(CLOCK_MONOTONIC) >= next_pass) {
      uint64_t w = tm_reclaim_pass();
      next_pass = tm_clock_ns(CLOCK_MONOTONIC) + w;
    }
    uint64_t live = bg_tick(true), now = tm_clock_ns(CLOCK_MONOTONIC);
    uint64_t wait = !reclaiming ? TM_BUDGET_REFRESH_NS : next_pass > now ? next_pass - now : 0;
    if (live < wait) wait = live;
    int woke = watching ? tm_watch_wait(wait) : -1;
    if (woke >= 0) {
      if (woke) {
        tm_reclaim_woken();
        next_pass = 0;
      }
      pthread_mutex_lock(&rc_mu);
      continue;
    }
    watching = false;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += (time_t)(wait / 1000000000u);
    ts.tv_nsec += (long)(wait % 1000000000u);
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&rc_mu);
    while (!rc_stop && pthread_cond_timedwait(&rc_cv, &rc_mu, &ts) == 0) {
    }
  }
  pthread_mutex_unlock(&rc_mu);
  if (reclaiming) tm_watch_stop();
  const tm_background_tick_t *t = atomic_load_explicit(&rc_tick, memory_order_acquire);
  if (t) t->stopped();
  tm_reclaim_stopped();
  return NULL;
}

static void rc_start(void)
{
  if (atomic_exchange_explicit(&rc_running, true, memory_order_relaxed)) return;
  if (!rc_cv_ok) {
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    rc_cv_ok = pthread_cond_init(&rc_cv, &ca) == 0;
    pthread_condattr_destroy(&ca);
  }
  rc_stop = false;
  /* Every signal blocked, so the program's handlers run on its own threads. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 << 10);
  int err = rc_cv_ok ? pthread_create(&rc_thread, &attr, rc_main, NULL) : ENOMEM;
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (err != 0) {
    tm_warn("cannot start the library's thread (errno %d); budgets steer new memory only, and the "
            "live record is published as memory is committed", err);
    /* Not retried: running stays set. */
    atomic_store_explicit(&rc_failed, true, memory_order_relaxed);
  }
}

static void rc_stop_and_join(void)
{
  if (!atomic_load_explicit(&rc_running, memory_order_relaxed)) return;
  pthread_mutex_lock(&rc_mu);
  rc_stop = true;
  pthread_cond_signal(&rc_cv);
  pthread_mutex_unlock(&rc_mu);
  /* Kicked again while it has not ended: a kick can miss (watch.h reads
   * the watch set racily), and the thread may sleep for a whole period. */
  for (;;) {
    tm_watch_kick();
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 50 * 1000 * 1000;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    if (pthread_timedjoin_np(rc_thread, NULL, &ts) != ETIMEDOUT) break;
  }
  atomic_store_explicit(&rc_running, false, memory_order_relaxed);
}

static bool bg_je_wanted(void);

/* On a program thread outside jemalloc's locks: starts the library's
 * thread when it is wanted; else, when may_publish, publishes the record
 * itself if that is due (a process without the thread). */
static void bg_thread_start_if_wanted(bool may_publish)
{
  bool running = atomic_load_explicit(&rc_running, memory_order_relaxed);
  if (!running && (tm_reclaim_needed() || bg_publisher_wanted())) {
    const tm_background_tick_t *t = atomic_load_explicit(&rc_tick, memory_order_acquire);
    if (t) t->prepare();
    rc_start();
  } else if (may_publish && (!running || atomic_load_explicit(&rc_failed, memory_order_relaxed)) && bg_tick_due())
    bg_tick(false);
}

/* Runs on a program thread on its way out of malloc (tm_account_defer). */
static void bg_start_deferred(void)
{
  if (bg_je_wanted()) bg_start();
  bg_thread_start_if_wanted(true);
}

void tm_background_reclaim_wanted(void)
{
  bool running = atomic_load_explicit(&rc_running, memory_order_relaxed);
  if (running ? !(atomic_load_explicit(&rc_failed, memory_order_relaxed) && bg_tick_due())
              : !tm_reclaim_needed() && !bg_tick_due() && !bg_publisher_wanted())
    return;
  tm_thread_t *self = &tm_tls;
  if (self->state != TM_THREAD_READY || self->internal) return;
  tm_account_defer(self, bg_start_deferred);
}

void tm_background_prefork(void)
{
  pthread_mutex_lock(&rc_mu);
}

void tm_background_postfork_parent(void)
{
  pthread_mutex_unlock(&rc_mu);
}

static bool bg_je_wanted(void)
{
  if (atomic_load_explicit(&bg_running, memory_order_relaxed) ||
      tm_option(TM_OPTION_BACKGROUND_THREAD)->num != BG_AUTO)
    return false;
  return bg_heap_mapped() >= BG_HEAP_MIN;
}

void tm_background_heap_grew(void)
{
  tm_thread_t *self = &tm_tls;
  if (!(bg_je_wanted() || (!atomic_load_explicit(&rc_running, memory_order_relaxed) && bg_publisher_wanted())) ||
      self->state != TM_THREAD_READY || self->internal)
    return;
  tm_account_defer(self, bg_start_deferred);
}

/* Allocations alone start the library's thread only in a process that has
 * run this long: a preloaded shell script's short processes (bash, a pyenv
 * shim) each started one otherwise, and python3 -c pass through pyenv's
 * chain of 20 took 1.08x as long (30 pairs). */
#define BG_ALLOC_AGE_NS 1000000000ull

/* A program thread allocated a sample gap of bytes (notify.h), outside
 * jemalloc's locks: a program that allocates from what start-up committed,
 * without committing more, gets the library's thread so too, once it has
 * run a second. */
static void bg_allocated(void)
{
  if (atomic_load_explicit(&rc_running, memory_order_relaxed) && !atomic_load_explicit(&rc_failed, memory_order_relaxed))
    return;
  if (tm_tls.state != TM_THREAD_READY || tm_tls.internal) return;
  if (tm_clock_ns(CLOCK_MONOTONIC_COARSE) - bg_init_ns < BG_ALLOC_AGE_NS) return;
  bg_thread_start_if_wanted(true);
}

/* Between two moves of a long pass (only the reclaim thread moves). */
static void bg_progress(void)
{
  bg_tick(true);
}

void tm_background_init(void)
{
  bg_init_ns = tm_clock_ns(CLOCK_MONOTONIC_COARSE);
  static const tm_notify_ops_t ops = { .committed = tm_background_reclaim_wanted,
                                       .heap_grew = tm_background_heap_grew,
                                       .progress = bg_progress,
                                       .allocated = bg_allocated };
  tm_notify_set(&ops);
}

void tm_background_start(void)
{
  if (tm_option(TM_OPTION_BACKGROUND_THREAD)->num == BG_ON) bg_start();
}

/* glibc ends a process when its last thread ends, and counts jemalloc's
 * background threads (which block every signal) as threads: a program whose
 * threads all end by pthread_exit would never end, and a SIGTERM would not
 * end it either. Disabling joins them. A thread that never allocated may
 * still run: it loses background purging, nothing else. */
void tm_background_no_thread_left(void)
{
  rc_stop_and_join();
  if (!atomic_exchange_explicit(&bg_running, false, memory_order_relaxed)) return;
  bool off = false;
  tmje_mallctl("background_thread", NULL, NULL, &off, sizeof off);
}

void tm_background_postfork_child(void)
{
  atomic_store_explicit(&bg_running, false, memory_order_relaxed);
  atomic_store_explicit(&rc_failed, false, memory_order_relaxed);
  bg_init_ns = tm_clock_ns(CLOCK_MONOTONIC_COARSE);
  pthread_mutex_init(&rc_mu, NULL);
  /* A thread that only published starts again at the child's first commit:
   * a shell's children exec at once and mostly commit nothing (started at
   * their next allocation instead, a loop of 200 fork+exec from a preloaded
   * bash took 1.14x as long, 20 pairs). One that reclaimed starts again at
   * the child's next allocation. */
  bool rc_ran = atomic_exchange_explicit(&rc_running, false, memory_order_relaxed) && tm_reclaim_needed();
  rc_cv_ok = false;
  tm_watch_stop();   /* the parent's instance: the child's thread makes its own */
  tm_reclaim_postfork_child();
  /* The forking thread is the child's only one: it starts the reclaim thread
   * again on its way out of its next allocation. */
  tm_thread_t *self = &tm_tls;
  if (rc_ran && self->state == TM_THREAD_READY) tm_account_defer(self, bg_start_deferred);
}
