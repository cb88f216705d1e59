/*
 * user_ops.c — a user's file of ops, compiled by nvcc as CUDA C++ (cuda.mk):
 * the same C a CPU-only build compiles, whose elementwise kernels then also
 * run on CUDA. test_cuda.c links it and compares every row's CUDA results
 * with its CPU results; cuda.mk also builds it into a shared library with
 * the command opforge.h documents, which tests/cuda/user_lib.c loads.
 *
 *   mix_max:  two inputs, two outputs, an attribute: mix = a + w * (b - a)
 *             (a multiply-add, which -fmad=false keeps in two roundings),
 *             hi = maximum(a, b) (NaN propagates)
 *   clamp_:   one input written in place, two attributes
 *   rowsum:   a row kernel (CPU only), to show that the rest of a file of ops
 *             compiles as CUDA C++ too
 */
#include <opforge.h>

/* A helper a kernel body calls: usable on the device too. */
OPF_KERNEL_FN double cudaops_lerp(double a, double b, double w) { return a + w * (b - a); }

OPF_ELTWISE_KERNEL(mix_max, (a, b), (mix, hi), {
    mix = a + (T)attrs[0].f * (b - a);
    hi = (a > b || a != a) ? a : b;
})
OPF_ELTWISE_KERNEL(clamp, (x), (y), {
    const T lo = (T)attrs[0].f, top = (T)attrs[1].f;
    y = x < lo ? lo : (x > top ? top : x);
})
/* A double helper whose result is rounded to T: exact for these inputs. */
OPF_ELTWISE_KERNEL(lerp_half, (a, b), (y), y = (T)cudaops_lerp((double)a, (double)b, 0.5);)
OPF_ROW_KERNEL(rowsum, (x), (y), y[0] = opf_sum(n, x);)

static const opf_op_decl cudaops[] = {
    {"mix_max(a, b, *, w: float = 0.25) -> (mix, hi)", .doc = "a + w (b - a) and maximum(a, b).", .eltwise = &mix_max},
    {"clamp_(x!, *, lo: float = -1, hi: float = 1) -> ()", .doc = "x clamped to [lo, hi] in place.", .eltwise = &clamp},
    {"lerp_half(a, b) -> y", .doc = "(a + b) / 2 by a helper.", .eltwise = &lerp_half},
    {"rowsum(x[..., M]) -> y[...]", .doc = "Sum over the last axis.", .row = &rowsum},
    {0},
};
OPF_EXPORT_OPS("cudaops", cudaops)
