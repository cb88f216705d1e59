/*
 * xla.c — opforge's op tables as XLA FFI custom-call targets.
 *
 * XLA calls a typed FFI handler, `XLA_FFI_Error *fn(XLA_FFI_CallFrame *)`,
 * with no user data, so a handler cannot be told which row to run. This file
 * holds a fixed pool of handler slots (OPF_XLA_SLOTS for CPU, as many for
 * CUDA): each slot is a tiny function that passes its own number to one
 * generic handler, and `opf_xla_handler(op, label, platform)` binds a row to
 * a free slot and returns that slot's function pointer, which Python
 * registers with `jax.ffi.register_ffi_target`. Nothing here names an op:
 * every row of every table (the built-in one, a user's) goes through the same
 * code.
 *
 * Calling convention of a target (what opforge.jax passes to ffi_call):
 *   operands  the row's inputs that are present, in order (an absent
 *             optional input is left out);
 *   results   one per input the row marks OPF_ARG_MUTATED (aliased to that
 *             input, in order), then the row's outputs that are present;
 *   attrs     each of the row's attributes by name (float: an F32 or F64
 *             scalar; int: an integer scalar; enum: the choice's name as a
 *             string); a missing one takes the row's default. Two more:
 *             `opf_inputs` and `opf_outputs`, int64 bit masks of the inputs
 *             and outputs present (all of them when missing).
 *
 * The generic handler answers XLA's metadata query, ignores every stage but
 * EXECUTE, checks buffer counts, dtypes and ranks, decodes the attributes,
 * then calls opf_op_run (CPU) or opf_op_run_cuda (CUDA, on XLA's stream, no
 * synchronisation), which validate shapes and run the row. Any failure is an
 * XLA_FFI_Error with INVALID_ARGUMENT (or the code matching the library's
 * status) and a message that starts with the op's label, e.g.
 *   "opforge.add: opf_add: shape mismatch: a is [2,3], b is [3,2]".
 * Errors are made with `frame->api`, never a global API pointer: a CUDA
 * plugin has its own copy of XLA.
 */
#include <opforge.h>

#include "slots.h"
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "xla/ffi/api/c_api.h"

#define OPF_XLA_SLOTS 128
#define OPF_XLA_LABEL_CAPACITY 96

enum { OPF_XLA_CPU = 0, OPF_XLA_CUDA = 1 };

/* A bound slot: the row and the label its messages start with. `op` is
 * published last (release) and read with acquire, so a handler that sees the
 * row sees its label too. */
typedef struct opf_xla_slot {
    _Atomic(const opf_op_def *) op;
    char label[OPF_XLA_LABEL_CAPACITY];
} opf_xla_slot;

static opf_xla_slot g_slots[2][OPF_XLA_SLOTS];
static atomic_flag g_bind_lock = ATOMIC_FLAG_INIT;

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

static XLA_FFI_Error *opf_xla_fail(const XLA_FFI_CallFrame *frame, XLA_FFI_Error_Code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static XLA_FFI_Error *opf_xla_fail(const XLA_FFI_CallFrame *frame, XLA_FFI_Error_Code code, const char *fmt, ...) {
    char message[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    if (frame->api == NULL) {
        return NULL; /* nothing to report with; never happens in an execute call */
    }
    XLA_FFI_Error_Create_Args args;
    memset(&args, 0, sizeof args);
    args.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE;
    args.message = message;
    args.errc = code;
    return frame->api->XLA_FFI_Error_Create(&args);
}

/* XLA_FFI_Error_Code numbers absl's codes, as opf_status_code does. */
static XLA_FFI_Error_Code opf_xla_code(opf_status status) { return (XLA_FFI_Error_Code)opf_status_code(status); }

/* ------------------------------------------------------------------------ */
/* Metadata query                                                            */
/* ------------------------------------------------------------------------ */

/* XLA asks each handler, before using it, which FFI API version it was built
 * against (and its traits), with a metadata extension in the call frame and
 * nothing else valid. Answer with this file's header version and no traits. */
static XLA_FFI_Error *opf_xla_metadata(XLA_FFI_CallFrame *frame) {
    XLA_FFI_Metadata_Extension *ext = (XLA_FFI_Metadata_Extension *)frame->extension_start;
    if (ext->extension_base.struct_size < XLA_FFI_Metadata_Extension_STRUCT_SIZE || ext->metadata == NULL ||
        ext->metadata->struct_size < XLA_FFI_Metadata_STRUCT_SIZE) {
        return opf_xla_fail(frame, XLA_FFI_Error_Code_FAILED_PRECONDITION,
                            "opforge: XLA's FFI metadata query is older than the FFI headers opforge was built "
                            "with (API %d.%d); rebuild opforge against the installed jaxlib",
                            XLA_FFI_API_MAJOR, XLA_FFI_API_MINOR);
    }
    XLA_FFI_Metadata *metadata = ext->metadata;
    metadata->api_version.struct_size = XLA_FFI_Api_Version_STRUCT_SIZE;
    metadata->api_version.extension_start = NULL;
    metadata->api_version.major_version = XLA_FFI_API_MAJOR;
    metadata->api_version.minor_version = XLA_FFI_API_MINOR;
    metadata->traits = 0;
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Decoding                                                                  */
/* ------------------------------------------------------------------------ */

static const char *opf_xla_dtype_name(XLA_FFI_DataType dtype) {
    switch (dtype) {
    case XLA_FFI_DataType_PRED: return "bool";
    case XLA_FFI_DataType_S8: return "int8";
    case XLA_FFI_DataType_S16: return "int16";
    case XLA_FFI_DataType_S32: return "int32";
    case XLA_FFI_DataType_S64: return "int64";
    case XLA_FFI_DataType_U8: return "uint8";
    case XLA_FFI_DataType_U16: return "uint16";
    case XLA_FFI_DataType_U32: return "uint32";
    case XLA_FFI_DataType_U64: return "uint64";
    case XLA_FFI_DataType_F16: return "float16";
    case XLA_FFI_DataType_BF16: return "bfloat16";
    case XLA_FFI_DataType_F32: return "float32";
    case XLA_FFI_DataType_F64: return "float64";
    case XLA_FFI_DataType_C64: return "complex64";
    case XLA_FFI_DataType_C128: return "complex128";
    default: return "another type";
    }
}

static opf_dtype opf_xla_dtype(XLA_FFI_DataType dtype) {
    switch (dtype) {
    case XLA_FFI_DataType_F32: return OPF_F32;
    case XLA_FFI_DataType_F64: return OPF_F64;
    default: return OPF_DTYPE_INVALID;
    }
}

/* One tensor argument: the XLA buffer seen as an opf_tensor (C-contiguous:
 * ffi_call asks for XLA's default row-major layout). */
typedef struct opf_xla_arg {
    opf_tensor tensor;
    int64_t numel;
} opf_xla_arg;

/* Storage for the data pointer of an empty buffer, which XLA may pass as NULL
 * (the library wants a pointer, and never dereferences it for 0 elements). */
static double g_empty_storage;

static XLA_FFI_Error *opf_xla_view(const XLA_FFI_CallFrame *frame, const char *label, const char *what,
                                   const char *name, uint32_t op_dtypes, const XLA_FFI_Buffer *buffer,
                                   int32_t device_type, int32_t device_id, opf_xla_arg *arg) {
    opf_dtype dtype = opf_xla_dtype(buffer->dtype);
    if (dtype == OPF_DTYPE_INVALID || ((dtype == OPF_F32 ? OPF_DTYPES_F32 : OPF_DTYPES_F64) & op_dtypes) == 0) {
        return opf_xla_fail(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT, "%s: %s %s has dtype %s; expected %s", label,
                            what, name, opf_xla_dtype_name(buffer->dtype), opf_dtypes_name(op_dtypes));
    }
    if (buffer->rank < 0 || buffer->rank > OPF_MAX_RANK || (buffer->rank > 0 && buffer->dims == NULL)) {
        return opf_xla_fail(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                            "%s: %s %s has rank %lld; supported ranks are 0 to %d", label, what, name,
                            (long long)buffer->rank, OPF_MAX_RANK);
    }
    int64_t numel = 1;
    for (int64_t d = 0; d < buffer->rank; d++) {
        numel *= buffer->dims[d];
    }
    arg->numel = numel;
    arg->tensor = opf_tensor_make(buffer->data, dtype, (int32_t)buffer->rank, buffer->dims);
    arg->tensor.device.type = device_type;
    arg->tensor.device.id = device_id;
    if (numel == 0 && arg->tensor.data == NULL) {
        arg->tensor.data = &g_empty_storage;
    }
    return NULL;
}

static int opf_xla_name_is(const XLA_FFI_ByteSpan *span, const char *name) {
    size_t len = strlen(name);
    return span->len == len && memcmp(span->ptr, name, len) == 0;
}

/* Index of attribute `name` in the call frame, or -1. */
static int64_t opf_xla_find_attr(const XLA_FFI_CallFrame *frame, const char *name) {
    for (int64_t i = 0; i < frame->attrs.size; i++) {
        if (opf_xla_name_is(frame->attrs.names[i], name)) {
            return i;
        }
    }
    return -1;
}

/* An integer scalar attribute as int64; 0 if it is not one. */
static int opf_xla_int_scalar(const XLA_FFI_Scalar *scalar, int64_t *value) {
    switch (scalar->dtype) {
    case XLA_FFI_DataType_S8: *value = *(const int8_t *)scalar->value; return 1;
    case XLA_FFI_DataType_S16: *value = *(const int16_t *)scalar->value; return 1;
    case XLA_FFI_DataType_S32: *value = *(const int32_t *)scalar->value; return 1;
    case XLA_FFI_DataType_S64: *value = *(const int64_t *)scalar->value; return 1;
    case XLA_FFI_DataType_U8: *value = *(const uint8_t *)scalar->value; return 1;
    case XLA_FFI_DataType_U16: *value = *(const uint16_t *)scalar->value; return 1;
    case XLA_FFI_DataType_U32: *value = *(const uint32_t *)scalar->value; return 1;
    default: return 0;
    }
}

static const char OPF_XLA_INPUTS_ATTR[] = "opf_inputs";
static const char OPF_XLA_OUTPUTS_ATTR[] = "opf_outputs";

/* A presence mask attribute (all `count` bits set when absent). */
static XLA_FFI_Error *opf_xla_mask(const XLA_FFI_CallFrame *frame, const char *label, const char *name, int32_t count,
                                   int64_t *mask) {
    int64_t all = (count >= 63) ? INT64_MAX : (((int64_t)1 << count) - 1);
    int64_t i = opf_xla_find_attr(frame, name);
    *mask = all;
    if (i < 0) {
        return NULL;
    }
    int64_t value;
    if (frame->attrs.types[i] != XLA_FFI_AttrType_SCALAR ||
        !opf_xla_int_scalar((const XLA_FFI_Scalar *)frame->attrs.attrs[i], &value) || (value & ~all) != 0) {
        return opf_xla_fail(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                            "%s: attribute %s must be an integer bit mask of %d arguments", label, name, (int)count);
    }
    *mask = value;
    return NULL;
}

static XLA_FFI_Error *opf_xla_attrs(const XLA_FFI_CallFrame *frame, const char *label, const opf_op_def *op,
                                    opf_attr_value *values) {
    opf_op_default_attrs(op, values);
    /* Every attribute passed must be one of the row's (or a mask). */
    for (int64_t i = 0; i < frame->attrs.size; i++) {
        const XLA_FFI_ByteSpan *name = frame->attrs.names[i];
        int known = opf_xla_name_is(name, OPF_XLA_INPUTS_ATTR) || opf_xla_name_is(name, OPF_XLA_OUTPUTS_ATTR);
        for (int32_t a = 0; a < op->num_attrs && !known; a++) {
            known = opf_xla_name_is(name, op->attrs[a].name);
        }
        if (!known) {
            return opf_xla_fail(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT, "%s: unknown attribute '%.*s'", label,
                                (int)(name->len > 200 ? 200 : name->len), name->ptr);
        }
    }
    for (int32_t a = 0; a < op->num_attrs; a++) {
        const opf_attr_def *def = &op->attrs[a];
        int64_t i = opf_xla_find_attr(frame, def->name);
        if (i < 0) {
            continue;
        }
        XLA_FFI_AttrType type = frame->attrs.types[i];
        const void *attr = frame->attrs.attrs[i];
        if (def->type == OPF_ATTR_FLOAT && type == XLA_FFI_AttrType_SCALAR) {
            const XLA_FFI_Scalar *scalar = attr;
            int64_t integer;
            if (scalar->dtype == XLA_FFI_DataType_F32) {
                values[a].f = *(const float *)scalar->value;
                continue;
            }
            if (scalar->dtype == XLA_FFI_DataType_F64) {
                values[a].f = *(const double *)scalar->value;
                continue;
            }
            if (opf_xla_int_scalar(scalar, &integer)) {
                values[a].f = (double)integer;
                continue;
            }
        } else if (def->type == OPF_ATTR_INT && type == XLA_FFI_AttrType_SCALAR) {
            if (opf_xla_int_scalar(attr, &values[a].i)) {
                continue;
            }
        } else if (def->type == OPF_ATTR_ENUM && type == XLA_FFI_AttrType_STRING) {
            const XLA_FFI_ByteSpan *text = attr;
            if (opf_op_attr_choice(op, a, text->ptr, text->len, &values[a].i) == OPF_OK) {
                continue;
            }
            return opf_xla_fail(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT, "%s: %s", label, opf_last_error_detail());
        }
        static const char *const kinds[] = {"", "a float scalar", "an integer scalar", "a string"};
        return opf_xla_fail(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT, "%s: attribute %s must be %s", label, def->name,
                            kinds[def->type >= 1 && def->type <= 3 ? def->type : 0]);
    }
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* The generic handler                                                       */
/* ------------------------------------------------------------------------ */

static XLA_FFI_Error *opf_xla_handle(int platform, int slot_index, XLA_FFI_CallFrame *frame) {
    if (frame->extension_start != NULL && frame->extension_start->type == XLA_FFI_Extension_Metadata) {
        return opf_xla_metadata(frame);
    }
    if (frame->struct_size < XLA_FFI_CallFrame_STRUCT_SIZE) {
        return opf_xla_fail(frame, XLA_FFI_Error_Code_FAILED_PRECONDITION,
                            "opforge: XLA's call frame is older than the FFI headers opforge was built with");
    }
    if (frame->stage != XLA_FFI_ExecutionStage_EXECUTE) {
        return NULL;
    }
    const opf_xla_slot *slot = &g_slots[platform][slot_index];
    const opf_op_def *op = atomic_load_explicit(&slot->op, memory_order_acquire);
    if (op == NULL) {
        return opf_xla_fail(frame, XLA_FFI_Error_Code_INTERNAL, "opforge: XLA handler slot %d has no op", slot_index);
    }
    const char *label = slot->label;

    int64_t in_mask, out_mask;
    XLA_FFI_Error *err = opf_xla_mask(frame, label, OPF_XLA_INPUTS_ATTR, op->num_inputs, &in_mask);
    if (err == NULL) {
        err = opf_xla_mask(frame, label, OPF_XLA_OUTPUTS_ATTR, op->num_outputs, &out_mask);
    }
    if (err != NULL) {
        return err;
    }
    int32_t num_args = 0, num_mutated = 0, num_rets = 0;
    for (int32_t i = 0; i < op->num_inputs; i++) {
        int present = (int)((in_mask >> i) & 1);
        if (!present && !(op->inputs[i].flags & OPF_ARG_OPTIONAL)) {
            return opf_xla_fail(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT, "%s: input %s is required", label,
                                op->inputs[i].name);
        }
        num_args += present;
        num_mutated += present && (op->inputs[i].flags & OPF_ARG_MUTATED);
    }
    for (int32_t o = 0; o < op->num_outputs; o++) {
        int present = (int)((out_mask >> o) & 1);
        if (!present && !(op->outputs[o].flags & OPF_ARG_OPTIONAL)) {
            return opf_xla_fail(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT, "%s: output %s is required", label,
                                op->outputs[o].name);
        }
        num_rets += present;
    }
    num_rets += num_mutated;
    if (frame->args.size != num_args || frame->rets.size != num_rets) {
        return opf_xla_fail(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                            "%s: expected %d operands and %d results, got %lld and %lld", label, (int)num_args,
                            (int)num_rets, (long long)frame->args.size, (long long)frame->rets.size);
    }

    int32_t device_type = platform == OPF_XLA_CUDA ? OPF_DEVICE_CUDA : OPF_DEVICE_CPU, device_id = 0;
    void *stream = NULL;
    if (platform == OPF_XLA_CUDA) {
        XLA_FFI_Stream_Get_Args sargs;
        memset(&sargs, 0, sizeof sargs);
        sargs.struct_size = XLA_FFI_Stream_Get_Args_STRUCT_SIZE;
        sargs.ctx = frame->ctx;
        if ((err = frame->api->XLA_FFI_Stream_Get(&sargs)) != NULL) {
            return err;
        }
        stream = sargs.stream;
        if (frame->api->struct_size >= XLA_FFI_Api_STRUCT_SIZE && frame->api->XLA_FFI_DeviceOrdinal_Get != NULL) {
            XLA_FFI_DeviceOrdinal_Get_Args dargs;
            memset(&dargs, 0, sizeof dargs);
            dargs.struct_size = XLA_FFI_DeviceOrdinal_Get_Args_STRUCT_SIZE;
            dargs.ctx = frame->ctx;
            if ((err = frame->api->XLA_FFI_DeviceOrdinal_Get(&dargs)) != NULL) {
                return err;
            }
            device_id = dargs.device_ordinal;
        }
    }

    opf_xla_arg args[OPF_MAX_ARGS * 2];
    const opf_tensor *inputs[OPF_MAX_ARGS], *outputs[OPF_MAX_ARGS];
    int32_t next_arg = 0, next_ret = 0;
    for (int32_t i = 0; i < op->num_inputs; i++) {
        inputs[i] = NULL;
        if (!((in_mask >> i) & 1)) {
            continue;
        }
        if (frame->args.types[next_arg] != XLA_FFI_ArgType_BUFFER) {
            return opf_xla_fail(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT, "%s: input %s is not a buffer", label,
                                op->inputs[i].name);
        }
        opf_xla_arg *arg = &args[i];
        err = opf_xla_view(frame, label, "input", op->inputs[i].name, op->dtypes,
                           (const XLA_FFI_Buffer *)frame->args.args[next_arg++], device_type, device_id, arg);
        if (err != NULL) {
            return err;
        }
        if (op->inputs[i].flags & OPF_ARG_MUTATED) {
            /* Written in place: run on the result aliased to this input (XLA
             * makes them one buffer; copy if it ever does not). */
            opf_xla_arg result;
            if (frame->rets.types[next_ret] != XLA_FFI_RetType_BUFFER) {
                return opf_xla_fail(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT, "%s: result for %s is not a buffer",
                                    label, op->inputs[i].name);
            }
            err = opf_xla_view(frame, label, "result for", op->inputs[i].name, op->dtypes,
                               (const XLA_FFI_Buffer *)frame->rets.rets[next_ret++], device_type, device_id, &result);
            if (err != NULL) {
                return err;
            }
            int same_shape = result.tensor.ndim == arg->tensor.ndim && result.tensor.dtype == arg->tensor.dtype;
            for (int32_t d = 0; same_shape && d < arg->tensor.ndim; d++) {
                same_shape = result.tensor.shape[d] == arg->tensor.shape[d];
            }
            if (!same_shape) {
                return opf_xla_fail(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                                    "%s: the result for mutated input %s must have its shape and dtype", label,
                                    op->inputs[i].name);
            }
            if (result.tensor.data != arg->tensor.data && result.numel > 0) {
                if (platform == OPF_XLA_CUDA) {
                    return opf_xla_fail(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                                        "%s: the result for mutated input %s must alias it", label, op->inputs[i].name);
                }
                memcpy(result.tensor.data, arg->tensor.data,
                       (size_t)result.numel * opf_dtype_size(result.tensor.dtype));
            }
            *arg = result;
        }
        inputs[i] = &arg->tensor;
    }
    for (int32_t o = 0; o < op->num_outputs; o++) {
        outputs[o] = NULL;
        if (!((out_mask >> o) & 1)) {
            continue;
        }
        if (frame->rets.types[next_ret] != XLA_FFI_RetType_BUFFER) {
            return opf_xla_fail(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT, "%s: output %s is not a buffer", label,
                                op->outputs[o].name);
        }
        opf_xla_arg *arg = &args[OPF_MAX_ARGS + o];
        err = opf_xla_view(frame, label, "output", op->outputs[o].name, op->dtypes,
                           (const XLA_FFI_Buffer *)frame->rets.rets[next_ret++], device_type, device_id, arg);
        if (err != NULL) {
            return err;
        }
        outputs[o] = &arg->tensor;
    }

    opf_attr_value attrs[OPF_MAX_ATTRS];
    if ((err = opf_xla_attrs(frame, label, op, attrs)) != NULL) {
        return err;
    }
    opf_status status = platform == OPF_XLA_CUDA ? opf_op_run_cuda(op, inputs, outputs, attrs, stream)
                                                 : opf_op_run(op, inputs, outputs, attrs);
    if (status != OPF_OK) {
        return opf_xla_fail(frame, opf_xla_code(status), "%s: %s", label, opf_last_error_detail());
    }
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* The slots                                                                 */
/* ------------------------------------------------------------------------ */

#define OPF_XLA_SLOT(p, tag, index)                                                                                    \
    static XLA_FFI_Error *opf_xla_slot_##p##_##tag(XLA_FFI_CallFrame *frame) { return opf_xla_handle(p, index, frame); }
#define OPF_XLA_CPU_SLOT(tag, index) OPF_XLA_SLOT(0, tag, index)
#define OPF_XLA_CUDA_SLOT(tag, index) OPF_XLA_SLOT(1, tag, index)
OPF_SLOTS_128(OPF_XLA_CPU_SLOT)
OPF_SLOTS_128(OPF_XLA_CUDA_SLOT)
#define OPF_XLA_CPU_REF(tag, index) opf_xla_slot_0_##tag,
#define OPF_XLA_CUDA_REF(tag, index) opf_xla_slot_1_##tag,
static XLA_FFI_Handler *const g_handlers[2][OPF_XLA_SLOTS] = {{OPF_SLOTS_128(OPF_XLA_CPU_REF)},
                                                              {OPF_SLOTS_128(OPF_XLA_CUDA_REF)}};

_Static_assert(sizeof g_handlers[0] / sizeof g_handlers[0][0] == OPF_XLA_SLOTS, "one handler per slot");

/* ------------------------------------------------------------------------ */
/* Public entry points (called from opforge.jax through ctypes)              */
/* ------------------------------------------------------------------------ */

OPF_API void *opf_xla_handler(const opf_op_def *op, const char *label, int platform);
OPF_API int opf_xla_api_version(int *major, int *minor);
OPF_API int opf_xla_max_handlers(void);

/* The handler (an XLA_FFI_Handler *) that runs row `op` on `platform` (0:
 * CPU, 1: CUDA), with error messages starting with `label`. Binding the same
 * row twice gives the same handler. NULL when every slot is taken or an
 * argument is invalid. The row must stay valid for the life of the process
 * (opforge.jax keeps user libraries loaded). */
void *opf_xla_handler(const opf_op_def *op, const char *label, int platform) {
    if (op == NULL || label == NULL || (platform != OPF_XLA_CPU && platform != OPF_XLA_CUDA)) {
        return NULL;
    }
    void *handler = NULL;
    while (atomic_flag_test_and_set_explicit(&g_bind_lock, memory_order_acquire)) {
    }
    for (int s = 0; s < OPF_XLA_SLOTS && handler == NULL; s++) {
        opf_xla_slot *slot = &g_slots[platform][s];
        const opf_op_def *bound = atomic_load_explicit(&slot->op, memory_order_relaxed);
        if (bound == op && strncmp(slot->label, label, sizeof slot->label - 1) == 0) {
            handler = (void *)g_handlers[platform][s];
        } else if (bound == NULL) {
            snprintf(slot->label, sizeof slot->label, "%s", label);
            atomic_store_explicit(&slot->op, op, memory_order_release);
            handler = (void *)g_handlers[platform][s];
        }
    }
    atomic_flag_clear_explicit(&g_bind_lock, memory_order_release);
    return handler;
}

/* The XLA FFI API version of the headers this file was compiled with. */
int opf_xla_api_version(int *major, int *minor) {
    if (major != NULL) {
        *major = XLA_FFI_API_MAJOR;
    }
    if (minor != NULL) {
        *minor = XLA_FFI_API_MINOR;
    }
    return 0;
}

/* Number of rows that can be bound per platform. */
int opf_xla_max_handlers(void) { return OPF_XLA_SLOTS; }
