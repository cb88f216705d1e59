/*
 * SIMD elementwise kernels, written once over the vocabulary of a simd/<isa>-<dtype>.h
 * header (opf_elem, opf_vec, opf_v* functions). Included by a kernel file of
 * one ISA and dtype with OPF_PARAMS, OPF_UNROLL (vectors per iteration) and
 * OPF_NAME(op) defined.
 *
 * Every kernel: unaligned vector loads/stores over the bulk, a scalar tail;
 * for outputs of OPF_STREAM_MIN_BYTES or more, a scalar head up to vector
 * alignment of y, then non-temporal stores (no read-for-ownership of y, which
 * would not stay in cache anyway). Exact in-place use is safe: each element is
 * read before it is written. The scalar parts use the reference semantics.
 */
#include <stdint.h>

enum { OPF_STEP = OPF_VEC_LEN * OPF_UNROLL };
#define OPF_STREAM_MIN_BYTES ((size_t)4 << 20)

typedef enum opf_eltwise_kind { OPF_RELU, OPF_SCALE, OPF_RELU_GRAD, OPF_ADD } opf_eltwise_kind;

static inline __attribute__((always_inline)) opf_vec opf_apply_v(opf_eltwise_kind kind, opf_vec a, opf_vec b,
                                                                 opf_vec alpha) {
    switch (kind) {
    case OPF_RELU: return opf_vrelu(a);
    case OPF_SCALE: return opf_vmul(alpha, a);
    case OPF_RELU_GRAD: return opf_vrelu_mask(a, b);
    case OPF_ADD: return opf_vadd(a, b);
    }
    return a;
}

static inline __attribute__((always_inline)) opf_elem opf_apply_s(opf_eltwise_kind kind, opf_elem a, opf_elem b,
                                                                  opf_elem alpha) {
    switch (kind) {
    case OPF_RELU: return a < 0 ? (opf_elem)0 : a;
    case OPF_SCALE: return alpha * a;
    case OPF_RELU_GRAD: return b <= 0 ? (opf_elem)0 : a;
    case OPF_ADD: return a + b;
    }
    return a;
}

/* y[i] = kind(a[i], b[i]) for i in [0, n); b is ignored by unary kinds. */
static inline __attribute__((always_inline)) void opf_eltwise_loop(opf_eltwise_kind kind, size_t n, const opf_elem *a,
                                                                   const opf_elem *b, opf_elem *y, opf_elem alpha) {
    const opf_vec valpha = opf_vset1(alpha);
    size_t i = 0;
    if (n * sizeof(opf_elem) >= OPF_STREAM_MIN_BYTES) {
        for (; i < n && (uintptr_t)(y + i) % OPF_VEC_BYTES != 0; i++) {
            y[i] = opf_apply_s(kind, a[i], b[i], alpha);
        }
        for (; i + OPF_STEP <= n; i += OPF_STEP) {
            opf_vec v[OPF_UNROLL];
            for (size_t u = 0; u < OPF_UNROLL; u++) {
                v[u] =
                    opf_apply_v(kind, opf_vloadu(a + i + u * OPF_VEC_LEN), opf_vloadu(b + i + u * OPF_VEC_LEN), valpha);
            }
            for (size_t u = 0; u < OPF_UNROLL; u++) {
                opf_vstream(y + i + u * OPF_VEC_LEN, v[u]);
            }
        }
        opf_vfence();
    }
    for (; i + OPF_STEP <= n; i += OPF_STEP) {
        opf_vec v[OPF_UNROLL];
        for (size_t u = 0; u < OPF_UNROLL; u++) {
            v[u] = opf_apply_v(kind, opf_vloadu(a + i + u * OPF_VEC_LEN), opf_vloadu(b + i + u * OPF_VEC_LEN), valpha);
        }
        for (size_t u = 0; u < OPF_UNROLL; u++) {
            opf_vstoreu(y + i + u * OPF_VEC_LEN, v[u]);
        }
    }
    for (; i + OPF_VEC_LEN <= n; i += OPF_VEC_LEN) {
        opf_vstoreu(y + i, opf_apply_v(kind, opf_vloadu(a + i), opf_vloadu(b + i), valpha));
    }
    for (; i < n; i++) {
        y[i] = opf_apply_s(kind, a[i], b[i], alpha);
    }
}

void OPF_NAME(relu)(size_t n, const opf_elem *x, opf_elem *y, const OPF_PARAMS *p) {
    (void)p;
    opf_eltwise_loop(OPF_RELU, n, x, x, y, 0);
}

void OPF_NAME(scale)(size_t n, const opf_elem *x, opf_elem *y, const OPF_PARAMS *p) {
    opf_eltwise_loop(OPF_SCALE, n, x, x, y, p->alpha);
}

void OPF_NAME(relu_grad)(size_t n, const opf_elem *dy, const opf_elem *x, opf_elem *dx, const OPF_PARAMS *p) {
    (void)p;
    opf_eltwise_loop(OPF_RELU_GRAD, n, dy, x, dx, 0);
}

void OPF_NAME(add)(size_t n, const opf_elem *a, const opf_elem *b, opf_elem *y, const OPF_PARAMS *p) {
    (void)p;
    opf_eltwise_loop(OPF_ADD, n, a, b, y, 0);
}
