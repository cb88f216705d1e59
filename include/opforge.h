/*
 * opforge.h — the whole public C API of opforge.
 *
 * opforge is a library of ML kernels written once in C and exposed to every
 * Python ML framework through one mechanism: the *op table*. Each row of the
 * table (an `opf_op_def`) declares an op's inputs, outputs, attributes,
 * dtypes, shape rule, gradient and compute function. Framework adapters walk
 * a table and register every row; they never name an op. The built-in ops use
 * exactly the table type a user's own library exposes.
 *
 * Conventions
 *   - Every entry point returns an `opf_status`. On failure, `opf_last_error()`
 *     returns a message for the calling thread, e.g.
 *       "opf_add: shape mismatch: a is [2,3], b is [3,2]".
 *     The library never aborts, asserts on user input, or prints.
 *   - Tensors are views (`opf_tensor`, laid out like DLPack's `DLTensor`):
 *     a data pointer, device, rank, dtype, shape and element strides.
 *     Strides may be NULL (C-contiguous), zero (broadcast inputs) or negative.
 *   - Sizes are int64_t end to end; tensors over 2^31 elements work.
 *   - All entry points are thread-safe. Large work is split over an internal
 *     thread pool (`OPFORGE_NUM_THREADS` overrides its size); results of
 *     elementwise ops never depend on the thread count, and neither do the
 *     results of dense (reductions are never split across threads).
 *
 * The region between OPF_CDEF_BEGIN and OPF_CDEF_END holds plain declarations
 * only (no function-like macros, no inline code): the Python binding feeds it
 * to CFFI and the Cython .pxd mirrors it.
 */
#ifndef OPFORGE_H
#define OPFORGE_H

#include <stddef.h>
#include <stdint.h>

#include "opforge_math.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define OPF_API __attribute__((visibility("default")))
#else
#define OPF_API
#endif

/* OPF_CDEF_BEGIN */

#define OPF_VERSION_MAJOR 0
#define OPF_VERSION_MINOR 1
#define OPF_VERSION_PATCH 0
/* Version of the op-table layout below (opf_op_def, opf_op_table, opf_op_decl,
 * the kernel types). A table built against another version is rejected by
 * opf_op_table_validate() and opf_ops_resolve(). Version 2 added the
 * declaration layer (opf_op_decl, signatures, kernel engines); version 3 the
 * CUDA build of an authored elementwise kernel (opf_eltwise_kernel.cuda);
 * version 4 tangent rules (opf_op_decl.jvp, opf_op_def.jvps) and the CUDA
 * build of an authored row kernel (opf_row_kernel.cuda); version 5
 * opf_op_decl.flags (OPF_OP_PASS_THROUGH); version 6 a row kernel's CUDA
 * team body (opf_row_kernel.cuda_team, OPF_ROW_KERNEL_TEAM) and the fields
 * of opf_cuda_row_launch that launch it (team, block_stride); version 7 the
 * streaming fields of opf_row_args (OPF_STORE_ROW); version 8 the scratch
 * rows of streamed outputs (opf_row_args.scratch, OPF_ROW_SCRATCH); version
 * 9 runs of rows in one call (opf_row_args.rows and the row strides,
 * opf_row_kernel.flags, OPF_ROW_KERNEL_RUNS); version 10 a streamed row's
 * stores left to the next call (opf_row_args.earlier and .later,
 * OPF_STORE_ROW_LATER, OPF_EARLIER_ROW); version 11 the line a streamed
 * row shares with the next, stored with it (opf_row_args.edges,
 * opf_row_later.edge, opf_row_edge).
 * Libraries built for an earlier version must be rebuilt. */
#define OPF_TABLE_ABI_VERSION 11

#define OPF_MAX_RANK 16     /* highest tensor rank any op accepts */
#define OPF_MAX_ARGS 8      /* inputs or outputs per op */
#define OPF_MAX_ATTRS 8     /* attributes per op */
#define OPF_MAX_CHECKS 16   /* shape checks per op */
#define OPF_MAX_GRADS 8     /* gradient rules per op, and tangent rules per op */
#define OPF_MAX_CHOICES 8   /* names of one enum attribute */
#define OPF_MAX_RULE_RANK 4 /* rank of an output described dim by dim */
#define OPF_NUM_VARIANTS 3  /* per-ISA builds of an authored kernel (opf_kernel_variant) */

/* ------------------------------------------------------------------------ */
/* Status and errors                                                         */
/* ------------------------------------------------------------------------ */

typedef enum opf_status {
    OPF_OK = 0,
    OPF_E_INVALID = 1,     /* bad argument: NULL pointer, bad attribute value */
    OPF_E_DTYPE = 2,       /* unsupported or mismatched dtype */
    OPF_E_SHAPE = 3,       /* wrong rank or incompatible shapes */
    OPF_E_LAYOUT = 4,      /* memory layout the op cannot honour (overlap) */
    OPF_E_DEVICE = 5,      /* tensor on a device the op has no kernel for */
    OPF_E_NOMEM = 6,       /* allocation of scratch memory failed */
    OPF_E_UNSUPPORTED = 7, /* valid request the library cannot serve */
    OPF_E_INTERNAL = 8
} opf_status;

/* Message describing the last failure on the calling thread ("" if none),
 * prefixed by the op that failed: "myops.rowsum: x must have rank 2, ...".
 * Valid until the next opforge call on this thread. */
OPF_API const char *opf_last_error(void);
/* The same message without its "<op>: " prefix (what adapters put after their
 * own name for the op). */
OPF_API const char *opf_last_error_detail(void);
/* Static name of a status code, e.g. "OPF_E_SHAPE". */
OPF_API const char *opf_status_name(opf_status status);
/* The canonical error code of a failure, numbered as absl's status codes,
 * which TensorFlow (TF_Code) and XLA (XLA_FFI_Error_Code) share: 3 invalid
 * argument (bad input of any kind), 8 resource exhausted (OPF_E_NOMEM), 12
 * unimplemented (OPF_E_UNSUPPORTED), 13 internal; 0 for OPF_OK. */
OPF_API int opf_status_code(opf_status status);
/* Library version, e.g. "0.1.0". */
OPF_API const char *opf_version(void);

/* ------------------------------------------------------------------------ */
/* Tensors                                                                   */
/* ------------------------------------------------------------------------ */

/* Element types. Each value is the bit pattern of DLPack's `DLDataType`
 * {code, bits, lanes = 1} read as a little-endian uint32, so an opf_tensor and
 * a DLTensor share one layout. F16 and BF16 are reserved: no op accepts them
 * yet. */
typedef enum opf_dtype {
    OPF_DTYPE_INVALID = 0,
    OPF_F16 = 0x00011002, /* kDLFloat, 16 bits (reserved) */
    OPF_F32 = 0x00012002, /* kDLFloat, 32 bits */
    OPF_F64 = 0x00014002, /* kDLFloat, 64 bits */
    OPF_BF16 = 0x00011004 /* kDLBfloat, 16 bits (reserved) */
} opf_dtype;

/* Bits of opf_op_def.dtypes. */
#define OPF_DTYPES_F32 1
#define OPF_DTYPES_F64 2

/* Device types, numbered as DLPack's DLDeviceType. */
typedef enum opf_device_type { OPF_DEVICE_CPU = 1, OPF_DEVICE_CUDA = 2 } opf_device_type;

typedef struct opf_device {
    int32_t type; /* opf_device_type */
    int32_t id;
} opf_device;

/* A tensor view; the same layout as DLPack's DLTensor. The library never owns
 * or frees the memory it points to. Element (i0, …, ik) lives at
 *   (char *)data + byte_offset + elem_size * sum(i_j * strides[j]).
 * strides == NULL means C-contiguous. A 0-d tensor has ndim == 0 and one
 * element. */
typedef struct opf_tensor {
    void *data;
    opf_device device;
    int32_t ndim;
    opf_dtype dtype;
    const int64_t *shape;
    const int64_t *strides; /* in elements, may be NULL */
    uint64_t byte_offset;
} opf_tensor;

/* Bytes per element of a dtype (0 for an unknown dtype). */
OPF_API size_t opf_dtype_size(opf_dtype dtype);
/* "float32", "float64", … ("invalid" for an unknown dtype). */
OPF_API const char *opf_dtype_name(opf_dtype dtype);
/* A set of OPF_DTYPES_* bits in words: "float32", "float32 or float64". */
OPF_API const char *opf_dtypes_name(uint32_t dtypes);

/* ------------------------------------------------------------------------ */
/* The op table                                                              */
/* ------------------------------------------------------------------------ */

/* Attribute types. ENUM attributes are strings from a fixed list of choices;
 * their value is the index of the choice. */
typedef enum opf_attr_type { OPF_ATTR_FLOAT = 1, OPF_ATTR_INT = 2, OPF_ATTR_ENUM = 3 } opf_attr_type;

/* A value of an attribute, in the declared order of the op's attrs. */
typedef union opf_attr_value {
    double f;  /* OPF_ATTR_FLOAT */
    int64_t i; /* OPF_ATTR_INT, or the choice index of an OPF_ATTR_ENUM */
} opf_attr_value;

typedef struct opf_attr_def {
    const char *name;
    opf_attr_type type;
    opf_attr_value default_value;
    /* OPF_ATTR_ENUM: the names of the choices, NULL after the last. */
    const char *choices[OPF_MAX_CHOICES];
    const char *doc;
} opf_attr_def;

/* Flags of an input or output. */
#define OPF_ARG_OPTIONAL 1 /* may be NULL; checks naming it are then skipped */
#define OPF_ARG_MUTATED 2  /* input written in place (the op returns it) */
#define OPF_ARG_BATCHED                                                                                                \
    4 /* has "..." in its signature: leading dims shared with the other                                                \
         batched arguments, then core_dims dims of its own */
/* An input whose values the kernel never reads: only its shape counts (the
 * target of an output's "[sum_to(like)]", "like: shape" in a signature).
 * The engines neither prefetch nor gather it, and may hand the kernel zeros
 * in its place. */
#define OPF_ARG_SHAPE_ONLY 8

typedef struct opf_arg_def {
    const char *name;
    uint32_t flags;
    const char *doc;
    int32_t core_dims; /* with OPF_ARG_BATCHED: the dims after "..." (a row-wise op's row) */
} opf_arg_def;

/* Shape checks an op's inputs must pass. Dimension indices may be negative
 * (counted from the end). A check naming an absent optional input is skipped.
 * Rows resolved from a signature (opf_ops_resolve) get their checks from it. */
typedef enum opf_check_kind {
    OPF_CHECK_NONE = 0,
    OPF_CHECK_RANK = 1,       /* input a has rank `rank` */
    OPF_CHECK_SAME_SHAPE = 2, /* inputs a and b have the same shape */
    OPF_CHECK_DIM_EQ = 3,     /* dim a_dim of input a == dim b_dim of input b */
    OPF_CHECK_MIN_RANK = 4,   /* input a has rank `rank` or more */
    OPF_CHECK_DIM_IS = 5,     /* dim a_dim of input a == `rank` (a literal size) */
    OPF_CHECK_BATCH_EQ = 6,   /* input a without its last a_dim dims has the shape of
                                 input b without its last b_dim dims ("..." in a signature) */
    OPF_CHECK_BROADCAST = 7   /* inputs a and b broadcast together (NumPy's rules: dims
                                 aligned from the end, each pair equal or one of them 1) */
} opf_check_kind;

typedef struct opf_check {
    opf_check_kind kind;
    int32_t a, a_dim;
    int32_t b, b_dim;
    int32_t rank;
} opf_check;

/* How an output's shape follows from the inputs' shapes. */
typedef enum opf_shape_kind {
    OPF_SHAPE_NONE = 0,
    OPF_SHAPE_LIKE = 1,      /* the shape of input `like` */
    OPF_SHAPE_DIMS = 2,      /* rank `rank`; dim d is dim dims[d].dim of input dims[d].input */
    OPF_SHAPE_BATCH = 3,     /* the dims of input `like` but its last `drop`, then `rank`
                                dims as OPF_SHAPE_DIMS ("y[..., N]" in a signature) */
    OPF_SHAPE_BROADCAST = 4, /* the broadcast (NumPy's rules) of the inputs dims[0 .. rank).input
                                ("y[broadcast(a, b)]"); an absent optional one is left out */
    OPF_SHAPE_SUM_TO = 5     /* the shape of input `like`, on an elementwise row that
                                broadcasts: the kernel runs over the broadcast of all the
                                row's inputs and this output is its result summed over the
                                dims along which `like` is broadcast ("y[sum_to(like)]") */
} opf_shape_kind;

/* A dim of an output: dim `dim` of input `input`, or, with input == -1, the
 * literal size `dim`. */
typedef struct opf_dim_ref {
    int32_t input;
    int32_t dim; /* may be negative: counted from the end */
} opf_dim_ref;

typedef struct opf_shape_rule {
    opf_shape_kind kind;
    int32_t like;
    int32_t rank;
    opf_dim_ref dims[OPF_MAX_RULE_RANK];
    int32_t drop;
} opf_shape_rule;

/* Where an argument of a gradient op comes from. */
typedef enum opf_grad_source_kind {
    OPF_FROM_NONE = 0,   /* pass nothing (an absent optional input) */
    OPF_FROM_INPUT = 1,  /* forward input `index` */
    OPF_FROM_OUTPUT = 2, /* forward output `index` */
    OPF_FROM_GRAD = 3,   /* gradient flowing into forward output `index` */
    OPF_FROM_TANGENT = 4 /* tangent of forward input `index` (tangent rules only) */
} opf_grad_source_kind;

typedef struct opf_grad_source {
    opf_grad_source_kind kind;
    int32_t index;
} opf_grad_source;

/* One gradient rule: run op `op` (a row of the same table) on `sources`;
 * its output j is the gradient of forward input `produces[j]` (-1: unused).
 * Attributes of the gradient op are taken from the forward op's attributes
 * of the same name. op == NULL means identity: the gradient of input
 * produces[0] is sources[0] itself. Inputs without a rule get no gradient
 * (zero). An op with no rules is not differentiable.
 *
 * A tangent rule (opf_op_def.jvps, forward mode) has the same form, mirrored:
 * its sources may be tangents of forward inputs (OPF_FROM_TANGENT, never
 * OPF_FROM_GRAD), and its output j is a contribution to the tangent of
 * forward output `produces[j]`. Contributions to one tensor add up. */
typedef struct opf_grad_def {
    const char *op;
    int32_t num_sources;
    opf_grad_source sources[OPF_MAX_ARGS];
    int32_t num_produces;
    int32_t produces[OPF_MAX_ARGS];
} opf_grad_def;

/* Flags of an op. */
#define OPF_OP_ELEMENTWISE                                                                                             \
    1 /* output element i depends on input elements i only (of the inputs                                              \
         broadcast to the output's shape; an output summed to an input's                                               \
         shape, OPF_SHAPE_SUM_TO, on the elements it adds up); an output                                               \
         not summed may then be exactly an input (in place) */
#define OPF_OP_PASS_THROUGH                                                                                            \
    2 /* an elementwise row whose one output is its first input (y = x;                                                \
         any other input only gives a shape, as sum_to's `like`): summed to                                            \
         a smaller shape or broadcast to a larger one by the shape rule, and                                           \
         where nothing is summed or broadcast, the input itself. Derivative                                            \
         rules then pass the first argument on instead of running the row                                              \
         (the same-shape add's gradient is its incoming gradient, not a copy),                                         \
         and the engine sums the input without calling the kernel */

/* The compute function of a row. It is called only by opf_op_run(), after
 * every check the row declares has passed: dtypes supported and equal, devices
 * CPU, shapes valid, outputs of the inferred shapes and not overlapping inputs
 * (elementwise ops may alias exactly). inputs[i]/outputs[i] are NULL for absent
 * optional arguments; attrs are in declared order. Tensors are views: any
 * strides (NULL: C-contiguous), including zero and negative ones. On failure
 * it returns opf_error(status, "...") so that the caller sees why. */
typedef opf_status (*opf_compute_fn)(const opf_tensor *const *inputs, const opf_tensor *const *outputs,
                                     const opf_attr_value *attrs);

/* The CUDA compute function of a row: the same contract, with every tensor on
 * one CUDA device, and the stream (a cudaStream_t) to launch on. It only
 * enqueues work on that stream: no synchronization, no legacy default stream.
 * Called only by opf_op_run_cuda(). */
typedef opf_status (*opf_cuda_compute_fn)(const opf_tensor *const *inputs, const opf_tensor *const *outputs,
                                          const opf_attr_value *attrs, void *stream);

/* ------------------------------------------------------------------------ */
/* Authored kernels: the math only (see OPF_ELTWISE_KERNEL, OPF_ROW_KERNEL)   */
/* ------------------------------------------------------------------------ */

/* The per-ISA builds of an authored kernel. The variant run is the best one
 * present at or below the level opf_get_isa() reports (OPFORGE_ISA
 * included): avx512 and avx2 on x86-64, the base build elsewhere (NEON is the
 * base on AArch64) and at the scalar and portable levels. */
typedef enum opf_kernel_variant {
    OPF_VARIANT_BASE = 0,
    OPF_VARIANT_AVX2 = 1,  /* x86-64: AVX2 + FMA */
    OPF_VARIANT_AVX512 = 2 /* x86-64: AVX-512 F/VL/BW/DQ */
} opf_kernel_variant;

/* An elementwise kernel over n contiguous elements: in[i] points at n
 * elements of input i, out[j] at n elements of output j, all of one dtype.
 * An output may be exactly an input (in place). The elementwise engine calls
 * it on chunks of any tensor views, from any thread. */
typedef void (*opf_eltwise_fn)(int64_t n, const void *const *in, void *const *out, const opf_attr_value *attrs);

/* The CUDA build of an elementwise kernel, generated by OPF_ELTWISE_KERNEL
 * in a file compiled by nvcc (opforge_cuda.h). opforge's CUDA elementwise
 * engine plans each call (operands, path, iteration space, grid: a struct
 * opf_cuda_eltwise_launch, defined in opforge_cuda.h) and the function
 * enqueues it on the call's stream, returning the launch's cudaError_t
 * (0: enqueued). */
struct opf_cuda_eltwise_launch;
typedef int (*opf_cuda_eltwise_fn)(const struct opf_cuda_eltwise_launch *launch);

typedef struct opf_eltwise_kernel {
    int32_t num_inputs, num_outputs; /* what the kernel reads and writes */
    opf_eltwise_fn f32[OPF_NUM_VARIANTS];
    opf_eltwise_fn f64[OPF_NUM_VARIANTS];
    opf_cuda_eltwise_fn cuda; /* float32 and float64 on CUDA; NULL unless compiled by nvcc */
} opf_eltwise_kernel;

/* One row of a row-wise op. in[i] is input i's row: in_len[i] contiguous
 * elements (the dims after its "..."), or the whole input, contiguous, for an
 * input declared without "..." (the same for every row); NULL when an optional
 * input is absent. out[j] is output j's row of out_len[j] contiguous
 * elements, or, for an output declared without "..." ("dw[M]": a sum over the
 * rows), an accumulator of the whole output that the kernel adds its row's
 * part to (it starts at zero; the row engine adds up the accumulators of its
 * blocks of rows); NULL when an optional output is not wanted. Rows never
 * overlap each other or the inputs.
 *
 * A kernel whose opf_row_kernel.flags has OPF_ROW_KERNEL_RUNS (every
 * OPF_ROW_KERNEL) may be given a run of `rows` rows in one call: row r's
 * pointers are in[i] + r * in_stride[i] and out[j] + r * out_stride[j]
 * (elements; a stride is 0 for an argument that every row shares: an input
 * without "...", an accumulator, an absent argument), and the rows are
 * computed in order, as that many calls of one row would. Such calls stream
 * nothing (stream is 0). Other kernels get one row per call (rows is 1). */
typedef struct opf_row_args {
    const void *in[OPF_MAX_ARGS];
    int64_t in_len[OPF_MAX_ARGS];
    void *out[OPF_MAX_ARGS];
    int64_t out_len[OPF_MAX_ARGS];
    const opf_attr_value *attrs;
    /* Streaming (table ABI 7). Bit j of `stream`: output j is in place
     * (out[j] is its row in the tensor) and large, and the engine asks for
     * its row to go past the caches. A body that stores the row with
     * OPF_STORE_ROW then stores it with non-temporal stores, prefetching
     * the `num_prefetch` ranges (the next row of the batched inputs) among
     * them, and sets bit j of *streamed; a body that stores it otherwise
     * leaves the bit clear, and the engine goes on computing that output's
     * rows in scratch and streaming them itself. */
    uint32_t stream;
    uint32_t *streamed;
    int32_t num_prefetch;
    const void *prefetch[OPF_MAX_ARGS];
    int64_t prefetch_bytes[OPF_MAX_ARGS];
    /* (table ABI 8) Where bit j of `stream` is set: a row of scratch as
     * long as output j's, in cache, for the body to compute values into
     * before OPF_STORE_ROW stores the final ones (OPF_ROW_SCRATCH); NULL
     * otherwise. */
    void *scratch[OPF_MAX_ARGS];
    /* (table ABI 9) The run of rows of this call (see above): 1, or more
     * for a kernel with OPF_ROW_KERNEL_RUNS. */
    int64_t rows;
    int64_t in_stride[OPF_MAX_ARGS];
    int64_t out_stride[OPF_MAX_ARGS];
    /* (table ABI 10) Stores left to the next call, where the engine streams
     * an output's rows one call after the other (NULL elsewhere): `later`
     * is where a body may leave its streamed row's stores
     * (OPF_STORE_ROW_LATER), `earlier` what the previous call left (dst
     * NULL: nothing), which this call stores among its first pass
     * (OPF_EARLIER_ROW) or the engine after it. */
    struct opf_row_later *earlier;
    struct opf_row_later *later;
    /* (table ABI 11) Where `stream` is set: one opf_row_edge per output
     * (edges[j], output j's), which OPF_STORE_ROW and OPF_STORE_ROW_LATER
     * keep the end of a row in when it shares its last line with the next
     * row; NULL elsewhere. The engine stores what is left in them. */
    struct opf_row_edge *edges;
} opf_row_args;

/* (table ABI 11) The last, partial line of a streamed row whose next row
 * starts in the same line (rows that do not end on a 64-byte line, as
 * NumPy's rows of 16 KiB starting 16 bytes past one): the row's bytes in
 * it wait here, and the next row's first bytes complete the line, which
 * then goes to memory as one non-temporal line. Stored with plain stores
 * instead, the two ends of every row each held up the row's streamed lines:
 * on an Intel Xeon (Emerald Rapids) a streamed copy of [8192, 4096] floats
 * 16 bytes past a line took 1.27-1.34 times as long as one on a line, and
 * 1.06 times as long with its edges stored this way. */
typedef struct opf_row_edge {
    char *end;              /* one past the waiting bytes (the next row's first); NULL: none wait */
    unsigned char line[64]; /* the line they fall in: bytes [0, end % 64) are theirs */
} opf_row_edge;

/* (table ABI 10) A streamed row whose stores wait: y[i] = src[i] * factor
 * (rounded to the row's type, as the body's own product would be), src
 * the row's scratch (OPF_ROW_SCRATCH), y in place in the output. */
typedef struct opf_row_later {
    void *dst; /* y's row; NULL: nothing waits */
    const void *src;
    double factor;             /* (a float's factor is exact as a double) */
    int64_t len;               /* elements */
    int64_t head;              /* elements before the row's first line boundary */
    int64_t lines;             /* whole lines after them */
    int64_t stored;            /* of those lines, the ones stored */
    int32_t elem;              /* bytes of an element: 4 or 8 */
    int32_t level;             /* the streaming level of the build that left it (opf__stream_level) */
    struct opf_row_edge *edge; /* (table ABI 11) its output's (opf_row_args.edges), or NULL */
} opf_row_later;

typedef void (*opf_row_fn)(const opf_row_args *args);

/* The CUDA build of a row kernel, generated by OPF_ROW_KERNEL in a file
 * compiled by nvcc (opforge_cuda.h): the same body run by one CUDA thread per
 * row. opforge's CUDA row engine plans each call (rows, where each operand's
 * rows are, grid: a struct opf_cuda_row_launch, defined in opforge_cuda.h)
 * and the function enqueues it on the call's stream, returning the launch's
 * cudaError_t (0: enqueued). */
struct opf_cuda_row_launch;
typedef int (*opf_cuda_row_fn)(const struct opf_cuda_row_launch *launch);

typedef struct opf_row_kernel {
    int32_t num_inputs, num_outputs;
    opf_row_fn f32[OPF_NUM_VARIANTS];
    opf_row_fn f64[OPF_NUM_VARIANTS];
    opf_cuda_row_fn cuda; /* float32 and float64 on CUDA; NULL unless compiled by nvcc */
    /* The team body's launcher (OPF_ROW_KERNEL_TEAM: a block of threads per
     * row, for long rows), or NULL; `cuda` runs the rows it is not used for. */
    opf_cuda_row_fn cuda_team;
    /* (table ABI 9) OPF_ROW_KERNEL_RUNS, or 0 (a hand-written kernel that
     * computes one row per call). */
    uint32_t flags;
} opf_row_kernel;

/* opf_row_kernel.flags: the CPU functions compute a run of rows per call
 * (opf_row_args.rows). The row engine then hands a kernel all the rows of a
 * chunk that lie in place one stride apart in one call, rather than one
 * call per row: on short rows the calls cost as much as the rows (rms_norm
 * on rows of 8 floats ran 2.0 times faster so, softmax on rows of 64 1.3
 * times; AMD Zen 5, one thread). OPF_ROW_KERNEL sets it. */
#define OPF_ROW_KERNEL_RUNS 1u

/* ------------------------------------------------------------------------ */
/* Rows and tables                                                           */
/* ------------------------------------------------------------------------ */

/* A row: everything an adapter needs to register an op. A row comes from a
 * declaration (opf_op_decl, resolved by opf_ops_resolve, which fills every
 * count, check and rule from the signature) or, for code that needs full
 * control, is written out by hand. */
typedef struct opf_op_def {
    const char *name; /* lower_snake_case, unique within a table */
    const char *doc;  /* one paragraph */
    uint32_t flags;   /* OPF_OP_* */
    uint32_t dtypes;  /* OPF_DTYPES_* bits; every tensor argument has the same dtype */
    int32_t num_inputs;
    opf_arg_def inputs[OPF_MAX_ARGS];
    int32_t num_outputs;
    opf_arg_def outputs[OPF_MAX_ARGS];
    opf_shape_rule output_shapes[OPF_MAX_ARGS];
    int32_t num_attrs;
    opf_attr_def attrs[OPF_MAX_ATTRS];
    int32_t num_checks;
    opf_check checks[OPF_MAX_CHECKS];
    int32_t num_grads;
    opf_grad_def grads[OPF_MAX_GRADS];
    /* How the row computes on the CPU: exactly one of compute (a raw compute
     * function), eltwise (run by opforge's elementwise engine; the row must be
     * OPF_OP_ELEMENTWISE) and row (run by the row engine). */
    opf_compute_fn compute;
    /* CUDA kernel, or NULL. A row resolved from a declaration whose eltwise
     * or row kernel has a CUDA build (eltwise->cuda, row->cuda) and that
     * names no compute_cuda gets one that runs that build (when libopforge
     * has CUDA). */
    opf_cuda_compute_fn compute_cuda;
    const opf_eltwise_kernel *eltwise;
    const opf_row_kernel *row;
    const char *qualname;  /* "<table>.<name>", the prefix of the row's errors (NULL: name) */
    const char *signature; /* the declaration's signature, or NULL */
    /* Tangent rules (forward mode), in the form of grads; none: the row has
     * no forward mode, and frameworks say so when asked for it. */
    int32_t num_jvps;
    opf_grad_def jvps[OPF_MAX_GRADS];
} opf_op_def;

/* A table of ops: what libopforge exposes for its built-in ops, and what a
 * user's library exposes for its own (see OPF_EXPORT_OPS below). */
typedef struct opf_op_table {
    uint32_t abi_version; /* OPF_TABLE_ABI_VERSION */
    const char *name;     /* namespace of the ops, e.g. "opforge" */
    int64_t num_ops;
    const opf_op_def *const *ops;
} opf_op_table;

/* ------------------------------------------------------------------------ */
/* Declarations: one signature string per op, no counts                      */
/* ------------------------------------------------------------------------ */

/* One op, declared. The signature names everything a row holds:
 *
 *   "softplus(x) -> y"                        elementwise: x, y any shape
 *   "simple_add(a, b) -> y"                   elementwise: a, b the same shape
 *   "add(a, b) -> y[broadcast(a, b)]"         elementwise, a and b broadcast together
 *   "sum_to(x, like) -> y[sum_to(like)]"      elementwise, summed to like's shape
 *   "scale(x, *, alpha: float = 1) -> y"      attributes after '*'
 *   "rowsum(x[..., M]) -> y[...]"             row-wise: "..." are the rows
 *   "dense(x[N,K], w[K,M], b[M]?, *, activation: {none, relu} = none) -> y[N,M]"
 *   "relu_(x!) -> ()"                         x written in place
 *   "dense_grad(dy[N,M], x[N,K], w[K,M], y[N,M]?, *, activation: {none, relu} = none)
 *      -> (dx[N,K]?, dw[K,M]?, db[M]?)"        optional outputs may be skipped
 *
 * A tensor without dims, or "[...]", is any shape; named dims are checked
 * equal wherever a name recurs, and a literal size (e.g. "[..., 3]") must
 * match; "..." stands for the same leading dims in every argument that has it.
 * An output's brackets may instead hold a shape function of inputs without
 * dims: "[broadcast(a, b, ...)]" (up to OPF_MAX_RULE_RANK inputs) is their
 * broadcast by NumPy's rules (dims aligned from the end, each pair equal or
 * one of them 1), and the inputs named are checked to broadcast together,
 * pairwise; "[sum_to(a)]" has the shape of input a. An elementwise op whose
 * output uses either broadcasts all its inputs: its kernel runs over their
 * broadcast (each input walked with zero strides along the dims it lacks),
 * each output is "[broadcast(<every input>)]" or "[sum_to(<an input>)]", and
 * a summed output gets the kernel's result added up over the dims along which
 * its input is broadcast (never written in place). A compute function may
 * declare "[broadcast(...)]" outputs; "[sum_to(...)]" is elementwise only.
 * '?' marks an optional argument, '!' an input written in place, ": shape"
 * an input of which only the shape is used, never the values
 * ("mul_grad(dy, other, like: shape) -> dx[sum_to(like)]": OPF_ARG_SHAPE_ONLY,
 * which spares its memory traffic). Attribute
 * types: float, int, or an enum {choice, ...}; "= value" gives the default
 * (required for enums: the first choice if omitted).
 *
 * grad (NULL: the op is not differentiable, and every framework says so when
 * asked for its gradient) states, per gradient op, which input gradients it
 * produces from which values, separated by ';':
 *
 *   "dx = relu_grad(dy, x)"                   dy: the gradient of output y
 *   "da = dy; db = dy"                        identity
 *   "dx, dw, db = dense_grad(dy, x, w, y)"    several inputs at once
 *   "_, dw = ..."                             '_': an output not used / an absent input
 *
 * A source is a forward input or output by name, "d<output>" for the gradient
 * flowing into that output, or '_' for nothing. The gradient op's attributes
 * are the forward op's of the same name. A gradient row must be linear in
 * the gradients it receives; gradient rows declare their own grad, so
 * derivatives compose to any order. An absent optional input is zero: a rule
 * that passes one where its op requires a tensor contributes nothing (so
 * write such a term linear in that input).
 *
 * jvp (NULL: the op has no forward mode, and frameworks say so when asked for
 * it) states the tangent of each output (written with a prime) from the
 * tangents of the inputs, in the same form; "x'" is the tangent of input x
 * (absent: zero), and contributions to one output's tangent add up:
 *
 *   "y' = relu_grad(x', x)"                   elementwise: J x' = f'(x) x'
 *   "y' = a'; y' = b'"                        identity, summed
 *   "dx' = softplus_grad(dy', x); _, dx' = softplus_grad_grad(x', dy, x)"
 *
 * Rules must be linear in the tangents. Reverse mode (grad) is the transpose
 * of forward mode (jvp): JAX computes a JVP from jvp and its transpose from
 * grad, so second order in either mode needs, for each row reached, both
 * rules (the gradient row's own grad and jvp; see docs/writing-ops.md). */
typedef struct opf_op_decl {
    const char *signature;
    const char *doc;      /* one paragraph */
    const char *grad;     /* gradient rules, or NULL */
    const char *jvp;      /* tangent rules (forward mode), or NULL */
    const char *arg_docs; /* optional: "x: the input; y: the result" */
    uint32_t dtypes;      /* OPF_DTYPES_* bits; 0 means float32 and float64 */
    /* Exactly one of eltwise, row, compute. */
    const opf_eltwise_kernel *eltwise;
    const opf_row_kernel *row;
    opf_compute_fn compute;
    opf_cuda_compute_fn compute_cuda; /* optional */
    uint32_t flags;                   /* OPF_OP_PASS_THROUGH, or 0 (OPF_OP_ELEMENTWISE comes from the kernel) */
} opf_op_decl;

/* A table, declared: its namespace and its ops, up to an entry whose
 * signature is NULL ({0}). */
typedef struct opf_ops_decl {
    uint32_t abi_version; /* OPF_TABLE_ABI_VERSION */
    const char *name;     /* namespace: a lower_snake_case identifier */
    const opf_op_decl *ops;
} opf_ops_decl;

/* Resolves a declared table into rows (parsing every signature and gradient
 * rule, checking each against its kernel), validated as by
 * opf_op_table_validate. NULL on a mistake, with opf_last_error() naming the
 * table, the row and what is wrong. Release the result with opf_ops_release. */
OPF_API const opf_op_table *opf_ops_resolve(const opf_ops_decl *decl);
/* opf_ops_resolve of a table whose ops are declared in parts (a library
 * built from several files, OPF_EXPORT_OP_PARTS): the rows of every part, in
 * order, each part an array of opf_op_decl ending with {0}, the list of parts
 * ending with NULL. abi_version is the parts' OPF_TABLE_ABI_VERSION. The
 * parts are read during the call only. */
OPF_API const opf_op_table *opf_ops_resolve_parts(uint32_t abi_version, const char *name,
                                                  const opf_op_decl *const *parts);
/* Frees a table made by opf_ops_resolve (NULL is ignored). */
OPF_API void opf_ops_release(const opf_op_table *table);

/* The table of built-in ops. */
OPF_API const opf_op_table *opf_builtin_ops(void);
/* A row of a table by name, or NULL. */
OPF_API const opf_op_def *opf_op_find(const opf_op_table *table, const char *name);
/* Checks a table for consistency (ABI version, counts, names, shape rules,
 * gradient rules pointing at existing rows, ...). Adapters call it before
 * registering a table. */
OPF_API opf_status opf_op_table_validate(const opf_op_table *table);

/* Runs one row: validates everything the row declares, then calls its compute
 * function. NULL attrs means all defaults. This is the single entry point
 * framework adapters use. */
OPF_API opf_status opf_op_run(const opf_op_def *op, const opf_tensor *const *inputs, const opf_tensor *const *outputs,
                              const opf_attr_value *attrs);

/* opf_op_run for tensors on a CUDA device: the same validation (every tensor
 * on one CUDA device), then the row's compute_cuda, or else the CUDA build of
 * its eltwise or row kernel, enqueued on `stream` (a cudaStream_t; NULL is the legacy
 * default stream — pass the framework's stream instead). OPF_E_UNSUPPORTED if
 * the row has no CUDA kernel or the library was built without CUDA. */
OPF_API opf_status opf_op_run_cuda(const opf_op_def *op, const opf_tensor *const *inputs,
                                   const opf_tensor *const *outputs, const opf_attr_value *attrs, void *stream);

/* Shape of output `output` of `op` for the given inputs (only ndim and shape
 * of the inputs are read; a dim of -1 means unknown and yields -1 where it is
 * copied). Runs the row's shape checks first (unknown dims pass). Writes
 * *ndim and shape[0 .. *ndim). */
OPF_API opf_status opf_op_infer_shape(const opf_op_def *op, const opf_tensor *const *inputs, int32_t output,
                                      int32_t *ndim, int64_t *shape);

/* Default attribute values of `op`, written to attrs[0 .. num_attrs). */
OPF_API void opf_op_default_attrs(const opf_op_def *op, opf_attr_value *attrs);

/* The index of choice `text` (`length` bytes, not necessarily NUL-terminated)
 * of enum attribute `attr` of `op`, in *index. OPF_E_INVALID otherwise, with
 * the message "<op>: activation must be one of 'none', 'relu', got 'tanh'".
 * Every adapter decodes enum attributes with it. */
OPF_API opf_status opf_op_attr_choice(const opf_op_def *op, int32_t attr, const char *text, size_t length,
                                      int64_t *index);

/* ------------------------------------------------------------------------ */
/* Built-in ops (each is opf_op_run on its row of opf_builtin_ops())          */
/* ------------------------------------------------------------------------ */

typedef enum opf_activation { OPF_ACT_NONE = 0, OPF_ACT_RELU = 1 } opf_activation;

/* y = max(x, 0); NaN stays NaN. y may be x. */
OPF_API opf_status opf_relu(const opf_tensor *x, const opf_tensor *y);
/* x = max(x, 0) in place. */
OPF_API opf_status opf_relu_(const opf_tensor *x);
/* dx = x > 0 ? dy : 0 (x <= 0 gives 0; a NaN x passes dy, as PyTorch does). */
OPF_API opf_status opf_relu_grad(const opf_tensor *dy, const opf_tensor *x, const opf_tensor *dx);
/* y = alpha * x (in the tensor's dtype). Its gradient is scale(dy, alpha). */
OPF_API opf_status opf_scale(const opf_tensor *x, double alpha, const opf_tensor *y);
/* y = a + b, with a and b broadcast together as NumPy does (y has the
 * broadcast shape; equal shapes are the plain case). */
OPF_API opf_status opf_add(const opf_tensor *a, const opf_tensor *b, const opf_tensor *y);
/* y = act(x·w + b); x [N,K], w [K,M], b [M] or NULL, y [N,M]. */
OPF_API opf_status opf_dense(const opf_tensor *x, const opf_tensor *w, const opf_tensor *b, opf_activation activation,
                             const opf_tensor *y);
/* Gradients of dense. dy [N,M]; y is dense's output, needed when activation
 * is relu (NULL otherwise). Any of dx [N,K], dw [K,M], db [M] may be NULL
 * and is then not computed. */
OPF_API opf_status opf_dense_grad(const opf_tensor *dy, const opf_tensor *x, const opf_tensor *w, const opf_tensor *y,
                                  opf_activation activation, const opf_tensor *dx, const opf_tensor *dw,
                                  const opf_tensor *db);

/* ------------------------------------------------------------------------ */
/* Runtime                                                                   */
/* ------------------------------------------------------------------------ */

/* Instruction-set levels of the kernels. */
typedef enum opf_isa {
    OPF_ISA_SCALAR = 0,   /* plain C reference kernels */
    OPF_ISA_PORTABLE = 1, /* unrolled C the compiler vectorizes for the base ISA */
    OPF_ISA_AVX2 = 2,     /* AVX2 and FMA */
    OPF_ISA_AVX512 = 3,   /* AVX-512 F, VL, BW and DQ (with AVX2 and FMA) */
    OPF_ISA_NEON = 4
} opf_isa;

/* Softmax's exponentials, for a row kernel's CPU body: e_i = exp(x[i] -
 * shift) over the whole blocks of 32 elements of x[0 .. n), each stored to
 * y[i] (unless y is NULL) and added into the partial sum acc[i % 32];
 * lines `ahead` bytes past each block are prefetched (opf_prefetch_at).
 * Returns how many elements it did: a multiple of 32, and 0 at ISA levels
 * without a vector kernel for it (the AVX2 and AVX-512 levels have one,
 * with the same bits), where the caller's own loop does them. A caller
 * continues from there (acc[j] += e_i for i % 32 == j) and combines acc
 * pairwise (OPF_PAIRWISE), as opforge's softmax does. The exponential looks
 * 2^(j/16) up in a table (one permute), which a loop the compiler
 * vectorizes cannot: 1.062 ulp at most over every float x[i] - shift of
 * [ln FLT_MIN, 88.03], 0 below, +inf above, NaN for NaN. x and y may be the
 * same array; any alignment. Thread-safe; CPU code only (not for a CUDA
 * build's device code). */
OPF_API int64_t opf_exp_sum_blocks_f32(int64_t n, const float *x, float shift, float *y, int64_t ahead, float acc[32]);
/* opf_exp_sum_blocks_f32 for a caller that knows a bound on x: no x[i]
 * above `bound` (NaN elements aside), such as the row's maximum that
 * softmax's shift is. Where bound - shift <= 88.03 the kernel skips its
 * own look for exp(x - shift) overflowing (a maximum of each block: about
 * one operation in 15; softmax's rows in cache 1.1 times as fast); the
 * same bits as opf_exp_sum_blocks_f32 for any x within the bound. An x
 * above it is the caller's error: its e_i is then not +inf but some other
 * value. Pass +inf to have every block looked at. */
OPF_API int64_t opf_exp_sum_blocks_bounded_f32(int64_t n, const float *x, float shift, float bound, float *y,
                                               int64_t ahead, float acc[32]);

/* softmax's maximum, for a row kernel's CPU body: m[j] = x[i] > m[j] ? x[i]
 * : m[j] (NaN x left out) for every i % 64 == j over the whole blocks of 64
 * elements of x[0 .. n), m's 64 lanes kept in vector registers, and after
 * each block the next share of the lines that `earlier` (OPF_EARLIER_ROW's
 * plan, of one step a block; NULL: none) stores, where the waiting row is
 * of floats. Returns how many elements it did: a multiple of 64, and 0 at
 * ISA levels without a vector kernel for it (the AVX2 and AVX-512 levels
 * have one), where the caller's own loop does them with
 * opf_earlier_row_step. A loop the compiler vectorizes keeps m in memory
 * across a step's stores: softmax [8192, 4096] float32 with its stores
 * under its maximum ran 1.02-1.08 times as fast as before on an Intel Xeon
 * (Emerald Rapids) so, 1.09-1.11 with this kernel. Thread-safe; CPU code
 * only. */
struct opf_earlier_row;
OPF_API int64_t opf_max_blocks_f32(int64_t n, const float *x, float m[64], struct opf_earlier_row *earlier);
/* Softmax's exponentials and its maximum in one pass, for a row kernel's
 * CPU body: opf_exp_sum_blocks_f32's blocks from the first while no
 * x[i] - shift of a block is above `limit` (at most 88.03; above, it does
 * none), with the same e and sums, and after each block the next share of
 * the lines that `earlier` stores (as opf_max_blocks_f32; OPF_EARLIER_ROW's
 * plan of one step a block of 32). It stops before a block with a larger
 * x (or whose maximum is NaN: a NaN x it does not stop at has e = NaN) and
 * returns how many elements it did, a multiple of 32: 0 at ISA levels
 * without a vector kernel for it (the AVX2 and AVX-512 levels have one).
 * A caller with a shift guessed before its row's maximum is known (the
 * largest of the row's first elements: any shift up to the maximum gives
 * the same quotients e_i / sum up to rounding, and one within `limit` of
 * every x keeps the sum finite) takes the row's maximum and starts again
 * where it stopped short. The row then goes from memory through the cache
 * once, its stores among the exponentials: softmax [8192, 4096] float32 at
 * NumPy's offset on an Intel Xeon (AVX-512) ran 1.04-1.09 times as fast on
 * one thread as with the maximum's pass first (rows of 1024: 1.3-1.4).
 * limit = +INFINITY: every whole block, without looking for a larger x;
 * where an x - shift is above 88.03 (or NaN, or the shift NaN), the e of
 * it is above 2^127 or not finite, and so is the sum of the acc that holds
 * it; else the same e and sums. A caller that guessed its shift takes the
 * row's maximum where that sum, all terms added, is above 2^127 or NaN
 * (which says the same at every level that has the kernel), and spares the
 * look: log_softmax [8192, 4096] float32 ran 1.20-1.26 times as fast as
 * with a limit of 64 on the same Xeon. Thread-safe; CPU code only. */
OPF_API int64_t opf_exp_sum_blocks_below_f32(int64_t n, const float *x, float shift, float limit, float *y,
                                             int64_t ahead, float acc[32], struct opf_earlier_row *earlier);

/* For a compute function (.compute): y = x @ w + b, then `epilogue` on
 * every element of y, on opforge's GEMM (the built-in dense's: packed
 * panels, the ISA's micro-kernel, threads over y's columns). x [N, K],
 * w [K, M], b [M] or NULL, y [N, M]; float32 or float64, one dtype for all;
 * CPU; any strides (a transposed operand is a view with its two strides
 * swapped). epilogue: NULL, or an elementwise kernel of one input and one
 * output (OPF_ELTWISE_KERNEL, its build for the ISA level in use), run in
 * place on each block of y right after the block's last product is added
 * (not in a pass over y of its own), with `attrs` (OPF_MAX_ATTRS values, the
 * kernel's attrs[i]; NULL: all zero). y must not overlap x, w, b or itself.
 * Results do not depend on the thread count. A bad argument is an error
 * naming it (OPF_E_SHAPE, OPF_E_DTYPE, OPF_E_DEVICE, OPF_E_LAYOUT,
 * OPF_E_INVALID). */
OPF_API opf_status opf_matmul(const opf_tensor *x, const opf_tensor *w, const opf_tensor *b,
                              const opf_eltwise_kernel *epilogue, const opf_attr_value *attrs, const opf_tensor *y);

/* The ISA level in use: the best one the CPU supports and the library has
 * kernels for, unless OPFORGE_ISA=scalar|portable|avx2|avx512|neon forces
 * one (a forced level the CPU lacks falls back to the best supported). */
OPF_API opf_isa opf_get_isa(void);
/* "scalar", "portable", "avx2", "avx512", "neon". */
OPF_API const char *opf_isa_name(opf_isa isa);
/* Number of CUDA devices usable by this build of the library: 0 when it was
 * built without CUDA, or no driver or device is present. */
OPF_API int opf_cuda_device_count(void);
/* Threads the pool uses (OPFORGE_NUM_THREADS, else the online CPUs). */
OPF_API int opf_get_num_threads(void);
/* Sets the number of threads (>= 1) used by later calls. */
OPF_API opf_status opf_set_num_threads(int num_threads);

/* OPF_CDEF_END */

/* ------------------------------------------------------------------------ */
/* Helpers for C callers (header-only)                                      */
/* ------------------------------------------------------------------------ */

/* A C-contiguous CPU tensor view over `data`. */
static inline opf_tensor opf_tensor_make(void *data, opf_dtype dtype, int32_t ndim, const int64_t *shape) {
    opf_tensor t;
    t.data = data;
    t.device.type = OPF_DEVICE_CPU;
    t.device.id = 0;
    t.ndim = ndim;
    t.dtype = dtype;
    t.shape = shape;
    t.strides = NULL;
    t.byte_offset = 0;
    return t;
}

/* Reports a failure from a compute function: records the message (opforge
 * prefixes the op's name: "myops.solve: matrix is singular") and returns
 * `status`, so a compute function ends with `return opf_error(...)`. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
OPF_API opf_status
opf_error(opf_status status, const char *fmt, ...);

/* `extern "C"` in C++ (a file compiled by nvcc): what the export macros below
 * define keeps its C name. */
#ifdef __cplusplus
#define OPF__EXTERN_C extern "C"
#else
#define OPF__EXTERN_C
#endif

/* A library exposes a hand-written table with OPF_EXPORT_OP_TABLE(my_table);
 * every adapter finds it as the symbol `opforge_op_table`. */
#define OPF_EXPORT_OP_TABLE(table)                                                                                     \
    OPF__EXTERN_C OPF_API const opf_op_table *opforge_op_table(void);                                                  \
    OPF__EXTERN_C OPF_API const opf_op_table *opforge_op_table(void) { return &(table); }

/* A library exposes declared ops with OPF_EXPORT_OPS("myops", my_decls), where
 * my_decls is an array of opf_op_decl ending with {0}. The table is resolved
 * on first use (once, thread-safe) and released when the library unloads; a
 * declaration mistake makes opforge_op_table() return NULL, with
 * opf_last_error() saying which row is wrong and why. */
#define OPF_EXPORT_OPS(ns, decls)                                                                                      \
    static const opf_ops_decl opf__ops_decl = {OPF_TABLE_ABI_VERSION, ns, decls};                                      \
    OPF__EXPORT_RESOLVED(opf_ops_resolve(&opf__ops_decl))

/* A library built from several files (opforge.build([...]), `opforge build
 * a.c b.c`) declares its ops where their kernels are, each file one part: an
 * array of opf_op_decl ending with {0}, named in a header the files share
 * with OPF_OP_PART(my_part); and one file exports them all, in order, with
 * OPF_EXPORT_OP_PARTS("myops", my_part, my_other_part). A kernel
 * (OPF_ELTWISE_KERNEL, OPF_ROW_KERNEL) is private to its file: its rows are
 * declared in the same file. Resolved as OPF_EXPORT_OPS resolves. */
#if defined(__cplusplus)
#define OPF_OP_PART(part) extern "C" const opf_op_decl part[]
#else
#define OPF_OP_PART(part) extern const opf_op_decl part[]
#endif
#define OPF_EXPORT_OP_PARTS(ns, ...)                                                                                   \
    static const opf_op_decl *const opf__ops_parts[] = {__VA_ARGS__, NULL};                                            \
    OPF__EXPORT_RESOLVED(opf_ops_resolve_parts(OPF_TABLE_ABI_VERSION, ns, opf__ops_parts))

#if !defined(__cplusplus)
#include <stdatomic.h>

/* opforge_op_table(): the table that `resolve` makes, made once (the first
 * call; a thread that loses the race releases its copy) and released when
 * the library unloads. */
#define OPF__EXPORT_RESOLVED(resolve)                                                                                  \
    static const opf_op_table *_Atomic opf__ops_table;                                                                 \
    OPF_API const opf_op_table *opforge_op_table(void);                                                                \
    OPF_API const opf_op_table *opforge_op_table(void) {                                                               \
        const opf_op_table *table = atomic_load(&opf__ops_table);                                                      \
        if (table == NULL) {                                                                                           \
            const opf_op_table *none = NULL;                                                                           \
            table = (resolve);                                                                                         \
            if (table != NULL && !atomic_compare_exchange_strong(&opf__ops_table, &none, table)) {                     \
                opf_ops_release(table);                                                                                \
                table = none;                                                                                          \
            }                                                                                                          \
        }                                                                                                              \
        return table;                                                                                                  \
    }                                                                                                                  \
    __attribute__((destructor)) static void opf__ops_unload(void) {                                                    \
        opf_ops_release(atomic_exchange(&opf__ops_table, NULL));                                                       \
    }
#else
/* The same in C++ (a file of ops compiled by nvcc), with GCC's atomics. */
#define OPF__EXPORT_RESOLVED(resolve)                                                                                  \
    static const opf_op_table *opf__ops_table;                                                                         \
    extern "C" OPF_API const opf_op_table *opforge_op_table(void);                                                     \
    extern "C" OPF_API const opf_op_table *opforge_op_table(void) {                                                    \
        const opf_op_table *table = __atomic_load_n(&opf__ops_table, __ATOMIC_ACQUIRE);                                \
        if (table == NULL) {                                                                                           \
            const opf_op_table *none = NULL;                                                                           \
            table = (resolve);                                                                                         \
            if (table != NULL &&                                                                                       \
                !__atomic_compare_exchange_n(&opf__ops_table, &none, table, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {  \
                opf_ops_release(table);                                                                                \
                table = none;                                                                                          \
            }                                                                                                          \
        }                                                                                                              \
        return table;                                                                                                  \
    }                                                                                                                  \
    __attribute__((destructor)) static void opf__ops_unload(void) {                                                    \
        opf_ops_release(__atomic_exchange_n(&opf__ops_table, (const opf_op_table *)NULL, __ATOMIC_ACQ_REL));           \
    }
#endif

/* ------------------------------------------------------------------------ */
/* Writing kernels: the math only                                            */
/* ------------------------------------------------------------------------ */

/* opf_exp, opf_log1p, opf_tanh, opf_erf, opf_sigmoid, ...: inline, branch-free
 * math that vectorizes with a kernel's loop, included at the top of this file
 * (opforge_math.h; outside extern "C", where its C++ overloads live). */

/*
 * OPF_ELTWISE_KERNEL(name, (inputs...), (outputs...), body) defines the
 * elementwise kernel `name` (an opf_eltwise_kernel) from one body written for
 * one element of every dtype. Inside the body each input is a value of type
 * T (float or double), each output a T variable to assign, and attrs[i] the
 * op's attributes in declared order (attrs[i].f, attrs[i].i):
 *
 *   OPF_ELTWISE_KERNEL(softplus, (x), (y), y = x > 20 ? x : opf_log1p(opf_exp(x));)
 *   OPF_ELTWISE_KERNEL(scale, (x), (y), y = (T)attrs[0].f * x;)
 *
 * opforge runs it over contiguous chunks of any tensor views (strides,
 * broadcasts, in place, empty and 0-d tensors, threads). The body is compiled
 * once per dtype and, on x86-64, once more for AVX2 and for AVX-512; the
 * compiler vectorizes each build (keep the body free of calls other than the
 * inline opf_* math, and of branches other than ?:). A ?: between values the
 * body computes anyway vectorizes everywhere; one whose arm does arithmetic
 * only for that arm vectorizes on AVX-512 but, under GCC's default
 * -ftrapping-math, not on AVX2: write opf_select(c, a, b) there (opforge
 * build compiles with -fno-trapping-math, which lifts that). OPF_IS_F64 tells
 * a body which dtype it is compiled for.
 *
 * OPF_ROW_KERNEL(name, (inputs...), (outputs...), body) defines a row
 * kernel: in the body each input is a `const T *` to its row (n_<name>
 * elements), each output a `T *` to its row (n_<name> elements), n is the
 * first input's row length and attrs the attributes:
 *
 *   OPF_ROW_KERNEL(rowsum, (x), (y), y[0] = opf_sum(n, x);)
 *
 * opf_sum(n, p), opf_max(n, p) and opf_dot(n, a, b) are vectorized
 * reductions over n contiguous elements, in a fixed order (every ISA build
 * gives the same bits). An output declared without "..." (e.g.
 * "layer_norm_grad(dy[..., M], ...) -> (dx[..., M], dw[M])") is a sum over
 * the rows: the body adds its row's part to it (dw[i] += dy[i] * ...), never
 * assigns it; opforge zeroes it and adds the parts of all rows in an order
 * that does not depend on the thread count.
 *
 * Both are built with -O3 by `opforge build` (pass -O3 yourself otherwise:
 * GCC's -O2 vectorizes less).
 *
 * CUDA. The same file compiled by nvcc (as CUDA C++: `-x cu`) also gives each
 * OPF_ELTWISE_KERNEL a CUDA build from the same body (a __device__ function
 * per element and its launcher, opf_eltwise_kernel.cuda; see opforge_cuda.h):
 * its ops then run on CUDA tensors too, in every framework, through opforge's
 * CUDA elementwise engine (16-byte vector loads for contiguous operands,
 * strided and broadcast views of any rank, exact in place, the caller's
 * stream). Each OPF_ROW_KERNEL gets one too: the same body, run by one CUDA
 * thread per row, through opforge's CUDA row engine (rows read in place when
 * their last dims are contiguous, else gathered into and scattered from
 * device scratch on the stream; inputs without "..." passed whole to every
 * row; opf_sum and opf_max reduce in the CPU builds' order, so results are
 * the CPU's bits). The CPU builds are unchanged. See opforge_cuda.h for what
 * each build does and costs.
 *
 *   nvcc -x cu -O3 -fmad=false -Xcompiler -fPIC,-ffp-contract=off -shared myops.c \
 *        -o libmyops.so $(pkg-config --cflags --libs opforge)
 *
 * -fmad=false and -ffp-contract=off keep a*b + c two roundings, as the C
 * build computes it, so the GPU and every CPU build agree bit for bit; never
 * use --use_fast_math (it flushes denormals and approximates). The file is
 * then C++: a declaration names its fields in opf_op_decl's order
 *
 *   {"softplus(x) -> y", .doc = "...", .grad = "...", .arg_docs = "...", .eltwise = &softplus},
 *
 * and g++'s -Wextra warns about the fields it leaves out (add
 * -Wno-missing-field-initializers with -Wextra).
 * Functions a body calls must be usable on the device: opforge's math
 * functions (opf_exp, ...) are; mark your own helpers OPF_KERNEL_FN.
 */
#define OPF_IS_F64 (sizeof(T) == 8)

#define OPF__CAT_(a, b) a##b
#define OPF__CAT(a, b) OPF__CAT_(a, b)
#define OPF__UNPAREN(...) __VA_ARGS__
#define OPF__COUNT(...) OPF__COUNT_(__VA_ARGS__, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define OPF__COUNT_(a1, a2, a3, a4, a5, a6, a7, a8, n, ...) n
#define OPF__LEN(list) OPF__LEN_(OPF__UNPAREN list)
#define OPF__LEN_(...) OPF__COUNT(__VA_ARGS__)
#define OPF__EACH(m, list) OPF__EACH_(m, OPF__UNPAREN list)
#define OPF__EACH_(m, ...) OPF__CAT(OPF__EACH_, OPF__COUNT(__VA_ARGS__))(m, __VA_ARGS__)
#define OPF__EACH_1(m, a) m(0, a)
#define OPF__EACH_2(m, a, b) m(0, a) m(1, b)
#define OPF__EACH_3(m, a, b, c) OPF__EACH_2(m, a, b) m(2, c)
#define OPF__EACH_4(m, a, b, c, d) OPF__EACH_3(m, a, b, c) m(3, d)
#define OPF__EACH_5(m, a, b, c, d, e) OPF__EACH_4(m, a, b, c, d) m(4, e)
#define OPF__EACH_6(m, a, b, c, d, e, f) OPF__EACH_5(m, a, b, c, d, e) m(5, f)
#define OPF__EACH_7(m, a, b, c, d, e, f, g) OPF__EACH_6(m, a, b, c, d, e, f) m(6, g)
#define OPF__EACH_8(m, a, b, c, d, e, f, g, h) OPF__EACH_7(m, a, b, c, d, e, f, g) m(7, h)

#if defined(__clang__)
/* No hint: clang turns a vectorization hint it cannot honour (at -O1, in
 * sanitizer builds) into a warning, which would break a -Werror build of the
 * user's file. clang vectorizes these loops with a run-time overlap check
 * (an output exactly on its input then takes the scalar loop). */
#define OPF__SIMD_LOOP
#elif defined(__GNUC__)
#define OPF__SIMD_LOOP _Pragma("GCC ivdep")
#else
#define OPF__SIMD_LOOP
#endif

#if defined(__GNUC__)
#define OPF_INLINE static inline __attribute__((always_inline))
#else
#define OPF_INLINE static inline
#endif

/* Before a loop of a row kernel's body: the arrays it writes overlap none it
 * reads (a row kernel's rows never overlap each other or its inputs), so the
 * compiler vectorizes it without run-time overlap checks, which GCC gives up
 * on past ten pairs of arrays (a loop reading three rows and writing three). */
#define OPF_SIMD_LOOP OPF__SIMD_LOOP

/* A helper function that kernel bodies call: always inlined (a call left in
 * a kernel's loop keeps it from vectorizing), and in a file compiled by nvcc,
 * for the host and the device. */
#if defined(__CUDACC__)
#define OPF_KERNEL_FN static __forceinline__ __host__ __device__
#else
#define OPF_KERNEL_FN OPF_INLINE
#endif

/*
 * OPF_STORE_ROW(y, i, expr): in a row body, y[i] = expr for every i of
 * output y's row (n_y elements), expr written for one i:
 *
 *   OPF_STORE_ROW(y, i, (x[i] * r) * w[i]);
 *
 * It is the loop `for (i = 0; i < n_y; i++) y[i] = expr;`, and more: where
 * the engine asks for y's row to go past the caches (a large output, stored
 * in place: opf_row_args.stream), it computes the row a 64-byte line at a
 * time and stores each line with non-temporal stores (x86-64), prefetching
 * the next row's inputs among them, so that memory reads the next row while
 * it writes this one and the row takes one pass. A body that stores y
 * otherwise (plain loops, or y read back after it is written) is run with
 * y's rows computed in scratch and streamed by the engine: a second pass
 * over the row, which OPF_STORE_ROW saves. Use it for the pass that writes
 * an output's final values, each element once; expr may read the inputs and
 * anything the body computed before, not y itself. The results are the
 * same bits either way.
 */
/* Whether this build stores lines past the caches (x86-64: non-temporal
 * stores, which every x86-64 CPU has: four 16-byte SSE2 ones per line in
 * the base build, two 32-byte ones in the AVX2 build, one 64-byte one in
 * the AVX-512 build; opf__stream_line_at_level). */
#if defined(__x86_64__) && defined(__GNUC__)
#define OPF__STREAMS 1
#include <emmintrin.h>
#else
#define OPF__STREAMS 0
#endif

/* The streaming fields of a CPU row body's arguments (a CUDA row body's
 * have none: opforge_cuda.h gives NULL for them). */
OPF_KERNEL_FN const opf_row_args *opf__row_stream_args(const opf_row_args *args) { return args; }
/* (output slot's edge in a row body's arguments, or NULL: opf_row_edge) */
OPF_KERNEL_FN opf_row_edge *opf__row_edge(const opf_row_args *args, int slot) {
    return args != 0 && args->edges != 0 ? &args->edges[slot] : 0;
}

/* The next row's inputs, prefetched among the lines a row streams: the
 * `span` lines that each range touches (from `at`, its first), shared out
 * over the row's lines, line l asking for those from l * step up to (l + 1)
 * * step (16.16 fixed point: the range's lines per line stored, rounded
 * up), so that every line of the range is asked for once. A function of l
 * only, so that the loop keeps nothing of it in memory between lines. (A
 * range 16 bytes past a line, as NumPy's rows are, touches one line more
 * than its bytes fill, 257 for 16 KiB over 255 lines streamed: asked for
 * two lines a line, from l * step, each line twice, rms_norm [8192, 4096]
 * float32 took 1.03-1.06 times as long on one thread of an Intel Xeon.) */
typedef struct opf__row_prefetch {
    uintptr_t at[OPF_MAX_ARGS]; /* (an address: the line may start before the range's memory) */
    int64_t step[OPF_MAX_ARGS], span[OPF_MAX_ARGS];
    int32_t count;
} opf__row_prefetch;

/* (The part of each range from `from` to `to`, in 1/65536ths of its lines
 * from its first: 0 to 65536 for all of it.) */
OPF_KERNEL_FN void opf__row_prefetch_init(opf__row_prefetch *p, const opf_row_args *args, int64_t lines, uint32_t from,
                                          uint32_t to) {
    p->count = 0;
    for (int32_t k = 0; args != 0 && k < args->num_prefetch && k < OPF_MAX_ARGS && lines > 0 && from < to; k++) {
        const uintptr_t start = (uintptr_t)args->prefetch[k];
        const int64_t span = ((int64_t)(start % 64) + args->prefetch_bytes[k] + 63) / 64;
        const int64_t first = (int64_t)(((uint64_t)span * from) >> 16), last = (int64_t)(((uint64_t)span * to) >> 16);
        p->at[p->count] = start - start % 64 + 64 * (uintptr_t)first;
        p->span[p->count] = last - first;
        p->step[p->count] = ((p->span[p->count] << 16) + lines - 1) / lines;
        p->count++;
    }
}

/* The lines [*first, *end) of range k (from its first asked) that line
 * `line` asks for. */
OPF_KERNEL_FN void opf__row_prefetch_lines(const opf__row_prefetch *p, int32_t k, int64_t line, int64_t *first,
                                           int64_t *end) {
    const int64_t to = ((line + 1) * p->step[k]) >> 16;
    *first = (line * p->step[k]) >> 16;
    *end = to < p->span[k] ? to : p->span[k];
}

OPF_KERNEL_FN void opf__row_prefetch_line(const opf__row_prefetch *p, int64_t line) {
#if !defined(__CUDA_ARCH__)
    for (int32_t k = 0; k < p->count; k++) {
        int64_t q, end;
        for (opf__row_prefetch_lines(p, k, line, &q, &end); q < end; q++) {
            __builtin_prefetch((const void *)(p->at[k] + 64 * (uintptr_t)q), 0, 2);
        }
    }
#else
    (void)p;
    (void)line;
#endif
}

/* The 64-byte line at `line` (64-byte aligned) stored to `dst` (64-byte
 * aligned) with non-temporal stores. */
OPF_KERNEL_FN void opf__stream_line(void *dst, const void *line) {
#if OPF__STREAMS && !defined(__CUDA_ARCH__)
    for (int q = 0; q < 4; q++) {
        _mm_stream_si128((__m128i *)dst + q, _mm_load_si128((const __m128i *)line + q));
    }
#else
    for (int q = 0; q < 64; q++) {
        ((char *)dst)[q] = ((const char *)line)[q];
    }
#endif
}

/* Whether the row args stream slot `slot`, whose row starts at y (elements
 * of `elem` bytes): OPF_STORE_ROW's test, and OPF_ROW_STREAMED's. */
OPF_KERNEL_FN int opf__row_streamed(const opf_row_args *args, int slot, const void *y, size_t elem) {
    return OPF__STREAMS && args != 0 && (args->stream >> slot & 1u) && (uintptr_t)y % elem == 0;
}

/* The streamed part of OPF_STORE_ROW: the elements up to the row's first
 * line boundary, then whole lines; opf__from is where the plain loop that
 * follows starts (0 when the row is not streamed). */
#define OPF__STORE_ROW_STREAMED(y, i, ...)                                                                             \
    const opf_row_args *const opf__sa = opf__row_stream_args(opf__args);                                               \
    if (opf__row_streamed(opf__sa, opf__slot_##y, (const void *)(y), sizeof(T))) {                                     \
        enum { opf__line_elems = 64 / sizeof(T) };                                                                     \
        int64_t opf__head = (int64_t)((64 - (uintptr_t)(void *)y % 64) % 64 / sizeof(T));                              \
        opf__head = opf__head < n_##y ? opf__head : n_##y;                                                             \
        opf_row_edge *const opf__edge = opf__row_edge(opf__sa, opf__slot_##y);                                         \
        if (opf__head > 0) {                                                                                           \
            T opf__end[opf__line_elems];                                                                               \
            for (int64_t i = 0; i < opf__head; i++) {                                                                  \
                opf__end[i] = (__VA_ARGS__);                                                                           \
            }                                                                                                          \
            opf__edge_head(opf__edge, (void *)(y), opf__end, (size_t)opf__head * sizeof(T), opf__stream_level);        \
        }                                                                                                              \
        const int64_t opf__lines = (n_##y - opf__head) / opf__line_elems;                                              \
        opf__row_prefetch opf__pf;                                                                                     \
        opf__row_prefetch_init(&opf__pf, opf__sa, opf__lines, *opf__next_asked, 65536u);                               \
        for (int64_t opf__k = 0; opf__k < opf__lines; opf__k++) {                                                      \
            const int64_t opf__at = opf__head + opf__k * opf__line_elems;                                              \
            T opf__line[opf__line_elems] __attribute__((aligned(64)));                                                 \
            OPF__SIMD_LOOP                                                                                             \
            for (int64_t i = opf__at; i < opf__at + opf__line_elems; i++) {                                            \
                opf__line[i - opf__at] = (__VA_ARGS__);                                                                \
            }                                                                                                          \
            opf__stream_line_at_level(y + opf__at, opf__line, opf__stream_level);                                      \
            opf__row_prefetch_line(&opf__pf, opf__k);                                                                  \
        }                                                                                                              \
        const int64_t opf__tail = opf__head + opf__lines * opf__line_elems;                                            \
        if (opf__tail < n_##y) {                                                                                       \
            T opf__end[opf__line_elems];                                                                               \
            for (int64_t i = opf__tail; i < n_##y; i++) {                                                              \
                opf__end[i - opf__tail] = (__VA_ARGS__);                                                               \
            }                                                                                                          \
            opf__edge_tail(opf__edge, (void *)(y + opf__tail), opf__end, (size_t)(n_##y - opf__tail) * sizeof(T));     \
        }                                                                                                              \
        opf__from = n_##y;                                                                                             \
        *opf__sa->streamed |= 1u << opf__slot_##y;                                                                     \
    }

#define OPF_STORE_ROW(y, i, ...)                                                                                       \
    do {                                                                                                               \
        int64_t opf__from = 0;                                                                                         \
        OPF__STORE_ROW_STREAMED(y, i, __VA_ARGS__)                                                                     \
        OPF__SIMD_LOOP                                                                                                 \
        for (int64_t i = opf__from; i < n_##y; i++) {                                                                  \
            y[i] = (__VA_ARGS__);                                                                                      \
        }                                                                                                              \
    } while (0)

/*
 * OPF_ROW_STREAMED(y): in a row body, nonzero where OPF_STORE_ROW streams
 * y's row (above) and so asks for the next row's inputs among its stores;
 * 0 elsewhere (rows the engine does not stream, CUDA). A body that
 * prefetches the next row itself (opf_prefetch_at: rows too short to be
 * streamed have no other prefetch) may leave that to the stores where this
 * holds, so that the next row is read while this one is written, as a copy
 * reads and writes, rather than in an earlier pass whose arithmetic is all
 * memory then overlaps. Which is faster depends on that pass: layer_norm's
 * statistics (a few operations an element) leave it, softmax's
 * exponentials keep it (on an Intel Xeon, [8192, 4096], one thread:
 * layer_norm 1.07-1.09x as fast without its own, softmax 0.79x).
 */
#define OPF_ROW_STREAMED(y)                                                                                            \
    opf__row_streamed(opf__row_stream_args(opf__args), opf__slot_##y, (const void *)(y), sizeof(T))

/*
 * OPF_NEXT_ROW_FIRST_PASS(plan, steps): in a row body, before its first pass
 * over the row (a loop of `steps` steps: blocks of elements), declares
 * `plan`, an opf_next_row that asks for the first half of the next row's
 * inputs, a part at each step: the pass calls opf_next_row_step(&plan, s)
 * at its step s (0 .. steps - 1); OPF_STORE_ROW then asks for the other half
 * among its stores. Where the engine streams the row, memory so reads the
 * next row while this row's statistics are computed as well as while it is
 * stored, instead of idling through the first pass; elsewhere (rows not
 * streamed, CUDA) the plan asks for nothing. For a first pass of some
 * arithmetic per element (layer_norm's statistics: on one thread of an Intel
 * Xeon, [8192, 4096] float32, 1.06-1.10 times as fast); a pass of one
 * operation an element (rms_norm's sum of squares) measured 1.02-1.05 times
 * as fast on one thread and 0.84-1.01 times on two once, and 1.03-1.11 on
 * both with rows 16 bytes past a line (OPF_ROW_DOT). A helper function that
 * runs the pass takes a `const opf_next_row *` (NULL: none). For a body that
 * stores its row with OPF_STORE_ROW: one that stores it otherwise has it
 * streamed from scratch by the engine, which asks for all of the next row
 * itself, and a plan would only ask twice for half of it.
 */
typedef opf__row_prefetch opf_next_row;
enum { OPF__FIRST_PASS_SHARE = 32768 }; /* half: in 1/65536ths of each range, from its start */
#define OPF_NEXT_ROW_FIRST_PASS(plan, steps)                                                                           \
    opf_next_row plan;                                                                                                 \
    opf__next_row_plan(&plan, opf__row_stream_args(opf__args), opf__next_asked, (steps))
OPF_KERNEL_FN void opf__next_row_plan(opf_next_row *plan, const opf_row_args *args, uint32_t *asked, int64_t steps) {
    opf__row_prefetch_init(plan, args, steps, *asked, OPF__FIRST_PASS_SHARE);
    *asked = plan->count > 0 ? (uint32_t)OPF__FIRST_PASS_SHARE : *asked;
}
OPF_KERNEL_FN void opf_next_row_step(const opf_next_row *plan, int64_t step) {
    if (plan != 0) {
        opf__row_prefetch_line(plan, step);
    }
}

/*
 * OPF_NEXT_ROW_ASKED(p, bytes): in a row body that has asked for the memory
 * [p, p + bytes) itself (opf_prefetch_at past its row: the next row, or its
 * start, where rows lie one after the other), tells OPF_STORE_ROW not to ask
 * again for the part of the next row's inputs that it holds: each input's
 * range from its start, as far as the memory asked for holds all of them
 * (none where a range does not start within it). softmax's exponentials
 * ask for the next row as they compute this one: its store pass then asks
 * for nothing (1.02-1.04 times as fast on an Intel Xeon, [8192, 4096]).
 */
#define OPF_NEXT_ROW_ASKED(p, bytes) opf__next_row_asked(opf__row_stream_args(opf__args), opf__next_asked, (p), (bytes))
OPF_KERNEL_FN void opf__next_row_asked(const opf_row_args *args, uint32_t *asked, const void *p, int64_t bytes) {
    if (args == 0 || args->num_prefetch <= 0 || bytes <= 0) {
        return;
    }
    const uintptr_t from = (uintptr_t)p, to = from + (uintptr_t)bytes;
    uint32_t share = 65536u; /* (of every range: the least) */
    for (int32_t k = 0; k < args->num_prefetch && k < OPF_MAX_ARGS; k++) {
        const uintptr_t at = (uintptr_t)args->prefetch[k];
        const int64_t range = args->prefetch_bytes[k];
        if (at < from || at >= to) {
            return;
        }
        const int64_t held = (int64_t)(to - at) < range ? (int64_t)(to - at) : range;
        const uint32_t part = range > 0 ? (uint32_t)(((uint64_t)held << 16) / (uint64_t)range) : 65536u;
        share = part < share ? part : share;
    }
    *asked = share > *asked ? share : *asked;
}

/*
 * OPF_ROW_SCRATCH(y): in a row body, a row of n_y elements to compute y's
 * values into when the body needs a pass over them before it can store the
 * final ones, which OPF_STORE_ROW(y, i, expr) then stores, expr reading
 * them. softmax, y = e / sum(e):
 *
 *   T *const e = OPF_ROW_SCRATCH(y);
 *   T sum = 0;
 *   for (int64_t i = 0; i < n; i++) { e[i] = exp(x[i] - m); sum += e[i]; }
 *   const T inv = 1 / sum;
 *   OPF_STORE_ROW(y, i, e[i] * inv);
 *
 * Where the engine asks for y's row to go past the caches it is the
 * engine's scratch, in cache, so that the row is computed there and goes to
 * memory once, in OPF_STORE_ROW's stores; elsewhere it is y itself (and the
 * store above scales y in place). So a body writes and reads it, then
 * stores y with one OPF_STORE_ROW, and neither reads y nor writes y
 * otherwise: y may not hold what was written to the scratch.
 */
#define OPF_ROW_SCRATCH(y) ((T *)opf__row_scratch(opf__row_stream_args(opf__args), opf__slot_##y, (void *)(y)))
/* (The stream bit is tested, as OPF_STORE_ROW tests it, though the engine
 * fills the slot for streamed rows only: the compiler then knows that the
 * scratch is y on the rows not streamed. Without it GCC's code for them ran
 * softmax on rows of 64 floats 2.2 times slower on a Zen 5.) */
OPF_KERNEL_FN void opf__earlier_row_finish(const opf_row_args *args);
OPF_KERNEL_FN void *opf__row_scratch(const opf_row_args *args, int slot, void *y) {
    if (args != 0 && (args->stream >> slot & 1u) && args->scratch[slot] != 0) {
        if (args->earlier != 0 && args->earlier->src == args->scratch[slot]) {
            opf__earlier_row_finish(args); /* (the earlier row's values wait there: OPF_STORE_ROW_LATER) */
        }
        return args->scratch[slot];
    }
    return y;
}

/*
 * OPF_STORE_ROW_LATER(y, src, factor): in a row body, y[i] = src[i] * factor
 * for every i of y's row, src being the row's scratch (OPF_ROW_SCRATCH(y)):
 * OPF_STORE_ROW(y, i, src[i] * factor), the same bits, but where the engine
 * streams y's rows one call after the other it stores none of them now: the
 * next call stores them among the loads of its first pass (OPF_EARLIER_ROW
 * below), or the engine after it. A body whose last pass only scales its
 * scratch into y and whose first pass only reads (softmax: the row's
 * maximum, then the exponentials into the scratch, then the scaled stores)
 * so has memory write its row while it reads the next, as a copy does,
 * instead of writing in a pass of its own after its arithmetic. On an
 * Intel Xeon (Emerald Rapids), softmax [8192, 4096] float32 ran 1.09-1.11
 * times as fast on one and two threads (the stores of each row under the
 * next row's maximum, opf_max_blocks_f32), 1.01-1.06 with rows 16 bytes
 * past a line; since, it stores them among the exponentials of a first
 * pass that writes the scratch (opf_exp_sum_blocks_below_f32).
 * Where the engine does not stream y, or src is not the scratch, or the
 * call has left a row already (one a call: a second output's is stored
 * now), it is OPF_STORE_ROW's loop.
 *
 * OPF_EARLIER_ROW(plan, steps): in a row body, before its first pass (a loop
 * of `steps` steps that reads its row and writes nothing: its maximum, its
 * sums), declares `plan`, which stores the lines the previous call left in
 * OPF_STORE_ROW_LATER, a share at each step: the pass calls
 * opf_earlier_row_step(&plan) once a step, between the iterations of its
 * loops (within one, the loop's partial results would live in memory). Nothing
 * waits on the first row, nor where the engine does not stream (the steps
 * then do nothing). What the steps leave the engine stores after the call.
 * The previous row's values wait in the other of the output's two rows of
 * scratch (the engine alternates them while rows wait), so a body may take
 * OPF_ROW_SCRATCH(y) before its first pass and write it during the pass
 * (softmax's exponentials, opf_exp_sum_blocks_below_f32); where they wait
 * in the scratch it returns (an engine with one row of scratch),
 * OPF_ROW_SCRATCH stores them first. A helper that runs the pass takes an
 * `opf_earlier_row *` (NULL: none).
 */
#define OPF_STORE_ROW_LATER(y, src, factor)                                                                            \
    do {                                                                                                               \
        const opf_row_args *const opf__la = opf__row_stream_args(opf__args);                                           \
        const T *const opf__src = (src);                                                                               \
        const T opf__factor = (factor);                                                                                \
        if (opf__row_streamed(opf__la, opf__slot_##y, (const void *)(y), sizeof(T)) && opf__la->later != 0 &&          \
            opf__la->later->dst == 0 && opf__la->scratch[opf__slot_##y] == (const void *)opf__src && n_##y > 0) {      \
            opf__row_leave(opf__la, opf__slot_##y, (void *)(y), opf__src, (double)opf__factor, n_##y, sizeof(T),       \
                           opf__stream_level);                                                                         \
        } else {                                                                                                       \
            OPF_STORE_ROW(y, opf__i, opf__src[opf__i] * opf__factor);                                                  \
        }                                                                                                              \
    } while (0)
OPF_KERNEL_FN void opf__row_leave(const opf_row_args *args, int slot, void *y, const void *src, double factor,
                                  int64_t len, size_t elem, int level) {
    opf_row_later *const w = args->later;
    w->dst = y;
    w->src = src;
    w->factor = factor;
    w->len = len;
    const int64_t to_line = (int64_t)((64 - (uintptr_t)y % 64) % 64 / elem);
    w->head = to_line < len ? to_line : len;
    w->lines = (len - w->head) / (int64_t)(64 / elem);
    w->stored = 0;
    w->elem = (int32_t)elem;
    w->level = level;
    w->edge = opf__row_edge(args, slot);
    *args->streamed |= 1u << slot;
}

/* Lines [w->stored, to) of a waiting row, streamed; with line 0 the
 * elements before it, and with the last line (or where there are none) those
 * after it, in plain stores (their lines are shared with the rows beside);
 * the row then waits no more. */
#define OPF__LATER_STORE_FN(fn, type)                                                                                  \
    OPF_KERNEL_FN void fn(opf_row_later *w, int64_t to) {                                                              \
        enum { per = 64 / sizeof(type) };                                                                              \
        type *const y = (type *)w->dst;                                                                                \
        const type *const src = (const type *)w->src;                                                                  \
        const type f = (type)w->factor;                                                                                \
        const int64_t head = w->head, lines = w->lines, from = w->stored;                                              \
        const int level = w->level;                                                                                    \
        type end[per];                                                                                                 \
        if (from == 0 && (to > 0 || lines == 0) && head > 0) {                                                         \
            for (int64_t i = 0; i < head; i++) {                                                                       \
                end[i] = src[i] * f;                                                                                   \
            }                                                                                                          \
            opf__edge_head(w->edge, y, end, (size_t)head * sizeof(type), level);                                       \
        }                                                                                                              \
        if (to > from) {                                                                                               \
            opf__stream_scaled_##type(y + head + from * per, src + head + from * per, f, to - from, level);            \
        }                                                                                                              \
        w->stored = to > from ? to : from;                                                                             \
        if (to == lines) {                                                                                             \
            const int64_t tail = head + lines * per;                                                                   \
            for (int64_t i = tail; i < w->len; i++) {                                                                  \
                end[i - tail] = src[i] * f;                                                                            \
            }                                                                                                          \
            if (tail < w->len) {                                                                                       \
                opf__edge_tail(w->edge, y + tail, end, (size_t)(w->len - tail) * sizeof(type));                        \
            }                                                                                                          \
            w->dst = 0;                                                                                                \
        }                                                                                                              \
    }

/* Each kernel build starts on a 64-byte line, so that where its loops fall
 * against the lines the CPU fetches from does not depend on what the linker
 * put before it: softmax's AVX-512 build ran 15% slower on one thread of
 * an AMD Zen 5 starting 48 bytes into a line than starting on one, after a
 * change elsewhere in the library moved it. */
#if defined(__GNUC__)
#define OPF__KERNEL_ALIGN __attribute__((aligned(64)))
#else
#define OPF__KERNEL_ALIGN
#endif

/* Per-ISA builds: the target attributes of the AVX2 and AVX-512 variants
 * (nvcc passes them to the host compiler), and the scope each body opens
 * with, by level (0 base, 1 AVX2, 2 AVX-512). Both AVX builds have FMA:
 * their bodies say so to opforge_math.h (OPF_MATH_USE_FMA), whose functions
 * then fuse a*b + c, and name their level to OPF_STORE_ROW
 * (opf__stream_level). */
#define OPF__LEVEL_SCOPE_0
#define OPF__LEVEL_SCOPE_1 OPF_MATH_USE_FMA OPF__STREAM_LEVEL(1)
#define OPF__LEVEL_SCOPE_2 OPF_MATH_USE_FMA OPF__STREAM_LEVEL(2)
#if defined(__GNUC__)
#define OPF__STREAM_LEVEL(level)                                                                                       \
    _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wshadow\"") enum {                               \
        opf__stream_level = level,                                                                                     \
        opf_vector_bytes = 16 << level                                                                                 \
    };                                                                                                                 \
    _Pragma("GCC diagnostic pop")
#else
#define OPF__STREAM_LEVEL(level) enum { opf__stream_level = level, opf_vector_bytes = 16 << level };
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#define OPF__TARGET_AVX2 __attribute__((target("avx2,fma")))
#define OPF__TARGET_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))
#define OPF__X86(...) __VA_ARGS__
#define OPF__VARIANTS(base, avx2, avx512)                                                                              \
    { base, avx2, avx512 }
#else
#define OPF__X86(...)
#define OPF__VARIANTS(base, avx2, avx512)                                                                              \
    { base, 0, 0 }
#endif

/* opf__stream_line (above) with one store per line (AVX-512) or per half
 * line (AVX2), for the builds that have them: level 2 and 1
 * (opf__stream_level, which the AVX builds of a kernel body declare in
 * their scope, OPF__LEVEL_SCOPE_*; 0 elsewhere). The line
 * of a 64-byte store is one vector the body's loop computed: where four
 * 16-byte stores took it apart first, layer_norm's streamed pass ran
 * three extracts and four stores per line. */
enum { opf__stream_level = 0 };

/* opf_vector_bytes: in a kernel body, the width in bytes of the vectors its
 * build computes with: 64 in the AVX-512 build, 32 in the AVX2 build, 16 in
 * the others (x86-64's base build, SSE2; AArch64's, NEON; the CUDA build;
 * and outside a body). A compile-time constant, like opf_math_fma_ok, for a body that has
 * two ways of computing the same bits and picks the one its build's
 * registers hold: layer_norm sums x - K and (x - K)^2 in one pass where the
 * 2 x 64 floats of partial sums take 8 of AVX-512's 32 registers, and in two
 * passes where they would take all 16 of AVX2's (norms.h,
 * norms_c_sums_f32). */
enum { opf_vector_bytes = 16 };
#if OPF__STREAMS && !defined(__CUDA_ARCH__)
#include <immintrin.h>
OPF__TARGET_AVX512 static inline void opf__stream_line_avx512(void *dst, const void *line) {
    _mm512_stream_si512((__m512i *)dst, _mm512_load_si512(line));
}
OPF__TARGET_AVX2 static inline void opf__stream_line_avx2(void *dst, const void *line) {
    _mm256_stream_si256((__m256i *)dst, _mm256_load_si256((const __m256i *)line));
    _mm256_stream_si256((__m256i *)dst + 1, _mm256_load_si256((const __m256i *)line + 1));
}
#endif
OPF_KERNEL_FN void opf__stream_line_at_level(void *dst, const void *line, int level) {
#if OPF__STREAMS && !defined(__CUDA_ARCH__)
    if (level == 2) {
        opf__stream_line_avx512(dst, line);
        return;
    }
    if (level == 1) {
        opf__stream_line_avx2(dst, line);
        return;
    }
#endif
    (void)level;
    opf__stream_line(dst, line);
}

/* The ends of a streamed row (opf_row_edge): its first `bytes` bytes, from
 * y (up to the next line boundary, or the whole row where it ends before
 * one), and its last, from `at` (a line's start) to the row's end. Where
 * the edge holds the end of the row before, up to y, and the head completes
 * its line, the line goes out as one streamed line; else the edge is
 * emptied and the bytes stored with plain stores. A row's end waits in the
 * edge (an edge that holds another is emptied first), or is stored where
 * there is none (e NULL: not streamed, CUDA). */
OPF_KERNEL_FN void opf__edge_bytes(void *dst, const void *src, size_t bytes) {
    for (size_t b = 0; b < bytes; b++) {
        ((unsigned char *)dst)[b] = ((const unsigned char *)src)[b];
    }
}
OPF_KERNEL_FN void opf__edge_empty(opf_row_edge *e) {
    if (e != 0 && e->end != 0) {
        const size_t bytes = (size_t)((uintptr_t)e->end % 64);
        opf__edge_bytes(e->end - bytes, e->line, bytes);
        e->end = 0;
    }
}
OPF_KERNEL_FN void opf__edge_head(opf_row_edge *e, void *y, const void *vals, size_t bytes, int level) {
    char *const at = (char *)y;
    const size_t in_line = (size_t)((uintptr_t)at % 64);
    if (e != 0 && e->end == at && bytes > 0 && in_line + bytes == 64) {
        unsigned char line[64] __attribute__((aligned(64)));
        opf__edge_bytes(line, e->line, in_line);
        opf__edge_bytes(line + in_line, vals, bytes);
        opf__stream_line_at_level(at - in_line, line, level);
        e->end = 0;
        return;
    }
    opf__edge_empty(e);
    opf__edge_bytes(at, vals, bytes);
}
OPF_KERNEL_FN void opf__edge_tail(opf_row_edge *e, void *at, const void *vals, size_t bytes) {
    if (e != 0 && bytes > 0 && bytes < 64 && (uintptr_t)at % 64 == 0) {
        opf__edge_empty(e);
        opf__edge_bytes(e->line, vals, bytes);
        e->end = (char *)at + bytes;
        return;
    }
    opf__edge_bytes(at, vals, bytes);
}
/* y[i] = s[i] * f over `lines` whole lines of y (y on a line), streamed:
 * in vectors of the build's level (`level`, opf__stream_level), with a
 * plain loop where there are no non-temporal stores. */
#if OPF__STREAMS && !defined(__CUDA_ARCH__)
#include <immintrin.h>
#define OPF__STREAM_SCALED_FNS(type, sfx, avx512_set, avx512_mul, avx512_load, avx512_stream, avx2_set, avx2_mul,      \
                               avx2_load, avx2_stream, sse_set, sse_mul, sse_load, sse_stream)                         \
    OPF__TARGET_AVX512 static inline void opf__stream_scaled_avx512_##sfx(type *y, const type *s, type f,              \
                                                                          int64_t lines) {                             \
        enum { per = 64 / sizeof(type) };                                                                              \
        for (int64_t k = 0; k < lines; k++) {                                                                          \
            avx512_stream(y + per * k, avx512_mul(avx512_load(s + per * k), avx512_set(f)));                           \
        }                                                                                                              \
    }                                                                                                                  \
    OPF__TARGET_AVX2 static inline void opf__stream_scaled_avx2_##sfx(type *y, const type *s, type f, int64_t lines) { \
        enum { per = 32 / sizeof(type) };                                                                              \
        for (int64_t k = 0; k < 2 * lines; k++) {                                                                      \
            avx2_stream(y + per * k, avx2_mul(avx2_load(s + per * k), avx2_set(f)));                                   \
        }                                                                                                              \
    }                                                                                                                  \
    static inline void opf__stream_scaled_sse_##sfx(type *y, const type *s, type f, int64_t lines) {                   \
        enum { per = 16 / sizeof(type) };                                                                              \
        for (int64_t k = 0; k < 4 * lines; k++) {                                                                      \
            sse_stream(y + per * k, sse_mul(sse_load(s + per * k), sse_set(f)));                                       \
        }                                                                                                              \
    }
OPF__STREAM_SCALED_FNS(float, f32, _mm512_set1_ps, _mm512_mul_ps, _mm512_loadu_ps, _mm512_stream_ps, _mm256_set1_ps,
                       _mm256_mul_ps, _mm256_loadu_ps, _mm256_stream_ps, _mm_set1_ps, _mm_mul_ps, _mm_loadu_ps,
                       _mm_stream_ps)
OPF__STREAM_SCALED_FNS(double, f64, _mm512_set1_pd, _mm512_mul_pd, _mm512_loadu_pd, _mm512_stream_pd, _mm256_set1_pd,
                       _mm256_mul_pd, _mm256_loadu_pd, _mm256_stream_pd, _mm_set1_pd, _mm_mul_pd, _mm_loadu_pd,
                       _mm_stream_pd)
#define OPF__STREAM_SCALED_FN(type, sfx)                                                                               \
    OPF_KERNEL_FN void opf__stream_scaled_##type(type *y, const type *s, type f, int64_t lines, int level) {           \
        if (level == 2) {                                                                                              \
            opf__stream_scaled_avx512_##sfx(y, s, f, lines);                                                           \
        } else if (level == 1) {                                                                                       \
            opf__stream_scaled_avx2_##sfx(y, s, f, lines);                                                             \
        } else {                                                                                                       \
            opf__stream_scaled_sse_##sfx(y, s, f, lines);                                                              \
        }                                                                                                              \
    }
#else
#define OPF__STREAM_SCALED_FN(type, sfx)                                                                               \
    OPF_KERNEL_FN void opf__stream_scaled_##type(type *y, const type *s, type f, int64_t lines, int level) {           \
        (void)level;                                                                                                   \
        for (int64_t i = 0; i < lines * (int64_t)(64 / sizeof(type)); i++) {                                           \
            y[i] = s[i] * f;                                                                                           \
        }                                                                                                              \
    }
#endif
OPF__STREAM_SCALED_FN(float, f32)
OPF__STREAM_SCALED_FN(double, f64)
OPF__LATER_STORE_FN(opf__later_store_f32, float)
OPF__LATER_STORE_FN(opf__later_store_f64, double)
/* A waiting row's lines up to `to` (-1: all of it). */
OPF_KERNEL_FN void opf__later_store(opf_row_later *w, int64_t to) {
    to = to < 0 || to > w->lines ? w->lines : to;
    if (w->elem == 8) {
        opf__later_store_f64(w, to);
    } else {
        opf__later_store_f32(w, to);
    }
}
OPF_KERNEL_FN void opf__earlier_row_finish(const opf_row_args *args) {
    if (args != 0 && args->earlier != 0 && args->earlier->dst != 0) {
        opf__later_store(args->earlier, -1);
    }
}

/* OPF_EARLIER_ROW's plan (see OPF_STORE_ROW_LATER above): where the
 * previous row's lines wait, and the share of them a step stores. */
typedef struct opf_earlier_row {
    opf_row_later *w; /* NULL: nothing waits */
    char *dst;        /* the next line to store, */
    const char *src;  /* its values, */
    int64_t left;     /* and the lines from there on */
    int64_t share;    /* lines a step (rounded up) */
    double factor;
    int32_t elem, level;
} opf_earlier_row;
#define OPF_EARLIER_ROW(plan, steps)                                                                                   \
    opf_earlier_row plan;                                                                                              \
    opf__earlier_row_plan(&plan, opf__row_stream_args(opf__args), (steps))
/* (The lines not stored yet, from the first; with none stored, the elements
 * before them as well.) */

OPF_KERNEL_FN void opf__earlier_row_plan(opf_earlier_row *p, const opf_row_args *args, int64_t steps) {
    opf_row_later *const w = args != 0 && args->earlier != 0 && args->earlier->dst != 0 ? args->earlier : 0;
    p->w = w != 0 && steps > 0 ? w : 0;
    p->dst = 0;
    p->src = 0;
    p->left = p->share = 0;
    p->factor = 0;
    p->elem = p->level = 0;
    if (p->w == 0) {
        return;
    }
    if (w->stored == 0 && w->lines > 0) {
        opf__later_store(w, 1); /* (its first line, with the elements before it) */
    }
    const int64_t at = (w->head + w->stored * (64 / w->elem)) * w->elem;
    p->dst = (char *)w->dst + at;
    p->src = (const char *)w->src + at;
    p->left = w->lines - w->stored;
    p->share = (p->left + steps - 1) / steps;
    p->factor = w->factor;
    p->elem = w->elem;
    p->level = w->level;
}
OPF_KERNEL_FN void opf_earlier_row_step(opf_earlier_row *p) {
    if (p != 0 && p->left > 0) {
        const int64_t k = p->left < p->share ? p->left : p->share;
        if (p->elem == 8) {
            opf__stream_scaled_double((double *)p->dst, (const double *)p->src, p->factor, k, p->level);
        } else {
            opf__stream_scaled_float((float *)p->dst, (const float *)p->src, (float)p->factor, k, p->level);
        }
        p->dst += 64 * k;
        p->src += 64 * k;
        p->left -= k;
        p->w->stored += k;
    }
}

#define OPF__EW_IN_PTR(i, x) const T *const opf__in_##x = (const T *)opf__in[i] + opf__at;
#define OPF__EW_OUT_PTR(j, y) T *const opf__out_##y = (T *)opf__out[j] + opf__at;
#define OPF__EW_LOAD(i, x)                                                                                             \
    const T x = opf__in_##x[opf__i];                                                                                   \
    (void)x;
#define OPF__EW_DECL(j, y) T y;
#define OPF__EW_STORE(j, y) opf__out_##y[opf__i] = y;

/* `count` elements from element opf__at. A loop of a constant count (the
 * blocks) is vectorized even at GCC's -O2, whose cost model refuses loops
 * that would need a scalar epilogue. */
#define OPF__EW_LOOP(count, ins, outs, ...)                                                                            \
    {                                                                                                                  \
        OPF__EACH(OPF__EW_IN_PTR, ins)                                                                                 \
        OPF__EACH(OPF__EW_OUT_PTR, outs)                                                                               \
        OPF__SIMD_LOOP                                                                                                 \
        for (int opf__i = 0; opf__i < (count); opf__i++) {                                                             \
            OPF__EACH(OPF__EW_LOAD, ins)                                                                               \
            OPF__EACH(OPF__EW_DECL, outs){__VA_ARGS__} OPF__EACH(OPF__EW_STORE, outs)                                  \
        }                                                                                                              \
    }

enum { OPF__EW_BLOCK = 64 }; /* elements per vectorized block: a multiple of every vector length */

#define OPF__EW_FN(fn, type, target, level, ins, outs, ...)                                                            \
    target OPF__KERNEL_ALIGN static void fn(int64_t opf__n, const void *const *opf__in, void *const *opf__out,         \
                                            const opf_attr_value *opf__attrs) {                                        \
        OPF__LEVEL_SCOPE_##level typedef type T;                                                                       \
        opf_attr_value attrs[OPF_MAX_ATTRS];                                                                           \
        for (int opf__k = 0; opf__k < OPF_MAX_ATTRS; opf__k++) {                                                       \
            attrs[opf__k] = opf__attrs[opf__k];                                                                        \
        }                                                                                                              \
        (void)attrs[0]; /* a use, for the compilers that warn about a body without one */                              \
        int64_t opf__at = 0;                                                                                           \
        for (; opf__at + OPF__EW_BLOCK <= opf__n; opf__at += OPF__EW_BLOCK) {                                          \
            OPF__EW_LOOP(OPF__EW_BLOCK, ins, outs, __VA_ARGS__)                                                        \
        }                                                                                                              \
        const int opf__rest = (int)(opf__n - opf__at);                                                                 \
        OPF__EW_LOOP(opf__rest, ins, outs, __VA_ARGS__)                                                                \
    }

/* The CUDA build (opforge_cuda.h), in files compiled by nvcc only. */
#if defined(__CUDACC__)
#define OPF__CUDA_EW(name, ins, outs, ...) OPF__CUDA_EW_DEFINE(name, ins, outs, __VA_ARGS__)
#define OPF__CUDA_EW_FN(name) opf__cuda_ew_launch_##name
#else
#define OPF__CUDA_EW(name, ins, outs, ...)
#define OPF__CUDA_EW_FN(name) 0
#endif

#define OPF_ELTWISE_KERNEL(name, ins, outs, ...)                                                                       \
    OPF__EW_FN(opf__ew_##name##_f32, float, , 0, ins, outs, __VA_ARGS__)                                               \
    OPF__EW_FN(opf__ew_##name##_f64, double, , 0, ins, outs, __VA_ARGS__)                                              \
    OPF__X86(OPF__EW_FN(opf__ew_##name##_f32_avx2, float, OPF__TARGET_AVX2, 1, ins, outs, __VA_ARGS__) OPF__EW_FN(     \
        opf__ew_##name##_f64_avx2, double, OPF__TARGET_AVX2, 1, ins, outs, __VA_ARGS__)                                \
                 OPF__EW_FN(opf__ew_##name##_f32_avx512, float, OPF__TARGET_AVX512, 2, ins, outs, __VA_ARGS__)         \
                     OPF__EW_FN(opf__ew_##name##_f64_avx512, double, OPF__TARGET_AVX512, 2, ins, outs, __VA_ARGS__))   \
    OPF__CUDA_EW(name, ins, outs, __VA_ARGS__)                                                                         \
    static const opf_eltwise_kernel name = {OPF__LEN(ins), OPF__LEN(outs),                                             \
                                            OPF__VARIANTS(opf__ew_##name##_f32, OPF__X86(opf__ew_##name##_f32_avx2),   \
                                                          OPF__X86(opf__ew_##name##_f32_avx512)),                      \
                                            OPF__VARIANTS(opf__ew_##name##_f64, OPF__X86(opf__ew_##name##_f64_avx2),   \
                                                          OPF__X86(opf__ew_##name##_f64_avx512)),                      \
                                            OPF__CUDA_EW_FN(name)};

#define OPF__ROW_IN(i, x)                                                                                              \
    const T *const x = (const T *)opf__args->in[i];                                                                    \
    const int64_t n_##x = opf__args->in_len[i];                                                                        \
    (void)x;                                                                                                           \
    (void)n_##x;
#define OPF__ROW_OUT(j, y)                                                                                             \
    T *const y = (T *)opf__args->out[j];                                                                               \
    const int64_t n_##y = opf__args->out_len[j];                                                                       \
    enum { opf__slot_##y = j };                                                                                        \
    (void)y;                                                                                                           \
    (void)n_##y;

/* The lines a run's rows will store to, asked for ahead of them. Rows
 * shorter than OPF__RUN_STORES_MAX_ROW bytes are stored in place, through
 * the caches (the row engine streams longer ones past them, with
 * OPF_STORE_ROW: its OPF_ROW_STREAM_MIN_ROW is this constant): a store to a
 * line that is not in cache waits for the line to come in from memory, and
 * the hardware's prefetchers, which follow the loads, did not fetch those
 * lines ahead: on one thread of an Intel Xeon (Emerald Rapids), [131072,
 * 64] float32, softmax_grad took 7.2-7.7 ms where a mul of as many bytes in
 * and out took 2.8. Each row of a run asks for each row-wise output's lines
 * up to OPF__RUN_STORES_AHEAD bytes past its own end, every line once
 * (opf__run_stores.asked): there softmax_grad 1.7-1.8 times as fast,
 * layer_norm_grad and rms_norm_grad 1.5-1.6, softmax and layer_norm 1.2-1.3
 * on one thread, 1.1-1.5 on two; rows of 128 or 192 floats 1.3-1.6. Rows of
 * 1 KiB to 2 KiB, streamed before, are faster so than streamed: [32768,
 * 256] float32 softmax, log_softmax and layer_norm 1.8-1.9 times as fast as
 * streamed on one thread (2.1-2.6 on two), rms_norm 1.6, softmax_grad and
 * layer_norm_grad 1.2-1.4; float64 rows of 128 1.3-1.7. Rows of 2 KiB and
 * 3 KiB went either way (0.86-1.21) and stay streamed. Rows under
 * OPF__RUN_STORES_MIN_ROW bytes ask nothing: their arithmetic, not their
 * stores, is what they wait on (rows of 8 to 32 floats took 0.92-0.98
 * times as long with the asking). Into L1 (prefetcht0; prefetchw measured
 * no faster): the lines are written within a few rows. Outputs of stride 0
 * (accumulators) or of a backward stride ask for nothing. A hint: it never
 * faults, the lines that the last rows ask for past the output's end
 * included. */
enum { OPF__RUN_STORES_MIN_ROW = 256, OPF__RUN_STORES_MAX_ROW = 2048, OPF__RUN_STORES_AHEAD = 2048 };
typedef struct opf__run_stores {
    int32_t count;
    int32_t out[OPF_MAX_ARGS];     /* the outputs that ask */
    int64_t row_end[OPF_MAX_ARGS]; /* bytes from a row's start to the end of what it asks for */
    uintptr_t asked[OPF_MAX_ARGS]; /* the first line not asked for yet */
} opf__run_stores;
OPF_INLINE void opf__run_stores_plan(opf__run_stores *p, const opf_row_args *a, int64_t elem, int32_t num_out) {
    p->count = 0;
    for (int32_t j = 0; j < num_out; j++) {
        const int64_t bytes = a->out_len[j] * elem;
        if (a->out[j] != 0 && a->out_stride[j] > 0 && bytes >= OPF__RUN_STORES_MIN_ROW &&
            bytes < OPF__RUN_STORES_MAX_ROW) {
            const uintptr_t ahead = (uintptr_t)a->out[j] + OPF__RUN_STORES_AHEAD; /* (may lie past the output) */
            p->out[p->count] = j;
            p->row_end[p->count] = bytes + OPF__RUN_STORES_AHEAD;
            p->asked[p->count] = ahead - ahead % 64;
            p->count++;
        }
    }
}
OPF_INLINE void opf__run_stores_ask(opf__run_stores *p, const opf_row_args *a) {
    for (int32_t k = 0; k < p->count; k++) {
        const uintptr_t end = (uintptr_t)a->out[p->out[k]] + (uintptr_t)p->row_end[k];
        for (; p->asked[k] < end; p->asked[k] += 64) {
#if defined(__GNUC__) && !defined(__CUDA_ARCH__)
            __builtin_prefetch((const void *)p->asked[k], 0, 3); /* a hint: never faults */
#endif
        }
    }
}

/* The next row of a run (opf_row_args.rows): each argument's row pointer
 * moved on by its stride; an argument of stride 0 (shared by every row,
 * absent, or NULL) keeps its pointer. */
OPF_INLINE void opf__row_next(opf_row_args *a, int64_t elem, int32_t num_in, int32_t num_out) {
    for (int32_t i = 0; i < num_in; i++) {
        a->in[i] = a->in_stride[i] != 0 ? (const char *)a->in[i] + a->in_stride[i] * elem : a->in[i];
    }
    for (int32_t j = 0; j < num_out; j++) {
        a->out[j] = a->out_stride[j] != 0 ? (char *)a->out[j] + a->out_stride[j] * elem : a->out[j];
    }
}

/* A build of a row kernel: fn##_row computes one row (the body, always
 * inlined, so that a `return` in it ends its row and not the run), and fn a
 * run of rows (opf_row_args.rows), one after the other. A call of one row
 * takes fn##_row's code alone, as the engine's calls on long rows do. */
#define OPF__ROW_FN(fn, type, target, level, ins, outs, ...)                                                           \
    target OPF_INLINE void fn##_row(const opf_row_args *opf__args) {                                                   \
        OPF__LEVEL_SCOPE_##level typedef type T;                                                                       \
        const opf_attr_value *const attrs = opf__args->attrs;                                                          \
        const int64_t n = opf__args->in_len[0];                                                                        \
        uint32_t opf__next_asked_at = 0, *const opf__next_asked = &opf__next_asked_at;                                 \
        (void)attrs;                                                                                                   \
        (void)n;                                                                                                       \
        (void)opf__next_asked;                                                                                         \
        OPF__EACH(OPF__ROW_IN, ins)                                                                                    \
        OPF__EACH(OPF__ROW_OUT, outs) { __VA_ARGS__ }                                                                  \
    }                                                                                                                  \
    target OPF__KERNEL_ALIGN static void fn(const opf_row_args *opf__args) {                                           \
        if (opf__args->rows <= 1) {                                                                                    \
            fn##_row(opf__args);                                                                                       \
            return;                                                                                                    \
        }                                                                                                              \
        opf_row_args opf__row = *opf__args;                                                                            \
        opf__row.rows = 1;                                                                                             \
        opf__run_stores opf__stores;                                                                                   \
        opf__run_stores_plan(&opf__stores, opf__args, (int64_t)sizeof(type), OPF__LEN(outs));                          \
        for (int64_t opf__r = 0; opf__r < opf__args->rows; opf__r++) {                                                 \
            opf__run_stores_ask(&opf__stores, &opf__row);                                                              \
            fn##_row(&opf__row);                                                                                       \
            opf__row_next(&opf__row, (int64_t)sizeof(type), OPF__LEN(ins), OPF__LEN(outs));                            \
        }                                                                                                              \
    }

/* A row kernel's signature as two structs of one char per argument, named
 * as the arguments and in their order, so that OPF_ROW_KERNEL_TEAM can check
 * at compile time that a team body takes its kernel's arguments: a body
 * whose arguments were swapped would compute garbage on CUDA only, and only
 * on rows long enough for the team body. */
#define OPF__SIG_MEMBER(i, a) char a;
#define OPF__ROW_SIG(name, ins, outs)                                                                                  \
    struct opf__row_ins_##name {                                                                                       \
        OPF__EACH(OPF__SIG_MEMBER, ins)                                                                                \
    };                                                                                                                 \
    struct opf__row_outs_##name {                                                                                      \
        OPF__EACH(OPF__SIG_MEMBER, outs)                                                                               \
    };
#if defined(__cplusplus)
#define OPF__STATIC_ASSERT(cond, text) static_assert(cond, text)
#else
#define OPF__STATIC_ASSERT(cond, text) _Static_assert(cond, text)
#endif
#define OPF__SIG_IN_AT(i, a)                                                                                           \
    OPF__STATIC_ASSERT(offsetof(opf__sig_ins, a) == i,                                                                 \
                       "OPF_ROW_KERNEL_TEAM: input " #a " is not where its kernel (an OPF_ROW_KERNEL) takes it");
#define OPF__SIG_OUT_AT(i, a)                                                                                          \
    OPF__STATIC_ASSERT(offsetof(opf__sig_outs, a) == i,                                                                \
                       "OPF_ROW_KERNEL_TEAM: output " #a " is not where its kernel (an OPF_ROW_KERNEL) takes it");
/* A team body's arguments against its kernel's: the same names in the same
 * order (a name the kernel does not take fails as a missing struct member). */
#define OPF__ROW_SIG_CHECK(name, kernel, ins, outs)                                                                    \
    __attribute__((unused)) static inline void opf__row_sig_check_##name(void) {                                       \
        typedef struct opf__row_ins_##kernel opf__sig_ins;                                                             \
        typedef struct opf__row_outs_##kernel opf__sig_outs;                                                           \
        OPF__STATIC_ASSERT(sizeof(opf__sig_ins) == OPF__LEN(ins),                                                      \
                           "OPF_ROW_KERNEL_TEAM: the team body must take as many inputs as its kernel");               \
        OPF__STATIC_ASSERT(sizeof(opf__sig_outs) == OPF__LEN(outs),                                                    \
                           "OPF_ROW_KERNEL_TEAM: the team body must take as many outputs as its kernel");              \
        OPF__EACH(OPF__SIG_IN_AT, ins)                                                                                 \
        OPF__EACH(OPF__SIG_OUT_AT, outs)                                                                               \
    }

/* The CUDA build (opforge_cuda.h), in files compiled by nvcc only. */
#if defined(__CUDACC__)
#define OPF__CUDA_ROW(name, ins, outs, ...) OPF__CUDA_ROW_DEFINE(name, ins, outs, __VA_ARGS__)
#define OPF__CUDA_ROW_FN(name) opf__cuda_row_launch_##name
#else
#define OPF__CUDA_ROW(name, ins, outs, ...)
#define OPF__CUDA_ROW_FN(name) 0
#endif

#define OPF_ROW_KERNEL(name, ins, outs, ...)                                                                           \
    OPF__ROW_FN(opf__row_##name##_f32, float, , 0, ins, outs, __VA_ARGS__)                                             \
    OPF__ROW_FN(opf__row_##name##_f64, double, , 0, ins, outs, __VA_ARGS__)                                            \
    OPF__X86(OPF__ROW_FN(opf__row_##name##_f32_avx2, float, OPF__TARGET_AVX2, 1, ins, outs, __VA_ARGS__) OPF__ROW_FN(  \
        opf__row_##name##_f64_avx2, double, OPF__TARGET_AVX2, 1, ins, outs, __VA_ARGS__)                               \
                 OPF__ROW_FN(opf__row_##name##_f32_avx512, float, OPF__TARGET_AVX512, 2, ins, outs, __VA_ARGS__)       \
                     OPF__ROW_FN(opf__row_##name##_f64_avx512, double, OPF__TARGET_AVX512, 2, ins, outs, __VA_ARGS__)) \
    OPF__CUDA_ROW(name, ins, outs, __VA_ARGS__)                                                                        \
    OPF__ROW_SIG(name, ins, outs)                                                                                      \
    __attribute__((unused)) /* when only an OPF_ROW_KERNEL_TEAM of it is named */                                      \
    static const opf_row_kernel name = {OPF__LEN(ins),                                                                 \
                                        OPF__LEN(outs),                                                                \
                                        OPF__VARIANTS(opf__row_##name##_f32, OPF__X86(opf__row_##name##_f32_avx2),     \
                                                      OPF__X86(opf__row_##name##_f32_avx512)),                         \
                                        OPF__VARIANTS(opf__row_##name##_f64, OPF__X86(opf__row_##name##_f64_avx2),     \
                                                      OPF__X86(opf__row_##name##_f64_avx512)),                         \
                                        OPF__CUDA_ROW_FN(name),                                                        \
                                        0,                                                                             \
                                        OPF_ROW_KERNEL_RUNS};

/* A row kernel `name` with the CPU builds of row kernel `kernel` (an
 * OPF_ROW_KERNEL of the same arguments, defined before it in the file) and,
 * on CUDA, a team body: a block of threads computes each row, which a
 * sequential body cannot do for it (opforge_cuda.h, "Row kernels"). The
 * body sees what a row body sees, plus opf_team (this thread's rank and the
 * team's size); it visits elements with OPF_TEAM_FOR, reduces with
 * opf_team_sum / opf_team_max, and writes a row's scalar outputs under
 * OPF_TEAM_ONCE. opforge's CUDA row engine runs the team body on rows of
 * 32 elements or more and `kernel`'s one-thread-per-row build on shorter
 * ones. Outside nvcc the body is not compiled, and `name` is `kernel` under
 * another name. Every compiler checks that the team body names the
 * kernel's arguments in the kernel's order (a compile error otherwise). */
#if defined(__CUDACC__)
#define OPF__CUDA_TEAM(name, ins, outs, ...) OPF__CUDA_TEAM_DEFINE(name, ins, outs, __VA_ARGS__)
#define OPF__CUDA_TEAM_FN(name) opf__cuda_team_launch_##name
#else
#define OPF__CUDA_TEAM(name, ins, outs, ...)
#define OPF__CUDA_TEAM_FN(name) 0
#endif
#define OPF_ROW_KERNEL_TEAM(name, kernel, ins, outs, ...)                                                              \
    OPF__ROW_SIG_CHECK(name, kernel, ins, outs)                                                                        \
    OPF__CUDA_TEAM(name, ins, outs, __VA_ARGS__)                                                                       \
    static const opf_row_kernel name = {OPF__LEN(ins),                                                                 \
                                        OPF__LEN(outs),                                                                \
                                        OPF__VARIANTS(opf__row_##kernel##_f32, OPF__X86(opf__row_##kernel##_f32_avx2), \
                                                      OPF__X86(opf__row_##kernel##_f32_avx512)),                       \
                                        OPF__VARIANTS(opf__row_##kernel##_f64, OPF__X86(opf__row_##kernel##_f64_avx2), \
                                                      OPF__X86(opf__row_##kernel##_f64_avx512)),                       \
                                        OPF__CUDA_ROW_FN(kernel),                                                      \
                                        OPF__CUDA_TEAM_FN(name),                                                       \
                                        OPF_ROW_KERNEL_RUNS};

/* Reductions for row kernels, vectorized without reassociation flags: 64
 * (float) or 32 (double) independent partial results (element i goes to
 * partial result i mod 64 (32), the remainder after the last whole group of
 * 64 (32) to the combined result), combined pairwise in a fixed order, so
 * every ISA build gives the same bits. That is four independent vector
 * accumulators on AVX-512 (eight on AVX2): one chain of vector additions
 * would wait on the adder's latency, and a row read from memory would come
 * in slower than the memory delivers it. opf_max propagates NaN. In a
 * file compiled by nvcc they are also device functions (__host__ __device__): the
 * CUDA build of a row kernel reduces in the same order, to the same bits. */
#if defined(__CUDACC__)
#define OPF__REDUCE_INLINE static __forceinline__ __host__ __device__
#else
#define OPF__REDUCE_INLINE OPF_INLINE
#endif
#if defined(__CUDA_ARCH__) /* nvcc's device pass: the partial results in registers */
#define OPF__REDUCE_UNROLL _Pragma("unroll")
#else
#define OPF__REDUCE_UNROLL
#endif
/* OPF_PAIRWISE(acc, lanes, COMBINE): the partial results acc[0 .. lanes)
 * combined pairwise into acc[0], in the order opf_sum combines its own:
 * acc[j] = COMBINE(acc[j], acc[j + h]) for j < h, for h = lanes / 2, ...,
 * 1, each half a loop of a constant size (a loop over the halves' sizes
 * turns each into scalar steps through memory). GCC is told not to unroll
 * them, so that its loop vectorizer takes each half whole: fully unrolled,
 * they were left to its straight-line vectorizer, which in some bodies
 * gave up and combined the lanes one scalar at a time, loading each from
 * the stack (GCC 12: a quarter of softmax's time on rows of 64 floats;
 * with the loops, on an Intel Xeon, softmax 1.16x, layer_norm 1.43x,
 * layer_norm_grad 1.18x, rms_norm 1.08x as fast there, the same bits).
 * lanes is a constant power of two up to 64, COMBINE a macro or function
 * of two values: ADD(a, b) ((a) + (b)) for a sum. For a reduction of one's
 * own, written as opf_sum is (`lanes` partial results, acc[j] += ... over
 * j in an inner loop), so that it vectorizes without reassociation and
 * every build gives the same bits. */
/* nvcc's host pass (its host compiler is GCC) passes the GCC pragma on to
 * GCC, after warning that it does not know it (1675), which is silenced
 * around each loop: without the pragma, a CUDA build's CPU kernels lost
 * what the loops gained (on rows of 64 floats, softmax took 1.3-1.4 times
 * and layer_norm 1.9 times as long as in a build without CUDA). */
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDA_ARCH__)
#define OPF__PAIRWISE_LOOP _Pragma("GCC unroll 1")
#if defined(__NVCC__)
#define OPF__PAIRWISE_QUIET _Pragma("nv_diagnostic push") _Pragma("nv_diag_suppress 1675")
#define OPF__PAIRWISE_LOUD _Pragma("nv_diagnostic pop")
#endif
#else
#define OPF__PAIRWISE_LOOP OPF__REDUCE_UNROLL
#endif
#if !defined(OPF__PAIRWISE_QUIET)
#define OPF__PAIRWISE_QUIET
#define OPF__PAIRWISE_LOUD
#endif
#define OPF__PAIRWISE_HALF(acc, lanes, h, COMBINE)                                                                     \
    if ((h) < (lanes)) {                                                                                               \
        OPF__PAIRWISE_QUIET                                                                                            \
        OPF__PAIRWISE_LOOP                                                                                             \
        for (int opf__j = 0; opf__j < (h); opf__j++) {                                                                 \
            (acc)[opf__j] = COMBINE((acc)[opf__j], (acc)[opf__j + (h)]);                                               \
        }                                                                                                              \
        OPF__PAIRWISE_LOUD                                                                                             \
    }
#define OPF_PAIRWISE(acc, lanes, COMBINE)                                                                              \
    do {                                                                                                               \
        OPF__STATIC_ASSERT((lanes) > 0 && (lanes) <= 64 && ((lanes) & ((lanes)-1)) == 0,                               \
                           "OPF_PAIRWISE: lanes must be a power of two, at most 64");                                  \
        OPF__PAIRWISE_HALF(acc, lanes, 32, COMBINE)                                                                    \
        OPF__PAIRWISE_HALF(acc, lanes, 16, COMBINE)                                                                    \
        OPF__PAIRWISE_HALF(acc, lanes, 8, COMBINE)                                                                     \
        OPF__PAIRWISE_HALF(acc, lanes, 4, COMBINE)                                                                     \
        OPF__PAIRWISE_HALF(acc, lanes, 2, COMBINE)                                                                     \
        OPF__PAIRWISE_HALF(acc, lanes, 1, COMBINE)                                                                     \
    } while (0)
/* The combining steps of opf_sum and opf_max (which propagates NaN). */
#define OPF__ADD(a, v) ((a) + (v))
#define OPF__MAX_NAN(a, v) (((v) > (a) || (v) != (v)) ? (v) : (a))
#define OPF__REDUCE_FN(fn, type, lanes, init, COMBINE)                                                                 \
    OPF__REDUCE_INLINE type fn(int64_t n, const type *x) {                                                             \
        if (n < (lanes)) { /* the partial results would all be `init`: the same bits without them */                   \
            type a = init;                                                                                             \
            for (int64_t i = 0; i < n; i++) {                                                                          \
                a = COMBINE(a, x[i]);                                                                                  \
            }                                                                                                          \
            return a;                                                                                                  \
        }                                                                                                              \
        /* The first group sets the partial results (init combined with                                                \
         * its element: the bits of combining it into init). Set to init                                               \
         * first, they were cleared in memory on every call (rep stos), a                                              \
         * fifth of softmax_grad's time on rows of 64 floats (AMD Zen 3). */                                           \
        type acc[lanes];                                                                                               \
        OPF__REDUCE_UNROLL                                                                                             \
        for (int j = 0; j < lanes; j++) {                                                                              \
            acc[j] = COMBINE(init, x[j]);                                                                              \
        }                                                                                                              \
        int64_t i = lanes;                                                                                             \
        for (; i + lanes <= n; i += lanes) {                                                                           \
            OPF__REDUCE_UNROLL                                                                                         \
            for (int j = 0; j < lanes; j++) {                                                                          \
                acc[j] = COMBINE(acc[j], x[i + j]);                                                                    \
            }                                                                                                          \
        }                                                                                                              \
        OPF_PAIRWISE(acc, lanes, COMBINE);                                                                             \
        type a = acc[0];                                                                                               \
        for (; i < n; i++) {                                                                                           \
            a = COMBINE(a, x[i]);                                                                                      \
        }                                                                                                              \
        return a;                                                                                                      \
    }
OPF__REDUCE_FN(opf__sum_f32, float, 64, 0.0f, OPF__ADD)
OPF__REDUCE_FN(opf__sum_f64, double, 32, 0.0, OPF__ADD)
OPF__REDUCE_FN(opf__max_f32, float, 64, -__builtin_inff(), OPF__MAX_NAN)
OPF__REDUCE_FN(opf__max_f64, double, 32, -__builtin_inf(), OPF__MAX_NAN)

/* The dot product: the lanes of opf_sum, each adding the products a[i] * b[i]. */
#define OPF__DOT_FN(fn, type, lanes)                                                                                   \
    OPF__REDUCE_INLINE type fn##_next(int64_t n, const type *x, const type *y, const opf_next_row *next) {             \
        if (n < (lanes)) { /* as above */                                                                              \
            type s = 0;                                                                                                \
            for (int64_t i = 0; i < n; i++) {                                                                          \
                s = s + x[i] * y[i];                                                                                   \
            }                                                                                                          \
            return s;                                                                                                  \
        }                                                                                                              \
        type acc[lanes];                                                                                               \
        for (int j = 0; j < lanes; j++) { /* (the first group sets them, as above) */                                  \
            acc[j] = (type)0 + x[j] * y[j];                                                                            \
        }                                                                                                              \
        opf_next_row_step(next, 0);                                                                                    \
        int64_t i = lanes;                                                                                             \
        for (; i + lanes <= n; i += lanes) {                                                                           \
            for (int j = 0; j < lanes; j++) {                                                                          \
                acc[j] = acc[j] + x[i + j] * y[i + j];                                                                 \
            }                                                                                                          \
            opf_next_row_step(next, i / (lanes));                                                                      \
        }                                                                                                              \
        OPF_PAIRWISE(acc, lanes, OPF__ADD);                                                                            \
        type s = acc[0];                                                                                               \
        for (; i < n; i++) {                                                                                           \
            s = s + x[i] * y[i];                                                                                       \
        }                                                                                                              \
        return s;                                                                                                      \
    }                                                                                                                  \
    OPF__REDUCE_INLINE type fn(int64_t n, const type *x, const type *y) { return fn##_next(n, x, y, 0); }              \
    /* (OPF_ROW_DOT: the plan over its groups of lanes, then the dot) */                                               \
    OPF__REDUCE_INLINE type fn##_row(int64_t n, const type *x, const type *y, const opf_row_args *args,                \
                                     uint32_t *asked) {                                                                \
        opf_next_row plan;                                                                                             \
        opf__next_row_plan(&plan, args, asked, n / (lanes));                                                           \
        return fn##_next(n, x, y, &plan);                                                                              \
    }
OPF__DOT_FN(opf__dot_f32, float, 64)
OPF__DOT_FN(opf__dot_f64, double, 32)

/* Sum and maximum of x[0 .. n): opf_sum(n, x), opf_max(n, x) (-inf when n == 0);
 * the dot product of a[0 .. n) and b[0 .. n): opf_dot(n, a, b) (0 when n == 0). */
#if !defined(__cplusplus)
#define opf_sum(n, x) _Generic((x), const float * : opf__sum_f32, float * : opf__sum_f32, default : opf__sum_f64)(n, x)
#define opf_max(n, x) _Generic((x), const float * : opf__max_f32, float * : opf__max_f32, default : opf__max_f64)(n, x)
#define opf_dot(n, a, b)                                                                                               \
    _Generic((a), const float * : opf__dot_f32, float * : opf__dot_f32, default : opf__dot_f64)(n, a, b)
#define opf__row_dot(n, a, b, args, asked)                                                                             \
    _Generic((a), const float * : opf__dot_f32_row, float * : opf__dot_f32_row, default : opf__dot_f64_row)(          \
        n, a, b, args, asked)
#else
extern "C++" {
OPF__REDUCE_INLINE float opf_sum(int64_t n, const float *x) { return opf__sum_f32(n, x); }
OPF__REDUCE_INLINE double opf_sum(int64_t n, const double *x) { return opf__sum_f64(n, x); }
OPF__REDUCE_INLINE float opf_max(int64_t n, const float *x) { return opf__max_f32(n, x); }
OPF__REDUCE_INLINE double opf_max(int64_t n, const double *x) { return opf__max_f64(n, x); }
OPF__REDUCE_INLINE float opf_dot(int64_t n, const float *a, const float *b) { return opf__dot_f32(n, a, b); }
OPF__REDUCE_INLINE double opf_dot(int64_t n, const double *a, const double *b) { return opf__dot_f64(n, a, b); }
OPF__REDUCE_INLINE float opf__row_dot(int64_t n, const float *a, const float *b, const opf_row_args *args,
                                      uint32_t *asked) {
    return opf__dot_f32_row(n, a, b, args, asked);
}
OPF__REDUCE_INLINE double opf__row_dot(int64_t n, const double *a, const double *b, const opf_row_args *args,
                                       uint32_t *asked) {
    return opf__dot_f64_row(n, a, b, args, asked);
}
}
#endif

/*
 * OPF_ROW_DOT(n, a, b): in a row body, opf_dot(n, a, b) (the same bits) as
 * the body's first pass (OPF_NEXT_ROW_FIRST_PASS): where the engine streams
 * the row it asks for the first half of the next row's inputs among its
 * loads, and the body's OPF_STORE_ROW for the rest. softmax_grad's <dy, y>
 * (two rows read): [8192, 4096] float32 1.05-1.11 times as fast on one and
 * two threads of an Intel Xeon. A dot of a row with itself (rms_norm's sum
 * of squares), on the same Xeon: 1.02-1.09 times on rows on a 64-byte line
 * (an earlier measurement had found nothing there) and 1.03-1.11 on rows 16
 * bytes past one (NumPy's arrays), whose loads each straddle two lines;
 * rows of 256 floats, 0.98-1.00 (rms_norm.c).
 */
#define OPF_ROW_DOT(n, a, b) opf__row_dot(n, a, b, opf__row_stream_args(opf__args), opf__next_asked)

/* Memory ahead of a loop that computes much per element. A row kernel's
 * first pass over its row reads it from memory; a pass that then computes
 * an exponential per element runs from the cache, and the hardware
 * prefetchers, which follow the loads they see a little way ahead, leave
 * memory idle meanwhile: the next part of the row comes in only when a load
 * asks for it. opf_prefetch_ahead(p, bytes), called in such a loop once per
 * block of `bytes` bytes from p (one iteration of a loop over blocks), asks
 * for the lines OPF_PREFETCH_AHEAD bytes further on, so that memory reads
 * the row (and, past its end, whatever follows it: the next row, where
 * rows lie one after the other) while the arithmetic runs. softmax's
 * exponentials do (softmax takes 25% less time on one thread of an Intel
 * Xeon, 11% less on two).
 * A loop that computes little per element gains nothing, and one whose
 * row is already in cache loses a little. A hint: it never faults (any
 * address will do, past the row or the mapping), never changes a result,
 * and does nothing in a CUDA build's device code. */
#define OPF_PREFETCH_AHEAD 4096
/* opf_prefetch_at(p, distance, bytes): the same, `distance` bytes further
 * on: a loop over a part of a row that the next pass reads from memory (its
 * next part, or the next row: distance = the part's length) asks for it
 * while it computes this one. */
OPF_KERNEL_FN void opf_prefetch_at(const void *p, int64_t distance, int64_t bytes) {
#if defined(__GNUC__) && !defined(__CUDA_ARCH__)
    /* integer arithmetic: the address may lie past the end of p's array.
     * Into L2 (locality 2: prefetcht1), as opforge's engines ask: softmax
     * [8192, 4096] took 1.09 times less time on one thread of a Zen 4 and
     * 1.13 on two than with L1's prefetcht0, whose lines there can cost more
     * than they bring. */
    const uintptr_t at = (uintptr_t)p + (uintptr_t)distance;
    for (int64_t b = 0; b < bytes; b += 64) {
        __builtin_prefetch((const void *)(at + (uintptr_t)b), 0, 2);
    }
#else
    (void)p;
    (void)distance;
    (void)bytes;
#endif
}
OPF_KERNEL_FN void opf_prefetch_ahead(const void *p, int64_t bytes) { opf_prefetch_at(p, OPF_PREFETCH_AHEAD, bytes); }

#ifdef __cplusplus
}
#endif

#if defined(__CUDACC__)
#include "opforge_cuda.h"
#endif

#endif /* OPFORGE_H */
