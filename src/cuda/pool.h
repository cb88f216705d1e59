/*
 * pool.h — opforge's stream-ordered memory pool per CUDA device.
 *
 * Scratch buffers (the GEMM workspace, masked gradients, contiguous copies of
 * odd operands) are allocated on the caller's stream with
 * cudaMallocFromPoolAsync and freed with cudaFreeAsync after the work that
 * uses them. The device's default pool would do that too, but it returns
 * every freed byte to the driver at the next stream, event or device
 * synchronization (its release threshold is 0), so a loop that synchronizes
 * once per step maps the GEMM workspace again on every dense call. opforge's
 * own pool keeps up to OPF_CUDA_POOL_KEEP_BYTES reserved across
 * synchronizations: the cached workspace. Memory above that is released as
 * usual. The default pool's settings, which other libraries in the process
 * may rely on, are left alone.
 *
 * Global state (documented in docs/gpu.md): one pool per device, created on
 * first use under a lock and kept for the life of the process.
 */
#ifndef OPF_CUDA_POOL_H
#define OPF_CUDA_POOL_H

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes each device's pool keeps reserved across synchronizations. */
#define OPF_CUDA_POOL_KEEP_BYTES ((unsigned long long)256 << 20)

/* The pool of `device`, for allocations on `stream` (a stream of that
 * device), or NULL where memory pools are not supported — the caller then
 * uses cudaMallocAsync. The pool is created on the first call whose stream is
 * not being captured into a graph; until then, NULL. Thread-safe. */
cudaMemPool_t opf_cuda_scratch_pool(int device, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
