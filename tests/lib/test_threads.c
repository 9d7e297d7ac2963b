/*
 * Thread exit under the allocator that runs this test process: many
 * short-lived threads allocate, hand blocks to other threads, free blocks
 * that other (often already exited) threads allocated, and exit with
 * blocks still in their thread caches. The contract: no crash, no
 * corruption (every block keeps the pattern its allocator wrote until it
 * is freed), and the memory a dead thread had cached is reusable.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "threadnames.h"
#include "tiermalloc.h"

/* A block carries its size and a stamp so the freeing thread can check it. */
typedef struct {
  size_t size;
  uint64_t stamp;
} threads_hdr_t;

static uint64_t threads_rand(uint64_t *s)
{
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return *s >> 33;
}

static size_t threads_size(uint64_t *s)
{
  uint64_t r = threads_rand(s);
  switch (r % 16) {
  case 0: return 16384 + r % (512 * 1024);   /* large */
  case 1: return 4096 + r % 16384;
  default: return sizeof(threads_hdr_t) + r % 1024;   /* small, the common case */
  }
}

static void *threads_make(size_t size, uint64_t stamp)
{
  threads_hdr_t *h = malloc(size);
  if (h == NULL) return NULL;
  h->size = size;
  h->stamp = stamp;
  memset(h + 1, (int)(stamp & 0xff), size - sizeof *h);
  return h;
}

/* 0 when the block is intact. */
static int threads_check(const threads_hdr_t *h)
{
  const unsigned char *b = (const unsigned char *)(h + 1);
  for (size_t i = 0; i < h->size - sizeof *h; i++)
    if (b[i] != (unsigned char)(h->stamp & 0xff)) return 1;
  return 0;
}

/* A bounded mailbox of blocks shared by all threads of one test. */
enum { THREADS_BOX = 4096 };
typedef struct {
  pthread_mutex_t lock;
  void *slot[THREADS_BOX];
  size_t n;
  atomic_long corrupt, made, freed;
} threads_box_t;

static void threads_box_init(threads_box_t *b)
{
  memset(b, 0, sizeof *b);
  pthread_mutex_init(&b->lock, NULL);
}

/* Puts p in the box; when full, swaps it with a random resident block,
 * which the caller then owns (and frees). Returns the block to free or NULL. */
static void *threads_box_swap(threads_box_t *b, void *p, uint64_t *s)
{
  void *out = NULL;
  pthread_mutex_lock(&b->lock);
  if (b->n < THREADS_BOX) {
    b->slot[b->n++] = p;
  } else {
    size_t i = threads_rand(s) % THREADS_BOX;
    out = b->slot[i];
    b->slot[i] = p;
  }
  pthread_mutex_unlock(&b->lock);
  return out;
}

static void *threads_box_take(threads_box_t *b)
{
  void *p = NULL;
  pthread_mutex_lock(&b->lock);
  if (b->n > 0) p = b->slot[--b->n];
  pthread_mutex_unlock(&b->lock);
  return p;
}

static void threads_release(threads_box_t *b, void *p)
{
  if (p == NULL) return;
  if (threads_check(p)) atomic_fetch_add(&b->corrupt, 1);
  free(p);
  atomic_fetch_add(&b->freed, 1);
}

typedef struct {
  threads_box_t *box;
  uint64_t seed;
  int ops;
} threads_arg_t;

/* One short life: allocate, keep some locally (freed here), give some to
 * the box (freed by whoever swaps them out), take some from the box (made
 * by other threads, maybe dead ones), and exit leaving a warm tcache. */
static void *threads_worker(void *argp)
{
  threads_arg_t *a = argp;
  uint64_t s = a->seed;
  void *local[32] = { 0 };
  for (int i = 0; i < a->ops; i++) {
    uint64_t r = threads_rand(&s);
    void *p = threads_make(threads_size(&s), a->seed * 1000003u + (uint64_t)i);
    if (p == NULL) {
      atomic_fetch_add(&a->box->corrupt, 1000000);   /* out of memory: fail loudly */
      break;
    }
    atomic_fetch_add(&a->box->made, 1);
    switch (r % 4) {
    case 0:
    case 1: {
      size_t k = r % 32;
      threads_release(a->box, local[k]);
      local[k] = p;
      break;
    }
    case 2:
      threads_release(a->box, threads_box_swap(a->box, p, &s));
      break;
    default:
      threads_release(a->box, threads_box_swap(a->box, p, &s));
      threads_release(a->box, threads_box_take(a->box));
      break;
    }
  }
  /* Half of the leftovers go to the box for other threads to free. */
  for (int k = 0; k < 32; k++) {
    if (local[k] == NULL) continue;
    if (k % 2) threads_release(a->box, threads_box_swap(a->box, local[k], &s));
    else threads_release(a->box, local[k]);
  }
  return NULL;
}

static void threads_drain(threads_box_t *b)
{
  void *p;
  while ((p = threads_box_take(b)) != NULL) threads_release(b, p);
}

Test(threads, short_lived_threads_with_cross_thread_frees, .timeout = 60)
{
  static threads_box_t box;
  threads_box_init(&box);
  enum { WAVES = 25, PER_WAVE = 8 };
  threads_arg_t args[PER_WAVE];
  for (int w = 0; w < WAVES; w++) {
    pthread_t t[PER_WAVE];
    for (int i = 0; i < PER_WAVE; i++) {
      args[i] = (threads_arg_t){ &box, (uint64_t)(w * PER_WAVE + i + 1), 300 };
      cr_assert_eq(pthread_create(&t[i], NULL, threads_worker, &args[i]), 0, "wave %d thread %d", w, i);
    }
    for (int i = 0; i < PER_WAVE; i++) pthread_join(t[i], NULL);
  }
  /* The main thread frees what the dead threads left behind. */
  threads_drain(&box);
  cr_expect_eq(atomic_load(&box.corrupt), 0, "%ld blocks were corrupted (or allocation failed)",
               atomic_load(&box.corrupt));
  cr_expect_eq(atomic_load(&box.made), atomic_load(&box.freed), "made %ld blocks, freed %ld",
               atomic_load(&box.made), atomic_load(&box.freed));
}

/* Counters of the detached-thread test: threads alive and threads done. */
static atomic_int threads_alive, threads_done;

static void *threads_detached_body(void *argp)
{
  threads_worker(argp);
  atomic_fetch_add(&threads_done, 1);
  atomic_fetch_sub(&threads_alive, 1);
  return NULL;   /* the thread's own exit (tcache flush, TSD destructors) follows */
}

Test(threads, detached_threads_overlapping_lifetimes, .timeout = 60)
{
  /* Threads start while others exit: up to 16 alive at a time, 200 in all,
   * each detached, so thread exit (and its tcache flush) races with other
   * threads' allocations and frees of the same blocks. */
  static threads_box_t box;
  static threads_arg_t args[200];
  enum { TOTAL = 200, LIVE = 16 };
  threads_box_init(&box);
  atomic_store(&threads_alive, 0);
  atomic_store(&threads_done, 0);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  for (int i = 0; i < TOTAL; i++) {
    while (atomic_load(&threads_alive) >= LIVE) sched_yield();
    args[i] = (threads_arg_t){ &box, (uint64_t)(i + 7777), 150 };
    atomic_fetch_add(&threads_alive, 1);
    pthread_t t;
    int rc = pthread_create(&t, &attr, threads_detached_body, &args[i]);
    cr_assert_eq(rc, 0, "pthread_create #%d: %d", i, rc);
  }
  while (atomic_load(&threads_done) < TOTAL) sched_yield();
  pthread_attr_destroy(&attr);
  threads_drain(&box);
  cr_expect_eq(atomic_load(&box.corrupt), 0, "%ld blocks were corrupted (or allocation failed)",
               atomic_load(&box.corrupt));
  cr_expect_eq(atomic_load(&box.made), atomic_load(&box.freed), "made %ld blocks, freed %ld",
               atomic_load(&box.made), atomic_load(&box.freed));
}

static void *threads_alloc_only(void *arg)
{
  /* Allocates and returns the blocks to the joiner, which frees them after
   * this thread (and its thread cache) is gone. */
  size_t n = (size_t)(uintptr_t)arg;
  void **v = malloc(n * sizeof *v);
  if (v == NULL) return NULL;
  uint64_t s = n;
  for (size_t i = 0; i < n; i++) {
    v[i] = threads_make(threads_size(&s), i);
    if (v[i] == NULL) { free(v); return NULL; }
  }
  return v;
}

Test(threads, blocks_outlive_the_thread_that_made_them, .timeout = 60)
{
  long corrupt = 0;
  for (int round = 0; round < 100; round++) {
    size_t n = 64 + (size_t)round % 50;
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, threads_alloc_only, (void *)(uintptr_t)n), 0);
    void **v = NULL;
    pthread_join(t, (void **)&v);
    cr_assert_not_null(v, "round %d: the thread's allocations failed", round);
    for (size_t i = 0; i < n; i++) {
      corrupt += threads_check(v[i]);
      free(v[i]);
    }
    free(v);
  }
  cr_expect_eq(corrupt, 0, "%ld blocks changed after their thread exited", corrupt);
}

/* A thread-specific value whose destructor allocates: it runs during
 * thread exit, possibly after the allocator's own per-thread state has
 * been torn down, and re-arms itself so it runs on several passes. */
static pthread_key_t threads_key;
static atomic_long threads_dtor_runs, threads_dtor_bad;

static void threads_key_dtor(void *v)
{
  unsigned char *p = v;
  if (p[0] != 0x3c) atomic_fetch_add(&threads_dtor_bad, 1);
  unsigned char *q = malloc(1000);
  unsigned char *r = calloc(1, 70000);
  if (q == NULL || r == NULL || r[69999] != 0) atomic_fetch_add(&threads_dtor_bad, 1);
  if (q) memset(q, 1, 1000);
  q = realloc(q, 50000);
  free(q);
  free(r);
  long runs = atomic_fetch_add(&threads_dtor_runs, 1);
  if (runs % 2 == 0) {
    /* Armed again: glibc calls the destructor on a later pass with a new block. */
    unsigned char *again = malloc(64);
    if (again) {
      again[0] = 0x3c;
      pthread_setspecific(threads_key, again);
    }
  }
  free(p);
}

static void *threads_with_key(void *arg)
{
  unsigned char *p = malloc(32);
  if (p == NULL) return NULL;
  p[0] = 0x3c;
  pthread_setspecific(threads_key, p);
  uint64_t s = (uint64_t)(uintptr_t)arg;
  for (int i = 0; i < 200; i++) free(threads_make(threads_size(&s), 1));
  return NULL;
}

Test(threads, allocation_in_thread_exit_destructors, .timeout = 60)
{
  cr_assert_eq(pthread_key_create(&threads_key, threads_key_dtor), 0);
  atomic_store(&threads_dtor_runs, 0);
  atomic_store(&threads_dtor_bad, 0);
  enum { N = 200 };
  for (int i = 0; i < N; i += 4) {
    pthread_t t[4];
    for (int k = 0; k < 4; k++)
      cr_assert_eq(pthread_create(&t[k], NULL, threads_with_key, (void *)(uintptr_t)(i + k + 1)), 0);
    for (int k = 0; k < 4; k++) pthread_join(t[k], NULL);
  }
  cr_expect_geq(atomic_load(&threads_dtor_runs), N, "destructors ran %ld times for %d threads",
                atomic_load(&threads_dtor_runs), N);
  cr_expect_eq(atomic_load(&threads_dtor_bad), 0, "%ld bad blocks in destructors", atomic_load(&threads_dtor_bad));
  pthread_key_delete(threads_key);
}

/* Many threads alive at once (more than the allocator's arenas), each
 * holding blocks across a barrier and freeing its neighbour's. */
enum { THREADS_MANY = 128, THREADS_HELD = 16 };
static pthread_barrier_t threads_barrier;
static void *threads_held[THREADS_MANY][THREADS_HELD];
static atomic_long threads_many_bad;
static atomic_long threads_many_unplaced;

static void *threads_many_body(void *arg)
{
  size_t me = (size_t)(uintptr_t)arg;
  uint64_t s = me + 1;
  for (int k = 0; k < THREADS_HELD; k++) {
    threads_held[me][k] = threads_make(threads_size(&s), (uint64_t)me);
    /* Whichever arena jemalloc picked for this thread has the hooks. */
    if (threads_held[me][k] && tier_of(threads_held[me][k]) == TIER_NONE)
      atomic_fetch_add(&threads_many_unplaced, 1);
  }
  pthread_barrier_wait(&threads_barrier);
  size_t other = (me + 1) % THREADS_MANY;
  for (int k = 0; k < THREADS_HELD; k++) {
    threads_hdr_t *h = threads_held[other][k];
    if (h == NULL || threads_check(h)) atomic_fetch_add(&threads_many_bad, 1);
    free(h);
  }
  return NULL;
}

Test(threads, many_threads_at_once_free_each_others_blocks, .timeout = 60)
{
  atomic_store(&threads_many_bad, 0);
  atomic_store(&threads_many_unplaced, 0);
  cr_assert_eq(pthread_barrier_init(&threads_barrier, NULL, THREADS_MANY), 0);
  pthread_t t[THREADS_MANY];
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  for (size_t i = 0; i < THREADS_MANY; i++)
    cr_assert_eq(pthread_create(&t[i], &attr, threads_many_body, (void *)(uintptr_t)i), 0, "thread %zu", i);
  for (size_t i = 0; i < THREADS_MANY; i++) pthread_join(t[i], NULL);
  pthread_attr_destroy(&attr);
  pthread_barrier_destroy(&threads_barrier);
  cr_expect_eq(atomic_load(&threads_many_bad), 0, "%ld blocks missing or corrupted", atomic_load(&threads_many_bad));
  cr_expect_eq(atomic_load(&threads_many_unplaced), 0, "%ld of %d blocks on no tier",
               atomic_load(&threads_many_unplaced), THREADS_MANY * THREADS_HELD);
}

/* Thread churn reuses the memory exited threads left: a new thread neither
 * finds it purged nor purges it, so its pages fault in once, not at every
 * thread. Checked in this process and in a fork child, where jemalloc's
 * background thread (which keeps exiting threads from purging their arena)
 * did not survive the fork and must be started again. */
static void *threads_touch_body(void *arg)
{
  enum { BLOCKS = 64 };
  void *p[BLOCKS];
  for (int i = 0; i < BLOCKS; i++) {
    p[i] = malloc(4096);
    if (p[i]) memset(p[i], i + 1, 4096);
  }
  for (int i = 0; i < BLOCKS; i++) free(p[i]);
  return arg;
}

/* Minor page faults per thread over n threads run one after another, each
 * touching 64 pages of fresh heap blocks. */
static long threads_churn_faults(int n)
{
  struct rusage r0, r1;
  getrusage(RUSAGE_SELF, &r0);
  for (int i = 0; i < n; i++) {
    pthread_t t;
    if (pthread_create(&t, NULL, threads_touch_body, NULL) != 0) return -1;
    pthread_join(t, NULL);
  }
  getrusage(RUSAGE_SELF, &r1);
  return (r1.ru_minflt - r0.ru_minflt) / n;
}

Test(threads, thread_churn_reuses_memory_also_in_a_fork_child, .timeout = 60)
{
  enum { N = 100, MAX_PER_THREAD = 16 };   /* a quarter of the 64 pages each touches */
  threads_churn_faults(10);                 /* warm: the heap and the stack cache */
  long here = threads_churn_faults(N);
  int fd[2];
  cr_assert_eq(pipe(fd), 0);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    threads_churn_faults(10);
    long child = threads_churn_faults(N);
    ssize_t w = write(fd[1], &child, sizeof child);
    _exit(w == (ssize_t)sizeof child ? 0 : 1);
  }
  long child = -1;
  ssize_t r = read(fd[0], &child, sizeof child);
  int status = 0;
  waitpid(pid, &status, 0);
  close(fd[0]);
  close(fd[1]);
  cr_assert(r == (ssize_t)sizeof child && WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child failed");
  cr_expect(here >= 0 && here <= MAX_PER_THREAD, "%ld page faults per thread in this process", here);
  cr_expect(child >= 0 && child <= MAX_PER_THREAD, "%ld page faults per thread in a fork child", child);
}

/* ---- the process ends with its last thread ---------------------------- */

/* glibc ends a process when its last thread ends, also by pthread_exit.
 * A thread the allocator started for itself (jemalloc's background purging,
 * which blocks every signal) must not count as one: it would keep the
 * process alive, unkillable but by SIGKILL, and its parent waiting. */

enum { EXIT_WORKERS = 3 };
static pthread_barrier_t threads_exit_barrier;

/* Threads parked in the parent while it forks. In the child their stacks
 * sit in glibc's stack cache, past its 40 MiB limit, so a background thread
 * that joins another (as jemalloc's do when they are disabled) frees a
 * cached stack's TLS: its first call into the allocator, made while the
 * disabling thread holds jemalloc's ctl lock. They never allocate. */
enum { EXIT_PARKED = 8 };
static int threads_park[2] = { -1, -1 };

static void *threads_parked_body(void *arg)
{
  char c;
  while (read(threads_park[0], &c, 1) < 0 && errno == EINTR) {}
  return arg;
}

/* Threads of this process with the name jemalloc gives its background
 * threads; -1 when /proc cannot be read. */
static int threads_background_count(void)
{
  return threadnames_count("jemalloc_bg_thd");
}

static void *threads_exit_body(void *arg)
{
  uint64_t s = (uintptr_t)arg;
  void *p[64];
  for (int i = 0; i < 64; i++) p[i] = threads_make(threads_size(&s), s);
  pthread_barrier_wait(&threads_exit_barrier);
  usleep(20000);   /* the starting thread leaves first */
  for (int i = 0; i < 64; i++) free(p[i]);
  return NULL;
}

/* The child's one thread grows the heap past 64 MiB instead of starting
 * workers: the background threads then start without a second thread. */
static bool threads_exit_single;

/* In a fork child: workers allocate (or the one thread does), the
 * background thread count goes to fd, and every thread ends by pthread_exit
 * or by returning. */
static void threads_exit_child(int fd)
{
  if (threads_park[0] >= 0) {
    close(threads_park[0]);
    close(threads_park[1]);
  }
  if (threads_exit_single) {
    enum { N = 96 };
    char *p[N];
    for (int i = 0; i < N; i++) {
      p[i] = malloc(1 << 20);
      if (p[i] == NULL) _exit(2);
      memset(p[i], i + 1, 1 << 20);
    }
    for (int i = 0; i < N; i++) free(p[i]);
  } else {
    pthread_barrier_init(&threads_exit_barrier, NULL, EXIT_WORKERS + 1);
    for (uintptr_t i = 0; i < EXIT_WORKERS; i++) {
      pthread_t t;
      if (pthread_create(&t, NULL, threads_exit_body, (void *)(i + 1)) != 0) _exit(2);
      pthread_detach(t);
    }
    pthread_barrier_wait(&threads_exit_barrier);
  }
  /* jemalloc names a background thread in the thread itself, which may not
   * have run yet. */
  int bg = threads_background_count();
  for (int i = 0; i < 200 && bg == 0; i++) {
    usleep(10000);
    bg = threads_background_count();
  }
  if (write(fd, &bg, sizeof bg) != (ssize_t)sizeof bg) _exit(3);
  pthread_exit(NULL);
}

static void *threads_fork_body(void *arg)
{
  int *fd = arg;
  pid_t pid = fork();
  if (pid == 0) threads_exit_child(fd[1]);
  return (void *)(intptr_t)pid;
}

enum threads_fork_from { FORK_FROM_MAIN, FORK_FROM_A_THREAD, FORK_WITH_PARKED_THREADS };

static void threads_last_exit_case(enum threads_fork_from from)
{
  int fd[2];
  cr_assert_eq(pipe(fd), 0);
  pthread_t parked[EXIT_PARKED];
  if (from == FORK_WITH_PARKED_THREADS) {
    cr_assert_eq(pipe(threads_park), 0);
    for (int i = 0; i < EXIT_PARKED; i++)
      cr_assert_eq(pthread_create(&parked[i], NULL, threads_parked_body, NULL), 0);
  }
  pid_t pid;
  if (from == FORK_FROM_A_THREAD) {
    pthread_t t;
    void *ret;
    cr_assert_eq(pthread_create(&t, NULL, threads_fork_body, fd), 0);
    pthread_join(t, &ret);
    pid = (pid_t)(intptr_t)ret;
  } else {
    pid = fork();
    if (pid == 0) threads_exit_child(fd[1]);
  }
  if (from == FORK_WITH_PARKED_THREADS) {
    close(threads_park[1]);
    for (int i = 0; i < EXIT_PARKED; i++) pthread_join(parked[i], NULL);
    close(threads_park[0]);
    threads_park[0] = threads_park[1] = -1;
  }
  cr_assert_gt(pid, 0, "fork failed");
  int bg = -1;
  ssize_t r = read(fd[0], &bg, sizeof bg);
  close(fd[0]);
  close(fd[1]);
  int status = 0;
  pid_t done = 0;
  for (int i = 0; i < 2000 && (done = waitpid(pid, &status, WNOHANG)) == 0; i++) usleep(10000);
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  cr_assert(r == (ssize_t)sizeof bg && bg > 0,
            "the child ran no background thread (%d), so this test shows nothing", bg);
  cr_assert_neq(done, 0, "the child was still alive 20 s after its last thread ended (%d background threads)", bg);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child ended with status %#x", status);
}

Test(threads, process_ends_when_its_last_thread_calls_pthread_exit, .timeout = 60)
{
  threads_last_exit_case(FORK_FROM_MAIN);
}

Test(threads, fork_child_of_a_thread_ends_when_its_last_thread_ends, .timeout = 60)
{
  threads_last_exit_case(FORK_FROM_A_THREAD);
}

/* The background threads that a single thread's heap growth started must
 * not keep the process alive after that thread calls pthread_exit. */
Test(threads, single_thread_with_a_big_heap_ends_when_it_calls_pthread_exit, .timeout = 60)
{
  threads_exit_single = true;
  threads_last_exit_case(FORK_FROM_MAIN);
}

Test(threads, process_ends_when_its_background_threads_free_at_exit, .timeout = 60)
{
  threads_last_exit_case(FORK_WITH_PARKED_THREADS);
}
