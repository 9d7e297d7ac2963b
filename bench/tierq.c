/*
 * bench/tierq: tier quality (issue 17). How much of a program's memory
 * traffic the top tier serves, under a top-tier budget, whatever placed the
 * pages: the kernel's first touch, its tiering, a memory policy, memkind's
 * memtier or tiermalloc (preloaded). Run in the tiered VM by
 * `make bench-tier-quality` (bench/tier-quality), which writes
 * bench/results/tier-quality.md.
 *
 *   tierq run [--heap MiB] [--budget MiB] [--seconds S] [--policy default|weighted]
 *             [--writes PCT] [--interval ms]
 *   tierq hog MiB    (binds MiB to node 0 and locks it; "hog ready", then
 *                     sleeps till killed: what leaves node 0 only the budget
 *                     free for placements that have no budget of their own)
 *
 * The heap: objects of sizes drawn log-uniformly from 64 B to 256 KiB, up to
 * --heap MiB (512), allocated one after another, each filled. Their
 * popularity ranks are a random permutation of the allocation order, so hot
 * and cold objects share chunks and pages. A thread then accesses them with
 * a zipfian law (s = 0.99): a word at a uniform offset in the object, read,
 * or written one time in --writes % (10). After half of --seconds (60) the
 * ranks are drawn again (a phase change).
 *
 * Each --interval (2000 ms) the main thread asks move_pages where every page
 * of the heap is. A page's heat is its share of the accesses (each object's
 * probability spread over its bytes); the top tier's share is the heat of
 * the pages on node 0, the oracle's the heat of the hottest budget's worth
 * of pages, the chunk oracle's the heat of the hottest budget's worth of
 * 2 MiB chunks (the best a placement of whole chunks can do). One line per
 * interval ("t= share= oracle= chunk_oracle= top_mib= accesses="), then the
 * summary:
 *   tierq policy= heap_mib= budget_mib= share= oracle= of_oracle=
 *         chunk_oracle= top_mib= acc_per_s= follow_s= unit16k= unit64k= unit256k= unit1m= unit2m=
 * share, the oracles and top_mib: the mean of the last three intervals before the
 * phase change; acc_per_s: accesses a second over the same span; follow_s:
 * seconds after the change until the share came within 90 % of the new
 * oracle's (-1: not within the run); unitN: the heat the hottest budget's
 * worth of aligned N-byte blocks hold, as a share of the oracle's (the best
 * placement in units of N can do), for the first ranks.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define TQ_PAGE 4096ul
#define TQ_MIN_SIZE 64.0
#define TQ_MAX_SIZE (256.0 * 1024)
#define TQ_ZIPF_S 0.99
#define TQ_MPOL_WEIGHTED_INTERLEAVE 6   /* linux/mempolicy.h, 6.9+ */

typedef struct {
  uint64_t *p;
  size_t size;
} tq_obj_t;

typedef struct {
  uintptr_t page;
  double heat;
} tq_page_t;

static tq_obj_t *tq_obj;
static size_t tq_nobj;
static double *tq_cdf;                 /* cumulative zipf probability by rank */
static _Atomic(uint32_t *) tq_rank;    /* object of each rank (swapped at the phase change) */
static atomic_bool tq_stop;
static _Atomic uint64_t tq_accesses;
static unsigned tq_writes = 10;

static uint64_t tq_rng(uint64_t *s)
{
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *s = x;
}

static double tq_unit(uint64_t *s)
{
  return (double)(tq_rng(s) >> 11) * (1.0 / 9007199254740992.0);
}

static double tq_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint32_t *tq_permutation(uint64_t *s)
{
  uint32_t *r = malloc(tq_nobj * sizeof *r);
  if (!r) exit(2);
  for (size_t i = 0; i < tq_nobj; i++) r[i] = (uint32_t)i;
  for (size_t i = tq_nobj - 1; i > 0; i--) {
    size_t j = tq_rng(s) % (i + 1);
    uint32_t t = r[i];
    r[i] = r[j], r[j] = t;
  }
  return r;
}

static void *tq_worker(void *arg)
{
  uint64_t s = 0x9e3779b97f4a7c15ull, n = 0, sink = 0;
  while (!atomic_load_explicit(&tq_stop, memory_order_relaxed)) {
    const uint32_t *rank = atomic_load_explicit(&tq_rank, memory_order_acquire);
    for (int k = 0; k < 4096; k++) {
      double u = tq_unit(&s);
      size_t lo = 0, hi = tq_nobj - 1;
      while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (tq_cdf[mid] < u) lo = mid + 1;
        else hi = mid;
      }
      tq_obj_t *o = &tq_obj[rank[lo]];
      uint64_t r = tq_rng(&s);
      size_t w = (r >> 8) % (o->size / 8);
      if (r % 100 < tq_writes) o->p[w] += 1;
      else sink += o->p[w];
    }
    n += 4096;
    atomic_store_explicit(&tq_accesses, n, memory_order_relaxed);
  }
  (void)arg;
  return (void *)(uintptr_t)sink;
}

static int tq_cmp_page(const void *a, const void *b)
{
  uintptr_t x = ((const tq_page_t *)a)->page, y = ((const tq_page_t *)b)->page;
  return x < y ? -1 : x > y;
}

static int tq_cmp_heat_desc(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* The heap's pages with their heat under the ranks, sorted by address, duplicates merged. */
static tq_page_t *tq_pages(const uint32_t *rank, size_t *np)
{
  double *prob = malloc(tq_nobj * sizeof *prob);
  size_t cap = 0;
  for (size_t i = 0; i < tq_nobj; i++) cap += tq_obj[i].size / TQ_PAGE + 2;
  tq_page_t *pg = malloc(cap * sizeof *pg);
  if (!prob || !pg) exit(2);
  for (size_t r = 0; r < tq_nobj; r++) prob[rank[r]] = tq_cdf[r] - (r ? tq_cdf[r - 1] : 0);
  size_t n = 0;
  for (size_t i = 0; i < tq_nobj; i++) {
    uintptr_t a = (uintptr_t)tq_obj[i].p, end = a + tq_obj[i].size;
    while (a < end) {
      uintptr_t page = a & ~(TQ_PAGE - 1), next = page + TQ_PAGE < end ? page + TQ_PAGE : end;
      pg[n++] = (tq_page_t){ page, prob[i] * (double)(next - a) / (double)tq_obj[i].size };
      a = next;
    }
  }
  qsort(pg, n, sizeof *pg, tq_cmp_page);
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    if (m && pg[m - 1].page == pg[i].page) pg[m - 1].heat += pg[i].heat;
    else pg[m++] = pg[i];
  }
  free(prob);
  *np = m;
  return pg;
}

/* The heat the hottest budget's pages hold. */
static double tq_oracle(const tq_page_t *pg, size_t n, size_t budget_pages)
{
  double *h = malloc(n * sizeof *h), sum = 0;
  if (!h) exit(2);
  for (size_t i = 0; i < n; i++) h[i] = pg[i].heat;
  qsort(h, n, sizeof *h, tq_cmp_heat_desc);
  for (size_t i = 0; i < n && i < budget_pages; i++) sum += h[i];
  free(h);
  return sum;
}

typedef struct {
  double density;   /* heat per page */
  size_t pages;
} tq_unit_t;

static int tq_cmp_density_desc(const void *a, const void *b)
{
  double x = ((const tq_unit_t *)a)->density, y = ((const tq_unit_t *)b)->density;
  return (x < y) - (x > y);
}

/* The heat the hottest budget's worth of aligned `unit`-byte blocks of the
 * address space hold: the best a placement that moves whole units can do
 * (2 MiB: tiermalloc's chunks). pg is sorted by address. */
static double tq_unit_oracle(const tq_page_t *pg, size_t n, size_t budget_pages, uintptr_t unit)
{
  tq_unit_t *u = malloc(n * sizeof *u);
  size_t m = 0;
  if (!u) exit(2);
  for (size_t i = 0; i < n; i++) {
    if (i == 0 || pg[i].page / unit != pg[i - 1].page / unit) u[m++] = (tq_unit_t){ 0, 0 };
    u[m - 1].density += pg[i].heat;
    u[m - 1].pages++;
  }
  /* Densest first, whole units while they fit. */
  for (size_t i = 0; i < m; i++) u[i].density /= (double)u[i].pages;
  qsort(u, m, sizeof *u, tq_cmp_density_desc);
  double sum = 0;
  size_t left = budget_pages;
  for (size_t i = 0; i < m && left > 0; i++) {
    size_t take = u[i].pages < left ? u[i].pages : left;
    sum += u[i].density * (double)take;
    left -= take;
  }
  free(u);
  return sum;
}

static double tq_chunk_oracle(const tq_page_t *pg, size_t n, size_t budget_pages)
{
  return tq_unit_oracle(pg, n, budget_pages, 2ul << 20);
}

/* The heat of the pages on node 0, and how many there are. */
static double tq_share(const tq_page_t *pg, size_t n, size_t *on_top)
{
  enum { BATCH = 4096 };
  static void *addr[BATCH];
  static int status[BATCH];
  double share = 0;
  *on_top = 0;
  for (size_t i = 0; i < n; i += BATCH) {
    size_t k = n - i < BATCH ? n - i : BATCH;
    for (size_t j = 0; j < k; j++) addr[j] = (void *)pg[i + j].page;
    if (syscall(SYS_move_pages, 0, k, addr, NULL, status, 0) != 0) {
      fprintf(stderr, "tierq: move_pages: %s\n", strerror(errno));
      exit(2);
    }
    for (size_t j = 0; j < k; j++)
      if (status[j] == 0) share += pg[i + j].heat, (*on_top)++;
  }
  return share;
}

static int tq_hog(size_t mib)
{
  size_t len = mib << 20;
  char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  unsigned long node0 = 1;
  if (p == MAP_FAILED || syscall(SYS_mbind, p, len, 2 /* MPOL_BIND */, &node0, 2, 0) != 0) {
    fprintf(stderr, "tierq hog: %s\n", strerror(errno));
    return 2;
  }
  memset(p, 1, len);
  if (mlock(p, len) != 0) fprintf(stderr, "tierq hog: mlock: %s (not locked)\n", strerror(errno));
  printf("hog ready %zu MiB\n", mib);
  fflush(stdout);
  for (;;) pause();
}

int main(int argc, char **argv)
{
  if (argc >= 3 && strcmp(argv[1], "hog") == 0) return tq_hog(strtoul(argv[2], NULL, 10));
  if (argc < 2 || strcmp(argv[1], "run") != 0) {
    fprintf(stderr, "usage: tierq run [--heap MiB] [--budget MiB] [--seconds S] [--policy default|weighted]"
                    " [--writes PCT] [--interval ms] | tierq hog MiB\n");
    return 2;
  }
  size_t heap = 512, budget = 128;
  double seconds = 60, interval = 2;
  const char *policy = "default";
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--heap")) heap = strtoul(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--budget")) budget = strtoul(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--policy")) policy = argv[i + 1];
    else if (!strcmp(argv[i], "--writes")) tq_writes = (unsigned)atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--interval")) interval = atof(argv[i + 1]) / 1000;
    else {
      fprintf(stderr, "tierq: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (!strcmp(policy, "weighted")) {
    /* The weights are the system's (/sys/kernel/mm/mempolicy/weighted_interleave). */
    unsigned long nodes = 3;
    if (syscall(SYS_set_mempolicy, TQ_MPOL_WEIGHTED_INTERLEAVE, &nodes, 3) != 0) {
      fprintf(stderr, "tierq: weighted interleave: %s\n", strerror(errno));
      return 3;
    }
  }
  /* The objects, in allocation order. */
  uint64_t s = 0x2545f4914f6cdd1dull;
  size_t cap = 1 << 16, total = 0;
  tq_obj = malloc(cap * sizeof *tq_obj);
  while (tq_obj && total < heap << 20) {
    if (tq_nobj == cap) tq_obj = realloc(tq_obj, (cap *= 2) * sizeof *tq_obj);
    if (!tq_obj) break;
    size_t size = (size_t)(TQ_MIN_SIZE * pow(TQ_MAX_SIZE / TQ_MIN_SIZE, tq_unit(&s))) & ~(size_t)7;
    uint64_t *p = malloc(size);
    if (!p) {
      fprintf(stderr, "tierq: out of memory at %zu MiB\n", total >> 20);
      return 2;
    }
    for (size_t w = 0; w < size / 8; w++) p[w] = w ^ (uintptr_t)p;
    tq_obj[tq_nobj++] = (tq_obj_t){ p, size };
    total += size;
  }
  if (!tq_obj) return 2;
  tq_cdf = malloc(tq_nobj * sizeof *tq_cdf);
  double norm = 0;
  for (size_t r = 0; r < tq_nobj; r++) norm += pow((double)(r + 1), -TQ_ZIPF_S);
  for (size_t r = 0; r < tq_nobj; r++)
    tq_cdf[r] = (r ? tq_cdf[r - 1] : 0) + pow((double)(r + 1), -TQ_ZIPF_S) / norm;
  tq_cdf[tq_nobj - 1] = 1.0;
  uint32_t *rank = tq_permutation(&s);
  atomic_store(&tq_rank, rank);
  size_t np;
  tq_page_t *pg = tq_pages(rank, &np);
  size_t budget_pages = (budget << 20) / TQ_PAGE;
  double oracle = tq_oracle(pg, np, budget_pages), chunk_oracle = tq_chunk_oracle(pg, np, budget_pages);
  /* What a finer unit of placement could reach, as a share of the page
   * oracle's (this heap's layout, the first ranks). */
  static const struct { const char *name; uintptr_t bytes; } units[] = {
    { "16k", 16u << 10 }, { "64k", 64u << 10 }, { "256k", 256u << 10 }, { "1m", 1u << 20 }, { "2m", 2u << 20 } };
  char unit_line[160];
  int ul = 0;
  for (size_t k = 0; k < sizeof units / sizeof units[0]; k++)
    ul += snprintf(unit_line + ul, sizeof unit_line - (size_t)ul, " unit%s=%.2f", units[k].name,
                   oracle > 0 ? tq_unit_oracle(pg, np, budget_pages, units[k].bytes) / oracle : 0);
  printf("tierq objects=%zu heap_mib=%zu pages=%zu\n", tq_nobj, total >> 20, np);
  fflush(stdout);

  pthread_t th;
  pthread_create(&th, NULL, tq_worker, NULL);
  double t0 = tq_now(), change = seconds / 2, follow = -1;
  double hist_share[3] = {0}, hist_top[3] = {0}, hist_oracle[3] = {0}, hist_chunk[3] = {0}, acc_t0 = 0;
  uint64_t acc0 = 0, acc_before = 0;
  int nhist = 0;
  bool changed = false;
  for (double next = interval; next <= seconds + 1e-9; next += interval) {
    double sleep_s = t0 + next - tq_now();
    if (sleep_s > 0) usleep((useconds_t)(sleep_s * 1e6));
    if (!changed && next > change + 1e-9) {
      /* The phase change: new ranks, new heat. */
      acc_before = atomic_load(&tq_accesses);
      uint32_t *r2 = tq_permutation(&s);
      atomic_store_explicit(&tq_rank, r2, memory_order_release);
      free(pg);
      pg = tq_pages(r2, &np);
      oracle = tq_oracle(pg, np, budget_pages);
      chunk_oracle = tq_chunk_oracle(pg, np, budget_pages);
      changed = true;
      change = tq_now() - t0;
    }
    size_t on_top;
    double share = tq_share(pg, np, &on_top), t = tq_now() - t0;
    uint64_t acc = atomic_load(&tq_accesses);
    printf("t=%.1f share=%.3f oracle=%.3f chunk_oracle=%.3f top_mib=%.1f accesses=%llu%s\n", t, share, oracle,
           chunk_oracle,
           on_top * (double)TQ_PAGE / (1 << 20), (unsigned long long)acc, changed ? " after" : "");
    fflush(stdout);
    if (!changed) {
      int k = nhist++ % 3;
      hist_share[k] = share, hist_top[k] = on_top * (double)TQ_PAGE / (1 << 20), hist_oracle[k] = oracle, hist_chunk[k] = chunk_oracle;
      if (nhist == 1) acc0 = acc, acc_t0 = t;
    } else if (follow < 0 && share >= 0.9 * oracle) {
      follow = t - change;
    }
  }
  atomic_store(&tq_stop, true);
  pthread_join(th, NULL);
  int h = nhist < 3 ? nhist : 3;
  double ms = 0, mt = 0, mo = 0, mc = 0;
  for (int k = 0; k < h; k++)
    ms += hist_share[k] / h, mt += hist_top[k] / h, mo += hist_oracle[k] / h, mc += hist_chunk[k] / h;
  double span = change - acc_t0;
  printf("tierq policy=%s heap_mib=%zu budget_mib=%zu share=%.3f oracle=%.3f of_oracle=%.2f chunk_oracle=%.3f "
         "top_mib=%.1f acc_per_s=%.0f follow_s=%.1f%s\n",
         policy, total >> 20, budget, ms, mo, mo > 0 ? ms / mo : 0, mc, mt,
         span > 0 ? (double)(acc_before - acc0) / span : 0, follow, unit_line);
  fflush(stdout);   /* memtier's exit tears its heaps down before stdio flushes */
  return 0;
}
