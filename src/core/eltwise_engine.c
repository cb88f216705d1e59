/*
 * eltwise_engine.c — runs an authored elementwise kernel over tensor views.
 *
 * The iteration space is the broadcast of the inputs (a row that broadcasts,
 * "y[broadcast(a, b)]"): inputs of another shape are walked as views with
 * zero strides along the dims they broadcast, and an output summed to an
 * input's shape ("y[sum_to(a)]") is the kernel's result accumulated over the
 * dims it lacks (the reduction path at the end of this file). Same-shape
 * calls never see any of it.
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
#include <stdlib.h>
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

/* n elements of `elem` bytes from `stride` elements apart into dst; a zero
 * stride (a broadcast input) fills dst with one value. */
static void opf_ew_gather(size_t elem, int64_t n, const char *src, int64_t stride, char *dst) {
    if (elem == sizeof(float)) {
        const float *s = (const float *)src;
        float *d = (float *)dst, v = s[0];
        if (stride == 0) {
            for (int64_t i = 0; i < n; i++) {
                d[i] = v;
            }
        } else {
            for (int64_t i = 0; i < n; i++) {
                d[i] = s[i * stride];
            }
        }
        return;
    }
    const double *s = (const double *)src;
    double *d = (double *)dst, v = s[0];
    if (stride == 0) {
        for (int64_t i = 0; i < n; i++) {
            d[i] = v;
        }
    } else {
        for (int64_t i = 0; i < n; i++) {
            d[i] = s[i * stride];
        }
    }
}

/* n contiguous elements of src to `stride` elements apart from dst. */
static void opf_ew_scatter(size_t elem, int64_t n, const char *src, char *dst, int64_t stride) {
    if (elem == sizeof(float)) {
        for (int64_t i = 0; i < n; i++) {
            ((float *)dst)[i * stride] = ((const float *)src)[i];
        }
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        ((double *)dst)[i * stride] = ((const double *)src)[i];
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
            if (k < job->num_in) {
                opf_ew_gather(job->elem, len, at, stride, buf[k]);
            }
        }
        opf_ew_call(job, len, ptr);
        for (int32_t k = job->num_in; k < count; k++) { /* scatter the outputs */
            int64_t stride = job->strides[k][last];
            if (stride != 1) {
                opf_ew_scatter(job->elem, len, buf[k], start[k] + done * stride * elem, stride);
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

/* The iteration order: dims of size > 1, outermost first, by the strides of
 * operand `ref` (largest first), then operand `tie`'s on ties. The engine
 * orders by the first output and the first input, so that the output is
 * written in memory order, as NumPy's iterator does; the reduction path by
 * its most complete input, which it reads in memory order. */
static int32_t opf_ew_order(const opf_tensor *const *operands, int32_t ref, int32_t tie, int32_t *order) {
    const opf_tensor *y = operands[ref], *x = operands[tie];
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

/* Merges dims (in the order of opf_ew_order(ref, tie)) that every operand
 * walks contiguously; leaves at least one dim. Every operand has the
 * iteration shape (a view, when the row broadcasts). */
static void opf_ew_layout(opf_ew_job *job, const opf_tensor *const *operands, int32_t ref, int32_t tie) {
    const int32_t count = job->num_in + job->num_out;
    const opf_tensor *y = operands[ref];
    int32_t order[OPF_MAX_RANK];
    int32_t dims = opf_ew_order(operands, ref, tie, order);
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

/* --- broadcasting ------------------------------------------------------------------------------------------------- */

int opf_eltwise_views(int32_t num_in, int32_t count, const opf_tensor **operands, opf_ew_views *v) {
    int32_t rank = 0;
    for (int32_t k = 0; k < num_in; k++) {
        rank = operands[k]->ndim > rank ? operands[k]->ndim : rank;
    }
    for (int32_t d = 0; d < rank; d++) {
        v->shape[d] = 1;
    }
    /* The row's checks passed: along each dim the sizes other than 1 agree. */
    for (int32_t k = 0; k < num_in; k++) {
        const opf_tensor *t = operands[k];
        for (int32_t d = 0; d < t->ndim; d++) {
            if (t->shape[d] != 1) {
                v->shape[rank - t->ndim + d] = t->shape[d];
            }
        }
    }
    int same = 1;
    for (int32_t k = 0; k < count && same; k++) {
        same = operands[k]->ndim == rank;
        for (int32_t d = 0; same && d < rank; d++) {
            same = operands[k]->shape[d] == v->shape[d];
        }
    }
    if (same) {
        return 0;
    }
    v->ndim = rank;
    for (int32_t k = 0; k < count; k++) {
        const opf_tensor *t = operands[k];
        const int32_t lead = rank - t->ndim;
        for (int32_t d = 0; d < rank; d++) {
            v->strides[k][d] = d >= lead && t->shape[d - lead] == v->shape[d] ? opf_tensor_stride(t, d - lead) : 0;
        }
        v->t[k] = *t;
        v->t[k].ndim = rank;
        v->t[k].shape = v->shape;
        v->t[k].strides = v->strides[k];
        operands[k] = &v->t[k];
    }
    return 1;
}

/* Writes zeros over every element of a validated view. */
static void opf_ew_zero(const opf_tensor *t) {
    const int64_t n = opf_tensor_numel(t);
    const size_t elem = opf_dtype_size(t->dtype);
    int64_t index[OPF_MAX_RANK] = {0};
    for (int64_t i = 0; i < n; i++) {
        int64_t off = 0;
        for (int32_t d = 0; d < t->ndim; d++) {
            off += index[d] * opf_tensor_stride(t, d);
        }
        memset(opf_tensor_base(t) + off * (int64_t)elem, 0, elem);
        for (int32_t d = t->ndim - 1; d >= 0 && ++index[d] == t->shape[d]; d--) {
            index[d] = 0;
        }
    }
}

/* --- the reduction path: outputs summed over broadcast dims --------------------------------------------------------
 *
 * The iteration space (merged, ordered by the most complete input) is cut
 * along one dim into chunks whose number depends only on the shapes, never
 * on the thread count. Each chunk runs the kernel a block of the innermost
 * dim at a time and adds each summed output's block into an accumulator of
 * doubles (one per chunk, over the output's elements in the chunk): a
 * float32 sum of many elements stays accurate. When the cut dim is one
 * every summed output keeps, chunks own disjoint outputs and store their
 * accumulators themselves; otherwise each chunk's accumulator is a partial
 * sum of the whole output, and the partials are added in chunk order. Either
 * way the result does not depend on the number of threads. */

enum {
    OPF_EW_MAX_CHUNKS = 64,         /* chunks of a reduction at most */
    OPF_EW_MIN_SEGMENT = 4096,      /* elements a chunk walks contiguously at least, when cut along an inner dim */
    OPF_EW_PARTIAL_BUDGET = 1 << 22 /* elements of partial sums allowed beyond the input's */
};

typedef struct opf_ew_reduce {
    const opf_ew_job *job;
    int32_t split;     /* the dim cut into chunks */
    int64_t per_chunk; /* of the split dim per chunk */
    int partial;       /* accumulators are partial sums of whole outputs */
    int summed[OPF_MAX_ARGS];
    int64_t acc_stride[OPF_MAX_ARGS][OPF_MAX_RANK]; /* per summed output: compact strides over its kept dims */
    int64_t acc_size[OPF_MAX_ARGS];                 /* elements of one chunk's accumulator */
    double *acc[OPF_MAX_ARGS];                      /* one accumulator per chunk */
} opf_ew_reduce;

static void opf_ew_accumulate(size_t elem, int64_t n, const char *x, double *acc, int64_t acc_stride) {
    if (acc_stride == 0) { /* the innermost dim is summed: one total, 8 partial sums */
        double lane[8] = {0};
        int64_t i = 0;
        if (elem == sizeof(float)) {
            const float *f = (const float *)x;
            for (; i + 8 <= n; i += 8) {
                for (int j = 0; j < 8; j++) {
                    lane[j] += f[i + j];
                }
            }
            for (; i < n; i++) {
                lane[0] += f[i];
            }
        } else {
            const double *f = (const double *)x;
            for (; i + 8 <= n; i += 8) {
                for (int j = 0; j < 8; j++) {
                    lane[j] += f[i + j];
                }
            }
            for (; i < n; i++) {
                lane[0] += f[i];
            }
        }
        acc[0] += ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
        return;
    }
    /* Kept: compact, so consecutive. */
    if (elem == sizeof(float)) {
        for (int64_t i = 0; i < n; i++) {
            acc[i] += ((const float *)x)[i];
        }
    } else {
        for (int64_t i = 0; i < n; i++) {
            acc[i] += ((const double *)x)[i];
        }
    }
}

/* One run of n elements of the innermost dim: ptr[k] operand k's first,
 * acc[j] summed output j's accumulator element. */
static void opf_ew_reduce_row(const opf_ew_reduce *r, int64_t n, char *const *start, double *const *acc) {
    const opf_ew_job *job = r->job;
    const int32_t last = job->rank - 1, count = job->num_in + job->num_out;
    const int64_t elem = (int64_t)job->elem;
    _Alignas(64) char buf[OPF_EW_OPERANDS][OPF_EW_BLOCK * sizeof(double)];
    for (int64_t done = 0; done < n; done += OPF_EW_BLOCK) {
        int64_t len = n - done < OPF_EW_BLOCK ? n - done : OPF_EW_BLOCK;
        char *ptr[OPF_EW_OPERANDS];
        for (int32_t k = 0; k < count; k++) {
            int64_t stride = job->strides[k][last];
            char *at = start[k] + done * stride * elem;
            int summed = k >= job->num_in && r->summed[k - job->num_in];
            ptr[k] = stride == 1 && !summed ? at : buf[k];
            if (k < job->num_in && stride != 1) {
                opf_ew_gather(job->elem, len, at, stride, buf[k]);
            }
        }
        opf_ew_call(job, len, ptr);
        for (int32_t j = 0; j < job->num_out; j++) {
            const int32_t k = job->num_in + j;
            const int64_t stride = job->strides[k][last];
            if (r->summed[j]) {
                const int64_t as = r->acc_stride[j][last];
                opf_ew_accumulate(job->elem, len, buf[k], acc[j] + done * as, as);
            } else if (stride != 1) {
                opf_ew_scatter(job->elem, len, buf[k], start[k] + done * stride * elem, stride);
            }
        }
    }
}

/* The box of chunk c: lo[d] .. hi[d] along each dim. */
static void opf_ew_chunk_box(const opf_ew_reduce *r, int64_t c, int64_t *lo, int64_t *hi) {
    const opf_ew_job *job = r->job;
    for (int32_t d = 0; d < job->rank; d++) {
        lo[d] = 0;
        hi[d] = job->shape[d];
    }
    lo[r->split] = c * r->per_chunk;
    hi[r->split] =
        lo[r->split] + r->per_chunk < job->shape[r->split] ? lo[r->split] + r->per_chunk : job->shape[r->split];
}

/* Converts accumulator `acc` of summed output j (covering the box lo .. hi;
 * its element of index i at (i - base) . acc_stride) into the output. */
static void opf_ew_store(const opf_ew_reduce *r, int32_t j, const double *acc, const int64_t *lo, const int64_t *hi,
                         const int64_t *base) {
    const opf_ew_job *job = r->job;
    const int32_t k = job->num_in + j, rank = job->rank;
    int64_t idx[OPF_MAX_RANK], top[OPF_MAX_RANK];
    for (int32_t d = 0; d < rank; d++) {
        idx[d] = lo[d];
        top[d] = r->acc_stride[j][d] != 0 ? hi[d] : lo[d] + 1; /* a summed dim: its first index only */
    }
    for (;;) {
        int64_t off = 0, at = 0;
        for (int32_t d = 0; d < rank; d++) {
            off += idx[d] * job->strides[k][d];
            at += (idx[d] - base[d]) * r->acc_stride[j][d];
        }
        char *out = job->base[k] + off * (int64_t)job->elem;
        if (job->elem == sizeof(float)) {
            *(float *)out = (float)acc[at];
        } else {
            *(double *)out = acc[at];
        }
        int32_t d = rank - 1;
        while (d >= 0 && ++idx[d] == top[d]) {
            idx[d] = lo[d];
            d--;
        }
        if (d < 0) {
            return;
        }
    }
}

static void opf_ew_reduce_chunk(const opf_ew_reduce *r, int64_t c) {
    const opf_ew_job *job = r->job;
    const int32_t last = job->rank - 1, count = job->num_in + job->num_out;
    int64_t lo[OPF_MAX_RANK], hi[OPF_MAX_RANK], base[OPF_MAX_RANK] = {0}, idx[OPF_MAX_RANK];
    opf_ew_chunk_box(r, c, lo, hi);
    if (!r->partial) {
        base[r->split] = lo[r->split]; /* the chunk's own accumulator starts at its box */
    }
    double *acc[OPF_MAX_ARGS];
    for (int32_t j = 0; j < job->num_out; j++) {
        acc[j] = r->summed[j] ? r->acc[j] + c * r->acc_size[j] : NULL;
        if (acc[j] != NULL) {
            memset(acc[j], 0, sizeof(double) * (size_t)r->acc_size[j]);
        }
    }
    for (int32_t d = 0; d < job->rank; d++) {
        idx[d] = lo[d];
    }
    const int64_t n = hi[last] - lo[last];
    for (int32_t d = 0; n > 0;) {
        char *ptr[OPF_EW_OPERANDS];
        double *at[OPF_MAX_ARGS];
        for (int32_t k = 0; k < count; k++) {
            int64_t off = 0;
            for (d = 0; d <= last; d++) {
                off += idx[d] * job->strides[k][d];
            }
            ptr[k] = job->base[k] + off * (int64_t)job->elem;
        }
        for (int32_t j = 0; j < job->num_out; j++) {
            int64_t off = 0;
            for (d = 0; acc[j] != NULL && d <= last; d++) {
                off += (idx[d] - base[d]) * r->acc_stride[j][d];
            }
            at[j] = acc[j] != NULL ? acc[j] + off : NULL;
        }
        opf_ew_reduce_row(r, n, ptr, at);
        for (d = last - 1; d >= 0 && ++idx[d] == hi[d]; d--) {
            idx[d] = lo[d];
        }
        if (d < 0) {
            break;
        }
    }
    for (int32_t j = 0; !r->partial && j < job->num_out; j++) {
        if (r->summed[j]) {
            opf_ew_store(r, j, acc[j], lo, hi, base);
        }
    }
}

static void opf_ew_reduce_range(void *ctx, int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; c++) {
        opf_ew_reduce_chunk(ctx, c);
    }
}

/* The input walked in memory order: the one that broadcasts along the
 * fewest dims (the first of those). */
static int32_t opf_ew_reference(const opf_ew_job *job, const opf_tensor *const *operands) {
    int32_t best = 0, best_zeros = OPF_MAX_RANK + 1;
    for (int32_t k = 0; k < job->num_in; k++) {
        int32_t zeros = 0;
        for (int32_t d = 0; d < operands[k]->ndim; d++) {
            zeros += operands[k]->shape[d] > 1 && opf_tensor_stride(operands[k], d) == 0;
        }
        if (zeros < best_zeros) {
            best = k;
            best_zeros = zeros;
        }
    }
    return best;
}

/* Runs a call whose views sum some outputs (job->fn, elem, attrs, base set). */
static opf_status opf_ew_reduce_run(opf_ew_job *job, const opf_tensor *const *operands, int64_t n) {
    opf_ew_reduce r = {.job = job};
    int32_t first_summed = -1;
    for (int32_t j = 0; j < job->num_out; j++) {
        const opf_tensor *y = operands[job->num_in + j];
        for (int32_t d = 0; d < y->ndim; d++) {
            r.summed[j] |= y->shape[d] > 1 && opf_tensor_stride(y, d) == 0;
        }
        first_summed = first_summed < 0 && r.summed[j] ? j : first_summed;
    }
    opf_ew_layout(job, operands, opf_ew_reference(job, operands), job->num_in + first_summed);
    const int32_t rank = job->rank;
    /* Where to cut: the outermost dim every summed output keeps, if its
     * chunks are long enough; else partial sums along dim 0. */
    int64_t want = (n + OPF_EW_GRAIN - 1) / OPF_EW_GRAIN;
    want = want < OPF_EW_MAX_CHUNKS ? want : OPF_EW_MAX_CHUNKS;
    int64_t out_elems = 0, inner = n, chunks = 1;
    r.split = -1;
    for (int32_t d = 0; d < rank && r.split < 0; d++) {
        inner /= job->shape[d];
        int kept = 1;
        for (int32_t j = 0; j < job->num_out; j++) {
            kept = kept && (!r.summed[j] || job->strides[job->num_in + j][d] != 0);
        }
        chunks = want < job->shape[d] ? want : job->shape[d];
        if (kept && (d == 0 || (job->shape[d] + chunks - 1) / chunks * inner >= OPF_EW_MIN_SEGMENT)) {
            r.split = d;
        }
    }
    if (r.split < 0) {
        r.partial = 1;
        r.split = 0;
        chunks = want < job->shape[0] ? want : job->shape[0];
    }
    r.per_chunk = (job->shape[r.split] + chunks - 1) / chunks;
    chunks = (job->shape[r.split] + r.per_chunk - 1) / r.per_chunk;
    /* Each summed output's accumulator: compact over the dims it keeps (the
     * cut dim: a chunk's share of it, unless partial). */
    for (int32_t j = 0; j < job->num_out; j++) {
        int64_t size = 1;
        for (int32_t d = rank - 1; r.summed[j] && d >= 0; d--) {
            const int keeps = job->strides[job->num_in + j][d] != 0;
            r.acc_stride[j][d] = keeps ? size : 0;
            size *= keeps ? (d == r.split && !r.partial ? r.per_chunk : job->shape[d]) : 1;
        }
        r.acc_size[j] = r.summed[j] ? size : 0;
        out_elems += r.acc_size[j];
    }
    if (r.partial) {
        while (chunks > 1 && chunks * out_elems > n + OPF_EW_PARTIAL_BUDGET) {
            chunks /= 2;
        }
        r.per_chunk = (job->shape[0] + chunks - 1) / chunks;
        chunks = (job->shape[0] + r.per_chunk - 1) / r.per_chunk;
    }
    opf_status st = OPF_OK;
    for (int32_t j = 0; j < job->num_out; j++) {
        if (r.summed[j] && (r.acc[j] = malloc(sizeof(double) * (size_t)(chunks * r.acc_size[j]))) == NULL) {
            st = opf_error(OPF_E_NOMEM, "out of memory for the sums of %lld elements",
                           (long long)(chunks * r.acc_size[j]));
        }
    }
    if (st == OPF_OK) {
        opf_parallel_for(chunks, 1, opf_ew_reduce_range, &r);
    }
    if (st == OPF_OK && r.partial) {
        /* The partial sums of each output, added in chunk order, then stored. */
        int64_t lo[OPF_MAX_RANK] = {0}, base[OPF_MAX_RANK] = {0};
        for (int32_t j = 0; j < job->num_out; j++) {
            for (int64_t c = 1; r.summed[j] && c < chunks; c++) {
                const double *part = r.acc[j] + c * r.acc_size[j];
                for (int64_t i = 0; i < r.acc_size[j]; i++) {
                    r.acc[j][i] += part[i];
                }
            }
            if (r.summed[j]) {
                opf_ew_store(&r, j, r.acc[j], lo, job->shape, base);
            }
        }
    }
    for (int32_t j = 0; j < job->num_out; j++) {
        free(r.acc[j]);
    }
    return st;
}

/* --- the engine --------------------------------------------------------------------------------------------------- */

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
    /* A row that broadcasts: every operand as a view of the iteration shape. */
    opf_ew_views views;
    int reduce = 0;
    if (op->num_outputs > 0 && opf_eltwise_views(job.num_in, job.num_in + job.num_out, operands, &views)) {
        for (int32_t j = 0; j < job.num_out; j++) {
            const opf_tensor *y = operands[job.num_in + j];
            for (int32_t d = 0; d < y->ndim; d++) {
                reduce |= y->shape[d] > 1 && opf_tensor_stride(y, d) == 0;
            }
        }
    }
    const opf_tensor *y = operands[job.num_in];
    int64_t n = opf_tensor_numel(y);
    if (n == 0) {
        /* Nothing to compute; an output summed over an empty dim is zero. */
        for (int32_t o = 0; o < op->num_outputs; o++) {
            if (opf_tensor_numel(outputs[o]) > 0) {
                opf_ew_zero(outputs[o]);
            }
        }
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
    if (reduce) {
        return opf_ew_reduce_run(&job, operands, n);
    }
    if (contiguous) {
        job.stream_copy = opf_kernels_get()->stream_copy;
        int stream = job.stream_copy != NULL && (size_t)n * job.elem >= OPF_EW_STREAM_MIN_BYTES;
        opf_parallel_for(n, OPF_EW_GRAIN, stream ? opf_ew_streamed : opf_ew_contiguous, &job);
        return OPF_OK;
    }
    opf_ew_layout(&job, operands, job.num_in, 0);
    opf_parallel_for(n, OPF_EW_GRAIN, opf_ew_strided, &job);
    return OPF_OK;
}
