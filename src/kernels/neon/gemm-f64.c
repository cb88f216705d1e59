/* gemm-f64.c — neon GEMM micro-kernel, f64, 6x8 (see simd/gemm.tmpl.h).
 * 6 rows x 4 vectors: 24 accumulators, 4 registers for a k step of B. Per k
 * step 6 loads of A and 4 of B feed 24 FMAs, where 8x6 would take 8 + 3
 * (BLIS's armv8a dgemm shape). */
#include "kernels.h"
#include "simd/neon-f64.h"

#define OPF_MR 6
#define OPF_NR_VECS 4
#define OPF_GEMM_NAME opf_f64_gemm_ukernel_6x8__neon
#include "simd/gemm.tmpl.h"
