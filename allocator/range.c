#include "range.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/resource.h>

#include "log.h"

#define RANGE_ALIGN ((size_t)2 << 20)
#define RANGE_MIN_SHIFT 26   /* the smallest stride: 64 MiB */
#define RANGE_MAX_SHIFT 46   /* the largest: 64 TiB (x86-64 user space is 128) */

tm_ranges_t tm_ranges;

static const tm_os_t *range_os = &tm_os_linux;
static _Atomic uintptr_t range_next[TIER_MAX_TIERS];   /* bump pointers */
static _Atomic uint64_t range_carved[TIER_MAX_TIERS];
static size_t range_huge_min;

static unsigned range_log2_ceil(size_t x)
{
  unsigned s = 0;
  while (s < 63 && ((size_t)1 << s) < x) s++;
  return s;
}

/* A PROT_NONE reservation counts against an address-space limit (RLIMIT_AS,
 * ulimit -v): under one, the n ranges take at most half of it, and the
 * program keeps the rest for its stacks, libraries and file mappings. */
static unsigned range_max_shift(unsigned n)
{
  struct rlimit rl;
  unsigned s = RANGE_MAX_SHIFT;
  if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return s;
  while (s > RANGE_MIN_SHIFT && ((uint64_t)n << s) > rl.rlim_cur / 2) s--;
  return s;
}

int tm_ranges_init(const tm_topology_t *topo, size_t size, size_t huge_min,
                   const tm_os_t *os)
{
  range_os = os;
  range_huge_min = huge_min;
  unsigned n = (unsigned)topo->ntiers;
  size_t min = ((size_t)1 << RANGE_MIN_SHIFT) - RANGE_ALIGN;
  size = size < min ? min : (size + RANGE_ALIGN - 1) & ~(RANGE_ALIGN - 1);
  /* Ranges sit a power-of-two stride apart (tier_of is a shift); the
   * stride - size bytes above each stay PROT_NONE, a guard. */
  unsigned shift = range_log2_ceil(size + RANGE_ALIGN), max = range_max_shift(n);
  if (shift > max) shift = max;
  int err = ENOMEM;
  void *base = NULL;
  for (; shift >= RANGE_MIN_SHIFT; shift--) {
    size_t stride = (size_t)1 << shift;
    if (size > stride - RANGE_ALIGN) size = stride - RANGE_ALIGN;
    err = os->reserve((size_t)n << shift, &base);
    if (err == 0) break;
  }
  if (err != 0) {
    tm_warn("cannot reserve address space for %u tier ranges (%s); tiers are not placed", n,
            err == ENOMEM ? "out of address space" : "mmap failed");
    return err;
  }
  /* Chunks (chunkmap.h) and transparent huge pages are 2 MiB blocks of the
   * address space: start the ranges on such a block, so that each chunk is
   * one. The guard above the last range absorbs the shift. */
  uintptr_t first = ((uintptr_t)base + RANGE_ALIGN - 1) & ~(uintptr_t)(RANGE_ALIGN - 1);
  for (unsigned i = 0; i < n; i++) {
    uintptr_t start = first + ((uintptr_t)i << shift);
    /* The first RANGE_ALIGN bytes stay PROT_NONE: the range's RW part can
     * then never merge with a mapping below it, so each numa_maps line of a
     * range starts inside the range. */
    atomic_store_explicit(&range_next[i], start + RANGE_ALIGN, memory_order_relaxed);
    if (n > 1) {
      int berr = os->bind((void *)start, size, &topo->tier[i].nodes, topo->tier[i].first_node);
      if (berr != 0 && i == 0)
        tm_warn("mbind failed (errno %d); pages go where the kernel puts them", berr);
    }
  }
  tm_ranges.base = first;
  tm_ranges.shift = shift;
  tm_ranges.size = size;
  tm_ranges.n = n;
  return 0;
}

void *tm_range_carve(unsigned i, size_t size, size_t align)
{
  if (i >= tm_ranges.n) return NULL;
  uintptr_t limit = tm_ranges.base + ((uintptr_t)i << tm_ranges.shift) + tm_ranges.size;
  uintptr_t cur = atomic_load_explicit(&range_next[i], memory_order_relaxed);
  uintptr_t start;
  do {
    start = (cur + align - 1) & ~(uintptr_t)(align - 1);
    if (start < cur || start + size < start || start + size > limit) return NULL;
  } while (!atomic_compare_exchange_weak_explicit(&range_next[i], &cur, start + size,
                                                  memory_order_relaxed, memory_order_relaxed));
  /* An alignment gap below start stays PROT_NONE and is never used. */
  if (range_os->commit((void *)start, size) != 0) return NULL;
  atomic_fetch_add_explicit(&range_carved[i], size, memory_order_relaxed);
  if (size >= range_huge_min) range_os->huge((void *)start, size);
  return (void *)start;
}

uintptr_t tm_range_end(unsigned i)
{
  return i < tm_ranges.n ? atomic_load_explicit(&range_next[i], memory_order_acquire) : 0;
}

uint64_t tm_range_mapped(unsigned i)
{
  return i < TIER_MAX_TIERS ? atomic_load_explicit(&range_carved[i], memory_order_relaxed) : 0;
}

const tm_os_t *tm_range_os(void)
{
  return range_os;
}
