/*
 * cgroup: the limits reader against the captured trees (tests/fixtures/README.md),
 * the small synthetic cgroup-v2-* trees, and edited copies of either under a
 * temporary directory for the error cases no capture shows.
 *
 * Run from the repository root: fixture paths are relative to it.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"
#include "capture.h"
#include "tmptree.h"

#define FIXTURES "tests/fixtures"
#define MiB (1024ULL * 1024)
#define UNLIM TM_CGROUP_UNLIMITED

/* ---- helpers ---------------------------------------------------------------- */

/* tm_cgroup_read with stderr captured: returns its result, *err the text. */
static int cg_read(const char *root, tm_cgroup_limits_t *out, const char **err)
{
  capture_begin();
  int rc = tm_cgroup_read(root, out);
  *err = capture_end();
  return rc;
}

/* Reads root and checks that it said nothing. */
static void cg_read_quiet(const char *root, tm_cgroup_limits_t *out)
{
  const char *err;
  int rc = cg_read(root, out, &err);
  cr_assert_eq(rc, 0, "%s: rc %d", root, rc);
  cr_assert_str_empty(err, "%s: unexpected warning: %s", root, err);
}

/* Exactly one warning line, starting "tiermalloc: " and containing what. */
static void cg_check_one_warning(const char *err, const char *what)
{
  cr_assert_eq(capture_count_lines(err), 1, "want one warning line, got: %s", err);
  cr_assert_eq(strncmp(err, "tiermalloc: ", 12), 0, "not a tiermalloc line: %s", err);
  cr_assert_not_null(strstr(err, what), "warning does not name %s: %s", what, err);
}

static void cg_check_limit(const tm_cgroup_limits_t *cg, int i, uint64_t v, const char *from)
{
  cr_assert_eq(cg->limit[i], v, "limit[%d] %llu, want %llu", i, (unsigned long long)cg->limit[i],
               (unsigned long long)v);
  cr_assert_str_eq(cg->from[i], from, "from[%d]", i);
}

/* Version NONE, path "", every limit and toptier unlimited, no toptier. */
static void cg_check_none(const tm_cgroup_limits_t *cg)
{
  cr_assert_eq(cg->version, TM_CGROUP_NONE, "version %d", cg->version);
  cr_assert_str_empty(cg->path);
  for (int i = 0; i < TM_LIMIT_COUNT; i++) {
    cg_check_limit(cg, i, UNLIM, "");
    cr_assert_not(cg->has_toptier[i], "has_toptier[%d]", i);
    cr_assert_eq(cg->toptier[i], UNLIM, "toptier[%d]", i);
  }
}

static void cg_check_no_toptier(const tm_cgroup_limits_t *cg)
{
  for (int i = 0; i < TM_LIMIT_COUNT; i++) {
    cr_assert_not(cg->has_toptier[i], "has_toptier[%d]", i);
    cr_assert_eq(cg->toptier[i], UNLIM, "toptier[%d]", i);
  }
}

/* The captured v2 trees: memory.{min,low,high,max} set on app, worker leaves
 * min and low at 0 and high and max at "max". */
static void cg_check_captured_v2(const char *tree)
{
  char root[128];
  tm_cgroup_limits_t cg;
  snprintf(root, sizeof root, "%s/%s", FIXTURES, tree);
  cg_read_quiet(root, &cg);
  cr_assert_eq(cg.version, TM_CGROUP_V2, "%s: version %d", tree, cg.version);
  cr_assert_str_eq(cg.path, "/app/worker");
  cg_check_limit(&cg, TM_LIMIT_MIN, 0, "/app/worker");
  cg_check_limit(&cg, TM_LIMIT_LOW, 0, "/app/worker");
  cg_check_limit(&cg, TM_LIMIT_HIGH, 209715200, "/app");
  cg_check_limit(&cg, TM_LIMIT_MAX, 314572800, "/app");
  cg_check_no_toptier(&cg);
}

#define V2_APP "sys/fs/cgroup/app/"
#define V2_MOUNTINFO "28 25 0:25 / /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw\n"
#define V1_APP "sys/fs/cgroup/memory/jobs/app/"

/* ---- captured trees --------------------------------------------------------- */

Test(cgroup, v2_dram_cxl_6_12_ancestors_give_app_high_and_max)
{
  cg_check_captured_v2("dram-cxl-6.12");
}

Test(cgroup, v2_other_captured_trees_read_the_same)
{
  cg_check_captured_v2("two-socket-two-cxl-6.12");
  cg_check_captured_v2("hbm-dram-cxl-6.12");
  cg_check_captured_v2("dram-cxl-flat-6.1");
}

/* host-single-node: memory on v1 at /sys/fs/cgroup/memory, v2 at .../unified
 * without memory; both v1 limits are 9223372036854771712 (2^63 - 4096). */
Test(cgroup, v1_hybrid_host_is_v1_and_its_huge_limits_are_unlimited)
{
  tm_cgroup_limits_t cg;
  cg_read_quiet(FIXTURES "/host-single-node", &cg);
  cr_assert_eq(cg.version, TM_CGROUP_V1, "version %d", cg.version);
  cr_assert_str_eq(cg.path, "/jobs/app");
  cg_check_limit(&cg, TM_LIMIT_MIN, 0, "");
  cg_check_limit(&cg, TM_LIMIT_LOW, 0, "");
  cg_check_limit(&cg, TM_LIMIT_HIGH, UNLIM, "");
  cg_check_limit(&cg, TM_LIMIT_MAX, UNLIM, "");
  cg_check_no_toptier(&cg);
}

/* ---- synthetic trees -------------------------------------------------------- */

/* cgroup-v2-nested: /batch max 1 GiB, /batch/job max 2 GiB, /batch/job/task max. */
Test(cgroup, v2_child_max_above_parent_parent_wins)
{
  tm_cgroup_limits_t cg;
  cg_read_quiet(FIXTURES "/cgroup-v2-nested", &cg);
  cr_assert_eq(cg.version, TM_CGROUP_V2);
  cg_check_limit(&cg, TM_LIMIT_MAX, 1024 * MiB, "/batch");
}

/* Each limit is the smallest on the path to the root, from a different level:
 * min 10/20/50 MiB (task/job/batch), low 150/100/200, high max/768/max. */
Test(cgroup, v2_grandchild_each_limit_names_the_cgroup_that_set_it)
{
  tm_cgroup_limits_t cg;
  cg_read_quiet(FIXTURES "/cgroup-v2-nested", &cg);
  cr_assert_eq(cg.version, TM_CGROUP_V2);
  cr_assert_str_eq(cg.path, "/batch/job/task");
  cg_check_limit(&cg, TM_LIMIT_MIN, 10 * MiB, "/batch/job/task");
  cg_check_limit(&cg, TM_LIMIT_LOW, 100 * MiB, "/batch/job");
  cg_check_limit(&cg, TM_LIMIT_HIGH, 768 * MiB, "/batch/job");
  cg_check_limit(&cg, TM_LIMIT_MAX, 1024 * MiB, "/batch");
  cg_check_no_toptier(&cg);
}

/* cgroup-v2-toptier: app toptier_high 80 MiB, toptier_max 100 MiB; worker
 * toptier_min 8 MiB, toptier_high max, toptier_max 150 MiB; no toptier_low. */
Test(cgroup, v2_toptier_files_with_ancestors)
{
  tm_cgroup_limits_t cg;
  cg_read_quiet(FIXTURES "/cgroup-v2-toptier", &cg);
  cr_assert_eq(cg.version, TM_CGROUP_V2);
  cr_assert(cg.has_toptier[TM_LIMIT_MIN]);
  cr_assert_eq(cg.toptier[TM_LIMIT_MIN], 8 * MiB);
  cr_assert_not(cg.has_toptier[TM_LIMIT_LOW]);
  cr_assert_eq(cg.toptier[TM_LIMIT_LOW], UNLIM);
  cr_assert(cg.has_toptier[TM_LIMIT_HIGH]);
  cr_assert_eq(cg.toptier[TM_LIMIT_HIGH], 80 * MiB);
  cr_assert(cg.has_toptier[TM_LIMIT_MAX]);
  cr_assert_eq(cg.toptier[TM_LIMIT_MAX], 100 * MiB);
  /* The ordinary limits are read alongside. */
  cg_check_limit(&cg, TM_LIMIT_MAX, 300 * MiB, "/app");
  cg_check_limit(&cg, TM_LIMIT_HIGH, UNLIM, "");
}

/* ---- absence ---------------------------------------------------------------- */

Test(cgroup, no_cgroup_files_is_none_unlimited_and_silent, .fini = tmptree_cleanup)
{
  tm_cgroup_limits_t cg;
  tmptree_make(NULL);
  memset(&cg, 0xa5, sizeof cg);
  cg_read_quiet(tmptree, &cg);
  cg_check_none(&cg);
}

/* A process in the v2 root cgroup: the root has no memory.max or memory.high. */
Test(cgroup, v2_root_cgroup_without_memory_files_is_none, .fini = tmptree_cleanup)
{
  tm_cgroup_limits_t cg;
  tmptree_make(NULL);
  tmptree_put("proc/self/cgroup", "0::/\n");
  tmptree_put("proc/self/mountinfo", V2_MOUNTINFO);
  tmptree_put("sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n");
  cg_read_quiet(tmptree, &cg);
  cg_check_none(&cg);
}

/* A hybrid host whose v2 cgroup has the memory files is v2, not v1. */
Test(cgroup, v2_is_chosen_over_v1_when_its_cgroup_has_memory_files, .fini = tmptree_cleanup)
{
  tm_cgroup_limits_t cg;
  tmptree_make("host-single-node");
  tmptree_put("sys/fs/cgroup/unified/memory.max", "4194304\n");
  cg_read_quiet(tmptree, &cg);
  cr_assert_eq(cg.version, TM_CGROUP_V2, "version %d", cg.version);
  cr_assert_str_eq(cg.path, "/");
  cg_check_limit(&cg, TM_LIMIT_MAX, 4 * MiB, "/");
}

/* ---- v1 ----------------------------------------------------------------------- */

Test(cgroup, v1_limit_is_max_and_soft_limit_is_high_with_ancestors, .fini = tmptree_cleanup)
{
  tm_cgroup_limits_t cg;
  tmptree_make("host-single-node");
  tmptree_put(V1_APP "memory.limit_in_bytes", "536870912\n");
  tmptree_put(V1_APP "memory.soft_limit_in_bytes", "268435456\n");
  tmptree_put("sys/fs/cgroup/memory/jobs/memory.limit_in_bytes", "402653184\n");
  tmptree_put("sys/fs/cgroup/memory/jobs/memory.soft_limit_in_bytes", "9223372036854771712\n");
  cg_read_quiet(tmptree, &cg);
  cr_assert_eq(cg.version, TM_CGROUP_V1);
  cg_check_limit(&cg, TM_LIMIT_MIN, 0, "");
  cg_check_limit(&cg, TM_LIMIT_LOW, 0, "");
  cg_check_limit(&cg, TM_LIMIT_HIGH, 256 * MiB, "/jobs/app");
  cg_check_limit(&cg, TM_LIMIT_MAX, 384 * MiB, "/jobs");
}

Test(cgroup, v1_values_from_2_62_are_unlimited, .fini = tmptree_cleanup)
{
  tm_cgroup_limits_t cg;
  tmptree_make("host-single-node");
  tmptree_put(V1_APP "memory.limit_in_bytes", "4611686018427387904\n");       /* 2^62 */
  tmptree_put(V1_APP "memory.soft_limit_in_bytes", "4611686018427387903\n");  /* 2^62 - 1 */
  cg_read_quiet(tmptree, &cg);
  cg_check_limit(&cg, TM_LIMIT_MAX, UNLIM, "");
  cg_check_limit(&cg, TM_LIMIT_HIGH, (1ULL << 62) - 1, "/jobs/app");
}

/* ---- values ------------------------------------------------------------------- */

Test(cgroup, v2_max_everywhere_is_unlimited_with_no_from, .fini = tmptree_cleanup)
{
  tm_cgroup_limits_t cg;
  tmptree_make("dram-cxl-6.12");
  tmptree_put(V2_APP "memory.max", "max\n");
  tmptree_put(V2_APP "memory.high", "max\n");
  cg_read_quiet(tmptree, &cg);
  cr_assert_eq(cg.version, TM_CGROUP_V2);
  cg_check_limit(&cg, TM_LIMIT_HIGH, UNLIM, "");
  cg_check_limit(&cg, TM_LIMIT_MAX, UNLIM, "");
}

/* Every malformed memory.max gets one warning naming the file and limits
 * nothing (worker's memory.max is "max", so max ends up unlimited). */
Test(cgroup, v2_parser_is_strict, .fini = tmptree_cleanup)
{
  static const char *const bad[] = {
    " 12\n", "12 \n", "12k\n", "-1\n", "+1\n", "", "\n", "12", "12\n\n", "1\n2\n",
    "max", "MAX\n", "max \n", "0x10\n", "18446744073709551616\n",
    "123456789012345678901234567890123456789\n",
  };
  tmptree_make("dram-cxl-6.12");
  const char *file = tmptree_path(V2_APP "memory.max");
  char want[512];
  snprintf(want, sizeof want, "%s", file);
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    tm_cgroup_limits_t cg;
    const char *err;
    tmptree_put(V2_APP "memory.max", bad[k]);
    int rc = cg_read(tmptree, &cg, &err);
    cr_assert_eq(rc, 0);
    cr_assert_eq(capture_count_lines(err), 1, "value '%s': want one warning, got: %s", bad[k], err);
    cr_assert_not_null(strstr(err, want), "value '%s': warning does not name %s: %s", bad[k],
                       want, err);
    cr_assert_eq(cg.limit[TM_LIMIT_MAX], UNLIM, "value '%s' was accepted", bad[k]);
    cr_assert_str_empty(cg.from[TM_LIMIT_MAX]);
    cg_check_limit(&cg, TM_LIMIT_HIGH, 209715200, "/app");
  }
}

Test(cgroup, v2_parser_accepts_digits_and_one_newline, .fini = tmptree_cleanup)
{
  static const struct { const char *text; uint64_t v; } good[] = {
    { "0\n", 0 }, { "4096\n", 4096 }, { "0004096\n", 4096 },
    { "18446744073709551614\n", UINT64_MAX - 1 },
  };
  tmptree_make("dram-cxl-6.12");
  for (size_t k = 0; k < sizeof good / sizeof good[0]; k++) {
    tm_cgroup_limits_t cg;
    tmptree_put(V2_APP "memory.max", good[k].text);
    cg_read_quiet(tmptree, &cg);
    cg_check_limit(&cg, TM_LIMIT_MAX, good[k].v, "/app");
  }
}

/* On equal values the nearer cgroup is named. */
Test(cgroup, v2_tie_names_the_nearer_cgroup, .fini = tmptree_cleanup)
{
  tm_cgroup_limits_t cg;
  tmptree_make("dram-cxl-6.12");
  tmptree_put(V2_APP "worker/memory.max", "314572800\n");
  cg_read_quiet(tmptree, &cg);
  cg_check_limit(&cg, TM_LIMIT_MAX, 314572800, "/app/worker");
}

/* A value in the hierarchy's root directory is named "/". */
Test(cgroup, v2_value_at_the_hierarchy_root_is_from_slash, .fini = tmptree_cleanup)
{
  tm_cgroup_limits_t cg;
  tmptree_make("dram-cxl-6.12");
  tmptree_put("sys/fs/cgroup/memory.max", "1048576\n");
  cg_read_quiet(tmptree, &cg);
  cg_check_limit(&cg, TM_LIMIT_MAX, 1 * MiB, "/");
}

/* ---- errors ----------------------------------------------------------------- */

Test(cgroup, garbage_value_warns_once_naming_the_file_and_limits_nothing,
     .fini = tmptree_cleanup)
{
  tm_cgroup_limits_t cg;
  const char *err;
  tmptree_make("dram-cxl-6.12");
  tmptree_put(V2_APP "memory.max", "lots\n");
  int rc = cg_read(tmptree, &cg, &err);
  cr_assert_eq(rc, 0);
  cg_check_one_warning(err, tmptree_path(V2_APP "memory.max"));
  cr_assert_eq(cg.version, TM_CGROUP_V2);
  cg_check_limit(&cg, TM_LIMIT_MAX, UNLIM, "");
  cg_check_limit(&cg, TM_LIMIT_HIGH, 209715200, "/app");
  cg_check_limit(&cg, TM_LIMIT_MIN, 0, "/app/worker");
}

/* Tests run as root, whom chmod 000 does not stop; a directory where the file
 * should be fails the read (EISDIR) the same way. */
Test(cgroup, unreadable_file_warns_once_and_limits_nothing, .fini = tmptree_cleanup)
{
  tm_cgroup_limits_t cg;
  const char *err;
  tmptree_make("dram-cxl-6.12");
  tmptree_rm(V2_APP "memory.high");
  cr_assert_eq(mkdir(tmptree_path(V2_APP "memory.high"), 0755), 0);
  int rc = cg_read(tmptree, &cg, &err);
  cr_assert_eq(rc, 0);
  cg_check_one_warning(err, tmptree_path(V2_APP "memory.high"));
  cr_assert_eq(cg.version, TM_CGROUP_V2);
  cg_check_limit(&cg, TM_LIMIT_HIGH, UNLIM, "");
  cg_check_limit(&cg, TM_LIMIT_MAX, 314572800, "/app");
}

/* The cgroup /proc/self/cgroup names is gone from the mount. */
Test(cgroup, removed_cgroup_directory_warns_and_returns_enoent, .fini = tmptree_cleanup)
{
  tm_cgroup_limits_t cg;
  const char *err;
  tmptree_make("dram-cxl-6.12");
  tmptree_rm(V2_APP "worker");
  int rc = cg_read(tmptree, &cg, &err);
  cr_assert_eq(rc, ENOENT, "rc %d", rc);
  cg_check_one_warning(err, tmptree_path(V2_APP "worker"));
  cg_check_none(&cg);
}

/* What the kernel shows for a v2 cgroup removed while the process runs: its
 * limits are not read even though the directory is still in the tree. */
Test(cgroup, deleted_cgroup_warns_and_returns_enoent, .fini = tmptree_cleanup)
{
  tm_cgroup_limits_t cg;
  const char *err;
  tmptree_make("dram-cxl-6.12");
  tmptree_put("proc/self/cgroup", "0::/app/worker (deleted)\n");
  int rc = cg_read(tmptree, &cg, &err);
  cr_assert_eq(rc, ENOENT, "rc %d", rc);
  cg_check_one_warning(err, "/app/worker was removed");
  cg_check_none(&cg);
}

Test(cgroup, malformed_proc_self_cgroup_line_warns_once_and_is_skipped,
     .fini = tmptree_cleanup)
{
  tm_cgroup_limits_t cg;
  const char *err;
  tmptree_make("dram-cxl-6.12");
  tmptree_put("proc/self/cgroup", "garbage\n0::/app/worker\n");
  int rc = cg_read(tmptree, &cg, &err);
  cr_assert_eq(rc, 0);
  cg_check_one_warning(err, tmptree_path("proc/self/cgroup"));
  cr_assert_eq(cg.version, TM_CGROUP_V2);
  cg_check_limit(&cg, TM_LIMIT_MAX, 314572800, "/app");
}

/* ---- mounts ----------------------------------------------------------------- */

/* A mount whose root is /app (a container's view): /app is the mount point,
 * and the walk stops there. */
Test(cgroup, mount_root_is_removed_from_the_path, .fini = tmptree_cleanup)
{
  tm_cgroup_limits_t cg;
  tmptree_make(NULL);
  tmptree_put("proc/self/cgroup", "0::/app/worker\n");
  tmptree_put("proc/self/mountinfo",
         "28 25 0:25 /app /sys/fs/cgroup rw,relatime shared:9 - cgroup2 cgroup2 rw\n");
  tmptree_put("sys/fs/cgroup/worker/memory.max", "1048576\n");
  tmptree_put("sys/fs/cgroup/memory.max", "2097152\n");
  tmptree_put("sys/fs/cgroup/memory.high", "3145728\n");
  tmptree_put("sys/fs/memory.high", "1\n");   /* above the mount: never read */
  cg_read_quiet(tmptree, &cg);
  cr_assert_eq(cg.version, TM_CGROUP_V2);
  cr_assert_str_eq(cg.path, "/app/worker");
  cg_check_limit(&cg, TM_LIMIT_MAX, 1 * MiB, "/app/worker");
  cg_check_limit(&cg, TM_LIMIT_HIGH, 3 * MiB, "/app");
}

Test(cgroup, path_not_under_the_mount_root_warns_and_limits_nothing, .fini = tmptree_cleanup)
{
  tm_cgroup_limits_t cg;
  const char *err;
  tmptree_make("dram-cxl-6.12");
  tmptree_put("proc/self/mountinfo", "28 25 0:25 /other /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
  int rc = cg_read(tmptree, &cg, &err);
  cr_assert_eq(rc, 0);
  cg_check_one_warning(err, "/app/worker is not under");
  cg_check_none(&cg);
}

/* mountinfo writes a space in a mount point as \040. */
Test(cgroup, escaped_mount_point_is_unescaped, .fini = tmptree_cleanup)
{
  tm_cgroup_limits_t cg;
  tmptree_make(NULL);
  tmptree_put("proc/self/cgroup", "0::/app\n");
  tmptree_put("proc/self/mountinfo", "28 25 0:25 / /cg\\040v2 rw,relatime - cgroup2 none rw\n");
  tmptree_put("cg v2/app/memory.max", "8388608\n");
  cg_read_quiet(tmptree, &cg);
  cr_assert_eq(cg.version, TM_CGROUP_V2);
  cg_check_limit(&cg, TM_LIMIT_MAX, 8 * MiB, "/app");
}

/* ---- names and the running system ------------------------------------------ */

Test(cgroup, version_names)
{
  cr_assert_str_eq(tm_cgroup_version_name(TM_CGROUP_NONE), "no cgroup");
  cr_assert_str_eq(tm_cgroup_version_name(TM_CGROUP_V2), "cgroup v2");
  cr_assert_str_eq(tm_cgroup_version_name(TM_CGROUP_V1), "cgroup v1");
}

/* Whatever the machine is, the result is consistent: NONE has no limits, and
 * a limit that is set names where it came from (v1's min and low excepted). */
Test(cgroup, running_system_result_is_consistent)
{
  tm_cgroup_limits_t cg;
  int rc = tm_cgroup_read("", &cg);
  cr_assert_geq(rc, 0);
  if (cg.version == TM_CGROUP_NONE) {
    cg_check_none(&cg);
    return;
  }
  cr_assert_eq(cg.path[0], '/', "path '%s'", cg.path);
  for (int i = 0; i < TM_LIMIT_COUNT; i++) {
    bool v1_zero = cg.version == TM_CGROUP_V1 && i <= TM_LIMIT_LOW;
    if (cg.limit[i] == UNLIM || v1_zero)
      cr_assert_str_empty(cg.from[i], "from[%d] '%s'", i, cg.from[i]);
    else
      cr_assert_eq(cg.from[i][0], '/', "from[%d] '%s'", i, cg.from[i]);
  }
}
