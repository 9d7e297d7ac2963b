/*
 * C++ operator new and delete, every variant (plain, array, nothrow, sized,
 * aligned), in C under their mangled names so the library does not depend
 * on libstdc++. Throwing new follows the standard: on failure call the
 * new-handler and retry, and without one throw std::bad_alloc. Both come
 * from the program's libstdc++, looked up only on that failure path (a
 * program that calls operator new has libstdc++ loaded).
 */
#include <dlfcn.h>
#include <stdlib.h>

#include "shim.h"

typedef void (*cxx_handler_t)(void);

static void *cxx_sym(const char *name)
{
  return dlsym(RTLD_DEFAULT, name);
}

static void *cxx_new_failed(size_t size, size_t align)
{
  for (;;) {
    cxx_handler_t (*get_handler)(void) = (cxx_handler_t (*)(void))cxx_sym("_ZSt15get_new_handlerv");
    cxx_handler_t handler = get_handler ? get_handler() : NULL;
    if (handler == NULL) {
      void (*throw_bad_alloc)(void) = (void (*)(void))cxx_sym("_ZSt17__throw_bad_allocv");
      if (throw_bad_alloc) throw_bad_alloc();
      abort();   /* no libstdc++: nothing can catch it anyway */
    }
    handler();
    void *p = align ? tm_shim_aligned_at(align, size, __builtin_return_address(0)) : tm_shim_malloc(size);
    if (p) return p;
  }
}

/* Inlined into each operator, so the return address is the caller's. */
static inline __attribute__((always_inline)) void *cxx_new(size_t size)
{
  void *p = tm_shim_malloc_at(size, __builtin_return_address(0));
  return tm_likely(p != NULL) ? p : cxx_new_failed(size, 0);
}

static inline __attribute__((always_inline)) void *cxx_new_aligned(size_t size, size_t align)
{
  void *p = tm_shim_aligned_at(align, size, __builtin_return_address(0));
  return tm_likely(p != NULL) ? p : cxx_new_failed(size, align);
}

/* The nothrow forms return NULL after one attempt. (The standard has them
 * run the new-handler loop too, which in C cannot catch the handler's
 * bad_alloc; a new-handler is rare and the result is the same NULL.) */
TM_EXPORT void *_Znwm(size_t n) { return cxx_new(n); }
TM_EXPORT void *_Znam(size_t n) { return cxx_new(n); }
TM_EXPORT void *_ZnwmRKSt9nothrow_t(size_t n, const void *nt) { return tm_shim_malloc_at(n, __builtin_return_address(0)); }
TM_EXPORT void *_ZnamRKSt9nothrow_t(size_t n, const void *nt) { return tm_shim_malloc_at(n, __builtin_return_address(0)); }
TM_EXPORT void *_ZnwmSt11align_val_t(size_t n, size_t a) { return cxx_new_aligned(n, a); }
TM_EXPORT void *_ZnamSt11align_val_t(size_t n, size_t a) { return cxx_new_aligned(n, a); }
TM_EXPORT void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t a, const void *nt) { return tm_shim_aligned_at(a, n, __builtin_return_address(0)); }
TM_EXPORT void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t a, const void *nt) { return tm_shim_aligned_at(a, n, __builtin_return_address(0)); }

/* Every delete is free: the sized forms' size is a hint a buggy program can
 * get wrong, and a wrong size given to jemalloc's sized free corrupts it. */
TM_EXPORT void _ZdlPv(void *p) { tm_shim_free(p); }
TM_EXPORT void _ZdaPv(void *p) { tm_shim_free(p); }
TM_EXPORT void _ZdlPvm(void *p, size_t n) { tm_shim_free(p); }
TM_EXPORT void _ZdaPvm(void *p, size_t n) { tm_shim_free(p); }
TM_EXPORT void _ZdlPvRKSt9nothrow_t(void *p, const void *nt) { tm_shim_free(p); }
TM_EXPORT void _ZdaPvRKSt9nothrow_t(void *p, const void *nt) { tm_shim_free(p); }
TM_EXPORT void _ZdlPvSt11align_val_t(void *p, size_t a) { tm_shim_free(p); }
TM_EXPORT void _ZdaPvSt11align_val_t(void *p, size_t a) { tm_shim_free(p); }
TM_EXPORT void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t a) { tm_shim_free(p); }
TM_EXPORT void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t a) { tm_shim_free(p); }
TM_EXPORT void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const void *nt) { tm_shim_free(p); }
TM_EXPORT void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const void *nt) { tm_shim_free(p); }
