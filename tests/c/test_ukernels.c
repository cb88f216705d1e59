/*
 * test_ukernels.c — every kernel, called directly: each per-ISA build of the
 * built-in table's elementwise kernels (found through the table), and every
 * GEMM micro-kernel of gemm.inc, against the scalar references.
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

/* The reference of an elementwise built-in, on contiguous arrays. relu_grad's
 * kernel takes (a = dy, b = x), the order of opf_relu_grad's arguments. */
typedef void (*eltwise_ref)(opf_dtype dtype, size_t n, const void *a, const void *b, void *y, double alpha);

static void kref_relu(opf_dtype dt, size_t n, const void *a, const void *b, void *y, double alpha) {
    (void)b, (void)alpha;
    dt == OPF_F32 ? ref_relu_array_f32(n, a, y) : ref_relu_array_f64(n, a, y);
}
static void kref_scale(opf_dtype dt, size_t n, const void *a, const void *b, void *y, double alpha) {
    (void)b;
    dt == OPF_F32 ? ref_scale_array_f32(n, (float)alpha, a, y) : ref_scale_array_f64(n, alpha, a, y);
}
static void kref_relu_grad(opf_dtype dt, size_t n, const void *a, const void *b, void *y, double alpha) {
    (void)alpha;
    dt == OPF_F32 ? ref_relu_grad_array_f32(n, a, b, y) : ref_relu_grad_array_f64(n, a, b, y);
}
static void kref_add(opf_dtype dt, size_t n, const void *a, const void *b, void *y, double alpha) {
    (void)alpha;
    dt == OPF_F32 ? ref_add_array_f32(n, a, b, y) : ref_add_array_f64(n, a, b, y);
}

static void kref_mul(opf_dtype dt, size_t n, const void *a, const void *b, void *y, double alpha) {
    (void)alpha;
    dt == OPF_F32 ? ref_mul_array_f32(n, a, b, y) : ref_mul_array_f64(n, a, b, y);
}
/* sum_to's kernel (x, like): y = x, like unread (the engine sums). */
static void kref_copy(opf_dtype dt, size_t n, const void *a, const void *b, void *y, double alpha) {
    (void)b, (void)alpha;
    memcpy(y, a, n * opf_dtype_size(dt));
}

/* Every elementwise row of the built-in table needs its reference here: a
 * row without one fails test_eltwise_kernels. A kernel of three inputs gets
 * (a, b, a): mul_grad's (dy, other, like) does not read like. */
static const struct {
    const char *op;
    eltwise_ref ref;
} eltwise_refs[] = {{"relu", kref_relu}, {"relu_", kref_relu}, {"relu_grad", kref_relu_grad}, {"scale", kref_scale},
                    {"add", kref_add},   {"mul", kref_mul},    {"sum_to", kref_copy},         {"mul_grad", kref_mul}};

typedef struct eltwise_case {
    const char *name;
    opf_dtype dtype;
    const char *op;
    int arity;
    opf_eltwise_fn kernel;
    eltwise_ref reference;
} eltwise_case;

static void call_kernel(const eltwise_case *c, size_t n, const void *a, const void *b, void *y, double alpha) {
    opf_attr_value attrs[OPF_MAX_ATTRS] = {{.f = alpha}};
    const void *in[3] = {a, b, a};
    void *out[1] = {y};
    c->kernel((int64_t)n, in, out, attrs);
}

static void call_eltwise(const eltwise_case *c, const void *unused, size_t n, const void *a, const void *b, void *y,
                         double alpha) {
    (void)unused;
    call_kernel(c, n, a, b, y, alpha);
}

static void call_reference(const eltwise_case *c, size_t n, const void *a, const void *b, void *y, double alpha) {
    c->reference(c->dtype, n, a, b, y, alpha);
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

static int check_values(const eltwise_case *c, const void *got, const void *want, size_t n, const char *ctx,
                        const char *variant) {
    if (c->dtype == OPF_F32) {
        return CHECK_CLOSE_F32(got, want, n, 0.0, 0.0, "%s, %s", ctx, variant);
    }
    return CHECK_CLOSE_F64(got, want, n, 0.0, 0.0, "%s, %s", ctx, variant);
}

/* ------------------------------------------------------------------------ */
/* Elementwise tests                                                         */
/* ------------------------------------------------------------------------ */

/* One size, alignment, value mix and alpha: out of place, then every allowed
 * in-place form, each checked against the reference, guards and inputs. */
static void eltwise_once(const eltwise_case *c, const void *kernel, size_t n, size_t misalign, int tight, int special,
                         double alpha, rng *r) {
    const size_t esz = opf_dtype_size(c->dtype);
    char ctx[256];
    snprintf(ctx, sizeof ctx, "%s n=%zu misalign=%zu %s %s alpha=%g", c->name, n, misalign, tight ? "tight" : "guarded",
             special ? "specials" : "uniform", alpha);
    const int binary = c->arity >= 2;

    gbuf a = gbuf_make(esz, n, misalign, tight);
    gbuf b = gbuf_make(esz, binary ? n : 0, (misalign + 1) % 4, tight);
    gbuf y = gbuf_make(esz, n, (misalign + 2) % 4, tight);
    void *a0 = xcalloc(n, esz), *b0 = xcalloc(n, esz), *want = xcalloc(n, esz), *want_aa = xcalloc(n, esz);
    if (special) {
        fill_special(r, c->dtype, a0, n);
        fill_special(r, c->dtype, b0, n);
    } else {
        fill_uniform(r, c->dtype, a0, n, -10.0, 10.0);
        fill_uniform(r, c->dtype, b0, n, -10.0, 10.0);
    }
    call_reference(c, n, a0, b0, want, alpha);
    call_reference(c, n, a0, a0, want_aa, alpha);
    memcpy(a.p, a0, n * esz);
    memcpy(b.p, b0, binary ? n * esz : 0);

    /* Out of place. */
    call_eltwise(c, kernel, n, a.p, binary ? b.p : NULL, y.p, alpha);
    check_values(c, y.p, want, n, ctx, "out of place");
    gbuf_guards_ok(&y, "y", ctx);
    CHECK_SAME_BITS(a.p, a0, n, esz, "%s: input a modified", ctx);
    if (binary) {
        CHECK_SAME_BITS(b.p, b0, n, esz, "%s: input b modified", ctx);
    }

    /* y == a (y == x for unary kernels). */
    call_eltwise(c, kernel, n, a.p, binary ? b.p : NULL, a.p, alpha);
    check_values(c, a.p, want, n, ctx, "in place y == a");
    gbuf_guards_ok(&a, "a", ctx);
    if (binary) {
        CHECK_SAME_BITS(b.p, b0, n, esz, "%s: y == a: input b modified", ctx);

        /* y == b. */
        memcpy(a.p, a0, n * esz);
        call_eltwise(c, kernel, n, a.p, b.p, b.p, alpha);
        check_values(c, b.p, want, n, ctx, "in place y == b");
        gbuf_guards_ok(&b, "b", ctx);
        CHECK_SAME_BITS(a.p, a0, n, esz, "%s: y == b: input a modified", ctx);

        /* a == b, out of place, then y == a == b. */
        memset(y.p, 0, n * esz);
        call_eltwise(c, kernel, n, a.p, a.p, y.p, alpha);
        check_values(c, y.p, want_aa, n, ctx, "a == b");
        gbuf_guards_ok(&y, "y", ctx);
        call_eltwise(c, kernel, n, a.p, a.p, a.p, alpha);
        check_values(c, a.p, want_aa, n, ctx, "y == a == b");
        gbuf_guards_ok(&a, "a", ctx);
    }

    free(a0);
    free(b0);
    free(want);
    free(want_aa);
    gbuf_free(&a);
    gbuf_free(&b);
    gbuf_free(&y);
}

static const size_t eltwise_sizes[] = {0, 1, 7, 8, 15, 16, 17, 31, 33, 1000, (size_t)1 << 20};
static const double scale_alphas[] = {2.0, -0.5, 0.1, 0.0, 1e-3};

static void eltwise_test_kernel(const eltwise_case *c) {
    const void *kernel = NULL;
    rng r = rng_seed(0x5EED0000u + (uint64_t)c->arity);
    const int is_scale = strcmp(c->op, "scale") == 0;
    const size_t num_alphas = is_scale ? sizeof scale_alphas / sizeof scale_alphas[0] : 1;
    for (size_t si = 0; si < sizeof eltwise_sizes / sizeof eltwise_sizes[0]; si++) {
        size_t n = eltwise_sizes[si];
        int big = n > 1000;
        for (size_t misalign = big ? 1 : 0; misalign < (big ? 2u : 4u); misalign++) {
            for (int tight = big ? 1 : 0; tight < 2; tight++) {
                if (tight && harness_test_failures() > 0) {
                    break; /* a kernel that failed the guard checks could corrupt the heap when tight */
                }
                for (int special = 0; special < 2; special++) {
                    for (size_t ai = 0; ai < (big ? 1 : num_alphas); ai++) {
                        double alpha = is_scale ? scale_alphas[big ? 2 : ai] : 1.0;
                        eltwise_once(c, kernel, n, misalign, tight, special, alpha, &r);
                        if (harness_test_failures() > 50) {
                            return; /* a broken kernel fails everywhere; stop early */
                        }
                    }
                }
            }
        }
    }
}

/* Hand-picked values whose answers are known without any reference. */
static void eltwise_known_values(const eltwise_case *c) {
    char ctx[128];
    snprintf(ctx, sizeof ctx, "%s known values", c->name);
    if (c->dtype != OPF_F32) {
        return; /* the f32 lines cover the logic; f64 is covered by the reference sweep */
    }
    const float x[8] = {-2.0f, -0.0f, 0.0f, 3.5f, NAN, -INFINITY, INFINITY, FLT_TRUE_MIN};
    const float dy[8] = {10.0f, 11.0f, 12.0f, 13.0f, 14.0f, 15.0f, 16.0f, 17.0f};
    float y[8];
    if (strcmp(c->op, "relu") == 0) {
        const float want[8] = {0.0f, 0.0f, 0.0f, 3.5f, NAN, 0.0f, INFINITY, FLT_TRUE_MIN};
        call_kernel(c, 8, x, NULL, y, 1.0);
        CHECK_CLOSE_F32(y, want, 8, 0.0, 0.0, "%s", ctx);
    } else if (strcmp(c->op, "relu_grad") == 0) {
        const float want[8] = {0.0f, 0.0f, 0.0f, 13.0f, 14.0f, 0.0f, 16.0f, 17.0f};
        call_kernel(c, 8, dy, x, y, 1.0);
        CHECK_CLOSE_F32(y, want, 8, 0.0, 0.0, "%s (a = dy, b = x)", ctx);
    } else if (strcmp(c->op, "scale") == 0) {
        const float want[8] = {-6.0f, -0.0f, 0.0f, 10.5f, NAN, -INFINITY, INFINITY, 3 * FLT_TRUE_MIN};
        call_kernel(c, 8, x, NULL, y, 3.0);
        CHECK_CLOSE_F32(y, want, 8, 0.0, 0.0, "%s (alpha 3)", ctx);
    } else if (strcmp(c->op, "add") == 0) {
        const float want[8] = {8.0f, 11.0f, 12.0f, 16.5f, NAN, -INFINITY, INFINITY, 17.0f};
        call_kernel(c, 8, x, dy, y, 1.0);
        CHECK_CLOSE_F32(y, want, 8, 0.0, 0.0, "%s", ctx);
    } else if (strcmp(c->op, "mul") == 0 || strcmp(c->op, "mul_grad") == 0) {
        const float want[8] = {-20.0f, -0.0f, 0.0f, 45.5f, NAN, -INFINITY, INFINITY, 17 * FLT_TRUE_MIN};
        call_kernel(c, 8, x, dy, y, 1.0);
        CHECK_CLOSE_F32(y, want, 8, 0.0, 0.0, "%s", ctx);
    } else if (strcmp(c->op, "sum_to") == 0) {
        call_kernel(c, 8, x, dy, y, 1.0);
        CHECK_CLOSE_F32(y, x, 8, 0.0, 0.0, "%s", ctx);
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
        eltwise_ref ref = NULL;
        for (size_t k = 0; k < sizeof eltwise_refs / sizeof eltwise_refs[0]; k++) {
            ref = strcmp(eltwise_refs[k].op, op->name) == 0 ? eltwise_refs[k].ref : ref;
        }
        harness_begin(op->name);
        CHECK(ref != NULL, "elementwise row %s has no reference in test_ukernels.c", op->name);
        harness_end();
        for (int dt = 0; ref != NULL && dt < 2; dt++) {
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
                eltwise_case c = {name, dt == 0 ? OPF_F32 : OPF_F64, op->name, op->eltwise->num_inputs, fn, ref};
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

int main(void) {
    test_eltwise_kernels();
    test_gemm_registry();
    RUN_TEST(test_dispatch_levels);
    RUN_TEST(test_dispatch_gemm_configs);
    return harness_summary();
}
