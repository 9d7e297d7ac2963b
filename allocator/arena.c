#include "arena.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "account.h"
#include "chunkmap.h"
#include "jemap.h"
#include "log.h"
#include "notify.h"
#include "policy.h"
#include "range.h"

#define ARENA_PAGE ((size_t)4096)

/* The tier a hook table serves travels with the table: jemalloc passes the
 * table to every hook, so the hook finds its tier without a lookup. */
typedef struct arena_hooks_s {
  extent_hooks_t h;        /* first: the hooks' extent_hooks_t * is this struct */
  _Atomic unsigned tier;   /* preferred; a site arena's changes with its verdict */
  bool pinned;
  uint8_t site;            /* k + 1 of site arena k; 0: none */
} arena_hooks_t;

static arena_hooks_t arena_auto;
static arena_hooks_t arena_pinned[TIER_MAX_TIERS];
static unsigned arena_pinned_ind[TIER_MAX_TIERS];
static arena_hooks_t arena_site[TM_SITE_ARENAS];
static unsigned arena_site_ind[TM_SITE_ARENAS];
static unsigned arena_nauto;
static pthread_mutex_t arena_hook_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic unsigned arena_nhooked;     /* automatic arenas 0..n-1 have the hooks */
static _Atomic unsigned arena_threads_seen;
static bool arena_ready;

/* Every range is full: malloc must not fail for want of address space, so
 * the extent is mapped outside the ranges (unplaced, TIER_NONE), with one
 * warning the first time. tier_malloc's pinned arenas do fail instead: they promise a tier. */
static void *arena_alloc_unplaced(size_t size, size_t align)
{
  static atomic_bool warned;
  void *p = tm_jemap_alloc(size, align);
  /* A request larger than any memory fails quietly, as malloc does. */
  if (p != NULL && !atomic_exchange_explicit(&warned, true, memory_order_relaxed))
    tm_warn("the tier ranges are full (TIERMALLOC_RESERVE); new memory is not placed on a tier");
  return p;
}

/* Contract (jemalloc extent_alloc_t): return size bytes aligned to
 * alignment, or NULL. new_addr is a request to extend in place; ranges only
 * grow by bump, so refuse it. Fresh range memory is zeroed. It is readable
 * and writable either way, but committed only when jemalloc asks (*commit):
 * the rest (the unused tail of a grown extent) is committed through the
 * commit hook when jemalloc first uses it, and only then placed and counted. */
static void *arena_alloc(extent_hooks_t *h, void *new_addr, size_t size, size_t alignment,
                         bool *zero, bool *commit, unsigned arena_ind)
{
  if (new_addr != NULL) return NULL;
  const arena_hooks_t *ah = (const arena_hooks_t *)h;
  size_t align = alignment < ARENA_PAGE ? ARENA_PAGE : alignment;
  unsigned tier = atomic_load_explicit(&ah->tier, memory_order_relaxed);
  void *p = tm_policy_carve(tier, ah->pinned, ah->site != 0, size, align);
  if (p == NULL && !ah->pinned) p = arena_alloc_unplaced(size, align);
  if (p == NULL) return NULL;
  if (ah->site) tm_chunk_mark_site(p, size, ah->site);
  tm_notify_heap_grew();
  *zero = true;
  if (*commit) tm_policy_commit(p, size, tier, ah->pinned);
  return p;
}

/* Opt out (true): jemalloc retains the address space; the range never
 * shrinks. The pages were already given back by a purge. */
static bool arena_dalloc(extent_hooks_t *h, void *addr, size_t size, bool committed,
                         unsigned arena_ind)
{
  return true;
}

static void arena_destroy(extent_hooks_t *h, void *addr, size_t size, bool committed,
                          unsigned arena_ind)
{
  tm_range_os()->purge(addr, size, 0);
}

/* Commit and decommit never change protections: PROT_NONE would split the
 * range's VMA at every extent. The memory stays readable and writable;
 * decommit gives its pages back (MADV_DONTNEED: zero on the next touch, which
 * jemalloc assumes of decommitted memory), commit counts it again and places
 * its chunks, so the committed figure the budgets use is live. */
static bool arena_commit(extent_hooks_t *h, void *addr, size_t size, size_t offset,
                         size_t length, unsigned arena_ind)
{
  const arena_hooks_t *ah = (const arena_hooks_t *)h;
  tm_policy_commit((char *)addr + offset, length, atomic_load_explicit(&ah->tier, memory_order_relaxed),
                   ah->pinned);
  return false;
}

static bool arena_decommit(extent_hooks_t *h, void *addr, size_t size, size_t offset,
                           size_t length, unsigned arena_ind)
{
  if (tm_range_os()->purge((char *)addr + offset, length, 0) != 0) return true;
  tm_policy_decommit((char *)addr + offset, length);
  return false;
}

static bool arena_purge_lazy(extent_hooks_t *h, void *addr, size_t size, size_t offset,
                             size_t length, unsigned arena_ind)
{
  return tm_range_os()->purge((char *)addr + offset, length, 1) != 0;
}

static bool arena_purge_forced(extent_hooks_t *h, void *addr, size_t size, size_t offset,
                               size_t length, unsigned arena_ind)
{
  return tm_range_os()->purge((char *)addr + offset, length, 0) != 0;
}

static bool arena_split(extent_hooks_t *h, void *addr, size_t size, size_t size_a,
                        size_t size_b, bool committed, unsigned arena_ind)
{
  return false;
}

/* Two extents merge only within one tier's range: a merged extent must have
 * one tier (the guard gap makes cross-range neighbours impossible anyway). */
static bool arena_merge(extent_hooks_t *h, void *addr_a, size_t size_a, void *addr_b,
                        size_t size_b, bool committed, unsigned arena_ind)
{
  return tm_range_index(addr_a) != tm_range_index(addr_b);
}

static const extent_hooks_t arena_ops = {
  .alloc = arena_alloc,
  .dalloc = arena_dalloc,
  .destroy = arena_destroy,
  .commit = arena_commit,
  .decommit = arena_decommit,
  .purge_lazy = arena_purge_lazy,
  .purge_forced = arena_purge_forced,
  .split = arena_split,
  .merge = arena_merge,
};

extent_hooks_t *tm_arena_hooks(unsigned tier, bool pinned)
{
  return pinned ? &arena_pinned[tier].h : &arena_auto.h;
}

/* Writing arena.<i>.extent_hooks initialises an automatic arena that does
 * not exist yet with these hooks (and replaces the hooks of one that does). */
static int arena_hook(unsigned i)
{
  char name[64];
  snprintf(name, sizeof name, "arena.%u.extent_hooks", i);
  extent_hooks_t *hooks = &arena_auto.h;
  int err = tmje_mallctl(name, NULL, NULL, &hooks, sizeof(hooks));
  if (err) tm_warn("cannot set extent hooks of arena %u (errno %d)", i, err);
  return err;
}

/* Sizes halve from 1 MiB to a page; a size is taken again while it comes
 * from outside the ranges. Placed blocks are held until the end, so they
 * are not handed back out during the drain. */
void tm_arena_drain_unplaced(void)
{
  enum { TRIES = 64 };
  int flags = MALLOCX_ARENA(0) | MALLOCX_TCACHE_NONE;
  void *placed[TRIES];
  int nplaced = 0;
  size_t size = (size_t)1 << 20;
  for (int i = 0; i < TRIES && size >= ARENA_PAGE; i++) {
    void *p = tmje_mallocx(size, flags);
    if (p == NULL) break;
    if (tm_range_index(p) != TM_RANGE_OTHER) {
      placed[nplaced++] = p;
      size /= 2;
    }
  }
  while (nplaced > 0) tmje_dallocx(placed[--nplaced], flags);
}

int tm_arenas_init(unsigned ntiers)
{
  arena_auto = (arena_hooks_t){ .h = arena_ops, .tier = 0, .pinned = false };
  unsigned narenas = 0;
  size_t sz = sizeof(narenas);
  int err = tmje_mallctl("opt.narenas", &narenas, &sz, NULL, 0);
  if (err) return err;
  /* Arena 0 exists already; the others get their hooks as threads arrive
   * (tm_arena_thread_bind), so a single-threaded program pays for two
   * arenas, not one per CPU (each costs a 2 MiB metadata block and page
   * faults at start-up). */
  err = arena_hook(0);
  if (err) return err;
  atomic_store_explicit(&arena_nhooked, 1, memory_order_relaxed);
  /* jemalloc created arena 0 before it applied oversize_threshold:0, with
   * the default 8 MiB: arena 0 alone would purge every freed extent that
   * coalesces to 8 MiB at once, instead of keeping it for reuse. */
  size_t never = SIZE_MAX;
  if (tmje_mallctl("arena.0.oversize_threshold", NULL, NULL, &never, sizeof never) != 0)
    tm_warn("cannot set arena 0's oversize_threshold; it purges freed extents of 8 MiB at once");
  for (unsigned t = 0; t < ntiers; t++) {
    arena_pinned[t] = (arena_hooks_t){ .h = arena_ops, .tier = t, .pinned = true };
    extent_hooks_t *hooks = &arena_pinned[t].h;
    sz = sizeof(arena_pinned_ind[t]);
    err = tmje_mallctl("arenas.create", &arena_pinned_ind[t], &sz, &hooks, sizeof(hooks));
    if (err) {
      tm_warn("cannot create the arena of tier %u (errno %d)", t, err);
      return err;
    }
  }
  arena_nauto = narenas;
  arena_ready = true;
  return 0;
}

void tm_arena_thread_bind(void)
{
  static __thread bool seen __attribute__((tls_model("initial-exec")));
  if (seen || !arena_ready) return;
  seen = true;
  unsigned n = atomic_fetch_add_explicit(&arena_threads_seen, 1, memory_order_relaxed) + 1;
  unsigned want = n + 1 < arena_nauto ? n + 1 : arena_nauto;
  if (atomic_load_explicit(&arena_nhooked, memory_order_acquire) >= want) return;
  pthread_mutex_lock(&arena_hook_lock);
  unsigned h = atomic_load_explicit(&arena_nhooked, memory_order_relaxed);
  /* A failure warns once per arena tried; jemalloc would then create that
   * arena itself, and its extents would be unplaced. */
  while (h < want && arena_hook(h) == 0) h++;
  atomic_store_explicit(&arena_nhooked, h, memory_order_release);
  pthread_mutex_unlock(&arena_hook_lock);
}

void tm_arena_postfork_child(void)
{
  pthread_mutex_init(&arena_hook_lock, NULL);
}

bool tm_arenas_ready(void)
{
  return arena_ready;
}

int tm_arena_pinned_flags(unsigned tier)
{
  return MALLOCX_ARENA(arena_pinned_ind[tier]);
}

/* MALLOCX_TCACHE of the explicit tcache in *slot (its index + 1, 0: none
 * yet), created on first use. */
static int arena_tcache(unsigned *slot)
{
  if (*slot == 0) {
    unsigned tc;
    size_t sz = sizeof(tc);
    if (tmje_mallctl("tcache.create", &tc, &sz, NULL, 0) != 0) return MALLOCX_TCACHE_NONE;
    *slot = tc + 1;
  }
  return MALLOCX_TCACHE(*slot - 1);
}

int tm_arena_tcache_flags(tm_thread_t *t, unsigned tier)
{
  return t == NULL ? MALLOCX_TCACHE_NONE : arena_tcache(&t->tcache[tier]);
}

static void arena_tcaches_destroy(unsigned *slots, unsigned n)
{
  for (unsigned i = 0; i < n; i++) {
    if (slots[i] == 0) continue;
    unsigned tc = slots[i] - 1;
    slots[i] = 0;
    tmje_mallctl("tcache.destroy", NULL, NULL, &tc, sizeof(tc));
  }
}

void tm_arena_thread_exit(tm_thread_t *t)
{
  arena_tcaches_destroy(t->tcache, TIER_MAX_TIERS);
  arena_tcaches_destroy(t->site_tcache, TM_SITE_ARENAS);
}

int tm_arena_site_create(unsigned k, unsigned tier)
{
  /* The site is named only once the arena exists: jemalloc takes the
   * arena's metadata block through the same hooks as it creates it, and
   * that chunk, written then and rarely after, is not the site's memory (it
   * aged into "cold" and gave a hot site a cold verdict in CI). A metadata
   * block jemalloc takes later, as the arena grows, still counts as the
   * site's. Nothing allocates from the arena till site.c publishes it. */
  arena_site[k] = (arena_hooks_t){ .h = arena_ops, .tier = tier, .site = 0 };
  extent_hooks_t *hooks = &arena_site[k].h;
  size_t sz = sizeof(arena_site_ind[k]);
  int err = tmje_mallctl("arenas.create", &arena_site_ind[k], &sz, &hooks, sizeof(hooks));
  if (err) tm_warn("cannot create an arena for an allocation site (errno %d); it is not set apart", err);
  else arena_site[k].site = (uint8_t)(k + 1);
  return err;
}

void tm_arena_site_prefer(unsigned k, unsigned tier)
{
  atomic_store_explicit(&arena_site[k].tier, tier, memory_order_relaxed);
}

int tm_arena_site_flags(tm_thread_t *t, unsigned k)
{
  return MALLOCX_ARENA(arena_site_ind[k]) | arena_tcache(&t->site_tcache[k]);
}
