/*
 * layer_norm.c — layer_norm over the last axis (weight and bias optional),
 * its gradient and the gradients of that (see norms.h); the tangent rows of
 * those are in layer_norm_jvp.c.
 */
#include "norms.h"

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
 * reads this one (opf_prefetch_at) where the output's row is not streamed
 * (OPF_ROW_STREAMED): rows too short for that have no other prefetch, and
 * rows of 64 floats took 1.2-1.3 times as long without it on one thread.
 * A streamed row asks for the first half of the next row in its statistics
 * pass, a step a group of lanes (OPF_NEXT_ROW_FIRST_PASS), and leaves the
 * other half to OPF_STORE_ROW, which asks for it among its stores, so that
 * memory reads the next row during both passes: [8192, 4096] float32 1.08-1.10
 * times as fast on one thread of an Intel Xeon (Emerald Rapids), 1.04-1.06
 * on two, float64 1.06-1.08 on one, the same bits, than with all of the next
 * row asked for among the stores (which was itself 1.07-1.09 times as fast
 * on one thread, 1.12-1.13 on two, as the whole row asked for in the
 * statistics pass). */
OPF_ROW_KERNEL(layer_norm, (x, w, b), (y, mean, rstd), {
    T k = n >= 64 ? opf_sum(64, x) / (T)64 : n > 0 ? x[0] : (T)0;
    T s1, s2, d = 0, var = 0;
    int64_t ahead = OPF_ROW_STREAMED(y) ? 0 : NORMS_AHEAD(n);  /* the next row, where rows lie one after the other */
    const int one_loop = opf_vector_bytes >= 64;               /* (norms_c_sums_f32) */
    OPF_NEXT_ROW_FIRST_PASS(next, n / (OPF_IS_F64 ? 32 : 64)); /* (a step a group of norms_c_sums' lanes) */
    for (int pass = 0; pass < 2; pass++, ahead = 0) {
        if (OPF_IS_F64) {
            norms_c_sums_f64(n, (const double *)x, (double)k, (double *)&s1, (double *)&s2, ahead, one_loop,
                             pass == 0 ? &next : NULL);
        } else {
            norms_c_sums_f32(n, (const float *)x, (float)k, (float *)&s1, (float *)&s2, ahead, one_loop,
                             pass == 0 ? &next : NULL);
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
            OPF_NEXT_ROW_FIRST_PASS(next, n / (OPF_IS_F64 ? 32 : 64)); /* (a step a group of lanes) */
            if (OPF_IS_F64) {
                norms_g_sums_f64(n, (const double *)dy, (const double *)w, (const double *)x, (double)mu, (double *)&sg,
                                 (double *)&sgx, &next);
            } else {
                norms_g_sums_f32(n, (const float *)dy, (const float *)w, (const float *)x, (float)mu, (float *)&sg,
                                 (float *)&sgx, &next);
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
            OPF_STORE_ROW(dx, i, r * (dy[i] * w[i]) + c0 - ((x[i] - mu) * r) * c1);
        } else if (dy != NULL) { /* (dx held dy (x - mu) for the sums: stored in place) */
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
