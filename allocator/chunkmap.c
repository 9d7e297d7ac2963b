#include "chunkmap.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>

#include "log.h"

tm_chunk_t *tm_chunks;
uintptr_t tm_chunks_per_range;
_Atomic uint64_t *tm_chunk_pieces;

static _Atomic int64_t chunk_bytes[TIER_MAX_TIERS];

/* Set in a chunk's committed count while one thread places the chunk (it
 * made it non-empty and chooses its tier) or empties it (it took the last
 * committed byte and gives every page back). A thread committing into the
 * chunk meanwhile waits: its bytes then count on the tier the chunk ends up
 * on, its pages are not touched before the chunk is bound there, and no
 * page it writes is given back. */
#define CHUNK_BUSY 0x80000000u

/* Held shared by a thread for as long as it may hold a chunk CHUNK_BUSY, and
 * exclusive around fork: a thread that placed or emptied a chunk when
 * another forked would leave the bit set in the child for good, and every
 * commit into that chunk would wait forever. */
static pthread_rwlock_t chunk_fork_lock = PTHREAD_RWLOCK_INITIALIZER;
static _Atomic int64_t chunk_charged[TIER_MAX_TIERS];

int tm_chunkmap_init(void)
{
  if (tm_ranges.n == 0) return 0;
  uintptr_t per = tm_range_span() >> TM_CHUNK_SHIFT;
  size_t n = (size_t)tm_ranges.n * per, size = n * (sizeof(tm_chunk_t) + sizeof *tm_chunk_pieces);
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) {
    int err = errno;
    tm_warn("cannot map the chunk map (%zu MiB of address space); budgets are not enforced",
            size >> 20);
    return err;
  }
  tm_chunks_per_range = per;
  /* The pieces' records first: 8-byte aligned, then the 12-byte entries. */
  tm_chunk_pieces = p;
  tm_chunks = (tm_chunk_t *)(tm_chunk_pieces + n);
  return 0;
}

unsigned tm_chunk_home(const tm_chunk_t *c)
{
  return (unsigned)((uintptr_t)(c - tm_chunks) / tm_chunks_per_range);
}

uintptr_t tm_chunk_addr(const tm_chunk_t *c)
{
  uintptr_t k = (uintptr_t)(c - tm_chunks);
  return tm_range_lo((unsigned)(k / tm_chunks_per_range)) +
         ((k % tm_chunks_per_range) << TM_CHUNK_SHIFT);
}

/* Waits while another thread places or empties c; returns its count then. */
static uint32_t chunk_settled(tm_chunk_t *c)
{
  uint32_t v;
  /* One mbind or one madvise of 2 MiB: not long, but the thread doing it
   * may be descheduled, so give it the CPU. */
  while ((v = atomic_load_explicit(&c->committed, memory_order_acquire)) & CHUNK_BUSY)
    sched_yield();
  return v;
}

bool tm_chunk_commit_bytes(tm_chunk_t *c, uint32_t n)
{
  pthread_rwlock_rdlock(&chunk_fork_lock);
  uint32_t old = chunk_settled(c);
  for (;;) {
    uint32_t want = old == 0 ? n | CHUNK_BUSY : old + n;
    if (atomic_compare_exchange_weak_explicit(&c->committed, &old, want, memory_order_acquire,
                                              memory_order_relaxed))
      break;
    if (old & CHUNK_BUSY) old = chunk_settled(c);
  }
  if (old == 0) return true;   /* the caller places it; tm_chunk_place ends the wait */
  atomic_fetch_add_explicit(&chunk_bytes[tm_chunk_tier(c)], n, memory_order_relaxed);
  pthread_rwlock_unlock(&chunk_fork_lock);
  return false;
}

bool tm_chunk_reserve(unsigned t, uint32_t n, uint64_t limit)
{
  int64_t cur = atomic_load_explicit(&chunk_bytes[t], memory_order_relaxed);
  do {
    /* < 0: read between two updates. */
    if (limit != UINT64_MAX && (cur > 0 ? (uint64_t)cur : 0) + TM_CHUNK_SIZE > limit) return false;
  } while (!atomic_compare_exchange_weak_explicit(&chunk_bytes[t], &cur, cur + n,
                                                  memory_order_relaxed, memory_order_relaxed));
  atomic_fetch_add_explicit(&chunk_charged[t], 1, memory_order_relaxed);
  return true;
}

void tm_chunk_unreserve(unsigned t, uint32_t n)
{
  atomic_fetch_sub_explicit(&chunk_bytes[t], n, memory_order_relaxed);
  atomic_fetch_sub_explicit(&chunk_charged[t], 1, memory_order_relaxed);
}

void tm_chunk_mark_site(const void *p, size_t size, uint8_t site)
{
  uintptr_t a = (uintptr_t)p & ~(TM_CHUNK_SIZE - 1), end = (uintptr_t)p + size;
  for (tm_chunk_t *c; a < end && (c = tm_chunk_of((void *)a)) != NULL; a += TM_CHUNK_SIZE)
    atomic_store_explicit(&c->site, site, memory_order_relaxed);
}

void tm_chunk_place(tm_chunk_t *c, unsigned t)
{
  atomic_store_explicit(&c->tier, (uint8_t)(t == tm_chunk_home(c) ? 0 : t + 1),
                        memory_order_relaxed);
  atomic_fetch_and_explicit(&c->committed, ~CHUNK_BUSY, memory_order_release);
  pthread_rwlock_unlock(&chunk_fork_lock);
}

bool tm_chunk_decommit_bytes(tm_chunk_t *c, uint32_t n)
{
  pthread_rwlock_rdlock(&chunk_fork_lock);
  /* The caller's n bytes are committed here, so nobody places or empties the
   * chunk now; but reclaim may hold it while it moves it: wait, so the bytes
   * come off the tier the chunk ends up on. */
  uint32_t old = chunk_settled(c);
  while (!atomic_compare_exchange_weak_explicit(&c->committed, &old,
                                                old == n ? CHUNK_BUSY : old - n,
                                                memory_order_acquire, memory_order_relaxed)) {
    if (old & CHUNK_BUSY) old = chunk_settled(c);
  }
  tm_chunk_unshift(c);   /* which pieces' bytes went is not known */
  unsigned t = tm_chunk_tier(c);
  atomic_fetch_sub_explicit(&chunk_bytes[t], n, memory_order_relaxed);
  if (old != n) {
    pthread_rwlock_unlock(&chunk_fork_lock);
    return false;
  }
  atomic_fetch_sub_explicit(&chunk_charged[t], 1, memory_order_relaxed);
  return true;   /* empty and held: the caller gives its pages back, then tm_chunk_emptied */
}

void tm_chunk_emptied(tm_chunk_t *c)
{
  /* What reclaim knew of its pages is void: it has none. */
  atomic_fetch_and_explicit(&c->flags, (uint16_t)(TM_CHUNK_KEEP | TM_CHUNK_BASE),
                            memory_order_relaxed);
  atomic_store_explicit(&c->heat, 0, memory_order_relaxed);
  atomic_store_explicit(&c->committed, 0, memory_order_release);
  pthread_rwlock_unlock(&chunk_fork_lock);
}

static bool chunk_hold(tm_chunk_t *c, bool idle)
{
  pthread_rwlock_rdlock(&chunk_fork_lock);
  uint32_t old = atomic_load_explicit(&c->committed, memory_order_relaxed);
  while ((idle || old != 0) && !(old & CHUNK_BUSY)) {
    if (atomic_compare_exchange_weak_explicit(&c->committed, &old, old | CHUNK_BUSY,
                                              memory_order_acquire, memory_order_relaxed))
      return true;
  }
  pthread_rwlock_unlock(&chunk_fork_lock);
  return false;
}

bool tm_chunk_hold(tm_chunk_t *c)
{
  return chunk_hold(c, false);
}

bool tm_chunk_hold_idle(tm_chunk_t *c)
{
  return chunk_hold(c, true);
}

void tm_chunk_shift(tm_chunk_t *c, uint32_t pieces, uint32_t bytes)
{
  _Atomic uint64_t *r = &tm_chunk_pieces[c - tm_chunks];
  uint64_t old = atomic_load_explicit(r, memory_order_relaxed), want;
  uint32_t committed = tm_chunk_bytes(c), add;
  do {
    uint32_t have = (uint32_t)(old >> 32);
    add = have + bytes > committed ? (committed > have ? committed - have : 0) : bytes;
    want = ((uint64_t)(have + add) << 32) | (uint32_t)old | pieces;
  } while (!atomic_compare_exchange_weak_explicit(r, &old, want, memory_order_relaxed,
                                                  memory_order_relaxed));
  atomic_fetch_sub_explicit(&chunk_bytes[tm_chunk_tier(c)], add, memory_order_relaxed);
  atomic_fetch_add_explicit(&chunk_bytes[0], add, memory_order_relaxed);
}

void tm_chunk_unshift(tm_chunk_t *c)
{
  _Atomic uint64_t *r = &tm_chunk_pieces[c - tm_chunks];
  if (atomic_load_explicit(r, memory_order_relaxed) == 0) return;
  /* One exchange: of two threads dropping it at once, one counts it back. */
  uint32_t bytes = (uint32_t)(atomic_exchange_explicit(r, 0, memory_order_relaxed) >> 32);
  atomic_fetch_sub_explicit(&chunk_bytes[0], bytes, memory_order_relaxed);
  atomic_fetch_add_explicit(&chunk_bytes[tm_chunk_tier(c)], bytes, memory_order_relaxed);
}

void tm_chunk_move(tm_chunk_t *c, unsigned to)
{
  tm_chunk_unshift(c);
  unsigned from = tm_chunk_tier(c);
  if (from == to) return;
  uint32_t n = atomic_load_explicit(&c->committed, memory_order_relaxed) & ~CHUNK_BUSY;
  atomic_fetch_sub_explicit(&chunk_charged[from], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&chunk_charged[to], 1, memory_order_relaxed);
  atomic_fetch_sub_explicit(&chunk_bytes[from], n, memory_order_relaxed);
  atomic_fetch_add_explicit(&chunk_bytes[to], n, memory_order_relaxed);
  atomic_store_explicit(&c->tier, (uint8_t)(to == tm_chunk_home(c) ? 0 : to + 1),
                        memory_order_relaxed);
}

void tm_chunk_release(tm_chunk_t *c)
{
  atomic_fetch_and_explicit(&c->committed, ~CHUNK_BUSY, memory_order_release);
  pthread_rwlock_unlock(&chunk_fork_lock);
}

uint32_t tm_chunk_bytes(const tm_chunk_t *c)
{
  return atomic_load_explicit(&c->committed, memory_order_relaxed) & ~CHUNK_BUSY;
}

void tm_chunkmap_prefork(void)
{
  pthread_rwlock_wrlock(&chunk_fork_lock);
}

void tm_chunkmap_postfork_parent(void)
{
  pthread_rwlock_unlock(&chunk_fork_lock);
}

void tm_chunkmap_postfork_child(void)
{
  pthread_rwlock_init(&chunk_fork_lock, NULL);
}

uint64_t tm_chunk_committed(unsigned t)
{
  if (t >= TIER_MAX_TIERS) return 0;
  int64_t v = atomic_load_explicit(&chunk_bytes[t], memory_order_relaxed);
  return v > 0 ? (uint64_t)v : 0;   /* a reader between two updates */
}

uint64_t tm_chunk_charged(unsigned t)
{
  if (t >= TIER_MAX_TIERS) return 0;
  int64_t v = atomic_load_explicit(&chunk_charged[t], memory_order_relaxed);
  return v > 0 ? (uint64_t)v : 0;
}
