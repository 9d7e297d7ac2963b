/*
 * hint: what the program says about its own memory (tier_hint, tier_pin and
 * tier_unpin of include/tiermalloc.h), applied to the 2 MiB chunks a range
 * touches.
 *
 *   hot     each chunk the range touches is young now (hotness.h): demoted
 *           last, and promoted with the accessed bits;
 *   cold    each chunk wholly inside the range is as old as can be: demoted
 *           (or paged out) first; the accessed bits make it young again at
 *           its next use;
 *   pin     each chunk the range touches is moved to tier 0 now, if it is
 *           not there (or by reclaim's next pass, when a move of its own
 *           held the chunk), and reclaim never moves it down nor pages it
 *           out, till unpinned. Pins are counted in whole chunks against tier 0's min:
 *           a pin that would take them past it is refused (ENOSPC) and
 *           changes nothing. A chunk is pinned or not: unpinning a range
 *           unpins every chunk it touches, even one another pin shares.
 *
 * Errors follow include/tiermalloc.h: 0 or a positive errno; EINVAL for a
 * range tiermalloc does not place (or a zero length, or an unknown hint).
 */
#ifndef TM_HINT_H
#define TM_HINT_H

#include <stddef.h>

int tm_hint(const void *p, size_t len, int hint);
int tm_pin(const void *p, size_t len);
int tm_unpin(const void *p, size_t len);

/* Bytes pinned now (whole chunks). */
size_t tm_pinned(void);

/* Fork (fork.c): the pins' lock is held across it, and released on both
 * sides (in the child by the thread that forked, which took it). */
void tm_hint_prefork(void);
void tm_hint_postfork(void);

#endif
