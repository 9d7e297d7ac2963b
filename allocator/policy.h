/*
 * policy: which tier a new extent goes to.
 *
 * The seam the budgets plug into. Today: an extent goes to the preferred
 * tier while that tier's budget (max) has room for it, else to the next tier
 * down, and as a last resort to any tier with address space left. The only
 * budget today is TIERMALLOC_TOPTIER_MAX on tier 0; lower tiers are
 * unlimited. Counted in mapped bytes (less the start-up metadata, see
 * tm_policy_baseline): the hooks know them exactly, and resident <= mapped,
 * so a budget in mapped bytes is never exceeded in pages.
 * Called from extent hooks only (slow path).
 */
#ifndef TM_POLICY_H
#define TM_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "topology.h"

/* Sets the budgets from the options and the topology. */
void tm_policy_init(const tm_topology_t *topo);

/* Carves an extent for an arena that prefers tier `pref`; pinned arenas
 * (tier_malloc) take only `pref`. Returns the memory or NULL. */
void *tm_policy_carve(unsigned pref, int pinned, size_t size, size_t align);

/* Takes what the tiers hold now (the arenas' start-up metadata: one 2 MiB
 * base block per arena, nearly untouched) out of the budgets, so they bound
 * the program's data, not the allocator's empty reservations. */
void tm_policy_baseline(void);

/* The max budget of tier t in bytes (UINT64_MAX: unlimited). */
uint64_t tm_policy_max(unsigned t);

#endif
