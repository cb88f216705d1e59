/*
 * layer_norm_jvp.c — the tangent rows of layer_norm's gradient rows (forward
 * over reverse, forward over forward, third-order reverse; see norms.h):
 * the derivatives of layer_norm_grad, layer_norm_grad_grad and
 * layer_norm_grad_grad_affine along their non-linear inputs.
 */
#include "norms.h"

/* --- layer_norm: tangent rows of the gradient rows ---------------------------------------------------------------- */

/* The derivative of layer_norm_grad's dx and dw along tangents xt of x and
 * wt of w (absent: zero); layer_norm_grad_jvp_stats does mean and rstd, and
 * layer_norm_grad itself dy, dmean and drstd (in which it is linear). With
 * xc = x - mean and g = dy w, layer_norm_grad's
 *   dx = r g - r sum(g) / M - r^3 xc (<g, xc> + drstd) / M + dmean / M, so
 *   dxt = -r^3 (xt (<g, xc> + drstd) + xc <g, xt>) / M
 *         + r g' - r sum(g') / M - r^3 xc <g', xc> / M        (g' = dy wt)
 *   dwt = sum over rows of dy xt r */
/* (written once for the CPU body and the team body: see NORMS_SEQ_FOR) */
#define LAYER_NORM_GRAD_JVP_BODY(FOR, SUM)                                                                             \
    const double mu = mean[0], r = rstd[0], m = n > 0 ? (double)n : 1, r3 = r * r * r / m;                             \
    double pt = 0, pgxt = 0, psgt = 0, pgtxc = 0;                                                                      \
    FOR(i, n) {                                                                                                        \
        const double xc = NORMS_AT(x, i) - mu, dyi = NORMS_OR(dy, i, 0), g = dyi * NORMS_OR(w, i, 1),                  \
                     gt = dyi * NORMS_OR(wt, i, 0);                                                                    \
        pt += g * xc;                                                                                                  \
        pgxt += g * NORMS_OR(xt, i, 0);                                                                                \
        psgt += gt;                                                                                                    \
        pgtxc += gt * xc;                                                                                              \
    }                                                                                                                  \
    const double t = SUM(pt) + NORMS_OR(drstd, 0, 0), gxt = SUM(pgxt), sgt = SUM(psgt), gtxc = SUM(pgtxc);             \
    FOR(i, n) {                                                                                                        \
        const double xc = NORMS_AT(x, i) - mu, dyi = NORMS_OR(dy, i, 0), xti = NORMS_OR(xt, i, 0),                     \
                     gt = dyi * NORMS_OR(wt, i, 0);                                                                    \
        if (dxt != NULL) {                                                                                             \
            dxt[i] = (T)(-r3 * (xti * t + xc * gxt) + r * gt - r * sgt / m - r3 * xc * gtxc);                          \
        }                                                                                                              \
        if (dwt != NULL) {                                                                                             \
            dwt[i] += (T)(dyi * xti * r);                                                                              \
        }                                                                                                              \
    }                                                                                                                  \
    (void)0

OPF_ROW_KERNEL(layer_norm_grad_jvp, (x, mean, rstd, dy, w, drstd, xt, wt), (dxt, dwt),
               { LAYER_NORM_GRAD_JVP_BODY(NORMS_SEQ_FOR, NORMS_SEQ_SUM); })
OPF_ROW_KERNEL_TEAM(layer_norm_grad_jvp_team, layer_norm_grad_jvp, (x, mean, rstd, dy, w, drstd, xt, wt), (dxt, dwt),
                    { LAYER_NORM_GRAD_JVP_BODY(OPF_TEAM_FOR, NORMS_TEAM_SUM); })

/* The derivative of layer_norm_grad's dx and dw along tangents meant of mean
 * and rstdt of rstd (absent: zero). With xc = x - mean, g = dy w,
 * T = <g, xc> + drstd:
 *   dxt = r^3 meant (T + xc sum(g)) / M + rstdt (g - sum(g) / M - 3 r^2 xc T / M)
 *   dwt = sum over rows of dy (xc rstdt - r meant) */
#define LAYER_NORM_GRAD_JVP_STATS_BODY(FOR, SUM)                                                                       \
    const double mu = mean[0], r = rstd[0], m = n > 0 ? (double)n : 1, r3 = r * r * r / m;                             \
    const double mt = NORMS_OR(meant, 0, 0), rt = NORMS_OR(rstdt, 0, 0);                                               \
    double pt = 0, psg = 0;                                                                                            \
    FOR(i, n) {                                                                                                        \
        const double g = NORMS_OR(dy, i, 0) * NORMS_OR(w, i, 1);                                                       \
        pt += g * (NORMS_AT(x, i) - mu);                                                                               \
        psg += g;                                                                                                      \
    }                                                                                                                  \
    const double t = SUM(pt) + NORMS_OR(drstd, 0, 0), sg = SUM(psg);                                                   \
    FOR(i, n) {                                                                                                        \
        const double xc = NORMS_AT(x, i) - mu, dyi = NORMS_OR(dy, i, 0), g = dyi * NORMS_OR(w, i, 1);                  \
        if (dxt != NULL) {                                                                                             \
            dxt[i] = (T)(r3 * mt * (t + xc * sg) + rt * (g - sg / m - 3 * r * r * xc * t / m));                        \
        }                                                                                                              \
        if (dwt != NULL) {                                                                                             \
            dwt[i] += (T)(dyi * (xc * rt - r * mt));                                                                   \
        }                                                                                                              \
    }                                                                                                                  \
    (void)0

OPF_ROW_KERNEL(layer_norm_grad_jvp_stats, (x, mean, rstd, dy, w, drstd, meant, rstdt), (dxt, dwt),
               { LAYER_NORM_GRAD_JVP_STATS_BODY(NORMS_SEQ_FOR, NORMS_SEQ_SUM); })
OPF_ROW_KERNEL_TEAM(layer_norm_grad_jvp_stats_team, layer_norm_grad_jvp_stats,
                    (x, mean, rstd, dy, w, drstd, meant, rstdt), (dxt, dwt),
                    { LAYER_NORM_GRAD_JVP_STATS_BODY(OPF_TEAM_FOR, NORMS_TEAM_SUM); })

/* The derivatives of layer_norm_grad_grad's outputs along a tangent xt of x
 * (layer_norm_grad_grad_jvp), meant of mean (..._jvp_mean) and rstdt of
 * rstd (..._jvp_rstd); absent: zero; ..._jvp_w (below) does w.
 * layer_norm_grad_grad is linear in (dy, dmean, drstd) and in ddx: it gives
 * the rest of its tangent rule itself; its gdmean = sum(ddx) / M moves with
 * ddx only. With xc = x - mean, g = dy w, K = r^3 / M, A = sum(ddx),
 * b = <ddx, xc>, Sg = sum(g), T = <g, xc> + drstd, its outputs are
 *   gx = -K (ddx T + b g)       gmean = K (A T + b Sg)       grstd = <ddx, g> - A Sg / M - 3 r^2 b T / M
 *   gdy = w P, gw = sum over rows of dy P, with P = r (ddx - A / M) - K b xc
 *   gdrstd = -K b.
 * Along xt (b' = <ddx, xt>, T' = <g, xt>):
 *   gxt = -K (ddx T' + b' g)    gmeant = K (A T' + b' Sg)    grstdt = -3 r^2 (b' T + b T') / M
 *   P' = -K (b' xc + b xt)      gdrstdt = -K b'
 * Along meant (xc' = -meant: b' = -meant A, T' = -meant Sg):
 *   gxt = K meant (ddx Sg + A g)    gmeant = -2 K meant A Sg    grstdt = 3 r^2 meant (A T + b Sg) / M
 *   P' = K meant (A xc + b)         gdrstdt = K meant A
 * Along rstdt (K' = 3 r^2 rstdt / M):
 *   gxt = -K' (ddx T + b g)     gmeant = K' (A T + b Sg)     grstdt = -6 r rstdt b T / M
 *   P' = rstdt (ddx - A / M) - K' b xc                       gdrstdt = -K' b
 * and gdyt = w P', gwt = sum over rows of dy P'. Second derivatives of
 * <ddx, dx> (dx layer_norm_grad's), symmetric: with cotangents of gx, gmean
 * and grstd as the tangents they are also the gradients that
 * layer_norm_grad_grad's gradient rule takes from those. */
#define NORMS_LN_GG_SUMS(FOR, SUM)                                                                                     \
    const double mu = mean[0], r = rstd[0], m = n > 0 ? (double)n : 1;                                                 \
    double pa = 0, pb = 0, pg = 0, pt = 0;                                                                             \
    FOR(i, n) {                                                                                                        \
        const double xc = NORMS_AT(x, i) - mu, dd = NORMS_OR(ddx, i, 0), g = NORMS_OR(dy, i, 0) * NORMS_OR(w, i, 1);   \
        pa += dd;                                                                                                      \
        pb += dd * xc;                                                                                                 \
        pg += g;                                                                                                       \
        pt += g * xc;                                                                                                  \
    }                                                                                                                  \
    const double sa = SUM(pa), sb = SUM(pb), sg = SUM(pg), t = SUM(pt) + NORMS_OR(drstd, 0, 0);

/* The outputs from the row's P' (pt_i, of element i) and the statistics'
 * tangents (gxt from its own expression). */
#define NORMS_LN_GG_STORE(FOR, ONCE, gxt_i, pt_i, gmeant_v, grstdt_v, gdrstdt_v)                                       \
    FOR(i, n) {                                                                                                        \
        const double xc = NORMS_AT(x, i) - mu, dd = NORMS_OR(ddx, i, 0), dyi = NORMS_OR(dy, i, 0),                     \
                     wi = NORMS_OR(w, i, 1), g = dyi * wi;                                                             \
        (void)xc, (void)dd, (void)g;                                                                                   \
        if (gxt != NULL) {                                                                                             \
            gxt[i] = (T)(gxt_i);                                                                                       \
        }                                                                                                              \
        const double pti = (pt_i);                                                                                     \
        if (gdyt != NULL) {                                                                                            \
            gdyt[i] = (T)(wi * pti);                                                                                   \
        }                                                                                                              \
        if (gwt != NULL) {                                                                                             \
            gwt[i] += (T)(dyi * pti);                                                                                  \
        }                                                                                                              \
    }                                                                                                                  \
    ONCE {                                                                                                             \
        if (gmeant != NULL) {                                                                                          \
            gmeant[0] = (T)(gmeant_v);                                                                                 \
        }                                                                                                              \
        if (grstdt != NULL) {                                                                                          \
            grstdt[0] = (T)(grstdt_v);                                                                                 \
        }                                                                                                              \
        if (gdrstdt != NULL) {                                                                                         \
            gdrstdt[0] = (T)(gdrstdt_v);                                                                               \
        }                                                                                                              \
    }

#define LAYER_NORM_GRAD_GRAD_JVP_BODY(FOR, SUM, ONCE)                                                                  \
    NORMS_LN_GG_SUMS(FOR, SUM)                                                                                         \
    const double k = r * r * r / m;                                                                                    \
    double pbt = 0, ptt = 0;                                                                                           \
    FOR(i, n) {                                                                                                        \
        const double xti = NORMS_OR(xt, i, 0);                                                                         \
        pbt += NORMS_OR(ddx, i, 0) * xti;                                                                              \
        ptt += NORMS_OR(dy, i, 0) * NORMS_OR(w, i, 1) * xti;                                                           \
    }                                                                                                                  \
    const double bt = SUM(pbt), tt = SUM(ptt);                                                                         \
    NORMS_LN_GG_STORE(FOR, ONCE, -k *(dd * tt + bt * g), -k *(bt * xc + sb * NORMS_OR(xt, i, 0)),                      \
                      k *(sa * tt + bt * sg), -3 * r * r * (bt * t + sb * tt) / m, -k * bt)                            \
    (void)0

#define LAYER_NORM_GRAD_GRAD_JVP_MEAN_BODY(FOR, SUM, ONCE)                                                             \
    NORMS_LN_GG_SUMS(FOR, SUM)                                                                                         \
    const double k = r * r * r / m, mt = NORMS_OR(meant, 0, 0);                                                        \
    NORMS_LN_GG_STORE(FOR, ONCE, k *mt *(dd * sg + sa * g), k *mt *(sa * xc + sb), -2 * k * mt * sa * sg,              \
                      3 * r * r * mt * (sa * t + sb * sg) / m, k * mt * sa)                                            \
    (void)0

#define LAYER_NORM_GRAD_GRAD_JVP_RSTD_BODY(FOR, SUM, ONCE)                                                             \
    NORMS_LN_GG_SUMS(FOR, SUM)                                                                                         \
    const double rt = NORMS_OR(rstdt, 0, 0), kt = 3 * r * r * rt / m;                                                  \
    NORMS_LN_GG_STORE(FOR, ONCE, -kt *(dd * t + sb * g), rt *(dd - sa / m) - kt * sb * xc, kt * (sa * t + sb * sg),    \
                      -6 * r * rt * sb * t / m, -kt * sb)                                                              \
    (void)0

OPF_ROW_KERNEL(layer_norm_grad_grad_jvp, (x, mean, rstd, dy, w, drstd, ddx, xt),
               (gxt, gmeant, grstdt, gdyt, gwt, gdrstdt),
               { LAYER_NORM_GRAD_GRAD_JVP_BODY(NORMS_SEQ_FOR, NORMS_SEQ_SUM, NORMS_SEQ_ONCE); })
OPF_ROW_KERNEL_TEAM(layer_norm_grad_grad_jvp_team, layer_norm_grad_grad_jvp, (x, mean, rstd, dy, w, drstd, ddx, xt),
                    (gxt, gmeant, grstdt, gdyt, gwt, gdrstdt),
                    { LAYER_NORM_GRAD_GRAD_JVP_BODY(OPF_TEAM_FOR, NORMS_TEAM_SUM, OPF_TEAM_ONCE); })
OPF_ROW_KERNEL(layer_norm_grad_grad_jvp_mean, (x, mean, rstd, dy, w, drstd, ddx, meant),
               (gxt, gmeant, grstdt, gdyt, gwt, gdrstdt),
               { LAYER_NORM_GRAD_GRAD_JVP_MEAN_BODY(NORMS_SEQ_FOR, NORMS_SEQ_SUM, NORMS_SEQ_ONCE); })
OPF_ROW_KERNEL_TEAM(layer_norm_grad_grad_jvp_mean_team, layer_norm_grad_grad_jvp_mean,
                    (x, mean, rstd, dy, w, drstd, ddx, meant), (gxt, gmeant, grstdt, gdyt, gwt, gdrstdt),
                    { LAYER_NORM_GRAD_GRAD_JVP_MEAN_BODY(OPF_TEAM_FOR, NORMS_TEAM_SUM, OPF_TEAM_ONCE); })
OPF_ROW_KERNEL(layer_norm_grad_grad_jvp_rstd, (x, mean, rstd, dy, w, drstd, ddx, rstdt),
               (gxt, gmeant, grstdt, gdyt, gwt, gdrstdt),
               { LAYER_NORM_GRAD_GRAD_JVP_RSTD_BODY(NORMS_SEQ_FOR, NORMS_SEQ_SUM, NORMS_SEQ_ONCE); })
OPF_ROW_KERNEL_TEAM(layer_norm_grad_grad_jvp_rstd_team, layer_norm_grad_grad_jvp_rstd,
                    (x, mean, rstd, dy, w, drstd, ddx, rstdt), (gxt, gmeant, grstdt, gdyt, gwt, gdrstdt),
                    { LAYER_NORM_GRAD_GRAD_JVP_RSTD_BODY(OPF_TEAM_FOR, NORMS_TEAM_SUM, OPF_TEAM_ONCE); })

/* Along wt (layer_norm_grad_grad_jvp_w): w enters through g = dy w only, so
 * gw, gdmean and gdrstd do not move and the others take the part of g
 * linear in w with g' = dy wt (drstd drops out):
 *   gxt = -K (ddx <g', xc> + b g')      gmeant = K (A <g', xc> + b sum(g'))
 *   grstdt = <ddx, g'> - A sum(g') / M - 3 r^2 b <g', xc> / M
 *   gdyt = wt (r (ddx - A / M) - K b xc)
 * A row of its own, not layer_norm_grad_grad with wt as its w: an absent
 * tangent must count as zero, an absent w counts as ones. */
#define LAYER_NORM_GRAD_GRAD_JVP_W_BODY(FOR, SUM, ONCE)                                                                \
    const double mu = mean[0], r = rstd[0], m = n > 0 ? (double)n : 1, k = r * r * r / m;                              \
    double pa = 0, pb = 0, ptw = 0, psw = 0, pdgw = 0;                                                                 \
    FOR(i, n) {                                                                                                        \
        const double xc = NORMS_AT(x, i) - mu, dd = NORMS_OR(ddx, i, 0), gt = NORMS_OR(dy, i, 0) * NORMS_OR(wt, i, 0); \
        pa += dd;                                                                                                      \
        pb += dd * xc;                                                                                                 \
        ptw += gt * xc;                                                                                                \
        psw += gt;                                                                                                     \
        pdgw += dd * gt;                                                                                               \
    }                                                                                                                  \
    const double sa = SUM(pa), sb = SUM(pb), tw = SUM(ptw), sw = SUM(psw), dgw = SUM(pdgw);                            \
    FOR(i, n) {                                                                                                        \
        const double xc = NORMS_AT(x, i) - mu, dd = NORMS_OR(ddx, i, 0), wti = NORMS_OR(wt, i, 0);                     \
        if (gxt != NULL) {                                                                                             \
            gxt[i] = (T)(-k * (dd * tw + sb * NORMS_OR(dy, i, 0) * wti));                                              \
        }                                                                                                              \
        if (gdyt != NULL) {                                                                                            \
            gdyt[i] = (T)(wti * (r * (dd - sa / m) - k * sb * xc));                                                    \
        }                                                                                                              \
    }                                                                                                                  \
    ONCE {                                                                                                             \
        if (gmeant != NULL) {                                                                                          \
            gmeant[0] = (T)(k * (sa * tw + sb * sw));                                                                  \
        }                                                                                                              \
        if (grstdt != NULL) {                                                                                          \
            grstdt[0] = (T)(dgw - sa * sw / m - 3 * r * r * sb * tw / m);                                              \
        }                                                                                                              \
    }                                                                                                                  \
    (void)0

OPF_ROW_KERNEL(layer_norm_grad_grad_jvp_w, (x, mean, rstd, dy, ddx, wt), (gxt, gmeant, grstdt, gdyt),
               { LAYER_NORM_GRAD_GRAD_JVP_W_BODY(NORMS_SEQ_FOR, NORMS_SEQ_SUM, NORMS_SEQ_ONCE); })
OPF_ROW_KERNEL_TEAM(layer_norm_grad_grad_jvp_w_team, layer_norm_grad_grad_jvp_w, (x, mean, rstd, dy, ddx, wt),
                    (gxt, gmeant, grstdt, gdyt),
                    { LAYER_NORM_GRAD_GRAD_JVP_W_BODY(OPF_TEAM_FOR, NORMS_TEAM_SUM, OPF_TEAM_ONCE); })

/* The derivatives of layer_norm_grad_grad_affine's outputs along tangents
 * xt, meant and rstdt of x, mean and rstd (absent: zero); it is linear in dy
 * and in (ddw, ddb) and gives the rest of its tangent rule itself. With
 * xc = x - mean, h = ddw dy and e = xt - meant, its outputs gx = r h,
 * gmean = -r sum(h), grstd = <h, xc>, gdy = r ddw xc + ddb move as
 *   gxt = rstdt h, gmeant = -rstdt sum(h), grstdt = <h, e>, gdyt = ddw (rstdt xc + r e)
 * (symmetric second derivatives: with cotangents of gx, gmean and grstd as
 * the tangents, also the gradients its gradient rule takes from those). */
#define LAYER_NORM_GRAD_GRAD_AFFINE_JVP_BODY(FOR, SUM, ONCE)                                                           \
    const double mu = mean[0], r = rstd[0], mt = NORMS_OR(meant, 0, 0), rt = NORMS_OR(rstdt, 0, 0);                    \
    double ph = 0, phe = 0;                                                                                            \
    FOR(i, n) {                                                                                                        \
        const double xc = NORMS_AT(x, i) - mu, dwi = NORMS_OR(ddw, i, 0), h = dwi * NORMS_OR(dy, i, 0),                \
                     e = NORMS_OR(xt, i, 0) - mt;                                                                      \
        ph += h;                                                                                                       \
        phe += h * e;                                                                                                  \
        if (gxt != NULL) {                                                                                             \
            gxt[i] = (T)(rt * h);                                                                                      \
        }                                                                                                              \
        if (gdyt != NULL) {                                                                                            \
            gdyt[i] = (T)(dwi * (rt * xc + r * e));                                                                    \
        }                                                                                                              \
    }                                                                                                                  \
    const double sh = SUM(ph), she = SUM(phe);                                                                         \
    ONCE {                                                                                                             \
        if (gmeant != NULL) {                                                                                          \
            gmeant[0] = (T)(-rt * sh);                                                                                 \
        }                                                                                                              \
        if (grstdt != NULL) {                                                                                          \
            grstdt[0] = (T)she;                                                                                        \
        }                                                                                                              \
    }                                                                                                                  \
    (void)0

OPF_ROW_KERNEL(layer_norm_grad_grad_affine_jvp, (x, mean, rstd, dy, ddw, xt, meant, rstdt), (gxt, gmeant, grstdt, gdyt),
               { LAYER_NORM_GRAD_GRAD_AFFINE_JVP_BODY(NORMS_SEQ_FOR, NORMS_SEQ_SUM, NORMS_SEQ_ONCE); })
OPF_ROW_KERNEL_TEAM(layer_norm_grad_grad_affine_jvp_team, layer_norm_grad_grad_affine_jvp,
                    (x, mean, rstd, dy, ddw, xt, meant, rstdt), (gxt, gmeant, grstdt, gdyt),
                    { LAYER_NORM_GRAD_GRAD_AFFINE_JVP_BODY(OPF_TEAM_FOR, NORMS_TEAM_SUM, OPF_TEAM_ONCE); })

const opf_op_decl opf_decl_layer_norm_grad_jvp = {
    "layer_norm_grad_jvp(x[..., M], mean[...], rstd[...], dy[..., M]?, w[M]?, drstd[...]?, xt[..., M]?, wt[M]?) -> "
    "(dxt[..., M]?, dwt[M]?)",
    .doc = "The derivative of layer_norm_grad's dx and dw along tangents xt of x and wt of w (absent: zero); "
           "layer_norm_grad_jvp_stats gives those along mean's and rstd's, and layer_norm_grad itself (linear in "
           "dy, dmean and drstd) the rest of its tangent rule.",
    .arg_docs = "x: layer_norm_grad's x; mean: layer_norm_grad's mean; rstd: layer_norm_grad's rstd; dy: "
                "layer_norm_grad's dy, optional; w: layer_norm_grad's w, optional; drstd: layer_norm_grad's drstd, "
                "optional; xt: tangent of x; wt: tangent of w; dxt: tangent of dx; dwt: tangent of dw",
    .row = &layer_norm_grad_jvp_team,
};

const opf_op_decl opf_decl_layer_norm_grad_jvp_stats = {
    "layer_norm_grad_jvp_stats(x[..., M], mean[...], rstd[...], dy[..., M]?, w[M]?, drstd[...]?, meant[...]?, "
    "rstdt[...]?) -> (dxt[..., M]?, dwt[M]?)",
    .doc = "The derivative of layer_norm_grad's dx and dw along tangents meant of mean and rstdt of rstd (absent: "
           "zero).",
    .arg_docs = "x: layer_norm_grad's x; mean: layer_norm_grad's mean; rstd: layer_norm_grad's rstd; dy: "
                "layer_norm_grad's dy, optional; w: layer_norm_grad's w, optional; drstd: layer_norm_grad's drstd, "
                "optional; meant: tangent of mean; rstdt: tangent of rstd; dxt: tangent of dx; dwt: tangent of dw",
    .row = &layer_norm_grad_jvp_stats_team,
};

#define NORMS_LN_GG_JVP_DOCS(what)                                                                                     \
    "x: layer_norm_grad_grad's x; mean: layer_norm_grad_grad's mean; rstd: layer_norm_grad_grad's rstd; dy: "          \
    "layer_norm_grad_grad's dy, optional; w: layer_norm_grad_grad's w, optional; drstd: layer_norm_grad_grad's "       \
    "drstd, optional; ddx: layer_norm_grad_grad's ddx, optional; " what "; gxt: tangent of gx; gmeant: tangent of "    \
    "gmean; grstdt: tangent of grstd; gdyt: tangent of gdy; gwt: tangent of gw [M]; gdrstdt: tangent of gdrstd"
#define NORMS_LN_GG_JVP_OUTS "-> (gxt[..., M]?, gmeant[...]?, grstdt[...]?, gdyt[..., M]?, gwt[M]?, gdrstdt[...]?)"

const opf_op_decl opf_decl_layer_norm_grad_grad_jvp = {
    "layer_norm_grad_grad_jvp(x[..., M], mean[...], rstd[...], dy[..., M]?, w[M]?, drstd[...]?, ddx[..., M]?, "
    "xt[..., M]?) " NORMS_LN_GG_JVP_OUTS,
    .doc = "The derivative of layer_norm_grad_grad's outputs along a tangent xt of x (absent: zero); its gdmean "
           "does not move with x. Symmetric: with a cotangent of its gx as xt, the gradients of x, mean, rstd, dy, "
           "w and drstd that it gives.",
    .arg_docs = NORMS_LN_GG_JVP_DOCS("xt: tangent of x, optional"),
    .row = &layer_norm_grad_grad_jvp_team,
};

const opf_op_decl opf_decl_layer_norm_grad_grad_jvp_mean = {
    "layer_norm_grad_grad_jvp_mean(x[..., M], mean[...], rstd[...], dy[..., M]?, w[M]?, drstd[...]?, ddx[..., M]?, "
    "meant[...]?) " NORMS_LN_GG_JVP_OUTS,
    .doc = "The derivative of layer_norm_grad_grad's outputs along a tangent meant of mean (absent: zero). "
           "Symmetric: with a cotangent of its gmean as meant, the gradients of x, mean, rstd, dy, w and drstd that "
           "it gives.",
    .arg_docs = NORMS_LN_GG_JVP_DOCS("meant: tangent of mean, optional"),
    .row = &layer_norm_grad_grad_jvp_mean_team,
};

const opf_op_decl opf_decl_layer_norm_grad_grad_jvp_rstd = {
    "layer_norm_grad_grad_jvp_rstd(x[..., M], mean[...], rstd[...], dy[..., M]?, w[M]?, drstd[...]?, ddx[..., M]?, "
    "rstdt[...]?) " NORMS_LN_GG_JVP_OUTS,
    .doc = "The derivative of layer_norm_grad_grad's outputs along a tangent rstdt of rstd (absent: zero). "
           "Symmetric: with a cotangent of its grstd as rstdt, the gradients of x, mean, rstd, dy, w and drstd that "
           "it gives.",
    .arg_docs = NORMS_LN_GG_JVP_DOCS("rstdt: tangent of rstd, optional"),
    .row = &layer_norm_grad_grad_jvp_rstd_team,
};

const opf_op_decl opf_decl_layer_norm_grad_grad_jvp_w = {
    "layer_norm_grad_grad_jvp_w(x[..., M], mean[...], rstd[...], dy[..., M]?, ddx[..., M]?, wt[M]?) -> "
    "(gxt[..., M]?, gmeant[...]?, grstdt[...]?, gdyt[..., M]?)",
    .doc = "The derivative of layer_norm_grad_grad's gx, gmean, grstd and gdy along a tangent wt of w (absent: "
           "zero; its gw, gdmean and gdrstd do not move with w). Symmetric: with a cotangent of its gw as wt, the "
           "gradients of x, mean, rstd and dy that it gives.",
    .arg_docs = "x: layer_norm_grad_grad's x; mean: its mean; rstd: its rstd; dy: its dy, optional; ddx: its ddx, "
                "optional; wt: tangent of w, optional; gxt: tangent of gx; gmeant: tangent of gmean; grstdt: tangent "
                "of grstd; gdyt: tangent of gdy",
    .row = &layer_norm_grad_grad_jvp_w_team,
};

const opf_op_decl opf_decl_layer_norm_grad_grad_affine_jvp = {
    "layer_norm_grad_grad_affine_jvp(x[..., M], mean[...], rstd[...], dy[..., M]?, ddw[M]?, xt[..., M]?, "
    "meant[...]?, rstdt[...]?) -> (gxt[..., M]?, gmeant[...]?, grstdt[...]?, gdyt[..., M]?)",
    .doc = "The derivative of layer_norm_grad_grad_affine's outputs along tangents xt, meant and rstdt of x, mean "
           "and rstd (absent: zero): with xc = x - mean, h = ddw * dy and e = xt - meant, gxt = rstdt * h, "
           "gmeant = -rstdt * sum(h), grstdt = sum(h * e) per row, gdyt = ddw * (rstdt * xc + rstd * e). "
           "Symmetric: with cotangents of its gx, gmean and grstd as the tangents, the gradients of x, mean, rstd "
           "and dy that it gives.",
    .arg_docs = "x: layer_norm_grad_grad_affine's x; mean: its mean; rstd: its rstd; dy: its dy, optional; ddw: its "
                "ddw, optional; xt: tangent of x, optional; meant: tangent of mean, optional; rstdt: tangent of "
                "rstd, optional; gxt: tangent of gx; gmeant: tangent of gmean; grstdt: tangent of grstd; gdyt: "
                "tangent of gdy",
    .row = &layer_norm_grad_grad_affine_jvp_team,
};
