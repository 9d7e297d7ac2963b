/* The lifecycle of tiermalloc's thread, run preloaded with a budget that
 * makes it the reclaim thread (tiermalloc_rcl), or, with
 * RECLAIM_LIFE_THREAD=tiermalloc_pub and no budget, the thread that only
 * publishes the live record (tests/preload/test_reclaim_life.c):
 *   reclaim_life pthread-exit  every thread, main too, ends by pthread_exit
 *   reclaim_life fork N        N forks while other threads allocate; each
 *                              child checks its data and that its own
 *                              reclaim thread starts, then exits
 *   reclaim_life sigterm       a child with reclaim running gets SIGTERM
 *   reclaim_life exit          exit() while threads allocate
 * Prints "reclaim=1" once the thread runs, then the mode's result line. */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "threadnames.h"

static int reclaim_threads(void)
{
  const char *name = getenv("RECLAIM_LIFE_THREAD");
  return threadnames_count(name && name[0] ? name : "tiermalloc_rcl");
}

/* Allocates new memory, kept until the thread runs (it starts on the way
 * out of an allocation that committed memory: in a fork child, the thread
 * that only publishes waits for one), then waits up to 3 s for it. */
static int wait_reclaim(void)
{
  static char *kept[300];
  int on = 0, i = 0;
  for (; i < 300 && !on; i++) {
    kept[i] = malloc(1 << 20);
    on = reclaim_threads() > 0;
    if (!on) usleep(10000);
  }
  while (i-- > 0) free(kept[i]);
  return on;
}

static char *fill(size_t n, unsigned seed)
{
  char *p = malloc(n);
  if (!p) return NULL;
  for (size_t i = 0; i < n; i++) p[i] = (char)(seed * 31 + i * 7 + (i >> 12));
  return p;
}

static int intact(const char *p, size_t n, unsigned seed)
{
  for (size_t i = 0; i < n; i++)
    if (p[i] != (char)(seed * 31 + i * 7 + (i >> 12))) return 0;
  return 1;
}

static atomic_int stop;

static void *churn(void *arg)
{
  unsigned seed = (unsigned)(uintptr_t)arg;
  while (!atomic_load(&stop)) {
    char *p = fill(256 << 10, seed);
    if (!p || !intact(p, 256 << 10, seed)) abort();
    free(p);
  }
  return NULL;
}

static void *exiting(void *arg)
{
  char *p = fill(8 << 20, (unsigned)(uintptr_t)arg);
  usleep(50000);
  free(p);
  pthread_exit(NULL);
}

int main(int argc, char **argv)
{
  const char *mode = argc > 1 ? argv[1] : "";
  char *heap = fill(32 << 20, 1);
  int on = wait_reclaim();
  printf("reclaim=%d\n", on);
  fflush(stdout);
  if (!strcmp(mode, "pthread-exit")) {
    for (uintptr_t i = 0; i < 4; i++) {
      pthread_t t;
      pthread_create(&t, NULL, exiting, (void *)(i + 2));
      pthread_detach(t);
    }
    free(heap);
    pthread_exit(NULL);
  }
  if (!strcmp(mode, "fork")) {
    int n = argc > 2 ? atoi(argv[2]) : 10, ok = 0;
    pthread_t t[2];
    for (uintptr_t i = 0; i < 2; i++) pthread_create(&t[i], NULL, churn, (void *)(i + 7));
    for (int k = 0; k < n; k++) {
      pid_t pid = fork();
      if (pid == 0) {
        char *mine = fill(16 << 20, 100 + (unsigned)k);
        int good = intact(heap, 32 << 20, 1) && wait_reclaim() && intact(mine, 16 << 20, 100 + (unsigned)k);
        _exit(good ? 0 : 1);
      }
      int st = 0;
      for (int w = 0; w < 1000 && waitpid(pid, &st, WNOHANG) == 0; w++) usleep(10000);
      if (waitpid(pid, &st, WNOHANG) == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
      }
      ok += WIFEXITED(st) && WEXITSTATUS(st) == 0;
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    printf("forks=%d ok=%d intact=%d\n", n, ok, intact(heap, 32 << 20, 1));
    return 0;
  }
  if (!strcmp(mode, "sigterm")) {
    int fd[2];
    if (pipe(fd) != 0) return 2;
    pid_t pid = fork();
    if (pid == 0) {
      char c = (char)('0' + wait_reclaim());
      if (write(fd[1], &c, 1) != 1) _exit(3);
      for (;;) pause();
    }
    char c = 0;
    if (read(fd[0], &c, 1) != 1) return 2;
    kill(pid, SIGTERM);
    int st = 0;
    for (int w = 0; w < 1000 && waitpid(pid, &st, WNOHANG) == 0; w++) usleep(10000);
    int ended = WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM;
    if (!ended) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
    }
    printf("child_reclaim=%c term=%s\n", c, ended ? "ok" : "hung");
    return 0;
  }
  if (!strcmp(mode, "exit")) {
    for (uintptr_t i = 0; i < 2; i++) {
      pthread_t t;
      pthread_create(&t, NULL, churn, (void *)(i + 3));
    }
    usleep(200000);
    printf("exiting\n");
    fflush(stdout);
    exit(0);
  }
  return 2;
}
