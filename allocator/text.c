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
  return tm_text_append_u64(buf, size, len, v);
}

int tm_text_append_u64(char *buf, int size, int *len, uint64_t v)
{
  char tmp[24];
  int i = (int)sizeof tmp;
  tmp[--i] = '\0';
  do {
    tmp[--i] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  return tm_text_append(buf, size, len, tmp + i);
}

static int text_parse(const char *s, const char *e, unsigned base, uint64_t *v)
{
  if (s == e) return EINVAL;
  uint64_t acc = 0;
  for (; s < e; s++) {
    unsigned dig = *s >= '0' && *s <= '9'               ? (unsigned)(*s - '0')
                   : base == 16 && *s >= 'a' && *s <= 'f' ? (unsigned)(*s - 'a' + 10)
                                                          : base;
    if (dig >= base) return EINVAL;
    if (acc > (UINT64_MAX - dig) / base) return ERANGE;
    acc = acc * base + dig;
  }
  *v = acc;
  return 0;
}

int tm_text_parse_u64(const char *s, const char *e, uint64_t *v)
{
  return text_parse(s, e, 10, v);
}

int tm_text_parse_hex(const char *s, const char *e, uint64_t *v)
{
  return text_parse(s, e, 16, v);
}
