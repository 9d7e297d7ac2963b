/* Resident bytes per tier from tier_stats_get against the kernel, for a
 * 256 MiB heap spread over the tiers: within 2% of /proc/self/numa_maps
 * (the tiered ranges, per node, summed per tier), and at least the bytes the
 * test touched there (move_pages), more only by 2% and by the huge pages
 * (TIERMALLOC_THP=auto gives the 4 MiB chunks huge pages, and a huge page at
 * a chunk's end also covers free bytes after it). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmtest.h"

#define HEAP (256 * VM_MIB)
#define CHUNK (4 * VM_MIB)

static int within(uint64_t a, uint64_t b, double frac)
{
  uint64_t d = a > b ? a - b : b - a;
  uint64_t ref = a > b ? a : b;
  return (double)d <= frac * (double)ref;
}

/* Heavy programs: not beside the burst tests. */
TestSuite(resident, .init = vm_quiet_shared);

Test(resident, stats_match_numa_maps_for_256MiB)
{
  const vm_topology_t *topo = vm_topology();
  int ntiers = topo->ntiers;
  enum { NCHUNKS = HEAP / CHUNK };
  static char *chunk[NCHUNKS];
  uint64_t touched[TIER_MAX_TIERS] = { 0 };
  for (int i = 0; i < NCHUNKS; i++) {
    int t = i % ntiers;
    chunk[i] = tier_malloc(CHUNK, t);
    cr_assert_not_null(chunk[i], "tier_malloc(4 MiB, %d) #%d", t, i);
    vm_touch(chunk[i], CHUNK);
    touched[t] += vm_span_pages(chunk[i], CHUNK) * 4096;
  }
  /* Where the kernel says the chunks are. */
  size_t pages[VM_MAX_NODES] = { 0 };
  for (int i = 0; i < NCHUNKS; i++)
    cr_assert_eq(vm_pages_by_node(chunk[i], CHUNK, pages), 0, "chunk %d has pages not present", i);

  tier_stats_t s;
  cr_assert_eq(tier_stats_get(&s, sizeof s), 0);
  uint64_t maps[VM_MAX_NODES] = { 0 };
  cr_assert_eq(vm_numa_maps_bytes(0, 1, maps), 0);

  uint64_t huge = 0;
  cr_assert_eq(vm_tiered_anon_huge_bytes(&huge), 0);

  uint64_t sum_resident = 0, sum_committed = 0;
  for (int t = 0; t < ntiers; t++) {
    int node = vm_tier_node(topo, t);
    uint64_t res = s.tier[t].resident;
    uint64_t kernel = maps[node];
    uint64_t mine = (uint64_t)pages[node] * 4096;
    cr_expect_eq(mine, touched[t], "%s tier %d: %llu bytes of its chunks on node %d, touched %llu", topo->name,
                 t, (unsigned long long)mine, node, (unsigned long long)touched[t]);
    cr_expect(within(res, kernel, 0.02),
              "%s tier %d: tier_stats resident %llu vs numa_maps %llu on node %d (more than 2%% apart)",
              topo->name, t, (unsigned long long)res, (unsigned long long)kernel, node);
    cr_expect(res >= touched[t] && (within(res, touched[t], 0.02) || res - touched[t] <= huge),
              "%s tier %d: resident %llu, touched %llu, huge pages %llu (must be >= touched, and "
              "within 2%% or the huge pages of it)", topo->name, t, (unsigned long long)res,
              (unsigned long long)touched[t], (unsigned long long)huge);
    cr_expect_leq(s.tier[t].allocated, s.tier[t].committed);
    cr_expect_leq(s.tier[t].committed, s.tier[t].mapped);
    sum_resident += res;
    sum_committed += s.tier[t].committed;
  }
  /* A huge page backs a whole 2 MiB even where jemalloc committed less. */
  cr_expect_leq(sum_resident, sum_committed + huge, "%s: resident %llu, committed %llu, huge %llu",
                topo->name, (unsigned long long)sum_resident, (unsigned long long)sum_committed,
                (unsigned long long)huge);
  cr_expect_eq(s.resident_other, 0, "resident_other %llu", (unsigned long long)s.resident_other);
  for (int i = 0; i < NCHUNKS; i++) tier_free(chunk[i]);
}
