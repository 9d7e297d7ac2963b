/*
 * topology: NUMA nodes -> tiers. The rules are in topology.h.
 *
 * Everything here runs while malloc initialises, so nothing allocates: files
 * are read with open/read into stack buffers, directories are listed with
 * getdents64, and paths are built by hand (no stdio, no opendir). The largest
 * stack user is one TOPO_FILE_MAX buffer at a time.
 *
 * Warnings follow one rule: a file that is absent (ENOENT) is a fact about the
 * kernel (older kernels have no memory_tiering, containers may hide
 * /proc/self/status) and is silent; a file that exists but cannot be read or
 * parsed gets one line, because it means the numbers we use may be wrong.
 */
#include "topology.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"

#define TOPO_PATH_MAX 512
/* Whole-file reads (nodelists). The longest nodelist TIER_MAX_NODES nodes can
 * produce is every other node listed singly, about 2.5 KB. */
#define TOPO_FILE_MAX 4096
/* Longest line we need whole: Mems_allowed with 32 words is about 300 bytes. */
#define TOPO_LINE_MAX 512
/* memory_tierN directories considered; only the lowest N are kept when there
 * are more, and the nodes of the rest end up in the last tier anyway. */
#define TOPO_KTIERS_MAX 64

static const char topo_node_dir[] = "/sys/devices/system/node";
static const char topo_tier_dir[] = "/sys/devices/virtual/memory_tiering";

/* ---- small pure helpers ------------------------------------------------- */

static void topo_mask_clear(tm_nodemask_t *m)
{
  memset(m, 0, sizeof *m);
}

static int topo_mask_empty(const tm_nodemask_t *m)
{
  for (int i = 0; i < TIER_NODE_WORDS; i++)
    if (m->w[i]) return 0;
  return 1;
}

static void topo_mask_and(tm_nodemask_t *d, const tm_nodemask_t *a)
{
  for (int i = 0; i < TIER_NODE_WORDS; i++) d->w[i] &= a->w[i];
}

static void topo_mask_andnot(tm_nodemask_t *d, const tm_nodemask_t *a)
{
  for (int i = 0; i < TIER_NODE_WORDS; i++) d->w[i] &= ~a->w[i];
}

static void topo_mask_or(tm_nodemask_t *d, const tm_nodemask_t *a)
{
  for (int i = 0; i < TIER_NODE_WORDS; i++) d->w[i] |= a->w[i];
}

/* Appends src to buf at *len, keeping buf NUL-terminated; returns -1 when it
 * does not fit, which callers turn into ENAMETOOLONG. */
static int topo_append(char *buf, int size, int *len, const char *src)
{
  int n = (int)strlen(src);
  if (*len + n >= size) return -1;
  memcpy(buf + *len, src, (size_t)n + 1);
  *len += n;
  return 0;
}

static int topo_append_uint(char *buf, int size, int *len, unsigned v)
{
  char tmp[12];
  int i = (int)sizeof tmp;
  tmp[--i] = '\0';
  do {
    tmp[--i] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  return topo_append(buf, size, len, tmp + i);
}

/* path = root + dir [+ "/" + name + id] [+ "/" + leaf]; name NULL skips the
 * middle component and id < 0 omits the number. */
static int topo_path(char *buf, const char *root, const char *dir, const char *name, long id,
                     const char *leaf)
{
  int len = 0;
  buf[0] = '\0';
  if (topo_append(buf, TOPO_PATH_MAX, &len, root) ||
      topo_append(buf, TOPO_PATH_MAX, &len, dir))
    return ENAMETOOLONG;
  if (name) {
    if (topo_append(buf, TOPO_PATH_MAX, &len, "/") ||
        topo_append(buf, TOPO_PATH_MAX, &len, name) ||
        (id >= 0 && topo_append_uint(buf, TOPO_PATH_MAX, &len, (unsigned)id)))
      return ENAMETOOLONG;
  }
  if (leaf && (topo_append(buf, TOPO_PATH_MAX, &len, "/") ||
               topo_append(buf, TOPO_PATH_MAX, &len, leaf)))
    return ENAMETOOLONG;
  return 0;
}

/* strerror may allocate (gettext, once a locale is set), so warnings use this
 * short table instead. */
static const char *topo_errstr(int err)
{
  switch (err) {
  case ENOENT: return "no such file";
  case EACCES: return "permission denied";
  case EPERM: return "not permitted";
  case EIO: return "I/O error";
  case EINVAL: return "malformed";
  case EFBIG: return "too long";
  case ENAMETOOLONG: return "path too long";
  case ENOTDIR: return "not a directory";
  case EMFILE: case ENFILE: return "out of file descriptors";
  }
  return "read error";
}

/* ---- reading files without allocating ----------------------------------- */

/* Reads the whole of path into buf (NUL-terminated). Returns the length, or a
 * negative errno; -EFBIG when the file does not fit, so a truncated nodelist is
 * never mistaken for a shorter one. */
static int topo_read_file(const char *path, char *buf, int size)
{
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  int len = 0;
  for (;;) {
    if (len == size - 1) {
      char extra;
      ssize_t r = read(fd, &extra, 1);
      close(fd);
      buf[len] = '\0';
      return r == 0 ? len : -EFBIG;
    }
    ssize_t r = read(fd, buf + len, (size_t)(size - 1 - len));
    if (r < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      close(fd);
      return -e;
    }
    if (r == 0) break;
    len += (int)r;
  }
  close(fd);
  buf[len] = '\0';
  return len;
}

/* Line reader over an fd for files longer than we want to hold whole
 * (/proc/self/status with NR_CPUS=8192 has a 2 KB Cpus_allowed line). */
typedef struct topo_lines_s {
  int fd;
  int len, pos;
  char buf[1024];
} topo_lines_t;

/* Copies the next line, without its '\n', into line[size]. Returns its length,
 * or -1 at the end of the file or on a read error. A line longer than size-1
 * is cut to fit and *cut is set. */
static int topo_next_line(topo_lines_t *r, char *line, int size, int *cut)
{
  int n = 0, any = 0;
  *cut = 0;
  for (;;) {
    if (r->pos == r->len) {
      ssize_t got = read(r->fd, r->buf, sizeof r->buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) break;
      r->len = (int)got;
      r->pos = 0;
    }
    any = 1;
    char c = r->buf[r->pos++];
    if (c == '\n') break;
    if (n < size - 1)
      line[n++] = c;
    else
      *cut = 1;
  }
  line[n] = '\0';
  return any ? n : -1;
}

/* Parses "<digits> kB" after the "MemTotal:" label. 0 or EINVAL. */
static int topo_parse_kb(const char *s, uint64_t *bytes)
{
  while (*s == ' ' || *s == '\t') s++;
  if (*s < '0' || *s > '9') return EINVAL;
  uint64_t kb = 0;
  for (; *s >= '0' && *s <= '9'; s++) {
    if (kb > (UINT64_MAX / 1024 - 9) / 10) return EINVAL;
    kb = kb * 10 + (uint64_t)(*s - '0');
  }
  while (*s == ' ' || *s == '\t') s++;
  if (strcmp(s, "kB") != 0) return EINVAL;
  *bytes = kb * 1024;
  return 0;
}

/* MemTotal in bytes from a meminfo file: /proc/meminfo ("MemTotal: N kB") or a
 * node's ("Node 3 MemTotal: N kB"). 0, or a positive errno (EINVAL when the
 * file has no well-formed MemTotal line). */
static int topo_read_memtotal(const char *path, uint64_t *bytes)
{
  topo_lines_t r;
  r.fd = open(path, O_RDONLY | O_CLOEXEC);
  if (r.fd < 0) return errno;
  r.len = r.pos = 0;
  char line[128];
  int cut, n, err = EINVAL;
  while ((n = topo_next_line(&r, line, sizeof line, &cut)) >= 0) {
    char *p = strstr(line, "MemTotal:");
    if (!p || cut) continue;
    err = topo_parse_kb(p + strlen("MemTotal:"), bytes);
    break;
  }
  close(r.fd);
  return err;
}

/* Parses the Mems_allowed value: comma-separated 32-bit hex words, most
 * significant first (32 of them on NODES_SHIFT=10 kernels). Bits for nodes at
 * or above TIER_MAX_NODES are ignored: we cannot place such nodes anyway. */
static int topo_parse_hexmask(const char *s, tm_nodemask_t *m)
{
  int nwords = 1;
  for (const char *p = s; *p; p++) nwords += *p == ',';
  tm_nodemask_t out;
  topo_mask_clear(&out);
  int word = nwords - 1;
  while (word >= 0) {
    uint32_t v = 0;
    int digits = 0;
    for (; *s && *s != ','; s++, digits++) {
      int d;
      if (*s >= '0' && *s <= '9') d = *s - '0';
      else if (*s >= 'a' && *s <= 'f') d = *s - 'a' + 10;
      else if (*s >= 'A' && *s <= 'F') d = *s - 'A' + 10;
      else return EINVAL;
      if (digits == 8) return EINVAL;
      v = v << 4 | (uint32_t)d;
    }
    if (digits == 0) return EINVAL;
    if (word * 32 < TIER_MAX_NODES) out.w[word / 2] |= (uint64_t)v << (32 * (word % 2));
    if (*s == ',') s++;
    word--;
  }
  *m = out;
  return 0;
}

/* Mems_allowed of <root>/proc/self/status into *m. 0, ENOENT when there is no
 * file or no such line (no restriction), or another errno. */
static int topo_read_mems_allowed(const char *path, tm_nodemask_t *m)
{
  static const char key[] = "Mems_allowed:";
  topo_lines_t r;
  r.fd = open(path, O_RDONLY | O_CLOEXEC);
  if (r.fd < 0) return errno;
  r.len = r.pos = 0;
  char line[TOPO_LINE_MAX];
  int cut, n, err = ENOENT;
  while ((n = topo_next_line(&r, line, sizeof line, &cut)) >= 0) {
    if (strncmp(line, key, sizeof key - 1) != 0) continue;
    const char *v = line + sizeof key - 1;
    while (*v == ' ' || *v == '\t') v++;
    err = cut ? EINVAL : topo_parse_hexmask(v, m);
    break;
  }
  close(r.fd);
  return err;
}

/* ---- nodelists ------------------------------------------------------------ */

/* Parses the nodelist in [s, e) into *m (untouched on error). Accepts what the
 * kernel prints ("%*pbl": "0-3,5"), and nothing looser: no spaces, no empty
 * items, no reversed ranges, no node >= TIER_MAX_NODES. */
static int topo_parse_span(const char *s, const char *e, tm_nodemask_t *m)
{
  tm_nodemask_t out;
  topo_mask_clear(&out);
  while (s < e) {
    long lo = -1, hi;
    for (; s < e && *s >= '0' && *s <= '9'; s++) {
      lo = (lo < 0 ? 0 : lo) * 10 + (*s - '0');
      if (lo >= TIER_MAX_NODES) return EINVAL;
    }
    if (lo < 0) return EINVAL;
    hi = lo;
    if (s < e && *s == '-') {
      s++;
      hi = -1;
      for (; s < e && *s >= '0' && *s <= '9'; s++) {
        hi = (hi < 0 ? 0 : hi) * 10 + (*s - '0');
        if (hi >= TIER_MAX_NODES) return EINVAL;
      }
      if (hi < lo) return EINVAL;  /* also "3-" (hi stays -1) */
    }
    for (long n = lo; n <= hi; n++) tm_nodemask_set(&out, (int)n);
    if (s == e) break;
    if (*s != ',' || s + 1 == e) return EINVAL;
    s++;
  }
  *m = out;
  return 0;
}

int tm_nodelist_parse(const char *s, tm_nodemask_t *m)
{
  if (!s || !m) return EINVAL;
  const char *e = s + strlen(s);
  if (e > s && e[-1] == '\n') e--;  /* sysfs ends every value with one */
  return topo_parse_span(s, e, m);
}

/* snprintf-like: writes at most size-1 characters plus a NUL (when size > 0)
 * and returns the length the whole list needs, so a caller can tell a cut
 * result by comparing it with size. */
int tm_nodelist_format(const tm_nodemask_t *m, char *buf, int size)
{
  int len = 0;
  char item[24];
  if (size > 0) buf[0] = '\0';
  for (int n = 0; n < TIER_MAX_NODES; n++) {
    if (!tm_nodemask_test(m, n)) continue;
    int hi = n;
    while (hi + 1 < TIER_MAX_NODES && tm_nodemask_test(m, hi + 1)) hi++;
    int il = 0;
    item[0] = '\0';
    if (len) topo_append(item, sizeof item, &il, ",");
    topo_append_uint(item, sizeof item, &il, (unsigned)n);
    if (hi > n) {
      topo_append(item, sizeof item, &il, "-");
      topo_append_uint(item, sizeof item, &il, (unsigned)hi);
    }
    for (int i = 0; i < il; i++, len++)
      if (len < size - 1) buf[len] = item[i];
    if (size > 0) buf[len < size - 1 ? len : size - 1] = '\0';
    n = hi;
  }
  return len;
}

/* Reads a nodelist file into *m. 0 or a positive errno. Not inlined, so its
 * buffer is on the stack only while it runs, not in every caller's frame. */
static __attribute__((noinline)) int topo_read_nodelist(const char *path, tm_nodemask_t *m)
{
  char buf[TOPO_FILE_MAX];
  int n = topo_read_file(path, buf, sizeof buf);
  if (n < 0) return -n;
  return tm_nodelist_parse(buf, m);
}

/* Like topo_read_nodelist, but warns about anything other than absence. */
static int topo_read_nodelist_warn(const char *path, tm_nodemask_t *m)
{
  int err = topo_read_nodelist(path, m);
  if (err && err != ENOENT)
    tm_warn("cannot use %s: %s", path, err == EINVAL ? "not a nodelist" : topo_errstr(err));
  return err;
}

/* ---- directories ---------------------------------------------------------- */

/* The kernel's struct linux_dirent64; glibc's struct dirent64 matches it but
 * is not guaranteed to, and getdents64 has no glibc wrapper before 2.30. */
struct topo_dirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

/* Calls fn(arg, N) for each entry of dir named <prefix><N>, N decimal without
 * leading zeros. 0 or a positive errno from open/getdents64. */
static int topo_scan_ids(const char *dir, const char *prefix, void (*fn)(void *, unsigned long),
                         void *arg)
{
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno;
  size_t plen = strlen(prefix);
  _Alignas(8) char buf[1024];
  int err = 0;
  for (;;) {
    long got = syscall(SYS_getdents64, fd, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) err = errno;
    if (got <= 0) break;
    for (long off = 0; off < got;) {
      struct topo_dirent64 *d = (struct topo_dirent64 *)(buf + off);
      off += d->d_reclen;
      const char *s = d->d_name;
      if (strncmp(s, prefix, plen) != 0) continue;
      s += plen;
      if (*s < '0' || *s > '9' || (s[0] == '0' && s[1])) continue;
      unsigned long v = 0;
      for (; *s >= '0' && *s <= '9' && v < 1UL << 40; s++) v = v * 10 + (unsigned long)(*s - '0');
      if (*s) continue;
      fn(arg, v);
    }
  }
  close(fd);
  return err;
}

static void topo_collect_node(void *arg, unsigned long id)
{
  if (id < TIER_MAX_NODES) tm_nodemask_set(arg, (int)id);
}

/* Kernel tier ids, ascending, the lowest TOPO_KTIERS_MAX of them. */
typedef struct topo_ktiers_s {
  int n;
  unsigned long id[TOPO_KTIERS_MAX];
} topo_ktiers_t;

static void topo_collect_ktier(void *arg, unsigned long id)
{
  topo_ktiers_t *k = arg;
  if (k->n == TOPO_KTIERS_MAX) {
    if (id >= k->id[k->n - 1]) return;
    k->n--;
  }
  int i = k->n++;
  for (; i > 0 && k->id[i - 1] > id; i--) k->id[i] = k->id[i - 1];
  k->id[i] = id;
}

/* ---- building the result -------------------------------------------------- */

static void topo_reset(tm_topology_t *t)
{
  memset(t, 0, sizeof *t);
  memset(t->node_tier, -1, sizeof t->node_tier);
}

/* Node n's MemTotal, 0 when unknown (with a warning: the node has memory, so
 * its meminfo should be there). */
static uint64_t topo_node_capacity(const char *root, int n)
{
  char path[TOPO_PATH_MAX];
  uint64_t bytes = 0;
  if (topo_path(path, root, topo_node_dir, "node", n, "meminfo")) return 0;
  int err = topo_read_memtotal(path, &bytes);
  if (err) {
    tm_warn("cannot read MemTotal from %s: %s; tier capacity will be short", path,
            err == EINVAL ? "no MemTotal line" : topo_errstr(err));
    return 0;
  }
  return bytes;
}

/* Adds the nodes of *m (already free of placed nodes) to tier i, opening it
 * when i == t->ntiers. */
static void topo_add(tm_topology_t *t, const char *root, int i, const tm_nodemask_t *m,
                     int kernel_tier)
{
  tm_tier_t *tier = &t->tier[i];
  if (i == t->ntiers) {
    t->ntiers++;
    tier->first_node = -1;
    tier->kernel_tier = kernel_tier;
  }
  for (int n = 0; n < TIER_MAX_NODES; n++) {
    if (!tm_nodemask_test(m, n)) continue;
    tm_nodemask_set(&tier->nodes, n);
    tier->nnodes++;
    if (tier->first_node < 0 || n < tier->first_node) tier->first_node = n;
    tier->capacity += topo_node_capacity(root, n);
    t->node_tier[n] = (int8_t)i;
  }
}

/* Opens a new tier for *m, or folds it into the last one when all
 * TIER_MAX_TIERS are taken. Returns 1 when it folded. */
static int topo_push(tm_topology_t *t, const char *root, const tm_nodemask_t *m, int kernel_tier)
{
  int fold = t->ntiers == TIER_MAX_TIERS;
  topo_add(t, root, fold ? t->ntiers - 1 : t->ntiers, m, kernel_tier);
  return fold;
}

/* The spec as it may appear in a one-line warning: control characters become
 * '?', and a long spec is cut with "...". */
static const char *topo_quote(const char *spec, char *buf, int size)
{
  int i = 0;
  for (; spec[i] && i < size - 1; i++)
    buf[i] = (unsigned char)spec[i] < 0x20 || spec[i] == 0x7f ? '?' : spec[i];
  buf[i] = '\0';
  if (spec[i] && size > 4) memcpy(buf + size - 4, "...", 4);
  return buf;
}

/* TIERMALLOC_TIERS. Returns 0 when it built the topology, or -1 to go on with
 * discovery (after saying why). usable: nodes with memory we may use. */
static int topo_from_override(tm_topology_t *t, const char *root, const char *spec,
                              const tm_nodemask_t *usable)
{
  /* Validate the whole spec before building anything, so a bad spec leaves
   * no half-built topology behind. */
  tm_nodemask_t seen, dropped;
  char q[96];
  topo_mask_clear(&seen);
  topo_mask_clear(&dropped);
  int nonempty = 0;
  for (const char *s = spec;;) {
    const char *e = strchr(s, ';');
    if (!e) e = s + strlen(s);
    tm_nodemask_t m, dup;
    if (e == s || topo_parse_span(s, e, &m)) {
      tm_warn("TIERMALLOC_TIERS='%s' is not a ';'-separated list of nodelists (e.g. 0,1;2;3); "
              "ignored", topo_quote(spec, q, sizeof q));
      return -1;
    }
    dup = m;
    topo_mask_and(&dup, &seen);
    if (!topo_mask_empty(&dup)) {
      tm_warn("TIERMALLOC_TIERS='%s' names a node in two tiers; ignored",
              topo_quote(spec, q, sizeof q));
      return -1;
    }
    topo_mask_or(&seen, &m);
    tm_nodemask_t bad = m;
    topo_mask_andnot(&bad, usable);
    topo_mask_or(&dropped, &bad);
    topo_mask_and(&m, usable);
    nonempty += !topo_mask_empty(&m);
    if (!*e) break;
    s = e + 1;
  }
  if (!topo_mask_empty(&dropped)) {
    char list[128];
    tm_nodelist_format(&dropped, list, sizeof list);
    tm_warn("TIERMALLOC_TIERS: node(s) %s have no memory or are not allowed (Mems_allowed); "
            "dropped", list);
  }
  if (!nonempty) {
    tm_warn("TIERMALLOC_TIERS='%s' leaves no usable node; ignored",
            topo_quote(spec, q, sizeof q));
    return -1;
  }
  if (nonempty > TIER_MAX_TIERS)
    tm_warn("TIERMALLOC_TIERS gives %d tiers; tiers past %d are folded into the last",
            nonempty, TIER_MAX_TIERS);

  topo_reset(t);
  t->source = TM_TOPO_OVERRIDE;
  for (const char *s = spec;;) {
    const char *e = strchr(s, ';');
    if (!e) e = s + strlen(s);
    tm_nodemask_t m;
    topo_parse_span(s, e, &m);
    topo_mask_and(&m, usable);
    if (!topo_mask_empty(&m)) topo_push(t, root, &m, -1);
    if (!*e) break;
    s = e + 1;
  }
  return 0;
}

/* The kernel's memory tiers. Returns 0 when they give more than one tier among
 * the usable nodes, else -1 (nothing built; fall back). */
static int topo_from_kernel(tm_topology_t *t, const char *root, const tm_nodemask_t *usable)
{
  char path[TOPO_PATH_MAX];
  topo_ktiers_t k;
  k.n = 0;
  if (topo_path(path, root, topo_tier_dir, NULL, -1, NULL)) return -1;
  int err = topo_scan_ids(path, "memory_tier", topo_collect_ktier, &k);
  if (err && err != ENOENT) tm_warn("cannot list %s: %s", path, topo_errstr(err));
  if (k.n == 0) return -1;

  /* A first pass counts the kernel tiers that hold usable nodes: the rule is
   * "more than one tier among the allowed nodes", not in the whole machine. */
  int distinct = 0;
  tm_nodemask_t placed;
  topo_mask_clear(&placed);
  for (int i = 0; i < k.n; i++) {
    tm_nodemask_t m;
    if (topo_path(path, root, topo_tier_dir, "memory_tier", (long)k.id[i], "nodelist") ||
        topo_read_nodelist_warn(path, &m))
      continue;
    topo_mask_and(&m, usable);
    topo_mask_andnot(&m, &placed);
    if (topo_mask_empty(&m)) continue;
    topo_mask_or(&placed, &m);
    distinct++;
  }
  if (distinct < 2) return -1;

  topo_reset(t);
  t->source = TM_TOPO_KERNEL_TIERS;
  topo_mask_clear(&placed);
  int folded = 0;
  for (int i = 0; i < k.n; i++) {
    tm_nodemask_t m;
    if (topo_path(path, root, topo_tier_dir, "memory_tier", (long)k.id[i], "nodelist") ||
        topo_read_nodelist(path, &m))
      continue;
    topo_mask_and(&m, usable);
    topo_mask_andnot(&m, &placed);
    if (topo_mask_empty(&m)) continue;
    topo_mask_or(&placed, &m);
    folded += topo_push(t, root, &m, (int)k.id[i]);
  }
  if (folded)
    tm_warn("the kernel formed %d memory tiers; tiers past %d are folded into the last",
            distinct, TIER_MAX_TIERS);
  /* A usable node in no kernel tier is of unknown speed; the bottom tier is
   * the safe guess, as it keeps the node out of the top-tier budget. */
  tm_nodemask_t rest = *usable;
  topo_mask_andnot(&rest, &placed);
  if (!topo_mask_empty(&rest)) topo_add(t, root, t->ntiers - 1, &rest, -1);
  return 0;
}

/* Nodes with CPUs: has_cpu, or else each node's cpulist (a CPU-less node's is
 * "\n", so its first byte is enough; a longer one reads as -EFBIG). A node
 * with neither counts as having CPUs, so that knowing nothing gives one tier. */
static void topo_cpu_nodes(const char *root, const tm_nodemask_t *usable, tm_nodemask_t *cpu)
{
  char path[TOPO_PATH_MAX];
  if (!topo_path(path, root, topo_node_dir, NULL, -1, "has_cpu") &&
      !topo_read_nodelist_warn(path, cpu))
    return;
  topo_mask_clear(cpu);
  for (int n = 0; n < TIER_MAX_NODES; n++) {
    if (!tm_nodemask_test(usable, n)) continue;
    char first[2];
    int len = -ENAMETOOLONG;
    if (!topo_path(path, root, topo_node_dir, "node", n, "cpulist"))
      len = topo_read_file(path, first, sizeof first);
    if (len < 0 || (len > 0 && first[0] != '\n')) tm_nodemask_set(cpu, n);
  }
}

static void topo_from_cpus(tm_topology_t *t, const char *root, const tm_nodemask_t *usable)
{
  tm_nodemask_t top, below;
  topo_cpu_nodes(root, usable, &top);
  topo_mask_and(&top, usable);
  below = *usable;
  topo_mask_andnot(&below, &top);
  topo_reset(t);
  t->source = TM_TOPO_CPU_FALLBACK;
  if (!topo_mask_empty(&top)) topo_push(t, root, &top, -1);
  if (!topo_mask_empty(&below)) topo_push(t, root, &below, -1);
}

/* One tier holding node 0; capacity from <root>/proc/meminfo when readable. */
static void topo_single(tm_topology_t *t, const char *root)
{
  char path[TOPO_PATH_MAX];
  topo_reset(t);
  t->source = TM_TOPO_SINGLE;
  t->ntiers = 1;
  tm_nodemask_set(&t->tier[0].nodes, 0);
  t->tier[0].nnodes = 1;
  t->tier[0].first_node = 0;
  t->tier[0].kernel_tier = -1;
  t->node_tier[0] = 0;
  if (!topo_path(path, root, "/proc/meminfo", NULL, -1, NULL))
    topo_read_memtotal(path, &t->tier[0].capacity);
}

int tm_topology_discover(tm_topology_t *t, const char *root, const char *override)
{
  char path[TOPO_PATH_MAX];
  int err;
  if (!root) root = "";
  if (override && !*override) override = NULL;

  /* Without the node directory there is nothing to tier, and an override
   * cannot be checked against anything, so it is not used. */
  if ((err = topo_path(path, root, topo_node_dir, NULL, -1, NULL)) == 0) {
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) err = errno;
    else close(fd);
  }
  if (err) {
    char q[96];
    if (override)
      tm_warn("TIERMALLOC_TIERS='%s' ignored: no NUMA nodes in sysfs",
              topo_quote(override, q, sizeof q));
    topo_single(t, root);
    return err;
  }

  /* usable = nodes with memory (has_memory, else online, else every nodeN
   * directory) that Mems_allowed lets us use. */
  tm_nodemask_t usable, allowed;
  if (topo_path(path, root, topo_node_dir, NULL, -1, "has_memory") ||
      topo_read_nodelist_warn(path, &usable)) {
    if (topo_path(path, root, topo_node_dir, NULL, -1, "online") ||
        topo_read_nodelist_warn(path, &usable)) {
      topo_mask_clear(&usable);
      topo_path(path, root, topo_node_dir, NULL, -1, NULL);
      topo_scan_ids(path, "node", topo_collect_node, &usable);
    }
  }
  if (!topo_path(path, root, "/proc/self/status", NULL, -1, NULL)) {
    err = topo_read_mems_allowed(path, &allowed);
    if (!err)
      topo_mask_and(&usable, &allowed);
    else if (err != ENOENT)
      tm_warn("cannot use Mems_allowed in %s: %s; assuming every node is allowed", path,
              topo_errstr(err));
  }
  if (topo_mask_empty(&usable)) {
    tm_warn("no allowed NUMA node with memory found under %s%s; using node 0", root,
            topo_node_dir);
    topo_single(t, root);
    return ENODEV;
  }

  if (override && topo_from_override(t, root, override, &usable) == 0) return 0;
  if (topo_from_kernel(t, root, &usable) == 0) return 0;
  topo_from_cpus(t, root, &usable);
  return 0;
}

const char *tm_topology_source_name(tm_topology_source_t s)
{
  switch (s) {
  case TM_TOPO_OVERRIDE: return "TIERMALLOC_TIERS";
  case TM_TOPO_KERNEL_TIERS: return "kernel memory tiers";
  case TM_TOPO_CPU_FALLBACK: return "CPU nodes on top (one kernel tier)";
  case TM_TOPO_SINGLE: return "single node (no NUMA information)";
  }
  return "unknown";
}
