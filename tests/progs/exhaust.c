/* Allocates 2.5 GiB in 64 MiB blocks (touching two bytes of each, so it
 * costs little memory) and reports how many landed in a tier range and how
 * many outside (tier_of, found with dlsym when tiermalloc is preloaded).
 * Run with TIERMALLOC_RESERVE=1G: the ranges fill up and malloc must go on. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
  int (*tier_of)(const void *) = (int (*)(const void *))dlsym(RTLD_DEFAULT, "tier_of");
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
    if (tier_of && tier_of(p[i]) >= 0) placed++;
    else unplaced++;
  }
  for (int i = 0; i < N; i++) {
    if (p[i][0] != (char)i || p[i][SZ - 1] != (char)i) return 2;
    free(p[i]);
  }
  printf("placed=%d unplaced=%d\n", placed, unplaced);
  return 0;
}
