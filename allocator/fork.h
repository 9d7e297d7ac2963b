/*
 * fork: the one owner of fork handling. Registers a single set of
 * pthread_atfork handlers that call each module's own, in a fixed order, as
 * jemalloc_prefork does: before the fork every lock the child would need is
 * taken (so no other thread holds it mid-update), after it the parent
 * releases them in reverse order and the child re-initialises them, drops
 * the threads it did not inherit, and restarts nothing eagerly (the
 * library's threads start again with the child's next thread).
 * A module with a lock or a thread adds its handlers here, nowhere else.
 */
#ifndef TM_FORK_H
#define TM_FORK_H

/* Once, at start-up. 0 or a positive errno (then a fork child may find a
 * lock held by a thread it does not have). */
int tm_fork_init(void);

#endif
