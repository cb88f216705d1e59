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
/* Orders non-temporal stores before later stores. */
static inline void opf_vfence(void) { _mm_sfence(); }
