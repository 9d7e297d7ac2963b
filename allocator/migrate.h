/*
 * migrate: the mechanism of reclaim, one 2 MiB chunk at a time. Reclaim
 * (reclaim_decide.c) decides which chunks; this moves them and says, from the
 * kernel's own answer, what really happened.
 *
 * A count is never taken on trust: every page is looked up (move_pages with
 * no target) before, and where it is after is the kernel's answer: the
 * status move_pages gives for each page it moved, a lookup for the rest. A
 * page counts as demoted when it was on another tier before and is on the
 * target tier after; a page still elsewhere
 * counts as failed (busy, pinned, or the target full) and its chunk is
 * marked stray, so a later pass moves it again. Pages never touched or
 * swapped out count as neither. Pageout counts the resident pages that
 * mincore no longer finds resident afterwards.
 *
 * The OS primitives are tm_range_os()'s (os.h), so unit tests can watch them.
 */
#ifndef TM_MIGRATE_H
#define TM_MIGRATE_H

#include <stdbool.h>
#include <stdint.h>

#include "chunkmap.h"
#include "topology.h"

typedef struct tm_migrate_counts_s {
  uint64_t moved;    /* bytes of pages found on the target afterwards that were not before */
  uint64_t failed;   /* bytes of present pages left off the target */
  uint64_t asked;    /* pageout: bytes of the resident pages it was asked to page out */
} tm_migrate_counts_t;

void tm_migrate_init(const tm_topology_t *topo);

/* Moves the pages of chunk c to tier `to` and makes `to` its current tier
 * (tier_of, the budgets' charge): binds the chunk there (os bind), moves its
 * pages to the tier's first node (os push), and by policy (os move) any that
 * could not go there. Holds the chunk meanwhile (tm_chunk_hold),
 * so nothing places, empties or frees it under the move; threads go on
 * reading and writing its memory. Adds to *out. Returns 0; EBUSY when the
 * chunk is empty or held (nothing done); another positive errno when the
 * kernel refused the move (nothing moved, the chunk stays where it was). */
int tm_migrate_chunk(tm_chunk_t *c, unsigned to, tm_migrate_counts_t *out);

/* Moves the pages of chunk c's pieces in `pieces` (bit i: piece i, as in
 * chunkmap.h) that are on another tier to tier 0, one move_pages call,
 * leaving the chunk's tier and policy as they are; the pieces with a page
 * moved are up (tm_chunk_shift, with the bytes moved). Adds to *out.
 * Returns 0; EBUSY when the chunk is empty or held; another positive errno
 * when the kernel refused (nothing moved). */
int tm_migrate_pieces(tm_chunk_t *c, uint32_t pieces, tm_migrate_counts_t *out);

/* Makes the non-empty chunk c one VMA per piece, its pages staying where
 * they are (tm_os_t.pieces), so the accessed bits are read per piece; or
 * back one VMA (merge). 0; EBUSY when c is held (or, splitting, empty);
 * ENOTSUP when the kernel cannot tell pieces apart. */
int tm_migrate_split(tm_chunk_t *c);
int tm_migrate_merge(tm_chunk_t *c);

/* Hands chunk c to the kernel's NUMA balancing (tm_os_t.hand) on `nodes`,
 * its tier's and every faster tier's, its pages staying where they are, and
 * marks it TM_CHUNK_HANDED (any later bind of the chunk's clears it: a move,
 * its emptying). With `scan` false, a handed chunk is bound on the same
 * nodes without the kernel's scanning (held: still TM_CHUNK_HANDED). 0;
 * EBUSY when c is held or empty; ENOTSUP without the op; the kernel's errno
 * when it refused. */
int tm_migrate_hand(tm_chunk_t *c, const tm_nodemask_t *nodes, bool scan);

/* The pages of a chunk, one bit each (bit i of word i / 64: page i). */
#define TM_MIGRATE_PAGE_WORDS (TM_CHUNK_SIZE / 4096 / 64)
typedef struct tm_migrate_pages_s {
  uint64_t w[TM_MIGRATE_PAGE_WORDS];
} tm_migrate_pages_t;

/* The pages of chunk c that are on tier `on` into *out (one lookup of the
 * chunk's pages). 0; EBUSY when c is empty or held; another positive errno
 * when the lookup failed. */
int tm_migrate_pages_on(tm_chunk_t *c, unsigned on, tm_migrate_pages_t *out);

/* Moves the pages of chunk c in *pages, on tier `from` (as
 * tm_migrate_pages_on found them), to c's own tier (its first node), as
 * tm_migrate_chunk's push does, leaving the chunk's tier and policy as
 * they are (a handed chunk stays handed: its pages the kernel promoted,
 * given back one by one). *pages keeps those found on c's tier after.
 * moved: their bytes; failed: the others present. 0; EBUSY when c is empty
 * or held, ENOTSUP without a push (*pages empty then). */
int tm_migrate_give_back(tm_chunk_t *c, unsigned from, tm_migrate_pages_t *pages, tm_migrate_counts_t *out);

/* The tier of each of the n pages at pages[i] into tier[i] (-1: not there,
 * or on a node of no tier). 0 or a positive errno. */
int tm_migrate_where(void *const *pages, int n, int8_t *tier);

/* Pages out the resident pages of chunk c (MADV_PAGEOUT), its pieces' too
 * (their record is dropped). moved: bytes no longer resident afterwards
 * (mincore). Pages still resident are not
 * counted at all: mincore cannot tell a page the kernel refused from one
 * written to swap and still in the swap cache. Returns 0 or a positive
 * errno. */
int tm_migrate_pageout(tm_chunk_t *c, tm_migrate_counts_t *out);

/* Resident bytes of chunk c (mincore); 0 when it cannot tell. */
uint64_t tm_migrate_resident(tm_chunk_t *c);

/* The most chunks tm_migrate_resident_run measures in one call. */
#define TM_MIGRATE_RUN 16u

/* Resident bytes of each of the n <= TM_MIGRATE_RUN consecutive chunks from
 * c (one chunk map range) into out[0..n-1], with one mincore: a pass
 * measures the whole heap, and one system call per chunk was most of its
 * cost. All 0 when it cannot tell. */
void tm_migrate_resident_run(tm_chunk_t *c, unsigned n, uint64_t *out);

#endif
