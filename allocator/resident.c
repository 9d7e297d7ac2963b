#include "resident.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#define RESIDENT_BUF 16384
#define RESIDENT_MAX_ENTRIES 64   /* N<node>= entries kept per line */

static uint64_t resident_num(const char **s, int base)
{
  uint64_t v = 0;
  for (;; (*s)++) {
    char c = **s;
    int d = c >= '0' && c <= '9' ? c - '0'
          : base == 16 && c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return v;
    v = v * (uint64_t)base + (uint64_t)d;
  }
}

/* One numa_maps line: "<hex start> <policy> [key[=value]]...". */
static void resident_line(const char *s, const char *end, const tm_topology_t *topo,
                          uintptr_t lo, uintptr_t hi, tm_resident_t *out)
{
  uintptr_t start = (uintptr_t)resident_num(&s, 16);
  if (start < lo || start >= hi) return;
  int nodes[RESIDENT_MAX_ENTRIES];
  uint64_t pages[RESIDENT_MAX_ENTRIES];
  int n = 0;
  uint64_t page_kb = 4;
  while (s < end) {
    while (s < end && *s == ' ') s++;
    if (s + 1 < end && s[0] == 'N' && s[1] >= '0' && s[1] <= '9') {
      s++;
      int node = (int)resident_num(&s, 10);
      if (*s == '=' && n < RESIDENT_MAX_ENTRIES) {
        s++;
        nodes[n] = node;
        pages[n++] = resident_num(&s, 10);
      }
    } else if (end - s > 18 && memcmp(s, "kernelpagesize_kB=", 18) == 0) {
      s += 18;
      page_kb = resident_num(&s, 10);
    }
    while (s < end && *s != ' ') s++;
  }
  for (int i = 0; i < n; i++) {
    uint64_t bytes = pages[i] * page_kb * 1024;
    int t = nodes[i] >= 0 && nodes[i] < TIER_MAX_NODES ? topo->node_tier[nodes[i]] : -1;
    if (t >= 0) out->tier[t] += bytes;
    else out->other += bytes;
  }
}

int tm_resident_measure(const char *path, const tm_topology_t *topo, uintptr_t lo, uintptr_t hi,
                        tm_resident_t *out)
{
  memset(out, 0, sizeof *out);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  char buf[RESIDENT_BUF];
  size_t have = 0;
  bool skipping = false;   /* inside a line longer than the buffer */
  for (;;) {
    ssize_t r = read(fd, buf + have, sizeof buf - have);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    have += (size_t)r;
    char *line = buf, *nl;
    while ((nl = memchr(line, '\n', have - (size_t)(line - buf))) != NULL) {
      if (!skipping) resident_line(line, nl, topo, lo, hi, out);
      skipping = false;
      line = nl + 1;
    }
    have -= (size_t)(line - buf);
    if (have == sizeof buf) {   /* no newline in a full buffer: drop that line */
      have = 0;
      skipping = true;
    } else {
      memmove(buf, line, have);
    }
  }
  close(fd);
  return 0;
}
