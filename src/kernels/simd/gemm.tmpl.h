/*
 * SIMD GEMM micro-kernel, written once over the vocabulary of a simd/<isa>-<dtype>.h
 * header. Included by a kernel file with OPF_MR (rows), OPF_NR_VECS (vectors
 * per row; NR = OPF_NR_VECS * OPF_VEC_LEN) and OPF_GEMM_NAME defined.
 *
 * An MR x NR block of accumulators lives in vector registers; each k step
 * loads NR values of packed B and broadcasts MR values of packed A into MR x
 * NR_VECS fused multiply-adds. The store applies bias (first k-block) or
 * accumulates (later ones), then ReLU: full tiles with unit column stride are
 * stored as vectors, edge tiles through a small buffer. Contract in kernels.h.
 *
 * Every loop over the MR rows is unrolled completely (#pragma GCC unroll, for
 * MR <= 16) before GCC's scalar replacement of aggregates, so that acc[][] is
 * registers only: with one of them left rolled, acc[][] stays an array in
 * memory and GCC 12 for AArch64 stores every accumulator on every k step.
 */
enum { OPF_NR = OPF_NR_VECS * OPF_VEC_LEN };

/* The k loop, A's value (i, p) at a[p * CSA + i * RSA]: once with a packed
 * panel's strides as constants, where every broadcast of A addresses its
 * value by a constant offset from the step's, and once with the caller's
 * (A in place). With both strides unknown, each of the MR rows needs an
 * index register: GCC keeps the ones it has no room for in vector registers
 * and moves them back each step, two more operations a step on the ports
 * that the FMAs use. */
#define OPF_GEMM_K_LOOP(RSA, CSA)                                                                                      \
    {                                                                                                                  \
        const opf_elem *ap = a, *bp = b;                                                                               \
        _Pragma("GCC unroll 4") for (size_t p = 0; p < k; p++, ap += (CSA), bp += ldb) {                               \
            opf_vec bv[OPF_NR_VECS];                                                                                   \
            for (size_t j = 0; j < OPF_NR_VECS; j++) {                                                                 \
                bv[j] = opf_vloadu(bp + j * OPF_VEC_LEN);                                                              \
            }                                                                                                          \
            _Pragma("GCC unroll 16") for (size_t i = 0; i < OPF_MR; i++) {                                             \
                const opf_vec av = opf_vset1(ap[(int64_t)i * (RSA)]);                                                  \
                for (size_t j = 0; j < OPF_NR_VECS; j++) {                                                             \
                    acc[i][j] = opf_vfma(av, bv[j], acc[i][j]);                                                        \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
    }

void OPF_GEMM_NAME(size_t k, const opf_elem *a, int64_t rsa, int64_t csa, const opf_elem *b, int64_t ldb, opf_elem *c,
                   int64_t rsc, int64_t csc, size_t mr, size_t nr, const opf_elem *bias, int accumulate,
                   int apply_relu) {
    /* Fetch the C tile while the k loop runs: its store (and, when
     * accumulating, its load) would otherwise wait on memory. */
    for (size_t i = 0; i < mr && nr > 0; i++) {
        __builtin_prefetch(c + (int64_t)i * rsc, 1);
        __builtin_prefetch(c + (int64_t)i * rsc + (int64_t)(nr - 1) * csc, 1);
    }
    opf_vec acc[OPF_MR][OPF_NR_VECS];
#pragma GCC unroll 16
    for (size_t i = 0; i < OPF_MR; i++) {
        for (size_t j = 0; j < OPF_NR_VECS; j++) {
            acc[i][j] = opf_vzero();
        }
    }
    if (rsa == 1 && csa == OPF_MR) { /* a packed panel: every A value at a constant offset from its step's */
        OPF_GEMM_K_LOOP(1, OPF_MR)
    } else {
        OPF_GEMM_K_LOOP(rsa, csa)
    }
    if (mr == OPF_MR && nr == OPF_NR && csc == 1) {
#pragma GCC unroll 16
        for (size_t i = 0; i < OPF_MR; i++) {
            opf_elem *row = c + (int64_t)i * rsc;
            for (size_t j = 0; j < OPF_NR_VECS; j++) {
                opf_vec v = acc[i][j];
                if (accumulate) {
                    v = opf_vadd(opf_vloadu(row + j * OPF_VEC_LEN), v);
                } else if (bias != NULL) {
                    v = opf_vadd(opf_vloadu(bias + j * OPF_VEC_LEN), v);
                }
                opf_vstoreu(row + j * OPF_VEC_LEN, apply_relu ? opf_vrelu(v) : v);
            }
        }
        return;
    }
    opf_elem tile[OPF_MR][OPF_NR];
#pragma GCC unroll 16
    for (size_t i = 0; i < OPF_MR; i++) {
        for (size_t j = 0; j < OPF_NR_VECS; j++) {
            opf_vstoreu(&tile[i][j * OPF_VEC_LEN], acc[i][j]);
        }
    }
    for (size_t i = 0; i < mr; i++) {
        opf_elem *row = c + (int64_t)i * rsc;
        for (size_t j = 0; j < nr; j++) {
            opf_elem *dst = row + (int64_t)j * csc;
            opf_elem v = accumulate ? *dst + tile[i][j] : (bias != NULL ? bias[j] : (opf_elem)0) + tile[i][j];
            *dst = apply_relu && v < 0 ? (opf_elem)0 : v;
        }
    }
}
