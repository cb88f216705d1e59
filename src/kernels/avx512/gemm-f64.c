/* gemm-f64.c — avx512 GEMM micro-kernel, f64, 8x16 (see simd/gemm.tmpl.h). */
#include "kernels.h"
#include "simd/avx512-f64.h"

#define OPF_MR 8
#define OPF_NR_VECS 2
#define OPF_GEMM_NAME opf_f64_gemm_ukernel_8x16__avx512
#include "simd/gemm.tmpl.h"
