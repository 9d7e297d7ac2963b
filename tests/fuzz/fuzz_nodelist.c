/* libFuzzer harness for tm_nodelist_parse / tm_nodelist_format.
 * Checks: agrees with a strict reference parser; *m untouched on error;
 * round trip parse(format(m)) == m; format is snprintf-like for every size. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include "fuzz.h"
#include "nodemask_ref.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *s = malloc(size + 1);
  memcpy(s, data, size);
  s[size] = '\0';

  tm_nodemask_t m, sentinel;
  memset(&sentinel, 0x5A, sizeof sentinel);
  m = sentinel;
  int err = tm_nodelist_parse(s, &m);

  tm_nodemask_t r;
  const char *e = s + strlen(s);
  if (e > s && e[-1] == '\n') e--;
  int rerr = ref_span(s, e, &r);

  if (err != 0 && err != EINVAL) FAIL("bad return %d", err);
  if (err != 0 && !mask_eq(&m, &sentinel)) FAIL("*m modified on error");
  if ((err == 0) != (rerr == 0)) FAIL("'%s': parse %d, reference %d", s, err, rerr);
  if (err == 0) {
    if (!mask_eq(&m, &r)) FAIL("'%s': mask differs from reference", s);
    static char buf[16384];
    int len = tm_nodelist_format(&m, buf, sizeof buf);
    if (len < 0 || len >= (int)sizeof buf || (int)strlen(buf) != len) FAIL("format len %d strlen %zu", len, strlen(buf));
    tm_nodemask_t back;
    memset(&back, 0x33, sizeof back);
    if (tm_nodelist_parse(buf, &back) != 0) FAIL("format output '%s' does not parse", buf);
    if (!mask_eq(&back, &m)) FAIL("round trip mismatch: '%s' -> '%s'", s, buf);
    /* snprintf semantics for small sizes */
    int sizes[] = {0, 1, 2, 3, len / 2, len - 1, len, len + 1};
    for (unsigned k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
      int sz = sizes[k];
      if (sz < 0) continue;
      char *p = malloc(sz > 0 ? (size_t)sz : 1);  /* exact size, so ASan sees overruns */
      int l2 = tm_nodelist_format(&m, sz > 0 ? p : NULL, sz);
      if (l2 != len) FAIL("format size %d returned %d, want %d", sz, l2, len);
      if (sz > 0) {
        size_t want = (size_t)(len < sz - 1 ? len : sz - 1);
        if (strlen(p) != want || memcmp(p, buf, want) != 0) FAIL("format size %d: wrong prefix", sz);
      }
      free(p);
    }
  }
  free(s);
  return 0;
}
