/* bench/stress.c: long-lived threads allocating blocks of mixed sizes and
 * alignments, each freed by its own thread or by another.
 *
 *   stress [threads] [rounds] [--which]
 *
 * `threads` threads (8: more than this machine's CPUs) run `rounds` rounds
 * (200) each. A round allocates BLOCKS blocks: 94 % of 16 B-2 KiB, 5 % up to
 * 32 KiB, 1 % up to 256 KiB; one in eight through posix_memalign or
 * aligned_alloc (alignments 16 B-4 KiB). Every block is stamped. Then the
 * thread frees half of them in a shuffled order and swaps the other half
 * into a shared pool of POOL slots (in SHARDS locked shards), freeing the
 * block each swap takes out - usually another thread's. The main thread
 * frees what the pool holds at the end. It complements churn.c, whose
 * threads live a few hundred allocations: these live the whole run.
 *
 * A block handed out twice, overwritten or misaligned makes the program exit
 * 1. The output is deterministic (counts and a checksum of the sizes), and
 * goes through write(2), as pairloop.c's does.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "out.h"
#include "rand.h"

#define BLOCKS 1000
#define POOL 4096
#define SHARDS 64
#define MAXT 64

struct block {
	unsigned char *p;
	size_t n;
};

static struct {
	pthread_mutex_t lock;
	struct block slot[POOL / SHARDS];
} pool[SHARDS];

struct worker {
	int index, rounds;
	unsigned long allocs, aligned, bytes;   /* results */
	unsigned long misaligned;               /* blocks not on their alignment */
	size_t misaligned_first;                /* the first one's alignment */
	int bad;                                /* a block lost or overwritten */
};

static size_t pick_size(uint64_t r)
{
	unsigned bucket = (unsigned)(r % 100);
	uint64_t v = r >> 8;
	if (bucket < 94)
		return 16 + v % 2033;          /* 16 B .. 2 KiB */
	if (bucket < 99)
		return 2049 + v % 30720;       /* 2 KiB .. 32 KiB */
	return 32769 + v % 229376;             /* 32 KiB .. 256 KiB */
}

static uint64_t tag_of(size_t n)
{
	return (uint64_t)n * 0x9E3779B97F4A7C15ULL;
}

/* A size-derived tag in the first word, a size-derived byte at the end, and
 * one byte a page between (the block is used, as a program would). */
static void stamp(unsigned char *p, size_t n)
{
	uint64_t tag = tag_of(n);
	for (size_t o = 4096; o < n; o += 4096)
		p[o] = 0x5a;
	memcpy(p, &tag, 8);
	p[n - 1] = (unsigned char)(n * 31u + 7u);
}

static int check_and_free(struct block b)
{
	uint64_t tag, want = tag_of(b.n);
	memcpy(&tag, b.p, 8);
	int ok = tag == want && b.p[b.n - 1] == (unsigned char)(b.n * 31u + 7u);
	free(b.p);
	return ok;
}

static unsigned char *allocate(struct worker *w, uint64_t r, size_t n)
{
	void *p = NULL;
	if ((r >> 40) % 8 != 0)
		return malloc(n);
	size_t align = (size_t)16 << ((r >> 44) % 9);   /* 16 B .. 4 KiB */
	w->aligned++;
	if ((r >> 50) & 1) {
		if (posix_memalign(&p, align, n) != 0)
			return NULL;
	} else {
		p = aligned_alloc(align, (n + align - 1) & ~(align - 1));
	}
	if (p != NULL && ((uintptr_t)p & (align - 1)) != 0 && w->misaligned++ == 0)
		w->misaligned_first = align;
	return p;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint64_t seed = 0x9E3779B97F4A7C15ULL ^ ((uint64_t)w->index * 104729u + 1);
	struct block *mine = malloc(BLOCKS * sizeof *mine);
	if (mine == NULL) {
		w->bad = 1;
		return NULL;
	}
	for (int round = 0; round < w->rounds && !w->bad; round++) {
		for (int i = 0; i < BLOCKS; i++) {
			uint64_t r = next_rand(&seed);
			size_t n = pick_size(r);
			unsigned char *p = allocate(w, r, n);
			if (p == NULL) {
				w->bad = 1;
				n = 0;
			} else {
				stamp(p, n);
			}
			mine[i] = (struct block){ p, n };
			w->allocs++;
			w->bytes += n;
		}
		/* Shuffle, so frees come in no allocation order. */
		for (int i = BLOCKS - 1; i > 0; i--) {
			int j = (int)(next_rand(&seed) % (uint64_t)(i + 1));
			struct block t = mine[i];
			mine[i] = mine[j];
			mine[j] = t;
		}
		for (int i = 0; i < BLOCKS; i++) {
			struct block b = mine[i];
			if (b.p == NULL)
				continue;
			if (i & 1) {
				if (!check_and_free(b))
					w->bad = 1;
				continue;
			}
			uint64_t r = next_rand(&seed);
			unsigned s = (unsigned)(r % SHARDS), k = (unsigned)((r >> 8) % (POOL / SHARDS));
			pthread_mutex_lock(&pool[s].lock);
			struct block out = pool[s].slot[k];
			pool[s].slot[k] = b;
			pthread_mutex_unlock(&pool[s].lock);
			if (out.p != NULL && !check_and_free(out))
				w->bad = 1;
		}
	}
	free(mine);
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = 8, rounds = 200, which = 0, pos = 0;
	char line[512];

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--which") == 0)
			which = 1;
		else if (pos++ == 0)
			threads = atoi(argv[i]);
		else
			rounds = atoi(argv[i]);
	}
	if (threads < 1 || threads > MAXT || rounds < 1) {
		say("usage: stress [threads (1-64)] [rounds] [--which]\n");
		return 2;
	}
	for (int s = 0; s < SHARDS; s++)
		pthread_mutex_init(&pool[s].lock, NULL);

	struct worker w[MAXT];
	pthread_t tid[MAXT];
	memset(w, 0, sizeof w);
	for (int t = 0; t < threads; t++) {
		w[t].index = t;
		w[t].rounds = rounds;
		if (pthread_create(&tid[t], NULL, worker_main, &w[t]) != 0) {
			say("stress: pthread_create failed\n");
			return 1;
		}
	}
	unsigned long allocs = 0, aligned = 0, bytes = 0, misaligned = 0;
	size_t misaligned_first = 0;
	int bad = 0;
	for (int t = 0; t < threads; t++) {
		pthread_join(tid[t], NULL);
		allocs += w[t].allocs;
		aligned += w[t].aligned;
		bytes += w[t].bytes;
		bad |= w[t].bad;
		if (misaligned == 0)
			misaligned_first = w[t].misaligned_first;
		misaligned += w[t].misaligned;
	}
	for (int s = 0; s < SHARDS; s++)
		for (int k = 0; k < POOL / SHARDS; k++)
			if (pool[s].slot[k].p != NULL && !check_and_free(pool[s].slot[k]))
				bad = 1;
	if (bad || misaligned) {
		snprintf(line, sizeof line, "stress: %s%lu blocks misaligned (the first asked for %zu B)\n",
			 bad ? "a block was lost or overwritten; " : "", misaligned, misaligned_first);
		complain(line);
		return 1;
	}
	snprintf(line, sizeof line, "stress: %d threads, %lu allocations (%lu aligned), %lu bytes\n", threads, allocs,
		 aligned, bytes);
	say(line);
	if (which)
		say_which_malloc();
	return 0;
}
