/*
 * eltwise.c — the elementwise built-ins: relu, relu_ (in place), relu_grad,
 * scale, add. Each is the math of one element (OPF_ELTWISE_KERNEL) and a
 * declaration, exactly what a user writes for an op of their own; opforge's
 * elementwise engines do strides, in place, threads and the per-ISA builds.
 *
 * Like a user's file of ops, this file is C that also compiles as CUDA C++:
 * in a CUDA build (cuda.mk) nvcc compiles it, and each kernel below then
 * also has its CUDA build, generated from the same line. Adding an
 * elementwise built-in touches no CUDA file.
 */
#include "cuda_kernels.h"
#ifdef __cplusplus
extern "C" {
#endif
#include "ops.h"
#ifdef __cplusplus
}
#endif

/* NaN stays NaN; a denormal x gives 0 where the caller runs with denormals as
 * zero (XLA does), as the frameworks' own relu does. */
OPF_ELTWISE_KERNEL(relu, (x), (y), y = x > 0 ? x : (x != x ? x : (T)0);)
OPF_ELTWISE_KERNEL(relu_grad, (dy, x), (dx), dx = x <= 0 ? (T)0 : dy;) /* a NaN x passes dy, as in PyTorch */
OPF_ELTWISE_KERNEL(scale, (x), (y), y = (T)attrs[0].f * x;)
OPF_ELTWISE_KERNEL(add, (a, b), (y), y = a + b;)

const opf_op_decl opf_decl_relu = {
    "relu(x) -> y",
    .doc = "Rectified linear unit: y = max(x, 0), elementwise. NaN stays NaN.",
    .grad = "dx = relu_grad(dy, x)",
    .jvp = "y' = relu_grad(x', x)",
    .arg_docs = "x: input tensor, any shape; y: max(x, 0), the shape of x",
    .eltwise = &relu,
};

const opf_op_decl opf_decl_relu_ = {
    "relu_(x!) -> ()",
    .doc = "In-place rectified linear unit: x = max(x, 0), elementwise. NaN stays NaN.",
    .arg_docs = "x: tensor overwritten with max(x, 0)",
    .eltwise = &relu,
};

const opf_op_decl opf_decl_relu_grad = {
    "relu_grad(dy, x) -> dx",
    .doc = "Gradient of relu: dx = dy where x > 0, else 0 (a NaN x passes dy, as in PyTorch).",
    /* Linear in dy with the same mask: its own gradient. */
    .grad = "ddy = relu_grad(ddx, x)",
    .jvp = "dx' = relu_grad(dy', x)", /* the mask is piecewise constant in x */
    .arg_docs = "dy: gradient of relu's output; x: relu's input (or output); dx: gradient of relu's input",
    .eltwise = &relu_grad,
};

const opf_op_decl opf_decl_scale = {
    "scale(x, *, alpha: float = 1) -> y",
    .doc = "Scale by a constant: y = alpha * x, computed in x's dtype.",
    .grad = "dx = scale(dy)", /* d(alpha x)/dx = alpha */
    .jvp = "y' = scale(x')",
    .arg_docs = "x: input tensor, any shape; alpha: the factor; y: alpha * x",
    .eltwise = &scale,
};

const opf_op_decl opf_decl_add = {
    "add(a, b) -> y",
    .doc = "Elementwise sum of two tensors of the same shape: y = a + b. No broadcasting.",
    .grad = "da = dy; db = dy",
    .jvp = "y' = a'; y' = b'",
    .arg_docs = "a: first addend; b: second addend, the shape of a; y: a + b",
    .eltwise = &add,
};

/* --- typed entry points -------------------------------------------------------- */

opf_status opf_relu(const opf_tensor *x, const opf_tensor *y) {
    const opf_tensor *in[] = {x}, *out[] = {y};
    return opf_op_run(opf_builtin_row(OPF_ROW_relu), in, out, NULL);
}

opf_status opf_relu_(const opf_tensor *x) {
    const opf_tensor *in[] = {x};
    return opf_op_run(opf_builtin_row(OPF_ROW_relu_), in, NULL, NULL);
}

opf_status opf_relu_grad(const opf_tensor *dy, const opf_tensor *x, const opf_tensor *dx) {
    const opf_tensor *in[] = {dy, x}, *out[] = {dx};
    return opf_op_run(opf_builtin_row(OPF_ROW_relu_grad), in, out, NULL);
}

opf_status opf_scale(const opf_tensor *x, double alpha, const opf_tensor *y) {
    const opf_tensor *in[] = {x}, *out[] = {y};
    opf_attr_value attrs[1];
    attrs[0].f = alpha;
    return opf_op_run(opf_builtin_row(OPF_ROW_scale), in, out, attrs);
}

opf_status opf_add(const opf_tensor *a, const opf_tensor *b, const opf_tensor *y) {
    const opf_tensor *in[] = {a, b}, *out[] = {y};
    return opf_op_run(opf_builtin_row(OPF_ROW_add), in, out, NULL);
}
