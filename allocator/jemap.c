#include "jemap.h"

#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>

#define JEMAP_MAX 512   /* base blocks grow geometrically: a few dozen at most */

typedef struct jemap_entry_s {
  uintptr_t start, end;
} jemap_entry_t;

static jemap_entry_t jemap[JEMAP_MAX];
static unsigned jemap_n;
static bool jemap_overflow;
static atomic_flag jemap_lock = ATOMIC_FLAG_INIT;

/* Held for a few loads and stores, never across a syscall. */
static void jemap_acquire(void)
{
  while (atomic_flag_test_and_set_explicit(&jemap_lock, memory_order_acquire)) {
  }
}

static void jemap_release(void)
{
  atomic_flag_clear_explicit(&jemap_lock, memory_order_release);
}

static void jemap_add_locked(uintptr_t s, uintptr_t e)
{
  if (jemap_n == JEMAP_MAX) {
    jemap_overflow = true;
    return;
  }
  jemap[jemap_n++] = (jemap_entry_t){ s, e };
}

/* Removes [s, e) from every entry, splitting one that it cuts in two. */
static void jemap_remove_locked(uintptr_t s, uintptr_t e)
{
  for (unsigned i = 0; i < jemap_n;) {
    jemap_entry_t m = jemap[i];
    if (e <= m.start || s >= m.end) {
      i++;
      continue;
    }
    jemap[i] = jemap[--jemap_n];
    if (m.start < s) jemap_add_locked(m.start, s);
    if (e < m.end) jemap_add_locked(e, m.end);
  }
}

void *tmje_os_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int tmje_os_munmap(void *addr, size_t len);

void *tmje_os_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
  void *p = mmap(addr, len, prot, flags, fd, off);
  if (p != MAP_FAILED) {
    jemap_acquire();
    /* MAP_FIXED over part of an old mapping replaces it. */
    jemap_remove_locked((uintptr_t)p, (uintptr_t)p + len);
    jemap_add_locked((uintptr_t)p, (uintptr_t)p + len);
    jemap_release();
  }
  return p;
}

int tmje_os_munmap(void *addr, size_t len)
{
  int r = munmap(addr, len);
  if (r == 0) {
    jemap_acquire();
    jemap_remove_locked((uintptr_t)addr, (uintptr_t)addr + len);
    jemap_release();
  }
  return r;
}

void *tm_jemap_alloc(size_t size, size_t align)
{
  size_t span = size + align;
  if (span < size) return NULL;
  char *raw = tmje_os_mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return NULL;
  uintptr_t start = ((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1);
  if (start > (uintptr_t)raw) tmje_os_munmap(raw, start - (uintptr_t)raw);
  uintptr_t end = (uintptr_t)raw + span;
  if (end > start + size) tmje_os_munmap((void *)(start + size), end - (start + size));
  return (void *)start;
}

bool tm_jemap_contains(const void *p)
{
  uintptr_t a = (uintptr_t)p;
  bool found = false;
  jemap_acquire();
  for (unsigned i = 0; i < jemap_n && !found; i++) found = a >= jemap[i].start && a < jemap[i].end;
  found = found || jemap_overflow;
  jemap_release();
  return found;
}

void tm_jemap_postfork_child(void)
{
  atomic_flag_clear_explicit(&jemap_lock, memory_order_relaxed);
}
