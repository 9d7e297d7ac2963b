/* resident: per-tier bytes from numa_maps, checked against the captured
 * numa_maps of a real 6.12 guest (DRAM node0 + CXL node1). The expected
 * numbers are that file's N<node>= counts x 4 KiB, summed by hand. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* Measures numa_maps text `text` (written to a temporary file) over the
 * whole address space. */
static tm_resident_t res_measure_text(const tm_topology_t *t, const char *text)
{
  char path[] = "/tmp/tiermalloc-numa_maps-XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0, "mkstemp failed");
  size_t len = strlen(text);
  cr_assert_eq(write(fd, text, len), (ssize_t)len);
  close(fd);
  tm_resident_t r;
  int err = tm_resident_measure(path, t, 0, UINTPTR_MAX, &r);
  unlink(path);
  cr_assert_eq(err, 0);
  return r;
}

Test(resident, a_mapping_on_more_than_64_nodes_counts_every_node)
{
  /* An interleaved mapping on a large machine lists one N<node>= entry per
   * node, up to 1024; the page size comes after them all. */
  tm_topology_t t = res_topo();
  for (int n = 0; n < 100; n++) t.node_tier[n] = (int8_t)(n % 2);
  char line[2048];
  int len = snprintf(line, sizeof line, "7f0000000000 interleave:0-99 anon=300");
  for (int n = 0; n < 100; n++) len += snprintf(line + len, sizeof line - (size_t)len, " N%d=%d", n, 1 + n % 5);
  snprintf(line + len, sizeof line - (size_t)len, " kernelpagesize_kB=2048\n");
  tm_resident_t r = res_measure_text(&t, line);
  /* Even nodes (tier 0) hold 1,3,5,2,4 pages in turn: 150 pages; odd: 150. */
  cr_expect_eq(r.tier[0], 150ull << 21);
  cr_expect_eq(r.tier[1], 150ull << 21);
  cr_expect_eq(r.other, 0);
}

Test(resident, node_ids_past_the_largest_are_on_no_tier)
{
  /* Not one the kernel prints; it must not wrap onto node 0. */
  tm_topology_t t = res_topo();
  tm_resident_t r = res_measure_text(&t, "1000 default N4294967296=1 N1024=1 N18446744073709551616=1 N1=2 "
                                          "kernelpagesize_kB=4\n");
  cr_expect_eq(r.tier[0], 0);
  cr_expect_eq(r.tier[1], 2 * 4096);
  cr_expect_eq(r.other, 3 * 4096);
}

Test(resident, a_last_line_without_a_newline_counts)
{
  tm_topology_t t = res_topo();
  tm_resident_t r = res_measure_text(&t, "1000 default N0=1 kernelpagesize_kB=4\n2000 default N0=3 N1=1 kernelpagesize_kB=4");
  cr_expect_eq(r.tier[0], 4 * 4096);
  cr_expect_eq(r.tier[1], 4096);
}
