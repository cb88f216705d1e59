# cython: language_level=3
#
# The opforge C API for Cython: `from opforge.capi cimport opf_tensor, opf_relu, ...`
#
# Mirrors the OPF_CDEF_BEGIN ... OPF_CDEF_END region of include/opforge.h (see
# there for the meaning of everything), plus the header-only helper
# opf_tensor_make. Every function is declared nogil: call kernels inside
# `with nogil:`.
#
# Build an extension that cimports this with include dirs
# [opforge.get_include(), <the directory above the opforge package>] and link
# it against opforge.get_library() with an rpath to opforge.get_library_dir().
# tests/python/test_cython.py does exactly that.

from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t

cdef extern from "opforge.h" nogil:

    enum:
        OPF_VERSION_MAJOR
        OPF_VERSION_MINOR
        OPF_VERSION_PATCH
        OPF_TABLE_ABI_VERSION
        OPF_MAX_RANK
        OPF_MAX_ARGS
        OPF_MAX_ATTRS
        OPF_MAX_CHECKS
        OPF_MAX_GRADS
        OPF_MAX_CHOICES
        OPF_MAX_RULE_RANK
        OPF_NUM_VARIANTS
        OPF_DTYPES_F32
        OPF_DTYPES_F64
        OPF_ARG_OPTIONAL
        OPF_ARG_MUTATED
        OPF_ARG_BATCHED
        OPF_ARG_SHAPE_ONLY
        OPF_OP_ELEMENTWISE
        OPF_OP_PASS_THROUGH
        OPF_ROW_KERNEL_RUNS

    # -- status and errors ------------------------------------------------

    ctypedef enum opf_status:
        OPF_OK
        OPF_E_INVALID
        OPF_E_DTYPE
        OPF_E_SHAPE
        OPF_E_LAYOUT
        OPF_E_DEVICE
        OPF_E_NOMEM
        OPF_E_UNSUPPORTED
        OPF_E_INTERNAL

    const char *opf_last_error()
    const char *opf_last_error_detail()
    const char *opf_status_name(opf_status status)
    int opf_status_code(opf_status status)
    const char *opf_version()

    # -- tensors ------------------------------------------------------------

    ctypedef enum opf_dtype:
        OPF_DTYPE_INVALID
        OPF_F16
        OPF_F32
        OPF_F64
        OPF_BF16

    ctypedef enum opf_device_type:
        OPF_DEVICE_CPU
        OPF_DEVICE_CUDA

    ctypedef struct opf_device:
        int32_t type
        int32_t id

    ctypedef struct opf_tensor:
        void *data
        opf_device device
        int32_t ndim
        opf_dtype dtype
        const int64_t *shape
        const int64_t *strides
        uint64_t byte_offset

    size_t opf_dtype_size(opf_dtype dtype)
    const char *opf_dtype_name(opf_dtype dtype)
    const char *opf_dtypes_name(uint32_t dtypes)

    # -- the op table -------------------------------------------------------

    ctypedef enum opf_attr_type:
        OPF_ATTR_FLOAT
        OPF_ATTR_INT
        OPF_ATTR_ENUM

    ctypedef union opf_attr_value:
        double f
        int64_t i

    ctypedef struct opf_attr_def:
        const char *name
        opf_attr_type type
        opf_attr_value default_value
        const char *choices[OPF_MAX_CHOICES]
        const char *doc

    ctypedef struct opf_arg_def:
        const char *name
        uint32_t flags
        const char *doc
        int32_t core_dims

    ctypedef enum opf_check_kind:
        OPF_CHECK_NONE
        OPF_CHECK_RANK
        OPF_CHECK_SAME_SHAPE
        OPF_CHECK_DIM_EQ
        OPF_CHECK_MIN_RANK
        OPF_CHECK_DIM_IS
        OPF_CHECK_BATCH_EQ
        OPF_CHECK_BROADCAST

    ctypedef struct opf_check:
        opf_check_kind kind
        int32_t a
        int32_t a_dim
        int32_t b
        int32_t b_dim
        int32_t rank

    ctypedef enum opf_shape_kind:
        OPF_SHAPE_NONE
        OPF_SHAPE_LIKE
        OPF_SHAPE_DIMS
        OPF_SHAPE_BATCH
        OPF_SHAPE_BROADCAST
        OPF_SHAPE_SUM_TO

    ctypedef struct opf_dim_ref:
        int32_t input
        int32_t dim

    ctypedef struct opf_shape_rule:
        opf_shape_kind kind
        int32_t like
        int32_t rank
        opf_dim_ref dims[OPF_MAX_RULE_RANK]
        int32_t drop

    ctypedef enum opf_grad_source_kind:
        OPF_FROM_NONE
        OPF_FROM_INPUT
        OPF_FROM_OUTPUT
        OPF_FROM_GRAD
        OPF_FROM_TANGENT

    ctypedef struct opf_grad_source:
        opf_grad_source_kind kind
        int32_t index

    ctypedef struct opf_grad_def:
        const char *op
        int32_t num_sources
        opf_grad_source sources[OPF_MAX_ARGS]
        int32_t num_produces
        int32_t produces[OPF_MAX_ARGS]

    ctypedef opf_status (*opf_compute_fn)(const opf_tensor *const *inputs, const opf_tensor *const *outputs,
                                          const opf_attr_value *attrs)

    ctypedef opf_status (*opf_cuda_compute_fn)(const opf_tensor *const *inputs, const opf_tensor *const *outputs,
                                               const opf_attr_value *attrs, void *stream)

    ctypedef enum opf_kernel_variant:
        OPF_VARIANT_BASE
        OPF_VARIANT_AVX2
        OPF_VARIANT_AVX512

    ctypedef void (*opf_eltwise_fn)(int64_t n, const void *const *inp, void *const *out, const opf_attr_value *attrs)

    # Opaque here: defined for CUDA C++ only (opforge_cuda.h).
    cdef struct opf_cuda_eltwise_launch

    ctypedef int (*opf_cuda_eltwise_fn)(const opf_cuda_eltwise_launch *launch)

    ctypedef struct opf_eltwise_kernel:
        int32_t num_inputs
        int32_t num_outputs
        opf_eltwise_fn f32[OPF_NUM_VARIANTS]
        opf_eltwise_fn f64[OPF_NUM_VARIANTS]
        opf_cuda_eltwise_fn cuda

    # The last, partial line of a streamed row, stored with the next row's first bytes.
    ctypedef struct opf_row_edge:
        char *end
        unsigned char line[64]

    # A streamed row whose stores wait for the next call (OPF_STORE_ROW_LATER).
    ctypedef struct opf_row_later:
        void *dst
        const void *src
        double factor
        int64_t len
        int64_t head
        int64_t lines
        int64_t stored
        int32_t elem
        int32_t level
        opf_row_edge *edge

    ctypedef struct opf_row_args:
        const void *inp "in"[OPF_MAX_ARGS]
        int64_t in_len[OPF_MAX_ARGS]
        void *out[OPF_MAX_ARGS]
        int64_t out_len[OPF_MAX_ARGS]
        const opf_attr_value *attrs
        uint32_t stream
        uint32_t *streamed
        int32_t num_prefetch
        const void *prefetch[OPF_MAX_ARGS]
        int64_t prefetch_bytes[OPF_MAX_ARGS]
        void *scratch[OPF_MAX_ARGS]
        int64_t rows
        int64_t in_stride[OPF_MAX_ARGS]
        int64_t out_stride[OPF_MAX_ARGS]
        opf_row_later *earlier
        opf_row_later *later
        opf_row_edge *edges

    ctypedef void (*opf_row_fn)(const opf_row_args *args)

    # Opaque here: defined for CUDA C++ only (opforge_cuda.h).
    cdef struct opf_cuda_row_launch

    ctypedef int (*opf_cuda_row_fn)(const opf_cuda_row_launch *launch)

    ctypedef struct opf_row_kernel:
        int32_t num_inputs
        int32_t num_outputs
        opf_row_fn f32[OPF_NUM_VARIANTS]
        opf_row_fn f64[OPF_NUM_VARIANTS]
        opf_cuda_row_fn cuda
        opf_cuda_row_fn cuda_team
        uint32_t flags

    ctypedef struct opf_op_def:
        const char *name
        const char *doc
        uint32_t flags
        uint32_t dtypes
        int32_t num_inputs
        opf_arg_def inputs[OPF_MAX_ARGS]
        int32_t num_outputs
        opf_arg_def outputs[OPF_MAX_ARGS]
        opf_shape_rule output_shapes[OPF_MAX_ARGS]
        int32_t num_attrs
        opf_attr_def attrs[OPF_MAX_ATTRS]
        int32_t num_checks
        opf_check checks[OPF_MAX_CHECKS]
        int32_t num_grads
        opf_grad_def grads[OPF_MAX_GRADS]
        opf_compute_fn compute
        opf_cuda_compute_fn compute_cuda
        const opf_eltwise_kernel *eltwise
        const opf_row_kernel *row
        const char *qualname
        const char *signature
        int32_t num_jvps
        opf_grad_def jvps[OPF_MAX_GRADS]

    ctypedef struct opf_op_table:
        uint32_t abi_version
        const char *name
        int64_t num_ops
        const opf_op_def *const *ops

    const opf_op_table *opf_builtin_ops()
    const opf_op_def *opf_op_find(const opf_op_table *table, const char *name)
    opf_status opf_op_table_validate(const opf_op_table *table)
    opf_status opf_op_run(const opf_op_def *op, const opf_tensor *const *inputs, const opf_tensor *const *outputs,
                          const opf_attr_value *attrs)
    opf_status opf_op_run_cuda(const opf_op_def *op, const opf_tensor *const *inputs,
                               const opf_tensor *const *outputs, const opf_attr_value *attrs, void *stream)
    opf_status opf_op_infer_shape(const opf_op_def *op, const opf_tensor *const *inputs, int32_t output,
                                  int32_t *ndim, int64_t *shape)
    void opf_op_default_attrs(const opf_op_def *op, opf_attr_value *attrs)
    opf_status opf_op_attr_choice(const opf_op_def *op, int32_t attr, const char *text, size_t length,
                                  int64_t *index)

    ctypedef struct opf_op_decl:
        const char *signature
        const char *doc
        const char *grad
        const char *jvp
        const char *arg_docs
        uint32_t dtypes
        const opf_eltwise_kernel *eltwise
        const opf_row_kernel *row
        opf_compute_fn compute
        opf_cuda_compute_fn compute_cuda
        uint32_t flags

    ctypedef struct opf_ops_decl:
        uint32_t abi_version
        const char *name
        const opf_op_decl *ops

    const opf_op_table *opf_ops_resolve(const opf_ops_decl *decl)
    const opf_op_table *opf_ops_resolve_parts(uint32_t abi_version, const char *name, const opf_op_decl *const *parts)
    void opf_ops_release(const opf_op_table *table)

    # -- built-in ops -------------------------------------------------------

    ctypedef enum opf_activation:
        OPF_ACT_NONE
        OPF_ACT_RELU

    opf_status opf_relu(const opf_tensor *x, const opf_tensor *y)
    opf_status opf_relu_(const opf_tensor *x)
    opf_status opf_relu_grad(const opf_tensor *dy, const opf_tensor *x, const opf_tensor *dx)
    opf_status opf_scale(const opf_tensor *x, double alpha, const opf_tensor *y)
    opf_status opf_add(const opf_tensor *a, const opf_tensor *b, const opf_tensor *y)
    opf_status opf_dense(const opf_tensor *x, const opf_tensor *w, const opf_tensor *b,
                         opf_activation activation, const opf_tensor *y)
    opf_status opf_dense_grad(const opf_tensor *dy, const opf_tensor *x, const opf_tensor *w, const opf_tensor *y,
                              opf_activation activation, const opf_tensor *dx, const opf_tensor *dw,
                              const opf_tensor *db)

    # -- kernel-body helpers (CPU) -------------------------------------------

    int64_t opf_exp_sum_blocks_f32(int64_t n, const float *x, float shift, float *y, int64_t ahead,
                                   float *acc)
    int64_t opf_exp_sum_blocks_bounded_f32(int64_t n, const float *x, float shift, float bound, float *y,
                                           int64_t ahead, float *acc)
    # Opaque here: OPF_EARLIER_ROW's plan, a row body's (opforge.h).
    cdef struct opf_earlier_row
    int64_t opf_max_blocks_f32(int64_t n, const float *x, float *m, opf_earlier_row *earlier)
    int64_t opf_exp_sum_blocks_below_f32(int64_t n, const float *x, float shift, float limit, float *y,
                                         int64_t ahead, float *acc, opf_earlier_row *earlier)
    opf_status opf_matmul(const opf_tensor *x, const opf_tensor *w, const opf_tensor *b,
                          const opf_eltwise_kernel *epilogue, const opf_attr_value *attrs, const opf_tensor *y)

    # -- runtime ------------------------------------------------------------

    ctypedef enum opf_isa:
        OPF_ISA_SCALAR
        OPF_ISA_PORTABLE
        OPF_ISA_AVX2
        OPF_ISA_AVX512
        OPF_ISA_NEON

    opf_isa opf_get_isa()
    const char *opf_isa_name(opf_isa isa)
    int opf_cuda_device_count()
    int opf_get_num_threads()
    opf_status opf_set_num_threads(int num_threads)

    # -- header-only helper -------------------------------------------------

    opf_tensor opf_tensor_make(void *data, opf_dtype dtype, int32_t ndim, const int64_t *shape)
