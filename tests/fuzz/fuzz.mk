# tests/fuzz/fuzz.mk: included by the top-level Makefile. Not part of
# `make test` (fuzzing runs for a time, not to a verdict).
#
# `make fuzz` builds a libFuzzer harness for each parser of outside input,
# with AddressSanitizer and UBSan, and runs each for FUZZ_SECONDS (default 60):
#   options   tm_option_parse (TIERMALLOC_* values), every option id
#   nodelist  tm_nodelist_parse / tm_nodelist_format (sysfs nodelists)
#   topology  tm_topology_discover with TIERMALLOC_TIERS as the input
#   resident  tm_resident_measure on numa_maps text
#   cgroup    tm_cgroup_read on a temporary tree (/proc/self/cgroup, mountinfo,
#             memory.* value files) written from the input
# Each compares the parser with a small reference model written from its
# header, besides catching crashes and hangs. Installs clang and its fuzzer
# runtime first when they are missing (fuzz-deps). Seeds are in
# tests/fuzz/seeds/<name>/; the corpus grows in build/fuzz/corpus-<name>/;
# a finding is written to build/fuzz/ as crash-* or timeout-*.

FUZZ_SECONDS ?= 60
FUZZ_CC      ?= clang
FUZZ_CFLAGS  := -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
                -std=gnu11 -D_GNU_SOURCE -Iinclude -Iallocator -Itests/fuzz
FUZZ_NAMES   := options nodelist topology resident cgroup
FUZZ_SRC_options  := allocator/options.c tests/fuzz/log_quiet.c
FUZZ_SRC_nodelist := allocator/nodemask.c allocator/text.c tests/fuzz/log_quiet.c
FUZZ_SRC_topology := allocator/topology.c allocator/kfile.c allocator/nodemask.c allocator/text.c tests/fuzz/log_quiet.c
FUZZ_SRC_resident := allocator/resident.c
FUZZ_SRC_cgroup   := allocator/cgroup.c allocator/kfile.c allocator/nodemask.c allocator/text.c tests/fuzz/log_quiet.c
FUZZ_ARGS_options  := -dict=tests/fuzz/options.dict
FUZZ_ARGS_resident := -dict=tests/fuzz/resident.dict -max_len=40000
FUZZ_ARGS_cgroup   := -dict=tests/fuzz/cgroup.dict -max_len=4096

.PHONY: fuzz fuzz-deps
fuzz-deps:
	@sh mk/deps.sh clang libclang-rt-14-dev

$(foreach n,$(FUZZ_NAMES),$(eval $(B)/fuzz/fuzz_$(n): $(FUZZ_SRC_$(n))))
$(B)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h tests/fuzz/nodemask_ref.h $(wildcard allocator/*.h include/*.h) | fuzz-deps
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $< $(FUZZ_SRC_$*)

fuzz: $(FUZZ_NAMES:%=$(B)/fuzz/fuzz_%)
	@for n in $(FUZZ_NAMES); do \
	  mkdir -p $(B)/fuzz/corpus-$$n; \
	  case $$n in options) a='$(FUZZ_ARGS_options)';; resident) a='$(FUZZ_ARGS_resident)';; cgroup) a='$(FUZZ_ARGS_cgroup)';; *) a='';; esac; \
	  if $(B)/fuzz/fuzz_$$n -max_total_time=$(FUZZ_SECONDS) -timeout=5 -print_final_stats=1 \
	       -artifact_prefix=$(B)/fuzz/ $$a $(B)/fuzz/corpus-$$n tests/fuzz/seeds/$$n > $(B)/fuzz/$$n.log 2>&1; then \
	    echo "fuzz: $$n: $$(grep -m1 -o 'number_of_executed_units: *[0-9]*' $(B)/fuzz/$$n.log | grep -o '[0-9]*$$') runs in $(FUZZ_SECONDS) s, no finding"; \
	  else \
	    grep -E 'FUZZ FAILURE|ERROR|SUMMARY|Test unit written' $(B)/fuzz/$$n.log; \
	    echo "fuzz: $$n: FINDING (log: $(B)/fuzz/$$n.log)"; exit 1; \
	  fi; \
	done
