/* A tier_write_fn that collects printed stats into a NUL-terminated buffer,
 * for the tests of tm_stats_format and tier_stats_print. Overflowing the
 * buffer fails the test rather than cutting the text. */
#ifndef TESTS_STATSBUF_H
#define TESTS_STATSBUF_H

#include <criterion/criterion.h>
#include <string.h>

typedef struct statsbuf_s {
  char s[65536];
  size_t n;
} statsbuf_t;

static void statsbuf_write(void *arg, const char *buf, size_t len)
{
  statsbuf_t *b = arg;
  cr_assert_lt(b->n + len, sizeof b->s, "printed stats overflow the test's buffer");
  memcpy(b->s + b->n, buf, len);
  b->n += len;
  b->s[b->n] = 0;
}

#endif
