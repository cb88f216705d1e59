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
/* Version of the op-table layout below. A table built against another
 * version is rejected by opf_op_table_validate(). */
#define OPF_TABLE_ABI_VERSION 1

#define OPF_MAX_RANK 16     /* highest tensor rank any op accepts */
#define OPF_MAX_ARGS 8      /* inputs or outputs per op */
#define OPF_MAX_ATTRS 8     /* attributes per op */
#define OPF_MAX_CHECKS 8    /* shape checks per op */
#define OPF_MAX_GRADS 4     /* gradient rules per op */
#define OPF_MAX_CHOICES 8   /* names of one enum attribute */
#define OPF_MAX_RULE_RANK 4 /* rank of an output described dim by dim */

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

/* Message describing the last failure on the calling thread ("" if none).
 * Valid until the next opforge call on this thread. */
OPF_API const char *opf_last_error(void);
/* Static name of a status code, e.g. "OPF_E_SHAPE". */
OPF_API const char *opf_status_name(opf_status status);
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

typedef struct opf_arg_def {
    const char *name;
    uint32_t flags;
    const char *doc;
} opf_arg_def;

/* Shape checks an op's inputs must pass. Dimension indices may be negative
 * (counted from the end). A check naming an absent optional input is skipped. */
typedef enum opf_check_kind {
    OPF_CHECK_NONE = 0,
    OPF_CHECK_RANK = 1,       /* input a has rank `rank` */
    OPF_CHECK_SAME_SHAPE = 2, /* inputs a and b have the same shape */
    OPF_CHECK_DIM_EQ = 3      /* dim a_dim of input a == dim b_dim of input b */
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
    OPF_SHAPE_LIKE = 1, /* the shape of input `like` */
    OPF_SHAPE_DIMS = 2  /* rank `rank`; dim d is dim dims[d].dim of input dims[d].input */
} opf_shape_kind;

typedef struct opf_dim_ref {
    int32_t input;
    int32_t dim; /* may be negative: counted from the end */
} opf_dim_ref;

typedef struct opf_shape_rule {
    opf_shape_kind kind;
    int32_t like;
    int32_t rank;
    opf_dim_ref dims[OPF_MAX_RULE_RANK];
} opf_shape_rule;

/* Where an argument of a gradient op comes from. */
typedef enum opf_grad_source_kind {
    OPF_FROM_NONE = 0,   /* pass nothing (an absent optional input) */
    OPF_FROM_INPUT = 1,  /* forward input `index` */
    OPF_FROM_OUTPUT = 2, /* forward output `index` */
    OPF_FROM_GRAD = 3    /* gradient flowing into forward output `index` */
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
 * (zero). An op with no rules is not differentiable. */
typedef struct opf_grad_def {
    const char *op;
    int32_t num_sources;
    opf_grad_source sources[OPF_MAX_ARGS];
    int32_t num_produces;
    int32_t produces[OPF_MAX_ARGS];
} opf_grad_def;

/* Flags of an op. */
#define OPF_OP_ELEMENTWISE                                                                                             \
    1 /* output element i depends on input elements i only;                                                            \
         an output may then be exactly an input (in place) */

/* The compute function of a row. It is called only by opf_op_run(), after
 * every check the row declares has passed: dtypes supported and equal, devices
 * CPU, shapes valid, outputs of the inferred shapes and not overlapping inputs
 * (elementwise ops may alias exactly). inputs[i]/outputs[i] are NULL for absent
 * optional arguments; attrs are in declared order. */
typedef opf_status (*opf_compute_fn)(const opf_tensor *const *inputs, const opf_tensor *const *outputs,
                                     const opf_attr_value *attrs);

/* The CUDA compute function of a row: the same contract, with every tensor on
 * one CUDA device, and the stream (a cudaStream_t) to launch on. It only
 * enqueues work on that stream: no synchronization, no legacy default stream.
 * Called only by opf_op_run_cuda(). */
typedef opf_status (*opf_cuda_compute_fn)(const opf_tensor *const *inputs, const opf_tensor *const *outputs,
                                          const opf_attr_value *attrs, void *stream);

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
    opf_compute_fn compute;           /* CPU kernel (required) */
    opf_cuda_compute_fn compute_cuda; /* CUDA kernel, or NULL */
} opf_op_def;

/* A table of ops: what libopforge exposes for its built-in ops, and what a
 * user's library exposes for its own (see OPF_EXPORT_OP_TABLE below). */
typedef struct opf_op_table {
    uint32_t abi_version; /* OPF_TABLE_ABI_VERSION */
    const char *name;     /* namespace of the ops, e.g. "opforge" */
    int64_t num_ops;
    const opf_op_def *const *ops;
} opf_op_table;

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
 * on one CUDA device), then the row's compute_cuda enqueued on `stream` (a
 * cudaStream_t; NULL is the legacy default stream — pass the framework's
 * stream instead). OPF_E_UNSUPPORTED if the row has no CUDA kernel or the
 * library was built without CUDA. */
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
/* y = a + b; a and b must have the same shape. */
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
    OPF_ISA_AVX2 = 2,
    OPF_ISA_AVX512 = 3,
    OPF_ISA_NEON = 4
} opf_isa;

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

/* A user library exposes its table with OPF_EXPORT_OP_TABLE(my_table); every
 * adapter finds it as the symbol `opforge_op_table`. */
#define OPF_EXPORT_OP_TABLE(table)                                                                                     \
    OPF_API const opf_op_table *opforge_op_table(void);                                                                \
    OPF_API const opf_op_table *opforge_op_table(void) { return &(table); }

#ifdef __cplusplus
}
#endif

#endif /* OPFORGE_H */
