/*
 * Capturing what the code under test writes to fd 2 (tm_warn writes there
 * directly, below stdio), for tests that check warnings line by line.
 * Criterion's cr_redirect_stderr does the same for a whole test; this is for
 * a test that checks several calls one by one.
 */
#ifndef TIERMALLOC_TESTS_CAPTURE_H
#define TIERMALLOC_TESTS_CAPTURE_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <unistd.h>

static int capture_saved_stderr = -1;
static FILE *capture_file;

static inline void capture_begin(void)
{
  capture_file = tmpfile();
  cr_assert_not_null(capture_file);
  capture_saved_stderr = dup(2);
  dup2(fileno(capture_file), 2);
}

/* Ends the capture and returns what was written (a static buffer). */
static inline const char *capture_end(void)
{
  static char out[4096];
  dup2(capture_saved_stderr, 2);
  close(capture_saved_stderr);
  rewind(capture_file);
  size_t n = fread(out, 1, sizeof out - 1, capture_file);
  out[n] = '\0';
  fclose(capture_file);
  return out;
}

static inline int capture_count_lines(const char *s)
{
  int n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

#endif
