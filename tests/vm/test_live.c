/* The live record seen from outside (tierctl) on two real tiers, in a
 * process whose budget starts no reclaim thread (a min alone): 3 s after it
 * stopped allocating, tierctl's per-tier resident bytes are within 5 % of
 * what the kernel's numa_maps shows for its heap on each tier's node, in
 * every form, and its own figures are at most two publishing intervals old
 * (issue 30); 5 processes at once. The heap is half on tier 0 (malloc) and half on tier 1
 * (tier_malloc), so each tier has pages to count. The records are in the
 * guest's /tmp, an overlay whose device numbers /proc/PID/maps does not
 * share: tierctl still knows them for live ones (by path). */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "threadnames.h"
#include "vmtest.h"

/* 5 processes of 4 MiB, beside the suites that run at the same time: 20
 * (tests/preload/test_tierctl.c runs 20 on the host) took the small guest's
 * memory and CPU from the timed tests running with them (3tier: another
 * test's touched pages swapped out; 20 x 16 MiB pushed a python heap down a
 * tier), and under the reclaim lock they made the 2tier suite outlast its
 * guard. */
#define LV_PROCS 5
#define LV_MIB 4

static char lv_dir[64];

static void lv_setup(void)
{
  vm_quiet_shared();   /* heavy programs: not beside the burst tests */
  snprintf(lv_dir, sizeof lv_dir, "/tmp/vmtest-live.XXXXXX");
  cr_assert_not_null(mkdtemp(lv_dir));
}

static void lv_teardown(void)
{
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", lv_dir);
  if (system(cmd) != 0) cr_log_warn("could not remove %s", lv_dir);
}

/* live_hold MIB 120 READY tier1, preloaded with `budget`; its pid once ready. */
static pid_t lv_start(int k, const char *budget)
{
  char prog[PATH_MAX], ready[128], mib[16], dir_env[96], pre_env[PATH_MAX + 16];
  cr_assert_not_null(realpath("build/tests/progs/live_hold", prog), "make builds build/tests/progs/live_hold");
  snprintf(ready, sizeof ready, "%s/ready.%d", lv_dir, k);
  snprintf(mib, sizeof mib, "%d", LV_MIB);
  snprintf(dir_env, sizeof dir_env, "TIERMALLOC_LIVE_DIR=%s", lv_dir);
  snprintf(pre_env, sizeof pre_env, "LD_PRELOAD=%s", vm_libtiermalloc());
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    putenv(pre_env);
    putenv(dir_env);
    putenv((char *)budget);
    execl(prog, prog, mib, "120", ready, "tier1", (char *)NULL);
    _exit(127);
  }
  for (int i = 0; i < 3000 && access(ready, F_OK) != 0; i++) usleep(10000);
  cr_assert_eq(access(ready, F_OK), 0, "live_hold %d never got ready", k);
  return pid;
}

/* The record's tier ranges [base, end): constant once it is made, so a
 * plain read of its header is enough. */
static void lv_range(pid_t pid, uint64_t *base, uint64_t *end)
{
  char path[128];
  snprintf(path, sizeof path, "%s/" TIER_LIVE_PREFIX "%d", lv_dir, (int)pid);
  tier_live_t r;
  int fd = open(path, O_RDONLY);
  cr_assert_geq(fd, 0, "no record %s", path);
  cr_assert_eq(pread(fd, &r, sizeof r, 0), (ssize_t)sizeof r);
  close(fd);
  *base = r.range_base;
  *end = r.range_end;
}

/* Bytes per node of the mappings of pid's numa_maps that start in
 * [base, end): the heap, as the kernel says. */
static void lv_heap_by_node(pid_t pid, uint64_t base, uint64_t end, uint64_t bytes[VM_MAX_NODES])
{
  char path[64], line[8192];
  snprintf(path, sizeof path, "/proc/%d/numa_maps", (int)pid);
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f);
  memset(bytes, 0, VM_MAX_NODES * sizeof *bytes);
  while (fgets(line, sizeof line, f)) {
    uint64_t start = strtoull(line, NULL, 16);
    if (start < base || start >= end) continue;
    const char *kp = strstr(line, " kernelpagesize_kB=");
    uint64_t kb = kp ? strtoull(kp + 19, NULL, 10) : 4;
    for (const char *p = line; (p = strstr(p, " N")) != NULL; p++) {
      char *e;
      unsigned long n = strtoul(p + 2, &e, 10);
      if (*e == '=' && n < VM_MAX_NODES) bytes[n] += strtoull(e + 1, NULL, 10) * kb * 1024;
    }
  }
  fclose(f);
}

static double lv_prom_value(const char *text, const char *head)
{
  for (const char *p = text; (p = strstr(p, head)) != NULL; p++)
    if (p == text || p[-1] == '\n') return strtod(p + strlen(head), NULL);
  return -1;
}

static int lv_tierctl(char *const argv[], char *out, size_t size)
{
  char dir_env[96];
  snprintf(dir_env, sizeof dir_env, "TIERMALLOC_LIVE_DIR=%s", lv_dir);
  char *env[] = { dir_env, NULL };
  return vm_run(argv, env, out, size);
}

static int lv_within_5_percent(double said, uint64_t kernel)
{
  return fabs(said - (double)kernel) <= (double)kernel / 20;
}

TestSuite(live, .init = lv_setup, .fini = lv_teardown, .timeout = 400);

Test(live, figures_on_each_tier_are_fresh_without_a_reclaim_thread)
{
  const vm_topology_t *topo = vm_topology();
  if (topo->ntiers < 2) cr_skip_test("%s has one tier: tests/preload/test_tierctl.c covers it", topo->name);
  char tierctl[PATH_MAX];
  cr_assert_not_null(realpath("build/tierctl", tierctl), "make builds build/tierctl");
  pid_t pid[LV_PROCS];
  for (int k = 0; k < LV_PROCS; k++) pid[k] = lv_start(k, "TIERMALLOC_TOPTIER_MIN=8M");
  sleep(3);
  static char ps[65536], prom_all[1 << 20], out[65536];
  char *ps_argv[] = { tierctl, "ps", NULL };
  cr_assert_eq(lv_tierctl(ps_argv, ps, sizeof ps), 0, "%s", ps);
  char *prom_argv[] = { tierctl, "status", "--prom", NULL };
  cr_assert_eq(lv_tierctl(prom_argv, prom_all, sizeof prom_all), 0, "%s", prom_all);
  for (int k = 0; k < LV_PROCS; k++) {
    cr_expect_eq(threadnames_count_of(pid[k], "tiermalloc_pub"), 1, "%s: process %d: the publishing thread",
                 topo->name, (int)pid[k]);
    cr_expect_eq(threadnames_count_of(pid[k], "tiermalloc_rcl"), 0, "%s: a min alone starts no reclaim", topo->name);
    uint64_t base, end, heap[VM_MAX_NODES];
    lv_range(pid[k], &base, &end);
    char pids[16];
    snprintf(pids, sizeof pids, "%d", (int)pid[k]);
    char *json_argv[] = { tierctl, "status", pids, "--json", NULL };
    cr_assert_eq(lv_tierctl(json_argv, out, sizeof out), 0, "%s", out);
    lv_heap_by_node(pid[k], base, end, heap);
    cr_expect(vm_json_num(out, "published_age_ns") <= 300000000ll, "%s: process %d: %s", topo->name,
              (int)pid[k], out);
    cr_expect(strstr(out, "\"reclaim_state\":\"stopped\"") != NULL, "%s", out);
    cr_expect(vm_json_num(out, "allocated_bytes") >= (long long)(LV_MIB / 2) * (long long)VM_MIB, "tier 0: %s", out);
    for (int t = 0; t < 2; t++) {
      int node = vm_tier_node(topo, t);
      char key[32], head[192];
      snprintf(key, sizeof key, "{\"tier\":%d,", t);
      const char *p = strstr(out, key);
      cr_assert_not_null(p, "%s", out);
      long long said = vm_json_num(p, "resident_bytes");
      cr_expect_geq(heap[node], (uint64_t)(LV_MIB / 2) * VM_MIB, "%s: process %d: node %d holds %.1f MiB of heap",
                    topo->name, (int)pid[k], node, (double)heap[node] / VM_MIB);
      cr_expect(lv_within_5_percent((double)said, heap[node]), "%s: process %d: tier %d: --json %.2f MiB, numa_maps %.2f MiB",
                topo->name, (int)pid[k], t, (double)said / VM_MIB, (double)heap[node] / VM_MIB);
      snprintf(head, sizeof head, "tiermalloc_tier_resident_bytes{pid=\"%d\",command=\"live_hold\",tier=\"%d\",nodes=\"%d\"} ",
               (int)pid[k], t, node);
      cr_expect(lv_within_5_percent(lv_prom_value(prom_all, head), heap[node]),
                "%s: tier %d: status --prom (all) %.0f, numa_maps %llu", topo->name, t, lv_prom_value(prom_all, head),
                (unsigned long long)heap[node]);
    }
    /* ps: TIER0 NOW, HIGH and MAX (unlimited: a min alone), and LOWER TIERS
     * (tier 1 alone in 2tier). */
    char want[32];
    snprintf(want, sizeof want, "\n%-7d ", (int)pid[k]);
    const char *line = strstr(ps, want);
    cr_assert_not_null(line, "%s", ps);
    double top = -1, lower = -1;
    char u1[8] = "", u2[8] = "", high[16], max[16];
    int got = sscanf(line + 1, "%*d %*s %lf %7s %15s %15s %lf %7s", &top, u1, high, max, &lower, u2);
    cr_assert_eq(got, 6, "%s", line);
    cr_expect(strcmp(high, "unlimited") == 0 && strcmp(max, "unlimited") == 0, "%.80s", line);
    cr_expect_str_eq(u1, "MiB");
    cr_expect(lv_within_5_percent(top * VM_MIB, heap[vm_tier_node(topo, 0)]), "%s: ps tier 0 %.1f MiB: %.60s",
              topo->name, top, line);
    if (topo->ntiers == 2)
      cr_expect(lv_within_5_percent(lower * VM_MIB, heap[vm_tier_node(topo, 1)]), "%s: ps lower %.1f MiB: %.60s",
                topo->name, lower, line);
  }
  for (int k = 0; k < LV_PROCS; k++) {
    kill(pid[k], SIGTERM);
    waitpid(pid[k], NULL, 0);
  }
}
