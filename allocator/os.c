#include "os.h"

#include <errno.h>
#include <stdatomic.h>
#include <numaif.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "balancing.h"

#ifndef MADV_COLD
#define MADV_COLD 20
#endif

#ifndef MPOL_PREFERRED_MANY
#define MPOL_PREFERRED_MANY 5
#endif

/* The reservation is given its anon_vma (the kernel's reverse map of its
 * pages) before anything splits it: a VMA gets one at its first write fault,
 * and the VMAs later split from it share it. Else each carve, and each chunk
 * bound apart before its first write (os.h), gets one of its own, and VMAs
 * with different anon_vmas never merge again: chunks handed alike (os_hand)
 * stayed one VMA each, and NUMA balancing's tiering mode, which scans a VMA
 * only after a hint fault in it, never came to them (bench/README, "Handing
 * the heap"). Written once while writable, the page given back (a huge one
 * where THP is always on), then inaccessible again. Where the kernel charges
 * writable memory (vm.overcommit_memory 2) the mprotect fails and nothing is
 * anchored: handed chunks then stay apart. */
static void os_anchor(void *p, size_t size)
{
  if (mprotect(p, size, PROT_READ | PROT_WRITE) != 0) return;
  *(volatile char *)p = 0;
  size_t first = (size_t)1 << TM_OS_CHUNK_SHIFT;
  madvise(p, size < first ? size : first, MADV_DONTNEED);
  mprotect(p, size, PROT_NONE);
}

static int os_reserve(size_t size, void **out)
{
  void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return errno;
  os_anchor(p, size);
  *out = p;
  return 0;
}

static int os_commit(void *p, size_t size)
{
  return mprotect(p, size, PROT_READ | PROT_WRITE) == 0 ? 0 : errno;
}

/* The mbind syscall directly: libnuma's wrapper is the same call, but going
 * through syscall() keeps this file free of libnuma's initialisation. */
static int os_mbind(void *p, size_t size, int mode, const unsigned long *mask, unsigned long maxnode,
                    unsigned flags)
{
  return syscall(SYS_mbind, p, size, mode, mask, maxnode, (unsigned long)flags) == 0 ? 0 : errno;
}

#ifndef MPOL_F_STATIC_NODES
#define MPOL_F_STATIC_NODES (1 << 15)   /* linux/mempolicy.h; numaif.h lacks it */
#endif

static bool os_split;
static _Atomic int os_marker = -1;

void tm_os_split_chunks(bool on, int marker)
{
  os_split = on;
  atomic_store_explicit(&os_marker, marker, memory_order_relaxed);
}

/* A policy preferring `nodes` (first_node before 5.15), with the marker
 * nodes `marks` in its mask too (os.h: they tell policies apart). */
static int os_policy_of(void *p, size_t size, const tm_nodemask_t *nodes, int first_node,
                        int mode_flags, const tm_nodemask_t *marks, unsigned flags)
{
  tm_nodemask_t marked = *nodes, one = *marks;
  tm_nodemask_set(&one, first_node);
  for (unsigned i = 0; i < sizeof marked.w / sizeof marked.w[0]; i++) marked.w[i] |= marks->w[i];
  /* The kernel reads maxnode-1 bits; one more than our mask holds. */
  int err = os_mbind(p, size, MPOL_PREFERRED_MANY | mode_flags, (const unsigned long *)marked.w,
                     TIER_MAX_NODES + 1, flags);
  if (err == EINVAL)   /* before 5.15: no MPOL_PREFERRED_MANY */
    err = os_mbind(p, size, MPOL_PREFERRED | mode_flags, (const unsigned long *)one.w,
                   TIER_MAX_NODES + 1, flags);
  return err;
}

/* Chunk-sized binds while splitting (os.h): static, and on even chunks the
 * marker node too; a kernel that refuses the marker (its nodemasks hold
 * fewer ids) is not given it again. A range-wide bind keeps the plain
 * policy. */
static int os_policy(void *p, size_t size, const tm_nodemask_t *nodes, int first_node,
                     unsigned flags)
{
  bool chunk = os_split && size == (size_t)1 << TM_OS_CHUNK_SHIFT;
  int marker = chunk && !((uintptr_t)p >> TM_OS_CHUNK_SHIFT & 1) ? atomic_load_explicit(&os_marker, memory_order_relaxed) : -1;
  int mode_flags = chunk ? MPOL_F_STATIC_NODES : 0;
  tm_nodemask_t marks = {{0}};
  if (marker >= 0) tm_nodemask_set(&marks, marker);
  int err = os_policy_of(p, size, nodes, first_node, mode_flags, &marks, flags);
  if (err == EINVAL && marker >= 0) {
    tm_nodemask_t none = {{0}};
    err = os_policy_of(p, size, nodes, first_node, mode_flags, &none, flags);
    if (err == 0) atomic_store_explicit(&os_marker, -1, memory_order_relaxed);
  }
  return err;
}

/* Pieces have the marker's next node in their mask, which no chunk has, and
 * odd pieces the marker too: each piece's policy differs from its
 * neighbours', pieces' or chunks'. */
static int os_pieces(void *p, const tm_nodemask_t *nodes, int first_node)
{
  int marker = atomic_load_explicit(&os_marker, memory_order_relaxed);
  if (!os_split || marker < 0 || marker + 1 >= TIER_MAX_NODES) return ENOTSUP;
  const size_t chunk = (size_t)1 << TM_OS_CHUNK_SHIFT, piece = (size_t)1 << TM_OS_PIECE_SHIFT;
  int err = madvise(p, chunk, MADV_NOHUGEPAGE) == 0 ? 0 : errno;
  for (size_t off = 0; off < chunk && err == 0; off += piece) {
    tm_nodemask_t marks = {{0}};
    tm_nodemask_set(&marks, marker + 1);
    if (off / piece & 1) tm_nodemask_set(&marks, marker);
    err = os_policy_of((char *)p + off, piece, nodes, first_node, MPOL_F_STATIC_NODES, &marks, 0);
  }
  if (err != 0) {
    /* One VMA again, as before; a kernel whose nodemasks cannot hold the
     * second marker is not asked again. */
    os_policy(p, chunk, nodes, first_node, 0);
    return err == EINVAL ? ENOTSUP : err;
  }
  /* Split mappings leave a huge page one large folio, which smaps reports
   * as all referenced and move_pages moves whole (bench/pieces.c);
   * MADV_COLD on part of it splits it. */
  madvise(p, 4096, MADV_COLD);
  return 0;
}

#ifndef MPOL_F_NUMA_BALANCING
#define MPOL_F_NUMA_BALANCING (1 << 13)   /* linux/mempolicy.h, 5.12 */
#endif

static int os_hand(void *p, size_t size, const tm_nodemask_t *nodes, bool scan)
{
  int mode_flags = scan ? MPOL_F_NUMA_BALANCING : 0;
  int err = os_mbind(p, size, MPOL_PREFERRED_MANY | mode_flags, (const unsigned long *)nodes->w, TIER_MAX_NODES + 1, 0);
  if (err == EINVAL) err = os_mbind(p, size, MPOL_BIND | mode_flags, (const unsigned long *)nodes->w, TIER_MAX_NODES + 1, 0);
  if (err != 0 || !scan) return err;
  /* In 4 KiB pages from now on: NUMA balancing promotes the folio a hint
   * fault lands in, and a huge page of 4 KiB objects, a sixth of them hot,
   * went up whole, cold ones with it (bench/README). MADV_COLD on part of a
   * huge page splits it. */
  const size_t huge = (size_t)1 << TM_OS_CHUNK_SHIFT;
  madvise(p, size, MADV_NOHUGEPAGE);
  for (size_t off = 0; off + huge <= size; off += huge) madvise((char *)p + off, 4096, MADV_COLD);
  return 0;
}

static int os_bind(void *p, size_t size, const tm_nodemask_t *nodes, int first_node)
{
  return os_policy(p, size, nodes, first_node, 0);
}

/* EIO: some pages could not be moved; where says which. */
static int os_move(void *p, size_t size, const tm_nodemask_t *nodes, int first_node)
{
  int err = os_policy(p, size, nodes, first_node, MPOL_MF_MOVE);
  return err == EIO ? 0 : err;
}

static int os_where(void *const *pages, int n, int *node)
{
  long r = syscall(SYS_move_pages, 0, (unsigned long)n, pages, NULL, node, 0);
  return r < 0 ? errno : 0;
}

/* A positive return from move_pages counts pages it could not move (one
 * held by a pipe, or under I/O); the kernel then stops, and leaves the status
 * of the batch that failed and of every page after it unwritten, so where
 * reads them all again. */
static int os_push(void *const *pages, int n, int node, int *status)
{
  int nodes[((size_t)1 << TM_OS_CHUNK_SHIFT) / 4096];   /* a chunk's pages at most */
  if (n < 0 || (size_t)n > sizeof nodes / sizeof *nodes) return EINVAL;
  for (int i = 0; i < n; i++) nodes[i] = node;
  long r = syscall(SYS_move_pages, 0, (unsigned long)n, pages, nodes, status, MPOL_MF_MOVE);
  if (r < 0) return errno;
  return r > 0 ? os_where(pages, n, status) : 0;
}

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

static int os_pageout(void *p, size_t size)
{
  return madvise(p, size, MADV_PAGEOUT) == 0 ? 0 : errno;
}

static int os_resident(void *p, size_t size, unsigned char *vec)
{
  return mincore(p, size, vec) == 0 ? 0 : errno;
}

static int os_purge(void *p, size_t size, int lazy)
{
  return madvise(p, size, lazy ? MADV_FREE : MADV_DONTNEED) == 0 ? 0 : errno;
}

static int os_huge(void *p, size_t size)
{
  return madvise(p, size, MADV_HUGEPAGE) == 0 ? 0 : errno;
}

const tm_os_t tm_os_linux = {
  .reserve = os_reserve,
  .commit = os_commit,
  .bind = os_bind,
  .purge = os_purge,
  .huge = os_huge,
  .move = os_move,
  .where = os_where,
  .push = os_push,
  .pageout = os_pageout,
  .resident = os_resident,
  .pieces = os_pieces,
  .hand = os_hand,
};

unsigned tm_os_numa_balancing_policies(int node)
{
  if (node < 0 || node >= TIER_MAX_NODES) return 0;
  long page = sysconf(_SC_PAGESIZE);
  void *p = mmap(NULL, (size_t)page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return 0;
  tm_nodemask_t m = { { 0 } };
  tm_nodemask_set(&m, node);
  unsigned got = 0;
  if (os_mbind(p, (size_t)page, MPOL_BIND | MPOL_F_NUMA_BALANCING, (const unsigned long *)m.w, TIER_MAX_NODES + 1,
               0) == 0)
    got |= TM_BALANCING_BIND;
  if (os_mbind(p, (size_t)page, MPOL_PREFERRED_MANY | MPOL_F_NUMA_BALANCING, (const unsigned long *)m.w,
               TIER_MAX_NODES + 1, 0) == 0)
    got |= TM_BALANCING_PREFERRED_MANY;
  munmap(p, (size_t)page);
  return got;
}
