/*
 * The malloc contract: every C entry point tiermalloc exports behaves as
 * Debian 12's glibc (2.36) documents and does, so a program written against
 * glibc keeps working under tiermalloc. This binary is linked with
 * -ltiermalloc, so these calls go to tiermalloc; compiled without it, the
 * same file passes against glibc (that is how it was written).
 *
 * Sizes and pointers go through contract_opaque()/contract_escape() so the
 * compiler cannot fold a result it thinks it knows (GCC knows that calloc
 * zeroes, that malloc(SIZE_MAX) is "too large", and that a memset before
 * free is dead).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A value the optimiser cannot see through. */
static size_t contract_opaque(size_t v)
{
  __asm__ volatile("" : "+r"(v));
  return v;
}

/* Tells the compiler p's memory is read and written by someone else. */
static void contract_escape(void *p)
{
  __asm__ volatile("" : : "r"(p) : "memory");
}

static int contract_aligned(const void *p, size_t align)
{
  return ((uintptr_t)p & (align - 1)) == 0;
}

static void contract_fill(unsigned char *p, size_t n, unsigned seed)
{
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(seed + i * 131 + (i >> 8));
}

/* Index of the first byte of p[0..n) that contract_fill(seed) did not write, or n. */
static size_t contract_check_fill(const unsigned char *p, size_t n, unsigned seed)
{
  for (size_t i = 0; i < n; i++)
    if (p[i] != (unsigned char)(seed + i * 131 + (i >> 8))) return i;
  return n;
}

/* Index of the first nonzero byte of p[0..n), or n. */
static size_t contract_first_nonzero(const unsigned char *p, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (p[i] != 0) return i;
  return n;
}

/* realloc and reallocarray through pointers the compiler cannot follow:
 * the tests read the original block after a failed resize, which is valid
 * but which -Wuse-after-free cannot tell from a successful one. */
static void *(*volatile contract_realloc)(void *, size_t) = realloc;
static void *(*volatile contract_reallocarray)(void *, size_t, size_t) = reallocarray;

/* glibc's own allocator, reachable under any interposer: a block from it
 * stands for one allocated before tiermalloc took over (in a preloaded
 * process, by ld.so or a constructor that ran first). */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_memalign(size_t, size_t);

static size_t contract_page(void)
{
  return (size_t)sysconf(_SC_PAGESIZE);
}

/* ---- malloc / free --------------------------------------------------- */

Test(contract, malloc_zero_is_unique_and_freeable)
{
  /* Some programs (grep among them) treat NULL from malloc(0) as out of
   * memory, so glibc's unique pointer is part of the contract. */
  void *p[64];
  for (int i = 0; i < 64; i++) {
    p[i] = malloc(contract_opaque(0));
    cr_assert_not_null(p[i], "malloc(0) #%d returned NULL", i);
    contract_escape(p[i]);
    for (int j = 0; j < i; j++) cr_assert_neq(p[i], p[j], "malloc(0) #%d == #%d", i, j);
  }
  for (int i = 0; i < 64; i++) free(p[i]);
}

Test(contract, free_null_is_a_noop)
{
  int saved = errno = 4242;
  free(NULL);
  cr_expect_eq(errno, saved, "free(NULL) changed errno");
}

Test(contract, malloc_alignment_is_16_from_16_bytes)
{
  /* glibc's MALLOC_ALIGNMENT on x86-64 is 16; code that stores SSE values
   * or long double in malloc'd memory relies on it. */
  for (size_t size = 16; size <= (1u << 20); size = size * 5 / 4 + 1) {
    void *ps[8];
    for (int i = 0; i < 8; i++) {
      ps[i] = malloc(contract_opaque(size));
      cr_assert_not_null(ps[i]);
      cr_expect(contract_aligned(ps[i], 16), "malloc(%zu) = %p, not 16-aligned", size, ps[i]);
    }
    for (int i = 0; i < 8; i++) free(ps[i]);
  }
  for (size_t size = 1; size < 16; size++) {
    void *p = malloc(contract_opaque(size));
    cr_assert_not_null(p);
    cr_expect(contract_aligned(p, 8), "malloc(%zu) = %p, not 8-aligned", size, p);
    free(p);
  }
}

Test(contract, malloc_too_large_is_enomem)
{
  size_t sizes[] = { SIZE_MAX, SIZE_MAX - 4096, (size_t)PTRDIFF_MAX + 1, (size_t)PTRDIFF_MAX };
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    errno = 0;
    void *p = malloc(contract_opaque(sizes[i]));
    cr_expect_null(p, "malloc(%#zx) succeeded", sizes[i]);
    cr_expect_eq(errno, ENOMEM, "malloc(%#zx): errno %d, want ENOMEM", sizes[i], errno);
    free(p);
  }
}

/* ---- calloc ------------------------------------------------------------ */

Test(contract, calloc_zeroes_fresh_memory)
{
  size_t sizes[] = { 1, 8, 16, 24, 100, 1000, 4096, 5000, 65536, 100000, 1 << 20, 3 << 20, 9 << 20 };
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    unsigned char *p = calloc(contract_opaque(1), contract_opaque(sizes[i]));
    cr_assert_not_null(p);
    contract_escape(p);
    size_t at = contract_first_nonzero(p, sizes[i]);
    cr_expect_eq(at, sizes[i], "calloc(1, %zu): byte %zu is %#x", sizes[i], at, at < sizes[i] ? p[at] : 0);
    free(p);
  }
}

Test(contract, calloc_zeroes_reused_dirty_memory)
{
  /* The allocator reuses what was freed; calloc must zero it whether it
   * came from a thread cache, a slab, or a large extent jemalloc kept
   * (dirty) or got back from the hooks (an extent hook that claims "zeroed"
   * for reused memory would break exactly this). */
  size_t sizes[] = { 8, 48, 512, 4000, 20000, 70000, 300000, 1 << 20, 5 << 20 };
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    size_t n = sizes[i];
    int rounds = n >= (1 << 20) ? 8 : 100;
    for (int r = 0; r < rounds; r++) {
      unsigned char *d = malloc(contract_opaque(n));
      cr_assert_not_null(d);
      memset(d, 0xAB, n);
      contract_escape(d);
      free(d);
      unsigned char *z = calloc(contract_opaque(n), 1);
      cr_assert_not_null(z);
      contract_escape(z);
      size_t at = contract_first_nonzero(z, n);
      cr_assert_eq(at, n, "calloc(%zu, 1) round %d (%s the freed block): byte %zu is %#x",
                   n, r, z == d ? "reusing" : "not reusing", at, z[at]);
      free(z);
    }
  }
}

Test(contract, calloc_zeroes_memory_reused_across_size_classes)
{
  /* Dirty many small large-class blocks, free them, then calloc bigger
   * blocks that jemalloc may build by merging the freed extents; and the
   * other way round (split a big dirty extent into smaller ones). */
  enum { N = 64 };
  unsigned char *p[N];
  for (int round = 0; round < 4; round++) {
    for (int i = 0; i < N; i++) {
      p[i] = malloc(contract_opaque(256 * 1024));
      cr_assert_not_null(p[i]);
      memset(p[i], 0xAB, 256 * 1024);
      contract_escape(p[i]);
    }
    for (int i = 0; i < N; i++) free(p[i]);
    for (int i = 0; i < N / 8; i++) {
      p[i] = calloc(contract_opaque(2 * 1024 * 1024), 1);
      cr_assert_not_null(p[i]);
      contract_escape(p[i]);
      size_t at = contract_first_nonzero(p[i], 2 * 1024 * 1024);
      cr_assert_eq(at, (size_t)2 * 1024 * 1024, "calloc(2 MiB) #%d round %d: byte %zu is %#x", i, round, at, p[i][at]);
      memset(p[i], 0xCD, 2 * 1024 * 1024);
      contract_escape(p[i]);
    }
    for (int i = 0; i < N / 8; i++) free(p[i]);
    for (int i = 0; i < N; i++) {
      p[i] = calloc(contract_opaque(200 * 1024), 1);
      cr_assert_not_null(p[i]);
      contract_escape(p[i]);
      size_t at = contract_first_nonzero(p[i], 200 * 1024);
      cr_assert_eq(at, (size_t)200 * 1024, "calloc(200 KiB) #%d round %d: byte %zu is %#x", i, round, at, p[i][at]);
    }
    for (int i = 0; i < N; i++) free(p[i]);
  }
}

Test(contract, calloc_overflow_is_enomem)
{
  struct { size_t n, m; } cases[] = {
    { SIZE_MAX, 2 }, { 2, SIZE_MAX }, { SIZE_MAX / 2 + 1, 2 }, { (size_t)1 << 32, (size_t)1 << 32 },
    { (size_t)1 << 33, (size_t)1 << 31 }, { SIZE_MAX, SIZE_MAX }, { 3, SIZE_MAX / 3 + 1 },
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    errno = 0;
    void *p = calloc(contract_opaque(cases[i].n), contract_opaque(cases[i].m));
    cr_expect_null(p, "calloc(%#zx, %#zx) succeeded", cases[i].n, cases[i].m);
    cr_expect_eq(errno, ENOMEM, "calloc(%#zx, %#zx): errno %d", cases[i].n, cases[i].m, errno);
    free(p);
  }
  /* Not an overflow, only too large. */
  errno = 0;
  void *p = calloc(contract_opaque((size_t)1 << 31), contract_opaque((size_t)1 << 31));
  cr_expect_null(p);
  cr_expect_eq(errno, ENOMEM);
  free(p);
}

Test(contract, calloc_zero_is_unique)
{
  void *a = calloc(contract_opaque(0), 16), *b = calloc(16, contract_opaque(0)), *c = calloc(contract_opaque(0), 0);
  cr_expect(a && b && c, "calloc with a zero count returned NULL (%p %p %p)", a, b, c);
  cr_expect(a != b && b != c && a != c);
  free(a);
  free(b);
  free(c);
}

/* ---- realloc / reallocarray ------------------------------------------ */

Test(contract, realloc_null_is_malloc)
{
  unsigned char *p = realloc(NULL, contract_opaque(100));
  cr_assert_not_null(p);
  cr_expect_geq(malloc_usable_size(p), 100);
  memset(p, 1, 100);
  contract_escape(p);
  free(p);
  void *z = realloc(NULL, contract_opaque(0));
  cr_expect_not_null(z, "realloc(NULL, 0) is malloc(0): a unique pointer");
  free(z);
}

Test(contract, realloc_to_zero_frees)
{
  /* glibc: realloc(p, 0) frees p and returns NULL (C17 leaves it to the
   * implementation). Either NULL or a fresh freeable pointer is accepted;
   * what matters is no crash, no leak (checked by doing it many times) and
   * that NULL is not reported as an error. */
  for (int i = 0; i < 100000; i++) {
    void *p = malloc(contract_opaque((size_t)(i % 5000) + 1));
    cr_assert_not_null(p);
    contract_escape(p);
    errno = 0;
    void *q = realloc(p, contract_opaque(0));
    if (q != NULL) {
      contract_escape(q);
      free(q);
    } else if (i == 0) {
      cr_expect_eq(errno, 0, "realloc(p, 0) = NULL set errno %d", errno);
    }
  }
}

Test(contract, realloc_keeps_contents_across_size_classes)
{
  /* 16 B (small) -> 64 KiB (large) -> 8 MiB (huge) -> 100 B: each move
   * keeps min(old, new) bytes. */
  size_t steps[] = { 16, 64 * 1024, 8 * 1024 * 1024, 100, 3000, 1, 5 << 20, 24 };
  size_t have = 16;
  unsigned char *p = malloc(contract_opaque(have));
  cr_assert_not_null(p);
  contract_fill(p, have, 7);
  for (size_t i = 1; i < sizeof steps / sizeof *steps; i++) {
    size_t n = steps[i];
    unsigned char *q = realloc(p, contract_opaque(n));
    cr_assert_not_null(q, "realloc(%zu -> %zu) failed", have, n);
    size_t keep = have < n ? have : n;
    size_t bad = contract_check_fill(q, keep, 7);
    cr_assert_eq(bad, keep, "realloc %zu -> %zu lost byte %zu", have, n, bad);
    cr_expect_geq(malloc_usable_size(q), n);
    /* Refill so the next step checks all the bytes it can. */
    contract_fill(q, n, 7);
    p = q;
    have = n;
  }
  free(p);
}

Test(contract, realloc_in_place_growth_and_shrink_many_sizes)
{
  unsigned char *p = NULL;
  size_t have = 0;
  for (size_t n = 1; n < (2u << 20); n = n * 3 / 2 + 7) {
    unsigned char *q = realloc(p, contract_opaque(n));
    cr_assert_not_null(q);
    size_t bad = contract_check_fill(q, have, 3);
    cr_assert_eq(bad, have, "growing %zu -> %zu lost byte %zu", have, n, bad);
    contract_fill(q, n, 3);
    p = q;
    have = n;
  }
  while (have > 1) {
    size_t n = have / 3;
    unsigned char *q = realloc(p, contract_opaque(n));
    cr_assert_not_null(q);
    size_t bad = contract_check_fill(q, n, 3);
    cr_assert_eq(bad, n, "shrinking %zu -> %zu lost byte %zu", have, n, bad);
    p = q;
    have = n;
  }
  free(p);
}

Test(contract, realloc_overflow_keeps_the_original)
{
  size_t sizes[] = { SIZE_MAX, SIZE_MAX - 100, (size_t)PTRDIFF_MAX + 1, (size_t)PTRDIFF_MAX };
  size_t olds[] = { 40, 40000, 4 << 20 };
  for (size_t o = 0; o < sizeof olds / sizeof *olds; o++) {
    unsigned char *p = malloc(contract_opaque(olds[o]));
    cr_assert_not_null(p);
    contract_fill(p, olds[o], 11);
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
      errno = 0;
      void *q = contract_realloc(p, contract_opaque(sizes[i]));
      if (q != NULL) {
        free(q);
        cr_assert_fail("realloc(%zu B, %#zx) succeeded", olds[o], sizes[i]);
      }
      cr_expect_eq(errno, ENOMEM, "realloc(%zu B, %#zx): errno %d", olds[o], sizes[i], errno);
      size_t bad = contract_check_fill(p, olds[o], 11);
      cr_assert_eq(bad, olds[o], "failed realloc changed byte %zu of the original", bad);
    }
    cr_expect_geq(malloc_usable_size(p), olds[o]);
    free(p);
  }
}

Test(contract, reallocarray)
{
  errno = 0;
  void *p = reallocarray(NULL, contract_opaque(SIZE_MAX / 2), 3);
  cr_expect_null(p);
  cr_expect_eq(errno, ENOMEM, "reallocarray overflow: errno %d", errno);

  unsigned char *a = reallocarray(NULL, contract_opaque(10), 12);
  cr_assert_not_null(a);
  contract_fill(a, 120, 5);
  errno = 0;
  void *q = contract_reallocarray(a, contract_opaque((size_t)1 << 40), (size_t)1 << 40);
  if (q != NULL) {
    free(q);
    cr_assert_fail("reallocarray(p, 2^40, 2^40) succeeded");
  }
  cr_expect_eq(errno, ENOMEM);
  cr_assert_eq(contract_check_fill(a, 120, 5), 120, "failed reallocarray changed the original");
  unsigned char *b = contract_reallocarray(a, contract_opaque(1000), 12);
  cr_assert_not_null(b);
  cr_expect_eq(contract_check_fill(b, 120, 5), 120);
  free(b);
}

/* ---- aligned allocation --------------------------------------------- */

Test(contract, posix_memalign_every_power_of_two)
{
  size_t sizes[] = { 0, 1, 8, 100, 4096, 70000 };
  for (size_t align = sizeof(void *); align <= ((size_t)1 << 20); align <<= 1) {
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
      void *p = (void *)0x1;
      errno = 4242;
      int rc = posix_memalign(&p, contract_opaque(align), contract_opaque(sizes[s]));
      cr_assert_eq(rc, 0, "posix_memalign(%zu, %zu) = %d", align, sizes[s], rc);
      cr_expect_eq(errno, 4242, "posix_memalign changed errno on success");
      cr_assert_not_null(p);
      cr_expect(contract_aligned(p, align), "posix_memalign(%zu, %zu) = %p", align, sizes[s], p);
      cr_expect_geq(malloc_usable_size(p), sizes[s]);
      memset(p, 0x5a, sizes[s]);
      contract_escape(p);
      free(p);
    }
  }
}

Test(contract, posix_memalign_bad_alignment_is_einval)
{
  /* Not a power of two, or not a multiple of sizeof(void *): EINVAL, and
   * *memptr is left alone (POSIX; glibc does so). */
  size_t bad[] = { 0, 1, 2, 4, 3, 12, 24, 48, 100, 4097, SIZE_MAX, SIZE_MAX / 2 + 2 };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    void *sentinel = (void *)(uintptr_t)0xdeadbeef;
    void *p = sentinel;
    int rc = posix_memalign(&p, contract_opaque(bad[i]), 64);
    cr_expect_eq(rc, EINVAL, "posix_memalign(&p, %zu, 64) = %d, want EINVAL", bad[i], rc);
    cr_expect_eq(p, sentinel, "posix_memalign(%zu) wrote *memptr on failure", bad[i]);
    if (p != sentinel) free(p);
  }
}

Test(contract, posix_memalign_huge_is_enomem)
{
  size_t sizes[] = { SIZE_MAX, SIZE_MAX - 100, (size_t)PTRDIFF_MAX + 1, (size_t)PTRDIFF_MAX - 10 };
  size_t aligns[] = { 8, 64, 4096, 1 << 20 };
  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
    for (size_t a = 0; a < sizeof aligns / sizeof *aligns; a++) {
      void *sentinel = (void *)(uintptr_t)0xdeadbeef;
      void *p = sentinel;
      int rc = posix_memalign(&p, contract_opaque(aligns[a]), contract_opaque(sizes[s]));
      cr_expect_eq(rc, ENOMEM, "posix_memalign(%zu, %#zx) = %d, want ENOMEM", aligns[a], sizes[s], rc);
      cr_expect_eq(p, sentinel, "posix_memalign wrote *memptr on failure");
    }
}

Test(contract, aligned_alloc_powers_of_two)
{
  for (size_t align = 1; align <= ((size_t)1 << 20); align <<= 1) {
    size_t size = align * 3;   /* C11 asked for a multiple; glibc accepts any */
    void *p = aligned_alloc(contract_opaque(align), contract_opaque(size));
    cr_assert_not_null(p, "aligned_alloc(%zu, %zu)", align, size);
    cr_expect(contract_aligned(p, align), "aligned_alloc(%zu) = %p", align, p);
    cr_expect_geq(malloc_usable_size(p), size);
    memset(p, 1, size);
    contract_escape(p);
    free(p);
    p = aligned_alloc(contract_opaque(align), contract_opaque(align / 2 + 1));
    cr_assert_not_null(p, "aligned_alloc(%zu, size not a multiple)", align);
    cr_expect(contract_aligned(p, align));
    free(p);
  }
}

/* Every small size class under every alignment up to two pages, blocks held
 * together so they come from shared slabs: aligned, at least as large as
 * asked, and no two overlapping (the shim serves these through malloc's
 * fast path, shim/malloc.c). */
Test(contract, small_aligned_blocks_in_every_size_class)
{
  enum { MAXN = 2400 };
  static struct { unsigned char *p; size_t n; } held[MAXN];
  for (size_t align = 8; align <= 8192; align <<= 1) {
    size_t k = 0;
    for (size_t size = 0; size <= 16384 && k < MAXN; size += size < 512 ? 1 : size < 2048 ? 8 : 56) {
      void *p = NULL;
      int rc = (size & 1) ? posix_memalign(&p, contract_opaque(align), contract_opaque(size))
                          : ((p = aligned_alloc(contract_opaque(align), contract_opaque(size))) ? 0 : ENOMEM);
      cr_assert_eq(rc, 0, "align %zu size %zu: %d", align, size, rc);
      cr_assert(contract_aligned(p, align), "align %zu size %zu: %p", align, size, p);
      cr_assert_geq(malloc_usable_size(p), size, "align %zu size %zu", align, size);
      memset(p, (int)(k & 0xff), size);
      held[k].p = p;
      held[k++].n = size;
    }
    for (size_t i = 0; i < k; i++) {
      for (size_t j = 0; j < held[i].n; j++)
        if (held[i].p[j] != (unsigned char)(i & 0xff))
          cr_assert_fail("align %zu: block %zu (%zu B) overwritten at %zu", align, i, held[i].n, j);
      free(held[i].p);
    }
  }
}

Test(contract, aligned_alloc_bad_alignment)
{
  /* An alignment above SIZE_MAX/2+1 cannot be honoured: NULL and EINVAL,
   * in every glibc. */
  size_t huge[] = { SIZE_MAX / 2 + 2, SIZE_MAX };
  for (size_t i = 0; i < sizeof huge / sizeof *huge; i++) {
    errno = 0;
    void *p = aligned_alloc(contract_opaque(huge[i]), 64);
    cr_expect_null(p, "aligned_alloc(%#zx, 64) succeeded", huge[i]);
    cr_expect_eq(errno, EINVAL, "aligned_alloc(%#zx): errno %d", huge[i], errno);
  }
  /* A non-power-of-two alignment (3, 0, 24): glibc 2.36 (Debian 12) treats
   * aligned_alloc as memalign and rounds the alignment up to a power of
   * two, and so does tiermalloc (glibc 2.38 and C23 would refuse it with
   * EINVAL; a program that runs on Debian 12 must not start failing). */
  size_t odd[] = { 0, 3, 24, 100 };
  for (size_t i = 0; i < sizeof odd / sizeof *odd; i++) {
    errno = 0;
    void *p = aligned_alloc(contract_opaque(odd[i]), 64);
    cr_expect_not_null(p, "aligned_alloc(%zu, 64) failed with errno %d, as glibc 2.36 does not", odd[i], errno);
    if (p != NULL) {
      size_t want = 1;
      while (want < odd[i]) want <<= 1;
      cr_expect(contract_aligned(p, want), "aligned_alloc(%zu) = %p, not %zu-aligned", odd[i], p, want);
      cr_expect_geq(malloc_usable_size(p), 64);
      free(p);
    }
  }
}

Test(contract, aligned_alloc_huge_is_enomem)
{
  errno = 0;
  void *p = aligned_alloc(4096, contract_opaque((size_t)PTRDIFF_MAX - 4096));
  cr_expect_null(p);
  cr_expect_eq(errno, ENOMEM, "errno %d", errno);
  errno = 0;
  p = aligned_alloc(64, contract_opaque(SIZE_MAX - 10));
  cr_expect_null(p);
  cr_expect_eq(errno, ENOMEM, "errno %d", errno);
}

Test(contract, memalign_rounds_alignment_up)
{
  /* glibc's memalign: an alignment below the minimum is raised to it, one
   * that is not a power of two is rounded up to the next power of two. */
  struct { size_t asked, honoured; } cases[] = {
    { 0, 16 }, { 1, 16 }, { 2, 16 }, { 3, 16 }, { 8, 16 }, { 16, 16 }, { 24, 32 }, { 33, 64 },
    { 100, 128 }, { 4095, 4096 }, { 5000, 8192 }, { (1 << 20) + 1, 2 << 20 },
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    for (int k = 0; k < 16; k++) {
      void *p = memalign(contract_opaque(cases[i].asked), 40);
      cr_assert_not_null(p, "memalign(%zu, 40)", cases[i].asked);
      cr_expect(contract_aligned(p, cases[i].honoured), "memalign(%zu) = %p, not %zu-aligned",
                cases[i].asked, p, cases[i].honoured);
      cr_expect_geq(malloc_usable_size(p), 40);
      free(p);
    }
  }
  errno = 0;
  cr_expect_null(memalign(contract_opaque(SIZE_MAX / 2 + 2), 64));
  cr_expect_eq(errno, EINVAL, "memalign(huge alignment): errno %d", errno);
  errno = 0;
  cr_expect_null(memalign(64, contract_opaque(SIZE_MAX - 10)));
  cr_expect_eq(errno, ENOMEM, "memalign(huge size): errno %d", errno);
}

Test(contract, valloc_is_page_aligned)
{
  size_t page = contract_page();
  size_t sizes[] = { 0, 1, 100, 4096, 4097, 100000, 3 << 20 };
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    void *p = valloc(contract_opaque(sizes[i]));
    cr_assert_not_null(p, "valloc(%zu)", sizes[i]);
    cr_expect(contract_aligned(p, page), "valloc(%zu) = %p", sizes[i], p);
    cr_expect_geq(malloc_usable_size(p), sizes[i]);
    memset(p, 2, sizes[i]);
    contract_escape(p);
    free(p);
  }
  errno = 0;
  cr_expect_null(valloc(contract_opaque(SIZE_MAX - 10)));
  cr_expect_eq(errno, ENOMEM);
}

Test(contract, pvalloc_rounds_to_pages)
{
  size_t page = contract_page();
  size_t sizes[] = { 1, 100, 4095, 4096, 4097, 100000, 3 << 20 };
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    size_t rounded = (sizes[i] + page - 1) / page * page;
    unsigned char *p = pvalloc(contract_opaque(sizes[i]));
    cr_assert_not_null(p, "pvalloc(%zu)", sizes[i]);
    cr_expect(contract_aligned(p, page), "pvalloc(%zu) = %p", sizes[i], p);
    cr_expect_geq(malloc_usable_size(p), rounded, "pvalloc(%zu): usable %zu < %zu", sizes[i],
                  malloc_usable_size(p), rounded);
    memset(p, 3, rounded);   /* the whole rounded size is the caller's */
    contract_escape(p);
    free(p);
  }
  /* pvalloc(0): glibc returns a page-aligned block (its rounded size is 0,
   * so glibc's usable size is its minimum chunk; tiermalloc gives a page). */
  void *z = pvalloc(contract_opaque(0));
  cr_assert_not_null(z, "pvalloc(0) returned NULL");
  cr_expect(contract_aligned(z, page), "pvalloc(0) = %p", z);
  free(z);
  errno = 0;
  cr_expect_null(pvalloc(contract_opaque(SIZE_MAX - 10)));
  cr_expect_eq(errno, ENOMEM);
}

/* ---- malloc_usable_size --------------------------------------------- */

Test(contract, malloc_usable_size_covers_the_request)
{
  cr_expect_eq(malloc_usable_size(NULL), 0);
  for (size_t n = 0; n < (4u << 20); n = n < 64 ? n + 1 : n * 9 / 8) {
    unsigned char *p = malloc(contract_opaque(n));
    cr_assert_not_null(p);
    size_t u = malloc_usable_size(p);
    cr_assert_geq(u, n, "malloc_usable_size(malloc(%zu)) = %zu", n, u);
    /* All u bytes belong to the caller: write them, then check neighbours
     * allocated after are not overlapping. */
    memset(p, 0xEE, u);
    contract_escape(p);
    unsigned char *q = malloc(contract_opaque(n));
    cr_assert_not_null(q);
    size_t uq = malloc_usable_size(q);
    cr_assert((uintptr_t)q + uq <= (uintptr_t)p || (uintptr_t)p + u <= (uintptr_t)q,
              "blocks of %zu overlap: %p+%zu and %p+%zu", n, p, u, q, uq);
    memset(q, 0x11, uq);
    contract_escape(q);
    for (size_t i = 0; i < u; i++)
      if (p[i] != 0xEE) cr_assert_fail("malloc(%zu): byte %zu of the usable size was overwritten", n, i);
    free(q);
    free(p);
  }
}

Test(contract, malloc_usable_size_of_every_entry_point)
{
  void *p;
  p = calloc(3, 33);
  cr_expect_geq(malloc_usable_size(p), 99);
  free(p);
  p = realloc(NULL, 1000);
  cr_expect_geq(malloc_usable_size(p), 1000);
  p = realloc(p, 5000);
  cr_expect_geq(malloc_usable_size(p), 5000);
  free(p);
  cr_assert_eq(posix_memalign(&p, 256, 300), 0);
  cr_expect_geq(malloc_usable_size(p), 300);
  free(p);
  p = aligned_alloc(128, 384);
  cr_expect_geq(malloc_usable_size(p), 384);
  free(p);
  p = memalign(64, 10);
  cr_expect_geq(malloc_usable_size(p), 10);
  free(p);
}

Test(contract, mixed_entry_points_free_each_other)
{
  /* Anything from any entry point is released by free and resized by
   * realloc, keeping its bytes. */
  for (int round = 0; round < 200; round++) {
    size_t n = contract_opaque((size_t)(round * 37 % 9000) + 1);
    void *ps[6];
    ps[0] = malloc(n);
    ps[1] = calloc(1, n);
    cr_assert_eq(posix_memalign(&ps[2], 64, n), 0);
    ps[3] = aligned_alloc(32, n);
    ps[4] = memalign(128, n);
    ps[5] = valloc(n);
    for (int i = 0; i < 6; i++) {
      cr_assert_not_null(ps[i]);
      contract_fill(ps[i], n, (unsigned)i);
      unsigned char *q = realloc(ps[i], n * 2 + 100);
      cr_assert_not_null(q);
      cr_assert_eq(contract_check_fill(q, n, (unsigned)i), n, "entry point %d: realloc lost bytes", i);
      ps[i] = q;
    }
    for (int i = 0; i < 6; i++) free(ps[i]);
  }
}

/* ---- big alignments and big blocks ----------------------------------- */

Test(contract, alignments_above_the_page_size)
{
  /* Alignments of 2 MiB to 256 MiB for small and large sizes: the
   * allocator (and any extent hook under it) has to find aligned address
   * space, not just aligned offsets in a slab. */
  size_t sizes[] = { 1, 4096, 3 << 20 };
  for (size_t align = (size_t)2 << 20; align <= ((size_t)256 << 20); align <<= 1) {
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
      void *p = NULL;
      int rc = posix_memalign(&p, contract_opaque(align), contract_opaque(sizes[s]));
      cr_assert_eq(rc, 0, "posix_memalign(%zu MiB, %zu) = %d", align >> 20, sizes[s], rc);
      cr_expect(contract_aligned(p, align), "posix_memalign(%zu MiB) = %p", align >> 20, p);
      memset(p, 0x77, sizes[s]);
      contract_escape(p);
      void *q = aligned_alloc(contract_opaque(align), contract_opaque(sizes[s]));
      cr_assert_not_null(q, "aligned_alloc(%zu MiB, %zu)", align >> 20, sizes[s]);
      cr_expect(contract_aligned(q, align), "aligned_alloc(%zu MiB) = %p", align >> 20, q);
      memset(q, 0x66, sizes[s]);
      contract_escape(q);
      unsigned char *r = memalign(contract_opaque(align), contract_opaque(sizes[s]));
      cr_assert_not_null(r, "memalign(%zu MiB, %zu)", align >> 20, sizes[s]);
      cr_expect(contract_aligned(r, align), "memalign(%zu MiB) = %p", align >> 20, r);
      r[0] = 1;
      r[sizes[s] - 1] = 2;
      contract_escape(r);
      free(p);
      free(q);
      free(r);
    }
  }
}

Test(contract, huge_blocks_grow_and_shrink_keeping_contents)
{
  /* 8 MiB -> 32 MiB -> 128 MiB -> 12 MiB -> 200 KiB; bytes sampled every
   * 4 KiB (each page of the old size) must survive each move. */
  size_t steps[] = { 8u << 20, 32u << 20, 128u << 20, 12u << 20, 200u << 10 };
  size_t have = steps[0];
  unsigned char *p = malloc(contract_opaque(have));
  cr_assert_not_null(p);
  for (size_t o = 0; o < have; o += 4096) p[o] = (unsigned char)(o >> 12);
  for (size_t i = 1; i < sizeof steps / sizeof *steps; i++) {
    size_t n = steps[i];
    unsigned char *q = realloc(p, contract_opaque(n));
    cr_assert_not_null(q, "realloc(%zu -> %zu)", have, n);
    size_t keep = have < n ? have : n;
    for (size_t o = 0; o < keep; o += 4096)
      cr_assert_eq(q[o], (unsigned char)(o >> 12), "realloc %zu -> %zu lost the byte at %zu", have, n, o);
    for (size_t o = 0; o < n; o += 4096) q[o] = (unsigned char)(o >> 12);
    p = q;
    have = n;
  }
  free(p);
}

/* ---- blocks the allocator did not make -------------------------------- */

Test(contract, blocks_from_glibc_are_freed_resized_and_measured)
{
  /* A block made by glibc's allocator directly (as one made before the
   * preload took effect would be) goes through free, realloc and
   * malloc_usable_size safely, keeping its contents. */
  size_t sizes[] = { 1, 100, 5000, 200000, 3 << 20 };
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    size_t n = sizes[i];
    unsigned char *p = __libc_malloc(contract_opaque(n));
    cr_assert_not_null(p);
    contract_fill(p, n, 9);
    cr_expect_geq(malloc_usable_size(p), n, "malloc_usable_size of glibc's %zu-byte block", n);
    unsigned char *q = realloc(p, contract_opaque(n * 2 + 10));
    cr_assert_not_null(q, "realloc of glibc's %zu-byte block", n);
    cr_assert_eq(contract_check_fill(q, n, 9), n, "realloc of glibc's %zu-byte block lost bytes", n);
    cr_expect_geq(malloc_usable_size(q), n * 2 + 10);
    unsigned char *r = realloc(q, contract_opaque(n / 2 + 1));
    cr_assert_not_null(r);
    cr_assert_eq(contract_check_fill(r, n / 2 + 1, 9), n / 2 + 1, "shrinking glibc's block lost bytes");
    free(r);

    void *z = __libc_calloc(contract_opaque(n), 1);
    cr_assert_not_null(z);
    cr_expect_eq(contract_first_nonzero(z, n), n);
    free(z);
    void *a = __libc_memalign(contract_opaque(4096), contract_opaque(n));
    cr_assert_not_null(a);
    cr_expect_geq(malloc_usable_size(a), n);
    free(a);
    void *d = __libc_malloc(contract_opaque(n));
    cr_assert_not_null(d);
    void *e = realloc(d, contract_opaque(0));   /* frees d; NULL, or a block of ours */
    free(e);
  }
}
