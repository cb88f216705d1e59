/*
 * norms.h — what the row-wise built-ins of a transformer block share. They
 * work over the last axis: softmax and log_softmax (softmax.c), rms_norm
 * (rms_norm.c), layer_norm (layer_norm.c), their gradients, the gradients of
 * those (second order) and the tangents of these (forward over forward,
 * third-order reverse; layer_norm's in layer_norm_jvp.c). Each file is the
 * math of one row per op (OPF_ROW_KERNEL) and its declaration, exactly what
 * a user writes for a row-wise op of their own; the row engine does strides,
 * threads, the per-ISA builds, and the sums over rows of the weight
 * gradients (outputs declared without "..."). They are C that also compiles
 * as CUDA C++ (see eltwise.c).
 *
 * One file per family, not one for all: every row kernel is built for three
 * ISA levels (baseline, AVX2, AVX-512) in two dtypes (and, through nvcc, for
 * the device), and a single file took 2 minutes to compile (6 with ASan, 6
 * with nvcc, on a Zen 3); apart, a parallel build spreads them.
 *
 * Numerics. Everything is computed in the tensor's dtype, as PyTorch does on
 * the CPU for float32 and float64. Row reductions are opf_sum/opf_max/opf_dot:
 * 64 (float) or 32 (double) lanes, so a float row of 4096 elements adds 64
 * terms per lane, then the lanes pairwise. Statistics are centred sums (see
 * layer_norm), never the single-pass E[x^2] - E[x]^2. Softmax subtracts the
 * row's maximum.
 */
#ifndef OPF_OPS_NORMS_H
#define OPF_OPS_NORMS_H

#include "cuda_kernels.h"
#ifdef __cplusplus
extern "C" {
#endif
#include "ops.h"
#ifdef __cplusplus
}
#endif

/* The machine epsilon of T: rms_norm's eps when its eps attribute is
 * negative (the default), as torch.nn.functional.rms_norm's eps=None. */
#define NORMS_EPS(eps) ((eps) < 0 ? (OPF_IS_F64 ? (T)2.220446049250313e-16 : (T)1.1920928955078125e-07) : (T)(eps))

/* Sums of the second-order kernels (not on the path of a forward or
 * first-order backward op): plain loops in double. Element i of a row of T. */
#define NORMS_AT(p, i) ((double)(p)[i])
#define NORMS_OR(p, i, otherwise) ((p) != NULL ? (double)(p)[i] : (otherwise))

/* A second-order body written once for both builds, as a macro of three
 * others: FOR(i, n) visits the row's elements, SUM(v) adds up the partial
 * sums the visits made, ONCE runs a statement once per row. The CPU body
 * takes the sequential ones below (a plain loop, v itself, always); the team
 * body OPF_TEAM_FOR, NORMS_TEAM_SUM and OPF_TEAM_ONCE. */
#define NORMS_SEQ_FOR(i, n) for (int64_t i = 0; i < (n); i++)
#define NORMS_SEQ_SUM(v) (v)
#define NORMS_SEQ_ONCE if (1)
#define NORMS_TEAM_SUM(v) opf_team_sum(opf_team, v)

/* acc[0] = acc[0 .. lanes) combined pairwise (OPF_PAIRWISE, opf_sum's
 * order), skipped for a row shorter than `lanes` (n): every partial result
 * is then still its initial value (0, or -inf for a maximum), which acc[0]
 * holds already, so the result is the same bits (rows of 8 floats took
 * twice as long with the halves). */
#define NORMS_PAIRWISE(acc, lanes, COMBINE, n)                                                                         \
    if ((n) >= (lanes)) {                                                                                              \
        OPF_PAIRWISE(acc, lanes, COMBINE);                                                                             \
    }
#define NORMS_ADD(a, b) ((a) + (b))
#define NORMS_MAX_OF(a, b) ((b) > (a) ? (b) : (a))

/* Rows at least this long (elements) ask for the next row in their first pass
 * too (OPF_NEXT_ROW_FIRST_PASS, OPF_ROW_DOT) where a pass of one operation an
 * element would otherwise leave memory idle (rms_norm.c). */
enum { NORMS_FIRST_PASS_MIN = 1024 };

/* How far ahead a chunk's exponentials prefetch: its length, or
 * OPF_PREFETCH_AHEAD for short chunks (rows), where that reaches further. */
#define NORMS_AHEAD(len)                                                                                               \
    ((len) * (int64_t)sizeof(T) > OPF_PREFETCH_AHEAD ? (len) * (int64_t)sizeof(T) : (int64_t)OPF_PREFETCH_AHEAD)

/* a[0] = the sum of `term_a` (an expression of the element's index k) over
 * k in [0, n), in opf_sum's order: `lanes` partial sums (element k in lane
 * k % lanes), combined pairwise, then the last n % lanes one at a time; and,
 * where `two` (a constant), b[0] that of term_b in the same loop (the same
 * bits as a loop of its own; both sets of lanes then live in registers at
 * once). `ahead` bytes further on than p + k are prefetched a group at a time
 * (0: nothing). a, b: arrays of `lanes`. */
#define NORMS_LANE_SUMS(type, lanes, a, b, n, k, term_a, term_b, p, ahead, next, two)                                  \
    int64_t group_ = 0;                                                                                                \
    a[0] = 0;                                                                                                          \
    if (two) {                                                                                                         \
        b[0] = 0;                                                                                                      \
    }                                                                                                                  \
    if ((n) >= (lanes)) { /* the first group sets the lanes (0 + term: the same bits as adding to 0) */                \
        if ((ahead) != 0) {                                                                                            \
            opf_prefetch_at((p), (ahead), (lanes) * (int64_t)sizeof(type));                                            \
        }                                                                                                              \
        opf_next_row_step((next), 0);                                                                                  \
        for (int j_ = 0; j_ < (lanes); j_++) {                                                                         \
            const int64_t k = j_;                                                                                      \
            a[j_] = (type)0 + (term_a);                                                                                \
            if (two) {                                                                                                 \
                b[j_] = (type)0 + (term_b);                                                                            \
            }                                                                                                          \
        }                                                                                                              \
        group_ = (lanes);                                                                                              \
    }                                                                                                                  \
    for (; group_ + (lanes) <= (n); group_ += (lanes)) {                                                               \
        if ((ahead) != 0) {                                                                                            \
            opf_prefetch_at((p) + group_, (ahead), (lanes) * (int64_t)sizeof(type));                                   \
        }                                                                                                              \
        opf_next_row_step((next), group_ / (lanes));                                                                   \
        for (int j_ = 0; j_ < (lanes); j_++) {                                                                         \
            const int64_t k = group_ + j_;                                                                             \
            a[j_] = a[j_] + (term_a);                                                                                  \
            if (two) {                                                                                                 \
                b[j_] = b[j_] + (term_b);                                                                              \
            }                                                                                                          \
        }                                                                                                              \
    }                                                                                                                  \
    NORMS_PAIRWISE(a, lanes, NORMS_ADD, n)                                                                             \
    if (two) {                                                                                                         \
        NORMS_PAIRWISE(b, lanes, NORMS_ADD, n)                                                                         \
    }                                                                                                                  \
    for (int64_t k = group_; k < (n); k++) {                                                                           \
        a[0] = a[0] + (term_a);                                                                                        \
        if (two) {                                                                                                     \
            b[0] = b[0] + (term_b);                                                                                    \
        }                                                                                                              \
    }

/* sum(g) and sum(g (x - mu)) with g = dy w, in one pass: the lanes of
 * opf_sum (64 floats, 32 doubles), each adding its elements' terms, then
 * added pairwise; a step of `next` a group of lanes (NULL: none). */
#define NORMS_G_SUMS_FN(fn, type, lanes)                                                                               \
    OPF_KERNEL_FN void fn(int64_t n, const type *dy, const type *w, const type *x, type mu, type *sg, type *sgx,       \
                          const opf_next_row *next) {                                                                  \
        type a[lanes], b[lanes];                                                                                       \
        NORMS_LANE_SUMS(type, lanes, a, b, n, k, dy[k] * w[k], (dy[k] * w[k]) * (x[k] - mu), dy, 0, next, 1)           \
        *sg = a[0];                                                                                                    \
        *sgx = b[0];                                                                                                   \
    }
NORMS_G_SUMS_FN(norms_g_sums_f32, float, 64)
NORMS_G_SUMS_FN(norms_g_sums_f64, double, 32)

/* sum(x - mu) and sum((x - mu)^2), prefetching `ahead` bytes further on
 * than x (0: nothing), in one loop of both where `one_loop`, and in two
 * loops otherwise. The same bits either way (each lane adds the same terms
 * in the same order). One loop needs both sets of lanes in registers: 8 of
 * AVX-512's 32, but all 16 of AVX2's (16 vectors of 8 floats or 4 doubles),
 * which GCC then kept on the stack; on a Zen 3 (AVX2), layer_norm's rows of
 * 64 floats took 1.10 times as long in one loop, rows of 4096 as long from
 * memory and 0.97 times as long from L3. On an Intel Xeon (Emerald Rapids,
 * AVX-512, one thread), one loop was 1.03-1.12 times as fast on rows of 512
 * to 16384 floats or doubles (`bench/ab`, same bits; the second pass is time
 * in which memory has nothing to do), and 0.97-1.00 times on rows of 64 and
 * 256 (where taking two loops below 512 measured 0.95: the kernel's code
 * around them changed): layer_norm's body picks one loop for its AVX-512
 * build (opf_vector_bytes). (NORMS_G_SUMS_FN, of three inputs, was 2-4%
 * slower in two loops.) */
#define NORMS_C_SUMS_FN(fn, type, lanes)                                                                               \
    OPF_KERNEL_FN void fn(int64_t n, const type *x, type mu, type *s1, type *s2, int64_t ahead, int one_loop,          \
                          const opf_next_row *next) {                                                                  \
        if (one_loop) {                                                                                                \
            type a[lanes], b[lanes];                                                                                   \
            NORMS_LANE_SUMS(type, lanes, a, b, n, k, x[k] - mu, (x[k] - mu) * (x[k] - mu), x, ahead, next, 1)          \
            *s1 = a[0];                                                                                                \
            *s2 = b[0];                                                                                                \
            return;                                                                                                    \
        }                                                                                                              \
        {                                                                                                              \
            type a[lanes];                                                                                             \
            NORMS_LANE_SUMS(type, lanes, a, a, n, k, x[k] - mu, 0, x, ahead, next, 0)                                  \
            *s1 = a[0];                                                                                                \
        }                                                                                                              \
        {                                                                                                              \
            type b[lanes];                                                                                             \
            NORMS_LANE_SUMS(type, lanes, b, b, n, k, (x[k] - mu) * (x[k] - mu), 0, x, 0, NULL, 0)                      \
            *s2 = b[0];                                                                                                \
        }                                                                                                              \
    }
NORMS_C_SUMS_FN(norms_c_sums_f32, float, 64)
NORMS_C_SUMS_FN(norms_c_sums_f64, double, 32)

/* Each forward op R has a gradient row G (R.grad), whose own gradient row GG
 * (G.grad) also gives the terms of R's and G's tangent rules that G cannot:
 * R.jvp and G.jvp name G, GG and (rms_norm, layer_norm) rows of G's
 * derivative along its non-linear inputs (G_jvp).
 *
 * Forward over forward evaluates R.jvp under a second tangent, so GG needs
 * tangent rules too, and reverse over forward needs GG's gradient rules.
 * Both come from one structure. GG's outputs are the gradients of
 * F = <v, G(z; u)> (v: the cotangents of G's outputs, ddx...; u: G's inputs
 * it is linear in, dy, drstd...; z: the rest, x, rstd, w...) with respect to
 * z and u; F is linear in u and in v. So GG's tangent is GG with u' in place
 * of u (its gradients of z: those of u do not move with u), plus GG with v'
 * in place of v, plus F's second derivatives along z': the GG_jvp rows
 * (log_softmax_grad_grad_jvp, rms_norm_grad_grad_jvp*,
 * layer_norm_grad_grad_jvp*, layer_norm_grad_grad_affine_jvp; split by
 * direction, x, mean, rstd, w, as a row takes 8 inputs at most). The second
 * derivatives are symmetric, so GG's gradient from cotangents c_z, c_u of its
 * outputs is: for z, GG with c_u as u plus the GG_jvp rows with c_z as the
 * tangents (which also give u's); for v, G with c_u as u plus G's tangent
 * along c_z (the G_jvp rows; log_softmax: GG's gy). Every output of GG is
 * covered (a tangent rule left out would be a silent zero at third order).
 * The GG_jvp and G_jvp rows declare no rules: forward to third order, and
 * any order that differentiates them (reverse over forward over forward),
 * is an error naming one; third-order reverse, and forward over reverse over
 * reverse, only evaluate them. */

#endif
