/*
 * tensorflow.c — registers an opforge op table with TensorFlow through its C
 * API (tensorflow/c/ops.h and kernels.h).
 *
 * Loading this library with tf.load_op_library registers every row of the
 * built-in table from a constructor (TensorFlow collects the ops registered
 * while it dlopens the file). opforge_tf_register_table() registers a user's
 * table later (opforge.tensorflow.load_ops). Nothing here names a particular
 * op: each row becomes
 *   - an op "<Prefix><CamelName>" with a type attr `T` over the row's dtypes,
 *     one input `name: T` per input (an optional input is a list
 *     `name: num_name * T` of 0 or 1 tensors), one output `name: T` per output
 *     (an optional output has a bool attr `skip_name`: when set, the output
 *     is zeros and the kernel does not compute it), and one attr per table
 *     attr (float -> float, int -> int, enum -> string from the choices);
 *   - a shape function that runs the row's shape checks on the known dims
 *     and builds each output shape from the row's shape rule;
 *   - a CPU kernel per dtype that runs opf_op_run, turning every opforge
 *     failure into InvalidArgument with opforge's message.
 * Rows with an input written in place (OPF_ARG_MUTATED) are skipped:
 * TensorFlow tensors are immutable.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ops.h declares these structs without typedefs (it is written for C++). */
typedef struct TF_OpDefinitionBuilder TF_OpDefinitionBuilder;
typedef struct TF_ShapeHandle TF_ShapeHandle;
typedef struct TF_DimensionHandle TF_DimensionHandle;
typedef struct TF_ShapeInferenceContext TF_ShapeInferenceContext;

#include "tensorflow/c/kernels.h"
#include "tensorflow/c/ops.h"
#include "tensorflow/c/tf_status.h"
#include "tensorflow/c/tf_tensor.h"

#include "opforge.h"
#include "slots.h"

#if defined(__GNUC__)
#define OPF_TF_API __attribute__((visibility("default")))
#else
#define OPF_TF_API
#endif

/* Ops registered by this process, each with its own shape function and kernel
 * constructor (TensorFlow passes them no user data, so each slot has its own
 * trampoline). */
#define MAX_SLOTS 256
#define MAX_NAME 128
#define MAX_SPEC 512
#define MAX_CHOICE_LEN 256

typedef struct slot {
    const opf_op_def *op;
    char tf_name[MAX_NAME];
} slot;

static slot slots[MAX_SLOTS];
static int num_slots;
/* The first error of the last registration. Registrations (which take slots
 * and write this) are serialised; opforge.tensorflow reads it under its own
 * lock, right after the registration that failed. */
static char load_error[1024];
static pthread_mutex_t register_lock = PTHREAD_MUTEX_INITIALIZER;

/* State of one kernel instance: the row and its attribute values. */
typedef struct kernel_state {
    const opf_op_def *op;
    int32_t present[OPF_MAX_ARGS]; /* tensors in each input (0 or 1 for optional ones) */
    bool skip[OPF_MAX_ARGS];       /* optional outputs not computed (zeros) */
    opf_attr_value attrs[OPF_MAX_ATTRS];
} kernel_state;

static void set_load_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void set_load_error(const char *fmt, ...) {
    if (load_error[0])
        return; /* keep the first */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(load_error, sizeof load_error, fmt, ap);
    va_end(ap);
}

/* "my_op_grad" -> "MyOpGrad" appended to `out` (size n); 0 if it fits and is
 * a valid TensorFlow op name part. */
static int append_camel(char *out, size_t n, const char *name) {
    size_t len = strlen(out);
    bool upper = true;
    for (const char *c = name; *c; ++c) {
        if (*c == '_') {
            upper = true;
            continue;
        }
        bool alnum = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9');
        if (!alnum || len + 1 >= n)
            return -1;
        out[len++] = (upper && *c >= 'a' && *c <= 'z') ? (char)(*c - 'a' + 'A') : *c;
        upper = false;
    }
    out[len] = '\0';
    return 0;
}

static int optional_input(const opf_op_def *op, int i) { return (op->inputs[i].flags & OPF_ARG_OPTIONAL) != 0; }
static int optional_output(const opf_op_def *op, int j) { return (op->outputs[j].flags & OPF_ARG_OPTIONAL) != 0; }

/* A float attribute is a double in the table, but a TensorFlow `float` attr
 * holds 32 bits. Each float attribute NAME therefore travels twice: as NAME
 * (float, what graphs and users see) and as NAME_f64 (int64, the double's
 * bits, set by opforge.tensorflow). The double is used when it rounds to the
 * float attr; otherwise NAME was set without NAME_f64 (a raw graph) and the
 * float attr is the value. */
static int64_t double_bits(double value) {
    int64_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

static double float_attr(float value, int64_t bits) {
    double exact;
    memcpy(&exact, &bits, sizeof exact);
    return (float)exact == value ? exact : (double)value;
}

/* Flat index of table input i, given how many tensors each input holds. */
static int flat_index(const opf_op_def *op, const int32_t *present, int i) {
    int flat = 0;
    for (int k = 0; k < i; ++k)
        flat += optional_input(op, k) ? present[k] : 1;
    return flat;
}

/* ---------------------------------------------------------------- shapes */

static void shape_function(int index, TF_ShapeInferenceContext *ctx, TF_Status *status) {
    const opf_op_def *op = slots[index].op;
    int required = 0, optional = 0;
    for (int i = 0; i < op->num_inputs; ++i)
        optional_input(op, i) ? ++optional : ++required;
    int64_t total = TF_ShapeInferenceContextNumInputs(ctx);
    /* Which optional inputs are present: all, none, or (when more than one
     * is optional and only some are given) unknown: then inputs after the
     * first optional one are treated as shapes we do not know. */
    int32_t present[OPF_MAX_ARGS];
    bool known_layout = total == required || total == required + optional;
    for (int i = 0; i < op->num_inputs; ++i)
        present[i] = optional_input(op, i) ? (total > required) : 1;

    TF_ShapeHandle *handles[OPF_MAX_ARGS] = {0};
    int64_t dims[OPF_MAX_ARGS][OPF_MAX_RANK];
    opf_tensor views[OPF_MAX_ARGS];
    const opf_tensor *inputs[OPF_MAX_ARGS];
    bool ranks_known = true;
    bool usable = true; /* input layout known so far */
    for (int i = 0; i < op->num_inputs; ++i) {
        inputs[i] = NULL;
        if (optional_input(op, i) && !known_layout)
            usable = false;
        if (!usable || !present[i])
            continue;
        TF_ShapeHandle *h = TF_NewShapeHandle();
        TF_ShapeInferenceContextGetInput(ctx, flat_index(op, present, i), h, status);
        if (TF_GetCode(status) != TF_OK) {
            TF_DeleteShapeHandle(h);
            goto done;
        }
        handles[i] = h;
        if (!TF_ShapeInferenceContextRankKnown(ctx, h)) {
            ranks_known = false;
            continue;
        }
        int64_t rank = TF_ShapeInferenceContextRank(ctx, h);
        if (rank > OPF_MAX_RANK) {
            TF_SetStatus(status, TF_INVALID_ARGUMENT, "rank above OPF_MAX_RANK");
            goto done;
        }
        TF_DimensionHandle *d = TF_NewDimensionHandle();
        for (int64_t k = 0; k < rank; ++k) {
            TF_ShapeInferenceContextDim(ctx, h, k, d);
            dims[i][k] = TF_DimensionHandleValueKnown(d) ? TF_DimensionHandleValue(d) : -1;
        }
        TF_DeleteDimensionHandle(d);
        views[i] = opf_tensor_make(NULL, OPF_F32, (int32_t)rank, dims[i]);
        inputs[i] = &views[i];
    }

    TF_ShapeInferenceContextSetUnknownShape(ctx, status);
    if (TF_GetCode(status) != TF_OK)
        goto done;
    int32_t inferred_ndim[OPF_MAX_ARGS];
    int64_t inferred[OPF_MAX_ARGS][OPF_MAX_RANK];
    if (ranks_known && usable) {
        /* Runs the row's checks on what is known (unknown dims pass), and
         * keeps each output's shape (-1 where a dim is unknown). */
        for (int j = 0; j < op->num_outputs; ++j) {
            if (opf_op_infer_shape(op, inputs, j, &inferred_ndim[j], inferred[j]) != OPF_OK) {
                TF_SetStatus(status, TF_INVALID_ARGUMENT, opf_last_error());
                goto done;
            }
        }
    }
    for (int j = 0; j < op->num_outputs; ++j) {
        const opf_shape_rule *rule = &op->output_shapes[j];
        if (rule->kind != OPF_SHAPE_LIKE && rule->kind != OPF_SHAPE_DIMS && rule->kind != OPF_SHAPE_BATCH) {
            /* Any other rule (a broadcast, a sum to an input's shape, and
             * whatever kinds come later): the library's shape when the ranks
             * are known, dim by dim (unknown dims stay unknown); else the
             * unknown shape set above. */
            if (!(ranks_known && usable))
                continue;
            TF_ShapeHandle *result = TF_ShapeInferenceContextScalar(ctx);
            for (int d = 0; d < inferred_ndim[j] && TF_GetCode(status) == TF_OK; ++d) {
                TF_ShapeHandle *size = TF_ShapeInferenceContextVectorFromSize(ctx, inferred[j][d]);
                TF_ShapeInferenceContextConcatenateShapes(ctx, result, size, result, status);
                TF_DeleteShapeHandle(size);
            }
            if (TF_GetCode(status) == TF_OK)
                TF_ShapeInferenceContextSetOutput(ctx, j, result, status);
            TF_DeleteShapeHandle(result);
        } else if (rule->kind == OPF_SHAPE_LIKE) {
            if (handles[rule->like])
                TF_ShapeInferenceContextSetOutput(ctx, j, handles[rule->like], status);
        } else if (rule->kind == OPF_SHAPE_DIMS || rule->kind == OPF_SHAPE_BATCH) {
            /* The leading dims of `like` (BATCH), then one dim per reference:
             * a dim of an input, or a literal size. */
            bool known = rule->kind == OPF_SHAPE_DIMS ||
                         (handles[rule->like] && inputs[rule->like] && inputs[rule->like]->ndim >= rule->drop);
            for (int d = 0; d < rule->rank; ++d) {
                int in = rule->dims[d].input;
                if (in >= 0 && (!handles[in] || !inputs[in]))
                    known = false;
            }
            if (!known)
                continue;
            TF_ShapeHandle *result = TF_ShapeInferenceContextScalar(ctx);
            TF_ShapeHandle *part = TF_NewShapeHandle();
            if (rule->kind == OPF_SHAPE_BATCH)
                TF_ShapeInferenceContextSubshape(ctx, handles[rule->like], 0, inputs[rule->like]->ndim - rule->drop,
                                                 result, status);
            for (int d = 0; d < rule->rank && TF_GetCode(status) == TF_OK; ++d) {
                int in = rule->dims[d].input;
                if (in < 0) {
                    TF_ShapeHandle *size = TF_ShapeInferenceContextVectorFromSize(ctx, rule->dims[d].dim);
                    TF_ShapeInferenceContextConcatenateShapes(ctx, result, size, result, status);
                    TF_DeleteShapeHandle(size);
                    continue;
                }
                int64_t k = rule->dims[d].dim < 0 ? rule->dims[d].dim + inputs[in]->ndim : rule->dims[d].dim;
                TF_ShapeInferenceContextSubshape(ctx, handles[in], k, k + 1, part, status);
                if (TF_GetCode(status) == TF_OK)
                    TF_ShapeInferenceContextConcatenateShapes(ctx, result, part, result, status);
            }
            if (TF_GetCode(status) == TF_OK)
                TF_ShapeInferenceContextSetOutput(ctx, j, result, status);
            TF_DeleteShapeHandle(part);
            TF_DeleteShapeHandle(result);
        }
        if (TF_GetCode(status) != TF_OK)
            goto done;
    }
done:
    for (int i = 0; i < op->num_inputs; ++i)
        if (handles[i])
            TF_DeleteShapeHandle(handles[i]);
}

/* ---------------------------------------------------------------- kernels */

static void *kernel_create(int index, TF_OpKernelConstruction *ctx) {
    const opf_op_def *op = slots[index].op;
    kernel_state *state = calloc(1, sizeof *state);
    TF_Status *status = TF_NewStatus();
    if (!state || !status) {
        if (status)
            TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
        goto fail;
    }
    state->op = op;
    for (int i = 0; i < op->num_inputs; ++i) {
        state->present[i] = 1;
        if (!optional_input(op, i))
            continue;
        char name[MAX_NAME];
        int64_t count = 0;
        snprintf(name, sizeof name, "num_%s", op->inputs[i].name);
        TF_OpKernelConstruction_GetAttrInt64(ctx, name, &count, status);
        if (TF_GetCode(status) != TF_OK)
            goto fail;
        if (count > 1) {
            char msg[MAX_SPEC];
            snprintf(msg, sizeof msg, "%s: input '%s' is optional: pass no tensor or one, not %lld",
                     slots[index].tf_name, op->inputs[i].name, (long long)count);
            TF_SetStatus(status, TF_INVALID_ARGUMENT, msg);
            goto fail;
        }
        state->present[i] = (int32_t)count;
    }
    for (int j = 0; j < op->num_outputs; ++j) {
        if (!optional_output(op, j))
            continue;
        char name[MAX_NAME];
        TF_Bool skip = 0;
        snprintf(name, sizeof name, "skip_%s", op->outputs[j].name);
        TF_OpKernelConstruction_GetAttrBool(ctx, name, &skip, status);
        if (TF_GetCode(status) != TF_OK)
            goto fail;
        state->skip[j] = skip != 0;
    }
    for (int a = 0; a < op->num_attrs; ++a) {
        const opf_attr_def *def = &op->attrs[a];
        if (def->type == OPF_ATTR_FLOAT) {
            float f = 0;
            int64_t bits = 0;
            char name[MAX_NAME];
            snprintf(name, sizeof name, "%s_f64", def->name);
            TF_OpKernelConstruction_GetAttrFloat(ctx, def->name, &f, status);
            if (TF_GetCode(status) == TF_OK)
                TF_OpKernelConstruction_GetAttrInt64(ctx, name, &bits, status);
            state->attrs[a].f = float_attr(f, bits);
        } else if (def->type == OPF_ATTR_INT) {
            int64_t i = 0;
            TF_OpKernelConstruction_GetAttrInt64(ctx, def->name, &i, status);
            state->attrs[a].i = i;
        } else {
            char value[MAX_CHOICE_LEN + 1] = {0};
            TF_OpKernelConstruction_GetAttrString(ctx, def->name, value, MAX_CHOICE_LEN, status);
            if (TF_GetCode(status) == TF_OK &&
                opf_op_attr_choice(slots[index].op, a, value, strlen(value), &state->attrs[a].i) != OPF_OK)
                TF_SetStatus(status, TF_INVALID_ARGUMENT, opf_last_error());
        }
        if (TF_GetCode(status) != TF_OK)
            goto fail;
    }
    TF_DeleteStatus(status);
    return state;
fail:
    if (status) {
        TF_OpKernelConstruction_Failure(ctx, status);
        TF_DeleteStatus(status);
    }
    free(state);
    return NULL;
}

static void kernel_delete(void *state) { free(state); }

/* The TensorFlow code of an opforge failure (TF_Code numbers absl's codes). */
static TF_Code code_of(opf_status status) { return (TF_Code)opf_status_code(status); }

static opf_dtype dtype_of(TF_DataType t) {
    return t == TF_FLOAT ? OPF_F32 : t == TF_DOUBLE ? OPF_F64 : OPF_DTYPE_INVALID;
}

static void kernel_compute(void *opaque, TF_OpKernelContext *ctx) {
    const kernel_state *state = opaque;
    const opf_op_def *op = state->op;
    TF_Status *status = TF_NewStatus();
    TF_Tensor *in_tf[OPF_MAX_ARGS] = {0}, *out_tf[OPF_MAX_ARGS] = {0};
    int64_t in_dims[OPF_MAX_ARGS][OPF_MAX_RANK], out_dims[OPF_MAX_ARGS][OPF_MAX_RANK];
    opf_tensor in_views[OPF_MAX_ARGS], out_views[OPF_MAX_ARGS];
    const opf_tensor *inputs[OPF_MAX_ARGS] = {0}, *outputs[OPF_MAX_ARGS] = {0};
    if (!status)
        return;
    /* The dtype of the T attr (every tensor argument has it). */
    TF_DataType type = op->num_outputs > 0 ? TF_ExpectedOutputDataType(ctx, 0) : TF_FLOAT;
    for (int i = 0; i < op->num_inputs; ++i) {
        if (!state->present[i])
            continue;
        TF_GetInput(ctx, flat_index(op, state->present, i), &in_tf[i], status);
        if (TF_GetCode(status) != TF_OK)
            goto done;
        int ndim = TF_NumDims(in_tf[i]);
        if (ndim > OPF_MAX_RANK) {
            char msg[MAX_SPEC];
            snprintf(msg, sizeof msg, "%s: %s has rank %d, above the maximum %d",
                     op->qualname ? op->qualname : op->name, op->inputs[i].name, ndim, OPF_MAX_RANK);
            TF_SetStatus(status, TF_INVALID_ARGUMENT, msg);
            goto done;
        }
        for (int d = 0; d < ndim; ++d)
            in_dims[i][d] = TF_Dim(in_tf[i], d);
        in_views[i] = opf_tensor_make(TF_TensorData(in_tf[i]), dtype_of(TF_TensorType(in_tf[i])), ndim, in_dims[i]);
        inputs[i] = &in_views[i];
    }
    for (int j = 0; j < op->num_outputs; ++j) {
        int32_t ndim = 0;
        if (opf_op_infer_shape(op, inputs, j, &ndim, out_dims[j]) != OPF_OK) {
            TF_SetStatus(status, TF_INVALID_ARGUMENT, opf_last_error());
            goto done;
        }
        const opf_shape_rule *rule = &op->output_shapes[j];
        /* An elementwise op may write an output over an input of the same
         * shape (the one it is shaped like, or any of a broadcast's inputs
         * that has the broadcast shape) when TensorFlow holds no other
         * reference to it. */
        int candidates[OPF_MAX_ARGS], num_candidates = 0;
        for (int i = 0; (op->flags & OPF_OP_ELEMENTWISE) && i < op->num_inputs; ++i) {
            int fits = state->present[i] &&
                       (rule->kind == OPF_SHAPE_LIKE ? rule->like == i
                                                     : rule->kind == OPF_SHAPE_BROADCAST && in_views[i].ndim == ndim);
            for (int d = 0; fits && rule->kind == OPF_SHAPE_BROADCAST && d < ndim; ++d)
                fits = in_dims[i][d] == out_dims[j][d];
            if (fits)
                candidates[num_candidates++] = flat_index(op, state->present, i);
        }
        if (num_candidates > 0) {
            int forwarded = -1;
            out_tf[j] = TF_ForwardInputOrAllocateOutput(ctx, candidates, num_candidates, j, out_dims[j], ndim,
                                                        &forwarded, status);
        } else {
            size_t bytes = opf_dtype_size(dtype_of(type));
            for (int d = 0; d < ndim; ++d)
                bytes *= (size_t)out_dims[j][d];
            out_tf[j] = TF_AllocateOutput(ctx, j, type, out_dims[j], ndim, bytes, status);
        }
        if (TF_GetCode(status) != TF_OK)
            goto done;
        if (state->skip[j]) {
            if (TF_TensorByteSize(out_tf[j]) > 0)
                memset(TF_TensorData(out_tf[j]), 0, TF_TensorByteSize(out_tf[j]));
            continue;
        }
        out_views[j] = opf_tensor_make(TF_TensorData(out_tf[j]), dtype_of(type), ndim, out_dims[j]);
        outputs[j] = &out_views[j];
    }
    opf_status run = opf_op_run(op, inputs, outputs, state->attrs);
    if (run != OPF_OK)
        TF_SetStatus(status, code_of(run), opf_last_error());
done:
    if (TF_GetCode(status) != TF_OK)
        TF_OpKernelContext_Failure(ctx, status);
    for (int i = 0; i < OPF_MAX_ARGS; ++i) {
        if (in_tf[i])
            TF_DeleteTensor(in_tf[i]);
        if (out_tf[i])
            TF_DeleteTensor(out_tf[i]);
    }
    TF_DeleteStatus(status);
}

/* One shape function and one kernel constructor per slot: SLOT(tag, index)
 * defines shape_<tag> and create_<tag> (slots.h). */
#define SLOT(tag, n)                                                                                                   \
    static void shape_##tag(TF_ShapeInferenceContext *ctx, TF_Status *status) { shape_function(n, ctx, status); }      \
    static void *create_##tag(TF_OpKernelConstruction *ctx) { return kernel_create(n, ctx); }
OPF_SLOTS_256(SLOT)

#define ENTRY(tag, n) {shape_##tag, create_##tag},

static const struct {
    void (*shape)(TF_ShapeInferenceContext *, TF_Status *);
    void *(*create)(TF_OpKernelConstruction *);
} slot_functions[MAX_SLOTS] = {OPF_SLOTS_256(ENTRY)};

/* ---------------------------------------------------------------- registration */

static int add_spec(TF_OpDefinitionBuilder *b, void (*add)(TF_OpDefinitionBuilder *, const char *), const char *fmt,
                    ...) __attribute__((format(printf, 3, 4)));
static int add_spec(TF_OpDefinitionBuilder *b, void (*add)(TF_OpDefinitionBuilder *, const char *), const char *fmt,
                    ...) {
    char spec[MAX_SPEC];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(spec, sizeof spec, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof spec)
        return -1;
    add(b, spec);
    return 0;
}

/* The op definition of one row; NULL (with load_error set) if the row cannot
 * be expressed. */
static TF_OpDefinitionBuilder *op_builder(const opf_op_def *op, const char *tf_name, int index) {
    TF_OpDefinitionBuilder *b = TF_NewOpDefinitionBuilder(tf_name);
    int err = 0;
    const char *types = (op->dtypes & OPF_DTYPES_F32) && (op->dtypes & OPF_DTYPES_F64) ? "float, double"
                        : (op->dtypes & OPF_DTYPES_F64)                                ? "double"
                                                                                       : "float";
    err |= add_spec(b, TF_OpDefinitionBuilderAddAttr, "T: {%s}", types);
    for (int i = 0; i < op->num_inputs; ++i) {
        const char *name = op->inputs[i].name;
        if (optional_input(op, i)) {
            err |= add_spec(b, TF_OpDefinitionBuilderAddAttr, "num_%s: int >= 0", name);
            err |= add_spec(b, TF_OpDefinitionBuilderAddInput, "%s: num_%s * T", name, name);
        } else {
            err |= add_spec(b, TF_OpDefinitionBuilderAddInput, "%s: T", name);
        }
    }
    for (int j = 0; j < op->num_outputs; ++j) {
        err |= add_spec(b, TF_OpDefinitionBuilderAddOutput, "%s: T", op->outputs[j].name);
        if (optional_output(op, j))
            err |= add_spec(b, TF_OpDefinitionBuilderAddAttr, "skip_%s: bool = false", op->outputs[j].name);
    }
    for (int a = 0; a < op->num_attrs; ++a) {
        const opf_attr_def *def = &op->attrs[a];
        if (def->type == OPF_ATTR_FLOAT) {
            err |= add_spec(b, TF_OpDefinitionBuilderAddAttr, "%s: float = %.9g", def->name, def->default_value.f);
            err |= add_spec(b, TF_OpDefinitionBuilderAddAttr, "%s_f64: int = %lld", def->name,
                            (long long)double_bits(def->default_value.f));
        } else if (def->type == OPF_ATTR_INT) {
            err |= add_spec(b, TF_OpDefinitionBuilderAddAttr, "%s: int = %lld", def->name,
                            (long long)def->default_value.i);
        } else {
            char spec[MAX_SPEC];
            size_t len = (size_t)snprintf(spec, sizeof spec, "%s: {", def->name);
            for (int c = 0; c < OPF_MAX_CHOICES && def->choices[c] && len < sizeof spec; ++c)
                len += (size_t)snprintf(spec + len, sizeof spec - len, "%s'%s'", c ? ", " : "", def->choices[c]);
            if (len < sizeof spec)
                len += (size_t)snprintf(spec + len, sizeof spec - len, "} = '%s'", def->choices[def->default_value.i]);
            if (len >= sizeof spec)
                err = 1;
            else
                TF_OpDefinitionBuilderAddAttr(b, spec);
        }
    }
    if (err) {
        set_load_error("%s: an argument or attribute spec is too long", tf_name);
        TF_DeleteOpDefinitionBuilder(b);
        return NULL;
    }
    TF_OpDefinitionBuilderSetShapeInferenceFunction(b, slot_functions[index].shape);
    return b;
}

static int register_kernels(const opf_op_def *op, const char *tf_name, int index, TF_Status *status) {
    static const struct {
        uint32_t bit;
        TF_DataType type;
    } dtypes[] = {{OPF_DTYPES_F32, TF_FLOAT}, {OPF_DTYPES_F64, TF_DOUBLE}};
    for (size_t k = 0; k < sizeof dtypes / sizeof dtypes[0]; ++k) {
        if (!(op->dtypes & dtypes[k].bit))
            continue;
        TF_KernelBuilder *kb =
            TF_NewKernelBuilder(tf_name, "CPU", slot_functions[index].create, kernel_compute, kernel_delete);
        TF_KernelBuilder_TypeConstraint(kb, "T", dtypes[k].type, status);
        if (TF_GetCode(status) == TF_OK)
            TF_RegisterKernelBuilder(tf_name, kb, status);
        if (TF_GetCode(status) != TF_OK) {
            set_load_error("%s: kernel registration failed: %s", tf_name, TF_Message(status));
            TF_DeleteKernelBuilder(kb);
            return -1;
        }
    }
    return 0;
}

/* Registers every row of `table` (except rows with inputs written in place)
 * as op "<prefix><CamelName>" with its CPU kernels. Returns the number of ops
 * registered, or -1 with opforge_tf_error() set. Thread-safe. */
OPF_TF_API int opforge_tf_register_table(const opf_op_table *table, const char *prefix);
static int register_table_locked(const opf_op_table *table, const char *prefix);

OPF_TF_API int opforge_tf_register_table(const opf_op_table *table, const char *prefix) {
    pthread_mutex_lock(&register_lock);
    int rc = register_table_locked(table, prefix);
    pthread_mutex_unlock(&register_lock);
    return rc;
}

static int register_table_locked(const opf_op_table *table, const char *prefix) {
    load_error[0] = '\0';
    if (!table || !prefix) {
        set_load_error("opforge_tf_register_table: table and prefix are required");
        return -1;
    }
    if (opf_op_table_validate(table) != OPF_OK) {
        set_load_error("%s", opf_last_error());
        return -1;
    }
    TF_Status *status = TF_NewStatus();
    int registered = 0;
    for (int64_t r = 0; r < table->num_ops; ++r) {
        const opf_op_def *op = table->ops[r];
        bool mutates = false;
        for (int i = 0; i < op->num_inputs; ++i)
            mutates |= (op->inputs[i].flags & OPF_ARG_MUTATED) != 0;
        if (mutates)
            continue;
        if (num_slots == MAX_SLOTS) {
            set_load_error("%s: more than %d ops registered in one process", op->name, MAX_SLOTS);
            break;
        }
        slot *s = &slots[num_slots];
        snprintf(s->tf_name, sizeof s->tf_name, "%s", prefix);
        if (append_camel(s->tf_name, sizeof s->tf_name, op->name) != 0) {
            set_load_error("%s: the op name cannot be a TensorFlow op name", op->name);
            break;
        }
        s->op = op;
        TF_OpDefinitionBuilder *b = op_builder(op, s->tf_name, num_slots);
        if (!b)
            break;
        TF_RegisterOpDefinition(b, status); /* takes ownership of b */
        if (TF_GetCode(status) != TF_OK) {
            set_load_error("%s: op registration failed: %s", s->tf_name, TF_Message(status));
            break;
        }
        if (register_kernels(op, s->tf_name, num_slots, status) != 0)
            break;
        ++num_slots;
        ++registered;
    }
    TF_DeleteStatus(status);
    return load_error[0] ? -1 : registered;
}

/* The first error of the last registration ("" if none). */
OPF_TF_API const char *opforge_tf_error(void);
OPF_TF_API const char *opforge_tf_error(void) { return load_error; }

/* tf.load_op_library collects the ops registered while it loads this file. */
__attribute__((constructor)) static void register_builtin_ops(void) {
    opforge_tf_register_table(opf_builtin_ops(), "Opf");
}
