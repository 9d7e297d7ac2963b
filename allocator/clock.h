/*
 * clock: a clock's time in nanoseconds, the one helper every module reads
 * time with (clock_gettime through the vDSO: no syscall, no lock).
 */
#ifndef TM_CLOCK_H
#define TM_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t tm_clock_ns(clockid_t id)
{
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
