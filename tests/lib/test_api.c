/* The tier_* API and the accounting, through the real library (this test
 * binary runs on tiermalloc's malloc). On a one-node host there is one tier;
 * the two-tier placement is asserted for real in tests/vm. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "statsbuf.h"
#include "tiermalloc.h"

static tier_stats_t api_stats(void)
{
  tier_stats_t s;
  cr_assert_eq(tier_stats_get(&s, sizeof s), 0);
  return s;
}

static uint64_t api_sum(const tier_stats_t *s, size_t off)
{
  uint64_t v = 0;
  for (unsigned t = 0; t < s->ntiers; t++) v += *(const uint64_t *)((const char *)&s->tier[t] + off);
  return v;
}
#define API_SUM(s, field) api_sum(&(s), offsetof(tier_stats_tier_t, field))

Test(api, count_and_owner)
{
  int n = tier_count();
  cr_assert_geq(n, 1);
  int on_stack;
  cr_expect_eq(tier_of(&on_stack), TIER_NONE);
  cr_expect_eq(tier_of(NULL), TIER_NONE);
  size_t sizes[] = { 1, 16, 3000, 70000, 3 << 20, 64 << 20 };
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    void *p = malloc(sizes[i]);
    cr_assert_not_null(p);
    cr_expect_eq(tier_of(p), 0, "malloc(%zu) goes to the top tier", sizes[i]);
    free(p);
  }
}

Test(api, tier_malloc_places_and_checks_its_arguments)
{
  for (int t = 0; t < tier_count(); t++) {
    void *p = tier_malloc(4096, t);
    cr_assert_not_null(p);
    cr_expect_eq(tier_of(p), t);
    memset(p, 0x5a, 4096);
    tier_free(p);
  }
  void *a = tier_malloc(0, 0), *b = tier_malloc(0, 0);
  cr_expect(a && b && a != b, "tier_malloc(0) is unique");
  tier_free(a);
  tier_free(b);
  errno = 0;
  cr_expect_null(tier_malloc(16, tier_count()));
  cr_expect_eq(errno, EINVAL);
  errno = 0;
  cr_expect_null(tier_malloc(16, -1));
  cr_expect_eq(errno, EINVAL);
  errno = 0;
  cr_expect_null(tier_malloc(SIZE_MAX / 2, 0));
  cr_expect_eq(errno, ENOMEM);
  tier_free(NULL);
  void *m = malloc(100);
  tier_free(m);   /* any tiermalloc pointer */
  void *t = tier_malloc(100, 0);
  free(t);        /* and the other way round */
}

Test(api, stats_get_checks_its_arguments)
{
  tier_stats_t s;
  cr_expect_eq(tier_stats_get(NULL, sizeof s), EINVAL);
  cr_expect_eq(tier_stats_get(&s, 4), EINVAL);
  /* A caller built against an older, shorter struct gets its part only. */
  size_t old = offsetof(tier_stats_t, tier) + sizeof(tier_stats_tier_t);
  memset(&s, 0xee, sizeof s);
  cr_expect_eq(tier_stats_get(&s, old), 0);
  cr_expect_eq(s.version, TIER_STATS_VERSION);
  cr_expect_eq(s.tier[1].capacity, 0xeeeeeeeeeeeeeeeeull, "nothing past the given size is written");
  cr_expect_eq(tier_stats_print(NULL, NULL, TIER_STATS_TEXT), EINVAL);
}

/* The kernel's NUMA balancing as the stats say it: the mode in
 * /proc/sys/kernel/numa_balancing now, the policies this kernel lets allow
 * it (probed here again with mbind, as the library did at start-up), and a
 * heap NUMA balancing does not scan (its policies). */
Test(api, stats_say_what_numa_balancing_does)
{
  tier_stats_t s = api_stats();
  char buf[16] = "";
  int fd = open("/proc/sys/kernel/numa_balancing", O_RDONLY);
  int mode = -1;
  if (fd >= 0) {
    if (read(fd, buf, sizeof buf - 1) > 0) mode = atoi(buf);
    close(fd);
  }
  cr_expect_eq(s.numa_balancing, mode, "/proc/sys/kernel/numa_balancing says %s", buf);
  long page = sysconf(_SC_PAGESIZE);
  void *p = mmap(NULL, (size_t)page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  cr_assert_neq(p, MAP_FAILED);
  unsigned long node0[TIER_NODE_WORDS + 1] = { 1 };
  unsigned want = 0;
  if (syscall(SYS_mbind, p, page, 2 /* MPOL_BIND */ | (1 << 13), node0, TIER_MAX_NODES + 1, 0) == 0) want |= 1;
  if (syscall(SYS_mbind, p, page, 5 /* MPOL_PREFERRED_MANY */ | (1 << 13), node0, TIER_MAX_NODES + 1, 0) == 0)
    want |= 2;
  munmap(p, (size_t)page);
  cr_expect_eq(s.numa_balancing_policies, want, "probed here: %u", want);
  cr_expect_eq(s.numa_balancing_heap, 0);
}

Test(api, stats_invariants_hold)
{
  void *keep = malloc(10 << 20);
  memset(keep, 1, 10 << 20);
  tier_stats_t s = api_stats();
  cr_expect_eq(s.version, TIER_STATS_VERSION);
  cr_expect_eq((int)s.ntiers, tier_count());
  for (unsigned t = 0; t < s.ntiers; t++) {
    cr_expect_leq(s.tier[t].allocated, s.tier[t].committed, "tier %u", t);
    cr_expect_leq(s.tier[t].committed, s.tier[t].mapped, "tier %u", t);
    cr_expect_gt(s.tier[t].capacity, 0);
  }
  cr_expect_leq(API_SUM(s, resident), API_SUM(s, committed));
  free(keep);
}

Test(api, allocated_and_resident_follow_a_64M_heap)
{
  tier_stats_t before = api_stats();
  enum { N = 64, SZ = 1 << 20 };
  char *p[N];
  for (int i = 0; i < N; i++) {
    p[i] = malloc(SZ);
    cr_assert_not_null(p[i]);
    for (int j = 0; j < SZ; j += 4096) p[i][j] = (char)(i + j);
  }
  tier_stats_t during = api_stats();
  cr_expect_geq(API_SUM(during, allocated) - API_SUM(before, allocated), (uint64_t)N * SZ);
  cr_expect_leq(API_SUM(during, allocated) - API_SUM(before, allocated), (uint64_t)N * SZ * 11 / 10);
  cr_expect_geq(API_SUM(during, resident), (uint64_t)N * SZ, "touched pages are resident");
  for (int i = 0; i < N; i++) free(p[i]);
  tier_stats_t after = api_stats();
  cr_expect_leq(API_SUM(after, allocated), API_SUM(before, allocated) + (1 << 20),
                "freeing gives the bytes back");
}

static void *api_alloc_thread(void *arg)
{
  void **slots = arg;
  for (int i = 0; i < 256; i++) slots[i] = malloc(40000);
  return NULL;
}

Test(api, allocated_is_exact_across_threads)
{
  static void *slots[256];
  tier_stats_t before = api_stats();
  pthread_t th;
  pthread_create(&th, NULL, api_alloc_thread, slots);
  pthread_join(th, NULL);   /* the allocating thread has exited */
  tier_stats_t mid = api_stats();
  cr_expect_geq(API_SUM(mid, allocated) - API_SUM(before, allocated), 256u * 40000);
  for (int i = 0; i < 256; i++) free(slots[i]);   /* freed by another thread */
  tier_stats_t after = api_stats();
  cr_expect_leq(API_SUM(after, allocated), API_SUM(before, allocated) + 65536);
}


Test(api, stats_print_text_and_json)
{
  statsbuf_t b = { .n = 0 };
  cr_assert_eq(tier_stats_print(statsbuf_write, &b, TIER_STATS_JSON), 0);
  cr_expect(b.s[0] == '{' && strcmp(b.s + b.n - 2, "}\n") == 0, "%s", b.s);
  /* A byte figure's key carries its unit. */
#define X(name, unit, doc)                                                                         \
  cr_expect(strstr(b.s, strncmp(#unit, "bytes", 5) ? "\"" #name "\":" : "\"" #name "_bytes\":") != NULL, \
            "json lacks " #name);
  TIER_STATS_TIER_FIELDS(X)
  TIER_STATS_GLOBAL_FIELDS(X)
  TIER_STATS_RECLAIM_FIELDS(X)
  TIER_STATS_SITE_FIELDS(X)
  TIER_STATS_HANDED_FIELDS(X)
#undef X
#define X(name, unit, doc) cr_expect(strstr(b.s, "\"" #name "\":") != NULL, "json lacks budget " #name);
  TIER_STATS_BUDGET_FIELDS(X)
#undef X
  char pid[32];
  snprintf(pid, sizeof pid, "\"pid\":%d,", (int)getpid());
  cr_expect(strstr(b.s, pid) != NULL, "%s", b.s);
  b.n = 0;
  cr_assert_eq(tier_stats_print(statsbuf_write, &b, TIER_STATS_TEXT), 0);
  cr_expect(strncmp(b.s, "tiermalloc: ", 12) == 0, "%s", b.s);
  b.n = 0;
  cr_assert_eq(tier_stats_print(statsbuf_write, &b, TIER_STATS_PROM), 0);
  snprintf(pid, sizeof pid, "{pid=\"%d\",", (int)getpid());
  cr_expect(strstr(b.s, "# TYPE tiermalloc_tier_resident_bytes gauge\ntiermalloc_tier_resident_bytes") != NULL,
            "%s", b.s);
  cr_expect(strstr(b.s, pid) != NULL, "%s", b.s);
  cr_expect_eq(tier_stats_print(statsbuf_write, &b, (tier_stats_format_t)3), EINVAL);
}

/* tier_stats_publish writes the process's live record now: the record is
 * this process's, mode 0600, and says who published. Another publisher may
 * write between the call and the read (tiermalloc's thread publishes at once
 * when it starts, on the first commit after start-up, which the test
 * framework's own messages can make), so the record is read right after each
 * of up to five calls, and one of them must say DEMAND. */
Test(api, stats_publish_writes_the_live_record)
{
  char path[64];
  snprintf(path, sizeof path, "/dev/shm/tiermalloc.%d", (int)getpid());
  struct stat st;
  if (stat("/dev/shm", &st) != 0) cr_skip_test("no /dev/shm here: the record has nowhere to go");
  static tier_live_t r;
  int err = 0, tries = 0;
  ssize_t got = 0;
  do {
    err = tier_stats_publish();
    int fd = open(path, O_RDONLY);
    got = fd < 0 ? -1 : pread(fd, &r, sizeof r, 0);
    if (fd >= 0) close(fd);
  } while (err == 0 && got == (ssize_t)sizeof r && r.publisher != TIER_LIVE_DEMAND && ++tries < 5);
  cr_assert_eq(err, 0);
  cr_assert_eq(stat(path, &st), 0, "no %s", path);
  cr_expect_eq(st.st_mode & 0777, 0600);
  cr_assert_eq(got, (ssize_t)sizeof r);
  cr_expect_eq(r.magic, TIER_LIVE_MAGIC);
  cr_expect_eq(r.pid, (uint32_t)getpid());
  cr_expect_eq(r.publisher, TIER_LIVE_DEMAND, "publisher %u after %d calls", r.publisher, tries + 1);
  cr_expect_eq(r.seq % 2, 0);
  cr_expect_eq(r.stats.version, TIER_STATS_VERSION);
}

/* Hints and pins keep the error convention: an int errno, errno untouched.
 * With no min for tier 0 (nothing set here), every pin is refused. */
Test(api, hints_and_pins_check_their_arguments)
{
  void *p = malloc(4 << 20);
  cr_assert_not_null(p);
  memset(p, 1, 4 << 20);
  int local = 0;
  errno = 0;
  cr_expect_eq(tier_hint(p, 4 << 20, TIER_HINT_COLD), 0);
  cr_expect_eq(tier_hint(p, 4 << 20, TIER_HINT_HOT), 0);
  cr_expect_eq(tier_hint(p, 4 << 20, 7), EINVAL);
  cr_expect_eq(tier_hint(&local, sizeof local, TIER_HINT_HOT), EINVAL);
  cr_expect_eq(tier_hint(p, 0, TIER_HINT_HOT), EINVAL);
  cr_expect_eq(tier_pin(p, 4 << 20), ENOSPC, "tier 0's min is 0");
  cr_expect_eq(tier_pin(&local, sizeof local), EINVAL);
  cr_expect_eq(tier_unpin(p, 4 << 20), 0);
  cr_expect_eq(errno, 0);
  free(p);
}

/* Forks 40 times while `loop` runs in another thread; each child runs
 * `child` under a 10 s alarm and must exit 0: it never hangs on a lock the
 * parent's other thread held at the fork (fork.c's handlers). */
static atomic_bool api_loop_stop;

static void api_forks_during(void *(*loop)(void *), int (*child)(void *), void *arg)
{
  atomic_store(&api_loop_stop, false);
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, loop, arg), 0);
  for (int f = 0; f < 40; f++) {
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
      alarm(10);   /* a child stuck on the lock dies, and never outlives the test */
      _exit(child(arg));
    }
    int status = 0;
    pid_t done = 0;
    for (int i = 0; i < 500 && (done = waitpid(pid, &status, WNOHANG)) == 0; i++) usleep(10000);
    if (done == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
    }
    cr_expect(done == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0, "fork %d: child status %#x%s", f,
              status, done == 0 ? " (hung)" : "");
  }
  atomic_store(&api_loop_stop, true);
  pthread_join(th, NULL);
}

/* The pins' lock (fork.c takes it first): a thread pins and unpins in a
 * loop; each child pins itself. */
static void *api_pin_loop(void *p)
{
  while (!atomic_load(&api_loop_stop)) {
    tier_pin(p, 4096);
    tier_unpin(p, 4096);
  }
  return NULL;
}

static int api_pin_child(void *p)
{
  return tier_unpin(p, 4096) == 0 && tier_pin(p, 4096) == ENOSPC ? 0 : 1;
}

Test(api, a_fork_while_another_thread_pins_leaves_the_child_free_to_pin, .timeout = 60)
{
  void *p = malloc(1 << 20);
  cr_assert_not_null(p);
  api_forks_during(api_pin_loop, api_pin_child, p);
  free(p);
}

/* The allocation sites' lock (site.c; the stats take it to count the
 * sites): a thread reads the stats in a loop; each child reads them too. */
static void *api_stats_loop(void *arg)
{
  tier_stats_t s;
  while (!atomic_load(&api_loop_stop)) tier_stats_get(&s, sizeof s);
  return arg;
}

static int api_stats_child(void *arg)
{
  tier_stats_t s;
  return tier_stats_get(&s, sizeof s) == 0 && s.version == TIER_STATS_VERSION ? 0 : 1;
}

Test(api, a_fork_while_another_thread_reads_the_stats_leaves_the_child_free_to_read_them, .timeout = 60)
{
  api_forks_during(api_stats_loop, api_stats_child, NULL);
}
