/*
 * eltwise.cu — the CUDA elementwise engine: runs the CUDA build of an
 * authored elementwise kernel (OPF_ELTWISE_KERNEL compiled by nvcc,
 * opforge_cuda.h) over the tensor views of a call.
 *
 * The kernels themselves are generated where each kernel is defined (the
 * built-ins: src/ops/eltwise.c, compiled by nvcc in a CUDA build; a user's
 * ops: their own file). This file does the host half of every call, once for
 * all of them: it picks the operands, makes their device current, chooses
 * the path (vector: every operand contiguous and 16-byte aligned;
 * contiguous; strided), merges the iteration space of strided views and
 * sizes the grid, then calls the kernel's launcher, which enqueues one
 * kernel on the caller's stream. Nothing here synchronizes or allocates.
 */
#include <string.h>

#include "opforge.h" /* first: outside the extern "C" blocks of what follows */
#include "cuda_util.h"

extern "C" {
#include "engines.h"
}

namespace {

int64_t opf_abs64(int64_t v) { return v < 0 ? -v : v; }

/* The strided path's iteration space (as the CPU engine's): dims of size 1
 * dropped, the rest ordered by the first output's strides (largest
 * outermost; the first input's break ties) so that consecutive threads write
 * consecutive output elements where they can, dims that every operand walks
 * contiguously merged; stored innermost first. */
void opf_ew_plan_strided(opf_cuda_eltwise_launch *L, const opf_tensor *const *operands, int32_t count,
                         int32_t first_output) {
    const opf_tensor *y = operands[first_output], *x = operands[0];
    int32_t order[OPF_MAX_RANK], dims = 0;
    for (int32_t d = 0; d < y->ndim; d++) {
        if (y->shape[d] == 1) {
            continue;
        }
        const int64_t ys = opf_abs64(opf_tensor_stride(y, d)), xs = opf_abs64(opf_tensor_stride(x, d));
        int32_t at = dims++;
        while (at > 0) {
            const int32_t prev = order[at - 1];
            const int64_t pys = opf_abs64(opf_tensor_stride(y, prev)), pxs = opf_abs64(opf_tensor_stride(x, prev));
            if (pys > ys || (pys == ys && pxs >= xs)) {
                break;
            }
            order[at] = prev;
            at--;
        }
        order[at] = d;
    }
    /* Outermost first, as opf_cuda_merge_dims takes them. */
    int64_t shape[OPF_MAX_RANK], strides[OPF_CUDA_EW_OPERANDS][OPF_MAX_RANK];
    for (int32_t i = 0; i < dims; i++) {
        shape[i] = y->shape[order[i]];
        for (int32_t k = 0; k < count; k++) {
            strides[k][i] = opf_tensor_stride(operands[k], order[i]);
        }
    }
    L->rank = opf_cuda_merge_dims(dims, shape, strides, count, L->shape, L->strides, OPF_CUDA_EW_OPERANDS);
}

/* --- outputs summed over broadcast dims ---------------------------------------------------------------------------
 *
 * The kernel writes such an output at the full iteration shape S into
 * scratch (contiguous); two kernels of libopforge then sum it down: each
 * thread of the first adds one segment of the terms of one output element
 * into a partial sum (double), the second adds each element's partial sums
 * in order and stores it. Plain grid-stride loops (no shared memory), and a
 * split into segments that depends only on the shapes: the same bits on
 * every GPU. */

enum { OPF_CUDA_SUM_THREADS = 1 << 16, OPF_CUDA_SUM_MIN_SEGMENT = 32 };

/* Output element o (of M, its kept dims in S's order, the last fastest) and
 * term t (of K, the summed dims likewise): the scratch element is at
 * offset(o, kept_in) + offset(t, summed_in); the output's at offset(o, kept_out). */
struct opf_cuda_sum_layout {
    int32_t kept, summed;
    int64_t kept_shape[OPF_MAX_RANK], kept_in[OPF_MAX_RANK], kept_out[OPF_MAX_RANK];
    int64_t summed_shape[OPF_MAX_RANK], summed_in[OPF_MAX_RANK];
    int64_t m, k, segment, segments;
};

__device__ __forceinline__ int64_t opf_cuda_sum_offset(int64_t index, int32_t rank, const int64_t *shape,
                                                       const int64_t *stride) {
    int64_t off = 0;
    for (int32_t d = rank - 1; d >= 0; d--) {
        const int64_t q = index / shape[d];
        off += (index - q * shape[d]) * stride[d];
        index = q;
    }
    return off;
}

template <typename T>
__global__ void __launch_bounds__(OPF_CUDA_EW_THREADS)
    opf_cuda_sum_partial(const T *in, double *partial, const opf_cuda_sum_layout L) {
    const int64_t items = L.m * L.segments, step = (int64_t)gridDim.x * OPF_CUDA_EW_THREADS;
    for (int64_t i = (int64_t)blockIdx.x * OPF_CUDA_EW_THREADS + threadIdx.x; i < items; i += step) {
        const int64_t o = i % L.m, g = i / L.m; /* adjacent threads: adjacent output elements */
        const T *base = in + opf_cuda_sum_offset(o, L.kept, L.kept_shape, L.kept_in);
        int64_t idx[OPF_MAX_RANK], t = g * L.segment, off = 0, rest = t;
        const int64_t end = t + L.segment < L.k ? t + L.segment : L.k;
        for (int32_t d = L.summed - 1; d >= 0; d--) { /* the segment's first term */
            idx[d] = rest % L.summed_shape[d];
            rest /= L.summed_shape[d];
            off += idx[d] * L.summed_in[d];
        }
        double sum = 0;
        for (; t < end; t++) {
            sum += (double)base[off];
            for (int32_t d = L.summed - 1; d >= 0; d--) { /* the next term */
                off += L.summed_in[d];
                if (++idx[d] < L.summed_shape[d]) {
                    break;
                }
                off -= idx[d] * L.summed_in[d];
                idx[d] = 0;
            }
        }
        partial[g * L.m + o] = sum;
    }
}

template <typename T>
__global__ void __launch_bounds__(OPF_CUDA_EW_THREADS)
    opf_cuda_sum_finish(const double *partial, T *out, const opf_cuda_sum_layout L) {
    const int64_t step = (int64_t)gridDim.x * OPF_CUDA_EW_THREADS;
    for (int64_t o = (int64_t)blockIdx.x * OPF_CUDA_EW_THREADS + threadIdx.x; o < L.m; o += step) {
        double sum = 0;
        for (int64_t g = 0; g < L.segments; g++) {
            sum += partial[g * L.m + o];
        }
        out[opf_cuda_sum_offset(o, L.kept, L.kept_shape, L.kept_out)] = (T)sum;
    }
}

/* The layout of summed output `y` (a view of the iteration shape: zero
 * strides along the dims it is summed over) from its values at the full
 * shape, contiguous. */
opf_cuda_sum_layout opf_cuda_sum_plan(const opf_tensor *y) {
    opf_cuda_sum_layout L;
    memset(&L, 0, sizeof L);
    L.m = 1;
    L.k = 1;
    int64_t contiguous[OPF_MAX_RANK], stride = 1;
    for (int32_t d = y->ndim - 1; d >= 0; d--) {
        contiguous[d] = stride;
        stride *= y->shape[d];
    }
    for (int32_t d = 0; d < y->ndim; d++) {
        if (y->shape[d] == 1) {
            continue;
        }
        const int64_t out = opf_tensor_stride(y, d);
        if (out != 0) {
            L.kept_shape[L.kept] = y->shape[d];
            L.kept_in[L.kept] = contiguous[d];
            L.kept_out[L.kept++] = out;
            L.m *= y->shape[d];
        } else {
            L.summed_shape[L.summed] = y->shape[d];
            L.summed_in[L.summed++] = contiguous[d];
            L.k *= y->shape[d];
        }
    }
    /* Segments: enough threads in all, none shorter than OPF_CUDA_SUM_MIN_SEGMENT terms. */
    int64_t segments = L.m > 0 ? (OPF_CUDA_SUM_THREADS + L.m - 1) / L.m : 1;
    const int64_t most = (L.k + OPF_CUDA_SUM_MIN_SEGMENT - 1) / OPF_CUDA_SUM_MIN_SEGMENT;
    segments = segments < most ? segments : most;
    L.segment = segments > 0 ? (L.k + segments - 1) / segments : 0;
    L.segments = L.segment > 0 ? (L.k + L.segment - 1) / L.segment : 0;
    return L;
}

} // namespace

static opf_status opf_cuda_eltwise_launch_kernel(const char *label, const opf_op_def *op,
                                                 const opf_eltwise_kernel *kernel, const opf_tensor *const *operands,
                                                 int32_t count, int32_t num_in, int64_t n, const opf_attr_value *attrs,
                                                 void *stream);

extern "C" opf_status opf_cuda_eltwise_run(const char *label, const opf_op_def *op, const opf_tensor *const *inputs,
                                           const opf_tensor *const *outputs, const opf_attr_value *attrs,
                                           void *stream) {
    const opf_eltwise_kernel *kernel = op->eltwise;
    if (kernel == NULL || kernel->cuda == NULL) {
        return opf_fail(OPF_E_UNSUPPORTED, label, "its elementwise kernel has no CUDA build");
    }
    /* The kernel reads the inputs and writes the outputs, or else the inputs
     * written in place (as on the CPU). */
    const opf_tensor *operands[OPF_CUDA_EW_OPERANDS];
    int32_t count = 0;
    for (int32_t i = 0; i < op->num_inputs; i++) {
        operands[count++] = inputs[i];
    }
    const int32_t num_in = count;
    for (int32_t o = 0; o < op->num_outputs; o++) {
        operands[count++] = outputs[o];
    }
    for (int32_t i = 0; op->num_outputs == 0 && i < op->num_inputs; i++) {
        if (op->inputs[i].flags & OPF_ARG_MUTATED) {
            operands[count++] = inputs[i];
        }
    }
    if (num_in != kernel->num_inputs || count - num_in != kernel->num_outputs) {
        return opf_fail(OPF_E_INTERNAL, label, "the row has %d inputs and %d outputs, its kernel %d and %d",
                        (int)num_in, (int)(count - num_in), (int)kernel->num_inputs, (int)kernel->num_outputs);
    }
    /* A row that broadcasts: every operand as a view of the iteration shape
     * (as on the CPU); an output summed over broadcast dims has zero strides
     * along them. */
    opf_ew_views views;
    bool summed[OPF_CUDA_EW_OPERANDS] = {false}, any_summed = false;
    if (op->num_outputs > 0 && opf_eltwise_views(num_in, count, operands, &views)) {
        for (int32_t k = num_in; k < count; k++) {
            for (int32_t d = 0; d < operands[k]->ndim; d++) {
                summed[k] = summed[k] || (operands[k]->shape[d] != 1 && opf_tensor_stride(operands[k], d) == 0);
            }
            any_summed = any_summed || summed[k];
        }
    }
    const opf_tensor *y = operands[num_in];
    const int64_t n = opf_tensor_numel(y);
    if (n == 0 && !any_summed) {
        return OPF_OK;
    }
    opf_device_guard guard;
    opf_status st = guard.enter(label, y->device.id);
    if (st != OPF_OK) {
        return st;
    }
    /* Summed outputs: the kernel writes them at the full shape into scratch. */
    opf_scratch scratch((cudaStream_t)stream, y->device.id);
    opf_tensor full[OPF_CUDA_EW_OPERANDS];
    const opf_tensor *summed_view[OPF_CUDA_EW_OPERANDS] = {NULL};
    for (int32_t k = num_in; k < count && any_summed; k++) {
        if (!summed[k]) {
            continue;
        }
        void *buffer = NULL;
        st = scratch.alloc(label, (size_t)n * opf_dtype_size(y->dtype), &buffer);
        if (st != OPF_OK) {
            return st;
        }
        summed_view[k] = operands[k];
        full[k] = opf_tensor_make(buffer, y->dtype, y->ndim, y->shape);
        full[k].device = y->device;
        operands[k] = &full[k];
    }
    if (n > 0) {
        st = opf_cuda_eltwise_launch_kernel(label, op, kernel, operands, count, num_in, n, attrs, stream);
        if (st != OPF_OK) {
            return st;
        }
    }
    const int sms = opf_cuda_sm_count(y->device.id);
    for (int32_t k = num_in; k < count && any_summed; k++) {
        if (!summed[k]) {
            continue;
        }
        const opf_cuda_sum_layout S = opf_cuda_sum_plan(summed_view[k]);
        if (S.m == 0) {
            continue;
        }
        void *partial = NULL;
        st = scratch.alloc(label, sizeof(double) * (size_t)(S.m * (S.segments > 0 ? S.segments : 1)), &partial);
        if (st != OPF_OK) {
            return st;
        }
        const void *in = full[k].data;
        void *out = opf_tensor_base(summed_view[k]);
        void *partial_args[3] = {&in, &partial, (void *)&S}, *finish_args[3] = {&partial, &out, (void *)&S};
        const dim3 block(OPF_CUDA_EW_THREADS);
        const bool f32 = y->dtype == OPF_F32;
        cudaError_t err = cudaSuccess;
        if (S.segments > 0) {
            const dim3 grid(opf_cuda_blocks(S.m * S.segments, OPF_CUDA_EW_THREADS, sms));
            err =
                f32 ? cudaLaunchKernel(opf_cuda_sum_partial<float>, grid, block, partial_args, 0, (cudaStream_t)stream)
                    : cudaLaunchKernel(opf_cuda_sum_partial<double>, grid, block, partial_args, 0,
                                       (cudaStream_t)stream);
        }
        if (err == cudaSuccess) {
            const dim3 grid(opf_cuda_blocks(S.m, OPF_CUDA_EW_THREADS, sms));
            err =
                f32 ? cudaLaunchKernel(opf_cuda_sum_finish<float>, grid, block, finish_args, 0, (cudaStream_t)stream)
                    : cudaLaunchKernel(opf_cuda_sum_finish<double>, grid, block, finish_args, 0, (cudaStream_t)stream);
        }
        if (err != cudaSuccess) {
            return opf_cuda_fail(OPF_E_INTERNAL, label, "kernel launch failed", err);
        }
    }
    return OPF_OK;
}

/* Plans and enqueues the authored kernel over operands of n elements. */
static opf_status opf_cuda_eltwise_launch_kernel(const char *label, const opf_op_def *op,
                                                 const opf_eltwise_kernel *kernel, const opf_tensor *const *operands,
                                                 int32_t count, int32_t num_in, int64_t n, const opf_attr_value *attrs,
                                                 void *stream) {
    const opf_tensor *y = operands[num_in];
    opf_cuda_eltwise_launch L;
    L.dtype = y->dtype;
    L.n = n;
    L.stream = stream;
    L.rank = 0;
    memset(L.attrs, 0, sizeof L.attrs);
    if (op->num_attrs > 0) {
        memcpy(L.attrs, attrs, sizeof(opf_attr_value) * (size_t)op->num_attrs);
    }
    bool contiguous = true;
    uintptr_t addresses = 0;
    for (int32_t k = 0; k < count; k++) {
        L.operands[k] = opf_tensor_base(operands[k]);
        addresses |= (uintptr_t)L.operands[k];
        contiguous = contiguous && opf_tensor_is_contiguous(operands[k]);
    }
    const int sms = opf_cuda_sm_count(y->device.id);
    if (contiguous && addresses % 16 == 0) {
        /* One pass: every thread has its loads in flight at once (a capped
         * grid looping twice measured ~10% below copy bandwidth). */
        const int64_t vectors = n / (int64_t)(16 / opf_dtype_size(y->dtype));
        const int64_t per_block = (int64_t)OPF_CUDA_EW_THREADS * OPF_CUDA_EW_UNROLL;
        const int64_t wanted = (vectors + per_block - 1) / per_block;
        L.path = OPF_CUDA_EW_VECTOR;
        L.blocks = wanted > INT32_MAX ? opf_cuda_blocks(vectors, per_block, sms) : (uint32_t)(wanted > 0 ? wanted : 1);
    } else if (contiguous) {
        L.path = OPF_CUDA_EW_CONTIGUOUS;
        L.blocks = opf_cuda_blocks(n, OPF_CUDA_EW_THREADS, sms);
    } else {
        L.path = OPF_CUDA_EW_STRIDED;
        L.blocks = opf_cuda_blocks(n, OPF_CUDA_EW_THREADS, sms);
        opf_ew_plan_strided(&L, operands, count, num_in);
    }
    const int err = kernel->cuda(&L);
    return err == 0 ? OPF_OK : opf_cuda_fail(OPF_E_INTERNAL, label, "kernel launch failed", (cudaError_t)err);
}

/* Never called: opf_op_run_cuda recognizes it and runs the engine above. */
extern "C" opf_status opf_cuda_eltwise_compute(const opf_tensor *const *inputs, const opf_tensor *const *outputs,
                                               const opf_attr_value *attrs, void *stream) {
    (void)inputs;
    (void)outputs;
    (void)attrs;
    (void)stream;
    return opf_error(OPF_E_INTERNAL, "the CUDA elementwise engine is run by opf_op_run_cuda only");
}
