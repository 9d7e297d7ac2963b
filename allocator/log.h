/*
 * The one way tiermalloc speaks: a single line "tiermalloc: ...\n" written to
 * stderr with write(2). Never allocates, never called from the malloc fast
 * path. Used for bad options, missing files and unavailable kernel features.
 */
#ifndef TM_LOG_H
#define TM_LOG_H

void tm_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The same line to fd: for a stderr kept aside at start-up, since a program
 * may close fd 2 before its exit handlers run. */
void tm_warn_fd(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
