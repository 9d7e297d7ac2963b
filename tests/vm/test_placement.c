/* Placement, checked page by page with move_pages(2): memory of tier t is on
 * tier t's node, for explicit tier_malloc, for plain malloc, and for the
 * lower-tier arenas that take over when the top-tier budget is spent. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmtest.h"

/* All pages of [p, p+len) are on `node`; returns whether they are. */
static int expect_on_node(const void *p, size_t len, int node, const char *what)
{
  size_t counts[VM_MAX_NODES] = { 0 };
  size_t bad = vm_pages_by_node(p, len, counts);
  size_t total = 0;
  char where[128] = "";
  for (int i = 0; i < VM_MAX_NODES; i++) {
    total += counts[i];
    if (counts[i])
      snprintf(where + strlen(where), sizeof where - strlen(where), " N%d=%zu", i, counts[i]);
  }
  cr_expect_eq(bad, 0, "%s: %zu pages not present", what, bad);
  cr_expect_eq(counts[node], total, "%s: expected every page on node %d, got%s", what, node, where);
  return bad == 0 && counts[node] == total;
}

Test(placement, tier_malloc_large_on_the_tier_node)
{
  const vm_topology_t *topo = vm_topology();
  for (int t = 0; t < topo->ntiers; t++) {
    size_t len = 8 * VM_MIB;
    char *p = tier_malloc(len, t);
    cr_assert_not_null(p, "tier_malloc(8 MiB, %d)", t);
    cr_expect_eq(tier_of(p), t);
    vm_touch(p, len);
    char what[64];
    snprintf(what, sizeof what, "%s: tier_malloc(8 MiB, %d)", topo->name, t);
    expect_on_node(p, len, vm_tier_node(topo, t), what);
    tier_free(p);
  }
}

Test(placement, tier_malloc_small_objects_on_the_tier_node)
{
  const vm_topology_t *topo = vm_topology();
  enum { N = 2000 };
  static char *objs[N];
  size_t sizes[] = { 8, 48, 256, 4000, 20000 };
  for (int t = 0; t < topo->ntiers; t++) {
    for (int i = 0; i < N; i++) {
      size_t sz = sizes[i % 5];
      objs[i] = tier_malloc(sz, t);
      cr_assert_not_null(objs[i]);
      cr_expect_eq(tier_of(objs[i]), t);
      vm_touch(objs[i], sz);
    }
    for (int i = 0; i < N; i++) {
      char what[80];
      snprintf(what, sizeof what, "%s: tier_malloc(%zu, %d) #%d", topo->name, sizes[i % 5], t, i);
      if (!expect_on_node(objs[i], sizes[i % 5], vm_tier_node(topo, t), what))
        break;   /* one message is enough */
    }
    for (int i = 0; i < N; i++) tier_free(objs[i]);
  }
}

Test(placement, malloc_goes_to_the_top_tier)
{
  const vm_topology_t *topo = vm_topology();
  size_t len = 8 * VM_MIB;
  char *p = malloc(len);
  cr_assert_not_null(p);
  cr_expect_eq(tier_of(p), 0);
  vm_touch(p, len);
  expect_on_node(p, len, vm_tier_node(topo, 0), "malloc(8 MiB)");
  free(p);
  char *q = malloc(100);
  vm_touch(q, 100);
  expect_on_node(q, 100, vm_tier_node(topo, 0), "malloc(100)");
  free(q);
}

/* TIERMALLOC_TOPTIER_MAX=16M: 64 x 1 MiB of malloc; tier 0 holds its
 * budget (never more, and all of it but VM_FILL_SLACK: placement is per
 * 2 MiB chunk), the rest is on tier 1's node; and
 * every page is where tier_of() says, on both sides of the boundary. */
Test(placement, lower_tier_arenas_beyond_the_top_tier_budget)
{
  const vm_topology_t *topo = vm_topology();
  char *env[] = { "VMTEST_CHILD=budget", "TIERMALLOC_TOPTIER_MAX=16M", NULL };
  char *argv[] = { (char *)vm_self(), NULL };
  char out[4096];
  int rc = vm_run(argv, env, out, sizeof out);
  cr_assert_eq(rc, 0, "child exited %d:\n%s", rc, out);
  cr_assert(strstr(out, "error") == NULL, "%s", out);
  size_t untiered = 1;
  cr_assert_eq(sscanf(out, "count=%*d untiered=%zu", &untiered), 1, "%s", out);
  cr_expect_eq(untiered, 0, "chunks outside every tier:\n%s", out);
  size_t chunks[2] = { 0 };
  for (int t = 0; t < 2; t++) {
    char key[32];
    snprintf(key, sizeof key, "tier=%d ", t);
    const char *line = strstr(out, key);
    cr_assert_not_null(line, "%s", out);
    unsigned long long mapped = 0, used = 0, resident = 0;
    size_t span = 0;
    cr_assert_eq(sscanf(line, "tier=%*d chunks=%zu span=%zu mapped=%llu used=%llu resident=%llu",
                        &chunks[t], &span, &mapped, &used, &resident), 5);
    if (t == 0) {
      cr_expect_leq(used, 16 * VM_MIB, "tier 0 holds %llu bytes, over its 16 MiB budget\n%s", used, out);
      cr_expect_geq(used + VM_FILL_SLACK, 16 * VM_MIB,
                    "tier 0 holds %llu bytes, more than three chunks under its 16 MiB budget\n%s", used, out);
      cr_expect_leq(resident, VM_BUDGET_16M_TIER0, "tier 0 resident %llu bytes\n%s", resident, out);
    }
    /* The chunks' pages are on the tier's node and nowhere else. */
    const char *eol = strchr(line, '\n');
    int node = vm_tier_node(topo, t);
    size_t on = 0, off = 0;
    for (const char *p = strstr(line, " N"); p && p < eol; p = strstr(p + 1, " N")) {
      int n;
      size_t pages;
      if (sscanf(p, " N%d=%zu", &n, &pages) != 2) continue;
      if (n == node) on += pages; else off += pages;
    }
    cr_expect_eq(off, 0, "%s: tier %d chunks have %zu pages off node %d\n%s", topo->name, t, off, node, out);
    /* Blocks may share a page: at most the span of the parts counted. */
    cr_expect(on > 0 && on <= span, "%s: tier %d: %zu pages on node %d\n%s", topo->name, t, on, node, out);
  }
  cr_expect_leq(chunks[0], 16, "%s", out);
  cr_expect_geq(chunks[1], 40, "%s: only %zu of 64 chunks went to tier 1\n%s", topo->name, chunks[1], out);
}
