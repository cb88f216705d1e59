/*
 * test_table.c — the op table: the built-in table's consistency, lookup,
 * shape inference (with unknown dims), validation of broken tables, a user's
 * own table run through opf_op_run, and opf_tensor's DLPack layout.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define CHECK_STATUS(call, want)                                                                                       \
    do {                                                                                                               \
        opf_status st_ = (call);                                                                                       \
        CHECK(st_ == (want), "%s: status %s, want %s; message \"%s\"", #call, opf_status_name(st_),                    \
              opf_status_name(want), opf_last_error());                                                                \
    } while (0)

/* ------------------------------------------------------------------------ */
/* DLPack layout                                                             */
/* ------------------------------------------------------------------------ */

/* DLPack's DLTensor, declared here field by field (dlpack.h v0.8+/1.x). */
typedef struct dl_device {
    int32_t device_type;
    int32_t device_id;
} dl_device;
typedef struct dl_data_type {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} dl_data_type;
typedef struct dl_tensor {
    void *data;
    dl_device device;
    int32_t ndim;
    dl_data_type dtype;
    int64_t *shape;
    int64_t *strides;
    uint64_t byte_offset;
} dl_tensor;

#define SAME_FIELD(a, b)                                                                                               \
    _Static_assert(offsetof(dl_tensor, a) == offsetof(opf_tensor, b), "offset of " #b);                                \
    _Static_assert(sizeof(((dl_tensor *)0)->a) == sizeof(((opf_tensor *)0)->b), "size of " #b)
_Static_assert(sizeof(dl_tensor) == sizeof(opf_tensor), "opf_tensor has the size of DLTensor");
_Static_assert(_Alignof(dl_tensor) == _Alignof(opf_tensor), "opf_tensor has the alignment of DLTensor");
SAME_FIELD(data, data);
SAME_FIELD(device, device);
SAME_FIELD(device.device_type, device.type);
SAME_FIELD(device.device_id, device.id);
SAME_FIELD(ndim, ndim);
SAME_FIELD(dtype, dtype);
SAME_FIELD(shape, shape);
SAME_FIELD(strides, strides);
SAME_FIELD(byte_offset, byte_offset);
_Static_assert(OPF_DEVICE_CPU == 1 && OPF_DEVICE_CUDA == 2, "kDLCPU, kDLCUDA");

static dl_data_type dl_of(opf_dtype d) {
    dl_data_type out;
    memcpy(&out, &d, sizeof out);
    return out;
}

TEST(test_dlpack_layout) {
    static const struct {
        opf_dtype d;
        uint8_t code, bits;
    } want[] = {{OPF_F32, 2, 32}, {OPF_F64, 2, 64}, {OPF_F16, 2, 16}, {OPF_BF16, 4, 16}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        dl_data_type t = dl_of(want[i].d);
        CHECK(t.code == want[i].code && t.bits == want[i].bits && t.lanes == 1,
              "%s reads as DLDataType {code %u, bits %u, lanes %u}, want {%u, %u, 1}", opf_dtype_name(want[i].d),
              t.code, t.bits, t.lanes, want[i].code, want[i].bits);
    }
    /* A whole tensor read back as a DLTensor. */
    float v[6];
    const int64_t shape[2] = {2, 3}, strides[2] = {3, 1};
    opf_tensor t = opf_tensor_make(v, OPF_F64, 2, shape);
    t.strides = strides;
    t.byte_offset = 8;
    t.device.id = 3;
    dl_tensor dl;
    memcpy(&dl, &t, sizeof dl);
    CHECK(dl.data == (void *)v && dl.device.device_type == 1 && dl.device.device_id == 3 && dl.ndim == 2 &&
              dl.dtype.code == 2 && dl.dtype.bits == 64 && dl.dtype.lanes == 1 && dl.shape == shape &&
              dl.strides == strides && dl.byte_offset == 8,
          "opf_tensor read as DLTensor");
}

/* ------------------------------------------------------------------------ */
/* The built-in table                                                        */
/* ------------------------------------------------------------------------ */

static const char *const builtin_names[] = {"relu",  "relu_",      "relu_grad", "scale",  "add",
                                            "dense", "dense_grad", "mul",       "sum_to", "mul_grad"};

TEST(test_builtin_table) {
    const opf_op_table *t = opf_builtin_ops();
    if (!CHECK(t != NULL, "opf_builtin_ops() is NULL")) {
        return;
    }
    CHECK_STATUS(opf_op_table_validate(t), OPF_OK);
    CHECK(t->abi_version == OPF_TABLE_ABI_VERSION, "abi_version %u", (unsigned)t->abi_version);
    CHECK(t->name != NULL && strcmp(t->name, "opforge") == 0, "table name %s", t->name ? t->name : "(null)");
    CHECK(t->num_ops >= (int64_t)(sizeof builtin_names / sizeof builtin_names[0]), "num_ops %lld",
          (long long)t->num_ops);
    for (int64_t i = 0; i < t->num_ops; i++) {
        const opf_op_def *op = t->ops[i];
        if (!CHECK(op != NULL && op->name != NULL && op->name[0] != '\0', "row %lld has no name", (long long)i)) {
            continue;
        }
        CHECK(op->doc != NULL && strlen(op->doc) > 10, "%s: no doc", op->name);
        CHECK((op->compute != NULL) + (op->eltwise != NULL) + (op->row != NULL) == 1, "%s: not exactly one kernel",
              op->name);
        CHECK(op->qualname != NULL && strncmp(op->qualname, "opforge.", 8) == 0, "%s: qualname", op->name);
        /* Only sum_to passes its first input through (the same-shape gradient of add). */
        CHECK(((op->flags & OPF_OP_PASS_THROUGH) != 0) == (strcmp(op->name, "sum_to") == 0), "%s: flags 0x%x", op->name,
              (unsigned)op->flags);
        CHECK(op->dtypes == (OPF_DTYPES_F32 | OPF_DTYPES_F64), "%s: dtypes 0x%x", op->name, (unsigned)op->dtypes);
        CHECK(op->num_inputs >= 1 && op->num_inputs <= OPF_MAX_ARGS, "%s: num_inputs %d", op->name,
              (int)op->num_inputs);
        CHECK(op->num_outputs >= 0 && op->num_outputs <= OPF_MAX_ARGS, "%s: num_outputs %d", op->name,
              (int)op->num_outputs);
        for (int32_t a = 0; a < op->num_inputs; a++) {
            CHECK(op->inputs[a].name != NULL && op->inputs[a].doc != NULL, "%s: input %d", op->name, (int)a);
        }
        for (int32_t a = 0; a < op->num_outputs; a++) {
            CHECK(op->outputs[a].name != NULL && op->outputs[a].doc != NULL, "%s: output %d", op->name, (int)a);
            CHECK(op->output_shapes[a].kind != OPF_SHAPE_NONE, "%s: output %d has no shape rule", op->name, (int)a);
        }
        for (int32_t a = 0; a < op->num_attrs; a++) {
            CHECK(op->attrs[a].name != NULL && op->attrs[a].doc != NULL, "%s: attr %d", op->name, (int)a);
        }
        /* Every gradient rule names a row of this table (or is the identity). */
        for (int32_t g = 0; g < op->num_grads; g++) {
            const char *gop = op->grads[g].op;
            if (gop != NULL) {
                const opf_op_def *target = opf_op_find(t, gop);
                if (CHECK(target != NULL, "%s: gradient op %s is not in the table", op->name, gop)) {
                    CHECK(op->grads[g].num_sources == target->num_inputs, "%s: grad %d feeds %d sources to %s",
                          op->name, (int)g, (int)op->grads[g].num_sources, gop);
                }
            }
        }
        /* Every tangent rule names a row of this table (or is the identity). */
        for (int32_t g = 0; g < op->num_jvps; g++) {
            const char *jop = op->jvps[g].op;
            const opf_op_def *target = jop != NULL ? opf_op_find(t, jop) : NULL;
            CHECK(jop == NULL || (target != NULL && op->jvps[g].num_sources == target->num_inputs),
                  "%s: tangent rule %d names %s", op->name, (int)g, jop);
        }
        /* Names are unique. */
        CHECK(opf_op_find(t, op->name) == op, "%s: opf_op_find returns another row", op->name);
    }
    for (size_t i = 0; i < sizeof builtin_names / sizeof builtin_names[0]; i++) {
        const opf_op_def *op = opf_op_find(t, builtin_names[i]);
        CHECK(op != NULL && strcmp(op->name, builtin_names[i]) == 0, "opf_op_find(%s)", builtin_names[i]);
    }
    /* Differentiable ops have their gradients declared. */
    static const char *const differentiable[] = {"relu",  "relu_grad", "scale",  "add",
                                                 "dense", "mul",       "sum_to", "mul_grad"};
    for (size_t i = 0; i < sizeof differentiable / sizeof differentiable[0]; i++) {
        const opf_op_def *op = opf_op_find(t, differentiable[i]);
        CHECK(op != NULL && op->num_grads >= 1, "%s has no gradient rule", differentiable[i]);
    }
    const opf_op_def *relu_ = opf_op_find(t, "relu_");
    CHECK(relu_ != NULL && relu_->num_inputs == 1 && (relu_->inputs[0].flags & OPF_ARG_MUTATED),
          "relu_ mutates its input");
    const opf_op_def *relu = opf_op_find(t, "relu"), *add = opf_op_find(t, "add");
    CHECK(relu != NULL && (relu->flags & OPF_OP_ELEMENTWISE), "relu is elementwise");
    CHECK(add != NULL && (add->flags & OPF_OP_ELEMENTWISE), "add is elementwise");
    const opf_op_def *dense = opf_op_find(t, "dense");
    CHECK(dense != NULL && !(dense->flags & OPF_OP_ELEMENTWISE), "dense is not elementwise");

    CHECK(opf_op_find(t, "no_such_op") == NULL, "unknown name");
    CHECK(opf_op_find(t, "") == NULL, "empty name");
    CHECK(opf_op_find(t, "Relu") == NULL, "names are case-sensitive");
    CHECK(opf_op_find(t, "relu_grad_") == NULL, "no prefix matching");
    CHECK(opf_op_find(t, NULL) == NULL, "NULL name");
    CHECK(opf_op_find(NULL, "relu") == NULL, "NULL table");
}

/* ------------------------------------------------------------------------ */
/* Shape inference                                                           */
/* ------------------------------------------------------------------------ */

static opf_tensor shape_only(int32_t ndim, const int64_t *shape) { return opf_tensor_make(NULL, OPF_F32, ndim, shape); }

/* Infers output `out` of row `name` and compares with want (ndim, dims). */
static void expect_shape(const char *name, const opf_tensor *const *inputs, int32_t out, opf_status want_status,
                         int32_t want_ndim, const int64_t *want) {
    const opf_op_def *op = opf_op_find(opf_builtin_ops(), name);
    if (!CHECK(op != NULL, "no row %s", name)) {
        return;
    }
    int32_t ndim = -7;
    int64_t shape[OPF_MAX_RANK];
    opf_status st = opf_op_infer_shape(op, inputs, out, &ndim, shape);
    if (!CHECK(st == want_status, "infer %s output %d: status %s, want %s (\"%s\")", name, (int)out,
               opf_status_name(st), opf_status_name(want_status), opf_last_error())) {
        return;
    }
    if (st != OPF_OK) {
        CHECK(strstr(opf_last_error(), name) != NULL, "infer %s: message \"%s\" does not name the op", name,
              opf_last_error());
        return;
    }
    char got_s[128], want_s[128];
    fmt_shape(got_s, sizeof got_s, ndim, shape);
    fmt_shape(want_s, sizeof want_s, want_ndim, want);
    CHECK(strcmp(got_s, want_s) == 0, "infer %s output %d: %s, want %s", name, (int)out, got_s, want_s);
}

TEST(test_infer_shape) {
    const int64_t s2u3[3] = {2, -1, 3}, s45[2] = {4, 5}, s4u[2] = {4, -1}, s54[2] = {5, 4}, su3[2] = {-1, 3},
                  su5[2] = {-1, 5}, s57[2] = {5, 7}, s3u[2] = {3, -1}, su4[2] = {-1, 4}, s35[2] = {3, 5},
                  s64[2] = {6, 4}, s7[1] = {7}, s58[2] = {5, 8}, s235[3] = {2, 3, 5}, s34[2] = {3, 4}, s4[1] = {4},
                  s3[1] = {3}, s34u[2] = {3, -1};
    opf_tensor t2u3 = shape_only(3, s2u3), t45 = shape_only(2, s45), t4u = shape_only(2, s4u), t54 = shape_only(2, s54),
               tu3 = shape_only(2, su3), tu5 = shape_only(2, su5), t57 = shape_only(2, s57), t3u = shape_only(2, s3u),
               tu4 = shape_only(2, su4), t35 = shape_only(2, s35), t64 = shape_only(2, s64), t7 = shape_only(1, s7),
               t58 = shape_only(2, s58), t235 = shape_only(3, s235), t34 = shape_only(2, s34), t4 = shape_only(1, s4),
               t0d = shape_only(0, NULL), t3 = shape_only(1, s3), t34u = shape_only(2, s34u);

    expect_shape("relu", (const opf_tensor *[]){&t2u3}, 0, OPF_OK, 3, s2u3);
    expect_shape("relu", (const opf_tensor *[]){&t0d}, 0, OPF_OK, 0, NULL);
    expect_shape("scale", (const opf_tensor *[]){&t45}, 0, OPF_OK, 2, s45);
    expect_shape("relu_grad", (const opf_tensor *[]){&t45, &t4u}, 0, OPF_OK, 2, s45);
    expect_shape("relu_grad", (const opf_tensor *[]){&t45, &t54}, 0, OPF_E_SHAPE, 0, NULL);
    expect_shape("add", (const opf_tensor *[]){&tu3, &tu3}, 0, OPF_OK, 2, su3);
    expect_shape("add", (const opf_tensor *[]){&t45, &t54}, 0, OPF_E_SHAPE, 0, NULL);
    expect_shape("add", (const opf_tensor *[]){&t45, &t4}, 0, OPF_E_SHAPE, 0, NULL);
    {
        /* add [4,-1] + [4,5]: the unknown dim passes; the result may keep it unknown or take 5. */
        const opf_op_def *add = opf_op_find(opf_builtin_ops(), "add");
        int32_t ndim = 0;
        int64_t shape[OPF_MAX_RANK] = {0};
        if (add != NULL) {
            CHECK_STATUS(opf_op_infer_shape(add, (const opf_tensor *[]){&t4u, &t45}, 0, &ndim, shape), OPF_OK);
            CHECK(ndim == 2 && shape[0] == 4 && (shape[1] == -1 || shape[1] == 5), "add [4,-1]+[4,5] -> [%lld,%lld]",
                  (long long)shape[0], (long long)shape[1]);
        }
    }

    expect_shape("dense", (const opf_tensor *[]){&tu5, &t57, NULL}, 0, OPF_OK, 2, (const int64_t[]){-1, 7});
    expect_shape("dense", (const opf_tensor *[]){&t3u, &tu4, NULL}, 0, OPF_OK, 2, (const int64_t[]){3, 4});
    expect_shape("dense", (const opf_tensor *[]){&t57, &t7 /* w rank 1 */, NULL}, 0, OPF_E_SHAPE, 0, NULL);
    expect_shape("dense", (const opf_tensor *[]){&t35, &t64, NULL}, 0, OPF_E_SHAPE, 0, NULL);
    expect_shape("dense", (const opf_tensor *[]){&t235, &t57, NULL}, 0, OPF_E_SHAPE, 0, NULL);
    expect_shape("dense", (const opf_tensor *[]){&t35, &t58, &t7}, 0, OPF_E_SHAPE, 0, NULL);
    expect_shape("dense", (const opf_tensor *[]){&t35, &t57, &t7}, 0, OPF_OK, 2, (const int64_t[]){3, 7});
    expect_shape("dense", (const opf_tensor *[]){&t35, &t34u, NULL}, 0, OPF_E_SHAPE, 0, NULL);

    /* dense_grad: dx like x, dw like w, db [M]. */
    const opf_tensor *dg[4] = {&tu4, &tu3, &t34, NULL};
    expect_shape("dense_grad", dg, 0, OPF_OK, 2, su3);
    expect_shape("dense_grad", dg, 1, OPF_OK, 2, s34);
    expect_shape("dense_grad", dg, 2, OPF_OK, 1, s4);
    const opf_tensor *dg_bad[4] = {&tu4, &t3, &t34, NULL};
    expect_shape("dense_grad", dg_bad, 0, OPF_E_SHAPE, 0, NULL);

    /* Bad requests. */
    const opf_op_def *relu = opf_op_find(opf_builtin_ops(), "relu");
    int32_t ndim;
    int64_t shape[OPF_MAX_RANK];
    if (relu != NULL) {
        CHECK_STATUS(opf_op_infer_shape(relu, (const opf_tensor *[]){&t45}, 1, &ndim, shape), OPF_E_INVALID);
        CHECK_STATUS(opf_op_infer_shape(relu, (const opf_tensor *[]){&t45}, -1, &ndim, shape), OPF_E_INVALID);
        CHECK_STATUS(opf_op_infer_shape(relu, (const opf_tensor *[]){NULL}, 0, &ndim, shape), OPF_E_INVALID);
        CHECK_STATUS(opf_op_infer_shape(relu, (const opf_tensor *[]){&t45}, 0, NULL, shape), OPF_E_INVALID);
        CHECK_STATUS(opf_op_infer_shape(relu, (const opf_tensor *[]){&t45}, 0, &ndim, NULL), OPF_E_INVALID);
    }
    CHECK_STATUS(opf_op_infer_shape(NULL, (const opf_tensor *[]){&t45}, 0, &ndim, shape), OPF_E_INVALID);
    const opf_op_def *relu_ = opf_op_find(opf_builtin_ops(), "relu_");
    if (relu_ != NULL) {
        CHECK_STATUS(opf_op_infer_shape(relu_, (const opf_tensor *[]){&t45}, 0, &ndim, shape), OPF_E_INVALID);
    }
}

/* ------------------------------------------------------------------------ */
/* A user's own table                                                        */
/* ------------------------------------------------------------------------ */

static int compute_calls = 0;

/* Address of element i (C order) of t. */
static char *elem_at(const opf_tensor *t, int64_t i) {
    size_t esz = opf_dtype_size(t->dtype);
    int64_t off = 0, rem = i;
    for (int32_t d = t->ndim - 1; d >= 0; d--) {
        int64_t stride = 1;
        if (t->strides != NULL) {
            stride = t->strides[d];
        } else {
            for (int32_t e = d + 1; e < t->ndim; e++) {
                stride *= t->shape[e];
            }
        }
        off += (rem % t->shape[d]) * stride;
        rem /= t->shape[d];
    }
    return (char *)t->data + t->byte_offset + off * (int64_t)esz;
}

static int64_t numel_of(const opf_tensor *t) {
    int64_t n = 1;
    for (int32_t d = 0; d < t->ndim; d++) {
        n *= t->shape[d];
    }
    return n;
}

/* y = -x, written by the "user" against the public header only. */
static opf_status negate_compute(const opf_tensor *const *in, const opf_tensor *const *out,
                                 const opf_attr_value *attrs) {
    (void)attrs;
    compute_calls++;
    int64_t n = numel_of(in[0]);
    for (int64_t i = 0; i < n; i++) {
        if (in[0]->dtype == OPF_F32) {
            *(float *)elem_at(out[0], i) = -*(const float *)elem_at(in[0], i);
        } else {
            *(double *)elem_at(out[0], i) = -*(const double *)elem_at(in[0], i);
        }
    }
    return OPF_OK;
}

/* y = a - b. */
static opf_status sub_compute(const opf_tensor *const *in, const opf_tensor *const *out, const opf_attr_value *attrs) {
    (void)attrs;
    compute_calls++;
    int64_t n = numel_of(in[0]);
    for (int64_t i = 0; i < n; i++) {
        *(double *)elem_at(out[0], i) = *(const double *)elem_at(in[0], i) - *(const double *)elem_at(in[1], i);
    }
    return OPF_OK;
}

/* y[i] = sum_j x[i, j] * scale + offset; fails with OPF_E_UNSUPPORTED when scale is 0. */
static opf_status rowsum_compute(const opf_tensor *const *in, const opf_tensor *const *out,
                                 const opf_attr_value *attrs) {
    compute_calls++;
    if (attrs[0].f == 0.0) {
        return OPF_E_UNSUPPORTED;
    }
    int64_t rows = in[0]->shape[0], cols = in[0]->shape[1];
    for (int64_t i = 0; i < rows; i++) {
        double s = 0;
        for (int64_t j = 0; j < cols; j++) {
            s += *(const double *)elem_at(in[0], i * cols + j);
        }
        *(double *)elem_at(out[0], i) = s * attrs[0].f + (double)attrs[1].i;
    }
    return OPF_OK;
}

static const opf_op_def user_negate = {
    .name = "negate",
    .doc = "y = -x, elementwise.",
    .flags = OPF_OP_ELEMENTWISE,
    .dtypes = OPF_DTYPES_F32 | OPF_DTYPES_F64,
    .num_inputs = 1,
    .inputs = {{.name = "x", .doc = "input"}},
    .num_outputs = 1,
    .outputs = {{.name = "y", .doc = "-x"}},
    .output_shapes = {{.kind = OPF_SHAPE_LIKE, .like = 0}},
    .num_grads = 1,
    .grads = {{.op = "negate", .num_sources = 1, .sources = {{OPF_FROM_GRAD, 0}}, .num_produces = 1, .produces = {0}}},
    .compute = negate_compute,
};

static const opf_op_def user_sub = {
    .name = "sub",
    .doc = "y = a - b for two float64 tensors of one shape.",
    .flags = OPF_OP_ELEMENTWISE,
    .dtypes = OPF_DTYPES_F64,
    .num_inputs = 2,
    .inputs = {{.name = "a", .doc = "minuend"}, {.name = "b", .doc = "subtrahend"}},
    .num_outputs = 1,
    .outputs = {{.name = "y", .doc = "a - b"}},
    .output_shapes = {{.kind = OPF_SHAPE_LIKE, .like = 0}},
    .num_checks = 1,
    .checks = {{.kind = OPF_CHECK_SAME_SHAPE, .a = 0, .b = 1}},
    .num_grads = 2,
    .grads = {{.op = NULL, .num_sources = 1, .sources = {{OPF_FROM_GRAD, 0}}, .num_produces = 1, .produces = {0}},
              {.op = "negate", .num_sources = 1, .sources = {{OPF_FROM_GRAD, 0}}, .num_produces = 1, .produces = {1}}},
    .compute = sub_compute,
};

static const opf_op_def user_rowsum = {
    .name = "rowsum",
    .doc = "y[i] = scale * sum_j x[i, j] + offset.",
    .dtypes = OPF_DTYPES_F64,
    .num_inputs = 1,
    .inputs = {{.name = "x", .doc = "matrix [R, C]"}},
    .num_outputs = 1,
    .outputs = {{.name = "y", .doc = "[R]"}},
    .output_shapes = {{.kind = OPF_SHAPE_DIMS, .rank = 1, .dims = {{0, -2}}}},
    .num_attrs = 2,
    .attrs = {{.name = "scale", .type = OPF_ATTR_FLOAT, .default_value = {.f = 1.5}, .doc = "factor"},
              {.name = "offset", .type = OPF_ATTR_INT, .default_value = {.i = 10}, .doc = "added"}},
    .num_checks = 1,
    .checks = {{.kind = OPF_CHECK_RANK, .a = 0, .rank = 2}},
    .compute = rowsum_compute,
};

static const opf_op_def *const user_rows[] = {&user_negate, &user_sub, &user_rowsum};
static const opf_op_table user_table = {OPF_TABLE_ABI_VERSION, "mylib", 3, user_rows};
OPF_EXPORT_OP_TABLE(user_table)

TEST(test_user_table_validates) {
    CHECK(opforge_op_table() == &user_table, "OPF_EXPORT_OP_TABLE exports the table");
    CHECK_STATUS(opf_op_table_validate(&user_table), OPF_OK);
    CHECK(opf_op_find(&user_table, "sub") == &user_sub, "find sub");
    CHECK(opf_op_find(&user_table, "relu") == NULL, "a user table does not see the built-ins");
    const opf_op_table empty = {OPF_TABLE_ABI_VERSION, "empty", 0, NULL};
    CHECK_STATUS(opf_op_table_validate(&empty), OPF_OK);
}

/* Validates a table of copies of the user rows with one row modified. */
static opf_status validate_modified(const opf_op_def *modified, int which) {
    const opf_op_def *rows[3] = {&user_negate, &user_sub, &user_rowsum};
    rows[which] = modified;
    const opf_op_table t = {OPF_TABLE_ABI_VERSION, "mylib", 3, rows};
    return opf_op_table_validate(&t);
}

#define EXPECT_INVALID_ROW(row, which, what)                                                                           \
    do {                                                                                                               \
        opf_status st_ = validate_modified(&(row), (which));                                                           \
        CHECK(st_ == OPF_E_INVALID, "%s: status %s (\"%s\"), want OPF_E_INVALID", (what), opf_status_name(st_),        \
              opf_last_error());                                                                                       \
        if (st_ == OPF_E_INVALID && (row).name != NULL && (row).name[0] != '\0') {                                     \
            CHECK(strstr(opf_last_error(), (row).name) != NULL, "%s: message \"%s\" does not name op %s", (what),      \
                  opf_last_error(), (row).name);                                                                       \
        }                                                                                                              \
    } while (0)

TEST(test_validate_rejects_broken_tables) {
    CHECK_STATUS(opf_op_table_validate(NULL), OPF_E_INVALID);
    {
        opf_op_table t = user_table;
        t.abi_version = OPF_TABLE_ABI_VERSION + 1;
        CHECK_STATUS(opf_op_table_validate(&t), OPF_E_INVALID);
        t.abi_version = 0;
        CHECK_STATUS(opf_op_table_validate(&t), OPF_E_INVALID);
    }
    {
        opf_op_table t = user_table;
        t.num_ops = -1;
        CHECK_STATUS(opf_op_table_validate(&t), OPF_E_INVALID);
        t.num_ops = 3;
        t.ops = NULL;
        CHECK_STATUS(opf_op_table_validate(&t), OPF_E_INVALID);
    }
    {
        const opf_op_def *rows[3] = {&user_negate, &user_sub, NULL};
        const opf_op_table t = {OPF_TABLE_ABI_VERSION, "mylib", 3, rows};
        CHECK_STATUS(opf_op_table_validate(&t), OPF_E_INVALID);
    }
    {
        /* Duplicate names: the same row twice, and two rows named alike. */
        const opf_op_def *rows[3] = {&user_negate, &user_sub, &user_negate};
        const opf_op_table t = {OPF_TABLE_ABI_VERSION, "mylib", 3, rows};
        CHECK_STATUS(opf_op_table_validate(&t), OPF_E_INVALID);
        opf_op_def twin = user_rowsum;
        twin.name = "sub";
        EXPECT_INVALID_ROW(twin, 2, "two rows named sub");
    }
    opf_op_def r;

    r = user_negate, r.name = NULL;
    EXPECT_INVALID_ROW(r, 0, "row without a name");
    r = user_negate, r.name = "";
    EXPECT_INVALID_ROW(r, 0, "row with an empty name");
    r = user_negate, r.compute = NULL;
    EXPECT_INVALID_ROW(r, 0, "no compute");
    r = user_negate, r.dtypes = 0;
    EXPECT_INVALID_ROW(r, 0, "no dtypes");
    r = user_negate, r.dtypes = 0x100;
    EXPECT_INVALID_ROW(r, 0, "unknown dtype bit");
    r = user_negate, r.flags = 0x80;
    EXPECT_INVALID_ROW(r, 0, "unknown flag bit");
    r = user_sub, r.flags |= OPF_OP_PASS_THROUGH;
    CHECK_STATUS(validate_modified(&r, 1), OPF_OK); /* y is a when a - b is a, which the author vouches for */
    r.num_outputs = 0;
    EXPECT_INVALID_ROW(r, 1, "pass-through row without an output");
    r = user_sub, r.flags |= OPF_OP_PASS_THROUGH, r.num_outputs = 2;
    r.outputs[1] = r.outputs[0], r.outputs[1].name = "z", r.output_shapes[1] = r.output_shapes[0];
    EXPECT_INVALID_ROW(r, 1, "pass-through row with two outputs");
    r = user_sub, r.flags |= OPF_OP_PASS_THROUGH, r.inputs[0].flags = OPF_ARG_OPTIONAL;
    EXPECT_INVALID_ROW(r, 1, "pass-through row whose first input is optional");
    r = user_rowsum, r.flags |= OPF_OP_PASS_THROUGH;
    EXPECT_INVALID_ROW(r, 2, "pass-through row that is not elementwise");
    r = user_sub, r.flags |= OPF_OP_PASS_THROUGH, r.inputs[0].flags = OPF_ARG_SHAPE_ONLY;
    EXPECT_INVALID_ROW(r, 1, "pass-through row whose first input is shape only");
    r = user_sub, r.inputs[1].flags = OPF_ARG_SHAPE_ONLY;
    CHECK_STATUS(validate_modified(&r, 1), OPF_OK); /* b's values unread: the author's claim */
    r = user_sub, r.inputs[1].flags = OPF_ARG_SHAPE_ONLY | OPF_ARG_MUTATED;
    EXPECT_INVALID_ROW(r, 1, "an input written in place and shape only");
    r = user_sub, r.outputs[0].flags = OPF_ARG_SHAPE_ONLY;
    EXPECT_INVALID_ROW(r, 1, "a shape-only output");
    r = user_sub, r.outputs[0].flags = OPF_ARG_MUTATED;
    EXPECT_INVALID_ROW(r, 1, "an output written in place");
    r = user_sub, r.inputs[0].flags = 0x40;
    EXPECT_INVALID_ROW(r, 1, "an unknown input flag");

    r = user_negate, r.num_inputs = OPF_MAX_ARGS + 1;
    EXPECT_INVALID_ROW(r, 0, "num_inputs > OPF_MAX_ARGS");
    r = user_negate, r.num_inputs = -1;
    EXPECT_INVALID_ROW(r, 0, "num_inputs < 0");
    r = user_negate, r.num_outputs = OPF_MAX_ARGS + 1;
    EXPECT_INVALID_ROW(r, 0, "num_outputs > OPF_MAX_ARGS");
    r = user_sub, r.num_inputs = 3; /* input 2 has no name */
    EXPECT_INVALID_ROW(r, 1, "an unnamed input");
    r = user_rowsum, r.num_attrs = OPF_MAX_ATTRS + 1;
    EXPECT_INVALID_ROW(r, 2, "num_attrs > OPF_MAX_ATTRS");
    r = user_rowsum, r.attrs[1].type = (opf_attr_type)9;
    EXPECT_INVALID_ROW(r, 2, "unknown attr type");
    r = user_rowsum, r.attrs[1].name = NULL;
    EXPECT_INVALID_ROW(r, 2, "unnamed attr");
    r = user_rowsum;
    r.attrs[1] = (opf_attr_def){.name = "mode",
                                .type = OPF_ATTR_ENUM,
                                .default_value = {.i = 2},
                                .choices = {"a", "b"},
                                .doc = "enum with an out-of-range default"};
    EXPECT_INVALID_ROW(r, 2, "enum default out of range");

    /* Shape checks and rules naming inputs that do not exist. */
    r = user_sub, r.checks[0].b = 2;
    EXPECT_INVALID_ROW(r, 1, "check input b out of range");
    r = user_sub, r.checks[0].a = -1;
    EXPECT_INVALID_ROW(r, 1, "check input a negative");
    r = user_rowsum, r.checks[0].a = 1;
    EXPECT_INVALID_ROW(r, 2, "rank check on input 1 of a 1-input op");
    r = user_sub, r.checks[0].kind = (opf_check_kind)42;
    EXPECT_INVALID_ROW(r, 1, "unknown check kind");
    r = user_sub, r.num_checks = OPF_MAX_CHECKS + 1;
    EXPECT_INVALID_ROW(r, 1, "num_checks > OPF_MAX_CHECKS");
    r = user_negate, r.output_shapes[0].like = 1;
    EXPECT_INVALID_ROW(r, 0, "shape rule like input 1 of a 1-input op");
    r = user_negate, r.output_shapes[0].kind = OPF_SHAPE_NONE;
    EXPECT_INVALID_ROW(r, 0, "output without a shape rule");
    r = user_rowsum, r.output_shapes[0].dims[0].input = 1;
    EXPECT_INVALID_ROW(r, 2, "dims rule naming input 1");
    r = user_rowsum, r.output_shapes[0].rank = OPF_MAX_RULE_RANK + 1;
    EXPECT_INVALID_ROW(r, 2, "dims rule rank > OPF_MAX_RULE_RANK");

    /* Gradient rules. */
    r = user_negate, r.grads[0].op = "missing_op";
    EXPECT_INVALID_ROW(r, 0, "gradient op missing from the table");
    r = user_sub, r.grads[1].op = "relu"; /* a built-in, but not in this table */
    EXPECT_INVALID_ROW(r, 1, "gradient op from another table");
    r = user_negate, r.grads[0].sources[0].index = 1;
    EXPECT_INVALID_ROW(r, 0, "gradient source out of range");
    r = user_negate, r.grads[0].sources[0].kind = (opf_grad_source_kind)9;
    EXPECT_INVALID_ROW(r, 0, "gradient source of unknown kind");
    r = user_negate, r.grads[0].produces[0] = 3;
    EXPECT_INVALID_ROW(r, 0, "gradient produces an unknown input");
    r = user_negate, r.num_grads = OPF_MAX_GRADS + 1;
    EXPECT_INVALID_ROW(r, 0, "num_grads > OPF_MAX_GRADS");
    r = user_negate, r.grads[0].num_sources = 2;
    EXPECT_INVALID_ROW(r, 0, "gradient feeds 2 sources to a 1-input op");

    /* The untouched table is still fine (validation has no side effects). */
    CHECK_STATUS(opf_op_table_validate(&user_table), OPF_OK);
}

TEST(test_user_ops_run) {
    const int64_t s23[2] = {2, 3}, s32[2] = {3, 2}, s2[1] = {2}, s3[1] = {3};
    /* negate, float32 and float64, out of place, strided and in place. */
    float xf[6] = {1, -2, 3, -4, 5, -6}, yf[6] = {0};
    opf_tensor x = opf_tensor_make(xf, OPF_F32, 2, s23), y = opf_tensor_make(yf, OPF_F32, 2, s23);
    const opf_tensor *in1[1] = {&x}, *out1[1] = {&y};
    compute_calls = 0;
    CHECK_STATUS(opf_op_run(&user_negate, in1, out1, NULL), OPF_OK);
    CHECK_CLOSE_F32(yf, ((float[]){-1, 2, -3, 4, -5, 6}), 6, 0, 0, "negate");
    const int64_t tr[2] = {1, 3};
    opf_tensor xt = x, y3 = opf_tensor_make(yf, OPF_F32, 2, s32);
    xt.shape = s32;
    xt.strides = tr; /* x viewed as its transpose [3,2] */
    CHECK_STATUS(opf_op_run(&user_negate, (const opf_tensor *[]){&xt}, (const opf_tensor *[]){&y3}, NULL), OPF_OK);
    CHECK_CLOSE_F32(yf, ((float[]){-1, 4, 2, -5, -3, 6}), 6, 0, 0, "negate of a transposed view");
    CHECK_STATUS(opf_op_run(&user_negate, in1, (const opf_tensor *[]){&x}, NULL), OPF_OK); /* in place */
    CHECK_CLOSE_F32(xf, ((float[]){-1, 2, -3, 4, -5, 6}), 6, 0, 0, "negate in place");
    double xd[3] = {1.5, 0, -2}, yd[3];
    opf_tensor x64 = opf_tensor_make(xd, OPF_F64, 1, s3), y64 = opf_tensor_make(yd, OPF_F64, 1, s3);
    CHECK_STATUS(opf_op_run(&user_negate, (const opf_tensor *[]){&x64}, (const opf_tensor *[]){&y64}, NULL), OPF_OK);
    CHECK_CLOSE_F64(yd, ((double[]){-1.5, 0, 2}), 3, 0, 0, "negate f64");
    CHECK(compute_calls == 4, "compute ran %d times, want 4", compute_calls);

    /* Generic validation, before compute: none of these reaches it. */
    compute_calls = 0;
    double ad[6] = {1, 2, 3, 4, 5, 6}, bd[6] = {6, 5, 4, 3, 2, 1}, od[6] = {0};
    opf_tensor a = opf_tensor_make(ad, OPF_F64, 2, s23), b = opf_tensor_make(bd, OPF_F64, 2, s23),
               bt = opf_tensor_make(bd, OPF_F64, 2, s32), o = opf_tensor_make(od, OPF_F64, 2, s23);
    CHECK_STATUS(opf_op_run(&user_sub, (const opf_tensor *[]){&a, &bt}, (const opf_tensor *[]){&o}, NULL), OPF_E_SHAPE);
    CHECK_CONTAINS(opf_last_error(), "sub");
    CHECK_CONTAINS(opf_last_error(), "shape mismatch");
    CHECK_CONTAINS(opf_last_error(), "[2,3]");
    CHECK_CONTAINS(opf_last_error(), "[3,2]");
    opf_tensor o32 = opf_tensor_make(od, OPF_F64, 2, s32);
    CHECK_STATUS(opf_op_run(&user_sub, (const opf_tensor *[]){&a, &b}, (const opf_tensor *[]){&o32}, NULL),
                 OPF_E_SHAPE);
    CHECK_CONTAINS(opf_last_error(), "y");
    /* sub accepts float64 only. */
    float af[6] = {0};
    opf_tensor a32 = opf_tensor_make(af, OPF_F32, 2, s23);
    CHECK_STATUS(opf_op_run(&user_sub, (const opf_tensor *[]){&a32, &a32}, (const opf_tensor *[]){&a32}, NULL),
                 OPF_E_DTYPE);
    CHECK_CONTAINS(opf_last_error(), "sub");
    /* Partial overlap of the output with an input. */
    opf_tensor shifted = opf_tensor_make(ad + 1, OPF_F64, 1, (const int64_t[]){5});
    opf_tensor a5 = opf_tensor_make(ad, OPF_F64, 1, (const int64_t[]){5}),
               b5 = opf_tensor_make(bd, OPF_F64, 1, (const int64_t[]){5});
    CHECK_STATUS(opf_op_run(&user_sub, (const opf_tensor *[]){&a5, &b5}, (const opf_tensor *[]){&shifted}, NULL),
                 OPF_E_LAYOUT);
    CHECK_STATUS(opf_op_run(&user_sub, (const opf_tensor *[]){&a, NULL}, (const opf_tensor *[]){&o}, NULL),
                 OPF_E_INVALID);
    CHECK(compute_calls == 0, "compute ran %d times on invalid calls", compute_calls);
    for (int i = 0; i < 6; i++) {
        CHECK(od[i] == 0.0, "output written by a rejected call: od[%d] = %g", i, od[i]);
    }
    /* And the valid call works, in place onto b. */
    CHECK_STATUS(opf_op_run(&user_sub, (const opf_tensor *[]){&a, &b}, (const opf_tensor *[]){&b}, NULL), OPF_OK);
    CHECK_CLOSE_F64(bd, ((double[]){-5, -3, -1, 1, 3, 5}), 6, 0, 0, "sub in place onto b");

    /* rowsum: a DIMS rule with a negative dim index, attrs with defaults, a
     * non-elementwise op refusing in place, and a compute error passed through. */
    double m[6] = {1, 2, 3, 4, 5, 6}, rs[2] = {0};
    opf_tensor tm = opf_tensor_make(m, OPF_F64, 2, s23), tr2 = opf_tensor_make(rs, OPF_F64, 1, s2);
    CHECK_STATUS(opf_op_run(&user_rowsum, (const opf_tensor *[]){&tm}, (const opf_tensor *[]){&tr2}, NULL), OPF_OK);
    CHECK_CLOSE_F64(rs, ((double[]){6 * 1.5 + 10, 15 * 1.5 + 10}), 2, 0, 0, "rowsum with default attrs");
    opf_attr_value attrs[2] = {{.f = -1.0}, {.i = 1}};
    CHECK_STATUS(opf_op_run(&user_rowsum, (const opf_tensor *[]){&tm}, (const opf_tensor *[]){&tr2}, attrs), OPF_OK);
    CHECK_CLOSE_F64(rs, ((double[]){-5, -14}), 2, 0, 0, "rowsum with attrs");
    opf_tensor inside = opf_tensor_make(m + 1, OPF_F64, 1, s2);
    CHECK_STATUS(opf_op_run(&user_rowsum, (const opf_tensor *[]){&tm}, (const opf_tensor *[]){&inside}, NULL),
                 OPF_E_LAYOUT);
    opf_tensor r3 = opf_tensor_make(rs, OPF_F64, 1, s3);
    CHECK_STATUS(opf_op_run(&user_rowsum, (const opf_tensor *[]){&tm}, (const opf_tensor *[]){&r3}, NULL), OPF_E_SHAPE);
    opf_tensor v3 = opf_tensor_make(m, OPF_F64, 1, s3);
    CHECK_STATUS(opf_op_run(&user_rowsum, (const opf_tensor *[]){&v3}, (const opf_tensor *[]){&tr2}, NULL),
                 OPF_E_SHAPE);
    CHECK_CONTAINS(opf_last_error(), "rowsum");
    CHECK_CONTAINS(opf_last_error(), "rank");
    attrs[0].f = 0.0;
    CHECK_STATUS(opf_op_run(&user_rowsum, (const opf_tensor *[]){&tm}, (const opf_tensor *[]){&tr2}, attrs),
                 OPF_E_UNSUPPORTED);

    /* Shape inference on the user rows. */
    int32_t ndim = 0;
    int64_t shape[OPF_MAX_RANK];
    opf_tensor unknown_rows = opf_tensor_make(NULL, OPF_F64, 2, (const int64_t[]){-1, 7});
    CHECK_STATUS(opf_op_infer_shape(&user_rowsum, (const opf_tensor *[]){&unknown_rows}, 0, &ndim, shape), OPF_OK);
    CHECK(ndim == 1 && shape[0] == -1, "rowsum of [-1,7]: ndim %d, dim %lld", (int)ndim, (long long)shape[0]);
    CHECK_STATUS(opf_op_infer_shape(&user_rowsum, (const opf_tensor *[]){&tm}, 0, &ndim, shape), OPF_OK);
    CHECK(ndim == 1 && shape[0] == 2, "rowsum of [2,3]: ndim %d, dim %lld", (int)ndim, (long long)shape[0]);
    CHECK_STATUS(opf_op_infer_shape(&user_rowsum, (const opf_tensor *[]){&v3}, 0, &ndim, shape), OPF_E_SHAPE);
}

int main(void) {
    RUN_TEST(test_dlpack_layout);
    RUN_TEST(test_builtin_table);
    RUN_TEST(test_infer_shape);
    RUN_TEST(test_user_table_validates);
    RUN_TEST(test_validate_rejects_broken_tables);
    RUN_TEST(test_user_ops_run);
    return harness_summary();
}
