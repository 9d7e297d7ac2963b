/*
 * live: the process's stats published for tierctl in a record of its own
 * (tier_live_t, include/tiermalloc.h): <TIERMALLOC_LIVE_DIR>/tiermalloc.<pid>,
 * mode 0600, mapped shared, written under a seqlock so that a reader never
 * blocks the writer and never keeps a torn copy. Written at start-up, by the
 * library's thread every TIERMALLOC_LIVE_MS while it runs (background.h says
 * when a process gets one; one without it publishes as it commits memory,
 * at most once an interval), on demand (tier_stats_get, tier_stats_print,
 * tier_stats_publish); removed at exit. Never allocates.
 */
#ifndef TM_LIVE_H
#define TM_LIVE_H

#include <stdbool.h>
#include <stdint.h>

#include "tiermalloc.h"

/* Once start-up has run (the shim's constructor): creates the record and
 * publishes (TIER_LIVE_STARTUP). A record that cannot be created is said
 * once; secure execution makes none. Registers its own fork handlers, after
 * fork.c's: their prepare runs first, so the record's lock is taken before
 * the account's and the budgets', which its writer takes while holding it. */
void tm_live_init(void);

/* Publishes when the interval has passed (resident measured again when the
 * memory changed, else every 10 s, and no more often than 50 x what the
 * last measurement cost; else the last figure is kept, with its time): at each wake of the library's thread
 * (on_thread), or on a program thread committing memory while that thread
 * does not run (background.h). Returns the nanoseconds until the next
 * publication, UINT64_MAX for none. */
uint64_t tm_live_tick(bool on_thread);

/* The interval has passed since the last publication (a relaxed load). */
bool tm_live_due(void);

/* The record is on (the option) and was not refused for good: worth a
 * thread that publishes it (a relaxed load). */
bool tm_live_wanted(void);

/* On a program thread (outside jemalloc's locks), before tiermalloc's thread
 * starts to publish: makes the record now if this process has none (a fork
 * child), with a snapshot measured now. The thread never makes it (live.c
 * says why). */
void tm_live_prepare(void);

/* The library's thread stops: the record says no thread publishes now. */
void tm_live_thread_stopped(void);

/* Publishes *s (a snapshot whose resident was measured now). ENOENT: the
 * process has no record. A fork child's first publication creates its own. */
int tm_live_publish(const tier_stats_t *s);

/* Exit (the destructor): removes the record, if this process made it. */
void tm_live_at_exit(void);

#endif
