/*
 * myops.c — four ops written with opforge's authoring layer: the math of each
 * kernel and one declaration per op. opforge does strides, broadcasting, in
 * place, threads, per-ISA builds, shape checks and gradients in NumPy,
 * PyTorch, TensorFlow and JAX.
 */
#include <opforge.h>

/* softplus(x) = log(1 + e^x) = max(x, 0) + log1p(e^-|x|), stable for large |x|
 * (opf_softplus: that sum in a third of the work of opf_log1p(opf_exp(...)));
 * its derivative is sigmoid(x). */
OPF_ELTWISE_KERNEL(softplus, (x), (y), y = opf_softplus(x);)
OPF_ELTWISE_KERNEL(softplus_grad, (dy, x), (dx), dx = dy * opf_sigmoid(x);)

/* The tutorials' MyOp: x times a factor. */
OPF_ELTWISE_KERNEL(my_op, (x), (y), y = (T)attrs[0].f * x;)

/* The sum of each row (last axis), and its gradient: dy spread over the row. */
OPF_ROW_KERNEL(rowsum, (x), (y), y[0] = opf_sum(n, x);)
OPF_ROW_KERNEL(rowsum_grad, (dy, x), (dx), {
    for (int64_t i = 0; i < n_dx; i++) {
        dx[i] = dy[0];
    }
})

static const opf_op_decl myops[] = {
    {"softplus(x) -> y", .doc = "log(1 + exp(x)), elementwise.", .grad = "dx = softplus_grad(dy, x)",
     .jvp = "y' = softplus_grad(x', x)", .eltwise = &softplus},
    {"softplus_grad(dy, x) -> dx", .doc = "Gradient of softplus: dy * sigmoid(x).", .eltwise = &softplus_grad},
    {"my_op(x, *, factor: float = 2) -> y", .doc = "x * factor.", .grad = "dx = my_op(dy)", .jvp = "y' = my_op(x')",
     .eltwise = &my_op},
    {"rowsum(x[..., M]) -> y[...]", .doc = "Sum over the last axis.", .grad = "dx = rowsum_grad(dy, x)",
     .jvp = "y' = rowsum(x')", .row = &rowsum},
    {"rowsum_grad(dy[...], x[..., M]) -> dx[..., M]", .doc = "Gradient of rowsum: dy along each row.",
     .grad = "ddy = rowsum(ddx)", .jvp = "dx' = rowsum_grad(dy', x)", .row = &rowsum_grad}, /* x only shapes dx */
    {0},
};
OPF_EXPORT_OPS("myops", myops)
