/* gemm-f32.c — avx2 GEMM micro-kernel, f32, 6x16 (see simd/gemm.tmpl.h). */
#include "kernels.h"
#include "simd/avx2-f32.h"

#define OPF_MR 6
#define OPF_NR_VECS 2
#define OPF_GEMM_NAME opf_f32_gemm_ukernel_6x16__avx2
#include "simd/gemm.tmpl.h"
