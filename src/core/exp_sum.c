/* exp_sum.c — opf_exp_sum_blocks_f32, opf_exp_sum_blocks_below_f32 and
 * opf_max_blocks_f32: the dispatch to the ISA's exponential-and-sum kernels
 * and row-maximum kernel (kernels.h, expsum.inc, expsumbelow.inc,
 * maxstream.inc). */
#include "kernels.h"

/* 2^(j / 16), j = 0 .. 15, each rounded to the nearest float. */
const float opf_exp_sum_table[16] = {
    0x1.000000p+0f, 0x1.0b5586p+0f, 0x1.172b84p+0f, 0x1.2387a6p+0f, 0x1.306fe0p+0f, 0x1.3dea64p+0f,
    0x1.4bfdaep+0f, 0x1.5ab07ep+0f, 0x1.6a09e6p+0f, 0x1.7a1148p+0f, 0x1.8ace54p+0f, 0x1.9c4918p+0f,
    0x1.ae89fap+0f, 0x1.c199bep+0f, 0x1.d5818ep+0f, 0x1.ea4afap+0f,
};

int64_t opf_exp_sum_blocks_bounded_f32(int64_t n, const float *x, float shift, float bound, float *y, int64_t ahead,
                                       float acc[32]) {
    if (n < 32 || x == NULL || acc == NULL) {
        return 0;
    }
    const opf_exp_sum_ukernel fn = opf_kernels_get()->exp_sum_f32;
    return fn != NULL ? fn(n, x, shift, bound, y, ahead, acc) : 0;
}

int64_t opf_exp_sum_blocks_f32(int64_t n, const float *x, float shift, float *y, int64_t ahead, float acc[32]) {
    return opf_exp_sum_blocks_bounded_f32(n, x, shift, __builtin_inff(), y, ahead, acc);
}

int64_t opf_exp_sum_blocks_below_f32(int64_t n, const float *x, float shift, float limit, float *y, int64_t ahead,
                                     float acc[32], opf_earlier_row *earlier) {
    if (n < 32 || x == NULL || acc == NULL) {
        return 0;
    }
    const opf_exp_sum_below_ukernel fn = opf_kernels_get()->exp_sum_below_f32;
    return fn != NULL ? fn(n, x, shift, limit, y, ahead, acc, earlier) : 0;
}

int64_t opf_max_blocks_f32(int64_t n, const float *x, float m[64], opf_earlier_row *earlier) {
    if (n < 64 || x == NULL || m == NULL) {
        return 0;
    }
    const opf_max_stream_ukernel fn = opf_kernels_get()->max_stream_f32;
    return fn != NULL ? fn(n, x, m, earlier) : 0;
}
