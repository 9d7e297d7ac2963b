/*
 * Process start and exit. Start-up also runs on the first allocation, which
 * may come before this constructor (another library's constructor); the
 * constructor makes sure it has run before main either way. The stats are
 * printed by the destructor, which runs after the program's own exit
 * handlers, so they cover the whole run.
 */
#include "live.h"
#include "shim.h"
#include "stats.h"
#include "thread.h"

__attribute__((constructor(101))) static void tm_shim_init(void)
{
  tm_thread();
  tm_live_init();        /* after start-up, which the line above ran */
  tm_stats_at_start();   /* keeps stderr for the exit stats; a program may close it */
}

__attribute__((destructor(101))) static void tm_shim_exit(void)
{
  tm_stats_at_exit();
  tm_live_at_exit();
}
