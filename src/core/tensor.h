/* tensor.h — helpers over opf_tensor views used by the operators. */
#ifndef OPF_CORE_TENSOR_H
#define OPF_CORE_TENSOR_H

#include <stdint.h>

#include "opforge.h"

/* Room for "[d0,d1,...]" of a tensor of OPF_MAX_RANK dims. */
enum { OPF_SHAPE_STR_CAPACITY = OPF_MAX_RANK * 21 + 3 };

/* First byte of element 0. Computed on integers: an empty tensor's data may
 * be NULL or anything, with any byte_offset, and is never dereferenced
 * (opf_tensor_check guarantees that a non-empty one does not wrap). */
static inline char *opf_tensor_base(const opf_tensor *t) {
    return (char *)((uintptr_t)t->data + (uintptr_t)t->byte_offset);
}

/* Stride of dim d in elements (C-contiguous strides when t->strides is NULL). */
int64_t opf_tensor_stride(const opf_tensor *t, int32_t d);

/* Number of elements (0 if any dim is 0); assumes a validated shape (see
 * opf_tensor_check). */
int64_t opf_tensor_numel(const opf_tensor *t);

/* Whether t is C-contiguous (dims of size 1 may have any stride). */
int opf_tensor_is_contiguous(const opf_tensor *t);
/* Whether the last `core` dims of t are C-contiguous among themselves (a row
 * of a row-wise op; size-1 dims ignored, an empty tail counts as contiguous). */
int opf_tensor_tail_contiguous(const opf_tensor *t, int32_t core);

/* "[2,3]"; "[]" for a 0-d tensor; negative (unknown) dims print as "?". */
const char *opf_format_dims(int32_t ndim, const int64_t *shape, char buf[OPF_SHAPE_STR_CAPACITY]);

/* Validates one tensor argument `name` of op `op`: rank, dims, dtype in
 * `dtypes` (OPF_DTYPES_*), on a device of type `device_type`; the product of
 * its nonzero dims times the element size within int64 (so that every count
 * and contiguous stride of the view fits, empty or not). A non-empty view must
 * also have data, aligned to the element size, and strides that keep the
 * bytes it spans (from its lowest to its highest element) within int64 and
 * its addresses from wrapping around the address space. Strides of dims of
 * size 1, and everything about an empty view's memory, are ignored. */
opf_status opf_tensor_check(const char *op, const char *name, const opf_tensor *t, uint32_t dtypes,
                            opf_device_type device_type);

/* Answers of the overlap queries below. They are exact (element by
 * element, not by memory span) except where deciding would take more than a
 * fixed amount of work (views of many elements with strides that interleave
 * irregularly); the answer is then OPF_OVERLAP_UNKNOWN. */
typedef enum opf_overlap { OPF_DISJOINT = 0, OPF_OVERLAP = 1, OPF_OVERLAP_UNKNOWN = 2 } opf_overlap;

/* Whether two distinct elements of a validated t share memory (a zero stride
 * on a dim of size > 1, strides that fold the view onto itself). */
opf_overlap opf_tensor_self_overlaps(const opf_tensor *t);

/* Whether some byte belongs to an element of validated a and to an element of
 * validated b. Empty views overlap nothing. */
opf_overlap opf_tensors_overlap(const opf_tensor *a, const opf_tensor *b);

/* Whether a and b are the same elements in the same order (exact alias). */
int opf_tensors_alias_exactly(const opf_tensor *a, const opf_tensor *b);

#endif
