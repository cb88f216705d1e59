/* error.c — status names, the per-thread error message, version. */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define OPF_STR_(x) #x
#define OPF_STR(x) OPF_STR_(x)

enum { OPF_ERROR_CAPACITY = 512 };

/* The only per-thread state of the library: the last error's message and the
 * length of its "<op>: " prefix. */
static _Thread_local char opf_error_message[OPF_ERROR_CAPACITY];
static _Thread_local size_t opf_error_prefix;

static opf_status opf_vfail(opf_status status, const char *op, const char *fmt, va_list args) {
    int used = op != NULL ? snprintf(opf_error_message, sizeof opf_error_message, "%s: ", op) : 0;
    if (used < 0 || (size_t)used >= sizeof opf_error_message) {
        return status;
    }
    opf_error_prefix = (size_t)used;
    vsnprintf(opf_error_message + used, sizeof opf_error_message - (size_t)used, fmt, args);
    return status;
}

opf_status opf_fail(opf_status status, const char *op, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    opf_vfail(status, op, fmt, args);
    va_end(args);
    return status;
}

opf_status opf_error(opf_status status, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    opf_vfail(status, NULL, fmt, args);
    va_end(args);
    return status;
}

void opf_error_attribute(opf_status status, const char *op) {
    if (opf_error_message[0] == '\0') {
        opf_fail(status, op, "failed with %s and no message", opf_status_name(status));
        return;
    }
    if (opf_error_prefix > 0) {
        return;
    }
    char detail[OPF_ERROR_CAPACITY];
    memcpy(detail, opf_error_message, sizeof detail);
    opf_fail(status, op, "%s", detail);
}

void opf_clear_error(void) {
    opf_error_message[0] = '\0';
    opf_error_prefix = 0;
}

const char *opf_last_error(void) { return opf_error_message; }

const char *opf_last_error_detail(void) { return opf_error_message + opf_error_prefix; }

const char *opf_status_name(opf_status status) {
    switch (status) {
    case OPF_OK: return "OPF_OK";
    case OPF_E_INVALID: return "OPF_E_INVALID";
    case OPF_E_DTYPE: return "OPF_E_DTYPE";
    case OPF_E_SHAPE: return "OPF_E_SHAPE";
    case OPF_E_LAYOUT: return "OPF_E_LAYOUT";
    case OPF_E_DEVICE: return "OPF_E_DEVICE";
    case OPF_E_NOMEM: return "OPF_E_NOMEM";
    case OPF_E_UNSUPPORTED: return "OPF_E_UNSUPPORTED";
    case OPF_E_INTERNAL: return "OPF_E_INTERNAL";
    }
    return "OPF_E_UNKNOWN";
}

int opf_status_code(opf_status status) {
    switch (status) {
    case OPF_OK: return 0;
    case OPF_E_NOMEM: return 8;
    case OPF_E_UNSUPPORTED: return 12;
    case OPF_E_INTERNAL: return 13;
    default: return 3;
    }
}

const char *opf_dtypes_name(uint32_t dtypes) {
    switch (dtypes & (OPF_DTYPES_F32 | OPF_DTYPES_F64)) {
    case OPF_DTYPES_F32: return "float32";
    case OPF_DTYPES_F64: return "float64";
    case OPF_DTYPES_F32 | OPF_DTYPES_F64: return "float32 or float64";
    default: return "no dtype";
    }
}

const char *opf_version(void) {
    return OPF_STR(OPF_VERSION_MAJOR) "." OPF_STR(OPF_VERSION_MINOR) "." OPF_STR(OPF_VERSION_PATCH);
}

size_t opf_dtype_size(opf_dtype dtype) {
    switch (dtype) {
    case OPF_F16:
    case OPF_BF16: return 2;
    case OPF_F32: return 4;
    case OPF_F64: return 8;
    case OPF_DTYPE_INVALID: break;
    }
    return 0;
}

const char *opf_dtype_name(opf_dtype dtype) {
    switch (dtype) {
    case OPF_F16: return "float16";
    case OPF_BF16: return "bfloat16";
    case OPF_F32: return "float32";
    case OPF_F64: return "float64";
    case OPF_DTYPE_INVALID: break;
    }
    return "invalid";
}
