/* libFuzzer harness for tm_cgroup_read (allocator/cgroup.c).
 * Root: a per-process temporary tree (mkdtemp under /tmp) with fixed
 * directories, rewritten from the input on each run.
 * Input: byte 0 = mode; the rest = up to NSLOT parts separated by 0x1e, part k
 * becoming file slot[k] (an empty or missing part = the file is absent):
 *   0 proc/self/cgroup  1 proc/self/mountinfo
 *   2-16  sys/fs/cgroup{,/a,/a/b}/memory.{max,high,min,low,toptier_max}
 *   17-22 sys/fs/cgroup/memory{,/a,/a/b}/memory.{limit,soft_limit}_in_bytes
 * Also there, never written: sys/fs/cgroup/unified/ (empty, for a hybrid
 * host), sys/fs/cgroup/d/memory.{max,high}/ and
 * sys/fs/cgroup/memory/d/memory.limit_in_bytes/ (directories, not files).
 * Mode (byte 0 & 3): 0, 1 raw: every part as given. 2 v2 model, 3 v1 model:
 * the harness writes proc/self/{cgroup,mountinfo} itself (parts 0 and 1 are
 * ignored), putting the process in "/", "/a" or "/a/b" ((byte 0 >> 4) % 3) of
 * a v2 mount at /sys/fs/cgroup, or of a v1 memory mount at
 * /sys/fs/cgroup/memory with v2 at the empty /sys/fs/cgroup/unified.
 * Checks, for every input, what cgroup.h promises: rc 0 or a positive errno;
 * version NONE, V2 or V1; strings NUL-terminated in their arrays; NONE has
 * path "", every limit unlimited with from "", no has_toptier; otherwise path
 * is not ""; a limit is unlimited exactly when its from is "" (not checked for
 * v1's min and low, which are 0), and a from names the cgroup or an ancestor.
 * Reference model (modes 2 and 3), from cgroup.h and cgroup.c's stated rules:
 * a value file is usable when it has at most 31 bytes (cgroup.c's buffer) and
 * is digits (no overflow), or on v2 "max", followed by exactly one '\n'; v1's
 * values of 2^62 and more are unlimited. v2 is used when the cgroup's own
 * directory has memory.max or memory.high (any content); each limit is the
 * smallest usable value from the cgroup up to the root, from the nearest
 * cgroup having it; has_toptier[max] when any toptier_max there is usable,
 * toptier[max] their smallest; v1 gives min = low = 0 and no toptier. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cgroup.h"
#include "fuzz.h"

#define SEP 0x1e
#define NSLOT 23
#define V2_FILES 5
#define V1_FILES 2
#define VALUE_MAX 31   /* the longest value file cgroup.c reads (its buffer is 32) */

static const char *const v2_dirs[3] = {"sys/fs/cgroup", "sys/fs/cgroup/a", "sys/fs/cgroup/a/b"};
static const char *const v1_dirs[3] = {"sys/fs/cgroup/memory", "sys/fs/cgroup/memory/a",
                                       "sys/fs/cgroup/memory/a/b"};
static const char *const v2_names[V2_FILES] = {"memory.max", "memory.high", "memory.min",
                                               "memory.low", "memory.toptier_max"};
/* limit index of each v2 file; -1 = toptier_max */
static const int v2_limit[V2_FILES] = {TM_LIMIT_MAX, TM_LIMIT_HIGH, TM_LIMIT_MIN, TM_LIMIT_LOW, -1};
static const char *const v1_names[V1_FILES] = {"memory.limit_in_bytes", "memory.soft_limit_in_bytes"};
static const int v1_limit[V1_FILES] = {TM_LIMIT_MAX, TM_LIMIT_HIGH};
static const char *const cg_names[3] = {"/", "/a", "/a/b"};

static char root[64];
static char slot_path[NSLOT][128];
static uint32_t present;          /* which slot files exist now */

static int v2_slot(int d, int f) { return 2 + d * V2_FILES + f; }
static int v1_slot(int d, int f) { return 2 + 3 * V2_FILES + d * V1_FILES + f; }

static void mkdir_p(const char *rel)
{
  char p[192];
  snprintf(p, sizeof p, "%s/%s", root, rel);
  for (char *s = p + strlen(root) + 1; *s; s++)
    if (*s == '/') { *s = '\0'; mkdir(p, 0755); *s = '/'; }
  if (mkdir(p, 0755) != 0 && errno != EEXIST) { perror(p); exit(1); }
}

static void cleanup(void)
{
  for (int k = 0; k < NSLOT; k++) unlink(slot_path[k]);
  static const char *const dirs[] = {
    "sys/fs/cgroup/memory/d/memory.limit_in_bytes", "sys/fs/cgroup/memory/d",
    "sys/fs/cgroup/memory/a/b", "sys/fs/cgroup/memory/a", "sys/fs/cgroup/memory",
    "sys/fs/cgroup/d/memory.max", "sys/fs/cgroup/d/memory.high", "sys/fs/cgroup/d",
    "sys/fs/cgroup/unified", "sys/fs/cgroup/a/b", "sys/fs/cgroup/a", "sys/fs/cgroup", "sys/fs",
    "sys", "proc/self", "proc", ""};
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
    char p[192];
    snprintf(p, sizeof p, "%s/%s", root, dirs[i]);
    rmdir(p);
  }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc; (void)argv;
  snprintf(root, sizeof root, "/tmp/fuzz_cgroup.XXXXXX");
  if (!mkdtemp(root)) { perror("mkdtemp"); exit(1); }
  atexit(cleanup);
  mkdir_p("proc/self");
  for (int d = 0; d < 3; d++) { mkdir_p(v2_dirs[d]); mkdir_p(v1_dirs[d]); }
  mkdir_p("sys/fs/cgroup/unified");
  mkdir_p("sys/fs/cgroup/d/memory.max");
  mkdir_p("sys/fs/cgroup/d/memory.high");
  mkdir_p("sys/fs/cgroup/memory/d/memory.limit_in_bytes");
  snprintf(slot_path[0], sizeof slot_path[0], "%s/proc/self/cgroup", root);
  snprintf(slot_path[1], sizeof slot_path[1], "%s/proc/self/mountinfo", root);
  for (int d = 0; d < 3; d++) {
    for (int f = 0; f < V2_FILES; f++)
      snprintf(slot_path[v2_slot(d, f)], sizeof slot_path[0], "%s/%s/%s", root, v2_dirs[d], v2_names[f]);
    for (int f = 0; f < V1_FILES; f++)
      snprintf(slot_path[v1_slot(d, f)], sizeof slot_path[0], "%s/%s/%s", root, v1_dirs[d], v1_names[f]);
  }
  return 0;
}

static void put(int k, const char *s, size_t n)
{
  if (n == 0) {
    if (present & (1u << k)) unlink(slot_path[k]);
    present &= ~(1u << k);
    return;
  }
  int fd = open(slot_path[k], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || write(fd, s, n) != (ssize_t)n) { perror(slot_path[k]); abort(); }
  close(fd);
  present |= 1u << k;
}

/* The model's value rule. 1 with *v set when the file text is usable. */
static int ref_value(const char *s, size_t n, int v1, uint64_t *v)
{
  if (n > VALUE_MAX || n < 2 || s[n - 1] != '\n') return 0;
  if (!v1 && n == 4 && memcmp(s, "max", 3) == 0) { *v = TM_CGROUP_UNLIMITED; return 1; }
  uint64_t acc = 0;
  for (size_t i = 0; i < n - 1; i++) {
    if (s[i] < '0' || s[i] > '9') return 0;
    unsigned dig = (unsigned)(s[i] - '0');
    if (acc > (UINT64_MAX - dig) / 10) return 0;
    acc = acc * 10 + dig;
  }
  *v = v1 && acc >= (1ULL << 62) ? TM_CGROUP_UNLIMITED : acc;
  return 1;
}

static int terminated(const char *s, size_t size) { return memchr(s, '\0', size) != NULL; }

/* Whether from names path's cgroup or one of its ancestors. */
static int ancestor_or_self(const char *from, const char *path)
{
  size_t n = strlen(from);
  if (strcmp(from, "/") == 0) return 1;
  if (strncmp(from, path, n) != 0) return 0;
  return path[n] == '\0' || path[n] == '/' || from[n - 1] == '/';
}

static void check_contract(int rc, const tm_cgroup_limits_t *o)
{
  if (rc < 0 || rc > 4095) FAIL("rc %d", rc);
  if (o->version != TM_CGROUP_NONE && o->version != TM_CGROUP_V2 && o->version != TM_CGROUP_V1)
    FAIL("version %d", (int)o->version);
  if (!terminated(o->path, sizeof o->path)) FAIL("path not NUL-terminated");
  for (int i = 0; i < TM_LIMIT_COUNT; i++)
    if (!terminated(o->from[i], sizeof o->from[i])) FAIL("from[%d] not NUL-terminated", i);
  if (o->version == TM_CGROUP_NONE) {
    if (o->path[0]) FAIL("version NONE but path '%s'", o->path);
    for (int i = 0; i < TM_LIMIT_COUNT; i++) {
      if (o->limit[i] != TM_CGROUP_UNLIMITED) FAIL("version NONE but limit[%d] %llu", i, (unsigned long long)o->limit[i]);
      if (o->from[i][0]) FAIL("version NONE but from[%d] '%s'", i, o->from[i]);
      if (o->has_toptier[i]) FAIL("version NONE but has_toptier[%d]", i);
    }
    return;
  }
  if (!o->path[0]) FAIL("version %d but path \"\"", (int)o->version);
  for (int i = 0; i < TM_LIMIT_COUNT; i++) {
    if (o->version == TM_CGROUP_V1 && (i == TM_LIMIT_MIN || i == TM_LIMIT_LOW)) {
      if (o->limit[i] != 0) FAIL("v1 limit[%d] %llu, not 0", i, (unsigned long long)o->limit[i]);
      continue;
    }
    if ((o->limit[i] == TM_CGROUP_UNLIMITED) != (o->from[i][0] == '\0'))
      FAIL("limit[%d] %llu with from '%s'", i, (unsigned long long)o->limit[i], o->from[i]);
    if (o->from[i][0] && !ancestor_or_self(o->from[i], o->path))
      FAIL("from[%d] '%s' is not path '%s' or an ancestor", i, o->from[i], o->path);
  }
}

static void check_model(int mode, int depth, const char *part[NSLOT], const size_t len[NSLOT],
                        int rc, const tm_cgroup_limits_t *o)
{
  int v1 = mode == 3;
  if (rc != 0) FAIL("model: rc %d", rc);
  if (!v1 && !len[v2_slot(depth, 0)] && !len[v2_slot(depth, 1)]) {
    if (o->version != TM_CGROUP_NONE) FAIL("model: no memory.max/high in %s but version %d", cg_names[depth], (int)o->version);
    return;
  }
  if (o->version != (v1 ? TM_CGROUP_V1 : TM_CGROUP_V2)) FAIL("model: version %d", (int)o->version);
  if (strcmp(o->path, cg_names[depth]) != 0) FAIL("model: path '%s' want '%s'", o->path, cg_names[depth]);
  uint64_t want[TM_LIMIT_COUNT], top = TM_CGROUP_UNLIMITED;
  const char *from[TM_LIMIT_COUNT];
  int has_top = 0;
  for (int i = 0; i < TM_LIMIT_COUNT; i++) { want[i] = TM_CGROUP_UNLIMITED; from[i] = ""; }
  for (int d = depth; d >= 0; d--) {
    int nf = v1 ? V1_FILES : V2_FILES;
    for (int f = 0; f < nf; f++) {
      int k = v1 ? v1_slot(d, f) : v2_slot(d, f);
      int i = v1 ? v1_limit[f] : v2_limit[f];
      uint64_t v;
      if (!len[k] || !ref_value(part[k], len[k], v1, &v)) continue;
      if (i < 0) {
        has_top = 1;
        if (v < top) top = v;
      } else if (v < want[i]) {
        want[i] = v;
        from[i] = cg_names[d];
      }
    }
  }
  for (int i = 0; i < TM_LIMIT_COUNT; i++) {
    if (v1 && (i == TM_LIMIT_MIN || i == TM_LIMIT_LOW)) continue;   /* checked by the contract */
    if (o->limit[i] != want[i] || strcmp(o->from[i], from[i]) != 0)
      FAIL("model: limit[%d] %llu from '%s', want %llu from '%s'", i, (unsigned long long)o->limit[i],
           o->from[i], (unsigned long long)want[i], from[i]);
  }
  for (int i = 0; i < TM_LIMIT_COUNT; i++) {
    int h = i == TM_LIMIT_MAX && has_top;
    if (o->has_toptier[i] != h) FAIL("model: has_toptier[%d] %d want %d", i, o->has_toptier[i], h);
  }
  if (has_top && o->toptier[TM_LIMIT_MAX] != top)
    FAIL("model: toptier[max] %llu want %llu", (unsigned long long)o->toptier[TM_LIMIT_MAX], (unsigned long long)top);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1) return 0;
  int mode = data[0] & 3, depth = (data[0] >> 4) % 3;
  const char *part[NSLOT];
  size_t len[NSLOT];
  const char *s = (const char *)data + 1, *end = (const char *)data + size;
  for (int k = 0; k < NSLOT; k++) {
    const char *e = s < end ? memchr(s, SEP, (size_t)(end - s)) : NULL;
    if (!e) e = end;
    part[k] = s;
    len[k] = s < end ? (size_t)(e - s) : 0;
    s = e < end ? e + 1 : end;
  }
  if (mode >= 2) {
    static char self[64];
    static const char mi_v2[] = "28 25 0:25 / /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw\n";
    static const char mi_v1[] =
      "40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
      "34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n";
    int n = mode == 2 ? snprintf(self, sizeof self, "0::%s\n", cg_names[depth])
                      : snprintf(self, sizeof self, "4:memory:%s\n0::/\n", cg_names[depth]);
    part[0] = self; len[0] = (size_t)n;
    part[1] = mode == 2 ? mi_v2 : mi_v1;
    len[1] = mode == 2 ? sizeof mi_v2 - 1 : sizeof mi_v1 - 1;
  }
  for (int k = 0; k < NSLOT; k++) put(k, part[k], len[k]);

  tm_cgroup_limits_t out;
  memset(&out, 0xA5, sizeof out);
  int rc = tm_cgroup_read(root, &out);
  check_contract(rc, &out);
  if (mode >= 2) check_model(mode, depth, part, len, rc, &out);
  return 0;
}
