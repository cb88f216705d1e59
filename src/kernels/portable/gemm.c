/* gemm.c — portable GEMM micro-kernels (see gemm.tmpl.h). */
#include "kernels.h"

#define OPF_T float
#define OPF_MR 4
#define OPF_NR 8
#define OPF_NAME opf_f32_gemm_ukernel_4x8__portable
#include "gemm.tmpl.h"
#undef OPF_T
#undef OPF_MR
#undef OPF_NR
#undef OPF_NAME

#define OPF_T double
#define OPF_MR 4
#define OPF_NR 4
#define OPF_NAME opf_f64_gemm_ukernel_4x4__portable
#include "gemm.tmpl.h"
