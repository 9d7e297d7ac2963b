#include "site.h"

#include <pthread.h>
#include <string.h>
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "arena.h"
#include "chunkmap.h"
#include "hotness.h"
#include "notify.h"
#include "options.h"
#include "range.h"

uint8_t tm_site_routing;
uint8_t tm_site_filter[TM_SITE_FILTER];

typedef struct site_s {
  const void *frames[TM_SITE_FRAMES];   /* frames[0]: the call site, the key; NULL: a free entry */
  uint64_t sampled;                     /* bytes the samples stand for, halved at each verdict */
  uint32_t samples;                     /* halved likewise */
  int trial;                            /* its trial's arena; SITE_UNTRIED, or SITE_TRIED (done) */
} site_t;

#define SITE_UNTRIED (-1)
#define SITE_TRIED (-2)

/* A site's trial, in an arena of its own (arena k is trial k's). */
enum { TRIAL_ROUTED = 1, TRIAL_COLD, TRIAL_SPENT };
typedef struct trial_s {
  const void *frames[TM_SITE_FRAMES];
  int site;               /* its entry in the table while routed */
  int state;
  unsigned reads;         /* verdicts while the arena held memory and had not grown */
  unsigned looks;         /* verdicts while the arena held memory */
  uint64_t all;           /* bytes of the arena's chunks at the last verdict */
  uint64_t hot, cold;     /* bytes of the arena's hot and cold chunks at the last verdict */
} trial_t;

static struct {
  bool on;                /* TIERMALLOC_SITES, and more than one tier */
  uint64_t mean;          /* TIERMALLOC_SITE_SAMPLE */
  pthread_mutex_t lock;   /* the table and the trials; sampling only tries it */
  site_t table[TM_SITE_MAX];
  trial_t trial[TM_SITE_ARENAS];
  _Atomic(const void *) trial_ra[TM_SITE_ARENAS];   /* the routed site of each, or NULL */
  _Atomic bool trial_cold[TM_SITE_ARENAS];          /* found cold: every call routed */
  unsigned ntrials;       /* arenas made (the reclaim thread adds them) */
  uint64_t samples;
} st = { .lock = PTHREAD_MUTEX_INITIALIZER };

static bool site_active(void)
{
  return st.on && tm_hotness_tracking() && tm_arenas_ready();
}

void tm_site_init(unsigned ntiers)
{
  st.on = tm_option(TM_OPTION_SITES)->num != 0 && ntiers > 1;
  st.mean = tm_option(TM_OPTION_SITE_SAMPLE)->num;
  if (st.mean < 4096) st.mean = 4096;
  for (unsigned i = 0; i < TM_SITE_MAX; i++) st.table[i] = (site_t){ .trial = SITE_UNTRIED };
  /* libunwind's shared cache takes a lock a fork could leave held in the
   * child; each thread's own needs none. */
  unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
}

/* The thread's next pseudo-random number (xorshift32). */
static uint32_t site_rand(tm_thread_t *t)
{
  uint32_t x = t->site_rand ? t->site_rand : (uint32_t)((uintptr_t)t >> 4) | 1u;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  return t->site_rand = x;
}

/* The thread's next gap between samples: uniform in [mean/2, 3 mean/2]. */
static uint64_t site_gap(tm_thread_t *t)
{
  return st.mean / 2 + (uint64_t)site_rand(t) % (st.mean + 1);
}

/* The entry of call site frames[0], made (in a free entry, or in place of
 * the least sampled one not on trial) if there is none; NULL when every
 * entry is on trial. Under the lock. */
static site_t *site_entry(const void *const frames[TM_SITE_FRAMES])
{
  site_t *victim = NULL;
  for (unsigned i = 0; i < TM_SITE_MAX; i++) {
    site_t *s = &st.table[i];
    if (s->frames[0] == frames[0]) return s;
    if (s->trial >= 0) continue;
    if (!victim || (victim->frames[0] && (!s->frames[0] || s->sampled < victim->sampled))) victim = s;
  }
  if (victim) {
    *victim = (site_t){ .trial = SITE_UNTRIED };
    memcpy(victim->frames, frames, sizeof victim->frames);
  }
  return victim;
}

void tm_site_sample(tm_thread_t *t, const void *ra, size_t size)
{
  t->site_left = TM_SITE_DUE / 2;   /* no sample nested in this one (libunwind may allocate) */
  if (!site_active()) {
    /* Inactive (no budget, not the accessed bits, or no reclaim thread reads
     * them yet): no sample, but a look again after as many bytes, which
     * costs a call and a few loads. */
    t->site_left = site_gap(t);
    tm_notify_allocated();
    return;
  }
  /* Unwound before the lock: libunwind takes the loader's lock, which a
   * thread in dl_iterate_phdr holds while it may allocate. */
  void *ips[TM_SITE_FRAMES + 8];
  int n = unw_backtrace(ips, (int)(sizeof ips / sizeof ips[0]));
  const void *frames[TM_SITE_FRAMES] = { ra };
  for (int i = 0; i < n; i++) {
    if (ips[i] != ra) continue;
    for (int k = 1; k < TM_SITE_FRAMES && i + k < n; k++) frames[k] = ips[i + k];
    break;
  }
  if (pthread_mutex_trylock(&st.lock) == 0) {
    site_t *s = site_entry(frames);
    if (s) {
      s->sampled += size > st.mean ? size : st.mean;
      s->samples++;
    }
    st.samples++;
    pthread_mutex_unlock(&st.lock);
  }
  t->site_left = site_gap(t);
  tm_notify_allocated();
}

int tm_site_flags(tm_thread_t *t, const void *ra)
{
  unsigned k = __atomic_load_n(&tm_site_filter[tm_site_hash(ra)], __ATOMIC_ACQUIRE) & TM_SITE_ARENA;
  if (k == 0 || atomic_load_explicit(&st.trial_ra[k - 1], memory_order_relaxed) != ra) return 0;
  /* The gaps are drawn, not fixed: a fixed count, shared by the sites a
   * thread calls or one of a site's own, can stay out of phase with a
   * program's calls (one hot block then five cold ones) and never route a
   * site, or route only its calls of one kind. */
  if (!atomic_load_explicit(&st.trial_cold[k - 1], memory_order_relaxed)) {
    if (t->site_skip > 0) {   /* here for a sample, between two routed calls */
      t->site_skip--;
      return 0;
    }
    t->site_skip = (site_rand(t) >> 8) % (2 * TM_SITE_TRIAL_SHARE - 1);
  }
  return tm_arena_site_flags(t, k - 1);
}

/* Bytes of each site arena's chunks in all, and those the accessed bits call
 * hot, and cold. */
static void site_measure(uint64_t all[], uint64_t hot[], uint64_t cold[], uint64_t steady[])
{
  for (unsigned i = 0; i < tm_ranges.n; i++)
    for (uintptr_t a = tm_range_lo(i); a < tm_range_end(i); a += TM_CHUNK_SIZE) {
      tm_chunk_t *c = tm_chunk_of((void *)a);
      unsigned k = atomic_load_explicit(&c->site, memory_order_relaxed);
      uint64_t bytes = k ? tm_chunk_bytes(c) : 0;
      if (bytes == 0) continue;
      all[k - 1] += bytes;
      if (tm_hotness_hot(c)) hot[k - 1] += bytes;
      else if (tm_hotness_cold(c)) cold[k - 1] += bytes;
      if (tm_hotness_steady(c)) steady[k - 1] += bytes;
    }
}

/* The untried site sampled most, with TM_SITE_MIN_SAMPLES samples or more
 * and its routing filter entry free; -1 if none. Under the lock. */
static int site_candidate(void)
{
  int best = -1;
  for (int i = 0; i < TM_SITE_MAX; i++) {
    const site_t *s = &st.table[i];
    if (!s->frames[0] || s->trial != SITE_UNTRIED || s->samples < TM_SITE_MIN_SAMPLES ||
        __atomic_load_n(&tm_site_filter[tm_site_hash(s->frames[0])], __ATOMIC_RELAXED))
      continue;
    if (best < 0 || s->sampled > st.table[best].sampled) best = i;
  }
  return best;
}

/* Trials routed now (on trial, or cold). Under the lock. */
static unsigned site_routed(void)
{
  unsigned n = 0;
  for (unsigned k = 0; k < st.ntrials; k++) n += st.trial[k].state != TRIAL_SPENT;
  return n;
}

/* Sets the filter entry of trial k's site to v, if the entry is still
 * trial k's (two sites can share a hash; the first routed keeps it). */
static void site_filter_set(unsigned k, uint8_t v)
{
  unsigned h = tm_site_hash(st.trial[k].frames[0]);
  if ((__atomic_load_n(&tm_site_filter[h], __ATOMIC_RELAXED) & TM_SITE_ARENA) == k + 1)
    __atomic_store_n(&tm_site_filter[h], v, __ATOMIC_RELAXED);
}

/* Ends trial k: its site's calls go back to the automatic arenas (the
 * arena keeps what the site allocated there till it is freed). Under the
 * lock. */
static void site_spend(unsigned k)
{
  trial_t *tr = &st.trial[k];
  site_filter_set(k, 0);
  atomic_store_explicit(&st.trial_ra[k], NULL, memory_order_relaxed);
  atomic_store_explicit(&st.trial_cold[k], false, memory_order_relaxed);
  tm_arena_site_prefer(k, 0);
  if (tr->site >= 0 && st.table[tr->site].frames[0] == tr->frames[0]) st.table[tr->site].trial = SITE_TRIED;
  tr->site = -1;
  tr->state = TRIAL_SPENT;
}

void tm_site_evaluate(void)
{
  if (!site_active()) return;
  uint64_t all[TM_SITE_ARENAS] = { 0 }, hot[TM_SITE_ARENAS] = { 0 }, cold[TM_SITE_ARENAS] = { 0 };
  uint64_t steady[TM_SITE_ARENAS] = { 0 };
  if (st.ntrials) site_measure(all, hot, cold, steady);
  pthread_mutex_lock(&st.lock);
  for (unsigned k = 0; k < st.ntrials; k++) {
    trial_t *tr = &st.trial[k];
    if (tr->state == TRIAL_SPENT) continue;
    tr->hot = hot[k];
    tr->cold = cold[k];
    uint64_t before = tr->all;
    tr->all = all[k];
    bool is_cold = cold[k] >= TM_CHUNK_SIZE && cold[k] >= TM_SITE_COLD_RATIO * hot[k];
    if (tr->state == TRIAL_ROUTED && is_cold) {
      tr->state = TRIAL_COLD;
      tm_arena_site_prefer(k, 1);
      atomic_store_explicit(&st.trial_cold[k], true, memory_order_relaxed);
      site_filter_set(k, (uint8_t)(k + 1) | TM_SITE_ALL);
    } else if (tr->state == TRIAL_ROUTED) {
      /* Memory written since the last read cannot be cold yet: while the
       * site fills chunks its trial waits, up to TM_SITE_TRIAL_MAX. */
      tr->looks += all[k] != 0;
      tr->reads += all[k] != 0 && all[k] <= before;
      if (tr->reads >= TM_SITE_TRIAL || tr->looks >= TM_SITE_TRIAL_MAX)
        site_spend(k);   /* not found cold: it pays no routing */
    } else if (steady[k] > cold[k]) {
      site_spend(k);   /* cold no more */
    }
  }
  int pick = site_routed() < TM_SITE_SLOTS && st.ntrials < TM_SITE_ARENAS ? site_candidate() : -1;
  if (pick >= 0) st.table[pick].trial = (int)st.ntrials;   /* kept from eviction meanwhile */
  for (unsigned i = 0; i < TM_SITE_MAX; i++) {
    st.table[i].sampled -= st.table[i].sampled / 2;
    st.table[i].samples -= st.table[i].samples / 2;
  }
  pthread_mutex_unlock(&st.lock);
  if (pick < 0) return;
  /* One trial a verdict; its arena made outside the lock (jemalloc's own
   * locks), and only then published to the allocation paths. */
  unsigned k = st.ntrials;
  const void *ra = st.table[pick].frames[0];
  if (tm_arena_site_create(k, 0) != 0) {
    pthread_mutex_lock(&st.lock);
    st.table[pick].trial = SITE_TRIED;
    st.on = false;   /* said once (arena.c); no more tries */
    pthread_mutex_unlock(&st.lock);
    return;
  }
  pthread_mutex_lock(&st.lock);
  st.trial[k] = (trial_t){ .site = pick, .state = TRIAL_ROUTED };
  memcpy(st.trial[k].frames, st.table[pick].frames, sizeof st.trial[k].frames);
  st.ntrials = k + 1;
  pthread_mutex_unlock(&st.lock);
  atomic_store_explicit(&st.trial_ra[k], ra, memory_order_relaxed);
  __atomic_store_n(&tm_site_filter[tm_site_hash(ra)], (uint8_t)(k + 1), __ATOMIC_RELEASE);
  __atomic_store_n(&tm_site_routing, 1, __ATOMIC_RELAXED);
}

unsigned tm_site_list(tm_site_info_t *out, unsigned n)
{
  pthread_mutex_lock(&st.lock);
  unsigned m = 0;
  for (unsigned k = 0; k < st.ntrials && m < n; k++) {
    const trial_t *tr = &st.trial[k];
    if (tr->state == TRIAL_SPENT) continue;
    out[m] = (tm_site_info_t){ .sampled = tr->site >= 0 ? st.table[tr->site].sampled : 0, .hot = tr->hot,
                               .cold = tr->cold, .arena = (int)k, .cold_verdict = tr->state == TRIAL_COLD };
    memcpy(out[m].frames, tr->frames, sizeof out[m].frames);
    m++;
  }
  pthread_mutex_unlock(&st.lock);
  return m;
}

void tm_site_counts(uint64_t *samples, unsigned *routed, unsigned *cold, unsigned *tried)
{
  pthread_mutex_lock(&st.lock);
  *samples = st.samples;
  *routed = site_routed();
  *tried = st.ntrials;
  *cold = 0;
  for (unsigned k = 0; k < st.ntrials; k++) *cold += st.trial[k].state == TRIAL_COLD;
  pthread_mutex_unlock(&st.lock);
}

void tm_site_prefork(void)
{
  pthread_mutex_lock(&st.lock);
}

void tm_site_postfork_parent(void)
{
  pthread_mutex_unlock(&st.lock);
}

void tm_site_postfork_child(void)
{
  pthread_mutex_init(&st.lock, NULL);
}
