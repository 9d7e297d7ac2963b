/*
 * text: building and reading short strings without allocating (the code
 * that uses them runs while malloc initialises: no stdio, no strtoul).
 */
#ifndef TM_TEXT_H
#define TM_TEXT_H

#include <stdint.h>

/* Appends src (or v in decimal) to buf at *len, keeping buf NUL-terminated;
 * returns -1 when it does not fit (buf then holds what did). */
int tm_text_append(char *buf, int size, int *len, const char *src);
int tm_text_append_uint(char *buf, int size, int *len, unsigned v);
int tm_text_append_u64(char *buf, int size, int *len, uint64_t v);

/* Parses the decimal digits of [s, e), all of them and nothing else, into
 * *v; 0, EINVAL (empty, or not a digit) or ERANGE (above UINT64_MAX). */
int tm_text_parse_u64(const char *s, const char *e, uint64_t *v);

/* The same for lower-case hexadecimal digits (the kernel's addresses). */
int tm_text_parse_hex(const char *s, const char *e, uint64_t *v);

#endif
