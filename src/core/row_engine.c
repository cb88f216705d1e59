/*
 * row_engine.c — runs an authored row kernel once per row.
 *
 * A row-wise op's batched arguments ("x[..., M]") share their leading dims;
 * each index of those dims is one row, and the kernel sees that row of every
 * batched argument as contiguous memory. Rows already contiguous are passed
 * in place; others are gathered into scratch (inputs) or computed in scratch
 * and scattered back (outputs). Unbatched inputs ("w[M]") are passed whole,
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
#include <stdlib.h>
#include <string.h>

#include "engines.h"
#include "error.h"
#include "tensor.h"
#include "threadpool.h"

enum { OPF_ROW_GRAIN_ELEMS = 1 << 15 }; /* elements per chunk at least */

/* One argument as the row loop walks it. */
typedef struct opf_row_arg {
    const opf_tensor *t;
    char *base;
    int batched;
    int contiguous_rows; /* its rows are contiguous in memory */
    int64_t len;         /* elements of a row (or of the whole tensor) */
    int32_t core;        /* dims after the batch dims */
} opf_row_arg;

typedef struct opf_row_job {
    opf_row_fn fn;
    size_t elem;
    int32_t num_in, num_out;
    int32_t batch_rank;
    int64_t batch_shape[OPF_MAX_RANK];
    opf_row_arg args[2 * OPF_MAX_ARGS]; /* inputs, then outputs */
    size_t scratch_elems;               /* per row, for every gathered argument */
    opf_attr_value attrs[OPF_MAX_ATTRS];
    _Atomic int failed; /* a chunk could not allocate its scratch */
} opf_row_job;

/* Copies between a row of `a` (batch offset `off`, core dims walked
 * C-order) and contiguous `buf`; to_buf selects the direction. */
static void opf_row_copy(const opf_row_job *job, const opf_row_arg *a, int64_t off, char *buf, int to_buf) {
    const opf_tensor *t = a->t;
    const int32_t first = t->ndim - a->core;
    int64_t index[OPF_MAX_RANK] = {0};
    for (int64_t i = 0; i < a->len; i++) {
        int64_t at = off;
        for (int32_t d = 0; d < a->core; d++) {
            at += index[d] * opf_tensor_stride(t, first + d);
        }
        char *elem = a->base + at * (int64_t)job->elem;
        if (to_buf) {
            memcpy(buf + (size_t)i * job->elem, elem, job->elem);
        } else {
            memcpy(elem, buf + (size_t)i * job->elem, job->elem);
        }
        for (int32_t d = a->core - 1; d >= 0 && ++index[d] == t->shape[first + d]; d--) {
            index[d] = 0;
        }
    }
}

static void opf_row_chunk(void *ctx, int64_t begin, int64_t end) {
    opf_row_job *job = ctx;
    const int32_t count = job->num_in + job->num_out;
    char *scratch = job->scratch_elems > 0 ? malloc(job->scratch_elems * job->elem) : NULL;
    if (job->scratch_elems > 0 && scratch == NULL) {
        job->failed = 1;
        return;
    }
    int64_t index[OPF_MAX_RANK] = {0}, rem = begin;
    for (int32_t d = job->batch_rank - 1; d >= 0; d--) {
        index[d] = rem % job->batch_shape[d];
        rem /= job->batch_shape[d];
    }
    opf_row_args call = {.attrs = job->attrs};
    for (int64_t r = begin; r < end; r++) {
        int64_t off[2 * OPF_MAX_ARGS];
        char *free_at = scratch;
        for (int32_t k = 0; k < count; k++) {
            const opf_row_arg *a = &job->args[k];
            void *ptr = NULL;
            off[k] = 0;
            if (a->t != NULL && !a->batched) {
                ptr = a->base;
            } else if (a->t != NULL) {
                for (int32_t d = 0; d < job->batch_rank; d++) {
                    off[k] += index[d] * opf_tensor_stride(a->t, d);
                }
                if (a->contiguous_rows) {
                    ptr = a->base + off[k] * (int64_t)job->elem;
                } else {
                    ptr = free_at;
                    if (a->len > 0) { /* an empty row takes no scratch (which may be NULL) */
                        free_at += (size_t)a->len * job->elem;
                    }
                    if (k < job->num_in) {
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
            }
        }
        job->fn(&call);
        for (int32_t k = job->num_in; k < count; k++) {
            const opf_row_arg *a = &job->args[k];
            if (a->t != NULL && !a->contiguous_rows) {
                opf_row_copy(job, a, off[k], call.out[k - job->num_in], 0);
            }
        }
        for (int32_t d = job->batch_rank - 1; d >= 0 && ++index[d] == job->batch_shape[d]; d--) {
            index[d] = 0;
        }
    }
    free(scratch);
}

/* Whether the last `core` dims of t are C-contiguous (size-1 dims ignored). */
static int opf_core_contiguous(const opf_tensor *t, int32_t core) {
    int64_t expected = 1;
    for (int32_t d = t->ndim - 1; d >= t->ndim - core; d--) {
        if (t->shape[d] == 0) {
            return 1;
        }
        if (t->shape[d] != 1 && opf_tensor_stride(t, d) != expected) {
            return 0;
        }
        expected *= t->shape[d];
    }
    return 1;
}

/* A contiguous copy of an unbatched input that is not contiguous. */
static char *opf_row_whole_copy(const opf_row_job *job, opf_row_arg *a) {
    char *copy = malloc((size_t)(a->len > 0 ? a->len : 1) * job->elem);
    if (copy != NULL) {
        opf_row_arg whole = *a;
        whole.core = a->t->ndim;
        opf_row_copy(job, &whole, 0, copy, 1);
    }
    return copy;
}

opf_status opf_row_engine_run(const opf_op_def *op, const opf_tensor *const *inputs, const opf_tensor *const *outputs,
                              const opf_attr_value *attrs) {
    const opf_tensor *x = inputs[0];
    opf_row_job job = {.num_in = op->num_inputs, .num_out = op->num_outputs, .elem = opf_dtype_size(x->dtype)};
    const opf_row_fn *variants = x->dtype == OPF_F32 ? op->row->f32 : op->row->f64;
    for (int v = opf_kernel_variant_in_use(); v >= 0 && job.fn == NULL; v--) {
        job.fn = variants[v];
    }
    if (job.fn == NULL) {
        return opf_error(OPF_E_UNSUPPORTED, "its kernel has no %s build", opf_dtype_name(x->dtype));
    }
    memcpy(job.attrs, attrs, sizeof(opf_attr_value) * (size_t)op->num_attrs);
    job.batch_rank = x->ndim - op->inputs[0].core_dims;
    int64_t rows = 1;
    for (int32_t d = 0; d < job.batch_rank; d++) {
        job.batch_shape[d] = x->shape[d];
        rows *= x->shape[d];
    }
    char *copies[OPF_MAX_ARGS] = {NULL};
    opf_status st = OPF_OK;
    int64_t row_elems = 0;
    for (int32_t k = 0; k < job.num_in + job.num_out; k++) {
        const opf_arg_def *def = k < job.num_in ? &op->inputs[k] : &op->outputs[k - job.num_in];
        opf_row_arg *a = &job.args[k];
        a->t = k < job.num_in ? inputs[k] : outputs[k - job.num_in];
        if (a->t == NULL) {
            continue;
        }
        a->batched = (def->flags & OPF_ARG_BATCHED) != 0;
        a->core = a->batched ? a->t->ndim - job.batch_rank : a->t->ndim;
        a->base = opf_tensor_base(a->t);
        a->len = 1;
        for (int32_t d = a->t->ndim - a->core; d < a->t->ndim; d++) {
            a->len *= a->t->shape[d];
        }
        a->contiguous_rows = opf_core_contiguous(a->t, a->core);
        row_elems += a->len;
        if (a->batched && !a->contiguous_rows) {
            job.scratch_elems += (size_t)a->len;
        } else if (!a->batched && !a->contiguous_rows) {
            a->base = copies[k] = opf_row_whole_copy(&job, a);
            a->contiguous_rows = 1;
            if (a->base == NULL) {
                st = opf_error(OPF_E_NOMEM, "cannot allocate a contiguous copy of %s", def->name);
            }
        }
    }
    if (st == OPF_OK && rows > 0) {
        int64_t grain = row_elems > 0 ? OPF_ROW_GRAIN_ELEMS / row_elems : rows;
        opf_parallel_for(rows, grain > 0 ? grain : 1, opf_row_chunk, &job);
        if (job.failed) {
            st = opf_error(OPF_E_NOMEM, "cannot allocate %zu bytes of row scratch", job.scratch_elems * job.elem);
        }
    }
    for (int32_t k = 0; k < OPF_MAX_ARGS; k++) {
        free(copies[k]);
    }
    return st;
}
