# Test binaries (Criterion):
#   build/tests/unit  tests/unit/*.c against the internal objects (glibc malloc)
#   build/tests/lib   tests/lib/*.c and tests/preload/*.c, linked to libtiermalloc.so
#   build/tests/progs/*  helper programs the preload tests run (tests/progs/*.c, *.cc)
# The VM tests are in tests/vm/vm.mk.

CRIT_LIBS  := -lcriterion
TEST_FLAGS := $(CFLAGS) -std=gnu11 $(WARN) -Iinclude -Iallocator -Itests -D_GNU_SOURCE -pthread

UNIT_SRC   := $(sort $(wildcard tests/unit/*.c))
LIB_SRC    := $(sort $(wildcard tests/lib/*.c tests/preload/*.c))
PROG_C     := $(sort $(wildcard tests/progs/*.c))
PROG_CC    := $(sort $(wildcard tests/progs/*.cc))
PROGS      := $(PROG_C:tests/progs/%.c=$(B)/tests/progs/%) $(PROG_CC:tests/progs/%.cc=$(B)/tests/progs/%)

.PHONY: test test-layers test-unit test-lib
$(B)/tests/unit: $(UNIT_SRC) $(B)/libtm_internal.a $(B)/jemalloc/libtmje.a $(wildcard tests/*.h)
	@mkdir -p $(@D)
	$(CC) $(TEST_FLAGS) -o $@ $(UNIT_SRC) $(B)/libtm_internal.a $(B)/jemalloc/libtmje.a $(CRIT_LIBS) $(LIBS)

$(B)/tests/lib: $(LIB_SRC) $(B)/libtiermalloc.so $(wildcard tests/*.h)
	@mkdir -p $(@D)
	$(CC) $(TEST_FLAGS) -o $@ $(LIB_SRC) -L$(B) -ltiermalloc -Wl,-rpath,'$$ORIGIN/..' $(CRIT_LIBS) $(LIBS)

$(B)/tests/progs/%: tests/progs/%.c
	@mkdir -p $(@D)
	$(CC) $(TEST_FLAGS) -o $@ $< $(LIBS)

$(B)/tests/progs/%: tests/progs/%.cc
	@mkdir -p $(@D)
	$(CXX) -O2 -g -Wall -pthread -o $@ $<

# allocator/ includes no shim header, and its modules include each other in
# no circle (mk/layers.py).
test-layers:
	python3 mk/layers.py

test-unit: $(B)/tests/unit
	$(B)/tests/unit --jobs 2

test-lib: $(B)/tests/lib $(PROGS) $(B)/tierctl
	$(B)/tests/lib --jobs 2
# docs/: the example files parse, the textfile script writes valid exposition
# format, and so does tierctl with a live process.
test-docs: $(B)/libtiermalloc.so $(B)/tierctl
	python3 tests/docs/check.py --live

# make test: everything, in order; a failure anywhere fails it.
test: deps
	$(MAKE) all
	$(MAKE) test-layers
	$(MAKE) test-unit
	$(MAKE) test-lib
	$(MAKE) test-docs
	$(MAKE) test-vm
