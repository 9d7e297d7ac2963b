/*
 * outfile: the one way tiermalloc opens a file to write (the exit stats,
 * the live record). A path from the environment is a path
 * from a user who may be less privileged than the process, so every file the
 * library writes goes through here.
 */
#ifndef TM_OUTFILE_H
#define TM_OUTFILE_H

#include <stdbool.h>

/* Opens path for appending, creating it when absent, into *fd (O_CLOEXEC).
 * Returns 0 or a positive errno, never prints:
 *   EPERM   in secure execution (tm_options_secure()): nothing is opened;
 *   ELOOP   the last component is a symbolic link (O_NOFOLLOW);
 *   EINVAL  not a regular file (a FIFO, a device, a directory...); opened
 *           non-blocking first, so a FIFO without a reader cannot hang exit;
 *   others  from open(2).
 * A file it creates has mode 0600 (the umask can only narrow it): the stats
 * describe the process and are no one else's to read or change. */
int tm_outfile_open_append(const char *path, int *fd);

/* Creates path anew for reading and writing into *fd (O_CLOEXEC), mode 0600,
 * with O_EXCL and O_NOFOLLOW, so it never opens a file or a link someone
 * else put there. A file already there is removed first when `replace` (a
 * leftover of an earlier process of the same pid; the directory's sticky
 * bit lets only its owner, or root, remove it). Returns 0 or a positive
 * errno, never prints: EPERM in secure execution; EEXIST when the name is
 * taken and could not be removed; others from open(2). */
int tm_outfile_create(const char *path, bool replace, int *fd);

/* A short phrase for an error of tm_outfile_open_append, for a warning. */
const char *tm_outfile_strerror(int err);

#endif
