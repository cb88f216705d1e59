/*
 * eltwise_engine.c — runs an authored elementwise kernel over tensor views.
 *
 * Contiguous operands (the common case) go straight to the kernel in large
 * chunks, one per thread. Strided operands are walked row by row after
 * merging dims that every operand walks contiguously; rows whose operands
 * have unit stride are passed to the kernel in place, others are gathered
 * into small stack buffers, computed, and scattered back. Large contiguous
 * outputs are computed a block at a time into an L1-resident buffer and
 * stored with non-temporal stores, so that every authored kernel writes
 * memory at the copy bandwidth without knowing it. The split into
 * chunks never changes which kernel computes an element, so results do not
 * depend on the thread count.
 */
#include <string.h>

#include "engines.h"
#include "kernels.h"
#include "tensor.h"
#include "threadpool.h"

enum {
    OPF_EW_STREAM_MIN_BYTES = 4 << 20,  /* outputs this large are streamed past the caches */
    OPF_EW_STREAM_BLOCK = 4096,         /* bytes per output block computed in L1, then streamed */
    OPF_EW_OPERANDS = 2 * OPF_MAX_ARGS, /* inputs then outputs */
    OPF_EW_GRAIN = 1 << 16,             /* elements per chunk at least: a thread's start costs ~10 us */
    OPF_EW_BLOCK = 256                  /* elements per gathered block */
};

typedef struct opf_ew_job {
    opf_eltwise_fn fn;
    opf_copy_ukernel stream_copy;
    int32_t num_in, num_out;
    size_t elem;
    opf_attr_value attrs[OPF_MAX_ATTRS];
    /* The iteration space after merging dims: rank, sizes and per-operand
     * element strides (operands: the inputs, then the outputs). */
    int32_t rank;
    int64_t shape[OPF_MAX_RANK];
    int64_t strides[OPF_EW_OPERANDS][OPF_MAX_RANK];
    char *base[OPF_EW_OPERANDS];
} opf_ew_job;

int opf_kernel_variant_in_use(void) {
    switch (opf_get_isa()) {
    case OPF_ISA_AVX512: return OPF_VARIANT_AVX512;
    case OPF_ISA_AVX2: return OPF_VARIANT_AVX2;
    default: return OPF_VARIANT_BASE;
    }
}

static void opf_ew_call(const opf_ew_job *job, int64_t n, char *const *ptr) {
    job->fn(n, (const void *const *)ptr, (void *const *)(ptr + job->num_in), job->attrs);
}

static void opf_ew_contiguous(void *ctx, int64_t begin, int64_t end) {
    const opf_ew_job *job = ctx;
    char *ptr[OPF_EW_OPERANDS];
    for (int32_t k = 0; k < job->num_in + job->num_out; k++) {
        ptr[k] = job->base[k] + (size_t)begin * job->elem;
    }
    opf_ew_call(job, end - begin, ptr);
}

/* The contiguous path for large outputs: the kernel writes each block into
 * L1, and the block goes to memory with a streaming copy. The kernel still
 * reads its inputs in place (an output exactly on an input is safe: a block's
 * inputs are read before its outputs are stored). */
static void opf_ew_streamed(void *ctx, int64_t begin, int64_t end) {
    const opf_ew_job *job = ctx;
    const int64_t block = OPF_EW_STREAM_BLOCK / (int64_t)job->elem;
    _Alignas(64) char buf[OPF_MAX_ARGS][OPF_EW_STREAM_BLOCK];
    char *ptr[OPF_EW_OPERANDS];
    for (int64_t pos = begin; pos < end; pos += block) {
        int64_t len = end - pos < block ? end - pos : block;
        for (int32_t k = 0; k < job->num_in; k++) {
            ptr[k] = job->base[k] + (size_t)pos * job->elem;
        }
        for (int32_t j = 0; j < job->num_out; j++) {
            ptr[job->num_in + j] = buf[j];
        }
        opf_ew_call(job, len, ptr);
        for (int32_t j = 0; j < job->num_out; j++) {
            job->stream_copy((size_t)len * job->elem, buf[j], job->base[job->num_in + j] + (size_t)pos * job->elem,
                             pos + len == end);
        }
    }
}

/* One run of `n` elements of the innermost dim from the given pointers. */
static void opf_ew_row(const opf_ew_job *job, int64_t n, char *const *start) {
    const int32_t last = job->rank - 1, count = job->num_in + job->num_out;
    const int64_t elem = (int64_t)job->elem;
    _Alignas(64) char buf[OPF_EW_OPERANDS][OPF_EW_BLOCK * sizeof(double)];
    for (int64_t done = 0; done < n; done += OPF_EW_BLOCK) {
        int64_t len = n - done < OPF_EW_BLOCK ? n - done : OPF_EW_BLOCK;
        char *ptr[OPF_EW_OPERANDS];
        for (int32_t k = 0; k < count; k++) {
            int64_t stride = job->strides[k][last];
            char *at = start[k] + done * stride * elem;
            if (stride == 1) {
                ptr[k] = at;
                continue;
            }
            ptr[k] = buf[k];
            for (int64_t i = 0; k < job->num_in && i < len; i++) { /* gather an input */
                memcpy(buf[k] + i * elem, at + i * stride * elem, job->elem);
            }
        }
        opf_ew_call(job, len, ptr);
        for (int32_t k = job->num_in; k < count; k++) { /* scatter the outputs */
            int64_t stride = job->strides[k][last];
            char *at = start[k] + done * stride * elem;
            for (int64_t i = 0; stride != 1 && i < len; i++) {
                memcpy(at + i * stride * elem, buf[k] + i * elem, job->elem);
            }
        }
    }
}

static void opf_ew_strided(void *ctx, int64_t begin, int64_t end) {
    const opf_ew_job *job = ctx;
    const int32_t last = job->rank - 1, count = job->num_in + job->num_out;
    int64_t index[OPF_MAX_RANK];
    int64_t rem = begin;
    for (int32_t d = last; d >= 0; d--) {
        index[d] = rem % job->shape[d];
        rem /= job->shape[d];
    }
    for (int64_t pos = begin; pos < end;) {
        char *ptr[OPF_EW_OPERANDS];
        for (int32_t k = 0; k < count; k++) {
            int64_t off = 0;
            for (int32_t d = 0; d <= last; d++) {
                off += index[d] * job->strides[k][d];
            }
            ptr[k] = job->base[k] + off * (int64_t)job->elem;
        }
        int64_t n = job->shape[last] - index[last];
        n = n < end - pos ? n : end - pos;
        opf_ew_row(job, n, ptr);
        pos += n;
        index[last] += n;
        for (int32_t d = last; d > 0 && index[d] == job->shape[d]; d--) {
            index[d] = 0;
            index[d - 1]++;
        }
    }
}

static int64_t opf_abs64(int64_t v) { return v < 0 ? -v : v; }

/* The iteration order: dims of size > 1, outermost first, by the first
 * output's strides (largest first), then the first input's on ties, so that
 * the output is written in memory order, as NumPy's iterator does. */
static int32_t opf_ew_order(const opf_tensor *const *operands, int32_t out, int32_t *order) {
    const opf_tensor *y = operands[out], *x = operands[0];
    int32_t count = 0;
    for (int32_t d = 0; d < y->ndim; d++) {
        if (y->shape[d] == 1) {
            continue;
        }
        int64_t ys = opf_abs64(opf_tensor_stride(y, d)), xs = opf_abs64(opf_tensor_stride(x, d));
        int32_t at = count++;
        while (at > 0) {
            int32_t prev = order[at - 1];
            int64_t pys = opf_abs64(opf_tensor_stride(y, prev)), pxs = opf_abs64(opf_tensor_stride(x, prev));
            if (pys > ys || (pys == ys && pxs >= xs)) {
                break;
            }
            order[at] = prev;
            at--;
        }
        order[at] = d;
    }
    return count;
}

/* Merges dims (in iteration order) that every operand walks contiguously;
 * leaves at least one dim. */
static void opf_ew_layout(opf_ew_job *job, const opf_tensor *const *operands) {
    const int32_t count = job->num_in + job->num_out;
    const opf_tensor *y = operands[job->num_in];
    int32_t order[OPF_MAX_RANK];
    int32_t dims = opf_ew_order(operands, job->num_in, order);
    job->rank = 0;
    for (int32_t i = 0; i < dims; i++) {
        int32_t d = order[i], r = job->rank;
        int merge = r > 0;
        for (int32_t k = 0; k < count && merge; k++) {
            merge = job->strides[k][r - 1] == opf_tensor_stride(operands[k], d) * y->shape[d];
        }
        if (merge) {
            job->shape[r - 1] *= y->shape[d];
        } else {
            job->shape[r] = y->shape[d];
            job->rank++;
        }
        for (int32_t k = 0; k < count; k++) {
            job->strides[k][job->rank - 1] = opf_tensor_stride(operands[k], d);
        }
    }
    if (job->rank == 0) {
        job->rank = 1;
        job->shape[0] = 1;
        for (int32_t k = 0; k < count; k++) {
            job->strides[k][0] = 1;
        }
    }
}

opf_status opf_eltwise_engine_run(const opf_op_def *op, const opf_tensor *const *inputs,
                                  const opf_tensor *const *outputs, const opf_attr_value *attrs) {
    const opf_eltwise_kernel *kernel = op->eltwise;
    const opf_tensor *operands[OPF_EW_OPERANDS];
    opf_ew_job job = {.num_in = op->num_inputs};
    for (int32_t i = 0; i < op->num_inputs; i++) {
        operands[i] = inputs[i];
    }
    /* The kernel writes the outputs, or else the inputs written in place. */
    for (int32_t o = 0; o < op->num_outputs; o++) {
        operands[job.num_in + job.num_out++] = outputs[o];
    }
    for (int32_t i = 0; op->num_outputs == 0 && i < op->num_inputs; i++) {
        if (op->inputs[i].flags & OPF_ARG_MUTATED) {
            operands[job.num_in + job.num_out++] = inputs[i];
        }
    }
    const opf_tensor *y = operands[job.num_in];
    int64_t n = opf_tensor_numel(y);
    if (n == 0) {
        return OPF_OK;
    }
    const opf_eltwise_fn *variants = y->dtype == OPF_F32 ? kernel->f32 : kernel->f64;
    for (int v = opf_kernel_variant_in_use(); v >= 0 && job.fn == NULL; v--) {
        job.fn = variants[v];
    }
    if (job.fn == NULL) {
        return opf_error(OPF_E_UNSUPPORTED, "its kernel has no %s build", opf_dtype_name(y->dtype));
    }
    job.elem = opf_dtype_size(y->dtype);
    memcpy(job.attrs, attrs, sizeof(opf_attr_value) * (size_t)op->num_attrs);
    int contiguous = 1;
    for (int32_t k = 0; k < job.num_in + job.num_out; k++) {
        job.base[k] = opf_tensor_base(operands[k]);
        contiguous = contiguous && opf_tensor_is_contiguous(operands[k]);
    }
    if (contiguous) {
        job.stream_copy = opf_kernels_get()->stream_copy;
        int stream = job.stream_copy != NULL && (size_t)n * job.elem >= OPF_EW_STREAM_MIN_BYTES;
        opf_parallel_for(n, OPF_EW_GRAIN, stream ? opf_ew_streamed : opf_ew_contiguous, &job);
        return OPF_OK;
    }
    opf_ew_layout(&job, operands);
    opf_parallel_for(n, OPF_EW_GRAIN, opf_ew_strided, &job);
    return OPF_OK;
}
