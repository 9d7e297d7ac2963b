/*
 * shim: the exported entry points. Each counts what it allocates or frees on
 * the tier the pointer lies in (allocator/account.h) around one call into the
 * private jemalloc. Pointers tiermalloc does not own go to glibc.
 */
#ifndef TM_SHIM_H
#define TM_SHIM_H

#include <stddef.h>

#define TM_EXPORT __attribute__((visibility("default")))
#define tm_likely(x) __builtin_expect(!!(x), 1)
#define tm_unlikely(x) __builtin_expect(!!(x), 0)

/* malloc family with tiermalloc's accounting; the C++ operators use them. */
void *tm_shim_malloc(size_t size);
/* malloc for a call made at ra (operator new's caller: the allocation site). */
void *tm_shim_malloc_at(size_t size, const void *ra);
void *tm_shim_aligned_at(size_t align, size_t size, const void *ra);   /* align: power of two; ra: the site */
void tm_shim_free(void *p);

#endif
