/*
 * balancing: the kernel's NUMA balancing as it bears on the heap. Its mode
 * (kernel.numa_balancing: 0 off, 1 normal, 2 tiering: hot pages of CPU-less
 * nodes are promoted, 3 both), its promotion rate limit, whether the kernel
 * demotes on reclaim, and which memory policies accept
 * MPOL_F_NUMA_BALANCING (a range bound with it may be scanned by NUMA
 * balancing, and its pages promoted within the policy's nodes: MPOL_BIND
 * from 5.12, MPOL_PREFERRED_MANY from 6.10; probed, not guessed from the
 * version). tiermalloc's chunks are bound with MPOL_PREFERRED_MANY (or
 * MPOL_PREFERRED) without the flag, so NUMA balancing never scans the heap,
 * whatever the mode, unless TIERMALLOC_NUMA_BALANCING=tiering has reclaim
 * hand its chunks below tier 0 over (reclaim_decide.c, reclaim_move.c).
 * Reads files under a root ("" or a fixture tree); never allocates.
 */
#ifndef TM_BALANCING_H
#define TM_BALANCING_H

#include <stddef.h>
#include <stdint.h>

#include "topology.h"

/* Policies that accept MPOL_F_NUMA_BALANCING (tm_balancing_t.flag_policies). */
#define TM_BALANCING_BIND           1u
#define TM_BALANCING_PREFERRED_MANY 2u

typedef struct tm_balancing_s {
  int mode;                 /* 0-3; -1: no such sysctl (a kernel without NUMA balancing) */
  uint64_t promote_mbps;    /* numa_balancing_promote_rate_limit_MBps; 0: not there */
  int demotion;             /* /sys/kernel/mm/numa/demotion_enabled: 1, 0, or -1 not there */
  unsigned flag_policies;   /* TM_BALANCING_*, as the caller probed them */
  int apart;                /* tm_balancing_tiers_apart */
} tm_balancing_t;

/* The mode now (kernel.numa_balancing under root): 0-3, or -1 when the file
 * is not there or holds no number. One read of a small file. */
int tm_balancing_mode(const char *root);

/* tm_balancing_mode("") read again at most once a second (a snapshot, which
 * the library's thread takes every interval, costs a relaxed load). */
int tm_balancing_mode_now(void);

/* Whether the kernel's tiering mode can promote from tiermalloc's tiers
 * below the top. It scans and promotes only pages on nodes it ranks below
 * its top tier (the memory tier of the nodes with CPUs, and any faster one:
 * node_is_toptier). 1: topo is the kernel's memory tiers, so it ranks them
 * apart; 0: the kernel put every node in one memory tier (6.1, which ignores
 * HMAT; 6.12 on nodes it has no performance data for) and tiermalloc
 * guessed the tiers from the CPUs, or there is one tier: the tiering mode
 * promotes nothing to tier 0; -1: tiers named by TIERMALLOC_TIERS, not
 * compared with the kernel's. */
int tm_balancing_tiers_apart(const tm_topology_t *topo);

/* /sys/kernel/mm/numa/demotion_enabled under root: 1 the kernel's reclaim
 * demotes a node's pages to the next memory tier down instead of freeing
 * them, 0 it does not, -1 no such file. One read of a small file. */
int tm_balancing_demotion(const char *root);

/* Fills *out from the files under root and topo; flag_policies as given
 * (the probe is the OS layer's: tm_os_numa_balancing_policies). */
void tm_balancing_read(const char *root, unsigned flag_policies, const tm_topology_t *topo, tm_balancing_t *out);

/* "off", "normal", "tiering", "normal and tiering", "none" (-1). */
const char *tm_balancing_mode_name(int mode);

/* "preferred-many and bind", "bind", "none". */
const char *tm_balancing_policies_name(unsigned flag_policies);

/* One sentence for people: what NUMA balancing does for the heap in this
 * mode, and what tiering mode would give with this kernel. Returns buf. */
const char *tm_balancing_explain(const tm_balancing_t *b, char *buf, size_t size);

#endif
