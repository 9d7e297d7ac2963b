#include "hotness.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "kfile.h"
#include "log.h"
#include "migrate.h"
#include "options.h"
#include "os.h"
#include "text.h"

enum { HN_AUTO, HN_ACCESSED, HN_COMMIT_AGE, HN_OFF };   /* TIERMALLOC_HOTNESS, in the table's order */

_Atomic uint16_t tm_hotness_now;

static struct {
  int source;
  char root[TM_KFILE_PATH_MAX / 2];
  uint64_t interval_ns, last_ns;
  uint64_t window_ns;   /* TIERMALLOC_HOTNESS_WINDOW_MS; 0: the bits gather over the interval */
  uint64_t read_due_ns; /* with a window: when the bits cleared at its start are read; 0: none */
  unsigned reads;   /* scans that read the bits since the source was chosen */
  _Atomic uint16_t read_tick;   /* the clock at the last scan that read them */
  _Atomic bool tracking;
  _Atomic bool scanned;   /* the bits were cleared once: a reclaim thread reads them */
  uint64_t max_split;
  _Atomic uint64_t nsplit;
  /* Pieces: chunks reclaim asked to read so, those made one VMA per piece
   * (split in the kernel) with what the read saw of them, and what the last
   * read saw. Only the reclaim thread touches these. */
  unsigned sample_max;
  unsigned nqueued, nsplit_now, nseen;
  tm_chunk_t *queued[TM_HOTNESS_SAMPLE_MAX], *split[TM_HOTNESS_SAMPLE_MAX], *seen_c[TM_HOTNESS_SAMPLE_MAX];
  uint32_t split_seen[TM_HOTNESS_SAMPLE_MAX], seen_mask[TM_HOTNESS_SAMPLE_MAX];
  bool split_read[TM_HOTNESS_SAMPLE_MAX];
} hn = { .source = HN_COMMIT_AGE };

void tm_hotness_tick(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  uint64_t ticks = ((uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000) /
                   TM_HOTNESS_TICK_MS;
  atomic_store_explicit(&tm_hotness_now, (uint16_t)ticks, memory_order_relaxed);
}

unsigned tm_hotness_age(tm_chunk_t *c)
{
  if (hn.source == HN_OFF) return 0;
  uint16_t now = atomic_load_explicit(&tm_hotness_now, memory_order_relaxed);
  uint16_t age = (uint16_t)(now - atomic_load_explicit(&c->age, memory_order_relaxed));
  if (age > TM_HOTNESS_AGE_MAX) {
    /* Older than the clock can tell: pin it at the oldest, before the 16-bit
     * difference wraps round and calls it young. */
    atomic_store_explicit(&c->age, (uint16_t)(now - TM_HOTNESS_AGE_MAX), memory_order_relaxed);
    age = TM_HOTNESS_AGE_MAX;
  }
  return age;
}

static unsigned hn_interval_ticks(void)
{
  return (unsigned)(hn.interval_ns / 1000000u / TM_HOTNESS_TICK_MS);
}

/* Ticks since the last scan that read the bits (decisions come later in
 * the reclaim thread's own time, up to a period after it). */
static unsigned hn_since_read(void)
{
  if (hn.reads == 0) return hn_interval_ticks();   /* none yet: recent commits only */
  return (uint16_t)(atomic_load_explicit(&tm_hotness_now, memory_order_relaxed) -
                    atomic_load_explicit(&hn.read_tick, memory_order_relaxed));
}

bool tm_hotness_hot(tm_chunk_t *c)
{
  /* Touched at the last scan (it saw an access in the interval before it),
   * or since (a commit). */
  return hn.source == HN_ACCESSED && tm_hotness_age(c) <= hn_since_read() + 1;
}

bool tm_hotness_steady(tm_chunk_t *c)
{
  return tm_hotness_hot(c) &&
         (atomic_load_explicit(&c->flags, memory_order_relaxed) & TM_CHUNK_STEADY);
}

unsigned tm_hotness_heat(tm_chunk_t *c)
{
  if (hn.source != HN_ACCESSED || tm_hotness_cold(c)) return 0;
  return atomic_load_explicit(&c->heat, memory_order_relaxed) & TM_HOTNESS_HEAT_MAX;
}

bool tm_hotness_graded(tm_chunk_t *c)
{
  return hn.source == HN_ACCESSED &&
         !(atomic_load_explicit(&c->heat, memory_order_relaxed) & TM_HOTNESS_HEAT_HUGE);
}

bool tm_hotness_read_after(uint16_t tick)
{
  if (hn.source != HN_ACCESSED) return true;
  return hn.reads > 0 &&
         (int16_t)(atomic_load_explicit(&hn.read_tick, memory_order_relaxed) - tick) > 0;
}

bool tm_hotness_cold(tm_chunk_t *c)
{
  /* Only once the bits were read that often: a chunk committed before the
   * first scan carries an old stamp whatever its use. */
  return hn.source == HN_ACCESSED && hn.reads >= TM_HOTNESS_COLD_SCANS &&
         tm_hotness_age(c) > hn_since_read() + TM_HOTNESS_COLD_SCANS * hn_interval_ticks();
}

unsigned tm_hotness_since_moved(tm_chunk_t *c)
{
  uint16_t now = atomic_load_explicit(&tm_hotness_now, memory_order_relaxed);
  uint16_t moved = atomic_load_explicit(&c->moved, memory_order_relaxed);
  return moved ? (uint16_t)(now - moved) : UINT16_MAX;   /* 0: never moved */
}

void tm_hotness_moved(tm_chunk_t *c)
{
  /* 0 means never: a stamp of 0 is taken as the tick after. */
  uint16_t now = atomic_load_explicit(&tm_hotness_now, memory_order_relaxed);
  atomic_store_explicit(&c->moved, now ? now : 1, memory_order_relaxed);
}

const char *tm_hotness_signal(void)
{
  return hn.source == HN_ACCESSED ? "accessed bits" : hn.source == HN_OFF ? "none" : "commit age";
}

static int hn_path(char *path, const char *leaf)
{
  return tm_kfile_path(path, hn.root, "/proc/self", NULL, -1, leaf);
}

/* The kernel lets this process clear its accessed bits and read them back. */
static bool hn_accessed_available(void)
{
  char path[TM_KFILE_PATH_MAX];
  return hn_path(path, "clear_refs") == 0 && access(path, W_OK) == 0 &&
         hn_path(path, "smaps") == 0 && access(path, R_OK) == 0;
}

/* A node id this kernel can never have (os.h): the one above its highest
 * possible node, which its nodemasks still hold unless every id they can
 * hold is possible (os.c then does without). -1 when unknown. */
static int hn_marker_node(void)
{
  char path[TM_KFILE_PATH_MAX];
  tm_nodemask_t possible;
  if (tm_kfile_path(path, hn.root, "/sys/devices/system/node", NULL, -1, "possible") ||
      tm_kfile_read_nodelist(path, &possible))
    return -1;
  int top = TIER_MAX_NODES - 1;
  while (top >= 0 && !tm_nodemask_test(&possible, top)) top--;
  return top >= 0 && top + 1 < TIER_MAX_NODES ? top + 1 : -1;
}

void tm_hotness_init(const char *root, uint64_t max_split)
{
  strncpy(hn.root, root, sizeof hn.root - 1);
  hn.root[sizeof hn.root - 1] = '\0';
  hn.max_split = max_split;
  hn.last_ns = 0;
  hn.read_due_ns = 0;
  tm_hotness_tick();   /* stamps from the start are of this clock, not of 0 */
  hn.reads = 0;
  atomic_store_explicit(&hn.scanned, false, memory_order_relaxed);
  uint64_t ms = tm_option(TM_OPTION_HOTNESS_INTERVAL_MS)->num;
  hn.interval_ns = (ms < 100 ? 100 : ms) * 1000000ull;
  uint64_t win = tm_option(TM_OPTION_HOTNESS_WINDOW_MS)->num * 1000000ull;
  uint64_t win_max = hn.interval_ns / 3 < 1000000000ull ? hn.interval_ns / 3 : 1000000000ull;
  if (win > win_max) {
    tm_warn("TIERMALLOC_HOTNESS_WINDOW_MS=%llu is more than a third of the interval or 1 s; using %llu",
            (unsigned long long)(win / 1000000u), (unsigned long long)(win_max / 1000000u));
    win = win_max;
  }
  hn.window_ns = win;
  uint64_t pieces = tm_option(TM_OPTION_HOTNESS_PIECES)->num;
  if (pieces > TM_HOTNESS_SAMPLE_MAX) {
    tm_warn("TIERMALLOC_HOTNESS_PIECES=%llu is more than %u; using %u", (unsigned long long)pieces,
            TM_HOTNESS_SAMPLE_MAX, TM_HOTNESS_SAMPLE_MAX);
    pieces = TM_HOTNESS_SAMPLE_MAX;
  }
  hn.sample_max = (unsigned)pieces;
  hn.nqueued = hn.nsplit_now = hn.nseen = 0;
  int want = (int)tm_option(TM_OPTION_HOTNESS)->num;
  hn.source = want == HN_AUTO ? (hn_accessed_available() ? HN_ACCESSED : HN_COMMIT_AGE) : want;
  if (want == HN_ACCESSED && !hn_accessed_available()) {
    tm_warn("TIERMALLOC_HOTNESS=accessed: /proc/self/clear_refs cannot be written or smaps read; "
            "using the commit age");
    hn.source = HN_COMMIT_AGE;
  }
  tm_os_split_chunks(hn.source == HN_ACCESSED, hn_marker_node());
}

void tm_hotness_track(bool on)
{
  atomic_store_explicit(&hn.tracking, on, memory_order_relaxed);
}

bool tm_hotness_tracking(void)
{
  return hn.source == HN_ACCESSED && atomic_load_explicit(&hn.tracking, memory_order_relaxed) &&
         atomic_load_explicit(&hn.scanned, memory_order_relaxed);
}

bool tm_hotness_split(tm_chunk_t *c)
{
  if (hn.source != HN_ACCESSED || !atomic_load_explicit(&hn.tracking, memory_order_relaxed) ||
      (atomic_load_explicit(&c->flags, memory_order_relaxed) & TM_CHUNK_SPLIT))
    return false;
  if (atomic_fetch_add_explicit(&hn.nsplit, 1, memory_order_relaxed) >= hn.max_split) {
    atomic_fetch_sub_explicit(&hn.nsplit, 1, memory_order_relaxed);
    return false;
  }
  atomic_fetch_or_explicit(&c->flags, TM_CHUNK_SPLIT, memory_order_relaxed);
  return true;
}

static int hn_split_slot(const tm_chunk_t *c)
{
  for (unsigned i = 0; i < hn.nsplit_now; i++)
    if (hn.split[i] == c) return (int)i;
  return -1;
}

bool tm_hotness_sample(tm_chunk_t *c)
{
  if (hn.source != HN_ACCESSED || hn.nqueued >= hn.sample_max ||
      !(atomic_load_explicit(&c->flags, memory_order_relaxed) & TM_CHUNK_SPLIT))
    return false;
  for (unsigned i = 0; i < hn.nqueued; i++)
    if (hn.queued[i] == c) return false;
  hn.queued[hn.nqueued++] = c;
  return true;
}

unsigned tm_hotness_pieces_seen(tm_chunk_t **c, uint32_t *seen, unsigned max)
{
  unsigned n = hn.nseen < max ? hn.nseen : max;
  for (unsigned i = 0; i < n; i++) {
    c[i] = hn.seen_c[i];
    seen[i] = hn.seen_mask[i];
  }
  return n;
}

bool tm_hotness_pieces_on(void)
{
  return hn.source == HN_ACCESSED && hn.sample_max > 0;
}

bool tm_hotness_pieces_pending(void)
{
  return hn.source == HN_ACCESSED && (hn.nqueued || hn.nsplit_now);
}

/* Before a clear: the chunks reclaim asked for become one VMA per piece. A
 * kernel that cannot tell pieces apart is not asked again. */
static void hn_split_queued(void)
{
  for (unsigned i = 0; i < hn.nqueued && hn.nsplit_now < TM_HOTNESS_SAMPLE_MAX; i++) {
    if (hn_split_slot(hn.queued[i]) >= 0) continue;   /* still split: a merge found it busy */
    int err = tm_migrate_split(hn.queued[i]);
    if (err == ENOTSUP) hn.sample_max = 0;
    if (err != 0) continue;
    hn.split[hn.nsplit_now] = hn.queued[i];
    hn.split_seen[hn.nsplit_now] = 0;
    hn.split_read[hn.nsplit_now++] = false;
  }
  hn.nqueued = 0;
}

/* After a read: keeps what it saw of the pieces, and merges each chunk back
 * into one VMA; one held meanwhile (a move or a commit: EBUSY) is merged
 * after the next read. */
static void hn_merge_split(void)
{
  unsigned keep = 0;
  hn.nseen = 0;
  for (unsigned i = 0; i < hn.nsplit_now; i++) {
    if (hn.split_read[i]) {
      hn.seen_c[hn.nseen] = hn.split[i];
      hn.seen_mask[hn.nseen++] = hn.split_seen[i];
    }
    if (tm_migrate_merge(hn.split[i]) == EBUSY) {
      hn.split[keep] = hn.split[i];
      hn.split_seen[keep] = 0;
      hn.split_read[keep++] = false;
    }
  }
  hn.nsplit_now = keep;
}

/* A VMA line of smaps ("lo-hi perms offset dev inode [path]"): its bounds. */
static bool hn_vma(const char *line, uint64_t *lo, uint64_t *hi)
{
  const char *dash = strchr(line, '-'), *sp = dash ? strchr(dash, ' ') : NULL;
  return sp && tm_text_parse_hex(line, dash, lo) == 0 && tm_text_parse_hex(dash + 1, sp, hi) == 0;
}

/* The bytes of an smaps line "Field:   N kB" whose label is field_len
 * long, or 0. */
static uint64_t hn_bytes(const char *line, size_t field_len)
{
  uint64_t v;
  return tm_kfile_parse_kb(line + field_len, &v) == 0 ? v : 0;
}

/* What one read of the bits said of a chunk's VMA, or of the VMAs of its
 * pieces together (bytes). */
typedef struct {
  tm_chunk_t *c;   /* NULL: the VMA is not one chunk, nor a piece of one split */
  uint64_t rss, ref, huge;
  bool read;       /* it had a Referenced: line */
  int slot;        /* a piece: hn.split[slot] is its chunk; -1: a whole chunk */
  unsigned piece;  /* which */
} hn_vma_read_t;

/* What one read of the bits says of v->c: seen (some page referenced) or
 * not, and its heat. */
static void hn_saw(const hn_vma_read_t *v)
{
  tm_chunk_t *c = v->c;
  if (!c || !v->read) return;
  bool seen = v->ref > 0;
  uint16_t f = atomic_load_explicit(&c->flags, memory_order_relaxed), g = f & ~(TM_CHUNK_SEEN | TM_CHUNK_STEADY);
  if (seen) g |= TM_CHUNK_SEEN | (f & TM_CHUNK_SEEN ? TM_CHUNK_STEADY : 0);
  /* Only this thread changes these bits; others set and clear their own
   * with atomic or/and, which a plain store here could undo: so or/and. */
  if (g & ~f) atomic_fetch_or_explicit(&c->flags, (uint16_t)(g & ~f), memory_order_relaxed);
  if (f & ~g) atomic_fetch_and_explicit(&c->flags, (uint16_t)~(f & ~g), memory_order_relaxed);
  uint64_t now = v->rss == 0 ? 0 : v->ref >= v->rss ? TM_HOTNESS_HEAT_MAX : v->ref * TM_HOTNESS_HEAT_MAX / v->rss;
  unsigned was = atomic_load_explicit(&c->heat, memory_order_relaxed) & TM_HOTNESS_HEAT_MAX;
  unsigned heat = (was + (unsigned)now + 1) / 2;
  atomic_store_explicit(&c->heat, (uint8_t)(heat | (v->huge ? TM_HOTNESS_HEAT_HUGE : 0)), memory_order_relaxed);
  if (seen) tm_hotness_touch(c);
}

/* Reads what the bits saw of each chunk that is a VMA of its own (hn_saw).
 * false when smaps cannot be read or has no Referenced: field. */
static bool hn_read_referenced(void)
{
  char path[TM_KFILE_PATH_MAX], line[256];
  tm_kfile_lines_t r;
  if (hn_path(path, "smaps") != 0 || tm_kfile_lines_open(&r, path) != 0) return false;
  hn_vma_read_t v = { .slot = -1 };   /* the current VMA; its fields come after its line */
  bool seen = false;
  int cut, len;
  const uint64_t piece = (uint64_t)1 << TM_PIECE_SHIFT;
  while ((len = tm_kfile_next_line(&r, line, sizeof line, &cut)) >= 0) {
    uint64_t lo, hi;
    if (hn_vma(line, &lo, &hi)) {
      tm_chunk_t *c = NULL;
      int slot = -1;
      if (hi - lo == piece && !(lo & (piece - 1)) && hn.nsplit_now &&
          (slot = hn_split_slot(c = tm_chunk_of((void *)(uintptr_t)lo))) < 0)
        c = NULL;
      unsigned at = (unsigned)((lo & (TM_CHUNK_SIZE - 1)) >> TM_PIECE_SHIFT);
      if (c && c == v.c && slot == v.slot) {   /* the next piece of the same chunk */
        v.piece = at;
        continue;
      }
      hn_saw(&v);
      v = (hn_vma_read_t){ .c = c, .slot = slot, .piece = at };
      if (!c && hi - lo == TM_CHUNK_SIZE && !(lo & (TM_CHUNK_SIZE - 1))) v.c = tm_chunk_of((void *)(uintptr_t)lo);
      continue;
    }
    if (strncmp(line, "Referenced:", 11) == 0) {
      seen = v.read = true;
      uint64_t ref = v.c ? hn_bytes(line, 11) : 0;
      v.ref += ref;
      if (v.slot >= 0) {
        hn.split_read[v.slot] = true;
        if (ref) hn.split_seen[v.slot] |= 1u << v.piece;
      }
    } else if (v.c && strncmp(line, "Rss:", 4) == 0) {
      v.rss += hn_bytes(line, 4);
    } else if (v.c && strncmp(line, "AnonHugePages:", 14) == 0) {
      v.huge += hn_bytes(line, 14);
    }
  }
  hn_saw(&v);
  close(r.fd);
  return seen;
}

static bool hn_clear(void)
{
  char path[TM_KFILE_PATH_MAX];
  if (hn_path(path, "clear_refs") != 0) return false;
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  /* 1: the accessed bits; 4: soft-dirty, whose clear also flushes the TLB. */
  bool ok = write(fd, "1", 1) == 1 && write(fd, "4", 1) == 1;
  close(fd);
  return ok;
}

uint64_t tm_hotness_read_due(void)
{
  if (hn.source != HN_ACCESSED) return 0;
  if (hn.read_due_ns) return hn.read_due_ns;
  return tm_hotness_pieces_pending() && hn.last_ns ? hn.last_ns + hn.interval_ns : 0;
}

bool tm_hotness_scan(tm_scan_pace_t pace)
{
  if (hn.source != HN_ACCESSED) return false;
  uint64_t now = tm_clock_ns(CLOCK_MONOTONIC);
  bool ok, first = false;
  if (hn.read_due_ns) {
    /* A window is open: the bits are read at its end, not before. */
    if (now < hn.read_due_ns) return false;
    hn.read_due_ns = 0;
    ok = hn_read_referenced();
    if (ok) hn_merge_split();
  } else {
    uint64_t gap = pace == TM_SCAN_SOON ? TM_HOTNESS_SOON_MS * 1000000ull
                                        : (pace == TM_SCAN_BUSY ? 2 : 1) * hn.interval_ns;
    if (hn.last_ns && now - hn.last_ns < gap) return false;
    first = hn.last_ns == 0;   /* nothing gathered yet to read */
    hn.last_ns = now;
    if (hn.window_ns) {
      /* Cleared now, read a window later (tm_hotness_read_due): only what
       * is used within it. The bits gather unread for the rest of the
       * interval. */
      hn_split_queued();
      ok = hn_clear();
      if (ok) {
        hn.read_due_ns = now + hn.window_ns;
        atomic_store_explicit(&hn.scanned, true, memory_order_relaxed);
        return false;
      }
    } else {
      ok = first || hn_read_referenced();
      if (ok) {
        hn_merge_split();
        hn_split_queued();
        ok = hn_clear();
      }
    }
  }
  if (!ok) {
    tm_warn("the accessed bits cannot be read or cleared (/proc/self/smaps, clear_refs); "
            "using the commit age");
    hn.source = HN_COMMIT_AGE;
    hn.read_due_ns = 0;
    hn_merge_split();   /* back to one VMA each; nothing to act on */
    hn.nseen = hn.nqueued = 0;
    return false;
  }
  hn.reads += !first;
  atomic_store_explicit(&hn.scanned, true, memory_order_relaxed);
  if (!first)
    atomic_store_explicit(&hn.read_tick, atomic_load_explicit(&tm_hotness_now, memory_order_relaxed),
                          memory_order_relaxed);
  return true;
}
