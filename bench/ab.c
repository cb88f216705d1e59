/*
 * ab.c — two or more builds of libopforge timed against each other in one
 * process, on the same buffers, alternating call by call.
 *
 *   ab [-t THREADS] [-n REPS] [-f64] [-offset BYTES] [-copy] [-huge] LIB_A LIB_B [LIB ...] -- CASE ...
 *
 * CASE is an op of the built-in table and its inputs' shapes:
 * softmax:8192x4096, rms_norm:8192x4096,4096 (inputs separated by commas,
 * dims by x). Each build is loaded with dlmopen into a namespace of its own,
 * so the builds' symbols do not meet. Each rep runs every build once, in
 * turn; the best time of each is printed, with the first build's time over
 * it (above 1: faster than the first). With -copy a copy of the first
 * input's bytes (memcpy, and on x86 with AVX one with non-temporal stores:
 * the faster of the two, on the same threads) is timed in each rep as well,
 * and each build's time is also given against it ("copy / this": the
 * copy's time over the build's, the median of the reps' ratios; the best
 * of them overstated it by as much as the copies' noise) and compared
 * with the first build's that way ("per copy"): on a shared machine the
 * bandwidth moves between minutes, and a ratio of two things timed in the
 * same moments does not. The outputs of every build are
 * compared with the first's: "same bits", or the largest difference.
 *
 * The inputs are fixed values in [-1, 1); attributes take their defaults.
 * -offset places every buffer that many bytes past a 64-byte line (NumPy's
 * arrays start 16 bytes into one). -huge asks for huge pages for buffers
 * of 4 MiB and more, as NumPy does (where the kernel's transparent huge
 * pages are "madvise"; with 4 KiB pages streams run at other speeds, the
 * copy's and the ops' not alike). scripts/ab.sh builds a revision and the
 * working tree and runs a standard set of cases.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "opforge.h"

enum { AB_MAX_LIBS = 8, AB_MAX_THREADS = 64 };

/* The entry points a build exports, as this program calls them. */
typedef struct ab_lib {
    const char *path;
    const opf_op_table *(*builtin)(void);
    const opf_op_def *(*find)(const opf_op_table *, const char *);
    opf_status (*run)(const opf_op_def *, const opf_tensor *const *, const opf_tensor *const *, const opf_attr_value *);
    opf_status (*infer)(const opf_op_def *, const opf_tensor *const *, int32_t, int32_t *, int64_t *);
    opf_status (*threads)(int);
    const char *(*error)(void);
} ab_lib;

typedef struct ab_buffer {
    void *block; /* what was allocated */
    opf_tensor t;
    int64_t shape[OPF_MAX_RANK];
    int64_t numel;
} ab_buffer;

static double ab_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *ab_symbol(void *handle, const char *path, const char *name) {
    void *sym = dlsym(handle, name);
    if (sym == NULL) {
        fprintf(stderr, "ab: %s has no %s\n", path, name);
        exit(2);
    }
    return sym;
}

/* field = the build's function `name` (dlsym's object pointer copied into a
 * function pointer, as POSIX allows). */
#define AB_BIND(lib, handle, field, name)                                                                              \
    do {                                                                                                               \
        void *sym_ = ab_symbol((handle), (lib).path, (name));                                                          \
        memcpy(&(lib).field, &sym_, sizeof(lib).field);                                                                \
    } while (0)

static ab_lib ab_load(const char *path) {
    void *handle = dlmopen(LM_ID_NEWLM, path, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        fprintf(stderr, "ab: cannot load %s: %s\n", path, dlerror());
        exit(2);
    }
    ab_lib lib = {.path = path};
    AB_BIND(lib, handle, builtin, "opf_builtin_ops");
    AB_BIND(lib, handle, find, "opf_op_find");
    AB_BIND(lib, handle, run, "opf_op_run");
    AB_BIND(lib, handle, infer, "opf_op_infer_shape");
    AB_BIND(lib, handle, threads, "opf_set_num_threads");
    AB_BIND(lib, handle, error, "opf_last_error");
    return lib;
}

/* `bytes` on a 64-byte line; with `huge` (-huge) and at least 4 MiB, on a
 * 2 MiB page with huge pages asked for, as NumPy's arrays of 4 MiB and more
 * and the bench's copy buffers have them. NULL when out of memory. */
static void *ab_block(size_t bytes, int huge) {
    enum { HUGE_PAGE = 2 << 20 };
    const size_t rounded = (bytes + 63) / 64 * 64;
    if (!huge || rounded < 2 * HUGE_PAGE) {
        return aligned_alloc(64, rounded);
    }
    void *block = aligned_alloc(HUGE_PAGE, (rounded + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE);
#ifdef MADV_HUGEPAGE
    if (block != NULL) {
        (void)madvise(block, rounded / HUGE_PAGE * HUGE_PAGE, MADV_HUGEPAGE); /* a hint */
    }
#endif
    return block;
}

/* A buffer of `numel` elements of `elem` bytes, `offset` bytes past a 64-byte line. */
static void ab_alloc(ab_buffer *b, int64_t numel, size_t elem, size_t offset, int huge) {
    const size_t bytes = (size_t)(numel > 0 ? numel : 1) * elem;
    b->block = ab_block(bytes + offset, huge);
    if (b->block == NULL) {
        fprintf(stderr, "ab: out of memory for %zu bytes\n", bytes);
        exit(2);
    }
    b->numel = numel;
    b->t.data = (char *)b->block + offset;
    memset(b->t.data, 0, bytes); /* every page touched before timing */
}

/* "8192x4096" into b's shape; the number of dims, or -1. */
static int ab_parse_shape(const char *text, ab_buffer *b) {
    int ndim = 0;
    b->numel = 1;
    for (const char *p = text; *p != '\0' && ndim < OPF_MAX_RANK;) {
        char *end;
        const long long d = strtoll(p, &end, 10);
        if (end == p || d < 0) {
            return -1;
        }
        b->shape[ndim++] = d;
        b->numel *= d;
        if (*end == '\0') {
            return ndim;
        }
        if (*end != 'x') {
            return -1;
        }
        p = end + 1;
    }
    return -1; /* empty, a trailing x, or too many dims */
}

typedef struct ab_copy_part {
    char *dst;
    const char *src;
    size_t bytes;
} ab_copy_part;

static void *ab_copy_memcpy(void *arg) {
    const ab_copy_part *part = arg;
    memcpy(part->dst, part->src, part->bytes);
    return NULL;
}

#if defined(__x86_64__)
#include <immintrin.h>

/* The copy with non-temporal stores (dst on a 64-byte line, bytes a multiple
 * of 64 but for the last part's tail), as the bench's copy roof also runs it:
 * at these sizes glibc's memcpy stores through the cache, and on machines
 * with a large L3 the streamed copy is the faster one by far. */
__attribute__((target("avx"))) static void *ab_copy_streamed(void *arg) {
    const ab_copy_part *part = arg;
    const size_t whole = part->bytes / 64 * 64;
    for (size_t i = 0; i < whole; i += 64) {
        const __m256i v0 = _mm256_loadu_si256((const __m256i *)(part->src + i));
        const __m256i v1 = _mm256_loadu_si256((const __m256i *)(part->src + i + 32));
        _mm256_stream_si256((__m256i *)(part->dst + i), v0);
        _mm256_stream_si256((__m256i *)(part->dst + i + 32), v1);
    }
    memcpy(part->dst + whole, part->src + whole, part->bytes - whole);
    _mm_sfence();
    return NULL;
}

static int ab_have_streamed(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx");
}
#else
static void *ab_copy_streamed(void *arg) { return ab_copy_memcpy(arg); }
static int ab_have_streamed(void) { return 0; }
#endif

/* A copy of `bytes` from src to dst on `threads` threads (64-byte pieces) by
 * `run` (ab_copy_memcpy or ab_copy_streamed); seconds. */
static double ab_copy(void *(*run)(void *), char *dst, const char *src, size_t bytes, int threads) {
    pthread_t ids[AB_MAX_THREADS];
    ab_copy_part parts[AB_MAX_THREADS];
    const size_t share = bytes / (size_t)threads / 64 * 64;
    const double t0 = ab_now();
    for (int i = 0; i < threads; i++) {
        parts[i] = (ab_copy_part){dst + (size_t)i * share, src + (size_t)i * share,
                                  i == threads - 1 ? bytes - (size_t)i * share : share};
        if (i > 0 && pthread_create(&ids[i], NULL, run, &parts[i]) != 0) {
            fprintf(stderr, "ab: cannot start a copy thread\n");
            exit(2);
        }
    }
    run(&parts[0]);
    for (int i = 1; i < threads; i++) {
        pthread_join(ids[i], NULL);
    }
    return ab_now() - t0;
}

static int ab_compare_doubles(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0 .. n) (n >= 1), which it sorts. */
static double ab_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, ab_compare_doubles);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double ab_value(const ab_buffer *b, int64_t i) {
    return b->t.dtype == OPF_F64 ? ((const double *)b->t.data)[i] : (double)((const float *)b->t.data)[i];
}

/* One case on every build; returns 0, or 1 if a build failed to run it. */
static int ab_case(const ab_lib *libs, int nlibs, const char *spec, int threads, int reps, opf_dtype dtype,
                   size_t offset, int copy, int huge) {
    char op_name[128];
    const char *colon = strchr(spec, ':');
    if (colon == NULL || (size_t)(colon - spec) >= sizeof op_name) {
        fprintf(stderr, "ab: a case is OP:SHAPE[,SHAPE...], not '%s'\n", spec);
        return 1;
    }
    memcpy(op_name, spec, (size_t)(colon - spec));
    op_name[colon - spec] = '\0';
    const opf_op_def *ops[AB_MAX_LIBS];
    for (int l = 0; l < nlibs; l++) {
        ops[l] = libs[l].find(libs[l].builtin(), op_name);
        if (ops[l] == NULL) {
            fprintf(stderr, "ab: %s has no op '%s'\n", libs[l].path, op_name);
            return 1;
        }
    }
    const opf_op_def *op = ops[0];
    const size_t elem = dtype == OPF_F64 ? sizeof(double) : sizeof(float);
    ab_buffer in[OPF_MAX_ARGS] = {{0}}, out[AB_MAX_LIBS][OPF_MAX_ARGS] = {{{0}}};
    char *copy_dst = NULL;
    double *ratios = NULL; /* each rep's time over its copy's, per build (with -copy) */
    int status = 1;        /* (every buffer is freed at `done`, whatever fails) */
    const opf_tensor *in_ptr[OPF_MAX_ARGS] = {NULL}, *out_ptr[AB_MAX_LIBS][OPF_MAX_ARGS] = {{NULL}};
    char shapes[512];
    snprintf(shapes, sizeof shapes, "%s", colon + 1);
    int nin = 0;
    for (char *save = NULL, *s = strtok_r(shapes, ",", &save); s != NULL; s = strtok_r(NULL, ",", &save)) {
        const int ndim = nin < op->num_inputs ? ab_parse_shape(s, &in[nin]) : -1;
        if (ndim < 0) {
            fprintf(stderr, "ab: %s: bad shape '%s' (or more shapes than its %d inputs)\n", op_name, s,
                    (int)op->num_inputs);
            goto done;
        }
        ab_alloc(&in[nin], in[nin].numel, elem, offset, huge);
        in[nin].t = (opf_tensor){in[nin].t.data, {OPF_DEVICE_CPU, 0}, ndim, dtype, in[nin].shape, NULL, 0};
        for (int64_t i = 0; i < in[nin].numel; i++) {
            const double v = (double)((uint64_t)(i + 7919 * nin) * 2654435761u % 2000u) / 1000.0 - 1.0;
            if (dtype == OPF_F64) {
                ((double *)in[nin].t.data)[i] = v;
            } else {
                ((float *)in[nin].t.data)[i] = (float)v;
            }
        }
        in_ptr[nin] = &in[nin].t;
        nin++;
    }
    for (int l = 0; l < nlibs; l++) {
        for (int32_t o = 0; o < op->num_outputs; o++) {
            ab_buffer *b = &out[l][o];
            int32_t ndim = 0;
            if (libs[0].infer(op, in_ptr, o, &ndim, b->shape) != OPF_OK) {
                fprintf(stderr, "ab: %s: %s\n", op_name, libs[0].error());
                goto done;
            }
            int64_t numel = 1;
            for (int32_t d = 0; d < ndim; d++) {
                numel *= b->shape[d];
            }
            ab_alloc(b, numel, elem, offset, huge);
            b->t = (opf_tensor){b->t.data, {OPF_DEVICE_CPU, 0}, ndim, dtype, b->shape, NULL, 0};
            out_ptr[l][o] = &b->t;
        }
    }
    const size_t copy_bytes = in[0].numel > 0 ? (size_t)in[0].numel * elem : 0;
    if (copy && copy_bytes > 0 && (copy_dst = ab_block(copy_bytes, huge)) == NULL) {
        fprintf(stderr, "ab: out of memory for the copy\n");
        exit(2);
    }
    if (copy_dst != NULL) {
        memset(copy_dst, 0, copy_bytes);
    }
    double best[AB_MAX_LIBS], best_copy = INFINITY, share[AB_MAX_LIBS];
    const int streamed_copy = ab_have_streamed(); /* (a copy with non-temporal stores runs here) */
    ratios = copy_dst != NULL ? malloc((size_t)nlibs * (size_t)reps * sizeof *ratios) : NULL;
    if (copy_dst != NULL && ratios == NULL) {
        fprintf(stderr, "ab: out of memory for the copy's ratios\n");
        exit(2);
    }
    for (int l = 0; l < nlibs; l++) {
        best[l] = share[l] = INFINITY;
        libs[l].threads(threads);
    }
    for (int r = 0; r <= reps; r++) { /* rep 0: a warm-up */
        double copy_s = 0;
        if (copy_dst != NULL) { /* the faster of the two copies, as the bench's roof */
            copy_s = ab_copy(ab_copy_memcpy, copy_dst, in[0].t.data, copy_bytes, threads);
            if (streamed_copy) {
                const double streamed = ab_copy(ab_copy_streamed, copy_dst, in[0].t.data, copy_bytes, threads);
                copy_s = streamed < copy_s ? streamed : copy_s;
            }
        }
        best_copy = r > 0 && copy_s < best_copy ? copy_s : best_copy;
        for (int l = 0; l < nlibs; l++) {
            const double t0 = ab_now();
            if (libs[l].run(ops[l], in_ptr, out_ptr[l], NULL) != OPF_OK) {
                fprintf(stderr, "ab: %s %s: %s\n", libs[l].path, op_name, libs[l].error());
                goto done;
            }
            const double t = ab_now() - t0;
            if (r > 0) {
                best[l] = t < best[l] ? t : best[l];
                if (ratios != NULL) {
                    ratios[(size_t)l * (size_t)reps + (size_t)(r - 1)] = t / copy_s;
                }
            }
        }
    }
    for (int l = 0; ratios != NULL && l < nlibs; l++) {
        share[l] = ab_median(ratios + (size_t)l * (size_t)reps, reps);
    }
    printf("%s %s, %d thread(s)%s\n", op_name, colon + 1, threads, dtype == OPF_F64 ? ", float64" : "");
    const char *const copy_label =
        streamed_copy ? "copy of the first input (memcpy or streamed)" : "copy of the first input (memcpy)";
    int width = (int)strlen(copy_label);
    for (int l = 0; l < nlibs; l++) {
        width = (int)strlen(libs[l].path) > width ? (int)strlen(libs[l].path) : width;
    }
    if (copy_dst != NULL) {
        printf("  %-*s %9.3f ms\n", width, copy_label, best_copy * 1e3);
    }
    for (int l = 0; l < nlibs; l++) {
        double worst = 0;
        int same = 1;
        for (int32_t o = 0; o < op->num_outputs; o++) {
            const ab_buffer *a = &out[0][o], *b = &out[l][o];
            same = same && memcmp(a->t.data, b->t.data, (size_t)a->numel * elem) == 0;
            for (int64_t i = 0; i < a->numel; i++) {
                const double d = fabs(ab_value(a, i) - ab_value(b, i));
                worst = d > worst || isnan(d) ? d : worst;
            }
        }
        printf("  %-*s %9.3f ms  %5.2fx", width, libs[l].path, best[l] * 1e3, best[0] / best[l]);
        if (copy_dst != NULL) {
            printf("  (copy / this: %3.0f%%; %5.2fx per copy)", 100.0 / share[l], share[0] / share[l]);
        }
        if (l == 0) {
            printf("\n");
        } else if (same) {
            printf("  same bits\n");
        } else {
            printf("  differs by up to %.3g\n", worst);
        }
    }
    status = 0;
done:
    for (int k = 0; k < OPF_MAX_ARGS; k++) {
        free(in[k].block);
    }
    for (int l = 0; l < nlibs; l++) {
        for (int32_t o = 0; o < OPF_MAX_ARGS; o++) {
            free(out[l][o].block);
        }
    }
    free(copy_dst);
    free(ratios);
    return status;
}

static void ab_usage(void) {
    fprintf(stderr, "usage: ab [-t THREADS] [-n REPS] [-f64] [-offset BYTES] [-copy] [-huge] LIB_A LIB_B [LIB ...] -- "
                    "OP:SHAPE[,SHAPE...] ...\n"
                    "  e.g. ab -t 1 -copy old/libopforge.so new/libopforge.so -- softmax:8192x4096 "
                    "rms_norm:8192x4096,4096\n");
    exit(2);
}

int main(int argc, char **argv) {
    int threads = 1, reps = 15, copy = 0, huge = 0, nlibs = 0, a = 1;
    size_t offset = 0;
    opf_dtype dtype = OPF_F32;
    ab_lib libs[AB_MAX_LIBS];
    for (; a < argc && argv[a][0] == '-' && strcmp(argv[a], "--") != 0; a++) {
        if (strcmp(argv[a], "-t") == 0 && a + 1 < argc) {
            threads = atoi(argv[++a]);
        } else if (strcmp(argv[a], "-n") == 0 && a + 1 < argc) {
            reps = atoi(argv[++a]);
        } else if (strcmp(argv[a], "-offset") == 0 && a + 1 < argc) {
            offset = (size_t)atoi(argv[++a]) % 64;
        } else if (strcmp(argv[a], "-f64") == 0) {
            dtype = OPF_F64;
        } else if (strcmp(argv[a], "-copy") == 0) {
            copy = 1;
        } else if (strcmp(argv[a], "-huge") == 0) {
            huge = 1;
        } else {
            ab_usage();
        }
    }
    if (threads < 1 || threads > AB_MAX_THREADS || reps < 1) {
        ab_usage();
    }
    for (; a < argc && strcmp(argv[a], "--") != 0; a++) {
        if (nlibs == AB_MAX_LIBS) {
            ab_usage();
        }
        libs[nlibs++] = ab_load(argv[a]);
    }
    if (nlibs < 1 || a + 1 >= argc) {
        ab_usage();
    }
    int failed = 0;
    for (a++; a < argc; a++) {
        failed |= ab_case(libs, nlibs, argv[a], threads, reps, dtype, offset, copy, huge);
    }
    return failed;
}
