/*
 * eltwise.c — the elementwise built-ins: relu, relu_ (in place), relu_grad,
 * scale, add, and mul with their broadcasting gradient rows sum_to and
 * mul_grad. Each is the math of one element (OPF_ELTWISE_KERNEL) and a
 * declaration, exactly what a user writes for an op of their own; opforge's
 * elementwise engines do strides, broadcasting, sums over broadcast dims, in
 * place, threads and the per-ISA builds.
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
OPF_ELTWISE_KERNEL(mul, (a, b), (y), y = a * b;)
/* `like` gives the output's shape only: its value is not read. */
OPF_ELTWISE_KERNEL(sum_to, (x, like), (y), y = x;)
OPF_ELTWISE_KERNEL(mul_grad, (dy, other, like), (dx), dx = dy * other;)

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

/* Broadcasting, as NumPy's: the output has the broadcast shape, and each
 * input's gradient is the output's summed over the dims that input is
 * broadcast along (sum_to). Where an input has the output's shape, sum_to
 * passes the gradient through (OPF_OP_PASS_THROUGH): the same-shape add's
 * backward runs no kernel. */
const opf_op_decl opf_decl_add = {
    "add(a, b) -> y[broadcast(a, b)]",
    .doc = "Elementwise sum y = a + b, broadcasting a and b together as NumPy does (any ranks, dims of size 1).",
    .grad = "da = sum_to(dy, a); db = sum_to(dy, b)",
    .jvp = "y' = sum_to(a', y); y' = sum_to(b', y)", /* each tangent broadcast to y's shape */
    .arg_docs = "a: first addend; b: second addend, a shape that broadcasts with a's; y: a + b, the broadcast shape",
    .eltwise = &add,
};

const opf_op_decl opf_decl_mul = {
    "mul(a, b) -> y[broadcast(a, b)]",
    .doc = "Elementwise product y = a * b, broadcasting a and b together as NumPy does (any ranks, dims of size 1).",
    .grad = "da = mul_grad(dy, b, a); db = mul_grad(dy, a, b)",
    .jvp = "y' = mul(a', b); y' = mul(a, b')",
    .arg_docs = "a: first factor; b: second factor, a shape that broadcasts with a's; y: a * b, the broadcast shape",
    .eltwise = &mul,
};

/* sum_to and mul_grad run over the broadcast of all their inputs (the
 * output's own shape included), so the same row sums a larger tensor down to
 * `like` and broadcasts a smaller one up to it: each is its own gradient
 * (the transpose of "broadcast, then sum" is "broadcast, then sum" back). */
const opf_op_decl opf_decl_sum_to = {
    "sum_to(x, like: shape) -> y[sum_to(like)]",
    .doc = "x summed over the dims along which like broadcasts to the shape of x (the gradient of a broadcast), "
           "or broadcast up to like's shape: y has like's shape and is the sum of x, broadcast with like, over the "
           "dims like lacks or has as 1. A copy when x and like have one shape.",
    .grad = "dx = sum_to(dy, x)",
    .jvp = "y' = sum_to(x', like)",
    .arg_docs = "x: the tensor to sum; like: a tensor of the result's shape (its values are not read), which "
                "broadcasts with x; y: the sum, shaped like like",
    .eltwise = &sum_to,
    .flags = OPF_OP_PASS_THROUGH, /* y = x: nothing summed or broadcast when x, like and y have one shape */
};

const opf_op_decl opf_decl_mul_grad = {
    "mul_grad(dy, other, like: shape) -> dx[sum_to(like)]",
    .doc = "Gradient of mul for one factor: dx = sum_to(dy * other, like), the product summed over the dims along "
           "which like (the factor) was broadcast.",
    /* Bilinear in dy and other, the sum over the same dims each way. */
    .grad = "ddy = mul_grad(ddx, other, dy); dother = mul_grad(ddx, dy, other)",
    .jvp = "dx' = mul_grad(dy', other, like); dx' = mul_grad(dy, other', like)",
    .arg_docs = "dy: gradient of mul's output; other: the other factor; like: the factor whose gradient dx is (its "
                "values are not read); dx: the gradient, shaped like like",
    .eltwise = &mul_grad,
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
