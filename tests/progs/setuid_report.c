/*
 * A program to be installed setuid-root by tests/preload (secure execution).
 * It allocates, checks what it wrote, and prints who it runs as, so the test
 * can tell that the kernel really ran it privileged (euid 0, AT_SECURE) and
 * that its output is the same with and without TIERMALLOC_* variables.
 * make builds it plain; the test links it with libtiermalloc itself.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

int main(void)
{
  unsigned long sum = 0;
  for (int i = 0; i < 2000; i++) {
    size_t n = 16 + (size_t)i * 37 % 9000;
    unsigned char *p = malloc(n);
    if (p == NULL) return 2;
    memset(p, i & 0xff, n);
    for (size_t k = 0; k < n; k += 64) sum += p[k];
    free(p);
  }
  printf("ruid=%u euid=%u secure=%lu sum=%lu\n", (unsigned)getuid(), (unsigned)geteuid(),
         getauxval(AT_SECURE), sum);
  return 0;
}
