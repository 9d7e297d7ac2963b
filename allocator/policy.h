/*
 * policy: which tier new memory goes to, chunk by chunk.
 *
 * Two decisions, both on the allocator's slow path (extent hooks):
 *   - carve: which range a new extent's address space comes from (its home
 *     tier): the first tier from the arena's preferred one down whose budget
 *     has room for a chunk, else the lowest tier with address space left;
 *   - commit: which tier each chunk's pages go to, when the chunk gets its
 *     first committed byte (a new extent, or one jemalloc reuses after giving
 *     its pages back): again the first tier from the preferred one down with
 *     room in its budget (tm_budget_placement_limit: the lower of high and
 *     max), else the lowest tier. A chunk whose choice is not its current
 *     tier is bound to the chosen tier's nodes first (it has no pages then,
 *     so nothing moves). One extent can so span two tiers, and a tier fills
 *     its budget to within one chunk and never past it. Nothing throttles and
 *     nothing fails for a budget.
 * Budgets are counted in charged chunks (chunkmap.h), a live figure: a budget
 * recovers as jemalloc gives memory back. The arenas' start-up metadata is
 * taken out (tm_policy_baseline). tier_malloc's pinned arenas take whole
 * chunks of their own tier, whatever its budget.
 */
#ifndef TM_POLICY_H
#define TM_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "topology.h"

/* Remembers the topology; the budgets are budget.c's (tm_budget_init). */
void tm_policy_init(const tm_topology_t *topo);

/* Carves an extent's address space (RW, no pages) for an arena that prefers
 * tier `pref`; pinned arenas take only `pref`. With `whole` (pinned and site
 * arenas), in whole chunks, so no other arena's extent shares one. Returns
 * the memory or NULL. Counts nothing as committed. */
void *tm_policy_carve(unsigned pref, int pinned, int whole, size_t size, size_t align);

/* jemalloc commits [p, p+size) (at carve time, or on reuse): counts the bytes
 * and places every chunk that was empty. Memory outside the ranges is
 * ignored. */
void tm_policy_commit(void *p, size_t size, unsigned pref, int pinned);

/* jemalloc decommitted [p, p+size) (its pages were given back). A chunk left
 * with no committed byte gives back all its pages, those of the memory
 * jemalloc never committed too (a transparent huge page faulted in for a
 * neighbour fills the whole 2 MiB). */
void tm_policy_decommit(void *p, size_t size);

/* Takes what the tiers hold now (the arenas' start-up metadata: one 2 MiB
 * base block per arena, nearly untouched) out of the budgets, so they bound
 * the program's data, not the allocator's empty reservations. */
void tm_policy_baseline(void);

/* Bytes tier t holds against its budget: charged chunks less the baseline. */
uint64_t tm_policy_used(unsigned t);

#endif
