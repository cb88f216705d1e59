/*
 * math_bench.c — throughput of include/opforge_math.h against a libm loop.
 *
 *   scripts/check-math.sh --bench     (builds this with -O3 and runs it)
 *
 * Each function maps 16K elements (64 KiB of float, 128 KiB of double: in L2,
 * and the output too) once per pass; the best of several timed repetitions is
 * reported in elements per nanosecond, one thread, for: the libm loop
 * (y[i] = expf(x[i]) at -O3, a call per element), the opforge function in a
 * loop compiled for the base ISA, with target("avx2,fma") and with
 * target("avx512f,...") as opforge compiles an author's loop. The CPU's model
 * name is printed first: the figures mean nothing without it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "opforge_math.h"

enum { N = 16 * 1024 };

#if defined(__x86_64__)
#define HAVE_X86 1
#define TARGET_AVX2 __attribute__((target("avx2,fma")))
#define TARGET_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))
#else
#define HAVE_X86 0
#endif

typedef void (*loop_f32)(long n, const float *restrict x, float *restrict y);
typedef void (*loop_f64)(long n, const double *restrict x, double *restrict y);

#define LOOP(name, attr, scope, T, expr)                                                                               \
    attr static void name(long n, const T *restrict x, T *restrict y) {                                                \
        scope _Pragma("GCC ivdep") for (long i = 0; i < n; i++) { y[i] = expr; }                                       \
    }

static float libm_sigmoidf(float v) { return 1.0f / (1.0f + expf(-v)); }
static double libm_sigmoid(double v) { return 1.0 / (1.0 + exp(-v)); }
static float libm_softplusf(float v) { return (v < 0 ? 0.0f : v) + log1pf(expf(-fabsf(v))); }
static double libm_softplus(double v) { return (v < 0 ? 0.0 : v) + log1p(exp(-fabs(v))); }

#if HAVE_X86
#define X86_VARIANTS(fn, T)                                                                                            \
    LOOP(fn##_avx2, TARGET_AVX2, OPF_MATH_USE_FMA, T, fn(x[i]))                                                        \
    LOOP(fn##_avx512, TARGET_AVX512, OPF_MATH_USE_FMA, T, fn(x[i]))
#define X86_PTRS(fn) fn##_avx2, fn##_avx512
#else
#define X86_VARIANTS(fn, T)
#define X86_PTRS(fn) NULL, NULL
#endif

#define VARIANTS(fn, libm, T)                                                                                          \
    LOOP(fn##_libm, , , T, libm(x[i]))                                                                                 \
    LOOP(fn##_base, , , T, fn(x[i]))                                                                                   \
    X86_VARIANTS(fn, T)

VARIANTS(opf_exp_f32, expf, float)
VARIANTS(opf_expm1_f32, expm1f, float)
VARIANTS(opf_log_f32, logf, float)
VARIANTS(opf_log1p_f32, log1pf, float)
VARIANTS(opf_tanh_f32, tanhf, float)
VARIANTS(opf_erf_f32, erff, float)
VARIANTS(opf_sigmoid_f32, libm_sigmoidf, float)
VARIANTS(opf_softplus_f32, libm_softplusf, float)
VARIANTS(opf_exp_f64, exp, double)
VARIANTS(opf_expm1_f64, expm1, double)
VARIANTS(opf_log_f64, log, double)
VARIANTS(opf_log1p_f64, log1p, double)
VARIANTS(opf_tanh_f64, tanh, double)
VARIANTS(opf_erf_f64, erf, double)
VARIANTS(opf_sigmoid_f64, libm_sigmoid, double)
VARIANTS(opf_softplus_f64, libm_softplus, double)

typedef struct bench_f32 {
    const char *name;
    loop_f32 loop[4];
    float lo, hi;
} bench_f32;
typedef struct bench_f64 {
    const char *name;
    loop_f64 loop[4];
    double lo, hi;
} bench_f64;

#define PTRS(fn)                                                                                                       \
    { fn##_libm, fn##_base, X86_PTRS(fn) }

static const bench_f32 benches_f32[] = {
    {"exp", PTRS(opf_exp_f32), -20.0f, 20.0f},         {"expm1", PTRS(opf_expm1_f32), -5.0f, 5.0f},
    {"log", PTRS(opf_log_f32), 0.001f, 1000.0f},       {"log1p", PTRS(opf_log1p_f32), -0.9f, 10.0f},
    {"tanh", PTRS(opf_tanh_f32), -5.0f, 5.0f},         {"erf", PTRS(opf_erf_f32), -3.0f, 3.0f},
    {"sigmoid", PTRS(opf_sigmoid_f32), -10.0f, 10.0f}, {"softplus", PTRS(opf_softplus_f32), -10.0f, 10.0f},
};
static const bench_f64 benches_f64[] = {
    {"exp", PTRS(opf_exp_f64), -20.0, 20.0},         {"expm1", PTRS(opf_expm1_f64), -5.0, 5.0},
    {"log", PTRS(opf_log_f64), 0.001, 1000.0},       {"log1p", PTRS(opf_log1p_f64), -0.9, 10.0},
    {"tanh", PTRS(opf_tanh_f64), -5.0, 5.0},         {"erf", PTRS(opf_erf_f64), -3.0, 3.0},
    {"sigmoid", PTRS(opf_sigmoid_f64), -10.0, 10.0}, {"softplus", PTRS(opf_softplus_f64), -10.0, 10.0},
};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int variant_runs(int v) {
#if HAVE_X86
    if (v == 2) {
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    }
    if (v == 3) {
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
    }
#endif
    return v < 2;
}

/* Elements per ns: the best of 15 repetitions of ~10 ms each (the best, as
 * other processes share the machine). */
static double rate(void (*call)(const void *fn, const void *x, void *y), const void *fn, const void *x, void *y) {
    long passes = 1;
    for (;;) { /* calibrate */
        double t0 = now();
        for (long p = 0; p < passes; p++) {
            call(fn, x, y);
        }
        if (now() - t0 > 0.01) {
            break;
        }
        passes *= 2;
    }
    double best = 0.0;
    for (int rep = 0; rep < 15; rep++) {
        double t0 = now();
        for (long p = 0; p < passes; p++) {
            call(fn, x, y);
        }
        double r = (double)N * (double)passes / ((now() - t0) * 1e9);
        best = r > best ? r : best;
    }
    return best;
}

static void call_f32(const void *fn, const void *x, void *y) {
    loop_f32 f;
    memcpy(&f, fn, sizeof f);
    f(N, (const float *)x, (float *)y);
}
static void call_f64(const void *fn, const void *x, void *y) {
    loop_f64 f;
    memcpy(&f, fn, sizeof f);
    f(N, (const double *)x, (double *)y);
}

static void print_cpu(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            printf("CPU: %s", strchr(line, ':') + 2);
            break;
        }
    }
    if (f) {
        fclose(f);
    }
}

int main(void) {
    print_cpu();
    printf("elements per ns, one thread, %d elements in L1/L2 (speed-up over libm in brackets)\n", N);
    static float xf[N], yf[N];
    static double xd[N], yd[N];
    const char *vname[4] = {"libm", "base", "avx2", "avx512"};
    printf("%-12s", "function");
    for (int v = 0; v < 4; v++) {
        printf(" %16s", vname[v]);
    }
    printf("\n");
    for (size_t b = 0; b < sizeof benches_f32 / sizeof benches_f32[0]; b++) {
        const bench_f32 *c = &benches_f32[b];
        for (int i = 0; i < N; i++) {
            xf[i] = c->lo + (c->hi - c->lo) * (float)((i * 7919) % N) / (float)N;
        }
        printf("%-8s f32", c->name);
        double base = 0.0;
        for (int v = 0; v < 4; v++) {
            if (c->loop[v] == NULL || !variant_runs(v)) {
                printf(" %16s", "-");
                continue;
            }
            double r = rate(call_f32, &c->loop[v], xf, yf);
            base = v == 0 ? r : base;
            printf("   %6.3f (%4.1fx)", r, r / base);
        }
        printf("\n");
    }
    for (size_t b = 0; b < sizeof benches_f64 / sizeof benches_f64[0]; b++) {
        const bench_f64 *c = &benches_f64[b];
        for (int i = 0; i < N; i++) {
            xd[i] = c->lo + (c->hi - c->lo) * (double)((i * 7919) % N) / (double)N;
        }
        printf("%-8s f64", c->name);
        double base = 0.0;
        for (int v = 0; v < 4; v++) {
            if (c->loop[v] == NULL || !variant_runs(v)) {
                printf(" %16s", "-");
                continue;
            }
            double r = rate(call_f64, &c->loop[v], xd, yd);
            base = v == 0 ? r : base;
            printf("   %6.3f (%4.1fx)", r, r / base);
        }
        printf("\n");
    }
    return 0;
}
