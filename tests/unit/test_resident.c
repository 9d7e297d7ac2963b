/* resident: per-tier bytes from numa_maps, checked against the captured
 * numa_maps of a real 6.12 guest (DRAM node0 + CXL node1). The expected
 * numbers are that file's N<node>= counts x 4 KiB, summed by hand. */
#include <criterion/criterion.h>
#include <errno.h>

#include "resident.h"
#include "topology.h"

#define RES_TREE "tests/fixtures/dram-cxl-6.12"

static tm_topology_t res_topo(void)
{
  tm_topology_t t;
  cr_assert_eq(tm_topology_discover(&t, RES_TREE, NULL), 0);
  cr_assert_eq(t.ntiers, 2);
  return t;
}

Test(resident, whole_file_counts_every_node_on_its_tier)
{
  tm_topology_t t = res_topo();
  tm_resident_t r;
  cr_assert_eq(tm_resident_measure(RES_TREE "/proc/numa_maps-example", &t, 0, UINTPTR_MAX, &r), 0);
  cr_expect_eq(r.tier[0], 24883200ull);   /* node0: 6075 pages */
  cr_expect_eq(r.tier[1], 13631488ull);   /* node1: 3328 pages */
  cr_expect_eq(r.other, 0);
}

Test(resident, only_mappings_starting_in_the_range)
{
  tm_topology_t t = res_topo();
  tm_resident_t r;
  /* The 8 MiB region bound to node1 starts at 7f0ce1a00000. */
  cr_assert_eq(tm_resident_measure(RES_TREE "/proc/numa_maps-example", &t, 0x7f0ce1a00000, 0x7f0ce1a00001, &r), 0);
  cr_expect_eq(r.tier[0], 0);
  cr_expect_eq(r.tier[1], 8ull << 20);
}

Test(resident, nodes_outside_every_tier_are_other)
{
  tm_topology_t t = res_topo();
  t.node_tier[1] = -1;
  tm_resident_t r;
  cr_assert_eq(tm_resident_measure(RES_TREE "/proc/numa_maps-example", &t, 0, UINTPTR_MAX, &r), 0);
  cr_expect_eq(r.tier[1], 0);
  cr_expect_eq(r.other, 13631488ull);
}

Test(resident, missing_file_is_an_error_and_zero)
{
  tm_topology_t t = res_topo();
  tm_resident_t r;
  cr_expect_eq(tm_resident_measure("tests/fixtures/no-such-file", &t, 0, UINTPTR_MAX, &r), ENOENT);
  cr_expect_eq(r.tier[0] + r.tier[1] + r.other, 0);
}

Test(resident, own_process_is_measured)
{
  tm_topology_t t = res_topo();   /* node0 is tier 0 there and here */
  static char block[4 << 20];
  for (size_t i = 0; i < sizeof block; i += 4096) block[i] = (char)i;
  tm_resident_t r;
  cr_assert_eq(tm_resident_measure("/proc/self/numa_maps", &t, 0, UINTPTR_MAX, &r), 0);
  cr_expect_geq(r.tier[0], sizeof block, "the touched 4 MiB are resident on node0");
}
