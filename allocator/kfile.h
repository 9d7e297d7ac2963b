/*
 * kfile: reading the kernel's files (sysfs, procfs, cgroupfs) without
 * allocating: open/read into the caller's buffers, directories with
 * getdents64, paths built by hand. Every reader takes a root, "" for the
 * running system or a fixture tree that mirrors absolute paths.
 *
 * Warnings follow one rule: a file that is absent (ENOENT) is a fact about the
 * kernel and is silent; a file that exists but cannot be read or parsed gets
 * one line, because it means the numbers we use may be wrong.
 */
#ifndef TM_KFILE_H
#define TM_KFILE_H

#include <stdint.h>

#include "nodemask.h"

#define TM_KFILE_PATH_MAX 512
/* Whole-file reads (nodelists). The longest nodelist TIER_MAX_NODES nodes can
 * produce is every other node listed singly, about 2.5 KB. */
#define TM_KFILE_MAX 4096

/* buf[TM_KFILE_PATH_MAX] = root + dir [+ "/" + name + id] [+ "/" + leaf];
 * name NULL skips the middle component and id < 0 omits the number.
 * 0 or ENAMETOOLONG. */
int tm_kfile_path(char *buf, const char *root, const char *dir, const char *name, long id,
                  const char *leaf);

/* A short phrase for an errno, for warnings (strerror may allocate). */
const char *tm_kfile_errstr(int err);

/* Reads the whole of path into buf (NUL-terminated). Returns the length, or a
 * negative errno; -EFBIG when the file does not fit, so a truncated value is
 * never mistaken for a shorter one. */
int tm_kfile_read(const char *path, char *buf, int size);

/* Line reader over an fd, for files longer than we want to hold whole. */
typedef struct tm_kfile_lines_s {
  int fd;
  int len, pos;
  char buf[1024];
} tm_kfile_lines_t;

/* Opens path for tm_kfile_next_line; 0 or a positive errno. Close r->fd. */
int tm_kfile_lines_open(tm_kfile_lines_t *r, const char *path);

/* Copies the next line, without its '\n', into line[size]. Returns its length,
 * or -1 at the end of the file or on a read error. A line longer than size-1
 * is cut to fit and *cut is set. */
int tm_kfile_next_line(tm_kfile_lines_t *r, char *line, int size, int *cut);

/* Parses " <digits> kB", what follows a label such as "MemTotal:" in
 * meminfo or "Rss:" in smaps, into bytes. 0 or EINVAL. */
int tm_kfile_parse_kb(const char *s, uint64_t *bytes);

/* The value of `key` ("MemTotal", "MemFree") in bytes from a meminfo file:
 * /proc/meminfo ("MemTotal: N kB") or a node's ("Node 3 MemTotal: N kB").
 * 0, or a positive errno (EINVAL when the file has no well-formed line for
 * key). */
int tm_kfile_read_meminfo(const char *path, const char *key, uint64_t *bytes);

/* Reads a nodelist file into *m. 0 or a positive errno. The _warn form also
 * says, in one line, why a file that exists could not be used. */
int tm_kfile_read_nodelist(const char *path, tm_nodemask_t *m);
int tm_kfile_read_nodelist_warn(const char *path, tm_nodemask_t *m);

/* Calls fn(arg, N) for each entry of dir named <prefix><N>, N decimal without
 * leading zeros. 0 or a positive errno from open/getdents64. */
int tm_kfile_scan_ids(const char *dir, const char *prefix, void (*fn)(void *, unsigned long),
                      void *arg);

#endif
