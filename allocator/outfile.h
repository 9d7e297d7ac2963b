/*
 * outfile: the one way tiermalloc opens a file to write (the exit stats now;
 * the published stats record later). A path from the environment is a path
 * from a user who may be less privileged than the process, so every file the
 * library writes goes through here.
 */
#ifndef TM_OUTFILE_H
#define TM_OUTFILE_H

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

/* A short phrase for an error of tm_outfile_open_append, for a warning. */
const char *tm_outfile_strerror(int err);

#endif
