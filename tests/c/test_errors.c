/*
 * test_errors.c — every error path: the exact status, a message naming the
 * op and the argument (checked by substring on the essentials), and outputs
 * left untouched. Also the per-thread last error and the small runtime
 * functions (status and dtype names, version, thread count).
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* Checks status and that the message holds every given substring. */
#define EXPECT_ERROR(call, status, ...) expect_error(__FILE__, __LINE__, #call, (call), (status), __VA_ARGS__, NULL)

static int expect_error(const char *file, int line, const char *what, opf_status got, opf_status want, ...) {
    char msg[1024];
    last_error_copy(msg, sizeof msg);
    if (getenv("OPF_TEST_VERBOSE") != NULL) {
        printf("  %s:%d: %s -> %s \"%s\"\n", file, line, what, opf_status_name(got), msg);
    }
    int ok = 1;
    if (got != want) {
        harness_fail(file, line, what, "status %s, want %s; message \"%s\"", opf_status_name(got),
                     opf_status_name(want), msg);
        ok = 0;
    }
    va_list ap;
    va_start(ap, want);
    for (const char *needle = va_arg(ap, const char *); needle != NULL; needle = va_arg(ap, const char *)) {
        if (strstr(msg, needle) == NULL) {
            harness_fail(file, line, what, "message \"%s\" does not contain \"%s\"", msg, needle);
            ok = 0;
        }
    }
    va_end(ap);
    return ok;
}

/* Scratch storage to point tensors at (aligned for float64 too). */
typedef struct scratch {
    _Alignas(64) float v[64];
} scratch;

static const int64_t s23[2] = {2, 3}, s32[2] = {3, 2}, s3[1] = {3}, s6[1] = {6};

/* ------------------------------------------------------------------------ */

TEST(test_null_tensors) {
    scratch a = {{0}}, b = {{0}};
    opf_tensor x = opf_tensor_make(a.v, OPF_F32, 2, s23), y = opf_tensor_make(b.v, OPF_F32, 2, s23);
    EXPECT_ERROR(opf_relu(NULL, &y), OPF_E_INVALID, "opforge.relu", "x");
    EXPECT_ERROR(opf_relu(&x, NULL), OPF_E_INVALID, "opforge.relu", "y");
    EXPECT_ERROR(opf_relu_(NULL), OPF_E_INVALID, "opforge.relu_", "x");
    EXPECT_ERROR(opf_relu_grad(NULL, &x, &y), OPF_E_INVALID, "opforge.relu_grad", "dy");
    EXPECT_ERROR(opf_relu_grad(&x, &x, NULL), OPF_E_INVALID, "opforge.relu_grad", "dx");
    EXPECT_ERROR(opf_scale(NULL, 2.0, &y), OPF_E_INVALID, "opforge.scale", "x");
    EXPECT_ERROR(opf_add(&x, NULL, &y), OPF_E_INVALID, "opforge.add", "b");
    EXPECT_ERROR(opf_add(NULL, &x, &y), OPF_E_INVALID, "opforge.add", "a");
    const int64_t s33[2] = {3, 3};
    opf_tensor m = opf_tensor_make(a.v, OPF_F32, 2, s33), o = opf_tensor_make(b.v, OPF_F32, 2, s33);
    EXPECT_ERROR(opf_dense(NULL, &m, NULL, OPF_ACT_NONE, &o), OPF_E_INVALID, "opforge.dense", "x");
    EXPECT_ERROR(opf_dense(&m, NULL, NULL, OPF_ACT_NONE, &o), OPF_E_INVALID, "opforge.dense", "w");
    EXPECT_ERROR(opf_dense(&m, &m, NULL, OPF_ACT_NONE, NULL), OPF_E_INVALID, "opforge.dense", "y");
    EXPECT_ERROR(opf_dense_grad(NULL, &m, &m, NULL, OPF_ACT_NONE, &o, NULL, NULL), OPF_E_INVALID, "opforge.dense_grad",
                 "dy");
    /* relu needs dense's output y to mask the gradient. */
    EXPECT_ERROR(opf_dense_grad(&m, &m, &m, NULL, OPF_ACT_RELU, &o, NULL, NULL), OPF_E_INVALID, "opforge.dense_grad",
                 "y");
    /* opf_op_run itself. */
    EXPECT_ERROR(opf_op_run(NULL, NULL, NULL, NULL), OPF_E_INVALID, "op");
    const opf_op_def *relu = opf_op_find(opf_builtin_ops(), "relu");
    if (CHECK(relu != NULL, "no relu row")) {
        EXPECT_ERROR(opf_op_run(relu, NULL, (const opf_tensor *[]){&y}, NULL), OPF_E_INVALID, "opforge.relu", "x");
        EXPECT_ERROR(opf_op_run(relu, (const opf_tensor *[]){&x}, NULL, NULL), OPF_E_INVALID, "opforge.relu", "y");
    }
}

TEST(test_null_data) {
    scratch b = {{0}};
    opf_tensor x = opf_tensor_make(NULL, OPF_F32, 2, s23), y = opf_tensor_make(b.v, OPF_F32, 2, s23);
    EXPECT_ERROR(opf_relu(&x, &y), OPF_E_INVALID, "opforge.relu", "x");
    EXPECT_ERROR(opf_relu(&y, &x), OPF_E_INVALID, "opforge.relu", "y");
    EXPECT_ERROR(opf_add(&y, &x, &y), OPF_E_INVALID, "opforge.add", "b");
    opf_tensor z = opf_tensor_make(NULL, OPF_F32, 0, NULL); /* 0-d: one element */
    EXPECT_ERROR(opf_relu_(&z), OPF_E_INVALID, "opforge.relu_", "x");
}

TEST(test_dtypes) {
    scratch a = {{0}}, b = {{0}};
    opf_tensor x = opf_tensor_make(a.v, OPF_F16, 2, s23), y = opf_tensor_make(b.v, OPF_F32, 2, s23);
    EXPECT_ERROR(opf_relu(&x, &y), OPF_E_DTYPE, "opforge.relu", "x", "float16");
    x.dtype = OPF_BF16;
    EXPECT_ERROR(opf_relu(&x, &y), OPF_E_DTYPE, "opforge.relu", "x", "bfloat16");
    x.dtype = OPF_DTYPE_INVALID;
    EXPECT_ERROR(opf_scale(&x, 2.0, &y), OPF_E_DTYPE, "opforge.scale", "x");
    x.dtype = OPF_F32;
    y.dtype = OPF_F16;
    EXPECT_ERROR(opf_relu(&x, &y), OPF_E_DTYPE, "opforge.relu", "y");
    /* Mixed float32 / float64. */
    y.dtype = OPF_F64;
    EXPECT_ERROR(opf_relu(&x, &y), OPF_E_DTYPE, "opforge.relu", "y", "float64", "float32");
    opf_tensor a64 = opf_tensor_make(a.v, OPF_F64, 2, s23), b32 = opf_tensor_make(b.v, OPF_F32, 2, s23);
    EXPECT_ERROR(opf_add(&a64, &b32, &a64), OPF_E_DTYPE, "opforge.add", "b", "float32", "float64");
    EXPECT_ERROR(opf_relu_grad(&a64, &a64, &b32), OPF_E_DTYPE, "opforge.relu_grad", "dx");
    const int64_t s22[2] = {2, 2}, s2[1] = {2};
    opf_tensor m32 = opf_tensor_make(a.v, OPF_F32, 2, s22), m64 = opf_tensor_make(b.v + 8, OPF_F64, 2, s22),
               v64 = opf_tensor_make(b.v + 32, OPF_F64, 1, s2), o32 = opf_tensor_make(b.v, OPF_F32, 2, s22);
    EXPECT_ERROR(opf_dense(&m32, &m64, NULL, OPF_ACT_NONE, &o32), OPF_E_DTYPE, "opforge.dense", "w");
    EXPECT_ERROR(opf_dense(&m32, &m32, &v64, OPF_ACT_NONE, &o32), OPF_E_DTYPE, "opforge.dense", "b");
}

TEST(test_bad_shapes) {
    scratch a = {{0}}, b = {{0}};
    int64_t neg[2] = {2, -3};
    opf_tensor x = opf_tensor_make(a.v, OPF_F32, 2, neg), y = opf_tensor_make(b.v, OPF_F32, 2, s23);
    EXPECT_ERROR(opf_relu(&x, &y), OPF_E_SHAPE, "opforge.relu", "x");
    EXPECT_ERROR(opf_relu(&y, &x), OPF_E_SHAPE, "opforge.relu", "y");
    /* Rank above OPF_MAX_RANK, and a negative rank. */
    int64_t ones[OPF_MAX_RANK + 1];
    for (int i = 0; i <= OPF_MAX_RANK; i++) {
        ones[i] = 1;
    }
    opf_tensor big = opf_tensor_make(a.v, OPF_F32, OPF_MAX_RANK + 1, ones);
    EXPECT_ERROR(opf_relu(&big, &big), OPF_E_SHAPE, "opforge.relu", "x");
    EXPECT_ERROR(opf_relu_(&big), OPF_E_SHAPE, "opforge.relu_", "x");
    opf_tensor maxrank = opf_tensor_make(a.v, OPF_F32, OPF_MAX_RANK, ones), mr_out = maxrank;
    mr_out.data = b.v;
    CHECK(opf_relu(&maxrank, &mr_out) == OPF_OK, "rank OPF_MAX_RANK must work: %s", opf_last_error());
    opf_tensor negrank = opf_tensor_make(a.v, OPF_F32, -1, ones);
    EXPECT_ERROR(opf_relu(&negrank, &y), OPF_E_SHAPE, "opforge.relu", "x");
    /* A rank without a shape. */
    opf_tensor noshape = opf_tensor_make(a.v, OPF_F32, 2, NULL);
    opf_status st = opf_relu(&noshape, &y);
    CHECK(st == OPF_E_INVALID || st == OPF_E_SHAPE, "rank 2 with shape NULL: %s", opf_status_name(st));
}

TEST(test_add_shape_mismatch) {
    scratch a = {{0}}, b = {{0}}, c = {{0}};
    for (int i = 0; i < 6; i++) {
        c.v[i] = 42.0f;
    }
    opf_tensor ta = opf_tensor_make(a.v, OPF_F32, 2, s23), tb = opf_tensor_make(b.v, OPF_F32, 2, s32),
               ty = opf_tensor_make(c.v, OPF_F32, 2, s23);
    EXPECT_ERROR(opf_add(&ta, &tb, &ty), OPF_E_SHAPE, "opforge.add", "shape mismatch", "[2,3]", "[3,2]");
    for (int i = 0; i < 6; i++) {
        CHECK(c.v[i] == 42.0f, "y[%d] written by a failed opf_add: %g", i, (double)c.v[i]);
    }
    /* Same element count, different rank. */
    opf_tensor t6 = opf_tensor_make(b.v, OPF_F32, 1, s6);
    EXPECT_ERROR(opf_add(&ta, &t6, &ty), OPF_E_SHAPE, "opforge.add", "[2,3]", "[6]");
    EXPECT_ERROR(opf_relu_grad(&ta, &tb, &ty), OPF_E_SHAPE, "opforge.relu_grad", "[2,3]", "[3,2]");
}

TEST(test_output_shape) {
    scratch a = {{0}}, b = {{0}};
    opf_tensor x = opf_tensor_make(a.v, OPF_F32, 2, s23), y = opf_tensor_make(b.v, OPF_F32, 1, s3);
    EXPECT_ERROR(opf_relu(&x, &y), OPF_E_SHAPE, "opforge.relu", "y", "[3]", "[2,3]");
    opf_tensor y32 = opf_tensor_make(b.v, OPF_F32, 2, s32);
    EXPECT_ERROR(opf_scale(&x, 1.0, &y32), OPF_E_SHAPE, "opforge.scale", "y", "[3,2]", "[2,3]");
    EXPECT_ERROR(opf_add(&x, &x, &y32), OPF_E_SHAPE, "opforge.add", "y");
    opf_tensor y0 = opf_tensor_make(b.v, OPF_F32, 0, NULL);
    EXPECT_ERROR(opf_relu(&x, &y0), OPF_E_SHAPE, "opforge.relu", "y", "[]");
}

TEST(test_dense_shapes) {
    scratch a = {{0}}, b = {{0}}, c = {{0}};
    const int64_t x3[3] = {2, 3, 1}, s34[2] = {3, 4}, s44[2] = {4, 4}, s24[2] = {2, 4}, s4[1] = {4}, s5[1] = {5},
                  s25[2] = {2, 5}, s14[2] = {1, 4};
    opf_tensor x = opf_tensor_make(a.v, OPF_F32, 2, s23), w = opf_tensor_make(b.v, OPF_F32, 2, s34),
               y = opf_tensor_make(c.v, OPF_F32, 2, s24), bias = opf_tensor_make(b.v + 32, OPF_F32, 1, s4);
    CHECK(opf_dense(&x, &w, &bias, OPF_ACT_RELU, &y) == OPF_OK, "valid dense: %s", opf_last_error());

    opf_tensor xr3 = opf_tensor_make(a.v, OPF_F32, 3, x3);
    EXPECT_ERROR(opf_dense(&xr3, &w, NULL, OPF_ACT_NONE, &y), OPF_E_SHAPE, "opforge.dense", "x", "rank");
    opf_tensor w1 = opf_tensor_make(b.v, OPF_F32, 1, s4);
    EXPECT_ERROR(opf_dense(&x, &w1, NULL, OPF_ACT_NONE, &y), OPF_E_SHAPE, "opforge.dense", "w", "rank");
    /* Inner dims: x [2,3], w [4,4]. */
    opf_tensor w44 = opf_tensor_make(b.v, OPF_F32, 2, s44);
    EXPECT_ERROR(opf_dense(&x, &w44, NULL, OPF_ACT_NONE, &y), OPF_E_SHAPE, "opforge.dense", "x", "w", "[2,3]", "[4,4]");
    /* Bias of the wrong length, or rank. */
    opf_tensor b5 = opf_tensor_make(b.v + 32, OPF_F32, 1, s5);
    EXPECT_ERROR(opf_dense(&x, &w, &b5, OPF_ACT_NONE, &y), OPF_E_SHAPE, "opforge.dense", "b", "[5]");
    opf_tensor b14 = opf_tensor_make(b.v + 32, OPF_F32, 2, s14);
    EXPECT_ERROR(opf_dense(&x, &w, &b14, OPF_ACT_NONE, &y), OPF_E_SHAPE, "opforge.dense", "b");
    /* Output of the wrong shape. */
    opf_tensor y25 = opf_tensor_make(c.v, OPF_F32, 2, s25);
    EXPECT_ERROR(opf_dense(&x, &w, NULL, OPF_ACT_NONE, &y25), OPF_E_SHAPE, "opforge.dense", "y", "[2,5]", "[2,4]");
    /* dense_grad: outputs of the wrong shape, inconsistent inputs. */
    opf_tensor dy = opf_tensor_make(c.v, OPF_F32, 2, s24), dx = opf_tensor_make(a.v + 16, OPF_F32, 2, s32);
    EXPECT_ERROR(opf_dense_grad(&dy, &x, &w, NULL, OPF_ACT_NONE, &dx, NULL, NULL), OPF_E_SHAPE, "opforge.dense_grad",
                 "dx", "[3,2]", "[2,3]");
    opf_tensor db5 = opf_tensor_make(a.v + 16, OPF_F32, 1, s5);
    EXPECT_ERROR(opf_dense_grad(&dy, &x, &w, NULL, OPF_ACT_NONE, NULL, NULL, &db5), OPF_E_SHAPE, "opforge.dense_grad",
                 "db", "[5]", "[4]");
    opf_tensor dy25 = opf_tensor_make(c.v, OPF_F32, 2, s25);
    EXPECT_ERROR(opf_dense_grad(&dy25, &x, &w, NULL, OPF_ACT_NONE, NULL, NULL, NULL), OPF_E_SHAPE, "opforge.dense_grad",
                 "dy");
}

/* opf_matmul, an author's GEMM: each argument checked and named. */
OPF_ELTWISE_KERNEL(ew_double, (z), (y), y = 2 * z;)
OPF_ELTWISE_KERNEL(ew_two_in, (a, b), (y), y = a + b;)

TEST(test_matmul_arguments) {
    float *buf = xcalloc(64, sizeof(float));
    const int64_t x3[3] = {2, 3, 1}, s34[2] = {3, 4}, s44[2] = {4, 4}, s24[2] = {2, 4}, s4[1] = {4}, s5[1] = {5},
                  s25[2] = {2, 5};
    opf_tensor x = opf_tensor_make(buf, OPF_F32, 2, s23), w = opf_tensor_make(buf + 8, OPF_F32, 2, s34),
               y = opf_tensor_make(buf + 24, OPF_F32, 2, s24), b = opf_tensor_make(buf + 40, OPF_F32, 1, s4);
    CHECK(opf_matmul(&x, &w, &b, &ew_double, NULL, &y) == OPF_OK, "valid matmul: %s", opf_last_error());
    CHECK(opf_matmul(&x, &w, NULL, NULL, NULL, &y) == OPF_OK, "valid matmul: %s", opf_last_error());
    EXPECT_ERROR(opf_matmul(NULL, &w, NULL, NULL, NULL, &y), OPF_E_INVALID, "opf_matmul", "x is NULL");
    EXPECT_ERROR(opf_matmul(&x, NULL, NULL, NULL, NULL, &y), OPF_E_INVALID, "opf_matmul", "w is NULL");
    EXPECT_ERROR(opf_matmul(&x, &w, NULL, NULL, NULL, NULL), OPF_E_INVALID, "opf_matmul", "y is NULL");
    opf_tensor xr3 = opf_tensor_make(buf, OPF_F32, 3, x3);
    EXPECT_ERROR(opf_matmul(&xr3, &w, NULL, NULL, NULL, &y), OPF_E_SHAPE, "opf_matmul", "x must have rank 2",
                 "[2,3,1]");
    opf_tensor w44 = opf_tensor_make(buf + 8, OPF_F32, 2, s44);
    EXPECT_ERROR(opf_matmul(&x, &w44, NULL, NULL, NULL, &y), OPF_E_SHAPE, "opf_matmul", "x is [2,3]", "w is [4,4]");
    opf_tensor y25 = opf_tensor_make(buf + 24, OPF_F32, 2, s25);
    EXPECT_ERROR(opf_matmul(&x, &w, NULL, NULL, NULL, &y25), OPF_E_SHAPE, "opf_matmul", "y is [2,5]", "must be [2,4]");
    opf_tensor b5 = opf_tensor_make(buf + 40, OPF_F32, 1, s5);
    EXPECT_ERROR(opf_matmul(&x, &w, &b5, NULL, NULL, &y), OPF_E_SHAPE, "opf_matmul", "b is [5]", "must be [4]");
    opf_tensor w64 = opf_tensor_make(buf + 8, OPF_F64, 2, s34);
    EXPECT_ERROR(opf_matmul(&x, &w64, NULL, NULL, NULL, &y), OPF_E_DTYPE, "opf_matmul", "w is float64", "y is float32");
    opf_tensor xh = opf_tensor_make(buf, OPF_F16, 2, s23);
    EXPECT_ERROR(opf_matmul(&xh, &w, NULL, NULL, NULL, &y), OPF_E_DTYPE, "opf_matmul", "x", "float16");
    opf_tensor yc = y;
    yc.device.type = OPF_DEVICE_CUDA;
    EXPECT_ERROR(opf_matmul(&x, &w, NULL, NULL, NULL, &yc), OPF_E_DEVICE, "opf_matmul", "y", "cuda");
    opf_tensor nodata = opf_tensor_make(NULL, OPF_F32, 2, s34);
    EXPECT_ERROR(opf_matmul(&x, &nodata, NULL, NULL, NULL, &y), OPF_E_INVALID, "opf_matmul", "w", "NULL");
    /* y over x, w or b; y over itself */
    opf_tensor y_on_x = opf_tensor_make(buf + 2, OPF_F32, 2, s24);
    EXPECT_ERROR(opf_matmul(&x, &w, NULL, NULL, NULL, &y_on_x), OPF_E_LAYOUT, "opf_matmul", "y overlaps x");
    opf_tensor y_on_b = opf_tensor_make(buf + 36, OPF_F32, 2, s24);
    EXPECT_ERROR(opf_matmul(&x, &w, &b, NULL, NULL, &y_on_b), OPF_E_LAYOUT, "opf_matmul", "y overlaps b");
    const int64_t zero_rows[2] = {0, 1};
    opf_tensor y_folded = y;
    y_folded.strides = zero_rows;
    EXPECT_ERROR(opf_matmul(&x, &w, NULL, NULL, NULL, &y_folded), OPF_E_LAYOUT, "opf_matmul", "y has elements");
    /* the epilogue: one input and one output, with a build for the dtype */
    EXPECT_ERROR(opf_matmul(&x, &w, NULL, &ew_two_in, NULL, &y), OPF_E_INVALID, "opf_matmul", "2 inputs",
                 "expected 1 and 1");
    opf_eltwise_kernel f32_only = ew_double;
    for (int v = 0; v < OPF_NUM_VARIANTS; v++) {
        f32_only.f64[v] = NULL;
    }
    double *dbuf = xcalloc(64, sizeof(double));
    opf_tensor dx = opf_tensor_make(dbuf, OPF_F64, 2, s23), dw = opf_tensor_make(dbuf + 8, OPF_F64, 2, s34),
               dy = opf_tensor_make(dbuf + 24, OPF_F64, 2, s24);
    EXPECT_ERROR(opf_matmul(&dx, &dw, NULL, &f32_only, NULL, &dy), OPF_E_INVALID, "opf_matmul", "no float64 build");
    CHECK(opf_matmul(&x, &w, NULL, &f32_only, NULL, &y) == OPF_OK, "float32 build: %s", opf_last_error());
    /* an error leaves y as it was */
    for (int i = 0; i < 8; i++) {
        buf[24 + i] = -7.0f;
    }
    EXPECT_ERROR(opf_matmul(&x, &w, &b5, NULL, NULL, &y), OPF_E_SHAPE, "opf_matmul");
    for (int i = 0; i < 8; i++) {
        CHECK(buf[24 + i] == -7.0f, "y[%d] written by a refused call", i);
    }
    free(dbuf);
    free(buf);
}

TEST(test_overlap) {
    float *buf = xcalloc(64, sizeof(float));
    /* Output partially overlapping the input: y = x shifted by one element. */
    opf_tensor x = opf_tensor_make(buf, OPF_F32, 1, s6), y = opf_tensor_make(buf + 1, OPF_F32, 1, s6);
    EXPECT_ERROR(opf_relu(&x, &y), OPF_E_LAYOUT, "opforge.relu", "y", "x");
    EXPECT_ERROR(opf_scale(&x, 2.0, &y), OPF_E_LAYOUT, "opforge.scale", "y");
    opf_tensor b = opf_tensor_make(buf + 20, OPF_F32, 1, s6);
    EXPECT_ERROR(opf_add(&b, &x, &y), OPF_E_LAYOUT, "opforge.add", "y");
    /* The same start, another layout: [2,3] vs its transpose over one buffer. */
    const int64_t tr[2] = {1, 2};
    opf_tensor x23 = opf_tensor_make(buf, OPF_F32, 2, s23), y23t = opf_tensor_make(buf, OPF_F32, 2, s23);
    y23t.strides = tr;
    EXPECT_ERROR(opf_relu(&x23, &y23t), OPF_E_LAYOUT, "opforge.relu", "y");
    /* Same pointer through byte_offset: exact alias, allowed. */
    opf_tensor xo = opf_tensor_make(buf + 2, OPF_F32, 1, s6), yo = opf_tensor_make(buf, OPF_F32, 1, s6);
    yo.byte_offset = 2 * sizeof(float);
    CHECK(opf_relu(&xo, &yo) == OPF_OK, "exact alias via byte_offset: %s", opf_last_error());

    /* Outputs that overlap themselves: a zero stride, overlapping strides. */
    const int64_t zero[1] = {0}, s33[2] = {3, 3}, ones[2] = {1, 1};
    opf_tensor yz = opf_tensor_make(buf + 40, OPF_F32, 1, s6);
    yz.strides = zero;
    EXPECT_ERROR(opf_relu(&x, &yz), OPF_E_LAYOUT, "opforge.relu", "y");
    opf_tensor x33 = opf_tensor_make(buf + 20, OPF_F32, 2, s33), y33 = opf_tensor_make(buf + 40, OPF_F32, 2, s33);
    y33.strides = ones;
    EXPECT_ERROR(opf_relu(&x33, &y33), OPF_E_LAYOUT, "opforge.relu", "y");
    EXPECT_ERROR(opf_relu_(&y33), OPF_E_LAYOUT, "opforge.relu_", "x");
    /* Zero-stride inputs are fine (broadcast). */
    opf_tensor xz = opf_tensor_make(buf, OPF_F32, 1, s6), yok = opf_tensor_make(buf + 40, OPF_F32, 1, s6);
    xz.strides = zero;
    CHECK(opf_relu(&xz, &yok) == OPF_OK, "zero-stride input: %s", opf_last_error());

    /* dense cannot run in place: y exactly x, or exactly w. */
    opf_tensor m1 = opf_tensor_make(buf, OPF_F32, 2, s33), m2 = opf_tensor_make(buf + 20, OPF_F32, 2, s33);
    opf_tensor m3 = opf_tensor_make(buf + 40, OPF_F32, 2, s33);
    CHECK(opf_dense(&m1, &m2, NULL, OPF_ACT_NONE, &m3) == OPF_OK, "valid dense: %s", opf_last_error());
    EXPECT_ERROR(opf_dense(&m1, &m2, NULL, OPF_ACT_NONE, &m1), OPF_E_LAYOUT, "opforge.dense", "y", "x");
    EXPECT_ERROR(opf_dense(&m1, &m2, NULL, OPF_ACT_NONE, &m2), OPF_E_LAYOUT, "opforge.dense", "y", "w");
    const int64_t s3v[1] = {3};
    opf_tensor bias = opf_tensor_make(buf + 40, OPF_F32, 1, s3v);
    EXPECT_ERROR(opf_dense(&m1, &m2, &bias, OPF_ACT_NONE, &m3), OPF_E_LAYOUT, "opforge.dense", "y", "b");
    /* dense_grad outputs overlapping each other or an input. */
    opf_tensor g1 = opf_tensor_make(buf, OPF_F32, 2, s33), g2 = opf_tensor_make(buf + 20, OPF_F32, 2, s33);
    float *other = xcalloc(64, sizeof(float));
    opf_tensor o1 = opf_tensor_make(other, OPF_F32, 2, s33), o2 = opf_tensor_make(other + 4, OPF_F32, 2, s33);
    EXPECT_ERROR(opf_dense_grad(&g1, &g1, &g2, NULL, OPF_ACT_NONE, &o1, &o2, NULL), OPF_E_LAYOUT, "opforge.dense_grad",
                 "dx", "dw");
    EXPECT_ERROR(opf_dense_grad(&g1, &g1, &g2, NULL, OPF_ACT_NONE, &g2, NULL, NULL), OPF_E_LAYOUT, "opforge.dense_grad",
                 "dx");
    free(other);
    free(buf);
}

TEST(test_misaligned_data) {
    double *buf = xcalloc(8, sizeof(double));
    opf_tensor x = opf_tensor_make(buf, OPF_F32, 1, s3), y = opf_tensor_make(buf + 4, OPF_F32, 1, s3);
    x.byte_offset = 2; /* not a multiple of sizeof(float) */
    EXPECT_ERROR(opf_relu(&x, &y), OPF_E_LAYOUT, "opforge.relu", "x");
    free(buf);
}

TEST(test_device) {
    scratch a = {{0}}, b = {{0}};
    opf_tensor x = opf_tensor_make(a.v, OPF_F32, 2, s23), y = opf_tensor_make(b.v, OPF_F32, 2, s23);
    x.device.type = OPF_DEVICE_CUDA;
    EXPECT_ERROR(opf_relu(&x, &y), OPF_E_DEVICE, "opforge.relu", "x");
    x.device.type = OPF_DEVICE_CPU;
    y.device.type = OPF_DEVICE_CUDA;
    y.device.id = 1;
    EXPECT_ERROR(opf_add(&x, &x, &y), OPF_E_DEVICE, "opforge.add", "y");
    y.device.type = 99;
    EXPECT_ERROR(opf_relu(&x, &y), OPF_E_DEVICE, "opforge.relu", "y");
}

TEST(test_bad_enum_attr) {
    scratch a = {{0}}, b = {{0}}, c = {{0}};
    const int64_t s22[2] = {2, 2};
    opf_tensor x = opf_tensor_make(a.v, OPF_F32, 2, s22), w = opf_tensor_make(b.v, OPF_F32, 2, s22),
               y = opf_tensor_make(c.v, OPF_F32, 2, s22);
    const opf_op_def *dense = opf_op_find(opf_builtin_ops(), "dense");
    if (!CHECK(dense != NULL, "no dense row")) {
        return;
    }
    const opf_tensor *in[3] = {&x, &w, NULL}, *out[1] = {&y};
    opf_attr_value attrs[OPF_MAX_ATTRS];
    opf_op_default_attrs(dense, attrs);
    CHECK(dense->num_attrs >= 1 && attrs[0].i == OPF_ACT_NONE, "dense's default activation is none");
    attrs[0].i = 2;
    EXPECT_ERROR(opf_op_run(dense, in, out, attrs), OPF_E_INVALID, "opforge.dense", "activation");
    attrs[0].i = -1;
    EXPECT_ERROR(opf_op_run(dense, in, out, attrs), OPF_E_INVALID, "opforge.dense", "activation");
    EXPECT_ERROR(opf_dense(&x, &w, NULL, (opf_activation)7, &y), OPF_E_INVALID, "opforge.dense", "activation");
    scratch d = {{0}};
    opf_tensor dx = opf_tensor_make(d.v, OPF_F32, 2, s22);
    EXPECT_ERROR(opf_dense_grad(&y, &x, &w, &y, (opf_activation)7, &dx, NULL, NULL), OPF_E_INVALID,
                 "opforge.dense_grad", "activation");
}

TEST(test_huge_shapes) {
    scratch a = {{0}}, b = {{0}};
    /* 2^40 x 2^40 elements: the count overflows int64. */
    const int64_t huge[2] = {(int64_t)1 << 40, (int64_t)1 << 40}, max2[2] = {INT64_MAX, 2};
    const int64_t big_bytes[1] = {INT64_MAX / 2}; /* the count fits, the byte size does not */
    opf_tensor x = opf_tensor_make(a.v, OPF_F32, 2, huge), y = opf_tensor_make(b.v, OPF_F32, 2, huge);
    EXPECT_ERROR(opf_relu(&x, &y), OPF_E_SHAPE, "opforge.relu", "x");
    EXPECT_ERROR(opf_relu_(&x), OPF_E_SHAPE, "opforge.relu_", "x");
    opf_tensor x2 = opf_tensor_make(a.v, OPF_F32, 2, max2);
    EXPECT_ERROR(opf_scale(&x2, 1.0, &x2), OPF_E_SHAPE, "opforge.scale", "x");
    opf_tensor x3 = opf_tensor_make(a.v, OPF_F64, 1, big_bytes);
    EXPECT_ERROR(opf_relu_(&x3), OPF_E_SHAPE, "opforge.relu_", "x");
    /* dense with huge N and M but K = 0 would still need an N x M output. */
    const int64_t xn[2] = {(int64_t)1 << 40, 0}, wm[2] = {0, (int64_t)1 << 40},
                  ym[2] = {(int64_t)1 << 40, (int64_t)1 << 40};
    opf_tensor dx = opf_tensor_make(a.v, OPF_F32, 2, xn), dw = opf_tensor_make(b.v, OPF_F32, 2, wm),
               dy = opf_tensor_make(b.v, OPF_F32, 2, ym);
    EXPECT_ERROR(opf_dense(&dx, &dw, NULL, OPF_ACT_NONE, &dy), OPF_E_SHAPE, "opforge.dense", "y");
    /* A stride whose reach overflows. */
    const int64_t s3v[1] = {3}, bigstride[1] = {INT64_MAX / 2};
    opf_tensor xs = opf_tensor_make(a.v, OPF_F32, 1, s3v), ys = opf_tensor_make(b.v, OPF_F32, 1, s3v);
    xs.strides = bigstride;
    EXPECT_ERROR(opf_relu(&xs, &ys), OPF_E_SHAPE, "opforge.relu", "x");
}

/* opf_op_run_cuda never runs a CPU tensor, and a row without a CUDA kernel
 * says so. (The CUDA kernels themselves are tested by tests/cuda.) */
static opf_status no_compute(const opf_tensor *const *in, const opf_tensor *const *out, const opf_attr_value *attrs) {
    (void)in, (void)out, (void)attrs;
    return OPF_E_INTERNAL;
}

TEST(test_op_run_cuda_rejects) {
    CHECK(opf_cuda_device_count() >= 0, "opf_cuda_device_count() = %d", opf_cuda_device_count());
    scratch a = {{0}}, b = {{0}};
    opf_tensor x = opf_tensor_make(a.v, OPF_F32, 2, s23), y = opf_tensor_make(b.v, OPF_F32, 2, s23);
    EXPECT_ERROR(opf_op_run_cuda(NULL, NULL, NULL, NULL, NULL), OPF_E_INVALID, "op");
    const opf_op_def *relu = opf_op_find(opf_builtin_ops(), "relu");
    if (CHECK(relu != NULL, "no relu row")) {
        /* CPU tensors: a device error, or unsupported when built without CUDA. */
        opf_status st = opf_op_run_cuda(relu, (const opf_tensor *[]){&x}, (const opf_tensor *[]){&y}, NULL, NULL);
        CHECK(st == OPF_E_DEVICE || st == OPF_E_UNSUPPORTED, "opf_op_run_cuda(relu) on CPU tensors: %s \"%s\"",
              opf_status_name(st), opf_last_error());
        CHECK_CONTAINS(opf_last_error(), "opforge.relu");
    }
    /* A user row without compute_cuda. */
    static const opf_op_def cpu_only = {
        .name = "cpu_only",
        .doc = "has no CUDA kernel",
        .flags = OPF_OP_ELEMENTWISE,
        .dtypes = OPF_DTYPES_F32,
        .num_inputs = 1,
        .inputs = {{.name = "x", .doc = "x"}},
        .num_outputs = 1,
        .outputs = {{.name = "y", .doc = "y"}},
        .output_shapes = {{.kind = OPF_SHAPE_LIKE, .like = 0}},
        .compute = no_compute,
    };
    x.device.type = y.device.type = OPF_DEVICE_CUDA;
    EXPECT_ERROR(opf_op_run_cuda(&cpu_only, (const opf_tensor *[]){&x}, (const opf_tensor *[]){&y}, NULL, NULL),
                 OPF_E_UNSUPPORTED, "cpu_only: ");
}

/* ------------------------------------------------------------------------ */
/* Per-thread errors and small runtime functions                             */
/* ------------------------------------------------------------------------ */

typedef struct thread_result {
    opf_status status;
    char during[512]; /* the message right after the failing call */
    char after[512];  /* after the main thread's own failure */
} thread_result;

static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static int gate_stage = 0;

static void gate_wait(int stage) {
    pthread_mutex_lock(&gate_lock);
    while (gate_stage < stage) {
        pthread_cond_wait(&gate_cond, &gate_lock);
    }
    pthread_mutex_unlock(&gate_lock);
}

static void gate_open(int stage) {
    pthread_mutex_lock(&gate_lock);
    gate_stage = stage;
    pthread_cond_broadcast(&gate_cond);
    pthread_mutex_unlock(&gate_lock);
}

static void *error_thread(void *arg) {
    thread_result *r = arg;
    float a[6] = {0}, b[6] = {0}, c[6] = {0};
    opf_tensor ta = opf_tensor_make(a, OPF_F32, 2, s23), tb = opf_tensor_make(b, OPF_F32, 2, s32),
               ty = opf_tensor_make(c, OPF_F32, 2, s23);
    r->status = opf_add(&ta, &tb, &ty);
    last_error_copy(r->during, sizeof r->during);
    gate_open(1);
    gate_wait(2); /* the main thread fails in between */
    last_error_copy(r->after, sizeof r->after);
    return NULL;
}

static void *quiet_thread(void *arg) {
    char *msg = arg;
    last_error_copy(msg, 512);
    return NULL;
}

TEST(test_last_error_is_per_thread) {
    gate_stage = 0;
    thread_result r;
    memset(&r, 0, sizeof r);
    pthread_t t;
    if (!CHECK(pthread_create(&t, NULL, error_thread, &r) == 0, "pthread_create")) {
        return;
    }
    gate_wait(1);
    /* The other thread failed: this thread saw no failure. */
    char mine[512];
    last_error_copy(mine, sizeof mine);
    CHECK(strstr(mine, "opforge.add") == NULL, "main thread sees the other thread's error: \"%s\"", mine);
    /* Now fail here, with another message. */
    float v[3] = {0};
    opf_tensor x = opf_tensor_make(v, OPF_F32, 1, s3);
    x.device.type = OPF_DEVICE_CUDA;
    CHECK(opf_relu_(&x) == OPF_E_DEVICE, "relu_ on cuda");
    last_error_copy(mine, sizeof mine);
    gate_open(2);
    pthread_join(t, NULL);

    CHECK(r.status == OPF_E_SHAPE, "thread status %s", opf_status_name(r.status));
    CHECK_CONTAINS(r.during, "opforge.add");
    CHECK_CONTAINS(r.after, "opforge.add");
    CHECK(strstr(r.after, "opforge.relu_") == NULL, "thread sees the main thread's error: \"%s\"", r.after);
    CHECK_CONTAINS(mine, "opforge.relu_");
    char now[512];
    last_error_copy(now, sizeof now);
    CHECK(strcmp(now, mine) == 0, "main thread's message changed after the join: \"%s\" vs \"%s\"", now, mine);

    /* A fresh thread starts with no error. */
    char fresh[512] = "unset";
    pthread_create(&t, NULL, quiet_thread, fresh);
    pthread_join(t, NULL);
    CHECK(strcmp(fresh, "") == 0, "fresh thread's opf_last_error() = \"%s\", want \"\"", fresh);
}

TEST(test_runtime_functions) {
    static const struct {
        opf_status s;
        const char *name;
    } names[] = {
        {OPF_OK, "OPF_OK"},           {OPF_E_INVALID, "OPF_E_INVALID"},         {OPF_E_DTYPE, "OPF_E_DTYPE"},
        {OPF_E_SHAPE, "OPF_E_SHAPE"}, {OPF_E_LAYOUT, "OPF_E_LAYOUT"},           {OPF_E_DEVICE, "OPF_E_DEVICE"},
        {OPF_E_NOMEM, "OPF_E_NOMEM"}, {OPF_E_UNSUPPORTED, "OPF_E_UNSUPPORTED"}, {OPF_E_INTERNAL, "OPF_E_INTERNAL"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *got = opf_status_name(names[i].s);
        CHECK(got != NULL && strcmp(got, names[i].name) == 0, "opf_status_name(%d) = %s", (int)names[i].s,
              got ? got : "(null)");
    }
    CHECK(opf_status_name((opf_status)1234) != NULL, "opf_status_name of an unknown code must not be NULL");

    CHECK(strcmp(opf_dtype_name(OPF_F32), "float32") == 0, "opf_dtype_name(F32) = %s", opf_dtype_name(OPF_F32));
    CHECK(strcmp(opf_dtype_name(OPF_F64), "float64") == 0, "opf_dtype_name(F64) = %s", opf_dtype_name(OPF_F64));
    CHECK(strcmp(opf_dtype_name(OPF_F16), "float16") == 0, "opf_dtype_name(F16) = %s", opf_dtype_name(OPF_F16));
    CHECK(strcmp(opf_dtype_name(OPF_BF16), "bfloat16") == 0, "opf_dtype_name(BF16) = %s", opf_dtype_name(OPF_BF16));
    CHECK(strcmp(opf_dtype_name(OPF_DTYPE_INVALID), "invalid") == 0, "opf_dtype_name(0) = %s",
          opf_dtype_name(OPF_DTYPE_INVALID));
    CHECK(strcmp(opf_dtype_name((opf_dtype)0x12345), "invalid") == 0, "opf_dtype_name(junk)");
    CHECK(opf_dtype_size(OPF_F32) == 4 && opf_dtype_size(OPF_F64) == 8 && opf_dtype_size(OPF_F16) == 2 &&
              opf_dtype_size(OPF_DTYPE_INVALID) == 0,
          "opf_dtype_size");

    char want_version[32];
    snprintf(want_version, sizeof want_version, "%d.%d.%d", OPF_VERSION_MAJOR, OPF_VERSION_MINOR, OPF_VERSION_PATCH);
    CHECK(strcmp(opf_version(), want_version) == 0, "opf_version() = %s, want %s", opf_version(), want_version);

    const int saved = opf_get_num_threads();
    CHECK(saved >= 1, "opf_get_num_threads() = %d", saved);
    const char *env = getenv("OPFORGE_NUM_THREADS");
    if (env != NULL && atoi(env) >= 1 && atoi(env) <= 64) {
        CHECK(saved == atoi(env), "OPFORGE_NUM_THREADS=%s but opf_get_num_threads() = %d", env, saved);
    }
    EXPECT_ERROR(opf_set_num_threads(0), OPF_E_INVALID, "num_threads");
    EXPECT_ERROR(opf_set_num_threads(-3), OPF_E_INVALID, "num_threads");
    CHECK(opf_get_num_threads() == saved, "a rejected opf_set_num_threads changed the count to %d",
          opf_get_num_threads());
    CHECK(opf_set_num_threads(2) == OPF_OK && opf_get_num_threads() == 2, "set 2 threads");
    CHECK(opf_set_num_threads(saved) == OPF_OK, "restore");

    /* A failure leaves a message. */
    float v[3] = {1, -1, 0};
    opf_tensor x = opf_tensor_make(v, OPF_F32, 1, s3);
    x.dtype = OPF_F16;
    CHECK(opf_relu_(&x) == OPF_E_DTYPE, "relu_ f16");
    CHECK(opf_last_error()[0] != '\0', "a failure leaves a message");
}

int main(void) {
    RUN_TEST(test_null_tensors);
    RUN_TEST(test_null_data);
    RUN_TEST(test_dtypes);
    RUN_TEST(test_bad_shapes);
    RUN_TEST(test_add_shape_mismatch);
    RUN_TEST(test_output_shape);
    RUN_TEST(test_dense_shapes);
    RUN_TEST(test_matmul_arguments);
    RUN_TEST(test_overlap);
    RUN_TEST(test_misaligned_data);
    RUN_TEST(test_device);
    RUN_TEST(test_bad_enum_attr);
    RUN_TEST(test_huge_shapes);
    RUN_TEST(test_op_run_cuda_rejects);
    RUN_TEST(test_last_error_is_per_thread);
    RUN_TEST(test_runtime_functions);
    return harness_summary();
}
