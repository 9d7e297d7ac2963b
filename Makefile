# tiermalloc: `make` builds build/libtiermalloc.so; `make test` runs every test;
# `make demo` runs a real program under a top-tier budget. See README.md.

CC        ?= gcc
CXX       ?= g++
PREFIX    ?= /usr/local
B         := build
MULTIARCH := $(shell $(CC) -print-multiarch)
JE_PIC    := $(shell $(CC) -print-file-name=libjemalloc_pic.a)

# The Debian packages a build and a test run need (make deps installs missing ones).
DEB_PKGS  := gcc g++ make pkg-config binutils libjemalloc-dev libjemalloc2 libnuma-dev \
             libunwind-dev libcriterion-dev libmemkind0 python3 perl sqlite3 bind9-utils \
             qemu-system-x86 busybox-static xz-utils cpio kmod gnuplot-nox tmux python3-yaml prometheus

WARN      := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wno-unused-parameter
CFLAGS    ?= -O2 -g
TM_CFLAGS := $(CFLAGS) -std=gnu11 -fPIC $(WARN) -Iinclude -Iallocator \
             -fvisibility=hidden -ftls-model=initial-exec -fno-plt -pthread \
             -D_GNU_SOURCE
LIBS      := -lnuma -lunwind -lpthread -ldl -lm

ALLOC_SRC := $(sort $(wildcard allocator/*.c))
SHIM_SRC  := $(sort $(wildcard shim/*.c))
ALLOC_OBJ := $(ALLOC_SRC:%.c=$(B)/%.o)
SHIM_OBJ  := $(SHIM_SRC:%.c=$(B)/%.o)
DEPS      := $(ALLOC_OBJ:.o=.d) $(SHIM_OBJ:.o=.d)

.PHONY: all deps install demo test test-unit test-docs clean
all: $(B)/libtiermalloc.so $(B)/tierctl

# ---- private jemalloc -----------------------------------------------------
# Debian's PIC archive, minus its C++ object, with every public symbol
# renamed tmje_<name>: the program's own jemalloc, if any, never meets ours.
$(B)/jemalloc/libtmje.a: $(JE_PIC) mk/private-jemalloc.sh
	@mkdir -p $(@D)
	sh mk/private-jemalloc.sh $(JE_PIC) $(@D)

$(B)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(TM_CFLAGS) -MMD -MP -c $< -o $@

# Internal objects for unit tests: pure modules are tested without the shim.
$(B)/libtm_internal.a: $(ALLOC_OBJ)
	rm -f $@ && ar rcs $@ $^

$(B)/libtiermalloc.so: $(ALLOC_OBJ) $(SHIM_OBJ) $(B)/jemalloc/libtmje.a shim/exports.map
	$(CC) -shared -o $@ $(ALLOC_OBJ) $(SHIM_OBJ) $(B)/jemalloc/libtmje.a \
	  -Wl,--exclude-libs,ALL -Wl,--version-script=shim/exports.map \
	  -Wl,-soname,libtiermalloc.so -Wl,-z,nodelete -Wl,-z,now $(LIBS)

# tierctl reads other processes' live records: the printers and the
# record's reader are the library's own objects, linked statically.
$(B)/tierctl: tools/tierctl.c $(B)/libtm_internal.a
	$(CC) $(TM_CFLAGS) -fvisibility=default -o $@ tools/tierctl.c $(B)/libtm_internal.a $(LIBS)

-include $(DEPS)

# ---- deps / install ---------------------------------------------------------
deps:
	@sh mk/deps.sh $(DEB_PKGS)

install: $(B)/libtiermalloc.so $(B)/tierctl
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig \
	  $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 755 $(B)/libtiermalloc.so $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(B)/tierctl $(DESTDIR)$(PREFIX)/bin/
	install -m 644 tools/tierctl.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 644 include/tiermalloc.h $(DESTDIR)$(PREFIX)/include/
	sed -e 's|@PREFIX@|$(PREFIX)|g' mk/tiermalloc.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/tiermalloc.pc

clean:
	rm -rf $(B)

# Fragments owned by their folders.
-include tests/tests.mk
-include tests/vm/vm.mk
-include bench/bench.mk
-include tests/fuzz/fuzz.mk

demo: deps
	$(MAKE) all $(B)/bench/tierq
	sh mk/demo.sh
