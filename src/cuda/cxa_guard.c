/*
 * cxa_guard.c — the C++ ABI's guards for function-local statics.
 *
 * nvcc's host-side launch stubs (one per kernel) cache the kernel's handle in
 * a function-local static, initialized on first launch under
 * __cxa_guard_acquire/__cxa_guard_release. Those live in the C++ runtime,
 * which libopforge does not link (it is linked as C and must load without
 * libstdc++), so they are provided here — hidden, like every symbol of the
 * library but the opf_* API, so they never interpose on a C++ runtime in the
 * same process.
 *
 * The guard is the Itanium C++ ABI's 64-bit object: byte 0 is set once the
 * static is initialized (the compiler's inline fast path reads it); byte 1
 * marks an initialization in progress. One mutex and condition variable
 * serialize the slow path; the lock is not held while the initializer runs,
 * so initializers may launch threads that initialize other statics.
 */
#include <pthread.h>
#include <stdint.h>

int __cxa_guard_acquire(int64_t *guard);
void __cxa_guard_release(int64_t *guard);
void __cxa_guard_abort(int64_t *guard);

static pthread_mutex_t opf_guard_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t opf_guard_done = PTHREAD_COND_INITIALIZER;

/* 1: the caller must run the initializer, then call release (or abort). */
int __cxa_guard_acquire(int64_t *guard) {
    unsigned char *g = (unsigned char *)guard;
    if (__atomic_load_n(&g[0], __ATOMIC_ACQUIRE)) {
        return 0;
    }
    pthread_mutex_lock(&opf_guard_lock);
    int run = 0;
    while (!g[0]) {
        if (!g[1]) {
            g[1] = 1;
            run = 1;
            break;
        }
        pthread_cond_wait(&opf_guard_done, &opf_guard_lock);
    }
    pthread_mutex_unlock(&opf_guard_lock);
    return run;
}

void __cxa_guard_release(int64_t *guard) {
    unsigned char *g = (unsigned char *)guard;
    pthread_mutex_lock(&opf_guard_lock);
    g[1] = 0;
    __atomic_store_n(&g[0], 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&opf_guard_done);
    pthread_mutex_unlock(&opf_guard_lock);
}

void __cxa_guard_abort(int64_t *guard) {
    unsigned char *g = (unsigned char *)guard;
    pthread_mutex_lock(&opf_guard_lock);
    g[1] = 0;
    pthread_cond_broadcast(&opf_guard_done);
    pthread_mutex_unlock(&opf_guard_lock);
}
