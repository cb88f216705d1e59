/* eltwise-f64.c — avx512 elementwise kernels, f64 (see simd/eltwise.tmpl.h). */
#include "kernels.h"
#include "simd/avx512-f64.h"

#define OPF_PARAMS opf_f64_params
#define OPF_UNROLL 4
#define OPF_NAME(op) opf_f64_##op##_ukernel__avx512_u32
#include "simd/eltwise.tmpl.h"
