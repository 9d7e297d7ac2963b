/*
 * Counting a process's own threads by name (/proc/self/task/<tid>/comm), for
 * tests and test programs that check the library's threads: jemalloc's
 * background threads ("jemalloc_bg_thd"), the reclaim thread
 * ("tiermalloc_rcl").
 */
#ifndef TIERMALLOC_TESTS_THREADNAMES_H
#define TIERMALLOC_TESTS_THREADNAMES_H

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Threads of this process whose name starts with prefix; -1 when /proc
 * cannot be read. A thread names itself when it first runs, so a thread
 * just started may not be counted yet. */
static inline int threadnames_count(const char *prefix)
{
  DIR *d = opendir("/proc/self/task");
  if (d == NULL) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char path[300], comm[32] = "";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    int fd = open(path, O_RDONLY);
    if (fd < 0) continue;
    ssize_t r = read(fd, comm, sizeof comm - 1);
    close(fd);
    if (r > 0 && strncmp(comm, prefix, strlen(prefix)) == 0) n++;
  }
  closedir(d);
  return n;
}

#endif
