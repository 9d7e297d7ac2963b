#include "text.h"

#include <errno.h>
#include <string.h>

/* Appends src to buf at *len, keeping buf NUL-terminated; returns -1 when it
 * does not fit, which callers turn into ENAMETOOLONG. */
int tm_text_append(char *buf, int size, int *len, const char *src)
{
  int n = (int)strlen(src);
  if (*len + n >= size) return -1;
  memcpy(buf + *len, src, (size_t)n + 1);
  *len += n;
  return 0;
}

int tm_text_append_uint(char *buf, int size, int *len, unsigned v)
{
  char tmp[12];
  int i = (int)sizeof tmp;
  tmp[--i] = '\0';
  do {
    tmp[--i] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  return tm_text_append(buf, size, len, tmp + i);
}

int tm_text_parse_u64(const char *s, const char *e, uint64_t *v)
{
  if (s == e) return EINVAL;
  uint64_t acc = 0;
  for (; s < e; s++) {
    if (*s < '0' || *s > '9') return EINVAL;
    unsigned dig = (unsigned)(*s - '0');
    if (acc > (UINT64_MAX - dig) / 10) return ERANGE;
    acc = acc * 10 + dig;
  }
  *v = acc;
  return 0;
}
