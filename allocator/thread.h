/*
 * thread: the life of a thread in tiermalloc, from its first allocator call
 * (tm_thread, inline for the fast path, and tm_thread_prepare)
 * to its exit: start-up on the process's first call, the arena hook before
 * jemalloc picks the thread's arena, counting, the library's threads when
 * the process becomes multi-threaded, and the reverse at exit.
 *
 * jemalloc's own background threads are told apart first of all, and get
 * neither an arena hook nor a say in when background threads stop: hooking
 * takes jemalloc's ctl_mtx, which the thread stopping them holds while it
 * joins them, and their first call here can be glibc freeing a joined
 * thread's TLS.
 */
#ifndef TM_THREAD_H
#define TM_THREAD_H

#include "account.h"

/* The slow side of tm_thread: sets the calling thread up (and tiermalloc, on
 * the process's first call); NULL when it cannot count now. */
tm_thread_t *tm_thread_prepare(void);

/* The calling thread, ready to count; NULL when it cannot count now. Starts
 * tiermalloc on the first call of the process. A READY thread has runs open;
 * every other state has TM_NO_RUN, so the fast paths' run compares send it
 * to its set-up (thread.c). */
static inline tm_thread_t *tm_thread(void)
{
  tm_thread_t *t = &tm_tls;
  if (__builtin_expect(t->state == TM_THREAD_READY, 1)) return t;
  return tm_thread_prepare();
}

#endif
