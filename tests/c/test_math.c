/*
 * test_math.c — include/opforge_math.h against libm.
 *
 * Every function of both dtypes is run over sweeps of its whole domain (bit
 * patterns spread over all floats, dense steps over the interesting range,
 * every value near the thresholds the code switches at, random bits, the
 * special values) and compared with glibc evaluated in higher precision:
 * double for the float functions, long double for the double ones. The error
 * in ulp of the result must stay within the bound the header documents.
 *
 * Each function runs in four builds of the same loop: a scalar call, the loop
 * vectorized for the compiler's base ISA (SSE2, NEON), and on x86-64 the loop
 * compiled with target("avx2,fma") and target("avx512f,...") as opforge
 * compiles an author's loop (skipped where the CPU lacks the ISA). The loops
 * have a constant trip count so that -O2's cheap vectorizer takes them.
 *
 * OPF_MATH_EXHAUSTIVE=1 runs every float input (2^32, on two threads, a
 * minute or two a function and build) and 2^24 random doubles a function
 * instead, printing the maximum error of each: the numbers the header quotes.
 * OPF_MATH_ONLY=<name> (exp_f32, ...) and OPF_MATH_VARIANTS=scalar,avx512
 * narrow it.
 */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "opforge_math.h"

enum { BLOCK = 256 };

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_X86_VARIANTS 1
#define TARGET_AVX2 __attribute__((target("avx2,fma")))
#define TARGET_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))
#else
#define HAVE_X86_VARIANTS 0
#endif

/* ------------------------------------------------------------------------ */
/* The four builds of each function                                          */
/* ------------------------------------------------------------------------ */

typedef void (*loop_f32)(const float *restrict x, float *restrict y);
typedef void (*loop_f64)(const double *restrict x, double *restrict y);

enum { V_SCALAR, V_AUTO, V_AVX2, V_AVX512, V_COUNT };
static const char *const variant_name[V_COUNT] = {"scalar", "auto", "avx2", "avx512"};

#define LOOP(fn, T)                                                                                                    \
    for (int i = 0; i < BLOCK; i++) {                                                                                  \
        y[i] = fn(x[i]);                                                                                               \
    }

#if HAVE_X86_VARIANTS
#define X86_LOOPS(fn, T)                                                                                               \
    TARGET_AVX2 static void fn##_avx2(const T *restrict x, T *restrict y){                                             \
        OPF_MATH_USE_FMA LOOP(fn, T)} TARGET_AVX512 static void fn##_avx512(const T *restrict x, T *restrict y) {      \
        OPF_MATH_USE_FMA                                                                                               \
        LOOP(fn, T)                                                                                                    \
    }
#define X86_PTRS(fn) fn##_avx2, fn##_avx512
#else
#define X86_LOOPS(fn, T)
#define X86_PTRS(fn) NULL, NULL
#endif

#define VARIANTS(fn, T)                                                                                                \
    __attribute__((noinline)) static T fn##_one(T v) { return fn(v); }                                                 \
    static void fn##_scalar(const T *restrict x, T *restrict y) { LOOP(fn##_one, T) }                                  \
    static void fn##_auto(const T *restrict x, T *restrict y){LOOP(fn, T)} X86_LOOPS(fn, T)

#define VARIANT_PTRS(fn)                                                                                               \
    { fn##_scalar, fn##_auto, X86_PTRS(fn) }

VARIANTS(opf_exp_f32, float)
VARIANTS(opf_expm1_f32, float)
VARIANTS(opf_log_f32, float)
VARIANTS(opf_log1p_f32, float)
VARIANTS(opf_tanh_f32, float)
VARIANTS(opf_erf_f32, float)
VARIANTS(opf_sigmoid_f32, float)
VARIANTS(opf_softplus_f32, float)
VARIANTS(opf_sqrt_f32, float)
VARIANTS(opf_exp_f64, double)
VARIANTS(opf_expm1_f64, double)
VARIANTS(opf_log_f64, double)
VARIANTS(opf_log1p_f64, double)
VARIANTS(opf_tanh_f64, double)
VARIANTS(opf_erf_f64, double)
VARIANTS(opf_sigmoid_f64, double)
VARIANTS(opf_softplus_f64, double)
VARIANTS(opf_sqrt_f64, double)

static int variant_runs(int v) {
#if HAVE_X86_VARIANTS
    if (v == V_AVX2) {
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    }
    if (v == V_AVX512) {
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    }
    return 1;
#else
    return v == V_SCALAR || v == V_AUTO;
#endif
}

/* ------------------------------------------------------------------------ */
/* References and errors in ulp                                              */
/* ------------------------------------------------------------------------ */

/* The double reference of a float function, the long double one of a double
 * function. Where long double arithmetic is no wider than double (a platform
 * whose long double is double; valgrind, which runs x87 code in double), the
 * reference is as good as libm's double functions and the bounds get one ulp
 * of slack. */
static int long_double_is_wider(void) {
    volatile long double one = 1.0L;
    volatile long double sum = one + 0x1p-60L;
    return sum != one;
}

/* 1 / (1 + e^-x), e^x / (1 + e^x) for x < 0 (no overflow in e^-x). */
static double ref_sigmoid(double x) { return x < 0 ? exp(x) / (1.0 + exp(x)) : 1.0 / (1.0 + exp(-x)); }
static long double ref_sigmoidl(long double x) { return x < 0 ? expl(x) / (1.0L + expl(x)) : 1.0L / (1.0L + expl(-x)); }

/* log(1 + e^x) = max(x, 0) + log1p(e^-|x|) (no overflow; NaN stays NaN). */
static double ref_softplus(double x) { return (x < 0 ? 0.0 : x) + log1p(exp(-fabs(x))); }
static long double ref_softplusl(long double x) { return (x < 0 ? 0.0L : x) + log1pl(expl(-fabsl(x))); }

/* The spacing of floats (doubles) at |r|: 2^(e - 24) for r in [2^(e-1), 2^e). */
static double ulp_f32(double r) {
    r = fabs(r);
    if (r < FLT_MIN) {
        return 0x1p-149;
    }
    int e;
    frexp(r, &e);
    return ldexp(1.0, e - 24);
}
static long double ulp_f64(long double r) {
    r = fabsl(r);
    if (r < DBL_MIN) {
        return 0x1p-1074L;
    }
    int e;
    frexpl(r, &e);
    return ldexpl(1.0L, e - 53);
}

/* |y - ref| in ulp of ref; INFINITY for a NaN, infinity or zero sign that
 * differs from the correctly rounded result. An infinite y where ref rounds to
 * a finite value counts as 2^128 (2^1024), one ulp beyond the largest. */
static double err_f32(float y, double ref) {
    if (isnan(ref) || isnan(y)) {
        return isnan(ref) && isnan(y) ? 0.0 : INFINITY;
    }
    const float rounded = (float)ref;
    if (isinf(rounded) && y == rounded) {
        return 0.0;
    }
    if (y == 0 && ref == 0 && !signbit(y) != !signbit(ref)) {
        return INFINITY;
    }
    double yd = isinf(y) ? copysign(0x1p128, y) : (double)y;
    if (isinf(ref)) {
        return INFINITY;
    }
    return fabs(yd - ref) / ulp_f32(ref);
}
static double err_f64(double y, long double ref) {
    if (isnan(ref) || isnan(y)) {
        return isnan(ref) && isnan(y) ? 0.0 : INFINITY;
    }
    const double rounded = (double)ref;
    if (isinf(rounded) && y == rounded) {
        return 0.0;
    }
    if (y == 0 && ref == 0 && !signbit(y) != !signbit(ref)) {
        return INFINITY;
    }
    long double yl = isinf(y) ? copysignl(0x1p1024L, (long double)y) : (long double)y;
    if (isinf(ref)) {
        return INFINITY;
    }
    return (double)(fabsl(yl - ref) / ulp_f64(ref));
}

/* ------------------------------------------------------------------------ */
/* The functions under test                                                  */
/* ------------------------------------------------------------------------ */

typedef struct math_case_f32 {
    const char *name;
    loop_f32 loop[V_COUNT];
    double (*ref)(double);
    double bound;    /* asserted max ulp */
    float lo, hi;    /* the range swept densely */
    float points[8]; /* values the code switches at (0-terminated, 0 is always swept) */
} math_case_f32;

typedef struct math_case_f64 {
    const char *name;
    loop_f64 loop[V_COUNT];
    long double (*ref)(long double);
    double bound;
    double lo, hi;
    double points[8];
} math_case_f64;

static const math_case_f32 cases_f32[] = {
    {"exp_f32", VARIANT_PTRS(opf_exp_f32), exp, 1.0, -104.0f, 89.0f, {88.72283f, -87.33655f, -103.2789f, -103.9721f}},
    {"expm1_f32",
     VARIANT_PTRS(opf_expm1_f32),
     expm1,
     1.5,
     -20.0f,
     89.0f,
     {88.72283f, 0x1p-25f, -80.0f, 0.3465736f, -0.3465736f, 1.0397208f}},
    {"log_f32", VARIANT_PTRS(opf_log_f32), log, 1.0, 0.0f, 4.0f, {1.0f, 0x1p-126f, 1.4142135f, 0.70710677f}},
    {"log1p_f32",
     VARIANT_PTRS(opf_log1p_f32),
     log1p,
     1.5,
     -1.0f,
     4.0f,
     {-1.0f, 0.41421357f, -0.29289323f, 0x1p24f, 1.0f}},
    {"tanh_f32", VARIANT_PTRS(opf_tanh_f32), tanh, 2.0, -10.0f, 10.0f, {0.5625f, -0.5625f, 9.0f, 10.0f}},
    {"erf_f32", VARIANT_PTRS(opf_erf_f32), erf, 1.5, -5.0f, 5.0f, {1.0f, -1.0f, 3.9f, 4.0f}},
    {"sigmoid_f32", VARIANT_PTRS(opf_sigmoid_f32), ref_sigmoid, 2.5, -110.0f, 30.0f, {-87.3f, -103.3f, 17.0f}},
    {"softplus_f32",
     VARIANT_PTRS(opf_softplus_f32),
     ref_softplus,
     2.5,
     -110.0f,
     30.0f,
     {-87.3f, -103.97f, 104.0f, -104.0f, 0.3465736f, -0.3465736f, 17.0f}},
    {"sqrt_f32", VARIANT_PTRS(opf_sqrt_f32), sqrt, 0.5, 0.0f, 4.0f, {1.0f, 0x1p-126f}},
};

static const math_case_f64 cases_f64[] = {
    {"exp_f64",
     VARIANT_PTRS(opf_exp_f64),
     expl,
     1.0,
     -746.0,
     710.0,
     {709.782712893384, -708.3964185322641, -744.4400719213812, -745.1332191019412}},
    {"expm1_f64",
     VARIANT_PTRS(opf_expm1_f64),
     expm1l,
     1.5,
     -40.0,
     710.0,
     {709.782712893384, 0x1p-54, -64.0, 0.34657359027997264, -0.34657359027997264, 1.0397207708399179}},
    {"log_f64",
     VARIANT_PTRS(opf_log_f64),
     logl,
     1.0,
     0.0,
     4.0,
     {1.0, 0x1p-1022, 1.4142135623730951, 0.7071067811865476}},
    {"log1p_f64",
     VARIANT_PTRS(opf_log1p_f64),
     log1pl,
     1.5,
     -1.0,
     4.0,
     {-1.0, 0.41421356237309503, -0.2928932188134524, 0x1p53, 1.0}},
    {"tanh_f64", VARIANT_PTRS(opf_tanh_f64), tanhl, 2.0, -20.0, 20.0, {0.5625, -0.5625, 19.0, 20.0}},
    {"erf_f64", VARIANT_PTRS(opf_erf_f64), erfl, 1.5, -7.0, 7.0, {1.0, -1.0, 5.9, 6.0}},
    {"sigmoid_f64", VARIANT_PTRS(opf_sigmoid_f64), ref_sigmoidl, 2.0, -750.0, 50.0, {-708.4, -744.5, 37.0}},
    {"softplus_f64", VARIANT_PTRS(opf_softplus_f64), ref_softplusl, 2.5, -750.0, 50.0, {-708.4, -744.5, 37.0}},
    {"sqrt_f64", VARIANT_PTRS(opf_sqrt_f64), sqrtl, 0.5, 0.0, 4.0, {1.0, 0x1p-1022}},
};

enum { N_CASES_F32 = sizeof cases_f32 / sizeof cases_f32[0], N_CASES_F64 = sizeof cases_f64 / sizeof cases_f64[0] };

/* ------------------------------------------------------------------------ */
/* Inputs                                                                    */
/* ------------------------------------------------------------------------ */

static const float specials_f32[] = {0.0f,    -0.0f,    1.0f,    -1.0f,    INFINITY,  -INFINITY,  NAN,       -NAN,
                                     FLT_MIN, -FLT_MIN, FLT_MAX, -FLT_MAX, 0x1p-149f, -0x1p-149f, 0x1p-127f, -0x1p-127f,
                                     0.5f,    -0.5f,    2.0f,    -2.0f,    100.0f,    -100.0f,    1e30f,     -1e30f};
static const double specials_f64[] = {
    0.0,       -0.0,       1.0,       -1.0,       INFINITY, -INFINITY, NAN, -NAN, DBL_MIN, -DBL_MIN, DBL_MAX, -DBL_MAX,
    0x1p-1074, -0x1p-1074, 0x1p-1023, -0x1p-1023, 0.5,      -0.5,      2.0, -2.0, 1000.0,  -1000.0,  1e300,   -1e300};

/* Appends to a buffer that grows. */
typedef struct inputs_f32 {
    float *x;
    size_t n, cap;
} inputs_f32;
typedef struct inputs_f64 {
    double *x;
    size_t n, cap;
} inputs_f64;

static void push_f32(inputs_f32 *in, float v) {
    if (in->n == in->cap) {
        in->cap = in->cap ? 2 * in->cap : 4096;
        float *grown = (float *)xmalloc(in->cap * sizeof *grown);
        if (in->n) {
            memcpy(grown, in->x, in->n * sizeof *grown);
        }
        free(in->x);
        in->x = grown;
    }
    in->x[in->n++] = v;
}
static void push_f64(inputs_f64 *in, double v) {
    if (in->n == in->cap) {
        in->cap = in->cap ? 2 * in->cap : 4096;
        double *grown = (double *)xmalloc(in->cap * sizeof *grown);
        if (in->n) {
            memcpy(grown, in->x, in->n * sizeof *grown);
        }
        free(in->x);
        in->x = grown;
    }
    in->x[in->n++] = v;
}

static float f32_from_bits(uint32_t u) {
    float v;
    memcpy(&v, &u, sizeof v);
    return v;
}
static double f64_from_bits(uint64_t u) {
    double v;
    memcpy(&v, &u, sizeof v);
    return v;
}

/* `scale` sets the sizes: 1 normally, smaller under valgrind and qemu. */
static void make_inputs_f32(const math_case_f32 *c, size_t scale_div, inputs_f32 *in) {
    rng r = rng_seed(0x6d617468u);
    for (size_t i = 0; i < sizeof specials_f32 / sizeof specials_f32[0]; i++) {
        push_f32(in, specials_f32[i]);
    }
    /* bit patterns spread over all 2^32 (an odd stride varies the mantissa) */
    const size_t n_bits = ((size_t)1 << 17) / scale_div;
    const uint32_t stride = (uint32_t)((((uint64_t)1 << 32) / n_bits) | 1u);
    for (size_t i = 0; i < n_bits; i++) {
        push_f32(in, f32_from_bits((uint32_t)(i * stride)));
    }
    /* dense steps over [lo, hi] */
    const size_t n_dense = ((size_t)1 << 17) / scale_div;
    for (size_t i = 0; i <= n_dense; i++) {
        push_f32(in, (float)(c->lo + (c->hi - c->lo) * ((double)i / (double)n_dense)));
    }
    /* every float within 200 ulp of each switch point, and of 0 */
    for (int p = -1; p < 8; p++) {
        const float at = p < 0 ? 0.0f : c->points[p];
        if (p >= 0 && at == 0.0f) {
            break;
        }
        float up = at, down = at;
        for (int k = 0; k < 200 / (int)scale_div + 2; k++) {
            push_f32(in, up);
            push_f32(in, down);
            push_f32(in, -up);
            up = nextafterf(up, INFINITY);
            down = nextafterf(down, -INFINITY);
        }
    }
    /* random bits; random values in [lo, hi] */
    const size_t n_rand = ((size_t)1 << 16) / scale_div;
    for (size_t i = 0; i < n_rand; i++) {
        push_f32(in, f32_from_bits((uint32_t)rng_next(&r)));
        push_f32(in, (float)rng_uniform(&r, c->lo, c->hi));
    }
    while (in->n % BLOCK) {
        push_f32(in, 1.0f);
    }
}

static void make_inputs_f64(const math_case_f64 *c, size_t scale_div, inputs_f64 *in) {
    rng r = rng_seed(0x6d617468u);
    for (size_t i = 0; i < sizeof specials_f64 / sizeof specials_f64[0]; i++) {
        push_f64(in, specials_f64[i]);
    }
    const size_t n_bits = ((size_t)1 << 15) / scale_div;
    const uint64_t stride = (UINT64_MAX / n_bits) | 1u;
    for (size_t i = 0; i < n_bits; i++) {
        push_f64(in, f64_from_bits((uint64_t)i * stride));
    }
    const size_t n_dense = ((size_t)1 << 15) / scale_div;
    for (size_t i = 0; i <= n_dense; i++) {
        push_f64(in, c->lo + (c->hi - c->lo) * ((double)i / (double)n_dense));
    }
    for (int p = -1; p < 8; p++) {
        const double at = p < 0 ? 0.0 : c->points[p];
        if (p >= 0 && at == 0.0) {
            break;
        }
        double up = at, down = at;
        for (int k = 0; k < 100 / (int)scale_div + 2; k++) {
            push_f64(in, up);
            push_f64(in, down);
            push_f64(in, -up);
            up = nextafter(up, INFINITY);
            down = nextafter(down, -INFINITY);
        }
    }
    const size_t n_rand = ((size_t)1 << 14) / scale_div;
    for (size_t i = 0; i < n_rand; i++) {
        push_f64(in, f64_from_bits(rng_next(&r)));
        push_f64(in, rng_uniform(&r, c->lo, c->hi));
        /* near 0 on a log scale */
        push_f64(in, ldexp(rng_uniform(&r, -1.0, 1.0), -(int)rng_below(&r, 60)));
    }
    while (in->n % BLOCK) {
        push_f64(in, 1.0);
    }
}

/* ------------------------------------------------------------------------ */
/* Sweeps                                                                    */
/* ------------------------------------------------------------------------ */

static int same_f32(float a, float b) { return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0; }
static int same_f64(double a, double b) { return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0; }

typedef struct worst {
    double ulp;
    double x;
    double y;
    double ref;
} worst;

static void note(worst *w, double e, double x, double y, double ref) {
    if (e > w->ulp || (isnan(e) && !isnan(w->ulp))) {
        w->ulp = e;
        w->x = x;
        w->y = y;
        w->ref = ref;
    }
}

/* The size divisor for this run: valgrind, and aarch64's software long double
 * (the references of the double functions), are slow. */
static size_t scale_div_f32(void) { return harness_slow() ? 16 : 1; }
static size_t scale_div_f64(void) {
    size_t d = harness_slow() ? 16 : 1;
    return LDBL_MANT_DIG > 64 ? 4 * d : d;
}

static void run_case_f32(const math_case_f32 *c) {
    harness_begin(c->name);
    inputs_f32 in = {0};
    make_inputs_f32(c, scale_div_f32(), &in);
    double *ref = (double *)xmalloc(in.n * sizeof *ref);
    float *y = (float *)xmalloc(in.n * sizeof *y);
    float *y0 = (float *)xmalloc(in.n * sizeof *y0);
    for (size_t i = 0; i < in.n; i++) {
        ref[i] = c->ref((double)in.x[i]);
    }
    const double bound = c->bound;
    printf("  %-12s %7zu inputs, max ulp:", c->name, in.n);
    for (int v = 0; v < V_COUNT; v++) {
        if (c->loop[v] == NULL || !variant_runs(v)) {
            continue;
        }
        for (size_t i = 0; i < in.n; i += BLOCK) {
            c->loop[v](in.x + i, v == V_SCALAR ? y0 + i : y + i);
        }
        const float *yv = v == V_SCALAR ? y0 : y;
        size_t differ = 0; /* from the scalar build, bit for bit */
        worst w = {0, 0, 0, 0};
        for (size_t i = 0; i < in.n; i++) {
            differ += !same_f32(yv[i], y0[i]);
            note(&w, err_f32(yv[i], ref[i]), in.x[i], yv[i], ref[i]);
        }
        printf(" %s %.3f", variant_name[v], w.ulp);
        if (differ) {
            printf(" (%zu differ from scalar)", differ);
        }
        CHECK(w.ulp <= bound, "%s %s: %.3f ulp > %.1f at x = %a (%.9g): got %a (%.9g), want %.17g", c->name,
              variant_name[v], w.ulp, bound, w.x, w.x, w.y, w.y, w.ref);
    }
    printf("\n");
    free(y0);
    free(y);
    free(ref);
    free(in.x);
    harness_end();
}

static void run_case_f64(const math_case_f64 *c) {
    harness_begin(c->name);
    inputs_f64 in = {0};
    make_inputs_f64(c, scale_div_f64(), &in);
    long double *ref = (long double *)xmalloc(in.n * sizeof *ref);
    double *y = (double *)xmalloc(in.n * sizeof *y);
    double *y0 = (double *)xmalloc(in.n * sizeof *y0);
    for (size_t i = 0; i < in.n; i++) {
        ref[i] = c->ref((long double)in.x[i]);
    }
    const double bound = c->bound + (long_double_is_wider() ? 0.0 : 1.0);
    printf("  %-12s %7zu inputs%s, max ulp:", c->name, in.n, long_double_is_wider() ? "" : " (reference: double)");
    for (int v = 0; v < V_COUNT; v++) {
        if (c->loop[v] == NULL || !variant_runs(v)) {
            continue;
        }
        for (size_t i = 0; i < in.n; i += BLOCK) {
            c->loop[v](in.x + i, v == V_SCALAR ? y0 + i : y + i);
        }
        const double *yv = v == V_SCALAR ? y0 : y;
        size_t differ = 0; /* from the scalar build, bit for bit */
        worst w = {0, 0, 0, 0};
        for (size_t i = 0; i < in.n; i++) {
            differ += !same_f64(yv[i], y0[i]);
            note(&w, err_f64(yv[i], ref[i]), in.x[i], yv[i], (double)ref[i]);
        }
        printf(" %s %.3f", variant_name[v], w.ulp);
        if (differ) {
            printf(" (%zu differ from scalar)", differ);
        }
        CHECK(w.ulp <= bound, "%s %s: %.3f ulp > %.1f at x = %a (%.17g): got %a (%.17g), want %.17g", c->name,
              variant_name[v], w.ulp, bound, w.x, w.x, w.y, w.y, w.ref);
    }
    printf("\n");
    free(y0);
    free(y);
    free(ref);
    free(in.x);
    harness_end();
}

/* ------------------------------------------------------------------------ */
/* Exact values                                                              */
/* ------------------------------------------------------------------------ */

/* Checks f(x) == want exactly (NaN matches any NaN, zeros match in sign) in
 * every variant. */
static void exact_f32(const math_case_f32 *c, float x, float want) {
    float xs[BLOCK], y[BLOCK];
    for (int i = 0; i < BLOCK; i++) {
        xs[i] = x;
    }
    for (int v = 0; v < V_COUNT; v++) {
        if (c->loop[v] == NULL || !variant_runs(v)) {
            continue;
        }
        c->loop[v](xs, y);
        CHECK(same_f32(y[0], want) && same_f32(y[BLOCK - 1], want), "%s %s(%a) = %a, want %a", variant_name[v], c->name,
              x, y[0], want);
    }
}
static void exact_f64(const math_case_f64 *c, double x, double want) {
    double xs[BLOCK], y[BLOCK];
    for (int i = 0; i < BLOCK; i++) {
        xs[i] = x;
    }
    for (int v = 0; v < V_COUNT; v++) {
        if (c->loop[v] == NULL || !variant_runs(v)) {
            continue;
        }
        c->loop[v](xs, y);
        CHECK(same_f64(y[0], want) && same_f64(y[BLOCK - 1], want), "%s %s(%a) = %a, want %a", variant_name[v], c->name,
              x, y[0], want);
    }
}

static const math_case_f32 *find_f32(const char *name) {
    for (int i = 0; i < N_CASES_F32; i++) {
        if (strcmp(cases_f32[i].name, name) == 0) {
            return &cases_f32[i];
        }
    }
    return NULL;
}
static const math_case_f64 *find_f64(const char *name) {
    for (int i = 0; i < N_CASES_F64; i++) {
        if (strcmp(cases_f64[i].name, name) == 0) {
            return &cases_f64[i];
        }
    }
    return NULL;
}

TEST(test_special_values) {
    const float inf = INFINITY, nan = NAN;
    const math_case_f32 *e = find_f32("exp_f32"), *em1 = find_f32("expm1_f32"), *l = find_f32("log_f32"),
                        *l1p = find_f32("log1p_f32"), *th = find_f32("tanh_f32"), *er = find_f32("erf_f32"),
                        *sg = find_f32("sigmoid_f32"), *sq = find_f32("sqrt_f32"), *sp = find_f32("softplus_f32");
    exact_f32(e, 0.0f, 1.0f);
    exact_f32(e, -0.0f, 1.0f);
    exact_f32(e, inf, inf);
    exact_f32(e, -inf, 0.0f);
    exact_f32(e, nan, nan);
    exact_f32(e, 88.8f, inf);
    exact_f32(e, 1000.0f, inf);
    exact_f32(e, -104.0f, 0.0f);
    exact_f32(e, -1000.0f, 0.0f);
    exact_f32(e, FLT_MAX, inf);
    exact_f32(e, -FLT_MAX, 0.0f);
    exact_f32(em1, 0.0f, 0.0f);
    exact_f32(em1, -0.0f, -0.0f);
    exact_f32(em1, 0x1p-149f, 0x1p-149f);
    exact_f32(em1, -0x1p-149f, -0x1p-149f);
    exact_f32(em1, inf, inf);
    exact_f32(em1, -inf, -1.0f);
    exact_f32(em1, -1000.0f, -1.0f);
    exact_f32(em1, 1000.0f, inf);
    exact_f32(em1, nan, nan);
    exact_f32(l, 1.0f, 0.0f);
    exact_f32(l, 0.0f, -inf);
    exact_f32(l, -0.0f, -inf);
    exact_f32(l, -1.0f, nan);
    exact_f32(l, -0x1p-149f, nan);
    exact_f32(l, -inf, nan);
    exact_f32(l, inf, inf);
    exact_f32(l, nan, nan);
    exact_f32(l1p, 0.0f, 0.0f);
    exact_f32(l1p, -0.0f, -0.0f);
    exact_f32(l1p, 0x1p-149f, 0x1p-149f);
    exact_f32(l1p, -0x1p-149f, -0x1p-149f);
    exact_f32(l1p, -1.0f, -inf);
    exact_f32(l1p, -1.5f, nan);
    exact_f32(l1p, -inf, nan);
    exact_f32(l1p, inf, inf);
    exact_f32(l1p, nan, nan);
    exact_f32(th, 0.0f, 0.0f);
    exact_f32(th, -0.0f, -0.0f);
    exact_f32(th, 0x1p-149f, 0x1p-149f);
    exact_f32(th, inf, 1.0f);
    exact_f32(th, -inf, -1.0f);
    exact_f32(th, 20.0f, 1.0f);
    exact_f32(th, -FLT_MAX, -1.0f);
    exact_f32(th, nan, nan);
    exact_f32(er, 0.0f, 0.0f);
    exact_f32(er, -0.0f, -0.0f);
    exact_f32(er, inf, 1.0f);
    exact_f32(er, -inf, -1.0f);
    exact_f32(er, 10.0f, 1.0f);
    exact_f32(er, -FLT_MAX, -1.0f);
    exact_f32(er, nan, nan);
    exact_f32(sg, 0.0f, 0.5f);
    exact_f32(sg, -0.0f, 0.5f);
    exact_f32(sg, inf, 1.0f);
    exact_f32(sg, -inf, 0.0f);
    exact_f32(sg, -200.0f, 0.0f);
    exact_f32(sg, -FLT_MAX, 0.0f);
    exact_f32(sg, 200.0f, 1.0f);
    exact_f32(sg, nan, nan);
    exact_f32(sp, inf, inf);
    exact_f32(sp, -inf, 0.0f);
    exact_f32(sp, nan, nan);
    exact_f32(sp, -nan, nan);
    exact_f32(sp, 1e30f, 1e30f);
    exact_f32(sp, FLT_MAX, FLT_MAX);
    exact_f32(sp, -FLT_MAX, 0.0f);
    exact_f32(sp, -104.0f, 0.0f);
    exact_f32(sp, -200.0f, 0.0f);
    exact_f32(sq, -0.0f, -0.0f);
    exact_f32(sq, -1.0f, nan);
    exact_f32(sq, inf, inf);
    exact_f32(sq, 4.0f, 2.0f);

    const double dinf = INFINITY, dnan = NAN;
    const math_case_f64 *de = find_f64("exp_f64"), *dem1 = find_f64("expm1_f64"), *dl = find_f64("log_f64"),
                        *dl1p = find_f64("log1p_f64"), *dth = find_f64("tanh_f64"), *der = find_f64("erf_f64"),
                        *dsg = find_f64("sigmoid_f64"), *dsq = find_f64("sqrt_f64"), *dsp = find_f64("softplus_f64");
    exact_f64(de, 0.0, 1.0);
    exact_f64(de, -0.0, 1.0);
    exact_f64(de, dinf, dinf);
    exact_f64(de, -dinf, 0.0);
    exact_f64(de, dnan, dnan);
    exact_f64(de, 709.8, dinf);
    exact_f64(de, -746.0, 0.0);
    exact_f64(de, DBL_MAX, dinf);
    exact_f64(de, -DBL_MAX, 0.0);
    exact_f64(dem1, 0.0, 0.0);
    exact_f64(dem1, -0.0, -0.0);
    exact_f64(dem1, 0x1p-1074, 0x1p-1074);
    exact_f64(dem1, dinf, dinf);
    exact_f64(dem1, -dinf, -1.0);
    exact_f64(dem1, -1000.0, -1.0);
    exact_f64(dem1, 1000.0, dinf);
    exact_f64(dem1, dnan, dnan);
    exact_f64(dl, 1.0, 0.0);
    exact_f64(dl, 0.0, -dinf);
    exact_f64(dl, -0.0, -dinf);
    exact_f64(dl, -1.0, dnan);
    exact_f64(dl, -dinf, dnan);
    exact_f64(dl, dinf, dinf);
    exact_f64(dl, dnan, dnan);
    exact_f64(dl1p, 0.0, 0.0);
    exact_f64(dl1p, -0.0, -0.0);
    exact_f64(dl1p, -0x1p-1074, -0x1p-1074);
    exact_f64(dl1p, -1.0, -dinf);
    exact_f64(dl1p, -1.5, dnan);
    exact_f64(dl1p, dinf, dinf);
    exact_f64(dl1p, dnan, dnan);
    exact_f64(dth, 0.0, 0.0);
    exact_f64(dth, -0.0, -0.0);
    exact_f64(dth, dinf, 1.0);
    exact_f64(dth, -dinf, -1.0);
    exact_f64(dth, 40.0, 1.0);
    exact_f64(dth, dnan, dnan);
    exact_f64(der, 0.0, 0.0);
    exact_f64(der, -0.0, -0.0);
    exact_f64(der, dinf, 1.0);
    exact_f64(der, -dinf, -1.0);
    exact_f64(der, 10.0, 1.0);
    exact_f64(der, dnan, dnan);
    exact_f64(dsg, 0.0, 0.5);
    exact_f64(dsg, dinf, 1.0);
    exact_f64(dsg, -dinf, 0.0);
    exact_f64(dsg, -800.0, 0.0);
    exact_f64(dsg, 800.0, 1.0);
    exact_f64(dsg, dnan, dnan);
    exact_f64(dsp, dinf, dinf);
    exact_f64(dsp, -dinf, 0.0);
    exact_f64(dsp, dnan, dnan);
    exact_f64(dsp, 1e300, 1e300);
    exact_f64(dsp, -DBL_MAX, 0.0);
    exact_f64(dsp, -746.0, 0.0);
    exact_f64(dsq, -0.0, -0.0);
    exact_f64(dsq, -1.0, dnan);
    exact_f64(dsq, dinf, dinf);
}

/* ------------------------------------------------------------------------ */
/* fabs, fmin/fmax, minimum/maximum, select, the type-generic names          */
/* ------------------------------------------------------------------------ */

#define PAIR_LOOP(name, fn, T)                                                                                         \
    static void name(const T *restrict a, const T *restrict b, T *restrict y) {                                        \
        for (int i = 0; i < BLOCK; i++) {                                                                              \
            y[i] = fn(a[i], b[i]);                                                                                     \
        }                                                                                                              \
    }
PAIR_LOOP(loop_fmin_f32, opf_fmin_f32, float)
PAIR_LOOP(loop_fmax_f32, opf_fmax_f32, float)
PAIR_LOOP(loop_minimum_f32, opf_minimum_f32, float)
PAIR_LOOP(loop_maximum_f32, opf_maximum_f32, float)
PAIR_LOOP(loop_fmin_f64, opf_fmin_f64, double)
PAIR_LOOP(loop_fmax_f64, opf_fmax_f64, double)
PAIR_LOOP(loop_minimum_f64, opf_minimum_f64, double)
PAIR_LOOP(loop_maximum_f64, opf_maximum_f64, double)

static double numpy_minimum(double a, double b) { return isnan(a) || isnan(b) ? NAN : fmin(a, b); }
static double numpy_maximum(double a, double b) { return isnan(a) || isnan(b) ? NAN : fmax(a, b); }

TEST(test_min_max_abs_select) {
    static const double vals[] = {0.0, -0.0, 1.0, -1.0, 2.5, INFINITY, -INFINITY, NAN, 1e-40, -3e38};
    enum { NV = sizeof vals / sizeof vals[0] };
    float a32[BLOCK], b32[BLOCK], y32[4][BLOCK];
    double a64[BLOCK], b64[BLOCK], y64[4][BLOCK];
    for (int i = 0; i < BLOCK; i++) {
        a32[i] = (float)vals[(i / NV) % NV];
        b32[i] = (float)vals[i % NV];
        a64[i] = vals[(i / NV) % NV];
        b64[i] = vals[i % NV];
    }
    loop_fmin_f32(a32, b32, y32[0]);
    loop_fmax_f32(a32, b32, y32[1]);
    loop_minimum_f32(a32, b32, y32[2]);
    loop_maximum_f32(a32, b32, y32[3]);
    loop_fmin_f64(a64, b64, y64[0]);
    loop_fmax_f64(a64, b64, y64[1]);
    loop_minimum_f64(a64, b64, y64[2]);
    loop_maximum_f64(a64, b64, y64[3]);
    for (int i = 0; i < BLOCK; i++) {
        const double a = a64[i], b = b64[i];
        /* which zero comes back for (+0, -0) is unspecified: compare values */
        const double want[4] = {fmin(a, b), fmax(a, b), numpy_minimum(a, b), numpy_maximum(a, b)};
        const double want32[4] = {fminf(a32[i], b32[i]), fmaxf(a32[i], b32[i]), numpy_minimum(a32[i], b32[i]),
                                  numpy_maximum(a32[i], b32[i])};
        for (int k = 0; k < 4; k++) {
            CHECK(isnan(y64[k][i]) ? isnan(want[k]) : y64[k][i] == want[k], "op %d (%g, %g) = %g, want %g", k, a, b,
                  y64[k][i], want[k]);
            CHECK(isnan(y32[k][i]) ? isnan(want32[k]) : y32[k][i] == want32[k], "op %d f32 (%g, %g) = %g, want %g", k,
                  a, b, (double)y32[k][i], want32[k]);
        }
    }
    for (int i = 0; i < NV; i++) {
        const double v = vals[i];
        CHECK(same_f64(opf_fabs_f64(v), fabs(v)), "fabs(%g)", v);
        CHECK(same_f32(opf_fabs_f32((float)v), fabsf((float)v)), "fabsf(%g)", v);
        CHECK(same_f64(opf_select_f64(1, v, 7.0), v) && same_f64(opf_select_f64(0, 7.0, v), v), "select %g", v);
        CHECK(same_f32(opf_select_f32(i == 3, (float)v, 7.0f), i == 3 ? (float)v : 7.0f), "select f32 %g", v);
    }
    /* the type-generic names pick the dtype of their argument */
    const float xf = 0.75f;
    const double xd = 0.75;
    CHECK(same_f32(opf_exp(xf), opf_exp_f32(xf)) && same_f64(opf_exp(xd), opf_exp_f64(xd)), "opf_exp");
    CHECK(same_f32(opf_expm1(xf), opf_expm1_f32(xf)) && same_f64(opf_expm1(xd), opf_expm1_f64(xd)), "opf_expm1");
    CHECK(same_f32(opf_log(xf), opf_log_f32(xf)) && same_f64(opf_log(xd), opf_log_f64(xd)), "opf_log");
    CHECK(same_f32(opf_log1p(xf), opf_log1p_f32(xf)) && same_f64(opf_log1p(xd), opf_log1p_f64(xd)), "opf_log1p");
    CHECK(same_f32(opf_tanh(xf), opf_tanh_f32(xf)) && same_f64(opf_tanh(xd), opf_tanh_f64(xd)), "opf_tanh");
    CHECK(same_f32(opf_erf(xf), opf_erf_f32(xf)) && same_f64(opf_erf(xd), opf_erf_f64(xd)), "opf_erf");
    CHECK(same_f32(opf_sigmoid(xf), opf_sigmoid_f32(xf)) && same_f64(opf_sigmoid(xd), opf_sigmoid_f64(xd)),
          "opf_sigmoid");
    CHECK(same_f32(opf_softplus(xf), opf_softplus_f32(xf)) && same_f64(opf_softplus(xd), opf_softplus_f64(xd)),
          "opf_softplus");
    CHECK(same_f32(opf_sqrt(xf), 0.8660254f) && same_f64(opf_sqrt(xd), sqrt(0.75)), "opf_sqrt");
    CHECK(same_f32(opf_fabs(-xf), xf) && same_f64(opf_fabs(-xd), xd), "opf_fabs");
    CHECK(opf_fmin(xf, 1.0f) == xf && opf_fmax(xd, 1.0) == 1.0, "opf_fmin/fmax");
    CHECK(isnan(opf_maximum(xf, NAN)) && opf_fmax(xf, NAN) == xf, "opf_maximum/fmax");
    CHECK(opf_minimum(xd, -1.0) == -1.0, "opf_minimum");
    CHECK(opf_select(xf > 0.5f, xf, 2.0f) == xf && opf_select(xd > 1.0, xd, 2.0) == 2.0, "opf_select");
    CHECK(sizeof(opf_exp(xf)) == sizeof(float) && sizeof(opf_exp(xd)) == sizeof(double) &&
              sizeof(opf_exp(1)) == sizeof(double) && sizeof(opf_fmax(xf, xd)) == sizeof(double),
          "type-generic result types");
}

/* ------------------------------------------------------------------------ */
/* Every float input (OPF_MATH_EXHAUSTIVE=1)                                 */
/* ------------------------------------------------------------------------ */

typedef struct exhaustive_job {
    const math_case_f32 *c;
    int variant;
    uint64_t begin, end;
    worst w;
} exhaustive_job;

static void *exhaustive_run(void *arg) {
    exhaustive_job *job = (exhaustive_job *)arg;
    float x[BLOCK], y[BLOCK];
    for (uint64_t u = job->begin; u < job->end; u += BLOCK) {
        for (int i = 0; i < BLOCK; i++) {
            x[i] = f32_from_bits((uint32_t)(u + (uint64_t)i));
        }
        job->c->loop[job->variant](x, y);
        for (int i = 0; i < BLOCK; i++) {
            const double ref = job->c->ref((double)x[i]);
            note(&job->w, err_f32(y[i], ref), x[i], y[i], ref);
        }
    }
    return NULL;
}

static void exhaustive_f32(const math_case_f32 *c, int variant) {
    enum { THREADS = 2 };
    exhaustive_job jobs[THREADS];
    pthread_t th[THREADS];
    const uint64_t total = (uint64_t)1 << 32;
    for (int t = 0; t < THREADS; t++) {
        jobs[t] = (exhaustive_job){
            c, variant, total / THREADS * (uint64_t)t, total / THREADS * (uint64_t)(t + 1), {0, 0, 0, 0}};
        pthread_create(&th[t], NULL, exhaustive_run, &jobs[t]);
    }
    worst w = {0, 0, 0, 0};
    for (int t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        note(&w, jobs[t].w.ulp, jobs[t].w.x, jobs[t].w.y, jobs[t].w.ref);
    }
    printf("  exhaustive %-12s %-7s max %.4f ulp at x = %a (%.9g): got %.9g, want %.12g\n", c->name,
           variant_name[variant], w.ulp, w.x, w.x, w.y, w.ref);
    fflush(stdout);
    CHECK(w.ulp <= c->bound, "%s %s: %.4f ulp", c->name, variant_name[variant], w.ulp);
}

static void exhaustive_f64(const math_case_f64 *c, int variant) {
    const size_t n = (size_t)1 << 24;
    double x[BLOCK], y[BLOCK];
    rng r = rng_seed(0x65786861u);
    worst w = {0, 0, 0, 0};
    for (size_t k = 0; k < n; k += BLOCK) {
        for (int i = 0; i < BLOCK; i++) {
            const uint64_t bits = rng_next(&r);
            switch (i % 4) {
            case 0: x[i] = f64_from_bits(bits); break;
            case 1: x[i] = rng_uniform(&r, c->lo, c->hi); break;
            case 2: x[i] = ldexp(rng_uniform(&r, -1.0, 1.0), -(int)rng_below(&r, 80)); break;
            default: x[i] = rng_uniform(&r, -2.0, 2.0); break;
            }
        }
        c->loop[variant](x, y);
        for (int i = 0; i < BLOCK; i++) {
            const long double ref = c->ref((long double)x[i]);
            note(&w, err_f64(y[i], ref), x[i], y[i], (double)ref);
        }
    }
    printf("  random     %-12s %-7s max %.4f ulp at x = %a (%.17g): got %.17g, want %.17g\n", c->name,
           variant_name[variant], w.ulp, w.x, w.x, w.y, w.ref);
    fflush(stdout);
    CHECK(w.ulp <= c->bound, "%s %s: %.4f ulp", c->name, variant_name[variant], w.ulp);
}

/* OPF_MATH_VARIANTS="scalar,avx512" limits the builds run (default: all). */
static int variant_wanted(int v) {
    const char *want = getenv("OPF_MATH_VARIANTS");
    if (want == NULL) {
        return 1;
    }
    const size_t len = strlen(variant_name[v]);
    for (const char *p = strstr(want, variant_name[v]); p; p = strstr(p + 1, variant_name[v])) {
        if ((p == want || p[-1] == ',') && (p[len] == ',' || p[len] == '\0')) {
            return 1;
        }
    }
    return 0;
}

static void run_exhaustive(void) {
    const char *only = getenv("OPF_MATH_ONLY"); /* a function name, optionally */
    for (int i = 0; i < N_CASES_F32; i++) {
        if (only && strcmp(only, cases_f32[i].name) != 0) {
            continue;
        }
        harness_begin(cases_f32[i].name);
        for (int v = 0; v < V_COUNT; v++) {
            if (v != V_AUTO && cases_f32[i].loop[v] && variant_runs(v) && variant_wanted(v)) {
                exhaustive_f32(&cases_f32[i], v);
            }
        }
        harness_end();
    }
    for (int i = 0; i < N_CASES_F64; i++) {
        if (only && strcmp(only, cases_f64[i].name) != 0) {
            continue;
        }
        harness_begin(cases_f64[i].name);
        for (int v = 0; v < V_COUNT; v++) {
            if (v != V_AUTO && cases_f64[i].loop[v] && variant_runs(v) && variant_wanted(v)) {
                exhaustive_f64(&cases_f64[i], v);
            }
        }
        harness_end();
    }
}

int main(void) {
    if (getenv("OPF_MATH_EXHAUSTIVE")) {
        run_exhaustive();
        return harness_summary();
    }
    for (int i = 0; i < N_CASES_F32; i++) {
        run_case_f32(&cases_f32[i]);
    }
    for (int i = 0; i < N_CASES_F64; i++) {
        run_case_f64(&cases_f64[i]);
    }
    RUN_TEST(test_special_values);
    RUN_TEST(test_min_max_abs_select);
    return harness_summary();
}
