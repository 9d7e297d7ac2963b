/* bench/churn.c: multi-threaded churn of mixed sizes with cross-thread frees,
 * and threads that come and go.
 *
 *   churn [rounds] [blocks-per-thread] [--which]
 *
 * Each round starts 2, 3 or 4 fresh threads (cycling) and joins them; no
 * thread outlives its round. A thread allocates blocks-per-thread blocks of
 * 8 B to 64 KiB (mostly small), in batches of BATCH:
 *   - half of each batch goes into the mailbox of the next thread, which
 *     frees them (cross-thread free);
 *   - the other half enters a ring of LIVE blocks the thread keeps, and the
 *     block it evicts is freed locally (so frees are not simply LIFO);
 * and it frees whatever its own mailbox holds. When every producer of the
 * round is done, each thread empties its mailbox and its ring and exits.
 *
 * Every block is stamped when allocated and checked when freed: a block
 * handed out twice, or overwritten, makes the program exit 1. The output is
 * deterministic (counts and a checksum of the sizes), written with write(2)
 * so it survives memtier's exit (see pairloop.c).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "out.h"
#include "rand.h"

#define BATCH 64
#define LIVE 256
#define MAXT 4

struct batch {
	struct batch *next;
	int n;
	void *p[BATCH / 2];
};

struct mailbox {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct batch *head, *tail;
};

struct round {
	int nthreads, round;
	long blocks;
	atomic_int producing;
	struct mailbox box[MAXT];
};

struct worker {
	struct round *r;
	int index;
	unsigned long allocs, cross, bytes; /* results */
	int bad;
};


static size_t pick_size(uint64_t *s)
{
	uint64_t r = next_rand(s);
	unsigned bucket = (unsigned)(r % 100);
	uint64_t v = r >> 8;
	if (bucket < 60)
		return 8 + v % 121;        /* 8 .. 128 */
	if (bucket < 85)
		return 129 + v % 896;      /* 129 .. 1 KiB */
	if (bucket < 97)
		return 1025 + v % 7168;    /* 1 KiB .. 8 KiB */
	return 8193 + v % 57344;           /* 8 KiB .. 64 KiB */
}

/* The tag covers the first word, or less in a block too small to hold it
 * apart from the end byte. */
static size_t tag_len(size_t n)
{
	return n - 1 < 8 ? n - 1 : 8;
}

/* Stamp: a size-derived tag in the first word, a size-derived byte at the end; small
 * blocks are filled, larger ones touched once per page. */
static void stamp(unsigned char *p, size_t n)
{
	uint64_t tag = (uint64_t)n * 0x9E3779B97F4A7C15ULL;
	if (n <= 1024) {
		memset(p, (int)(n & 0xff), n);
	} else {
		for (size_t o = 4096; o < n; o += 4096)
			p[o] = 0x5a;
	}
	memcpy(p, &tag, tag_len(n));
	p[n - 1] = (unsigned char)(n * 31u + 7u);
}

/* The size is recovered from the stamp (as a free that does not know it). */
static int check_and_free(unsigned char *p, size_t n)
{
	uint64_t tag, want = (uint64_t)n * 0x9E3779B97F4A7C15ULL;
	size_t k = tag_len(n);
	memcpy(&tag, p, k);
	int ok = memcmp(&tag, &want, k) == 0 && p[n - 1] == (unsigned char)(n * 31u + 7u);
	free(p);
	return ok;
}

/* A ring slot remembers its block's size; a block sent to another thread
 * carries it in its second word instead. */
struct live {
	unsigned char *p;
	size_t n;
};

static void post(struct mailbox *b, struct batch *bt)
{
	pthread_mutex_lock(&b->lock);
	bt->next = NULL;
	if (b->tail)
		b->tail->next = bt;
	else
		b->head = bt;
	b->tail = bt;
	pthread_cond_signal(&b->cond);
	pthread_mutex_unlock(&b->lock);
}

/* Take the whole list; if wait, block until there is some or no producer is
 * left. Returns NULL when empty (and, if wait, when nothing more can come). */
static struct batch *take(struct round *r, struct mailbox *b, int wait)
{
	pthread_mutex_lock(&b->lock);
	while (wait && b->head == NULL && atomic_load(&r->producing) > 0)
		pthread_cond_wait(&b->cond, &b->lock);
	struct batch *h = b->head;
	b->head = b->tail = NULL;
	pthread_mutex_unlock(&b->lock);
	return h;
}

static void free_batches(struct worker *w, struct batch *h)
{
	while (h != NULL) {
		struct batch *next = h->next;
		for (int i = 0; i < h->n; i++) {
			unsigned char *p = h->p[i];
			size_t n;
			memcpy(&n, p + 8, sizeof n);
			if (n < 24 || n > 65536 || !check_and_free(p, n))
				w->bad = 1;
		}
		free(h);
		h = next;
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct round *r = w->r;
	struct mailbox *mine = &r->box[w->index];
	struct mailbox *next = &r->box[(w->index + 1) % r->nthreads];
	uint64_t seed = 0x1234567ULL + (uint64_t)r->round * 7919u + (uint64_t)w->index * 104729u;
	struct live ring[LIVE];
	int ring_pos = 0;

	memset(ring, 0, sizeof ring);
	for (long done = 0; done < r->blocks; done += BATCH) {
		struct batch *out = malloc(sizeof *out);
		if (out == NULL) {
			w->bad = 1;
			break;
		}
		out->n = 0;
		for (int i = 0; i < BATCH; i++) {
			size_t n = pick_size(&seed);
			int send = (i & 1) == 0;
			/* sent blocks carry their size in the second word,
			 * clear of the end byte */
			if (send && n < 24)
				n = 24;
			unsigned char *p = malloc(n);
			if (p == NULL) {
				w->bad = 1;
				continue;
			}
			stamp(p, n);
			w->allocs++;
			w->bytes += n;
			if (send) {
				memcpy(p + 8, &n, sizeof n);
				out->p[out->n++] = p;
			} else {
				struct live *slot = &ring[ring_pos];
				ring_pos = (ring_pos + 1) % LIVE;
				if (slot->p != NULL && !check_and_free(slot->p, slot->n))
					w->bad = 1;
				slot->p = p;
				slot->n = n;
			}
		}
		w->cross += (unsigned long)out->n;
		post(next, out);
		free_batches(w, take(r, mine, 0));
	}

	/* Done producing: tell everyone, then drain until nothing can come. */
	if (atomic_fetch_sub(&r->producing, 1) == 1) {
		for (int t = 0; t < r->nthreads; t++) {
			pthread_mutex_lock(&r->box[t].lock);
			pthread_cond_broadcast(&r->box[t].cond);
			pthread_mutex_unlock(&r->box[t].lock);
		}
	}
	for (;;) {
		struct batch *h = take(r, mine, 1);
		if (h == NULL)
			break;
		free_batches(w, h);
	}
	for (int i = 0; i < LIVE; i++)
		if (ring[i].p != NULL && !check_and_free(ring[i].p, ring[i].n))
			w->bad = 1;
	return NULL;
}

int main(int argc, char **argv)
{
	long rounds = 400, blocks = 128;
	int which = 0, nargs = 0;
	char line[512];

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--which") == 0)
			which = 1;
		else if (nargs++ == 0)
			rounds = strtol(argv[i], NULL, 10);
		else
			blocks = strtol(argv[i], NULL, 10);
	}
	if (rounds <= 0 || blocks <= 0) {
		say("usage: churn [rounds] [blocks-per-thread] [--which]\n");
		return 2;
	}

	unsigned long allocs = 0, cross = 0, bytes = 0, threads = 0;
	int bad = 0;
	for (long rd = 0; rd < rounds; rd++) {
		struct round r;
		struct worker w[MAXT];
		pthread_t tid[MAXT];

		memset(&r, 0, sizeof r);
		r.nthreads = 2 + (int)(rd % 3);
		r.round = (int)rd;
		r.blocks = blocks;
		atomic_init(&r.producing, r.nthreads);
		for (int t = 0; t < r.nthreads; t++) {
			pthread_mutex_init(&r.box[t].lock, NULL);
			pthread_cond_init(&r.box[t].cond, NULL);
		}
		memset(w, 0, sizeof w);
		for (int t = 0; t < r.nthreads; t++) {
			w[t].r = &r;
			w[t].index = t;
			if (pthread_create(&tid[t], NULL, worker_main, &w[t]) != 0) {
				say("churn: pthread_create failed\n");
				return 1;
			}
		}
		for (int t = 0; t < r.nthreads; t++) {
			pthread_join(tid[t], NULL);
			allocs += w[t].allocs;
			cross += w[t].cross;
			bytes += w[t].bytes;
			bad |= w[t].bad;
		}
		threads += (unsigned long)r.nthreads;
		for (int t = 0; t < r.nthreads; t++) {
			pthread_mutex_destroy(&r.box[t].lock);
			pthread_cond_destroy(&r.box[t].cond);
		}
	}

	snprintf(line, sizeof line,
		 "churn: %ld rounds, %lu threads, %lu allocations (%lu freed by another thread), %lu bytes%s\n",
		 rounds, threads, allocs, cross, bytes, bad ? ", CORRUPTION DETECTED" : "");
	say(line);
	if (which)
		say_which_malloc();
	return bad ? 1 : 0;
}
