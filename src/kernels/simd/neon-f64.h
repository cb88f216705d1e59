/* neon-f64.h — the SIMD vocabulary of the templates, for AArch64 Advanced SIMD, float64. */
#include <arm_neon.h>

typedef double opf_elem;
typedef float64x2_t opf_vec;
enum { OPF_VEC_LEN = 2, OPF_VEC_BYTES = 16 };

static inline opf_vec opf_vzero(void) { return vdupq_n_f64(0.0); }
static inline opf_vec opf_vset1(opf_elem a) { return vdupq_n_f64(a); }
static inline opf_vec opf_vloadu(const opf_elem *p) { return vld1q_f64(p); }
static inline void opf_vstoreu(opf_elem *p, opf_vec v) { vst1q_f64(p, v); }
/* A plain store: AArch64's STNP is only a hint, not worth an asm block. */
static inline void opf_vstream(opf_elem *p, opf_vec v) { vst1q_f64(p, v); }
static inline opf_vec opf_vadd(opf_vec a, opf_vec b) { return vaddq_f64(a, b); }
static inline opf_vec opf_vmul(opf_vec a, opf_vec b) { return vmulq_f64(a, b); }
/* a * b + c, one rounding (vfmaq_f64(c, a, b) computes c + a * b). */
static inline opf_vec opf_vfma(opf_vec a, opf_vec b, opf_vec c) { return vfmaq_f64(c, a, b); }
/* x < 0 ? 0 : x as compare + select: NaN stays NaN (the compare is false) and
 * -0.0 stays -0.0, which vmaxq_f64(0, x) would turn into +0.0. */
static inline opf_vec opf_vrelu(opf_vec x) { return vbslq_f64(vcltzq_f64(x), vdupq_n_f64(0.0), x); }
/* x <= 0 ? 0 : dy; a NaN x passes dy (the compare is false on NaN). */
static inline opf_vec opf_vrelu_mask(opf_vec dy, opf_vec x) {
    return vreinterpretq_f64_u64(vbicq_u64(vreinterpretq_u64_f64(dy), vclezq_f64(x)));
}
/* Nothing to order: opf_vstream is a plain store. */
static inline void opf_vfence(void) {}
