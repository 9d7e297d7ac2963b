/* Shared reference helpers for the topology harnesses. */
#include <stdint.h>
#include <string.h>
#include "topology.h"

/* Strict kernel nodelist over [s, e): "" ok (empty); items N or A-B, A<=B,
 * values < TIER_MAX_NODES, separated by single commas. Leading zeros allowed
 * (as the code does). Returns 0 or -1. */
static int ref_span(const char *s, const char *e, tm_nodemask_t *m)
{
  memset(m, 0, sizeof *m);
  if (s == e) return 0;
  for (;;) {
    if (s == e || *s < '0' || *s > '9') return -1;
    long lo = 0;
    while (s < e && *s >= '0' && *s <= '9') { lo = lo * 10 + (*s - '0'); if (lo > 100000) lo = 100000; s++; }
    long hi = lo;
    if (s < e && *s == '-') {
      s++;
      if (s == e || *s < '0' || *s > '9') return -1;
      hi = 0;
      while (s < e && *s >= '0' && *s <= '9') { hi = hi * 10 + (*s - '0'); if (hi > 100000) hi = 100000; s++; }
    }
    if (lo >= TIER_MAX_NODES || hi >= TIER_MAX_NODES || hi < lo) return -1;
    for (long n = lo; n <= hi; n++) m->w[n / 64] |= 1ULL << (n % 64);
    if (s == e) return 0;
    if (*s != ',') return -1;
    s++;
  }
}
static int mask_eq(const tm_nodemask_t *a, const tm_nodemask_t *b) { return memcmp(a, b, sizeof *a) == 0; }
static int mask_pop(const tm_nodemask_t *a) { int c = 0; for (int i = 0; i < TIER_NODE_WORDS; i++) c += __builtin_popcountll(a->w[i]); return c; }
static int mask_empty(const tm_nodemask_t *a) { return mask_pop(a) == 0; }
static int mask_low(const tm_nodemask_t *a) { for (int n = 0; n < TIER_MAX_NODES; n++) if (tm_nodemask_test(a, n)) return n; return -1; }
