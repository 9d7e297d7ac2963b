/*
 * os: the kernel primitives the tier ranges use, behind one ops table so a
 * unit test can wrap them in a recording pass-through double.
 *
 * Each returns 0 on success or a positive errno (the error convention of
 * include/tiermalloc.h); none allocates or prints.
 */
#ifndef TM_OS_H
#define TM_OS_H

#include <stdbool.h>
#include <stddef.h>

#include "topology.h"

/* The 2 MiB block the layers above work in (chunkmap.h's chunk): os.c tells
 * a chunk's bind by its size and parity. */
#define TM_OS_CHUNK_SHIFT 21
/* The 64 KiB piece of a chunk that moves on its own (chunkmap.h). */
#define TM_OS_PIECE_SHIFT 16

typedef struct tm_os_s {
  /* Reserves size bytes of address space: PROT_NONE, MAP_NORESERVE, so it
   * costs no memory and no commit charge. *out receives the start. */
  int (*reserve)(size_t size, void **out);
  /* Makes [p, p+size) readable and writable (adjacent RW parts merge into one
   * VMA). Private anonymous pages are zero on first touch. */
  int (*commit)(void *p, size_t size);
  /* Asks the kernel to place future pages of [p, p+size) on `nodes`,
   * preferring them but falling back to other nodes when they are full
   * (MPOL_PREFERRED_MANY; MPOL_PREFERRED on first_node for kernels < 5.15).
   * Pages already present are not moved. */
  int (*bind)(void *p, size_t size, const tm_nodemask_t *nodes, int first_node);
  /* Returns the pages of [p, p+size) to the kernel. lazy: MADV_FREE (the
   * kernel takes them under pressure, contents undefined until then);
   * otherwise MADV_DONTNEED (the next touch reads zero). */
  int (*purge)(void *p, size_t size, int lazy);
  /* Asks for transparent huge pages in [p, p+size) (MADV_HUGEPAGE): the
   * kernel then backs each 2 MiB-aligned block inside it with one huge page
   * when it can, as the system's THP setting allows. */
  int (*huge)(void *p, size_t size);
  /* Binds [p, p+size) to `nodes` as bind does and moves the pages present
   * there that are on other nodes (MPOL_MF_MOVE: pages the process alone
   * maps). Safe while other threads read and write them: the kernel makes
   * them wait for each page it moves. Pages it could not move are left
   * where they were, and the call still returns 0 (where tells). */
  int (*move)(void *p, size_t size, const tm_nodemask_t *nodes, int first_node);
  /* The node of each of the n pages at pages[i] (move_pages with no target):
   * node[i] >= 0, or a negative errno (-ENOENT: no page there, never touched
   * or swapped out). */
  int (*where)(void *const *pages, int n, int *node);
  /* Moves each of the n pages at pages[i] to `node` (move_pages with a
   * target): the kernel allocates there or fails, splitting a huge page it
   * cannot place whole, where a move by policy (move) may take its new page
   * from any node when `nodes` cannot give one at once. status[i]: the node
   * after, or a negative errno, for every page, also when some could not
   * move. May be NULL in a double (not used then). */
  int (*push)(void *const *pages, int n, int node, int *status);
  /* Asks the kernel to page out [p, p+size) now (MADV_PAGEOUT): to swap for
   * anonymous memory, nothing at all when there is no swap. */
  int (*pageout)(void *p, size_t size);
  /* Which pages of [p, p+size) are resident (mincore): vec[i] & 1 for page i;
   * swapped-out pages are not. */
  int (*resident)(void *p, size_t size, unsigned char *vec);
  /* Splits the chunk at p (a VMA of its own: tm_os_split_chunks) into one
   * VMA per 64 KiB piece, each bound to `nodes` as bind does (no page
   * moves), so the kernel reports accessed pages per piece; and its huge
   * page, if any, into 4 KiB pages, with no huge page there again
   * (MADV_NOHUGEPAGE: a piece moves alone). A bind of the whole chunk
   * merges it back into one VMA. ENOTSUP while not splitting chunks or with
   * no marker node. May be NULL in a double (no pieces then). */
  int (*pieces)(void *p, const tm_nodemask_t *nodes, int first_node);
  /* Binds [p, p+size) to `nodes` with MPOL_F_NUMA_BALANCING, moving no page
   * (MPOL_PREFERRED_MANY, else MPOL_BIND: before 6.10 only it takes the
   * flag): the kernel's NUMA balancing may then scan the range and, in its
   * tiering mode, promote a hot page to the node of the CPU that uses it,
   * where that node is in `nodes`; new pages go to the nodes nearest the
   * faulting CPU among them. Every range handed gets the same policy, so
   * neighbours handed merge into one VMA (the reservation's one anon_vma
   * lets them: os_reserve), and is in 4 KiB pages from then on
   * (MADV_NOHUGEPAGE, its huge pages split): the kernel promotes the folio a
   * hint fault lands in. EINVAL where the kernel takes the flag with
   * neither. With `scan` false, the same nodes without the flag, nothing
   * else touched: NUMA balancing neither scans nor promotes the range until
   * it is handed again (reclaim holds the kernel's promotions off while tier
   * 0 is over its limit). May be NULL in a double (never handed then). */
  int (*hand)(void *p, size_t size, const tm_nodemask_t *nodes, bool scan);
} tm_os_t;

/* The real primitives. */
extern const tm_os_t tm_os_linux;

/* While on, each 2 MiB chunk tm_os_linux binds or moves gets a policy the
 * kernel merges neither with the range's nor with its neighbours', so each
 * chunk bound is a VMA of its own: the kernel reports accessed pages per VMA
 * (hotness.h). Chunks get MPOL_F_STATIC_NODES (the same placement; it differs
 * only when the cpuset's allowed nodes change), and even chunks also the
 * marker node in their mask: a node that cannot exist (not in the kernel's
 * possible nodes), which the kernel drops from the placement but keeps in the
 * policy it compares. Without a marker (-1) an even chunk bound to its home
 * tier merges with the unbound chunks around it. Set once at start-up. */
void tm_os_split_chunks(bool on, int marker);

/* Which policies accept MPOL_F_NUMA_BALANCING on this kernel, as
 * balancing.h's TM_BALANCING_* bits: mbind of one page of fresh address
 * space (PROT_NONE, nothing touched, unmapped after) to `node` with each.
 * 0 when the kernel takes neither, or refuses mbind itself (EPERM under a
 * seccomp filter). Start-up, once. */
unsigned tm_os_numa_balancing_policies(int node);

#endif
