/*
 * pool.c — opforge's stream-ordered memory pool per CUDA device (pool.h).
 */
#include "pool.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

enum { OPF_POOL_MAX_DEVICES = 64 };

static pthread_mutex_t opf_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static cudaMemPool_t opf_pools[OPF_POOL_MAX_DEVICES]; /* guarded by opf_pool_lock */
static unsigned char opf_pool_tried[OPF_POOL_MAX_DEVICES];

/* A new pool on `device` that keeps OPF_CUDA_POOL_KEEP_BYTES, or NULL. */
static cudaMemPool_t opf_pool_create(int device) {
    int supported = 0;
    if (cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device) != cudaSuccess || !supported) {
        return NULL;
    }
    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    cudaMemPool_t pool = NULL;
    if (cudaMemPoolCreate(&pool, &props) != cudaSuccess) {
        return NULL;
    }
    unsigned long long keep = OPF_CUDA_POOL_KEEP_BYTES;
    if (cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep) != cudaSuccess) {
        (void)cudaMemPoolDestroy(pool);
        return NULL;
    }
    return pool;
}

/* Whether `stream` is being captured into a graph. A pool is not created
 * then: in global capture mode, a call the capture does not allow would
 * invalidate the caller's capture. */
static int opf_capturing(cudaStream_t stream) {
    enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
        (void)cudaGetLastError();
        return 1; /* unknown: do not risk it */
    }
    return status != cudaStreamCaptureStatusNone;
}

cudaMemPool_t opf_cuda_scratch_pool(int device, cudaStream_t stream) {
    if (device < 0 || device >= OPF_POOL_MAX_DEVICES) {
        return NULL;
    }
    pthread_mutex_lock(&opf_pool_lock);
    if (!opf_pool_tried[device] && !opf_capturing(stream)) {
        opf_pool_tried[device] = 1;
        opf_pools[device] = opf_pool_create(device);
        (void)cudaGetLastError(); /* a failed attempt leaves no error for the caller's next check */
    }
    cudaMemPool_t pool = opf_pools[device];
    pthread_mutex_unlock(&opf_pool_lock);
    return pool;
}
