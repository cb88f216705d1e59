/*
 * dense.c — the dense layer y = act(x·w + b) and its gradient, on the GEMM
 * driver (gemm.c). x [N,K], w [K,M], b [M], y [N,M]. Also opf_matmul, the
 * same GEMM for authors' compute functions, with an epilogue of their own.
 */
#include <stdlib.h>
#include <string.h>

#include "cuda_kernels.h"
#include "error.h"
#include "gemm.h"
#include "engines.h"
#include "ops.h"
#include "tensor.h"

#define OPF_FLOAT_DTYPES (OPF_DTYPES_F32 | OPF_DTYPES_F64)

static opf_matrix opf_matrix_of(const opf_tensor *t) {
    return (opf_matrix){opf_tensor_base(t), opf_tensor_stride(t, 0), opf_tensor_stride(t, 1)};
}

static opf_matrix opf_transposed(const opf_tensor *t) {
    return (opf_matrix){opf_tensor_base(t), opf_tensor_stride(t, 1), opf_tensor_stride(t, 0)};
}

/* A contiguous copy of a 1-d tensor when it is strided (NULL if no copy is
 * needed); *status is set on allocation failure. */
static void *opf_contiguous_vector(const char *op, const opf_tensor *v, opf_status *status) {
    *status = OPF_OK;
    if (v == NULL || opf_tensor_is_contiguous(v)) {
        return NULL;
    }
    size_t elem = opf_dtype_size(v->dtype);
    char *copy = malloc((size_t)v->shape[0] * elem);
    if (copy == NULL) {
        *status = opf_error(OPF_E_NOMEM, "%s: cannot allocate a copy of the bias", op);
        return NULL;
    }
    for (int64_t i = 0; i < v->shape[0]; i++) {
        memcpy(copy + (size_t)i * elem, opf_tensor_base(v) + i * v->strides[0] * (int64_t)elem, elem);
    }
    return copy;
}

/* --- dense -------------------------------------------------------------------- */

/* y = epilogue(act(x·w + b)) on validated views (dense's and opf_matmul's). */
static opf_status opf_dense_product(const char *op, const opf_tensor *x, const opf_tensor *w, const opf_tensor *b,
                                    int relu, opf_eltwise_fn epilogue, const opf_attr_value *epilogue_attrs,
                                    const opf_tensor *y) {
    opf_status st;
    void *bias_copy = opf_contiguous_vector(op, b, &st);
    if (st != OPF_OK) {
        return st;
    }
    opf_gemm_args g = {
        .dtype = y->dtype,
        .m = x->shape[0],
        .n = w->shape[1],
        .k = x->shape[1],
        .a = opf_matrix_of(x),
        .b = opf_matrix_of(w),
        .c = opf_tensor_base(y),
        .rsc = opf_tensor_stride(y, 0),
        .csc = opf_tensor_stride(y, 1),
        .bias = bias_copy != NULL ? bias_copy : (b != NULL ? opf_tensor_base(b) : NULL),
        .relu = relu,
        .epilogue = epilogue,
        .epilogue_attrs = epilogue_attrs,
    };
    st = opf_gemm(op, &g);
    free(bias_copy);
    return st;
}

static opf_status dense_compute(const opf_tensor *const *in, const opf_tensor *const *out,
                                const opf_attr_value *attrs) {
    return opf_dense_product("dense", in[0], in[1], in[2], attrs[0].i == OPF_ACT_RELU, NULL, NULL, out[0]);
}

const opf_op_decl opf_decl_dense = {
    "dense(x[N,K], w[K,M], b[M]?, *, activation: {none, relu} = none) -> y[N,M]",
    .doc = "Dense (fully connected) layer: y = activation(x @ w + b), bias and activation fused into the GEMM.",
    .arg_docs = "x: inputs [N, K]; w: weights [K, M]; b: bias [M], optional; y: outputs [N, M]; activation: activation "
                "fused into the output",
    .grad = "dx, dw, db = dense_grad(dy, x, w, y)",
    /* y' = mask * (x' @ w + x @ w' + b'): dense_grad_grad's gdy, which does not read its dy (only gx and gw,
     * dropped here, do): y stands in for it. */
    .jvp = "y', _, _ = dense_grad_grad(y, x, w, y, x', w', b')",
    .compute = dense_compute,
    .compute_cuda = OPF_CUDA_KERNEL(opf_cuda_dense_compute),
};

/* --- dense_grad ----------------------------------------------------------------- */

/* db[j] = sum over rows of dz[:, j], accumulated in double in row order. */
static opf_status opf_bias_grad(const opf_tensor *dz, const opf_tensor *db) {
    int64_t n = dz->shape[0], m = dz->shape[1];
    double *sum = calloc((size_t)(m > 0 ? m : 1), sizeof *sum);
    if (sum == NULL) {
        return opf_error(OPF_E_NOMEM, "cannot allocate %lld doubles for db", (long long)m);
    }
    int64_t rs = opf_tensor_stride(dz, 0), cs = opf_tensor_stride(dz, 1), ds = opf_tensor_stride(db, 0);
    if (dz->dtype == OPF_F32) {
        const float *src = (const float *)opf_tensor_base(dz);
        for (int64_t i = 0; i < n; i++) {
            for (int64_t j = 0; j < m; j++) {
                sum[j] += src[i * rs + j * cs];
            }
        }
        float *dst = (float *)opf_tensor_base(db);
        for (int64_t j = 0; j < m; j++) {
            dst[j * ds] = (float)sum[j];
        }
    } else {
        const double *src = (const double *)opf_tensor_base(dz);
        for (int64_t i = 0; i < n; i++) {
            for (int64_t j = 0; j < m; j++) {
                sum[j] += src[i * rs + j * cs];
            }
        }
        double *dst = (double *)opf_tensor_base(db);
        for (int64_t j = 0; j < m; j++) {
            dst[j * ds] = sum[j];
        }
    }
    free(sum);
    return OPF_OK;
}

static opf_status dense_grad_compute(const opf_tensor *const *in, const opf_tensor *const *out,
                                     const opf_attr_value *attrs) {
    const opf_tensor *dy = in[0], *x = in[1], *w = in[2], *y = in[3];
    const opf_tensor *dx = out[0], *dw = out[1], *db = out[2];
    opf_tensor dz = *dy;
    void *masked = NULL;
    if (attrs[0].i == OPF_ACT_RELU) {
        if (y == NULL) {
            return opf_error(OPF_E_INVALID, "y (dense's output) is required when activation is relu");
        }
        /* dz = dy where y > 0: relu's gradient mask, applied by its kernel. */
        size_t bytes = (size_t)opf_tensor_numel(dy) * opf_dtype_size(dy->dtype);
        masked = malloc(bytes > 0 ? bytes : 1);
        if (masked == NULL) {
            return opf_error(OPF_E_NOMEM, "cannot allocate %zu bytes for the masked gradient", bytes);
        }
        dz = opf_tensor_make(masked, dy->dtype, 2, dy->shape);
        opf_status masked_st = opf_op_run(opf_builtin_row(OPF_ROW_relu_grad), (const opf_tensor *[]){dy, y},
                                          (const opf_tensor *[]){&dz}, NULL);
        if (masked_st != OPF_OK) {
            free(masked);
            return masked_st;
        }
    }
    opf_status st = OPF_OK;
    if (dx != NULL) { /* dx = dz · wᵀ */
        opf_gemm_args g = {.dtype = dy->dtype,
                           .m = dz.shape[0],
                           .n = w->shape[0],
                           .k = dz.shape[1],
                           .a = opf_matrix_of(&dz),
                           .b = opf_transposed(w),
                           .c = opf_tensor_base(dx),
                           .rsc = opf_tensor_stride(dx, 0),
                           .csc = opf_tensor_stride(dx, 1)};
        st = opf_gemm("dense_grad", &g);
    }
    if (st == OPF_OK && dw != NULL) { /* dw = xᵀ · dz */
        opf_gemm_args g = {.dtype = dy->dtype,
                           .m = x->shape[1],
                           .n = dz.shape[1],
                           .k = x->shape[0],
                           .a = opf_transposed(x),
                           .b = opf_matrix_of(&dz),
                           .c = opf_tensor_base(dw),
                           .rsc = opf_tensor_stride(dw, 0),
                           .csc = opf_tensor_stride(dw, 1)};
        st = opf_gemm("dense_grad", &g);
    }
    if (st == OPF_OK && db != NULL) {
        st = opf_bias_grad(&dz, db);
    }
    free(masked);
    return st;
}

const opf_op_decl opf_decl_dense_grad = {
    "dense_grad(dy[N,M], x[N,K], w[K,M], y[N,M]?, *, activation: {none, relu} = none) -> (dx[N,K]?, dw[K,M]?, db[M]?)",
    .doc = "Gradients of dense: with dz = dy masked by y > 0 for relu, dx = dz @ w.T, dw = x.T @ dz, "
           "db = dz summed over rows.",
    .arg_docs = "dy: gradient of dense's output [N, M]; x: dense's input [N, K]; w: dense's weights [K, M]; "
                "y: dense's output [N, M], required for relu; dx: gradient of x [N, K]; dw: gradient of w [K, M]; "
                "db: gradient of b [M]; activation: dense's activation",
    .grad = "ddy, dx, dw = dense_grad_grad(dy, x, w, y, ddx, ddw, ddb)",
    /* dx' = dz' @ w.T + dz @ w'.T, dw' = x'.T @ dz + x.T @ dz', db' = sum(dz'), dz' = dy' masked. */
    .jvp = "dx', dw', db' = dense_grad(dy', x, w, y); _, dx', dw' = dense_grad_grad(dy, x, w, y, x', w', _)",
    .compute = dense_grad_compute,
    .compute_cuda = OPF_CUDA_KERNEL(opf_cuda_dense_grad_compute),
};

/* --- dense_grad_grad ------------------------------------------------------------- */

/* C = A·B + bias on the GEMM driver; with no A (k = 0) C = bias, or 0 without
 * one. bias: a contiguous vector or NULL. */
static opf_status opf_product(opf_dtype dtype, int64_t m, int64_t n, int64_t k, opf_matrix a, opf_matrix b,
                              const opf_tensor *c, const void *bias) {
    opf_gemm_args g = {.dtype = dtype,
                       .m = m,
                       .n = n,
                       .k = k,
                       .a = a,
                       .b = b,
                       .c = opf_tensor_base(c),
                       .rsc = opf_tensor_stride(c, 0),
                       .csc = opf_tensor_stride(c, 1),
                       .bias = bias};
    return opf_gemm("dense_grad_grad", &g);
}

/* A contiguous scratch tensor of the shape and dtype of t (data NULL on failure). */
static opf_tensor opf_scratch_like(const opf_tensor *t, opf_status *status) {
    size_t bytes = (size_t)opf_tensor_numel(t) * opf_dtype_size(t->dtype);
    void *data = malloc(bytes > 0 ? bytes : 1);
    *status = data != NULL ? OPF_OK : opf_error(OPF_E_NOMEM, "dense_grad_grad: cannot allocate %zu bytes", bytes);
    return opf_tensor_make(data, t->dtype, t->ndim, t->shape);
}

/* gdy = mask ⊙ (ddx·w + x·ddw + ddb); each term may be absent. */
static opf_status opf_grad_of_dy(const opf_tensor *ddx, const opf_tensor *ddw, const opf_tensor *ddb,
                                 const opf_tensor *x, const opf_tensor *w, const opf_tensor *y, int relu,
                                 const opf_tensor *gdy) {
    const int64_t n = gdy->shape[0], m = gdy->shape[1], k = x->shape[1];
    opf_status st;
    void *bias_copy = opf_contiguous_vector("dense_grad_grad", ddb, &st);
    if (st != OPF_OK) {
        return st;
    }
    const void *bias = bias_copy != NULL ? bias_copy : (ddb != NULL ? opf_tensor_base(ddb) : NULL);
    if (ddx != NULL) { /* ddx·w + ddb */
        st = opf_product(gdy->dtype, n, m, k, opf_matrix_of(ddx), opf_matrix_of(w), gdy, bias);
    } else { /* x·ddw + ddb, or ddb alone (k = 0) */
        st = opf_product(gdy->dtype, n, m, ddw != NULL ? k : 0, opf_matrix_of(x),
                         ddw != NULL ? opf_matrix_of(ddw) : opf_matrix_of(w), gdy, bias);
    }
    free(bias_copy);
    if (st == OPF_OK && ddx != NULL && ddw != NULL) { /* + x·ddw */
        opf_tensor term = opf_scratch_like(gdy, &st);
        if (st != OPF_OK) {
            return st;
        }
        st = opf_product(gdy->dtype, n, m, k, opf_matrix_of(x), opf_matrix_of(ddw), &term, NULL);
        if (st == OPF_OK) {
            st = opf_op_run(opf_builtin_row(OPF_ROW_add), (const opf_tensor *[]){gdy, &term},
                            (const opf_tensor *[]){gdy}, NULL);
        }
        free(term.data);
    }
    if (st == OPF_OK && relu) { /* the mask of y > 0, in place */
        st = opf_op_run(opf_builtin_row(OPF_ROW_relu_grad), (const opf_tensor *[]){gdy, y}, (const opf_tensor *[]){gdy},
                        NULL);
    }
    return st;
}

static opf_status dense_grad_grad_compute(const opf_tensor *const *in, const opf_tensor *const *out,
                                          const opf_attr_value *attrs) {
    const opf_tensor *dy = in[0], *x = in[1], *w = in[2], *y = in[3], *ddx = in[4], *ddw = in[5], *ddb = in[6];
    const opf_tensor *gdy = out[0], *gx = out[1], *gw = out[2];
    const int relu = attrs[0].i == OPF_ACT_RELU;
    if (relu && y == NULL) {
        return opf_error(OPF_E_INVALID, "y (dense's output) is required when activation is relu");
    }
    opf_status st = OPF_OK;
    if (gdy != NULL) {
        st = opf_grad_of_dy(ddx, ddw, ddb, x, w, y, relu, gdy);
    }
    if (st != OPF_OK || (gx == NULL && gw == NULL)) {
        return st;
    }
    /* dz = dy masked by y > 0 (relu) */
    opf_tensor dz = *dy;
    if (relu) {
        dz = opf_scratch_like(dy, &st);
        if (st != OPF_OK) {
            return st;
        }
        st = opf_op_run(opf_builtin_row(OPF_ROW_relu_grad), (const opf_tensor *[]){dy, y}, (const opf_tensor *[]){&dz},
                        NULL);
    }
    const int64_t n = dy->shape[0], m = dy->shape[1], k = x->shape[1];
    if (st == OPF_OK && gx != NULL) { /* gx = dz·ddwᵀ, 0 without ddw */
        st = opf_product(dy->dtype, n, k, ddw != NULL ? m : 0, opf_matrix_of(&dz),
                         ddw != NULL ? opf_transposed(ddw) : opf_transposed(w), gx, NULL);
    }
    if (st == OPF_OK && gw != NULL) { /* gw = ddxᵀ·dz, 0 without ddx */
        st = opf_product(dy->dtype, k, m, ddx != NULL ? n : 0, ddx != NULL ? opf_transposed(ddx) : opf_transposed(x),
                         opf_matrix_of(&dz), gw, NULL);
    }
    if (relu) {
        free(dz.data);
    }
    return st;
}

const opf_op_decl opf_decl_dense_grad_grad = {
    "dense_grad_grad(dy[N,M], x[N,K], w[K,M], y[N,M]?, ddx[N,K]?, ddw[K,M]?, ddb[M]?, *, "
    "activation: {none, relu} = none) -> (gdy[N,M]?, gx[N,K]?, gw[K,M]?)",
    .doc = "Gradients of dense_grad: with dz = dy masked by y > 0 for relu and the gradients ddx, ddw, ddb flowing "
           "into its outputs (absent: zero), gdy = mask * (ddx @ w + x @ ddw + ddb), gx = dz @ ddw.T, "
           "gw = ddx.T @ dz; y gets none (the mask is piecewise constant).",
    /* With cz = dgdy masked: dddx = cz @ w.T + dz @ dgw.T, dddw = x.T @ cz + dgx.T @ dz, dddb = sum(cz),
     * dx = cz @ ddw.T, dw = ddx.T @ cz, ddy = mask * (ddx @ dgw + dgx @ ddw): each term from a row, and each term
     * linear in the ddx or ddw it passes as x or w (absent: the term is zero). */
    .grad =
        "dddx, dddw, dddb = dense_grad(dgdy, x, w, y); _, dddx, dddw = dense_grad_grad(dy, x, w, y, dgx, dgw, _); "
        "_, dx, dw = dense_grad_grad(dgdy, x, w, y, ddx, ddw, _); "
        "ddy, _, _ = dense_grad_grad(dy, ddx, w, y, _, dgw, _); ddy, _, _ = dense_grad_grad(dy, x, ddw, y, dgx, _, _)",
    /* Bilinear: gdy' = mask * (ddx' @ w + ddx @ w' + x' @ ddw + x @ ddw' + ddb'), gx' = dz' @ ddw.T + dz @ ddw'.T,
     * gw' = ddx'.T @ dz + ddx.T @ dz'. */
    .jvp = "gdy', gx', gw' = dense_grad_grad(dy, x, w, y, ddx', ddw', ddb'); "
           "gdy', _, _ = dense_grad_grad(dy, x', w', y, ddx, ddw, _); _, gx', gw' = dense_grad_grad(dy', x, w, y, ddx, "
           "ddw, _)",
    .arg_docs = "dy: gradient of dense's output [N, M]; x: dense's input [N, K]; w: dense's weights [K, M]; "
                "y: dense's output [N, M], required for relu; ddx: gradient of dense_grad's dx [N, K]; "
                "ddw: gradient of dense_grad's dw [K, M]; ddb: gradient of dense_grad's db [M]; "
                "gdy: gradient of dy [N, M]; gx: gradient of x [N, K]; gw: gradient of w [K, M]; "
                "activation: dense's activation",
    .compute = dense_grad_grad_compute,
};

/* --- opf_matmul ------------------------------------------------------------------ */

/* OPF_E_LAYOUT if y shares memory with `other` (NULL: it does not); an answer
 * the overlap query cannot give counts as sharing. */
static opf_status opf_matmul_disjoint(const opf_tensor *y, const opf_tensor *other, const char *name) {
    if (other != NULL && opf_tensors_overlap(y, other) != OPF_DISJOINT) {
        return opf_fail(OPF_E_LAYOUT, "opf_matmul", "y overlaps %s: the product would read what it wrote", name);
    }
    return OPF_OK;
}

opf_status opf_matmul(const opf_tensor *x, const opf_tensor *w, const opf_tensor *b, const opf_eltwise_kernel *epilogue,
                      const opf_attr_value *attrs, const opf_tensor *y) {
    static const char op[] = "opf_matmul";
    opf_clear_error();
    if (x == NULL || w == NULL || y == NULL) {
        return opf_fail(OPF_E_INVALID, op, "%s is NULL; x, w and y are required (b may be NULL)",
                        x == NULL   ? "x"
                        : w == NULL ? "w"
                                    : "y");
    }
    const opf_tensor *args[] = {x, w, b, y};
    const char *names[] = {"x", "w", "b", "y"};
    const int32_t ranks[] = {2, 2, 1, 2};
    for (int i = 0; i < 4; i++) {
        if (args[i] == NULL) {
            continue;
        }
        opf_status st = opf_tensor_check(op, names[i], args[i], OPF_FLOAT_DTYPES, OPF_DEVICE_CPU);
        if (st != OPF_OK) {
            return st;
        }
        char dims[OPF_SHAPE_STR_CAPACITY];
        if (args[i]->ndim != ranks[i]) {
            return opf_fail(OPF_E_SHAPE, op, "%s must have rank %d, got rank %d (%s)", names[i], (int)ranks[i],
                            (int)args[i]->ndim, opf_format_dims(args[i]->ndim, args[i]->shape, dims));
        }
        if (args[i]->dtype != y->dtype) {
            return opf_fail(OPF_E_DTYPE, op, "%s is %s and y is %s: expected one dtype", names[i],
                            opf_dtype_name(args[i]->dtype), opf_dtype_name(y->dtype));
        }
    }
    const int64_t n = x->shape[0], k = x->shape[1], m = w->shape[1];
    char xd[OPF_SHAPE_STR_CAPACITY], wd[OPF_SHAPE_STR_CAPACITY], other[OPF_SHAPE_STR_CAPACITY];
    if (w->shape[0] != k) {
        return opf_fail(OPF_E_SHAPE, op, "shape mismatch: x is %s, w is %s (w's rows must be x's columns, %lld)",
                        opf_format_dims(2, x->shape, xd), opf_format_dims(2, w->shape, wd), (long long)k);
    }
    if (y->shape[0] != n || y->shape[1] != m) {
        return opf_fail(OPF_E_SHAPE, op, "shape mismatch: y is %s; x is %s and w is %s, so y must be [%lld,%lld]",
                        opf_format_dims(2, y->shape, other), opf_format_dims(2, x->shape, xd),
                        opf_format_dims(2, w->shape, wd), (long long)n, (long long)m);
    }
    if (b != NULL && b->shape[0] != m) {
        return opf_fail(OPF_E_SHAPE, op, "shape mismatch: b is %s; w is %s, so b must be [%lld]",
                        opf_format_dims(1, b->shape, other), opf_format_dims(2, w->shape, wd), (long long)m);
    }
    opf_eltwise_fn fn = NULL;
    if (epilogue != NULL) {
        if (epilogue->num_inputs != 1 || epilogue->num_outputs != 1) {
            return opf_fail(OPF_E_INVALID, op, "the epilogue kernel has %d inputs and %d outputs; expected 1 and 1",
                            (int)epilogue->num_inputs, (int)epilogue->num_outputs);
        }
        OPF_PICK_VARIANT(fn, y->dtype == OPF_F32 ? epilogue->f32 : epilogue->f64);
        if (fn == NULL) {
            return opf_fail(OPF_E_INVALID, op, "the epilogue kernel has no %s build", opf_dtype_name(y->dtype));
        }
    }
    if (opf_tensor_numel(y) > 0 && opf_tensor_self_overlaps(y) != OPF_DISJOINT) {
        return opf_fail(OPF_E_LAYOUT, op, "y has elements that share memory (a zero or folding stride)");
    }
    opf_status st = OPF_OK;
    if ((st = opf_matmul_disjoint(y, x, "x")) != OPF_OK || (st = opf_matmul_disjoint(y, w, "w")) != OPF_OK ||
        (st = opf_matmul_disjoint(y, b, "b")) != OPF_OK) {
        return st;
    }
    opf_attr_value values[OPF_MAX_ATTRS];
    memset(values, 0, sizeof values);
    if (attrs != NULL) {
        memcpy(values, attrs, sizeof values);
    }
    return opf_dense_product(op, x, w, b, 0, fn, values, y);
}

/* --- typed entry points ----------------------------------------------------------- */

opf_status opf_dense(const opf_tensor *x, const opf_tensor *w, const opf_tensor *b, opf_activation activation,
                     const opf_tensor *y) {
    return opf_op_run(opf_builtin_row(OPF_ROW_dense), (const opf_tensor *[]){x, w, b}, (const opf_tensor *[]){y},
                      (const opf_attr_value[]){{.i = activation}});
}

opf_status opf_dense_grad(const opf_tensor *dy, const opf_tensor *x, const opf_tensor *w, const opf_tensor *y,
                          opf_activation activation, const opf_tensor *dx, const opf_tensor *dw, const opf_tensor *db) {
    return opf_op_run(opf_builtin_row(OPF_ROW_dense_grad), (const opf_tensor *[]){dy, x, w, y},
                      (const opf_tensor *[]){dx, dw, db}, (const opf_attr_value[]){{.i = activation}});
}
