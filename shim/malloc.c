/*
 * The C allocation entry points, with glibc's contract:
 *   malloc(0) is a unique pointer; size overflow gives NULL and ENOMEM; a bad
 *   alignment gives EINVAL from posix_memalign; memalign and aligned_alloc
 *   round a non-power-of-two alignment up, as glibc 2.36 does;
 *   realloc(p, 0) frees p and returns NULL, as glibc does.
 * Each call that allocates, realloc too, is counted for allocation sites
 * (allocator/site.h) with its caller's return address as the site.
 * A pointer that is not tiermalloc's (from glibc's malloc before tiermalloc
 * was in place) is freed, resized and measured by glibc.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "je.h"
#include "jemap.h"
#include "range.h"
#include "site.h"
#include "shim.h"
#include "startup.h"
#include "thread.h"

extern void __libc_free(void *);
extern void *__libc_realloc(void *, size_t);

#define SHIM_PAGE ((size_t)4096)

/* p is outside every tier range: NULL, glibc's, or jemalloc's (every
 * pointer when the ranges are not in use; else one in a mapping jemalloc
 * made itself, see allocator/jemap.h). Returns nonzero when jemalloc owns it. */
static int shim_jemalloc_owns(const void *p)
{
  return p != NULL && tm_started() && (tm_ranges.n == 0 || tm_jemap_contains(p));
}

static __attribute__((noinline, cold)) void *shim_late_alloc(void *p)
{
  if (p) tm_account_late(p, tmje_malloc_usable_size(p), 0);
  return p;
}

/* The slow side of malloc (zero: calloc, of n * size; align: the aligned
 * allocations, 0 for none): a thread to set up, a sample due, or a call that
 * may be a routed site's (site.h). */
static __attribute__((noinline, cold)) void *shim_alloc_slow(size_t n, size_t size, int zero, size_t align,
                                                              const void *ra)
{
  if (tm_tls.alloc_len == 0 && tm_thread() == NULL)
    return shim_late_alloc(align ? tmje_mallocx(size ? size : 1, MALLOCX_ALIGN(align))
                                 : zero ? tmje_calloc(n, size) : tmje_malloc(size));
  tm_thread_t *t = &tm_tls;
  size_t total = size;
  if (zero && __builtin_mul_overflow(n, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  bool due = tm_site_due(t);   /* counted on the fast path, before it came here */
  int flags = tm_site_routed(ra) ? tm_site_flags(t, ra) : 0;
  void *p;
  if (flags || align) {
    p = tmje_mallocx(total ? total : 1, flags | (zero ? MALLOCX_ZERO : 0) | (align ? MALLOCX_ALIGN(align) : 0));
    if (p == NULL) errno = ENOMEM;
  } else {
    p = zero ? tmje_calloc(n, size) : tmje_malloc(size);
  }
  if (p && due) tm_site_sample(t, ra, total);
  return tm_count_alloc(t, p);
}

/* The fast path: a thread set up, no sample due and no call to route
 * (tm_site_take): jemalloc's malloc, calloc or mallocx (aligned) and the count. ra is the
 * caller's return address, the site. */
#define SHIM_SITED(n, size, zero, align, ra, expr)                                                \
  do {                                                                                            \
    if (tm_unlikely(tm_tls.alloc_len == 0 || tm_site_count(&tm_tls, (n) * (size)) ||               \
                    tm_site_take(&tm_tls, ra)))                                                   \
      return shim_alloc_slow((n), (size), (zero), (align), (ra));                                 \
    return tm_count_alloc(&tm_tls, (expr));                                                       \
  } while (0)

void *tm_shim_malloc(size_t size)
{
  SHIM_SITED(1, size, 0, 0, __builtin_return_address(0), tmje_malloc(size));
}

void *tm_shim_malloc_at(size_t size, const void *ra)
{
  SHIM_SITED(1, size, 0, 0, ra, tmje_malloc(size));
}

/* The largest small size class of jemalloc (4 KiB pages): blocks up to it
 * come from slabs, above it from extents of their own. */
#define SHIM_SMALL_MAX ((size_t)14336)

/* An aligned block from jemalloc. A small size class holds each block at
 * the alignment of its size's lowest set bit, and jemalloc serves an aligned
 * request of a small size from the class of the size rounded up to the
 * alignment (its arena_palloc): malloc of that size is the same block,
 * through the thread cache's fast path instead of mallocx's slow one (a
 * posix_memalign/free pair: 176 instructions, 299 through mallocx). A
 * rounded size above the small classes would be a large block, whose offset
 * in its page jemalloc randomizes: mallocx serves it. Checked, not assumed:
 * a block off its alignment goes back, and mallocx serves the request. */
static inline void *shim_aligned_je(size_t size, size_t align)
{
  size_t r = (size + align - 1) & ~(align - 1);   /* used only when size is small: no wrap */
  if (align <= SHIM_PAGE && size <= SHIM_SMALL_MAX && r <= SHIM_SMALL_MAX) {
    void *p = tmje_malloc(r ? r : align);
    if (tm_likely(((uintptr_t)p & (align - 1)) == 0)) return p;   /* NULL too */
    tmje_free(p);
  }
  return tmje_mallocx(size ? size : 1, MALLOCX_ALIGN(align));
}

static void *shim_aligned_raw(size_t align, size_t size, const void *ra)
{
  SHIM_SITED(1, size, 0, align, ra, shim_aligned_je(size, align));
}

/* mallocx does not promise errno; the malloc family does. */
void *tm_shim_aligned_at(size_t align, size_t size, const void *ra)
{
  void *p = shim_aligned_raw(align, size, ra);
  if (tm_unlikely(p == NULL)) errno = ENOMEM;
  return p;
}

static __attribute__((noinline, cold)) void shim_free_slow(void *p, unsigned i)
{
  if (i == TM_RANGE_OTHER && !shim_jemalloc_owns(p)) {
    if (p) __libc_free(p);
    return;
  }
  tm_thread_t *t = tm_thread();
  if (t == NULL) {
    tm_account_late(p, tmje_malloc_usable_size(p), 1);
    tmje_free(p);
    return;
  }
  if (i != t->free_run) tm_account_switch_free(t, p, i);
  tmje_free(p);
}

void tm_shim_free(void *p)
{
  if (tm_unlikely(tm_off_free_run(&tm_tls, p))) {
    shim_free_slow(p, tm_range_index(p));
    return;
  }
  tmje_free(p);
}

TM_EXPORT void *malloc(size_t size) __attribute__((alias("tm_shim_malloc")));
TM_EXPORT void free(void *p) __attribute__((alias("tm_shim_free")));

TM_EXPORT void *calloc(size_t n, size_t size)
{
  SHIM_SITED(n, size, 1, 0, __builtin_return_address(0), tmje_calloc(n, size));
}

/* realloc's slow side in the ranges, as shim_alloc_slow's: a sample due, or
 * a call that may be a routed site's, whose new block then comes from the
 * site's arena (when jemalloc moves it; grown in place it stays where it
 * is). The old block's free is counted by the caller. */
static __attribute__((noinline, cold)) void *shim_realloc_slow(tm_thread_t *t, void *p, size_t size,
                                                                const void *ra)
{
  bool due = tm_site_due(t);
  int flags = tm_site_routed(ra) ? tm_site_flags(t, ra) : 0;
  void *q = flags ? tmje_rallocx(p, size, flags) : tmje_realloc(p, size);
  if (q && due) tm_site_sample(t, ra, size);
  return q;
}

TM_EXPORT void *realloc(void *p, size_t size)
{
  const void *ra = __builtin_return_address(0);   /* the site, as malloc's */
  if (p == NULL) return tm_shim_malloc_at(size, ra);
  unsigned i = tm_range_index(p);
  if (tm_unlikely(i == TM_RANGE_OTHER) && !shim_jemalloc_owns(p)) return __libc_realloc(p, size);
  if (size == 0) {
    tm_shim_free(p);
    return NULL;
  }
  tm_thread_t *t = tm_thread();
  if (tm_unlikely(t == NULL)) {
    size_t old = tmje_malloc_usable_size(p);
    void *q = tmje_realloc(p, size);
    if (q) {
      tm_account_late(p, old, 1);
      tm_account_late(q, tmje_malloc_usable_size(q), 0);
    } else {
      errno = ENOMEM;
    }
    return q;
  }
  if (tm_unlikely(i == TM_RANGE_OTHER)) {
    /* Outside the ranges a free is counted at once (it opens no run), so
     * only once the resize has taken the old block. */
    size_t old = tmje_malloc_usable_size(p);
    void *q = tmje_realloc(p, size);
    if (q == NULL) {
      errno = ENOMEM;
      return NULL;
    }
    tm_account_freed_other(t, old);
    return tm_count_alloc(t, q);
  }
  if (i != t->free_run) tm_account_switch_free(t, p, i);
  void *q = tm_unlikely(tm_site_count(t, size) || tm_site_take(t, ra)) ? shim_realloc_slow(t, p, size, ra)
                                                                      : tmje_realloc(p, size);
  tm_count_alloc(t, q);
  if (tm_unlikely(q == NULL)) errno = ENOMEM;   /* jemalloc does not set it here */
  return q;
}

TM_EXPORT void *reallocarray(void *p, size_t n, size_t size)
{
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  return realloc(p, total);
}

static int shim_pow2(size_t x)
{
  return x != 0 && (x & (x - 1)) == 0;
}

/* Sizes whose page round-up or alignment padding would overflow. */
static int shim_too_big(size_t size, size_t align)
{
  return size > PTRDIFF_MAX - align;
}

TM_EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
  if (!shim_pow2(align) || align % sizeof(void *) != 0) return EINVAL;
  if (shim_too_big(size, align)) return ENOMEM;
  int saved = errno;
  void *p = tm_shim_aligned_at(align, size, __builtin_return_address(0));
  errno = saved;
  if (p == NULL) return ENOMEM;
  *out = p;
  return 0;
}

/* memalign, for the caller at ra (the site). */
static void *shim_memalign(size_t align, size_t size, const void *ra)
{
  if (align > SIZE_MAX / 2 + 1) {
    errno = EINVAL;
    return NULL;
  }
  if (align < sizeof(void *)) align = sizeof(void *);
  if (!shim_pow2(align)) align = (size_t)1 << (64 - __builtin_clzl(align));
  if (shim_too_big(size, align)) {
    errno = ENOMEM;
    return NULL;
  }
  return tm_shim_aligned_at(align, size, ra);
}

TM_EXPORT void *memalign(size_t align, size_t size)
{
  return shim_memalign(align, size, __builtin_return_address(0));
}

/* As glibc 2.36 (Debian 12) does: aligned_alloc is memalign, so an alignment
 * that is not a power of two is rounded up rather than refused (glibc 2.38
 * and C23 refuse it with EINVAL). */
TM_EXPORT void *aligned_alloc(size_t align, size_t size) __attribute__((alias("memalign")));

TM_EXPORT void *valloc(size_t size)
{
  return shim_memalign(SHIM_PAGE, size, __builtin_return_address(0));
}

TM_EXPORT void *pvalloc(size_t size)
{
  if (shim_too_big(size, SHIM_PAGE)) {
    errno = ENOMEM;
    return NULL;
  }
  size_t rounded = (size + SHIM_PAGE - 1) & ~(SHIM_PAGE - 1);
  return shim_memalign(SHIM_PAGE, rounded ? rounded : SHIM_PAGE, __builtin_return_address(0));
}

TM_EXPORT size_t malloc_usable_size(void *p)
{
  if (tm_range_index(p) == TM_RANGE_OTHER && !shim_jemalloc_owns(p)) {
    if (p == NULL) return 0;
    /* glibc's own answer for glibc's chunk; found once, off the fast path. */
    static size_t (*libc_usable)(void *);
    if (libc_usable == NULL) libc_usable = (size_t (*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
    return libc_usable ? libc_usable(p) : 0;
  }
  return tmje_malloc_usable_size(p);
}
