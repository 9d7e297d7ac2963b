/*
 * bench/hotsrc: how well each unprivileged access-tracking source sees a
 * known access pattern (issue 17), without tiermalloc: a plain heap of
 * blocks, a thread that touches a known hot set, and each source asked
 * which blocks are hot. Run in the tiered VM by `make bench-hotness`
 * (bench/hotness-vm), which writes bench/results/hotness.md.
 *
 *   hotsrc SOURCE PATTERN [--heap MiB] [--block KiB] [--hot PCT] [--interval ms]
 *          [--rounds N]
 *
 * SOURCE:
 *   referenced  accessed bits: "1" to /proc/self/clear_refs, then each VMA's
 *               Referenced: in /proc/self/smaps; every block is made its own
 *               VMA (alternating memory policies), as tiermalloc's chunks bound
 *               to tiers are. Sees reads and writes, but not through the
 *               TLB: clearing accessed bits does not flush it on x86, so a
 *               hot page whose translation stays cached is not seen again.
 *   referenced-flush  the same, then "4" (soft-dirty), whose clear flushes
 *               the process's TLB (and makes each page's next write fault).
 *   softdirty   "4" to /proc/self/clear_refs, then bit 55 of each page in
 *               /proc/self/pagemap. Sees writes only.
 *   none        no source: every block called cold (the commit age's view of
 *               a heap filled once: nothing was allocated since).
 * PATTERN: read (the hot blocks are only read), write (only written), phase
 *   (read, and the hot set moves to other blocks after half the rounds),
 *   zipf (random pages of blocks drawn with a zipfian law, s = 1, over a
 *   shuffled ranking; the hot ones are the PCT % most used, which get about
 *   70 % of the reads).
 *
 * Per round (one interval): precision = hot blocks called hot / blocks called
 * hot; recall = hot blocks called hot / hot blocks. A block is called hot when
 * the source saw at least one of its pages. Prints one line per round and a
 * summary line: "hotsrc source= pattern= block_kib= heap_mib= precision=
 * recall= cost_ms= cost_pct_core_per_gib= touches_per_s= rounds_to_follow="
 * (medians; cost: the thread CPU time of clearing and reading, per interval,
 * and as a share of one core per GiB of heap; touches_per_s: pages the
 * program touched a second, which the source's faults slow; rounds_to_follow:
 * rounds after the hot set moved until precision and recall were both at
 * least 0.9, 0 never, -1 for a pattern that does not move).
 */
#include <errno.h>
#include <fcntl.h>
#include <numaif.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define KIB 1024ul
#define MIB (1024ul * 1024)
#define PAGE 4096ul

static size_t heap_bytes = 256 * MIB, block = 2 * MIB, nblocks;
static unsigned hot_pct = 20, interval_ms = 1000, rounds = 6;
static char *heap;
static _Atomic unsigned phase;   /* which hot set the toucher uses */
static atomic_bool stop;
static _Atomic uint64_t touches;
static int writes, zipf;
static size_t *rank_of;     /* zipf: each block's rank (0 most used), a fixed shuffle */
static size_t *by_rank;     /* and the block of each rank */
static double *cdf;         /* zipf: P(rank <= r), s = 1 */

static int is_hot(size_t b, unsigned ph)
{
  /* zipf: the hot_pct % most used blocks. Otherwise spread over the heap:
   * every (100 / hot_pct)-th block, shifted by the phase. */
  if (zipf) return rank_of[b] < nblocks * hot_pct / 100;
  size_t every = 100 / hot_pct;
  return (b + ph * (every / 2 ? every / 2 : 1)) % every == 0;
}

static uint64_t rng_next(uint64_t *x)
{
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return *x;
}

static void zipf_init(void)
{
  rank_of = malloc(nblocks * sizeof *rank_of);
  by_rank = malloc(nblocks * sizeof *by_rank);
  cdf = malloc(nblocks * sizeof *cdf);
  uint64_t x = 88172645463325252ull;
  for (size_t b = 0; b < nblocks; b++) by_rank[b] = b;
  for (size_t b = nblocks; b-- > 1;) {
    size_t j = rng_next(&x) % (b + 1), t = by_rank[b];
    by_rank[b] = by_rank[j];
    by_rank[j] = t;
  }
  double sum = 0;
  for (size_t r = 0; r < nblocks; r++) {
    rank_of[by_rank[r]] = r;
    sum += 1.0 / (double)(r + 1);
    cdf[r] = sum;
  }
  for (size_t r = 0; r < nblocks; r++) cdf[r] /= sum;
}

/* zipf: one read of a random page of a block drawn by rank, in a loop. */
static void zipf_touch(void)
{
  uint64_t x = 0x2545f4914f6cdd1dull;
  volatile uint64_t sink = 0;
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    for (int i = 0; i < 4096; i++) {
      double u = (double)(rng_next(&x) >> 11) / (double)(1ull << 53);
      size_t lo = 0, hi = nblocks - 1;
      while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cdf[mid] < u) lo = mid + 1;
        else hi = mid;
      }
      size_t page = rng_next(&x) % (block / PAGE);
      sink += *(uint64_t *)(heap + by_rank[lo] * block + page * PAGE);
    }
    atomic_fetch_add_explicit(&touches, 4096, memory_order_relaxed);
  }
}

static void *toucher(void *arg)
{
  (void)arg;
  if (zipf) {
    zipf_touch();
    return NULL;
  }
  volatile uint64_t sink = 0;
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    unsigned ph = atomic_load_explicit(&phase, memory_order_relaxed);
    for (size_t b = 0; b < nblocks; b++) {
      if (!is_hot(b, ph)) continue;
      for (size_t off = 0; off < block; off += PAGE) {
        uint64_t *w = (uint64_t *)(heap + b * block + off);
        if (writes) *w += 1;
        else sink += *w;
      }
      atomic_fetch_add_explicit(&touches, block / PAGE, memory_order_relaxed);
    }
  }
  return NULL;
}

static uint64_t now_ns(clockid_t c)
{
  struct timespec ts;
  clock_gettime(c, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int write_clear_refs(const char *v)
{
  int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  int r = write(fd, v, strlen(v)) == (ssize_t)strlen(v) ? 0 : -errno;
  close(fd);
  return r;
}

/* seen[b] = 1 when a page of block b was referenced (smaps, per VMA). */
static int read_referenced(unsigned char *seen)
{
  FILE *f = fopen("/proc/self/smaps", "re");
  if (!f) return -errno;
  char line[512];
  uintptr_t lo = 0, hi = 0;
  uintptr_t h0 = (uintptr_t)heap, h1 = h0 + heap_bytes;
  while (fgets(line, sizeof line, f)) {
    unsigned long a, b;
    if (sscanf(line, "%lx-%lx ", &a, &b) == 2 && strchr(line, '-') < strchr(line, ' ')) {
      lo = a;
      hi = b;
      continue;
    }
    unsigned long kb;
    if (sscanf(line, "Referenced: %lu kB", &kb) == 1 && kb > 0 && hi > h0 && lo < h1) {
      uintptr_t s = lo < h0 ? h0 : lo, e = hi > h1 ? h1 : hi;
      for (uintptr_t p = s; p < e; p += block) seen[(p - h0) / block] = 1;
    }
  }
  fclose(f);
  return 0;
}

static int read_softdirty(unsigned char *seen)
{
  int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  size_t per = block / PAGE;
  uint64_t *buf = malloc(per * sizeof *buf);
  for (size_t b = 0; b < nblocks; b++) {
    off_t off = (off_t)(((uintptr_t)heap + b * block) / PAGE * sizeof(uint64_t));
    if (pread(fd, buf, per * sizeof *buf, off) != (ssize_t)(per * sizeof *buf)) {
      free(buf);
      close(fd);
      return -EIO;
    }
    for (size_t k = 0; k < per && !seen[b]; k++) seen[b] = (buf[k] >> 55) & 1;
  }
  free(buf);
  close(fd);
  return 0;
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, unsigned n)
{
  qsort(v, n, sizeof *v, cmp_double);
  return n ? (n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2) : 0;
}

int main(int argc, char **argv)
{
  if (argc < 3) {
    fprintf(stderr, "usage: hotsrc referenced|referenced-flush|softdirty|none read|write|phase|zipf [--heap MiB] [--block KiB] "
                    "[--hot PCT] [--interval ms] [--rounds N]\n");
    return 2;
  }
  const char *source = argv[1], *pattern = argv[2];
  for (int i = 3; i + 1 < argc; i += 2) {
    unsigned long v = strtoul(argv[i + 1], NULL, 10);
    if (!strcmp(argv[i], "--heap")) heap_bytes = v * MIB;
    else if (!strcmp(argv[i], "--block")) block = v * KIB;
    else if (!strcmp(argv[i], "--hot")) hot_pct = (unsigned)v;
    else if (!strcmp(argv[i], "--interval")) interval_ms = (unsigned)v;
    else if (!strcmp(argv[i], "--rounds")) rounds = (unsigned)v;
    else { fprintf(stderr, "hotsrc: unknown option %s\n", argv[i]); return 2; }
  }
  if (block < PAGE || block % PAGE || heap_bytes % block || hot_pct == 0 || hot_pct > 50 || rounds == 0) {
    fprintf(stderr, "hotsrc: bad sizes\n");
    return 2;
  }
  writes = !strcmp(pattern, "write");
  zipf = !strcmp(pattern, "zipf");
  int moves = !strcmp(pattern, "phase");
  nblocks = heap_bytes / block;
  if (zipf) zipf_init();
  heap = mmap(NULL, heap_bytes + 2 * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (heap == MAP_FAILED) { perror("mmap"); return 1; }
  heap = (char *)(((uintptr_t)heap + 2 * MIB - 1) & ~(2 * MIB - 1));
  madvise(heap, heap_bytes, MADV_NOHUGEPAGE);
  if (!strncmp(source, "referenced", 10)) {
    /* One VMA per block: neighbours get different policies (both keep the
     * pages where they are: no MPOL_MF_MOVE). */
    unsigned long node0 = 1;
    for (size_t b = 0; b < nblocks; b++)
      if (mbind(heap + b * block, block, b % 2 ? MPOL_PREFERRED : MPOL_BIND, &node0, 2, 0) != 0) {
        perror("mbind");
        return 1;
      }
  }
  for (size_t off = 0; off < heap_bytes; off += 8) *(uint64_t *)(heap + off) = off * 0x9e3779b97f4a7c15ull;

  pthread_t th;
  pthread_create(&th, NULL, toucher, NULL);
  unsigned char *seen = calloc(nblocks, 1);
  double *prec = calloc(rounds, sizeof *prec), *rec = calloc(rounds, sizeof *rec), *cost = calloc(rounds, sizeof *cost);
  double *rate = calloc(rounds, sizeof *rate);
  unsigned follow = 0, moved_at = moves ? rounds / 2 : rounds;
  for (unsigned r = 0; r < rounds; r++) {
    if (r == moved_at) atomic_store(&phase, 1);
    unsigned ph = atomic_load(&phase);
    memset(seen, 0, nblocks);
    uint64_t c0 = now_ns(CLOCK_THREAD_CPUTIME_ID), w0 = now_ns(CLOCK_MONOTONIC);
    uint64_t t0 = atomic_load(&touches);
    int err = 0;
    if (!strncmp(source, "referenced", 10)) err = write_clear_refs("1");
    if (!err && !strcmp(source, "referenced-flush")) err = write_clear_refs("4");
    else if (!strcmp(source, "softdirty")) err = write_clear_refs("4");
    uint64_t c1 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    usleep(interval_ms * 1000u);
    uint64_t c2 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    if (!err && !strncmp(source, "referenced", 10)) err = read_referenced(seen);
    else if (!err && !strcmp(source, "softdirty")) err = read_softdirty(seen);
    uint64_t c3 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    rate[r] = (double)(atomic_load(&touches) - t0) / ((double)(now_ns(CLOCK_MONOTONIC) - w0) / 1e9);
    if (err) { fprintf(stderr, "hotsrc: %s: %s\n", source, strerror(-err)); return 1; }
    size_t hot = 0, called = 0, both = 0;
    for (size_t b = 0; b < nblocks; b++) {
      hot += is_hot(b, ph);
      called += seen[b];
      both += seen[b] && is_hot(b, ph);
    }
    prec[r] = called ? (double)both / called : 1.0;
    rec[r] = hot ? (double)both / hot : 1.0;
    cost[r] = (double)(c1 - c0 + c3 - c2) / 1e6;
    if (r >= moved_at && !follow && rec[r] >= 0.9 && prec[r] >= 0.9) follow = r - moved_at + 1;
    if (r == rounds - 1 && moves && !follow) follow = -1u;   /* never */
    printf("round %u phase=%u hot=%zu called=%zu both=%zu precision=%.3f recall=%.3f cost_ms=%.2f\n", r, ph, hot,
           called, both, prec[r], rec[r], cost[r]);
  }
  atomic_store(&stop, true);
  pthread_join(th, NULL);
  double c = median(cost, rounds);
  printf("hotsrc source=%s pattern=%s block_kib=%zu heap_mib=%zu precision=%.3f recall=%.3f cost_ms=%.2f "
         "cost_pct_core_per_gib=%.3f touches_per_s=%.0f rounds_to_follow=%d\n",
         source, pattern, block / KIB, heap_bytes / MIB, median(prec, rounds), median(rec, rounds), c,
         c / interval_ms * 100.0 / ((double)heap_bytes / (1024.0 * MIB)), median(rate, rounds), moves ? (follow == -1u ? 0 : (int)follow) : -1);
  return 0;
}
