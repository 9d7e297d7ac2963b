/* Allocates 2.5 GiB in 64 MiB blocks (touching two bytes of each, so it
 * costs little memory) and reports how many landed in a tier range and how
 * many outside (tier_of, found with dlsym when tiermalloc is preloaded).
 * Run with TIERMALLOC_RESERVE=1G: the ranges fill up and malloc must go on.
 * Then a realloc of an unplaced block that cannot succeed must leave it, and
 * the stats' unplaced bytes, as they were. */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "tiermalloc.h"

static unsigned long long unplaced_allocated(void)
{
  int (*get)(tier_stats_t *, size_t) = (int (*)(tier_stats_t *, size_t))dlsym(RTLD_DEFAULT, "tier_stats_get");
  tier_stats_t s;
  return get && get(&s, sizeof s) == 0 ? (unsigned long long)s.unplaced_allocated : 0;
}

int main(void)
{
  int (*tier_of_fn)(const void *) = (int (*)(const void *))dlsym(RTLD_DEFAULT, "tier_of");
  enum { N = 40, SZ = 64 << 20 };
  char *p[N];
  int placed = 0, unplaced = 0;
  for (int i = 0; i < N; i++) {
    p[i] = malloc(SZ);
    if (p[i] == NULL) {
      printf("malloc %d failed\n", i);
      return 1;
    }
    p[i][0] = (char)i;
    p[i][SZ - 1] = (char)i;
    if (tier_of_fn && tier_of_fn(p[i]) >= 0) placed++;
    else unplaced++;
  }
  unsigned long long before = unplaced_allocated();
  int last = N - 1;   /* unplaced once the ranges are full */
  errno = 0;
  void *q = realloc(p[last], (size_t)1 << 50);
  int failed = q == NULL && errno == ENOMEM;
  if (q != NULL) p[last] = q;
  unsigned long long after = unplaced_allocated();
  for (int i = 0; i < N; i++) {
    if (p[i][0] != (char)i || p[i][SZ - 1] != (char)i) return 2;
    free(p[i]);
  }
  printf("placed=%d unplaced=%d realloc_failed=%d unplaced_before=%llu unplaced_after=%llu\n", placed, unplaced,
         failed, before, after);
  return 0;
}
