# cuda.mk — the CUDA part of the build (included by the Makefile).
# Placeholder until the CUDA kernels land: CUDA is off.
CUDA_ENABLED := 0
CUDA_OBJ :=
CUDA_DEFS :=
CUDA_LDLIBS :=
