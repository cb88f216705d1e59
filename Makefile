# opforge — build, test and demo.
#
#   make            libopforge.so, libopforge.a, opforge.pc in build/
#   make demo       set up everything (venv, package) and run the NumPy MLP demo
#   make test       set up everything and run every test: C tests at every ISA
#                   level, ASan+UBSan, valgrind, aarch64 NEON under qemu
#                   (test-neon), pkg-config consumer, Python, and a plain
#                   `pip install .` into a fresh venv (test-install)
#   make install PREFIX=/usr/local
#   make bench      `opforge bench`: opforge vs installed built-ins vs machine limits
#   make ab BASE=REV  the library at REV against the working tree's, case by case
#                   in one process (scripts/ab.sh, bench/ab.c)
#   make bench-epilogue  gelu fused into the GEMM (opf_matmul) vs dense then gelu
#   make format     clang-format the C sources

PREFIX ?= /usr/local
PYTHON ?= python3
CC ?= cc

VERSION := 0.1.0
SOVERSION := 0
BUILD := build
VENV := .venv
VPY := $(VENV)/bin/python

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes
BASE_CFLAGS := -std=c11 -D_POSIX_C_SOURCE=200809L -fPIC -pthread -fvisibility=hidden $(WARN)
INCLUDES := -Iinclude -Isrc/core -Isrc/kernels -Isrc/ops
OPT ?= -O2 -g
LDLIBS := -pthread -lm
comma := ,
# `make V=1` echoes every compiler command.
Q := $(if $(V),,@)

CORE_SRC := $(wildcard src/core/*.c) $(wildcard src/ops/*.c)

# CUDA (cuda.mk): when nvcc is found, CUDA_ENABLED=1 and cuda.mk sets
# CUDA_OBJ (objects added to libopforge), CUDA_DEFS (-DOPF_HAVE_CUDA, for the
# C sources of the normal build) and CUDA_LDLIBS. `make CUDA=0` builds without.
include cuda.mk
ifeq ($(CUDA_ENABLED),1)
CORE_SRC := $(filter-out src/core/cuda_none.c,$(CORE_SRC))
endif
ASAN_CORE_SRC := $(wildcard src/core/*.c) $(wildcard src/ops/*.c)
# Each ISA's kernels are compiled with that ISA's flags only (one binary runs
# everywhere; dispatch picks at run time).
KERNEL_FLAGS_scalar := -O2 -fno-tree-vectorize
KERNEL_FLAGS_portable := -O3
KERNEL_FLAGS_avx2 := -O3 -mavx2 -mfma
KERNEL_FLAGS_avx512 := -O3 -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx2 -mfma
# Files of built-in ops written with the authoring layer's row kernels (a
# line starting with OPF_ROW_KERNEL() get the flags `opforge build` gives a
# user's file of ops (GCC vectorizes the loops of a row kernel's body at -O3
# only; eltwise.c's fixed-size blocks vectorize at -O2 too). The kernel_isa
# of src/ops/softmax.c is "softmax.c".
AUTHORED_OPS_FLAGS := -O3 -fno-math-errno -fno-trapping-math
ROW_AUTHORED_LINE := ^OPF_ROW_KERNEL[(]
ROW_AUTHORED_SRC := $(shell grep -lE '$(ROW_AUTHORED_LINE)' src/ops/*.c)
$(foreach f,$(ROW_AUTHORED_SRC),$(eval KERNEL_FLAGS_$(notdir $(f)) := $(AUTHORED_OPS_FLAGS)))
# Advanced SIMD is baseline on AArch64: no extra flags.
KERNEL_FLAGS_neon := -O3
# The target's architecture, from the compiler (so that a cross compiler,
# `make CC=aarch64-linux-gnu-gcc`, gets that target's kernels), else the host's.
ARCH := $(or $(firstword $(subst -, ,$(shell $(CC) -dumpmachine 2>/dev/null))),$(shell uname -m))
KERNEL_ISAS := scalar portable
ifeq ($(ARCH),x86_64)
KERNEL_ISAS += avx2 avx512
else ifeq ($(ARCH),aarch64)
KERNEL_ISAS += neon
# GCC schedules before register allocation on AArch64, which makes the 8x12
# and 6x8 GEMM micro-kernels (24 accumulators of 32 registers) spill; clang
# has no such pass and rejects the flag.
KERNEL_FLAGS_neon += $(if $(findstring clang,$(shell $(CC) --version 2>/dev/null)),,-fno-schedule-insns)
endif
KERNEL_SRC := $(foreach isa,$(KERNEL_ISAS),$(wildcard src/kernels/$(isa)/*.c))
HEADERS := $(wildcard include/*.h) $(wildcard src/*/*.h src/*/*/*.h src/*/*.inc)

# Objects depend on the build configuration: switching CUDA on or off
# rewrites this file, which rebuilds everything compiled with CUDA_DEFS.
CONFIG_STAMP := $(BUILD)/config.stamp
$(shell mkdir -p $(BUILD) && (echo "CUDA_ENABLED=$(CUDA_ENABLED)" | cmp -s - $(CONFIG_STAMP) || \
          echo "CUDA_ENABLED=$(CUDA_ENABLED)" > $(CONFIG_STAMP)))

OBJ := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(CORE_SRC) $(KERNEL_SRC))
# The sanitizer build is CPU-only (no CUDA objects, no OPF_HAVE_CUDA).
ASAN_OBJ := $(patsubst src/%.c,$(BUILD)/asan/%.o,$(ASAN_CORE_SRC) $(KERNEL_SRC))

LIB_SO := $(BUILD)/libopforge.so.$(VERSION)
LIB_A := $(BUILD)/libopforge.a
ASAN_A := $(BUILD)/asan/libopforge.a
PC := $(BUILD)/opforge.pc

C_TESTS := $(patsubst tests/c/%.c,%,$(wildcard tests/c/test_*.c))
TEST_BIN := $(addprefix $(BUILD)/tests/,$(C_TESTS))
ASAN_TEST_BIN := $(addprefix $(BUILD)/asan/tests/,$(C_TESTS))
SANITIZE := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer

.PHONY: deps deps-test all lib demo test test-build test-c test-isa test-isa-bits test-asan test-valgrind test-neon test-pkgconfig test-python \
        test-install bench-build bench-epilogue ab venv check-vectorized \
        install uninstall format format-check clean

PACKAGE_PC := $(BUILD)/package/opforge.pc

all: lib
lib: $(LIB_SO) $(LIB_A) $(PC) $(PACKAGE_PC)

# --- library ------------------------------------------------------------------

kernel_isa = $(word 3,$(subst /, ,$(1)))

$(BUILD)/obj/%.o: src/%.c $(HEADERS) $(CONFIG_STAMP)
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(BASE_CFLAGS) $(CUDA_DEFS) $(OPT) $(KERNEL_FLAGS_$(call kernel_isa,$<)) $(INCLUDES) -c $< -o $@

$(LIB_SO): $(OBJ) $(CUDA_OBJ) $(CONFIG_STAMP)
	$(CC) -shared -Wl,-soname,libopforge.so.$(SOVERSION) -Wl,--version-script=src/libopforge.map -o $@ $(OBJ) $(CUDA_OBJ) \
	  $(LDLIBS) $(CUDA_LDLIBS)
	ln -sf libopforge.so.$(VERSION) $(BUILD)/libopforge.so.$(SOVERSION)
	ln -sf libopforge.so.$(VERSION) $(BUILD)/libopforge.so

$(LIB_A): $(OBJ) $(CUDA_OBJ) $(CONFIG_STAMP)
	rm -f $@
	ar rcs $@ $(OBJ) $(CUDA_OBJ)

$(PC): opforge.pc.in Makefile
	@mkdir -p $(dir $@)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' \
	  -e 's|@LIBS_PRIVATE@|$(strip $(LDLIBS) $(filter-out -Wl$(comma)--no-undefined,$(CUDA_LDLIBS)))|' $< > $@

# The pkg-config file of the Python package (opforge/lib/pkgconfig/opforge.pc,
# see setup.py): its prefix is the package directory, found from the file's
# own location, and it links with an rpath to the package's lib/ (the
# package ships the shared library only). PACKAGE_PC is set above `lib`.
$(PACKAGE_PC): opforge.pc.in Makefile
	@mkdir -p $(dir $@)
	sed -e 's|@PREFIX@|$${pcfiledir}/../..|' -e 's|@VERSION@|$(VERSION)|' -e '/^Libs.private:/d' \
	  -e 's|^Libs: .*|& -Wl,-rpath,$${libdir}|' $< > $@

# --- C tests --------------------------------------------------------------------

TEST_FLAGS := -std=c11 -D_POSIX_C_SOURCE=200809L -pthread -g $(WARN) -Wno-missing-prototypes $(INCLUDES)

$(BUILD)/tests/%: tests/c/%.c tests/c/harness.c tests/c/*.h $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_FLAGS) -O2 $(TEST_LDFLAGS) $< tests/c/harness.c $(LIB_A) -o $@ $(LDLIBS) $(CUDA_LDLIBS)

$(BUILD)/asan/%.o: src/%.c $(HEADERS)
	@mkdir -p $(dir $@)
	@echo "  CC asan $<"
	$(Q)$(CC) $(BASE_CFLAGS) -O1 -g $(SANITIZE) $(KERNEL_FLAGS_$(call kernel_isa,$<)) $(INCLUDES) -c $< -o $@

$(ASAN_A): $(ASAN_OBJ)
	rm -f $@
	ar rcs $@ $^

$(BUILD)/asan/tests/%: tests/c/%.c tests/c/harness.c tests/c/*.h $(ASAN_A)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_FLAGS) -O1 $(SANITIZE) $< tests/c/harness.c $(ASAN_A) -o $@ $(LDLIBS)

# Every C test at the default ISA level, then at each forced level. (The A/B
# tool is built here too, so that it compiles with every change.)
test-c: $(TEST_BIN) $(BUILD)/bench/ab $(BUILD)/bench/matmul_epilogue
	@set -e; for t in $(TEST_BIN); do echo "== $$t"; $$t; done
	@echo "== $(BUILD)/bench/matmul_epilogue (a small product)"
	@$(BUILD)/bench/matmul_epilogue -n 1 33 65 129
	@echo "== $(BUILD)/bench/ab (the library against itself)"
	@$(BUILD)/bench/ab -n 1 -copy $(LIB_SO) $(LIB_SO) -- softmax:4x8 rms_norm:4x8,8 >$(BUILD)/bench/ab.out
	@test "$$(grep -c 'same bits' $(BUILD)/bench/ab.out)" = 2 || { cat $(BUILD)/bench/ab.out; exit 1; }
	@$(MAKE) --no-print-directory test-isa-bits

# The row ops' outputs at every ISA level, bit for bit the same
# (tests/c/isa_bits.c; a level the CPU lacks runs its best one).
# Lines marked "(vector levels)" are compared among the levels after
# portable only (VECTOR_ISAS).
VECTOR_ISAS := $(filter-out scalar portable,$(KERNEL_ISAS))
test-isa-bits: $(BUILD)/tests/isa_bits
	@echo "== $< at every ISA level: $(KERNEL_ISAS)"
	@set -e; for isa in $(KERNEL_ISAS); do OPFORGE_ISA=$$isa $< >$<.$$isa; \
	    grep -v '(vector levels)' $<.$$isa >$<.$$isa.all || true; grep '(vector levels)' $<.$$isa >$<.$$isa.vec || true; done; \
	  first=$(firstword $(KERNEL_ISAS)); vfirst=$(firstword $(VECTOR_ISAS)); for isa in $(KERNEL_ISAS); do \
	    if ! cmp -s $<.$$first.all $<.$$isa.all; then echo "isa_bits: $$isa differs from $$first:"; \
	      diff $<.$$first.all $<.$$isa.all | head -20; exit 1; fi; done; \
	  for isa in $(VECTOR_ISAS); do \
	    if ! cmp -s $<.$$vfirst.vec $<.$$isa.vec; then echo "isa_bits: $$isa differs from $$vfirst:"; \
	      diff $<.$$vfirst.vec $<.$$isa.vec | head -20; exit 1; fi; done

$(BUILD)/bench/ab: bench/ab.c include/opforge.h
	@mkdir -p $(dir $@)
	$(CC) $(TEST_FLAGS) -O2 $< -o $@ -ldl -lm

# gelu fused into the GEMM (opf_matmul's epilogue) against dense then gelu.
$(BUILD)/bench/matmul_epilogue: bench/matmul_epilogue.c include/opforge.h $(LIB_SO)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_FLAGS) -O2 $< -o $@ -L$(BUILD) -lopforge -Wl,-rpath,$(abspath $(BUILD)) -lm
bench-epilogue: $(BUILD)/bench/matmul_epilogue
	$(BUILD)/bench/matmul_epilogue -t 1 2048 1024 4096 8192 256 1024
	$(BUILD)/bench/matmul_epilogue 2048 1024 4096 8192 256 1024

# Every ISA build of every built-in authored kernel vectorized (a kernel the
# compiler left scalar computes the same values, 4-16 times slower).
check-vectorized: lib
	scripts/check-vectorized.sh $(filter $(BUILD)/obj/ops/%,$(OBJ))

BASE ?= HEAD
ab:
	scripts/ab.sh $(BASE) $(CASES)

test-isa: $(TEST_BIN)
	@set -e; for isa in $(KERNEL_ISAS); do for t in $(TEST_BIN); do \
	  echo "== OPFORGE_ISA=$$isa $$t"; OPFORGE_ISA=$$isa $$t; done; done

test-asan: $(ASAN_TEST_BIN)
	@set -e; for t in $(ASAN_TEST_BIN); do echo "== asan+ubsan $$t"; \
	  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 $$t; done

VALGRIND_TESTS := $(filter-out $(BUILD)/tests/test_ukernels,$(TEST_BIN))
test-valgrind: $(TEST_BIN)
	@set -e; for t in $(VALGRIND_TESTS); do echo "== valgrind $$t"; \
	  OPFORGE_VALGRIND=1 valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect $$t; done

# The C tests on aarch64: the library and tests cross-compiled (CPU only,
# tests linked statically so that qemu needs no sysroot), each test run under
# qemu-aarch64 at the default level (neon), then forced portable and scalar.
# The forced levels use test-valgrind's smaller sizes (OPFORGE_VALGRIND=1):
# their kernels are the plain C that test-isa runs at full size, and qemu is
# slow (the whole target takes about 2 minutes on 2 cores).
AARCH64_CC ?= aarch64-linux-gnu-gcc
AARCH64_OBJDUMP ?= aarch64-linux-gnu-objdump
QEMU_AARCH64 ?= qemu-aarch64
AARCH64_BUILD := $(BUILD)/aarch64
AARCH64_TEST_BIN := $(addprefix $(AARCH64_BUILD)/tests/,$(C_TESTS))
.PHONY: neon-build
neon-build:
	@for tool in $(AARCH64_CC) $(AARCH64_OBJDUMP) $(QEMU_AARCH64); do command -v $$tool >/dev/null || \
	  { echo "test-neon: $$tool not found (make deps-test installs it)" >&2; exit 1; }; done
	$(MAKE) --no-print-directory CC=$(AARCH64_CC) CUDA=0 BUILD=$(AARCH64_BUILD) TEST_LDFLAGS=-static \
	  $(AARCH64_BUILD)/libopforge.a $(AARCH64_TEST_BIN)

test-neon: neon-build
	OBJDUMP=$(AARCH64_OBJDUMP) scripts/check-vectorized.sh $(AARCH64_BUILD)/obj/ops/*.o
	@set -e; for isa in neon portable scalar; do for t in $(AARCH64_TEST_BIN); do \
	  if [ $$isa = neon ]; then echo "== qemu-aarch64 $$t"; env -u OPFORGE_ISA $(QEMU_AARCH64) $$t; \
	  else echo "== qemu-aarch64 OPFORGE_ISA=$$isa $$t"; OPFORGE_ISA=$$isa OPFORGE_VALGRIND=1 $(QEMU_AARCH64) $$t; fi; \
	  done; done

# The C tests under clang's ASan + UBSan too: clang's UBSan checks things
# gcc's does not (it caught a negated INT64_MIN stride that gcc's missed).
CLANG ?= clang
CLANG_BUILD := $(BUILD)/clang-asan
CLANG_ASAN_OBJ := $(patsubst src/%.c,$(CLANG_BUILD)/%.o,$(ASAN_CORE_SRC) $(KERNEL_SRC))
CLANG_ASAN_A := $(CLANG_BUILD)/libopforge.a
CLANG_ASAN_TEST_BIN := $(addprefix $(CLANG_BUILD)/tests/,$(C_TESTS))
# -fno-tree-vectorize is gcc's spelling; clang's scalar kernels get -fno-vectorize.
clang_kernel_flags = $(subst -fno-tree-vectorize,-fno-vectorize -fno-slp-vectorize,$(KERNEL_FLAGS_$(call kernel_isa,$(1))))

$(CLANG_BUILD)/%.o: src/%.c $(HEADERS)
	@mkdir -p $(dir $@)
	@echo "  CLANG asan $<"
	$(Q)$(CLANG) $(BASE_CFLAGS) -O1 -g $(SANITIZE) $(call clang_kernel_flags,$<) $(INCLUDES) -c $< -o $@

$(CLANG_ASAN_A): $(CLANG_ASAN_OBJ)
	rm -f $@
	ar rcs $@ $^

$(CLANG_BUILD)/tests/%: tests/c/%.c tests/c/harness.c tests/c/*.h $(CLANG_ASAN_A)
	@mkdir -p $(dir $@)
	$(CLANG) $(TEST_FLAGS) -O1 $(SANITIZE) $< tests/c/harness.c $(CLANG_ASAN_A) -o $@ $(LDLIBS)

test-asan-clang: $(CLANG_ASAN_TEST_BIN)
	@set -e; for t in $(CLANG_ASAN_TEST_BIN); do echo "== clang asan+ubsan $$t"; \
	  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 $$t; done

# --- fuzzing ----------------------------------------------------------------------

# tests/fuzz/fuzz_<target>.c, each with a seed corpus in tests/fuzz/corpus/<target>/.
# With libFuzzer (clang -fsanitize=fuzzer, from the compiler's runtime
# package) they run against a library built with clang's ASan + UBSan and
# coverage instrumentation (build/fuzz/); without it, `test-fuzz` only
# replays the corpus. They are also built with gcc's ASan + UBSan as plain
# programs (replay.c's main), which `test-fuzz` runs on the corpus.
#   make fuzz [FUZZ_SECONDS=600] [FUZZ_TARGETS="op_run"]
#                   runs each target for FUZZ_SECONDS on one core; the corpus
#                   grows in build/fuzz/corpus/<target>/ (kept between runs);
#                   a finding stops it and is saved in build/fuzz/artifacts/.
#   make fuzz-merge adds the inputs of build/fuzz/corpus that reach new edges
#                   to the checked-in seed corpus (edges only, not hit counts,
#                   which keeps it small).
#   make test-fuzz  (part of `make test`) each target for FUZZ_TEST_SECONDS,
#                   from the seed corpus only, then the gcc replay.
FUZZ_TARGETS ?= $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_SECONDS ?= 300
FUZZ_TEST_SECONDS ?= 25
FUZZ_DIR := $(BUILD)/fuzz
FUZZ_OBJ := $(patsubst src/%.c,$(FUZZ_DIR)/obj/%.o,$(ASAN_CORE_SRC) $(KERNEL_SRC))
FUZZ_A := $(FUZZ_DIR)/libopforge.a
FUZZ_HEADERS := tests/fuzz/fuzz.h tests/c/reference.h include/opforge.h
FUZZ_CFLAGS := -std=c11 -D_POSIX_C_SOURCE=200809L -g -O1 $(WARN) -Wno-missing-prototypes -Iinclude -Itests/c \
               -Itests/fuzz $(SANITIZE)
FUZZ_RUN_FLAGS := -timeout=20 -rss_limit_mb=4096 -max_len=4096 -print_final_stats=1
CLANG_RT_DIR := $(shell $(CLANG) -print-runtime-dir 2>/dev/null)
# The libFuzzer runtime: one name or the other depending on clang's version.
FUZZ_RT := $(firstword $(wildcard $(CLANG_RT_DIR)/libclang_rt.fuzzer-$(ARCH).a $(CLANG_RT_DIR)/libclang_rt.fuzzer.a) \
             $(or $(CLANG_RT_DIR),/usr/lib/clang)/libclang_rt.fuzzer-$(ARCH).a)
HAVE_LIBFUZZER = $(if $(wildcard $(FUZZ_RT)),1,)

$(FUZZ_DIR)/obj/%.o: src/%.c $(HEADERS)
	@mkdir -p $(dir $@)
	@echo "  CLANG fuzz $<"
	$(Q)$(CLANG) $(BASE_CFLAGS) -O1 -g $(SANITIZE) -fsanitize=fuzzer-no-link $(call clang_kernel_flags,$<) \
	  $(INCLUDES) -c $< -o $@

$(FUZZ_A): $(FUZZ_OBJ)
	rm -f $@
	ar rcs $@ $^

$(FUZZ_DIR)/%: tests/fuzz/fuzz_%.c $(FUZZ_HEADERS) $(FUZZ_A)
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) -fsanitize=fuzzer $< $(FUZZ_A) -o $@ $(LDLIBS)

# The same targets as plain programs, with gcc's sanitizers and replay.c.
$(BUILD)/asan/fuzz/%: tests/fuzz/fuzz_%.c tests/fuzz/replay.c $(FUZZ_HEADERS) $(ASAN_A)
	@mkdir -p $(dir $@)
	$(CC) $(FUZZ_CFLAGS) $< tests/fuzz/replay.c $(ASAN_A) -o $@ $(LDLIBS)

FUZZ_ENV := ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1

.PHONY: fuzz fuzz-merge test-fuzz test-fuzz-replay test-asan-clang
fuzz: $(addprefix $(FUZZ_DIR)/,$(FUZZ_TARGETS))
	@set -e; for t in $(FUZZ_TARGETS); do mkdir -p $(FUZZ_DIR)/corpus/$$t $(FUZZ_DIR)/artifacts; \
	  echo "== fuzz $$t for $(FUZZ_SECONDS) s"; \
	  $(FUZZ_ENV) $(FUZZ_DIR)/$$t $(FUZZ_RUN_FLAGS) -max_total_time=$(FUZZ_SECONDS) \
	    -artifact_prefix=$(FUZZ_DIR)/artifacts/$$t- $(FUZZ_DIR)/corpus/$$t tests/fuzz/corpus/$$t; done

fuzz-merge: $(addprefix $(FUZZ_DIR)/,$(FUZZ_TARGETS))
	@set -e; for t in $(FUZZ_TARGETS); do mkdir -p tests/fuzz/corpus/$$t; \
	  $(FUZZ_ENV) $(FUZZ_DIR)/$$t -merge=1 -use_counters=0 tests/fuzz/corpus/$$t $(FUZZ_DIR)/corpus/$$t; done

test-fuzz-replay: $(addprefix $(BUILD)/asan/fuzz/,$(FUZZ_TARGETS))
	@set -e; for t in $(FUZZ_TARGETS); do echo "== replay (gcc asan+ubsan) $$t"; \
	  $(FUZZ_ENV) $(BUILD)/asan/fuzz/$$t tests/fuzz/corpus/$$t; done

# test-fuzz-run is a sub-make so that it sees a runtime that deps-test has
# just installed.
test-fuzz: test-fuzz-replay
	@$(MAKE) --no-print-directory test-fuzz-run

.PHONY: test-fuzz-run
ifeq ($(HAVE_LIBFUZZER),1)
# A fresh corpus directory each time, so that `make test` runs the same.
test-fuzz-run: $(addprefix $(FUZZ_DIR)/,$(FUZZ_TARGETS))
	@set -e; for t in $(FUZZ_TARGETS); do rm -rf $(FUZZ_DIR)/test-corpus/$$t; \
	  mkdir -p $(FUZZ_DIR)/test-corpus/$$t $(FUZZ_DIR)/artifacts; \
	  echo "== fuzz $$t for $(FUZZ_TEST_SECONDS) s"; \
	  $(FUZZ_ENV) $(FUZZ_DIR)/$$t $(FUZZ_RUN_FLAGS) -max_total_time=$(FUZZ_TEST_SECONDS) \
	    -artifact_prefix=$(FUZZ_DIR)/artifacts/$$t- $(FUZZ_DIR)/test-corpus/$$t tests/fuzz/corpus/$$t \
	    > $(FUZZ_DIR)/$$t.log 2>&1 || { tail -n 60 $(FUZZ_DIR)/$$t.log; echo "test-fuzz: $$t failed (log: \
	    $(FUZZ_DIR)/$$t.log)"; exit 1; }; grep -E '^(#[0-9]+[[:space:]]+(INITED|DONE)|stat::(number_of_executed_units|new_units_added))' \
	    $(FUZZ_DIR)/$$t.log; done
else
test-fuzz-run:
	@echo "test-fuzz: no libFuzzer runtime ($(FUZZ_RT)): replayed the corpus only (make deps-test installs it)"
endif

# A consumer that knows only `pkg-config --cflags --libs opforge`.
PKG_PREFIX := $(CURDIR)/$(BUILD)/pkgconfig-prefix
test-pkgconfig:
	rm -rf $(PKG_PREFIX)
	$(MAKE) --no-print-directory install PREFIX=$(PKG_PREFIX) PC=$(BUILD)/pkgconfig-test/opforge.pc
	$(CC) -std=c11 -Wall -Wextra -Werror tests/pkgconfig/main.c -o $(BUILD)/pkgconfig-consumer \
	  $$(PKG_CONFIG_PATH=$(PKG_PREFIX)/lib/pkgconfig pkg-config --cflags --libs opforge)
	LD_LIBRARY_PATH=$(PKG_PREFIX)/lib $(BUILD)/pkgconfig-consumer

# --- Python -----------------------------------------------------------------------

$(VENV)/.deps: requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet -r requirements-dev.txt
	touch $@

# The package is installed as a user would (`pip install .`), not in place.
$(VENV)/.installed: $(VENV)/.deps $(LIB_SO) $(LIB_A) $(PC) $(PACKAGE_PC) pyproject.toml setup.py $(wildcard python/opforge/* python/opforge/*/*) \
                     $(wildcard adapters/* cmake/* python/opforge/templates/*/*)
	$(VPY) -m pip install --quiet --no-build-isolation .
	touch $@

venv: $(VENV)/.installed

test-python: venv
	cd tests/python && ../../$(VPY) -m pytest -q

# A user's install, from scratch: a fresh venv, plain `pip install .` (build
# isolation, so no adapter is bundled), then torch; `import opforge.torch`
# must build the adapter at first import. Minutes, several GiB (removed after).
test-install: venv
	cd tests/install && OPFORGE_INSTALL_TESTS=1 ../../$(VPY) -m pytest -q -s

# --- framework adapters (adapters/*.mk) ----------------------------------------------

# Each adapters/<name>.mk adds, when $(PYTHON) can import its framework, its
# library to ADAPTERS, its test target to ADAPTER_TESTS and its demo script to
# DEMOS. `pip install .` runs `make adapters PYTHON=<its python>` and bundles
# build/adapters/*.so next to libopforge (setup.py). Adapters link libopforge
# by its soname and find it through an rpath of $$ORIGIN.
ADAPTERS :=
ADAPTER_TESTS :=
DEMOS := examples/mlp_numpy.py
ADAPTER_DIR := $(BUILD)/adapters
ADAPTER_CFLAGS := $(BASE_CFLAGS) $(OPT) -Iinclude
ADAPTER_LDFLAGS := -shared -L$(BUILD) -l:libopforge.so.$(SOVERSION) -Wl,-rpath,'$$ORIGIN' -Wl,--as-needed
# $(call have_module,NAME): 1 if $(PYTHON) finds the module NAME (without importing it).
have_module = $(shell $(PYTHON) -c 'import importlib.util as u, sys; sys.exit(u.find_spec("$(1)") is None)' \
                2>/dev/null && echo 1)
# The venv's Python runs the framework tests, with a missing framework an
# error rather than a skip.
ADAPTER_PYTEST := OPFORGE_REQUIRE_FRAMEWORKS=1 ../../$(VPY) -m pytest -q

include $(sort $(wildcard adapters/*.mk))

.PHONY: adapters
adapters: $(ADAPTERS)

# --- the Python suites under ASan + UBSan ------------------------------------------

# The NumPy, torch, JAX and TensorFlow suites with libopforge built with gcc's
# ASan + UBSan (CPU only) in place of the installed one: the installed package
# is copied to build/asan-python/site/ (first on PYTHONPATH) with that library
# swapped in, so the venv stays as it is. The interpreters are not built with
# ASan, so libasan is preloaded (it must be first in the process) with
# libstdc++ (the frameworks' C++ runs over ASan's allocator); leaks are not
# reported (interpreters never free everything). A report aborts the run.
ASAN_PY := $(BUILD)/asan-python
ASAN_PY_SO := $(ASAN_PY)/libopforge.so.$(VERSION)
ASAN_PY_SUITES ?= tests/python tests/torch tests/jax tests/tensorflow
ASAN_PY_ENV = LD_PRELOAD="$$($(CC) -print-file-name=libasan.so) $$($(CC) -print-file-name=libstdc++.so)" \
              ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
              PYTHONPATH=$(CURDIR)/$(ASAN_PY)/site OPFORGE_REQUIRE_FRAMEWORKS=1

$(ASAN_PY_SO): $(ASAN_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -shared $(SANITIZE) -Wl,-soname,libopforge.so.$(SOVERSION) -Wl,--version-script=src/libopforge.map \
	  -o $@ $(ASAN_OBJ) $(LDLIBS)

# nvcc (the CUDA build tests) crashes with libasan preloaded: it runs without.
# Tests marked heavy (XLA compiling higher-order compositions) run only unsanitized.
# Every suite runs; the target fails at the end if one did.
.PHONY: test-python-asan
test-python-asan: venv $(ASAN_PY_SO)
	@set -e; site=$$($(VPY) -c 'import opforge, os; print(os.path.dirname(opforge.__file__))'); \
	  rm -rf $(ASAN_PY)/site; mkdir -p $(ASAN_PY)/site; cp -r "$$site" $(ASAN_PY)/site/opforge; \
	  cp $(ASAN_PY_SO) $(ASAN_PY)/site/opforge/lib/libopforge.so.$(SOVERSION); \
	  nvcc=$$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true); \
	  if [ -n "$$nvcc" ]; then export NVCC="env -u LD_PRELOAD $$nvcc"; fi; failed=""; \
	  for suite in $(ASAN_PY_SUITES); do echo "== asan+ubsan $$suite"; \
	    (cd $$suite && $(ASAN_PY_ENV) $(CURDIR)/$(VPY) -m pytest -q -p no:cacheprovider -m "not heavy") || failed="$$failed $$suite"; \
	  done; if [ -n "$$failed" ]; then echo "test-python-asan: failed:$$failed"; exit 1; fi

# --- main targets ------------------------------------------------------------------

# Debian packages a fresh machine may lack (installed only when missing), as
# COMMAND:PACKAGE pairs (a COMMAND with a slash is a file that must exist).
# `make test` also needs DEPS_TEST: test-neon's aarch64 cross compiler, its C
# library and qemu, which `make demo` does not.
DEPS_EXTRA ?=
DEPS_TEST := aarch64-linux-gnu-gcc:gcc-aarch64-linux-gnu /usr/aarch64-linux-gnu/lib/libc.a:libc6-dev-arm64-cross \
             qemu-aarch64:qemu-user clang:clang $(FUZZ_RT):libclang-rt-dev
deps:
	@scripts/install-deps.sh $(DEPS_EXTRA)
deps-test:
	@scripts/install-deps.sh $(DEPS_EXTRA) $(DEPS_TEST)

bench: deps venv
	$(VENV)/bin/opforge bench --json $(BUILD)/opforge-bench.json --png $(BUILD)/opforge-bench.png

# opforge.torch.load_ops("myops.c") from a fresh process: compiling, and from the cache.
bench-build: venv
	$(VPY) bench/bench_build.py

# JOBS: the compiles of `make demo` and `make test` run one per core (`make
# test JOBS=4` sets it; the environment does not).
JOBS := $(shell nproc 2>/dev/null || echo 2)

demo: deps
	@$(MAKE) --no-print-directory -j$(JOBS) --output-sync=target venv
	@set -e; for d in $(DEMOS); do echo "== $$d"; $(VPY) $$d; done

# `make test`: the Debian packages first; then everything the tests compile,
# with one job per core (JOBS: the compiles were half the time of a
# serial run on two cores); then the C-level tests, one after another, so
# that their output comes in order; then the Python suites of the installed
# package (test-python-suites) beside those of the ASan build
# (test-python-asan), each test's output in one piece as it ends (one
# process each, mostly single-threaded: together they took 30 of the 80
# minutes of a serial run on a Zen 3). Each step also runs on its own (`make
# test-asan`...), compiling what it needs.
TEST_STEPS := lib format-check check-vectorized test-c test-isa test-asan test-asan-clang test-fuzz test-valgrind \
              test-neon test-pkgconfig test-cuda $(TEST_CUDA_EMU_ASAN)
test: deps-test
	@$(MAKE) --no-print-directory -j$(JOBS) --output-sync=target test-build
	@$(MAKE) --no-print-directory -j1 $(TEST_STEPS)
	@$(MAKE) --no-print-directory -j$(JOBS) --output-sync=target test-python-suites test-python-asan

.PHONY: test-python-suites
test-python-suites:
	@$(MAKE) --no-print-directory -j1 test-python $(ADAPTER_TESTS) test-install

# What the steps of `make test` compile (a sub-make, after deps-test: whether
# libFuzzer's runtime is there is decided when the Makefile is read).
test-build: lib $(TEST_BIN) $(BUILD)/tests/isa_bits $(BUILD)/bench/ab $(ASAN_TEST_BIN) $(CLANG_ASAN_TEST_BIN) \
            $(addprefix $(BUILD)/asan/fuzz/,$(FUZZ_TARGETS)) $(if $(HAVE_LIBFUZZER),$(addprefix $(FUZZ_DIR)/,$(FUZZ_TARGETS))) \
            neon-build test-cuda-build $(ASAN_PY_SO) venv

# The public headers: opforge.h and what it includes (opforge_cuda.h, for files compiled by nvcc).
PUBLIC_HEADERS := $(wildcard include/*.h)

install: lib
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 $(PUBLIC_HEADERS) $(DESTDIR)$(PREFIX)/include/
	install -m 755 $(LIB_SO) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libopforge.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libopforge.so.$(SOVERSION)
	ln -sf libopforge.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libopforge.so
	install -m 644 $(LIB_A) $(DESTDIR)$(PREFIX)/lib/
	install -m 644 $(PC) $(DESTDIR)$(PREFIX)/lib/pkgconfig/

uninstall:
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/include/,$(notdir $(PUBLIC_HEADERS))) $(DESTDIR)$(PREFIX)/lib/libopforge.* \
	  $(DESTDIR)$(PREFIX)/lib/pkgconfig/opforge.pc

FORMAT_FILES := $(shell find include src tests adapters bench -name '*.c' -o -name '*.h' -o -name '*.cu' | sort)
format:
	clang-format -i $(FORMAT_FILES)
format-check:
	clang-format --dry-run --Werror $(FORMAT_FILES)

clean:
	rm -rf $(BUILD) $(VENV) python/opforge/lib python/opforge/include python/opforge/adapters python/opforge/*.so *.egg-info python/*.egg-info
