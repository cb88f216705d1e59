/*
 * test_authoring.c — the kernel author's layer: ops declared by signature
 * (opf_ops_resolve) with authored kernels (OPF_ELTWISE_KERNEL,
 * OPF_ROW_KERNEL), run over every layout the harness makes, against plain C
 * loops written here; and every declaration mistake refused with a message.
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"

/* --- the user's ops ---------------------------------------------------------------------------------------------- */

/* Elementwise, one input, an attribute: y = x*x + c (no math calls). */
OPF_ELTWISE_KERNEL(sq_plus, (x), (y), y = x * x + (T)attrs[0].f;)
OPF_ELTWISE_KERNEL(sq_plus_grad, (dy, x), (dx), dx = 2 * x * dy;)
/* Two inputs, two outputs. */
OPF_ELTWISE_KERNEL(sum_diff, (a, b), (s, d), s = a + b; d = a - b;)
/* One input and much arithmetic per element. */
OPF_ELTWISE_KERNEL(smooth, (x), (y), y = opf_tanh(x) * opf_exp(-x * x) + opf_log1p(x * x);)
/* Two and three inputs, much arithmetic per element. */
OPF_ELTWISE_KERNEL(smooth2, (a, b), (y), y = opf_tanh(a) * opf_exp(-b * b) + opf_log1p(a * b);)
OPF_ELTWISE_KERNEL(smooth3, (a, b, c), (y), y = opf_tanh(a) * opf_exp(-b * c) + opf_log1p(a * a + c);)
/* Row-wise: sum and maximum of each row. */
OPF_ROW_KERNEL(row_stats, (x), (sum, max), sum[0] = opf_sum(n, x); max[0] = opf_max(n, x);)
/* Row-wise with an unbatched input and a batched output: y = (x - mean) * w. */
OPF_ROW_KERNEL(center_scale, (x, w), (y), {
    T mean = n > 0 ? opf_sum(n, x) / (T)n : (T)0;
    for (int64_t i = 0; i < n; i++) {
        y[i] = (x[i] - mean) * (w != NULL ? w[i] : (T)1);
    }
})

/* Row-wise with OPF_STORE_ROW: y stored by it (streamed by the kernel
 * where the engine asks), z by a plain loop (which the engine then streams
 * from scratch), and a summed output added to in y's expression. */
OPF_ROW_KERNEL(store_rows, (x, w), (y, z, colsum), {
    const T mean = n > 0 ? opf_sum(n, x) / (T)n : (T)0;
    if (colsum != NULL) {
        OPF_STORE_ROW(y, i, (colsum[i] += x[i], (x[i] - mean) * w[i]));
    } else {
        OPF_STORE_ROW(y, i, (x[i] - mean) * w[i]);
    }
    for (int64_t i = 0; z != NULL && i < n; i++) {
        z[i] = x[i] * w[i];
    }
})

/* Row-wise with a first pass of its own that asks for the first half of the
 * next row (OPF_NEXT_ROW_FIRST_PASS) and OPF_STORE_ROW for the rest: y = x -
 * mean(x), the sum in blocks of 64, a step each. */
OPF_ROW_KERNEL(center_rows, (x), (y), {
    OPF_NEXT_ROW_FIRST_PASS(next, (n + 63) / 64);
    T sum = 0;
    for (int64_t at = 0; at < n; at += 64) {
        opf_next_row_step(&next, at / 64);
        for (int64_t i = at; i < n && i < at + 64; i++) {
            sum += x[i];
        }
    }
    const T mean = n > 0 ? sum / (T)n : (T)0;
    OPF_STORE_ROW(y, i, x[i] - mean);
})

/* The same with the layer's reduction as the first pass (OPF_ROW_DOT): z =
 * y <x, y>. */
OPF_ROW_KERNEL(scale_by_dot, (x, y), (z), {
    const T s = OPF_ROW_DOT(n, x, y);
    OPF_STORE_ROW(z, i, y[i] * s);
})

/* Row-wise, reporting whether OPF_STORE_ROW streams the row: y = 2 x,
 * streamed = OPF_ROW_STREAMED(y). */
OPF_ROW_KERNEL(streamed_rows, (x), (y, streamed), {
    streamed[0] = (T)OPF_ROW_STREAMED(y);
    OPF_STORE_ROW(y, i, 2 * x[i]);
})

/* Row-wise with OPF_ROW_SCRATCH, softmax's pattern: y = e / sum(e) with
 * e = x^2 + 1 computed first (into the row's scratch where y is streamed),
 * and normalize_rows_plain, the same in plain loops over y. The count of
 * rows computed in a scratch row that is not y tells the test that the
 * engine gave one. */
static _Atomic long long rows_in_scratch;
OPF_ROW_KERNEL(normalize_rows, (x), (y), {
    T *const e = OPF_ROW_SCRATCH(y);
    rows_in_scratch += (void *)e != (void *)y;
    T s = 0;
    for (int64_t i = 0; i < n; i++) {
        e[i] = x[i] * x[i] + 1;
        s += e[i];
    }
    const T inv = (T)1 / s;
    OPF_STORE_ROW(y, i, e[i] * inv);
})
OPF_ROW_KERNEL(normalize_rows_plain, (x), (y), {
    T s = 0;
    for (int64_t i = 0; i < n; i++) {
        y[i] = x[i] * x[i] + 1;
        s += y[i];
    }
    const T inv = (T)1 / s;
    for (int64_t i = 0; i < n; i++) {
        y[i] = y[i] * inv;
    }
})
/* The same with its stores left to the next call (OPF_STORE_ROW_LATER),
 * which stores them in its first pass (the sum, 3 steps: shares that do not
 * divide a row's lines) and OPF_ROW_SCRATCH; rows_left counts the rows left. */
static _Atomic long long rows_left;
OPF_ROW_KERNEL(normalize_rows_later, (x), (y), {
    T s = 0;
    {
        OPF_EARLIER_ROW(earlier, 3);
        for (int64_t k = 0; k < 3; k++) {
            for (int64_t i = n * k / 3; i < n * (k + 1) / 3; i++) {
                s += x[i] * x[i] + 1;
            }
            opf_earlier_row_step(&earlier);
        }
    }
    T *const e = OPF_ROW_SCRATCH(y);
    for (int64_t i = 0; i < n; i++) {
        e[i] = x[i] * x[i] + 1;
    }
    rows_left += OPF_ROW_STREAMED(y) && (void *)e != (void *)y;
    OPF_STORE_ROW_LATER(y, e, (T)1 / s);
})

/* Two outputs left to the next call: a call leaves one row (the second is
 * stored at once). y = 2 x and z = 3 x, each computed in its scratch. */
OPF_ROW_KERNEL(twice_later, (x), (y, z), {
    T *const e = OPF_ROW_SCRATCH(y);
    T *const f = OPF_ROW_SCRATCH(z);
    for (int64_t i = 0; i < n; i++) {
        e[i] = x[i];
        f[i] = x[i];
    }
    OPF_STORE_ROW_LATER(y, e, (T)2);
    OPF_STORE_ROW_LATER(z, f, (T)3);
})

/* Row-wise with an output summed over the rows (no "..."): the dot product
 * of each row of x and y, and the column sums of x. */
OPF_ROW_KERNEL(col_stats, (x, y), (dot, colsum), {
    dot[0] = opf_dot(n, x, y);
    if (colsum != NULL) {
        for (int64_t i = 0; i < n; i++) {
            colsum[i] += x[i];
        }
    }
})

/* Row-wise with much arithmetic per element, in blocks that each ask for
 * the memory ahead of them (opf_prefetch_ahead): the sum of exp(x). */
OPF_ROW_KERNEL(exp_row_sum, (x), (s), {
    T acc = 0;
    for (int64_t at = 0; at < n; at += 64) {
        const int64_t end = n - at < 64 ? n : at + 64;
        opf_prefetch_ahead(x + at, 64 * (int64_t)sizeof(T));
        for (int64_t i = at; i < end; i++) {
            acc += opf_exp(x[i]);
        }
    }
    s[0] = acc;
})

/* A reduction of the user's own written as opf_dot is (64 partial sums for
 * float, 32 for double, combined by OPF_PAIRWISE, the rest added after):
 * the sum of squares, beside opf_dot(n, x, x), which it must match bit for
 * bit. */
#define USER_ADD(a, b) ((a) + (b))
OPF_ROW_KERNEL(sum_squares, (x), (own, dot), {
    enum { lanes = OPF_IS_F64 ? 32 : 64 };
    T acc[lanes];
    for (int j = 0; j < lanes; j++) {
        acc[j] = 0;
    }
    int64_t i = 0;
    for (; i + lanes <= n; i += lanes) {
        for (int j = 0; j < lanes; j++) {
            acc[j] = acc[j] + x[i + j] * x[i + j];
        }
    }
    OPF_PAIRWISE(acc, lanes, USER_ADD);
    T s = acc[0];
    for (; i < n; i++) {
        s = s + x[i] * x[i];
    }
    own[0] = s;
    dot[0] = opf_dot(n, x, x);
})

/* Row-wise with a `return` in the body: y = x up to the row's first
 * negative element, zeros from there. The return ends its row only: the
 * engine hands the kernel runs of rows, which the rest of the run follows. */
OPF_ROW_KERNEL(until_negative, (x), (y), {
    for (int64_t i = 0; i < n; i++) {
        if (x[i] < 0) {
            for (int64_t j = i; j < n; j++) {
                y[j] = 0;
            }
            return;
        }
        y[i] = x[i];
    }
})

/* y = 2 x, rows of the shape of `like` and `w`, whose values it never
 * reads (": shape" in its signature). */
OPF_ROW_KERNEL(twice_like, (x, like, w), (y), {
    for (int64_t i = 0; i < n; i++) {
        y[i] = 2 * x[i];
    }
})

/* Hand-written row kernels (float64): each row's sum, from a kernel that
 * says it takes runs of rows (OPF_ROW_KERNEL_RUNS) and from one that does
 * not; each notes the longest run it was given. */
static _Atomic long long longest_run[2];
static void row_sums(const opf_row_args *args, int runs) {
    const int64_t rows = args->rows > 1 ? args->rows : 1;
    for (int64_t r = 0; r < rows; r++) {
        const double *x = (const double *)args->in[0] + r * args->in_stride[0];
        double *y = (double *)args->out[0] + r * args->out_stride[0];
        double s = 0;
        for (int64_t i = 0; i < args->in_len[0]; i++) {
            s += x[i];
        }
        y[0] = s;
    }
    for (long long seen = longest_run[runs]; seen < args->rows;) {
        if (atomic_compare_exchange_weak(&longest_run[runs], &seen, args->rows)) {
            break;
        }
    }
}
static void row_sums_runs(const opf_row_args *args) { row_sums(args, 1); }
static void row_sums_single(const opf_row_args *args) { row_sums(args, 0); }
static const opf_row_kernel row_sums_by_runs = {
    .num_inputs = 1, .num_outputs = 1, .f64 = {row_sums_runs}, .flags = OPF_ROW_KERNEL_RUNS};
static const opf_row_kernel row_sums_by_rows = {.num_inputs = 1, .num_outputs = 1, .f64 = {row_sums_single}};

static opf_status fail_compute(const opf_tensor *const *in, const opf_tensor *const *out, const opf_attr_value *attrs) {
    (void)in, (void)out, (void)attrs;
    return opf_error(OPF_E_UNSUPPORTED, "this kernel refuses %s", "everything");
}

static const opf_op_decl user_decls[] = {
    {"sq_plus(x, *, c: float = 0.5) -> y", .doc = "x*x + c", .grad = "dx = sq_plus_grad(dy, x)",
     .jvp = "y' = sq_plus_grad(x', x)", .eltwise = &sq_plus},
    {"sq_plus_grad(dy, x) -> dx", .doc = "2 x dy", .eltwise = &sq_plus_grad},
    {"sum_diff(a, b) -> (s, d)", .doc = "a + b and a - b", .jvp = "s', d' = sum_diff(a', b')", .eltwise = &sum_diff},
    {"smooth(x) -> y", .doc = "tanh(x) exp(-x^2) + log1p(x^2)", .eltwise = &smooth},
    {"smooth2(a, b) -> y", .doc = "tanh(a) exp(-b^2) + log1p(a b)", .eltwise = &smooth2},
    {"smooth3(a, b, c) -> y", .doc = "tanh(a) exp(-b c) + log1p(a^2 + c)", .eltwise = &smooth3},
    {"row_stats(x[..., M]) -> (sum[...], max[...])", .doc = "sum and max of rows", .row = &row_stats},
    {"row_stats_2d(x[..., M, N]) -> (sum[...], max[...])", .doc = "sum and max of 2-d rows", .row = &row_stats},
    {"center_scale(x[..., M], w[M]?) -> y[..., M]", .doc = "centered rows times w", .row = &center_scale},
    {"store_rows(x[..., M], w[M]) -> (y[..., M], z[..., M]?, colsum[M]?)", .doc = "centered rows times w, x w",
     .row = &store_rows},
    {"scale_by_dot(x[..., M], y[..., M]) -> z[..., M]", .doc = "y <x, y>, the dot asking for the next row",
     .row = &scale_by_dot},
    {"center_rows(x[..., M]) -> y[..., M]", .doc = "x - mean(x), the next row asked for in the first pass too",
     .row = &center_rows},
    {"streamed_rows(x[..., M]) -> (y[..., M], streamed[...])", .doc = "2 x, and whether y's row was streamed",
     .row = &streamed_rows},
    {"normalize_rows(x[..., M]) -> y[..., M]", .doc = "e / sum(e), e = x^2 + 1", .row = &normalize_rows},
    {"normalize_rows_plain(x[..., M]) -> y[..., M]", .doc = "the same, in plain loops", .row = &normalize_rows_plain},
    {"normalize_rows_later(x[..., M]) -> y[..., M]", .doc = "the same, stored a call later",
     .row = &normalize_rows_later},
    {"twice_later(x[..., M]) -> (y[..., M], z[..., M])", .doc = "2 x and 3 x, stored a call later",
     .row = &twice_later},
    {"col_stats(x[..., M], y[..., M]) -> (dot[...], colsum[M]?)", .doc = "row dots and column sums", .row = &col_stats},
    {"exp_row_sum(x[..., M]) -> s[...]", .doc = "sum of exp over rows", .row = &exp_row_sum},
    {"sum_squares(x[..., M]) -> (own[...], dot[...])", .doc = "sums of squares, two ways", .row = &sum_squares},
    {"until_negative(x[..., M]) -> y[..., M]", .doc = "x up to its first negative", .row = &until_negative},
    {"row_sums_by_runs(x[..., M]) -> y[...]", .doc = "row sums, runs of rows", .dtypes = OPF_DTYPES_F64,
     .row = &row_sums_by_runs},
    {"row_sums_by_rows(x[..., M]) -> y[...]", .doc = "row sums, a row per call", .dtypes = OPF_DTYPES_F64,
     .row = &row_sums_by_rows},
    {"twice_like(x[..., M], like[..., M]: shape, w[M]: shape) -> y[..., M]", .doc = "2 x", .row = &twice_like},
    {"fail(x) -> y", .doc = "always fails", .compute = fail_compute},
    {0},
};

static const opf_op_table *user_table(void) {
    static const opf_ops_decl decl = {OPF_TABLE_ABI_VERSION, "myops", user_decls};
    static const opf_op_table *table;
    return resolve_once(&decl, &table);
}

static const opf_op_def *user_op(const char *name) { return opf_op_find(user_table(), name); }

/* --- references -------------------------------------------------------------------------------------------------- */

static double get(const tview *v, size_t i) {
    return v->t.dtype == OPF_F32 ? (double)*(const float *)tv_at(v, i) : *(const double *)tv_at(v, i);
}

/* --- tests ------------------------------------------------------------------------------------------------------- */

TEST(test_resolve) {
    const opf_op_table *t = user_table();
    if (!CHECK(t != NULL, "resolve failed: %s", opf_last_error())) {
        return;
    }
    CHECK(opf_op_table_validate(t) == OPF_OK, "%s", opf_last_error());
    const opf_op_def *sq = user_op("sq_plus"), *rs = user_op("row_stats"), *cs = user_op("center_scale");
    CHECK(sq != NULL && sq->num_inputs == 1 && sq->num_outputs == 1 && sq->num_attrs == 1 &&
              (sq->flags & OPF_OP_ELEMENTWISE) && sq->attrs[0].default_value.f == 0.5 && sq->num_grads == 1,
          "sq_plus row");
    CHECK(sq != NULL && strcmp(sq->qualname, "myops.sq_plus") == 0, "qualname");
    /* "y' = sq_plus_grad(x', x)": the tangent of x, then x, into sq_plus_grad; its output is y's tangent. */
    CHECK(sq != NULL && sq->num_jvps == 1 && strcmp(sq->jvps[0].op, "sq_plus_grad") == 0 &&
              sq->jvps[0].num_sources == 2 && sq->jvps[0].sources[0].kind == OPF_FROM_TANGENT &&
              sq->jvps[0].sources[0].index == 0 && sq->jvps[0].sources[1].kind == OPF_FROM_INPUT &&
              sq->jvps[0].num_produces == 1 && sq->jvps[0].produces[0] == 0,
          "sq_plus tangent rule");
    const opf_op_def *sd = user_op("sum_diff");
    CHECK(sd != NULL && sd->num_jvps == 1 && sd->jvps[0].sources[1].kind == OPF_FROM_TANGENT &&
              sd->jvps[0].sources[1].index == 1 && sd->jvps[0].produces[1] == 1 && sd->num_grads == 0,
          "sum_diff tangent rule");
    CHECK(rs != NULL && rs->num_outputs == 2 && rs->output_shapes[0].kind == OPF_SHAPE_BATCH &&
              rs->output_shapes[0].drop == 1 && rs->output_shapes[0].rank == 0,
          "row_stats output rule");
    CHECK(cs != NULL && (cs->inputs[1].flags & OPF_ARG_OPTIONAL) && !(cs->inputs[1].flags & OPF_ARG_BATCHED) &&
              (cs->inputs[0].flags & OPF_ARG_BATCHED) && cs->inputs[0].core_dims == 1 &&
              cs->output_shapes[0].kind == OPF_SHAPE_LIKE,
          "center_scale row");
}

/* sq_plus on every layout, dtype and a few shapes, out of place and in place. */
TEST(test_eltwise_layouts) {
    const opf_op_def *op = user_op("sq_plus");
    if (!CHECK(op != NULL, "no sq_plus")) {
        return;
    }
    static const int64_t shapes[][3] = {{0, 0, 0}, {1, 1, 1}, {3, 5, 1}, {7, 130, 1}, {4, 0, 1}, {2, 3, 66}};
    static const int32_t ranks[] = {0, 1, 2, 2, 2, 3};
    rng r = rng_seed(11);
    for (int dt = 0; dt < 2; dt++) {
        opf_dtype dtype = dt ? OPF_F64 : OPF_F32;
        for (size_t s = 0; s < sizeof ranks / sizeof ranks[0]; s++) {
            for (int lx = 0; lx < TV_LAYOUT_COUNT; lx++) {
                for (int ly = 0; ly < TV_LAYOUT_COUNT - 1; ly++) { /* outputs cannot broadcast */
                    tview x, y;
                    tv_make(&x, dtype, ranks[s], shapes[s], (tv_layout)lx, 1);
                    tv_make(&y, dtype, ranks[s], shapes[s], (tv_layout)ly, 2);
                    tv_fill(&x, &r, 0, NULL);
                    opf_attr_value attrs[1] = {{.f = -0.25}};
                    opf_status st = opf_op_run(op, (const opf_tensor *[]){&x.t}, (const opf_tensor *[]){&y.t}, attrs);
                    char ctx[128];
                    snprintf(ctx, sizeof ctx, "%s rank %d shape %zu x %s y %s", opf_dtype_name(dtype), ranks[s], s,
                             tv_layout_name((tv_layout)lx), tv_layout_name((tv_layout)ly));
                    if (CHECK(st == OPF_OK, "%s: %s", ctx, opf_last_error())) {
                        for (size_t i = 0; i < y.numel; i++) {
                            double xv = get(&x, i), want = xv * xv - 0.25, got = get(&y, i);
                            if (!CHECK(fabs(got - want) <= 1e-6 * (1 + fabs(want)), "%s: [%zu] %g, want %g", ctx, i,
                                       got, want)) {
                                break;
                            }
                        }
                        CHECK_TV_GUARDS(&y, "%s", ctx);
                    }
                    tv_free(&x);
                    tv_free(&y);
                }
            }
            /* In place: y is x (not for broadcast views, whose elements overlap). */
            for (int lx = 0; lx < TV_BROADCAST; lx++) {
                tview x;
                tv_make(&x, dtype, ranks[s], shapes[s], (tv_layout)lx, 0);
                double before[400];
                tv_fill(&x, &r, 0, NULL);
                for (size_t i = 0; i < x.numel && i < 400; i++) {
                    before[i] = get(&x, i);
                }
                opf_status st = opf_op_run(op, (const opf_tensor *[]){&x.t}, (const opf_tensor *[]){&x.t}, NULL);
                CHECK(st == OPF_OK, "in place %s: %s", tv_layout_name((tv_layout)lx), opf_last_error());
                for (size_t i = 0; st == OPF_OK && i < x.numel && i < 400; i++) {
                    double want = before[i] * before[i] + 0.5;
                    if (!CHECK(fabs(get(&x, i) - want) <= 1e-6 * (1 + want), "in place %s [%zu]",
                               tv_layout_name((tv_layout)lx), i)) {
                        break;
                    }
                }
                tv_free(&x);
            }
        }
    }
}

/* Two outputs, and large enough (more than 16 MiB read and written) for the streamed path. */
TEST(test_eltwise_two_outputs) {
    const opf_op_def *op = user_op("sum_diff");
    const int64_t n = harness_slow() ? 5000 : (int64_t)1 << 21;
    float *a = xcalloc((size_t)n, 4), *b = xcalloc((size_t)n, 4), *s = xcalloc((size_t)n, 4),
          *d = xcalloc((size_t)n, 4);
    rng r = rng_seed(3);
    fill_uniform_f32(&r, a, (size_t)n, -4, 4);
    fill_uniform_f32(&r, b, (size_t)n, -4, 4);
    opf_tensor ta = opf_tensor_make(a, OPF_F32, 1, &n), tb = opf_tensor_make(b, OPF_F32, 1, &n);
    opf_tensor ts = opf_tensor_make(s, OPF_F32, 1, &n), td = opf_tensor_make(d, OPF_F32, 1, &n);
    CHECK(opf_op_run(op, (const opf_tensor *[]){&ta, &tb}, (const opf_tensor *[]){&ts, &td}, NULL) == OPF_OK, "%s",
          opf_last_error());
    for (int64_t i = 0; i < n; i++) {
        if (!CHECK(s[i] == a[i] + b[i] && d[i] == a[i] - b[i], "[%lld]", (long long)i)) {
            break;
        }
    }
    /* Off the 64-byte lines, and not a whole number of blocks: the streamed
     * blocks' head and tail. */
    const int64_t m = n - 5;
    opf_tensor oa = opf_tensor_make(a + 3, OPF_F32, 1, &m), ob = opf_tensor_make(b + 3, OPF_F32, 1, &m);
    opf_tensor os = opf_tensor_make(s + 1, OPF_F32, 1, &m), od = opf_tensor_make(d + 2, OPF_F32, 1, &m);
    CHECK(opf_op_run(op, (const opf_tensor *[]){&oa, &ob}, (const opf_tensor *[]){&os, &od}, NULL) == OPF_OK, "%s",
          opf_last_error());
    for (int64_t i = 0; i < m; i++) {
        if (!CHECK(s[i + 1] == a[i + 3] + b[i + 3] && d[i + 2] == a[i + 3] - b[i + 3], "offset [%lld]", (long long)i)) {
            break;
        }
    }
    /* In place on both inputs: s onto a, d onto b. */
    float a0 = a[n - 1], b0 = b[n - 1];
    CHECK(opf_op_run(op, (const opf_tensor *[]){&ta, &tb}, (const opf_tensor *[]){&ta, &tb}, NULL) == OPF_OK, "%s",
          opf_last_error());
    CHECK(a[n - 1] == a0 + b0 && b[n - 1] == a0 - b0, "in place: %g %g", (double)a[n - 1], (double)b[n - 1]);
    free(a), free(b), free(s), free(d);
}

/* One input, large enough to stream (more than 16 MiB in all): a kernel that
 * computes little (streamed) and one that computes much (each thread's probe
 * may store its chunk in place after its first blocks), on one thread and
 * two, off the 64-byte lines, and in place: the same bits as the kernel run
 * on small pieces (below the streaming size). */
TEST(test_eltwise_one_input_large) {
    const int threads = opf_get_num_threads();
    const int64_t n = harness_slow() ? 5000 : ((int64_t)1 << 22) + 37, piece = 4096;
    float *x = xcalloc((size_t)n + 3, 4), *y = xcalloc((size_t)n + 1, 4), *want = xcalloc((size_t)n, 4);
    rng r = rng_seed(11);
    fill_uniform_f32(&r, x, (size_t)n + 3, -3, 3);
    const char *names[2] = {"smooth", "sq_plus"};
    for (int o = 0; o < 2; o++) {
        const opf_op_def *op = user_op(names[o]);
        for (int64_t at = 0; at < n; at += piece) {
            const int64_t len = n - at < piece ? n - at : piece;
            opf_tensor tx = opf_tensor_make(x + 3 + at, OPF_F32, 1, &len);
            opf_tensor tw = opf_tensor_make(want + at, OPF_F32, 1, &len);
            CHECK(opf_op_run(op, (const opf_tensor *[]){&tx}, (const opf_tensor *[]){&tw}, NULL) == OPF_OK, "%s",
                  opf_last_error());
        }
        opf_tensor tx = opf_tensor_make(x + 3, OPF_F32, 1, &n), ty = opf_tensor_make(y + 1, OPF_F32, 1, &n);
        for (int t = 1; t <= 2; t++) {
            opf_set_num_threads(t);
            memset(y, 0, ((size_t)n + 1) * 4);
            CHECK(opf_op_run(op, (const opf_tensor *[]){&tx}, (const opf_tensor *[]){&ty}, NULL) == OPF_OK, "%s",
                  opf_last_error());
            CHECK_SAME_BITS(y + 1, want, n, 4, "%s, %d thread(s)", names[o], t);
        }
        /* In place, on one thread. */
        opf_set_num_threads(1);
        memcpy(y + 1, x + 3, (size_t)n * 4);
        CHECK(opf_op_run(op, (const opf_tensor *[]){&ty}, (const opf_tensor *[]){&ty}, NULL) == OPF_OK, "%s",
              opf_last_error());
        CHECK_SAME_BITS(y + 1, want, n, 4, "%s in place", names[o]);
    }
    opf_set_num_threads(threads);
    free(x), free(y), free(want);
}

/* Two and three inputs, large enough to stream: kernels that compute much
 * (each thread's probe may switch its chunk to shorter blocks after its
 * first ones) and one that computes little, on one thread and two, each
 * input off the 64-byte lines by its own amount, and in place on the first
 * input: the same bits as the kernel run on small pieces. */
TEST(test_eltwise_inputs_large) {
    const int threads = opf_get_num_threads();
    const int64_t n = harness_slow() ? 5000 : ((int64_t)1 << 21) + 37, piece = 4096;
    float *in[3], *y = xcalloc((size_t)n + 2, 4), *want = xcalloc((size_t)n, 4);
    rng r = rng_seed(12);
    for (int k = 0; k < 3; k++) {
        in[k] = xcalloc((size_t)n + 3, 4);
        fill_uniform_f32(&r, in[k], (size_t)n + 3, 0, 2);
    }
    const int offset[3] = {3, 1, 2}; /* elements past each input's start */
    const char *names[3] = {"smooth2", "smooth3", "sq_plus_grad"};
    const int arity[3] = {2, 3, 2};
    for (int o = 0; o < 3; o++) {
        const opf_op_def *op = user_op(names[o]);
        opf_tensor t[3];
        const opf_tensor *ins[3] = {&t[0], &t[1], &t[2]};
        for (int64_t at = 0; at < n; at += piece) {
            const int64_t len = n - at < piece ? n - at : piece;
            for (int k = 0; k < arity[o]; k++) {
                t[k] = opf_tensor_make(in[k] + offset[k] + at, OPF_F32, 1, &len);
            }
            opf_tensor tw = opf_tensor_make(want + at, OPF_F32, 1, &len);
            CHECK(opf_op_run(op, ins, (const opf_tensor *[]){&tw}, NULL) == OPF_OK, "%s", opf_last_error());
        }
        for (int k = 0; k < arity[o]; k++) {
            t[k] = opf_tensor_make(in[k] + offset[k], OPF_F32, 1, &n);
        }
        opf_tensor ty = opf_tensor_make(y + 2, OPF_F32, 1, &n);
        for (int th = 1; th <= 2; th++) {
            opf_set_num_threads(th);
            memset(y, 0, ((size_t)n + 2) * 4);
            CHECK(opf_op_run(op, ins, (const opf_tensor *[]){&ty}, NULL) == OPF_OK, "%s", opf_last_error());
            CHECK_SAME_BITS(y + 2, want, n, 4, "%s, %d thread(s)", names[o], th);
        }
        /* In place on the first input (a copy of it), on two threads. */
        memcpy(y + 2, in[0] + offset[0], (size_t)n * 4);
        t[0] = ty;
        CHECK(opf_op_run(op, ins, (const opf_tensor *[]){&ty}, NULL) == OPF_OK, "%s", opf_last_error());
        CHECK_SAME_BITS(y + 2, want, n, 4, "%s in place", names[o]);
    }
    opf_set_num_threads(threads);
    for (int k = 0; k < 3; k++) {
        free(in[k]);
    }
    free(y), free(want);
}

/* Row sums and maxima of every layout of a [4, 7, 33] tensor, against loops. */
TEST(test_rows_layouts) {
    const opf_op_def *op = user_op("row_stats");
    static const int64_t shape[3] = {4, 7, 33};
    rng r = rng_seed(5);
    for (int dt = 0; dt < 2; dt++) {
        for (int lx = 0; lx < TV_LAYOUT_COUNT; lx++) {
            for (int ly = 0; ly < TV_BROADCAST; ly++) {
                tview x, sum, max;
                tv_make(&x, dt ? OPF_F64 : OPF_F32, 3, shape, (tv_layout)lx, 0);
                tv_make(&sum, x.t.dtype, 2, shape, (tv_layout)ly, 1);
                tv_make(&max, x.t.dtype, 2, shape, (tv_layout)ly, 3);
                tv_fill(&x, &r, 0, NULL);
                opf_status st =
                    opf_op_run(op, (const opf_tensor *[]){&x.t}, (const opf_tensor *[]){&sum.t, &max.t}, NULL);
                if (CHECK(st == OPF_OK, "%s: %s", tv_layout_name((tv_layout)lx), opf_last_error())) {
                    for (size_t row = 0; row < 28; row++) {
                        double s = 0, m = -INFINITY;
                        for (size_t i = 0; i < 33; i++) {
                            double v = get(&x, row * 33 + i);
                            s += v;
                            m = v > m ? v : m;
                        }
                        CHECK(fabs(get(&sum, row) - s) <= 1e-5 * (1 + fabs(s)) && get(&max, row) == m,
                              "%s x %s y, row %zu: sum %g want %g, max %g want %g", tv_layout_name((tv_layout)lx),
                              tv_layout_name((tv_layout)ly), row, get(&sum, row), s, get(&max, row), m);
                    }
                    CHECK_TV_GUARDS(&sum, "sum");
                    CHECK_TV_GUARDS(&max, "max");
                }
                tv_free(&x), tv_free(&sum), tv_free(&max);
            }
        }
    }
}

/* Edge shapes: a 1-d input is one row (0-d outputs), empty rows, no rows. */
TEST(test_rows_edges) {
    const opf_op_def *op = user_op("row_stats");
    double x[5] = {1, -2, 8, 3, 0.5}, s = 0, m = 0;
    int64_t n = 5, zero = 0, empty_batch[2] = {0, 4}, empty_rows[2] = {3, 0};
    opf_tensor tx = opf_tensor_make(x, OPF_F64, 1, &n), ts = opf_tensor_make(&s, OPF_F64, 0, NULL),
               tm = opf_tensor_make(&m, OPF_F64, 0, NULL);
    CHECK(opf_op_run(op, (const opf_tensor *[]){&tx}, (const opf_tensor *[]){&ts, &tm}, NULL) == OPF_OK, "%s",
          opf_last_error());
    CHECK(s == 10.5 && m == 8, "1-d: sum %g max %g", s, m);
    double out[3] = {7, 7, 7}, out2[3] = {7, 7, 7};
    opf_tensor te = opf_tensor_make(x, OPF_F64, 2, empty_rows), to = opf_tensor_make(out, OPF_F64, 1, empty_rows),
               to2 = opf_tensor_make(out2, OPF_F64, 1, empty_rows);
    CHECK(opf_op_run(op, (const opf_tensor *[]){&te}, (const opf_tensor *[]){&to, &to2}, NULL) == OPF_OK, "%s",
          opf_last_error());
    CHECK(out[0] == 0 && out[2] == 0 && isinf(out2[1]) && out2[1] < 0, "empty rows: sum %g max %g", out[0], out2[1]);
    opf_tensor tb = opf_tensor_make(x, OPF_F64, 2, empty_batch), tz = opf_tensor_make(out, OPF_F64, 1, &zero),
               tz2 = opf_tensor_make(out2, OPF_F64, 1, &zero);
    CHECK(opf_op_run(op, (const opf_tensor *[]){&tb}, (const opf_tensor *[]){&tz, &tz2}, NULL) == OPF_OK, "%s",
          opf_last_error());
    /* Empty rows that are not contiguous (x [2,0,3] with row dims of strides
     * {1,3}): no scratch, no kernel reads. */
    int64_t hollow_shape[3] = {2, 0, 3}, hollow_strides[3] = {1, 3, 2}, two = 2;
    opf_tensor th = opf_tensor_make(x, OPF_F64, 3, hollow_shape), t2 = opf_tensor_make(out, OPF_F64, 1, &two),
               t2b = opf_tensor_make(out2, OPF_F64, 1, &two);
    th.strides = hollow_strides;
    const opf_op_def *flat = user_op("row_stats_2d");
    CHECK(opf_op_run(flat, (const opf_tensor *[]){&th}, (const opf_tensor *[]){&t2, &t2b}, NULL) == OPF_OK, "%s",
          opf_last_error());
    CHECK(out[0] == 0 && out[1] == 0, "sums of empty rows: %g %g", out[0], out[1]);
    /* A 0-d input has no row dim. */
    opf_tensor t0 = opf_tensor_make(x, OPF_F64, 0, NULL);
    opf_status st = opf_op_run(op, (const opf_tensor *[]){&t0}, (const opf_tensor *[]){&ts, &tm}, NULL);
    CHECK(st == OPF_E_SHAPE, "0-d input: %s", opf_status_name(st));
    CHECK_CONTAINS(opf_last_error(), "myops.row_stats: x must have rank 1 or more, got rank 0");
}

/* Runs of rows (OPF_ROW_KERNEL_RUNS): a kernel that takes them is handed
 * all the rows of a chunk that lie one stride apart along the innermost
 * batch dim in one call, with the right strides (here rows whose batch dims
 * are transposed in memory, so that stride is not the row's length); one
 * that does not take them gets a row per call; a body's `return` ends its
 * row only. Each against a loop. */
TEST(test_rows_in_runs) {
    enum { A = 6, B = 5, M = 9 };
    const int threads = opf_get_num_threads();
    opf_set_num_threads(1);
    double x[A * B * M], y[A * B], want[A * B];
    rng r = rng_seed(21);
    fill_uniform_f64(&r, x, A * B * M, -1, 1);
    /* x[a, b, :] at (b * A + a) * M: strides {M, A * M, 1}. */
    int64_t shape[3] = {A, B, M}, strides[3] = {M, A * M, 1}, yshape[2] = {A, B};
    for (int a = 0; a < A; a++) {
        for (int b = 0; b < B; b++) {
            want[a * B + b] = 0;
            for (int i = 0; i < M; i++) {
                want[a * B + b] += x[(b * A + a) * M + i];
            }
        }
    }
    opf_tensor tx = opf_tensor_make(x, OPF_F64, 3, shape), ty = opf_tensor_make(y, OPF_F64, 2, yshape);
    tx.strides = strides;
    static const char *const names[2] = {"row_sums_by_rows", "row_sums_by_runs"};
    for (int runs = 0; runs < 2; runs++) {
        longest_run[runs] = 0;
        memset(y, 0, sizeof y);
        CHECK(opf_op_run(user_op(names[runs]), (const opf_tensor *[]){&tx}, (const opf_tensor *[]){&ty}, NULL) ==
                  OPF_OK,
              "%s: %s", names[runs], opf_last_error());
        for (int k = 0; k < A * B; k++) {
            if (!CHECK(fabs(y[k] - want[k]) <= 1e-12, "%s: row %d sums to %g, want %g", names[runs], k, y[k],
                       want[k])) {
                break;
            }
        }
        /* A run per index of the first batch dim: B rows, A * M apart. */
        CHECK(longest_run[runs] == (runs ? B : 1), "%s: longest run %lld rows", names[runs],
              (long long)longest_run[runs]);
    }
    /* A body that returns early, over runs of rows. */
    enum { R = 50, N = 7 };
    float xs[R * N], ys[R * N];
    int64_t rshape[2] = {R, N};
    fill_uniform_f32(&r, xs, R * N, -0.3f, 1);
    opf_tensor txs = opf_tensor_make(xs, OPF_F32, 2, rshape), tys = opf_tensor_make(ys, OPF_F32, 2, rshape);
    CHECK(opf_op_run(user_op("until_negative"), (const opf_tensor *[]){&txs}, (const opf_tensor *[]){&tys}, NULL) ==
              OPF_OK,
          "%s", opf_last_error());
    for (int k = 0, cut; k < R; k++) {
        for (cut = 0; cut < N && xs[k * N + cut] >= 0; cut++) {
        }
        for (int i = 0; i < N; i++) {
            const float w = i < cut ? xs[k * N + i] : 0.0f;
            if (!CHECK(ys[k * N + i] == w, "until_negative: row %d [%d] is %g, want %g", k, i, ys[k * N + i], w)) {
                k = R;
                break;
            }
        }
    }
    opf_set_num_threads(threads);
}

/* OPF_PAIRWISE at every lane count against the pairwise order written out
 * here (halves of a size known only at run time), on partial results spread
 * over 60 binary orders of magnitude, where another order rounds
 * differently; sums, and maxima with a NaN lane (opf_max's combine). */
#define PAIRWISE_CASE(type, lanes)                                                                                     \
    do {                                                                                                               \
        type a[lanes], m[lanes], want[lanes], want_m[lanes];                                                           \
        for (int j = 0; j < (lanes); j++) {                                                                            \
            a[j] = want[j] = (type)ldexp(rng_uniform(&r, -1, 1), (int)rng_uniform(&r, -30, 30));                       \
            m[j] = want_m[j] = j == nan_lane ? (type)NAN : a[j];                                                       \
        }                                                                                                              \
        for (int h = (lanes) / 2; h >= 1; h /= 2) {                                                                    \
            for (int j = 0; j < h; j++) {                                                                              \
                want[j] = want[j] + want[j + h];                                                                       \
                want_m[j] = (want_m[j + h] > want_m[j] || want_m[j + h] != want_m[j + h]) ? want_m[j + h] : want_m[j]; \
            }                                                                                                          \
        }                                                                                                              \
        OPF_PAIRWISE(a, lanes, USER_ADD);                                                                              \
        OPF_PAIRWISE(m, lanes, USER_MAX_NAN);                                                                          \
        CHECK(memcmp(&a[0], &want[0], sizeof a[0]) == 0, "%s lanes=%d: sum %.17g, want %.17g", #type, (lanes),         \
              (double)a[0], (double)want[0]);                                                                          \
        CHECK(memcmp(&m[0], &want_m[0], sizeof m[0]) == 0 || (m[0] != m[0] && want_m[0] != want_m[0]),                 \
              "%s lanes=%d: max %.17g, want %.17g", #type, (lanes), (double)m[0], (double)want_m[0]);                  \
    } while (0)
#define USER_MAX_NAN(a, b) (((b) > (a) || (b) != (b)) ? (b) : (a))
TEST(test_pairwise_order) {
    rng r = rng_seed(31);
    for (int rep = 0; rep < 200; rep++) {
        const int nan_lane = rep % 4 == 0 ? rep % 64 : -1; /* a NaN in a quarter of the cases */
        PAIRWISE_CASE(float, 1);
        PAIRWISE_CASE(float, 2);
        PAIRWISE_CASE(float, 4);
        PAIRWISE_CASE(float, 8);
        PAIRWISE_CASE(float, 16);
        PAIRWISE_CASE(float, 32);
        PAIRWISE_CASE(float, 64);
        PAIRWISE_CASE(double, 2);
        PAIRWISE_CASE(double, 8);
        PAIRWISE_CASE(double, 32);
        PAIRWISE_CASE(double, 64);
    }
}

/* OPF_PAIRWISE: a user's reduction in opf_dot's order has its bits, at
 * lengths under, at and past a group of lanes; both near a long double sum. */
TEST(test_rows_pairwise) {
    static const int64_t lengths[] = {1, 31, 32, 33, 63, 64, 65, 200, 1000};
    rng r = rng_seed(23);
    for (int dt = 0; dt < 2; dt++) {
        for (size_t k = 0; k < sizeof lengths / sizeof lengths[0]; k++) {
            const int64_t n = lengths[k], rows = 3, shape[2] = {rows, n};
            const size_t elem = dt ? 8 : 4;
            char *x = xcalloc((size_t)(rows * n), elem), *own = xcalloc(rows, elem), *dot = xcalloc(rows, elem);
            if (dt) {
                fill_uniform_f64(&r, (double *)x, (size_t)(rows * n), -2, 2);
            } else {
                fill_uniform_f32(&r, (float *)x, (size_t)(rows * n), -2, 2);
            }
            const opf_dtype dtype = dt ? OPF_F64 : OPF_F32;
            opf_tensor tx = opf_tensor_make(x, dtype, 2, shape), to = opf_tensor_make(own, dtype, 1, shape),
                       td = opf_tensor_make(dot, dtype, 1, shape);
            CHECK(opf_op_run(user_op("sum_squares"), (const opf_tensor *[]){&tx}, (const opf_tensor *[]){&to, &td},
                             NULL) == OPF_OK,
                  "%s", opf_last_error());
            CHECK_SAME_BITS(own, dot, (size_t)rows, elem, "%s n=%lld: OPF_PAIRWISE vs opf_dot", opf_dtype_name(dtype),
                            (long long)n);
            for (int64_t row = 0; row < rows; row++) {
                long double want = 0;
                for (int64_t i = 0; i < n; i++) {
                    const long double v = dt ? ((double *)x)[row * n + i] : ((float *)x)[row * n + i];
                    want += v * v;
                }
                const double got = dt ? ((double *)own)[row] : ((float *)own)[row];
                CHECK(fabsl(got - want) <= (dt ? 1e-12L : 1e-5L) * want, "%s n=%lld row %lld: %g, want %Lg",
                      opf_dtype_name(dtype), (long long)n, (long long)row, got, want);
            }
            free(x), free(own), free(dot);
        }
    }
}

/* An unbatched, optional, strided input (copied once) and a strided output
 * row (scattered), checked against a loop; results equal at 1 and 2 threads. */
TEST(test_rows_unbatched_input) {
    const opf_op_def *op = user_op("center_scale");
    enum { R = 300, M = 129 };
    int64_t shape[2] = {R, M}, wshape[1] = {M}, wstride[1] = {-2};
    rng r = rng_seed(9);
    const int threads = opf_get_num_threads();
    float *x = xcalloc(R * M, 4), *w = xcalloc(2 * M, 4), *y = xcalloc(R * M, 4), *y1 = xcalloc(R * M, 4);
    fill_uniform_f32(&r, x, R * M, -3, 3);
    fill_uniform_f32(&r, w, 2 * M, -3, 3);
    opf_tensor tx = opf_tensor_make(x, OPF_F32, 2, shape), tw = opf_tensor_make(w, OPF_F32, 1, wshape);
    tw.strides = wstride;
    tw.byte_offset = (uint64_t)(2 * M - 2) * 4; /* w reversed, every other element */
    int64_t ystrides[2] = {1, R};               /* y transposed in memory */
    opf_tensor ty = opf_tensor_make(y, OPF_F32, 2, shape);
    ty.strides = ystrides;
    opf_set_num_threads(2);
    CHECK(opf_op_run(op, (const opf_tensor *[]){&tx, &tw}, (const opf_tensor *[]){&ty}, NULL) == OPF_OK, "%s",
          opf_last_error());
    for (int i = 0; i < R; i++) {
        double mean = 0;
        for (int j = 0; j < M; j++) {
            mean += x[i * M + j];
        }
        mean /= M;
        for (int j = 0; j < M; j++) {
            double want = (x[i * M + j] - mean) * w[2 * M - 2 - 2 * j], got = y[j * R + i];
            if (!CHECK(fabs(got - want) <= 1e-4 * (1 + fabs(want)), "[%d,%d] %g want %g", i, j, got, want)) {
                i = R;
                break;
            }
        }
    }
    opf_set_num_threads(1);
    opf_tensor ty1 = ty;
    ty1.data = y1;
    CHECK(opf_op_run(op, (const opf_tensor *[]){&tx, &tw}, (const opf_tensor *[]){&ty1}, NULL) == OPF_OK, "%s",
          opf_last_error());
    CHECK_SAME_BITS(y1, y, R * M, 4, "1 thread vs 2");
    /* w absent. */
    CHECK(opf_op_run(op, (const opf_tensor *[]){&tx, NULL}, (const opf_tensor *[]){&ty1}, NULL) == OPF_OK, "%s",
          opf_last_error());
    /* w of the wrong length. */
    int64_t bad[1] = {M - 1};
    opf_tensor twb = opf_tensor_make(w, OPF_F32, 1, bad);
    opf_status st = opf_op_run(op, (const opf_tensor *[]){&tx, &twb}, (const opf_tensor *[]){&ty}, NULL);
    CHECK(st == OPF_E_SHAPE, "w of the wrong length: %s", opf_status_name(st));
    CHECK_CONTAINS(opf_last_error(), "myops.center_scale: shape mismatch: x is [300,129], w is [128]");
    opf_set_num_threads(threads);
    free(x), free(w), free(y), free(y1);
}

/* An output without "..." is a sum over the rows: every layout, 1 and 2
 * threads (the same bits), enough rows for several blocks, no rows (zeros),
 * a strided output; and opf_dot against a loop. */
TEST(test_rows_summed_output) {
    const opf_op_def *op = user_op("col_stats");
    rng r = rng_seed(13);
    static const int64_t shapes[][3] = {{5, 7, 33}, {900, 3, 17}, {0, 4, 9}, {2, 3, 0}};
    const int threads = opf_get_num_threads();
    for (int dt = 0; dt < 2; dt++) {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            for (int lx = 0; lx < TV_LAYOUT_COUNT; lx++) {
                const tv_layout lo = (tv_layout)(lx % TV_BROADCAST);
                tview x, y, dot, colsum, colsum1;
                const opf_dtype dtype = dt ? OPF_F64 : OPF_F32;
                const int64_t m = shapes[s][2], rows = shapes[s][0] * shapes[s][1];
                tv_make(&x, dtype, 3, shapes[s], (tv_layout)lx, 1);
                tv_make(&y, dtype, 3, shapes[s], TV_TRANSPOSED, 0);
                tv_make(&dot, dtype, 2, shapes[s], lo, 2);
                tv_make(&colsum, dtype, 1, &shapes[s][2], lo, 3);
                tv_make(&colsum1, dtype, 1, &shapes[s][2], lo, 3);
                tv_fill(&x, &r, 0, NULL);
                tv_fill(&y, &r, 0, NULL);
                tv_fill(&colsum, &r, 0, NULL); /* overwritten, not added to */
                char ctx[128];
                snprintf(ctx, sizeof ctx, "%s shape %zu x %s out %s", opf_dtype_name(dtype), s,
                         tv_layout_name((tv_layout)lx), tv_layout_name(lo));
                opf_set_num_threads(2);
                opf_status st =
                    opf_op_run(op, (const opf_tensor *[]){&x.t, &y.t}, (const opf_tensor *[]){&dot.t, &colsum.t}, NULL);
                opf_set_num_threads(1);
                opf_status st1 = opf_op_run(op, (const opf_tensor *[]){&x.t, &y.t},
                                            (const opf_tensor *[]){&dot.t, &colsum1.t}, NULL);
                if (CHECK(st == OPF_OK && st1 == OPF_OK, "%s: %s", ctx, opf_last_error())) {
                    for (int64_t j = 0; j < m; j++) {
                        double want = 0, got = get(&colsum, (size_t)j);
                        for (int64_t i = 0; i < rows; i++) {
                            want += get(&x, (size_t)(i * m + j));
                        }
                        if (!CHECK(fabs(got - want) <= 1e-4 * (1 + (double)rows), "%s: colsum[%lld] %g, want %g", ctx,
                                   (long long)j, got, want) ||
                            !CHECK(got == get(&colsum1, (size_t)j), "%s: colsum[%lld] 2 threads %g, 1 thread %g", ctx,
                                   (long long)j, got, get(&colsum1, (size_t)j))) {
                            break;
                        }
                    }
                    for (int64_t i = 0; i < rows; i++) {
                        double want = 0, got = get(&dot, (size_t)i);
                        for (int64_t j = 0; j < m; j++) {
                            want += get(&x, (size_t)(i * m + j)) * get(&y, (size_t)(i * m + j));
                        }
                        if (!CHECK(fabs(got - want) <= 1e-5 * (1 + fabs(want)), "%s: dot[%lld] %g, want %g", ctx,
                                   (long long)i, got, want)) {
                            break;
                        }
                    }
                    CHECK_TV_GUARDS(&colsum, "%s", ctx);
                    CHECK_TV_GUARDS(&dot, "%s", ctx);
                }
                /* colsum not wanted: absent */
                CHECK(opf_op_run(op, (const opf_tensor *[]){&x.t, &y.t}, (const opf_tensor *[]){&dot.t, NULL}, NULL) ==
                          OPF_OK,
                      "%s: %s", ctx, opf_last_error());
                tv_free(&x), tv_free(&y), tv_free(&dot), tv_free(&colsum), tv_free(&colsum1);
            }
        }
    }
    opf_set_num_threads(threads);
    /* The summed output's shape is checked like any other. */
    double x[6] = {0}, d[2], c[2];
    int64_t sx[2] = {2, 3}, sd[1] = {2}, sc[1] = {2};
    opf_tensor tx = opf_tensor_make(x, OPF_F64, 2, sx), td = opf_tensor_make(d, OPF_F64, 1, sd),
               tc = opf_tensor_make(c, OPF_F64, 1, sc);
    opf_status st = opf_op_run(op, (const opf_tensor *[]){&tx, &tx}, (const opf_tensor *[]){&td, &tc}, NULL);
    CHECK(st == OPF_E_SHAPE, "colsum [2]: %s", opf_status_name(st));
    CHECK_CONTAINS(opf_last_error(), "myops.col_stats: colsum has shape [2], expected [3]");
}

/* A row op's large outputs (more than 16 MiB read and written) are streamed from scratch: the same
 * values as a loop, rows not multiples of the stream block, odd offsets. */
TEST(test_rows_streamed_output) {
    const opf_op_def *op = user_op("center_scale");
    const int64_t R = harness_slow() ? 4 : 3000, M = 777;
    int64_t shape[2] = {R, M}, wshape[1] = {M};
    rng r = rng_seed(17);
    float *x = xcalloc((size_t)(R * M), 4), *w = xcalloc((size_t)M, 4), *y = xcalloc((size_t)(R * M) + 1, 4);
    fill_uniform_f32(&r, x, (size_t)(R * M), -3, 3);
    fill_uniform_f32(&r, w, (size_t)M, -3, 3);
    opf_tensor tx = opf_tensor_make(x, OPF_F32, 2, shape), tw = opf_tensor_make(w, OPF_F32, 1, wshape),
               ty = opf_tensor_make(y, OPF_F32, 2, shape);
    ty.byte_offset = 4; /* rows not 64-byte aligned */
    CHECK(opf_op_run(op, (const opf_tensor *[]){&tx, &tw}, (const opf_tensor *[]){&ty}, NULL) == OPF_OK, "%s",
          opf_last_error());
    for (int64_t i = 0; i < R; i++) {
        double mean = 0;
        for (int64_t j = 0; j < M; j++) {
            mean += x[i * M + j];
        }
        mean /= (double)M;
        for (int64_t j = 0; j < M; j++) {
            double want = (x[i * M + j] - mean) * w[j], got = y[1 + i * M + j];
            if (!CHECK(fabs(got - want) <= 1e-4 * (1 + fabs(want)), "[%lld,%lld] %g want %g", (long long)i,
                       (long long)j, got, want)) {
                i = R;
                break;
            }
        }
    }
    CHECK(y[0] == 0, "the element before y was written: %g", (double)y[0]);
    free(x), free(w), free(y);
}

/* OPF_ROW_STREAMED: true on every row of a call large enough for the engine
 * to stream its output (x86-64), false on a small call's, on one thread and
 * two; y right either way. */
TEST(test_row_streamed_flag) {
    const int threads = opf_get_num_threads();
    const int64_t M = 4096, big = harness_slow() ? 8 : ((int64_t)33 << 20) / (M * 4); /* (8: the small call's rows) */
#if defined(__x86_64__) && defined(__GNUC__)
    const float streams = 1;
#else
    const float streams = 0;
#endif
    float *x = xcalloc((size_t)(big * M), 4), *y = xcalloc((size_t)(big * M), 4), *flag = xcalloc((size_t)big, 4);
    rng r = rng_seed(43);
    fill_uniform_f32(&r, x, (size_t)(big * M), -3, 3);
    for (int t = 1; t <= 2; t++) {
        opf_set_num_threads(t);
        for (int large = 0; large < 2; large++) {
            const int64_t rows = large ? big : 8, shape[2] = {rows, M};
            const float want = large && !harness_slow() ? streams : 0;
            opf_tensor tx = opf_tensor_make(x, OPF_F32, 2, shape), ty = opf_tensor_make(y, OPF_F32, 2, shape);
            opf_tensor tf = opf_tensor_make(flag, OPF_F32, 1, shape);
            CHECK(opf_op_run(user_op("streamed_rows"), (const opf_tensor *[]){&tx}, (const opf_tensor *[]){&ty, &tf},
                             NULL) == OPF_OK,
                  "%s", opf_last_error());
            int64_t wrong = 0, bad_y = 0;
            for (int64_t i = 0; i < rows; i++) {
                wrong += flag[i] != want;
            }
            for (int64_t i = 0; i < rows * M; i++) {
                bad_y += y[i] != 2 * x[i];
            }
            CHECK(wrong == 0, "%d thread(s), %lld rows: %lld rows report streamed != %g", t, (long long)rows,
                  (long long)wrong, (double)want);
            CHECK(bad_y == 0, "%d thread(s), %lld rows: %lld elements of y wrong", t, (long long)rows,
                  (long long)bad_y);
        }
    }
    opf_set_num_threads(threads);
    free(x), free(y), free(flag);
}

/* OPF_NEXT_ROW_FIRST_PASS's plan and OPF_STORE_ROW's together ask for every
 * line of each next-row range once: the first pass's steps the lines of its
 * first half, the store's lines the rest, whatever the range's offset in
 * its line, its length, and the two passes' numbers of steps. */
TEST(test_next_row_plans) {
    static const int64_t offsets[] = {0, 16, 60}, lengths[] = {4, 64, 100, 1000, 16384, 100000};
    static const int64_t steps[] = {1, 3, 64, 255, 4096}, lines[] = {1, 7, 255, 256};
    const uintptr_t base = 4096; /* (addresses only: nothing is read) */
    for (size_t o = 0; o < sizeof offsets / sizeof offsets[0]; o++) {
        for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
            opf_row_args args = {0};
            args.num_prefetch = 2;
            args.prefetch[0] = (const void *)(base + (uintptr_t)offsets[o]);
            args.prefetch_bytes[0] = lengths[l];
            args.prefetch[1] = (const void *)(base + ((uintptr_t)1 << 22) + (uintptr_t)(3 * offsets[o] % 64));
            args.prefetch_bytes[1] = 2 * lengths[l] + 4;
            for (size_t a = 0; a < sizeof steps / sizeof steps[0]; a++) {
                for (size_t b = 0; b < sizeof lines / sizeof lines[0]; b++) {
                    opf__row_prefetch first, store;
                    opf__row_prefetch_init(&first, &args, steps[a], 0, OPF__FIRST_PASS_SHARE);
                    opf__row_prefetch_init(&store, &args, lines[b], OPF__FIRST_PASS_SHARE, 65536u);
                    for (int32_t k = 0; k < 2; k++) {
                        const uintptr_t start = (uintptr_t)args.prefetch[k], line0 = start - start % 64;
                        const int64_t span =
                            (int64_t)((start + (uintptr_t)args.prefetch_bytes[k] + 63) / 64 - line0 / 64);
                        unsigned char *asked = xcalloc((size_t)span + 1, 1);
                        int64_t outside = 0;
                        for (int pass = 0; pass < 2; pass++) {
                            const opf__row_prefetch *p = pass == 0 ? &first : &store;
                            const int64_t count = pass == 0 ? steps[a] : lines[b];
                            for (int64_t step = 0; step < count && k < p->count; step++) {
                                int64_t q, end;
                                for (opf__row_prefetch_lines(p, k, step, &q, &end); q < end; q++) {
                                    const int64_t line = (int64_t)((p->at[k] - line0) / 64) + q;
                                    if (line < 0 || line >= span) {
                                        outside++;
                                    } else {
                                        asked[line]++;
                                    }
                                }
                            }
                        }
                        int64_t never = 0, twice = 0;
                        for (int64_t q = 0; q < span; q++) {
                            never += asked[q] == 0;
                            twice += asked[q] > 1;
                        }
                        CHECK(never == 0 && twice == 0 && outside == 0,
                              "range %d (offset %lld, %lld bytes), %lld steps then %lld lines: %lld of %lld lines "
                              "never asked for, %lld more than once, %lld outside",
                              k, (long long)(start % 64), (long long)args.prefetch_bytes[k], (long long)steps[a],
                              (long long)lines[b], (long long)never, (long long)span, (long long)twice,
                              (long long)outside);
                        free(asked);
                    }
                }
            }
        }
    }
}

/* OPF_NEXT_ROW_ASKED's share (opf__next_row_asked): the part of every
 * next-row range, from its start, that the memory a body asked for holds;
 * none where a range starts outside it; never less than what was asked
 * before. */
TEST(test_next_row_asked) {
    opf_row_args args = {0};
    const uintptr_t at = 1 << 20;
    args.num_prefetch = 2;
    args.prefetch[0] = (const void *)at;
    args.prefetch_bytes[0] = 16384;
    args.prefetch[1] = (const void *)(at + 16384);
    args.prefetch_bytes[1] = 8192;
    static const struct {
        uintptr_t from;
        int64_t bytes;
        uint32_t before, want;
    } cases[] = {
        {at, 16384 + 8192, 0, 65536},     /* both ranges whole */
        {at - 4096, 65536, 0, 65536},     /* and more */
        {at, 8192, 0, 0},                 /* the second range starts past it */
        {at, 16384 + 4096, 0, 32768},     /* all of the first, half of the second: the least */
        {at, 16384 + 4096, 40000, 40000}, /* less than asked before */
        {at + 64, 65536, 0, 0},           /* the first range starts before it */
        {at, 0, 0, 0},                    /* nothing */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint32_t asked = cases[c].before;
        opf__next_row_asked(&args, &asked, (const void *)cases[c].from, cases[c].bytes);
        CHECK(asked == cases[c].want, "case %zu: asked %u, want %u", c, (unsigned)asked, (unsigned)cases[c].want);
    }
    uint32_t asked = 0;
    opf__next_row_asked(NULL, &asked, (const void *)at, 65536); /* (a CUDA body's: no streaming fields) */
    CHECK(asked == 0, "no args: asked %u", (unsigned)asked);
}

/* A row body with a first pass of its own (center_rows), and one whose
 * first pass is OPF_ROW_DOT (scale_by_dot): the same values as
 * a loop on a call large enough to be streamed and on a small one, on one
 * thread and two, rows on and off the 64-byte lines. x holds small
 * integers, so that the sums and means are exact in float. */
TEST(test_rows_first_pass_prefetch) {
    const int threads = opf_get_num_threads();
    const int64_t M = 4096 + 5, big = harness_slow() ? 8 : ((int64_t)33 << 20) / (M * 4);
    float *x = xcalloc((size_t)((big + 1) * M + 16), 4), *y = xcalloc((size_t)(big * M + 16), 4);
    rng r = rng_seed(44);
    fill_uniform_f32(&r, x, (size_t)((big + 1) * M + 16), -8, 8);
    for (int64_t i = 0; i < (big + 1) * M + 16; i++) {
        x[i] = (float)(int)x[i];
    }
    for (int t = 1; t <= 2; t++) {
        opf_set_num_threads(t);
        for (int large = 0; large < 2; large++) {
            for (int off = 0; off < 2; off++) {
                const int64_t rows = large ? big : 8, shape[2] = {rows, M};
                const float *xs = x + 3 * off;
                float *ys = y + 16 * off; /* (y on a line: streamed; x off it) */
                opf_tensor tx = opf_tensor_make((void *)xs, OPF_F32, 2, shape),
                           ty = opf_tensor_make(ys, OPF_F32, 2, shape);
                CHECK(opf_op_run(user_op("center_rows"), (const opf_tensor *[]){&tx}, (const opf_tensor *[]){&ty},
                                 NULL) == OPF_OK,
                      "%s", opf_last_error());
                int64_t bad = 0;
                for (int64_t i = 0; i < rows; i++) {
                    double sum = 0;
                    for (int64_t j = 0; j < M; j++) {
                        sum += xs[i * M + j];
                    }
                    const float mean = (float)sum / (float)M;
                    for (int64_t j = 0; j < M; j++) {
                        bad += ys[i * M + j] != xs[i * M + j] - mean;
                    }
                }
                CHECK(bad == 0, "%d thread(s), %lld rows, offset %d: %lld elements of y wrong", t, (long long)rows, off,
                      (long long)bad);
                /* scale_by_dot(x, x a row on): z = y <x, y>, exact in float for these integers */
                const float *y2 = xs + M;
                const float *z = ys;
                opf_tensor ty2 = opf_tensor_make((void *)y2, OPF_F32, 2, shape);
                CHECK(opf_op_run(user_op("scale_by_dot"), (const opf_tensor *[]){&tx, &ty2},
                                 (const opf_tensor *[]){&ty}, NULL) == OPF_OK,
                      "%s", opf_last_error());
                bad = 0;
                for (int64_t i = 0; i < rows; i++) {
                    double dot = 0;
                    for (int64_t j = 0; j < M; j++) {
                        dot += (double)xs[i * M + j] * y2[i * M + j];
                    }
                    for (int64_t j = 0; j < M; j++) {
                        bad += z[i * M + j] != (float)(y2[i * M + j] * dot);
                    }
                }
                CHECK(bad == 0, "scale_by_dot, %d thread(s), %lld rows, offset %d: %lld elements wrong", t,
                      (long long)rows, off, (long long)bad);
            }
        }
    }
    opf_set_num_threads(threads);
    free(x), free(y);
}

/* OPF_STORE_ROW's rows, large enough for the engine to ask the kernel to
 * stream them (32 MiB and more), starting on and off 64-byte lines, with a
 * second output the kernel stores with a plain loop and a summed output:
 * y has center_scale's bits (the same expression in a plain loop), and
 * every output matches a loop here. */
TEST(test_rows_stored_by_the_kernel) {
    const int threads = opf_get_num_threads();
    for (int f64 = 0; f64 < 2; f64++) {
        for (int variant = 0; variant < 3; variant++) {
            const size_t elem = f64 ? 8 : 4;
            const int64_t M = variant == 0 ? 4096 : 1031;
            const int64_t R = harness_slow() ? 3 : ((int64_t)33 << 20) / (M * (int64_t)elem);
            const int with_z = variant != 1, with_sum = variant != 0, offset = variant == 2;
            int64_t shape[2] = {R, M}, wshape[1] = {M};
            const opf_dtype dt = f64 ? OPF_F64 : OPF_F32;
            rng r = rng_seed(41 + (uint64_t)variant);
            char *x = xcalloc((size_t)(R * M), elem), *w = xcalloc((size_t)M, elem);
            char *y = xcalloc((size_t)(R * M) + 1, elem), *z = xcalloc((size_t)(R * M), elem);
            char *want_y = xcalloc((size_t)(R * M), elem), *sum = xcalloc((size_t)M, elem);
            if (f64) {
                fill_uniform_f64(&r, (double *)x, (size_t)(R * M), -3, 3);
                fill_uniform_f64(&r, (double *)w, (size_t)M, -3, 3);
            } else {
                fill_uniform_f32(&r, (float *)x, (size_t)(R * M), -3, 3);
                fill_uniform_f32(&r, (float *)w, (size_t)M, -3, 3);
            }
            opf_tensor tx = opf_tensor_make(x, dt, 2, shape), tw = opf_tensor_make(w, dt, 1, wshape);
            opf_tensor ty = opf_tensor_make(y, dt, 2, shape), tz = opf_tensor_make(z, dt, 2, shape);
            opf_tensor ts = opf_tensor_make(sum, dt, 1, wshape), twant = opf_tensor_make(want_y, dt, 2, shape);
            ty.byte_offset = offset ? (int64_t)elem : 0; /* rows off the lines */
            opf_set_num_threads(variant == 1 ? 1 : 2);
            CHECK(opf_op_run(user_op("store_rows"), (const opf_tensor *[]){&tx, &tw},
                             (const opf_tensor *[]){&ty, with_z ? &tz : NULL, with_sum ? &ts : NULL}, NULL) == OPF_OK,
                  "%s", opf_last_error());
            CHECK(opf_op_run(user_op("center_scale"), (const opf_tensor *[]){&tx, &tw}, (const opf_tensor *[]){&twant},
                             NULL) == OPF_OK,
                  "%s", opf_last_error());
            CHECK(memcmp(y + (offset ? elem : 0), want_y, (size_t)(R * M) * elem) == 0,
                  "%s M=%lld: y differs from the plain loop's bits", f64 ? "f64" : "f32", (long long)M);
            int bad = 0;
            for (int64_t i = 0; i < R && !bad; i++) {
                double mean = 0;
                for (int64_t j = 0; j < M; j++) {
                    mean += f64 ? ((double *)x)[i * M + j] : ((float *)x)[i * M + j];
                }
                mean /= (double)M;
                for (int64_t j = 0; j < M && !bad; j++) {
                    const int64_t at = i * M + j;
                    const double xv = f64 ? ((double *)x)[at] : ((float *)x)[at];
                    const double wv = f64 ? ((double *)w)[j] : ((float *)w)[j];
                    const int64_t y_at = at + offset;
                    const double got = f64 ? ((double *)y)[y_at] : ((float *)y)[y_at];
                    const double want = (xv - mean) * wv;
                    bad |= !CHECK(fabs(got - want) <= (f64 ? 1e-12 : 1e-4) * (1 + fabs(want)),
                                  "%s y[%lld,%lld] %g want %g", f64 ? "f64" : "f32", (long long)i, (long long)j, got,
                                  want);
                    if (with_z && !bad) { /* x w rounded once in T: exact bits */
                        bad |= f64 ? !CHECK(((double *)z)[at] == ((double *)x)[at] * ((double *)w)[j], "f64 z[%lld]",
                                            (long long)at)
                                   : !CHECK(((float *)z)[at] == ((float *)x)[at] * ((float *)w)[j], "f32 z[%lld]",
                                            (long long)at);
                    }
                }
            }
            for (int64_t j = 0; with_sum && j < M && !bad; j++) {
                double want = 0;
                for (int64_t i = 0; i < R; i++) {
                    want += f64 ? ((double *)x)[i * M + j] : ((float *)x)[i * M + j];
                }
                const double got = f64 ? ((double *)sum)[j] : ((float *)sum)[j];
                bad |= !CHECK(fabs(got - want) <= (f64 ? 1e-9 : 1e-2) * (1 + fabs(want)), "%s colsum[%lld] %g want %g",
                              f64 ? "f64" : "f32", (long long)j, got, want);
            }
            CHECK(!offset || (f64 ? ((double *)y)[0] : ((float *)y)[0]) == 0, "the element before y was written");
            free(x), free(w), free(y), free(z), free(want_y), free(sum);
        }
    }
    opf_set_num_threads(threads);
}

/* OPF_ROW_SCRATCH: rows of 33 MiB outputs, on and off 64-byte lines, on 1
 * and 2 threads, computed in the engine's scratch and stored by
 * OPF_STORE_ROW: the same bits as the plain loops over y, and y = e /
 * sum(e) within rounding of a double loop here. */
TEST(test_rows_computed_in_scratch) {
    const int threads = opf_get_num_threads();
    for (int f64 = 0; f64 < 2; f64++) {
        for (int variant = 0; variant < 3; variant++) {
            const size_t elem = f64 ? 8 : 4;
            const int64_t M = variant == 0 ? 4096 : 1031, offset = variant == 2;
            const int64_t R = harness_slow() ? 3 : ((int64_t)33 << 20) / (M * (int64_t)elem);
            int64_t shape[2] = {R, M};
            const opf_dtype dt = f64 ? OPF_F64 : OPF_F32;
            rng r = rng_seed(43 + (uint64_t)variant);
            char *x = xcalloc((size_t)(R * M), elem), *y = xcalloc((size_t)(R * M) + 1, elem);
            char *want_y = xcalloc((size_t)(R * M), elem);
            if (f64) {
                fill_uniform_f64(&r, (double *)x, (size_t)(R * M), -3, 3);
            } else {
                fill_uniform_f32(&r, (float *)x, (size_t)(R * M), -3, 3);
            }
            opf_tensor tx = opf_tensor_make(x, dt, 2, shape), ty = opf_tensor_make(y, dt, 2, shape);
            opf_tensor twant = opf_tensor_make(want_y, dt, 2, shape);
            ty.byte_offset = offset * (int64_t)elem; /* rows off the lines */
            opf_set_num_threads(variant == 1 ? 1 : 2);
            rows_in_scratch = 0;
            CHECK(opf_op_run(user_op("normalize_rows"), (const opf_tensor *[]){&tx}, (const opf_tensor *[]){&ty},
                             NULL) == OPF_OK,
                  "%s", opf_last_error());
            /* (where the build streams rows, OPF__STREAMS: x86-64; elsewhere the engine
             * asks on a chunk's first row only, and the kernel's plain store
             * answers that it did not stream) */
            CHECK(harness_slow() || !OPF__STREAMS || rows_in_scratch > R / 2,
                  "%s M=%lld: %lld of %lld rows computed in scratch", f64 ? "f64" : "f32", (long long)M,
                  (long long)rows_in_scratch, (long long)R);
            CHECK(opf_op_run(user_op("normalize_rows_plain"), (const opf_tensor *[]){&tx},
                             (const opf_tensor *[]){&twant}, NULL) == OPF_OK,
                  "%s", opf_last_error());
            CHECK(memcmp(y + offset * (int64_t)elem, want_y, (size_t)(R * M) * elem) == 0,
                  "%s M=%lld: y differs from the plain loops' bits", f64 ? "f64" : "f32", (long long)M);
            /* and with each row's stores left to the next call: the same bits */
            char *later_y = xcalloc((size_t)(R * M) + 1, elem);
            opf_tensor tlater = opf_tensor_make(later_y, dt, 2, shape);
            tlater.byte_offset = ty.byte_offset;
            rows_left = 0;
            CHECK(opf_op_run(user_op("normalize_rows_later"), (const opf_tensor *[]){&tx},
                             (const opf_tensor *[]){&tlater}, NULL) == OPF_OK,
                  "%s", opf_last_error());
            CHECK(harness_slow() || !OPF__STREAMS || rows_left > R / 2, "%s M=%lld: %lld of %lld rows left for later",
                  f64 ? "f64" : "f32", (long long)M, (long long)rows_left, (long long)R);
            CHECK(memcmp(later_y + offset * (int64_t)elem, want_y, (size_t)(R * M) * elem) == 0,
                  "%s M=%lld: rows stored a call later differ from the plain loops' bits", f64 ? "f64" : "f32",
                  (long long)M);
            CHECK(!offset || (f64 ? ((double *)later_y)[0] : ((float *)later_y)[0]) == 0,
                  "the element before y was written (stored a call later)");
            free(later_y);
            int bad = 0;
            for (int64_t i = 0; i < R && !bad; i++) {
                double s = 0;
                for (int64_t j = 0; j < M; j++) {
                    const double xv = f64 ? ((double *)x)[i * M + j] : ((float *)x)[i * M + j];
                    s += xv * xv + 1;
                }
                for (int64_t j = 0; j < M && !bad; j++) {
                    const int64_t at = i * M + j;
                    const double xv = f64 ? ((double *)x)[at] : ((float *)x)[at];
                    const double got = f64 ? ((double *)y)[at + offset] : ((float *)y)[at + offset];
                    const double want = (xv * xv + 1) / s;
                    bad |= !CHECK(fabs(got - want) <= (f64 ? 1e-12 : 1e-5) * fabs(want), "%s y[%lld,%lld] %g want %g",
                                  f64 ? "f64" : "f32", (long long)i, (long long)j, got, want);
                }
            }
            CHECK(!offset || (f64 ? ((double *)y)[0] : ((float *)y)[0]) == 0, "the element before y was written");
            free(x), free(y), free(want_y);
        }
    }
    opf_set_num_threads(threads);
}

/* Two streamed outputs that a body leaves to the next call: the first is
 * left, the second stored at once (a call leaves one row); every row of
 * both right, on 1 and 2 threads. */
TEST(test_rows_two_later) {
    const int threads = opf_get_num_threads();
    const int64_t M = 2048, R = harness_slow() ? 5 : ((int64_t)33 << 20) / (M * 4);
    int64_t shape[2] = {R, M};
    float *x = xcalloc((size_t)(R * M), 4), *y = xcalloc((size_t)(R * M), 4), *z = xcalloc((size_t)(R * M), 4);
    rng r = rng_seed(47);
    fill_uniform_f32(&r, x, (size_t)(R * M), -3, 3);
    opf_tensor tx = opf_tensor_make(x, OPF_F32, 2, shape), ty = opf_tensor_make(y, OPF_F32, 2, shape),
               tz = opf_tensor_make(z, OPF_F32, 2, shape);
    for (int t = 1; t <= 2; t++) {
        opf_set_num_threads(t);
        memset(y, 0, (size_t)(R * M) * 4);
        memset(z, 0, (size_t)(R * M) * 4);
        CHECK(opf_op_run(user_op("twice_later"), (const opf_tensor *[]){&tx}, (const opf_tensor *[]){&ty, &tz}, NULL) ==
                  OPF_OK,
              "%s", opf_last_error());
        int bad = 0;
        for (int64_t i = 0; i < R * M && !bad; i++) {
            bad = !CHECK(y[i] == 2 * x[i] && z[i] == 3 * x[i], "%d threads, element %lld: y %g z %g, x %g", t,
                         (long long)i, (double)y[i], (double)z[i], (double)x[i]);
        }
    }
    opf_set_num_threads(threads);
    free(x), free(y), free(z);
}

/* opf_prefetch_ahead is a hint: its rows end where the memory mapped for
 * them ends, before pages that may not be read, and the kernel asks for the
 * lines OPF_PREFETCH_AHEAD bytes past them; the results are a plain loop's. */
/* Inputs declared ": shape" are neither gathered nor copied: laid out any
 * way over memory that faults when touched, batched (column-major, and
 * contiguous) and not ("w[M]" every other element), the rows come out as
 * 2 x, streamed (8.2 MiB) and not. */
TEST(test_rows_shape_only_inputs) {
    const opf_op_def *op = user_op("twice_like");
    if (!CHECK(op != NULL && (op->inputs[1].flags & OPF_ARG_SHAPE_ONLY) && (op->inputs[2].flags & OPF_ARG_SHAPE_ONLY) &&
                   !(op->inputs[0].flags & OPF_ARG_SHAPE_ONLY),
               "twice_like's like and w are shape only")) {
        return;
    }
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (int big = 0; big < 2; big++) {
        const int64_t R = big ? (harness_slow() ? 300 : 2100) : 9, M = big ? 1024 : 37, n = R * M;
        const size_t span = ((size_t)(2 * n) * sizeof(float) + page - 1) / page * page;
        char *nothing = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (!CHECK(nothing != MAP_FAILED, "mmap failed")) {
            return;
        }
        float *x = xmalloc(sizeof(float) * (size_t)n), *y = xmalloc(sizeof(float) * (size_t)n);
        rng g = rng_seed(5);
        fill_uniform_f32(&g, x, (size_t)n, -3, 3);
        const int64_t s2[2] = {R, M}, s1[1] = {M}, col_major[2] = {1, R}, every_other[1] = {2};
        opf_tensor tx = opf_tensor_make(x, OPF_F32, 2, s2), ty = opf_tensor_make(y, OPF_F32, 2, s2);
        opf_tensor like = opf_tensor_make(nothing, OPF_F32, 2, s2), w = opf_tensor_make(nothing, OPF_F32, 1, s1);
        w.strides = every_other;
        for (int layout = 0; layout < 2; layout++) {
            like.strides = layout == 0 ? col_major : NULL;
            memset(y, 0, sizeof(float) * (size_t)n);
            opf_status st = opf_op_run(op, (const opf_tensor *[]){&tx, &like, &w}, (const opf_tensor *[]){&ty}, NULL);
            CHECK(st == OPF_OK, "twice_like [%lld, %lld]: %s", (long long)R, (long long)M, opf_last_error());
            int bad = 0;
            for (int64_t i = 0; i < n; i++) {
                bad += y[i] != 2 * x[i];
            }
            CHECK(bad == 0, "twice_like [%lld, %lld], like %s: %d elements not 2 x", (long long)R, (long long)M,
                  layout == 0 ? "column-major" : "contiguous", bad);
        }
        munmap(nothing, span);
        free(x), free(y);
    }
}

/* The guard's length: enough for every prefetch past the data
 * (opf_prefetch_ahead, opf__run_stores). */
static size_t guard_bytes(void) { return 2 * (size_t)sysconf(_SC_PAGESIZE) + OPF_PREFETCH_AHEAD; }
static size_t guard_data_bytes(size_t bytes) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (bytes + page - 1) / page * page;
}
/* `bytes` that end where a guard of pages without access begins; NULL if
 * the mapping fails. Freed with unmap_before_guard. */
static void *map_before_guard(size_t bytes) {
    const size_t data = guard_data_bytes(bytes);
    char *map = mmap(NULL, data + guard_bytes(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (!CHECK(map != MAP_FAILED, "mmap failed")) {
        return NULL;
    }
    CHECK(mprotect(map + data, guard_bytes(), PROT_NONE) == 0, "mprotect failed");
    return map + data - bytes;
}
static void unmap_before_guard(void *p, size_t bytes) {
    const size_t data = guard_data_bytes(bytes);
    munmap((char *)p + bytes - data, data + guard_bytes());
}

TEST(test_rows_prefetch_past_the_mapping) {
    const opf_op_def *op = user_op("exp_row_sum");
    for (int f64 = 0; f64 < 2; f64++) {
        const size_t elem = f64 ? 8 : 4;
        const int64_t R = 5, M = 1000;
        const size_t bytes = (size_t)(R * M) * elem;
        void *x = map_before_guard(bytes); /* the last row ends at the guard */
        if (x == NULL) {
            return;
        }
        rng r = rng_seed(23);
        if (f64) {
            fill_uniform_f64(&r, x, (size_t)(R * M), -4, 4);
        } else {
            fill_uniform_f32(&r, x, (size_t)(R * M), -4, 4);
        }
        double s[5];
        int64_t shape[2] = {R, M}, sshape[1] = {R};
        const opf_dtype dt = f64 ? OPF_F64 : OPF_F32;
        opf_tensor tx = opf_tensor_make(x, dt, 2, shape), ts = opf_tensor_make(s, dt, 1, sshape);
        CHECK(opf_op_run(op, (const opf_tensor *[]){&tx}, (const opf_tensor *[]){&ts}, NULL) == OPF_OK, "%s",
              opf_last_error());
        for (int64_t i = 0; i < R; i++) {
            double want = 0;
            for (int64_t j = 0; j < M; j++) {
                want += exp(f64 ? ((const double *)x)[i * M + j] : (double)((const float *)x)[i * M + j]);
            }
            const double got = f64 ? s[i] : (double)((const float *)s)[i];
            CHECK(fabs(got - want) <= (f64 ? 1e-12 : 1e-5) * want, "%s row %lld: %.17g want %.17g", f64 ? "f64" : "f32",
                  (long long)i, got, want);
        }
        unmap_before_guard(x, bytes);
    }
    /* A run of rows long enough to ask for the lines their stores will
     * write (opf__run_stores, up to OPF__RUN_STORES_AHEAD bytes past each
     * row), the last one ending at the guard: the asks past it never fault,
     * and every row is stored. */
    for (int f64 = 0; f64 < 2; f64++) {
        const size_t elem = f64 ? 8 : 4;
        const int64_t R = 40, M = f64 ? 40 : 70; /* rows of 320 and 280 bytes, run on one thread */
        const size_t bytes = (size_t)(R * M) * elem;
        void *y = map_before_guard(bytes), *x = malloc(bytes);
        if (y == NULL) {
            free(x);
            return;
        }
        rng r = rng_seed(29);
        if (f64) {
            fill_uniform_f64(&r, x, (size_t)(R * M), -0.05, 1);
        } else {
            fill_uniform_f32(&r, x, (size_t)(R * M), -0.05f, 1);
        }
        int64_t shape[2] = {R, M};
        const opf_dtype dt = f64 ? OPF_F64 : OPF_F32;
        opf_tensor tx = opf_tensor_make(x, dt, 2, shape), ty = opf_tensor_make(y, dt, 2, shape);
        const int threads = opf_get_num_threads();
        opf_set_num_threads(1);
        CHECK(opf_op_run(user_op("until_negative"), (const opf_tensor *[]){&tx}, (const opf_tensor *[]){&ty}, NULL) ==
                  OPF_OK,
              "%s", opf_last_error());
        opf_set_num_threads(threads);
        int bad = 0;
        for (int64_t i = 0; i < R; i++) {
            int cut = 0;
            for (int64_t j = 0; j < M; j++) {
                const double xv = f64 ? ((const double *)x)[i * M + j] : ((const float *)x)[i * M + j];
                const double yv = f64 ? ((const double *)y)[i * M + j] : ((const float *)y)[i * M + j];
                cut |= xv < 0;
                bad += yv != (cut ? 0 : xv);
            }
        }
        CHECK(bad == 0, "until_negative %s rows ending at a guard: %d elements wrong", f64 ? "f64" : "f32", bad);
        free(x);
        unmap_before_guard(y, bytes);
    }
}

TEST(test_kernel_errors) {
    const opf_op_def *op = user_op("fail");
    float x = 1, y = 0;
    opf_tensor tx = opf_tensor_make(&x, OPF_F32, 0, NULL), ty = opf_tensor_make(&y, OPF_F32, 0, NULL);
    opf_status st = opf_op_run(op, (const opf_tensor *[]){&tx}, (const opf_tensor *[]){&ty}, NULL);
    CHECK(st == OPF_E_UNSUPPORTED, "%s", opf_status_name(st));
    CHECK(strcmp(opf_last_error(), "myops.fail: this kernel refuses everything") == 0, "%s", opf_last_error());
    CHECK(strcmp(opf_last_error_detail(), "this kernel refuses everything") == 0, "%s", opf_last_error_detail());
}

/* Each mistake in a declaration is refused, naming the table, the row and what is wrong. */
TEST(test_declaration_mistakes) {
    static const struct {
        opf_op_decl decl;
        const char *expect;
    } cases[] = {
        {{"sq(x -> y", .eltwise = &sq_plus}, "expected ')'"},
        {{"sq(x) y", .eltwise = &sq_plus}, "expected '->'"},
        {{"sq(x, y) -> z", .eltwise = &sq_plus}, "its kernel reads 1 and writes 1 tensors"},
        {{"sq(x) -> y", .eltwise = &sq_plus, .row = &row_stats}, "exactly one of eltwise, row and compute"},
        {{"sq(x) -> y", .doc = "no kernel"}, "exactly one of eltwise, row and compute (it has 0)"},
        {{"Sq(x) -> y", .eltwise = &sq_plus}, "must be lower_snake_case"},
        {{"sq(X) -> y", .eltwise = &sq_plus}, "name 'X' must be lower_snake_case"},
        {{"sq(x[N]) -> y", .eltwise = &sq_plus}, "of an elementwise op takes no dims"},
        {{"sq(x?) -> y", .eltwise = &sq_plus}, "not optional"},
        {{"sq(x, *, c: complex) -> y", .eltwise = &sq_plus}, "needs a type"},
        {{"sq(x, *, c: {a, b} = z) -> y", .eltwise = &sq_plus}, "default 'z' of 'c' is not one of its choices"},
        {{"sq(x, *, c: float = abc) -> y", .eltwise = &sq_plus}, "expected a number default for 'c'"},
        {{"sq(x) -> y", .eltwise = &sq_plus, .grad = "dx = nothing(dy)"}, "gradient op 'nothing' is not in table"},
        {{"sq(x) -> y", .eltwise = &sq_plus, .grad = "dx = sum_diff(dy)"}, "'sum_diff' takes 2 inputs"},
        {{"sq(x) -> y", .eltwise = &sq_plus, .grad = "dz = dy"}, "expected d<input> or '_' before '='"},
        {{"sq(x) -> y", .eltwise = &sq_plus, .grad = "dx = q"}, "'q' is not an input, an output, d<output> or '_'"},
        {{"rs(x[..., M]) -> y[K]", .row = &center_scale}, "kernel reads 2 and writes 1"},
        {{"rs(x[..., M], w[M]) -> y[K]", .row = &center_scale}, "dim 'K' is not a dim of any input"},
        {{"rs(x[..., M], w[M]?, v[M]) -> y[..., M]", .row = &center_scale},
         "required input 'v' follows optional input 'w' (optional inputs come last)"},
        {{"rs(x[M, ...], w[M]) -> y[...]", .row = &center_scale}, "'...' may only come first"},
        {{"rs(x[N], w[N]) -> y[..., N]", .compute = fail_compute}, "output 'y' has '...' but no input has"},
        {{"mm(a[N,K], b[K,M]) -> c[N,P]", .compute = fail_compute}, "dim 'P' is not a dim of any input"},
        {{"sq(x) -> y", .eltwise = &sq_plus, .arg_docs = "z: nothing"}, "arg_docs names 'z'"},
        {{"sq(x) -> y", .eltwise = &sq_plus, .jvp = "dy = x'"}, "expected <output>' or '_' before '='"},
        {{"sq(x) -> y", .eltwise = &sq_plus, .jvp = "x' = x'"}, "expected <output>' or '_' before '='"},
        {{"sq(x) -> y", .eltwise = &sq_plus, .jvp = "y' = dy"}, "'dy' is not an input, an input's tangent"},
        {{"sq(x) -> y", .eltwise = &sq_plus, .jvp = "y' = y'"}, "'y'' is not an input, an input's tangent"},
        {{"sq(x) -> y", .eltwise = &sq_plus, .jvp = "y' = none(x')"}, "tangent op 'none' is not in table"},
        {{"sq(x) -> y", .eltwise = &sq_plus, .jvp = "y' = sum_diff(x')"}, "'sum_diff' takes 2 inputs"},
        {{"sq(x) -> y", .eltwise = &sq_plus, .jvp = "y', _ = sum_diff(x', x) y"}, "unexpected 'y'"},
        {{"sq(x) -> y", .eltwise = &sq_plus, .grad = "dx = x'"}, "'x'' is not an input, an output, d<output>"},
        {{"sq(x) -> y", .eltwise = &sq_plus, .flags = 0x40}, "flags 0x40; a declaration may set only"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const opf_op_decl decls[3] = {cases[i].decl, {"sum_diff(a, b) -> (s, d)", .eltwise = &sum_diff}, {0}};
        const opf_ops_decl decl = {OPF_TABLE_ABI_VERSION, "badops", decls};
        const opf_op_table *t = opf_ops_resolve(&decl);
        if (!CHECK(t == NULL, "case %zu (%s) was accepted", i, cases[i].decl.signature)) {
            opf_ops_release(t);
            continue;
        }
        CHECK_CONTAINS(opf_last_error(), cases[i].expect);
        CHECK_CONTAINS(opf_last_error(), "table 'badops', op 0");
        CHECK_CONTAINS(opf_last_error(), cases[i].decl.jvp != NULL ? ": jvp: " : "");
    }
    /* A flag the row's shape contradicts: refused by the table's validation. */
    const opf_op_decl two_out[2] = {{"sd(a, b) -> (s, d)", .eltwise = &sum_diff, .flags = OPF_OP_PASS_THROUGH}, {0}};
    const opf_ops_decl passes = {OPF_TABLE_ABI_VERSION, "badops", two_out};
    CHECK(opf_ops_resolve(&passes) == NULL, "a pass-through row with two outputs accepted");
    CHECK_CONTAINS(
        opf_last_error(),
        "table 'badops': op 'sd' is OPF_OP_PASS_THROUGH, which needs an elementwise row "
        "with a required first input (read, neither written in place nor shape only) and exactly one required "
        "output");
    /* The table itself. */
    const opf_op_decl one[2] = {{"sq(x) -> y", .eltwise = &sq_plus}, {0}};
    const opf_ops_decl dashed = {OPF_TABLE_ABI_VERSION, "my-ops", one};
    CHECK(opf_ops_resolve(&dashed) == NULL, "table name my-ops accepted");
    CHECK_CONTAINS(opf_last_error(), "table name 'my-ops' must be lower_snake_case");
    const opf_ops_decl old = {1, "myops", one};
    CHECK(opf_ops_resolve(&old) == NULL, "ABI 1 accepted");
    CHECK_CONTAINS(opf_last_error(), "rebuild it");
    const opf_op_decl twice[3] = {{"sq(x) -> y", .eltwise = &sq_plus}, {"sq(x) -> y", .eltwise = &sq_plus}, {0}};
    const opf_ops_decl dup = {OPF_TABLE_ABI_VERSION, "myops", twice};
    CHECK(opf_ops_resolve(&dup) == NULL, "duplicate op accepted");
    CHECK_CONTAINS(opf_last_error(), "appears twice");
    CHECK(opf_ops_resolve(NULL) == NULL, "NULL accepted");
}

/* A table declared in parts (opf_ops_resolve_parts, OPF_EXPORT_OP_PARTS): every
 * part's rows in order, a part's gradient rule naming a row of another part;
 * the ABI version checked before any part is read; a part's mistake named. */
static void test_resolve_parts(void) {
    const opf_op_decl first[] = {{"sq(x) -> y", .eltwise = &sq_plus, .grad = "dx, _ = sum_diff(dy, dy)"}, {0}};
    const opf_op_decl empty[] = {{0}};
    const opf_op_decl second[] = {
        {"sum_diff(a, b) -> (s, d)", .eltwise = &sum_diff}, {"sq_too(x) -> y", .eltwise = &sq_plus}, {0}};
    const opf_op_decl *const parts[] = {first, empty, second, NULL};
    const opf_op_table *t = opf_ops_resolve_parts(OPF_TABLE_ABI_VERSION, "parted", parts);
    if (CHECK(t != NULL, "parts refused: %s", opf_last_error())) {
        CHECK(t->num_ops == 3, "%lld ops", (long long)t->num_ops);
        const char *want[] = {"sq", "sum_diff", "sq_too"};
        for (int i = 0; i < 3 && i < t->num_ops; i++) {
            CHECK(strcmp(t->ops[i]->name, want[i]) == 0, "op %d is %s, expected %s", i, t->ops[i]->name, want[i]);
        }
        CHECK(strcmp(t->name, "parted") == 0, "table name %s", t->name);
        opf_ops_release(t);
    }
    const opf_op_decl *const none[] = {NULL};
    t = opf_ops_resolve_parts(OPF_TABLE_ABI_VERSION, "parted", none);
    CHECK(t != NULL && t->num_ops == 0, "no parts: %s", opf_last_error());
    opf_ops_release(t);
    const opf_op_decl wrong[] = {{"sq2(x) -> (y, z)", .eltwise = &sq_plus}, {0}};
    const opf_op_decl *const with_wrong[] = {first, second, wrong, NULL};
    CHECK(opf_ops_resolve_parts(OPF_TABLE_ABI_VERSION, "parted", with_wrong) == NULL, "a wrong row accepted");
    CHECK_CONTAINS(opf_last_error(), "table 'parted', op 3 (\"sq2(x) -> (y, z)\")");
    CHECK(opf_ops_resolve_parts(OPF_TABLE_ABI_VERSION - 1, "parted", parts) == NULL, "an older ABI accepted");
    CHECK_CONTAINS(opf_last_error(), "table 'parted' was built for table ABI version");
    CHECK(opf_ops_resolve_parts(OPF_TABLE_ABI_VERSION, "parted", NULL) == NULL, "NULL parts accepted");
    CHECK_CONTAINS(opf_last_error(), "must not be NULL");
    CHECK(opf_ops_resolve_parts(OPF_TABLE_ABI_VERSION, NULL, parts) == NULL, "NULL name accepted");
}

int main(void) {
    RUN_TEST(test_resolve);
    RUN_TEST(test_resolve_parts);
    RUN_TEST(test_eltwise_layouts);
    RUN_TEST(test_eltwise_two_outputs);
    RUN_TEST(test_eltwise_one_input_large);
    RUN_TEST(test_eltwise_inputs_large);
    RUN_TEST(test_rows_layouts);
    RUN_TEST(test_rows_edges);
    RUN_TEST(test_rows_in_runs);
    RUN_TEST(test_rows_pairwise);
    RUN_TEST(test_pairwise_order);
    RUN_TEST(test_rows_unbatched_input);
    RUN_TEST(test_rows_summed_output);
    RUN_TEST(test_rows_streamed_output);
    RUN_TEST(test_row_streamed_flag);
    RUN_TEST(test_next_row_plans);
    RUN_TEST(test_next_row_asked);
    RUN_TEST(test_rows_first_pass_prefetch);
    RUN_TEST(test_rows_stored_by_the_kernel);
    RUN_TEST(test_rows_computed_in_scratch);
    RUN_TEST(test_rows_two_later);
    RUN_TEST(test_rows_prefetch_past_the_mapping);
    RUN_TEST(test_rows_shape_only_inputs);
    RUN_TEST(test_kernel_errors);
    RUN_TEST(test_declaration_mistakes);
    opf_ops_release(user_table());
    return harness_summary();
}
