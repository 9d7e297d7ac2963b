/* Touches 64 MiB in 1 MiB blocks, frees them, and prints the bytes resident
 * in the tier ranges before and after (tier_stats_get, found with dlsym when
 * tiermalloc is preloaded). With TIERMALLOC_DIRTY_DECAY_MS=0 the pages must
 * go back to the kernel at once: memory is returned as jemalloc decays it. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tiermalloc.h"

static unsigned long long decay_resident(int (*get)(tier_stats_t *, size_t))
{
  tier_stats_t s;
  if (get(&s, sizeof s) != 0) return 0;
  unsigned long long r = 0;
  for (unsigned t = 0; t < s.ntiers; t++) r += s.tier[t].resident;
  return r;
}

int main(void)
{
  int (*get)(tier_stats_t *, size_t) = (int (*)(tier_stats_t *, size_t))dlsym(RTLD_DEFAULT, "tier_stats_get");
  if (get == NULL) {
    printf("no tiermalloc\n");
    return 1;
  }
  enum { N = 64, SZ = 1 << 20 };
  char *p[N];
  for (int i = 0; i < N; i++) {
    p[i] = malloc(SZ);
    if (p[i] == NULL) return 2;
    memset(p[i], i + 1, SZ);
  }
  unsigned long long before = decay_resident(get);
  for (int i = 0; i < N; i++) free(p[i]);
  unsigned long long after = decay_resident(get);
  printf("before=%llu after=%llu\n", before, after);
  return 0;
}
