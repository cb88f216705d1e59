/*
 * dispatch.c — CPU feature detection and the kernel dispatch tables.
 *
 * Configure once, reference first: every table starts from the scalar
 * references and is overridden by each registered variant whose level the CPU
 * runs, up to the table's level. OPFORGE_ISA forces the level in use.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

enum { OPF_ISA_COUNT = OPF_ISA_NEON + 1 };

static const char *const opf_isa_names[OPF_ISA_COUNT] = {
    [OPF_ISA_SCALAR] = "scalar", [OPF_ISA_PORTABLE] = "portable", [OPF_ISA_AVX2] = "avx2",
    [OPF_ISA_AVX512] = "avx512", [OPF_ISA_NEON] = "neon",
};

/* Written once under pthread_once, read-only afterwards. */
static opf_kernels opf_tables[OPF_ISA_COUNT];
static int opf_table_valid[OPF_ISA_COUNT];
static opf_isa opf_active_isa;
static pthread_once_t opf_dispatch_once = PTHREAD_ONCE_INIT;

const char *opf_isa_name(opf_isa isa) {
    if ((int)isa < 0 || (int)isa >= OPF_ISA_COUNT) {
        return "unknown";
    }
    return opf_isa_names[isa];
}

int opf_cpu_supports(opf_isa isa) {
    switch (isa) {
    case OPF_ISA_SCALAR:
    case OPF_ISA_PORTABLE: return 1;
#if defined(__x86_64__) || defined(__i386__)
    case OPF_ISA_AVX2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case OPF_ISA_AVX512:
        /* (the features that kernel bodies' AVX-512 builds target: OPF__TARGET_AVX512) */
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#else
    case OPF_ISA_AVX2:
    case OPF_ISA_AVX512: return 0;
#endif
    case OPF_ISA_NEON:
#if defined(__aarch64__)
        return 1;
#else
        return 0;
#endif
    }
    return 0;
}

/* Levels form a chain per architecture: scalar < portable < avx2 < avx512 on
 * x86-64, scalar < portable < neon on aarch64. */
static int opf_level_within(opf_isa level, opf_isa cap) {
    if (level == OPF_ISA_NEON || cap == OPF_ISA_NEON) {
        return level == cap || level <= OPF_ISA_PORTABLE;
    }
    return level <= cap;
}

static void opf_use_level(opf_kernels *table, opf_isa level) {
    if (level > table->isa) {
        table->isa = level;
    }
}

/* Size of cache index `index` of CPU 0 from sysfs, if it is a data or
 * unified cache of level `level`; 0 otherwise. */
static size_t opf_sysfs_cache(int index, int level) {
    char path[96], text[32];
    size_t size = 0;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", index);
    FILE *f = fopen(path, "r");
    int found_level = 0;
    if (f == NULL) {
        return 0;
    }
    if (fscanf(f, "%d", &found_level) != 1) {
        found_level = 0;
    }
    fclose(f);
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", index);
    f = fopen(path, "r");
    if (f == NULL || fgets(text, sizeof text, f) == NULL || strncmp(text, "Instruction", 11) == 0 ||
        found_level != level) {
        if (f != NULL) {
            fclose(f);
        }
        return 0;
    }
    fclose(f);
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", index);
    f = fopen(path, "r");
    unsigned long value = 0;
    char unit = 0;
    if (f != NULL && fscanf(f, "%lu%c", &value, &unit) >= 1) {
        size = (size_t)value * (unit == 'K' ? 1024u : unit == 'M' ? 1024u * 1024u : 1u);
    }
    if (f != NULL) {
        fclose(f);
    }
    return size;
}

static opf_cache_sizes opf_detect_caches(void) {
    opf_cache_sizes c = {32 * 1024, 512 * 1024, 8 * 1024 * 1024};
    size_t *fields[4] = {NULL, &c.l1d, &c.l2, &c.l3};
    for (int level = 1; level <= 3; level++) {
        for (int index = 0; index < 8; index++) {
            size_t size = opf_sysfs_cache(index, level);
            if (size > 0) {
                *fields[level] = size;
                break;
            }
        }
    }
    return c;
}

static void opf_build_table(opf_kernels *table, opf_isa cap, opf_cache_sizes caches) {
    memset(table, 0, sizeof *table);
    table->isa = OPF_ISA_SCALAR;
    table->caches = caches;
#define OPF_GEMM_UKERNEL(isa, dtype, mr, nr, fn)                                                                       \
    if (opf_level_within(OPF_ISA_##isa, cap) && opf_cpu_supports(OPF_ISA_##isa)) {                                     \
        table->dtype##_gemm = (opf_gemm_##dtype##_config){fn, mr, nr};                                                 \
        opf_use_level(table, OPF_ISA_##isa);                                                                           \
    }
#include "gemm.inc"
#undef OPF_GEMM_UKERNEL
#define OPF_COPY_UKERNEL(isa, fn)                                                                                      \
    if (opf_level_within(OPF_ISA_##isa, cap) && opf_cpu_supports(OPF_ISA_##isa)) {                                     \
        table->stream_copy = fn;                                                                                       \
    }
#include "copy.inc"
#undef OPF_COPY_UKERNEL
#define OPF_EXP_SUM_UKERNEL(isa, fn)                                                                                   \
    if (opf_level_within(OPF_ISA_##isa, cap) && opf_cpu_supports(OPF_ISA_##isa)) {                                     \
        table->exp_sum_f32 = fn;                                                                                       \
    }
#include "expsum.inc"
#undef OPF_EXP_SUM_UKERNEL
#define OPF_EXP_SUM_BELOW_UKERNEL(isa, fn)                                                                             \
    if (opf_level_within(OPF_ISA_##isa, cap) && opf_cpu_supports(OPF_ISA_##isa)) {                                     \
        table->exp_sum_below_f32 = fn;                                                                                 \
    }
#include "expsumbelow.inc"
#undef OPF_EXP_SUM_BELOW_UKERNEL
#define OPF_MAX_STREAM_UKERNEL(isa, fn)                                                                                \
    if (opf_level_within(OPF_ISA_##isa, cap) && opf_cpu_supports(OPF_ISA_##isa)) {                                     \
        table->max_stream_f32 = fn;                                                                                    \
    }
#include "maxstream.inc"
#undef OPF_MAX_STREAM_UKERNEL
}

static opf_isa opf_isa_from_env(void) {
    const char *forced = getenv("OPFORGE_ISA");
    if (forced != NULL) {
        for (int i = 0; i < OPF_ISA_COUNT; i++) {
            if (strcmp(forced, opf_isa_names[i]) == 0) {
                return (opf_isa)i;
            }
        }
    }
#if defined(__aarch64__)
    return OPF_ISA_NEON;
#else
    return OPF_ISA_AVX512;
#endif
}

static void opf_dispatch_init(void) {
    opf_cache_sizes caches = opf_detect_caches();
    for (int i = 0; i < OPF_ISA_COUNT; i++) {
        opf_table_valid[i] = opf_cpu_supports((opf_isa)i);
        if (opf_table_valid[i]) {
            opf_build_table(&opf_tables[i], (opf_isa)i, caches);
        }
    }
    opf_isa wanted = opf_isa_from_env();
    if (!opf_table_valid[wanted]) {
        wanted = OPF_ISA_PORTABLE;
        for (int i = OPF_ISA_AVX2; i < OPF_ISA_COUNT; i++) {
            if (opf_table_valid[i]) {
                wanted = (opf_isa)i;
            }
        }
    }
    opf_active_isa = wanted;
}

const opf_kernels *opf_kernels_for(opf_isa isa) {
    pthread_once(&opf_dispatch_once, opf_dispatch_init);
    if ((int)isa < 0 || (int)isa >= OPF_ISA_COUNT || !opf_table_valid[isa]) {
        return NULL;
    }
    return &opf_tables[isa];
}

const opf_kernels *opf_kernels_get(void) {
    pthread_once(&opf_dispatch_once, opf_dispatch_init);
    return &opf_tables[opf_active_isa];
}

opf_isa opf_get_isa(void) { return opf_kernels_get()->isa; }
