/*
 * user_lib.c — a user's library of ops as users build it: cuda.mk compiles
 * tests/cuda/user_ops.c with the nvcc command opforge.h documents into a
 * shared library linked against libopforge.so; this program loads it the
 * way the adapters do (dlopen, then the symbol opforge_op_table) and checks:
 *
 *   - the table resolves and validates; every row (elementwise or row-wise)
 *     has the CUDA build of its kernel and a compute_cuda (what the adapters
 *     look at);
 *   - the CPU builds (compiled by nvcc's host compiler) compute what C does;
 *   - with a CUDA device: the rows on CUDA tensors (contiguous, strided, in
 *     place; row ops with rows gathered and scattered by libopforge's
 *     kernels around the library's own) on a stream of this program give
 *     the CPU's bits. The library
 *     carries its own copy of the CUDA runtime, as a user's does, while
 *     libopforge (another copy) makes the device current and plans the
 *     launches: the two must work together.
 *
 * Usage: test_cuda_user_lib path/to/libcudaops.so
 */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static const opf_op_table *table;

static const opf_op_def *find(const char *name) {
    const opf_op_def *op = opf_op_find(table, name);
    if (op == NULL) {
        fprintf(stderr, "row %s missing\n", name);
        exit(2);
    }
    return op;
}

TEST(test_table) {
    CHECK(opf_op_table_validate(table) == OPF_OK, "validate: %s", opf_last_error());
    CHECK(strcmp(table->name, "cudaops") == 0, "table name %s", table->name);
    for (int64_t i = 0; i < table->num_ops; i++) {
        const opf_op_def *op = table->ops[i];
        const int built = op->eltwise != NULL ? op->eltwise->cuda != NULL : op->row != NULL && op->row->cuda != NULL;
        CHECK(built, "%s: its kernel has no CUDA build", op->name);
        CHECK(op->compute_cuda != NULL, "%s: no compute_cuda", op->name);
    }
}

enum { N = 999 };

/* mix_max on CPU: mix = a + w (b - a), hi = maximum(a, b). */
TEST(test_cpu) {
    float a[N], b[N], mix[N], hi[N];
    rng r = rng_seed(9);
    fill_special_f32(&r, a, N);
    fill_special_f32(&r, b, N);
    int64_t shape[1] = {N};
    opf_tensor ta = opf_tensor_make(a, OPF_F32, 1, shape), tb = opf_tensor_make(b, OPF_F32, 1, shape);
    opf_tensor tm = opf_tensor_make(mix, OPF_F32, 1, shape), th = opf_tensor_make(hi, OPF_F32, 1, shape);
    opf_attr_value w[1] = {{.f = 0.375}};
    const opf_tensor *in[2] = {&ta, &tb}, *out[2] = {&tm, &th};
    if (!CHECK(opf_op_run(find("mix_max"), in, out, w) == OPF_OK, "mix_max: %s", opf_last_error())) {
        return;
    }
    for (int i = 0; i < N; i++) {
        float want_mix = a[i] + 0.375f * (b[i] - a[i]);
        float want_hi = (a[i] > b[i] || a[i] != a[i]) ? a[i] : b[i];
        int ok_mix = memcmp(&mix[i], &want_mix, sizeof(float)) == 0 || (mix[i] != mix[i] && want_mix != want_mix);
        int ok_hi = memcmp(&hi[i], &want_hi, sizeof(float)) == 0 || (hi[i] != hi[i] && want_hi != want_hi);
        if (!CHECK(ok_mix && ok_hi, "element %d: a %g b %g: mix %g hi %g, expected %g %g", i, a[i], b[i], mix[i], hi[i],
                   want_mix, want_hi)) {
            return;
        }
    }
}

#define CUDA_OK(call)                                                                                                  \
    do {                                                                                                               \
        cudaError_t err_ = (call);                                                                                     \
        if (err_ != cudaSuccess) {                                                                                     \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(err_));                   \
            exit(2);                                                                                                   \
        }                                                                                                              \
    } while (0)

static int same_f32(const float *got, const float *want, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++) {
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0 && !(got[i] != got[i] && want[i] != want[i])) {
            return CHECK(0, "%s: element %zu: %g, expected %g", what, i, got[i], want[i]);
        }
    }
    return 1;
}

/* mix_max with a contiguous a, a reversed b and an every-other-element hi;
 * then clamp_ in place on hi. */
TEST(test_gpu) {
    enum { ROWS = 37, COLS = 27 };
    const size_t n = ROWS * COLS;
    float a[ROWS * COLS], b[ROWS * COLS], mix[ROWS * COLS], hi[2 * ROWS * COLS], back[2 * ROWS * COLS];
    rng r = rng_seed(10);
    fill_special_f32(&r, a, n);
    fill_special_f32(&r, b, n);
    memset(mix, 0, sizeof mix);
    memset(hi, 0, sizeof hi);
    float *d_a, *d_b, *d_mix, *d_hi;
    CUDA_OK(cudaMalloc((void **)&d_a, sizeof a));
    CUDA_OK(cudaMalloc((void **)&d_b, sizeof b));
    CUDA_OK(cudaMalloc((void **)&d_mix, sizeof mix));
    CUDA_OK(cudaMalloc((void **)&d_hi, sizeof hi));
    CUDA_OK(cudaMemcpy(d_a, a, sizeof a, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d_b, b, sizeof b, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(d_mix, 0, sizeof mix));
    CUDA_OK(cudaMemset(d_hi, 0, sizeof hi));
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

    int64_t shape[2] = {ROWS, COLS}, rev[2] = {-COLS, -1}, step2[2] = {2 * COLS, 2};
    /* Host and device views of the same layouts. */
    opf_tensor ha = opf_tensor_make(a, OPF_F32, 2, shape), hb = ha, hm = ha, hh = ha;
    hb.data = b;
    hb.strides = rev;
    hb.byte_offset = (n - 1) * sizeof(float);
    hm.data = mix;
    hh.data = hi;
    hh.strides = step2;
    opf_tensor da = ha, db = hb, dm = hm, dh = hh;
    da.data = d_a;
    db.data = d_b;
    dm.data = d_mix;
    dh.data = d_hi;
    da.device.type = db.device.type = dm.device.type = dh.device.type = OPF_DEVICE_CUDA;

    opf_attr_value w[1] = {{.f = -1.25}}, lo_hi[2] = {{.f = -2}, {.f = 0.5}};
    const opf_op_def *mix_max = find("mix_max"), *clamp = find("clamp_");
    const opf_tensor *gin[2] = {&da, &db}, *gout[2] = {&dm, &dh}, *hin[2] = {&ha, &hb}, *hout[2] = {&hm, &hh};
    const opf_tensor *gclamp[1] = {&dh}, *hclamp[1] = {&hh};
    opf_status st = opf_op_run_cuda(mix_max, gin, gout, w, stream);
    CHECK(st == OPF_OK, "mix_max on CUDA: %s (%s)", opf_status_name(st), opf_last_error());
    st = opf_op_run_cuda(clamp, gclamp, NULL, lo_hi, stream);
    CHECK(st == OPF_OK, "clamp_ on CUDA: %s (%s)", opf_status_name(st), opf_last_error());
    CUDA_OK(cudaStreamSynchronize(stream));
    CHECK(opf_op_run(mix_max, hin, hout, w) == OPF_OK, "mix_max on CPU: %s", opf_last_error());
    CHECK(opf_op_run(clamp, hclamp, NULL, lo_hi) == OPF_OK, "clamp_ on CPU: %s", opf_last_error());

    CUDA_OK(cudaMemcpy(back, d_mix, sizeof mix, cudaMemcpyDeviceToHost));
    same_f32(back, mix, n, "mix");
    CUDA_OK(cudaMemcpy(back, d_hi, sizeof hi, cudaMemcpyDeviceToHost));
    same_f32(back, hi, 2 * n, "hi (and the elements between)");

    /* Row ops: rowsum of the reversed b (its rows gathered into scratch by
     * libopforge, summed by the library's kernel) into every other element
     * of hi; softmax of a into the transposed mix (computed in scratch,
     * scattered by libopforge). */
    int64_t rows_shape[1] = {ROWS}, rows_step2[1] = {2}, cols_first[2] = {1, ROWS};
    opf_tensor hs = opf_tensor_make(hi, OPF_F32, 1, rows_shape), ds = hs, hsm = hm, dsm = dm;
    hs.strides = ds.strides = rows_step2;
    ds.data = d_hi;
    ds.device.type = OPF_DEVICE_CUDA;
    hsm.strides = dsm.strides = cols_first;
    const opf_op_def *rowsum = find("rowsum"), *softmax = find("softmax");
    const opf_tensor *grs_in[1] = {&db}, *grs_out[1] = {&ds}, *hrs_in[1] = {&hb}, *hrs_out[1] = {&hs};
    const opf_tensor *gsm_in[1] = {&da}, *gsm_out[1] = {&dsm}, *hsm_in[1] = {&ha}, *hsm_out[1] = {&hsm};
    st = opf_op_run_cuda(rowsum, grs_in, grs_out, NULL, stream);
    CHECK(st == OPF_OK, "rowsum on CUDA: %s (%s)", opf_status_name(st), opf_last_error());
    st = opf_op_run_cuda(softmax, gsm_in, gsm_out, NULL, stream);
    CHECK(st == OPF_OK, "softmax on CUDA: %s (%s)", opf_status_name(st), opf_last_error());
    CUDA_OK(cudaStreamSynchronize(stream));
    CHECK(opf_op_run(rowsum, hrs_in, hrs_out, NULL) == OPF_OK, "rowsum on CPU: %s", opf_last_error());
    CHECK(opf_op_run(softmax, hsm_in, hsm_out, NULL) == OPF_OK, "softmax on CPU: %s", opf_last_error());
    CUDA_OK(cudaMemcpy(back, d_hi, sizeof hi, cudaMemcpyDeviceToHost));
    same_f32(back, hi, 2 * n, "rowsum (and the elements between)");
    CUDA_OK(cudaMemcpy(back, d_mix, sizeof mix, cudaMemcpyDeviceToHost));
    same_f32(back, mix, n, "softmax");

    CUDA_OK(cudaStreamDestroy(stream));
    CUDA_OK(cudaFree(d_a));
    CUDA_OK(cudaFree(d_b));
    CUDA_OK(cudaFree(d_mix));
    CUDA_OK(cudaFree(d_hi));
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s LIBRARY\n", argv[0]);
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
        return 1;
    }
    const opf_op_table *(*get_table)(void);
    *(void **)&get_table = dlsym(lib, "opforge_op_table");
    if (get_table == NULL) {
        fprintf(stderr, "%s: no symbol opforge_op_table (%s)\n", argv[1], dlerror());
        return 1;
    }
    table = get_table();
    if (table == NULL) {
        fprintf(stderr, "%s: opforge_op_table() failed: %s\n", argv[1], opf_last_error());
        return 1;
    }
    RUN_TEST(test_table);
    RUN_TEST(test_cpu);
    if (opf_cuda_device_count() > 0) {
        RUN_TEST(test_gpu);
    } else {
        harness_skip("test_gpu", "no CUDA device or driver (opf_cuda_device_count() == 0)");
    }
    return harness_summary();
}
