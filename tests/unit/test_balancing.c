/* balancing: the kernel's NUMA balancing as the captured trees show it
 * (kernel.numa_balancing 1 on the 6.12 guest, 0 on the cloud host, with
 * their promotion limit and demotion switch), a tree without the files, and
 * what each mode and kernel is said to give. The policy probe itself is the
 * kernel's (tests/vm/test_balancing.c checks it in the guest). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "balancing.h"

Test(balancing, reads_the_mode_the_promotion_limit_and_demotion_from_a_6_12_guest)
{
  tm_balancing_t b;
  tm_topology_t topo;
  tm_topology_discover(&topo, "tests/fixtures/dram-cxl-6.12", NULL);
  tm_balancing_read("tests/fixtures/dram-cxl-6.12", TM_BALANCING_BIND | TM_BALANCING_PREFERRED_MANY, &topo, &b);
  cr_expect_eq(b.mode, 1);
  cr_expect_eq(b.promote_mbps, 65536);
  cr_expect_eq(b.demotion, 0, "demotion_enabled says false");
  cr_expect_eq(b.flag_policies, TM_BALANCING_BIND | TM_BALANCING_PREFERRED_MANY);
  cr_expect_eq(tm_balancing_mode("tests/fixtures/host-single-node"), 0);
}

Test(balancing, a_kernel_without_the_files_has_none)
{
  tm_balancing_t b;
  tm_topology_t topo;
  tm_topology_discover(&topo, "tests/fixtures/no-such-tree", NULL);
  tm_balancing_read("tests/fixtures/no-such-tree", 0, &topo, &b);
  cr_expect_eq(b.mode, -1);
  cr_expect_eq(b.promote_mbps, 0);
  cr_expect_eq(b.demotion, -1);
  cr_expect_str_eq(tm_balancing_mode_name(b.mode), "none");
  char why[512];
  cr_expect(strstr(tm_balancing_explain(&b, why, sizeof why), "no NUMA balancing") != NULL, "%s", why);
}

/* A tree of our own with kernel.numa_balancing = text. */
static void bal_tree(char *root, size_t size, const char *text)
{
  snprintf(root, size, "/tmp/tm-balancing.XXXXXX");
  cr_assert_not_null(mkdtemp(root));
  char path[256];
  snprintf(path, sizeof path, "%s/proc", root);
  cr_assert_eq(mkdir(path, 0755), 0);
  snprintf(path, sizeof path, "%s/proc/sys", root);
  cr_assert_eq(mkdir(path, 0755), 0);
  snprintf(path, sizeof path, "%s/proc/sys/kernel", root);
  cr_assert_eq(mkdir(path, 0755), 0);
  snprintf(path, sizeof path, "%s/proc/sys/kernel/numa_balancing", root);
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fputs(text, f);
  fclose(f);
}

static void bal_tree_remove(const char *root)
{
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  cr_assert_eq(system(cmd), 0);
}

Test(balancing, each_mode_is_named_and_junk_is_none)
{
  static const char *const names[] = { "off", "normal", "tiering", "normal and tiering" };
  char root[64];
  for (int m = 0; m < 4; m++) {
    char text[8];
    snprintf(text, sizeof text, "%d\n", m);
    bal_tree(root, sizeof root, text);
    cr_expect_eq(tm_balancing_mode(root), m);
    cr_expect_str_eq(tm_balancing_mode_name(m), names[m]);
    bal_tree_remove(root);
  }
  bal_tree(root, sizeof root, "7\n");
  cr_expect_eq(tm_balancing_mode(root), -1, "not a mode");
  bal_tree_remove(root);
  bal_tree(root, sizeof root, "tiering\n");
  cr_expect_eq(tm_balancing_mode(root), -1, "not a number");
  bal_tree_remove(root);
}

/* What people are told: in tiering mode, that it does not reach the heap;
 * otherwise what tiering mode would give; and which policy this kernel lets
 * allow it (6.10+: preferred-many; 5.12-6.9: bind only; none). */
Test(balancing, the_explanation_says_what_each_mode_and_kernel_gives)
{
  char why[512];
  tm_balancing_t b = { .mode = 2, .flag_policies = TM_BALANCING_BIND | TM_BALANCING_PREFERRED_MANY, .apart = 1 };
  tm_balancing_explain(&b, why, sizeof why);
  cr_expect(strstr(why, "tiering mode (2) promotes hot pages from CPU-less nodes, but not tiermalloc's heap") != NULL,
            "%s", why);
  cr_expect(strstr(why, "MPOL_PREFERRED_MANY with MPOL_F_NUMA_BALANCING") != NULL, "%s", why);
  b = (tm_balancing_t){ .mode = 1, .flag_policies = TM_BALANCING_BIND, .apart = 1 };
  tm_balancing_explain(&b, why, sizeof why);
  cr_expect(strstr(why, "NUMA balancing is normal (1): it promotes nothing from CPU-less nodes; tiering mode (2) "
                        "would") != NULL, "%s", why);
  cr_expect(strstr(why, "only a strict policy") != NULL, "%s", why);
  cr_expect_str_eq(tm_balancing_policies_name(TM_BALANCING_BIND), "bind");
  b = (tm_balancing_t){ .mode = 0, .flag_policies = 0, .apart = -1 };
  tm_balancing_explain(&b, why, sizeof why);
  cr_expect(strstr(why, "lets no policy allow it") != NULL, "%s", why);
  cr_expect_str_eq(tm_balancing_policies_name(0), "none");
}

/* The kernel's tiering mode promotes only from nodes it ranks below its top
 * tier: with every node in one kernel memory tier (6.1's sysfs, captured)
 * it promotes nothing to tier 0, which is said whatever the mode; tiers
 * the kernel formed are apart; TIERMALLOC_TIERS is not compared. */
Test(balancing, one_kernel_memory_tier_promotes_nothing_and_is_said)
{
  tm_topology_t topo;
  tm_topology_discover(&topo, "tests/fixtures/dram-cxl-flat-6.1", NULL);
  cr_assert_eq(topo.source, TM_TOPO_CPU_FALLBACK);
  cr_expect_eq(tm_balancing_tiers_apart(&topo), 0);
  tm_topology_discover(&topo, "tests/fixtures/dram-cxl-6.12", NULL);
  cr_assert_eq(topo.source, TM_TOPO_KERNEL_TIERS);
  cr_expect_eq(tm_balancing_tiers_apart(&topo), 1);
  tm_topology_discover(&topo, "tests/fixtures/dram-cxl-flat-6.1", "0;1");
  cr_assert_eq(topo.source, TM_TOPO_OVERRIDE);
  cr_expect_eq(tm_balancing_tiers_apart(&topo), -1);
  char why[512];
  for (int mode = 0; mode <= 3; mode++) {
    tm_balancing_t b = { .mode = mode, .flag_policies = TM_BALANCING_BIND, .apart = 0 };
    tm_balancing_explain(&b, why, sizeof why);
    cr_expect(strstr(why, "every node in one memory tier") != NULL && strstr(why, "promotes nothing to tier 0") != NULL,
              "mode %d: %s", mode, why);
  }
}
