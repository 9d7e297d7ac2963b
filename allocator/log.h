/*
 * The one way tiermalloc speaks: a single line "tiermalloc: ...\n" written to
 * stderr with write(2). Never allocates, never called from the malloc fast
 * path. Used for bad options, missing files and unavailable kernel features.
 */
#ifndef TM_LOG_H
#define TM_LOG_H

#include <stdbool.h>

void tm_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The same line to fd: for a stderr kept aside at start-up, since a program
 * may close fd 2 before its exit handlers run. */
void tm_warn_fd(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* While on (per thread), a line already said once in this process (of the
 * first 64 distinct ones) is not said again: for code that re-reads the
 * kernel's files at run time, which would repeat a complaint every second. */
void tm_log_quiet_repeats(bool on);

#endif
