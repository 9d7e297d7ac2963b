/* bench/reclaim.c: the reclaim benchmarks of issue 10, run in the tiered VM
 * by bench/reclaim-vm (make bench-reclaim).
 *
 * Built twice from this file:
 *   reclaim-tm     linked against libtiermalloc.so (-ltiermalloc), every mode;
 *   reclaim-plain  -DRECLAIM_PLAIN, linked to no allocator (glibc, or a
 *                  preloaded jemalloc): the lat and moverate modes only.
 *
 *   reclaim lat [--threads N] [--seconds S] [--slots K] [--ballast MiB]
 *               [--cg CGROUP --cg-from MiB --cg-to MiB]
 *       Service-like loop: N threads, each keeps K slots of 16 B-64 KiB
 *       blocks (60 % <= 128 B, 30 % <= 4 KiB, 10 % <= 64 KiB), replaces a
 *       random slot per op (free the old block, malloc a new one, write a
 *       word in each of its pages), timing every malloc and free with
 *       clock_gettime(CLOCK_MONOTONIC) into a per-thread log-linear histogram
 *       (no allocation while measuring). --ballast: that much of 1 MiB
 *       blocks, written before the workers start (the oldest memory, so the
 *       coldest by commit age). --cg: the program runs in CGROUP (cgroup v2)
 *       and sets its memory.high to --cg-from MiB, then lowers it linearly to
 *       --cg-to MiB over the measurement, every 250 ms; with
 *       TIERMALLOC_TOPTIER_RATIO the top tier's high follows, so the reclaim
 *       thread demotes all through the measurement (tier_malloc's pinned
 *       chunks are never demoted, and new memory never lands above high, so
 *       a falling budget is how a program makes reclaim work continuously).
 *   reclaim cgburst CGROUP [--steady MiB] [--burst MiB] [--high MiB]
 *                   [--limit memory.high|memory.max] [--pages 4k|thp]
 *                                                         (reclaim-tm)
 *       Run inside CGROUP (a cgroup v2 directory, its memory.high and max
 *       large at start): allocates steady + burst MiB of 1 MiB blocks, written
 *       (all on tier 0), then writes the cgroup's memory.high (or max) so
 *       that its scaled top-tier share (x node0 / (node0 + node1) MemTotal) is
 *       --high MiB, and polls its live record (tiermalloc.h) every 10 ms
 *       until tier 0's used <= that share, and on until demotion has stopped
 *       for 300 ms (run it with TIERMALLOC_LIVE_MS=10; without a record it
 *       polls tier_stats_get); then where the pages are (move_pages) and
 *       whether the data is intact. --pages 4k: no transparent huge page in
 *       the process (PR_SET_THP_DISABLE), so the heap is of the same pages
 *       as moverate's 4 KiB runs; thp (the default): as the system gives.
 *   reclaim moverate [--mib M]
 *       move_pages(2) of M MiB of anonymous memory from node 0 to node 1
 *       (4 KiB pages, then with MADV_HUGEPAGE), and mbind(MPOL_MF_MOVE).
 *   reclaim lockwait [--mib M]
 *       What moving M MiB a 2 MiB chunk at a time costs another thread that
 *       maps, touches and unmaps a page in a loop (the mmap lock): by
 *       mbind(MPOL_MF_MOVE), and by mbind of the policy + move_pages (as
 *       tiermalloc demotes), 4 KiB pages and THP.
 *   reclaim cpu [--heap MiB] [--idle S]                  (reclaim-tm)
 *       With budgets set: a heap of 1 MiB blocks, then idle S seconds;
 *       reclaim_cpu_ns and the reclaim thread's run time (schedstat) over
 *       the idle window.
 *
 * Every figure is printed as one "RESULT <mode> key=value ..." line (and
 * "NOTE ..." lines), parsed by bench/reclaim-vm.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <numaif.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#ifndef RECLAIM_PLAIN
#include "liverec.h"
#include "tiermalloc.h"
#endif

#define MIB (1024ull * 1024)
#define MAXT 8

static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "reclaim: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static double ms(uint64_t ns) { return (double)ns / 1e6; }

/* Writes a varied word into every page (zram and KSM see distinct pages,
 * and the pages become resident). */
static void touch(void *p, size_t len, uint64_t seed)
{
	volatile char *c = p;
	for (size_t off = 0; off < len; off += 4096)
		*(volatile uint64_t *)(c + off) = seed ^ (off * 0x9e3779b97f4a7c15ull);
	if (len >= 8)
		*(volatile uint64_t *)(c + len - 8) = seed;
}

/* move_pages(nodes=NULL) over [p, p+len): pages per node into n0, n1, the
 * rest (other nodes, absent, errors) into other. */
static void pages_where(const void *p, size_t len, size_t *n0, size_t *n1, size_t *other)
{
	enum { BATCH = 1024 };
	void *pages[BATCH];
	int status[BATCH];
	uintptr_t a = (uintptr_t)p & ~(uintptr_t)4095, end = (uintptr_t)p + len;
	while (a < end) {
		unsigned long n = 0;
		for (; n < BATCH && a < end; n++, a += 4096)
			pages[n] = (void *)a;
		if (move_pages(0, n, pages, NULL, status, 0) < 0) {
			*other += n;
			continue;
		}
		for (unsigned long i = 0; i < n; i++) {
			if (status[i] == 0) (*n0)++;
			else if (status[i] == 1) (*n1)++;
			else (*other)++;
		}
	}
}

/* ---- histogram: 32 linear steps per power of two (about 3 %) ------------ */

#define H_SUB_BITS 5
#define H_SUB (1 << H_SUB_BITS)
#define H_LINEAR 64                       /* 0..63 ns one bucket each */
#define H_BUCKETS (H_LINEAR + (64 - 6) * H_SUB)

typedef struct hist_s {
	uint64_t n, sum, max;
	uint64_t b[H_BUCKETS];
} hist_t;

static inline void hist_add(hist_t *h, uint64_t v)
{
	unsigned i;
	if (v < H_LINEAR) {
		i = (unsigned)v;
	} else {
		unsigned e = 63 - (unsigned)__builtin_clzll(v);       /* >= 6 */
		unsigned sub = (unsigned)(v >> (e - H_SUB_BITS)) & (H_SUB - 1);
		i = H_LINEAR + (e - 6) * H_SUB + sub;
	}
	h->b[i]++;
	h->n++;
	h->sum += v;
	if (v > h->max) h->max = v;
}

/* The lower bound of bucket i, plus half its width. */
static double hist_value(unsigned i)
{
	if (i < H_LINEAR) return i;
	unsigned e = 6 + (i - H_LINEAR) / H_SUB, sub = (i - H_LINEAR) % H_SUB;
	double lo = (double)(1ull << e) + (double)sub * (double)(1ull << (e - H_SUB_BITS));
	return lo + (double)(1ull << (e - H_SUB_BITS)) / 2;
}

static double hist_pct(const hist_t *h, double pct)
{
	if (h->n == 0) return 0;
	uint64_t rank = (uint64_t)((double)h->n * pct / 100.0);
	if (rank >= h->n) rank = h->n - 1;
	uint64_t seen = 0;
	for (unsigned i = 0; i < H_BUCKETS; i++) {
		seen += h->b[i];
		if (seen > rank) return hist_value(i);
	}
	return (double)h->max;
}

static void hist_merge(hist_t *into, const hist_t *h)
{
	for (unsigned i = 0; i < H_BUCKETS; i++) into->b[i] += h->b[i];
	into->n += h->n;
	into->sum += h->sum;
	if (h->max > into->max) into->max = h->max;
}

/* ---- tier stats (reclaim-tm only) ----------------------------------------- */

#ifndef RECLAIM_PLAIN
static tier_stats_t stats_buf;   /* static: no allocation for the stats */
static int stats_warned;

/* Fills stats_buf; 0 when the library's stats have this header's layout. */
static int stats(void)
{
	memset(&stats_buf, 0, sizeof stats_buf);
	if (tier_stats_get(&stats_buf, sizeof stats_buf) != 0) return -1;
	if (stats_buf.version != TIER_STATS_VERSION) {
		if (!stats_warned++)
			fprintf(stderr, "NOTE library stats version %u, header %u: stats figures not read\n",
			       stats_buf.version, TIER_STATS_VERSION);
		return -1;
	}
	return 0;
}

#if TIER_STATS_VERSION >= 3
#define HAVE_RECLAIM_STATS 1
/* The live record (include/tiermalloc.h), mapped once: the cgburst poll reads
 * its copy of the stats every 10 ms. tier_stats_get measures resident (a walk
 * of the page tables, /proc/self/numa_maps) at each call: 4-7 ms under TCG,
 * so a 10 ms poll of it took 48-74 % of the guest's time (its two vCPUs share
 * one host thread) and the mmap lock from the very demotion it timed. */
static const tier_live_t *live_rec;

static int live_open(void)
{
	const char *dir = getenv("TIERMALLOC_LIVE_DIR");
	char path[512];
	snprintf(path, sizeof path, "%s/%s%d", dir && *dir ? dir : "/dev/shm", TIER_LIVE_PREFIX, (int)getpid());
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) return -1;
	void *m = mmap(NULL, sizeof(tier_live_t), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED) return -1;
	live_rec = m;
	static tier_live_t probe;
	return tm_liverec_read(live_rec, sizeof *live_rec, &probe, 1000) == 0 && probe.size == sizeof probe ? 0 : -1;
}

/* Fills stats_buf from the live record (the writer's seqlock, read as
 * tierctl reads it: allocator/liverec.h); *published: its CLOCK_REALTIME.
 * 0, or -1 when there is no usable record. */
static int live_stats(uint64_t *published)
{
	static tier_live_t copy;
	if (!live_rec || tm_liverec_read(live_rec, sizeof *live_rec, &copy, 1000) != 0) return -1;
	if (copy.size != sizeof copy || copy.stats.version != TIER_STATS_VERSION) return -1;
	stats_buf = copy.stats;
	*published = copy.published_ns;
	return 0;
}

static uint64_t st_demoted(void) { return stats_buf.tier[0].reclaim.demoted; }
static uint64_t st_failed(void) { return stats_buf.tier[0].reclaim.failed; }
static uint64_t st_passes(void) { return stats_buf.reclaim_passes; }
static uint64_t st_cpu(void) { return stats_buf.reclaim_cpu_ns; }
static unsigned st_state(void) { return stats_buf.reclaim_state; }
#else
#define HAVE_RECLAIM_STATS 0
static uint64_t st_demoted(void) { return 0; }
static uint64_t st_failed(void) { return 0; }
static uint64_t st_passes(void) { return 0; }
static uint64_t st_cpu(void) { return 0; }
static unsigned st_state(void) { return 0; }
#endif
static uint64_t st_used0(void) { return stats_buf.tier[0].used; }
static uint64_t st_high0(void) { return stats_buf.tier[0].budget.high; }
static uint64_t st_max0(void) { return stats_buf.tier[0].budget.max; }
#endif

/* ---- blocks of a heap, written and checked -------------------------------- */

typedef struct blocks_s {
	void **p;
	size_t n, size;
} blocks_t;

static void blocks_alloc(blocks_t *b, uint64_t total, size_t size, uint64_t seed)
{
	b->size = size;
	b->n = total / size;
	b->p = calloc(b->n, sizeof *b->p);
	if (!b->p) die("calloc");
	for (size_t i = 0; i < b->n; i++) {
		b->p[i] = malloc(size);
		if (!b->p[i]) die("alloc %zu: %s", size, strerror(errno));
		touch(b->p[i], size, seed + i);
	}
}

static void blocks_where(const blocks_t *b, size_t *n0, size_t *n1, size_t *other)
{
	*n0 = *n1 = *other = 0;
	for (size_t i = 0; i < b->n; i++) pages_where(b->p[i], b->size, n0, n1, other);
}

/* Checks the words touch() wrote are still there (no data lost). */
static size_t blocks_check(const blocks_t *b, uint64_t seed)
{
	size_t bad = 0;
	for (size_t i = 0; i < b->n; i++) {
		const char *c = b->p[i];
		for (size_t off = 0; off + 8 <= b->size; off += 4096)
			if (*(const uint64_t *)(c + off) != ((seed + i) ^ (off * 0x9e3779b97f4a7c15ull)))
				bad++;
	}
	return bad;
}

static void blocks_free(blocks_t *b)
{
	for (size_t i = 0; i < b->n; i++) free(b->p[i]);
	free(b->p);
}

/* ---- lat -------------------------------------------------------------------- */

typedef struct worker_s {
	pthread_t th;
	int id;
	hist_t hm, hf;         /* malloc, free */
	uint64_t ops;
	char pad[64];
} worker_t;

static struct {
	int threads, slots;
	double seconds;
	const char *cg;                  /* --cg: the cgroup whose memory.high is lowered */
	uint64_t cg_from, cg_to;         /* memory.high from, to, MiB */
	uint64_t ballast;                /* MiB of 1 MiB blocks written before the workers */
} lat = { 2, 4096, 10, NULL, 0, 0, 0 };

static atomic_int lat_phase;     /* 0 warm-up, 1 measure, 2 stop */
static atomic_int lat_ready;

static inline uint64_t xs(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static size_t pick_size(uint64_t r)
{
	unsigned c = (unsigned)(r % 100);
	uint64_t q = r >> 8;
	if (c < 60) return 16 + q % (128 - 16 + 1);
	if (c < 90) return 129 + q % (4096 - 129 + 1);
	return 4097 + q % (65536 - 4097 + 1);
}

static void *lat_worker(void *arg)
{
	worker_t *w = arg;
	uint64_t rng = 0x243f6a8885a308d3ull * (uint64_t)(w->id + 1);
	void **slot = calloc((size_t)lat.slots, sizeof *slot);
	if (!slot) die("calloc");
	for (int i = 0; i < lat.slots; i++) {
		size_t sz = pick_size(xs(&rng));
		slot[i] = malloc(sz);
		if (!slot[i]) die("malloc %zu", sz);
		touch(slot[i], sz, rng);
	}
	atomic_fetch_add(&lat_ready, 1);
	while (atomic_load(&lat_phase) == 0)
		sleep_ns(1000000);
	uint64_t ops = 0;
	while (1) {
		if ((ops & 255) == 0 && atomic_load_explicit(&lat_phase, memory_order_relaxed) != 1)
			break;
		uint64_t r = xs(&rng);
		int i = (int)(r % (uint64_t)lat.slots);
		size_t sz = pick_size(xs(&rng));
		uint64_t t0 = now_ns();
		free(slot[i]);
		uint64_t t1 = now_ns();
		void *p = malloc(sz);
		uint64_t t2 = now_ns();
		if (!p) die("malloc %zu", sz);
		hist_add(&w->hf, t1 - t0);
		hist_add(&w->hm, t2 - t1);
		touch(p, sz, r);
		slot[i] = p;
		ops++;
	}
	w->ops = ops;
	for (int i = 0; i < lat.slots; i++) free(slot[i]);
	free(slot);
	return NULL;
}

static int write_file(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY);
	if (fd < 0) return errno;
	ssize_t n = write(fd, val, strlen(val));
	int err = n == (ssize_t)strlen(val) ? 0 : errno;
	close(fd);
	return err;
}

static int cg_write_high(const char *cg, const char *file, uint64_t bytes)
{
	char path[512], val[32];
	snprintf(path, sizeof path, "%s/%s", cg, file);
	snprintf(val, sizeof val, "%llu", (unsigned long long)(bytes & ~4095ull));
	int err = write_file(path, val);
	if (err) fprintf(stderr, "NOTE write %s to %s: %s\n", val, path, strerror(err));
	return err;
}

static void say_which_malloc(void)
{
	void *(*volatile m)(size_t) = malloc;
	Dl_info info;
	printf("NOTE malloc from %s\n",
	       dladdr((void *)m, &info) && info.dli_fname ? info.dli_fname : "(unknown)");
}

/* The timer's own cost: p50 of an empty timed region. */
static double timer_overhead(void)
{
	static hist_t h;
	for (int i = 0; i < 100000; i++) {
		uint64_t a = now_ns(), b = now_ns();
		hist_add(&h, b - a);
	}
	return hist_pct(&h, 50);
}

static int mode_lat(void)
{
	say_which_malloc();
	double tover = timer_overhead();
	static worker_t w[MAXT];
	static hist_t hm, hf;
	blocks_t ballast = { 0 };
	if (lat.cg && cg_write_high(lat.cg, "memory.high", lat.cg_from * MIB) != 0)
		die("cannot set %s/memory.high", lat.cg);
	if (lat.ballast) blocks_alloc(&ballast, lat.ballast * MIB, MIB, 3000);
#ifndef RECLAIM_PLAIN
	uint64_t d0 = 0, f0 = 0, c0 = 0, p0 = 0, used_start = 0, high_start = 0;
#endif
	for (int i = 0; i < lat.threads; i++) {
		w[i].id = i;
		if (pthread_create(&w[i].th, NULL, lat_worker, &w[i]) != 0) die("pthread_create");
	}
	while (atomic_load(&lat_ready) < lat.threads)
		sleep_ns(1000000);
#ifndef RECLAIM_PLAIN
	if (stats() == 0) {
		d0 = st_demoted(); f0 = st_failed(); c0 = st_cpu(); p0 = st_passes();
		used_start = st_used0(); high_start = st_high0();
	}
	unsigned states[4] = { 0 };
#endif
	uint64_t t0 = now_ns();
	atomic_store(&lat_phase, 1);
	uint64_t len = (uint64_t)(lat.seconds * 1e9), end = t0 + len;
	for (unsigned tick = 1;; tick++) {
		uint64_t next = t0 + tick * 250000000ull, t = now_ns();
		if (next > end) next = end;
		if (next > t) sleep_ns(next - t);
		t = now_ns();
		if (t >= end) break;
		if (lat.cg) {
			/* memory.high from cg_from down to cg_to over the run, linearly. */
			double f = (double)(t - t0) / (double)len;
			double h = (double)lat.cg_from - f * ((double)lat.cg_from - (double)lat.cg_to);
			cg_write_high(lat.cg, "memory.high", (uint64_t)(h * MIB));
		}
#ifndef RECLAIM_PLAIN
		if (tick % 2 == 0 && stats() == 0) states[st_state() & 3]++;
#endif
	}
	atomic_store(&lat_phase, 2);
	uint64_t wall = now_ns() - t0;
#ifndef RECLAIM_PLAIN
	int have = stats() == 0;
	uint64_t d1 = have ? st_demoted() : 0, f1 = have ? st_failed() : 0;
	uint64_t c1 = have ? st_cpu() : 0, p1 = have ? st_passes() : 0;
	uint64_t used0 = have ? st_used0() : 0, high0 = have ? st_high0() : 0;
#endif
	uint64_t ops = 0;
	for (int i = 0; i < lat.threads; i++) {
		pthread_join(w[i].th, NULL);
		hist_merge(&hm, &w[i].hm);
		hist_merge(&hf, &w[i].hf);
		ops += w[i].ops;
	}
	size_t bn0 = 0, bn1 = 0, bother = 0, bad = 0;
	if (lat.ballast) {
		blocks_where(&ballast, &bn0, &bn1, &bother);
		bad = blocks_check(&ballast, 3000);
		blocks_free(&ballast);
	}
	printf("RESULT lat threads=%d seconds=%.2f ops=%llu timer_ns=%.0f"
	       " malloc_p50=%.0f malloc_p99=%.0f malloc_p999=%.0f malloc_max=%llu malloc_mean=%.1f"
	       " free_p50=%.0f free_p99=%.0f free_p999=%.0f free_max=%llu free_mean=%.1f"
	       " ballast=%llu ballast_node0=%zu ballast_node1=%zu ballast_bad_words=%zu",
	       lat.threads, ms(wall) / 1000, (unsigned long long)ops, tover,
	       hist_pct(&hm, 50), hist_pct(&hm, 99), hist_pct(&hm, 99.9),
	       (unsigned long long)hm.max, (double)hm.sum / (double)(hm.n ? hm.n : 1),
	       hist_pct(&hf, 50), hist_pct(&hf, 99), hist_pct(&hf, 99.9),
	       (unsigned long long)hf.max, (double)hf.sum / (double)(hf.n ? hf.n : 1),
	       (unsigned long long)(lat.ballast * MIB), bn0 * 4096, bn1 * 4096, bad);
#ifndef RECLAIM_PLAIN
	if (have)
		printf(" demoted=%llu failed=%llu reclaim_cpu_ns=%llu passes=%llu"
		       " used_start=%llu high_start=%llu used0=%llu high0=%llu"
		       " states_idle=%u states_demoting=%u states_stopped=%u states_paging=%u",
		       (unsigned long long)(d1 - d0), (unsigned long long)(f1 - f0),
		       (unsigned long long)(c1 - c0), (unsigned long long)(p1 - p0),
		       (unsigned long long)used_start, (unsigned long long)high_start,
		       (unsigned long long)used0, (unsigned long long)high0,
		       states[1], states[2], states[0], states[3]);
#endif
	printf("\n");
	return 0;
}

#ifndef RECLAIM_PLAIN
/* ---- burst ------------------------------------------------------------------ */


/* Polls every 10 ms from t0 until tier 0's used <= target or timeout:
 * the ms at which the library's high first equals `expect_high` (0: not
 * checked), demotion first moved, used first <= target. */
typedef struct poll_s {
	double seen_ms, first_demote_ms, under_ms, last_demote_ms;
	uint64_t demoted, failed, used_peak, used_end, high_end, cpu_ns, polls;
	uint64_t poll_ns, numa_maps_ns;   /* in tier_stats_get; of which its resident measurement */
	uint64_t demoted_first;           /* already demoted at first_demote_ms: not within the span */
} poll_t;

static int watch_max;             /* cgburst --limit memory.max */
static int no_thp;                /* cgburst --pages 4k */

/* The stats for a poll: from the live record when there is one (each figure
 * timed by its publication), else tier_stats_get (timed by the call). *at:
 * CLOCK_MONOTONIC of the figures. */
static int poll_read(poll_t *r, uint64_t *at)
{
	uint64_t t = now_ns(), pub;
	struct timespec rt;
	if (live_stats(&pub) == 0) {
		clock_gettime(CLOCK_REALTIME, &rt);
		uint64_t rt_ns = (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec;
		uint64_t age = rt_ns > pub ? rt_ns - pub : 0;
		*at = t > age ? t - age : t;
	} else {
		*at = t;
		if (stats() != 0) return -1;
		r->numa_maps_ns += stats_buf.resident_sample_ns;
	}
	r->poll_ns += now_ns() - t;
	r->polls++;
	return 0;
}

static poll_t poll_until(uint64_t t0, uint64_t target, uint64_t expect_high, double timeout_s)
{
	poll_t r = { -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 };
	if (stats() != 0) return r;
	uint64_t d0 = st_demoted(), f0 = st_failed(), c0 = st_cpu(), dprev = d0;
	uint64_t deadline = t0 + (uint64_t)(timeout_s * 1e9);
	for (;;) {
		uint64_t t = now_ns(), fig;
		if (poll_read(&r, &fig) != 0) break;
		double at = fig > t0 ? ms(fig - t0) : 0;
		uint64_t u = st_used0(), d = st_demoted();
		if (u > r.used_peak) r.used_peak = u;
		uint64_t lim = watch_max ? st_max0() : st_high0();
		if (r.seen_ms < 0 && expect_high && lim <= expect_high) r.seen_ms = at;
		if (r.first_demote_ms < 0 && d > d0) {
			r.first_demote_ms = at;
			r.demoted_first = d - d0;
		}
		if (d > dprev) r.last_demote_ms = at;
		dprev = d;
		if (u <= target) {
			r.under_ms = at;
			break;
		}
		if (t > deadline) break;
		uint64_t next = t + 10000000;
		uint64_t t2 = now_ns();
		if (next > t2) sleep_ns(next - t2);
	}
	/* Settle: demotion goes on below the limit (down to high less the
	 * hysteresis), still polled every 10 ms until the count has not moved
	 * for 300 ms, so last_demote_ms is a poll's that saw it move (a single
	 * 300 ms sleep here put the whole sleep into the span of every run that
	 * demoted past the limit: all of them). */
	for (uint64_t still = now_ns(), stop = now_ns() + 5000000000ull;;) {
		uint64_t t = now_ns(), fig;
		if (poll_read(&r, &fig) != 0) break;
		uint64_t d = st_demoted();
		if (d > dprev) {
			r.last_demote_ms = fig > t0 ? ms(fig - t0) : 0;
			still = t;
		}
		dprev = d;
		if (t - still >= 300000000 || t > stop) break;
		uint64_t next = t + 10000000, t2 = now_ns();
		if (next > t2) sleep_ns(next - t2);
	}
	if (stats() == 0) {
		r.demoted = st_demoted() - d0;
		r.failed = st_failed() - f0;
		r.cpu_ns = st_cpu() - c0;
		r.used_end = st_used0();
		r.high_end = watch_max ? st_max0() : st_high0();
	}
	return r;
}

static void poll_print(const poll_t *r)
{
	printf(" budget_seen_ms=%.1f first_demote_ms=%.1f under_ms=%.1f last_demote_ms=%.1f"
	       " demoted=%llu failed=%llu used_peak=%llu used_end=%llu high_end=%llu"
	       " reclaim_cpu_ns=%llu polls=%llu poll_ns=%llu numa_maps_ns=%llu demoted_first=%llu",
	       r->seen_ms, r->first_demote_ms, r->under_ms, r->last_demote_ms,
	       (unsigned long long)r->demoted, (unsigned long long)r->failed,
	       (unsigned long long)r->used_peak, (unsigned long long)r->used_end,
	       (unsigned long long)r->high_end, (unsigned long long)r->cpu_ns,
	       (unsigned long long)r->polls, (unsigned long long)r->poll_ns,
	       (unsigned long long)r->numa_maps_ns, (unsigned long long)r->demoted_first);
}

static void where_print(const char *name, const blocks_t *b, uint64_t seed)
{
	size_t n0, n1, other;
	blocks_where(b, &n0, &n1, &other);
	printf(" %s_node0=%zu %s_node1=%zu %s_other=%zu %s_bad_words=%zu", name, n0 * 4096, name,
	       n1 * 4096, name, other * 4096, name, blocks_check(b, seed));
}

static uint64_t steady_mib = 64, burst_mib = 64, high_mib = 64;

/* Waits (up to 10 s) for the reclaim thread to be idle, tier 0 within high. */
static void settle(void)
{
	for (int i = 0; i < 100; i++) {
		if (stats() == 0 && st_state() != TIER_RECLAIM_DEMOTING && st_used0() <= st_high0())
			return;
		sleep_ns(100000000);
	}
}

/* The "key: N kB" figure of a /proc or /sys file, in bytes; 0 if absent. */
static uint64_t file_kb(const char *path, const char *key)
{
	char buf[4096];
	int fd = open(path, O_RDONLY);
	if (fd < 0) return 0;
	ssize_t k = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (k <= 0) return 0;
	buf[k] = 0;
	char *p = strstr(buf, key);
	return p ? strtoull(p + strlen(key), NULL, 10) * 1024 : 0;
}

static uint64_t node_memtotal(int n)
{
	char path[96];
	snprintf(path, sizeof path, "/sys/devices/system/node/node%d/meminfo", n);
	return file_kb(path, "MemTotal:");
}

/* The process's anonymous memory in huge pages (smaps_rollup), bytes. */
static uint64_t thp_bytes(void)
{
	return file_kb("/proc/self/smaps_rollup", "AnonHugePages:");
}

static int mode_cgburst(const char *cg)
{
	uint64_t cap0 = node_memtotal(0), cap1 = node_memtotal(1);
	if (!cap0 || !cap1) die("no node0/node1 MemTotal");
	if (stats() != 0) die("no stats");
	/* Before the heap's first page: the flag is the process's, read at each fault. */
	if (no_thp && prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0) die("PR_SET_THP_DISABLE: %s", strerror(errno));
	uint64_t high_start = watch_max ? st_max0() : st_high0();
	blocks_t steady, burst;
	blocks_alloc(&steady, steady_mib * MIB, MIB, 1000);
	blocks_alloc(&burst, burst_mib * MIB, MIB, 5000);
	sleep_ns(300000000);
	stats();
	uint64_t used_before = st_used0(), thp_before = thp_bytes();
	/* memory.high H such that H x cap0 / (cap0 + cap1) = high_mib. */
	uint64_t target = high_mib * MIB;
	uint64_t H = (uint64_t)((unsigned __int128)target * (cap0 + cap1) / cap0);
	H = (H + 4095) & ~4095ull;
	uint64_t scaled = (uint64_t)((unsigned __int128)H * cap0 / (cap0 + cap1));
	const char *file = watch_max ? "memory.max" : "memory.high";
	if (live_open() != 0)
		fprintf(stderr, "NOTE no live record: polling tier_stats_get (its numa_maps read slows demotion)\n");
	uint64_t t0 = now_ns();
	if (cg_write_high(cg, file, H) != 0) die("cannot write %s/%s", cg, file);
	poll_t r = poll_until(t0, scaled, scaled, 20);
	printf("RESULT cgburst limit=%s cap0=%llu cap1=%llu high_start=%llu memory_high=%llu scaled_high=%llu"
	       " used_before=%llu thp_before=%llu pages=%s",
	       file, (unsigned long long)cap0, (unsigned long long)cap1, (unsigned long long)high_start,
	       (unsigned long long)H, (unsigned long long)scaled, (unsigned long long)used_before,
	       (unsigned long long)thp_before, no_thp ? "4k" : "thp");
	poll_print(&r);
	where_print("steady", &steady, 1000);
	where_print("burst", &burst, 5000);
	printf("\n");
	blocks_free(&burst);
	blocks_free(&steady);
	return 0;
}

/* Run time of the reclaim thread (schedstat, ns), found by its name; 0 when
 * there is none. */
static uint64_t reclaim_thread_ns(int *found)
{
	*found = 0;
	DIR *d = opendir("/proc/self/task");
	if (!d) return 0;
	struct dirent *e;
	uint64_t ns = 0;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.') continue;
		char path[300], buf[128];
		snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
		int fd = open(path, O_RDONLY);
		if (fd < 0) continue;
		ssize_t k = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (k <= 0) continue;
		buf[k] = 0;
		if (strncmp(buf, "tiermalloc_rcl", 14) != 0) continue;
		snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", e->d_name);
		fd = open(path, O_RDONLY);
		if (fd < 0) continue;
		k = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (k <= 0) continue;
		buf[k] = 0;
		ns += strtoull(buf, NULL, 10);
		(*found)++;
	}
	closedir(d);
	return ns;
}

static int mode_cpu(uint64_t heap_mib, double idle_s)
{
	if (stats() != 0) die("no stats");
	blocks_t heap;
	blocks_alloc(&heap, heap_mib * MIB, MIB, 9000);
	settle();
	sleep_ns(2000000000);
	stats();
	int found;
	uint64_t c0 = st_cpu(), p0 = st_passes(), s0 = reclaim_thread_ns(&found);
	uint64_t t0 = now_ns();
	sleep_ns((uint64_t)(idle_s * 1e9));
	uint64_t t1 = now_ns();
	uint64_t s1 = reclaim_thread_ns(&found);
	stats();
	uint64_t c1 = st_cpu(), p1 = st_passes();
	double wall = (double)(t1 - t0);
	printf("RESULT cpu heap=%llu idle_s=%.2f reclaim_cpu_ns=%llu passes=%llu thread_ns=%llu"
	       " threads_found=%d used0=%llu used1=%llu resident0=%llu resident1=%llu"
	       " cpu_pct=%.4f thread_pct=%.4f state=%u\n",
	       (unsigned long long)(heap_mib * MIB), wall / 1e9, (unsigned long long)(c1 - c0),
	       (unsigned long long)(p1 - p0), (unsigned long long)(s1 - s0), found,
	       (unsigned long long)stats_buf.tier[0].used,
	       (unsigned long long)stats_buf.tier[1].used,
	       (unsigned long long)stats_buf.tier[0].resident,
	       (unsigned long long)stats_buf.tier[1].resident,
	       100.0 * (double)(c1 - c0) / wall, 100.0 * (double)(s1 - s0) / wall, st_state());
	blocks_free(&heap);
	return 0;
}
#endif /* !RECLAIM_PLAIN */

/* ---- moverate -------------------------------------------------------------- */

/* lockwait's loop counts its ops here; move_once notes the count when its
 * move starts and ends. */
static _Atomic uint64_t lw_ops;
static uint64_t lw_ops_at[2];

/* Moves bytes of anonymous memory node0 -> node1: in one call, or (step)
 * one 2 MiB chunk a call as tiermalloc does, mbind(MPOL_MF_MOVE) or, with
 * step, mbind of the policy and then move_pages of the chunk's pages. */
static double move_once(uint64_t bytes, int huge, int use_mbind, int step, size_t *moved, size_t *left)
{
	char *p = mmap(NULL, bytes + 2 * MIB, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) die("mmap: %s", strerror(errno));
	char *a = (char *)(((uintptr_t)p + 2 * MIB - 1) & ~(uintptr_t)(2 * MIB - 1));
	unsigned long node0 = 1, node1 = 2;
	if (mbind(a, bytes, MPOL_BIND, &node0, 8, 0) != 0) die("mbind node0: %s", strerror(errno));
	madvise(a, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
	touch(a, bytes, 42);
	size_t n0 = 0, n1 = 0, other = 0;
	pages_where(a, bytes, &n0, &n1, &other);
	if (n0 * 4096 < bytes * 9 / 10) fprintf(stderr, "NOTE moverate: only %zu of %llu bytes on node0\n",
					       n0 * 4096, (unsigned long long)bytes);
	size_t npages = bytes / 4096;
	void **pages = malloc(npages * sizeof *pages);
	int *nodes = malloc(npages * sizeof *nodes), *status = malloc(npages * sizeof *status);
	if (!pages || !nodes || !status) die("malloc");
	for (size_t i = 0; i < npages; i++) {
		pages[i] = a + i * 4096;
		nodes[i] = 1;
	}
	lw_ops_at[0] = atomic_load(&lw_ops);
	uint64_t t0 = now_ns();
	size_t span = step ? 2 * MIB : bytes;
	for (size_t off = 0; off < bytes; off += span) {
		if (use_mbind) {
			if (mbind(a + off, span, MPOL_BIND, &node1, 8, MPOL_MF_MOVE) != 0)
				fprintf(stderr, "NOTE mbind MPOL_MF_MOVE: %s\n", strerror(errno));
			continue;
		}
		if (step && mbind(a + off, span, MPOL_BIND, &node1, 8, 0) != 0)
			fprintf(stderr, "NOTE mbind: %s\n", strerror(errno));
		long r = move_pages(0, span / 4096, pages + off / 4096, nodes, status, MPOL_MF_MOVE);
		if (r < 0) fprintf(stderr, "NOTE move_pages: %s\n", strerror(errno));
	}
	uint64_t t1 = now_ns();
	lw_ops_at[1] = atomic_load(&lw_ops);
	n0 = n1 = other = 0;
	pages_where(a, bytes, &n0, &n1, &other);
	*moved = n1 * 4096;
	*left = n0 * 4096;
	free(pages);
	free(nodes);
	free(status);
	munmap(p, bytes + 2 * MIB);
	return (double)(t1 - t0);
}

static int mode_moverate(uint64_t mib)
{
	static const struct { const char *name; int huge, mbind; } v[] = {
		{ "move_pages_4k", 0, 0 }, { "move_pages_thp", 1, 0 },
		{ "mbind_4k", 0, 1 }, { "mbind_thp", 1, 1 },
	};
	printf("RESULT moverate bytes=%llu", (unsigned long long)(mib * MIB));
	for (unsigned i = 0; i < sizeof v / sizeof v[0]; i++) {
		size_t moved, left;
		double ns = move_once(mib * MIB, v[i].huge, v[i].mbind, 0, &moved, &left);
		printf(" %s_ns=%.0f %s_moved=%zu %s_left=%zu", v[i].name, ns, v[i].name, moved,
		       v[i].name, left);
	}
	printf("\n");
	return 0;
}

/* ---- lockwait --------------------------------------------------------------- */

/* What a move costs the program's other threads: one thread maps, touches
 * and unmaps a page in a loop (each of those takes the mmap lock) while
 * the main thread moves M MiB a chunk at a time, by mbind(MPOL_MF_MOVE) and
 * by mbind(policy) + move_pages (tiermalloc's demotion); the loop's ops per
 * second of the move, and its slowest op. */
static atomic_int lw_stop;
static _Atomic uint64_t lw_max_ns;

static void *lw_loop(void *arg)
{
	(void)arg;
	while (!atomic_load(&lw_stop)) {
		uint64_t t0 = now_ns();
		char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) die("mmap: %s", strerror(errno));
		p[0] = 1;
		munmap(p, 4096);
		uint64_t d = now_ns() - t0;
		atomic_fetch_add(&lw_ops, 1);
		if (d > atomic_load(&lw_max_ns)) atomic_store(&lw_max_ns, d);
	}
	return NULL;
}

static int mode_lockwait(uint64_t mib)
{
	static const struct { const char *name; int huge, mbind; } v[] = {
		{ "mbind_4k", 0, 1 }, { "move_pages_4k", 0, 0 },
		{ "mbind_thp", 1, 1 }, { "move_pages_thp", 1, 0 },
	};
	printf("RESULT lockwait bytes=%llu", (unsigned long long)(mib * MIB));
	for (unsigned i = 0; i < sizeof v / sizeof v[0]; i++) {
		size_t moved, left;
		pthread_t t;
		atomic_store(&lw_max_ns, 0);
		atomic_store(&lw_stop, 0);
		if (pthread_create(&t, NULL, lw_loop, NULL) != 0) die("pthread_create");
		double ns = move_once(mib * MIB, v[i].huge, v[i].mbind, 1, &moved, &left);
		atomic_store(&lw_stop, 1);
		pthread_join(t, NULL);
		/* The loop's ops while the chunks moved; its slowest op over the
		 * whole run (the buffer's set-up too). */
		printf(" %s_ns=%.0f %s_moved=%zu %s_loop_ops=%llu %s_loop_max_ns=%llu", v[i].name, ns,
		       v[i].name, moved, v[i].name, (unsigned long long)(lw_ops_at[1] - lw_ops_at[0]),
		       v[i].name, (unsigned long long)atomic_load(&lw_max_ns));
	}
	printf("\n");
	return 0;
}

/* ---- main ------------------------------------------------------------------ */

static double num(const char *s)
{
	char *end;
	double v = strtod(s, &end);
	if (end == s || *end) die("not a number: %s", s);
	return v;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2) die("usage: reclaim lat|cgburst|moverate|lockwait|cpu [options]");
	const char *mode = argv[1], *cg = NULL;
	uint64_t mib = 64, heap = 256;
	double idle = 20;
	int i = 2;
	if (strcmp(mode, "cgburst") == 0) {
		if (argc < 3) die("cgburst CGROUP");
		cg = argv[2];
		i = 3;
	}
	for (; i < argc; i++) {
		const char *o = argv[i];
		if (i + 1 >= argc) die("%s needs a value", o);
		if (!strcmp(o, "--cg")) {
			lat.cg = argv[++i];
			continue;
		}
#ifndef RECLAIM_PLAIN
		if (!strcmp(o, "--limit")) {
			watch_max = !strcmp(argv[++i], "memory.max");
			continue;
		}
		if (!strcmp(o, "--pages")) {
			const char *v = argv[++i];
			if (strcmp(v, "4k") != 0 && strcmp(v, "thp") != 0) die("--pages 4k or thp, not %s", v);
			no_thp = !strcmp(v, "4k");
			continue;
		}
#endif
		double v = num(argv[++i]);
		if (!strcmp(o, "--threads")) lat.threads = v < 1 ? 1 : v > MAXT ? MAXT : (int)v;
		else if (!strcmp(o, "--seconds")) lat.seconds = v;
		else if (!strcmp(o, "--slots")) lat.slots = (int)v;
		else if (!strcmp(o, "--cg-from")) lat.cg_from = (uint64_t)v;
		else if (!strcmp(o, "--cg-to")) lat.cg_to = (uint64_t)v;
		else if (!strcmp(o, "--ballast")) lat.ballast = (uint64_t)v;
		else if (!strcmp(o, "--mib")) mib = (uint64_t)v;
		else if (!strcmp(o, "--heap")) heap = (uint64_t)v;
		else if (!strcmp(o, "--idle")) idle = v;
#ifndef RECLAIM_PLAIN
		else if (!strcmp(o, "--steady")) steady_mib = (uint64_t)v;
		else if (!strcmp(o, "--burst")) burst_mib = (uint64_t)v;
		else if (!strcmp(o, "--high")) high_mib = (uint64_t)v;
#endif
		else die("unknown option %s", o);
	}
	if (!strcmp(mode, "lat")) return mode_lat();
	if (!strcmp(mode, "moverate")) return mode_moverate(mib);
	if (!strcmp(mode, "lockwait")) return mode_lockwait(mib);
#ifndef RECLAIM_PLAIN
	if (!strcmp(mode, "cgburst")) return mode_cgburst(cg);
	if (!strcmp(mode, "cpu")) return mode_cpu(heap, idle);
#else
	(void)cg;
	(void)heap;
	(void)idle;
#endif
	die("unknown mode %s (reclaim-plain has lat, moverate and lockwait)", mode);
	return 1;
}
