#include "hotness.h"

#include <time.h>

_Atomic uint16_t tm_hotness_now;

void tm_hotness_tick(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  uint64_t ticks = ((uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000) /
                   TM_HOTNESS_TICK_MS;
  atomic_store_explicit(&tm_hotness_now, (uint16_t)ticks, memory_order_relaxed);
}

unsigned tm_hotness_age(tm_chunk_t *c)
{
  uint16_t now = atomic_load_explicit(&tm_hotness_now, memory_order_relaxed);
  uint16_t age = (uint16_t)(now - atomic_load_explicit(&c->age, memory_order_relaxed));
  if (age > TM_HOTNESS_AGE_MAX) {
    /* Older than the clock can tell: pin it at the oldest, before the 16-bit
     * difference wraps round and calls it young. */
    atomic_store_explicit(&c->age, (uint16_t)(now - TM_HOTNESS_AGE_MAX), memory_order_relaxed);
    age = TM_HOTNESS_AGE_MAX;
  }
  return age;
}

const char *tm_hotness_signal(void)
{
  return "commit age";
}
