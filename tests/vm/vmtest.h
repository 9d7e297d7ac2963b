/*
 * Helpers of the tests that run inside the tiered VM (tests/vm/run).
 *
 * The tests are built into one binary, build/tests/vmtest, linked to
 * libtiermalloc.so. make test-vm boots each topology and runs it there with
 * VMTEST_TOPOLOGY=2tier|3tier|flat|wide, which selects what the tests expect.
 * Every placement claim is checked against the kernel: move_pages(2) with
 * nodes=NULL and /proc/self/numa_maps.
 */
#ifndef VMTEST_H
#define VMTEST_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tiermalloc.h"

#define VM_MAX_NODES 128   /* the wide topology has 66 */
#define VM_MIB (1024ull * 1024)

/* What a topology looks like, as tests/vm/run builds it. */
typedef struct vm_topology_s {
  const char *name;                 /* "2tier", "3tier", "flat" */
  int nnodes;
  const char *kernel_tiers;         /* "N:nodelist ..." in N order, e.g. "4:0 54:1" */
  int ntiers;                       /* what tier_count() must say */
  uint64_t tier_nodes[TIER_MAX_TIERS];  /* node bitmask of each tiermalloc tier */
} vm_topology_t;

/* The topology named by VMTEST_TOPOLOGY; fails the test when it is unset,
 * unknown, or when this is not a guest with that many nodes. */
const vm_topology_t *vm_topology(void);

/* The only node of tier t (the topologies have one node per tier). */
int vm_tier_node(const vm_topology_t *topo, int t);

/* Writes a varied word into every page of [p, p+len) (zram compresses pages
 * of one byte value to nothing, and it makes the pages resident). */
void vm_touch(void *p, size_t len);

/* Pages that [p, p+len) spans (jemalloc need not page-align large objects). */
size_t vm_span_pages(const void *p, size_t len);

/* move_pages(nodes=NULL) over [p, p+len): counts[n] += pages on node n;
 * returns the number of pages that were not present or failed, (size_t)-1
 * when move_pages itself fails. No Criterion calls (child modes use it). */
size_t vm_pages_by_node(const void *p, size_t len, size_t counts[VM_MAX_NODES]);

/* Bytes per node of /proc/<pid>/numa_maps (pid 0: self). With tiered_only,
 * only the mappings that tiermalloc owns (tier_of(start) != TIER_NONE)
 * count; this only means anything for the calling process. Returns 0 or -1. */
int vm_numa_maps_bytes(pid_t pid, int tiered_only, uint64_t bytes[VM_MAX_NODES]);

/* Bytes of transparent huge pages (smaps AnonHugePages) in the mappings
 * tiermalloc owns, in the calling process. Returns 0 or -1. */
int vm_tiered_anon_huge_bytes(uint64_t *huge);

/* Runs argv with the current environment plus `env` (NULL-terminated
 * "NAME=value" strings; they replace variables of the same name), stdout
 * captured into out (NUL-terminated, truncated to size). Returns the exit
 * status, or 128+signal. */
int vm_run(char *const argv[], char *const env[], char *out, size_t size);

/* A child process with pipes to its stdin and from its stdout (and, with
 * VM_SPAWN_STDERR, its stderr too: tiermalloc's warnings and
 * TIERMALLOC_VERBOSE lines then come into the same text), for a test that
 * talks to a child while it runs. */
typedef struct vm_proc_s {
  pid_t pid;        /* 0 once waited for */
  int in, out;      /* write end of its stdin, read end of its output; -1 when closed */
  char *buf;        /* all its output so far, NUL-terminated (malloc'd) */
  size_t len, size;
} vm_proc_t;
#define VM_SPAWN_STDERR 1

/* Starts argv with the environment as vm_run builds it. With cgroup (a
 * directory under /sys/fs/cgroup), the child moves itself there ("0" into
 * its cgroup.procs) before exec, so tiermalloc reads that cgroup from its
 * first malloc; it exits 126 when it cannot. Fails the test on error. */
void vm_spawn(vm_proc_t *p, char *const argv[], char *const env[], const char *cgroup, int flags);

/* Reads the child's output until a line starting with `prefix` has arrived
 * whole; returns that line (in p->buf, up to its newline), or NULL at end of
 * output or after timeout_ms. */
const char *vm_proc_expect(vm_proc_t *p, const char *prefix, int timeout_ms);

/* Writes a line (newline added) to the child's stdin. Returns 0 or an errno. */
int vm_proc_say(vm_proc_t *p, const char *line);

/* Says `line` and returns the answer, the next line starting with `prefix`
 * after it: answers already in the output are marked read first ('#' over
 * their first character). Fails the test when none comes in timeout_ms. */
const char *vm_proc_ask(vm_proc_t *p, const char *line, const char *prefix, int timeout_ms);

/* Closes its stdin (the child's cue to finish) and returns the line starting
 * with `prefix` that it then prints; fails the test when none comes in
 * timeout_ms. The child is still to be waited for (vm_proc_wait). */
const char *vm_proc_end(vm_proc_t *p, const char *prefix, int timeout_ms);

/* Closes its stdin, reads the rest of its output, waits. Returns the exit
 * status, or 128+signal. */
int vm_proc_wait(vm_proc_t *p);

/* For a test's fini: SIGKILL the child if it still runs, wait, free. */
void vm_proc_kill(vm_proc_t *p);

/* Runs argv (vm_run's environment) in `cgroup` (NULL: this process's),
 * stdout and stderr captured into out. Returns the exit status. */
int vm_run_in(char *const argv[], char *const env[], const char *cgroup, char *out, size_t size);

/* ---- cgroup v2 (/sys/fs/cgroup, memory enabled for children) ---- */

/* mkdir /sys/fs/cgroup/<rel>; its path into path[size]. Fails the test on error. */
void vm_cgroup_make(char *path, size_t size, const char *rel);

/* Writes value into <cg>/<file>. Fails the test on error. */
void vm_cgroup_set(const char *cg, const char *file, const char *value);

/* rmdir of the cgroup, retried for up to 2 s while the kernel still counts
 * an exited process in it (EBUSY). Returns 0 or an errno (ENOENT: it was
 * not there). No Criterion calls. */
int vm_cgroup_remove(const char *cg);

/* The "anon N0=... N1=..." line of <cg>/memory.numa_stat: bytes per node
 * into bytes[] (added). Returns 0 or -1. No Criterion calls. */
int vm_cgroup_numa_anon(const char *cg, uint64_t bytes[VM_MAX_NODES]);

/* MemTotal of node n (/sys/devices/system/node/nodeN/meminfo), bytes; 0
 * when unreadable. */
uint64_t vm_node_memtotal(int n);

/* How far under its placement limit a tier filled in order may stay, in
 * committed bytes (`used`): less than a chunk where placement stopped (a
 * chunk goes on a tier only while a whole one fits), less than a chunk left
 * uncommitted in the last chunk placed there, and a whole chunk that reclaim
 * took back because huge pages over such uncommitted parts put the tier's
 * pages over its max. Measured in the flat VM, 200 MiB in 1 MiB blocks under
 * a 102.5 MiB max: 2.1-4.5 MiB. */
#define VM_FILL_SLACK (6 * VM_MIB)

/* Each tier's capacity (MemTotal of its nodes) and their sum, as tiermalloc
 * computes them to scale a cgroup limit. Asserts every tier has some. */
typedef struct vm_caps_s {
  int ntiers;
  uint64_t cap[TIER_MAX_TIERS], total;
} vm_caps_t;
vm_caps_t vm_caps(const vm_topology_t *topo);

/* limit x capacity(t) / capacity(all tiers): tier t's scaled share. */
uint64_t vm_scaled(const vm_caps_t *c, uint64_t limit, int t);

/* The cgroup limit (whole MiB, rounded up) whose tier-0 share is `share`. */
uint64_t vm_limit_for_share(const vm_caps_t *c, uint64_t share);

/* This test binary itself (for child modes, see vm_child.c) and the library
 * next to it ($ORIGIN/../libtiermalloc.so). */
const char *vm_self(void);
const char *vm_libtiermalloc(void);

/* Writes value to path (a sysfs or cgroup file) in one write; fails the
 * test when it cannot. */
void vm_write_file(const char *path, const char *value);

/* Reads a small file into buf (NUL-terminated, trailing newline removed).
 * Returns 0 or -1. */
int vm_read_file(const char *path, char *buf, size_t size);

/* Value of "key":<number> after `from` in a JSON text; -1 when absent. */
long long vm_json_num(const char *from, const char *key);

/* The reclaim tests hold this lock (flock, exclusive) one at a time; some
 * turn swap off for a while, so a test that needs swap on takes it too. The
 * budget tests' heap children hold it shared: they run beside each other,
 * not beside a timed test. */
#define VM_RECLAIM_LOCK "/tmp/vmtest-reclaim.lock"

/* The burst tests (test_reclaim.c) time reclaim's reaction in hundreds of
 * ms. Under TCG the guest runs on one host thread, and a program beside
 * them slowed it fourfold (2.2 s against 0.6, flat, 12-07). They, and the
 * hotness tests (a hot set read in a window of the accessed bits), hold this
 * lock alone; the tests that run heavy programs without VM_RECLAIM_LOCK
 * (live, preload, resident, thp) hold it shared. */
#define VM_QUIET_LOCK "/tmp/vmtest-quiet.lock"

/* flock(op: LOCK_SH or LOCK_EX) on the file at path, created if need be,
 * waiting for it: the fd, which holds it till closed or the test's process
 * ends (each Criterion test is a process of its own); -1 if it cannot be
 * opened. */
int vm_flock(const char *path, int op);

/* VM_QUIET_LOCK shared, for the test's whole process: a suite's .init. */
void vm_quiet_shared(void);

/* What tier 0 may hold under TIERMALLOC_TOPTIER_MAX=16M: the budget leaves
 * out the start-up metadata (allocator/policy.h), one 2 MiB base block for
 * the first thread's arena and one for the pinned tier-0 arena; arenas that
 * later threads bring in are charged to the budget. */
#define VM_BUDGET_16M_TIER0 ((16ull + 2 * 2) * VM_MIB)

#endif
