/*
 * cuda_kernels.h — the CUDA compute functions of the built-in rows that are
 * neither elementwise nor row-wise (src/cuda/dense.cu), and
 * OPF_CUDA_KERNEL(fn) for a row's `.compute_cuda`:
 * `fn` in a CUDA build (OPF_HAVE_CUDA defined by cuda.mk), NULL otherwise
 * (no nvcc, `make CUDA=0`, or the CPU-only sanitizer build), so the rows
 * compile and link either way.
 *
 * The elementwise and row-wise built-ins name no CUDA function: their
 * OPF_ELTWISE_KERNEL / OPF_ROW_KERNEL definitions (src/ops/eltwise.c and any
 * other file of authored kernels, compiled by nvcc in a CUDA build: cuda.mk's
 * CUDA_AUTHORED_SRC) carry their CUDA builds, which the engines run.
 *
 * Each compute function has the opf_cuda_compute_fn contract (opforge.h): it
 * is called by opf_op_run_cuda after validation, with every tensor on one
 * CUDA device; it only enqueues work on `stream` (a cudaStream_t), never
 * synchronizes.
 */
#ifndef OPF_OPS_CUDA_KERNELS_H
#define OPF_OPS_CUDA_KERNELS_H

#include "opforge.h"

#ifdef OPF_HAVE_CUDA
#define OPF_CUDA_KERNEL(fn) fn
#else
#define OPF_CUDA_KERNEL(fn) NULL
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* src/cuda/dense.cu */
opf_status opf_cuda_dense_compute(const opf_tensor *const *inputs, const opf_tensor *const *outputs,
                                  const opf_attr_value *attrs, void *stream);
opf_status opf_cuda_dense_grad_compute(const opf_tensor *const *inputs, const opf_tensor *const *outputs,
                                       const opf_attr_value *attrs, void *stream);

#ifdef __cplusplus
}
#endif

#endif
