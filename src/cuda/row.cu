/*
 * row.cu — the CUDA row engine: runs the CUDA build of an authored row
 * kernel (OPF_ROW_KERNEL compiled by nvcc, opforge_cuda.h) over the tensor
 * views of a call, one CUDA thread per row.
 *
 * The row kernels themselves are generated where each kernel is defined (a
 * built-in's file in src/ops, compiled by nvcc in a CUDA build; a user's own
 * file). This file does the host half of every call, once for all of them,
 * as the CPU row engine (src/core/row_engine.c) does for the CPU builds:
 *
 *   - rows: the leading dims ("...") of the first input; none, nothing runs;
 *   - an argument whose row (its dims after "...") is contiguous is used in
 *     place: its strides over the leading dims locate each row;
 *   - one whose rows are not contiguous gets a contiguous copy in device
 *     scratch (opforge's stream-ordered pool, freed on the stream after the
 *     work): inputs are gathered into it before the kernel, outputs computed
 *     in it and scattered into the view after the kernel (strided copies of
 *     any rank, below);
 *   - an input without "..." (w[M]) is passed whole to every row: stride 0,
 *     gathered once when not contiguous;
 *   - an output without "..." (dw[M]) is a sum over rows: every row's
 *     kernel adds its part into a zeroed slot of its own in scratch, and the
 *     slots are then added up in the CPU engine's order (below);
 *   - the leading dims become the launch's iteration space (size-1 dims
 *     dropped, dims merged where every operand allows, innermost first) and
 *     the kernel's launcher enqueues one kernel on the caller's stream;
 *   - a kernel with a team body (opf_row_kernel.cuda_team) runs it on rows
 *     of OPF_ROW_TEAM_MIN elements or more: a block of threads per row
 *     (opf_row_team_size), each block taking rows b, b + blocks, ... in
 *     order. Its sums over rows then take a slot per block rather than per
 *     row (OPF_ROW_TEAM_SUM_BLOCKS blocks at most, a number that depends on
 *     the shapes only, so that the sums' order, and their bits, do not
 *     depend on the device).
 *
 * Everything is enqueued on the caller's stream (copies, kernel, frees), in
 * that order; nothing synchronizes. Outputs never overlap inputs (the row
 * is not elementwise; opf_op_run_cuda has checked), so the copies need no
 * ordering beyond the stream's.
 */
#include <string.h>

#include "opforge.h" /* first: outside the extern "C" blocks of what follows */
#include "cuda_util.h"
extern "C" {
#include "engines.h"
}

namespace {

enum {
    OPF_ROW_TEAM_MIN = 32,           /* elements of a row, at least, for a team body */
    OPF_ROW_TEAM_BLOCKS = 65535,     /* blocks of a team launch, at most */
    OPF_ROW_TEAM_SUM_BLOCKS = 512,   /* blocks of a team launch with sums over rows, at most */
    OPF_ROW_TEAM_SUM_BLOCK_ROWS = 32 /* slots added up per block of the final sum */
};

/* The threads of a team for rows of n elements: a warp for short rows, up
 * to OPF_CUDA_TEAM_MAX for long ones, about four elements a thread between. */
unsigned opf_row_team_size(int64_t n) {
    unsigned size = 32;
    while (size < OPF_CUDA_TEAM_MAX && (int64_t)size * 4 < n) {
        size *= 2;
    }
    return size;
}

/* A strided view as a copy walks it: its C-order element index turned into
 * an offset (dims of size 1 dropped, dims that are contiguous with the next
 * merged), innermost first: an elementwise kernel's layout of one operand. */
typedef opf__cuda_ew_layout<1> opf_row_copy_layout;

/* Element i (C order) of a view <-> buf[i]; E is the element's bits (a copy
 * keeps every NaN payload); to_buf selects the direction. */
template <typename E, typename Index>
__global__ void __launch_bounds__(OPF_CUDA_THREADS)
    opf_row_copy_kernel(int64_t n, E *buf, E *view, const opf_row_copy_layout layout, int to_buf) {
    const int64_t step = (int64_t)gridDim.x * OPF_CUDA_THREADS;
    for (int64_t i = (int64_t)blockIdx.x * OPF_CUDA_THREADS + threadIdx.x; i < n; i += step) {
        const int64_t off = opf__cuda_offsets<1, Index>(i, layout).off[0];
        if (to_buf) {
            buf[i] = view[off];
        } else {
            view[off] = buf[i];
        }
    }
}

opf_row_copy_layout opf_row_copy_plan(const opf_tensor *t) {
    int64_t shape[OPF_MAX_RANK], stride[OPF_MAX_RANK];
    int32_t rank = 0; /* outermost first while merging */
    for (int32_t d = 0; d < t->ndim; d++) {
        if (t->shape[d] == 1) {
            continue;
        }
        const int64_t s = opf_tensor_stride(t, d);
        if (rank > 0 && stride[rank - 1] == s * t->shape[d]) {
            shape[rank - 1] *= t->shape[d];
            stride[rank - 1] = s;
        } else {
            shape[rank] = t->shape[d];
            stride[rank] = s;
            rank++;
        }
    }
    opf_row_copy_layout L;
    memset(&L, 0, sizeof L);
    if (rank == 0) { /* one element */
        rank = 1;
        shape[0] = 1;
        stride[0] = 0;
    }
    L.rank = rank;
    for (int32_t d = 0; d < rank; d++) {
        L.shape[d] = shape[rank - 1 - d];
        L.stride[0][d] = stride[rank - 1 - d];
    }
    return L;
}

/* Enqueues the copy between the elements of view t (C order) and
 * contiguous buf. */
template <typename E>
cudaError_t opf_row_copy_enqueue(const opf_tensor *t, void *buf, int to_buf, int sms, cudaStream_t stream) {
    int64_t n = opf_tensor_numel(t);
    opf_row_copy_layout layout = opf_row_copy_plan(t);
    E *b = static_cast<E *>(buf), *view = reinterpret_cast<E *>(opf_tensor_base(t));
    void *args[5] = {&n, &b, &view, &layout, &to_buf};
    const dim3 grid(opf_cuda_blocks(n, OPF_CUDA_THREADS, sms)), block(OPF_CUDA_THREADS);
    cudaError_t err = n <= (int64_t)UINT32_MAX
                          ? cudaLaunchKernel(opf_row_copy_kernel<E, uint32_t>, grid, block, args, 0, stream)
                          : cudaLaunchKernel(opf_row_copy_kernel<E, uint64_t>, grid, block, args, 0, stream);
    return err != cudaSuccess ? err : cudaGetLastError();
}

cudaError_t opf_row_copy(const opf_tensor *t, void *buf, int to_buf, int sms, cudaStream_t stream) {
    return opf_dtype_size(t->dtype) == 4 ? opf_row_copy_enqueue<uint32_t>(t, buf, to_buf, sms, stream)
                                         : opf_row_copy_enqueue<uint64_t>(t, buf, to_buf, sms, stream);
}

/* Sums over rows. The slots of a summed output (row r's at r * len, each
 * written by one row's kernel call) are added up as the CPU row engine adds
 * its accumulators: blocks of block_rows rows (opf_row_sum_block_rows), each
 * summed from zero in row order, then the blocks in block order. A kernel
 * that adds its part to each element once thus gets the CPU's bits. The
 * result is left in slot 0. */
template <typename T> __global__ void __launch_bounds__(OPF_CUDA_THREADS) opf_row_zero_kernel(int64_t n, T *p) {
    const int64_t step = (int64_t)gridDim.x * OPF_CUDA_THREADS;
    for (int64_t i = (int64_t)blockIdx.x * OPF_CUDA_THREADS + threadIdx.x; i < n; i += step) {
        p[i] = (T)0;
    }
}

/* One thread per (block, element): the block's rows, summed into its first slot. */
template <typename T>
__global__ void __launch_bounds__(OPF_CUDA_THREADS)
    opf_row_block_sum_kernel(int64_t len, int64_t rows, int64_t block_rows, int64_t blocks, T *slots) {
    const int64_t step = (int64_t)gridDim.x * OPF_CUDA_THREADS;
    for (int64_t t = (int64_t)blockIdx.x * OPF_CUDA_THREADS + threadIdx.x; t < blocks * len; t += step) {
        const int64_t b = t / len, i = t - b * len;
        const int64_t first = b * block_rows, last = first + block_rows < rows ? first + block_rows : rows;
        T acc = (T)0;
        for (int64_t r = first; r < last; r++) {
            acc += slots[r * len + i];
        }
        slots[first * len + i] = acc;
    }
}

/* One thread per element: the blocks' sums, in block order, into slot 0. */
template <typename T>
__global__ void __launch_bounds__(OPF_CUDA_THREADS)
    opf_row_blocks_total_kernel(int64_t len, int64_t block_rows, int64_t blocks, T *slots) {
    const int64_t step = (int64_t)gridDim.x * OPF_CUDA_THREADS;
    for (int64_t i = (int64_t)blockIdx.x * OPF_CUDA_THREADS + threadIdx.x; i < len; i += step) {
        T total = slots[i];
        for (int64_t b = 1; b < blocks; b++) {
            total += slots[b * block_rows * len + i];
        }
        slots[i] = total;
    }
}

template <typename T> cudaError_t opf_row_zero_enqueue(int64_t n, void *slots, int sms, cudaStream_t stream) {
    T *p = static_cast<T *>(slots);
    void *args[2] = {&n, &p};
    const dim3 grid(opf_cuda_blocks(n, OPF_CUDA_THREADS, sms)), block(OPF_CUDA_THREADS);
    cudaError_t err = cudaLaunchKernel(opf_row_zero_kernel<T>, grid, block, args, 0, stream);
    return err != cudaSuccess ? err : cudaGetLastError();
}

template <typename T>
cudaError_t opf_row_sum_enqueue(int64_t len, int64_t rows, int64_t block_rows, void *slots, int sms,
                                cudaStream_t stream) {
    T *p = static_cast<T *>(slots);
    int64_t blocks = (rows + block_rows - 1) / block_rows, work = blocks * len;
    void *args[5] = {&len, &rows, &block_rows, &blocks, &p};
    const dim3 block(OPF_CUDA_THREADS);
    cudaError_t err = cudaLaunchKernel(opf_row_block_sum_kernel<T>, dim3(opf_cuda_blocks(work, OPF_CUDA_THREADS, sms)),
                                       block, args, 0, stream);
    if (err == cudaSuccess) {
        void *total_args[4] = {&len, &block_rows, &blocks, &p};
        err = cudaLaunchKernel(opf_row_blocks_total_kernel<T>, dim3(opf_cuda_blocks(len, OPF_CUDA_THREADS, sms)), block,
                               total_args, 0, stream);
    }
    return err != cudaSuccess ? err : cudaGetLastError();
}

} // namespace

extern "C" opf_status opf_cuda_row_run(const char *label, const opf_op_def *op, const opf_tensor *const *inputs,
                                       const opf_tensor *const *outputs, const opf_attr_value *attrs, void *stream) {
    const opf_row_kernel *kernel = op->row;
    if (kernel == NULL || kernel->cuda == NULL) {
        return opf_fail(OPF_E_UNSUPPORTED, label, "its row kernel has no CUDA build");
    }
    if (op->num_inputs != kernel->num_inputs || op->num_outputs != kernel->num_outputs) {
        return opf_fail(OPF_E_INTERNAL, label, "the row has %d inputs and %d outputs, its kernel %d and %d",
                        (int)op->num_inputs, (int)op->num_outputs, (int)kernel->num_inputs, (int)kernel->num_outputs);
    }
    const opf_tensor *x = inputs[0];
    const int32_t batch_rank = x->ndim - op->inputs[0].core_dims;
    int64_t rows = 1, n = 1;
    for (int32_t d = 0; d < x->ndim; d++) {
        *(d < batch_rank ? &rows : &n) *= x->shape[d];
    }
    bool sums = false; /* an output summed over rows: zeros when there are none */
    for (int32_t o = 0; o < op->num_outputs; o++) {
        sums = sums || (outputs[o] != NULL && !(op->outputs[o].flags & OPF_ARG_BATCHED));
    }
    /* A team launch: its blocks, and a slot per block for each sum. */
    const bool team = kernel->cuda_team != NULL && n >= OPF_ROW_TEAM_MIN && rows > 0;
    const int64_t most = sums ? OPF_ROW_TEAM_SUM_BLOCKS : OPF_ROW_TEAM_BLOCKS;
    const int64_t team_blocks = rows < most ? rows : most;
    /* The slots of each sum: one per row (the CPU engine's order) or per team block. */
    const int64_t slots = team ? team_blocks : rows;
    if (rows == 0 && !sums) {
        return OPF_OK;
    }
    opf_device_guard guard;
    opf_status st = guard.enter(label, x->device.id);
    if (st != OPF_OK) {
        return st;
    }
    const cudaStream_t s = (cudaStream_t)stream;
    const int sms = opf_cuda_sm_count(x->device.id);
    const size_t elem = opf_dtype_size(x->dtype);
    /* Row-major strides of the leading dims, in rows: where a scratch copy
     * (C order) has each row. */
    int64_t row_stride[OPF_MAX_RANK], at = 1;
    for (int32_t d = batch_rank - 1; d >= 0; d--) {
        row_stride[d] = at;
        at *= x->shape[d];
    }

    opf_cuda_row_launch L;
    memset(&L, 0, sizeof L);
    L.dtype = x->dtype;
    L.rows = rows;
    L.stream = stream;
    if (op->num_attrs > 0) {
        memcpy(L.attrs, attrs, sizeof(opf_attr_value) * (size_t)op->num_attrs);
    }
    const int32_t count = op->num_inputs + op->num_outputs;
    int64_t strides[OPF_CUDA_ROW_OPERANDS][OPF_MAX_RANK];
    const opf_tensor *scatter[OPF_MAX_ARGS] = {NULL}; /* outputs computed in scratch */
    const opf_tensor *summed[OPF_MAX_ARGS] = {NULL};  /* sums over rows, in slots in scratch */
    int64_t row_elems = 0;                            /* elements of a row of every argument */
    size_t sum_bytes = 0;                             /* bytes of a row's parts of every sum */
    opf_scratch scratch(s, x->device.id);
    for (int32_t k = 0; k < count; k++) {
        const bool input = k < op->num_inputs;
        const opf_arg_def *def = input ? &op->inputs[k] : &op->outputs[k - op->num_inputs];
        const opf_tensor *t = input ? inputs[k] : outputs[k - op->num_inputs];
        for (int32_t d = 0; d < OPF_MAX_RANK; d++) {
            strides[k][d] = 0;
        }
        if (t == NULL) { /* an absent optional argument: NULL, as on the CPU */
            continue;
        }
        const bool batched = (def->flags & OPF_ARG_BATCHED) != 0;
        const int32_t core = batched ? t->ndim - batch_rank : t->ndim;
        int64_t len = 1;
        for (int32_t d = t->ndim - core; d < t->ndim; d++) {
            len *= t->shape[d];
        }
        L.len[k] = len;
        L.operands[k] = opf_tensor_base(t);
        row_elems += len;
        if (!input && !batched) {                       /* a sum over rows: zeroed slots, added up after the kernel */
            const int64_t kept = slots > 0 ? slots : 1; /* slot 0 holds the sum, zero without rows */
            st = scratch.alloc(label, (size_t)kept * (size_t)len * elem, &L.operands[k]);
            if (st != OPF_OK) {
                return st;
            }
            for (int32_t d = 0; !team && d < batch_rank; d++) {
                strides[k][d] = row_stride[d] * len;
            }
            L.block_stride[k] = team ? len : 0;
            cudaError_t err = elem == sizeof(float) ? opf_row_zero_enqueue<float>(kept * len, L.operands[k], sms, s)
                                                    : opf_row_zero_enqueue<double>(kept * len, L.operands[k], sms, s);
            if (err != cudaSuccess) {
                return opf_cuda_fail(OPF_E_INTERNAL, label, "zeroing the row sums failed", err);
            }
            summed[k - op->num_inputs] = t;
            sum_bytes += (size_t)len * elem;
            continue;
        }
        if (len == 0 || opf_tensor_tail_contiguous(t, core)) {
            for (int32_t d = 0; batched && d < batch_rank; d++) {
                strides[k][d] = opf_tensor_stride(t, d);
            }
            continue;
        }
        /* Rows that are not contiguous: a C-order copy, row r at r * len. */
        st = scratch.alloc(label, (size_t)(batched ? rows : 1) * (size_t)len * elem, &L.operands[k]);
        if (st != OPF_OK) {
            return st;
        }
        for (int32_t d = 0; batched && d < batch_rank; d++) {
            strides[k][d] = row_stride[d] * len;
        }
        if (input) {
            cudaError_t err = opf_row_copy(t, L.operands[k], 1, sms, s);
            if (err != cudaSuccess) {
                char what[96];
                snprintf(what, sizeof what, "gathering the rows of %s failed", def->name);
                return opf_cuda_fail(OPF_E_INTERNAL, label, what, err);
            }
        } else {
            scatter[k - op->num_inputs] = t;
        }
    }
    /* The launch's iteration space: the leading dims. */
    L.rank = opf_cuda_merge_dims(batch_rank, x->shape, strides, count, L.shape, L.strides, OPF_CUDA_ROW_OPERANDS);
    if (team) {
        L.team = opf_row_team_size(n);
        L.blocks = (uint32_t)team_blocks;
    } else {
        L.blocks = opf_cuda_blocks(rows, OPF_CUDA_ROW_THREADS, sms);
    }
    const int err = rows == 0 ? 0 : team ? kernel->cuda_team(&L) : kernel->cuda(&L);
    if (err != 0) {
        return opf_cuda_fail(OPF_E_INTERNAL, label, "kernel launch failed", (cudaError_t)err);
    }
    /* The slots added up: the rows' in the CPU engine's blocks, or the team blocks'. */
    const int64_t block_rows =
        team ? (int64_t)OPF_ROW_TEAM_SUM_BLOCK_ROWS : opf_row_sum_block_rows(rows, row_elems, sum_bytes);
    for (int32_t o = 0; o < op->num_outputs; o++) {
        if (summed[o] != NULL) {
            void *slot = L.operands[op->num_inputs + o];
            const int64_t len = L.len[op->num_inputs + o];
            cudaError_t e = elem == sizeof(float) ? opf_row_sum_enqueue<float>(len, slots, block_rows, slot, sms, s)
                                                  : opf_row_sum_enqueue<double>(len, slots, block_rows, slot, sms, s);
            if (e == cudaSuccess) {
                e = opf_row_copy(summed[o], slot, 0, sms, s);
            }
            if (e != cudaSuccess) {
                char what[96];
                snprintf(what, sizeof what, "adding up %s over the rows failed", op->outputs[o].name);
                return opf_cuda_fail(OPF_E_INTERNAL, label, what, e);
            }
        }
        if (scatter[o] != NULL) {
            cudaError_t e = opf_row_copy(scatter[o], L.operands[op->num_inputs + o], 0, sms, s);
            if (e != cudaSuccess) {
                char what[96];
                snprintf(what, sizeof what, "scattering the rows of %s failed", op->outputs[o].name);
                return opf_cuda_fail(OPF_E_INTERNAL, label, what, e);
            }
        }
    }
    return OPF_OK;
}

/* Never called: opf_op_run_cuda recognizes it and runs the engine above. */
extern "C" opf_status opf_cuda_row_compute(const opf_tensor *const *inputs, const opf_tensor *const *outputs,
                                           const opf_attr_value *attrs, void *stream) {
    (void)inputs;
    (void)outputs;
    (void)attrs;
    (void)stream;
    return opf_error(OPF_E_INTERNAL, "the CUDA row engine is run by opf_op_run_cuda only");
}
