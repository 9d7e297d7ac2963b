/*
 * Counting a process's threads by name (/proc/<pid>/task/<tid>/comm), for
 * tests and test programs that check the library's threads: jemalloc's
 * background threads ("jemalloc_bg_thd"), tiermalloc's thread
 * ("tiermalloc_pub" while it only publishes the live record,
 * "tiermalloc_rcl" once it reclaims).
 */
#ifndef TIERMALLOC_TESTS_THREADNAMES_H
#define TIERMALLOC_TESTS_THREADNAMES_H

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Threads of process pid (0: this one) whose name starts with prefix; -1
 * when /proc cannot be read. A thread names itself when it first runs, so a
 * thread just started may not be counted yet. */
static inline int threadnames_count_of(int pid, const char *prefix)
{
  char task[64];
  if (pid > 0) snprintf(task, sizeof task, "/proc/%d/task", pid);
  else snprintf(task, sizeof task, "/proc/self/task");
  DIR *d = opendir(task);
  if (d == NULL) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char path[400], comm[32] = "";
    snprintf(path, sizeof path, "%s/%s/comm", task, e->d_name);
    int fd = open(path, O_RDONLY);
    if (fd < 0) continue;
    ssize_t r = read(fd, comm, sizeof comm - 1);
    close(fd);
    if (r > 0 && strncmp(comm, prefix, strlen(prefix)) == 0) n++;
  }
  closedir(d);
  return n;
}

static inline int threadnames_count(const char *prefix)
{
  return threadnames_count_of(0, prefix);
}

#endif
