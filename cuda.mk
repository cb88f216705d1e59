# cuda.mk — the CUDA part of the build (included by the Makefile).
#
#   make                 CUDA kernels built in when nvcc is found (CUDA ?= auto)
#   make CUDA=0          CPU only: no nvcc, no CUDA runtime, no OPF_HAVE_CUDA
#   make CUDA=1          require CUDA (error if nvcc or the static runtime is missing)
#   make test-cuda       build and run build/tests/test_cuda (prints SKIP without a GPU),
#                        with nvcc test_cuda_user_lib on a user's library of ops built by nvcc,
#                        and with a C++ compiler test-cuda-emu (below: no nvcc, no GPU)
#   make gpu-check       scripts/gpu-check.sh: build, test, compute-sanitizer, benchmarks
#                        against PyTorch, the torch/jax adapters' CUDA tests (on a GPU
#                        machine; see docs/gpu.md)
#   make gpu-wheelhouse  scripts/gpu-wheelhouse.sh: download (here, with network) the
#                        wheels gpu-check may need there into build/wheelhouse
#
# Sets for the Makefile: CUDA_ENABLED (1/0), CUDA_OBJ (objects added to
# libopforge), CUDA_DEFS (-DOPF_HAVE_CUDA for the C sources) and CUDA_LDLIBS.
#
# Linking: the CUDA runtime is linked statically (libcudart_static.a loads
# libcuda.so.1 itself at first use) and cuBLASLt is dlopen()ed at first use
# (src/cuda/cublaslt.c), so libopforge.so has no load-time dependency on any
# CUDA library and loads on machines without a driver.
#
# Without the Makefile, a CUDA build is (paths for a default toolkit):
#   nvcc -c src/cuda/X.cu  -o X.o $(NVCC_FLAGS)    for each .cu (flags below)
#   cc   -c src/cuda/X.c   -o X.o <usual CFLAGS> -DOPF_HAVE_CUDA -I/usr/local/cuda/include
#   cc   -c src/core/*.c src/ops/*.c ... -DOPF_HAVE_CUDA     (all but src/core/cuda_none.c)
#   cc -shared ... -o libopforge.so *.o -L/usr/local/cuda/lib64 -lcudart_static -ldl -lrt -lpthread
#   cc tests/cuda/test_cuda.c tests/c/harness.c libopforge.a -I/usr/local/cuda/include \
#      -L/usr/local/cuda/lib64 -lcudart_static -ldl -lrt -lpthread -lm -o test_cuda

CUDA ?= auto

# This file is included before the Makefile's first rule: keep `all` the
# default goal although the rules below come first.
ifeq ($(.DEFAULT_GOAL),)
.DEFAULT_GOAL := all
endif

# Prerequisites are expanded when a rule is read, and the Makefile defines
# HEADERS and LIB_A after including this file: name them here.
CUDA_DEP_HEADERS := $(wildcard include/*.h src/*/*.h src/*/*/*.h src/*/*.inc)
CUDA_LIB_A := $(BUILD)/libopforge.a

# The files of src/ops that define authored kernels (a line starting with
# OPF_ELTWISE_KERNEL( or OPF_ROW_KERNEL(): a CUDA build compiles them with
# nvcc, and the CUDA emulator as C++, so that their kernels get CUDA builds.
# Such a file must also compile as C++ (src/ops/eltwise.c shows how: ops.h
# inside extern "C"). A new file of built-in kernels needs nothing more.
CUDA_AUTHORED_LINE := ^OPF_(ELTWISE|ROW)_KERNEL[(]
CUDA_AUTHORED_SRC := $(shell grep -lE '$(CUDA_AUTHORED_LINE)' src/ops/*.c)

CUDA_ENABLED := 0
CUDA_OBJ :=
CUDA_DEFS :=
CUDA_LDLIBS :=

ifneq ($(CUDA),0)
# nvcc: $(NVCC) if given, else $(CUDA_HOME)/bin/nvcc, else on PATH, else /usr/local/cuda.
ifeq ($(origin NVCC),undefined)
NVCC := $(firstword $(wildcard $(if $(CUDA_HOME),$(CUDA_HOME)/bin/nvcc)) \
                    $(shell command -v nvcc 2>/dev/null) $(wildcard /usr/local/cuda/bin/nvcc))
endif
CUDA_ROOT := $(patsubst %/bin/nvcc,%,$(realpath $(NVCC)))
CUDA_LIBDIR := $(patsubst %/libcudart_static.a,%,$(firstword $(wildcard \
                 $(CUDA_ROOT)/lib64/libcudart_static.a $(CUDA_ROOT)/targets/*/lib/libcudart_static.a \
                 $(CUDA_ROOT)/lib/libcudart_static.a)))
CUDA_INCDIR := $(patsubst %/cuda_runtime_api.h,%,$(firstword $(wildcard \
                 $(CUDA_ROOT)/include/cuda_runtime_api.h $(CUDA_ROOT)/targets/*/include/cuda_runtime_api.h)))
ifneq ($(and $(CUDA_ROOT),$(CUDA_LIBDIR),$(CUDA_INCDIR)),)
CUDA_ENABLED := 1
else ifeq ($(CUDA),1)
$(error CUDA=1 but no usable CUDA toolkit: nvcc '$(NVCC)', libcudart_static.a and cuda_runtime_api.h are needed)
endif
endif

ifeq ($(CUDA_ENABLED),1)

# sm_80 (A100) and sm_90 (H100/H200) machine code, plus compute_90 PTX that
# the driver can JIT for newer GPUs.
CUDA_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
             -gencode arch=compute_90,code=compute_90
# Warnings are errors (nvcc's and the host compiler's); scripts/gpu-check.sh
# overrides NVCC_WARN (and the Makefile's WARN) only to retry a failed build.
NVCC_WARN := -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror
NVCC_FLAGS := -std=c++17 -O3 -lineinfo $(CUDA_ARCH) $(NVCC_WARN) \
              -Xcompiler -fPIC,-fvisibility=hidden,-fno-exceptions,-fno-rtti \
              $(INCLUDES) -DOPF_HAVE_CUDA

CUDA_CU_SRC := $(wildcard src/cuda/*.cu)
CUDA_C_SRC := $(wildcard src/cuda/*.c)
CUDA_OBJ := $(patsubst src/%.cu,$(BUILD)/obj/%.o,$(CUDA_CU_SRC)) $(patsubst src/%.c,$(BUILD)/obj/%.o,$(CUDA_C_SRC))
CUDA_DEFS := -DOPF_HAVE_CUDA
# --no-undefined: a symbol the static runtime or our objects need and no
# listed library provides fails the link here, not the dlopen() on a user's
# machine. (glibc >= 2.34 has dl/rt/pthread in libc; the flags are harmless.)
CUDA_LDLIBS := -L$(CUDA_LIBDIR) -lcudart_static -ldl -lrt -lpthread -Wl,--no-undefined

$(BUILD)/obj/cuda/%.o: src/cuda/%.cu $(CUDA_DEP_HEADERS)
	@mkdir -p $(dir $@)
	@echo "  NVCC    $<"
	$(Q)$(NVCC) $(NVCC_FLAGS) -c $< -o $@

# Files of authored kernels (CUDA_AUTHORED_SRC, above), compiled by nvcc as
# CUDA C++ instead of by the C compiler: each OPF_ELTWISE_KERNEL and
# OPF_ROW_KERNEL in them then also has its CUDA build (opforge_cuda.h),
# exactly as in a user's file of ops. CUDA_AUTHORED_FLAGS
# are the flags opforge.h asks of such a file ("Writing kernels"): no
# contraction of a*b + c on the device (-fmad=false) or the host
# (-ffp-contract=off: g++ contracts by default, unlike C in ISO mode), and no
# -Wextra warning about the fields a declaration leaves out.
CUDA_AUTHORED_FLAGS := -x cu -fmad=false -Xcompiler -ffp-contract=off,-Wno-missing-field-initializers

# (A static pattern rule: it takes these objects from the Makefile's C rule.)
$(patsubst src/%.c,$(BUILD)/obj/%.o,$(CUDA_AUTHORED_SRC)): $(BUILD)/obj/%.o: src/%.c $(CUDA_DEP_HEADERS) \
                                                          $(BUILD)/config.stamp
	@mkdir -p $(dir $@)
	@echo "  NVCC    $<"
	$(Q)$(NVCC) $(NVCC_FLAGS) $(CUDA_AUTHORED_FLAGS) -c $< -o $@

# C sources of src/cuda: the usual flags plus the CUDA headers. (More
# specific than the Makefile's $(BUILD)/obj/%.o rule, so make picks this.)
$(BUILD)/obj/cuda/%.o: src/cuda/%.c $(CUDA_DEP_HEADERS)
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(BASE_CFLAGS) $(CUDA_DEFS) $(OPT) $(INCLUDES) -isystem $(CUDA_INCDIR) -c $< -o $@

endif

# --- tests and the GPU check ------------------------------------------------------

.PHONY: test-cuda gpu-check gpu-wheelhouse

CUDA_TEST_BIN := $(BUILD)/tests/test_cuda

# tests/cuda/user_ops.c is a user's file of ops, compiled by nvcc as a user
# compiles it: the flags opforge.h documents ("Writing kernels"), only the
# public headers, warnings as errors. Its object is linked into test_cuda;
# the same command with -shared makes the library test_cuda_user_lib loads
# (tests/cuda/user_lib.c), linked against libopforge.so. (nvcc's C++ with
# exceptions needs libstdc++'s personality routine: -lstdc++ where the C
# compiler links the object.)
CUDA_USER_FLAGS := -x cu -O3 -fmad=false -Xcompiler -fPIC,-ffp-contract=off
CUDA_USER_WARN = $(NVCC_WARN) -Xcompiler -Wno-missing-field-initializers
CUDA_USER_OBJ := $(if $(filter 1,$(CUDA_ENABLED)),$(BUILD)/tests/cuda_user_ops.o $(BUILD)/tests/cuda_myops.o)
CUDA_USER_LIB := $(BUILD)/tests/libcudaops.so
CUDA_USER_LIB_TEST := $(if $(filter 1,$(CUDA_ENABLED)),$(BUILD)/tests/test_cuda_user_lib)

$(BUILD)/tests/cuda_user_ops.o: tests/cuda/user_ops.c $(CUDA_DEP_HEADERS)
	@mkdir -p $(dir $@)
	@echo "  NVCC    $<"
	$(Q)$(NVCC) $(CUDA_USER_FLAGS) $(CUDA_ARCH) $(CUDA_USER_WARN) -Iinclude -c $< -o $@

# examples/ops/myops.c (the tutorials' ops: rowsum and its gradient among
# them), compiled the same way and linked into test_cuda too; its table
# function renamed, since user_ops.c exports opforge_op_table.
MYOPS_RENAME := -Dopforge_op_table=opf_test_myops_table
$(BUILD)/tests/cuda_myops.o: examples/ops/myops.c $(CUDA_DEP_HEADERS)
	@mkdir -p $(dir $@)
	@echo "  NVCC    $<"
	$(Q)$(NVCC) $(CUDA_USER_FLAGS) $(CUDA_ARCH) $(CUDA_USER_WARN) -Iinclude $(MYOPS_RENAME) -c $< -o $@

$(CUDA_USER_LIB): tests/cuda/user_ops.c $(CUDA_DEP_HEADERS) $(BUILD)/libopforge.so.$(VERSION)
	@mkdir -p $(dir $@)
	@echo "  NVCC    $< (shared)"
	$(Q)$(NVCC) $(CUDA_USER_FLAGS) $(CUDA_ARCH) $(CUDA_USER_WARN) -shared $< -o $@ -Iinclude -L$(BUILD) -lopforge

$(BUILD)/tests/test_cuda_user_lib: tests/cuda/user_lib.c tests/c/harness.c tests/c/*.h $(CUDA_USER_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_FLAGS) -O2 -isystem $(CUDA_INCDIR) -Itests/c tests/cuda/user_lib.c tests/c/harness.c -o $@ \
	  -L$(BUILD) -l:libopforge.so.$(SOVERSION) -Wl,-rpath,'$$ORIGIN/..' $(LDLIBS) $(CUDA_LDLIBS)

# Without CUDA the test is still built (against the CPU-only library) and
# reports SKIP: opf_cuda_device_count() is 0.
$(CUDA_TEST_BIN): tests/cuda/test_cuda.c tests/c/harness.c tests/c/*.h $(CUDA_USER_OBJ) $(CUDA_LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_FLAGS) -O2 $(CUDA_DEFS) $(if $(CUDA_INCDIR),-isystem $(CUDA_INCDIR)) -Itests/c \
	  tests/cuda/test_cuda.c tests/c/harness.c $(CUDA_USER_OBJ) $(CUDA_LIB_A) -o $@ $(LDLIBS) $(CUDA_LDLIBS) \
	  $(if $(CUDA_USER_OBJ),-lstdc++)

# bench/relu_variants.cu: elementwise kernel forms vs the device copy
# (standalone; gpu-check runs it). Built by test-cuda too, so CI compiles it.
RELU_VARIANTS_BIN := $(if $(filter 1,$(CUDA_ENABLED)),$(BUILD)/bench/relu_variants)
$(BUILD)/bench/relu_variants: bench/relu_variants.cu
	@mkdir -p $(dir $@)
	@echo "  NVCC    $<"
	$(Q)$(NVCC) -std=c++17 -O3 -lineinfo $(CUDA_ARCH) $(NVCC_WARN) $< -o $@

# The CUDA emulator's test (below) runs too where a C++ compiler is installed,
# and `make test` runs it again under ASan and UBSan (the team bodies'
# barriers run the emulator's coroutines).
HAVE_CXX := $(if $(shell command -v $(CXX) 2>/dev/null),1)
TEST_CUDA_EMU_ASAN := $(if $(HAVE_CXX),test-cuda-emu-asan)

# What test-cuda runs, built (test-cuda-build, below, also builds the emulator's tests).
CUDA_TEST_BUILT := $(CUDA_TEST_BIN) $(RELU_VARIANTS_BIN) $(CUDA_USER_LIB_TEST)

test-cuda: $(CUDA_TEST_BUILT) $(if $(HAVE_CXX),test-cuda-emu)
	@echo "== $(CUDA_TEST_BIN)"
	@$(CUDA_TEST_BIN)
ifeq ($(CUDA_ENABLED),1)
	@echo "== $(CUDA_USER_LIB_TEST) $(CUDA_USER_LIB)"
	@$(CUDA_USER_LIB_TEST) $(CUDA_USER_LIB)
endif
ifneq ($(HAVE_CXX),1)
	@echo "SKIP test-cuda-emu: no C++ compiler ($(CXX))"
endif

gpu-check:
	scripts/gpu-check.sh

# --- the CUDA emulator ---------------------------------------------------------------
#
#   make test-cuda-emu   test_cuda with the elementwise and row CUDA paths run on the CPU:
#                        the library, the built-ins' and a user's kernels compiled as CUDA
#                        C++ by the host C++ compiler against tests/cuda/emulate (a CPU
#                        implementation of the runtime API they use; every thread of
#                        every block in turn). Needs neither nvcc nor a GPU; checks the
#                        engine's plans and the generated kernels' indexing, not speed
#                        and not what only nvcc or the hardware decide (no dense).
#   make test-cuda-emu-asan  the same (its quick set) built with AddressSanitizer and UBSan (in
#                        $(BUILD)/emu-asan): out-of-bounds rows, scratch used after
#                        it is freed (a captured graph's, too), leaks.
EMU_BUILD := $(BUILD)/emu
EMU_INC := -Itests/cuda/emulate
EMU_SAN :=
EMU_RUN_ENV :=
EMU_CXXFLAGS = -std=c++17 -O2 -g -pthread -Wall -Wextra -Werror -Wno-unknown-pragmas -Wno-missing-field-initializers \
               $(INCLUDES) $(EMU_INC) $(EMU_SAN)
# What nvcc does to a file: CUDA C++, __CUDACC__, cuda_runtime.h first.
EMU_CU := -x c++ -D__CUDACC__ -include cuda_runtime.h -DOPF_HAVE_CUDA
EMU_C_SRC = $(filter-out src/core/cuda_none.c $(CUDA_AUTHORED_SRC),$(wildcard src/core/*.c src/ops/*.c)) \
            src/cuda/device.c $(KERNEL_SRC)
EMU_OBJ = $(patsubst src/%.c,$(EMU_BUILD)/obj/%.o,$(EMU_C_SRC)) $(patsubst src/%.c,$(EMU_BUILD)/cu/%.o,$(CUDA_AUTHORED_SRC)) \
          $(EMU_BUILD)/cu/cuda/eltwise.o $(EMU_BUILD)/cu/cuda/row.o $(EMU_BUILD)/cu/user_ops.o \
          $(EMU_BUILD)/cu/myops.o $(EMU_BUILD)/runtime.o
EMU_TEST_BIN := $(EMU_BUILD)/test_cuda

$(EMU_BUILD)/obj/%.o: src/%.c $(CUDA_DEP_HEADERS)
	@mkdir -p $(dir $@)
	@echo "  CC emu  $<"
	$(Q)$(CC) $(BASE_CFLAGS) -DOPF_HAVE_CUDA $(OPT) $(EMU_SAN) $(KERNEL_FLAGS_$(call kernel_isa,$<)) $(INCLUDES) \
	  $(EMU_INC) -c $< -o $@

$(EMU_BUILD)/cu/ops/%.o: src/ops/%.c $(CUDA_DEP_HEADERS)
	@mkdir -p $(dir $@)
	@echo "  CXX emu $<"
	$(Q)$(CXX) $(EMU_CXXFLAGS) -ffp-contract=off $(EMU_CU) -c $< -o $@

$(EMU_BUILD)/cu/cuda/%.o: src/cuda/%.cu $(CUDA_DEP_HEADERS) tests/cuda/emulate/*.h
	@mkdir -p $(dir $@)
	@echo "  CXX emu $<"
	$(Q)$(CXX) $(EMU_CXXFLAGS) -ffp-contract=off $(EMU_CU) -c $< -o $@

$(EMU_BUILD)/cu/user_ops.o: tests/cuda/user_ops.c $(CUDA_DEP_HEADERS) tests/cuda/emulate/*.h
	@mkdir -p $(dir $@)
	@echo "  CXX emu $<"
	$(Q)$(CXX) $(EMU_CXXFLAGS) -ffp-contract=off $(EMU_CU) -c $< -o $@

$(EMU_BUILD)/cu/myops.o: examples/ops/myops.c $(CUDA_DEP_HEADERS) tests/cuda/emulate/*.h
	@mkdir -p $(dir $@)
	@echo "  CXX emu $<"
	$(Q)$(CXX) $(EMU_CXXFLAGS) -ffp-contract=off $(EMU_CU) $(MYOPS_RENAME) -c $< -o $@

$(EMU_BUILD)/runtime.o: tests/cuda/emulate/runtime.cc tests/cuda/emulate/*.h include/opforge.h
	@mkdir -p $(dir $@)
	@echo "  CXX emu $<"
	$(Q)$(CXX) $(EMU_CXXFLAGS) -c $< -o $@

# (The objects are named when the rule runs: the Makefile lists the kernel
# sources after including this file. Secondary expansion applies to the
# prerequisites of every later rule; no other rule has a $$ in them.)
.SECONDEXPANSION:
$(EMU_TEST_BIN): tests/cuda/test_cuda.c tests/c/harness.c tests/c/*.h $$(EMU_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_FLAGS) -O2 $(EMU_SAN) -DOPF_HAVE_CUDA $(EMU_INC) -Itests/c tests/cuda/test_cuda.c tests/c/harness.c \
	  $(EMU_OBJ) -o $@ $(LDLIBS) -lstdc++

.PHONY: test-cuda-emu test-cuda-emu-asan
test-cuda-emu: $(EMU_TEST_BIN)
	@echo "== $(strip $(EMU_RUN_ENV) $(EMU_TEST_BIN)) (the CUDA emulator)"
	@$(EMU_RUN_ENV) $(EMU_TEST_BIN)

# Under the sanitizers (three times slower) the quick set: every op, shape and
# dtype, two of the six layouts a shape in turn (the full sweep ran above).
EMU_ASAN_MAKE = $(MAKE) --no-print-directory EMU_BUILD=$(BUILD)/emu-asan EMU_RUN_ENV="env OPFORGE_TEST_QUICK=1" \
                EMU_SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
test-cuda-emu-asan:
	@$(EMU_ASAN_MAKE) test-cuda-emu
test-cuda-emu-asan-build:
	@$(EMU_ASAN_MAKE) $(BUILD)/emu-asan/test_cuda

# What test-cuda, test-cuda-emu and test-cuda-emu-asan compile (make test-build: in parallel).
.PHONY: test-cuda-build test-cuda-emu-asan-build
test-cuda-build: $(CUDA_TEST_BUILT) $(if $(HAVE_CXX),$(EMU_TEST_BIN) test-cuda-emu-asan-build)

# Wheels for CPython 3.12 (the GPU machine's) of cffi, pytest, hypothesis,
# setuptools, wheel and their dependencies; carry build/wheelhouse to the GPU
# machine, where gpu-check installs from it what its Python lacks.
gpu-wheelhouse:
	PYTHON=$(PYTHON) scripts/gpu-wheelhouse.sh $(BUILD)/wheelhouse
