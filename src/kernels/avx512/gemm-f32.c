/* gemm-f32.c — avx512 GEMM micro-kernel, f32, 12x32 (see simd/gemm.tmpl.h). */
#include "kernels.h"
#include "simd/avx512-f32.h"

#define OPF_MR 12
#define OPF_NR_VECS 2
#define OPF_GEMM_NAME opf_f32_gemm_ukernel_12x32__avx512
#include "simd/gemm.tmpl.h"
