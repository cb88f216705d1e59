/*
 * device.c — the CUDA queries of a CUDA build (replaces src/core/cuda_none.c).
 *
 * The CUDA runtime is linked statically; it loads the driver (libcuda.so.1)
 * itself on first use, so on a machine without a driver this returns 0
 * instead of failing to load.
 */
#include <cuda_runtime_api.h>

#include "opforge.h"

int opf_cuda_device_count(void) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        (void)cudaGetLastError(); /* do not leave the error for the caller's next check */
        return 0;
    }
    return count;
}
