/* bench/numab-alone: the kernel's NUMA balancing alone on bench/numab-probe's
 * heap shape: 48 MiB of 4 KiB pages in one anonymous mapping (no huge
 * pages), every sixth hot and read by a thread, all moved to node1 with
 * move_pages (the default policy stays); prints the hot and cold pages on
 * node0 every 3 s for 30 s. Run it in the 2tier guest with
 * kernel.numa_balancing=2 (bench/numab-probe ALONE=1 does). Built by
 * `make build/bench/numab-alone`. */
#include <numaif.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#define N (48 * 256)
static char *base;
static atomic_int stop;
static void *reader(void *a)
{
  volatile uint64_t s = 0;
  while (!atomic_load(&stop))
    for (size_t i = 0; i < N; i += 6) {
      uint64_t *p = (uint64_t *)(base + i * 4096);
      for (int k = 0; k < 512; k += 64) s += p[k];
      p[1] = p[1];
    }
  return a;
}
int main(void)
{
  base = mmap(NULL, (size_t)N * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  madvise(base, (size_t)N * 4096, MADV_NOHUGEPAGE);
  memset(base, 1, (size_t)N * 4096);
  static void *pages[N];
  static int nodes[N], status[N];
  for (int i = 0; i < N; i++) pages[i] = base + (size_t)i * 4096, nodes[i] = 1;
  move_pages(0, N, pages, nodes, status, MPOL_MF_MOVE);
  pthread_t t;
  pthread_create(&t, NULL, reader, NULL);
  for (int r = 0; r < 10; r++) {
    sleep(3);
    move_pages(0, N, pages, NULL, status, 0);
    int hot0 = 0, cold0 = 0;
    for (int i = 0; i < N; i++)
      if (status[i] == 0) { if (i % 6) cold0++; else hot0++; }
    printf("t=%ds hotN0=%d/%d coldN0=%d\n", (r + 1) * 3, hot0, (N + 5) / 6, cold0);
    fflush(stdout);
  }
  atomic_store(&stop, 1);
  pthread_join(t, NULL);
  return 0;
}
