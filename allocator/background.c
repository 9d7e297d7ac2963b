#include "background.h"

#include <stdatomic.h>
#include <stdbool.h>

#include "account.h"
#include "je.h"
#include "log.h"
#include "options.h"
#include "range.h"

enum { BG_AUTO, BG_ON, BG_OFF };   /* TIERMALLOC_BACKGROUND_THREAD */
static atomic_bool bg_running;

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

/* glibc ends a process when its last thread ends, and counts jemalloc's
 * background threads (which block every signal) as threads: a program whose
 * threads all end by pthread_exit would never end, and a SIGTERM would not
 * end it either. Disabling joins them. A thread that never allocated may
 * still run: it loses background purging, nothing else. */
void tm_background_no_thread_left(void)
{
  if (!atomic_exchange_explicit(&bg_running, false, memory_order_relaxed)) return;
  bool off = false;
  tmje_mallctl("background_thread", NULL, NULL, &off, sizeof off);
}

void tm_background_postfork_child(void)
{
  atomic_store_explicit(&bg_running, false, memory_order_relaxed);
}

/* Started once the heap has held this much: a program that never grows so
 * far never has much to give back, and gets no thread. */
#define BG_HEAP_MIN ((uint64_t)64 << 20)

static void bg_start_deferred(void)
{
  bg_start();
}

void tm_background_heap_grew(void)
{
  if (atomic_load_explicit(&bg_running, memory_order_relaxed) ||
      tm_option(TM_OPTION_BACKGROUND_THREAD)->num != BG_AUTO)
    return;
  uint64_t mapped = 0;
  for (unsigned t = 0; t < tm_ranges.n; t++) mapped += tm_range_mapped(t);
  tm_thread_t *self = &tm_tls;
  if (mapped < BG_HEAP_MIN || self->state != TM_THREAD_READY || self->internal) return;
  tm_account_defer(self, bg_start_deferred);
}

void tm_background_start(void)
{
  if (tm_option(TM_OPTION_BACKGROUND_THREAD)->num == BG_ON) bg_start();
}
