/* The accessed-bits source (issue 17), against the kernel: a heap of 2 MiB
 * blocks, one chunk each, every sixth of them read (never written) by a
 * thread all the time, and the cgroup's memory.high lowered so that tier 0
 * keeps room for about twice the hot set. Reclaim must demote the cold
 * chunks and keep the read-only hot ones on top, which the commit age
 * cannot (the blocks were allocated interleaved, so hot and cold are equally
 * old to it). Checked with move_pages over the child's blocks; the heap reads
 * back unchanged. Chunk-granular: a hot block smaller than a chunk, beside a
 * cold one, is not told apart yet.
 *
 * Topologies: 2tier, 3tier and flat. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <numaif.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "vmtest.h"

#define HN_BLOCK (2 * VM_MIB)
#define HN_MAX_BLOCKS 256
#define HN_EVERY 6   /* one block in six is hot */

/* ======================================================================
 * Child mode VMTEST_HOTNESS=child: VMTEST_HOTNESS_BLOCKS blocks of 2 MiB,
 * chunk-aligned, filled with varied words; a thread reads one word a page of
 * every hot block (b % 6 == phase, 0 at first) in a loop; "ready"; then on
 * each stdin line "where" it prints "where hot=<pages> cold=<pages>
 * hotN<n>=<pages> coldN<n>=<pages> ... state=<reclaim state>
 * signal=<accessed|other> pinN<n>=<pages of pinned blocks>", on "phase P"
 * it moves the hot set ("phase P"), on "pin B N" it pins blocks B..B+N-1
 * with tier_pin, stopping at the first error ("pin err=<it, or 0>
 * pinned=<blocks pinned>"), on "cold B N" it hints
 * them cold with tier_hint ("cold err="),
 * and at the end of input it checks the words: "check bad=<words that
 * differ> wbad=<words a writer found changed>". With VMTEST_HOTNESS_WRITE=1
 * the hot set is written (each word checked, then rewritten) instead of read;
 * with VMTEST_HOTNESS_WARM=1 the thread also reads one page in 16 of every
 * other block, so the accessed bits see every chunk in each interval.
 * ====================================================================== */

static uint64_t *hn_blk[HN_MAX_BLOCKS];
static size_t hn_n;
static atomic_bool hn_stop;
static _Atomic unsigned hn_phase;
static bool hn_pinned[HN_MAX_BLOCKS];   /* the hot blocks are those with b % HN_EVERY == phase */

static bool hn_mixed;   /* VMTEST_HOTNESS_MIXED=1: blocks smaller than a chunk, hot and cold in turn */
#define HN_MIXED_HOT (256 * 1024)
#define HN_MIXED_COLD (5 * HN_MIXED_HOT)

static bool hn_is_hot(size_t b)
{
  if (hn_mixed) return b % 2 == 0;
  return b % HN_EVERY == atomic_load_explicit(&hn_phase, memory_order_relaxed);
}

/* Bytes of block b. */
static size_t hn_len(size_t b)
{
  return !hn_mixed ? HN_BLOCK : hn_is_hot(b) ? HN_MIXED_HOT : HN_MIXED_COLD;
}

static uint64_t hn_word(size_t b, size_t k)
{
  uint64_t x = (b << 40) ^ (k * 0x9e3779b97f4a7c15ull) ^ 0x5bd1e995u;
  x ^= x >> 31;
  return x * 0xbf58476d1ce4e5b9ull;
}

static bool hn_writes;               /* VMTEST_HOTNESS_WRITE=1: the hot set is written */
static bool hn_warm;                 /* VMTEST_HOTNESS_WARM=1: the rest is read a little */
static _Atomic size_t hn_wbad;       /* words a writer found changed before rewriting them */

/* Reads (or checks and rewrites, with the same value) one word a page of
 * every hot block, in a loop; with hn_warm, one word in 16 pages of the
 * others too. */
static void *hn_reader(void *arg)
{
  volatile uint64_t sink = 0;
  while (!atomic_load_explicit(&hn_stop, memory_order_relaxed))
    for (size_t b = hn_warm || hn_mixed ? 0 : atomic_load_explicit(&hn_phase, memory_order_relaxed); b < hn_n;
         b += hn_warm ? 1 : hn_mixed ? 2 : HN_EVERY) {
      if (!hn_is_hot(b)) {
        for (size_t k = 0; k < hn_len(b) / 8; k += 16 * 4096 / 8) sink += hn_blk[b][k];
        continue;
      }
      for (size_t k = 0; k < hn_len(b) / 8; k += 4096 / 8) {
        if (!hn_writes) {
          sink += hn_blk[b][k];
          continue;
        }
        uint64_t want = hn_word(b, k);
        if (hn_blk[b][k] != want) atomic_fetch_add(&hn_wbad, 1);
        ((volatile uint64_t *)hn_blk[b])[k] = want;
      }
    }
  return arg;
}

static void hn_where(void)
{
  size_t hot[VM_MAX_NODES] = { 0 }, cold[VM_MAX_NODES] = { 0 }, pin[VM_MAX_NODES] = { 0 }, nh = 0, nc = 0;
  size_t tof0 = 0;   /* hot pages tier_of puts on tier 0 */
  for (size_t b = 0; b < hn_n; b++) {
    size_t *counts = hn_is_hot(b) ? hot : cold;
    /* Where the pages are, then where tier_of says: a page seen landed means
     * its piece's move is over, and the move records the piece up as it
     * ends (vm_pages_by_node waits for pages in flight; read the other way
     * round, 237 pages of pieces moving meanwhile were on tier 0 that
     * tier_of, read before, put on tier 1). */
    vm_pages_by_node(hn_blk[b], hn_len(b), counts);
    if (hn_is_hot(b))
      for (size_t off = 0; off < hn_len(b); off += 4096) tof0 += tier_of((char *)hn_blk[b] + off) == 0;
    if (hn_pinned[b]) vm_pages_by_node(hn_blk[b], hn_len(b), pin);
  }
  printf("where");
  for (int n = 0; n < VM_MAX_NODES; n++) {
    nh += hot[n];
    nc += cold[n];
    if (hot[n]) printf(" hotN%d=%zu", n, hot[n]);
    if (cold[n]) printf(" coldN%d=%zu", n, cold[n]);
    if (pin[n]) printf(" pinN%d=%zu", n, pin[n]);
  }
  tier_stats_t s;
  tier_stats_get(&s, sizeof s);
  printf(" hot=%zu cold=%zu tof0=%zu state=%u promoted0=%llu signal=%s\n", nh, nc, tof0, s.reclaim_state,
         (unsigned long long)s.tier[0].reclaim.promoted, s.cold_signal[0] == 'a' ? "accessed" : "other");
  fflush(stdout);
}

__attribute__((constructor)) static void hn_child_main(void)
{
  const char *mode = getenv("VMTEST_HOTNESS");
  if (!mode || strcmp(mode, "child") != 0) return;
  const char *nb = getenv("VMTEST_HOTNESS_BLOCKS"), *wr = getenv("VMTEST_HOTNESS_WRITE");
  hn_writes = wr && wr[0] == '1';
  const char *warm = getenv("VMTEST_HOTNESS_WARM");
  hn_warm = warm && warm[0] == '1';
  const char *mixed = getenv("VMTEST_HOTNESS_MIXED");
  hn_mixed = mixed && mixed[0] == '1';
  hn_n = nb ? strtoul(nb, NULL, 10) : 60;
  if (hn_n > HN_MAX_BLOCKS) hn_n = HN_MAX_BLOCKS;
  for (size_t b = 0; b < hn_n; b++) {
    void *p = NULL;
    if (hn_mixed ? (p = malloc(hn_len(b))) == NULL : posix_memalign(&p, HN_BLOCK, HN_BLOCK) != 0) {
      printf("error=malloc\n");
      _exit(1);
    }
    hn_blk[b] = p;
    for (size_t k = 0; k < hn_len(b) / 8; k++) hn_blk[b][k] = hn_word(b, k);
  }
  pthread_t th;
  pthread_create(&th, NULL, hn_reader, NULL);
  printf("ready blocks=%zu\n", hn_n);
  fflush(stdout);
  char line[64];
  unsigned ph, first, count;
  while (fgets(line, sizeof line, stdin)) {
    if (strncmp(line, "where", 5) == 0) hn_where();
    else if (sscanf(line, "cold %u %u", &first, &count) == 2 && first + count <= hn_n) {
      int err = 0;
      for (unsigned b = first; b < first + count && !err; b++) err = tier_hint(hn_blk[b], HN_BLOCK, TIER_HINT_COLD);
      printf("cold err=%d\n", err);
      fflush(stdout);
    } else if (sscanf(line, "pin %u %u", &first, &count) == 2 && first + count <= hn_n) {
      /* Blocks first..first+count-1, one tier_pin call each. */
      int err = 0;
      unsigned n = 0;
      for (unsigned b = first; b < first + count && !err; b++)
        if ((err = tier_pin(hn_blk[b], HN_BLOCK)) == 0) hn_pinned[b] = true, n++;
      printf("pin err=%d pinned=%u\n", err, n);
      fflush(stdout);
    }
    else if (sscanf(line, "phase %u", &ph) == 1) {
      atomic_store(&hn_phase, ph % HN_EVERY);
      printf("phase %u\n", ph);
      fflush(stdout);
    }
  }
  atomic_store(&hn_stop, true);
  pthread_join(th, NULL);
  size_t bad = 0;
  for (size_t b = 0; b < hn_n; b++)
    for (size_t k = 0; k < hn_len(b) / 8; k++) bad += hn_blk[b][k] != hn_word(b, k);
  printf("check bad=%zu wbad=%zu\n", bad, atomic_load(&hn_wbad));
  fflush(stdout);
  _exit(0);
}

/* ======================================================================
 * The tests.
 * ====================================================================== */

static vm_proc_t child = { .in = -1, .out = -1 };
static char cg[128];
static int lock_fd = -1;

static void hn_init(void)
{
  /* One heap test at a time with the reclaim tests: they measure tier 0. */
  lock_fd = vm_flock(VM_RECLAIM_LOCK, LOCK_EX);
  cr_assert_geq(lock_fd, 0);
  /* And no heavy program beside it (the suites that hold VM_QUIET_LOCK
   * shared): the accessed bits see what the child touched in a window, and
   * under TCG a neighbour takes the guest's one host thread from it. In a
   * fresh-clone run of 12-07 (fc16) two hot sets stalled at 80 % on tier 0
   * (flat: the heat test; 2tier-6.1: the written hot set), each passing
   * 7/7 with its suite alone. Closed with the process (Criterion forks a
   * test). */
  cr_assert_geq(vm_flock(VM_QUIET_LOCK, LOCK_EX), 0, "%s: %s", VM_QUIET_LOCK, strerror(errno));
}

static void hn_fini(void)
{
  vm_proc_kill(&child);
  if (cg[0]) vm_cgroup_remove(cg);
  cg[0] = 0;
  if (lock_fd >= 0) close(lock_fd);
  lock_fd = -1;
}

/* The number after " key=" in line, -1 when absent. */
static long long hn_kv(const char *line, const char *key)
{
  char pat[48];
  snprintf(pat, sizeof pat, " %s=", key);
  const char *eol = strchr(line, '\n'), *p = strstr(line, pat);
  return p && (!eol || p < eol) ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

/* The child's answer to a new "where" (earlier answers dropped). */
static const char *hn_where_now(void)
{
  return vm_proc_ask(&child, "where", "where ", 30000);
}

/* Pages of the hot (or cold) blocks on the nodes of tier t, from a where line. */
static long long hn_on(const vm_topology_t *topo, const char *line, const char *which, int t)
{
  long long sum = 0;
  for (int n = 0; n < 64; n++) {
    if (!(topo->tier_nodes[t] >> n & 1)) continue;
    char key[24];
    snprintf(key, sizeof key, "%sN%d", which, n);
    long long v = hn_kv(line, key);
    if (v > 0) sum += v;
  }
  return sum;
}

/* Starts the child with env (NULL-terminated) and waits for "ready"; with
 * `name`, in a fresh cgroup of that name (and the pid) whose memory.high
 * leaves tier 0 a roomy 240 MiB share. */
static void hn_spawn(char *const env[], const char *name)
{
  if (name) {
    char rel[64], v[32];
    snprintf(rel, sizeof rel, "%s-%d", name, (int)getpid());
    if (cg[0]) vm_cgroup_remove(cg);
    vm_cgroup_make(cg, sizeof cg, rel);
    vm_caps_t c = vm_caps(vm_topology());
    snprintf(v, sizeof v, "%llu", (unsigned long long)vm_limit_for_share(&c, 240 * VM_MIB));
    vm_cgroup_set(cg, "memory.high", v);
  }
  char *argv[] = { (char *)vm_self(), NULL };
  vm_spawn(&child, argv, env, name ? cg : NULL, VM_SPAWN_STDERR);
  cr_assert_not_null(vm_proc_expect(&child, "ready ", 120000), "%s", child.buf);
}

/* Lowers the cgroup's memory.high to the limit whose tier-0 share is
 * `share`; returns that share as tiermalloc scales it. */
static uint64_t hn_lower_share(const vm_caps_t *c, uint64_t share)
{
  char v[32];
  uint64_t lim = vm_limit_for_share(c, share);
  snprintf(v, sizeof v, "%llu", (unsigned long long)lim);
  vm_cgroup_set(cg, "memory.high", v);
  return vm_scaled(c, lim, 0);
}

/* Bytes of the child's heap on tier 0, from a where line. */
static long long hn_heap_on0(const vm_topology_t *topo, const char *l)
{
  return (hn_on(topo, l, "hot", 0) + hn_on(topo, l, "cold", 0)) * 4096;
}

/* Runs the child under `hotness` (and `extra`: up to two environment
 * entries, separated by a space) with
 * 60 blocks (20 MiB hot), lowers the cgroup's memory.high to a tier-0 share
 * of 40 MiB, and returns the share of hot pages on tier 0 after reclaim has
 * settled (at most 12 s). */
static double hn_hot_kept(const vm_topology_t *topo, const char *hotness, const char *extra,
                          const char **where)
{
  vm_caps_t c = vm_caps(topo);
  char more[2][64] = { "", "" };
  if (extra) sscanf(extra, "%63s %63s", more[0], more[1]);
  char *env[] = { "VMTEST_HOTNESS=child", "VMTEST_HOTNESS_BLOCKS=60", (char *)hotness,
                  "TIERMALLOC_HOTNESS_INTERVAL_MS=500", more[0][0] ? more[0] : NULL, more[1][0] ? more[1] : NULL,
                  NULL };
  hn_spawn(env, "vmtest-hotness");
  const char *l = hn_where_now();
  long long hot = hn_kv(l, "hot");
  cr_assert_geq(hn_on(topo, l, "hot", 0), hot - 16, "%s: the heap is not on tier 0 at first:\n%s", topo->name,
                child.buf);
  usleep(1500 * 1000);   /* three intervals of the reader */
  uint64_t want = hn_lower_share(&c, 40 * VM_MIB);
  long long end = 0;
  for (int i = 0; i < 24; i++) {
    usleep(500 * 1000);
    l = hn_where_now();
    bool held = hn_heap_on0(topo, l) <= (long long)want && hn_kv(l, "state") == TIER_RECLAIM_IDLE;
    if (held && ++end >= 2) break;
  }
  *where = l;
  cr_expect_leq(hn_heap_on0(topo, l), (long long)want,
                "%s: the heap on tier 0 is not under its high %.1f MiB:\n%s", topo->name,
                (double)want / VM_MIB, child.buf);
  return hot ? (double)hn_on(topo, l, "hot", 0) / (double)hot : 0;
}

static void hn_end_intact(void)
{
  const char *l = vm_proc_end(&child, "check ", 120000);
  cr_expect_eq(hn_kv(l, "bad"), 0, "the heap changed:\n%s", child.buf);
  cr_expect_eq(hn_kv(l, "wbad"), 0, "a writer found its words changed:\n%s", child.buf);
  cr_expect_eq(vm_proc_wait(&child), 0, "%s", child.buf);
}

Test(hotness, a_read_only_hot_set_stays_on_top_when_the_high_drops, .init = hn_init, .fini = hn_fini,
     .timeout = 240)
{
  const vm_topology_t *topo = vm_topology();
  const char *l;
  double accessed = hn_hot_kept(topo, "TIERMALLOC_HOTNESS=accessed", NULL, &l);
  cr_expect(strstr(l, "signal=accessed") != NULL, "%s: not the accessed bits:\n%s", topo->name, child.buf);
  cr_expect_geq(accessed, 0.9, "%s: only %.0f %% of the read-only hot set kept on tier 0:\n%s", topo->name,
                accessed * 100, child.buf);
  hn_end_intact();
  double age = hn_hot_kept(topo, "TIERMALLOC_HOTNESS=commit-age", NULL, &l);
  hn_end_intact();
  cr_log_info("%s: hot set kept on tier 0 under a 40 MiB share: accessed bits %.0f %%, commit age %.0f %%",
              topo->name, accessed * 100, age * 100);
}

/* Every chunk read in each interval (the hot set's every page, the rest's
 * one page in 16): the accessed bits see them all, and only the heat (the
 * share of pages seen) tells the hot set from the rest. In 4 KiB pages
 * (TIERMALLOC_THP=never): a huge page has one accessed bit, and a chunk in
 * one is all seen or all not, so heat cannot grade it. */
Test(hotness, the_heat_tells_the_hot_set_from_chunks_read_a_little, .init = hn_init, .fini = hn_fini,
     .timeout = 240)
{
  const vm_topology_t *topo = vm_topology();
  const char *l;
  double kept = hn_hot_kept(topo, "TIERMALLOC_HOTNESS=accessed", "VMTEST_HOTNESS_WARM=1 TIERMALLOC_THP=never", &l);
  cr_expect(strstr(l, "signal=accessed") != NULL, "%s: not the accessed bits:\n%s", topo->name, child.buf);
  cr_expect_geq(kept, 0.9, "%s: only %.0f %% of the hot set kept on tier 0 beside warm chunks:\n%s",
                topo->name, kept * 100, child.buf);
  hn_end_intact();
  cr_log_info("%s: hot set kept on tier 0 beside chunks read a little: %.0f %%", topo->name, kept * 100);
}

/* Polls the child until ≥ 90 % of its hot pages are on tier 0 (or ms
 * passed); returns the ms it took, -1 if never; *where the last line. */
static long long hn_until_hot_on_top(const vm_topology_t *topo, int ms, const char **where)
{
  long long t0 = 0;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  t0 = ts.tv_sec * 1000ll + ts.tv_nsec / 1000000;
  for (;;) {
    const char *l = hn_where_now();
    *where = l;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long now = ts.tv_sec * 1000ll + ts.tv_nsec / 1000000;
    long long hot = hn_kv(l, "hot");
    if (hot > 0 && hn_on(topo, l, "hot", 0) * 10 >= hot * 9) return now - t0;
    if (now - t0 > ms) return -1;
    usleep(250 * 1000);
  }
}

/* Spawns the child with env, whose tier 0 has a high of high_mib: the hot
 * set is 90 % on tier 0 within 10 s, moved there by promotion (counted),
 * tier 0 under its high. Returns the ms it took (-1: not within 10 s);
 * *where the last line, *on0 the heap's bytes on tier 0 then. */
static long long hn_promoted_within_10s(const vm_topology_t *topo, char *const env[], long long high_mib,
                                        const char **where, long long *on0)
{
  hn_spawn(env, NULL);
  long long took = hn_until_hot_on_top(topo, 10000, where);
  cr_expect(took >= 0, "%s: the hot set is not 90 %% on tier 0 after 10 s:\n%s", topo->name, child.buf);
  cr_expect_gt(hn_kv(*where, "promoted0"), 0, "%s:\n%s", topo->name, child.buf);
  *on0 = hn_heap_on0(topo, *where);
  cr_expect_leq(*on0, high_mib * (long long)VM_MIB, "%s: tier 0 above its high:\n%s", topo->name, child.buf);
  return took;
}

/* Most of the heap below (tier 0's high 24 MiB from the environment, the
 * heap 120 MiB): the hot set, read from the start, is promoted in exchange
 * for tier 0's cold chunks; then, once the moved chunks' cool-down is over,
 * the hot set moves to other blocks, and placement follows. Each within 10
 * s (hotness interval 500 ms), tier 0 kept under its high. */
static void hn_promotion(const char *mode)
{
  const vm_topology_t *topo = vm_topology();
  char *env[] = { "VMTEST_HOTNESS=child", "VMTEST_HOTNESS_BLOCKS=60", "TIERMALLOC_HOTNESS=accessed",
                  "TIERMALLOC_HOTNESS_INTERVAL_MS=500", "TIERMALLOC_TOPTIER_HIGH=24M", (char *)mode, NULL };
  const char *l;
  long long on0, took = hn_promoted_within_10s(topo, env, 24, &l, &on0);
  /* A phase, then a change: the chunks moved stay put for reclaim's
   * cool-down (10 s) first, so the change is measured from a settled state. */
  usleep(10500 * 1000);
  cr_assert_eq(vm_proc_say(&child, "phase 3"), 0);
  cr_assert_not_null(vm_proc_expect(&child, "phase ", 30000));
  long long follow = hn_until_hot_on_top(topo, 10000, &l);
  cr_expect(follow >= 0, "%s: after the phase change, the hot set is not 90 %% on tier 0 after 10 s:\n%s",
            topo->name, child.buf);
  on0 = hn_heap_on0(topo, l);
  cr_expect_leq(on0, 24 * (long long)VM_MIB, "%s: tier 0 above its high:\n%s", topo->name, child.buf);
  cr_log_info("%s: %s hot set on top %lld ms after start, %lld ms after the phase change", topo->name,
              strstr(mode, "WRITE=1") ? "written" : "read-only", took, follow);
  hn_end_intact();
}

Test(hotness, hot_data_below_is_promoted_and_placement_follows_a_phase_change, .init = hn_init, .fini = hn_fini,
     .timeout = 240)
{
  hn_promotion("VMTEST_HOTNESS_WRITE=0");
}

/* The same with the hot set written all through the moves: every word a
 * writer finds is the one it last wrote, and the heap is intact. */
Test(hotness, a_written_hot_set_is_promoted_with_its_writers_running, .init = hn_init, .fini = hn_fini,
     .timeout = 240)
{
  hn_promotion("VMTEST_HOTNESS_WRITE=1");
}

/* What whole chunks cannot serve: a hot set in blocks of 256 KiB allocated
 * in turn with blocks of 1280 KiB nobody uses (five times as much), 96 MiB
 * in all, under a tier-0 high of 32 MiB (environment). Every chunk holds
 * hot and cold data alike, so no chunk is hotter than another: the hot
 * pieces must move up alone (64 KiB), in exchange for the mixed chunks of
 * tier 0. At least 90 % of the hot set on tier 0 within 10 s (hotness
 * interval 500 ms), tier 0 under its high, tier_of right, the heap
 * intact. */
static void hn_pieces(const char *mode)
{
  const vm_topology_t *topo = vm_topology();
  char *env[] = { "VMTEST_HOTNESS=child", "VMTEST_HOTNESS_BLOCKS=128", "VMTEST_HOTNESS_MIXED=1",
                  "TIERMALLOC_HOTNESS=accessed", "TIERMALLOC_HOTNESS_INTERVAL_MS=500",
                  "TIERMALLOC_TOPTIER_HIGH=32M", (char *)mode, NULL };
  const char *l;
  long long on0, took = hn_promoted_within_10s(topo, env, 32, &l, &on0);
  /* tier_of follows the pieces: it puts on tier 0 the hot pages that are
   * there (a page first touched after its piece moved would not be). */
  long long tof0 = hn_kv(l, "tof0"), top = hn_on(topo, l, "hot", 0);
  cr_expect_leq(llabs(tof0 - top), hn_kv(l, "hot") / 20, "%s: tier_of puts %lld hot pages on tier 0, %lld are:\n%s",
                topo->name, tof0, top, child.buf);
  cr_log_info("%s: %s hot set of 256 KiB blocks 90 %% on top %lld ms after start (heap on tier 0: %.1f MiB; "
              "hot pages on tier 0 %lld, by tier_of %lld)",
              topo->name, strstr(mode, "WRITE=1") ? "written" : "read-only", took, (double)on0 / VM_MIB, top, tof0);
  hn_end_intact();
}

Test(hotness, a_hot_set_in_blocks_smaller_than_a_chunk_moves_up_in_pieces, .init = hn_init, .fini = hn_fini,
     .timeout = 240)
{
  hn_pieces("VMTEST_HOTNESS_WRITE=0");
}

/* The same with the hot set written all through the moves: every word a
 * writer finds is the one it last wrote. */
Test(hotness, a_written_hot_set_in_pieces_moves_up_with_its_writers_running, .init = hn_init, .fini = hn_fini,
     .timeout = 240)
{
  hn_pieces("VMTEST_HOTNESS_WRITE=1");
}

/* Pins: tier 0's min 8 MiB (environment); two blocks pinned, then of four
 * more the two that fit the min, the third refused; the cgroup's memory.high lowered to a
 * tier-0 share of 32 MiB: reclaim demotes the rest, the pinned blocks stay
 * on tier 0 to the page, though they were the heap's coldest (COLD hint). */
Test(hotness, pinned_blocks_stay_on_top_and_a_pin_beyond_min_is_refused, .init = hn_init, .fini = hn_fini,
     .timeout = 240)
{
  const vm_topology_t *topo = vm_topology();
  vm_caps_t c = vm_caps(topo);
  char *env[] = { "VMTEST_HOTNESS=child", "VMTEST_HOTNESS_BLOCKS=40", "TIERMALLOC_TOPTIER_MIN=8M", NULL };
  hn_spawn(env, "vmtest-pin");
  cr_assert_eq(vm_proc_say(&child, "cold 3 2"), 0);
  cr_assert_not_null(vm_proc_expect(&child, "cold ", 30000), "%s", child.buf);
  cr_assert_eq(vm_proc_say(&child, "pin 3 2"), 0);
  const char *l = vm_proc_expect(&child, "pin ", 30000);
  cr_assert_not_null(l, "%s", child.buf);
  cr_expect_eq(hn_kv(l, "err"), 0, "%s: two blocks (4 MiB) under an 8 MiB min:\n%s", topo->name, child.buf);
  ((char *)l)[0] = '#';   /* the next answer is another pin line */
  cr_assert_eq(vm_proc_say(&child, "pin 20 4"), 0);
  l = vm_proc_expect(&child, "pin ", 30000);
  cr_assert_not_null(l, "%s", child.buf);
  cr_expect_eq(hn_kv(l, "err"), ENOSPC, "%s: 8 MiB more past the min:\n%s", topo->name, child.buf);
  cr_expect_eq(hn_kv(l, "pinned"), 2, "%s: up to the min:\n%s", topo->name, child.buf);
  /* A 32 MiB share keeps the cgroup's own memory.high above the 80 MiB heap
   * (the kernel would swap it otherwise). */
  uint64_t want = hn_lower_share(&c, 32 * VM_MIB);
  long long pinned = 0, on0 = 0;
  for (int i = 0; i < 30; i++) {
    usleep(500 * 1000);
    l = hn_where_now();
    pinned = hn_on(topo, l, "pin", 0);
    on0 = hn_heap_on0(topo, l);
    if (on0 <= (long long)want) break;
  }
  cr_expect_leq(on0, (long long)want, "%s: tier 0 not under its share %.1f MiB:\n%s", topo->name,
                (double)want / VM_MIB, child.buf);
  cr_expect_eq(pinned, 4 * HN_BLOCK / 4096, "%s: pinned pages left tier 0:\n%s", topo->name, child.buf);
  hn_end_intact();
}
