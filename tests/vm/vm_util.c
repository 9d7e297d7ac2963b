/* Helpers of the VM tests; see vmtest.h. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <numaif.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "vmtest.h"

extern char **environ;

#define BIT(n) (1ull << (n))

static const vm_topology_t vm_topologies[] = {
  /* node0: CPUs + DRAM; node1: CPU-less, CXL-like HMAT values. */
  { "2tier", 2, "4:0 54:1", 2, { BIT(0), BIT(1) } },
  /* node0: CPUs + DRAM; node1: CPU-less HBM-like (faster than DRAM), node2:
   * CPU-less CXL-like. The kernel puts HBM above DRAM. */
  { "3tier", 3, "0:1 4:0 54:2", 3, { BIT(1), BIT(0), BIT(2) } },
  /* No HMAT: one kernel tier; tiermalloc's fallback puts the CPU node on top. */
  { "flat", 2, "4:0-1", 2, { BIT(0), BIT(1) } },
  /* 2tier's machine on Debian 12's own kernel (tests/vm/run --kernel
   * bookworm): 6.1 forms its memory tiers without HMAT, so one tier, as flat. */
  { "2tier-6.1", 2, "4:0-1", 2, { BIT(0), BIT(1) } },
};

int vm_read_file(const char *path, char *buf, size_t size)
{
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t n = 0;
  while (n + 1 < size) {
    ssize_t r = read(fd, buf + n, size - 1 - n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    n += (size_t)r;
  }
  close(fd);
  buf[n] = 0;
  while (n > 0 && buf[n - 1] == '\n') buf[--n] = 0;
  return 0;
}

const vm_topology_t *vm_topology(void)
{
  const char *name = getenv("VMTEST_TOPOLOGY");
  cr_assert(name && *name, "VMTEST_TOPOLOGY is not set: these tests run inside the tiered VM; "
            "use make test-vm, or tests/vm/run --topology T --env VMTEST_TOPOLOGY=T -- build/tests/vmtest");
  const vm_topology_t *topo = NULL;
  for (size_t i = 0; i < sizeof vm_topologies / sizeof *vm_topologies; i++)
    if (strcmp(vm_topologies[i].name, name) == 0) topo = &vm_topologies[i];
  cr_assert_not_null(topo, "VMTEST_TOPOLOGY=%s is not 2tier, 3tier, flat or 2tier-6.1", name);
  char online[64], want[16];
  cr_assert_eq(vm_read_file("/sys/devices/system/node/online", online, sizeof online), 0);
  snprintf(want, sizeof want, "0-%d", topo->nnodes - 1);
  cr_assert_str_eq(online, want, "nodes online: %s, but topology %s has %s: not in the right guest?",
                   online, name, want);
  return topo;
}

int vm_tier_node(const vm_topology_t *topo, int t)
{
  return __builtin_ctzll(topo->tier_nodes[t]);
}

void vm_touch(void *p, size_t len)
{
  char *c = p;
  uint64_t x = (uintptr_t)p * 0x9e3779b97f4a7c15ull;
  for (size_t off = 0; off < len; off += 512) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    size_t n = len - off < 8 ? len - off : 8;
    memcpy(c + off, &x, n);
  }
  if (len >= 8) memcpy(c + len - 8, &x, 8);   /* the last, maybe partial, page */
}

size_t vm_span_pages(const void *p, size_t len)
{
  uintptr_t psz = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t a = (uintptr_t)p & ~(psz - 1), end = ((uintptr_t)p + len + psz - 1) & ~(psz - 1);
  return (end - a) / psz;
}

/* A page the kernel is moving (reclaim's migration, khugepaged's collapse,
 * a split) has a migration entry for a moment, and move_pages says -ENOENT
 * for it, as for a page swapped out: one batch of 512 such pages (a huge
 * page in flight) made a 3tier run count "touched pages not present". A page
 * not present is asked again, every 20 ms for up to VM_ABSENT_RETRY_MS: one
 * swapped out stays so (asking does not fault it in), one in flight lands. */
#define VM_ABSENT_RETRY_MS 400

static size_t vm_pages_batch(void **pages, unsigned long n, size_t counts[VM_MAX_NODES])
{
  int status[n];
  size_t bad = 0;
  for (int waited = 0;; waited += 20) {
    if (move_pages(0, n, pages, NULL, status, 0) < 0) return (size_t)-1;
    unsigned long left = 0;
    for (unsigned long i = 0; i < n; i++) {
      if (status[i] >= 0 && status[i] < VM_MAX_NODES) counts[status[i]]++;
      else pages[left++] = pages[i];
    }
    n = left;
    bad = left;
    if (n == 0 || waited >= VM_ABSENT_RETRY_MS) return bad;
    struct timespec ts = { 0, 20 * 1000 * 1000 };
    nanosleep(&ts, NULL);
  }
}

size_t vm_pages_by_node(const void *p, size_t len, size_t counts[VM_MAX_NODES])
{
  long psz = sysconf(_SC_PAGESIZE);
  uintptr_t a = (uintptr_t)p & ~(uintptr_t)(psz - 1);
  uintptr_t end = (uintptr_t)p + len;
  size_t bad = 0;
  enum { BATCH = 1024 };
  void *pages[BATCH];
  while (a < end) {
    unsigned long n = 0;
    for (; n < BATCH && a < end; n++, a += (uintptr_t)psz) pages[n] = (void *)a;
    size_t b = vm_pages_batch(pages, n, counts);
    if (b == (size_t)-1) return b;
    bad += b;
  }
  return bad;
}

/* The whole of a /proc file, NUL-terminated, malloc'd; NULL on error.
 * Read in full before parsing: a file read with stdio would allocate while
 * it is read, but the reading itself must not add mappings. */
static char *vm_read_all(const char *path)
{
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  size_t cap = 1 << 20, n = 0;
  char *buf = malloc(cap);
  if (!buf) { close(fd); return NULL; }
  for (;;) {
    if (n + 4096 > cap) {
      char *b = realloc(buf, cap * 2);
      if (!b) { free(buf); close(fd); return NULL; }
      buf = b; cap *= 2;
    }
    ssize_t r = read(fd, buf + n, cap - n - 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    n += (size_t)r;
  }
  close(fd);
  buf[n] = 0;
  return buf;
}

int vm_numa_maps_bytes(pid_t pid, int tiered_only, uint64_t bytes[VM_MAX_NODES])
{
  char path[64];
  if (pid) snprintf(path, sizeof path, "/proc/%d/numa_maps", (int)pid);
  else snprintf(path, sizeof path, "/proc/self/numa_maps");
  char *buf = vm_read_all(path);
  if (!buf) return -1;
  for (char *line = buf, *next; line && *line; line = next) {
    next = strchr(line, '\n');
    if (next) *next++ = 0;
    char *end;
    unsigned long long start = strtoull(line, &end, 16);
    if (end == line) continue;
    if (tiered_only && tier_of((void *)(uintptr_t)start) == TIER_NONE) continue;
    uint64_t pages[VM_MAX_NODES] = { 0 };
    uint64_t kb = 4;
    for (char *tok = strtok(end, " "); tok; tok = strtok(NULL, " ")) {
      int node;
      unsigned long long v;
      if (sscanf(tok, "N%d=%llu", &node, &v) == 2 && node >= 0 && node < VM_MAX_NODES)
        pages[node] += v;
      else if (sscanf(tok, "kernelpagesize_kB=%llu", &v) == 1)
        kb = v;
    }
    for (int i = 0; i < VM_MAX_NODES; i++) bytes[i] += pages[i] * kb * 1024;
  }
  free(buf);
  return 0;
}

/* environ with env's "NAME=value" strings replacing or added (calloc'd array). */
static char **vm_envp(char *const env[])
{
  size_t nenv = 0, nadd = 0;
  while (environ[nenv]) nenv++;
  while (env && env[nadd]) nadd++;
  char **envp = calloc(nenv + nadd + 1, sizeof *envp);
  cr_assert_not_null(envp);
  size_t k = 0;
  for (size_t i = 0; i < nenv; i++) {
    int replaced = 0;
    for (size_t j = 0; j < nadd; j++) {
      size_t len = strcspn(env[j], "=");
      if (strncmp(environ[i], env[j], len) == 0 && environ[i][len] == '=') replaced = 1;
    }
    if (!replaced) envp[k++] = environ[i];
  }
  for (size_t j = 0; j < nadd; j++) envp[k++] = env[j];
  envp[k] = NULL;
  return envp;
}

static int vm_wait_status(pid_t pid)
{
  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int vm_run(char *const argv[], char *const env[], char *out, size_t size)
{
  char **envp = vm_envp(env);
  int fds[2];
  cr_assert_eq(pipe2(fds, O_CLOEXEC), 0);
  /* fork + execve (tests/spawn.h shadows <spawn.h> here). */
  pid_t pid = fork();
  cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    execve(argv[0], argv, envp);
    dprintf(STDERR_FILENO, "vmtest: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  close(fds[1]);
  free(envp);
  size_t n = 0;
  char sink[4096];
  for (;;) {
    ssize_t r = n + 1 < size ? read(fds[0], out + n, size - 1 - n) : read(fds[0], sink, sizeof sink);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    if (n + 1 < size) n += (size_t)r;
  }
  out[n] = 0;
  close(fds[0]);
  return vm_wait_status(pid);
}

void vm_spawn(vm_proc_t *p, char *const argv[], char *const env[], const char *cgroup, int flags)
{
  memset(p, 0, sizeof *p);
  p->in = p->out = -1;
  p->size = 64 * 1024;
  p->buf = malloc(p->size);
  cr_assert_not_null(p->buf);
  p->buf[0] = 0;
  char procs[PATH_MAX] = "";
  if (cgroup) snprintf(procs, sizeof procs, "%s/cgroup.procs", cgroup);
  char **envp = vm_envp(env);
  int in[2], out[2];
  cr_assert_eq(pipe2(in, O_CLOEXEC), 0);
  cr_assert_eq(pipe2(out, O_CLOEXEC), 0);
  pid_t pid = fork();
  cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
  if (pid == 0) {
    dup2(in[0], STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    if (flags & VM_SPAWN_STDERR) dup2(out[1], STDERR_FILENO);
    if (cgroup) {
      int fd = open(procs, O_WRONLY | O_CLOEXEC);
      if (fd < 0 || write(fd, "0\n", 2) != 2) {
        dprintf(STDERR_FILENO, "vmtest: cannot move into %s: %s\n", cgroup, strerror(errno));
        _exit(126);
      }
      close(fd);
    }
    execve(argv[0], argv, envp);
    dprintf(STDERR_FILENO, "vmtest: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  free(envp);
  p->pid = pid;
  p->in = in[1];
  p->out = out[0];
}

/* Reads what is there (waiting up to timeout_ms for something). 1: read,
 * 0: end of output, -1: timeout. */
static int vm_proc_fill(vm_proc_t *p, int timeout_ms)
{
  if (p->out < 0) return 0;
  struct pollfd pfd = { .fd = p->out, .events = POLLIN };
  int r;
  while ((r = poll(&pfd, 1, timeout_ms)) < 0 && errno == EINTR) {}
  if (r == 0) return -1;
  if (p->len + 4096 > p->size) {
    char *b = realloc(p->buf, p->size * 2);
    cr_assert_not_null(b);
    p->buf = b;
    p->size *= 2;
  }
  ssize_t n;
  while ((n = read(p->out, p->buf + p->len, p->size - 1 - p->len)) < 0 && errno == EINTR) {}
  if (n <= 0) {
    close(p->out);
    p->out = -1;
    return 0;
  }
  p->len += (size_t)n;
  p->buf[p->len] = 0;
  return 1;
}

static long long vm_now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

const char *vm_proc_expect(vm_proc_t *p, const char *prefix, int timeout_ms)
{
  long long deadline = vm_now_ms() + timeout_ms;
  size_t plen = strlen(prefix);
  for (;;) {
    /* Whole lines only: the last one counts once its newline came. */
    for (char *line = p->buf; line && *line;) {
      char *nl = strchr(line, '\n');
      if (!nl) break;
      if (strncmp(line, prefix, plen) == 0) return line;
      line = nl + 1;
    }
    long long left = deadline - vm_now_ms();
    if (left <= 0) return NULL;
    if (vm_proc_fill(p, (int)left) <= 0 && p->out < 0) return NULL;
  }
}

int vm_proc_say(vm_proc_t *p, const char *line)
{
  char buf[256];
  int n = snprintf(buf, sizeof buf, "%s\n", line);
  if (p->in < 0 || n <= 0 || (size_t)n >= sizeof buf) return EINVAL;
  return write(p->in, buf, (size_t)n) == n ? 0 : errno;
}

const char *vm_proc_ask(vm_proc_t *p, const char *line, const char *prefix, int timeout_ms)
{
  for (char *q; (q = (char *)vm_proc_expect(p, prefix, 0)) != NULL;) q[0] = '#';
  cr_assert_eq(vm_proc_say(p, line), 0);
  const char *l = vm_proc_expect(p, prefix, timeout_ms);
  cr_assert_not_null(l, "%s", p->buf);
  return l;
}

const char *vm_proc_end(vm_proc_t *p, const char *prefix, int timeout_ms)
{
  if (p->in >= 0) close(p->in);
  p->in = -1;
  const char *l = vm_proc_expect(p, prefix, timeout_ms);
  cr_assert_not_null(l, "%s", p->buf);
  return l;
}

int vm_proc_wait(vm_proc_t *p)
{
  if (p->in >= 0) close(p->in);
  p->in = -1;
  while (vm_proc_fill(p, -1) > 0) {}
  int st = p->pid > 0 ? vm_wait_status(p->pid) : -1;
  p->pid = 0;
  return st;
}

void vm_proc_kill(vm_proc_t *p)
{
  if (p->pid > 0) {
    kill(p->pid, SIGKILL);
    vm_wait_status(p->pid);
    p->pid = 0;
  }
  if (p->in >= 0) close(p->in);
  if (p->out >= 0) close(p->out);
  p->in = p->out = -1;
  free(p->buf);
  p->buf = NULL;
}

int vm_run_in(char *const argv[], char *const env[], const char *cgroup, char *out, size_t size)
{
  vm_proc_t p;
  vm_spawn(&p, argv, env, cgroup, VM_SPAWN_STDERR);
  int st = vm_proc_wait(&p);
  snprintf(out, size, "%s", p.buf);
  vm_proc_kill(&p);
  return st;
}

void vm_cgroup_make(char *path, size_t size, const char *rel)
{
  int n = snprintf(path, size, "/sys/fs/cgroup/%s", rel);
  cr_assert(n > 0 && (size_t)n < size, "cgroup path too long: %s", rel);
  cr_assert_eq(mkdir(path, 0755), 0, "mkdir %s: %s", path, strerror(errno));
}

void vm_write_file(const char *path, const char *value)
{
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  cr_assert_geq(fd, 0, "open %s: %s", path, strerror(errno));
  ssize_t n = write(fd, value, strlen(value));
  int err = errno;
  close(fd);
  cr_assert_eq(n, (ssize_t)strlen(value), "write '%s' to %s: %s", value, path, strerror(err));
}

void vm_cgroup_set(const char *cg, const char *file, const char *value)
{
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/%s", cg, file);
  vm_write_file(path, value);
}

int vm_cgroup_remove(const char *cg)
{
  for (int i = 0; i < 200; i++) {
    if (rmdir(cg) == 0) return 0;
    if (errno != EBUSY) return errno;
    usleep(10000);
  }
  return EBUSY;
}

int vm_cgroup_numa_anon(const char *cg, uint64_t bytes[VM_MAX_NODES])
{
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/memory.numa_stat", cg);
  char *buf = vm_read_all(path);
  if (!buf) return -1;
  int found = -1;
  for (char *line = buf, *next; line && *line; line = next) {
    next = strchr(line, '\n');
    if (next) *next++ = 0;
    if (strncmp(line, "anon ", 5) != 0) continue;
    found = 0;
    for (char *tok = strtok(line + 5, " "); tok; tok = strtok(NULL, " ")) {
      int node;
      unsigned long long v;
      if (sscanf(tok, "N%d=%llu", &node, &v) == 2 && node >= 0 && node < VM_MAX_NODES)
        bytes[node] += v;
    }
  }
  free(buf);
  return found;
}

uint64_t vm_node_memtotal(int n)
{
  char path[96], buf[4096];
  snprintf(path, sizeof path, "/sys/devices/system/node/node%d/meminfo", n);
  if (vm_read_file(path, buf, sizeof buf) != 0) return 0;
  const char *p = strstr(buf, "MemTotal:");
  return p ? strtoull(p + strlen("MemTotal:"), NULL, 10) * 1024 : 0;
}

vm_caps_t vm_caps(const vm_topology_t *topo)
{
  vm_caps_t c = { .ntiers = topo->ntiers };
  for (int t = 0; t < topo->ntiers; t++) {
    for (int n = 0; n < 64; n++)
      if (topo->tier_nodes[t] >> n & 1) c.cap[t] += vm_node_memtotal(n);
    cr_assert_gt(c.cap[t], 0, "no MemTotal for tier %d's nodes", t);
    c.total += c.cap[t];
  }
  return c;
}

uint64_t vm_scaled(const vm_caps_t *c, uint64_t limit, int t)
{
  return (uint64_t)((unsigned __int128)limit * c->cap[t] / c->total);
}

uint64_t vm_limit_for_share(const vm_caps_t *c, uint64_t share)
{
  uint64_t l = (uint64_t)((unsigned __int128)share * c->total / c->cap[0]);
  return (l + VM_MIB - 1) / VM_MIB * VM_MIB;
}

const char *vm_self(void)
{
  static char self[PATH_MAX];
  if (!self[0]) {
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    cr_assert_gt(n, 0);
    self[n] = 0;
  }
  return self;
}

const char *vm_libtiermalloc(void)
{
  static char lib[PATH_MAX];
  if (!lib[0]) {
    char dir[PATH_MAX - 32];
    size_t n = strlen(vm_self());
    cr_assert_lt(n, sizeof dir);
    memcpy(dir, vm_self(), n + 1);
    for (int up = 0; up < 2; up++) {   /* build/tests/vmtest -> build */
      char *slash = strrchr(dir, '/');
      cr_assert_not_null(slash);
      *slash = 0;
    }
    snprintf(lib, sizeof lib, "%s/libtiermalloc.so", dir);
    cr_assert_eq(access(lib, R_OK), 0, "%s: %s", lib, strerror(errno));
  }
  return lib;
}

long long vm_json_num(const char *from, const char *key)
{
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = from ? strstr(from, pat) : NULL;
  if (!p) return -1;
  return strtoll(p + strlen(pat), NULL, 10);
}

int vm_tiered_anon_huge_bytes(uint64_t *huge)
{
  char *buf = vm_read_all("/proc/self/smaps");
  if (!buf) return -1;
  *huge = 0;
  int tiered = 0;
  for (char *line = buf, *next; line && *line; line = next) {
    next = strchr(line, '\n');
    if (next) *next++ = 0;
    unsigned long long start, end, kb;
    if (sscanf(line, "%llx-%llx ", &start, &end) == 2)
      tiered = tier_of((void *)(uintptr_t)start) != TIER_NONE;
    else if (tiered && sscanf(line, "AnonHugePages: %llu kB", &kb) == 1)
      *huge += kb * 1024;
  }
  free(buf);
  return 0;
}

int vm_flock(const char *path, int op)
{
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  while (flock(fd, op) != 0 && errno == EINTR) {}
  return fd;
}

void vm_quiet_shared(void)
{
  vm_flock(VM_QUIET_LOCK, LOCK_SH);
}
