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
/* Orders non-temporal stores before later stores. */
static inline void opf_vfence(void) { _mm_sfence(); }
