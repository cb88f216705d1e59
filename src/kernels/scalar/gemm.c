/* gemm.c — scalar reference GEMM micro-kernels (see gemm.tmpl.h). */
#include "kernels.h"

#define OPF_T float
#define OPF_NAME opf_f32_gemm_ukernel_1x1__scalar
#include "gemm.tmpl.h"
#undef OPF_T
#undef OPF_NAME

#define OPF_T double
#define OPF_NAME opf_f64_gemm_ukernel_1x1__scalar
#include "gemm.tmpl.h"
