/*
 * gemm.h — the GEMM driver behind dense, dense_grad and opf_matmul:
 *   C = epilogue(act(bias + A · B))
 * A is m x k, B is k x n, C is m x n, each with arbitrary element strides
 * (transposes are just swapped strides; packing absorbs them). bias: n
 * contiguous values or NULL. epilogue: NULL, or an authored elementwise
 * kernel's build (one input, one output) run in place on C's blocks while
 * they are in cache, with epilogue_attrs.
 */
#ifndef OPF_OPS_GEMM_H
#define OPF_OPS_GEMM_H

#include <stdint.h>

#include "opforge.h"

typedef struct opf_matrix {
    const void *data;
    int64_t rs, cs; /* row and column strides, in elements */
} opf_matrix;

typedef struct opf_gemm_args {
    opf_dtype dtype;
    int64_t m, n, k;
    opf_matrix a, b;
    void *c;
    int64_t rsc, csc;
    const void *bias;
    int relu;
    opf_eltwise_fn epilogue;
    const opf_attr_value *epilogue_attrs;
} opf_gemm_args;

opf_status opf_gemm(const char *op, const opf_gemm_args *args);

#endif
