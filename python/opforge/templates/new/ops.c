/*
 * ${name}.c: the ops of table "${name}", loaded by opforge into NumPy,
 * PyTorch, TensorFlow and JAX:
 *
 *     import opforge.torch as ot
 *     ops = ot.load_ops("${name}.c")      # compiled on first use, then cached
 *     y = ops.leaky_relu(x, slope=0.1)    # torch.ops.${name}.leaky_relu
 *
 * Each op is a row: its inputs, outputs, attributes, dtypes, shape rule and
 * gradient rule are data, from which every framework gets its op, shape
 * function and gradient. A compute function sees validated tensors: the
 * dtypes and shapes the row declares, on the CPU, with any strides.
 */
#include <opforge.h>

/* Number of elements of t. */
static int64_t numel(const opf_tensor *t) {
    int64_t n = 1;
    for (int32_t d = 0; d < t->ndim; ++d)
        n *= t->shape[d];
    return n;
}

/* Offset, in elements, of element i (counted in C order) of t. */
static int64_t offset_of(const opf_tensor *t, int64_t i) {
    if (!t->strides) /* NULL strides: contiguous */
        return i;
    int64_t offset = 0;
    for (int32_t d = t->ndim - 1; d >= 0; --d) {
        offset += (i % t->shape[d]) * t->strides[d];
        i /= t->shape[d];
    }
    return offset;
}

static double load(const opf_tensor *t, int64_t i) {
    const char *base = (const char *)t->data + t->byte_offset;
    return t->dtype == OPF_F32 ? ((const float *)base)[offset_of(t, i)] : ((const double *)base)[offset_of(t, i)];
}

static void store(const opf_tensor *t, int64_t i, double v) {
    char *base = (char *)t->data + t->byte_offset;
    if (t->dtype == OPF_F32)
        ((float *)base)[offset_of(t, i)] = (float)v;
    else
        ((double *)base)[offset_of(t, i)] = v;
}

/* y = x > 0 ? x : slope * x */
static opf_status leaky_relu_compute(const opf_tensor *const *in, const opf_tensor *const *out,
                                     const opf_attr_value *attrs) {
    double slope = attrs[0].f;
    for (int64_t i = 0, n = numel(in[0]); i < n; ++i) {
        double x = load(in[0], i);
        store(out[0], i, x > 0 ? x : slope * x);
    }
    return OPF_OK;
}

/* dx = x > 0 ? dy : slope * dy */
static opf_status leaky_relu_grad_compute(const opf_tensor *const *in, const opf_tensor *const *out,
                                          const opf_attr_value *attrs) {
    double slope = attrs[0].f;
    for (int64_t i = 0, n = numel(in[0]); i < n; ++i) {
        double dy = load(in[0], i);
        store(out[0], i, load(in[1], i) > 0 ? dy : slope * dy);
    }
    return OPF_OK;
}

static const opf_op_def leaky_relu = {
    .name = "leaky_relu",
    .doc = "y = x where x > 0, else slope * x.",
    .flags = OPF_OP_ELEMENTWISE,
    .dtypes = OPF_DTYPES_F32 | OPF_DTYPES_F64,
    .num_inputs = 1,
    .inputs = {{.name = "x", .doc = "input, any shape"}},
    .num_outputs = 1,
    .outputs = {{.name = "y", .doc = "the result, the shape of x"}},
    .output_shapes = {{.kind = OPF_SHAPE_LIKE, .like = 0}},
    .num_attrs = 1,
    .attrs = {{.name = "slope", .type = OPF_ATTR_FLOAT, .default_value = {.f = 0.01}, .doc = "slope for x <= 0"}},
    /* The gradient of x is leaky_relu_grad(dy, x) (slope: the attribute of the same name). */
    .num_grads = 1,
    .grads = {{.op = "leaky_relu_grad",
               .num_sources = 2,
               .sources = {{OPF_FROM_GRAD, 0}, {OPF_FROM_INPUT, 0}},
               .num_produces = 1,
               .produces = {0}}},
    .compute = leaky_relu_compute,
};

static const opf_op_def leaky_relu_grad = {
    .name = "leaky_relu_grad",
    .doc = "dx = dy where x > 0, else slope * dy: the gradient of leaky_relu.",
    .flags = OPF_OP_ELEMENTWISE,
    .dtypes = OPF_DTYPES_F32 | OPF_DTYPES_F64,
    .num_inputs = 2,
    .inputs = {{.name = "dy", .doc = "gradient of y"}, {.name = "x", .doc = "leaky_relu's input"}},
    .num_outputs = 1,
    .outputs = {{.name = "dx", .doc = "gradient of x"}},
    .output_shapes = {{.kind = OPF_SHAPE_LIKE, .like = 0}},
    .num_attrs = 1,
    .attrs = {{.name = "slope", .type = OPF_ATTR_FLOAT, .default_value = {.f = 0.01}, .doc = "slope for x <= 0"}},
    .num_checks = 1,
    .checks = {{.kind = OPF_CHECK_SAME_SHAPE, .a = 0, .b = 1}},
    /* Linear in dy with the same mask: its own gradient (so second order works). */
    .num_grads = 1,
    .grads = {{.op = "leaky_relu_grad",
               .num_sources = 2,
               .sources = {{OPF_FROM_GRAD, 0}, {OPF_FROM_INPUT, 1}},
               .num_produces = 1,
               .produces = {0}}},
    .compute = leaky_relu_grad_compute,
};

static const opf_op_def *const rows[] = {&leaky_relu, &leaky_relu_grad};
static const opf_op_table table = {
    .abi_version = OPF_TABLE_ABI_VERSION, .name = "${name}", .num_ops = 2, .ops = rows};
OPF_EXPORT_OP_TABLE(table)
