/*
 * threadpool.c — a small pthread pool: one job at a time, chunks handed out
 * from a shared counter, the submitting thread working alongside.
 *
 * State: the pool below is, with the dispatch tables, the library's only
 * global mutable state. One job runs at a time (`submit` is held while it
 * does); a second caller does not wait for it but runs its work serially.
 *
 * Waking a thread blocked in pthread_cond_wait takes tens to hundreds of
 * microseconds on a busy or virtualised machine: as long as a medium GEMM.
 * So a worker that finished a job spins (pause instructions, no lock) on the
 * job counter for a while before it blocks, and so does the submitter
 * waiting for the last chunk: back-to-back calls (a training step) then start
 * their chunks at once. The spin is bounded (200 us; OPFORGE_SPIN_US sets it,
 * 0 turns it off), so an idle pool sleeps.
 */
#include "threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "opforge.h"

enum { OPF_MAX_THREADS = 256 };
/* How long a thread spins for the next job, or for a job's last chunk, before
 * blocking, unless OPFORGE_SPIN_US says otherwise (0: never spin). */
enum { OPF_SPIN_US_DEFAULT = 200, OPF_SPIN_US_MAX = 100000 };

typedef struct opf_pool {
    pthread_mutex_t submit; /* held by the thread whose job is running */
    pthread_mutex_t lock;   /* guards everything below */
    pthread_cond_t wake;    /* a job was posted, or shutdown */
    pthread_cond_t done;    /* the last chunk of a job finished */
    int num_workers;
    pthread_t workers[OPF_MAX_THREADS];
    atomic_uint_fast64_t generation; /* written under lock; read without it while spinning */
    int shutdown;
    /* The current job. */
    opf_range_fn fn;
    void *ctx;
    int64_t n, grain_per_chunk, num_chunks, next_chunk;
    atomic_int_fast64_t unfinished; /* written under lock; read without it while spinning */
} opf_pool;

static opf_pool opf_the_pool = {
    .submit = PTHREAD_MUTEX_INITIALIZER,
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
    .done = PTHREAD_COND_INITIALIZER,
};
static atomic_int opf_num_threads;
static atomic_int_fast64_t opf_spin_ns;
static pthread_once_t opf_threads_once = PTHREAD_ONCE_INIT;

static void opf_threads_init(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    const char *env = getenv("OPFORGE_NUM_THREADS");
    if (env != NULL) {
        char *end = NULL;
        long forced = strtol(env, &end, 10);
        if (end != env && *end == '\0' && forced >= 1) {
            n = forced;
        }
    }
    if (n < 1) {
        n = 1;
    }
    atomic_store(&opf_num_threads, (int)(n > OPF_MAX_THREADS ? OPF_MAX_THREADS : n));
    long spin_us = OPF_SPIN_US_DEFAULT;
    const char *spin_env = getenv("OPFORGE_SPIN_US");
    if (spin_env != NULL) {
        char *end = NULL;
        long forced = strtol(spin_env, &end, 10);
        if (end != spin_env && *end == '\0' && forced >= 0) {
            spin_us = forced < OPF_SPIN_US_MAX ? forced : OPF_SPIN_US_MAX;
        }
    }
    atomic_store(&opf_spin_ns, (int_fast64_t)spin_us * 1000);
}

int opf_get_num_threads(void) {
    pthread_once(&opf_threads_once, opf_threads_init);
    return atomic_load(&opf_num_threads);
}

opf_status opf_set_num_threads(int num_threads) {
    opf_clear_error();
    pthread_once(&opf_threads_once, opf_threads_init);
    if (num_threads < 1 || num_threads > OPF_MAX_THREADS) {
        return opf_fail(OPF_E_INVALID, "set_num_threads", "num_threads must be between 1 and %d, got %d",
                        OPF_MAX_THREADS, num_threads);
    }
    atomic_store(&opf_num_threads, num_threads);
    return OPF_OK;
}

static int64_t opf_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void opf_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Spins until *counter != value or the spin time passes; returns whether it changed. */
static int opf_spin_until_changed(const atomic_uint_fast64_t *counter, uint_fast64_t value) {
    int64_t deadline = opf_now_ns() + atomic_load_explicit(&opf_spin_ns, memory_order_relaxed);
    for (;;) {
        for (int i = 0; i < 64; i++) {
            if (atomic_load_explicit(counter, memory_order_relaxed) != value) {
                return 1;
            }
            opf_cpu_relax();
        }
        if (opf_now_ns() > deadline) {
            return 0;
        }
    }
}

/* Runs chunks of the current job until none is left. Called with pool->lock
 * held; returns with it held. */
static void opf_pool_work(opf_pool *pool) {
    while (pool->next_chunk < pool->num_chunks) {
        int64_t chunk = pool->next_chunk++;
        int64_t begin = chunk * pool->grain_per_chunk;
        int64_t end = begin + pool->grain_per_chunk < pool->n ? begin + pool->grain_per_chunk : pool->n;
        opf_range_fn fn = pool->fn;
        void *ctx = pool->ctx;
        pthread_mutex_unlock(&pool->lock);
        fn(ctx, begin, end);
        pthread_mutex_lock(&pool->lock);
        if (atomic_fetch_sub(&pool->unfinished, 1) == 1) {
            pthread_cond_broadcast(&pool->done);
        }
    }
}

static void *opf_worker_main(void *arg) {
    opf_pool *pool = arg;
    pthread_mutex_lock(&pool->lock);
    uint_fast64_t seen = atomic_load(&pool->generation);
    for (;;) {
        if (atomic_load(&pool->generation) == seen && !pool->shutdown) {
            pthread_mutex_unlock(&pool->lock);
            opf_spin_until_changed(&pool->generation, seen);
            pthread_mutex_lock(&pool->lock);
        }
        while (atomic_load(&pool->generation) == seen && !pool->shutdown) {
            pthread_cond_wait(&pool->wake, &pool->lock);
        }
        if (pool->shutdown) {
            break;
        }
        seen = atomic_load(&pool->generation);
        opf_pool_work(pool);
    }
    pthread_mutex_unlock(&pool->lock);
    return NULL;
}

/* Grows the pool to `count` workers (called with pool->lock held). Returns
 * the number of workers available, which may be fewer if creation fails. */
static int opf_pool_grow(opf_pool *pool, int count) {
    while (pool->num_workers < count && !pool->shutdown) {
        if (pthread_create(&pool->workers[pool->num_workers], NULL, opf_worker_main, pool) != 0) {
            break;
        }
        pool->num_workers++;
    }
    return pool->num_workers;
}

int64_t opf_parallel_chunks(int64_t n, int64_t grain) {
    if (n <= 0) {
        return 0;
    }
    if (grain < 1) {
        grain = 1;
    }
    int64_t threads = opf_get_num_threads();
    int64_t by_grain = (n + grain - 1) / grain;
    return by_grain < threads ? by_grain : threads;
}

void opf_parallel_for(int64_t n, int64_t grain, opf_range_fn fn, void *ctx) {
    opf_parallel_for_max(n, grain, opf_parallel_chunks(n, grain), fn, ctx);
}

void opf_parallel_for_max(int64_t n, int64_t grain, int64_t max_chunks, opf_range_fn fn, void *ctx) {
    int64_t chunks = opf_parallel_chunks(n, grain);
    if (chunks > max_chunks) {
        chunks = max_chunks;
    }
    if (chunks <= 1) {
        if (n > 0) {
            fn(ctx, 0, n);
        }
        return;
    }
    /* Chunk length: a multiple of grain, so chunk starts are grain-aligned. */
    if (grain < 1) {
        grain = 1;
    }
    int64_t per_chunk = ((n + chunks - 1) / chunks + grain - 1) / grain * grain;
    chunks = (n + per_chunk - 1) / per_chunk;

    opf_pool *pool = &opf_the_pool;
    if (pthread_mutex_trylock(&pool->submit) != 0) {
        fn(ctx, 0, n); /* busy, or nested inside a chunk */
        return;
    }
    pthread_mutex_lock(&pool->lock);
    if (opf_pool_grow(pool, (int)chunks - 1) == 0) {
        pthread_mutex_unlock(&pool->lock);
        pthread_mutex_unlock(&pool->submit);
        fn(ctx, 0, n);
        return;
    }
    pool->fn = fn;
    pool->ctx = ctx;
    pool->n = n;
    pool->grain_per_chunk = per_chunk;
    pool->num_chunks = chunks;
    pool->next_chunk = 0;
    atomic_store(&pool->unfinished, chunks);
    atomic_fetch_add(&pool->generation, 1);
    pthread_cond_broadcast(&pool->wake);
    opf_pool_work(pool);
    if (atomic_load(&pool->unfinished) > 0) { /* a worker still runs its chunk: spin, then block */
        pthread_mutex_unlock(&pool->lock);
        int64_t deadline = opf_now_ns() + atomic_load_explicit(&opf_spin_ns, memory_order_relaxed);
        while (atomic_load_explicit(&pool->unfinished, memory_order_acquire) > 0 && opf_now_ns() < deadline) {
            for (int i = 0; i < 64; i++) {
                opf_cpu_relax();
            }
        }
        pthread_mutex_lock(&pool->lock);
    }
    while (atomic_load(&pool->unfinished) > 0) {
        pthread_cond_wait(&pool->done, &pool->lock);
    }
    pthread_mutex_unlock(&pool->lock);
    pthread_mutex_unlock(&pool->submit);
}

/* Joins the workers when the library is unloaded or the process exits, so
 * that leak checkers see every thread's resources released. */
__attribute__((destructor)) static void opf_pool_shutdown(void) {
    opf_pool *pool = &opf_the_pool;
    pthread_mutex_lock(&pool->lock);
    pool->shutdown = 1;
    pthread_cond_broadcast(&pool->wake);
    int workers = pool->num_workers;
    pthread_mutex_unlock(&pool->lock);
    for (int i = 0; i < workers; i++) {
        pthread_join(pool->workers[i], NULL);
    }
}
