/*
 * reference.h — independent scalar references for opforge's ops, written
 * plainly from the documented semantics (never taken from src/).
 *
 * Elementwise references compute in the tensor's dtype and are exact: the
 * library must match them bit for bit (NaN payloads aside; +0/-0 compare
 * equal). Dense references accumulate in double and also return a per-element
 * error bound for the library's result.
 */
#ifndef OPF_TEST_REFERENCE_H
#define OPF_TEST_REFERENCE_H

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------------ */
/* Elementwise, one value                                                    */
/* ------------------------------------------------------------------------ */

/* relu: x < 0 ? 0 : x, so NaN stays NaN (and -0 may stay -0). */
static inline float ref_relu_f32(float x) { return x < 0.0f ? 0.0f : x; }
static inline double ref_relu_f64(double x) { return x < 0.0 ? 0.0 : x; }

/* relu_grad: dx = x <= 0 ? 0 : dy. A NaN x passes dy (PyTorch's
 * threshold_backward zeroes only where x <= 0). */
static inline float ref_relu_grad_f32(float dy, float x) { return x <= 0.0f ? 0.0f : dy; }
static inline double ref_relu_grad_f64(double dy, double x) { return x <= 0.0 ? 0.0 : dy; }

/* scale: alpha * x in the dtype (alpha rounded to the dtype first). */
static inline float ref_scale_f32(float alpha, float x) { return alpha * x; }
static inline double ref_scale_f64(double alpha, double x) { return alpha * x; }

static inline float ref_add_f32(float a, float b) { return a + b; }
static inline double ref_add_f64(double a, double b) { return a + b; }

static inline float ref_mul_f32(float a, float b) { return a * b; }
static inline double ref_mul_f64(double a, double b) { return a * b; }

/* ------------------------------------------------------------------------ */
/* Elementwise, arrays (contiguous)                                          */
/* ------------------------------------------------------------------------ */

static inline void ref_relu_array_f32(size_t n, const float *x, float *y) {
    for (size_t i = 0; i < n; i++) {
        y[i] = ref_relu_f32(x[i]);
    }
}
static inline void ref_relu_array_f64(size_t n, const double *x, double *y) {
    for (size_t i = 0; i < n; i++) {
        y[i] = ref_relu_f64(x[i]);
    }
}
static inline void ref_scale_array_f32(size_t n, float alpha, const float *x, float *y) {
    for (size_t i = 0; i < n; i++) {
        y[i] = ref_scale_f32(alpha, x[i]);
    }
}
static inline void ref_scale_array_f64(size_t n, double alpha, const double *x, double *y) {
    for (size_t i = 0; i < n; i++) {
        y[i] = ref_scale_f64(alpha, x[i]);
    }
}
static inline void ref_relu_grad_array_f32(size_t n, const float *dy, const float *x, float *dx) {
    for (size_t i = 0; i < n; i++) {
        dx[i] = ref_relu_grad_f32(dy[i], x[i]);
    }
}
static inline void ref_relu_grad_array_f64(size_t n, const double *dy, const double *x, double *dx) {
    for (size_t i = 0; i < n; i++) {
        dx[i] = ref_relu_grad_f64(dy[i], x[i]);
    }
}
static inline void ref_add_array_f32(size_t n, const float *a, const float *b, float *y) {
    for (size_t i = 0; i < n; i++) {
        y[i] = ref_add_f32(a[i], b[i]);
    }
}
static inline void ref_add_array_f64(size_t n, const double *a, const double *b, double *y) {
    for (size_t i = 0; i < n; i++) {
        y[i] = ref_add_f64(a[i], b[i]);
    }
}

static inline void ref_mul_array_f32(size_t n, const float *a, const float *b, float *y) {
    for (size_t i = 0; i < n; i++) {
        y[i] = ref_mul_f32(a[i], b[i]);
    }
}
static inline void ref_mul_array_f64(size_t n, const double *a, const double *b, double *y) {
    for (size_t i = 0; i < n; i++) {
        y[i] = ref_mul_f64(a[i], b[i]);
    }
}

/* ------------------------------------------------------------------------ */
/* Broadcasting (NumPy's rules), on contiguous arrays of double              */
/* ------------------------------------------------------------------------ */

/* The broadcast of shapes a (rank na) and b (rank nb) into out (rank
 * max(na, nb)); 0 if they do not broadcast together. */
static inline int ref_broadcast_shape(int na, const int64_t *a, int nb, const int64_t *b, int64_t *out) {
    int n = na > nb ? na : nb;
    for (int k = 1; k <= n; k++) {
        int64_t da = k <= na ? a[na - k] : 1, db = k <= nb ? b[nb - k] : 1;
        if (da != db && da != 1 && db != 1) {
            return 0;
        }
        out[n - k] = da == 1 ? db : da;
    }
    return 1;
}

/* Offset of element `index` (of a C-contiguous tensor of shape `shape`, rank
 * n) in a C-contiguous tensor of shape t (rank nt <= n) that broadcasts to
 * it: dims of size 1 and missing leading dims read element 0. */
static inline int64_t ref_broadcast_offset(int n, const int64_t *shape, int64_t index, int nt, const int64_t *t) {
    int64_t off = 0, stride = 1;
    for (int d = n - 1; d >= 0; d--) {
        int64_t i = index % shape[d];
        index /= shape[d];
        int td = d - (n - nt);
        if (td >= 0) {
            off += (t[td] == 1 ? 0 : i) * stride;
            stride *= t[td];
        }
    }
    return off;
}

/* ------------------------------------------------------------------------ */
/* Dense (all arrays contiguous, values given as double)                     */
/* ------------------------------------------------------------------------ */

/* Error bound of a sum of k products computed in a dtype with unit roundoff
 * eps, against the exact value: (k + 2) * eps * (sum |terms| + |start|), plus
 * a little absolute slack for results near the underflow range. */
static inline double ref_dot_tolerance(size_t k, double eps, double magnitude) {
    return (double)(k + 2) * eps * magnitude + 1e-300;
}

/* Machine epsilon of the library's dtype (is_f64 ? double : float). */
static inline double ref_eps(int is_f64) { return is_f64 ? DBL_EPSILON : (double)FLT_EPSILON; }

/* y[N,M] = act(x[N,K] · w[K,M] + b[M]) with b NULL meaning zeros, act 1 =
 * relu; tol[N,M] receives the error bound for a library computing in a dtype
 * of epsilon eps. */
static inline void ref_dense(size_t N, size_t K, size_t M, const double *x, const double *w, const double *b, int relu,
                             double eps, double *y, double *tol) {
    for (size_t n = 0; n < N; n++) {
        for (size_t m = 0; m < M; m++) {
            double acc = b ? b[m] : 0.0;
            double mag = b ? fabs(b[m]) : 0.0;
            for (size_t k = 0; k < K; k++) {
                acc += x[n * K + k] * w[k * M + m];
                mag += fabs(x[n * K + k] * w[k * M + m]);
            }
            if (relu && acc < 0.0) {
                acc = 0.0;
            }
            y[n * M + m] = acc;
            tol[n * M + m] = ref_dot_tolerance(K, eps, mag);
        }
    }
}

/* dz[N,M] = relu ? dy * (y > 0) : dy. */
static inline void ref_dense_dz(size_t N, size_t M, const double *dy, const double *y, int relu, double *dz) {
    for (size_t i = 0; i < N * M; i++) {
        dz[i] = relu ? (y[i] > 0.0 ? dy[i] : 0.0) : dy[i];
    }
}

/* dx[N,K] = dz[N,M] · w[K,M]ᵀ. */
static inline void ref_dense_dx(size_t N, size_t K, size_t M, const double *dz, const double *w, double eps, double *dx,
                                double *tol) {
    for (size_t n = 0; n < N; n++) {
        for (size_t k = 0; k < K; k++) {
            double acc = 0.0, mag = 0.0;
            for (size_t m = 0; m < M; m++) {
                acc += dz[n * M + m] * w[k * M + m];
                mag += fabs(dz[n * M + m] * w[k * M + m]);
            }
            dx[n * K + k] = acc;
            tol[n * K + k] = ref_dot_tolerance(M, eps, mag);
        }
    }
}

/* dw[K,M] = x[N,K]ᵀ · dz[N,M]. */
static inline void ref_dense_dw(size_t N, size_t K, size_t M, const double *x, const double *dz, double eps, double *dw,
                                double *tol) {
    for (size_t k = 0; k < K; k++) {
        for (size_t m = 0; m < M; m++) {
            double acc = 0.0, mag = 0.0;
            for (size_t n = 0; n < N; n++) {
                acc += x[n * K + k] * dz[n * M + m];
                mag += fabs(x[n * K + k] * dz[n * M + m]);
            }
            dw[k * M + m] = acc;
            tol[k * M + m] = ref_dot_tolerance(N, eps, mag);
        }
    }
}

/* db[M] = sum over rows of dz[N,M]. */
static inline void ref_dense_db(size_t N, size_t M, const double *dz, double eps, double *db, double *tol) {
    for (size_t m = 0; m < M; m++) {
        double acc = 0.0, mag = 0.0;
        for (size_t n = 0; n < N; n++) {
            acc += dz[n * M + m];
            mag += fabs(dz[n * M + m]);
        }
        db[m] = acc;
        tol[m] = ref_dot_tolerance(N, eps, mag);
    }
}

/* ------------------------------------------------------------------------ */
/* Activations (gelu, silu, sigmoid, tanh): long double, from libm           */
/* ------------------------------------------------------------------------ */

/* f(x), f'(x), f''(x) of an activation in long double, and the magnitudes of
 * the terms each derivative sums (s1 for f', s2 for f''): near a zero of a
 * derivative, where those terms cancel, an error is measured against them.
 * NaN and +-inf follow PyTorch, JAX and TensorFlow: x f(x) forms give NaN at
 * -inf (-inf * 0), derivatives of gelu and silu are NaN at +-inf. */
typedef struct ref_act {
    long double f, d1, d2, s1, s2;
} ref_act;

/* σ(v) without overflow or cancellation. */
static inline long double ref_sigmoidl(long double v) {
    return v >= 0 ? 1.0L / (1.0L + expl(-v)) : expl(v) / (1.0L + expl(v));
}

/* x σ(v(x)) forms: tanh-approximated gelu (v = 2 √(2/π) (x + 0.044715 x³))
 * and silu (v = x). */
static inline ref_act ref_act_sigma_form(long double x, int gelu) {
    const long double b1 = 2.0L * sqrtl(2.0L / 3.14159265358979323846264338327950288L), b3 = 0.044715L * b1;
    long double v = gelu ? x * (b1 + b3 * x * x) : x, vd = gelu ? b1 + 3 * b3 * x * x : 1, vdd = gelu ? 6 * b3 * x : 0;
    long double s = ref_sigmoidl(v), sb = ref_sigmoidl(-v);
    ref_act r;
    r.f = x * s;
    r.d1 = s + x * s * sb * vd;
    r.d2 = s * sb * (2 * vd + x * (sb - s) * vd * vd + x * vdd);
    r.s1 = s + fabsl(x) * s * sb * vd;
    r.s2 = s * sb * (2 * vd + fabsl(x) * fabsl(sb - s) * vd * vd + fabsl(x * vdd));
    if (isinf(x)) { /* the frameworks: NaN derivatives */
        r.d1 = r.d2 = NAN;
    }
    return r;
}

/* gelu: x Φ(x), Φ the standard normal CDF (tanh_form: the tanh approximation). */
static inline ref_act ref_act_gelu(long double x, int tanh_form) {
    if (tanh_form) {
        return ref_act_sigma_form(x, 1);
    }
    const long double c = 0.398942280401432677939946059934381868L; /* 1/√(2π) */
    long double phi = c * expl(-x * x / 2), cdf = 0.5L * erfcl(-x * 0.707106781186547524400844362104849039L);
    ref_act r;
    r.f = x * cdf;
    r.d1 = cdf + x * phi;
    r.d2 = phi * (2 - x * x);
    r.s1 = cdf + fabsl(x) * phi;
    r.s2 = phi * (2 + x * x);
    if (isinf(x)) {
        r.d1 = r.d2 = NAN;
    }
    return r;
}

static inline ref_act ref_act_silu(long double x) { return ref_act_sigma_form(x, 0); }

/* sigmoid and tanh: values only (their gradient rows take the output). */
static inline ref_act ref_act_sigmoid(long double x) {
    ref_act r = {ref_sigmoidl(x), 0, 0, 0, 0};
    return r;
}
static inline ref_act ref_act_tanh(long double x) {
    ref_act r = {tanhl(x), 0, 0, 0, 0};
    return r;
}

/* |got - want| in units in the last place of `of` for the dtype (is_f64:
 * double, else float; subnormal ulps below the normal range); 0 when both
 * are the same NaN or infinity, INFINITY when one is and the other is not. */
static inline double ref_ulps(double got, long double want, long double of, int is_f64) {
    if (isnan(want) || isnan(got)) {
        return isnan(want) && isnan(got) ? 0.0 : INFINITY;
    }
    if (isinf(want) || isinf(got)) {
        return (long double)got == want ? 0.0 : INFINITY;
    }
    int e;
    frexpl(fabsl(of), &e);
    const int p = is_f64 ? 53 : 24, emin = is_f64 ? -1021 : -125; /* frexp's exponent of the least normal */
    e = of == 0 || e < emin ? emin : e;
    return (double)(fabsl((long double)got - want) / ldexpl(1.0L, e - p));
}

/* ------------------------------------------------------------------------ */
/* Row-wise ops over the last axis (one row of m values, in double)          */
/* ------------------------------------------------------------------------ */

/* The row's maximum, and whether the row is NaN throughout under
 * torch.softmax's rules: it holds +inf or NaN, or only -inf (or nothing). */
static inline double ref_row_max(size_t m, const double *x, int *nan_row) {
    double mx = -INFINITY;
    int special = 0;
    for (size_t i = 0; i < m; i++) {
        special |= isnan(x[i]) || x[i] == INFINITY;
        mx = x[i] > mx ? x[i] : mx;
    }
    *nan_row = special || mx == -INFINITY;
    return mx;
}

/* softmax: exp(x - max) / sum. */
static inline void ref_softmax_row(size_t m, const double *x, double *y) {
    int nan_row;
    const double mx = ref_row_max(m, x, &nan_row);
    double sum = 0.0;
    for (size_t i = 0; i < m; i++) {
        sum += exp(x[i] - mx);
    }
    for (size_t i = 0; i < m; i++) {
        y[i] = nan_row ? NAN : exp(x[i] - mx) / sum;
    }
}

/* log_softmax: (x - max) - log(sum(exp(x - max))). */
static inline void ref_log_softmax_row(size_t m, const double *x, double *y) {
    int nan_row;
    const double mx = ref_row_max(m, x, &nan_row);
    double sum = 0.0;
    for (size_t i = 0; i < m; i++) {
        sum += exp(x[i] - mx);
    }
    for (size_t i = 0; i < m; i++) {
        y[i] = nan_row ? NAN : (x[i] - mx) - log(sum);
    }
}

/* Vector-Jacobian products through the Jacobians written out element by
 * element: dx_i = sum_j dy_j * d(y_j)/d(x_i), with y the forward output. */
static inline void ref_softmax_grad_row(size_t m, const double *dy, const double *y, double *dx) {
    for (size_t i = 0; i < m; i++) {
        double acc = 0.0;
        for (size_t j = 0; j < m; j++) {
            acc += dy[j] * y[j] * ((i == j ? 1.0 : 0.0) - y[i]); /* d(y_j)/d(x_i) = y_j (delta_ij - y_i) */
        }
        dx[i] = acc;
    }
}
static inline void ref_log_softmax_grad_row(size_t m, const double *dy, const double *y, double *dx) {
    for (size_t i = 0; i < m; i++) {
        double acc = 0.0;
        for (size_t j = 0; j < m; j++) {
            acc += dy[j] * ((i == j ? 1.0 : 0.0) - exp(y[i])); /* d(y_j)/d(x_i) = delta_ij - softmax_i */
        }
        dx[i] = acc;
    }
}

/* layer_norm: mean, biased variance var, rstd = 1 / sqrt(var + eps), y =
 * (x - mean) rstd w + b (w, b NULL: ones, zeros). An empty row has mean 0
 * and rstd NaN (as torch.native_layer_norm). */
static inline void ref_layer_norm_row(size_t m, const double *x, const double *w, const double *b, double eps,
                                      double *y, double *mean, double *rstd) {
    double s = 0.0, v = 0.0;
    for (size_t i = 0; i < m; i++) {
        s += x[i];
    }
    const double mu = m > 0 ? s / (double)m : 0.0;
    for (size_t i = 0; i < m; i++) {
        v += (x[i] - mu) * (x[i] - mu);
    }
    const double r = m > 0 ? 1.0 / sqrt(v / (double)m + eps) : NAN;
    for (size_t i = 0; i < m; i++) {
        y[i] = (x[i] - mu) * r * (w ? w[i] : 1.0) + (b ? b[i] : 0.0);
    }
    *mean = mu;
    *rstd = r;
}

/* Gradients of layer_norm's row by the chain rule through mean and rstd,
 * Jacobians written out (O(m^2)): dx_i = sum_j dy_j w_j d(xh_j)/d(x_i) +
 * dmean d(mean)/d(x_i) + drstd d(rstd)/d(x_i); the row's parts of dw and db
 * are added to dw_acc, db_acc (each may be NULL). */
static inline void ref_layer_norm_grad_row(size_t m, const double *dy, const double *x, const double *w, double eps,
                                           double dmean, double drstd, double *dx, double *dw_acc, double *db_acc) {
    double s = 0.0, v = 0.0;
    for (size_t i = 0; i < m; i++) {
        s += x[i];
    }
    const double mu = s / (double)m;
    for (size_t i = 0; i < m; i++) {
        v += (x[i] - mu) * (x[i] - mu);
    }
    const double r = 1.0 / sqrt(v / (double)m + eps);
    for (size_t i = 0; i < m; i++) {
        const double dr_dxi = -r * r * r * (x[i] - mu) / (double)m; /* d(var)/d(x_i) = 2 (x_i - mu) / m */
        double acc = dmean / (double)m + drstd * dr_dxi;
        for (size_t j = 0; j < m; j++) {
            const double dxh = ((i == j ? 1.0 : 0.0) - 1.0 / (double)m) * r + (x[j] - mu) * dr_dxi;
            acc += dy[j] * (w ? w[j] : 1.0) * dxh;
        }
        dx[i] = acc;
    }
    for (size_t j = 0; j < m; j++) {
        if (dw_acc) {
            dw_acc[j] += dy[j] * (x[j] - mu) * r;
        }
        if (db_acc) {
            db_acc[j] += dy[j];
        }
    }
}

/* rms_norm: rstd = 1 / sqrt(mean(x^2) + eps), y = x rstd w (w NULL: ones).
 * eps < 0 means the machine epsilon of the library's dtype (eps_dtype). */
static inline void ref_rms_norm_row(size_t m, const double *x, const double *w, double eps, double *y, double *rstd) {
    double ss = 0.0;
    for (size_t i = 0; i < m; i++) {
        ss += x[i] * x[i];
    }
    const double r = 1.0 / sqrt(ss / (double)m + eps);
    for (size_t i = 0; i < m; i++) {
        y[i] = x[i] * r * (w ? w[i] : 1.0);
    }
    *rstd = r;
}

/* Gradients of rms_norm's row (Jacobians written out, rstd's cotangent
 * drstd included); the row's part of dw is added to dw_acc (may be NULL). */
static inline void ref_rms_norm_grad_row(size_t m, const double *dy, const double *x, const double *w, double eps,
                                         double drstd, double *dx, double *dw_acc) {
    double ss = 0.0;
    for (size_t i = 0; i < m; i++) {
        ss += x[i] * x[i];
    }
    const double r = 1.0 / sqrt(ss / (double)m + eps);
    for (size_t i = 0; i < m; i++) {
        const double dr_dxi = -r * r * r * x[i] / (double)m;
        double acc = drstd * dr_dxi;
        for (size_t j = 0; j < m; j++) {
            acc += dy[j] * (w ? w[j] : 1.0) * ((i == j ? r : 0.0) + x[j] * dr_dxi);
        }
        dx[i] = acc;
    }
    for (size_t j = 0; dw_acc && j < m; j++) {
        dw_acc[j] += dy[j] * x[j] * r;
    }
}

#endif
