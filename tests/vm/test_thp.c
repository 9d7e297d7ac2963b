/* TIERMALLOC_THP on a real kernel: the guest's THP setting is "madvise"
 * (tests/vm/run), so huge pages appear only where tiermalloc asks for them. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "vmtest.h"

/* Runs the thp child with a heap of `mib` MiB; returns its huge-page bytes. */
static unsigned long long thp_heap(const char *mib, const char *thp)
{
  char mib_env[64], thp_env[64];
  snprintf(mib_env, sizeof mib_env, "VMTEST_THP_MIB=%s", mib);
  snprintf(thp_env, sizeof thp_env, "TIERMALLOC_THP=%s", thp);
  char *env[] = { "VMTEST_CHILD=thp", mib_env, thp_env, NULL };
  char *argv[] = { (char *)vm_self(), NULL };
  char out[1024];
  int rc = vm_run(argv, env, out, sizeof out);
  cr_assert_eq(rc, 0, "child exited %d:\n%s", rc, out);
  unsigned long long huge = 0;
  cr_assert_eq(sscanf(out, "heap_mib=%*u huge=%llu", &huge), 1, "%s", out);
  return huge;
}

static void thp_require_madvise(void)
{
  char mode[128];
  cr_assert_eq(vm_read_file("/sys/kernel/mm/transparent_hugepage/enabled", mode, sizeof mode), 0);
  cr_assert(strstr(mode, "[madvise]") != NULL, "the guest's THP setting is %s, not madvise", mode);
}

/* Heavy programs: not beside the burst tests. */
TestSuite(thp, .init = vm_quiet_shared);

Test(thp, auto_gives_a_growing_heap_huge_pages)
{
  thp_require_madvise();
  unsigned long long huge = thp_heap("64", "auto");
  /* The arena grows by 2, 2.5, 3, 3.5 MiB on base pages, then by 4 MiB
   * and more with huge pages: most of a 64 MiB heap. */
  cr_expect_geq(huge, 32 * VM_MIB, "only %llu bytes of huge pages in a 64 MiB heap", huge);
}

Test(thp, auto_leaves_a_small_heap_on_base_pages)
{
  thp_require_madvise();
  unsigned long long huge = thp_heap("4", "auto");
  cr_expect_eq(huge, 0, "%llu bytes of huge pages in a 4 MiB heap", huge);
}

Test(thp, never_asks_for_none)
{
  thp_require_madvise();
  unsigned long long huge = thp_heap("64", "never");
  cr_expect_eq(huge, 0, "%llu bytes of huge pages with TIERMALLOC_THP=never", huge);
}

Test(thp, always_asks_for_them_from_the_start)
{
  thp_require_madvise();
  unsigned long long huge = thp_heap("4", "always");
  cr_expect_gt(huge, 0, "no huge pages in a 4 MiB heap with TIERMALLOC_THP=always");
}
