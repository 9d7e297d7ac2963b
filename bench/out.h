/* bench/out.h: output for the bench workloads.
 *
 * Everything goes through write(2), never stdio: under memkind's memtier,
 * stdio buffers flushed at exit can come out as NUL bytes. */
#ifndef BENCH_OUT_H
#define BENCH_OUT_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void say_to(int fd, const char *s)
{
	size_t n = strlen(s);
	while (n > 0) {
		ssize_t w = write(fd, s, n);
		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

static void say(const char *s)
{
	say_to(1, s);
}

/* A failure, on stderr: bench/run shows its last line. */
static inline void complain(const char *s)
{
	say_to(2, s);
}

/* Prints the shared object the program's malloc resolved to (--which: checks
 * that the preload took effect). The address through the GOT is the
 * interposed malloc. */
static void say_which_malloc(void)
{
	char line[512];
	void *(*volatile m)(size_t) = malloc;
	Dl_info info;
	if (dladdr((void *)m, &info) && info.dli_fname != NULL)
		snprintf(line, sizeof line, "malloc from: %s\n", info.dli_fname);
	else
		snprintf(line, sizeof line, "malloc from: (unknown)\n");
	say(line);
}

#endif
