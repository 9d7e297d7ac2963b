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

/* Tier of each page of the chunk at a into tier[] (-1: no page, or a node of
 * no tier). 0 or a positive errno. */
static int migrate_where(uintptr_t a, int8_t *tier)
{
  void *pages[MIGRATE_PAGES];
  int node[MIGRATE_PAGES];
  for (unsigned i = 0; i < MIGRATE_PAGES; i++) pages[i] = (void *)(a + (uintptr_t)i * MIGRATE_PAGE);
  int err = tm_range_os()->where(pages, MIGRATE_PAGES, node);
  if (err != 0) return err;
  for (unsigned i = 0; i < MIGRATE_PAGES; i++)
    tier[i] = node[i] >= 0 && node[i] < TIER_MAX_NODES ? migrate_topo->node_tier[node[i]] : -1;
  return 0;
}

/* Pages the move left off tier `to` (after[i] a tier, not `to`) pushed to
 * its first node, one move_pages call: the move went by policy, whose new
 * page may come from any node when the tier cannot give one at once (a huge
 * page on a fragmented node: measured in the 2tier VM, every huge page of a
 * demotion came back to node0). true when it pushed any. */
static bool migrate_push(uintptr_t a, const int8_t *after, unsigned to)
{
  void *pages[MIGRATE_PAGES];
  int status[MIGRATE_PAGES], n = 0;
  if (tm_range_os()->push == NULL) return false;
  for (unsigned i = 0; i < MIGRATE_PAGES; i++)
    if (after[i] >= 0 && after[i] != (int8_t)to) pages[n++] = (void *)(a + (uintptr_t)i * MIGRATE_PAGE);
  return n > 0 && tm_range_os()->push(pages, n, migrate_topo->tier[to].first_node, status) == 0;
}

int tm_migrate_chunk(tm_chunk_t *c, unsigned to, tm_migrate_counts_t *out)
{
  if (to >= (unsigned)migrate_topo->ntiers) return EINVAL;
  if (!tm_chunk_hold(c)) return EBUSY;
  uintptr_t a = tm_chunk_addr(c);
  int8_t before[MIGRATE_PAGES], after[MIGRATE_PAGES];
  int err = migrate_where(a, before);
  const tm_tier_t *tier = &migrate_topo->tier[to];
  if (err == 0) err = tm_range_os()->move((void *)a, TM_CHUNK_SIZE, &tier->nodes, tier->first_node);
  if (err == 0) {
    /* The chunk's policy is `to` now, whatever moved: new pages go there. */
    tm_chunk_move(c, to);
    uint64_t moved = 0, failed = 0;
    int werr = migrate_where(a, after);
    if (werr == 0 && migrate_push(a, after, to)) werr = migrate_where(a, after);
    if (werr == 0) {
      for (unsigned i = 0; i < MIGRATE_PAGES; i++) {
        if (after[i] == (int8_t)to) moved += before[i] >= 0 && before[i] != (int8_t)to;
        else if (after[i] >= 0) failed++;
      }
    }
    out->moved += moved * MIGRATE_PAGE;
    out->failed += failed * MIGRATE_PAGE;
    uint8_t f = atomic_load_explicit(&c->flags, memory_order_relaxed);
    atomic_store_explicit(&c->flags, (uint8_t)(failed ? f | TM_CHUNK_STRAY : f & ~TM_CHUNK_STRAY),
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
      int node = status[k];
      if (node >= 0 && node < TIER_MAX_NODES && migrate_topo->node_tier[node] == 0) {
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

static int migrate_policy(tm_chunk_t *c, bool split)
{
  if (split ? !tm_chunk_hold(c) : !tm_chunk_hold_idle(c)) return EBUSY;
  const tm_tier_t *tier = &migrate_topo->tier[tm_chunk_tier(c)];
  void *a = (void *)tm_chunk_addr(c);
  int err = !split ? tm_range_os()->bind(a, TM_CHUNK_SIZE, &tier->nodes, tier->first_node)
            : tm_range_os()->pieces ? tm_range_os()->pieces(a, &tier->nodes, tier->first_node)
            : ENOTSUP;
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
