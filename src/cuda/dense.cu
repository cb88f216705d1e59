/*
 * dense.cu — CUDA dense and dense_grad on cuBLASLt.
 *
 * dense: y = act(x·w + b), x [N,K], w [K,M], b [M] or absent, y [N,M], all
 * row-major views with any strides. cuBLASLt is column-major, and a row-major
 * [r,c] matrix with unit column stride is the column-major [c,r] matrix —
 * its transpose — with leading dimension = its row stride. So the GEMM is
 * computed transposed,
 *     yᵀ [M,N] = wᵀ [M,K] · xᵀ [K,N],
 * which puts the bias on the rows of cuBLASLt's D, where its BIAS epilogue
 * adds it; the activation is the RELU epilogue (RELU_BIAS with a bias). An
 * operand stored the other way round (unit row stride: a transposed view)
 * is passed with CUBLAS_OP_T instead; an operand with neither unit stride
 * (zero, negative, or two non-unit strides) is first copied into a
 * contiguous scratch buffer; an output cuBLASLt cannot write (column-major y)
 * is computed into scratch and copied out. If cuBLASLt has no algorithm for
 * an epilogue, the plain GEMM runs and a small kernel adds bias and ReLU.
 *
 * Precision: float32 uses CUBLAS_COMPUTE_32F — true fp32 FMA, never TF32 —
 * so results match the CPU to ~1e-6 relative; float64 uses
 * CUBLAS_COMPUTE_64F. (cuBLASLt reads no TF32 switch for COMPUTE_32F.)
 *
 * NaN through the fused ReLU: the CPU keeps a NaN pre-activation (x < 0 is
 * false for NaN); cuBLASLt documents its ReLU epilogue as max(x, 0) and may
 * return 0 there. tests/cuda/test_cuda.c accepts either and reports which.
 *
 * dense_grad: dz = relu_grad(dy, y) into scratch when activation is relu
 * (the relu_grad row's CUDA build, by the elementwise engine), dx = dz·wᵀ and dw = xᵀ·dz by the same GEMM
 * path (no epilogue), db = column sums of dz by a deterministic two-pass
 * kernel that accumulates in double (row chunks of 256, then the chunks in
 * order; no atomics). Any of dx, dw, db may be absent.
 *
 * K = 0 gives y = act(b + 0) (zeros without a bias), as on the CPU; N = 0 or
 * M = 0 does nothing. Scratch and the GEMM workspace (at most 32 MiB, only
 * what the chosen algorithm needs) come from opforge's memory pool of the
 * device (pool.h) on the stream and are released with cudaFreeAsync after the
 * work using them is enqueued; the pool keeps them reserved for the next call.
 */
#include <pthread.h>
#include <string.h>

#include "cublaslt.h"
#include "cuda_kernels.h"
#include "cuda_util.h"
extern "C" {
#include "engines.h"
#include "ops.h"
}

namespace {

const uint64_t OPF_LT_WORKSPACE_BYTES = (uint64_t)32 << 20;
enum { OPF_DB_ROWS = 256 }; /* rows per chunk of the bias-gradient sums */

/* A row-major view [rows, cols] with element strides. */
struct opf_mat {
    char *data;
    int64_t rows, cols, rs, cs;
};

opf_mat opf_mat_of(const opf_tensor *t) {
    opf_mat m;
    m.data = opf_tensor_base(t);
    m.rows = t->shape[0];
    m.cols = t->shape[1];
    m.rs = opf_tensor_stride(t, 0);
    m.cs = opf_tensor_stride(t, 1);
    return m;
}

opf_mat opf_mat_transposed(opf_mat m) {
    opf_mat t = {m.data, m.cols, m.rows, m.cs, m.rs};
    return t;
}

/* How cuBLASLt sees the transpose of a row-major matrix: op(layout) = Xᵀ. */
struct opf_lt_view {
    int32_t op;
    uint64_t rows, cols;
    int64_t ld;
};

/* Fills *v and returns true when cuBLASLt can read Xᵀ [cols, rows] straight
 * from x's memory (rows, cols >= 1); dims of size 1 may have any stride. */
bool opf_lt_view_of(const opf_mat &x, opf_lt_view *v) {
    const int64_t r = x.rows, c = x.cols;
    if ((c == 1 || x.cs == 1) && (r == 1 || x.rs >= c)) { /* column-major [c, r] */
        v->op = OPF_LT_OP_N;
        v->rows = (uint64_t)c;
        v->cols = (uint64_t)r;
        v->ld = r == 1 ? c : x.rs;
        return true;
    }
    if ((r == 1 || x.rs == 1) && (c == 1 || x.cs >= r)) { /* column-major [r, c], transposed */
        v->op = OPF_LT_OP_T;
        v->rows = (uint64_t)r;
        v->cols = (uint64_t)c;
        v->ld = c == 1 ? r : x.cs;
        return true;
    }
    return false;
}

/* Largest power of two (<= 256) dividing an address: the alignment to tell
 * cuBLASLt's heuristic (it assumes 256 unless told). */
uint32_t opf_alignment(const void *p) {
    uintptr_t a = (uintptr_t)p;
    uint32_t align = 256;
    while (align > 1 && a % align != 0) {
        align /= 2;
    }
    return align;
}

/* --- kernels ------------------------------------------------------------------- */

template <typename T>
__global__ void __launch_bounds__(OPF_CUDA_THREADS)
    opf_copy2d_kernel(int64_t rows, int64_t cols, const T *src, int64_t srs, int64_t scs, T *dst, int64_t drs,
                      int64_t dcs) {
    const int64_t n = rows * cols, step = (int64_t)gridDim.x * OPF_CUDA_THREADS;
    for (int64_t idx = (int64_t)blockIdx.x * OPF_CUDA_THREADS + threadIdx.x; idx < n; idx += step) {
        int64_t i = idx / cols, j = idx - i * cols;
        dst[i * drs + j * dcs] = src[i * srs + j * scs];
    }
}

/* c = act(bias + (overwrite ? 0 : c)), the CPU's order of operations. */
template <typename T>
__global__ void __launch_bounds__(OPF_CUDA_THREADS)
    opf_bias_act_kernel(int64_t rows, int64_t cols, T *c, int64_t rs, int64_t cs, const T *bias, int overwrite,
                        int relu) {
    const int64_t n = rows * cols, step = (int64_t)gridDim.x * OPF_CUDA_THREADS;
    for (int64_t idx = (int64_t)blockIdx.x * OPF_CUDA_THREADS + threadIdx.x; idx < n; idx += step) {
        int64_t i = idx / cols, j = idx - i * cols;
        T *p = c + i * rs + j * cs;
        T acc = overwrite ? (T)0 : *p;
        T v = (bias != NULL ? bias[j] : (T)0) + acc;
        *p = (relu && v < (T)0) ? (T)0 : v;
    }
}

/* Column sums of dz over rows [chunk * rows_per_chunk, ...), in double, in
 * row order: to out (cast to T) when there is one chunk, else to partial
 * [chunks, cols]. One thread per column: a warp reads consecutive columns. */
template <typename T>
__global__ void __launch_bounds__(OPF_CUDA_THREADS)
    opf_colsum_kernel(int64_t rows, int64_t cols, const T *dz, int64_t rs, int64_t cs, int64_t rows_per_chunk,
                      double *partial, T *out, int64_t out_stride) {
    const int64_t j = (int64_t)blockIdx.x * OPF_CUDA_THREADS + threadIdx.x;
    if (j >= cols) {
        return;
    }
    const int64_t chunk = blockIdx.y;
    const int64_t begin = chunk * rows_per_chunk;
    const int64_t end = begin + rows_per_chunk < rows ? begin + rows_per_chunk : rows;
    double sum = 0.0;
    for (int64_t i = begin; i < end; i++) {
        sum += (double)dz[i * rs + j * cs];
    }
    if (out != NULL) {
        out[j * out_stride] = (T)sum;
    } else {
        partial[chunk * cols + j] = sum;
    }
}

template <typename T>
__global__ void __launch_bounds__(OPF_CUDA_THREADS)
    opf_colsum_final_kernel(int64_t chunks, int64_t cols, const double *partial, T *out, int64_t out_stride) {
    const int64_t step = (int64_t)gridDim.x * OPF_CUDA_THREADS;
    for (int64_t j = (int64_t)blockIdx.x * OPF_CUDA_THREADS + threadIdx.x; j < cols; j += step) {
        double sum = 0.0;
        for (int64_t c = 0; c < chunks; c++) {
            sum += partial[c * cols + j];
        }
        out[j * out_stride] = (T)sum;
    }
}

/* --- host side ------------------------------------------------------------------- */

/* Everything one dense / dense_grad call needs. */
struct opf_ctx {
    const char *op;
    int device;
    int sms;
    cudaStream_t stream;
    opf_scratch *scratch;
};

/* *m as a contiguous scratch copy (row-major, unit column stride). */
template <typename T> opf_status opf_make_contiguous(const opf_ctx &cx, opf_mat *m) {
    void *copy;
    opf_status st = cx.scratch->alloc(cx.op, (size_t)(m->rows * m->cols) * sizeof(T), &copy);
    if (st != OPF_OK) {
        return st;
    }
    unsigned blocks = opf_cuda_blocks(m->rows * m->cols, OPF_CUDA_THREADS, cx.sms);
    opf_copy2d_kernel<T><<<blocks, OPF_CUDA_THREADS, 0, cx.stream>>>(m->rows, m->cols, (const T *)m->data, m->rs, m->cs,
                                                                     (T *)copy, m->cols, 1);
    m->data = (char *)copy;
    m->rs = m->cols;
    m->cs = 1;
    return opf_cuda_check_launch(cx.op);
}

/* cuBLASLt descriptors of one call, destroyed on scope exit. */
struct opf_lt_objects {
    const opf_lt_api *api;
    opf_lt_desc desc;
    opf_lt_layout a, b, d;
    opf_lt_pref pref;
    explicit opf_lt_objects(const opf_lt_api *p) : api(p), desc(NULL), a(NULL), b(NULL), d(NULL), pref(NULL) {}
    ~opf_lt_objects() {
        if (pref != NULL) {
            api->pref_destroy(pref);
        }
        if (d != NULL) {
            api->layout_destroy(d);
        }
        if (b != NULL) {
            api->layout_destroy(b);
        }
        if (a != NULL) {
            api->layout_destroy(a);
        }
        if (desc != NULL) {
            api->desc_destroy(desc);
        }
    }

  private:
    opf_lt_objects(const opf_lt_objects &);
    opf_lt_objects &operator=(const opf_lt_objects &);
};

/* A cache of cuBLASLt's algorithm choice per problem. Asking the heuristic
 * costs tens of microseconds of host time per call — more than a small GEMM
 * takes on the GPU — so each problem (device, dtype, transposes, epilogue,
 * shapes, leading dimensions, pointer alignments) asks once. Like the
 * per-device handles in cublaslt.c, this is process-wide state guarded by a
 * mutex; entries are replaced round-robin. */
struct opf_lt_plan_key {
    int32_t device, f32, trans_a, trans_b, has_bias;
    uint32_t epilogue, align_a, align_b, align_d;
    uint64_t a_rows, a_cols, b_rows, b_cols, d_rows, d_cols;
    int64_t lda, ldb, ldd;
};

enum { OPF_LT_PLAN_SLOTS = 64 };

struct opf_lt_plan_cache {
    pthread_mutex_t lock;
    int used, next;
    opf_lt_plan_key keys[OPF_LT_PLAN_SLOTS];
    opf_lt_heuristic plans[OPF_LT_PLAN_SLOTS];
};

static opf_lt_plan_cache opf_lt_plans = {PTHREAD_MUTEX_INITIALIZER, 0, 0, {}, {}};

static bool opf_lt_plan_find(const opf_lt_plan_key &key, opf_lt_heuristic *plan) {
    bool found = false;
    pthread_mutex_lock(&opf_lt_plans.lock);
    for (int i = 0; i < opf_lt_plans.used && !found; i++) {
        if (memcmp(&opf_lt_plans.keys[i], &key, sizeof key) == 0) {
            *plan = opf_lt_plans.plans[i];
            found = true;
        }
    }
    pthread_mutex_unlock(&opf_lt_plans.lock);
    return found;
}

static void opf_lt_plan_store(const opf_lt_plan_key &key, const opf_lt_heuristic &plan) {
    pthread_mutex_lock(&opf_lt_plans.lock);
    int slot = opf_lt_plans.used < OPF_LT_PLAN_SLOTS ? opf_lt_plans.used++ : opf_lt_plans.next;
    opf_lt_plans.next = (slot + 1) % OPF_LT_PLAN_SLOTS;
    opf_lt_plans.keys[slot] = key;
    opf_lt_plans.plans[slot] = plan;
    pthread_mutex_unlock(&opf_lt_plans.lock);
}

/* cuBLASLt's first choice for the problem in *o (desc and layouts set), for
 * operands of the given alignments; OPF_LT_NOT_SUPPORTED when it has none.
 * Only asked on a plan-cache miss: the preference object is not needed by
 * the matmul itself. */
opf_lt_status opf_lt_ask_heuristic(const opf_lt_api *api, opf_lt_handle handle, opf_lt_objects *o, uint32_t align_a,
                                   uint32_t align_b, uint32_t align_d, opf_lt_heuristic *result) {
    opf_lt_status s = api->pref_create(&o->pref);
    if (s != OPF_LT_SUCCESS) {
        o->pref = NULL;
        return s;
    }
    const uint64_t max_workspace = OPF_LT_WORKSPACE_BYTES;
    s = api->pref_set(o->pref, OPF_LT_PREF_MAX_WORKSPACE_BYTES, &max_workspace, sizeof max_workspace);
    if (s == OPF_LT_SUCCESS) {
        s = api->pref_set(o->pref, OPF_LT_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof align_a);
    }
    if (s == OPF_LT_SUCCESS) {
        s = api->pref_set(o->pref, OPF_LT_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof align_b);
    }
    if (s == OPF_LT_SUCCESS) {
        s = api->pref_set(o->pref, OPF_LT_PREF_MIN_ALIGNMENT_C_BYTES, &align_d, sizeof align_d);
    }
    if (s == OPF_LT_SUCCESS) {
        s = api->pref_set(o->pref, OPF_LT_PREF_MIN_ALIGNMENT_D_BYTES, &align_d, sizeof align_d);
    }
    if (s != OPF_LT_SUCCESS) {
        return s;
    }
    int found = 0;
    s = api->heuristic(handle, o->desc, o->a, o->b, o->d, o->d, o->pref, 1, result, &found);
    return s == OPF_LT_SUCCESS && found == 0 ? OPF_LT_NOT_SUPPORTED : s;
}

opf_status opf_lt_fail(const opf_ctx &cx, const char *what, opf_lt_status s) {
    return opf_fail(OPF_E_INTERNAL, cx.op, "cuBLASLt %s failed: %s (%d)", what, opf_cublaslt_status_name(s), (int)s);
}

/* One cublasLtMatmul: D = epilogue(op(A)·op(B)) in cuBLASLt's column-major
 * terms. *supported = false (and nothing enqueued) if cuBLASLt has no
 * algorithm for it. */
template <typename T>
opf_status opf_lt_matmul(const opf_ctx &cx, const opf_lt_api *api, opf_lt_handle handle, const opf_lt_view &va,
                         const void *pa, const opf_lt_view &vb, const void *pb, const opf_lt_view &vd, void *pd,
                         uint32_t epilogue, const T *bias, bool *supported) {
    const bool f32 = sizeof(T) == sizeof(float);
    const int type = f32 ? OPF_LT_R_32F : OPF_LT_R_64F;
    *supported = true;
    opf_lt_objects o(api);
    opf_lt_status s = api->desc_create(&o.desc, f32 ? OPF_LT_COMPUTE_32F : OPF_LT_COMPUTE_64F, type);
    if (s != OPF_LT_SUCCESS) {
        o.desc = NULL;
        return opf_lt_fail(cx, "MatmulDescCreate", s);
    }
    const int32_t trans_a = va.op, trans_b = vb.op;
    s = api->desc_set(o.desc, OPF_LT_DESC_TRANSA, &trans_a, sizeof trans_a);
    if (s == OPF_LT_SUCCESS) {
        s = api->desc_set(o.desc, OPF_LT_DESC_TRANSB, &trans_b, sizeof trans_b);
    }
    if (s == OPF_LT_SUCCESS) {
        s = api->desc_set(o.desc, OPF_LT_DESC_EPILOGUE, &epilogue, sizeof epilogue);
    }
    if (s == OPF_LT_SUCCESS && bias != NULL) {
        const void *bias_ptr = bias;
        s = api->desc_set(o.desc, OPF_LT_DESC_BIAS_POINTER, &bias_ptr, sizeof bias_ptr);
    }
    if (s != OPF_LT_SUCCESS) {
        return opf_lt_fail(cx, "MatmulDescSetAttribute", s);
    }
    s = api->layout_create(&o.a, type, va.rows, va.cols, va.ld);
    if (s == OPF_LT_SUCCESS) {
        s = api->layout_create(&o.b, type, vb.rows, vb.cols, vb.ld);
    } else {
        o.a = NULL;
    }
    if (s == OPF_LT_SUCCESS) {
        s = api->layout_create(&o.d, type, vd.rows, vd.cols, vd.ld);
        if (s != OPF_LT_SUCCESS) {
            o.d = NULL;
        }
    } else {
        o.b = NULL;
    }
    if (s != OPF_LT_SUCCESS) {
        return opf_lt_fail(cx, "MatrixLayoutCreate", s);
    }
    const uint32_t align_a = opf_alignment(pa), align_b = opf_alignment(pb), align_d = opf_alignment(pd);
    opf_lt_plan_key key;
    memset(&key, 0, sizeof key); /* padding too: keys are compared bytewise */
    key.device = cx.device;
    key.f32 = f32;
    key.trans_a = trans_a;
    key.trans_b = trans_b;
    key.has_bias = bias != NULL;
    key.epilogue = epilogue;
    key.align_a = align_a;
    key.align_b = align_b;
    key.align_d = align_d;
    key.a_rows = va.rows, key.a_cols = va.cols, key.lda = va.ld;
    key.b_rows = vb.rows, key.b_cols = vb.cols, key.ldb = vb.ld;
    key.d_rows = vd.rows, key.d_cols = vd.cols, key.ldd = vd.ld;
    opf_lt_heuristic result;
    if (!opf_lt_plan_find(key, &result)) {
        s = opf_lt_ask_heuristic(api, handle, &o, align_a, align_b, align_d, &result);
        if (s == OPF_LT_NOT_SUPPORTED) {
            *supported = false;
            return OPF_OK;
        }
        if (s != OPF_LT_SUCCESS) {
            return opf_lt_fail(cx, "MatmulAlgoGetHeuristic", s);
        }
        opf_lt_plan_store(key, result);
    }
    void *workspace = NULL;
    if (result.workspace_size > 0) {
        opf_status st = cx.scratch->alloc(cx.op, result.workspace_size, &workspace);
        if (st != OPF_OK) {
            return st;
        }
    }
    const T one = 1, zero = 0;
    s = api->matmul(handle, o.desc, &one, pa, o.a, pb, o.b, &zero, pd, o.d, pd, o.d, &result.algo, workspace,
                    result.workspace_size, (void *)cx.stream);
    if (s == OPF_LT_NOT_SUPPORTED) {
        *supported = false;
        return OPF_OK;
    }
    return s == OPF_LT_SUCCESS ? OPF_OK : opf_lt_fail(cx, "Matmul", s);
}

/* C [m,n] = act(A [m,k] · B [k,n] + bias [n]) for row-major views with any
 * strides; bias contiguous or NULL. */
template <typename T>
opf_status opf_gemm(const opf_ctx &cx, int64_t m, int64_t n, int64_t k, opf_mat a, opf_mat b, opf_mat c, const T *bias,
                    bool relu) {
    if (m == 0 || n == 0) {
        return OPF_OK;
    }
    if (k == 0) {
        unsigned blocks = opf_cuda_blocks(m * n, OPF_CUDA_THREADS, cx.sms);
        opf_bias_act_kernel<T>
            <<<blocks, OPF_CUDA_THREADS, 0, cx.stream>>>(m, n, (T *)c.data, c.rs, c.cs, bias, 1, relu ? 1 : 0);
        return opf_cuda_check_launch(cx.op);
    }
    /* cuBLASLt computes Cᵀ [n,m] = Bᵀ [n,k] · Aᵀ [k,m] (its A is our B). */
    opf_lt_view va, vb, vd;
    opf_status st = OPF_OK;
    if (!opf_lt_view_of(b, &va)) {
        st = opf_make_contiguous<T>(cx, &b);
        opf_lt_view_of(b, &va);
    }
    if (st == OPF_OK && !opf_lt_view_of(a, &vb)) {
        st = opf_make_contiguous<T>(cx, &a);
        opf_lt_view_of(a, &vb);
    }
    if (st != OPF_OK) {
        return st;
    }
    opf_mat d = c;
    const bool d_scratch = !opf_lt_view_of(c, &vd) || vd.op != OPF_LT_OP_N;
    if (d_scratch) {
        void *p;
        st = cx.scratch->alloc(cx.op, (size_t)(m * n) * sizeof(T), &p);
        if (st != OPF_OK) {
            return st;
        }
        d.data = (char *)p;
        d.rs = n;
        d.cs = 1;
        opf_lt_view_of(d, &vd);
    }
    const opf_lt_api *api;
    opf_lt_handle handle;
    st = opf_cublaslt_get(cx.op, cx.device, &api, &handle);
    if (st != OPF_OK) {
        return st;
    }
    const uint32_t epilogue = bias != NULL ? (relu ? OPF_LT_EPILOGUE_RELU_BIAS : OPF_LT_EPILOGUE_BIAS)
                                           : (relu ? OPF_LT_EPILOGUE_RELU : OPF_LT_EPILOGUE_DEFAULT);
    bool supported;
    st = opf_lt_matmul<T>(cx, api, handle, va, b.data, vb, a.data, vd, d.data, epilogue, bias, &supported);
    if (st == OPF_OK && !supported && epilogue != OPF_LT_EPILOGUE_DEFAULT) {
        /* No fused epilogue for this case: plain GEMM, then bias and ReLU. */
        st = opf_lt_matmul<T>(cx, api, handle, va, b.data, vb, a.data, vd, d.data, OPF_LT_EPILOGUE_DEFAULT,
                              (const T *)NULL, &supported);
        if (st == OPF_OK && supported) {
            unsigned blocks = opf_cuda_blocks(m * n, OPF_CUDA_THREADS, cx.sms);
            opf_bias_act_kernel<T>
                <<<blocks, OPF_CUDA_THREADS, 0, cx.stream>>>(m, n, (T *)d.data, d.rs, d.cs, bias, 0, relu ? 1 : 0);
            st = opf_cuda_check_launch(cx.op);
        }
    }
    if (st == OPF_OK && !supported) {
        return opf_fail(OPF_E_UNSUPPORTED, cx.op, "cuBLASLt has no algorithm for a %lldx%lldx%lld %s GEMM",
                        (long long)m, (long long)n, (long long)k, sizeof(T) == sizeof(float) ? "float32" : "float64");
    }
    if (st == OPF_OK && d_scratch) {
        unsigned blocks = opf_cuda_blocks(m * n, OPF_CUDA_THREADS, cx.sms);
        opf_copy2d_kernel<T>
            <<<blocks, OPF_CUDA_THREADS, 0, cx.stream>>>(m, n, (const T *)d.data, d.rs, d.cs, (T *)c.data, c.rs, c.cs);
        st = opf_cuda_check_launch(cx.op);
    }
    return st;
}

/* db [cols] = column sums of dz [rows, cols]. */
template <typename T> opf_status opf_column_sums(const opf_ctx &cx, const opf_mat &dz, const opf_tensor *db) {
    const int64_t rows = dz.rows, cols = dz.cols;
    if (cols == 0) {
        return OPF_OK;
    }
    T *out = (T *)opf_tensor_base(db);
    const int64_t out_stride = opf_tensor_stride(db, 0);
    int64_t per_chunk = OPF_DB_ROWS;
    int64_t chunks = rows == 0 ? 1 : (rows + per_chunk - 1) / per_chunk;
    if (chunks > 65535) { /* gridDim.y limit */
        per_chunk = (rows + 65534) / 65535;
        chunks = (rows + per_chunk - 1) / per_chunk;
    }
    dim3 grid((unsigned)((cols + OPF_CUDA_THREADS - 1) / OPF_CUDA_THREADS), (unsigned)chunks);
    if (chunks == 1) {
        opf_colsum_kernel<T><<<grid, OPF_CUDA_THREADS, 0, cx.stream>>>(rows, cols, (const T *)dz.data, dz.rs, dz.cs,
                                                                       per_chunk, NULL, out, out_stride);
        return opf_cuda_check_launch(cx.op);
    }
    void *partial;
    opf_status st = cx.scratch->alloc(cx.op, (size_t)(chunks * cols) * sizeof(double), &partial);
    if (st != OPF_OK) {
        return st;
    }
    opf_colsum_kernel<T><<<grid, OPF_CUDA_THREADS, 0, cx.stream>>>(rows, cols, (const T *)dz.data, dz.rs, dz.cs,
                                                                   per_chunk, (double *)partial, NULL, 0);
    st = opf_cuda_check_launch(cx.op);
    if (st != OPF_OK) {
        return st;
    }
    unsigned blocks = opf_cuda_blocks(cols, OPF_CUDA_THREADS, cx.sms);
    opf_colsum_final_kernel<T>
        <<<blocks, OPF_CUDA_THREADS, 0, cx.stream>>>(chunks, cols, (const double *)partial, out, out_stride);
    return opf_cuda_check_launch(cx.op);
}

template <typename T>
opf_status opf_dense_typed(const opf_tensor *const *in, const opf_tensor *const *out, bool relu, void *stream) {
    const opf_tensor *x = in[0], *w = in[1], *b = in[2], *y = out[0];
    const int64_t n = x->shape[0], k = x->shape[1], m = w->shape[1];
    if (n == 0 || m == 0) {
        return OPF_OK;
    }
    opf_device_guard guard; /* declared before the scratch: freed on this device */
    opf_status st = guard.enter("dense", y->device.id);
    if (st != OPF_OK) {
        return st;
    }
    opf_scratch scratch((cudaStream_t)stream, y->device.id);
    opf_ctx cx = {"dense", y->device.id, opf_cuda_sm_count(y->device.id), (cudaStream_t)stream, &scratch};
    const T *bias = NULL;
    if (b != NULL) {
        bias = (const T *)opf_tensor_base(b);
        if (!opf_tensor_is_contiguous(b) || (uintptr_t)bias % 16 != 0) {
            /* the epilogue reads a packed vector; copy it aligned */
            opf_mat bm = {(char *)opf_tensor_base(b), 1, m, 0, opf_tensor_stride(b, 0)};
            st = opf_make_contiguous<T>(cx, &bm);
            if (st != OPF_OK) {
                return st;
            }
            bias = (const T *)bm.data;
        }
    }
    return opf_gemm<T>(cx, n, m, k, opf_mat_of(x), opf_mat_of(w), opf_mat_of(y), bias, relu);
}

template <typename T>
opf_status opf_dense_grad_typed(const opf_tensor *const *in, const opf_tensor *const *out, bool relu, void *stream) {
    const opf_tensor *dy = in[0], *x = in[1], *w = in[2], *y = in[3];
    const opf_tensor *dx = out[0], *dw = out[1], *db = out[2];
    if (relu && y == NULL) {
        return opf_fail(OPF_E_INVALID, "dense_grad", "y (dense's output) is required when activation is relu");
    }
    const int64_t n = dy->shape[0], m = dy->shape[1], k = x->shape[1];
    opf_device_guard guard; /* declared before the scratch: freed on this device */
    opf_status st = guard.enter("dense_grad", dy->device.id);
    if (st != OPF_OK) {
        return st;
    }
    opf_scratch scratch((cudaStream_t)stream, dy->device.id);
    opf_ctx cx = {"dense_grad", dy->device.id, opf_cuda_sm_count(dy->device.id), (cudaStream_t)stream, &scratch};
    opf_mat dz = opf_mat_of(dy);
    if (relu && n > 0 && m > 0) { /* dz = dy where y > 0 */
        void *p;
        st = scratch.alloc(cx.op, (size_t)(n * m) * sizeof(T), &p);
        if (st != OPF_OK) {
            return st;
        }
        int64_t shape[2] = {n, m};
        opf_tensor tz = *dy;
        tz.data = p;
        tz.shape = shape;
        tz.strides = NULL;
        tz.byte_offset = 0;
        const opf_op_def *mask = opf_builtin_row(OPF_ROW_relu_grad);
        if (mask == NULL) {
            return opf_fail(OPF_E_INTERNAL, cx.op, "the built-in relu_grad row is missing");
        }
        const opf_tensor *mask_in[2] = {dy, y}, *mask_out[1] = {&tz};
        st = opf_cuda_eltwise_run(cx.op, mask, mask_in, mask_out, NULL, cx.stream);
        if (st != OPF_OK) {
            return st;
        }
        dz = opf_mat_of(&tz);
    }
    if (dx != NULL) { /* dx [N,K] = dz [N,M] · wᵀ [M,K] */
        st = opf_gemm<T>(cx, n, k, m, dz, opf_mat_transposed(opf_mat_of(w)), opf_mat_of(dx), (const T *)NULL, false);
    }
    if (st == OPF_OK && dw != NULL) { /* dw [K,M] = xᵀ [K,N] · dz [N,M] */
        st = opf_gemm<T>(cx, k, m, n, opf_mat_transposed(opf_mat_of(x)), dz, opf_mat_of(dw), (const T *)NULL, false);
    }
    if (st == OPF_OK && db != NULL) {
        st = opf_column_sums<T>(cx, dz, db);
    }
    return st;
}

} // namespace

extern "C" opf_status opf_cuda_dense_compute(const opf_tensor *const *in, const opf_tensor *const *out,
                                             const opf_attr_value *attrs, void *stream) {
    const bool relu = attrs[0].i == OPF_ACT_RELU;
    return out[0]->dtype == OPF_F32 ? opf_dense_typed<float>(in, out, relu, stream)
                                    : opf_dense_typed<double>(in, out, relu, stream);
}

extern "C" opf_status opf_cuda_dense_grad_compute(const opf_tensor *const *in, const opf_tensor *const *out,
                                                  const opf_attr_value *attrs, void *stream) {
    const bool relu = attrs[0].i == OPF_ACT_RELU;
    return in[0]->dtype == OPF_F32 ? opf_dense_grad_typed<float>(in, out, relu, stream)
                                   : opf_dense_grad_typed<double>(in, out, relu, stream);
}
