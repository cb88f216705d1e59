/*
 * probe.c — machine limits for `opforge bench` (see probe.h).
 *
 * FMA peak. Each loop keeps OPFP_ACC independent accumulators and updates each
 * one with acc = acc * a + b once per iteration. One FMA chain is limited by
 * the FMA latency (4-5 cycles on current x86); the core can start 2 FMAs a
 * cycle, so at least latency x pipes = 8-10 chains must be in flight to reach
 * the peak: 12 for AVX2 (12 + 2 constants of the 16 ymm registers), 24 for
 * AVX-512 (of 32 zmm registers). a = 1 - 2^-20 and b = 2^-24 keep every
 * accumulator finite and normal (it tends to b / (1 - a) = 1/16). The sum of
 * the accumulators is stored to a volatile sink so the loop cannot be removed.
 * Peak = threads x iterations x accumulators x lanes x 2 flops / seconds.
 *
 * Copy bandwidth. 128 bytes per iteration: four 32-byte AVX loads and four
 * stores, plain or non-temporal, where the CPU has AVX (256-bit stores, as
 * opforge's AVX2 kernels use: measurably faster than 128-bit non-temporal
 * stores from one thread); else four 16-byte SSE2 loads and stores (x86-64's
 * baseline). Elsewhere the plain copy is a C loop over uint64_t. memcpy is
 * the C library's, whatever strategy it picks. Sizes are multiples of 128.
 */
#define _GNU_SOURCE
#include "probe.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#define OPFP_X86 1
#include <immintrin.h>
#else
#define OPFP_X86 0
#endif

enum { OPFP_ACC_AVX2 = 12, OPFP_ACC_AVX512 = 24, OPFP_MAX_THREADS = 1024 };

static volatile double opfp_sink;

static double opfp_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int opfp_cpu_has(const char *feature) {
    static const char *const known[] = {"avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq"};
    int index = -1;
    for (int i = 0; i < (int)(sizeof known / sizeof known[0]); i++) {
        if (strcmp(feature, known[i]) == 0) {
            index = i;
        }
    }
    if (index < 0) {
        return -1;
    }
#if OPFP_X86
    __builtin_cpu_init();
    switch (index) { /* __builtin_cpu_supports takes string literals only */
    case 0: return __builtin_cpu_supports("avx2") != 0;
    case 1: return __builtin_cpu_supports("fma") != 0;
    case 2: return __builtin_cpu_supports("avx512f") != 0;
    case 3: return __builtin_cpu_supports("avx512bw") != 0;
    case 4: return __builtin_cpu_supports("avx512vl") != 0;
    default: return __builtin_cpu_supports("avx512dq") != 0;
    }
#else
    return 0;
#endif
}

/* ------------------------------------------------------------------------ */
/* FMA loops, one per ISA and dtype                                          */
/* ------------------------------------------------------------------------ */

#if OPFP_X86
__attribute__((target("avx2,fma"))) static double opfp_fma_avx2_f32(long long iterations) {
    const __m256 a = _mm256_set1_ps(1.0f - 0x1p-20f), b = _mm256_set1_ps(0x1p-24f);
    __m256 acc[OPFP_ACC_AVX2];
    for (int j = 0; j < OPFP_ACC_AVX2; j++) {
        acc[j] = _mm256_set1_ps((float)j);
    }
    for (long long i = 0; i < iterations; i++) {
#pragma GCC unroll 24
        for (int j = 0; j < OPFP_ACC_AVX2; j++) {
            acc[j] = _mm256_fmadd_ps(acc[j], a, b);
        }
    }
    float lanes[8];
    double sum = 0;
    for (int j = 0; j < OPFP_ACC_AVX2; j++) {
        _mm256_storeu_ps(lanes, acc[j]);
        sum += lanes[0];
    }
    return sum;
}

__attribute__((target("avx2,fma"))) static double opfp_fma_avx2_f64(long long iterations) {
    const __m256d a = _mm256_set1_pd(1.0 - 0x1p-20), b = _mm256_set1_pd(0x1p-24);
    __m256d acc[OPFP_ACC_AVX2];
    for (int j = 0; j < OPFP_ACC_AVX2; j++) {
        acc[j] = _mm256_set1_pd((double)j);
    }
    for (long long i = 0; i < iterations; i++) {
#pragma GCC unroll 24
        for (int j = 0; j < OPFP_ACC_AVX2; j++) {
            acc[j] = _mm256_fmadd_pd(acc[j], a, b);
        }
    }
    double lanes[4];
    double sum = 0;
    for (int j = 0; j < OPFP_ACC_AVX2; j++) {
        _mm256_storeu_pd(lanes, acc[j]);
        sum += lanes[0];
    }
    return sum;
}

__attribute__((target("avx512f"))) static double opfp_fma_avx512_f32(long long iterations) {
    const __m512 a = _mm512_set1_ps(1.0f - 0x1p-20f), b = _mm512_set1_ps(0x1p-24f);
    __m512 acc[OPFP_ACC_AVX512];
    for (int j = 0; j < OPFP_ACC_AVX512; j++) {
        acc[j] = _mm512_set1_ps((float)j);
    }
    for (long long i = 0; i < iterations; i++) {
#pragma GCC unroll 24
        for (int j = 0; j < OPFP_ACC_AVX512; j++) {
            acc[j] = _mm512_fmadd_ps(acc[j], a, b);
        }
    }
    float lanes[16];
    double sum = 0;
    for (int j = 0; j < OPFP_ACC_AVX512; j++) {
        _mm512_storeu_ps(lanes, acc[j]);
        sum += lanes[0];
    }
    return sum;
}

__attribute__((target("avx512f"))) static double opfp_fma_avx512_f64(long long iterations) {
    const __m512d a = _mm512_set1_pd(1.0 - 0x1p-20), b = _mm512_set1_pd(0x1p-24);
    __m512d acc[OPFP_ACC_AVX512];
    for (int j = 0; j < OPFP_ACC_AVX512; j++) {
        acc[j] = _mm512_set1_pd((double)j);
    }
    for (long long i = 0; i < iterations; i++) {
#pragma GCC unroll 24
        for (int j = 0; j < OPFP_ACC_AVX512; j++) {
            acc[j] = _mm512_fmadd_pd(acc[j], a, b);
        }
    }
    double lanes[8];
    double sum = 0;
    for (int j = 0; j < OPFP_ACC_AVX512; j++) {
        _mm512_storeu_pd(lanes, acc[j]);
        sum += lanes[0];
    }
    return sum;
}
#endif

typedef double (*opfp_fma_fn)(long long iterations);

/* The loop for isa and dtype and its flops per iteration; NULL if it cannot run. */
static opfp_fma_fn opfp_fma_loop(int isa, int f64, long long *flops_per_iteration) {
#if OPFP_X86
    if (isa == OPFP_ISA_AVX2 && opfp_cpu_has("avx2") == 1 && opfp_cpu_has("fma") == 1) {
        *flops_per_iteration = 2LL * OPFP_ACC_AVX2 * (f64 ? 4 : 8);
        return f64 ? opfp_fma_avx2_f64 : opfp_fma_avx2_f32;
    }
    if (isa == OPFP_ISA_AVX512 && opfp_cpu_has("avx512f") == 1) {
        *flops_per_iteration = 2LL * OPFP_ACC_AVX512 * (f64 ? 8 : 16);
        return f64 ? opfp_fma_avx512_f64 : opfp_fma_avx512_f32;
    }
#else
    (void)isa;
    (void)f64;
#endif
    *flops_per_iteration = 0;
    return NULL;
}

long long opfp_fma_flops_per_iteration(int isa, int f64) {
    long long flops;
    opfp_fma_loop(isa, f64, &flops);
    return flops;
}

/* ------------------------------------------------------------------------ */
/* Copy kernels: bytes a multiple of 128, pointers aligned to 64             */
/* ------------------------------------------------------------------------ */

static void opfp_copy_plain(void *dst, const void *src, size_t bytes) {
#if OPFP_X86
    __m128i *d = dst;
    const __m128i *s = src;
    for (size_t i = 0; i < bytes / 16; i += 4) {
        __m128i v0 = _mm_load_si128(s + i), v1 = _mm_load_si128(s + i + 1);
        __m128i v2 = _mm_load_si128(s + i + 2), v3 = _mm_load_si128(s + i + 3);
        _mm_store_si128(d + i, v0);
        _mm_store_si128(d + i + 1, v1);
        _mm_store_si128(d + i + 2, v2);
        _mm_store_si128(d + i + 3, v3);
    }
#else
    uint64_t *d = dst;
    const uint64_t *s = src;
    for (size_t i = 0; i < bytes / 8; i++) {
        d[i] = s[i];
    }
#endif
}

#if OPFP_X86
static void opfp_copy_nontemporal(void *dst, const void *src, size_t bytes) {
    __m128i *d = dst;
    const __m128i *s = src;
    for (size_t i = 0; i < bytes / 16; i += 4) {
        __m128i v0 = _mm_load_si128(s + i), v1 = _mm_load_si128(s + i + 1);
        __m128i v2 = _mm_load_si128(s + i + 2), v3 = _mm_load_si128(s + i + 3);
        _mm_stream_si128(d + i, v0);
        _mm_stream_si128(d + i + 1, v1);
        _mm_stream_si128(d + i + 2, v2);
        _mm_stream_si128(d + i + 3, v3);
    }
    _mm_sfence(); /* the streamed lines are visible before the thread reports done */
}

__attribute__((target("avx"))) static void opfp_copy_plain_avx(void *dst, const void *src, size_t bytes) {
    __m256i *d = dst;
    const __m256i *s = src;
    for (size_t i = 0; i < bytes / 32; i += 4) {
        __m256i v0 = _mm256_load_si256(s + i), v1 = _mm256_load_si256(s + i + 1);
        __m256i v2 = _mm256_load_si256(s + i + 2), v3 = _mm256_load_si256(s + i + 3);
        _mm256_store_si256(d + i, v0);
        _mm256_store_si256(d + i + 1, v1);
        _mm256_store_si256(d + i + 2, v2);
        _mm256_store_si256(d + i + 3, v3);
    }
}

__attribute__((target("avx"))) static void opfp_copy_nontemporal_avx(void *dst, const void *src, size_t bytes) {
    __m256i *d = dst;
    const __m256i *s = src;
    for (size_t i = 0; i < bytes / 32; i += 4) {
        __m256i v0 = _mm256_load_si256(s + i), v1 = _mm256_load_si256(s + i + 1);
        __m256i v2 = _mm256_load_si256(s + i + 2), v3 = _mm256_load_si256(s + i + 3);
        _mm256_stream_si256(d + i, v0);
        _mm256_stream_si256(d + i + 1, v1);
        _mm256_stream_si256(d + i + 2, v2);
        _mm256_stream_si256(d + i + 3, v3);
    }
    _mm_sfence();
}
#endif

static void opfp_copy_memcpy(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }

typedef void (*opfp_copy_fn)(void *dst, const void *src, size_t bytes);

static opfp_copy_fn opfp_copy_kernel(int kind) {
#if OPFP_X86
    __builtin_cpu_init();
    int avx = __builtin_cpu_supports("avx");
#endif
    switch (kind) {
#if OPFP_X86
    case OPFP_COPY_PLAIN: return avx ? opfp_copy_plain_avx : opfp_copy_plain;
    case OPFP_COPY_NONTEMPORAL: return avx ? opfp_copy_nontemporal_avx : opfp_copy_nontemporal;
#else
    case OPFP_COPY_PLAIN: return opfp_copy_plain;
#endif
    case OPFP_COPY_MEMCPY: return opfp_copy_memcpy;
    default: return NULL;
    }
}

int opfp_copy_available(int kind) { return opfp_copy_kernel(kind) != NULL; }

/* Large buffers are aligned to 2 MiB and asked for transparent huge pages,
 * as NumPy does for its large arrays (where THP is in "madvise" mode, the
 * default of many distributions): with 4 KiB pages the copy would pay TLB
 * misses that the elementwise ops it is compared with do not. */
void *opfp_buffer_new(size_t bytes) {
    enum { HUGE_PAGE = 2 << 20 };
    void *buffer = NULL;
    size_t rounded = (bytes + 63) / 64 * 64;
    size_t alignment = rounded >= 2 * HUGE_PAGE ? HUGE_PAGE : 64;
    if (posix_memalign(&buffer, alignment, rounded ? rounded : 64) != 0) {
        return NULL;
    }
#ifdef MADV_HUGEPAGE
    if (alignment == HUGE_PAGE) {
        (void)madvise(buffer, rounded / HUGE_PAGE * HUGE_PAGE, MADV_HUGEPAGE); /* a hint: failure is harmless */
    }
#endif
    memset(buffer, 1, rounded);
    return buffer;
}

void opfp_buffer_free(void *buffer) { free(buffer); }

/* ------------------------------------------------------------------------ */
/* Running a job on N threads                                                */
/* ------------------------------------------------------------------------ */

/* A measured job: `run` does the work of part `index` of `threads`. */
typedef struct opfp_job {
    void (*run)(const struct opfp_job *job, int index);
    int threads;
    atomic_int ready; /* threads waiting for `go` */
    atomic_int go;    /* 0: wait, 1: run, -1: give up (a thread could not be started) */
    double start[OPFP_MAX_THREADS], end[OPFP_MAX_THREADS];
    /* FMA */
    opfp_fma_fn fma;
    long long iterations;
    /* copy */
    opfp_copy_fn copy;
    char *dst;
    const char *src;
    size_t bytes;
} opfp_job;

typedef struct {
    opfp_job *job;
    int index;
} opfp_worker;

static void opfp_run_part(opfp_job *job, int index) {
    job->start[index] = opfp_now();
    job->run(job, index);
    job->end[index] = opfp_now();
}

/* Started threads spin until every thread exists, so that all parts start
 * together (the wait is as long as creating the threads: microseconds). */
static void *opfp_thread_main(void *arg) {
    opfp_worker *worker = arg;
    opfp_job *job = worker->job;
    atomic_fetch_add(&job->ready, 1);
    int go;
    while ((go = atomic_load(&job->go)) == 0) {
    }
    if (go > 0) {
        opfp_run_part(job, worker->index);
    }
    return NULL;
}

/* Runs job on job->threads threads (the caller is part 0); the wall time from
 * the first start to the last end, or -1 if a thread could not be started. */
static double opfp_run_job(opfp_job *job) {
    int threads = job->threads;
    pthread_t ids[OPFP_MAX_THREADS];
    opfp_worker workers[OPFP_MAX_THREADS];
    atomic_init(&job->ready, 0);
    atomic_init(&job->go, 0);
    int started = 1;
    for (; started < threads; started++) {
        workers[started] = (opfp_worker){job, started};
        if (pthread_create(&ids[started], NULL, opfp_thread_main, &workers[started]) != 0) {
            break;
        }
    }
    if (started == threads) {
        while (atomic_load(&job->ready) < threads - 1) {
        }
        atomic_store(&job->go, 1);
        opfp_run_part(job, 0);
    } else {
        atomic_store(&job->go, -1);
    }
    for (int i = 1; i < started; i++) {
        pthread_join(ids[i], NULL);
    }
    if (started < threads) {
        return -1;
    }
    double first = job->start[0], last = job->end[0];
    for (int i = 1; i < threads; i++) {
        first = job->start[i] < first ? job->start[i] : first;
        last = job->end[i] > last ? job->end[i] : last;
    }
    return last - first;
}

static void opfp_fma_part(const opfp_job *job, int index) {
    (void)index;
    opfp_sink = job->fma(job->iterations);
}

double opfp_fma_seconds(int isa, int f64, long long iterations, int threads) {
    long long flops;
    opfp_fma_fn fma = opfp_fma_loop(isa, f64, &flops);
    if (fma == NULL || iterations < 0 || threads < 1 || threads > OPFP_MAX_THREADS) {
        return -1;
    }
    opfp_job *job = calloc(1, sizeof *job);
    if (job == NULL) {
        return -1;
    }
    job->run = opfp_fma_part;
    job->threads = threads;
    job->fma = fma;
    job->iterations = iterations;
    double seconds = opfp_run_job(job);
    free(job);
    return seconds;
}

static void opfp_copy_part(const opfp_job *job, int index) {
    size_t blocks = job->bytes / 128, per_thread = blocks / (size_t)job->threads;
    size_t first = per_thread * (size_t)index;
    size_t count = index == job->threads - 1 ? blocks - first : per_thread;
    job->copy(job->dst + 128 * first, job->src + 128 * first, 128 * count);
}

double opfp_copy_seconds(int kind, void *dst, const void *src, size_t bytes, int threads) {
    opfp_copy_fn copy = opfp_copy_kernel(kind);
    if (copy == NULL || dst == NULL || src == NULL || bytes % 128 != 0 || (uintptr_t)dst % 64 != 0 ||
        (uintptr_t)src % 64 != 0 || threads < 1 || threads > OPFP_MAX_THREADS) {
        return -1;
    }
    opfp_job *job = calloc(1, sizeof *job);
    if (job == NULL) {
        return -1;
    }
    job->run = opfp_copy_part;
    job->threads = threads;
    job->copy = copy;
    job->dst = dst;
    job->src = src;
    job->bytes = bytes;
    double seconds = opfp_run_job(job);
    free(job);
    return seconds;
}
