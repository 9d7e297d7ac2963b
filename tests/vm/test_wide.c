/* The wide guest (tests/vm/run --topology wide): node0 with the CPUs and 65
 * CPU-less nodes in one kernel tier, so tiermalloc's tier 1 is nodes 1-65.
 * A tier-1 block interleaved over all 65 nodes has 65 N<node>= entries on its
 * numa_maps line; tier_stats must count every one of them. make test-vm runs
 * only this suite there (the others expect at most three nodes) and this
 * suite skips itself in the other guests. */
#include <criterion/criterion.h>
#include <numaif.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "vmtest.h"

#define WIDE_NODES 66
#define WIDE_BLOCK (2 * VM_MIB)   /* below the 4 MiB huge-page threshold: 4 KiB pages */

static void wide_require(void)
{
  const char *name = getenv("VMTEST_TOPOLOGY");
  if (name == NULL || strcmp(name, "wide") != 0)
    cr_skip_test("needs the 66-node guest (make test-vm runs it with --topology wide); this is %s",
                 name ? name : "not a guest");
  char online[64];
  cr_assert_eq(vm_read_file("/sys/devices/system/node/online", online, sizeof online), 0);
  cr_assert_str_eq(online, "0-65", "the wide guest has nodes 0-65");
}

Test(wide, tier_1_is_the_65_cpu_less_nodes)
{
  wide_require();
  cr_assert_eq(tier_count(), 2);
  tier_stats_t s;
  cr_assert_eq(tier_stats_get(&s, sizeof s), 0);
  cr_expect_eq(s.tier[0].nodes[0], 1ull, "tier 0 is node 0");
  cr_expect_eq(s.tier[1].nodes[0], ~1ull, "tier 1 has nodes 1-63");
  cr_expect_eq(s.tier[1].nodes[1], 3ull, "and nodes 64-65");
}

Test(wide, a_tier_1_block_is_on_the_cpu_less_nodes)
{
  /* The tier's node mask spans two words of the mbind mask. */
  wide_require();
  char *p = tier_malloc(WIDE_BLOCK, 1);
  cr_assert_not_null(p);
  vm_touch(p, WIDE_BLOCK);
  size_t pages[VM_MAX_NODES] = { 0 };
  cr_assert_eq(vm_pages_by_node(p, WIDE_BLOCK, pages), 0, "pages not present");
  size_t on_tier = 0;
  for (int n = 1; n < WIDE_NODES; n++) on_tier += pages[n];
  cr_expect_eq(pages[0], 0, "%zu pages of the tier-1 block on node 0", pages[0]);
  cr_expect_eq(on_tier, vm_span_pages(p, WIDE_BLOCK));
  tier_free(p);
}

Test(wide, resident_counts_a_block_spread_over_65_nodes)
{
  wide_require();
  char *p = tier_malloc(WIDE_BLOCK, 1);
  cr_assert_not_null(p);
  cr_assert_eq(tier_of(p), 1);
  /* Interleave the block's pages over nodes 1-65 before they exist; the
   * kernel gives the range its own mapping, inside tier 1's range. */
  uintptr_t a = ((uintptr_t)p + 4095) & ~(uintptr_t)4095;
  size_t len = ((uintptr_t)p + WIDE_BLOCK - a) & ~(size_t)4095;
  unsigned long mask[2] = { ~1ul, 3ul };
  cr_assert_eq(madvise((void *)a, len, MADV_NOHUGEPAGE), 0);
  cr_assert_eq(syscall(SYS_mbind, a, len, MPOL_INTERLEAVE, mask, 2 * 64 + 1, 0ul), 0, "mbind: %m");
  vm_touch((void *)a, len);

  size_t pages[VM_MAX_NODES] = { 0 };
  cr_assert_eq(vm_pages_by_node((void *)a, len, pages), 0, "pages not present");
  int spread = 0;
  for (int n = 1; n < WIDE_NODES; n++) spread += pages[n] > 0;
  cr_assert_eq(spread, WIDE_NODES - 1, "the block is on %d of the 65 CPU-less nodes", spread);

  /* tier_stats against the kernel. Only this test allocates in tier 1, so
   * its pages do not change between the two reads (tier 0's may: reading
   * numa_maps allocates), and the two must agree exactly. */
  tier_stats_t s;
  cr_assert_eq(tier_stats_get(&s, sizeof s), 0);
  uint64_t maps[VM_MAX_NODES] = { 0 };
  cr_assert_eq(vm_numa_maps_bytes(0, 1, maps), 0);
  uint64_t kernel = 0;
  for (int n = 1; n < WIDE_NODES; n++) kernel += maps[n];
  cr_expect_eq(s.resident_other, 0, "resident_other %llu", (unsigned long long)s.resident_other);
  cr_expect_eq(s.tier[1].resident, kernel, "tier 1 resident %llu, numa_maps on nodes 1-65 %llu",
               (unsigned long long)s.tier[1].resident, (unsigned long long)kernel);
  cr_expect_geq(s.tier[1].resident, len, "tier 1 resident %llu < the block's %zu bytes",
                (unsigned long long)s.tier[1].resident, len);
  tier_free(p);
}
