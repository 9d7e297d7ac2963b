#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

static void log_vwrite(int fd, const char *fmt, va_list ap)
{
  int saved = errno;
  char buf[512];
  int n = snprintf(buf, sizeof buf, "tiermalloc: ");
  n += vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
  if (n > (int)sizeof buf - 2) n = (int)sizeof buf - 2;
  buf[n++] = '\n';
  ssize_t w = write(fd, buf, (size_t)n);
  (void)w;
  errno = saved;
}

void tm_warn(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  log_vwrite(STDERR_FILENO, fmt, ap);
  va_end(ap);
}

void tm_warn_fd(int fd, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  log_vwrite(fd, fmt, ap);
  va_end(ap);
}
