/*
 * row_engine.c — runs an authored row kernel once per row.
 *
 * A row-wise op's batched arguments ("x[..., M]") share their leading dims;
 * each index of those dims is one row, and the kernel sees that row of every
 * batched argument as contiguous memory. Rows already contiguous are passed
 * in place; others are gathered into scratch (inputs) or computed in scratch
 * and scattered back (outputs). Rows of large outputs are computed in scratch
 * too (in cache) and stored with non-temporal stores, as the elementwise
 * engine stores its large outputs, while the next row's inputs are
 * prefetched: memory reads one row while it writes the previous. That pays
 * for a kernel that computes little per element (the row's time is its
 * memory traffic); one that computes much (exponentials) does better with
 * plain stores, which the core issues among its arithmetic. So each chunk of
 * rows times its first rows streamed and the next as many stored in place
 * (the calling thread's CPU time), and goes on in the faster mode; the rows
 * stored in place are charged the time the streamed rows took to store
 * their outputs, as their lines are written back to memory only after the
 * window. A kernel that takes longer than its stores goes on in place
 * (OPF_ROW_STREAM_RATIO). Results are the same either way. A kernel can do
 * better than both: for outputs of OPF_ROW_DIRECT_MIN_BYTES and more the
 * engine passes the row in place and asks the kernel (opf_row_args.stream)
 * to store it with non-temporal stores itself, which OPF_STORE_ROW does in
 * one pass, prefetching the inputs OPF_ROW_PREFETCH_BYTES ahead among its
 * stores; a kernel that says it did (*streamed) goes on so, unprobed, and
 * the engine only fences at the end of the chunk; one that does not goes on
 * as above. Such rows come with the output's row of scratch, which the
 * engine does not need then (opf_row_args.scratch): a kernel that computes
 * values in a pass before the last (softmax's exponentials) computes them
 * there, in cache (OPF_ROW_SCRATCH). Unbatched inputs ("w[M]") are passed whole,
 * copied once when not contiguous. Rows are split over threads; each row is
 * computed by one kernel call, so results do not depend on the thread count.
 *
 * An unbatched output ("dw[M]") is a sum over rows: each row's kernel call
 * adds its part to an accumulator. The rows are cut into blocks that depend
 * only on the shapes (never on the thread count); each block has its own
 * accumulator, zeroed, that sees the block's rows in order, and the blocks'
 * accumulators are added up in block order into the output. So these sums,
 * too, do not depend on the thread count.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engines.h"
#include "error.h"
#include "kernels.h"
#include "tensor.h"
#include "threadpool.h"

enum {
    OPF_ROW_GRAIN_ELEMS = 1 << 15, /* elements per chunk at least */
    OPF_ROW_MAX_BLOCKS = 64,       /* accumulators of an unbatched output, at most */
    /* bytes of a row of an output streamed past the caches, at least; shorter
     * rows are stored in place, their lines asked for ahead (opforge.h,
     * opf__run_stores) */
    OPF_ROW_STREAM_MIN_ROW = OPF__RUN_STORES_MAX_ROW,
    OPF_ROW_PROBE_ROWS = 32 /* rows of a chunk timed in each mode to decide whether streaming pays */
};
/* Streaming goes on only where the kernel took less than this many times as
 * long as the streamed stores (measured on AMD Zen 4, one thread: layer_norm,
 * rms_norm and softmax_grad, whose kernels take 0.5-1.4 times their stores,
 * are up to 1.5 times faster streamed; log_softmax_grad, 1.4-2.4 times, is
 * 10-20% faster stored in place, which the windows' times alone do not
 * always tell). */
#define OPF_ROW_STREAM_RATIO 1.5
/* How far ahead (bytes of the batched inputs' rows, rounded up to whole
 * rows) a kernel streaming its outputs prefetches its inputs. */
#define OPF_ROW_PREFETCH_BYTES ((int64_t)16 << 10)
/* Outputs at least this large (all their rows) are asked to be streamed by
 * the kernel itself (OPF_STORE_ROW); smaller ones that are streamed go
 * through scratch, and the probe above weighs that against storing in
 * place. Measured on AMD Zen 5 (32 MiB L3), one thread: [16384, 300]
 * float32 (19 MiB) ran 5-30% faster in place than streamed by the kernel,
 * as the next call finds the output in cache; [65536, 512] and [8192,
 * 4096] (128 MiB) 1.1-1.4 times faster streamed by the kernel. */
#define OPF_ROW_DIRECT_MIN_BYTES ((int64_t)32 << 20)
/* Bytes of accumulators of the unbatched outputs, at most (fewer blocks then). */
#define OPF_ROW_ACC_BYTES ((size_t)64 << 20)

/* One argument as the row loop walks it. */
typedef struct opf_row_arg {
    const opf_tensor *t;
    char *base;
    int batched;
    int contiguous_rows;                /* its rows are contiguous in memory */
    int unread;                         /* an input declared OPF_ARG_SHAPE_ONLY: never prefetched or gathered */
    int stream;                         /* an output computed in scratch, then streamed to its contiguous row */
    size_t scratch_at;                  /* a row gathered or computed in scratch: its offset there (bytes) */
    size_t scratch_alt;                 /* a streamed output: its second row of scratch (opf_row_scratch_of) */
    int64_t len;                        /* elements of a row (or of the whole tensor) */
    int32_t core;                       /* dims after the batch dims */
    int64_t batch_stride[OPF_MAX_RANK]; /* a batched argument's strides along the batch dims (elements) */
    size_t acc_at;                      /* an unbatched output: its accumulator's offset in a block's (elements) */
} opf_row_arg;

typedef struct opf_row_job {
    opf_row_fn fn;
    int runs; /* the kernel takes a run of rows per call (OPF_ROW_KERNEL_RUNS) */
    opf_copy_ukernel stream_copy;
    int streaming;         /* some output may be streamed */
    uint32_t stream_outs;  /* those the kernel is asked to stream (bit j: output j) */
    int64_t prefetch_rows; /* how far ahead a kernel streaming its rows prefetches the inputs' (rows) */
    size_t elem;
    int32_t num_in, num_out;
    int32_t batch_rank;
    int64_t batch_shape[OPF_MAX_RANK];
    opf_row_arg args[2 * OPF_MAX_ARGS]; /* inputs, then outputs */
    size_t scratch_bytes;               /* a row of every argument in scratch, each 64-byte aligned */
    opf_attr_value attrs[OPF_MAX_ATTRS];
    /* Unbatched outputs: rows per block, and the blocks' accumulators
     * (acc_elems elements per block, one after the other). */
    int64_t rows, block_rows;
    size_t acc_elems;
    char *acc;
    _Atomic int failed; /* a chunk could not allocate its scratch */
} opf_row_job;

/* Copies between a row of `a` (batch offset `off`, core dims walked
 * C-order) and contiguous `buf`; to_buf selects the direction. */
static void opf_row_copy(const opf_row_job *job, const opf_row_arg *a, int64_t off, char *buf, int to_buf) {
    const opf_tensor *t = a->t;
    const int32_t first = t->ndim - a->core, last = a->core - 1;
    const size_t elem = job->elem;
    if (a->len <= 0) {
        return;
    }
    if (a->core == 0) { /* one element */
        memcpy(to_buf ? buf : a->base + off * (int64_t)elem, to_buf ? a->base + off * (int64_t)elem : buf, elem);
        return;
    }
    /* Runs along the innermost dim: one memcpy where its stride is 1. */
    int64_t stride[OPF_MAX_RANK] = {0}, index[OPF_MAX_RANK] = {0};
    for (int32_t d = 0; d < a->core; d++) {
        stride[d] = opf_tensor_stride(t, first + d);
    }
    const int64_t inner = t->shape[first + last], step = stride[last];
    for (int64_t i = 0; i < a->len; i += inner) {
        int64_t at = off;
        for (int32_t d = 0; d < last; d++) {
            at += index[d] * stride[d];
        }
        char *mem = a->base + at * (int64_t)elem, *row = buf + (size_t)i * elem;
        if (step == 1) {
            memcpy(to_buf ? row : mem, to_buf ? mem : row, (size_t)inner * elem);
        } else {
            for (int64_t j = 0; j < inner; j++) {
                char *e = mem + j * step * (int64_t)elem;
                memcpy(to_buf ? row + (size_t)j * elem : e, to_buf ? e : row + (size_t)j * elem, elem);
            }
        }
        for (int32_t d = last - 1; d >= 0 && ++index[d] == t->shape[first + d]; d--) {
            index[d] = 0;
        }
    }
}

/* Offset (elements) of the row at `index` of batched argument a. */
static int64_t opf_row_offset(const opf_row_job *job, const opf_row_arg *a, const int64_t *index) {
    int64_t off = 0;
    for (int32_t d = 0; d < job->batch_rank; d++) {
        off += index[d] * a->batch_stride[d];
    }
    return off;
}

enum { OPF_ROW_STREAM_BLOCK = 2048 }; /* bytes streamed between two runs of prefetches */

/* Stores the streamed outputs of a row (computed in scratch) with
 * non-temporal stores and, meanwhile, prefetches the next row's contiguous
 * batched inputs (index: the next row's; `next` 0 when there is none), so
 * that memory reads the next row while it writes this one. A row's partial
 * first and last lines go through its output's edge (opf_row_edge), as a
 * kernel's own streamed rows' do. */
static void opf_row_stream_out(const opf_row_job *job, const opf_row_args *call, opf_row_edge *edges,
                               const int64_t *off, const int64_t *index, int next, int fence) {
    const char *pf_at[OPF_MAX_ARGS];
    size_t pf_left[OPF_MAX_ARGS], pf_total = 0, out_total = 0;
    int32_t pf_count = 0;
    for (int32_t k = 0; next && k < job->num_in; k++) {
        const opf_row_arg *a = &job->args[k];
        if (a->t != NULL && a->batched && a->contiguous_rows && !a->unread && a->len > 0) {
            pf_at[pf_count] = a->base + opf_row_offset(job, a, index) * (int64_t)job->elem;
            pf_left[pf_count] = (size_t)a->len * job->elem;
            pf_total += pf_left[pf_count++];
        }
    }
    for (int32_t k = job->num_in; k < job->num_in + job->num_out; k++) {
        const opf_row_arg *a = &job->args[k];
        out_total += a->t != NULL && a->stream ? (size_t)a->len * job->elem : 0;
    }
    int32_t pf = 0;
    size_t out_done = 0, pf_done = 0;
    for (int32_t k = job->num_in; k < job->num_in + job->num_out; k++) {
        const opf_row_arg *a = &job->args[k];
        if (a->t == NULL || !a->stream) {
            continue;
        }
        const char *src = call->out[k - job->num_in];
        char *dst = a->base + off[k] * (int64_t)job->elem;
        const size_t bytes = (size_t)a->len * job->elem;
        /* The blocks between the row's partial first and last lines, whole
         * lines of the destination. */
        const size_t to_line = opf_line_head(dst), head = to_line < bytes ? to_line : bytes;
        const size_t tail = (bytes - head) % 64, body_end = bytes - tail;
        opf_row_edge *const edge = &edges[k - job->num_in];
        if (head > 0) {
            opf__edge_head(edge, dst, src, head, 0);
        }
        out_done += head;
        for (size_t at = head, len; at < body_end; at += len) {
            len = body_end - at < OPF_ROW_STREAM_BLOCK ? body_end - at : OPF_ROW_STREAM_BLOCK;
            out_done += len;
            out_done += at + len == body_end ? tail : 0;
            /* The share of the next row's inputs that goes with this block. */
            const size_t pf_goal = (size_t)((double)pf_total * (double)out_done / (double)out_total);
            const char *share = NULL;
            size_t share_len = 0;
            for (size_t want = pf_goal > pf_done ? pf_goal - pf_done : 0, take; want > 0 && pf < pf_count;
                 want -= take) {
                take = want < pf_left[pf] ? want : pf_left[pf];
                if (share == NULL) { /* the copy prefetches it among its stores */
                    share = pf_at[pf];
                    share_len = take;
                } else { /* the part in the next input, where the share runs into one: at once */
                    for (size_t b = 0; b < take; b += 64) {
                        __builtin_prefetch(pf_at[pf] + b, 0, 2);
                    }
                }
                pf_at[pf] += take;
                pf_left[pf] -= take;
                pf_done += take;
                pf += pf_left[pf] == 0;
            }
            job->stream_copy(len, src + at, dst + at, share, share_len, fence && out_done == out_total);
        }
        if (tail > 0) {
            opf__edge_tail(edge, dst + body_end, src + body_end, tail);
        }
    }
}

/* The batched contiguous inputs of the row `ahead` rows after this one
 * (index: this row's), for a kernel that streams its outputs to prefetch
 * among its stores; inputs of less than a line per row are left to the
 * hardware. */
static void opf_row_next_inputs(const opf_row_job *job, const int64_t *index, int64_t ahead, opf_row_args *call) {
    int64_t next[OPF_MAX_RANK];
    memcpy(next, index, sizeof(int64_t) * (size_t)job->batch_rank);
    for (int32_t d = job->batch_rank - 1; d >= 0 && ahead > 0; d--) {
        next[d] += ahead;
        ahead = next[d] / job->batch_shape[d];
        next[d] %= job->batch_shape[d];
    }
    for (int32_t k = 0; k < job->num_in; k++) {
        const opf_row_arg *a = &job->args[k];
        const int64_t bytes = a->len * (int64_t)job->elem;
        if (a->t != NULL && a->batched && a->contiguous_rows && !a->unread && bytes >= 64) {
            call->prefetch[call->num_prefetch] = a->base + opf_row_offset(job, a, next) * (int64_t)job->elem;
            call->prefetch_bytes[call->num_prefetch++] = bytes;
        }
    }
}

/* Orders the non-temporal stores of rows a kernel streamed before what
 * follows the chunk (the caller's reads, on any thread). */
static void opf_row_store_fence(void) {
#if defined(__x86_64__)
    __builtin_ia32_sfence();
#endif
}

/* The batch index of row r (C order over the batch dims). */
static void opf_row_index(const opf_row_job *job, int64_t r, int64_t *index) {
    for (int32_t d = job->batch_rank - 1; d >= 0; d--) {
        index[d] = r % job->batch_shape[d];
        r /= job->batch_shape[d];
    }
}

/* Rows [begin, end) of a kernel that takes runs of rows, where every
 * batched argument's rows lie in place and nothing is streamed: one call per
 * run of rows along the innermost batch dim (each argument's rows one
 * stride apart there), the rows computed in order as one call per row would
 * compute them. `acc` as for opf_row_range. */
static void opf_row_range_runs(const opf_row_job *job, int64_t begin, int64_t end, char *acc) {
    const int32_t last = job->batch_rank - 1;
    int64_t index[OPF_MAX_RANK] = {0};
    opf_row_index(job, begin, index);
    opf_row_args call = {.attrs = job->attrs};
    for (int64_t r = begin, run; r < end; r += run) {
        run = last < 0 ? end - r : job->batch_shape[last] - index[last];
        run = run < end - r ? run : end - r;
        for (int32_t k = 0; k < job->num_in + job->num_out; k++) {
            const opf_row_arg *a = &job->args[k];
            void *ptr = NULL;
            int64_t stride = 0;
            if (a->t != NULL && !a->batched) {
                ptr = k < job->num_in ? a->base : acc + a->acc_at * job->elem;
            } else if (a->t != NULL && a->base != NULL) { /* (NULL: empty rows, which stay put) */
                ptr = a->base + opf_row_offset(job, a, index) * (int64_t)job->elem;
                stride = last < 0 ? 0 : a->batch_stride[last];
            }
            if (k < job->num_in) {
                call.in[k] = ptr;
                call.in_len[k] = a->len;
                call.in_stride[k] = stride;
            } else {
                call.out[k - job->num_in] = ptr;
                call.out_len[k - job->num_in] = a->len;
                call.out_stride[k - job->num_in] = stride;
            }
        }
        call.rows = run;
        job->fn(&call);
        if (last >= 0) {
            index[last] += run;
            for (int32_t d = last; d > 0 && index[d] == job->batch_shape[d]; d--) {
                index[d] = 0;
                index[d - 1]++;
            }
        }
    }
}

/* A streamed output's row of scratch for the next call: the first of its
 * two, or the second where the previous call's row waits in the first
 * (OPF_STORE_ROW_LATER), so that the call may compute into its scratch
 * while it stores that row (OPF_ROW_SCRATCH then leaves it waiting). A
 * body that leaves no row keeps one row of scratch, hot in L1. */
static void *opf_row_scratch_of(const opf_row_arg *a, char *scratch, const opf_row_later *earlier) {
    char *const first = scratch + a->scratch_at;
    return earlier->dst != NULL && earlier->src == first ? scratch + a->scratch_alt : first;
}

/* Stores what waits of a row a call left (OPF_STORE_ROW_LATER), if any. */
static void opf_row_finish_later(opf_row_later *w) {
    if (w->dst != NULL) {
        opf__later_store(w, -1);
    }
}

/* Rows [begin, end); `acc` holds the accumulators of the unbatched outputs
 * (NULL when there are none). */
static void opf_row_range(opf_row_job *job, int64_t begin, int64_t end, char *acc) {
    if (job->runs && !job->streaming && job->scratch_bytes == 0) {
        opf_row_range_runs(job, begin, end, acc);
        return;
    }
    const int32_t count = job->num_in + job->num_out;
    char *scratch = job->scratch_bytes > 0 ? aligned_alloc(64, job->scratch_bytes) : NULL;
    if (job->scratch_bytes > 0 && scratch == NULL) {
        job->failed = 1;
        return;
    }
    for (int32_t k = 0; k < job->num_in; k++) {
        const opf_row_arg *a = &job->args[k];
        if (a->t != NULL && a->unread && a->batched && !a->contiguous_rows && a->len > 0) {
            memset(scratch + a->scratch_at, 0, (size_t)a->len * job->elem);
        }
    }
    int64_t index[OPF_MAX_RANK] = {0};
    opf_row_index(job, begin, index);
    opf_row_args call = {.attrs = job->attrs, .rows = 1}; /* (one row per call here; every stride 0) */
    /* Outputs the kernel streams itself (OPF_STORE_ROW): asked on the first
     * row streamed, then its rows are passed in place and the engine only
     * fences; the others go on through scratch. */
    uint32_t asking = job->streaming ? job->stream_outs : 0, direct = 0, acked = 0;
    call.streamed = &acked;
    /* A row a call left to the next one to store (OPF_STORE_ROW_LATER):
     * `earlier` the previous call's, `later` this call's; offered to the
     * calls whose output the kernel streams, and stored here before any
     * other call and after the last. */
    opf_row_later waits[2] = {{0}, {0}};
    opf_row_later *earlier = &waits[0], *later = &waits[1];
    /* The ends of streamed rows that wait for the next row's first bytes
     * (opf_row_edge), one per output; stored here after the last row. */
    opf_row_edge edges[OPF_MAX_ARGS] = {{0}};
    /* The first rows streamed, the next as many stored in place, each timed
     * but for its first row (which the other mode prepared: a streamed row's
     * inputs come in while the previous row is stored); then the faster mode
     * goes on (see the top of the file). Not streaming, rows that start off
     * a 64-byte line are then timed stored in place (straddling lines) and
     * computed in scratch and copied, and the faster goes on. */
    int probing = job->streaming && end - begin >= 16 * OPF_ROW_PROBE_ROWS;
    const int64_t stream_probe_end = probing ? begin + OPF_ROW_PROBE_ROWS : begin;
    const int64_t probe_end = probing ? begin + 2 * OPF_ROW_PROBE_ROWS : begin;
    int64_t realign_probe_end = probe_end;
    int streaming = job->streaming, realigning = 0, fence = 0;
    double stream_time = 0, store_time = 0, in_place_probe_time = 0, window_start = 0, in_place_time = 0;
    for (int64_t r = begin; r < end; r++) {
        int64_t off[2 * OPF_MAX_ARGS];
        int streams = 0, realigned = 0;
        call.stream = 0;
        call.num_prefetch = 0;
        if (probing && (r == begin + 1 || r == stream_probe_end + 1)) {
            window_start = opf_thread_seconds();
        } else if (probing && r == stream_probe_end) {
            stream_time = opf_thread_seconds() - window_start;
            streaming = 0;
        }
        if (r == probe_end && probing) {
            /* Rows stored in place leave their lines to be written back
             * later, after the window: their time is counted as the time the
             * streamed rows took to store theirs. */
            in_place_probe_time = opf_thread_seconds() - window_start + store_time;
            /* and only where the kernel took less than OPF_ROW_STREAM_RATIO
             * times as long as the stores: a kernel that computes much more
             * hides the rows' write-backs in place among its arithmetic. */
            streaming =
                stream_time < in_place_probe_time && stream_time - store_time < OPF_ROW_STREAM_RATIO * store_time;
            realign_probe_end = streaming ? probe_end : probe_end + 4 * OPF_ROW_PROBE_ROWS;
            window_start = opf_thread_seconds();
        } else if (r < realign_probe_end && r == probe_end + 2 * OPF_ROW_PROBE_ROWS) {
            const double now = opf_thread_seconds();
            in_place_time = now - window_start;
            window_start = now;
            realigning = 1;
        } else if (r == realign_probe_end && realign_probe_end > probe_end) {
            realigning = opf_thread_seconds() - window_start < in_place_time;
        }
        for (int32_t k = 0; k < count; k++) {
            const opf_row_arg *a = &job->args[k];
            void *ptr = NULL;
            off[k] = 0;
            if (a->t != NULL && !a->batched) {
                ptr = k < job->num_in ? a->base : acc + a->acc_at * job->elem;
            } else if (a->t != NULL) {
                off[k] = opf_row_offset(job, a, index);
                char *row = a->base != NULL ? a->base + off[k] * (int64_t)job->elem : NULL; /* NULL: empty rows */
                const uint32_t bit = k >= job->num_in ? 1u << (k - job->num_in) : 0;
                if (a->stream && streaming && ((asking | direct) & bit)) { /* the kernel streams it */
                    call.stream |= bit;
                    call.out[k - job->num_in] = row;
                    call.out_len[k - job->num_in] = a->len;
                    /* (the row's scratch, unused by the engine: OPF_ROW_SCRATCH) */
                    call.scratch[k - job->num_in] = a->len > 0 ? opf_row_scratch_of(a, scratch, earlier) : NULL;
                    continue;
                }
                streams |= a->stream && streaming;
                /* A row of an output not streamed that does not start on a
                 * 64-byte line is computed in scratch and copied: the kernel's
                 * vector stores would each straddle two lines (NumPy's arrays
                 * start on 16 bytes). */
                const int realign = realigning && a->stream && !streaming && ((uintptr_t)row & 63) != 0;
                realigned |= realign;
                if (a->contiguous_rows && !(a->stream && streaming) && !realign) {
                    ptr = row;
                } else {
                    ptr = a->len > 0 ? scratch + a->scratch_at : NULL; /* an empty row takes no scratch */
                    if (k < job->num_in && !a->unread) {               /* (an unread one's scratch holds zeros) */
                        opf_row_copy(job, a, off[k], ptr, 1);
                    }
                }
            }
            if (k < job->num_in) {
                call.in[k] = ptr;
                call.in_len[k] = a->len;
            } else {
                call.out[k - job->num_in] = ptr;
                call.out_len[k - job->num_in] = a->len;
                call.scratch[k - job->num_in] = NULL; /* (the engine's own: not the kernel's to use) */
            }
        }
        if (call.stream != 0 && r + job->prefetch_rows < end) {
            opf_row_next_inputs(job, index, job->prefetch_rows, &call);
        }
        acked = 0;
        later->dst = NULL;
        if (call.stream != 0) {
            call.earlier = earlier;
            call.later = later;
            call.edges = edges;
        } else {
            opf_row_finish_later(earlier);
            call.earlier = call.later = NULL;
            call.edges = NULL;
        }
        job->fn(&call);
        opf_row_finish_later(earlier); /* (what the call's first pass left of it) */
        opf_row_later *const left = earlier;
        earlier = later;
        later = left;
        fence |= earlier->dst != NULL;
        for (int32_t d = job->batch_rank - 1; d >= 0 && ++index[d] == job->batch_shape[d]; d--) {
            index[d] = 0;
        }
        if (asking != 0 && call.stream != 0) {
            /* Outputs asked and not streamed were stored in place, as the
             * kernel stores them: right, and from the next row on computed
             * in scratch. All streamed by the kernel: no probe (nothing to
             * weigh against the kernel's own stores). */
            direct = acked & call.stream;
            asking = 0;
            probing = probing && direct != job->stream_outs;
        }
        fence |= direct != 0 && call.stream != 0;
        if (streams) {
            /* (a fence after the probe's last streamed row too: streaming may stop there) */
            const int timed = r > begin && r < stream_probe_end;
            const double t0 = timed ? opf_thread_seconds() : 0;
            opf_row_stream_out(job, &call, edges, off, index, r + 1 < end, r + 1 == end || r + 1 == stream_probe_end);
            store_time += timed ? opf_thread_seconds() - t0 : 0;
            fence = 1; /* (an edge's line streamed with a row that had no whole line after it) */
        }
        for (int32_t k = job->num_in; realigned && k < count; k++) {
            const opf_row_arg *a = &job->args[k];
            if (a->t != NULL && a->stream && a->len > 0) {
                memcpy(a->base + off[k] * (int64_t)job->elem, call.out[k - job->num_in], (size_t)a->len * job->elem);
            }
        }
        for (int32_t k = job->num_in; k < count; k++) {
            const opf_row_arg *a = &job->args[k];
            if (a->t != NULL && a->batched && !a->contiguous_rows) {
                opf_row_copy(job, a, off[k], call.out[k - job->num_in], 0);
            }
        }
    }
    opf_row_finish_later(earlier);
    for (int32_t j = 0; j < job->num_out; j++) {
        opf__edge_empty(&edges[j]);
    }
    if (fence) {
        opf_row_store_fence();
    }
    free(scratch);
}

static void opf_row_chunk(void *ctx, int64_t begin, int64_t end) { opf_row_range(ctx, begin, end, NULL); }

/* Blocks [begin, end) of rows, each into its own zeroed accumulators. */
static void opf_row_blocks(void *ctx, int64_t begin, int64_t end) {
    opf_row_job *job = ctx;
    for (int64_t b = begin; b < end; b++) {
        char *acc = job->acc + (size_t)b * job->acc_elems * job->elem;
        memset(acc, 0, job->acc_elems * job->elem);
        int64_t first = b * job->block_rows, last = first + job->block_rows;
        opf_row_range(job, first, last < job->rows ? last : job->rows, acc);
    }
}

/* The accumulators of `blocks` blocks added up in block order into block 0's. */
static void opf_row_add_blocks(const opf_row_job *job, int64_t blocks) {
    for (int64_t b = 1; b < blocks; b++) {
        if (job->elem == sizeof(float)) {
            float *sum = (float *)job->acc;
            const float *part = sum + (size_t)b * job->acc_elems;
            for (size_t i = 0; i < job->acc_elems; i++) {
                sum[i] += part[i];
            }
        } else {
            double *sum = (double *)job->acc;
            const double *part = sum + (size_t)b * job->acc_elems;
            for (size_t i = 0; i < job->acc_elems; i++) {
                sum[i] += part[i];
            }
        }
    }
}

/* A contiguous copy of an unbatched input that is not contiguous (zeros
 * for one declared OPF_ARG_SHAPE_ONLY). */
static char *opf_row_whole_copy(const opf_row_job *job, opf_row_arg *a) {
    const size_t bytes = (size_t)(a->len > 0 ? a->len : 1) * job->elem;
    char *copy = a->unread ? calloc(1, bytes) : malloc(bytes);
    if (copy != NULL && !a->unread) {
        opf_row_arg whole = *a;
        whole.core = a->t->ndim;
        opf_row_copy(job, &whole, 0, copy, 1);
    }
    return copy;
}

int64_t opf_row_sum_block_rows(int64_t rows, int64_t row_elems, size_t acc_bytes) {
    /* At most OPF_ROW_MAX_BLOCKS blocks (fewer when the accumulators would
     * take more than OPF_ROW_ACC_BYTES), of at least a chunk's rows. */
    int64_t grain = row_elems > 0 ? OPF_ROW_GRAIN_ELEMS / row_elems : rows;
    grain = grain > 0 ? grain : 1;
    int64_t max_blocks = OPF_ROW_MAX_BLOCKS;
    if (acc_bytes > 0 && (size_t)max_blocks * acc_bytes > OPF_ROW_ACC_BYTES) {
        max_blocks = (int64_t)(OPF_ROW_ACC_BYTES / acc_bytes);
        max_blocks = max_blocks > 0 ? max_blocks : 1;
    }
    const int64_t block_rows = (rows + max_blocks - 1) / max_blocks;
    return block_rows > grain ? block_rows : grain;
}

/* Runs the rows with unbatched outputs: blocks of rows into accumulators,
 * added up and written to the outputs. */
static opf_status opf_row_run_accumulating(opf_row_job *job, int64_t row_elems) {
    size_t acc_bytes = job->acc_elems * job->elem;
    job->block_rows = opf_row_sum_block_rows(job->rows, row_elems, acc_bytes);
    int64_t blocks = job->rows > 0 ? (job->rows + job->block_rows - 1) / job->block_rows : 1;
    job->acc = malloc((size_t)blocks * (acc_bytes > 0 ? acc_bytes : 1));
    if (job->acc == NULL) {
        return opf_error(OPF_E_NOMEM, "cannot allocate %zu bytes of row sums", (size_t)blocks * acc_bytes);
    }
    memset(job->acc, 0, acc_bytes); /* no rows: the sums are zero */
    if (job->rows > 0) {
        opf_parallel_for(blocks, 1, opf_row_blocks, job);
    }
    opf_status st = OPF_OK;
    if (job->failed) {
        st = opf_error(OPF_E_NOMEM, "cannot allocate %zu bytes of row scratch", job->scratch_bytes);
    } else {
        opf_row_add_blocks(job, blocks);
        for (int32_t k = job->num_in; k < job->num_in + job->num_out; k++) {
            opf_row_arg *a = &job->args[k];
            if (a->t != NULL && !a->batched) {
                opf_row_arg whole = *a;
                whole.core = a->t->ndim;
                opf_row_copy(job, &whole, 0, job->acc + a->acc_at * job->elem, 0);
            }
        }
    }
    free(job->acc);
    return st;
}

opf_status opf_row_engine_run(const opf_op_def *op, const opf_tensor *const *inputs, const opf_tensor *const *outputs,
                              const opf_attr_value *attrs) {
    const opf_tensor *x = inputs[0];
    opf_row_job job = {.num_in = op->num_inputs, .num_out = op->num_outputs, .elem = opf_dtype_size(x->dtype)};
    OPF_PICK_VARIANT(job.fn, x->dtype == OPF_F32 ? op->row->f32 : op->row->f64);
    if (job.fn == NULL) {
        return opf_error(OPF_E_UNSUPPORTED, "its kernel has no %s build", opf_dtype_name(x->dtype));
    }
    job.runs = (op->row->flags & OPF_ROW_KERNEL_RUNS) != 0;
    memcpy(job.attrs, attrs, sizeof(opf_attr_value) * (size_t)op->num_attrs);
    job.batch_rank = x->ndim - op->inputs[0].core_dims;
    int64_t rows = 1;
    for (int32_t d = 0; d < job.batch_rank; d++) {
        job.batch_shape[d] = x->shape[d];
        rows *= x->shape[d];
    }
    job.rows = rows;
    const opf_kernels *kernels = opf_kernels_get();
    job.stream_copy = kernels->stream_copy;
    char *copies[OPF_MAX_ARGS] = {NULL};
    opf_status st = OPF_OK;
    int64_t row_elems = 0, in_elems = 0;
    int accumulating = 0;
    int64_t call_bytes = 0; /* the rows read and written (opf_cached_max_bytes) */
    for (int32_t k = 0; k < job.num_in + job.num_out; k++) {
        const opf_arg_def *def = k < job.num_in ? &op->inputs[k] : &op->outputs[k - job.num_in];
        const opf_tensor *t = k < job.num_in ? inputs[k] : outputs[k - job.num_in];
        const int counted = t != NULL && (def->flags & OPF_ARG_BATCHED) && !(def->flags & OPF_ARG_SHAPE_ONLY);
        call_bytes += counted ? opf_tensor_numel(t) * (int64_t)job.elem : 0;
    }
    for (int32_t k = 0; k < job.num_in + job.num_out; k++) {
        const opf_arg_def *def = k < job.num_in ? &op->inputs[k] : &op->outputs[k - job.num_in];
        opf_row_arg *a = &job.args[k];
        a->t = k < job.num_in ? inputs[k] : outputs[k - job.num_in];
        if (a->t == NULL) {
            continue;
        }
        a->batched = (def->flags & OPF_ARG_BATCHED) != 0;
        a->core = a->batched ? a->t->ndim - job.batch_rank : a->t->ndim;
        for (int32_t d = 0; a->batched && d < job.batch_rank; d++) {
            a->batch_stride[d] = opf_tensor_stride(a->t, d);
        }
        a->base = opf_tensor_base(a->t);
        a->len = 1;
        for (int32_t d = a->t->ndim - a->core; d < a->t->ndim; d++) {
            a->len *= a->t->shape[d];
        }
        a->contiguous_rows = opf_tensor_tail_contiguous(a->t, a->core);
        a->unread = k < job.num_in && (def->flags & OPF_ARG_SHAPE_ONLY) != 0;
        row_elems += a->len;
        in_elems += k < job.num_in && a->batched ? a->len : 0;
        const int64_t row_bytes = a->len * (int64_t)job.elem;
        a->stream = k >= job.num_in && a->batched && a->contiguous_rows && job.stream_copy != NULL &&
                    row_bytes >= OPF_ROW_STREAM_MIN_ROW && call_bytes > opf_cached_max_bytes(kernels);
        job.streaming |= a->stream;
        job.stream_outs |= a->stream && rows >= OPF_ROW_DIRECT_MIN_BYTES / row_bytes ? 1u << (k - job.num_in) : 0;
        if (a->batched && (!a->contiguous_rows || a->stream)) {
            const size_t row = ((size_t)a->len * job.elem + 63) / 64 * 64;
            a->scratch_at = job.scratch_bytes;
            a->scratch_alt = a->scratch_at + (a->stream ? row : 0);
            job.scratch_bytes += a->stream ? 2 * row : row;
        } else if (!a->batched && k >= job.num_in) {
            a->acc_at = job.acc_elems; /* a sum over rows, in the blocks' accumulators */
            job.acc_elems += (size_t)a->len;
            accumulating = 1;
        } else if (!a->batched && !a->contiguous_rows) {
            a->base = copies[k] = opf_row_whole_copy(&job, a);
            a->contiguous_rows = 1;
            if (a->base == NULL) {
                st = opf_error(OPF_E_NOMEM, "cannot allocate a contiguous copy of %s", def->name);
            }
        }
    }
    int64_t grain = row_elems > 0 ? OPF_ROW_GRAIN_ELEMS / row_elems : rows;
    grain = grain > 0 ? grain : 1;
    const int64_t in_row_bytes = in_elems * (int64_t)job.elem;
    job.prefetch_rows = in_row_bytes > 0 ? (OPF_ROW_PREFETCH_BYTES + in_row_bytes - 1) / in_row_bytes : 1;
    if (st == OPF_OK && accumulating) {
        st = opf_row_run_accumulating(&job, row_elems);
    } else if (st == OPF_OK && rows > 0) {
        opf_parallel_for(rows, grain, opf_row_chunk, &job);
        if (job.failed) {
            st = opf_error(OPF_E_NOMEM, "cannot allocate %zu bytes of row scratch", job.scratch_bytes);
        }
    }
    for (int32_t k = 0; k < OPF_MAX_ARGS; k++) {
        free(copies[k]);
    }
    return st;
}
