/*
 * cuda_runtime.h — the CUDA emulator's CUDA C++ (see cuda_runtime_api.h):
 * the execution-space keywords as nothing, the built-in index variables, the
 * vector types, and cudaLaunchKernel running a kernel on the CPU, one
 * thread after another (or recording it while its stream is captured).
 *
 * A block whose threads meet at barriers (__syncthreads, and the warp
 * shuffles, which the emulator implements as barriers of the whole block)
 * runs its threads as coroutines on stacks of their own: each runs until it
 * reaches a barrier, and the block goes on when every thread has. Thread 0
 * of every block runs first; when it finishes without reaching a barrier,
 * the others run one after another without coroutines (an elementwise
 * kernel's cost stays a plain call), and a barrier reached by one of them is
 * an error (a CUDA block whose thread 0 skips a barrier that others reach
 * is undefined). A shuffle must be called by every thread of the block.
 */
#ifndef OPF_EMU_CUDA_RUNTIME_H
#define OPF_EMU_CUDA_RUNTIME_H

#include <stdint.h>

#include "cuda_runtime_api.h"

#ifdef __cplusplus
#include <functional>
#include <tuple>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
/* One variable per block: blocks run one after another, and each block's
 * threads (coroutines) share it. */
#define __shared__ static

enum { warpSize = 32 };

struct uint3 {
    unsigned int x, y, z;
};
struct dim3 {
    unsigned int x, y, z;
    dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
};
extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;

struct alignas(16) float4 {
    float x, y, z, w;
};
struct alignas(16) double2 {
    double x, y;
};
static inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
static inline double2 make_double2(double x, double y) { return double2{x, y}; }

/* Runs `launch` now (every block and thread of the grid), or records it
 * while `stream` is captured. */
cudaError_t opf_emu_enqueue(cudaStream_t stream, const std::function<void()> &launch);
/* Runs f(args...) as thread (b, t) of a grid of `grid` blocks of `block` threads. */
void opf_emu_set_thread(dim3 grid, dim3 block, unsigned int b, unsigned int t);
/* Runs `thread` as every thread of block b (see above). */
void opf_emu_run_block(dim3 grid, dim3 block, unsigned int b, const std::function<void()> &thread);
/* __shfl_xor_sync's exchange: `size` bytes from this thread to the thread
 * whose index differs by lane_mask, between two barriers of the block. */
void opf_emu_exchange(const void *mine, void *theirs, size_t size, int lane_mask);

void __syncthreads(void);
template <typename V> static V __shfl_xor_sync(unsigned int mask, V v, int lane_mask, int width = warpSize) {
    (void)mask;
    (void)width;
    V theirs;
    opf_emu_exchange(&v, &theirs, sizeof v, lane_mask);
    return theirs;
}

template <class... A, size_t... I> static std::tuple<A...> opf_emu_args(void **args, std::index_sequence<I...>) {
    return std::tuple<A...>(*static_cast<A *>(args[I])...);
}

template <class... A>
static cudaError_t cudaLaunchKernel(void (*kernel)(A...), dim3 grid, dim3 block, void **args, size_t shared = 0,
                                    cudaStream_t stream = 0) {
    if (grid.x == 0 || block.x == 0 || block.x > 1024 || grid.y != 1 || block.y != 1 || shared != 0) {
        return cudaErrorInvalidConfiguration;
    }
    std::tuple<A...> values = opf_emu_args<A...>(args, std::index_sequence_for<A...>());
    return opf_emu_enqueue(stream, [kernel, grid, block, values]() {
        for (unsigned int b = 0; b < grid.x; b++) {
            opf_emu_run_block(grid, block, b, [&kernel, &values]() { std::apply(kernel, values); });
        }
    });
}
#endif

#endif
