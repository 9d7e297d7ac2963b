# bench/bench.mk: included by the top-level Makefile (which defines B, CC,
# CFLAGS). `make bench` builds the workloads into $(B)/bench/ and runs
# bench/run, which times them under glibc, jemalloc, memtier and tiermalloc.
# It does not build the library: run `make` first (bench/run marks
# tiermalloc missing when $(B)/libtiermalloc.so is absent, and warns when it is
# older than the sources). BENCH_ROUNDS=N sets the rounds; BENCH_ARGS passes
# more options to bench/run (see bench/README.md). `make bench-instructions`
# runs bench/instructions (callgrind instruction counts per allocator);
# `make bench-alloctime` runs bench/alloctime (perf-sampled time per allocator).

BENCH_CFLAGS := $(CFLAGS) -std=gnu11 -Wall -Wextra -pthread
BENCH_PROGS  := $(B)/bench/pairloop $(B)/bench/churn $(B)/bench/stress $(B)/bench/timeit

.PHONY: bench bench-readme bench-progs bench-instructions bench-alloctime bench-reclaim
bench-progs: $(BENCH_PROGS)

$(B)/bench/%: bench/%.c bench/out.h bench/rand.h bench/bench.mk
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) -o $@ $< -ldl

# The allocators users pick for speed, compared too (Debian packages).
BENCH_PKGS := libmimalloc2.0 libtcmalloc-minimal4 libjemalloc2 libmemkind0 gnuplot-nox sqlite3

# QUICK=1: the same in at most 5 minutes on 2 cores (5 rounds, smaller
# workloads, no idle RSS). Writes bench/results/latest.{md,csv} and
# latest-ratios.png; `make bench-readme` puts the CSV's table in the README.
bench: $(BENCH_PROGS) $(B)/tests/progs/idle
	@sh mk/deps.sh $(BENCH_PKGS)
	bench/run --bin $(B)/bench --lib $(B)/libtiermalloc.so $(if $(QUICK),--quick) $(BENCH_ARGS)

bench-readme:
	bench/table bench/results/latest.csv --readme README.md

# Instructions executed inside each allocator on the real programs
# (callgrind; deterministic, one run each, a few minutes). Needs valgrind.
bench-instructions:
	bench/instructions --lib $(B)/libtiermalloc.so $(BENCH_INSTRUCTIONS_ARGS)

# CPU time inside each allocator on the real programs (perf's cpu-clock
# samples, interleaved rounds, a few minutes). Needs perf (linux-perf).
bench-alloctime:
	bench/alloctime --lib $(B)/libtiermalloc.so $(BENCH_ALLOCTIME_ARGS)

# Reclaim benchmarks of issue 10 in the tiered VM (bench/reclaim-vm, one boot
# of tests/vm/run --topology 2tier, about 4 minutes): malloc/free latency
# percentiles with reclaim idle and demoting (and under glibc and Debian's
# jemalloc), time back under high after a 64 MiB burst, demotion against
# move_pages(2), reclaim CPU per GiB. Writes bench/results/reclaim.md. Like
# `make bench`, it does not rebuild the library: run `make` first.
# reclaim-tm links libtiermalloc.so; reclaim-plain links no allocator (glibc,
# or Debian's jemalloc preloaded).
# It reads its live record with liverec.c's seqlock reader, compiled in.
$(B)/bench/reclaim-tm: bench/reclaim.c allocator/liverec.c allocator/liverec.h include/tiermalloc.h bench/bench.mk
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) -Iinclude -Iallocator -o $@ $< allocator/liverec.c -L$(B) -ltiermalloc -Wl,-rpath,$(abspath $(B)) -lnuma -ldl

$(B)/bench/reclaim-plain: bench/reclaim.c bench/bench.mk
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) -DRECLAIM_PLAIN -o $@ $< -lnuma -ldl

bench-reclaim: $(B)/bench/reclaim-tm $(B)/bench/reclaim-plain
	bench/reclaim-vm --bin $(B)/bench --lib $(B)/libtiermalloc.so $(BENCH_RECLAIM_ARGS)

# Fairness and the kernel's failure case in the tiered VM (bench/fairness:
# one tests/vm/run --topology 2tier boot per case, about 8 minutes): two
# identical workloads in two cgroups under first touch, the kernel's tiering
# and tiermalloc; a 192 MiB program under memory.high=128M and under
# memory.max=200M without swap. Writes bench/results/fairness.md and
# fairness-log.txt. Does not rebuild the library: run `make` first.
.PHONY: bench-fairness
bench-fairness: $(B)/bench/fairness
	bench/fairness --bin $(B)/bench/fairness --lib $(B)/libtiermalloc.so $(BENCH_FAIRNESS_ARGS)

# What each unprivileged access-tracking source sees (issue 17): bench/hotsrc.c
# natively and in the 2tier VM, about 3 minutes. Writes
# bench/results/hotness.md. Needs no tiermalloc.
.PHONY: bench-hotness
$(B)/bench/hotsrc: bench/hotsrc.c bench/bench.mk
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) -o $@ $< -lnuma

bench-hotness: $(B)/bench/hotsrc
	bench/hotness

# Pieces of a chunk told hot and moved on their own (issue 17, finer than a
# chunk): bench/pieces.c in the 2tier VM, about 2 minutes. Writes
# bench/results/pieces.md. Needs no tiermalloc.
.PHONY: bench-pieces
$(B)/bench/pieces: bench/pieces.c bench/bench.mk
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) -o $@ $< -lpthread

bench-pieces: $(B)/bench/pieces
	bench/pieces-vm

# Tier quality (issue 17): bench/tierq.c, a zipfian workload over a 512 MiB
# heap of mixed sizes, under top-tier budgets of 10, 25 and 50 %, placed by
# first touch, weighted interleave, memkind's memtier, the kernel's tiering,
# and tiermalloc with each hotness source, against the oracle; in the 2tier
# VM, about 35 minutes. Writes bench/results/tier-quality.md. Does not
# rebuild the library: run `make` first.
.PHONY: bench-tier-quality
$(B)/bench/tierq: bench/tierq.c bench/bench.mk
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) -o $@ $< -lm

bench-tier-quality: $(B)/bench/tierq
	bench/tier-quality

# bench/numab-probe's baseline: the kernel's NUMA balancing alone on the same
# heap shape (a guest program; bench/numab-probe ALONE=1 runs it).
$(B)/bench/numab-alone: bench/numab-alone.c bench/bench.mk
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) -o $@ $< -lnuma -lpthread

# What allocation-site placement (TIERMALLOC_SITES) costs pairloop and churn,
# sites off against on, in the 2tier VM (sites need two tiers, the accessed
# bits and a budget), about 5 minutes. Writes bench/results/site-cost.md.
# Does not rebuild the library: run `make` first.
.PHONY: bench-site-cost
bench-site-cost: $(BENCH_PROGS)
	bench/site-cost
