/*
 * hotness: which chunks reclaim calls cold, from one of these sources
 * (TIERMALLOC_HOTNESS; the stats name it, tier_stats_t.cold_signal):
 *
 *   accessed    the accessed bits of each chunk's pages: every
 *               HOTNESS_INTERVAL_MS the reclaim thread reads each VMA's
 *               Referenced: in /proc/self/smaps and clears the bits with
 *               /proc/self/clear_refs; a chunk with a page accessed since is
 *               young. It sees reads as well as writes. The kernel reports
 *               per VMA, so each chunk is made a VMA of its own as it is
 *               placed (os.h, tm_os_split_chunks), up to a quarter of
 *               vm.max_map_count; chunks beyond that keep the commit age.
 *               Clearing the bits does not flush the TLB on x86, and a hot
 *               page whose translation stays cached would not be seen again
 *               (bench/results/hotness.md: recall 0.5-0.8 natively), so "4"
 *               follows "1": the soft-dirty clear flushes the process's TLB,
 *               at the cost of one write fault per page written in the next
 *               interval. Both clears are process-wide: the kernel's own
 *               view of the process's accessed pages restarts with them.
 *               Under a heavy load every chunk is used within an interval,
 *               and all look alike; with HOTNESS_WINDOW_MS the bits are
 *               cleared and read that much later (the reclaim thread wakes
 *               for it: tm_hotness_read_due), so only the chunks used within
 *               the window are young.
 *   commit-age  the time since the allocator last committed memory in the
 *               chunk (jemalloc handed it out fresh, or reused it after
 *               giving its pages back). It sees allocation, not access: long-
 *               lived data read all the time looks as cold as data nobody
 *               reads. The generational rule behind it holds for most heaps.
 *   off         none: every chunk is as cold as any other (lowest address
 *               first).
 * auto: accessed where /proc/self/clear_refs can be written and smaps read,
 * else commit-age. With either source, a chunk's commit makes it young, and
 * so does a chunk reclaim paged out whose pages came back (reclaim_measure.c).
 *
 * Times are in units of TM_HOTNESS_TICK_MS, kept in 16 bits: ages beyond
 * TM_HOTNESS_AGE_MAX ticks (about 55 minutes) are all equally old.
 */
#ifndef TM_HOTNESS_H
#define TM_HOTNESS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "chunkmap.h"

#define TM_HOTNESS_TICK_MS 100
#define TM_HOTNESS_AGE_MAX 32767u

/* The clock chunks are stamped with; the reclaim thread advances it. */
extern _Atomic uint16_t tm_hotness_now;

/* The allocator used c (committed memory in it): it is young again. Slow
 * path only (extent hooks): one relaxed store. */
static inline void tm_hotness_touch(tm_chunk_t *c)
{
  atomic_store_explicit(&c->age, atomic_load_explicit(&tm_hotness_now, memory_order_relaxed),
                        memory_order_relaxed);
}

/* The program said c is cold (tier_hint): as old as can be, till its next
 * use. */
static inline void tm_hotness_chill(tm_chunk_t *c)
{
  atomic_store_explicit(&c->age,
                        (uint16_t)(atomic_load_explicit(&tm_hotness_now, memory_order_relaxed) -
                                   TM_HOTNESS_AGE_MAX),
                        memory_order_relaxed);
}

/* Advances the clock to now (the reclaim thread, each pass). */
void tm_hotness_tick(void);

/* How cold c is: its age in ticks, 0..TM_HOTNESS_AGE_MAX (larger is colder).
 * Keeps very old stamps from wrapping around to look young. */
unsigned tm_hotness_age(tm_chunk_t *c);

/* With the accessed bits only (false otherwise): c had a page accessed in
 * the last interval (hot), or in none of the last TM_HOTNESS_COLD_SCANS
 * intervals, the bits having been read at least that often (cold). What promotion and exchange go by: the commit age cannot
 * tell hot from merely new. */
#define TM_HOTNESS_COLD_SCANS 2u
bool tm_hotness_hot(tm_chunk_t *c);

/* Hot, and seen at each of the last two reads of the bits: what promotion
 * takes. Data written once (a fill) was seen at one read only. */
bool tm_hotness_steady(tm_chunk_t *c);

/* How hot c is, 0..TM_HOTNESS_HEAT_MAX: with the accessed bits, the share
 * of its resident pages they saw at each read (smaps' Referenced: against
 * Rss), averaged with the reads before (each read weighs half), so a chunk
 * whose every page the program uses outranks one it uses a corner of;
 * 0 for a cold chunk and for any other source. What orders chunks the bits
 * all saw: under a load that uses every chunk within an interval the
 * binary signal calls them all hot. */
#define TM_HOTNESS_HEAT_MAX 127u
#define TM_HOTNESS_HEAT_HUGE 0x80u   /* in tm_chunk_t.heat: huge pages at the last read */
unsigned tm_hotness_heat(tm_chunk_t *c);

/* c's heat grades it: it was in 4 KiB pages at the last read of the bits.
 * A huge page has one accessed bit, so a chunk in one is all seen or not
 * (in bench/tier-quality, any chunk used at all, at a heat no graded chunk
 * reaches); its heat says how often it was seen over the reads (with a
 * short HOTNESS_WINDOW_MS, how often it was used within the window), not
 * how much of it: it compares with the heat of another chunk in huge pages,
 * not with a graded one's. */
bool tm_hotness_graded(tm_chunk_t *c);

/* The accessed bits were read at a scan later than the clock's `tick`
 * (always true when they are not the source: nothing to wait for). */
bool tm_hotness_read_after(uint16_t tick);
bool tm_hotness_cold(tm_chunk_t *c);

/* Ticks since reclaim last moved c (promotion's cool-down; UINT16_MAX when
 * never; the 16-bit clock wraps after about 109 minutes). */
unsigned tm_hotness_since_moved(tm_chunk_t *c);
void tm_hotness_moved(tm_chunk_t *c);

/* The name of the source in use, for stats ("accessed bits", "commit age",
 * "none"). */
const char *tm_hotness_signal(void);

/* Reads TIERMALLOC_HOTNESS and chooses the source; root: where /proc is read
 * ("" for the running process, or a test's tree). max_split: chunks that may
 * be given a VMA of their own. Start-up (reclaim.c's init), and again in
 * tests. */
void tm_hotness_init(const char *root, uint64_t max_split);

/* Reclaim can act (some budget is finite): only then are chunks given VMAs
 * of their own for the accessed bits, so a program without budgets pays
 * nothing for them. Reclaim says so at start-up and when the budgets change;
 * chunks placed before keep the commit age till placed again. */
void tm_hotness_track(bool on);

/* The accessed bits are the source, hotness is tracked now, and the bits
 * were read or cleared once (a reclaim thread scans them). */
bool tm_hotness_tracking(void);

/* Placement, binding c as it places it: true when c should be bound even on
 * its own range's tier, so it becomes a VMA of its own (the accessed source,
 * while tracking), once per chunk and while fewer than max_split chunks
 * are. */
bool tm_hotness_split(tm_chunk_t *c);

/* Pieces (chunkmap.h): reclaim asks for the bits of up to
 * TM_HOTNESS_SAMPLE_MAX chunks a read per 64 KiB piece
 * (TIERMALLOC_HOTNESS_PIECES). tm_hotness_scan makes each such chunk one
 * VMA per piece just before it clears the bits (tm_migrate_split), and one
 * VMA again just after it reads them (tm_migrate_merge): the VMAs come back
 * to what they were, and the chunk's heat sums its pieces'. false: not
 * taken (no pieces, the sample full, or c not a VMA of its own). */
#define TM_HOTNESS_SAMPLE_MAX 32u
bool tm_hotness_sample(tm_chunk_t *c);

/* What the last read saw of the chunks read per piece: up to max of them
 * into c[], and into seen[] which of their pieces had a page accessed
 * (bit i: piece i). Returns how many. */
unsigned tm_hotness_pieces_seen(tm_chunk_t **c, uint32_t *seen, unsigned max);

/* Chunks may be read per piece (the accessed bits, TIERMALLOC_HOTNESS_PIECES
 * not 0, and the kernel can tell pieces apart). */
bool tm_hotness_pieces_on(void);

/* Chunks wait to be read per piece: asked for, or split and not read yet. */
bool tm_hotness_pieces_pending(void);

/* How soon tm_hotness_scan reads the bits again. */
typedef enum tm_scan_pace_e {
  TM_SCAN_DUE = 0,   /* once an interval */
  TM_SCAN_BUSY,      /* the pass had a limit to bring back: the scan (a walk of the
                        whole process's page tables) waits up to a second interval,
                        so it does not delay the next pass */
  TM_SCAN_SOON,      /* demotion waits for a read: TM_HOTNESS_SOON_MS after the last */
} tm_scan_pace_t;
#define TM_HOTNESS_SOON_MS 100

/* The reclaim thread, after each full pass: with the accessed source, at
 * `pace`, makes every chunk with a page accessed since the last scan young
 * and clears the bits again; with a window, clears them, and reads them at
 * the first call after the window's end (tm_hotness_read_due). A source that
 * fails (clear_refs refused, smaps without Referenced:) is said once and
 * replaced by the commit age. Returns true when it read the bits, or first
 * cleared them without a window. */
bool tm_hotness_scan(tm_scan_pace_t pace);

/* When the reclaim thread wakes for the bits (CLOCK_MONOTONIC, ns), between
 * its passes: with a window open, its end; while chunks wait to be read per
 * piece, the next scan at TM_SCAN_DUE, so each read comes on time without
 * passes at the shortest period meanwhile. 0: neither. */
uint64_t tm_hotness_read_due(void);

#endif
