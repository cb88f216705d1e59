/*
 * Scalar reference GEMM micro-kernel (MR = NR = 1), written once for both
 * float dtypes; included by gemm.c with OPF_T and OPF_NAME defined. See
 * kernels.h for the contract.
 */
void OPF_NAME(size_t k, const OPF_T *a, int64_t rsa, int64_t csa, const OPF_T *b, int64_t ldb, OPF_T *c, int64_t rsc,
              int64_t csc, size_t mr, size_t nr, const OPF_T *bias, int accumulate, int apply_relu) {
    (void)rsc;
    (void)csc;
    (void)rsa;
    if (mr == 0 || nr == 0) {
        return;
    }
    OPF_T acc = 0;
    for (size_t p = 0; p < k; p++) {
        acc += a[(int64_t)p * csa] * b[(int64_t)p * ldb];
    }
    OPF_T v = accumulate ? c[0] + acc : (bias != NULL ? bias[0] : (OPF_T)0) + acc;
    c[0] = apply_relu && v < 0 ? (OPF_T)0 : v;
}
