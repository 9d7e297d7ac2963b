/*
 * cgroup: the memory limits of the process's cgroup, as the kernel states
 * them. It reads; what the limits mean for each tier is budget's business.
 *
 * Where:  <root>/proc/self/cgroup names the process's cgroup ("0::/app/worker"
 *         on v2; "4:memory:/jobs/app" on v1), and <root>/proc/self/mountinfo
 *         where that hierarchy is mounted (fstype cgroup2; or cgroup with the
 *         memory super option). The cgroup's directory is the mount point
 *         plus the cgroup path less the mount's own root (field 4).
 * Which:  v2 when the process's v2 cgroup directory has memory.max or
 *         memory.high (the memory controller is enabled there); else v1 when
 *         a v1 memory hierarchy is mounted; else none. A hybrid host (v2
 *         mounted at /sys/fs/cgroup/unified, memory on v1) is v1.
 * Values: v2: memory.{min,low,high,max}; "max" is unlimited. v1:
 *         memory.limit_in_bytes as max and memory.soft_limit_in_bytes as high
 *         (values of 2^62 and more are v1's "unlimited"); min and low are 0.
 *         The proposal's memory.toptier_{min,low,high,max}, where present.
 * Ancestors: every limit is the smallest of the cgroup's own value and every
 *         ancestor's up to the mount's root (a child cannot exceed its
 *         parent's max or high, nor be protected more than its parent), and
 *         *_from names the cgroup whose value won. A directory without the
 *         file (the root cgroup has no memory.max) limits nothing.
 * Errors: a file that exists but cannot be read or parsed (no permission,
 *         garbage, a cgroup removed while the process runs) gets one warning
 *         line naming it and what was wrong, and limits nothing; absence is
 *         silent. Never aborts.
 * Never allocates (it runs while malloc initialises, and again at run time
 * from the allocator's slow path): stack buffers and kfile only.
 */
#ifndef TM_CGROUP_H
#define TM_CGROUP_H

#include <stdbool.h>
#include <stdint.h>

#include "kfile.h"

#define TM_CGROUP_UNLIMITED UINT64_MAX
#define TM_CGROUP_PATH_MAX 256

typedef enum tm_cgroup_version_e {
  TM_CGROUP_NONE = 0,   /* no memory controller found: no limits */
  TM_CGROUP_V2,
  TM_CGROUP_V1,
} tm_cgroup_version_t;

/* The four limits, in the order min, low, high, max. */
enum { TM_LIMIT_MIN, TM_LIMIT_LOW, TM_LIMIT_HIGH, TM_LIMIT_MAX, TM_LIMIT_COUNT };

typedef struct tm_cgroup_limits_s {
  tm_cgroup_version_t version;
  char path[TM_CGROUP_PATH_MAX];   /* the process's cgroup ("/app/worker"); "" when none */
  char dir[TM_KFILE_PATH_MAX];     /* its directory, root included; "" when none */
  /* memory.{min,low,high,max} (v1: 0, 0, soft limit, limit) with ancestors
   * applied; TM_CGROUP_UNLIMITED when nothing limits. */
  uint64_t limit[TM_LIMIT_COUNT];
  /* The cgroup whose value is limit[i] ("/app"); "" when unlimited. */
  char from[TM_LIMIT_COUNT][TM_CGROUP_PATH_MAX];
  /* memory.toptier_{min,low,high,max}, with ancestors applied; has_toptier[i]
   * is false when no cgroup on the path has that file. */
  bool has_toptier[TM_LIMIT_COUNT];
  uint64_t toptier[TM_LIMIT_COUNT];
} tm_cgroup_limits_t;

/* Fills *out for the process whose /proc/self lies under root ("" for the
 * running system, or a fixture tree). Always fills it (version NONE and
 * every limit unlimited when nothing is found); returns 0, or a positive
 * errno when a cgroup was found but its directory could not be read. */
int tm_cgroup_read(const char *root, tm_cgroup_limits_t *out);

/* Parses the n bytes of a value file: digits, or on v2 "max", then exactly
 * one '\n'. NULL with *v set (TM_CGROUP_UNLIMITED for "max" and for v1's
 * unlimited), or a phrase saying what is wrong. Pure. */
const char *tm_cgroup_parse_value(const char *buf, int n, bool v1, uint64_t *v);

/* "cgroup v2", "cgroup v1" or "no cgroup". */
const char *tm_cgroup_version_name(tm_cgroup_version_t v);

#endif
