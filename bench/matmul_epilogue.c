/*
 * matmul_epilogue.c — what fusing an activation into the GEMM saves:
 * act(x @ w + b) as opf_dense then the activation's op (y written to
 * memory, read back, written again), against opf_matmul with the
 * activation's elementwise kernel as its epilogue (the table row's, e.g.
 * opf_op_find(opf_builtin_ops(), "gelu")->eltwise), and the product alone.
 * Activations: relu, silu, gelu (erf) and gelu (tanh). float32, each case
 * timed alternately, the best of REPS; the fused result is checked against
 * the unfused one.
 *
 *   matmul_epilogue [-t THREADS] [-n REPS] N K M [N K M ...]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "opforge.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void fail(const char *what) {
    fprintf(stderr, "matmul_epilogue: %s: %s\n", what, opf_last_error());
    exit(1);
}

int main(int argc, char **argv) {
    int threads = 0, reps = 10, arg = 1;
    for (; arg + 1 < argc && argv[arg][0] == '-'; arg += 2) {
        if (strcmp(argv[arg], "-t") == 0) {
            threads = atoi(argv[arg + 1]);
        } else if (strcmp(argv[arg], "-n") == 0) {
            reps = atoi(argv[arg + 1]);
        }
    }
    if (arg >= argc || (argc - arg) % 3 != 0 || reps < 1) {
        fprintf(stderr, "usage: matmul_epilogue [-t THREADS] [-n REPS] N K M [N K M ...]\n");
        return 2;
    }
    if (threads > 0 && opf_set_num_threads(threads) != OPF_OK) {
        fail("threads");
    }
    static const struct {
        const char *label, *row;
        int64_t attr;
    } acts[] = {{"relu", "relu", 0}, {"silu", "silu", 0}, {"gelu (erf)", "gelu", 0}, {"gelu (tanh)", "gelu", 1}};
    enum { NUM_ACTS = sizeof acts / sizeof acts[0] };
    printf("float32, %d thread(s), best of %d; ISA level %s\n", opf_get_num_threads(), reps,
           opf_isa_name(opf_get_isa()));
    for (; arg + 2 < argc; arg += 3) {
        const int64_t n = atoll(argv[arg]), k = atoll(argv[arg + 1]), m = atoll(argv[arg + 2]);
        const int64_t xs[2] = {n, k}, ws[2] = {k, m}, bs[1] = {m}, ys[2] = {n, m};
        float *x = malloc((size_t)(n * k) * sizeof *x), *w = malloc((size_t)(k * m) * sizeof *w),
              *b = malloc((size_t)m * sizeof *b), *z = malloc((size_t)(n * m) * sizeof *z),
              *y = malloc((size_t)(n * m) * sizeof *y), *fused = malloc((size_t)(n * m) * sizeof *fused);
        if (!x || !w || !b || !z || !y || !fused) {
            fprintf(stderr, "matmul_epilogue: out of memory\n");
            return 1;
        }
        srand(1);
        for (int64_t i = 0; i < n * k; i++) {
            x[i] = (float)rand() / (float)RAND_MAX - 0.5f;
        }
        for (int64_t i = 0; i < k * m; i++) {
            w[i] = ((float)rand() / (float)RAND_MAX - 0.5f) * 0.2f;
        }
        for (int64_t i = 0; i < m; i++) {
            b[i] = (float)rand() / (float)RAND_MAX - 0.5f;
        }
        memset(z, 0, (size_t)(n * m) * sizeof *z); /* (pages touched before timing) */
        memset(y, 0, (size_t)(n * m) * sizeof *y);
        memset(fused, 0, (size_t)(n * m) * sizeof *fused);
        opf_tensor tx = opf_tensor_make(x, OPF_F32, 2, xs), tw = opf_tensor_make(w, OPF_F32, 2, ws),
                   tb = opf_tensor_make(b, OPF_F32, 1, bs), tz = opf_tensor_make(z, OPF_F32, 2, ys),
                   ty = opf_tensor_make(y, OPF_F32, 2, ys), tf = opf_tensor_make(fused, OPF_F32, 2, ys);
        for (int a = 0; a < NUM_ACTS; a++) {
            const opf_op_def *act = opf_op_find(opf_builtin_ops(), acts[a].row);
            if (act == NULL || act->eltwise == NULL) {
                fail(acts[a].row);
            }
            const opf_attr_value attrs[OPF_MAX_ATTRS] = {{.i = acts[a].attr}}; /* gelu: approximate */
            double best[3] = {1e30, 1e30, 1e30};
            for (int r = 0; r < reps + 1; r++) {
                double t0 = now();
                if (opf_matmul(&tx, &tw, &tb, NULL, NULL, &tz) != OPF_OK) {
                    fail("the product");
                }
                double t1 = now();
                if (opf_dense(&tx, &tw, &tb, OPF_ACT_NONE, &tz) != OPF_OK ||
                    opf_op_run(act, (const opf_tensor *[]){&tz}, (const opf_tensor *[]){&ty}, attrs) != OPF_OK) {
                    fail("dense, then the activation");
                }
                double t2 = now();
                if (opf_matmul(&tx, &tw, &tb, act->eltwise, attrs, &tf) != OPF_OK) {
                    fail("opf_matmul with the activation as its epilogue");
                }
                double t3 = now();
                if (r > 0) { /* (the first round warms up) */
                    best[0] = t1 - t0 < best[0] ? t1 - t0 : best[0];
                    best[1] = t2 - t1 < best[1] ? t2 - t1 : best[1];
                    best[2] = t3 - t2 < best[2] ? t3 - t2 : best[2];
                }
            }
            double worst = 0;
            for (int64_t i = 0; i < n * m; i++) {
                const double d = fabs((double)fused[i] - (double)y[i]) / (fabs((double)y[i]) + 1e-30);
                worst = d > worst ? d : worst;
            }
            printf("[%lld, %lld] @ [%lld, %lld], %-11s: product %8.3f ms; dense then %s %8.3f ms (+%.3f); "
                   "fused %8.3f ms (+%.3f): %.2fx; largest relative difference %.1e\n",
                   (long long)n, (long long)k, (long long)k, (long long)m, acts[a].label, best[0] * 1e3, acts[a].row,
                   best[1] * 1e3, (best[1] - best[0]) * 1e3, best[2] * 1e3, (best[2] - best[0]) * 1e3,
                   best[1] / best[2], worst);
        }
        free(x), free(w), free(b), free(z), free(y), free(fused);
    }
    return 0;
}
