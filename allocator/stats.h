/*
 * stats: one snapshot of the per-tier figures (tier_stats_t, defined once in
 * include/tiermalloc.h) and its text and JSON forms, both printed by one
 * walk over the field lists.
 */
#ifndef TM_STATS_H
#define TM_STATS_H

#include "tiermalloc.h"

/* Fills *s now, measuring resident bytes. Returns 0 or a positive errno (the
 * snapshot is still filled; resident is then 0). */
int tm_stats_snapshot(tier_stats_t *s);

/* Prints *s through write(arg, ...). Never allocates. */
void tm_stats_format(const tier_stats_t *s, tier_write_fn *write, void *arg,
                     tier_stats_format_t format);

/* "off", "always", "pressure" (tier_reclaim_mode_t); "stopped", "idle",
 * "demoting", "paging out", "max not held", "promoting" (tier_reclaim_state_t). */
const char *tm_stats_reclaim_mode_name(uint32_t m);
const char *tm_stats_reclaim_state_name(uint32_t st);

/* At start-up: keeps a copy of stderr when the exit stats go there. */
void tm_stats_at_start(void);

/* At exit: prints the stats as TIERMALLOC_STATS and TIERMALLOC_STATS_FILE say. */
void tm_stats_at_exit(void);

#endif
