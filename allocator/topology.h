/*
 * topology: NUMA nodes -> tiers.
 *
 * Discovery order, first that applies wins:
 *   1. TIERMALLOC_TIERS (the `override` argument), e.g. "0,1;2;3" or "0-1;2":
 *      tier i is the i-th ';'-separated nodelist. A bad spec gets one warning
 *      and discovery goes on as if it were unset.
 *   2. The kernel's memory tiers (<root>/sys/devices/virtual/memory_tiering/
 *      memory_tierN/nodelist), ordered by N (lower N is faster), when the
 *      kernel formed more than one tier among the allowed nodes.
 *   3. Fallback (one kernel tier, or no memory_tiering directory): nodes with
 *      CPUs are tier 0, CPU-less nodes are tier 1.
 * Only nodes that have memory (<root>/sys/devices/system/node/has_memory) and
 * that the process may use (Mems_allowed in <root>/proc/self/status) are
 * placed in tiers; a missing file means "no restriction". No sysfs at all
 * gives one tier holding node 0. More than TIER_MAX_TIERS tiers are folded
 * into the last one.
 *
 * root is "" for the running system, or a fixture tree that mirrors absolute
 * paths. Never allocates (it runs while malloc initialises); reads files into
 * stack buffers.
 */
#ifndef TM_TOPOLOGY_H
#define TM_TOPOLOGY_H

#include <stdint.h>

#include "nodemask.h"
#include "tiermalloc.h"


typedef enum tm_topology_source_e {
  TM_TOPO_OVERRIDE,      /* TIERMALLOC_TIERS */
  TM_TOPO_KERNEL_TIERS,  /* memory_tiering in sysfs */
  TM_TOPO_CPU_FALLBACK,  /* one kernel tier: CPU nodes on top, CPU-less below */
  TM_TOPO_SINGLE,        /* nothing to read: one tier of node 0 */
} tm_topology_source_t;

typedef struct tm_tier_s {
  tm_nodemask_t nodes;
  int nnodes;
  int first_node;        /* lowest node id in the tier (mempolicy fallbacks) */
  uint64_t capacity;     /* sum of MemTotal of the nodes, bytes (0 if unknown) */
  int kernel_tier;       /* memory_tierN's N, or -1 when not from the kernel */
} tm_tier_t;

typedef struct tm_topology_s {
  int ntiers;            /* >= 1 */
  tm_topology_source_t source;
  tm_tier_t tier[TIER_MAX_TIERS];
  int8_t node_tier[TIER_MAX_NODES];  /* tier of each node, -1 when none */
} tm_topology_t;

/* Fills *t. Always leaves a usable topology (at least one tier); returns 0,
 * or a positive errno when it had to fall back to TM_TOPO_SINGLE. */
int tm_topology_discover(tm_topology_t *t, const char *root, const char *override);

/* Human name of a source, e.g. "kernel memory tiers". */
const char *tm_topology_source_name(tm_topology_source_t s);

#endif
