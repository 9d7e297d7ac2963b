#include "liverec.h"

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>

#include "resident.h"
#include "topology.h"

void tm_liverec_write(tier_live_t *r, const tier_stats_t *s, uint32_t publisher,
                      uint64_t published_ns, uint64_t resident_ns, uint64_t interval_ns)
{
  _Atomic uint64_t *seq = (_Atomic uint64_t *)&r->seq;
  uint64_t q = atomic_load_explicit(seq, memory_order_relaxed);
  atomic_store_explicit(seq, q + 1, memory_order_relaxed);
  atomic_thread_fence(memory_order_release);
  r->publisher = publisher;
  r->published_ns = published_ns;
  r->resident_ns = resident_ns;
  r->interval_ns = interval_ns;
  memcpy(&r->stats, s, sizeof *s);
  atomic_store_explicit(seq, q + 2, memory_order_release);
}

int tm_liverec_read(const volatile tier_live_t *r, uint64_t size, tier_live_t *out, unsigned tries)
{
  if (size < sizeof *out) return EPROTO;
  const _Atomic uint64_t *seq = (const _Atomic uint64_t *)&r->seq;
  for (unsigned k = 0; k < tries; k++) {
    uint64_t q0 = atomic_load_explicit(seq, memory_order_acquire);
    if (q0 & 1) {
      sched_yield();
      continue;
    }
    /* A copy racing the writer is thrown away below; it never tears a
     * copy we keep. */
    for (size_t i = 0; i < sizeof *out; i++) ((char *)out)[i] = ((const volatile char *)r)[i];
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(seq, memory_order_relaxed) != q0) continue;
    if (out->magic != TIER_LIVE_MAGIC || out->version != TIER_LIVE_VERSION || out->size < sizeof *out)
      return EPROTO;
    return 0;
  }
  return EAGAIN;
}

int tm_liverec_measure(tier_live_t *r, const char *numa_maps)
{
  if (r->range_end <= r->range_base) return ERANGE;
  tm_topology_t topo;
  memset(&topo, 0, sizeof topo);
  memset(topo.node_tier, -1, sizeof topo.node_tier);
  unsigned ntiers = r->stats.ntiers < TIER_MAX_TIERS ? r->stats.ntiers : TIER_MAX_TIERS;
  topo.ntiers = (int)ntiers;
  for (unsigned t = 0; t < ntiers; t++)
    for (int n = 0; n < TIER_MAX_NODES; n++)
      if (topo.node_tier[n] < 0 && tm_nodemask_test((const tm_nodemask_t *)r->stats.tier[t].nodes, n))
        topo.node_tier[n] = (int8_t)t;
  tm_resident_t res;
  int err = tm_resident_measure(numa_maps, &topo, (uintptr_t)r->range_base, (uintptr_t)r->range_end, &res);
  if (err != 0) return err;
  for (unsigned t = 0; t < TIER_MAX_TIERS; t++) r->stats.tier[t].resident = t < ntiers ? res.tier[t] : 0;
  r->stats.resident_other = res.other;
  return 0;
}

uint64_t tm_liverec_pid_ns(void)
{
  struct stat st;
  return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}
