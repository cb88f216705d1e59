/* tensor.c — validation, layout and overlap queries on tensor views. */
#include "tensor.h"

#include <stdio.h>
#include <stdlib.h>

#include "error.h"

/* |v| as uint64_t, defined for INT64_MIN too. */
static uint64_t opf_abs_u64(int64_t v) { return v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v; }

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
        if (t->shape[d] == 0) {
            return 0; /* before multiplying: the other dims may multiply past int64 */
        }
    }
    for (int32_t d = 0; d < t->ndim; d++) {
        n *= t->shape[d];
    }
    return n;
}

int opf_tensor_is_contiguous(const opf_tensor *t) { return opf_tensor_tail_contiguous(t, t->ndim); }

int opf_tensor_tail_contiguous(const opf_tensor *t, int32_t core) {
    if (t->strides == NULL) {
        return 1;
    }
    int64_t expected = 1;
    for (int32_t d = t->ndim - 1; d >= t->ndim - core; d--) {
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
    char dims[OPF_SHAPE_STR_CAPACITY];
    const uint64_t elem = opf_dtype_size(t->dtype);
    uint64_t bytes = elem; /* product of the nonzero dims, in bytes */
    int empty = 0;
    for (int32_t d = 0; d < t->ndim; d++) {
        if (t->shape[d] < 0) {
            return opf_fail(OPF_E_SHAPE, op, "%s has a negative dimension: dim %d is %lld", name, (int)d,
                            (long long)t->shape[d]);
        }
        if (t->shape[d] == 0) {
            empty = 1;
        } else if (__builtin_mul_overflow(bytes, (uint64_t)t->shape[d], &bytes) || bytes > (uint64_t)INT64_MAX) {
            return opf_fail(OPF_E_SHAPE, op, "%s is too large: the dims of %s overflow int64 bytes", name,
                            opf_format_dims(t->ndim, t->shape, dims));
        }
    }
    if (empty) {
        return OPF_OK; /* no element is addressed: data, byte_offset and strides are not used */
    }
    if (t->data == NULL) {
        return opf_fail(OPF_E_INVALID, op, "%s has %lld elements but its data pointer is NULL", name,
                        (long long)opf_tensor_numel(t));
    }
    if (t->byte_offset > (uint64_t)(UINTPTR_MAX - (uintptr_t)t->data)) {
        return opf_fail(OPF_E_LAYOUT, op, "%s has byte_offset %llu, which wraps its data pointer around", name,
                        (unsigned long long)t->byte_offset);
    }
    if ((uintptr_t)opf_tensor_base(t) % elem != 0) {
        return opf_fail(OPF_E_LAYOUT, op, "%s data is not aligned to its element size (%zu bytes)", name, (size_t)elem);
    }
    /* Bytes from element 0 to the highest (up) and lowest (down) elements. */
    uint64_t up = 0, down = 0;
    for (int32_t d = 0; t->strides != NULL && d < t->ndim; d++) {
        if (t->shape[d] == 1) {
            continue; /* any stride: only index 0 exists */
        }
        int64_t s = t->strides[d];
        uint64_t reach, *side = s < 0 ? &down : &up;
        if (__builtin_mul_overflow(opf_abs_u64(s), (uint64_t)(t->shape[d] - 1) * elem, &reach) ||
            reach > (uint64_t)INT64_MAX) {
            return opf_fail(OPF_E_SHAPE, op, "%s has stride %lld in dim %d, too large for its shape", name,
                            (long long)s, (int)d);
        }
        *side += reach; /* both sides stay below 2^63 (checked next), so this cannot wrap */
        if (up + down > (uint64_t)INT64_MAX - elem) {
            return opf_fail(OPF_E_SHAPE, op,
                            "%s has strides that together span more than int64 bytes (shape %s, stride %lld in dim %d)",
                            name, opf_format_dims(t->ndim, t->shape, dims), (long long)s, (int)d);
        }
    }
    uintptr_t base = (uintptr_t)opf_tensor_base(t);
    if (down > base || up + elem - 1 > UINTPTR_MAX - base) {
        return opf_fail(OPF_E_LAYOUT, op, "%s has elements outside the address space (its strides wrap around)", name);
    }
    return OPF_OK;
}

/* ------------------------------------------------------------------------ */
/* Overlap                                                                   */
/* ------------------------------------------------------------------------ */

/*
 * Whether views share memory comes down to a bounded linear equation in
 * integers: do x_k with 0 <= x_k <= u_k and  sum_k c_k x_k == target  exist?
 * (x_k is an index along a dim, c_k its stride.) That is a knapsack problem,
 * solved here by a depth-first search over the terms, largest coefficient
 * first, that tries only the values of x_k for which the smaller terms can
 * still make up the rest: values within reach of their span (an interval)
 * and in the residue class their gcd demands. For the layouts that slicing
 * one array produces (nested strides) that leaves one or two values per term.
 * Every branch pruned is infeasible, so a finished search is exact. The
 * search counts its steps and gives up after OPF_OVERLAP_WORK of them,
 * answering OPF_OVERLAP_UNKNOWN. It visits at most 2 * prod(u_k + 1) nodes,
 * so it always finishes for two views whose element counts multiply to at
 * most OPF_OVERLAP_WORK / 2 (and one view of n elements over r dims of size
 * > 1 with 2^r * n at most that).
 */
enum { OPF_MAX_TERMS = 2 * OPF_MAX_RANK + 1, OPF_OVERLAP_WORK = 1 << 14 };

typedef struct opf_knapsack {
    int32_t n;
    int64_t c[OPF_MAX_TERMS];         /* coefficients, > 0, distinct; sorted decreasing by opf_knapsack_solve */
    int64_t u[OPF_MAX_TERMS];         /* bounds, >= 1 */
    int64_t reach[OPF_MAX_TERMS + 1]; /* sum of c_j u_j over j >= k */
    int64_t gcd[OPF_MAX_TERMS + 1];   /* gcd of c_j over j >= k (0 past the last) */
    /* x_k must be r_k = (target / h_k) * inv_k mod m_k, with h_k = gcd(c_k, gcd[k+1]),
     * m_k = gcd[k+1] / h_k and inv_k the inverse of c_k / h_k modulo m_k. */
    int64_t h[OPF_MAX_TERMS], m[OPF_MAX_TERMS], inv[OPF_MAX_TERMS];
    int64_t target;
    int64_t *work; /* steps left, shared by the searches of one question */
    int overflow;  /* a sum left int64: the answer is OPF_OVERLAP_UNKNOWN */
} opf_knapsack;

static int64_t opf_gcd64(int64_t a, int64_t b) {
    while (b != 0) {
        int64_t r = a % b;
        a = b;
        b = r;
    }
    return a;
}

/* a * b mod m for 0 <= a, b < m < 2^62. */
static int64_t opf_mulmod(int64_t a, int64_t b, int64_t m) {
#if defined(__SIZEOF_INT128__)
    return (int64_t)((unsigned __int128)a * (unsigned __int128)b % (unsigned __int128)m);
#else
    int64_t r = 0;
    while (b > 0) {
        if (b & 1) {
            r = (r + a) % m;
        }
        a = (a + a) % m;
        b >>= 1;
    }
    return r;
#endif
}

/* The inverse of a modulo m, for gcd(a, m) == 1 and 1 < m < 2^62. */
static int64_t opf_inverse_mod(int64_t a, int64_t m) {
    int64_t r0 = m, r1 = a % m, t0 = 0, t1 = 1;
    while (r1 != 0) {
        int64_t q = r0 / r1, r2 = r0 - q * r1, t2 = t0 - q * t1;
        r0 = r1;
        r1 = r2;
        t0 = t1;
        t1 = t2;
    }
    return t0 < 0 ? t0 + m : t0;
}

/* Adds the term g * x, 0 <= x <= u, to the equation's left side; a
 * negative g is turned positive by substituting x -> u - x, which moves
 * |g| * u to the target. Terms of equal coefficient merge (x1 + x2 takes
 * every value of [0, u1 + u2]). */
static void opf_knapsack_add(opf_knapsack *p, int64_t g, int64_t u) {
    if (g == 0 || u == 0) {
        return;
    }
    /* Coefficients stay below 2^61 so that the modular arithmetic cannot overflow. */
    const int64_t limit = (int64_t)1 << 61;
    if (g <= -limit || g >= limit) {
        p->overflow = 1;
        return;
    }
    if (g < 0) {
        g = -g;
        int64_t moved;
        if (__builtin_mul_overflow(g, u, &moved) || __builtin_add_overflow(p->target, moved, &p->target)) {
            p->overflow = 1;
            return;
        }
    }
    for (int32_t k = 0; k < p->n; k++) {
        if (p->c[k] == g) {
            p->overflow |= __builtin_add_overflow(p->u[k], u, &p->u[k]);
            return;
        }
    }
    p->c[p->n] = g;
    p->u[p->n] = u;
    p->n++;
}

static opf_overlap opf_knapsack_search(opf_knapsack *p, int32_t k, int64_t target) {
    if ((*p->work)-- <= 0) {
        return OPF_OVERLAP_UNKNOWN;
    }
    if (target < 0 || target > p->reach[k]) {
        return OPF_DISJOINT;
    }
    if (k == p->n) {
        return OPF_OVERLAP; /* reach[n] == 0, so target == 0 */
    }
    if (target % p->gcd[k] != 0) {
        return OPF_DISJOINT;
    }
    const int64_t c = p->c[k], rest = p->reach[k + 1];
    int64_t lo = target > rest ? (target - rest - 1) / c + 1 : 0; /* ceil((target - rest) / c) */
    int64_t hi = target / c < p->u[k] ? target / c : p->u[k];
    int64_t step = 1;
    if (lo > hi) {
        return OPF_DISJOINT;
    }
    if (p->m[k] > 1) {
        /* target - c x must be a multiple of the smaller terms' gcd. */
        const int64_t m = p->m[k], r = opf_mulmod((target / p->h[k]) % m, p->inv[k], m);
        int64_t d = r - lo % m;
        d = d < 0 ? d + m : d;
        if (d > hi - lo) {
            return OPF_DISJOINT;
        }
        lo += d;
        step = m;
    }
    for (int64_t x = lo;; x += step) {
        opf_overlap r = opf_knapsack_search(p, k + 1, target - c * x);
        if (r != OPF_DISJOINT) {
            return r;
        }
        if (hi - x < step) {
            return OPF_DISJOINT;
        }
    }
}

static int opf_knapsack_cmp(const void *pa, const void *pb) {
    const int64_t *a = pa, *b = pb;
    return (a[0] < b[0]) - (a[0] > b[0]); /* decreasing coefficient */
}

static opf_overlap opf_knapsack_solve(opf_knapsack *p, int64_t *work) {
    if (p->overflow) {
        return OPF_OVERLAP_UNKNOWN;
    }
    int64_t terms[OPF_MAX_TERMS][2];
    for (int32_t k = 0; k < p->n; k++) {
        terms[k][0] = p->c[k];
        terms[k][1] = p->u[k];
    }
    qsort(terms, (size_t)p->n, sizeof terms[0], opf_knapsack_cmp);
    p->reach[p->n] = 0;
    p->gcd[p->n] = 0;
    for (int32_t k = p->n - 1; k >= 0; k--) {
        int64_t span;
        p->c[k] = terms[k][0];
        p->u[k] = terms[k][1];
        if (__builtin_mul_overflow(p->c[k], p->u[k], &span) ||
            __builtin_add_overflow(span, p->reach[k + 1], &p->reach[k])) {
            return OPF_OVERLAP_UNKNOWN;
        }
        p->gcd[k] = opf_gcd64(p->c[k], p->gcd[k + 1]);
        p->h[k] = p->gcd[k + 1] == 0 ? 1 : p->gcd[k];
        p->m[k] = p->gcd[k + 1] / p->h[k];
        p->inv[k] = p->m[k] > 1 ? opf_inverse_mod((p->c[k] / p->h[k]) % p->m[k], p->m[k]) : 0;
    }
    p->work = work;
    return opf_knapsack_search(p, 0, p->target);
}

/* Element offsets of a validated, non-empty t relative to element 0: the
 * lowest (<= 0) and the highest (>= 0). */
static void opf_tensor_reach(const opf_tensor *t, int64_t *down, int64_t *up) {
    *down = *up = 0;
    for (int32_t d = 0; d < t->ndim; d++) {
        if (t->shape[d] > 1) {
            int64_t reach = opf_tensor_stride(t, d) * (t->shape[d] - 1);
            *(reach < 0 ? down : up) += reach;
        }
    }
}

/* First and last byte of a validated, non-empty t. */
static void opf_tensor_bytes(const opf_tensor *t, uintptr_t *first, uintptr_t *last) {
    int64_t down, up;
    uintptr_t elem = opf_dtype_size(t->dtype), base = (uintptr_t)opf_tensor_base(t);
    opf_tensor_reach(t, &down, &up);
    *first = base - (uintptr_t)(-down) * elem;
    *last = base + (uintptr_t)up * elem + (elem - 1);
}

opf_overlap opf_tensors_overlap(const opf_tensor *a, const opf_tensor *b) {
    if (opf_tensor_numel(a) == 0 || opf_tensor_numel(b) == 0) {
        return OPF_DISJOINT;
    }
    uintptr_t a_first, a_last, b_first, b_last;
    opf_tensor_bytes(a, &a_first, &a_last);
    opf_tensor_bytes(b, &b_first, &b_last);
    if (a_last < b_first || b_last < a_first) {
        return OPF_DISJOINT;
    }
    /* The spans meet: is there an element of each at the same place? With
     * one element size and element-aligned bases (the usual case), in
     * elements: sum a_d i_d - sum b_d j_d == (base_b - base_a) / elem.
     * Otherwise in bytes, where element i of a and j of b share a byte when
     * A(i) - B(j) lies in [1 - ea, eb - 1]: a slack term t in [0, ea + eb - 2]
     * turns that into the equation A(i) - B(j) + t == eb - 1. */
    const int64_t ea = (int64_t)opf_dtype_size(a->dtype), eb = (int64_t)opf_dtype_size(b->dtype);
    const uintptr_t a_base = (uintptr_t)opf_tensor_base(a), b_base = (uintptr_t)opf_tensor_base(b);
    const uintptr_t distance = b_base >= a_base ? b_base - a_base : a_base - b_base;
    if (distance > (uintptr_t)INT64_MAX) {
        return OPF_OVERLAP_UNKNOWN;
    }
    const int64_t unit = ea == eb && distance % (uintptr_t)ea == 0 ? ea : 1;
    opf_knapsack p = {.target = (b_base >= a_base ? 1 : -1) * (int64_t)(distance / (uintptr_t)unit)};
    if (unit == 1) {
        p.target += eb - 1;
        opf_knapsack_add(&p, 1, ea + eb - 2);
    }
    for (int32_t d = 0; d < a->ndim; d++) {
        if (a->shape[d] > 1) {
            opf_knapsack_add(&p, opf_tensor_stride(a, d) * (ea / unit), a->shape[d] - 1);
        }
    }
    for (int32_t d = 0; d < b->ndim; d++) {
        if (b->shape[d] > 1) {
            opf_knapsack_add(&p, -opf_tensor_stride(b, d) * (eb / unit), b->shape[d] - 1);
        }
    }
    int64_t work = OPF_OVERLAP_WORK;
    return opf_knapsack_solve(&p, &work);
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

opf_overlap opf_tensor_self_overlaps(const opf_tensor *t) {
    opf_dim_extent dims[OPF_MAX_RANK];
    int32_t n = 0;
    if (opf_tensor_numel(t) == 0) {
        return OPF_DISJOINT;
    }
    for (int32_t d = 0; d < t->ndim; d++) {
        if (t->shape[d] > 1) {
            int64_t s = opf_tensor_stride(t, d);
            if (s == 0) {
                return OPF_OVERLAP;
            }
            dims[n++] = (opf_dim_extent){s < 0 ? -s : s, t->shape[d]};
        }
    }
    qsort(dims, (size_t)n, sizeof dims[0], opf_compare_extent);
    /* The common case: sorted by stride, each dim steps over everything the
     * smaller ones reach. */
    int64_t reach = 0; /* largest offset reachable with the dims seen so far */
    int nested = 1;
    for (int32_t i = 0; i < n && nested; i++) {
        nested = dims[i].stride > reach;
        reach += dims[i].stride * (dims[i].size - 1);
    }
    if (nested) {
        return OPF_DISJOINT;
    }
    /* Otherwise: two distinct indices i != j at one offset means a nonzero
     * z = i - j, |z_d| <= size_d - 1, with sum stride_d z_d == 0. Take k the
     * first dim (in this order) where z is nonzero, and z_k > 0 (else negate
     * z): stride_k (1 + x_k) + sum_{d > k} stride_d (x_d - u_d) == 0 with
     * x_k in [0, u_k - 1], x_d in [0, 2 u_d], u = size - 1. */
    opf_overlap answer = OPF_DISJOINT;
    int64_t work = OPF_OVERLAP_WORK; /* for all k together */
    for (int32_t k = 0; k < n && answer != OPF_OVERLAP; k++) {
        opf_knapsack p = {.target = -dims[k].stride};
        opf_knapsack_add(&p, dims[k].stride, dims[k].size - 2);
        for (int32_t d = k + 1; d < n; d++) {
            int64_t u = dims[d].size - 1, moved;
            p.overflow |=
                __builtin_mul_overflow(dims[d].stride, u, &moved) || __builtin_add_overflow(p.target, moved, &p.target);
            opf_knapsack_add(&p, dims[d].stride, 2 * u);
        }
        opf_overlap r = opf_knapsack_solve(&p, &work);
        answer = r == OPF_DISJOINT ? answer : r;
    }
    return answer;
}
