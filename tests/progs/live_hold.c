/* Holds memory while tierctl looks at it: allocates MIB MiB in 1 MiB blocks
 * (argv[1]), writes every page, then creates the file READY (argv[3]) and
 * sleeps SECONDS (argv[2]) before freeing it all and exiting 0.
 * MODE (argv[4]):
 *   publish: calls tier_stats_publish (found with dlsym: the library is
 *            preloaded) just before READY, so the record is current;
 *   fork:    a child allocates 16 MiB, publishes, writes its pid into
 *            READY.child and sleeps as long; the parent waits for it;
 *   tier1:   every other block comes from tier 1 (tier_malloc, found with
 *            dlsym), so the heap is on two tiers where there are two;
 *   undumpable: makes itself not dumpable (PR_SET_DUMPABLE 0) before READY:
 *            its /proc files are then root's, as a setuid program's are;
 *   trickle: instead of 1 MiB blocks, 16 KiB ones, all 1.2 s after start-up
 *            (a small program that allocates after its first second, from
 *            memory start-up committed).
 * It calls no allocator function between READY and its end. */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static void publish(void)
{
  int (*fn)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "tier_stats_publish");
  if (fn == NULL || fn() != 0) fprintf(stderr, "live_hold: tier_stats_publish failed\n");
}

static void *(*tier1_malloc)(size_t, int);

static char **hold(long mib)
{
  char **blocks = calloc((size_t)mib + 1, sizeof *blocks);
  for (long i = 0; blocks && i < mib; i++) {
    blocks[i] = tier1_malloc && i % 2 ? tier1_malloc(1 << 20, 1) : malloc(1 << 20);
    if (blocks[i]) memset(blocks[i], (int)i, 1 << 20);
  }
  return blocks;
}

static void mark(const char *path, const char *text)
{
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    if (write(fd, text, strlen(text)) < 0) perror("write");
    close(fd);
  }
}

int main(int argc, char **argv)
{
  if (argc < 4) {
    fprintf(stderr, "usage: live_hold MIB SECONDS READY [publish|fork]\n");
    return 2;
  }
  long mib = atol(argv[1]);
  unsigned secs = (unsigned)atoi(argv[2]);
  const char *mode = argc > 4 ? argv[4] : "";
  if (strcmp(mode, "tier1") == 0) tier1_malloc = (void *(*)(size_t, int))dlsym(RTLD_DEFAULT, "tier_malloc");
  char **blocks = NULL;
  if (strcmp(mode, "trickle") == 0) {
    long n = mib * 64;
    blocks = calloc((size_t)n + 1, sizeof *blocks);
    for (long i = 0; blocks && i < n; i++) {
      if (i == 0) usleep(1200 * 1000);
      blocks[i] = malloc(16 << 10);
      if (blocks[i]) memset(blocks[i], (int)i, 16 << 10);
    }
    mib = n;   /* blocks to free */
  } else {
    blocks = hold(mib);
  }
  pid_t child = -1;
  if (strcmp(mode, "fork") == 0) {
    child = fork();
    if (child == 0) {
      char **mine = hold(16);
      publish();
      char path[4096], pid[32];
      snprintf(path, sizeof path, "%s.child", argv[3]);
      snprintf(pid, sizeof pid, "%d\n", (int)getpid());
      mark(path, pid);
      sleep(secs);
      for (long i = 0; i < 16; i++) free(mine[i]);
      free(mine);
      return 0;
    }
  }
  if (strcmp(mode, "publish") == 0 || child > 0) publish();
  if (strcmp(mode, "undumpable") == 0) prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  mark(argv[3], "ready\n");
  sleep(secs);
  if (child > 0) waitpid(child, NULL, 0);
  for (long i = 0; blocks && i < mib; i++) free(blocks[i]);
  free(blocks);
  return 0;
}
