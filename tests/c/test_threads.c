/*
 * test_threads.c — ops called from several pthreads at once, on separate
 * buffers, while one thread keeps failing on purpose and another keeps
 * changing the pool's thread count: every thread gets correct results (the
 * same bits every iteration) and only its own error messages.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "reference.h"

enum { NUM_WORKERS = 5 };

typedef struct worker {
    int id;
    opf_dtype dt;
    int iterations;
    size_t n;          /* elementwise size */
    int64_t N, K, M;   /* dense shape */
    int failures_seen; /* iterations whose results were wrong */
} worker;

static atomic_int stop_toggling;

static const char *dt_name(opf_dtype dt) { return dt == OPF_F32 ? "f32" : "f64"; }

static void *worker_main(void *arg) {
    worker *w = arg;
    const opf_dtype dt = w->dt;
    const size_t esz = opf_dtype_size(dt), n = w->n;
    const int64_t shape[1] = {(int64_t)n};
    rng r = rng_seed(1000u + (uint64_t)w->id);

    void *a = xcalloc(n, esz), *b = xcalloc(n, esz), *y = xcalloc(n, esz), *want_relu = xcalloc(n, esz),
         *want_add = xcalloc(n, esz), *want_scale = xcalloc(n, esz);
    fill_special(&r, dt, a, n);
    fill_special(&r, dt, b, n);
    const double alpha = 0.25 + w->id;
    if (dt == OPF_F32) {
        ref_relu_array_f32(n, a, want_relu);
        ref_add_array_f32(n, a, b, want_add);
        ref_scale_array_f32(n, (float)alpha, a, want_scale);
    } else {
        ref_relu_array_f64(n, a, want_relu);
        ref_add_array_f64(n, a, b, want_add);
        ref_scale_array_f64(n, alpha, a, want_scale);
    }
    opf_tensor ta = opf_tensor_make(a, dt, 1, shape), tb = opf_tensor_make(b, dt, 1, shape),
               ty = opf_tensor_make(y, dt, 1, shape);

    /* Dense: x [N,K], w [K,M], b [M] -> y [N,M]. */
    const int64_t N = w->N, K = w->K, M = w->M;
    const int64_t xs[2] = {N, K}, ws[2] = {K, M}, bs[1] = {M}, ys[2] = {N, M};
    void *dx = xcalloc((size_t)(N * K), esz), *dw = xcalloc((size_t)(K * M), esz), *db = xcalloc((size_t)M, esz),
         *dy = xcalloc((size_t)(N * M), esz), *first = xcalloc((size_t)(N * M), esz);
    fill_uniform(&r, dt, dx, (size_t)(N * K), -1, 1);
    fill_uniform(&r, dt, dw, (size_t)(K * M), -1, 1);
    fill_uniform(&r, dt, db, (size_t)M, -1, 1);
    double *x64 = xcalloc((size_t)(N * K), sizeof(double)), *w64 = xcalloc((size_t)(K * M), sizeof(double)),
           *b64 = xcalloc((size_t)M, sizeof(double)), *want = xcalloc((size_t)(N * M), sizeof(double)),
           *tol = xcalloc((size_t)(N * M), sizeof(double)), *got = xcalloc((size_t)(N * M), sizeof(double));
    for (int64_t i = 0; i < N * K; i++) {
        x64[i] = dt == OPF_F32 ? (double)((float *)dx)[i] : ((double *)dx)[i];
    }
    for (int64_t i = 0; i < K * M; i++) {
        w64[i] = dt == OPF_F32 ? (double)((float *)dw)[i] : ((double *)dw)[i];
    }
    for (int64_t i = 0; i < M; i++) {
        b64[i] = dt == OPF_F32 ? (double)((float *)db)[i] : ((double *)db)[i];
    }
    ref_dense((size_t)N, (size_t)K, (size_t)M, x64, w64, b64, 1, ref_eps(dt == OPF_F64), want, tol);
    opf_tensor tx = opf_tensor_make(dx, dt, 2, xs), tw = opf_tensor_make(dw, dt, 2, ws),
               tbias = opf_tensor_make(db, dt, 1, bs), tdy = opf_tensor_make(dy, dt, 2, ys);

    char ctx[128];
    for (int it = 0; it < w->iterations; it++) {
        snprintf(ctx, sizeof ctx, "worker %d (%s) iteration %d", w->id, dt_name(dt), it);
        int before = harness_test_failures();
        CHECK(opf_relu(&ta, &ty) == OPF_OK, "%s: relu: %s", ctx, opf_last_error());
        if (dt == OPF_F32) {
            CHECK_CLOSE_F32(y, want_relu, n, 0, 0, "%s: relu", ctx);
        } else {
            CHECK_CLOSE_F64(y, want_relu, n, 0, 0, "%s: relu", ctx);
        }
        CHECK(opf_add(&ta, &tb, &ty) == OPF_OK, "%s: add: %s", ctx, opf_last_error());
        if (dt == OPF_F32) {
            CHECK_CLOSE_F32(y, want_add, n, 0, 0, "%s: add", ctx);
        } else {
            CHECK_CLOSE_F64(y, want_add, n, 0, 0, "%s: add", ctx);
        }
        CHECK(opf_scale(&ta, alpha, &ty) == OPF_OK, "%s: scale: %s", ctx, opf_last_error());
        if (dt == OPF_F32) {
            CHECK_CLOSE_F32(y, want_scale, n, 0, 0, "%s: scale", ctx);
        } else {
            CHECK_CLOSE_F64(y, want_scale, n, 0, 0, "%s: scale", ctx);
        }
        CHECK(opf_dense(&tx, &tw, &tbias, OPF_ACT_RELU, &tdy) == OPF_OK, "%s: dense: %s", ctx, opf_last_error());
        for (int64_t i = 0; i < N * M; i++) {
            got[i] = dt == OPF_F32 ? (double)((float *)dy)[i] : ((double *)dy)[i];
        }
        CHECK_CLOSE_TOL(got, want, tol, (size_t)(N * M), "%s: dense", ctx);
        if (it == 0) {
            memcpy(first, dy, (size_t)(N * M) * esz);
        } else {
            CHECK_SAME_BITS(dy, first, (size_t)(N * M), esz, "%s: dense differs from iteration 0", ctx);
        }
        CHECK(opf_last_error()[0] == '\0', "%s: a thread without failures sees the message \"%s\"", ctx,
              opf_last_error());
        if (harness_test_failures() != before) {
            w->failures_seen++;
            break; /* one report per worker is enough */
        }
    }
    free(a), free(b), free(y), free(want_relu), free(want_add), free(want_scale);
    free(dx), free(dw), free(db), free(dy), free(first);
    free(x64), free(w64), free(b64), free(want), free(tol), free(got);
    return NULL;
}

/* Fails on purpose, in two ways, and checks each time that the message is its own. */
static void *failing_main(void *arg) {
    worker *w = arg;
    float a[6] = {0}, b[6] = {0}, c[6] = {0}, big[24] = {0};
    const int64_t s23[2] = {2, 3}, s32[2] = {3, 2}, s234[3] = {2, 3, 4}, s44[2] = {4, 4};
    opf_tensor ta = opf_tensor_make(a, OPF_F32, 2, s23), tb = opf_tensor_make(b, OPF_F32, 2, s32),
               ty = opf_tensor_make(c, OPF_F32, 2, s23), x3 = opf_tensor_make(big, OPF_F32, 3, s234),
               w44 = opf_tensor_make(big, OPF_F32, 2, s44);
    char msg[512];
    for (int it = 0; it < w->iterations * 4; it++) {
        if (it % 2 == 0) {
            opf_status st = opf_add(&ta, &tb, &ty);
            last_error_copy(msg, sizeof msg);
            CHECK(st == OPF_E_SHAPE && strstr(msg, "opforge.add") && strstr(msg, "[2,3]") && strstr(msg, "[3,2]"),
                  "failing thread, iteration %d: opf_add gave %s \"%s\"", it, opf_status_name(st), msg);
        } else {
            opf_status st = opf_dense(&x3, &w44, NULL, OPF_ACT_NONE, &ty);
            last_error_copy(msg, sizeof msg);
            CHECK(st == OPF_E_SHAPE && strstr(msg, "opforge.dense") && strstr(msg, "x"),
                  "failing thread, iteration %d: opf_dense gave %s \"%s\"", it, opf_status_name(st), msg);
        }
        /* A valid call in between clears nothing it should not: the next failure is again ours. */
        CHECK(opf_relu(&ta, &ty) == OPF_OK, "failing thread: valid relu: %s", opf_last_error());
    }
    return NULL;
}

/* Changes the pool's thread count while the others run. */
static void *toggling_main(void *arg) {
    (void)arg;
    int k = 0;
    while (!atomic_load(&stop_toggling)) {
        CHECK(opf_set_num_threads(1 + (k++ % 4)) == OPF_OK, "opf_set_num_threads: %s", opf_last_error());
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

TEST(test_concurrent_ops) {
    const int saved = opf_get_num_threads();
    const int slow = harness_slow();
    worker workers[NUM_WORKERS + 1];
    pthread_t threads[NUM_WORKERS + 1], toggler;
    atomic_store(&stop_toggling, 0);
    for (int i = 0; i <= NUM_WORKERS; i++) {
        workers[i] = (worker){
            .id = i,
            .dt = i % 2 ? OPF_F64 : OPF_F32,
            .iterations = slow ? 2 : 40,
            .n = slow ? 5000 + (size_t)i : (size_t)(1 << 17) + (size_t)i * 7,
            .N = 33 + i,
            .K = slow ? 20 : 96,
            .M = slow ? 17 : 80 + 3 * i,
        };
    }
    int created = 0;
    CHECK(pthread_create(&toggler, NULL, toggling_main, NULL) == 0, "pthread_create toggler");
    for (int i = 0; i <= NUM_WORKERS; i++) {
        void *(*fn)(void *) = i == NUM_WORKERS ? failing_main : worker_main;
        if (CHECK(pthread_create(&threads[i], NULL, fn, &workers[i]) == 0, "pthread_create %d", i)) {
            created++;
        }
    }
    for (int i = 0; i < created; i++) {
        pthread_join(threads[i], NULL);
    }
    atomic_store(&stop_toggling, 1);
    pthread_join(toggler, NULL);
    CHECK(opf_set_num_threads(saved) == OPF_OK, "restore thread count");
}

/* Dense from several threads at once: one gets the pool, the others run
 * serially in their own thread; all must be exact. */
typedef struct dense_job {
    int id;
    float *x, *w, *y;
    int64_t n;
} dense_job;

static void *dense_only(void *arg) {
    dense_job *j = arg;
    const int64_t s[2] = {j->n, j->n};
    opf_tensor x = opf_tensor_make(j->x, OPF_F32, 2, s), w = opf_tensor_make(j->w, OPF_F32, 2, s),
               y = opf_tensor_make(j->y, OPF_F32, 2, s);
    for (int it = 0; it < 3; it++) {
        CHECK(opf_dense(&x, &w, NULL, OPF_ACT_NONE, &y) == OPF_OK, "dense_only %d: %s", j->id, opf_last_error());
    }
    return NULL;
}

TEST(test_concurrent_dense_identity) {
    /* x · I = x, from 4 threads at once, exactly. */
    const int64_t n = harness_slow() ? 24 : 150;
    const int num = 4;
    dense_job jobs[4];
    pthread_t t[4];
    float *eye = xcalloc((size_t)(n * n), sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        eye[i * n + i] = 1.0f;
    }
    for (int i = 0; i < num; i++) {
        jobs[i] =
            (dense_job){i, xcalloc((size_t)(n * n), sizeof(float)), eye, xcalloc((size_t)(n * n), sizeof(float)), n};
        rng r = rng_seed(50u + (uint64_t)i);
        fill_uniform_f32(&r, jobs[i].x, (size_t)(n * n), -100, 100);
    }
    for (int i = 0; i < num; i++) {
        pthread_create(&t[i], NULL, dense_only, &jobs[i]);
    }
    for (int i = 0; i < num; i++) {
        pthread_join(t[i], NULL);
    }
    for (int i = 0; i < num; i++) {
        CHECK_SAME_BITS(jobs[i].y, jobs[i].x, (size_t)(n * n), sizeof(float), "thread %d: x · I", i);
        free(jobs[i].x);
        free(jobs[i].y);
    }
    free(eye);
}

int main(void) {
    RUN_TEST(test_concurrent_ops);
    RUN_TEST(test_concurrent_dense_identity);
    return harness_summary();
}
