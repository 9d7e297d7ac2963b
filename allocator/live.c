#include "live.h"

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <signal.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "background.h"
#include "clock.h"
#include "liverec.h"
#include "log.h"
#include "options.h"
#include "outfile.h"
#include "range.h"
#include "stats.h"

/* Taken by every writer (the library's thread and program threads publishing
 * on demand); never by a reader, which is another process. */
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static tier_live_t *live_rec;            /* the mapping; NULL: no record (yet) */
static size_t live_size;
static char live_path[TM_OPT_STRING_MAX + 32];
static pid_t live_pid;                   /* who made live_path */
static atomic_bool live_wanted;          /* on (the option), and not refused for good */
static uint64_t live_interval_ns;
static _Atomic uint64_t live_next_ns;    /* CLOCK_MONOTONIC: the next publication */
static uint64_t live_measured_ns;        /* CLOCK_MONOTONIC: the last resident measurement */
static uint64_t live_resident_real_ns;   /* the same, CLOCK_REALTIME, for the record */
static tier_stats_t live_last;           /* under live_mu: its resident is reused */
static atomic_bool live_by_thread;       /* the last publication was the thread's, and it runs */

#define LIVE_RESIDENT_EVERY_NS (10 * 1000000000ull)
#define LIVE_CHANGED ((uint64_t)1 << 20)

static uint64_t live_sig;   /* under live_mu: live_signature at the last measurement */

/* What moves resident bytes: bytes committed on each tier and bytes reclaim
 * moved, summed (each tier weighted apart, so a move between tiers counts). */
static uint64_t live_signature(const tier_stats_t *s)
{
  uint64_t sig = 0;
  for (unsigned t = 0; t < s->ntiers && t < TIER_MAX_TIERS; t++)
    sig += (t + 1) * s->tier[t].committed + s->tier[t].reclaim.demoted + s->tier[t].reclaim.promoted +
           s->tier[t].reclaim.pageout;
  return sig;
}

/* Removes this user's records whose process is gone. A process killed, or
 * ending with _exit (a fork child's usual end), runs no exit handler, and
 * tierctl may never look: each new record sweeps the directory once, so they
 * cannot pile up. (One that exec'd another program is tierctl's to find:
 * its pid lives on.) getdents64 on a stack buffer: no allocation. */
static void live_sweep(const char *dir, uint64_t ns)
{
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  char buf[4096];
  const size_t plen = sizeof TIER_LIVE_PREFIX - 1;
  for (;;) {
    long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
    if (n <= 0) break;
    for (long off = 0; off < n;) {
      struct linux_dirent64 {
        uint64_t ino;
        int64_t off;
        unsigned short reclen;
        unsigned char type;
        char name[];
      } *d = (void *)(buf + off);
      off += d->reclen;
      if (strncmp(d->name, TIER_LIVE_PREFIX, plen) != 0) continue;
      uint64_t pid = 0;
      const char *c = d->name + plen;
      for (; *c >= '0' && *c <= '9' && pid < INT32_MAX; c++) pid = pid * 10 + (uint64_t)(*c - '0');
      if (*c != '\0' || pid == 0 || pid >= INT32_MAX) continue;
      struct stat st;
      if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
      if (fstatat(fd, d->name, &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_uid != geteuid() || !S_ISREG(st.st_mode))
        continue;
      /* Only a record of this pid namespace: another's pid means nothing here. */
      int rf = openat(fd, d->name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
      if (rf < 0) continue;
      tier_live_t head;
      ssize_t got = pread(rf, &head, offsetof(tier_live_t, command), 0);
      close(rf);
      if (got != (ssize_t)offsetof(tier_live_t, command) || head.magic != TIER_LIVE_MAGIC || head.pid_ns != ns)
        continue;
      unlinkat(fd, d->name, 0);
    }
  }
  close(fd);
}

/* Under live_mu. 0, or a positive errno (nothing made). */
static int live_create_locked(void)
{
  snprintf(live_path, sizeof live_path, "%s/" TIER_LIVE_PREFIX "%d",
           tm_option(TM_OPTION_LIVE_DIR)->str, (int)getpid());
  int fd = -1;
  int err = tm_outfile_create(live_path, true, &fd);
  if (err != 0) return err;
  long page = sysconf(_SC_PAGESIZE);
  size_t size = (sizeof(tier_live_t) + (size_t)page - 1) & ~((size_t)page - 1);
  void *p = MAP_FAILED;
  /* The pages allocated now (fallocate), not at the first write: a full
   * tmpfs would otherwise answer that write with SIGBUS. */
  if (fallocate(fd, 0, 0, (off_t)size) != 0) err = errno;
  else if ((p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) err = errno;
  close(fd);
  if (err != 0) {
    unlink(live_path);
    return err;
  }
  live_rec = p;
  live_size = size;
  live_pid = getpid();
  tier_live_t *r = live_rec;
  uint64_t ns = tm_liverec_pid_ns();
  r->version = TIER_LIVE_VERSION;
  r->pid_ns = ns;
  r->size = sizeof *r;
  r->pid = (uint32_t)live_pid;
  snprintf(r->command, sizeof r->command, "%s", program_invocation_short_name);
  if (tm_ranges.n > 0) {
    r->range_base = tm_ranges.base;
    r->range_end = tm_ranges.base + ((uint64_t)tm_ranges.n << tm_ranges.shift);
  }
  /* Last: a reader takes a file without the magic for one still being made. */
  atomic_store_explicit((_Atomic uint64_t *)&r->magic, TIER_LIVE_MAGIC, memory_order_release);
  if (ns != 0) live_sweep(tm_option(TM_OPTION_LIVE_DIR)->str, ns);
  return 0;
}

/* Under live_mu: *s's resident bytes were measured at `now`, with the memory
 * as live_signature(s) says. */
static void live_measured_locked(const tier_stats_t *s, uint64_t now)
{
  live_sig = live_signature(s);
  live_measured_ns = now;
  live_resident_real_ns = tm_clock_ns(CLOCK_REALTIME);
}

/* Under live_mu: one seqlock write of *s. */
static void live_store_locked(const tier_stats_t *s, uint32_t publisher, uint64_t interval_ns)
{
  tm_liverec_write(live_rec, s, publisher, tm_clock_ns(CLOCK_REALTIME), live_resident_real_ns,
                   interval_ns);
  if (s != &live_last) live_last = *s;
}

/* Under live_mu: the record exists, made now if this process has none yet
 * (a fork child) and the caller is a program thread. tiermalloc's own
 * thread never makes it: opening a file from a thread of our own races a
 * program that closes every descriptor (a daemon, a fork child before
 * exec), which could close ours and open one of its own under the same
 * number, that our fallocate and mmap would then write into. */
static bool live_ready_locked(uint32_t *publisher, bool on_thread)
{
  if (live_rec != NULL) return true;
  if (!live_wanted || on_thread) return false;
  int err = live_create_locked();
  if (err != 0) {
    live_wanted = false;
    /* Secure execution makes none; without the default directory (or leave
     * to write there) a process just has none, as a missing cgroup file is
     * silent; a directory the user named is said. */
    bool quiet = err == EPERM || (!tm_option(TM_OPTION_LIVE_DIR)->set &&
                                  (err == ENOENT || err == EACCES || err == EROFS));
    if (!quiet)
      tm_warn("cannot publish live stats in %s (%s); tierctl will not see this process",
              live_path, tm_outfile_strerror(err));
    return false;
  }
  *publisher = TIER_LIVE_STARTUP;
  return true;
}

static void live_prefork(void);
static void live_postfork_parent(void);
static void live_postfork_child(void);

void tm_live_init(void)
{
  uint64_t ms = tm_option(TM_OPTION_LIVE_MS)->num;
  if (ms == 0 || live_interval_ns != 0) return;
  if (pthread_atfork(live_prefork, live_postfork_parent, live_postfork_child) != 0) {
    tm_warn("cannot register the live record's fork handlers; no live stats");
    return;
  }
  live_interval_ns = (ms < 10 ? 10 : ms) * 1000000u;
  live_wanted = true;
  static const tm_background_tick_t tick = { tm_live_tick, tm_live_due, tm_live_thread_stopped, tm_live_wanted,
                                             tm_live_prepare };
  tm_background_set_tick(&tick);
  atomic_store_explicit(&live_next_ns, tm_clock_ns(CLOCK_MONOTONIC) + live_interval_ns, memory_order_relaxed);
  /* The record is made by this first publication, which says so (STARTUP). */
  tier_stats_t s;
  tm_stats_snapshot(&s, NULL);
  tm_live_publish(&s);
}

bool tm_live_wanted(void)
{
  return atomic_load_explicit(&live_wanted, memory_order_relaxed);
}

bool tm_live_due(void)
{
  return atomic_load_explicit(&live_wanted, memory_order_relaxed) &&
         tm_clock_ns(CLOCK_MONOTONIC_COARSE) >= atomic_load_explicit(&live_next_ns, memory_order_relaxed);
}

uint64_t tm_live_tick(bool on_thread)
{
  if (!live_wanted && live_rec == NULL) return UINT64_MAX;
  uint64_t now = tm_clock_ns(CLOCK_MONOTONIC);
  uint64_t next = atomic_load_explicit(&live_next_ns, memory_order_relaxed);
  /* A thread that starts publishing says so at once: the record then
   * promises a publication every interval. */
  bool first = on_thread && !atomic_load_explicit(&live_by_thread, memory_order_relaxed);
  if (now < next && !first) return next - now;
  pthread_mutex_lock(&live_mu);
  uint32_t publisher = on_thread ? TIER_LIVE_THREAD : TIER_LIVE_COMMIT;
  if (live_ready_locked(&publisher, on_thread)) {
    atomic_store_explicit(&live_by_thread, on_thread, memory_order_relaxed);
    tier_stats_t s;
    tm_stats_snapshot(&s, &live_last);
    /* Resident costs a walk of the page tables (numa_maps, 2-4 ms per 0.5
     * GiB): measured again when the memory changed (committed bytes, or
     * bytes reclaim moved, by a MiB or more since the last measurement)
     * while reclaim runs, or 10 s went by (what the kernel moves on its own:
     * swap, khugepaged); never more than 2 % of a core while it changes.
     * Without reclaim only every 10 s: tierctl measures it itself where it
     * may, so the record's figure is for readers that cannot (with its age),
     * and every allocating process's thread walking its page tables at each
     * change cost the VM suites' timed tests their margin. */
    uint64_t sig = live_signature(&s), since = now - live_measured_ns;
    bool changed = s.reclaim_state != TIER_RECLAIM_STOPPED &&
                   (sig > live_sig + LIVE_CHANGED || sig + LIVE_CHANGED < live_sig);
    if (since >= 50 * s.resident_sample_ns && (changed || since >= LIVE_RESIDENT_EVERY_NS)) {
      tm_stats_resident(&s);
      live_measured_locked(&s, now);
    }
    live_store_locked(&s, publisher, on_thread ? live_interval_ns : 0);
  }
  atomic_store_explicit(&live_next_ns, now + live_interval_ns, memory_order_relaxed);
  bool on = live_rec != NULL || live_wanted;
  pthread_mutex_unlock(&live_mu);
  return on ? live_interval_ns : UINT64_MAX;
}

void tm_live_prepare(void)
{
  if (!atomic_load_explicit(&live_wanted, memory_order_relaxed) || live_rec != NULL) return;
  tier_stats_t s;
  tm_stats_snapshot(&s, NULL);
  tm_live_publish(&s);
}

void tm_live_thread_stopped(void)
{
  pthread_mutex_lock(&live_mu);
  if (live_rec != NULL) live_store_locked(&live_last, live_rec->publisher, 0);
  atomic_store_explicit(&live_next_ns, 0, memory_order_relaxed);
  atomic_store_explicit(&live_by_thread, false, memory_order_relaxed);
  pthread_mutex_unlock(&live_mu);
}

int tm_live_publish(const tier_stats_t *s)
{
  pthread_mutex_lock(&live_mu);
  uint32_t publisher = TIER_LIVE_DEMAND;
  int err = ENOENT;
  if (live_ready_locked(&publisher, false)) {
    live_measured_locked(s, tm_clock_ns(CLOCK_MONOTONIC));
    live_store_locked(s, publisher, live_rec->interval_ns);
    err = 0;
  }
  pthread_mutex_unlock(&live_mu);
  return err;
}

void tm_live_at_exit(void)
{
  pthread_mutex_lock(&live_mu);
  if (live_rec != NULL && live_pid == getpid()) {
    unlink(live_path);
    munmap(live_rec, live_size);
    live_rec = NULL;
  }
  live_wanted = false;
  pthread_mutex_unlock(&live_mu);
}

/* Fork: no publication runs across it; the child unmaps its parent's record
 * (it must never write there) and makes its own at its first publication. */
static void live_prefork(void)
{
  pthread_mutex_lock(&live_mu);
}

static void live_postfork_parent(void)
{
  pthread_mutex_unlock(&live_mu);
}

static void live_postfork_child(void)
{
  pthread_mutex_init(&live_mu, NULL);
  if (live_rec != NULL) munmap(live_rec, live_size);
  live_rec = NULL;
  atomic_store_explicit(&live_by_thread, false, memory_order_relaxed);
  /* Not at once: a child that execs within the interval (a shell's) leaves
   * no record behind; exec runs no exit handler. */
  atomic_store_explicit(&live_next_ns, tm_clock_ns(CLOCK_MONOTONIC) + live_interval_ns, memory_order_relaxed);
  live_measured_ns = 0;
}
