#include "watch.h"

#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kfile.h"
#include "text.h"

#define WATCH_MAX 8

static struct {
  _Atomic int fd;                 /* -1: none */
  _Atomic int kick_wd;            /* the watch on "/" that tm_watch_kick removes */
  int wd[WATCH_MAX];
  uint64_t ino[WATCH_MAX + 1];    /* the watched inodes, "/" last: what fdinfo must show */
  unsigned n;
} watch = { .fd = -1, .kick_wd = -1 };

/* fd is still this instance: /proc/self/fdinfo/<fd> lists its watches, by
 * inode, and no other. */
static bool watch_ours(int fd)
{
  char path[64], buf[2048];
  int len = 0;
  path[0] = '\0';
  if (tm_text_append(path, sizeof path, &len, "/proc/self/fdinfo/") ||
      tm_text_append_uint(path, sizeof path, &len, (unsigned)fd))
    return false;
  int n = tm_kfile_read(path, buf, sizeof buf);
  if (n <= 0) return false;
  unsigned seen = 0;
  for (const char *p = buf; (p = strstr(p, "inotify wd:")) != NULL; p++) {
    const char *i = strstr(p, " ino:");
    const char *nl = memchr(p, '\n', (size_t)(buf + n - p));
    if (!i || (nl && i > nl)) return false;
    uint64_t ino = 0;
    for (i += 5; (*i >= '0' && *i <= '9') || (*i >= 'a' && *i <= 'f'); i++)
      ino = ino * 16 + (uint64_t)(*i <= '9' ? *i - '0' : *i - 'a' + 10);
    bool known = false;
    for (unsigned k = 0; k <= watch.n && !known; k++) known = watch.ino[k] == ino;
    if (!known) return false;
    seen++;
  }
  /* The kick's watch is gone after a kick. */
  return seen > 0 && seen >= watch.n && seen <= watch.n + 1;
}

/* The descriptor is not ours any more: never touch it again. */
static void watch_forget(void)
{
  atomic_store_explicit(&watch.fd, -1, memory_order_release);
  atomic_store_explicit(&watch.kick_wd, -1, memory_order_relaxed);
  watch.n = 0;
}

static bool watch_kick_arm(int fd)
{
  struct stat st;
  if (stat("/", &st) != 0) return false;
  int wd = inotify_add_watch(fd, "/", IN_DELETE_SELF);
  if (wd < 0) return false;
  watch.ino[watch.n] = (uint64_t)st.st_ino;
  atomic_store_explicit(&watch.kick_wd, wd, memory_order_relaxed);
  return true;
}

bool tm_watch_start(void)
{
  if (atomic_load_explicit(&watch.fd, memory_order_relaxed) >= 0) return true;
  int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (fd < 0) return false;
  watch.n = 0;
  if (!watch_kick_arm(fd)) {
    close(fd);
    return false;
  }
  atomic_store_explicit(&watch.fd, fd, memory_order_release);
  return true;
}

bool tm_watch_files(const char *const *paths, unsigned n)
{
  int fd = atomic_load_explicit(&watch.fd, memory_order_relaxed);
  if (fd < 0 || n > WATCH_MAX) return false;
  int wd[WATCH_MAX];
  uint64_t ino[WATCH_MAX];
  bool ok = true;
  unsigned m = 0;
  for (unsigned k = 0; k < n; k++) {
    struct stat st;
    int w = stat(paths[k], &st) == 0 ? inotify_add_watch(fd, paths[k], IN_MODIFY) : -1;
    if (w < 0) {
      ok = false;
      continue;
    }
    wd[m] = w;
    ino[m++] = (uint64_t)st.st_ino;
  }
  /* Watches of files no longer wanted go (each wakes the waiter once). */
  for (unsigned k = 0; k < watch.n; k++) {
    bool kept = false;
    for (unsigned j = 0; j < m && !kept; j++) kept = wd[j] == watch.wd[k];
    if (!kept) inotify_rm_watch(fd, watch.wd[k]);
  }
  uint64_t root = watch.ino[watch.n];
  for (unsigned k = 0; k < m; k++) {
    watch.wd[k] = wd[k];
    watch.ino[k] = ino[k];
  }
  watch.n = m;
  watch.ino[m] = root;
  return ok;
}

int tm_watch_wait(uint64_t ns)
{
  int fd = atomic_load_explicit(&watch.fd, memory_order_acquire);
  if (fd < 0) return -1;
  struct pollfd p = { .fd = fd, .events = POLLIN };
  struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };
  int r = ppoll(&p, 1, &ts, NULL);
  if (r <= 0) return 0;
  if ((p.revents & POLLNVAL) || !watch_ours(fd)) {
    watch_forget();
    return -1;
  }
  union {
    struct inotify_event ev;
    char buf[1024];
  } u;
  ssize_t got;
  bool rearm = false;
  while ((got = read(fd, u.buf, sizeof u.buf)) > 0) {
    for (char *q = u.buf; q + sizeof(struct inotify_event) <= u.buf + got;) {
      struct inotify_event *e = (struct inotify_event *)q;
      if ((e->mask & IN_IGNORED) && e->wd == atomic_load_explicit(&watch.kick_wd, memory_order_relaxed))
        rearm = true;
      q += sizeof *e + e->len;
    }
  }
  if (rearm) watch_kick_arm(fd);
  return 1;
}

bool tm_watch_active(void)
{
  return atomic_load_explicit(&watch.fd, memory_order_relaxed) >= 0;
}

void tm_watch_kick(void)
{
  int fd = atomic_load_explicit(&watch.fd, memory_order_acquire);
  int wd = atomic_load_explicit(&watch.kick_wd, memory_order_relaxed);
  if (fd >= 0 && wd >= 0 && watch_ours(fd)) inotify_rm_watch(fd, wd);
}

void tm_watch_stop(void)
{
  int fd = atomic_load_explicit(&watch.fd, memory_order_acquire);
  if (fd >= 0 && watch_ours(fd)) close(fd);
  watch_forget();
}
