/*
 * cuda_util.h — helpers shared by the .cu files (CUDA C++; not for C).
 *
 *   - opf_device_guard: makes the tensors' device current for a launch and
 *     restores the caller's device on scope exit;
 *   - opf_cuda_fail / opf_cuda_check_launch: CUDA errors as opforge statuses;
 *   - opf_scratch: stream-ordered temporary buffers (from opforge's pool of
 *     the device, pool.h, on the stream; cudaFreeAsync on scope exit: no
 *     synchronization).
 *
 * Every launch goes to the caller's stream; nothing here synchronizes.
 */
#ifndef OPF_CUDA_UTIL_H
#define OPF_CUDA_UTIL_H

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

extern "C" {
#include "error.h"
#include "tensor.h"
}
#include "pool.h"

/* Threads per block of every opforge kernel. */
enum { OPF_CUDA_THREADS = 256 };

/* Records a CUDA error for op `op` ("<what>: <cuda message> (<name>)") and
 * returns its status: OPF_E_NOMEM for allocation failures, else `status`.
 * Clears the runtime's last-error slot so it is not reported twice. */
static inline opf_status opf_cuda_fail(opf_status status, const char *op, const char *what, cudaError_t err) {
    (void)cudaGetLastError();
    return opf_fail(err == cudaErrorMemoryAllocation ? OPF_E_NOMEM : status, op, "%s: %s (%s)", what,
                    cudaGetErrorString(err), cudaGetErrorName(err));
}

/* After a kernel launch: OPF_E_INTERNAL if the launch failed. */
static inline opf_status opf_cuda_check_launch(const char *op) {
    cudaError_t err = cudaGetLastError();
    return err == cudaSuccess ? OPF_OK : opf_cuda_fail(OPF_E_INTERNAL, op, "kernel launch failed", err);
}

/* Makes `device` current until the guard goes out of scope, then restores
 * the device that was current before (only if it had to switch). */
struct opf_device_guard {
    int previous;
    int switched;
    opf_device_guard() : previous(0), switched(0) {}
    ~opf_device_guard() {
        if (switched) {
            (void)cudaSetDevice(previous);
        }
    }
    opf_status enter(const char *op, int device) {
        cudaError_t err = cudaGetDevice(&previous);
        if (err != cudaSuccess) {
            return opf_cuda_fail(OPF_E_DEVICE, op, "CUDA is not usable", err);
        }
        int count = 0;
        if (cudaGetDeviceCount(&count) != cudaSuccess || device < 0 || device >= count) {
            return opf_fail(OPF_E_DEVICE, op, "the tensors are on CUDA device %d, but %d CUDA device%s visible", device,
                            count, count == 1 ? " is" : "s are");
        }
        if (previous != device) {
            err = cudaSetDevice(device);
            if (err != cudaSuccess) {
                char what[64];
                snprintf(what, sizeof what, "cannot use CUDA device %d", device);
                return opf_cuda_fail(OPF_E_DEVICE, op, what, err);
            }
            switched = 1;
        }
        return OPF_OK;
    }

  private:
    opf_device_guard(const opf_device_guard &);
    opf_device_guard &operator=(const opf_device_guard &);
};

/* Stream-ordered temporaries, freed (cudaFreeAsync on the same stream) when
 * the scratch goes out of scope, after the work that uses them is enqueued. */
struct opf_scratch {
    enum { CAPACITY = 16 };
    cudaStream_t stream;
    int device;
    void *ptr[CAPACITY];
    int count;
    opf_scratch(cudaStream_t s, int d) : stream(s), device(d), count(0) {}
    ~opf_scratch() {
        for (int i = count - 1; i >= 0; i--) {
            (void)cudaFreeAsync(ptr[i], stream);
        }
    }
    opf_status alloc(const char *op, size_t bytes, void **out) {
        *out = NULL;
        if (count == CAPACITY) {
            return opf_fail(OPF_E_INTERNAL, op, "too many scratch buffers");
        }
        const size_t size = bytes > 0 ? bytes : 1;
        /* the pool is looked up only when a call needs scratch; NULL: the default pool */
        cudaMemPool_t pool = opf_cuda_scratch_pool(device, stream);
        cudaError_t err =
            pool != NULL ? cudaMallocFromPoolAsync(out, size, pool, stream) : cudaMallocAsync(out, size, stream);
        if (err != cudaSuccess) {
            char what[96];
            snprintf(what, sizeof what, "cannot allocate %zu bytes of device scratch", bytes);
            *out = NULL;
            return opf_cuda_fail(OPF_E_NOMEM, op, what, err);
        }
        ptr[count++] = *out;
        return OPF_OK;
    }

  private:
    opf_scratch(const opf_scratch &);
    opf_scratch &operator=(const opf_scratch &);
};

/* Multiprocessors of `device` (1 if the query fails). */
static inline int opf_cuda_sm_count(int device) {
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || sms < 1) {
        (void)cudaGetLastError();
        sms = 1;
    }
    return sms;
}

/* Blocks for a grid-stride loop over `work` items, `per_block` items per
 * block per step: enough to fill the device many times over, no more. */
static inline unsigned opf_cuda_blocks(int64_t work, int64_t per_block, int sms) {
    int64_t blocks = (work + per_block - 1) / per_block;
    int64_t cap = (int64_t)sms * 64;
    if (blocks > cap) {
        blocks = cap;
    }
    return (unsigned)(blocks > 0 ? blocks : 1);
}

/* A launch's iteration space, for the elementwise and row engines: dims
 * listed outermost first (their sizes in `shape`; operand k's strides along
 * them in strides[k], for `count` operands), size-1 dims dropped, dims that
 * every operand walks contiguously merged, stored innermost first in
 * out_shape and out_strides[k] (OPF_MAX_RANK entries each, padded with size 1
 * and stride 0; out_operands rows of strides, those past `count` zero).
 * Returns the rank, at least 1 (no dims left: one element, stride 0). */
static inline int32_t opf_cuda_merge_dims(int32_t dims, const int64_t *shape, const int64_t (*strides)[OPF_MAX_RANK],
                                          int32_t count, int64_t *out_shape, int64_t (*out_strides)[OPF_MAX_RANK],
                                          int32_t out_operands) {
    int64_t mshape[OPF_MAX_RANK] = {0}, mstrides[2 * OPF_MAX_ARGS][OPF_MAX_RANK] = {{0}};
    int32_t rank = 0;
    for (int32_t d = 0; d < dims; d++) {
        if (shape[d] == 1) {
            continue;
        }
        bool merge = rank > 0;
        for (int32_t k = 0; k < count && merge; k++) {
            merge = mstrides[k][rank - 1] == strides[k][d] * shape[d];
        }
        if (merge) {
            mshape[rank - 1] *= shape[d];
        } else {
            mshape[rank++] = shape[d];
        }
        for (int32_t k = 0; k < count; k++) {
            mstrides[k][rank - 1] = strides[k][d];
        }
    }
    if (rank == 0) {
        rank = 1;
        mshape[0] = 1;
    }
    for (int32_t d = 0; d < OPF_MAX_RANK; d++) {
        const int32_t from = rank - 1 - d; /* reversed: innermost first */
        out_shape[d] = d < rank ? mshape[from] : 1;
        for (int32_t k = 0; k < out_operands; k++) {
            out_strides[k][d] = d < rank && k < count ? mstrides[k][from] : 0;
        }
    }
    return rank;
}

#endif
