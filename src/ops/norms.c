/*
 * norms.c — the row-wise built-ins of a transformer block, over the last
 * axis: softmax, log_softmax, layer_norm, rms_norm, their gradients, the
 * gradients of those (second order) and the tangents of these (forward over
 * forward, third-order reverse). Each is the math of one row
 * (OPF_ROW_KERNEL) and a declaration, exactly what a user writes for a
 * row-wise op of their own; the row engine does strides, threads, the
 * per-ISA builds, and the sums over rows of the weight gradients (outputs
 * declared without "...").
 *
 * Numerics. Everything is computed in the tensor's dtype, as PyTorch does on
 * the CPU for float32 and float64. Row reductions are opf_sum/opf_max/opf_dot:
 * 64 (float) or 32 (double) lanes, so a float row of 4096 elements adds 64
 * terms per lane, then the lanes pairwise. Statistics are centred sums (see layer_norm), never the
 * single-pass E[x^2] - E[x]^2. Softmax subtracts the row's maximum.
 *
 * This file is C that also compiles as CUDA C++ (see eltwise.c).
 */
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

/* --- softmax, log_softmax ---------------------------------------------------------------------------------------- */

/* e^x for the x <= 0 (and NaN) of softmax's exp(x - max), in float: x = k ln2
 * + r (Cody-Waite, as opf_exp_f32), e^r by a degree-6 polynomial (fitted for
 * the relative error on |r| <= ln2 / 2), times 2^k; 1.13 ulp at most, 1.16
 * where fused (every float in [-87.3, 0]). Results below FLT_MIN (x < -87.34) are
 * 0: e^x there is a subnormal that no sum of softmax's can tell from 0. About
 * 17 operations where a*b + c is fused (`fused`: the kernel body's
 * opf_math_fma_ok, as opforge_math.h's functions take it), to opf_exp_f32's
 * 27: softmax's rows are bound by this function. */
OPF_KERNEL_FN float norms_exp_f32(float x, int fused) {
    /* k + 1.5 * 2^23: k = round(x / ln2) in the low bits */
    const float t = opf_math_fma_f32(x, 0x1.715476p+0f, 0x1.8p23f, fused);
    const float k = t - 0x1.8p23f;
    float r = opf_math_fma_f32(-k, 0x1.62e4p-1f, x, fused); /* exact: k ln2_hi has few bits */
    r = opf_math_fma_f32(-k, 0x1.7f7d1cp-20f, r, fused);
    float q = opf_math_fma_f32(0x1.6ae6ccp-10f, r, 0x1.126766p-7f, fused);
    q = opf_math_fma_f32(q, r, 0x1.555822p-5f, fused);
    q = opf_math_fma_f32(q, r, 0x1.55541ap-3f, fused);
    q = opf_math_fma_f32(q, r, 0x1.fffffcp-2f, fused);
    const float p = 1.0f + opf_math_fma_f32(r * r, q, r, fused);
    uint32_t bits;
    memcpy(&bits, &t, sizeof bits);
    bits = (bits << 23) + 0x3f800000u; /* 2^k: the low bits of t, shifted into the exponent */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return opf_select_f32(x < -0x1.5d589ep+6f, 0.0f, p * scale);
}

/* e^x for x <= 0 in T: norms_exp_f32 for float, opf_exp for double. */
#define NORMS_EXP(x, fused)                                                                                            \
    (OPF_IS_F64 ? (T)opf_math_exp_f64((double)(x), (fused)) : (T)norms_exp_f32((float)(x), (fused)))
/* e^x for log_softmax_grad's exp(y) (y <= 0 for a log-softmax; any y is
 * taken): norms_exp_f32, and +inf above ln(2^127) = 88.03 (where e^x, finite
 * up to 88.72, would need a second scale factor). In a kernel body. */
#define NORMS_EXP_ANY(x)                                                                                               \
    (OPF_IS_F64 ? (T)opf_exp_f64((double)(x))                                                                          \
                : (T)opf_select_f32((float)(x) > 0x1.601e68p+6f, __builtin_inff(),                                     \
                                    norms_exp_f32((float)(x), opf_math_fma_ok)))

enum { NORMS_CHUNKS = 64 }; /* chunks of a row, at most */

/* What is left of a row after its whole groups of lanes (all of a row
 * shorter than one) is taken in groups of NORMS_GROUP(type) elements (one
 * AVX-512 vector) before the last few one at a time: rows of 16 to 63
 * floats would otherwise spend most of their reductions on a serial chain
 * of an element at a time. */
#define NORMS_GROUP(type) ((int)(64 / sizeof(type)))

/* The maximum of x[0 .. n), NaN ignored (softmax's NaN comes from its sum
 * instead), -inf for n = 0: lanes as opf_max, one compare-select each. */
#define NORMS_MAX_FN(fn, type, lanes)                                                                                  \
    OPF_KERNEL_FN type fn(int64_t n, const type *x) {                                                                  \
        type m[lanes];                                                                                                 \
        for (int j = 0; j < lanes; j++) {                                                                              \
            m[j] = -(type)__builtin_inf();                                                                             \
        }                                                                                                              \
        int64_t i = 0;                                                                                                 \
        for (; i + lanes <= n; i += lanes) {                                                                           \
            for (int j = 0; j < lanes; j++) {                                                                          \
                m[j] = x[i + j] > m[j] ? x[i + j] : m[j];                                                              \
            }                                                                                                          \
        }                                                                                                              \
        NORMS_PAIRWISE(m, lanes, NORMS_MAX_OF, n)                                                                      \
        type r = m[0];                                                                                                 \
        if (__builtin_expect(i + NORMS_GROUP(type) <= n, 0)) { /* (see NORMS_GROUP) */                                 \
            type q[NORMS_GROUP(type)];                                                                                 \
            for (int j = 0; j < NORMS_GROUP(type); j++) {                                                              \
                q[j] = -(type)__builtin_inf();                                                                         \
            }                                                                                                          \
            for (; i + NORMS_GROUP(type) <= n; i += NORMS_GROUP(type)) {                                               \
                for (int j = 0; j < NORMS_GROUP(type); j++) {                                                          \
                    q[j] = x[i + j] > q[j] ? x[i + j] : q[j];                                                          \
                }                                                                                                      \
            }                                                                                                          \
            OPF_PAIRWISE(q, NORMS_GROUP(type), NORMS_MAX_OF);                                                          \
            r = NORMS_MAX_OF(r, q[0]);                                                                                 \
        }                                                                                                              \
        for (; i < n; i++) {                                                                                           \
            r = x[i] > r ? x[i] : r;                                                                                   \
        }                                                                                                              \
        return r;                                                                                                      \
    }
NORMS_MAX_FN(norms_max_f32, float, 64)
NORMS_MAX_FN(norms_max_f64, double, 32)
#define NORMS_MAX(n, x)                                                                                                \
    (OPF_IS_F64 ? (T)norms_max_f64((n), (const double *)(x)) : (T)norms_max_f32((n), (const float *)(x)))

enum { NORMS_LANES = 32 }; /* partial sums of the exponentials (two AVX-512 vectors of floats) */

/* Rows of at least NORMS_BLOCKS_MIN floats start with the ISA's vector
 * kernel for their whole blocks of 32 (opf_exp_sum_blocks_f32: its
 * exponential takes a 16-entry table and a polynomial of degree 3 where
 * norms_exp_f32 needs one of degree 6, which the compiler's vectorized loop
 * cannot look up): what it leaves, and shorter rows, the loop below does. */
enum { NORMS_BLOCKS_MIN = 256 };
OPF_KERNEL_FN int64_t norms_exp_blocks_f32(int64_t n, const float *x, float s, float *y, int64_t ahead, float *acc) {
#if defined(__CUDA_ARCH__)
    (void)n, (void)x, (void)s, (void)y, (void)ahead, (void)acc;
    return 0;
#else
    OPF__STATIC_ASSERT(NORMS_LANES == 32, "opf_exp_sum_blocks_f32 adds into 32 partial sums");
    return n >= NORMS_BLOCKS_MIN ? opf_exp_sum_blocks_f32(n, x, s, y, ahead, acc) : 0;
#endif
}
OPF_KERNEL_FN int64_t norms_exp_blocks_f64(int64_t n, const double *x, double s, double *y, int64_t ahead,
                                           double *acc) {
    (void)n, (void)x, (void)s, (void)y, (void)ahead, (void)acc;
    return 0;
}

/* The sum of e = exp(x[i] - s) over x[0 .. n), e stored to y[i] when y is
 * not NULL, prefetching `ahead` bytes further on than x: NORMS_LANES
 * partial sums, added pairwise. A function of its own,
 * so that the partial sums stay in vector registers (two AVX-512 ones for
 * float): a loop carrying them in memory waits on a store-to-load round trip
 * per vector of exponentials. */
#define NORMS_EXP_SUM_FN(fn, type, blocks)                                                                             \
    OPF_KERNEL_FN type fn(int64_t n, const type *x, type s, type *y, int64_t ahead, int fused) {                       \
        typedef type T;                                                                                                \
        T acc[NORMS_LANES];                                                                                            \
        for (int j = 0; j < NORMS_LANES; j++) {                                                                        \
            acc[j] = 0;                                                                                                \
        }                                                                                                              \
        int64_t i = blocks(n, x, s, y, ahead, acc);                                                                    \
        if (y != NULL) {                                                                                               \
            for (; i + NORMS_LANES <= n; i += NORMS_LANES) {                                                           \
                opf_prefetch_at(x + i, ahead, NORMS_LANES * (int64_t)sizeof(T));                                       \
                OPF_SIMD_LOOP                                                                                          \
                for (int j = 0; j < NORMS_LANES; j++) {                                                                \
                    const T e = NORMS_EXP(x[i + j] - s, fused);                                                        \
                    y[i + j] = e;                                                                                      \
                    acc[j] = acc[j] + e;                                                                               \
                }                                                                                                      \
            }                                                                                                          \
        } else {                                                                                                       \
            for (; i + NORMS_LANES <= n; i += NORMS_LANES) {                                                           \
                opf_prefetch_at(x + i, ahead, NORMS_LANES * (int64_t)sizeof(T));                                       \
                for (int j = 0; j < NORMS_LANES; j++) {                                                                \
                    acc[j] = acc[j] + NORMS_EXP(x[i + j] - s, fused);                                                  \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
        NORMS_PAIRWISE(acc, NORMS_LANES, NORMS_ADD, n)                                                                 \
        T t = acc[0];                                                                                                  \
        if (__builtin_expect(i + NORMS_GROUP(T) <= n, 0)) { /* (see NORMS_GROUP) */                                    \
            T q[NORMS_GROUP(T)];                                                                                       \
            for (int j = 0; j < NORMS_GROUP(T); j++) {                                                                 \
                q[j] = 0;                                                                                              \
            }                                                                                                          \
            for (; i + NORMS_GROUP(T) <= n; i += NORMS_GROUP(T)) {                                                     \
                OPF_SIMD_LOOP                                                                                          \
                for (int j = 0; j < NORMS_GROUP(T); j++) {                                                             \
                    const T e = NORMS_EXP(x[i + j] - s, fused);                                                        \
                    if (y != NULL) {                                                                                   \
                        y[i + j] = e;                                                                                  \
                    }                                                                                                  \
                    q[j] = q[j] + e;                                                                                   \
                }                                                                                                      \
            }                                                                                                          \
            OPF_PAIRWISE(q, NORMS_GROUP(T), NORMS_ADD);                                                                \
            t = t + q[0];                                                                                              \
        }                                                                                                              \
        for (; i < n; i++) {                                                                                           \
            const T e = NORMS_EXP(x[i] - s, fused);                                                                    \
            if (y != NULL) {                                                                                           \
                y[i] = e;                                                                                              \
            }                                                                                                          \
            t = t + e;                                                                                                 \
        }                                                                                                              \
        return t;                                                                                                      \
    }
NORMS_EXP_SUM_FN(norms_exp_sum_f32, float, norms_exp_blocks_f32)
NORMS_EXP_SUM_FN(norms_exp_sum_f64, double, norms_exp_blocks_f64)
/* (in a kernel body: its opf_math_fma_ok) */
#define NORMS_EXP_SUM(n, x, s, y, ahead)                                                                               \
    (OPF_IS_F64 ? (T)norms_exp_sum_f64((n), (const double *)(x), (double)(s), (double *)(y), (ahead), opf_math_fma_ok) \
                : (T)norms_exp_sum_f32((n), (const float *)(x), (float)(s), (float *)(y), (ahead), opf_math_fma_ok))

/* How far ahead a chunk's exponentials prefetch: its length, or
 * OPF_PREFETCH_AHEAD for short chunks (rows), where that reaches further. */
#define NORMS_AHEAD(len)                                                                                               \
    ((len) * (int64_t)sizeof(T) > OPF_PREFETCH_AHEAD ? (len) * (int64_t)sizeof(T) : (int64_t)OPF_PREFETCH_AHEAD)

/* The row in chunks of `chunk` elements (at most NORMS_CHUNKS of them), each
 * with its own shift c (its maximum; 0 when that is -inf): y = exp(x - c)
 * (when `store`), and the chunk's sum (NORMS_EXP_SUM: no pass of its own).
 * The row is read from memory once, a chunk at a time: the pass that
 * computes a chunk's exponentials prefetches the chunk's length further on
 * (the next chunk, or the next row where rows lie one after the other),
 * which the next chunk's maximum then finds in cache. Leaves the chunks'
 * shifts, sums and the row's maximum m (NaN ignored). */
#define NORMS_EXP_CHUNKS(T, n, x, y, chunk, shift, sum, m, store)                                                      \
    for (int64_t at_ = 0, k_ = 0; at_ < (n); at_ += (chunk), k_++) {                                                   \
        const int64_t len_ = (n)-at_ < (chunk) ? (n)-at_ : (chunk);                                                    \
        const T c_ = NORMS_MAX(len_, (x) + at_);                                                                       \
        (m) = c_ > (m) ? c_ : (m);                                                                                     \
        const T s_ = c_ == -(T)__builtin_inf() ? (T)0 : c_;                                                            \
        (shift)[k_] = s_;                                                                                              \
        (sum)[k_] = NORMS_EXP_SUM(len_, (x) + at_, s_, (store) ? (y) + at_ : NULL, NORMS_AHEAD(len_));                 \
    }

/* exp(c - m): what a chunk's sum of exp(x - c) is multiplied by to be a sum
 * of exp(x - m); exactly 1 (opf_exp(0)) for the chunk that holds the
 * maximum, without the scalar exponential (a row of one chunk needs none:
 * 10% of softmax's time on rows of 64). */
#define NORMS_RESCALE(c, m) ((c) == (m) ? (T)1 : opf_exp((c) - (m)))

/* Chunks of at least `least` elements, at most NORMS_CHUNKS of them. */
#define NORMS_CHUNK(n, least) ((n) > NORMS_CHUNKS * (least) ? ((n) + NORMS_CHUNKS - 1) / NORMS_CHUNKS : (least))

/* y = exp(x - max) / sum: per chunk e = exp(x - c), y = e * (exp(c - max) /
 * sum). e goes to the row's scratch (OPF_ROW_SCRATCH), so that a streamed
 * row is computed in cache and stored once, with its last multiplication.
 * Chunks of 64 KiB: a row of up to 16384 floats is one chunk, with one
 * factor, which that store applies; a longer row's chunks are scaled in
 * place first. A row with +inf or NaN, or of -inf only, is NaN throughout
 * (as torch.softmax): its sum is NaN, or 0 with max = -inf. */
OPF_ROW_KERNEL(softmax, (x), (y), {
    const int64_t chunk = NORMS_CHUNK(n, 65536 / (int64_t)sizeof(T));
    T *const e = OPF_ROW_SCRATCH(y);
    T shift[NORMS_CHUNKS], sum[NORMS_CHUNKS], m = -(T)__builtin_inf();
    NORMS_EXP_CHUNKS(T, n, x, e, chunk, shift, sum, m, 1)
    T total = 0;
    for (int64_t at = 0, k = 0; at < n; at += chunk, k++) {
        shift[k] = NORMS_RESCALE(shift[k], m);
        total += sum[k] * shift[k];
    }
    const T inv = (T)1 / total;
    if (n <= chunk) {
        const T f = n > 0 ? shift[0] * inv : (T)0;
        OPF_STORE_ROW(y, i, e[i] * f);
    } else {
        for (int64_t at = 0, k = 0; at < n; at += chunk, k++) {
            const int64_t len = n - at < chunk ? n - at : chunk;
            const T f = shift[k] * inv;
            T *const ek = e + at;
            for (int64_t i = 0; i < len; i++) {
                ek[i] = ek[i] * f;
            }
        }
        if (e != y) { /* (y holds them already where the row is not streamed) */
            OPF_STORE_ROW(y, i, e[i]);
        }
    }
})

/* In a team body over row x: the row's maximum m (NaN ignored), the shift
 * s (m, or 0 for a row of -inf only) and this thread's part of the sum of
 * exp(x - s) (to be added up by opf_team_sum). */
#define NORMS_TEAM_EXP_SUM(m, s, sum)                                                                                  \
    m = -(T)__builtin_inf();                                                                                           \
    OPF_TEAM_FOR(i, n) { m = x[i] > m ? x[i] : m; }                                                                    \
    m = opf_team_max(opf_team, m);                                                                                     \
    s = m == -(T)__builtin_inf() ? (T)0 : m;                                                                           \
    sum = 0;                                                                                                           \
    OPF_TEAM_FOR(i, n) { sum += NORMS_EXP(x[i] - s, opf_math_fma_ok); }

/* On CUDA, a team per row: the maximum, the sum of exp(x - max), then y,
 * each a pass over the row (the passes after the first read it from cache
 * where the rows in flight fit there), with softmax's rules for inf, NaN
 * and rows of -inf only. */
OPF_ROW_KERNEL_TEAM(softmax_team, softmax, (x), (y), {
    T m, s, sum;
    NORMS_TEAM_EXP_SUM(m, s, sum);
    const T inv = (T)1 / opf_team_sum(opf_team, sum);
    OPF_TEAM_FOR(i, n) { y[i] = NORMS_EXP(x[i] - s, opf_math_fma_ok) * inv; }
})

/* dx = y * (dy - <dy, y>) */
OPF_ROW_KERNEL(softmax_grad, (dy, y), (dx), {
    const T s = opf_dot(n, dy, y);
    OPF_STORE_ROW(dx, i, y[i] * (dy[i] - s));
})

OPF_ROW_KERNEL_TEAM(softmax_grad_team, softmax_grad, (dy, y), (dx), {
    T d = 0;
    OPF_TEAM_FOR(i, n) { d += dy[i] * y[i]; }
    const T s = opf_team_sum(opf_team, d);
    OPF_TEAM_FOR(i, n) { dx[i] = y[i] * (dy[i] - s); }
})

/* softmax_grad is linear in dy with the symmetric Jacobian diag(y) - y y^T:
 * gdy = softmax_grad(ddx, y); gy = ddx * (dy - <dy, y>) - dy * <ddx, y> (the
 * gradient of <ddx, dx> with respect to y); and jy = ddx * (dy - <dy, y>) -
 * y * <dy, ddx>, the derivative of dx along y in the direction ddx (forward
 * mode: softmax_grad's tangent rule passes y' as ddx). */
OPF_ROW_KERNEL(softmax_grad_grad, (ddx, dy, y), (gdy, gy, jy), {
    const T a = opf_dot(n, ddx, y);
    if (gdy != NULL) {
        for (int64_t i = 0; i < n; i++) {
            gdy[i] = y[i] * (ddx[i] - a);
        }
    }
    if (gy != NULL || jy != NULL) {
        const T s = opf_dot(n, dy, y), c = opf_dot(n, dy, ddx);
        for (int64_t i = 0; gy != NULL && i < n; i++) {
            gy[i] = ddx[i] * (dy[i] - s) - dy[i] * a;
        }
        for (int64_t i = 0; jy != NULL && i < n; i++) {
            jy[i] = ddx[i] * (dy[i] - s) - y[i] * c;
        }
    }
})

OPF_ROW_KERNEL_TEAM(softmax_grad_grad_team, softmax_grad_grad, (ddx, dy, y), (gdy, gy, jy), {
    T pa = 0;
    OPF_TEAM_FOR(i, n) { pa += ddx[i] * y[i]; }
    const T a = opf_team_sum(opf_team, pa);
    if (gdy != NULL) {
        OPF_TEAM_FOR(i, n) { gdy[i] = y[i] * (ddx[i] - a); }
    }
    if (gy != NULL || jy != NULL) {
        T ps = 0, pc = 0;
        OPF_TEAM_FOR(i, n) {
            ps += dy[i] * y[i];
            pc += dy[i] * ddx[i];
        }
        const T s = opf_team_sum(opf_team, ps), c = opf_team_sum(opf_team, pc);
        if (gy != NULL) {
            OPF_TEAM_FOR(i, n) { gy[i] = ddx[i] * (dy[i] - s) - dy[i] * a; }
        }
        if (jy != NULL) {
            OPF_TEAM_FOR(i, n) { jy[i] = ddx[i] * (dy[i] - s) - y[i] * c; }
        }
    }
})

/* log(t) for a normal positive finite t, as opf_log computes it (the same
 * bits) without the selects for zero, subnormals, inf and NaN: scalar
 * selects move each value through the integer registers, and one log per
 * row was a third of log_softmax's time on rows of 64 (AMD Zen 5, perf). */
OPF_KERNEL_FN float norms_log_normal_f32(float t, int fused) {
    const uint32_t ix = opf_math_bits_f32(t) + (0x3f800000u - 0x3f3504f3u);
    const float k = (float)(int32_t)(ix >> 23) - 127.0f;
    const float f = opf_math_from_bits_f32((ix & 0x007fffffu) + 0x3f3504f3u) - 1.0f;
    return opf_math_log_core_f32(f, k, fused);
}
OPF_KERNEL_FN double norms_log_normal_f64(double t, int fused) {
    const uint64_t ix = opf_math_bits_f64(t) + (0x3ff0000000000000u - 0x3fe6a09e667f3bcdu);
    const double k = opf_math_from_bits_f64(0x4330000000000000u | (ix >> 52)) - 0x1p52 - 1023.0;
    const double f = opf_math_from_bits_f64((ix & 0x000fffffffffffffu) + 0x3fe6a09e667f3bcdu) - 1.0;
    return opf_math_log_core_f64(f, k, fused);
}
/* log(total) of a row's sum of exp(x - max): at least 1 (the maximum's own
 * term) but for rows of NaN or -inf only, which take opf_log. */
#define NORMS_LOG_SUM(t)                                                                                               \
    ((t) >= (T)1 && (t) < (T)__builtin_inf() ? (OPF_IS_F64 ? (T)norms_log_normal_f64((double)(t), opf_math_fma_ok)     \
                                                           : (T)norms_log_normal_f32((float)(t), opf_math_fma_ok))     \
                                             : opf_log(t))

/* y = (x - max) - log(sum(exp(x - max))), the sum from the chunks' sums of
 * exp(x - c). */
OPF_ROW_KERNEL(log_softmax, (x), (y), {
    const int64_t chunk = NORMS_CHUNK(n, 1024);
    T shift[NORMS_CHUNKS], sum[NORMS_CHUNKS], m = -(T)__builtin_inf();
    NORMS_EXP_CHUNKS(T, n, x, y, chunk, shift, sum, m, 0)
    T total = 0;
    for (int64_t at = 0, k = 0; at < n; at += chunk, k++) {
        total += sum[k] * NORMS_RESCALE(shift[k], m);
    }
    const T lse = NORMS_LOG_SUM(total);
    OPF_STORE_ROW(y, i, (x[i] - m) - lse);
})

OPF_ROW_KERNEL_TEAM(log_softmax_team, log_softmax, (x), (y), {
    T m, s, sum;
    NORMS_TEAM_EXP_SUM(m, s, sum);
    const T lse = opf_log(opf_team_sum(opf_team, sum) * opf_exp(s - m));
    OPF_TEAM_FOR(i, n) { y[i] = (x[i] - m) - lse; }
})

/* dx = dy - exp(y) * sum(dy) */
OPF_ROW_KERNEL(log_softmax_grad, (dy, y), (dx), {
    const T s = opf_sum(n, dy);
    OPF_STORE_ROW(dx, i, dy[i] - NORMS_EXP_ANY(y[i]) * s);
})

OPF_ROW_KERNEL_TEAM(log_softmax_grad_team, log_softmax_grad, (dy, y), (dx), {
    T d = 0;
    OPF_TEAM_FOR(i, n) { d += dy[i]; }
    const T s = opf_team_sum(opf_team, d);
    OPF_TEAM_FOR(i, n) { dx[i] = dy[i] - NORMS_EXP_ANY(y[i]) * s; }
})

/* With p = exp(y): gdy = ddx - <ddx, p> (also log_softmax's Jacobian applied
 * to ddx: its tangent rule), gy = -ddx * p * sum(dy) (zero without dy). */
OPF_ROW_KERNEL(log_softmax_grad_grad, (ddx, y, dy), (gdy, gy), {
    if (gdy != NULL) {
        for (int64_t i = 0; i < n; i++) {
            gdy[i] = opf_exp(y[i]);
        }
        const T a = opf_dot(n, ddx, gdy);
        for (int64_t i = 0; i < n; i++) {
            gdy[i] = ddx[i] - a;
        }
    }
    if (gy != NULL) {
        const T s = dy != NULL ? opf_sum(n, dy) : (T)0;
        for (int64_t i = 0; i < n; i++) {
            gy[i] = -(ddx[i] * opf_exp(y[i])) * s;
        }
    }
})

OPF_ROW_KERNEL_TEAM(log_softmax_grad_grad_team, log_softmax_grad_grad, (ddx, y, dy), (gdy, gy), {
    if (gdy != NULL) {
        T pa = 0;
        OPF_TEAM_FOR(i, n) { pa += ddx[i] * opf_exp(y[i]); }
        const T a = opf_team_sum(opf_team, pa);
        OPF_TEAM_FOR(i, n) { gdy[i] = ddx[i] - a; }
    }
    if (gy != NULL) {
        T ps = 0;
        if (dy != NULL) {
            OPF_TEAM_FOR(i, n) { ps += dy[i]; }
        }
        const T s = opf_team_sum(opf_team, ps);
        OPF_TEAM_FOR(i, n) { gy[i] = -(ddx[i] * opf_exp(y[i])) * s; }
    }
})

/* The derivative of log_softmax_grad_grad's gdy and gy along a tangent yt of
 * y (absent: zero); log_softmax_grad_grad itself gives those along ddx and
 * dy, in which it is linear. With p = exp(y), S = sum(dy):
 *   gdy = ddx - <ddx, p>  ->  gdyt = -<ddx, p yt>
 *   gy = -ddx p S         ->  gyt = -ddx p yt S
 * The second derivatives are symmetric: with a cotangent of gy as yt, gdyt
 * and gyt are the gradients of dy and y (log_softmax_grad_grad's own
 * gradient rule). */
/* (written once for the CPU body and the team body: see NORMS_SEQ_FOR) */
#define LOG_SOFTMAX_GRAD_GRAD_JVP_BODY(FOR, SUM, ONCE)                                                                 \
    double pa = 0, ps = 0;                                                                                             \
    FOR(i, n) {                                                                                                        \
        pa += NORMS_AT(ddx, i) * opf_exp(NORMS_AT(y, i)) * NORMS_OR(yt, i, 0);                                         \
        ps += NORMS_OR(dy, i, 0);                                                                                      \
    }                                                                                                                  \
    const double a = SUM(pa), s = SUM(ps);                                                                             \
    FOR(i, n) {                                                                                                        \
        if (gdyt != NULL) {                                                                                            \
            gdyt[i] = (T)(-a);                                                                                         \
        }                                                                                                              \
        if (gyt != NULL) {                                                                                             \
            gyt[i] = (T)(-(NORMS_AT(ddx, i) * opf_exp(NORMS_AT(y, i)) * NORMS_OR(yt, i, 0)) * s);                      \
        }                                                                                                              \
    }                                                                                                                  \
    (void)0

OPF_ROW_KERNEL(log_softmax_grad_grad_jvp, (ddx, y, dy, yt), (gdyt, gyt),
               { LOG_SOFTMAX_GRAD_GRAD_JVP_BODY(NORMS_SEQ_FOR, NORMS_SEQ_SUM, NORMS_SEQ_ONCE); })
OPF_ROW_KERNEL_TEAM(log_softmax_grad_grad_jvp_team, log_softmax_grad_grad_jvp, (ddx, y, dy, yt), (gdyt, gyt),
                    { LOG_SOFTMAX_GRAD_GRAD_JVP_BODY(OPF_TEAM_FOR, NORMS_TEAM_SUM, OPF_TEAM_ONCE); })

/* --- rms_norm ----------------------------------------------------------------------------------------------------- */

/* sum(g) and sum(g (x - mu)) with g = dy w, in one pass: the lanes of
 * opf_sum (64 floats, 32 doubles), each adding its elements' terms, then
 * added pairwise. */
#define NORMS_G_SUMS_FN(fn, type, lanes)                                                                               \
    OPF_KERNEL_FN void fn(int64_t n, const type *dy, const type *w, const type *x, type mu, type *sg, type *sgx) {     \
        type a[lanes], b[lanes];                                                                                       \
        for (int j = 0; j < lanes; j++) {                                                                              \
            a[j] = 0;                                                                                                  \
            b[j] = 0;                                                                                                  \
        }                                                                                                              \
        int64_t i = 0;                                                                                                 \
        for (; i + lanes <= n; i += lanes) {                                                                           \
            for (int j = 0; j < lanes; j++) {                                                                          \
                const type g = dy[i + j] * w[i + j];                                                                   \
                a[j] = a[j] + g;                                                                                       \
                b[j] = b[j] + g * (x[i + j] - mu);                                                                     \
            }                                                                                                          \
        }                                                                                                              \
        NORMS_PAIRWISE(a, lanes, NORMS_ADD, n)                                                                         \
        NORMS_PAIRWISE(b, lanes, NORMS_ADD, n)                                                                         \
        type sa = a[0], sb = b[0];                                                                                     \
        for (; i < n; i++) {                                                                                           \
            const type g = dy[i] * w[i];                                                                               \
            sa = sa + g;                                                                                               \
            sb = sb + g * (x[i] - mu);                                                                                 \
        }                                                                                                              \
        *sg = sa;                                                                                                      \
        *sgx = sb;                                                                                                     \
    }
NORMS_G_SUMS_FN(norms_g_sums_f32, float, 64)
NORMS_G_SUMS_FN(norms_g_sums_f64, double, 32)

/* sum(x - mu) and sum((x - mu)^2) in one pass, the lanes of opf_sum,
 * prefetching `ahead` bytes further on than x (0: nothing). */
#define NORMS_C_SUMS_FN(fn, type, lanes)                                                                               \
    OPF_KERNEL_FN void fn(int64_t n, const type *x, type mu, type *s1, type *s2, int64_t ahead) {                      \
        type a[lanes], b[lanes];                                                                                       \
        for (int j = 0; j < lanes; j++) {                                                                              \
            a[j] = 0;                                                                                                  \
            b[j] = 0;                                                                                                  \
        }                                                                                                              \
        int64_t i = 0;                                                                                                 \
        for (; i + lanes <= n; i += lanes) {                                                                           \
            if (ahead != 0) {                                                                                          \
                opf_prefetch_at(x + i, ahead, lanes * (int64_t)sizeof(type));                                          \
            }                                                                                                          \
            for (int j = 0; j < lanes; j++) {                                                                          \
                const type c = x[i + j] - mu;                                                                          \
                a[j] = a[j] + c;                                                                                       \
                b[j] = b[j] + c * c;                                                                                   \
            }                                                                                                          \
        }                                                                                                              \
        NORMS_PAIRWISE(a, lanes, NORMS_ADD, n)                                                                         \
        NORMS_PAIRWISE(b, lanes, NORMS_ADD, n)                                                                         \
        type sa = a[0], sb = b[0];                                                                                     \
        for (; i < n; i++) {                                                                                           \
            const type c = x[i] - mu;                                                                                  \
            sa = sa + c;                                                                                               \
            sb = sb + c * c;                                                                                           \
        }                                                                                                              \
        *s1 = sa;                                                                                                      \
        *s2 = sb;                                                                                                      \
    }
NORMS_C_SUMS_FN(norms_c_sums_f32, float, 64)
NORMS_C_SUMS_FN(norms_c_sums_f64, double, 32)

/* y = x * rstd * w with rstd = 1 / sqrt(mean(x^2) + eps); a row of length 0
 * has rstd NaN (as torch's _fused_rms_norm). */
OPF_ROW_KERNEL(rms_norm, (x, w), (y, rstd), {
    const T eps = NORMS_EPS(attrs[0].f);
    const T r = (T)1 / opf_sqrt(opf_dot(n, x, x) / (T)n + eps);
    rstd[0] = r;
    if (w != NULL) {
        OPF_STORE_ROW(y, i, (x[i] * r) * w[i]);
    } else {
        OPF_STORE_ROW(y, i, x[i] * r);
    }
})

OPF_ROW_KERNEL_TEAM(rms_norm_team, rms_norm, (x, w), (y, rstd), {
    const T eps = NORMS_EPS(attrs[0].f);
    T ss = 0;
    OPF_TEAM_FOR(i, n) { ss += x[i] * x[i]; }
    const T r = (T)1 / opf_sqrt(opf_team_sum(opf_team, ss) / (T)n + eps);
    OPF_TEAM_ONCE { rstd[0] = r; }
    OPF_TEAM_FOR(i, n) { y[i] = w != NULL ? (x[i] * r) * w[i] : x[i] * r; }
})

/* With g = dy * w, r = rstd: dx = r g - x (r^3 / M) (<g, x> + drstd);
 * dw = sum over rows of dy x r. dy and drstd absent: zero. */
OPF_ROW_KERNEL(rms_norm_grad, (x, rstd, dy, w, drstd), (dx, dw), {
    const T r = rstd[0], drs = drstd != NULL ? drstd[0] : (T)0;
    if (dx != NULL && n > 0 && dy != NULL) {
        T s, sg;
        if (w != NULL) {
            if (OPF_IS_F64) {
                norms_g_sums_f64(n, (const double *)dy, (const double *)w, (const double *)x, 0.0, (double *)&sg,
                                 (double *)&s);
            } else {
                norms_g_sums_f32(n, (const float *)dy, (const float *)w, (const float *)x, 0.0f, (float *)&sg,
                                 (float *)&s);
            }
        } else {
            s = opf_dot(n, dy, x);
        }
        const T c = (r * r * r / (T)n) * (s + drs);
        if (w != NULL && dw != NULL) { /* training's case: dx and dw in one pass */
            OPF_STORE_ROW(dx, i, (dw[i] += (dy[i] * x[i]) * r, r * (dy[i] * w[i]) - x[i] * c));
            return;
        }
        if (w != NULL) {
            for (int64_t i = 0; i < n; i++) {
                dx[i] = r * (dy[i] * w[i]) - x[i] * c;
            }
        } else {
            for (int64_t i = 0; i < n; i++) {
                dx[i] = r * dy[i] - x[i] * c;
            }
        }
    } else if (dx != NULL && n > 0) {
        const T c = (r * r * r / (T)n) * drs;
        for (int64_t i = 0; i < n; i++) {
            dx[i] = -(x[i] * c);
        }
    }
    if (dw != NULL && dy != NULL) {
        for (int64_t i = 0; i < n; i++) {
            dw[i] += (dy[i] * x[i]) * r;
        }
    }
})

OPF_ROW_KERNEL_TEAM(rms_norm_grad_team, rms_norm_grad, (x, rstd, dy, w, drstd), (dx, dw), {
    const T r = rstd[0], drs = drstd != NULL ? drstd[0] : (T)0;
    if (dx != NULL && n > 0 && dy != NULL) {
        T sgx = 0;
        OPF_TEAM_FOR(i, n) { sgx += (w != NULL ? dy[i] * w[i] : dy[i]) * x[i]; }
        const T c = (r * r * r / (T)n) * (opf_team_sum(opf_team, sgx) + drs);
        OPF_TEAM_FOR(i, n) { dx[i] = r * (w != NULL ? dy[i] * w[i] : dy[i]) - x[i] * c; }
    } else if (dx != NULL && n > 0) {
        const T c = (r * r * r / (T)n) * drs;
        OPF_TEAM_FOR(i, n) { dx[i] = -(x[i] * c); }
    }
    if (dw != NULL && dy != NULL) {
        OPF_TEAM_FOR(i, n) { dw[i] += (dy[i] * x[i]) * r; }
    }
})

/* The gradients of rms_norm_grad's dx and dw (cotangents ddx, ddw; absent:
 * zero) with respect to each of its inputs. With c = r^3 / M, g = dy w,
 * S = <g, x> + drstd, a = <ddx, x>:
 *   gx = -c (ddx S + a g) + r ddw dy
 *   grstd = <ddx, g> - 3 r^2 / M a S + <ddw, dy x>
 *   gdy = w (r ddx - c a x) + r ddw x      gw = sum over rows of dy (r ddx - c a x)
 *   gdrstd = -c a
 * gdy and gdrstd do not involve dy: with ddx = x', ddw = w' they are
 * rms_norm's tangents y' and rstd' (its tangent rule). */
/* (written once for the CPU body and the team body: see NORMS_SEQ_FOR) */
#define RMS_NORM_GRAD_GRAD_BODY(FOR, SUM, ONCE)                                                                        \
    const double r = rstd[0], m = n > 0 ? (double)n : 1, c = r * r * r / m, drs = NORMS_OR(drstd, 0, 0);               \
    double ps = 0, pa = 0, pdg = 0, pe = 0;                                                                            \
    FOR(i, n) {                                                                                                        \
        const double dyi = NORMS_OR(dy, i, 0), g = dyi * NORMS_OR(w, i, 1), dd = NORMS_OR(ddx, i, 0);                  \
        ps += g * NORMS_AT(x, i);                                                                                      \
        pa += dd * NORMS_AT(x, i);                                                                                     \
        pdg += dd * g;                                                                                                 \
        pe += NORMS_OR(ddw, i, 0) * dyi * NORMS_AT(x, i);                                                              \
    }                                                                                                                  \
    const double s = SUM(ps) + drs, a = SUM(pa), dg = SUM(pdg), e = SUM(pe);                                           \
    FOR(i, n) {                                                                                                        \
        const double xi = NORMS_AT(x, i), dyi = NORMS_OR(dy, i, 0), wi = NORMS_OR(w, i, 1), dd = NORMS_OR(ddx, i, 0),  \
                     dw_i = NORMS_OR(ddw, i, 0), proj = r * dd - c * a * xi;                                           \
        if (gdy != NULL) {                                                                                             \
            gdy[i] = (T)(wi * proj + r * dw_i * xi);                                                                   \
        }                                                                                                              \
        if (gx != NULL) {                                                                                              \
            gx[i] = (T)(-c * (dd * s + a * dyi * wi) + r * dw_i * dyi);                                                \
        }                                                                                                              \
        if (gw != NULL) {                                                                                              \
            gw[i] += (T)(dyi * proj);                                                                                  \
        }                                                                                                              \
    }                                                                                                                  \
    ONCE {                                                                                                             \
        if (grstd != NULL) {                                                                                           \
            grstd[0] = (T)(dg - 3 * r * r / m * a * s + e);                                                            \
        }                                                                                                              \
        if (gdrstd != NULL) {                                                                                          \
            gdrstd[0] = (T)(-c * a);                                                                                   \
        }                                                                                                              \
    }                                                                                                                  \
    (void)0

OPF_ROW_KERNEL(rms_norm_grad_grad, (x, rstd, dy, w, drstd, ddx, ddw), (gx, grstd, gdy, gw, gdrstd),
               { RMS_NORM_GRAD_GRAD_BODY(NORMS_SEQ_FOR, NORMS_SEQ_SUM, NORMS_SEQ_ONCE); })
OPF_ROW_KERNEL_TEAM(rms_norm_grad_grad_team, rms_norm_grad_grad, (x, rstd, dy, w, drstd, ddx, ddw),
                    (gx, grstd, gdy, gw, gdrstd),
                    { RMS_NORM_GRAD_GRAD_BODY(OPF_TEAM_FOR, NORMS_TEAM_SUM, OPF_TEAM_ONCE); })

/* The derivative of rms_norm_grad's dx and dw along tangents xt, rstdt, wt
 * of x, rstd and w (absent: zero); rms_norm_grad itself gives the part of dy
 * and drstd, in which it is linear. With c = r^3 / M, g = dy w, S = <g, x> +
 * drstd, g' = dy wt:
 *   dxt = -c (xt S + x <g, xt>) + rstdt (g - 3 r^2 x S / M) + r g' - c x <g', x>
 *   dwt = sum over rows of dy (xt r + x rstdt) */
/* (written once for the CPU body and the team body: see NORMS_SEQ_FOR) */
#define RMS_NORM_GRAD_JVP_BODY(FOR, SUM, ONCE)                                                                         \
    const double r = rstd[0], m = n > 0 ? (double)n : 1, c = r * r * r / m, rt = NORMS_OR(rstdt, 0, 0);                \
    double ps = 0, pgxt = 0, pgtx = 0;                                                                                 \
    FOR(i, n) {                                                                                                        \
        const double dyi = NORMS_OR(dy, i, 0), g = dyi * NORMS_OR(w, i, 1);                                            \
        ps += g * NORMS_AT(x, i);                                                                                      \
        pgxt += g * NORMS_OR(xt, i, 0);                                                                                \
        pgtx += dyi * NORMS_OR(wt, i, 0) * NORMS_AT(x, i);                                                             \
    }                                                                                                                  \
    const double s = NORMS_OR(drstd, 0, 0) + SUM(ps), gxt = SUM(pgxt), gtx = SUM(pgtx);                                \
    FOR(i, n) {                                                                                                        \
        const double xi = NORMS_AT(x, i), dyi = NORMS_OR(dy, i, 0), g = dyi * NORMS_OR(w, i, 1),                       \
                     xti = NORMS_OR(xt, i, 0), gt = dyi * NORMS_OR(wt, i, 0);                                          \
        if (dxt != NULL) {                                                                                             \
            dxt[i] = (T)(-c * (xti * s + xi * gxt) + rt * (g - 3 * r * r * xi * s / m) + r * gt - c * xi * gtx);       \
        }                                                                                                              \
        if (dwt != NULL) {                                                                                             \
            dwt[i] += (T)(dyi * (xti * r + xi * rt));                                                                  \
        }                                                                                                              \
    }                                                                                                                  \
    (void)0

OPF_ROW_KERNEL(rms_norm_grad_jvp, (x, rstd, dy, w, drstd, xt, rstdt, wt), (dxt, dwt),
               { RMS_NORM_GRAD_JVP_BODY(NORMS_SEQ_FOR, NORMS_SEQ_SUM, NORMS_SEQ_ONCE); })
OPF_ROW_KERNEL_TEAM(rms_norm_grad_jvp_team, rms_norm_grad_jvp, (x, rstd, dy, w, drstd, xt, rstdt, wt), (dxt, dwt),
                    { RMS_NORM_GRAD_JVP_BODY(OPF_TEAM_FOR, NORMS_TEAM_SUM, OPF_TEAM_ONCE); })

/* The derivatives of rms_norm_grad_grad's outputs along a tangent xt of x
 * (rms_norm_grad_grad_jvp) and rstdt of rstd (rms_norm_grad_grad_jvp_rstd);
 * absent: zero; rms_norm_grad_grad_jvp_w (below) does w. rms_norm_grad_grad
 * is linear in (dy, drstd) and in (ddx, ddw): it gives the rest of its
 * tangent rule itself. With c = r^3 / M, g = dy w, S = <g, x> + drstd, a = <ddx, x>,
 * its outputs are
 *   gx = -c (ddx S + a g) + r ddw dy          grstd = <ddx, g> - 3 r^2 a S / M + <ddw, dy x>
 *   gdy = w (r ddx - c a x) + r ddw x         gw = sum over rows of dy (r ddx - c a x)
 *   gdrstd = -c a.
 * Along xt (S' = <g, xt>, a' = <ddx, xt>, c and r fixed):
 *   gxt = -c (ddx S' + a' g)                  grstdt = -3 r^2 (a' S + a S') / M + <ddw, dy xt>
 *   gdyt = -c w (a' x + a xt) + r ddw xt      gwt = sum over rows of -c dy (a' x + a xt)
 *   gdrstdt = -c a'
 * Along rstdt (c' = 3 r^2 rstdt / M):
 *   gxt = -c' (ddx S + a g) + rstdt ddw dy    grstdt = -6 r rstdt a S / M
 *   gdyt = w (rstdt ddx - c' a x) + rstdt ddw x
 *   gwt = sum over rows of dy (rstdt ddx - c' a x)
 *   gdrstdt = -c' a
 * These are second derivatives of <ddx, dx> + <ddw, dw> (rms_norm_grad's
 * outputs), symmetric: with cotangents of gx, grstd as xt, rstdt they are
 * also the gradients that rms_norm_grad_grad's gradient rule takes from
 * them. */
#define NORMS_RMS_GG_SUMS(FOR, SUM)                                                                                    \
    const double r = rstd[0], m = n > 0 ? (double)n : 1;                                                               \
    double ps_ = 0, pa_ = 0;                                                                                           \
    FOR(i, n) {                                                                                                        \
        ps_ += NORMS_OR(dy, i, 0) * NORMS_OR(w, i, 1) * NORMS_AT(x, i);                                                \
        pa_ += NORMS_OR(ddx, i, 0) * NORMS_AT(x, i);                                                                   \
    }                                                                                                                  \
    const double s = NORMS_OR(drstd, 0, 0) + SUM(ps_), a = SUM(pa_);

/* (written once for the CPU body and the team body: see NORMS_SEQ_FOR) */
#define RMS_NORM_GRAD_GRAD_JVP_BODY(FOR, SUM, ONCE)                                                                    \
    NORMS_RMS_GG_SUMS(FOR, SUM)                                                                                        \
    const double c = r * r * r / m;                                                                                    \
    double pst = 0, pat = 0, pet = 0;                                                                                  \
    FOR(i, n) {                                                                                                        \
        const double dyi = NORMS_OR(dy, i, 0), xti = NORMS_OR(xt, i, 0);                                               \
        pst += dyi * NORMS_OR(w, i, 1) * xti;                                                                          \
        pat += NORMS_OR(ddx, i, 0) * xti;                                                                              \
        pet += NORMS_OR(ddw, i, 0) * dyi * xti;                                                                        \
    }                                                                                                                  \
    const double st = SUM(pst), at = SUM(pat), et = SUM(pet);                                                          \
    FOR(i, n) {                                                                                                        \
        const double xi = NORMS_AT(x, i), xti = NORMS_OR(xt, i, 0), dyi = NORMS_OR(dy, i, 0), wi = NORMS_OR(w, i, 1),  \
                     dd = NORMS_OR(ddx, i, 0), proj = -c * (at * xi + a * xti);                                        \
        if (gxt != NULL) {                                                                                             \
            gxt[i] = (T)(-c * (dd * st + at * dyi * wi));                                                              \
        }                                                                                                              \
        if (gdyt != NULL) {                                                                                            \
            gdyt[i] = (T)(wi * proj + r * NORMS_OR(ddw, i, 0) * xti);                                                  \
        }                                                                                                              \
        if (gwt != NULL) {                                                                                             \
            gwt[i] += (T)(dyi * proj);                                                                                 \
        }                                                                                                              \
    }                                                                                                                  \
    ONCE {                                                                                                             \
        if (grstdt != NULL) {                                                                                          \
            grstdt[0] = (T)(-3 * r * r * (at * s + a * st) / m + et);                                                  \
        }                                                                                                              \
        if (gdrstdt != NULL) {                                                                                         \
            gdrstdt[0] = (T)(-c * at);                                                                                 \
        }                                                                                                              \
    }                                                                                                                  \
    (void)0

OPF_ROW_KERNEL(rms_norm_grad_grad_jvp, (x, rstd, dy, w, drstd, ddx, ddw, xt), (gxt, grstdt, gdyt, gwt, gdrstdt),
               { RMS_NORM_GRAD_GRAD_JVP_BODY(NORMS_SEQ_FOR, NORMS_SEQ_SUM, NORMS_SEQ_ONCE); })
OPF_ROW_KERNEL_TEAM(rms_norm_grad_grad_jvp_team, rms_norm_grad_grad_jvp, (x, rstd, dy, w, drstd, ddx, ddw, xt),
                    (gxt, grstdt, gdyt, gwt, gdrstdt),
                    { RMS_NORM_GRAD_GRAD_JVP_BODY(OPF_TEAM_FOR, NORMS_TEAM_SUM, OPF_TEAM_ONCE); })

/* (written once for the CPU body and the team body: see NORMS_SEQ_FOR) */
#define RMS_NORM_GRAD_GRAD_JVP_RSTD_BODY(FOR, SUM, ONCE)                                                               \
    NORMS_RMS_GG_SUMS(FOR, SUM)                                                                                        \
    const double rt = NORMS_OR(rstdt, 0, 0), ct = 3 * r * r * rt / m;                                                  \
    FOR(i, n) {                                                                                                        \
        const double xi = NORMS_AT(x, i), dyi = NORMS_OR(dy, i, 0), wi = NORMS_OR(w, i, 1), dd = NORMS_OR(ddx, i, 0),  \
                     dw_i = NORMS_OR(ddw, i, 0), proj = rt * dd - ct * a * xi;                                         \
        if (gxt != NULL) {                                                                                             \
            gxt[i] = (T)(-ct * (dd * s + a * dyi * wi) + rt * dw_i * dyi);                                             \
        }                                                                                                              \
        if (gdyt != NULL) {                                                                                            \
            gdyt[i] = (T)(wi * proj + rt * dw_i * xi);                                                                 \
        }                                                                                                              \
        if (gwt != NULL) {                                                                                             \
            gwt[i] += (T)(dyi * proj);                                                                                 \
        }                                                                                                              \
    }                                                                                                                  \
    ONCE {                                                                                                             \
        if (grstdt != NULL) {                                                                                          \
            grstdt[0] = (T)(-6 * r * rt * a * s / m);                                                                  \
        }                                                                                                              \
        if (gdrstdt != NULL) {                                                                                         \
            gdrstdt[0] = (T)(-ct * a);                                                                                 \
        }                                                                                                              \
    }                                                                                                                  \
    (void)0

OPF_ROW_KERNEL(rms_norm_grad_grad_jvp_rstd, (x, rstd, dy, w, drstd, ddx, ddw, rstdt), (gxt, grstdt, gdyt, gwt, gdrstdt),
               { RMS_NORM_GRAD_GRAD_JVP_RSTD_BODY(NORMS_SEQ_FOR, NORMS_SEQ_SUM, NORMS_SEQ_ONCE); })
OPF_ROW_KERNEL_TEAM(rms_norm_grad_grad_jvp_rstd_team, rms_norm_grad_grad_jvp_rstd,
                    (x, rstd, dy, w, drstd, ddx, ddw, rstdt), (gxt, grstdt, gdyt, gwt, gdrstdt),
                    { RMS_NORM_GRAD_GRAD_JVP_RSTD_BODY(OPF_TEAM_FOR, NORMS_TEAM_SUM, OPF_TEAM_ONCE); })

/* Along wt (rms_norm_grad_grad_jvp_w): w enters through g = dy w only, so
 * gw and gdrstd do not move and the others take the part of g linear in w
 * with g' = dy wt (drstd and ddw drop out):
 *   gxt = -c (ddx <g', x> + a g')    grstdt = <ddx, g'> - 3 r^2 a <g', x> / M    gdyt = wt (r ddx - c a x)
 * A row of its own, not rms_norm_grad_grad with wt as its w: an absent
 * tangent must count as zero, an absent w counts as ones. (Written once for
 * the CPU body and the team body: see NORMS_SEQ_FOR.) */
#define RMS_NORM_GRAD_GRAD_JVP_W_BODY(FOR, SUM, ONCE)                                                                  \
    const double r = rstd[0], m = n > 0 ? (double)n : 1, c = r * r * r / m;                                            \
    double pa = 0, psw = 0, pdgw = 0;                                                                                  \
    FOR(i, n) {                                                                                                        \
        const double xi = NORMS_AT(x, i), dd = NORMS_OR(ddx, i, 0), gt = NORMS_OR(dy, i, 0) * NORMS_OR(wt, i, 0);      \
        pa += dd * xi;                                                                                                 \
        psw += gt * xi;                                                                                                \
        pdgw += dd * gt;                                                                                               \
    }                                                                                                                  \
    const double a = SUM(pa), sw = SUM(psw), dgw = SUM(pdgw);                                                          \
    FOR(i, n) {                                                                                                        \
        const double dd = NORMS_OR(ddx, i, 0), wti = NORMS_OR(wt, i, 0);                                               \
        if (gxt != NULL) {                                                                                             \
            gxt[i] = (T)(-c * (dd * sw + a * NORMS_OR(dy, i, 0) * wti));                                               \
        }                                                                                                              \
        if (gdyt != NULL) {                                                                                            \
            gdyt[i] = (T)(wti * (r * dd - c * a * NORMS_AT(x, i)));                                                    \
        }                                                                                                              \
    }                                                                                                                  \
    ONCE {                                                                                                             \
        if (grstdt != NULL) {                                                                                          \
            grstdt[0] = (T)(dgw - 3 * r * r * a * sw / m);                                                             \
        }                                                                                                              \
    }                                                                                                                  \
    (void)0

OPF_ROW_KERNEL(rms_norm_grad_grad_jvp_w, (x, rstd, dy, ddx, wt), (gxt, grstdt, gdyt),
               { RMS_NORM_GRAD_GRAD_JVP_W_BODY(NORMS_SEQ_FOR, NORMS_SEQ_SUM, NORMS_SEQ_ONCE); })
OPF_ROW_KERNEL_TEAM(rms_norm_grad_grad_jvp_w_team, rms_norm_grad_grad_jvp_w, (x, rstd, dy, ddx, wt),
                    (gxt, grstdt, gdyt),
                    { RMS_NORM_GRAD_GRAD_JVP_W_BODY(OPF_TEAM_FOR, NORMS_TEAM_SUM, OPF_TEAM_ONCE); })

/* --- layer_norm --------------------------------------------------------------------------------------------------- */

/* y = (x - mean) * rstd * w + b with mean and rstd = 1 / sqrt(var + eps) of
 * the row (var biased: divided by M). The statistics come from one pass over
 * the row (the one that reads it from memory): the sums s1 of x - K and s2 of
 * (x - K)^2 around a centre K, the mean of the row's first 64 elements (its
 * first element when shorter), which is typically close to the row's mean;
 * then mean = K + s1 / M and var = s2 / M - (s1 / M)^2. That difference
 * cancels as much as (mean - K)^2 is larger than var, so when it exceeds
 * 4 var (a row whose first elements are far from the rest) a second pass
 * recomputes s1 and s2 around the mean just found, from the row in cache:
 * the corrected two-pass algorithm. Never the uncentred E[x^2] - E[x]^2. A
 * row of equal values has K exact (64 equal values add exactly pairwise), so
 * s1 = s2 = 0 and y = b exactly. NaN or inf in the row: NaN statistics, as
 * in two passes. A row of length 0 has mean 0 and rstd NaN (as
 * torch.native_layer_norm). The statistics pass asks for the next row as it
 * reads this one (opf_prefetch_at): rows too short for their output to be
 * streamed (OPF_STORE_ROW prefetches among its stores) have no other
 * prefetch, and rows of 64 floats took 1.2-1.3 times as long without it
 * on one thread. */
OPF_ROW_KERNEL(layer_norm, (x, w, b), (y, mean, rstd), {
    T k = n >= 64 ? opf_sum(64, x) / (T)64 : n > 0 ? x[0] : (T)0;
    T s1, s2, d = 0, var = 0;
    int64_t ahead = NORMS_AHEAD(n); /* the next row, where rows lie one after the other */
    for (int pass = 0; pass < 2; pass++, ahead = 0) {
        if (OPF_IS_F64) {
            norms_c_sums_f64(n, (const double *)x, (double)k, (double *)&s1, (double *)&s2, ahead);
        } else {
            norms_c_sums_f32(n, (const float *)x, (float)k, (float *)&s1, (float *)&s2, ahead);
        }
        d = n > 0 ? s1 / (T)n : (T)0;
        var = n > 0 ? s2 / (T)n - d * d : s2 / (T)n; /* NaN for M = 0 */
        if (d * d <= 4 * var || n == 0) {
            break;
        }
        k = k + d; /* (NaN or inf: a second pass, NaN throughout as in two passes) */
    }
    const T mu = k + d;
    const T r = (T)1 / opf_sqrt(opf_maximum(var, (T)0) + (T)attrs[0].f); /* NaN stays NaN (M = 0 too) */
    mean[0] = mu;
    rstd[0] = r;
    if (w != NULL && b != NULL) {
        OPF_STORE_ROW(y, i, ((x[i] - mu) * r) * w[i] + b[i]);
    } else if (w != NULL) {
        OPF_STORE_ROW(y, i, ((x[i] - mu) * r) * w[i]);
    } else if (b != NULL) {
        OPF_STORE_ROW(y, i, (x[i] - mu) * r + b[i]);
    } else {
        OPF_STORE_ROW(y, i, (x[i] - mu) * r);
    }
})

/* On CUDA, a team per row: the same statistics as above, centred on x[0]
 * (exact for a row of equal values), with the same second pass around the
 * mean when the first one cancels. */
OPF_ROW_KERNEL_TEAM(layer_norm_team, layer_norm, (x, w, b), (y, mean, rstd), {
    T k = n > 0 ? x[0] : (T)0, d = 0, var = 0;
    for (int pass = 0; pass < 2; pass++) {
        T a = 0, q = 0;
        OPF_TEAM_FOR(i, n) {
            const T c = x[i] - k;
            a += c;
            q += c * c;
        }
        const T s1 = opf_team_sum(opf_team, a), s2 = opf_team_sum(opf_team, q);
        d = n > 0 ? s1 / (T)n : (T)0;
        var = n > 0 ? s2 / (T)n - d * d : s2 / (T)n; /* NaN for M = 0 */
        if (d * d <= 4 * var || n == 0) {
            break;
        }
        k = k + d;
    }
    const T mu = k + d;
    const T r = (T)1 / opf_sqrt(opf_maximum(var, (T)0) + (T)attrs[0].f);
    OPF_TEAM_ONCE {
        mean[0] = mu;
        rstd[0] = r;
    }
    OPF_TEAM_FOR(i, n) {
        const T xh = (x[i] - mu) * r;
        const T v = w != NULL ? xh * w[i] : xh;
        y[i] = b != NULL ? v + b[i] : v;
    }
})

/* With xh = (x - mean) r, g = dy w, r = rstd:
 *   dx = r (g - mean(g) - xh mean(g xh)) + dmean / M - drstd r^2 xh / M
 *   dw = sum over rows of dy xh, db = sum over rows of dy.
 * dy, dmean and drstd absent: zero. Two passes over the row: the sums, then
 * dx, dw and db. */
OPF_ROW_KERNEL(layer_norm_grad, (x, mean, rstd, dy, w, dmean, drstd), (dx, dw, db), {
    const T mu = mean[0], r = rstd[0];
    if (dx != NULL && n > 0) {
        T sg = 0, sgx = 0;
        if (dy != NULL && w != NULL) {
            if (OPF_IS_F64) {
                norms_g_sums_f64(n, (const double *)dy, (const double *)w, (const double *)x, (double)mu, (double *)&sg,
                                 (double *)&sgx);
            } else {
                norms_g_sums_f32(n, (const float *)dy, (const float *)w, (const float *)x, (float)mu, (float *)&sg,
                                 (float *)&sgx);
            }
            sgx = sgx * r;
        } else if (dy != NULL) {
            for (int64_t i = 0; i < n; i++) {
                dx[i] = dy[i] * (x[i] - mu);
            }
            sg = opf_sum(n, dy);
            sgx = opf_sum(n, dx) * r;
        }
        const T inv_n = (T)1 / (T)n;
        const T c0 = (dmean != NULL ? dmean[0] * inv_n : (T)0) - r * sg * inv_n;
        const T c1 = r * sgx * inv_n + (drstd != NULL ? drstd[0] * r * r * inv_n : (T)0);
        if (dy != NULL && w != NULL && dw != NULL && db != NULL) { /* training's case: one pass for all three */
            OPF_STORE_ROW(
                dx, i,
                (dw[i] += dy[i] * ((x[i] - mu) * r), db[i] += dy[i], r * (dy[i] * w[i]) + c0 - ((x[i] - mu) * r) * c1));
            return;
        }
        if (dy != NULL && w != NULL) {
            for (int64_t i = 0; i < n; i++) {
                dx[i] = r * (dy[i] * w[i]) + c0 - ((x[i] - mu) * r) * c1;
            }
        } else if (dy != NULL) {
            for (int64_t i = 0; i < n; i++) {
                dx[i] = r * dy[i] + c0 - ((x[i] - mu) * r) * c1;
            }
        } else {
            for (int64_t i = 0; i < n; i++) {
                dx[i] = c0 - ((x[i] - mu) * r) * c1;
            }
        }
    }
    if (dw != NULL && dy != NULL) {
        for (int64_t i = 0; i < n; i++) {
            dw[i] += dy[i] * ((x[i] - mu) * r);
        }
    }
    if (db != NULL && dy != NULL) {
        for (int64_t i = 0; i < n; i++) {
            db[i] += dy[i];
        }
    }
})

OPF_ROW_KERNEL_TEAM(layer_norm_grad_team, layer_norm_grad, (x, mean, rstd, dy, w, dmean, drstd), (dx, dw, db), {
    const T mu = mean[0], r = rstd[0];
    if (dx != NULL && n > 0) {
        T a = 0, q = 0;
        if (dy != NULL) {
            OPF_TEAM_FOR(i, n) {
                const T g = w != NULL ? dy[i] * w[i] : dy[i];
                a += g;
                q += g * (x[i] - mu);
            }
        }
        const T sg = opf_team_sum(opf_team, a), sgx = opf_team_sum(opf_team, q) * r;
        const T inv_n = (T)1 / (T)n;
        const T c0 = (dmean != NULL ? dmean[0] * inv_n : (T)0) - r * sg * inv_n;
        const T c1 = r * sgx * inv_n + (drstd != NULL ? drstd[0] * r * r * inv_n : (T)0);
        if (dy != NULL) {
            OPF_TEAM_FOR(i, n) { dx[i] = r * (w != NULL ? dy[i] * w[i] : dy[i]) + c0 - ((x[i] - mu) * r) * c1; }
        } else {
            OPF_TEAM_FOR(i, n) { dx[i] = c0 - ((x[i] - mu) * r) * c1; }
        }
    }
    if (dy != NULL) {
        OPF_TEAM_FOR(i, n) {
            if (dw != NULL) {
                dw[i] += dy[i] * ((x[i] - mu) * r);
            }
            if (db != NULL) {
                db[i] += dy[i];
            }
        }
    }
})

/* The gradients of layer_norm_grad's dx (cotangent ddx; absent: zero) with
 * respect to each of its inputs. With xh = (x - mean) r, g = dy w,
 * A = sum(ddx), B = <ddx, xh>, Sg = sum(g), Sgx = <g, xh>:
 *   proj = r (ddx - A / M - xh B / M)
 *   H = -(r / M) (ddx Sgx + B g) - drstd r^2 ddx / M
 *   gx = r H, gmean = -r sum(H),
 *   grstd = <ddx, g> - (A Sg + B Sgx) / M - 2 drstd r B / M + <H, x - mean>
 *   gdy = w proj, gw = sum over rows of dy proj
 *   gdmean = A / M, gdrstd = -r^2 B / M
 * (layer_norm_grad_grad_affine adds the parts of dw's and db's cotangents.)
 * gdy, gdmean and gdrstd do not involve dy: with ddx = x' they are
 * layer_norm's tangents y' (before w' and b'), mean' and rstd'. */
/* (written once for the CPU body and the team body: see NORMS_SEQ_FOR) */
#define LAYER_NORM_GRAD_GRAD_BODY(FOR, SUM, ONCE)                                                                      \
    const double mu = mean[0], r = rstd[0], m = n > 0 ? (double)n : 1, drs = NORMS_OR(drstd, 0, 0);                    \
    double pa = 0, pb = 0, pg = 0, pgx = 0, pdg = 0;                                                                   \
    (void)dmean; /* dx = ... + dmean / M: dmean's value enters no gradient */                                          \
    FOR(i, n) {                                                                                                        \
        const double xh = (NORMS_AT(x, i) - mu) * r, g = NORMS_OR(dy, i, 0) * NORMS_OR(w, i, 1),                       \
                     dd = NORMS_OR(ddx, i, 0);                                                                         \
        pa += dd;                                                                                                      \
        pb += dd * xh;                                                                                                 \
        pg += g;                                                                                                       \
        pgx += g * xh;                                                                                                 \
        pdg += dd * g;                                                                                                 \
    }                                                                                                                  \
    const double sa = SUM(pa), sb = SUM(pb), sg = SUM(pg), sgx = SUM(pgx), dg = SUM(pdg);                              \
    double ph = 0, phx = 0;                                                                                            \
    FOR(i, n) {                                                                                                        \
        const double xc = NORMS_AT(x, i) - mu, xh = xc * r, dyi = NORMS_OR(dy, i, 0), wi = NORMS_OR(w, i, 1),          \
                     dd = NORMS_OR(ddx, i, 0);                                                                         \
        const double proj = r * (dd - sa / m - xh * sb / m);                                                           \
        const double h = -(r / m) * (dd * sgx + sb * dyi * wi) - drs * r * r * dd / m;                                 \
        ph += h;                                                                                                       \
        phx += h * xc;                                                                                                 \
        if (gdy != NULL) {                                                                                             \
            gdy[i] = (T)(wi * proj);                                                                                   \
        }                                                                                                              \
        if (gx != NULL) {                                                                                              \
            gx[i] = (T)(r * h);                                                                                        \
        }                                                                                                              \
        if (gw != NULL) {                                                                                              \
            gw[i] += (T)(dyi * proj);                                                                                  \
        }                                                                                                              \
    }                                                                                                                  \
    const double sh = SUM(ph), shx = SUM(phx);                                                                         \
    ONCE {                                                                                                             \
        if (gmean != NULL) {                                                                                           \
            gmean[0] = (T)(-r * sh);                                                                                   \
        }                                                                                                              \
        if (grstd != NULL) {                                                                                           \
            grstd[0] = (T)(dg - (sa * sg + sb * sgx) / m - 2 * drs * r * sb / m + shx);                                \
        }                                                                                                              \
        if (gdmean != NULL) {                                                                                          \
            gdmean[0] = (T)(sa / m);                                                                                   \
        }                                                                                                              \
        if (gdrstd != NULL) {                                                                                          \
            gdrstd[0] = (T)(-r * r * sb / m);                                                                          \
        }                                                                                                              \
    }                                                                                                                  \
    (void)0

OPF_ROW_KERNEL(layer_norm_grad_grad, (x, mean, rstd, dy, w, dmean, drstd, ddx),
               (gx, gmean, grstd, gdy, gw, gdmean, gdrstd),
               { LAYER_NORM_GRAD_GRAD_BODY(NORMS_SEQ_FOR, NORMS_SEQ_SUM, NORMS_SEQ_ONCE); })
OPF_ROW_KERNEL_TEAM(layer_norm_grad_grad_team, layer_norm_grad_grad, (x, mean, rstd, dy, w, dmean, drstd, ddx),
                    (gx, gmean, grstd, gdy, gw, gdmean, gdrstd),
                    { LAYER_NORM_GRAD_GRAD_BODY(OPF_TEAM_FOR, NORMS_TEAM_SUM, OPF_TEAM_ONCE); })

/* The gradients of layer_norm_grad's dw and db (cotangents ddw, ddb; absent:
 * zero) with respect to x, mean, rstd and dy. With xh = (x - mean) r and
 * H = ddw dy: gx = r H, gmean = -r sum(H), grstd = <H, x - mean>,
 * gdy = ddw xh + ddb (with ddw = w', ddb = b': layer_norm's tangent y' from
 * w' and b'). */
/* (written once for the CPU body and the team body: see NORMS_SEQ_FOR) */
#define LAYER_NORM_GRAD_GRAD_AFFINE_BODY(FOR, SUM, ONCE)                                                               \
    const double mu = mean[0], r = rstd[0];                                                                            \
    double ph = 0, phx = 0;                                                                                            \
    FOR(i, n) {                                                                                                        \
        const double xc = NORMS_AT(x, i) - mu, h = NORMS_OR(ddw, i, 0) * NORMS_OR(dy, i, 0);                           \
        ph += h;                                                                                                       \
        phx += h * xc;                                                                                                 \
        if (gdy != NULL) {                                                                                             \
            gdy[i] = (T)(NORMS_OR(ddw, i, 0) * (xc * r) + NORMS_OR(ddb, i, 0));                                        \
        }                                                                                                              \
        if (gx != NULL) {                                                                                              \
            gx[i] = (T)(r * h);                                                                                        \
        }                                                                                                              \
    }                                                                                                                  \
    const double sh = SUM(ph), shx = SUM(phx);                                                                         \
    ONCE {                                                                                                             \
        if (gmean != NULL) {                                                                                           \
            gmean[0] = (T)(-r * sh);                                                                                   \
        }                                                                                                              \
        if (grstd != NULL) {                                                                                           \
            grstd[0] = (T)shx;                                                                                         \
        }                                                                                                              \
    }                                                                                                                  \
    (void)0

OPF_ROW_KERNEL(layer_norm_grad_grad_affine, (x, mean, rstd, dy, ddw, ddb), (gx, gmean, grstd, gdy),
               { LAYER_NORM_GRAD_GRAD_AFFINE_BODY(NORMS_SEQ_FOR, NORMS_SEQ_SUM, NORMS_SEQ_ONCE); })
OPF_ROW_KERNEL_TEAM(layer_norm_grad_grad_affine_team, layer_norm_grad_grad_affine, (x, mean, rstd, dy, ddw, ddb),
                    (gx, gmean, grstd, gdy),
                    { LAYER_NORM_GRAD_GRAD_AFFINE_BODY(OPF_TEAM_FOR, NORMS_TEAM_SUM, OPF_TEAM_ONCE); })

/* The derivative of layer_norm_grad's dx and dw along tangents xt of x and
 * wt of w (absent: zero); layer_norm_grad_jvp_stats does mean and rstd, and
 * layer_norm_grad itself dy, dmean and drstd (in which it is linear). With
 * xc = x - mean and g = dy w, layer_norm_grad's
 *   dx = r g - r sum(g) / M - r^3 xc (<g, xc> + drstd) / M + dmean / M, so
 *   dxt = -r^3 (xt (<g, xc> + drstd) + xc <g, xt>) / M
 *         + r g' - r sum(g') / M - r^3 xc <g', xc> / M        (g' = dy wt)
 *   dwt = sum over rows of dy xt r */
/* (written once for the CPU body and the team body: see NORMS_SEQ_FOR) */
#define LAYER_NORM_GRAD_JVP_BODY(FOR, SUM)                                                                             \
    const double mu = mean[0], r = rstd[0], m = n > 0 ? (double)n : 1, r3 = r * r * r / m;                             \
    double pt = 0, pgxt = 0, psgt = 0, pgtxc = 0;                                                                      \
    FOR(i, n) {                                                                                                        \
        const double xc = NORMS_AT(x, i) - mu, dyi = NORMS_OR(dy, i, 0), g = dyi * NORMS_OR(w, i, 1),                  \
                     gt = dyi * NORMS_OR(wt, i, 0);                                                                    \
        pt += g * xc;                                                                                                  \
        pgxt += g * NORMS_OR(xt, i, 0);                                                                                \
        psgt += gt;                                                                                                    \
        pgtxc += gt * xc;                                                                                              \
    }                                                                                                                  \
    const double t = SUM(pt) + NORMS_OR(drstd, 0, 0), gxt = SUM(pgxt), sgt = SUM(psgt), gtxc = SUM(pgtxc);             \
    FOR(i, n) {                                                                                                        \
        const double xc = NORMS_AT(x, i) - mu, dyi = NORMS_OR(dy, i, 0), xti = NORMS_OR(xt, i, 0),                     \
                     gt = dyi * NORMS_OR(wt, i, 0);                                                                    \
        if (dxt != NULL) {                                                                                             \
            dxt[i] = (T)(-r3 * (xti * t + xc * gxt) + r * gt - r * sgt / m - r3 * xc * gtxc);                          \
        }                                                                                                              \
        if (dwt != NULL) {                                                                                             \
            dwt[i] += (T)(dyi * xti * r);                                                                              \
        }                                                                                                              \
    }                                                                                                                  \
    (void)0

OPF_ROW_KERNEL(layer_norm_grad_jvp, (x, mean, rstd, dy, w, drstd, xt, wt), (dxt, dwt),
               { LAYER_NORM_GRAD_JVP_BODY(NORMS_SEQ_FOR, NORMS_SEQ_SUM); })
OPF_ROW_KERNEL_TEAM(layer_norm_grad_jvp_team, layer_norm_grad_jvp, (x, mean, rstd, dy, w, drstd, xt, wt), (dxt, dwt),
                    { LAYER_NORM_GRAD_JVP_BODY(OPF_TEAM_FOR, NORMS_TEAM_SUM); })

/* The derivative of layer_norm_grad's dx and dw along tangents meant of mean
 * and rstdt of rstd (absent: zero). With xc = x - mean, g = dy w,
 * T = <g, xc> + drstd:
 *   dxt = r^3 meant (T + xc sum(g)) / M + rstdt (g - sum(g) / M - 3 r^2 xc T / M)
 *   dwt = sum over rows of dy (xc rstdt - r meant) */
#define LAYER_NORM_GRAD_JVP_STATS_BODY(FOR, SUM)                                                                       \
    const double mu = mean[0], r = rstd[0], m = n > 0 ? (double)n : 1, r3 = r * r * r / m;                             \
    const double mt = NORMS_OR(meant, 0, 0), rt = NORMS_OR(rstdt, 0, 0);                                               \
    double pt = 0, psg = 0;                                                                                            \
    FOR(i, n) {                                                                                                        \
        const double g = NORMS_OR(dy, i, 0) * NORMS_OR(w, i, 1);                                                       \
        pt += g * (NORMS_AT(x, i) - mu);                                                                               \
        psg += g;                                                                                                      \
    }                                                                                                                  \
    const double t = SUM(pt) + NORMS_OR(drstd, 0, 0), sg = SUM(psg);                                                   \
    FOR(i, n) {                                                                                                        \
        const double xc = NORMS_AT(x, i) - mu, dyi = NORMS_OR(dy, i, 0), g = dyi * NORMS_OR(w, i, 1);                  \
        if (dxt != NULL) {                                                                                             \
            dxt[i] = (T)(r3 * mt * (t + xc * sg) + rt * (g - sg / m - 3 * r * r * xc * t / m));                        \
        }                                                                                                              \
        if (dwt != NULL) {                                                                                             \
            dwt[i] += (T)(dyi * (xc * rt - r * mt));                                                                   \
        }                                                                                                              \
    }                                                                                                                  \
    (void)0

OPF_ROW_KERNEL(layer_norm_grad_jvp_stats, (x, mean, rstd, dy, w, drstd, meant, rstdt), (dxt, dwt),
               { LAYER_NORM_GRAD_JVP_STATS_BODY(NORMS_SEQ_FOR, NORMS_SEQ_SUM); })
OPF_ROW_KERNEL_TEAM(layer_norm_grad_jvp_stats_team, layer_norm_grad_jvp_stats,
                    (x, mean, rstd, dy, w, drstd, meant, rstdt), (dxt, dwt),
                    { LAYER_NORM_GRAD_JVP_STATS_BODY(OPF_TEAM_FOR, NORMS_TEAM_SUM); })

/* The derivatives of layer_norm_grad_grad's outputs along a tangent xt of x
 * (layer_norm_grad_grad_jvp), meant of mean (..._jvp_mean) and rstdt of
 * rstd (..._jvp_rstd); absent: zero; ..._jvp_w (below) does w.
 * layer_norm_grad_grad is linear in (dy, dmean, drstd) and in ddx: it gives
 * the rest of its tangent rule itself; its gdmean = sum(ddx) / M moves with
 * ddx only. With xc = x - mean, g = dy w, K = r^3 / M, A = sum(ddx),
 * b = <ddx, xc>, Sg = sum(g), T = <g, xc> + drstd, its outputs are
 *   gx = -K (ddx T + b g)       gmean = K (A T + b Sg)       grstd = <ddx, g> - A Sg / M - 3 r^2 b T / M
 *   gdy = w P, gw = sum over rows of dy P, with P = r (ddx - A / M) - K b xc
 *   gdrstd = -K b.
 * Along xt (b' = <ddx, xt>, T' = <g, xt>):
 *   gxt = -K (ddx T' + b' g)    gmeant = K (A T' + b' Sg)    grstdt = -3 r^2 (b' T + b T') / M
 *   P' = -K (b' xc + b xt)      gdrstdt = -K b'
 * Along meant (xc' = -meant: b' = -meant A, T' = -meant Sg):
 *   gxt = K meant (ddx Sg + A g)    gmeant = -2 K meant A Sg    grstdt = 3 r^2 meant (A T + b Sg) / M
 *   P' = K meant (A xc + b)         gdrstdt = K meant A
 * Along rstdt (K' = 3 r^2 rstdt / M):
 *   gxt = -K' (ddx T + b g)     gmeant = K' (A T + b Sg)     grstdt = -6 r rstdt b T / M
 *   P' = rstdt (ddx - A / M) - K' b xc                       gdrstdt = -K' b
 * and gdyt = w P', gwt = sum over rows of dy P'. Second derivatives of
 * <ddx, dx> (dx layer_norm_grad's), symmetric: with cotangents of gx, gmean
 * and grstd as the tangents they are also the gradients that
 * layer_norm_grad_grad's gradient rule takes from those. */
#define NORMS_LN_GG_SUMS(FOR, SUM)                                                                                     \
    const double mu = mean[0], r = rstd[0], m = n > 0 ? (double)n : 1;                                                 \
    double pa = 0, pb = 0, pg = 0, pt = 0;                                                                             \
    FOR(i, n) {                                                                                                        \
        const double xc = NORMS_AT(x, i) - mu, dd = NORMS_OR(ddx, i, 0), g = NORMS_OR(dy, i, 0) * NORMS_OR(w, i, 1);   \
        pa += dd;                                                                                                      \
        pb += dd * xc;                                                                                                 \
        pg += g;                                                                                                       \
        pt += g * xc;                                                                                                  \
    }                                                                                                                  \
    const double sa = SUM(pa), sb = SUM(pb), sg = SUM(pg), t = SUM(pt) + NORMS_OR(drstd, 0, 0);

/* The outputs from the row's P' (pt_i, of element i) and the statistics'
 * tangents (gxt from its own expression). */
#define NORMS_LN_GG_STORE(FOR, ONCE, gxt_i, pt_i, gmeant_v, grstdt_v, gdrstdt_v)                                       \
    FOR(i, n) {                                                                                                        \
        const double xc = NORMS_AT(x, i) - mu, dd = NORMS_OR(ddx, i, 0), dyi = NORMS_OR(dy, i, 0),                     \
                     wi = NORMS_OR(w, i, 1), g = dyi * wi;                                                             \
        (void)xc, (void)dd, (void)g;                                                                                   \
        if (gxt != NULL) {                                                                                             \
            gxt[i] = (T)(gxt_i);                                                                                       \
        }                                                                                                              \
        const double pti = (pt_i);                                                                                     \
        if (gdyt != NULL) {                                                                                            \
            gdyt[i] = (T)(wi * pti);                                                                                   \
        }                                                                                                              \
        if (gwt != NULL) {                                                                                             \
            gwt[i] += (T)(dyi * pti);                                                                                  \
        }                                                                                                              \
    }                                                                                                                  \
    ONCE {                                                                                                             \
        if (gmeant != NULL) {                                                                                          \
            gmeant[0] = (T)(gmeant_v);                                                                                 \
        }                                                                                                              \
        if (grstdt != NULL) {                                                                                          \
            grstdt[0] = (T)(grstdt_v);                                                                                 \
        }                                                                                                              \
        if (gdrstdt != NULL) {                                                                                         \
            gdrstdt[0] = (T)(gdrstdt_v);                                                                               \
        }                                                                                                              \
    }

#define LAYER_NORM_GRAD_GRAD_JVP_BODY(FOR, SUM, ONCE)                                                                  \
    NORMS_LN_GG_SUMS(FOR, SUM)                                                                                         \
    const double k = r * r * r / m;                                                                                    \
    double pbt = 0, ptt = 0;                                                                                           \
    FOR(i, n) {                                                                                                        \
        const double xti = NORMS_OR(xt, i, 0);                                                                         \
        pbt += NORMS_OR(ddx, i, 0) * xti;                                                                              \
        ptt += NORMS_OR(dy, i, 0) * NORMS_OR(w, i, 1) * xti;                                                           \
    }                                                                                                                  \
    const double bt = SUM(pbt), tt = SUM(ptt);                                                                         \
    NORMS_LN_GG_STORE(FOR, ONCE, -k *(dd * tt + bt * g), -k *(bt * xc + sb * NORMS_OR(xt, i, 0)),                      \
                      k *(sa * tt + bt * sg), -3 * r * r * (bt * t + sb * tt) / m, -k * bt)                            \
    (void)0

#define LAYER_NORM_GRAD_GRAD_JVP_MEAN_BODY(FOR, SUM, ONCE)                                                             \
    NORMS_LN_GG_SUMS(FOR, SUM)                                                                                         \
    const double k = r * r * r / m, mt = NORMS_OR(meant, 0, 0);                                                        \
    NORMS_LN_GG_STORE(FOR, ONCE, k *mt *(dd * sg + sa * g), k *mt *(sa * xc + sb), -2 * k * mt * sa * sg,              \
                      3 * r * r * mt * (sa * t + sb * sg) / m, k * mt * sa)                                            \
    (void)0

#define LAYER_NORM_GRAD_GRAD_JVP_RSTD_BODY(FOR, SUM, ONCE)                                                             \
    NORMS_LN_GG_SUMS(FOR, SUM)                                                                                         \
    const double rt = NORMS_OR(rstdt, 0, 0), kt = 3 * r * r * rt / m;                                                  \
    NORMS_LN_GG_STORE(FOR, ONCE, -kt *(dd * t + sb * g), rt *(dd - sa / m) - kt * sb * xc, kt * (sa * t + sb * sg),    \
                      -6 * r * rt * sb * t / m, -kt * sb)                                                              \
    (void)0

OPF_ROW_KERNEL(layer_norm_grad_grad_jvp, (x, mean, rstd, dy, w, drstd, ddx, xt),
               (gxt, gmeant, grstdt, gdyt, gwt, gdrstdt),
               { LAYER_NORM_GRAD_GRAD_JVP_BODY(NORMS_SEQ_FOR, NORMS_SEQ_SUM, NORMS_SEQ_ONCE); })
OPF_ROW_KERNEL_TEAM(layer_norm_grad_grad_jvp_team, layer_norm_grad_grad_jvp, (x, mean, rstd, dy, w, drstd, ddx, xt),
                    (gxt, gmeant, grstdt, gdyt, gwt, gdrstdt),
                    { LAYER_NORM_GRAD_GRAD_JVP_BODY(OPF_TEAM_FOR, NORMS_TEAM_SUM, OPF_TEAM_ONCE); })
OPF_ROW_KERNEL(layer_norm_grad_grad_jvp_mean, (x, mean, rstd, dy, w, drstd, ddx, meant),
               (gxt, gmeant, grstdt, gdyt, gwt, gdrstdt),
               { LAYER_NORM_GRAD_GRAD_JVP_MEAN_BODY(NORMS_SEQ_FOR, NORMS_SEQ_SUM, NORMS_SEQ_ONCE); })
OPF_ROW_KERNEL_TEAM(layer_norm_grad_grad_jvp_mean_team, layer_norm_grad_grad_jvp_mean,
                    (x, mean, rstd, dy, w, drstd, ddx, meant), (gxt, gmeant, grstdt, gdyt, gwt, gdrstdt),
                    { LAYER_NORM_GRAD_GRAD_JVP_MEAN_BODY(OPF_TEAM_FOR, NORMS_TEAM_SUM, OPF_TEAM_ONCE); })
OPF_ROW_KERNEL(layer_norm_grad_grad_jvp_rstd, (x, mean, rstd, dy, w, drstd, ddx, rstdt),
               (gxt, gmeant, grstdt, gdyt, gwt, gdrstdt),
               { LAYER_NORM_GRAD_GRAD_JVP_RSTD_BODY(NORMS_SEQ_FOR, NORMS_SEQ_SUM, NORMS_SEQ_ONCE); })
OPF_ROW_KERNEL_TEAM(layer_norm_grad_grad_jvp_rstd_team, layer_norm_grad_grad_jvp_rstd,
                    (x, mean, rstd, dy, w, drstd, ddx, rstdt), (gxt, gmeant, grstdt, gdyt, gwt, gdrstdt),
                    { LAYER_NORM_GRAD_GRAD_JVP_RSTD_BODY(OPF_TEAM_FOR, NORMS_TEAM_SUM, OPF_TEAM_ONCE); })

/* Along wt (layer_norm_grad_grad_jvp_w): w enters through g = dy w only, so
 * gw, gdmean and gdrstd do not move and the others take the part of g
 * linear in w with g' = dy wt (drstd drops out):
 *   gxt = -K (ddx <g', xc> + b g')      gmeant = K (A <g', xc> + b sum(g'))
 *   grstdt = <ddx, g'> - A sum(g') / M - 3 r^2 b <g', xc> / M
 *   gdyt = wt (r (ddx - A / M) - K b xc)
 * A row of its own, not layer_norm_grad_grad with wt as its w: an absent
 * tangent must count as zero, an absent w counts as ones. */
#define LAYER_NORM_GRAD_GRAD_JVP_W_BODY(FOR, SUM, ONCE)                                                                \
    const double mu = mean[0], r = rstd[0], m = n > 0 ? (double)n : 1, k = r * r * r / m;                              \
    double pa = 0, pb = 0, ptw = 0, psw = 0, pdgw = 0;                                                                 \
    FOR(i, n) {                                                                                                        \
        const double xc = NORMS_AT(x, i) - mu, dd = NORMS_OR(ddx, i, 0), gt = NORMS_OR(dy, i, 0) * NORMS_OR(wt, i, 0); \
        pa += dd;                                                                                                      \
        pb += dd * xc;                                                                                                 \
        ptw += gt * xc;                                                                                                \
        psw += gt;                                                                                                     \
        pdgw += dd * gt;                                                                                               \
    }                                                                                                                  \
    const double sa = SUM(pa), sb = SUM(pb), tw = SUM(ptw), sw = SUM(psw), dgw = SUM(pdgw);                            \
    FOR(i, n) {                                                                                                        \
        const double xc = NORMS_AT(x, i) - mu, dd = NORMS_OR(ddx, i, 0), wti = NORMS_OR(wt, i, 0);                     \
        if (gxt != NULL) {                                                                                             \
            gxt[i] = (T)(-k * (dd * tw + sb * NORMS_OR(dy, i, 0) * wti));                                              \
        }                                                                                                              \
        if (gdyt != NULL) {                                                                                            \
            gdyt[i] = (T)(wti * (r * (dd - sa / m) - k * sb * xc));                                                    \
        }                                                                                                              \
    }                                                                                                                  \
    ONCE {                                                                                                             \
        if (gmeant != NULL) {                                                                                          \
            gmeant[0] = (T)(k * (sa * tw + sb * sw));                                                                  \
        }                                                                                                              \
        if (grstdt != NULL) {                                                                                          \
            grstdt[0] = (T)(dgw - sa * sw / m - 3 * r * r * sb * tw / m);                                              \
        }                                                                                                              \
    }                                                                                                                  \
    (void)0

OPF_ROW_KERNEL(layer_norm_grad_grad_jvp_w, (x, mean, rstd, dy, ddx, wt), (gxt, gmeant, grstdt, gdyt),
               { LAYER_NORM_GRAD_GRAD_JVP_W_BODY(NORMS_SEQ_FOR, NORMS_SEQ_SUM, NORMS_SEQ_ONCE); })
OPF_ROW_KERNEL_TEAM(layer_norm_grad_grad_jvp_w_team, layer_norm_grad_grad_jvp_w, (x, mean, rstd, dy, ddx, wt),
                    (gxt, gmeant, grstdt, gdyt),
                    { LAYER_NORM_GRAD_GRAD_JVP_W_BODY(OPF_TEAM_FOR, NORMS_TEAM_SUM, OPF_TEAM_ONCE); })

/* The derivatives of layer_norm_grad_grad_affine's outputs along tangents
 * xt, meant and rstdt of x, mean and rstd (absent: zero); it is linear in dy
 * and in (ddw, ddb) and gives the rest of its tangent rule itself. With
 * xc = x - mean, h = ddw dy and e = xt - meant, its outputs gx = r h,
 * gmean = -r sum(h), grstd = <h, xc>, gdy = r ddw xc + ddb move as
 *   gxt = rstdt h, gmeant = -rstdt sum(h), grstdt = <h, e>, gdyt = ddw (rstdt xc + r e)
 * (symmetric second derivatives: with cotangents of gx, gmean and grstd as
 * the tangents, also the gradients its gradient rule takes from those). */
#define LAYER_NORM_GRAD_GRAD_AFFINE_JVP_BODY(FOR, SUM, ONCE)                                                           \
    const double mu = mean[0], r = rstd[0], mt = NORMS_OR(meant, 0, 0), rt = NORMS_OR(rstdt, 0, 0);                    \
    double ph = 0, phe = 0;                                                                                            \
    FOR(i, n) {                                                                                                        \
        const double xc = NORMS_AT(x, i) - mu, dwi = NORMS_OR(ddw, i, 0), h = dwi * NORMS_OR(dy, i, 0),                \
                     e = NORMS_OR(xt, i, 0) - mt;                                                                      \
        ph += h;                                                                                                       \
        phe += h * e;                                                                                                  \
        if (gxt != NULL) {                                                                                             \
            gxt[i] = (T)(rt * h);                                                                                      \
        }                                                                                                              \
        if (gdyt != NULL) {                                                                                            \
            gdyt[i] = (T)(dwi * (rt * xc + r * e));                                                                    \
        }                                                                                                              \
    }                                                                                                                  \
    const double sh = SUM(ph), she = SUM(phe);                                                                         \
    ONCE {                                                                                                             \
        if (gmeant != NULL) {                                                                                          \
            gmeant[0] = (T)(-rt * sh);                                                                                 \
        }                                                                                                              \
        if (grstdt != NULL) {                                                                                          \
            grstdt[0] = (T)she;                                                                                        \
        }                                                                                                              \
    }                                                                                                                  \
    (void)0

OPF_ROW_KERNEL(layer_norm_grad_grad_affine_jvp, (x, mean, rstd, dy, ddw, xt, meant, rstdt), (gxt, gmeant, grstdt, gdyt),
               { LAYER_NORM_GRAD_GRAD_AFFINE_JVP_BODY(NORMS_SEQ_FOR, NORMS_SEQ_SUM, NORMS_SEQ_ONCE); })
OPF_ROW_KERNEL_TEAM(layer_norm_grad_grad_affine_jvp_team, layer_norm_grad_grad_affine_jvp,
                    (x, mean, rstd, dy, ddw, xt, meant, rstdt), (gxt, gmeant, grstdt, gdyt),
                    { LAYER_NORM_GRAD_GRAD_AFFINE_JVP_BODY(OPF_TEAM_FOR, NORMS_TEAM_SUM, OPF_TEAM_ONCE); })

/* --- declarations ------------------------------------------------------------------------------------------------- */

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

const opf_op_decl opf_decl_softmax = {
    "softmax(x[..., M]) -> y[..., M]",
    .doc = "Softmax over the last axis: y = exp(x - max) / sum(exp(x - max)) per row. A row holding +inf or NaN, "
           "or only -inf, gives NaN throughout (as torch.softmax).",
    .grad = "dx = softmax_grad(dy, y)",
    .jvp = "y' = softmax_grad(x', y)", /* the Jacobian diag(y) - y y^T is symmetric */
    .arg_docs = "x: input [..., M], rows along the last axis; y: the softmax of each row, the shape of x",
    .row = &softmax_team,
};

const opf_op_decl opf_decl_softmax_grad = {
    "softmax_grad(dy[..., M], y[..., M]) -> dx[..., M]",
    .doc = "Gradient of softmax: dx = y * (dy - sum(dy * y)) per row.",
    .grad = "ddy, dy, _ = softmax_grad_grad(ddx, dy, y)",
    .jvp = "dx' = softmax_grad(dy', y); _, _, dx' = softmax_grad_grad(y', dy, y)",
    .arg_docs = "dy: gradient of softmax's output; y: softmax's output; dx: gradient of softmax's input",
    .row = &softmax_grad_team,
};

const opf_op_decl opf_decl_softmax_grad_grad = {
    "softmax_grad_grad(ddx[..., M], dy[..., M], y[..., M]) -> (gdy[..., M]?, gy[..., M]?, jy[..., M]?)",
    .doc = "Second derivatives of softmax_grad: with ddx the gradient flowing into its dx, gdy = softmax_grad(ddx, y) "
           "and gy = ddx * (dy - sum(dy * y)) - dy * sum(ddx * y) per row (its gradients); jy = ddx * (dy - sum(dy * "
           "y)) - y * sum(dy * ddx), the derivative of its dx along y in the direction ddx (its tangent rule).",
    .arg_docs = "ddx: gradient of softmax_grad's dx (or tangent of its y, for jy); dy: softmax_grad's dy; y: "
                "softmax_grad's y; gdy: gradient of dy; gy: gradient of y; jy: tangent of dx from y's",
    .row = &softmax_grad_grad_team,
};

const opf_op_decl opf_decl_log_softmax = {
    "log_softmax(x[..., M]) -> y[..., M]",
    .doc = "Log-softmax over the last axis: y = (x - max) - log(sum(exp(x - max))) per row. A row holding +inf or "
           "NaN, or only -inf, gives NaN throughout (as torch.log_softmax).",
    .grad = "dx = log_softmax_grad(dy, y)",
    .jvp = "y', _ = log_softmax_grad_grad(x', y, _)", /* y' = x' - sum(exp(y) x') */
    .arg_docs = "x: input [..., M], rows along the last axis; y: the log-softmax of each row, the shape of x",
    .row = &log_softmax_team,
};

const opf_op_decl opf_decl_log_softmax_grad = {
    "log_softmax_grad(dy[..., M], y[..., M]) -> dx[..., M]",
    .doc = "Gradient of log_softmax: dx = dy - exp(y) * sum(dy) per row.",
    .grad = "ddy, dy = log_softmax_grad_grad(ddx, y, dy)",
    .jvp = "dx' = log_softmax_grad(dy', y); _, dx' = log_softmax_grad_grad(y', y, dy)",
    .arg_docs = "dy: gradient of log_softmax's output; y: log_softmax's output; dx: gradient of log_softmax's input",
    .row = &log_softmax_grad_team,
};

const opf_op_decl opf_decl_log_softmax_grad_grad = {
    "log_softmax_grad_grad(ddx[..., M], y[..., M], dy[..., M]?) -> (gdy[..., M]?, gy[..., M]?)",
    .doc = "Second derivatives of log_softmax_grad: with ddx the gradient flowing into its dx and p = exp(y), "
           "gdy = ddx - sum(ddx * p) (also log_softmax's Jacobian applied to ddx) and gy = -ddx * p * sum(dy) per "
           "row (zero without dy).",
    .grad = "_, dy = log_softmax_grad_grad(ddx, y, dgdy); ddy, dy = log_softmax_grad_grad_jvp(ddx, y, dy, dgy); "
            "dddx = log_softmax_grad(dgdy, y); _, dddx = log_softmax_grad_grad(dgy, y, dy)",
    .jvp = "gdy', gy' = log_softmax_grad_grad(ddx', y, dy); _, gy' = log_softmax_grad_grad(ddx, y, dy'); "
           "gdy', gy' = log_softmax_grad_grad_jvp(ddx, y, dy, y')",
    .arg_docs = "ddx: gradient of log_softmax_grad's dx (or a tangent); y: log_softmax_grad's y; dy: "
                "log_softmax_grad's dy, optional; gdy: gradient of dy; gy: gradient of y",
    .row = &log_softmax_grad_grad_team,
};

const opf_op_decl opf_decl_log_softmax_grad_grad_jvp = {
    "log_softmax_grad_grad_jvp(ddx[..., M], y[..., M], dy[..., M]?, yt[..., M]?) -> (gdyt[..., M]?, gyt[..., M]?)",
    .doc = "The derivative of log_softmax_grad_grad's gdy and gy along a tangent yt of y (absent: zero): with "
           "p = exp(y), gdyt = -sum(ddx * p * yt) and gyt = -ddx * p * yt * sum(dy) per row. Symmetric: with a "
           "cotangent of gy as yt, the gradients of dy and y.",
    .arg_docs = "ddx: log_softmax_grad_grad's ddx; y: log_softmax_grad_grad's y; dy: log_softmax_grad_grad's dy, "
                "optional; yt: tangent of y, optional; gdyt: tangent of gdy; gyt: tangent of gy",
    .row = &log_softmax_grad_grad_jvp_team,
};

const opf_op_decl opf_decl_rms_norm = {
    "rms_norm(x[..., M], w[M]?, *, eps: float = -1) -> (y[..., M], rstd[...])",
    .doc = "RMS normalization over the last axis (torch.nn.functional.rms_norm): y = x * rstd * w with "
           "rstd = 1 / sqrt(mean(x^2) + eps) per row. A negative eps (the default) means the machine epsilon of "
           "x's dtype, as torch's eps=None.",
    .grad = "dx, dw = rms_norm_grad(x, rstd, dy, w, drstd)",
    .jvp = "_, _, y', _, rstd' = rms_norm_grad_grad(x, rstd, _, w, _, x', w')",
    .arg_docs = "x: input [..., M], rows along the last axis; w: weight [M], optional (absent: ones); eps: added to "
                "the mean square (negative: the dtype's machine epsilon); y: the normalized rows, the shape of x; "
                "rstd: 1 / sqrt(mean(x^2) + eps) of each row [...]",
    .row = &rms_norm_team,
};

const opf_op_decl opf_decl_rms_norm_grad = {
    "rms_norm_grad(x[..., M], rstd[...], dy[..., M]?, w[M]?, drstd[...]?) -> (dx[..., M]?, dw[M]?)",
    .doc = "Gradients of rms_norm: with g = dy * w, dx = rstd * g - x * rstd^3 / M * (sum(g * x) + drstd) per row "
           "and dw = the sum over rows of dy * x * rstd. dy and drstd, the gradients flowing into rms_norm's y and "
           "rstd, are optional (absent: zero).",
    .grad = "dx, drstd, ddy, dw, ddrstd = rms_norm_grad_grad(x, rstd, dy, w, drstd, ddx, ddw)",
    .jvp = "dx', dw' = rms_norm_grad(x, rstd, dy', w, drstd'); dx', dw' = rms_norm_grad_jvp(x, rstd, dy, w, drstd, x', "
           "rstd', w')",
    .arg_docs = "x: rms_norm's input; rstd: rms_norm's rstd; dy: gradient of rms_norm's y, optional; w: rms_norm's "
                "weight, optional; drstd: gradient of rms_norm's rstd, optional; dx: gradient of x; dw: gradient of "
                "w [M]",
    .row = &rms_norm_grad_team,
};

const opf_op_decl opf_decl_rms_norm_grad_grad = {
    "rms_norm_grad_grad(x[..., M], rstd[...], dy[..., M]?, w[M]?, drstd[...]?, ddx[..., M]?, ddw[M]?) -> "
    "(gx[..., M]?, grstd[...]?, gdy[..., M]?, gw[M]?, gdrstd[...]?)",
    .doc = "Gradients of rms_norm_grad with respect to each of its inputs, from the gradients ddx and ddw flowing "
           "into its outputs (absent: zero). gdy and gdrstd do not involve dy: with ddx = x' and ddw = w' they are "
           "rms_norm's tangents y' and rstd'.",
    .grad = "dx, drstd, _, dw, _ = rms_norm_grad_grad(x, rstd, dgdy, w, dgdrstd, ddx, ddw); "
            "dx, drstd, ddy, dw, ddrstd = rms_norm_grad_grad_jvp(x, rstd, dy, w, drstd, ddx, ddw, dgx); "
            "dx, drstd, ddy, dw, ddrstd = rms_norm_grad_grad_jvp_rstd(x, rstd, dy, w, drstd, ddx, ddw, dgrstd); "
            "dx, drstd, ddy = rms_norm_grad_grad_jvp_w(x, rstd, dy, ddx, dgw); "
            "dddx, dddw = rms_norm_grad(x, rstd, dgdy, w, dgdrstd); "
            "dddx, dddw = rms_norm_grad_jvp(x, rstd, dy, w, drstd, dgx, dgrstd, dgw)",
    .jvp = "gx', grstd', _, gw', _ = rms_norm_grad_grad(x, rstd, dy', w, drstd', ddx, ddw); "
           "gx', grstd', gdy', gw', gdrstd' = rms_norm_grad_grad(x, rstd, dy, w, drstd, ddx', ddw'); "
           "gx', grstd', gdy' = rms_norm_grad_grad_jvp_w(x, rstd, dy, ddx, w'); "
           "gx', grstd', gdy', gw', gdrstd' = rms_norm_grad_grad_jvp(x, rstd, dy, w, drstd, ddx, ddw, x'); "
           "gx', grstd', gdy', gw', gdrstd' = rms_norm_grad_grad_jvp_rstd(x, rstd, dy, w, drstd, ddx, ddw, rstd')",
    .arg_docs = "x: rms_norm_grad's x; rstd: rms_norm_grad's rstd; dy: rms_norm_grad's dy, optional; w: "
                "rms_norm_grad's w, optional; drstd: rms_norm_grad's drstd, optional; ddx: gradient of rms_norm_grad's "
                "dx; ddw: gradient of rms_norm_grad's dw; gx: gradient of x; grstd: gradient of rstd; gdy: gradient "
                "of dy; gw: gradient of w; gdrstd: gradient of drstd",
    .row = &rms_norm_grad_grad_team,
};

const opf_op_decl opf_decl_rms_norm_grad_jvp = {
    "rms_norm_grad_jvp(x[..., M], rstd[...], dy[..., M]?, w[M]?, drstd[...]?, xt[..., M]?, rstdt[...]?, wt[M]?) -> "
    "(dxt[..., M]?, dwt[M]?)",
    .doc = "The derivative of rms_norm_grad's dx and dw along tangents xt, rstdt and wt of x, rstd and w (absent: "
           "zero): the part of rms_norm_grad's tangent rule that rms_norm_grad itself (linear in dy and drstd) "
           "does not give.",
    .arg_docs = "x: rms_norm_grad's x; rstd: rms_norm_grad's rstd; dy: rms_norm_grad's dy, optional; w: "
                "rms_norm_grad's w, optional; drstd: rms_norm_grad's drstd, optional; xt: tangent of x; rstdt: tangent "
                "of rstd; wt: tangent of w; dxt: tangent of dx; dwt: tangent of dw",
    .row = &rms_norm_grad_jvp_team,
};

#define NORMS_RMS_GG_JVP_DOCS(what)                                                                                    \
    "x: rms_norm_grad_grad's x; rstd: rms_norm_grad_grad's rstd; dy: rms_norm_grad_grad's dy, optional; w: "           \
    "rms_norm_grad_grad's w, optional; drstd: rms_norm_grad_grad's drstd, optional; ddx: rms_norm_grad_grad's ddx, "   \
    "optional; ddw: rms_norm_grad_grad's ddw, optional; " what "; gxt: tangent of gx; grstdt: tangent of grstd; "      \
    "gdyt: tangent of gdy; gwt: tangent of gw [M]; gdrstdt: tangent of gdrstd"

const opf_op_decl opf_decl_rms_norm_grad_grad_jvp = {
    "rms_norm_grad_grad_jvp(x[..., M], rstd[...], dy[..., M]?, w[M]?, drstd[...]?, ddx[..., M]?, ddw[M]?, "
    "xt[..., M]?) -> (gxt[..., M]?, grstdt[...]?, gdyt[..., M]?, gwt[M]?, gdrstdt[...]?)",
    .doc = "The derivative of rms_norm_grad_grad's outputs along a tangent xt of x (absent: zero). Symmetric: with "
           "a cotangent of its gx as xt, the gradients of x, rstd, dy, w and drstd that it gives.",
    .arg_docs = NORMS_RMS_GG_JVP_DOCS("xt: tangent of x, optional"),
    .row = &rms_norm_grad_grad_jvp_team,
};

const opf_op_decl opf_decl_rms_norm_grad_grad_jvp_w = {
    "rms_norm_grad_grad_jvp_w(x[..., M], rstd[...], dy[..., M]?, ddx[..., M]?, wt[M]?) -> (gxt[..., M]?, "
    "grstdt[...]?, gdyt[..., M]?)",
    .doc = "The derivative of rms_norm_grad_grad's gx, grstd and gdy along a tangent wt of w (absent: zero; its gw "
           "and gdrstd do not move with w). Symmetric: with a cotangent of its gw as wt, the gradients of x, rstd "
           "and dy that it gives.",
    .arg_docs = "x: rms_norm_grad_grad's x; rstd: rms_norm_grad_grad's rstd; dy: rms_norm_grad_grad's dy, optional; "
                "ddx: rms_norm_grad_grad's ddx, optional; wt: tangent of w, optional; gxt: tangent of gx; grstdt: "
                "tangent of grstd; gdyt: tangent of gdy",
    .row = &rms_norm_grad_grad_jvp_w_team,
};

const opf_op_decl opf_decl_rms_norm_grad_grad_jvp_rstd = {
    "rms_norm_grad_grad_jvp_rstd(x[..., M], rstd[...], dy[..., M]?, w[M]?, drstd[...]?, ddx[..., M]?, ddw[M]?, "
    "rstdt[...]?) -> (gxt[..., M]?, grstdt[...]?, gdyt[..., M]?, gwt[M]?, gdrstdt[...]?)",
    .doc = "The derivative of rms_norm_grad_grad's outputs along a tangent rstdt of rstd (absent: zero). "
           "Symmetric: with a cotangent of its grstd as rstdt, the gradients of x, rstd, dy, w and drstd that it "
           "gives.",
    .arg_docs = NORMS_RMS_GG_JVP_DOCS("rstdt: tangent of rstd, optional"),
    .row = &rms_norm_grad_grad_jvp_rstd_team,
};

const opf_op_decl opf_decl_layer_norm = {
    "layer_norm(x[..., M], w[M]?, b[M]?, *, eps: float = 1e-5) -> (y[..., M], mean[...], rstd[...])",
    .doc = "Layer normalization over the last axis (torch.nn.functional.layer_norm): y = (x - mean) * rstd * w + b "
           "with the row's mean and rstd = 1 / sqrt(var + eps), var the biased variance. mean and rstd are returned "
           "for the gradient, as torch.native_layer_norm does.",
    .grad = "dx, dw, db = layer_norm_grad(x, mean, rstd, dy, w, dmean, drstd)",
    .jvp = "_, _, _, y', _, mean', rstd' = layer_norm_grad_grad(x, mean, rstd, _, w, _, _, x'); "
           "_, _, _, y' = layer_norm_grad_grad_affine(x, mean, rstd, _, w', b')",
    .arg_docs = "x: input [..., M], rows along the last axis; w: weight [M], optional (absent: ones); b: bias [M], "
                "optional (absent: zeros); eps: added to the variance; y: the normalized rows, the shape of x; "
                "mean: the mean of each row [...]; rstd: 1 / sqrt(var + eps) of each row [...]",
    .row = &layer_norm_team,
};

const opf_op_decl opf_decl_layer_norm_grad = {
    "layer_norm_grad(x[..., M], mean[...], rstd[...], dy[..., M]?, w[M]?, dmean[...]?, drstd[...]?) -> "
    "(dx[..., M]?, dw[M]?, db[M]?)",
    .doc = "Gradients of layer_norm: with xh = (x - mean) * rstd and g = dy * w, dx = rstd * (g - mean(g) - "
           "xh * mean(g * xh)) + dmean / M - drstd * rstd^2 * xh / M per row, dw = the sum over rows of dy * xh and "
           "db = the sum over rows of dy. dy, dmean and drstd, the gradients flowing into layer_norm's y, mean and "
           "rstd, are optional (absent: zero).",
    .grad =
        "dx, dmean, drstd, ddy, dw, ddmean, ddrstd = layer_norm_grad_grad(x, mean, rstd, dy, w, dmean, drstd, ddx); "
        "dx, dmean, drstd, ddy = layer_norm_grad_grad_affine(x, mean, rstd, dy, ddw, ddb)",
    .jvp = "dx', dw', db' = layer_norm_grad(x, mean, rstd, dy', w, dmean', drstd'); "
           "dx', dw' = layer_norm_grad_jvp(x, mean, rstd, dy, w, drstd, x', w'); "
           "dx', dw' = layer_norm_grad_jvp_stats(x, mean, rstd, dy, w, drstd, mean', rstd')",
    .arg_docs = "x: layer_norm's input; mean: layer_norm's mean; rstd: layer_norm's rstd; dy: gradient of "
                "layer_norm's y, optional; w: layer_norm's weight, optional; dmean: gradient of layer_norm's mean, "
                "optional; drstd: gradient of layer_norm's rstd, optional; dx: gradient of x; dw: gradient of w [M]; "
                "db: gradient of b [M]",
    .row = &layer_norm_grad_team,
};

const opf_op_decl opf_decl_layer_norm_grad_grad = {
    "layer_norm_grad_grad(x[..., M], mean[...], rstd[...], dy[..., M]?, w[M]?, dmean[...]?, drstd[...]?, "
    "ddx[..., M]?) -> (gx[..., M]?, gmean[...]?, grstd[...]?, gdy[..., M]?, gw[M]?, gdmean[...]?, gdrstd[...]?)",
    .doc = "Gradients of layer_norm_grad's dx with respect to each of its inputs, from the gradient ddx flowing into "
           "dx (absent: zero); layer_norm_grad_grad_affine gives those of dw and db. gdy, gdmean and gdrstd do not "
           "involve dy: with ddx = x' they are layer_norm's tangents y' (its part from x'), mean' and rstd'.",
    .grad = "dx, dmean, drstd, _, dw, _, _ = layer_norm_grad_grad(x, mean, rstd, dgdy, w, _, dgdrstd, ddx); "
            "dx, dmean, drstd, ddy, dw, ddrstd = layer_norm_grad_grad_jvp(x, mean, rstd, dy, w, drstd, ddx, dgx); "
            "dx, dmean, drstd, ddy, dw, ddrstd = layer_norm_grad_grad_jvp_mean(x, mean, rstd, dy, w, drstd, ddx, "
            "dgmean); "
            "dx, dmean, drstd, ddy, dw, ddrstd = layer_norm_grad_grad_jvp_rstd(x, mean, rstd, dy, w, drstd, ddx, "
            "dgrstd); "
            "dx, dmean, drstd, ddy = layer_norm_grad_grad_jvp_w(x, mean, rstd, dy, ddx, dgw); "
            "dddx, _, _ = layer_norm_grad(x, mean, rstd, dgdy, w, dgdmean, dgdrstd); "
            "dddx, _ = layer_norm_grad_jvp(x, mean, rstd, dy, w, drstd, dgx, dgw); "
            "dddx, _ = layer_norm_grad_jvp_stats(x, mean, rstd, dy, w, drstd, dgmean, dgrstd)",
    .jvp = "gx', gmean', grstd', _, gw', _, _ = layer_norm_grad_grad(x, mean, rstd, dy', w, _, drstd', ddx); "
           "gx', gmean', grstd', gdy', gw', gdmean', gdrstd' = layer_norm_grad_grad(x, mean, rstd, dy, w, _, drstd, "
           "ddx'); "
           "gx', gmean', grstd', gdy' = layer_norm_grad_grad_jvp_w(x, mean, rstd, dy, ddx, w'); "
           "gx', gmean', grstd', gdy', gw', gdrstd' = layer_norm_grad_grad_jvp(x, mean, rstd, dy, w, drstd, ddx, x'); "
           "gx', gmean', grstd', gdy', gw', gdrstd' = layer_norm_grad_grad_jvp_mean(x, mean, rstd, dy, w, drstd, ddx, "
           "mean'); "
           "gx', gmean', grstd', gdy', gw', gdrstd' = layer_norm_grad_grad_jvp_rstd(x, mean, rstd, dy, w, drstd, ddx, "
           "rstd')",
    .arg_docs = "x: layer_norm_grad's x; mean: layer_norm_grad's mean; rstd: layer_norm_grad's rstd; dy: "
                "layer_norm_grad's dy, optional; w: layer_norm_grad's w, optional; dmean: layer_norm_grad's dmean, "
                "optional; drstd: layer_norm_grad's drstd, optional; ddx: gradient of layer_norm_grad's dx; gx: "
                "gradient of x; gmean: gradient of mean; grstd: gradient of rstd; gdy: gradient of dy; gw: gradient "
                "of w; gdmean: gradient of dmean; gdrstd: gradient of drstd",
    .row = &layer_norm_grad_grad_team,
};

const opf_op_decl opf_decl_layer_norm_grad_grad_affine = {
    "layer_norm_grad_grad_affine(x[..., M], mean[...], rstd[...], dy[..., M]?, ddw[M]?, ddb[M]?) -> "
    "(gx[..., M]?, gmean[...]?, grstd[...]?, gdy[..., M]?)",
    .doc = "Gradients of layer_norm_grad's dw and db with respect to x, mean, rstd and dy, from the gradients ddw "
           "and ddb flowing into them (absent: zero): with xh = (x - mean) * rstd, gx = rstd * ddw * dy, "
           "gmean = -rstd * sum(ddw * dy), grstd = sum(ddw * dy * (x - mean)) per row, gdy = ddw * xh + ddb (with "
           "ddw = w', ddb = b': layer_norm's tangent y' from w' and b').",
    .grad = "dx, dmean, drstd, _ = layer_norm_grad_grad_affine(x, mean, rstd, dgdy, ddw, _); "
            "dx, dmean, drstd, ddy = layer_norm_grad_grad_affine_jvp(x, mean, rstd, dy, ddw, dgx, dgmean, dgrstd); "
            "_, dddw, dddb = layer_norm_grad(x, mean, rstd, dgdy, _, _, _); "
            "_, dddw = layer_norm_grad_jvp(x, mean, rstd, dy, _, _, dgx, _); "
            "_, dddw = layer_norm_grad_jvp_stats(x, mean, rstd, dy, _, _, dgmean, dgrstd)",
    .jvp = "gx', gmean', grstd', _ = layer_norm_grad_grad_affine(x, mean, rstd, dy', ddw, _); "
           "gx', gmean', grstd', gdy' = layer_norm_grad_grad_affine(x, mean, rstd, dy, ddw', ddb'); "
           "gx', gmean', grstd', gdy' = layer_norm_grad_grad_affine_jvp(x, mean, rstd, dy, ddw, x', mean', rstd')",
    .arg_docs = "x: layer_norm_grad's x; mean: layer_norm_grad's mean; rstd: layer_norm_grad's rstd; dy: "
                "layer_norm_grad's dy, optional; ddw: gradient of layer_norm_grad's dw; ddb: gradient of "
                "layer_norm_grad's db; gx: gradient of x; gmean: gradient of mean; grstd: gradient of rstd; gdy: "
                "gradient of dy",
    .row = &layer_norm_grad_grad_affine_team,
};

const opf_op_decl opf_decl_layer_norm_grad_jvp = {
    "layer_norm_grad_jvp(x[..., M], mean[...], rstd[...], dy[..., M]?, w[M]?, drstd[...]?, xt[..., M]?, wt[M]?) -> "
    "(dxt[..., M]?, dwt[M]?)",
    .doc = "The derivative of layer_norm_grad's dx and dw along tangents xt of x and wt of w (absent: zero); "
           "layer_norm_grad_jvp_stats gives those along mean's and rstd's, and layer_norm_grad itself (linear in "
           "dy, dmean and drstd) the rest of its tangent rule.",
    .arg_docs = "x: layer_norm_grad's x; mean: layer_norm_grad's mean; rstd: layer_norm_grad's rstd; dy: "
                "layer_norm_grad's dy, optional; w: layer_norm_grad's w, optional; drstd: layer_norm_grad's drstd, "
                "optional; xt: tangent of x; wt: tangent of w; dxt: tangent of dx; dwt: tangent of dw",
    .row = &layer_norm_grad_jvp_team,
};

const opf_op_decl opf_decl_layer_norm_grad_jvp_stats = {
    "layer_norm_grad_jvp_stats(x[..., M], mean[...], rstd[...], dy[..., M]?, w[M]?, drstd[...]?, meant[...]?, "
    "rstdt[...]?) -> (dxt[..., M]?, dwt[M]?)",
    .doc = "The derivative of layer_norm_grad's dx and dw along tangents meant of mean and rstdt of rstd (absent: "
           "zero).",
    .arg_docs = "x: layer_norm_grad's x; mean: layer_norm_grad's mean; rstd: layer_norm_grad's rstd; dy: "
                "layer_norm_grad's dy, optional; w: layer_norm_grad's w, optional; drstd: layer_norm_grad's drstd, "
                "optional; meant: tangent of mean; rstdt: tangent of rstd; dxt: tangent of dx; dwt: tangent of dw",
    .row = &layer_norm_grad_jvp_stats_team,
};

#define NORMS_LN_GG_JVP_DOCS(what)                                                                                     \
    "x: layer_norm_grad_grad's x; mean: layer_norm_grad_grad's mean; rstd: layer_norm_grad_grad's rstd; dy: "          \
    "layer_norm_grad_grad's dy, optional; w: layer_norm_grad_grad's w, optional; drstd: layer_norm_grad_grad's "       \
    "drstd, optional; ddx: layer_norm_grad_grad's ddx, optional; " what "; gxt: tangent of gx; gmeant: tangent of "    \
    "gmean; grstdt: tangent of grstd; gdyt: tangent of gdy; gwt: tangent of gw [M]; gdrstdt: tangent of gdrstd"
#define NORMS_LN_GG_JVP_OUTS "-> (gxt[..., M]?, gmeant[...]?, grstdt[...]?, gdyt[..., M]?, gwt[M]?, gdrstdt[...]?)"

const opf_op_decl opf_decl_layer_norm_grad_grad_jvp = {
    "layer_norm_grad_grad_jvp(x[..., M], mean[...], rstd[...], dy[..., M]?, w[M]?, drstd[...]?, ddx[..., M]?, "
    "xt[..., M]?) " NORMS_LN_GG_JVP_OUTS,
    .doc = "The derivative of layer_norm_grad_grad's outputs along a tangent xt of x (absent: zero); its gdmean "
           "does not move with x. Symmetric: with a cotangent of its gx as xt, the gradients of x, mean, rstd, dy, "
           "w and drstd that it gives.",
    .arg_docs = NORMS_LN_GG_JVP_DOCS("xt: tangent of x, optional"),
    .row = &layer_norm_grad_grad_jvp_team,
};

const opf_op_decl opf_decl_layer_norm_grad_grad_jvp_mean = {
    "layer_norm_grad_grad_jvp_mean(x[..., M], mean[...], rstd[...], dy[..., M]?, w[M]?, drstd[...]?, ddx[..., M]?, "
    "meant[...]?) " NORMS_LN_GG_JVP_OUTS,
    .doc = "The derivative of layer_norm_grad_grad's outputs along a tangent meant of mean (absent: zero). "
           "Symmetric: with a cotangent of its gmean as meant, the gradients of x, mean, rstd, dy, w and drstd that "
           "it gives.",
    .arg_docs = NORMS_LN_GG_JVP_DOCS("meant: tangent of mean, optional"),
    .row = &layer_norm_grad_grad_jvp_mean_team,
};

const opf_op_decl opf_decl_layer_norm_grad_grad_jvp_rstd = {
    "layer_norm_grad_grad_jvp_rstd(x[..., M], mean[...], rstd[...], dy[..., M]?, w[M]?, drstd[...]?, ddx[..., M]?, "
    "rstdt[...]?) " NORMS_LN_GG_JVP_OUTS,
    .doc = "The derivative of layer_norm_grad_grad's outputs along a tangent rstdt of rstd (absent: zero). "
           "Symmetric: with a cotangent of its grstd as rstdt, the gradients of x, mean, rstd, dy, w and drstd that "
           "it gives.",
    .arg_docs = NORMS_LN_GG_JVP_DOCS("rstdt: tangent of rstd, optional"),
    .row = &layer_norm_grad_grad_jvp_rstd_team,
};

const opf_op_decl opf_decl_layer_norm_grad_grad_jvp_w = {
    "layer_norm_grad_grad_jvp_w(x[..., M], mean[...], rstd[...], dy[..., M]?, ddx[..., M]?, wt[M]?) -> "
    "(gxt[..., M]?, gmeant[...]?, grstdt[...]?, gdyt[..., M]?)",
    .doc = "The derivative of layer_norm_grad_grad's gx, gmean, grstd and gdy along a tangent wt of w (absent: "
           "zero; its gw, gdmean and gdrstd do not move with w). Symmetric: with a cotangent of its gw as wt, the "
           "gradients of x, mean, rstd and dy that it gives.",
    .arg_docs = "x: layer_norm_grad_grad's x; mean: its mean; rstd: its rstd; dy: its dy, optional; ddx: its ddx, "
                "optional; wt: tangent of w, optional; gxt: tangent of gx; gmeant: tangent of gmean; grstdt: tangent "
                "of grstd; gdyt: tangent of gdy",
    .row = &layer_norm_grad_grad_jvp_w_team,
};

const opf_op_decl opf_decl_layer_norm_grad_grad_affine_jvp = {
    "layer_norm_grad_grad_affine_jvp(x[..., M], mean[...], rstd[...], dy[..., M]?, ddw[M]?, xt[..., M]?, "
    "meant[...]?, rstdt[...]?) -> (gxt[..., M]?, gmeant[...]?, grstdt[...]?, gdyt[..., M]?)",
    .doc = "The derivative of layer_norm_grad_grad_affine's outputs along tangents xt, meant and rstdt of x, mean "
           "and rstd (absent: zero): with xc = x - mean, h = ddw * dy and e = xt - meant, gxt = rstdt * h, "
           "gmeant = -rstdt * sum(h), grstdt = sum(h * e) per row, gdyt = ddw * (rstdt * xc + rstd * e). "
           "Symmetric: with cotangents of its gx, gmean and grstd as the tangents, the gradients of x, mean, rstd "
           "and dy that it gives.",
    .arg_docs = "x: layer_norm_grad_grad_affine's x; mean: its mean; rstd: its rstd; dy: its dy, optional; ddw: its "
                "ddw, optional; xt: tangent of x, optional; meant: tangent of mean, optional; rstdt: tangent of "
                "rstd, optional; gxt: tangent of gx; gmeant: tangent of gmean; grstdt: tangent of grstd; gdyt: "
                "tangent of gdy",
    .row = &layer_norm_grad_grad_affine_jvp_team,
};
