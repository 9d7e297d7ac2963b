/*
 * Helpers of the tests that run inside the tiered VM (tests/vm/run).
 *
 * The tests are built into one binary, build/tests/vmtest, linked to
 * libtiermalloc.so. make test-vm boots each topology and runs it there with
 * VMTEST_TOPOLOGY=2tier|3tier|flat|wide, which selects what the tests expect.
 * Every placement claim is checked against the kernel: move_pages(2) with
 * nodes=NULL and /proc/self/numa_maps.
 */
#ifndef VMTEST_H
#define VMTEST_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tiermalloc.h"

#define VM_MAX_NODES 128   /* the wide topology has 66 */
#define VM_MIB (1024ull * 1024)

/* What a topology looks like, as tests/vm/run builds it. */
typedef struct vm_topology_s {
  const char *name;                 /* "2tier", "3tier", "flat" */
  int nnodes;
  const char *kernel_tiers;         /* "N:nodelist ..." in N order, e.g. "4:0 54:1" */
  int ntiers;                       /* what tier_count() must say */
  uint64_t tier_nodes[TIER_MAX_TIERS];  /* node bitmask of each tiermalloc tier */
} vm_topology_t;

/* The topology named by VMTEST_TOPOLOGY; fails the test when it is unset,
 * unknown, or when this is not a guest with that many nodes. */
const vm_topology_t *vm_topology(void);

/* The only node of tier t (the topologies have one node per tier). */
int vm_tier_node(const vm_topology_t *topo, int t);

/* Writes a varied word into every page of [p, p+len) (zram compresses pages
 * of one byte value to nothing, and it makes the pages resident). */
void vm_touch(void *p, size_t len);

/* Pages that [p, p+len) spans (jemalloc need not page-align large objects). */
size_t vm_span_pages(const void *p, size_t len);

/* move_pages(nodes=NULL) over [p, p+len): counts[n] += pages on node n;
 * returns the number of pages that were not present or failed, (size_t)-1
 * when move_pages itself fails. No Criterion calls (child modes use it). */
size_t vm_pages_by_node(const void *p, size_t len, size_t counts[VM_MAX_NODES]);

/* Bytes per node of /proc/<pid>/numa_maps (pid 0: self). With tiered_only,
 * only the mappings that tiermalloc owns (tier_of(start) != TIER_NONE)
 * count; this only means anything for the calling process. Returns 0 or -1. */
int vm_numa_maps_bytes(pid_t pid, int tiered_only, uint64_t bytes[VM_MAX_NODES]);

/* Bytes of transparent huge pages (smaps AnonHugePages) in the mappings
 * tiermalloc owns, in the calling process. Returns 0 or -1. */
int vm_tiered_anon_huge_bytes(uint64_t *huge);

/* Runs argv with the current environment plus `env` (NULL-terminated
 * "NAME=value" strings; they replace variables of the same name), stdout
 * captured into out (NUL-terminated, truncated to size). Returns the exit
 * status, or 128+signal. */
int vm_run(char *const argv[], char *const env[], char *out, size_t size);

/* This test binary itself (for child modes, see vm_child.c) and the library
 * next to it ($ORIGIN/../libtiermalloc.so). */
const char *vm_self(void);
const char *vm_libtiermalloc(void);

/* Reads a small file into buf (NUL-terminated, trailing newline removed).
 * Returns 0 or -1. */
int vm_read_file(const char *path, char *buf, size_t size);

/* Value of "key":<number> after `from` in a JSON text; -1 when absent. */
long long vm_json_num(const char *from, const char *key);

/* What tier 0 may hold under TIERMALLOC_TOPTIER_MAX=16M: the budget leaves
 * out the start-up metadata (allocator/policy.h), one 2 MiB base block for
 * the first thread's arena and one for the pinned tier-0 arena; arenas that
 * later threads bring in are charged to the budget. */
#define VM_BUDGET_16M_TIER0 ((16ull + 2 * 2) * VM_MIB)

#endif
