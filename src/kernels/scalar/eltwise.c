/* eltwise.c — scalar reference elementwise kernels (see eltwise.tmpl.h). */
#include "kernels.h"

#define OPF_T float
#define OPF_PARAMS opf_f32_params
#define OPF_NAME(op) opf_f32_##op##_ukernel__scalar
#include "eltwise.tmpl.h"
#undef OPF_T
#undef OPF_PARAMS
#undef OPF_NAME

#define OPF_T double
#define OPF_PARAMS opf_f64_params
#define OPF_NAME(op) opf_f64_##op##_ukernel__scalar
#include "eltwise.tmpl.h"
