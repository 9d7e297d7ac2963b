/* tierctl against real processes running tiermalloc (preloaded), through
 * their live records in a directory of the test's own: what it reports
 * agrees with the kernel, each error is one line and a non-zero exit, and a
 * record lives exactly as long as its process. Here there is one node (one
 * tier); tier figures across a budget change are checked in the VM
 * (tests/vm/test_live.c). */
#include <criterion/criterion.h>
#include <stdbool.h>
#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "png.h"
#include "tiermalloc.h"
#include "spawn.h"
#include "threadnames.h"

#define TC_LIB "build/libtiermalloc.so"
#define TC_TIERCTL "build/tierctl"

static char tc_dir[64];
static char tc_dir_env[128];

static void tc_setup(void)
{
  snprintf(tc_dir, sizeof tc_dir, "/tmp/tierctl-test.XXXXXX");
  cr_assert_not_null(mkdtemp(tc_dir));
  snprintf(tc_dir_env, sizeof tc_dir_env, "TIERMALLOC_LIVE_DIR=%s", tc_dir);
}

static void tc_teardown(void)
{
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tc_dir);
  if (system(cmd) != 0) cr_log_warn("could not remove %s", tc_dir);
}

static void tc_sleep_ms(long ms)
{
  struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
  nanosleep(&ts, NULL);
}

/* Starts live_hold (MIB, SECONDS, mode) preloaded, publishing into tc_dir,
 * as user `as` (NULL: this one; else through setpriv); returns its pid once
 * it has written its ready file. */
static pid_t tc_start_as(long mib, int secs, const char *mode, const char *extra_env, const char *as)
{
  char lib[PATH_MAX], prog[PATH_MAX], ready[128], mibs[16], secs_s[16], setpriv[PATH_MAX], reuid[64];
  cr_assert_not_null(realpath(TC_LIB, lib), "make builds %s", TC_LIB);
  cr_assert_not_null(realpath("build/tests/progs/live_hold", prog));
  if (as) cr_assert_not_null(spawn_which("setpriv", setpriv, sizeof setpriv));
  snprintf(reuid, sizeof reuid, "--reuid=%s", as ? as : "");
  snprintf(ready, sizeof ready, "%s/ready", tc_dir);
  unlink(ready);
  snprintf(mibs, sizeof mibs, "%ld", mib);
  snprintf(secs_s, sizeof secs_s, "%d", secs);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    setenv("LD_PRELOAD", lib, 1);
    setenv("TIERMALLOC_LIVE_DIR", tc_dir, 1);
    if (extra_env) putenv((char *)extra_env);
    if (as)
      execl(setpriv, setpriv, reuid, "--regid=nogroup", "--clear-groups", prog, mibs, secs_s, ready, mode,
            (char *)NULL);
    else
      execl(prog, prog, mibs, secs_s, ready, mode, (char *)NULL);
    _exit(127);
  }
  for (int i = 0; i < 1000 && access(ready, F_OK) != 0; i++) tc_sleep_ms(10);
  cr_assert_eq(access(ready, F_OK), 0, "live_hold never got ready");
  return pid;
}

static pid_t tc_start(long mib, int secs, const char *mode, const char *extra_env)
{
  return tc_start_as(mib, secs, mode, extra_env, NULL);
}

static void tc_stop(pid_t pid)
{
  kill(pid, SIGTERM);
  waitpid(pid, NULL, 0);
}

/* Runs tierctl with args (NULL-terminated) and the test's directory. */
static spawn_result_t tc_tierctl(const char *const *args)
{
  char path[PATH_MAX];
  cr_assert_not_null(realpath(TC_TIERCTL, path), "make builds %s", TC_TIERCTL);
  char *argv[16] = { path };
  int n = 1;
  for (; args[n - 1] && n < 15; n++) argv[n] = (char *)args[n - 1];
  argv[n] = NULL;
  char *env[] = { tc_dir_env, NULL };
  spawn_result_t r = spawn_run(argv, env, NULL, 60);
  cr_assert_eq(r.err, 0);
  cr_assert(!r.timed_out, "tierctl timed out");
  return r;
}

static int tc_exit(const spawn_result_t *r)
{
  return WIFEXITED(r->status) ? WEXITSTATUS(r->status) : -1;
}

/* One line on stderr, "tierctl: ..." containing want, nothing on stdout,
 * exit status 1. */
static void tc_expect_error(const spawn_result_t *r, const char *want)
{
  cr_expect_eq(tc_exit(r), 1, "exit status; stderr: %s", r->errout);
  cr_expect(strncmp(r->errout, "tierctl: ", 9) == 0 && strchr(r->errout, '\n') == r->errout + r->err_len - 1,
            "one line: \"%s\"", r->errout);
  cr_expect(strstr(r->errout, want) != NULL, "\"%s\" lacks \"%s\"", r->errout, want);
  cr_expect_eq(r->out_len, 0, "stdout: %s", r->out);
}

static long long tc_json_num(const char *json, const char *key)
{
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(json, pat);
  return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

/* Bytes the kernel says are on node 0 in the process's anonymous mappings. */
static long long tc_numa_maps_anon(pid_t pid)
{
  char path[64], line[8192];
  snprintf(path, sizeof path, "/proc/%d/numa_maps", (int)pid);
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f);
  long long bytes = 0;
  while (fgets(line, sizeof line, f)) {
    if (!strstr(line, " anon=")) continue;
    const char *n0 = strstr(line, " N0="), *kp = strstr(line, " kernelpagesize_kB=");
    if (n0 && kp) bytes += atoll(n0 + 4) * atoll(kp + 19) * 1024;
  }
  fclose(f);
  return bytes;
}

/* A JSON string value ("key":"value") into buf; "" when absent. */
static const char *tc_json_str(const char *json, const char *key, char *buf, size_t size)
{
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":\"", key);
  const char *p = strstr(json, pat);
  buf[0] = '\0';
  if (p) {
    p += strlen(pat);
    size_t n = strcspn(p, "\"");
    snprintf(buf, size, "%.*s", (int)(n < size ? n : size - 1), p);
  }
  return buf;
}

/* The value of a Prometheus sample whose line starts with `head` (metric
 * and labels up to the value); -1 when absent. */
static double tc_prom_value(const char *text, const char *head)
{
  for (const char *p = text; (p = strstr(p, head)) != NULL; p++)
    if (p == text || p[-1] == '\n') return strtod(p + strlen(head), NULL);
  return -1;
}

/* The TIER0 NOW column of pid's line in tierctl ps or top, in bytes; -1
 * when the process is not listed. */
static double tc_ps_tier0(const char *text, pid_t pid)
{
  char want[32];
  snprintf(want, sizeof want, "\n%-7d ", (int)pid);
  const char *p = strstr(text, want);
  if (!p) return -1;
  char cmd[32], unit[8];
  double v;
  if (sscanf(p + 1, "%*d %31s %lf %7s", cmd, &v, unit) != 3) return -1;
  return strcmp(unit, "GiB") == 0 ? v * 1073741824.0 : strcmp(unit, "MiB") == 0 ? v * 1048576.0
       : strcmp(unit, "KiB") == 0 ? v * 1024.0 : v;
}

static bool tc_within_5_percent(double said, long long kernel)
{
  return fabs(said - (double)kernel) <= (double)kernel / 20;
}

TestSuite(tierctl, .init = tc_setup, .fini = tc_teardown, .timeout = 120);

/* Issue 30: a program that allocates 64 MiB in 1 MiB blocks, writes them
 * and then calls the allocator no more, with no budget (no reclaim): 3 s
 * later every form of tierctl shows its resident bytes within 5 % of what
 * the kernel says (numa_maps), and its own figures (allocated) as of at most
 * two publishing intervals ago; 20 processes, each checked. */
Test(tierctl, every_form_is_fresh_for_a_process_that_stopped_allocating, .timeout = 240)
{
  enum { N = 20 };
  pid_t pid[N];
  for (int k = 0; k < N; k++) pid[k] = tc_start(64, 60, "", NULL);
  tc_sleep_ms(3000);
  spawn_result_t ps = tc_tierctl((const char *[]){ "ps", NULL });
  spawn_result_t top = tc_tierctl((const char *[]){ "top", "-n", "1", NULL });
  spawn_result_t prom = tc_tierctl((const char *[]){ "status", "--prom", NULL });
  cr_assert_eq(tc_exit(&ps) | tc_exit(&top) | tc_exit(&prom), 0, "%s%s%s", ps.errout, top.errout, prom.errout);
  for (int k = 0; k < N; k++) {
    char pids[16], head[160], by[32];
    snprintf(pids, sizeof pids, "%d", (int)pid[k]);
    spawn_result_t r = tc_tierctl((const char *[]){ "status", pids, "--json", NULL });
    cr_assert_eq(tc_exit(&r), 0, "%s", r.errout);
    long long kernel = tc_numa_maps_anon(pid[k]);
    cr_expect_geq(kernel, 64ll << 20, "process %d: numa_maps says %lld bytes", (int)pid[k], kernel);
    long long resident = tc_json_num(r.out, "resident_bytes");
    cr_expect(tc_within_5_percent((double)resident, kernel), "process %d: --json %lld, numa_maps %lld",
              (int)pid[k], resident, kernel);
    cr_expect_geq(tc_json_num(r.out, "allocated_bytes"), 64ll << 20, "process %d: %s", (int)pid[k], r.out);
    cr_expect_str_eq(tc_json_str(r.out, "resident_by", by, sizeof by), "tierctl");
    cr_expect_str_eq(tc_json_str(r.out, "publisher", by, sizeof by), "thread", "%s", r.out);
    cr_expect_eq(tc_json_num(r.out, "publish_interval_ns"), 100000000ll);
    cr_expect_leq(tc_json_num(r.out, "published_age_ns"), 200000000ll + 100000000ll,
                  "process %d: its figures are older than two intervals: %s", (int)pid[k], r.out);
    spawn_free(&r);
    r = tc_tierctl((const char *[]){ "status", pids, "--prom", NULL });
    cr_assert_eq(tc_exit(&r), 0, "%s", r.errout);
    snprintf(head, sizeof head, "tiermalloc_tier_resident_bytes{pid=\"%d\",command=\"live_hold\",tier=\"0\",nodes=\"0\"} ",
             (int)pid[k]);
    cr_expect(tc_within_5_percent(tc_prom_value(r.out, head), kernel), "process %d: --prom %.0f, numa_maps %lld",
              (int)pid[k], tc_prom_value(r.out, head), kernel);
    cr_expect(tc_within_5_percent(tc_prom_value(prom.out, head), kernel),
              "process %d: status --prom (all) %.0f, numa_maps %lld", (int)pid[k], tc_prom_value(prom.out, head),
              kernel);
    snprintf(head, sizeof head, "tiermalloc_record_age_seconds{pid=\"%d\",command=\"live_hold\"} ", (int)pid[k]);
    double age = tc_prom_value(r.out, head);
    cr_expect(age >= 0 && age <= 0.3, "process %d: record age %.3f s in --prom", (int)pid[k], age);
    snprintf(head, sizeof head, "tiermalloc_resident_age_seconds{pid=\"%d\",command=\"live_hold\"} ", (int)pid[k]);
    cr_expect_eq(tc_prom_value(r.out, head), 0.0, "resident measured at the read");
    spawn_free(&r);
    cr_expect(tc_within_5_percent(tc_ps_tier0(ps.out, pid[k]), kernel), "process %d: ps %.0f, numa_maps %lld\n%s",
              (int)pid[k], tc_ps_tier0(ps.out, pid[k]), kernel, ps.out);
    cr_expect(tc_within_5_percent(tc_ps_tier0(top.out, pid[k]), kernel), "process %d: top %.0f, numa_maps %lld",
              (int)pid[k], tc_ps_tier0(top.out, pid[k]), kernel);
  }
  spawn_free(&ps);
  spawn_free(&top);
  spawn_free(&prom);
  for (int k = 0; k < N; k++) tc_stop(pid[k]);
}

/* A stopped process publishes nothing: every form says how old its own
 * figures are (and the text that they are late), while resident is still
 * measured now; once it runs again its thread brings them up to date. */
Test(tierctl, a_stopped_process_says_its_figures_are_late)
{
  pid_t pid = tc_start(16, 30, "", NULL);
  char pids[16], head[128];
  snprintf(pids, sizeof pids, "%d", (int)pid);
  kill(pid, SIGSTOP);
  tc_sleep_ms(1500);
  spawn_result_t r = tc_tierctl((const char *[]){ "status", pids, NULL });
  cr_assert_eq(tc_exit(&r), 0, "%s", r.errout);
  cr_expect(strstr(r.out, "; late (the process is stopped?): its own figures are as of then; "
                          "resident measured now by tierctl\n") != NULL, "%s", r.out);
  spawn_free(&r);
  r = tc_tierctl((const char *[]){ "status", pids, "--json", NULL });
  cr_expect_geq(tc_json_num(r.out, "published_age_ns"), 1000000000ll, "%s", r.out);
  cr_expect_eq(tc_json_num(r.out, "resident_age_ns"), 0, "%s", r.out);
  long long kernel = tc_numa_maps_anon(pid);
  cr_expect(tc_within_5_percent((double)tc_json_num(r.out, "resident_bytes"), kernel), "%s", r.out);
  spawn_free(&r);
  r = tc_tierctl((const char *[]){ "status", pids, "--prom", NULL });
  snprintf(head, sizeof head, "tiermalloc_record_age_seconds{pid=\"%d\",command=\"live_hold\"} ", (int)pid);
  cr_expect_geq(tc_prom_value(r.out, head), 1.0, "%s", r.out);
  spawn_free(&r);
  kill(pid, SIGCONT);
  tc_sleep_ms(500);
  r = tc_tierctl((const char *[]){ "status", pids, "--json", NULL });
  cr_expect_leq(tc_json_num(r.out, "published_age_ns"), 300000000ll, "running again: %s", r.out);
  spawn_free(&r);
  tc_stop(pid);
}

/* A process whose numa_maps tierctl may not read (one that made itself not
 * dumpable, as setuid programs are, read by its own user): tierctl shows
 * the record's resident figure as the process measured it, and how old that
 * is, in every form; it measures nothing it cannot see. */
Test(tierctl, an_unreadable_numa_maps_gives_the_records_figure_and_its_age)
{
  char setpriv[PATH_MAX], tierctl[PATH_MAX];
  if (geteuid() != 0 || spawn_which("setpriv", setpriv, sizeof setpriv) == NULL)
    cr_skip_test("needs root and setpriv to run a process and tierctl as another user");
  cr_assert_not_null(realpath(TC_TIERCTL, tierctl));
  /* The other user's process writes its record and ready file here; without
   * the sticky bit it may replace the record setpriv left under its pid
   * (setpriv, preloaded too, ran as root and exec'd it). */
  chmod(tc_dir, 0777);
  pid_t pid = tc_start_as(16, 30, "undumpable", NULL, "nobody");
  char pids[16], maps[64], by[32], head[128];
  snprintf(pids, sizeof pids, "%d", (int)pid);
  snprintf(maps, sizeof maps, "/proc/%d/numa_maps", (int)pid);
  tc_sleep_ms(300);
  char *env[] = { tc_dir_env, NULL };
  char *st[] = { setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups", tierctl, "status", pids, NULL, NULL };
  spawn_result_t r = spawn_run(st, env, NULL, 60);
  cr_assert_eq(tc_exit(&r), 0, "%s", r.errout);
  cr_expect(strstr(r.out, "; resident as the process measured it ") != NULL &&
            strstr(r.out, " s ago (tierctl cannot read /proc/") != NULL, "%s", r.out);
  spawn_free(&r);
  st[7] = "--json";
  r = spawn_run(st, env, NULL, 60);
  cr_assert_eq(tc_exit(&r), 0, "%s", r.errout);
  cr_expect_str_eq(tc_json_str(r.out, "resident_by", by, sizeof by), "process", "%s", r.out);
  cr_expect_gt(tc_json_num(r.out, "resident_age_ns"), 0, "%s", r.out);
  /* Nothing made up: the figure and its age are the record's (root reads
   * the record to check; the process measures it every 10 s without
   * reclaim, so it may well be older than the 16 MiB). */
  char rec[128];
  snprintf(rec, sizeof rec, "%s/tiermalloc.%d", tc_dir, (int)pid);
  tier_live_t lr;
  FILE *f = fopen(rec, "r");
  cr_assert_not_null(f, "%s", rec);
  cr_assert_eq(fread(&lr, sizeof lr, 1, f), 1);
  fclose(f);
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  long long now_ns = (long long)now.tv_sec * 1000000000ll + now.tv_nsec, said_age = tc_json_num(r.out, "resident_age_ns");
  cr_expect_eq(tc_json_num(r.out, "resident_bytes"), (long long)lr.stats.tier[0].resident, "%s", r.out);
  cr_expect(llabs(now_ns - (long long)lr.resident_ns - said_age) < 1000000000ll,
            "resident age %lld ns, the record's measurement %lld ns ago", said_age, now_ns - (long long)lr.resident_ns);
  spawn_free(&r);
  st[7] = "--prom";
  r = spawn_run(st, env, NULL, 60);
  cr_assert_eq(tc_exit(&r), 0, "%s", r.errout);
  snprintf(head, sizeof head, "tiermalloc_resident_age_seconds{pid=\"%d\",command=\"live_hold\"} ", (int)pid);
  cr_expect_gt(tc_prom_value(r.out, head), 0.0, "%s", r.out);
  spawn_free(&r);
  kill(pid, SIGTERM);   /* root may signal nobody's process */
  waitpid(pid, NULL, 0);
}

/* A small program that allocates 1 MiB after its first second, from
 * memory start-up committed (no commit starts a thread): the allocations
 * start its thread (before, its record kept allocated 0 for its life),
 * which publishes its allocated bytes of now. */
Test(tierctl, a_small_program_that_allocates_late_is_fresh_too)
{
  pid_t pid = tc_start(1, 30, "trickle", NULL);
  tc_sleep_ms(300);
  char pids[16], by[32];
  snprintf(pids, sizeof pids, "%d", (int)pid);
  spawn_result_t r = tc_tierctl((const char *[]){ "status", pids, "--json", NULL });
  cr_assert_eq(tc_exit(&r), 0, "%s", r.errout);
  cr_expect_str_eq(tc_json_str(r.out, "publisher", by, sizeof by), "thread", "%s", r.out);
  cr_expect_leq(tc_json_num(r.out, "published_age_ns"), 300000000ll, "%s", r.out);
  cr_expect_geq(tc_json_num(r.out, "allocated_bytes"), 1ll << 20, "the 1 MiB of 16 KiB blocks: %s", r.out);
  spawn_free(&r);
  tc_stop(pid);
}

/* The thread that publishes a record, in a program with no budget: named
 * for it, and not the reclaim thread. */
Test(tierctl, a_process_without_a_budget_publishes_from_a_thread_of_its_own)
{
  pid_t pid = tc_start(8, 30, "", NULL);
  cr_expect_eq(threadnames_count_of(pid, "tiermalloc_pub"), 1, "the publishing thread");
  cr_expect_eq(threadnames_count_of(pid, "tiermalloc_rcl"), 0, "no reclaim thread without a budget");
  tc_stop(pid);
}

Test(tierctl, status_agrees_with_numa_maps_within_5_percent)
{
  /* A finite max starts the reclaim thread (nothing crosses it here), which
   * publishes every 100 ms. */
  pid_t pid = tc_start(96, 30, "", "TIERMALLOC_TOPTIER_MAX=16G");
  char pids[16];
  snprintf(pids, sizeof pids, "%d", (int)pid);
  tc_sleep_ms(400);
  spawn_result_t r = tc_tierctl((const char *[]){ "status", pids, "--json", NULL });
  long long kernel = tc_numa_maps_anon(pid);
  cr_assert_eq(tc_exit(&r), 0, "%s", r.errout);
  long long resident = tc_json_num(r.out, "resident_bytes");
  cr_expect(resident > 90ll << 20, "resident %lld for 96 MiB written: %s", resident, r.out);
  cr_expect(llabs(resident - kernel) <= kernel / 20, "tierctl %lld against numa_maps %lld", resident, kernel);
  cr_expect_eq(tc_json_num(r.out, "pid"), pid);
  cr_expect(strstr(r.out, "\"command\":\"live_hold\"") != NULL, "%s", r.out);
  cr_expect(strstr(r.out, "\"tiers\":[{\"tier\":0,\"nodes\":\"0\",") != NULL, "%s", r.out);
  cr_expect(tc_json_num(r.out, "allocated_bytes") >= 96ll << 20, "allocated: %s", r.out);
  cr_expect(tc_json_num(r.out, "reclaim_passes") > 0, "%s", r.out);
  spawn_free(&r);
  tc_stop(pid);
}

Test(tierctl, ps_and_prometheus_name_the_process)
{
  /* Its thread publishes once a minute, so the record read below is the
   * API call's: at the default 100 ms the thread published again between
   * the call and tierctl's read when the machine was loaded. */
  pid_t pid = tc_start(8, 30, "publish", "TIERMALLOC_LIVE_MS=60000");
  char pids[16], label[64];
  snprintf(pids, sizeof pids, "%d", (int)pid);
  spawn_result_t r = tc_tierctl((const char *[]){ "ps", NULL });
  cr_assert_eq(tc_exit(&r), 0, "%s", r.errout);
  cr_expect(strncmp(r.out, "PID ", 4) == 0, "%s", r.out);
  char want[64];
  snprintf(want, sizeof want, "\n%-7d live_hold ", (int)pid);
  cr_expect(strstr(r.out, want) != NULL, "%s", r.out);
  spawn_free(&r);
  r = tc_tierctl((const char *[]){ "status", "--prom", NULL });
  cr_assert_eq(tc_exit(&r), 0, "%s", r.errout);
  snprintf(label, sizeof label, "{pid=\"%d\",command=\"live_hold\",tier=\"0\",nodes=\"0\"} ", (int)pid);
  char metric[128];
  snprintf(metric, sizeof metric, "\ntiermalloc_tier_resident_bytes%s", label);
  cr_expect(strstr(r.out, metric) != NULL, "%s", r.out);
  cr_expect(strstr(r.out, "# TYPE tiermalloc_tier_resident_bytes gauge\n") != NULL);
  spawn_free(&r);
  r = tc_tierctl((const char *[]){ "status", pids, NULL });
  cr_assert_eq(tc_exit(&r), 0, "%s", r.errout);
  cr_expect(strstr(r.out, "(api call)") != NULL, "who published: %s", r.out);
  cr_expect(strstr(r.out, "\ntiermalloc: 1 tier\n") != NULL, "%s", r.out);
  spawn_free(&r);
  r = tc_tierctl((const char *[]){ "top", "-n", "1", NULL });
  cr_assert_eq(tc_exit(&r), 0, "%s", r.errout);
  cr_expect(strstr(r.out, "tierctl top - ") == r.out, "%s", r.out);
  cr_expect(strstr(r.out, want) != NULL, "%s", r.out);
  spawn_free(&r);
  tc_stop(pid);
}

/* The record: 0600, the process's own, gone when it exits; a fork child
 * publishes its own and leaves its parent's alone. */
Test(tierctl, a_record_lives_as_long_as_its_process)
{
  pid_t pid = tc_start(4, 2, "fork", NULL);
  char rec[128], child_file[128], buf[32] = "";
  snprintf(rec, sizeof rec, "%s/tiermalloc.%d", tc_dir, (int)pid);
  struct stat st;
  cr_assert_eq(stat(rec, &st), 0, "no record %s", rec);
  cr_expect_eq(st.st_mode & 0777, 0600, "mode %o", st.st_mode & 0777);
  cr_expect_eq(st.st_uid, geteuid());
  snprintf(child_file, sizeof child_file, "%s/ready.child", tc_dir);
  for (int i = 0; i < 500 && access(child_file, F_OK) != 0; i++) tc_sleep_ms(10);
  FILE *f = fopen(child_file, "r");
  cr_assert_not_null(f, "the child never got ready");
  cr_assert_not_null(fgets(buf, sizeof buf, f));
  fclose(f);
  char crec[128];
  snprintf(crec, sizeof crec, "%s/tiermalloc.%d", tc_dir, atoi(buf));
  cr_expect_eq(access(crec, F_OK), 0, "the child's record %s", crec);
  spawn_result_t r = tc_tierctl((const char *[]){ "status", buf[0] ? strtok(buf, "\n") : "0", "--json", NULL });
  cr_expect_eq(tc_exit(&r), 0, "%s", r.errout);
  cr_expect(tc_json_num(r.out, "allocated_bytes") >= 16ll << 20, "the child's own figures: %s", r.out);
  spawn_free(&r);
  int status;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  cr_expect_eq(access(rec, F_OK), -1, "the record outlived its process");
  cr_expect_eq(access(crec, F_OK), -1, "the child's record outlived it");
}

Test(tierctl, each_error_is_one_line_and_a_nonzero_exit)
{
  /* No such process. */
  spawn_result_t r = tc_tierctl((const char *[]){ "status", "2147483600", NULL });
  tc_expect_error(&r, "no process 2147483600");
  spawn_free(&r);
  /* A process without tiermalloc. */
  pid_t plain = fork();
  if (plain == 0) {
    execl("/bin/sleep", "sleep", "30", (char *)NULL);
    _exit(127);
  }
  char pids[16];
  snprintf(pids, sizeof pids, "%d", (int)plain);
  tc_sleep_ms(100);
  r = tc_tierctl((const char *[]){ "status", pids, NULL });
  tc_expect_error(&r, "does not run tiermalloc");
  spawn_free(&r);
  /* A truncated record. */
  char path[128];
  snprintf(path, sizeof path, "%s/tiermalloc.%d", tc_dir, (int)plain);
  FILE *f = fopen(path, "w");
  fputs("tierliv1", f);
  fclose(f);
  r = tc_tierctl((const char *[]){ "status", pids, NULL });
  tc_expect_error(&r, "truncated or not a tiermalloc record");
  spawn_free(&r);
  unlink(path);
  tc_stop(plain);
  /* A stale record: its process was killed, no exit handler ran. */
  pid_t pid = tc_start(4, 30, "", NULL);
  snprintf(pids, sizeof pids, "%d", (int)pid);
  snprintf(path, sizeof path, "%s/tiermalloc.%d", tc_dir, (int)pid);
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  cr_assert_eq(access(path, F_OK), 0, "SIGKILL left the record");
  r = tc_tierctl((const char *[]){ "status", pids, NULL });
  tc_expect_error(&r, "has ended (or exec'd): its stale record was removed");
  spawn_free(&r);
  cr_expect_eq(access(path, F_OK), -1, "the stale record was not removed");
  /* Usage errors: exit 2. */
  r = tc_tierctl((const char *[]){ "status", NULL });
  cr_expect_eq(tc_exit(&r), 2);
  spawn_free(&r);
  r = tc_tierctl((const char *[]){ "frobnicate", NULL });
  cr_expect_eq(tc_exit(&r), 2);
  spawn_free(&r);
  r = tc_tierctl((const char *[]){ "--help", NULL });
  cr_expect_eq(tc_exit(&r), 0);
  cr_expect(strstr(r.out, "usage: tierctl") == r.out, "%s", r.out);
  spawn_free(&r);
}

Test(tierctl, another_users_process_is_refused_in_one_line)
{
  char setpriv[PATH_MAX];
  if (geteuid() != 0 || spawn_which("setpriv", setpriv, sizeof setpriv) == NULL)
    cr_skip_test("needs root and setpriv to run tierctl as another user");
  pid_t pid = tc_start(4, 30, "", NULL);
  char pids[16], tierctl[PATH_MAX];
  snprintf(pids, sizeof pids, "%d", (int)pid);
  cr_assert_not_null(realpath(TC_TIERCTL, tierctl));
  chmod(tc_dir, 0755);   /* mkdtemp made it 0700: the other user may list it, not read the record */
  char *argv[] = { setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups", tierctl, "status", pids, NULL };
  char *env[] = { tc_dir_env, NULL };
  spawn_result_t r = spawn_run(argv, env, NULL, 60);
  tc_expect_error(&r, "is another user's");
  spawn_free(&r);
  char *ps[] = { setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups", tierctl, "ps", NULL };
  r = spawn_run(ps, env, NULL, 60);
  cr_expect_eq(tc_exit(&r), 0, "%s", r.errout);
  cr_expect(strstr(r.out, "live_hold") == NULL, "another user's process listed: %s", r.out);
  spawn_free(&r);
  tc_stop(pid);
}

Test(tierctl, a_recorded_timeline_plots_to_a_png)
{
  char gnuplot[PATH_MAX];
  if (spawn_which("gnuplot", gnuplot, sizeof gnuplot) == NULL)
    cr_skip_test("gnuplot is not installed (make deps installs gnuplot-nox)");
  pid_t pid = tc_start(8, 2, "", "TIERMALLOC_LIVE_MS=50");
  char pids[16], csv[128], png[128];
  snprintf(pids, sizeof pids, "%d", (int)pid);
  snprintf(csv, sizeof csv, "%s/run.csv", tc_dir);
  snprintf(png, sizeof png, "%s/run.png", tc_dir);
  /* Until the process ends, by itself, 2 s later. */
  spawn_result_t r = tc_tierctl((const char *[]){ "record", pids, "-i", "100ms", "-o", csv, NULL });
  cr_assert_eq(tc_exit(&r), 0, "%s", r.errout);
  spawn_free(&r);
  waitpid(pid, NULL, 0);
  FILE *f = fopen(csv, "r");
  cr_assert_not_null(f);
  char line[4096];
  unsigned rows = 0;
  cr_assert_not_null(fgets(line, sizeof line, f));
  cr_expect(strncmp(line, "# tierctl record: pid ", 22) == 0, "%s", line);
  cr_assert_not_null(fgets(line, sizeof line, f));
  cr_expect_str_eq(line, "time_s,tier0_resident,tier0_committed,tier0_high,tier0_max,tier0_demoted,"
                         "tier0_promoted,tier0_pageout\n");
  while (fgets(line, sizeof line, f)) rows++;
  fclose(f);
  cr_expect(rows >= 8 && rows <= 30, "%u rows for about 2 s at 100 ms", rows);
  r = tc_tierctl((const char *[]){ "plot", csv, "-o", png, NULL });
  cr_expect_eq(tc_exit(&r), 0, "%s", r.errout);
  spawn_free(&r);
  expect_png(png);
}

/* tierctl top in a real terminal (tmux): its screen shows the process, it
 * refreshes, and q quits it. */
Test(tierctl, top_in_a_terminal_shows_the_process_and_quits_on_q)
{
  char tmux[PATH_MAX];
  if (spawn_which("tmux", tmux, sizeof tmux) == NULL)
    cr_skip_test("tmux is not installed (make deps installs it)");
  pid_t pid = tc_start(8, 60, "publish", NULL);
  char tierctl[PATH_MAX], session[64], cmd[2 * PATH_MAX + 256];
  cr_assert_not_null(realpath(TC_TIERCTL, tierctl));
  snprintf(session, sizeof session, "tierctl-test-%d", (int)getpid());
  snprintf(cmd, sizeof cmd,
           "tmux -L %s new-session -d -s %s -x 130 -y 20 'TIERMALLOC_LIVE_DIR=%s %s top -i 200ms; sleep 30'",
           session, session, tc_dir, tierctl);
  cr_assert_eq(system(cmd), 0, "%s", cmd);
  char screen[8192] = "", want[64];
  snprintf(want, sizeof want, "\n%-7d live_hold ", (int)pid);
  snprintf(cmd, sizeof cmd, "tmux -L %s capture-pane -p -t %s", session, session);
  for (int i = 0; i < 100 && !strstr(screen, want); i++) {
    tc_sleep_ms(100);
    FILE *p = popen(cmd, "r");
    size_t n = p ? fread(screen, 1, sizeof screen - 1, p) : 0;
    screen[n] = '\0';
    if (p) pclose(p);
  }
  cr_expect(strncmp(screen, "tierctl top - ", 14) == 0, "the screen:\n%s", screen);
  cr_expect(strstr(screen, "1 process (q quits)") != NULL, "the screen:\n%s", screen);
  cr_expect(strstr(screen, "\nPID     COMMAND") != NULL, "the screen:\n%s", screen);
  cr_expect(strstr(screen, want) != NULL, "the screen:\n%s", screen);
  /* q: tierctl ends, and the pane's shell goes on to its sleep. */
  snprintf(cmd, sizeof cmd, "tmux -L %s send-keys -t %s q", session, session);
  cr_expect_eq(system(cmd), 0);
  bool quit = false;
  snprintf(cmd, sizeof cmd, "tmux -L %s display-message -p -t %s '#{pane_current_command}'", session, session);
  char now[128] = "";
  for (int i = 0; i < 50 && !quit; i++) {
    tc_sleep_ms(100);
    FILE *p = popen(cmd, "r");
    size_t n = p ? fread(now, 1, sizeof now - 1, p) : 0;
    now[n] = '\0';
    if (p) pclose(p);
    quit = strncmp(now, "sleep", 5) == 0;   /* the pane's shell went on past tierctl */
  }
  cr_expect(quit, "tierctl top still runs after q (the pane runs %s)", now);
  snprintf(cmd, sizeof cmd, "tmux -L %s kill-server", session);
  if (system(cmd) != 0) cr_log_warn("tmux kill-server failed");
  tc_stop(pid);
}

Test(tierctl, run_sets_the_limits_and_refuses_a_bad_size)
{
  spawn_result_t r = tc_tierctl((const char *[]){ "run", "--toptier-max", "64M", "--stats", "--", "/bin/true", NULL });
  cr_expect_eq(tc_exit(&r), 0, "%s", r.errout);
  cr_expect(strstr(r.errout, "tiermalloc: 1 tier") != NULL, "the exit stats: %s", r.errout);
  cr_expect(strstr(r.errout, "64.0 MiB  env") != NULL, "max 64 MiB from the environment: %s", r.errout);
  spawn_free(&r);
  r = tc_tierctl((const char *[]){ "run", "--toptier-max", "lots", "--", "/bin/true", NULL });
  cr_expect_eq(tc_exit(&r), 2);
  cr_expect(strstr(r.errout, "tierctl: run: --toptier-max needs a size") == r.errout, "%s", r.errout);
  spawn_free(&r);
}

Test(tierctl, explain_names_the_topology_the_budgets_and_the_checks)
{
  spawn_result_t r = tc_tierctl((const char *[]){ "explain", NULL });
  cr_expect_eq(tc_exit(&r), 0, "%s", r.errout);
  cr_expect(strstr(r.out, "topology: ") == r.out, "%s", r.out);
  cr_expect(strstr(r.out, "\n  tier 0: nodes 0, ") != NULL, "%s", r.out);
  cr_expect(strstr(r.out, "\nbudgets a process started here gets") != NULL, "%s", r.out);
  cr_expect(strstr(r.out, "\nchecks:\n") != NULL, "%s", r.out);
  FILE *swaps = fopen("/proc/swaps", "r");
  char line[256];
  int lines = 0;
  while (swaps && fgets(line, sizeof line, swaps)) lines++;
  if (swaps) fclose(swaps);
  if (lines <= 1) cr_expect(strstr(r.out, "warning: no swap") != NULL, "%s", r.out);
  spawn_free(&r);
}

/* A record written in another pid namespace (a container sharing the
 * directory) names a pid that means another process here: neither tierctl
 * nor a new process's sweep may call it stale, and status refuses it. */
Test(tierctl, records_of_another_pid_namespace_are_left_alone)
{
  char unshare[PATH_MAX];
  if (geteuid() != 0 || spawn_which("unshare", unshare, sizeof unshare) == NULL)
    cr_skip_test("needs root and unshare to start a process in a pid namespace of its own");
  char lib[PATH_MAX], prog[PATH_MAX], ready[128], cmd[4 * PATH_MAX];
  cr_assert_not_null(realpath(TC_LIB, lib));
  cr_assert_not_null(realpath("build/tests/progs/live_hold", prog));
  snprintf(ready, sizeof ready, "%s/ready", tc_dir);
  snprintf(cmd, sizeof cmd,
           "TIERMALLOC_LIVE_DIR=%s LD_PRELOAD=%s %s --pid --fork --mount-proc %s 4 5 %s publish &",
           tc_dir, lib, unshare, prog, ready);
  cr_assert_eq(system(cmd), 0);
  for (int i = 0; i < 500 && access(ready, F_OK) != 0; i++) tc_sleep_ms(10);
  cr_assert_eq(access(ready, F_OK), 0, "live_hold never got ready in its namespace");
  char rec[128];
  snprintf(rec, sizeof rec, "%s/tiermalloc.1", tc_dir);   /* pid 1 there: the program unshare forked */
  cr_assert_eq(access(rec, F_OK), 0, "no %s", rec);
  spawn_result_t r = tc_tierctl((const char *[]){ "ps", NULL });
  cr_expect_eq(tc_exit(&r), 0, "%s", r.errout);
  spawn_free(&r);
  r = tc_tierctl((const char *[]){ "status", "1", NULL });
  tc_expect_error(&r, "is a process of another pid namespace");
  spawn_free(&r);
  pid_t other = tc_start(4, 0, "", NULL);   /* its new record sweeps the directory */
  waitpid(other, NULL, 0);
  cr_expect_eq(access(rec, F_OK), 0, "the namespace's live record was removed as stale");
}

/* explain PID gives each budget of that process its reason, derived again
 * from the process's own environment and cgroup. */
Test(tierctl, explain_a_process_gives_each_budget_its_reason)
{
  pid_t pid = tc_start(4, 30, "", "TIERMALLOC_TOPTIER_MAX=1G");
  char pids[16];
  snprintf(pids, sizeof pids, "%d", (int)pid);
  spawn_result_t r = tc_tierctl((const char *[]){ "explain", pids, NULL });
  cr_expect_eq(tc_exit(&r), 0, "%s", r.errout);
  char want[96];
  snprintf(want, sizeof want, "\nbudgets of process %d (live_hold), cgroup ", (int)pid);
  cr_expect(strstr(r.out, want) != NULL, "%s", r.out);
  cr_expect(strstr(r.out, "  tier 0: min 0 B, low 0 B, high unlimited, max 1.00 GiB (from env)\n") != NULL, "%s", r.out);
  cr_expect(strstr(r.out, "\nwhy (derived again now from its environment and cgroup ") != NULL, "%s", r.out);
  cr_expect(strstr(r.out, "  tier 0: max 1.00 GiB = TIERMALLOC_TOPTIER_MAX\n") != NULL, "%s", r.out);
  spawn_free(&r);
  tc_stop(pid);
}

/* A record directory that is full (a tmpfs without room): the program runs
 * on, with one warning line, rather than taking SIGBUS at the record's
 * first write. */
Test(tierctl, a_full_record_directory_costs_one_warning_not_a_crash)
{
  if (geteuid() != 0) cr_skip_test("needs root to mount a small tmpfs");
  char dir[96], cmd[320], lib[PATH_MAX];
  cr_assert_not_null(realpath(TC_LIB, lib));
  snprintf(dir, sizeof dir, "%s/full", tc_dir);
  cr_assert_eq(mkdir(dir, 0755), 0);
  snprintf(cmd, sizeof cmd, "mount -t tmpfs -o size=4k tmpfs %s && dd if=/dev/zero of=%s/fill bs=4k count=1 2>/dev/null",
           dir, dir);
  if (system(cmd) != 0) cr_skip_test("cannot mount a tmpfs here");
  char env_dir[128], env_pre[PATH_MAX + 16];
  snprintf(env_dir, sizeof env_dir, "TIERMALLOC_LIVE_DIR=%s", dir);
  snprintf(env_pre, sizeof env_pre, "LD_PRELOAD=%s", lib);
  char *argv[] = { "/bin/echo", "ran", NULL };
  char *env[] = { env_dir, env_pre, NULL };
  spawn_result_t r = spawn_run(argv, env, NULL, 30);
  snprintf(cmd, sizeof cmd, "umount %s", dir);
  if (system(cmd) != 0) cr_log_warn("umount %s failed", dir);
  cr_expect(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "status %d: %s", r.status, r.errout);
  cr_expect_str_eq(r.out, "ran\n");
  cr_expect(strstr(r.errout, "tiermalloc: cannot publish live stats in ") == r.errout &&
            strstr(r.errout, "(No space left on device); tierctl will not see this process\n") != NULL &&
            strchr(r.errout, '\n') == r.errout + r.err_len - 1, "one line: %s", r.errout);
  spawn_free(&r);
}
