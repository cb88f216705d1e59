/*
 * softmax.c — softmax and log_softmax over the last axis, their
 * gradients, the gradients of those and the tangent row of
 * log_softmax_grad_grad (see norms.h).
 */
#include "norms.h"

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
 * instead), -inf for n = 0: lanes as opf_max, one compare-select each;
 * `earlier` (NULL: none) has a step of its stores taken after each group
 * of `lanes` but the first (NORMS_MAX_STEPS of them), floats' by the ISA's
 * kernel (opf_max_blocks_f32: its lanes are this loop's) where there is one:
 * this loop takes the steps between runs of NORMS_MAX_RUN groups, whose
 * partial maxima the compiler keeps in registers only within a run. */
enum { NORMS_MAX_RUN = 4 };
#define NORMS_MAX_STEPS(n, lanes) ((n) / (lanes)-1)
#define NORMS_MAX_FN(fn, type, lanes, blocks)                                                                          \
    OPF_KERNEL_FN type fn(int64_t n, const type *x, opf_earlier_row *earlier) {                                        \
        type m[lanes];                                                                                                 \
        int64_t i = 0;                                                                                                 \
        m[0] = -(type)__builtin_inf();                                                                                 \
        if (n >= lanes) { /* the first group sets the lanes (NaN ignored: -inf where x is NaN) */                      \
            for (int j = 0; j < lanes; j++) {                                                                          \
                m[j] = x[j] > -(type)__builtin_inf() ? x[j] : -(type)__builtin_inf();                                  \
            }                                                                                                          \
            i = lanes;                                                                                                 \
            i += blocks(n - i, x + i, m, earlier);                                                                     \
        }                                                                                                              \
        for (; (earlier == NULL || earlier->left == 0) && i + lanes <= n; i += lanes) { /* (no steps) */               \
            for (int j = 0; j < lanes; j++) {                                                                          \
                m[j] = x[i + j] > m[j] ? x[i + j] : m[j];                                                              \
            }                                                                                                          \
        }                                                                                                              \
        while (i + lanes <= n) {                                                                                       \
            const int64_t to = n - i > NORMS_MAX_RUN * (lanes) ? i + NORMS_MAX_RUN * (lanes) : n;                      \
            int64_t groups = 0;                                                                                        \
            for (; i + lanes <= to; i += lanes, groups++) {                                                            \
                for (int j = 0; j < lanes; j++) {                                                                      \
                    m[j] = x[i + j] > m[j] ? x[i + j] : m[j];                                                          \
                }                                                                                                      \
            }                                                                                                          \
            for (; groups > 0; groups--) {                                                                             \
                opf_earlier_row_step(earlier);                                                                         \
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
/* (opf_max_blocks_f32 where it is CPU code; none for double) */
OPF_KERNEL_FN int64_t norms_max_blocks_f32(int64_t n, const float *x, float *m, opf_earlier_row *earlier) {
#if defined(__CUDA_ARCH__)
    (void)n, (void)x, (void)m, (void)earlier;
    return 0;
#else
    return opf_max_blocks_f32(n, x, m, earlier);
#endif
}
OPF_KERNEL_FN int64_t norms_max_blocks_f64(int64_t n, const double *x, double *m, opf_earlier_row *earlier) {
    (void)n, (void)x, (void)m, (void)earlier;
    return 0;
}
NORMS_MAX_FN(norms_max_f32, float, 64, norms_max_blocks_f32)
NORMS_MAX_FN(norms_max_f64, double, 32, norms_max_blocks_f64)

#define NORMS_MAX(n, x) NORMS_MAX_EARLIER(n, x, (opf_earlier_row *)0)
/* (and its steps, for OPF_EARLIER_ROW) */
#define NORMS_MAX_STEPS_T(n) (OPF_IS_F64 ? NORMS_MAX_STEPS((n), 32) : NORMS_MAX_STEPS((n), 64))
#define NORMS_MAX_EARLIER(n, x, earlier)                                                                               \
    (OPF_IS_F64 ? (T)norms_max_f64((n), (const double *)(x), (earlier))                                                \
                : (T)norms_max_f32((n), (const float *)(x), (earlier)))

enum { NORMS_LANES = 32 }; /* partial sums of the exponentials (two AVX-512 vectors of floats) */

/* Rows of at least NORMS_BLOCKS_MIN floats start with the ISA's vector
 * kernel for their whole blocks of 32 (opf_exp_sum_blocks_f32: its
 * exponential takes a 16-entry table and a polynomial of degree 3 where
 * norms_exp_f32 needs one of degree 6, which the compiler's vectorized loop
 * cannot look up): what it leaves, and shorter rows, the loop below does. */
enum { NORMS_BLOCKS_MIN = 256 };
OPF_KERNEL_FN int64_t norms_exp_blocks_f32(int64_t n, const float *x, float s, float bound, float *y, int64_t ahead,
                                           float *acc) {
#if defined(__CUDA_ARCH__)
    (void)n, (void)x, (void)s, (void)bound, (void)y, (void)ahead, (void)acc;
    return 0;
#else
    OPF__STATIC_ASSERT(NORMS_LANES == 32, "opf_exp_sum_blocks_f32 adds into 32 partial sums");
    return n >= NORMS_BLOCKS_MIN ? opf_exp_sum_blocks_bounded_f32(n, x, s, bound, y, ahead, acc) : 0;
#endif
}
OPF_KERNEL_FN int64_t norms_exp_blocks_f64(int64_t n, const double *x, double s, double bound, double *y, int64_t ahead,
                                           double *acc) {
    (void)n, (void)x, (void)s, (void)bound, (void)y, (void)ahead, (void)acc;
    return 0;
}

/* The sum of e = exp(x[i] - s) over x[0 .. n), e stored to y[i] when y is
 * not NULL, prefetching `ahead` bytes further on than x (no x above
 * `bound`, NaN aside: the chunk's maximum, opf_exp_sum_blocks_bounded_f32's
 * bound): NORMS_LANES
 * partial sums, added pairwise. A function of its own,
 * so that the partial sums stay in vector registers (two AVX-512 ones for
 * float): a loop carrying them in memory waits on a store-to-load round trip
 * per vector of exponentials. Rows shorter than NORMS_BLOCKS_MIN have their
 * partial sums set by their first group (0 + e: the same bits), in a
 * function of their own: passed to the blocks' kernel, the sums live in
 * memory, and zeroing them there took a tenth of softmax's time on rows of
 * 64 floats. */
/* (the loops after acc[0 .. NORMS_LANES) and i are set; t: the sum) */
#define NORMS_EXP_SUM_LOOPS(T, n, x, s, y, ahead, fused, acc, i, t)                                                    \
    if (y != NULL) {                                                                                                   \
        for (; i + NORMS_LANES <= n; i += NORMS_LANES) {                                                               \
            opf_prefetch_at(x + i, ahead, NORMS_LANES * (int64_t)sizeof(T));                                           \
            OPF_SIMD_LOOP                                                                                              \
            for (int j = 0; j < NORMS_LANES; j++) {                                                                    \
                const T e = NORMS_EXP(x[i + j] - s, fused);                                                            \
                y[i + j] = e;                                                                                          \
                acc[j] = acc[j] + e;                                                                                   \
            }                                                                                                          \
        }                                                                                                              \
    } else {                                                                                                           \
        for (; i + NORMS_LANES <= n; i += NORMS_LANES) {                                                               \
            opf_prefetch_at(x + i, ahead, NORMS_LANES * (int64_t)sizeof(T));                                           \
            for (int j = 0; j < NORMS_LANES; j++) {                                                                    \
                acc[j] = acc[j] + NORMS_EXP(x[i + j] - s, fused);                                                      \
            }                                                                                                          \
        }                                                                                                              \
    }                                                                                                                  \
    NORMS_PAIRWISE(acc, NORMS_LANES, NORMS_ADD, n)                                                                     \
    t = acc[0];                                                                                                        \
    if (__builtin_expect(i + NORMS_GROUP(T) <= n, 0)) { /* (see NORMS_GROUP) */                                        \
        T q[NORMS_GROUP(T)];                                                                                           \
        for (int j = 0; j < NORMS_GROUP(T); j++) {                                                                     \
            q[j] = 0;                                                                                                  \
        }                                                                                                              \
        for (; i + NORMS_GROUP(T) <= n; i += NORMS_GROUP(T)) {                                                         \
            OPF_SIMD_LOOP                                                                                              \
            for (int j = 0; j < NORMS_GROUP(T); j++) {                                                                 \
                const T e = NORMS_EXP(x[i + j] - s, fused);                                                            \
                if (y != NULL) {                                                                                       \
                    y[i + j] = e;                                                                                      \
                }                                                                                                      \
                q[j] = q[j] + e;                                                                                       \
            }                                                                                                          \
        }                                                                                                              \
        OPF_PAIRWISE(q, NORMS_GROUP(T), NORMS_ADD);                                                                    \
        t = t + q[0];                                                                                                  \
    }                                                                                                                  \
    for (; i < n; i++) {                                                                                               \
        const T e = NORMS_EXP(x[i] - s, fused);                                                                        \
        if (y != NULL) {                                                                                               \
            y[i] = e;                                                                                                  \
        }                                                                                                              \
        t = t + e;                                                                                                     \
    }
#define NORMS_EXP_SUM_FN(fn, type, blocks)                                                                             \
    OPF_KERNEL_FN type fn##_short(int64_t n, const type *x, type s, type *y, int64_t ahead, int fused) {               \
        typedef type T;                                                                                                \
        T acc[NORMS_LANES], t;                                                                                         \
        int64_t i = 0;                                                                                                 \
        acc[0] = 0;                                                                                                    \
        if (n >= NORMS_LANES) {                                                                                        \
            opf_prefetch_at(x, ahead, (int64_t)sizeof(T) * NORMS_LANES);                                               \
            if (y != NULL) {                                                                                           \
                OPF_SIMD_LOOP                                                                                          \
                for (int j = 0; j < NORMS_LANES; j++) {                                                                \
                    const T e = NORMS_EXP(x[j] - s, fused);                                                            \
                    y[j] = e;                                                                                          \
                    acc[j] = (T)0 + e;                                                                                 \
                }                                                                                                      \
            } else {                                                                                                   \
                for (int j = 0; j < NORMS_LANES; j++) {                                                                \
                    acc[j] = (T)0 + NORMS_EXP(x[j] - s, fused);                                                        \
                }                                                                                                      \
            }                                                                                                          \
            i = NORMS_LANES;                                                                                           \
        }                                                                                                              \
        NORMS_EXP_SUM_LOOPS(T, n, x, s, y, ahead, fused, acc, i, t)                                                    \
        return t;                                                                                                      \
    }                                                                                                                  \
    OPF_KERNEL_FN type fn(int64_t n, const type *x, type s, type bound, type *y, int64_t ahead, int fused) {           \
        if (n < NORMS_BLOCKS_MIN) {                                                                                    \
            return fn##_short(n, x, s, y, ahead, fused);                                                               \
        }                                                                                                              \
        typedef type T;                                                                                                \
        T acc[NORMS_LANES], t;                                                                                         \
        for (int j = 0; j < NORMS_LANES; j++) {                                                                        \
            acc[j] = 0;                                                                                                \
        }                                                                                                              \
        int64_t i = blocks(n, x, s, bound, y, ahead, acc);                                                             \
        NORMS_EXP_SUM_LOOPS(T, n, x, s, y, ahead, fused, acc, i, t)                                                    \
        return t;                                                                                                      \
    }
NORMS_EXP_SUM_FN(norms_exp_sum_f32, float, norms_exp_blocks_f32)
NORMS_EXP_SUM_FN(norms_exp_sum_f64, double, norms_exp_blocks_f64)
/* (in a kernel body: its opf_math_fma_ok) */
#define NORMS_EXP_SUM(n, x, s, bound, y, ahead)                                                                        \
    (OPF_IS_F64 ? (T)norms_exp_sum_f64((n), (const double *)(x), (double)(s), (double)(bound), (double *)(y), (ahead), \
                                       opf_math_fma_ok)                                                                \
                : (T)norms_exp_sum_f32((n), (const float *)(x), (float)(s), (float)(bound), (float *)(y), (ahead),     \
                                       opf_math_fma_ok))

/* softmax's exponentials and maximum in one pass (opf_exp_sum_blocks_below_f32),
 * for a row of floats of one chunk: with a shift guessed from the row's first
 * NORMS_LANES elements and its last n % NORMS_LANES (the largest of them), the
 * ISA's kernel does every whole block and the loop after it the rest (at most
 * the shift); the sum then tells whether the guess held. Any shift up to the
 * row's maximum gives the same quotients e / sum but for their rounding, so
 * long as no x - shift is above OPF_EXP_SUM_MOST (88.03, where e would pass
 * 2^127: the kernel's e is then above 2^127 or not finite, as is the sum)
 * and the sum is finite: a sum of at most 2^127 says both (no e is above
 * it). Returns 0 where it is not (a guess more than 88 below the maximum,
 * +inf or NaN in the row, or a sum that large), or where the kernel did not
 * do the blocks (other ISA levels, CUDA): the caller then takes the row's
 * maximum first. The rows that fall back are the same at both levels that
 * have the kernel, AVX2 and AVX-512 (the same e and sums up to the test). */
OPF_KERNEL_FN int64_t norms_exp_below_blocks_f32(int64_t n, const float *x, float s, float *y, int64_t ahead,
                                                 float *acc, opf_earlier_row *earlier) {
#if defined(__CUDA_ARCH__)
    (void)n, (void)x, (void)s, (void)y, (void)ahead, (void)acc, (void)earlier;
    return 0;
#else
    return opf_exp_sum_blocks_below_f32(n, x, s, __builtin_inff(), y, ahead, acc, earlier);
#endif
}
OPF_KERNEL_FN int norms_exp_sum_guessed_f32(int64_t n, const float *x, float *y, int64_t ahead,
                                            opf_earlier_row *earlier, int fused, float *shift, float *sum) {
    typedef float T;
    if (n < NORMS_BLOCKS_MIN) {
        return 0;
    }
    const int64_t blocks = n - n % NORMS_LANES;
    const float first = norms_max_f32(NORMS_LANES, x, NULL), last = norms_max_f32(n - blocks, x + blocks, NULL);
    const float s = first > last ? first : last;
    if (!(s > -__builtin_inff() && s < __builtin_inff())) { /* (-inf: no finite x there; +inf: NaN throughout) */
        return 0;
    }
    T acc[NORMS_LANES], t;
    for (int j = 0; j < NORMS_LANES; j++) {
        acc[j] = 0;
    }
    int64_t i = norms_exp_below_blocks_f32(n, x, s, y, ahead, acc, earlier);
    if (i < blocks) {
        return 0;
    }
    NORMS_EXP_SUM_LOOPS(T, n, x, s, y, ahead, fused, acc, i, t)
    if (!(t <= 0x1p127f)) {
        return 0;
    }
    *shift = s;
    *sum = t;
    return 1;
}

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
        (sum)[k_] = NORMS_EXP_SUM(len_, (x) + at_, s_, c_, (store) ? (y) + at_ : NULL, NORMS_AHEAD(len_));             \
    }

/* What the last chunk's exponentials asked for past it (NORMS_EXP_CHUNKS):
 * the start of the next row where rows lie one after the other, which
 * OPF_STORE_ROW then does not ask for again (OPF_NEXT_ROW_ASKED). */
#define NORMS_EXP_CHUNKS_ASKED(n, x, y, chunk)                                                                         \
    if (OPF_ROW_STREAMED(y) && (n) > 0) { /* (the only rows with a next row to ask for) */                             \
        const int64_t last_ = ((n)-1) % (chunk) + 1;                                                                   \
        OPF_NEXT_ROW_ASKED((const char *)((x) + (n)-last_) + NORMS_AHEAD(last_), last_ * (int64_t)sizeof(T));          \
    }

/* exp(c - m): what a chunk's sum of exp(x - c) is multiplied by to be a sum
 * of exp(x - m); exactly 1 (opf_exp(0)) for the chunk that holds the
 * maximum, without the scalar exponential (a row of one chunk needs none:
 * 10% of softmax's time on rows of 64). */
#define NORMS_RESCALE(c, m) ((c) == (m) ? (T)1 : opf_exp((c) - (m)))

/* Chunks of at least `least` elements, at most NORMS_CHUNKS of them. */
#define NORMS_CHUNK(n, least) ((n) > NORMS_CHUNKS * (least) ? ((n) + NORMS_CHUNKS - 1) / NORMS_CHUNKS : (least))
/* softmax's and log_softmax's chunks: of 64 KiB at least (in a kernel body). */
#define NORMS_EXP_CHUNK(n) NORMS_CHUNK((n), 65536 / (int64_t)sizeof(T))

/* y = exp(x - max) / sum: per chunk e = exp(x - c), y = e * (exp(c - max) /
 * sum). e goes to the row's scratch (OPF_ROW_SCRATCH), so that a streamed
 * row is computed in cache and stored once, with its last multiplication.
 * Chunks of 64 KiB: a row of up to 16384 floats is one chunk, with one
 * factor, which that store applies; a longer row's chunks are scaled in
 * place first. A row with +inf or NaN, or of -inf only, is NaN throughout
 * (as torch.softmax): its sum is NaN, or 0 with max = -inf. A float row of
 * one chunk leaves its stores to the next row's first pass
 * (OPF_STORE_ROW_LATER), so that memory writes it while the next is read:
 * the exponentials with a guessed shift where that holds
 * (norms_exp_sum_guessed_f32), else the maximum (opf_max_blocks_f32). */
OPF_ROW_KERNEL(softmax, (x), (y), {
    const int64_t chunk = NORMS_EXP_CHUNK(n);
    T shift[NORMS_CHUNKS], sum[NORMS_CHUNKS], m = -(T)__builtin_inf();
    T *e;
    if (n <= chunk) {           /* NORMS_EXP_CHUNKS' one chunk, its first pass storing the earlier row */
        e = OPF_ROW_SCRATCH(y); /* (where the engine streams, the earlier row waits in its other row of scratch) */
        const int guessed = !OPF_IS_F64 && n >= NORMS_BLOCKS_MIN;
        OPF_EARLIER_ROW(earlier, guessed ? n / NORMS_LANES : NORMS_MAX_STEPS_T(n));
        float gs = 0, gsum = 0;
        if (guessed && norms_exp_sum_guessed_f32(n, (const float *)x, (float *)e, NORMS_AHEAD(n), &earlier,
                                                 opf_math_fma_ok, &gs, &gsum)) {
            m = shift[0] = (T)gs;
            sum[0] = (T)gsum;
        } else { /* the maximum, then the exponentials */
            m = NORMS_MAX_EARLIER(n, x, &earlier);
            shift[0] = m == -(T)__builtin_inf() ? (T)0 : m;
            sum[0] = n > 0 ? NORMS_EXP_SUM(n, x, shift[0], m, e, NORMS_AHEAD(n)) : (T)0;
        }
    } else {
        e = OPF_ROW_SCRATCH(y);
        NORMS_EXP_CHUNKS(T, n, x, e, chunk, shift, sum, m, 1)
    }
    NORMS_EXP_CHUNKS_ASKED(n, x, y, chunk)
    T total = 0;
    for (int64_t at = 0, k = 0; at < n; at += chunk, k++) {
        shift[k] = NORMS_RESCALE(shift[k], m);
        total += sum[k] * shift[k];
    }
    const T inv = (T)1 / total;
    if (n <= chunk) {
        const T f = n > 0 ? shift[0] * inv : (T)0;
        if (OPF_IS_F64) { /* (its exponentials, a scalar call each, take twice a copy's time: nothing to hide) */
            OPF_STORE_ROW(y, i, e[i] * f);
        } else {
            OPF_STORE_ROW_LATER(y, e, f);
        }
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
    const T s = OPF_ROW_DOT(n, dy, y); /* (asks for half of the next row) */
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
 * exp(x - c); a float row of one chunk in one pass with a guessed shift for
 * max where that holds (norms_exp_sum_guessed_f32, as softmax). Chunks of 64 KiB, as softmax's: a row of up to 16384
 * floats is one chunk, whose exponentials ask for the whole next row while they are computed (chunks of 1024 elements
 * asked for the next chunk only, and for 4 KiB of the next row: [8192, 4096] float32 1.34 times as fast on one thread
 * of an Intel Xeon, 1.28-1.29 on two, float64 1.22-1.23, results within an ulp of the chunked sums'). */
OPF_ROW_KERNEL(log_softmax, (x), (y), {
    const int64_t chunk = NORMS_EXP_CHUNK(n); /* (as softmax's: see above) */
    T shift[NORMS_CHUNKS], sum[NORMS_CHUNKS], m = -(T)__builtin_inf();
    float gs = 0, gsum = 0;
    if (!OPF_IS_F64 && n <= chunk &&
        norms_exp_sum_guessed_f32(n, (const float *)x, NULL, NORMS_AHEAD(n), NULL, opf_math_fma_ok, &gs, &gsum)) {
        m = shift[0] = (T)gs; /* (one pass, as softmax's: m is the guessed shift) */
        sum[0] = (T)gsum;
    } else {
        NORMS_EXP_CHUNKS(T, n, x, y, chunk, shift, sum, m, 0)
    }
    NORMS_EXP_CHUNKS_ASKED(n, x, y, chunk)
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
