/* libFuzzer harness for tm_topology_discover(root = fixed fixture, override = input).
 * Root: tests/fixtures/two-socket-two-cxl-6.12 from the repository root (4
 * nodes, kernel tiers 0-1 | 2-3); FUZZ_TOPO_ROOT names another fixture.
 * Checks the header's invariants and a reference model of the override rules:
 *  - valid spec (every ';'-piece a strict nodelist, non-empty, pairwise
 *    disjoint, at least one usable node): source OVERRIDE, tiers = the pieces
 *    intersected with usable, empty ones skipped, folded past TIER_MAX_TIERS;
 *  - otherwise: exactly the no-override topology. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include "fuzz.h"
#include "nodemask_ref.h"

static const char *root;
static tm_topology_t base;
static tm_nodemask_t usable;
static uint64_t node_cap[TIER_MAX_NODES];

static void check_invariants(const tm_topology_t *t, const char *spec)
{
  if (t->ntiers < 1 || t->ntiers > TIER_MAX_TIERS) FAIL("'%s': ntiers %d", spec, t->ntiers);
  tm_nodemask_t all;
  memset(&all, 0, sizeof all);
  for (int i = 0; i < t->ntiers; i++) {
    const tm_tier_t *x = &t->tier[i];
    if (mask_empty(&x->nodes)) FAIL("'%s': tier %d empty", spec, i);
    if (x->nnodes != mask_pop(&x->nodes)) FAIL("'%s': tier %d nnodes %d != popcount %d", spec, i, x->nnodes, mask_pop(&x->nodes));
    if (x->first_node != mask_low(&x->nodes)) FAIL("'%s': tier %d first_node %d != %d", spec, i, x->first_node, mask_low(&x->nodes));
    for (int w = 0; w < TIER_NODE_WORDS; w++) {
      if (all.w[w] & x->nodes.w[w]) FAIL("'%s': node in two tiers", spec);
      all.w[w] |= x->nodes.w[w];
    }
    uint64_t cap = 0;
    for (int n = 0; n < TIER_MAX_NODES; n++) if (tm_nodemask_test(&x->nodes, n)) cap += node_cap[n];
    if (base.ntiers && cap != x->capacity) FAIL("'%s': tier %d capacity %llu != %llu", spec, i,
                                               (unsigned long long)x->capacity, (unsigned long long)cap);
  }
  for (int i = t->ntiers; i < TIER_MAX_TIERS; i++) {
    static const tm_tier_t zero;
    if (memcmp(&t->tier[i], &zero, sizeof zero)) FAIL("'%s': unused tier %d not zero", spec, i);
  }
  for (int n = 0; n < TIER_MAX_NODES; n++) {
    int want = -1;
    for (int i = 0; i < t->ntiers; i++) if (tm_nodemask_test(&t->tier[i].nodes, n)) want = i;
    if (t->node_tier[n] != want) FAIL("'%s': node_tier[%d] = %d, want %d", spec, n, t->node_tier[n], want);
  }
  /* Only usable nodes are placed. */
  for (int w = 0; w < TIER_NODE_WORDS; w++)
    if (all.w[w] & ~usable.w[w]) FAIL("'%s': unusable node placed", spec);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc; (void)argv;
  root = getenv("FUZZ_TOPO_ROOT");
  if (!root) root = "tests/fixtures/two-socket-two-cxl-6.12";
  if (tm_topology_discover(&base, root, NULL) != 0) { fprintf(stderr, "bad root %s\n", root); exit(1); }
  memset(&usable, 0, sizeof usable);
  for (int i = 0; i < base.ntiers; i++)
    for (int w = 0; w < TIER_NODE_WORDS; w++) usable.w[w] |= base.tier[i].nodes.w[w];
  /* per-node capacity: override with a single node */
  for (int n = 0; n < TIER_MAX_NODES; n++) {
    if (!tm_nodemask_test(&usable, n)) continue;
    char spec[16];
    snprintf(spec, sizeof spec, "%d", n);
    tm_topology_t t;
    tm_topology_discover(&t, root, spec);
    if (t.source != TM_TOPO_OVERRIDE || t.ntiers != 1) { fprintf(stderr, "override %s failed\n", spec); exit(1); }
    node_cap[n] = t.tier[0].capacity;
  }
  tm_topology_t save = base;
  memset(&base, 0, sizeof base);  /* skip capacity check for base itself */
  check_invariants(&save, "(none)");
  base = save;
  fprintf(stderr, "root %s: %d tiers, source %s\n", root, base.ntiers, tm_topology_source_name(base.source));
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *spec = malloc(size + 1);
  memcpy(spec, data, size);
  spec[size] = '\0';

  tm_topology_t t;
  memset(&t, 0xC3, sizeof t);
  int rc = tm_topology_discover(&t, root, spec);
  if (rc != 0) FAIL("'%s': rc %d", spec, rc);
  check_invariants(&t, spec);

  /* reference model */
  int valid = spec[0] != '\0', nonempty = 0;
  tm_nodemask_t seen, want[64 + 1];
  int nwant = 0;
  memset(&seen, 0, sizeof seen);
  for (const char *s = spec; valid;) {
    const char *e = strchr(s, ';');
    if (!e) e = s + strlen(s);
    tm_nodemask_t m;
    if (e == s || ref_span(s, e, &m) != 0) { valid = 0; break; }
    for (int w = 0; w < TIER_NODE_WORDS; w++) {
      if (seen.w[w] & m.w[w]) valid = 0;
      seen.w[w] |= m.w[w];
      m.w[w] &= usable.w[w];
    }
    if (!mask_empty(&m)) {
      nonempty++;
      if (nwant < TIER_MAX_TIERS) want[nwant++] = m;
      else for (int w = 0; w < TIER_NODE_WORDS; w++) want[nwant - 1].w[w] |= m.w[w];
    }
    if (!*e) break;
    s = e + 1;
  }
  if (!valid || !nonempty) {
    if (memcmp(&t, &base, sizeof t) != 0) FAIL("'%s': invalid/unusable spec but topology differs from no-override", spec);
  } else {
    if (t.source != TM_TOPO_OVERRIDE) FAIL("'%s': valid spec but source %d", spec, t.source);
    if (t.ntiers != nwant) FAIL("'%s': ntiers %d want %d", spec, t.ntiers, nwant);
    for (int i = 0; i < nwant; i++) {
      if (!mask_eq(&t.tier[i].nodes, &want[i])) FAIL("'%s': tier %d nodes differ", spec, i);
      if (t.tier[i].kernel_tier != -1) FAIL("'%s': kernel_tier %d", spec, t.tier[i].kernel_tier);
    }
  }
  free(spec);
  return 0;
}
