#include "outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "options.h"

int tm_outfile_open_append(const char *path, int *fd)
{
  if (tm_options_secure()) return EPERM;
  int f = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
               S_IRUSR | S_IWUSR);
  if (f < 0) return errno;
  struct stat st;
  int err = fstat(f, &st) != 0 ? errno : !S_ISREG(st.st_mode) ? EINVAL : 0;
  if (err != 0) {
    close(f);
    return err;
  }
  /* Blocking again, so a write to a full disk or a slow file system waits as
   * a plain write would instead of failing short with EAGAIN. */
  int flags = fcntl(f, F_GETFL);
  if (flags >= 0) fcntl(f, F_SETFL, flags & ~O_NONBLOCK);
  *fd = f;
  return 0;
}

int tm_outfile_create(const char *path, bool replace, int *fd)
{
  if (tm_options_secure()) return EPERM;
  const int flags = O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC;
  int f = open(path, flags, S_IRUSR | S_IWUSR);
  if (f < 0 && errno == EEXIST && replace) {
    if (unlink(path) != 0) return EEXIST;
    f = open(path, flags, S_IRUSR | S_IWUSR);
  }
  if (f < 0) return errno;
  *fd = f;
  return 0;
}

const char *tm_outfile_strerror(int err)
{
  switch (err) {
  case EPERM:  return "not written in secure execution";
  case ELOOP:  return "is a symbolic link";
  case EINVAL: return "is not a regular file";
  default: {
    /* Untranslated and allocation-free, unlike strerror. */
    const char *desc = strerrordesc_np(err);
    return desc != NULL ? desc : "cannot be opened";
  }
  }
}
