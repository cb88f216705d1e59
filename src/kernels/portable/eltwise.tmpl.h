/*
 * Portable elementwise kernels: blocks of OPF_U elements loaded into a local
 * array, computed, then stored, which the compiler turns into vector code for
 * the base ISA (SSE2 on x86-64, NEON on aarch64). Loading a whole block
 * before storing keeps exact in-place use (y == x) correct without restrict.
 * Included by eltwise.c with OPF_T, OPF_PARAMS, OPF_U and OPF_NAME(op).
 * Semantics are those of the scalar references.
 */
void OPF_NAME(relu)(size_t n, const OPF_T *x, OPF_T *y, const OPF_PARAMS *p) {
    (void)p;
    size_t i = 0;
    for (; i + OPF_U <= n; i += OPF_U) {
        OPF_T v[OPF_U];
        for (size_t j = 0; j < OPF_U; j++) {
            v[j] = x[i + j] < 0 ? (OPF_T)0 : x[i + j];
        }
        for (size_t j = 0; j < OPF_U; j++) {
            y[i + j] = v[j];
        }
    }
    for (; i < n; i++) {
        y[i] = x[i] < 0 ? (OPF_T)0 : x[i];
    }
}

void OPF_NAME(scale)(size_t n, const OPF_T *x, OPF_T *y, const OPF_PARAMS *p) {
    const OPF_T alpha = p->alpha;
    size_t i = 0;
    for (; i + OPF_U <= n; i += OPF_U) {
        OPF_T v[OPF_U];
        for (size_t j = 0; j < OPF_U; j++) {
            v[j] = alpha * x[i + j];
        }
        for (size_t j = 0; j < OPF_U; j++) {
            y[i + j] = v[j];
        }
    }
    for (; i < n; i++) {
        y[i] = alpha * x[i];
    }
}

void OPF_NAME(relu_grad)(size_t n, const OPF_T *dy, const OPF_T *x, OPF_T *dx, const OPF_PARAMS *p) {
    (void)p;
    size_t i = 0;
    for (; i + OPF_U <= n; i += OPF_U) {
        OPF_T v[OPF_U];
        for (size_t j = 0; j < OPF_U; j++) {
            v[j] = x[i + j] <= 0 ? (OPF_T)0 : dy[i + j];
        }
        for (size_t j = 0; j < OPF_U; j++) {
            dx[i + j] = v[j];
        }
    }
    for (; i < n; i++) {
        dx[i] = x[i] <= 0 ? (OPF_T)0 : dy[i];
    }
}

void OPF_NAME(add)(size_t n, const OPF_T *a, const OPF_T *b, OPF_T *y, const OPF_PARAMS *p) {
    (void)p;
    size_t i = 0;
    for (; i + OPF_U <= n; i += OPF_U) {
        OPF_T v[OPF_U];
        for (size_t j = 0; j < OPF_U; j++) {
            v[j] = a[i + j] + b[i + j];
        }
        for (size_t j = 0; j < OPF_U; j++) {
            y[i + j] = v[j];
        }
    }
    for (; i < n; i++) {
        y[i] = a[i] + b[i];
    }
}
