/*
 * Integration: real programs give the same result with and without
 * LD_PRELOAD=<abs>/build/libtiermalloc.so. Each program runs twice with
 * the same environment and input; the contract checked is:
 *   - the run without preload succeeds with the expected exit status and
 *     some output (so two identical crashes never pass);
 *   - with preload: the same exit status and byte-identical stdout;
 *   - stderr is empty in both runs (tiermalloc prints nothing unless asked).
 * No library: every test here is skipped, saying so. A program that is
 * not installed (python3, sqlite3, perl, named-compilezone) skips its test, saying so.
 * Helper programs come from build/tests/progs (built by make test-lib);
 * paths are relative to the repository root, where the tests run.
 */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <limits.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spawn.h"

#define PRELOAD_LIB "build/libtiermalloc.so"
#define PRELOAD_PROGS "build/tests/progs/"
#define PRELOAD_RUN_TIMEOUT 40.0   /* per run; the Criterion timeout is 90 s for two */

/* The absolute path of `rel` taken from B/tests/, when this binary is
 * B/tests/lib as make builds it (so the library and helpers used are those
 * of the same build, whatever B is); else of `fallback` under the working
 * directory (the repository root). NULL when neither exists. */
static const char *preload_find(const char *rel, const char *fallback, int mode, char *buf, size_t size)
{
  char tmp[PATH_MAX], abs[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", tmp, sizeof tmp - 1);
  if (n > 0) {
    tmp[n] = '\0';
    char *slash = strrchr(tmp, '/');
    if (slash && slash - tmp >= 6 && strncmp(slash - 6, "/tests", 6) == 0 &&
        (size_t)(slash - tmp) + 1 + strlen(rel) < sizeof tmp) {
      strcpy(slash + 1, rel);
      if (realpath(tmp, abs) && access(abs, mode) == 0) {
        snprintf(buf, size, "%s", abs);
        return buf;
      }
    }
  }
  if (realpath(fallback, abs) && access(abs, mode) == 0) {
    snprintf(buf, size, "%s", abs);
    return buf;
  }
  return NULL;
}

static const char *preload_lib(char *buf, size_t size)
{
  return preload_find("../libtiermalloc.so", PRELOAD_LIB, R_OK, buf, size);
}

/* "LD_PRELOAD=<lib>", or skips the calling test when there is no library. */
#define PRELOAD_REQUIRE_LIB(var)                                                            \
  char var[PATH_MAX + 16];                                                                  \
  do {                                                                                      \
    char lib_[PATH_MAX];                                                                    \
    if (preload_lib(lib_, sizeof lib_) == NULL)                                             \
      cr_skip_test("%s is not built (run make): nothing to preload", PRELOAD_LIB);          \
    snprintf(var, sizeof var, "LD_PRELOAD=%s", lib_);                                       \
  } while (0)

/* The absolute path of program `name`, or skips the test: it is not installed. */
#define PRELOAD_REQUIRE_TOOL(var, name)                                                     \
  char var[PATH_MAX];                                                                       \
  do {                                                                                      \
    if (spawn_which(name, var, sizeof var) == NULL)                                         \
      cr_skip_test("%s is not installed (make deps installs it)", name);                    \
  } while (0)

/* The path of helper program build/tests/progs/name; a missing one is a
 * failure, since make test-lib builds them all before this binary runs. */
static void preload_prog(const char *name, char *buf, size_t size)
{
  char rel[128], fallback[160];
  snprintf(rel, sizeof rel, "progs/%s", name);
  snprintf(fallback, sizeof fallback, PRELOAD_PROGS "%s", name);
  if (preload_find(rel, fallback, X_OK, buf, size) == NULL)
    cr_assert_fail("helper program %s is missing: run make test-lib (it builds tests/progs/%s.*)", fallback, name);
}

/* A short excerpt of s around offset at, with control bytes escaped. */
static const char *preload_excerpt(const char *s, size_t len, size_t at, char *buf, size_t size)
{
  size_t from = at > 60 ? at - 60 : 0, to = at + 60 < len ? at + 60 : len, k = 0;
  for (size_t i = from; i < to && k + 5 < size; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '\n') { buf[k++] = '\\'; buf[k++] = 'n'; }
    else if (c < 0x20 || c >= 0x7f) k += (size_t)snprintf(buf + k, size - k, "\\x%02x", c);
    else buf[k++] = (char)c;
  }
  buf[k] = '\0';
  return buf;
}

typedef struct {
  const char *what;           /* names the run in messages */
  char *const *argv;
  char *const *env;           /* extra NAME=VALUE for both runs, NULL-terminated */
  const char *input;          /* stdin, or NULL */
  int expect_exit;            /* the plain run's exit status */
} preload_case_t;

/* Runs c without and with the library (preload_env is "LD_PRELOAD=..."),
 * and asserts the contract in this file's header. */
static void preload_compare(const preload_case_t *c, const char *preload_env)
{
  char *with[32];
  size_t n = 0;
  for (; c->env && c->env[n]; n++) with[n] = c->env[n];
  cr_assert_lt(n, 30, "too many variables");
  with[n++] = (char *)preload_env;
  with[n] = NULL;

  spawn_result_t base = spawn_run(c->argv, c->env, c->input, PRELOAD_RUN_TIMEOUT);
  spawn_result_t pre = spawn_run(c->argv, with, c->input, PRELOAD_RUN_TIMEOUT);
  char s1[128], s2[128];
  spawn_status_str(&base, s1, sizeof s1);
  spawn_status_str(&pre, s2, sizeof s2);

  /* The plain run is the reference: it must have worked. */
  cr_assert(base.err == 0 && !base.timed_out && WIFEXITED(base.status) && WEXITSTATUS(base.status) == c->expect_exit,
            "%s without preload: %s, want exit %d; stderr: %.2000s", c->what, s1, c->expect_exit,
            base.errout ? base.errout : "");
  cr_assert_gt(base.out_len, 0, "%s without preload printed nothing", c->what);
  cr_expect_eq(base.err_len, 0, "%s without preload wrote to stderr (the test expects none): %.2000s", c->what,
               base.errout);

  cr_assert(pre.err == 0 && !pre.timed_out, "%s with preload: %s", c->what, s2);
  cr_expect_eq(pre.status, base.status, "%s: %s with preload, %s without; stderr with preload: %.2000s", c->what, s2,
               s1, pre.errout);
  cr_expect_eq(pre.err_len, 0, "%s with preload wrote %zu bytes to stderr: %.2000s", c->what, pre.err_len,
               pre.errout);

  if (pre.out_len != base.out_len || memcmp(pre.out, base.out, base.out_len) != 0) {
    size_t at = 0, min = pre.out_len < base.out_len ? pre.out_len : base.out_len;
    while (at < min && pre.out[at] == base.out[at]) at++;
    char e1[512], e2[512];
    cr_expect_fail("%s: stdout differs at byte %zu (%zu bytes without preload, %zu with)\n"
                   "  without: ...%s...\n  with:    ...%s...",
                   c->what, at, base.out_len, pre.out_len, preload_excerpt(base.out, base.out_len, at, e1, sizeof e1),
                   preload_excerpt(pre.out, pre.out_len, at, e2, sizeof e2));
  }
  spawn_free(&base);
  spawn_free(&pre);
}

/* preload_compare on helper program build/tests/progs/name, run with no
 * arguments and the extra environment env (NULL: none). */
static void preload_compare_prog(const char *name, const char *what, char *const *env)
{
  PRELOAD_REQUIRE_LIB(ld);
  char prog[PATH_MAX];
  preload_prog(name, prog, sizeof prog);
  char *argv[] = { prog, NULL };
  preload_case_t c = { what, argv, env, NULL, 0 };
  preload_compare(&c, ld);
}

/* ---- (a) C++: every operator new/delete, containers, exceptions -------- */

Test(preload, cxx_new_delete_and_containers, .timeout = 90)
{
  preload_compare_prog("cxx_new", "cxx_new", NULL);
}

/* ---- (b) CPython --------------------------------------------------------- */

/* Debian's python3 first: a PATH shim (pyenv) is a shell script around it. */
static const char *preload_python(char *buf, size_t size)
{
  if (access("/usr/bin/python3", X_OK) == 0) {
    snprintf(buf, size, "/usr/bin/python3");
    return buf;
  }
  return spawn_which("python3", buf, size);
}

static void preload_python_case(const char *pymalloc)
{
  PRELOAD_REQUIRE_LIB(ld);
  char py[PATH_MAX];
  if (preload_python(py, sizeof py) == NULL) cr_skip_test("python3 is not installed (make deps installs it)");
  char script[PATH_MAX];
  cr_assert_not_null(realpath("tests/progs/work.py", script), "tests/progs/work.py not found: run from the repository root");
  char *argv[] = { py, "-s", script, NULL };   /* -s: no user site (not -I: it ignores PYTHONMALLOC) */
  char *env[] = { (char *)pymalloc, "PYTHONHASHSEED=0", NULL };
  preload_case_t c = { pymalloc, argv, env, NULL, 0 };
  preload_compare(&c, ld);
}

/* python3 -c code, with PYTHONMALLOC=malloc (every object through malloc). */
static void preload_python_inline(const char *what, const char *code)
{
  PRELOAD_REQUIRE_LIB(ld);
  char py[PATH_MAX];
  if (preload_python(py, sizeof py) == NULL) cr_skip_test("python3 is not installed (make deps installs it)");
  char *argv[] = { py, "-s", "-c", (char *)code, NULL };
  char *env[] = { "PYTHONMALLOC=malloc", "PYTHONHASHSEED=0", NULL };
  preload_case_t c = { what, argv, env, NULL, 0 };
  preload_compare(&c, ld);
}

Test(preload, python_default_allocator, .timeout = 90)
{
  /* pymalloc for small objects, malloc for the rest and for the runtime. */
  preload_python_case("PYTHONMALLOC=default");
}

Test(preload, python_malloc_everywhere, .timeout = 90)
{
  preload_python_case("PYTHONMALLOC=malloc");
}

Test(preload, python_inline_threads_and_gc, .timeout = 90)
{
  /* Threads that allocate and drop cyclic garbage while gc runs; bytes
   * objects of many sizes; then a fork and a subprocess. The output is
   * counts only. */
  preload_python_inline("python -c (threads, gc, fork, subprocess)",
    "import gc, threading\n"
    "out = [0] * 4\n"
    "def w(i):\n"
    "    keep = []\n"
    "    for n in range(20000):\n"
    "        a = {'n': n, 'b': bytes(n % 3000), 's': str(n) * (n % 7)}\n"
    "        a['self'] = a\n"
    "        keep.append(a)\n"
    "        if len(keep) > 500: keep = keep[250:]\n"
    "        if n % 5000 == 0: gc.collect()\n"
    "    out[i] = sum(len(k['b']) + len(k['s']) for k in keep)\n"
    "ts = [threading.Thread(target=w, args=(i,)) for i in range(4)]\n"
    "[t.start() for t in ts]\n"
    "[t.join() for t in ts]\n"
    "print(out, gc.collect() >= 0)\n"
    /* Children: a fork of this threaded process, and a new interpreter
     * through subprocess (vfork/posix_spawn; it inherits LD_PRELOAD). */
    "import os, subprocess, sys\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    os._exit(0 if len([bytes(i) for i in range(3000)]) == 3000 else 1)\n"
    "print('fork child', os.waitpid(pid, 0)[1])\n"
    "r = subprocess.run([sys.executable, '-c', 'print(sorted(str(i) for i in range(5000))[:3])'], capture_output=True)\n"
    "print('subprocess', r.returncode, r.stdout, r.stderr)\n");
}

/* CPython's test_threading (ThreadJoinOnShutdown, test 3): a thread forks;
 * in the child, the forking thread starts a thread and both end with
 * pthread_exit, never exit(). glibc ends a process when its last thread
 * ends; a thread the allocator started (jemalloc's background purging, which
 * blocks every signal) must not keep the child alive and its parent waiting. */
Test(preload, python_fork_child_ends_when_its_threads_end, .timeout = 90)
{
  preload_python_inline("python -c (fork from a thread, child ends by pthread_exit)",
    "import os, sys, threading\n"
    "main_thread = threading.current_thread()\n"
    "def joining(m):\n"
    "    m.join()\n"
    "    print('child: thread ends', len([bytes(i) for i in range(2000)]))\n"
    "    sys.stdout.flush()\n"
    "def worker():\n"
    "    pid = os.fork()\n"
    "    if pid != 0:\n"
    "        print('parent: child status', os.waitpid(pid, 0)[1])\n"
    "        sys.exit(0)\n"
    "    t = threading.Thread(target=joining, args=(main_thread,))\n"
    "    t.start()\n"
    "    t.join()\n"
    "w = threading.Thread(target=worker)\n"
    "w.start()\n");
}

/* ---- (c) threads + fork ------------------------------------------------ */

Test(preload, threads_with_fork, .timeout = 90)
{
  preload_compare_prog("thread_fork", "thread_fork", NULL);
}

/* Option settings that move the allocator off its usual paths: pages
 * purged as soon as they are free (purge hooks, reuse of purged extents,
 * calloc of them), a background purging thread (with fork), a reserve far
 * below the default 1T (less room between tier ranges; the contract tests'
 * 256 MiB alignments fit in 8G, not in 4G, where the range runs out and
 * allocations fail with ENOMEM), and one arena for every thread. */
static char *const preload_option_sets[][2] = {
  { "TIERMALLOC_DIRTY_DECAY_MS=0", NULL },
  { "TIERMALLOC_BACKGROUND_THREAD=on", NULL },
  { "TIERMALLOC_RESERVE=8G", NULL },
  { "TIERMALLOC_NARENAS=1", NULL },
};

static void preload_thread_fork_with(size_t set)
{
  preload_compare_prog("thread_fork", preload_option_sets[set][0], preload_option_sets[set]);
}

/* This binary's own contract tests, run again in a child with an option
 * set: the options are read at start-up, so a new process is the only way.
 * Meaningful only when this binary runs on tiermalloc. */
static void preload_contract_with(size_t set)
{
  if (dlsym(RTLD_DEFAULT, "tier_count") == NULL)
    cr_skip_test("this test binary is not linked with tiermalloc (built by hand against glibc?)");
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  cr_assert_gt(n, 0, "readlink /proc/self/exe");
  self[n] = '\0';
  char *argv[] = { self, "--filter=contract/*", "--jobs=1", NULL };
  spawn_result_t r = spawn_run(argv, preload_option_sets[set], NULL, 100);
  char st[128];
  spawn_status_str(&r, st, sizeof st);
  const char *tail = r.errout ? r.errout + (r.err_len > 3000 ? r.err_len - 3000 : 0) : "";
  cr_expect(r.err == 0 && !r.timed_out && WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0,
            "contract tests with %s: %s\n%s", preload_option_sets[set][0], st, tail);
  cr_expect(r.errout && strstr(r.errout, "Failing: 0 | Crashing: 0"), "contract tests with %s:\n%s",
            preload_option_sets[set][0], tail);
  spawn_free(&r);
}

Test(preload, threads_with_fork_decay_0, .timeout = 90) { preload_thread_fork_with(0); }
Test(preload, threads_with_fork_background_thread, .timeout = 90) { preload_thread_fork_with(1); }
Test(preload, threads_with_fork_reserve_8G, .timeout = 90) { preload_thread_fork_with(2); }
Test(preload, threads_with_fork_one_arena, .timeout = 90) { preload_thread_fork_with(3); }
Test(preload, contract_decay_0, .timeout = 90) { preload_contract_with(0); }
Test(preload, contract_background_thread, .timeout = 90) { preload_contract_with(1); }
Test(preload, contract_reserve_8G, .timeout = 90) { preload_contract_with(2); }
Test(preload, contract_one_arena, .timeout = 90) { preload_contract_with(3); }

/* ---- (d) sqlite3 ------------------------------------------------------- */

Test(preload, sqlite3_in_memory, .timeout = 90)
{
  PRELOAD_REQUIRE_LIB(ld);
  PRELOAD_REQUIRE_TOOL(sqlite, "sqlite3");
  static const char sql[] =
    "CREATE TABLE t(id INTEGER PRIMARY KEY, grp INTEGER, name TEXT, val REAL);\n"
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 20000)\n"
    "  INSERT INTO t(grp, name, val)\n"
    "  SELECT x % 97, printf('name-%05d-%s', x, substr('abcdefghijklmnopqrstuvwxyz', 1 + x % 22, 1 + x % 5)),\n"
    "         (x * 7919) % 10007 / 3.0 FROM c;\n"
    "CREATE INDEX t_grp ON t(grp, val);\n"
    "CREATE INDEX t_name ON t(name);\n"
    "SELECT count(*), sum(grp), round(sum(val), 3) FROM t;\n"
    "SELECT grp, count(*), round(avg(val), 4), max(name) FROM t GROUP BY grp ORDER BY grp LIMIT 12;\n"
    "SELECT name, round(val, 2) FROM t WHERE grp = 13 ORDER BY val DESC, id LIMIT 5;\n"
    "SELECT group_concat(name, ',') FROM (SELECT name FROM t ORDER BY name DESC LIMIT 15);\n"
    "CREATE TABLE u AS SELECT grp, group_concat(name, ';') AS names FROM t GROUP BY grp;\n"
    "SELECT grp, length(names) FROM u ORDER BY length(names) DESC, grp LIMIT 5;\n"
    "SELECT a.grp, count(*) FROM t a JOIN u b ON a.grp = b.grp WHERE a.id % 11 = 0 GROUP BY a.grp ORDER BY 2 DESC, 1 LIMIT 5;\n"
    "UPDATE t SET name = name || '-' || hex(zeroblob(id % 4)) || upper(name) WHERE id % 3 = 0;\n"
    "DELETE FROM t WHERE id % 5 = 0;\n"
    "VACUUM;\n"
    "SELECT count(*), sum(length(name)), max(length(name)) FROM t;\n"
    "SELECT substr(name, 1, 30) FROM t ORDER BY name LIMIT 3;\n";
  char *argv[] = { sqlite, "-batch", "-bail", ":memory:", NULL };
  preload_case_t c = { "sqlite3", argv, NULL, sql, 0 };
  preload_compare(&c, ld);
}

/* ---- (e) perl ------------------------------------------------------------ */

Test(preload, perl_hashes_arrays_strings, .timeout = 90)
{
  PRELOAD_REQUIRE_LIB(ld);
  PRELOAD_REQUIRE_TOOL(perl, "perl");
  char *argv[] = { perl, "-e",
    "use strict; use warnings;\n"
    "my (%h, @a);\n"
    "for my $i (1 .. 200000) {\n"
    "  my $k = 'k' . ($i * 7919 % 50000);\n"
    "  $h{$k} .= chr(97 + $i % 26);\n"
    "  push @a, $k if $i % 3 == 0;\n"
    "  delete $h{'k' . ($i % 1000)} if $i % 997 == 0;\n"
    "}\n"
    "my @s = sort { length($h{$a}) <=> length($h{$b}) or $a cmp $b } keys %h;\n"
    "print scalar(@s), ' ', $s[0], ' ', $s[-1], ' ', $h{$s[-1]}, \"\\n\";\n"
    "my %c; $c{$_}++ for @a;\n"
    "print join(' ', map { \"$_=$c{$_}\" } (sort keys %c)[0 .. 9]), \"\\n\";\n"
    "my $s = 'abc' x 100000; $s =~ s/b/BB/g;\n"
    "my @w = split /B+/, $s;\n"
    "print length($s), ' ', substr($s, 0, 10), ' ', scalar(@w), \"\\n\";\n"
    "my @n = map { [$_, sprintf('%08x', $_ * 2654435761 % 4294967296)] } 1 .. 50000;\n"
    "@n = sort { $a->[1] cmp $b->[1] } @n;\n"
    "print join(',', map { $_->[0] } @n[0 .. 7]), \"\\n\";\n"
    "my $j = join('', map { chr(65 + $_ % 26) x ($_ % 50) } 1 .. 20000);\n"
    "my $count = () = $j =~ /(A+B+|Z{10,})/g;\n"
    "print length($j), ' ', $count, \"\\n\";\n",
    NULL };
  char *env[] = { "PERL_HASH_SEED=0", "PERL_PERTURB_KEYS=0", NULL };
  preload_case_t c = { "perl", argv, env, NULL, 0 };
  preload_compare(&c, ld);
}

/* ---- (f) coreutils sort and grep on a generated file -------------------- */

/* Writes a deterministic text file of `lines` lines into dir; its path in buf. */
static void preload_make_text(const char *dir, size_t lines, char *buf, size_t size)
{
  snprintf(buf, size, "%s/input.txt", dir);
  FILE *f = fopen(buf, "w");
  cr_assert_not_null(f, "cannot create %s", buf);
  uint64_t s = 12345;
  static const char *const vocab[] = { "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta",
                                       "iota", "kappa", "lambda", "mu", "xyzzy", "quux", "foo", "bar" };
  for (size_t i = 0; i < lines; i++) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    uint64_t r = s >> 17;
    fprintf(f, "%s%c%llu,%s-%s %05llu", vocab[r % 16], (char)('a' + (r >> 4) % 26), (unsigned long long)(r % 100000),
            vocab[(r >> 8) % 16], vocab[(r >> 12) % 16], (unsigned long long)((r >> 20) % 100000));
    if (r % 7 == 0) fputs(" aaab-aab", f);
    if (r % 11 == 0) fputs(" ZETA", f);
    fputc('\n', f);
  }
  cr_assert_eq(fclose(f), 0);
}

/* The test's private directory under /tmp; preload_cleanup (the tests'
 * .fini, which runs even when an assertion ends the test) removes it. */
static char preload_dir[64];

static void preload_mkdir(void)
{
  snprintf(preload_dir, sizeof preload_dir, "/tmp/tiermalloc-preload-XXXXXX");
  cr_assert_not_null(mkdtemp(preload_dir), "mkdtemp failed");
}

static void preload_cleanup(void)
{
  if (preload_dir[0] == '\0') return;
  char *argv[] = { "rm", "-rf", preload_dir, NULL };
  spawn_result_t r = spawn_run(argv, NULL, NULL, 30);
  spawn_free(&r);
  preload_dir[0] = '\0';
}

Test(preload, sort_generated_file, .timeout = 90, .fini = preload_cleanup)
{
  PRELOAD_REQUIRE_LIB(ld);
  PRELOAD_REQUIRE_TOOL(sort, "sort");
  char file[128], tmpdir[160];
  preload_mkdir();
  preload_make_text(preload_dir, 150000, file, sizeof file);
  snprintf(tmpdir, sizeof tmpdir, "TMPDIR=%s", preload_dir);

  /* Whole-line sort in the C locale; keyed numeric sort; sort -u in a
   * UTF-8 locale (strcoll, allocations per line); a small buffer with two
   * threads, which spills to temporary files and merges them. */
  char *a1[] = { sort, file, NULL };
  char *a2[] = { sort, "-t,", "-k2,2", "-k1,1n", "-s", file, NULL };
  char *a3[] = { sort, "-u", "-f", file, NULL };
  char *a4[] = { sort, "--parallel=2", "-S", "256K", "-r", file, NULL };
  char *c_env[] = { "LC_ALL=C", tmpdir, NULL };
  char *u_env[] = { "LC_ALL=C.UTF-8", tmpdir, NULL };
  preload_case_t cases[] = {
    { "sort", a1, c_env, NULL, 0 },
    { "sort -t, -k2,2 -k1,1n -s", a2, c_env, NULL, 0 },
    { "sort -u -f (C.UTF-8)", a3, u_env, NULL, 0 },
    { "sort --parallel=2 -S 256K -r", a4, c_env, NULL, 0 },
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) preload_compare(&cases[i], ld);
}

Test(preload, grep_regexes, .timeout = 90, .fini = preload_cleanup)
{
  /* grep is the canary for malloc(0): it treats a NULL from malloc(0) as
   * out of memory (it fails that way under memkind). Its regex engines
   * allocate heavily: DFA, back-references, -o, case folding, many -e. */
  PRELOAD_REQUIRE_LIB(ld);
  PRELOAD_REQUIRE_TOOL(grep, "grep");
  char file[128];
  preload_mkdir();
  preload_make_text(preload_dir, 80000, file, sizeof file);

  char *a1[] = { grep, "-E", "-c", "^(alpha|beta|gam+a)[a-z][0-9]{2,4},", file, NULL };
  char *a2[] = { grep, "-n", "-E", "(a+)b-\\1b", file, NULL };   /* back-reference */
  char *a3[] = { grep, "-o", "-E", "[0-9]{5}$", file, NULL };
  char *a4[] = { grep, "-i", "-v", "-c", "zeta|xyzzy", file, NULL };
  char *a5[] = { grep, "-F", "-e", "quux", "-e", "lambda-mu", "-e", "ZETA", "-c", file, NULL };
  char *a6[] = { grep, "-w", "-E", "-m", "500", "(theta|iota)-(mu|eta)", file, NULL };
  char *a7[] = { grep, "-P", "-c", "(?<=-)(eta|mu) \\d{3}", file, NULL };
  char *c_env[] = { "LC_ALL=C", NULL };
  char *u_env[] = { "LC_ALL=C.UTF-8", NULL };
  preload_case_t cases[] = {
    { "grep -E -c (alternation, interval)", a1, c_env, NULL, 0 },
    { "grep -n -E (back-reference)", a2, c_env, NULL, 0 },
    { "grep -o -E", a3, c_env, NULL, 0 },
    { "grep -i -v -c (C.UTF-8)", a4, u_env, NULL, 0 },
    { "grep -F -e -e -e -c", a5, c_env, NULL, 0 },
    { "grep -w -E -m (C.UTF-8)", a6, u_env, NULL, 0 },
    { "grep -P -c", a7, c_env, NULL, 0 },
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) preload_compare(&cases[i], ld);
}

/* ---- (g) a program with its own jemalloc ---------------------------------- */

Test(preload, program_linking_debians_jemalloc_bind9_compilezone, .timeout = 90)
{
  /* BIND's libisc allocates through Debian's libjemalloc (mallocx, rallocx,
   * sdallocx), while the libraries around it (libuv, libcrypto, libxml2)
   * and libisc's own free() go through tiermalloc: two jemallocs in one
   * process, which the private jemalloc's renamed symbols must keep apart. */
  PRELOAD_REQUIRE_LIB(ld);
  PRELOAD_REQUIRE_TOOL(compilezone, "named-compilezone");
  char *trace_env[] = { "LD_TRACE_LOADED_OBJECTS=1", ld, NULL };
  char *trace_argv[] = { compilezone, NULL };
  spawn_result_t deps = spawn_run(trace_argv, trace_env, NULL, 30);
  if (deps.out == NULL || strstr(deps.out, "libjemalloc.so") == NULL)
    cr_skip_test("this named-compilezone does not link libjemalloc: no second jemalloc to meet");
  cr_assert_not_null(strstr(deps.out, "libtiermalloc.so"), "the preload is not among the loaded objects: %s",
                     deps.out);
  spawn_free(&deps);

  size_t cap = 1u << 20, len = 0;
  char *zone = malloc(cap);
  cr_assert_not_null(zone);
  len += (size_t)snprintf(zone + len, cap - len,
                          "$TTL 300\n@ IN SOA ns.test. admin.test. 1 3600 600 86400 300\n"
                          "@ IN NS ns.test.\nns IN A 127.0.0.1\n");
  /* Names out of order, records of several types and sizes. */
  for (unsigned i = 1; i <= 6000; i++) {
    unsigned k = i * 2654435761u % 6007;
    len += (size_t)snprintf(zone + len, cap - len, "h%u IN A 10.%u.%u.%u\nh%u IN AAAA fd00::%x:%x\n", k,
                            k >> 16, (k >> 8) & 255, k & 255, k, k, i);
    len += (size_t)snprintf(zone + len, cap - len, "h%u IN TXT \"%.*s\"\n", k, (int)(1 + i % 60),
                            "the quick brown fox jumps over the lazy dog, again and again and again");
    if (i % 10 == 0) len += (size_t)snprintf(zone + len, cap - len, "h%u IN MX %u mail%u.test.\n", k, i % 50, i);
    if (i % 7 == 0) len += (size_t)snprintf(zone + len, cap - len, "c%u IN CNAME h%u\n", i, k);
    cr_assert_lt(len, cap - 512, "zone buffer too small");
  }
  char *argv[] = { compilezone, "-q", "-o", "-", "test", "/dev/stdin", NULL };
  preload_case_t c = { "named-compilezone", argv, NULL, zone, 0 };
  preload_compare(&c, ld);
  free(zone);
}

/* ---- a bad option ------------------------------------------------------- */

Test(preload, bad_option_warns_once_and_changes_nothing, .timeout = 60)
{
  /* TIERMALLOC_RESERVE=12Q: one line on stderr naming the variable and the
   * value, the default is used, and the program runs as without preload. */
  PRELOAD_REQUIRE_LIB(ld);
  PRELOAD_REQUIRE_TOOL(sort, "sort");
  static const char input[] = "pear\napple\nfig\nbanana\napple\n";
  char *argv[] = { sort, NULL };
  char *plain_env[] = { "LC_ALL=C", NULL };
  char *bad_env[] = { "LC_ALL=C", "TIERMALLOC_RESERVE=12Q", ld, NULL };

  spawn_result_t base = spawn_run(argv, plain_env, input, PRELOAD_RUN_TIMEOUT);
  spawn_result_t bad = spawn_run(argv, bad_env, input, PRELOAD_RUN_TIMEOUT);
  char s1[128], s2[128];
  cr_assert(base.err == 0 && WIFEXITED(base.status) && WEXITSTATUS(base.status) == 0, "sort without preload: %s",
            spawn_status_str(&base, s1, sizeof s1));
  cr_expect_eq(bad.status, base.status, "sort with TIERMALLOC_RESERVE=12Q: %s", spawn_status_str(&bad, s2, sizeof s2));
  cr_expect(bad.out_len == base.out_len && memcmp(bad.out, base.out, base.out_len) == 0,
            "stdout changed: without preload \"%s\", with it \"%s\"", base.out, bad.out);

  static const char want[] = "tiermalloc: TIERMALLOC_RESERVE='12Q' is not a size";
  size_t lines = 0;
  for (size_t i = 0; i < bad.err_len; i++) lines += bad.errout[i] == '\n';
  cr_expect(lines == 1 && bad.err_len > 0 && bad.errout[bad.err_len - 1] == '\n',
            "stderr has %zu lines, want exactly one: \"%s\"", lines, bad.errout);
  cr_expect(strncmp(bad.errout, want, sizeof want - 1) == 0, "stderr is \"%s\", want a line starting \"%s\"",
            bad.errout, want);
  spawn_free(&base);
  spawn_free(&bad);
}

/* The jemalloc settings of the last process of `argv` run with env
 * (TIERMALLOC_VERBOSE=1; taskset is preloaded too, then execs): its verbose
 * line "tiermalloc: jemalloc: <conf>" into conf. No other line from jemalloc
 * (it reports a setting it refuses through that prefix). */
static void preload_je_conf(char **argv, char **env, char *conf, size_t size)
{
  spawn_result_t r = spawn_run(argv, env, NULL, PRELOAD_RUN_TIMEOUT);
  char st[128];
  cr_assert(r.err == 0 && WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "%s: %s", argv[0],
            spawn_status_str(&r, st, sizeof st));
  static const char tag[] = "tiermalloc: jemalloc: ", head[] = "oversize_threshold:";
  unsigned found = 0, other = 0;
  for (char *line = r.errout; line && *line;) {
    char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    if (len > sizeof tag - 1 && strncmp(line, tag, sizeof tag - 1) == 0) {
      const char *v = line + sizeof tag - 1;
      if (strncmp(v, head, sizeof head - 1) == 0) {
        found++;
        snprintf(conf, size, "%.*s", (int)(len - (sizeof tag - 1)), v);
      } else {
        other++;
      }
    }
    line = end ? end + 1 : NULL;
  }
  cr_assert(found > 0 && other == 0, "want the settings line and no other from jemalloc: \"%s\"", r.errout);
  spawn_free(&r);
}

/* One automatic arena per CPU the process may run on (fewer arenas hold
 * fewer partly used slabs: bench/README.md), TIERMALLOC_NARENAS overriding
 * it, and the thread caches' slots; jemalloc takes them without a word. */
Test(preload, automatic_arenas_are_one_per_cpu_the_process_may_run_on, .timeout = 60)
{
  PRELOAD_REQUIRE_LIB(ld);
  PRELOAD_REQUIRE_TOOL(taskset, "taskset");
  PRELOAD_REQUIRE_TOOL(truebin, "true");
  cpu_set_t set;
  cr_assert_eq(sched_getaffinity(0, sizeof set, &set), 0);
  char want[64], conf[512];
  char *env[] = { "TIERMALLOC_VERBOSE=1", ld, NULL };
  char *argv[] = { truebin, NULL };
  preload_je_conf(argv, env, conf, sizeof conf);
  snprintf(want, sizeof want, ",narenas:%d,", CPU_COUNT(&set));
  cr_expect(strstr(conf, want) != NULL, "settings \"%s\", want %s (CPU_COUNT of the affinity mask)", conf, want);
  cr_expect(strstr(conf, "tcache_nslots_small_max:64,tcache_nslots_small_min:8") != NULL, "settings \"%s\"", conf);

  char *one_argv[] = { taskset, "-c", "0", truebin, NULL };
  preload_je_conf(one_argv, env, conf, sizeof conf);
  cr_expect(strstr(conf, ",narenas:1,") != NULL, "under taskset -c 0: settings \"%s\"", conf);

  char *set_env[] = { "TIERMALLOC_VERBOSE=1", "TIERMALLOC_NARENAS=3", ld, NULL };
  preload_je_conf(one_argv, set_env, conf, sizeof conf);
  cr_expect(strstr(conf, ",narenas:3,") != NULL, "TIERMALLOC_NARENAS=3: settings \"%s\"", conf);
}

/* ---- security ------------------------------------------------------------ */

static char sec_dir[64];

static void sec_cleanup(void)
{
  if (sec_dir[0] == '\0') return;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", sec_dir);
  cr_expect_eq(system(cmd), 0, "%s", cmd);
}

/* A fresh directory /tmp/tm-sec-XXXXXX with mode `mode`, in sec_dir. */
static void sec_mkdir(mode_t mode)
{
  strcpy(sec_dir, "/tmp/tm-sec-XXXXXX");
  cr_assert_not_null(mkdtemp(sec_dir), "mkdtemp: %s", strerror(errno));
  cr_assert_eq(chmod(sec_dir, mode), 0);
}

/* Where the stats go when TIERMALLOC_STATS_FILE names a symbolic link: not
 * to the link's target, which is left uncreated, but to stderr after one
 * warning line. */
Test(preload, stats_file_that_is_a_symlink_is_refused, .timeout = 60, .fini = sec_cleanup)
{
  PRELOAD_REQUIRE_LIB(ld);
  PRELOAD_REQUIRE_TOOL(sort, "sort");
  sec_mkdir(0700);
  char target[128], link[128], file_env[160];
  snprintf(target, sizeof target, "%s/target", sec_dir);
  snprintf(link, sizeof link, "%s/stats", sec_dir);
  cr_assert_eq(symlink(target, link), 0);
  snprintf(file_env, sizeof file_env, "TIERMALLOC_STATS_FILE=%s", link);
  char *argv[] = { sort, NULL };
  char *env[] = { "LC_ALL=C", "TIERMALLOC_STATS=text", file_env, ld, NULL };
  spawn_result_t r = spawn_run(argv, env, "b\na\n", PRELOAD_RUN_TIMEOUT);
  char st[128];
  cr_assert(r.err == 0 && WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "sort: %s",
            spawn_status_str(&r, st, sizeof st));
  cr_expect_str_eq(r.out, "a\nb\n");
  cr_expect_eq(access(target, F_OK), -1, "the symlink's target %s was created", target);
  char want[256];
  snprintf(want, sizeof want,
           "tiermalloc: TIERMALLOC_STATS_FILE='%s' is a symbolic link; printing stats to stderr\n",
           link);
  cr_expect(strncmp(r.errout, want, strlen(want)) == 0, "stderr starts \"%.300s\", want \"%s\"",
            r.errout, want);
  cr_expect_not_null(strstr(r.errout, "resident"), "no stats table on stderr: \"%.2000s\"", r.errout);
  spawn_free(&r);
}

/* The attack of issue 11: a setuid-root program linked with tiermalloc, run
 * by an unprivileged user who sets TIERMALLOC_STATS_FILE to a path in a
 * root-only directory. In secure execution no file is created, the output is
 * unchanged, the program exits normally, and stderr has one warning line.
 * As a control, the same program run by root itself (not secure) does
 * create the file, with mode 0600, so the variables reach the library. */
Test(preload, setuid_program_ignores_stats_file_from_the_environment, .timeout = 90,
     .fini = sec_cleanup)
{
  if (geteuid() != 0) cr_skip_test("needs root to install a setuid-root program");
  PRELOAD_REQUIRE_LIB(ld);
  PRELOAD_REQUIRE_TOOL(cc, "cc");
  PRELOAD_REQUIRE_TOOL(setpriv, "setpriv");
  char lib[PATH_MAX];
  cr_assert_not_null(preload_lib(lib, sizeof lib));
  (void)ld;

  /* The program and the library in a directory anyone can read (the
   * checkout may be under a private home), the stats path under one that
   * only root can enter. Secure execution ignores $ORIGIN and
   * LD_LIBRARY_PATH, so the program finds the library by an absolute rpath. */
  sec_mkdir(0755);
  char cmd[4 * PATH_MAX], prog[128], rootonly[128], stats[160], file_env[200];
  snprintf(prog, sizeof prog, "%s/setuid_report", sec_dir);
  snprintf(rootonly, sizeof rootonly, "%s/root-only", sec_dir);
  snprintf(stats, sizeof stats, "%s/stats", rootonly);
  snprintf(file_env, sizeof file_env, "TIERMALLOC_STATS_FILE=%s", stats);
  cr_assert_eq(mkdir(rootonly, 0700), 0);
  snprintf(cmd, sizeof cmd,
           "install -m 755 '%s' '%s/' && cc -O1 -o '%s' tests/progs/setuid_report.c -L'%s' "
           "-ltiermalloc -Wl,-rpath,'%s' && chown root:root '%s' && chmod 4755 '%s'",
           lib, sec_dir, prog, sec_dir, sec_dir, prog, prog);
  cr_assert_eq(system(cmd), 0, "building the setuid program failed: %s", cmd);

  char *as_nobody[] = { setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups", prog,
                        NULL };
  char *attack[] = { "TIERMALLOC_STATS=text", file_env, NULL };
  spawn_result_t plain = spawn_run(as_nobody, NULL, NULL, PRELOAD_RUN_TIMEOUT);
  spawn_result_t r = spawn_run(as_nobody, attack, NULL, PRELOAD_RUN_TIMEOUT);
  char st[128];
  cr_assert(plain.err == 0 && WIFEXITED(plain.status) && WEXITSTATUS(plain.status) == 0,
            "the setuid program as nobody: %s; stderr: %.1000s",
            spawn_status_str(&plain, st, sizeof st), plain.errout);
  if (strstr(plain.out, " euid=0 secure=1 ") == NULL)
    cr_skip_test("the kernel did not run %s setuid-root (nosuid mount?): it printed \"%s\"", prog,
                 plain.out);
  cr_expect_eq(plain.err_len, 0, "stderr without TIERMALLOC_*: \"%s\"", plain.errout);

  cr_assert(r.err == 0 && WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0,
            "with the attacker's variables: %s; stderr: %.1000s", spawn_status_str(&r, st, sizeof st),
            r.errout);
  cr_expect_str_eq(r.out, plain.out, "the output changed");
  cr_expect_eq(access(stats, F_OK), -1, "%s was created in secure execution", stats);
  cr_expect_str_eq(r.errout, "tiermalloc: secure execution (setuid, setgid or capabilities): "
                             "ignoring TIERMALLOC_STATS, TIERMALLOC_STATS_FILE\n");
  spawn_free(&r);

  /* Control: root runs it (ruid = euid, not secure): the file is written. */
  char *as_root[] = { prog, NULL };
  r = spawn_run(as_root, attack, NULL, PRELOAD_RUN_TIMEOUT);
  cr_assert(r.err == 0 && WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "as root: %s",
            spawn_status_str(&r, st, sizeof st));
  cr_expect_eq(r.err_len, 0, "stderr as root: \"%s\"", r.errout);
  struct stat sb;
  cr_assert_eq(stat(stats, &sb), 0, "as root (not secure) the stats file was not written: %s",
               strerror(errno));
  cr_expect_eq(sb.st_mode & 07777, 0600, "the stats file has mode %o", sb.st_mode & 07777);
  cr_expect_gt(sb.st_size, 0, "the stats file is empty");
  spawn_free(&r);
  spawn_free(&plain);
}

/* ---- what the library exports ------------------------------------------ */

Test(preload, library_exports_every_entry_point_and_no_jemalloc, .timeout = 60)
{
  /* A preloaded library replaces only what it exports: a missing variant
   * silently stays glibc's (or libstdc++'s). And the private jemalloc must
   * not leak its API into the program's namespace. */
  char lib[PATH_MAX];
  if (preload_lib(lib, sizeof lib) == NULL) cr_skip_test("%s is not built (run make)", PRELOAD_LIB);
  PRELOAD_REQUIRE_TOOL(nm, "nm");
  char *argv[] = { nm, "-D", "--defined-only", "--format=posix", lib, NULL };
  spawn_result_t r = spawn_run(argv, NULL, NULL, 30);
  char st[128];
  cr_assert(r.err == 0 && WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "nm: %s: %s",
            spawn_status_str(&r, st, sizeof st), r.errout);
  static const char *const want[] = {
    "malloc", "free", "calloc", "realloc", "reallocarray", "posix_memalign", "aligned_alloc", "memalign",
    "valloc", "pvalloc", "malloc_usable_size",
    "_Znwm", "_Znam", "_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t", "_ZnwmSt11align_val_t",
    "_ZnamSt11align_val_t", "_ZnwmSt11align_val_tRKSt9nothrow_t", "_ZnamSt11align_val_tRKSt9nothrow_t",
    "_ZdlPv", "_ZdaPv", "_ZdlPvm", "_ZdaPvm", "_ZdlPvRKSt9nothrow_t", "_ZdaPvRKSt9nothrow_t",
    "_ZdlPvSt11align_val_t", "_ZdaPvSt11align_val_t", "_ZdlPvmSt11align_val_t", "_ZdaPvmSt11align_val_t",
    "_ZdlPvSt11align_val_tRKSt9nothrow_t", "_ZdaPvSt11align_val_tRKSt9nothrow_t",
  };
  /* nm --format=posix: "name type value size" per line. */
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    size_t n = strlen(want[i]);
    int found = 0;
    for (const char *line = r.out; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL)
      if (strncmp(line, want[i], n) == 0 && (line[n] == ' ' || line[n] == '@')) { found = 1; break; }
    cr_expect(found, "%s does not export %s", lib, want[i]);
  }
  static const char *const forbidden[] = { "je_", "tmje_", "mallocx", "rallocx", "xallocx", "sallocx",
                                           "dallocx", "sdallocx", "nallocx", "mallctl", "malloc_stats_print" };
  for (const char *line = r.out; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL)
    for (size_t i = 0; i < sizeof forbidden / sizeof *forbidden; i++)
      if (strncmp(line, forbidden[i], strlen(forbidden[i])) == 0) {
        const char *end = strchr(line, ' ');
        cr_expect_fail("%s exports jemalloc's %.*s", lib, (int)(end ? end - line : 40), line);
      }
  spawn_free(&r);
}

/* Runs build/tests/progs/<name> preloaded, with one TIERMALLOC_ setting,
 * and requires exit 0; skips when the library is missing (preload_prog
 * fails on a missing program). */
static spawn_result_t preload_run_prog(const char *name, char *setting)
{
  PRELOAD_REQUIRE_LIB(ld);
  char prog[PATH_MAX];
  preload_prog(name, prog, sizeof prog);
  char *argv[] = { prog, NULL };
  char *env[] = { setting, ld, NULL };
  spawn_result_t r = spawn_run(argv, env, NULL, 50);
  char st[128];
  cr_assert(r.err == 0 && WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "%s: %s; %s", name,
            spawn_status_str(&r, st, sizeof st), r.out ? r.out : "");
  return r;
}

Test(preload, full_ranges_fall_back_to_unplaced_memory, .timeout = 60)
{
  /* With 1 GiB of range per tier, 2.5 GiB of blocks must still be served:
   * the first ones placed, the rest outside the ranges, freed without harm,
   * and one warning line. */
  spawn_result_t r = preload_run_prog("exhaust", "TIERMALLOC_RESERVE=1G");
  int placed = -1, unplaced = -1, failed = -1;
  unsigned long long before = 0, after = 1;
  cr_assert_eq(sscanf(r.out, "placed=%d unplaced=%d realloc_failed=%d unplaced_before=%llu unplaced_after=%llu",
                      &placed, &unplaced, &failed, &before, &after), 5, "%s", r.out);
  cr_expect_gt(placed, 0);
  cr_expect_gt(unplaced, 0);
  /* A realloc of an unplaced block that fails leaves the block counted. */
  cr_expect_eq(failed, 1, "%s", r.out);
  cr_expect_geq(before, (unsigned long long)unplaced * (64 << 20), "%s", r.out);
  cr_expect_eq(after, before, "%s", r.out);
  cr_expect_str_eq(r.errout, "tiermalloc: the tier ranges are full (TIERMALLOC_RESERVE); new memory is not placed on a tier\n");
  spawn_free(&r);
}

/* The 1 TiB reservation does not fit under ulimit -v: the ranges shrink to
 * half the limit (tests/unit/test_hooks.c), and blocks are still placed. */
Test(preload, blocks_are_placed_under_an_address_space_limit, .timeout = 60)
{
  PRELOAD_REQUIRE_LIB(ld);
  char py[PATH_MAX];
  if (preload_python(py, sizeof py) == NULL) cr_skip_test("python3 is not installed (make deps installs it)");
  char script[PATH_MAX + 256];
  snprintf(script, sizeof script,
           "ulimit -v 2000000 && exec '%s' -s -c \""
           "import ctypes; tier_of = ctypes.CDLL(None).tier_of; tier_of.argtypes = [ctypes.c_void_p]\n"
           "b = [bytearray(1 << 20) for i in range(200)]\n"
           "print('placed', sum(tier_of(id(x)) >= 0 for x in b), 'of', len(b))\"", py);
  char *argv[] = { "sh", "-c", script, NULL };
  char *env[] = { ld, "PYTHONMALLOC=malloc", NULL };
  spawn_result_t r = spawn_run(argv, env, NULL, 50);
  char st[128];
  cr_assert(r.err == 0 && WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "%s; %s", spawn_status_str(&r, st, sizeof st),
            r.errout ? r.errout : "");
  cr_expect_str_eq(r.out, "placed 200 of 200\n");
  cr_expect_str_eq(r.errout, "", "no warning expected");
  spawn_free(&r);
}

Test(preload, freed_pages_go_back_to_the_kernel_as_jemalloc_decays, .timeout = 60)
{
  /* DIRTY_DECAY_MS=0: jemalloc purges freed extents at once, through the
   * tier ranges' purge hooks; resident (measured from numa_maps) drops. */
  spawn_result_t r = preload_run_prog("decay", "TIERMALLOC_DIRTY_DECAY_MS=0");
  unsigned long long before = 0, after = 0;
  cr_assert_eq(sscanf(r.out, "before=%llu after=%llu", &before, &after), 2, "%s", r.out);
  cr_expect_geq(before, 64ull << 20, "the touched 64 MiB are resident");
  cr_expect_leq(after, before - (56ull << 20), "after free: %llu of %llu bytes still resident", after, before);
  cr_expect_str_eq(r.errout, "");
  spawn_free(&r);
}

/* ---- idle programs give freed memory back ----------------------------------- */

typedef struct idle_result_s {
  long peak, idle, after_ms, threads;
} idle_result_t;

/* build/tests/progs/idle MIB THREADS WAIT_MS, preloaded with a 1 s decay
 * (preload: the library or NULL for glibc's malloc), and `extra` (a
 * "NAME=value" or NULL) in its environment. */
static idle_result_t idle_run_env(const char *preload, int mib, int threads, int wait_ms, const char *extra)
{
  char prog[PATH_MAX], a1[16], a2[16], a3[16];
  preload_prog("idle", prog, sizeof prog);
  snprintf(a1, sizeof a1, "%d", mib);
  snprintf(a2, sizeof a2, "%d", threads);
  snprintf(a3, sizeof a3, "%d", wait_ms);
  char *argv[] = { prog, a1, a2, a3, NULL };
  char *env[] = { "TIERMALLOC_DIRTY_DECAY_MS=1000", (char *)(preload ? preload : extra),
                  (char *)(preload ? extra : NULL), NULL };
  spawn_result_t r = spawn_run(argv, env, NULL, 50);
  char st[128];
  cr_assert(r.err == 0 && WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "idle: %s; %s",
            spawn_status_str(&r, st, sizeof st), r.out ? r.out : "");
  idle_result_t x = { -1, -1, -1, -1 };
  cr_assert_eq(sscanf(r.out, "peak=%ld idle=%ld after_ms=%ld threads=%ld", &x.peak, &x.idle,
                      &x.after_ms, &x.threads), 4, "%s", r.out);
  cr_expect_str_eq(r.errout, "");
  spawn_free(&r);
  return x;
}

static idle_result_t idle_run(const char *preload, int mib, int threads, int wait_ms)
{
  return idle_run_env(preload, mib, threads, wait_ms, NULL);
}

/* A program that frees most of its memory and then stops calling the
 * allocator is back near glibc's RSS within the decay time (1 s) plus a
 * second: tiermalloc starts jemalloc's background thread once the heap has
 * grown past 64 MiB, even with a single thread. */
static void idle_returns_memory(int threads, long slack_mib)
{
  PRELOAD_REQUIRE_LIB(ld);
  idle_result_t glibc = idle_run(NULL, 256, threads, 200);
  idle_result_t tm = idle_run(ld, 256, threads, 3000);
  cr_expect_geq(tm.peak, 256 * 1024, "the 256 MiB were resident: peak %ld kB", tm.peak);
  cr_expect_leq(tm.idle, glibc.idle + slack_mib * 1024,
                "%d thread(s): %ld kB resident after free and 2 s idle (glibc: %ld kB)", threads,
                tm.idle, glibc.idle);
  /* Measured 1.7-1.8 s (jemalloc's background thread purges on its own
   * schedule); half a second more for a loaded 2-core machine. */
  cr_expect_leq(tm.after_ms, 2500, "reached after %ld ms", tm.after_ms);
}

Test(preload, single_threaded_program_gives_freed_memory_back_when_idle, .timeout = 60)
{
  idle_returns_memory(1, 32);
}

Test(preload, multi_threaded_program_gives_freed_memory_back_when_idle, .timeout = 60)
{
  /* Four arenas grow side by side: a transparent huge page faulted in for
   * one extent also filled memory jemalloc never committed, which only the
   * empty-chunk purge gives back (before it: 28-40 MiB left; now about 5). */
  idle_returns_memory(4, 32);
}

/* Below 64 MiB of heap, a single-threaded program gets no jemalloc
 * background thread: without the live record it keeps a single thread;
 * with it, the one thread that publishes the record (its name is checked
 * in tests/preload/test_tierctl.c). */
Test(preload, small_single_threaded_program_gets_no_jemalloc_background_thread, .timeout = 60)
{
  PRELOAD_REQUIRE_LIB(ld);
  idle_result_t tm = idle_run_env(ld, 32, 1, 100, "TIERMALLOC_LIVE_MS=0");
  cr_expect_eq(tm.threads, 1, "%ld threads without the live record", tm.threads);
  tm = idle_run_env(ld, 32, 1, 100, "TIERMALLOC_LIVE_DIR=/tmp");
  cr_expect_eq(tm.threads, 2, "%ld threads with the live record: the program's and the one that publishes it",
               tm.threads);
}
