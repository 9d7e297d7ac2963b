/*
 * fork() while other threads allocate. Four worker threads malloc, realloc
 * and free mixed sizes and free each other's blocks through a shared queue;
 * meanwhile the main thread forks repeatedly. Each child allocates, uses
 * stdio (which allocates too) and exits through exit(), so the allocator's
 * state in a child forked mid-operation must be usable. Some children also
 * start threads of their own, and one forks a grandchild.
 *
 * Prints a summary that depends only on deterministic work (never on
 * timing or addresses); exit status 0 when every check held. A child that
 * deadlocks is killed by its alarm and counted as failed, so the program
 * always ends.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { WORKERS = 4, WORK_ITERS = 20000, FORKS = 24, THREADED_CHILDREN = 4, QUEUE = 256 };

static uint64_t tf_rand(uint64_t *s)
{
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return *s >> 33;
}

static size_t tf_size(uint64_t *s)
{
  uint64_t r = tf_rand(s);
  switch (r % 40) {
  case 0: return 32768 + r % (64 << 10);
  case 1: case 2: return 1024 + r % 8192;
  default: return 16 + r % 512;
  }
}

/* A block: its size, then bytes all equal to tag. */
typedef struct {
  size_t size;
  unsigned char tag;
} tf_hdr_t;

static tf_hdr_t *tf_make(size_t size, unsigned char tag)
{
  tf_hdr_t *h = malloc(size);
  if (h == NULL) return NULL;
  h->size = size;
  h->tag = tag;
  memset(h + 1, tag, size - sizeof *h);
  return h;
}

static int tf_intact(const tf_hdr_t *h)
{
  const unsigned char *b = (const unsigned char *)(h + 1);
  for (size_t i = 0; i < h->size - sizeof *h; i++)
    if (b[i] != h->tag) return 0;
  return 1;
}

/* The shared queue of blocks handed between threads. */
typedef struct {
  pthread_mutex_t lock;
  tf_hdr_t *slot[QUEUE];
  size_t n;
} tf_queue_t;

static atomic_long tf_corrupt, tf_oom;

/* Pushes h; when the queue is full, swaps it with a random queued block
 * and returns that one for the caller to free. s is a generator of its own:
 * how often the queue is full depends on timing, and must not change the
 * sizes the worker draws. */
static tf_hdr_t *tf_exchange(tf_queue_t *q, tf_hdr_t *h, uint64_t *s)
{
  tf_hdr_t *out = NULL;
  pthread_mutex_lock(&q->lock);
  if (q->n < QUEUE) q->slot[q->n++] = h;
  else {
    size_t i = tf_rand(s) % QUEUE;
    out = q->slot[i];
    q->slot[i] = h;
  }
  pthread_mutex_unlock(&q->lock);
  return out;
}

static void tf_release(tf_hdr_t *h)
{
  if (h == NULL) return;
  if (!tf_intact(h)) atomic_fetch_add(&tf_corrupt, 1);
  free(h);
}

static void tf_drain(tf_queue_t *q)
{
  pthread_mutex_lock(&q->lock);
  for (size_t i = 0; i < q->n; i++) tf_release(q->slot[i]);
  q->n = 0;
  pthread_mutex_unlock(&q->lock);
}

typedef struct {
  tf_queue_t *queue;
  uint64_t seed;
  int iters;                 /* deterministic work counted in the checksum */
  atomic_int *stop;          /* then keep churning until this is set (may be NULL) */
  uint64_t checksum;
} tf_worker_t;

/* The worker's checksum covers only its own first `iters` iterations:
 * sizes it chose and bytes it read back from its own blocks. */
static void *tf_worker(void *argp)
{
  tf_worker_t *w = argp;
  uint64_t s = w->seed, xs = w->seed ^ 0x5555, sum = 0;
  tf_hdr_t *mine[16] = { 0 };
  for (long i = 0; i < w->iters || (w->stop && !atomic_load(w->stop)); i++) {
    int counted = i < w->iters;
    uint64_t r = tf_rand(&s);
    size_t size = tf_size(&s);
    unsigned char tag = (unsigned char)(r >> 8);
    tf_hdr_t *h = tf_make(size, tag);
    if (h == NULL) { atomic_fetch_add(&tf_oom, 1); continue; }
    size_t k = r % 16;
    switch (r % 5) {
    case 0:   /* grow or shrink with realloc; contents must survive */
    {
      size_t ns = tf_size(&s);
      size_t keep = (ns < size ? ns : size) - sizeof *h;
      tf_hdr_t *g = realloc(h, ns);
      if (g == NULL) { atomic_fetch_add(&tf_oom, 1); tf_release(h); break; }
      const unsigned char *b = (const unsigned char *)(g + 1);
      for (size_t j = 0; j < keep; j++)
        if (b[j] != tag) { atomic_fetch_add(&tf_corrupt, 1); break; }
      g->size = ns;
      memset(g + 1, tag, ns - sizeof *g);
      if (counted) sum = sum * 31 + ns;
      tf_release(mine[k]);
      mine[k] = g;
      break;
    }
    case 1:
    case 2:   /* to another thread */
      tf_release(tf_exchange(w->queue, h, &xs));
      if (counted) sum = sum * 31 + size;
      break;
    default:  /* kept for a while, freed here */
      tf_release(mine[k]);
      mine[k] = h;
      if (counted) sum = sum * 31 + size + tag;
      break;
    }
  }
  for (int k = 0; k < 16; k++) tf_release(mine[k]);
  w->checksum = sum;
  return NULL;
}

/* Runs `n` workers on one queue to completion; their combined checksum. */
static uint64_t tf_run_workers(int n, uint64_t seed, int iters, atomic_int *stop, pthread_t *t, tf_worker_t *w,
                               tf_queue_t *q, int join)
{
  for (int i = 0; i < n; i++) {
    w[i] = (tf_worker_t){ q, seed + (uint64_t)i, iters, stop, 0 };
    if (pthread_create(&t[i], NULL, tf_worker, &w[i]) != 0) {
      fprintf(stdout, "pthread_create failed\n");
      exit(3);
    }
  }
  if (!join) return 0;
  uint64_t sum = 0;
  for (int i = 0; i < n; i++) {
    pthread_join(t[i], NULL);
    sum = sum * 1000003 + w[i].checksum;
  }
  return sum;
}

/* A child's own work: allocations through malloc and stdio, checked. */
static int tf_child_work(int id)
{
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  if (mem == NULL) return 10;
  uint64_t s = (uint64_t)id + 1;
  for (int i = 0; i < 300; i++) {
    tf_hdr_t *h = tf_make(tf_size(&s), (unsigned char)i);
    if (h == NULL) return 11;
    fprintf(mem, "%d:%zu;", i, h->size);
    if (!tf_intact(h)) return 12;
    free(h);
  }
  fclose(mem);
  size_t expect = 0;
  s = (uint64_t)id + 1;
  for (int i = 0; i < 300; i++) expect += (size_t)snprintf(NULL, 0, "%d:%zu;", i, tf_size(&s));
  int ok = len == expect;
  free(text);
  FILE *null = fopen("/dev/null", "w");
  if (null == NULL) return 13;
  setvbuf(null, NULL, _IOFBF, 1 << 16);   /* a malloc'd stdio buffer */
  for (int i = 0; i < 300; i++) fprintf(null, "child %d line %d\n", id, i);
  fclose(null);
  return ok ? 0 : 14;
}

/* A child forked while its parent's threads run, which then starts
 * threads itself (and forks once more); its exit status is its verdict. */
static int tf_threaded_child(int id)
{
  static tf_queue_t q = { PTHREAD_MUTEX_INITIALIZER, { 0 }, 0 };
  pthread_t t[3];
  tf_worker_t w[3];
  uint64_t sum = tf_run_workers(3, 5000 + (uint64_t)id, 3000, NULL, t, w, &q, 1);
  tf_drain(&q);
  if (sum == 0) return 20;
  if (id == 0) {
    /* A grandchild forked from a process that has threads of its own. */
    fflush(NULL);
    pid_t g = fork();
    if (g < 0) return 21;
    if (g == 0) {
      alarm(20);
      exit(tf_child_work(1000));
    }
    int st;
    if (waitpid(g, &st, 0) != g || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return 22;
  }
  if (tf_child_work(id) != 0) return 23;
  return atomic_load(&tf_corrupt) || atomic_load(&tf_oom) ? 24 : 0;
}

static int tf_wait(pid_t pid, int *failures)
{
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) { (*failures)++; return 0; }
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return 1;
  if (WIFSIGNALED(st)) fprintf(stdout, "child killed by signal %d\n", WTERMSIG(st));
  else fprintf(stdout, "child exit status %d\n", WEXITSTATUS(st));
  (*failures)++;
  return 0;
}

int main(void)
{
  static tf_queue_t q = { PTHREAD_MUTEX_INITIALIZER, { 0 }, 0 };
  atomic_int stop = 0;
  pthread_t t[WORKERS];
  tf_worker_t w[WORKERS];
  int failures = 0, ok_plain = 0, ok_threaded = 0;

  setvbuf(stdout, NULL, _IOLBF, 0);
  tf_run_workers(WORKERS, 1, WORK_ITERS, &stop, t, w, &q, 0);

  for (int i = 0; i < FORKS + THREADED_CHILDREN; i++) {
    int threaded = i % ((FORKS + THREADED_CHILDREN) / THREADED_CHILDREN) == 0;
    fflush(NULL);   /* nothing buffered is written twice */
    pid_t pid = fork();
    if (pid < 0) {
      fprintf(stdout, "fork failed: %s\n", strerror(errno));
      failures++;
      break;
    }
    if (pid == 0) {
      alarm(20);   /* a deadlocked child dies instead of hanging the test */
      exit(threaded ? tf_threaded_child(i / ((FORKS + THREADED_CHILDREN) / THREADED_CHILDREN)) : tf_child_work(i));
    }
    if (tf_wait(pid, &failures)) {
      if (threaded) ok_threaded++;
      else ok_plain++;
    }
    /* Let the workers run between forks, so forks land mid-operation. */
    for (volatile int spin = 0; spin < 20000; spin++) {}
  }

  atomic_store(&stop, 1);
  uint64_t sum = 0;
  for (int i = 0; i < WORKERS; i++) {
    pthread_join(t[i], NULL);
    sum = sum * 1000003 + w[i].checksum;
  }
  tf_drain(&q);

  printf("workers: %d x %d iterations, checksum %016llx\n", WORKERS, WORK_ITERS, (unsigned long long)sum);
  printf("children: %d of %d exited cleanly\n", ok_plain, FORKS);
  printf("threaded children: %d of %d exited cleanly\n", ok_threaded, THREADED_CHILDREN);
  printf("corrupted blocks: %ld\n", atomic_load(&tf_corrupt));
  printf("failed allocations: %ld\n", atomic_load(&tf_oom));
  int bad = failures || atomic_load(&tf_corrupt) || atomic_load(&tf_oom);
  printf("%s\n", bad ? "FAILED" : "passed");
  return bad ? 1 : 0;
}
