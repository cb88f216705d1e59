/*
 * test_ukernels.c — every kernel, called directly: each per-ISA build of the
 * built-in table's elementwise kernels (found through the table), every
 * GEMM micro-kernel of gemm.inc, against the scalar references, and every
 * streaming copy of copy.inc.
 *
 * A new elementwise built-in needs only its reference in eltwise_refs (the
 * test fails until it has one). Kernels of an ISA the CPU lacks are skipped.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kernels.h"
#include "reference.h"

/* ------------------------------------------------------------------------ */
/* The authored elementwise kernels of the built-in table                    */
/* ------------------------------------------------------------------------ */

/* The reference of an elementwise built-in on contiguous arrays: for element
 * i of output j, want[j][i] and the magnitude scale[j][i] its error is
 * measured against, in ulps of max(|want|, scale) of the dtype (the table
 * below gives the bound; 0: bit for bit). Inputs in the kernel's order
 * (relu_grad: dy, x). */
typedef void (*eltwise_ref)(opf_dtype dt, size_t n, const void *const *in, long double *const *want,
                            long double *const *scale, const opf_attr_value *attrs);

static long double in_at(opf_dtype dt, const void *p, size_t i) {
    return dt == OPF_F32 ? (long double)((const float *)p)[i] : (long double)((const double *)p)[i];
}
/* v rounded to the dtype (as the library forms an intermediate product). */
static long double in_dtype(opf_dtype dt, long double v) {
    return dt == OPF_F32 ? (long double)(float)v : (long double)(double)v;
}

static void kref_relu(opf_dtype dt, size_t n, const void *const *in, long double *const *want,
                      long double *const *scale, const opf_attr_value *attrs) {
    (void)scale, (void)attrs;
    for (size_t i = 0; i < n; i++) {
        want[0][i] = dt == OPF_F32 ? ref_relu_f32(((const float *)in[0])[i]) : ref_relu_f64(((const double *)in[0])[i]);
    }
}
static void kref_relu_grad(opf_dtype dt, size_t n, const void *const *in, long double *const *want,
                           long double *const *scale, const opf_attr_value *attrs) {
    (void)scale, (void)attrs;
    for (size_t i = 0; i < n; i++) {
        want[0][i] = dt == OPF_F32 ? ref_relu_grad_f32(((const float *)in[0])[i], ((const float *)in[1])[i])
                                   : ref_relu_grad_f64(((const double *)in[0])[i], ((const double *)in[1])[i]);
    }
}
static void kref_scale(opf_dtype dt, size_t n, const void *const *in, long double *const *want,
                       long double *const *scale, const opf_attr_value *attrs) {
    (void)scale;
    for (size_t i = 0; i < n; i++) {
        want[0][i] = dt == OPF_F32 ? ref_scale_f32((float)attrs[0].f, ((const float *)in[0])[i])
                                   : ref_scale_f64(attrs[0].f, ((const double *)in[0])[i]);
    }
}
static void kref_add(opf_dtype dt, size_t n, const void *const *in, long double *const *want, long double *const *scale,
                     const opf_attr_value *attrs) {
    (void)scale, (void)attrs;
    for (size_t i = 0; i < n; i++) {
        want[0][i] = dt == OPF_F32 ? ref_add_f32(((const float *)in[0])[i], ((const float *)in[1])[i])
                                   : ref_add_f64(((const double *)in[0])[i], ((const double *)in[1])[i]);
    }
}

static void kref_mul(opf_dtype dt, size_t n, const void *const *in, long double *const *want, long double *const *scale,
                     const opf_attr_value *attrs) {
    (void)scale, (void)attrs; /* mul(a, b); mul_grad(dy, other, like): dy other, like unread */
    for (size_t i = 0; i < n; i++) {
        want[0][i] = dt == OPF_F32 ? ref_mul_f32(((const float *)in[0])[i], ((const float *)in[1])[i])
                                   : ref_mul_f64(((const double *)in[0])[i], ((const double *)in[1])[i]);
    }
}
/* sum_to's kernel (x, like): y = x, like unread (the engine sums). */
static void kref_copy(opf_dtype dt, size_t n, const void *const *in, long double *const *want,
                      long double *const *scale, const opf_attr_value *attrs) {
    (void)scale, (void)attrs;
    for (size_t i = 0; i < n; i++) {
        want[0][i] = in_at(dt, in[0], i);
    }
}

/* The activations, from reference.h's long double f, f', f'' (x-form rows:
 * forward(x), grad(dy, x) = dy f'(x), grad_grad(ddx, dy, x) = (ddx f'(x),
 * (ddx dy) f''(x)), ddx dy formed in the dtype). */
typedef ref_act (*act_fn)(long double x, int64_t attr);
static ref_act act_gelu(long double x, int64_t attr) { return ref_act_gelu(x, attr != 0); }
static ref_act act_silu(long double x, int64_t attr) { return (void)attr, ref_act_silu(x); }
static ref_act act_sigmoid(long double x, int64_t attr) { return (void)attr, ref_act_sigmoid(x); }
static ref_act act_tanh(long double x, int64_t attr) { return (void)attr, ref_act_tanh(x); }

static void act_rows(act_fn f, int order, opf_dtype dt, size_t n, const void *const *in, long double *const *want,
                     long double *const *scale, const opf_attr_value *attrs) {
    for (size_t i = 0; i < n; i++) {
        ref_act r = f(in_at(dt, in[order], i), attrs[0].i);
        if (order == 0) {
            want[0][i] = r.f;
            scale[0][i] = 0;
        } else {
            long double g = in_at(dt, in[0], i);
            /* a subnormal f' (f'') rounded in the dtype costs up to |g| subnormal ulps: a
             * scale of |g| times the least normal value makes that a few ulps of it */
            const long double least = dt == OPF_F32 ? FLT_MIN : DBL_MIN;
            want[0][i] = g * r.d1;
            scale[0][i] = fabsl(g) * (r.s1 > least ? r.s1 : least);
            if (order == 2) {
                long double gg = in_dtype(dt, g * in_at(dt, in[1], i));
                want[1][i] = gg * r.d2;
                scale[1][i] = fabsl(gg) * (r.s2 > least ? r.s2 : least);
            }
        }
    }
}
#define ACT_REFS(name)                                                                                                 \
    static void kref_##name(opf_dtype dt, size_t n, const void *const *in, long double *const *want,                   \
                            long double *const *scale, const opf_attr_value *attrs) {                                  \
        act_rows(act_##name, 0, dt, n, in, want, scale, attrs);                                                        \
    }                                                                                                                  \
    static void kref_##name##_grad(opf_dtype dt, size_t n, const void *const *in, long double *const *want,            \
                                   long double *const *scale, const opf_attr_value *attrs) {                           \
        act_rows(act_##name, 1, dt, n, in, want, scale, attrs);                                                        \
    }                                                                                                                  \
    static void kref_##name##_grad_grad(opf_dtype dt, size_t n, const void *const *in, long double *const *want,       \
                                        long double *const *scale, const opf_attr_value *attrs) {                      \
        act_rows(act_##name, 2, dt, n, in, want, scale, attrs);                                                        \
    }
ACT_REFS(gelu)
ACT_REFS(silu)

static void kref_sigmoid(opf_dtype dt, size_t n, const void *const *in, long double *const *want,
                         long double *const *scale, const opf_attr_value *attrs) {
    act_rows(act_sigmoid, 0, dt, n, in, want, scale, attrs);
}
static void kref_tanh(opf_dtype dt, size_t n, const void *const *in, long double *const *want,
                      long double *const *scale, const opf_attr_value *attrs) {
    act_rows(act_tanh, 0, dt, n, in, want, scale, attrs);
}
/* y-form rows (sigmoid_grad(dy, y), tanh_grad(dy, y) and their grad_grad
 * (ddx, dy, y)): σ' = y (1 - y), tanh' = 1 - y², and the derivatives of
 * those in y, 1 - 2y and -2y. */
static void yform_rows(int tanh_form, int order, opf_dtype dt, size_t n, const void *const *in,
                       long double *const *want, long double *const *scale) {
    for (size_t i = 0; i < n; i++) {
        long double y = in_at(dt, in[order], i), g = in_at(dt, in[0], i);
        long double d1 = tanh_form ? (1 - y) * (1 + y) : y * (1 - y), d2 = tanh_form ? -2 * y : 1 - 2 * y;
        const long double least = dt == OPF_F32 ? FLT_MIN : DBL_MIN; /* subnormal results: see act_rows */
        want[0][i] = g * d1;
        scale[0][i] = (1 + fabsl(d1)) * least;
        if (order == 2) {
            long double gg = in_dtype(dt, g * in_at(dt, in[1], i));
            want[1][i] = gg * d2;
            scale[1][i] = (1 + fabsl(d2)) * least;
        }
    }
}
#define YFORM_REFS(name, tanh_form)                                                                                    \
    static void kref_##name##_grad(opf_dtype dt, size_t n, const void *const *in, long double *const *want,            \
                                   long double *const *scale, const opf_attr_value *attrs) {                           \
        (void)attrs;                                                                                                   \
        yform_rows(tanh_form, 1, dt, n, in, want, scale);                                                              \
    }                                                                                                                  \
    static void kref_##name##_grad_grad(opf_dtype dt, size_t n, const void *const *in, long double *const *want,       \
                                        long double *const *scale, const opf_attr_value *attrs) {                      \
        (void)attrs;                                                                                                   \
        yform_rows(tanh_form, 2, dt, n, in, want, scale);                                                              \
    }
YFORM_REFS(sigmoid, 0)
YFORM_REFS(tanh, 1)

/* Inputs an op is tested on beyond the default mixes: y-form rows take an
 * output of sigmoid or tanh (their last input), values within [-2, 2]. */
enum { DOMAIN_ANY = 0, DOMAIN_OUTPUT = 1 };

/* Every elementwise row of the built-in table needs its reference here: a
 * row without one fails test_eltwise_kernels. ulps: the bound on the error
 * (0: bit for bit); attrs: the attribute sets tested (none: defaults). */
static const opf_attr_value scale_alphas[] = {{.f = 2.0}, {.f = -0.5}, {.f = 0.1}, {.f = 0.0}, {.f = 1e-3}};
static const opf_attr_value gelu_forms[] = {{.i = 0}, {.i = 1}}; /* approximate: none, tanh */
static const struct {
    const char *op;
    eltwise_ref ref;
    double ulps;
    int last_input_domain;
    const opf_attr_value *attrs;
    int num_attrs;
} eltwise_refs[] = {
    {"relu", kref_relu, 0, DOMAIN_ANY, NULL, 0},
    {"relu_", kref_relu, 0, DOMAIN_ANY, NULL, 0},
    {"relu_grad", kref_relu_grad, 0, DOMAIN_ANY, NULL, 0},
    {"scale", kref_scale, 0, DOMAIN_ANY, scale_alphas, 5},
    {"add", kref_add, 0, DOMAIN_ANY, NULL, 0},
    {"mul", kref_mul, 0, DOMAIN_ANY, NULL, 0},
    {"sum_to", kref_copy, 0, DOMAIN_ANY, NULL, 0},
    {"mul_grad", kref_mul, 0, DOMAIN_ANY, NULL, 0},
    /* bounds: docs/ops.md's measured maxima plus the products with dy, ddx */
    {"gelu", kref_gelu, 8, DOMAIN_ANY, gelu_forms, 2},
    {"gelu_grad", kref_gelu_grad, 8, DOMAIN_ANY, gelu_forms, 2},
    {"gelu_grad_grad", kref_gelu_grad_grad, 10, DOMAIN_ANY, gelu_forms, 2},
    {"silu", kref_silu, 4, DOMAIN_ANY, NULL, 0},
    {"silu_grad", kref_silu_grad, 6, DOMAIN_ANY, NULL, 0},
    {"silu_grad_grad", kref_silu_grad_grad, 8, DOMAIN_ANY, NULL, 0},
    {"sigmoid", kref_sigmoid, 3, DOMAIN_ANY, NULL, 0},
    {"sigmoid_grad", kref_sigmoid_grad, 3, DOMAIN_OUTPUT, NULL, 0},
    {"sigmoid_grad_grad", kref_sigmoid_grad_grad, 3, DOMAIN_OUTPUT, NULL, 0},
    {"tanh", kref_tanh, 6, DOMAIN_ANY, NULL, 0}, /* float: a rational, 5.5 ulp (activations.c) */
    {"tanh_grad", kref_tanh_grad, 3, DOMAIN_OUTPUT, NULL, 0},
    {"tanh_grad_grad", kref_tanh_grad_grad, 3, DOMAIN_OUTPUT, NULL, 0},
};
enum { NUM_ELTWISE_REFS = sizeof eltwise_refs / sizeof eltwise_refs[0] };

typedef struct eltwise_case {
    const char *name;
    opf_dtype dtype;
    const char *op;
    int num_in, num_out;
    opf_eltwise_fn kernel;
    int ref; /* index in eltwise_refs */
} eltwise_case;

static void call_kernel(const eltwise_case *c, size_t n, const void *const *in, void *const *out,
                        const opf_attr_value *attrs) {
    c->kernel((int64_t)n, in, out, attrs);
}

/* ------------------------------------------------------------------------ */
/* Guarded buffers                                                           */
/* ------------------------------------------------------------------------ */

enum { GUARD_ELEMS = 16 }; /* 64 bytes of f32, 128 of f64: keeps 64-byte alignment */

/* n elements at `misalign` elements past a 64-byte boundary, between guard
 * bytes. A tight buffer ends exactly at the end of its allocation, so that a
 * sanitizer catches a read past the last element. */
typedef struct gbuf {
    unsigned char *base;
    size_t bytes;
    unsigned char *p;
    size_t n, esz;
} gbuf;

static gbuf gbuf_make(size_t esz, size_t n, size_t misalign, int tight) {
    gbuf g;
    g.esz = esz;
    g.n = n;
    size_t lead = (GUARD_ELEMS + misalign) * esz;
    if (tight) {
        g.bytes = lead + n * esz;
        g.base = xmalloc(g.bytes);
    } else {
        g.bytes = (lead + (n + GUARD_ELEMS) * esz + 63) / 64 * 64;
        g.base = aligned_alloc(64, g.bytes);
        if (g.base == NULL) {
            fprintf(stderr, "out of memory\n");
            exit(2);
        }
    }
    memset(g.base, HARNESS_GUARD_BYTE, g.bytes);
    g.p = g.base + lead;
    return g;
}

static int gbuf_guards_ok(const gbuf *g, const char *what, const char *ctx) {
    size_t lead = (size_t)(g->p - g->base);
    size_t end = lead + g->n * g->esz;
    int ok = CHECK_BYTES(g->base, lead, HARNESS_GUARD_BYTE, "%s: guard before %s", ctx, what);
    ok &= CHECK_BYTES(g->base + end, g->bytes - end, HARNESS_GUARD_BYTE, "%s: guard after %s", ctx, what);
    return ok;
}

static void gbuf_free(gbuf *g) { free(g->base); }

/* got (dtype values) against want: within the row's bound, in ulps of
 * max(|want|, scale) (the dtype's ulp; subnormal ulps below the normal range).
 * A derivative row's result is the product of dy (ddx, ddx dy) and f'(x)
 * (f''(x)) rounded to the dtype: where f' is subnormal that rounding is up
 * to |dy| half subnormal ulps, which scale covers (act_rows). A result that
 * overflows near the largest finite value may round either way. */
static int check_values(const eltwise_case *c, const void *got, const long double *want, const long double *scale,
                        size_t n, const char *ctx, const char *variant) {
    const double bound = eltwise_refs[c->ref].ulps;
    const int f64 = c->dtype == OPF_F64;
    const long double max = f64 ? DBL_MAX : FLT_MAX;
    for (size_t i = 0; i < n; i++) {
        double g = f64 ? ((const double *)got)[i] : (double)((const float *)got)[i];
        long double w = want[i];
        double e;
        if (bound == 0) {
            w = in_dtype(c->dtype, w);
            e = isnan(w) && isnan(g) ? 0.0 : (g == w ? 0.0 : INFINITY);
        } else if (isinf(g) && !isinf(w) && !isnan(w)) {
            e = (g > 0) == (w > 0) && fabsl(w) >= max * (1 - bound * (f64 ? DBL_EPSILON : FLT_EPSILON)) ? 0.0
                                                                                                        : INFINITY;
        } else {
            long double of = fabsl(w) > scale[i] || isnan(scale[i]) ? fabsl(w) : scale[i];
            e = ref_ulps(g, w, of < max ? of : max, f64);
        }
        if (!CHECK(e <= bound, "%s, %s: element %zu: got %.17g, want %.17Lg (%.3g ulp > %g)", ctx, variant, i, g, w, e,
                   bound)) {
            return 0;
        }
    }
    return 1;
}

/* ------------------------------------------------------------------------ */
/* Elementwise tests                                                         */
/* ------------------------------------------------------------------------ */

/* Values of an output of sigmoid or tanh (a y-form row's y). */
static void fill_output_domain(rng *r, opf_dtype dt, void *x, size_t n) {
    static const double specials[] = {0.0, -0.0, 1.0, -1.0, 0.5, NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < n; i++) {
        double v = rng_below(r, 4) == 0 ? specials[rng_below(r, 8)] : rng_uniform(r, -2.0, 2.0);
        if (dt == OPF_F32) {
            ((float *)x)[i] = (float)v;
        } else {
            ((double *)x)[i] = v;
        }
    }
}

/* Magnitudes spread over e^-8 .. 800 (every activation's tails), both signs. */
static void fill_wide(rng *r, opf_dtype dt, void *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        double v = exp(rng_uniform(r, -8.0, 6.7)) * (rng_below(r, 2) ? 1.0 : -1.0);
        if (dt == OPF_F32) {
            ((float *)x)[i] = (float)v;
        } else {
            ((double *)x)[i] = v;
        }
    }
}

enum { MIX_UNIFORM, MIX_SPECIAL, MIX_WIDE, NUM_MIXES };
static const char *const mix_names[NUM_MIXES] = {"uniform", "specials", "wide"};

/* One size, alignment, value mix and attribute set: out of place, then each
 * output written over each input (in place), and (several inputs) one array
 * for all inputs, checked against the reference, the guards and the inputs. */
static void eltwise_once(const eltwise_case *c, size_t n, size_t misalign, int tight, int mix,
                         const opf_attr_value *attrs, rng *r) {
    const size_t esz = opf_dtype_size(c->dtype);
    char ctx[256];
    snprintf(ctx, sizeof ctx, "%s n=%zu misalign=%zu %s %s attr=%g/%lld", c->name, n, misalign,
             tight ? "tight" : "guarded", mix_names[mix], attrs[0].f, (long long)attrs[0].i);
    const int ni = c->num_in, no = c->num_out;
    gbuf in[3], out[2];
    void *in0[3] = {NULL, NULL, NULL};
    long double *want[2] = {NULL, NULL}, *scale[2] = {NULL, NULL}, *want_same[2] = {NULL, NULL},
                *scale_same[2] = {NULL, NULL};
    for (int i = 0; i < ni; i++) {
        in[i] = gbuf_make(esz, n, (misalign + (size_t)i) % 4, tight);
        in0[i] = xcalloc(n, esz);
        int output_domain = i == ni - 1 && eltwise_refs[c->ref].last_input_domain == DOMAIN_OUTPUT;
        if (output_domain && mix != MIX_UNIFORM) {
            fill_output_domain(r, c->dtype, in0[i], n);
        } else if (mix == MIX_SPECIAL) {
            fill_special(r, c->dtype, in0[i], n);
        } else if (mix == MIX_WIDE && i == ni - 1) {
            fill_wide(r, c->dtype, in0[i], n);
        } else {
            fill_uniform(r, c->dtype, in0[i], n, -10.0, 10.0);
        }
        memcpy(in[i].p, in0[i], n * esz);
    }
    for (int j = 0; j < no; j++) {
        out[j] = gbuf_make(esz, n, (misalign + 2 + (size_t)j) % 4, tight);
        want[j] = xcalloc(n, sizeof(long double));
        scale[j] = xcalloc(n, sizeof(long double));
        want_same[j] = xcalloc(n, sizeof(long double));
        scale_same[j] = xcalloc(n, sizeof(long double));
    }
    {
        const void *rin[3] = {in0[0], in0[1], in0[2]}, *rsame[3] = {in0[0], in0[0], in0[0]};
        eltwise_refs[c->ref].ref(c->dtype, n, rin, want, scale, attrs);
        eltwise_refs[c->ref].ref(c->dtype, n, rsame, want_same, scale_same, attrs);
    }
    const void *pin[3] = {in[0].p, ni > 1 ? in[1].p : NULL, ni > 2 ? in[2].p : NULL};
    void *pout[2] = {out[0].p, no > 1 ? out[1].p : NULL};

    /* Out of place. */
    call_kernel(c, n, pin, pout, attrs);
    for (int j = 0; j < no; j++) {
        check_values(c, out[j].p, want[j], scale[j], n, ctx,
                     j == 0 ? "out of place, output 0" : "out of place, output 1");
        gbuf_guards_ok(&out[j], "output", ctx);
    }
    for (int i = 0; i < ni; i++) {
        CHECK_SAME_BITS(in[i].p, in0[i], n, esz, "%s: input %d modified", ctx, i);
    }

    /* Output j written over input i (the other output, if any, apart); at the
     * big size, output 0 over the last input only. */
    const int big = n > 1000;
    for (int j = 0; j < (big ? 1 : no); j++) {
        for (int i = big ? ni - 1 : 0; i < ni; i++) {
            char what[64];
            snprintf(what, sizeof what, "in place: output %d over input %d", j, i);
            memcpy(in[i].p, in0[i], n * esz);
            void *aout[2] = {pout[0], pout[1]};
            aout[j] = in[i].p;
            call_kernel(c, n, pin, aout, attrs);
            check_values(c, in[i].p, want[j], scale[j], n, ctx, what);
            gbuf_guards_ok(&in[i], "input", ctx);
            if (no == 2) {
                check_values(c, out[1 - j].p, want[1 - j], scale[1 - j], n, ctx, what);
            }
            for (int k = 0; k < ni; k++) {
                if (k != i) {
                    CHECK_SAME_BITS(in[k].p, in0[k], n, esz, "%s: %s: input %d modified", ctx, what, k);
                }
            }
            memcpy(in[i].p, in0[i], n * esz);
        }
    }

    /* One array for every input, out of place, then written over it. */
    if (ni > 1) {
        const void *same[3] = {in[0].p, in[0].p, in[0].p};
        call_kernel(c, n, same, pout, attrs);
        for (int j = 0; j < no; j++) {
            check_values(c, out[j].p, want_same[j], scale_same[j], n, ctx, "inputs one array");
        }
        void *over[2] = {in[0].p, no > 1 ? out[1].p : NULL};
        call_kernel(c, n, same, over, attrs);
        check_values(c, in[0].p, want_same[0], scale_same[0], n, ctx, "inputs one array, output 0 over it");
        gbuf_guards_ok(&in[0], "input", ctx);
    }

    for (int i = 0; i < ni; i++) {
        free(in0[i]);
        gbuf_free(&in[i]);
    }
    for (int j = 0; j < no; j++) {
        free(want[j]);
        free(scale[j]);
        free(want_same[j]);
        free(scale_same[j]);
        gbuf_free(&out[j]);
    }
}

/* The big size of a row with a long double reference. Where long double is
 * binary128 in software (AArch64, under qemu in CI) each reference costs
 * microseconds: a smaller big size, past every vector and unrolled loop. */
#if LDBL_MANT_DIG > 64
#define UKERNEL_BIG_REF_N (((size_t)1 << 12) + 3)
#else
#define UKERNEL_BIG_REF_N (((size_t)1 << 16) + 3)
#endif

static const size_t eltwise_sizes[] = {0, 1, 7, 8, 15, 16, 17, 31, 33, 1000, (size_t)1 << 20};

static void eltwise_test_kernel(const eltwise_case *c) {
    rng r = rng_seed(0x5EED0000u + (uint64_t)c->num_in);
    const opf_attr_value defaults[OPF_MAX_ATTRS] = {{0}};
    const int sets = eltwise_refs[c->ref].num_attrs > 0 ? eltwise_refs[c->ref].num_attrs : 1;
    for (size_t si = 0; si < sizeof eltwise_sizes / sizeof eltwise_sizes[0]; si++) {
        size_t n = eltwise_sizes[si];
        int big = n > 1000;
        if (big && eltwise_refs[c->ref].ulps > 0) {
            n = UKERNEL_BIG_REF_N; /* long double references are slow; the loops are the same */
        }
        for (size_t misalign = big ? 1 : 0; misalign < (big ? 2u : 4u); misalign++) {
            for (int tight = big ? 1 : 0; tight < 2; tight++) {
                if (tight && harness_test_failures() > 0) {
                    break; /* a kernel that failed the guard checks could corrupt the heap when tight */
                }
                for (int mix = 0; mix < (big ? MIX_SPECIAL + 1 : NUM_MIXES); mix++) {
                    for (int k = 0; k < sets; k++) {
                        opf_attr_value attrs[OPF_MAX_ATTRS];
                        memcpy(attrs, defaults, sizeof attrs);
                        if (eltwise_refs[c->ref].num_attrs > 0) {
                            attrs[0] = eltwise_refs[c->ref].attrs[k];
                        }
                        eltwise_once(c, n, misalign, tight, mix, attrs, &r);
                        if (harness_test_failures() > 50) {
                            return; /* a broken kernel fails everywhere; stop early */
                        }
                        if (big && k + 1 < sets && eltwise_refs[c->ref].attrs == scale_alphas) {
                            k = sets - 2; /* the big size: scale's first and last alpha are enough */
                        }
                    }
                }
            }
        }
    }
}

/* NaNs with payloads (quiet and signaling bit patterns, both signs) as every
 * input of an activation row: NaN out (an exponential's bit tricks must not turn
 * a payload into a number). */
static void eltwise_nan_payloads(const eltwise_case *c) {
    if (eltwise_refs[c->ref].ulps == 0) {
        return; /* relu and friends: their own rules for NaN (known values) */
    }
    enum { N = 6 };
    const uint32_t f32_bits[N] = {0x7fc12345u, 0xffc00001u, 0x7f800001u, 0xff8fffffu, 0x7fffffffu, 0xffa00000u};
    const uint64_t f64_bits[N] = {0x7ff8000012345678u, 0xfff8000000000001u, 0x7ff0000000000001u,
                                  0xfff00000000fffffu, 0x7fffffffffffffffu, 0xfff4000000000000u};
    double in_vals[3][N], out_vals[2][N];
    for (int i = 0; i < N; i++) {
        for (int k = 0; k < 3; k++) {
            if (c->dtype == OPF_F32) {
                memcpy((float *)in_vals[k] + i, &f32_bits[i], sizeof(float));
            } else {
                memcpy(&in_vals[k][i], &f64_bits[i], sizeof(double));
            }
        }
    }
    const void *in[3] = {in_vals[0], in_vals[1], in_vals[2]};
    void *out[2] = {out_vals[0], out_vals[1]};
    for (int form = 0; form < 2; form++) {
        opf_attr_value attrs[OPF_MAX_ATTRS] = {{.i = form}};
        call_kernel(c, N, in, out, attrs);
        for (int j = 0; j < c->num_out; j++) {
            for (int i = 0; i < N; i++) {
                double v = c->dtype == OPF_F32 ? (double)((float *)out_vals[j])[i] : out_vals[j][i];
                CHECK(isnan(v), "%s: NaN payload %d in, output %d = %g", c->name, i, j, v);
            }
        }
    }
}

/* Hand-picked values whose answers are known without any reference. */
static void eltwise_known_values(const eltwise_case *c) {
    char ctx[128];
    snprintf(ctx, sizeof ctx, "%s known values", c->name);
    eltwise_nan_payloads(c);
    if (c->dtype != OPF_F32) {
        return; /* the f32 lines cover the logic; f64 is covered by the reference sweep */
    }
    const float x[8] = {-2.0f, -0.0f, 0.0f, 3.5f, NAN, -INFINITY, INFINITY, FLT_TRUE_MIN};
    const float dy[8] = {10.0f, 11.0f, 12.0f, 13.0f, 14.0f, 15.0f, 16.0f, 17.0f};
    float y[8];
    opf_attr_value attrs[OPF_MAX_ATTRS] = {{.f = 1.0}};
    if (strcmp(c->op, "relu") == 0) {
        const float want[8] = {0.0f, 0.0f, 0.0f, 3.5f, NAN, 0.0f, INFINITY, FLT_TRUE_MIN};
        const void *in[1] = {x};
        void *out[1] = {y};
        call_kernel(c, 8, in, out, attrs);
        CHECK_CLOSE_F32(y, want, 8, 0.0, 0.0, "%s", ctx);
    } else if (strcmp(c->op, "relu_grad") == 0) {
        const float want[8] = {0.0f, 0.0f, 0.0f, 13.0f, 14.0f, 0.0f, 16.0f, 17.0f};
        const void *in[2] = {dy, x};
        void *out[1] = {y};
        call_kernel(c, 8, in, out, attrs);
        CHECK_CLOSE_F32(y, want, 8, 0.0, 0.0, "%s (a = dy, b = x)", ctx);
    } else if (strcmp(c->op, "scale") == 0) {
        const float want[8] = {-6.0f, -0.0f, 0.0f, 10.5f, NAN, -INFINITY, INFINITY, 3 * FLT_TRUE_MIN};
        const void *in[1] = {x};
        void *out[1] = {y};
        attrs[0].f = 3.0;
        call_kernel(c, 8, in, out, attrs);
        CHECK_CLOSE_F32(y, want, 8, 0.0, 0.0, "%s (alpha 3)", ctx);
    } else if (strcmp(c->op, "add") == 0) {
        const float want[8] = {8.0f, 11.0f, 12.0f, 16.5f, NAN, -INFINITY, INFINITY, 17.0f};
        const void *in[2] = {x, dy};
        void *out[1] = {y};
        call_kernel(c, 8, in, out, attrs);
        CHECK_CLOSE_F32(y, want, 8, 0.0, 0.0, "%s", ctx);
    } else if (strcmp(c->op, "mul") == 0 || strcmp(c->op, "mul_grad") == 0) {
        const float want[8] = {-20.0f, -0.0f, 0.0f, 45.5f, NAN, -INFINITY, INFINITY, 17 * FLT_TRUE_MIN};
        const void *in[3] = {x, dy, x};
        void *out[1] = {y};
        call_kernel(c, 8, in, out, attrs);
        CHECK_CLOSE_F32(y, want, 8, 0.0, 0.0, "%s", ctx);
    } else if (strcmp(c->op, "sum_to") == 0) {
        const void *in[2] = {x, dy};
        void *out[1] = {y};
        call_kernel(c, 8, in, out, attrs);
        CHECK_CLOSE_F32(y, x, 8, 0.0, 0.0, "%s", ctx);
    } else if (strcmp(c->op, "gelu") == 0 || strcmp(c->op, "silu") == 0) {
        /* +-0 keep their sign, +inf stays, -inf and NaN give NaN (the frameworks' -inf * 0) */
        const float want[8] = {0, -0.0f, 0.0f, 0, NAN, NAN, INFINITY, 0};
        const void *in[1] = {x};
        void *out[1] = {y};
        for (int form = 0; form < (c->op[0] == 'g' ? 2 : 1); form++) {
            attrs[0].i = form;
            call_kernel(c, 8, in, out, attrs);
            CHECK(signbit(y[1]) && y[1] == 0 && !signbit(y[2]) && y[2] == 0, "%s: gelu(+-0) = %g, %g", ctx, y[1], y[2]);
            CHECK(isnan(y[4]) && isnan(y[5]) && y[6] == INFINITY, "%s: NaN, -inf, +inf give %g %g %g", ctx, y[4], y[5],
                  y[6]);
            /* gelu(-2) = -0.0455 (-0.0454 tanh), silu(-2) = -0.2384; gelu(3.5) = 3.4992 (3.4994 tanh), silu(3.5)
             * = 3.3974 */
            const int g = c->op[0] == 'g';
            CHECK(g ? y[0] < -0.045f && y[0] > -0.046f : y[0] < -0.238f && y[0] > -0.239f, "%s: f(-2) = %g", ctx, y[0]);
            CHECK(g ? y[3] > 3.499f && y[3] < 3.4995f : y[3] > 3.397f && y[3] < 3.398f, "%s: f(3.5) = %g", ctx, y[3]);
            (void)want;
        }
    } else if (strcmp(c->op, "gelu_grad") == 0 || strcmp(c->op, "silu_grad") == 0) {
        const void *in[2] = {dy, x};
        void *out[1] = {y};
        for (int form = 0; form < (c->op[0] == 'g' ? 2 : 1); form++) {
            attrs[0].i = form;
            call_kernel(c, 8, in, out, attrs);
            CHECK(y[1] == 11.0f * 0.5f && y[2] == 6.0f, "%s: f'(+-0) = 1/2: %g %g", ctx, y[1], y[2]);
            CHECK(isnan(y[4]) && isnan(y[5]) && isnan(y[6]), "%s: NaN at NaN, +-inf: %g %g %g", ctx, y[4], y[5], y[6]);
        }
    } else if (strcmp(c->op, "sigmoid") == 0 || strcmp(c->op, "tanh") == 0) {
        const int t = c->op[0] == 't';
        const void *in[1] = {x};
        void *out[1] = {y};
        call_kernel(c, 8, in, out, attrs);
        CHECK(y[2] == (t ? 0.0f : 0.5f) && isnan(y[4]) && y[5] == (t ? -1.0f : 0.0f) && y[6] == 1.0f,
              "%s: f(0), f(NaN), f(-inf), f(inf) = %g %g %g %g", ctx, y[2], y[4], y[5], y[6]);
    }
}

/* Every build (variant) of every elementwise built-in's kernel that this CPU
 * can run, found through the table as an adapter would. */
static void test_eltwise_kernels(void) {
    const opf_op_table *table = opf_builtin_ops();
    if (!CHECK(table != NULL, "built-in table: %s", opf_last_error())) {
        return;
    }
    static const char *const variant_names[OPF_NUM_VARIANTS] = {"base", "avx2", "avx512"};
    static const opf_isa variant_isa[OPF_NUM_VARIANTS] = {OPF_ISA_SCALAR, OPF_ISA_AVX2, OPF_ISA_AVX512};
    for (int64_t i = 0; i < table->num_ops; i++) {
        const opf_op_def *op = table->ops[i];
        if (op->eltwise == NULL) {
            continue;
        }
        int ref = -1;
        for (int k = 0; k < NUM_ELTWISE_REFS; k++) {
            ref = strcmp(eltwise_refs[k].op, op->name) == 0 ? k : ref;
        }
        harness_begin(op->name);
        CHECK(ref >= 0, "elementwise row %s has no reference in test_ukernels.c", op->name);
        CHECK(op->eltwise->num_inputs <= 3 && op->eltwise->num_outputs <= 2,
              "%s: test_ukernels.c handles 3 inputs and 2 outputs", op->name);
        harness_end();
        for (int dt = 0; ref >= 0 && op->eltwise->num_inputs <= 3 && op->eltwise->num_outputs <= 2 && dt < 2; dt++) {
            for (int v = 0; v < OPF_NUM_VARIANTS; v++) {
                opf_eltwise_fn fn = dt == 0 ? op->eltwise->f32[v] : op->eltwise->f64[v];
                char name[96];
                snprintf(name, sizeof name, "%s %s %s", op->name, dt == 0 ? "f32" : "f64", variant_names[v]);
                if (fn == NULL) {
                    continue;
                }
                if (!opf_cpu_supports(variant_isa[v])) {
                    harness_skip(name, "this CPU cannot run %s", variant_names[v]);
                    continue;
                }
                eltwise_case c = {
                    name, dt == 0 ? OPF_F32 : OPF_F64, op->name, op->eltwise->num_inputs, op->eltwise->num_outputs, fn,
                    ref};
                harness_begin(name);
                eltwise_known_values(&c);
                eltwise_test_kernel(&c);
                harness_end();
            }
        }
    }
}

/* ------------------------------------------------------------------------ */
/* The GEMM registry                                                         */
/* ------------------------------------------------------------------------ */

typedef struct gemm_case {
    const char *name;
    opf_isa isa;
    opf_dtype dtype;
    size_t mr, nr;
    opf_f32_gemm_ukernel f32;
    opf_f64_gemm_ukernel f64;
} gemm_case;

#define TEST_DTYPE_f32 OPF_F32
#define TEST_DTYPE_f64 OPF_F64
#define TEST_GEMM_FNS_f32(fn) fn, NULL
#define TEST_GEMM_FNS_f64(fn) NULL, fn

static const gemm_case gemm_cases[] = {
#define OPF_GEMM_UKERNEL(isa_, dt_, mr_, nr_, fn_)                                                                     \
    {#fn_, OPF_ISA_##isa_, TEST_DTYPE_##dt_, mr_, nr_, TEST_GEMM_FNS_##dt_(fn_)},
#include "gemm.inc"
#undef OPF_GEMM_UKERNEL
};
enum { NUM_GEMM_CASES = sizeof gemm_cases / sizeof gemm_cases[0] };

/* Layouts of C: row-major, column-major, and both strides > 1. */
typedef struct c_layout {
    const char *name;
    int64_t rsc, csc;
    size_t cells;  /* size of the buffer holding C and its guard cells */
    size_t origin; /* index of C[0,0] in that buffer */
} c_layout;

static c_layout gemm_c_layout(int which, size_t MR, size_t NR) {
    c_layout l;
    if (which == 0) {
        l.name = "row-major";
        l.rsc = (int64_t)NR + 3;
        l.csc = 1;
        l.cells = (MR + 2) * (NR + 3);
        l.origin = NR + 3 + 1;
    } else if (which == 1) {
        l.name = "column-major";
        l.rsc = 1;
        l.csc = (int64_t)MR + 3;
        l.cells = (NR + 2) * (MR + 3);
        l.origin = MR + 3 + 1;
    } else {
        l.name = "strided";
        l.csc = 2;
        l.rsc = 2 * (int64_t)NR + 5;
        l.cells = (MR + 2) * (2 * NR + 5);
        l.origin = 2 * NR + 5 + 1;
    }
    return l;
}

/* Stores value v of the dtype at element i of p. */
static void put(opf_dtype dt, void *p, size_t i, double v) {
    if (dt == OPF_F32) {
        ((float *)p)[i] = (float)v;
    } else {
        ((double *)p)[i] = v;
    }
}
static double get(opf_dtype dt, const void *p, size_t i) {
    return dt == OPF_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

/* A buffer of `n` elements (n may be 0) ending exactly at the end of its
 * allocation, `misalign` elements past malloc's alignment. */
typedef struct tight {
    unsigned char *base;
    void *p;
} tight;
static tight tight_make(size_t esz, size_t n, size_t misalign) {
    tight t;
    t.base = xmalloc((n + misalign) * esz + (n + misalign == 0 ? 1 : 0));
    t.p = t.base + misalign * esz;
    return t;
}

static void gemm_once(const gemm_case *c, size_t k, size_t mr, size_t nr, int accumulate, int use_bias, int relu,
                      int layout, rng *r) {
    const opf_dtype dt = c->dtype;
    const size_t esz = opf_dtype_size(dt);
    const size_t MR = c->mr, NR = c->nr;
    const size_t misalign = layout == 2 ? 1 : 0; /* the strided layout also gets misaligned panels */
    char ctx[256];
    c_layout cl = gemm_c_layout(layout, MR, NR);
    snprintf(ctx, sizeof ctx, "%s k=%zu mr=%zu nr=%zu accumulate=%d bias=%s relu=%d C %s (rsc %lld, csc %lld)", c->name,
             k, mr, nr, accumulate, use_bias ? "yes" : "NULL", relu, cl.name, (long long)cl.rsc, (long long)cl.csc);

    tight a = tight_make(esz, k * MR, misalign);
    tight b = tight_make(esz, k * NR, misalign);
    tight bias = tight_make(esz, NR, 0);
    /* Initial C block, expected result and tolerance, packed mr x nr. */
    double *cd = xcalloc(mr * nr, sizeof(double));
    double *want = xcalloc(mr * nr, sizeof(double));
    double *tol = xcalloc(mr * nr, sizeof(double));
    double *got = xcalloc(mr * nr, sizeof(double));
    unsigned char *cbuf = xmalloc(cl.cells * esz);
    unsigned char *in_block = xcalloc(cl.cells, 1);

    for (size_t p = 0; p < k; p++) {
        for (size_t i = 0; i < MR; i++) {
            put(dt, a.p, p * MR + i, i < mr ? rng_uniform(r, -1.0, 1.0) : 0.0);
        }
        for (size_t j = 0; j < NR; j++) {
            put(dt, b.p, p * NR + j, j < nr ? rng_uniform(r, -1.0, 1.0) : 0.0);
        }
    }
    for (size_t j = 0; j < NR; j++) {
        put(dt, bias.p, j, rng_uniform(r, -1.0, 1.0));
    }
    memset(cbuf, HARNESS_GUARD_BYTE, cl.cells * esz);
    for (size_t i = 0; i < mr; i++) {
        for (size_t j = 0; j < nr; j++) {
            size_t at = cl.origin + (size_t)((int64_t)i * cl.rsc + (int64_t)j * cl.csc);
            in_block[at] = 1;
            /* Without accumulate C is write-only: a NaN there must not leak. */
            put(dt, cbuf, at, accumulate ? rng_uniform(r, -1.0, 1.0) : NAN);
            cd[i * nr + j] = get(dt, cbuf, at);
        }
    }

    /* The reference, in double from the stored (rounded) values. */
    for (size_t i = 0; i < mr; i++) {
        for (size_t j = 0; j < nr; j++) {
            double acc = accumulate ? cd[i * nr + j] : (use_bias ? get(dt, bias.p, j) : 0.0);
            double mag = fabs(acc);
            for (size_t p = 0; p < k; p++) {
                double term = get(dt, a.p, p * MR + i) * get(dt, b.p, p * NR + j);
                acc += term;
                mag += fabs(term);
            }
            if (relu && acc < 0.0) {
                acc = 0.0;
            }
            want[i * nr + j] = acc;
            tol[i * nr + j] = ref_dot_tolerance(k, ref_eps(dt == OPF_F64), mag);
        }
    }

    void *cptr = cbuf + cl.origin * esz;
    if (dt == OPF_F32) {
        c->f32(k, a.p, 1, (int64_t)c->mr, b.p, (int64_t)c->nr, cptr, cl.rsc, cl.csc, mr, nr, use_bias ? bias.p : NULL,
               accumulate, relu);
    } else {
        c->f64(k, a.p, 1, (int64_t)c->mr, b.p, (int64_t)c->nr, cptr, cl.rsc, cl.csc, mr, nr, use_bias ? bias.p : NULL,
               accumulate, relu);
    }

    for (size_t i = 0; i < mr; i++) {
        for (size_t j = 0; j < nr; j++) {
            got[i * nr + j] = get(dt, cbuf, cl.origin + (size_t)((int64_t)i * cl.rsc + (int64_t)j * cl.csc));
        }
    }
    CHECK_CLOSE_TOL(got, want, tol, mr * nr, "%s", ctx);
    for (size_t cell = 0; cell < cl.cells; cell++) {
        if (!in_block[cell] && !CHECK_BYTES(cbuf + cell * esz, esz, HARNESS_GUARD_BYTE,
                                            "%s: C cell %zu outside the mr x nr block", ctx, cell)) {
            break;
        }
    }

    free(a.base);
    free(b.base);
    free(bias.base);
    free(cd);
    free(want);
    free(tol);
    free(got);
    free(cbuf);
    free(in_block);
}

static void gemm_test_kernel(const gemm_case *c) {
    static const size_t ks[] = {0, 1, 3, 4, 5, 17};
    rng r = rng_seed(0x6E33u);
    CHECK(c->mr >= 1 && c->nr >= 1, "%s: MR %zu, NR %zu", c->name, c->mr, c->nr);
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
        for (size_t mr = 1; mr <= c->mr; mr++) {
            for (size_t nr = 1; nr <= c->nr; nr++) {
                for (int flags = 0; flags < 8; flags++) {
                    for (int layout = 0; layout < 3; layout++) {
                        gemm_once(c, ks[ki], mr, nr, flags & 1, (flags >> 1) & 1, (flags >> 2) & 1, layout, &r);
                        if (harness_test_failures() > 50) {
                            return;
                        }
                    }
                }
            }
        }
    }
}

/* A product worked out by hand: A = [[1,2],[3,4]], B = [[5,6],[7,8]],
 * A·B = [[19,22],[43,50]], bias [1,-100], relu -> [[20,0],[44,0]]; the
 * top-left min(MR,2) x min(NR,2) block of it for smaller kernels. */
static void gemm_known_values(const gemm_case *c) {
    const opf_dtype dt = c->dtype;
    const size_t esz = opf_dtype_size(dt);
    const size_t MR = c->mr, NR = c->nr, k = 2;
    const size_t mr = MR < 2 ? MR : 2, nr = NR < 2 ? NR : 2;
    const double A[2][2] = {{1, 2}, {3, 4}}, B[2][2] = {{5, 6}, {7, 8}}, bias2[2] = {1, -100};
    const double want[4] = {20, 0, 44, 0};
    void *a = xcalloc(k * MR, esz), *b = xcalloc(k * NR, esz), *bias = xcalloc(NR, esz);
    for (size_t p = 0; p < k; p++) {
        for (size_t i = 0; i < mr; i++) {
            put(dt, a, p * MR + i, A[i][p]);
        }
        for (size_t j = 0; j < nr; j++) {
            put(dt, b, p * NR + j, B[p][j]);
        }
    }
    for (size_t j = 0; j < nr; j++) {
        put(dt, bias, j, bias2[j]);
    }
    void *cmat = xcalloc(4, esz);
    for (size_t i = 0; i < 4; i++) {
        put(dt, cmat, i, -1.0);
    }
    if (dt == OPF_F32) {
        c->f32(k, a, 1, (int64_t)c->mr, b, (int64_t)c->nr, cmat, 2, 1, mr, nr, bias, 0, 1);
    } else {
        c->f64(k, a, 1, (int64_t)c->mr, b, (int64_t)c->nr, cmat, 2, 1, mr, nr, bias, 0, 1);
    }
    for (size_t i = 0; i < 2; i++) {
        for (size_t j = 0; j < 2; j++) {
            double expect = i < mr && j < nr ? want[i * 2 + j] : -1.0;
            double v = get(dt, cmat, i * 2 + j);
            CHECK(v == expect, "%s: [[1,2],[3,4]]·[[5,6],[7,8]] + [1,-100], relu: C[%zu][%zu] = %g, want %g", c->name,
                  i, j, v, expect);
        }
    }
    free(a);
    free(b);
    free(bias);
    free(cmat);
}

static void test_gemm_registry(void) {
    for (size_t i = 0; i < NUM_GEMM_CASES; i++) {
        const gemm_case *c = &gemm_cases[i];
        if (!opf_cpu_supports(c->isa)) {
            harness_skip(c->name, "this CPU cannot run ISA level %s", opf_isa_name(c->isa));
            continue;
        }
        harness_begin(c->name);
        gemm_known_values(c);
        gemm_test_kernel(c);
        harness_end();
    }
}

/* ------------------------------------------------------------------------ */
/* Streaming copies                                                          */
/* ------------------------------------------------------------------------ */

typedef struct copy_case {
    const char *name;
    opf_isa isa;
    opf_copy_ukernel fn;
} copy_case;

static const copy_case copy_cases[] = {
#define OPF_COPY_UKERNEL(isa, fn) {#fn, OPF_ISA_##isa, fn},
#include "copy.inc"
#undef OPF_COPY_UKERNEL
};

/* Every registered copy, at every offset of source and destination within
 * a line and lengths around its blocks, with and without a prefetch range
 * (the range's contents must not matter, its address may be anywhere: a
 * prefetch never faults): the destination holds the source's bytes, and
 * the bytes around it are untouched. */
static void test_copy_registry(void) {
    /* (aligned_alloc takes sizes that are multiples of 64) */
    enum { MAX = 1216, PAD = 64, DST_BYTES = MAX + 128 + 2 * PAD };
    unsigned char *src = aligned_alloc(64, MAX + 128), *dst = aligned_alloc(64, DST_BYTES);
    unsigned char *pf = aligned_alloc(64, 4096);
    const size_t lengths[] = {0, 1, 31, 63, 64, 65, 127, 128, 255, 256, 257, 511, 700, 1024, 1100};
    for (size_t c = 0; c < sizeof copy_cases / sizeof copy_cases[0]; c++) {
        const copy_case *k = &copy_cases[c];
        if (!opf_cpu_supports(k->isa)) {
            harness_skip(k->name, "this CPU cannot run ISA level %s", opf_isa_name(k->isa));
            continue;
        }
        harness_begin(k->name);
        int failures = 0;
        for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
            for (size_t so = 0; so < 64; so += 7) {
                for (size_t d0 = 0; d0 < 64; d0 += 5) {
                    const size_t len = lengths[li];
                    for (size_t i = 0; i < len; i++) {
                        src[so + i] = (unsigned char)(i * 31 + so + 1);
                    }
                    memset(dst, 0xA5, DST_BYTES);
                    unsigned char *d = dst + PAD + d0;
                    /* prefetch: none, a range of the page, or one past any mapping */
                    const int mode = (int)((li + so + d0) % 3);
                    const void *at = mode == 0   ? NULL
                                     : mode == 1 ? (const void *)(pf + d0)
                                                 : (const void *)(uintptr_t)64;
                    const size_t pf_bytes = mode == 0 ? 0 : mode == 1 ? 4096 - d0 : 4096;
                    k->fn(len, src + so, d, at, pf_bytes, (int)(len & 1));
                    int ok = memcmp(d, src + so, len) == 0;
                    for (size_t i = 0; i < PAD + d0; i++) {
                        ok &= dst[i] == 0xA5;
                    }
                    for (size_t i = PAD + d0 + len; i < DST_BYTES; i++) {
                        ok &= dst[i] == 0xA5;
                    }
                    if (!ok && failures++ < 5) {
                        CHECK(0, "%s: %zu bytes from offset %zu to offset %zu: wrong bytes", k->name, len, so, d0);
                    }
                }
            }
        }
        CHECK(failures == 0, "%s: %d copies wrong", k->name, failures);
        harness_end();
    }
    free(src);
    free(dst);
    free(pf);
}

/* ------------------------------------------------------------------------ */
/* Dispatch                                                                  */
/* ------------------------------------------------------------------------ */

TEST(test_dispatch_levels) {
    CHECK(opf_cpu_supports(OPF_ISA_SCALAR), "scalar must always run");
    CHECK(opf_kernels_for(OPF_ISA_SCALAR) != NULL, "no scalar table");
    for (int isa = OPF_ISA_SCALAR; isa <= OPF_ISA_NEON; isa++) {
        const opf_kernels *t = opf_kernels_for((opf_isa)isa);
        CHECK((t != NULL) == (opf_cpu_supports((opf_isa)isa) != 0), "isa %s: table %p, cpu supports %d",
              opf_isa_name((opf_isa)isa), (const void *)t, opf_cpu_supports((opf_isa)isa));
        if (t == NULL) {
            continue;
        }
        CHECK(t->isa <= (opf_isa)isa || isa == OPF_ISA_NEON, "table for %s claims level %s", opf_isa_name((opf_isa)isa),
              opf_isa_name(t->isa));
        CHECK(t->f32_gemm.ukernel != NULL && t->f32_gemm.mr >= 1 && t->f32_gemm.nr >= 1, "isa %s: f32 gemm config",
              opf_isa_name((opf_isa)isa));
        CHECK(t->f64_gemm.ukernel != NULL && t->f64_gemm.mr >= 1 && t->f64_gemm.nr >= 1, "isa %s: f64 gemm config",
              opf_isa_name((opf_isa)isa));
    }
    CHECK(opf_kernels_for((opf_isa)99) == NULL, "out-of-range level");
    const opf_kernels *active = opf_kernels_get();
    CHECK(active != NULL, "no active table");
    if (active != NULL) {
        CHECK(active->isa == opf_get_isa(), "active table level %s, opf_get_isa %s", opf_isa_name(active->isa),
              opf_isa_name(opf_get_isa()));
    }
    const char *forced = getenv("OPFORGE_ISA");
    if (forced != NULL && strcmp(forced, "scalar") == 0) {
        CHECK(opf_get_isa() == OPF_ISA_SCALAR, "OPFORGE_ISA=scalar but level is %s", opf_isa_name(opf_get_isa()));
    }
    if (forced != NULL && strcmp(forced, "portable") == 0) {
        CHECK(opf_get_isa() == OPF_ISA_PORTABLE, "OPFORGE_ISA=portable but level is %s", opf_isa_name(opf_get_isa()));
    }
    if (forced == NULL) {
        /* Unforced, the level in use is the highest this CPU runs (neon on aarch64). */
        opf_isa best = OPF_ISA_PORTABLE;
        for (int isa = OPF_ISA_AVX2; isa <= OPF_ISA_NEON; isa++) {
            if (opf_cpu_supports((opf_isa)isa)) {
                best = (opf_isa)isa;
            }
        }
        CHECK(opf_get_isa() == best, "default level is %s, the best this CPU runs is %s", opf_isa_name(opf_get_isa()),
              opf_isa_name(best));
    }
    CHECK(strcmp(opf_isa_name(OPF_ISA_SCALAR), "scalar") == 0 &&
              strcmp(opf_isa_name(OPF_ISA_PORTABLE), "portable") == 0 &&
              strcmp(opf_isa_name(OPF_ISA_AVX2), "avx2") == 0 && strcmp(opf_isa_name(OPF_ISA_AVX512), "avx512") == 0 &&
              strcmp(opf_isa_name(OPF_ISA_NEON), "neon") == 0,
          "opf_isa_name");
}

/* The GEMM configs of every table, run through the same test as the registry
 * lines (a config with the wrong MR/NR for its kernel fails here). */
TEST(test_dispatch_gemm_configs) {
    for (int isa = OPF_ISA_SCALAR; isa <= OPF_ISA_NEON; isa++) {
        const opf_kernels *t = opf_kernels_for((opf_isa)isa);
        if (t == NULL || t->f32_gemm.ukernel == NULL || t->f64_gemm.ukernel == NULL) {
            continue;
        }
        char name32[64], name64[64];
        snprintf(name32, sizeof name32, "f32 gemm config of table %s", opf_isa_name((opf_isa)isa));
        snprintf(name64, sizeof name64, "f64 gemm config of table %s", opf_isa_name((opf_isa)isa));
        gemm_case c32 = {name32, (opf_isa)isa, OPF_F32, t->f32_gemm.mr, t->f32_gemm.nr, t->f32_gemm.ukernel, NULL};
        gemm_case c64 = {name64, (opf_isa)isa, OPF_F64, t->f64_gemm.mr, t->f64_gemm.nr, NULL, t->f64_gemm.ukernel};
        rng r = rng_seed(7);
        /* A lighter sweep than the registry's: full blocks and 1x1, k = 5. */
        for (int flags = 0; flags < 8; flags++) {
            gemm_once(&c32, 5, c32.mr, c32.nr, flags & 1, (flags >> 1) & 1, (flags >> 2) & 1, 0, &r);
            gemm_once(&c32, 5, 1, 1, flags & 1, (flags >> 1) & 1, (flags >> 2) & 1, 1, &r);
            gemm_once(&c64, 5, c64.mr, c64.nr, flags & 1, (flags >> 1) & 1, (flags >> 2) & 1, 0, &r);
            gemm_once(&c64, 5, 1, 1, flags & 1, (flags >> 1) & 1, (flags >> 2) & 1, 1, &r);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* The exponential-and-sum kernels (expsum.inc)                              */
/* ------------------------------------------------------------------------ */

typedef struct exp_sum_case {
    const char *name;
    opf_isa isa;
    opf_exp_sum_ukernel fn;
} exp_sum_case;

static const exp_sum_case exp_sum_cases[] = {
#define OPF_EXP_SUM_UKERNEL(isa, fn) {#fn, OPF_ISA_##isa, fn},
#include "expsum.inc"
#undef OPF_EXP_SUM_UKERNEL
    {NULL, OPF_ISA_SCALAR, NULL}, /* (a registry may be empty on this architecture) */
};

/* |got - e^d| in ulps of e^d (of FLT_MIN's below it) */
static double exp_ulps(float got, float d) {
    const long double want = expl((long double)d);
    const long double ulp = ldexpl(1.0L, ilogbl(want > FLT_MIN ? want : (long double)FLT_MIN) - 23);
    return (double)(fabsl((long double)got - want) / ulp);
}

/* Every registered kernel: each element against expl within 1.07 ulp over
 * the floats of [ln FLT_MIN, 88] (a sample of their bit patterns, every
 * 193rd; shifted rows, so x - shift is rounded as the kernel rounds it),
 * 0 below, +inf above, NaN for NaN; the partial sums against the stored
 * terms added lane by lane in order, the same without y; only the whole
 * blocks done, nothing past them stored; and every variant the same bits
 * as the first. */
static void test_exp_sum_registry(void) {
    const float least = OPF_EXP_SUM_LEAST, most = OPF_EXP_SUM_MOST;
    /* the inputs: the sample, then the edges and the specials, padded to blocks of 32 plus a tail of 5 */
    const uint32_t step = harness_slow() ? 7919 : 193;
    const uint32_t NEG_FIRST = 0x80000000u, NEG_LAST = 0xc2aeac50u, POS_LAST = 0x42b00f34u; /* bit patterns */
    /* the samples of -0 down to just past ln FLT_MIN and of +0 up to just past 88.03, the specials, the padding */
    const size_t cap = (NEG_LAST - NEG_FIRST) / step + 1 + POS_LAST / step + 1 + 128;
    size_t n = 0;
    float *x = malloc(cap * sizeof *x), *y = malloc((cap + 32) * sizeof *y), *first = malloc(cap * sizeof *first);
    for (uint32_t b = NEG_FIRST; b <= NEG_LAST; b += step) {
        memcpy(&x[n++], &b, sizeof b);
    }
    for (uint32_t b = 0; b <= POS_LAST; b += step) {
        memcpy(&x[n++], &b, sizeof b);
    }
    const float specials[] = {least,
                              nextafterf(least, 0.0f),
                              nextafterf(least, -INFINITY),
                              -100.0f,
                              -INFINITY,
                              NAN,
                              -NAN,
                              most,
                              nextafterf(most, INFINITY),
                              89.0f,
                              1e30f,
                              INFINITY,
                              0.0f,
                              -0.0f};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) {
        x[n++] = specials[i];
    }
    const size_t filled = n;
    n = (n + 31) / 32 * 32 + 5; /* whole blocks and a tail of 5, the padding exactly representable */
    for (size_t i = filled; i < n; i++) {
        x[i] = -(float)(i % 16);
    }
    /* the inputs within the bound 88.03: those above it replaced by -1 */
    float *within = malloc(n * sizeof *within), *bounded_y = malloc((n + 32) * sizeof *bounded_y);
    for (size_t i = 0; i < n; i++) {
        within[i] = x[i] > most ? -1.0f : x[i];
    }
    int have_first = 0;
    for (size_t c = 0; exp_sum_cases[c].name != NULL; c++) {
        const exp_sum_case *k = &exp_sum_cases[c];
        if (!opf_cpu_supports(k->isa)) {
            harness_skip(k->name, "this CPU cannot run ISA level %s", opf_isa_name(k->isa));
            continue;
        }
        harness_begin(k->name);
        for (size_t i = 0; i < n + 32; i++) {
            y[i] = -1.0f;
        }
        float acc[32], acc2[32];
        for (int j = 0; j < 32; j++) {
            acc[j] = acc2[j] = (float)j; /* the kernel adds to what is there */
        }
        const int64_t done = k->fn((int64_t)n, x, 0.0f, INFINITY, y, 4096, acc);
        CHECK(done == (int64_t)(n - n % 32), "%s: did %lld of %zu elements", k->name, (long long)done, n);
        int bad = 0;
        double worst = 0;
        for (size_t i = 0; i < (size_t)done; i++) {
            const float d = x[i], e = y[i];
            int ok;
            if (isnan(d)) {
                ok = isnan(e);
            } else if (d < least) {
                ok = e == 0.0f && !signbit(e);
            } else if (d > most) {
                ok = isinf(e) && e > 0;
            } else {
                const double u = exp_ulps(e, d);
                worst = u > worst ? u : worst;
                ok = u <= 1.07;
            }
            if (!ok && bad++ < 5) {
                CHECK(0, "%s: exp(%a) = %a (%.9g)", k->name, (double)d, (double)e, (double)e);
            }
        }
        CHECK(bad == 0, "%s: %d wrong terms (largest error %.3f ulp)", k->name, bad, worst);
        for (size_t i = (size_t)done; i < n + 32; i++) {
            bad += y[i] != -1.0f;
        }
        CHECK(bad == 0, "%s: stored past the blocks it did", k->name);
        /* the partial sums: the stored terms, lane by lane, in order (the NaN and inf lanes excepted) */
        for (int j = 0; j < 32; j++) {
            float want = (float)j;
            for (size_t i = (size_t)j; i < (size_t)done; i += 32) {
                want += y[i];
            }
            CHECK(memcmp(&want, &acc[j], sizeof want) == 0 || (isnan(want) && isnan(acc[j])),
                  "%s: partial sum %d: %a, the terms add up to %a", k->name, j, (double)acc[j], (double)want);
        }
        const int64_t done2 = k->fn((int64_t)n, x, 0.0f, INFINITY, NULL, 0, acc2);
        CHECK(done2 == done && memcmp(acc, acc2, sizeof acc) == 0, "%s: other partial sums without y", k->name);
        /* a shifted row: x - shift rounded first, as the kernel does */
        const float shift = 3.25f;
        float z[96], w[96], a3[32] = {0};
        for (int i = 0; i < 96; i++) {
            z[i] = shift - (float)i * 0.37f;
        }
        k->fn(96, z, shift, INFINITY, w, 0, a3);
        for (int i = 0; i < 96; i++) {
            CHECK(exp_ulps(w[i], z[i] - shift) <= 1.07, "%s: exp(%a - %a) = %a", k->name, (double)z[i], (double)shift,
                  (double)w[i]);
        }
        /* in place (y the same array as x), and from an address off any vector's alignment */
        float in_place[97], a4[32] = {0};
        memcpy(in_place + 1, z, sizeof z);
        k->fn(96, in_place + 1, shift, INFINITY, in_place + 1, 0, a4);
        CHECK_SAME_BITS(in_place + 1, w, 96, sizeof *w, "%s: in place", k->name);
        CHECK_SAME_BITS(a4, a3, 32, sizeof *a3, "%s: partial sums in place", k->name);
        /* a block whose only d above the largest finite e^d is its last element, every
         * other one NaN (a kernel looks for such d once a block, NaN ignored) */
        float nan_block[32], e_block[32], a5[32] = {0};
        for (int i = 0; i < 32; i++) {
            nan_block[i] = NAN;
        }
        nan_block[31] = 100.0f;
        k->fn(32, nan_block, 0.0f, INFINITY, e_block, 0, a5);
        CHECK(isinf(e_block[31]) && e_block[31] > 0, "%s: exp(100) after 31 NaN = %a", k->name, (double)e_block[31]);
        CHECK(isnan(e_block[0]) && isnan(e_block[30]), "%s: exp(NaN) = %a", k->name, (double)e_block[0]);
        /* and its first element, before 31 NaN (the maximum starts from the first vector) */
        nan_block[31] = NAN;
        nan_block[0] = 100.0f;
        k->fn(32, nan_block, 0.0f, INFINITY, e_block, 0, a5);
        CHECK(isinf(e_block[0]) && e_block[0] > 0, "%s: exp(100) before 31 NaN = %a", k->name, (double)e_block[0]);
        CHECK(isnan(e_block[1]) && isnan(e_block[31]), "%s: exp(NaN) = %a", k->name, (double)e_block[31]);
        /* with a bound: the same bits where x is within it, the same look for overflow where the
         * bound is too far above the shift (or NaN), which says nothing */
        float bounded_e[96], a6[32] = {0};
        k->fn(96, z, shift, shift, bounded_e, 0, a6);
        CHECK_SAME_BITS(bounded_e, w, 96, sizeof *w, "%s: bounded by the shift", k->name);
        CHECK_SAME_BITS(a6, a3, 32, sizeof *a3, "%s: partial sums bounded by the shift", k->name);
        const float loose[] = {most + 0.5f, INFINITY, NAN};
        for (size_t b = 0; b < sizeof loose / sizeof loose[0]; b++) {
            nan_block[0] = 100.0f;
            k->fn(32, nan_block, 0.0f, loose[b], e_block, 0, a5);
            CHECK(isinf(e_block[0]) && e_block[0] > 0, "%s: exp(100) with the bound %g = %a", k->name, (double)loose[b],
                  (double)e_block[0]);
        }
        /* the whole sample bounded by its largest finite d: the same terms wherever d is at most 88.03 */
        for (size_t i = 0; i < n + 32; i++) {
            bounded_y[i] = -1.0f;
        }
        float acc3[32] = {0};
        const int64_t done3 = k->fn((int64_t)n, within, 0.0f, most, bounded_y, 0, acc3);
        CHECK(done3 == done, "%s: bounded: did %lld of %zu elements", k->name, (long long)done3, n);
        int differ = 0;
        for (size_t i = 0; i < (size_t)done3; i++) {
            const float want = within[i] == x[i] ? y[i] : NAN; /* (the clamped ones: checked below) */
            differ += !isnan(want) && memcmp(&want, &bounded_y[i], sizeof want) != 0;
        }
        CHECK(differ == 0, "%s: bounded: %d terms differ from the checked kernel's", k->name, differ);
        if (!have_first) {
            memcpy(first, y, (size_t)done * sizeof *y);
            have_first = 1;
        } else {
            CHECK_SAME_BITS(y, first, (size_t)done, sizeof *y, "%s: the first variant's terms", k->name);
        }
        harness_end();
    }
    /* the public entry: 0 for fewer than 32 elements, else the level's kernel (none at some levels) */
    harness_begin("opf_exp_sum_blocks_f32");
    float acc[32] = {0};
    CHECK(opf_exp_sum_blocks_f32(31, x, 0.0f, y, 0, acc) == 0, "31 elements: no whole block");
    const int64_t done = opf_exp_sum_blocks_f32((int64_t)n, x, 0.0f, y, 0, acc);
    CHECK(done == (opf_kernels_get()->exp_sum_f32 != NULL ? (int64_t)(n - n % 32) : 0), "did %lld at level %s",
          (long long)done, opf_isa_name(opf_get_isa()));
    float acc_b[32] = {0}, e_b[32], tall[32];
    for (int i = 0; i < 32; i++) {
        tall[i] = i == 7 ? 100.0f : -(float)i;
    }
    const int64_t done_b = opf_exp_sum_blocks_bounded_f32(32, tall, 0.0f, INFINITY, e_b, 0, acc_b);
    CHECK(done_b == 0 || (isinf(e_b[7]) && e_b[7] > 0), "bounded by +inf: exp(100) = %a", (double)e_b[7]);
    CHECK(opf_exp_sum_blocks_bounded_f32(31, x, 0.0f, 0.0f, y, 0, acc_b) == 0, "bounded, 31 elements: no block");
    harness_end();
    free(x);
    free(y);
    free(first);
    free(within);
    free(bounded_y);
}

/* ------------------------------------------------------------------------ */
/* The one-pass exponential kernels (expsumbelow.inc)                       */
/* ------------------------------------------------------------------------ */

typedef struct exp_sum_below_case {
    const char *name;
    opf_isa isa;
    opf_exp_sum_below_ukernel fn;
} exp_sum_below_case;

static const exp_sum_below_case exp_sum_below_cases[] = {
#define OPF_EXP_SUM_BELOW_UKERNEL(isa, fn) {#fn, OPF_ISA_##isa, fn},
#include "expsumbelow.inc"
#undef OPF_EXP_SUM_BELOW_UKERNEL
    {NULL, OPF_ISA_SCALAR, NULL},
};

/* The exponential kernel of `isa` (expsum.inc), NULL if none. */
static opf_exp_sum_ukernel exp_sum_of(opf_isa isa) {
    for (size_t c = 0; exp_sum_cases[c].name != NULL; c++) {
        if (exp_sum_cases[c].isa == isa) {
            return exp_sum_cases[c].fn;
        }
    }
    return NULL;
}

/* Each kernel the CPU runs with limit +inf (every block, the sums telling
 * whether a guessed shift held): on x within OPF_EXP_SUM_MOST of the shift,
 * the plain kernel's terms and partial sums, a waiting row's 23 lines all
 * stored a share a block; then every float d of (OPF_EXP_SUM_MOST, 88.75]
 * and a sample of those above it up to +inf, and NaN: e above 2^127 or not
 * finite (so is the sum that holds it), with d of [80, OPF_EXP_SUM_MOST]
 * (a sample) in the plain kernel's bits. */
static void test_exp_sum_every_block(void) {
    enum { N = 32 * 12 + 7, LINES = 23 };
    const float shift = 3.0f;
    float *x = xcalloc(N, sizeof(float)), *y = xcalloc(N + 32, sizeof(float)), *want = xcalloc(N, sizeof(float));
    float *src = aligned_alloc(64, 64 * LINES), *dst = aligned_alloc(64, 64 * LINES);
    rng r = rng_seed(79);
    fill_uniform_f32(&r, x, N, -40, 22);
    fill_uniform_f32(&r, src, 16 * LINES, -1, 1);
    for (size_t c = 0; exp_sum_below_cases[c].name != NULL; c++) {
        const exp_sum_below_case *k = &exp_sum_below_cases[c];
        const opf_exp_sum_ukernel plain = exp_sum_of(k->isa);
        if (!opf_cpu_supports(k->isa) || plain == NULL) {
            continue;
        }
        harness_begin(k->name);
        const int64_t blocks = N - N % 32;
        float acc[32] = {0}, acc_want[32] = {0};
        plain(N, x, shift, INFINITY, want, 0, acc_want);
        opf_row_later w = {.dst = dst, .src = src, .factor = 0.5, .len = 16 * LINES, .lines = LINES, .elem = 4};
        opf_earlier_row plan = {
            .w = &w, .dst = (char *)dst, .src = (const char *)src, .left = LINES, .share = 2, .factor = 0.5, .elem = 4};
        CHECK(k->fn(N, x, shift, INFINITY, y, 0, acc, &plan) == blocks, "%s: every block", k->name);
        CHECK_SAME_BITS(y, want, (size_t)blocks, sizeof(float), "%s: the terms", k->name);
        CHECK_SAME_BITS(acc, acc_want, 32, sizeof(float), "%s: the partial sums", k->name);
        int bad = 0;
        for (int i = 0; i < 16 * LINES && !bad; i++) {
            bad = !CHECK(dst[i] == src[i] * 0.5f, "%s: dst[%d] = %g, expected %g", k->name, i, (double)dst[i],
                         (double)(src[i] * 0.5f));
        }
        CHECK(plan.left == 0 && w.stored == LINES, "%s: %lld lines left", k->name, (long long)plan.left);
        /* d above OPF_EXP_SUM_MOST: every float up to 88.75, then steps of 2^15 of them to +inf; NaN last */
        uint32_t bits, last;
        const float from = nextafterf(OPF_EXP_SUM_MOST, INFINITY), dense_to = 88.75f, top = INFINITY;
        memcpy(&bits, &from, 4);
        memcpy(&last, &top, 4);
        int64_t checked = 0;
        for (bad = 0; bits <= last && !bad;) {
            float d[32], e[32], a[32] = {0};
            for (int i = 0; i < 32; i++) {
                const uint32_t b = bits <= last ? bits : 0x7fc00000u; /* (past +inf: NaN) */
                memcpy(&d[i], &b, 4);
                bits += d[i] < dense_to ? 1u : 1u << 15;
            }
            k->fn(32, d, 0.0f, INFINITY, e, 0, a, NULL);
            for (int i = 0; i < 32 && !bad; i++, checked++) {
                bad = !CHECK(e[i] > 0x1p127f || !isfinite(e[i]), "%s: d = %a gave e = %a (at most 2^127, finite)",
                             k->name, (double)d[i], (double)e[i]);
                bad |= !CHECK(a[i] > 0x1p127f || !isfinite(a[i]), "%s: d = %a: partial sum %a", k->name, (double)d[i],
                              (double)a[i]);
            }
        }
        CHECK(checked > 80000, "%s: %lld values of d checked", k->name, (long long)checked);
        /* and below it, the plain kernel's bits */
        const float low = 80.0f;
        memcpy(&bits, &low, 4);
        for (float d[32], e[32], e_want[32], a[32], a_want[32];;) {
            for (int i = 0; i < 32; i++) {
                memcpy(&d[i], &bits, 4);
                d[i] = d[i] < OPF_EXP_SUM_MOST ? d[i] : OPF_EXP_SUM_MOST;
                bits += 97;
                a[i] = a_want[i] = 0;
            }
            k->fn(32, d, 0.0f, INFINITY, e, 0, a, NULL);
            plain(32, d, 0.0f, INFINITY, e_want, 0, a_want);
            if (!CHECK_SAME_BITS(e, e_want, 32, sizeof(float), "%s: e of d in [80, 88.03]", k->name) ||
                d[31] == OPF_EXP_SUM_MOST) {
                break;
            }
        }
        harness_end();
    }
    free(x), free(y), free(want), free(src), free(dst);
}

/* Each kernel the CPU runs, shift 3 and limit 20: on x within the limit
 * (one x exactly at shift + limit) every whole block, with the same terms
 * and partial sums as the level's opf_exp_sum_ukernel; a block with an x
 * above the limit, or a NaN first element, stops it there (nothing stored
 * past the blocks done), with a waiting row of 23 lines stored one line a
 * block done (y = src * factor, streamed; the lines after those untouched;
 * the plan's record moved on); a limit above OPF_EXP_SUM_MOST does
 * nothing; then the public entry at the level in use, and with a NaN shift
 * or limit, or no x or acc (nothing done). */
static void test_exp_sum_below_registry(void) {
    enum { N = 32 * 12 + 7, LINES = 23 };
    const float shift = 3.0f, limit = 20.0f;
    float *x = xcalloc(N, sizeof(float)), *y = xcalloc(N + 32, sizeof(float)), *want = xcalloc(N, sizeof(float));
    float *src = aligned_alloc(64, 64 * LINES), *dst = aligned_alloc(64, 64 * LINES);
    rng r = rng_seed(73);
    fill_uniform_f32(&r, x, N, -40, 22);
    x[32 * 4 + 9] = shift + limit;
    fill_uniform_f32(&r, src, 16 * LINES, -1, 1);
    for (size_t c = 0; exp_sum_below_cases[c].name != NULL; c++) {
        const exp_sum_below_case *k = &exp_sum_below_cases[c];
        const opf_exp_sum_ukernel plain = exp_sum_of(k->isa);
        if (!opf_cpu_supports(k->isa) || !CHECK(plain != NULL, "%s: no exponential kernel of its level", k->name)) {
            continue;
        }
        harness_begin(k->name);
        float acc[32] = {0}, acc_want[32] = {0};
        const int64_t blocks = N - N % 32;
        CHECK(plain(N, x, shift, INFINITY, want, 0, acc_want) == blocks, "%s: the plain kernel's blocks", k->name);
        CHECK(k->fn(N, x, shift, limit, y, 0, acc, NULL) == blocks, "%s: x within the limit: every block", k->name);
        CHECK_SAME_BITS(y, want, (size_t)blocks, sizeof(float), "%s: the terms", k->name);
        CHECK_SAME_BITS(acc, acc_want, 32, sizeof(float), "%s: the partial sums", k->name);
        for (int stop = 0; stop < 2; stop++) {
            float xs[N];
            memcpy(xs, x, sizeof xs);
            const int64_t at = stop ? 32 * 9 : 32 * 6; /* the block that stops it */
            if (stop) {
                xs[at] = NAN;
            } else {
                xs[at + 17] = nextafterf(shift + limit, INFINITY);
            }
            for (int i = 0; i < N + 32; i++) {
                y[i] = 7.0f;
            }
            for (int i = 0; i < 16 * LINES; i++) {
                dst[i] = 7.0f;
            }
            opf_row_later w = {.dst = dst, .src = src, .factor = 0.25, .len = 16 * LINES, .lines = LINES, .elem = 4};
            opf_earlier_row plan = {.w = &w,
                                    .dst = (char *)dst,
                                    .src = (const char *)src,
                                    .left = LINES,
                                    .share = 1,
                                    .factor = 0.25,
                                    .elem = 4};
            float a[32] = {0};
            const int64_t done = k->fn(N, xs, shift, limit, y, 0, a, &plan);
            CHECK(done == at, "%s, %s: stopped at %lld, expected %lld", k->name, stop ? "NaN" : "above the limit",
                  (long long)done, (long long)at);
            CHECK_SAME_BITS(y, want, (size_t)at, sizeof(float), "%s: the terms before the stop", k->name);
            CHECK(y[at] == 7.0f && y[N] == 7.0f, "%s: stored past the blocks done", k->name);
            const int64_t stored = at / 32 < LINES ? at / 32 : LINES;
            int bad = 0;
            for (int i = 0; i < 16 * LINES && !bad; i++) {
                const float expect = i < 16 * stored ? src[i] * 0.25f : 7.0f;
                bad = !CHECK(dst[i] == expect, "%s: dst[%d] = %g, expected %g", k->name, i, (double)dst[i],
                             (double)expect);
            }
            CHECK(plan.left == LINES - stored && w.stored == stored && plan.dst == (char *)(dst + 16 * stored),
                  "%s: the plan left %lld lines, recorded %lld stored", k->name, (long long)plan.left,
                  (long long)w.stored);
        }
        float a2[32] = {0};
        CHECK(k->fn(N, x, shift, OPF_EXP_SUM_MOST * 2, y, 0, a2, NULL) == 0, "%s: a limit above 88.03", k->name);
        harness_end();
    }
    harness_begin("opf_exp_sum_blocks_below_f32");
    float acc[32] = {0};
    CHECK(opf_exp_sum_blocks_below_f32(31, x, shift, limit, y, 0, acc, NULL) == 0, "31 elements: no whole block");
    CHECK(opf_exp_sum_blocks_below_f32(N, x, NAN, limit, y, 0, acc, NULL) == 0, "a NaN shift: no block");
    CHECK(opf_exp_sum_blocks_below_f32(N, x, shift, NAN, y, 0, acc, NULL) == 0, "a NaN limit: no block");
    CHECK(opf_exp_sum_blocks_below_f32(N, NULL, shift, limit, y, 0, acc, NULL) == 0 &&
              opf_exp_sum_blocks_below_f32(N, x, shift, limit, y, 0, NULL, NULL) == 0,
          "no x, no acc: nothing done");
    const int64_t done = opf_exp_sum_blocks_below_f32(N, x, shift, limit, y, 0, acc, NULL);
    CHECK(done == (opf_kernels_get()->exp_sum_below_f32 != NULL ? (int64_t)(N - N % 32) : 0), "did %lld at level %s",
          (long long)done, opf_isa_name(opf_get_isa()));
    harness_end();
    free(x), free(y), free(want), free(src), free(dst);
}

/* ------------------------------------------------------------------------ */
/* The row-maximum kernels (maxstream.inc)                                  */
/* ------------------------------------------------------------------------ */

typedef struct max_stream_case {
    const char *name;
    opf_isa isa;
    opf_max_stream_ukernel fn;
} max_stream_case;

static const max_stream_case max_stream_cases[] = {
#define OPF_MAX_STREAM_UKERNEL(isa, fn) {#fn, OPF_ISA_##isa, fn},
#include "maxstream.inc"
#undef OPF_MAX_STREAM_UKERNEL
    {NULL, OPF_ISA_SCALAR, NULL},
};

/* Each kernel the CPU runs: the 64 lanes' maxima of a scalar loop (NaN left
 * out, -inf and -0 among the values), the blocks done, and a waiting row of
 * 37 lines stored as a plan of one step a block gives (y = src * factor,
 * streamed, the lines before and after untouched; the plan's record of
 * them moved on), then the public entry at the level in use. */
static void test_max_stream_registry(void) {
    enum { N = 64 * 9 + 13, LINES = 37 };
    float *x = xcalloc(N, sizeof(float));
    float *src = aligned_alloc(64, 64 * (LINES + 2)), *dst = aligned_alloc(64, 64 * (LINES + 2));
    rng r = rng_seed(71);
    fill_uniform_f32(&r, x, N, -100, 100);
    x[5] = NAN, x[64 + 5] = -INFINITY, x[200] = -0.0f, x[333] = NAN, x[64 * 8 + 3] = 1000.0f, x[64 * 8 + 20] = NAN;
    fill_uniform_f32(&r, src, 16 * (LINES + 2), -1, 1);
    for (size_t c = 0; max_stream_cases[c].name != NULL; c++) {
        const max_stream_case *k = &max_stream_cases[c];
        if (!opf_cpu_supports(k->isa)) {
            continue;
        }
        harness_begin(k->name);
        float m[64], want[64];
        for (int j = 0; j < 64; j++) {
            m[j] = want[j] = -INFINITY;
        }
        for (int64_t i = 0; i < N - N % 64; i++) {
            want[i % 64] = x[i] > want[i % 64] ? x[i] : want[i % 64];
        }
        for (int i = 0; i < 16 * (LINES + 2); i++) {
            dst[i] = 7.0f;
        }
        opf_row_later w = {.dst = dst + 16,
                           .src = src + 16,
                           .factor = 0.375,
                           .len = 16 * LINES,
                           .head = 0,
                           .lines = LINES,
                           .stored = 0,
                           .elem = 4,
                           .level = 0};
        opf_earlier_row plan = {.w = &w,
                                .dst = (char *)(dst + 16),
                                .src = (const char *)(src + 16),
                                .left = LINES,
                                .share = (LINES + N / 64 - 1) / (N / 64),
                                .factor = 0.375,
                                .elem = 4,
                                .level = 0};
        const int64_t done = k->fn(N, x, m, &plan);
        CHECK(done == N - N % 64, "did %lld of %d", (long long)done, N);
        CHECK_SAME_BITS(m, want, 64, sizeof(float), "%s: the lanes' maxima", k->name);
        int bad = 0;
        for (int i = 0; i < 16 * (LINES + 2) && !bad; i++) {
            const float expect = i < 16 || i >= 16 * (LINES + 1) ? 7.0f : src[i] * 0.375f;
            bad = !CHECK(dst[i] == expect, "%s: dst[%d] = %g, expected %g", k->name, i, (double)dst[i], (double)expect);
        }
        CHECK(plan.left == 0 && w.stored == LINES && plan.dst == (char *)(dst + 16 * (LINES + 1)),
              "%s: the plan left %lld lines, recorded %lld stored", k->name, (long long)plan.left, (long long)w.stored);
        float m2[64];
        for (int j = 0; j < 64; j++) {
            m2[j] = -INFINITY;
        }
        CHECK(k->fn(N, x, m2, NULL) == done, "%s: no plan", k->name);
        CHECK_SAME_BITS(m2, want, 64, sizeof(float), "%s: the lanes' maxima without a plan", k->name);
        harness_end();
    }
    harness_begin("opf_max_blocks_f32");
    float m[64];
    for (int j = 0; j < 64; j++) {
        m[j] = -INFINITY;
    }
    CHECK(opf_max_blocks_f32(63, x, m, NULL) == 0, "63 elements: no whole block");
    const int64_t done = opf_max_blocks_f32(N, x, m, NULL);
    CHECK(done == (opf_kernels_get()->max_stream_f32 != NULL ? (int64_t)(N - N % 64) : 0), "did %lld at level %s",
          (long long)done, opf_isa_name(opf_get_isa()));
    harness_end();
    free(x), free(src), free(dst);
}

int main(void) {
    test_eltwise_kernels();
    test_gemm_registry();
    test_copy_registry();
    test_exp_sum_registry();
    test_exp_sum_below_registry();
    test_exp_sum_every_block();
    test_max_stream_registry();
    RUN_TEST(test_dispatch_levels);
    RUN_TEST(test_dispatch_gemm_configs);
    return harness_summary();
}
