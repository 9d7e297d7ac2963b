/* libFuzzer harness for tm_resident_measure (allocator/resident.c).
 * The numa_maps text is written to a memfd and read through /proc/self/fd/N,
 * so the real read/line-splitting code is exercised.
 * Input: byte 0 selects [lo, hi); the rest is the file.
 * Topology: hand-made, node n -> tier (n % 9) - 1 (-1 = in no tier), 8 tiers.
 * Reference model (the header's contract): for each '\n'-terminated line that
 * fits the reader's 16 KiB buffer and whose hex start is in [lo, hi), every
 * space-separated token N<node>=<pages> adds pages * kernelpagesize_kB * 1024
 * to node's tier (other when node >= TIER_MAX_NODES or in no tier); a last
 * line without a newline counts too, and digits saturate at UINT64_MAX. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "fuzz.h"
#include "resident.h"
#define REF_BUF 16384

static tm_topology_t topo;
static int mfd = -1;
static char path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc; (void)argv;
  memset(&topo, 0, sizeof topo);
  topo.ntiers = TIER_MAX_TIERS;
  for (int n = 0; n < TIER_MAX_NODES; n++) {
    int t = (n % 9) - 1;
    topo.node_tier[n] = (int8_t)t;
    if (t >= 0) tm_nodemask_set(&topo.tier[t].nodes, n);
  }
  mfd = memfd_create("numa_maps", 0);
  snprintf(path, sizeof path, "/proc/self/fd/%d", mfd);
  return 0;
}

static uint64_t num(const char **s, const char *e, int base, int *overflow)
{
  uint64_t v = 0;
  for (; *s < e; (*s)++) {
    char c = **s;
    int d = c >= '0' && c <= '9' ? c - '0' : base == 16 && c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) break;
    if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base) {   /* the code saturates */
      if (overflow) *overflow = 1;
      v = UINT64_MAX;
      continue;
    }
    v = v * (uint64_t)base + (uint64_t)d;
  }
  return v;
}

static void ref_line(const char *s, const char *e, uintptr_t lo, uintptr_t hi, tm_resident_t *out)
{
  uintptr_t start = (uintptr_t)num(&s, e, 16, NULL);
  if (start < lo || start >= hi) return;
  uint64_t page_kb = 4;
  struct { uint64_t node; int big; uint64_t pages; } ent[TIER_MAX_NODES * 4];
  int n = 0;
  while (s < e) {
    while (s < e && *s == ' ') s++;
    const char *tok = s;
    while (s < e && *s != ' ') s++;
    const char *te = s, *p = tok;
    if (te - tok >= 2 && p[0] == 'N' && p[1] >= '0' && p[1] <= '9') {
      p++;
      int big = 0;
      uint64_t node = num(&p, te, 10, &big);
      if (p < te && *p == '=') {
        p++;
        uint64_t pages = num(&p, te, 10, NULL);
        if (n < (int)(sizeof ent / sizeof ent[0])) { ent[n].node = node; ent[n].big = big; ent[n].pages = pages; n++; }
      }
    } else if (e - tok > 18 && memcmp(tok, "kernelpagesize_kB=", 18) == 0) {
      /* like the code: "kernelpagesize_kB=" with nothing after it in the token
       * but more text on the line reads as 0 (garbage in, not a finding) */
      p = tok + 18;
      page_kb = num(&p, te, 10, NULL);
    }
  }
  for (int i = 0; i < n; i++) {
    uint64_t bytes = ent[i].pages * page_kb * 1024;
    int t = !ent[i].big && ent[i].node < TIER_MAX_NODES ? topo.node_tier[ent[i].node] : -1;
    if (t >= 0) out->tier[t] += bytes; else out->other += bytes;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1) return 0;
  static const uintptr_t ranges[4][2] = {
    {0, UINTPTR_MAX}, {0x400000, 0x7f0000000000}, {0x400000, 0x400001}, {0x10, 0x10}};
  uintptr_t lo = ranges[data[0] & 3][0], hi = ranges[data[0] & 3][1];
  const char *text = (const char *)data + 1;
  size_t tn = size - 1;
  if (ftruncate(mfd, 0) != 0 || pwrite(mfd, text, tn, 0) != (ssize_t)tn) abort();

  tm_resident_t out;
  memset(&out, 0x77, sizeof out);
  int rc = tm_resident_measure(path, &topo, lo, hi, &out);
  if (rc != 0) FAIL("rc %d", rc);

  tm_resident_t ref;
  memset(&ref, 0, sizeof ref);
  const char *s = text, *end = text + tn;
  for (;;) {
    const char *nl = memchr(s, '\n', (size_t)(end - s));
    if (!nl) {                            /* unterminated last line: counted too */
      if (s < end && end - s < REF_BUF) ref_line(s, end, lo, hi, &ref);
      break;
    }
    if (nl - s < REF_BUF) ref_line(s, nl, lo, hi, &ref);   /* longer lines are dropped */
    s = nl + 1;
  }
  if (memcmp(&out, &ref, sizeof out) != 0) {
    for (int i = 0; i < TIER_MAX_TIERS; i++)
      fprintf(stderr, "tier %d: got %llu want %llu\n", i, (unsigned long long)out.tier[i], (unsigned long long)ref.tier[i]);
    fprintf(stderr, "other: got %llu want %llu\n", (unsigned long long)out.other, (unsigned long long)ref.other);
    FAIL("result differs from reference (range %d)", data[0] & 3);
  }
  return 0;
}
