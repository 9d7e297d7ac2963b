/*
 * chunkmap: one entry per 2 MiB chunk of the tier ranges, read in O(1) with
 * no lock and no syscall.
 *
 * An address belongs to one range forever: its home tier. The pages of a
 * chunk are bound to one tier at a time: its current tier, which differs from
 * the home tier when placement spilled the chunk to another tier, and later
 * when reclaim moves it. tier_of() reads the current tier. Each entry also
 * counts the bytes of the chunk that jemalloc holds committed (handed out or
 * cached for reuse, as opposed to decommitted: the pages given back), and
 * has room for what reclaim and hotness will keep (flags, age).
 *
 * Per tier (current), the map keeps two live figures, both of which shrink
 * when memory is given back: committed bytes, the figure budgets are checked
 * in, and charged chunks (chunks with any committed byte). A chunk is placed
 * on a tier only while the tier's committed bytes and a whole chunk fit in
 * its budget, so a tier filled in order never passes it; commits into a
 * chunk placed earlier are not checked (they cannot go elsewhere), and
 * reclaim takes back what they put over. Counting whole chunks instead left a heap of 1 MiB blocks
 * at 93-96 % of its budget in pages: each of jemalloc's grown regions ends in
 * a chunk it only half uses.
 */
#ifndef TM_CHUNKMAP_H
#define TM_CHUNKMAP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "range.h"

#define TM_CHUNK_SHIFT TM_OS_CHUNK_SHIFT
#define TM_CHUNK_SIZE ((uintptr_t)1 << TM_CHUNK_SHIFT)

typedef struct tm_chunk_s {
  _Atomic uint32_t committed;  /* bytes of the chunk committed (top bit: being placed or emptied) */
  _Atomic uint16_t flags;      /* reserved for reclaim and hotness */
  _Atomic uint16_t age;        /* hotness.h: when the chunk was last used, as it defines use */
  _Atomic uint16_t moved;      /* hotness clock when reclaim last moved it up or down */
  _Atomic uint8_t tier;        /* current tier + 1; 0: its home tier (never rebound) */
  _Atomic uint8_t site;        /* k + 1 of site arena k, whose chunk it is (site.h); 0: none */
  _Atomic uint8_t heat;        /* hotness.h: the share of its pages the accessed bits see, and a bit */
} tm_chunk_t;

/* Bits of tm_chunk_t.flags. */
#define TM_CHUNK_STRAY 0x1u   /* some pages are not on the chunk's current tier (migrate.c) */
#define TM_CHUNK_KEEP  0x2u   /* never reclaimed: a pinned arena's, or start-up metadata */
#define TM_CHUNK_PAGED 0x4u   /* reclaim paged it out; pages back since mean it was used */
#define TM_CHUNK_BASE  0x8u   /* start-up metadata: outside the budgets (policy.c) */
#define TM_CHUNK_SPLIT 0x10u  /* bound on its own, a VMA of its own (hotness.h) */
#define TM_CHUNK_PIN   0x20u  /* tier_pin: kept on tier 0 (hint.h) */
#define TM_CHUNK_SEEN  0x40u  /* the accessed bits saw it at their last read (hotness.h) */
#define TM_CHUNK_STEADY 0x80u /* ... and at the read before */
#define TM_CHUNK_HANDED 0x100u /* its policy lets the kernel's NUMA balancing move its pages up
                                  (reclaim_decide.c); every bind of the chunk's ends it */

/* Entries for range i start at tm_chunks + i * tm_chunks_per_range. NULL
 * while the ranges are inactive. */
extern tm_chunk_t *tm_chunks;
extern uintptr_t tm_chunks_per_range;

/* Pieces: a chunk's 64 KiB parts, which reclaim can move up to tier 0 on
 * their own (a hot piece of a chunk on a lower tier: migrate.h,
 * tm_migrate_pieces). A chunk with pieces up keeps its tier, its policy and
 * its one VMA; the record below says which pieces are up and how many of
 * its committed bytes count on tier 0 rather than on the chunk's tier (the
 * bytes of the pages moved): tier_of, the per-tier committed figures (what
 * budgets are checked in) and reclaim's resident figures follow it. A page
 * of an up piece first touched after the move faults on the chunk's tier
 * (its policy), where tier_of still says 0. The record is dropped, its bytes
 * counted back on the chunk's tier, when the chunk moves whole
 * (tm_chunk_move), is paged out or emptied, or any of its bytes is
 * decommitted: the pieces' pages may still be on tier 0 then, which the
 * next whole move puts right. */
#define TM_PIECE_SHIFT TM_OS_PIECE_SHIFT
#define TM_PIECES (1u << (TM_CHUNK_SHIFT - TM_PIECE_SHIFT))

/* Per chunk, parallel to tm_chunks: the up mask (bit i: piece i is on tier
 * 0) in the low 32 bits, the bytes counted on tier 0 above. */
extern _Atomic uint64_t *tm_chunk_pieces;

/* Maps the entries (address space only: MAP_NORESERVE, touched as chunks are
 * used) for the active ranges. 0 or a positive errno (then tier_of falls
 * back to the home tier). */
int tm_chunkmap_init(void);

/* The entry of p's chunk, or NULL outside the ranges. */
static inline tm_chunk_t *tm_chunk_of(const void *p)
{
  unsigned i = tm_range_index(p);
  if (i == TM_RANGE_OTHER || tm_chunks == NULL) return NULL;
  uintptr_t off = (uintptr_t)p - tm_range_lo(i);
  return tm_chunks + i * tm_chunks_per_range + (off >> TM_CHUNK_SHIFT);
}

/* Marks the chunks [p, p+size) touches as site arena `site` - 1's:
 * a site arena's carve, whole chunks that stay its own. */
void tm_chunk_mark_site(const void *p, size_t size, uint8_t site);

/* Home tier of the chunk c. */
unsigned tm_chunk_home(const tm_chunk_t *c);

/* Current tier of the chunk c. */
static inline unsigned tm_chunk_tier(const tm_chunk_t *c)
{
  unsigned t = atomic_load_explicit(&c->tier, memory_order_relaxed);
  return t ? t - 1 : tm_chunk_home(c);
}

/* Pieces of c on tier 0 (bit i: piece i); 0 for most. */
static inline uint32_t tm_chunk_pieces_up(const tm_chunk_t *c)
{
  return (uint32_t)atomic_load_explicit(&tm_chunk_pieces[c - tm_chunks], memory_order_relaxed);
}

/* Bytes of c counted on tier 0 for its pieces up. */
static inline uint32_t tm_chunk_shifted(const tm_chunk_t *c)
{
  return (uint32_t)(atomic_load_explicit(&tm_chunk_pieces[c - tm_chunks], memory_order_relaxed) >> 32);
}

/* Tier of the page at p, in chunk c: its piece's when up, else the chunk's. */
static inline unsigned tm_chunk_tier_at(const tm_chunk_t *c, const void *p)
{
  unsigned piece = (unsigned)(((uintptr_t)p & (TM_CHUNK_SIZE - 1)) >> TM_PIECE_SHIFT);
  return tm_chunk_pieces_up(c) >> piece & 1 ? 0 : tm_chunk_tier(c);
}

/* First address of the chunk c. */
uintptr_t tm_chunk_addr(const tm_chunk_t *c);

/* Adds n committed bytes to c. true: the chunk was empty, and the caller
 * must choose its tier, reserve its charge there (tm_chunk_reserve) and call
 * tm_chunk_place; other threads committing into the chunk wait until it
 * does. */
bool tm_chunk_commit_bytes(tm_chunk_t *c, uint32_t n);

/* Reserves the charge of a chunk about to be placed on tier t with its first
 * n committed bytes, if t's committed bytes and a whole chunk are at most
 * `limit` (atomically: concurrent reservations never pass it). */
bool tm_chunk_reserve(unsigned t, uint32_t n, uint64_t limit);
/* Gives back a reservation that was not used. */
void tm_chunk_unreserve(unsigned t, uint32_t n);
/* Makes t the current tier of the now non-empty chunk c, whose charge (and
 * first committed bytes) the caller reserved on t. */
void tm_chunk_place(tm_chunk_t *c, unsigned t);
/* Takes n committed bytes off c (and its tier). true: that emptied the
 * chunk, which is uncharged and held: the caller gives back every page of it
 * (an empty chunk has none: a huge page faulted in by a neighbour, or memory
 * jemalloc never committed, would otherwise stay resident for good) and then
 * calls tm_chunk_emptied; threads committing into it wait until then. */
bool tm_chunk_decommit_bytes(tm_chunk_t *c, uint32_t n);
void tm_chunk_emptied(tm_chunk_t *c);

/* Reclaim's hold on a chunk it moves. true: c had committed bytes and is now
 * held (marked busy): its count, tier and charge change only through
 * tm_chunk_move until tm_chunk_release, and threads committing into it or
 * decommitting from it wait (one mbind of 2 MiB). false: c is empty, or
 * another thread holds it; nothing was taken. */
bool tm_chunk_hold(tm_chunk_t *c);
/* The same, empty or not (nothing places it meanwhile): to bind a chunk's
 * policy without a move. */
bool tm_chunk_hold_idle(tm_chunk_t *c);

/* The held chunk c, on a tier below 0, has `pieces` up too now, and
 * `bytes` more of its committed bytes count on tier 0 (at most what it
 * has committed, all pieces together). */
void tm_chunk_shift(tm_chunk_t *c, uint32_t pieces, uint32_t bytes);
/* Drops c's pieces record (chunkmap.h above); safe without a hold. */
void tm_chunk_unshift(tm_chunk_t *c);

/* Makes `to` the current tier of the held chunk c, moving its committed
 * bytes and its charge there (the caller bound its pages there), its
 * pieces' too. */
void tm_chunk_move(tm_chunk_t *c, unsigned to);
void tm_chunk_release(tm_chunk_t *c);

/* Committed bytes of c now (0: empty). */
uint32_t tm_chunk_bytes(const tm_chunk_t *c);

/* Fork handlers (fork.c): no chunk is being placed or emptied across a fork. */
void tm_chunkmap_prefork(void);
void tm_chunkmap_postfork_parent(void);
void tm_chunkmap_postfork_child(void);

/* Live figures of tier t (current tier). */
uint64_t tm_chunk_committed(unsigned t);   /* bytes */
uint64_t tm_chunk_charged(unsigned t);     /* chunks */

#endif
