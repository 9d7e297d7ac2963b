/*
 * Temporary fixture trees for unit tests that need a variant of a captured
 * tree (another value, a missing or broken file): a copy under /tmp that the
 * test edits, never the fixtures themselves. One tree per test, made by
 * tmptree_make and removed by tmptree_cleanup (a .fini). Paths are relative
 * to the tree's root, which mirrors absolute paths as the fixtures do.
 */
#ifndef TIERMALLOC_TESTS_TMPTREE_H
#define TIERMALLOC_TESTS_TMPTREE_H

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TMPTREE_FIXTURES "tests/fixtures"

static char tmptree[64];

/* A fresh tree, a copy of tests/fixtures/<copy_of> (NULL: empty). */
static inline void tmptree_make(const char *copy_of)
{
  strcpy(tmptree, "/tmp/tm-tree-XXXXXX");
  cr_assert_not_null(mkdtemp(tmptree));
  if (copy_of) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "cp -R %s/%s/. %s", TMPTREE_FIXTURES, copy_of, tmptree);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
  }
}

static inline void tmptree_cleanup(void)
{
  if (!tmptree[0]) return;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmptree);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmptree);
}

/* <tree>/rel (a static buffer), for messages and checks. */
static inline const char *tmptree_path(const char *rel)
{
  static char path[512];
  snprintf(path, sizeof path, "%s/%s", tmptree, rel);
  return path;
}

/* Writes rel, creating its directories and replacing any copied (read-only)
 * file. */
static inline void tmptree_put(const char *rel, const char *content)
{
  char path[512];
  snprintf(path, sizeof path, "%s/%s", tmptree, rel);
  for (char *p = path + strlen(tmptree) + 1; (p = strchr(p, '/')); p++) {
    *p = '\0';
    mkdir(path, 0755);
    *p = '/';
  }
  unlink(path);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  cr_assert_geq(fd, 0, "open %s", path);
  cr_assert_eq(write(fd, content, strlen(content)), (ssize_t)strlen(content));
  close(fd);
}

/* Removes rel, a file or a whole directory. */
static inline void tmptree_rm(const char *rel)
{
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s/%s'", tmptree, rel);
  cr_assert_eq(system(cmd), 0, "%s", cmd);
}

#endif
