/*
 * arena: jemalloc arenas whose extents come from the tier ranges.
 *
 * - Every automatic arena (the ones malloc uses) gets the placement hooks:
 *   a new extent goes where policy puts it (top tier first). Each thread is
 *   bound to one of them once (tm_arena_thread_bind), which installs the
 *   hooks on an arena before its first use; jemalloc's tcache fast path is
 *   untouched.
 * - Each tier also has one pinned arena for tier_malloc, whose extents come
 *   only from that tier's range. tier_malloc routes through a per-thread
 *   explicit tcache per tier (a default tcache would hand back objects cached
 *   from other arenas).
 * Address space is retained by jemalloc (the dalloc hook opts out) and pages
 * go back to the kernel through the purge hooks as jemalloc decays them.
 */
#ifndef TM_ARENA_H
#define TM_ARENA_H

#include <stdbool.h>

#include "je.h"

struct tm_thread_s;

/* Installs the hooks on every automatic arena and creates one pinned arena
 * per tier. Needs active ranges. Returns 0 or a positive errno. */
int tm_arenas_init(unsigned ntiers);

/* MALLOCX flags for tier `tier`'s pinned arena (tier < ntiers). */
int tm_arena_pinned_flags(unsigned tier);

/* MALLOCX flags selecting the thread's own explicit tcache for `tier`,
 * created on first use; MALLOCX_TCACHE_NONE when t is NULL or creation fails. */
int tm_arena_tcache_flags(struct tm_thread_s *t, unsigned tier);

/* Destroys the thread's explicit tcaches; called at thread exit. */
void tm_arena_thread_exit(struct tm_thread_s *t);

/* Binds the calling thread, once (later calls do nothing), to one of the
 * automatic arenas other than arena 0, round robin. Arena 0 served jemalloc's own start-up with mmap'd extents
 * before the hooks were installed, so its early slabs lie outside every
 * range; threads never allocate from it. */
void tm_arena_thread_bind(void);

/* Fork child: the hook-installation lock may have been held by a gone thread. */
void tm_arena_postfork_child(void);

/* true when the pinned arenas exist (tier_malloc can place). */
bool tm_arenas_ready(void);

/* The hook table used for automatic arenas (prefers tier 0) and for tier t's
 * pinned arena; exposed for the unit test's pass-through double. */
extern extent_hooks_t *tm_arena_hooks(unsigned tier, bool pinned);

#endif
