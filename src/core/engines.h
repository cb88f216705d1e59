/*
 * engines.h — the engines that run authored kernels (opf_eltwise_kernel,
 * opf_row_kernel) over tensor views: strides, broadcasts, in place, empty and
 * 0-d tensors, scratch, threads. opf_op_run (opf_op_run_cuda: the CUDA
 * engines) calls them for rows that name such a kernel, after validating the
 * call.
 */
#ifndef OPF_CORE_ENGINES_H
#define OPF_CORE_ENGINES_H

#include <time.h>

#include "kernels.h"
#include "opforge.h"

/* The calling thread's CPU time, for the engines' probes: unlike a wall
 * clock it does not count the time the thread waits for a core shared with
 * other work, which would make a probe pick the mode it happened to lose
 * less time in. */
static inline double opf_thread_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A call that reads and writes more than this many bytes in all (its inputs
 * read, shape-only ones not counted, and its outputs) stores its large
 * outputs past the caches with non-temporal stores; a smaller one stores in
 * place, where the next op, or the next call, finds its output in the
 * last-level cache. Half the last-level cache of the machine (sysfs, read
 * once with the kernel table; 4 MiB where it says nothing), at most 16 MiB:
 * on an AMD Zen 3 (32 MiB L3), one thread, add and mul of [1024, 1024]
 * float32 (12 MiB in all) 1.2-1.5 times faster stored in place, the row
 * ops' 4 MiB outputs 1.2-1.35 times, softmax's 8 MiB (16 MiB in all)
 * 1.15-1.2 times; add of [2048, 1024] (24 MiB) and the row ops' 12 MiB
 * outputs (24-36 MiB) as fast or faster streamed (1.15-1.3 times). A larger
 * cache (an Intel Xeon's 300 MiB) is unmeasured, so it keeps 16 MiB, and
 * so do the tests sized past it to reach the streamed paths. */
#define OPF_CACHED_MAX_BYTES_CAP ((int64_t)16 << 20)
static inline int64_t opf_cached_max_bytes(const opf_kernels *kernels) {
    const int64_t half = (int64_t)(kernels->caches.l3 / 2);
    return half < OPF_CACHED_MAX_BYTES_CAP ? half : OPF_CACHED_MAX_BYTES_CAP;
}

/* The variant of an authored kernel to run at the ISA level in use. */
int opf_kernel_variant_in_use(void);

/* Sets `fn` to the build in `variants` (one per opf_kernel_variant, NULL
 * where there is none) for the ISA level in use: the best one at or below it,
 * or NULL if there is none at all. */
#define OPF_PICK_VARIANT(fn, variants)                                                                                 \
    do {                                                                                                               \
        (fn) = NULL;                                                                                                   \
        for (int v_ = opf_kernel_variant_in_use(); v_ >= 0 && (fn) == NULL; v_--) {                                    \
            (fn) = (variants)[v_];                                                                                     \
        }                                                                                                              \
    } while (0)

/* A call's operands as views of its iteration shape (the broadcast of the
 * inputs): rank, shape and per-operand strides (zero along broadcast dims). */
typedef struct opf_ew_views {
    int32_t ndim;
    int64_t shape[OPF_MAX_RANK];
    int64_t strides[2 * OPF_MAX_ARGS][OPF_MAX_RANK];
    opf_tensor t[2 * OPF_MAX_ARGS];
} opf_ew_views;

/* Replaces operands[0 .. count) (the first num_in are the inputs, which the
 * row's checks say broadcast together) by views of the broadcast of the
 * inputs held in *v, and returns 1, unless they all have that shape already
 * (0: operands untouched). An output then has zero strides along the dims
 * it is summed over. */
int opf_eltwise_views(int32_t num_in, int32_t count, const opf_tensor **operands, opf_ew_views *v);

/* Runs op->eltwise elementwise: outputs[j] = f(inputs...) (or, for a row
 * without outputs, the inputs written in place) over the broadcast of the
 * inputs; an output of a smaller shape (OPF_SHAPE_SUM_TO) gets the sum of
 * f over the dims it lacks. */
opf_status opf_eltwise_engine_run(const opf_op_def *op, const opf_tensor *const *inputs,
                                  const opf_tensor *const *outputs, const opf_attr_value *attrs);

/* Runs op->row once per row of the batched arguments. */
opf_status opf_row_engine_run(const opf_op_def *op, const opf_tensor *const *inputs, const opf_tensor *const *outputs,
                              const opf_attr_value *attrs);

/* Rows per block of a row op's sums over rows (its unbatched outputs,
 * "dw[M]"): each block is summed from zero in row order, then the blocks in
 * block order. Fixed by the shapes alone (rows, the elements of one row of
 * every argument, the bytes of all the summed outputs), so the sums do not
 * depend on the thread count, and the CUDA row engine adds in the same order. */
int64_t opf_row_sum_block_rows(int64_t rows, int64_t row_elems, size_t acc_bytes);

/* --- the CUDA engines (a build with CUDA: OPF_HAVE_CUDA) -------------------------------------------------------- */

/* src/cuda/eltwise.cu: runs the CUDA build of op->eltwise (op->eltwise->cuda)
 * on a validated call: the operands are the inputs, then the outputs (or the
 * inputs written in place); errors are reported for `label`. */
opf_status opf_cuda_eltwise_run(const char *label, const opf_op_def *op, const opf_tensor *const *inputs,
                                const opf_tensor *const *outputs, const opf_attr_value *attrs, void *stream);
/* The compute_cuda of a row whose CUDA path is its eltwise kernel's CUDA
 * build (set when a declaration is resolved): opf_op_run_cuda recognizes it
 * and calls opf_cuda_eltwise_run with the row instead. */
opf_status opf_cuda_eltwise_compute(const opf_tensor *const *inputs, const opf_tensor *const *outputs,
                                    const opf_attr_value *attrs, void *stream);

/* src/cuda/row.cu: runs the CUDA builds of op->row on a validated call (its
 * team body a block per row, or its body one thread per row); errors are
 * reported for `label`. */
opf_status opf_cuda_row_run(const char *label, const opf_op_def *op, const opf_tensor *const *inputs,
                            const opf_tensor *const *outputs, const opf_attr_value *attrs, void *stream);
/* The compute_cuda of a row whose CUDA path is its row kernel's CUDA build
 * (set when a declaration is resolved): opf_op_run_cuda recognizes it and
 * calls opf_cuda_row_run with the row instead. */
opf_status opf_cuda_row_compute(const opf_tensor *const *inputs, const opf_tensor *const *outputs,
                                const opf_attr_value *attrs, void *stream);

#endif
