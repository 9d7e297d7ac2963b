/*
 * reclaim_cgroup: reclaim's view of the process's cgroup: its files held
 * open and read with pread, its limits watched and the budgets derived
 * again, and the part of the cgroup's excess this process answers for.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "balancing.h"
#include "budget.h"
#include "cgroup.h"
#include "hotness.h"
#include "kfile.h"
#include "options.h"
#include "reclaim.h"
#include "reclaim_state.h"
#include "text.h"
#include "watch.h"

/* The budgets are derived again at least every RC_REFRESH periods (a move
 * to another cgroup, the nodes' sizes, and the limits of ancestors above
 * RC_WATCH_LEVELS), or RC_REFRESH_POLLED while no write can wake the thread
 * (the ancestors' limits are then seen only so). */
#define RC_REFRESH 60u
#define RC_REFRESH_POLLED 10u
#define RC_WATCH_LEVELS 4u   /* the cgroup and its three nearest ancestors */

/* The cgroup files read at every wake, kept open and read with pread: under
 * TCG, opening a cgroup file costs about 0.5 ms, and two opens ten times a
 * second were 1 % of a core. pread never moves an offset nor consumes
 * anything, so even if the program closed one of these and reused its number
 * it would take nothing from the program; and one is closed only while it is
 * still the file opened (same device and inode). */
static const char *const rc_held_names[] = { "memory.high", "memory.max", "memory.current" };
#define RC_HELD (sizeof rc_held_names / sizeof rc_held_names[0])
static struct {
  int fd;   /* -1: not open */
  dev_t dev;
  ino_t ino;
} rc_held[RC_HELD] = { { -1, 0, 0 }, { -1, 0, 0 }, { -1, 0, 0 } };

/* ---- the cgroup, shared with other processes -------------------------------- */

/* The budget of tier t came from the cgroup, which other processes share. */
bool rc_shared(unsigned t)
{
  const tm_budgets_t *b = &rc.budgets;
  if (b->cgroup.version != TM_CGROUP_V2 || !b->cgroup.dir[0]) return false;
  for (unsigned l = TM_LIMIT_HIGH; l <= TM_LIMIT_MAX; l++) {
    tier_budget_source_t src = b->tier[t][l].source;
    if (src == TIER_BUDGET_CGROUP_V2 || src == TIER_BUDGET_KERNEL || src == TIER_BUDGET_RATIO)
      return true;
  }
  return false;
}

/* path[TM_KFILE_PATH_MAX] = the process's cgroup directory (its first dirlen
 * bytes: an ancestor's) + "/" + file; false when there is no directory or
 * the path is too long. */
static bool rc_cgroup_path_in(size_t dirlen, const char *file, char *path)
{
  int n = (int)dirlen;
  if (dirlen == 0 || dirlen >= TM_KFILE_PATH_MAX) return false;
  memcpy(path, rc.budgets.cgroup.dir, dirlen);
  path[dirlen] = '\0';
  return !tm_text_append(path, TM_KFILE_PATH_MAX, &n, "/") &&
         !tm_text_append(path, TM_KFILE_PATH_MAX, &n, file);
}

static bool rc_cgroup_path(const char *file, char *path)
{
  return rc_cgroup_path_in(strlen(rc.budgets.cgroup.dir), file, path);
}

/* Another process is in the cgroup too (cgroup.procs lists more than one):
 * only then is the cgroup's memory on a tier not all this process's, heap
 * or not (its stacks, its binary's data and what it maps itself count there
 * too, and a process alone would demote its heap to make room for them). */
bool rc_cgroup_has_others(void)
{
  char path[TM_KFILE_PATH_MAX], buf[256];
  if (!rc_cgroup_path("cgroup.procs", path)) return false;
  int len = tm_kfile_read(path, buf, sizeof buf);
  if (len == -EFBIG) return true;   /* a long list */
  if (len <= 0) return false;
  const char *nl = memchr(buf, '\n', (size_t)len);
  return nl && nl + 1 < buf + len;
}

/* Anonymous bytes of the whole cgroup on each tier, from the "anon N0=.. N1=.."
 * line of its memory.numa_stat. false when it cannot be read. */
bool rc_cgroup_anon(uint64_t *anon)
{
  char path[TM_KFILE_PATH_MAX];
  if (!rc_cgroup_path("memory.numa_stat", path)) return false;
  tm_kfile_lines_t r;
  if (tm_kfile_lines_open(&r, path) != 0) return false;
  char line[1024];
  int cut, len;
  bool found = false;
  memset(anon, 0, sizeof(uint64_t) * TIER_MAX_TIERS);
  while (!found && (len = tm_kfile_next_line(&r, line, sizeof line, &cut)) >= 0) {
    if (strncmp(line, "anon ", 5) != 0) continue;
    found = true;
    for (char *p = line + 5; *p;) {
      while (*p == ' ') p++;
      char *e = p;
      while (*e && *e != ' ') e++;
      char *eq = memchr(p, '=', (size_t)(e - p));
      uint64_t node, bytes;
      if (p[0] == 'N' && eq && tm_text_parse_u64(p + 1, eq, &node) == 0 &&
          tm_text_parse_u64(eq + 1, e, &bytes) == 0 && node < TIER_MAX_NODES &&
          rc.topo->node_tier[node] >= 0)
        anon[rc.topo->node_tier[node]] += bytes;
      p = e;
    }
  }
  close(r.fd);
  return found;
}

/* Bytes this process should demote from tier t for its cgroup: when other
 * processes of the cgroup hold memory on the tier too and together they are
 * above its high (or max), each demotes its share of the excess, in
 * proportion to what it holds there, so together they get back under it
 * without any of them giving up more than its share. */
uint64_t rc_shared_excess(unsigned t, const uint64_t *anon, const rc_scan_t *s)
{
  uint64_t mine = s->resident[t], all = anon[t];
  uint64_t high = tm_budget_get(t, TM_LIMIT_HIGH), max = tm_budget_get(t, TM_LIMIT_MAX);
  uint64_t limit = high < max ? high : max;
  if (limit == TM_BUDGET_UNLIMITED || mine == 0 || all <= limit) return 0;
  uint64_t others = all > mine ? all - mine : 0;
  if (others < TM_CHUNK_SIZE * 4) return 0;   /* alone: its own watermarks apply */
  return (uint64_t)((unsigned __int128)(all - limit) * mine / all);
}

static void rc_held_close(void)
{
  for (unsigned k = 0; k < RC_HELD; k++) {
    struct stat st;
    if (rc_held[k].fd >= 0 && fstat(rc_held[k].fd, &st) == 0 && st.st_dev == rc_held[k].dev &&
        st.st_ino == rc_held[k].ino)
      close(rc_held[k].fd);
    rc_held[k].fd = -1;
  }
}

/* Opens the held files of the process's cgroup (v2), after each derive: the
 * cgroup may have changed. */
static void rc_held_open(void)
{
  rc_held_close();
  if (rc.budgets.cgroup.version != TM_CGROUP_V2) return;
  for (unsigned k = 0; k < RC_HELD; k++) {
    char path[TM_KFILE_PATH_MAX];
    struct stat st;
    int fd = rc_cgroup_path(rc_held_names[k], path) ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    if (fd >= 0 && fstat(fd, &st) != 0) {
      close(fd);
      fd = -1;
    }
    rc_held[k].fd = fd;
    rc_held[k].dev = fd >= 0 ? st.st_dev : 0;
    rc_held[k].ino = fd >= 0 ? st.st_ino : 0;
  }
}

/* A cgroup v2 value file of the process's cgroup: digits, or "max". */
bool rc_cgroup_value(const char *file, uint64_t *v)
{
  char path[TM_KFILE_PATH_MAX], buf[32];
  for (unsigned k = 0; k < RC_HELD; k++) {
    if (strcmp(file, rc_held_names[k]) != 0 || rc_held[k].fd < 0) continue;
    /* false: gone (the cgroup was removed) or not ours any more; derive again */
    ssize_t n = pread(rc_held[k].fd, buf, sizeof buf, 0);
    return n > 0 && (size_t)n < sizeof buf && tm_cgroup_parse_value(buf, (int)n, false, v) == NULL;
  }
  if (!rc_cgroup_path(file, path)) return false;
  int len = tm_kfile_read(path, buf, sizeof buf);
  return len > 0 && tm_cgroup_parse_value(buf, len, false, v) == NULL;
}

/* The cgroup (v2) is within the hysteresis of its memory.high or memory.max
 * (the nearer, ancestors applied): its memory.current into *cur and by how
 * much it is over limit - hysteresis into *over. One small read. */
bool rc_cgroup_near(uint64_t *cur, uint64_t *over)
{
  const tm_cgroup_limits_t *cg = &rc.budgets.cgroup;
  uint64_t limit = cg->limit[TM_LIMIT_HIGH] < cg->limit[TM_LIMIT_MAX] ? cg->limit[TM_LIMIT_HIGH]
                                                                        : cg->limit[TM_LIMIT_MAX];
  if (cg->version != TM_CGROUP_V2 || limit == TM_CGROUP_UNLIMITED ||
      !rc_cgroup_value("memory.current", cur))
    return false;
  uint64_t margin = rc_hysteresis(limit);
  if (*cur + margin <= limit || *cur == 0) return false;
  *over = *cur + margin - limit;
  return true;
}

/* Bytes this process should page out because its cgroup as a whole is near
 * its memory.high or memory.max (within the hysteresis): the excess, in
 * proportion to this process's share of the cgroup's memory. 0 otherwise. */
uint64_t rc_cgroup_pageout(const rc_scan_t *s)
{
  uint64_t cur, over;
  if (!rc_cgroup_near(&cur, &over)) return 0;
  uint64_t mine = 0;
  for (unsigned t = 0; t < rc.ntiers; t++) mine += s->resident[t];
  if (mine > cur) mine = cur;
  return (uint64_t)((unsigned __int128)over * mine / cur);
}

/* ---- the budgets derived again, the limits watched ------------------------ */

/* The budgets should be derived again: RC_REFRESH periods have passed, or
 * the cgroup's own memory.high or memory.max changed (or cannot be read any
 * more). Two preads while the cgroup has them. */
bool rc_budgets_stale(uint64_t now)
{
  uint64_t every = (rc.notified && tm_watch_active() ? RC_REFRESH : RC_REFRESH_POLLED) * rc.period_max;
  bool stale = rc.refreshed_ns == 0 || now - rc.refreshed_ns >= every;
  if (rc.cg_watch) {
    uint64_t v[2] = { 0, 0 };
    stale |= !rc_cgroup_value("memory.high", &v[0]) || !rc_cgroup_value("memory.max", &v[1]) ||
             v[0] != rc.cg_seen[0] || v[1] != rc.cg_seen[1];
  }
  return stale;
}

/* Watches memory.high and memory.max of the cgroup and of its nearest
 * ancestors (RC_WATCH_LEVELS, the root cgroup excluded: it has neither), so
 * that a write to any of them wakes the thread. */
static bool rc_watch_limits(void)
{
  static char paths[RC_WATCH_LEVELS * 2][TM_KFILE_PATH_MAX];
  const char *list[RC_WATCH_LEVELS * 2];
  const tm_cgroup_limits_t *cg = &rc.budgets.cgroup;
  unsigned n = 0, levels = 0;
  for (const char *p = cg->path; *p; p++) levels += *p == '/' && p[1] != '\0';
  size_t len = strlen(cg->dir);
  for (unsigned k = 0; k < levels && k < RC_WATCH_LEVELS; k++) {
    for (unsigned f = 0; f < 2; f++, n++) {
      if (!rc_cgroup_path_in(len, f ? "memory.max" : "memory.high", paths[n])) return false;
      list[n] = paths[n];
    }
    while (len > 0 && cg->dir[len - 1] != '/') len--;   /* the parent's directory */
    if (len > 0) len--;
  }
  /* An ancestor's file that cannot be watched is left to the periodic
   * derive; the cgroup's own two must be. */
  return n > 0 && (tm_watch_files(list, n) || tm_watch_files(list, 2));
}

/* The budgets again, and the cgroup files watched from now on. */
void rc_refresh(uint64_t now)
{
  tm_budget_refresh_now();
  tm_budget_snapshot(&rc.budgets);
  tm_hotness_track(tm_reclaim_needed());
  rc.refreshed_ns = now;
  rc_held_open();
  rc.cg_watch = rc_held[0].fd >= 0 && rc_held[1].fd >= 0 &&
                rc_cgroup_value("memory.high", &rc.cg_seen[0]) &&
                rc_cgroup_value("memory.max", &rc.cg_seen[1]);
  rc.notified = rc.cg_watch && rc_watch_limits();
}

/* ---- the kernel's own demotion -------------------------------------------- */

const char *rc_cgroup_demote_blocked(void)
{
  char path[TM_KFILE_PATH_MAX];
  /* A write to a cgroup file on the environment's word reaches outside the
   * process's own memory. */
  if (tm_options_secure()) return "secure execution: tiermalloc writes no cgroup file";
  if (tm_balancing_demotion(rc.root) != 1) return "the kernel does not demote on reclaim (demotion_enabled)";
  /* The root cgroup has no memory.current; its memory.reclaim is the whole machine's. */
  uint64_t cur;
  if (!rc_cgroup_value("memory.current", &cur) || !rc_cgroup_path("memory.reclaim", path) ||
      access(path, W_OK) != 0)
    return "the process has no cgroup of its own whose memory.reclaim it may write";
  if (rc_cgroup_has_others()) return "other processes share its cgroup, whose pages the kernel's reclaim would take too";
  if (rc_swap_detect() == 1) return "the cgroup may swap, and the kernel's reclaim would page out the lowest tier too";
  return NULL;
}

/* The cgroup's pgdemote_direct (memory.stat, 6.9 on) into *pages. */
static bool rc_cgroup_demoted_pages(uint64_t *pages)
{
  char path[TM_KFILE_PATH_MAX], line[128];
  tm_kfile_lines_t r;
  if (!rc_cgroup_path("memory.stat", path) || tm_kfile_lines_open(&r, path) != 0) return false;
  static const char key[] = "pgdemote_direct ";
  int cut, len;
  bool found = false;
  while (!found && (len = tm_kfile_next_line(&r, line, sizeof line, &cut)) >= 0)
    found = strncmp(line, key, sizeof key - 1) == 0 &&
            tm_text_parse_u64(line + sizeof key - 1, line + len, pages) == 0;
  close(r.fd);
  return found;
}

uint64_t rc_cgroup_demote(uint64_t want)
{
  char path[TM_KFILE_PATH_MAX], num[24];
  if (want == 0 || !rc_cgroup_path("memory.reclaim", path)) return 0;
  uint64_t before = 0, after = 0;
  bool counted = rc_cgroup_demoted_pages(&before);
  int n = 0;
  num[0] = '\0';
  if (tm_text_append_u64(num, sizeof num, &n, want) != 0) return 0;
  int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) return 0;
  /* EAGAIN: the kernel reclaimed less than asked; what it demoted counts. */
  bool done = write(fd, num, (size_t)n) == n;
  close(fd);
  if (counted && rc_cgroup_demoted_pages(&after))
    return after > before ? (after - before) * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
  return done ? want : 0;
}
