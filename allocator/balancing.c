#include "balancing.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "kfile.h"

/* A number at the start of a small file; -1 when absent or not a number. */
static long long balancing_num(const char *root, const char *file)
{
  char path[TM_KFILE_PATH_MAX], buf[64];
  if (tm_kfile_path(path, root, file, NULL, -1, NULL) != 0 || tm_kfile_read(path, buf, sizeof buf) <= 0)
    return -1;
  if (buf[0] < '0' || buf[0] > '9') return -1;
  long long v = 0;
  for (const char *c = buf; *c >= '0' && *c <= '9' && v < (1ll << 50); c++) v = v * 10 + (*c - '0');
  return v;
}

int tm_balancing_mode(const char *root)
{
  long long m = balancing_num(root, "/proc/sys/kernel/numa_balancing");
  return m >= 0 && m <= 3 ? (int)m : -1;
}

int tm_balancing_mode_now(void)
{
  static _Atomic int mode;
  static _Atomic uint64_t read_ns;   /* CLOCK_MONOTONIC_COARSE + 1 at the last read; 0: never */
  uint64_t now = tm_clock_ns(CLOCK_MONOTONIC_COARSE) + 1, then = atomic_load_explicit(&read_ns, memory_order_acquire);
  if (then != 0 && now - then < 1000000000ull) return atomic_load_explicit(&mode, memory_order_relaxed);
  atomic_store_explicit(&mode, tm_balancing_mode(""), memory_order_relaxed);
  atomic_store_explicit(&read_ns, now, memory_order_release);
  return atomic_load_explicit(&mode, memory_order_relaxed);
}

int tm_balancing_tiers_apart(const tm_topology_t *topo)
{
  switch (topo->source) {
  case TM_TOPO_KERNEL_TIERS: return 1;
  case TM_TOPO_OVERRIDE: return topo->ntiers > 1 ? -1 : 0;
  default: return 0;
  }
}

int tm_balancing_demotion(const char *root)
{
  char path[TM_KFILE_PATH_MAX], buf[16];
  if (tm_kfile_path(path, root, "/sys/kernel/mm/numa/demotion_enabled", NULL, -1, NULL) != 0 ||
      tm_kfile_read(path, buf, sizeof buf) <= 0)
    return -1;
  return buf[0] == 't' || buf[0] == 'T' || buf[0] == '1' || buf[0] == 'y' || buf[0] == 'Y';
}

void tm_balancing_read(const char *root, unsigned flag_policies, const tm_topology_t *topo, tm_balancing_t *out)
{
  memset(out, 0, sizeof *out);
  out->mode = tm_balancing_mode(root);
  long long mbps = balancing_num(root, "/proc/sys/kernel/numa_balancing_promote_rate_limit_MBps");
  out->promote_mbps = mbps > 0 ? (uint64_t)mbps : 0;
  out->demotion = tm_balancing_demotion(root);
  out->flag_policies = flag_policies;
  out->apart = tm_balancing_tiers_apart(topo);
}

const char *tm_balancing_mode_name(int mode)
{
  switch (mode) {
  case 0: return "off";
  case 1: return "normal";
  case 2: return "tiering";
  case 3: return "normal and tiering";
  default: return "none";
  }
}

const char *tm_balancing_policies_name(unsigned p)
{
  if ((p & TM_BALANCING_PREFERRED_MANY) && (p & TM_BALANCING_BIND)) return "preferred-many and bind";
  if (p & TM_BALANCING_PREFERRED_MANY) return "preferred-many";
  if (p & TM_BALANCING_BIND) return "bind";
  return "none";
}

const char *tm_balancing_explain(const tm_balancing_t *b, char *buf, size_t size)
{
  const char *kernel = b->flag_policies & TM_BALANCING_PREFERRED_MANY
                           ? "this kernel lets a policy that prefers nodes allow it (MPOL_PREFERRED_MANY with "
                             "MPOL_F_NUMA_BALANCING)"
                       : b->flag_policies & TM_BALANCING_BIND
                           ? "this kernel lets only a strict policy allow it (MPOL_BIND with MPOL_F_NUMA_BALANCING, "
                             "which would make a full tier fail allocations instead of spilling)"
                           : "this kernel lets no policy allow it (no MPOL_F_NUMA_BALANCING)";
  static const char one_tier[] =
      "the kernel puts every node in one memory tier (it has no performance data for them: 6.1 ignores HMAT), "
      "and its tiering mode promotes only from nodes it ranks below the top";
  if (b->mode < 0)
    snprintf(buf, size, "this kernel has no NUMA balancing: tiermalloc's own tracking is all there is");
  else if (b->apart == 0)
    snprintf(buf, size, "NUMA balancing is %s (%d), and %s, so it promotes nothing to tier 0 here, whatever the "
                        "heap's policies (TIERMALLOC_NUMA_BALANCING=tiering hands nothing over): tiermalloc's own "
                        "tracking is all there is; %s",
             tm_balancing_mode_name(b->mode), b->mode, one_tier, kernel);
  else if (b->mode & 2)
    snprintf(buf, size, "NUMA balancing in tiering mode (%d) promotes hot pages from CPU-less nodes, but not "
                        "tiermalloc's heap: its chunks' policies keep NUMA balancing off it "
                        "(TIERMALLOC_NUMA_BALANCING=tiering, experimental, hands them over), and %s",
             b->mode, kernel);
  else
    snprintf(buf, size, "NUMA balancing is %s (%d): it promotes nothing from CPU-less nodes; tiering mode (2) "
                        "would, for memory whose policy allows it, which tiermalloc's heap's does only with "
                        "TIERMALLOC_NUMA_BALANCING=tiering (experimental); %s",
             tm_balancing_mode_name(b->mode), b->mode, kernel);
  return buf;
}
