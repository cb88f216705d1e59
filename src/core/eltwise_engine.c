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
 * into small stack buffers, computed, and scattered back. Large outputs laid
 * out in the iteration order (contiguous ones, a broadcast row's included)
 * are computed a block at a time into an L1-resident buffer and stored with
 * non-temporal stores, so that every authored kernel writes memory at the
 * copy bandwidth without knowing it; a one-input kernel whose arithmetic
 * outlasts its memory traffic (timed on each chunk's first blocks, by the
 * thread computing the chunk) stores in place instead (OPF_EW_PLAIN_SHARE).
 * The split into chunks never changes which kernel computes an element, so
 * results do not depend on the thread count.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "engines.h"
#include "kernels.h"
#include "tensor.h"
#include "threadpool.h"

enum {
    OPF_EW_STREAM_BLOCK = 4096,         /* bytes per output block computed in L1, then streamed */
    OPF_EW_PERIOD_MAX_BYTES = 64 << 10, /* rows repeated along the outer dims read from a buffer: this long at most */
    OPF_EW_STREAM_DENSE_BLOCK = 1024,   /* the same where every operand is contiguous (see opf_ew_streamed) */
    OPF_EW_STREAM_PREFETCH = 8192,      /* how far ahead a streamed block's inputs read in place are asked for */
    OPF_EW_IN_PLACE_PREFETCH = 2048,    /* the same for blocks stored in place (opf_ew_in_place) */
    OPF_EW_PROBE_BLOCKS = 64,           /* blocks timed streamed, then computed again in cache (each chunk) */
    OPF_EW_PROBE_SPAN = 32,             /* a chunk is probed if it is this many probes long at least */
    OPF_EW_OPERANDS = 2 * OPF_MAX_ARGS, /* inputs then outputs */
    OPF_EW_GRAIN = 1 << 16,             /* elements per chunk at least: a thread's start costs ~10 us */
    OPF_EW_BLOCK = 256,                 /* elements per gathered block */
    OPF_EW_RBLOCK = 1024                /* elements per tile of the reduction path */
};

/* One thread, one input: the share of the streamed blocks' time that their
 * arithmetic alone takes, above which the rest is stored in place. A kernel
 * that computes much per element (tanh, sigmoid, silu, gelu: 0.37-0.62 on
 * one Zen 4 thread) then hides its stores' memory traffic among its
 * arithmetic, and saves the copy out of the block buffer: 8-12% less time
 * ([8192, 4096] float32: tanh 11.1 -> 10.2 ms, sigmoid 13.8 -> 12.2, silu
 * 13.6 -> 12.0, gelu 22.5 -> 20.4). One that computes little (relu, scale:
 * 0.15-0.21) streams, 15-20% faster than stored in place. With two inputs
 * streaming was the faster on one thread even for much arithmetic
 * (silu_grad 17.4 against 19.5 ms, gelu_grad 24.4 against 28.3). Every
 * chunk probes for itself, on its own thread while the others probe theirs,
 * so the timing includes the threads' contention: always storing in place
 * on two threads was slower for tanh (5.7 against 7.0 ms), but probing per
 * chunk (before, only a single chunk probed; several always streamed) made
 * two Zen 4 threads (bench/ab, alternating, 30 reps, in brackets the base
 * build against itself) 1.26x faster on gelu [8192, 4096] (1.00x), 1.39x on
 * [1024, 4096] (0.98x), sigmoid 1.41x (1.07x), silu 1.29x (0.98x), tanh
 * 1.08x (0.89x); scale still streams (0.95x, 1.08x); one thread as before.
 * (Stored in place, the kernel now goes in prefetched blocks,
 * opf_ew_in_place.) A kernel of more inputs whose arithmetic outlasts its
 * memory traffic so still streams, in shorter blocks
 * (opf_ew_dense_block_bytes): stored in place in prefetched blocks,
 * gelu_grad, silu_grad and sigmoid_grad measured 0.97-1.01 times as fast as
 * streamed on an Intel Xeon (Emerald Rapids). */
#define OPF_EW_PLAIN_SHARE 0.3

typedef struct opf_ew_job {
    opf_eltwise_fn fn;
    int pass_through; /* OPF_OP_PASS_THROUGH: fn writes its first input to its one output */
    opf_copy_ukernel stream_copy;
    int walk;        /* opf_ew_streamed walks the inputs (opf_ew_walk) rather than reading them contiguously */
    int probe;       /* opf_ew_streamed times its first blocks (contiguous operands): see OPF_EW_PLAIN_SHARE */
    int64_t period;  /* > 0: the inputs lie in iteration order or repeat one row of `period` elements (opf_ew_period) */
    uint32_t unread; /* inputs declared OPF_ARG_SHAPE_ONLY that lie in place (bit k: input k): never prefetched */
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

/* n elements of `elem` bytes from `stride` elements apart into dst; a zero
 * stride (a broadcast input) fills dst with one value. Loops of a constant
 * count, which the compiler vectorizes at -O2. */
#define OPF_EW_GATHER(T)                                                                                               \
    do {                                                                                                               \
        const T *s = (const T *)src;                                                                                   \
        T *d = (T *)dst, v = s[0];                                                                                     \
        int64_t i = 0;                                                                                                 \
        if (stride == 0) {                                                                                             \
            for (; i + 16 <= n; i += 16) {                                                                             \
                for (int j = 0; j < 16; j++) {                                                                         \
                    d[i + j] = v;                                                                                      \
                }                                                                                                      \
            }                                                                                                          \
            for (; i < n; i++) {                                                                                       \
                d[i] = v;                                                                                              \
            }                                                                                                          \
        } else {                                                                                                       \
            for (; i < n; i++) {                                                                                       \
                d[i] = s[i * stride];                                                                                  \
            }                                                                                                          \
        }                                                                                                              \
    } while (0)

static void opf_ew_gather(size_t elem, int64_t n, const char *src, int64_t stride, char *dst) {
    if (elem == sizeof(float)) {
        OPF_EW_GATHER(float);
    } else {
        OPF_EW_GATHER(double);
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

/* One run of `n` elements of the innermost dim from the given pointers;
 * with `out_unit`, the outputs' pointers are to unit-stride buffers. */
static void opf_ew_row(const opf_ew_job *job, int64_t n, char *const *start, int out_unit) {
    const int32_t last = job->rank - 1, count = job->num_in + job->num_out;
    const int64_t elem = (int64_t)job->elem;
    int unit = 1; /* every operand in place: one call for the run */
    for (int32_t k = 0; k < count && unit; k++) {
        unit = (k >= job->num_in && out_unit) || job->strides[k][last] == 1;
    }
    if (unit) {
        opf_ew_call(job, n, start);
        return;
    }
    _Alignas(64) char buf[OPF_EW_OPERANDS][OPF_EW_BLOCK * sizeof(double)];
    for (int64_t done = 0; done < n; done += OPF_EW_BLOCK) {
        int64_t len = n - done < OPF_EW_BLOCK ? n - done : OPF_EW_BLOCK;
        char *ptr[OPF_EW_OPERANDS];
        for (int32_t k = 0; k < count; k++) {
            int64_t stride = k >= job->num_in && out_unit ? 1 : job->strides[k][last];
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
        for (int32_t k = job->num_in; k < count && !out_unit; k++) { /* scatter the outputs */
            int64_t stride = job->strides[k][last];
            if (stride != 1) {
                opf_ew_scatter(job->elem, len, buf[k], start[k] + done * stride * elem, stride);
            }
        }
    }
}

/* The multi-index of element `pos` of the iteration space. */
static void opf_ew_index(const opf_ew_job *job, int64_t pos, int64_t *index) {
    for (int32_t d = job->rank - 1; d >= 0; d--) {
        index[d] = pos % job->shape[d];
        pos /= job->shape[d];
    }
}

/* `n` elements of the iteration space from `index` (advanced past them),
 * walked a run of the innermost dim at a time; the outputs at their places,
 * or with `out` at out[j] on (unit-stride block buffers). */
static void opf_ew_walk(const opf_ew_job *job, int64_t *index, int64_t n, char *const *out) {
    const int32_t last = job->rank - 1, count = job->num_in + job->num_out;
    for (int64_t done = 0; done < n;) {
        char *ptr[OPF_EW_OPERANDS];
        for (int32_t k = 0; k < count; k++) {
            int64_t off = 0;
            for (int32_t d = 0; d <= last; d++) {
                off += index[d] * job->strides[k][d];
            }
            ptr[k] = k >= job->num_in && out != NULL ? out[k - job->num_in] + (size_t)done * job->elem
                                                     : job->base[k] + off * (int64_t)job->elem;
        }
        int64_t run = job->shape[last] - index[last];
        run = run < n - done ? run : n - done;
        opf_ew_row(job, run, ptr, out != NULL);
        done += run;
        index[last] += run;
        for (int32_t d = last; d > 0 && index[d] == job->shape[d]; d--) {
            index[d] = 0;
            index[d - 1]++;
        }
    }
}

static void opf_ew_strided(void *ctx, int64_t begin, int64_t end) {
    int64_t index[OPF_MAX_RANK];
    opf_ew_index(ctx, begin, index);
    opf_ew_walk(ctx, index, end - begin, NULL);
}

/* Contiguous elements [pos, pos + len) computed into the buffers `out`;
 * an input with a row buffer (rows[k], with job->period) read from it.
 * The inputs read in place are asked for OPF_EW_STREAM_PREFETCH bytes
 * further on, into L2: with the streaming stores' traffic, the hardware
 * prefetchers alone left memory idle. On one Zen 4 (2 cores of a VM),
 * bench/ab, alternating, one / two threads: [8192, 4096] + [4096] float32
 * 1.68-1.78x / 1.25-1.79x faster (float64 2.2x / 1.7x), mul so 1.7-2.0x /
 * 1.2-1.3x, sigmoid_grad on two threads 1.6x; the same-shape add, relu and
 * gelu_grad inside the runs' noise (0.9-1.45x); 4 KiB ahead a little less,
 * 1-2 KiB less again. */
static void opf_ew_block_call(const opf_ew_job *job, int64_t pos, int64_t len, char *const *rows, char *const *out,
                              int64_t ahead) {
    char *ptr[OPF_EW_OPERANDS];
    for (int32_t k = 0; k < job->num_in; k++) {
        ptr[k] = rows[k] != NULL ? rows[k] + (size_t)(pos % job->period) * job->elem
                                 : job->base[k] + (size_t)pos * job->elem;
        if (rows[k] == NULL && !(job->unread >> k & 1)) {
            opf_prefetch_at(ptr[k], ahead, len * (int64_t)job->elem);
        }
    }
    for (int32_t j = 0; j < job->num_out; j++) {
        ptr[job->num_in + j] = out[j];
    }
    opf_ew_call(job, len, ptr);
}

/* The streamed block of a job of contiguous operands whose arithmetic
 * outlasts its memory traffic (the probe of opf_ew_streamed): the 1 KiB of
 * OPF_EW_STREAM_DENSE_BLOCK halved while more than one input is read from
 * memory, down to 256 bytes, so that a block's burst of prefetches
 * (opf_ew_block_call) stays at about 16 lines, which such a kernel's
 * arithmetic then covers. On an Intel Xeon (Emerald Rapids, 2 cores of a
 * VM), bench/ab, alternating, [8192, 4096] float32, against 1 KiB blocks:
 * gelu_grad 1.15-1.17x faster on one thread and 1.12-1.22x on two, silu_grad
 * 1.15x and 1.21x; the same bits. Kernels that compute little (add, mul,
 * sigmoid_grad, tanh_grad; 0.96-1.04x either way, within the noise) keep
 * 1 KiB blocks: in 512-byte blocks regardless, add and mul took 2-6% more
 * time, each block's call costing more than its prefetch burst. */
static int64_t opf_ew_dense_block_bytes(const opf_ew_job *job) {
    int32_t reads = 0;
    for (int32_t k = 0; k < job->num_in; k++) {
        const int repeated = job->period > 0 && job->strides[k][0] == 0; /* read from a row buffer, in cache */
        reads += !(job->unread >> k & 1) && !repeated;
    }
    int64_t bytes = OPF_EW_STREAM_DENSE_BLOCK;
    for (; reads > 1 && bytes > 256; reads = (reads + 1) / 2) {
        bytes /= 2;
    }
    return bytes;
}

/* Elements [pos, end) of a large job stored in place (where the probe of
 * opf_ew_streamed found the kernel's arithmetic outlasting its memory
 * traffic), in blocks of the streamed path's length, each block's inputs
 * asked for OPF_EW_STREAM_PREFETCH bytes ahead as there. One call over the
 * whole range, as before, left the reads to the hardware prefetchers, which
 * kept too little in flight behind so much arithmetic. On an Intel Xeon
 * (Emerald Rapids, 2 cores of a VM), bench/ab, alternating, [8192, 4096]
 * float32, these blocks against the one call: gelu 1.20-1.21x faster on one
 * thread, 1.17-1.18x on two; silu 1.21-1.22x, 1.14-1.19x; sigmoid 1.21x,
 * 1.25-1.31x; tanh (which the probe sends either way there) 1.06x / 0.97x,
 * 1.04x / 0.96x; the same bits. A loop of gelu timed alone on data in cache
 * took about as long as its blocks do here. Their inputs are asked for
 * OPF_EW_IN_PLACE_PREFETCH bytes ahead, not the streamed path's 8 KiB: with
 * each block's plain stores reading their lines too, a burst of 16
 * prefetches that far ahead waited for the line fill buffers (`perf`: a
 * sixth of gelu's time on the prefetch instructions). On an Intel Xeon (AMX;
 * the guest reports model 167), bench/ab, alternating, [8192, 4096] 16 bytes
 * past a line, 2 KiB against 8 KiB ahead: gelu 1.12x faster on one thread,
 * 1.06x on two; silu 1.07x, 1.00x; sigmoid 1.08x, 1.04x; tanh 0.98x, 1.08x;
 * float64 [4096, 4096] on one thread gelu 1.13x, sigmoid 1.27x; none at all
 * (the hardware prefetchers alone) was 1.05-1.07x in float32 but 0.55x for
 * float64 gelu. The same bits. */
static void opf_ew_in_place(const opf_ew_job *job, int64_t pos, int64_t end, char *const *rows) {
    const int64_t block = OPF_EW_STREAM_DENSE_BLOCK / (int64_t)job->elem;
    char *out[OPF_MAX_ARGS];
    for (int64_t len; pos < end; pos += len) {
        len = end - pos < block ? end - pos : block;
        for (int32_t j = 0; j < job->num_out; j++) {
            out[j] = job->base[job->num_in + j] + (size_t)pos * job->elem;
        }
        opf_ew_block_call(job, pos, len, rows, out, OPF_EW_IN_PLACE_PREFETCH);
    }
}

/* One block of the streamed path: elements [pos, pos + len) computed into
 * the buffers `out`, then streamed to the outputs; with job->walk, `index`
 * is element pos's multi-index, advanced past the block. */
static void opf_ew_stream_block(const opf_ew_job *job, int64_t pos, int64_t len, int64_t *index, char *const *rows,
                                char *const *out, int fence) {
    if (job->walk) {
        opf_ew_walk(job, index, len, out);
    } else {
        opf_ew_block_call(job, pos, len, rows, out, OPF_EW_STREAM_PREFETCH);
    }
    for (int32_t j = 0; j < job->num_out; j++) {
        job->stream_copy((size_t)len * job->elem, out[j], job->base[job->num_in + j] + (size_t)pos * job->elem, NULL, 0,
                         fence);
    }
}

/* The length of the streamed block at `pos` of a chunk [begin, end): the
 * chunk's first `head` elements (up to the output's first 64-byte line),
 * then `block` at a time. */
static int64_t opf_ew_block_len(int64_t pos, int64_t begin, int64_t end, int64_t head, int64_t block) {
    const int64_t len = pos == begin && head > 0 ? head : block;
    return end - pos < len ? end - pos : len;
}

/* Whether every input either lies in the order of the iteration space or
 * is one row of the innermost dim's M elements repeated along all the outer
 * dims (a bias [M] added to [N, M]), with M at most OPF_EW_PERIOD_MAX_BYTES
 * and some input repeated: then M, else 0. The streamed path then reads
 * such an input from a buffer of its row repeated (opf_ew_row_buffers) and
 * runs the kernel on whole 1 KiB blocks, as for contiguous operands, rather
 * than walking rows of M, a kernel call each. On one Zen 5 thread, float32:
 * [262144, 64] * [64] (NumPy's arrays, 16 bytes into a line) 5.9-6.7 ms
 * walked, 2.7-2.9 so (torch.mul: 3.1-3.4); [8192, 4096] + [4096] 1-13%
 * faster so. */
static int64_t opf_ew_period(const opf_ew_job *job) {
    const int32_t last = job->rank - 1;
    const int64_t m = job->shape[last];
    int repeated = 0;
    if (job->rank < 2 || m * (int64_t)job->elem > OPF_EW_PERIOD_MAX_BYTES) {
        return 0;
    }
    for (int32_t k = 0; k < job->num_in; k++) {
        int dense = 1, row = job->strides[k][last] == 1;
        for (int64_t d = last, step = 1; d >= 0; step *= job->shape[d], d--) {
            dense = dense && (job->shape[d] == 1 || job->strides[k][d] == step);
            row = row && (d == last || job->shape[d] == 1 || job->strides[k][d] == 0);
        }
        if (!dense && !row) {
            return 0;
        }
        repeated |= !dense;
    }
    return repeated ? m : 0;
}

/* For each repeated input of a job with a period: a buffer of its row
 * repeated over block + period elements (element i of the iteration space
 * is element i % period of it), in *mem (one allocation, freed by the
 * caller). 0 if there is no memory for them. */
static int opf_ew_row_buffers(const opf_ew_job *job, int64_t block, char **rows, char **mem) {
    const int32_t last = job->rank - 1;
    const size_t bytes = ((size_t)(block + job->period) * job->elem + 63) / 64 * 64;
    int32_t count = 0; /* (the repeated inputs: stride 0 along the outer dims, which have sizes > 1) */
    for (int32_t k = 0; k < job->num_in; k++) {
        count += job->strides[k][0] == 0;
    }
    *mem = aligned_alloc(64, bytes * (size_t)count);
    if (*mem == NULL) {
        return 0;
    }
    char *at = *mem;
    for (int32_t k = 0; k < job->num_in; k++) {
        if (job->strides[k][0] == 0) {
            const size_t row = (size_t)job->shape[last] * job->elem;
            for (size_t done = 0; done < bytes; done += row) {
                memcpy(at + done, job->base[k], bytes - done < row ? bytes - done : row);
            }
            rows[k] = at;
            at += bytes;
        }
    }
    return 1;
}

/* The path for large outputs laid out in the order of the iteration space
 * (every contiguous output; a broadcast row's too): the kernel writes each
 * block into L1, and the block goes to memory with a streaming copy. The
 * kernel still reads its inputs in place, or walked (an output exactly on an
 * input is safe: a block's inputs are read before its outputs are stored).
 *
 * Blocks start on the first output's 64-byte lines (a NumPy array's data is
 * often 16 bytes past one): a line stored partly by the copy's plain stores
 * and partly streamed costs more than the whole block, so only a chunk's
 * first and last lines are. Contiguous operands go in 1 KiB blocks: each
 * block's burst of non-temporal stores is then short enough to drain while
 * the next block computes (on one Zen 4 thread, [8192, 4096] float32: add
 * 14.2 -> 9.4 ms, sigmoid_grad 11.5 -> 9.4, tanh 11.9 -> 10.8, silu_grad
 * 17.5 -> 16.9; gelu_grad 25.8 -> 25.1; 512-byte blocks no faster). Walked
 * operands keep 4 KiB blocks, as a walk costs per block (the broadcast add
 * [8192, 4096] + [4096]: 11.7 ms in 4 KiB blocks, 12.0 in 1 KiB). Going
 * down columns of blocks instead, so that a bias row's piece stays in L1
 * across rows, measured slower: 17 against 10.5 ms for [8192, 4096] + [4096]
 * on one Zen 4 thread. */
static void opf_ew_streamed(void *ctx, int64_t begin, int64_t end) {
    const opf_ew_job *job = ctx;
    int64_t block = (job->walk ? OPF_EW_STREAM_BLOCK : OPF_EW_STREAM_DENSE_BLOCK) / (int64_t)job->elem;
    _Alignas(64) char buf[OPF_MAX_ARGS][OPF_EW_STREAM_BLOCK];
    char *out[OPF_MAX_ARGS];
    for (int32_t j = 0; j < job->num_out; j++) {
        out[j] = buf[j];
    }
    const size_t head_bytes = opf_line_head(job->base[job->num_in] + (size_t)begin * job->elem);
    const int64_t head = head_bytes % job->elem == 0 ? (int64_t)(head_bytes / job->elem) : 0;
    int64_t index[OPF_MAX_RANK];
    if (job->walk) {
        opf_ew_index(job, begin, index);
    }
    char *rows[OPF_MAX_ARGS] = {NULL}, *row_mem = NULL;
    if (job->period > 0 && !opf_ew_row_buffers(job, block, rows, &row_mem)) {
        opf_ew_strided(ctx, begin, end); /* (no memory for them: the walk, slower) */
        return;
    }
    int64_t pos = begin, len;
    if (job->probe && end - begin >= OPF_EW_PROBE_SPAN * OPF_EW_PROBE_BLOCKS * block) {
        /* The first blocks streamed and timed, then computed again from their
         * inputs, now in cache (the results discarded): where that alone
         * takes most of the time, the kernel's arithmetic outlasts its
         * memory traffic, and the rest of a one-input job is stored in place
         * (see OPF_EW_PLAIN_SHARE), that of a job of more inputs streamed in
         * shorter blocks (opf_ew_dense_block_bytes). */
        const double t0 = opf_thread_seconds();
        for (int b = 0; b < OPF_EW_PROBE_BLOCKS && pos < end; b++, pos += len) {
            len = opf_ew_block_len(pos, begin, end, head, block);
            opf_ew_stream_block(job, pos, len, index, rows, out, pos + len == end || b + 1 == OPF_EW_PROBE_BLOCKS);
        }
        const double t1 = opf_thread_seconds();
        for (int64_t at = begin; at < pos; at += len) {
            len = opf_ew_block_len(at, begin, end, head, block);
            opf_ew_block_call(job, at, len, rows, out, OPF_EW_STREAM_PREFETCH);
        }
        const double compute = opf_thread_seconds() - t1;
        if (compute > OPF_EW_PLAIN_SHARE * (t1 - t0)) {
            if (job->num_in == 1) {
                opf_ew_in_place(job, pos, end, rows);
                free(row_mem);
                return;
            }
            block = opf_ew_dense_block_bytes(job) / (int64_t)job->elem;
        }
    }
    for (; pos < end; pos += len) {
        len = opf_ew_block_len(pos, begin, end, head, block);
        opf_ew_stream_block(job, pos, len, index, rows, out, pos + len == end);
    }
    free(row_mem);
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

/* Whether every output lies in memory in the order of the iteration space,
 * without gaps (then element i of the space is element i of each output). */
static int opf_ew_outputs_dense(const opf_ew_job *job) {
    for (int32_t k = job->num_in; k < job->num_in + job->num_out; k++) {
        for (int64_t d = job->rank - 1, step = 1; d >= 0; step *= job->shape[d], d--) {
            if (job->shape[d] > 1 && job->strides[k][d] != step) {
                return 0;
            }
        }
    }
    return 1;
}

/* --- broadcasting ------------------------------------------------------------------------------------------------- */

/* Whether every operand has operand 0's shape (the common case, tested first). */
static int opf_ew_same_shapes(int32_t count, const opf_tensor *const *operands) {
    const opf_tensor *t0 = operands[0];
    for (int32_t k = 1; k < count; k++) {
        const opf_tensor *t = operands[k];
        if (t->ndim != t0->ndim ||
            (t->shape != t0->shape && t->ndim > 0 && memcmp(t->shape, t0->shape, sizeof(int64_t) * (size_t)t->ndim))) {
            return 0;
        }
    }
    return 1;
}

int opf_eltwise_views(int32_t num_in, int32_t count, const opf_tensor **operands, opf_ew_views *v) {
    if (opf_ew_same_shapes(count, operands)) {
        return 0;
    }
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
 * on the thread count. Each chunk runs the kernel a tile at a time (a block
 * of the innermost dim, or, when that dim is short, as many of its rows as
 * fill a block) and adds each summed output's tile into an accumulator of
 * doubles (one per chunk, over the output's elements in the chunk): a
 * float32 sum of many elements stays accurate. When the cut dim is one
 * every summed output keeps, chunks own disjoint outputs and store their
 * accumulators themselves; otherwise each chunk's accumulator is a partial
 * sum of the whole output, and the partials are added in chunk order. Either
 * way the result does not depend on the number of threads. */

enum {
    OPF_EW_MAX_CHUNKS = 64,      /* chunks of a reduction at most */
    OPF_EW_SUM_ROWS = 8,         /* rows of a tile of long rows summed into one accumulator row */
    OPF_EW_SUM_TILE = 16 << 10,  /* bytes of a tile of short rows summed in place */
    OPF_EW_ROW_CALL_MIN = 64,    /* elements of a row walked in place by a kernel call of its own, at least */
    OPF_EW_MIN_SEGMENT = 512,    /* elements a chunk walks contiguously at least, when cut along an inner dim */
    OPF_EW_SUM_SEGMENT = 4096,   /* ... and, cut along the columns a sum keeps, as many as the threads allow */
    OPF_EW_PARTIAL_SHARE = 4,    /* partial sums take at most 1/4 of the elements the call reads */
    OPF_EW_PARTIAL_MIN = 1 << 16 /* ... or this many, for small calls */
};

/* acc[r*acc_row + i*acc_col] += x[r*x_row + i] for r < rows, i < n: a tile
 * of the kernel's output (or of the input of a row that copies it) added into
 * an accumulator; rows of fewer than 8 elements must be contiguous (x_row n). Written with groups of 8
 * doubles, each two vectors of 4 (GCC's and clang's vector extensions), one
 * build per ISA level; every build adds in the same order, so they give the
 * same bits. (One vector of 8 doubles fits an AVX-512 register, but for AVX2
 * GCC kept it on the stack, a spill and a reload per add: [8192, 4096]
 * float32 summed over its rows took 49 ms on one Zen 3 thread, twice a copy
 * of its bytes.) */
/* Memory an accumulator function asks for as it goes (see
 * opf_ew_reduce_tile): at[c] .. at[c] + n elements, one line of each per line
 * of x it adds; NULL: nothing. */
typedef struct opf_ew_pf {
    int32_t count;
    uintptr_t at[OPF_MAX_ARGS];
} opf_ew_pf;
typedef void (*opf_ew_acc_fn)(int64_t rows, int64_t n, const void *x, int64_t x_row, double *acc, int64_t acc_row,
                              int64_t acc_col, const opf_ew_pf *pf, int far);

typedef double opf_v8d __attribute__((vector_size(64)));
typedef double opf_v4d __attribute__((vector_size(32)));
typedef float opf_v8f __attribute__((vector_size(32)));
typedef float opf_v4f __attribute__((vector_size(16)));
typedef struct opf_p8d {
    opf_v4d lo, hi; /* elements 0-3 and 4-7 */
} opf_p8d;

/* dst = 8 elements at p, as doubles (macros: a function returning a vector
 * would change the ABI between the ISA builds). */
#define OPF_LOAD8_F32(dst, p)                                                                                          \
    do {                                                                                                               \
        opf_v4f opf__lo, opf__hi;                                                                                      \
        memcpy(&opf__lo, (p), sizeof opf__lo);                                                                         \
        memcpy(&opf__hi, (const float *)(p) + 4, sizeof opf__hi);                                                      \
        (dst).lo = __builtin_convertvector(opf__lo, opf_v4d);                                                          \
        (dst).hi = __builtin_convertvector(opf__hi, opf_v4d);                                                          \
    } while (0)
/* The same for the x86 builds: GCC 12 turns __builtin_convertvector of 4
 * floats to 4 doubles into two conversions of 2 and an insert (clang emits
 * the one vcvtps2pd the intrinsic is): a column sum of float32 rows in
 * cache, 4 MiB, took 0.184 ms on one Zen 3 thread, ~1.8 times NumPy's. The
 * conversion is exact, so the bits are the same. */
#if defined(__x86_64__)
#define OPF_LOAD8_F32_X86(dst, p)                                                                                      \
    do {                                                                                                               \
        (dst).lo = (opf_v4d)_mm256_cvtps_pd(_mm_loadu_ps((const float *)(p)));                                         \
        (dst).hi = (opf_v4d)_mm256_cvtps_pd(_mm_loadu_ps((const float *)(p) + 4));                                     \
    } while (0)
#endif
#define OPF_LOAD8_F64(dst, p)                                                                                          \
    do {                                                                                                               \
        memcpy(&(dst).lo, (p), sizeof(dst).lo);                                                                        \
        memcpy(&(dst).hi, (const double *)(p) + 4, sizeof(dst).hi);                                                    \
    } while (0)
/* 8 doubles at p = v (each half on its own: GCC copied a whole opf_p8d
 * through the stack) */
#define OPF_STORE8(p, v)                                                                                               \
    do {                                                                                                               \
        memcpy((p), &(v).lo, sizeof(v).lo);                                                                            \
        memcpy((double *)(p) + 4, &(v).hi, sizeof(v).hi);                                                              \
    } while (0)
#define OPF_ADD8(a, b)                                                                                                 \
    do {                                                                                                               \
        (a).lo += (b).lo;                                                                                              \
        (a).hi += (b).hi;                                                                                              \
    } while (0)
/* The sum of a vector of 4, ((h[0] + h[2]) + (h[1] + h[3])): with h = lo + hi of a
 * group of 8, the order the builds of one vector of 8 added them in. */
#define OPF_HSUM4(h) (((h)[0] + (h)[2]) + ((h)[1] + (h)[3]))

/* The row sums of a tile: 32 partial sums in the dtype, over segments of
 * at most 256 elements (float32 lanes add at most 8 elements each, then go
 * to double), combined in a fixed order. */
#define OPF_EW_ROWSUM_F32(sum, x, n, i)                                                                                \
    do {                                                                                                               \
        double opf__total = 0;                                                                                         \
        while (i + 32 <= n) {                                                                                          \
            const int64_t opf__stop = i + 256 < n ? i + 256 : n;                                                       \
            opf_v8f s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0}, v0, v1, v2, v3;                                            \
            for (; i + 32 <= opf__stop; i += 32) {                                                                     \
                memcpy(&v0, x + i, sizeof v0);                                                                         \
                memcpy(&v1, x + i + 8, sizeof v1);                                                                     \
                memcpy(&v2, x + i + 16, sizeof v2);                                                                    \
                memcpy(&v3, x + i + 24, sizeof v3);                                                                    \
                s0 += v0;                                                                                              \
                s1 += v1;                                                                                              \
                s2 += v2;                                                                                              \
                s3 += v3;                                                                                              \
            }                                                                                                          \
            opf_p8d d0, d1, d;                                                                                         \
            OPF_LOAD8_F32(d0, (const float *)&s0);                                                                     \
            OPF_LOAD8_F32(d, (const float *)&s1);                                                                      \
            OPF_ADD8(d0, d);                                                                                           \
            OPF_LOAD8_F32(d1, (const float *)&s2);                                                                     \
            OPF_LOAD8_F32(d, (const float *)&s3);                                                                      \
            OPF_ADD8(d1, d);                                                                                           \
            OPF_ADD8(d0, d1);                                                                                          \
            const opf_v4d h = d0.lo + d0.hi;                                                                           \
            opf__total += OPF_HSUM4(h);                                                                                \
        }                                                                                                              \
        sum = opf__total;                                                                                              \
    } while (0)
#define OPF_EW_ROWSUM_F64(sum, x, n, i)                                                                                \
    do {                                                                                                               \
        opf_p8d s0 = {{0}, {0}}, s1 = {{0}, {0}}, s2 = {{0}, {0}}, s3 = {{0}, {0}}, v;                                 \
        for (; i + 32 <= n; i += 32) {                                                                                 \
            OPF_LOAD8_F64(v, x + i);                                                                                   \
            OPF_ADD8(s0, v);                                                                                           \
            OPF_LOAD8_F64(v, x + i + 8);                                                                               \
            OPF_ADD8(s1, v);                                                                                           \
            OPF_LOAD8_F64(v, x + i + 16);                                                                              \
            OPF_ADD8(s2, v);                                                                                           \
            OPF_LOAD8_F64(v, x + i + 24);                                                                              \
            OPF_ADD8(s3, v);                                                                                           \
        }                                                                                                              \
        OPF_ADD8(s0, s1);                                                                                              \
        OPF_ADD8(s2, s3);                                                                                              \
        OPF_ADD8(s0, s2);                                                                                              \
        const opf_v4d h = s0.lo + s0.hi;                                                                               \
        sum = OPF_HSUM4(h);                                                                                            \
    } while (0)

/* Every row of the tile into the same n accumulators (a sum over the rows'
 * dim): each column's accumulator adds the tile's rows in order, whatever
 * the path below, so that the sums do not depend on which one a chunk's
 * width chooses (nor so on the number of threads, which sets the chunks).
 * Rows read in place from memory (`far`: an input larger than the caches)
 * go in pieces of OPF_EW_PIECE bytes of each row: a piece of every row of
 * the tile in turn, its accumulators in L1, each line of a piece asking for
 * the line as far into the next piece (the next row's, or the next
 * columns' in the first row, or the next tile's) into L2. Memory so sees
 * one stream, a piece at a time, asked for a piece ahead: [8192, 4096]
 * float32 summed over its rows on one thread of an Intel Xeon (Emerald
 * Rapids), 16 bytes past a line as NumPy's arrays are, a C loop of each
 * form timed in one process beside a read of the same bytes: pieces of
 * 8 KiB 91-94% of that read, the tiles' eight rows walked side by side
 * (what this replaced) 88-89% with no prefetch and 82-86% with each row's
 * memory asked 2 KiB ahead into L2, NumPy's order (a row at a time into
 * float32 sums) 92-95%; pieces of 2 KiB 83-84%, of 16 KiB (a whole row)
 * 59-62% asked into L1 and 91-93% into L2; pieces of 8 KiB asked into L1,
 * 94-97% against 91-94% into L2 in that loop and the same in the library
 * (bench/ab), where L2 is what every other prefetch asks for and what the
 * tiles had needed on a Zen 4 (L1 there took more time than no prefetch).
 * Tiles in cache (a kernel's
 * output, or an input that fits) keep a group of columns in registers down
 * the tile's rows; rows of fewer than 8 elements go through the flat tile in
 * vectors of 8, period lcm(n, 8) / 8 of them. */
#define OPF_EW_PIECE 8192
/* How far ahead a kernel's tile asks for the inputs it reads in place
 * (opf_ew_reduce_tile). */
#define OPF_EW_PREFETCH 2048
/* The AVX-512 float32 build's columns, 16 at a time (a line of each row):
 * the same adds for each column as the groups of 8 below (the same bits),
 * in half the instructions: one load and two conversions of 8 a row. */
#if defined(__x86_64__) && defined(__GNUC__)
/* lo += 8 floats at p as doubles, hi += the next 8 */
#define OPF_EW_ADD16_F32(lo, hi, p)                                                                                    \
    do {                                                                                                               \
        const __m512 opf__v = _mm512_loadu_ps(p);                                                                      \
        lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(opf__v)));                                       \
        hi =                                                                                                           \
            _mm512_add_pd(hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(opf__v), 1)))); \
    } while (0)
#define OPF_EW_COLUMNS16_F32()                                                                                         \
    for (; i + 16 <= n; i += 16) {                                                                                     \
        __m512d a0 = _mm512_loadu_pd(acc + i), a1 = _mm512_loadu_pd(acc + i + 8);                                      \
        for (int64_t r = 0; r < rows; r++) {                                                                           \
            OPF_EW_ADD16_F32(a0, a1, (const float *)x + r * x_row + i);                                                \
        }                                                                                                              \
        _mm512_storeu_pd(acc + i, a0);                                                                                 \
        _mm512_storeu_pd(acc + i + 8, a1);                                                                             \
    }
/* (in a piece: a[j ..] += xr[j ..], a line of next asked for per 16 floats) */
#define OPF_EW_PIECE16_F32()                                                                                           \
    for (; j + 16 <= len; j += 16) {                                                                                   \
        __builtin_prefetch((const void *)(next + 4 * j), 0, 2);                                                        \
        __m512d a0 = _mm512_loadu_pd(a + j), a1 = _mm512_loadu_pd(a + j + 8);                                          \
        OPF_EW_ADD16_F32(a0, a1, (const float *)xr + j);                                                               \
        _mm512_storeu_pd(a + j, a0);                                                                                   \
        _mm512_storeu_pd(a + j + 8, a1);                                                                               \
    }
#endif
#define OPF_EW_COLUMNS8_ONLY() /* (the other builds: groups of 8 only) */
/* a[i .. n) += x[i .. n) (i advanced), each line of x asking for the line as
 * far on from each of pf's addresses (pf NULL: none): a row added into a
 * compact accumulator row. */
#define OPF_EW_ADD_INTO(T, load8, a, x, n, i, pf)                                                                      \
    do {                                                                                                               \
        for (; i + 8 <= n; i += 8) {                                                                                   \
            opf_p8d opf__v, opf__w;                                                                                    \
            if ((pf) != NULL && (i * (int64_t)sizeof(T)) % 64 == 0) {                                                  \
                for (int32_t opf__c = 0; opf__c < (pf)->count; opf__c++) {                                             \
                    __builtin_prefetch((const void *)((pf)->at[opf__c] + (uintptr_t)i * sizeof(T)), 0, 2);             \
                }                                                                                                      \
            }                                                                                                          \
            OPF_LOAD8_F64(opf__v, a + i);                                                                              \
            load8(opf__w, x + i);                                                                                      \
            OPF_ADD8(opf__v, opf__w);                                                                                  \
            OPF_STORE8(a + i, opf__v);                                                                                 \
        }                                                                                                              \
        for (; i < n; i++) {                                                                                           \
            a[i] += (double)x[i];                                                                                      \
        }                                                                                                              \
    } while (0)
#define OPF_EW_ACC_COLUMNS(T, load8, columns16, piece16)                                                               \
    do {                                                                                                               \
        opf_p8d v, w;                                                                                                  \
        int64_t i = 0;                                                                                                 \
        if (n >= 8 && far) {                                                                                           \
            const int64_t piece = OPF_EW_PIECE / (int64_t)sizeof(T);                                                   \
            for (int64_t c = 0; c < n; c += piece) {                                                                   \
                const int64_t len = n - c < piece ? n - c : piece;                                                     \
                double *const a = acc + c;                                                                             \
                for (int64_t r = 0; r < rows; r++) {                                                                   \
                    const T *const xr = x + r * x_row + c;                                                             \
                    const char *const next = (const char *)(r + 1 < rows  ? xr + x_row                                 \
                                                            : c + len < n ? x + c + len                                \
                                                                          : x + rows * x_row);                         \
                    const opf_ew_pf ahead = {1, {(uintptr_t)next}};                                                    \
                    int64_t j = 0;                                                                                     \
                    piece16() OPF_EW_ADD_INTO(T, load8, a, xr, len, j, &ahead);                                        \
                }                                                                                                      \
            }                                                                                                          \
            return;                                                                                                    \
        }                                                                                                              \
        if (n >= 8) {                                                                                                  \
            columns16() for (; i + 8 <= n; i += 8) {                                                                   \
                OPF_LOAD8_F64(v, acc + i);                                                                             \
                for (int64_t r = 0; r < rows; r++) {                                                                   \
                    load8(w, x + r * x_row + i);                                                                       \
                    OPF_ADD8(v, w);                                                                                    \
                }                                                                                                      \
                OPF_STORE8(acc + i, v);                                                                                \
            }                                                                                                          \
            for (; i < n; i++) {                                                                                       \
                for (int64_t r = 0; r < rows; r++) {                                                                   \
                    acc[i] += (double)x[r * x_row + i];                                                                \
                }                                                                                                      \
            }                                                                                                          \
            return;                                                                                                    \
        }                                                                                                              \
        const int64_t total = rows * n, period = n == 1 || n == 2 || n == 4 ? 1 : n == 6 ? 3 : n;                      \
        opf_p8d part[7] = {{{0}, {0}}};                                                                                \
        int64_t m = 0;                                                                                                 \
        for (; i + 8 <= total; i += 8) {                                                                               \
            load8(w, x + i);                                                                                           \
            OPF_ADD8(part[m], w);                                                                                      \
            m = m + 1 == period ? 0 : m + 1;                                                                           \
        }                                                                                                              \
        for (int64_t k = 0; k < period; k++) {                                                                         \
            for (int j = 0; j < 8; j++) {                                                                              \
                acc[(k * 8 + j) % n] += j < 4 ? part[k].lo[j] : part[k].hi[j - 4];                                     \
            }                                                                                                          \
        }                                                                                                              \
        for (; i < total; i++) {                                                                                       \
            acc[i % n] += (double)x[i];                                                                                \
        }                                                                                                              \
    } while (0)

#define OPF_EW_ACC_FN(name, T, load8, rowsum, target, columns16, piece16)                                              \
    target static void name(int64_t rows, int64_t n, const void *xv, int64_t x_row, double *acc, int64_t acc_row,      \
                            int64_t acc_col, const opf_ew_pf *pf, int far) {                                           \
        const T *x = (const T *)xv;                                                                                    \
        if (rows > 1 && acc_row == 0 && acc_col == 1) {                                                                \
            OPF_EW_ACC_COLUMNS(T, load8, columns16, piece16);                                                          \
            return;                                                                                                    \
        }                                                                                                              \
        for (int64_t r = 0; r < rows; r++, x += x_row) {                                                               \
            double *a = acc + r * acc_row;                                                                             \
            int64_t i = 0;                                                                                             \
            if (acc_col == 0) { /* summed along the row */                                                             \
                double sum;                                                                                            \
                rowsum(sum, x, n, i);                                                                                  \
                for (; i < n; i++) {                                                                                   \
                    sum += (double)x[i];                                                                               \
                }                                                                                                      \
                a[0] += sum;                                                                                           \
                continue;                                                                                              \
            }                                                                                                          \
            OPF_EW_ADD_INTO(T, load8, a, x, n, i, pf); /* kept: acc_col is 1 (the accumulator is compact) */           \
        }                                                                                                              \
    }
OPF_EW_ACC_FN(opf_ew_acc_f32, float, OPF_LOAD8_F32, OPF_EW_ROWSUM_F32, , OPF_EW_COLUMNS8_ONLY, OPF_EW_COLUMNS8_ONLY)
OPF_EW_ACC_FN(opf_ew_acc_f64, double, OPF_LOAD8_F64, OPF_EW_ROWSUM_F64, , OPF_EW_COLUMNS8_ONLY, OPF_EW_COLUMNS8_ONLY)
#if defined(__x86_64__) && defined(__GNUC__) /* (OPF__X86) */
OPF_EW_ACC_FN(opf_ew_acc_f32_avx2, float, OPF_LOAD8_F32_X86, OPF_EW_ROWSUM_F32, OPF__TARGET_AVX2, OPF_EW_COLUMNS8_ONLY,
              OPF_EW_COLUMNS8_ONLY)
OPF_EW_ACC_FN(opf_ew_acc_f64_avx2, double, OPF_LOAD8_F64, OPF_EW_ROWSUM_F64, OPF__TARGET_AVX2, OPF_EW_COLUMNS8_ONLY,
              OPF_EW_COLUMNS8_ONLY)
OPF_EW_ACC_FN(opf_ew_acc_f32_avx512, float, OPF_LOAD8_F32_X86, OPF_EW_ROWSUM_F32, OPF__TARGET_AVX512,
              OPF_EW_COLUMNS16_F32, OPF_EW_PIECE16_F32)
OPF_EW_ACC_FN(opf_ew_acc_f64_avx512, double, OPF_LOAD8_F64, OPF_EW_ROWSUM_F64, OPF__TARGET_AVX512, OPF_EW_COLUMNS8_ONLY,
              OPF_EW_COLUMNS8_ONLY)
#endif

static opf_ew_acc_fn opf_ew_acc_variant(size_t elem) {
    static const opf_ew_acc_fn f32[OPF_NUM_VARIANTS] =
        OPF__VARIANTS(opf_ew_acc_f32, OPF__X86(opf_ew_acc_f32_avx2), OPF__X86(opf_ew_acc_f32_avx512));
    static const opf_ew_acc_fn f64[OPF_NUM_VARIANTS] =
        OPF__VARIANTS(opf_ew_acc_f64, OPF__X86(opf_ew_acc_f64_avx2), OPF__X86(opf_ew_acc_f64_avx512));
    opf_ew_acc_fn fn;
    OPF_PICK_VARIANT(fn, elem == sizeof(float) ? f32 : f64);
    return fn;
}

/* dst[0 .. n) = *src: the buffer of an input broadcast over a whole tile
 * (vectors of 64 bytes, one build per ISA). */
typedef void (*opf_ew_fill_fn)(int64_t n, const void *src, void *dst);

typedef float opf_v16f __attribute__((vector_size(64)));

#define OPF_EW_FILL_FN(name, T, V, lanes, target)                                                                      \
    target static void name(int64_t n, const void *src, void *dst) {                                                   \
        const T v = *(const T *)src;                                                                                   \
        T *d = (T *)dst;                                                                                               \
        V vv = (V){0} + v;                                                                                             \
        int64_t i = 0;                                                                                                 \
        for (; i + lanes <= n; i += lanes) {                                                                           \
            memcpy(d + i, &vv, sizeof vv);                                                                             \
        }                                                                                                              \
        for (; i < n; i++) {                                                                                           \
            d[i] = v;                                                                                                  \
        }                                                                                                              \
    }
OPF_EW_FILL_FN(opf_ew_fill_f32, float, opf_v16f, 16, )
OPF_EW_FILL_FN(opf_ew_fill_f64, double, opf_v8d, 8, )
OPF__X86(OPF_EW_FILL_FN(opf_ew_fill_f32_avx2, float, opf_v16f, 16, OPF__TARGET_AVX2)
             OPF_EW_FILL_FN(opf_ew_fill_f64_avx2, double, opf_v8d, 8, OPF__TARGET_AVX2)
                 OPF_EW_FILL_FN(opf_ew_fill_f32_avx512, float, opf_v16f, 16, OPF__TARGET_AVX512)
                     OPF_EW_FILL_FN(opf_ew_fill_f64_avx512, double, opf_v8d, 8, OPF__TARGET_AVX512))

static opf_ew_fill_fn opf_ew_fill_variant(size_t elem) {
    static const opf_ew_fill_fn f32[OPF_NUM_VARIANTS] =
        OPF__VARIANTS(opf_ew_fill_f32, OPF__X86(opf_ew_fill_f32_avx2), OPF__X86(opf_ew_fill_f32_avx512));
    static const opf_ew_fill_fn f64[OPF_NUM_VARIANTS] =
        OPF__VARIANTS(opf_ew_fill_f64, OPF__X86(opf_ew_fill_f64_avx2), OPF__X86(opf_ew_fill_f64_avx512));
    opf_ew_fill_fn fn;
    OPF_PICK_VARIANT(fn, elem == sizeof(float) ? f32 : f64);
    return fn;
}

typedef struct opf_ew_reduce {
    const opf_ew_job *job;
    opf_ew_acc_fn acc_fn;
    opf_ew_fill_fn fill_fn;
    int32_t split;      /* the dim cut into chunks */
    int64_t per_chunk;  /* of the split dim per chunk */
    int partial;        /* accumulators are partial sums of whole outputs */
    int64_t tile_rows;  /* rows of the next-to-innermost dim per tile (1: blocks of the innermost) */
    int whole_rows;     /* tiles as wide as the chunk: an input summed down its columns, read in place */
    int64_t tile_elems; /* elements per tile at most */
    int summed[OPF_MAX_ARGS];
    int64_t acc_stride[OPF_MAX_ARGS][OPF_MAX_RANK]; /* per summed output: compact strides over its kept dims */
    int64_t acc_size[OPF_MAX_ARGS];                 /* elements of one chunk's accumulator */
    double *acc[OPF_MAX_ARGS];                      /* one accumulator per chunk */
    int sums_input;    /* a pass-through row summed: its input is summed, with no kernel call */
    int prefetch;      /* the inputs are larger than the cache: tiles ask for what they read next */
    atomic_int failed; /* a range could not get its tile buffers */
} opf_ew_reduce;

/* A chunk's buffers for its tiles: one per operand, and for each input the
 * tile its buffer holds (a tile's values depend only on where it starts and
 * its size: an input broadcast along the walk comes back to the same tiles,
 * which are then gathered once). */
typedef struct opf_ew_tile_bufs {
    char *buf[OPF_EW_OPERANDS]; /* OPF_EW_RBLOCK elements each, 64-byte aligned */
    const char *filled[OPF_MAX_ARGS];
    int64_t filled_rows[OPF_MAX_ARGS], filled_n[OPF_MAX_ARGS];
} opf_ew_tile_bufs;

/* One tile: `rows` runs (along dim rank-2) of n elements (along dim
 * rank-1), rows * n <= OPF_EW_RBLOCK; start[k] is operand k's first element,
 * acc[j] summed output j's first accumulator element, next[k] where operand
 * k's next tile starts (an address to prefetch: past the array's end after
 * the last tile). */
static void opf_ew_reduce_tile(const opf_ew_reduce *r, opf_ew_tile_bufs *b, int64_t rows, int64_t n, char *const *start,
                               const uintptr_t *next, double *const *acc) {
    const opf_ew_job *job = r->job;
    const int32_t last = job->rank - 1, count = job->num_in + job->num_out;
    const int64_t elem = (int64_t)job->elem;
    char *const *buf = b->buf;
    char *ptr[OPF_EW_OPERANDS];
    int per_row = 0; /* an operand walked in place whose rows are not one block: a kernel call per row */
    for (int32_t k = 0; k < (r->sums_input ? 1 : count); k++) {
        const int64_t col = job->strides[k][last], row = rows > 1 ? job->strides[k][last - 1] : n;
        const int summed = k >= job->num_in && r->summed[k - job->num_in];
        ptr[k] = col == 1 && !summed && (row == n || n >= OPF_EW_ROW_CALL_MIN) ? start[k] : buf[k];
        per_row |= ptr[k] != buf[k] && row != n;
        if (k >= job->num_in || ptr[k] != buf[k] ||
            (b->filled[k] == start[k] && b->filled_rows[k] == rows && b->filled_n[k] == n)) {
            continue;
        }
        b->filled[k] = start[k];
        b->filled_rows[k] = rows;
        b->filled_n[k] = n;
        if (col == 0 && (row == 0 || rows == 1)) { /* one value */
            r->fill_fn(rows * n, start[k], buf[k]);
            continue;
        }
        for (int64_t i = 0; i < rows; i++) {
            char *to = buf[k] + i * n * elem;
            if (row == 0 && i > 0) { /* the same row again */
                memcpy(to, buf[k], (size_t)(n * elem));
            } else if (col == 1) {
                memcpy(to, start[k] + i * row * elem, (size_t)(n * elem));
            } else {
                opf_ew_gather(job->elem, n, start[k] + i * row * elem, col, to);
            }
        }
    }
    if (r->sums_input) { /* y = x (OPF_OP_PASS_THROUGH): the input itself is summed, with no kernel call */
        const int64_t x_row = ptr[0] == buf[0] || rows == 1 ? n : job->strides[0][last - 1];
        r->acc_fn(rows, n, ptr[0], x_row, acc[0], rows > 1 ? r->acc_stride[0][last - 1] : 0, r->acc_stride[0][last],
                  NULL, r->prefetch && ptr[0] != buf[0]);
        return;
    }
    /* Inputs the kernel reads in place: asked for ahead of the kernel, into
     * L2. The tiles go on along the same rows, and between two tiles the
     * accumulator's work leaves memory idle: mul's gradient summed over the
     * rows of [8192, 4096] float32 (two inputs read, tiles of 1024 elements
     * of a row) took 1.46 times less time on one thread of a Zen 4 and 1.33
     * on two with each tile's inputs asked for OPF_EW_PREFETCH bytes ahead,
     * all at once before the kernel (1.31-1.38 at 4 and 8 KiB ahead). A
     * tile of one row whose sum keeps its columns (that case) now asks for
     * the next tile's inputs from inside the accumulator's loop instead, a
     * line of each per line it adds (opf_ew_pf): on a Zen 3, the burst of
     * 128 prefetches stalled the core (a fifth of the time went to them)
     * and took 1.13-1.16 times longer than no prefetch at all, where the
     * spread ones took 1.23-1.31 times less time than the burst on one and
     * two threads (1.10 on [1024, 65536]). Not where the call's inputs fit
     * the cache (opf_cached_max_bytes): there the prefetches found their
     * lines in the caches already and cost a tenth of the time of mul's
     * gradient of [16384, 64] float32 summed over its rows on one Zen 3
     * thread. */
    opf_ew_pf pf = {0, {0}};
    int32_t spread_to = -1; /* the summed output whose accumulator's loop asks for the next tile */
    for (int32_t j = 0; r->prefetch && rows == 1 && spread_to < 0 && j < job->num_out; j++) {
        spread_to = r->summed[j] && r->acc_stride[j][last] == 1 ? j : -1;
    }
    for (int32_t k = 0; r->prefetch && k < job->num_in; k++) {
        if (ptr[k] == buf[k] || (job->unread >> k & 1)) {
            continue;
        }
        if (spread_to >= 0) {
            pf.at[pf.count++] = next[k];
            continue;
        }
        const int64_t row = rows > 1 ? job->strides[k][last - 1] : n;
        for (int64_t i = 0; i < (row != 0 ? rows : 1); i++) { /* (row 0: the same row again) */
            opf_prefetch_at(start[k] + i * row * elem, OPF_EW_PREFETCH, n * elem);
        }
    }
    if (!per_row) {
        opf_ew_call(job, rows * n, ptr);
    }
    for (int64_t i = 0; per_row && i < rows; i++) {
        char *p[OPF_EW_OPERANDS];
        for (int32_t k = 0; k < count; k++) {
            p[k] = ptr[k] == buf[k] ? buf[k] + i * n * elem : start[k] + i * job->strides[k][last - 1] * elem;
        }
        opf_ew_call(job, n, p);
    }
    for (int32_t j = 0; j < job->num_out; j++) {
        const int32_t k = job->num_in + j;
        if (r->summed[j]) {
            r->acc_fn(rows, n, buf[k], n, acc[j], rows > 1 ? r->acc_stride[j][last - 1] : 0, r->acc_stride[j][last],
                      j == spread_to ? &pf : NULL, 0);
        } else if (ptr[k] == buf[k]) {
            const int64_t col = job->strides[k][last], row = rows > 1 ? job->strides[k][last - 1] : n;
            for (int64_t i = 0; i < rows; i++) {
                opf_ew_scatter(job->elem, n, buf[k] + i * n * elem, start[k] + i * row * elem, col);
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
 * its element of index i at (i - base) . acc_stride) into the output: a loop
 * along the innermost dim j keeps, in an odometer over the others. */
static void opf_ew_store(const opf_ew_reduce *r, int32_t j, const double *acc, const int64_t *lo, const int64_t *hi,
                         const int64_t *base) {
    const opf_ew_job *job = r->job;
    const int32_t k = job->num_in + j, rank = job->rank;
    int64_t idx[OPF_MAX_RANK], top[OPF_MAX_RANK];
    int32_t inner = -1;
    for (int32_t d = 0; d < rank; d++) {
        idx[d] = lo[d];
        top[d] = r->acc_stride[j][d] != 0 ? hi[d] : lo[d] + 1; /* a summed dim: its first index only */
        inner = r->acc_stride[j][d] != 0 ? d : inner;
    }
    const int64_t len = inner >= 0 ? top[inner] - lo[inner] : 1;
    const int64_t os = inner >= 0 ? job->strides[k][inner] : 0, as = inner >= 0 ? r->acc_stride[j][inner] : 0;
    for (;;) {
        int64_t off = 0, at = 0;
        for (int32_t d = 0; d < rank; d++) {
            off += idx[d] * job->strides[k][d];
            at += (idx[d] - base[d]) * r->acc_stride[j][d];
        }
        char *out = job->base[k] + off * (int64_t)job->elem;
        if (job->elem == sizeof(float)) {
            for (int64_t i = 0; i < len; i++) {
                ((float *)out)[i * os] = (float)acc[at + i * as];
            }
        } else {
            for (int64_t i = 0; i < len; i++) {
                ((double *)out)[i * os] = acc[at + i * as];
            }
        }
        int32_t d = inner >= 0 ? inner - 1 : rank - 1;
        while (d >= 0 && ++idx[d] == top[d]) {
            idx[d] = lo[d];
            d--;
        }
        if (d < 0) {
            return;
        }
    }
}

static void opf_ew_reduce_chunk(const opf_ew_reduce *r, int64_t c, char *scratch) {
    const opf_ew_job *job = r->job;
    const int32_t last = job->rank - 1, count = job->num_in + job->num_out;
    /* Tiles of tile_rows rows of dim `last - 1` (when > 1), else blocks of `last`. */
    const int32_t outer = r->tile_rows > 1 ? last - 1 : last;
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
    /* (read in place, at OPF_EW_ROW_CALL_MIN elements or more: no buffer holds the tile) */
    const int64_t block = r->whole_rows && n >= OPF_EW_ROW_CALL_MIN ? n : r->tile_elems / r->tile_rows;
    opf_ew_tile_bufs bufs;
    memset(&bufs, 0, sizeof bufs);
    for (int32_t k = 0; k < count; k++) {
        bufs.buf[k] = scratch + (size_t)k * OPF_EW_RBLOCK * sizeof(double);
    }
    for (int32_t d = 0; n > 0 && hi[outer] > lo[outer];) {
        /* The tiles from idx: rows of dim `outer` (1 when outer is `last`). */
        const int64_t rows =
            outer < last ? (hi[outer] - idx[outer] < r->tile_rows ? hi[outer] - idx[outer] : r->tile_rows) : 1;
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
        for (int64_t done = 0; done < n; done += block) { /* blocks of `last` (one, for short rows) */
            const int64_t len = n - done < block ? n - done : block;
            char *p[OPF_EW_OPERANDS];
            uintptr_t next[OPF_EW_OPERANDS];
            double *a[OPF_MAX_ARGS];
            for (int32_t k = 0; k < count; k++) {
                p[k] = ptr[k] + done * job->strides[k][last] * (int64_t)job->elem;
                /* where prefetches go (r->prefetch): the next block of this row, else the same columns of the
                 * next row (integer arithmetic: the last tile's next lies past the array) */
                next[k] = !r->prefetch ? 0
                          : done + len < n || last == 0
                              ? (uintptr_t)p[k] + (uintptr_t)(len * job->strides[k][last] * (int64_t)job->elem)
                              : (uintptr_t)ptr[k] + (uintptr_t)(rows * job->strides[k][last - 1] * (int64_t)job->elem);
            }
            for (int32_t j = 0; j < job->num_out; j++) {
                a[j] = at[j] != NULL ? at[j] + done * r->acc_stride[j][last] : NULL;
            }
            opf_ew_reduce_tile(r, &bufs, rows, len, p, next, a);
        }
        /* The next tile: dim `last` is done; rows of `outer` were taken at once. */
        idx[outer] += outer < last ? rows - 1 : 0;
        for (d = last - 1; d >= 0 && ++idx[d] >= hi[d]; d--) {
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

/* A range of chunks, with tile buffers of its own (on the heap: several
 * tiles of OPF_EW_RBLOCK elements are more than a thread's stack should hold). */
static void opf_ew_reduce_range(void *ctx, int64_t begin, int64_t end) {
    opf_ew_reduce *r = ctx;
    const size_t bytes = (size_t)(r->job->num_in + r->job->num_out) * OPF_EW_RBLOCK * sizeof(double);
    char *scratch = aligned_alloc(64, bytes);
    if (scratch == NULL) {
        atomic_store(&r->failed, 1);
        return;
    }
    for (int64_t c = begin; c < end; c++) {
        opf_ew_reduce_chunk(r, c, scratch);
    }
    free(scratch);
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

/* acc[i] += part[i] for i < n, in vectors (GCC's -O2 leaves the plain loop
 * scalar: a fifth of the time of [256, 4096] float32 summed over its rows
 * on one Zen 3 thread, 16 partial sums of 4096 doubles). */
static void opf_ew_add_into(int64_t n, const double *part, double *acc) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        opf_p8d a, b;
        OPF_LOAD8_F64(a, acc + i);
        OPF_LOAD8_F64(b, part + i);
        OPF_ADD8(a, b);
        OPF_STORE8(acc + i, a);
    }
    for (; i < n; i++) {
        acc[i] += part[i];
    }
}

/* Runs a call whose views sum some outputs (job->fn, elem, attrs, base set);
 * prefetch: its inputs are larger than the cache (opf_cached_max_bytes). */
static opf_status opf_ew_reduce_run(opf_ew_job *job, const opf_tensor *const *operands, int64_t n, int prefetch) {
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
    r.sums_input = job->pass_through && r.summed[0]; /* (one output: the table checked) */
    r.acc_fn = opf_ew_acc_variant(job->elem);
    r.prefetch = prefetch;
    r.fill_fn = opf_ew_fill_variant(job->elem);
    /* Short rows: tiles of as many rows as fit. Long rows of an input summed
     * down its columns (a row that copies it): tiles of OPF_EW_SUM_ROWS rows
     * (of as many columns as fit), which the accumulator takes at once, an
     * eighth of its traffic (with a kernel's tile in between, they were
     * slower). [8192, 4096] float32 summed over its rows on one Zen 4
     * thread: 0.92-0.96 times NumPy's time in tiles of 4 rows, 0.80-0.84 in
     * tiles of 8; tiles of 16 rows of 64 columns, 1.5 times (too many
     * streams of rows for the prefetchers). Read in place (contiguous rows),
     * such a tile is as wide as the chunk rather than OPF_EW_RBLOCK / 8
     * elements: its eight streams then run from one end of the rows to the
     * other, instead of 512 bytes at a time with a switch between tiles
     * (the same sums in the same order). On one Zen 3 thread, 1.23 times
     * less time than tiles of 128 columns, where NumPy had taken 0.91 of
     * opforge's time (docs/performance-history.md). An input larger than
     * the caches goes through such a tile in pieces of each row instead
     * (OPF_EW_ACC_COLUMNS), one stream at a time. */
    int sums_rows = 0;
    for (int32_t j = 0; rank > 1 && j < job->num_out; j++) {
        sums_rows |= r.summed[j] && job->strides[job->num_in + j][rank - 2] == 0 && job->shape[rank - 2] > 1;
    }
    const int short_rows = rank > 1 && job->shape[rank - 1] < OPF_EW_RBLOCK / 2;
    /* Short rows summed in place (contiguous, no kernel call, so no buffer
     * bounds the tile): tiles of OPF_EW_SUM_TILE bytes, whose columns the
     * accumulator adds up in registers down the tile's rows. In tiles of
     * OPF_EW_RBLOCK elements (4 rows of 256 floats), the accumulator's loads
     * and stores and the tiles' bookkeeping took a third of the time of
     * [4096, 256] float32 summed over its rows (1.08-1.45 times less time
     * on one Zen 3 thread at 16 KiB, rows of 16 to 256 floats; 32 KiB was
     * slower again). float32 only: float64, which adds no conversions,
     * measured 0.93-1.10 times in tiles of 16 KiB, and stays as it was. */
    const int in_place = r.sums_input && job->strides[0][rank - 1] == 1 &&
                         (rank == 1 || job->strides[0][rank - 2] == job->shape[rank - 1]);
    r.tile_elems =
        short_rows && in_place && job->elem == sizeof(float) ? OPF_EW_SUM_TILE / sizeof(float) : OPF_EW_RBLOCK;
    r.tile_rows = short_rows ? r.tile_elems / job->shape[rank - 1] : sums_rows && r.sums_input ? OPF_EW_SUM_ROWS : 1;
    r.whole_rows = !short_rows && sums_rows && r.sums_input && job->strides[0][rank - 1] == 1;
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
    /* A sum cut along its last dim (the columns it keeps): chunks of at
     * least OPF_EW_SUM_SEGMENT columns while that leaves 4 chunks a thread
     * (the chunks own their columns: their number does not change the
     * sums). Each chunk walks down all the rows, reading a segment of each:
     * in chunks of 512 columns (2 KiB a row), [1024, 32768] float32 took
     * 1.17 times as long on one Zen 3 thread summed in place as in chunks of
     * 4096 ([512, 65536], chunks of 1024: 1.13; [256, 131072], 2048: 1.03),
     * and mul's gradient 1.32 times as long ([256, 32768]: 1.30). */
    const int64_t min_chunks = 4 * (int64_t)opf_get_num_threads();
    while (!r.partial && r.split == rank - 1 && chunks / 2 >= min_chunks &&
           (job->shape[r.split] + chunks - 1) / chunks < OPF_EW_SUM_SEGMENT) {
        chunks /= 2;
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
        const int64_t budget =
            n / OPF_EW_PARTIAL_SHARE > OPF_EW_PARTIAL_MIN ? n / OPF_EW_PARTIAL_SHARE : OPF_EW_PARTIAL_MIN;
        while (chunks > 1 && chunks * out_elems > budget) {
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
        if (atomic_load(&r.failed)) {
            st = opf_error(OPF_E_NOMEM, "out of memory for the buffers of a sum");
        }
    }
    if (st == OPF_OK && r.partial) {
        /* The partial sums of each output, added in chunk order, then stored. */
        int64_t lo[OPF_MAX_RANK] = {0}, base[OPF_MAX_RANK] = {0};
        for (int32_t j = 0; j < job->num_out; j++) {
            for (int64_t c = 1; r.summed[j] && c < chunks; c++) {
                opf_ew_add_into(r.acc_size[j], r.acc[j] + c * r.acc_size[j], r.acc[j]);
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
    opf_ew_job job = {.num_in = op->num_inputs, .pass_through = (op->flags & OPF_OP_PASS_THROUGH) != 0};
    /* An input of which only the shape counts (OPF_ARG_SHAPE_ONLY): in place
     * where it is contiguous (the kernel does not load it; nothing prefetches
     * it), else a view of zeros of its shape, which costs no gather. */
    static const double zero = 0;
    static const int64_t zero_strides[OPF_MAX_RANK] = {0};
    opf_tensor zeros[OPF_MAX_ARGS];
    for (int32_t i = 0; i < op->num_inputs; i++) {
        operands[i] = inputs[i];
        if ((op->inputs[i].flags & OPF_ARG_SHAPE_ONLY) && inputs[i] != NULL) {
            if (opf_tensor_is_contiguous(inputs[i])) {
                job.unread |= 1u << i;
            } else {
                zeros[i] = *inputs[i];
                zeros[i].data = (void *)(uintptr_t)&zero;
                zeros[i].byte_offset = 0;
                zeros[i].strides = zero_strides;
                operands[i] = &zeros[i];
            }
        }
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
    OPF_PICK_VARIANT(job.fn, y->dtype == OPF_F32 ? kernel->f32 : kernel->f64);
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
    /* The bytes the call reads (shape-only inputs not counted) and writes,
     * against what the cache holds (opf_cached_max_bytes). */
    const opf_kernels *kernels = opf_kernels_get();
    const int64_t cached_max = opf_cached_max_bytes(kernels);
    int64_t in_bytes = 0, out_bytes = 0;
    for (int32_t k = 0; k < job.num_in + job.num_out; k++) {
        const int unread = k < op->num_inputs && (op->inputs[k].flags & OPF_ARG_SHAPE_ONLY);
        const int64_t bytes = unread ? 0 : opf_tensor_numel(operands[k]) * (int64_t)job.elem;
        in_bytes += k < job.num_in ? bytes : 0;
        out_bytes += k < job.num_in ? 0 : bytes;
    }
    if (reduce) {
        return opf_ew_reduce_run(&job, operands, n, in_bytes > cached_max);
    }
    job.stream_copy = kernels->stream_copy;
    const int stream = job.stream_copy != NULL && in_bytes + out_bytes > cached_max;
    if (contiguous) {
        job.probe = stream;
        opf_parallel_for(n, OPF_EW_GRAIN, stream ? opf_ew_streamed : opf_ew_contiguous, &job);
        return OPF_OK;
    }
    opf_ew_layout(&job, operands, job.num_in, 0);
    const int streamed = stream && opf_ew_outputs_dense(&job);
    job.period = streamed ? opf_ew_period(&job) : 0;
    job.walk = job.period == 0;
    opf_parallel_for(n, OPF_EW_GRAIN, streamed ? opf_ew_streamed : opf_ew_strided, &job);
    return OPF_OK;
}
