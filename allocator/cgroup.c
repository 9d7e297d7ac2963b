/*
 * cgroup: the memory limits of the process's cgroup. The contract is in
 * cgroup.h; reading the kernel's files is kfile's.
 *
 * Everything here runs while malloc initialises, and again from the
 * allocator's slow path (possibly on a small thread stack), so nothing
 * allocates, nothing is kept between calls, and the larger buffers live in
 * helpers that are not inlined into tm_cgroup_read.
 */
#include "cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "kfile.h"
#include "log.h"
#include "text.h"

/* v1 shows "no limit" as PAGE_COUNTER_MAX pages in bytes (2^63 - 4096 with 4 KiB
 * pages, other figures with other page sizes); no real limit comes near 2^62. */
#define CGROUP_V1_UNLIMITED (1ULL << 62)
/* A /proc/self/cgroup line we can use: an id, the controllers, a path. */
#define CGROUP_LINE_MAX (TM_CGROUP_PATH_MAX + 128)
/* mountinfo lines; longer ones (overlayfs with many layers) are cut, which
 * only matters, and is then reported, when the line is a cgroup mount. */
#define CGROUP_MOUNT_LINE_MAX 1024
/* A value file: the longest well-formed one is 20 digits and '\n'. */
#define CGROUP_VALUE_MAX 32

static const char cgroup_self[] = "/proc/self/cgroup";
static const char cgroup_mountinfo[] = "/proc/self/mountinfo";
/* What /proc/self/cgroup appends to the path of a removed v2 cgroup. */
static const char cgroup_deleted[] = " (deleted)";

static const char *const cgroup_v2_files[TM_LIMIT_COUNT] = {
  "memory.min", "memory.low", "memory.high", "memory.max",
};
/* v1 has no min or low: those are set to 0 after the walk. */
static const char *const cgroup_v1_files[TM_LIMIT_COUNT] = {
  NULL, NULL, "memory.soft_limit_in_bytes", "memory.limit_in_bytes",
};
static const char *const cgroup_toptier_files[TM_LIMIT_COUNT] = {
  "memory.toptier_min", "memory.toptier_low", "memory.toptier_high", "memory.toptier_max",
};

/* Where one hierarchy (v2, or v1's memory) puts the process. */
typedef struct cgroup_hier_s {
  const char *name;               /* "v2" or "v1 memory", for warnings */
  bool listed;                    /* /proc/self/cgroup gave a usable path */
  bool deleted;                   /* ... marked " (deleted)" (the suffix is not in path) */
  int mounted;                    /* 0 not mounted; 1 only where path is not under the
                                   * mount's root (mnt is that mount); 2 found */
  int plen;                       /* path's length without a trailing '/' */
  int rlen;                       /* length of the mount's root, removed from path; 0 for "/" */
  char path[TM_CGROUP_PATH_MAX];  /* as /proc/self/cgroup gives it */
  char mnt[TM_KFILE_PATH_MAX];    /* the mount point, unescaped */
} cgroup_hier_t;

/* ---- small pure helpers ------------------------------------------------- */

/* s as it may appear in a one-line warning: control characters (a cgroup name
 * may hold a newline) become '?'; a long s is cut. */
static const char *cgroup_quote(const char *s, char *buf, int size)
{
  int i = 0;
  for (; s[i] && i < size - 1; i++)
    buf[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
  buf[i] = '\0';
  return buf;
}

/* Whether the comma-separated list [s, e) has the item word. */
static bool cgroup_list_has(const char *s, const char *e, const char *word)
{
  size_t n = strlen(word);
  while (s < e) {
    const char *c = memchr(s, ',', (size_t)(e - s));
    if (!c) c = e;
    if ((size_t)(c - s) == n && memcmp(s, word, n) == 0) return true;
    s = c + 1;
  }
  return false;
}

/* The next space-separated field after *p, as [*s, *e); false when none is left. */
static bool cgroup_field(const char **p, const char **s, const char **e)
{
  const char *q = *p;
  while (*q == ' ') q++;
  if (!*q) return false;
  *s = q;
  while (*q && *q != ' ') q++;
  *e = q;
  *p = q;
  return true;
}

static bool cgroup_field_is(const char *s, const char *e, const char *word)
{
  size_t n = strlen(word);
  return (size_t)(e - s) == n && memcmp(s, word, n) == 0;
}

/* mountinfo's octal escapes (\040 for a space, also tab, newline and '\\')
 * undone from [s, e) into buf[size]. false when it does not fit or would hold
 * a NUL. */
static bool cgroup_unescape(const char *s, const char *e, char *buf, int size)
{
  int n = 0;
  while (s < e) {
    char c = *s++;
    if (c == '\\' && e - s >= 3 && s[0] >= '0' && s[0] <= '3' && s[1] >= '0' && s[1] <= '7' &&
        s[2] >= '0' && s[2] <= '7') {
      c = (char)((s[0] - '0') << 6 | (s[1] - '0') << 3 | (s[2] - '0'));
      s += 3;
      if (c == '\0') return false;
    }
    if (n >= size - 1) return false;
    buf[n++] = c;
  }
  buf[n] = '\0';
  return true;
}

/* Whether the path [s, s+n) has a "." or ".." component: /proc/self/cgroup
 * shows "/.." paths for a cgroup outside the process's cgroup namespace, and
 * following them would leave the mount. */
static bool cgroup_has_dots(const char *s, int n)
{
  for (int i = 0; i < n;) {
    int j = i;
    while (j < n && s[j] != '/') j++;
    int len = j - i;
    if ((len == 1 && s[i] == '.') || (len == 2 && s[i] == '.' && s[i + 1] == '.')) return true;
    i = j + 1;
  }
  return false;
}

/* How much of h->path the mount root mroot takes up (0 for "/"), or -1 when
 * the path is not under it. */
static int cgroup_under(const cgroup_hier_t *h, const char *mroot)
{
  if (cgroup_has_dots(h->path, h->plen)) return -1;
  int n = (int)strlen(mroot);
  while (n > 0 && mroot[n - 1] == '/') n--;
  if (n > h->plen || memcmp(h->path, mroot, (size_t)n) != 0) return -1;
  if (n < h->plen && h->path[n] != '/') return -1;
  return n;
}

/* ---- /proc/self/cgroup and mountinfo ------------------------------------ */

/* Fills h->path from the path part of a /proc/self/cgroup line. */
static void cgroup_take_path(cgroup_hier_t *h, const char *file, const char *path, bool cut,
                             bool v2)
{
  char q[TM_KFILE_PATH_MAX];
  int n = (int)strlen(path);
  if (cut || n >= TM_CGROUP_PATH_MAX) {
    tm_warn("cannot use %s: the cgroup %s path is longer than %d bytes; no limits from it",
            cgroup_quote(file, q, sizeof q), h->name, TM_CGROUP_PATH_MAX - 1);
    return;
  }
  int sn = (int)sizeof cgroup_deleted - 1;
  if (v2 && n > sn && memcmp(path + n - sn, cgroup_deleted, (size_t)sn) == 0) {
    h->deleted = true;
    n -= sn;
  }
  memcpy(h->path, path, (size_t)n);
  h->path[n] = '\0';
  while (n > 0 && h->path[n - 1] == '/') n--;
  h->plen = n;
  h->listed = true;
}

/* Opens root+file (path[TM_KFILE_PATH_MAX] receives it) for reading by lines.
 * false when it cannot, with a warning unless the file is absent. */
static bool cgroup_open_lines(const char *root, const char *file, char *path,
                              tm_kfile_lines_t *r)
{
  char q[TM_KFILE_PATH_MAX];
  if (tm_kfile_path(path, root, file, NULL, -1, NULL)) return false;
  int err = tm_kfile_lines_open(r, path);
  if (err && err != ENOENT)
    tm_warn("cannot read %s: %s; no cgroup limits", cgroup_quote(path, q, sizeof q),
            tm_kfile_errstr(err));
  return err == 0;
}

/* The process's v2 cgroup ("0::PATH") and v1 memory cgroup ("N:...memory...:PATH"). */
__attribute__((noinline)) static void cgroup_read_self(const char *root, cgroup_hier_t *v2,
                                                       cgroup_hier_t *v1)
{
  char path[TM_KFILE_PATH_MAX], q[TM_KFILE_PATH_MAX];
  tm_kfile_lines_t r;
  if (!cgroup_open_lines(root, cgroup_self, path, &r)) return;
  char line[CGROUP_LINE_MAX];
  int cut;
  bool malformed = false;
  while (tm_kfile_next_line(&r, line, sizeof line, &cut) >= 0) {
    char *c1 = strchr(line, ':');
    char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    uint64_t id;
    if (!c2 || tm_text_parse_u64(line, c1, &id) || c2[1] != '/') {
      malformed = true;
      continue;
    }
    if (id == 0 && c2 == c1 + 1) {
      if (!v2->listed) cgroup_take_path(v2, path, c2 + 1, cut, true);
    } else if (cgroup_list_has(c1 + 1, c2, "memory")) {
      if (!v1->listed) cgroup_take_path(v1, path, c2 + 1, cut, false);
    }
  }
  close(r.fd);
  /* The lines that parse are still used: each names its own hierarchy. */
  if (malformed)
    tm_warn("cannot use %s: a line is not ID:CONTROLLERS:/PATH; that line is ignored",
            cgroup_quote(path, q, sizeof q));
}

/* Where the hierarchies of v2 and v1 are mounted. Of several mounts of one
 * hierarchy, the first whose root holds the process's cgroup is used. */
__attribute__((noinline)) static void cgroup_read_mounts(const char *root, cgroup_hier_t *v2,
                                                         cgroup_hier_t *v1)
{
  char path[TM_KFILE_PATH_MAX], q[TM_KFILE_PATH_MAX];
  tm_kfile_lines_t r;
  if (!cgroup_open_lines(root, cgroup_mountinfo, path, &r)) return;
  char line[CGROUP_MOUNT_LINE_MAX];
  char mroot[TM_CGROUP_PATH_MAX], mnt[TM_KFILE_PATH_MAX];
  int cut;
  const char *bad = NULL;
  while (tm_kfile_next_line(&r, line, sizeof line, &cut) >= 0) {
    /* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS */
    const char *p = line, *s[5], *e[5], *ts, *te, *fs, *fe, *ss, *se, *os, *oe;
    int i = 0;
    while (i < 5 && cgroup_field(&p, &s[i], &e[i])) i++;
    bool dash = false;
    while (!dash && cgroup_field(&p, &ts, &te)) dash = cgroup_field_is(ts, te, "-");
    if (i < 5 || !dash || !cgroup_field(&p, &fs, &fe) || !cgroup_field(&p, &ss, &se) ||
        !cgroup_field(&p, &os, &oe)) {
      /* A cut line whose end we lost is some other long mount, not a bad file. */
      if (!cut) bad = "a line is not in mountinfo's format";
      continue;
    }
    cgroup_hier_t *h = NULL;
    if (cgroup_field_is(fs, fe, "cgroup2"))
      h = v2;
    else if (cgroup_field_is(fs, fe, "cgroup") && cgroup_list_has(os, oe, "memory"))
      h = v1;
    if (!h || !h->listed || h->mounted == 2) continue;
    if (cut) {
      bad = "a cgroup mount's line is too long";
      continue;
    }
    if (!cgroup_unescape(s[3], e[3], mroot, sizeof mroot) ||
        !cgroup_unescape(s[4], e[4], mnt, sizeof mnt)) {
      bad = "a cgroup mount's root or mount point is too long or malformed";
      continue;
    }
    int rlen = cgroup_under(h, mroot);
    if (rlen < 0 && h->mounted == 1) continue;   /* the first such mount is named */
    memcpy(h->mnt, mnt, sizeof mnt);
    h->mounted = rlen < 0 ? 1 : 2;
    h->rlen = rlen < 0 ? 0 : rlen;
  }
  close(r.fd);
  if (bad) tm_warn("cannot use %s: %s", cgroup_quote(path, q, sizeof q), bad);
}

/* ---- a hierarchy's directories and values --------------------------------- */

/* buf[TM_KFILE_PATH_MAX] = root + h's mount point + h->path[rlen, len): the
 * directory of the cgroup h->path[0, len). Its length, or -1 when too long. */
static int cgroup_dir(char *buf, const char *root, const cgroup_hier_t *h, int len)
{
  int n = 0;
  buf[0] = '\0';
  if (tm_text_append(buf, TM_KFILE_PATH_MAX, &n, root) ||
      tm_text_append(buf, TM_KFILE_PATH_MAX, &n, h->mnt))
    return -1;
  int tail = len - h->rlen;
  if (n + tail >= TM_KFILE_PATH_MAX) return -1;
  memcpy(buf + n, h->path + h->rlen, (size_t)tail);
  n += tail;
  buf[n] = '\0';
  return n;
}

/* dst = the cgroup h->path[0, len) as /proc/self/cgroup would name it. */
static void cgroup_name(char *dst, const cgroup_hier_t *h, int len)
{
  if (len == 0) {
    memcpy(dst, "/", 2);
    return;
  }
  memcpy(dst, h->path, (size_t)len);
  dst[len] = '\0';
}

const char *tm_cgroup_parse_value(const char *buf, int n, bool v1, uint64_t *v)
{
  const char *what = v1 ? "not a number and a newline" : "not a number or \"max\" and a newline";
  if (n < 2 || buf[n - 1] != '\n') return what;
  if (!v1 && n == 4 && memcmp(buf, "max", 3) == 0) {
    *v = TM_CGROUP_UNLIMITED;
    return NULL;
  }
  int err = tm_text_parse_u64(buf, buf + n - 1, v);
  if (err == ERANGE) return "number out of range";
  if (err) return what;
  if (v1 && *v >= CGROUP_V1_UNLIMITED) *v = TM_CGROUP_UNLIMITED;
  return NULL;
}

/* Reads dir/file (dir is buf[0, dlen); buf is restored). true with *v set;
 * false when the file is absent (silently) or unusable (with one warning). */
static bool cgroup_value(char *buf, int dlen, const char *file, bool v1, uint64_t *v)
{
  int n = dlen;
  bool ok = false;
  if (tm_text_append(buf, TM_KFILE_PATH_MAX, &n, "/") ||
      tm_text_append(buf, TM_KFILE_PATH_MAX, &n, file)) {
    char q[TM_KFILE_PATH_MAX];
    buf[dlen] = '\0';
    tm_warn("cannot use %s/%s: path too long; it limits nothing",
            cgroup_quote(buf, q, sizeof q), file);
    return false;
  }
  char text[CGROUP_VALUE_MAX];
  int len = tm_kfile_read(buf, text, sizeof text);
  const char *why = NULL;
  if (len < 0)
    why = -len == ENOENT ? NULL : -len == EFBIG ? "too long for a value" : tm_kfile_errstr(-len);
  else if (!(why = tm_cgroup_parse_value(text, len, v1, v)))
    ok = true;
  if (why) {
    char q[TM_KFILE_PATH_MAX];
    tm_warn("cannot use %s: %s; it limits nothing", cgroup_quote(buf, q, sizeof q), why);
  }
  buf[dlen] = '\0';
  return ok;
}

/* Applies every cgroup from h's to its mount's root, the nearest first: a
 * value replaces the one so far only when smaller, so on a tie the nearer
 * cgroup is named. */
__attribute__((noinline)) static void cgroup_walk(const char *root, const cgroup_hier_t *h,
                                                  bool v1, tm_cgroup_limits_t *out)
{
  char buf[TM_KFILE_PATH_MAX];
  for (int len = h->plen;;) {
    int dlen = cgroup_dir(buf, root, h, len);
    /* An ancestor's path is shorter than the one already opened. */
    if (dlen < 0) break;
    for (int i = 0; i < TM_LIMIT_COUNT; i++) {
      uint64_t v;
      const char *file = v1 ? cgroup_v1_files[i] : cgroup_v2_files[i];
      if (file && cgroup_value(buf, dlen, file, v1, &v) && v < out->limit[i]) {
        out->limit[i] = v;
        cgroup_name(out->from[i], h, len);
      }
      /* The toptier files are a proposal for v2's interface only. */
      if (!v1 && cgroup_value(buf, dlen, cgroup_toptier_files[i], false, &v)) {
        out->has_toptier[i] = true;
        if (v < out->toptier[i]) out->toptier[i] = v;
      }
    }
    if (len == h->rlen) break;
    /* h->path[rlen] is '/', so this stops at rlen at the latest. */
    while (len > h->rlen && h->path[len - 1] != '/') len--;
    len--;
  }
}

/* Says that h's path is outside every mount of its hierarchy. */
__attribute__((noinline)) static void cgroup_warn_outside(const cgroup_hier_t *h)
{
  char q[TM_KFILE_PATH_MAX], m[TM_KFILE_PATH_MAX];
  tm_warn("cgroup %s %s is not under the root of its mount at %s; no limits from it", h->name,
          cgroup_quote(h->path, q, sizeof q), cgroup_quote(h->mnt, m, sizeof m));
}

/* Opens h's directory to see that the cgroup is there. 0 or a positive errno,
 * with one warning. */
__attribute__((noinline)) static int cgroup_check_dir(const char *root, const cgroup_hier_t *h)
{
  char buf[TM_KFILE_PATH_MAX], q[TM_KFILE_PATH_MAX];
  int err = 0;
  if (h->deleted) {
    tm_warn("cgroup %s %s was removed (%s says deleted); no limits from it", h->name,
            cgroup_quote(h->path, q, sizeof q), cgroup_self);
    return ENOENT;
  }
  if (cgroup_dir(buf, root, h, h->plen) < 0) {
    err = ENAMETOOLONG;
    tm_warn("cannot open the cgroup %s directory of %s: %s; no limits from it", h->name,
            cgroup_quote(h->path, q, sizeof q), tm_kfile_errstr(err));
    return err;
  }
  int fd = open(buf, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    err = errno;
    tm_warn("cannot open cgroup %s directory %s: %s; no limits from it", h->name,
            cgroup_quote(buf, q, sizeof q), tm_kfile_errstr(err));
    return err;
  }
  close(fd);
  return 0;
}

/* Whether the v2 cgroup's directory has memory.max or memory.high, i.e. the
 * memory controller is enabled for it. */
__attribute__((noinline)) static bool cgroup_v2_has_memory(const char *root,
                                                           const cgroup_hier_t *h)
{
  char buf[TM_KFILE_PATH_MAX];
  int dlen = cgroup_dir(buf, root, h, h->plen);
  if (dlen < 0) return false;
  for (int i = TM_LIMIT_HIGH; i <= TM_LIMIT_MAX; i++) {
    int n = dlen;
    if (tm_text_append(buf, sizeof buf, &n, "/") ||
        tm_text_append(buf, sizeof buf, &n, cgroup_v2_files[i]))
      return false;
    if (access(buf, F_OK) == 0) return true;
    buf[dlen] = '\0';
  }
  return false;
}

/* ---- the reader ------------------------------------------------------------ */

static void cgroup_reset(tm_cgroup_limits_t *out)
{
  memset(out, 0, sizeof *out);
  for (int i = 0; i < TM_LIMIT_COUNT; i++) out->limit[i] = out->toptier[i] = TM_CGROUP_UNLIMITED;
}

int tm_cgroup_read(const char *root, tm_cgroup_limits_t *out)
{
  cgroup_reset(out);
  if (!root) root = "";
  cgroup_hier_t h[2];
  memset(h, 0, sizeof h);
  h[0].name = "v2";
  h[1].name = "v1 memory";
  cgroup_read_self(root, &h[0], &h[1]);
  if (!h[0].listed && !h[1].listed) return 0;
  cgroup_read_mounts(root, &h[0], &h[1]);

  /* v2 first: on a hybrid host it is mounted too, but without memory. */
  int err = 0;
  for (int k = 0; k < 2; k++) {
    const cgroup_hier_t *hh = &h[k];
    bool v1 = k == 1;
    if (!hh->listed || hh->mounted == 0) continue;
    if (hh->mounted == 1) {
      cgroup_warn_outside(hh);
      continue;
    }
    int e = cgroup_check_dir(root, hh);
    if (e) {
      if (!err) err = e;
      continue;
    }
    if (!v1 && !cgroup_v2_has_memory(root, hh)) continue;
    cgroup_walk(root, hh, v1, out);
    if (v1) {
      out->limit[TM_LIMIT_MIN] = out->limit[TM_LIMIT_LOW] = 0;
      out->from[TM_LIMIT_MIN][0] = out->from[TM_LIMIT_LOW][0] = '\0';
    }
    out->version = v1 ? TM_CGROUP_V1 : TM_CGROUP_V2;
    memcpy(out->path, hh->path, sizeof out->path);
    if (cgroup_dir(out->dir, root, hh, hh->plen) < 0) out->dir[0] = '\0';
    break;
  }
  return err;
}

const char *tm_cgroup_version_name(tm_cgroup_version_t v)
{
  switch (v) {
  case TM_CGROUP_NONE: return "no cgroup";
  case TM_CGROUP_V2: return "cgroup v2";
  case TM_CGROUP_V1: return "cgroup v1";
  }
  return "no cgroup";
}
