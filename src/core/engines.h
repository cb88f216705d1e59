/*
 * engines.h — the engines that run authored kernels (opf_eltwise_kernel,
 * opf_row_kernel) over tensor views: strides, broadcasts, in place, empty and
 * 0-d tensors, scratch, threads. opf_op_run calls them for rows that name such
 * a kernel, after validating the call.
 */
#ifndef OPF_CORE_ENGINES_H
#define OPF_CORE_ENGINES_H

#include "opforge.h"

/* The variant of an authored kernel to run at the ISA level in use. */
int opf_kernel_variant_in_use(void);

/* Runs op->eltwise elementwise: outputs[j] = f(inputs...) (or, for a row
 * without outputs, the inputs written in place). */
opf_status opf_eltwise_engine_run(const opf_op_def *op, const opf_tensor *const *inputs,
                                  const opf_tensor *const *outputs, const opf_attr_value *attrs);

/* Runs op->row once per row of the batched arguments. */
opf_status opf_row_engine_run(const opf_op_def *op, const opf_tensor *const *inputs, const opf_tensor *const *outputs,
                              const opf_attr_value *attrs);

#endif
