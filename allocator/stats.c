#include "stats.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "account.h"
#include "budget.h"
#include "chunkmap.h"
#include "log.h"
#include "options.h"
#include "outfile.h"
#include "policy.h"
#include "range.h"
#include "reclaim.h"
#include "resident.h"
#include "startup.h"

static uint64_t stats_now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int tm_stats_snapshot(tier_stats_t *s)
{
  const tm_topology_t *topo = tm_topology();
  memset(s, 0, sizeof *s);
  s->version = TIER_STATS_VERSION;
  s->ntiers = (uint32_t)topo->ntiers;
  uint64_t allocated[TM_NCOUNT];
  tm_account_allocated(allocated);
  tm_resident_t res = {0};
  int err = 0;
  uint64_t t0 = stats_now_ns();
  if (tm_ranges.n > 0) {
    uintptr_t hi = tm_ranges.base + ((uintptr_t)tm_ranges.n << tm_ranges.shift);
    err = tm_resident_measure("/proc/self/numa_maps", topo, tm_ranges.base, hi, &res);
  }
  s->resident_sample_ns = stats_now_ns() - t0;
  for (unsigned t = 0; t < s->ntiers; t++) {
    tier_stats_tier_t *o = &s->tier[t];
    o->capacity = topo->tier[t].capacity;
    o->mapped = tm_range_mapped(t);
    o->committed = tm_chunk_committed(t);
    o->used = tm_policy_used(t);
    o->allocated = allocated[t];
    o->resident = res.tier[t];
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
  s->unplaced_allocated = allocated[TM_RANGE_OTHER];
  s->resident_other = res.other;
  return err;
}

const char *tm_stats_reclaim_mode_name(uint32_t m)
{
  static const char *const names[] = { "off", "always", "pressure" };
  return m < sizeof names / sizeof names[0] ? names[m] : "?";
}

const char *tm_stats_reclaim_state_name(uint32_t st)
{
  static const char *const names[] = { "stopped", "idle", "demoting", "paging out",
                                        "max not held", "promoting" };
  return st < sizeof names / sizeof names[0] ? names[st] : "?";
}

/* Output goes through a small buffer to the caller's writer. */
typedef struct stats_out_s {
  tier_write_fn *write;
  void *arg;
  size_t len;
  char buf[1024];
} stats_out_t;

static void stats_flush(stats_out_t *o)
{
  if (o->len) o->write(o->arg, o->buf, o->len);
  o->len = 0;
}

static void stats_put(stats_out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void stats_put(stats_out_t *o, const char *fmt, ...)
{
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n >= sizeof tmp) n = sizeof tmp - 1;
  if (o->len + (size_t)n > sizeof o->buf) stats_flush(o);
  memcpy(o->buf + o->len, tmp, (size_t)n);
  o->len += (size_t)n;
}

/* Human size for the text form: B, KiB, MiB, GiB, TiB with one decimal. */
static void stats_put_bytes(stats_out_t *o, uint64_t v)
{
  static const char *unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
  if (v < 1024) {
    stats_put(o, " %10llu B  ", (unsigned long long)v);
    return;
  }
  double d = (double)v;
  int u = 0;
  while (d >= 1024 && u < 4) { d /= 1024; u++; }
  stats_put(o, " %10.1f %-3s", d, unit[u]);
}

static void stats_put_count(stats_out_t *o, uint64_t v)
{
  stats_put(o, " %10llu    ", (unsigned long long)v);
}

static void stats_put_ns(stats_out_t *o, uint64_t v)
{
  stats_put(o, " %10.3f ms ", (double)v / 1e6);
}

#define stats_put_unit(o, unit, v) stats_put_##unit(o, v)

/* A budget limit: bytes, or "unlimited" (text) / null (JSON). */
static void stats_put_limit(stats_out_t *o, bool json, uint64_t v)
{
  if (json) {
    if (v == TIER_UNLIMITED) stats_put(o, "null");
    else stats_put(o, "%llu", (unsigned long long)v);
  } else if (v == TIER_UNLIMITED) {
    stats_put(o, " %14s", "unlimited");
  } else {
    stats_put_bytes(o, v);
  }
}

/* A string for JSON: quotes, backslashes and control bytes escaped. */
static void stats_put_json_str(stats_out_t *o, const char *str)
{
  stats_put(o, "\"");
  for (const unsigned char *c = (const unsigned char *)str; *c; c++) {
    if (*c == '"' || *c == '\\') stats_put(o, "\\%c", *c);
    else if (*c < 0x20) stats_put(o, "\\u%04x", *c);
    else stats_put(o, "%c", *c);
  }
  stats_put(o, "\"");
}

/* A return address as "function+0xoff (object)", or "0x..." where the
 * loader knows no symbol for it (dladdr: no allocation). */
static void stats_put_frame(stats_out_t *o, uint64_t pc)
{
  Dl_info info;
  if (dladdr((void *)(uintptr_t)pc, &info) && info.dli_fname) {
    const char *obj = strrchr(info.dli_fname, '/');
    obj = obj ? obj + 1 : info.dli_fname;
    if (info.dli_sname)
      stats_put(o, "%s+%#lx (%s)", info.dli_sname, (unsigned long)(pc - (uintptr_t)info.dli_saddr), obj);
    else
      stats_put(o, "%s+%#lx", obj, (unsigned long)(pc - (uintptr_t)info.dli_fbase));
  } else {
    stats_put(o, "%#llx", (unsigned long long)pc);
  }
}

/* The sites given chunks of their own, in either form. */
static void stats_put_sites(stats_out_t *o, const tier_stats_t *s, bool json)
{
  unsigned n = s->sites_apart < TIER_STATS_SITES ? (unsigned)s->sites_apart : TIER_STATS_SITES;
  if (json) stats_put(o, ",\"sites\":[");
  for (unsigned k = 0; k < n; k++) {
    const tier_stats_site_t *si = &s->site[k];
    if (json) {
      stats_put(o, "%s{\"frames\":[", k ? "," : "");
      for (unsigned f = 0; f < TIER_STATS_SITE_FRAMES && si->frames[f]; f++) {
        stats_put(o, "%s\"", f ? "," : "");
        stats_put_frame(o, si->frames[f]);
        stats_put(o, "\"");
      }
      stats_put(o, "],\"sampled\":%llu,\"hot\":%llu,\"cold\":%llu,\"cold_verdict\":%s}",
                (unsigned long long)si->sampled, (unsigned long long)si->hot, (unsigned long long)si->cold,
                si->cold_verdict ? "true" : "false");
      continue;
    }
    if (k == 0)
      stats_put(o, "%-4s %-10s %14s %14s  %s\n", "site", "new memory", "hot", "cold",
                "call site <- its callers (chunks of its own; hot and cold at the last read of the bits)");
    stats_put(o, "%-4u %-10s", k, si->cold_verdict ? "below" : "top first");
    stats_put_bytes(o, si->hot);
    stats_put_bytes(o, si->cold);
    for (unsigned f = 0; f < TIER_STATS_SITE_FRAMES && si->frames[f]; f++) {
      stats_put(o, f ? " <- " : "  ");
      stats_put_frame(o, si->frames[f]);
    }
    stats_put(o, "\n");
  }
  if (json) stats_put(o, "]");
}

void tm_stats_format(const tier_stats_t *s, tier_write_fn *write, void *arg,
                     tier_stats_format_t format)
{
  stats_out_t o = { .write = write, .arg = arg };
  const bool json = format == TIER_STATS_JSON;
  char nodes[256];
  if (json) {
    stats_put(&o, "{\"version\":%u,\"ntiers\":%u", s->version, s->ntiers);
#define X(name, unit, doc) stats_put(&o, ",\"" #name "\":%llu", (unsigned long long)s->name);
    TIER_STATS_GLOBAL_FIELDS(X)
#undef X
    stats_put(&o, ",\"tiers\":[");
  } else {
    stats_put(&o, "tiermalloc: %u tier%s\n%-4s %-10s", s->ntiers, s->ntiers == 1 ? "" : "s",
              "tier", "nodes");
#define X(name, unit, doc) stats_put(&o, " %14s", #name);
    TIER_STATS_TIER_FIELDS(X)
#undef X
    stats_put(&o, "\n");
  }
  for (unsigned t = 0; t < s->ntiers && t < TIER_MAX_TIERS; t++) {
    const tier_stats_tier_t *ti = &s->tier[t];
    tm_nodelist_format((const tm_nodemask_t *)ti->nodes, nodes, sizeof nodes);
    if (json) {
      stats_put(&o, "%s{\"tier\":%u,\"nodes\":\"%s\"", t ? "," : "", t, nodes);
#define X(name, unit, doc) stats_put(&o, ",\"" #name "\":%llu", (unsigned long long)ti->name);
      TIER_STATS_TIER_FIELDS(X)
#undef X
      stats_put(&o, ",\"reclaim\":{");
      const char *sep = "";
#define X(name, unit, doc)                                                                         \
  stats_put(&o, "%s\"" #name "\":%llu", sep, (unsigned long long)ti->reclaim.name);                \
  sep = ",";
      TIER_STATS_RECLAIM_FIELDS(X)
#undef X
      stats_put(&o, "},\"budget\":{");
#define X(name, unit, doc)                                                                         \
  stats_put(&o, "\"" #name "\":");                                                                \
  stats_put_limit(&o, true, ti->budget.name);                                                      \
  stats_put(&o, ",");
      TIER_STATS_BUDGET_FIELDS(X)
#undef X
      stats_put(&o, "\"source\":\"%s\",\"max_held\":%s}}",
                tm_budget_source_name((tier_budget_source_t)ti->budget.source),
                ti->budget.max_not_held ? "false" : "true");
    } else {
      stats_put(&o, "%-4u %-10s", t, nodes);
#define X(name, unit, doc) stats_put_unit(&o, unit, ti->name);
      TIER_STATS_TIER_FIELDS(X)
#undef X
      stats_put(&o, "\n");
    }
  }
  if (json) {
    stats_put(&o, "],\"cgroup\":");
    stats_put_json_str(&o, s->cgroup);
    stats_put(&o, ",\"reclaim_mode\":\"%s\",\"reclaim_state\":\"%s\",\"cold_signal\":",
              tm_stats_reclaim_mode_name(s->reclaim_mode),
              tm_stats_reclaim_state_name(s->reclaim_state));
    stats_put_json_str(&o, s->cold_signal);
    stats_put(&o, ",\"pageout_available\":%s", s->pageout_available ? "true" : "false");
#define X(name, unit, doc) stats_put(&o, ",\"" #name "\":%llu", (unsigned long long)s->name);
    TIER_STATS_SITE_FIELDS(X)
#undef X
    stats_put_sites(&o, s, true);
    stats_put(&o, "}\n");
  } else {
    stats_put(&o, "%-4s %-10s", "tier", "budget");
#define X(name, unit, doc) stats_put(&o, " %14s", #name);
    TIER_STATS_BUDGET_FIELDS(X)
#undef X
    stats_put(&o, "  source\n");
    for (unsigned t = 0; t < s->ntiers && t < TIER_MAX_TIERS; t++) {
      const tier_stats_tier_t *ti = &s->tier[t];
      stats_put(&o, "%-4u %-10s", t, "");
#define X(name, unit, doc) stats_put_limit(&o, false, ti->budget.name);
      TIER_STATS_BUDGET_FIELDS(X)
#undef X
      stats_put(&o, "  %s%s\n", tm_budget_source_name((tier_budget_source_t)ti->budget.source),
                ti->budget.max_not_held ? "; above max, NOT HELD (nothing can be paged out)" : "");
    }
    stats_put(&o, "%-4s %-10s", "tier", "reclaim");
#define X(name, unit, doc) stats_put(&o, " %14s", #name);
    TIER_STATS_RECLAIM_FIELDS(X)
#undef X
    stats_put(&o, "\n");
    for (unsigned t = 0; t < s->ntiers && t < TIER_MAX_TIERS; t++) {
      const tier_stats_tier_t *ti = &s->tier[t];
      stats_put(&o, "%-4u %-10s", t, "");
#define X(name, unit, doc) stats_put_unit(&o, unit, ti->reclaim.name);
      TIER_STATS_RECLAIM_FIELDS(X)
#undef X
      stats_put(&o, "\n");
    }
    stats_put(&o, "%-20s %s\n", "cgroup", s->cgroup[0] ? s->cgroup : "(none)");
    stats_put(&o, "%-20s %s, %s; cold: %s; pageout %s\n", "reclaim",
              tm_stats_reclaim_mode_name(s->reclaim_mode),
              tm_stats_reclaim_state_name(s->reclaim_state), s->cold_signal,
              s->pageout_available ? "available" : "unavailable (no swap seen)");
#define X(name, unit, doc) stats_put(&o, "%-20s", #name); stats_put_unit(&o, unit, s->name); stats_put(&o, "\n");
    TIER_STATS_GLOBAL_FIELDS(X)
    TIER_STATS_SITE_FIELDS(X)
#undef X
    stats_put_sites(&o, s, false);
  }
  stats_flush(&o);
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
  uint64_t format = tm_option(TM_OPTION_STATS)->num;   /* none|text|json */
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
  tm_stats_snapshot(&s);
  tm_stats_format(&s, stats_write_fd, &fd, format == 2 ? TIER_STATS_JSON : TIER_STATS_TEXT);
  if (fd != STDERR_FILENO && fd != stats_stderr) close(fd);
}
