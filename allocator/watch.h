/*
 * watch: the reclaim thread's sleep, woken early when one of a few files is
 * written (inotify IN_MODIFY: a write(2) to a cgroup's memory.high or
 * memory.max), or by another thread (tm_watch_kick). Under TCG each timed
 * wake cost the thread about 0.5 ms of CPU, so waking four times a second to
 * read the cgroup's limits was most of its cost while idle; this sleeps
 * until the next pass is due, and sees a write at once.
 *
 * One instance per process, used by one thread at a time; tm_watch_kick may
 * be called from any thread. The instance is a file descriptor, which the
 * program could close and reuse behind the library's back: it is read and
 * closed only after /proc/self/fdinfo shows it is still this inotify
 * instance (a watch on one of its inodes), so the program's data is never
 * consumed and its descriptors never closed. Nothing here allocates.
 */
#ifndef TM_WATCH_H
#define TM_WATCH_H

#include <stdbool.h>
#include <stdint.h>

/* Creates the instance (close-on-exec, non-blocking), with one watch on "/"
 * kept for tm_watch_kick. false: no inotify (the caller sleeps its own way). */
bool tm_watch_start(void);

/* Watches exactly these files from now on (at most 8; the ones already
 * watched stay). false when one cannot be watched: a change to it would
 * not wake the waiter. */
bool tm_watch_files(const char *const *paths, unsigned n);

/* Sleeps up to ns nanoseconds. 1: a watched file was written, or a kick
 * came (the events are consumed); 0: the time passed; -1: not watching,
 * or the descriptor is not this instance any more (then it is forgotten,
 * never read nor closed: the caller sleeps its own way from now on). */
int tm_watch_wait(uint64_t ns);

/* The instance is in use (started, not stopped nor forgotten). */
bool tm_watch_active(void);

/* Wakes a thread in tm_watch_wait (or makes its next call return at once);
 * any thread. */
void tm_watch_kick(void);

/* Closes the instance if it is still this one; forgets it either way. */
void tm_watch_stop(void);

#endif
