/*
 * ${name}.c: the ops of table "${name}", loaded by opforge into NumPy,
 * PyTorch, TensorFlow and JAX:
 *
 *     import opforge.torch as ot
 *     ops = ot.load_ops("${name}.c")      # compiled on first use, then cached
 *     y = ops.leaky_relu(x, slope=0.1)    # torch.ops.${name}.leaky_relu
 *
 * A kernel is the math of one element (T is float or double); opforge runs it
 * over any tensor layout, in place, on every thread and with the CPU's widest
 * SIMD. A declaration's signature gives inputs, outputs, attributes and
 * shapes; its grad says which op gives each input's gradient, so every
 * framework differentiates it (to any order: the gradient op declares its own).
 */
#include <opforge.h>

/* y = x > 0 ? x : slope * x */
OPF_ELTWISE_KERNEL(leaky_relu, (x), (y), y = x > 0 ? x : (T)attrs[0].f * x;)
/* dx = x > 0 ? dy : slope * dy */
OPF_ELTWISE_KERNEL(leaky_relu_grad, (dy, x), (dx), dx = x > 0 ? dy : (T)attrs[0].f * dy;)

static const opf_op_decl ops[] = {
    {"leaky_relu(x, *, slope: float = 0.01) -> y",
     .doc = "y = x where x > 0, else slope * x.",
     .arg_docs = "x: input, any shape; slope: slope for x <= 0; y: the result, the shape of x",
     .grad = "dx = leaky_relu_grad(dy, x)",
     .eltwise = &leaky_relu},
    {"leaky_relu_grad(dy, x, *, slope: float = 0.01) -> dx",
     .doc = "dx = dy where x > 0, else slope * dy: the gradient of leaky_relu.",
     .arg_docs = "dy: gradient of y; x: leaky_relu's input; slope: slope for x <= 0; dx: gradient of x",
     .grad = "ddy = leaky_relu_grad(ddx, x)", /* linear in dy with the same mask */
     .eltwise = &leaky_relu_grad},
    {0},
};
OPF_EXPORT_OPS("${name}", ops)
