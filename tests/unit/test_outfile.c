/*
 * outfile: the rules for every file tiermalloc writes, on real files in a
 * fresh temporary directory. The same rules are checked once through the
 * library in tests/preload (a symlinked stats file) and against a real
 * setuid-root program (secure execution).
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "options.h"
#include "outfile.h"

static char of_dir[64];

static void of_setup(void)
{
  strcpy(of_dir, "/tmp/tm-outfile-XXXXXX");
  cr_assert_not_null(mkdtemp(of_dir), "mkdtemp: %s", strerror(errno));
  tm_options_init_from(NULL, false);
}

static void of_teardown(void)
{
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", of_dir);
  cr_expect_eq(system(cmd), 0);
}

static const char *of_path(const char *name)
{
  static char path[128];
  snprintf(path, sizeof path, "%s/%s", of_dir, name);
  return path;
}

TestSuite(outfile, .init = of_setup, .fini = of_teardown);

Test(outfile, creates_a_private_regular_file_and_appends)
{
  mode_t old = umask(0);   /* the mode must not rely on the caller's umask */
  const char *path = of_path("stats");
  for (int round = 0; round < 2; round++) {
    int fd = -1;
    cr_assert_eq(tm_outfile_open_append(path, &fd), 0);
    cr_assert_eq(write(fd, "ab", 2), 2);
    cr_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC, "close-on-exec");
    cr_assert_not(fcntl(fd, F_GETFL) & O_NONBLOCK, "left non-blocking");
    close(fd);
  }
  umask(old);
  struct stat st;
  cr_assert_eq(stat(path, &st), 0);
  cr_assert_eq(st.st_mode & 07777, 0600, "created with mode %o", st.st_mode & 07777);
  cr_assert_eq(st.st_size, 4, "appended: size %lld", (long long)st.st_size);
}

Test(outfile, refuses_a_symlink_and_leaves_its_target_alone)
{
  char target[128];
  snprintf(target, sizeof target, "%s", of_path("target"));
  cr_assert_eq(symlink(target, of_path("link")), 0);
  int fd = -1;
  cr_assert_eq(tm_outfile_open_append(of_path("link"), &fd), ELOOP);
  cr_assert_eq(fd, -1);
  cr_assert_eq(access(target, F_OK), -1, "the symlink's target was created");
}

Test(outfile, refuses_what_is_not_a_regular_file_without_blocking)
{
  cr_assert_eq(mkfifo(of_path("fifo"), 0600), 0);
  int fd = -1;
  cr_assert_eq(tm_outfile_open_append(of_path("fifo"), &fd), ENXIO,   /* no reader: open says so */
               "a FIFO with no reader");
  int reader = open(of_path("fifo"), O_RDONLY | O_NONBLOCK);
  cr_assert_geq(reader, 0);
  cr_assert_eq(tm_outfile_open_append(of_path("fifo"), &fd), EINVAL, "a FIFO with a reader");
  close(reader);
  cr_assert_eq(tm_outfile_open_append(of_dir, &fd), EISDIR, "a directory");
  cr_assert_eq(tm_outfile_open_append("/dev/null", &fd), EINVAL, "a device");
  cr_assert_eq(fd, -1);
}

Test(outfile, opens_nothing_in_secure_execution)
{
  char *env[] = {NULL};
  tm_options_init_from(env, true);
  int fd = -1;
  cr_assert_eq(tm_outfile_open_append(of_path("stats"), &fd), EPERM);
  cr_assert_eq(access(of_path("stats"), F_OK), -1, "created in secure execution");
  cr_assert_str_eq(tm_outfile_strerror(EPERM), "not written in secure execution");
  cr_assert_str_eq(tm_outfile_strerror(ELOOP), "is a symbolic link");
}
