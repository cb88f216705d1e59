/* avx512-f32.h — the SIMD vocabulary of the templates, for AVX-512 (F), float32. */
#include <immintrin.h>

typedef float opf_elem;
typedef __m512 opf_vec;
enum { OPF_VEC_LEN = 16, OPF_VEC_BYTES = 64 };

static inline opf_vec opf_vzero(void) { return _mm512_setzero_ps(); }
static inline opf_vec opf_vset1(opf_elem a) { return _mm512_set1_ps(a); }
static inline opf_vec opf_vloadu(const opf_elem *p) { return _mm512_loadu_ps(p); }
static inline void opf_vstoreu(opf_elem *p, opf_vec v) { _mm512_storeu_ps(p, v); }
static inline void opf_vstream(opf_elem *p, opf_vec v) { _mm512_stream_ps(p, v); }
static inline opf_vec opf_vadd(opf_vec a, opf_vec b) { return _mm512_add_ps(a, b); }
static inline opf_vec opf_vmul(opf_vec a, opf_vec b) { return _mm512_mul_ps(a, b); }
static inline opf_vec opf_vfma(opf_vec a, opf_vec b, opf_vec c) { return _mm512_fmadd_ps(a, b, c); }
static inline opf_vec opf_vrelu(opf_vec x) { return _mm512_max_ps(_mm512_setzero_ps(), x); }
static inline opf_vec opf_vrelu_mask(opf_vec dy, opf_vec x) {
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_NLE_UQ), dy);
}
/* The exponential's steps (simd/expsum.tmpl.h): a - b; c - a * b; 2^(j/16)
 * for the low 4 bits j of t's bits from the 16 entries of `table`, times
 * 2^(the next 9 bits, as a signed exponent step) by integer addition; and
 * s + s * p where d is not below `least` (else 0; NaN kept). The table as
 * loaded holds entry j's bits less j << 19: t's bits shifted up by 19 add
 * the exponent step and j << 19 with it, which the entry has taken out
 * beforehand (the same bits as masking j off, one operation less a
 * vector). opf_vmax: a lane's larger value, b's where a is NaN;
 * opf_vany_above_or_nan: whether a lane of a is above b or NaN;
 * opf_vexp_over: +inf where d is above `most`, else e. */
typedef __m512 opf_vexp_table;
static inline opf_vec opf_vsub(opf_vec a, opf_vec b) { return _mm512_sub_ps(a, b); }
static inline opf_vec opf_vfnma(opf_vec a, opf_vec b, opf_vec c) { return _mm512_fnmadd_ps(a, b, c); }
static inline opf_vexp_table opf_vexp_table_load(const float *table) {
    const __m512i j = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    return _mm512_castsi512_ps(_mm512_sub_epi32(_mm512_castps_si512(_mm512_loadu_ps(table)), _mm512_slli_epi32(j, 19)));
}
static inline opf_vec opf_vexp_scale(opf_vec t, opf_vexp_table table) {
    const __m512i ti = _mm512_castps_si512(t);
    const __m512 tj = _mm512_permutexvar_ps(ti, table);
    return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(tj), _mm512_slli_epi32(ti, 19)));
}
static inline opf_vec opf_vexp_finish(opf_vec d, opf_vec s, opf_vec p, float least) {
    return _mm512_maskz_fmadd_ps(_mm512_cmp_ps_mask(d, _mm512_set1_ps(least), _CMP_NLT_UQ), s, p, s);
}
static inline opf_vec opf_vmax(opf_vec a, opf_vec b) { return _mm512_max_ps(a, b); }
static inline int opf_vany_above_or_nan(opf_vec a, float b) {
    return _mm512_cmp_ps_mask(a, _mm512_set1_ps(b), _CMP_NLE_UQ) != 0;
}
static inline opf_vec opf_vexp_over(opf_vec d, opf_vec e, float most) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(d, _mm512_set1_ps(most), _CMP_GT_OQ), e,
                                _mm512_set1_ps(__builtin_inff()));
}
/* Orders non-temporal stores before later stores. */
static inline void opf_vfence(void) { _mm_sfence(); }
