#include "kfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "text.h"

/* path = root + dir [+ "/" + name + id] [+ "/" + leaf]; name NULL skips the
 * middle component and id < 0 omits the number. */
int tm_kfile_path(char *buf, const char *root, const char *dir, const char *name, long id,
                  const char *leaf)
{
  int len = 0;
  buf[0] = '\0';
  if (tm_text_append(buf, TM_KFILE_PATH_MAX, &len, root) ||
      tm_text_append(buf, TM_KFILE_PATH_MAX, &len, dir))
    return ENAMETOOLONG;
  if (name) {
    if (tm_text_append(buf, TM_KFILE_PATH_MAX, &len, "/") ||
        tm_text_append(buf, TM_KFILE_PATH_MAX, &len, name) ||
        (id >= 0 && tm_text_append_uint(buf, TM_KFILE_PATH_MAX, &len, (unsigned)id)))
      return ENAMETOOLONG;
  }
  if (leaf && (tm_text_append(buf, TM_KFILE_PATH_MAX, &len, "/") ||
               tm_text_append(buf, TM_KFILE_PATH_MAX, &len, leaf)))
    return ENAMETOOLONG;
  return 0;
}

/* strerror may allocate (gettext, once a locale is set), so warnings use this
 * short table instead. */
const char *tm_kfile_errstr(int err)
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
  case EISDIR: return "is a directory";
  case EMFILE: case ENFILE: return "out of file descriptors";
  }
  return "read error";
}

/* Reads the whole of path into buf (NUL-terminated). Returns the length, or a
 * negative errno; -EFBIG when the file does not fit, so a truncated nodelist is
 * never mistaken for a shorter one. */
int tm_kfile_read(const char *path, char *buf, int size)
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

/* (/proc/self/status with NR_CPUS=8192 has a 2 KB Cpus_allowed line.) */
int tm_kfile_lines_open(tm_kfile_lines_t *r, const char *path)
{
  r->fd = open(path, O_RDONLY | O_CLOEXEC);
  r->len = r->pos = 0;
  return r->fd < 0 ? errno : 0;
}

/* Copies the next line, without its '\n', into line[size]. Returns its length,
 * or -1 at the end of the file or on a read error. A line longer than size-1
 * is cut to fit and *cut is set. */
int tm_kfile_next_line(tm_kfile_lines_t *r, char *line, int size, int *cut)
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

int tm_kfile_parse_kb(const char *s, uint64_t *bytes)
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
int tm_kfile_read_meminfo(const char *path, const char *key, uint64_t *bytes)
{
  tm_kfile_lines_t r;
  int oerr = tm_kfile_lines_open(&r, path);
  if (oerr) return oerr;
  char line[128];
  size_t klen = strlen(key);
  int cut, n, err = EINVAL;
  while ((n = tm_kfile_next_line(&r, line, sizeof line, &cut)) >= 0) {
    char *p = strstr(line, key);
    if (!p || cut || p[klen] != ':' || (p > line && p[-1] != ' ')) continue;
    err = tm_kfile_parse_kb(p + klen + 1, bytes);
    break;
  }
  close(r.fd);
  return err;
}

/* Reads a nodelist file into *m. 0 or a positive errno. Not inlined, so its
 * buffer is on the stack only while it runs, not in every caller's frame. */
__attribute__((noinline)) int tm_kfile_read_nodelist(const char *path, tm_nodemask_t *m)
{
  char buf[TM_KFILE_MAX];
  int n = tm_kfile_read(path, buf, sizeof buf);
  if (n < 0) return -n;
  return tm_nodelist_parse(buf, m);
}

/* Like tm_kfile_read_nodelist, but warns about anything other than absence. */
int tm_kfile_read_nodelist_warn(const char *path, tm_nodemask_t *m)
{
  int err = tm_kfile_read_nodelist(path, m);
  if (err && err != ENOENT)
    tm_warn("cannot use %s: %s", path, err == EINVAL ? "not a nodelist" : tm_kfile_errstr(err));
  return err;
}

/* The kernel's struct linux_dirent64; glibc's struct dirent64 matches it but
 * is not guaranteed to, and getdents64 has no glibc wrapper before 2.30. */
struct kfile_dirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

/* Calls fn(arg, N) for each entry of dir named <prefix><N>, N decimal without
 * leading zeros. 0 or a positive errno from open/getdents64. */
int tm_kfile_scan_ids(const char *dir, const char *prefix, void (*fn)(void *, unsigned long),
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
      struct kfile_dirent64 *d = (struct kfile_dirent64 *)(buf + off);
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
