/* eltwise-f64.c — avx2 elementwise kernels, f64 (see simd/eltwise.tmpl.h). */
#include "kernels.h"
#include "simd/avx2-f64.h"

#define OPF_PARAMS opf_f64_params
#define OPF_UNROLL 4
#define OPF_NAME(op) opf_f64_##op##_ukernel__avx2_u16
#include "simd/eltwise.tmpl.h"
