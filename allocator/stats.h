/*
 * stats: one snapshot of the per-tier figures (tier_stats_t, defined once in
 * include/tiermalloc.h), and the stats printed at exit (statsfmt.h prints).
 */
#ifndef TM_STATS_H
#define TM_STATS_H

#include "statsfmt.h"
#include "tiermalloc.h"

/* Fills *s now, measuring resident bytes from /proc/self/numa_maps; or,
 * with prev, taking resident, resident_other and resident_sample_ns from
 * *prev instead (a snapshot that costs no page-table walk). Returns 0 or a
 * positive errno (the snapshot is still filled; resident is then 0). */
int tm_stats_snapshot(tier_stats_t *s, const tier_stats_t *prev);

/* Measures resident bytes into *s now (resident, resident_other,
 * resident_sample_ns), leaving the rest. 0 or a positive errno. */
int tm_stats_resident(tier_stats_t *s);

/* This process, for the printers: its pid and name. */
tm_stats_who_t tm_stats_me(void);

/* At start-up: keeps a copy of stderr when the exit stats go there. */
void tm_stats_at_start(void);

/* At exit: prints the stats as TIERMALLOC_STATS and TIERMALLOC_STATS_FILE say. */
void tm_stats_at_exit(void);

#endif
