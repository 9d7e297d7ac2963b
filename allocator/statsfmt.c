#include "statsfmt.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "balancing.h"
#include "nodemask.h"

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

const char *tm_stats_budget_source_name(uint32_t src)
{
  static const char *const names[] = { "none", "env", "kernel", "cgroup v2", "cgroup v1", "ratio" };
  return src < sizeof names / sizeof names[0] ? names[src] : "unknown";
}

const char *tm_stats_publisher_name(uint32_t p)
{
  static const char *const names[] = { "start-up", "thread", "api call", "allocation" };
  return p < sizeof names / sizeof names[0] ? names[p] : "start-up";
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

#define stats_put_total stats_put_count
#define stats_put_ns_total stats_put_ns
#define stats_put_bytes_total stats_put_bytes

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
static void stats_put_frame(stats_out_t *o, uint64_t pc, bool local)
{
  Dl_info info;
  if (local && dladdr((void *)(uintptr_t)pc, &info) && info.dli_fname) {
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
static void stats_put_sites(stats_out_t *o, const tier_stats_t *s, bool json, bool local)
{
  unsigned n = s->sites_apart < TIER_STATS_SITES ? (unsigned)s->sites_apart : TIER_STATS_SITES;
  if (json) stats_put(o, ",\"sites\":[");
  for (unsigned k = 0; k < n; k++) {
    const tier_stats_site_t *si = &s->site[k];
    if (json) {
      stats_put(o, "%s{\"frames\":[", k ? "," : "");
      for (unsigned f = 0; f < TIER_STATS_SITE_FRAMES && si->frames[f]; f++) {
        stats_put(o, "%s\"", f ? "," : "");
        stats_put_frame(o, si->frames[f], local);
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
      stats_put_frame(o, si->frames[f], local);
    }
    stats_put(o, "\n");
  }
  if (json) stats_put(o, "]");
}

/* Which tier each per-tier field follows, for the text form's two tables:
 * where the bytes are now (measured, or the tier each chunk is bound to),
 * or the home tier (the address range). A field added to
 * TIER_STATS_TIER_FIELDS without a line here does not compile. */
enum { STATS_NOW, STATS_HOME };
#define STATS_FOLLOWS_capacity STATS_NOW   /* the tier's own size */
#define STATS_FOLLOWS_mapped STATS_HOME
#define STATS_FOLLOWS_committed STATS_NOW
#define STATS_FOLLOWS_used STATS_NOW
#define STATS_FOLLOWS_allocated STATS_HOME
#define STATS_FOLLOWS_resident STATS_NOW

/* A JSON key: the field's name, with _bytes for a byte figure. */
static void stats_put_key(stats_out_t *o, const char *sep, const char *name, const char *unit)
{
  stats_put(o, "%s\"%s%s\":", sep, name, strncmp(unit, "bytes", 5) == 0 ? "_bytes" : "");
}

void tm_stats_format(const tier_stats_t *s, const tm_stats_who_t *who, tier_write_fn *write,
                     void *arg, tier_stats_format_t format)
{
  if (format == TIER_STATS_PROM) {
    tm_stats_who_t self = { 0, "", false, NULL };
    tm_stats_format_prom(&s, who ? who : &self, 1, write, arg);
    return;
  }
  stats_out_t o = { .write = write, .arg = arg };
  const bool json = format == TIER_STATS_JSON;
  char nodes[256];
  if (json) {
    stats_put(&o, "{\"version\":%u", s->version);
    if (who) {
      stats_put(&o, ",\"pid\":%u,\"command\":", who->pid);
      stats_put_json_str(&o, who->command);
    }
    if (who && who->record) {
      const tm_stats_record_t *g = who->record;
      stats_put(&o, ",\"publisher\":\"%s\",\"publish_interval_ns\":%llu,\"published_age_ns\":%llu,"
                    "\"resident_by\":\"%s\",\"resident_age_ns\":%llu",
                g->publisher, (unsigned long long)g->interval_ns, (unsigned long long)g->published_age_ns,
                g->resident_by, (unsigned long long)g->resident_age_ns);
    }
    stats_put(&o, ",\"ntiers\":%u", s->ntiers);
#define X(name, unit, doc)                                                                         \
  stats_put_key(&o, ",", #name, #unit);                                                            \
  stats_put(&o, "%llu", (unsigned long long)s->name);
    TIER_STATS_GLOBAL_FIELDS(X)
#undef X
    stats_put(&o, ",\"tiers\":[");
  } else {
    /* First where the bytes are now against the limits, then the figures
     * that follow the home tier (a chunk demoted from tier 0 keeps its
     * allocated bytes there), each table saying which it is. */
    stats_put(&o, "tiermalloc: %u tier%s\n", s->ntiers, s->ntiers == 1 ? "" : "s");
    stats_put(&o, "%-4s %-10s", "tier", "nodes");
#define X(name, unit, doc) if (STATS_FOLLOWS_##name != STATS_HOME) stats_put(&o, " %14s", #name);
    TIER_STATS_TIER_FIELDS(X)
#undef X
    stats_put(&o, " %14s %14s  (now: resident where the pages are, committed and used on the tier each chunk "
                  "is bound to)\n", "high", "max");
    for (unsigned t = 0; t < s->ntiers && t < TIER_MAX_TIERS; t++) {
      const tier_stats_tier_t *ti = &s->tier[t];
      tm_nodelist_format((const tm_nodemask_t *)ti->nodes, nodes, sizeof nodes);
      stats_put(&o, "%-4u %-10s", t, nodes);
#define X(name, unit, doc) if (STATS_FOLLOWS_##name != STATS_HOME) stats_put_unit(&o, unit, ti->name);
      TIER_STATS_TIER_FIELDS(X)
#undef X
      stats_put_limit(&o, false, ti->budget.high);
      stats_put_limit(&o, false, ti->budget.max);
      stats_put(&o, "\n");
    }
    stats_put(&o, "%-4s %-10s", "tier", "home");
#define X(name, unit, doc) if (STATS_FOLLOWS_##name == STATS_HOME) stats_put(&o, " %14s", #name);
    TIER_STATS_TIER_FIELDS(X)
#undef X
    stats_put(&o, "  (by home tier: the address range the memory came from, wherever it is now)\n");
  }
  for (unsigned t = 0; t < s->ntiers && t < TIER_MAX_TIERS; t++) {
    const tier_stats_tier_t *ti = &s->tier[t];
    tm_nodelist_format((const tm_nodemask_t *)ti->nodes, nodes, sizeof nodes);
    if (json) {
      stats_put(&o, "%s{\"tier\":%u,\"nodes\":\"%s\"", t ? "," : "", t, nodes);
#define X(name, unit, doc)                                                                         \
  stats_put_key(&o, ",", #name, #unit);                                                            \
  stats_put(&o, "%llu", (unsigned long long)ti->name);
      TIER_STATS_TIER_FIELDS(X)
#undef X
#define X(name, unit, doc)                                                                         \
  stats_put_key(&o, ",", #name, #unit);                                                            \
  stats_put(&o, "%llu", (unsigned long long)ti->reclaim.name);
      TIER_STATS_RECLAIM_FIELDS(X)
#undef X
      stats_put(&o, ",\"budget\":{");
#define X(name, unit, doc)                                                                         \
  stats_put(&o, "\"" #name "\":");                                                                \
  stats_put_limit(&o, true, ti->budget.name);                                                      \
  stats_put(&o, ",");
      TIER_STATS_BUDGET_FIELDS(X)
#undef X
      stats_put(&o, "\"source\":\"%s\",\"max_held\":%s}}",
                tm_stats_budget_source_name(ti->budget.source),
                ti->budget.max_not_held ? "false" : "true");
    } else {
      stats_put(&o, "%-4u %-10s", t, "");
#define X(name, unit, doc) if (STATS_FOLLOWS_##name == STATS_HOME) stats_put_unit(&o, unit, ti->name);
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
    stats_put(&o, ",\"numa_balancing\":%d,\"numa_balancing_policies\":\"%s\",\"numa_balancing_heap\":%s"
                  ",\"numa_balancing_demotes\":%s",
              (int)s->numa_balancing, tm_balancing_policies_name(s->numa_balancing_policies),
              s->numa_balancing_heap ? "true" : "false", s->numa_balancing_demotes ? "true" : "false");
#define X(name, unit, doc)                                                                         \
  stats_put_key(&o, ",", #name, #unit);                                                            \
  stats_put(&o, "%llu", (unsigned long long)s->name);
    TIER_STATS_SITE_FIELDS(X)
    TIER_STATS_HANDED_FIELDS(X)
#undef X
    stats_put_sites(&o, s, true, who == NULL || !who->foreign);
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
      stats_put(&o, "  %s%s\n", tm_stats_budget_source_name(ti->budget.source),
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
    stats_put(&o, "%-20s %s (%d); policies that may allow it: %s; the heap: %s\n", "numa balancing",
              tm_balancing_mode_name(s->numa_balancing), (int)s->numa_balancing,
              tm_balancing_policies_name(s->numa_balancing_policies),
              !s->numa_balancing_heap    ? "not scanned (its policies do not allow it)"
              : s->numa_balancing_demotes ? "scanned; tier 0 held by the kernel's own demotion"
                                          : "scanned; tier 0 held by tiermalloc's moves");
#define X(name, unit, doc) stats_put(&o, "%-20s", #name); stats_put_unit(&o, unit, s->name); stats_put(&o, "\n");
    TIER_STATS_GLOBAL_FIELDS(X)
    TIER_STATS_SITE_FIELDS(X)
    TIER_STATS_HANDED_FIELDS(X)
#undef X
    stats_put_sites(&o, s, false, who == NULL || !who->foreign);
  }
  stats_flush(&o);
}


/* ---- Prometheus ---------------------------------------------------------- */

/* A label value: backslash, double quote and newline escaped. */
static void prom_put_label(stats_out_t *o, const char *key, const char *v)
{
  stats_put(o, ",%s=\"", key);
  for (const char *c = v; *c; c++) {
    if (*c == '\\' || *c == '"') stats_put(o, "\\%c", *c);
    else if (*c == '\n') stats_put(o, "\\n");
    else stats_put(o, "%c", *c);
  }
  stats_put(o, "\"");
}

/* The metric's name from the field's: tiermalloc_<prefix><name> with its
 * unit (_bytes, _seconds for a name ending in _ns, _total for a sum since
 * start-up); counter says whether it only grows. */
/* A unit whose figure only grows: "total", "ns_total", "bytes_total". */
static bool prom_counter(const char *unit, bool sum)
{
  size_t n = strlen(unit);
  return sum || (n >= 5 && strcmp(unit + n - 5, "total") == 0);
}

static void prom_name(char *buf, size_t size, const char *prefix, const char *name,
                      const char *unit, bool sum)
{
  size_t len = strlen(name);
  bool ns = strncmp(unit, "ns", 2) == 0;
  if (ns && len > 3 && strcmp(name + len - 3, "_ns") == 0) len -= 3;
  snprintf(buf, size, "tiermalloc_%s%.*s%s%s", prefix, (int)len, name,
           strncmp(unit, "bytes", 5) == 0 ? "_bytes" : ns ? "_seconds" : "", prom_counter(unit, sum) ? "_total" : "");
}

static void prom_head(stats_out_t *o, const char *metric, const char *help, bool counter)
{
  stats_put(o, "# HELP %s ", metric);
  for (const char *c = help; *c; c++) {
    if (*c == '\\') stats_put(o, "\\\\");
    else if (*c == '\n') stats_put(o, "\\n");
    else stats_put(o, "%c", *c);
  }
  stats_put(o, "\n# TYPE %s %s\n", metric, counter ? "counter" : "gauge");
}

/* metric{pid="..",command=".." and, for a tier, tier and nodes */
static void prom_sample_start(stats_out_t *o, const char *metric, const tm_stats_who_t *w,
                              const tier_stats_t *s, int tier)
{
  stats_put(o, "%s{pid=\"%u\"", metric, w->pid);
  prom_put_label(o, "command", w->command ? w->command : "");
  if (tier >= 0) {
    char nodes[256];
    tm_nodelist_format((const tm_nodemask_t *)s->tier[tier].nodes, nodes, sizeof nodes);
    stats_put(o, ",tier=\"%d\",nodes=\"%s\"", tier, nodes);
  }
}

static void prom_value(stats_out_t *o, const char *unit, uint64_t v)
{
  if (strncmp(unit, "ns", 2) == 0) stats_put(o, "} %.9f\n", (double)v / 1e9);
  else stats_put(o, "} %llu\n", (unsigned long long)v);
}

void tm_stats_format_prom(const tier_stats_t *const *s, const tm_stats_who_t *who, unsigned n,
                          tier_write_fn *write, void *arg)
{
  stats_out_t o = { .write = write, .arg = arg };
  char m[128];
  prom_head(&o, "tiermalloc_info", "a process running tiermalloc (1), its cgroup, reclaim mode and cold signal", false);
  for (unsigned k = 0; k < n; k++) {
    prom_sample_start(&o, "tiermalloc_info", &who[k], s[k], -1);
    prom_put_label(&o, "cgroup", s[k]->cgroup);
    prom_put_label(&o, "reclaim_mode", tm_stats_reclaim_mode_name(s[k]->reclaim_mode));
    prom_put_label(&o, "cold_signal", s[k]->cold_signal);
    stats_put(&o, ",stats_version=\"%u\"} 1\n", s[k]->version);
  }
  /* A reader's view of a live record: how old its figures are. */
  bool records = n > 0;
  for (unsigned k = 0; k < n; k++) records &= who[k].record != NULL;
  static const struct {
    const char *metric, *help;
    size_t at;   /* offset of the tm_stats_record_t field, in ns */
  } ages[] = {
    { "tiermalloc_record_age_seconds",
      "seconds since the process last published its figures; more than twice "
      "tiermalloc_record_interval_seconds: they are stale (the process is stopped or stuck)",
      offsetof(tm_stats_record_t, published_age_ns) },
    { "tiermalloc_record_interval_seconds",
      "how often the process's thread publishes its figures; 0: no thread publishes now, they are "
      "as of its last allocation that committed memory",
      offsetof(tm_stats_record_t, interval_ns) },
    { "tiermalloc_resident_age_seconds",
      "seconds since the resident figures were measured: 0 when tierctl measured them at the read "
      "(/proc/PID/numa_maps), else the process's own measurement's age",
      offsetof(tm_stats_record_t, resident_age_ns) },
  };
  for (unsigned a = 0; records && a < sizeof ages / sizeof *ages; a++) {
    prom_head(&o, ages[a].metric, ages[a].help, false);
    for (unsigned k = 0; k < n; k++) {
      prom_sample_start(&o, ages[a].metric, &who[k], s[k], -1);
      prom_value(&o, "ns", *(const uint64_t *)((const char *)who[k].record + ages[a].at));
    }
  }
  prom_head(&o, "tiermalloc_numa_balancing",
            "kernel.numa_balancing (0 off, 1 normal, 2 tiering, 3 both; -1 none), with the policies this kernel lets "
            "allow it, whether the heap's do (heap: 1 scanned, 0 not) and whether the kernel's own demotion holds "
            "tier 0 (demotes: 1, 0 tiermalloc's moves)", false);
  for (unsigned k = 0; k < n; k++) {
    prom_sample_start(&o, "tiermalloc_numa_balancing", &who[k], s[k], -1);
    prom_put_label(&o, "mode", tm_balancing_mode_name(s[k]->numa_balancing));
    prom_put_label(&o, "policies", tm_balancing_policies_name(s[k]->numa_balancing_policies));
    stats_put(&o, ",heap=\"%u\",demotes=\"%u\"} %d\n", s[k]->numa_balancing_heap ? 1u : 0u,
              s[k]->numa_balancing_demotes ? 1u : 0u, (int)s[k]->numa_balancing);
  }
  prom_head(&o, "tiermalloc_reclaim_state", "what the reclaim thread is doing now (1 for the state in the label)", false);
  for (unsigned k = 0; k < n; k++) {
    prom_sample_start(&o, "tiermalloc_reclaim_state", &who[k], s[k], -1);
    prom_put_label(&o, "state", tm_stats_reclaim_state_name(s[k]->reclaim_state));
    stats_put(&o, "} 1\n");
  }
#define X(name, unit, doc)                                                                         \
  prom_name(m, sizeof m, "", #name, #unit, false);                                                 \
  prom_head(&o, m, doc, prom_counter(#unit, false));                                               \
  for (unsigned k = 0; k < n; k++) {                                                               \
    prom_sample_start(&o, m, &who[k], s[k], -1);                                                   \
    prom_value(&o, #unit, s[k]->name);                                                             \
  }
  TIER_STATS_GLOBAL_FIELDS(X)
  TIER_STATS_SITE_FIELDS(X)
  TIER_STATS_HANDED_FIELDS(X)
#undef X
#define X(name, unit, doc)                                                                         \
  prom_name(m, sizeof m, "tier_", #name, #unit, false);                                            \
  prom_head(&o, m, doc, false);                                                                    \
  for (unsigned k = 0; k < n; k++)                                                                 \
    for (unsigned t = 0; t < s[k]->ntiers && t < TIER_MAX_TIERS; t++) {                            \
      prom_sample_start(&o, m, &who[k], s[k], (int)t);                                             \
      prom_value(&o, #unit, s[k]->tier[t].name);                                                   \
    }
  TIER_STATS_TIER_FIELDS(X)
#undef X
#define X(name, unit, doc)                                                                         \
  prom_name(m, sizeof m, "tier_", #name, #unit, true);                                             \
  prom_head(&o, m, "bytes " doc, true);                                                            \
  for (unsigned k = 0; k < n; k++)                                                                 \
    for (unsigned t = 0; t < s[k]->ntiers && t < TIER_MAX_TIERS; t++) {                            \
      prom_sample_start(&o, m, &who[k], s[k], (int)t);                                             \
      prom_value(&o, #unit, s[k]->tier[t].reclaim.name);                                           \
    }
  TIER_STATS_RECLAIM_FIELDS(X)
#undef X
  prom_head(&o, "tiermalloc_tier_budget_bytes",
            "the tier's budget by limit (min, low, high, max; +Inf: unlimited) and its source", false);
  for (unsigned k = 0; k < n; k++)
    for (unsigned t = 0; t < s[k]->ntiers && t < TIER_MAX_TIERS; t++) {
      const tier_stats_tier_t *ti = &s[k]->tier[t];
#define X(name, unit, doc)                                                                         \
  prom_sample_start(&o, "tiermalloc_tier_budget_bytes", &who[k], s[k], (int)t);                    \
  stats_put(&o, ",limit=\"" #name "\"");                                                          \
  prom_put_label(&o, "source", tm_stats_budget_source_name(ti->budget.source));                    \
  if (ti->budget.name == TIER_UNLIMITED) stats_put(&o, "} +Inf\n");                                \
  else stats_put(&o, "} %llu\n", (unsigned long long)ti->budget.name);
      TIER_STATS_BUDGET_FIELDS(X)
#undef X
    }
  prom_head(&o, "tiermalloc_tier_max_held",
            "0 while the tier is above its max and reclaim cannot bring it back (no swap), else 1", false);
  for (unsigned k = 0; k < n; k++)
    for (unsigned t = 0; t < s[k]->ntiers && t < TIER_MAX_TIERS; t++) {
      prom_sample_start(&o, "tiermalloc_tier_max_held", &who[k], s[k], (int)t);
      stats_put(&o, "} %d\n", s[k]->tier[t].budget.max_not_held ? 0 : 1);
    }
  stats_flush(&o);
}
