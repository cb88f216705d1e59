/* avx512-f64.h — the SIMD vocabulary of the templates, for AVX-512 (F), float64. */
#include <immintrin.h>

typedef double opf_elem;
typedef __m512d opf_vec;
enum { OPF_VEC_LEN = 8, OPF_VEC_BYTES = 64 };

static inline opf_vec opf_vzero(void) { return _mm512_setzero_pd(); }
static inline opf_vec opf_vset1(opf_elem a) { return _mm512_set1_pd(a); }
static inline opf_vec opf_vloadu(const opf_elem *p) { return _mm512_loadu_pd(p); }
static inline void opf_vstoreu(opf_elem *p, opf_vec v) { _mm512_storeu_pd(p, v); }
static inline void opf_vstream(opf_elem *p, opf_vec v) { _mm512_stream_pd(p, v); }
static inline opf_vec opf_vadd(opf_vec a, opf_vec b) { return _mm512_add_pd(a, b); }
static inline opf_vec opf_vmul(opf_vec a, opf_vec b) { return _mm512_mul_pd(a, b); }
static inline opf_vec opf_vfma(opf_vec a, opf_vec b, opf_vec c) { return _mm512_fmadd_pd(a, b, c); }
static inline opf_vec opf_vrelu(opf_vec x) { return _mm512_max_pd(_mm512_setzero_pd(), x); }
static inline opf_vec opf_vrelu_mask(opf_vec dy, opf_vec x) {
    return _mm512_maskz_mov_pd(_mm512_cmp_pd_mask(x, _mm512_setzero_pd(), _CMP_NLE_UQ), dy);
}
/* Orders non-temporal stores before later stores. */
static inline void opf_vfence(void) { _mm_sfence(); }
