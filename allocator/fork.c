#include "fork.h"

#include <pthread.h>

#include "account.h"
#include "arena.h"
#include "background.h"
#include "budget.h"
#include "chunkmap.h"
#include "hint.h"
#include "jemap.h"
#include "log.h"
#include "site.h"

/* Order: the pins' lock first (tier_pin moves chunks while it holds it, so it
 * takes the chunk map's; nothing takes it while holding another), then the
 * reclaim thread's lock (it takes the others while it does
 * not hold it, never the other way round). The chunk map's fork lock and the budgets' lock are taken from the
 * allocator's slow path (extent hooks) while jemalloc may hold its own locks,
 * and never around the account registry, so they are taken first and
 * released last. No hook holds one while it takes the other (the budgets'
 * is only ever tried). */
static void fork_prepare(void)
{
  tm_hint_prefork();
  tm_background_prefork();
  tm_chunkmap_prefork();
  tm_budget_prefork();
  tm_account_prefork();
  tm_site_prefork();   /* a leaf: nothing is taken while it is held */
}

static void fork_parent(void)
{
  tm_site_postfork_parent();
  tm_account_postfork_parent();
  tm_budget_postfork_parent();
  tm_chunkmap_postfork_parent();
  tm_background_postfork_parent();
  tm_hint_postfork();
}

static void fork_child(void)
{
  tm_site_postfork_child();
  tm_account_postfork_child();
  tm_budget_postfork_child();
  tm_chunkmap_postfork_child();
  tm_jemap_postfork_child();
  tm_arena_postfork_child();
  tm_background_postfork_child();
  tm_hint_postfork();
}

int tm_fork_init(void)
{
  int err = pthread_atfork(fork_prepare, fork_parent, fork_child);
  if (err) tm_warn("cannot register fork handlers (errno %d); a fork child may hang", err);
  return err;
}
