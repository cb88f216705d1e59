/* avx2-f32.h — the SIMD vocabulary of the templates, for AVX2 + FMA, float32. */
#include <immintrin.h>

typedef float opf_elem;
typedef __m256 opf_vec;
enum { OPF_VEC_LEN = 8, OPF_VEC_BYTES = 32 };

static inline opf_vec opf_vzero(void) { return _mm256_setzero_ps(); }
static inline opf_vec opf_vset1(opf_elem a) { return _mm256_set1_ps(a); }
static inline opf_vec opf_vloadu(const opf_elem *p) { return _mm256_loadu_ps(p); }
static inline void opf_vstoreu(opf_elem *p, opf_vec v) { _mm256_storeu_ps(p, v); }
/* p aligned to OPF_VEC_BYTES. */
static inline void opf_vstream(opf_elem *p, opf_vec v) { _mm256_stream_ps(p, v); }
static inline opf_vec opf_vadd(opf_vec a, opf_vec b) { return _mm256_add_ps(a, b); }
static inline opf_vec opf_vmul(opf_vec a, opf_vec b) { return _mm256_mul_ps(a, b); }
static inline opf_vec opf_vfma(opf_vec a, opf_vec b, opf_vec c) { return _mm256_fmadd_ps(a, b, c); }
/* x < 0 ? 0 : x; NaN stays NaN (maxps returns its second operand on NaN). */
static inline opf_vec opf_vrelu(opf_vec x) { return _mm256_max_ps(_mm256_setzero_ps(), x); }
/* x <= 0 ? 0 : dy; a NaN x passes dy (ordered compare is false on NaN). */
static inline opf_vec opf_vrelu_mask(opf_vec dy, opf_vec x) {
    return _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LE_OQ), dy);
}
/* The exponential's steps (simd/expsum.tmpl.h; avx512-f32.h says what
 * each does): t and k in whole k; the 16-entry table as two halves,
 * permuted each, bit 3 of j choosing; the power of two added to the
 * entry's exponent bits (t's bits shifted up by 19 add the exponent step
 * and j << 19 with it, which each entry as loaded has taken out
 * beforehand: the same bits as masking j off, one operation less). */
#define OPF_VEXP_UNIT 1.0f
/* (the exponent bits added wrap: e above OPF_EXP_SUM_MOST is found by a compare, opf_vexp_over) */
#define OPF_VEXP_OVERFLOWS 0
typedef struct opf_vexp_table {
    __m256 lo, hi;
} opf_vexp_table;
static inline opf_vec opf_vsub(opf_vec a, opf_vec b) { return _mm256_sub_ps(a, b); }
static inline opf_vec opf_vfnma(opf_vec a, opf_vec b, opf_vec c) { return _mm256_fnmadd_ps(a, b, c); }
static inline opf_vexp_table opf_vexp_table_load(const float *table) {
    const __m256i j = _mm256_slli_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), 19);
    const __m256i eight = _mm256_set1_epi32(8 << 19);
    const __m256i lo = _mm256_sub_epi32(_mm256_castps_si256(_mm256_loadu_ps(table)), j);
    const __m256i hi = _mm256_sub_epi32(_mm256_castps_si256(_mm256_loadu_ps(table + 8)), _mm256_add_epi32(j, eight));
    return (opf_vexp_table){_mm256_castsi256_ps(lo), _mm256_castsi256_ps(hi)};
}
static inline opf_vec opf_vexp_scale(opf_vec t, opf_vec k, opf_vexp_table table) {
    (void)k;
    const __m256i ti = _mm256_castps_si256(t);
    const __m256 tj = _mm256_blendv_ps(_mm256_permutevar8x32_ps(table.lo, ti), _mm256_permutevar8x32_ps(table.hi, ti),
                                       _mm256_castsi256_ps(_mm256_slli_epi32(ti, 28)));
    return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(tj), _mm256_slli_epi32(ti, 19)));
}
static inline opf_vec opf_vexp_finish(opf_vec d, opf_vec s, opf_vec p, float least) {
    return _mm256_and_ps(_mm256_cmp_ps(d, _mm256_set1_ps(least), _CMP_NLT_UQ), _mm256_fmadd_ps(s, p, s));
}
/* The larger of a and b per lane, b where a is NaN. */
static inline opf_vec opf_vmax(opf_vec a, opf_vec b) { return _mm256_max_ps(a, b); }
/* Whether any lane of a is above b or NaN. */
static inline int opf_vany_above_or_nan(opf_vec a, float b) {
    return _mm256_movemask_ps(_mm256_cmp_ps(a, _mm256_set1_ps(b), _CMP_NLE_UQ)) != 0;
}
/* +inf where d is above `most`, else e. */
static inline opf_vec opf_vexp_over(opf_vec d, opf_vec e, float most) {
    return _mm256_blendv_ps(e, _mm256_set1_ps(__builtin_inff()), _mm256_cmp_ps(d, _mm256_set1_ps(most), _CMP_GT_OQ));
}
/* Orders non-temporal stores before later stores. */
static inline void opf_vfence(void) { _mm_sfence(); }
