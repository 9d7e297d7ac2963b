# The tiered-VM tests (included by the top Makefile).
#   build/tests/vmtest  tests/vm/*.c, Criterion, linked to libtiermalloc.so;
#                       runs inside the guest, VMTEST_TOPOLOGY says which.
#                       allocator/os.c is compiled in too (test_os.c: the
#                       library hides its symbols).
#   make test-vm        boots tests/vm/run once per topology (2tier, 3tier,
#                       flat, wide, and 2tier-6.1: 2tier's machine on Debian
#                       12's own kernel) and runs vmtest there; in wide (66
#                       nodes) only the wide/ suite. 3-5 minutes each here.
# Without qemu-system-x86_64 it prints SKIP and the reason; under CI (CI set
# and not "false") a missing qemu is a failure, so CI never skips silently.

VM_SRC     := $(sort $(wildcard tests/vm/*.c))
VM_TIMEOUT ?= 480
VM_TOPOLOGIES ?= 2tier 3tier flat wide 2tier-6.1
VM_QEMU    ?= qemu-system-x86_64

.PHONY: test-vm
$(B)/tests/vmtest: $(VM_SRC) tests/vm/vmtest.h $(wildcard tests/*.h) allocator/os.c allocator/os.h $(B)/libtiermalloc.so
	@mkdir -p $(@D)
	$(CC) $(TEST_FLAGS) -Itests/vm -o $@ $(VM_SRC) allocator/os.c -L$(B) -ltiermalloc -Wl,-rpath,'$$ORIGIN/..' \
	  $(CRIT_LIBS) $(LIBS) -lnuma

test-vm: $(B)/tests/vmtest $(B)/libtiermalloc.so $(B)/tests/progs/reclaim_life $(B)/tests/progs/live_hold $(B)/tierctl
	@if ! command -v $(VM_QEMU) >/dev/null 2>&1; then \
	  if [ -n "$$CI" ] && [ "$$CI" != false ]; then \
	    echo "test-vm: FAIL: $(VM_QEMU) not found, CI must run the VM tests (make deps installs qemu-system-x86)"; \
	    exit 1; \
	  fi; \
	  echo "test-vm: SKIP: $(VM_QEMU) not found, so no tiered VM here (make deps installs qemu-system-x86)"; \
	  exit 0; \
	fi; \
	export TIERMALLOC_VM_QEMU=$(VM_QEMU); \
	fail=; \
	set -f; \
	for topo in $(VM_TOPOLOGIES); do \
	  echo "test-vm: $$topo"; \
	  case $$topo in wide) only=--filter=wide/*;; *) only=;; esac; \
	  case $$topo in 2tier-6.1) machine="--kernel bookworm --topology 2tier";; *) machine="--topology $$topo";; esac; \
	  tests/vm/run --verbose $$machine --timeout $(VM_TIMEOUT) --env VMTEST_TOPOLOGY=$$topo -- \
	    $(B)/tests/vmtest --jobs 2 $$only || fail="$$fail $$topo"; \
	done; \
	if [ -n "$$fail" ]; then echo "test-vm: FAILED in:$$fail"; exit 1; fi; \
	echo "test-vm: passed in $(VM_TOPOLOGIES)"
