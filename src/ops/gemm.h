/*
 * gemm.h — the GEMM driver behind dense and dense_grad:
 *   C = act(bias + A · B)
 * A is m x k, B is k x n, C is m x n, each with arbitrary element strides
 * (transposes are just swapped strides; packing absorbs them). bias: n
 * contiguous values or NULL.
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
} opf_gemm_args;

opf_status opf_gemm(const char *op, const opf_gemm_args *args);

#endif
