/*
 * statsfmt: the text, JSON and Prometheus forms of a tier_stats_t, each
 * printed by one walk over the field lists of include/tiermalloc.h. Pure:
 * no I/O but the caller's writer, no allocation, no state; tierctl links it
 * to print another process's published record exactly as the library
 * prints its own.
 */
#ifndef TM_STATSFMT_H
#define TM_STATSFMT_H

#include <stdbool.h>
#include <stdint.h>

#include "tiermalloc.h"

/* How old a live record's figures are, as a reader (tierctl) saw it: JSON
 * and Prometheus carry these so that a figure that cannot be fresh says so. */
typedef struct tm_stats_record_s {
  uint64_t published_age_ns;   /* since the process last published its record */
  uint64_t interval_ns;        /* its thread's publishing period; 0: no thread publishes now */
  uint64_t resident_age_ns;    /* since resident was measured (0: by the reader, at the read) */
  const char *publisher;       /* who published last: "start-up", "thread", "api call", "allocation" */
  const char *resident_by;     /* "tierctl" (measured at the read) or "process" (the record's) */
} tm_stats_record_t;

/* Whose stats: JSON and Prometheus carry its pid and command (NULL: none).
 * foreign: read from another process's record, whose site frames are printed
 * as addresses (they mean nothing in the reader's address space); the
 * calling process's are named with dladdr. record: the record's ages (NULL:
 * the calling process's own stats, measured now). */
typedef struct tm_stats_who_s {
  uint32_t pid;
  const char *command;
  bool foreign;
  const tm_stats_record_t *record;
} tm_stats_who_t;

/* Prints *s through write(arg, ...) in any tier_stats_format_t. */
void tm_stats_format(const tier_stats_t *s, const tm_stats_who_t *who, tier_write_fn *write,
                     void *arg, tier_stats_format_t format);

/* The Prometheus form of n processes' stats, one metric family after
 * another (HELP and TYPE once each, as the exposition format asks), each
 * sample labelled pid and command. who[k] names s[k]. */
void tm_stats_format_prom(const tier_stats_t *const *s, const tm_stats_who_t *who, unsigned n,
                          tier_write_fn *write, void *arg);

/* "off", "always", "pressure" (tier_reclaim_mode_t); "stopped", "idle",
 * "demoting", "paging out", "max not held", "promoting" (tier_reclaim_state_t);
 * "none", "env", "kernel", "cgroup v2", "cgroup v1", "ratio" (tier_budget_source_t). */
const char *tm_stats_reclaim_mode_name(uint32_t m);
const char *tm_stats_reclaim_state_name(uint32_t st);
const char *tm_stats_budget_source_name(uint32_t src);

/* Who wrote a live record (tier_live_publisher_t): "start-up", "thread",
 * "api call", "allocation". */
const char *tm_stats_publisher_name(uint32_t p);

#endif
