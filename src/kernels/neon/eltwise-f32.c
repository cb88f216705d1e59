/* eltwise-f32.c — neon elementwise kernels, f32 (see simd/eltwise.tmpl.h). */
#include "kernels.h"
#include "simd/neon-f32.h"

#define OPF_PARAMS opf_f32_params
#define OPF_UNROLL 4
#define OPF_NAME(op) opf_f32_##op##_ukernel__neon_u16
#include "simd/eltwise.tmpl.h"
