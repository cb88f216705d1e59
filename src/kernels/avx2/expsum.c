/* expsum.c — softmax's exponentials and their partial sums, 8 floats a
 * vector (see expsum.inc): the AVX-512 kernel's arithmetic, lane for lane. */
#include <immintrin.h>
#include <stdint.h>

#include "kernels.h"

static inline __m256 opf_exp8(__m256 d, __m256 lo, __m256 hi) {
    const __m256 t = _mm256_fmadd_ps(d, _mm256_set1_ps(OPF_EXP_SUM_LOG2E_16), _mm256_set1_ps(OPF_EXP_SUM_ROUND));
    const __m256 k = _mm256_sub_ps(t, _mm256_set1_ps(OPF_EXP_SUM_ROUND));
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(OPF_EXP_SUM_LN2_16_HI), d);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(OPF_EXP_SUM_LN2_16_LO), r);
    const __m256 q = _mm256_fmadd_ps(_mm256_set1_ps(OPF_EXP_SUM_C3), r, _mm256_set1_ps(0.5f));
    const __m256 p = _mm256_fmadd_ps(_mm256_mul_ps(r, r), q, r);
    const __m256i ti = _mm256_castps_si256(t);
    /* 2^(j/16) for the low 4 bits j of k: both halves of the table, then bit 3 picks */
    const __m256 tj = _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo, ti), _mm256_permutevar8x32_ps(hi, ti),
                                       _mm256_castsi256_ps(_mm256_slli_epi32(ti, 28)));
    const __m256i up = _mm256_and_si256(_mm256_slli_epi32(ti, 19), _mm256_set1_epi32((int)0xff800000u));
    const __m256 s = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(tj), up));
    const __m256 keep = _mm256_cmp_ps(d, _mm256_set1_ps(OPF_EXP_SUM_LEAST), _CMP_NLT_UQ);
    const __m256 e = _mm256_and_ps(keep, _mm256_fmadd_ps(s, p, s));
    const __m256 over = _mm256_cmp_ps(d, _mm256_set1_ps(OPF_EXP_SUM_MOST), _CMP_GT_OQ);
    return _mm256_blendv_ps(e, _mm256_set1_ps(__builtin_inff()), over);
}

int64_t opf_exp_sum_ukernel__avx2(int64_t n, const float *x, float shift, float *y, int64_t ahead, float *acc) {
    const __m256 lo = _mm256_loadu_ps(opf_exp_sum_table), hi = _mm256_loadu_ps(opf_exp_sum_table + 8);
    const __m256 sv = _mm256_set1_ps(shift);
    __m256 a[4];
    for (int j = 0; j < 4; j++) {
        a[j] = _mm256_loadu_ps(acc + 8 * j);
    }
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const char *pf = (const char *)(x + i) + ahead;
        _mm_prefetch(pf, _MM_HINT_T0);
        _mm_prefetch(pf + 64, _MM_HINT_T0);
        for (int j = 0; j < 4; j++) {
            const __m256 e = opf_exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8 * j), sv), lo, hi);
            if (y != NULL) {
                _mm256_storeu_ps(y + i + 8 * j, e);
            }
            a[j] = _mm256_add_ps(a[j], e);
        }
    }
    for (int j = 0; j < 4; j++) {
        _mm256_storeu_ps(acc + 8 * j, a[j]);
    }
    return i;
}
