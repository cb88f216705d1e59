/*
 * harness.h — a tiny test harness for opforge's C tests (no framework).
 *
 *   TEST(test_foo) { CHECK(x == 1, "x is %d", x); }
 *   int main(void) { RUN_TEST(test_foo); return harness_summary(); }
 *
 * CHECK records a failure (file:line, the condition, a message) and lets the
 * test continue; it evaluates to 1 when the condition held, 0 otherwise, so a
 * test can bail out with `if (!CHECK(...)) return;`. A test passes when it
 * recorded no failure. harness_summary() prints "N passed, N failed" (tests,
 * not checks; CI parses that line) and returns the exit status: 1 if anything
 * failed, else 0. Tests generated at run time (one per registry line, say)
 * use harness_begin()/harness_end() instead of RUN_TEST.
 *
 * Also here: NaN-aware array comparisons, a fixed-seed PRNG with fills that
 * mix in special values, guarded buffers, and strided tensor views.
 */
#ifndef OPF_TEST_HARNESS_H
#define OPF_TEST_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "opforge.h"

#if defined(__GNUC__)
#define HARNESS_PRINTF(fmt_index, first_arg) __attribute__((format(printf, fmt_index, first_arg)))
#else
#define HARNESS_PRINTF(fmt_index, first_arg)
#endif

/* ------------------------------------------------------------------------ */
/* Tests and checks                                                          */
/* ------------------------------------------------------------------------ */

typedef void (*harness_test_fn)(void);

#define TEST(name) static void name(void)
#define RUN_TEST(name) harness_run(#name, name)

#define CHECK(cond, ...) harness_ok((cond) ? 1 : (harness_fail(__FILE__, __LINE__, #cond, __VA_ARGS__), 0))

/* Identity: keeps a CHECK on a constant condition from being an expression
 * statement "with no effect". */
static inline int harness_ok(int ok) { return ok; }

void harness_run(const char *name, harness_test_fn fn);
void harness_begin(const char *name);
void harness_end(void);
/* Prints "SKIP <name>: <why>"; a skipped test counts neither way. */
void harness_skip(const char *name, const char *fmt, ...) HARNESS_PRINTF(2, 3);
/* Records a failure in the current test (what CHECK calls). */
void harness_fail(const char *file, int line, const char *cond, const char *fmt, ...) HARNESS_PRINTF(4, 5);
/* Failures recorded so far in the current test. */
int harness_test_failures(void);
/* Prints the summary line and returns the process exit status. */
int harness_summary(void);
/* Whether the tests run under valgrind (OPFORGE_VALGRIND set, as `make
 * test-valgrind` does): tests then shrink their largest sizes. */
int harness_slow(void);

/* ------------------------------------------------------------------------ */
/* Comparisons (each returns 1 when equal, else records one failure naming   */
/* the first mismatching index, both values, and the mismatch count)         */
/* ------------------------------------------------------------------------ */

/* |got - want| <= atol + rtol * |want|; NaN equals NaN; infinities must
 * match exactly; +0 equals -0. */
#define CHECK_CLOSE_F32(got, want, n, atol, rtol, ...)                                                                 \
    harness_close_f32(__FILE__, __LINE__, (got), (want), (n), (atol), (rtol), __VA_ARGS__)
#define CHECK_CLOSE_F64(got, want, n, atol, rtol, ...)                                                                 \
    harness_close_f64(__FILE__, __LINE__, (got), (want), (n), (atol), (rtol), __VA_ARGS__)
/* Per-element tolerance: |got[i] - want[i]| <= tol[i] (NaN equals NaN). */
#define CHECK_CLOSE_TOL(got, want, tol, n, ...)                                                                        \
    harness_close_tol(__FILE__, __LINE__, (got), (want), (tol), (n), __VA_ARGS__)
/* Identical bytes, element by element (elem_size 4 or 8 prints floats). */
#define CHECK_SAME_BITS(got, want, n, elem_size, ...)                                                                  \
    harness_same_bits(__FILE__, __LINE__, (got), (want), (n), (elem_size), __VA_ARGS__)
/* Every byte of p[0 .. nbytes) equals `byte`. */
#define CHECK_BYTES(p, nbytes, byte, ...) harness_bytes_are(__FILE__, __LINE__, (p), (nbytes), (byte), __VA_ARGS__)
/* haystack contains needle (either may be NULL, which fails). */
#define CHECK_CONTAINS(haystack, needle) harness_contains(__FILE__, __LINE__, #haystack, (haystack), (needle))

int harness_close_f32(const char *file, int line, const float *got, const float *want, size_t n, double atol,
                      double rtol, const char *fmt, ...) HARNESS_PRINTF(8, 9);
int harness_close_f64(const char *file, int line, const double *got, const double *want, size_t n, double atol,
                      double rtol, const char *fmt, ...) HARNESS_PRINTF(8, 9);
int harness_close_tol(const char *file, int line, const double *got, const double *want, const double *tol, size_t n,
                      const char *fmt, ...) HARNESS_PRINTF(7, 8);
int harness_same_bits(const char *file, int line, const void *got, const void *want, size_t n, size_t elem_size,
                      const char *fmt, ...) HARNESS_PRINTF(7, 8);
int harness_bytes_are(const char *file, int line, const void *p, size_t nbytes, unsigned char byte, const char *fmt,
                      ...) HARNESS_PRINTF(6, 7);
int harness_contains(const char *file, int line, const char *what, const char *haystack, const char *needle);

/* ------------------------------------------------------------------------ */
/* Fixed-seed PRNG (splitmix64) and fills                                    */
/* ------------------------------------------------------------------------ */

typedef struct rng {
    uint64_t state;
} rng;

rng rng_seed(uint64_t seed);
uint64_t rng_next(rng *r);
/* Uniform in [lo, hi). */
double rng_uniform(rng *r, double lo, double hi);
/* Uniform integer in [0, n) (n > 0). */
uint64_t rng_below(rng *r, uint64_t n);

/* Uniform values in [lo, hi). */
void fill_uniform_f32(rng *r, float *x, size_t n, double lo, double hi);
void fill_uniform_f64(rng *r, double *x, size_t n, double lo, double hi);
/* Ordinary values mixed with ~30% specials: +-0, +-Inf, NaN (both signs),
 * denormals, the smallest normal, the largest finite, large values. */
void fill_special_f32(rng *r, float *x, size_t n);
void fill_special_f64(rng *r, double *x, size_t n);
/* By dtype (OPF_F32 or OPF_F64). */
void fill_uniform(rng *r, opf_dtype dtype, void *x, size_t n, double lo, double hi);
void fill_special(rng *r, opf_dtype dtype, void *x, size_t n);

/* ------------------------------------------------------------------------ */
/* Memory                                                                    */
/* ------------------------------------------------------------------------ */

/* The byte that guard memory is filled with. */
#define HARNESS_GUARD_BYTE 0xA5

/* calloc that fails the test program loudly when out of memory. */
void *xcalloc(size_t count, size_t size);
void *xmalloc(size_t size);

/* The table `decl` declares, resolved on first use into *table (release it
 * with opf_ops_release at the end of main); a table that does not resolve
 * is a test failure, and NULL. */
const opf_op_table *resolve_once(const opf_ops_decl *decl, const opf_op_table **table);

/* ------------------------------------------------------------------------ */
/* Tensor views over owned memory, in any layout                             */
/* ------------------------------------------------------------------------ */

typedef enum tv_layout {
    TV_CONTIG = 0,     /* strides == NULL */
    TV_CONTIG_STRIDES, /* C-contiguous, with explicit strides */
    TV_TRANSPOSED,     /* Fortran order: dim 0 fastest */
    TV_STEP2,          /* every other element, rows padded */
    TV_NEGATIVE,       /* C order, every stride negated */
    TV_BROADCAST,      /* stride 0 on dim 0 (inputs only) */
    TV_LAYOUT_COUNT
} tv_layout;

const char *tv_layout_name(tv_layout layout);

/* A view over its own allocation. Memory around and between the elements is
 * filled with HARNESS_GUARD_BYTE and can be checked untouched. */
typedef struct tview {
    opf_tensor t;
    int64_t shape[OPF_MAX_RANK];
    int64_t strides[OPF_MAX_RANK];
    unsigned char *alloc;
    size_t alloc_bytes;
    size_t elem;
    size_t numel;
} tview;

/* Makes a view of `dtype` and `shape` in `layout`, with byte_offset set to
 * `offset_elems` elements (data points that much before element 0). */
void tv_make(tview *v, opf_dtype dtype, int32_t ndim, const int64_t *shape, tv_layout layout, int offset_elems);
void tv_free(tview *v);
/* Address of the element with C-order linear index i. */
void *tv_at(const tview *v, size_t i);
/* Copies the elements, in C order, to/from a contiguous array. */
void tv_gather(const tview *v, void *dst);
void tv_scatter(const tview *v, const void *src);
/* Fills with PRNG values (special or uniform [-1,1)) and returns them in C
 * order in `out` (which may be NULL); for a broadcast view the returned values
 * are what the elements read back as. */
void tv_fill(tview *v, rng *r, int special, void *out);
/* Whether every byte of the allocation that no element covers still holds
 * HARNESS_GUARD_BYTE (records a failure if not). */
#define CHECK_TV_GUARDS(v, ...) harness_tv_guards(__FILE__, __LINE__, (v), __VA_ARGS__)
int harness_tv_guards(const char *file, int line, const tview *v, const char *fmt, ...) HARNESS_PRINTF(4, 5);

/* "[2,3]" into buf. */
const char *fmt_shape(char *buf, size_t cap, int32_t ndim, const int64_t *shape);

/* Copies opf_last_error() (valid only until the next call) into buf. */
const char *last_error_copy(char *buf, size_t cap);

#endif
