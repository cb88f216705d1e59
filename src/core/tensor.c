/* tensor.c — validation, layout and overlap queries on tensor views. */
#include "tensor.h"

#include <stdio.h>
#include <stdlib.h>

#include "error.h"

int64_t opf_tensor_stride(const opf_tensor *t, int32_t d) {
    if (t->strides != NULL) {
        return t->strides[d];
    }
    int64_t stride = 1;
    for (int32_t i = t->ndim - 1; i > d; i--) {
        stride *= t->shape[i];
    }
    return stride;
}

int64_t opf_tensor_numel(const opf_tensor *t) {
    int64_t n = 1;
    for (int32_t d = 0; d < t->ndim; d++) {
        n *= t->shape[d];
    }
    return n;
}

int opf_tensor_is_contiguous(const opf_tensor *t) {
    if (t->strides == NULL) {
        return 1;
    }
    int64_t expected = 1;
    for (int32_t d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] == 0) {
            return 1;
        }
        if (t->shape[d] != 1 && t->strides[d] != expected) {
            return 0;
        }
        expected *= t->shape[d];
    }
    return 1;
}

const char *opf_format_dims(int32_t ndim, const int64_t *shape, char buf[OPF_SHAPE_STR_CAPACITY]) {
    size_t used = 0;
    buf[used++] = '[';
    for (int32_t d = 0; d < ndim && d < OPF_MAX_RANK; d++) {
        int n = shape[d] < 0
                    ? snprintf(buf + used, OPF_SHAPE_STR_CAPACITY - used, "%s?", d ? "," : "")
                    : snprintf(buf + used, OPF_SHAPE_STR_CAPACITY - used, "%s%lld", d ? "," : "", (long long)shape[d]);
        if (n < 0 || (size_t)n >= OPF_SHAPE_STR_CAPACITY - used) {
            break;
        }
        used += (size_t)n;
    }
    buf[used++] = ']';
    buf[used] = '\0';
    return buf;
}

static uint32_t opf_dtype_bit(opf_dtype dtype) {
    switch (dtype) {
    case OPF_F32: return OPF_DTYPES_F32;
    case OPF_F64: return OPF_DTYPES_F64;
    default: return 0;
    }
}

static const char *opf_device_name(int32_t type) {
    switch (type) {
    case OPF_DEVICE_CPU: return "cpu";
    case OPF_DEVICE_CUDA: return "cuda";
    default: return "unknown";
    }
}

opf_status opf_tensor_check(const char *op, const char *name, const opf_tensor *t, uint32_t dtypes,
                            opf_device_type device_type) {
    if (t->ndim < 0 || t->ndim > OPF_MAX_RANK) {
        return opf_fail(OPF_E_SHAPE, op, "%s has rank %d; supported ranks are 0 to %d", name, (int)t->ndim,
                        OPF_MAX_RANK);
    }
    if (t->ndim > 0 && t->shape == NULL) {
        return opf_fail(OPF_E_INVALID, op, "%s has rank %d but no shape", name, (int)t->ndim);
    }
    if ((opf_dtype_bit(t->dtype) & dtypes) == 0) {
        return opf_fail(OPF_E_DTYPE, op, "%s has unsupported dtype %s; expected %s", name, opf_dtype_name(t->dtype),
                        opf_dtypes_name(dtypes));
    }
    if (t->device.type != (int32_t)device_type) {
        return opf_fail(OPF_E_DEVICE, op, "%s is on device %s:%d; expected %s", name, opf_device_name(t->device.type),
                        (int)t->device.id, opf_device_name(device_type));
    }
    size_t elem = opf_dtype_size(t->dtype);
    int has_zero_dim = 0; /* an empty tensor cannot overflow, whatever its other dims */
    for (int32_t d = 0; d < t->ndim; d++) {
        has_zero_dim |= t->shape[d] == 0;
    }
    int64_t numel = 1;
    for (int32_t d = 0; d < t->ndim; d++) {
        char dims[OPF_SHAPE_STR_CAPACITY];
        if (t->shape[d] < 0) {
            return opf_fail(OPF_E_SHAPE, op, "%s has a negative dimension: dim %d is %lld", name, (int)d,
                            (long long)t->shape[d]);
        }
        if (!has_zero_dim && numel > INT64_MAX / (int64_t)elem / t->shape[d]) {
            return opf_fail(OPF_E_SHAPE, op, "%s is too large: %s elements overflow int64 bytes", name,
                            opf_format_dims(t->ndim, t->shape, dims));
        }
        numel *= t->shape[d];
    }
    if (numel == 0) {
        return OPF_OK;
    }
    if (t->data == NULL) {
        return opf_fail(OPF_E_INVALID, op, "%s has %lld elements but its data pointer is NULL", name, (long long)numel);
    }
    if ((uintptr_t)opf_tensor_base(t) % elem != 0) {
        return opf_fail(OPF_E_LAYOUT, op, "%s data is not aligned to its element size (%zu bytes)", name, elem);
    }
    if (t->strides != NULL) {
        /* Every element offset must fit in int64 bytes too. */
        for (int32_t d = 0; d < t->ndim; d++) {
            int64_t s = t->strides[d] < 0 ? -t->strides[d] : t->strides[d];
            if (t->strides[d] == INT64_MIN || (t->shape[d] > 1 && s > INT64_MAX / (int64_t)elem / (t->shape[d] - 1))) {
                return opf_fail(OPF_E_SHAPE, op, "%s has stride %lld in dim %d, too large for its shape", name,
                                (long long)t->strides[d], (int)d);
            }
        }
    }
    return OPF_OK;
}

/* Byte span [lo, hi) touched by t (empty when t has no elements). */
static void opf_tensor_span(const opf_tensor *t, intptr_t *lo, intptr_t *hi) {
    intptr_t base = (intptr_t)opf_tensor_base(t);
    int64_t elem = (int64_t)opf_dtype_size(t->dtype);
    int64_t min_off = 0, max_off = 0;
    for (int32_t d = 0; d < t->ndim; d++) {
        if (t->shape[d] == 0) {
            *lo = *hi = base;
            return;
        }
        int64_t reach = opf_tensor_stride(t, d) * (t->shape[d] - 1);
        if (reach < 0) {
            min_off += reach;
        } else {
            max_off += reach;
        }
    }
    *lo = base + (intptr_t)(min_off * elem);
    *hi = base + (intptr_t)((max_off + 1) * elem);
}

int opf_tensors_overlap(const opf_tensor *a, const opf_tensor *b) {
    intptr_t alo, ahi, blo, bhi;
    opf_tensor_span(a, &alo, &ahi);
    opf_tensor_span(b, &blo, &bhi);
    return alo < ahi && blo < bhi && alo < bhi && blo < ahi;
}

int opf_tensors_alias_exactly(const opf_tensor *a, const opf_tensor *b) {
    if (opf_tensor_base(a) != opf_tensor_base(b) || a->ndim != b->ndim || a->dtype != b->dtype) {
        return 0;
    }
    for (int32_t d = 0; d < a->ndim; d++) {
        if (a->shape[d] != b->shape[d] || (a->shape[d] > 1 && opf_tensor_stride(a, d) != opf_tensor_stride(b, d))) {
            return 0;
        }
    }
    return 1;
}

typedef struct opf_dim_extent {
    int64_t stride; /* absolute */
    int64_t size;
} opf_dim_extent;

static int opf_compare_extent(const void *pa, const void *pb) {
    const opf_dim_extent *a = pa, *b = pb;
    return (a->stride > b->stride) - (a->stride < b->stride);
}

int opf_tensor_self_overlaps(const opf_tensor *t) {
    opf_dim_extent dims[OPF_MAX_RANK];
    int32_t n = 0;
    for (int32_t d = 0; d < t->ndim; d++) {
        if (t->shape[d] == 0) {
            return 0;
        }
        if (t->shape[d] > 1) {
            int64_t s = opf_tensor_stride(t, d);
            dims[n++] = (opf_dim_extent){s < 0 ? -s : s, t->shape[d]};
        }
    }
    qsort(dims, (size_t)n, sizeof dims[0], opf_compare_extent);
    /* Sorted by stride, each dim must step over everything the smaller ones reach. */
    int64_t reach = 0; /* largest offset reachable with the dims seen so far */
    for (int32_t i = 0; i < n; i++) {
        if (dims[i].stride <= reach) {
            return 1;
        }
        reach += dims[i].stride * (dims[i].size - 1);
    }
    return 0;
}
