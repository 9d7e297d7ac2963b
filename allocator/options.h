/*
 * options: the one table of every tiermalloc option.
 *
 * Each option is read once, at start-up, from the environment variable
 * TIERMALLOC_<NAME>, without allocating. A bad value prints one line
 *   tiermalloc: TIERMALLOC_X='12Q' is not a size; using default (1T)
 * and the default is used. Nothing aborts. env.example lists the same table
 * (a unit test keeps the two in step).
 */
#ifndef TM_OPTIONS_H
#define TM_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

typedef enum tm_option_type_e {
  TM_OPT_BOOL,    /* 1/0, true/false, yes/no, on/off (any case) */
  TM_OPT_UINT,    /* decimal, 0 .. 2^63-1 */
  TM_OPT_SIZE,    /* bytes: 4096, 64K, 512M, 2G, 1T (powers of 1024, optional B/iB) */
  TM_OPT_SHARE,   /* a SIZE, or N% (0..100) of a whole that the option's user supplies */
  TM_OPT_PERCENT, /* N% (0..100) */
  TM_OPT_ENUM,    /* one of the '|'-separated words in `choices` */
  TM_OPT_STRING,  /* any text up to TM_OPT_STRING_MAX-1 bytes */
} tm_option_type_t;

#define TM_OPT_STRING_MAX 256

/* What an option does in secure execution (getauxval(AT_SECURE): setuid,
 * setgid, file capabilities, or an LSM that asks): the environment then
 * belongs to a less privileged user. No zero value, so a table entry cannot
 * leave it unchosen (tests/unit/test_options.c walks the table).
 *   KEEP: the option acts on the process's own memory only (placement,
 *         budgets, arenas, purging): honoured.
 *   DROP: its effect reaches outside the process (it names a path, a
 *         directory or another process, or writes output): ignored, with
 *         one warning line. */
typedef enum tm_option_secure_e {
  TM_OPT_SECURE_KEEP = 1,
  TM_OPT_SECURE_DROP = 2,
} tm_option_secure_t;

/* The budget of lower tier k (1 .. TIER_MAX_TIERS-1), as TOPTIER_* is tier 0's. */
#define TM_TIER_BUDGET_OPTIONS(X, k)                                                               \
  X(TIER##k##_MIN,     TM_OPT_SHARE,  "0",     NULL,               TM_OPT_SECURE_KEEP, "tier " #k " min, as TOPTIER_MIN is tier 0's (scaled from the cgroup by tier " #k "'s share)") \
  X(TIER##k##_LOW,     TM_OPT_SHARE,  "0",     NULL,               TM_OPT_SECURE_KEEP, "tier " #k " low, as TOPTIER_LOW") \
  X(TIER##k##_HIGH,    TM_OPT_SHARE,  "100%",  NULL,               TM_OPT_SECURE_KEEP, "tier " #k " high, as TOPTIER_HIGH; the lowest tier's high and max are where pageout will start") \
  X(TIER##k##_MAX,     TM_OPT_SHARE,  "100%",  NULL,               TM_OPT_SECURE_KEEP, "tier " #k " max, as TOPTIER_MAX")

/*     id                 type           default  choices             secure execution    doc */
#define TM_OPTIONS(X)                                                                              \
  X(TIERS,             TM_OPT_STRING, "",      NULL,               TM_OPT_SECURE_KEEP, "tiers as ';'-separated NUMA nodelists, top first (e.g. 0,1;2;3); empty: discover from the kernel") \
  X(TOPTIER_MIN,       TM_OPT_SHARE,  "0",     NULL,               TM_OPT_SECURE_KEEP, "top-tier min: bytes (K/M/G/T) or % of the top tier's capacity; never demoted below it; unset: the kernel's memory.toptier_min, else the cgroup's memory.min scaled by the tier's share of capacity, else 0") \
  X(TOPTIER_LOW,       TM_OPT_SHARE,  "0",     NULL,               TM_OPT_SECURE_KEEP, "top-tier low: demoted below it only under memory pressure; unset: memory.toptier_low, else the cgroup's memory.low scaled, else 0") \
  X(TOPTIER_HIGH,      TM_OPT_SHARE,  "100%",  NULL,               TM_OPT_SECURE_KEEP, "top-tier high: above it new memory goes to the next tier down; unset: memory.toptier_high, else the cgroup's memory.high (v1: soft limit) scaled, else unlimited") \
  X(TOPTIER_MAX,       TM_OPT_SHARE,  "100%",  NULL,               TM_OPT_SECURE_KEEP, "top-tier max: the tier never receives new memory beyond it (it goes to the next tier down; nothing throttles or fails); unset: memory.toptier_max, else the cgroup's memory.max (v1: limit) scaled, else unlimited") \
  X(TOPTIER_RATIO,     TM_OPT_PERCENT, "100%",  NULL,               TM_OPT_SECURE_KEEP, "the top tier's share (N%) of the cgroup's limits; unset: its share of the allowed nodes' capacity; lower tiers share the rest by capacity") \
  TM_TIER_BUDGET_OPTIONS(X, 1) TM_TIER_BUDGET_OPTIONS(X, 2) TM_TIER_BUDGET_OPTIONS(X, 3) \
  TM_TIER_BUDGET_OPTIONS(X, 4) TM_TIER_BUDGET_OPTIONS(X, 5) TM_TIER_BUDGET_OPTIONS(X, 6) \
  TM_TIER_BUDGET_OPTIONS(X, 7) \
  X(RESERVE,           TM_OPT_SIZE,   "1T",    NULL,               TM_OPT_SECURE_KEEP, "address space reserved for each tier (costs no memory)") \
  X(NARENAS,           TM_OPT_UINT,   "0",     NULL,               TM_OPT_SECURE_KEEP, "number of automatic arenas; 0: one per CPU the process may run on") \
  X(DIRTY_DECAY_MS,    TM_OPT_UINT,   "10000", NULL,               TM_OPT_SECURE_KEEP, "ms before unused dirty pages are returned to the kernel") \
  X(BACKGROUND_THREAD, TM_OPT_ENUM,   "auto",  "auto|on|off",      TM_OPT_SECURE_KEEP, "jemalloc's background thread returns unused pages instead of the threads that free them; auto: started when the process runs a second thread or its heap first grows past 64 MiB (so freed memory goes back within the decay time even when the program stops calling the allocator), and again in a fork child; a small single-threaded program gets no extra thread; stopped when the last thread that allocated ends, so it never keeps a process alive") \
  X(THP,               TM_OPT_ENUM,   "auto",  "auto|always|never", TM_OPT_SECURE_KEEP, "transparent huge pages (MADV_HUGEPAGE) for the tier ranges; auto: for extents of 4 MiB and more (an arena's growth once it holds about 11 MiB, and large blocks), so a small program keeps its small footprint; never: as the system's THP setting decides") \
  X(RECLAIM,           TM_OPT_ENUM,   "always", "always|pressure|off", TM_OPT_SECURE_KEEP, "the reclaim thread holds each tier's watermarks: always: demote above high at all times; pressure: above high only while the tier's nodes are short of free memory (RECLAIM_PRESSURE_FREE); both demote above max within one period and never below min (below low only under pressure), and page out the lowest tier above its high; off: budgets steer new memory only") \
  X(RECLAIM_PERIOD_MIN_MS, TM_OPT_UINT, "100", NULL,               TM_OPT_SECURE_KEEP, "the reclaim thread wakes this often (ms, at least 10) to re-read the budgets and check the counters, and passes over every chunk this often while a tier is over a watermark") \
  X(RECLAIM_PERIOD_MAX_MS, TM_OPT_UINT, "1000", NULL,              TM_OPT_SECURE_KEEP, "the longest time between two passes over every chunk while every tier is within its watermarks (it doubles from the min up to this); a crossed limit is still seen within the min") \
  X(RECLAIM_RATE,      TM_OPT_SIZE,   "256M",  NULL,               TM_OPT_SECURE_KEEP, "bytes per second demoted from a tier above its high (above its max there is no limit)") \
  X(RECLAIM_HYSTERESIS, TM_OPT_SHARE, "5%",    NULL,               TM_OPT_SECURE_KEEP, "demotion above high goes on until the tier is this far below high (bytes, or % of high; at least one 2 MiB chunk)") \
  X(RECLAIM_PRESSURE_FREE, TM_OPT_SHARE, "5%", NULL,               TM_OPT_SECURE_KEEP, "a tier is short of free memory when its nodes' MemFree is below this (bytes, or % of the tier's capacity)") \
  X(RECLAIM_PAGEOUT_RATE, TM_OPT_SIZE, "32M",  NULL,               TM_OPT_SECURE_KEEP, "bytes per second paged out at most (each page goes through swap: zram compresses it, a disk writes it)") \
  X(RECLAIM_PAGEOUT,   TM_OPT_BOOL,   "1",     NULL,               TM_OPT_SECURE_KEEP, "page out (MADV_PAGEOUT) the coldest chunks of the lowest tier above its high (at the rate) or its max (at once), or when the cgroup nears its memory.high or memory.max; needs swap") \
  X(RECLAIM_PROMOTE_RATE, TM_OPT_SIZE, "64M",  NULL,               TM_OPT_SECURE_KEEP, "bytes per second promoted at most (0: none): with the accessed bits, the hot chunks of a lower tier move up while the tier above is under its high (or max) less the hysteresis, and when it is full they are exchanged for its cold ones; a chunk moved stays at least 10 s") \
  X(NUMA_BALANCING,    TM_OPT_ENUM,   "off",   "off|tiering",      TM_OPT_SECURE_KEEP, "experimental; tiering: while the kernel's NUMA balancing is in its tiering mode (kernel.numa_balancing 2 or 3), the reclaim thread hands each chunk below tier 0, once committed whole and mostly there, to it (MPOL_F_NUMA_BALANCING, no page moved), so the kernel's hint faults may promote its hot pages; tiermalloc counts them on the tier they are on and holds the budgets: where the kernel demotes on reclaim (demotion_enabled) and the process is alone in a cgroup of its own without swap, by asking the cgroup's memory.reclaim for tier 0's excess (the kernel's LRU chooses the pages; tier 0's chunks are handed too, so a page demoted can come back up), else by demoting tier 0's coldest chunks first, then giving back the pages the kernel promoted, page by page and the newest first; its own promotion stops; nothing is handed where the kernel put every node in one memory tier (its tiering mode promotes nothing there); off: the heap's policies keep NUMA balancing off it") \
  X(NUMA_BALANCING_HOLD, TM_OPT_BOOL, "0",     NULL,               TM_OPT_SECURE_KEEP, "experimental; with NUMA_BALANCING=tiering: while the heap's pages on tier 0 are above its high by more than half the hysteresis (or above its max), the kernel's promotions are held off the heap (its handed chunks bound without MPOL_F_NUMA_BALANCING, no page moved) until they are back at the high, two seconds at most, so a burst of them takes tier 0 little over its high (in the 2tier VM 1-2 % against 7-16 %); the hot pages faulting meanwhile wait for the kernel's next scan, and fewer of its demotions are undone") \
  X(HOTNESS,           TM_OPT_ENUM,   "auto",  "auto|accessed|commit-age|off", TM_OPT_SECURE_KEEP, "what reclaim calls cold: accessed: the accessed bits of each chunk's pages, read and cleared every HOTNESS_INTERVAL_MS (/proc/self/smaps and clear_refs; sees reads as well as writes; each chunk becomes a VMA of its own); commit-age: the time since the allocator last committed memory in the chunk; off: no signal (lowest address first); auto: accessed where the kernel offers it, else commit-age") \
  X(HOTNESS_INTERVAL_MS, TM_OPT_UINT, "3000",  NULL,               TM_OPT_SECURE_KEEP, "how often the accessed bits are read and cleared (ms, at least 100); a chunk touched within it is young") \
  X(HOTNESS_PIECES,    TM_OPT_UINT,   "16",    NULL,               TM_OPT_SECURE_KEEP, "with the accessed bits, how many chunks reclaim reads per 64 KiB piece at each read (at most 32; 0: none): a hot piece of a chunk on a lower tier moves up to tier 0 on its own, and a chunk on tier 0 read so is graded by the share of its pieces used") \
  X(HOTNESS_WINDOW_MS, TM_OPT_UINT,   "0",     NULL,               TM_OPT_SECURE_KEEP, "with the accessed bits, how long before each read they are cleared (ms; 0: at the read before, the whole interval; at most a third of the interval and 1000): the reclaim thread clears them and wakes this much later to read them, so a chunk is young only if used within the window; under a heavy load every chunk is used within an interval, and a window tells the hottest from the rest") \
  X(SITES,             TM_OPT_BOOL,   "1",     NULL,               TM_OPT_SECURE_KEEP, "allocation-site placement: with the accessed bits and a budget, sample allocations by bytes, give the most sampled call sites (callers of malloc, calloc, the aligned allocations and operator new) chunks of their own, and place the new memory of a site whose memory proved cold from tier 1 down, with no migration") \
  X(SITE_SAMPLE,       TM_OPT_SIZE,   "512K",  NULL,               TM_OPT_SECURE_KEEP, "mean bytes a thread allocates between two samples for SITES (at least 4K)") \
  X(STATS,             TM_OPT_ENUM,   "none",  "none|text|json|prom", TM_OPT_SECURE_DROP, "print per-tier stats at exit (prom: the Prometheus text format)") \
  X(STATS_FILE,        TM_OPT_STRING, "",      NULL,               TM_OPT_SECURE_DROP, "append the exit stats to this file instead of stderr") \
  X(LIVE_MS,           TM_OPT_UINT,   "100",   NULL,               TM_OPT_SECURE_DROP, "publish the stats for tierctl in LIVE_DIR/tiermalloc.<pid> (mode 0600) at start-up, on demand, and this often (ms, at least 10) from tiermalloc's thread, which a process gets when it first commits memory after start-up; 0: no record, and no thread unless a budget needs reclaim") \
  X(LIVE_DIR,          TM_OPT_STRING, "/dev/shm", NULL,            TM_OPT_SECURE_DROP, "the directory of the live records (tierctl reads the same TIERMALLOC_LIVE_DIR)") \
  X(VERBOSE,           TM_OPT_BOOL,   "0",     NULL,               TM_OPT_SECURE_DROP, "print the topology and the options in force at start-up")

typedef enum tm_option_id_e {
#define TM_OPTION_ID_(id, type, def, choices, secure, doc) TM_OPTION_##id,
  TM_OPTIONS(TM_OPTION_ID_)
#undef TM_OPTION_ID_
  TM_OPTION_COUNT
} tm_option_id_t;

/* The option of limit `limit` (TM_LIMIT_MIN..MAX order: min, low, high, max)
 * of tier `tier`'s budget. */
static inline tm_option_id_t tm_option_budget(unsigned tier, unsigned limit)
{
  return tier == 0 ? (tm_option_id_t)(TM_OPTION_TOPTIER_MIN + limit)
                   : (tm_option_id_t)(TM_OPTION_TIER1_MIN + 4 * (tier - 1) + limit);
}
_Static_assert(TM_OPTION_TOPTIER_MAX == TM_OPTION_TOPTIER_MIN + 3, "budget options in order");
_Static_assert(TM_OPTION_TIER7_MAX == TM_OPTION_TIER1_MIN + 27, "budget options in order");

typedef struct tm_option_desc_s {
  const char *name;       /* "TIERS": the variable is TIERMALLOC_TIERS */
  tm_option_type_t type;
  const char *def;        /* default, as text in the option's own syntax */
  const char *choices;    /* TM_OPT_ENUM only */
  tm_option_secure_t secure;
  const char *doc;
} tm_option_desc_t;

typedef struct tm_option_value_s {
  uint64_t num;           /* BOOL 0/1, UINT, SIZE/SHARE in bytes or percent, PERCENT, ENUM index */
  bool percent;           /* SHARE given as N% (num is N, 0..100) */
  bool set;               /* came from the environment (not the default) */
  char str[TM_OPT_STRING_MAX];  /* STRING */
} tm_option_value_t;

extern const tm_option_desc_t tm_option_descs[TM_OPTION_COUNT];

/* Parses text as option id's type. Pure (no I/O, no allocation).
 * Returns 0, or EINVAL (not of the type: junk, empty, bad suffix, unknown
 * word, percent > 100) or ERANGE (too large). *out is untouched on error. */
int tm_option_parse(tm_option_id_t id, const char *text, tm_option_value_t *out);

/* Reads every TIERMALLOC_* variable (getenv, no allocation), warning on bad
 * values and on unknown TIERMALLOC_* names. In secure execution the options
 * marked TM_OPT_SECURE_DROP keep their defaults, with one warning line naming
 * those the environment set. Idempotent; call before reading. */
void tm_options_init(void);

/* Resets every option to its default and parses `env` (NULL-terminated
 * "NAME=value" strings) instead of the process environment, as in secure
 * execution when `secure`; for tests. */
void tm_options_init_from(char *const *env, bool secure);

/* The options in force were read in secure execution (getauxval(AT_SECURE)):
 * the TM_OPT_SECURE_DROP options kept their defaults, and nothing that
 * reaches outside the process may be done on the environment's word. */
bool tm_options_secure(void);

const tm_option_value_t *tm_option(tm_option_id_t id);

/* A SIZE or SHARE option in bytes; a percentage is taken of `whole`. */
uint64_t tm_option_size(tm_option_id_t id, uint64_t whole);

#endif
