#include "startup.h"

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "arena.h"
#include "background.h"
#include "balancing.h"
#include "budget.h"
#include "chunkmap.h"
#include "fork.h"
#include "je.h"
#include "log.h"
#include "options.h"
#include "os.h"
#include "policy.h"
#include "reclaim.h"
#include "range.h"

enum { START_NONE, START_RUNNING, START_DONE };

static _Atomic int start_state;
static __thread bool start_here __attribute__((tls_model("initial-exec")));
static tm_topology_t start_topo;
static unsigned start_numab;   /* tm_startup_numa_balancing_policies */

/* jemalloc reads this after MALLOC_CONF, so a program's MALLOC_CONF meant
 * for its own jemalloc cannot undo what the hooks depend on:
 * oversize_threshold:0 keeps jemalloc from creating its "huge" arena with
 * the default (mmap) hooks behind our back. lg_extent_max_active_fit:16 lets
 * a new extent be cut from any larger dirty one: with jemalloc's 6 (at most
 * 64x the request), dirty extents freed by exiting threads were left unused
 * while the arena grew; a thread-churning benchmark mapped 145-306 MiB
 * instead of 27, and sqlite's peak RSS was 77 MB instead of 63 (bench/).
 * narenas: one arena per CPU the process may run on unless
 * TIERMALLOC_NARENAS says otherwise, not jemalloc's 4: each arena keeps its
 * own partly used slabs and dirty pages, and the threads' caches take most
 * of the lock traffic. tcache_nslots_small_max:64, _min:8: a thread's first
 * malloc of a size class fills half the class's slots from the arena, and
 * its exit gives back what it did not use; with jemalloc's 200 and 20, a
 * thread-churning benchmark (bench/churn) spent 41 % of its instructions in
 * those flushes at thread exit. Together they cut its instructions by 39 %
 * and its peak RSS from 9.1 to 6.1 MiB (jemalloc's own: 6.1 MiB), for 0.9 %
 * more instructions in CPython's workload (callgrind, 2026-12-06).
 * Filled before jemalloc starts. */
static char start_je_conf[256];
const char *tmje_malloc_conf_2_conf_harder = start_je_conf;

/* The CPUs this process may run on (at least 1). */
static unsigned start_ncpus(void)
{
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return (unsigned)CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (unsigned)n : 1;
}

static void start_je_conf_build(void)
{
  uint64_t narenas = tm_option(TM_OPTION_NARENAS)->num;
  snprintf(start_je_conf, sizeof start_je_conf,
           "oversize_threshold:0,lg_extent_max_active_fit:16,dirty_decay_ms:%llu,narenas:%llu,"
           "tcache_nslots_small_max:64,tcache_nslots_small_min:8",
           (unsigned long long)tm_option(TM_OPTION_DIRTY_DECAY_MS)->num,
           (unsigned long long)(narenas > 0 ? narenas : start_ncpus()));
}

/* jemalloc's own error messages, as one tiermalloc line each. */
static void start_je_message(void *arg, const char *msg)
{
  size_t n = strlen(msg);
  while (n > 0 && msg[n - 1] == '\n') n--;
  tm_warn("jemalloc: %.*s", (int)n, msg);
}

static void start_verbose(void)
{
  tm_balancing_t nb;
  char nb_why[512];
  tm_balancing_read("", start_numab, &start_topo, &nb);
  tm_warn("numa balancing: %s (%d), policies that may allow it: %s; %s", tm_balancing_mode_name(nb.mode), nb.mode,
          tm_balancing_policies_name(nb.flag_policies), tm_balancing_explain(&nb, nb_why, sizeof nb_why));
  tm_warn("%d tier(s) from %s; ranges %s, %llu MiB each", start_topo.ntiers,
          tm_topology_source_name(start_topo.source), tm_ranges.n ? "active" : "inactive",
          (unsigned long long)(tm_ranges.size >> 20));
  tm_budgets_t b;
  tm_budget_snapshot(&b);
  tm_warn("budgets from %s %s", tm_cgroup_version_name(b.cgroup.version), b.cgroup.path);
  for (int t = 0; t < start_topo.ntiers; t++) {
    char nodes[128], why[256];
    tm_nodelist_format(&start_topo.tier[t].nodes, nodes, sizeof nodes);
    tm_warn("tier %d: nodes %s, capacity %llu MiB", t, nodes,
            (unsigned long long)(start_topo.tier[t].capacity >> 20));
    bool any = false;
    for (unsigned l = TM_LIMIT_COUNT; l-- > 0;) {
      if (b.tier[t][l].source == TIER_BUDGET_NONE) continue;
      any = true;
      tm_warn("tier %d: %s", t, tm_budget_explain(&b, (unsigned)t, l, why, sizeof why));
    }
    if (!any) tm_warn("tier %d: no budget (no limit from the environment or the cgroup)", t);
  }
  tm_warn("jemalloc: %s", start_je_conf);
}

enum { START_THP_AUTO, START_THP_ALWAYS, START_THP_NEVER };   /* TIERMALLOC_THP */

/* The smallest carve that gets huge pages. jemalloc grows an arena's
 * address space by page size classes (2, 2.5, 3, 3.5, 4 MiB, ...) and maps
 * each arena's metadata in 2 MiB blocks, so auto leaves the metadata and a
 * small heap on base pages, where a huge page would be mostly untouched
 * memory, and gives a heap that keeps growing huge pages: fewer page faults
 * and TLB misses (measured in bench/results/latest.md). */
static size_t start_huge_min(void)
{
  switch (tm_option(TM_OPTION_THP)->num) {
  case START_THP_ALWAYS: return 0;
  case START_THP_NEVER: return SIZE_MAX;
  default: return (size_t)4 << 20;
  }
}

static void start_run(void)
{
  tm_options_init();
  const char *tiers = tm_option(TM_OPTION_TIERS)->str;
  tm_topology_discover(&start_topo, "", tiers[0] ? tiers : NULL);
  start_je_conf_build();
  tm_ranges_init(&start_topo, tm_option_size(TM_OPTION_RESERVE, 0), start_huge_min(),
                 &tm_os_linux);
  tm_chunkmap_init();
  tm_budget_init(&start_topo, "");
  tm_policy_init(&start_topo);
  tm_reclaim_init(&start_topo, "");
  start_numab = tm_ranges.n > 0 ? tm_os_numa_balancing_policies(start_topo.tier[0].first_node) : 0;
  tm_fork_init();
  tm_background_init();   /* before the first extent hook asks for it */
  tmje_malloc_message = start_je_message;
  if (tm_ranges.n > 0 && tm_arenas_init((unsigned)start_topo.ntiers) != 0) {
    /* Without hooks on every arena, memory would be on no known tier. */
    tm_warn("falling back to unplaced memory");
    tm_ranges.n = 0;
  }
  /* The arena hooked for the next thread is start-up metadata too. */
  tm_arena_thread_bind();
  tm_policy_baseline();
  /* After the baseline: the placed extent it grows arena 0 by is heap. */
  if (tm_ranges.n > 0) tm_arena_drain_unplaced();
  /* Started only now, so its creation allocates with the hooks in place. */
  tm_background_start();
  if (tm_option(TM_OPTION_VERBOSE)->num) start_verbose();
}

int tm_start(void)
{
  int s = atomic_load_explicit(&start_state, memory_order_acquire);
  if (s == START_DONE) return 0;
  if (s == START_NONE &&
      atomic_compare_exchange_strong_explicit(&start_state, &s, START_RUNNING,
                                              memory_order_acq_rel, memory_order_acquire)) {
    start_here = true;
    start_run();
    start_here = false;
    atomic_store_explicit(&start_state, START_DONE, memory_order_release);
    return 0;
  }
  if (start_here) return EBUSY;
  while (atomic_load_explicit(&start_state, memory_order_acquire) != START_DONE) sched_yield();
  return 0;
}

bool tm_started(void)
{
  return atomic_load_explicit(&start_state, memory_order_acquire) == START_DONE;
}

const tm_topology_t *tm_topology(void)
{
  return &start_topo;
}

unsigned tm_startup_numa_balancing_policies(void)
{
  return start_numab;
}
