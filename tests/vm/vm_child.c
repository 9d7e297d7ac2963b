/*
 * Child modes of build/tests/vmtest. Some claims need a fresh process whose
 * environment tiermalloc reads at start-up (TIERMALLOC_TIERS,
 * TIERMALLOC_TOPTIER_MAX). The tests run this same binary with
 * VMTEST_CHILD=<mode>; a constructor runs the mode, prints key=value lines
 * on stdout and exits before Criterion starts. No Criterion calls here.
 *
 *   tiers:  tier_count(), and for each tier its nodes (tier_stats_get) and
 *           the node that move_pages reports for 4 MiB from tier_malloc.
 *   budget: 64 x 1 MiB malloc'd and touched, reclaim settled (child_settle); for each tier, how many blocks
 *           tier_of() puts there, and on which nodes the pages are of every
 *           part of a block that tier_of() puts there (a block can straddle
 *           two 2 MiB chunks of different tiers); the stats' mapped, used
 *           and resident bytes per tier.
 *   thp:    a heap of VMTEST_THP_MIB MiB of 1 KiB mallocs, touched; the
 *           bytes of huge pages in tiermalloc's mappings (smaps).
 *   heap:   VMTEST_HEAP_MIB MiB (200) of malloc in blocks of VMTEST_BLOCK_MIB
 *           MiB (1), touched (vm_touch), the first malloc of the mode; reclaim
 *           settled (child_settle); then the stats of every tier with its budget, and per tier the pages
 *           (move_pages) of every 2 MiB-chunk part of a block that tier_of()
 *           puts there; with VMTEST_PARTS set, one line per part too; the
 *           tiered bytes per node of /proc/self/numa_maps. With VMTEST_HOLD
 *           set it then prints "ready" and keeps the heap until its stdin
 *           ends (the test reads the cgroup meanwhile). With
 *           VMTEST_MISPLACE_MIB set, before the stats it moves that much of
 *           tier 1's blocks to tier 0's node (move_pages, as the kernel's
 *           fallback of a huge page from a fragmented node puts them) and
 *           prints "misplace pages=<moved> back_ms=<ms until none is left there,
 *           or -1 after 8 s>".
 *   phases: 64 MiB in 4 MiB blocks, touched, all on tier 0 ("A" line); then
 *           commands on stdin, each answered by one line (see child_phases).
 */
#include <numaif.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vmtest.h"

static void child_tiers(void)
{
  int n = tier_count();
  printf("count=%d\n", n);
  tier_stats_t s;
  if (tier_stats_get(&s, sizeof s) != 0) { printf("error=stats\n"); return; }
  for (int t = 0; t < n && t < TIER_MAX_TIERS; t++) {
    size_t len = 4 * VM_MIB, counts[VM_MAX_NODES] = { 0 };
    char *p = tier_malloc(len, t);
    if (!p) { printf("tier=%d error=tier_malloc\n", t); continue; }
    vm_touch(p, len);
    size_t bad = vm_pages_by_node(p, len, counts);
    printf("tier=%d nodes=0x%llx of=%d absent=%zu span=%zu", t, (unsigned long long)s.tier[t].nodes[0],
           tier_of(p), bad, vm_span_pages(p, len));
    for (int i = 0; i < VM_MAX_NODES; i++)
      if (counts[i]) printf(" N%d=%zu", i, counts[i]);
    printf("\n");
    tier_free(p);
  }
}

/* Waits until the reclaim thread has made two passes since the heap was
 * written and is idle (or there is none), at most 8 s: placement fills a
 * tier in committed bytes, and reclaim then takes back what huge pages put
 * over in pages. The figures printed are those it holds. */
static void child_settle(void)
{
  tier_stats_t s;
  if (tier_stats_get(&s, sizeof s) != 0 || s.reclaim_state == TIER_RECLAIM_STOPPED) return;
  uint64_t p0 = s.reclaim_passes;
  for (int i = 0; i < 160; i++) {
    struct timespec ts = { 0, 50 * 1000 * 1000 };
    nanosleep(&ts, NULL);
    if (tier_stats_get(&s, sizeof s) != 0) return;
    if (s.reclaim_passes >= p0 + 2 && s.reclaim_state == TIER_RECLAIM_IDLE) return;
  }
}

static void child_budget(void)
{
  enum { CHUNKS = 64 };
  size_t len = VM_MIB;
  size_t chunks[TIER_MAX_TIERS] = { 0 }, span[TIER_MAX_TIERS] = { 0 };
  size_t counts[TIER_MAX_TIERS][VM_MAX_NODES] = { { 0 } };
  size_t none = 0;
  void *keep[CHUNKS];
  for (int i = 0; i < CHUNKS; i++) {
    keep[i] = malloc(len);
    if (!keep[i]) { printf("error=malloc\n"); return; }
    vm_touch(keep[i], len);
  }
  child_settle();
  for (int i = 0; i < CHUNKS; i++) {
    int t = tier_of(keep[i]);
    if (t < 0 || t >= TIER_MAX_TIERS) { none++; continue; }
    chunks[t]++;
    /* Each part of the block within one 2 MiB chunk, by its own tier. */
    for (char *a = keep[i], *end = a + len; a < end;) {
      char *next = (char *)(((uintptr_t)a | (2 * VM_MIB - 1)) + 1);
      if (next > end) next = end;
      int pt = tier_of(a);
      if (pt >= 0 && pt < TIER_MAX_TIERS) {
        span[pt] += vm_span_pages(a, (size_t)(next - a));
        vm_pages_by_node(a, (size_t)(next - a), counts[pt]);
      }
      a = next;
    }
  }
  tier_stats_t s;
  if (tier_stats_get(&s, sizeof s) != 0) { printf("error=stats\n"); return; }
  printf("count=%d untiered=%zu\n", tier_count(), none);
  for (int t = 0; t < tier_count() && t < TIER_MAX_TIERS; t++) {
    printf("tier=%d chunks=%zu span=%zu mapped=%llu used=%llu resident=%llu", t, chunks[t],
           span[t], (unsigned long long)s.tier[t].mapped, (unsigned long long)s.tier[t].used,
           (unsigned long long)s.tier[t].resident);
    for (int i = 0; i < VM_MAX_NODES; i++)
      if (counts[t][i]) printf(" N%d=%zu", i, counts[t][i]);
    printf("\n");
  }
  for (int i = 0; i < CHUNKS; i++) free(keep[i]);
}

static void child_thp(void)
{
  const char *mib = getenv("VMTEST_THP_MIB");
  size_t n = (mib ? strtoull(mib, NULL, 10) : 0) * 1024;
  void **keep = malloc((n + 1) * sizeof *keep);
  if (!keep) { printf("error=malloc\n"); return; }
  for (size_t i = 0; i < n; i++) {
    keep[i] = malloc(1024);
    if (!keep[i]) { printf("error=malloc\n"); return; }
    memset(keep[i], (int)(i % 251) + 1, 1024);
  }
  uint64_t huge = 0;
  if (vm_tiered_anon_huge_bytes(&huge) != 0) { printf("error=smaps\n"); return; }
  printf("heap_mib=%zu huge=%llu\n", n / 1024, (unsigned long long)huge);
  for (size_t i = 0; i < n; i++) free(keep[i]);
  free(keep);
}

static size_t env_num(const char *name, size_t dflt)
{
  const char *v = getenv(name);
  return v && *v ? strtoull(v, NULL, 10) : dflt;
}

/* Per tier: the parts counted, their span in pages and their pages per node. */
typedef struct child_parts_s {
  size_t parts[TIER_MAX_TIERS], span[TIER_MAX_TIERS];
  size_t counts[TIER_MAX_TIERS][VM_MAX_NODES];
  size_t absent;
} child_parts_t;

/* Each part of [p, p+len) within one 2 MiB chunk, by its own tier_of(). */
static void child_count_parts(char *p, size_t len, child_parts_t *c, int print)
{
  for (char *a = p, *end = p + len; a < end;) {
    char *next = (char *)(((uintptr_t)a | (2 * VM_MIB - 1)) + 1);
    if (next > end) next = end;
    int t = tier_of(a);
    if (t >= 0 && t < TIER_MAX_TIERS) {
      size_t counts[VM_MAX_NODES] = { 0 };
      size_t bad = vm_pages_by_node(a, (size_t)(next - a), counts);
      c->absent += bad;
      c->parts[t]++;
      c->span[t] += vm_span_pages(a, (size_t)(next - a));
      for (int i = 0; i < VM_MAX_NODES; i++) c->counts[t][i] += counts[i];
      if (print) {
        printf("part off=%zu len=%zu tier=%d absent=%zu", (size_t)(a - p), (size_t)(next - a), t, bad);
        for (int i = 0; i < VM_MAX_NODES; i++)
          if (counts[i]) printf(" N%d=%zu", i, counts[i]);
        printf("\n");
      }
    }
    a = next;
  }
}

static void child_print_tier_stats(const tier_stats_t *s, const child_parts_t *c)
{
  for (unsigned t = 0; t < s->ntiers && t < TIER_MAX_TIERS; t++) {
    const tier_stats_tier_t *x = &s->tier[t];
    printf("tier=%u nodes=0x%llx capacity=%llu used=%llu committed=%llu resident=%llu min=%llu low=%llu "
           "high=%llu max=%llu source=%u demoted=%llu", t, (unsigned long long)x->nodes[0],
           (unsigned long long)x->capacity, (unsigned long long)x->used,
           (unsigned long long)x->committed, (unsigned long long)x->resident,
           (unsigned long long)x->budget.min, (unsigned long long)x->budget.low,
           (unsigned long long)x->budget.high, (unsigned long long)x->budget.max, x->budget.source,
           (unsigned long long)x->reclaim.demoted);
    if (c) {
      printf(" parts=%zu span=%zu", c->parts[t], c->span[t]);
      for (int i = 0; i < VM_MAX_NODES; i++)
        if (c->counts[t][i]) printf(" N%d=%zu", i, c->counts[t][i]);
    }
    printf("\n");
  }
}

static long long child_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The one tier of every part of [p, p+len), or -1 when they differ or one
 * is not placed. */
static int child_block_tier(const char *p, size_t len)
{
  int t = tier_of(p);
  for (const char *a = p; a < p + len; a = (const char *)(((uintptr_t)a | (2 * VM_MIB - 1)) + 1))
    if (tier_of(a) != t) return -1;
  return t == TIER_NONE ? -1 : t;
}

/* Moves up to mib MiB of the whole tier-1 blocks in keep[0..n) to tier 0's
 * first node, then polls each 50 ms, up to 5 s, until none of their pages
 * is left there; prints what it moved and how long that took. */
static void child_misplace(char **keep, size_t n, size_t block, size_t mib)
{
  tier_stats_t s;
  if (tier_count() < 2 || tier_stats_get(&s, sizeof s) != 0 || s.tier[0].nodes[0] == 0) {
    printf("error=misplace needs two tiers\n");
    return;
  }
  int top = __builtin_ctzll(s.tier[0].nodes[0]);
  enum { MAXP = 64 * 256 };   /* 64 MiB of 4 KiB pages */
  static void *pages[MAXP];
  static int nodes[MAXP], status[MAXP];
  size_t np = 0, want = mib * VM_MIB / 4096;
  for (size_t i = 0; i < n && np < want && np < MAXP; i++) {
    if (child_block_tier(keep[i], block) != 1) continue;
    for (size_t off = 0; off < block && np < want && np < MAXP; off += 4096) {
      pages[np] = keep[i] + off;
      nodes[np++] = top;
    }
  }
  if (np == 0 || move_pages(0, np, pages, nodes, status, MPOL_MF_MOVE) < 0) {
    printf("error=misplace move_pages (%zu pages)\n", np);
    return;
  }
  size_t moved = 0;
  for (size_t i = 0; i < np; i++) moved += status[i] == top;
  long long t0 = child_ms(), back = -1;
  while (child_ms() - t0 < 8000) {
    struct timespec ts = { 0, 50 * 1000 * 1000 };
    nanosleep(&ts, NULL);
    if (move_pages(0, np, pages, NULL, status, 0) < 0) break;
    size_t left = 0;
    for (size_t i = 0; i < np; i++) left += status[i] == top;
    if (left == 0) { back = child_ms() - t0; break; }
  }
  printf("misplace pages=%zu back_ms=%lld\n", moved, back);
}

static void child_heap(void)
{
  static char *keep[4096];
  size_t block = env_num("VMTEST_BLOCK_MIB", 1) * VM_MIB;
  size_t n = env_num("VMTEST_HEAP_MIB", 200) * VM_MIB / (block ? block : 1);
  if (block == 0 || n > sizeof keep / sizeof *keep) { printf("error=bad heap size\n"); return; }
  size_t untiered = 0;
  for (size_t i = 0; i < n; i++) {
    keep[i] = malloc(block);
    if (!keep[i]) { printf("error=malloc\n"); return; }
    vm_touch(keep[i], block);
    if (tier_of(keep[i]) == TIER_NONE) untiered++;
  }
  child_settle();
  size_t misplace = env_num("VMTEST_MISPLACE_MIB", 0);
  if (misplace) {
    child_misplace(keep, n, block, misplace);
    child_settle();
  }
  static child_parts_t c;
  int parts = getenv("VMTEST_PARTS") != NULL;
  for (size_t i = 0; i < n; i++) child_count_parts(keep[i], block, &c, parts);
  tier_stats_t s;
  if (tier_stats_get(&s, sizeof s) != 0) { printf("error=stats\n"); return; }
  uint64_t maps[VM_MAX_NODES] = { 0 };
  if (vm_numa_maps_bytes(0, 1, maps) != 0) { printf("error=numa_maps\n"); return; }
  printf("count=%d blocks=%zu untiered=%zu absent=%zu cgroup=%s\n", tier_count(), n, untiered,
         c.absent, s.cgroup);
  child_print_tier_stats(&s, &c);
  printf("maps");
  for (int i = 0; i < VM_MAX_NODES; i++)
    if (maps[i]) printf(" N%d=%llu", i, (unsigned long long)maps[i]);
  printf("\n");
  if (getenv("VMTEST_HOLD")) {
    printf("ready\n");
    fflush(stdout);
    char buf[64];
    while (read(STDIN_FILENO, buf, sizeof buf) > 0) {}
  }
  for (size_t i = 0; i < n; i++) free(keep[i]);
}

/* Pages of [p, p+len) on the nodes of tier t and elsewhere (touches it). */
static void child_where(char *p, size_t len, const tier_stats_t *s, int t, size_t *on, size_t *off)
{
  size_t counts[VM_MAX_NODES] = { 0 };
  vm_touch(p, len);
  *off = vm_pages_by_node(p, len, counts);
  *on = 0;
  for (int i = 0; i < VM_MAX_NODES; i++) {
    if (i < 64 && (s->tier[t].nodes[0] >> i & 1)) *on += counts[i];
    else *off += counts[i];
  }
}

/*
 * phases: where new memory goes while the test changes the cgroup's limits.
 * Start: 16 x 4 MiB malloc'd and touched; prints "A blocks=16 tier0=<blocks
 * on tier 0> on=<pages on tier 0's nodes> off=<elsewhere> max0=... used0=...".
 * Then reads commands, one per line:
 *   "move 0" / "move 1": mallocs 2 MiB blocks, untouched, until one lies
 *        wholly on tier 0 and charges it more chunks ("move 0"), or wholly
 *        on one tier below it ("move 1"), for up to 4 s. The others are
 *        kept, so every new block needs memory newly carved or committed
 *        (the cgroup is re-read only then, at most once a second), paced so
 *        that 3 s of them cannot fill the room tier 0 had when the command
 *        came (a full tier 0 would send blocks down for the wrong reason).
 *        The block that arrived is touched and its pages located. Prints
 *        "move T ms=<since the command> probes=<kept> holes=<of them, blocks
 *        wholly on tier 0 that charged it nothing more: first fit put them
 *        into chunks that held tier-0 memory already> pace=<ms> tier=<its
 *        tier, -1 at the timeout> on=<pages on that tier's nodes> off=<not>
 *        max0= high0= used0= (tier 0, now) room0=<its room at the start>".
 *   "free": frees the kept blocks with a part on tier 0 (the 64 MiB of the
 *        start stay); prints "free blocks=<n> used0= max0=".
 * End of input: exit.
 */
static void child_phases(void)
{
  enum { A_BLOCKS = 16, MAX_PROBES = 4096 };
  const size_t a_len = 4 * VM_MIB, probe = 2 * VM_MIB;
  static char *a[A_BLOCKS], *kept[MAX_PROBES];
  static int kept_tier[MAX_PROBES];
  size_t nkept = 0;
  tier_stats_t s;
  size_t tier0 = 0, on = 0, off = 0;
  for (int i = 0; i < A_BLOCKS; i++) {
    a[i] = malloc(a_len);
    if (!a[i]) { printf("error=malloc\n"); return; }
    vm_touch(a[i], a_len);
  }
  if (tier_stats_get(&s, sizeof s) != 0) { printf("error=stats\n"); return; }
  for (int i = 0; i < A_BLOCKS; i++) {
    size_t bon, boff;
    if (child_block_tier(a[i], a_len) == 0) tier0++;
    child_where(a[i], a_len, &s, 0, &bon, &boff);
    on += bon;
    off += boff;
  }
  printf("A blocks=%d tier0=%zu on=%zu off=%zu max0=%llu used0=%llu\n", A_BLOCKS, tier0, on, off,
         (unsigned long long)s.tier[0].budget.max, (unsigned long long)s.tier[0].used);
  fflush(stdout);

  char cmd[64];
  FILE *in = fdopen(STDIN_FILENO, "r");
  if (!in) { printf("error=fdopen\n"); return; }
  while (fgets(cmd, sizeof cmd, in)) {
    int want;
    if (sscanf(cmd, "move %d", &want) == 1) {
      long long t0 = child_ms();
      if (tier_stats_get(&s, sizeof s) != 0) { printf("error=stats\n"); return; }
      uint64_t place = s.tier[0].budget.high < s.tier[0].budget.max ? s.tier[0].budget.high
                                                                     : s.tier[0].budget.max;
      uint64_t room = place > s.tier[0].used ? place - s.tier[0].used : 0;
      /* 3 s of probes fill at most the room tier 0 has now. */
      long long pace = room ? (long long)(3000 * (uint64_t)probe / room) : 5;
      if (pace < 5) pace = 5;
      if (pace > 100) pace = 100;
      int got = -1;
      char *p = NULL;
      size_t probes = 0, holes = 0;
      uint64_t used0 = s.tier[0].used;
      while (child_ms() - t0 < 4000 && nkept < MAX_PROBES) {
        p = malloc(probe);
        if (!p) { printf("error=malloc\n"); return; }
        int t = child_block_tier(p, probe);
        if (want != 0 && t > 0) { got = t; break; }
        if (want == 0 && t == 0) {
          /* Wholly on tier 0 because it fits a hole in chunks that were on
           * tier 0 already (first fit reuses freed blocks), or because new
           * chunks went there. Both charge tier 0 more (used counts committed
           * bytes), but new chunks go there only while its budget has room
           * over what it held: only then is it the budget that let it in. */
          if (tier_stats_get(&s, sizeof s) != 0) { printf("error=stats\n"); return; }
          uint64_t now = s.tier[0].budget.high < s.tier[0].budget.max ? s.tier[0].budget.high
                                                                       : s.tier[0].budget.max;
          if (s.tier[0].used > used0 && now > used0) { got = t; break; }
          holes++;
        }
        kept[nkept] = p;
        kept_tier[nkept++] = t;
        probes++;
        p = NULL;
        struct timespec ts = { 0, pace * 1000000 };
        nanosleep(&ts, NULL);
      }
      long long ms = child_ms() - t0;
      on = off = 0;
      if (tier_stats_get(&s, sizeof s) != 0) { printf("error=stats\n"); return; }
      if (p) child_where(p, probe, &s, got, &on, &off);
      printf("move %d ms=%lld probes=%zu holes=%zu pace=%lld tier=%d on=%zu off=%zu max0=%llu "
             "high0=%llu used0=%llu room0=%llu\n", want, ms, probes, holes, pace, got, on, off,
             (unsigned long long)s.tier[0].budget.max, (unsigned long long)s.tier[0].budget.high,
             (unsigned long long)s.tier[0].used, (unsigned long long)room);
      if (p) {
        kept[nkept] = p;
        kept_tier[nkept++] = got;
      }
    } else if (strncmp(cmd, "free", 4) == 0) {
      size_t freed = 0;
      for (size_t i = 0; i < nkept; i++) {
        if (kept[i] && kept_tier[i] <= 0) {   /* -1: parts on two tiers */
          free(kept[i]);
          kept[i] = NULL;
          freed++;
        }
      }
      if (tier_stats_get(&s, sizeof s) != 0) { printf("error=stats\n"); return; }
      printf("free blocks=%zu used0=%llu max0=%llu\n", freed, (unsigned long long)s.tier[0].used,
             (unsigned long long)s.tier[0].budget.max);
    } else {
      printf("error=unknown command %s", cmd);
    }
    fflush(stdout);
  }
}

__attribute__((constructor)) static void vm_child_main(void)
{
  const char *mode = getenv("VMTEST_CHILD");
  if (!mode) return;
  if (strcmp(mode, "tiers") == 0) child_tiers();
  else if (strcmp(mode, "budget") == 0) child_budget();
  else if (strcmp(mode, "thp") == 0) child_thp();
  else if (strcmp(mode, "heap") == 0) child_heap();
  else if (strcmp(mode, "phases") == 0) child_phases();
  else printf("error=unknown mode %s\n", mode);
  fflush(stdout);
  _exit(0);
}
