/*
 * tierctl: the processes running tiermalloc, seen from outside through their
 * live records (include/tiermalloc.h, "The live record"). `tierctl --help`
 * and tierctl(1) say what each command does.
 *
 * Every error is one line on stderr, "tierctl: ...", and exit status 1 (2 for
 * a usage error); nothing here aborts on what a record or /proc holds.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "balancing.h"
#include "budget.h"
#include "cgroup.h"
#include "liverec.h"
#include "options.h"
#include "os.h"
#include "statsfmt.h"
#include "tiermalloc.h"
#include "topology.h"

#define MiB (1024.0 * 1024.0)

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  fputs("tierctl: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  return 1;
}

static const char *live_dir(void)
{
  const char *d = getenv("TIERMALLOC_LIVE_DIR");
  return d && d[0] ? d : "/dev/shm";
}

static uint64_t now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static double now_s(void)
{
  return (double)now_ns() / 1e9;
}

/* ---- reading a record ------------------------------------------------------ */

typedef enum {
  RD_OK,
  RD_NONE,    /* no record under that pid */
  RD_PERM,    /* another user's */
  RD_STALE,   /* its process ended or exec'd: removed (when we may) */
  RD_BAD,     /* truncated, of another version, or not a record */
  RD_BUSY,    /* written at every attempt */
  RD_FOREIGN, /* written in another pid namespace: its pid means another process here */
} rd_t;


/* Does a line of /proc/pid/maps satisfy hit? 1 yes, 0 no (or no such
 * process: a zombie's or an exiting process's maps read empty), -1 cannot
 * tell (no permission). */
static int proc_maps_any(pid_t pid, bool (*hit)(const char *line, const void *arg), const void *arg)
{
  char path[64], line[4096];
  snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
  FILE *f = fopen(path, "re");
  if (!f) return errno == ENOENT || errno == ESRCH ? 0 : -1;
  int found = 0;
  while (!found && fgets(line, sizeof line, f)) found = hit(line, arg);
  fclose(f);
  return found;
}

/* A file as /proc/PID/maps may name it: its device and inode, or, where
 * those differ from what stat says (overlayfs shows the layer's device and
 * inode, as a guest's or a container's /tmp is), its canonical path. */
typedef struct {
  struct stat st;
  char path[PATH_MAX];
} maps_file_t;

static bool maps_file(const char *line, const void *arg)
{
  const maps_file_t *f = arg;
  unsigned maj, min;
  unsigned long long inode;
  int name = 0;
  if (sscanf(line, "%*s %*s %*s %x:%x %llu %n", &maj, &min, &inode, &name) != 3) return false;
  if (inode == (unsigned long long)f->st.st_ino && makedev(maj, min) == f->st.st_dev) return true;
  size_t len = strlen(f->path);
  return name > 0 && f->path[0] == '/' && strncmp(line + name, f->path, len) == 0 && line[name + len] == '\n';
}

static bool maps_tiermalloc(const char *line, const void *arg)
{
  (void)arg;
  return strstr(line, "libtiermalloc") != NULL;
}

/* A record as tierctl shows it: the process's copy, whose resident bytes
 * tierctl measured again itself at the read where it may (the process's
 * numa_maps, which its user and root can read unless it made itself not
 * dumpable): the process's own figure can be up to 10 s old, or from
 * whenever it last published. */
typedef struct {
  tier_live_t r;
  uint64_t read_ns;   /* CLOCK_REALTIME of the read */
  int measure_err;    /* 0: resident measured by tierctl at read_ns; else why not (errno) */
} seen_t;

static uint64_t age_ns(uint64_t now, uint64_t then)
{
  return now > then ? now - then : 0;
}

/* The ages a reader needs to trust the figures (statsfmt prints them). */
static tm_stats_record_t seen_ages(const seen_t *v)
{
  const tier_live_t *r = &v->r;
  return (tm_stats_record_t){
    .published_age_ns = age_ns(v->read_ns, r->published_ns),
    .interval_ns = r->interval_ns,
    .resident_age_ns = v->measure_err == 0 ? 0 : age_ns(v->read_ns, r->resident_ns),
    .publisher = tm_stats_publisher_name(r->publisher),
    .resident_by = v->measure_err == 0 ? "tierctl" : "process",
  };
}

static rd_t read_record(pid_t pid, seen_t *seen)
{
  tier_live_t *out = &seen->r;
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/" TIER_LIVE_PREFIX "%d", live_dir(), (int)pid);
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno == EACCES || errno == EPERM ? RD_PERM : RD_NONE;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return RD_BAD;
  }
  if ((uint64_t)st.st_size < sizeof *out) {
    close(fd);
    return RD_BAD;
  }
  void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return RD_BAD;
  int err = tm_liverec_read(p, (uint64_t)st.st_size, out, 1000);
  munmap(p, (size_t)st.st_size);
  if (err == EAGAIN) return RD_BUSY;
  if (err != 0 || out->pid != (uint32_t)pid) return RD_BAD;
  uint64_t ns = tm_liverec_pid_ns();
  if (out->pid_ns != 0 && ns != 0 && out->pid_ns != ns) return RD_FOREIGN;
  maps_file_t mf = { .st = st };
  if (!realpath(path, mf.path)) mf.path[0] = '\0';
  if (proc_maps_any(pid, maps_file, &mf) == 0) {
    unlink(path);   /* the directory's sticky bit lets its owner (or root) do it */
    return RD_STALE;
  }
  char maps[64];
  snprintf(maps, sizeof maps, "/proc/%d/numa_maps", (int)pid);
  seen->read_ns = now_ns();
  seen->measure_err = tm_liverec_measure(out, maps);
  return RD_OK;
}


static int explain_rd(pid_t pid, rd_t r)
{
  char proc[64];
  snprintf(proc, sizeof proc, "/proc/%d", (int)pid);
  switch (r) {
  case RD_OK: return 0;
  case RD_PERM: return fail("process %d is another user's: its record is readable by its user and root only", (int)pid);
  case RD_STALE: return fail("process %d has ended (or exec'd): its stale record was removed", (int)pid);
  case RD_BAD: return fail("the record of process %d is truncated or not a tiermalloc record (version %d expected)",
                           (int)pid, TIER_LIVE_VERSION);
  case RD_BUSY: return fail("the record of process %d was being written at every attempt; try again", (int)pid);
  case RD_FOREIGN: return fail("%s/" TIER_LIVE_PREFIX "%d is a process of another pid namespace (a container "
                               "sharing this directory): run tierctl in that namespace", live_dir(), (int)pid);
  case RD_NONE: break;
  }
  if (access(proc, F_OK) != 0) return fail("no process %d", (int)pid);
  /* Does the process map libtiermalloc at all? */
  if (proc_maps_any(pid, maps_tiermalloc, NULL) == 1)
    return fail("process %d runs tiermalloc but publishes no record (TIERMALLOC_LIVE_MS=0, secure execution, "
                "or another TIERMALLOC_LIVE_DIR than %s)", (int)pid, live_dir());
  return fail("process %d does not run tiermalloc", (int)pid);
}

/* Every readable, live record, pids ascending. Stale ones are removed. */
typedef struct {
  seen_t *rec;
  unsigned n, cap;
} recs_t;

static int pid_cmp(const void *a, const void *b)
{
  const seen_t *x = a, *y = b;
  return x->r.pid < y->r.pid ? -1 : x->r.pid > y->r.pid;
}

static int list_records(recs_t *out)
{
  DIR *d = opendir(live_dir());
  if (!d) return errno;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    const char *pre = TIER_LIVE_PREFIX;
    if (strncmp(e->d_name, pre, strlen(pre)) != 0) continue;
    char *end;
    long pid = strtol(e->d_name + strlen(pre), &end, 10);
    if (*end || pid <= 0) continue;
    if (out->n == out->cap) {
      out->cap = out->cap ? 2 * out->cap : 16;
      seen_t *grown = realloc(out->rec, out->cap * sizeof *out->rec);
      if (!grown) break;
      out->rec = grown;
    }
    if (read_record((pid_t)pid, &out->rec[out->n]) == RD_OK) out->n++;
  }
  closedir(d);
  qsort(out->rec, out->n, sizeof *out->rec, pid_cmp);
  return 0;
}

/* ---- printing -------------------------------------------------------------- */

static void write_stdout(void *arg, const char *buf, size_t len)
{
  (void)arg;
  fwrite(buf, 1, len, stdout);
}

static const char *human(uint64_t v, char *buf, size_t size)
{
  if (v == TIER_UNLIMITED) snprintf(buf, size, "unlimited");
  else if (v < 1024) snprintf(buf, size, "%llu B", (unsigned long long)v);
  else if (v < 1024 * 1024) snprintf(buf, size, "%.1f KiB", (double)v / 1024);
  else if (v < 1024ull * 1024 * 1024) snprintf(buf, size, "%.1f MiB", (double)v / MiB);
  else snprintf(buf, size, "%.2f GiB", (double)v / (MiB * 1024));
  return buf;
}

static const char *publisher_name(uint32_t p, uint64_t interval_ns)
{
  if (p == TIER_LIVE_THREAD) return interval_ns ? "its thread" : "its thread, stopped";
  return tm_stats_publisher_name(p);
}

/* The record's own figures are older than its process's thread would leave
 * them: the process is stopped (or stuck), or no thread publishes in it. */
static bool seen_stale(const seen_t *v)
{
  uint64_t age = age_ns(v->read_ns, v->r.published_ns);
  return v->r.interval_ns == 0 ? age > 1000000000ull : age > 2 * v->r.interval_ns + 200000000ull;
}

static void ps_header(void)
{
  printf("%-7s %-15s %12s %12s %12s %12s  %-12s %s\n", "PID", "COMMAND", "TIER0 NOW", "HIGH", "MAX",
         "LOWER TIERS", "RECLAIM", "PUBLISHED");
}

static void ps_line(const seen_t *v)
{
  const tier_live_t *r = &v->r;
  const tier_stats_t *s = &r->stats;
  uint64_t lower = 0;
  for (unsigned t = 1; t < s->ntiers && t < TIER_MAX_TIERS; t++) lower += s->tier[t].resident;
  char a[32], b[32], c[32], d[32], age[96];
  tm_stats_record_t g = seen_ages(v);
  int n = snprintf(age, sizeof age, "%.1fs ago, %s", (double)g.published_age_ns / 1e9,
                   publisher_name(r->publisher, r->interval_ns));
  if (v->measure_err != 0 && n > 0 && (size_t)n < sizeof age)
    snprintf(age + n, sizeof age - (size_t)n, "; resident %.1fs old", (double)g.resident_age_ns / 1e9);
  printf("%-7u %-15.15s %12s %12s %12s %12s  %-12s %s\n", r->pid, r->command, human(s->tier[0].resident, a, sizeof a),
         human(s->tier[0].budget.high, b, sizeof b), human(s->tier[0].budget.max, c, sizeof c),
         s->ntiers > 1 ? human(lower, d, sizeof d) : "-", tm_stats_reclaim_state_name(s->reclaim_state), age);
}

static int cmd_ps(void)
{
  recs_t l = { 0 };
  int err = list_records(&l);
  if (err) return fail("cannot read %s: %s", live_dir(), strerror(err));
  ps_header();
  for (unsigned k = 0; k < l.n; k++) ps_line(&l.rec[k]);
  free(l.rec);
  return 0;
}

static bool parse_pid(const char *s, pid_t *pid)
{
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || v <= 0 || v > INT_MAX) return false;
  *pid = (pid_t)v;
  return true;
}

static int cmd_status(int argc, char **argv)
{
  tier_stats_format_t fmt = TIER_STATS_TEXT;
  pid_t pid = 0;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0) fmt = TIER_STATS_JSON;
    else if (strcmp(argv[i], "--prom") == 0) fmt = TIER_STATS_PROM;
    else if (pid == 0 && parse_pid(argv[i], &pid)) continue;
    else {
      fail("status: unexpected '%s' (usage: tierctl status PID [--json | --prom])", argv[i]);
      return 2;
    }
  }
  if (pid == 0 && fmt == TIER_STATS_PROM) {   /* every process: the textfile collector's input */
    recs_t l = { 0 };
    int err = list_records(&l);
    if (err) return fail("cannot read %s: %s", live_dir(), strerror(err));
    const tier_stats_t **s = calloc(l.n + 1, sizeof *s);
    tm_stats_who_t *who = calloc(l.n + 1, sizeof *who);
    tm_stats_record_t *ages = calloc(l.n + 1, sizeof *ages);
    if (!s || !who || !ages) return fail("out of memory");
    for (unsigned k = 0; k < l.n; k++) {
      s[k] = &l.rec[k].r.stats;
      ages[k] = seen_ages(&l.rec[k]);
      who[k] = (tm_stats_who_t){ l.rec[k].r.pid, l.rec[k].r.command, true, &ages[k] };
    }
    tm_stats_format_prom(s, who, l.n, write_stdout, NULL);
    free(s);
    free(who);
    free(ages);
    free(l.rec);
    return 0;
  }
  if (pid == 0) {
    fail("status: which process? (usage: tierctl status PID [--json | --prom]; all: tierctl status --prom)");
    return 2;
  }
  seen_t v;
  rd_t rd = read_record(pid, &v);
  if (rd != RD_OK) return explain_rd(pid, rd);
  const tier_live_t *r = &v.r;
  tm_stats_record_t ages = seen_ages(&v);
  tm_stats_who_t who = { r->pid, r->command, true, &ages };
  if (fmt == TIER_STATS_TEXT) {
    printf("process %u (%s): published %.1f s ago (%s)", r->pid, r->command, (double)ages.published_age_ns / 1e9,
           publisher_name(r->publisher, r->interval_ns));
    if (r->interval_ns) printf(", every %.0f ms", (double)r->interval_ns / 1e6);
    if (seen_stale(&v))
      printf("; %s: its own figures are as of then", r->interval_ns ? "late (the process is stopped?)"
                                                                   : "no thread publishes in it now");
    if (v.measure_err == 0) printf("; resident measured now by tierctl");
    else
      printf("; resident as the process measured it %.1f s ago (tierctl cannot read /proc/%u/numa_maps: %s)",
             (double)ages.resident_age_ns / 1e9, r->pid, strerror(v.measure_err));
    printf("\n");
  }
  tm_stats_format(&r->stats, &who, write_stdout, NULL, fmt);
  return 0;
}

/* ---- top and record ------------------------------------------------------------ */

/* "100ms", "2s", "1.5s", or a number of ms. 0 on error. */
static double parse_interval(const char *s)
{
  char *end;
  double v = strtod(s, &end);
  if (end == s || v <= 0) return 0;
  if (strcmp(end, "ms") == 0 || *end == '\0') return v / 1000;
  if (strcmp(end, "s") == 0) return v;
  return 0;
}

static volatile sig_atomic_t stop_now;
static void on_signal(int sig)
{
  (void)sig;
  stop_now = 1;
}

static int cmd_top(int argc, char **argv)
{
  double every = 1;
  long rounds = -1;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "-i") == 0 && i + 1 < argc && (every = parse_interval(argv[++i])) > 0) continue;
    if (strcmp(argv[i], "-n") == 0 && i + 1 < argc && (rounds = strtol(argv[++i], NULL, 10)) > 0) continue;
    fail("top: unexpected '%s' (usage: tierctl top [-i INTERVAL] [-n ROUNDS])", argv[i]);
    return 2;
  }
  bool tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
  struct termios old, raw;
  if (tty && tcgetattr(STDIN_FILENO, &old) == 0) {
    raw = old;
    raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    tcsetattr(STDIN_FILENO, TCSANOW, &raw);
  } else {
    tty = false;
  }
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  int rc = 0;
  for (long k = 0; !stop_now && (rounds < 0 || k < rounds); k++) {
    recs_t l = { 0 };
    int err = list_records(&l);
    if (err) {
      rc = fail("cannot read %s: %s", live_dir(), strerror(err));
      break;
    }
    time_t t = time(NULL);
    char when[32];
    strftime(when, sizeof when, "%H:%M:%S", localtime(&t));
    if (tty) printf("\033[H\033[2J");
    printf("tierctl top - %s, %u process%s (q quits)\n", when, l.n, l.n == 1 ? "" : "es");
    ps_header();
    for (unsigned j = 0; j < l.n; j++) ps_line(&l.rec[j]);
    free(l.rec);
    fflush(stdout);
    if (rounds >= 0 && k + 1 >= rounds) break;
    struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };
    if (poll(&p, tty ? 1 : 0, (int)(every * 1000)) > 0) {
      char c;
      if (read(STDIN_FILENO, &c, 1) == 1 && (c == 'q' || c == 'Q')) break;
    }
  }
  if (tty) tcsetattr(STDIN_FILENO, TCSANOW, &old);
  return rc;
}

/* The CSV's columns: time, then for each tier these figures. */
#define RECORD_TIER_COLUMNS(X)                                                                     \
  X(resident, s->tier[t].resident)                                                                 \
  X(committed, s->tier[t].committed)                                                               \
  X(high, s->tier[t].budget.high)                                                                  \
  X(max, s->tier[t].budget.max)                                                                    \
  X(demoted, s->tier[t].reclaim.demoted)                                                           \
  X(promoted, s->tier[t].reclaim.promoted)                                                         \
  X(pageout, s->tier[t].reclaim.pageout)

static int cmd_record(int argc, char **argv)
{
  pid_t pid = 0;
  double every = 0.1;
  const char *out = NULL;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "-i") == 0 && i + 1 < argc && (every = parse_interval(argv[++i])) > 0) continue;
    if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) {
      out = argv[++i];
      continue;
    }
    if (pid == 0 && parse_pid(argv[i], &pid)) continue;
    fail("record: unexpected '%s' (usage: tierctl record PID [-i INTERVAL] [-o FILE.csv])", argv[i]);
    return 2;
  }
  if (pid == 0) {
    fail("record: which process? (usage: tierctl record PID [-i INTERVAL] [-o FILE.csv])");
    return 2;
  }
  seen_t v;
  rd_t rd = read_record(pid, &v);
  if (rd != RD_OK) return explain_rd(pid, rd);
  const tier_live_t *r = &v.r;   /* its header; the loop reads v again */
  FILE *f = out ? fopen(out, "we") : stdout;
  if (!f) return fail("cannot write %s: %s", out, strerror(errno));
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  unsigned ntiers = r->stats.ntiers < TIER_MAX_TIERS ? r->stats.ntiers : TIER_MAX_TIERS;
  time_t t0 = time(NULL);
  char when[64];
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t0));
  fprintf(f, "# tierctl record: pid %u (%s), %u tier%s, from %s, every %g s; bytes; unlimited: -1\n", r->pid,
          r->command, ntiers, ntiers == 1 ? "" : "s", when, every);
  fprintf(f, "time_s");
  for (unsigned t = 0; t < ntiers; t++) {
#define X(name, expr) fprintf(f, ",tier%u_" #name, t);
    RECORD_TIER_COLUMNS(X)
#undef X
  }
  fprintf(f, "\n");
  double start = now_s();
  unsigned rows = 0;
  while (!stop_now) {
    const tier_stats_t *s = &v.r.stats;
    fprintf(f, "%.3f", now_s() - start);
    for (unsigned t = 0; t < ntiers; t++) {
#define X(name, expr) fprintf(f, ",%lld", (expr) == TIER_UNLIMITED ? -1LL : (long long)(expr));
      RECORD_TIER_COLUMNS(X)
#undef X
    }
    fprintf(f, "\n");
    fflush(f);
    rows++;
    struct timespec ts = { (time_t)every, (long)((every - (double)(time_t)every) * 1e9) };
    nanosleep(&ts, NULL);
    if (read_record(pid, &v) != RD_OK) break;   /* the process ended */
  }
  if (out) fclose(f);
  if (out) fprintf(stderr, "tierctl: %u rows in %s\n", rows, out);
  return 0;
}

/* ---- plot ---------------------------------------------------------------------- */

static int cmd_plot(int argc, char **argv)
{
  const char *in = NULL, *out = NULL;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) out = argv[++i];
    else if (!in) in = argv[i];
    else {
      fail("plot: unexpected '%s' (usage: tierctl plot RUN.csv -o RUN.png)", argv[i]);
      return 2;
    }
  }
  if (!in || !out) {
    fail("plot: usage: tierctl plot RUN.csv -o RUN.png");
    return 2;
  }
  FILE *f = fopen(in, "re");
  if (!f) return fail("cannot read %s: %s", in, strerror(errno));
  char title[512] = "", cols[4096] = "";
  if (!fgets(title, sizeof title, f) || title[0] != '#' || !fgets(cols, sizeof cols, f) ||
      strncmp(cols, "time_s,", 7) != 0) {
    fclose(f);
    return fail("%s is not a tierctl record (no '# tierctl record' and time_s header)", in);
  }
  fclose(f);
  title[strcspn(title, "\n")] = '\0';
  unsigned ncol = 1;
  for (const char *c = cols; *c; c++) ncol += *c == ',';
  unsigned per = 7, ntiers = (ncol - 1) / per;
  if (ntiers == 0 || (ncol - 1) % per) return fail("%s: %u columns, not 1 + 7 per tier", in, ncol);
  char script[PATH_MAX];
  snprintf(script, sizeof script, "/tmp/tierctl-plot-%d.gp", (int)getpid());
  FILE *g = fopen(script, "we");
  if (!g) return fail("cannot write %s: %s", script, strerror(errno));
  /* Resident bytes per tier (solid), its high and max (dashed, where set),
   * and a mark on the resident line wherever bytes were demoted, promoted or
   * paged out since the row before. */
  /* FILE.txt or -: the same plot in characters (gnuplot's dumb terminal). */
  size_t olen = strlen(out);
  bool text = strcmp(out, "-") == 0 || (olen > 4 && strcmp(out + olen - 4, ".txt") == 0);
  if (text) fprintf(g, "set terminal dumb size 100,28 noenhanced\n");
  else fprintf(g, "set terminal pngcairo size 1000,560 noenhanced\n");
  if (strcmp(out, "-") != 0) fprintf(g, "set output '%s'\n", out);
  fprintf(g, "set datafile separator ','\nset key %s\nset grid\n", text ? "below" : "outside right");
  fprintf(g, "set title \"%s\"\nset xlabel 'seconds'\nset ylabel 'MiB'\n", title + 2);
  fprintf(g, "lim(v) = v < 0 ? NaN : v / 1048576.0\n");
  fprintf(g, "array prev[%u]\ndo for [i=1:%u] { prev[i] = NaN }\n", ncol + 1, ncol + 1);
  fprintf(g, "upd(c, v, y) = (r = v > prev[c] ? y : NaN, prev[c] = v, r)\n");
  /* Only the series with something to show: a limit that is set, moves
   * that happened. */
  bool set_high[TIER_MAX_TIERS] = { false }, set_max[TIER_MAX_TIERS] = { false };
  bool grew[TIER_MAX_TIERS][3] = { { false } };
  if (ntiers > TIER_MAX_TIERS) ntiers = TIER_MAX_TIERS;
  f = fopen(in, "re");
  char row[4096];
  long long first[TIER_MAX_TIERS][3];
  bool seen = false;
  while (f && fgets(row, sizeof row, f)) {
    if (row[0] == '#' || strncmp(row, "time_s", 6) == 0) continue;
    char *c = strchr(row, ',');
    for (unsigned t = 0; c && t < ntiers; t++) {
      long long v[7];
      for (unsigned k = 0; k < per; k++) {
        v[k] = c ? strtoll(c + 1, &c, 10) : -1;
        if (c && *c != ',') c = NULL;
      }
      set_high[t] |= v[2] >= 0;
      set_max[t] |= v[3] >= 0;
      for (unsigned k = 0; k < 3; k++) {
        if (!seen) first[t][k] = v[4 + k];
        else grew[t][k] |= v[4 + k] > first[t][k];
      }
    }
    seen = true;
  }
  if (f) fclose(f);
  static const char *const move_name[] = { "demoted", "promoted", "paged out" };
  static const int move_pt[] = { 9, 8, 2 };
  const char *sep = "";
  fprintf(g, "plot ");
  for (unsigned t = 0; t < ntiers; t++) {
    unsigned b = 2 + t * per;   /* resident's column, 1-based */
    fprintf(g, "%s'%s' every ::1 using 1:(lim($%u)) with lines lw 2 lc %u title 'tier %u resident'", sep, in, b,
            t + 1, t);
    sep = ", ";
    if (set_high[t])
      fprintf(g, ", '' every ::1 using 1:(lim($%u)) with steps dt 2 lc %u title 'tier %u high'", b + 2, t + 1, t);
    if (set_max[t])
      fprintf(g, ", '' every ::1 using 1:(lim($%u)) with steps dt 3 lc %u title 'tier %u max'", b + 3, t + 1, t);
    for (unsigned k = 0; k < 3 && !text; k++)
      if (grew[t][k])
        fprintf(g, ", '' every ::1 using 1:(upd(%u, $%u, lim($%u))) with points pt %d ps 1.5 lc %u title 'tier %u %s'",
                b + 4 + k, b + 4 + k, b, move_pt[k], t + 1, t, move_name[k]);
  }
  fprintf(g, "\n");
  fclose(g);
  char cmd[PATH_MAX + 64];
  snprintf(cmd, sizeof cmd, "gnuplot '%s' 2>&1", script);
  FILE *p = popen(cmd, "r");
  if (!p) {
    unlink(script);
    return fail("cannot run gnuplot: %s", strerror(errno));
  }
  char line[512];
  bool said = false;
  while (fgets(line, sizeof line, p)) {
    if (strcmp(out, "-") == 0) fputs(line, stdout);   /* the plot itself */
    else if (!said) fprintf(stderr, "tierctl: gnuplot: %s", line);
    said = true;
  }
  int st = pclose(p);
  unlink(script);
  if (st != 0) return fail("gnuplot failed (exit %d); is it installed (Debian: gnuplot-nox)?", WEXITSTATUS(st));
  return 0;
}

/* ---- explain ------------------------------------------------------------------- */

static void warn_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void warn_line(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  printf("  warning: ");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
}

static bool swap_on(void)
{
  FILE *f = fopen("/proc/swaps", "re");
  if (!f) return false;
  char line[512];
  int n = 0;
  while (fgets(line, sizeof line, f)) n++;
  fclose(f);
  return n > 1;
}

/* Reads the options as the process read them: its TIERMALLOC_* variables
 * (/proc/PID/environ, readable by its user and root). 0 or an errno. */
static int explain_env_of(pid_t pid)
{
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
  FILE *f = fopen(path, "re");
  if (!f) return errno;
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  static char *vars[256];
  unsigned k = 0;
  for (char *v = buf; v < buf + n && k < 255; v += strlen(v) + 1)
    if (strncmp(v, "TIERMALLOC_", 11) == 0) vars[k++] = v;
  vars[k] = NULL;
  tm_options_init_from(vars, false);
  return 0;
}

/* A directory whose proc/self is /proc/PID and whose sys is /sys: the
 * cgroup module reads the process's cgroup through it as its own. */
static int explain_root(pid_t pid, char *root, size_t size)
{
  snprintf(root, size, "/tmp/tierctl-root.XXXXXX");
  if (!mkdtemp(root)) return errno;
  char proc[96], self[96], target[64], sys[96];
  snprintf(proc, sizeof proc, "%s/proc", root);
  snprintf(self, sizeof self, "%s/proc/self", root);
  snprintf(target, sizeof target, "/proc/%d", (int)pid);
  snprintf(sys, sizeof sys, "%s/sys", root);
  if (mkdir(proc, 0700) != 0 || symlink(target, self) != 0 || symlink("/sys", sys) != 0) return errno;
  return 0;
}

static void explain_root_remove(const char *root)
{
  char p[96];
  snprintf(p, sizeof p, "%s/proc/self", root);
  unlink(p);
  snprintf(p, sizeof p, "%s/proc", root);
  rmdir(p);
  snprintf(p, sizeof p, "%s/sys", root);
  unlink(p);
  rmdir(root);
}

static int cmd_explain(int argc, char **argv)
{
  pid_t pid = 0;
  if (argc > 1 || (argc == 1 && !parse_pid(argv[0], &pid))) {
    fail("explain: usage: tierctl explain [PID]");
    return 2;
  }
  seen_t v;
  const tier_live_t *rp = &v.r;
  if (pid) {
    rd_t rd = read_record(pid, &v);
    if (rd != RD_OK) return explain_rd(pid, rd);
  }
  tm_options_init();
  tm_topology_t topo;
  tm_topology_discover(&topo, "", NULL);
  char nodes[256];
  printf("topology: %d tier%s (%s)\n", topo.ntiers, topo.ntiers == 1 ? "" : "s",
         tm_topology_source_name(topo.source));
  for (int t = 0; t < topo.ntiers; t++) {
    tm_nodelist_format(&topo.tier[t].nodes, nodes, sizeof nodes);
    char cap[32];
    printf("  tier %d: nodes %s, %s", t, nodes, human(topo.tier[t].capacity, cap, sizeof cap));
    if (topo.tier[t].kernel_tier >= 0) printf(", the kernel's memory_tier%d", topo.tier[t].kernel_tier);
    printf("\n");
  }
  /* NUMA balancing: the mode now, what this kernel lets a policy allow
   * (probed here, as the library probes it at start-up), the heap's. */
  tm_balancing_t nb;
  tm_balancing_read("", tm_os_numa_balancing_policies(topo.tier[0].first_node), &topo, &nb);
  char nb_why[512];
  printf("numa balancing: %s (%d); policies this kernel lets allow it: %s; tiermalloc's heap: %s\n",
         tm_balancing_mode_name(nb.mode), nb.mode, tm_balancing_policies_name(nb.flag_policies),
         !(pid && rp->stats.numa_balancing_heap) ? "not scanned"
         : rp->stats.numa_balancing_demotes     ? "scanned; tier 0 held by the kernel's own demotion"
                                                : "scanned; tier 0 held by tiermalloc's moves");
  printf("  %s\n", tm_balancing_explain(&nb, nb_why, sizeof nb_why));
  if (nb.mode >= 0)
    printf("  promotion rate limit %llu MB/s; the kernel demotes on reclaim: %s\n", (unsigned long long)nb.promote_mbps,
           nb.demotion < 0 ? "unknown"
           : nb.demotion   ? "yes (a handed heap's tier 0 is held by it: reclaim asks the cgroup's memory.reclaim for "
                             "the excess and the kernel's LRU chooses the pages, where the process is alone in a "
                             "cgroup of its own without swap)"
                           : "no (demotion_enabled; with it, a handed heap's tier 0 would be held by the kernel's "
                             "LRU, which chooses the coldest pages, not tiermalloc's moves)");
  tm_cgroup_limits_t cg;
  tm_budgets_t b;
  char root[64] = "";
  bool known = true;   /* the cgroup's limits were read */
  if (pid) {
    printf("budgets of process %u (%s), cgroup %s, as it published them:\n", rp->pid, rp->command,
           rp->stats.cgroup[0] ? rp->stats.cgroup : "(none)");
    for (unsigned t = 0; t < rp->stats.ntiers && t < TIER_MAX_TIERS; t++) {
      const tier_stats_tier_t *ti = &rp->stats.tier[t];
      char a1[32], b1[32], c1[32], d1[32];
      printf("  tier %u: min %s, low %s, high %s, max %s (from %s)\n", t, human(ti->budget.min, a1, sizeof a1),
             human(ti->budget.low, b1, sizeof b1), human(ti->budget.high, c1, sizeof c1),
             human(ti->budget.max, d1, sizeof d1), tm_stats_budget_source_name(ti->budget.source));
    }
    /* The reasons: derived again as the process derives them, from its own
     * TIERMALLOC_* (/proc/PID/environ) and its cgroup, read through a root
     * whose proc/self is /proc/PID. */
    if (explain_env_of(pid) == 0 && explain_root(pid, root, sizeof root) == 0) {
      tm_cgroup_read(root, &cg);
      tm_budget_derive(&topo, &cg, &b);
      printf("why (derived again now from its environment and cgroup %s):\n", cg.path[0] ? cg.path : "(none)");
      for (int t = 0; t < topo.ntiers; t++)
        for (unsigned l = 0; l < TM_LIMIT_COUNT; l++) {
          char line[512];
          printf("  tier %d: %s\n", t, tm_budget_explain(&b, (unsigned)t, l, line, sizeof line));
        }
      explain_root_remove(root);
    } else {
      printf("why: its environment and cgroup cannot be read from here (another user's process?)\n");
      known = false;
    }
  } else {
    tm_cgroup_read("", &cg);
    tm_budget_derive(&topo, &cg, &b);
    printf("budgets a process started here gets (%s %s, this environment's TIERMALLOC_*):\n",
           tm_cgroup_version_name(cg.version), cg.path[0] ? cg.path : "");
    for (int t = 0; t < topo.ntiers; t++) {
      for (unsigned l = 0; l < TM_LIMIT_COUNT; l++) {
        char line[512];
        printf("  tier %d: %s\n", t, tm_budget_explain(&b, (unsigned)t, l, line, sizeof line));
      }
    }
  }
  if (known) {
    bool limited = false;
    for (unsigned l = 0; l < TM_LIMIT_COUNT; l++) limited |= cg.limit[l] != TM_CGROUP_UNLIMITED && cg.limit[l] != 0;
    if (!limited) warn_line("the cgroup sets no memory limit: no budget comes from it (set memory.high or memory.max, "
                            "or TIERMALLOC_TOPTIER_*)");
  }
  printf("checks:\n");
  int warned = 0;
  int nnodes = 0;
  for (int t = 0; t < topo.ntiers; t++) nnodes += topo.tier[t].nnodes;
  if (nnodes == 1) printf("  one NUMA node: one tier, nothing to place (the tiered VM: tests/vm/run)\n");
  if (topo.ntiers == 1 && nnodes > 1) {
    warn_line("one tier only: every node is in the same kernel memory tier, so there is nothing to place "
              "(TIERMALLOC_TIERS names tiers by hand)");
    warned++;
  }
  if (topo.source == TM_TOPO_CPU_FALLBACK && nnodes > 1) {
    warn_line("the kernel puts all nodes in one memory tier; tiermalloc guessed: CPU nodes on top, CPU-less nodes below");
    warned++;
  }
  if (nb.mode >= 0 && (nb.mode & 2) && nb.apart == 0) {
    warn_line("numa_balancing=%d (tiering) promotes nothing to tier 0 here: the kernel puts every node in one "
              "memory tier (see numa balancing above)", nb.mode);
    warned++;
  } else if (nb.mode >= 0 && (nb.mode & 2) && !(pid && rp->stats.numa_balancing_heap)) {
    warn_line("numa_balancing=%d (tiering) does not reach tiermalloc's heap: its policies keep NUMA balancing "
              "off it unless TIERMALLOC_NUMA_BALANCING=tiering (experimental; see numa balancing above)", nb.mode);
    warned++;
  }
  if (!swap_on()) {
    warn_line("no swap: the lowest tier's high and max cannot be held by pageout (the stats say \"max not held\")");
    warned++;
  }
  if (!warned) printf("  none\n");
  return 0;
}

/* ---- run ----------------------------------------------------------------------- */

/* libtiermalloc.so next to tierctl (the build tree), or in ../lib (installed). */
static int find_lib(char *buf, size_t size)
{
  const char *env = getenv("TIERCTL_LIB");
  if (env && env[0]) {
    snprintf(buf, size, "%s", env);
    return access(buf, R_OK) == 0 ? 0 : ENOENT;
  }
  char self[PATH_MAX - 32];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return ENOENT;
  self[n] = '\0';
  char *slash = strrchr(self, '/');
  if (slash) *slash = '\0';
  snprintf(buf, size, "%s/libtiermalloc.so", self);
  if (access(buf, R_OK) == 0) return 0;
  snprintf(buf, size, "%s/../lib/libtiermalloc.so", self);
  return access(buf, R_OK) == 0 ? 0 : ENOENT;
}

static int cmd_run(int argc, char **argv)
{
  int i = 0;
  for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
    const char *opt = argv[i];
    tm_option_id_t id;
    if (strcmp(opt, "--stats") == 0) {
      setenv("TIERMALLOC_STATS", "text", 1);
      continue;
    } else if (strcmp(opt, "--toptier-max") == 0) {
      id = TM_OPTION_TOPTIER_MAX;
    } else if (strcmp(opt, "--toptier-high") == 0) {
      id = TM_OPTION_TOPTIER_HIGH;
    } else {
      fail("run: unknown option '%s' (usage: tierctl run [--toptier-max SIZE] [--toptier-high SIZE] [--stats] -- CMD...)", opt);
      return 2;
    }
    tm_option_value_t v;
    if (i + 1 >= argc || tm_option_parse(id, argv[i + 1], &v) != 0) {
      fail("run: %s needs a size (bytes with K/M/G/T, or N%% of the top tier), not '%s'", opt,
           i + 1 < argc ? argv[i + 1] : "");
      return 2;
    }
    setenv(id == TM_OPTION_TOPTIER_MAX ? "TIERMALLOC_TOPTIER_MAX" : "TIERMALLOC_TOPTIER_HIGH", argv[++i], 1);
  }
  if (i >= argc - 1) {
    fail("run: no command (usage: tierctl run [--toptier-max SIZE] [--toptier-high SIZE] [--stats] -- CMD...)");
    return 2;
  }
  char lib[PATH_MAX];
  if (find_lib(lib, sizeof lib) != 0)
    return fail("cannot find libtiermalloc.so next to tierctl or in ../lib (TIERCTL_LIB names it)");
  const char *pre = getenv("LD_PRELOAD");
  char preload[2 * PATH_MAX];
  snprintf(preload, sizeof preload, "%s%s%s", lib, pre && pre[0] ? ":" : "", pre ? pre : "");
  setenv("LD_PRELOAD", preload, 1);
  execvp(argv[i + 1], argv + i + 1);
  return fail("cannot run %s: %s", argv[i + 1], strerror(errno));
}

/* ---- main ---------------------------------------------------------------------- */

static const char usage[] =
  "usage: tierctl COMMAND [ARGS]\n"
  "  ps                          the processes running tiermalloc, one line each\n"
  "  status PID [--json|--prom]  one process in full (text, JSON, Prometheus)\n"
  "  status --prom               every process, in the Prometheus text format\n"
  "  top [-i 1s] [-n ROUNDS]     ps, refreshed; q quits\n"
  "  record PID [-i 100ms] [-o run.csv]\n"
  "                              a timeline, until the process ends or Ctrl-C\n"
  "  plot run.csv -o run.png     resident bytes per tier against high and max, with moves marked\n"
  "                              (-o run.txt or -o -: the same in characters)\n"
  "  explain [PID]               topology, kernel tiers, budgets and why; known misconfigurations\n"
  "  run [--toptier-max SIZE] [--toptier-high SIZE] [--stats] -- CMD...\n"
  "                              runs CMD under tiermalloc with those limits\n"
  "Records are read from $TIERMALLOC_LIVE_DIR (default /dev/shm). See tierctl(1).\n";

static int dispatch(int argc, char **argv);

/* A command's output that could not be written (a full disk, a closed
 * pipe) is an error too. */
int main(int argc, char **argv)
{
  signal(SIGPIPE, SIG_IGN);
  int rc = dispatch(argc, argv);
  if (fflush(stdout) != 0 || ferror(stdout)) return fail("cannot write the output: %s", strerror(errno));
  return rc;
}

static int dispatch(int argc, char **argv)
{
  if (argc < 2) {
    fputs(usage, stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
    fputs(usage, stdout);
    return 0;
  }
  if (strcmp(cmd, "ps") == 0 && argc == 2) return cmd_ps();
  if (strcmp(cmd, "status") == 0) return cmd_status(argc - 2, argv + 2);
  if (strcmp(cmd, "top") == 0) return cmd_top(argc - 2, argv + 2);
  if (strcmp(cmd, "record") == 0) return cmd_record(argc - 2, argv + 2);
  if (strcmp(cmd, "plot") == 0) return cmd_plot(argc - 2, argv + 2);
  if (strcmp(cmd, "explain") == 0) return cmd_explain(argc - 2, argv + 2);
  if (strcmp(cmd, "run") == 0) return cmd_run(argc - 2, argv + 2);
  fprintf(stderr, "tierctl: unknown command '%s'\n%s", cmd, usage);
  return 2;
}
