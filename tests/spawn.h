/*
 * Running a program from a test and capturing what it does.
 *
 * spawn_run() runs argv[0] (looked up in PATH) with:
 *   - the test's environment, minus LD_PRELOAD and every TIERMALLOC_*
 *     variable (so a developer's own settings never change a result) and
 *     BXFI_* (Criterion's mark of its worker processes: a Criterion binary
 *     started with it aborts, taking itself for a worker), plus
 *     the NAME=VALUE entries of `extra` (NULL-terminated, may be NULL);
 *   - stdin read from `input` (may be NULL: then /dev/null);
 *   - stdout and stderr captured whole, each in its own memfd (a regular
 *     file, so no pipe can fill up and block the child);
 *   - a deadline: past `timeout_s` seconds the child's process group is
 *     killed with SIGKILL and spawn_run reports timed_out.
 * The result owns two NUL-terminated buffers; spawn_free() releases them.
 * Setup failures (no memfd, fork failed) are reported as err != 0 with the
 * child never started; exec failure is exit status 127, as in a shell.
 */
#ifndef TIERMALLOC_TESTS_SPAWN_H
#define TIERMALLOC_TESTS_SPAWN_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

typedef struct {
  int err;          /* errno of a setup failure; 0 when the child ran */
  int status;       /* raw wait status */
  int timed_out;    /* killed at the deadline */
  char *out, *errout;
  size_t out_len, err_len;
} spawn_result_t;

/* The whole content of fd (from offset 0), NUL-terminated; NULL on failure. */
static inline char *spawn_slurp(int fd, size_t *len)
{
  struct stat st;
  if (fstat(fd, &st) != 0) return NULL;
  size_t n = (size_t)st.st_size;
  char *buf = malloc(n + 1);
  if (buf == NULL) return NULL;
  size_t got = 0;
  while (got < n) {
    ssize_t r = pread(fd, buf + got, n - got, (off_t)got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  buf[got] = '\0';
  *len = got;
  return buf;
}

static inline int spawn_env_dropped(const char *entry)
{
  return strncmp(entry, "LD_PRELOAD=", 11) == 0 || strncmp(entry, "TIERMALLOC_", 11) == 0 ||
         strncmp(entry, "BXFI_", 5) == 0;
}

static inline int spawn_env_overridden(const char *entry, char *const *extra)
{
  const char *eq = strchr(entry, '=');
  size_t n = eq ? (size_t)(eq - entry) : strlen(entry);
  for (; extra && *extra; extra++)
    if (strncmp(*extra, entry, n) == 0 && (*extra)[n] == '=') return 1;
  return 0;
}

static inline spawn_result_t spawn_run(char *const argv[], char *const extra[],
                                       const char *input, double timeout_s)
{
  spawn_result_t r;
  memset(&r, 0, sizeof r);
  int fds[3] = { -1, -1, -1 };
  const char *names[3] = { "spawn-in", "spawn-out", "spawn-err" };
  for (int i = 0; i < 3; i++) {
    fds[i] = memfd_create(names[i], MFD_CLOEXEC);
    if (fds[i] < 0) { r.err = errno; goto out; }
  }
  if (input) {
    size_t n = strlen(input), done = 0;
    while (done < n) {
      ssize_t w = write(fds[0], input + done, n - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) { r.err = errno ? errno : EIO; goto out; }
      done += (size_t)w;
    }
    if (lseek(fds[0], 0, SEEK_SET) != 0) { r.err = errno; goto out; }   /* the child reads from the start */
  }

  /* The child's environment, built before fork: the child only execs. */
  size_t nenv = 0, nextra = 0;
  while (environ[nenv]) nenv++;
  while (extra && extra[nextra]) nextra++;
  char **env = malloc((nenv + nextra + 1) * sizeof *env);
  if (env == NULL) { r.err = ENOMEM; goto out; }
  size_t k = 0;
  for (size_t i = 0; i < nenv; i++)
    if (!spawn_env_dropped(environ[i]) && !spawn_env_overridden(environ[i], extra)) env[k++] = environ[i];
  for (size_t i = 0; i < nextra; i++) env[k++] = extra[i];
  env[k] = NULL;

  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) { r.err = errno; free(env); goto out; }
  if (pid == 0) {
    setpgid(0, 0);   /* its own group, so a timeout kills grandchildren too */
    int in = input ? fds[0] : open("/dev/null", O_RDONLY);
    if (in < 0 || dup2(in, 0) < 0 || dup2(fds[1], 1) < 0 || dup2(fds[2], 2) < 0) _exit(126);
    execvpe(argv[0], argv, env);
    _exit(127);
  }
  setpgid(pid, pid);   /* also here: whichever runs first, the group exists */
  free(env);

  struct timespec start, now, nap = { 0, 2 * 1000 * 1000 };
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    pid_t w = waitpid(pid, &r.status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) { r.err = errno; break; }
    clock_gettime(CLOCK_MONOTONIC, &now);
    double el = (double)(now.tv_sec - start.tv_sec) + (double)(now.tv_nsec - start.tv_nsec) / 1e9;
    if (!r.timed_out && el > timeout_s) {
      r.timed_out = 1;
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
    }
    nanosleep(&nap, NULL);
  }
  /* Grandchildren left behind by the program (it should leave none). */
  kill(-pid, SIGKILL);

  r.out = spawn_slurp(fds[1], &r.out_len);
  r.errout = spawn_slurp(fds[2], &r.err_len);
  if (r.out == NULL || r.errout == NULL) r.err = r.err ? r.err : ENOMEM;
out:
  for (int i = 0; i < 3; i++)
    if (fds[i] >= 0) close(fds[i]);
  return r;
}

static inline void spawn_free(spawn_result_t *r)
{
  free(r->out);
  free(r->errout);
  r->out = r->errout = NULL;
}

/* A printable description of a wait status, for failure messages. */
static inline const char *spawn_status_str(const spawn_result_t *r, char *buf, size_t size)
{
  if (r->err) snprintf(buf, size, "not run (%s)", strerror(r->err));
  else if (r->timed_out) snprintf(buf, size, "timed out, killed");
  else if (WIFEXITED(r->status)) snprintf(buf, size, "exit %d", WEXITSTATUS(r->status));
  else if (WIFSIGNALED(r->status)) snprintf(buf, size, "killed by signal %d (%s)", WTERMSIG(r->status), strsignal(WTERMSIG(r->status)));
  else snprintf(buf, size, "status 0x%x", r->status);
  return buf;
}

/* The absolute path of an executable named name in PATH (or name itself
 * when it has a slash and is executable), in buf; NULL when there is none. */
static inline const char *spawn_which(const char *name, char *buf, size_t size)
{
  if (strchr(name, '/')) {
    if (access(name, X_OK) != 0) return NULL;
    snprintf(buf, size, "%s", name);
    return buf;
  }
  const char *path = getenv("PATH");
  if (path == NULL) path = "/usr/bin:/bin";
  while (*path) {
    const char *end = strchr(path, ':');
    size_t n = end ? (size_t)(end - path) : strlen(path);
    if (n > 0 && n + strlen(name) + 2 <= size) {
      memcpy(buf, path, n);
      buf[n] = '/';
      strcpy(buf + n + 1, name);
      struct stat st;
      if (stat(buf, &st) == 0 && S_ISREG(st.st_mode) && access(buf, X_OK) == 0) return buf;
    }
    path += n;
    if (*path == ':') path++;
  }
  return NULL;
}

#endif
