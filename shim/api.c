/* The tier_* API of include/tiermalloc.h, over allocator/. */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "arena.h"
#include "chunkmap.h"
#include "hint.h"
#include "je.h"
#include "live.h"
#include "migrate.h"
#include "range.h"
#include "shim.h"
#include "startup.h"
#include "stats.h"
#include "statsfmt.h"
#include "thread.h"
#include "tiermalloc.h"

TM_EXPORT int tier_count(void)
{
  tm_start();
  return tm_topology()->ntiers;
}

TM_EXPORT int tier_of(const void *p)
{
  tm_chunk_t *c = tm_chunk_of(p);
  int8_t on;
  void *page = (void *)((uintptr_t)p & ~(uintptr_t)4095);
  /* A handed chunk's page may be where the kernel's NUMA balancing put it. */
  if (c != NULL && (atomic_load_explicit(&c->flags, memory_order_relaxed) & TM_CHUNK_HANDED) &&
      tm_migrate_where(&page, 1, &on) == 0 && on >= 0)
    return on;
  if (c != NULL) return (int)tm_chunk_tier_at(c, p);
  unsigned i = tm_range_index(p);   /* no chunk map: the home tier */
  return i == TM_RANGE_OTHER ? TIER_NONE : (int)i;
}

TM_EXPORT void *tier_malloc(size_t size, int tier)
{
  tm_thread_t *t = tm_thread();
  if (tier < 0 || tier >= tm_topology()->ntiers) {
    errno = EINVAL;
    return NULL;
  }
  if (!tm_arenas_ready()) {   /* no ranges: nothing is placed anywhere */
    errno = ENOMEM;
    return NULL;
  }
  int flags = tm_arena_pinned_flags((unsigned)tier) | tm_arena_tcache_flags(t, (unsigned)tier);
  void *p = tmje_mallocx(size ? size : 1, flags);
  if (t != NULL) tm_count_alloc(t, p);
  else if (p != NULL) tm_account_late(p, tmje_malloc_usable_size(p), 0);
  if (p == NULL) errno = ENOMEM;
  return p;
}

/* Back into the explicit tcache of the tier p is on, so tier_malloc reuses
 * it without a round trip through the arena. */
TM_EXPORT void tier_free(void *p)
{
  unsigned i = tm_range_index(p);
  tm_thread_t *t = i == TM_RANGE_OTHER ? NULL : tm_thread();
  if (t == NULL || !tm_arenas_ready()) {
    tm_shim_free(p);
    return;
  }
  if (i != t->free_run) tm_account_switch_free(t, p, i);
  tmje_dallocx(p, tm_arena_tcache_flags(t, i));
}

TM_EXPORT int tier_hint(const void *p, size_t len, int hint)
{
  tm_start();
  return tm_hint(p, len, hint);
}

TM_EXPORT int tier_pin(const void *p, size_t len)
{
  tm_start();
  return tm_pin(p, len);
}

TM_EXPORT int tier_unpin(const void *p, size_t len)
{
  tm_start();
  return tm_unpin(p, len);
}

TM_EXPORT int tier_stats_get(tier_stats_t *out, size_t size)
{
  if (out == NULL || size < offsetof(tier_stats_t, tier)) return EINVAL;
  tm_start();
  tier_stats_t s;
  tm_stats_snapshot(&s, NULL);
  tm_live_publish(&s);
  memcpy(out, &s, size < sizeof s ? size : sizeof s);
  return 0;
}

TM_EXPORT int tier_stats_print(tier_write_fn *write, void *arg, tier_stats_format_t format)
{
  if (write == NULL || (format != TIER_STATS_TEXT && format != TIER_STATS_JSON &&
                        format != TIER_STATS_PROM))
    return EINVAL;
  tm_start();
  tier_stats_t s;
  tm_stats_snapshot(&s, NULL);
  tm_live_publish(&s);
  tm_stats_who_t me = tm_stats_me();
  tm_stats_format(&s, &me, write, arg, format);
  return 0;
}

TM_EXPORT int tier_stats_publish(void)
{
  tm_start();
  tier_stats_t s;
  tm_stats_snapshot(&s, NULL);
  return tm_live_publish(&s);
}
