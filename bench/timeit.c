/* bench/timeit.c: run a command, report its wall time, CPU time and peak RSS.
 *
 *   timeit STATFILE [NAME=VALUE...] COMMAND [ARG...]
 *
 * Forks, sets the NAME=VALUE variables in the child only (so an LD_PRELOAD
 * given this way applies to COMMAND, not to timeit), execs COMMAND with this
 * process's stdio and the rest of its environment, waits, and
 * writes one line to STATFILE:
 *   <wall seconds> <user+sys seconds> <max RSS KiB> <exit code or -signal>
 * then exits 0 (1 if it could not run the command at all).
 *
 * bench/run uses this small launcher rather than timing from Python: Linux
 * carries a process's peak RSS across exec, so a child of the (large) Python
 * harness would report at least the harness's own RSS.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: timeit STATFILE [NAME=VALUE...] COMMAND [ARG...]\n");
		return 1;
	}
	int cmd = 2;
	while (cmd < argc && strchr(argv[cmd], '=') != NULL)
		cmd++;
	if (cmd == argc) {
		fprintf(stderr, "timeit: no command\n");
		return 1;
	}
	double t0 = now();
	pid_t pid = fork();
	if (pid < 0) {
		perror("timeit: fork");
		return 1;
	}
	if (pid == 0) {
		for (int i = 2; i < cmd; i++)
			putenv(argv[i]);
		execvp(argv[cmd], argv + cmd);
		fprintf(stderr, "timeit: %s: %s\n", argv[cmd], strerror(errno));
		_exit(127);
	}
	int status;
	struct rusage ru;
	while (wait4(pid, &status, 0, &ru) < 0) {
		if (errno != EINTR) {
			perror("timeit: wait4");
			return 1;
		}
	}
	double t1 = now();
	int code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? -WTERMSIG(status) : -1;
	double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
		     (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
	FILE *f = fopen(argv[1], "w");
	if (f == NULL) {
		perror("timeit: STATFILE");
		return 1;
	}
	fprintf(f, "%.6f %.6f %ld %d\n", t1 - t0, cpu, ru.ru_maxrss, code);
	return fclose(f) == 0 ? 0 : 1;
}
