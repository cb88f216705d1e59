/*
 * isa_bits.c — prints a hash of every output of the row ops (layer_norm,
 * rms_norm, softmax, log_softmax) on fixed inputs, rows of 1 to 5000
 * elements, float32 and float64, one line a case. `make test-isa-bits` runs
 * it at every ISA level (OPFORGE_ISA) and compares the lines: the AVX2 and
 * AVX-512 builds of a kernel must give the same bits (they fuse the same
 * operations; a body may take other loops on each, as layer_norm's
 * statistics do, but in the same order of additions), and so must every
 * build of layer_norm and rms_norm, whose arithmetic has nothing to fuse.
 * Then the column sums of the broadcasting gradients (sum_to over the rows:
 * each column's adds in one order at every level, whatever its vectors).
 */
#include <math.h>
#include <opforge.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* FNV-1a over the bytes. */
static uint64_t isa_bits_hash(const void *p, size_t bytes) {
    uint64_t h = 1469598103934665603u;
    for (size_t i = 0; i < bytes; i++) {
        h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211u;
    }
    return h;
}

/* A value in [-40, 60), the first of each row 1000 larger (layer_norm's
 * centre then lies far from the row's mean: its second pass). */
static double isa_bits_value(uint32_t *state, int64_t i, int64_t n) {
    *state = *state * 1103515245u + 12345u;
    return (double)((*state >> 8) % 100000) / 1000.0 - 40.0 + (i % n == 0 ? 1000.0 : 0.0);
}

static void isa_bits_put(void *p, opf_dtype dtype, int64_t i, double v) {
    if (dtype == OPF_F64) {
        ((double *)p)[i] = v;
    } else {
        ((float *)p)[i] = (float)v;
    }
}

/* sum_to(x[rows, n], like[n]) for each n of lens, float32 and float64. */
static int isa_bits_column_sums(const int64_t *lens, size_t count, int64_t rows, uint32_t *state) {
    const opf_op_def *op = opf_op_find(opf_builtin_ops(), "sum_to");
    if (op == NULL) {
        fprintf(stderr, "isa_bits: no op sum_to\n");
        return 1;
    }
    for (int f64 = 0; f64 < 2; f64++) {
        for (size_t l = 0; l < count; l++) {
            const opf_dtype dtype = f64 ? OPF_F64 : OPF_F32;
            const int64_t n = lens[l];
            const size_t elem = f64 ? 8 : 4;
            void *x = malloc((size_t)(rows * n) * elem), *y = malloc((size_t)n * elem), *like = calloc((size_t)n, elem);
            if (!x || !y || !like) {
                fprintf(stderr, "isa_bits: out of memory\n");
                return 1;
            }
            for (int64_t i = 0; i < rows * n; i++) { /* (scaled by 2^-40 .. 2^40: doubles' sums of them round) */
                const double v = isa_bits_value(state, i, n);
                isa_bits_put(x, dtype, i, ldexp(v, (int)(*state >> 8) % 81 - 40));
            }
            int64_t shape[2] = {rows, n}, vec[1] = {n};
            opf_tensor tx = opf_tensor_make(x, dtype, 2, shape), ty = opf_tensor_make(y, dtype, 1, vec);
            opf_tensor tl = opf_tensor_make(like, dtype, 1, vec);
            const opf_tensor *ins[2] = {&tx, &tl}, *outs[1] = {&ty};
            opf_attr_value attrs[OPF_MAX_ATTRS];
            opf_op_default_attrs(op, attrs);
            if (opf_op_run(op, ins, outs, attrs) != OPF_OK) {
                fprintf(stderr, "isa_bits: sum_to: %s\n", opf_last_error());
                return 1;
            }
            printf("sum_to %s %lldx%lld: %016llx\n", f64 ? "float64" : "float32", (long long)rows, (long long)n,
                   (unsigned long long)isa_bits_hash(y, (size_t)n * elem));
            free(x), free(y), free(like);
        }
    }
    return 0;
}

/* softmax and log_softmax, float32, on rows whose one pass guesses its shift
 * from the first 32 and last n % 32 elements (all -50 here) and finds one x
 * 87.95 to 88.85 above it (row r: 87.95 + 0.025 r), the others 10 to 80
 * above: the guess holds or not (an e above 2^127, or its sum) on the same
 * rows at every level that has the one pass (its kernel: AVX2, AVX-512).
 * The scalar and portable levels take the maximum's pass on every row: the
 * quotients then round otherwise where the guess is not the maximum (the
 * lines marked "(vector levels)", compared among those levels only). */
static int isa_bits_guessed_rows(uint32_t *state) {
    static const char *const ops[] = {"softmax", "log_softmax"};
    static const int64_t lens[] = {256, 1000, 4096};
    const int64_t rows = 37;
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        const opf_op_def *op = opf_op_find(opf_builtin_ops(), ops[o]);
        if (op == NULL) {
            fprintf(stderr, "isa_bits: no op %s\n", ops[o]);
            return 1;
        }
        for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
            const int64_t n = lens[l];
            float *x = malloc((size_t)(rows * n) * sizeof(float)), *y = malloc((size_t)(rows * n) * sizeof(float));
            if (!x || !y) {
                fprintf(stderr, "isa_bits: out of memory\n");
                return 1;
            }
            for (int64_t i = 0; i < rows * n; i++) {
                const int64_t j = i % n;
                const int guessed_from = j < 32 || j >= n - n % 32;
                *state = *state * 1103515245u + 12345u;
                x[i] = guessed_from ? -50.0f : -40.0f + (float)((*state >> 8) % 70000) / 1000.0f;
                x[i] = j == n / 2 ? -50.0f + 87.95f + 0.025f * (float)(i / n) : x[i];
            }
            int64_t shape[2] = {rows, n};
            opf_tensor tx = opf_tensor_make(x, OPF_F32, 2, shape), ty = opf_tensor_make(y, OPF_F32, 2, shape);
            const opf_tensor *ins[1] = {&tx}, *outs[1] = {&ty};
            if (opf_op_run(op, ins, outs, NULL) != OPF_OK) {
                fprintf(stderr, "isa_bits: %s\n", opf_last_error());
                return 1;
            }
            printf("%s float32 %lld, guessed shifts (vector levels): %016llx\n", ops[o], (long long)n,
                   (unsigned long long)isa_bits_hash(y, (size_t)(rows * n) * sizeof(float)));
            free(x), free(y);
        }
    }
    return 0;
}

int main(void) {
    static const char *const ops[] = {"layer_norm", "rms_norm", "softmax", "log_softmax"};
    static const int64_t lens[] = {1, 7, 63, 64, 65, 100, 256, 513, 1000, 4096, 5000};
    const int64_t rows = 37;
    uint32_t state = 12345u;
    fprintf(stderr, "isa_bits: level %s\n", opf_isa_name(opf_get_isa()));
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        const opf_op_def *op = opf_op_find(opf_builtin_ops(), ops[o]);
        if (op == NULL) {
            fprintf(stderr, "isa_bits: no op %s\n", ops[o]);
            return 1;
        }
        for (int f64 = 0; f64 < 2; f64++) {
            for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
                const opf_dtype dtype = f64 ? OPF_F64 : OPF_F32;
                const int64_t n = lens[l];
                const size_t elem = f64 ? 8 : 4;
                void *x = malloc((size_t)(rows * n) * elem), *y = malloc((size_t)(rows * n) * elem);
                void *w = malloc((size_t)n * elem), *b = malloc((size_t)n * elem);
                void *mean = malloc((size_t)rows * elem), *rstd = malloc((size_t)rows * elem);
                if (!x || !y || !w || !b || !mean || !rstd) {
                    fprintf(stderr, "isa_bits: out of memory\n");
                    return 1;
                }
                for (int64_t i = 0; i < rows * n; i++) {
                    isa_bits_put(x, dtype, i, isa_bits_value(&state, i, n));
                }
                for (int64_t i = 0; i < n; i++) {
                    isa_bits_put(w, dtype, i, 1.0 + (double)i * 1e-3);
                    isa_bits_put(b, dtype, i, (double)i * 1e-2);
                }
                int64_t shape[2] = {rows, n}, vec[1] = {n}, per_row[1] = {rows};
                opf_tensor tx = opf_tensor_make(x, dtype, 2, shape), ty = opf_tensor_make(y, dtype, 2, shape);
                opf_tensor tw = opf_tensor_make(w, dtype, 1, vec), tb = opf_tensor_make(b, dtype, 1, vec);
                opf_tensor tm = opf_tensor_make(mean, dtype, 1, per_row), ts = opf_tensor_make(rstd, dtype, 1, per_row);
                const int norm = o == 0, rms = o == 1;
                const opf_tensor *ins[3] = {&tx, norm || rms ? &tw : NULL, norm ? &tb : NULL};
                const opf_tensor *outs[3] = {&ty, norm ? &tm : rms ? &ts : NULL, norm ? &ts : NULL};
                opf_attr_value attrs[OPF_MAX_ATTRS];
                opf_op_default_attrs(op, attrs);
                if (opf_op_run(op, ins, outs, attrs) != OPF_OK) {
                    fprintf(stderr, "isa_bits: %s\n", opf_last_error());
                    return 1;
                }
                printf("%s %s %lld: %016llx", ops[o], f64 ? "float64" : "float32", (long long)n,
                       (unsigned long long)isa_bits_hash(y, (size_t)(rows * n) * elem));
                if (norm) {
                    printf(" %016llx", (unsigned long long)isa_bits_hash(mean, (size_t)rows * elem));
                }
                if (norm || rms) {
                    printf(" %016llx", (unsigned long long)isa_bits_hash(rstd, (size_t)rows * elem));
                }
                printf("\n");
                free(x), free(y), free(w), free(b), free(mean), free(rstd);
            }
        }
    }
    /* and an input of more than 16 MiB, summed in pieces of each row (a short
     * last piece, a short last tile of rows) */
    static const int64_t far_len[] = {4100};
    return isa_bits_guessed_rows(&state) || isa_bits_column_sums(lens, sizeof lens / sizeof lens[0], rows, &state) ||
           isa_bits_column_sums(far_len, 1, 1029, &state);
}
