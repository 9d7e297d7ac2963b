#include "thread.h"

#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <sys/prctl.h>

#include "arena.h"
#include "background.h"
#include "je.h"
#include "startup.h"

static pthread_once_t thread_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t thread_key;
static bool thread_key_ok;

/* Thread exit: the TLS block is freed after the key destructors, so the
 * thread must leave the registry here. Calls it makes later are "late". */
static void thread_exit(void *arg)
{
  tm_thread_t *t = arg;
  tm_arena_thread_exit(t);
  bool last = tm_account_unregister(t);
  t->state = TM_THREAD_DEAD;
  if (last) tm_background_no_thread_left();
}

static void thread_key_create(void)
{
  thread_key_ok = pthread_key_create(&thread_key, thread_exit) == 0;
}

/* jemalloc names its background threads first thing. Their first thread
 * registers here when it starts the others (glibc's pthread_create callocs
 * the new thread's TLS vector); they are not the program's threads. Nor is
 * the library's thread, which should never get here (it does not allocate). */
static bool thread_is_internal(void)
{
  char name[16] = "";
  return prctl(PR_GET_NAME, name) == 0 &&
         (strcmp(name, "jemalloc_bg_thd") == 0 || strcmp(name, TM_RECLAIM_THREAD_NAME) == 0 ||
          strcmp(name, TM_PUBLISH_THREAD_NAME) == 0);
}

tm_thread_t *tm_thread_prepare(void)
{
  tm_thread_t *t = &tm_tls;
  if (t->state != TM_THREAD_NEW) return t->state == TM_THREAD_READY ? t : NULL;
  t->state = TM_THREAD_BUSY;
  if (tm_start() != 0) {
    /* Start-up is running on another path of this thread (a nested call). */
    t->state = TM_THREAD_NEW;
    return NULL;
  }
  pthread_once(&thread_key_once, thread_key_create);
  t->internal = thread_is_internal();
  if (!t->internal) tm_arena_thread_bind();
  size_t sz = sizeof(t->allocp);
  if (tmje_mallctl("thread.allocatedp", (void *)&t->allocp, &sz, NULL, 0) != 0 ||
      tmje_mallctl("thread.deallocatedp", (void *)&t->deallocp, &sz, NULL, 0) != 0) {
    t->state = TM_THREAD_DEAD;   /* jemalloc without stats: count everything late */
    return NULL;
  }
  if (tm_account_register(t)) tm_background_second_thread();
  /* May allocate (keys >= 32): the runs are open and the thread registered,
   * so a nested malloc/free counts normally. */
  if (thread_key_ok) pthread_setspecific(thread_key, t);
  t->state = TM_THREAD_READY;
  return t;
}
