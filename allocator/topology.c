/*
 * topology: NUMA nodes -> tiers. The rules are in topology.h; reading the
 * kernel's files is kfile's, node sets are nodemask's.
 *
 * Everything here runs while malloc initialises, so nothing allocates.
 */
#include "topology.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "kfile.h"
#include "log.h"

/* Longest line we need whole: Mems_allowed with 32 words is about 300 bytes. */
#define TOPO_LINE_MAX 512
/* memory_tierN directories considered; only the lowest N are kept when there
 * are more, and the nodes of the rest end up in the last tier anyway. */
#define TOPO_KTIERS_MAX 64

static const char topo_node_dir[] = "/sys/devices/system/node";
static const char topo_tier_dir[] = "/sys/devices/virtual/memory_tiering";

/* ---- small pure helpers ------------------------------------------------- */

/* Mems_allowed of <root>/proc/self/status into *m. 0, ENOENT when there is no
 * file or no such line (no restriction), or another errno. */
static int topo_read_mems_allowed(const char *path, tm_nodemask_t *m)
{
  static const char key[] = "Mems_allowed:";
  tm_kfile_lines_t r;
  int oerr = tm_kfile_lines_open(&r, path);
  if (oerr) return oerr;
  char line[TOPO_LINE_MAX];
  int cut, n, err = ENOENT;
  while ((n = tm_kfile_next_line(&r, line, sizeof line, &cut)) >= 0) {
    if (strncmp(line, key, sizeof key - 1) != 0) continue;
    const char *v = line + sizeof key - 1;
    while (*v == ' ' || *v == '\t') v++;
    err = cut ? EINVAL : tm_nodemask_parse_hex(v, m);
    break;
  }
  close(r.fd);
  return err;
}

/* ---- directories ---------------------------------------------------------- */

static void topo_collect_node(void *arg, unsigned long id)
{
  if (id < TIER_MAX_NODES) tm_nodemask_set(arg, (int)id);
}

/* Kernel tier ids, ascending, the lowest TOPO_KTIERS_MAX of them. */
typedef struct topo_ktiers_s {
  int n;
  unsigned long id[TOPO_KTIERS_MAX];
} topo_ktiers_t;

static void topo_collect_ktier(void *arg, unsigned long id)
{
  topo_ktiers_t *k = arg;
  if (k->n == TOPO_KTIERS_MAX) {
    if (id >= k->id[k->n - 1]) return;
    k->n--;
  }
  int i = k->n++;
  for (; i > 0 && k->id[i - 1] > id; i--) k->id[i] = k->id[i - 1];
  k->id[i] = id;
}

/* ---- building the result -------------------------------------------------- */

static void topo_reset(tm_topology_t *t)
{
  memset(t, 0, sizeof *t);
  memset(t->node_tier, -1, sizeof t->node_tier);
}

/* Node n's MemTotal, 0 when unknown (with a warning: the node has memory, so
 * its meminfo should be there). */
static uint64_t topo_node_capacity(const char *root, int n)
{
  char path[TM_KFILE_PATH_MAX];
  uint64_t bytes = 0;
  if (tm_kfile_path(path, root, topo_node_dir, "node", n, "meminfo")) return 0;
  int err = tm_kfile_read_meminfo(path, "MemTotal", &bytes);
  if (err) {
    tm_warn("cannot read MemTotal from %s: %s; tier capacity will be short", path,
            err == EINVAL ? "no MemTotal line" : tm_kfile_errstr(err));
    return 0;
  }
  return bytes;
}

/* Adds the nodes of *m (already free of placed nodes) to tier i, opening it
 * when i == t->ntiers. */
static void topo_add(tm_topology_t *t, const char *root, int i, const tm_nodemask_t *m,
                     int kernel_tier)
{
  tm_tier_t *tier = &t->tier[i];
  if (i == t->ntiers) {
    t->ntiers++;
    tier->first_node = -1;
    tier->kernel_tier = kernel_tier;
  }
  for (int n = 0; n < TIER_MAX_NODES; n++) {
    if (!tm_nodemask_test(m, n)) continue;
    tm_nodemask_set(&tier->nodes, n);
    tier->nnodes++;
    if (tier->first_node < 0 || n < tier->first_node) tier->first_node = n;
    tier->capacity += topo_node_capacity(root, n);
    t->node_tier[n] = (int8_t)i;
  }
}

/* Opens a new tier for *m, or folds it into the last one when all
 * TIER_MAX_TIERS are taken. Returns 1 when it folded. */
static int topo_push(tm_topology_t *t, const char *root, const tm_nodemask_t *m, int kernel_tier)
{
  int fold = t->ntiers == TIER_MAX_TIERS;
  topo_add(t, root, fold ? t->ntiers - 1 : t->ntiers, m, kernel_tier);
  return fold;
}

/* The spec as it may appear in a one-line warning: control characters become
 * '?', and a long spec is cut with "...". */
static const char *topo_quote(const char *spec, char *buf, int size)
{
  int i = 0;
  for (; spec[i] && i < size - 1; i++)
    buf[i] = (unsigned char)spec[i] < 0x20 || spec[i] == 0x7f ? '?' : spec[i];
  buf[i] = '\0';
  if (spec[i] && size > 4) memcpy(buf + size - 4, "...", 4);
  return buf;
}

/* TIERMALLOC_TIERS. Returns 0 when it built the topology, or -1 to go on with
 * discovery (after saying why). usable: nodes with memory we may use. */
static int topo_from_override(tm_topology_t *t, const char *root, const char *spec,
                              const tm_nodemask_t *usable)
{
  /* Validate the whole spec before building anything, so a bad spec leaves
   * no half-built topology behind. */
  tm_nodemask_t seen, dropped;
  char q[96];
  tm_nodemask_clear(&seen);
  tm_nodemask_clear(&dropped);
  int nonempty = 0;
  for (const char *s = spec;;) {
    const char *e = strchr(s, ';');
    if (!e) e = s + strlen(s);
    tm_nodemask_t m, dup;
    if (e == s || tm_nodelist_parse_span(s, e, &m)) {
      tm_warn("TIERMALLOC_TIERS='%s' is not a ';'-separated list of nodelists (e.g. 0,1;2;3); "
              "ignored", topo_quote(spec, q, sizeof q));
      return -1;
    }
    dup = m;
    tm_nodemask_and(&dup, &seen);
    if (!tm_nodemask_empty(&dup)) {
      tm_warn("TIERMALLOC_TIERS='%s' names a node in two tiers; ignored",
              topo_quote(spec, q, sizeof q));
      return -1;
    }
    tm_nodemask_or(&seen, &m);
    tm_nodemask_t bad = m;
    tm_nodemask_andnot(&bad, usable);
    tm_nodemask_or(&dropped, &bad);
    tm_nodemask_and(&m, usable);
    nonempty += !tm_nodemask_empty(&m);
    if (!*e) break;
    s = e + 1;
  }
  if (!tm_nodemask_empty(&dropped)) {
    char list[128];
    tm_nodelist_format(&dropped, list, sizeof list);
    tm_warn("TIERMALLOC_TIERS: node(s) %s have no memory or are not allowed (Mems_allowed); "
            "dropped", list);
  }
  if (!nonempty) {
    tm_warn("TIERMALLOC_TIERS='%s' leaves no usable node; ignored",
            topo_quote(spec, q, sizeof q));
    return -1;
  }
  if (nonempty > TIER_MAX_TIERS)
    tm_warn("TIERMALLOC_TIERS gives %d tiers; tiers past %d are folded into the last",
            nonempty, TIER_MAX_TIERS);

  topo_reset(t);
  t->source = TM_TOPO_OVERRIDE;
  for (const char *s = spec;;) {
    const char *e = strchr(s, ';');
    if (!e) e = s + strlen(s);
    tm_nodemask_t m;
    tm_nodelist_parse_span(s, e, &m);
    tm_nodemask_and(&m, usable);
    if (!tm_nodemask_empty(&m)) topo_push(t, root, &m, -1);
    if (!*e) break;
    s = e + 1;
  }
  return 0;
}

/* The kernel's memory tiers. Returns 0 when they give more than one tier among
 * the usable nodes, else -1 (nothing built; fall back). */
static int topo_from_kernel(tm_topology_t *t, const char *root, const tm_nodemask_t *usable)
{
  char path[TM_KFILE_PATH_MAX];
  topo_ktiers_t k;
  k.n = 0;
  if (tm_kfile_path(path, root, topo_tier_dir, NULL, -1, NULL)) return -1;
  int err = tm_kfile_scan_ids(path, "memory_tier", topo_collect_ktier, &k);
  if (err && err != ENOENT) tm_warn("cannot list %s: %s", path, tm_kfile_errstr(err));
  if (k.n == 0) return -1;

  /* A first pass counts the kernel tiers that hold usable nodes: the rule is
   * "more than one tier among the allowed nodes", not in the whole machine. */
  int distinct = 0;
  tm_nodemask_t placed;
  tm_nodemask_clear(&placed);
  for (int i = 0; i < k.n; i++) {
    tm_nodemask_t m;
    if (tm_kfile_path(path, root, topo_tier_dir, "memory_tier", (long)k.id[i], "nodelist") ||
        tm_kfile_read_nodelist_warn(path, &m))
      continue;
    tm_nodemask_and(&m, usable);
    tm_nodemask_andnot(&m, &placed);
    if (tm_nodemask_empty(&m)) continue;
    tm_nodemask_or(&placed, &m);
    distinct++;
  }
  if (distinct < 2) return -1;

  topo_reset(t);
  t->source = TM_TOPO_KERNEL_TIERS;
  tm_nodemask_clear(&placed);
  int folded = 0;
  for (int i = 0; i < k.n; i++) {
    tm_nodemask_t m;
    if (tm_kfile_path(path, root, topo_tier_dir, "memory_tier", (long)k.id[i], "nodelist") ||
        tm_kfile_read_nodelist(path, &m))
      continue;
    tm_nodemask_and(&m, usable);
    tm_nodemask_andnot(&m, &placed);
    if (tm_nodemask_empty(&m)) continue;
    tm_nodemask_or(&placed, &m);
    folded += topo_push(t, root, &m, (int)k.id[i]);
  }
  if (folded)
    tm_warn("the kernel formed %d memory tiers; tiers past %d are folded into the last",
            distinct, TIER_MAX_TIERS);
  /* A usable node in no kernel tier is of unknown speed; the bottom tier is
   * the safe guess, as it keeps the node out of the top-tier budget. */
  tm_nodemask_t rest = *usable;
  tm_nodemask_andnot(&rest, &placed);
  if (!tm_nodemask_empty(&rest)) topo_add(t, root, t->ntiers - 1, &rest, -1);
  return 0;
}

/* Nodes with CPUs: has_cpu, or else each node's cpulist (a CPU-less node's is
 * "\n", so its first byte is enough; a longer one reads as -EFBIG). A node
 * with neither counts as having CPUs, so that knowing nothing gives one tier. */
static void topo_cpu_nodes(const char *root, const tm_nodemask_t *usable, tm_nodemask_t *cpu)
{
  char path[TM_KFILE_PATH_MAX];
  if (!tm_kfile_path(path, root, topo_node_dir, NULL, -1, "has_cpu") &&
      !tm_kfile_read_nodelist_warn(path, cpu))
    return;
  tm_nodemask_clear(cpu);
  for (int n = 0; n < TIER_MAX_NODES; n++) {
    if (!tm_nodemask_test(usable, n)) continue;
    char first[2];
    int len = -ENAMETOOLONG;
    if (!tm_kfile_path(path, root, topo_node_dir, "node", n, "cpulist"))
      len = tm_kfile_read(path, first, sizeof first);
    if (len < 0 || (len > 0 && first[0] != '\n')) tm_nodemask_set(cpu, n);
  }
}

static void topo_from_cpus(tm_topology_t *t, const char *root, const tm_nodemask_t *usable)
{
  tm_nodemask_t top, below;
  topo_cpu_nodes(root, usable, &top);
  tm_nodemask_and(&top, usable);
  below = *usable;
  tm_nodemask_andnot(&below, &top);
  topo_reset(t);
  t->source = TM_TOPO_CPU_FALLBACK;
  if (!tm_nodemask_empty(&top)) topo_push(t, root, &top, -1);
  if (!tm_nodemask_empty(&below)) topo_push(t, root, &below, -1);
}

/* One tier holding node 0; capacity from <root>/proc/meminfo when readable. */
static void topo_single(tm_topology_t *t, const char *root)
{
  char path[TM_KFILE_PATH_MAX];
  topo_reset(t);
  t->source = TM_TOPO_SINGLE;
  t->ntiers = 1;
  tm_nodemask_set(&t->tier[0].nodes, 0);
  t->tier[0].nnodes = 1;
  t->tier[0].first_node = 0;
  t->tier[0].kernel_tier = -1;
  t->node_tier[0] = 0;
  if (!tm_kfile_path(path, root, "/proc/meminfo", NULL, -1, NULL))
    tm_kfile_read_meminfo(path, "MemTotal", &t->tier[0].capacity);
}

int tm_topology_discover(tm_topology_t *t, const char *root, const char *override)
{
  char path[TM_KFILE_PATH_MAX];
  int err;
  if (!root) root = "";
  if (override && !*override) override = NULL;

  /* Without the node directory there is nothing to tier, and an override
   * cannot be checked against anything, so it is not used. */
  if ((err = tm_kfile_path(path, root, topo_node_dir, NULL, -1, NULL)) == 0) {
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) err = errno;
    else close(fd);
  }
  if (err) {
    char q[96];
    if (override)
      tm_warn("TIERMALLOC_TIERS='%s' ignored: no NUMA nodes in sysfs",
              topo_quote(override, q, sizeof q));
    topo_single(t, root);
    return err;
  }

  /* usable = nodes with memory (has_memory, else online, else every nodeN
   * directory) that Mems_allowed lets us use. */
  tm_nodemask_t usable, allowed;
  if (tm_kfile_path(path, root, topo_node_dir, NULL, -1, "has_memory") ||
      tm_kfile_read_nodelist_warn(path, &usable)) {
    if (tm_kfile_path(path, root, topo_node_dir, NULL, -1, "online") ||
        tm_kfile_read_nodelist_warn(path, &usable)) {
      tm_nodemask_clear(&usable);
      tm_kfile_path(path, root, topo_node_dir, NULL, -1, NULL);
      tm_kfile_scan_ids(path, "node", topo_collect_node, &usable);
    }
  }
  if (!tm_kfile_path(path, root, "/proc/self/status", NULL, -1, NULL)) {
    err = topo_read_mems_allowed(path, &allowed);
    if (!err)
      tm_nodemask_and(&usable, &allowed);
    else if (err != ENOENT)
      tm_warn("cannot use Mems_allowed in %s: %s; assuming every node is allowed", path,
              tm_kfile_errstr(err));
  }
  if (tm_nodemask_empty(&usable)) {
    tm_warn("no allowed NUMA node with memory found under %s%s; using node 0", root,
            topo_node_dir);
    topo_single(t, root);
    return ENODEV;
  }

  if (override && topo_from_override(t, root, override, &usable) == 0) return 0;
  if (topo_from_kernel(t, root, &usable) == 0) return 0;
  topo_from_cpus(t, root, &usable);
  return 0;
}

const char *tm_topology_source_name(tm_topology_source_t s)
{
  switch (s) {
  case TM_TOPO_OVERRIDE: return "TIERMALLOC_TIERS";
  case TM_TOPO_KERNEL_TIERS: return "kernel memory tiers";
  case TM_TOPO_CPU_FALLBACK: return "CPU nodes on top (one kernel tier)";
  case TM_TOPO_SINGLE: return "single node (no NUMA information)";
  }
  return "unknown";
}
