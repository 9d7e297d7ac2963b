#include "migrate.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "range.h"

#define MIGRATE_PAGE 4096u
#define MIGRATE_PAGES (TM_CHUNK_SIZE / MIGRATE_PAGE)

static const tm_topology_t *migrate_topo;

void tm_migrate_init(const tm_topology_t *topo)
{
  migrate_topo = topo;
}

/* The tier of a node, or of a lookup's error (-1: no page, or a node of no
 * tier). */
static int8_t migrate_tier_of(int node)
{
  return node >= 0 && node < TIER_MAX_NODES ? (int8_t)migrate_topo->node_tier[node] : -1;
}

/* Tier of each page of the chunk at a into tier[]. 0 or a positive errno. */
static int migrate_where(uintptr_t a, int8_t *tier)
{
  void *pages[MIGRATE_PAGES];
  for (unsigned i = 0; i < MIGRATE_PAGES; i++) pages[i] = (void *)(a + (uintptr_t)i * MIGRATE_PAGE);
  return tm_migrate_where(pages, MIGRATE_PAGES, tier);
}

/* The pages of the chunk at a that before[] finds off tier `to`, moved to
 * its first node with one move_pages call; after[] says where each page is
 * then: the call's own status, and for a page whose status is an error
 * (busy; a huge page's other entries, moved with it or not) a lookup. true
 * when a page is still off `to` (the node full, busy, pinned, or no push). */
static bool migrate_push(uintptr_t a, const int8_t *before, unsigned to, int8_t *after)
{
  void *pages[MIGRATE_PAGES];
  int status[MIGRATE_PAGES];
  unsigned at[MIGRATE_PAGES], n = 0, m = 0;
  memcpy(after, before, MIGRATE_PAGES);
  for (unsigned i = 0; i < MIGRATE_PAGES; i++)
    if (before[i] >= 0 && before[i] != (int8_t)to) {
      at[n] = i;
      pages[n++] = (void *)(a + (uintptr_t)i * MIGRATE_PAGE);
    }
  if (n == 0) return false;
  if (tm_range_os()->push == NULL ||
      tm_range_os()->push(pages, (int)n, migrate_topo->tier[to].first_node, status) != 0)
    return true;
  for (unsigned k = 0; k < n; k++) {
    if (status[k] >= 0 || status[k] == -ENOENT) {
      after[at[k]] = migrate_tier_of(status[k]);
    } else {
      at[m] = at[k];
      pages[m++] = pages[k];
    }
  }
  if (m > 0 && tm_range_os()->where(pages, (int)m, status) == 0)
    for (unsigned k = 0; k < m; k++) after[at[k]] = migrate_tier_of(status[k]);
  for (unsigned i = 0; i < MIGRATE_PAGES; i++)
    if (after[i] >= 0 && after[i] != (int8_t)to) return true;
  return false;
}

int tm_migrate_chunk(tm_chunk_t *c, unsigned to, tm_migrate_counts_t *out)
{
  if (to >= (unsigned)migrate_topo->ntiers) return EINVAL;
  if (!tm_chunk_hold(c)) return EBUSY;
  uintptr_t a = tm_chunk_addr(c);
  int8_t before[MIGRATE_PAGES], after[MIGRATE_PAGES];
  int err = migrate_where(a, before);
  const tm_tier_t *tier = &migrate_topo->tier[to];
  /* The policy first (new pages go to `to`), then the pages with move_pages:
   * it takes the process's mmap lock only to find each page, for reading,
   * where mbind(MPOL_MF_MOVE) takes it for writing (in the 2tier VM another
   * thread mapping pages did 1.2-1.6x the ops during a move of 4 KiB pages:
   * bench/reclaim.c lockwait); and its status says where each page went,
   * which saves a lookup of the whole chunk after. */
  if (err == 0) err = tm_range_os()->bind((void *)a, TM_CHUNK_SIZE, &tier->nodes, tier->first_node);
  if (err == 0) {
    /* The chunk's policy is `to` now, whatever moved: new pages go there. */
    tm_chunk_move(c, to);
    uint64_t moved = 0, failed = 0;
    int werr = 0;
    /* What move_pages could not place on the first node goes by policy: a
     * tier of several nodes whose first is full. */
    if (migrate_push(a, before, to, after) &&
        tm_range_os()->move((void *)a, TM_CHUNK_SIZE, &tier->nodes, tier->first_node) == 0)
      werr = migrate_where(a, after);
    if (werr == 0) {
      for (unsigned i = 0; i < MIGRATE_PAGES; i++) {
        if (after[i] == (int8_t)to) moved += before[i] >= 0 && before[i] != (int8_t)to;
        else if (after[i] >= 0) failed++;
      }
    }
    out->moved += moved * MIGRATE_PAGE;
    out->failed += failed * MIGRATE_PAGE;
    uint16_t f = atomic_load_explicit(&c->flags, memory_order_relaxed) & ~TM_CHUNK_HANDED;
    atomic_store_explicit(&c->flags, (uint16_t)(failed ? f | TM_CHUNK_STRAY : f & ~TM_CHUNK_STRAY),
                          memory_order_relaxed);
  }
  tm_chunk_release(c);
  return err;
}

#define MIGRATE_PIECE_PAGES (MIGRATE_PAGES / TM_PIECES)

int tm_migrate_pieces(tm_chunk_t *c, uint32_t pieces, tm_migrate_counts_t *out)
{
  if (!tm_chunk_hold(c)) return EBUSY;
  uintptr_t a = tm_chunk_addr(c);
  int8_t before[MIGRATE_PAGES];
  void *pages[MIGRATE_PAGES];
  int status[MIGRATE_PAGES];
  unsigned at[MIGRATE_PAGES], n = 0;
  int err = tm_range_os()->push ? migrate_where(a, before) : ENOTSUP;
  for (unsigned i = 0; err == 0 && i < MIGRATE_PAGES; i++)
    if ((pieces >> (i / MIGRATE_PIECE_PAGES) & 1) && before[i] > 0) {
      at[n] = i;
      pages[n++] = (void *)(a + (uintptr_t)i * MIGRATE_PAGE);
    }
  if (err == 0 && n > 0) err = tm_range_os()->push(pages, (int)n, migrate_topo->tier[0].first_node, status);
  if (err == 0) {
    uint32_t up = 0;
    uint64_t moved = 0, failed = 0;
    for (unsigned k = 0; k < n; k++) {
      if (migrate_tier_of(status[k]) == 0) {
        moved++;
        up |= 1u << (at[k] / MIGRATE_PIECE_PAGES);
      } else {
        failed++;
      }
    }
    tm_chunk_shift(c, up, (uint32_t)(moved * MIGRATE_PAGE));
    out->moved += moved * MIGRATE_PAGE;
    out->failed += failed * MIGRATE_PAGE;
  }
  tm_chunk_release(c);
  return err;
}

int tm_migrate_pages_on(tm_chunk_t *c, unsigned on, tm_migrate_pages_t *out)
{
  if (!tm_chunk_hold(c)) return EBUSY;
  int8_t tier[MIGRATE_PAGES];
  int err = migrate_where(tm_chunk_addr(c), tier);
  tm_chunk_release(c);
  memset(out, 0, sizeof *out);
  for (unsigned i = 0; err == 0 && i < MIGRATE_PAGES; i++)
    if (tier[i] == (int8_t)on) out->w[i / 64] |= 1ull << (i % 64);
  return err;
}

int tm_migrate_give_back(tm_chunk_t *c, unsigned from, tm_migrate_pages_t *mask, tm_migrate_counts_t *out)
{
  int err = tm_range_os()->push == NULL ? ENOTSUP : !tm_chunk_hold(c) ? EBUSY : 0;
  if (err != 0) {
    memset(mask, 0, sizeof *mask);
    return err;
  }
  unsigned to = tm_chunk_tier(c);
  int8_t before[MIGRATE_PAGES], after[MIGRATE_PAGES];
  for (unsigned i = 0; i < MIGRATE_PAGES; i++) before[i] = mask->w[i / 64] >> (i % 64) & 1 ? (int8_t)from : -1;
  migrate_push(tm_chunk_addr(c), before, to, after);
  memset(mask, 0, sizeof *mask);
  for (unsigned i = 0; i < MIGRATE_PAGES; i++) {
    if (before[i] < 0) continue;
    if (after[i] == (int8_t)to) {
      mask->w[i / 64] |= 1ull << (i % 64);
      out->moved += MIGRATE_PAGE;
    } else if (after[i] >= 0) {
      out->failed += MIGRATE_PAGE;
    }
  }
  tm_chunk_release(c);
  return 0;
}

int tm_migrate_where(void *const *pages, int n, int8_t *tier)
{
  int node[MIGRATE_PAGES];
  for (int at = 0; at < n; at += (int)MIGRATE_PAGES) {
    int k = n - at < (int)MIGRATE_PAGES ? n - at : (int)MIGRATE_PAGES;
    int err = tm_range_os()->where(pages + at, k, node);
    if (err != 0) return err;
    for (int i = 0; i < k; i++) tier[at + i] = migrate_tier_of(node[i]);
  }
  return 0;
}

static int migrate_policy(tm_chunk_t *c, bool split)
{
  if (split ? !tm_chunk_hold(c) : !tm_chunk_hold_idle(c)) return EBUSY;
  const tm_tier_t *tier = &migrate_topo->tier[tm_chunk_tier(c)];
  void *a = (void *)tm_chunk_addr(c);
  int err = !split ? tm_range_os()->bind(a, TM_CHUNK_SIZE, &tier->nodes, tier->first_node)
            : tm_range_os()->pieces ? tm_range_os()->pieces(a, &tier->nodes, tier->first_node)
            : ENOTSUP;
  if (err == 0 || !split) atomic_fetch_and_explicit(&c->flags, (uint16_t)~TM_CHUNK_HANDED, memory_order_relaxed);
  tm_chunk_release(c);
  return err;
}

int tm_migrate_hand(tm_chunk_t *c, const tm_nodemask_t *nodes, bool scan)
{
  if (tm_range_os()->hand == NULL) return ENOTSUP;
  if (!tm_chunk_hold(c)) return EBUSY;
  int err = tm_range_os()->hand((void *)tm_chunk_addr(c), TM_CHUNK_SIZE, nodes, scan);
  if (err == 0) atomic_fetch_or_explicit(&c->flags, TM_CHUNK_HANDED, memory_order_relaxed);
  tm_chunk_release(c);
  return err;
}

int tm_migrate_split(tm_chunk_t *c)
{
  return migrate_policy(c, true);
}

int tm_migrate_merge(tm_chunk_t *c)
{
  return migrate_policy(c, false);
}

/* Pages resident in one chunk's mincore vector: bit 0 of each byte, summed
 * eight bytes at a time (a pass sums the whole heap's vectors). */
static unsigned migrate_count(const unsigned char *vec)
{
  const uint64_t ones = 0x0101010101010101ull;
  unsigned n = 0;
  for (unsigned i = 0; i < MIGRATE_PAGES; i += 8) {
    uint64_t w;
    memcpy(&w, vec + i, sizeof w);
    n += (unsigned)(((w & ones) * ones) >> 56);
  }
  return n;
}

static unsigned migrate_resident_pages(uintptr_t a)
{
  unsigned char vec[MIGRATE_PAGES];
  if (tm_range_os()->resident((void *)a, TM_CHUNK_SIZE, vec) != 0) return 0;
  return migrate_count(vec);
}

uint64_t tm_migrate_resident(tm_chunk_t *c)
{
  return (uint64_t)migrate_resident_pages(tm_chunk_addr(c)) * MIGRATE_PAGE;
}

void tm_migrate_resident_run(tm_chunk_t *c, unsigned n, uint64_t *out)
{
  unsigned char vec[TM_MIGRATE_RUN * MIGRATE_PAGES];
  if (n > TM_MIGRATE_RUN) n = TM_MIGRATE_RUN;
  bool ok = tm_range_os()->resident((void *)tm_chunk_addr(c), n * TM_CHUNK_SIZE, vec) == 0;
  for (unsigned k = 0; k < n; k++)
    out[k] = ok ? (uint64_t)migrate_count(vec + k * MIGRATE_PAGES) * MIGRATE_PAGE : 0;
}

int tm_migrate_pageout(tm_chunk_t *c, tm_migrate_counts_t *out)
{
  uintptr_t a = tm_chunk_addr(c);
  unsigned before = migrate_resident_pages(a);
  if (before == 0) return 0;
  int err = tm_range_os()->pageout((void *)a, TM_CHUNK_SIZE);
  if (err != 0) return err;
  tm_chunk_unshift(c);   /* a piece's pages come back by the chunk's policy */
  out->asked += (uint64_t)before * MIGRATE_PAGE;
  unsigned after = migrate_resident_pages(a);
  out->moved += (uint64_t)(before > after ? before - after : 0) * MIGRATE_PAGE;
  return 0;
}
