/*
 * engine.h — runs an elementwise micro-kernel over tensor views of any
 * strides, split over the thread pool.
 */
#ifndef OPF_OPS_ENGINE_H
#define OPF_OPS_ENGINE_H

#include "kernels.h"

/* The kernel slots of one elementwise op, by dtype. */
typedef struct opf_eltwise_op {
    opf_eltwise_slot f32, f64;
} opf_eltwise_op;

/* y = op(inputs...) elementwise, with the dispatch table's kernel for y's
 * dtype. Inputs have y's shape (validated by opf_op_run); any strides,
 * including zero and negative; y may alias an input exactly. alpha feeds
 * kernels that take a parameter (scale). */
opf_status opf_eltwise_run(opf_eltwise_op op, const opf_tensor *const *inputs, const opf_tensor *y, double alpha);

#endif
