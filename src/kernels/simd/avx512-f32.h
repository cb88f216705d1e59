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
/* The exponential's steps (simd/expsum.tmpl.h): a - b; c - a * b; t and k
 * in sixteenths of a k (OPF_VEXP_UNIT), so that k is the exponent step
 * with j / 16 as its fraction: 2^(j/16) for the low 4 bits j of t's bits
 * from the 16 entries of `table` (one permute), times 2^floor(k) by
 * vscalefps (one operation where integer arithmetic on the bits takes two;
 * exact while s is normal, which d >= `least` makes it); and s + s * p
 * where d is not below `least` (else 0; NaN kept). opf_vmax: a lane's
 * larger value, b's where a is NaN; opf_vany_above_or_nan: whether a lane
 * of a is above b or NaN; opf_vexp_over: +inf where d is above `most`,
 * else e. */
#define OPF_VEXP_UNIT 0x1p-4f
/* e for every d above OPF_EXP_SUM_MOST is above 2^127 or not finite
 * (vscalefps: +inf from 2^128 on; the same bits below it), NaN for NaN:
 * every float d of [80, +inf] checked in tests/c/test_ukernels.c. */
#define OPF_VEXP_OVERFLOWS 1
typedef __m512 opf_vexp_table;
static inline opf_vec opf_vsub(opf_vec a, opf_vec b) { return _mm512_sub_ps(a, b); }
static inline opf_vec opf_vfnma(opf_vec a, opf_vec b, opf_vec c) { return _mm512_fnmadd_ps(a, b, c); }
static inline opf_vexp_table opf_vexp_table_load(const float *table) { return _mm512_loadu_ps(table); }
static inline opf_vec opf_vexp_scale(opf_vec t, opf_vec k, opf_vexp_table table) {
    return _mm512_scalef_ps(_mm512_permutexvar_ps(_mm512_castps_si512(t), table), k);
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
