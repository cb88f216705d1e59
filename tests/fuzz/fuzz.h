/*
 * fuzz.h — shared by opforge's fuzz targets (tests/fuzz/fuzz_*.c).
 *
 * Each target defines LLVMFuzzerTestOneInput. It is built two ways: with
 * libFuzzer (clang -fsanitize=fuzzer,address,undefined; `make fuzz`,
 * `make test-fuzz`), and as a plain program with replay.c's main, which runs
 * it once on every file or directory of files named on its command line
 * (any compiler; `make test-fuzz` replays the checked-in corpus that way with
 * gcc's ASan + UBSan).
 *
 * A target checks what it can against a model written from the documented
 * contract (include/opforge.h, README) and calls FUZZ_FAIL on a mismatch,
 * which prints the reason and aborts: libFuzzer then saves the input as a
 * crash. Sanitizer reports abort the same way (-fno-sanitize-recover).
 */
#ifndef OPF_FUZZ_H
#define OPF_FUZZ_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#if defined(__GNUC__)
#define FUZZ_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define FUZZ_NORETURN __attribute__((noreturn))
#else
#define FUZZ_PRINTF(a, b)
#define FUZZ_NORETURN
#endif

static inline void fuzz_fail(const char *file, int line, const char *fmt, ...) FUZZ_PRINTF(3, 4) FUZZ_NORETURN;
static inline void fuzz_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "\n%s:%d: FUZZ FAILURE: ", file, line);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    fflush(stderr);
    abort();
}

#define FUZZ_FAIL(...) fuzz_fail(__FILE__, __LINE__, __VA_ARGS__)

/* Reads the input front to back; past its end every read is 0, so any input
 * decodes to something. */
typedef struct fuzz_reader {
    const uint8_t *data;
    size_t size, pos;
} fuzz_reader;

static inline uint8_t fuzz_u8(fuzz_reader *r) { return r->pos < r->size ? r->data[r->pos++] : 0; }

static inline uint32_t fuzz_u32(fuzz_reader *r) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        v = v << 8 | fuzz_u8(r);
    }
    return v;
}

static inline uint64_t fuzz_u64(fuzz_reader *r) { return (uint64_t)fuzz_u32(r) << 32 | fuzz_u32(r); }

/* An index into a list of n choices (n > 0). */
static inline size_t fuzz_pick(fuzz_reader *r, size_t n) { return fuzz_u8(r) % n; }

/* True with probability about k/256 (false past the end of the input). */
static inline int fuzz_chance(fuzz_reader *r, unsigned k) { return fuzz_u8(r) >= 256 - k; }

#define FUZZ_PICK(r, array) ((array)[fuzz_pick((r), sizeof(array) / sizeof((array)[0]))])

#endif
