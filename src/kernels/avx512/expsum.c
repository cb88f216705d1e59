/* expsum.c — avx512 exponential-and-sum kernels (the blocks, and the blocks below a limit in one
 * pass) and row-maximum kernel, f32 (see simd/expsum.tmpl.h, simd/maxstream.tmpl.h). */
#include "kernels.h"
#include "simd/avx512-f32.h"

#define OPF_EXP_SUM_NAME opf_exp_sum_ukernel__avx512
#define OPF_EXP_SUM_BELOW_NAME opf_exp_sum_below_ukernel__avx512
#include "simd/expsum.tmpl.h"

#define OPF_MAX_STREAM_NAME opf_max_stream_ukernel__avx512
#include "simd/maxstream.tmpl.h"
