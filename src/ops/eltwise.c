/*
 * eltwise.c — the elementwise ops: relu, relu_ (in place), relu_grad, scale,
 * add. Each is a table row (its declaration for every framework) plus a
 * compute function naming its kernel slots; the typed C entry points run the
 * row through opf_op_run, which does all validation.
 */
#include "cuda_kernels.h"
#include "engine.h"
#include "error.h"
#include "ops.h"

#define OPF_FLOAT_DTYPES (OPF_DTYPES_F32 | OPF_DTYPES_F64)

/* --- relu ---------------------------------------------------------------- */

static opf_status relu_compute(const opf_tensor *const *in, const opf_tensor *const *out, const opf_attr_value *attrs) {
    (void)attrs;
    return opf_eltwise_run((opf_eltwise_op){OPF_K_f32_relu, OPF_K_f64_relu}, in, out[0], 0.0);
}

const opf_op_def opf_op_relu = {
    .name = "relu",
    .doc = "Rectified linear unit: y = max(x, 0), elementwise. NaN stays NaN.",
    .flags = OPF_OP_ELEMENTWISE,
    .dtypes = OPF_FLOAT_DTYPES,
    .num_inputs = 1,
    .inputs = {{.name = "x", .doc = "input tensor, any shape"}},
    .num_outputs = 1,
    .outputs = {{.name = "y", .doc = "max(x, 0), the shape of x"}},
    .output_shapes = {{.kind = OPF_SHAPE_LIKE, .like = 0}},
    .num_grads = 1,
    .grads = {{.op = "relu_grad",
               .num_sources = 2,
               .sources = {{OPF_FROM_GRAD, 0}, {OPF_FROM_INPUT, 0}},
               .num_produces = 1,
               .produces = {0}}},
    .compute = relu_compute,
    .compute_cuda = OPF_CUDA_KERNEL(opf_cuda_relu_compute),
};

/* --- relu_ (in place) ------------------------------------------------------ */

static opf_status relu_inplace_compute(const opf_tensor *const *in, const opf_tensor *const *out,
                                       const opf_attr_value *attrs) {
    (void)out;
    (void)attrs;
    return opf_eltwise_run((opf_eltwise_op){OPF_K_f32_relu, OPF_K_f64_relu}, in, in[0], 0.0);
}

const opf_op_def opf_op_relu_ = {
    .name = "relu_",
    .doc = "In-place rectified linear unit: x = max(x, 0), elementwise. NaN stays NaN.",
    .flags = OPF_OP_ELEMENTWISE,
    .dtypes = OPF_FLOAT_DTYPES,
    .num_inputs = 1,
    .inputs = {{.name = "x", .flags = OPF_ARG_MUTATED, .doc = "tensor overwritten with max(x, 0)"}},
    .num_outputs = 0,
    .compute = relu_inplace_compute,
    .compute_cuda = OPF_CUDA_KERNEL(opf_cuda_relu_inplace_compute),
};

/* --- relu_grad ------------------------------------------------------------- */

static opf_status relu_grad_compute(const opf_tensor *const *in, const opf_tensor *const *out,
                                    const opf_attr_value *attrs) {
    (void)attrs;
    return opf_eltwise_run((opf_eltwise_op){OPF_K_f32_relu_grad, OPF_K_f64_relu_grad}, in, out[0], 0.0);
}

const opf_op_def opf_op_relu_grad = {
    .name = "relu_grad",
    .doc = "Gradient of relu: dx = dy where x > 0, else 0 (a NaN x passes dy, as in PyTorch).",
    .flags = OPF_OP_ELEMENTWISE,
    .dtypes = OPF_FLOAT_DTYPES,
    .num_inputs = 2,
    .inputs = {{.name = "dy", .doc = "gradient of relu's output"}, {.name = "x", .doc = "relu's input (or output)"}},
    .num_outputs = 1,
    .outputs = {{.name = "dx", .doc = "gradient of relu's input"}},
    .output_shapes = {{.kind = OPF_SHAPE_LIKE, .like = 0}},
    .num_checks = 1,
    .checks = {{.kind = OPF_CHECK_SAME_SHAPE, .a = 0, .b = 1}},
    /* relu_grad is linear in dy with the same mask: its own gradient. */
    .num_grads = 1,
    .grads = {{.op = "relu_grad",
               .num_sources = 2,
               .sources = {{OPF_FROM_GRAD, 0}, {OPF_FROM_INPUT, 1}},
               .num_produces = 1,
               .produces = {0}}},
    .compute = relu_grad_compute,
    .compute_cuda = OPF_CUDA_KERNEL(opf_cuda_relu_grad_compute),
};

/* --- scale ------------------------------------------------------------------ */

static opf_status scale_compute(const opf_tensor *const *in, const opf_tensor *const *out,
                                const opf_attr_value *attrs) {
    return opf_eltwise_run((opf_eltwise_op){OPF_K_f32_scale, OPF_K_f64_scale}, in, out[0], attrs[0].f);
}

const opf_op_def opf_op_scale = {
    .name = "scale",
    .doc = "Scale by a constant: y = alpha * x, computed in x's dtype.",
    .flags = OPF_OP_ELEMENTWISE,
    .dtypes = OPF_FLOAT_DTYPES,
    .num_inputs = 1,
    .inputs = {{.name = "x", .doc = "input tensor, any shape"}},
    .num_outputs = 1,
    .outputs = {{.name = "y", .doc = "alpha * x"}},
    .output_shapes = {{.kind = OPF_SHAPE_LIKE, .like = 0}},
    .num_attrs = 1,
    .attrs = {{.name = "alpha", .type = OPF_ATTR_FLOAT, .default_value = {.f = 1.0}, .doc = "the factor"}},
    /* d(alpha x)/dx = alpha: the gradient is scale(dy, alpha). */
    .num_grads = 1,
    .grads = {{.op = "scale", .num_sources = 1, .sources = {{OPF_FROM_GRAD, 0}}, .num_produces = 1, .produces = {0}}},
    .compute = scale_compute,
    .compute_cuda = OPF_CUDA_KERNEL(opf_cuda_scale_compute),
};

/* --- add ------------------------------------------------------------------- */

static opf_status add_compute(const opf_tensor *const *in, const opf_tensor *const *out, const opf_attr_value *attrs) {
    (void)attrs;
    return opf_eltwise_run((opf_eltwise_op){OPF_K_f32_add, OPF_K_f64_add}, in, out[0], 0.0);
}

const opf_op_def opf_op_add = {
    .name = "add",
    .doc = "Elementwise sum of two tensors of the same shape: y = a + b. No broadcasting.",
    .flags = OPF_OP_ELEMENTWISE,
    .dtypes = OPF_FLOAT_DTYPES,
    .num_inputs = 2,
    .inputs = {{.name = "a", .doc = "first addend"}, {.name = "b", .doc = "second addend, the shape of a"}},
    .num_outputs = 1,
    .outputs = {{.name = "y", .doc = "a + b"}},
    .output_shapes = {{.kind = OPF_SHAPE_LIKE, .like = 0}},
    .num_checks = 1,
    .checks = {{.kind = OPF_CHECK_SAME_SHAPE, .a = 0, .b = 1}},
    /* Both addends receive the incoming gradient unchanged. */
    .num_grads = 2,
    .grads = {{.op = NULL, .num_sources = 1, .sources = {{OPF_FROM_GRAD, 0}}, .num_produces = 1, .produces = {0}},
              {.op = NULL, .num_sources = 1, .sources = {{OPF_FROM_GRAD, 0}}, .num_produces = 1, .produces = {1}}},
    .compute = add_compute,
    .compute_cuda = OPF_CUDA_KERNEL(opf_cuda_add_compute),
};

/* --- typed entry points -------------------------------------------------------- */

opf_status opf_relu(const opf_tensor *x, const opf_tensor *y) {
    return opf_op_run(&opf_op_relu, (const opf_tensor *[]){x}, (const opf_tensor *[]){y}, NULL);
}

opf_status opf_relu_(const opf_tensor *x) { return opf_op_run(&opf_op_relu_, (const opf_tensor *[]){x}, NULL, NULL); }

opf_status opf_relu_grad(const opf_tensor *dy, const opf_tensor *x, const opf_tensor *dx) {
    return opf_op_run(&opf_op_relu_grad, (const opf_tensor *[]){dy, x}, (const opf_tensor *[]){dx}, NULL);
}

opf_status opf_scale(const opf_tensor *x, double alpha, const opf_tensor *y) {
    return opf_op_run(&opf_op_scale, (const opf_tensor *[]){x}, (const opf_tensor *[]){y},
                      (const opf_attr_value[]){{.f = alpha}});
}

opf_status opf_add(const opf_tensor *a, const opf_tensor *b, const opf_tensor *y) {
    return opf_op_run(&opf_op_add, (const opf_tensor *[]){a, b}, (const opf_tensor *[]){y}, NULL);
}
