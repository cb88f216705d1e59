/*
 * Scalar reference elementwise kernels, written once for both float dtypes.
 * Included by eltwise.c with OPF_T (element type), OPF_PARAMS (params type)
 * and OPF_NAME(op) (kernel name) defined. The references define the ops'
 * semantics, including NaN handling:
 *   relu:      x < 0 ? 0 : x          (NaN stays NaN)
 *   relu_grad: x <= 0 ? 0 : dy        (a NaN x passes dy, as PyTorch does)
 *   scale:     alpha * x
 *   add:       a + b
 */
void OPF_NAME(relu)(size_t n, const OPF_T *x, OPF_T *y, const OPF_PARAMS *p) {
    (void)p;
    for (size_t i = 0; i < n; i++) {
        y[i] = x[i] < 0 ? (OPF_T)0 : x[i];
    }
}

void OPF_NAME(scale)(size_t n, const OPF_T *x, OPF_T *y, const OPF_PARAMS *p) {
    for (size_t i = 0; i < n; i++) {
        y[i] = p->alpha * x[i];
    }
}

void OPF_NAME(relu_grad)(size_t n, const OPF_T *dy, const OPF_T *x, OPF_T *dx, const OPF_PARAMS *p) {
    (void)p;
    for (size_t i = 0; i < n; i++) {
        dx[i] = x[i] <= 0 ? (OPF_T)0 : dy[i];
    }
}

void OPF_NAME(add)(size_t n, const OPF_T *a, const OPF_T *b, OPF_T *y, const OPF_PARAMS *p) {
    (void)p;
    for (size_t i = 0; i < n; i++) {
        y[i] = a[i] + b[i];
    }
}
