/* Allocates MIB MiB in 1 MiB blocks (argv[1], default 256) from THREADS
 * threads (argv[2], default 1; with one, the main thread does it all and the
 * process never has a second thread), touches them, frees every block, then
 * stops calling the allocator and watches its own VmRSS for up to WAIT_MS
 * (argv[3], default 3000). Prints "peak=<kB> idle=<kB> after_ms=<ms>
 * threads=<n>": the RSS with the blocks live, the lowest RSS seen while
 * idle, when that was first reached, and the process's threads at the end.
 * Freed memory should go back to the kernel even though the program never
 * calls malloc or free again. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A number from /proc/self/status ("VmRSS:" in kB, "Threads:"), read with
 * open/read into the stack: no allocator call. */
static long status_num(const char *key)
{
  char buf[4096];
  int fd = open("/proc/self/status", O_RDONLY);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  const char *v = strstr(buf, key);
  if (v == NULL) return -1;
  long num = 0;
  for (v += strlen(key); *v == ' ' || *v == '\t'; v++) {}
  for (; *v >= '0' && *v <= '9'; v++) num = num * 10 + (*v - '0');
  return num;
}

static long rss_kb(void)
{
  return status_num("VmRSS:");
}

static int per_thread;
static long peak;
static pthread_barrier_t touched, freed;

static char **fill(void)
{
  char **p = malloc((size_t)per_thread * sizeof *p);
  if (p == NULL) exit(2);
  for (int i = 0; i < per_thread; i++) {
    p[i] = malloc(1 << 20);
    if (p[i] == NULL) exit(2);
    for (size_t k = 0; k < (1 << 20); k += 4096) p[i][k] = (char)(k / 4096 + i);
  }
  return p;
}

static void drain(char **p)
{
  for (int i = 0; i < per_thread; i++) free(p[i]);
  free(p);
}

static void *work(void *arg)
{
  char **p = fill();
  pthread_barrier_wait(&touched);
  pthread_barrier_wait(&touched);   /* the main thread read the peak */
  drain(p);
  pthread_barrier_wait(&freed);
  return arg;
}

int main(int argc, char **argv)
{
  int mib = argc > 1 ? atoi(argv[1]) : 256;
  int threads = argc > 2 ? atoi(argv[2]) : 1;
  int wait_ms = argc > 3 ? atoi(argv[3]) : 3000;
  if (threads < 1 || threads > 64) threads = 1;
  per_thread = mib / threads;
  if (threads == 1) {   /* one thread: the main thread itself, no other ever */
    char **p = fill();
    peak = rss_kb();
    drain(p);
  } else {
    pthread_barrier_init(&touched, NULL, (unsigned)threads + 1);
    pthread_barrier_init(&freed, NULL, (unsigned)threads + 1);
    pthread_t th[64];
    for (int i = 0; i < threads; i++) pthread_create(&th[i], NULL, work, NULL);
    pthread_barrier_wait(&touched);
    peak = rss_kb();
    pthread_barrier_wait(&touched);
    pthread_barrier_wait(&freed);
    for (int i = 0; i < threads; i++) pthread_join(th[i], NULL);
  }
  /* From here on, no allocator call until the result is printed. */
  struct timespec start, now, nap = { 0, 50 * 1000 * 1000 };
  clock_gettime(CLOCK_MONOTONIC, &start);
  long best = rss_kb(), best_ms = 0, ms = 0;
  while (ms < wait_ms) {
    nanosleep(&nap, NULL);
    clock_gettime(CLOCK_MONOTONIC, &now);
    ms = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
    long r = rss_kb();
    if (r >= 0 && r < best) { best = r; best_ms = ms; }
  }
  long threads_now = status_num("Threads:");
  printf("peak=%ld idle=%ld after_ms=%ld threads=%ld\n", peak, best, best_ms, threads_now);
  return 0;
}
