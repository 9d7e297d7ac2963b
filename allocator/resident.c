#include "resident.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#define RESIDENT_BUF 16384

/* Reads digits at *s, moving *s past them; saturates at UINT64_MAX, so an
 * absurdly long node id stays past the largest node instead of wrapping. */
static uint64_t resident_num(const char **s, int base)
{
  uint64_t v = 0;
  for (;; (*s)++) {
    char c = **s;
    int d = c >= '0' && c <= '9' ? c - '0'
          : base == 16 && c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return v;
    v = v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base ? UINT64_MAX : v * (uint64_t)base + (uint64_t)d;
  }
}

/* One numa_maps line: "<hex start> <policy> [key[=value]]...", ending at
 * *end (a newline). Pages are summed per tier as the N<node>= entries come,
 * however many there are; kernelpagesize_kB, which follows them, scales the
 * sums at the end; fn gets them. */
static void resident_line(const char *s, const char *end, const tm_topology_t *topo,
                          uintptr_t lo, uintptr_t hi, tm_resident_fn fn, void *arg)
{
  uintptr_t start = (uintptr_t)resident_num(&s, 16);
  if (start < lo || start >= hi) return;
  uint64_t pages[TIER_MAX_TIERS + 1] = { 0 };   /* the last one: on no tier */
  uint64_t page_kb = 4;
  while (s < end) {
    while (s < end && *s == ' ') s++;
    if (s + 1 < end && s[0] == 'N' && s[1] >= '0' && s[1] <= '9') {
      s++;
      uint64_t node = resident_num(&s, 10);
      if (*s == '=') {
        s++;
        int t = node < TIER_MAX_NODES ? topo->node_tier[node] : -1;
        pages[t >= 0 ? t : TIER_MAX_TIERS] += resident_num(&s, 10);
      }
    } else if (end - s > 18 && memcmp(s, "kernelpagesize_kB=", 18) == 0) {
      s += 18;
      page_kb = resident_num(&s, 10);
    }
    while (s < end && *s != ' ') s++;
  }
  for (int t = 0; t <= TIER_MAX_TIERS; t++) pages[t] *= page_kb * 1024;
  fn(start, pages, arg);
}

static void resident_sum(uintptr_t start, const uint64_t bytes[TIER_MAX_TIERS + 1], void *arg)
{
  tm_resident_t *out = arg;
  (void)start;
  for (int t = 0; t < TIER_MAX_TIERS; t++) out->tier[t] += bytes[t];
  out->other += bytes[TIER_MAX_TIERS];
}

int tm_resident_measure(const char *path, const tm_topology_t *topo, uintptr_t lo, uintptr_t hi,
                        tm_resident_t *out)
{
  memset(out, 0, sizeof *out);
  return tm_resident_each(path, topo, lo, hi, resident_sum, out);
}

int tm_resident_each(const char *path, const tm_topology_t *topo, uintptr_t lo, uintptr_t hi,
                     tm_resident_fn fn, void *arg)
{
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  char buf[RESIDENT_BUF + 1];   /* + 1: room for the newline a last line may lack */
  size_t have = 0;
  bool skipping = false;   /* inside a line longer than the buffer */
  for (;;) {
    ssize_t r = read(fd, buf + have, RESIDENT_BUF - have);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    have += (size_t)r;
    char *line = buf, *nl;
    while ((nl = memchr(line, '\n', have - (size_t)(line - buf))) != NULL) {
      if (!skipping) resident_line(line, nl, topo, lo, hi, fn, arg);
      skipping = false;
      line = nl + 1;
    }
    have -= (size_t)(line - buf);
    if (have == RESIDENT_BUF) {   /* no newline in a full buffer: drop that line */
      have = 0;
      skipping = true;
    } else {
      memmove(buf, line, have);
    }
  }
  if (have > 0 && !skipping) {
    buf[have] = '\n';
    resident_line(buf, buf + have, topo, lo, hi, fn, arg);
  }
  close(fd);
  return 0;
}
