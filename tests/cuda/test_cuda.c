/*
 * test_cuda.c — every row with a CUDA kernel, run through opf_op_run_cuda on
 * a non-default stream and compared with the same row on the CPU (opf_op_run):
 * the CPU path is tested against independent scalar references elsewhere, so
 * it is the reference here.
 *
 *   elementwise (relu, relu_, relu_grad, scale, add, and the ops of a
 *     user's file compiled by nvcc, tests/cuda/user_ops.c: two inputs and
 *     two outputs, in place, a helper function): the CUDA builds generated
 *     from the kernels' definitions give bit-identical results (NaN-aware:
 *     any NaN matches any NaN, since GPU arithmetic returns the canonical
 *     NaN) on special values (NaN, +-Inf, +-0, denormals), sizes 0, 1, 7, 17,
 *     1000, 2^20 + 3, 0-d and rank 16, contiguous (vector and scalar paths:
 *     base addresses shifted by 1..3 elements), strided views (transposed,
 *     every other element, negative, zero-stride inputs, byte_offset),
 *     strided outputs, exact in place (onto either input, or both outputs
 *     onto both inputs); guard bytes around every view untouched, inputs
 *     unmodified; a tensor of more than 2^32 elements (64-bit indexing);
 *   dense / dense_grad: within a forward error bound of the GEMMs, shapes
 *     with K = 0, N = 1, M = 1, 129x65x33 and larger, with and without bias
 *     and relu, transposed / strided / misaligned operands, strided outputs,
 *     dense_grad with any subset of dx, dw, db; NaN and Inf inputs;
 *   row kernels (the user's rowsum, row_affine with w[M] and an optional
 *     b[M] passed whole to every row, row_stats with two outputs of a dropped
 *     axis, softmax; examples/ops/myops.c's rowsum and rowsum_grad; every
 *     built-in row kernel): bit-identical to the CPU builds (NaN-aware, on
 *     special values) and, on uniform values, within a bound of a scalar
 *     reference; one row (no leading dims), empty rows (M = 0), no rows,
 *     several leading dims (size-1 ones too), 10007 rows (the grid-stride
 *     loop); rows in place and not contiguous (transposed, every other
 *     element, negative, broadcast: gathered into and scattered from
 *     scratch), misaligned and offset views, guard bytes, inputs unmodified;
 *     a row's own compute_cuda first, a hand-written row, a kernel without a
 *     CUDA build refused; captured into a graph with its scratch;
 *   streams: the ops (built-in and user) are captured into a CUDA graph on the test's stream
 *     (global capture mode fails on any launch to the legacy default stream
 *     or any synchronization), replayed, and checked;
 *   errors: a CPU tensor or two device ids -> OPF_E_DEVICE; a device id that
 *     does not exist -> OPF_E_DEVICE; the caller's current device restored.
 *
 * Without a CUDA device it checks only what needs none (the built-ins and
 * the user's kernels have CUDA builds; the nvcc-compiled CPU builds of the
 * user's kernels match C references), prints SKIP and exits 0; in a build
 * without CUDA it only prints SKIP.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#ifdef OPF_HAVE_CUDA
#include <cuda_runtime_api.h>

static cudaStream_t stream;
static int device_count;
/* OPFORGE_TEST_QUICK=1: a reduced set (for compute-sanitizer, which makes
 * every launch and API call much slower). */
static int quick;
/* Run by the CUDA emulator (make test-cuda-emu: tests/cuda/emulate), which
 * has the elementwise and row paths only: no cuBLASLt, so no dense. */
static int emulated;

#define CUDA_OK(call)                                                                                                  \
    do {                                                                                                               \
        cudaError_t err_ = (call);                                                                                     \
        if (err_ != cudaSuccess) {                                                                                     \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(err_));                   \
            exit(2);                                                                                                   \
        }                                                                                                              \
    } while (0)

#define CHECK_OK(st, ctx)                                                                                              \
    CHECK((st) == OPF_OK, "%s: status %s, message \"%s\"", (ctx), opf_status_name(st), opf_last_error())

static const opf_dtype dtypes[] = {OPF_F32, OPF_F64};
static const char *dtype_str(opf_dtype dt) { return dt == OPF_F32 ? "f32" : "f64"; }

static const opf_op_def *row(const char *name) {
    const opf_op_def *op = opf_op_find(opf_builtin_ops(), name);
    if (op == NULL || op->compute_cuda == NULL) {
        fprintf(stderr, "row %s missing or without a CUDA kernel\n", name);
        exit(2);
    }
    return op;
}

/* ------------------------------------------------------------------------ */
/* Device views: a harness tview (host) mirrored on the device              */
/* ------------------------------------------------------------------------ */

/* The whole host allocation (elements and guard bytes) is copied to device
 * memory at `shift` elements past a 256-byte aligned address, so shift 1..3
 * makes every element address misaligned for 16-byte vectors. */
typedef struct dview {
    tview h;                /* host view: the CPU reference runs on it */
    unsigned char *d_buf;   /* cudaMalloc'd */
    unsigned char *d_alloc; /* d_buf + shift elements: the device copy of h.alloc */
    opf_tensor t;           /* the device tensor */
    unsigned char *back;    /* host copy of the device allocation after a run */
} dview;

static void dv_make(dview *v, opf_dtype dt, int32_t ndim, const int64_t *shape, tv_layout layout, int offset_elems,
                    int shift) {
    tv_make(&v->h, dt, ndim, shape, layout, offset_elems);
    CUDA_OK(cudaMalloc((void **)&v->d_buf, v->h.alloc_bytes + 64));
    v->d_alloc = v->d_buf + (size_t)shift * v->h.elem;
    v->t = v->h.t;
    v->t.data = v->d_alloc + ((unsigned char *)v->h.t.data - v->h.alloc);
    v->t.device.type = OPF_DEVICE_CUDA;
    v->t.device.id = 0;
    v->back = xmalloc(v->h.alloc_bytes);
}

static void dv_upload(dview *v) {
    CUDA_OK(cudaMemcpy(v->d_alloc, v->h.alloc, v->h.alloc_bytes, cudaMemcpyHostToDevice));
}

/* Copies the device allocation back and returns a host view over it. */
static tview dv_download(dview *v) {
    CUDA_OK(cudaMemcpy(v->back, v->d_alloc, v->h.alloc_bytes, cudaMemcpyDeviceToHost));
    tview b = v->h;
    b.alloc = v->back;
    b.t.data = v->back + ((unsigned char *)v->h.t.data - v->h.alloc);
    return b;
}

static void dv_free(dview *v) {
    tv_free(&v->h);
    CUDA_OK(cudaFree(v->d_buf));
    free(v->back);
}

static void sync_stream(void) { CUDA_OK(cudaStreamSynchronize(stream)); }

/* An element of `elem` bytes (float or double) as a double. */
static double elem_value(const unsigned char *p, size_t elem) {
    if (elem == sizeof(float)) {
        float f;
        memcpy(&f, p, sizeof f);
        return f;
    }
    double d;
    memcpy(&d, p, sizeof d);
    return d;
}

static int is_nan_elem(const unsigned char *p, size_t elem) { return isnan(elem_value(p, elem)); }

/* Identical bits, except that any NaN matches any NaN. */
static int check_same_nan_aware(const void *got, const void *want, size_t n, size_t elem, const char *ctx) {
    const unsigned char *g = got, *w = want;
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *gi = g + i * elem, *wi = w + i * elem;
        if (memcmp(gi, wi, elem) != 0 && !(is_nan_elem(gi, elem) && is_nan_elem(wi, elem))) {
            if (bad++ == 0) {
                first = i;
            }
        }
    }
    if (bad == 0) {
        return 1;
    }
    return CHECK_SAME_BITS(g + first * elem, w + first * elem, 1, elem, "%s: element %zu (of %zu; %zu differ)", ctx,
                           first, n, bad);
}

/* Within tolerance of want: NaN where want is NaN, the same infinity where
 * it is infinite, and elsewhere within (4 m + 64) units of roundoff of the
 * largest finite |want| or `floor` if larger (a row of m elements reduced in
 * another order; a statistic of a row, such as its mean, can cancel down to
 * far less than the row's elements, which the caller passes as floor). */
static int check_close_nan_aware(const void *got, const void *want, size_t n, size_t elem, int64_t m, double floor,
                                 const char *ctx) {
    const unsigned char *g = got, *w = want;
    const double u = elem == sizeof(float) ? 0x1p-24 : 0x1p-53;
    double scale = floor;
    for (size_t i = 0; i < n; i++) {
        const double v = fabs(elem_value(w + i * elem, elem));
        scale = isfinite(v) && v > scale ? v : scale;
    }
    const double tol = (double)(4 * m + 64) * u * scale;
    for (size_t i = 0; i < n; i++) {
        const double gv = elem_value(g + i * elem, elem), wv = elem_value(w + i * elem, elem);
        const int ok = isnan(wv) ? isnan(gv) : isinf(wv) ? gv == wv : fabs(gv - wv) <= tol;
        if (!CHECK(ok, "%s: element %zu (of %zu): %.17g, expected %.17g (tolerance %.3g)", ctx, i, n, gv, wv, tol)) {
            return 0;
        }
    }
    return 1;
}

/* ------------------------------------------------------------------------ */
/* Elementwise                                                               */
/* ------------------------------------------------------------------------ */

typedef struct ew_shape {
    int32_t ndim;
    int64_t shape[OPF_MAX_RANK];
    int big; /* run only a few configurations */
} ew_shape;

static const ew_shape ew_shapes[] = {
    {1, {0}, 0},
    {1, {1}, 0},
    {1, {7}, 0},
    {1, {17}, 0},
    {1, {1000}, 0},
    {1, {(1 << 20) + 3}, 1},
    {0, {0}, 0},
    {2, {7, 17}, 0},
    {2, {1000, 3}, 0},
    {2, {0, 5}, 0},
    {3, {3, 5, 7}, 0},
    {3, {64, 1, 33}, 0},
    {16, {2, 1, 3, 1, 2, 1, 1, 2, 1, 1, 1, 2, 1, 1, 1, 3}, 0},
};

/* Layout, byte_offset (elements) and device shift of the operands: inputs
 * a and b, and every output not written onto an input (y). */
typedef struct ew_config {
    const char *name;
    tv_layout a, b, y;
    int offset;
    int shift_a, shift_b, shift_y;
    int inplace; /* 1: output 0 is a (exact alias); 2: output 0 is b; 3: output j is input j */
} ew_config;

static const ew_config ew_configs[] = {
    {"contiguous-aligned", TV_CONTIG, TV_CONTIG, TV_CONTIG, 0, 0, 0, 0, 0},
    {"contiguous-misaligned-x", TV_CONTIG, TV_CONTIG, TV_CONTIG, 0, 1, 0, 0, 0},
    {"contiguous-misaligned-y", TV_CONTIG_STRIDES, TV_CONTIG, TV_CONTIG, 0, 0, 0, 2, 0},
    {"contiguous-all-shifted-3", TV_CONTIG, TV_CONTIG, TV_CONTIG, 0, 3, 3, 3, 0},
    {"byte-offset", TV_CONTIG_STRIDES, TV_CONTIG, TV_CONTIG_STRIDES, 3, 0, 0, 0, 0},
    {"transposed-in", TV_TRANSPOSED, TV_CONTIG, TV_CONTIG, 0, 0, 0, 0, 0},
    {"step2-in-negative-out", TV_STEP2, TV_NEGATIVE, TV_NEGATIVE, 1, 1, 0, 0, 0},
    {"negative-in-step2-out", TV_NEGATIVE, TV_STEP2, TV_STEP2, 2, 0, 1, 1, 0},
    {"broadcast-in", TV_BROADCAST, TV_TRANSPOSED, TV_CONTIG, 0, 0, 0, 0, 0},
    {"transposed-out", TV_CONTIG, TV_BROADCAST, TV_TRANSPOSED, 0, 0, 0, 0, 0},
    {"inplace-contiguous", TV_CONTIG, TV_CONTIG, TV_CONTIG, 0, 0, 0, 0, 1},
    {"inplace-misaligned", TV_CONTIG, TV_CONTIG, TV_CONTIG, 0, 1, 0, 0, 1},
    {"inplace-step2", TV_STEP2, TV_NEGATIVE, TV_STEP2, 0, 0, 0, 0, 1},
    {"inplace-into-b", TV_TRANSPOSED, TV_NEGATIVE, TV_NEGATIVE, 0, 0, 0, 0, 2},
    {"inplace-both-contiguous", TV_CONTIG, TV_CONTIG, TV_CONTIG, 0, 0, 0, 0, 3},
    {"inplace-both-strided", TV_NEGATIVE, TV_TRANSPOSED, TV_CONTIG, 1, 0, 0, 0, 3},
};

/* An elementwise row as its kernel sees it: num_in inputs (a, then b; a
 * third is laid out as b) and num_out outputs, which a row without outputs
 * writes onto input 0. */
typedef struct ew_row {
    const opf_op_def *op;
    int num_in, num_out;
    int mutated;
} ew_row;

static ew_row ew_row_of(const opf_op_def *op) {
    ew_row e = {op, (int)op->num_inputs, (int)op->num_outputs, 0};
    if (op->num_outputs == 0) {
        e.num_out = 1;
        e.mutated = 1;
    }
    return e;
}

static tv_layout ew_input_layout(const ew_config *c, int i) { return i == 0 ? c->a : c->b; }

/* The input that output j is written onto, or -1 for a separate view. */
static int ew_alias(const ew_row *e, const ew_config *c, int j) {
    if (e->mutated || (c->inplace == 1 && j == 0)) {
        return 0;
    }
    if (c->inplace == 2 && j == 0) {
        return 1;
    }
    return c->inplace == 3 ? j : -1;
}

static int ew_config_applies(const ew_row *e, const ew_config *c, int big) {
    int few = c == &ew_configs[0] || c == &ew_configs[1] || c == &ew_configs[6] || c == &ew_configs[10];
    if ((big && (quick || !few)) || (quick && !few)) {
        return 0;
    }
    if (e->mutated) { /* input 0 is written: in place on it only */
        return c->inplace == 1 && c->a != TV_BROADCAST;
    }
    if ((c->inplace == 2 && e->num_in < 2) || (c->inplace == 3 && (e->num_out < 2 || e->num_in < e->num_out))) {
        return 0;
    }
    for (int j = 0; c->inplace != 0 && j < e->num_out; j++) { /* an output summed over broadcast dims: never in place */
        if (e->op->output_shapes[j].kind == OPF_SHAPE_SUM_TO) {
            return 0;
        }
    }
    for (int j = 0; j < e->num_out; j++) { /* a broadcast input cannot be written */
        int i = ew_alias(e, c, j);
        if (i >= 0 && ew_input_layout(c, i) == TV_BROADCAST) {
            return 0;
        }
    }
    return 1;
}

/* One row, dtype, shape, configuration and set of attributes: GPU vs CPU,
 * every output (or input written in place), the guard bytes around every
 * view, and the inputs not written left alone. */
static void ew_case(const ew_row *e, opf_dtype dt, const ew_shape *s, const ew_config *c, const opf_attr_value *attrs,
                    const char *attrs_str, rng *r) {
    char ctx[256], shape_str[128];
    snprintf(ctx, sizeof ctx, "%s %s %s %s%s", e->op->name, dtype_str(dt),
             fmt_shape(shape_str, sizeof shape_str, s->ndim, s->shape), c->name, attrs_str);

    dview in[3], out[2], *written[2];
    unsigned char *snap[3] = {NULL, NULL, NULL};
    int is_written[3] = {0, 0, 0};
    for (int i = 0; i < e->num_in; i++) {
        dv_make(&in[i], dt, s->ndim, s->shape, ew_input_layout(c, i), c->offset, i == 0 ? c->shift_a : c->shift_b);
        tv_fill(&in[i].h, r, 1, NULL);
    }
    for (int j = 0; j < e->num_out; j++) {
        int i = ew_alias(e, c, j);
        if (i >= 0) {
            written[j] = &in[i];
            is_written[i] = 1;
        } else {
            dv_make(&out[j], dt, s->ndim, s->shape, c->y, c->offset, c->shift_y);
            dv_upload(&out[j]);
            written[j] = &out[j];
        }
    }
    for (int i = 0; i < e->num_in; i++) {
        dv_upload(&in[i]);
        if (!is_written[i]) { /* must not change */
            snap[i] = xmalloc(in[i].h.alloc_bytes);
            memcpy(snap[i], in[i].h.alloc, in[i].h.alloc_bytes);
        }
    }

    const opf_tensor *gin[3] = {NULL, NULL, NULL}, *hin[3] = {NULL, NULL, NULL}, *gout[2] = {NULL, NULL},
                     *hout[2] = {NULL, NULL};
    for (int i = 0; i < e->num_in; i++) {
        gin[i] = &in[i].t;
        hin[i] = &in[i].h.t;
    }
    for (int j = 0; j < e->num_out; j++) {
        gout[j] = &written[j]->t;
        hout[j] = &written[j]->h.t;
    }
    opf_status gst = opf_op_run_cuda(e->op, gin, e->mutated ? NULL : gout, attrs, stream);
    char msg[512];
    last_error_copy(msg, sizeof msg);
    opf_status cst = opf_op_run(e->op, hin, e->mutated ? NULL : hout, attrs);
    CHECK(cst == OPF_OK, "%s: CPU status %s (%s)", ctx, opf_status_name(cst), opf_last_error());
    if (CHECK(gst == OPF_OK, "%s: GPU status %s (%s)", ctx, opf_status_name(gst), msg)) {
        sync_stream();
        for (int j = 0; j < e->num_out; j++) {
            dview *w = written[j];
            size_t n = w->h.numel, elem = w->h.elem;
            unsigned char *got = xcalloc(n, elem), *want = xcalloc(n, elem);
            tview back = dv_download(w);
            tv_gather(&back, got);
            tv_gather(&w->h, want);
            char octx[300];
            snprintf(octx, sizeof octx, "%s: output %d", ctx, j);
            check_same_nan_aware(got, want, n, elem, octx);
            CHECK_TV_GUARDS(&back, "%s", octx);
            free(got);
            free(want);
        }
        for (int i = 0; i < e->num_in; i++) {
            if (snap[i] != NULL) {
                tview b = dv_download(&in[i]);
                CHECK_SAME_BITS(b.alloc, snap[i], in[i].h.alloc_bytes, 1, "%s: input %d modified", ctx, i);
            }
        }
    }
    for (int i = 0; i < e->num_in; i++) {
        free(snap[i]);
        dv_free(&in[i]);
    }
    for (int j = 0; j < e->num_out; j++) {
        if (written[j] == &out[j]) {
            dv_free(&out[j]);
        }
    }
}

/* Every shape and configuration of an elementwise row, for each set of
 * attributes (num_attr_sets sets of op->num_attrs values; none: defaults). */
static void test_eltwise_row(const opf_op_def *op, const opf_attr_value *attr_sets, int num_attr_sets, uint64_t seed) {
    const ew_row e = ew_row_of(op);
    rng r = rng_seed(seed);
    const int sets = num_attr_sets > 0 ? num_attr_sets : 1;
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
        for (size_t si = 0; si < sizeof ew_shapes / sizeof ew_shapes[0]; si++) {
            for (size_t ci = 0; ci < sizeof ew_configs / sizeof ew_configs[0]; ci++) {
                if (!ew_config_applies(&e, &ew_configs[ci], ew_shapes[si].big)) {
                    continue;
                }
                for (int k = 0; k < sets; k++) {
                    const opf_attr_value *attrs = num_attr_sets > 0 ? attr_sets + k * op->num_attrs : NULL;
                    char attrs_str[96] = "";
                    for (int32_t a = 0; attrs != NULL && a < op->num_attrs; a++) {
                        size_t len = strlen(attrs_str);
                        if (op->attrs[a].type == OPF_ATTR_FLOAT) {
                            snprintf(attrs_str + len, sizeof attrs_str - len, " %s=%g", op->attrs[a].name, attrs[a].f);
                        } else {
                            snprintf(attrs_str + len, sizeof attrs_str - len, " %s=%lld", op->attrs[a].name,
                                     (long long)attrs[a].i);
                        }
                    }
                    ew_case(&e, dtypes[d], &ew_shapes[si], &ew_configs[ci], attrs, attrs_str, &r);
                }
            }
        }
    }
}

TEST(test_relu) { test_eltwise_row(row("relu"), NULL, 0, 1000); }
TEST(test_relu_inplace) { test_eltwise_row(row("relu_"), NULL, 0, 1001); }
TEST(test_relu_grad) { test_eltwise_row(row("relu_grad"), NULL, 0, 1002); }
TEST(test_scale) {
    static const opf_attr_value alphas[] = {{.f = 2.0}, {.f = -0.3}, {.f = 1e30}};
    test_eltwise_row(row("scale"), alphas, 3, 1003);
}
TEST(test_add) { test_eltwise_row(row("add"), NULL, 0, 1004); }
TEST(test_mul) { test_eltwise_row(row("mul"), NULL, 0, 1005); }
TEST(test_sum_to_same_shape) { test_eltwise_row(row("sum_to"), NULL, 0, 1006); }

/* Rows that broadcast: inputs of different shapes (zero strides in their
 * views) and outputs summed over broadcast dims (the kernel into scratch at
 * the full shape, then the sums), GPU vs CPU: bit for bit for add and mul,
 * within 4 eps of the sum of the terms' magnitudes for the sums (the GPU adds
 * in double in another order). */
typedef struct bc_case {
    const char *row;
    int num_in;
    ew_shape in[3];
} bc_case;

static void bc_run(const bc_case *c, opf_dtype dt, tv_layout layout, rng *r) {
    const opf_op_def *op = row(c->row);
    char ctx[256];
    snprintf(ctx, sizeof ctx, "%s %s %s", c->row, dtype_str(dt), tv_layout_name(layout));
    dview in[3], out;
    const opf_tensor *gin[3] = {NULL}, *hin[3] = {NULL};
    for (int i = 0; i < c->num_in; i++) {
        dv_make(&in[i], dt, c->in[i].ndim, c->in[i].shape, i == 0 ? layout : TV_CONTIG, 0, i);
        tv_fill(&in[i].h, r, 0, NULL);
        dv_upload(&in[i]);
        gin[i] = &in[i].t;
        hin[i] = &in[i].h.t;
    }
    int32_t ndim;
    int64_t shape[OPF_MAX_RANK];
    CHECK_OK(opf_op_infer_shape(op, hin, 0, &ndim, shape), ctx);
    dv_make(&out, dt, ndim, shape, layout == TV_CONTIG ? TV_CONTIG : TV_NEGATIVE, 0, 1);
    dv_upload(&out);
    opf_status gst = opf_op_run_cuda(op, gin, (const opf_tensor *[]){&out.t}, NULL, stream);
    char msg[512];
    last_error_copy(msg, sizeof msg);
    CHECK_OK(opf_op_run(op, hin, (const opf_tensor *[]){&out.h.t}, NULL), ctx);
    if (CHECK(gst == OPF_OK, "%s: GPU status %s (%s)", ctx, opf_status_name(gst), msg)) {
        sync_stream();
        const size_t n = out.h.numel, elem = out.h.elem;
        unsigned char *got = xcalloc(n + 1, elem), *want = xcalloc(n + 1, elem);
        tview back = dv_download(&out);
        tv_gather(&back, got);
        tv_gather(&out.h, want);
        if (c->num_in == 2 && strcmp(c->row, "sum_to") != 0) {
            check_same_nan_aware(got, want, n, elem, ctx);
        } else {
            /* |GPU - CPU| <= 4 eps (|sum| + 1) * terms per element: both within 2 eps of the exact sum */
            int64_t terms = 1;
            for (int i = 0; i < c->num_in; i++) {
                int64_t k = (int64_t)in[i].h.numel;
                terms = k > terms ? k : terms;
            }
            terms = n > 0 ? terms / (int64_t)n : 0;
            const double eps = dt == OPF_F32 ? 1.2e-7 : 2.3e-16;
            for (size_t i = 0; i < n; i++) {
                double g = dt == OPF_F32 ? ((float *)got)[i] : ((double *)got)[i];
                double w = dt == OPF_F32 ? ((float *)want)[i] : ((double *)want)[i];
                if (!CHECK(fabs(g - w) <= 4 * eps * (double)(terms + 1) * (fabs(w) + 4.0),
                           "%s: element %zu: GPU %.17g, CPU %.17g", ctx, i, g, w)) {
                    break;
                }
            }
        }
        CHECK_TV_GUARDS(&back, "%s", ctx);
        free(got);
        free(want);
    }
    for (int i = 0; i < c->num_in; i++) {
        dv_free(&in[i]);
    }
    dv_free(&out);
}

TEST(test_broadcast) {
    static const bc_case cases[] = {
        {"add", 2, {{2, {3, 1}, 0}, {2, {1, 4}, 0}}},
        {"add", 2, {{1, {5}, 0}, {3, {2, 3, 5}, 0}}},
        {"mul", 2, {{0, {0}, 0}, {2, {7, 17}, 0}}},
        {"mul", 2, {{3, {64, 1, 33}, 0}, {2, {9, 1}, 0}}},
        {"add", 2, {{2, {0, 4}, 0}, {1, {4}, 0}}},
        {"sum_to", 2, {{3, {2, 3, 4}, 0}, {2, {3, 1}, 0}}},
        {"sum_to", 2, {{2, {1000, 33}, 0}, {1, {33}, 0}}},
        {"sum_to", 2, {{2, {33, 1000}, 0}, {2, {33, 1}, 0}}},
        {"sum_to", 2, {{1, {100003}, 0}, {0, {0}, 0}}},
        {"sum_to", 2, {{2, {3, 1}, 0}, {3, {2, 3, 4}, 0}}},
        {"sum_to", 2, {{2, {0, 3}, 0}, {1, {3}, 0}}},
        {"mul_grad", 3, {{3, {2, 3, 4}, 0}, {2, {3, 1}, 0}, {1, {4}, 0}}},
        {"mul_grad", 3, {{2, {3, 1}, 0}, {2, {1, 4}, 0}, {2, {3, 4}, 0}}},
        {"mul_grad", 3, {{3, {40, 50, 30}, 0}, {1, {30}, 0}, {3, {40, 1, 30}, 0}}},
    };
    rng r = rng_seed(1007);
    static const tv_layout layouts[] = {TV_CONTIG, TV_TRANSPOSED, TV_STEP2, TV_NEGATIVE};
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            for (size_t l = 0; l < (quick ? 1 : sizeof layouts / sizeof layouts[0]); l++) {
                bc_run(&cases[c], dtypes[d], layouts[l], &r);
            }
        }
    }
}

/* The activations (activations.c): the CUDA builds compute what the CPU builds
 * compute, bit for bit (FMAs explicit, no contraction, IEEE division). */
static const opf_attr_value gelu_forms[] = {{.i = 0}, {.i = 1}}; /* approximate: none, tanh */
TEST(test_activations) {
    static const char *const gelu_rows[] = {"gelu", "gelu_grad", "gelu_grad_grad"};
    static const char *const rows[] = {"silu",    "silu_grad",    "silu_grad_grad",
                                       "sigmoid", "sigmoid_grad", "sigmoid_grad_grad",
                                       "tanh",    "tanh_grad",    "tanh_grad_grad"};
    for (size_t i = 0; i < sizeof gelu_rows / sizeof gelu_rows[0]; i++) {
        test_eltwise_row(row(gelu_rows[i]), gelu_forms, 2, 1100 + i);
    }
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        test_eltwise_row(row(rows[i]), NULL, 0, 1110 + i);
    }
}

/* More than 2^32 elements (the strided path's 64-bit index arithmetic): a
 * broadcast row into a [65537, 65536] float32 output (16 GiB), checked on the
 * rows around element 2^32. Skipped in the quick set or without the memory. */
TEST(test_relu_huge) {
    size_t free_bytes = 0, total_bytes = 0;
    CUDA_OK(cudaMemGetInfo(&free_bytes, &total_bytes));
    const int64_t rows = 65537, cols = 65536;
    const size_t out_bytes = (size_t)rows * (size_t)cols * sizeof(float);
    if (quick || free_bytes < out_bytes + ((size_t)2 << 30)) {
        printf("  (test_relu_huge skipped: %s)\n", quick ? "quick set" : "not enough device memory");
        return;
    }
    float *h_x = xmalloc((size_t)cols * sizeof(float)), *h_y = xmalloc((size_t)cols * sizeof(float));
    rng r = rng_seed(77);
    fill_special_f32(&r, h_x, (size_t)cols);
    float *d_x, *d_y;
    CUDA_OK(cudaMalloc((void **)&d_x, (size_t)cols * sizeof(float)));
    CUDA_OK(cudaMalloc((void **)&d_y, out_bytes));
    CUDA_OK(cudaMemcpy(d_x, h_x, (size_t)cols * sizeof(float), cudaMemcpyHostToDevice));
    int64_t shape[2] = {rows, cols}, x_strides[2] = {0, 1};
    opf_tensor x = {d_x, {OPF_DEVICE_CUDA, 0}, 2, OPF_F32, shape, x_strides, 0};
    opf_tensor y = {d_y, {OPF_DEVICE_CUDA, 0}, 2, OPF_F32, shape, NULL, 0};
    opf_status st = opf_op_run_cuda(row("relu"), (const opf_tensor *[]){&x}, (const opf_tensor *[]){&y}, NULL, stream);
    if (CHECK(st == OPF_OK, "relu [65537, 65536]: %s (%s)", opf_status_name(st), opf_last_error())) {
        sync_stream();
        float *want = xmalloc((size_t)cols * sizeof(float));
        int64_t hx[1] = {cols};
        opf_tensor cx = opf_tensor_make(h_x, OPF_F32, 1, hx), cy = opf_tensor_make(want, OPF_F32, 1, hx);
        CHECK(opf_relu(&cx, &cy) == OPF_OK, "CPU relu: %s", opf_last_error());
        static const int64_t check_rows[] = {0, 1, 65535, 65536};
        for (size_t k = 0; k < sizeof check_rows / sizeof check_rows[0]; k++) {
            CUDA_OK(cudaMemcpy(h_y, d_y + check_rows[k] * cols, (size_t)cols * sizeof(float), cudaMemcpyDeviceToHost));
            char ctx[64];
            snprintf(ctx, sizeof ctx, "relu [65537, 65536] row %lld", (long long)check_rows[k]);
            check_same_nan_aware(h_y, want, (size_t)cols, sizeof(float), ctx);
        }
        free(want);
    }
    CUDA_OK(cudaFree(d_x));
    CUDA_OK(cudaFree(d_y));
    free(h_x);
    free(h_y);
}

/* ------------------------------------------------------------------------ */
/* A user's file of ops, compiled by nvcc (tests/cuda/user_ops.c)            */
/* ------------------------------------------------------------------------ */

const opf_op_table *opforge_op_table(void); /* OPF_EXPORT_OPS in user_ops.c */

static const char *const user_cuda_rows[] = {"mix_max",    "clamp_",    "lerp_half", "rowsum",
                                             "row_affine", "row_stats", "softmax",   "softmax_team"};

static const opf_op_def *user_row(const char *name) {
    const opf_op_table *t = opforge_op_table();
    const opf_op_def *op = t != NULL ? opf_op_find(t, name) : NULL;
    if (op == NULL) {
        fprintf(stderr, "user row %s missing (%s)\n", name, opf_last_error());
        exit(2);
    }
    return op;
}

TEST(test_user_mix_max) {
    static const opf_attr_value w[] = {{.f = 0.25}, {.f = -3.5}, {.f = 1e30}};
    test_eltwise_row(user_row("mix_max"), w, 3, 2000);
}
TEST(test_user_clamp_inplace) {
    static const opf_attr_value lo_hi[] = {{.f = -1}, {.f = 1}, {.f = 0.5}, {.f = 3e38}};
    test_eltwise_row(user_row("clamp_"), lo_hi, 2, 2001);
}
TEST(test_user_lerp_half) { test_eltwise_row(user_row("lerp_half"), NULL, 0, 2002); }

/* The user's kernels enqueue on the given stream only (captured in global
 * mode, as test_stream_capture does for the built-ins). */
TEST(test_user_stream_capture) {
    const opf_op_def *mix_max = user_row("mix_max"), *clamp = user_row("clamp_");
    for (size_t d = 0; d < 2; d++) {
        opf_dtype dt = dtypes[d];
        int64_t shape[2] = {33, 65};
        rng r = rng_seed(21);
        dview a, b, mix, hi;
        dv_make(&a, dt, 2, shape, TV_CONTIG, 0, 0);
        dv_make(&b, dt, 2, shape, TV_TRANSPOSED, 0, 0);
        dv_make(&mix, dt, 2, shape, TV_CONTIG, 0, 0);
        dv_make(&hi, dt, 2, shape, TV_STEP2, 0, 0);
        tv_fill(&a.h, &r, 1, NULL);
        tv_fill(&b.h, &r, 1, NULL);
        dview *all[] = {&a, &b, &mix, &hi};
        for (int i = 0; i < 4; i++) {
            dv_upload(all[i]);
        }
        opf_attr_value w[1] = {{.f = 0.75}}, lo_hi[2] = {{.f = -0.5}, {.f = 0.5}};
        cudaGraph_t graph = NULL;
        CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
        opf_status st0 = opf_op_run_cuda(mix_max, (const opf_tensor *[]){&a.t, &b.t},
                                         (const opf_tensor *[]){&mix.t, &hi.t}, w, stream);
        opf_status st1 = opf_op_run_cuda(clamp, (const opf_tensor *[]){&hi.t}, NULL, lo_hi, stream);
        cudaError_t err = cudaStreamEndCapture(stream, &graph);
        CHECK(st0 == OPF_OK && st1 == OPF_OK, "%s: %s, %s (%s)", dtype_str(dt), opf_status_name(st0),
              opf_status_name(st1), opf_last_error());
        if (CHECK(err == cudaSuccess, "%s: stream capture failed: %s", dtype_str(dt), cudaGetErrorString(err))) {
            cudaGraphExec_t exec;
            CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
            CUDA_OK(cudaGraphLaunch(exec, stream));
            sync_stream();
            CUDA_OK(cudaGraphExecDestroy(exec));
            CUDA_OK(cudaGraphDestroy(graph));
            CHECK_OK(opf_op_run(mix_max, (const opf_tensor *[]){&a.h.t, &b.h.t},
                                (const opf_tensor *[]){&mix.h.t, &hi.h.t}, w),
                     "cpu mix_max");
            CHECK_OK(opf_op_run(clamp, (const opf_tensor *[]){&hi.h.t}, NULL, lo_hi), "cpu clamp_");
            dview *outs[] = {&mix, &hi};
            for (int i = 0; i < 2; i++) {
                tview back = dv_download(outs[i]);
                unsigned char *got = xcalloc(back.numel, back.elem), *want = xcalloc(back.numel, back.elem);
                tv_gather(&back, got);
                tv_gather(&outs[i]->h, want);
                check_same_nan_aware(got, want, back.numel, back.elem, i == 0 ? "captured mix" : "captured hi");
                free(got);
                free(want);
            }
        } else {
            (void)cudaGetLastError();
        }
        for (int i = 0; i < 4; i++) {
            dv_free(all[i]);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Dense                                                                     */
/* ------------------------------------------------------------------------ */

static double elem_at(const tview *v, size_t i) { return elem_value(tv_at(v, i), v->elem); }

/* Values of a view, in C order, as doubles. */
static double *values(const tview *v) {
    double *out = xcalloc(v->numel, sizeof(double));
    for (size_t i = 0; i < v->numel; i++) {
        out[i] = elem_at(v, i);
    }
    return out;
}

/* Forward error bound of a length-k dot product (plus an addend) computed
 * in two different orders: 2 * (k + 2) * u * sum |terms|. */
static double unit_roundoff(opf_dtype dt) { return dt == OPF_F32 ? 0x1p-24 : 0x1p-53; }

typedef struct dense_shape {
    int64_t n, k, m;
} dense_shape;

static const dense_shape dense_shapes[] = {
    {1, 1, 1}, {1, 33, 65}, {129, 65, 1},  {129, 65, 33},   {7, 0, 5},     {0, 5, 3},
    {5, 3, 0}, {1, 1, 17},  {64, 128, 96}, {257, 300, 130}, {33, 1000, 9},
};

/* The quick set: 1x1x1, M = 1, 129x65x33, K = 0. */
static int dense_shape_quick(size_t si) { return si <= 4 && si != 1; }

typedef struct dense_layouts {
    const char *name;
    tv_layout x, w, b, y;
    int shift; /* of x, w and b */
} dense_layouts;

static const dense_layouts dense_configs[] = {
    {"contiguous", TV_CONTIG, TV_CONTIG, TV_CONTIG, TV_CONTIG, 0},
    {"misaligned", TV_CONTIG, TV_CONTIG, TV_CONTIG, TV_CONTIG, 1},
    {"transposed-x-w", TV_TRANSPOSED, TV_TRANSPOSED, TV_CONTIG, TV_CONTIG, 0},
    {"strided-all", TV_STEP2, TV_NEGATIVE, TV_STEP2, TV_STEP2, 3},
    {"broadcast-x-transposed-y", TV_BROADCAST, TV_CONTIG, TV_NEGATIVE, TV_TRANSPOSED, 0},
};

/* y = dense(x, w, b) on GPU and CPU; returns 1 if both ran. `special`:
 * fill x with specials (NaN/Inf) instead of uniform values. */
static void dense_case(opf_dtype dt, const dense_shape *s, const dense_layouts *L, int has_bias, int relu, rng *r) {
    const opf_op_def *op = row("dense");
    char ctx[256];
    snprintf(ctx, sizeof ctx, "dense %s N=%lld K=%lld M=%lld %s bias=%d relu=%d", dtype_str(dt), (long long)s->n,
             (long long)s->k, (long long)s->m, L->name, has_bias, relu);
    int64_t xs[2] = {s->n, s->k}, ws[2] = {s->k, s->m}, bs[1] = {s->m}, ys[2] = {s->n, s->m};
    dview x, w, b, y;
    dv_make(&x, dt, 2, xs, L->x, 1, L->shift);
    dv_make(&w, dt, 2, ws, L->w, 0, L->shift);
    dv_make(&b, dt, 1, bs, L->b, 2, L->shift);
    dv_make(&y, dt, 2, ys, L->y, 0, 0);
    tv_fill(&x.h, r, 0, NULL);
    tv_fill(&w.h, r, 0, NULL);
    tv_fill(&b.h, r, 0, NULL);
    dv_upload(&x);
    dv_upload(&w);
    dv_upload(&b);
    dv_upload(&y);
    double *xv = values(&x.h), *wv = values(&w.h), *bv = values(&b.h);

    opf_attr_value attrs[1] = {{.i = relu ? OPF_ACT_RELU : OPF_ACT_NONE}};
    const opf_tensor *gin[3] = {&x.t, &w.t, has_bias ? &b.t : NULL}, *gout[1] = {&y.t};
    const opf_tensor *hin[3] = {&x.h.t, &w.h.t, has_bias ? &b.h.t : NULL}, *hout[1] = {&y.h.t};
    opf_status gst = opf_op_run_cuda(op, gin, gout, attrs, stream);
    char msg[512];
    last_error_copy(msg, sizeof msg);
    opf_status cst = opf_op_run(op, hin, hout, attrs);
    CHECK(cst == OPF_OK, "%s: CPU status %s (%s)", ctx, opf_status_name(cst), opf_last_error());
    if (CHECK(gst == OPF_OK, "%s: GPU status %s (%s)", ctx, opf_status_name(gst), msg)) {
        sync_stream();
        size_t n = y.h.numel;
        tview back = dv_download(&y);
        double *got = values(&back), *want = values(&y.h), *tol = xcalloc(n, sizeof(double));
        for (int64_t i = 0; i < s->n; i++) {
            for (int64_t j = 0; j < s->m; j++) {
                double sum = has_bias ? fabs(bv[j]) : 0.0;
                for (int64_t p = 0; p < s->k; p++) {
                    sum += fabs(xv[i * s->k + p] * wv[p * s->m + j]);
                }
                tol[i * s->m + j] = 2.0 * (double)(s->k + 2) * unit_roundoff(dt) * sum;
            }
        }
        CHECK_CLOSE_TOL(got, want, tol, n, "%s", ctx);
        CHECK_TV_GUARDS(&back, "%s: y", ctx);
        free(got);
        free(want);
        free(tol);
    }
    free(xv);
    free(wv);
    free(bv);
    dv_free(&x);
    dv_free(&w);
    dv_free(&b);
    dv_free(&y);
}

TEST(test_dense) {
    rng r = rng_seed(7);
    for (size_t d = 0; d < 2; d++) {
        for (size_t si = 0; si < sizeof dense_shapes / sizeof dense_shapes[0]; si++) {
            if (quick && !dense_shape_quick(si)) {
                continue;
            }
            for (size_t li = 0; li < sizeof dense_configs / sizeof dense_configs[0]; li++) {
                if (quick && li % 2 != 0) {
                    continue;
                }
                for (int bias = 0; bias < 2; bias++) {
                    for (int relu = 0; relu < 2; relu++) {
                        dense_case(dtypes[d], &dense_shapes[si], &dense_configs[li], bias, relu, &r);
                    }
                }
            }
        }
    }
}

/* NaN and Inf through the GEMM: without relu the GPU must give what the CPU
 * gives. With the fused ReLU, a NaN pre-activation is NaN on the CPU; the
 * cuBLASLt epilogue (documented as max(x, 0)) may give 0 — accepted, and
 * reported on a NOTE line. */
TEST(test_dense_nan_inf) {
    const opf_op_def *op = row("dense");
    for (size_t d = 0; d < 2; d++) {
        opf_dtype dt = dtypes[d];
        for (int relu = 0; relu < 2; relu++) {
            int64_t n = 4, k = 8, m = 5;
            int64_t xs[2] = {n, k}, ws[2] = {k, m}, bs[1] = {m}, ys[2] = {n, m};
            dview x, w, b, y;
            rng r = rng_seed(99);
            dv_make(&x, dt, 2, xs, TV_CONTIG, 0, 0);
            dv_make(&w, dt, 2, ws, TV_CONTIG, 0, 0);
            dv_make(&b, dt, 1, bs, TV_CONTIG, 0, 0);
            dv_make(&y, dt, 2, ys, TV_CONTIG, 0, 0);
            tv_fill(&x.h, &r, 0, NULL);
            tv_fill(&w.h, &r, 0, NULL);
            tv_fill(&b.h, &r, 0, NULL);
            /* row 0: a NaN; row 1: +Inf; row 2: -Inf (times w[0][j] of either sign) */
            double specials[3] = {NAN, INFINITY, -INFINITY};
            for (int i = 0; i < 3; i++) {
                void *p = tv_at(&x.h, (size_t)(i * k));
                if (dt == OPF_F32) {
                    float f = (float)specials[i];
                    memcpy(p, &f, sizeof f);
                } else {
                    memcpy(p, &specials[i], sizeof(double));
                }
            }
            dv_upload(&x);
            dv_upload(&w);
            dv_upload(&b);
            opf_attr_value attrs[1] = {{.i = relu ? OPF_ACT_RELU : OPF_ACT_NONE}};
            opf_status gst = opf_op_run_cuda(op, (const opf_tensor *[]){&x.t, &w.t, &b.t}, (const opf_tensor *[]){&y.t},
                                             attrs, stream);
            CHECK_OK(gst, "dense nan/inf GPU");
            CHECK_OK(
                opf_op_run(op, (const opf_tensor *[]){&x.h.t, &w.h.t, &b.h.t}, (const opf_tensor *[]){&y.h.t}, attrs),
                "dense nan/inf CPU");
            if (gst == OPF_OK) {
                sync_stream();
                tview back = dv_download(&y);
                double *got = values(&back), *want = values(&y.h);
                int nan_to_zero = 0;
                for (int64_t i = 0; i < n * m; i++) {
                    if (isnan(want[i]) && got[i] == 0.0 && relu) {
                        nan_to_zero++;
                        got[i] = want[i]; /* accepted: see above */
                    }
                }
                double *tol = xcalloc((size_t)(n * m), sizeof(double));
                for (int64_t i = 0; i < n * m; i++) {
                    tol[i] = 1e-4 * (fabs(want[i]) + 1.0);
                }
                CHECK_CLOSE_TOL(got, want, tol, (size_t)(n * m), "dense %s relu=%d with NaN/Inf inputs", dtype_str(dt),
                                relu);
                if (relu) {
                    printf("NOTE dense %s relu: a NaN pre-activation gives %s on the GPU (%d elements)\n",
                           dtype_str(dt),
                           nan_to_zero ? "0 (cuBLASLt epilogue max(x, 0); the CPU gives NaN)" : "NaN, as on the CPU",
                           nan_to_zero);
                }
                free(got);
                free(want);
                free(tol);
            }
            dv_free(&x);
            dv_free(&w);
            dv_free(&b);
            dv_free(&y);
        }
    }
}

/* dense_grad with outputs selected by `mask` (1 dx, 2 dw, 4 db). */
static void dense_grad_case(opf_dtype dt, const dense_shape *s, const dense_layouts *L, int relu, int mask, rng *r) {
    const opf_op_def *op = row("dense_grad");
    char ctx[256];
    snprintf(ctx, sizeof ctx, "dense_grad %s N=%lld K=%lld M=%lld %s relu=%d outputs=%s%s%s", dtype_str(dt),
             (long long)s->n, (long long)s->k, (long long)s->m, L->name, relu, mask & 1 ? "dx," : "",
             mask & 2 ? "dw," : "", mask & 4 ? "db" : "");
    int64_t dys[2] = {s->n, s->m}, xs[2] = {s->n, s->k}, ws[2] = {s->k, s->m}, bs[1] = {s->m};
    dview dy, x, w, y, dx, dw, db;
    /* inputs: dy as x's layout, y as w's; outputs: dx as y's layout, dw contiguous, db as b's */
    dv_make(&dy, dt, 2, dys, L->x == TV_BROADCAST ? TV_CONTIG : L->x, 1, L->shift);
    dv_make(&x, dt, 2, xs, L->x, 0, L->shift);
    dv_make(&w, dt, 2, ws, L->w, 0, 0);
    dv_make(&y, dt, 2, dys, L->w, 0, 0);
    dv_make(&dx, dt, 2, xs, L->y, 0, 0);
    dv_make(&dw, dt, 2, ws, TV_CONTIG, 0, L->shift);
    dv_make(&db, dt, 1, bs, L->b, 0, 0);
    tv_fill(&dy.h, r, 0, NULL);
    tv_fill(&x.h, r, 0, NULL);
    tv_fill(&w.h, r, 0, NULL);
    tv_fill(&y.h, r, 0, NULL);
    dview *all[7] = {&dy, &x, &w, &y, &dx, &dw, &db};
    for (int i = 0; i < 7; i++) {
        dv_upload(all[i]);
    }
    double *dyv = values(&dy.h), *xv = values(&x.h), *wv = values(&w.h);

    opf_attr_value attrs[1] = {{.i = relu ? OPF_ACT_RELU : OPF_ACT_NONE}};
    const opf_tensor *gin[4] = {&dy.t, &x.t, &w.t, relu ? &y.t : NULL};
    const opf_tensor *hin[4] = {&dy.h.t, &x.h.t, &w.h.t, relu ? &y.h.t : NULL};
    const opf_tensor *gout[3] = {mask & 1 ? &dx.t : NULL, mask & 2 ? &dw.t : NULL, mask & 4 ? &db.t : NULL};
    const opf_tensor *hout[3] = {mask & 1 ? &dx.h.t : NULL, mask & 2 ? &dw.h.t : NULL, mask & 4 ? &db.h.t : NULL};
    opf_status gst = opf_op_run_cuda(op, gin, gout, attrs, stream);
    char msg[512];
    last_error_copy(msg, sizeof msg);
    opf_status cst = opf_op_run(op, hin, hout, attrs);
    CHECK(cst == OPF_OK, "%s: CPU status %s (%s)", ctx, opf_status_name(cst), opf_last_error());
    if (CHECK(gst == OPF_OK, "%s: GPU status %s (%s)", ctx, opf_status_name(gst), msg)) {
        sync_stream();
        const int64_t N = s->n, K = s->k, M = s->m;
        const double u = unit_roundoff(dt);
        for (int o = 0; o < 3; o++) {
            if (!(mask & (1 << o))) {
                continue;
            }
            dview *v = o == 0 ? &dx : (o == 1 ? &dw : &db);
            tview back = dv_download(v);
            double *got = values(&back), *want = values(&v->h), *tol = xcalloc(v->h.numel, sizeof(double));
            /* bounds from |dz| <= |dy| */
            for (size_t e = 0; e < v->h.numel; e++) {
                double sum = 0.0;
                int64_t inner = 0;
                if (o == 0) { /* dx[i][p] = sum_j dz[i][j] w[p][j] */
                    int64_t i = (int64_t)e / K, p = (int64_t)e % K;
                    for (int64_t j = 0; j < M; j++) {
                        sum += fabs(dyv[i * M + j] * wv[p * M + j]);
                    }
                    inner = M;
                } else if (o == 1) { /* dw[p][j] = sum_i x[i][p] dz[i][j] */
                    int64_t p = (int64_t)e / M, j = (int64_t)e % M;
                    for (int64_t i = 0; i < N; i++) {
                        sum += fabs(xv[i * K + p] * dyv[i * M + j]);
                    }
                    inner = N;
                } else { /* db[j] = sum_i dz[i][j], in double, rounded once */
                    for (int64_t i = 0; i < N; i++) {
                        sum += fabs(dyv[i * M + (int64_t)e]);
                    }
                    tol[e] = 2.0 * (double)(N + 2) * 0x1p-53 * sum + 2.0 * u * fabs(want[e]);
                    continue;
                }
                tol[e] = 2.0 * (double)(inner + 2) * u * sum;
            }
            CHECK_CLOSE_TOL(got, want, tol, v->h.numel, "%s: %s", ctx, o == 0 ? "dx" : (o == 1 ? "dw" : "db"));
            CHECK_TV_GUARDS(&back, "%s: output %d", ctx, o);
            free(got);
            free(want);
            free(tol);
        }
        /* outputs not requested stay untouched */
        for (int o = 0; o < 3; o++) {
            if (mask & (1 << o)) {
                continue;
            }
            dview *v = o == 0 ? &dx : (o == 1 ? &dw : &db);
            tview back = dv_download(v);
            CHECK_BYTES(back.alloc, v->h.alloc_bytes, HARNESS_GUARD_BYTE, "%s: output %d not requested but written",
                        ctx, o);
        }
    }
    free(dyv);
    free(xv);
    free(wv);
    for (int i = 0; i < 7; i++) {
        dv_free(all[i]);
    }
}

TEST(test_dense_grad) {
    rng r = rng_seed(11);
    static const int masks[] = {7, 1, 2, 4, 6, 0};
    for (size_t d = 0; d < 2; d++) {
        for (size_t si = 0; si < sizeof dense_shapes / sizeof dense_shapes[0]; si++) {
            for (size_t li = 0; li < sizeof dense_configs / sizeof dense_configs[0]; li++) {
                for (int relu = 0; relu < 2; relu++) {
                    for (size_t mi = 0; mi < sizeof masks / sizeof masks[0]; mi++) {
                        /* every mask on the first layouts, all outputs on the rest */
                        if ((li > 1 || quick) && masks[mi] != 7) {
                            continue;
                        }
                        if (quick && (!dense_shape_quick(si) || li % 2 != 0)) {
                            continue;
                        }
                        dense_grad_case(dtypes[d], &dense_shapes[si], &dense_configs[li], relu, masks[mi], &r);
                    }
                }
            }
        }
    }
    /* a tall dz: the bias gradient's chunked reduction (several row chunks) */
    dense_shape tall = {3000, 5, 70};
    for (size_t d = 0; d < 2; d++) {
        dense_grad_case(dtypes[d], &tall, &dense_configs[0], 1, 7, &r);
        dense_grad_case(dtypes[d], &tall, &dense_configs[3], 0, 4, &r);
    }
}

/* relu requires y: the same error as on the CPU. */
TEST(test_dense_grad_relu_needs_y) {
    const opf_op_def *op = row("dense_grad");
    int64_t s2[2] = {3, 4}, xs[2] = {3, 2}, ws[2] = {2, 4};
    dview dy, x, w, dx;
    dv_make(&dy, OPF_F32, 2, s2, TV_CONTIG, 0, 0);
    dv_make(&x, OPF_F32, 2, xs, TV_CONTIG, 0, 0);
    dv_make(&w, OPF_F32, 2, ws, TV_CONTIG, 0, 0);
    dv_make(&dx, OPF_F32, 2, xs, TV_CONTIG, 0, 0);
    opf_attr_value attrs[1] = {{.i = OPF_ACT_RELU}};
    opf_status st = opf_op_run_cuda(op, (const opf_tensor *[]){&dy.t, &x.t, &w.t, NULL},
                                    (const opf_tensor *[]){&dx.t, NULL, NULL}, attrs, stream);
    CHECK(st == OPF_E_INVALID, "status %s (%s)", opf_status_name(st), opf_last_error());
    CHECK_CONTAINS(opf_last_error(), "required when activation is relu");
    dv_free(&dy);
    dv_free(&x);
    dv_free(&w);
    dv_free(&dx);
}

/* ------------------------------------------------------------------------ */
/* Streams: everything enqueued on the given stream only                     */
/* ------------------------------------------------------------------------ */

/* Captures relu, add, scale, dense (bias+relu, misaligned, strided output)
 * and dense_grad into a graph in global capture mode — any launch on the
 * legacy default stream, synchronization or non-stream-ordered allocation
 * inside the library makes the capture fail — then replays it and compares. */
TEST(test_stream_capture) {
    for (size_t d = 0; d < 2; d++) {
        opf_dtype dt = dtypes[d];
        int64_t n = 1001, xs2[2] = {37, 29}, ws2[2] = {29, 23}, bs[1] = {23}, ys2[2] = {37, 23};
        int64_t es[1] = {n};
        rng r = rng_seed(5);
        dview a, b, y1, y2, x, w, bias, y, dx, dw, db;
        dv_make(&a, dt, 1, es, TV_CONTIG, 0, 0);
        dv_make(&b, dt, 1, es, TV_CONTIG, 0, 1);
        dv_make(&y1, dt, 1, es, TV_CONTIG, 0, 0);
        dv_make(&y2, dt, 1, es, TV_STEP2, 0, 0);
        dv_make(&x, dt, 2, xs2, TV_CONTIG, 0, 1);
        dv_make(&w, dt, 2, ws2, TV_TRANSPOSED, 0, 0);
        dv_make(&bias, dt, 1, bs, TV_CONTIG, 0, 1);
        dv_make(&y, dt, 2, ys2, TV_STEP2, 0, 0);
        dv_make(&dx, dt, 2, xs2, TV_CONTIG, 0, 0);
        dv_make(&dw, dt, 2, ws2, TV_CONTIG, 0, 0);
        dv_make(&db, dt, 1, bs, TV_CONTIG, 0, 0);
        dview *all[] = {&a, &b, &y1, &y2, &x, &w, &bias, &y, &dx, &dw, &db};
        const int count = (int)(sizeof all / sizeof all[0]);
        tv_fill(&a.h, &r, 1, NULL);
        tv_fill(&b.h, &r, 1, NULL);
        tv_fill(&x.h, &r, 0, NULL);
        tv_fill(&w.h, &r, 0, NULL);
        tv_fill(&bias.h, &r, 0, NULL);
        for (int i = 0; i < count; i++) {
            dv_upload(all[i]);
        }
        opf_attr_value relu_attr[1] = {{.i = OPF_ACT_RELU}}, alpha[1] = {{.f = -1.5}};
        const opf_op_def *relu = row("relu"), *add = row("add"), *scale = row("scale"), *dense = row("dense"),
                         *dense_grad = row("dense_grad");
        /* Each call once outside the capture first (first-use setup: module
         * loading, the cuBLASLt handle), then the same calls captured. */
        for (int pass = 0; pass < 2; pass++) {
            cudaGraph_t graph = NULL;
            if (pass == 1) {
                CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
            }
            opf_status st[5];
            st[0] = opf_op_run_cuda(relu, (const opf_tensor *[]){&a.t}, (const opf_tensor *[]){&y1.t}, NULL, stream);
            st[1] =
                opf_op_run_cuda(add, (const opf_tensor *[]){&y1.t, &b.t}, (const opf_tensor *[]){&y2.t}, NULL, stream);
            st[2] = opf_op_run_cuda(scale, (const opf_tensor *[]){&y2.t}, (const opf_tensor *[]){&y1.t}, alpha, stream);
            st[3] = opf_op_run_cuda(dense, (const opf_tensor *[]){&x.t, &w.t, &bias.t}, (const opf_tensor *[]){&y.t},
                                    relu_attr, stream);
            st[4] = opf_op_run_cuda(dense_grad, (const opf_tensor *[]){&y.t, &x.t, &w.t, &y.t},
                                    (const opf_tensor *[]){&dx.t, &dw.t, &db.t}, relu_attr, stream);
            for (int i = 0; i < 5; i++) {
                CHECK(st[i] == OPF_OK, "%s pass %d call %d: %s (%s)", dtype_str(dt), pass, i, opf_status_name(st[i]),
                      opf_last_error());
            }
            if (pass == 1) {
                cudaError_t err = cudaStreamEndCapture(stream, &graph);
                if (!CHECK(err == cudaSuccess,
                           "%s: stream capture failed: %s — the library used another stream or "
                           "synchronized",
                           dtype_str(dt), cudaGetErrorString(err))) {
                    (void)cudaGetLastError();
                    break;
                }
                /* Reset the outputs, replay, compare with the CPU. */
                dv_upload(&y1);
                dv_upload(&y2);
                dv_upload(&y);
                dv_upload(&dx);
                dv_upload(&dw);
                dv_upload(&db);
                cudaGraphExec_t exec;
                CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
                CUDA_OK(cudaGraphLaunch(exec, stream));
                sync_stream();
                CUDA_OK(cudaGraphExecDestroy(exec));
                CUDA_OK(cudaGraphDestroy(graph));
            } else {
                sync_stream();
            }
        }
        /* CPU reference of the same sequence. */
        CHECK_OK(opf_op_run(relu, (const opf_tensor *[]){&a.h.t}, (const opf_tensor *[]){&y1.h.t}, NULL), "cpu relu");
        CHECK_OK(opf_op_run(add, (const opf_tensor *[]){&y1.h.t, &b.h.t}, (const opf_tensor *[]){&y2.h.t}, NULL),
                 "cpu add");
        CHECK_OK(opf_op_run(scale, (const opf_tensor *[]){&y2.h.t}, (const opf_tensor *[]){&y1.h.t}, alpha),
                 "cpu scale");
        CHECK_OK(opf_op_run(dense, (const opf_tensor *[]){&x.h.t, &w.h.t, &bias.h.t}, (const opf_tensor *[]){&y.h.t},
                            relu_attr),
                 "cpu dense");
        CHECK_OK(opf_op_run(dense_grad, (const opf_tensor *[]){&y.h.t, &x.h.t, &w.h.t, &y.h.t},
                            (const opf_tensor *[]){&dx.h.t, &dw.h.t, &db.h.t}, relu_attr),
                 "cpu dense_grad");
        dview *exact[] = {&y1, &y2};
        for (int i = 0; i < 2; i++) {
            tview back = dv_download(exact[i]);
            unsigned char *got = xcalloc(back.numel, back.elem), *want = xcalloc(back.numel, back.elem);
            tv_gather(&back, got);
            tv_gather(&exact[i]->h, want);
            check_same_nan_aware(got, want, back.numel, back.elem, i == 0 ? "captured scale" : "captured add");
            free(got);
            free(want);
        }
        dview *gemm[] = {&y, &dx, &dw, &db};
        const char *names[] = {"captured dense", "captured dx", "captured dw", "captured db"};
        for (int i = 0; i < 4; i++) {
            tview back = dv_download(gemm[i]);
            double *got = values(&back), *want = values(&gemm[i]->h);
            /* loose: the inputs are O(1), inner dims <= 37; dense_grad's dy is
             * the GPU's own y, equal to the CPU's within rounding */
            CHECK_CLOSE_F64(got, want, back.numel, dt == OPF_F32 ? 1e-3 : 1e-10, dt == OPF_F32 ? 1e-3 : 1e-10, "%s %s",
                            names[i], dtype_str(dt));
            free(got);
            free(want);
        }
        for (int i = 0; i < count; i++) {
            dv_free(all[i]);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Row kernels: the CUDA builds of OPF_ROW_KERNEL, one thread per row         */
/* ------------------------------------------------------------------------ */

const opf_op_table *opf_test_myops_table(void); /* examples/ops/myops.c, its OPF_EXPORT_OPS renamed (cuda.mk) */

static const opf_op_def *myops_row(const char *name) {
    const opf_op_table *t = opf_test_myops_table();
    const opf_op_def *op = t != NULL ? opf_op_find(t, name) : NULL;
    if (op == NULL) {
        fprintf(stderr, "myops row %s missing (%s)\n", name, opf_last_error());
        exit(2);
    }
    return op;
}

/* Leading dims ("...") of a call and the size of every named row dim. */
typedef struct row_shape {
    int32_t batch_rank;
    int64_t batch[3];
    int64_t m;
    int big; /* many rows: the grid-stride loop takes several steps */
} row_shape;

/* The last two are for team bodies (OPF_ROW_KERNEL_TEAM): long rows (a team
 * of 256 threads, several elements a thread), and more rows than a team
 * launch with sums over rows has blocks (512), so that rows share a slot. */
static const row_shape row_shapes[] = {
    {0, {0}, 1, 0},    {0, {0}, 100, 0},   {1, {1}, 7, 0},       {1, {5}, 0, 0},        {1, {0}, 5, 0},
    {1, {6}, 33, 0},   {2, {3, 4}, 7, 0},  {2, {4, 1}, 31, 0},   {3, {2, 1, 3}, 17, 0}, {2, {0, 3}, 0, 0},
    {2, {3, 2}, 0, 0}, {1, {10007}, 3, 1}, {2, {2, 3}, 1000, 0}, {1, {1100}, 40, 1},
};

/* Layouts of the batched inputs, the inputs without "..." and the outputs;
 * byte_offset (elements) and device shift of every view. */
typedef struct row_config {
    const char *name;
    tv_layout in, whole, out;
    int offset, shift;
} row_config;

static const row_config row_configs[] = {
    {"contiguous", TV_CONTIG, TV_CONTIG, TV_CONTIG, 0, 0},
    {"misaligned-offset", TV_CONTIG_STRIDES, TV_CONTIG_STRIDES, TV_CONTIG_STRIDES, 3, 1},
    {"transposed-in", TV_TRANSPOSED, TV_NEGATIVE, TV_CONTIG, 0, 0},
    {"step2-in-out", TV_STEP2, TV_STEP2, TV_STEP2, 1, 2},
    {"negative-in-transposed-out", TV_NEGATIVE, TV_TRANSPOSED, TV_TRANSPOSED, 0, 0},
    {"broadcast-in-negative-out", TV_BROADCAST, TV_BROADCAST, TV_NEGATIVE, 2, 3},
};

/* The expected values of one row's outputs from its inputs (as doubles;
 * an absent input is NULL), and each output element's tolerance: |got -
 * want| <= tol; a NaN (or infinite) expectation must be matched exactly. */
typedef void (*row_ref_fn)(opf_dtype dt, int64_t n, const double *const *in, const int64_t *in_len, double *const *out,
                           double *const *tol, const int64_t *out_len, const opf_attr_value *attrs);

static double sum_abs(int64_t n, const double *x) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) {
        s += fabs(x[i]);
    }
    return s;
}

/* Forward error bound of a sum of n terms in dtype dt (any order), plus the
 * double reference's own. */
static double sum_tol(opf_dtype dt, int64_t n, const double *x) {
    return (double)(n + 2) * (unit_roundoff(dt) + 0x1p-53) * sum_abs(n, x);
}

static void ref_rowsum(opf_dtype dt, int64_t n, const double *const *in, const int64_t *in_len, double *const *out,
                       double *const *tol, const int64_t *out_len, const opf_attr_value *attrs) {
    (void)in_len, (void)out_len, (void)attrs;
    double s = 0;
    for (int64_t i = 0; i < n; i++) {
        s += in[0][i];
    }
    out[0][0] = s; /* exactly 0 for an empty row */
    tol[0][0] = sum_tol(dt, n, in[0]);
}

static void ref_rowsum_grad(opf_dtype dt, int64_t n, const double *const *in, const int64_t *in_len, double *const *out,
                            double *const *tol, const int64_t *out_len, const opf_attr_value *attrs) {
    (void)dt, (void)n, (void)in_len, (void)attrs;
    for (int64_t i = 0; i < out_len[0]; i++) {
        out[0][i] = in[0][0];
        tol[0][i] = 0;
    }
}

static void ref_row_affine(opf_dtype dt, int64_t n, const double *const *in, const int64_t *in_len, double *const *out,
                           double *const *tol, const int64_t *out_len, const opf_attr_value *attrs) {
    (void)in_len, (void)out_len;
    const double shift = dt == OPF_F32 ? (double)(float)attrs[0].f : attrs[0].f;
    for (int64_t i = 0; i < n; i++) {
        const double p = in[0][i] * in[1][i], b = in[2] != NULL ? in[2][i] : 0.0;
        out[0][i] = p + b + shift;
        tol[0][i] = 4 * unit_roundoff(dt) * (fabs(p) + fabs(b) + fabs(shift));
    }
}

static void ref_row_stats(opf_dtype dt, int64_t n, const double *const *in, const int64_t *in_len, double *const *out,
                          double *const *tol, const int64_t *out_len, const opf_attr_value *attrs) {
    (void)in_len, (void)out_len, (void)attrs;
    double s = 0, m = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        s += in[0][i];
        m = in[0][i] > m ? in[0][i] : m;
    }
    out[0][0] = n > 0 ? s / (double)n : NAN; /* 0 / 0 */
    tol[0][0] =
        n > 0 ? (sum_tol(dt, n, in[0]) + 2 * unit_roundoff(dt) * sum_abs(n, in[0])) / (double)n : 0; /* and / n */
    out[1][0] = m; /* -inf for an empty row */
    tol[1][0] = 0;
}

static void ref_softmax(opf_dtype dt, int64_t n, const double *const *in, const int64_t *in_len, double *const *out,
                        double *const *tol, const int64_t *out_len, const opf_attr_value *attrs) {
    (void)in_len, (void)out_len, (void)attrs;
    double m = -INFINITY, s = 0;
    for (int64_t i = 0; i < n; i++) {
        m = in[0][i] > m ? in[0][i] : m;
    }
    for (int64_t i = 0; i < n; i++) {
        s += exp(in[0][i] - m);
    }
    for (int64_t i = 0; i < n; i++) {
        out[0][i] = exp(in[0][i] - m) / s;
        /* opf_exp within a few ulp per term, the sum within n ulp, two roundings more */
        tol[0][i] = (double)(2 * n + 16) * unit_roundoff(dt) * out[0][i] + 1e-300;
    }
}

/* The shape of input i of `op` for a row_shape: its leading dims, then m
 * for each of its own dims (a literal size where the signature has one). */
static int32_t row_input_shape(const opf_op_def *op, int32_t i, const row_shape *s, int64_t *shape) {
    const opf_arg_def *a = &op->inputs[i];
    int32_t lead = 0, own = 1;
    if (a->flags & OPF_ARG_BATCHED) {
        lead = s->batch_rank;
        own = a->core_dims;
    } else {
        for (int32_t c = 0; c < op->num_checks; c++) {
            if (op->checks[c].kind == OPF_CHECK_RANK && op->checks[c].a == i) {
                own = op->checks[c].rank;
            }
        }
    }
    for (int32_t d = 0; d < lead; d++) {
        shape[d] = s->batch[d];
    }
    for (int32_t d = lead; d < lead + own; d++) {
        shape[d] = s->m;
    }
    for (int32_t c = 0; c < op->num_checks; c++) {
        const opf_check *k = &op->checks[c];
        if (k->kind == OPF_CHECK_DIM_IS && k->a == i) {
            shape[k->a_dim < 0 ? k->a_dim + lead + own : k->a_dim] = k->rank;
        }
    }
    return lead + own;
}

/* Row r of a C-ordered array of `len`-element rows, or the whole array for
 * an argument without "..." (batched == 0). */
static const double *row_of(const double *v, int batched, int64_t r, int64_t len) {
    return v == NULL ? NULL : v + (batched ? r * len : 0);
}

/* A team body reduces in another order than the CPU builds: where sums of
 * huge values overflow in one order and not in the other, the results
 * differ by more than rounding. NaN and infinities (which propagate the
 * same in any order) stay; finite values of 1e15 or more become +-10. */
static void tame_huge(tview *v) {
    unsigned char *x = xcalloc(v->numel, v->elem);
    tv_gather(v, x);
    for (size_t i = 0; i < v->numel; i++) {
        const double e = elem_value(x + i * v->elem, v->elem);
        if (isfinite(e) && fabs(e) >= 1e15) {
            const float f = e > 0 ? 10.0f : -10.0f;
            const double d = f;
            memcpy(x + i * v->elem, v->elem == sizeof f ? (const void *)&f : (const void *)&d, v->elem);
        }
    }
    tv_scatter(v, x);
    free(x);
}

/* The largest finite |element| of the present inputs. */
static double largest_input(const dview *in, const opf_tensor *const *present, int32_t ni) {
    double most = 0;
    for (int32_t i = 0; i < ni; i++) {
        for (size_t k = 0; present[i] != NULL && k < in[i].h.numel; k++) {
            const double v = fabs(elem_at(&in[i].h, k));
            most = isfinite(v) && v > most ? v : most;
        }
    }
    return most;
}

/* The rows of a call of shape s. */
static int64_t shape_rows(const row_shape *s) {
    int64_t rows = 1;
    for (int32_t d = 0; d < s->batch_rank; d++) {
        rows *= s->batch[d];
    }
    return rows;
}

/* How a team body's results are compared with the CPU build's, whose sums go
 * in another order: an output within (4 m + 64) units of roundoff of its own
 * largest value, a statistic (one element per row, which can cancel to far
 * less than the row's elements) of the largest input; a second-order row's
 * outputs (dd - sum(dd) / M, r^2 dd sb / M, ...: differences of products of
 * up to three inputs, which cancel to rounding noise on a row of equal
 * elements) of the largest input cubed. */
enum { TEAM_NONE = 0, TEAM_FIRST_ORDER = 1, TEAM_SECOND_ORDER = 2 };

/* One call of a row op on the device: the outputs against the same call on
 * the CPU (the same bits, NaN-aware; for a row with a team body, `team` > 0,
 * within check_close_nan_aware's tolerance: see TEAM_FIRST_ORDER), the guard
 * bytes around every view, the
 * inputs left alone, and, with `ref` (uniform inputs), against the scalar
 * reference within its tolerance. `skip` has bit i set to leave optional
 * input i absent. */
static void row_case(const opf_op_def *op, int team, opf_dtype dt, const row_shape *s, const row_config *c,
                     const opf_attr_value *attrs, unsigned skip, int special, row_ref_fn ref, rng *r) {
    char ctx[320], shape_str[96];
    int64_t batch_shape[3] = {s->batch[0], s->batch[1], s->batch[2]};
    snprintf(ctx, sizeof ctx, "%s %s batch %s M=%lld %s%s%s", op->name, dtype_str(dt),
             fmt_shape(shape_str, sizeof shape_str, s->batch_rank, batch_shape), (long long)s->m, c->name,
             skip ? " (optional inputs absent)" : "", special ? " specials" : "");
    const int32_t ni = op->num_inputs, no = op->num_outputs;
    dview in[OPF_MAX_ARGS], out[OPF_MAX_ARGS];
    unsigned char *snap[OPF_MAX_ARGS] = {NULL};
    const opf_tensor *gin[OPF_MAX_ARGS] = {NULL}, *hin[OPF_MAX_ARGS] = {NULL};
    const opf_tensor *gout[OPF_MAX_ARGS] = {NULL}, *hout[OPF_MAX_ARGS] = {NULL};
    for (int32_t i = 0; i < ni; i++) {
        if ((skip >> i) & 1) {
            continue;
        }
        int64_t shape[OPF_MAX_RANK];
        int32_t ndim = row_input_shape(op, i, s, shape);
        tv_layout layout = (op->inputs[i].flags & OPF_ARG_BATCHED) ? c->in : c->whole;
        dv_make(&in[i], dt, ndim, shape, layout, c->offset, c->shift);
        tv_fill(&in[i].h, r, special, NULL);
        if (team && special) {
            tame_huge(&in[i].h);
        }
        dv_upload(&in[i]);
        snap[i] = xmalloc(in[i].h.alloc_bytes);
        memcpy(snap[i], in[i].h.alloc, in[i].h.alloc_bytes);
        gin[i] = &in[i].t;
        hin[i] = &in[i].h.t;
    }
    for (int32_t o = 0; o < no; o++) {
        int32_t ndim;
        int64_t shape[OPF_MAX_RANK];
        opf_status st = opf_op_infer_shape(op, hin, o, &ndim, shape);
        if (!CHECK(st == OPF_OK, "%s: no shape for output %d (%s); give the row a test of its own", ctx, (int)o,
                   opf_last_error())) {
            exit(1);
        }
        dv_make(&out[o], dt, ndim, shape, c->out, c->offset, c->shift);
        dv_upload(&out[o]);
        gout[o] = &out[o].t;
        hout[o] = &out[o].h.t;
    }
    opf_status gst = opf_op_run_cuda(op, gin, gout, attrs, stream);
    char msg[512];
    last_error_copy(msg, sizeof msg);
    opf_status cst = opf_op_run(op, hin, hout, attrs);
    CHECK(cst == OPF_OK, "%s: CPU status %s (%s)", ctx, opf_status_name(cst), opf_last_error());
    if (CHECK(gst == OPF_OK, "%s: GPU status %s (%s)", ctx, opf_status_name(gst), msg)) {
        sync_stream();
        double *got[OPF_MAX_ARGS] = {NULL};
        for (int32_t o = 0; o < no; o++) {
            size_t n = out[o].h.numel, elem = out[o].h.elem;
            unsigned char *g = xcalloc(n, elem), *w = xcalloc(n, elem);
            tview back = dv_download(&out[o]);
            tv_gather(&back, g);
            tv_gather(&out[o].h, w);
            char octx[400];
            snprintf(octx, sizeof octx, "%s: output %s vs the CPU", ctx, op->outputs[o].name);
            if (team) {
                /* one element per row: a statistic, as large as the row's elements may be */
                const int statistic = n > 0 && shape_rows(s) == (int64_t)n;
                const double most = largest_input(in, gin, ni), terms = most * most * most;
                check_close_nan_aware(g, w, n, elem, s->m,
                                      team == TEAM_SECOND_ORDER ? (terms > most ? terms : most)
                                      : statistic               ? most
                                                                : 0.0,
                                      octx);
            } else {
                check_same_nan_aware(g, w, n, elem, octx);
            }
            CHECK_TV_GUARDS(&back, "%s", octx);
            got[o] = values(&back);
            free(g);
            free(w);
        }
        for (int32_t i = 0; i < ni; i++) {
            if (snap[i] != NULL) {
                tview b = dv_download(&in[i]);
                CHECK_SAME_BITS(b.alloc, snap[i], in[i].h.alloc_bytes, 1, "%s: input %s modified", ctx,
                                op->inputs[i].name);
            }
        }
        if (ref != NULL && !special) { /* the scalar reference, row by row */
            int64_t rows = shape_rows(s), in_len[OPF_MAX_ARGS] = {0}, out_len[OPF_MAX_ARGS] = {0};
            double *iv[OPF_MAX_ARGS] = {NULL}, *want[OPF_MAX_ARGS], *tol[OPF_MAX_ARGS];
            for (int32_t i = 0; i < ni; i++) {
                if (gin[i] != NULL) {
                    iv[i] = values(&in[i].h);
                    const int batched = (op->inputs[i].flags & OPF_ARG_BATCHED) != 0;
                    in_len[i] = batched ? (rows > 0 ? (int64_t)in[i].h.numel / rows : 0) : (int64_t)in[i].h.numel;
                }
            }
            for (int32_t o = 0; o < no; o++) {
                out_len[o] = rows > 0 ? (int64_t)out[o].h.numel / rows : 0;
                want[o] = xcalloc(out[o].h.numel + 1, sizeof(double));
                tol[o] = xcalloc(out[o].h.numel + 1, sizeof(double));
            }
            for (int64_t row_i = 0; row_i < rows; row_i++) {
                const double *ri[OPF_MAX_ARGS];
                double *ro[OPF_MAX_ARGS], *rt[OPF_MAX_ARGS];
                for (int32_t i = 0; i < ni; i++) {
                    ri[i] = row_of(iv[i], (op->inputs[i].flags & OPF_ARG_BATCHED) != 0, row_i, in_len[i]);
                }
                for (int32_t o = 0; o < no; o++) {
                    ro[o] = want[o] + row_i * out_len[o];
                    rt[o] = tol[o] + row_i * out_len[o];
                }
                ref(dt, in_len[0], ri, in_len, ro, rt, out_len, attrs);
            }
            for (int32_t o = 0; o < no; o++) {
                for (size_t k = 0; k < out[o].h.numel; k++) {
                    const double g = got[o][k], w = want[o][k];
                    const int ok = (isnan(w) || isinf(w)) ? (isnan(w) ? isnan(g) : g == w) : fabs(g - w) <= tol[o][k];
                    if (!CHECK(ok, "%s: output %s element %zu: %.17g, expected %.17g (tolerance %.3g)", ctx,
                               op->outputs[o].name, k, g, w, tol[o][k])) {
                        break;
                    }
                }
                free(want[o]);
                free(tol[o]);
            }
            for (int32_t i = 0; i < ni; i++) {
                free(iv[i]);
            }
        }
        for (int32_t o = 0; o < no; o++) {
            free(got[o]);
        }
    }
    for (int32_t i = 0; i < ni; i++) {
        free(snap[i]);
        if (gin[i] != NULL) {
            dv_free(&in[i]);
        }
    }
    for (int32_t o = 0; o < no; o++) {
        dv_free(&out[o]);
    }
}

/* Every shape and layout of a row op, both dtypes, special and uniform
 * values, with its optional inputs present and (once) absent. The quick set
 * (and a big shape) runs two layouts a shape: the contiguous one and one
 * other, turning with the shape and the dtype, so that every layout still
 * runs. */
static void test_row_op(const opf_op_def *op, int team, const opf_attr_value *attrs, row_ref_fn ref, uint64_t seed) {
    rng r = rng_seed(seed);
    unsigned optional = 0;
    for (int32_t i = 0; i < op->num_inputs; i++) {
        optional |= (op->inputs[i].flags & OPF_ARG_OPTIONAL) ? 1u << i : 0u;
    }
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
        for (size_t si = 0; si < sizeof row_shapes / sizeof row_shapes[0]; si++) {
            for (size_t ci = 0; ci < sizeof row_configs / sizeof row_configs[0]; ci++) {
                const row_shape *s = &row_shapes[si];
                const size_t other = 1 + (si + d) % (sizeof row_configs / sizeof row_configs[0] - 1);
                if ((s->big || quick) && ci != 0 && ci != other) {
                    continue;
                }
                for (int special = 0; special < 2; special++) {
                    row_case(op, team, dtypes[d], s, &row_configs[ci], attrs, 0, special, ref, &r);
                }
                if (optional != 0) {
                    row_case(op, team, dtypes[d], s, &row_configs[ci], attrs, optional, 0, ref, &r);
                }
            }
        }
    }
}

TEST(test_user_rowsum) { test_row_op(user_row("rowsum"), TEAM_NONE, NULL, ref_rowsum, 3000); }
TEST(test_user_row_affine) {
    opf_attr_value shift[1] = {{.f = 0.375}};
    test_row_op(user_row("row_affine"), TEAM_NONE, shift, ref_row_affine, 3001);
}
TEST(test_user_row_stats) { test_row_op(user_row("row_stats"), TEAM_NONE, NULL, ref_row_stats, 3002); }
TEST(test_user_softmax) { test_row_op(user_row("softmax"), TEAM_NONE, NULL, ref_softmax, 3003); }
TEST(test_user_softmax_team) { test_row_op(user_row("softmax_team"), TEAM_FIRST_ORDER, NULL, ref_softmax, 3006); }
TEST(test_myops_rowsum) { test_row_op(myops_row("rowsum"), TEAM_NONE, NULL, ref_rowsum, 3004); }
TEST(test_myops_rowsum_grad) { test_row_op(myops_row("rowsum_grad"), TEAM_NONE, NULL, ref_rowsum_grad, 3005); }

/* Built-in row ops (those whose declaration names an OPF_ROW_KERNEL): each
 * against its CPU build on every shape and layout, default attributes. Their
 * scalar references live with the CPU tests of each op. */
static int builtin_row_kernel(const opf_op_def *op) { return op->row != NULL && op->row->cuda != NULL; }

/* The built-in rows whose kernel is an OPF_ROW_KERNEL_TEAM (src/ops/softmax.c,
 * rms_norm.c, layer_norm*.c):
 * softmax's, log_softmax's and the norms' forward rows, their gradients, the
 * gradients of those and the forward-mode rows of log_softmax's and rms_norm's
 * second order (layer_norm's stay one thread per row). */
static const struct {
    const char *name;
    int team;
} builtin_team_rows[] = {
    {"softmax", TEAM_FIRST_ORDER},
    {"softmax_grad", TEAM_FIRST_ORDER},
    {"softmax_grad_grad", TEAM_SECOND_ORDER},
    {"log_softmax", TEAM_FIRST_ORDER},
    {"log_softmax_grad", TEAM_FIRST_ORDER},
    {"log_softmax_grad_grad", TEAM_SECOND_ORDER},
    {"log_softmax_grad_grad_jvp", TEAM_SECOND_ORDER},
    {"rms_norm", TEAM_FIRST_ORDER},
    {"rms_norm_grad", TEAM_FIRST_ORDER},
    {"rms_norm_grad_grad", TEAM_SECOND_ORDER},
    {"rms_norm_grad_jvp", TEAM_SECOND_ORDER},
    {"rms_norm_grad_grad_jvp", TEAM_SECOND_ORDER},
    {"rms_norm_grad_grad_jvp_rstd", TEAM_SECOND_ORDER},
    {"rms_norm_grad_grad_jvp_w", TEAM_SECOND_ORDER},
    {"layer_norm", TEAM_FIRST_ORDER},
    {"layer_norm_grad", TEAM_FIRST_ORDER},
    {"layer_norm_grad_grad", TEAM_SECOND_ORDER},
    {"layer_norm_grad_grad_affine", TEAM_SECOND_ORDER},
    {"layer_norm_grad_jvp", TEAM_SECOND_ORDER},
    {"layer_norm_grad_jvp_stats", TEAM_SECOND_ORDER},
    {"layer_norm_grad_grad_jvp", TEAM_SECOND_ORDER},
    {"layer_norm_grad_grad_jvp_mean", TEAM_SECOND_ORDER},
    {"layer_norm_grad_grad_jvp_rstd", TEAM_SECOND_ORDER},
    {"layer_norm_grad_grad_jvp_w", TEAM_SECOND_ORDER},
    {"layer_norm_grad_grad_affine_jvp", TEAM_SECOND_ORDER},
};

/* TEAM_NONE for a row without a team body. */
static int builtin_team_row(const opf_op_def *op) {
    for (size_t i = 0; i < sizeof builtin_team_rows / sizeof builtin_team_rows[0]; i++) {
        if (strcmp(op->name, builtin_team_rows[i].name) == 0) {
            return builtin_team_rows[i].team;
        }
    }
    return TEAM_NONE;
}

/* The list above is the table's: exactly those rows have a team body. */
TEST(test_builtin_team_rows) {
    const opf_op_table *t = opf_builtin_ops();
    for (int64_t i = 0; i < t->num_ops; i++) {
        const opf_op_def *op = t->ops[i];
        const int team = op->row != NULL && op->row->cuda_team != NULL;
        CHECK(team == (builtin_team_row(op) != TEAM_NONE), "%s: %s team body", op->name, team ? "an unlisted" : "no");
    }
}

TEST(test_builtin_row_ops) {
    const opf_op_table *t = opf_builtin_ops();
    for (int64_t i = 0; i < t->num_ops; i++) {
        if (builtin_row_kernel(t->ops[i])) {
            test_row_op(t->ops[i], builtin_team_row(t->ops[i]), NULL, NULL, 3100 + (uint64_t)i);
        }
    }
}

/* opf_op_run_cuda runs a row's own compute_cuda when it names one, else the
 * CUDA build of its row kernel (also for a row written out by hand, whose
 * compute_cuda is NULL); a row kernel without a CUDA build is refused. */
static int own_calls;
static opf_status own_rowsum_cuda(const opf_tensor *const *inputs, const opf_tensor *const *outputs,
                                  const opf_attr_value *attrs, void *s) {
    (void)inputs, (void)outputs, (void)attrs, (void)s;
    own_calls++;
    return OPF_OK;
}

TEST(test_row_dispatch) {
    const opf_op_def *rowsum = user_row("rowsum");
    int64_t xs[2] = {3, 4}, ys[1] = {3};
    dview x, y;
    dv_make(&x, OPF_F64, 2, xs, TV_CONTIG, 0, 0);
    dv_make(&y, OPF_F64, 1, ys, TV_CONTIG, 0, 0);
    rng r = rng_seed(4);
    tv_fill(&x.h, &r, 0, NULL);
    dv_upload(&x);
    const opf_tensor *in[1] = {&x.t}, *out[1] = {&y.t};

    opf_op_def own = *rowsum;
    own.compute_cuda = own_rowsum_cuda;
    own_calls = 0;
    CHECK_OK(opf_op_run_cuda(&own, in, out, NULL, stream), "own compute_cuda");
    CHECK(own_calls == 1, "the row's own compute_cuda ran %d times", own_calls);

    opf_op_def by_hand = *rowsum;
    by_hand.compute_cuda = NULL;
    CHECK_OK(opf_op_run_cuda(&by_hand, in, out, NULL, stream), "hand-written row");
    sync_stream();
    tview back = dv_download(&y);
    for (int64_t i = 0; i < 3; i++) {
        double want = 0, got;
        for (int64_t j = 0; j < 4; j++) {
            want += elem_at(&x.h, (size_t)(i * 4 + j));
        }
        got = elem_at(&back, (size_t)i);
        CHECK(fabs(got - want) <= 1e-15, "hand-written row %lld: %g, expected %g", (long long)i, got, want);
    }

    opf_row_kernel cpu_only = *rowsum->row;
    cpu_only.cuda = NULL;
    by_hand.row = &cpu_only;
    opf_status st = opf_op_run_cuda(&by_hand, in, out, NULL, stream);
    CHECK(st == OPF_E_UNSUPPORTED, "a row kernel without a CUDA build: %s (%s)", opf_status_name(st), opf_last_error());
    CHECK_CONTAINS(opf_last_error(), "cudaops.rowsum");
    CHECK_CONTAINS(opf_last_error(), "no CUDA kernel");

    /* a CPU tensor, two devices, a device that does not exist */
    st = opf_op_run_cuda(rowsum, (const opf_tensor *[]){&x.h.t}, out, NULL, stream);
    CHECK(st == OPF_E_DEVICE, "rowsum, CPU input: %s (%s)", opf_status_name(st), opf_last_error());
    opf_tensor y1 = y.t;
    y1.device.id = 1;
    st = opf_op_run_cuda(rowsum, in, (const opf_tensor *[]){&y1}, NULL, stream);
    CHECK(st == OPF_E_DEVICE, "rowsum, two devices: %s (%s)", opf_status_name(st), opf_last_error());
    opf_tensor xn = x.t, yn = y.t;
    xn.device.id = yn.device.id = device_count + 3;
    st = opf_op_run_cuda(rowsum, (const opf_tensor *[]){&xn}, (const opf_tensor *[]){&yn}, NULL, stream);
    CHECK(st == OPF_E_DEVICE, "rowsum, missing device: %s (%s)", opf_status_name(st), opf_last_error());
    CHECK_CONTAINS(opf_last_error(), "cudaops.rowsum");
    CHECK(cudaGetLastError() == cudaSuccess, "the library left a CUDA error behind");
    dv_free(&x);
    dv_free(&y);
}

/* Row ops, with their gathers, scatters and scratch, captured into a graph
 * in global mode (no launch on the legacy stream, no synchronization),
 * replayed twice, and checked against the scalar references. */
TEST(test_row_stream_capture) {
    const opf_op_def *rowsum = user_row("rowsum"), *affine = user_row("row_affine"), *softmax = user_row("softmax");
    for (size_t d = 0; d < 2; d++) {
        opf_dtype dt = dtypes[d];
        int64_t xs[2] = {9, 13}, ws[1] = {13}, ys[1] = {9};
        rng r = rng_seed(31);
        dview x, w, sum, aff, soft;
        dv_make(&x, dt, 2, xs, TV_TRANSPOSED, 0, 0); /* gathered */
        dv_make(&w, dt, 1, ws, TV_NEGATIVE, 0, 0);   /* gathered once */
        dv_make(&sum, dt, 1, ys, TV_STEP2, 0, 0);
        dv_make(&aff, dt, 2, xs, TV_CONTIG, 0, 0);
        dv_make(&soft, dt, 2, xs, TV_STEP2, 0, 0); /* scattered */
        tv_fill(&x.h, &r, 0, NULL);
        tv_fill(&w.h, &r, 0, NULL);
        dview *all[] = {&x, &w, &sum, &aff, &soft};
        for (int i = 0; i < 5; i++) {
            dv_upload(all[i]);
        }
        opf_attr_value shift[1] = {{.f = -2.5}};
        cudaGraph_t graph = NULL;
        CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
        opf_status st0 =
            opf_op_run_cuda(rowsum, (const opf_tensor *[]){&x.t}, (const opf_tensor *[]){&sum.t}, NULL, stream);
        opf_status st1 = opf_op_run_cuda(affine, (const opf_tensor *[]){&x.t, &w.t, NULL},
                                         (const opf_tensor *[]){&aff.t}, shift, stream);
        opf_status st2 =
            opf_op_run_cuda(softmax, (const opf_tensor *[]){&x.t}, (const opf_tensor *[]){&soft.t}, NULL, stream);
        cudaError_t err = cudaStreamEndCapture(stream, &graph);
        CHECK(st0 == OPF_OK && st1 == OPF_OK && st2 == OPF_OK, "%s: %s, %s, %s (%s)", dtype_str(dt),
              opf_status_name(st0), opf_status_name(st1), opf_status_name(st2), opf_last_error());
        if (CHECK(err == cudaSuccess, "%s: stream capture failed: %s", dtype_str(dt), cudaGetErrorString(err))) {
            cudaGraphExec_t exec;
            CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
            for (int replay = 0; replay < 2; replay++) {
                CUDA_OK(cudaGraphLaunch(exec, stream));
            }
            sync_stream();
            CUDA_OK(cudaGraphExecDestroy(exec));
            CUDA_OK(cudaGraphDestroy(graph));
            double *xv = values(&x.h), *wv = values(&w.h);
            tview bs = dv_download(&sum), ba = dv_download(&aff), bsoft = dv_download(&soft);
            double *gs = values(&bs), *ga = values(&ba), *gsoft = values(&bsoft);
            for (int64_t i = 0; i < 9; i++) {
                const double *xr = xv + i * 13;
                double want[13], tol[13];
                double *o[1] = {want}, *t[1] = {tol};
                const double *ins[3] = {xr, wv, NULL};
                int64_t in_len[3] = {13, 13, 0}, one[1] = {1}, row[1] = {13};
                ref_rowsum(dt, 13, ins, in_len, o, t, one, NULL);
                CHECK(fabs(gs[i] - want[0]) <= tol[0], "captured rowsum %s row %lld: %g, expected %g", dtype_str(dt),
                      (long long)i, gs[i], want[0]);
                ref_row_affine(dt, 13, ins, in_len, o, t, row, shift);
                for (int j = 0; j < 13; j++) {
                    CHECK(fabs(ga[i * 13 + j] - want[j]) <= tol[j], "captured row_affine %s [%lld,%d]", dtype_str(dt),
                          (long long)i, j);
                }
                ref_softmax(dt, 13, ins, in_len, o, t, row, NULL);
                for (int j = 0; j < 13; j++) {
                    CHECK(fabs(gsoft[i * 13 + j] - want[j]) <= tol[j], "captured softmax %s [%lld,%d]", dtype_str(dt),
                          (long long)i, j);
                }
            }
            CHECK_TV_GUARDS(&bsoft, "captured softmax %s", dtype_str(dt));
            CHECK_TV_GUARDS(&bs, "captured rowsum %s", dtype_str(dt));
            free(xv);
            free(wv);
            free(gs);
            free(ga);
            free(gsoft);
        } else {
            (void)cudaGetLastError();
        }
        for (int i = 0; i < 5; i++) {
            dv_free(all[i]);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Errors and the device guard                                               */
/* ------------------------------------------------------------------------ */

TEST(test_errors) {
    const opf_op_def *relu = row("relu"), *add = row("add"), *dense = row("dense");
    int64_t shape[1] = {16};
    dview x, y;
    dv_make(&x, OPF_F32, 1, shape, TV_CONTIG, 0, 0);
    dv_make(&y, OPF_F32, 1, shape, TV_CONTIG, 0, 0);

    /* a CPU tensor */
    opf_status st = opf_op_run_cuda(relu, (const opf_tensor *[]){&x.h.t}, (const opf_tensor *[]){&y.t}, NULL, stream);
    CHECK(st == OPF_E_DEVICE, "CPU input: %s (%s)", opf_status_name(st), opf_last_error());
    CHECK_CONTAINS(opf_last_error(), "cuda");
    st = opf_op_run_cuda(relu, (const opf_tensor *[]){&x.t}, (const opf_tensor *[]){&y.h.t}, NULL, stream);
    CHECK(st == OPF_E_DEVICE, "CPU output: %s (%s)", opf_status_name(st), opf_last_error());

    /* two device ids */
    opf_tensor y1 = y.t;
    y1.device.id = 1;
    st = opf_op_run_cuda(relu, (const opf_tensor *[]){&x.t}, (const opf_tensor *[]){&y1}, NULL, stream);
    CHECK(st == OPF_E_DEVICE, "two devices: %s (%s)", opf_status_name(st), opf_last_error());
    CHECK_CONTAINS(opf_last_error(), "device mismatch");
    st = opf_op_run_cuda(add, (const opf_tensor *[]){&x.t, &y1}, (const opf_tensor *[]){&y.t}, NULL, stream);
    CHECK(st == OPF_E_DEVICE, "two devices (inputs): %s (%s)", opf_status_name(st), opf_last_error());

    /* a device that does not exist: the guard reports it */
    opf_tensor xn = x.t, yn = y.t;
    xn.device.id = yn.device.id = device_count + 3;
    st = opf_op_run_cuda(relu, (const opf_tensor *[]){&xn}, (const opf_tensor *[]){&yn}, NULL, stream);
    CHECK(st == OPF_E_DEVICE, "missing device: %s (%s)", opf_status_name(st), opf_last_error());
    CHECK(cudaGetLastError() == cudaSuccess, "the library left a CUDA error behind");
    int64_t ms[2] = {2, 2};
    dview m1, m2, m3;
    dv_make(&m1, OPF_F32, 2, ms, TV_CONTIG, 0, 0);
    dv_make(&m2, OPF_F32, 2, ms, TV_CONTIG, 0, 0);
    dv_make(&m3, OPF_F32, 2, ms, TV_CONTIG, 0, 0);
    m1.t.device.id = m2.t.device.id = m3.t.device.id = device_count + 3;
    st =
        opf_op_run_cuda(dense, (const opf_tensor *[]){&m1.t, &m2.t, NULL}, (const opf_tensor *[]){&m3.t}, NULL, stream);
    CHECK(st == OPF_E_DEVICE || emulated, "dense, missing device: %s (%s)", opf_status_name(st), opf_last_error());

    /* the current device is restored (switching is only observable with two) */
    int before = -1, after = -1;
    int other = device_count > 1 ? 1 : 0;
    CUDA_OK(cudaSetDevice(other));
    CUDA_OK(cudaGetDevice(&before));
    cudaStream_t s0;
    CUDA_OK(cudaSetDevice(0));
    CUDA_OK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
    CUDA_OK(cudaSetDevice(other));
    dv_upload(&x);
    st = opf_op_run_cuda(relu, (const opf_tensor *[]){&x.t}, (const opf_tensor *[]){&y.t}, NULL, s0);
    CHECK_OK(st, "relu with another device current");
    CUDA_OK(cudaGetDevice(&after));
    CHECK(before == other && after == other, "current device %d before, %d after (expected %d)", before, after, other);
    CUDA_OK(cudaSetDevice(0));
    CUDA_OK(cudaStreamSynchronize(s0));
    CUDA_OK(cudaStreamDestroy(s0));

    dv_free(&m1);
    dv_free(&m2);
    dv_free(&m3);
    dv_free(&x);
    dv_free(&y);
}

/* Every row that declares a CUDA kernel is one this file tests. */
TEST(test_rows_covered) {
    static const char *const tested[] = {"relu",
                                         "relu_",
                                         "relu_grad",
                                         "scale",
                                         "add",
                                         "mul",
                                         "sum_to",
                                         "mul_grad",
                                         "dense",
                                         "dense_grad",
                                         "gelu",
                                         "gelu_grad",
                                         "gelu_grad_grad",
                                         "silu",
                                         "silu_grad",
                                         "silu_grad_grad",
                                         "sigmoid",
                                         "sigmoid_grad",
                                         "sigmoid_grad_grad",
                                         "tanh",
                                         "tanh_grad",
                                         "tanh_grad_grad"};
    const opf_op_table *t = opf_builtin_ops();
    for (int64_t i = 0; i < t->num_ops; i++) {
        if (t->ops[i]->compute_cuda == NULL) {
            continue;
        }
        int found = builtin_row_kernel(t->ops[i]); /* test_builtin_row_ops */
        for (size_t j = 0; j < sizeof tested / sizeof tested[0]; j++) {
            found = found || strcmp(tested[j], t->ops[i]->name) == 0;
        }
        CHECK(found, "row %s has a CUDA kernel that test_cuda.c does not test", t->ops[i]->name);
    }
    const opf_op_table *u = opforge_op_table();
    for (int64_t i = 0; u != NULL && i < u->num_ops; i++) {
        int found = 0;
        for (size_t j = 0; j < sizeof user_cuda_rows / sizeof user_cuda_rows[0]; j++) {
            found = found || strcmp(user_cuda_rows[j], u->ops[i]->name) == 0;
        }
        CHECK(found == (u->ops[i]->compute_cuda != NULL), "user row %s: CUDA kernel %s, tested %s", u->ops[i]->name,
              u->ops[i]->compute_cuda != NULL ? "yes" : "no", found ? "yes" : "no");
    }
}

/* Every row of examples/ops/myops.c has a CUDA build, and its row ops are
 * tested above (its elementwise ones are the tutorial's, tested by the
 * adapters' GPU tests). */
TEST(test_myops_covered) {
    const opf_op_table *t = opf_test_myops_table();
    if (!CHECK(t != NULL, "myops does not resolve: %s", opf_last_error())) {
        return;
    }
    for (int64_t i = 0; i < t->num_ops; i++) {
        const opf_op_def *op = t->ops[i];
        CHECK(op->compute_cuda != NULL, "myops.%s has no CUDA kernel", op->name);
        CHECK(op->row == NULL || strcmp(op->name, "rowsum") == 0 || strcmp(op->name, "rowsum_grad") == 0,
              "myops.%s: a row op test_cuda.c does not test", op->name);
    }
}

/* ------------------------------------------------------------------------ */
/* Without a GPU: the CUDA builds exist, and the nvcc-compiled CPU builds of  */
/* the user's kernels compute what C computes                                */
/* ------------------------------------------------------------------------ */

#define REF_MIX_MAX(T, a, b, w, mix, hi, n)                                                                            \
    for (size_t i = 0; i < (n); i++) {                                                                                 \
        (mix)[i] = (a)[i] + (T)(w) * ((b)[i] - (a)[i]);                                                                \
        (hi)[i] = ((a)[i] > (b)[i] || (a)[i] != (a)[i]) ? (a)[i] : (b)[i];                                             \
    }
#define REF_LERP_HALF(T, a, b, y, n)                                                                                   \
    for (size_t i = 0; i < (n); i++) {                                                                                 \
        (y)[i] = (T)((double)(a)[i] + 0.5 * ((double)(b)[i] - (double)(a)[i]));                                        \
    }
#define REF_CLAMP(T, x, lo, hi, n)                                                                                     \
    for (size_t i = 0; i < (n); i++) {                                                                                 \
        (x)[i] = (x)[i] < (T)(lo) ? (T)(lo) : ((x)[i] > (T)(hi) ? (T)(hi) : (x)[i]);                                   \
    }

TEST(test_cuda_builds_present) {
    static const char *const builtin[] = {"relu",   "relu_",    "relu_grad", "scale", "add",     "mul",
                                          "sum_to", "mul_grad", "gelu",      "silu",  "sigmoid", "tanh"};
    const opf_op_table *t = opf_builtin_ops();
    for (size_t i = 0; i < sizeof builtin / sizeof builtin[0]; i++) {
        const opf_op_def *op = opf_op_find(t, builtin[i]);
        CHECK(op != NULL && op->eltwise != NULL && op->eltwise->cuda != NULL && op->compute_cuda != NULL,
              "built-in %s: no CUDA build of its kernel", builtin[i]);
    }
    const opf_op_table *u = opforge_op_table();
    if (!CHECK(u != NULL, "the user table does not resolve: %s", opf_last_error())) {
        return;
    }
    CHECK_OK(opf_op_table_validate(u), "user table");
    for (size_t i = 0; i < sizeof user_cuda_rows / sizeof user_cuda_rows[0]; i++) {
        const opf_op_def *op = opf_op_find(u, user_cuda_rows[i]);
        const int built = op != NULL && ((op->eltwise != NULL && op->eltwise->cuda != NULL) ||
                                         (op->row != NULL && op->row->cuda != NULL));
        CHECK(built && op->compute_cuda != NULL, "user row %s: no CUDA build of its kernel", user_cuda_rows[i]);
    }
    /* every built-in row kernel was compiled by nvcc (cuda.mk's CUDA_AUTHORED_SRC) */
    for (int64_t i = 0; i < t->num_ops; i++) {
        const opf_op_def *op = t->ops[i];
        CHECK(op->row == NULL || (op->row->cuda != NULL && op->compute_cuda != NULL),
              "built-in %s: no CUDA build of its row kernel", op->name);
    }
    const opf_op_table *m = opf_test_myops_table();
    if (CHECK(m != NULL, "myops does not resolve: %s", opf_last_error())) {
        CHECK_OK(opf_op_table_validate(m), "myops table");
        for (int64_t i = 0; i < m->num_ops; i++) {
            const opf_op_def *op = m->ops[i];
            const int built = op->eltwise != NULL ? op->eltwise->cuda != NULL : op->row->cuda != NULL;
            CHECK(built && op->compute_cuda != NULL, "myops.%s: no CUDA build of its kernel", op->name);
        }
    }
}

TEST(test_user_ops_cpu) {
    enum { N = 1031 };
    rng r = rng_seed(3);
    for (size_t d = 0; d < 2; d++) {
        opf_dtype dt = dtypes[d];
        size_t elem = opf_dtype_size(dt);
        void *a = xmalloc(N * elem), *b = xmalloc(N * elem), *mix = xmalloc(N * elem), *hi = xmalloc(N * elem);
        void *rmix = xmalloc(N * elem), *rhi = xmalloc(N * elem);
        fill_special(&r, dt, a, N);
        fill_special(&r, dt, b, N);
        int64_t shape[1] = {N};
        opf_tensor ta = opf_tensor_make(a, dt, 1, shape), tb = opf_tensor_make(b, dt, 1, shape);
        opf_tensor tm = opf_tensor_make(mix, dt, 1, shape), th = opf_tensor_make(hi, dt, 1, shape);
        const double w = -0.625;
        opf_attr_value attrs[2] = {{.f = w}};
        CHECK_OK(
            opf_op_run(user_row("mix_max"), (const opf_tensor *[]){&ta, &tb}, (const opf_tensor *[]){&tm, &th}, attrs),
            "mix_max");
        if (dt == OPF_F32) {
            REF_MIX_MAX(float, (const float *)a, (const float *)b, w, (float *)rmix, (float *)rhi, (size_t)N);
        } else {
            REF_MIX_MAX(double, (const double *)a, (const double *)b, w, (double *)rmix, (double *)rhi, (size_t)N);
        }
        check_same_nan_aware(mix, rmix, N, elem, dtype_str(dt));
        check_same_nan_aware(hi, rhi, N, elem, dtype_str(dt));

        CHECK_OK(opf_op_run(user_row("lerp_half"), (const opf_tensor *[]){&ta, &tb}, (const opf_tensor *[]){&tm}, NULL),
                 "lerp_half");
        if (dt == OPF_F32) {
            REF_LERP_HALF(float, (const float *)a, (const float *)b, (float *)rmix, (size_t)N);
        } else {
            REF_LERP_HALF(double, (const double *)a, (const double *)b, (double *)rmix, (size_t)N);
        }
        check_same_nan_aware(mix, rmix, N, elem, dtype_str(dt));

        memcpy(rmix, a, N * elem);
        attrs[0].f = -0.5;
        attrs[1].f = 2.0;
        CHECK_OK(opf_op_run(user_row("clamp_"), (const opf_tensor *[]){&ta}, NULL, attrs), "clamp_");
        if (dt == OPF_F32) {
            REF_CLAMP(float, (float *)rmix, -0.5, 2.0, (size_t)N);
        } else {
            REF_CLAMP(double, (double *)rmix, -0.5, 2.0, (size_t)N);
        }
        check_same_nan_aware(a, rmix, N, elem, dtype_str(dt));

        int64_t rs[2] = {3, 5}, ys[1] = {3};
        opf_tensor tx = opf_tensor_make(b, dt, 2, rs), ty = opf_tensor_make(hi, dt, 1, ys);
        CHECK_OK(opf_op_run(user_row("rowsum"), (const opf_tensor *[]){&tx}, (const opf_tensor *[]){&ty}, NULL),
                 "rowsum");
        for (int i = 0; i < 3; i++) {
            double sum = 0, got;
            if (dt == OPF_F32) {
                float s32 = 0;
                for (int j = 0; j < 5; j++) {
                    s32 += ((const float *)b)[i * 5 + j];
                }
                sum = s32;
                got = ((const float *)hi)[i];
            } else {
                for (int j = 0; j < 5; j++) {
                    sum += ((const double *)b)[i * 5 + j];
                }
                got = ((const double *)hi)[i];
            }
            CHECK((got == sum) || (got != got && sum != sum), "rowsum %s row %d: %g, expected %g", dtype_str(dt), i,
                  got, sum);
        }
        free(a);
        free(b);
        free(mix);
        free(hi);
        free(rmix);
        free(rhi);
    }
}

static int run_gpu_tests(void) {
    int dev = 0;
    CUDA_OK(cudaSetDevice(dev));
    struct cudaDeviceProp prop;
    CUDA_OK(cudaGetDeviceProperties(&prop, dev));
    emulated = strcmp(prop.name, "opforge CUDA emulator") == 0;
    printf("test_cuda: %d device(s); device 0: %s (sm_%d%d, %d SMs)%s%s\n", device_count, prop.name, prop.major,
           prop.minor, prop.multiProcessorCount, quick ? "; quick set (OPFORGE_TEST_QUICK)" : "",
           emulated ? "; elementwise and row ops only" : "");
    fflush(stdout);
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    RUN_TEST(test_rows_covered);
    RUN_TEST(test_relu);
    RUN_TEST(test_relu_inplace);
    RUN_TEST(test_relu_grad);
    RUN_TEST(test_scale);
    RUN_TEST(test_add);
    RUN_TEST(test_mul);
    RUN_TEST(test_sum_to_same_shape);
    RUN_TEST(test_broadcast);
    RUN_TEST(test_activations);
    RUN_TEST(test_relu_huge);
    RUN_TEST(test_user_mix_max);
    RUN_TEST(test_user_clamp_inplace);
    RUN_TEST(test_user_lerp_half);
    RUN_TEST(test_user_stream_capture);
    RUN_TEST(test_myops_covered);
    RUN_TEST(test_user_rowsum);
    RUN_TEST(test_user_row_affine);
    RUN_TEST(test_user_row_stats);
    RUN_TEST(test_user_softmax);
    RUN_TEST(test_user_softmax_team);
    RUN_TEST(test_myops_rowsum);
    RUN_TEST(test_myops_rowsum_grad);
    RUN_TEST(test_builtin_team_rows);
    RUN_TEST(test_builtin_row_ops);
    RUN_TEST(test_row_dispatch);
    RUN_TEST(test_row_stream_capture);
    if (!emulated) {
        RUN_TEST(test_dense);
        RUN_TEST(test_dense_nan_inf);
        RUN_TEST(test_dense_grad);
        RUN_TEST(test_dense_grad_relu_needs_y);
        RUN_TEST(test_stream_capture);
    }
    RUN_TEST(test_errors);
    CUDA_OK(cudaStreamDestroy(stream));
    return harness_summary();
}
#endif /* OPF_HAVE_CUDA */

int main(void) {
#ifdef OPF_HAVE_CUDA
    RUN_TEST(test_cuda_builds_present);
    RUN_TEST(test_user_ops_cpu);
#endif
    int count = opf_cuda_device_count();
    if (count == 0) {
#ifdef OPF_HAVE_CUDA
        harness_skip("test_cuda", "no CUDA device or driver (opf_cuda_device_count() == 0)");
#else
        harness_skip("test_cuda", "libopforge built without CUDA (no nvcc, or CUDA=0)");
#endif
        return harness_summary();
    }
#ifdef OPF_HAVE_CUDA
    device_count = count;
    const char *q = getenv("OPFORGE_TEST_QUICK");
    quick = q != NULL && q[0] != '\0' && strcmp(q, "0") != 0;
    return run_gpu_tests();
#else
    return harness_summary();
#endif
}
