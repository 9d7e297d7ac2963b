/*
 * nodemask: sets of NUMA node ids, and the kernel's two ways of writing them
 * (the nodelist "0-3,5" of sysfs and the hex words of Mems_allowed). Pure:
 * no I/O, no allocation.
 */
#ifndef TM_NODEMASK_H
#define TM_NODEMASK_H

#include <stdint.h>

#include "tiermalloc.h"

typedef struct tm_nodemask_s {
  uint64_t w[TIER_NODE_WORDS];
} tm_nodemask_t;

static inline int tm_nodemask_test(const tm_nodemask_t *m, int n)
{
  return (m->w[n / 64] >> (n % 64)) & 1;
}
static inline void tm_nodemask_set(tm_nodemask_t *m, int n)
{
  m->w[n / 64] |= 1ULL << (n % 64);
}

void tm_nodemask_clear(tm_nodemask_t *m);
int tm_nodemask_empty(const tm_nodemask_t *m);
void tm_nodemask_and(tm_nodemask_t *d, const tm_nodemask_t *a);     /* d &= a */
void tm_nodemask_andnot(tm_nodemask_t *d, const tm_nodemask_t *a);  /* d &= ~a */
void tm_nodemask_or(tm_nodemask_t *d, const tm_nodemask_t *a);      /* d |= a */

/* Parses a kernel nodelist ("0-3,5\n", "" = empty) into *m; 0 or EINVAL. */
int tm_nodelist_parse(const char *s, tm_nodemask_t *m);

/* The same for the nodelist in [s, e), which has no trailing newline; *m is
 * untouched on error. */
int tm_nodelist_parse_span(const char *s, const char *e, tm_nodemask_t *m);

/* Formats *m as a nodelist ("0-1,3") into buf; returns the length. */
int tm_nodelist_format(const tm_nodemask_t *m, char *buf, int size);

/* Parses a Mems_allowed value (comma-separated 32-bit hex words, most
 * significant first) into *m; 0 or EINVAL. */
int tm_nodemask_parse_hex(const char *s, tm_nodemask_t *m);

#endif
