/* gemm-f64.c — avx2 GEMM micro-kernel, f64, 6x8 (see simd/gemm.tmpl.h). */
#include "kernels.h"
#include "simd/avx2-f64.h"

#define OPF_MR 6
#define OPF_NR_VECS 2
#define OPF_GEMM_NAME opf_f64_gemm_ukernel_6x8__avx2
#include "simd/gemm.tmpl.h"
