/*
 * arena: jemalloc arenas whose extents come from the tier ranges.
 *
 * - Every automatic arena (the ones malloc uses) gets the placement hooks:
 *   a new extent goes where policy puts it (top tier first). jemalloc binds
 *   each thread to the least loaded automatic arena itself; tiermalloc only
 *   hooks arenas ahead of that choice (tm_arena_thread_bind), so jemalloc
 *   never creates one with its default hooks. Moving a thread to another
 *   arena (thread.arena) is avoided on purpose: jemalloc then purges every
 *   dirty page of the arena the thread left when no thread is left on it,
 *   which made a thread-churning program refault its memory at every
 *   thread start (3x slower). jemalloc's tcache fast path is untouched.
 * - Each tier also has one pinned arena for tier_malloc, whose extents come
 *   only from that tier's range. tier_malloc routes through a per-thread
 *   explicit tcache per tier (a default tcache would hand back objects cached
 *   from other arenas).
 * Address space is retained by jemalloc (the dalloc hook opts out) and pages
 * go back to the kernel through the purge and decommit hooks as jemalloc
 * decays them; commit and decommit are counted per chunk (policy.c), which
 * places each chunk when it gets its first committed byte.
 */
#ifndef TM_ARENA_H
#define TM_ARENA_H

#include <stdbool.h>

#include "je.h"

struct tm_thread_s;

/* Installs the hooks on arena 0 and creates one pinned arena per tier.
 * Needs active ranges. Returns 0 or a positive errno. */
int tm_arenas_init(unsigned ntiers);

/* jemalloc's own start-up allocated from arena 0 before the hooks existed
 * (the first thread's tcache), growing it by one extent mapped outside the
 * ranges; the rest of that extent would serve the first thread's blocks,
 * unplaced. This allocates that rest once and never frees it: it costs
 * address space only (the pages are never touched), and every block malloc
 * returns is then placed. Once, at start-up, after tm_arenas_init. */
void tm_arena_drain_unplaced(void);

/* MALLOCX flags for tier `tier`'s pinned arena (tier < ntiers). */
int tm_arena_pinned_flags(unsigned tier);

/* MALLOCX flags selecting the thread's own explicit tcache for `tier`,
 * created on first use; MALLOCX_TCACHE_NONE when t is NULL or creation fails. */
int tm_arena_tcache_flags(struct tm_thread_s *t, unsigned tier);

/* Site arenas (site.h): arena k (< TM_SITE_ARENAS), whose extents are whole
 * chunks marked k + 1, placed from `tier` down; created once (0 or a
 * positive errno, warned). _prefer changes the tier for its new chunks;
 * _flags are the MALLOCX flags of arena k with t's own tcache for
 * it (t READY). */
int tm_arena_site_create(unsigned k, unsigned tier);
void tm_arena_site_prefer(unsigned k, unsigned tier);
int tm_arena_site_flags(struct tm_thread_s *t, unsigned k);

/* Destroys the thread's explicit tcaches; called at thread exit. */
void tm_arena_thread_exit(struct tm_thread_s *t);

/* Called once per thread (later calls do nothing), before the thread's
 * first jemalloc call, which is when jemalloc picks its arena: hooks enough
 * automatic arenas that jemalloc's pick is always a hooked one. jemalloc
 * creates arena k+1 only when arenas 0..k all have threads, so one hooked
 * arena more than the threads seen so far suffices (opt.narenas at most). */
void tm_arena_thread_bind(void);

/* Fork child: the hook-installation lock may have been held by a gone thread. */
void tm_arena_postfork_child(void);

/* true when the pinned arenas exist (tier_malloc can place). */
bool tm_arenas_ready(void);

/* The hook table used for automatic arenas (prefers tier 0) and for tier t's
 * pinned arena; exposed for the unit test's pass-through double. */
extern extent_hooks_t *tm_arena_hooks(unsigned tier, bool pinned);

#endif
