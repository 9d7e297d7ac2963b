/* Topology discovery on a real kernel: the kernel's memory tiers are what
 * the topology should produce, tiermalloc's tiers follow them (or the
 * CPU-less fallback when the kernel has one tier), and TIERMALLOC_TIERS
 * overrides both. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmtest.h"

static int cmp_int(const void *a, const void *b)
{
  return *(const int *)a - *(const int *)b;
}

Test(topology, kernel_memory_tiers)
{
  const vm_topology_t *topo = vm_topology();
  const char *dir = "/sys/devices/virtual/memory_tiering";
  DIR *d = opendir(dir);
  cr_assert_not_null(d, "%s missing", dir);
  int ids[16], n = 0;
  struct dirent *e;
  while ((e = readdir(d)) && n < 16)
    if (sscanf(e->d_name, "memory_tier%d", &ids[n]) == 1) n++;
  closedir(d);
  qsort(ids, (size_t)n, sizeof *ids, cmp_int);
  char got[256] = "", path[128], nodes[64];
  for (int i = 0; i < n; i++) {
    snprintf(path, sizeof path, "%s/memory_tier%d/nodelist", dir, ids[i]);
    cr_assert_eq(vm_read_file(path, nodes, sizeof nodes), 0);
    snprintf(got + strlen(got), sizeof got - strlen(got), "%s%d:%s", i ? " " : "", ids[i], nodes);
  }
  cr_expect_str_eq(got, topo->kernel_tiers, "%s: the kernel formed tiers '%s', expected '%s'",
                   topo->name, got, topo->kernel_tiers);
}

Test(topology, tiers_follow_the_kernel)
{
  const vm_topology_t *topo = vm_topology();
  cr_assert_eq(tier_count(), topo->ntiers, "%s: tier_count() = %d, expected %d", topo->name,
               tier_count(), topo->ntiers);
  tier_stats_t s;
  cr_assert_eq(tier_stats_get(&s, sizeof s), 0);
  cr_assert_eq(s.ntiers, (uint32_t)topo->ntiers);
  for (int t = 0; t < topo->ntiers; t++) {
    cr_expect_eq(s.tier[t].nodes[0], topo->tier_nodes[t], "%s: tier %d nodes 0x%llx, expected 0x%llx",
                 topo->name, t, (unsigned long long)s.tier[t].nodes[0],
                 (unsigned long long)topo->tier_nodes[t]);
    /* capacity is the node's MemTotal. */
    char path[96], buf[2048];
    snprintf(path, sizeof path, "/sys/devices/system/node/node%d/meminfo", vm_tier_node(topo, t));
    cr_assert_eq(vm_read_file(path, buf, sizeof buf), 0);
    const char *mt = strstr(buf, "MemTotal:");
    cr_assert_not_null(mt);
    unsigned long long kb = strtoull(mt + strlen("MemTotal:"), NULL, 10);
    cr_expect_eq(s.tier[t].capacity, kb * 1024, "tier %d capacity %llu, node MemTotal %llu kB", t,
                 (unsigned long long)s.tier[t].capacity, kb);
  }
}

/* Runs the "tiers" child mode with TIERMALLOC_TIERS=spec (NULL: unset) and
 * checks the count, each tier's nodes and where its memory landed. */
static void check_tiers_child(const char *spec, int count, const uint64_t *nodes)
{
  char envs[2][128];
  char *env[3] = { envs[0], NULL, NULL };
  snprintf(envs[0], sizeof envs[0], "VMTEST_CHILD=tiers");
  if (spec) {
    snprintf(envs[1], sizeof envs[1], "TIERMALLOC_TIERS=%s", spec);
    env[1] = envs[1];
  }
  char *argv[] = { (char *)vm_self(), NULL };
  char out[4096];
  int rc = vm_run(argv, env, out, sizeof out);
  cr_assert_eq(rc, 0, "child exited %d:\n%s", rc, out);
  cr_assert(strstr(out, "error") == NULL, "TIERS=%s child:\n%s", spec ? spec : "(unset)", out);
  int got = -1;
  cr_assert_eq(sscanf(out, "count=%d", &got), 1, "child said:\n%s", out);
  cr_assert_eq(got, count, "TIERMALLOC_TIERS=%s: tier_count() = %d, expected %d\n%s",
               spec ? spec : "(unset)", got, count, out);
  for (int t = 0; t < count; t++) {
    char key[32];
    snprintf(key, sizeof key, "tier=%d ", t);
    const char *line = strstr(out, key);
    cr_assert_not_null(line, "no line for tier %d:\n%s", t, out);
    unsigned long long mask = 0;
    int of = -2;
    size_t absent = 1, span = 0;
    cr_assert_eq(sscanf(line, "tier=%*d nodes=0x%llx of=%d absent=%zu span=%zu", &mask, &of, &absent, &span), 4);
    cr_expect_eq(mask, nodes[t], "TIERS=%s tier %d: nodes 0x%llx, expected 0x%llx", spec ? spec : "(unset)",
                 t, mask, (unsigned long long)nodes[t]);
    cr_expect_eq(of, t, "tier_of(tier_malloc(, %d)) = %d", t, of);
    cr_expect_eq(absent, 0, "tier %d: %zu pages not present after touching", t, absent);
    /* Every page is on a node of the tier. */
    const char *eol = strchr(line, '\n');
    size_t onnodes = 0, off = 0;
    for (const char *p = strstr(line, " N"); p && (!eol || p < eol); p = strstr(p + 1, " N")) {
      int node;
      size_t pages;
      if (sscanf(p, " N%d=%zu", &node, &pages) != 2) continue;
      if (mask & (1ull << node)) onnodes += pages; else off += pages;
    }
    cr_expect_eq(off, 0, "TIERS=%s tier %d: %zu pages outside its nodes: %.*s", spec ? spec : "(unset)", t,
                 off, (int)(eol ? eol - line : (long)strlen(line)), line);
    cr_expect_eq(onnodes, span, "tier %d: %zu pages on its nodes of %zu", t, onnodes, span);
  }
}

Test(topology, fresh_process_discovers_the_same)
{
  const vm_topology_t *topo = vm_topology();
  check_tiers_child(NULL, topo->ntiers, topo->tier_nodes);
}

Test(topology, tiers_override)
{
  const vm_topology_t *topo = vm_topology();
  /* All nodes in one tier. */
  uint64_t all = (1ull << topo->nnodes) - 1;
  char spec[64];
  snprintf(spec, sizeof spec, "0-%d", topo->nnodes - 1);
  check_tiers_child(spec, 1, &all);
  /* The kernel's order, reversed: the slowest node becomes the top tier. */
  uint64_t rev[TIER_MAX_TIERS];
  spec[0] = 0;
  for (int t = 0; t < topo->ntiers; t++) {
    int from = topo->ntiers - 1 - t;
    rev[t] = topo->tier_nodes[from];
    snprintf(spec + strlen(spec), sizeof spec - strlen(spec), "%s%d", t ? ";" : "",
             vm_tier_node(topo, from));
  }
  check_tiers_child(spec, topo->ntiers, rev);
  if (topo->nnodes == 3) {
    /* Two nodes in the lower tier: node0 on top, HBM and CXL below. */
    uint64_t two[2] = { 1, 6 };
    check_tiers_child("0;1,2", 2, two);
  }
}
