/*
 * Portable register-blocked GEMM micro-kernel: an OPF_MR x OPF_NR block of
 * accumulators updated with one rank-1 product per k step; the compiler keeps
 * the block in vector registers. Bias and ReLU are applied in the store.
 * Included by gemm.c with OPF_T, OPF_MR, OPF_NR and OPF_NAME. Contract in
 * kernels.h.
 */
void OPF_NAME(size_t k, const OPF_T *a, int64_t rsa, int64_t csa, const OPF_T *b, int64_t ldb, OPF_T *c, int64_t rsc,
              int64_t csc, size_t mr, size_t nr, const OPF_T *bias, int accumulate, int apply_relu) {
    OPF_T acc[OPF_MR][OPF_NR] = {{0}};
    for (size_t p = 0; p < k; p++) {
        const OPF_T *ap = a + (int64_t)p * csa;
        const OPF_T *bp = b + (int64_t)p * ldb;
        for (size_t i = 0; i < OPF_MR; i++) {
            for (size_t j = 0; j < OPF_NR; j++) {
                acc[i][j] += ap[(int64_t)i * rsa] * bp[j];
            }
        }
    }
    for (size_t i = 0; i < mr; i++) {
        OPF_T *row = c + (int64_t)i * rsc;
        for (size_t j = 0; j < nr; j++) {
            OPF_T *dst = row + (int64_t)j * csc;
            OPF_T v = accumulate ? *dst + acc[i][j] : (bias != NULL ? bias[j] : (OPF_T)0) + acc[i][j];
            *dst = apply_relu && v < 0 ? (OPF_T)0 : v;
        }
    }
}
