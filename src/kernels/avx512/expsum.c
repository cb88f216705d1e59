/* expsum.c — softmax's exponentials and their partial sums, 16 floats a
 * vector (see expsum.inc; the function is opf_exp_sum's, opforge.h). */
#include <immintrin.h>
#include <stdint.h>

#include "kernels.h"

/* e = exp(d) for the 16 d of v (OPF_EXP_SUM_* constants: kernels.h). */
static inline __m512 opf_exp16(__m512 d, __m512 table) {
    const __m512 t = _mm512_fmadd_ps(d, _mm512_set1_ps(OPF_EXP_SUM_LOG2E_16), _mm512_set1_ps(OPF_EXP_SUM_ROUND));
    const __m512 k = _mm512_sub_ps(t, _mm512_set1_ps(OPF_EXP_SUM_ROUND));
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(OPF_EXP_SUM_LN2_16_HI), d);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(OPF_EXP_SUM_LN2_16_LO), r);
    const __m512 q = _mm512_fmadd_ps(_mm512_set1_ps(OPF_EXP_SUM_C3), r, _mm512_set1_ps(0.5f));
    const __m512 p = _mm512_fmadd_ps(_mm512_mul_ps(r, r), q, r);
    const __m512i ti = _mm512_castps_si512(t);
    const __m512 tj = _mm512_permutexvar_ps(ti, table); /* 2^(j/16): the low 4 bits of k */
    const __m512i up = _mm512_and_si512(_mm512_slli_epi32(ti, 19), _mm512_set1_epi32((int)0xff800000u));
    const __m512 s = _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(tj), up)); /* times 2^(k >> 4) */
    const __mmask16 keep = _mm512_cmp_ps_mask(d, _mm512_set1_ps(OPF_EXP_SUM_LEAST), _CMP_NLT_UQ);
    const __m512 e = _mm512_maskz_fmadd_ps(keep, s, p, s);
    const __mmask16 over = _mm512_cmp_ps_mask(d, _mm512_set1_ps(OPF_EXP_SUM_MOST), _CMP_GT_OQ);
    return _mm512_mask_blend_ps(over, e, _mm512_set1_ps(__builtin_inff()));
}

int64_t opf_exp_sum_ukernel__avx512(int64_t n, const float *x, float shift, float *y, int64_t ahead, float *acc) {
    const __m512 table = _mm512_loadu_ps(opf_exp_sum_table);
    const __m512 sv = _mm512_set1_ps(shift);
    __m512 a0 = _mm512_loadu_ps(acc), a1 = _mm512_loadu_ps(acc + 16);
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const char *pf = (const char *)(x + i) + ahead;
        _mm_prefetch(pf, _MM_HINT_T0);
        _mm_prefetch(pf + 64, _MM_HINT_T0);
        const __m512 e0 = opf_exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), sv), table);
        const __m512 e1 = opf_exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), sv), table);
        if (y != NULL) {
            _mm512_storeu_ps(y + i, e0);
            _mm512_storeu_ps(y + i + 16, e1);
        }
        a0 = _mm512_add_ps(a0, e0);
        a1 = _mm512_add_ps(a1, e1);
    }
    _mm512_storeu_ps(acc, a0);
    _mm512_storeu_ps(acc + 16, a1);
    return i;
}
