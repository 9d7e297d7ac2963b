/* handback: pages the kernel promoted, given back page by page (handback.h). */
#include "handback.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "chunkmap.h"
#include "migrate.h"

#define HB_PAGE 4096u
#define HB_CHUNKS 512u   /* handed chunks whose pages up are remembered: 1 GiB of them */
#define HB_RING 4096u    /* pages given back, watched for an undone demotion: 16 MiB */
#define HB_LAST 4096u    /* pages given back last after an undone demotion (hashed; a power of two) */
#define HB_PROBE 8u

/* What the last look at a handed chunk found on the tier given back from. */
static struct {
  tm_chunk_t *c;
  tm_migrate_pages_t up;
} hb_seen[HB_CHUNKS];
static unsigned hb_nseen, hb_evict;

static struct {
  uintptr_t page;   /* 0: empty, or settled */
  uint64_t ns;      /* when it was given back */
} hb_ring[HB_RING];
static unsigned hb_head;

static struct {
  uintptr_t page;
  uint64_t until;
} hb_last[HB_LAST];

/* The handed chunks a call looks at, at most HB_LOOKS (one move_pages
 * lookup of 512 pages each), from where the last call stopped: walking a
 * 512 MiB heap's every handed chunk at each pass of a drain took 14 s of
 * the reclaim thread's CPU in 75 s under TCG (bench/tier-quality, 10 %). */
#define HB_LOOKS 64u
static struct {
  unsigned range;
  uintptr_t at;   /* offset of the next chunk to look at in the range */
} hb_cursor;

/* Written by the reclaim thread only, read by stats. */
static _Atomic uint64_t hb_given, hb_undone, hb_kundone;

/* The sample of the handed heap's pages (handback.h), by address. */
#define HB_SAMPLE_PER_CHUNK (TM_CHUNK_SIZE / HB_PAGE / TM_HANDBACK_SAMPLE_STRIDE)
#define HB_SAMPLE_MAX 4096u
typedef struct {
  uintptr_t page;
  uint64_t left;   /* when an ask took it off tier 0; 0: none pending */
  int8_t tier;     /* at the last look; -1: not there */
} hb_sampled_t;
#define HB_LOOK_ASK_NS (250ull * 1000000ull)
static hb_sampled_t hb_sample[HB_SAMPLE_MAX];
static unsigned hb_nsample;
static uint64_t hb_look_ns, hb_after_ns;
static bool hb_stale;   /* own moves down since the last look */

static void hb_add(_Atomic uint64_t *v, uint64_t n)
{
  atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + n, memory_order_relaxed);
}

void tm_handback_reset(void)
{
  memset(hb_seen, 0, sizeof hb_seen);
  memset(hb_ring, 0, sizeof hb_ring);
  memset(hb_last, 0, sizeof hb_last);
  memset(hb_sample, 0, sizeof hb_sample);
  hb_nseen = hb_evict = hb_head = hb_nsample = 0;
  hb_look_ns = hb_after_ns = 0;
  hb_stale = false;
  hb_cursor.range = 0;
  hb_cursor.at = 0;
  atomic_store_explicit(&hb_given, 0, memory_order_relaxed);
  atomic_store_explicit(&hb_undone, 0, memory_order_relaxed);
  atomic_store_explicit(&hb_kundone, 0, memory_order_relaxed);
}

uint64_t tm_handback_given(void)
{
  return atomic_load_explicit(&hb_given, memory_order_relaxed);
}

uint64_t tm_handback_undone(void)
{
  return atomic_load_explicit(&hb_undone, memory_order_relaxed);
}

uint64_t tm_handback_kernel_undone(void)
{
  return atomic_load_explicit(&hb_kundone, memory_order_relaxed);
}

static unsigned hb_hash(uintptr_t page)
{
  return (unsigned)(((page / HB_PAGE) * 0x9e3779b97f4a7c15ull) >> 40) & (HB_LAST - 1);
}

static bool hb_goes_last(uintptr_t page, uint64_t now)
{
  for (unsigned k = 0, h = hb_hash(page); k < HB_PROBE; k++, h = (h + 1) & (HB_LAST - 1))
    if (hb_last[h].page == page) return hb_last[h].until > now;
  return false;
}

static void hb_put_last(uintptr_t page, uint64_t now)
{
  unsigned at = hb_hash(page);
  for (unsigned k = 0, h = at; k < HB_PROBE; k++, h = (h + 1) & (HB_LAST - 1))
    if (hb_last[h].page == page || hb_last[h].until <= now) {
      at = h;
      break;
    }
  hb_last[at].page = page;
  hb_last[at].until = now + TM_HANDBACK_LAST_NS;
}

/* c's record, made (the oldest replaced when full) with `up` as its last
 * look when it had none: a chunk first looked at has no page known recent. */
static tm_migrate_pages_t *hb_seen_of(tm_chunk_t *c, const tm_migrate_pages_t *up)
{
  for (unsigned k = 0; k < hb_nseen; k++)
    if (hb_seen[k].c == c) return &hb_seen[k].up;
  unsigned k = hb_nseen < HB_CHUNKS ? hb_nseen++ : hb_evict++ % HB_CHUNKS;
  hb_seen[k].c = c;
  hb_seen[k].up = *up;
  return &hb_seen[k].up;
}

/* Which pages a walk gives back (handback.h): those promoted since the last
 * look, then the older ones, then those given back last (undone lately). */
enum { HB_RECENT, HB_OLDER, HB_ALL };

/* Gives back, of chunk c's pages in *on (on tier t), up to `pages` of the
 * kind `which`, and takes those moved out of *on. Returns the bytes moved. */
static uint64_t hb_give_chunk(tm_chunk_t *c, unsigned t, tm_migrate_pages_t *on, int which, uint64_t pages,
                              uint64_t now, uint64_t *failed)
{
  tm_migrate_pages_t *seen = hb_seen_of(c, on), take;
  memset(&take, 0, sizeof take);
  uintptr_t a = tm_chunk_addr(c);
  uint64_t n = 0;
  const bool all = which == HB_ALL;
  for (unsigned w = 0; w < TM_MIGRATE_PAGE_WORDS && n < pages; w++) {
    uint64_t cand = all ? on->w[w] : which == HB_RECENT ? on->w[w] & ~seen->w[w] : on->w[w] & seen->w[w];
    while (cand && n < pages) {
      unsigned b = (unsigned)__builtin_ctzll(cand);
      cand &= cand - 1;
      uintptr_t page = a + ((uintptr_t)w * 64 + b) * HB_PAGE;
      if (!all && hb_goes_last(page, now)) continue;
      take.w[w] |= 1ull << b;
      n++;
    }
  }
  tm_migrate_counts_t m = { 0 };
  if (n > 0 && tm_migrate_give_back(c, t, &take, &m) != 0) n = 0;
  /* What is up now is what the next look tells recent pages from. */
  for (unsigned w = 0; w < TM_MIGRATE_PAGE_WORDS; w++) seen->w[w] = on->w[w] &= ~take.w[w];
  if (n == 0) return 0;
  hb_stale = true;
  *failed += m.failed;
  hb_add(&hb_given, m.moved);
  for (unsigned w = 0; w < TM_MIGRATE_PAGE_WORDS; w++)   /* those that moved */
    for (uint64_t bits = take.w[w]; bits; bits &= bits - 1) {
      hb_ring[hb_head].page = a + ((uintptr_t)w * 64 + (unsigned)__builtin_ctzll(bits)) * HB_PAGE;
      hb_ring[hb_head].ns = now;
      hb_head = (hb_head + 1) % HB_RING;
    }
  return m.moved;
}

uint64_t tm_handback_give(unsigned t, uint64_t want, uint64_t now, uint64_t *failed)
{
  static tm_chunk_t *look[HB_LOOKS];
  static tm_migrate_pages_t on[HB_LOOKS];
  unsigned n = 0;
  uint64_t chunks = 0;
  for (unsigned i = 0; i < tm_ranges.n; i++) chunks += (tm_range_end(i) - tm_range_lo(i)) >> TM_CHUNK_SHIFT;
  for (uint64_t k = 0; k < chunks && n < HB_LOOKS; k++) {
    while (hb_cursor.range >= tm_ranges.n ||
           tm_range_lo(hb_cursor.range) + hb_cursor.at >= tm_range_end(hb_cursor.range)) {
      hb_cursor.at = 0;
      hb_cursor.range = hb_cursor.range + 1 < tm_ranges.n ? hb_cursor.range + 1 : 0;
    }
    tm_chunk_t *c = tm_chunk_of((void *)(tm_range_lo(hb_cursor.range) + hb_cursor.at));
    hb_cursor.at += TM_CHUNK_SIZE;
    if ((atomic_load_explicit(&c->flags, memory_order_relaxed) & TM_CHUNK_HANDED) && tm_chunk_tier(c) > t &&
        tm_chunk_bytes(c) != 0 && tm_migrate_pages_on(c, t, &on[n]) == 0)
      look[n++] = c;
  }
  uint64_t done = 0;
  for (int which = HB_RECENT; which <= HB_ALL && done < want; which++)
    for (unsigned k = 0; k < n && done < want; k++)
      done += hb_give_chunk(look[k], t, &on[k], which, (want - done + HB_PAGE - 1) / HB_PAGE, now, failed);
  return done;
}

void tm_handback_check(uint64_t now)
{
  static void *pages[HB_RING];
  static unsigned at[HB_RING];
  static int8_t tier[HB_RING];
  unsigned n = 0;
  for (unsigned k = 0; k < HB_RING; k++) {
    if (hb_ring[k].page == 0) continue;
    if (now - hb_ring[k].ns > TM_HANDBACK_UNDONE_NS) {
      hb_ring[k].page = 0;   /* stayed down: a demotion that held */
      continue;
    }
    at[n] = k;
    pages[n++] = (void *)hb_ring[k].page;
  }
  if (n == 0 || tm_migrate_where(pages, (int)n, tier) != 0) return;
  for (unsigned j = 0; j < n; j++) {
    tm_chunk_t *c = tm_chunk_of(pages[j]);
    if (c == NULL || tier[j] < 0 || (unsigned)tier[j] >= tm_chunk_tier(c)) continue;
    hb_add(&hb_undone, HB_PAGE);
    hb_put_last(hb_ring[at[j]].page, now);
    hb_ring[at[j]].page = 0;
  }
}

/* The sample anew from the chunk map (handed chunks come and go), each page
 * keeping what the last look knew of it. Returns the bytes a sampled page
 * stands for. */
static uint64_t hb_sample_update(void)
{
  static hb_sampled_t next[HB_SAMPLE_MAX];
  unsigned n = 0, old = 0;
  uint64_t chunks = 0, sampled = 0;
  for (unsigned i = 0; i < tm_ranges.n; i++)
    for (uintptr_t a = tm_range_lo(i); a < tm_range_end(i); a += TM_CHUNK_SIZE) {
      tm_chunk_t *c = tm_chunk_of((void *)a);
      if (!(atomic_load_explicit(&c->flags, memory_order_relaxed) & TM_CHUNK_HANDED) || tm_chunk_bytes(c) == 0)
        continue;
      chunks++;
      if (n + HB_SAMPLE_PER_CHUNK > HB_SAMPLE_MAX) continue;
      sampled++;
      /* Not the same page of every chunk: its first may be special. */
      uintptr_t off = ((uintptr_t)(c - tm_chunks) * 37u) % TM_HANDBACK_SAMPLE_STRIDE;
      for (unsigned k = 0; k < HB_SAMPLE_PER_CHUNK; k++) {
        uintptr_t page = a + ((uintptr_t)k * TM_HANDBACK_SAMPLE_STRIDE + off) * HB_PAGE;
        while (old < hb_nsample && hb_sample[old].page < page) old++;
        if (old < hb_nsample && hb_sample[old].page == page) next[n] = hb_sample[old];
        else next[n] = (hb_sampled_t){ .page = page, .left = 0, .tier = -1 };
        n++;
      }
    }
  memcpy(hb_sample, next, n * sizeof next[0]);
  hb_nsample = n;
  return sampled ? (uint64_t)TM_HANDBACK_SAMPLE_STRIDE * HB_PAGE * chunks / sampled : 0;
}

void tm_handback_moved(void)
{
  hb_stale = true;
}

void tm_handback_look(uint64_t now, tm_handback_look_t why)
{
  static void *pages[HB_SAMPLE_MAX];
  static int8_t tier[HB_SAMPLE_MAX];
  if ((why == TM_HANDBACK_TICK && hb_look_ns && now - hb_look_ns < 1000000000ull) ||
      (why == TM_HANDBACK_BEFORE && !hb_stale && hb_look_ns) ||
      (why == TM_HANDBACK_AFTER && hb_after_ns && now - hb_after_ns < HB_LOOK_ASK_NS && !hb_stale))
    return;
  /* What left tier 0 since the last look, the kernel took: unless reclaim
   * moved pages down itself meanwhile. */
  bool kernels = !hb_stale && why != TM_HANDBACK_BEFORE;
  hb_look_ns = now;
  if (why == TM_HANDBACK_AFTER) hb_after_ns = now;
  hb_stale = false;
  uint64_t stands = hb_sample_update();
  for (unsigned k = 0; k < hb_nsample; k++) pages[k] = (void *)hb_sample[k].page;
  if (hb_nsample == 0 || tm_migrate_where(pages, (int)hb_nsample, tier) != 0) return;
  for (unsigned k = 0; k < hb_nsample; k++) {
    hb_sampled_t *e = &hb_sample[k];
    if (e->left && now - e->left > TM_HANDBACK_UNDONE_NS) e->left = 0;   /* stayed down */
    if (kernels && e->tier == 0 && tier[k] > 0) {
      e->left = now;
    } else if (e->left && tier[k] == 0) {
      hb_add(&hb_kundone, stands);
      e->left = 0;
    }
    e->tier = tier[k];
  }
}
