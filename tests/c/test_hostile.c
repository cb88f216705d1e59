/*
 * test_hostile.c — views and tables a framework can hand over that are
 * legal but extreme, or illegal in ways that must be refused without
 * undefined behaviour: dims whose product overflows, extreme strides and
 * byte offsets, views whose element offsets overflow only when summed, and
 * aliasing between arguments decided element by element (interleaved views
 * that share no element are accepted). Each reproducer found by fuzzing is a
 * test here; `make test-asan` and `make test-asan-clang` run them under
 * ASan + UBSan with gcc and clang.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "reference.h"
#include "tensor.h" /* opf_tensors_overlap, tested directly with mixed element sizes */

#define CHECK_STATUS(call, want)                                                                                       \
    do {                                                                                                               \
        opf_status st_ = (call);                                                                                       \
        CHECK(st_ == (want), "%s: status %s, want %s; message \"%s\"", #call, opf_status_name(st_),                    \
              opf_status_name(want), opf_last_error());                                                                \
    } while (0)

/* A strided float32 view (the strides array must outlive it). */
static opf_tensor view_f32(float *data, int32_t ndim, const int64_t *shape, const int64_t *strides) {
    opf_tensor t = opf_tensor_make(data, OPF_F32, ndim, shape);
    t.strides = strides;
    return t;
}

/* ------------------------------------------------------------------------ */
/* Tensor validation                                                         */
/* ------------------------------------------------------------------------ */

/* An empty tensor whose other dims multiply past int64 used to be accepted
 * and its element count overflowed. It is refused like any tensor whose dims
 * overflow: its C-contiguous strides would not fit in int64 either. */
TEST(test_empty_tensor_with_overflowing_dims) {
    float buf[4] = {0};
    const int64_t last_zero[5] = {70001, 70001, 70001, 70001, 0}, first_zero[5] = {0, 70001, 70001, 70001, 70001};
    const int64_t mid_zero[6] = {3, 0, 70001, 70001, 70001, 70001};
    const int64_t *shapes[] = {last_zero, first_zero, mid_zero};
    const int32_t ranks[] = {5, 5, 6};
    for (int i = 0; i < 3; i++) {
        opf_tensor x = opf_tensor_make(buf, OPF_F32, ranks[i], shapes[i]);
        opf_tensor y = opf_tensor_make(buf, OPF_F32, ranks[i], shapes[i]);
        CHECK_STATUS(opf_relu(&x, &y), OPF_E_SHAPE);
        CHECK_CONTAINS(opf_last_error(), "too large");
        CHECK_STATUS(opf_relu_(&x), OPF_E_SHAPE);
        /* Shape inference reads only the dims: it is not refused there. */
        int32_t ndim = 0;
        int64_t shape[OPF_MAX_RANK];
        const opf_op_def *relu = opf_op_find(opf_builtin_ops(), "relu");
        CHECK_STATUS(opf_op_infer_shape(relu, (const opf_tensor *[]){&x}, 0, &ndim, shape), OPF_OK);
        CHECK(ndim == ranks[i], "inferred rank %d", (int)ndim);
    }
    /* Empty tensors whose nonzero dims fit are accepted whatever their data
     * pointer, byte offset and strides: no element is addressed. */
    const int64_t fits[3] = {(int64_t)1 << 30, 0, (int64_t)1 << 30};
    const int64_t wild[3] = {INT64_MIN, INT64_MAX, -7};
    opf_tensor x = view_f32(NULL, 3, fits, wild), y = view_f32((float *)(uintptr_t)0x7, 3, fits, wild);
    y.byte_offset = UINT64_MAX - 2;
    CHECK_STATUS(opf_relu(&x, &y), OPF_OK);
    CHECK_STATUS(opf_add(&x, &y, &y), OPF_OK);
    CHECK_STATUS(opf_relu_(&y), OPF_OK);
}

/* A stride of INT64_MIN used to be negated before any check (undefined; only
 * clang's UBSan caught it) and refused even on a dim of size 1, where strides
 * are otherwise ignored. */
TEST(test_int64_min_stride) {
    float x_data[3] = {-1, 2, -3}, y_data[3] = {9, 9, 9};
    const int64_t s13[2] = {1, 3}, st_x[2] = {INT64_MIN, 1}, st_y[2] = {INT64_MAX, 1};
    opf_tensor x = view_f32(x_data, 2, s13, st_x), y = view_f32(y_data, 2, s13, st_y);
    CHECK_STATUS(opf_relu(&x, &y), OPF_OK);
    CHECK_CLOSE_F32(y_data, ((float[]){0, 2, 0}), 3, 0, 0, "relu through INT64_MIN / INT64_MAX strides on size-1 dims");
    CHECK_STATUS(opf_relu_(&x), OPF_OK);
    CHECK_CLOSE_F32(x_data, ((float[]){0, 2, 0}), 3, 0, 0, "relu_ through an INT64_MIN stride on a size-1 dim");
    /* On a dim of size > 1 it is refused (the reach overflows). */
    const int64_t s2[1] = {2}, min1[1] = {INT64_MIN}, max1[1] = {INT64_MAX};
    opf_tensor bad = view_f32(x_data, 1, s2, min1), ok = opf_tensor_make(y_data, OPF_F32, 1, s2);
    CHECK_STATUS(opf_relu(&bad, &ok), OPF_E_SHAPE);
    CHECK_CONTAINS(opf_last_error(), "stride");
    bad.strides = max1;
    CHECK_STATUS(opf_relu(&bad, &ok), OPF_E_SHAPE);
    CHECK_STATUS(opf_relu(&ok, &bad), OPF_E_SHAPE);
    /* A 0-d tensor and size-1 dims of every rank: strides never read. */
    const int64_t ones[OPF_MAX_RANK] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    int64_t extreme[OPF_MAX_RANK];
    for (int d = 0; d < OPF_MAX_RANK; d++) {
        extreme[d] = d % 2 ? INT64_MIN : INT64_MAX;
    }
    x_data[0] = -5;
    opf_tensor x16 = view_f32(x_data, OPF_MAX_RANK, ones, extreme), y16 = view_f32(y_data, OPF_MAX_RANK, ones, extreme);
    CHECK_STATUS(opf_scale(&x16, -2.0, &y16), OPF_OK);
    CHECK(y_data[0] == 10.0f, "scale over 16 size-1 dims: %g", (double)y_data[0]);
}

/* data + byte_offset wrapped around for a byte_offset near 2^64. */
TEST(test_byte_offset_wraps) {
    float *buf = xcalloc(16, sizeof(float));
    float *out = xcalloc(16, sizeof(float));
    const int64_t s4[1] = {4};
    opf_tensor x = opf_tensor_make(buf + 4, OPF_F32, 1, s4), y = opf_tensor_make(out, OPF_F32, 1, s4);
    x.byte_offset = UINT64_MAX - 3; /* data + 2^64 - 4: would be buf + 3 after wrapping */
    CHECK_STATUS(opf_relu(&x, &y), OPF_E_LAYOUT);
    CHECK_CONTAINS(opf_last_error(), "byte_offset");
    x.byte_offset = (uint64_t)0 - (uint64_t)(uintptr_t)x.data + 64; /* wraps to address 64 */
    CHECK_STATUS(opf_relu(&x, &y), OPF_E_LAYOUT);
    y.byte_offset = UINT64_MAX;
    CHECK_STATUS(opf_relu_(&y), OPF_E_LAYOUT);
    CHECK_BYTES(out, 16 * sizeof(float), 0, "output of refused calls");
    /* A large byte_offset that does not wrap is the caller's business: an
     * offset to the same elements from an earlier pointer works. */
    x.data = buf;
    x.byte_offset = 4 * sizeof(float);
    y.byte_offset = 0;
    buf[4] = -1;
    buf[5] = 3;
    CHECK_STATUS(opf_relu(&x, &y), OPF_OK);
    CHECK(out[0] == 0.0f && out[1] == 3.0f, "relu via byte_offset: %g %g", (double)out[0], (double)out[1]);
    free(out);
    free(buf);
}

/* Negative strides reaching below address 0 (or positive ones past the top
 * of the address space) are refused, not wrapped. */
TEST(test_strides_wrap_address_space) {
    float out[2] = {0};
    const int64_t s2[1] = {2}, down[1] = {-1024}, up[1] = {INT64_MAX / 8};
    opf_tensor low = view_f32((float *)(uintptr_t)64, 1, s2, down), y = opf_tensor_make(out, OPF_F32, 1, s2);
    CHECK_STATUS(opf_relu(&low, &y), OPF_E_LAYOUT);
    CHECK_CONTAINS(opf_last_error(), "address space");
    opf_tensor high = view_f32((float *)(uintptr_t)(UINTPTR_MAX - 63), 1, s2, up);
    CHECK_STATUS(opf_relu(&high, &y), OPF_E_LAYOUT);
    CHECK(out[0] == 0.0f && out[1] == 0.0f, "output written by a refused call");
}

/* Every element offset must fit in int64 bytes, summed over the dims, not
 * only per dim: [2,2] float32 with strides {2^60, 2^61 - 1} reaches
 * 4 * (2^60 + 2^61 - 1) bytes. */
TEST(test_offsets_overflow_when_summed) {
    float buf[4] = {0}, out[4] = {0};
    const int64_t s22[2] = {2, 2}, st[2] = {(int64_t)1 << 60, ((int64_t)1 << 61) - 1};
    opf_tensor x = view_f32(buf, 2, s22, st), y = opf_tensor_make(out, OPF_F32, 2, s22);
    CHECK_STATUS(opf_relu(&x, &y), OPF_E_SHAPE);
    CHECK_CONTAINS(opf_last_error(), "int64");
    const int64_t neg[2] = {-((int64_t)1 << 60), ((int64_t)1 << 61) - 1};
    x.strides = neg; /* one dim down, one up: the span still overflows */
    CHECK_STATUS(opf_relu(&x, &y), OPF_E_SHAPE);
    /* Each dim alone is fine: x1 passes its checks, and the call stops at
     * y1's dtype (before anything reads x1's far element). */
    const int64_t s2[1] = {2}, one[1] = {(int64_t)1 << 60};
    double out64[2] = {0};
    opf_tensor x1 = view_f32(buf, 1, s2, one), y1 = opf_tensor_make(out64, OPF_F64, 1, s2);
    CHECK_STATUS(opf_relu(&x1, &y1), OPF_E_DTYPE);
    /* 16 dims of size 2 whose reaches each fit but add up past int64. */
    int64_t shape16[OPF_MAX_RANK], st16[OPF_MAX_RANK];
    for (int d = 0; d < OPF_MAX_RANK; d++) {
        shape16[d] = 2;
        st16[d] = (int64_t)1 << 58;
    }
    opf_tensor x16 = view_f32(buf, OPF_MAX_RANK, shape16, st16);
    CHECK_STATUS(opf_relu_(&x16), OPF_E_SHAPE);
}

/* dense with x [1,3], strides {INT64_MAX, 1}: the GEMM packing multiplied the
 * row stride by the element size (overflow), though the result was right. */
TEST(test_dense_extreme_strides_on_unit_dims) {
    float x[3] = {1, 2, 3}, w[6] = {1, 2, 3, 4, 5, 6}, b[2] = {0.5f, -100}, y[2] = {0};
    const int64_t s13[2] = {1, 3}, s32[2] = {3, 2}, s12[2] = {1, 2}, s2[1] = {2};
    const int64_t x_st[2] = {INT64_MAX, 1}, y_st[2] = {INT64_MIN, 1};
    opf_tensor tx = view_f32(x, 2, s13, x_st), tw = opf_tensor_make(w, OPF_F32, 2, s32);
    opf_tensor tb = opf_tensor_make(b, OPF_F32, 1, s2), ty = view_f32(y, 2, s12, y_st);
    CHECK_STATUS(opf_dense(&tx, &tw, &tb, OPF_ACT_RELU, &ty), OPF_OK);
    CHECK_CLOSE_F32(y, ((float[]){22.5f, 0}), 2, 0, 0, "dense, x [1,3] with row stride INT64_MAX");
    /* w [1,M] and x [N,1]: k = 1, the k strides of both are extreme. */
    float xc[3] = {1, -2, 3}, wr[2] = {2, -1}, yr[6] = {0};
    const int64_t s31[2] = {3, 1}, s21[2] = {1, 2}, s3_2[2] = {3, 2};
    const int64_t xc_st[2] = {1, INT64_MIN}, wr_st[2] = {INT64_MIN + 1, 1};
    opf_tensor txc = view_f32(xc, 2, s31, xc_st), twr = view_f32(wr, 2, s21, wr_st);
    opf_tensor tyr = opf_tensor_make(yr, OPF_F32, 2, s3_2);
    CHECK_STATUS(opf_dense(&txc, &twr, NULL, OPF_ACT_NONE, &tyr), OPF_OK);
    CHECK_CLOSE_F32(yr, ((float[]){2, -1, -4, 2, 6, -3}), 6, 0, 0, "outer product with extreme k strides");
    /* y [N,1]: n = 1, the column strides of w and y are extreme. */
    float wc[3] = {1, 1, 1}, yc[3] = {0};
    const int64_t s31w[2] = {3, 1}, wc_st[2] = {1, INT64_MAX}, yc_st[2] = {1, INT64_MIN};
    const int64_t s33[2] = {3, 3};
    float x33[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    opf_tensor tx33 = opf_tensor_make(x33, OPF_F32, 2, s33), twc = view_f32(wc, 2, s31w, wc_st);
    opf_tensor tyc = view_f32(yc, 2, s31, yc_st);
    CHECK_STATUS(opf_dense(&tx33, &twc, NULL, OPF_ACT_NONE, &tyc), OPF_OK);
    CHECK_CLOSE_F32(yc, ((float[]){6, 15, 24}), 3, 0, 0, "row sums through extreme column strides");
    /* dense_grad with N = 1: dy, x and dx rows of extreme strides. */
    float dy[2] = {1, -1}, dx[3] = {0}, dw[6] = {0}, db[2] = {0};
    const int64_t dy_st[2] = {INT64_MIN, 1};
    opf_tensor tdy = view_f32(dy, 2, s12, dy_st), tdx = view_f32(dx, 2, s13, y_st);
    opf_tensor tdw = opf_tensor_make(dw, OPF_F32, 2, s32), tdb = opf_tensor_make(db, OPF_F32, 1, s2);
    CHECK_STATUS(opf_dense_grad(&tdy, &tx, &tw, NULL, OPF_ACT_NONE, &tdx, &tdw, &tdb), OPF_OK);
    CHECK_CLOSE_F32(dx, ((float[]){-1, -1, -1}), 3, 0, 0, "dense_grad dx");
    CHECK_CLOSE_F32(dw, ((float[]){1, -1, 2, -2, 3, -3}), 6, 0, 0, "dense_grad dw");
    CHECK_CLOSE_F32(db, ((float[]){1, -1}), 2, 0, 0, "dense_grad db");
}

/* K = 0: x [N,0] and w [0,M] are empty views (NULL data, any strides); y is
 * the bias (or zero) and nothing of x or w is read. */
TEST(test_dense_empty_k) {
    float b[3] = {1, -2, 3}, y[6];
    memset(y, 0xA5, sizeof y);
    const int64_t s20[2] = {2, 0}, s03[2] = {0, 3}, s23[2] = {2, 3}, s3[1] = {3};
    const int64_t wild[2] = {INT64_MAX, INT64_MIN};
    opf_tensor x = view_f32(NULL, 2, s20, wild), w = view_f32(NULL, 2, s03, wild);
    opf_tensor tb = opf_tensor_make(b, OPF_F32, 1, s3), ty = opf_tensor_make(y, OPF_F32, 2, s23);
    CHECK_STATUS(opf_dense(&x, &w, &tb, OPF_ACT_RELU, &ty), OPF_OK);
    CHECK_CLOSE_F32(y, ((float[]){1, 0, 3, 1, 0, 3}), 6, 0, 0, "dense with K = 0 is relu(bias)");
    CHECK_STATUS(opf_dense(&x, &w, NULL, OPF_ACT_NONE, &ty), OPF_OK);
    CHECK_CLOSE_F32(y, ((float[]){0, 0, 0, 0, 0, 0}), 6, 0, 0, "dense with K = 0 and no bias is zero");
    /* dense_grad with N = 0: dw = 0 and db = 0 from empty dy and x. */
    float dw[6], db[3];
    memset(dw, 0xA5, sizeof dw);
    memset(db, 0xA5, sizeof db);
    const int64_t s02[2] = {0, 2}, s0_3[2] = {0, 3}, s2_3[2] = {2, 3};
    float wv[6] = {1, 2, 3, 4, 5, 6};
    opf_tensor dy = view_f32(NULL, 2, s0_3, wild), xe = view_f32(NULL, 2, s02, wild);
    opf_tensor tw = opf_tensor_make(wv, OPF_F32, 2, s2_3), tdw = opf_tensor_make(dw, OPF_F32, 2, s2_3);
    opf_tensor tdb = opf_tensor_make(db, OPF_F32, 1, s3);
    CHECK_STATUS(opf_dense_grad(&dy, &xe, &tw, &dy, OPF_ACT_RELU, NULL, &tdw, &tdb), OPF_OK);
    CHECK_CLOSE_F32(dw, ((float[]){0, 0, 0, 0, 0, 0}), 6, 0, 0, "dw from N = 0");
    CHECK_CLOSE_F32(db, ((float[]){0, 0, 0}), 3, 0, 0, "db from N = 0");
}

/* ------------------------------------------------------------------------ */
/* Table validation                                                          */
/* ------------------------------------------------------------------------ */

static opf_status noop_compute(const opf_tensor *const *in, const opf_tensor *const *out, const opf_attr_value *attrs) {
    (void)in;
    (void)out;
    (void)attrs;
    return OPF_OK;
}

/* A gradient rule naming a row that declares 9 inputs, with 9 sources: the
 * validator compared the counts and read sources[8] (and produces[8]) before
 * reaching the bad row. */
TEST(test_validate_gradient_rule_counts) {
    opf_op_def *fwd = xcalloc(1, sizeof *fwd), *bad = xcalloc(1, sizeof *bad);
    *fwd = (opf_op_def){
        .name = "fwd",
        .dtypes = OPF_DTYPES_F32,
        .num_inputs = 1,
        .inputs = {{.name = "x"}},
        .num_outputs = 1,
        .outputs = {{.name = "y"}},
        .output_shapes = {{.kind = OPF_SHAPE_LIKE, .like = 0}},
        .num_grads = 1,
        .grads = {{.op = "bad", .num_sources = 9, .num_produces = 9}},
        .compute = noop_compute,
    };
    *bad = (opf_op_def){
        .name = "bad", .dtypes = OPF_DTYPES_F32, .num_inputs = 9, .num_outputs = 9, .compute = noop_compute};
    const opf_op_def *rows[2] = {fwd, bad};
    const opf_op_table table = {OPF_TABLE_ABI_VERSION, "hostile", 2, rows};
    CHECK_STATUS(opf_op_table_validate(&table), OPF_E_INVALID);
    CHECK_CONTAINS(opf_last_error(), "fwd");
    CHECK_CONTAINS(opf_last_error(), "gradient rule 0");
    const int32_t counts[][2] = {{9, 1}, {1, 9}, {-1, 1}, {1, -1}, {INT32_MAX, 1}, {1, INT32_MIN}};
    bad->num_inputs = 1;
    bad->num_outputs = 1;
    bad->inputs[0].name = "dy";
    bad->outputs[0].name = "dx";
    bad->output_shapes[0] = (opf_shape_rule){.kind = OPF_SHAPE_LIKE, .like = 0};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        fwd->grads[0].num_sources = counts[i][0];
        fwd->grads[0].num_produces = counts[i][1];
        CHECK_STATUS(opf_op_table_validate(&table), OPF_E_INVALID);
        CHECK_CONTAINS(opf_last_error(), "fwd");
    }
    /* The corrected rule validates. */
    fwd->grads[0] = (opf_grad_def){
        .op = "bad", .num_sources = 1, .sources = {{OPF_FROM_GRAD, 0}}, .num_produces = 1, .produces = {0}};
    CHECK_STATUS(opf_op_table_validate(&table), OPF_OK);
    /* Tangent rules: a gradient source, or a product beyond the outputs, is refused. */
    fwd->num_jvps = 1;
    fwd->jvps[0] = (opf_grad_def){
        .op = "bad", .num_sources = 1, .sources = {{OPF_FROM_GRAD, 0}}, .num_produces = 1, .produces = {0}};
    CHECK_STATUS(opf_op_table_validate(&table), OPF_E_INVALID);
    CHECK_CONTAINS(opf_last_error(), "tangent rule 0: source 0 is invalid");
    fwd->jvps[0].sources[0] = (opf_grad_source){OPF_FROM_TANGENT, 0};
    fwd->jvps[0].produces[0] = 1;
    CHECK_STATUS(opf_op_table_validate(&table), OPF_E_INVALID);
    CHECK_CONTAINS(opf_last_error(), "tangent rule 0 produces unknown output 1");
    fwd->jvps[0].produces[0] = 0;
    CHECK_STATUS(opf_op_table_validate(&table), OPF_OK);
    fwd->grads[0].sources[0] = (opf_grad_source){OPF_FROM_TANGENT, 0};
    CHECK_STATUS(opf_op_table_validate(&table), OPF_E_INVALID);
    CHECK_CONTAINS(opf_last_error(), "gradient rule 0: source 0 is invalid");
    free(bad);
    free(fwd);
}

/* A MIN_RANK or DIM_IS check ignores input b, but the runner looked up
 * whether b was present: b = -1 was accepted by validation and read
 * out of bounds. */
TEST(test_validate_check_input_b) {
    opf_op_def *row = xcalloc(1, sizeof *row);
    *row = (opf_op_def){
        .name = "ranked",
        .dtypes = OPF_DTYPES_F32,
        .num_inputs = 1,
        .inputs = {{.name = "x"}},
        .num_outputs = 1,
        .outputs = {{.name = "y"}},
        .output_shapes = {{.kind = OPF_SHAPE_LIKE, .like = 0}},
        .num_checks = 1,
        .checks = {{.kind = OPF_CHECK_MIN_RANK, .a = 0, .b = -1, .rank = 1}},
        .compute = noop_compute,
    };
    const opf_op_def *rows[1] = {row};
    const opf_op_table table = {OPF_TABLE_ABI_VERSION, "hostile", 1, rows};
    CHECK_STATUS(opf_op_table_validate(&table), OPF_E_INVALID);
    CHECK_CONTAINS(opf_last_error(), "check 0");
    row->checks[0] = (opf_check){.kind = OPF_CHECK_DIM_IS, .a = 0, .a_dim = 0, .b = 9, .rank = 3};
    CHECK_STATUS(opf_op_table_validate(&table), OPF_E_INVALID);
    row->checks[0].b = 0;
    CHECK_STATUS(opf_op_table_validate(&table), OPF_OK);
    free(row);
}

static void touch_f32(int64_t n, const void *const *in, void *const *out, const opf_attr_value *attrs) {
    (void)attrs;
    for (int64_t i = 0; i < n; i++) {
        ((float *)out[0])[i] = ((const float *)in[0])[i] + ((const float *)in[1])[i];
    }
}

static const opf_eltwise_kernel add_kernel = {.num_inputs = 2, .num_outputs = 1, .f32 = {touch_f32}};

static void rowsum_f32(const opf_row_args *args) {
    float s = 0;
    for (int64_t i = 0; i < args->in_len[0]; i++) {
        s += ((const float *)args->in[0])[i];
    }
    ((float *)args->out[0])[0] = s;
}

static const opf_row_kernel rowsum_kernel = {.num_inputs = 1, .num_outputs = 1, .f32 = {rowsum_f32}};

/* Hand-written rows run by the elementwise or row engine validated without
 * the checks that tie together the shapes the engine walks, and then read
 * outside their tensors (an input of another shape, an absent output, rows
 * of another length). Declared rows (opf_ops_resolve) always have them. */
TEST(test_validate_engine_rows) {
    opf_op_def *row = xcalloc(1, sizeof *row);
    const opf_op_def eltwise_row = {
        .name = "plus",
        .flags = OPF_OP_ELEMENTWISE,
        .dtypes = OPF_DTYPES_F32,
        .num_inputs = 2,
        .inputs = {{.name = "a"}, {.name = "b"}},
        .num_outputs = 1,
        .outputs = {{.name = "y"}},
        .output_shapes = {{.kind = OPF_SHAPE_LIKE, .like = 0}},
        .num_checks = 1,
        .checks = {{.kind = OPF_CHECK_SAME_SHAPE, .a = 0, .b = 1}},
        .eltwise = &add_kernel,
    };
    const opf_op_def *rows[1] = {row};
    const opf_op_table table = {OPF_TABLE_ABI_VERSION, "hostile", 1, rows};
    *row = eltwise_row;
    CHECK_STATUS(opf_op_table_validate(&table), OPF_OK);
    float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {10, 20, 30, 40, 50, 60}, y[6] = {0};
    const int64_t s23[2] = {2, 3}, s3[1] = {3};
    opf_tensor ta = opf_tensor_make(a, OPF_F32, 2, s23), tb = opf_tensor_make(b, OPF_F32, 2, s23),
               ty = opf_tensor_make(y, OPF_F32, 2, s23), tb3 = opf_tensor_make(b, OPF_F32, 1, s3);
    CHECK_STATUS(opf_op_run(row, (const opf_tensor *[]){&ta, &tb}, (const opf_tensor *[]){&ty}, NULL), OPF_OK);
    CHECK_CLOSE_F32(y, ((float[]){11, 22, 33, 44, 55, 66}), 6, 0, 0, "a hand-written elementwise row");
    CHECK_STATUS(opf_op_run(row, (const opf_tensor *[]){&ta, &tb3}, (const opf_tensor *[]){&ty}, NULL), OPF_E_SHAPE);
    /* Without the same-shape check, b could be [3] while a is [2,3]. */
    row->num_checks = 0;
    CHECK_STATUS(opf_op_table_validate(&table), OPF_E_INVALID);
    CHECK_CONTAINS(opf_last_error(), "same-shape");
    /* An optional input or output would be NULL in the engine. */
    *row = eltwise_row;
    row->outputs[0].flags = OPF_ARG_OPTIONAL;
    CHECK_STATUS(opf_op_table_validate(&table), OPF_E_INVALID);
    *row = eltwise_row;
    row->inputs[1].flags = OPF_ARG_OPTIONAL;
    CHECK_STATUS(opf_op_table_validate(&table), OPF_E_INVALID);
    /* A kernel that reads or writes another number of tensors than the row has. */
    *row = eltwise_row;
    row->num_outputs = 0;
    CHECK_STATUS(opf_op_table_validate(&table), OPF_E_INVALID);
    CHECK_CONTAINS(opf_last_error(), "kernel");
    /* An output shaped by dims rather than like an input. */
    *row = eltwise_row;
    row->output_shapes[0] = (opf_shape_rule){.kind = OPF_SHAPE_DIMS, .rank = 1, .dims = {{0, 0}}};
    CHECK_STATUS(opf_op_table_validate(&table), OPF_E_INVALID);

    /* Row-wise: rowsum(x[..., M]) -> y[...]. */
    const opf_op_def row_row = {
        .name = "rowsum",
        .dtypes = OPF_DTYPES_F32,
        .num_inputs = 1,
        .inputs = {{.name = "x", .flags = OPF_ARG_BATCHED, .core_dims = 1}},
        .num_outputs = 1,
        .outputs = {{.name = "y", .flags = OPF_ARG_BATCHED, .core_dims = 0}},
        .output_shapes = {{.kind = OPF_SHAPE_BATCH, .like = 0, .drop = 1, .rank = 0}},
        .num_checks = 1,
        .checks = {{.kind = OPF_CHECK_MIN_RANK, .a = 0, .rank = 1}},
        .row = &rowsum_kernel,
    };
    *row = row_row;
    CHECK_STATUS(opf_op_table_validate(&table), OPF_OK);
    float sums[2] = {0};
    const int64_t s2[1] = {2};
    opf_tensor tsum = opf_tensor_make(sums, OPF_F32, 1, s2);
    CHECK_STATUS(opf_op_run(row, (const opf_tensor *[]){&ta}, (const opf_tensor *[]){&tsum}, NULL), OPF_OK);
    CHECK_CLOSE_F32(sums, ((float[]){6, 15}), 2, 0, 0, "a hand-written row-wise row");
    /* Without the rank check a 0-d x has -1 leading dims. */
    row->num_checks = 0;
    CHECK_STATUS(opf_op_table_validate(&table), OPF_E_INVALID);
    /* An output whose leading dims are not x's. */
    *row = row_row;
    row->output_shapes[0].drop = 0;
    CHECK_STATUS(opf_op_table_validate(&table), OPF_E_INVALID);
    *row = row_row;
    row->output_shapes[0] = (opf_shape_rule){.kind = OPF_SHAPE_DIMS, .rank = 1, .dims = {{0, 0}}};
    CHECK_STATUS(opf_op_table_validate(&table), OPF_E_INVALID);
    /* A second batched input must have x's leading dims (a batch check). */
    *row = row_row;
    row->num_inputs = 2;
    row->inputs[1] = (opf_arg_def){.name = "w", .flags = OPF_ARG_BATCHED, .core_dims = 1};
    static const opf_row_kernel two_in = {.num_inputs = 2, .num_outputs = 1, .f32 = {rowsum_f32}};
    row->row = &two_in;
    CHECK_STATUS(opf_op_table_validate(&table), OPF_E_INVALID);
    row->checks[1] = (opf_check){.kind = OPF_CHECK_BATCH_EQ, .a = 0, .a_dim = 1, .b = 1, .b_dim = 1};
    row->num_checks = 2;
    CHECK_STATUS(opf_op_table_validate(&table), OPF_OK);
    row->checks[1].b_dim = 0; /* ties w's leading dims but for its last one */
    CHECK_STATUS(opf_op_table_validate(&table), OPF_E_INVALID);
    free(row);
}

/* ------------------------------------------------------------------------ */
/* Aliasing                                                                  */
/* ------------------------------------------------------------------------ */

static int axpy_calls = 0;

/* y += x, elementwise over 1-d float64 views (the user's code walks strides). */
static opf_status axpy_compute(const opf_tensor *const *in, const opf_tensor *const *out, const opf_attr_value *attrs) {
    (void)out;
    (void)attrs;
    axpy_calls++;
    const opf_tensor *y = in[0], *x = in[1];
    int64_t ys = y->strides ? y->strides[0] : 1, xs = x->strides ? x->strides[0] : 1;
    double *yp = (double *)((char *)y->data + y->byte_offset);
    const double *xp = (const double *)((const char *)x->data + x->byte_offset);
    for (int64_t i = 0; i < y->shape[0]; i++) {
        yp[i * ys] += xp[i * xs];
    }
    return OPF_OK;
}

static const opf_op_def axpy_ = {
    .name = "axpy_",
    .doc = "y += x in place.",
    .flags = OPF_OP_ELEMENTWISE,
    .dtypes = OPF_DTYPES_F64,
    .num_inputs = 2,
    .inputs = {{.name = "y", .flags = OPF_ARG_MUTATED}, {.name = "x"}},
    .num_checks = 2,
    .checks = {{.kind = OPF_CHECK_RANK, .a = 0, .rank = 1}, {.kind = OPF_CHECK_SAME_SHAPE, .a = 0, .b = 1}},
    .compute = axpy_compute,
};

/* The same, not declared elementwise: no in-place at all. */
static const opf_op_def axpy_strict = {
    .name = "axpy_strict",
    .dtypes = OPF_DTYPES_F64,
    .num_inputs = 2,
    .inputs = {{.name = "y", .flags = OPF_ARG_MUTATED}, {.name = "x"}},
    .num_checks = 2,
    .checks = {{.kind = OPF_CHECK_RANK, .a = 0, .rank = 1}, {.kind = OPF_CHECK_SAME_SHAPE, .a = 0, .b = 1}},
    .compute = axpy_compute,
};

/* Two mutated inputs: a += 1, b += 1 (elementwise). */
static opf_status bump2_compute(const opf_tensor *const *in, const opf_tensor *const *out,
                                const opf_attr_value *attrs) {
    (void)out;
    (void)attrs;
    axpy_calls++;
    for (int k = 0; k < 2; k++) {
        double *p = (double *)((char *)in[k]->data + in[k]->byte_offset);
        int64_t s = in[k]->strides ? in[k]->strides[0] : 1;
        for (int64_t i = 0; i < in[k]->shape[0]; i++) {
            p[i * s] += 1.0;
        }
    }
    return OPF_OK;
}

static const opf_op_def bump2_ = {
    .name = "bump2_",
    .flags = OPF_OP_ELEMENTWISE,
    .dtypes = OPF_DTYPES_F64,
    .num_inputs = 2,
    .inputs = {{.name = "a", .flags = OPF_ARG_MUTATED}, {.name = "b", .flags = OPF_ARG_MUTATED}},
    .num_checks = 1,
    .checks = {{.kind = OPF_CHECK_RANK, .a = 0, .rank = 1}},
    .compute = bump2_compute,
};

/* A row whose mutated input overlapped another input was accepted and ran:
 * only the mutated input's overlap with itself was checked. */
TEST(test_mutated_input_overlapping_another_input) {
    double buf[16];
    for (int i = 0; i < 16; i++) {
        buf[i] = i;
    }
    const int64_t s4[1] = {4}, st2[1] = {2};
    opf_tensor y = opf_tensor_make(buf, OPF_F64, 1, s4), x = opf_tensor_make(buf + 2, OPF_F64, 1, s4);
    axpy_calls = 0;
    CHECK_STATUS(opf_op_run(&axpy_, (const opf_tensor *[]){&y, &x}, NULL, NULL), OPF_E_LAYOUT);
    CHECK_CONTAINS(opf_last_error(), "axpy_");
    CHECK_CONTAINS(opf_last_error(), "y (written in place) partially overlaps input x");
    /* The other way round: x below y. */
    CHECK_STATUS(opf_op_run(&axpy_, (const opf_tensor *[]){&x, &y}, NULL, NULL), OPF_E_LAYOUT);
    CHECK_STATUS(opf_op_run(&axpy_strict, (const opf_tensor *[]){&y, &x}, NULL, NULL), OPF_E_LAYOUT);
    CHECK(axpy_calls == 0, "compute ran %d times on refused calls", axpy_calls);
    for (int i = 0; i < 16; i++) {
        CHECK(buf[i] == i, "buf[%d] = %g after refused calls", i, buf[i]);
    }
    /* Interleaved, disjoint: y = buf[0::2], x = buf[1::2]. */
    opf_tensor ye = opf_tensor_make(buf, OPF_F64, 1, s4), xo = opf_tensor_make(buf + 1, OPF_F64, 1, s4);
    ye.strides = xo.strides = st2;
    CHECK_STATUS(opf_op_run(&axpy_, (const opf_tensor *[]){&ye, &xo}, NULL, NULL), OPF_OK);
    CHECK_STATUS(opf_op_run(&axpy_strict, (const opf_tensor *[]){&ye, &xo}, NULL, NULL), OPF_OK);
    CHECK_CLOSE_F64(buf, ((double[]){2, 1, 8, 3, 14, 5, 20, 7}), 8, 0, 0, "y += x twice over interleaved views");
    /* Exactly the same elements: allowed for the elementwise row (y = 2y),
     * refused for the other. */
    opf_tensor y2 = opf_tensor_make(buf + 8, OPF_F64, 1, s4);
    CHECK_STATUS(opf_op_run(&axpy_, (const opf_tensor *[]){&y2, &y2}, NULL, NULL), OPF_OK);
    CHECK_CLOSE_F64(buf + 8, ((double[]){16, 18, 20, 22}), 4, 0, 0, "y += y");
    CHECK_STATUS(opf_op_run(&axpy_strict, (const opf_tensor *[]){&y2, &y2}, NULL, NULL), OPF_E_LAYOUT);
    CHECK_CONTAINS(opf_last_error(), "cannot run in place");
    /* Two mutated inputs: never the same memory, not even exactly. */
    CHECK_STATUS(opf_op_run(&bump2_, (const opf_tensor *[]){&y2, &y2}, NULL, NULL), OPF_E_LAYOUT);
    CHECK_CONTAINS(opf_last_error(), "written in place");
    CHECK_STATUS(opf_op_run(&bump2_, (const opf_tensor *[]){&ye, &xo}, NULL, NULL), OPF_OK);
    CHECK(buf[0] == 3 && buf[1] == 2, "bump2_ on interleaved views: %g %g", buf[0], buf[1]);
}

/* The overlap check compared memory spans: disjoint interleaved views were
 * refused with a false "partially overlaps". NumPy's
 * relu(b[:, :2], out=b[:, 2:]) and relu(a[0::2], out=a[1::2]). */
TEST(test_interleaved_disjoint_views) {
    float b[12] = {-1, 2, 9, 9, -3, 4, 9, 9, 5, -6, 9, 9};
    const int64_t s32[2] = {3, 2}, st[2] = {4, 1};
    opf_tensor left = view_f32(b, 2, s32, st), right = view_f32(b + 2, 2, s32, st);
    CHECK_STATUS(opf_relu(&left, &right), OPF_OK);
    CHECK_CLOSE_F32(b, ((float[]){-1, 2, 0, 2, -3, 4, 0, 4, 5, -6, 5, 0}), 12, 0, 0, "relu(b[:, :2], out=b[:, 2:])");
    float a[10] = {-1, 7, 2, 7, -3, 7, 4, 7, -5, 7};
    const int64_t s5[1] = {5}, step2[1] = {2};
    opf_tensor even = view_f32(a, 1, s5, step2), odd = view_f32(a + 1, 1, s5, step2);
    CHECK_STATUS(opf_relu(&even, &odd), OPF_OK);
    CHECK_CLOSE_F32(a, ((float[]){-1, 0, 2, 2, -3, 0, 4, 4, -5, 0}), 10, 0, 0, "relu(a[0::2], out=a[1::2])");
    /* add with the output between two interleaved inputs: y = a[1::3], inputs a[0::3], a[2::3]. */
    float c[9] = {1, 0, 10, 2, 0, 20, 3, 0, 30};
    const int64_t s3[1] = {3}, step3[1] = {3};
    opf_tensor c0 = view_f32(c, 1, s3, step3), c1 = view_f32(c + 1, 1, s3, step3), c2 = view_f32(c + 2, 1, s3, step3);
    CHECK_STATUS(opf_add(&c0, &c2, &c1), OPF_OK);
    CHECK_CLOSE_F32(c, ((float[]){1, 11, 10, 2, 22, 20, 3, 33, 30}), 9, 0, 0, "add into the middle third");
    /* Rows interleaved the other way: even rows in, odd rows out, reversed. */
    float m[16] = {-1, 2, -3, 4, 0, 0, 0, 0, 5, -6, 7, -8, 0, 0, 0, 0};
    const int64_t s24[2] = {2, 4}, rows_even[2] = {8, 1}, rows_odd_rev[2] = {-8, -1};
    opf_tensor me = view_f32(m, 2, s24, rows_even), mo = view_f32(m + 15, 2, s24, rows_odd_rev);
    CHECK_STATUS(opf_relu(&me, &mo), OPF_OK);
    CHECK_CLOSE_F32(m, ((float[]){-1, 2, -3, 4, 0, 7, 0, 5, 5, -6, 7, -8, 4, 0, 2, 0}), 16, 0, 0,
                    "relu of even rows into odd rows, reversed");
    /* dense: y interleaved with x (disjoint) is not in place, so allowed. */
    float d[8] = {1, 0, 2, 0, 3, 0, 4, 0}, w[4] = {1, 0, 0, 1};
    const int64_t s22[2] = {2, 2}, dx_st[2] = {4, 2};
    opf_tensor dxv = view_f32(d, 2, s22, dx_st), dyv = view_f32(d + 1, 2, s22, dx_st);
    opf_tensor tw = opf_tensor_make(w, OPF_F32, 2, s22);
    CHECK_STATUS(opf_dense(&dxv, &tw, NULL, OPF_ACT_NONE, &dyv), OPF_OK);
    CHECK_CLOSE_F32(d, ((float[]){1, 1, 2, 2, 3, 3, 4, 4}), 8, 0, 0, "dense into the odd elements of its input");
    /* dense_grad's outputs interleaved in one buffer: disjoint, allowed. */
    float g[8];
    const int64_t s2[1] = {2}, g_st[2] = {4, 2}, db_st[1] = {-1};
    float dy[4] = {1, 2, 3, 4}, xv[4] = {1, 0, 0, 1};
    opf_tensor tdy = opf_tensor_make(dy, OPF_F32, 2, s22), tx = opf_tensor_make(xv, OPF_F32, 2, s22);
    opf_tensor gdx = view_f32(g, 2, s22, g_st), gdw = view_f32(g + 1, 2, s22, g_st);
    float dbv[2];
    opf_tensor tdb = view_f32(dbv + 1, 1, s2, db_st);
    CHECK_STATUS(opf_dense_grad(&tdy, &tx, &tw, NULL, OPF_ACT_NONE, &gdx, &gdw, &tdb), OPF_OK);
    CHECK_CLOSE_F32(g, ((float[]){1, 1, 2, 2, 3, 3, 4, 4}), 8, 0, 0, "dx and dw interleaved");
    CHECK(dbv[1] == 4 && dbv[0] == 6, "db reversed: %g %g", (double)dbv[1], (double)dbv[0]);
}

/* Views that do share an element, in the ways interleaving can hide it. */
TEST(test_interleaved_overlapping_views) {
    float *a = xcalloc(64, sizeof(float));
    const int64_t s5[1] = {5}, step2[1] = {2}, step3[1] = {3};
    /* a[0::2] and a[2::2]: shifted by one element of the view. */
    opf_tensor x = view_f32(a, 1, s5, step2), y = view_f32(a + 2, 1, s5, step2);
    CHECK_STATUS(opf_relu(&x, &y), OPF_E_LAYOUT);
    CHECK_CONTAINS(opf_last_error(), "partially overlaps input x");
    /* a[0::2] and a[3::3] meet at 6 and 12 only. */
    opf_tensor y3 = view_f32(a + 3, 1, s5, step3);
    CHECK_STATUS(opf_relu(&x, &y3), OPF_E_LAYOUT);
    /* a[1::2] and a[3::3] meet at 3 and 9 only. */
    opf_tensor x_odd = view_f32(a + 1, 1, s5, step2);
    CHECK_STATUS(opf_relu(&x_odd, &y3), OPF_E_LAYOUT);
    /* a[0:11:5] (0, 5, 10) and a[1:16:7] (1, 8, 15): the spans meet, the
     * strides are coprime, the elements do not. */
    const int64_t s3[1] = {3}, step5[1] = {5}, step7[1] = {7};
    float *c = xcalloc(64, sizeof(float));
    opf_tensor x5 = view_f32(c, 1, s3, step5), y7 = view_f32(c + 1, 1, s3, step7);
    c[5] = -2;
    c[10] = 3;
    CHECK_STATUS(opf_relu(&x5, &y7), OPF_OK);
    CHECK(c[1] == 0 && c[8] == 0 && c[15] == 3 && c[5] == -2, "relu(a[0:11:5], out=a[1:16:7])");
    free(c);
    /* b[:, :3] and b[:, 1:4] of a [3,4] array. */
    const int64_t s33[2] = {3, 3}, st[2] = {4, 1};
    opf_tensor l = view_f32(a, 2, s33, st), r = view_f32(a + 1, 2, s33, st);
    CHECK_STATUS(opf_relu(&l, &r), OPF_E_LAYOUT);
    /* The last element only: [2,2] at strides {4,1} from 0 and [2,2] from 5. */
    const int64_t s22[2] = {2, 2};
    opf_tensor p = view_f32(a, 2, s22, st), q = view_f32(a + 5, 2, s22, st);
    CHECK_STATUS(opf_relu(&p, &q), OPF_E_LAYOUT);
    /* A transpose onto itself (same start, other order). */
    const int64_t tr[2] = {1, 4};
    opf_tensor pt = view_f32(a, 2, s22, tr);
    CHECK_STATUS(opf_relu(&p, &pt), OPF_E_LAYOUT);
    /* dense_grad outputs meeting at one element. */
    float dy[4] = {0}, xv[4] = {0}, wv[4] = {0};
    opf_tensor tdy = opf_tensor_make(dy, OPF_F32, 2, s22), tx = opf_tensor_make(xv, OPF_F32, 2, s22),
               tw = opf_tensor_make(wv, OPF_F32, 2, s22);
    const int64_t g_st[2] = {4, 2};
    opf_tensor gdx = view_f32(a + 32, 2, s22, g_st), gdw = view_f32(a + 38, 2, s22, g_st);
    CHECK_STATUS(opf_dense_grad(&tdy, &tx, &tw, NULL, OPF_ACT_NONE, &gdx, &gdw, NULL), OPF_E_LAYOUT);
    CHECK_CONTAINS(opf_last_error(), "outputs dx and dw overlap");
    CHECK_BYTES(a, 64 * sizeof(float), 0, "memory written by refused calls");
    free(a);
}

/* An output's elements must be distinct; strides that are not nested but
 * never fold the view onto itself are fine. */
TEST(test_output_self_overlap_is_exact) {
    float in[6] = {-1, 2, -3, 4, -5, 6}, out[16];
    const int64_t s23[2] = {2, 3}, folds_not[2] = {3, 2}, s33[2] = {3, 3}, folds[2] = {1, 2}, fine[2] = {2, 3};
    for (int i = 0; i < 16; i++) {
        out[i] = 99;
    }
    /* offsets {0,2,4} + {0,3}: 0 2 4 3 5 7, all distinct. */
    opf_tensor x = opf_tensor_make(in, OPF_F32, 2, s23), y = view_f32(out, 2, s23, folds_not);
    CHECK_STATUS(opf_relu(&x, &y), OPF_OK);
    CHECK_CLOSE_F32(out, ((float[]){0, 99, 2, 4, 0, 0, 99, 6, 99}), 9, 0, 0, "relu into strides {3,2}");
    /* [3,3] at {2,3}: 0 3 6 2 5 8 4 7 10, distinct. */
    float in9[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    opf_tensor x9 = opf_tensor_make(in9, OPF_F32, 2, s33), y9 = view_f32(out, 2, s33, fine);
    CHECK_STATUS(opf_scale(&x9, 1.0, &y9), OPF_OK);
    CHECK_CLOSE_F32(out, ((float[]){1, 99, 4, 2, 7, 5, 3, 8, 6, 99, 9}), 11, 0, 0, "scale into strides {2,3}");
    /* [3,3] at {1,2}: 0 2 4 1 3 5 2 ... folds. */
    opf_tensor bad = view_f32(out, 2, s33, folds);
    CHECK_STATUS(opf_relu(&x9, &bad), OPF_E_LAYOUT);
    CHECK_STATUS(opf_relu_(&bad), OPF_E_LAYOUT);
    CHECK_CONTAINS(opf_last_error(), "overlapping elements");
}

/* Randomized: relu, add and relu_ over random small views in one buffer,
 * against a brute-force map of which element lives where. */
typedef struct rview {
    opf_tensor t;
    int64_t shape[3], strides[3];
    int64_t offsets[64]; /* element offsets from buf, in C order (offsets[0]: element 0) */
    int64_t n;
} rview;

enum { RBUF = 256 };

/* A random view of `shape` inside buf[0, RBUF): strides in [-6, 6], or, when
 * `like` is given, often like's strides (possibly scaled by 2 or 3) from a
 * start a few elements away, so that the two interleave. */
static void rview_make(rview *v, rng *r, float *buf, int32_t ndim, const int64_t *shape, const rview *like) {
    int64_t lo = 0, hi = 0;
    int copy = like != NULL && rng_below(r, 2) == 0;
    int64_t scale = 1 + (int64_t)rng_below(r, 3);
    for (int32_t d = 0; d < ndim; d++) {
        v->shape[d] = shape[d];
        v->strides[d] = copy ? like->strides[d] * (rng_below(r, 3) == 0 ? scale : 1) : (int64_t)rng_below(r, 13) - 6;
        int64_t reach = v->strides[d] * (shape[d] - 1);
        *(reach < 0 ? &lo : &hi) += reach;
    }
    int64_t start = -lo + (int64_t)rng_below(r, (uint64_t)(RBUF - (hi - lo)));
    if (copy) { /* near like's start, where that fits */
        int64_t near = like->offsets[0] + (int64_t)rng_below(r, 9) - 4;
        start = near + lo >= 0 && near + hi < RBUF ? near : start;
    }
    v->t = view_f32(buf, ndim, v->shape, v->strides);
    v->t.byte_offset = (uint64_t)start * sizeof(float);
    v->n = 0;
    int64_t count = 1;
    for (int32_t d = 0; d < ndim; d++) {
        count *= shape[d];
    }
    for (int64_t i = 0; i < count; i++) {
        int64_t rem = i, off = start;
        for (int32_t d = ndim - 1; d >= 0; d--) {
            off += (rem % shape[d]) * v->strides[d];
            rem /= shape[d];
        }
        v->offsets[v->n++] = off;
    }
}

static int offsets_repeat(const rview *v) {
    for (int64_t i = 0; i < v->n; i++) {
        for (int64_t j = 0; j < i; j++) {
            if (v->offsets[i] == v->offsets[j]) {
                return 1;
            }
        }
    }
    return 0;
}

static int offsets_meet(const rview *a, const rview *b) {
    for (int64_t i = 0; i < a->n; i++) {
        for (int64_t j = 0; j < b->n; j++) {
            if (a->offsets[i] == b->offsets[j]) {
                return 1;
            }
        }
    }
    return 0;
}

static int offsets_same(const rview *a, const rview *b) {
    for (int64_t i = 0; i < a->n; i++) {
        if (a->offsets[i] != b->offsets[i]) {
            return 0;
        }
    }
    return 1;
}

static int spans_meet(const rview *a, const rview *b) {
    int64_t alo = INT64_MAX, ahi = INT64_MIN, blo = INT64_MAX, bhi = INT64_MIN;
    for (int64_t i = 0; i < a->n; i++) {
        alo = a->offsets[i] < alo ? a->offsets[i] : alo;
        ahi = a->offsets[i] > ahi ? a->offsets[i] : ahi;
    }
    for (int64_t i = 0; i < b->n; i++) {
        blo = b->offsets[i] < blo ? b->offsets[i] : blo;
        bhi = b->offsets[i] > bhi ? b->offsets[i] : bhi;
    }
    return alo <= bhi && blo <= ahi;
}

TEST(test_random_views_against_brute_force) {
    rng r = rng_seed(20261201);
    float *buf = xcalloc(RBUF, sizeof(float)), *before = xcalloc(RBUF, sizeof(float)),
          *want = xcalloc(RBUF, sizeof(float));
    int accepted = 0, refused = 0, interleaved = 0;
    const int rounds = harness_slow() ? 3000 : 30000;
    for (int round = 0; round < rounds; round++) {
        int32_t ndim = 1 + (int32_t)rng_below(&r, 3);
        int64_t shape[3];
        for (int32_t d = 0; d < ndim; d++) {
            shape[d] = 1 + (int64_t)rng_below(&r, 4);
        }
        rview a, b, y;
        rview_make(&a, &r, buf, ndim, shape, NULL);
        rview_make(&b, &r, buf, ndim, shape, &a);
        rview_make(&y, &r, buf, ndim, shape, rng_below(&r, 2) ? &a : &b);
        for (int i = 0; i < RBUF; i++) {
            before[i] = buf[i] = (float)((int)rng_below(&r, 17) - 8);
        }
        int op = (int)rng_below(&r, 3); /* relu(a, y), add(a, b, y), relu_(y) */
        int bad = offsets_repeat(&y);
        if (op != 2) {
            bad |= offsets_meet(&a, &y) && !offsets_same(&a, &y);
        }
        if (op == 1) {
            bad |= offsets_meet(&b, &y) && !offsets_same(&b, &y);
        }
        memcpy(want, before, RBUF * sizeof(float));
        for (int64_t i = 0; i < y.n && !bad; i++) {
            float v = op == 0   ? ref_relu_f32(before[a.offsets[i]])
                      : op == 1 ? ref_add_f32(before[a.offsets[i]], before[b.offsets[i]])
                                : ref_relu_f32(before[y.offsets[i]]);
            want[y.offsets[i]] = v;
        }
        opf_status st = op == 0 ? opf_relu(&a.t, &y.t) : op == 1 ? opf_add(&a.t, &b.t, &y.t) : opf_relu_(&y.t);
        char what[128];
        snprintf(what, sizeof what, "round %d, op %d, rank %d", round, op, (int)ndim);
        if (!CHECK(st == (bad ? OPF_E_LAYOUT : OPF_OK), "%s: status %s, want %s (%s)", what, opf_status_name(st),
                   bad ? "OPF_E_LAYOUT" : "OPF_OK", opf_last_error())) {
            break;
        }
        if (!CHECK_CLOSE_F32(buf, want, RBUF, 0, 0, "%s: buffer after the call", what)) {
            break;
        }
        accepted += !bad;
        refused += bad;
        /* Accepted although the spans meet: decided element by element. */
        interleaved += !bad && op == 0 && !offsets_same(&a, &y) && spans_meet(&a, &y);
    }
    CHECK(accepted > rounds / 10 && refused > rounds / 10, "accepted %d, refused %d of %d", accepted, refused, rounds);
    printf("  %d accepted, %d refused, %d accepted with meeting spans\n", accepted, refused, interleaved);
    free(want);
    free(before);
    free(buf);
}

/* opf_tensors_overlap between views of different element sizes (no op mixes
 * dtypes, but the query is general: it then works in bytes), against a
 * brute-force map of the bytes each view covers. */
TEST(test_overlap_of_mixed_element_sizes) {
    rng r = rng_seed(77);
    enum { BYTES = 512 };
    _Alignas(64) static unsigned char buf[BYTES];
    int meet_count = 0, rounds = harness_slow() ? 2000 : 20000;
    for (int round = 0; round < rounds; round++) {
        opf_tensor t[2];
        int64_t shape[2][2], strides[2][2];
        unsigned char covered[2][BYTES] = {{0}};
        for (int k = 0; k < 2; k++) {
            opf_dtype dtype = rng_below(&r, 2) ? OPF_F32 : OPF_F64;
            int64_t elem = (int64_t)opf_dtype_size(dtype), lo = 0, hi = 0;
            int32_t ndim = 1 + (int32_t)rng_below(&r, 2);
            for (int32_t d = 0; d < ndim; d++) {
                shape[k][d] = 1 + (int64_t)rng_below(&r, 4);
                strides[k][d] = (int64_t)rng_below(&r, 9) - 4;
                *(strides[k][d] < 0 ? &lo : &hi) += strides[k][d] * (shape[k][d] - 1);
            }
            int64_t room = BYTES / elem - (hi - lo), start = -lo + (int64_t)rng_below(&r, (uint64_t)room);
            t[k] = opf_tensor_make(buf, dtype, ndim, shape[k]);
            t[k].strides = strides[k];
            t[k].byte_offset = (uint64_t)(start * elem);
            for (int64_t i = 0; i < shape[k][0] * (ndim > 1 ? shape[k][1] : 1); i++) {
                int64_t at = start + (ndim > 1 ? (i / shape[k][1]) * strides[k][0] + (i % shape[k][1]) * strides[k][1]
                                               : i * strides[k][0]);
                memset(covered[k] + at * elem, 1, (size_t)elem);
            }
        }
        int meet = 0;
        for (int b = 0; b < BYTES; b++) {
            meet |= covered[0][b] && covered[1][b];
        }
        meet_count += meet;
        opf_overlap got = opf_tensors_overlap(&t[0], &t[1]);
        if (!CHECK(got == (meet ? OPF_OVERLAP : OPF_DISJOINT), "round %d: overlap %d, brute force %d", round, (int)got,
                   meet)) {
            break;
        }
    }
    CHECK(meet_count > rounds / 10 && meet_count < rounds * 9 / 10, "%d of %d pairs meet", meet_count, rounds);
}

/* Large interleaved views are decided quickly and exactly; irregular ones
 * beyond the search's budget are refused, never accepted wrongly. */
TEST(test_large_views) {
    const int64_t n = harness_slow() ? 256 : 1024;
    float *m = xcalloc((size_t)(n * n), sizeof(float));
    for (int64_t i = 0; i < n * n; i++) {
        m[i] = (float)(i % 7) - 3.0f;
    }
    const int64_t half[2] = {n, n / 2}, st[2] = {n, 1};
    opf_tensor left = view_f32(m, 2, half, st), right = view_f32(m + n / 2, 2, half, st);
    CHECK_STATUS(opf_relu(&left, &right), OPF_OK);
    int bad = 0;
    for (int64_t i = 0; i < n && !bad; i++) {
        for (int64_t j = 0; j < n / 2; j++) {
            float src = (float)((i * n + j) % 7) - 3.0f;
            bad |= m[i * n + j] != src || m[i * n + n / 2 + j] != ref_relu_f32(src);
        }
    }
    CHECK(!bad, "relu(m[:, :n/2], out=m[:, n/2:])");
    const int64_t flat[1] = {n * n / 2}, two[1] = {2};
    opf_tensor even = view_f32(m, 1, flat, two), odd = view_f32(m + 1, 1, flat, two);
    CHECK_STATUS(opf_relu(&even, &odd), OPF_OK);
    opf_tensor shifted = view_f32(m + 2, 1, flat, two);
    even.shape = (const int64_t[]){n * n / 2 - 1};
    shifted.shape = even.shape;
    CHECK_STATUS(opf_relu(&even, &shifted), OPF_E_LAYOUT);
    free(m);

    /* Views without nested structure, found by random search to exceed the
     * overlap search's budget: 768 elements each over 7 dims of unrelated
     * strides, disjoint (checked by brute force below). The library may
     * refuse them (saying the strides are too irregular to tell); it must
     * never accept views that share an element, nor write outside y. */
    const int64_t shape7[7] = {2, 4, 4, 3, 2, 2, 2};
    const int64_t sa[7] = {14028, 17362, 7067, 4426, 10855, 7031, 2362};
    const int64_t sb[7] = {3391, 4256, 9185, 7706, 2600, 13362, 16508};
    const size_t count = 116416, y_start = 7569;
    float *big = xcalloc(count, sizeof(float));
    unsigned char *role = xcalloc(count, 1); /* 1: an element of x, 2: of y */
    opf_tensor bx = view_f32(big, 7, shape7, sa), by = view_f32(big + y_start, 7, shape7, sb);
    int meet = 0;
    for (int pass = 1; pass <= 2; pass++) {
        for (int64_t i = 0; i < 768; i++) {
            int64_t off = pass == 1 ? 0 : (int64_t)y_start, rem = i;
            for (int d = 6; d >= 0; d--) {
                off += (rem % shape7[d]) * (pass == 1 ? sa : sb)[d];
                rem /= shape7[d];
            }
            meet |= role[off] != 0 && role[off] != pass;
            role[off] = (unsigned char)pass;
            big[off] = pass == 1 ? -1.0f : 5.0f;
        }
    }
    CHECK(!meet, "the instance is disjoint");
    opf_status s = opf_relu(&bx, &by);
    CHECK(s == OPF_OK || (s == OPF_E_LAYOUT && strstr(opf_last_error(), "too irregular") != NULL),
          "irregular disjoint views: %s: %s", opf_status_name(s), opf_last_error());
    int wrong = 0;
    for (size_t i = 0; i < count; i++) {
        float want = role[i] == 1 ? -1.0f : role[i] == 2 ? (s == OPF_OK ? 0.0f : 5.0f) : 0.0f;
        wrong += big[i] != want;
    }
    CHECK(wrong == 0, "%d elements wrong after relu of irregular views", wrong);
    printf("  irregular disjoint views: %s%s%s\n", opf_status_name(s), s == OPF_OK ? "" : ": ",
           s == OPF_OK ? "" : opf_last_error());
    free(role);
    free(big);
}

int main(void) {
    RUN_TEST(test_empty_tensor_with_overflowing_dims);
    RUN_TEST(test_int64_min_stride);
    RUN_TEST(test_byte_offset_wraps);
    RUN_TEST(test_strides_wrap_address_space);
    RUN_TEST(test_offsets_overflow_when_summed);
    RUN_TEST(test_dense_extreme_strides_on_unit_dims);
    RUN_TEST(test_dense_empty_k);
    RUN_TEST(test_validate_gradient_rule_counts);
    RUN_TEST(test_validate_check_input_b);
    RUN_TEST(test_validate_engine_rows);
    RUN_TEST(test_mutated_input_overlapping_another_input);
    RUN_TEST(test_interleaved_disjoint_views);
    RUN_TEST(test_interleaved_overlapping_views);
    RUN_TEST(test_output_self_overlap_is_exact);
    RUN_TEST(test_random_views_against_brute_force);
    RUN_TEST(test_overlap_of_mixed_element_sizes);
    RUN_TEST(test_large_views);
    return harness_summary();
}
