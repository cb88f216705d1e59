/*
 * opforge_cuda.h — the CUDA build of authored kernels (CUDA C++): elementwise
 * (OPF_ELTWISE_KERNEL) and row-wise (OPF_ROW_KERNEL; "Row kernels" below).
 *
 * opforge.h includes this header when a file is compiled by nvcc
 * (__CUDACC__); do not include it yourself. In such a file,
 *
 *   OPF_ELTWISE_KERNEL(softplus, (x), (y), y = (x > 0 ? x : 0) + opf_log1p(opf_exp(-opf_fabs(x)));)
 *
 * also generates, from the same body:
 *   - opf__cuda_ew_softplus<T>::apply, the __device__ function of one element
 *     (T float or double; the body sees its inputs, outputs and attrs as on
 *     the CPU);
 *   - opf__cuda_ew_launch_softplus, the kernel's launcher, stored in
 *     softplus.cuda (an opf_cuda_eltwise_fn): the three kernels below,
 *     instantiated for that function.
 *
 * A call runs in two halves. opforge's CUDA elementwise engine (libopforge,
 * src/cuda/eltwise.cu; reached through opf_op_run_cuda) picks the operands
 * (the inputs, then the outputs, or the inputs written in place), makes the
 * tensors' device current, chooses the path, merges dims and sizes the grid:
 * an opf_cuda_eltwise_launch. The launcher, compiled in the user's file,
 * enqueues one kernel on the call's stream and returns the launch's
 * cudaError_t. It never synchronizes and never allocates.
 *
 * The paths (grid-stride loops over int64 element indices: any size):
 *   vector      every operand contiguous and 16-byte aligned: float4 / double2
 *               loads and stores, OPF_CUDA_EW_UNROLL vectors of each operand
 *               in flight per thread; the last n % (4 or 2) elements scalar;
 *   contiguous  every operand contiguous, some misaligned: one element per
 *               thread per step;
 *   strided     anything else (transposed, sliced, negative or zero strides,
 *               any rank up to OPF_MAX_RANK): the iteration space after
 *               dropping dims of size 1 and merging dims every operand walks
 *               contiguously, innermost first (ordered so that the first
 *               output is written in memory order); each thread turns its
 *               index into per-operand offsets (32-bit divisions when the
 *               tensor has under 2^32 elements).
 * An output may be exactly an input: every element's inputs are read and
 * its outputs written by one thread, reads first.
 *
 * Numerics are the CPU build's: the body is the same text, IEEE float and
 * double, denormals kept (nvcc's default without --use_fast_math). Compile
 * with -fmad=false so that a*b + c is not contracted into an FMA that the
 * CPU build does not use (opforge.h, "Writing kernels", has the command).
 *
 * Row kernels. In such a file,
 *
 *   OPF_ROW_KERNEL(rowsum, (x), (y), y[0] = opf_sum(n, x);)
 *
 * also generates opf__cuda_row_rowsum<T>::apply (the body as a __device__
 * function of one row, seeing exactly what the CPU builds see: n, n_<name>,
 * a pointer to each argument's contiguous row, attrs) and
 * opf__cuda_row_launch_rowsum, stored in rowsum.cuda (an opf_cuda_row_fn).
 * opforge's CUDA row engine (libopforge, src/cuda/row.cu) does the host half
 * of a call: it makes the device current and finds each operand's rows. An
 * argument whose last dims (the row) are contiguous is read or written in
 * place, through its strides over the leading dims ("..."); one whose rows
 * are not contiguous (transposed, every other element, negative strides) is
 * gathered into stream-ordered device scratch before the kernel (an input)
 * or computed there and scattered into the view after it (an output); an
 * input without "..." (w[M]) is passed whole to every row, gathered once
 * when not contiguous. The launcher then enqueues one kernel on the call's
 * stream: one thread per row, a grid-stride loop over int64 row indices,
 * each thread running the body sequentially over its row. Empty rows (n ==
 * 0) run the body too (opf_sum gives 0, opf_max -inf), as on the CPU.
 *
 * That mapping is exact for any body (a row is one sequential computation,
 * as on the CPU, and opf_sum / opf_max reduce in the CPU builds' lane order:
 * the same bits), and suits many short rows (not yet timed on a GPU). A row
 * of thousands of elements is one thread's loop, with the loads of a warp's
 * 32 rows n elements apart: it does not approach memory bandwidth. A block
 * per row would, but it needs the body's loops split over the block's
 * threads, and an arbitrary body (loops that carry state from one element
 * to the next, outputs updated in place, scalar code between loops) cannot
 * be split safely. So a row op that needs the bandwidth (softmax, layernorm
 * on long rows) gives a team body, OPF_ROW_KERNEL_TEAM (opforge.h): written
 * with OPF_TEAM_FOR (each thread its elements rank, rank + size, ...),
 * opf_team_sum / opf_team_max (block-wide reductions, below) and
 * OPF_TEAM_ONCE, and launched a block per row (opf__cuda_team_kernel) by
 * the same engine, for rows of 32 elements or more. Anything
 * else can name a hand-written kernel, `.compute_cuda` in its declaration,
 * which takes precedence over the generated builds (docs/writing-ops.md,
 * "The same kernels on a GPU").
 */
#ifndef OPFORGE_CUDA_H
#define OPFORGE_CUDA_H

#if !defined(__CUDACC__)
#error "opforge_cuda.h is CUDA C++: opforge.h includes it when a file is compiled by nvcc"
#endif

#include <cuda_runtime.h>
#include <stdint.h>

extern "C++" {

enum {
    OPF_CUDA_EW_THREADS = 256,              /* threads per block */
    OPF_CUDA_EW_UNROLL = 4,                 /* vectors per operand in flight per thread (vector path) */
    OPF_CUDA_EW_OPERANDS = 2 * OPF_MAX_ARGS /* inputs, then outputs */
};

/* The paths of opf_cuda_eltwise_launch. */
enum opf_cuda_ew_path { OPF_CUDA_EW_VECTOR = 0, OPF_CUDA_EW_CONTIGUOUS = 1, OPF_CUDA_EW_STRIDED = 2 };

/* One launch of an elementwise kernel's CUDA build, planned by opforge.
 * libopforge fills it and a user's library reads it: its layout is part of
 * the table ABI (OPF_TABLE_ABI_VERSION). */
struct opf_cuda_eltwise_launch {
    int32_t path;    /* opf_cuda_ew_path */
    opf_dtype dtype; /* OPF_F32 or OPF_F64 */
    int64_t n;       /* elements, > 0 */
    uint32_t blocks; /* grid size, OPF_CUDA_EW_THREADS threads per block */
    void *stream;    /* the cudaStream_t to launch on */
    /* Element 0 of each operand: the kernel's inputs, then its outputs. */
    void *operands[OPF_CUDA_EW_OPERANDS];
    /* OPF_CUDA_EW_STRIDED: the iteration space, innermost dim first, and each
     * operand's strides along it, in elements (zero and negative allowed). */
    int32_t rank;
    int64_t shape[OPF_MAX_RANK];
    int64_t strides[OPF_CUDA_EW_OPERANDS][OPF_MAX_RANK];
    opf_attr_value attrs[OPF_MAX_ATTRS];
};

/* Kernel parameters, sized by the kernel's operand count K. */
template <int K> struct opf__cuda_ew_ptrs { void *p[K]; };
struct opf__cuda_ew_attrs {
    opf_attr_value v[OPF_MAX_ATTRS];
};
template <int K> struct opf__cuda_ew_layout {
    int32_t rank;
    int64_t shape[OPF_MAX_RANK];
    int64_t stride[K][OPF_MAX_RANK];
};

/* 16-byte vectors of T, and their lanes. */
template <typename T> struct opf__cuda_vec;
template <> struct opf__cuda_vec<float> {
    typedef float4 type;
    enum { width = 4 };
    static __device__ __forceinline__ void unpack(const float4 &v, float (&a)[4]) {
        a[0] = v.x;
        a[1] = v.y;
        a[2] = v.z;
        a[3] = v.w;
    }
    static __device__ __forceinline__ float4 pack(const float (&a)[4]) { return make_float4(a[0], a[1], a[2], a[3]); }
};
template <> struct opf__cuda_vec<double> {
    typedef double2 type;
    enum { width = 2 };
    static __device__ __forceinline__ void unpack(const double2 &v, double (&a)[2]) {
        a[0] = v.x;
        a[1] = v.y;
    }
    static __device__ __forceinline__ double2 pack(const double (&a)[2]) { return make_double2(a[0], a[1]); }
};

/* One element at per-operand element offsets: reads every input, then
 * writes every output. F is a kernel's element function (see
 * OPF__CUDA_EW_DEFINE): F::type, F::num_in, F::num_out, F::apply. */
template <class F, typename Offsets>
__device__ __forceinline__ void opf__cuda_ew_element(const opf__cuda_ew_ptrs<F::num_in + F::num_out> &p,
                                                     const Offsets &at, const opf_attr_value *attrs) {
    typedef typename F::type T;
    T in[F::num_in], out[F::num_out];
#pragma unroll
    for (int k = 0; k < F::num_in; k++) {
        in[k] = static_cast<const T *>(p.p[k])[at(k)];
    }
    F::apply(in, out, attrs);
#pragma unroll
    for (int j = 0; j < F::num_out; j++) {
        static_cast<T *>(p.p[F::num_in + j])[at(F::num_in + j)] = out[j];
    }
}

/* Offsets of the contiguous paths: the same index in every operand. */
struct opf__cuda_ew_same {
    int64_t i;
    __device__ __forceinline__ int64_t operator()(int) const { return i; }
};

/* Offsets of the strided path. */
template <int K> struct opf__cuda_ew_offsets {
    int64_t off[K];
    __device__ __forceinline__ int64_t operator()(int k) const { return off[k]; }
};

template <class F>
__global__ void __launch_bounds__(OPF_CUDA_EW_THREADS)
    opf__cuda_ew_vector(int64_t n, const opf__cuda_ew_ptrs<F::num_in + F::num_out> p, const opf__cuda_ew_attrs attrs) {
    typedef typename F::type T;
    typedef opf__cuda_vec<T> VT;
    typedef typename VT::type V;
    enum { NI = F::num_in, NO = F::num_out, W = VT::width, U = OPF_CUDA_EW_UNROLL, B = OPF_CUDA_EW_THREADS };
    const int64_t nvec = n / W;
    const int64_t step = (int64_t)gridDim.x * B * U;
    for (int64_t base = (int64_t)blockIdx.x * B * U + threadIdx.x; base < nvec; base += step) {
        V in[U][NI] = {};
#pragma unroll
        for (int u = 0; u < U; u++) { /* every load in flight first */
            const int64_t i = base + (int64_t)u * B;
            if (i < nvec) {
#pragma unroll
                for (int k = 0; k < NI; k++) {
                    in[u][k] = static_cast<const V *>(p.p[k])[i];
                }
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int64_t i = base + (int64_t)u * B;
            if (i < nvec) {
                T x[NI][W], y[NO][W];
#pragma unroll
                for (int k = 0; k < NI; k++) {
                    VT::unpack(in[u][k], x[k]);
                }
#pragma unroll
                for (int l = 0; l < W; l++) {
                    T a[NI], r[NO];
#pragma unroll
                    for (int k = 0; k < NI; k++) {
                        a[k] = x[k][l];
                    }
                    F::apply(a, r, attrs.v);
#pragma unroll
                    for (int j = 0; j < NO; j++) {
                        y[j][l] = r[j];
                    }
                }
#pragma unroll
                for (int j = 0; j < NO; j++) {
                    static_cast<V *>(p.p[NI + j])[i] = VT::pack(y[j]);
                }
            }
        }
    }
    /* The last n % W elements: the first threads of block 0. */
    if (blockIdx.x == 0 && (int64_t)threadIdx.x < n - nvec * W) {
        const opf__cuda_ew_same at = {nvec * W + threadIdx.x};
        opf__cuda_ew_element<F>(p, at, attrs.v);
    }
}

template <class F>
__global__ void __launch_bounds__(OPF_CUDA_EW_THREADS)
    opf__cuda_ew_contiguous(int64_t n, const opf__cuda_ew_ptrs<F::num_in + F::num_out> p,
                            const opf__cuda_ew_attrs attrs) {
    const int64_t step = (int64_t)gridDim.x * OPF_CUDA_EW_THREADS;
    for (int64_t i = (int64_t)blockIdx.x * OPF_CUDA_EW_THREADS + threadIdx.x; i < n; i += step) {
        const opf__cuda_ew_same at = {i};
        opf__cuda_ew_element<F>(p, at, attrs.v);
    }
}

/* Each operand's offset (elements) at C-order index i of the iteration
 * space (rank, shape: innermost first, the outermost dim taking what is
 * left). Index is the type of the index arithmetic: uint32_t when the
 * space has fewer than 2^32 points (a 32-bit division is several times
 * cheaper than a 64-bit one). */
template <int K, typename Index>
__device__ __forceinline__ opf__cuda_ew_offsets<K> opf__cuda_offsets(int64_t i, const opf__cuda_ew_layout<K> &layout) {
    opf__cuda_ew_offsets<K> at;
#pragma unroll
    for (int k = 0; k < K; k++) {
        at.off[k] = 0;
    }
    Index rem = (Index)i;
#pragma unroll
    for (int d = 0; d < OPF_MAX_RANK; d++) {
        if (d >= layout.rank) {
            break;
        }
        Index idx = rem;
        if (d < layout.rank - 1) {
            const Index size = (Index)layout.shape[d];
            const Index q = rem / size;
            idx = rem - q * size;
            rem = q;
        }
#pragma unroll
        for (int k = 0; k < K; k++) {
            at.off[k] += (int64_t)idx * layout.stride[k][d];
        }
    }
    return at;
}

template <class F, typename Index>
__global__ void __launch_bounds__(OPF_CUDA_EW_THREADS)
    opf__cuda_ew_strided(int64_t n, const opf__cuda_ew_ptrs<F::num_in + F::num_out> p,
                         const opf__cuda_ew_layout<F::num_in + F::num_out> layout, const opf__cuda_ew_attrs attrs) {
    enum { K = F::num_in + F::num_out };
    const int64_t step = (int64_t)gridDim.x * OPF_CUDA_EW_THREADS;
    for (int64_t i = (int64_t)blockIdx.x * OPF_CUDA_EW_THREADS + threadIdx.x; i < n; i += step) {
        opf__cuda_ew_element<F>(p, opf__cuda_offsets<K, Index>(i, layout), attrs.v);
    }
}

/* Enqueues launch L of element function F; returns the cudaError_t. */
template <class F> static int opf__cuda_ew_enqueue(const opf_cuda_eltwise_launch *L) {
    enum { K = F::num_in + F::num_out };
    opf__cuda_ew_ptrs<K> p;
    for (int k = 0; k < K; k++) {
        p.p[k] = L->operands[k];
    }
    opf__cuda_ew_attrs attrs;
    for (int a = 0; a < OPF_MAX_ATTRS; a++) {
        attrs.v[a] = L->attrs[a];
    }
    int64_t n = L->n;
    opf__cuda_ew_layout<K> layout;
    void *args[3] = {&n, &p, &attrs}, *strided_args[4] = {&n, &p, &layout, &attrs};
    const cudaStream_t stream = (cudaStream_t)L->stream;
    const dim3 grid(L->blocks > 0 ? L->blocks : 1), block(OPF_CUDA_EW_THREADS);
    cudaError_t err;
    if (L->path == OPF_CUDA_EW_VECTOR) {
        err = cudaLaunchKernel(opf__cuda_ew_vector<F>, grid, block, args, 0, stream);
    } else if (L->path == OPF_CUDA_EW_CONTIGUOUS) {
        err = cudaLaunchKernel(opf__cuda_ew_contiguous<F>, grid, block, args, 0, stream);
    } else {
        layout.rank = L->rank;
        for (int d = 0; d < OPF_MAX_RANK; d++) {
            layout.shape[d] = L->shape[d];
            for (int k = 0; k < K; k++) {
                layout.stride[k][d] = L->strides[k][d];
            }
        }
        err = n <= (int64_t)UINT32_MAX
                  ? cudaLaunchKernel(opf__cuda_ew_strided<F, uint32_t>, grid, block, strided_args, 0, stream)
                  : cudaLaunchKernel(opf__cuda_ew_strided<F, uint64_t>, grid, block, strided_args, 0, stream);
    }
    /* cudaGetLastError: also clears this runtime's error slot. */
    return err != cudaSuccess ? (int)err : (int)cudaGetLastError();
}

/* The launcher of a kernel whose element function is Fn<float> / Fn<double>. */
template <template <typename> class Fn> static int opf__cuda_ew_launch(const opf_cuda_eltwise_launch *L) {
    return L->dtype == OPF_F32 ? opf__cuda_ew_enqueue<Fn<float>>(L) : opf__cuda_ew_enqueue<Fn<double>>(L);
}

/* ------------------------------------------------------------------------ */
/* Row kernels                                                               */
/* ------------------------------------------------------------------------ */

enum {
    OPF_CUDA_ROW_THREADS = 64,               /* threads (rows in flight) per block */
    OPF_CUDA_ROW_OPERANDS = 2 * OPF_MAX_ARGS /* inputs, then outputs */
};

/* Team bodies (OPF_ROW_KERNEL_TEAM). */
enum {
    OPF_CUDA_TEAM_MAX = 256 /* threads of a team, at most (a power of two, >= 32) */
};

/* The threads of one row in a team body: this thread's rank and their
 * number (a multiple of 32). */
struct opf_cuda_team {
    int rank, size;
};

/* What the team reductions combine: a + b; the larger, NaN propagating. */
struct opf__team_add {
    template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};
struct opf__team_maximum {
    template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return (b > a || b != b) ? b : a; }
};

/* Every thread's v combined by op, returned to every thread of the team
 * (all of which must call it, with the same control flow): each warp by
 * shuffles (every lane ends with the same bits: op is commutative), then the
 * warps' results in order, read by every thread from shared memory. The
 * order depends only on the team's size: a row gives the same bits on every
 * run. */
template <typename T, class Op> __device__ T opf__team_reduce(const opf_cuda_team &team, T v, Op op) {
    __shared__ T part[OPF_CUDA_TEAM_MAX / 32];
#pragma unroll
    for (int o = 16; o > 0; o /= 2) {
        v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    }
    if (team.rank % 32 == 0) {
        part[team.rank / 32] = v;
    }
    __syncthreads();
    T r = part[0];
    for (int w = 1; w < team.size / 32; w++) {
        r = op(r, part[w]);
    }
    __syncthreads(); /* part is free for the next reduction */
    return r;
}

/* The sum and the maximum (NaN propagates, as opf_max) of every thread's v,
 * as opf__team_reduce. */
template <typename T> __device__ T opf_team_sum(const opf_cuda_team &team, T v) {
    return opf__team_reduce(team, v, opf__team_add());
}
template <typename T> __device__ T opf_team_max(const opf_cuda_team &team, T v) {
    return opf__team_reduce(team, v, opf__team_maximum());
}

/* In a team body: i over this thread's elements of [0, n): rank, rank +
 * size, ... Every loop over a row's elements in a team body is one of these,
 * so element i always belongs to the same thread: what a thread wrote to an
 * output row, it alone reads back, and no barrier is needed between loops.
 * The loop counts its trips, so that nvcc can unroll it with no test between
 * the copies of the body: a thread then has OPF_CUDA_TEAM_UNROLL of its
 * elements' loads in flight rather than one (stepping i by a run-time size,
 * the unrolled copies each kept a branch, and an H200 read rows at under half
 * its copy rate; docs/gpu.md, "Measured"). */
#ifndef OPF_CUDA_TEAM_UNROLL
/* Copies of an OPF_TEAM_FOR body: 8 was the fastest on every built-in row op
 * of an H200 (4 and 16 each slowed some); define it when compiling
 * (-DOPF_CUDA_TEAM_UNROLL=4, say) to choose another. */
#define OPF_CUDA_TEAM_UNROLL 8
#endif
#define OPF__PRAGMA(...) _Pragma(#__VA_ARGS__)
#define OPF__UNROLL(k) OPF__PRAGMA(unroll k)
#define OPF_TEAM_FOR(i, n)                                                                                             \
    OPF__UNROLL(OPF_CUDA_TEAM_UNROLL)                                                                                  \
    for (int64_t opf__trips = ((n)-opf_team.rank + opf_team.size - 1) / opf_team.size, i = opf_team.rank;              \
         opf__trips > 0; opf__trips--, i += opf_team.size)
/* In a team body: a statement run by one thread of the team (a row's scalar
 * outputs, say). */
#define OPF_TEAM_ONCE if (opf_team.rank == 0)

/* One launch of a row kernel's CUDA build, planned by opforge. libopforge
 * fills it and a user's library reads it: its layout is part of the table
 * ABI (OPF_TABLE_ABI_VERSION). Row r is the r-th index, in C order, of the
 * leading dims ("...") of the call; operand k's row r starts at
 * operands[k] + sum_d idx_d(r) * strides[k][d] elements, where idx_d(r) are
 * r's coordinates in the iteration space (rank, shape): the leading dims
 * without those of size 1, merged where every operand allows, innermost
 * first. An operand's row is len[k] contiguous elements there. */
struct opf_cuda_row_launch {
    opf_dtype dtype; /* OPF_F32 or OPF_F64 */
    int64_t rows;    /* > 0 */
    uint32_t blocks; /* grid size, OPF_CUDA_ROW_THREADS threads per block */
    void *stream;    /* the cudaStream_t to launch on */
    /* Row 0 of each operand (the kernel's inputs, then its outputs), NULL
     * for an absent optional argument; its row length in elements (the whole
     * tensor for an input without "..."). */
    void *operands[OPF_CUDA_ROW_OPERANDS];
    int64_t len[OPF_CUDA_ROW_OPERANDS];
    /* The rows' iteration space and each operand's strides along it, in
     * elements (0 for an input without "...": every row reads it whole). */
    int32_t rank;
    int64_t shape[OPF_MAX_RANK];
    int64_t strides[OPF_CUDA_ROW_OPERANDS][OPF_MAX_RANK];
    opf_attr_value attrs[OPF_MAX_ATTRS];
    /* A team launch (opf_row_kernel.cuda_team): threads per row (a multiple
     * of 32, at most OPF_CUDA_TEAM_MAX; `blocks` blocks, each taking rows
     * blockIdx.x, + blocks, ... in order), and per operand the elements its
     * row address moves per block index (an output summed over rows: one
     * slot per block). 0 in a one-thread-per-row launch. */
    uint32_t team;
    int64_t block_stride[OPF_CUDA_ROW_OPERANDS];
};

/* What a row body sees on the device (named opf__args, as on the CPU, so the
 * same macros declare the rows): pointers to its rows, their lengths, attrs. */
template <int NI, int NO> struct opf__cuda_row_args {
    const void *in[NI > 0 ? NI : 1];
    int64_t in_len[NI > 0 ? NI : 1];
    void *out[NO > 0 ? NO : 1];
    int64_t out_len[NO > 0 ? NO : 1];
    const opf_attr_value *attrs;
};
template <int K> struct opf__cuda_row_lens { int64_t n[K]; };

/* A device row has no streaming fields: OPF_STORE_ROW's plain loop stores it. */
template <int NI, int NO>
__host__ __device__ __forceinline__ const opf_row_args *opf__row_stream_args(const opf__cuda_row_args<NI, NO> *) {
    return (const opf_row_args *)0;
}

/* Element `off` of operand `base`, computed on integers: an absent operand
 * stays NULL, and an empty row's pointer is never dereferenced. */
template <typename T> __device__ __forceinline__ void *opf__cuda_row_at(void *base, int64_t off) {
    const uintptr_t b = (uintptr_t)base;
    return b == 0 ? (void *)0 : (void *)(b + (uintptr_t)off * (uintptr_t)sizeof(T));
}

/* Row r's arguments: each operand's row pointer and length, the attributes.
 * Index is the type of the row-index arithmetic (uint32_t under 2^32 rows). */
template <class F, typename Index>
__device__ __forceinline__ void opf__cuda_row_locate(int64_t r, const opf__cuda_ew_ptrs<F::num_in + F::num_out> &p,
                                                     const opf__cuda_row_lens<F::num_in + F::num_out> &lens,
                                                     const opf__cuda_ew_layout<F::num_in + F::num_out> &layout,
                                                     const opf__cuda_ew_attrs &attrs,
                                                     opf__cuda_row_args<F::num_in, F::num_out> *a) {
    typedef typename F::type T;
    enum { NI = F::num_in, NO = F::num_out, K = NI + NO };
    const opf__cuda_ew_offsets<K> at = opf__cuda_offsets<K, Index>(r, layout);
#pragma unroll
    for (int k = 0; k < NI; k++) {
        a->in[k] = opf__cuda_row_at<T>(p.p[k], at.off[k]);
        a->in_len[k] = lens.n[k];
    }
#pragma unroll
    for (int j = 0; j < NO; j++) {
        a->out[j] = opf__cuda_row_at<T>(p.p[NI + j], at.off[NI + j]);
        a->out_len[j] = lens.n[NI + j];
    }
    a->attrs = attrs.v;
}

/* One thread per row (grid-stride). F is a kernel's row function (see
 * OPF__CUDA_ROW_DEFINE): F::type, F::num_in, F::num_out, F::apply. */
template <class F, typename Index>
__global__ void __launch_bounds__(OPF_CUDA_ROW_THREADS)
    opf__cuda_row_kernel(int64_t rows, const opf__cuda_ew_ptrs<F::num_in + F::num_out> p,
                         const opf__cuda_row_lens<F::num_in + F::num_out> lens,
                         const opf__cuda_ew_layout<F::num_in + F::num_out> layout, const opf__cuda_ew_attrs attrs) {
    const int64_t step = (int64_t)gridDim.x * OPF_CUDA_ROW_THREADS;
    for (int64_t r = (int64_t)blockIdx.x * OPF_CUDA_ROW_THREADS + threadIdx.x; r < rows; r += step) {
        opf__cuda_row_args<F::num_in, F::num_out> a;
        opf__cuda_row_locate<F, Index>(r, p, lens, layout, attrs, &a);
        F::apply(&a);
    }
}

/* A block of threads per row (grid-stride over rows, the same rows for
 * every thread of a block, so that the team's barriers are met; operand k's
 * rows moved by blockIdx.x * block_stride[k]). F is a team body
 * (OPF__CUDA_TEAM_DEFINE): F::apply(args, team). */
template <class F, typename Index>
__global__ void __launch_bounds__(OPF_CUDA_TEAM_MAX)
    opf__cuda_team_kernel(int64_t rows, const opf__cuda_ew_ptrs<F::num_in + F::num_out> p,
                          const opf__cuda_row_lens<F::num_in + F::num_out> lens,
                          const opf__cuda_ew_layout<F::num_in + F::num_out> layout, const opf__cuda_ew_attrs attrs,
                          const opf__cuda_row_lens<F::num_in + F::num_out> block_stride) {
    enum { K = F::num_in + F::num_out };
    const opf_cuda_team team = {(int)threadIdx.x, (int)blockDim.x};
    opf__cuda_ew_ptrs<K> mine;
#pragma unroll
    for (int k = 0; k < K; k++) {
        mine.p[k] = opf__cuda_row_at<typename F::type>(p.p[k], (int64_t)blockIdx.x * block_stride.n[k]);
    }
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        opf__cuda_row_args<F::num_in, F::num_out> a;
        opf__cuda_row_locate<F, Index>(r, mine, lens, layout, attrs, &a);
        F::apply(&a, team);
    }
}

/* The kernel parameters of launch L, for a row function of K operands. */
template <int K> struct opf__cuda_row_params {
    int64_t rows;
    opf__cuda_ew_ptrs<K> p;
    opf__cuda_row_lens<K> lens;
    opf__cuda_ew_layout<K> layout;
    opf__cuda_ew_attrs attrs;
    opf__cuda_row_lens<K> block_stride;
    explicit opf__cuda_row_params(const opf_cuda_row_launch *L) : rows(L->rows) {
        for (int k = 0; k < K; k++) {
            p.p[k] = L->operands[k];
            lens.n[k] = L->len[k];
            block_stride.n[k] = L->block_stride[k];
        }
        layout.rank = L->rank;
        for (int d = 0; d < OPF_MAX_RANK; d++) {
            layout.shape[d] = L->shape[d];
            for (int k = 0; k < K; k++) {
                layout.stride[k][d] = L->strides[k][d];
            }
        }
        for (int a = 0; a < OPF_MAX_ATTRS; a++) {
            attrs.v[a] = L->attrs[a];
        }
    }
};

/* cudaLaunchKernel's result, then cudaGetLastError (which also clears this
 * runtime's error slot). */
static inline int opf__cuda_launched(cudaError_t err) {
    return err != cudaSuccess ? (int)err : (int)cudaGetLastError();
}

/* Enqueues launch L of row function F, one thread per row; returns the
 * cudaError_t. */
template <class F> static int opf__cuda_row_enqueue(const opf_cuda_row_launch *L) {
    opf__cuda_row_params<F::num_in + F::num_out> a(L);
    void *args[5] = {&a.rows, &a.p, &a.lens, &a.layout, &a.attrs};
    const cudaStream_t stream = (cudaStream_t)L->stream;
    const dim3 grid(L->blocks > 0 ? L->blocks : 1), block(OPF_CUDA_ROW_THREADS);
    return opf__cuda_launched(a.rows <= (int64_t)UINT32_MAX
                                  ? cudaLaunchKernel(opf__cuda_row_kernel<F, uint32_t>, grid, block, args, 0, stream)
                                  : cudaLaunchKernel(opf__cuda_row_kernel<F, uint64_t>, grid, block, args, 0, stream));
}

/* Enqueues team launch L of team body F: L->blocks blocks of L->team threads. */
template <class F> static int opf__cuda_team_enqueue(const opf_cuda_row_launch *L) {
    opf__cuda_row_params<F::num_in + F::num_out> a(L);
    void *args[6] = {&a.rows, &a.p, &a.lens, &a.layout, &a.attrs, &a.block_stride};
    const cudaStream_t stream = (cudaStream_t)L->stream;
    const dim3 grid(L->blocks > 0 ? L->blocks : 1), block(L->team);
    return opf__cuda_launched(a.rows <= (int64_t)UINT32_MAX
                                  ? cudaLaunchKernel(opf__cuda_team_kernel<F, uint32_t>, grid, block, args, 0, stream)
                                  : cudaLaunchKernel(opf__cuda_team_kernel<F, uint64_t>, grid, block, args, 0, stream));
}

/* The launcher of a row kernel whose row function is Fn<float> / Fn<double>. */
template <template <typename> class Fn> static int opf__cuda_row_launch(const opf_cuda_row_launch *L) {
    return L->dtype == OPF_F32 ? opf__cuda_row_enqueue<Fn<float>>(L) : opf__cuda_row_enqueue<Fn<double>>(L);
}

/* The launcher of a team body Team<float> / Team<double> (OPF_ROW_KERNEL_TEAM). */
template <template <typename> class Team> static int opf__cuda_team_launch(const opf_cuda_row_launch *L) {
    return L->dtype == OPF_F32 ? opf__cuda_team_enqueue<Team<float>>(L) : opf__cuda_team_enqueue<Team<double>>(L);
}

} /* extern "C++" */

/* What OPF_ELTWISE_KERNEL adds in a CUDA compile: the element function (in
 * an unnamed namespace, so that kernels of the same name in two files or two
 * libraries never meet) and the launcher. */
#define OPF__CUDA_EW_IN(i, x)                                                                                          \
    const T x = opf__in[i];                                                                                            \
    (void)x;
#define OPF__CUDA_EW_OUT(j, y) opf__out[j] = y;
#define OPF__CUDA_EW_DEFINE(name, ins, outs, ...)                                                                      \
    extern "C++" {                                                                                                     \
    namespace {                                                                                                        \
    template <typename T> struct opf__cuda_ew_##name {                                                                 \
        typedef T type;                                                                                                \
        enum { num_in = OPF__LEN(ins), num_out = OPF__LEN(outs) };                                                     \
        static __device__ __forceinline__ void apply(const T *opf__in, T *opf__out, const opf_attr_value *attrs) {     \
            OPF_MATH_USE_FMA(void) attrs;                                                                              \
            OPF__EACH(OPF__CUDA_EW_IN, ins)                                                                            \
            OPF__EACH(OPF__EW_DECL, outs){__VA_ARGS__} OPF__EACH(OPF__CUDA_EW_OUT, outs)                               \
        }                                                                                                              \
    };                                                                                                                 \
    static int opf__cuda_ew_launch_##name(const struct opf_cuda_eltwise_launch *opf__launch) {                         \
        return opf__cuda_ew_launch<opf__cuda_ew_##name>(opf__launch);                                                  \
    }                                                                                                                  \
    }                                                                                                                  \
    }

/* A row body on the device, as on the CPU: attrs, n and the arguments' rows
 * declared from opf__args. */
#define OPF__CUDA_ROW_BODY(ins, outs, ...)                                                                             \
    OPF_MATH_USE_FMA const opf_attr_value *const attrs = opf__args->attrs;                                             \
    const int64_t n = opf__args->in_len[0];                                                                            \
    uint32_t opf__next_asked_at = 0, *const opf__next_asked = &opf__next_asked_at;                                     \
    (void)attrs;                                                                                                       \
    (void)n;                                                                                                           \
    (void)opf__next_asked;                                                                                             \
    OPF__EACH(OPF__ROW_IN, ins)                                                                                        \
    OPF__EACH(OPF__ROW_OUT, outs) { __VA_ARGS__ }

/* What OPF_ROW_KERNEL adds in a CUDA compile: the row function (the CPU
 * builds' body, OPF__ROW_IN / OPF__ROW_OUT declaring the rows from opf__args)
 * and the launcher, in an unnamed namespace as above. */
#define OPF__CUDA_ROW_DEFINE(name, ins, outs, ...)                                                                     \
    extern "C++" {                                                                                                     \
    namespace {                                                                                                        \
    template <typename T> struct opf__cuda_row_##name {                                                                \
        typedef T type;                                                                                                \
        enum { num_in = OPF__LEN(ins), num_out = OPF__LEN(outs) };                                                     \
        static __device__ inline void apply(const opf__cuda_row_args<num_in, num_out> *opf__args) {                    \
            OPF__CUDA_ROW_BODY(ins, outs, __VA_ARGS__)                                                                 \
        }                                                                                                              \
    };                                                                                                                 \
    static int opf__cuda_row_launch_##name(const struct opf_cuda_row_launch *opf__launch) {                            \
        return opf__cuda_row_launch<opf__cuda_row_##name>(opf__launch);                                                \
    }                                                                                                                  \
    }                                                                                                                  \
    }

/* What OPF_ROW_KERNEL_TEAM adds in a CUDA compile: the team body (the
 * arguments declared as in a row body, plus opf_team) and its launcher. */
#define OPF__CUDA_TEAM_DEFINE(name, ins, outs, ...)                                                                    \
    extern "C++" {                                                                                                     \
    namespace {                                                                                                        \
    template <typename T> struct opf__cuda_team_##name {                                                               \
        typedef T type;                                                                                                \
        enum { num_in = OPF__LEN(ins), num_out = OPF__LEN(outs) };                                                     \
        static __device__ inline void apply(const opf__cuda_row_args<num_in, num_out> *opf__args,                      \
                                            const opf_cuda_team opf_team) {                                            \
            OPF__CUDA_ROW_BODY(ins, outs, __VA_ARGS__)                                                                 \
        }                                                                                                              \
    };                                                                                                                 \
    static int opf__cuda_team_launch_##name(const struct opf_cuda_row_launch *opf__launch) {                           \
        return opf__cuda_team_launch<opf__cuda_team_##name>(opf__launch);                                              \
    }                                                                                                                  \
    }                                                                                                                  \
    }

#endif /* OPFORGE_CUDA_H */
