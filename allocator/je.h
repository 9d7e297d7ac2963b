/*
 * je: the private jemalloc's API. mk/private-jemalloc.sh renamed every public
 * symbol of Debian's libjemalloc_pic.a to tmje_<name>; this header declares
 * them under those names, with jemalloc's own types (extent_hooks_t,
 * MALLOCX_*). Nothing outside allocator/ and shim/ sees these names.
 */
#ifndef TM_JE_H
#define TM_JE_H

#define JEMALLOC_NO_RENAME
#define JEMALLOC_NO_DEMANGLE
#define je_aligned_alloc tmje_aligned_alloc
#define je_calloc tmje_calloc
#define je_dallocx tmje_dallocx
#define je_free tmje_free
#define je_mallctl tmje_mallctl
#define je_mallctlbymib tmje_mallctlbymib
#define je_mallctlnametomib tmje_mallctlnametomib
#define je_malloc tmje_malloc
#define je_malloc_conf tmje_malloc_conf
#define je_malloc_conf_2_conf_harder tmje_malloc_conf_2_conf_harder
#define je_malloc_message tmje_malloc_message
#define je_malloc_stats_print tmje_malloc_stats_print
#define je_malloc_usable_size tmje_malloc_usable_size
#define je_mallocx tmje_mallocx
#define je_smallocx_54eaed1d8b56b1aa528be3bdd1877e59c56fa90c tmje_smallocx_unused
#define je_nallocx tmje_nallocx
#define je_posix_memalign tmje_posix_memalign
#define je_rallocx tmje_rallocx
#define je_realloc tmje_realloc
#define je_sallocx tmje_sallocx
#define je_sdallocx tmje_sdallocx
#define je_xallocx tmje_xallocx
#define je_memalign tmje_memalign
#define je_valloc tmje_valloc
#include <jemalloc/jemalloc.h>

#endif
