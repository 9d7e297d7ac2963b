#include "chunkmap.h"

#include <errno.h>
#include <sys/mman.h>

#include "log.h"

tm_chunk_t *tm_chunks;
uintptr_t tm_chunks_per_range;

static _Atomic uint64_t chunk_bytes[TIER_MAX_TIERS];
static _Atomic int64_t chunk_charged[TIER_MAX_TIERS];

int tm_chunkmap_init(void)
{
  if (tm_ranges.n == 0) return 0;
  uintptr_t per = tm_range_span() >> TM_CHUNK_SHIFT;
  size_t size = (size_t)tm_ranges.n * per * sizeof(tm_chunk_t);
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) {
    int err = errno;
    tm_warn("cannot map the chunk map (%zu MiB of address space); placement is per range", size >> 20);
    return err;
  }
  tm_chunks_per_range = per;
  tm_chunks = p;
  return 0;
}

unsigned tm_chunk_home(const tm_chunk_t *c)
{
  return (unsigned)((uintptr_t)(c - tm_chunks) / tm_chunks_per_range);
}

uintptr_t tm_chunk_addr(const tm_chunk_t *c)
{
  uintptr_t k = (uintptr_t)(c - tm_chunks);
  return tm_range_lo((unsigned)(k / tm_chunks_per_range)) +
         ((k % tm_chunks_per_range) << TM_CHUNK_SHIFT);
}

uint32_t tm_chunk_commit_bytes(tm_chunk_t *c, uint32_t n)
{
  uint32_t old = atomic_fetch_add_explicit(&c->committed, n, memory_order_relaxed);
  if (old != 0) atomic_fetch_add_explicit(&chunk_bytes[tm_chunk_tier(c)], n, memory_order_relaxed);
  return old;
}

bool tm_chunk_reserve(unsigned t, uint64_t limit)
{
  int64_t cur = atomic_load_explicit(&chunk_charged[t], memory_order_relaxed);
  do {
    if (cur >= 0 && (uint64_t)cur >= limit) return false;
  } while (!atomic_compare_exchange_weak_explicit(&chunk_charged[t], &cur, cur + 1,
                                                  memory_order_relaxed, memory_order_relaxed));
  return true;
}

void tm_chunk_unreserve(unsigned t)
{
  atomic_fetch_sub_explicit(&chunk_charged[t], 1, memory_order_relaxed);
}

void tm_chunk_place(tm_chunk_t *c, unsigned t, uint32_t n)
{
  atomic_store_explicit(&c->tier, (uint8_t)(t == tm_chunk_home(c) ? 0 : t + 1),
                        memory_order_relaxed);
  atomic_fetch_add_explicit(&chunk_bytes[t], n, memory_order_relaxed);
}

void tm_chunk_decommit_bytes(tm_chunk_t *c, uint32_t n)
{
  unsigned t = tm_chunk_tier(c);
  uint32_t old = atomic_fetch_sub_explicit(&c->committed, n, memory_order_relaxed);
  atomic_fetch_sub_explicit(&chunk_bytes[t], n, memory_order_relaxed);
  if (old == n) atomic_fetch_sub_explicit(&chunk_charged[t], 1, memory_order_relaxed);
}

uint64_t tm_chunk_committed(unsigned t)
{
  return t < TIER_MAX_TIERS ? atomic_load_explicit(&chunk_bytes[t], memory_order_relaxed) : 0;
}

uint64_t tm_chunk_charged(unsigned t)
{
  if (t >= TIER_MAX_TIERS) return 0;
  int64_t v = atomic_load_explicit(&chunk_charged[t], memory_order_relaxed);
  return v > 0 ? (uint64_t)v : 0;
}
