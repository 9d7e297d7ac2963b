/*
 * watch: the reclaim thread's sleep, on real inotify and real files in a
 * fresh temporary directory (a cgroup's memory.high is a file written with
 * write(2) too; the VM's reclaim tests see the same wake on cgroup v2, where
 * a lowered memory.high is seen within milliseconds).
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "watch.h"

static char wt_dir[64], wt_high[96], wt_max[96];

static void wt_write(const char *path, const char *text)
{
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
  cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
}

static void wt_setup(void)
{
  strcpy(wt_dir, "/tmp/tm-watch-XXXXXX");
  cr_assert_not_null(mkdtemp(wt_dir));
  snprintf(wt_high, sizeof wt_high, "%s/memory.high", wt_dir);
  snprintf(wt_max, sizeof wt_max, "%s/memory.max", wt_dir);
  wt_write(wt_high, "max\n");
  wt_write(wt_max, "max\n");
}

static void wt_teardown(void)
{
  tm_watch_stop();
  unlink(wt_high);
  unlink(wt_max);
  rmdir(wt_dir);
}

TestSuite(watch, .init = wt_setup, .fini = wt_teardown);

static double wt_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void wt_start(void)
{
  cr_assert(tm_watch_start());
  const char *const files[] = { wt_high, wt_max };
  cr_assert(tm_watch_files(files, 2));
}

Test(watch, sleeps_the_whole_time_when_nothing_is_written)
{
  wt_start();
  double t0 = wt_now();
  cr_expect_eq(tm_watch_wait(100 * 1000 * 1000), 0);
  cr_expect_geq(wt_now() - t0, 0.09, "woke after %.3f s", wt_now() - t0);
}

Test(watch, a_write_to_a_watched_file_wakes_it_and_is_consumed)
{
  wt_start();
  wt_write(wt_max, "104857600\n");
  double t0 = wt_now();
  cr_expect_eq(tm_watch_wait(10ull * 1000 * 1000 * 1000), 1);
  cr_expect_lt(wt_now() - t0, 1.0, "woke after %.3f s", wt_now() - t0);
  cr_expect_eq(tm_watch_wait(50 * 1000 * 1000), 0, "the event was consumed");
}

Test(watch, a_file_no_longer_watched_does_not_wake_it)
{
  wt_start();
  const char *const only[] = { wt_high };
  cr_assert(tm_watch_files(only, 1));
  tm_watch_wait(50 * 1000 * 1000);   /* the dropped watch's own event */
  wt_write(wt_max, "1\n");
  cr_expect_eq(tm_watch_wait(100 * 1000 * 1000), 0);
}

static void *wt_kicker(void *arg)
{
  (void)arg;
  struct timespec ts = { 0, 100 * 1000 * 1000 };
  nanosleep(&ts, NULL);
  tm_watch_kick();
  return NULL;
}

Test(watch, a_kick_from_another_thread_wakes_it_and_can_come_again)
{
  wt_start();
  for (int round = 0; round < 2; round++) {
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, wt_kicker, NULL), 0);
    double t0 = wt_now();
    cr_expect_eq(tm_watch_wait(10ull * 1000 * 1000 * 1000), 1, "round %d", round);
    cr_expect_lt(wt_now() - t0, 2.0, "round %d: woke after %.3f s", round, wt_now() - t0);
    pthread_join(t, NULL);
  }
}

/* The program closed the descriptor and reused its number for a pipe with
 * data in it: the watch neither reads it nor closes it. */
Test(watch, a_descriptor_the_program_reused_is_never_read_nor_closed)
{
  wt_start();
  int fds[2];
  cr_assert_eq(pipe(fds), 0);
  int ours = -1;
  for (int fd = 3; fd < 64 && ours < 0; fd++) {
    char link[64], target[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n > 0) {
      target[n] = '\0';
      if (strstr(target, "inotify")) ours = fd;
    }
  }
  cr_assert_geq(ours, 0, "no inotify descriptor found");
  cr_assert_eq(dup2(fds[0], ours), ours);
  cr_assert_eq(write(fds[1], "data", 4), 4);
  cr_expect_eq(tm_watch_wait(1000 * 1000 * 1000), -1);
  cr_expect(!tm_watch_active());
  tm_watch_stop();
  tm_watch_kick();
  char buf[8] = "";
  cr_expect_eq(read(ours, buf, sizeof buf), 4, "the program's data was taken");
  cr_expect_eq(memcmp(buf, "data", 4), 0);
}
