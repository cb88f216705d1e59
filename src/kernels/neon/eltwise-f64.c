/* eltwise-f64.c — neon elementwise kernels, f64 (see simd/eltwise.tmpl.h). */
#include "kernels.h"
#include "simd/neon-f64.h"

#define OPF_PARAMS opf_f64_params
#define OPF_UNROLL 4
#define OPF_NAME(op) opf_f64_##op##_ukernel__neon_u8
#include "simd/eltwise.tmpl.h"
