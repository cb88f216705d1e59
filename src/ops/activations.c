/*
 * activations.c — the smooth elementwise activations of a transformer block:
 * gelu (exact, or its tanh approximation), silu, sigmoid and tanh, each with
 * its gradient row and that row's own gradient row (second order), written
 * as a user writes ops: one OPF_ELTWISE_KERNEL line per row and a
 * declaration. Like eltwise.c, the file also compiles as CUDA C++ (cuda.mk).
 *
 * The math (the helpers below are plain inline C on the opforge_math.h
 * model: no branches, no libm, vectorized with the kernel's loop):
 *
 *   gelu(x)     = x Φ(x), Φ the standard normal CDF, or with
 *                 approximate=tanh: x σ(v(x)), v(x) = 2 √(2/π) (x + 0.044715 x³)
 *                 (= 0.5 x (1 + tanh(v/2)), PyTorch's and JAX's formula);
 *   silu(x)     = x σ(x);
 *   sigmoid(x)  = σ(x) = 1 / (1 + e^-x);   tanh(x).
 *
 * gelu and silu are evaluated through their tail, T = Φ(-|x|) (exact gelu)
 * or σ(-|v|) (tanh gelu, silu), a number in (0, 1/2]: f(x) = x T for x < 0
 * and x (1 - T) for x >= 0, so neither side cancels. T = e^(-h) M with
 *   exact gelu:  h = x²/2,  M = Φ(-a) e^(a²/2), a = |x| (a rational in a
 *                (float) or a polynomial in 1 / (4 + a) (double),
 *                scripts/activation_fits.py);
 *   tanh gelu:   h = |v|,   M = 1 / (1 + e^-h);   silu: h = |x|, same M.
 * h is formed as an unevaluated sum hi + lo (x² exactly by an FMA; v with
 * double-word arithmetic): e^-h has the condition number h (up to ~110 in
 * float), so h rounded to the dtype would cost up to ~100 ulp in the tails.
 * e^-h is computed scaled by 2^64 (2^512 for double) and unscaled in the
 * last multiplication, so that a result in the subnormal range is rounded
 * once, not computed from a subnormal intermediate. The derivatives reuse
 * e^-h and M:
 *   exact gelu:  f' = Φ(x) + x φ(x),  f'' = φ(x) (2 - x²),     φ = e^-h / √(2π)
 *   σ forms:     f' = σ + x σ(1 - σ) v',  f'' = σ(1 - σ) (2 v' + x (1 - 2σ) v'² + x v''),
 *                with σ = σ(v), σ(1 - σ) = e^-h M², v = x for silu.
 * a*b + c is an FMA where the extra precision is needed (an FMA instruction
 * in the AVX2, AVX-512, AArch64 and CUDA builds, a libm call in the x86-64
 * baseline build; correctly rounded everywhere, so every build gives the
 * same bits).
 *
 * Special values follow PyTorch, JAX and TensorFlow: NaN gives NaN; gelu and
 * silu of +inf are +inf and of -inf NaN (their -inf * 0), their derivatives
 * at +-inf NaN; sigmoid(-inf) = 0, sigmoid(+inf) = 1, tanh(+-inf) = +-1. A
 * large finite x gets the limit values (gelu(-1e30) = -0, gelu'(1e30) = 1).
 *
 * sigmoid's and tanh's gradient rows take the output y (dx = dy y (1 - y),
 * dx = dy (1 - y²)), as the frameworks' own do; gelu's and silu's take x.
 */
#include "cuda_kernels.h"
#ifdef __cplusplus
extern "C" {
#endif
#include "ops.h"
#ifdef __cplusplus
}
#endif

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

/* a * b + c rounded once. */
OPF_KERNEL_FN float act_fma_f32(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
    return fmaf(a, b, c);
#else
    return __builtin_fmaf(a, b, c);
#endif
}
OPF_KERNEL_FN double act_fma_f64(double a, double b, double c) {
#if defined(__CUDA_ARCH__)
    return fma(a, b, c);
#else
    return __builtin_fma(a, b, c);
#endif
}

/* c0 + c1 t + ... + c4 t^4 (c5 t^5), by Horner's rule: an FMA a step. */
OPF_KERNEL_FN float act_poly4_f32(float t, float c0, float c1, float c2, float c3, float c4) {
    return act_fma_f32(act_fma_f32(act_fma_f32(act_fma_f32(c4, t, c3), t, c2), t, c1), t, c0);
}
OPF_KERNEL_FN float act_poly5_f32(float t, float c0, float c1, float c2, float c3, float c4, float c5) {
    return act_fma_f32(act_poly4_f32(t, c1, c2, c3, c4, c5), t, c0);
}

/* The scale of the tails' exponentials: e^-h is computed times 2^ACT_S. */
#define ACT_UNSCALE_F32 0x1p-64f
#define ACT_UNSCALE_F64 0x1p-512

/* e^(-(hi + lo)) 2^64 for hi in [-1, 127], |lo| <= 2^-10 |hi|: opf_exp_f32's
 * reduction with the FMA and the low part, e^r = 1 + r (1 + r Q(r)) (Q a
 * minimax polynomial, scripts/math_fit.py fit_exp(4, 24, "exp")), and the
 * scale 2^(n + 64) added to the exponent field (the result stays normal over
 * that range). A NaN argument may give a number (its payload is shifted into
 * the exponent field): the callers carry NaN through x itself. */
OPF_KERNEL_FN float act_exp_neg_f32(float hi, float lo) {
    float t = act_fma_f32(-hi, 0x1.715476p+0f, 0x1.8p23f); /* n = round(-hi / ln2) in the low bits */
    float n = t - 0x1.8p23f;
    float r = act_fma_f32(n, -0x1.62e4p-1f, -hi); /* exact: n ln2_hi has 23 bits */
    r = act_fma_f32(n, -0x1.7f7d1cp-20f, r) - lo;
    /* e^r 2^64 = 2^64 + r (2^64 + r Q(r) 2^64) */
    float q = act_fma_f32(0x1.6a1c5cp+54f, r, 0x1.1239b8p+57f);
    q = act_fma_f32(q, r, 0x1.5558d6p+59f);
    q = act_fma_f32(q, r, 0x1.555492p+61f);
    q = act_fma_f32(q, r, 0x1.fffffcp+62f);
    float e = act_fma_f32(r, act_fma_f32(r, q, 0x1p64f), 0x1p64f);
    /* times 2^n: the low bits of t, shifted into the exponent field, are n << 23 */
    return opf_math_from_bits_f32(opf_math_bits_f32(e) + (opf_math_bits_f32(t) << 23));
}

/* e^(-(s + sl)/2) 2^64 for s in [0, 254]: act_exp_neg_f32 on r2 = 2r, the
 * reduction by 2 ln2 exact, Q's coefficients scaled by 2^-(k+2). */
OPF_KERNEL_FN float act_exp_neg_half_f32(float s, float sl) {
    float t = act_fma_f32(-s, 0x1.715476p-1f, 0x1.8p23f);
    float n = t - 0x1.8p23f;
    float r = act_fma_f32(n, -0x1.62e4p+0f, -s); /* exact */
    r = act_fma_f32(n, -0x1.7f7d1cp-19f, r) - sl;
    float q = act_fma_f32(0x1.6a1c5cp+48f, r, 0x1.1239b8p+52f);
    q = act_fma_f32(q, r, 0x1.5558d6p+55f);
    q = act_fma_f32(q, r, 0x1.555492p+58f);
    q = act_fma_f32(q, r, 0x1.fffffcp+60f);
    float e = act_fma_f32(r, act_fma_f32(r, q, 0x1p63f), 0x1p64f);
    return opf_math_from_bits_f32(opf_math_bits_f32(e) + (opf_math_bits_f32(t) << 23));
}

/* e^(-(hi + lo)) 2^512 for hi in [-1, 1060] (opf_exp_f64's constants). */
OPF_KERNEL_FN double act_exp_neg_f64(double hi, double lo) {
    double t = act_fma_f64(-hi, 0x1.71547652b82fep+0, 0x1.8p52);
    double n = t - 0x1.8p52;
    double r = act_fma_f64(n, -0x1.62e42fefa38p-1, -hi); /* exact: n ln2_hi has 53 bits */
    r = act_fma_f64(n, -0x1.ef35793c7673p-45, r) - lo;
    double p = 0x1.1ee8883b370ap-29;
    p = act_fma_f64(p, r, 0x1.af5ea8573777cp-26);
    p = act_fma_f64(p, r, 0x1.27e536434e9d6p-22);
    p = act_fma_f64(p, r, 0x1.71ddf863b4e17p-19);
    p = act_fma_f64(p, r, 0x1.a01a017bb08ap-16);
    p = act_fma_f64(p, r, 0x1.a01a01afdd8f9p-13);
    p = act_fma_f64(p, r, 0x1.6c16c16c1f0f2p-10);
    p = act_fma_f64(p, r, 0x1.111111110f6b7p-7);
    p = act_fma_f64(p, r, 0x1.555555555554p-5);
    p = act_fma_f64(p, r, 0x1.5555555555559p-3);
    p = act_fma_f64(p, r, 0x1p-1);
    double e = 0x1p512 + act_fma_f64(r * r, p, r) * 0x1p512;
    /* bits(0x1.8p52) << 52 is 0 mod 2^64: bits(t) << 52 = n << 52 */
    return opf_math_from_bits_f64(opf_math_bits_f64(e) + (opf_math_bits_f64(t) << 52));
}

/* f(x), f'(x) and f''(x) of one activation. A kernel uses what it needs;
 * the compiler drops the rest. */
typedef struct act_f32 {
    float f, d1, d2;
} act_f32;
typedef struct act_f64 {
    double f, d1, d2;
} act_f64;

/* The kernels' dtype dispatch: act_<fn>_f32 or _f64 per T, field `part`. */
#define ACT(fn, part, x) (OPF_IS_F64 ? (T)act_##fn##_f64(x).part : (T)act_##fn##_f32(x).part)

/* f' and f'' from the tail T = e^-h M, given scaled by 2^S: f' = [x < 0] T +
 * sign(x) D with ds = D 2^S, and hs = f'' 2^S. With inf_nan (forms that clamp
 * |x|), +-inf (and NaN) get NaN explicitly; the others get it from inf * 0. */
#define ACT_DERIVATIVES(T, scale, unscale, x, ds, hs, inf_nan, out)                                                    \
    do {                                                                                                               \
        (out).d1 = opf_select((x) < 0, -(ds), (scale) + (ds)) * (unscale);                                             \
        (out).d2 = (hs) * (unscale);                                                                                   \
        if (inf_nan) {                                                                                                 \
            T nan_at_inf_ = (x) - (x);                                                                                 \
            (out).d1 += nan_at_inf_;                                                                                   \
            (out).d2 += nan_at_inf_;                                                                                   \
        }                                                                                                              \
    } while (0)

/* ------------------------------------------------------------------------ */
/* gelu                                                                      */
/* ------------------------------------------------------------------------ */

/* Exact gelu: h = x²/2 (hi + lo by an FMA), M = R(a) = Φ(-a) e^(a²/2), a = |x|,
 * = P(a) / Q(a), degrees 4 / 5, positive coefficients (no cancellation in
 * either Horner sum), relative error 2^-27.2 on [0, 15] before rounding
 * (scripts/activation_fits.py gelu_f32; double: degree 23 in u, gelu_f64).
 * Over every float: 6.3 / 3.9 / 3.3 ulp in f / f' / f''. It replaced a
 * degree-10 polynomial in t = 2/(2 + a) (5.7 / 5.4 / 3.3 ulp), whose division
 * it keeps and whose 11 multiply-class operations it cuts to 9: gelu 1.17×,
 * gelu_grad 1.18× faster on a Zen 3 (docs/performance-history.md).
 * G = a/√(2π) - R (f' = Φ + x φ), H = (2 - x²)/√(2π). Beyond |x| = 15 (39)
 * every tail underflows. */
OPF_KERNEL_FN act_f32 act_gelu_erf_f32(float x) {
    float a = opf_fabs_f32(x);
    /* (a minimum, as a blend: the conditional expression kept GCC from vectorizing
     * the loop for AVX2 and SSE, where it could not if-convert it; a NaN x makes
     * f NaN through x itself) */
    float ac = opf_select_f32(a < 15.0f, a, 15.0f);
    float s = ac * ac;
    float es = act_exp_neg_half_f32(s, act_fma_f32(ac, ac, -s)); /* e^(-a²/2) 2^64, a² exact as s + sl */
    float p = act_poly4_f32(ac, 0.5f, 0x1.c1d232p-2f, 0x1.78c2d4p-3f, 0x1.4ee336p-5f, 0x1.102c4ap-8f);
    float q = act_poly5_f32(ac, 1.0f, 0x1.ad2b4ap+0f, 0x1.349dcap+0f, 0x1.e2b654p-2f, 0x1.a3be8ep-4f, 0x1.551d58p-7f);
    float r = p / q;
    es = opf_select_f32(a > 15.0f, 0.0f, es);
    float ts = es * r;
    float ds = es * act_fma_f32(ac, 0x1.988454p-2f, -r);
    float two_minus_s = ((0x1.6a09e6p+0f - ac) + 0x1.9fcef4p-26f) * (0x1.6a09e6p+0f + ac); /* 2 - a², exact near √2 */
    float hs = es * (0x1.988454p-2f * two_minus_s);
    act_f32 out;
    /* f = x T for x < 0, x - |x| T for x >= 0 (T <= 1/2: no cancellation), with
     * x T as (x ts) 2^-64, rounded once unless subnormal. |x| is clamped for
     * x >= 0, where ts = 0 beyond 15, so that gelu(+inf) = +inf, and not for
     * x < 0, where gelu(-inf) = -inf * 0 = NaN. */
    const float xt = (opf_select(x < 0, x, ac) * ts) * ACT_UNSCALE_F32;
    out.f = opf_select(x < 0, xt, x - xt);
    ACT_DERIVATIVES(float, 0x1p64f, ACT_UNSCALE_F32, x, ds, hs, 1, out);
    return out;
}

OPF_KERNEL_FN act_f64 act_gelu_erf_f64(double x) {
    double a = opf_fabs_f64(x);
    double ac = opf_select_f64(a < 39.0, a, 39.0);
    double ha = 0.5 * ac;
    double hh = ha * ac;
    double hl = act_fma_f64(ha, ac, -hh);
    double es = act_exp_neg_f64(hh, hl);
    double w = 1.0 / (4.0 + ac);
    /* R(a) = t P(u), t = 4w, u = 8w - 5/4 in [-1.064, 3/4], P(u) = P(3/4) - (3/4 - u) Q(u),
     * P(3/4) = R(0) = 1/2, 3/4 - u = 2 a w (see the float version) */
    double u = 8.0 * w - 1.25;
    double q = act_fma_f64(0x1.70d577f7948fdp-33, u, 0x1.0b3f66c4f2ceap-31);
    q = act_fma_f64(q, u, -0x1.99a0d7aa9b94bp-31);
    q = act_fma_f64(q, u, -0x1.25ed02ea961ecp-29);
    q = act_fma_f64(q, u, 0x1.39db241ab6e98p-28);
    q = act_fma_f64(q, u, 0x1.51c1995c9cfafp-29);
    q = act_fma_f64(q, u, -0x1.cbf2160e868ffp-26);
    q = act_fma_f64(q, u, 0x1.17febe506f4f5p-25);
    q = act_fma_f64(q, u, 0x1.da97b09bf2522p-24);
    q = act_fma_f64(q, u, -0x1.862f3b2626b63p-22);
    q = act_fma_f64(q, u, -0x1.06c1dcc17e727p-22);
    q = act_fma_f64(q, u, 0x1.6c3419e957e21p-19);
    q = act_fma_f64(q, u, -0x1.de4b60016ffdcp-21);
    q = act_fma_f64(q, u, -0x1.415be9bc2d9cfp-16);
    q = act_fma_f64(q, u, 0x1.0fcb840b6d21bp-16);
    q = act_fma_f64(q, u, 0x1.41e491f504aa3p-13);
    q = act_fma_f64(q, u, -0x1.c2a2d9aba205bp-14);
    q = act_fma_f64(q, u, -0x1.92206d1c827b8p-10);
    q = act_fma_f64(q, u, -0x1.12f73eb538c8fp-10);
    q = act_fma_f64(q, u, 0x1.005942311addcp-6);
    q = act_fma_f64(q, u, 0x1.3067edd05e74p-4);
    q = act_fma_f64(q, u, 0x1.8c11cde208309p-3);
    q = act_fma_f64(q, u, 0x1.6ba7035c800a3p-2);
    /* near a = 0 the rounding of u would cost up to ~3 ulp through P's slope: there
     * P(3/4) - (3/4 - u) Q(u), whose 3/4 - u = 2 a w is accurate; elsewhere P(u) */
    double p_small = act_fma_f64(-2.0 * (ac * w), q, 0.5);
    double p = act_fma_f64(0x1.70d577f7948fdp-33, u, 0x1.8c2ec08d0de75p-32);
    p = act_fma_f64(p, u, -0x1.3108325f28d7dp-30);
    p = act_fma_f64(p, u, -0x1.b23db4f531e5dp-30);
    p = act_fma_f64(p, u, 0x1.a8140532af351p-28);
    p = act_fma_f64(p, u, -0x1.0a0e3996eac6bp-30);
    p = act_fma_f64(p, u, -0x1.eb9c3c6f35477p-26);
    p = act_fma_f64(p, u, 0x1.c4798695e1c54p-25);
    p = act_fma_f64(p, u, 0x1.7198293dc8946p-24);
    p = act_fma_f64(p, u, -0x1.df2bac4364259p-22);
    p = act_fma_f64(p, u, 0x1.de18f9b1e9634p-26);
    p = act_fma_f64(p, u, 0x1.84d6469b7bbcdp-19);
    p = act_fma_f64(p, u, -0x1.88b9eb6f5de9p-19);
    p = act_fma_f64(p, u, -0x1.3626257c24fdp-16);
    p = act_fma_f64(p, u, 0x1.006839ac47abbp-15);
    p = act_fma_f64(p, u, 0x1.28697d93f26f1p-13);
    p = act_fma_f64(p, u, -0x1.d2bcda4d94828p-13);
    p = act_fma_f64(p, u, -0x1.7d00cae876e34p-10);
    p = act_fma_f64(p, u, 0x1.aa113202913bap-14);
    p = act_fma_f64(p, u, 0x1.0d3cd92199873p-6);
    p = act_fma_f64(p, u, 0x1.00573167296a7p-4);
    p = act_fma_f64(p, u, 0x1.19ead4b3e4c51p-3);
    p = act_fma_f64(p, u, 0x1.ae40ac4f79fp-3);
    p = act_fma_f64(p, u, 0x1.de857af53ff0bp-3);
    p = opf_select_f64(ac < 1.0, p_small, p);
    double r = (4.0 * w) * p;
    es = opf_select_f64(a > 39.0, 0.0, es);
    double ts = es * r;
    double ds = es * act_fma_f64(ac, 0x1.9884533d43651p-2, -r);
    double two_minus_s = ((0x1.6a09e667f3bcdp+0 - ac) - 0x1.bdd3413b26456p-54) * (0x1.6a09e667f3bcdp+0 + ac);
    double hs = es * (0x1.9884533d43651p-2 * two_minus_s);
    act_f64 out;
    /* f = x T for x < 0, x (1 - T) for x >= 0, rounded once (x itself where
     * x 2^S would overflow) */
    out.f = (x * opf_select(x < 0, ts, (0x1p512 - ts) * ACT_UNSCALE_F64)) * opf_select(x < 0, ACT_UNSCALE_F64, 1.0);
    ACT_DERIVATIVES(double, 0x1p512, ACT_UNSCALE_F64, x, ds, hs, 1, out);
    return out;
}

/* The σ forms (tanh gelu, silu): T = σ(-|v|) = z M, z = e^-|v|, M = 1 / (1 + z)
 * = 1 - T;
 * with v' and v'' (of |x|, for a = |x|): G = M (a v' M - 1),
 * H = M² (2 v' - a (1 - z) M v'² + a v''). */
#define ACT_SIGMA_FORM(T, fma, scale, unscale, x, a, zs, vd, vdd, inf_nan, out)                                        \
    do {                                                                                                               \
        T z_ = (zs) * (unscale);                                                                                       \
        T m_ = (T)1 / ((T)1 + z_);                                                                                     \
        T ts_ = (zs)*m_;                                                                                               \
        T ds_ = ts_ * fma((a)*m_, (vd), (T)-1);                                                                        \
        T hs_ = ts_ * m_ * ((T)2 * (vd) - (a) * (((T)1 - z_) * m_) * ((vd) * (vd)) + (a) * (vdd));                     \
        T q_ = (x)*m_; /* f = x σ(v) = q z for x < 0, q for x >= 0 */                                                 \
        (out).f = opf_select((x) < 0, (q_ * (zs)) * (unscale), q_);                                                    \
        ACT_DERIVATIVES(T, scale, unscale, x, ds_, hs_, inf_nan, out);                                                 \
    } while (0)

/* tanh gelu: v = B1 x + B3 x³ (B1 = 2 √(2/π), B3 = 0.044715 B1), |v| as hi + lo
 * in double-word arithmetic. Beyond |x| = 11.5 (22 for double) the tails
 * underflow. */
OPF_KERNEL_FN act_f32 act_gelu_tanh_f32(float x) {
    float a = opf_fabs_f32(x);
    float ac = opf_select_f32(a < 11.5f, a, 11.5f);
    float s = ac * ac;
    float sl = act_fma_f32(ac, ac, -s);
    /* q = B1 + B3 s, double-word */
    float mh = 0x1.2444f2p-4f * s;
    float ml = act_fma_f32(0x1.2444f2p-4f, s, -mh) + act_fma_f32(0x1.2444f2p-4f, sl, 0x1.49b16ap-29f * s);
    float qh = 0x1.988454p+0f + mh;
    /* (mh is never NaN, ac being clamped: one max and one min instruction) */
    float big = mh > 0x1.988454p+0f ? mh : 0x1.988454p+0f, small = mh > 0x1.988454p+0f ? 0x1.988454p+0f : mh;
    float ql = (small - (qh - big)) + (ml - 0x1.857936p-25f);
    /* h = ac q */
    float hh = ac * qh;
    float hl = act_fma_f32(ac, ql, act_fma_f32(ac, qh, -hh));
    float zs = act_exp_neg_f32(hh, hl);
    zs = opf_select_f32(a > 11.5f, 0.0f, zs);
    float vd = act_fma_f32(0x1.b6676cp-3f, s, 0x1.988454p+0f); /* B1 + 3 B3 a² */
    float vdd = 0x1.b6676cp-2f * ac;                           /* 6 B3 a */
    act_f32 out;
    ACT_SIGMA_FORM(float, act_fma_f32, 0x1p64f, ACT_UNSCALE_F32, x, ac, zs, vd, vdd, 1, out);
    return out;
}

OPF_KERNEL_FN act_f64 act_gelu_tanh_f64(double x) {
    double a = opf_fabs_f64(x);
    double ac = opf_select_f64(a < 22.0, a, 22.0);
    double s = ac * ac;
    double sl = act_fma_f64(ac, ac, -s);
    double mh = 0x1.2444f2a4d8b4bp-4 * s;
    double ml =
        act_fma_f64(0x1.2444f2a4d8b4bp-4, s, -mh) + act_fma_f64(0x1.2444f2a4d8b4bp-4, sl, -0x1.6c843a29d1c7p-61 * s);
    double qh = 0x1.9884533d43651p+0 + mh;
    double big = mh > 0x1.9884533d43651p+0 ? mh : 0x1.9884533d43651p+0,
           small = mh > 0x1.9884533d43651p+0 ? 0x1.9884533d43651p+0 : mh;
    double ql = (small - (qh - big)) + (ml - 0x1.cbc0d30ebfd15p-54);
    double hh = ac * qh;
    double hl = act_fma_f64(ac, ql, act_fma_f64(ac, qh, -hh));
    double zs = act_exp_neg_f64(hh, hl);
    zs = opf_select_f64(a > 22.0, 0.0, zs);
    double vd = act_fma_f64(0x1.b6676bf7450fp-3, s, 0x1.9884533d43651p+0);
    double vdd = 0x1.b6676bf7450fp-2 * ac;
    act_f64 out;
    ACT_SIGMA_FORM(double, act_fma_f64, 0x1p512, ACT_UNSCALE_F64, x, ac, zs, vd, vdd, 1, out);
    return out;
}

/* ------------------------------------------------------------------------ */
/* silu, sigmoid                                                             */
/* ------------------------------------------------------------------------ */

/* silu: v = x (v' = 1, v'' = 0); x e^x underflows beyond |x| = 110 (760). */
OPF_KERNEL_FN act_f32 act_silu_f32(float x) {
    float a = opf_fabs_f32(x);
    float zs = opf_select_f32(a > 110.0f, 0.0f, act_exp_neg_f32(a, 0.0f)); /* (beyond 110: garbage, replaced) */
    act_f32 out;
    ACT_SIGMA_FORM(float, act_fma_f32, 0x1p64f, ACT_UNSCALE_F32, x, a, zs, 1.0f, 0.0f, 0,
                   out); /* a unclamped: inf * 0 */
    return out;
}

OPF_KERNEL_FN act_f64 act_silu_f64(double x) {
    double a = opf_fabs_f64(x);
    double zs = opf_select_f64(a > 760.0, 0.0, act_exp_neg_f64(a, 0.0));
    act_f64 out;
    ACT_SIGMA_FORM(double, act_fma_f64, 0x1p512, ACT_UNSCALE_F64, x, a, zs, 1.0, 0.0, 0, out);
    return out;
}

/* σ(x) = [x < 0] z M + [x >= 0] M, the subnormal results rounded once. A NaN
 * x gives NaN (selected at the end). Beyond |x| = 110 (760) e^-|x| is replaced
 * by 0 after the exponential rather than |x| clamped before it: the same
 * results, and a shorter dependency chain (18% less time in cache on Zen 4). */
OPF_KERNEL_FN act_f32 act_sigmoid_f32(float x) {
    float a = opf_fabs_f32(x);
    float zs = opf_select_f32(a > 110.0f, 0.0f, act_exp_neg_f32(a, 0.0f)); /* e^-110 2^-64 rounds to 0 */
    float m = 1.0f / act_fma_f32(zs, ACT_UNSCALE_F32, 1.0f);
    float y = opf_select_f32(x < 0.0f, (zs * m) * ACT_UNSCALE_F32, m);
    act_f32 out = {opf_select_f32(x != x, x, y), 0.0f, 0.0f}; /* NaN stays NaN */
    return out;
}

OPF_KERNEL_FN act_f64 act_sigmoid_f64(double x) {
    double a = opf_fabs_f64(x);
    double zs = opf_select_f64(a > 760.0, 0.0, act_exp_neg_f64(a, 0.0));
    double m = 1.0 / act_fma_f64(zs, ACT_UNSCALE_F64, 1.0);
    double y = opf_select_f64(x < 0.0, (zs * m) * ACT_UNSCALE_F64, m);
    act_f64 out = {opf_select_f64(x != x, x, y), 0.0, 0.0};
    return out;
}

/* tanh in float: x P(x²) / Q(x²) on |x| <= 9 (beyond, tanh rounds to +-1), P and Q
 * of degree 4 (a rational fit for the relative error, coefficients tuned in
 * float: scripts/activation_fits.py tanh_f32): about half the operations of opf_tanh_f32, which the frameworks'
 * float tanh (Eigen's, XLA's: similar rationals, 5 ulp) would otherwise outrun,
 * at a bound of 5.5 ulp instead of 1.2 (every float input measured). NaN stays NaN, +-0 keep their sign,
 * +-inf give +-1. Double uses opf_tanh_f64. */
OPF_KERNEL_FN float act_tanh_f32(float x) {
    /* (each clamp is one min or max instruction, written so that NaN passes) */
    float s = x * x;
    s = 81.0f < s ? 81.0f : s;
    float p = act_poly4_f32(s, 1.0f, 0x1.120b26p-3f, 0x1.ca2cb6p-9f, 0x1.59c3cep-16f, 0x1.cade18p-27f);
    float q = act_poly4_f32(s, 1.0f, 0x1.de5adcp-2f, 0x1.a7f80cp-6f, 0x1.588664p-12f, 0x1.a18108p-21f);
    float y = (x * p) / q; /* beyond |x| = 9 (and at +-inf): past +-1, clamped below */
    y = 1.0f < y ? 1.0f : y;
    return -1.0f > y ? -1.0f : y;
}

/* ------------------------------------------------------------------------ */
/* Kernels                                                                   */
/* ------------------------------------------------------------------------ */

/* gelu's rows have one kernel per form (approximate = none, tanh) and a
 * kernel whose builds pick one by the attribute, once per call: a branch on
 * the attribute inside the element loop would cost both forms per element
 * (or, with GCC, the loop's vectorization). */
OPF_ELTWISE_KERNEL(gelu_erf, (x), (y), y = ACT(gelu_erf, f, x);)
OPF_ELTWISE_KERNEL(gelu_tanh, (x), (y), y = ACT(gelu_tanh, f, x);)
OPF_ELTWISE_KERNEL(gelu_grad_erf, (dy, x), (dx), dx = dy * ACT(gelu_erf, d1, x);)
OPF_ELTWISE_KERNEL(gelu_grad_tanh, (dy, x), (dx), dx = dy * ACT(gelu_tanh, d1, x);)
OPF_ELTWISE_KERNEL(gelu_grad_grad_erf, (ddx, dy, x), (ddy, dx), ddy = ddx * ACT(gelu_erf, d1, x);
                   dx = (ddx * dy) * ACT(gelu_erf, d2, x);)
OPF_ELTWISE_KERNEL(gelu_grad_grad_tanh, (ddx, dy, x), (ddy, dx), ddy = ddx * ACT(gelu_tanh, d1, x);
                   dx = (ddx * dy) * ACT(gelu_tanh, d2, x);)

/* The kernel `name`: name_erf's or name_tanh's build of the same variant
 * (the base build where a variant is absent), by attrs[0] (approximate). */
#define ACT_BY_FORM_FN(name, dt, v)                                                                                    \
    static void act_##name##_##dt##_##v(int64_t n, const void *const *in, void *const *out,                            \
                                        const opf_attr_value *attrs) {                                                 \
        const opf_eltwise_kernel *k = attrs[0].i ? &name##_tanh : &name##_erf;                                         \
        (k->dt[v] != NULL ? k->dt[v] : k->dt[0])(n, in, out, attrs);                                                   \
    }
#if defined(__CUDACC__)
#define ACT_BY_FORM_CUDA(name)                                                                                         \
    static int act_##name##_cuda(const struct opf_cuda_eltwise_launch *launch) {                                       \
        return (launch->attrs[0].i ? name##_tanh.cuda : name##_erf.cuda)(launch);                                      \
    }
#define ACT_CUDA_FN(name) act_##name##_cuda
#else
#define ACT_BY_FORM_CUDA(name)
#define ACT_CUDA_FN(name) 0
#endif
#define ACT_BY_FORM(name, num_in, num_out)                                                                             \
    ACT_BY_FORM_FN(name, f32, 0)                                                                                       \
    ACT_BY_FORM_FN(name, f32, 1)                                                                                       \
    ACT_BY_FORM_FN(name, f32, 2)                                                                                       \
    ACT_BY_FORM_FN(name, f64, 0)                                                                                       \
    ACT_BY_FORM_FN(name, f64, 1)                                                                                       \
    ACT_BY_FORM_FN(name, f64, 2)                                                                                       \
    ACT_BY_FORM_CUDA(name)                                                                                             \
    static const opf_eltwise_kernel name = {num_in,                                                                    \
                                            num_out,                                                                   \
                                            {act_##name##_f32_0, act_##name##_f32_1, act_##name##_f32_2},              \
                                            {act_##name##_f64_0, act_##name##_f64_1, act_##name##_f64_2},              \
                                            ACT_CUDA_FN(name)};
ACT_BY_FORM(gelu, 1, 1)
ACT_BY_FORM(gelu_grad, 2, 1)
ACT_BY_FORM(gelu_grad_grad, 3, 2)

OPF_ELTWISE_KERNEL(silu, (x), (y), y = ACT(silu, f, x);)
OPF_ELTWISE_KERNEL(silu_grad, (dy, x), (dx), dx = dy * ACT(silu, d1, x);)
OPF_ELTWISE_KERNEL(silu_grad_grad, (ddx, dy, x), (ddy, dx), ddy = ddx * ACT(silu, d1, x);
                   dx = (ddx * dy) * ACT(silu, d2, x);)

OPF_ELTWISE_KERNEL(sigmoid, (x), (y), y = ACT(sigmoid, f, x);)
/* σ' = y (1 - y); 1 - y is exact for y >= 1/2, 1 - 2y for y >= 1/4 */
OPF_ELTWISE_KERNEL(sigmoid_grad, (dy, y), (dx), dx = dy * (y * ((T)1 - y));)
OPF_ELTWISE_KERNEL(sigmoid_grad_grad, (ddx, dy, y), (ddy, dy_y), ddy = ddx * (y * ((T)1 - y));
                   dy_y = (ddx * dy) * ((T)1 - (T)2 * y);)

/* (tanh_op: `tanh` is also the C library's function) */
/* (double: opf_tanh_f64 with its a*b + c always fused, as the helpers above,
 * so that every CPU build and the CUDA build give the same bits) */
OPF_ELTWISE_KERNEL(tanh_op, (x), (y), y = OPF_IS_F64 ? (T)opf_math_tanh_f64((double)x, 1) : (T)act_tanh_f32((float)x);)
/* tanh' = 1 - y² = (1 - y)(1 + y), exact near |y| = 1 */
OPF_ELTWISE_KERNEL(tanh_grad, (dy, y), (dx), dx = dy * (((T)1 - y) * ((T)1 + y));)
OPF_ELTWISE_KERNEL(tanh_grad_grad, (ddx, dy, y), (ddy, dy_y), ddy = ddx * (((T)1 - y) * ((T)1 + y));
                   dy_y = (T)-2 * ((ddx * dy) * y);)

/* ------------------------------------------------------------------------ */
/* Declarations                                                              */
/* ------------------------------------------------------------------------ */

#define ACT_GELU_ATTR "approximate: {none, tanh} = none"
#define ACT_GELU_ATTR_DOC                                                                                              \
    "approximate: none for x Φ(x) (erf), tanh for 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³))) as "                 \
    "torch.nn.functional.gelu(approximate='tanh') and jax.nn.gelu(approximate=True)"

const opf_op_decl opf_decl_gelu = {
    "gelu(x, *, " ACT_GELU_ATTR ") -> y",
    .doc = "Gaussian error linear unit, elementwise: y = x Φ(x) with Φ the standard normal CDF "
           "(0.5 x (1 + erf(x / √2))), or its tanh approximation. gelu(+inf) = +inf; gelu(-inf) and NaN give NaN. "
           "Within 5.7 ulp (float32; tanh form 3.6) and 5.3 ulp (float64) everywhere, tails included (docs/ops.md).",
    .grad = "dx = gelu_grad(dy, x)",
    .jvp = "y' = gelu_grad(x', x)",
    .arg_docs = "x: input tensor, any shape; " ACT_GELU_ATTR_DOC "; y: gelu(x), the shape of x",
    .eltwise = &gelu,
};

const opf_op_decl opf_decl_gelu_grad = {
    "gelu_grad(dy, x, *, " ACT_GELU_ATTR ") -> dx",
    .doc = "Gradient of gelu: dx = dy gelu'(x), gelu'(x) = Φ(x) + x φ(x) (or the tanh form's derivative); "
           "NaN at x = +-inf, as in the frameworks.",
    .grad = "ddy, dx = gelu_grad_grad(ddx, dy, x)",
    .jvp = "dx' = gelu_grad(dy', x); _, dx' = gelu_grad_grad(x', dy, x)",
    .arg_docs = "dy: gradient of gelu's output; x: gelu's input; " ACT_GELU_ATTR_DOC "; dx: gradient of gelu's input",
    .eltwise = &gelu_grad,
};

const opf_op_decl opf_decl_gelu_grad_grad = {
    "gelu_grad_grad(ddx, dy, x, *, " ACT_GELU_ATTR ") -> (ddy, dx)",
    .doc = "Gradients of gelu_grad: with ddx flowing into its output, ddy = ddx gelu'(x) and "
           "dx = ddx dy gelu''(x), gelu''(x) = φ(x) (2 - x²) (or the tanh form's second derivative).",
    .arg_docs =
        "ddx: gradient of gelu_grad's output; dy: gelu_grad's dy; x: gelu_grad's x (gelu's input); " ACT_GELU_ATTR_DOC
        "; ddy: gradient of gelu_grad's dy; dx: gradient of gelu_grad's x",
    .eltwise = &gelu_grad_grad,
};

const opf_op_decl opf_decl_silu = {
    "silu(x) -> y",
    .doc = "Sigmoid linear unit (swish), elementwise: y = x σ(x) = x / (1 + e^-x). silu(+inf) = +inf; "
           "silu(-inf) and NaN give NaN. Within 3.4 ulp (float32) and 3.3 ulp (float64) everywhere (docs/ops.md).",
    .grad = "dx = silu_grad(dy, x)",
    .jvp = "y' = silu_grad(x', x)",
    .arg_docs = "x: input tensor, any shape; y: silu(x), the shape of x",
    .eltwise = &silu,
};

const opf_op_decl opf_decl_silu_grad = {
    "silu_grad(dy, x) -> dx",
    .doc = "Gradient of silu: dx = dy σ(x) (1 + x (1 - σ(x))); NaN at x = +-inf, as in the frameworks.",
    .grad = "ddy, dx = silu_grad_grad(ddx, dy, x)",
    .jvp = "dx' = silu_grad(dy', x); _, dx' = silu_grad_grad(x', dy, x)",
    .arg_docs = "dy: gradient of silu's output; x: silu's input; dx: gradient of silu's input",
    .eltwise = &silu_grad,
};

const opf_op_decl opf_decl_silu_grad_grad = {
    "silu_grad_grad(ddx, dy, x) -> (ddy, dx)",
    .doc = "Gradients of silu_grad: with ddx flowing into its output, ddy = ddx silu'(x) and dx = ddx dy silu''(x), "
           "silu''(x) = σ(x) (1 - σ(x)) (2 + x (1 - 2 σ(x))).",
    .arg_docs = "ddx: gradient of silu_grad's output; dy: silu_grad's dy; x: silu_grad's x (silu's input); "
                "ddy: gradient of silu_grad's dy; dx: gradient of silu_grad's x",
    .eltwise = &silu_grad_grad,
};

const opf_op_decl opf_decl_sigmoid = {
    "sigmoid(x) -> y",
    .doc = "Logistic sigmoid, elementwise: y = 1 / (1 + e^-x), in [0, 1]; sigmoid(-inf) = 0, sigmoid(+inf) = 1. "
           "Within 2.8 ulp (float32) and 2.7 ulp (float64) (docs/ops.md).",
    .grad = "dx = sigmoid_grad(dy, y)",
    .jvp = "y' = sigmoid_grad(x', y)",
    .arg_docs = "x: input tensor, any shape; y: sigmoid(x), the shape of x",
    .eltwise = &sigmoid,
};

const opf_op_decl opf_decl_sigmoid_grad = {
    "sigmoid_grad(dy, y) -> dx",
    .doc = "Gradient of sigmoid from its output: dx = dy y (1 - y).",
    .grad = "ddy, dy = sigmoid_grad_grad(ddx, dy, y)",
    .jvp = "dx' = sigmoid_grad(dy', y); _, dx' = sigmoid_grad_grad(y', dy, y)",
    .arg_docs = "dy: gradient of sigmoid's output; y: sigmoid's output; dx: gradient of sigmoid's input",
    .eltwise = &sigmoid_grad,
};

const opf_op_decl opf_decl_sigmoid_grad_grad = {
    "sigmoid_grad_grad(ddx, dy, y) -> (ddy, dy_y)",
    .doc = "Gradients of sigmoid_grad: with ddx flowing into its output, ddy = ddx y (1 - y) and "
           "dy_y = ddx dy (1 - 2 y).",
    .arg_docs =
        "ddx: gradient of sigmoid_grad's output; dy: sigmoid_grad's dy; y: sigmoid_grad's y (sigmoid's output); "
        "ddy: gradient of sigmoid_grad's dy; dy_y: gradient of sigmoid_grad's y",
    .eltwise = &sigmoid_grad_grad,
};

const opf_op_decl opf_decl_tanh = {
    "tanh(x) -> y",
    .doc = "Hyperbolic tangent, elementwise; tanh(+-inf) = +-1. Within 5.5 ulp (float32, a rational like the "
           "frameworks' float tanh) and 1.4 ulp (float64) (docs/ops.md).",
    .grad = "dx = tanh_grad(dy, y)",
    .jvp = "y' = tanh_grad(x', y)",
    .arg_docs = "x: input tensor, any shape; y: tanh(x), the shape of x",
    .eltwise = &tanh_op,
};

const opf_op_decl opf_decl_tanh_grad = {
    "tanh_grad(dy, y) -> dx",
    .doc = "Gradient of tanh from its output: dx = dy (1 - y²).",
    .grad = "ddy, dy = tanh_grad_grad(ddx, dy, y)",
    .jvp = "dx' = tanh_grad(dy', y); _, dx' = tanh_grad_grad(y', dy, y)",
    .arg_docs = "dy: gradient of tanh's output; y: tanh's output; dx: gradient of tanh's input",
    .eltwise = &tanh_grad,
};

const opf_op_decl opf_decl_tanh_grad_grad = {
    "tanh_grad_grad(ddx, dy, y) -> (ddy, dy_y)",
    .doc = "Gradients of tanh_grad: with ddx flowing into its output, ddy = ddx (1 - y²) and dy_y = -2 ddx dy y.",
    .arg_docs = "ddx: gradient of tanh_grad's output; dy: tanh_grad's dy; y: tanh_grad's y (tanh's output); "
                "ddy: gradient of tanh_grad's dy; dy_y: gradient of tanh_grad's y",
    .eltwise = &tanh_grad_grad,
};
