/* gemm-f32.c — neon GEMM micro-kernel, f32, 8x12 (see simd/gemm.tmpl.h).
 * 8 rows x 3 vectors: 24 of the 32 vector registers accumulate, 3 hold a k
 * step of B, the rest the broadcast values of A (BLIS's armv8a sgemm shape). */
#include "kernels.h"
#include "simd/neon-f32.h"

#define OPF_MR 8
#define OPF_NR_VECS 3
#define OPF_GEMM_NAME opf_f32_gemm_ukernel_8x12__neon
#include "simd/gemm.tmpl.h"
