/*
 * torch.c — registers the rows of an opforge op table as PyTorch operators,
 * in C, through PyTorch's stable C ABI (torch >= 2.10).
 *
 * No torch header is needed: the few entry points used are declared below
 * (they are extern "C" in libtorch_cpu.so, which `import torch` has loaded;
 * this library leaves them undefined and the dynamic linker binds them when
 * torch.ops.load_library opens it).
 *
 * For each row, opforge_torch_register():
 *   - defines the schema, e.g.
 *       dense(Tensor x, Tensor w, Tensor? b=None, *, str activation="none") -> Tensor
 *       relu_(Tensor(a!) x) -> ()
 *     inputs in order (optional ones `Tensor?`, mutated ones `Tensor(a!)`),
 *     then the attributes, keyword-only (float, int, or str for an enum); the
 *     outputs are returned; mutated inputs are not returned (they are
 *     modified in place). A row with optional outputs also takes, last,
 *       bool[N] output_mask=[True, ...]
 *     (one per output, as aten's backward ops do): a False output is not
 *     computed (opf_op_run gets NULL for it) and comes back as an empty
 *     tensor (shape [0]): the stable ABI cannot return an undefined tensor
 *     (a null handle for a `Tensor` return is dereferenced), and an empty
 *     tensor keeps the schema's returns plain `Tensor`s;
 *   - registers a boxed CPU kernel for it. A boxed kernel gets no user data,
 *     so each registered row takes one of a fixed set of trampolines (one per
 *     slot of `slots`), all of which call run_boxed() with their slot.
 *
 * The boxed kernel owns the tensor handles on its stack. It reads each input
 * (dtype, device, sizes, element strides: any layout is passed as a strided
 * view, so non-contiguous inputs are computed in place), infers the output
 * shapes with opf_op_infer_shape, allocates the outputs with
 * aoti_torch_empty_strided, runs opf_op_run, and leaves the new output
 * handles on the stack. On any failure it releases every handle it holds and
 * raises through aoti_torch_check(false, ...), which throws a c10::Error that
 * Python sees as RuntimeError("opforge::add: shape mismatch: ..."). The
 * exception unwinds through this C frame: it is compiled with -fexceptions and
 * holds nothing at that point (tests/torch/test_errors.py checks it).
 *
 * Nothing here names a particular op: everything comes from the table.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opforge.h"
#include "slots.h"

/* ------------------------------------------------------------------------ */
/* The stable C ABI of libtorch (declared here; torch's headers are C++)    */
/* ------------------------------------------------------------------------ */

typedef int32_t AOTITorchError; /* 0: success */
typedef uint64_t StableIValue;
typedef struct AtenTensorOpaque *AtenTensorHandle;
typedef struct TorchLibraryOpaque *TorchLibraryHandle;
typedef struct StringOpaque *StringHandle;
typedef struct StableListOpaque *StableListHandle;
typedef void (*boxed_kernel)(StableIValue *stack, uint64_t num_args, uint64_t num_outputs);

extern AOTITorchError aoti_torch_library_init_def(const char *ns, const char *file, uint32_t line,
                                                  TorchLibraryHandle *ret);
extern AOTITorchError aoti_torch_library_init_impl(const char *ns, const char *key, const char *file, uint32_t line,
                                                   TorchLibraryHandle *ret);
extern AOTITorchError aoti_torch_library_def(TorchLibraryHandle lib, const char *schema);
extern AOTITorchError aoti_torch_delete_library_object(TorchLibraryHandle lib);
extern AOTITorchError torch_library_impl(TorchLibraryHandle lib, const char *name, boxed_kernel fn,
                                         uint64_t extension_build_version);
extern AOTITorchError aoti_torch_get_data_ptr(AtenTensorHandle t, void **ret);
extern AOTITorchError aoti_torch_get_dim(AtenTensorHandle t, int64_t *ret);
extern AOTITorchError aoti_torch_get_sizes(AtenTensorHandle t, int64_t **ret);
extern AOTITorchError aoti_torch_get_strides(AtenTensorHandle t, int64_t **ret);
extern AOTITorchError aoti_torch_get_dtype(AtenTensorHandle t, int32_t *ret);
extern AOTITorchError aoti_torch_get_device_type(AtenTensorHandle t, int32_t *ret);
extern AOTITorchError aoti_torch_get_device_index(AtenTensorHandle t, int32_t *ret);
extern AOTITorchError aoti_torch_empty_strided(int64_t ndim, const int64_t *sizes, const int64_t *strides,
                                               int32_t dtype, int32_t device_type, int32_t device_index,
                                               AtenTensorHandle *ret);
extern AOTITorchError aoti_torch_delete_tensor_object(AtenTensorHandle t);
extern void aoti_torch_check(bool cond, const char *func, const char *file, uint32_t line, const char *msg);
extern AOTITorchError torch_string_length(StringHandle s, size_t *ret);
extern AOTITorchError torch_string_c_str(StringHandle s, const char **ret);
extern AOTITorchError torch_delete_string(StringHandle s);
extern AOTITorchError torch_list_size(StableListHandle list, size_t *size);
extern AOTITorchError torch_list_get_item(StableListHandle list, size_t index, StableIValue *element);
extern AOTITorchError torch_delete_list(StableListHandle list);
extern int32_t aoti_torch_device_type_cpu(void);
extern int32_t aoti_torch_device_type_cuda(void);
extern int32_t aoti_torch_device_type_meta(void);
typedef struct DeviceGuardOpaque *DeviceGuardHandle;
extern AOTITorchError aoti_torch_create_device_guard(int32_t device_index, DeviceGuardHandle *ret);
extern AOTITorchError aoti_torch_delete_device_guard(DeviceGuardHandle guard);
extern int32_t aoti_torch_dtype_float32(void);
extern int32_t aoti_torch_dtype_float64(void);
extern int32_t aoti_torch_dtype_float16(void);
extern int32_t aoti_torch_dtype_bfloat16(void);
extern int32_t aoti_torch_dtype_int64(void);
extern int32_t aoti_torch_dtype_int32(void);
extern int32_t aoti_torch_dtype_int16(void);
extern int32_t aoti_torch_dtype_int8(void);
extern int32_t aoti_torch_dtype_uint8(void);
extern int32_t aoti_torch_dtype_bool(void);
extern int32_t aoti_torch_dtype_complex64(void);
extern int32_t aoti_torch_dtype_complex128(void);

/* The stack layout this file is written for: the StableIValue conventions of
 * torch 2.10 (a tensor is its handle; a float, its double's bits; an int, an
 * int64; a bool, 0 or 1; a str, a StringHandle; a list, a StableListHandle
 * the kernel deletes; an optional, NULL or a pointer to a heap StableIValue
 * the kernel frees). Later versions convert for us. */
#define TORCH_ABI_2_10 ((2ULL << 56) | (10ULL << 48))

/* The public entry points (called from opforge.torch through ctypes). */
__attribute__((visibility("default"))) int opforge_torch_register(const opf_op_table *table);
__attribute__((visibility("default"))) const char *opforge_torch_last_error(void);
__attribute__((visibility("default"))) int opforge_torch_capacity(void);
__attribute__((visibility("default"))) int opforge_torch_unregister(const opf_op_table *table);

/* ------------------------------------------------------------------------ */
/* Slots: which row each trampoline runs                                     */
/* ------------------------------------------------------------------------ */

#define MAX_SLOTS 256

typedef struct slot {
    const opf_op_def *op;
    char label[128]; /* "opforge::dense", the prefix of every error message */
    int32_t stack_inputs;
    bool has_mask; /* optional outputs: the last argument is output_mask */
} slot;

static slot slots[MAX_SLOTS];
static int num_slots; /* slots in use (op != NULL); freed ones are reused */

/* The torch libraries a registered table holds: deleting them unregisters
 * its schemas and kernels (opforge_torch_unregister, for a reload). */
typedef struct registration {
    const opf_op_table *table;
    TorchLibraryHandle def, impl, impl_cuda;
} registration;

static registration registrations[MAX_SLOTS];

/* dtype and device codes, looked up once (they are functions in the ABI) */
static int32_t dtype_f32, dtype_f64, device_cpu, device_cuda;
static AOTITorchError (*delete_stable_ivalue)(StableIValue *); /* torch >= 2.13, else free() */
/* In libtorch_cuda, present only in a CUDA build of torch: looked up at run
 * time, so that the CPU path never depends on it. */
static AOTITorchError (*get_current_cuda_stream)(int32_t device_index, void **stream);

typedef struct dtype_name {
    int32_t (*code)(void);
    const char *name;
} dtype_name;

static const dtype_name dtype_names[] = {
    {aoti_torch_dtype_float32, "float32"},     {aoti_torch_dtype_float64, "float64"},
    {aoti_torch_dtype_float16, "float16"},     {aoti_torch_dtype_bfloat16, "bfloat16"},
    {aoti_torch_dtype_int64, "int64"},         {aoti_torch_dtype_int32, "int32"},
    {aoti_torch_dtype_int16, "int16"},         {aoti_torch_dtype_int8, "int8"},
    {aoti_torch_dtype_uint8, "uint8"},         {aoti_torch_dtype_bool, "bool"},
    {aoti_torch_dtype_complex64, "complex64"}, {aoti_torch_dtype_complex128, "complex128"},
};

static const char *torch_dtype_name(int32_t code) {
    for (size_t i = 0; i < sizeof dtype_names / sizeof dtype_names[0]; ++i) {
        if (dtype_names[i].code() == code)
            return dtype_names[i].name;
    }
    return "an unsupported dtype";
}

/* ------------------------------------------------------------------------ */
/* The boxed kernel                                                          */
/* ------------------------------------------------------------------------ */

/* Everything one call holds: released (all of it) before returning or raising. */
typedef struct call {
    AtenTensorHandle in[OPF_MAX_ARGS];
    AtenTensorHandle out[OPF_MAX_ARGS];
    StringHandle strings[OPF_MAX_ATTRS];
    StableListHandle mask;   /* output_mask, when the row has one */
    DeviceGuardHandle guard; /* CUDA calls: the inputs' device is current */
} call;

static void release(call *c) {
    for (int i = 0; i < OPF_MAX_ARGS; ++i) {
        if (c->in[i])
            aoti_torch_delete_tensor_object(c->in[i]);
        if (c->out[i])
            aoti_torch_delete_tensor_object(c->out[i]);
    }
    for (int i = 0; i < OPF_MAX_ATTRS; ++i) {
        if (c->strings[i])
            torch_delete_string(c->strings[i]);
    }
    if (c->mask)
        torch_delete_list(c->mask);
}

static _Thread_local char message[1024];

/* Releases the call's handles, then raises RuntimeError(message) in Python:
 * aoti_torch_check throws a c10::Error, which unwinds through this frame. */
static void fail(call *c) {
    release(c);
    aoti_torch_check(false, "opforge", __FILE__, __LINE__, message);
}

static double bits_to_double(StableIValue v) {
    double d;
    memcpy(&d, &v, sizeof d);
    return d;
}

/* "cpu", "cuda:1", ... */
static const char *device_label(int32_t type, int32_t index, char *buf, size_t cap) {
    if (type == device_cpu) {
        snprintf(buf, cap, "cpu");
    } else if (type == aoti_torch_device_type_meta()) {
        snprintf(buf, cap, "meta");
    } else {
        snprintf(buf, cap, "%s:%d", type == device_cuda ? "cuda" : "device", (int)index);
    }
    return buf;
}

/* Reads input i (a handle already owned by c->in[i]) into t. The first
 * present input fixes the call's device (*device_type, *device_index < -1:
 * not yet); every other one must be on the same device. */
static bool read_input(const slot *s, call *c, int i, opf_tensor *t, int32_t *device_type, int32_t *device_index) {
    const opf_op_def *op = s->op;
    AtenTensorHandle h = c->in[i];
    int32_t dtype = 0, type = 0, index = 0;
    int64_t ndim = 0, *sizes = NULL, *strides = NULL;
    void *data = NULL;
    if (aoti_torch_get_dtype(h, &dtype) || aoti_torch_get_device_type(h, &type) ||
        aoti_torch_get_device_index(h, &index) || aoti_torch_get_dim(h, &ndim) || aoti_torch_get_sizes(h, &sizes) ||
        aoti_torch_get_strides(h, &strides) || aoti_torch_get_data_ptr(h, &data)) {
        snprintf(message, sizeof message, "%s: cannot read tensor %s", s->label, op->inputs[i].name);
        return false;
    }
    char here[32], there[32];
    if (*device_index < -1) {
        if (type != device_cpu && !(type == device_cuda && op->compute_cuda)) {
            snprintf(message, sizeof message, "%s: %s is on %s; expected a CPU%s tensor", s->label, op->inputs[i].name,
                     device_label(type, index, here, sizeof here), op->compute_cuda ? " or CUDA" : "");
            return false;
        }
        *device_type = type;
        *device_index = index;
    } else if (type != *device_type || index != *device_index) {
        snprintf(message, sizeof message, "%s: %s is on %s, expected %s like the other tensors", s->label,
                 op->inputs[i].name, device_label(type, index, here, sizeof here),
                 device_label(*device_type, *device_index, there, sizeof there));
        return false;
    }
    opf_dtype code = dtype == dtype_f32 ? OPF_F32 : dtype == dtype_f64 ? OPF_F64 : OPF_DTYPE_INVALID;
    uint32_t bit = code == OPF_F32 ? OPF_DTYPES_F32 : code == OPF_F64 ? OPF_DTYPES_F64 : 0;
    if (!(op->dtypes & bit)) {
        snprintf(message, sizeof message, "%s: %s has dtype %s; expected %s", s->label, op->inputs[i].name,
                 torch_dtype_name(dtype), opf_dtypes_name(op->dtypes));
        return false;
    }
    if (ndim > OPF_MAX_RANK) {
        snprintf(message, sizeof message, "%s: %s has rank %lld; at most %d is supported", s->label, op->inputs[i].name,
                 (long long)ndim, OPF_MAX_RANK);
        return false;
    }
    t->data = data;
    t->device.type = type == device_cuda ? OPF_DEVICE_CUDA : OPF_DEVICE_CPU;
    t->device.id = type == device_cuda ? index : 0; /* torch says -1 for the CPU */
    t->ndim = (int32_t)ndim;
    t->dtype = code;
    t->shape = sizes;
    t->strides = strides;
    t->byte_offset = 0;
    return true;
}

/* "opforge::add: shape mismatch: ..." from the library's message without its
 * "<op>: " prefix. */
static void library_message(const slot *s) {
    snprintf(message, sizeof message, "%s: %s", s->label, opf_last_error_detail());
}

/* Reads attribute a from the stack value v into *value. */
static bool read_attr(const slot *s, call *c, int a, StableIValue v, opf_attr_value *value) {
    const opf_attr_def *attr = &s->op->attrs[a];
    switch (attr->type) {
    case OPF_ATTR_FLOAT: value->f = bits_to_double(v); return true;
    case OPF_ATTR_INT: value->i = (int64_t)v; return true;
    case OPF_ATTR_ENUM: {
        StringHandle h = (StringHandle)(uintptr_t)v;
        c->strings[a] = h;
        size_t length = 0;
        const char *text = NULL;
        if (torch_string_length(h, &length) || torch_string_c_str(h, &text)) {
            snprintf(message, sizeof message, "%s: cannot read attribute %s", s->label, attr->name);
            return false;
        }
        if (opf_op_attr_choice(s->op, a, text, length, &value->i) != OPF_OK) {
            library_message(s);
            return false;
        }
        return true;
    }
    }
    snprintf(message, sizeof message, "%s: attribute %s has an unknown type", s->label, attr->name);
    return false;
}

/* Reads output_mask (owned by c->mask) into wanted[]: every output is wanted
 * when the row has no mask. Only an optional output may be left out. */
static bool read_mask(const slot *s, call *c, bool *wanted) {
    const opf_op_def *op = s->op;
    for (int o = 0; o < op->num_outputs; ++o)
        wanted[o] = true;
    if (!s->has_mask)
        return true;
    size_t size = 0;
    if (!c->mask || torch_list_size(c->mask, &size)) {
        snprintf(message, sizeof message, "%s: cannot read output_mask", s->label);
        return false;
    }
    if (size != (size_t)op->num_outputs) {
        snprintf(message, sizeof message, "%s: output_mask has %llu values, expected %d (one per output)", s->label,
                 (unsigned long long)size, op->num_outputs);
        return false;
    }
    for (int o = 0; o < op->num_outputs; ++o) {
        StableIValue v = 0;
        if (torch_list_get_item(c->mask, (size_t)o, &v)) {
            snprintf(message, sizeof message, "%s: cannot read output_mask", s->label);
            return false;
        }
        wanted[o] = v != 0;
        if (!wanted[o] && !(op->outputs[o].flags & OPF_ARG_OPTIONAL)) {
            snprintf(message, sizeof message, "%s: output %s is not optional: its output_mask value must be True",
                     s->label, op->outputs[o].name);
            return false;
        }
    }
    return true;
}

static void run_boxed(const slot *s, StableIValue *stack, uint64_t num_args, uint64_t num_outputs) {
    const opf_op_def *op = s->op;
    call c;
    memset(&c, 0, sizeof c);
    /* Take ownership of every handle on the stack first, so that any failure
     * below releases all of them. */
    for (int i = 0; i < op->num_inputs && (uint64_t)i < num_args; ++i) {
        StableIValue v = stack[i];
        if (op->inputs[i].flags & OPF_ARG_OPTIONAL) {
            StableIValue *box = (StableIValue *)(uintptr_t)v;
            v = 0;
            if (box) {
                v = *box;
                if (delete_stable_ivalue) {
                    delete_stable_ivalue(box);
                } else {
                    free(box); /* torch < 2.13 allocates it with operator new, which is malloc */
                }
            }
        }
        c.in[i] = (AtenTensorHandle)(uintptr_t)v;
    }
    for (int a = 0; a < op->num_attrs; ++a) {
        uint64_t k = (uint64_t)(op->num_inputs + a);
        if (k < num_args && op->attrs[a].type == OPF_ATTR_ENUM)
            c.strings[a] = (StringHandle)(uintptr_t)stack[k];
    }
    if (s->has_mask && (uint64_t)(s->stack_inputs - 1) < num_args)
        c.mask = (StableListHandle)(uintptr_t)stack[s->stack_inputs - 1];
    if (num_args != (uint64_t)s->stack_inputs || num_outputs != (uint64_t)op->num_outputs) {
        snprintf(message, sizeof message, "%s: called with %llu arguments and %llu outputs, expected %d and %d",
                 s->label, (unsigned long long)num_args, (unsigned long long)num_outputs, s->stack_inputs,
                 op->num_outputs);
        fail(&c);
        return;
    }

    opf_tensor in_tensors[OPF_MAX_ARGS], out_tensors[OPF_MAX_ARGS];
    const opf_tensor *inputs[OPF_MAX_ARGS], *outputs[OPF_MAX_ARGS];
    opf_attr_value attrs[OPF_MAX_ATTRS];
    int32_t device_type = 0, device_index = -2; /* -2: not yet known */
    opf_dtype dtype = OPF_DTYPE_INVALID;
    int32_t torch_dtype = 0;
    for (int i = 0; i < op->num_inputs; ++i) {
        inputs[i] = NULL;
        if (!c.in[i]) {
            continue; /* an absent optional input */
        }
        if (!read_input(s, &c, i, &in_tensors[i], &device_type, &device_index)) {
            fail(&c);
            return;
        }
        inputs[i] = &in_tensors[i];
        if (dtype == OPF_DTYPE_INVALID) {
            dtype = in_tensors[i].dtype;
            torch_dtype = dtype == OPF_F32 ? dtype_f32 : dtype_f64;
        }
    }
    bool on_cuda = device_index >= -1 && device_type == device_cuda;
    void *stream = NULL;
    if (on_cuda) {
        /* The inputs' device current while we allocate and launch (a tensor
         * on cuda:1 while cuda:0 is current), and torch's stream on it. */
        if (!get_current_cuda_stream || aoti_torch_create_device_guard(device_index, &c.guard) ||
            get_current_cuda_stream(device_index, &stream)) {
            snprintf(message, sizeof message, "%s: cannot get the current CUDA stream of device %d", s->label,
                     (int)device_index);
            fail(&c);
            return;
        }
    } else {
        device_type = device_cpu;
        device_index = -1;
    }
    for (int a = 0; a < op->num_attrs; ++a) {
        if (!read_attr(s, &c, a, stack[op->num_inputs + a], &attrs[a])) {
            fail(&c);
            return;
        }
    }
    bool wanted[OPF_MAX_ARGS];
    if (!read_mask(s, &c, wanted)) {
        fail(&c);
        return;
    }
    for (int o = 0; o < op->num_outputs; ++o) {
        int32_t ndim = 0;
        int64_t shape[OPF_MAX_RANK], strides[OPF_MAX_RANK];
        if (!wanted[o]) {
            /* Not computed: an empty tensor stands for it. */
            ndim = 1;
            shape[0] = 0;
        } else if (opf_op_infer_shape(op, inputs, o, &ndim, shape) != OPF_OK) {
            library_message(s);
            fail(&c);
            return;
        }
        int64_t stride = 1;
        for (int32_t d = ndim - 1; d >= 0; --d) {
            strides[d] = stride;
            stride *= shape[d] > 1 ? shape[d] : 1;
        }
        void *data = NULL;
        if (aoti_torch_empty_strided(ndim, shape, strides, torch_dtype, device_type, device_index, &c.out[o]) ||
            aoti_torch_get_data_ptr(c.out[o], &data)) {
            snprintf(message, sizeof message, "%s: cannot allocate output %s", s->label, op->outputs[o].name);
            fail(&c);
            return;
        }
        int64_t *sizes = NULL, *got_strides = NULL;
        aoti_torch_get_sizes(c.out[o], &sizes);
        aoti_torch_get_strides(c.out[o], &got_strides);
        out_tensors[o] = opf_tensor_make(data, dtype, ndim, sizes);
        out_tensors[o].strides = got_strides;
        if (on_cuda) {
            out_tensors[o].device.type = OPF_DEVICE_CUDA;
            out_tensors[o].device.id = device_index;
        }
        outputs[o] = wanted[o] ? &out_tensors[o] : NULL;
    }
    opf_status status =
        on_cuda ? opf_op_run_cuda(op, inputs, outputs, attrs, stream) : opf_op_run(op, inputs, outputs, attrs);
    if (status != OPF_OK) {
        library_message(s);
        fail(&c);
        return;
    }
    for (int o = 0; o < op->num_outputs; ++o) {
        stack[o] = (StableIValue)(uintptr_t)c.out[o];
        c.out[o] = NULL; /* now the caller's */
    }
    release(&c);
}

/* One trampoline per slot (slots.h). */
#define TRAMPOLINE(tag, index)                                                                                         \
    static void trampoline_##tag(StableIValue *stack, uint64_t num_args, uint64_t num_outputs) {                       \
        run_boxed(&slots[index], stack, num_args, num_outputs);                                                        \
    }
OPF_SLOTS_256(TRAMPOLINE)
#define TRAMPOLINE_REF(tag, index) trampoline_##tag,
static const boxed_kernel trampolines[MAX_SLOTS] = {OPF_SLOTS_256(TRAMPOLINE_REF)};

/* ------------------------------------------------------------------------ */
/* Registration                                                              */
/* ------------------------------------------------------------------------ */

/* Per thread: the message of the calling thread's last failed registration. */
static _Thread_local char register_error[1024];
/* Registrations (which take slots) are serialised; a kernel only reads the
 * slot its trampoline was registered with, after torch has published it. */
static pthread_mutex_t register_lock = PTHREAD_MUTEX_INITIALIZER;

const char *opforge_torch_last_error(void) { return register_error; }

int opforge_torch_capacity(void) {
    pthread_mutex_lock(&register_lock);
    int room = MAX_SLOTS - num_slots;
    pthread_mutex_unlock(&register_lock);
    return room;
}

/* Appends printf-style text to buf (of size cap, holding *len chars). */
__attribute__((format(printf, 4, 5))) static bool append(char *buf, size_t cap, size_t *len, const char *fmt, ...);
static bool append(char *buf, size_t cap, size_t *len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= cap - *len)
        return false;
    *len += (size_t)n;
    return true;
}

/* A float literal the schema parser reads back exactly (always with a '.' or
 * an exponent, so that it is not read as an int). */
static void float_literal(double v, char *out, size_t cap) {
    snprintf(out, cap, "%.17g", v);
    if (!strpbrk(out, ".eEn")) {
        size_t n = strlen(out);
        if (n + 2 < cap)
            memcpy(out + n, ".0", 3);
    }
}

static bool has_optional_outputs(const opf_op_def *op) {
    for (int o = 0; o < op->num_outputs; ++o) {
        if (op->outputs[o].flags & OPF_ARG_OPTIONAL)
            return true;
    }
    return false;
}

/* The schema of a row, e.g. "scale(Tensor x, *, float alpha=1.0) -> Tensor". */
static bool schema_of(const opf_op_def *op, char *buf, size_t cap) {
    size_t len = 0;
    bool ok = append(buf, cap, &len, "%s(", op->name);
    int alias = 0;
    for (int i = 0; i < op->num_inputs; ++i) {
        const opf_arg_def *arg = &op->inputs[i];
        const char *sep = i ? ", " : "";
        if (arg->flags & OPF_ARG_MUTATED) {
            ok = ok && append(buf, cap, &len, "%sTensor(%c!) %s", sep, 'a' + alias++, arg->name);
        } else if (arg->flags & OPF_ARG_OPTIONAL) {
            ok = ok && append(buf, cap, &len, "%sTensor? %s=None", sep, arg->name);
        } else {
            ok = ok && append(buf, cap, &len, "%sTensor %s", sep, arg->name);
        }
    }
    if (op->num_attrs)
        ok = ok && append(buf, cap, &len, "%s*", op->num_inputs ? ", " : "");
    for (int a = 0; a < op->num_attrs; ++a) {
        const opf_attr_def *attr = &op->attrs[a];
        char literal[64];
        switch (attr->type) {
        case OPF_ATTR_FLOAT:
            float_literal(attr->default_value.f, literal, sizeof literal);
            ok = ok && append(buf, cap, &len, ", float %s=%s", attr->name, literal);
            break;
        case OPF_ATTR_INT:
            ok = ok && append(buf, cap, &len, ", int %s=%lld", attr->name, (long long)attr->default_value.i);
            break;
        case OPF_ATTR_ENUM:
            ok = ok && append(buf, cap, &len, ", str %s=\"%s\"", attr->name, attr->choices[attr->default_value.i]);
            break;
        default: return false;
        }
    }
    if (has_optional_outputs(op)) {
        if (!op->num_attrs)
            ok = ok && append(buf, cap, &len, "%s*", op->num_inputs ? ", " : "");
        ok = ok && append(buf, cap, &len, ", bool[%d] output_mask=[", op->num_outputs);
        for (int o = 0; o < op->num_outputs; ++o)
            ok = ok && append(buf, cap, &len, "%sTrue", o ? ", " : "");
        ok = ok && append(buf, cap, &len, "]");
    }
    ok = ok && append(buf, cap, &len, ") -> ");
    if (op->num_outputs == 1) {
        ok = ok && append(buf, cap, &len, "Tensor");
    } else {
        ok = ok && append(buf, cap, &len, "(");
        for (int o = 0; o < op->num_outputs; ++o)
            ok = ok && append(buf, cap, &len, "%sTensor", o ? ", " : "");
        ok = ok && append(buf, cap, &len, ")");
    }
    return ok;
}

static void init_abi(void) {
    dtype_f32 = aoti_torch_dtype_float32();
    dtype_f64 = aoti_torch_dtype_float64();
    device_cpu = aoti_torch_device_type_cpu();
    device_cuda = aoti_torch_device_type_cuda();
    /* Only in torch >= 2.13: looked up, so that this library loads on 2.10+. */
    *(void **)&delete_stable_ivalue = dlsym(RTLD_DEFAULT, "torch_delete_stable_ivalue");
    /* libtorch_cuda is loaded (RTLD_LOCAL) by `import torch` when torch is a
     * CUDA build: find it without loading it. */
    void *torch_cuda = dlopen("libtorch_cuda.so", RTLD_LAZY | RTLD_NOLOAD);
    if (torch_cuda)
        *(void **)&get_current_cuda_stream = dlsym(torch_cuda, "aoti_torch_get_current_cuda_stream");
}

/* Registers every row of `table` as torch.ops.<table name>.<row name>, with a
 * CPU kernel. Returns 0, or -1 with opforge_torch_last_error() set (and
 * nothing of the table registered). The library handles are kept until
 * opforge_torch_unregister(table) (deleting one unregisters its ops). Call it
 * once per table; it is thread-safe. */
static int register_locked(const opf_op_table *table);
static void release_registration(registration *reg);

int opforge_torch_register(const opf_op_table *table) {
    static pthread_once_t abi_once = PTHREAD_ONCE_INIT;
    pthread_once(&abi_once, init_abi);
    pthread_mutex_lock(&register_lock);
    int rc = register_locked(table);
    pthread_mutex_unlock(&register_lock);
    return rc;
}

/* Unregisters what opforge_torch_register(table) registered (schemas and
 * kernels) and frees its slots, so that a table of the same name can be
 * registered. The caller makes sure no call of these ops is running.
 * Returns 0, or -1 if the table is not registered. */
int opforge_torch_unregister(const opf_op_table *table) {
    pthread_mutex_lock(&register_lock);
    int rc = -1;
    for (int i = 0; i < MAX_SLOTS; ++i) {
        if (table && registrations[i].table == table) {
            release_registration(&registrations[i]);
            rc = 0;
            break;
        }
    }
    if (rc)
        snprintf(register_error, sizeof register_error, "table %s is not registered", table ? table->name : "NULL");
    pthread_mutex_unlock(&register_lock);
    return rc;
}

static void release_registration(registration *reg) {
    TorchLibraryHandle handles[] = {reg->impl_cuda, reg->impl, reg->def};
    for (size_t i = 0; i < sizeof handles / sizeof handles[0]; ++i) {
        if (handles[i])
            aoti_torch_delete_library_object(handles[i]);
    }
    for (int64_t r = 0; reg->table && r < reg->table->num_ops; ++r) {
        for (int k = 0; k < MAX_SLOTS; ++k) {
            if (slots[k].op == reg->table->ops[r]) {
                slots[k].op = NULL;
                --num_slots;
                break;
            }
        }
    }
    memset(reg, 0, sizeof *reg);
}

static int register_locked(const opf_op_table *table) {
    register_error[0] = '\0';
    if (!table || opf_op_table_validate(table) != OPF_OK) {
        snprintf(register_error, sizeof register_error, "invalid op table: %s", table ? opf_last_error() : "NULL");
        return -1;
    }
    if (table->num_ops > MAX_SLOTS - num_slots) {
        snprintf(register_error, sizeof register_error, "too many ops: %lld, room for %d more",
                 (long long)table->num_ops, MAX_SLOTS - num_slots);
        return -1;
    }
    registration *reg = NULL;
    for (int i = 0; i < MAX_SLOTS && !reg; ++i)
        reg = registrations[i].table ? NULL : &registrations[i];
    if (!reg) { /* cannot happen: a registration holds at least one slot */
        snprintf(register_error, sizeof register_error, "too many registered tables");
        return -1;
    }
    reg->table = table;
    bool any_cuda = false;
    for (int64_t r = 0; r < table->num_ops; ++r)
        any_cuda = any_cuda || table->ops[r]->compute_cuda;
    if (aoti_torch_library_init_def(table->name, __FILE__, __LINE__, &reg->def) ||
        aoti_torch_library_init_impl(table->name, "CPU", __FILE__, __LINE__, &reg->impl) ||
        (any_cuda && get_current_cuda_stream &&
         aoti_torch_library_init_impl(table->name, "CUDA", __FILE__, __LINE__, &reg->impl_cuda))) {
        snprintf(register_error, sizeof register_error, "cannot create the torch library for namespace %s",
                 table->name);
        release_registration(reg);
        return -1;
    }
    int next = 0; /* slots are taken in order from the first free one */
    for (int64_t r = 0; r < table->num_ops; ++r) {
        const opf_op_def *op = table->ops[r];
        char schema[2048];
        if (!schema_of(op, schema, sizeof schema)) {
            snprintf(register_error, sizeof register_error, "%s::%s: cannot write its schema", table->name, op->name);
            release_registration(reg);
            return -1;
        }
        if (aoti_torch_library_def(reg->def, schema)) {
            snprintf(register_error, sizeof register_error, "%s::%s: torch rejected the schema %.900s", table->name,
                     op->name, schema);
            release_registration(reg);
            return -1;
        }
        while (slots[next].op)
            ++next;
        slot *s = &slots[next];
        s->op = op;
        ++num_slots;
        s->has_mask = has_optional_outputs(op);
        s->stack_inputs = op->num_inputs + op->num_attrs + (s->has_mask ? 1 : 0);
        snprintf(s->label, sizeof s->label, "%s::%s", table->name, op->name);
        if (torch_library_impl(reg->impl, op->name, trampolines[next], TORCH_ABI_2_10)) {
            snprintf(register_error, sizeof register_error, "%s: cannot register its CPU kernel", s->label);
            release_registration(reg);
            return -1;
        }
        /* The same trampoline serves the CUDA key: the kernel goes by the
         * inputs' device. */
        if (reg->impl_cuda && op->compute_cuda &&
            torch_library_impl(reg->impl_cuda, op->name, trampolines[next], TORCH_ABI_2_10)) {
            snprintf(register_error, sizeof register_error, "%s: cannot register its CUDA kernel", s->label);
            release_registration(reg);
            return -1;
        }
    }
    return 0;
}
