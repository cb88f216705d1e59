/*
 * test_norms.c — the row-wise built-ins softmax, log_softmax, layer_norm,
 * rms_norm and their gradient rows, against the scalar references of
 * reference.h (double, Jacobians written out) on every layout the harness
 * makes; the second-order rows against central differences of the
 * first-order rows' documented formulas; special rows, empty rows, bad input,
 * thread-count independence and the streamed path of large outputs.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "reference.h"

static const opf_op_def *row(const char *name) {
    const opf_op_def *op = opf_op_find(opf_builtin_ops(), name);
    CHECK(op != NULL, "no built-in op %s", name);
    return op;
}

/* Values of a view in C order, as doubles. */
static double *values(const tview *v) {
    double *out = xcalloc(v->numel + 1, sizeof(double));
    for (size_t i = 0; i < v->numel; i++) {
        out[i] = v->t.dtype == OPF_F32 ? (double)*(const float *)tv_at(v, i) : *(const double *)tv_at(v, i);
    }
    return out;
}

/* Writes doubles (C order) into a view, rounded to its dtype. */
static void set_values(tview *v, const double *src) {
    for (size_t i = 0; i < v->numel; i++) {
        if (v->t.dtype == OPF_F32) {
            *(float *)tv_at(v, i) = (float)src[i];
        } else {
            *(double *)tv_at(v, i) = src[i];
        }
    }
}

/* Rounds doubles to the dtype (what the library is given). */
static void round_to(opf_dtype dtype, double *x, size_t n) {
    for (size_t i = 0; dtype == OPF_F32 && i < n; i++) {
        x[i] = (double)(float)x[i];
    }
}

static opf_status run(const opf_op_def *op, const opf_tensor *const *in, const opf_tensor *const *out,
                      const opf_attr_value *attrs) {
    return opf_op_run(op, in, out, attrs);
}

static double atol_of(opf_dtype dtype) { return dtype == OPF_F32 ? 2e-5 : 1e-12; }
static double rtol_of(opf_dtype dtype) { return dtype == OPF_F32 ? 2e-5 : 1e-11; }

static int close_all(const double *got, const double *want, size_t n, double atol, double rtol, const char *ctx) {
    return CHECK_CLOSE_F64(got, want, n, atol, rtol, "%s", ctx);
}

/* --- forward ops over layouts ------------------------------------------------------------------------------------ */

static const int64_t shapes[][3] = {{7, 0, 0}, {3, 1, 0}, {4, 33, 0}, {2, 3, 17}, {3, 0, 0}, {0, 5, 0}, {5, 130, 0}};
static const int32_t ranks[] = {1, 2, 2, 3, 2, 2, 2};
enum { NUM_SHAPES = sizeof ranks / sizeof ranks[0] };

static size_t row_len(int32_t ndim, const int64_t *shape) { return ndim > 0 ? (size_t)shape[ndim - 1] : 1; }

/* softmax and log_softmax: every input layout (broadcast too), every output layout. */
TEST(test_softmax_layouts) {
    const char *names[2] = {"softmax", "log_softmax"};
    rng r = rng_seed(21);
    for (int which = 0; which < 2; which++) {
        const opf_op_def *op = row(names[which]);
        for (int dt = 0; dt < 2; dt++) {
            opf_dtype dtype = dt ? OPF_F64 : OPF_F32;
            for (int s = 0; s < NUM_SHAPES; s++) {
                for (int lx = 0; lx < TV_LAYOUT_COUNT; lx++) {
                    for (int ly = 0; ly < TV_BROADCAST; ly++) {
                        tview x, y;
                        tv_make(&x, dtype, ranks[s], shapes[s], (tv_layout)lx, 1);
                        tv_make(&y, dtype, ranks[s], shapes[s], (tv_layout)ly, 2);
                        tv_fill(&x, &r, 0, NULL);
                        char ctx[160];
                        snprintf(ctx, sizeof ctx, "%s %s shape %d x %s y %s", names[which], opf_dtype_name(dtype), s,
                                 tv_layout_name((tv_layout)lx), tv_layout_name((tv_layout)ly));
                        opf_status st = run(op, (const opf_tensor *[]){&x.t}, (const opf_tensor *[]){&y.t}, NULL);
                        if (CHECK(st == OPF_OK, "%s: %s", ctx, opf_last_error())) {
                            double *xv = values(&x), *yv = values(&y), *want = xcalloc(x.numel + 1, sizeof(double));
                            const size_t m = row_len(ranks[s], shapes[s]);
                            for (size_t at = 0; m > 0 && at < x.numel; at += m) {
                                (which ? ref_log_softmax_row : ref_softmax_row)(m, xv + at, want + at);
                            }
                            close_all(yv, want, y.numel, atol_of(dtype), rtol_of(dtype), ctx);
                            CHECK_TV_GUARDS(&y, "%s", ctx);
                            free(xv), free(yv), free(want);
                        }
                        tv_free(&x), tv_free(&y);
                    }
                }
            }
        }
    }
}

/* layer_norm and rms_norm with and without their weight (and bias), in several layouts, and eps. */
TEST(test_norm_layouts) {
    rng r = rng_seed(22);
    const tv_layout vec_layouts[] = {TV_CONTIG, TV_STEP2, TV_NEGATIVE};
    for (int which = 0; which < 2; which++) { /* 0 layer_norm, 1 rms_norm */
        const opf_op_def *op = row(which ? "rms_norm" : "layer_norm");
        for (int dt = 0; dt < 2; dt++) {
            opf_dtype dtype = dt ? OPF_F64 : OPF_F32;
            for (int s = 0; s < NUM_SHAPES; s++) {
                const int32_t nd = ranks[s];
                const size_t m = row_len(nd, shapes[s]);
                for (int lx = 0; lx < TV_LAYOUT_COUNT; lx++) {
                    for (int opt = 0; opt < 4; opt++) { /* bit 0: w, bit 1: b */
                        if (which && (opt & 2)) {
                            continue;
                        }
                        const tv_layout lv = vec_layouts[(lx + opt) % 3], ly = (tv_layout)((lx + opt) % TV_BROADCAST);
                        int64_t vshape[1] = {(int64_t)m}, stat_shape[3] = {0};
                        memcpy(stat_shape, shapes[s], sizeof stat_shape);
                        tview x, w, b, y, mean, rstd;
                        tv_make(&x, dtype, nd, shapes[s], (tv_layout)lx, 1);
                        tv_make(&w, dtype, 1, vshape, lv, 0);
                        tv_make(&b, dtype, 1, vshape, lv, 3);
                        tv_make(&y, dtype, nd, shapes[s], ly, 2);
                        tv_make(&mean, dtype, nd - 1, stat_shape, ly, 1);
                        tv_make(&rstd, dtype, nd - 1, stat_shape, ly, 0);
                        tv_fill(&x, &r, 0, NULL);
                        tv_fill(&w, &r, 0, NULL);
                        tv_fill(&b, &r, 0, NULL);
                        const double eps = opt == 3 ? 0.25 : (which && opt == 0 ? -1.0 : 1e-5);
                        opf_attr_value attrs[1] = {{.f = eps}};
                        char ctx[200];
                        snprintf(ctx, sizeof ctx, "%s %s shape %d x %s w %s y %s opt %d",
                                 which ? "rms_norm" : "layer_norm", opf_dtype_name(dtype), s,
                                 tv_layout_name((tv_layout)lx), tv_layout_name(lv), tv_layout_name(ly), opt);
                        const opf_tensor *tw = (opt & 1) ? &w.t : NULL, *tb = (opt & 2) ? &b.t : NULL;
                        opf_status st = which ? run(op, (const opf_tensor *[]){&x.t, tw},
                                                    (const opf_tensor *[]){&y.t, &rstd.t}, attrs)
                                              : run(op, (const opf_tensor *[]){&x.t, tw, tb},
                                                    (const opf_tensor *[]){&y.t, &mean.t, &rstd.t}, attrs);
                        if (CHECK(st == OPF_OK, "%s: %s", ctx, opf_last_error())) {
                            double *xv = values(&x), *wv = values(&w), *bv = values(&b), *yv = values(&y),
                                   *mv = values(&mean), *rv = values(&rstd);
                            double *want = xcalloc(x.numel + 1, sizeof(double)),
                                   *wm = xcalloc(mean.numel + 1, sizeof(double)),
                                   *wr = xcalloc(rstd.numel + 1, sizeof(double));
                            const double e = eps < 0 ? ref_eps(dt) : eps;
                            for (size_t i = 0; i < rstd.numel; i++) {
                                if (which) {
                                    ref_rms_norm_row(m, xv + i * m, (opt & 1) ? wv : NULL, e, want + i * m, &wr[i]);
                                } else {
                                    ref_layer_norm_row(m, xv + i * m, (opt & 1) ? wv : NULL, (opt & 2) ? bv : NULL, e,
                                                       want + i * m, &wm[i], &wr[i]);
                                }
                            }
                            close_all(yv, want, y.numel, atol_of(dtype), rtol_of(dtype), ctx);
                            close_all(rv, wr, rstd.numel, atol_of(dtype), rtol_of(dtype), ctx);
                            if (!which) {
                                close_all(mv, wm, mean.numel, atol_of(dtype), rtol_of(dtype), ctx);
                            }
                            CHECK_TV_GUARDS(&y, "%s", ctx);
                            CHECK_TV_GUARDS(&rstd, "%s", ctx);
                            free(xv), free(wv), free(bv), free(yv), free(mv), free(rv), free(want), free(wm), free(wr);
                        }
                        tv_free(&x), tv_free(&w), tv_free(&b), tv_free(&y), tv_free(&mean), tv_free(&rstd);
                    }
                }
            }
        }
    }
}

/* --- first-order gradient rows ----------------------------------------------------------------------------------- */

/* softmax_grad and log_softmax_grad from the forward reference's y. */
TEST(test_softmax_grads) {
    rng r = rng_seed(23);
    const char *names[2] = {"softmax_grad", "log_softmax_grad"};
    for (int which = 0; which < 2; which++) {
        const opf_op_def *op = row(names[which]);
        for (int dt = 0; dt < 2; dt++) {
            opf_dtype dtype = dt ? OPF_F64 : OPF_F32;
            for (int s = 0; s < NUM_SHAPES; s++) {
                for (int l = 0; l < TV_BROADCAST; l++) {
                    const tv_layout lx = (tv_layout)l, ly = (tv_layout)((l + 1) % TV_BROADCAST);
                    tview dy, y, dx;
                    tv_make(&dy, dtype, ranks[s], shapes[s], lx, 1);
                    tv_make(&y, dtype, ranks[s], shapes[s], ly, 0);
                    tv_make(&dx, dtype, ranks[s], shapes[s], lx, 2);
                    tv_fill(&dy, &r, 0, NULL);
                    tv_fill(&y, &r, 0, NULL);
                    const size_t m = row_len(ranks[s], shapes[s]);
                    double *yv = values(&y);
                    for (size_t at = 0; m > 0 && at < y.numel; at += m) { /* y: the forward output of random x */
                        double *xrow = xcalloc(m, sizeof(double));
                        memcpy(xrow, yv + at, m * sizeof(double));
                        (which ? ref_log_softmax_row : ref_softmax_row)(m, xrow, yv + at);
                        free(xrow);
                    }
                    round_to(dtype, yv, y.numel);
                    set_values(&y, yv);
                    char ctx[160];
                    snprintf(ctx, sizeof ctx, "%s %s shape %d %s", names[which], opf_dtype_name(dtype), s,
                             tv_layout_name(lx));
                    opf_status st = run(op, (const opf_tensor *[]){&dy.t, &y.t}, (const opf_tensor *[]){&dx.t}, NULL);
                    if (CHECK(st == OPF_OK, "%s: %s", ctx, opf_last_error())) {
                        double *dyv = values(&dy), *dxv = values(&dx), *want = xcalloc(dx.numel + 1, sizeof(double));
                        for (size_t at = 0; m > 0 && at < dx.numel; at += m) {
                            (which ? ref_log_softmax_grad_row : ref_softmax_grad_row)(m, dyv + at, yv + at, want + at);
                        }
                        close_all(dxv, want, dx.numel, atol_of(dtype), rtol_of(dtype), ctx);
                        CHECK_TV_GUARDS(&dx, "%s", ctx);
                        free(dyv), free(dxv), free(want);
                    }
                    free(yv);
                    tv_free(&dy), tv_free(&y), tv_free(&dx);
                }
            }
        }
    }
}

/* layer_norm_grad and rms_norm_grad: every combination of the optional
 * inputs (w, dmean, drstd) and outputs (dx, dw, db), against the chain rule
 * through the forward reference. */
TEST(test_norm_grads) {
    rng r = rng_seed(24);
    for (int which = 0; which < 2; which++) {
        const opf_op_def *op = row(which ? "rms_norm_grad" : "layer_norm_grad");
        for (int dt = 0; dt < 2; dt++) {
            opf_dtype dtype = dt ? OPF_F64 : OPF_F32;
            for (int s = 0; s < NUM_SHAPES; s++) {
                const int32_t nd = ranks[s];
                const size_t m = row_len(nd, shapes[s]);
                for (int opt = 0; opt < 64; opt++) { /* bits: w, dmean, drstd, skip dx, skip dw/db, no dy */
                    const int has_w = opt & 1, has_dm = (opt >> 1) & 1, has_dr = (opt >> 2) & 1;
                    const int skip_dx = (opt >> 3) & 1, skip_wb = (opt >> 4) & 1, no_dy = (opt >> 5) & 1;
                    if (which && has_dm) {
                        continue;
                    }
                    const tv_layout l = (tv_layout)(opt % TV_BROADCAST), l2 = (tv_layout)((opt + 2) % TV_BROADCAST);
                    int64_t vshape[1] = {(int64_t)m}, stat_shape[3];
                    memcpy(stat_shape, shapes[s], sizeof stat_shape);
                    tview dy, x, w, mean, rstd, dmean, drstd, dx, dw, db;
                    tv_make(&dy, dtype, nd, shapes[s], l, 1);
                    tv_make(&x, dtype, nd, shapes[s], l2, 0);
                    tv_make(&w, dtype, 1, vshape, l2, 2);
                    tv_make(&mean, dtype, nd - 1, stat_shape, l, 0);
                    tv_make(&rstd, dtype, nd - 1, stat_shape, l2, 1);
                    tv_make(&dmean, dtype, nd - 1, stat_shape, l2, 0);
                    tv_make(&drstd, dtype, nd - 1, stat_shape, l, 3);
                    tv_make(&dx, dtype, nd, shapes[s], l2, 2);
                    tv_make(&dw, dtype, 1, vshape, l, 1);
                    tv_make(&db, dtype, 1, vshape, l2, 0);
                    tv_fill(&dy, &r, 0, NULL);
                    tv_fill(&x, &r, 0, NULL);
                    tv_fill(&w, &r, 0, NULL);
                    tv_fill(&dmean, &r, 0, NULL);
                    tv_fill(&drstd, &r, 0, NULL);
                    const double eps = 1e-3;
                    if (no_dy) { /* dy absent: zero */
                        double *zeros = xcalloc(dy.numel + 1, sizeof(double));
                        set_values(&dy, zeros);
                        free(zeros);
                    }
                    double *xv = values(&x), *wv = values(&w), *dyv = values(&dy), *dmv = values(&dmean),
                           *drv = values(&drstd);
                    /* mean and rstd: the forward reference's, in the dtype */
                    double *ybuf = xcalloc(m + 1, sizeof(double)), *mv = xcalloc(rstd.numel + 1, sizeof(double)),
                           *rv = xcalloc(rstd.numel + 1, sizeof(double));
                    for (size_t i = 0; i < rstd.numel; i++) {
                        if (which) {
                            ref_rms_norm_row(m, xv + i * m, NULL, eps, ybuf, &rv[i]);
                        } else {
                            ref_layer_norm_row(m, xv + i * m, NULL, NULL, eps, ybuf, &mv[i], &rv[i]);
                        }
                    }
                    round_to(dtype, mv, rstd.numel);
                    round_to(dtype, rv, rstd.numel);
                    set_values(&mean, mv);
                    set_values(&rstd, rv);
                    const opf_tensor *tw = has_w ? &w.t : NULL, *tdm = has_dm ? &dmean.t : NULL,
                                     *tdr = has_dr ? &drstd.t : NULL, *tdx = skip_dx ? NULL : &dx.t,
                                     *tdw = skip_wb ? NULL : &dw.t, *tdb = skip_wb ? NULL : &db.t;
                    opf_status st =
                        which ? run(op, (const opf_tensor *[]){&x.t, &rstd.t, no_dy ? NULL : &dy.t, tw, tdr},
                                    (const opf_tensor *[]){tdx, tdw}, NULL)
                              : run(op,
                                    (const opf_tensor *[]){&x.t, &mean.t, &rstd.t, no_dy ? NULL : &dy.t, tw, tdm, tdr},
                                    (const opf_tensor *[]){tdx, tdw, tdb}, NULL);
                    char ctx[200];
                    snprintf(ctx, sizeof ctx, "%s %s shape %d opt %d", which ? "rms_norm_grad" : "layer_norm_grad",
                             opf_dtype_name(dtype), s, opt);
                    if (CHECK(st == OPF_OK, "%s: %s", ctx, opf_last_error())) {
                        double *want = xcalloc(x.numel + 1, sizeof(double)), *wdw = xcalloc(m + 1, sizeof(double)),
                               *wdb = xcalloc(m + 1, sizeof(double));
                        for (size_t i = 0; m > 0 && i < rstd.numel; i++) {
                            if (which) {
                                ref_rms_norm_grad_row(m, dyv + i * m, xv + i * m, has_w ? wv : NULL, eps,
                                                      has_dr ? drv[i] : 0.0, want + i * m, wdw);
                            } else {
                                ref_layer_norm_grad_row(m, dyv + i * m, xv + i * m, has_w ? wv : NULL, eps,
                                                        has_dm ? dmv[i] : 0.0, has_dr ? drv[i] : 0.0, want + i * m, wdw,
                                                        wdb);
                            }
                        }
                        /* the library is given mean and rstd rounded to the dtype: a float tolerance of rstd's rounding
                         */
                        const double atol = dtype == OPF_F32 ? 1e-4 : 1e-10, rtol = dtype == OPF_F32 ? 1e-4 : 1e-9;
                        if (!skip_dx) {
                            double *got = values(&dx);
                            close_all(got, want, dx.numel, atol, rtol, ctx);
                            CHECK_TV_GUARDS(&dx, "%s", ctx);
                            free(got);
                        }
                        if (!skip_wb) {
                            double *got = values(&dw);
                            close_all(got, wdw, m, atol * (1 + (double)rstd.numel), rtol, ctx);
                            free(got);
                            CHECK_TV_GUARDS(&dw, "%s", ctx);
                            if (!which) {
                                got = values(&db);
                                close_all(got, wdb, m, atol * (1 + (double)rstd.numel), rtol, ctx);
                                free(got);
                            }
                        }
                        free(want), free(wdw), free(wdb);
                    }
                    free(xv), free(wv), free(dyv), free(dmv), free(drv), free(ybuf), free(mv), free(rv);
                    tv_free(&dy), tv_free(&x), tv_free(&w), tv_free(&mean), tv_free(&rstd), tv_free(&dmean);
                    tv_free(&drstd), tv_free(&dx), tv_free(&dw), tv_free(&db);
                }
            }
        }
    }
}

/* --- second-order and tangent rows: central differences of the first-order rows' formulas ------------------- */

/* The first-order rows as their docs state them, with every input independent
 * (mean and rstd given, not recomputed), for R2 rows of M2: dx [R2 * M2],
 * dw and db [M2] (summed over rows). */
enum { R2 = 3, M2 = 5 };
typedef struct second_order {
    int op; /* 0 softmax_grad, 1 log_softmax_grad, 2 rms_norm_grad, 3 layer_norm_grad */
    double dy[R2 * M2], x[R2 * M2], y[R2 * M2], w[M2], mean[R2], rstd[R2], dmean[R2], drstd[R2];
    double ddx[R2 * M2], ddw[M2], ddb[M2];
} second_order;

static void first_order(const second_order *p, double *dxs, double *dws, double *dbs) {
    memset(dws, 0, M2 * sizeof(double));
    memset(dbs, 0, M2 * sizeof(double));
    for (int i = 0; i < R2; i++) {
        const double *dy = p->dy + i * M2, *x = p->x + i * M2, *y = p->y + i * M2;
        double sg = 0, sgx = 0, sdy = 0, sdyy = 0;
        for (int j = 0; j < M2; j++) {
            const double g = dy[j] * p->w[j];
            sg += g;
            sgx += p->op == 3 ? g * (x[j] - p->mean[i]) * p->rstd[i] : g * x[j];
            sdy += dy[j];
            sdyy += dy[j] * y[j];
        }
        for (int j = 0; j < M2; j++) {
            const double g = dy[j] * p->w[j], r = p->rstd[i], xh = (x[j] - p->mean[i]) * r;
            double dx = 0;
            switch (p->op) {
            case 0: dx = y[j] * (dy[j] - sdyy); break;
            case 1: dx = dy[j] - exp(y[j]) * sdy; break;
            case 2:
                dx = r * g - x[j] * r * r * r / M2 * (sgx + p->drstd[i]);
                dws[j] += dy[j] * x[j] * r;
                break;
            default:
                dx = r * (g - sg / M2 - xh * sgx / M2) + p->dmean[i] / M2 - p->drstd[i] * r * r * xh / M2;
                dws[j] += dy[j] * xh;
                dbs[j] += dy[j];
            }
            dxs[i * M2 + j] = dx;
        }
    }
}

/* L = <ddx, dx> + <ddw, dw> + <ddb, db>. */
static double first_order_loss(const second_order *p) {
    double dx[R2 * M2], dw[M2], db[M2], loss = 0;
    first_order(p, dx, dw, db);
    for (int i = 0; i < R2 * M2; i++) {
        loss += p->ddx[i] * dx[i];
    }
    for (int j = 0; j < M2; j++) {
        loss += p->ddw[j] * dw[j] + p->ddb[j] * db[j];
    }
    return loss;
}

/* d loss / d v[i] by central differences. */
static double central(second_order *p, double *v, int i) {
    const double h = 1e-5, keep = v[i];
    v[i] = keep + h;
    double up = first_order_loss(p);
    v[i] = keep - h;
    double down = first_order_loss(p);
    v[i] = keep;
    return (up - down) / (2 * h);
}

static void check_fd(second_order *p, double *v, int n, const double *got, const char *what) {
    for (int i = 0; i < n; i++) {
        double want = central(p, v, i);
        if (!CHECK(fabs(got[i] - want) <= 1e-6 * (1 + fabs(want)), "op %d %s[%d]: %.10g, differences give %.10g", p->op,
                   what, i, got[i], want)) {
            return;
        }
    }
}

/* The tangents of dx, dw, db when every input moves along t (a second_order
 * holding the tangents), by central differences. */
static void central_tangent(const second_order *p, const second_order *t, double *dx, double *dw, double *db) {
    const double h = 1e-5;
    second_order up = *p, down = *p;
    double *ups[8] = {up.dy, up.x, up.y, up.w, up.mean, up.rstd, up.dmean, up.drstd};
    double *downs[8] = {down.dy, down.x, down.y, down.w, down.mean, down.rstd, down.dmean, down.drstd};
    const double *ts[8] = {t->dy, t->x, t->y, t->w, t->mean, t->rstd, t->dmean, t->drstd};
    const int sizes[8] = {R2 * M2, R2 * M2, R2 * M2, M2, R2, R2, R2, R2};
    for (int k = 0; k < 8; k++) {
        for (int i = 0; i < sizes[k]; i++) {
            ups[k][i] += h * ts[k][i];
            downs[k][i] -= h * ts[k][i];
        }
    }
    double dx1[R2 * M2], dw1[M2], db1[M2], dx0[R2 * M2], dw0[M2], db0[M2];
    first_order(&up, dx1, dw1, db1);
    first_order(&down, dx0, dw0, db0);
    for (int i = 0; i < R2 * M2; i++) {
        dx[i] = (dx1[i] - dx0[i]) / (2 * h);
    }
    for (int j = 0; j < M2; j++) {
        dw[j] = (dw1[j] - dw0[j]) / (2 * h);
        db[j] = (db1[j] - db0[j]) / (2 * h);
    }
}

static void fill_case(second_order *p, rng *r, int op) {
    memset(p, 0, sizeof *p);
    p->op = op;
    fill_uniform_f64(r, p->dy, R2 * M2, -1, 1);
    fill_uniform_f64(r, p->x, R2 * M2, -2, 2);
    fill_uniform_f64(r, p->y, R2 * M2, 0.05, 0.5);
    fill_uniform_f64(r, p->w, M2, 0.5, 1.5);
    fill_uniform_f64(r, p->mean, R2, -0.5, 0.5);
    fill_uniform_f64(r, p->rstd, R2, 0.5, 2);
    fill_uniform_f64(r, p->dmean, R2, -1, 1);
    fill_uniform_f64(r, p->drstd, R2, -1, 1);
    fill_uniform_f64(r, p->ddx, R2 * M2, -1, 1);
    fill_uniform_f64(r, p->ddw, M2, -1, 1);
    fill_uniform_f64(r, p->ddb, M2, -1, 1);
    if (op == 1) {
        for (int i = 0; i < R2 * M2; i++) {
            p->y[i] = log(p->y[i]);
        }
    }
}

/* Tensors over the arrays of a second_order. */
typedef struct so_tensors {
    opf_tensor dy, x, y, w, mean, rstd, dmean, drstd, ddx, ddw, ddb;
} so_tensors;

static int64_t so_s2[2] = {R2, M2}, so_s1[1] = {R2}, so_sm[1] = {M2};

static so_tensors so_make(second_order *p) {
    return (so_tensors){opf_tensor_make(p->dy, OPF_F64, 2, so_s2),    opf_tensor_make(p->x, OPF_F64, 2, so_s2),
                        opf_tensor_make(p->y, OPF_F64, 2, so_s2),     opf_tensor_make(p->w, OPF_F64, 1, so_sm),
                        opf_tensor_make(p->mean, OPF_F64, 1, so_s1),  opf_tensor_make(p->rstd, OPF_F64, 1, so_s1),
                        opf_tensor_make(p->dmean, OPF_F64, 1, so_s1), opf_tensor_make(p->drstd, OPF_F64, 1, so_s1),
                        opf_tensor_make(p->ddx, OPF_F64, 2, so_s2),   opf_tensor_make(p->ddw, OPF_F64, 1, so_sm),
                        opf_tensor_make(p->ddb, OPF_F64, 1, so_sm)};
}

TEST(test_second_order) {
    rng r = rng_seed(25);
    for (int op = 0; op < 4; op++) {
        for (int affine = 0; affine < (op == 3 ? 2 : 1); affine++) {
            second_order p;
            fill_case(&p, &r, op);
            so_tensors t = so_make(&p);
            double gdy[R2 * M2], gx[R2 * M2], gw[M2], gmean[R2], grstd[R2], gdmean[R2], gdrstd[R2];
            opf_tensor tgdy = opf_tensor_make(gdy, OPF_F64, 2, so_s2), tgx = opf_tensor_make(gx, OPF_F64, 2, so_s2),
                       tgw = opf_tensor_make(gw, OPF_F64, 1, so_sm), tgmean = opf_tensor_make(gmean, OPF_F64, 1, so_s1),
                       tgrstd = opf_tensor_make(grstd, OPF_F64, 1, so_s1),
                       tgdmean = opf_tensor_make(gdmean, OPF_F64, 1, so_s1),
                       tgdrstd = opf_tensor_make(gdrstd, OPF_F64, 1, so_s1);
            opf_status st = OPF_OK;
            if (op == 0) { /* the second-order row sees the cotangent of dx only */
                st = run(row("softmax_grad_grad"), (const opf_tensor *[]){&t.ddx, &t.dy, &t.y},
                         (const opf_tensor *[]){&tgdy, &tgx, NULL}, NULL);
            } else if (op == 1) {
                st = run(row("log_softmax_grad_grad"), (const opf_tensor *[]){&t.ddx, &t.y, &t.dy},
                         (const opf_tensor *[]){&tgdy, &tgx}, NULL);
            }
            if (op < 2 && CHECK(st == OPF_OK, "%s", opf_last_error())) {
                check_fd(&p, p.dy, R2 * M2, gdy, "gdy");
                check_fd(&p, p.y, R2 * M2, gx, "gy");
            } else if (op == 2) {
                st = run(row("rms_norm_grad_grad"),
                         (const opf_tensor *[]){&t.x, &t.rstd, &t.dy, &t.w, &t.drstd, &t.ddx, &t.ddw},
                         (const opf_tensor *[]){&tgx, &tgrstd, &tgdy, &tgw, &tgdrstd}, NULL);
                if (CHECK(st == OPF_OK, "%s", opf_last_error())) {
                    check_fd(&p, p.dy, R2 * M2, gdy, "gdy");
                    check_fd(&p, p.x, R2 * M2, gx, "gx");
                    check_fd(&p, p.w, M2, gw, "gw");
                    check_fd(&p, p.rstd, R2, grstd, "grstd");
                    check_fd(&p, p.drstd, R2, gdrstd, "gdrstd");
                }
            } else if (op == 3 && !affine) { /* the part of ddx: ddw, ddb zero */
                memset(p.ddw, 0, sizeof p.ddw);
                memset(p.ddb, 0, sizeof p.ddb);
                st = run(row("layer_norm_grad_grad"),
                         (const opf_tensor *[]){&t.x, &t.mean, &t.rstd, &t.dy, &t.w, &t.dmean, &t.drstd, &t.ddx},
                         (const opf_tensor *[]){&tgx, &tgmean, &tgrstd, &tgdy, &tgw, &tgdmean, &tgdrstd}, NULL);
                if (CHECK(st == OPF_OK, "%s", opf_last_error())) {
                    check_fd(&p, p.dy, R2 * M2, gdy, "gdy");
                    check_fd(&p, p.x, R2 * M2, gx, "gx");
                    check_fd(&p, p.mean, R2, gmean, "gmean");
                    check_fd(&p, p.rstd, R2, grstd, "grstd");
                    check_fd(&p, p.w, M2, gw, "gw");
                    check_fd(&p, p.dmean, R2, gdmean, "gdmean");
                    check_fd(&p, p.drstd, R2, gdrstd, "gdrstd");
                }
            } else if (op == 3) { /* the parts of ddw and ddb: ddx zero */
                memset(p.ddx, 0, sizeof p.ddx);
                st = run(row("layer_norm_grad_grad_affine"),
                         (const opf_tensor *[]){&t.x, &t.mean, &t.rstd, &t.dy, &t.ddw, &t.ddb},
                         (const opf_tensor *[]){&tgx, &tgmean, &tgrstd, &tgdy}, NULL);
                if (CHECK(st == OPF_OK, "%s", opf_last_error())) {
                    check_fd(&p, p.dy, R2 * M2, gdy, "gdy");
                    check_fd(&p, p.x, R2 * M2, gx, "gx");
                    check_fd(&p, p.mean, R2, gmean, "gmean");
                    check_fd(&p, p.rstd, R2, grstd, "grstd");
                }
            }
        }
    }
    /* Absent cotangents are zeros; unwanted outputs are not written. */
    double dy[4] = {1, 2, 3, 4}, x[4] = {0.5, -1, 2, 0}, rs[1] = {0.7}, g[4] = {9, 9, 9, 9}, gr[1] = {9};
    int64_t one_row[2] = {1, 4}, one[1] = {1};
    opf_tensor tdy = opf_tensor_make(dy, OPF_F64, 2, one_row), tx = opf_tensor_make(x, OPF_F64, 2, one_row),
               trs = opf_tensor_make(rs, OPF_F64, 1, one), tg = opf_tensor_make(g, OPF_F64, 2, one_row),
               tgr = opf_tensor_make(gr, OPF_F64, 1, one);
    opf_status st = run(row("rms_norm_grad_grad"), (const opf_tensor *[]){&tx, &trs, &tdy, NULL, NULL, NULL, NULL},
                        (const opf_tensor *[]){NULL, &tgr, &tg, NULL, NULL}, NULL);
    CHECK(st == OPF_OK && g[0] == 0 && g[3] == 0 && gr[0] == 0, "no cotangents: %s, gdy %g, grstd %g", opf_last_error(),
          g[0], gr[0]);
}

/* Tangent rules of the gradient rows, as the declarations state them (the
 * gradient row on the tangents of the inputs it is linear in, plus the rows
 * of its derivative along the others), against central differences of the
 * first-order formulas with every input moving. */
TEST(test_gradient_row_tangents) {
    rng r = rng_seed(28);
    for (int op = 0; op < 4; op++) {
        second_order p, tan;
        fill_case(&p, &r, op);
        fill_case(&tan, &r, op);
        so_tensors t = so_make(&p), tt = so_make(&tan);
        double want_dx[R2 * M2], want_dw[M2], want_db[M2];
        central_tangent(&p, &tan, want_dx, want_dw, want_db);
        double dx[R2 * M2] = {0}, dw[M2] = {0}, db[M2] = {0}, dx2[R2 * M2] = {0}, dw2[M2] = {0}, dx3[R2 * M2] = {0},
                       dw3[M2] = {0};
        opf_tensor tdx = opf_tensor_make(dx, OPF_F64, 2, so_s2), tdw = opf_tensor_make(dw, OPF_F64, 1, so_sm),
                   tdb = opf_tensor_make(db, OPF_F64, 1, so_sm), tdx2 = opf_tensor_make(dx2, OPF_F64, 2, so_s2),
                   tdw2 = opf_tensor_make(dw2, OPF_F64, 1, so_sm), tdx3 = opf_tensor_make(dx3, OPF_F64, 2, so_s2),
                   tdw3 = opf_tensor_make(dw3, OPF_F64, 1, so_sm);
        opf_status st = OPF_OK;
        if (op == 0) { /* dx' = softmax_grad(dy', y); _, _, dx' = softmax_grad_grad(y', dy, y) */
            st = run(row("softmax_grad"), (const opf_tensor *[]){&tt.dy, &t.y}, (const opf_tensor *[]){&tdx}, NULL);
            if (st == OPF_OK) {
                st = run(row("softmax_grad_grad"), (const opf_tensor *[]){&tt.y, &t.dy, &t.y},
                         (const opf_tensor *[]){NULL, NULL, &tdx2}, NULL);
            }
        } else if (op == 1) { /* dx' = log_softmax_grad(dy', y); _, dx' = log_softmax_grad_grad(y', y, dy) */
            st = run(row("log_softmax_grad"), (const opf_tensor *[]){&tt.dy, &t.y}, (const opf_tensor *[]){&tdx}, NULL);
            if (st == OPF_OK) {
                st = run(row("log_softmax_grad_grad"), (const opf_tensor *[]){&tt.y, &t.y, &t.dy},
                         (const opf_tensor *[]){NULL, &tdx2}, NULL);
            }
        } else if (op == 2) {
            st = run(row("rms_norm_grad"), (const opf_tensor *[]){&t.x, &t.rstd, &tt.dy, &t.w, &tt.drstd},
                     (const opf_tensor *[]){&tdx, &tdw}, NULL);
            if (st == OPF_OK) {
                st = run(row("rms_norm_grad_jvp"),
                         (const opf_tensor *[]){&t.x, &t.rstd, &t.dy, &t.w, &t.drstd, &tt.x, &tt.rstd, &tt.w},
                         (const opf_tensor *[]){&tdx2, &tdw2}, NULL);
            }
        } else {
            st = run(row("layer_norm_grad"),
                     (const opf_tensor *[]){&t.x, &t.mean, &t.rstd, &tt.dy, &t.w, &tt.dmean, &tt.drstd},
                     (const opf_tensor *[]){&tdx, &tdw, &tdb}, NULL);
            if (st == OPF_OK) {
                st = run(row("layer_norm_grad_jvp"),
                         (const opf_tensor *[]){&t.x, &t.mean, &t.rstd, &t.dy, &t.w, &t.drstd, &tt.x, &tt.w},
                         (const opf_tensor *[]){&tdx2, &tdw2}, NULL);
            }
            if (st == OPF_OK) {
                st = run(row("layer_norm_grad_jvp_stats"),
                         (const opf_tensor *[]){&t.x, &t.mean, &t.rstd, &t.dy, &t.w, &t.drstd, &tt.mean, &tt.rstd},
                         (const opf_tensor *[]){&tdx3, &tdw3}, NULL);
            }
        }
        if (!CHECK(st == OPF_OK, "op %d: %s", op, opf_last_error())) {
            continue;
        }
        for (int i = 0; i < R2 * M2; i++) {
            dx[i] += dx2[i] + dx3[i];
        }
        for (int j = 0; j < M2; j++) {
            dw[j] += dw2[j] + dw3[j];
        }
        CHECK_CLOSE_F64(dx, want_dx, R2 * M2, 1e-7, 1e-6, "op %d: dx'", op);
        if (op >= 2) {
            CHECK_CLOSE_F64(dw, want_dw, M2, 1e-7, 1e-6, "op %d: dw'", op);
        }
        if (op == 3) {
            CHECK_CLOSE_F64(db, want_db, M2, 1e-7, 1e-6, "op %d: db'", op);
        }
    }
}

/* Tangent rules of the forward ops, as declared, against central differences
 * of the forward references: softmax's y' = softmax_grad(x', y), and the
 * second-order rows that give log_softmax's, rms_norm's and layer_norm's (dy
 * absent: their parts without it). */
TEST(test_forward_tangents) {
    rng r = rng_seed(29);
    enum { R = 3, M = 6 };
    int64_t s2[2] = {R, M}, s1[1] = {R}, sm[1] = {M};
    double x[R * M], xt[R * M], w[M], wt[M], b[M], bt[M];
    const double eps = 1e-2, h = 1e-6;
    fill_uniform_f64(&r, x, R * M, -2, 2);
    fill_uniform_f64(&r, xt, R * M, -1, 1);
    fill_uniform_f64(&r, w, M, 0.5, 1.5);
    fill_uniform_f64(&r, wt, M, -1, 1);
    fill_uniform_f64(&r, b, M, -1, 1);
    fill_uniform_f64(&r, bt, M, -1, 1);
    for (int op = 0; op < 4; op++) {
        /* references at x + h xt, x - h xt (w, b likewise) and x */
        double y[3][R * M], mean[3][R], rstd[3][R];
        for (int side = 0; side < 3; side++) {
            const double sgn = side == 0 ? 1 : side == 1 ? -1 : 0;
            double xs[R * M], ws[M], bs[M];
            for (int i = 0; i < R * M; i++) {
                xs[i] = x[i] + sgn * h * xt[i];
            }
            for (int j = 0; j < M; j++) {
                ws[j] = w[j] + sgn * h * wt[j];
                bs[j] = b[j] + sgn * h * bt[j];
            }
            for (int i = 0; i < R; i++) {
                if (op == 0) {
                    ref_softmax_row(M, xs + i * M, y[side] + i * M);
                } else if (op == 1) {
                    ref_log_softmax_row(M, xs + i * M, y[side] + i * M);
                } else if (op == 2) {
                    ref_rms_norm_row(M, xs + i * M, ws, eps, y[side] + i * M, &rstd[side][i]);
                } else {
                    ref_layer_norm_row(M, xs + i * M, ws, bs, eps, y[side] + i * M, &mean[side][i], &rstd[side][i]);
                }
            }
        }
        double yt[R * M] = {0}, yt2[R * M] = {0}, mt[R] = {0}, rt[R] = {0};
        opf_tensor tx = opf_tensor_make(x, OPF_F64, 2, s2), txt = opf_tensor_make(xt, OPF_F64, 2, s2),
                   ty = opf_tensor_make(y[2], OPF_F64, 2, s2), tw = opf_tensor_make(w, OPF_F64, 1, sm),
                   twt = opf_tensor_make(wt, OPF_F64, 1, sm), tbt = opf_tensor_make(bt, OPF_F64, 1, sm),
                   tm = opf_tensor_make(mean[2], OPF_F64, 1, s1), tr = opf_tensor_make(rstd[2], OPF_F64, 1, s1),
                   tyt = opf_tensor_make(yt, OPF_F64, 2, s2), tyt2 = opf_tensor_make(yt2, OPF_F64, 2, s2),
                   tmt = opf_tensor_make(mt, OPF_F64, 1, s1), trt = opf_tensor_make(rt, OPF_F64, 1, s1);
        opf_status st;
        if (op == 0) {
            st = run(row("softmax_grad"), (const opf_tensor *[]){&txt, &ty}, (const opf_tensor *[]){&tyt}, NULL);
        } else if (op == 1) {
            st = run(row("log_softmax_grad_grad"), (const opf_tensor *[]){&txt, &ty, NULL},
                     (const opf_tensor *[]){&tyt, NULL}, NULL);
        } else if (op == 2) {
            st = run(row("rms_norm_grad_grad"), (const opf_tensor *[]){&tx, &tr, NULL, &tw, NULL, &txt, &twt},
                     (const opf_tensor *[]){NULL, NULL, &tyt, NULL, &trt}, NULL);
        } else {
            st = run(row("layer_norm_grad_grad"), (const opf_tensor *[]){&tx, &tm, &tr, NULL, &tw, NULL, NULL, &txt},
                     (const opf_tensor *[]){NULL, NULL, NULL, &tyt, NULL, &tmt, &trt}, NULL);
            if (st == OPF_OK) {
                st = run(row("layer_norm_grad_grad_affine"), (const opf_tensor *[]){&tx, &tm, &tr, NULL, &twt, &tbt},
                         (const opf_tensor *[]){NULL, NULL, NULL, &tyt2}, NULL);
            }
        }
        if (!CHECK(st == OPF_OK, "op %d: %s", op, opf_last_error())) {
            continue;
        }
        double want[R * M], want_m[R], want_r[R];
        for (int i = 0; i < R * M; i++) {
            want[i] = (y[0][i] - y[1][i]) / (2 * h);
            yt[i] += yt2[i];
        }
        for (int i = 0; op >= 2 && i < R; i++) {
            want_m[i] = op == 3 ? (mean[0][i] - mean[1][i]) / (2 * h) : 0;
            want_r[i] = (rstd[0][i] - rstd[1][i]) / (2 * h);
        }
        CHECK_CLOSE_F64(yt, want, R * M, 1e-7, 1e-6, "op %d: y'", op);
        if (op == 3) {
            CHECK_CLOSE_F64(mt, want_m, R, 1e-7, 1e-6, "layer_norm: mean'");
        }
        if (op >= 2) {
            CHECK_CLOSE_F64(rt, want_r, R, 1e-7, 1e-6, "op %d: rstd'", op);
        }
    }
}

/* --- tangents of the second-order rows (forward over forward, third order) ---------------------------------- */

/* The second-order rows' outputs are gradients of first_order_loss; their
 * reference at a point is its central differences (as check_fd). A field of
 * a second_order, in another second_order. */
static double *so_field(second_order *q, const second_order *p, const double *v) {
    return (double *)((char *)q + ((const char *)v - (const char *)p));
}

/* The tangent of d loss / d v (v: a field of p, n values) when every input,
 * the cotangents ddx, ddw, ddb included, moves along t: central differences
 * in t of the central differences of check_fd. */
static void central_grad_tangent(const second_order *p, const second_order *t, const double *v, int n, double *want) {
    const double h = 1e-4;
    second_order up = *p, down = *p;
    double *ups = (double *)&up.dy, *downs = (double *)&down.dy;
    const double *ts = (const double *)&t->dy;
    const size_t count = (sizeof *p - offsetof(second_order, dy)) / sizeof(double);
    for (size_t k = 0; k < count; k++) { /* every array of doubles after op */
        ups[k] += h * ts[k];
        downs[k] -= h * ts[k];
    }
    for (int i = 0; i < n; i++) {
        want[i] = (central(&up, so_field(&up, p, v), i) - central(&down, so_field(&down, p, v), i)) / (2 * h);
    }
}

/* One output of a row run by rule_add: its accumulator (NULL: '_') and shape
 * (2: [R2, M2], 1: [R2], 0: [M2]). */
typedef struct so_out {
    double *acc;
    int kind;
} so_out;

/* Runs row `name` and adds its outputs to their accumulators (a tangent
 * rule's contributions add up). */
static opf_status rule_add(const char *name, const opf_tensor *const *in, int nout, const so_out *outs) {
    static int64_t *const dims[3] = {so_sm, so_s1, so_s2};
    double tmp[OPF_MAX_ARGS][R2 * M2];
    opf_tensor t[OPF_MAX_ARGS];
    const opf_tensor *out[OPF_MAX_ARGS];
    for (int k = 0; k < nout; k++) {
        t[k] = opf_tensor_make(tmp[k], OPF_F64, outs[k].kind == 2 ? 2 : 1, dims[outs[k].kind]);
        out[k] = outs[k].acc != NULL ? &t[k] : NULL;
    }
    opf_status st = run(row(name), in, out, NULL);
    for (int k = 0; st == OPF_OK && k < nout; k++) {
        const int size = outs[k].kind == 2 ? R2 * M2 : outs[k].kind == 1 ? R2 : M2;
        for (int i = 0; outs[k].acc != NULL && i < size; i++) {
            outs[k].acc[i] += tmp[k][i];
        }
    }
    return st;
}

/* The tangent rules of log_softmax_grad_grad, rms_norm_grad_grad,
 * layer_norm_grad_grad and layer_norm_grad_grad_affine as their declarations
 * state them (the row on the tangents of the inputs it is linear in, plus the
 * *_grad_grad_jvp* rows along the others), every input moving, against
 * central differences of the second-order reference. */
TEST(test_second_order_row_tangents) {
    rng r = rng_seed(31);
    for (int op = 1; op < 5; op++) { /* 1 log_softmax, 2 rms_norm, 3 layer_norm (ddx), 4 layer_norm (ddw, ddb) */
        second_order p, tan;
        fill_case(&p, &r, op < 4 ? op : 3);
        fill_case(&tan, &r, op < 4 ? op : 3);
        if (op == 3) { /* layer_norm_grad_grad sees the cotangent of dx only */
            memset(p.ddw, 0, sizeof p.ddw), memset(p.ddb, 0, sizeof p.ddb);
            memset(tan.ddw, 0, sizeof tan.ddw), memset(tan.ddb, 0, sizeof tan.ddb);
        } else if (op == 4) { /* layer_norm_grad_grad_affine those of dw and db */
            memset(p.ddx, 0, sizeof p.ddx), memset(tan.ddx, 0, sizeof tan.ddx);
        }
        so_tensors a = so_make(&p), b = so_make(&tan);
        /* tangents of the outputs, each the gradient of one input */
        double gx[R2 * M2] = {0}, gy[R2 * M2] = {0}, gdy[R2 * M2] = {0}, gw[M2] = {0}, gmean[R2] = {0}, grstd[R2] = {0},
                       gdmean[R2] = {0}, gdrstd[R2] = {0};
        opf_status st = OPF_OK;
        if (op == 1) {
            const so_out outs[2] = {{gdy, 2}, {gy, 2}}, gy_only[2] = {{NULL, 2}, {gy, 2}};
            /* gdy', gy' = GG(ddx', y, dy); _, gy' = GG(ddx, y, dy'); gdy', gy' = GG_jvp(ddx, y, dy, y') */
            st = rule_add("log_softmax_grad_grad", (const opf_tensor *[]){&b.ddx, &a.y, &a.dy}, 2, outs);
            st = st ? st : rule_add("log_softmax_grad_grad", (const opf_tensor *[]){&a.ddx, &a.y, &b.dy}, 2, gy_only);
            st = st ? st
                    : rule_add("log_softmax_grad_grad_jvp", (const opf_tensor *[]){&a.ddx, &a.y, &a.dy, &b.y}, 2, outs);
        } else if (op == 2) {
            const so_out all[5] = {{gx, 2}, {grstd, 1}, {gdy, 2}, {gw, 0}, {gdrstd, 1}},
                         z_only[5] = {{gx, 2}, {grstd, 1}, {NULL, 2}, {gw, 0}, {NULL, 1}},
                         no_w[3] = {{gx, 2}, {grstd, 1}, {gdy, 2}};
            st = rule_add("rms_norm_grad_grad",
                          (const opf_tensor *[]){&a.x, &a.rstd, &b.dy, &a.w, &b.drstd, &a.ddx, &a.ddw}, 5, z_only);
            st = st ? st
                    : rule_add("rms_norm_grad_grad",
                               (const opf_tensor *[]){&a.x, &a.rstd, &a.dy, &a.w, &a.drstd, &b.ddx, &b.ddw}, 5, all);
            st = st ? st
                    : rule_add("rms_norm_grad_grad_jvp_w", (const opf_tensor *[]){&a.x, &a.rstd, &a.dy, &a.ddx, &b.w},
                               3, no_w);
            st = st ? st
                    : rule_add("rms_norm_grad_grad_jvp",
                               (const opf_tensor *[]){&a.x, &a.rstd, &a.dy, &a.w, &a.drstd, &a.ddx, &a.ddw, &b.x}, 5,
                               all);
            st = st ? st
                    : rule_add("rms_norm_grad_grad_jvp_rstd",
                               (const opf_tensor *[]){&a.x, &a.rstd, &a.dy, &a.w, &a.drstd, &a.ddx, &a.ddw, &b.rstd}, 5,
                               all);
        } else if (op == 3) {
            const so_out all[7] = {{gx, 2}, {gmean, 1}, {grstd, 1}, {gdy, 2}, {gw, 0}, {gdmean, 1}, {gdrstd, 1}},
                         z_only[7] = {{gx, 2}, {gmean, 1}, {grstd, 1}, {NULL, 2}, {gw, 0}, {NULL, 1}, {NULL, 1}},
                         no_w[4] = {{gx, 2}, {gmean, 1}, {grstd, 1}, {gdy, 2}},
                         jvp[6] = {{gx, 2}, {gmean, 1}, {grstd, 1}, {gdy, 2}, {gw, 0}, {gdrstd, 1}};
            const opf_tensor *args[8] = {&a.x, &a.mean, &a.rstd, &a.dy, &a.w, &a.drstd, &a.ddx, NULL};
            st = rule_add("layer_norm_grad_grad",
                          (const opf_tensor *[]){&a.x, &a.mean, &a.rstd, &b.dy, &a.w, NULL, &b.drstd, &a.ddx}, 7,
                          z_only);
            st = st ? st
                    : rule_add("layer_norm_grad_grad",
                               (const opf_tensor *[]){&a.x, &a.mean, &a.rstd, &a.dy, &a.w, NULL, &a.drstd, &b.ddx}, 7,
                               all);
            st = st ? st
                    : rule_add("layer_norm_grad_grad_jvp_w",
                               (const opf_tensor *[]){&a.x, &a.mean, &a.rstd, &a.dy, &a.ddx, &b.w}, 4, no_w);
            const char *const along[3] = {"layer_norm_grad_grad_jvp", "layer_norm_grad_grad_jvp_mean",
                                          "layer_norm_grad_grad_jvp_rstd"};
            const opf_tensor *const tangent[3] = {&b.x, &b.mean, &b.rstd};
            for (int k = 0; k < 3 && st == OPF_OK; k++) {
                args[7] = tangent[k];
                st = rule_add(along[k], args, 6, jvp);
            }
        } else {
            const so_out all[4] = {{gx, 2}, {gmean, 1}, {grstd, 1}, {gdy, 2}},
                         z_only[4] = {{gx, 2}, {gmean, 1}, {grstd, 1}, {NULL, 2}};
            st = rule_add("layer_norm_grad_grad_affine",
                          (const opf_tensor *[]){&a.x, &a.mean, &a.rstd, &b.dy, &a.ddw, NULL}, 4, z_only);
            st = st ? st
                    : rule_add("layer_norm_grad_grad_affine",
                               (const opf_tensor *[]){&a.x, &a.mean, &a.rstd, &a.dy, &b.ddw, &b.ddb}, 4, all);
            st = st ? st
                    : rule_add("layer_norm_grad_grad_affine_jvp",
                               (const opf_tensor *[]){&a.x, &a.mean, &a.rstd, &a.dy, &a.ddw, &b.x, &b.mean, &b.rstd}, 4,
                               all);
        }
        if (!CHECK(st == OPF_OK, "op %d: %s", op, opf_last_error())) {
            continue;
        }
        /* each output against the tangent of the gradient it is */
        const struct {
            const double *got, *of;
            int n, here;
            const char *what;
        } checks[] = {
            {gdy, p.dy, R2 * M2, 1, "gdy'"},          {gy, p.y, R2 * M2, op == 1, "gy'"},
            {gx, p.x, R2 * M2, op >= 2, "gx'"},       {grstd, p.rstd, R2, op >= 2, "grstd'"},
            {gw, p.w, M2, op == 2 || op == 3, "gw'"}, {gdrstd, p.drstd, R2, op == 2 || op == 3, "gdrstd'"},
            {gmean, p.mean, R2, op >= 3, "gmean'"},   {gdmean, p.dmean, R2, op == 3, "gdmean'"},
        };
        for (size_t c = 0; c < sizeof checks / sizeof checks[0]; c++) {
            if (checks[c].here) {
                double want[R2 * M2];
                central_grad_tangent(&p, &tan, checks[c].of, checks[c].n, want);
                CHECK_CLOSE_F64(checks[c].got, want, (size_t)checks[c].n, 1e-6, 1e-5, "op %d: %s", op, checks[c].what);
            }
        }
    }
}

/* --- special rows, empty rows ------------------------------------------------------------------------------------ */

TEST(test_special_rows) {
    const double inf = INFINITY, nan = NAN;
    enum { ROWS = 7, M = 3 };
    const double rows[ROWS][M] = {{1, inf, 2},    {1, -inf, 2},       {-inf, -inf, -inf}, {nan, 1, 2},
                                  {-inf, 0, inf}, {1000, -1000, 999}, {-1e15, 1e15, 0}};
    int64_t shape[2] = {ROWS, M};
    for (int dt = 0; dt < 2; dt++) {
        opf_dtype dtype = dt ? OPF_F64 : OPF_F32;
        for (int which = 0; which < 2; which++) {
            tview x, y;
            tv_make(&x, dtype, 2, shape, TV_CONTIG, 0);
            tv_make(&y, dtype, 2, shape, TV_CONTIG, 0);
            double xv[ROWS * M], want[ROWS * M];
            memcpy(xv, rows, sizeof xv);
            set_values(&x, xv);
            round_to(dtype, xv, ROWS * M);
            for (int i = 0; i < ROWS; i++) {
                (which ? ref_log_softmax_row : ref_softmax_row)(M, xv + i * M, want + i * M);
            }
            opf_status st = run(row(which ? "log_softmax" : "softmax"), (const opf_tensor *[]){&x.t},
                                (const opf_tensor *[]){&y.t}, NULL);
            if (CHECK(st == OPF_OK, "%s", opf_last_error())) {
                double *got = values(&y);
                CHECK_CLOSE_F64(got, want, ROWS * M, 1e-6, 1e-6, "%s %s special rows",
                                which ? "log_softmax" : "softmax", opf_dtype_name(dtype));
                /* a masked (-inf) element is exactly 0 (softmax) or -inf (log_softmax) */
                CHECK(which ? got[4] == -inf : got[4] == 0.0, "masked element: %g", got[4]);
                free(got);
            }
            tv_free(&x), tv_free(&y);
        }
        /* Rows with NaN or inf, and of large values: layer_norm and rms_norm as the references (torch's
         * rms_norm of [1, inf, 2] is [0, nan, 0]: rstd is 0). */
        for (int which = 0; which < 2; which++) {
            tview x, y, mean, rstd;
            tv_make(&x, dtype, 2, shape, TV_CONTIG, 0);
            tv_make(&y, dtype, 2, shape, TV_CONTIG, 0);
            tv_make(&mean, dtype, 1, shape, TV_CONTIG, 0);
            tv_make(&rstd, dtype, 1, shape, TV_CONTIG, 0);
            double xv[ROWS * M], want[ROWS * M], mu, rs;
            memcpy(xv, rows, sizeof xv);
            set_values(&x, xv);
            round_to(dtype, xv, ROWS * M);
            for (int i = 0; i < ROWS; i++) {
                if (which) {
                    ref_rms_norm_row(M, xv + i * M, NULL, ref_eps(dt), want + i * M, &rs);
                } else {
                    ref_layer_norm_row(M, xv + i * M, NULL, NULL, 1e-5, want + i * M, &mu, &rs);
                }
            }
            opf_status st = which ? run(row("rms_norm"), (const opf_tensor *[]){&x.t, NULL},
                                        (const opf_tensor *[]){&y.t, &rstd.t}, NULL)
                                  : run(row("layer_norm"), (const opf_tensor *[]){&x.t, NULL, NULL},
                                        (const opf_tensor *[]){&y.t, &mean.t, &rstd.t}, NULL);
            if (CHECK(st == OPF_OK, "%s", opf_last_error())) {
                double *got = values(&y);
                CHECK(isnan(got[3 * M + 1]) && isnan(got[1]), "NaN and inf rows: %g %g", got[3 * M + 1], got[1]);
                CHECK_CLOSE_F64(got, want, ROWS * M, 1e-6, 1e-5, "%s %s special rows",
                                which ? "rms_norm" : "layer_norm", opf_dtype_name(dtype));
                free(got);
            }
            tv_free(&x), tv_free(&y), tv_free(&mean), tv_free(&rstd);
        }
    }
}

/* The same rules on rows long enough for the exponentials' vector kernel
 * (opf_exp_sum_blocks_f32: rows of 256 floats and more, whole blocks of
 * 32, the rest in the authored loop): +inf, NaN, -inf (masked) elements and
 * terms that underflow, in the blocks and in the rest; and rows on which
 * softmax's one pass holds or gives way to the maximum's pass. */
TEST(test_special_long_rows) {
    enum { ROWS = 15, M = 300 };
    double *rows = xcalloc(ROWS * M, sizeof(double)), *want = xcalloc(ROWS * M, sizeof(double));
    rng r = rng_seed(31);
    for (int i = 0; i < ROWS * M; i++) {
        rows[i] = rng_uniform(&r, -4.0, 4.0);
    }
    rows[0 * M + 40] = INFINITY;     /* +inf in a block: NaN throughout */
    rows[1 * M + 40] = NAN;          /* NaN in a block: NaN throughout */
    rows[6 * M + 290] = NAN;         /* and in the rest */
    for (int j = 0; j < M; j += 3) { /* masked elements, in blocks and rest */
        rows[2 * M + j] = -INFINITY;
    }
    for (int j = 0; j < M; j++) { /* only -inf: NaN throughout */
        rows[3 * M + j] = -INFINITY;
    }
    for (int j = 0; j < M; j++) { /* terms from 1 down to e^-299 (0 in float) */
        rows[4 * M + j] = -(double)j;
    }
    rows[5 * M + 7] = 80.0; /* one term dominates: the others underflow */
    /* the shift that softmax's one pass guesses from a row's first 32 and last M % 32
     * elements (opf_exp_sum_blocks_below_f32, every block; its sum tells whether the guess held):
     * wrong by 100 (e^100 overflows: the maximum's pass and the exponentials again), by 60 and
     * 80 (terms up to e^56 and e^76: it holds), -inf (none guessed), -1e9 (left padding), right
     * (the maximum among the last elements); with a guess of 0 (the first 32 and last 12
     * elements), wrong by 88.3 (e^88.3, finite but above 2^127: the kernel's sign at every ISA
     * level of a d above 88.03), and by 85 in 40 elements (each term finite, their sum above
     * 2^127) */
    rows[7 * M + 200] = 100.0;
    rows[8 * M + 100] = 60.0;
    for (int j = 0; j < 32; j++) {
        rows[9 * M + j] = -INFINITY;
        rows[10 * M + j] = -1e9;
    }
    rows[11 * M + M - 5] = 50.0;
    rows[12 * M + 150] = 80.0;
    for (int i = 13; i < 15; i++) {
        for (int j = 0; j < M; j++) {
            rows[i * M + j] = j < 32 || j >= M - M % 32 ? 0.0 : rows[i * M + j];
        }
    }
    rows[13 * M + 220] = 88.3;
    for (int j = 60; j < 100; j++) {
        rows[14 * M + j] = 85.0;
    }
    int64_t shape[2] = {ROWS, M};
    for (int dt = 0; dt < 2; dt++) {
        const opf_dtype dtype = dt ? OPF_F64 : OPF_F32;
        for (int which = 0; which < 2; which++) {
            tview x, y;
            tv_make(&x, dtype, 2, shape, TV_CONTIG, 0);
            tv_make(&y, dtype, 2, shape, TV_CONTIG, 0);
            set_values(&x, rows);
            double *xv = values(&x);
            for (int i = 0; i < ROWS; i++) {
                (which ? ref_log_softmax_row : ref_softmax_row)(M, xv + i * M, want + i * M);
            }
            const char *name = which ? "log_softmax" : "softmax";
            opf_status st = run(row(name), (const opf_tensor *[]){&x.t}, (const opf_tensor *[]){&y.t}, NULL);
            if (CHECK(st == OPF_OK, "%s", opf_last_error())) {
                double *got = values(&y);
                CHECK_CLOSE_F64(got, want, ROWS * M, 1e-6, 1e-5, "%s %s long special rows", name,
                                opf_dtype_name(dtype));
                for (int j = 0; j < M; j += 3) {
                    CHECK(which ? got[2 * M + j] == -INFINITY : got[2 * M + j] == 0.0, "%s: masked element %d: %g",
                          name, j, got[2 * M + j]);
                }
                free(got);
            }
            free(xv);
            tv_free(&x), tv_free(&y);
        }
    }
    free(rows);
    free(want);
}

/* M = 0 (empty rows) and no rows at all; the sums over rows of no rows are 0. */
TEST(test_empty) {
    double x[4] = {0}, out[4] = {7, 7, 7, 7}, mean[3] = {7, 7, 7}, rstd[3] = {7, 7, 7}, dw[4] = {7, 7, 7, 7},
           db[4] = {7, 7, 7, 7};
    int64_t empty_rows[2] = {3, 0}, no_rows[2] = {0, 4}, three[1] = {3}, zero[1] = {0}, four[1] = {4};
    opf_tensor te = opf_tensor_make(x, OPF_F64, 2, empty_rows), ty = opf_tensor_make(out, OPF_F64, 2, empty_rows),
               tm = opf_tensor_make(mean, OPF_F64, 1, three), tr = opf_tensor_make(rstd, OPF_F64, 1, three);
    CHECK(run(row("softmax"), (const opf_tensor *[]){&te}, (const opf_tensor *[]){&ty}, NULL) == OPF_OK, "%s",
          opf_last_error());
    CHECK(run(row("layer_norm"), (const opf_tensor *[]){&te, NULL, NULL}, (const opf_tensor *[]){&ty, &tm, &tr},
              NULL) == OPF_OK,
          "%s", opf_last_error());
    CHECK(mean[0] == 0 && mean[2] == 0 && isnan(rstd[0]) && isnan(rstd[2]), "empty rows: mean %g rstd %g", mean[0],
          rstd[0]);
    CHECK(run(row("rms_norm"), (const opf_tensor *[]){&te, NULL}, (const opf_tensor *[]){&ty, &tr}, NULL) == OPF_OK,
          "%s", opf_last_error());
    CHECK(isnan(rstd[1]), "rms_norm of an empty row: rstd %g", rstd[1]);
    opf_tensor tdw0 = opf_tensor_make(dw, OPF_F64, 1, zero), tdb0 = opf_tensor_make(db, OPF_F64, 1, zero);
    CHECK(run(row("layer_norm_grad"), (const opf_tensor *[]){&te, &tm, &tr, &te, NULL, NULL, NULL},
              (const opf_tensor *[]){&ty, &tdw0, &tdb0}, NULL) == OPF_OK,
          "%s", opf_last_error());
    /* No rows: dx is empty, dw and db are sums of nothing. */
    opf_tensor tn = opf_tensor_make(x, OPF_F64, 2, no_rows), tz = opf_tensor_make(mean, OPF_F64, 1, zero),
               tdw = opf_tensor_make(dw, OPF_F64, 1, four), tdb = opf_tensor_make(db, OPF_F64, 1, four),
               tw = opf_tensor_make(x, OPF_F64, 1, four);
    CHECK(run(row("layer_norm_grad"), (const opf_tensor *[]){&tn, &tz, &tz, &tn, &tw, NULL, NULL},
              (const opf_tensor *[]){&tn, &tdw, &tdb}, NULL) == OPF_OK,
          "%s", opf_last_error());
    CHECK(dw[0] == 0 && dw[3] == 0 && db[0] == 0 && db[3] == 0, "no rows: dw %g db %g", dw[0], db[0]);
    dw[1] = 7;
    CHECK(run(row("rms_norm_grad"), (const opf_tensor *[]){&tn, &tz, &tn, &tw, NULL},
              (const opf_tensor *[]){NULL, &tdw}, NULL) == OPF_OK,
          "%s", opf_last_error());
    CHECK(dw[1] == 0, "no rows: rms_norm_grad dw %g", dw[1]);
}

/* --- bad input --------------------------------------------------------------------------------------------------- */

TEST(test_bad_input) {
    float xf[20] = {0}, wf[5] = {0}, yf[20], mf[4], rf[4];
    double wd[5] = {0};
    int64_t s2[2] = {4, 5}, s1[1] = {5}, bad1[1] = {4}, stats[1] = {4}, bad_stats[1] = {3};
    opf_tensor x = opf_tensor_make(xf, OPF_F32, 2, s2), w = opf_tensor_make(wf, OPF_F32, 1, s1),
               wbad = opf_tensor_make(wf, OPF_F32, 1, bad1), w64 = opf_tensor_make(wd, OPF_F64, 1, s1),
               y = opf_tensor_make(yf, OPF_F32, 2, s2), mean = opf_tensor_make(mf, OPF_F32, 1, stats),
               rstd = opf_tensor_make(rf, OPF_F32, 1, stats), mean_bad = opf_tensor_make(mf, OPF_F32, 1, bad_stats),
               x0 = opf_tensor_make(xf, OPF_F32, 0, NULL), xh = opf_tensor_make(xf, OPF_F16, 2, s2);
    opf_status st;
    st = run(row("softmax"), (const opf_tensor *[]){&xh}, (const opf_tensor *[]){&y}, NULL);
    CHECK(st == OPF_E_DTYPE, "float16: %s", opf_status_name(st));
    CHECK_CONTAINS(opf_last_error(), "opforge.softmax");
    st = run(row("softmax"), (const opf_tensor *[]){&x0}, (const opf_tensor *[]){&y}, NULL);
    CHECK(st == OPF_E_SHAPE, "0-d: %s", opf_status_name(st));
    CHECK_CONTAINS(opf_last_error(), "opforge.softmax: x must have rank 1 or more, got rank 0");
    st =
        run(row("layer_norm"), (const opf_tensor *[]){&x, &wbad, NULL}, (const opf_tensor *[]){&y, &mean, &rstd}, NULL);
    CHECK(st == OPF_E_SHAPE, "w [4]: %s", opf_status_name(st));
    CHECK_CONTAINS(opf_last_error(), "opforge.layer_norm: shape mismatch: x is [4,5], w is [4]");
    st = run(row("rms_norm"), (const opf_tensor *[]){&x, &w64}, (const opf_tensor *[]){&y, &rstd}, NULL);
    CHECK(st == OPF_E_DTYPE, "w float64: %s", opf_status_name(st));
    st = run(row("layer_norm"), (const opf_tensor *[]){&x, &w, NULL}, (const opf_tensor *[]){&y, &mean_bad, &rstd},
             NULL);
    CHECK(st == OPF_E_SHAPE, "mean [3]: %s", opf_status_name(st));
    CHECK_CONTAINS(opf_last_error(), "mean has shape [3], expected [4]");
    st = run(row("layer_norm_grad"), (const opf_tensor *[]){&x, &mean_bad, &rstd, &x, NULL, NULL, NULL},
             (const opf_tensor *[]){&y, NULL, NULL}, NULL);
    CHECK(st == OPF_E_SHAPE, "layer_norm_grad mean [3]: %s", opf_status_name(st));
    CHECK_CONTAINS(opf_last_error(), "their leading dims ('...') must be equal");
    st = run(row("softmax"), (const opf_tensor *[]){&x}, (const opf_tensor *[]){&x}, NULL); /* in place */
    CHECK(st == OPF_E_LAYOUT, "softmax in place: %s", opf_status_name(st));
    CHECK_CONTAINS(opf_last_error(), "this op cannot run in place");
}

/* --- threads, many rows, streamed outputs ------------------------------------------------------------------------ */

/* The same bits at 1 and 2 threads, the sums over rows (dw, db) included,
 * over enough rows for several blocks of rows. */
TEST(test_thread_count_independent) {
    const int64_t R = harness_slow() ? 70 : 3000, M = 67;
    int64_t s2[2] = {R, M}, s1[1] = {R}, sm[1] = {M};
    rng r = rng_seed(26);
    float *x = xcalloc((size_t)(R * M), 4), *dy = xcalloc((size_t)(R * M), 4), *w = xcalloc((size_t)M, 4);
    float *out[2][5];
    fill_uniform_f32(&r, x, (size_t)(R * M), -3, 3);
    fill_uniform_f32(&r, dy, (size_t)(R * M), -1, 1);
    fill_uniform_f32(&r, w, (size_t)M, -1, 1);
    const int threads = opf_get_num_threads();
    for (int t = 0; t < 2; t++) {
        opf_set_num_threads(t + 1);
        float *y = out[t][0] = xcalloc((size_t)(R * M), 4), *mean = out[t][1] = xcalloc((size_t)R, 4),
              *rstd = out[t][2] = xcalloc((size_t)R, 4), *dw = out[t][3] = xcalloc((size_t)M, 4),
              *db = out[t][4] = xcalloc((size_t)M, 4);
        opf_tensor tx = opf_tensor_make(x, OPF_F32, 2, s2), tdy = opf_tensor_make(dy, OPF_F32, 2, s2),
                   tw = opf_tensor_make(w, OPF_F32, 1, sm), ty = opf_tensor_make(y, OPF_F32, 2, s2),
                   tm = opf_tensor_make(mean, OPF_F32, 1, s1), tr = opf_tensor_make(rstd, OPF_F32, 1, s1),
                   tdw = opf_tensor_make(dw, OPF_F32, 1, sm), tdb = opf_tensor_make(db, OPF_F32, 1, sm);
        CHECK(run(row("layer_norm"), (const opf_tensor *[]){&tx, &tw, NULL}, (const opf_tensor *[]){&ty, &tm, &tr},
                  NULL) == OPF_OK,
              "%s", opf_last_error());
        CHECK(run(row("layer_norm_grad"), (const opf_tensor *[]){&tx, &tm, &tr, &tdy, &tw, NULL, NULL},
                  (const opf_tensor *[]){&ty, &tdw, &tdb}, NULL) == OPF_OK,
              "%s", opf_last_error());
    }
    opf_set_num_threads(threads);
    const size_t sizes[5] = {(size_t)(R * M), (size_t)R, (size_t)R, (size_t)M, (size_t)M};
    for (int k = 0; k < 5; k++) {
        CHECK_SAME_BITS(out[0][k], out[1][k], sizes[k], 4, "output %d, 1 thread vs 2", k);
        free(out[0][k]), free(out[1][k]);
    }
    /* db against a plain sum in double */
    double *sum = xcalloc((size_t)M, sizeof(double));
    for (int64_t i = 0; i < R * M; i++) {
        sum[i % M] += dy[i];
    }
    float *db = xcalloc((size_t)M, 4), *dw = xcalloc((size_t)M, 4), *mean = xcalloc((size_t)R, 4),
          *rstd = xcalloc((size_t)R, 4);
    opf_tensor tx = opf_tensor_make(x, OPF_F32, 2, s2), tdy = opf_tensor_make(dy, OPF_F32, 2, s2),
               tm = opf_tensor_make(mean, OPF_F32, 1, s1), tr = opf_tensor_make(rstd, OPF_F32, 1, s1),
               tdb = opf_tensor_make(db, OPF_F32, 1, sm);
    CHECK(run(row("layer_norm_grad"), (const opf_tensor *[]){&tx, &tm, &tr, &tdy, NULL, NULL, NULL},
              (const opf_tensor *[]){NULL, NULL, &tdb}, NULL) == OPF_OK,
          "%s", opf_last_error());
    for (int64_t j = 0; j < M; j++) {
        if (!CHECK(fabs(db[j] - sum[j]) <= 1e-5 * (double)R, "db[%lld] %g, want %g", (long long)j, (double)db[j],
                   sum[j])) {
            break;
        }
    }
    free(sum), free(db), free(dw), free(mean), free(rstd), free(x), free(dy), free(w);
}

/* More than 16 MiB read and written: rows computed in scratch and streamed. */
TEST(test_large_rows) {
    const int64_t R = harness_slow() ? 8 : 2100, M = 1024;
    int64_t s2[2] = {R, M}, s1[1] = {R}, sm[1] = {M};
    rng r = rng_seed(27);
    float *x = xcalloc((size_t)(R * M), 4), *y = xcalloc((size_t)(R * M), 4), *w = xcalloc((size_t)M, 4),
          *mean = xcalloc((size_t)R, 4), *rstd = xcalloc((size_t)R, 4), *dx = xcalloc((size_t)(R * M), 4),
          *dw = xcalloc((size_t)M, 4);
    fill_uniform_f32(&r, x, (size_t)(R * M), -4, 4);
    fill_uniform_f32(&r, w, (size_t)M, 0.5, 1.5);
    opf_tensor tx = opf_tensor_make(x, OPF_F32, 2, s2), ty = opf_tensor_make(y, OPF_F32, 2, s2),
               tw = opf_tensor_make(w, OPF_F32, 1, sm), tm = opf_tensor_make(mean, OPF_F32, 1, s1),
               tr = opf_tensor_make(rstd, OPF_F32, 1, s1), tdx = opf_tensor_make(dx, OPF_F32, 2, s2),
               tdw = opf_tensor_make(dw, OPF_F32, 1, sm);
    double *xr = xcalloc((size_t)M, sizeof(double)), *want = xcalloc((size_t)M, sizeof(double)),
           *wr = xcalloc((size_t)M, sizeof(double)), *got = xcalloc((size_t)M, sizeof(double));
    for (int64_t j = 0; j < M; j++) {
        wr[j] = w[j];
    }
    for (int which = 0; which < 3; which++) {
        const char *name = which == 0 ? "softmax" : which == 1 ? "log_softmax" : "layer_norm";
        opf_status st = which < 2 ? run(row(name), (const opf_tensor *[]){&tx}, (const opf_tensor *[]){&ty}, NULL)
                                  : run(row(name), (const opf_tensor *[]){&tx, &tw, NULL},
                                        (const opf_tensor *[]){&ty, &tm, &tr}, NULL);
        if (!CHECK(st == OPF_OK, "%s: %s", name, opf_last_error())) {
            continue;
        }
        for (int64_t i = 0; i < R; i++) {
            double m, rs;
            for (int64_t j = 0; j < M; j++) {
                xr[j] = x[i * M + j];
                got[j] = y[i * M + j];
            }
            if (which == 0) {
                ref_softmax_row((size_t)M, xr, want);
            } else if (which == 1) {
                ref_log_softmax_row((size_t)M, xr, want);
            } else {
                ref_layer_norm_row((size_t)M, xr, wr, NULL, 1e-5, want, &m, &rs);
            }
            if (!CHECK_CLOSE_F64(got, want, (size_t)M, 1e-6, 1e-4, "%s row %lld", name, (long long)i)) {
                break;
            }
        }
    }
    /* Rows that start off a 64-byte line (an output one float past an aligned
     * start): stored in place or computed in scratch and copied, as the
     * engine's probe finds faster; the same values either way. */
    float *shifted = xcalloc((size_t)(R * M) + 16, 4);
    float *ys = (float *)(((uintptr_t)shifted + 63) / 64 * 64) + 1;
    opf_tensor tys = opf_tensor_make(ys, OPF_F32, 2, s2);
    for (int which = 0; which < 2; which++) {
        CHECK(run(row(which ? "log_softmax" : "softmax"), (const opf_tensor *[]){&tx}, (const opf_tensor *[]){&tys},
                  NULL) == OPF_OK,
              "%s", opf_last_error());
        for (int64_t i = 0; i < R; i += R / 7 + 1) {
            for (int64_t j = 0; j < M; j++) {
                xr[j] = x[i * M + j];
                got[j] = ys[i * M + j];
            }
            (which ? ref_log_softmax_row : ref_softmax_row)((size_t)M, xr, want);
            CHECK_CLOSE_F64(got, want, (size_t)M, 1e-6, 1e-4, "misaligned rows, op %d row %lld", which, (long long)i);
        }
    }
    free(shifted);
    /* layer_norm_grad: dx streamed, checked on a few rows (the reference is O(M^2) a row) */
    CHECK(run(row("layer_norm_grad"), (const opf_tensor *[]){&tx, &tm, &tr, &tx, &tw, NULL, NULL},
              (const opf_tensor *[]){&tdx, &tdw, NULL}, NULL) == OPF_OK,
          "%s", opf_last_error());
    const int64_t check_rows[3] = {0, R / 2, R - 1};
    for (int k = 0; k < 3; k++) {
        const int64_t i = check_rows[k];
        for (int64_t j = 0; j < M; j++) {
            xr[j] = x[i * M + j];
            got[j] = dx[i * M + j];
        }
        ref_layer_norm_grad_row((size_t)M, xr, xr, wr, 1e-5, 0, 0, want, NULL, NULL);
        CHECK_CLOSE_F64(got, want, (size_t)M, 1e-4, 1e-3, "layer_norm_grad row %lld", (long long)i);
    }
    /* rms_norm_grad (dy = x): dx streamed, with w and dw (dx and dw in one
     * pass), with w and no dw, and with neither (the first pass a dot of dy
     * and x); checked on a few rows */
    CHECK(run(row("rms_norm"), (const opf_tensor *[]){&tx, &tw}, (const opf_tensor *[]){&ty, &tr}, NULL) == OPF_OK,
          "%s", opf_last_error());
    for (int k = 0; k < 3; k++) { /* (rms_norm itself: streamed, its first pass asking for the next row) */
        const int64_t i = check_rows[k];
        double rs;
        for (int64_t j = 0; j < M; j++) {
            xr[j] = x[i * M + j];
            got[j] = y[i * M + j];
        }
        ref_rms_norm_row((size_t)M, xr, wr, 1e-6, want, &rs);
        CHECK_CLOSE_F64(got, want, (size_t)M, 1e-6, 1e-5, "rms_norm row %lld", (long long)i);
        CHECK(fabs(rstd[i] - rs) <= 1e-5 * fabs(rs), "rms_norm row %lld: rstd %.9g, expected %.9g", (long long)i,
              (double)rstd[i], rs);
    }
    for (int variant = 0; variant < 3; variant++) {
        const opf_tensor *const w_arg = variant < 2 ? &tw : NULL, *const dw_arg = variant != 1 ? &tdw : NULL;
        CHECK(run(row("rms_norm_grad"), (const opf_tensor *[]){&tx, &tr, &tx, w_arg, NULL},
                  (const opf_tensor *[]){&tdx, dw_arg}, NULL) == OPF_OK,
              "%s", opf_last_error());
        for (int k = 0; k < 3; k++) {
            const int64_t i = check_rows[k];
            for (int64_t j = 0; j < M; j++) {
                xr[j] = x[i * M + j];
                got[j] = dx[i * M + j];
            }
            ref_rms_norm_grad_row((size_t)M, xr, xr, w_arg != NULL ? wr : NULL, 1e-6, 0, want, NULL);
            CHECK_CLOSE_F64(got, want, (size_t)M, 1e-4, 1e-3, "rms_norm_grad variant %d row %lld", variant,
                            (long long)i);
        }
    }
    free(x), free(y), free(w), free(mean), free(rstd), free(dx), free(dw), free(xr), free(want), free(wr), free(got);
}

/* softmax's streamed rows stored a call later (OPF_STORE_ROW_LATER: among
 * the next row's maximum, or by the engine after a thread's last row), and
 * layer_norm's stored by OPF_STORE_ROW: outputs of more than 32 MiB, which
 * the kernel streams itself, on 1 to 3 threads (each thread's last row left
 * to the engine), starting on a line, 16 bytes past one (NumPy's) and one
 * element past one (a partial first and last line a row, whose last line
 * goes out with the next row's first: opf_row_edge), rows of whole lines
 * and not. Every row against the reference once, then the same bits in
 * every other layout; the outputs start as NaN, so that a row, or the end of
 * one, left unstored shows. softmax's float rows come in five kinds, every
 * other row one whose first pass changes course (see the loop on x). */
TEST(test_later_rows) {
    static const struct {
        const char *op;
        opf_dtype dtype;
        int64_t m;
    } cases[] = {{"softmax", OPF_F32, 1024},
                 {"softmax", OPF_F32, 1000},
                 {"softmax", OPF_F64, 600},
                 {"layer_norm", OPF_F32, 1000},
                 {"layer_norm", OPF_F64, 600}};
    const int threads = opf_get_num_threads();
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const opf_dtype dtype = cases[c].dtype;
        const int norm = strcmp(cases[c].op, "layer_norm") == 0;
        const int64_t M = cases[c].m, elem = dtype == OPF_F64 ? 8 : 4;
        const int64_t R = harness_slow() ? 16 : ((int64_t)33 << 20) / (M * elem) + 3;
        const size_t count = (size_t)(R * M), bytes = count * (size_t)elem;
        int64_t s2[2] = {R, M}, sm[1] = {M}, sr[1] = {R};
        rng r = rng_seed(31);
        void *x = xcalloc(count, (size_t)elem), *first = xcalloc(count, (size_t)elem);
        void *w = xcalloc((size_t)M, (size_t)elem), *b = xcalloc((size_t)M, (size_t)elem);
        void *mean = xcalloc((size_t)R, (size_t)elem), *rstd = xcalloc((size_t)R, (size_t)elem);
        char *block = xcalloc(bytes + 128, 1);
        fill_uniform(&r, dtype, x, count, -6, 6);
        for (int64_t i = 0; !norm && dtype == OPF_F32 && i < R; i++) {
            /* rows whose shift, guessed from their first and last elements, fails or holds
             * (opf_exp_sum_blocks_below_f32): a maximum 100 above the first block's (the
             * maximum's pass after part of the exponentials; e^100 overflows), 40 above it (one pass, terms up to
             * e^46), first elements of -inf (no guess) or of -1e9 (left padding), the maximum
             * among the last elements */
            float *const xi = (float *)x + i * M;
            if (i % 5 == 1) {
                xi[M / 2] = 100.0f;
            } else if (i % 5 == 2) {
                xi[M / 3] = 40.0f;
            } else if (i % 5 == 3) {
                for (int64_t j = 0; j < 40; j++) {
                    xi[j] = i % 2 ? -INFINITY : -1e9f;
                }
            } else if (i % 5 == 4) {
                xi[M - 2] = 30.0f;
            }
        }
        fill_uniform(&r, dtype, w, (size_t)M, 0.5, 1.5);
        fill_uniform(&r, dtype, b, (size_t)M, -1, 1);
        double *xr = xcalloc((size_t)M, sizeof(double)), *want = xcalloc((size_t)M, sizeof(double)),
               *got = xcalloc((size_t)M, sizeof(double)), *wr = xcalloc((size_t)M, sizeof(double)),
               *br = xcalloc((size_t)M, sizeof(double));
        for (int64_t j = 0; j < M; j++) {
            wr[j] = dtype == OPF_F64 ? ((const double *)w)[j] : ((const float *)w)[j];
            br[j] = dtype == OPF_F64 ? ((const double *)b)[j] : ((const float *)b)[j];
        }
        opf_tensor tw = opf_tensor_make(w, dtype, 1, sm), tb = opf_tensor_make(b, dtype, 1, sm),
                   tm = opf_tensor_make(mean, dtype, 1, sr), ts = opf_tensor_make(rstd, dtype, 1, sr);
        const int64_t offsets[3] = {0, 16, elem};
        int checked = 0;
        for (int o = 0; o < 3; o++) {
            char *y = (char *)(((uintptr_t)block + 63) / 64 * 64) + offsets[o];
            for (int t = 1; t <= 3; t++) {
                opf_tensor tx = opf_tensor_make(x, dtype, 2, s2), ty = opf_tensor_make(y, dtype, 2, s2);
                for (size_t i = 0; i < count; i++) {
                    if (dtype == OPF_F64) {
                        ((double *)(void *)y)[i] = NAN;
                    } else {
                        ((float *)(void *)y)[i] = NAN;
                    }
                }
                opf_set_num_threads(t);
                const opf_status st =
                    norm ? run(row("layer_norm"), (const opf_tensor *[]){&tx, &tw, &tb},
                               (const opf_tensor *[]){&ty, &tm, &ts}, NULL)
                         : run(row("softmax"), (const opf_tensor *[]){&tx}, (const opf_tensor *[]){&ty}, NULL);
                if (!CHECK(st == OPF_OK, "%s: %s", cases[c].op, opf_last_error())) {
                    continue;
                }
                if (checked) {
                    CHECK_SAME_BITS(y, first, count, (size_t)elem, "%s %s [%lld, %lld], offset %lld, %d threads",
                                    cases[c].op, opf_dtype_name(dtype), (long long)R, (long long)M,
                                    (long long)offsets[o], t);
                    continue;
                }
                for (int64_t i = 0; i < R; i++) {
                    for (int64_t j = 0; j < M; j++) {
                        xr[j] = dtype == OPF_F64 ? ((const double *)x)[i * M + j] : ((const float *)x)[i * M + j];
                        got[j] = dtype == OPF_F64 ? ((const double *)(void *)y)[i * M + j]
                                                  : ((const float *)(void *)y)[i * M + j];
                    }
                    double m, rs;
                    if (norm) {
                        ref_layer_norm_row((size_t)M, xr, wr, br, 1e-5, want, &m, &rs);
                    } else {
                        ref_softmax_row((size_t)M, xr, want);
                    }
                    if (!CHECK_CLOSE_F64(got, want, (size_t)M, norm ? 1e-5 : 1e-7, 1e-5, "%s %s [%lld, %lld] row %lld",
                                         cases[c].op, opf_dtype_name(dtype), (long long)R, (long long)M,
                                         (long long)i)) {
                        break;
                    }
                }
                memcpy(first, y, bytes);
                checked = 1;
            }
        }
        free(x), free(first), free(w), free(b), free(mean), free(rstd), free(block), free(xr), free(want), free(got);
        free(wr), free(br);
    }
    opf_set_num_threads(threads);
}

int main(void) {
    RUN_TEST(test_softmax_layouts);
    RUN_TEST(test_norm_layouts);
    RUN_TEST(test_softmax_grads);
    RUN_TEST(test_norm_grads);
    RUN_TEST(test_second_order);
    RUN_TEST(test_gradient_row_tangents);
    RUN_TEST(test_forward_tangents);
    RUN_TEST(test_second_order_row_tangents);
    RUN_TEST(test_special_rows);
    RUN_TEST(test_special_long_rows);
    RUN_TEST(test_empty);
    RUN_TEST(test_bad_input);
    RUN_TEST(test_thread_count_independent);
    RUN_TEST(test_large_rows);
    RUN_TEST(test_later_rows);
    return harness_summary();
}
