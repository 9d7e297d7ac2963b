/* The guest is what tests/vm/run promises: cgroup v2 with the memory
 * controller for children, zram swap, switchable demotion and NUMA
 * balancing, THP madvise. The other tests and later budgets rely on these. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vmtest.h"

Test(rig, nodes_match_the_topology)
{
  const vm_topology_t *topo = vm_topology();
  char buf[64];
  cr_assert_eq(vm_read_file("/sys/devices/system/node/has_cpu", buf, sizeof buf), 0);
  cr_expect_str_eq(buf, "0", "%s: only node0 has CPUs", topo->name);
  cr_assert_eq(vm_read_file("/sys/devices/system/node/has_memory", buf, sizeof buf), 0);
  char want[16];
  snprintf(want, sizeof want, "0-%d", topo->nnodes - 1);
  cr_expect_str_eq(buf, want);
}

Test(rig, cgroup_v2_memory_for_children)
{
  vm_topology();
  char buf[256];
  cr_assert_eq(vm_read_file("/sys/fs/cgroup/cgroup.subtree_control", buf, sizeof buf), 0,
               "no cgroup v2 at /sys/fs/cgroup");
  cr_expect(strstr(buf, "memory") != NULL, "subtree_control: %s", buf);
  cr_expect(strstr(buf, "cpuset") != NULL, "subtree_control: %s", buf);
  char dir[64], path[128];
  snprintf(dir, sizeof dir, "/sys/fs/cgroup/vmtest-%d", (int)getpid());
  cr_assert_eq(mkdir(dir, 0755), 0, "mkdir %s: %s", dir, strerror(errno));
  snprintf(path, sizeof path, "%s/memory.max", dir);
  vm_write_file(path, "67108864");
  cr_assert_eq(vm_read_file(path, buf, sizeof buf), 0);
  cr_expect_str_eq(buf, "67108864");
  snprintf(path, sizeof path, "%s/memory.numa_stat", dir);
  cr_expect_eq(access(path, R_OK), 0, "memory.numa_stat: %s", strerror(errno));
  cr_expect_eq(rmdir(dir), 0, "rmdir %s: %s", dir, strerror(errno));
}

Test(rig, zram_swap_is_on)
{
  vm_topology();
  /* Not while a reclaim test has turned swap off. */
  int fd = vm_flock(VM_RECLAIM_LOCK, LOCK_EX);
  cr_assert_geq(fd, 0, "%s: %s", VM_RECLAIM_LOCK, strerror(errno));
  char buf[1024];
  int err = vm_read_file("/proc/swaps", buf, sizeof buf);
  close(fd);
  cr_assert_eq(err, 0);
  cr_expect(strstr(buf, "/dev/zram0") != NULL, "/proc/swaps:\n%s", buf);
}

Test(rig, demotion_and_numa_balancing_switch)
{
  vm_topology();
  const char *dem = "/sys/kernel/mm/numa/demotion_enabled";
  char buf[64];
  cr_assert_eq(vm_read_file(dem, buf, sizeof buf), 0, "%s missing", dem);
  vm_write_file(dem, "true");
  cr_assert_eq(vm_read_file(dem, buf, sizeof buf), 0);
  cr_expect_str_eq(buf, "true");
  vm_write_file(dem, "false");
  cr_assert_eq(vm_read_file(dem, buf, sizeof buf), 0);
  cr_expect_str_eq(buf, "false");

  /* Under the reclaim lock, as tests/vm/test_balancing.c switches it. */
  const char *nb = "/proc/sys/kernel/numa_balancing";
  int fd = vm_flock(VM_RECLAIM_LOCK, LOCK_EX);
  cr_assert_geq(fd, 0, "%s: %s", VM_RECLAIM_LOCK, strerror(errno));
  int err = vm_read_file(nb, buf, sizeof buf);
  char first[64];
  snprintf(first, sizeof first, "%s", buf);
  vm_write_file(nb, "2");
  char now[64] = "";
  vm_read_file(nb, now, sizeof now);
  vm_write_file(nb, "0");
  close(fd);
  cr_assert_eq(err, 0, "%s missing", nb);
  cr_expect_str_eq(first, "0", "the rig starts with NUMA balancing off");
  cr_expect_str_eq(now, "2");
}

Test(rig, thp_is_madvise)
{
  vm_topology();
  char buf[64];
  cr_assert_eq(vm_read_file("/sys/kernel/mm/transparent_hugepage/enabled", buf, sizeof buf), 0);
  cr_expect_str_eq(buf, "always [madvise] never");
}
