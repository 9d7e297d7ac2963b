/*
 * topology: fixture trees captured from real kernels (tests/fixtures/README.md),
 * small synthetic trees written under a temporary directory for the cases no
 * real capture shows, and one check against the machine the tests run on.
 *
 * Capacities are the MemTotal lines of each tree's nodeN/meminfo, in kB.
 * Run from the repository root: fixture paths are relative to it.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "topology.h"
#include "capture.h"
#include "tmptree.h"

#define FIXTURES "tests/fixtures"
#define KB 1024ULL

/* ---- helpers ---------------------------------------------------------------- */

/* Checks tier i: its nodes as a nodelist, capacity in kB, kernel tier id, and
 * that nnodes, first_node and node_tier agree with the node set. */
static void topo_check_tier(const tm_topology_t *t, int i, const char *nodes, uint64_t kb,
                            int kernel_tier)
{
  char buf[256];
  cr_assert_lt(i, t->ntiers, "tier %d missing (ntiers %d)", i, t->ntiers);
  const tm_tier_t *tier = &t->tier[i];
  tm_nodelist_format(&tier->nodes, buf, sizeof buf);
  cr_assert_str_eq(buf, nodes, "tier %d nodes", i);
  cr_assert_eq(tier->capacity, kb * KB, "tier %d capacity %llu, want %llu kB", i,
               (unsigned long long)tier->capacity, (unsigned long long)kb);
  cr_assert_eq(tier->kernel_tier, kernel_tier, "tier %d kernel_tier %d, want %d", i,
               tier->kernel_tier, kernel_tier);
  int count = 0, first = -1;
  for (int n = 0; n < TIER_MAX_NODES; n++) {
    if (!tm_nodemask_test(&tier->nodes, n)) continue;
    if (first < 0) first = n;
    count++;
    cr_assert_eq(t->node_tier[n], i, "node %d: node_tier %d, want %d", n, t->node_tier[n], i);
  }
  cr_assert_eq(tier->nnodes, count, "tier %d nnodes", i);
  cr_assert_eq(tier->first_node, first, "tier %d first_node", i);
}

/* node_tier is -1 exactly for the nodes in no tier. */
static void topo_check_unplaced(const tm_topology_t *t)
{
  for (int n = 0; n < TIER_MAX_NODES; n++) {
    int in = -1;
    for (int i = 0; i < t->ntiers; i++)
      if (tm_nodemask_test(&t->tier[i].nodes, n)) in = i;
    cr_assert_eq(t->node_tier[n], in, "node %d: node_tier %d but in tier %d", n, t->node_tier[n],
                 in);
  }
}

#define NODE_DIR "sys/devices/system/node/"
#define TIER_DIR "sys/devices/virtual/memory_tiering/"

/* A Mems_allowed line as Debian prints it: 32 words, most significant first;
 * low holds nodes 0-31 and high nodes 32-63. */
static void topo_put_mems_allowed(uint32_t high, uint32_t low)
{
  char status[1024];
  int n = snprintf(status, sizeof status, "Name:\tcat\nCpus_allowed:\t3\nMems_allowed:\t");
  for (int w = 31; w >= 0; w--)
    n += snprintf(status + n, sizeof status - (size_t)n, "%08x%s",
                  w == 1 ? high : w == 0 ? low : 0, w ? "," : "\n");
  snprintf(status + n, sizeof status - (size_t)n, "Mems_allowed_list:\t(unused)\n");
  tmptree_put("proc/self/status", status);
}

/* A synthetic node n with (n + 1) * 1000 kB and the given cpulist. */
static void topo_put_node(int n, const char *cpulist)
{
  char rel[128], meminfo[128];
  snprintf(rel, sizeof rel, NODE_DIR "node%d/meminfo", n);
  snprintf(meminfo, sizeof meminfo, "Node %d MemTotal:  %8d kB\nNode %d MemFree:   %8d kB\n", n,
           (n + 1) * 1000, n, 1000);
  tmptree_put(rel, meminfo);
  snprintf(rel, sizeof rel, NODE_DIR "node%d/cpulist", n);
  tmptree_put(rel, cpulist);
}

static void topo_put_ktier(int id, const char *nodelist)
{
  char rel[128];
  snprintf(rel, sizeof rel, TIER_DIR "memory_tier%d/nodelist", id);
  tmptree_put(rel, nodelist);
}

/* ---- the captured trees ------------------------------------------------------ */

Test(topology, dram_cxl_6_12_two_kernel_tiers)
{
  tm_topology_t t;
  cr_assert_eq(tm_topology_discover(&t, FIXTURES "/dram-cxl-6.12", NULL), 0);
  cr_assert_eq(t.source, TM_TOPO_KERNEL_TIERS);
  cr_assert_eq(t.ntiers, 2);
  topo_check_tier(&t, 0, "0", 514356, 4);
  topo_check_tier(&t, 1, "1", 991592, 54);
  topo_check_unplaced(&t);
}

Test(topology, dram_cxl_flat_6_1_falls_back_to_cpu_nodes)
{
  tm_topology_t t;
  cr_assert_eq(tm_topology_discover(&t, FIXTURES "/dram-cxl-flat-6.1", NULL), 0);
  cr_assert_eq(t.source, TM_TOPO_CPU_FALLBACK);
  cr_assert_eq(t.ntiers, 2);
  topo_check_tier(&t, 0, "0", 514384, -1);
  topo_check_tier(&t, 1, "1", 984544, -1);
  topo_check_unplaced(&t);
}

Test(topology, two_socket_two_cxl_6_12)
{
  tm_topology_t t;
  cr_assert_eq(tm_topology_discover(&t, FIXTURES "/two-socket-two-cxl-6.12", NULL), 0);
  cr_assert_eq(t.source, TM_TOPO_KERNEL_TIERS);
  cr_assert_eq(t.ntiers, 2);
  topo_check_tier(&t, 0, "0-1", 514620 + 477444, 4);
  topo_check_tier(&t, 1, "2-3", 515924 + 513712, 54);
  topo_check_unplaced(&t);
}

Test(topology, hbm_dram_cxl_6_12_hbm_on_top)
{
  tm_topology_t t;
  cr_assert_eq(tm_topology_discover(&t, FIXTURES "/hbm-dram-cxl-6.12", NULL), 0);
  cr_assert_eq(t.source, TM_TOPO_KERNEL_TIERS);
  cr_assert_eq(t.ntiers, 3);
  topo_check_tier(&t, 0, "1", 257876, 0);   /* HBM, CPU-less, above the CPU node */
  topo_check_tier(&t, 1, "0", 514356, 4);
  topo_check_tier(&t, 2, "2", 475492, 54);
  topo_check_unplaced(&t);
}

Test(topology, host_single_node)
{
  tm_topology_t t;
  cr_assert_eq(tm_topology_discover(&t, FIXTURES "/host-single-node", NULL), 0);
  /* One kernel tier (memory_tier4) is not "more than one": the fallback. */
  cr_assert_eq(t.source, TM_TOPO_CPU_FALLBACK);
  cr_assert_eq(t.ntiers, 1);
  /* The node's MemTotal, not /proc/meminfo's (24683628 kB on this capture). */
  topo_check_tier(&t, 0, "0", 7300936, -1);
  topo_check_unplaced(&t);
}

/* Discovery runs at malloc init: a second run must give the same bytes, with
 * nothing left over from the first (no hidden state). */
Test(topology, discover_is_repeatable)
{
  tm_topology_t a, b;
  memset(&a, 0xa5, sizeof a);
  memset(&b, 0x5a, sizeof b);
  tm_topology_discover(&a, FIXTURES "/hbm-dram-cxl-6.12", NULL);
  tm_topology_discover(&b, FIXTURES "/hbm-dram-cxl-6.12", NULL);
  cr_assert_eq(memcmp(&a, &b, sizeof a), 0);
}

/* ---- TIERMALLOC_TIERS ----------------------------------------------------------- */

Test(topology, override_three_tiers)
{
  tm_topology_t t;
  cr_assert_eq(tm_topology_discover(&t, FIXTURES "/two-socket-two-cxl-6.12", "0,1;2;3"), 0);
  cr_assert_eq(t.source, TM_TOPO_OVERRIDE);
  cr_assert_eq(t.ntiers, 3);
  topo_check_tier(&t, 0, "0-1", 514620 + 477444, -1);
  topo_check_tier(&t, 1, "2", 515924, -1);
  topo_check_tier(&t, 2, "3", 513712, -1);
  topo_check_unplaced(&t);
}

Test(topology, override_range_leaves_unnamed_nodes_unplaced)
{
  tm_topology_t t;
  cr_assert_eq(tm_topology_discover(&t, FIXTURES "/two-socket-two-cxl-6.12", "0-1;2"), 0);
  cr_assert_eq(t.source, TM_TOPO_OVERRIDE);
  cr_assert_eq(t.ntiers, 2);
  topo_check_tier(&t, 0, "0-1", 514620 + 477444, -1);
  topo_check_tier(&t, 1, "2", 515924, -1);
  cr_assert_eq(t.node_tier[3], -1);
  topo_check_unplaced(&t);
}

/* The override may reorder what the kernel says: CXL on top is the user's call. */
Test(topology, override_beats_kernel_order)
{
  tm_topology_t t;
  cr_assert_eq(tm_topology_discover(&t, FIXTURES "/hbm-dram-cxl-6.12", "2;0,1"), 0);
  cr_assert_eq(t.source, TM_TOPO_OVERRIDE);
  cr_assert_eq(t.ntiers, 2);
  topo_check_tier(&t, 0, "2", 475492, -1);
  topo_check_tier(&t, 1, "0-1", 514356 + 257876, -1);
}

Test(topology, override_empty_string_is_unset)
{
  tm_topology_t t;
  capture_begin();
  cr_assert_eq(tm_topology_discover(&t, FIXTURES "/dram-cxl-6.12", ""), 0);
  cr_assert_str_eq(capture_end(), "");
  cr_assert_eq(t.source, TM_TOPO_KERNEL_TIERS);
}

Test(topology, override_junk_is_ignored_with_one_warning)
{
  static const char *const bad[] = {
    "0;;x", "0;;1", "x", ";", "0;", ";0", "0,;1", "0-;1", "1-0", "0 ;1", " 0", "0;1\n;2",
    "0;0", "0-1;1", "1024", "0;99999999999999999999",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    tm_topology_t t;
    capture_begin();
    int rc = tm_topology_discover(&t, FIXTURES "/dram-cxl-6.12", bad[i]);
    const char *err = capture_end();
    cr_assert_eq(rc, 0);
    cr_assert_eq(t.source, TM_TOPO_KERNEL_TIERS, "'%s' was accepted", bad[i]);
    cr_assert_eq(t.ntiers, 2);
    cr_assert_eq(capture_count_lines(err), 1, "'%s': stderr was '%s'", bad[i], err);
    cr_assert_not_null(strstr(err, "tiermalloc: TIERMALLOC_TIERS"), "'%s': '%s'", bad[i], err);
  }
}

Test(topology, override_unknown_node_is_dropped)
{
  tm_topology_t t;
  capture_begin();
  cr_assert_eq(tm_topology_discover(&t, FIXTURES "/dram-cxl-6.12", "0;1,5;7"), 0);
  const char *err = capture_end();
  cr_assert_eq(t.source, TM_TOPO_OVERRIDE);
  cr_assert_eq(t.ntiers, 2);            /* "7" is left empty and dropped */
  topo_check_tier(&t, 0, "0", 514356, -1);
  topo_check_tier(&t, 1, "1", 991592, -1);
  topo_check_unplaced(&t);
  cr_assert_eq(capture_count_lines(err), 1, "stderr: '%s'", err);
  cr_assert_not_null(strstr(err, "5,7"), "stderr: '%s'", err);
}

Test(topology, override_with_no_usable_node_is_ignored)
{
  tm_topology_t t;
  capture_begin();
  cr_assert_eq(tm_topology_discover(&t, FIXTURES "/dram-cxl-6.12", "5;7-9"), 0);
  const char *err = capture_end();
  cr_assert_eq(t.source, TM_TOPO_KERNEL_TIERS);
  cr_assert_eq(t.ntiers, 2);
  cr_assert_eq(capture_count_lines(err), 2, "stderr: '%s'", err);  /* dropped, then ignored */
}

/* A long spec is cut in the warning, which stays one line. */
Test(topology, override_long_junk_warning_is_one_line)
{
  char spec[600];
  memset(spec, '\n', sizeof spec - 1);
  spec[sizeof spec - 1] = '\0';
  memcpy(spec, "0;x", 3);
  tm_topology_t t;
  capture_begin();
  tm_topology_discover(&t, FIXTURES "/dram-cxl-6.12", spec);
  const char *err = capture_end();
  cr_assert_eq(t.source, TM_TOPO_KERNEL_TIERS);
  cr_assert_eq(capture_count_lines(err), 1, "stderr was '%s'", err);
  cr_assert_not_null(strstr(err, "0;x???"), "stderr was '%s'", err);
  cr_assert_not_null(strstr(err, "...'"), "stderr was '%s'", err);
}

/* Ten one-node tiers: the first seven stay, the rest share the last. */
Test(topology, override_too_many_tiers_are_folded, .fini = tmptree_cleanup)
{
  tmptree_make(NULL);
  tmptree_put(NODE_DIR "has_memory", "0-9\n");
  tmptree_put(NODE_DIR "has_cpu", "0\n");
  for (int n = 0; n < 10; n++) topo_put_node(n, n ? "\n" : "0-1\n");
  tm_topology_t t;
  capture_begin();
  cr_assert_eq(tm_topology_discover(&t, tmptree, "9;8;7;6;5;4;3;2;1;0"), 0);
  const char *err = capture_end();
  cr_assert_eq(t.source, TM_TOPO_OVERRIDE);
  cr_assert_eq(t.ntiers, TIER_MAX_TIERS);
  for (int i = 0; i < 7; i++) {
    char nodes[8];
    snprintf(nodes, sizeof nodes, "%d", 9 - i);
    topo_check_tier(&t, i, nodes, (uint64_t)(10 - i) * 1000, -1);
  }
  topo_check_tier(&t, 7, "0-2", 1000 + 2000 + 3000, -1);
  topo_check_unplaced(&t);
  cr_assert_eq(capture_count_lines(err), 1, "stderr: '%s'", err);
}

/* ---- Mems_allowed and missing files ------------------------------------------- */

/* Only node0 allowed: one kernel tier left among the allowed nodes, so the
 * fallback applies and node1 is in no tier. */
Test(topology, mems_allowed_excludes_cxl, .fini = tmptree_cleanup)
{
  tmptree_make("dram-cxl-6.12");
  topo_put_mems_allowed(0, 0x1);
  tm_topology_t t;
  cr_assert_eq(tm_topology_discover(&t, tmptree, NULL), 0);
  cr_assert_eq(t.source, TM_TOPO_CPU_FALLBACK);
  cr_assert_eq(t.ntiers, 1);
  topo_check_tier(&t, 0, "0", 514356, -1);
  cr_assert_eq(t.node_tier[1], -1);
  topo_check_unplaced(&t);
}

/* HBM not allowed: the two remaining kernel tiers keep their ids. */
Test(topology, mems_allowed_excludes_hbm, .fini = tmptree_cleanup)
{
  tmptree_make("hbm-dram-cxl-6.12");
  topo_put_mems_allowed(0, 0x5);
  tm_topology_t t;
  cr_assert_eq(tm_topology_discover(&t, tmptree, NULL), 0);
  cr_assert_eq(t.source, TM_TOPO_KERNEL_TIERS);
  cr_assert_eq(t.ntiers, 2);
  topo_check_tier(&t, 0, "0", 514356, 4);
  topo_check_tier(&t, 1, "2", 475492, 54);
  cr_assert_eq(t.node_tier[1], -1);
}

Test(topology, mems_allowed_drops_override_node, .fini = tmptree_cleanup)
{
  tmptree_make("two-socket-two-cxl-6.12");
  topo_put_mems_allowed(0, 0xb);  /* 0,1,3 */
  tm_topology_t t;
  capture_begin();
  cr_assert_eq(tm_topology_discover(&t, tmptree, "0-1;2;3"), 0);
  const char *err = capture_end();
  cr_assert_eq(t.source, TM_TOPO_OVERRIDE);
  cr_assert_eq(t.ntiers, 2);
  topo_check_tier(&t, 0, "0-1", 514620 + 477444, -1);
  topo_check_tier(&t, 1, "3", 513712, -1);
  cr_assert_eq(capture_count_lines(err), 1, "stderr: '%s'", err);
}

/* The second word from the right holds nodes 32-63. */
Test(topology, mems_allowed_word_order, .fini = tmptree_cleanup)
{
  tmptree_make(NULL);
  tmptree_put(NODE_DIR "has_memory", "0,33,40\n");
  tmptree_put(NODE_DIR "has_cpu", "0\n");
  topo_put_node(0, "0-1\n");
  topo_put_node(33, "\n");
  topo_put_node(40, "\n");
  topo_put_mems_allowed(0x2, 0x1);  /* nodes 0 and 33 */
  tm_topology_t t;
  cr_assert_eq(tm_topology_discover(&t, tmptree, NULL), 0);
  cr_assert_eq(t.source, TM_TOPO_CPU_FALLBACK);
  cr_assert_eq(t.ntiers, 2);
  topo_check_tier(&t, 0, "0", 1000, -1);
  topo_check_tier(&t, 1, "33", 34000, -1);
  cr_assert_eq(t.node_tier[40], -1);
}

Test(topology, mems_allowed_short_and_malformed, .fini = tmptree_cleanup)
{
  tmptree_make("dram-cxl-6.12");
  tm_topology_t t;

  /* A kernel with few possible nodes prints one word. */
  tmptree_put("proc/self/status", "Name:\tx\nMems_allowed:\t00000002\n");
  cr_assert_eq(tm_topology_discover(&t, tmptree, NULL), 0);
  cr_assert_eq(t.ntiers, 1);
  topo_check_tier(&t, 0, "1", 991592, -1);  /* CPU-less, but the only one allowed */

  static const char *const bad[] = {
    "Mems_allowed:\t\n", "Mems_allowed:\t3,\n", "Mems_allowed:\t,3\n",
    "Mems_allowed:\t00000000,0000000g\n", "Mems_allowed:\t000000003\n",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    tmptree_put("proc/self/status", bad[i]);
    capture_begin();
    cr_assert_eq(tm_topology_discover(&t, tmptree, NULL), 0);
    const char *err = capture_end();
    cr_assert_eq(t.ntiers, 2, "'%s' restricted the nodes", bad[i]);
    cr_assert_eq(capture_count_lines(err), 1, "'%s': stderr '%s'", bad[i], err);
    cr_assert_not_null(strstr(err, "Mems_allowed"));
  }
}

Test(topology, missing_status_means_no_restriction, .fini = tmptree_cleanup)
{
  tmptree_make("hbm-dram-cxl-6.12");
  tmptree_rm("proc/self/status");
  tm_topology_t t;
  capture_begin();
  cr_assert_eq(tm_topology_discover(&t, tmptree, NULL), 0);
  cr_assert_str_eq(capture_end(), "");
  cr_assert_eq(t.ntiers, 3);
  topo_check_tier(&t, 0, "1", 257876, 0);
}

/* has_memory missing: every online node; has_cpu missing: each cpulist. */
Test(topology, missing_has_memory_and_has_cpu, .fini = tmptree_cleanup)
{
  tmptree_make("dram-cxl-flat-6.1");
  tmptree_rm(NODE_DIR "has_memory");
  tmptree_rm(NODE_DIR "has_cpu");
  tm_topology_t t;
  capture_begin();
  cr_assert_eq(tm_topology_discover(&t, tmptree, NULL), 0);
  cr_assert_str_eq(capture_end(), "");
  cr_assert_eq(t.source, TM_TOPO_CPU_FALLBACK);
  cr_assert_eq(t.ntiers, 2);
  topo_check_tier(&t, 0, "0", 514384, -1);
  topo_check_tier(&t, 1, "1", 984544, -1);
}

/* No has_cpu and no cpulist for a node: it counts as having CPUs, so knowing
 * nothing about CPUs gives one tier rather than a guess. */
Test(topology, missing_cpulist_counts_as_cpu_node, .fini = tmptree_cleanup)
{
  tmptree_make("dram-cxl-flat-6.1");
  tmptree_rm(NODE_DIR "has_cpu");
  tmptree_rm(NODE_DIR "node1/cpulist");
  tm_topology_t t;
  cr_assert_eq(tm_topology_discover(&t, tmptree, NULL), 0);
  cr_assert_eq(t.source, TM_TOPO_CPU_FALLBACK);
  cr_assert_eq(t.ntiers, 1);
  topo_check_tier(&t, 0, "0-1", 514384 + 984544, -1);
}

/* Neither has_memory nor online: the nodeN directories. */
Test(topology, missing_online_lists_node_dirs, .fini = tmptree_cleanup)
{
  tmptree_make("two-socket-two-cxl-6.12");
  tmptree_rm(NODE_DIR "has_memory");
  tmptree_rm(NODE_DIR "online");
  tm_topology_t t;
  cr_assert_eq(tm_topology_discover(&t, tmptree, NULL), 0);
  cr_assert_eq(t.source, TM_TOPO_KERNEL_TIERS);
  topo_check_tier(&t, 0, "0-1", 514620 + 477444, 4);
  topo_check_tier(&t, 1, "2-3", 515924 + 513712, 54);
}

/* A memoryless node (online, not in has_memory) is never placed. */
Test(topology, memoryless_node_is_not_placed, .fini = tmptree_cleanup)
{
  tmptree_make("dram-cxl-6.12");
  tmptree_put(NODE_DIR "has_memory", "0\n");
  tm_topology_t t;
  cr_assert_eq(tm_topology_discover(&t, tmptree, NULL), 0);
  cr_assert_eq(t.source, TM_TOPO_CPU_FALLBACK);
  cr_assert_eq(t.ntiers, 1);
  topo_check_tier(&t, 0, "0", 514356, -1);
  cr_assert_eq(t.node_tier[1], -1);
}

/* Without memory_tiering (kernels before 6.1): the fallback, silently. */
Test(topology, no_memory_tiering_dir, .fini = tmptree_cleanup)
{
  tmptree_make("dram-cxl-6.12");
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -r %s/sys/devices/virtual", tmptree);
  cr_assert_eq(system(cmd), 0);
  tm_topology_t t;
  capture_begin();
  cr_assert_eq(tm_topology_discover(&t, tmptree, NULL), 0);
  cr_assert_str_eq(capture_end(), "");
  cr_assert_eq(t.source, TM_TOPO_CPU_FALLBACK);
  cr_assert_eq(t.ntiers, 2);
  topo_check_tier(&t, 0, "0", 514356, -1);
  topo_check_tier(&t, 1, "1", 991592, -1);
}

Test(topology, missing_node_meminfo_gives_zero_capacity, .fini = tmptree_cleanup)
{
  tmptree_make("dram-cxl-6.12");
  tmptree_rm(NODE_DIR "node1/meminfo");
  tm_topology_t t;
  capture_begin();
  cr_assert_eq(tm_topology_discover(&t, tmptree, NULL), 0);
  const char *err = capture_end();
  cr_assert_eq(t.ntiers, 2);
  topo_check_tier(&t, 1, "1", 0, 54);
  cr_assert_neq(capture_count_lines(err), 0);
  cr_assert_not_null(strstr(err, "node1/meminfo"), "stderr '%s'", err);
}

Test(topology, bad_kernel_nodelist_warns, .fini = tmptree_cleanup)
{
  tmptree_make("hbm-dram-cxl-6.12");
  topo_put_ktier(0, "1-\n");
  tm_topology_t t;
  capture_begin();
  cr_assert_eq(tm_topology_discover(&t, tmptree, NULL), 0);
  const char *err = capture_end();
  cr_assert_eq(capture_count_lines(err), 1, "stderr '%s'", err);
  /* node1 is in no readable kernel tier: unknown speed goes to the bottom */
  cr_assert_eq(t.source, TM_TOPO_KERNEL_TIERS);
  cr_assert_eq(t.ntiers, 2);
  topo_check_tier(&t, 0, "0", 514356, 4);
  topo_check_tier(&t, 1, "1-2", 257876 + 475492, 54);
}

/* Ten kernel tiers, listed in an order where text order and numeric order
 * differ (memory_tier10 sorts before memory_tier2 as text). */
Test(topology, kernel_tiers_numeric_order_and_folding, .fini = tmptree_cleanup)
{
  tmptree_make(NULL);
  tmptree_put(NODE_DIR "has_memory", "0-9\n");
  tmptree_put(NODE_DIR "has_cpu", "0\n");
  tmptree_put(TIER_DIR "uevent", "");
  for (int n = 0; n < 10; n++) {
    char list[8];
    topo_put_node(n, n ? "\n" : "0-1\n");
    snprintf(list, sizeof list, "%d\n", n);
    topo_put_ktier(2 + 3 * n, list);   /* node n in memory_tier(2+3n) */
  }
  tm_topology_t t;
  capture_begin();
  cr_assert_eq(tm_topology_discover(&t, tmptree, NULL), 0);
  const char *err = capture_end();
  cr_assert_eq(t.source, TM_TOPO_KERNEL_TIERS);
  cr_assert_eq(t.ntiers, TIER_MAX_TIERS);
  for (int i = 0; i < 7; i++) {
    char nodes[8];
    snprintf(nodes, sizeof nodes, "%d", i);
    topo_check_tier(&t, i, nodes, (uint64_t)(i + 1) * 1000, 2 + 3 * i);
  }
  topo_check_tier(&t, 7, "7-9", 8000 + 9000 + 10000, 2 + 3 * 7);
  topo_check_unplaced(&t);
  cr_assert_eq(capture_count_lines(err), 1, "stderr '%s'", err);
}

/* ---- no sysfs ------------------------------------------------------------------ */

Test(topology, missing_root_is_single_enoent)
{
  tm_topology_t t;
  memset(&t, 0x77, sizeof t);
  cr_assert_eq(tm_topology_discover(&t, FIXTURES "/no-such-tree", NULL), ENOENT);
  cr_assert_eq(t.source, TM_TOPO_SINGLE);
  cr_assert_eq(t.ntiers, 1);
  topo_check_tier(&t, 0, "0", 0, -1);
  topo_check_unplaced(&t);
}

/* No node directory, but /proc/meminfo: capacity from MemTotal there; an
 * override cannot be checked against anything and is not used. */
Test(topology, no_node_dir_uses_proc_meminfo, .fini = tmptree_cleanup)
{
  tmptree_make(NULL);
  tmptree_put("proc/meminfo", "MemTotal:       24683628 kB\nMemFree:        24292772 kB\n");
  tm_topology_t t;
  capture_begin();
  cr_assert_eq(tm_topology_discover(&t, tmptree, "0;1"), ENOENT);
  const char *err = capture_end();
  cr_assert_eq(t.source, TM_TOPO_SINGLE);
  topo_check_tier(&t, 0, "0", 24683628, -1);
  cr_assert_eq(capture_count_lines(err), 1, "stderr '%s'", err);
}

Test(topology, source_names)
{
  const char *seen[4];
  tm_topology_source_t all[] = { TM_TOPO_OVERRIDE, TM_TOPO_KERNEL_TIERS, TM_TOPO_CPU_FALLBACK,
                                 TM_TOPO_SINGLE };
  for (int i = 0; i < 4; i++) {
    seen[i] = tm_topology_source_name(all[i]);
    cr_assert_not_null(seen[i]);
    cr_assert_gt(strlen(seen[i]), 0);
    for (int j = 0; j < i; j++) cr_assert_str_neq(seen[i], seen[j]);
  }
  cr_assert_str_eq(tm_topology_source_name(TM_TOPO_KERNEL_TIERS), "kernel memory tiers");
}

/* ---- nodelists ---------------------------------------------------------------- */

Test(topology, nodelist_round_trip)
{
  static const struct { const char *in, *out; } cases[] = {
    { "", "" },           { "\n", "" },         { "0", "0" },
    { "0\n", "0" },       { "0-1", "0-1" },     { "0-3,5", "0-3,5" },
    { "0-3,5\n", "0-3,5" }, { "1,3,5-7,1023", "1,3,5-7,1023" },
    { "0,1,2", "0-2" },   { "2,0", "0,2" },     { "0-1023", "0-1023" },
    { "5-5", "5" },       { "007", "7" },       { "0-2,1-4", "0-4" },
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tm_nodemask_t m;
    char buf[64];
    cr_assert_eq(tm_nodelist_parse(cases[i].in, &m), 0, "'%s'", cases[i].in);
    int len = tm_nodelist_format(&m, buf, sizeof buf);
    cr_assert_str_eq(buf, cases[i].out, "'%s'", cases[i].in);
    cr_assert_eq(len, (int)strlen(cases[i].out));
    tm_nodemask_t again;
    cr_assert_eq(tm_nodelist_parse(buf, &again), 0);
    cr_assert_eq(memcmp(&m, &again, sizeof m), 0);
  }
}

Test(topology, nodelist_parse_sets_exact_bits)
{
  tm_nodemask_t m;
  cr_assert_eq(tm_nodelist_parse("0-3,64,1023", &m), 0);
  cr_assert_eq(m.w[0], 0xfULL);
  cr_assert_eq(m.w[1], 1ULL);
  cr_assert_eq(m.w[TIER_NODE_WORDS - 1], 1ULL << 63);
  for (int i = 2; i < TIER_NODE_WORDS - 1; i++) cr_assert_eq(m.w[i], 0);
}

Test(topology, nodelist_bad)
{
  static const char *const bad[] = {
    "a", "1-", "-1", "3-1", "1,,2", ",1", "1,", "1024", "0-1024", "0 1", " 0", "0 ",
    "1\n\n", "\n1", "0-1-2", "0:2", "0-7:2/4", "99999999999999999999", "0x1", "+1",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    tm_nodemask_t m;
    memset(&m, 0xee, sizeof m);
    cr_assert_eq(tm_nodelist_parse(bad[i], &m), EINVAL, "'%s' accepted", bad[i]);
    for (int w = 0; w < TIER_NODE_WORDS; w++)
      cr_assert_eq(m.w[w], 0xeeeeeeeeeeeeeeeeULL, "'%s' touched the mask", bad[i]);
  }
  tm_nodemask_t m;
  cr_assert_eq(tm_nodelist_parse(NULL, &m), EINVAL);
}

/* snprintf-like: the full length is returned, the text is cut and terminated. */
Test(topology, nodelist_format_small_buffer)
{
  tm_nodemask_t m;
  char buf[4];
  cr_assert_eq(tm_nodelist_parse("0-3,5", &m), 0);
  memset(buf, 'z', sizeof buf);
  cr_assert_eq(tm_nodelist_format(&m, buf, sizeof buf), 5);
  cr_assert_str_eq(buf, "0-3");
  cr_assert_eq(tm_nodelist_format(&m, buf, 1), 5);
  cr_assert_str_eq(buf, "");
  cr_assert_eq(tm_nodelist_format(&m, NULL, 0), 5);
}

/* ---- the machine the tests run on --------------------------------------------- */

/* The build host is a single-node VM: one tier holding node 0, with node0's
 * MemTotal. Skipped on a machine with more nodes. */
Test(topology, this_host)
{
  if (access("/sys/devices/system/node/node1", F_OK) == 0)
    cr_skip_test("this check is for single-node hosts");
  FILE *f = fopen("/sys/devices/system/node/node0/meminfo", "r");
  cr_assert_not_null(f);
  char line[256];
  unsigned long long kb = 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "Node 0 MemTotal: %llu kB", &kb) == 1) break;
  fclose(f);
  cr_assert_gt(kb, 0);

  tm_topology_t t;
  cr_assert_eq(tm_topology_discover(&t, "", NULL), 0);
  cr_assert_neq(t.source, TM_TOPO_SINGLE);
  cr_assert_eq(t.ntiers, 1);
  topo_check_tier(&t, 0, "0", kb, t.tier[0].kernel_tier);
  topo_check_unplaced(&t);
}
