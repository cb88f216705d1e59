/*
 * probe.h — the native half of `opforge bench` (the CFFI extension
 * opforge._probe): measures the machine's own limits, so that the benchmark
 * can report opforge's speed as a fraction of what the hardware can do.
 *
 * This is a measuring tool, not part of libopforge's API. Nothing here is
 * used by the library.
 *
 *   - FMA peak: independent chains of fused multiply-adds, compiled per ISA
 *     with __attribute__((target(...))) and run only where
 *     __builtin_cpu_supports says the CPU has that ISA.
 *   - Copy bandwidth: a STREAM-like copy of a buffer into another, with plain
 *     stores, non-temporal stores and the C library's memcpy.
 *
 * Both run on 1..N threads (pthreads): all threads start together, and the
 * time reported is from the first thread's start to the last one's end.
 * The C part only measures one run; repeats and statistics are Python's.
 *
 * The region between the OPFP_CDEF markers is also the CFFI cdef (read by
 * _build_probe.py): plain declarations only.
 */
#ifndef OPFORGE_BENCH_PROBE_H
#define OPFORGE_BENCH_PROBE_H

#include <stddef.h>

/* OPFP_CDEF_BEGIN */

/* ISA levels, numbered as opforge's opf_isa. */
enum { OPFP_ISA_AVX2 = 2, OPFP_ISA_AVX512 = 3 };

/* Copy variants. */
enum { OPFP_COPY_PLAIN = 0, OPFP_COPY_NONTEMPORAL = 1, OPFP_COPY_MEMCPY = 2 };

/* 1 if the CPU has the feature, 0 if not, -1 for a name this probe does not
 * know. Names: "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq". Always 0 off
 * x86. */
int opfp_cpu_has(const char *feature);

/* Floating-point operations one thread does per iteration of the FMA loop of
 * isa (OPFP_ISA_*) for float64 (f64 != 0) or float32; 0 when that loop cannot
 * run here (ISA missing from the CPU or from this build). */
long long opfp_fma_flops_per_iteration(int isa, int f64);

/* Runs the FMA loop for `iterations` iterations on each of `threads` threads;
 * returns the wall time in seconds, or a negative number if the loop cannot
 * run here or a thread could not be started. */
double opfp_fma_seconds(int isa, int f64, long long iterations, int threads);

/* A buffer of `bytes` bytes aligned to 64 (2 MiB and huge pages, where the
 * system allows them, when it is large), every page written once (so later
 * copies do not measure page faults); NULL when out of memory. */
void *opfp_buffer_new(size_t bytes);
void opfp_buffer_free(void *buffer);

/* 1 if the copy variant runs here (non-temporal stores need x86-64). */
int opfp_copy_available(int kind);

/* Copies `bytes` bytes from src to dst (both from opfp_buffer_new; bytes a
 * multiple of 128) split into `threads` contiguous parts, one per thread;
 * returns the wall time in seconds, or a negative number on a bad argument or
 * when a thread could not be started. */
double opfp_copy_seconds(int kind, void *dst, const void *src, size_t bytes, int threads);
/* OPFP_CDEF_END */

#endif
