/*
 * relu_variants.cu — how close can an elementwise kernel get to the device's
 * copy bandwidth, and which form gets there? Standalone (no libopforge), run
 * by scripts/gpu-check.sh:
 *
 *   nvcc -O3 -std=c++17 -arch=sm_90 bench/relu_variants.cu -o build/relu_variants
 *   build/relu_variants [MiB]          (default 256 MiB of float32)
 *
 * Times, with CUDA events around 10 launches back to back (median of 20):
 * cudaMemcpyAsync device to device, then relu kernels that differ in one
 * respect each from opforge's (src/cuda/eltwise.cu: 256 threads, 4 float4
 * per thread, one pass over the tensor): vectors per thread, threads per
 * block, a grid-stride loop over a grid of a few waves, and the streaming
 * cache hints __ldcs / __stcs. Every variant's output is compared with the
 * first one's, bit for bit. Prints GB/s (bytes read + written) and the ratio
 * to the copy.
 */
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

#define CHECK(call)                                                                                                    \
    do {                                                                                                               \
        cudaError_t err_ = (call);                                                                                     \
        if (err_ != cudaSuccess) {                                                                                     \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(err_));                   \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

__device__ __forceinline__ float relu1(float v) { return v < 0.0f ? 0.0f : v; }
__device__ __forceinline__ float4 relu4(float4 v) {
    return make_float4(relu1(v.x), relu1(v.y), relu1(v.z), relu1(v.w));
}

template <bool STREAMING> __device__ __forceinline__ float4 load4(const float4 *p) {
    return STREAMING ? __ldcs(p) : *p;
}
template <bool STREAMING> __device__ __forceinline__ void store4(float4 *p, float4 v) {
    if (STREAMING) {
        __stcs(p, v);
    } else {
        *p = v;
    }
}

/* One pass: block b handles vectors [b * THREADS * UNROLL, ...), UNROLL
 * loads in flight per thread before the first store (opforge's form). */
template <int THREADS, int UNROLL, bool STREAMING>
__global__ void __launch_bounds__(THREADS) relu_one_pass(int64_t nvec, const float4 *x, float4 *y) {
    const int64_t base = (int64_t)blockIdx.x * THREADS * UNROLL + threadIdx.x;
    float4 r[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
        const int64_t i = base + (int64_t)u * THREADS;
        if (i < nvec) {
            r[u] = load4<STREAMING>(x + i);
        }
    }
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
        const int64_t i = base + (int64_t)u * THREADS;
        if (i < nvec) {
            store4<STREAMING>(y + i, relu4(r[u]));
        }
    }
}

/* Grid-stride over a fixed grid (a few waves of the device). */
template <int THREADS, int UNROLL>
__global__ void __launch_bounds__(THREADS) relu_grid_stride(int64_t nvec, const float4 *x, float4 *y) {
    const int64_t step = (int64_t)gridDim.x * THREADS * UNROLL;
    for (int64_t base = (int64_t)blockIdx.x * THREADS * UNROLL + threadIdx.x; base < nvec; base += step) {
        float4 r[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const int64_t i = base + (int64_t)u * THREADS;
            if (i < nvec) {
                r[u] = x[i];
            }
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const int64_t i = base + (int64_t)u * THREADS;
            if (i < nvec) {
                y[i] = relu4(r[u]);
            }
        }
    }
}

struct Variant {
    const char *name;
    void (*launch)(int64_t nvec, const float4 *x, float4 *y, int sms);
};

template <int THREADS, int UNROLL, bool STREAMING> void launch_one_pass(int64_t nvec, const float4 *x, float4 *y, int) {
    const int64_t per_block = (int64_t)THREADS * UNROLL;
    relu_one_pass<THREADS, UNROLL, STREAMING><<<(unsigned)((nvec + per_block - 1) / per_block), THREADS>>>(nvec, x, y);
}

template <int THREADS, int UNROLL, int WAVES>
void launch_grid_stride(int64_t nvec, const float4 *x, float4 *y, int sms) {
    const int blocks_per_sm = 2048 / THREADS;
    relu_grid_stride<THREADS, UNROLL><<<(unsigned)(sms * blocks_per_sm * WAVES), THREADS>>>(nvec, x, y);
}

static float median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int main(int argc, char **argv) {
    const int64_t mib = argc > 1 ? atoll(argv[1]) : 256;
    const int64_t n = mib * (1 << 20) / 4, nvec = n / 4;
    int device = 0, sms = 0, count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("SKIP relu_variants: no CUDA device or driver\n");
        return 0;
    }
    CHECK(cudaGetDevice(&device));
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, device));
    printf("relu variants: %s, %d SMs, %lld MiB float32 out of place, 10 launches back to back, median of 20\n",
           prop.name, sms, (long long)mib);

    std::vector<float> host(n);
    uint32_t state = 12345u;
    for (int64_t i = 0; i < n; i++) { /* values in [-1, 1), some exact zeros and negative zeros */
        state = state * 1664525u + 1013904223u;
        host[i] = (float)((int32_t)(state >> 8) - (1 << 23)) / (float)(1 << 23);
    }
    float *x, *y;
    CHECK(cudaMalloc(&x, n * sizeof(float)));
    CHECK(cudaMalloc(&y, n * sizeof(float)));
    CHECK(cudaMemcpy(x, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    cudaEvent_t start, end;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&end));

    auto time_ms = [&](auto &&run) {
        for (int i = 0; i < 3; i++) {
            run();
        }
        CHECK(cudaGetLastError());
        std::vector<float> samples;
        for (int rep = 0; rep < 20; rep++) {
            CHECK(cudaEventRecord(start));
            for (int i = 0; i < 10; i++) {
                run();
            }
            CHECK(cudaEventRecord(end));
            CHECK(cudaEventSynchronize(end));
            float ms = 0;
            CHECK(cudaEventElapsedTime(&ms, start, end));
            samples.push_back(ms / 10);
        }
        CHECK(cudaGetLastError());
        return median(samples);
    };
    const double bytes = 2.0 * (double)n * sizeof(float);
    const float t_copy = time_ms([&] { CHECK(cudaMemcpyAsync(y, x, n * sizeof(float), cudaMemcpyDeviceToDevice)); });
    printf("  %-44s %8.3f ms %7.0f GB/s\n", "cudaMemcpyAsync device to device", t_copy, bytes / t_copy / 1e6);

    const Variant variants[] = {
        {"one pass, 256 thr x 4 float4 (opforge)", launch_one_pass<256, 4, false>},
        {"one pass, 256 thr x 1 float4", launch_one_pass<256, 1, false>},
        {"one pass, 256 thr x 2 float4", launch_one_pass<256, 2, false>},
        {"one pass, 256 thr x 8 float4", launch_one_pass<256, 8, false>},
        {"one pass, 128 thr x 4 float4", launch_one_pass<128, 4, false>},
        {"one pass, 512 thr x 4 float4", launch_one_pass<512, 4, false>},
        {"one pass, 256 thr x 4 float4, __ldcs/__stcs", launch_one_pass<256, 4, true>},
        {"one pass, 128 thr x 8 float4, __ldcs/__stcs", launch_one_pass<128, 8, true>},
        {"grid stride, 256 thr x 4 float4, 1 wave", launch_grid_stride<256, 4, 1>},
        {"grid stride, 256 thr x 4 float4, 4 waves", launch_grid_stride<256, 4, 4>},
    };
    std::vector<float> want(n), got(n);
    int failures = 0;
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        const Variant &var = variants[v];
        CHECK(cudaMemset(y, 0xff, n * sizeof(float))); /* NaN poison: every element must be written */
        var.launch(nvec, (const float4 *)x, (float4 *)y, sms);
        CHECK(cudaGetLastError());
        CHECK(cudaMemcpy(v == 0 ? want.data() : got.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost));
        if (v == 0) {
            for (int64_t i = 0; i < n; i++) { /* the first variant against the definition, on the host */
                float r = host[i] < 0.0f ? 0.0f : host[i];
                if (memcmp(&r, &want[i], sizeof r) != 0) {
                    printf("FAIL %s: element %lld\n", var.name, (long long)i);
                    failures++;
                    break;
                }
            }
        } else if (memcmp(want.data(), got.data(), n * sizeof(float)) != 0) {
            printf("FAIL %s: output differs from the first variant's\n", var.name);
            failures++;
        }
        const float t = time_ms([&] { var.launch(nvec, (const float4 *)x, (float4 *)y, sms); });
        printf("  %-44s %8.3f ms %7.0f GB/s  %.3f of copy\n", var.name, t, bytes / t / 1e6, t_copy / t);
    }
    CHECK(cudaFree(x));
    CHECK(cudaFree(y));
    printf("relu variants: %d failed\n", failures);
    return failures == 0 ? 0 : 1;
}
