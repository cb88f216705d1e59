/*
 * test_ops.c — the public entry points (opf_relu, opf_relu_, opf_relu_grad,
 * opf_scale, opf_add, opf_dense, opf_dense_grad) and the same ops through
 * opf_op_run on their table rows, float32 and float64, against the
 * references in reference.h: contiguous, 0-d, empty, strided (transposed,
 * every other element, negative, zero-stride broadcast inputs, byte_offset),
 * strided outputs, exact in place; dense shapes with 0/1/odd dims; results
 * identical for 1, 2 and 3 threads.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "reference.h"

static const opf_dtype dtypes[] = {OPF_F32, OPF_F64};

/* ------------------------------------------------------------------------ */
/* Small helpers                                                             */
/* ------------------------------------------------------------------------ */

static void to_double(opf_dtype dt, const void *src, size_t n, double *dst) {
    for (size_t i = 0; i < n; i++) {
        dst[i] = dt == OPF_F32 ? (double)((const float *)src)[i] : ((const double *)src)[i];
    }
}

/* The whole allocation of a view, to check later that an input was not written. */
static unsigned char *snapshot(const tview *v) {
    unsigned char *s = xmalloc(v->alloc_bytes);
    memcpy(s, v->alloc, v->alloc_bytes);
    return s;
}

static int unchanged(const tview *v, unsigned char *snap, const char *what, const char *ctx) {
    int ok = CHECK_SAME_BITS(v->alloc, snap, v->alloc_bytes, 1, "%s: input %s was modified", ctx, what);
    free(snap);
    return ok;
}

#define CHECK_OK(st, ctx)                                                                                              \
    CHECK((st) == OPF_OK, "%s: status %s, message \"%s\"", (ctx), opf_status_name(st), opf_last_error())

static const char *dtype_str(opf_dtype dt) { return dt == OPF_F32 ? "f32" : "f64"; }

static int32_t input_index(const opf_op_def *op, const char *name) {
    for (int32_t i = 0; i < op->num_inputs; i++) {
        if (strcmp(op->inputs[i].name, name) == 0) {
            return i;
        }
    }
    return -1;
}
static int32_t output_index(const opf_op_def *op, const char *name) {
    for (int32_t i = 0; i < op->num_outputs; i++) {
        if (strcmp(op->outputs[i].name, name) == 0) {
            return i;
        }
    }
    return -1;
}
static int32_t attr_index(const opf_op_def *op, const char *name) {
    for (int32_t i = 0; i < op->num_attrs; i++) {
        if (strcmp(op->attrs[i].name, name) == 0) {
            return i;
        }
    }
    return -1;
}

/* Runs row `name` of the built-in table with arguments given by name. */
typedef struct named_arg {
    const char *name;
    const opf_tensor *t;
} named_arg;

static opf_status run_row(const char *name, const named_arg *ins, int num_ins, const named_arg *outs, int num_outs,
                          const char *attr, double attr_f, int64_t attr_i, int use_attrs) {
    const opf_op_def *op = opf_op_find(opf_builtin_ops(), name);
    if (!CHECK(op != NULL, "no row '%s' in the built-in table", name)) {
        return OPF_E_INTERNAL;
    }
    const opf_tensor *in[OPF_MAX_ARGS] = {NULL}, *out[OPF_MAX_ARGS] = {NULL};
    for (int i = 0; i < num_ins; i++) {
        int32_t k = input_index(op, ins[i].name);
        if (!CHECK(k >= 0, "row '%s' has no input '%s'", name, ins[i].name)) {
            return OPF_E_INTERNAL;
        }
        in[k] = ins[i].t;
    }
    for (int i = 0; i < num_outs; i++) {
        int32_t k = output_index(op, outs[i].name);
        if (!CHECK(k >= 0, "row '%s' has no output '%s'", name, outs[i].name)) {
            return OPF_E_INTERNAL;
        }
        out[k] = outs[i].t;
    }
    if (!use_attrs) {
        return opf_op_run(op, in, out, NULL);
    }
    opf_attr_value attrs[OPF_MAX_ATTRS];
    opf_op_default_attrs(op, attrs);
    if (attr != NULL) {
        int32_t k = attr_index(op, attr);
        if (!CHECK(k >= 0, "row '%s' has no attr '%s'", name, attr)) {
            return OPF_E_INTERNAL;
        }
        if (op->attrs[k].type == OPF_ATTR_FLOAT) {
            attrs[k].f = attr_f;
        } else {
            attrs[k].i = attr_i;
        }
    }
    return opf_op_run(op, in, out, attrs);
}

/* ------------------------------------------------------------------------ */
/* Elementwise ops                                                           */
/* ------------------------------------------------------------------------ */

typedef enum eop { E_RELU, E_RELU_INPLACE, E_RELU_GRAD, E_SCALE, E_ADD, E_COUNT } eop;

static const struct {
    const char *name;
    int arity;
} eops[E_COUNT] = {
    [E_RELU] = {"relu", 1}, [E_RELU_INPLACE] = {"relu_", 1}, [E_RELU_GRAD] = {"relu_grad", 2}, [E_SCALE] = {"scale", 1},
    [E_ADD] = {"add", 2},
};

/* y = op(a, b); for relu_ y must be a. via_table runs the table row. */
static opf_status run_eop(eop op, int via_table, double alpha, const opf_tensor *a, const opf_tensor *b,
                          const opf_tensor *y) {
    if (!via_table) {
        switch (op) {
        case E_RELU: return opf_relu(a, y);
        case E_RELU_INPLACE: return opf_relu_(a);
        case E_RELU_GRAD: return opf_relu_grad(a, b, y);
        case E_SCALE: return opf_scale(a, alpha, y);
        case E_ADD: return opf_add(a, b, y);
        case E_COUNT: break;
        }
        return OPF_E_INTERNAL;
    }
    switch (op) {
    case E_RELU: return run_row("relu", (named_arg[]){{"x", a}}, 1, (named_arg[]){{"y", y}}, 1, NULL, 0, 0, 0);
    case E_RELU_INPLACE: return run_row("relu_", (named_arg[]){{"x", a}}, 1, NULL, 0, NULL, 0, 0, 0);
    case E_RELU_GRAD:
        return run_row("relu_grad", (named_arg[]){{"dy", a}, {"x", b}}, 2, (named_arg[]){{"dx", y}}, 1, NULL, 0, 0, 1);
    case E_SCALE: return run_row("scale", (named_arg[]){{"x", a}}, 1, (named_arg[]){{"y", y}}, 1, "alpha", alpha, 0, 1);
    case E_ADD: return run_row("add", (named_arg[]){{"a", a}, {"b", b}}, 2, (named_arg[]){{"y", y}}, 1, NULL, 0, 0, 0);
    case E_COUNT: break;
    }
    return OPF_E_INTERNAL;
}

static void ref_eop(eop op, opf_dtype dt, size_t n, const void *a, const void *b, void *y, double alpha) {
    if (dt == OPF_F32) {
        switch (op) {
        case E_RELU:
        case E_RELU_INPLACE: ref_relu_array_f32(n, a, y); break;
        case E_RELU_GRAD: ref_relu_grad_array_f32(n, a, b, y); break;
        case E_SCALE: ref_scale_array_f32(n, (float)alpha, a, y); break;
        case E_ADD: ref_add_array_f32(n, a, b, y); break;
        case E_COUNT: break;
        }
    } else {
        switch (op) {
        case E_RELU:
        case E_RELU_INPLACE: ref_relu_array_f64(n, a, y); break;
        case E_RELU_GRAD: ref_relu_grad_array_f64(n, a, b, y); break;
        case E_SCALE: ref_scale_array_f64(n, alpha, a, y); break;
        case E_ADD: ref_add_array_f64(n, a, b, y); break;
        case E_COUNT: break;
        }
    }
}

static int check_exact(opf_dtype dt, const void *got, const void *want, size_t n, const char *ctx) {
    if (dt == OPF_F32) {
        return CHECK_CLOSE_F32(got, want, n, 0.0, 0.0, "%s", ctx);
    }
    return CHECK_CLOSE_F64(got, want, n, 0.0, 0.0, "%s", ctx);
}

/* Where the output lives. */
typedef enum out_mode { OUT_SEPARATE, OUT_IS_A, OUT_IS_B, OUT_IS_A_IS_B } out_mode;

typedef struct eltwise_spec {
    eop op;
    opf_dtype dt;
    int32_t ndim;
    const int64_t *shape;
    tv_layout la, lb, ly;
    int off_a, off_b, off_y;
    out_mode mode;
    int via_table;
    double alpha;
} eltwise_spec;

static void eltwise_case(const eltwise_spec *s, rng *r) {
    const int binary = eops[s->op].arity == 2;
    out_mode mode = s->op == E_RELU_INPLACE ? OUT_IS_A : s->mode;
    char shape_s[128], ctx[512];
    fmt_shape(shape_s, sizeof shape_s, s->ndim, s->shape);
    snprintf(ctx, sizeof ctx, "%s%s %s shape %s a:%s+%d b:%s+%d y:%s+%d out=%s alpha=%g", eops[s->op].name,
             s->via_table ? " (via opf_op_run)" : "", dtype_str(s->dt), shape_s, tv_layout_name(s->la), s->off_a,
             tv_layout_name(s->lb), s->off_b, tv_layout_name(s->ly), s->off_y,
             mode == OUT_SEPARATE ? "separate"
             : mode == OUT_IS_A   ? "y==a"
             : mode == OUT_IS_B   ? "y==b"
                                  : "y==a==b",
             s->alpha);

    tview a, b, y;
    tv_make(&a, s->dt, s->ndim, s->shape, s->la, s->off_a);
    tv_make(&b, s->dt, s->ndim, s->shape, s->lb, s->off_b);
    tv_make(&y, s->dt, s->ndim, s->shape, s->ly, s->off_y);
    const size_t n = a.numel, esz = a.elem;
    void *va = xcalloc(n, esz), *vb = xcalloc(n, esz), *want = xcalloc(n, esz), *got = xcalloc(n, esz);
    tv_fill(&a, r, 1, va);
    tv_fill(&b, r, 1, vb);
    if (mode == OUT_IS_A_IS_B) {
        memcpy(vb, va, n * esz);
    }
    ref_eop(s->op, s->dt, n, va, vb, want, s->alpha);

    const tview *out = mode == OUT_SEPARATE ? &y : mode == OUT_IS_B ? &b : &a;
    const tview *second = mode == OUT_IS_A_IS_B ? &a : &b;
    unsigned char *snap_a = mode == OUT_SEPARATE || mode == OUT_IS_B ? snapshot(&a) : NULL;
    unsigned char *snap_b = binary && mode != OUT_IS_B && mode != OUT_IS_A_IS_B ? snapshot(&b) : NULL;

    opf_status st = run_eop(s->op, s->via_table, s->alpha, &a.t, binary ? &second->t : NULL, &out->t);
    if (CHECK_OK(st, ctx)) {
        tv_gather(out, got);
        check_exact(s->dt, got, want, n, ctx);
        CHECK_TV_GUARDS(out, "%s: output", ctx);
    }
    if (snap_a != NULL) {
        unchanged(&a, snap_a, "a", ctx);
    }
    if (snap_b != NULL) {
        unchanged(&b, snap_b, "b", ctx);
    }
    free(va);
    free(vb);
    free(want);
    free(got);
    tv_free(&a);
    tv_free(&b);
    tv_free(&y);
}

typedef struct shape_case {
    int32_t ndim;
    int64_t dims[4];
} shape_case;

static const shape_case eltwise_shapes[] = {
    {0, {0}},    {1, {0}},    {3, {3, 0, 2}}, {1, {1}},          {1, {7}},      {1, {17}},
    {2, {5, 6}}, {2, {1, 9}}, {3, {3, 4, 5}}, {4, {2, 1, 3, 4}}, {2, {33, 31}},
};

static const double alphas[] = {2.0, -0.5, 0.1, 0.0, 1e-3, -3.0, 1.0};

/* Every layout of the input(s) against every output layout, per op, dtype
 * and shape; then every in-place form. */
static void eltwise_sweep(eop op, int via_table) {
    rng r = rng_seed(0xE17u + (uint64_t)op);
    int counter = 0;
    for (size_t di = 0; di < 2; di++) {
        for (size_t si = 0; si < sizeof eltwise_shapes / sizeof eltwise_shapes[0]; si++) {
            const shape_case *sc = &eltwise_shapes[si];
            for (int la = 0; la < TV_LAYOUT_COUNT; la++) {
                for (int ly = 0; ly < TV_LAYOUT_COUNT; ly++) {
                    if (ly == TV_BROADCAST || (via_table && (la + ly) % 3 != 0)) {
                        continue; /* outputs cannot broadcast; the table path gets a third */
                    }
                    eltwise_spec s = {op,
                                      dtypes[di],
                                      sc->ndim,
                                      sc->dims,
                                      (tv_layout)la,
                                      (tv_layout)((la + 2) % TV_LAYOUT_COUNT),
                                      (tv_layout)ly,
                                      la % 3,
                                      (la + 1) % 3,
                                      ly % 4,
                                      OUT_SEPARATE,
                                      via_table,
                                      alphas[counter++ % (sizeof alphas / sizeof alphas[0])]};
                    if (op == E_RELU_INPLACE) {
                        if (la == TV_BROADCAST || ly != 0) {
                            continue;
                        }
                    }
                    eltwise_case(&s, &r);
                }
                /* In place: the output is exactly an input (same view). */
                if (la == TV_BROADCAST || op == E_RELU_INPLACE) {
                    continue;
                }
                eltwise_spec s = {op,
                                  dtypes[di],
                                  sc->ndim,
                                  sc->dims,
                                  (tv_layout)la,
                                  (tv_layout)la,
                                  TV_CONTIG,
                                  la % 3,
                                  la % 3,
                                  0,
                                  OUT_IS_A,
                                  via_table,
                                  alphas[counter++ % (sizeof alphas / sizeof alphas[0])]};
                eltwise_case(&s, &r);
                if (eops[op].arity == 2) {
                    s.lb = (tv_layout)((la + 3) % TV_LAYOUT_COUNT);
                    s.mode = OUT_IS_A;
                    eltwise_case(&s, &r);
                    s.lb = (tv_layout)la;
                    s.mode = OUT_IS_B;
                    s.la = (tv_layout)((la + 1) % TV_LAYOUT_COUNT);
                    eltwise_case(&s, &r);
                    s.la = (tv_layout)la;
                    s.mode = OUT_IS_A_IS_B;
                    eltwise_case(&s, &r);
                }
                if (harness_test_failures() > 50) {
                    return;
                }
            }
        }
    }
}

TEST(test_relu) { eltwise_sweep(E_RELU, 0); }
TEST(test_relu_inplace) { eltwise_sweep(E_RELU_INPLACE, 0); }
TEST(test_relu_grad) { eltwise_sweep(E_RELU_GRAD, 0); }
TEST(test_scale) { eltwise_sweep(E_SCALE, 0); }
TEST(test_add) { eltwise_sweep(E_ADD, 0); }
TEST(test_eltwise_via_op_run) {
    for (int op = 0; op < E_COUNT; op++) {
        eltwise_sweep((eop)op, 1);
    }
}

/* Values whose results are known by hand, through the public API. */
TEST(test_eltwise_known_values) {
    float x[6] = {-1.5f, -0.0f, 0.0f, 2.5f, NAN, INFINITY};
    float dy[6] = {1, 2, 3, 4, 5, 6};
    float y[6];
    int64_t shape[2] = {2, 3};
    opf_tensor tx = opf_tensor_make(x, OPF_F32, 2, shape), ty = opf_tensor_make(y, OPF_F32, 2, shape),
               tdy = opf_tensor_make(dy, OPF_F32, 2, shape);
    CHECK_OK(opf_relu(&tx, &ty), "relu");
    CHECK_CLOSE_F32(y, ((float[]){0, 0, 0, 2.5f, NAN, INFINITY}), 6, 0, 0, "relu");
    CHECK_OK(opf_relu_grad(&tdy, &tx, &ty), "relu_grad");
    CHECK_CLOSE_F32(y, ((float[]){0, 0, 0, 4, 5, 6}), 6, 0, 0, "relu_grad (NaN x passes dy)");
    CHECK_OK(opf_scale(&tx, -2.0, &ty), "scale");
    CHECK_CLOSE_F32(y, ((float[]){3, 0, 0, -5, NAN, -INFINITY}), 6, 0, 0, "scale -2");
    CHECK_OK(opf_add(&tx, &tdy, &ty), "add");
    CHECK_CLOSE_F32(y, ((float[]){-0.5f, 2, 3, 6.5f, NAN, INFINITY}), 6, 0, 0, "add");
    CHECK_OK(opf_relu_(&tx), "relu_");
    CHECK_CLOSE_F32(x, ((float[]){0, 0, 0, 2.5f, NAN, INFINITY}), 6, 0, 0, "relu_");

    /* scale in float32 rounds alpha to float first: 0.1f * 3 == 0.3f-ish, not 0.3. */
    float three = 3.0f, out;
    opf_tensor t3 = opf_tensor_make(&three, OPF_F32, 0, NULL), to = opf_tensor_make(&out, OPF_F32, 0, NULL);
    CHECK_OK(opf_scale(&t3, 0.1, &to), "scale 0-d");
    CHECK(out == 0.1f * 3.0f, "scale(3, 0.1) in float32 = %a, want %a", (double)out, (double)(0.1f * 3.0f));

    double d = -4.0, dout = 1.0;
    opf_tensor td = opf_tensor_make(&d, OPF_F64, 0, NULL), tdo = opf_tensor_make(&dout, OPF_F64, 0, NULL);
    CHECK_OK(opf_relu(&td, &tdo), "relu 0-d f64");
    CHECK(dout == 0.0, "relu(-4) = %g", dout);
}

/* Layouts that are valid although they look odd: size-1 dims with any
 * stride (even 0) on the output, and inputs overlapping each other. */
TEST(test_odd_but_valid_layouts) {
    float *buf = xcalloc(64, sizeof(float));
    for (int i = 0; i < 16; i++) {
        buf[i] = (float)(i - 8);
    }
    /* y [3,1,2] with strides {2, 0, 1} and {2, 1000, 1}: no two elements share memory. */
    const int64_t s312[3] = {3, 1, 2}, zero_mid[3] = {2, 0, 1}, huge_mid[3] = {2, 1000, 1};
    opf_tensor x = opf_tensor_make(buf, OPF_F32, 3, s312), y = opf_tensor_make(buf + 32, OPF_F32, 3, s312);
    y.strides = zero_mid;
    CHECK_OK(opf_relu(&x, &y), "relu into y with a zero stride on a size-1 dim");
    CHECK_CLOSE_F32(buf + 32, ((float[]){0, 0, 0, 0, 0, 0}), 6, 0, 0, "relu [-8..-3]");
    y.strides = huge_mid;
    CHECK_OK(opf_scale(&x, -1.0, &y), "scale into y with a huge stride on a size-1 dim");
    CHECK_CLOSE_F32(buf + 32, ((float[]){8, 7, 6, 5, 4, 3}), 6, 0, 0, "scale -1");
    /* a and b overlap each other (inputs are only read): y = buf[0..6) + buf[1..7). */
    const int64_t s6[1] = {6};
    opf_tensor a = opf_tensor_make(buf, OPF_F32, 1, s6), b = opf_tensor_make(buf + 1, OPF_F32, 1, s6),
               o = opf_tensor_make(buf + 40, OPF_F32, 1, s6);
    CHECK_OK(opf_add(&a, &b, &o), "add with overlapping inputs");
    CHECK_CLOSE_F32(buf + 40, ((float[]){-15, -13, -11, -9, -7, -5}), 6, 0, 0, "add of overlapping inputs");
    /* dense with x and w overlapping (both read-only). */
    const int64_t s22[2] = {2, 2};
    opf_tensor m1 = opf_tensor_make(buf + 8, OPF_F32, 2, s22), m2 = opf_tensor_make(buf + 9, OPF_F32, 2, s22),
               my = opf_tensor_make(buf + 48, OPF_F32, 2, s22);
    /* m1 = [[0,1],[2,3]], m2 = [[1,2],[3,4]] -> [[3,4],[11,16]] */
    CHECK_OK(opf_dense(&m1, &m2, NULL, OPF_ACT_NONE, &my), "dense with overlapping x and w");
    CHECK_CLOSE_F32(buf + 48, ((float[]){3, 4, 11, 16}), 4, 0, 0, "dense of overlapping x and w");
    free(buf);
}

/* 0-d tensors with NULL shape and strides, and empty tensors with NULL data. */
TEST(test_zero_d_and_empty) {
    for (size_t di = 0; di < 2; di++) {
        opf_dtype dt = dtypes[di];
        double xd = -7.0, yd = 123.0;
        float xf = -7.0f, yf = 123.0f;
        void *xp = dt == OPF_F32 ? (void *)&xf : (void *)&xd, *yp = dt == OPF_F32 ? (void *)&yf : (void *)&yd;
        opf_tensor x = opf_tensor_make(xp, dt, 0, NULL), y = opf_tensor_make(yp, dt, 0, NULL);
        CHECK_OK(opf_scale(&x, 3.0, &y), "scale 0-d, shape NULL");
        CHECK((dt == OPF_F32 ? (double)yf : yd) == -21.0, "scale 0-d: got %g", dt == OPF_F32 ? (double)yf : yd);
        CHECK_OK(opf_add(&x, &x, &y), "add 0-d");
        CHECK((dt == OPF_F32 ? (double)yf : yd) == -14.0, "add 0-d: got %g", dt == OPF_F32 ? (double)yf : yd);
        CHECK_OK(opf_relu(&x, &y), "relu 0-d");
        CHECK((dt == OPF_F32 ? (double)yf : yd) == 0.0, "relu 0-d: got %g", dt == OPF_F32 ? (double)yf : yd);
        CHECK_OK(opf_relu_(&x), "relu_ 0-d");
        CHECK((dt == OPF_F32 ? (double)xf : xd) == 0.0, "relu_ 0-d: got %g", dt == OPF_F32 ? (double)xf : xd);

        /* Empty: NULL data is fine when there are no elements. */
        const int64_t shape0[2] = {0, 5}, shape1[3] = {4, 0, 2};
        opf_tensor e0 = opf_tensor_make(NULL, dt, 2, shape0), e1 = opf_tensor_make(NULL, dt, 2, shape0);
        opf_tensor f0 = opf_tensor_make(NULL, dt, 3, shape1), f1 = opf_tensor_make(NULL, dt, 3, shape1);
        CHECK_OK(opf_relu(&e0, &e1), "relu [0,5] NULL data");
        CHECK_OK(opf_relu_(&f0), "relu_ [4,0,2] NULL data");
        CHECK_OK(opf_relu_grad(&f0, &f0, &f1), "relu_grad [4,0,2] NULL data");
        CHECK_OK(opf_scale(&f0, 2.0, &f1), "scale [4,0,2] NULL data");
        CHECK_OK(opf_add(&e0, &e0, &e1), "add [0,5] NULL data");
    }
}

/* ------------------------------------------------------------------------ */
/* Dense                                                                     */
/* ------------------------------------------------------------------------ */

typedef struct dense_layouts {
    tv_layout x, w, b, y;
} dense_layouts;

static const dense_layouts dense_layout_sets[] = {
    {TV_CONTIG, TV_CONTIG, TV_CONTIG, TV_CONTIG},
    {TV_TRANSPOSED, TV_TRANSPOSED, TV_STEP2, TV_STEP2},
    {TV_NEGATIVE, TV_STEP2, TV_NEGATIVE, TV_TRANSPOSED},
    {TV_STEP2, TV_NEGATIVE, TV_CONTIG_STRIDES, TV_NEGATIVE},
    {TV_BROADCAST, TV_BROADCAST, TV_BROADCAST, TV_CONTIG_STRIDES},
    {TV_CONTIG_STRIDES, TV_TRANSPOSED, TV_CONTIG, TV_TRANSPOSED},
};
enum { NUM_DENSE_LAYOUTS = sizeof dense_layout_sets / sizeof dense_layout_sets[0] };

/* opf_matmul's epilogue in these tests: a leaky ReLU of slope attrs[0]
 * (applied twice, or to an element the GEMM had not finished, it gives
 * another value). */
OPF_ELTWISE_KERNEL(leaky, (z), (y), y = z > 0 ? z : z * (T)attrs[0].f;)
enum { LEAKY_SLOPE_X8 = 2 }; /* the slope, 0.25, times 8 */

/* How dense_case computes y. */
typedef enum dense_via { VIA_DENSE, VIA_TABLE, VIA_MATMUL } dense_via;

/* dense through opf_dense, the table's row, or opf_matmul (whose `relu`
 * is the leaky epilogue), against ref_dense. */
static void dense_case(opf_dtype dt, int64_t N, int64_t K, int64_t M, int with_bias, int relu, const dense_layouts *l,
                       dense_via via, rng *r) {
    char ctx[256];
    static const char *const vias[] = {"", " (via opf_op_run)", " (opf_matmul)"};
    snprintf(ctx, sizeof ctx, "dense%s %s N=%lld K=%lld M=%lld bias=%d act=%s x:%s w:%s b:%s y:%s", vias[via],
             dtype_str(dt), (long long)N, (long long)K, (long long)M, with_bias,
             relu ? (via == VIA_MATMUL ? "leaky epilogue" : "relu") : "none", tv_layout_name(l->x),
             tv_layout_name(l->w), tv_layout_name(l->b), tv_layout_name(l->y));
    const int64_t xs[2] = {N, K}, ws[2] = {K, M}, bs[1] = {M}, ys[2] = {N, M};
    tview x, w, b, y;
    tv_make(&x, dt, 2, xs, l->x, 1);
    tv_make(&w, dt, 2, ws, l->w, 2);
    tv_make(&b, dt, 1, bs, l->b, 3);
    tv_make(&y, dt, 2, ys, l->y, 1);
    const size_t esz = x.elem, nx = x.numel, nw = w.numel, nb = b.numel, ny = y.numel;
    void *tx = xcalloc(nx, esz), *tw = xcalloc(nw, esz), *tb = xcalloc(nb, esz), *ty = xcalloc(ny, esz);
    double *dx = xcalloc(nx, sizeof(double)), *dw = xcalloc(nw, sizeof(double)), *db = xcalloc(nb, sizeof(double));
    double *want = xcalloc(ny, sizeof(double)), *tol = xcalloc(ny, sizeof(double)), *got = xcalloc(ny, sizeof(double));
    tv_fill(&x, r, 0, tx);
    tv_fill(&w, r, 0, tw);
    tv_fill(&b, r, 0, tb);
    /* y starts as NaN: dense must overwrite it, never read it. */
    for (size_t i = 0; i < ny; i++) {
        if (dt == OPF_F32) {
            *(float *)tv_at(&y, i) = NAN;
        } else {
            *(double *)tv_at(&y, i) = NAN;
        }
    }
    to_double(dt, tx, nx, dx);
    to_double(dt, tw, nw, dw);
    to_double(dt, tb, nb, db);
    const double slope = LEAKY_SLOPE_X8 / 8.0;
    ref_dense((size_t)N, (size_t)K, (size_t)M, dx, dw, with_bias ? db : NULL, relu && via != VIA_MATMUL,
              ref_eps(dt == OPF_F64), want, tol);
    for (size_t i = 0; via == VIA_MATMUL && relu && i < ny; i++) {
        want[i] = want[i] > 0 ? want[i] : want[i] * slope;
    }

    unsigned char *sx = snapshot(&x), *sw = snapshot(&w), *sb = snapshot(&b);
    opf_status st;
    if (via == VIA_TABLE) {
        st = run_row("dense", (named_arg[]){{"x", &x.t}, {"w", &w.t}, {"b", with_bias ? &b.t : NULL}}, 3,
                     (named_arg[]){{"y", &y.t}}, 1, "activation", 0, relu ? OPF_ACT_RELU : OPF_ACT_NONE, 1);
    } else if (via == VIA_MATMUL) {
        const opf_attr_value attrs[OPF_MAX_ATTRS] = {{.f = slope}};
        st = opf_matmul(&x.t, &w.t, with_bias ? &b.t : NULL, relu ? &leaky : NULL, attrs, &y.t);
    } else {
        st = opf_dense(&x.t, &w.t, with_bias ? &b.t : NULL, relu ? OPF_ACT_RELU : OPF_ACT_NONE, &y.t);
    }
    if (CHECK_OK(st, ctx)) {
        tv_gather(&y, ty);
        to_double(dt, ty, ny, got);
        CHECK_CLOSE_TOL(got, want, tol, ny, "%s", ctx);
        CHECK_TV_GUARDS(&y, "%s: y", ctx);
    }
    unchanged(&x, sx, "x", ctx);
    unchanged(&w, sw, "w", ctx);
    unchanged(&b, sb, "b", ctx);

    free(tx), free(tw), free(tb), free(ty), free(dx), free(dw), free(db), free(want), free(tol), free(got);
    tv_free(&x), tv_free(&w), tv_free(&b), tv_free(&y);
}

typedef struct dense_dims {
    int64_t n, k, m;
} dense_dims;

static const dense_dims dense_shapes[] = {
    {1, 1, 1},
    {1, 7, 1},
    {7, 1, 17},
    {1, 33, 65},
    {65, 1, 7},
    {17, 33, 65},
    {33, 129, 1},
    {7, 65, 129},
    {129, 17, 33},
    {3, 0, 5},
    {0, 5, 3},
    {4, 5, 0},
    {0, 0, 0},
    {1, 0, 1},
    {5, 300, 2},
    {2, 3, 300},
    {129, 129, 129},
    /* More than one k-slice (bias on the first, relu on the last), and more
     * columns than one column block of the GEMM driver. */
    {3, 600, 5},
    {2, 3, 2100},
    /* More rows than one row block (the driver's MC: 8192 at most). */
    {8200, 3, 5},
};

static void dense_sweep(dense_via via, rng *r) {
    for (size_t di = 0; di < 2; di++) {
        for (size_t si = 0; si < sizeof dense_shapes / sizeof dense_shapes[0]; si++) {
            const dense_dims *s = &dense_shapes[si];
            int big = s->n * s->k * s->m > 100000;
            if (harness_slow() && s->n * s->k * s->m > 40000) {
                continue; /* under valgrind: the small and odd shapes only */
            }
            for (int flags = 0; flags < 4; flags++) {
                for (int li = 0; li < NUM_DENSE_LAYOUTS; li++) {
                    if (big && li != flags % NUM_DENSE_LAYOUTS) {
                        continue; /* big shapes: one layout set per flag combination */
                    }
                    dense_case(dtypes[di], s->n, s->k, s->m, flags & 1, (flags >> 1) & 1, &dense_layout_sets[li], via,
                               r);
                }
            }
            if (harness_test_failures() > 50) {
                return;
            }
        }
    }
}

TEST(test_dense) {
    rng r = rng_seed(0xDE45Eu);
    dense_sweep(VIA_DENSE, &r);
}

/* opf_matmul: the same shapes and layouts, its epilogue where dense has its ReLU. */
TEST(test_matmul) {
    rng r = rng_seed(0x3A73u);
    dense_sweep(VIA_MATMUL, &r);
}

/* Known values, the attributes the epilogue sees, NULL attrs (all zero: a
 * slope of 0 is a ReLU), and the same bits on one thread and on several. */
TEST(test_matmul_known_values) {
    const int64_t s22[2] = {2, 2}, s2[1] = {2};
    float x[4] = {1, 2, 3, 4}, w[4] = {5, 6, 7, 8}, b[2] = {1, -100}, y[4];
    opf_tensor tx = opf_tensor_make(x, OPF_F32, 2, s22), tw = opf_tensor_make(w, OPF_F32, 2, s22),
               tb = opf_tensor_make(b, OPF_F32, 1, s2), ty = opf_tensor_make(y, OPF_F32, 2, s22);
    CHECK_OK(opf_matmul(&tx, &tw, &tb, NULL, NULL, &ty), "matmul");
    CHECK_CLOSE_F32(y, ((float[]){20, -78, 44, -50}), 4, 0, 0, "matmul, no epilogue");
    const opf_attr_value half[OPF_MAX_ATTRS] = {{.f = 0.5}};
    CHECK_OK(opf_matmul(&tx, &tw, &tb, &leaky, half, &ty), "matmul, leaky 0.5");
    CHECK_CLOSE_F32(y, ((float[]){20, -39, 44, -25}), 4, 0, 0, "matmul, leaky epilogue of slope 0.5");
    CHECK_OK(opf_matmul(&tx, &tw, &tb, &leaky, NULL, &ty), "matmul, NULL attrs");
    CHECK_CLOSE_F32(y, ((float[]){20, 0, 44, 0}), 4, 0, 0, "matmul, leaky epilogue of slope 0 (NULL attrs)");
    /* y transposed: the epilogue reads and writes it through a buffer */
    const int64_t tstr[2] = {1, 2};
    ty.strides = tstr;
    CHECK_OK(opf_matmul(&tx, &tw, &tb, &leaky, half, &ty), "matmul, y transposed");
    CHECK_CLOSE_F32(y, ((float[]){20, 44, -39, -25}), 4, 0, 0, "matmul, leaky epilogue into y transposed");
    /* one thread and several: the same bits */
    enum { N = 67, K = 300, M = 515 };
    rng r = rng_seed(0x3A74u);
    double *a = xcalloc(N * K, sizeof *a), *bw = xcalloc(K * M, sizeof *bw), *y1 = xcalloc(N * M, sizeof *y1),
           *y2 = xcalloc(N * M, sizeof *y2);
    for (int i = 0; i < N * K; i++) {
        a[i] = rng_uniform(&r, -1, 1);
    }
    for (int i = 0; i < K * M; i++) {
        bw[i] = rng_uniform(&r, -1, 1);
    }
    const int64_t as[2] = {N, K}, ws[2] = {K, M}, ys[2] = {N, M};
    opf_tensor ta = opf_tensor_make(a, OPF_F64, 2, as), tbw = opf_tensor_make(bw, OPF_F64, 2, ws),
               t1 = opf_tensor_make(y1, OPF_F64, 2, ys), t2 = opf_tensor_make(y2, OPF_F64, 2, ys);
    const int saved = opf_get_num_threads();
    CHECK_OK(opf_set_num_threads(1), "one thread");
    CHECK_OK(opf_matmul(&ta, &tbw, NULL, &leaky, half, &t1), "matmul on one thread");
    CHECK_OK(opf_set_num_threads(4), "four threads");
    CHECK_OK(opf_matmul(&ta, &tbw, NULL, &leaky, half, &t2), "matmul on four threads");
    CHECK_OK(opf_set_num_threads(saved), "restore thread count");
    CHECK(memcmp(y1, y2, sizeof(double) * N * M) == 0, "matmul: other bits on four threads than on one");
    free(a), free(bw), free(y1), free(y2);
}

TEST(test_dense_via_op_run) {
    rng r = rng_seed(0xDE46u);
    static const dense_dims shapes[] = {{3, 5, 7}, {17, 33, 9}, {1, 0, 4}};
    for (size_t di = 0; di < 2; di++) {
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            for (int flags = 0; flags < 4; flags++) {
                dense_case(dtypes[di], shapes[si].n, shapes[si].k, shapes[si].m, flags & 1, (flags >> 1) & 1,
                           &dense_layout_sets[(si + (size_t)flags) % NUM_DENSE_LAYOUTS], VIA_TABLE, &r);
            }
        }
    }
    /* NULL attrs: activation defaults to none. */
    double x[2] = {1, -2}, w[2] = {3, 4}, y[1] = {0};
    const int64_t xs[2] = {1, 2}, ws[2] = {2, 1}, ys[2] = {1, 1};
    opf_tensor tx = opf_tensor_make(x, OPF_F64, 2, xs), tw = opf_tensor_make(w, OPF_F64, 2, ws),
               ty = opf_tensor_make(y, OPF_F64, 2, ys);
    opf_status st =
        run_row("dense", (named_arg[]){{"x", &tx}, {"w", &tw}}, 2, (named_arg[]){{"y", &ty}}, 1, NULL, 0, 0, 0);
    CHECK_OK(st, "dense, NULL attrs");
    CHECK(y[0] == -5.0, "dense [1,-2]·[3,4] with default activation = %g, want -5", y[0]);
}

/* Known values through the public API: [[1,2],[3,4]]·[[5,6],[7,8]] + [1,-100]. */
TEST(test_dense_known_values) {
    const int64_t s22[2] = {2, 2}, s2[1] = {2};
    float x[4] = {1, 2, 3, 4}, w[4] = {5, 6, 7, 8}, b[2] = {1, -100}, y[4];
    opf_tensor tx = opf_tensor_make(x, OPF_F32, 2, s22), tw = opf_tensor_make(w, OPF_F32, 2, s22),
               tb = opf_tensor_make(b, OPF_F32, 1, s2), ty = opf_tensor_make(y, OPF_F32, 2, s22);
    CHECK_OK(opf_dense(&tx, &tw, &tb, OPF_ACT_NONE, &ty), "dense");
    CHECK_CLOSE_F32(y, ((float[]){20, -78, 44, -50}), 4, 0, 0, "dense, no activation");
    CHECK_OK(opf_dense(&tx, &tw, &tb, OPF_ACT_RELU, &ty), "dense relu");
    CHECK_CLOSE_F32(y, ((float[]){20, 0, 44, 0}), 4, 0, 0, "dense, relu");
    CHECK_OK(opf_dense(&tx, &tw, NULL, OPF_ACT_NONE, &ty), "dense no bias");
    CHECK_CLOSE_F32(y, ((float[]){19, 22, 43, 50}), 4, 0, 0, "dense, no bias");
    /* x transposed in place of x: strides swap rows and columns. */
    const int64_t tstr[2] = {1, 2};
    tx.strides = tstr; /* x^T = [[1,3],[2,4]] */
    CHECK_OK(opf_dense(&tx, &tw, NULL, OPF_ACT_NONE, &ty), "dense x^T");
    CHECK_CLOSE_F32(y, ((float[]){26, 30, 38, 44}), 4, 0, 0, "dense, x transposed");
    /* K = 0: y = act(bias). */
    const int64_t x0s[2] = {2, 0}, w0s[2] = {0, 2};
    opf_tensor x0 = opf_tensor_make(x, OPF_F32, 2, x0s), w0 = opf_tensor_make(w, OPF_F32, 2, w0s);
    CHECK_OK(opf_dense(&x0, &w0, &tb, OPF_ACT_RELU, &ty), "dense K=0");
    CHECK_CLOSE_F32(y, ((float[]){1, 0, 1, 0}), 4, 0, 0, "dense K=0 is relu(bias)");
    CHECK_OK(opf_dense(&x0, &w0, NULL, OPF_ACT_NONE, &ty), "dense K=0 no bias");
    CHECK_CLOSE_F32(y, ((float[]){0, 0, 0, 0}), 4, 0, 0, "dense K=0 without bias is 0");
}

/* NaN in x[n, k] makes row n of y NaN (no activation). */
TEST(test_dense_nan_propagates) {
    for (size_t di = 0; di < 2; di++) {
        opf_dtype dt = dtypes[di];
        const int64_t N = 9, K = 20, M = 37;
        const int64_t xs[2] = {N, K}, ws[2] = {K, M}, ys[2] = {N, M};
        tview x, w, y;
        tv_make(&x, dt, 2, xs, TV_CONTIG, 0);
        tv_make(&w, dt, 2, ws, TV_CONTIG, 0);
        tv_make(&y, dt, 2, ys, TV_CONTIG, 0);
        rng r = rng_seed(99);
        tv_fill(&x, &r, 0, NULL);
        tv_fill(&w, &r, 0, NULL);
        size_t nan_at = 4 * (size_t)K + 13; /* x[4, 13] */
        if (dt == OPF_F32) {
            *(float *)tv_at(&x, nan_at) = NAN;
        } else {
            *(double *)tv_at(&x, nan_at) = NAN;
        }
        if (CHECK_OK(opf_dense(&x.t, &w.t, NULL, OPF_ACT_NONE, &y.t), "dense with a NaN")) {
            for (int64_t i = 0; i < N * M; i++) {
                double v = dt == OPF_F32 ? (double)*(float *)tv_at(&y, (size_t)i) : *(double *)tv_at(&y, (size_t)i);
                int row_has_nan = i / M == 4;
                if (!CHECK(row_has_nan == (isnan(v) != 0), "%s y[%lld,%lld] = %g", dtype_str(dt), (long long)(i / M),
                           (long long)(i % M), v)) {
                    break;
                }
            }
        }
        tv_free(&x), tv_free(&w), tv_free(&y);
    }
}

/* ------------------------------------------------------------------------ */
/* Dense gradient                                                            */
/* ------------------------------------------------------------------------ */

static void dense_grad_case(opf_dtype dt, int64_t N, int64_t K, int64_t M, int relu, int want_mask, int strided,
                            int via_table, rng *r) {
    char ctx[256];
    snprintf(ctx, sizeof ctx, "dense_grad%s %s N=%lld K=%lld M=%lld act=%s dx=%s dw=%s db=%s %s",
             via_table ? " (via opf_op_run)" : "", dtype_str(dt), (long long)N, (long long)K, (long long)M,
             relu ? "relu" : "none", want_mask & 1 ? "yes" : "NULL", want_mask & 2 ? "yes" : "NULL",
             want_mask & 4 ? "yes" : "NULL", strided ? "strided" : "contiguous");
    const int64_t nm[2] = {N, M}, nk[2] = {N, K}, km[2] = {K, M}, m1[1] = {M};
    tview dy, x, w, y, gx, gw, gb;
    tv_make(&dy, dt, 2, nm, strided ? TV_TRANSPOSED : TV_CONTIG, 1);
    tv_make(&x, dt, 2, nk, strided ? TV_STEP2 : TV_CONTIG, 0);
    tv_make(&w, dt, 2, km, strided ? TV_NEGATIVE : TV_CONTIG, 2);
    tv_make(&y, dt, 2, nm, strided ? TV_STEP2 : TV_CONTIG, 0);
    tv_make(&gx, dt, 2, nk, strided ? TV_TRANSPOSED : TV_CONTIG, 1);
    tv_make(&gw, dt, 2, km, strided ? TV_STEP2 : TV_CONTIG, 0);
    tv_make(&gb, dt, 1, m1, strided ? TV_NEGATIVE : TV_CONTIG, 3);
    const size_t esz = x.elem, nnm = dy.numel, nnk = x.numel, nkm = w.numel, nm1 = gb.numel;
    void *t = xcalloc(nnm + nnk + nkm + nm1 + 1, esz);
    double *ddy = xcalloc(nnm, sizeof(double)), *dxv = xcalloc(nnk, sizeof(double)),
           *dwv = xcalloc(nkm, sizeof(double)), *dyv = xcalloc(nnm, sizeof(double)), *dz = xcalloc(nnm, sizeof(double));
    tv_fill(&dy, r, 0, t);
    to_double(dt, t, nnm, ddy);
    tv_fill(&x, r, 0, t);
    to_double(dt, t, nnk, dxv);
    tv_fill(&w, r, 0, t);
    to_double(dt, t, nkm, dwv);
    /* y = relu of something: about half exact zeros. */
    for (size_t i = 0; i < nnm; i++) {
        double v = rng_uniform(r, -1.0, 1.0);
        v = v < 0 ? 0 : v;
        if (dt == OPF_F32) {
            *(float *)tv_at(&y, i) = (float)v;
        } else {
            *(double *)tv_at(&y, i) = v;
        }
    }
    tv_gather(&y, t);
    to_double(dt, t, nnm, dyv);
    ref_dense_dz((size_t)N, (size_t)M, ddy, dyv, relu, dz);

    const double eps = ref_eps(dt == OPF_F64);
    double *want_x = xcalloc(nnk, sizeof(double)), *tol_x = xcalloc(nnk, sizeof(double));
    double *want_w = xcalloc(nkm, sizeof(double)), *tol_w = xcalloc(nkm, sizeof(double));
    double *want_b = xcalloc(nm1, sizeof(double)), *tol_b = xcalloc(nm1, sizeof(double));
    double *got = xcalloc(nnk + nkm + nm1 + 1, sizeof(double));
    ref_dense_dx((size_t)N, (size_t)K, (size_t)M, dz, dwv, eps, want_x, tol_x);
    ref_dense_dw((size_t)N, (size_t)K, (size_t)M, dxv, dz, eps, want_w, tol_w);
    ref_dense_db((size_t)N, (size_t)M, dz, eps, want_b, tol_b);

    const opf_tensor *ox = want_mask & 1 ? &gx.t : NULL, *ow = want_mask & 2 ? &gw.t : NULL,
                     *ob = want_mask & 4 ? &gb.t : NULL;
    unsigned char *sdy = snapshot(&dy), *sx = snapshot(&x), *sw = snapshot(&w), *sy = snapshot(&y);
    unsigned char *sgx = snapshot(&gx), *sgw = snapshot(&gw), *sgb = snapshot(&gb);
    opf_activation act = relu ? OPF_ACT_RELU : OPF_ACT_NONE;
    opf_status st;
    if (via_table) {
        st = run_row("dense_grad", (named_arg[]){{"dy", &dy.t}, {"x", &x.t}, {"w", &w.t}, {"y", relu ? &y.t : NULL}}, 4,
                     (named_arg[]){{"dx", ox}, {"dw", ow}, {"db", ob}}, 3, "activation", 0, act, 1);
    } else {
        st = opf_dense_grad(&dy.t, &x.t, &w.t, relu ? &y.t : NULL, act, ox, ow, ob);
    }
    if (CHECK_OK(st, ctx)) {
        if (ox != NULL) {
            tv_gather(&gx, t);
            to_double(dt, t, nnk, got);
            CHECK_CLOSE_TOL(got, want_x, tol_x, nnk, "%s: dx", ctx);
            CHECK_TV_GUARDS(&gx, "%s: dx", ctx);
            free(sgx);
        } else {
            unchanged(&gx, sgx, "dx (not requested)", ctx);
        }
        if (ow != NULL) {
            tv_gather(&gw, t);
            to_double(dt, t, nkm, got);
            CHECK_CLOSE_TOL(got, want_w, tol_w, nkm, "%s: dw", ctx);
            CHECK_TV_GUARDS(&gw, "%s: dw", ctx);
            free(sgw);
        } else {
            unchanged(&gw, sgw, "dw (not requested)", ctx);
        }
        if (ob != NULL) {
            tv_gather(&gb, t);
            to_double(dt, t, nm1, got);
            CHECK_CLOSE_TOL(got, want_b, tol_b, nm1, "%s: db", ctx);
            CHECK_TV_GUARDS(&gb, "%s: db", ctx);
            free(sgb);
        } else {
            unchanged(&gb, sgb, "db (not requested)", ctx);
        }
    } else {
        free(sgx), free(sgw), free(sgb);
    }
    unchanged(&dy, sdy, "dy", ctx);
    unchanged(&x, sx, "x", ctx);
    unchanged(&w, sw, "w", ctx);
    unchanged(&y, sy, "y", ctx);

    free(t), free(ddy), free(dxv), free(dwv), free(dyv), free(dz), free(got);
    free(want_x), free(tol_x), free(want_w), free(tol_w), free(want_b), free(tol_b);
    tv_free(&dy), tv_free(&x), tv_free(&w), tv_free(&y), tv_free(&gx), tv_free(&gw), tv_free(&gb);
}

TEST(test_dense_grad) {
    static const dense_dims shapes[] = {{1, 1, 1},  {7, 17, 33}, {33, 1, 7}, {1, 65, 1},
                                        {17, 0, 5}, {0, 4, 3},   {3, 4, 0},  {65, 33, 129}};
    const size_t num_shapes = sizeof shapes / sizeof shapes[0] - (harness_slow() ? 1 : 0);
    rng r = rng_seed(0x6AADu);
    for (size_t di = 0; di < 2; di++) {
        for (size_t si = 0; si < num_shapes; si++) {
            for (int relu = 0; relu < 2; relu++) {
                for (int mask = 0; mask < 8; mask++) {
                    for (int strided = 0; strided < 2; strided++) {
                        dense_grad_case(dtypes[di], shapes[si].n, shapes[si].k, shapes[si].m, relu, mask, strided, 0,
                                        &r);
                    }
                }
            }
            if (harness_test_failures() > 50) {
                return;
            }
        }
    }
}

TEST(test_dense_grad_via_op_run) {
    rng r = rng_seed(0x6AAEu);
    for (size_t di = 0; di < 2; di++) {
        for (int relu = 0; relu < 2; relu++) {
            dense_grad_case(dtypes[di], 9, 13, 5, relu, 7, relu, 1, &r);
            dense_grad_case(dtypes[di], 9, 13, 5, relu, 2, !relu, 1, &r);
        }
    }
}

/* dz masked by y > 0, by hand: dy = [[1,2],[3,4]], y = [[0,5],[6,0]]. */
TEST(test_dense_grad_known_values) {
    const int64_t s22[2] = {2, 2}, s2[1] = {2};
    double dy[4] = {1, 2, 3, 4}, y[4] = {0, 5, 6, 0}, x[4] = {1, 0, 0, 1}, w[4] = {1, 2, 3, 4};
    double dx[4], dw[4], db[2];
    opf_tensor tdy = opf_tensor_make(dy, OPF_F64, 2, s22), ty = opf_tensor_make(y, OPF_F64, 2, s22),
               tx = opf_tensor_make(x, OPF_F64, 2, s22), tw = opf_tensor_make(w, OPF_F64, 2, s22),
               tdx = opf_tensor_make(dx, OPF_F64, 2, s22), tdw = opf_tensor_make(dw, OPF_F64, 2, s22),
               tdb = opf_tensor_make(db, OPF_F64, 1, s2);
    CHECK_OK(opf_dense_grad(&tdy, &tx, &tw, &ty, OPF_ACT_RELU, &tdx, &tdw, &tdb), "dense_grad relu");
    /* dz = [[0,2],[3,0]]; dx = dz·wᵀ = [[4,8],[3,9]]; dw = xᵀ·dz = dz; db = [3,2]. */
    CHECK_CLOSE_F64(dx, ((double[]){4, 8, 3, 9}), 4, 0, 0, "dx");
    CHECK_CLOSE_F64(dw, ((double[]){0, 2, 3, 0}), 4, 0, 0, "dw");
    CHECK_CLOSE_F64(db, ((double[]){3, 2}), 2, 0, 0, "db");
    CHECK_OK(opf_dense_grad(&tdy, &tx, &tw, NULL, OPF_ACT_NONE, &tdx, NULL, &tdb), "dense_grad none");
    CHECK_CLOSE_F64(dx, ((double[]){5, 11, 11, 25}), 4, 0, 0, "dx without activation");
    CHECK_CLOSE_F64(db, ((double[]){4, 6}), 2, 0, 0, "db without activation");
    CHECK_OK(opf_dense_grad(&tdy, &tx, &tw, &ty, OPF_ACT_RELU, NULL, NULL, NULL), "dense_grad, no outputs");
}

/* ------------------------------------------------------------------------ */
/* Thread-count independence                                                 */
/* ------------------------------------------------------------------------ */

static const int thread_counts[] = {1, 2, 3};

TEST(test_eltwise_thread_count_independent) {
    const int saved = opf_get_num_threads();
    /* Large enough to be split into several chunks (the engine's grain is 2^16). */
    static const shape_case big_shapes[] = {{1, {(1 << 18) + 3}}, {2, {512, 515}}};
    static const shape_case slow_shapes[] = {{1, {(1 << 17) + 3}}, {2, {256, 515}}};
    const shape_case *shapes = harness_slow() ? slow_shapes : big_shapes;
    for (size_t di = 0; di < 2; di++) {
        for (size_t si = 0; si < 2; si++) {
            for (int op = 0; op < E_COUNT; op++) {
                opf_dtype dt = dtypes[di];
                const shape_case *sc = &shapes[si];
                tv_layout lay = si == 0 ? TV_CONTIG : TV_STEP2;
                tview a, b, y;
                tv_make(&a, dt, sc->ndim, sc->dims, lay, 0);
                tv_make(&b, dt, sc->ndim, sc->dims, si == 0 ? TV_CONTIG : TV_NEGATIVE, 0);
                tv_make(&y, dt, sc->ndim, sc->dims, si == 0 ? TV_CONTIG : TV_TRANSPOSED, 0);
                rng r = rng_seed(0x7777u);
                const size_t n = a.numel, esz = a.elem;
                void *va = xcalloc(n, esz), *vb = xcalloc(n, esz), *want = xcalloc(n, esz), *first = xcalloc(n, esz),
                     *got = xcalloc(n, esz);
                tv_fill(&a, &r, 1, va);
                tv_fill(&b, &r, 1, vb);
                ref_eop((eop)op, dt, n, va, vb, want, 0.7);
                char ctx[160];
                for (size_t ti = 0; ti < sizeof thread_counts / sizeof thread_counts[0]; ti++) {
                    snprintf(ctx, sizeof ctx, "%s %s n=%zu %s, %d threads", eops[op].name, dtype_str(dt), n,
                             tv_layout_name(lay), thread_counts[ti]);
                    CHECK_OK(opf_set_num_threads(thread_counts[ti]), ctx);
                    CHECK(opf_get_num_threads() == thread_counts[ti], "%s: opf_get_num_threads() = %d", ctx,
                          opf_get_num_threads());
                    const tview *out = &y;
                    if (op == E_RELU_INPLACE) {
                        tv_scatter(&a, va);
                        out = &a;
                    }
                    CHECK_OK(run_eop((eop)op, 0, 0.7, &a.t, &b.t, &out->t), ctx);
                    tv_gather(out, got);
                    check_exact(dt, got, want, n, ctx);
                    if (ti == 0) {
                        memcpy(first, got, n * esz);
                    } else {
                        CHECK_SAME_BITS(got, first, n, esz, "%s vs 1 thread", ctx);
                    }
                }
                free(va), free(vb), free(want), free(first), free(got);
                tv_free(&a), tv_free(&b), tv_free(&y);
            }
        }
    }
    CHECK_OK(opf_set_num_threads(saved), "restore thread count");
}

TEST(test_dense_thread_count_independent) {
    const int saved = opf_get_num_threads();
    static const dense_dims big_shapes[] = {{300, 300, 300}, {3, 500, 1000}, {257, 1, 259}};
    static const dense_dims slow_shapes[] = {{40, 50, 130}, {3, 300, 200}, {57, 1, 259}};
    const dense_dims *shapes = harness_slow() ? slow_shapes : big_shapes;
    for (size_t di = 0; di < 2; di++) {
        for (size_t si = 0; si < 3; si++) {
            opf_dtype dt = dtypes[di];
            const dense_dims *s = &shapes[si];
            const int64_t xs[2] = {s->n, s->k}, ws[2] = {s->k, s->m}, bs[1] = {s->m}, ys[2] = {s->n, s->m};
            tview x, w, b, y;
            tv_make(&x, dt, 2, xs, si == 1 ? TV_TRANSPOSED : TV_CONTIG, 0);
            tv_make(&w, dt, 2, ws, TV_CONTIG, 0);
            tv_make(&b, dt, 1, bs, TV_CONTIG, 0);
            tv_make(&y, dt, 2, ys, si == 2 ? TV_TRANSPOSED : TV_CONTIG, 0);
            rng r = rng_seed(0x3003u);
            tv_fill(&x, &r, 0, NULL);
            tv_fill(&w, &r, 0, NULL);
            tv_fill(&b, &r, 0, NULL);
            const size_t ny = y.numel, esz = y.elem;
            void *first = xcalloc(ny, esz), *got = xcalloc(ny, esz);
            for (size_t ti = 0; ti < sizeof thread_counts / sizeof thread_counts[0]; ti++) {
                char ctx[160];
                snprintf(ctx, sizeof ctx, "dense %s %lldx%lldx%lld, %d threads", dtype_str(dt), (long long)s->n,
                         (long long)s->k, (long long)s->m, thread_counts[ti]);
                CHECK_OK(opf_set_num_threads(thread_counts[ti]), ctx);
                CHECK_OK(opf_dense(&x.t, &w.t, &b.t, OPF_ACT_RELU, &y.t), ctx);
                tv_gather(&y, got);
                if (ti == 0) {
                    memcpy(first, got, ny * esz);
                } else {
                    CHECK_SAME_BITS(got, first, ny, esz, "%s vs 1 thread", ctx);
                }
            }
            /* And the result is right (spot check against the reference on every 7th row). */
            void *tx = xcalloc(x.numel, esz), *tw = xcalloc(w.numel, esz), *tb = xcalloc(b.numel, esz);
            tv_gather(&x, tx), tv_gather(&w, tw), tv_gather(&b, tb);
            double *dx = xcalloc(x.numel, sizeof(double)), *dw = xcalloc(w.numel, sizeof(double)),
                   *db = xcalloc(b.numel, sizeof(double));
            to_double(dt, tx, x.numel, dx), to_double(dt, tw, w.numel, dw), to_double(dt, tb, b.numel, db);
            double *want = xcalloc((size_t)s->m, sizeof(double)), *tol = xcalloc((size_t)s->m, sizeof(double)),
                   *g = xcalloc((size_t)s->m, sizeof(double));
            for (int64_t row = 0; row < s->n; row += 7) {
                ref_dense(1, (size_t)s->k, (size_t)s->m, dx + row * s->k, dw, db, 1, ref_eps(dt == OPF_F64), want, tol);
                to_double(dt, (char *)first + (size_t)(row * s->m) * esz, (size_t)s->m, g);
                if (!CHECK_CLOSE_TOL(g, want, tol, (size_t)s->m, "dense %s %lldx%lldx%lld row %lld", dtype_str(dt),
                                     (long long)s->n, (long long)s->k, (long long)s->m, (long long)row)) {
                    break;
                }
            }
            free(tx), free(tw), free(tb), free(dx), free(dw), free(db), free(want), free(tol), free(g);
            free(first), free(got);
            tv_free(&x), tv_free(&w), tv_free(&b), tv_free(&y);
        }
    }
    CHECK_OK(opf_set_num_threads(saved), "restore thread count");
}

int main(void) {
    RUN_TEST(test_eltwise_known_values);
    RUN_TEST(test_zero_d_and_empty);
    RUN_TEST(test_odd_but_valid_layouts);
    RUN_TEST(test_relu);
    RUN_TEST(test_relu_inplace);
    RUN_TEST(test_relu_grad);
    RUN_TEST(test_scale);
    RUN_TEST(test_add);
    RUN_TEST(test_eltwise_via_op_run);
    RUN_TEST(test_dense_known_values);
    RUN_TEST(test_dense);
    RUN_TEST(test_dense_via_op_run);
    RUN_TEST(test_matmul);
    RUN_TEST(test_matmul_known_values);
    RUN_TEST(test_dense_nan_propagates);
    RUN_TEST(test_dense_grad_known_values);
    RUN_TEST(test_dense_grad);
    RUN_TEST(test_dense_grad_via_op_run);
    RUN_TEST(test_eltwise_thread_count_independent);
    RUN_TEST(test_dense_thread_count_independent);
    return harness_summary();
}
