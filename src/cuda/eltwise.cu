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

#include "cuda_kernels.h"
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
    /* Outermost first while merging. */
    int64_t shape[OPF_MAX_RANK], strides[OPF_CUDA_EW_OPERANDS][OPF_MAX_RANK];
    int32_t rank = 0;
    for (int32_t i = 0; i < dims; i++) {
        const int32_t d = order[i];
        bool merge = rank > 0;
        for (int32_t k = 0; k < count && merge; k++) {
            merge = strides[k][rank - 1] == opf_tensor_stride(operands[k], d) * y->shape[d];
        }
        if (merge) {
            shape[rank - 1] *= y->shape[d];
        } else {
            shape[rank++] = y->shape[d];
        }
        for (int32_t k = 0; k < count; k++) {
            strides[k][rank - 1] = opf_tensor_stride(operands[k], d);
        }
    }
    if (rank == 0) { /* one element */
        rank = 1;
        shape[0] = 1;
        for (int32_t k = 0; k < count; k++) {
            strides[k][0] = 0;
        }
    }
    L->rank = rank;
    for (int32_t d = 0; d < OPF_MAX_RANK; d++) {
        const int32_t from = rank - 1 - d; /* reversed: innermost first */
        L->shape[d] = d < rank ? shape[from] : 1;
        for (int32_t k = 0; k < count; k++) {
            L->strides[k][d] = d < rank ? strides[k][from] : 0;
        }
    }
}

} // namespace

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
     * (as on the CPU). An output summed over broadcast dims has no CUDA path
     * yet. */
    opf_ew_views views;
    if (op->num_outputs > 0 && opf_eltwise_views(num_in, count, operands, &views)) {
        for (int32_t k = num_in; k < count; k++) {
            for (int32_t d = 0; d < operands[k]->ndim; d++) {
                if (operands[k]->shape[d] != 1 && opf_tensor_stride(operands[k], d) == 0) {
                    return opf_fail(OPF_E_UNSUPPORTED, label,
                                    "%s is summed over broadcast dims, which has no CUDA kernel yet (inputs of the "
                                    "output's shape run on CUDA)",
                                    op->outputs[k - num_in].name);
                }
            }
        }
    }
    const opf_tensor *y = operands[num_in];
    const int64_t n = opf_tensor_numel(y);
    if (n == 0) {
        return OPF_OK;
    }
    opf_device_guard guard;
    opf_status st = guard.enter(label, y->device.id);
    if (st != OPF_OK) {
        return st;
    }
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
