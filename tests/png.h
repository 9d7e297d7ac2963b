/* The check the tierctl plot tests share: path is a PNG (its signature)
 * of non-trivial size (a blank or broken plot is a few hundred bytes). */
#ifndef TIERMALLOC_TESTS_PNG_H
#define TIERMALLOC_TESTS_PNG_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static inline void expect_png(const char *path)
{
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "no %s", path);
  unsigned char magic[8] = { 0 };
  cr_expect_eq(fread(magic, 1, 8, f), 8);
  fclose(f);
  cr_expect(memcmp(magic, "\x89PNG\r\n\x1a\n", 8) == 0, "%s is not a PNG", path);
  struct stat st;
  cr_assert_eq(stat(path, &st), 0);
  cr_expect_gt(st.st_size, 10000, "%s: a PNG of %lld bytes: a blank image?", path, (long long)st.st_size);
}

#endif
