/*
 * kernels.h — the hand-written micro-kernels (the GEMM's), their registry and
 * the dispatch table. Elementwise and row-wise built-ins are authored kernels
 * (OPF_ELTWISE_KERNEL in opforge.h), built per ISA by the compiler.
 *
 * Kernel contract (every variant of every family):
 *   - gets plain pointers and counts; never allocates, validates or threads;
 *   - accepts any alignment and never reads or writes past what it is given;
 *   - is pure: the same inputs give the same bits, whatever thread runs it.
 *
 * Names say what a kernel is: opf_<dtype>_<op>_ukernel__<isa>[_u<unroll>].
 */
#ifndef OPF_KERNELS_H
#define OPF_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "opforge.h"

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

/* Copies `bytes` from src to dst (no overlap), with non-temporal stores
 * where the ISA has them, and meanwhile prefetches [pf, pf + pf_bytes) into
 * the L2 (the next data its caller will read; pf_bytes 0: none), a few lines
 * after each few lines stored, so that memory reads while it writes: a
 * burst of prefetches after a block of stores stalls the copy once the
 * core's outstanding misses are used up. `fence` after the last copy of a
 * run orders the streamed stores before later ones (a fence per block would
 * wait for every block to reach memory). */
typedef void (*opf_copy_ukernel)(size_t bytes, const void *src, void *dst, const void *pf, size_t pf_bytes, int fence);

/* The prefetches of a copy ukernel: OPF_COPY_PREFETCH_BEGIN(pf, pf_bytes,
 * steps) before its loop of `steps` iterations, OPF_COPY_PREFETCH_STEP() at
 * the end of each (pf's lines spread evenly over them), and
 * OPF_COPY_PREFETCH_END() after it (the lines left over). Integers only: a
 * prefetch never faults, whatever its address. */
#define OPF_COPY_PREFETCH_BEGIN(pf, pf_bytes, steps)                                                                   \
    uintptr_t opf__pf = (uintptr_t)(pf);                                                                               \
    const uintptr_t opf__pf_end = opf__pf + (pf_bytes);                                                                \
    const size_t opf__steps = (steps), opf__lines = ((pf_bytes) + 63) / 64;                                            \
    size_t opf__credit = 0;
#define OPF_COPY_PREFETCH_STEP()                                                                                       \
    for (opf__credit += opf__lines; opf__credit >= opf__steps && opf__pf < opf__pf_end; opf__credit -= opf__steps) {   \
        __builtin_prefetch((const void *)opf__pf, 0, 2);                                                               \
        opf__pf += 64;                                                                                                 \
    }
#define OPF_COPY_PREFETCH_END()                                                                                        \
    for (; opf__pf < opf__pf_end; opf__pf += 64) {                                                                     \
        __builtin_prefetch((const void *)opf__pf, 0, 2);                                                               \
    }

/* Bytes from p to the next 64-byte line (0 on a line). Streamed copies start
 * their blocks there: a line stored partly by plain stores and partly
 * streamed costs more than a whole block. */
static inline size_t opf_line_head(const void *p) { return (64 - ((uintptr_t)p & 63)) & 63; }

typedef struct opf_gemm_f32_config {
    opf_f32_gemm_ukernel ukernel;
    size_t mr, nr;
} opf_gemm_f32_config;
typedef struct opf_gemm_f64_config {
    opf_f64_gemm_ukernel ukernel;
    size_t mr, nr;
} opf_gemm_f64_config;

/* Declarations of every registered kernel. */
#define OPF_GEMM_UKERNEL(isa, dtype, mr, nr, fn)                                                                       \
    void fn(size_t k, const OPF_CTYPE_##dtype *a, int64_t rsa, int64_t csa, const OPF_CTYPE_##dtype *b, int64_t ldb,   \
            OPF_CTYPE_##dtype *c, int64_t rsc, int64_t csc, size_t mr_, size_t nr_, const OPF_CTYPE_##dtype *bias,     \
            int accumulate, int apply_relu);
#define OPF_CTYPE_f32 float
#define OPF_CTYPE_f64 double
#include "gemm.inc"
#undef OPF_GEMM_UKERNEL

#define OPF_COPY_UKERNEL(isa, fn)                                                                                      \
    void fn(size_t bytes, const void *src, void *dst, const void *pf, size_t pf_bytes, int fence);
#include "copy.inc"
#undef OPF_COPY_UKERNEL

/* Softmax's exponentials: e_i = exp(x[i] - shift) for the whole blocks of 32
 * elements of x[0 .. n), stored to y[i] (unless y is NULL) and added into
 * acc[i % 32]; lines `ahead` bytes past each block are prefetched. Returns
 * the number of elements done (a multiple of 32). The caller combines acc
 * and takes what is left (opf_exp_sum_blocks_f32, opforge.h).
 * The function: d = x - shift = (k + f) ln2 / 16 with |f| <= 1/2 (k by the
 * round-to-nearest of d 16 / ln2 + OPF_EXP_SUM_ROUND; ln2 / 16 in two parts,
 * the first exact times any k), e^d = 2^(k >> 4) 2^((k & 15) / 16) e^r, the
 * middle factor from a 16-entry table (opf_exp_sum_table: one permute), e^r
 * = 1 + r + r^2 (1/2 + r / 6) for |r| <= ln2 / 32. 0 for d below
 * OPF_EXP_SUM_LEAST (e^d < FLT_MIN), NaN for NaN, +inf above
 * OPF_EXP_SUM_MOST. Every variant computes each element alike (the same
 * bits): 1.062 ulp at most over every float of [ln FLT_MIN, 88.03]
 * (tests/c/test_ukernels.c checks a sample of them against 1.07). `bound`:
 * no x is above it (NaN aside); where bound - shift <= OPF_EXP_SUM_MOST
 * the kernel does not look for larger d (+inf or NaN: every block looks). */
typedef int64_t (*opf_exp_sum_ukernel)(int64_t n, const float *x, float shift, float bound, float *y, int64_t ahead,
                                       float *acc);
#define OPF_EXP_SUM_LOG2E_16 0x1.715476p+4f /* 16 / ln2 */
#define OPF_EXP_SUM_ROUND 0x1.8p23f         /* adds and rounds to an integer, kept in the low bits */
#define OPF_EXP_SUM_LN2_16_HI 0x1.62e4p-5f  /* ln2 / 16, its first 14 bits */
#define OPF_EXP_SUM_LN2_16_LO 0x1.7f7d1cp-24f
#define OPF_EXP_SUM_C3 0x1.555556p-3f     /* 1/6 */
#define OPF_EXP_SUM_LEAST -0x1.5d589ep+6f /* ln FLT_MIN */
#define OPF_EXP_SUM_MOST 0x1.601e68p+6f   /* 88.03: 2^(k >> 4) stays below 2^128 */
extern const float opf_exp_sum_table[16]; /* 2^(j / 16), rounded */
#define OPF_EXP_SUM_UKERNEL(isa, fn)                                                                                   \
    int64_t fn(int64_t n, const float *x, float shift, float bound, float *y, int64_t ahead, float *acc);
#include "expsum.inc"
#undef OPF_EXP_SUM_UKERNEL

/* opf_exp_sum_ukernel's blocks, from the first, while no d = x - shift of
 * a block is above `limit` (nor its maximum NaN; limit at most
 * OPF_EXP_SUM_MOST, else none), and after each block the next share of the
 * lines of `earlier`'s float row (OPF_EARLIER_ROW's plan; NULL, or not a
 * float row: none). The same e and sums as opf_exp_sum_ukernel for those
 * blocks. Returns the elements done (a multiple of 32);
 * opf_exp_sum_blocks_below_f32 (opforge.h). limit = +inf: every block, an
 * e above 2^127 or not finite for every d above OPF_EXP_SUM_MOST or NaN
 * (simd/expsum.tmpl.h). */
typedef int64_t (*opf_exp_sum_below_ukernel)(int64_t n, const float *x, float shift, float limit, float *y,
                                             int64_t ahead, float *acc, opf_earlier_row *earlier);
#define OPF_EXP_SUM_BELOW_UKERNEL(isa, fn)                                                                             \
    int64_t fn(int64_t n, const float *x, float shift, float limit, float *y, int64_t ahead, float *acc,               \
               opf_earlier_row *earlier);
#include "expsumbelow.inc"
#undef OPF_EXP_SUM_BELOW_UKERNEL

/* The maximum of whole blocks of 64 floats, storing a waiting row among
 * them: m[j] = x[i] > m[j] ? x[i] : m[j] for every i % 64 == j of the blocks
 * of x[0 .. n) (NaN x left out), and after each block the next share of the
 * lines of `earlier`'s float row (OPF_EARLIER_ROW's plan; NULL, or not a
 * float row: none), which the plan then records as stored. Returns the
 * elements done (a multiple of 64); opf_max_blocks_f32 (opforge.h). */
typedef int64_t (*opf_max_stream_ukernel)(int64_t n, const float *x, float *m, opf_earlier_row *earlier);
#define OPF_MAX_STREAM_UKERNEL(isa, fn) int64_t fn(int64_t n, const float *x, float *m, opf_earlier_row *earlier);
#include "maxstream.inc"
#undef OPF_MAX_STREAM_UKERNEL

/* A type-erased kernel pointer; cast back to its family's type to call it. */
typedef void (*opf_any_ukernel)(void);

/* The dispatch table: the GEMM micro-kernels for the selected ISA. Built once from the scalar references, then
 * overridden by every registered variant of a level the CPU runs, up to the chosen level. */
/* Data cache sizes in bytes, per core for L1 and L2, detected once (Linux
 * sysfs; conservative defaults elsewhere). The GEMM sizes its blocks from them. */
typedef struct opf_cache_sizes {
    size_t l1d, l2, l3;
} opf_cache_sizes;

typedef struct opf_kernels {
    opf_isa isa; /* the highest level any kernel of this table comes from */
    opf_cache_sizes caches;
    opf_gemm_f32_config f32_gemm;
    opf_gemm_f64_config f64_gemm;
    opf_copy_ukernel stream_copy;
    opf_exp_sum_ukernel exp_sum_f32;             /* NULL at levels without one */
    opf_exp_sum_below_ukernel exp_sum_below_f32; /* NULL at levels without one */
    opf_max_stream_ukernel max_stream_f32;       /* NULL at levels without one */
} opf_kernels;

/* The table for the ISA in use (configured once, thread-safe). */
const opf_kernels *opf_kernels_get(void);
/* The table for a given level (for tests and benchmarks); NULL if the CPU
 * cannot run that level. */
const opf_kernels *opf_kernels_for(opf_isa isa);
/* Whether this CPU can run kernels of level `isa`. */
int opf_cpu_supports(opf_isa isa);

#endif /* OPF_KERNELS_H */
