#include "nodemask.h"

#include <errno.h>
#include <string.h>

#include "text.h"

void tm_nodemask_clear(tm_nodemask_t *m)
{
  memset(m, 0, sizeof *m);
}

int tm_nodemask_empty(const tm_nodemask_t *m)
{
  for (int i = 0; i < TIER_NODE_WORDS; i++)
    if (m->w[i]) return 0;
  return 1;
}

void tm_nodemask_and(tm_nodemask_t *d, const tm_nodemask_t *a)
{
  for (int i = 0; i < TIER_NODE_WORDS; i++) d->w[i] &= a->w[i];
}

void tm_nodemask_andnot(tm_nodemask_t *d, const tm_nodemask_t *a)
{
  for (int i = 0; i < TIER_NODE_WORDS; i++) d->w[i] &= ~a->w[i];
}

void tm_nodemask_or(tm_nodemask_t *d, const tm_nodemask_t *a)
{
  for (int i = 0; i < TIER_NODE_WORDS; i++) d->w[i] |= a->w[i];
}

/* Parses the nodelist in [s, e) into *m (untouched on error). Accepts what the
 * kernel prints ("%*pbl": "0-3,5"), and nothing looser: no spaces, no empty
 * items, no reversed ranges, no node >= TIER_MAX_NODES. */
int tm_nodelist_parse_span(const char *s, const char *e, tm_nodemask_t *m)
{
  tm_nodemask_t out;
  tm_nodemask_clear(&out);
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
  return tm_nodelist_parse_span(s, e, m);
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
    if (len) tm_text_append(item, sizeof item, &il, ",");
    tm_text_append_uint(item, sizeof item, &il, (unsigned)n);
    if (hi > n) {
      tm_text_append(item, sizeof item, &il, "-");
      tm_text_append_uint(item, sizeof item, &il, (unsigned)hi);
    }
    for (int i = 0; i < il; i++, len++)
      if (len < size - 1) buf[len] = item[i];
    if (size > 0) buf[len < size - 1 ? len : size - 1] = '\0';
    n = hi;
  }
  return len;
}

/* Parses the Mems_allowed value: comma-separated 32-bit hex words, most
 * significant first (32 of them on NODES_SHIFT=10 kernels). Bits for nodes at
 * or above TIER_MAX_NODES are ignored: we cannot place such nodes anyway. */
int tm_nodemask_parse_hex(const char *s, tm_nodemask_t *m)
{
  int nwords = 1;
  for (const char *p = s; *p; p++) nwords += *p == ',';
  tm_nodemask_t out;
  tm_nodemask_clear(&out);
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
