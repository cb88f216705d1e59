/*
 * engine.c — the elementwise engine.
 *
 * Contiguous operands (the common case) go straight to the micro-kernel in
 * large chunks, one per thread. Strided operands are walked row by row after
 * merging dims that are contiguous with each other; rows whose operands have
 * unit stride are passed to the kernel in place, others are gathered into
 * small stack buffers, computed, and scattered back.
 */
#include "engine.h"

#include <string.h>

#include "tensor.h"
#include "threadpool.h"

enum {
    OPF_MAX_OPERANDS = 3,        /* two inputs and the output */
    OPF_ELTWISE_GRAIN = 1 << 16, /* elements per chunk at least: thread start-up is ~10 us */
    OPF_BLOCK = 256              /* elements per gathered block */
};

typedef struct opf_eltwise_job {
    opf_any_ukernel kernel;
    int arity;
    size_t elem;
    union {
        opf_f32_params f32;
        opf_f64_params f64;
    } params;
    opf_dtype dtype;
    /* Iteration space after merging dims: rank, sizes, and per-operand
     * element strides (operand `arity` is the output). */
    int32_t rank;
    int64_t shape[OPF_MAX_RANK];
    int64_t strides[OPF_MAX_OPERANDS][OPF_MAX_RANK];
    char *base[OPF_MAX_OPERANDS];
} opf_eltwise_job;

static void opf_call_kernel(const opf_eltwise_job *job, size_t n, const void *a, const void *b, void *y) {
    if (job->dtype == OPF_F32) {
        if (job->arity == 1) {
            ((opf_f32_unary_ukernel)job->kernel)(n, a, y, &job->params.f32);
        } else {
            ((opf_f32_binary_ukernel)job->kernel)(n, a, b, y, &job->params.f32);
        }
    } else {
        if (job->arity == 1) {
            ((opf_f64_unary_ukernel)job->kernel)(n, a, y, &job->params.f64);
        } else {
            ((opf_f64_binary_ukernel)job->kernel)(n, a, b, y, &job->params.f64);
        }
    }
}

static void opf_eltwise_contiguous(void *ctx, int64_t begin, int64_t end) {
    const opf_eltwise_job *job = ctx;
    size_t offset = (size_t)begin * job->elem;
    const void *b = job->arity == 2 ? job->base[1] + offset : NULL;
    opf_call_kernel(job, (size_t)(end - begin), job->base[0] + offset, b, job->base[job->arity] + offset);
}

/* One run of `n` elements of the innermost dim, starting at the given
 * per-operand pointers. */
static void opf_eltwise_row(const opf_eltwise_job *job, int64_t n, char *const *ptr) {
    const int last = job->rank - 1;
    _Alignas(64) char buf[OPF_MAX_OPERANDS][OPF_BLOCK * sizeof(double)];
    for (int64_t done = 0; done < n; done += OPF_BLOCK) {
        size_t len = (size_t)(n - done < OPF_BLOCK ? n - done : OPF_BLOCK);
        char *p[OPF_MAX_OPERANDS] = {NULL, NULL, NULL};
        for (int op = 0; op <= job->arity; op++) {
            int64_t stride = job->strides[op][last];
            char *start = ptr[op] + done * stride * (int64_t)job->elem;
            if (stride == 1) {
                p[op] = start;
                continue;
            }
            p[op] = buf[op];
            if (op < job->arity) { /* gather an input */
                for (size_t i = 0; i < len; i++) {
                    memcpy(buf[op] + i * job->elem, start + (int64_t)i * stride * (int64_t)job->elem, job->elem);
                }
            }
        }
        opf_call_kernel(job, len, p[0], job->arity == 2 ? p[1] : NULL, p[job->arity]);
        int64_t ystride = job->strides[job->arity][last];
        if (ystride != 1) { /* scatter the output */
            char *start = ptr[job->arity] + done * ystride * (int64_t)job->elem;
            for (size_t i = 0; i < len; i++) {
                memcpy(start + (int64_t)i * ystride * (int64_t)job->elem, buf[job->arity] + i * job->elem, job->elem);
            }
        }
    }
}

static void opf_eltwise_strided(void *ctx, int64_t begin, int64_t end) {
    const opf_eltwise_job *job = ctx;
    const int last = job->rank - 1;
    int64_t index[OPF_MAX_RANK];
    int64_t rem = begin;
    for (int d = last; d >= 0; d--) {
        index[d] = rem % job->shape[d];
        rem /= job->shape[d];
    }
    int64_t pos = begin;
    while (pos < end) {
        char *ptr[OPF_MAX_OPERANDS];
        for (int op = 0; op <= job->arity; op++) {
            int64_t off = 0;
            for (int d = 0; d <= last; d++) {
                off += index[d] * job->strides[op][d];
            }
            ptr[op] = job->base[op] + off * (int64_t)job->elem;
        }
        int64_t n = job->shape[last] - index[last];
        if (n > end - pos) {
            n = end - pos;
        }
        opf_eltwise_row(job, n, ptr);
        pos += n;
        index[last] += n;
        for (int d = last; d > 0 && index[d] == job->shape[d]; d--) {
            index[d] = 0;
            index[d - 1]++;
        }
    }
}

/* Absolute value of an element stride. */
static int64_t opf_abs64(int64_t v) { return v < 0 ? -v : v; }

/* The iteration order: dims of size > 1, outermost first, ordered by the
 * output's strides (largest first) so that the output — then the first
 * input, on ties — is walked in memory order, as NumPy's iterator does. A
 * transposed output is then written sequentially rather than column by
 * column. Insertion sort: stable, and rank is at most OPF_MAX_RANK. */
static int32_t opf_eltwise_order(const opf_eltwise_job *job, const opf_tensor *const *operands, int32_t *order) {
    const opf_tensor *y = operands[job->arity];
    int32_t count = 0;
    for (int32_t d = 0; d < y->ndim; d++) {
        if (y->shape[d] == 1) {
            continue;
        }
        int64_t ys = opf_abs64(opf_tensor_stride(y, d)), xs = opf_abs64(opf_tensor_stride(operands[0], d));
        int32_t at = count++;
        while (at > 0) {
            int32_t prev = order[at - 1];
            int64_t pys = opf_abs64(opf_tensor_stride(y, prev)), pxs = opf_abs64(opf_tensor_stride(operands[0], prev));
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

/* Merges dims (in iteration order) that every operand walks contiguously.
 * Leaves at least one dim. */
static void opf_eltwise_layout(opf_eltwise_job *job, const opf_tensor *const *operands) {
    const opf_tensor *y = operands[job->arity];
    int32_t order[OPF_MAX_RANK];
    int32_t count = opf_eltwise_order(job, operands, order);
    job->rank = 0;
    for (int32_t i = 0; i < count; i++) {
        int32_t d = order[i];
        int r = job->rank;
        int merge = r > 0;
        for (int op = 0; op <= job->arity && merge; op++) {
            int64_t s = opf_tensor_stride(operands[op], d);
            merge = job->strides[op][r - 1] == s * y->shape[d];
        }
        if (merge) {
            job->shape[r - 1] *= y->shape[d];
            for (int op = 0; op <= job->arity; op++) {
                job->strides[op][r - 1] = opf_tensor_stride(operands[op], d);
            }
            continue;
        }
        job->shape[r] = y->shape[d];
        for (int op = 0; op <= job->arity; op++) {
            job->strides[op][r] = opf_tensor_stride(operands[op], d);
        }
        job->rank++;
    }
    if (job->rank == 0) {
        job->rank = 1;
        job->shape[0] = 1;
        for (int op = 0; op <= job->arity; op++) {
            job->strides[op][0] = 1;
        }
    }
}

opf_status opf_eltwise_run(opf_eltwise_op op, const opf_tensor *const *inputs, const opf_tensor *y, double alpha) {
    int64_t n = opf_tensor_numel(y);
    if (n == 0) {
        return OPF_OK;
    }
    opf_eltwise_slot slot = y->dtype == OPF_F32 ? op.f32 : op.f64;
    opf_eltwise_job job = {
        .kernel = opf_kernels_get()->eltwise[slot],
        .arity = opf_eltwise_slot_arity(slot),
        .elem = opf_dtype_size(y->dtype),
        .dtype = y->dtype,
    };
    if (job.dtype == OPF_F32) {
        job.params.f32.alpha = (float)alpha;
    } else {
        job.params.f64.alpha = alpha;
    }
    const opf_tensor *operands[OPF_MAX_OPERANDS] = {inputs[0], job.arity == 2 ? inputs[1] : y, y};
    int contiguous = 1;
    for (int i = 0; i <= job.arity; i++) {
        job.base[i] = opf_tensor_base(operands[i]);
        contiguous = contiguous && opf_tensor_is_contiguous(operands[i]);
    }
    if (contiguous) {
        opf_parallel_for(n, OPF_ELTWISE_GRAIN, opf_eltwise_contiguous, &job);
        return OPF_OK;
    }
    opf_eltwise_layout(&job, operands);
    opf_parallel_for(n, OPF_ELTWISE_GRAIN, opf_eltwise_strided, &job);
    return OPF_OK;
}
