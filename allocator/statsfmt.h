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

/* Whose stats: JSON and Prometheus carry its pid and command (NULL: none).
 * foreign: read from another process's record, whose site frames are printed
 * as addresses (they mean nothing in the reader's address space); the
 * calling process's are named with dladdr. */
typedef struct tm_stats_who_s {
  uint32_t pid;
  const char *command;
  bool foreign;
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

#endif
