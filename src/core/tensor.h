/* tensor.h — helpers over opf_tensor views used by the operators. */
#ifndef OPF_CORE_TENSOR_H
#define OPF_CORE_TENSOR_H

#include <stdint.h>

#include "opforge.h"

/* Room for "[d0,d1,...]" of a tensor of OPF_MAX_RANK dims. */
enum { OPF_SHAPE_STR_CAPACITY = OPF_MAX_RANK * 21 + 3 };

/* First byte of element 0. */
static inline char *opf_tensor_base(const opf_tensor *t) { return (char *)t->data + t->byte_offset; }

/* Stride of dim d in elements (C-contiguous strides when t->strides is NULL). */
int64_t opf_tensor_stride(const opf_tensor *t, int32_t d);

/* Number of elements; assumes a validated shape (see opf_tensor_check). */
int64_t opf_tensor_numel(const opf_tensor *t);

/* Whether t is C-contiguous (dims of size 1 may have any stride). */
int opf_tensor_is_contiguous(const opf_tensor *t);

/* "[2,3]"; "[]" for a 0-d tensor; negative (unknown) dims print as "?". */
const char *opf_format_dims(int32_t ndim, const int64_t *shape, char buf[OPF_SHAPE_STR_CAPACITY]);

/* Validates one tensor argument `name` of op `op`: rank, dims, element count
 * and byte size within int64, data present, dtype in `dtypes` (OPF_DTYPES_*),
 * on a device of type `device_type`, data aligned to the element size. */
opf_status opf_tensor_check(const char *op, const char *name, const opf_tensor *t, uint32_t dtypes,
                            opf_device_type device_type);

/* Whether two distinct elements of t share memory (zero strides, ...). */
int opf_tensor_self_overlaps(const opf_tensor *t);

/* Whether the memory spans of a and b intersect. */
int opf_tensors_overlap(const opf_tensor *a, const opf_tensor *b);

/* Whether a and b are the same elements in the same order (exact alias). */
int opf_tensors_alias_exactly(const opf_tensor *a, const opf_tensor *b);

#endif
