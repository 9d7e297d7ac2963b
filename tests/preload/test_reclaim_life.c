/* tiermalloc's thread keeps the lessons of jemalloc's background threads:
 * it never keeps a process alive, it comes back in a fork child, a signal
 * still ends the process, and exit() with threads allocating still exits.
 * Each is run twice: with a one-tier budget (one node here), where it is
 * the reclaim thread, paging out with no swap: it measures every pass and
 * moves nothing; and without a budget, where it only publishes the live
 * record (tiermalloc_pub). The same lifecycle while it moves pages is in
 * tests/vm/test_reclaim.c. */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "spawn.h"

#define LIFE_LIB "build/libtiermalloc.so"

/* budget: a one-tier high that makes the thread reclaim; else none, and
 * the thread only publishes (into /tmp). */
static spawn_result_t life_run_as(const char *mode, const char *arg, bool budget)
{
  char lib[PATH_MAX], prog[PATH_MAX], pre[PATH_MAX + 16];
  cr_assert_not_null(realpath(LIFE_LIB, lib), "make builds %s", LIFE_LIB);
  cr_assert_not_null(realpath("build/tests/progs/reclaim_life", prog));
  snprintf(pre, sizeof pre, "LD_PRELOAD=%s", lib);
  char *argv[] = { prog, (char *)mode, (char *)arg, NULL };
  char *env_rcl[] = { pre, "TIERMALLOC_TOPTIER_HIGH=8M", "TIERMALLOC_RECLAIM_PERIOD_MIN_MS=10",
                      "TIERMALLOC_RECLAIM_PERIOD_MAX_MS=20", NULL };
  char *env_pub[] = { pre, "RECLAIM_LIFE_THREAD=tiermalloc_pub", "TIERMALLOC_LIVE_DIR=/tmp", NULL };
  return spawn_run(argv, budget ? env_rcl : env_pub, NULL, 30);
}


static void life_expect_ended(const spawn_result_t *r)
{
  char st[128];
  cr_assert_eq(r->err, 0);
  cr_assert(!r->timed_out, "still running after 30 s: %s", r->out);
  cr_expect(WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0, "%s; %s",
            spawn_status_str(r, st, sizeof st), r->errout);
  cr_assert(strstr(r->out, "reclaim=1\n") != NULL, "tiermalloc's thread never ran: %s", r->out);
}

/* Runs mode (with arg), with or without a budget; the process ended on its
 * own, the thread ran, and its result line is `want` (NULL: none). */
static void life_check(const char *mode, const char *arg, bool budget, const char *want)
{
  spawn_result_t r = life_run_as(mode, arg, budget);
  life_expect_ended(&r);
  if (want) cr_expect(strstr(r.out, want) != NULL, "%s", r.out);
  spawn_free(&r);
}

Test(reclaim_life, process_ends_when_every_thread_calls_pthread_exit, .timeout = 60)
{
  life_check("pthread-exit", NULL, true, NULL);
}

Test(reclaim_life, fork_children_get_their_own_reclaim_thread, .timeout = 90)
{
  life_check("fork", "20", true, "forks=20 ok=20 intact=1\n");
}

Test(reclaim_life, sigterm_ends_a_process_with_reclaim_running, .timeout = 60)
{
  life_check("sigterm", NULL, true, "child_reclaim=1 term=ok\n");
}

Test(reclaim_life, exit_while_threads_allocate, .timeout = 60)
{
  life_check("exit", NULL, true, "exiting\n");
}

/* The same four without a budget: the thread only publishes the record. */
Test(reclaim_life, publishing_thread_ends_when_every_thread_calls_pthread_exit, .timeout = 60)
{
  life_check("pthread-exit", NULL, false, NULL);
}

Test(reclaim_life, fork_children_get_their_own_publishing_thread, .timeout = 90)
{
  life_check("fork", "20", false, "forks=20 ok=20 intact=1\n");
}

Test(reclaim_life, sigterm_ends_a_process_with_the_publishing_thread, .timeout = 60)
{
  life_check("sigterm", NULL, false, "child_reclaim=1 term=ok\n");
}

Test(reclaim_life, exit_while_threads_allocate_with_the_publishing_thread, .timeout = 60)
{
  life_check("exit", NULL, false, "exiting\n");
}
