/* avx2-f64.h — the SIMD vocabulary of the templates, for AVX2 + FMA, float64. */
#include <immintrin.h>

typedef double opf_elem;
typedef __m256d opf_vec;
enum { OPF_VEC_LEN = 4, OPF_VEC_BYTES = 32 };

static inline opf_vec opf_vzero(void) { return _mm256_setzero_pd(); }
static inline opf_vec opf_vset1(opf_elem a) { return _mm256_set1_pd(a); }
static inline opf_vec opf_vloadu(const opf_elem *p) { return _mm256_loadu_pd(p); }
static inline void opf_vstoreu(opf_elem *p, opf_vec v) { _mm256_storeu_pd(p, v); }
static inline void opf_vstream(opf_elem *p, opf_vec v) { _mm256_stream_pd(p, v); }
static inline opf_vec opf_vadd(opf_vec a, opf_vec b) { return _mm256_add_pd(a, b); }
static inline opf_vec opf_vmul(opf_vec a, opf_vec b) { return _mm256_mul_pd(a, b); }
static inline opf_vec opf_vfma(opf_vec a, opf_vec b, opf_vec c) { return _mm256_fmadd_pd(a, b, c); }
static inline opf_vec opf_vrelu(opf_vec x) { return _mm256_max_pd(_mm256_setzero_pd(), x); }
static inline opf_vec opf_vrelu_mask(opf_vec dy, opf_vec x) {
    return _mm256_andnot_pd(_mm256_cmp_pd(x, _mm256_setzero_pd(), _CMP_LE_OQ), dy);
}
/* Orders non-temporal stores before later stores. */
static inline void opf_vfence(void) { _mm_sfence(); }
