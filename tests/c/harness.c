/* harness.c — see harness.h. */
#include "harness.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------------ */
/* Tests and checks                                                          */
/* ------------------------------------------------------------------------ */

enum { HARNESS_MAX_REPORTS = 20 }; /* failure messages printed per test */

/* CHECK may be called from several threads at once (test_threads). */
static pthread_mutex_t harness_lock = PTHREAD_MUTEX_INITIALIZER;
static const char *harness_current = NULL;
static int harness_failures_now = 0;
static int harness_passed = 0;
static int harness_failed = 0;
static double harness_started = 0.0;

static double harness_now(void) {
    struct timespec ts;
    if (timespec_get(&ts, TIME_UTC) != TIME_UTC) {
        return 0.0;
    }
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void harness_begin(const char *name) {
    pthread_mutex_lock(&harness_lock);
    harness_current = name;
    harness_failures_now = 0;
    harness_started = harness_now();
    pthread_mutex_unlock(&harness_lock);
}

void harness_end(void) {
    pthread_mutex_lock(&harness_lock);
    const double ms = 1e3 * (harness_now() - harness_started);
    if (harness_failures_now == 0) {
        harness_passed++;
        printf("PASS %s (%.0f ms)\n", harness_current, ms);
    } else {
        harness_failed++;
        if (harness_failures_now > HARNESS_MAX_REPORTS) {
            printf("  ... %d more failures not shown\n", harness_failures_now - HARNESS_MAX_REPORTS);
        }
        printf("FAIL %s (%d failed checks, %.0f ms)\n", harness_current, harness_failures_now, ms);
    }
    fflush(stdout);
    harness_current = NULL;
    pthread_mutex_unlock(&harness_lock);
}

void harness_run(const char *name, harness_test_fn fn) {
    harness_begin(name);
    fn();
    harness_end();
}

void harness_skip(const char *name, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("SKIP %s: ", name);
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    va_end(ap);
}

/* Prints one failure report, unless this test already printed enough. */
static void harness_vreport(const char *file, int line, const char *what, const char *fmt, va_list ap) {
    pthread_mutex_lock(&harness_lock);
    harness_failures_now++;
    if (harness_current == NULL) {
        /* A check outside any test still fails the program. */
        harness_failed++;
    }
    if (harness_failures_now <= HARNESS_MAX_REPORTS) {
        printf("%s:%d: %s: failed: %s", file, line, harness_current ? harness_current : "(no test)", what);
        if (fmt != NULL && fmt[0] != '\0') {
            printf(": ");
            vprintf(fmt, ap);
        }
        printf("\n");
        fflush(stdout);
    }
    pthread_mutex_unlock(&harness_lock);
}

void harness_fail(const char *file, int line, const char *cond, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    harness_vreport(file, line, cond, fmt, ap);
    va_end(ap);
}

int harness_test_failures(void) {
    pthread_mutex_lock(&harness_lock);
    int n = harness_failures_now;
    pthread_mutex_unlock(&harness_lock);
    return n;
}

int harness_slow(void) { return getenv("OPFORGE_VALGRIND") != NULL; }

int harness_summary(void) {
    printf("%d passed, %d failed\n", harness_passed, harness_failed);
    fflush(stdout);
    return harness_failed == 0 ? 0 : 1;
}

/* ------------------------------------------------------------------------ */
/* Comparisons                                                               */
/* ------------------------------------------------------------------------ */

/* Formats the caller's context message into buf. */
static void harness_context(char *buf, size_t cap, const char *fmt, va_list ap) {
    buf[0] = '\0';
    if (fmt != NULL) {
        vsnprintf(buf, cap, fmt, ap);
    }
}

static void harness_failf(const char *file, int line, const char *what, const char *fmt, ...) HARNESS_PRINTF(4, 5);
static void harness_failf(const char *file, int line, const char *what, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    harness_vreport(file, line, what, fmt, ap);
    va_end(ap);
}

static int harness_value_close(double got, double want, double atol, double rtol) {
    if (isnan(got) || isnan(want)) {
        return isnan(got) && isnan(want);
    }
    if (got == want) {
        return 1; /* also +0 == -0, and equal infinities */
    }
    if (isinf(got) || isinf(want)) {
        return 0;
    }
    return fabs(got - want) <= atol + rtol * fabs(want);
}

static int harness_close_impl(const char *file, int line, const void *got, const void *want, int is_f64, size_t n,
                              double atol, double rtol, const char *context) {
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        double g = is_f64 ? ((const double *)got)[i] : (double)((const float *)got)[i];
        double w = is_f64 ? ((const double *)want)[i] : (double)((const float *)want)[i];
        if (!harness_value_close(g, w, atol, rtol)) {
            if (bad++ == 0) {
                first = i;
            }
        }
    }
    if (bad == 0) {
        return 1;
    }
    double g = is_f64 ? ((const double *)got)[first] : (double)((const float *)got)[first];
    double w = is_f64 ? ((const double *)want)[first] : (double)((const float *)want)[first];
    harness_failf(file, line, "arrays differ",
                  "%s: first mismatch at [%zu]: got %.17g (%a), want %.17g (%a); %zu of %zu differ "
                  "(atol %g, rtol %g)",
                  context, first, g, g, w, w, bad, n, atol, rtol);
    return 0;
}

int harness_close_f32(const char *file, int line, const float *got, const float *want, size_t n, double atol,
                      double rtol, const char *fmt, ...) {
    char context[512];
    va_list ap;
    va_start(ap, fmt);
    harness_context(context, sizeof context, fmt, ap);
    va_end(ap);
    return harness_close_impl(file, line, got, want, 0, n, atol, rtol, context);
}

int harness_close_f64(const char *file, int line, const double *got, const double *want, size_t n, double atol,
                      double rtol, const char *fmt, ...) {
    char context[512];
    va_list ap;
    va_start(ap, fmt);
    harness_context(context, sizeof context, fmt, ap);
    va_end(ap);
    return harness_close_impl(file, line, got, want, 1, n, atol, rtol, context);
}

int harness_close_tol(const char *file, int line, const double *got, const double *want, const double *tol, size_t n,
                      const char *fmt, ...) {
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        if (!harness_value_close(got[i], want[i], tol[i], 0.0)) {
            if (bad++ == 0) {
                first = i;
            }
        }
    }
    if (bad == 0) {
        return 1;
    }
    char context[512];
    va_list ap;
    va_start(ap, fmt);
    harness_context(context, sizeof context, fmt, ap);
    va_end(ap);
    harness_failf(file, line, "arrays differ",
                  "%s: first mismatch at [%zu]: got %.17g (%a), want %.17g (%a), tolerance %g; %zu of %zu differ",
                  context, first, got[first], got[first], want[first], want[first], tol[first], bad, n);
    return 0;
}

int harness_same_bits(const char *file, int line, const void *got, const void *want, size_t n, size_t elem_size,
                      const char *fmt, ...) {
    const unsigned char *g = got, *w = want;
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        if (memcmp(g + i * elem_size, w + i * elem_size, elem_size) != 0) {
            if (bad++ == 0) {
                first = i;
            }
        }
    }
    if (bad == 0) {
        return 1;
    }
    char context[512];
    va_list ap;
    va_start(ap, fmt);
    harness_context(context, sizeof context, fmt, ap);
    va_end(ap);
    double gv = 0, wv = 0;
    if (elem_size == sizeof(float)) {
        float a, b;
        memcpy(&a, g + first * elem_size, sizeof a);
        memcpy(&b, w + first * elem_size, sizeof b);
        gv = a;
        wv = b;
    } else if (elem_size == sizeof(double)) {
        memcpy(&gv, g + first * elem_size, sizeof gv);
        memcpy(&wv, w + first * elem_size, sizeof wv);
    }
    harness_failf(file, line, "bits differ",
                  "%s: first difference at [%zu]: got %.17g (%a), want %.17g (%a); %zu of %zu differ", context, first,
                  gv, gv, wv, wv, bad, n);
    return 0;
}

int harness_bytes_are(const char *file, int line, const void *p, size_t nbytes, unsigned char byte, const char *fmt,
                      ...) {
    const unsigned char *b = p;
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < nbytes; i++) {
        if (b[i] != byte) {
            if (bad++ == 0) {
                first = i;
            }
        }
    }
    if (bad == 0) {
        return 1;
    }
    char context[512];
    va_list ap;
    va_start(ap, fmt);
    harness_context(context, sizeof context, fmt, ap);
    va_end(ap);
    harness_failf(file, line, "memory modified", "%s: byte %zu is 0x%02x, expected 0x%02x; %zu of %zu bytes changed",
                  context, first, b[first], byte, bad, nbytes);
    return 0;
}

int harness_contains(const char *file, int line, const char *what, const char *haystack, const char *needle) {
    if (haystack != NULL && needle != NULL && strstr(haystack, needle) != NULL) {
        return 1;
    }
    harness_failf(file, line, "substring missing", "%s = \"%s\" does not contain \"%s\"", what,
                  haystack ? haystack : "(null)", needle ? needle : "(null)");
    return 0;
}

/* ------------------------------------------------------------------------ */
/* PRNG and fills                                                            */
/* ------------------------------------------------------------------------ */

rng rng_seed(uint64_t seed) {
    rng r = {seed};
    return r;
}

uint64_t rng_next(rng *r) {
    uint64_t z = (r->state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

double rng_uniform(rng *r, double lo, double hi) {
    double u = (double)(rng_next(r) >> 11) * 0x1.0p-53;
    return lo + (hi - lo) * u;
}

uint64_t rng_below(rng *r, uint64_t n) { return rng_next(r) % n; }

void fill_uniform_f32(rng *r, float *x, size_t n, double lo, double hi) {
    for (size_t i = 0; i < n; i++) {
        x[i] = (float)rng_uniform(r, lo, hi);
    }
}

void fill_uniform_f64(rng *r, double *x, size_t n, double lo, double hi) {
    for (size_t i = 0; i < n; i++) {
        x[i] = rng_uniform(r, lo, hi);
    }
}

/* One value: 30% a special, else an ordinary value in [-10, 10). */
static float special_f32(rng *r) {
    static const float specials[] = {
        0.0f,    -0.0f,    INFINITY, -INFINITY, NAN,   -NAN,   FLT_TRUE_MIN, -FLT_TRUE_MIN, 1e-40f, -3e-39f,
        FLT_MIN, -FLT_MIN, FLT_MAX,  -FLT_MAX,  1e30f, -1e30f, 1.0f,         -1.0f,         1e-30f, -1e-30f,
    };
    uint64_t pick = rng_below(r, 100);
    if (pick < 25) {
        return specials[rng_below(r, sizeof specials / sizeof specials[0])];
    }
    if (pick < 30) { /* a random denormal of either sign */
        uint32_t bits = (uint32_t)(rng_next(r) & 0x807FFFFFu);
        if ((bits & 0x7FFFFFu) == 0) {
            bits |= 1;
        }
        float f;
        memcpy(&f, &bits, sizeof f);
        return f;
    }
    return (float)rng_uniform(r, -10.0, 10.0);
}

static double special_f64(rng *r) {
    static const double specials[] = {
        0.0,     -0.0,     INFINITY, -INFINITY, NAN,   -NAN,   DBL_TRUE_MIN, -DBL_TRUE_MIN, 1e-310, -3e-320,
        DBL_MIN, -DBL_MIN, DBL_MAX,  -DBL_MAX,  1e300, -1e300, 1.0,          -1.0,          1e-300, -1e-300,
    };
    uint64_t pick = rng_below(r, 100);
    if (pick < 25) {
        return specials[rng_below(r, sizeof specials / sizeof specials[0])];
    }
    if (pick < 30) {
        uint64_t bits = rng_next(r) & UINT64_C(0x800FFFFFFFFFFFFF);
        if ((bits & UINT64_C(0xFFFFFFFFFFFFF)) == 0) {
            bits |= 1;
        }
        double d;
        memcpy(&d, &bits, sizeof d);
        return d;
    }
    return rng_uniform(r, -10.0, 10.0);
}

void fill_special_f32(rng *r, float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        x[i] = special_f32(r);
    }
}

void fill_special_f64(rng *r, double *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        x[i] = special_f64(r);
    }
}

void fill_uniform(rng *r, opf_dtype dtype, void *x, size_t n, double lo, double hi) {
    if (dtype == OPF_F32) {
        fill_uniform_f32(r, x, n, lo, hi);
    } else {
        fill_uniform_f64(r, x, n, lo, hi);
    }
}

void fill_special(rng *r, opf_dtype dtype, void *x, size_t n) {
    if (dtype == OPF_F32) {
        fill_special_f32(r, x, n);
    } else {
        fill_special_f64(r, x, n);
    }
}

/* ------------------------------------------------------------------------ */
/* Memory                                                                    */
/* ------------------------------------------------------------------------ */

void *xcalloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (p == NULL) {
        fprintf(stderr, "out of memory (%zu x %zu bytes)\n", count, size);
        exit(2);
    }
    return p;
}

const opf_op_table *resolve_once(const opf_ops_decl *decl, const opf_op_table **table) {
    if (*table == NULL) {
        *table = opf_ops_resolve(decl);
        CHECK(*table != NULL, "table '%s' does not resolve: %s", decl->name, opf_last_error());
    }
    return *table;
}

void *xmalloc(size_t size) {
    void *p = malloc(size ? size : 1);
    if (p == NULL) {
        fprintf(stderr, "out of memory (%zu bytes)\n", size);
        exit(2);
    }
    return p;
}

/* ------------------------------------------------------------------------ */
/* Tensor views                                                              */
/* ------------------------------------------------------------------------ */

enum { TV_GUARD = 8 }; /* guard elements before and after the span */

const char *tv_layout_name(tv_layout layout) {
    switch (layout) {
    case TV_CONTIG: return "contiguous";
    case TV_CONTIG_STRIDES: return "contiguous-explicit-strides";
    case TV_TRANSPOSED: return "transposed";
    case TV_STEP2: return "step2";
    case TV_NEGATIVE: return "negative";
    case TV_BROADCAST: return "broadcast";
    case TV_LAYOUT_COUNT: break;
    }
    return "?";
}

void tv_make(tview *v, opf_dtype dtype, int32_t ndim, const int64_t *shape, tv_layout layout, int offset_elems) {
    memset(v, 0, sizeof *v);
    v->elem = opf_dtype_size(dtype);
    if (v->elem == 0) {
        v->elem = 4;
    }
    v->numel = 1;
    for (int32_t d = 0; d < ndim; d++) {
        v->shape[d] = shape[d];
        v->numel *= (size_t)shape[d];
    }
    int64_t c[OPF_MAX_RANK];
    int64_t acc = 1;
    for (int32_t d = ndim - 1; d >= 0; d--) {
        c[d] = acc;
        acc *= shape[d];
    }
    for (int32_t d = 0; d < ndim; d++) {
        switch (layout) {
        case TV_CONTIG:
        case TV_CONTIG_STRIDES:
        case TV_LAYOUT_COUNT: v->strides[d] = c[d]; break;
        case TV_TRANSPOSED: v->strides[d] = d == 0 ? 1 : v->strides[d - 1] * shape[d - 1]; break;
        case TV_NEGATIVE: v->strides[d] = -c[d]; break;
        case TV_BROADCAST: v->strides[d] = d == 0 ? 0 : c[d]; break;
        case TV_STEP2: break;
        }
    }
    if (layout == TV_STEP2) {
        for (int32_t d = ndim - 1; d >= 0; d--) {
            v->strides[d] = d == ndim - 1 ? 2 : v->strides[d + 1] * shape[d + 1] + 1;
        }
    }
    int64_t lo = 0, hi = 0;
    if (v->numel > 0) {
        for (int32_t d = 0; d < ndim; d++) {
            int64_t ext = (shape[d] - 1) * v->strides[d];
            if (ext < 0) {
                lo += ext;
            } else {
                hi += ext;
            }
        }
    }
    size_t span = v->numel > 0 ? (size_t)(hi - lo + 1) : 0;
    v->alloc_bytes = (span + 2 * TV_GUARD) * v->elem;
    v->alloc = xmalloc(v->alloc_bytes);
    memset(v->alloc, HARNESS_GUARD_BYTE, v->alloc_bytes);
    if (offset_elems < 0 || offset_elems > TV_GUARD) {
        offset_elems = 0;
    }
    v->t.data = v->alloc + (size_t)(TV_GUARD - lo - offset_elems) * v->elem;
    v->t.device.type = OPF_DEVICE_CPU;
    v->t.device.id = 0;
    v->t.ndim = ndim;
    v->t.dtype = dtype;
    v->t.shape = v->shape;
    v->t.strides = layout == TV_CONTIG ? NULL : v->strides;
    v->t.byte_offset = (uint64_t)offset_elems * v->elem;
}

void tv_free(tview *v) {
    free(v->alloc);
    v->alloc = NULL;
}

void *tv_at(const tview *v, size_t i) {
    int64_t off = 0;
    for (int32_t d = v->t.ndim - 1; d >= 0; d--) {
        int64_t idx = (int64_t)(i % (size_t)v->shape[d]);
        i /= (size_t)v->shape[d];
        off += idx * v->strides[d];
    }
    return (unsigned char *)v->t.data + v->t.byte_offset + off * (int64_t)v->elem;
}

/* Byte offsets, from the start of the allocation, of every element in C
 * order (an odometer over the index, no divisions). */
static size_t *tv_offsets(const tview *v) {
    size_t *offsets = xcalloc(v->numel, sizeof *offsets);
    int64_t idx[OPF_MAX_RANK] = {0};
    int64_t off = (int64_t)((unsigned char *)v->t.data + v->t.byte_offset - v->alloc) / (int64_t)v->elem;
    for (size_t i = 0; i < v->numel; i++) {
        offsets[i] = (size_t)off * v->elem;
        for (int32_t d = v->t.ndim - 1; d >= 0; d--) {
            off += v->strides[d];
            if (++idx[d] < v->shape[d]) {
                break;
            }
            off -= v->strides[d] * v->shape[d];
            idx[d] = 0;
        }
    }
    return offsets;
}

void tv_gather(const tview *v, void *dst) {
    size_t *offsets = tv_offsets(v);
    for (size_t i = 0; i < v->numel; i++) {
        memcpy((unsigned char *)dst + i * v->elem, v->alloc + offsets[i], v->elem);
    }
    free(offsets);
}

void tv_scatter(const tview *v, const void *src) {
    size_t *offsets = tv_offsets(v);
    for (size_t i = 0; i < v->numel; i++) {
        memcpy(v->alloc + offsets[i], (const unsigned char *)src + i * v->elem, v->elem);
    }
    free(offsets);
}

void tv_fill(tview *v, rng *r, int special, void *out) {
    void *tmp = xcalloc(v->numel, v->elem);
    if (special) {
        fill_special(r, v->t.dtype, tmp, v->numel);
    } else {
        fill_uniform(r, v->t.dtype, tmp, v->numel, -1.0, 1.0);
    }
    tv_scatter(v, tmp);
    if (out != NULL) {
        tv_gather(v, out);
    }
    free(tmp);
}

int harness_tv_guards(const char *file, int line, const tview *v, const char *fmt, ...) {
    unsigned char *covered = xcalloc(v->alloc_bytes, 1);
    size_t *offsets = tv_offsets(v);
    for (size_t i = 0; i < v->numel; i++) {
        memset(covered + offsets[i], 1, v->elem);
    }
    free(offsets);
    size_t bad = 0, first = 0;
    for (size_t b = 0; b < v->alloc_bytes; b++) {
        if (!covered[b] && v->alloc[b] != HARNESS_GUARD_BYTE) {
            if (bad++ == 0) {
                first = b;
            }
        }
    }
    free(covered);
    if (bad == 0) {
        return 1;
    }
    char context[512];
    va_list ap;
    va_start(ap, fmt);
    harness_context(context, sizeof context, fmt, ap);
    va_end(ap);
    harness_failf(file, line, "write outside the view",
                  "%s: byte %zu of the allocation (not an element of the view) was changed; %zu bytes changed", context,
                  first, bad);
    return 0;
}

const char *fmt_shape(char *buf, size_t cap, int32_t ndim, const int64_t *shape) {
    size_t len = 0;
    buf[0] = '\0';
    len += (size_t)snprintf(buf + len, cap - len, "[");
    for (int32_t d = 0; d < ndim && len < cap; d++) {
        len += (size_t)snprintf(buf + len, cap - len, "%s%" PRId64, d ? "," : "", shape[d]);
    }
    if (len < cap) {
        snprintf(buf + len, cap - len, "]");
    }
    return buf;
}

const char *last_error_copy(char *buf, size_t cap) {
    const char *e = opf_last_error();
    snprintf(buf, cap, "%s", e ? e : "(null)");
    return buf;
}
