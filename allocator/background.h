/*
 * background: the one owner of the threads that run for the library rather
 * than for the program: jemalloc's background purging threads and the
 * library's own thread, which publishes the live record (live.h) and runs
 * reclaim (reclaim.h) once a limit can be crossed. Every rule learned about
 * such threads lives here:
 *   - exit: glibc ends a process when its last thread ends, and counts these
 *     threads (which block every signal) as threads; so they stop when the
 *     last program thread that used the allocator ends, and start again
 *     with the next second thread;
 *   - fork: they do not survive a fork; the child's next thread starts them;
 *   - locks: starting and stopping take jemalloc's ctl_mtx, which a thread
 *     stopping them holds while it joins them, so nothing here may run on
 *     one of jemalloc's own threads (thread.c keeps them out).
 */
#ifndef TM_BACKGROUND_H
#define TM_BACKGROUND_H

#include <stdbool.h>
#include <stdint.h>

/* Start-up, before the arenas are hooked: takes the lower layers'
 * notifications (notify.h): committed memory wakes reclaim
 * (tm_background_reclaim_wanted), a grown heap may start jemalloc's
 * background thread (tm_background_heap_grew). */
void tm_background_init(void);

/* Start-up, after the arenas are hooked: with TIERMALLOC_BACKGROUND_THREAD=on,
 * starts jemalloc's background thread now. */
void tm_background_start(void);

/* A second program thread started using the allocator: with
 * TIERMALLOC_BACKGROUND_THREAD=auto (or on, in a fork child), starts
 * jemalloc's background thread. */
void tm_background_second_thread(void);

/* The heap grew (an extent hook carved address space, notify.h; hooks may not start a
 * thread, so this only asks the calling thread to do it at its next
 * allocation, tm_account_defer): with TIERMALLOC_BACKGROUND_THREAD=auto,
 * once the heap has held 64 MiB, jemalloc's background thread is started,
 * so that freed memory goes back to the kernel within the decay time even
 * in a single-threaded program that stops calling the allocator. */
void tm_background_heap_grew(void);

/* Names of the library's thread (thread.c keeps it out of the arenas):
 * while it only publishes the live record, and once it runs reclaim too. */
#define TM_PUBLISH_THREAD_NAME "tiermalloc_pub"
#define TM_RECLAIM_THREAD_NAME "tiermalloc_rcl"

/* Called as memory is committed (an extent hook, notify.h: it only asks the
 * calling thread, tm_account_defer): when the library's thread is wanted and
 * not running, it starts. Wanted: when reclaim is needed (tm_reclaim_needed),
 * or for the record alone (the tick's wants_thread): so a program that
 * commits memory after start-up has it, and one that never does (ls, true)
 * has none (measured: python3 -c pass preloaded, with the thread against
 * without, 1.00x wall over 80 pairs). A program that allocates without
 * committing (from what start-up committed) has it too once it has run a
 * second (tm_notify_allocated, every TIERMALLOC_SITE_SAMPLE bytes or so).
 * It runs every signal blocked and never allocates. */
void tm_background_reclaim_wanted(void);

/* Periodic work for a module above this one (live.h publishes its record
 * so). The library's thread calls tick(true) at each wake: it returns the
 * nanoseconds until it wants the thread again (UINT64_MAX: never); stopped
 * runs as the thread ends; wants_thread says whether the work is worth the
 * thread at all; prepare runs first, on the program thread that starts it.
 * While no thread runs, memory being committed asks due() (cheap: no lock,
 * no syscall) and, when it says so, the committing thread calls tick(false)
 * on its way out of malloc. Set once; *t stays valid for the life of the
 * process. */
typedef struct tm_background_tick_s {
  uint64_t (*tick)(bool on_thread);
  bool (*due)(void);
  void (*stopped)(void);
  bool (*wants_thread)(void);
  void (*prepare)(void);
} tm_background_tick_t;
void tm_background_set_tick(const tm_background_tick_t *t);

/* The last program thread that used the allocator has exited: stops them. */
void tm_background_no_thread_left(void);

/* Fork: the library thread's lock is held across it; in the child none of
 * the threads survived: the library's thread starts again at the child's
 * next allocation if it ran reclaim in the parent, else by the rules above,
 * counted from the fork. */
void tm_background_prefork(void);
void tm_background_postfork_parent(void);
void tm_background_postfork_child(void);

#endif
