/* Allocation-site placement (site.h, issue 17), against the kernel: two call
 * sites allocate 64 KiB blocks interleaved, one hot block (read all the
 * time by a thread) to five cold ones, so every chunk of the first heap holds
 * both. Sampling finds both sites and puts each on trial: an eighth of the
 * blocks they allocate next go to chunks of their own, the cold site's are
 * found cold by the accessed bits, and from then on its new blocks (all of
 * them) are placed on tier 1
 * as they are committed: no migration (tier 0's demoted count stays as it
 * was), while the hot site's new blocks stay on tier 0. Checked with
 * move_pages; the heap reads back unchanged. Again with the cold site calling
 * posix_memalign, and realloc (a block of 4 KiB from another site grown to
 * 64 KiB: the new block is the cold site's).
 *
 * Topologies: 2tier, 3tier and flat. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "vmtest.h"

#define ST_BLOCK (64 * 1024)
#define ST_MAX 4096
#define ST_COLD_PER_HOT 5

/* ======================================================================
 * Child mode VMTEST_SITE=child: on "grow N", N rounds of one hot block and
 * five cold ones, each filled with words of its own ("grown"); a thread
 * reads one word a page of every hot block in a loop. On "where": pages by
 * node of the hot and the cold blocks ("hotN<n>=", "coldN<n>="), of the cold
 * blocks of the last grow ("newN<n>="), and the stats: "apart= cold=
 * samples= demoted0=". At the end of input: "check bad=<words changed>".
 * ====================================================================== */

typedef struct {
  uint64_t *p;
  int hot;
  int grow;
} st_block_t;

static st_block_t st_blk[ST_MAX];
static _Atomic size_t st_n;
static int st_grows;
static atomic_bool st_stop;

static uint64_t st_word(size_t b, size_t k)
{
  uint64_t x = (b << 32) ^ (k * 0x9e3779b97f4a7c15ull) ^ 0x2545f491u;
  x ^= x >> 29;
  return x * 0xbf58476d1ce4e5b9ull;
}

static void st_fill(size_t b)
{
  for (size_t k = 0; k < ST_BLOCK / 8; k++) st_blk[b].p[k] = st_word(b, k);
}

/* Two call sites: malloc's return address differs. The fill after the call
 * keeps it from being a tail call, and the counts make the bodies differ, so
 * the compiler does not fold the two functions into one (either would make
 * both one site). */
static size_t st_hot_allocs, st_cold_allocs;

static __attribute__((noinline)) uint64_t *st_alloc_hot(size_t b)
{
  uint64_t *p = malloc(ST_BLOCK);
  if (p) st_blk[b].p = p, st_fill(b), st_hot_allocs++;
  return p;
}

/* VMTEST_SITE_CALL: what the cold site calls (malloc, posix_memalign,
 * realloc). */
static enum { ST_MALLOC, ST_MEMALIGN, ST_REALLOC } st_call;

static __attribute__((noinline)) void *st_small(void)
{
  void *p = malloc(4096);
  if (p) memset(p, 1, 4096);
  return p;
}

static __attribute__((noinline)) uint64_t *st_alloc_cold(size_t b)
{
  void *q = NULL;
  uint64_t *p = st_call == ST_MEMALIGN ? (posix_memalign(&q, 256, ST_BLOCK) == 0 ? q : NULL)
                : st_call == ST_REALLOC ? ((q = st_small()) ? realloc(q, ST_BLOCK) : NULL)
                                        : malloc(ST_BLOCK);
  if (p) st_blk[b].p = p, st_fill(b), st_cold_allocs += 2;
  return p;
}

static void *st_reader(void *arg)
{
  volatile uint64_t sink = 0;
  while (!atomic_load_explicit(&st_stop, memory_order_relaxed)) {
    size_t n = atomic_load_explicit(&st_n, memory_order_acquire);
    for (size_t b = 0; b < n; b++)
      if (st_blk[b].hot)
        for (size_t k = 0; k < ST_BLOCK / 8; k += 4096 / 8) sink += st_blk[b].p[k];
  }
  return arg;
}

static void st_grow(unsigned rounds)
{
  st_grows++;
  size_t n = atomic_load(&st_n);
  for (unsigned r = 0; r < rounds && n + 1 + ST_COLD_PER_HOT <= ST_MAX; r++) {
    st_blk[n] = (st_block_t){ .hot = 1, .grow = st_grows };
    if (!st_alloc_hot(n)) break;
    n++;
    for (int c = 0; c < ST_COLD_PER_HOT; c++, n++) {
      st_blk[n] = (st_block_t){ .hot = 0, .grow = st_grows };
      if (!st_alloc_cold(n)) break;
    }
    atomic_store_explicit(&st_n, n, memory_order_release);
  }
  printf("grown blocks=%zu hot=%zu cold=%zu\n", n, st_hot_allocs, st_cold_allocs / 2);
  fflush(stdout);
}

static void st_where(void)
{
  static size_t hot[VM_MAX_NODES], cold[VM_MAX_NODES], fresh[VM_MAX_NODES];
  memset(hot, 0, sizeof hot);
  memset(cold, 0, sizeof cold);
  memset(fresh, 0, sizeof fresh);
  size_t n = atomic_load(&st_n);
  for (size_t b = 0; b < n; b++) {
    vm_pages_by_node(st_blk[b].p, ST_BLOCK, st_blk[b].hot ? hot : cold);
    if (!st_blk[b].hot && st_blk[b].grow == st_grows) vm_pages_by_node(st_blk[b].p, ST_BLOCK, fresh);
  }
  printf("where");
  for (int i = 0; i < VM_MAX_NODES; i++) {
    if (hot[i]) printf(" hotN%d=%zu", i, hot[i]);
    if (cold[i]) printf(" coldN%d=%zu", i, cold[i]);
    if (fresh[i]) printf(" newN%d=%zu", i, fresh[i]);
  }
  tier_stats_t s;
  tier_stats_get(&s, sizeof s);
  printf(" apart=%llu cold=%llu samples=%llu demoted0=%llu state=%u", (unsigned long long)s.sites_apart,
         (unsigned long long)s.sites_cold, (unsigned long long)s.site_samples,
         (unsigned long long)s.tier[0].reclaim.demoted, s.reclaim_state);
  /* Each routed site, for a failure's message: which function called
   * (the nearer entry below its return address), its chunks' hot and cold
   * KiB, its verdict. */
  for (unsigned i = 0; i < TIER_STATS_SITES && i < s.sites_apart; i++) {
    uintptr_t ra = (uintptr_t)s.site[i].frames[0], h = (uintptr_t)st_alloc_hot, c = (uintptr_t)st_alloc_cold;
    const char *who = ra > h && (ra < c || c < h) ? "hot" : ra > c && (ra < h || h < c) ? "cold" : "other";
    printf(" site:%s:%llu/%lluK:%u", who, (unsigned long long)(s.site[i].hot >> 10),
           (unsigned long long)(s.site[i].cold >> 10), s.site[i].cold_verdict);
  }
  printf("\n");
  fflush(stdout);
}

__attribute__((constructor)) static void st_child_main(void)
{
  const char *mode = getenv("VMTEST_SITE");
  if (!mode || strcmp(mode, "child") != 0) return;
  const char *call = getenv("VMTEST_SITE_CALL");
  st_call = !call ? ST_MALLOC : !strcmp(call, "posix_memalign") ? ST_MEMALIGN : !strcmp(call, "realloc") ? ST_REALLOC : ST_MALLOC;
  pthread_t th;
  pthread_create(&th, NULL, st_reader, NULL);
  printf("ready\n");
  fflush(stdout);
  char line[64];
  unsigned rounds;
  while (fgets(line, sizeof line, stdin)) {
    if (strncmp(line, "where", 5) == 0) st_where();
    else if (sscanf(line, "grow %u", &rounds) == 1) st_grow(rounds);
  }
  atomic_store(&st_stop, true);
  pthread_join(th, NULL);
  size_t bad = 0, n = atomic_load(&st_n);
  for (size_t b = 0; b < n; b++)
    for (size_t k = 0; k < ST_BLOCK / 8; k++) bad += st_blk[b].p[k] != st_word(b, k);
  printf("check bad=%zu\n", bad);
  fflush(stdout);
  _exit(0);
}

/* ======================================================================
 * The test.
 * ====================================================================== */

static vm_proc_t child = { .in = -1, .out = -1 };
static int lock_fd = -1;

static void st_init(void)
{
  lock_fd = vm_flock(VM_RECLAIM_LOCK, LOCK_EX);
  cr_assert_geq(lock_fd, 0);
}

static void st_fini(void)
{
  vm_proc_kill(&child);
  if (lock_fd >= 0) close(lock_fd);
  lock_fd = -1;
}

static long long st_kv(const char *line, const char *key)
{
  char pat[48];
  snprintf(pat, sizeof pat, " %s=", key);
  const char *eol = strchr(line, '\n'), *p = strstr(line, pat);
  return p && (!eol || p < eol) ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

/* Pages of `which` on the nodes of tier t, from a where line. */
static long long st_on(const vm_topology_t *topo, const char *line, const char *which, int t)
{
  long long sum = 0;
  for (int n = 0; n < 64; n++) {
    if (!(topo->tier_nodes[t] >> n & 1)) continue;
    char key[24];
    snprintf(key, sizeof key, "%sN%d", which, n);
    long long v = st_kv(line, key);
    if (v > 0) sum += v;
  }
  return sum;
}

static long long st_all(const vm_topology_t *topo, const char *line, const char *which)
{
  long long sum = 0;
  for (int t = 0; t < topo->ntiers; t++) sum += st_on(topo, line, which, t);
  return sum;
}

static const char *st_where_now(void)
{
  return vm_proc_ask(&child, "where", "where ", 30000);
}

static void st_say_grow(unsigned rounds)
{
  for (char *p; (p = (char *)vm_proc_expect(&child, "grown ", 0)) != NULL;) p[0] = '#';
  char cmd[32];
  snprintf(cmd, sizeof cmd, "grow %u", rounds);
  cr_assert_eq(vm_proc_say(&child, cmd), 0);
  cr_assert_not_null(vm_proc_expect(&child, "grown ", 60000), "%s", child.buf);
}

/* Polls "where" every 250 ms until key >= want (or ms pass); the last line. */
static const char *st_until(const char *key, long long want, int ms)
{
  const char *l = NULL;
  for (int waited = 0;; waited += 250) {
    l = st_where_now();
    if (st_kv(l, key) >= want || waited >= ms) return l;
    usleep(250 * 1000);
  }
}

/* The test, with the cold site's calls to `call` (malloc, posix_memalign,
 * realloc). */
static void st_cold_site_goes_below(const char *call)
{
  char callenv[48];
  snprintf(callenv, sizeof callenv, "VMTEST_SITE_CALL=%s", call);
  const vm_topology_t *topo = vm_topology();
  char *env[] = { "VMTEST_SITE=child", "TIERMALLOC_HOTNESS=accessed", "TIERMALLOC_HOTNESS_INTERVAL_MS=500",
                  "TIERMALLOC_SITE_SAMPLE=64K", "TIERMALLOC_TOPTIER_HIGH=256M", callenv, NULL };
  char *argv[] = { (char *)vm_self(), NULL };
  vm_spawn(&child, argv, env, NULL, VM_SPAWN_STDERR);
  cr_assert_not_null(vm_proc_expect(&child, "ready", 120000), "%s", child.buf);
  /* Sampling starts with the reclaim thread's first read of the bits: until
   * then allocations are not sampled, and how much of the grow below fell
   * before it was timing (in one CI run only 39 samples in 24 MiB, too few
   * for the hot site to be tried within 10 s). A little first, until a
   * sample is taken. */
  for (int i = 0; i < 40 && st_kv(st_where_now(), "samples") == 0; i++) {
    st_say_grow(2);
    usleep(250 * 1000);
  }
  st_say_grow(64);   /* 4 MiB hot, 20 MiB cold, interleaved */
  const char *l = st_until("apart", 2, 10000);
  cr_assert_geq(st_kv(l, "apart"), 2, "%s: both sites get chunks of their own within 10 s:\n%s", topo->name,
                child.buf);
  st_say_grow(128);   /* an eighth of each site's calls now go to chunks of its own */
  l = st_until("cold", 1, 15000);
  cr_assert_eq(st_kv(l, "cold"), 1, "%s: the cold site (only) is found cold within 15 s:\n%s", topo->name,
               child.buf);
  long long demoted = st_kv(l, "demoted0");
  st_say_grow(32);   /* 10 MiB more of the cold site's, all routed now */
  l = st_where_now();
  long long fresh = st_all(topo, l, "new"), below = fresh - st_on(topo, l, "new", 0);
  cr_expect_geq(below * 4, fresh * 3, "%s: %lld of %lld pages of the cold site's new blocks below tier 0:\n%s",
                topo->name, below, fresh, child.buf);
  cr_expect_eq(st_kv(l, "demoted0"), demoted, "%s: placed there, not moved:\n%s", topo->name, child.buf);
  long long hot = st_all(topo, l, "hot");
  cr_expect_geq(st_on(topo, l, "hot", 0) * 10, hot * 9, "%s: the hot site's blocks stay on tier 0:\n%s",
                topo->name, child.buf);
  cr_log_info("%s: cold site's (%s) new blocks %.0f %% below tier 0, demoted %lld B before and after", topo->name,
              call,
              fresh ? 100.0 * (double)below / (double)fresh : 0, demoted);
  /* Those 10 MiB were written as they were allocated, more than the trial's
   * cold bytes: the reads of the next 1.5 s (three windows) see them used
   * once, and the verdict stands (site.h: cold no more only by chunks used
   * at two reads in a row). It was lost at the first read once, and the
   * rest of a grow then stayed on tier 0. */
  usleep(1500 * 1000);
  l = st_where_now();
  cr_expect_eq(st_kv(l, "cold"), 1, "%s: the cold site is cold still, after the reads that saw its new blocks:\n%s",
               topo->name, child.buf);
  l = vm_proc_end(&child, "check ", 120000);
  cr_expect_eq(st_kv(l, "bad"), 0, "the heap changed:\n%s", child.buf);
  cr_expect_eq(vm_proc_wait(&child), 0, "%s", child.buf);
}

Test(site, a_cold_sites_new_memory_goes_below_without_a_migration, .init = st_init, .fini = st_fini,
     .timeout = 240)
{
  st_cold_site_goes_below("malloc");
}

/* Aligned allocations are sampled and routed as malloc's are. */
Test(site, an_aligned_cold_sites_new_memory_goes_below_too, .init = st_init, .fini = st_fini, .timeout = 240)
{
  st_cold_site_goes_below("posix_memalign");
}

/* And realloc's: a block grown at a cold site is that site's new memory. */
Test(site, a_cold_site_calling_realloc_has_its_new_memory_below_too, .init = st_init, .fini = st_fini,
     .timeout = 240)
{
  st_cold_site_goes_below("realloc");
}
