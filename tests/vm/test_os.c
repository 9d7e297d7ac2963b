/* The kernel primitives of allocator/os.c, against a real kernel where a
 * unit test's double cannot say what the kernel does: os.c is compiled into
 * vmtest itself (the library hides its symbols). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <numaif.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "os.h"
#include "vmtest.h"

#define OS_PAGES 16
#define OS_HELD 3   /* the page a pipe holds */
#define OS_UNSET 12345

/* OS_PAGES pages on the CPUs' node 0, page OS_HELD held by a pipe (vmsplice
 * takes a reference to it, which makes migration fail: the pipe is the
 * caller's to close). */
static char *os_held_pages(void *pages[OS_PAGES], int pipefd[2])
{
  char *p = mmap(NULL, OS_PAGES * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  cr_assert_neq(p, MAP_FAILED);
  vm_touch(p, OS_PAGES * 4096);
  for (int i = 0; i < OS_PAGES; i++) pages[i] = p + i * 4096;
  cr_assert_eq(pipe(pipefd), 0);
  struct iovec iov = { .iov_base = pages[OS_HELD], .iov_len = 4096 };
  cr_assert_eq(vmsplice(pipefd[1], &iov, 1, 0), 4096, "vmsplice: %s", strerror(errno));
  return p;
}

Test(os, push_says_where_every_page_is_when_some_cannot_move)
{
  int target = vm_topology()->nnodes - 1;   /* a node without the CPUs */
  void *pages[OS_PAGES];
  int status[OS_PAGES], nodes[OS_PAGES], fd[2];

  /* What the kernel does: it counts the page it could not move, and leaves
   * the status of the batch it failed in unwritten. */
  char *a = os_held_pages(pages, fd);
  for (int i = 0; i < OS_PAGES; i++) nodes[i] = target, status[i] = OS_UNSET;
  long r = syscall(SYS_move_pages, 0, (unsigned long)OS_PAGES, pages, nodes, status, MPOL_MF_MOVE);
  cr_assert_gt(r, 0, "move_pages returned %ld: the held page moved, so this kernel needs no fallback", r);
  cr_expect_eq(status[0], OS_UNSET, "status[0] written (%d): the kernel wrote the failed batch", status[0]);
  close(fd[0]), close(fd[1]);
  munmap(a, OS_PAGES * 4096);

  /* What push reports in the same case: every page's node after. */
  char *b = os_held_pages(pages, fd);
  for (int i = 0; i < OS_PAGES; i++) status[i] = OS_UNSET;
  cr_assert_eq(tm_os_linux.push(pages, OS_PAGES, target, status), 0);
  for (int i = 0; i < OS_PAGES; i++)
    cr_expect_eq(status[i], i == OS_HELD ? 0 : target, "page %d: status %d (held: page %d, target %d)",
                 i, status[i], OS_HELD, target);
  close(fd[0]), close(fd[1]);
  munmap(b, OS_PAGES * 4096);
}
