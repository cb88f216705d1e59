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
 * and row kernels, which run on CUDA one thread per row:
 *   rowsum:     the sum of each row (opf_sum; a dropped axis)
 *   row_affine: y = x * w + b + shift per row: w[M] and the optional b[M]
 *               without "..." (the whole tensor to every row), an attribute
 *   row_stats:  two outputs of dropped axes, mean (opf_sum / n) and max
 *               (opf_max): an empty row gives NaN and -inf
 *   softmax:    the tutorial's, with opf_exp and an output updated in place
 *               in its row (y[i] *= inv)
 *   softmax_team: softmax with a team body (OPF_ROW_KERNEL_TEAM): on CUDA, a
 *               block of threads per row of 32 elements or more
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
OPF_ROW_KERNEL(row_affine, (x, w, b), (y), {
    const T shift = (T)attrs[0].f;
    for (int64_t i = 0; i < n; i++) {
        y[i] = x[i] * w[i] + (b != NULL ? b[i] : (T)0) + shift;
    }
})
OPF_ROW_KERNEL(row_stats, (x), (mean, max), {
    mean[0] = opf_sum(n, x) / (T)n;
    max[0] = opf_max(n, x);
})
OPF_ROW_KERNEL(softmax, (x), (y), {
    const T m = opf_max(n, x);
    for (int64_t i = 0; i < n; i++) {
        y[i] = opf_exp(x[i] - m);
    }
    const T inv = 1 / opf_sum(n, y);
    for (int64_t i = 0; i < n; i++) {
        y[i] *= inv;
    }
})

OPF_ROW_KERNEL_TEAM(softmax_team, softmax, (x), (y), {
    T m = -(T)__builtin_inf();
    OPF_TEAM_FOR(i, n) { m = opf_maximum(x[i], m); }
    m = opf_team_max(opf_team, m);
    T s = 0;
    OPF_TEAM_FOR(i, n) { s += opf_exp(x[i] - m); }
    const T inv = 1 / opf_team_sum(opf_team, s);
    OPF_TEAM_FOR(i, n) { y[i] = opf_exp(x[i] - m) * inv; }
})

static const opf_op_decl cudaops[] = {
    {"mix_max(a, b, *, w: float = 0.25) -> (mix, hi)", .doc = "a + w (b - a) and maximum(a, b).", .eltwise = &mix_max},
    {"clamp_(x!, *, lo: float = -1, hi: float = 1) -> ()", .doc = "x clamped to [lo, hi] in place.", .eltwise = &clamp},
    {"lerp_half(a, b) -> y", .doc = "(a + b) / 2 by a helper.", .eltwise = &lerp_half},
    {"rowsum(x[..., M]) -> y[...]", .doc = "Sum over the last axis.", .row = &rowsum},
    {"row_affine(x[..., M], w[M], b[M]?, *, shift: float = 0) -> y[..., M]", .doc = "x * w + b + shift, per row.",
     .row = &row_affine},
    {"row_stats(x[..., M]) -> (mean[...], max[...])", .doc = "Mean and maximum of each row.", .row = &row_stats},
    {"softmax(x[..., M]) -> y[..., M]", .doc = "Softmax over the last axis.", .row = &softmax},
    {"softmax_team(x[..., M]) -> y[..., M]", .doc = "Softmax over the last axis, a team per row on CUDA.",
     .row = &softmax_team},
    {0},
};
OPF_EXPORT_OPS("cudaops", cudaops)
