/*
 * Child modes of build/tests/vmtest. Some claims need a fresh process whose
 * environment tiermalloc reads at start-up (TIERMALLOC_TIERS,
 * TIERMALLOC_TOPTIER_MAX). The tests run this same binary with
 * VMTEST_CHILD=<mode>; a constructor runs the mode, prints key=value lines
 * on stdout and exits before Criterion starts. No Criterion calls here.
 *
 *   tiers:  tier_count(), and for each tier its nodes (tier_stats_get) and
 *           the node that move_pages reports for 4 MiB from tier_malloc.
 *   budget: 64 x 1 MiB malloc'd and touched; for each tier, how many blocks
 *           tier_of() puts there, and on which nodes the pages are of every
 *           part of a block that tier_of() puts there (a block can straddle
 *           two 2 MiB chunks of different tiers); the stats' mapped, used
 *           and resident bytes per tier.
 *   thp:    a heap of VMTEST_THP_MIB MiB of 1 KiB mallocs, touched; the
 *           bytes of huge pages in tiermalloc's mappings (smaps).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

__attribute__((constructor)) static void vm_child_main(void)
{
  const char *mode = getenv("VMTEST_CHILD");
  if (!mode) return;
  if (strcmp(mode, "tiers") == 0) child_tiers();
  else if (strcmp(mode, "budget") == 0) child_budget();
  else if (strcmp(mode, "thp") == 0) child_thp();
  else printf("error=unknown mode %s\n", mode);
  fflush(stdout);
  _exit(0);
}
