/*
 * opforge_math.h — elementary functions that vectorize, for kernel authors.
 *
 * A kernel author writes the per-element math of a loop in plain C; opforge
 * compiles that loop once per ISA and the compiler vectorizes it. A call to
 * libm (expf, tanh, ...) stays a scalar call per element in such a loop, so
 * this header provides the functions ML kernels need as branch-free
 * `static inline` C that GCC and clang inline and vectorize:
 *
 *   float               double              type-generic (C11 _Generic; C++ overloads)
 *   opf_exp_f32(x)      opf_exp_f64(x)      opf_exp(x)       e^x
 *   opf_expm1_f32(x)    opf_expm1_f64(x)    opf_expm1(x)     e^x - 1
 *   opf_log_f32(x)      opf_log_f64(x)      opf_log(x)       natural logarithm
 *   opf_log1p_f32(x)    opf_log1p_f64(x)    opf_log1p(x)     log(1 + x)
 *   opf_tanh_f32(x)     opf_tanh_f64(x)     opf_tanh(x)
 *   opf_erf_f32(x)      opf_erf_f64(x)      opf_erf(x)
 *   opf_sigmoid_f32(x)  opf_sigmoid_f64(x)  opf_sigmoid(x)   1 / (1 + e^-x)
 *   opf_softplus_f32(x) opf_softplus_f64(x) opf_softplus(x)  log(1 + e^x), without overflow
 *   opf_sqrt_f32(x)     opf_sqrt_f64(x)     opf_sqrt(x)      correctly rounded (see below)
 *   opf_fabs_f32(x)     opf_fabs_f64(x)     opf_fabs(x)
 *   opf_fmin_f32(a, b)  ...                 opf_fmin(a, b)   C fmin/fmax: a NaN operand is ignored
 *   opf_fmax_f32(a, b)  ...                 opf_fmax(a, b)     (NaN only if both are NaN)
 *   opf_minimum_f32(a, b) ...               opf_minimum(a, b) NumPy minimum/maximum: a NaN operand
 *   opf_maximum_f32(a, b) ...               opf_maximum(a, b)   wins (NaN propagates)
 *   opf_select_f32(c, a, b) ...             opf_select(c, a, b) c ? a : b, as a bitwise blend
 *
 * The type-generic forms take float or double; any other argument type (an
 * integer, long double) goes to the double version, as <tgmath.h> would
 * convert an integer. In C++ they are overloads for float and double.
 *
 * Accuracy (ulp of the result, including the final rounding; measured against
 * glibc evaluated in double for float, and in long double for double). Builds
 * that fuse a*b+c (see "ISA variants" below) and builds that do not differ in
 * the last bit on some inputs; the bound is the larger of the two:
 *
 *   function   float max ulp     double max ulp    (tests/c/test_math.c asserts)
 *   exp        0.84 (FMA)        0.74              1.0
 *   expm1      1.30              1.41              1.5
 *   log        0.80              0.78              1.0
 *   log1p      1.37              1.23              1.5
 *   tanh       1.41              1.30              2.0
 *   erf        1.07              1.15              1.5
 *   sigmoid    2.12              1.77              2.5, 2.0
 *   softplus   2.26 (FMA: 1.84)  1.32              2.5
 *   sqrt       0.50              0.50              0.5
 *
 * Float errors of exp (FMA build) and softplus are the maximum over every one
 * of the 2^32 inputs (OPF_MATH_EXHAUSTIVE=1); the others' over the test's
 * sweeps of each function's domain (the exhaustive run checks them against
 * the asserted bounds too). Double errors are the maximum over dense sweeps,
 * boundary values and random inputs. tests/c/test_math.c asserts a bound on
 * each, for every build.
 *
 * Special values follow C99 Annex F (glibc): a NaN input gives a NaN; exp(+inf)
 * = +inf, exp(-inf) = +0, overflow gives +inf and underflow returns the
 * correctly scaled subnormal or 0 (results in the subnormal range are
 * computed, not flushed); expm1(-inf) = -1; log(0) = -inf, log(x < 0) = NaN,
 * log(+inf) = +inf; log1p(-1) = -inf, log1p(x < -1) = NaN; tanh(+-inf) = +-1,
 * erf(+-inf) = +-1, sigmoid(-inf) = 0 (and sigmoid of a large negative x is a
 * tiny positive number or 0, never NaN), sigmoid(+inf) = 1; softplus(+inf) =
 * +inf, softplus(-inf) = +0 (a large negative x gives e^x, subnormal or 0).
 * Signed zeros are kept where libm keeps them: expm1, log1p, tanh, erf and
 * sqrt of -0 are -0.
 * Floating-point exception flags and errno are not set as libm would.
 *
 * How these are written (for anyone adding one):
 *   - no branches: every path is computed and the result picked with
 *     opf_select, a bitwise blend. A plain `c ? a : b` whose arm is computed
 *     only for that arm is not vectorized by GCC on AVX2 or SSE under the
 *     default -ftrapping-math (GCC sinks the computation into a branch and
 *     will not speculate a floating-point operation that might trap; AVX-512
 *     gets masked operations instead). A ternary between values that are
 *     computed anyway (clamping x to a range) is fine;
 *   - bits are moved between float and integer with memcpy (no unions, so the
 *     header is also valid C++); integer work is unsigned and of the element's
 *     width (uint32_t for float, uint64_t for double) so that no conversion
 *     between widths, and no int64 <-> double conversion (absent before
 *     AVX-512), is needed;
 *   - range reduction rounds with the 1.5*2^23 (2^52) constant: (x + C) - C
 *     rounds x to an integer in round-to-nearest mode and leaves that integer
 *     in the low bits of x + C. __builtin_rintf would be clearer but is a libm
 *     call per element at the x86-64 baseline (SSE2);
 *   - no tables (gathers are slow), no calls that are not inlined: every
 *     function is always_inline.
 *
 * Compiler flags: nothing is needed. Do not compile code that uses this header
 * with -ffast-math, -fassociative-math or -ffinite-math-only: they fold away
 * (x + C) - C and the NaN/Inf tests. opf_sqrt vectorizes only with
 * -fno-math-errno (GCC and clang both keep sqrt a libm call when errno must be
 * set for negative inputs; its results are correctly rounded either way).
 *
 * ISA variants: a*b+c is written as an explicit fused multiply-add
 * (opf_math_fma_f32/f64) wherever the build has the instruction: opforge's
 * AVX2, AVX-512 and CUDA kernel builds, any build with -mfma or for AArch64
 * (opf_math_fma_ok below). A fused step costs one instruction instead of two
 * (about 20% of exp's time) and rounds once, so these builds agree with each
 * other bit for bit (and never depend on the compiler's contraction, which GCC
 * in ISO C mode, -std=c11 as opforge builds, does not do at all). The x86-64
 * base build (SSE2, no FMA) computes a*b+c with two roundings: its results
 * differ from the FMA builds' in the last bit on some inputs (about 0.05% of
 * them for exp, 2-3% for softplus and erf), always within the bounds above (the
 * algorithms depend on the rounding of no particular product). Which build
 * runs depends on the CPU (or OPFORGE_ISA), never on the number of threads.
 *
 * The rounding constant assumes the default round-to-nearest mode.
 */
#ifndef OPFORGE_MATH_H
#define OPFORGE_MATH_H

#include <stdint.h>
#include <string.h>

/* Exact floating-point comparisons are intended here. */
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wfloat-equal"
#endif

#if defined(__CUDACC__)
#define OPF_MATH_FN static __forceinline__ __host__ __device__
#elif defined(__GNUC__)
#define OPF_MATH_FN static inline __attribute__((always_inline))
#else
#define OPF_MATH_FN static inline
#endif

/* Whether a*b+c may be one fused multiply-add: a compile-time constant that
 * the functions below take as their last argument (opf_exp(x) is
 * opf_math_exp_f32(x, opf_math_fma_ok)). It is 1 where the whole translation
 * unit targets FMA hardware (-mfma, -march=haswell or later, AArch64) and 0
 * otherwise; a function compiled for an FMA target by a target attribute says
 * so in its own scope with OPF_MATH_USE_FMA, a local constant of the same
 * name that the opf_* names in that scope see. opforge.h puts it in the AVX2
 * and AVX-512 builds of every OPF_ELTWISE_KERNEL and OPF_ROW_KERNEL body and
 * in their CUDA builds (fmaf, fma on the device), so those builds fuse the
 * same operations and agree bit for bit; the base build (SSE2) does not fuse.
 * A helper function of your own outside a kernel body sees the file's
 * constant (0 on x86-64 without -mfma), on the CPU and on the device alike. */
#if defined(__FMA__) || defined(__aarch64__) || defined(__ARM_FEATURE_FMA)
enum { opf_math_fma_ok = 1 };
#else
enum { opf_math_fma_ok = 0 };
#endif
#if defined(__GNUC__)
#define OPF_MATH_USE_FMA                                                                                               \
    _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wshadow\"") enum { opf_math_fma_ok = 1 };        \
    _Pragma("GCC diagnostic pop")
#else
#define OPF_MATH_USE_FMA enum { opf_math_fma_ok = 1 };
#endif

/* a * b + c: one rounding where fused is set (the FMA instruction), two
 * otherwise. Every bound below holds either way. */
OPF_MATH_FN float opf_math_fma_f32(float a, float b, float c, int fused) {
#if defined(__CUDA_ARCH__)
    return fused ? fmaf(a, b, c) : a * b + c;
#else
    return fused ? __builtin_fmaf(a, b, c) : a * b + c;
#endif
}
OPF_MATH_FN double opf_math_fma_f64(double a, double b, double c, int fused) {
#if defined(__CUDA_ARCH__)
    return fused ? fma(a, b, c) : a * b + c;
#else
    return fused ? __builtin_fma(a, b, c) : a * b + c;
#endif
}
/* (inside the functions below, whose last parameter is `fused`) */
#define OPF_MATH_FMAF(a, b, c) opf_math_fma_f32((a), (b), (c), fused)
#define OPF_MATH_FMAD(a, b, c) opf_math_fma_f64((a), (b), (c), fused)

/* ------------------------------------------------------------------------ */
/* Bits, selects, small helpers                                              */
/* ------------------------------------------------------------------------ */

OPF_MATH_FN uint32_t opf_math_bits_f32(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
OPF_MATH_FN float opf_math_from_bits_f32(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}
OPF_MATH_FN uint64_t opf_math_bits_f64(double x) {
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
OPF_MATH_FN double opf_math_from_bits_f64(uint64_t u) {
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* c ? a : b, with both a and b evaluated (c is a truth value: 0 or not). */
OPF_MATH_FN float opf_select_f32(int c, float a, float b) {
    uint32_t m = 0u - (uint32_t)(c != 0);
    return opf_math_from_bits_f32((opf_math_bits_f32(a) & m) | (opf_math_bits_f32(b) & ~m));
}
OPF_MATH_FN double opf_select_f64(int c, double a, double b) {
    uint64_t m = (uint64_t)0 - (uint64_t)(c != 0);
    return opf_math_from_bits_f64((opf_math_bits_f64(a) & m) | (opf_math_bits_f64(b) & ~m));
}

/* |x| with the sign of s (the sign bit is copied, also for NaN and zeros). */
OPF_MATH_FN float opf_math_with_sign_f32(float x, float s) {
    return opf_math_from_bits_f32((opf_math_bits_f32(x) & 0x7fffffffu) | (opf_math_bits_f32(s) & 0x80000000u));
}
OPF_MATH_FN double opf_math_with_sign_f64(double x, double s) {
    const uint64_t sign = (uint64_t)1 << 63;
    return opf_math_from_bits_f64((opf_math_bits_f64(x) & ~sign) | (opf_math_bits_f64(s) & sign));
}

OPF_MATH_FN float opf_fabs_f32(float x) { return __builtin_fabsf(x); }
OPF_MATH_FN double opf_fabs_f64(double x) { return __builtin_fabs(x); }

/* Correctly rounded; sqrt(-0) = -0, sqrt(x < 0) = NaN. Vectorizes only under
 * -fno-math-errno (see the top of this file). */
OPF_MATH_FN float opf_sqrt_f32(float x) { return __builtin_sqrtf(x); }
OPF_MATH_FN double opf_sqrt_f64(double x) { return __builtin_sqrt(x); }

/* C99 fmin/fmax: a NaN operand is ignored (NaN only if both are NaN). Which
 * zero fmax(-0, +0) returns is unspecified, as in C. */
OPF_MATH_FN float opf_fmin_f32(float a, float b) { return opf_select_f32((a < b) | (b != b), a, b); }
OPF_MATH_FN float opf_fmax_f32(float a, float b) { return opf_select_f32((a > b) | (b != b), a, b); }
OPF_MATH_FN double opf_fmin_f64(double a, double b) { return opf_select_f64((a < b) | (b != b), a, b); }
OPF_MATH_FN double opf_fmax_f64(double a, double b) { return opf_select_f64((a > b) | (b != b), a, b); }

/* NumPy minimum/maximum (torch.minimum/maximum): a NaN operand is returned
 * (NaN propagates). Which zero maximum(-0, +0) returns is unspecified. */
OPF_MATH_FN float opf_minimum_f32(float a, float b) { return opf_select_f32((a < b) | (a != a), a, b); }
OPF_MATH_FN float opf_maximum_f32(float a, float b) { return opf_select_f32((a > b) | (a != a), a, b); }
OPF_MATH_FN double opf_minimum_f64(double a, double b) { return opf_select_f64((a < b) | (a != a), a, b); }
OPF_MATH_FN double opf_maximum_f64(double a, double b) { return opf_select_f64((a > b) | (a != a), a, b); }

/* ------------------------------------------------------------------------ */
/* Shared constants                                                          */
/* ------------------------------------------------------------------------ */

/* log2(e); ln 2 = LN2_HI + LN2_LO where LN2_HI has few enough significant bits
 * (15 for float, 42 for double) that k * LN2_HI is exact for every exponent k
 * the functions below produce. */
#define OPF_MATH_LOG2E_F32 0x1.715476p+0f
#define OPF_MATH_LN2_HI_F32 0x1.62e4p-1f
#define OPF_MATH_LN2_LO_F32 0x1.7f7d1cp-20f
#define OPF_MATH_LOG2E_F64 0x1.71547652b82fep+0
#define OPF_MATH_LN2_HI_F64 0x1.62e42fefa38p-1
#define OPF_MATH_LN2_LO_F64 0x1.ef35793c7673p-45
/* x + SHIFTER - SHIFTER rounds x to an integer (|x| < 2^22, resp. 2^51). */
#define OPF_MATH_SHIFTER_F32 0x1.8p23f
#define OPF_MATH_SHIFTER_F64 0x1.8p52

/* ------------------------------------------------------------------------ */
/* exp, expm1                                                                */
/* ------------------------------------------------------------------------ */

/* x = n ln2 + r with n = round(x / ln2), |r| <= ln2/2 (Cody-Waite: the
 * product n * LN2_HI is exact), and e^r - 1 = r + r^2 P(r), P a minimax
 * polynomial for (e^r - 1 - r) / r^2 (scripts/math_fit.py, fitted for the
 * relative error of e^r - 1, which also serves e^r). */
OPF_MATH_FN float opf_math_expm1_poly_f32(float r, float r2, int fused) {
    float r4 = r2 * r2;
    float p0_1 = OPF_MATH_FMAF(0x1.5554bp-3f, r, 0x1.fffffep-2f);
    float p2_3 = OPF_MATH_FMAF(0x1.1228aep-7f, r, 0x1.5556b4p-5f);
    float p0_3 = OPF_MATH_FMAF(p2_3, r2, p0_1);
    return OPF_MATH_FMAF(0x1.6bfd46p-10f, r4, p0_3);
}

/* n (as a float) and r = x - n ln2; t holds n in its low bits. */
#define OPF_MATH_REDUCE_F32(x, t, n, r)                                                                                \
    float t = OPF_MATH_FMAF((x), OPF_MATH_LOG2E_F32, OPF_MATH_SHIFTER_F32);                                            \
    float n = t - OPF_MATH_SHIFTER_F32;                                                                                \
    float r = OPF_MATH_FMAF(n, -OPF_MATH_LN2_HI_F32, (x));                                                             \
    r = OPF_MATH_FMAF(n, -OPF_MATH_LN2_LO_F32, r)

/* e^x = 2^n e^r. 2^n is applied as two factors 2^(n - n/2) * 2^(n/2), both
 * normal, so that e^x underflows gradually through the subnormals with a
 * single rounding and overflows to +inf. Beyond [-104, 89] the integer work
 * wraps harmlessly and the result is replaced (testing x at the end rather
 * than clamping it first keeps the clamp off the dependency chain, which is
 * measurably faster: these loops are bound by their chains' latency as much
 * as by their operation count). */
OPF_MATH_FN float opf_math_exp_f32(float x, int fused) {
    OPF_MATH_REDUCE_F32(x, t, n, r);
    float r2 = r * r;
    /* 1 + r + r^2 P(r) with 1 + r as hi + lo (Fast2Sum: |r| < 1) */
    float hi = 1.0f + r;
    float lo = (1.0f - hi) + r;
    float p = hi + OPF_MATH_FMAF(r2, opf_math_expm1_poly_f32(r, r2, fused), lo);
    /* m = n + 256 in [106, 384] for x in [-104, 89]; 2^(h - 128) * 2^(m - h - 128) = 2^n */
    uint32_t m = opf_math_bits_f32(t) - opf_math_bits_f32(OPF_MATH_SHIFTER_F32) + 256u;
    uint32_t h = m >> 1;
    float s1 = opf_math_from_bits_f32((h - 1u) << 23);
    float s2 = opf_math_from_bits_f32((m - h - 1u) << 23);
    float y = (p * s1) * s2;
    y = opf_select_f32(x > 89.0f, __builtin_inff(), y); /* e^88.73 > FLT_MAX */
    return opf_select_f32(x < -104.0f, 0.0f, y);        /* e^-103.98 < 2^-150 */
}

/* e^x - 1 = 2 (2^(n-1) - 1/2 + 2^(n-1) (e^r - 1)): the halved scale keeps
 * 2^(n-1) finite up to overflow, and 2^(n-1) - 1/2 is exact for the n where
 * it matters. Tiny |x| (and +-0, subnormals) return x itself. */
OPF_MATH_FN float opf_math_expm1_f32(float x, int fused) {
    OPF_MATH_REDUCE_F32(x, t, n, r);
    float q = (r * r) * opf_math_expm1_poly_f32(r, r * r, fused);
    /* 2^(n-1), n in [-116, 128] for x in [-80, 89] (beyond: replaced below) */
    uint32_t nb = opf_math_bits_f32(t) - opf_math_bits_f32(OPF_MATH_SHIFTER_F32);
    float h = opf_math_from_bits_f32((nb + 126u) << 23);
    float y = 2.0f * OPF_MATH_FMAF(h, q, OPF_MATH_FMAF(h, r, h - 0.5f));
    y = opf_select_f32(x > 89.0f, __builtin_inff(), y);
    y = opf_select_f32(x < -80.0f, -1.0f, y);
    return opf_select_f32(opf_fabs_f32(x) < 0x1p-25f, x, y);
}

OPF_MATH_FN double opf_math_expm1_poly_f64(double r, double r2, int fused) {
    double r4 = r2 * r2;
    double r8 = r4 * r4;
    double p0_1 = OPF_MATH_FMAD(0x1.5555555555559p-3, r, 0x1p-1);
    double p2_3 = OPF_MATH_FMAD(0x1.111111110f6b7p-7, r, 0x1.555555555554p-5);
    double p4_5 = OPF_MATH_FMAD(0x1.a01a01afdd8f9p-13, r, 0x1.6c16c16c1f0f2p-10);
    double p6_7 = OPF_MATH_FMAD(0x1.71ddf863b4e17p-19, r, 0x1.a01a017bb08ap-16);
    double p8_9 = OPF_MATH_FMAD(0x1.af5ea8573777cp-26, r, 0x1.27e536434e9d6p-22);
    double p0_3 = OPF_MATH_FMAD(p2_3, r2, p0_1);
    double p4_7 = OPF_MATH_FMAD(p6_7, r2, p4_5);
    double p8_10 = OPF_MATH_FMAD(0x1.1ee8883b370ap-29, r2, p8_9);
    double p0_7 = OPF_MATH_FMAD(p4_7, r4, p0_3);
    return OPF_MATH_FMAD(p8_10, r8, p0_7);
}

#define OPF_MATH_REDUCE_F64(x, t, n, r)                                                                                \
    double t = OPF_MATH_FMAD((x), OPF_MATH_LOG2E_F64, OPF_MATH_SHIFTER_F64);                                           \
    double n = t - OPF_MATH_SHIFTER_F64;                                                                               \
    double r = OPF_MATH_FMAD(n, -OPF_MATH_LN2_HI_F64, (x));                                                            \
    r = OPF_MATH_FMAD(n, -OPF_MATH_LN2_LO_F64, r)

OPF_MATH_FN double opf_math_exp_f64(double x, int fused) {
    OPF_MATH_REDUCE_F64(x, t, n, r);
    double r2 = r * r;
    /* 1 + r + r^2 P(r) with 1 + r as hi + lo (Fast2Sum: |r| < 1) */
    double hi = 1.0 + r;
    double lo = (1.0 - hi) + r;
    double p = hi + OPF_MATH_FMAD(r2, opf_math_expm1_poly_f64(r, r2, fused), lo);
    /* m = n + 2048 in [972, 3072] for x in [-746, 710]; 2^(h - 1024) * 2^(m - h - 1024) = 2^n */
    uint64_t m = opf_math_bits_f64(t) - opf_math_bits_f64(OPF_MATH_SHIFTER_F64) + 2048u;
    uint64_t h = m >> 1;
    double s1 = opf_math_from_bits_f64((h - 1u) << 52);
    double s2 = opf_math_from_bits_f64((m - h - 1u) << 52);
    double y = (p * s1) * s2;
    y = opf_select_f64(x > 710.0, __builtin_inf(), y); /* e^709.79 > DBL_MAX */
    return opf_select_f64(x < -746.0, 0.0, y);         /* e^-745.14 < 2^-1075 */
}

OPF_MATH_FN double opf_math_expm1_f64(double x, int fused) {
    OPF_MATH_REDUCE_F64(x, t, n, r);
    double q = (r * r) * opf_math_expm1_poly_f64(r, r * r, fused);
    /* 2^(n-1), n in [-93, 1024] for x in [-64, 710] (beyond: replaced below) */
    uint64_t nb = opf_math_bits_f64(t) - opf_math_bits_f64(OPF_MATH_SHIFTER_F64);
    double h = opf_math_from_bits_f64((nb + 1022u) << 52);
    double y = 2.0 * OPF_MATH_FMAD(h, q, OPF_MATH_FMAD(h, r, h - 0.5));
    y = opf_select_f64(x > 710.0, __builtin_inf(), y);
    y = opf_select_f64(x < -64.0, -1.0, y);
    return opf_select_f64(opf_fabs_f64(x) < 0x1p-54, x, y);
}

/* ------------------------------------------------------------------------ */
/* log, log1p                                                                */
/* ------------------------------------------------------------------------ */

/* k ln2 + log(1 + f) for f in [sqrt(1/2) - 1, sqrt(2) - 1]. With
 * s = f / (2 + f), log(1 + f) = 2 atanh(s) = 2s + s R(s^2), and since
 * 2s = f - s f, log(1 + f) = f - f^2/2 + s (f^2/2 + R): the large terms are
 * exact and R (a minimax polynomial, |s| <= 0.1716) adds under 1%. */
OPF_MATH_FN float opf_math_log_core_f32(float f, float k, int fused) {
    float s = f / (2.0f + f);
    float z = s * s;
    float z2 = z * z;
    float p0_1 = OPF_MATH_FMAF(0x1.995e9ep-2f, z, 0x1.55557ap-1f);
    float p = OPF_MATH_FMAF(0x1.31ea42p-2f, z2, p0_1);
    float hf = 0.5f * f * f;
    float lo = OPF_MATH_FMAF(s, OPF_MATH_FMAF(z, p, hf), k * OPF_MATH_LN2_LO_F32);
    return OPF_MATH_FMAF(k, OPF_MATH_LN2_HI_F32, f - (hf - lo));
}

/* x = 2^k m with m in [sqrt(1/2), sqrt(2)) (subnormals are scaled by 2^23
 * first), f = m - 1 exactly. */
OPF_MATH_FN float opf_math_log_f32(float x, int fused) {
    int sub = x < 0x1p-126f;
    float xs = opf_select_f32(sub, x * 0x1p23f, x);
    /* adding 1 - sqrt(1/2) to the bits carries into the exponent exactly when
     * the mantissa is >= sqrt(2) */
    uint32_t ix = opf_math_bits_f32(xs) + (0x3f800000u - 0x3f3504f3u);
    float k = (float)(int32_t)(ix >> 23) - opf_select_f32(sub, 150.0f, 127.0f);
    float f = opf_math_from_bits_f32((ix & 0x007fffffu) + 0x3f3504f3u) - 1.0f;
    float y = opf_math_log_core_f32(f, k, fused);
    /* +0, -0: -inf; < 0: NaN; +inf, NaN: x */
    float special = opf_select_f32(x == 0.0f, -__builtin_inff(), opf_select_f32(x < 0.0f, __builtin_nanf(""), x + x));
    return opf_select_f32((x > 0.0f) & (x < __builtin_inff()), y, special);
}

/* log(1 + x) = k ln2 + log(1 + f) where 2^k is the exponent of u = 1 + x
 * (rounded) and f = (1 + x) 2^-k - 1 = x 2^-k + (2^-k - 1) is computed from x,
 * not from u, so that the rounding of 1 + x is not lost: x 2^-k is exact and
 * 2^-k - 1 is exact whenever it matters (k <= 24). 2^-k = 2^-k1 2^-k2, both
 * factors normal for every k in [-24, 128]. */
OPF_MATH_FN float opf_math_log1p_f32(float x, int fused) {
    float u = 1.0f + x;
    uint32_t kb = (opf_math_bits_f32(u) + (0x3f800000u - 0x3f3504f3u)) >> 23; /* k + 127 */
    float a = opf_math_from_bits_f32((191u - (kb >> 1)) << 23);               /* 2^-k1, k1 = kb/2 - 64 */
    float b = opf_math_from_bits_f32((190u - kb + (kb >> 1)) << 23);          /* 2^-k2, k2 = k - k1 */
    float f = OPF_MATH_FMAF(x * a, b, a * b - 1.0f);
    float k = (float)(int32_t)kb - 127.0f;
    float y = opf_math_log_core_f32(f, k, fused);
    /* x < -1: NaN; -1: -inf; +-0 and +inf: x; NaN: NaN (from y) */
    y = opf_select_f32(x < -1.0f, __builtin_nanf(""), y);
    y = opf_select_f32(x == -1.0f, -__builtin_inff(), y);
    return opf_select_f32((x == 0.0f) | (x == __builtin_inff()), x, y);
}

OPF_MATH_FN double opf_math_log_core_f64(double f, double k, int fused) {
    double s = f / (2.0 + f);
    double z = s * s;
    double z2 = z * z;
    double z4 = z2 * z2;
    double p0_1 = OPF_MATH_FMAD(0x1.999999997f8bbp-2, z, 0x1.5555555555593p-1);
    double p2_3 = OPF_MATH_FMAD(0x1.c71c51c67429dp-3, z, 0x1.249249423e4a6p-2);
    double p4_5 = OPF_MATH_FMAD(0x1.39a02f0925ec7p-3, z, 0x1.74664d751bc34p-3);
    double p0_3 = OPF_MATH_FMAD(p2_3, z2, p0_1);
    double p4_6 = OPF_MATH_FMAD(0x1.2f15ba57bf605p-3, z2, p4_5);
    double p = OPF_MATH_FMAD(p4_6, z4, p0_3);
    double hf = 0.5 * f * f;
    double lo = OPF_MATH_FMAD(s, OPF_MATH_FMAD(z, p, hf), k * OPF_MATH_LN2_LO_F64);
    return OPF_MATH_FMAD(k, OPF_MATH_LN2_HI_F64, f - (hf - lo));
}

/* As opf_log_f32; the exponent becomes a double through the 2^52 constant
 * (no int64 -> double conversion before AVX-512). */
OPF_MATH_FN double opf_math_log_f64(double x, int fused) {
    int sub = x < 0x1p-1022;
    double xs = opf_select_f64(sub, x * 0x1p52, x);
    uint64_t ix = opf_math_bits_f64(xs) + (0x3ff0000000000000u - 0x3fe6a09e667f3bcdu);
    double k = opf_math_from_bits_f64(0x4330000000000000u | (ix >> 52)) - 0x1p52;
    k = k - opf_select_f64(sub, 1075.0, 1023.0);
    double f = opf_math_from_bits_f64((ix & 0x000fffffffffffffu) + 0x3fe6a09e667f3bcdu) - 1.0;
    double y = opf_math_log_core_f64(f, k, fused);
    double special = opf_select_f64(x == 0.0, -__builtin_inf(), opf_select_f64(x < 0.0, __builtin_nan(""), x + x));
    return opf_select_f64((x > 0.0) & (x < __builtin_inf()), y, special);
}

/* As opf_log1p_f32, k in [-53, 1024]. */
OPF_MATH_FN double opf_math_log1p_f64(double x, int fused) {
    double u = 1.0 + x;
    uint64_t kb = (opf_math_bits_f64(u) + (0x3ff0000000000000u - 0x3fe6a09e667f3bcdu)) >> 52; /* k + 1023 */
    double a = opf_math_from_bits_f64((1535u - (kb >> 1)) << 52);      /* 2^-k1, k1 = kb/2 - 512 */
    double b = opf_math_from_bits_f64((1534u - kb + (kb >> 1)) << 52); /* 2^-k2, k2 = k - k1 */
    double f = OPF_MATH_FMAD(x * a, b, a * b - 1.0);
    double k = opf_math_from_bits_f64(0x4330000000000000u | kb) - 0x1.00000000003ffp52;
    double y = opf_math_log_core_f64(f, k, fused);
    y = opf_select_f64(x < -1.0, __builtin_nan(""), y);
    y = opf_select_f64(x == -1.0, -__builtin_inf(), y);
    return opf_select_f64((x == 0.0) | (x == __builtin_inf()), x, y);
}

/* ------------------------------------------------------------------------ */
/* tanh, erf                                                                 */
/* ------------------------------------------------------------------------ */

/* |x| < 0.5625: x + x^3 P(x^2) (minimax); above: 1 - 2 / (e^2|x| + 1), whose
 * subtraction is benign once tanh >= 1/2. The sign is copied from x. */
OPF_MATH_FN float opf_math_tanh_f32(float x, int fused) {
    float a = opf_fabs_f32(x);
    float w = a * a;
    float w2 = w * w;
    float w4 = w2 * w2;
    float p0_1 = OPF_MATH_FMAF(0x1.110c7p-3f, w, -0x1.555548p-2f);
    float p2_3 = OPF_MATH_FMAF(0x1.582fa8p-6f, w, -0x1.b9094p-5f);
    float p0_3 = OPF_MATH_FMAF(p2_3, w2, p0_1);
    float p = OPF_MATH_FMAF(-0x1.950022p-8f, w4, p0_3);
    float small = OPF_MATH_FMAF(a, w * p, a);
    float large = 1.0f - 2.0f / (opf_math_exp_f32(2.0f * a, fused) + 1.0f); /* e^2a = +inf: 1 */
    return opf_math_with_sign_f32(opf_select_f32(a < 0.5625f, small, large), x);
}

OPF_MATH_FN double opf_math_tanh_f64(double x, int fused) {
    double a = opf_fabs_f64(x);
    double w = a * a;
    double w2 = w * w;
    double w4 = w2 * w2;
    double w8 = w4 * w4;
    double p0_1 = OPF_MATH_FMAD(0x1.11111111102b4p-3, w, -0x1.555555555554bp-2);
    double p2_3 = OPF_MATH_FMAD(0x1.664f484956917p-6, w, -0x1.ba1ba1b935e52p-5);
    double p4_5 = OPF_MATH_FMAD(0x1.d6d2479434e05p-9, w, -0x1.226e2d0263cefp-7);
    double p6_7 = OPF_MATH_FMAD(0x1.3460ac7172927p-11, w, -0x1.7d8b95df43471p-10);
    double p8_9 = OPF_MATH_FMAD(0x1.59726246e248cp-14, w, -0x1.e80a92c35fdcep-13);
    double p0_3 = OPF_MATH_FMAD(p2_3, w2, p0_1);
    double p4_7 = OPF_MATH_FMAD(p6_7, w2, p4_5);
    double p8_10 = OPF_MATH_FMAD(-0x1.3d27eb5aa1769p-16, w2, p8_9);
    double p0_7 = OPF_MATH_FMAD(p4_7, w4, p0_3);
    double p = OPF_MATH_FMAD(p8_10, w8, p0_7);
    double small = OPF_MATH_FMAD(a, w * p, a);
    double large = 1.0 - 2.0 / (opf_math_exp_f64(2.0 * a, fused) + 1.0);
    return opf_math_with_sign_f64(opf_select_f64(a < 0.5625, small, large), x);
}

/* |x| < 1: x + x P(x^2) (minimax for erf(x)/x - 1, relative error).
 * Above: erf = 1 - erfc, erfc(a) = e^(-a^2 + Q(a)) with Q a minimax polynomial
 * for log(erfc(a)) + a^2 on [1, 4], fitted for the error it causes in erf
 * (erfc(4) < 2^-25: erf rounds to 1 beyond, so a is clamped there). */
OPF_MATH_FN float opf_math_erf_f32(float x, int fused) {
    float a = opf_fabs_f32(x);
    float w = x * x;
    float w2 = w * w;
    float w4 = w2 * w2;
    float p0_1 = OPF_MATH_FMAF(-0x1.81273ep-2f, w, 0x1.06eba8p-3f);
    float p2_3 = OPF_MATH_FMAF(-0x1.b7f91p-6f, w, 0x1.ce2cf8p-4f);
    float p4_5 = OPF_MATH_FMAF(-0x1.a3f70ep-11f, w, 0x1.5405b6p-8f);
    float p0_3 = OPF_MATH_FMAF(p2_3, w2, p0_1);
    float p4_6 = OPF_MATH_FMAF(0x1.496a28p-14f, w2, p4_5);
    float p = OPF_MATH_FMAF(p4_6, w4, p0_3);
    float small = OPF_MATH_FMAF(a, p, a); /* on |x|, the sign set below (-0 stays -0 however a build fuses) */
    float a2 = a * a;
    float a4 = a2 * a2;
    float q0_1 = OPF_MATH_FMAF(-0x1.2088eap+0f, a, -0x1.662f2ap-12f);
    float q2_3 = OPF_MATH_FMAF(-0x1.a65344p-4f, a, 0x1.728a2ap-2f);
    float q4_5 = OPF_MATH_FMAF(-0x1.825bp-9f, a, 0x1.65cb7ap-6f);
    float q0_3 = OPF_MATH_FMAF(q2_3, a2, q0_1);
    float q4_6 = OPF_MATH_FMAF(0x1.86dd9p-13f, a2, q4_5);
    float q = OPF_MATH_FMAF(q4_6, a4, q0_3);
    float large = 1.0f - opf_math_exp_f32(q - a2, fused);
    large = opf_select_f32(a > 4.0f, 1.0f, large);
    return opf_math_with_sign_f32(opf_select_f32(a < 1.0f, small, large), x);
}

/* As opf_erf_f32: x + x P(x^2) below 1, 1 - e^(-a^2 + Q(a)) on [1, 6]
 * (erfc(6) < 2^-55). */
OPF_MATH_FN double opf_math_erf_f64(double x, int fused) {
    double a = opf_fabs_f64(x);
    double w = x * x;
    double w2 = w * w;
    double w4 = w2 * w2;
    double w8 = w4 * w4;
    double p0_1 = OPF_MATH_FMAD(-0x1.812746b0379bdp-2, w, 0x1.06eba8214db68p-3);
    double p2_3 = OPF_MATH_FMAD(-0x1.b82ce311fa93cp-6, w, 0x1.ce2f21a040d16p-4);
    double p4_5 = OPF_MATH_FMAD(-0x1.c02db03dd681dp-11, w, 0x1.565bccf92b2bcp-8);
    double p6_7 = OPF_MATH_FMAD(-0x1.f4ca4d6e5970fp-17, w, 0x1.f9a2baa8f0036p-14);
    double p8_9 = OPF_MATH_FMAD(-0x1.5c0726bb809eap-23, w, 0x1.b97fd3d0d3d21p-20);
    double p10_11 = OPF_MATH_FMAD(-0x1.abae4501762abp-31, w, 0x1.d71b0db42ab0ep-27);
    double p0_3 = OPF_MATH_FMAD(p2_3, w2, p0_1);
    double p4_7 = OPF_MATH_FMAD(p6_7, w2, p4_5);
    double p8_11 = OPF_MATH_FMAD(p10_11, w2, p8_9);
    double p0_7 = OPF_MATH_FMAD(p4_7, w4, p0_3);
    double p = OPF_MATH_FMAD(p8_11, w8, p0_7);
    double small = OPF_MATH_FMAD(a, p, a); /* on |x|, the sign set below (-0 stays -0 however a build fuses) */
    double a2 = a * a;
    double a4 = a2 * a2;
    double a8 = a4 * a4;
    double a16 = a8 * a8;
    double q0_1 = OPF_MATH_FMAD(-0x1.20dd1fd62138dp+0, a, -0x1.0df0033d7bbdap-21);
    double q2_3 = OPF_MATH_FMAD(-0x1.a4ac5e565f6cap-4, a, 0x1.7413b18009191p-2);
    double q4_5 = OPF_MATH_FMAD(0x1.ae8e75ad421ap-12, a, 0x1.3722a27b8a131p-6);
    double q6_7 = OPF_MATH_FMAD(0x1.9407fcc28c85p-11, a, -0x1.f63f8e92cd3adp-10);
    double q8_9 = OPF_MATH_FMAD(-0x1.5418de6925ef6p-16, a, -0x1.1b338d0d6fff8p-13);
    double q10_11 = OPF_MATH_FMAD(-0x1.22d7464790518p-17, a, 0x1.7eeddaf591b2ep-16);
    double q12_13 = OPF_MATH_FMAD(-0x1.90db6e9617b2dp-22, a, 0x1.1ea9fcbfca4d2p-19);
    double q14_15 = OPF_MATH_FMAD(-0x1.0e61545e22ce9p-28, a, 0x1.8ecc0e86baedcp-25);
    double q16_17 = OPF_MATH_FMAD(-0x1.5ad9c0d781d5dp-38, a, 0x1.c1ba4888713b4p-33);
    double q0_3 = OPF_MATH_FMAD(q2_3, a2, q0_1);
    double q4_7 = OPF_MATH_FMAD(q6_7, a2, q4_5);
    double q8_11 = OPF_MATH_FMAD(q10_11, a2, q8_9);
    double q12_15 = OPF_MATH_FMAD(q14_15, a2, q12_13);
    double q0_7 = OPF_MATH_FMAD(q4_7, a4, q0_3);
    double q8_15 = OPF_MATH_FMAD(q12_15, a4, q8_11);
    double q0_15 = OPF_MATH_FMAD(q8_15, a8, q0_7);
    double q = OPF_MATH_FMAD(q16_17, a16, q0_15);
    double large = 1.0 - opf_math_exp_f64(q - a * a, fused);
    large = opf_select_f64(a > 6.0, 1.0, large);
    return opf_math_with_sign_f64(opf_select_f64(a < 1.0, small, large), x);
}

/* ------------------------------------------------------------------------ */
/* sigmoid                                                                   */
/* ------------------------------------------------------------------------ */

/* With z = e^-|x| in (0, 1]: 1 / (1 + z) for x >= 0, z / (1 + z) for x < 0
 * (no overflow, no cancellation; a large negative x gives e^x, subnormal or
 * 0, never NaN). */
OPF_MATH_FN float opf_math_sigmoid_f32(float x, int fused) {
    float z = opf_math_exp_f32(-opf_fabs_f32(x), fused);
    float num = opf_select_f32(x < 0.0f, z, 1.0f);
    return num / (1.0f + z);
}
OPF_MATH_FN double opf_math_sigmoid_f64(double x, int fused) {
    double z = opf_math_exp_f64(-opf_fabs_f64(x), fused);
    double num = opf_select_f64(x < 0.0, z, 1.0);
    return num / (1.0 + z);
}

/* ------------------------------------------------------------------------ */
/* softplus                                                                  */
/* ------------------------------------------------------------------------ */

/* softplus(x) = log(1 + e^x) = max(x, 0) + log1p(z), z = e^-|x| in (0, 1].
 * Float: z = 2^n e^r as in opf_exp_f32 (2^n applied as 2^(n + 64) 2^-64, so
 * that a z below 2^-126 is rounded once), then log1p(z) = z + z^2 Q1(z), Q1 a
 * minimax polynomial of degree 8 (log1p(z) / z = 1 + z Q1(z) on [0, 1],
 * relative error 2^-26.7: scripts/math_fit.py softplus_f32): no division, no
 * exponent extraction, about 40% of the time of
 * max(x, 0) + opf_log1p(opf_exp(-|x|)). A large negative x gives e^x
 * (subnormal or 0); softplus(+inf) = +inf, softplus(-inf) = +0, NaN: NaN.
 * Double: that composite. */
OPF_MATH_FN float opf_math_softplus_f32(float x, int fused) {
    float a = opf_fabs_f32(x);
    OPF_MATH_REDUCE_F32(-a, t, n, r);
    /* e^r = 1 + (r + r^2 P(r)) (opf_exp_f32's polynomial; the rounding of
     * 1 + r that opf_exp_f32 keeps costs little here, where the final
     * rounding of max(x, 0) + y dominates) */
    float r2 = r * r;
    float e = 1.0f + OPF_MATH_FMAF(r2, opf_math_expm1_poly_f32(r, r2, fused), r);
    /* z = e 2^n = (e 2^(n + 64)) 2^-64: n + 64 >= -86 keeps the first factor
     * normal for |x| <= 104, and z below 2^-126 is rounded once, by the
     * multiplication (beyond 104: replaced below) */
    uint32_t scale = (opf_math_bits_f32(t) + 64u) << 23; /* (n + 64) << 23 */
    float z = opf_math_from_bits_f32(opf_math_bits_f32(e) + scale) * 0x1p-64f;
    /* log1p(z) = z + z^2 Q1(z) */
    float q = OPF_MATH_FMAF(-0x1.a93374p-9f, z, 0x1.453f12p-6f);
    q = OPF_MATH_FMAF(q, z, -0x1.d29ccep-5f);
    q = OPF_MATH_FMAF(q, z, 0x1.b2536p-4f);
    q = OPF_MATH_FMAF(q, z, -0x1.397562p-3f);
    q = OPF_MATH_FMAF(q, z, 0x1.92f696p-3f);
    q = OPF_MATH_FMAF(q, z, -0x1.ff0f86p-3f);
    q = OPF_MATH_FMAF(q, z, 0x1.554c8p-2f);
    q = OPF_MATH_FMAF(q, z, -0x1.ffffcp-2f);
    float y = opf_select_f32(a > 104.0f, 0.0f, OPF_MATH_FMAF(z * z, q, z)); /* e^-104 < 2^-150; +-inf: 0 */
    /* max(x, 0) + y, a NaN x passed through */
    return (x < 0.0f ? 0.0f : x) + y;
}

OPF_MATH_FN double opf_math_softplus_f64(double x, int fused) {
    double y = opf_math_log1p_f64(opf_math_exp_f64(-opf_fabs_f64(x), fused), fused);
    return (x < 0.0 ? 0.0 : x) + y;
}

/* ------------------------------------------------------------------------ */
/* Type-generic names                                                        */
/* ------------------------------------------------------------------------ */

/* The per-dtype names of the functions that use FMA where the build has it
 * (opf_math_fma_ok, see the top of this file). */
#define opf_exp_f32(x) opf_math_exp_f32((x), opf_math_fma_ok)
#define opf_exp_f64(x) opf_math_exp_f64((x), opf_math_fma_ok)
#define opf_expm1_f32(x) opf_math_expm1_f32((x), opf_math_fma_ok)
#define opf_expm1_f64(x) opf_math_expm1_f64((x), opf_math_fma_ok)
#define opf_log_f32(x) opf_math_log_f32((x), opf_math_fma_ok)
#define opf_log_f64(x) opf_math_log_f64((x), opf_math_fma_ok)
#define opf_log1p_f32(x) opf_math_log1p_f32((x), opf_math_fma_ok)
#define opf_log1p_f64(x) opf_math_log1p_f64((x), opf_math_fma_ok)
#define opf_tanh_f32(x) opf_math_tanh_f32((x), opf_math_fma_ok)
#define opf_tanh_f64(x) opf_math_tanh_f64((x), opf_math_fma_ok)
#define opf_erf_f32(x) opf_math_erf_f32((x), opf_math_fma_ok)
#define opf_erf_f64(x) opf_math_erf_f64((x), opf_math_fma_ok)
#define opf_sigmoid_f32(x) opf_math_sigmoid_f32((x), opf_math_fma_ok)
#define opf_sigmoid_f64(x) opf_math_sigmoid_f64((x), opf_math_fma_ok)
#define opf_softplus_f32(x) opf_math_softplus_f32((x), opf_math_fma_ok)
#define opf_softplus_f64(x) opf_math_softplus_f64((x), opf_math_fma_ok)

#ifdef __cplusplus
#define OPF_MATH_OVERLOAD_FMA(name)                                                                                    \
    OPF_MATH_FN float opf_math_##name(float x, int fused) { return opf_math_##name##_f32(x, fused); }                  \
    OPF_MATH_FN double opf_math_##name(double x, int fused) { return opf_math_##name##_f64(x, fused); }
#define OPF_MATH_OVERLOAD1(name)                                                                                       \
    OPF_MATH_FN float opf_##name(float x) { return opf_##name##_f32(x); }                                              \
    OPF_MATH_FN double opf_##name(double x) { return opf_##name##_f64(x); }
#define OPF_MATH_OVERLOAD2(name)                                                                                       \
    OPF_MATH_FN float opf_##name(float a, float b) { return opf_##name##_f32(a, b); }                                  \
    OPF_MATH_FN double opf_##name(double a, double b) { return opf_##name##_f64(a, b); }
OPF_MATH_OVERLOAD_FMA(exp)
OPF_MATH_OVERLOAD_FMA(expm1)
OPF_MATH_OVERLOAD_FMA(log)
OPF_MATH_OVERLOAD_FMA(log1p)
OPF_MATH_OVERLOAD_FMA(tanh)
OPF_MATH_OVERLOAD_FMA(erf)
OPF_MATH_OVERLOAD_FMA(sigmoid)
OPF_MATH_OVERLOAD_FMA(softplus)
OPF_MATH_OVERLOAD1(sqrt)
OPF_MATH_OVERLOAD1(fabs)
OPF_MATH_OVERLOAD2(fmin)
OPF_MATH_OVERLOAD2(fmax)
OPF_MATH_OVERLOAD2(minimum)
OPF_MATH_OVERLOAD2(maximum)
OPF_MATH_FN float opf_select(bool c, float a, float b) { return opf_select_f32(c, a, b); }
OPF_MATH_FN double opf_select(bool c, double a, double b) { return opf_select_f64(c, a, b); }
#undef OPF_MATH_OVERLOAD_FMA
#undef OPF_MATH_OVERLOAD1
#undef OPF_MATH_OVERLOAD2
#define OPF_MATH_GENERIC_FMA(name, x) opf_math_##name((x), opf_math_fma_ok)
#else
#define OPF_MATH_GENERIC_FMA(name, x)                                                                                  \
    _Generic((x), float : opf_math_##name##_f32, default : opf_math_##name##_f64)((x), opf_math_fma_ok)
#define OPF_MATH_GENERIC1(name, x) _Generic((x), float : opf_##name##_f32, default : opf_##name##_f64)(x)
/* Two operands: float only if both are float (the usual conversions). */
#define OPF_MATH_GENERIC2(name, a, b)                                                                                  \
    _Generic((a) + (b), float : opf_##name##_f32, default : opf_##name##_f64)((a), (b))
#define opf_sqrt(x) OPF_MATH_GENERIC1(sqrt, x)
#define opf_fabs(x) OPF_MATH_GENERIC1(fabs, x)
#define opf_fmin(a, b) OPF_MATH_GENERIC2(fmin, a, b)
#define opf_fmax(a, b) OPF_MATH_GENERIC2(fmax, a, b)
#define opf_minimum(a, b) OPF_MATH_GENERIC2(minimum, a, b)
#define opf_maximum(a, b) OPF_MATH_GENERIC2(maximum, a, b)
#define opf_select(c, a, b) _Generic((a) + (b), float : opf_select_f32, default : opf_select_f64)((c), (a), (b))
#endif
#define opf_exp(x) OPF_MATH_GENERIC_FMA(exp, x)
#define opf_expm1(x) OPF_MATH_GENERIC_FMA(expm1, x)
#define opf_log(x) OPF_MATH_GENERIC_FMA(log, x)
#define opf_log1p(x) OPF_MATH_GENERIC_FMA(log1p, x)
#define opf_tanh(x) OPF_MATH_GENERIC_FMA(tanh, x)
#define opf_erf(x) OPF_MATH_GENERIC_FMA(erf, x)
#define opf_sigmoid(x) OPF_MATH_GENERIC_FMA(sigmoid, x)
#define opf_softplus(x) OPF_MATH_GENERIC_FMA(softplus, x)

#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

#undef OPF_MATH_FN
#undef OPF_MATH_FMAF
#undef OPF_MATH_FMAD
#undef OPF_MATH_REDUCE_F32
#undef OPF_MATH_REDUCE_F64
#undef OPF_MATH_LOG2E_F32
#undef OPF_MATH_LN2_HI_F32
#undef OPF_MATH_LN2_LO_F32
#undef OPF_MATH_LOG2E_F64
#undef OPF_MATH_LN2_HI_F64
#undef OPF_MATH_LN2_LO_F64
#undef OPF_MATH_SHIFTER_F32
#undef OPF_MATH_SHIFTER_F64

#endif /* OPFORGE_MATH_H */
