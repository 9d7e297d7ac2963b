#include "stats.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "account.h"
#include "balancing.h"
#include "handback.h"
#include "budget.h"
#include "chunkmap.h"
#include "clock.h"
#include "log.h"
#include "options.h"
#include "outfile.h"
#include "policy.h"
#include "range.h"
#include "reclaim.h"
#include "resident.h"
#include "startup.h"
#include "statsfmt.h"

int tm_stats_resident(tier_stats_t *s)
{
  tm_resident_t res = {0};
  int err = 0;
  uint64_t t0 = tm_clock_ns(CLOCK_MONOTONIC);
  if (tm_ranges.n > 0) {
    uintptr_t hi = tm_ranges.base + ((uintptr_t)tm_ranges.n << tm_ranges.shift);
    err = tm_resident_measure("/proc/self/numa_maps", tm_topology(), tm_ranges.base, hi, &res);
  }
  s->resident_sample_ns = tm_clock_ns(CLOCK_MONOTONIC) - t0;
  for (unsigned t = 0; t < TIER_MAX_TIERS; t++) s->tier[t].resident = t < s->ntiers ? res.tier[t] : 0;
  s->resident_other = res.other;
  return err;
}

int tm_stats_snapshot(tier_stats_t *s, const tier_stats_t *prev)
{
  const tm_topology_t *topo = tm_topology();
  memset(s, 0, sizeof *s);
  s->version = TIER_STATS_VERSION;
  s->ntiers = (uint32_t)topo->ntiers;
  uint64_t allocated[TM_NCOUNT];
  tm_account_allocated(allocated);
  for (unsigned t = 0; t < s->ntiers; t++) {
    tier_stats_tier_t *o = &s->tier[t];
    o->capacity = topo->tier[t].capacity;
    o->mapped = tm_range_mapped(t);
    o->committed = tm_chunk_committed(t);
    o->used = tm_policy_used(t);
    o->allocated = allocated[t];
    memcpy(o->nodes, topo->tier[t].nodes.w, sizeof o->nodes);
  }
  tm_budgets_t b;
  tm_budget_snapshot(&b);
  for (unsigned t = 0; t < s->ntiers && (int)t < b.ntiers; t++) {
    tier_stats_tier_t *o = &s->tier[t];
    const tm_budget_limit_t *l = b.tier[t];
    o->budget.min = l[TM_LIMIT_MIN].bytes;
    o->budget.low = l[TM_LIMIT_LOW].bytes;
    o->budget.high = l[TM_LIMIT_HIGH].bytes;
    o->budget.max = l[TM_LIMIT_MAX].bytes;
    o->budget.source = (uint32_t)tm_budget_tier_source(&b, t);
  }
  memcpy(s->cgroup, b.cgroup.path, sizeof s->cgroup);
  s->cgroup[sizeof s->cgroup - 1] = '\0';
  tm_reclaim_stats(s);
  s->numa_balancing = tm_balancing_mode_now();   /* the sysctl, read again once a second */
  s->numa_balancing_policies = tm_startup_numa_balancing_policies();
  s->handed_given_back = tm_handback_given();
  s->handed_undone = tm_handback_undone();
  s->kernel_undone = tm_handback_kernel_undone();
  s->unplaced_allocated = allocated[TM_RANGE_OTHER];
  if (prev == NULL) return tm_stats_resident(s);
  for (unsigned t = 0; t < s->ntiers; t++) s->tier[t].resident = prev->tier[t].resident;
  s->resident_other = prev->resident_other;
  s->resident_sample_ns = prev->resident_sample_ns;
  return 0;
}

tm_stats_who_t tm_stats_me(void)
{
  return (tm_stats_who_t){ (uint32_t)getpid(), program_invocation_short_name, false, NULL };
}

static void stats_write_fd(void *arg, const char *buf, size_t len)
{
  int fd = *(int *)arg;
  while (len > 0) {
    ssize_t w = write(fd, buf, len);
    if (w <= 0) return;
    buf += w;
    len -= (size_t)w;
  }
}

/* A copy of stderr taken at start-up: programs that close stderr at exit
 * (GNU coreutils' close_stdout does) still get their stats. */
static int stats_stderr = -1;

void tm_stats_at_start(void)
{
  if (tm_option(TM_OPTION_STATS)->num != 0)   /* also where a refused stats file sends them */
    stats_stderr = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
}

void tm_stats_at_exit(void)
{
  uint64_t format = tm_option(TM_OPTION_STATS)->num;   /* none|text|json|prom */
  if (format == 0 || !tm_started()) return;
  const char *path = tm_option(TM_OPTION_STATS_FILE)->str;
  int fd = stats_stderr >= 0 ? stats_stderr : STDERR_FILENO;
  if (path[0]) {
    int err = tm_outfile_open_append(path, &fd);
    if (err != 0) {
      fd = stats_stderr >= 0 ? stats_stderr : STDERR_FILENO;
      tm_warn_fd(fd, "TIERMALLOC_STATS_FILE='%s' %s; printing stats to stderr", path,
                 tm_outfile_strerror(err));
    }
  }
  tier_stats_t s;
  tm_stats_snapshot(&s, NULL);
  tm_stats_who_t me = tm_stats_me();
  tm_stats_format(&s, &me, stats_write_fd, &fd, (tier_stats_format_t)(format - 1));
  if (fd != STDERR_FILENO && fd != stats_stderr) close(fd);
}
