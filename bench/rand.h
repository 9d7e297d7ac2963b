/* bench/rand.h: the workloads' random numbers (xorshift64*): the same seed
 * gives the same sequence under every allocator, so outputs compare. */
#ifndef BENCH_RAND_H
#define BENCH_RAND_H

#include <stdint.h>

static inline uint64_t next_rand(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1DULL;
}

#endif
