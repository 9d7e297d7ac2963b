/*
 * thread: the life of a thread in tiermalloc, from its first allocator call
 * (tm_thread_prepare, declared in account.h for the fast path's tm_thread)
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

tm_thread_t *tm_thread_prepare(void);

#endif
