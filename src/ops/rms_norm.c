/*
 * rms_norm.c — rms_norm over the last axis, its gradient, the gradient of
 * that and the tangent rows of both (see norms.h).
 */
#include "norms.h"

/* --- rms_norm ----------------------------------------------------------------------------------------------------- */

/* y = x * rstd * w with rstd = 1 / sqrt(mean(x^2) + eps); a row of length 0
 * has rstd NaN (as torch's _fused_rms_norm). Rows of NORMS_FIRST_PASS_MIN
 * elements and more ask for the first half of the next row as they sum the
 * squares (OPF_ROW_DOT), leaving the other half to the stores: [8192, 4096]
 * float32 16 bytes past a line (NumPy's arrays) 1.03-1.10 times as fast on
 * one thread of an Intel Xeon (Emerald Rapids), 1.09-1.11 on two, on a line
 * 1.02-1.09; float64 1.04-1.05; rows of 256 floats 0.98-1.00, which keep
 * opf_dot. */
OPF_ROW_KERNEL(rms_norm, (x, w), (y, rstd), {
    const T eps = NORMS_EPS(attrs[0].f);
    const T ss = n >= NORMS_FIRST_PASS_MIN ? OPF_ROW_DOT(n, x, x) : opf_dot(n, x, x); /* (the same bits) */
    const T r = (T)1 / opf_sqrt(ss / (T)n + eps);
    rstd[0] = r;
    if (w != NULL) {
        OPF_STORE_ROW(y, i, (x[i] * r) * w[i]);
    } else {
        OPF_STORE_ROW(y, i, x[i] * r);
    }
})

OPF_ROW_KERNEL_TEAM(rms_norm_team, rms_norm, (x, w), (y, rstd), {
    const T eps = NORMS_EPS(attrs[0].f);
    T ss = 0;
    OPF_TEAM_FOR(i, n) { ss += x[i] * x[i]; }
    const T r = (T)1 / opf_sqrt(opf_team_sum(opf_team, ss) / (T)n + eps);
    OPF_TEAM_ONCE { rstd[0] = r; }
    OPF_TEAM_FOR(i, n) { y[i] = w != NULL ? (x[i] * r) * w[i] : x[i] * r; }
})

/* With g = dy * w, r = rstd: dx = r g - x (r^3 / M) (<g, x> + drstd);
 * dw = sum over rows of dy x r. dy and drstd absent: zero. */
OPF_ROW_KERNEL(rms_norm_grad, (x, rstd, dy, w, drstd), (dx, dw), {
    const T r = rstd[0], drs = drstd != NULL ? drstd[0] : (T)0;
    if (dx != NULL && n > 0 && dy != NULL) {
        T s, sg;
        if (w != NULL) {
            OPF_NEXT_ROW_FIRST_PASS(next, n / (OPF_IS_F64 ? 32 : 64)); /* (a step a group of lanes) */
            if (OPF_IS_F64) {
                norms_g_sums_f64(n, (const double *)dy, (const double *)w, (const double *)x, 0.0, (double *)&sg,
                                 (double *)&s, &next);
            } else {
                norms_g_sums_f32(n, (const float *)dy, (const float *)w, (const float *)x, 0.0f, (float *)&sg,
                                 (float *)&s, &next);
            }
        } else {
            s = OPF_ROW_DOT(n, dy, x);
        }
        const T c = (r * r * r / (T)n) * (s + drs);
        if (w != NULL && dw != NULL) { /* training's case: dx and dw in one pass */
            OPF_STORE_ROW(dx, i, (dw[i] += (dy[i] * x[i]) * r, r * (dy[i] * w[i]) - x[i] * c));
            return;
        }
        if (w != NULL) {
            OPF_STORE_ROW(dx, i, r * (dy[i] * w[i]) - x[i] * c);
        } else {
            OPF_STORE_ROW(dx, i, r * dy[i] - x[i] * c);
        }
    } else if (dx != NULL && n > 0) {
        const T c = (r * r * r / (T)n) * drs;
        for (int64_t i = 0; i < n; i++) {
            dx[i] = -(x[i] * c);
        }
    }
    if (dw != NULL && dy != NULL) {
        for (int64_t i = 0; i < n; i++) {
            dw[i] += (dy[i] * x[i]) * r;
        }
    }
})

OPF_ROW_KERNEL_TEAM(rms_norm_grad_team, rms_norm_grad, (x, rstd, dy, w, drstd), (dx, dw), {
    const T r = rstd[0], drs = drstd != NULL ? drstd[0] : (T)0;
    if (dx != NULL && n > 0 && dy != NULL) {
        T sgx = 0;
        OPF_TEAM_FOR(i, n) { sgx += (w != NULL ? dy[i] * w[i] : dy[i]) * x[i]; }
        const T c = (r * r * r / (T)n) * (opf_team_sum(opf_team, sgx) + drs);
        OPF_TEAM_FOR(i, n) { dx[i] = r * (w != NULL ? dy[i] * w[i] : dy[i]) - x[i] * c; }
    } else if (dx != NULL && n > 0) {
        const T c = (r * r * r / (T)n) * drs;
        OPF_TEAM_FOR(i, n) { dx[i] = -(x[i] * c); }
    }
    if (dw != NULL && dy != NULL) {
        OPF_TEAM_FOR(i, n) { dw[i] += (dy[i] * x[i]) * r; }
    }
})

/* The gradients of rms_norm_grad's dx and dw (cotangents ddx, ddw; absent:
 * zero) with respect to each of its inputs. With c = r^3 / M, g = dy w,
 * S = <g, x> + drstd, a = <ddx, x>:
 *   gx = -c (ddx S + a g) + r ddw dy
 *   grstd = <ddx, g> - 3 r^2 / M a S + <ddw, dy x>
 *   gdy = w (r ddx - c a x) + r ddw x      gw = sum over rows of dy (r ddx - c a x)
 *   gdrstd = -c a
 * gdy and gdrstd do not involve dy: with ddx = x', ddw = w' they are
 * rms_norm's tangents y' and rstd' (its tangent rule). */
/* (written once for the CPU body and the team body: see NORMS_SEQ_FOR) */
#define RMS_NORM_GRAD_GRAD_BODY(FOR, SUM, ONCE)                                                                        \
    const double r = rstd[0], m = n > 0 ? (double)n : 1, c = r * r * r / m, drs = NORMS_OR(drstd, 0, 0);               \
    double ps = 0, pa = 0, pdg = 0, pe = 0;                                                                            \
    FOR(i, n) {                                                                                                        \
        const double dyi = NORMS_OR(dy, i, 0), g = dyi * NORMS_OR(w, i, 1), dd = NORMS_OR(ddx, i, 0);                  \
        ps += g * NORMS_AT(x, i);                                                                                      \
        pa += dd * NORMS_AT(x, i);                                                                                     \
        pdg += dd * g;                                                                                                 \
        pe += NORMS_OR(ddw, i, 0) * dyi * NORMS_AT(x, i);                                                              \
    }                                                                                                                  \
    const double s = SUM(ps) + drs, a = SUM(pa), dg = SUM(pdg), e = SUM(pe);                                           \
    FOR(i, n) {                                                                                                        \
        const double xi = NORMS_AT(x, i), dyi = NORMS_OR(dy, i, 0), wi = NORMS_OR(w, i, 1), dd = NORMS_OR(ddx, i, 0),  \
                     dw_i = NORMS_OR(ddw, i, 0), proj = r * dd - c * a * xi;                                           \
        if (gdy != NULL) {                                                                                             \
            gdy[i] = (T)(wi * proj + r * dw_i * xi);                                                                   \
        }                                                                                                              \
        if (gx != NULL) {                                                                                              \
            gx[i] = (T)(-c * (dd * s + a * dyi * wi) + r * dw_i * dyi);                                                \
        }                                                                                                              \
        if (gw != NULL) {                                                                                              \
            gw[i] += (T)(dyi * proj);                                                                                  \
        }                                                                                                              \
    }                                                                                                                  \
    ONCE {                                                                                                             \
        if (grstd != NULL) {                                                                                           \
            grstd[0] = (T)(dg - 3 * r * r / m * a * s + e);                                                            \
        }                                                                                                              \
        if (gdrstd != NULL) {                                                                                          \
            gdrstd[0] = (T)(-c * a);                                                                                   \
        }                                                                                                              \
    }                                                                                                                  \
    (void)0

OPF_ROW_KERNEL(rms_norm_grad_grad, (x, rstd, dy, w, drstd, ddx, ddw), (gx, grstd, gdy, gw, gdrstd),
               { RMS_NORM_GRAD_GRAD_BODY(NORMS_SEQ_FOR, NORMS_SEQ_SUM, NORMS_SEQ_ONCE); })
OPF_ROW_KERNEL_TEAM(rms_norm_grad_grad_team, rms_norm_grad_grad, (x, rstd, dy, w, drstd, ddx, ddw),
                    (gx, grstd, gdy, gw, gdrstd),
                    { RMS_NORM_GRAD_GRAD_BODY(OPF_TEAM_FOR, NORMS_TEAM_SUM, OPF_TEAM_ONCE); })

/* The derivative of rms_norm_grad's dx and dw along tangents xt, rstdt, wt
 * of x, rstd and w (absent: zero); rms_norm_grad itself gives the part of dy
 * and drstd, in which it is linear. With c = r^3 / M, g = dy w, S = <g, x> +
 * drstd, g' = dy wt:
 *   dxt = -c (xt S + x <g, xt>) + rstdt (g - 3 r^2 x S / M) + r g' - c x <g', x>
 *   dwt = sum over rows of dy (xt r + x rstdt) */
/* (written once for the CPU body and the team body: see NORMS_SEQ_FOR) */
#define RMS_NORM_GRAD_JVP_BODY(FOR, SUM, ONCE)                                                                         \
    const double r = rstd[0], m = n > 0 ? (double)n : 1, c = r * r * r / m, rt = NORMS_OR(rstdt, 0, 0);                \
    double ps = 0, pgxt = 0, pgtx = 0;                                                                                 \
    FOR(i, n) {                                                                                                        \
        const double dyi = NORMS_OR(dy, i, 0), g = dyi * NORMS_OR(w, i, 1);                                            \
        ps += g * NORMS_AT(x, i);                                                                                      \
        pgxt += g * NORMS_OR(xt, i, 0);                                                                                \
        pgtx += dyi * NORMS_OR(wt, i, 0) * NORMS_AT(x, i);                                                             \
    }                                                                                                                  \
    const double s = NORMS_OR(drstd, 0, 0) + SUM(ps), gxt = SUM(pgxt), gtx = SUM(pgtx);                                \
    FOR(i, n) {                                                                                                        \
        const double xi = NORMS_AT(x, i), dyi = NORMS_OR(dy, i, 0), g = dyi * NORMS_OR(w, i, 1),                       \
                     xti = NORMS_OR(xt, i, 0), gt = dyi * NORMS_OR(wt, i, 0);                                          \
        if (dxt != NULL) {                                                                                             \
            dxt[i] = (T)(-c * (xti * s + xi * gxt) + rt * (g - 3 * r * r * xi * s / m) + r * gt - c * xi * gtx);       \
        }                                                                                                              \
        if (dwt != NULL) {                                                                                             \
            dwt[i] += (T)(dyi * (xti * r + xi * rt));                                                                  \
        }                                                                                                              \
    }                                                                                                                  \
    (void)0

OPF_ROW_KERNEL(rms_norm_grad_jvp, (x, rstd, dy, w, drstd, xt, rstdt, wt), (dxt, dwt),
               { RMS_NORM_GRAD_JVP_BODY(NORMS_SEQ_FOR, NORMS_SEQ_SUM, NORMS_SEQ_ONCE); })
OPF_ROW_KERNEL_TEAM(rms_norm_grad_jvp_team, rms_norm_grad_jvp, (x, rstd, dy, w, drstd, xt, rstdt, wt), (dxt, dwt),
                    { RMS_NORM_GRAD_JVP_BODY(OPF_TEAM_FOR, NORMS_TEAM_SUM, OPF_TEAM_ONCE); })

/* The derivatives of rms_norm_grad_grad's outputs along a tangent xt of x
 * (rms_norm_grad_grad_jvp) and rstdt of rstd (rms_norm_grad_grad_jvp_rstd);
 * absent: zero; rms_norm_grad_grad_jvp_w (below) does w. rms_norm_grad_grad
 * is linear in (dy, drstd) and in (ddx, ddw): it gives the rest of its
 * tangent rule itself. With c = r^3 / M, g = dy w, S = <g, x> + drstd, a = <ddx, x>,
 * its outputs are
 *   gx = -c (ddx S + a g) + r ddw dy          grstd = <ddx, g> - 3 r^2 a S / M + <ddw, dy x>
 *   gdy = w (r ddx - c a x) + r ddw x         gw = sum over rows of dy (r ddx - c a x)
 *   gdrstd = -c a.
 * Along xt (S' = <g, xt>, a' = <ddx, xt>, c and r fixed):
 *   gxt = -c (ddx S' + a' g)                  grstdt = -3 r^2 (a' S + a S') / M + <ddw, dy xt>
 *   gdyt = -c w (a' x + a xt) + r ddw xt      gwt = sum over rows of -c dy (a' x + a xt)
 *   gdrstdt = -c a'
 * Along rstdt (c' = 3 r^2 rstdt / M):
 *   gxt = -c' (ddx S + a g) + rstdt ddw dy    grstdt = -6 r rstdt a S / M
 *   gdyt = w (rstdt ddx - c' a x) + rstdt ddw x
 *   gwt = sum over rows of dy (rstdt ddx - c' a x)
 *   gdrstdt = -c' a
 * These are second derivatives of <ddx, dx> + <ddw, dw> (rms_norm_grad's
 * outputs), symmetric: with cotangents of gx, grstd as xt, rstdt they are
 * also the gradients that rms_norm_grad_grad's gradient rule takes from
 * them. */
#define NORMS_RMS_GG_SUMS(FOR, SUM)                                                                                    \
    const double r = rstd[0], m = n > 0 ? (double)n : 1;                                                               \
    double ps_ = 0, pa_ = 0;                                                                                           \
    FOR(i, n) {                                                                                                        \
        ps_ += NORMS_OR(dy, i, 0) * NORMS_OR(w, i, 1) * NORMS_AT(x, i);                                                \
        pa_ += NORMS_OR(ddx, i, 0) * NORMS_AT(x, i);                                                                   \
    }                                                                                                                  \
    const double s = NORMS_OR(drstd, 0, 0) + SUM(ps_), a = SUM(pa_);

/* (written once for the CPU body and the team body: see NORMS_SEQ_FOR) */
#define RMS_NORM_GRAD_GRAD_JVP_BODY(FOR, SUM, ONCE)                                                                    \
    NORMS_RMS_GG_SUMS(FOR, SUM)                                                                                        \
    const double c = r * r * r / m;                                                                                    \
    double pst = 0, pat = 0, pet = 0;                                                                                  \
    FOR(i, n) {                                                                                                        \
        const double dyi = NORMS_OR(dy, i, 0), xti = NORMS_OR(xt, i, 0);                                               \
        pst += dyi * NORMS_OR(w, i, 1) * xti;                                                                          \
        pat += NORMS_OR(ddx, i, 0) * xti;                                                                              \
        pet += NORMS_OR(ddw, i, 0) * dyi * xti;                                                                        \
    }                                                                                                                  \
    const double st = SUM(pst), at = SUM(pat), et = SUM(pet);                                                          \
    FOR(i, n) {                                                                                                        \
        const double xi = NORMS_AT(x, i), xti = NORMS_OR(xt, i, 0), dyi = NORMS_OR(dy, i, 0), wi = NORMS_OR(w, i, 1),  \
                     dd = NORMS_OR(ddx, i, 0), proj = -c * (at * xi + a * xti);                                        \
        if (gxt != NULL) {                                                                                             \
            gxt[i] = (T)(-c * (dd * st + at * dyi * wi));                                                              \
        }                                                                                                              \
        if (gdyt != NULL) {                                                                                            \
            gdyt[i] = (T)(wi * proj + r * NORMS_OR(ddw, i, 0) * xti);                                                  \
        }                                                                                                              \
        if (gwt != NULL) {                                                                                             \
            gwt[i] += (T)(dyi * proj);                                                                                 \
        }                                                                                                              \
    }                                                                                                                  \
    ONCE {                                                                                                             \
        if (grstdt != NULL) {                                                                                          \
            grstdt[0] = (T)(-3 * r * r * (at * s + a * st) / m + et);                                                  \
        }                                                                                                              \
        if (gdrstdt != NULL) {                                                                                         \
            gdrstdt[0] = (T)(-c * at);                                                                                 \
        }                                                                                                              \
    }                                                                                                                  \
    (void)0

OPF_ROW_KERNEL(rms_norm_grad_grad_jvp, (x, rstd, dy, w, drstd, ddx, ddw, xt), (gxt, grstdt, gdyt, gwt, gdrstdt),
               { RMS_NORM_GRAD_GRAD_JVP_BODY(NORMS_SEQ_FOR, NORMS_SEQ_SUM, NORMS_SEQ_ONCE); })
OPF_ROW_KERNEL_TEAM(rms_norm_grad_grad_jvp_team, rms_norm_grad_grad_jvp, (x, rstd, dy, w, drstd, ddx, ddw, xt),
                    (gxt, grstdt, gdyt, gwt, gdrstdt),
                    { RMS_NORM_GRAD_GRAD_JVP_BODY(OPF_TEAM_FOR, NORMS_TEAM_SUM, OPF_TEAM_ONCE); })

/* (written once for the CPU body and the team body: see NORMS_SEQ_FOR) */
#define RMS_NORM_GRAD_GRAD_JVP_RSTD_BODY(FOR, SUM, ONCE)                                                               \
    NORMS_RMS_GG_SUMS(FOR, SUM)                                                                                        \
    const double rt = NORMS_OR(rstdt, 0, 0), ct = 3 * r * r * rt / m;                                                  \
    FOR(i, n) {                                                                                                        \
        const double xi = NORMS_AT(x, i), dyi = NORMS_OR(dy, i, 0), wi = NORMS_OR(w, i, 1), dd = NORMS_OR(ddx, i, 0),  \
                     dw_i = NORMS_OR(ddw, i, 0), proj = rt * dd - ct * a * xi;                                         \
        if (gxt != NULL) {                                                                                             \
            gxt[i] = (T)(-ct * (dd * s + a * dyi * wi) + rt * dw_i * dyi);                                             \
        }                                                                                                              \
        if (gdyt != NULL) {                                                                                            \
            gdyt[i] = (T)(wi * proj + rt * dw_i * xi);                                                                 \
        }                                                                                                              \
        if (gwt != NULL) {                                                                                             \
            gwt[i] += (T)(dyi * proj);                                                                                 \
        }                                                                                                              \
    }                                                                                                                  \
    ONCE {                                                                                                             \
        if (grstdt != NULL) {                                                                                          \
            grstdt[0] = (T)(-6 * r * rt * a * s / m);                                                                  \
        }                                                                                                              \
        if (gdrstdt != NULL) {                                                                                         \
            gdrstdt[0] = (T)(-ct * a);                                                                                 \
        }                                                                                                              \
    }                                                                                                                  \
    (void)0

OPF_ROW_KERNEL(rms_norm_grad_grad_jvp_rstd, (x, rstd, dy, w, drstd, ddx, ddw, rstdt), (gxt, grstdt, gdyt, gwt, gdrstdt),
               { RMS_NORM_GRAD_GRAD_JVP_RSTD_BODY(NORMS_SEQ_FOR, NORMS_SEQ_SUM, NORMS_SEQ_ONCE); })
OPF_ROW_KERNEL_TEAM(rms_norm_grad_grad_jvp_rstd_team, rms_norm_grad_grad_jvp_rstd,
                    (x, rstd, dy, w, drstd, ddx, ddw, rstdt), (gxt, grstdt, gdyt, gwt, gdrstdt),
                    { RMS_NORM_GRAD_GRAD_JVP_RSTD_BODY(OPF_TEAM_FOR, NORMS_TEAM_SUM, OPF_TEAM_ONCE); })

/* Along wt (rms_norm_grad_grad_jvp_w): w enters through g = dy w only, so
 * gw and gdrstd do not move and the others take the part of g linear in w
 * with g' = dy wt (drstd and ddw drop out):
 *   gxt = -c (ddx <g', x> + a g')    grstdt = <ddx, g'> - 3 r^2 a <g', x> / M    gdyt = wt (r ddx - c a x)
 * A row of its own, not rms_norm_grad_grad with wt as its w: an absent
 * tangent must count as zero, an absent w counts as ones. (Written once for
 * the CPU body and the team body: see NORMS_SEQ_FOR.) */
#define RMS_NORM_GRAD_GRAD_JVP_W_BODY(FOR, SUM, ONCE)                                                                  \
    const double r = rstd[0], m = n > 0 ? (double)n : 1, c = r * r * r / m;                                            \
    double pa = 0, psw = 0, pdgw = 0;                                                                                  \
    FOR(i, n) {                                                                                                        \
        const double xi = NORMS_AT(x, i), dd = NORMS_OR(ddx, i, 0), gt = NORMS_OR(dy, i, 0) * NORMS_OR(wt, i, 0);      \
        pa += dd * xi;                                                                                                 \
        psw += gt * xi;                                                                                                \
        pdgw += dd * gt;                                                                                               \
    }                                                                                                                  \
    const double a = SUM(pa), sw = SUM(psw), dgw = SUM(pdgw);                                                          \
    FOR(i, n) {                                                                                                        \
        const double dd = NORMS_OR(ddx, i, 0), wti = NORMS_OR(wt, i, 0);                                               \
        if (gxt != NULL) {                                                                                             \
            gxt[i] = (T)(-c * (dd * sw + a * NORMS_OR(dy, i, 0) * wti));                                               \
        }                                                                                                              \
        if (gdyt != NULL) {                                                                                            \
            gdyt[i] = (T)(wti * (r * dd - c * a * NORMS_AT(x, i)));                                                    \
        }                                                                                                              \
    }                                                                                                                  \
    ONCE {                                                                                                             \
        if (grstdt != NULL) {                                                                                          \
            grstdt[0] = (T)(dgw - 3 * r * r * a * sw / m);                                                             \
        }                                                                                                              \
    }                                                                                                                  \
    (void)0

OPF_ROW_KERNEL(rms_norm_grad_grad_jvp_w, (x, rstd, dy, ddx, wt), (gxt, grstdt, gdyt),
               { RMS_NORM_GRAD_GRAD_JVP_W_BODY(NORMS_SEQ_FOR, NORMS_SEQ_SUM, NORMS_SEQ_ONCE); })
OPF_ROW_KERNEL_TEAM(rms_norm_grad_grad_jvp_w_team, rms_norm_grad_grad_jvp_w, (x, rstd, dy, ddx, wt),
                    (gxt, grstdt, gdyt),
                    { RMS_NORM_GRAD_GRAD_JVP_W_BODY(OPF_TEAM_FOR, NORMS_TEAM_SUM, OPF_TEAM_ONCE); })

const opf_op_decl opf_decl_rms_norm = {
    "rms_norm(x[..., M], w[M]?, *, eps: float = -1) -> (y[..., M], rstd[...])",
    .doc = "RMS normalization over the last axis (torch.nn.functional.rms_norm): y = x * rstd * w with "
           "rstd = 1 / sqrt(mean(x^2) + eps) per row. A negative eps (the default) means the machine epsilon of "
           "x's dtype, as torch's eps=None.",
    .grad = "dx, dw = rms_norm_grad(x, rstd, dy, w, drstd)",
    .jvp = "_, _, y', _, rstd' = rms_norm_grad_grad(x, rstd, _, w, _, x', w')",
    .arg_docs = "x: input [..., M], rows along the last axis; w: weight [M], optional (absent: ones); eps: added to "
                "the mean square (negative: the dtype's machine epsilon); y: the normalized rows, the shape of x; "
                "rstd: 1 / sqrt(mean(x^2) + eps) of each row [...]",
    .row = &rms_norm_team,
};

const opf_op_decl opf_decl_rms_norm_grad = {
    "rms_norm_grad(x[..., M], rstd[...], dy[..., M]?, w[M]?, drstd[...]?) -> (dx[..., M]?, dw[M]?)",
    .doc = "Gradients of rms_norm: with g = dy * w, dx = rstd * g - x * rstd^3 / M * (sum(g * x) + drstd) per row "
           "and dw = the sum over rows of dy * x * rstd. dy and drstd, the gradients flowing into rms_norm's y and "
           "rstd, are optional (absent: zero).",
    .grad = "dx, drstd, ddy, dw, ddrstd = rms_norm_grad_grad(x, rstd, dy, w, drstd, ddx, ddw)",
    .jvp = "dx', dw' = rms_norm_grad(x, rstd, dy', w, drstd'); dx', dw' = rms_norm_grad_jvp(x, rstd, dy, w, drstd, x', "
           "rstd', w')",
    .arg_docs = "x: rms_norm's input; rstd: rms_norm's rstd; dy: gradient of rms_norm's y, optional; w: rms_norm's "
                "weight, optional; drstd: gradient of rms_norm's rstd, optional; dx: gradient of x; dw: gradient of "
                "w [M]",
    .row = &rms_norm_grad_team,
};

const opf_op_decl opf_decl_rms_norm_grad_grad = {
    "rms_norm_grad_grad(x[..., M], rstd[...], dy[..., M]?, w[M]?, drstd[...]?, ddx[..., M]?, ddw[M]?) -> "
    "(gx[..., M]?, grstd[...]?, gdy[..., M]?, gw[M]?, gdrstd[...]?)",
    .doc = "Gradients of rms_norm_grad with respect to each of its inputs, from the gradients ddx and ddw flowing "
           "into its outputs (absent: zero). gdy and gdrstd do not involve dy: with ddx = x' and ddw = w' they are "
           "rms_norm's tangents y' and rstd'.",
    .grad = "dx, drstd, _, dw, _ = rms_norm_grad_grad(x, rstd, dgdy, w, dgdrstd, ddx, ddw); "
            "dx, drstd, ddy, dw, ddrstd = rms_norm_grad_grad_jvp(x, rstd, dy, w, drstd, ddx, ddw, dgx); "
            "dx, drstd, ddy, dw, ddrstd = rms_norm_grad_grad_jvp_rstd(x, rstd, dy, w, drstd, ddx, ddw, dgrstd); "
            "dx, drstd, ddy = rms_norm_grad_grad_jvp_w(x, rstd, dy, ddx, dgw); "
            "dddx, dddw = rms_norm_grad(x, rstd, dgdy, w, dgdrstd); "
            "dddx, dddw = rms_norm_grad_jvp(x, rstd, dy, w, drstd, dgx, dgrstd, dgw)",
    .jvp = "gx', grstd', _, gw', _ = rms_norm_grad_grad(x, rstd, dy', w, drstd', ddx, ddw); "
           "gx', grstd', gdy', gw', gdrstd' = rms_norm_grad_grad(x, rstd, dy, w, drstd, ddx', ddw'); "
           "gx', grstd', gdy' = rms_norm_grad_grad_jvp_w(x, rstd, dy, ddx, w'); "
           "gx', grstd', gdy', gw', gdrstd' = rms_norm_grad_grad_jvp(x, rstd, dy, w, drstd, ddx, ddw, x'); "
           "gx', grstd', gdy', gw', gdrstd' = rms_norm_grad_grad_jvp_rstd(x, rstd, dy, w, drstd, ddx, ddw, rstd')",
    .arg_docs = "x: rms_norm_grad's x; rstd: rms_norm_grad's rstd; dy: rms_norm_grad's dy, optional; w: "
                "rms_norm_grad's w, optional; drstd: rms_norm_grad's drstd, optional; ddx: gradient of rms_norm_grad's "
                "dx; ddw: gradient of rms_norm_grad's dw; gx: gradient of x; grstd: gradient of rstd; gdy: gradient "
                "of dy; gw: gradient of w; gdrstd: gradient of drstd",
    .row = &rms_norm_grad_grad_team,
};

const opf_op_decl opf_decl_rms_norm_grad_jvp = {
    "rms_norm_grad_jvp(x[..., M], rstd[...], dy[..., M]?, w[M]?, drstd[...]?, xt[..., M]?, rstdt[...]?, wt[M]?) -> "
    "(dxt[..., M]?, dwt[M]?)",
    .doc = "The derivative of rms_norm_grad's dx and dw along tangents xt, rstdt and wt of x, rstd and w (absent: "
           "zero): the part of rms_norm_grad's tangent rule that rms_norm_grad itself (linear in dy and drstd) "
           "does not give.",
    .arg_docs = "x: rms_norm_grad's x; rstd: rms_norm_grad's rstd; dy: rms_norm_grad's dy, optional; w: "
                "rms_norm_grad's w, optional; drstd: rms_norm_grad's drstd, optional; xt: tangent of x; rstdt: tangent "
                "of rstd; wt: tangent of w; dxt: tangent of dx; dwt: tangent of dw",
    .row = &rms_norm_grad_jvp_team,
};

#define NORMS_RMS_GG_JVP_DOCS(what)                                                                                    \
    "x: rms_norm_grad_grad's x; rstd: rms_norm_grad_grad's rstd; dy: rms_norm_grad_grad's dy, optional; w: "           \
    "rms_norm_grad_grad's w, optional; drstd: rms_norm_grad_grad's drstd, optional; ddx: rms_norm_grad_grad's ddx, "   \
    "optional; ddw: rms_norm_grad_grad's ddw, optional; " what "; gxt: tangent of gx; grstdt: tangent of grstd; "      \
    "gdyt: tangent of gdy; gwt: tangent of gw [M]; gdrstdt: tangent of gdrstd"

const opf_op_decl opf_decl_rms_norm_grad_grad_jvp = {
    "rms_norm_grad_grad_jvp(x[..., M], rstd[...], dy[..., M]?, w[M]?, drstd[...]?, ddx[..., M]?, ddw[M]?, "
    "xt[..., M]?) -> (gxt[..., M]?, grstdt[...]?, gdyt[..., M]?, gwt[M]?, gdrstdt[...]?)",
    .doc = "The derivative of rms_norm_grad_grad's outputs along a tangent xt of x (absent: zero). Symmetric: with "
           "a cotangent of its gx as xt, the gradients of x, rstd, dy, w and drstd that it gives.",
    .arg_docs = NORMS_RMS_GG_JVP_DOCS("xt: tangent of x, optional"),
    .row = &rms_norm_grad_grad_jvp_team,
};

const opf_op_decl opf_decl_rms_norm_grad_grad_jvp_w = {
    "rms_norm_grad_grad_jvp_w(x[..., M], rstd[...], dy[..., M]?, ddx[..., M]?, wt[M]?) -> (gxt[..., M]?, "
    "grstdt[...]?, gdyt[..., M]?)",
    .doc = "The derivative of rms_norm_grad_grad's gx, grstd and gdy along a tangent wt of w (absent: zero; its gw "
           "and gdrstd do not move with w). Symmetric: with a cotangent of its gw as wt, the gradients of x, rstd "
           "and dy that it gives.",
    .arg_docs = "x: rms_norm_grad_grad's x; rstd: rms_norm_grad_grad's rstd; dy: rms_norm_grad_grad's dy, optional; "
                "ddx: rms_norm_grad_grad's ddx, optional; wt: tangent of w, optional; gxt: tangent of gx; grstdt: "
                "tangent of grstd; gdyt: tangent of gdy",
    .row = &rms_norm_grad_grad_jvp_w_team,
};

const opf_op_decl opf_decl_rms_norm_grad_grad_jvp_rstd = {
    "rms_norm_grad_grad_jvp_rstd(x[..., M], rstd[...], dy[..., M]?, w[M]?, drstd[...]?, ddx[..., M]?, ddw[M]?, "
    "rstdt[...]?) -> (gxt[..., M]?, grstdt[...]?, gdyt[..., M]?, gwt[M]?, gdrstdt[...]?)",
    .doc = "The derivative of rms_norm_grad_grad's outputs along a tangent rstdt of rstd (absent: zero). "
           "Symmetric: with a cotangent of its grstd as rstdt, the gradients of x, rstd, dy, w and drstd that it "
           "gives.",
    .arg_docs = NORMS_RMS_GG_JVP_DOCS("rstdt: tangent of rstd, optional"),
    .row = &rms_norm_grad_grad_jvp_rstd_team,
};
