/*
 * kernels.h — micro-kernel signatures, the kernel registry and the dispatch
 * table.
 *
 * Kernel contract (every variant of every family):
 *   - gets plain pointers and counts; never allocates, validates or threads;
 *   - accepts any alignment (SIMD variants handle misaligned heads/tails) and
 *     never reads or writes past the n elements it is given;
 *   - elementwise kernels allow y == x (or y == a / y == b) exactly, never a
 *     partial overlap;
 *   - is pure: the same inputs give the same bits, whatever thread runs it.
 *
 * Names say what a kernel is: opf_<dtype>_<op>_ukernel__<isa>[_u<unroll>].
 */
#ifndef OPF_KERNELS_H
#define OPF_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "opforge.h"

/* Parameters of elementwise kernels (scale's alpha, in the kernel's dtype). */
typedef struct opf_f32_params {
    float alpha;
} opf_f32_params;
typedef struct opf_f64_params {
    double alpha;
} opf_f64_params;

/* One signature per family. */
typedef void (*opf_f32_unary_ukernel)(size_t n, const float *x, float *y, const opf_f32_params *p);
typedef void (*opf_f64_unary_ukernel)(size_t n, const double *x, double *y, const opf_f64_params *p);
typedef void (*opf_f32_binary_ukernel)(size_t n, const float *a, const float *b, float *y, const opf_f32_params *p);
typedef void (*opf_f64_binary_ukernel)(size_t n, const double *a, const double *b, double *y, const opf_f64_params *p);

/* GEMM micro-kernel, for one MR x NR block of C:
 *   C = (accumulate ? C : bias) + A_panel · B_panel;  then, if apply_relu, C = max(C, 0)
 * A element (i, p) is a[i*rsa + p*csa] for all MR rows i; B element (p, j) is
 * b[p*ldb + j] for all NR columns j. A packed panel (rsa = 1, csa = MR;
 * ldb = NR) has zeros in its padded lanes; the driver may also pass A and B
 * in place (their own strides) when all MR rows / NR columns exist. Only the
 * valid mr <= MR rows and nr <= NR columns of C are read or written, at
 * element strides rsc/csc. bias: NR values, or NULL for zeros (ignored when
 * accumulating). The GEMM driver passes the bias on the first k-block and
 * apply_relu on the last, so both are fused into the micro-kernel's store. */
typedef void (*opf_f32_gemm_ukernel)(size_t k, const float *a, int64_t rsa, int64_t csa, const float *b, int64_t ldb,
                                     float *c, int64_t rsc, int64_t csc, size_t mr, size_t nr, const float *bias,
                                     int accumulate, int apply_relu);
typedef void (*opf_f64_gemm_ukernel)(size_t k, const double *a, int64_t rsa, int64_t csa, const double *b, int64_t ldb,
                                     double *c, int64_t rsc, int64_t csc, size_t mr, size_t nr, const double *bias,
                                     int accumulate, int apply_relu);

typedef struct opf_gemm_f32_config {
    opf_f32_gemm_ukernel ukernel;
    size_t mr, nr;
} opf_gemm_f32_config;
typedef struct opf_gemm_f64_config {
    opf_f64_gemm_ukernel ukernel;
    size_t mr, nr;
} opf_gemm_f64_config;

/* Declarations of every registered kernel. */
#define OPF_ELTWISE_UKERNEL(isa, dtype, op, arity, fn)                                                                 \
    void fn(size_t n, OPF_##arity##_ARGS_##dtype, const opf_##dtype##_params *p);
#define OPF_unary_ARGS_f32 const float *x, float *y
#define OPF_unary_ARGS_f64 const double *x, double *y
#define OPF_binary_ARGS_f32 const float *a, const float *b, float *y
#define OPF_binary_ARGS_f64 const double *a, const double *b, double *y
#include "eltwise.inc"
#undef OPF_ELTWISE_UKERNEL

#define OPF_GEMM_UKERNEL(isa, dtype, mr, nr, fn)                                                                       \
    void fn(size_t k, const OPF_CTYPE_##dtype *a, int64_t rsa, int64_t csa, const OPF_CTYPE_##dtype *b, int64_t ldb,   \
            OPF_CTYPE_##dtype *c, int64_t rsc, int64_t csc, size_t mr_, size_t nr_, const OPF_CTYPE_##dtype *bias,     \
            int accumulate, int apply_relu);
#define OPF_CTYPE_f32 float
#define OPF_CTYPE_f64 double
#include "gemm.inc"
#undef OPF_GEMM_UKERNEL

/* Kernel slots: one per (dtype, op) of the registry, named OPF_K_<dtype>_<op>.
 * Generated from the scalar lines of eltwise.inc (every slot has a scalar
 * reference), so a new op's kernels need no edit here. */
#define OPF_SLOT_IF_SCALAR(name) OPF_K_##name,
#define OPF_SLOT_IF_PORTABLE(name)
#define OPF_SLOT_IF_AVX2(name)
#define OPF_SLOT_IF_AVX512(name)
#define OPF_SLOT_IF_NEON(name)
typedef enum opf_eltwise_slot {
#define OPF_ELTWISE_UKERNEL(isa, dtype, op, arity, fn) OPF_SLOT_IF_##isa(dtype##_##op)
#include "eltwise.inc"
#undef OPF_ELTWISE_UKERNEL
    OPF_K_COUNT
} opf_eltwise_slot;

/* A type-erased kernel pointer; cast back to its family's type to call it
 * (opf_eltwise_run does, by the slot's arity and dtype). */
typedef void (*opf_any_ukernel)(void);

/* The dispatch table: one kernel per slot for the selected ISA, and the GEMM
 * micro-kernels. Built once from the scalar references, then overridden by
 * every registered variant of a level the CPU runs, up to the chosen level. */
/* Data cache sizes in bytes, per core for L1 and L2, detected once (Linux
 * sysfs; conservative defaults elsewhere). The GEMM sizes its blocks from them. */
typedef struct opf_cache_sizes {
    size_t l1d, l2, l3;
} opf_cache_sizes;

typedef struct opf_kernels {
    opf_isa isa; /* the highest level any kernel of this table comes from */
    opf_cache_sizes caches;
    opf_any_ukernel eltwise[OPF_K_COUNT];
    opf_gemm_f32_config f32_gemm;
    opf_gemm_f64_config f64_gemm;
} opf_kernels;

/* Arity (1 or 2) and dtype of a slot. */
int opf_eltwise_slot_arity(opf_eltwise_slot slot);
opf_dtype opf_eltwise_slot_dtype(opf_eltwise_slot slot);

/* The table for the ISA in use (configured once, thread-safe). */
const opf_kernels *opf_kernels_get(void);
/* The table for a given level (for tests and benchmarks); NULL if the CPU
 * cannot run that level. */
const opf_kernels *opf_kernels_for(opf_isa isa);
/* Whether this CPU can run kernels of level `isa`. */
int opf_cpu_supports(opf_isa isa);

#endif /* OPF_KERNELS_H */
