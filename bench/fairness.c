/* bench/fairness.c: a working set that is filled, then read and written at
 * random (the fairness benchmark's workload), or passed over a few times
 * (the kernel's failure case of bench/fairness-vm).
 *
 *   fairness --mib N [--block-kib K] [--passes P] [--seed S] [--which] [--report]
 *
 * It mallocs N MiB in blocks of K KiB (default 1024) and fills every byte
 * with varied data (xorshift: zram cannot compress it to nothing), then
 * prints "filled <mib> MiB in <s> s pid <pid>".
 *
 * With --passes P it then makes P sequential passes over the whole set,
 * each reading and rewriting every 8-byte word, checks a checksum of the
 * data against the one it keeps (nothing may be lost when pages move or
 * are swapped), prints "passes ... ok" (exit 0) or "... CORRUPT" (exit 1)
 * and exits.
 *
 * Without --passes it loops: an operation picks a random block and a random
 * 8-byte word in it, reads it and writes it back changed (random
 * read-modify-write over the whole set; every byte is equally hot). It
 * counts operations. SIGUSR1 starts a measurement window (the count and the
 * clock restart), SIGUSR2 ends it: "window ops <n> s <secs> ops_per_s <r>
 * cpu_s <c> ops_per_cpu_s <q>" is printed (c: user+system CPU seconds of
 * the window, so q does not depend on how the CPUs were shared) and the
 * program exits 0. SIGTERM ends it the same way.
 *
 * --report prints, after the fill and after each pass, the state of its
 * cgroup (v2) and of itself: "state <when> current <B> swap <B> anon_N0 <B>
 * anon_N1 <B> vmswap <B> vmrss <B> thp <B>" (memory.current,
 * memory.swap.current, memory.numa_stat anon, /proc/self/status VmSwap and
 * VmRSS, smaps_rollup AnonHugePages), so the last one before an OOM
 * kill is in its output. --which first prints the shared object malloc resolved to (the preload
 * check). Output goes through write(2) (out.h).
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "out.h"

static volatile sig_atomic_t start_req, stop_req;

static void on_start(int sig) { (void)sig; start_req = 1; }
static void on_stop(int sig) { (void)sig; stop_req = 1; }

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* User + system CPU seconds of the process so far. */
static double cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static inline uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static int report;

/* The first number after `key` in file `path` (scaled by `mul`); 0 when absent. */
static unsigned long long file_num(const char *path, const char *key, unsigned long long mul)
{
	char buf[4096];
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return 0;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *p = key[0] ? strstr(buf, key) : buf;
	return p ? strtoull(p + strlen(key), NULL, 10) * mul : 0;
}

/* Bytes on a node (field " N<n>=") of the "anon" line of memory.numa_stat. */
static unsigned long long anon_node(const char *path, const char *field)
{
	char buf[4096];
	unsigned long long v = 0;
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return 0;
	while (fgets(buf, sizeof buf, f))
		if (strncmp(buf, "anon ", 5) == 0) {
			const char *q = strstr(buf, field);
			v = q ? strtoull(q + strlen(field), NULL, 10) : 0;
		}
	fclose(f);
	return v;
}

static void say_state(const char *when)
{
	char cg[600] = "", path[700], line[512];
	if (!report)
		return;
	FILE *f = fopen("/proc/self/cgroup", "r");
	if (f != NULL) {
		while (fgets(line, sizeof line, f))
			if (strncmp(line, "0::", 3) == 0) {
				line[strcspn(line, "\n")] = '\0';
				snprintf(cg, sizeof cg, "/sys/fs/cgroup%s", line + 3);
			}
		fclose(f);
	}
	unsigned long long cur, swp, a0, a1;
	snprintf(path, sizeof path, "%s/memory.current", cg);
	cur = file_num(path, "", 1);
	snprintf(path, sizeof path, "%s/memory.swap.current", cg);
	swp = file_num(path, "", 1);
	snprintf(path, sizeof path, "%s/memory.numa_stat", cg);
	a0 = anon_node(path, " N0=");
	a1 = anon_node(path, " N1=");
	snprintf(line, sizeof line,
		 "state %s current %llu swap %llu anon_N0 %llu anon_N1 %llu vmswap %llu vmrss %llu thp %llu\n",
		 when, cur, swp, a0, a1, file_num("/proc/self/status", "VmSwap:", 1024),
		 file_num("/proc/self/status", "VmRSS:", 1024),
		 file_num("/proc/self/smaps_rollup", "AnonHugePages:", 1024));
	say(line);
}

static void usage(void)
{
	say("usage: fairness --mib N [--block-kib K] [--passes P] [--seed S] [--which] [--report]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	long mib = 0, block_kib = 1024, passes = 0;
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	char line[256];

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--which") == 0) {
			say_which_malloc();
			continue;
		}
		if (strcmp(argv[i], "--report") == 0) {
			report = 1;
			continue;
		}
		if (i + 1 >= argc)
			usage();
		if (strcmp(argv[i], "--mib") == 0)
			mib = strtol(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--block-kib") == 0)
			block_kib = strtol(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--passes") == 0)
			passes = strtol(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--seed") == 0)
			seed = strtoull(argv[++i], NULL, 0) | 1;
		else
			usage();
	}
	if (mib <= 0 || block_kib <= 0 || block_kib % 4 != 0 || passes < 0)
		usage();

	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_start;
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_handler = on_stop;
	sigaction(SIGUSR2, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	size_t block = (size_t)block_kib * 1024, words = block / 8;
	size_t nblocks = (size_t)mib * 1024 / (size_t)block_kib;
	uint64_t **blocks = malloc(nblocks * sizeof *blocks);
	if (blocks == NULL) {
		say("fairness: malloc of the block table failed\n");
		return 1;
	}
	double t0 = now_s();
	uint64_t sum = 0, s = seed;
	for (size_t b = 0; b < nblocks; b++) {
		blocks[b] = malloc(block);
		if (blocks[b] == NULL) {
			snprintf(line, sizeof line, "fairness: malloc failed at block %zu\n", b);
			say(line);
			return 1;
		}
		for (size_t w = 0; w < words; w++) {
			uint64_t v = xorshift(&s);
			blocks[b][w] = v;
			sum += v;
		}
	}
	snprintf(line, sizeof line, "filled %ld MiB in %.2f s pid %ld\n", mib, now_s() - t0,
		 (long)getpid());
	say(line);
	say_state("filled");

	if (passes > 0) {
		/* Each pass adds 1 to every word: the sum grows by the word count. */
		for (long p = 0; p < passes; p++) {
			for (size_t b = 0; b < nblocks; b++)
				for (size_t w = 0; w < words; w++)
					blocks[b][w] += 1;
			snprintf(line, sizeof line, "pass%ld", p + 1);
			say_state(line);
		}
		uint64_t got = 0;
		for (size_t b = 0; b < nblocks; b++)
			for (size_t w = 0; w < words; w++)
				got += blocks[b][w];
		uint64_t want = sum + (uint64_t)passes * nblocks * words;
		snprintf(line, sizeof line, "passes %ld over %ld MiB in %.2f s: %s\n", passes, mib,
			 now_s() - t0, got == want ? "ok" : "CORRUPT");
		say(line);
		return got == want ? 0 : 1;
	}

	uint64_t ops = 0;
	double w0 = now_s(), c0 = cpu_s();
	while (!stop_req) {
		if (start_req) {
			start_req = 0;
			ops = 0;
			w0 = now_s();
			c0 = cpu_s();
		}
		for (int k = 0; k < 4096; k++) {
			uint64_t r = xorshift(&s);
			uint64_t *p = &blocks[(r >> 32) % nblocks][(uint32_t)r % words];
			*p = *p * 3 + 1;
		}
		ops += 4096;
	}
	double secs = now_s() - w0, cpu = cpu_s() - c0;
	snprintf(line, sizeof line, "window ops %llu s %.3f ops_per_s %.0f cpu_s %.3f ops_per_cpu_s %.0f\n",
		 (unsigned long long)ops, secs, secs > 0 ? (double)ops / secs : 0.0, cpu,
		 cpu > 0 ? (double)ops / cpu : 0.0);
	say(line);
	return 0;
}
