#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

/* The lines said so far, by hash, so that a problem found again by a re-read
 * (a bad cgroup file, every second) is not said again. Racy on purpose: two
 * threads may both say a line once. */
#define LOG_SEEN 64
static _Atomic uint64_t log_seen[LOG_SEEN];
static _Atomic unsigned log_nseen;

static __thread bool log_quiet __attribute__((tls_model("initial-exec")));

void tm_log_quiet_repeats(bool on)
{
  log_quiet = on;
}

static bool log_first_time(const char *s, size_t n)
{
  uint64_t h = 1469598103934665603ull;   /* FNV-1a */
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  h |= 1;   /* 0 marks an empty slot */
  unsigned k = atomic_load_explicit(&log_nseen, memory_order_relaxed);
  for (unsigned i = 0; i < k && i < LOG_SEEN; i++)
    if (atomic_load_explicit(&log_seen[i], memory_order_relaxed) == h) return false;
  k = atomic_fetch_add_explicit(&log_nseen, 1, memory_order_relaxed);
  if (k < LOG_SEEN) atomic_store_explicit(&log_seen[k], h, memory_order_relaxed);
  return true;
}

static void log_vwrite(int fd, const char *fmt, va_list ap)
{
  int saved = errno;
  char buf[512];
  int n = snprintf(buf, sizeof buf, "tiermalloc: ");
  n += vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
  if (n > (int)sizeof buf - 2) n = (int)sizeof buf - 2;
  buf[n++] = '\n';
  if (log_first_time(buf, (size_t)n) || !log_quiet) {
    ssize_t w = write(fd, buf, (size_t)n);
    (void)w;
  }
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
