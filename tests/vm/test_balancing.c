/* The kernel's NUMA balancing as tiermalloc reports it, on the guest's
 * 6.12 kernel: the policies the kernel lets allow it (6.10+: preferred-many
 * and bind), the mode as the sysctl says it (within a second; switched to
 * tiering and back while the test holds the reclaim lock, which the tests that need
 * NUMA balancing off also hold), and tierctl explain's account of it. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "vmtest.h"

#define NB_SYSCTL "/proc/sys/kernel/numa_balancing"

static tier_stats_t nb_stats(void)
{
  tier_stats_t s;
  cr_assert_eq(tier_stats_get(&s, sizeof s), 0);
  return s;
}

Test(balancing, stats_and_explain_say_what_numa_balancing_does, .timeout = 120)
{
  const vm_topology_t *topo = vm_topology();
  struct utsname u;
  cr_assert_eq(uname(&u), 0);
  int major = 0, minor = 0;
  sscanf(u.release, "%d.%d", &major, &minor);
  tier_stats_t s = nb_stats();
  unsigned want = major > 6 || (major == 6 && minor >= 10) ? 3u : major > 5 || (major == 5 && minor >= 12) ? 1u : 0u;
  cr_expect_eq(s.numa_balancing_policies, want, "%s: kernel %s: policies %u", topo->name, u.release,
               s.numa_balancing_policies);
  cr_expect_eq(s.numa_balancing_heap, 0, "the heap's policies do not allow it");
  int lock_fd = open(VM_RECLAIM_LOCK, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  cr_assert_geq(lock_fd, 0);
  while (flock(lock_fd, LOCK_EX) != 0) {}
  char was[16];
  cr_assert_eq(vm_read_file(NB_SYSCTL, was, sizeof was), 0);
  cr_expect_eq(nb_stats().numa_balancing, atoi(was), "%s: the sysctl says %s", topo->name, was);
  vm_write_file(NB_SYSCTL, "2");
  usleep(1100 * 1000);   /* the stats read the mode again once a second */
  s = nb_stats();
  char tierctl[PATH_MAX], out[16384];
  cr_assert_not_null(realpath("build/tierctl", tierctl), "make builds build/tierctl");
  char *argv[] = { tierctl, "explain", NULL };
  int rc = vm_run(argv, NULL, out, sizeof out);
  vm_write_file(NB_SYSCTL, was);
  flock(lock_fd, LOCK_UN);
  close(lock_fd);
  cr_expect_eq(s.numa_balancing, 2, "%s: switched to tiering, the stats say %d", topo->name, s.numa_balancing);
  cr_expect_eq(rc, 0, "%s", out);
  cr_expect(strstr(out, "\nnuma balancing: tiering (2); policies this kernel lets allow it: preferred-many and bind; "
                        "tiermalloc's heap: not scanned\n") != NULL, "%s: %s", topo->name, out);
  cr_expect(strstr(out, "warning: numa_balancing=2 (tiering) does not reach tiermalloc's heap") != NULL, "%s", out);
  cr_expect(strstr(out, "  promotion rate limit ") != NULL, "%s", out);
}
