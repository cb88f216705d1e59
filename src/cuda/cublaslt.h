/*
 * cublaslt.h — the part of cuBLASLt that dense uses, loaded at run time.
 *
 * libopforge never links libcublasLt: it must load on machines without any
 * CUDA library. The first dense call on a GPU dlopen()s it (see cublaslt.c
 * for the search order, including the OPFORGE_CUBLASLT override) and looks up
 * the functions below. The types and constants are declared here rather than
 * taken from <cublasLt.h>, so building needs only nvcc and the CUDA runtime;
 * cublaslt.c checks every value against <cublasLt.h> at compile time when
 * that header is installed.
 *
 * Global state (documented in docs/gpu.md): the library handle and one
 * cuBLASLt handle per device, created on first use under a lock and kept for
 * the life of the process (cublasLtCreate costs far more than a GEMM call).
 */
#ifndef OPF_CUDA_CUBLASLT_H
#define OPF_CUDA_CUBLASLT_H

#include <stddef.h>
#include <stdint.h>

#include "opforge.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The cuBLASLt major version these declarations follow (libcublasLt.so.13). */
#define OPF_LT_MAJOR 13

typedef int opf_lt_status;                    /* cublasStatus_t */
typedef struct opf_lt_context *opf_lt_handle; /* cublasLtHandle_t */
typedef void *opf_lt_desc;                    /* cublasLtMatmulDesc_t */
typedef void *opf_lt_layout;                  /* cublasLtMatrixLayout_t */
typedef void *opf_lt_pref;                    /* cublasLtMatmulPreference_t */

typedef struct opf_lt_algo { /* cublasLtMatmulAlgo_t */
    uint64_t data[8];
} opf_lt_algo;

typedef struct opf_lt_heuristic { /* cublasLtMatmulHeuristicResult_t */
    opf_lt_algo algo;
    size_t workspace_size;
    opf_lt_status state;
    float waves_count;
    int reserved[4];
} opf_lt_heuristic;

enum {
    OPF_LT_SUCCESS = 0,        /* CUBLAS_STATUS_SUCCESS */
    OPF_LT_NOT_SUPPORTED = 15, /* CUBLAS_STATUS_NOT_SUPPORTED */
    OPF_LT_OP_N = 0,           /* CUBLAS_OP_N */
    OPF_LT_OP_T = 1,           /* CUBLAS_OP_T */
    OPF_LT_R_32F = 0,          /* CUDA_R_32F */
    OPF_LT_R_64F = 1,          /* CUDA_R_64F */
    OPF_LT_COMPUTE_32F = 68,   /* CUBLAS_COMPUTE_32F: full fp32, no TF32 */
    OPF_LT_COMPUTE_64F = 70,   /* CUBLAS_COMPUTE_64F */
    /* cublasLtMatmulDescAttributes_t */
    OPF_LT_DESC_TRANSA = 3,
    OPF_LT_DESC_TRANSB = 4,
    OPF_LT_DESC_EPILOGUE = 7,
    OPF_LT_DESC_BIAS_POINTER = 8,
    /* cublasLtEpilogue_t */
    OPF_LT_EPILOGUE_DEFAULT = 1,
    OPF_LT_EPILOGUE_RELU = 2,
    OPF_LT_EPILOGUE_BIAS = 4,
    OPF_LT_EPILOGUE_RELU_BIAS = 6,
    /* cublasLtMatmulPreferenceAttributes_t */
    OPF_LT_PREF_MAX_WORKSPACE_BYTES = 1,
    OPF_LT_PREF_MIN_ALIGNMENT_A_BYTES = 5,
    OPF_LT_PREF_MIN_ALIGNMENT_B_BYTES = 6,
    OPF_LT_PREF_MIN_ALIGNMENT_C_BYTES = 7,
    OPF_LT_PREF_MIN_ALIGNMENT_D_BYTES = 8
};

/* The functions, as looked up with dlsym (enum arguments are passed as int,
 * which is how the C ABI passes them). */
typedef struct opf_lt_api {
    opf_lt_status (*create)(opf_lt_handle *handle);
    const char *(*status_string)(opf_lt_status status);
    size_t (*version)(void);
    opf_lt_status (*desc_create)(opf_lt_desc *desc, int compute_type, int scale_type);
    opf_lt_status (*desc_destroy)(opf_lt_desc desc);
    opf_lt_status (*desc_set)(opf_lt_desc desc, int attr, const void *buf, size_t size);
    opf_lt_status (*layout_create)(opf_lt_layout *layout, int type, uint64_t rows, uint64_t cols, int64_t ld);
    opf_lt_status (*layout_destroy)(opf_lt_layout layout);
    opf_lt_status (*pref_create)(opf_lt_pref *pref);
    opf_lt_status (*pref_destroy)(opf_lt_pref pref);
    opf_lt_status (*pref_set)(opf_lt_pref pref, int attr, const void *buf, size_t size);
    opf_lt_status (*heuristic)(opf_lt_handle handle, opf_lt_desc desc, opf_lt_layout a, opf_lt_layout b,
                               opf_lt_layout c, opf_lt_layout d, opf_lt_pref pref, int requested,
                               opf_lt_heuristic *results, int *returned);
    opf_lt_status (*matmul)(opf_lt_handle handle, opf_lt_desc desc, const void *alpha, const void *a, opf_lt_layout la,
                            const void *b, opf_lt_layout lb, const void *beta, const void *c, opf_lt_layout lc, void *d,
                            opf_lt_layout ld, const opf_lt_algo *algo, void *workspace, size_t workspace_bytes,
                            void *stream);
} opf_lt_api;

/* The loaded API and the cuBLASLt handle of `device`, which must be the
 * current device. Loads the library and creates the handle on first use
 * (thread-safe). On failure returns OPF_E_UNSUPPORTED (library not found or
 * of another major version) or OPF_E_INTERNAL, with the reason as the
 * thread's error message for op `op`. */
opf_status opf_cublaslt_get(const char *op, int device, const opf_lt_api **api, opf_lt_handle *handle);

/* "CUBLAS_STATUS_..." for a status (works before the library is loaded). */
const char *opf_cublaslt_status_name(opf_lt_status status);

#ifdef __cplusplus
}
#endif

#endif
