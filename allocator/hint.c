#include "hint.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>

#include "budget.h"
#include "chunkmap.h"
#include "hotness.h"
#include "migrate.h"
#include "tiermalloc.h"

static pthread_mutex_t hint_lock = PTHREAD_MUTEX_INITIALIZER;   /* pins only */
static size_t hint_pinned;   /* chunks */

/* The chunks [first, last] of a range, or EINVAL when it is not all placed. */
static int hint_chunks(const void *p, size_t len, tm_chunk_t **first, tm_chunk_t **last)
{
  uintptr_t a = (uintptr_t)p;
  if (len == 0 || a + len < a) return EINVAL;
  *first = tm_chunk_of(p);
  *last = tm_chunk_of((const void *)(a + len - 1));
  if (*first == NULL || *last == NULL || *last < *first ||
      tm_chunk_home(*first) != tm_chunk_home(*last))
    return EINVAL;
  return 0;
}

int tm_hint(const void *p, size_t len, int hint)
{
  tm_chunk_t *c0, *c1;
  int err = hint_chunks(p, len, &c0, &c1);
  if (err != 0) return err;
  if (hint == TIER_HINT_HOT) {
    for (tm_chunk_t *c = c0; c <= c1; c++) tm_hotness_touch(c);
    return 0;
  }
  if (hint != TIER_HINT_COLD) return EINVAL;
  uintptr_t a = (uintptr_t)p, end = a + len;
  for (tm_chunk_t *c = c0; c <= c1; c++)
    if (tm_chunk_addr(c) >= a && tm_chunk_addr(c) + TM_CHUNK_SIZE <= end) tm_hotness_chill(c);
  return 0;
}

int tm_pin(const void *p, size_t len)
{
  tm_chunk_t *c0, *c1;
  int err = hint_chunks(p, len, &c0, &c1);
  if (err != 0) return err;
  pthread_mutex_lock(&hint_lock);
  size_t more = 0;
  for (tm_chunk_t *c = c0; c <= c1; c++)
    more += !(atomic_load_explicit(&c->flags, memory_order_relaxed) & TM_CHUNK_PIN);
  uint64_t min = tm_budget_get(0, TM_LIMIT_MIN);
  if ((uint64_t)(hint_pinned + more) * TM_CHUNK_SIZE > min) {
    pthread_mutex_unlock(&hint_lock);
    return ENOSPC;
  }
  for (tm_chunk_t *c = c0; c <= c1; c++) {
    if (atomic_fetch_or_explicit(&c->flags, TM_CHUNK_PIN, memory_order_relaxed) & TM_CHUNK_PIN) continue;
    hint_pinned++;
    tm_migrate_counts_t n = {0};
    /* Up now, in the caller (an empty chunk is placed on tier 0 as it is
     * committed: placement honours the pin). */
    if (tm_chunk_tier(c) != 0) tm_migrate_chunk(c, 0, &n);
  }
  pthread_mutex_unlock(&hint_lock);
  return 0;
}

int tm_unpin(const void *p, size_t len)
{
  tm_chunk_t *c0, *c1;
  int err = hint_chunks(p, len, &c0, &c1);
  if (err != 0) return err;
  pthread_mutex_lock(&hint_lock);
  for (tm_chunk_t *c = c0; c <= c1; c++)
    if (atomic_fetch_and_explicit(&c->flags, (uint16_t)~TM_CHUNK_PIN, memory_order_relaxed) & TM_CHUNK_PIN)
      hint_pinned--;
  pthread_mutex_unlock(&hint_lock);
  return 0;
}

void tm_hint_prefork(void)
{
  pthread_mutex_lock(&hint_lock);
}

void tm_hint_postfork(void)
{
  pthread_mutex_unlock(&hint_lock);
}

size_t tm_pinned(void)
{
  pthread_mutex_lock(&hint_lock);
  size_t n = hint_pinned;
  pthread_mutex_unlock(&hint_lock);
  return n * TM_CHUNK_SIZE;
}
