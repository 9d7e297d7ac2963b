/* libFuzzer harness for tm_option_parse (allocator/options.c).
 * Input: byte 0 mod TM_OPTION_COUNT = option id; rest = text (NUL-terminated).
 * Checks: return is 0/EINVAL/ERANGE; *out untouched on error; on success the
 * value is sane for the type and agrees with an independent reference parser. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fuzz.h"
#include "options.h"

static int ref_space(int c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
static int ref_lower(int c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }
static int ref_ieq(const char *s, size_t n, const char *w)
{
  if (strlen(w) != n) return 0;
  for (size_t i = 0; i < n; i++) if (ref_lower((unsigned char)s[i]) != ref_lower((unsigned char)w[i])) return 0;
  return 1;
}

/* Reference: returns err, fills num/percent/str. */
static int ref_parse(tm_option_id_t id, const char *text, uint64_t *num, int *percent, char *str)
{
  const tm_option_desc_t *d = &tm_option_descs[id];
  size_t n = strlen(text);
  while (n && ref_space((unsigned char)*text)) { text++; n--; }
  while (n && ref_space((unsigned char)text[n - 1])) n--;
  *num = 0; *percent = 0; str[0] = 0;
  switch (d->type) {
  case TM_OPT_BOOL: {
    const char *y[] = {"1", "true", "yes", "on"}, *no[] = {"0", "false", "no", "off"};
    for (int i = 0; i < 4; i++) {
      if (ref_ieq(text, n, y[i])) { *num = 1; return 0; }
      if (ref_ieq(text, n, no[i])) { *num = 0; return 0; }
    }
    return EINVAL;
  }
  case TM_OPT_UINT: case TM_OPT_SIZE: case TM_OPT_SHARE: case TM_OPT_PERCENT: {
    size_t i = 0;
    unsigned __int128 v = 0; int big = 0;
    for (; i < n && text[i] >= '0' && text[i] <= '9'; i++) {
      v = v * 10 + (unsigned)(text[i] - '0');
      if (v > ((unsigned __int128)1 << 100)) { big = 1; v = (unsigned __int128)1 << 100; }
    }
    if (i == 0) return EINVAL;
    const char *r = text + i; size_t rn = n - i;
    if (d->type == TM_OPT_UINT) {
      if (rn) return EINVAL;
      if (big || v > INT64_MAX) return ERANGE;
      *num = (uint64_t)v; return 0;
    }
    if (d->type == TM_OPT_PERCENT && !(rn == 1 && r[0] == '%')) return EINVAL;
    if (rn == 1 && r[0] == '%') {
      if (d->type == TM_OPT_SIZE) return EINVAL;
      if (big || v > 100) return EINVAL;
      *num = (uint64_t)v; *percent = 1; return 0;
    }
    int shift = 0;
    const char *u = "kmgtp";
    if (rn && strchr(u, ref_lower((unsigned char)r[0])) && r[0]) { shift = 10 * (int)(strchr(u, ref_lower((unsigned char)r[0])) - u + 1); r++; rn--; }
    if (!(rn == 0 || ref_ieq(r, rn, "b") || (shift && ref_ieq(r, rn, "ib")))) return EINVAL;
    if (big) return ERANGE;
    v <<= shift;
    if (v > INT64_MAX) return ERANGE;
    *num = (uint64_t)v; return 0;
  }
  case TM_OPT_ENUM: {
    const char *c = d->choices; uint64_t idx = 0;
    while (1) {
      const char *bar = strchr(c, '|');
      size_t len = bar ? (size_t)(bar - c) : strlen(c);
      char w[64]; memcpy(w, c, len); w[len] = 0;
      if (ref_ieq(text, n, w)) { *num = idx; return 0; }
      if (!bar) break;
      c = bar + 1; idx++;
    }
    return EINVAL;
  }
  case TM_OPT_STRING:
    if (n > TM_OPT_STRING_MAX - 1) return ERANGE;
    memcpy(str, text, n); str[n] = 0; return 0;
  }
  return EINVAL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1) return 0;
  tm_option_id_t id = (tm_option_id_t)(data[0] % TM_OPTION_COUNT);
  char *text = malloc(size);
  memcpy(text, data + 1, size - 1);
  text[size - 1] = '\0';

  tm_option_value_t out, sentinel;
  memset(&sentinel, 0xA5, sizeof sentinel);
  out = sentinel;
  int err = tm_option_parse(id, text, &out);

  uint64_t rnum; int rpct; char rstr[TM_OPT_STRING_MAX + 8];
  int rerr = ref_parse(id, text, &rnum, &rpct, rstr);
  const tm_option_desc_t *d = &tm_option_descs[id];

  if (err != 0 && err != EINVAL && err != ERANGE) FAIL("id %s: bad return %d", d->name, err);
  if (err != 0 && memcmp(&out, &sentinel, sizeof out) != 0) FAIL("id %s: *out modified on error %d", d->name, err);
  if (err != rerr) FAIL("id %s text '%s': returned %d, reference %d", d->name, text, err, rerr);
  if (err == 0) {
    if (out.set) FAIL("set true");
    switch (d->type) {
    case TM_OPT_BOOL: if (out.num > 1 || out.percent) FAIL("bool %llu", (unsigned long long)out.num); break;
    case TM_OPT_UINT: case TM_OPT_SIZE:
      if (out.num > INT64_MAX || out.percent) FAIL("uint/size %llu pct %d", (unsigned long long)out.num, out.percent); break;
    case TM_OPT_PERCENT:
      if (!out.percent || out.num > 100) FAIL("percent %llu", (unsigned long long)out.num);
      break;
    case TM_OPT_SHARE:
      if (out.percent && out.num > 100) FAIL("percent %llu", (unsigned long long)out.num);
      if (out.num > INT64_MAX) FAIL("share %llu", (unsigned long long)out.num);
      break;
    case TM_OPT_ENUM: {
      uint64_t k = 1; for (const char *c = d->choices; *c; c++) k += *c == '|';
      if (out.num >= k) FAIL("enum idx"); break;
    }
    case TM_OPT_STRING:
      if (memchr(out.str, 0, sizeof out.str) == NULL) FAIL("string not terminated");
      if (strcmp(out.str, rstr) != 0) FAIL("string mismatch");
      break;
    }
    if (d->type != TM_OPT_STRING) {
      if (out.num != rnum || out.percent != rpct) FAIL("id %s text '%s': value %llu/%d, reference %llu/%d", d->name, text,
                                                     (unsigned long long)out.num, out.percent, (unsigned long long)rnum, rpct);
      for (size_t i = 0; i < sizeof out.str; i++) if (out.str[i]) FAIL("str not zero for non-string");
    }
  }
  free(text);
  return 0;
}
