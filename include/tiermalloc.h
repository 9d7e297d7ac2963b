/*
 * tiermalloc: a malloc that places memory on tiers (DRAM, CXL, HBM...).
 *
 * The one public header. A program gets tiermalloc either by linking
 * -ltiermalloc or by LD_PRELOAD=libtiermalloc.so; in both cases malloc, free
 * and the rest of the C and C++ allocation entry points are tiermalloc's, and
 * the tier_* functions below are available.
 *
 * Error convention (every tier_* function follows it):
 *   - functions that return a pointer return NULL on failure and set errno,
 *     exactly as malloc does (ENOMEM: no memory, EINVAL: bad argument);
 *   - functions that return int return 0 on success or a positive errno value
 *     on failure, as pthread functions do; they do not touch errno;
 *   - tier_of and tier_count never fail: tier_of returns TIER_NONE for memory
 *     that tiermalloc does not place.
 *   - nothing aborts and nothing prints, except tier_stats_print to its writer.
 */
#ifndef TIERMALLOC_H
#define TIERMALLOC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TIER_MAX_TIERS 8        /* tiers above this are folded into the last */
#define TIER_MAX_NODES 1024     /* Linux's largest NODES_SHIFT is 10 */
#define TIER_NONE (-1)          /* tier_of: not memory that tiermalloc placed */

/* Number of tiers, at least 1. Tier 0 is the top (fastest). */
int tier_count(void);

/* The tier p's pages are bound to now, or TIER_NONE. O(1), no syscall, no
 * lock: it reads the entry of p's 2 MiB chunk. That is the tier tiermalloc
 * asked the kernel to put the pages on (its current tier), which can differ
 * from the tier whose address range holds p (its home tier) when the chunk
 * was spilled to another tier; or tier 0 for a 64 KiB piece of the chunk
 * that reclaim moved up on its own (a hot piece of a colder chunk). For a
 * chunk handed to the kernel's NUMA balancing (TIERMALLOC_NUMA_BALANCING=
 * tiering), which moves its pages one by one, the tier p's page is on: one
 * move_pages call. Where the pages actually are is measured by
 * tier_stats_get (resident). */
int tier_of(const void *p);

/* Like malloc, but from arenas pinned to tier `tier` (no fallback to another
 * tier). tier_malloc(0, t) returns a unique pointer. EINVAL for a tier out of
 * range, ENOMEM when the tier's range is exhausted. */
void *tier_malloc(size_t size, int tier);

/* Frees memory from tier_malloc or any tiermalloc entry point; NULL is a no-op. */
void tier_free(void *p);

/* ---- Hints and pins --------------------------------------------------------
 * They act on the 2 MiB chunks the range [p, p+len) touches, which other
 * allocations may share. Each returns 0, or EINVAL for a range tiermalloc
 * does not place (or len 0, or an unknown hint). */
#define TIER_HINT_HOT  1   /* used now: moved down last (and up, with the accessed bits) */
#define TIER_HINT_COLD 2   /* not used: moved down first (chunks wholly inside the range) */
int tier_hint(const void *p, size_t len, int hint);

/* Keeps the range on tier 0: its chunks move there now, and are never moved
 * down nor paged out till tier_unpin. Counted in whole chunks against tier
 * 0's min budget: ENOSPC, and nothing pinned, when the pins would pass it.
 * tier_unpin unpins every chunk the range touches. */
int tier_pin(const void *p, size_t len);
int tier_unpin(const void *p, size_t len);

/* ---- Statistics ----------------------------------------------------------
 * Each field is defined once, here, with its unit; the text, JSON and
 * Prometheus printers, tierctl and the tests walk these lists. Units:
 *   bytes: a level in bytes (JSON key: name_bytes; Prometheus: a gauge,
 *          tiermalloc_[tier_]name_bytes); a reclaim field is a sum since
 *          start-up (tiermalloc_tier_name_bytes_total, a counter);
 *   ns: a duration (JSON: name; Prometheus: a gauge in seconds);
 *   ns_total: a sum of durations since start-up (a counter in seconds);
 *   count: a number now (a gauge); total: a number of events since start-up
 *          (a counter, tiermalloc_name_total).
 * Which tier a figure follows:
 *   home (the address range): mapped, allocated;
 *   current (where the chunk's pages are bound): committed, used;
 *   measured (where the pages are): resident.
 * Summed over the tiers: allocated <= committed <= mapped; resident can pass
 * committed where a huge page backs a chunk's uncommitted part. Per tier, allocated <= mapped; committed and
 * resident differ from the home figures by what was spilled to another tier.
 */
#define TIER_STATS_VERSION 11  /* 11: the kernel's promotions held off; 10: the kernel's demotions undone; 9: tier 0 held by the kernel's
                                  own demotion; 8: pages given back
                                  to hold a budget around NUMA balancing; 7: the kernel's NUMA
                                  balancing; 6: JSON keys carry their unit */
#define TIER_UNLIMITED UINT64_MAX   /* a budget limit that limits nothing */

#define TIER_STATS_TIER_FIELDS(X)                                              \
  X(capacity,  bytes, "memory of the tier's nodes (node meminfo MemTotal)")          \
  X(mapped,    bytes, "address space handed to the allocator from the tier's range (home)") \
  X(committed, bytes, "bytes the allocator holds committed in chunks bound to the tier (current; shrinks as pages are given back)") \
  X(used,      bytes, "what placement checks the tier's budget against: committed bytes, less start-up metadata (current)") \
  X(allocated, bytes, "bytes in live allocations (usable size) on the tier's range (home)") \
  X(resident,  bytes, "bytes of the process's tiered ranges backed by pages on the tier's nodes, measured from /proc/self/numa_maps")

/* The tier's budget (TIER_UNLIMITED: no limit), see tier_stats_tier_t. */
#define TIER_STATS_BUDGET_FIELDS(X)                                            \
  X(min,  bytes, "never demoted below this")                                          \
  X(low,  bytes, "demoted below this only under memory pressure")                     \
  X(high, bytes, "above this new memory goes to the next tier down; reclaim demotes") \
  X(max,  bytes, "never more than this (the lowest tier: resident pages, held by pageout to swap)")

/* What reclaim did to the tier since start-up, in bytes of pages, verified
 * with move_pages (see tier_stats_t's reclaim_* fields). */
#define TIER_STATS_RECLAIM_FIELDS(X)                                           \
  X(demoted,   bytes, "moved from this tier to the next one down (pages found there afterwards)") \
  X(promoted,  bytes, "moved to this tier from the one below, hot by the accessed bits (pages found here afterwards)") \
  X(pageout, bytes, "resident pages of the tier's chunks that MADV_PAGEOUT sent to swap (no longer resident afterwards)") \
  X(failed,    bytes, "pages asked to move down that did not (busy, pinned, no room): retried later")

#define TIER_STATS_GLOBAL_FIELDS(X)                                            \
  X(unplaced_allocated, bytes, "live bytes outside every tier range (jemalloc's start-up memory, or memory mapped once the ranges were full)") \
  X(resident_other,     bytes, "bytes of the tiered ranges on nodes that belong to no tier") \
  X(resident_sample_ns, ns,    "how long the last resident measurement took") \
  X(reclaim_passes,     total, "passes of the reclaim thread over the chunk map")  \
  X(reclaim_cpu_ns,     ns_total,  "CPU time the reclaim thread used (measuring, demoting, paging out)")

/* Allocation-site placement (TIERMALLOC_SITES): after the fields above, so a
 * program built against version 4 still reads those. */
#define TIER_STATS_SITE_FIELDS(X)                                              \
  X(site_samples, total, "allocations sampled for their call site (malloc, calloc, operator new)") \
  X(sites_apart,  count, "call sites whose allocations go to chunks of their own now, on trial or cold (8 at most)") \
  X(sites_cold,   count, "of those, the sites whose memory proved cold: their new memory is placed from tier 1 down") \
  X(sites_tried,  total, "sites put on trial so far (16 at most): one not found cold goes back to the shared chunks")

/* Pages of chunks handed to the kernel's NUMA balancing (numa_balancing_heap)
 * that it promoted and reclaim gave back, one by one, to hold a tier's limit
 * (version 8, after every field of version 7); those the kernel demoted
 * itself when asked (version 9, numa_balancing_demotes); and of those, the
 * demotions undone (version 10); the kernel's promotions held off (version 11). */
#define TIER_STATS_HANDED_FIELDS(X)                                            \
  X(handed_given_back, bytes_total, "pages the kernel's NUMA balancing had promoted, moved back down one by one to hold a tier's limit") \
  X(handed_undone,     bytes_total, "of those, pages the kernel promoted again within 10 s: demotions undone, the mistakes to drive down") \
  X(kernel_demoted,    bytes_total, "pages of tier 0 the kernel's reclaim demoted at reclaim's request (the cgroup's memory.reclaim, demotion_enabled): the kernel's LRU chose them") \
  X(kernel_undone,     bytes_total, "of those, pages the kernel promoted again within 10 s: demotions undone, estimated from a sample of the heap's pages (one in 128)") \
  X(kernel_held,       total,       "times tier 0 went more than half the hysteresis over its high (or over its max) by the kernel's promotions, which were then held off the heap (its chunks bound without MPOL_F_NUMA_BALANCING) until tier 0 was back at its high")

#define TIER_NODE_WORDS (TIER_MAX_NODES / 64)
#define TIER_STATS_SITES 8         /* sites routed to chunks of their own at once, at most */
#define TIER_STATS_SITE_FRAMES 4

/* A call site routed to chunks of its own (TIERMALLOC_SITES). */
typedef struct tier_stats_site_s {
  uint64_t frames[TIER_STATS_SITE_FRAMES]; /* return addresses: [0] the call of malloc, calloc or
                                              operator new, then its callers (libunwind); 0: none */
  uint64_t sampled;                 /* bytes its samples stand for (halved at each read of the bits) */
  uint64_t hot, cold;               /* bytes of its chunks the accessed bits called hot, and cold,
                                       at their last read */
  uint32_t cold_verdict;            /* 1: cold: its new memory is placed from tier 1 down */
  uint32_t reserved_;
} tier_stats_site_t;

/* Where a tier's budget came from (the highest-precedence source of its four
 * limits). */
typedef enum tier_budget_source_e {
  TIER_BUDGET_NONE = 0,   /* no limit set */
  TIER_BUDGET_ENV,        /* TIERMALLOC_TOPTIER_* / TIERMALLOC_TIER<k>_* */
  TIER_BUDGET_KERNEL,     /* the cgroup's memory.toptier_* files */
  TIER_BUDGET_CGROUP_V2,  /* memory.{min,low,high,max} x tier capacity / total */
  TIER_BUDGET_CGROUP_V1,  /* memory.{soft_,}limit_in_bytes x tier capacity / total */
  TIER_BUDGET_RATIO,      /* the cgroup's limits x TIERMALLOC_TOPTIER_RATIO */
} tier_budget_source_t;

/* TIERMALLOC_RECLAIM. */
typedef enum tier_reclaim_mode_e {
  TIER_RECLAIM_OFF = 0,     /* budgets steer new memory only */
  TIER_RECLAIM_ALWAYS,      /* hold the watermarks at all times */
  TIER_RECLAIM_PRESSURE,    /* above high only while the tier's nodes are short of free memory */
} tier_reclaim_mode_t;

/* What the reclaim thread is doing now. */
typedef enum tier_reclaim_state_e {
  TIER_RECLAIM_STOPPED = 0, /* not running (no budget can be crossed, mode off, or no thread) */
  TIER_RECLAIM_IDLE,        /* every tier within its watermarks */
  TIER_RECLAIM_DEMOTING,
  TIER_RECLAIM_PAGING_OUT,
  TIER_RECLAIM_MAX_NOT_HELD, /* a tier is above its max and nothing can bring it back: the lowest
                                tier, with no swap to page out to (budget.max_not_held says which) */
  TIER_RECLAIM_PROMOTING,   /* moving hot chunks up (the accessed bits), nothing over a watermark */
} tier_reclaim_state_t;

typedef struct tier_stats_tier_s {
#define TIER_STATS_FIELD_(name, unit, doc) uint64_t name;
  TIER_STATS_TIER_FIELDS(TIER_STATS_FIELD_)
  uint64_t nodes[TIER_NODE_WORDS];  /* bit n set: NUMA node n is in the tier */
  struct {
    TIER_STATS_BUDGET_FIELDS(TIER_STATS_FIELD_)
    uint32_t source;                /* tier_budget_source_t */
    uint32_t max_not_held;          /* 1: above max, and reclaim cannot bring it back (the lowest
                                       tier with no swap, or TIERMALLOC_RECLAIM_PAGEOUT=off) */
  } budget;
  struct {
    TIER_STATS_RECLAIM_FIELDS(TIER_STATS_FIELD_)
  } reclaim;
} tier_stats_tier_t;

typedef struct tier_stats_s {
  uint32_t version;                 /* TIER_STATS_VERSION */
  uint32_t ntiers;
  TIER_STATS_GLOBAL_FIELDS(TIER_STATS_FIELD_)
  tier_stats_tier_t tier[TIER_MAX_TIERS];
  char cgroup[256];                 /* the process's cgroup ("/app/worker"), "" when none */
  uint32_t reclaim_mode;            /* tier_reclaim_mode_t */
  uint32_t reclaim_state;           /* tier_reclaim_state_t */
  char cold_signal[32];             /* what reclaim calls cold: "accessed bits", "commit age" or "none" */
  uint32_t pageout_available;       /* 1: swap is on, so MADV_PAGEOUT can page out */
  uint32_t reserved_;
  TIER_STATS_SITE_FIELDS(TIER_STATS_FIELD_)
  tier_stats_site_t site[TIER_STATS_SITES];   /* the first sites_apart */
  /* The kernel's NUMA balancing (version 7), after the fields above so a
   * program built against version 6 still reads those. NUMA balancing scans
   * a range, and promotes its hot pages, only when the range's policy allows
   * it (MPOL_F_NUMA_BALANCING). */
  int32_t numa_balancing;           /* kernel.numa_balancing now: 0 off, 1 normal, 2 tiering
                                       (promotes from CPU-less nodes), 3 both; -1 no such kernel */
  uint32_t numa_balancing_policies; /* policies this kernel lets allow it: 1 MPOL_BIND,
                                       2 MPOL_PREFERRED_MANY (0: none, or mbind refused) */
  uint32_t numa_balancing_heap;     /* 1: reclaim hands the heap's chunks below tier 0 to NUMA
                                       balancing (TIERMALLOC_NUMA_BALANCING=tiering, the kernel
                                       in tiering mode); 0: its policies keep it off the heap */
  uint32_t numa_balancing_demotes;  /* 1: tier 0 is held by the kernel's own demotion (version 9):
                                       the heap is handed, the kernel demotes on reclaim
                                       (demotion_enabled), and reclaim asks it, through the
                                       cgroup's memory.reclaim, for tier 0's excess; 0: reclaim
                                       moves the pages itself */
  TIER_STATS_HANDED_FIELDS(TIER_STATS_FIELD_)
#undef TIER_STATS_FIELD_
} tier_stats_t;

/* Fills *out (size: the caller's sizeof(tier_stats_t), so a program built
 * against an older, shorter struct still works). Measures resident bytes now.
 * Returns 0, or EINVAL when out is NULL or size is too small for the header. */
int tier_stats_get(tier_stats_t *out, size_t size);

/* TEXT: tables for people; JSON: one object (README, "Stats"); PROM: the
 * Prometheus text exposition format, labelled with the pid and command. */
typedef enum tier_stats_format_e {
  TIER_STATS_TEXT = 0,
  TIER_STATS_JSON = 1,
  TIER_STATS_PROM = 2,
} tier_stats_format_t;

/* Receives the printed stats in pieces; len bytes, not NUL-terminated. */
typedef void tier_write_fn(void *arg, const char *buf, size_t len);

/* Measures and prints the stats through write(arg, ...). Returns 0 or EINVAL. */
int tier_stats_print(tier_write_fn *write, void *arg, tier_stats_format_t format);

/* Publishes the stats into the process's live record now (see below), with
 * resident bytes measured now. Returns 0, or a positive errno: ENOENT when
 * the process has no record (TIERMALLOC_LIVE_MS=0, secure execution, or it
 * could not be created: said once at start-up). */
int tier_stats_publish(void);

/* ---- The live record --------------------------------------------------------
 * Each process running tiermalloc publishes its stats in a file of its own,
 * <TIERMALLOC_LIVE_DIR>/tiermalloc.<pid> (/dev/shm by default), mode 0600:
 * its user and root can read it, nobody else. It is written at start-up,
 * every TIERMALLOC_LIVE_MS by tiermalloc's own thread (which a process gets
 * when it first commits memory after start-up; else at most that often by a
 * thread committing memory), and by tier_stats_get, tier_stats_print and
 * tier_stats_publish; it is removed at exit. tierctl reads it, and measures
 * the resident bytes again itself from /proc/<pid>/numa_maps over
 * [range_base, range_end) where it may.
 * A reader maps it read-only and copies it, keeping the copy only when seq
 * was the same even value before and after (a seqlock: the writer makes seq
 * odd while it writes and never waits for a reader). The process is alive,
 * and the record its own, while /proc/<pid>/maps maps the file: a record
 * left by a process that died or exec'd is stale. The pid is the writer's
 * in its own pid namespace (pid_ns): a reader in another one can neither
 * look it up nor call it stale. */
#define TIER_LIVE_MAGIC   0x3176696c72656974ull   /* "tierliv1" */
#define TIER_LIVE_VERSION 1
#define TIER_LIVE_PREFIX  "tiermalloc."

/* Who wrote the record's last snapshot. */
typedef enum tier_live_publisher_e {
  TIER_LIVE_STARTUP = 0,   /* start-up (or the first publication of a fork child) */
  TIER_LIVE_THREAD,        /* tiermalloc's thread (publishing, and reclaim when a limit can be
                              crossed), every interval_ns */
  TIER_LIVE_DEMAND,        /* tier_stats_get, tier_stats_print, tier_stats_publish */
  TIER_LIVE_COMMIT,        /* a program thread committing memory, once an interval, while
                              tiermalloc's thread does not run */
} tier_live_publisher_t;

typedef struct tier_live_s {
  uint64_t magic;          /* TIER_LIVE_MAGIC */
  uint32_t version;        /* TIER_LIVE_VERSION */
  uint32_t size;           /* sizeof(tier_live_t) of the writer */
  uint64_t seq;            /* odd while the writer writes */
  uint32_t pid;
  uint32_t publisher;      /* tier_live_publisher_t */
  uint64_t published_ns;   /* CLOCK_REALTIME of the snapshot */
  uint64_t resident_ns;    /* CLOCK_REALTIME when resident was measured: again when committed
                              bytes or bytes moved changed by 1 MiB, else every 10 s, and never
                              more often than 50 x what it costs */
  uint64_t interval_ns;    /* the thread's period while it publishes; 0: it does not (now) */
  uint64_t range_base;     /* the tier ranges [base, end): what resident counts */
  uint64_t range_end;
  uint64_t pid_ns;         /* the writer's pid namespace (inode of /proc/self/ns/pid; 0: unknown) */
  char command[16];        /* the process's name at start-up (comm) */
  tier_stats_t stats;
} tier_live_t;

#ifdef __cplusplus
}
#endif
#endif /* TIERMALLOC_H */
