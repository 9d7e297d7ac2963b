/* bench/pairloop.c: a tight malloc(n)/free(p) pair loop.
 *
 *   pairloop [iterations] [--which]
 *
 * n cycles through a few small sizes. An empty asm statement that takes the
 * pointer as an input (and clobbers memory) stops the compiler from pairing
 * malloc with free and deleting both. Every block gets one byte written so
 * the allocator cannot hand out a bogus pointer unnoticed.
 *
 * Output goes through write(2), never stdio: under memkind's memtier, stdio
 * buffers flushed at exit can come out as NUL bytes. --which also prints the
 * shared object that the program's malloc resolved to (checks the preload).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "out.h"


int main(int argc, char **argv)
{
	static const size_t sizes[8] = { 16, 24, 32, 48, 64, 96, 128, 40 };
	long iters = 50000000;
	int which = 0;
	char line[512];

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--which") == 0)
			which = 1;
		else
			iters = strtol(argv[i], NULL, 10);
	}
	if (iters <= 0) {
		say("usage: pairloop [iterations] [--which]\n");
		return 2;
	}

	unsigned long sum = 0;
	for (long i = 0; i < iters; i++) {
		size_t n = sizes[i & 7];
		unsigned char *p = malloc(n);
		if (p == NULL) {
			say("pairloop: malloc returned NULL\n");
			return 1;
		}
		p[0] = (unsigned char)i;
		__asm__ volatile("" : : "r"(p) : "memory");
		sum += p[0];
		free(p);
	}

	snprintf(line, sizeof line, "pairloop: %ld pairs, sum %lu\n", iters, sum);
	say(line);
	if (which)
		say_which_malloc();
	return 0;
}
