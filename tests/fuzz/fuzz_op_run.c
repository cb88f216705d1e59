/*
 * fuzz_op_run.c — opf_op_run on the rows of the built-in table, with views a
 * framework could hand over: any rank, shape, dtype, device, data pointer,
 * byte offset and strides (zero, negative, huge, INT64_MIN), arguments that
 * alias each other in any way (interleaved, shifted, exactly), optional
 * arguments absent or required ones missing, attributes out of range.
 *
 * Every view either lies inside one arena (an exactly sized allocation, so
 * that ASan catches any access outside it) or is invalid by the contract;
 * calls that would be valid but address memory outside the arena are not
 * run. On every run:
 *   - the status is checked against a model of the contract written here
 *     from the documentation (tensor validity, the shapes of the known rows,
 *     attributes, and aliasing decided element by element by brute force):
 *     OPF_OK exactly when the model finds nothing wrong, else the status of
 *     one of the things it found;
 *   - a refused call must leave every byte of the arena as it was;
 *   - an accepted call of a known row must have written the reference values
 *     (computed here from a snapshot of the arena, with tests/c/reference.h)
 *     into its outputs, and changed no other byte. Dense's values are small
 *     dyadic numbers, so that every summation order gives the same result.
 *   - an accepted call of a row this file does not know (one added to the
 *     table later) must have changed no byte outside its written arguments.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "fuzz.h"
#include "opforge.h"
#include "reference.h"

enum {
    ARENA_BYTES = 1 << 16, /* 64 KiB: 16384 float32 or 8192 float64 elements */
    MAX_NUMEL = 1 << 13,   /* largest view the generator makes (elements) */
    /* Largest view that is run and checked. A mutated shape with zero
     * strides can name 2^59 elements inside the arena: valid, but a call
     * that would run for years and an index table no malloc can hold. */
    RUN_NUMEL = 1 << 16,
    MAX_CALL_ARGS = 2 * OPF_MAX_ARGS,
    SHAPE_CAP = OPF_MAX_RANK + 2, /* room for a rank-17 shape */
    /* The library decides overlap exactly for views whose element counts
     * multiply to at most this (tensor.c); beyond, it may refuse what it
     * cannot decide in bounded time. */
    EXACT_OVERLAP_LIMIT = 1 << 13
};

#define BIT(status) (1u << (unsigned)(status))
#define ALL_STATUSES 0x1FFu

typedef enum op_kind {
    OP_UNKNOWN,
    OP_RELU,
    OP_RELU_,
    OP_RELU_GRAD,
    OP_SCALE,
    OP_ADD,
    OP_DENSE,
    OP_DENSE_GRAD,
    OP_MUL,
    OP_SUM_TO,
    OP_MUL_GRAD
} op_kind;

static const char *const known_rows[] = {NULL,    "relu",       "relu_", "relu_grad", "scale",   "add",
                                         "dense", "dense_grad", "mul",   "sum_to",    "mul_grad"};

/* Rows whose inputs broadcast together (NumPy's rules); add and mul write
 * their broadcast, sum_to and mul_grad the sum down to their last input's
 * shape. */
static int broadcasting_row(op_kind kind) {
    return kind == OP_ADD || kind == OP_MUL || kind == OP_SUM_TO || kind == OP_MUL_GRAD;
}
static int summing_row(op_kind kind) { return kind == OP_SUM_TO || kind == OP_MUL_GRAD; }

typedef struct arg {
    const char *name;
    int is_output, written, optional;
    int present;
    opf_tensor t;
    int64_t shape[SHAPE_CAP];
    int64_t strides[SHAPE_CAP];
    /* What the model makes of it. */
    unsigned bad;        /* statuses its own validation can give (bits) */
    int readable;        /* rank in range and a shape to read */
    int valid, empty;    /* passes the tensor contract; has no element */
    int in_arena;        /* valid, non-empty, every element inside the arena, at most RUN_NUMEL */
    int64_t numel;       /* when valid */
    int64_t *where;      /* in_arena: arena element index of each element, in C order */
    int64_t first, last; /* in_arena: lowest and highest of those */
    int64_t dims_gt1;    /* dims of size > 1 */
} arg;

typedef struct call {
    const opf_op_def *op;
    op_kind kind;
    opf_dtype dtype;
    size_t elem;
    int ninputs, nargs; /* inputs first, then outputs */
    arg args[MAX_CALL_ARGS];
    int attrs_null;
    opf_attr_value attrs[OPF_MAX_ATTRS];
} call;

static unsigned char *arena;

/* ------------------------------------------------------------------------ */
/* Shapes                                                                    */
/* ------------------------------------------------------------------------ */

static int64_t small_dim(fuzz_reader *r) {
    static const int64_t dims[] = {0, 1, 1, 2, 2, 3, 3, 4, 5, 6, 7, 8, 9, 16, 17, 33};
    return FUZZ_PICK(r, dims);
}

static int64_t gemm_dim(fuzz_reader *r) {
    static const int64_t dims[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16, 17, 24, 31, 33, 65, 129, 257};
    return FUZZ_PICK(r, dims);
}

static void set_shape(arg *a, int32_t ndim, const int64_t *dims) {
    a->t.ndim = ndim;
    for (int32_t d = 0; d < ndim; d++) {
        a->shape[d] = dims[d];
    }
}

static int64_t product(int32_t ndim, const int64_t *dims) {
    int64_t n = 1;
    for (int32_t d = 0; d < ndim; d++) {
        n *= dims[d];
    }
    return n;
}

/* Shrinks the largest dims until the product is at most `cap`. */
static void cap_dims(int32_t ndim, int64_t *dims, int64_t cap) {
    while (product(ndim, dims) > cap) {
        int32_t big = 0;
        for (int32_t d = 1; d < ndim; d++) {
            big = dims[d] > dims[big] ? d : big;
        }
        dims[big] = dims[big] / 2;
    }
}

/* The shapes the row expects (for a known row), before mutation. */
static void intended_shapes(call *c, fuzz_reader *r) {
    int64_t base[OPF_MAX_RANK];
    static const int32_t ranks[] = {0, 1, 1, 2, 2, 2, 3, 3, 4, 5, 16};
    int32_t rank = FUZZ_PICK(r, ranks);
    for (int32_t d = 0; d < rank; d++) {
        base[d] = rank > 5 ? (fuzz_chance(r, 40) ? 2 : 1) : small_dim(r);
    }
    cap_dims(rank, base, 2048);
    int64_t n = gemm_dim(r), k = gemm_dim(r), m = gemm_dim(r);
    int64_t nk[2] = {n, k}, km[2] = {k, m}, nm[2] = {n, m};
    while (n * k > 2048 || k * m > 2048 || n * m > 2048) {
        n = n > 1 ? n / 2 : n;
        k = k > m ? k / 2 : k;
        m = m >= k ? m / 2 : m;
    }
    nk[0] = nm[0] = n;
    nk[1] = km[0] = k;
    km[1] = nm[1] = m;
    const int64_t mv[1] = {m};
    switch (c->kind) {
    case OP_RELU:
    case OP_RELU_:
    case OP_RELU_GRAD:
    case OP_SCALE:
        for (int i = 0; i < c->nargs; i++) {
            set_shape(&c->args[i], rank, base);
        }
        break;
    case OP_ADD:
    case OP_MUL:
    case OP_SUM_TO:
    case OP_MUL_GRAD: /* inputs: the base shape with leading dims dropped and dims set to 1 at random */
        for (int i = 0; i < c->ninputs; i++) {
            int32_t drop = fuzz_chance(r, 64) ? (int32_t)fuzz_pick(r, (size_t)rank + 1) : 0;
            int64_t dims[OPF_MAX_RANK];
            for (int32_t d = drop; d < rank; d++) {
                dims[d - drop] = fuzz_chance(r, 64) ? 1 : base[d];
            }
            set_shape(&c->args[i], rank - drop, dims);
        }
        if (summing_row(c->kind)) { /* the sum has the last input's shape */
            set_shape(&c->args[c->ninputs], c->args[c->ninputs - 1].t.ndim, c->args[c->ninputs - 1].shape);
        } else {
            set_shape(&c->args[c->ninputs], rank, base);
        }
        break;
    case OP_DENSE: /* x [N,K], w [K,M], b [M]; y [N,M] */
        set_shape(&c->args[0], 2, nk);
        set_shape(&c->args[1], 2, km);
        set_shape(&c->args[2], 1, mv);
        set_shape(&c->args[3], 2, nm);
        break;
    case OP_DENSE_GRAD: /* dy [N,M], x [N,K], w [K,M], y [N,M]; dx [N,K], dw [K,M], db [M] */
        set_shape(&c->args[0], 2, nm);
        set_shape(&c->args[1], 2, nk);
        set_shape(&c->args[2], 2, km);
        set_shape(&c->args[3], 2, nm);
        set_shape(&c->args[4], 2, nk);
        set_shape(&c->args[5], 2, km);
        set_shape(&c->args[6], 1, mv);
        break;
    case OP_UNKNOWN:
        for (int i = 0; i < c->nargs; i++) {
            int64_t dims[3] = {small_dim(r), small_dim(r), small_dim(r)};
            set_shape(&c->args[i], (int32_t)fuzz_pick(r, 4), dims);
        }
        break;
    }
}

/* Occasionally makes a shape wrong or hostile. */
static void mutate_shape(arg *a, fuzz_reader *r) {
    if (!fuzz_chance(r, 12)) {
        return;
    }
    int32_t nd = a->t.ndim;
    switch (fuzz_pick(r, 8)) {
    case 0: /* one dim off by one */
        if (nd > 0) {
            int32_t d = (int32_t)fuzz_pick(r, (size_t)nd);
            a->shape[d] += a->shape[d] > 0 && fuzz_chance(r, 128) ? -1 : 1;
        }
        break;
    case 1: /* one more dim */
        if (nd < OPF_MAX_RANK) {
            a->shape[nd] = fuzz_chance(r, 128) ? 1 : 2;
            a->t.ndim = nd + 1;
        }
        break;
    case 2: /* one dim fewer */ a->t.ndim = nd > 0 ? nd - 1 : 0; break;
    case 3: /* a negative dim */
        if (nd > 0) {
            a->shape[fuzz_pick(r, (size_t)nd)] = fuzz_chance(r, 128) ? -1 : INT64_MIN;
        }
        break;
    case 4: { /* dims whose product overflows int64, with or without a zero */
        static const int64_t huge[] = {70001, (int64_t)1 << 31, INT64_MAX, (int64_t)1 << 40};
        int32_t rank = 2 + (int32_t)fuzz_pick(r, 5);
        for (int32_t d = 0; d < rank; d++) {
            a->shape[d] = FUZZ_PICK(r, huge);
        }
        if (fuzz_chance(r, 160)) {
            a->shape[fuzz_pick(r, (size_t)rank)] = 0;
        }
        a->t.ndim = rank;
        break;
    }
    case 5: /* a rank out of range */
        for (int32_t d = 0; d < SHAPE_CAP; d++) {
            a->shape[d] = 1;
        }
        a->t.ndim = fuzz_chance(r, 128) ? OPF_MAX_RANK + 1 : -1;
        break;
    case 6: /* no shape */
        a->t.ndim = nd > 0 ? nd : 1;
        a->t.shape = NULL;
        return;
    default: /* a zero dim (empty) */
        if (nd > 0) {
            a->shape[fuzz_pick(r, (size_t)nd)] = 0;
        }
        break;
    }
}

/* ------------------------------------------------------------------------ */
/* Layout                                                                    */
/* ------------------------------------------------------------------------ */

static const int64_t hostile_strides[] = {
    INT64_MIN,           INT64_MAX,        INT64_MIN + 1,          (int64_t)1 << 62,
    -((int64_t)1 << 62), (int64_t)1 << 60, ((int64_t)1 << 61) - 1, -((int64_t)1 << 61),
    (int64_t)1 << 40,    1000003};

/* Element reach of a view with explicit strides, as 128-bit sums (hostile
 * strides included): lowest and highest element offset. */
static void reach128(const arg *a, __int128 *down, __int128 *up) {
    *down = *up = 0;
    for (int32_t d = 0; d < a->t.ndim; d++) {
        if (a->shape[d] > 1) {
            __int128 s = (__int128)a->strides[d] * (a->shape[d] - 1), cap = (__int128)1 << 100;
            *(s < 0 ? down : up) += s < -cap ? -cap : s > cap ? cap : s;
        }
    }
}

/* a * b, clamped to int64 (the generator's strides may be hostile already). */
static int64_t mul_clamped(int64_t a, int64_t b) {
    __int128 p = (__int128)a * b;
    return p > INT64_MAX ? INT64_MAX : p < INT64_MIN ? INT64_MIN : (int64_t)p;
}

/* C-contiguous strides (saturated at 2^62 for hostile shapes). */
static void contiguous_strides(int32_t ndim, const int64_t *shape, int64_t *strides) {
    const int64_t cap = (int64_t)1 << 62;
    int64_t s = 1;
    for (int32_t d = ndim - 1; d >= 0; d--) {
        strides[d] = s;
        int64_t n = shape[d] > 0 ? shape[d] : 1;
        s = s > cap / n ? cap : s * n;
    }
}

/* Strides, start and pointers of argument `i`, possibly related to an
 * earlier argument so that the two overlap, interleave or alias exactly. */
static void make_layout(call *c, int i, fuzz_reader *r, int64_t *starts) {
    arg *a = &c->args[i];
    const int32_t nd = a->t.ndim;
    const size_t elem = opf_dtype_size(a->t.dtype) ? opf_dtype_size(a->t.dtype) : 4;
    const int64_t cap = ARENA_BYTES / (int64_t)elem;
    int readable = nd >= 0 && nd <= OPF_MAX_RANK && a->t.shape != NULL;
    int64_t *st = a->strides;
    /* An earlier argument of the same rank to relate to, if any. */
    int j = -1;
    for (int k = (int)fuzz_pick(r, (size_t)(i + 1)); k >= 0 && k < i; k--) {
        if (c->args[k].present && c->args[k].t.ndim == nd && c->args[k].t.shape != NULL) {
            j = k;
            break;
        }
    }
    if (readable) {
        contiguous_strides(nd, a->shape, st);
    }
    a->t.strides = st;
    switch (readable ? fuzz_pick(r, 8) : 0) {
    case 0: a->t.strides = NULL; break;
    case 1: break;
    case 2: /* gaps and reversed dims */
        for (int32_t d = 0; d < nd; d++) {
            st[d] = mul_clamped(st[d], (fuzz_chance(r, 64) ? 2 : 1) * (fuzz_chance(r, 48) ? -1 : 1));
        }
        break;
    case 3: /* permuted (transposed) */
        for (int32_t d = nd - 1; d > 0; d--) {
            int32_t e = (int32_t)fuzz_pick(r, (size_t)d + 1);
            int64_t tmp = st[d];
            st[d] = st[e];
            st[e] = tmp;
        }
        break;
    case 4: /* small arbitrary strides */
        for (int32_t d = 0; d < nd; d++) {
            st[d] = (int64_t)fuzz_pick(r, 15) - 7;
        }
        break;
    case 5:
    case 6: /* another argument's strides, maybe doubled (interleaving) */
        if (j >= 0 && c->args[j].t.strides != NULL) {
            int64_t scale = fuzz_chance(r, 96) ? 2 : 1;
            for (int32_t d = 0; d < nd; d++) {
                st[d] = mul_clamped(c->args[j].t.strides[d], scale);
            }
        }
        break;
    default: /* broadcast: zero strides */
        for (int32_t d = 0; d < nd; d++) {
            st[d] = fuzz_chance(r, 96) ? 0 : st[d];
        }
        break;
    }
    if (readable && nd > 0 && fuzz_chance(r, 10)) {
        /* A hostile stride, usually on a dim of size 1 (where it is valid). */
        int32_t d = (int32_t)fuzz_pick(r, (size_t)nd);
        for (int32_t e = 0; e < nd && fuzz_chance(r, 200); e++) {
            d = a->shape[e] == 1 ? e : d;
        }
        if (a->t.strides == NULL) {
            a->t.strides = st;
        }
        st[d] = FUZZ_PICK(r, hostile_strides);
    }
    /* Where element 0 goes (in elements of this dtype). */
    __int128 down = 0, up = 0;
    if (readable && a->t.strides != NULL) {
        reach128(a, &down, &up);
    } else if (readable) {
        int64_t n = 1;
        for (int32_t d = 0; d < nd && n < cap; d++) {
            n = mul_clamped(n, a->shape[d] > 0 ? a->shape[d] : 1);
        }
        up = n - 1;
    }
    int64_t start;
    const int fits = -down + up < cap;
    const int64_t free_room = fits ? (int64_t)(cap - (-down + up)) : 1;
    switch (fuzz_pick(r, 4)) {
    case 2: start = j >= 0 ? starts[j] : -1; break;
    case 3: start = j >= 0 ? starts[j] + (int64_t)fuzz_pick(r, 9) - 4 : -1; break;
    default: start = -1; break;
    }
    if (start < 0 || !fits || start + down < 0 || start + up >= cap) {
        start = fits ? (int64_t)(-down) + (int64_t)(fuzz_u32(r) % (uint64_t)free_room) : (int64_t)fuzz_pick(r, 64);
    }
    starts[i] = start;
    const uint64_t offset = (uint64_t)start * elem;
    switch (fuzz_pick(r, 3)) {
    case 0:
        a->t.data = arena;
        a->t.byte_offset = offset;
        break;
    case 1:
        a->t.data = arena + offset;
        a->t.byte_offset = 0;
        break;
    default: {
        uint64_t split = offset == 0 ? 0 : (fuzz_u32(r) % (offset / elem + 1)) * elem;
        a->t.data = arena + split;
        a->t.byte_offset = offset - split;
        break;
    }
    }
    if (fuzz_chance(r, 10)) {
        switch (fuzz_pick(r, 5)) {
        case 0: /* misaligned */ a->t.byte_offset += 1 + fuzz_pick(r, elem - 1); break;
        case 1: /* data + byte_offset wraps around */ a->t.byte_offset = UINT64_MAX - fuzz_pick(r, 64) * elem; break;
        case 2: a->t.data = NULL; break;
        case 3: /* wild, page-aligned, far from the arena (fine for an empty view) */
            a->t.data = (void *)(uintptr_t)0x1000;
            a->t.byte_offset = (uint64_t)fuzz_pick(r, 4) * elem;
            break;
        default: /* a byte offset far away that does not wrap */
            a->t.byte_offset = (uint64_t)1 << (40 + fuzz_pick(r, 20));
            break;
        }
    }
}

/* ------------------------------------------------------------------------ */
/* The model                                                                 */
/* ------------------------------------------------------------------------ */

/* The contract for one tensor (opforge.h, README "Hostile input"), in 128-bit
 * arithmetic: the statuses its validation can give, and its extent. */
static void model_tensor(arg *a) {
    const opf_tensor *t = &a->t;
    a->bad = 0;
    a->valid = a->empty = a->in_arena = a->readable = 0;
    if (t->ndim < 0 || t->ndim > OPF_MAX_RANK) {
        a->bad |= BIT(OPF_E_SHAPE);
    } else if (t->ndim > 0 && t->shape == NULL) {
        a->bad |= BIT(OPF_E_INVALID);
    } else {
        a->readable = 1;
    }
    const int dtype_ok = t->dtype == OPF_F32 || t->dtype == OPF_F64;
    if (!dtype_ok) {
        a->bad |= BIT(OPF_E_DTYPE);
    }
    if (t->device.type != OPF_DEVICE_CPU) {
        a->bad |= BIT(OPF_E_DEVICE);
    }
    if (!a->readable || !dtype_ok) {
        return;
    }
    const __int128 elem = t->dtype == OPF_F32 ? 4 : 8, limit = INT64_MAX;
    __int128 bytes = elem;
    int negative = 0;
    a->numel = 1;
    a->dims_gt1 = 0;
    for (int32_t d = 0; d < t->ndim; d++) {
        negative |= t->shape[d] < 0;
        a->empty |= t->shape[d] == 0;
        if (t->shape[d] > 0) {
            bytes = bytes * t->shape[d] > limit ? limit + 1 : bytes * t->shape[d];
        }
        a->dims_gt1 += t->shape[d] > 1;
    }
    if (negative || bytes > limit) {
        a->bad |= BIT(OPF_E_SHAPE);
        return;
    }
    a->numel = a->empty ? 0 : (int64_t)(bytes / elem);
    if (a->empty) {
        a->valid = a->bad == 0;
        return;
    }
    if (t->data == NULL) {
        a->bad |= BIT(OPF_E_INVALID);
    }
    const __int128 base = (__int128)(uintptr_t)t->data + t->byte_offset;
    if (base > (__int128)UINTPTR_MAX || (uint64_t)base % (uint64_t)elem != 0) {
        a->bad |= BIT(OPF_E_LAYOUT);
    }
    __int128 down = 0, up = 0;
    for (int32_t d = 0; d < t->ndim; d++) {
        if (t->shape[d] > 1) {
            __int128 stride = t->strides != NULL ? t->strides[d] : (__int128)product(t->ndim - d - 1, t->shape + d + 1);
            __int128 reach = stride * (t->shape[d] - 1) * elem; /* below 2^127: |stride| <= 2^63, the rest <= 2^63 */
            __int128 size = reach < 0 ? -reach : reach;
            *(reach < 0 ? &down : &up) += size > limit ? limit + 1 : size; /* saturated: 16 dims cannot overflow */
        }
    }
    if (down + up + elem > limit) {
        a->bad |= BIT(OPF_E_SHAPE); /* the bytes it spans must fit in int64 */
    } else if (base - down < 0 || base + up + elem - 1 > (__int128)UINTPTR_MAX) {
        a->bad |= BIT(OPF_E_LAYOUT); /* its addresses must not wrap around */
    }
    a->valid = a->bad == 0;
    const __int128 lo = (__int128)(uintptr_t)arena, hi = lo + ARENA_BYTES;
    a->in_arena = a->valid && base - down >= lo && base + up + elem <= hi && a->numel <= RUN_NUMEL;
}

/* Arena element index of every element, in C order. */
static void enumerate(arg *a, size_t elem) {
    const opf_tensor *t = &a->t;
    a->where = malloc((size_t)a->numel * sizeof *a->where);
    if (a->where == NULL) {
        FUZZ_FAIL("out of memory");
    }
    int64_t strides[OPF_MAX_RANK], index[OPF_MAX_RANK] = {0};
    contiguous_strides(t->ndim, t->shape, strides);
    for (int32_t d = 0; t->strides != NULL && d < t->ndim; d++) {
        strides[d] = t->shape[d] > 1 ? t->strides[d] : 0;
    }
    const int64_t base = (int64_t)(((uintptr_t)t->data + t->byte_offset - (uintptr_t)arena) / elem);
    a->first = INT64_MAX;
    a->last = INT64_MIN;
    for (int64_t i = 0; i < a->numel; i++) {
        int64_t at = base;
        for (int32_t d = 0; d < t->ndim; d++) {
            at += index[d] * strides[d];
        }
        a->where[i] = at;
        a->first = at < a->first ? at : a->first;
        a->last = at > a->last ? at : a->last;
        for (int32_t d = t->ndim - 1; d >= 0 && ++index[d] == t->shape[d]; d--) {
            index[d] = 0;
        }
    }
}

/* The broadcast of the shapes of arguments a (rank na) and b into out;
 * 0 if they do not broadcast together. */
static int broadcast_shape(int32_t na, const int64_t *a, int32_t nb, const int64_t *b, int32_t *nout, int64_t *out) {
    *nout = na > nb ? na : nb;
    return ref_broadcast_shape(na, a, nb, b, out);
}

static int same_shape(const arg *a, const arg *b) {
    if (a->t.ndim != b->t.ndim) {
        return 0;
    }
    for (int32_t d = 0; d < a->t.ndim; d++) {
        if (a->shape[d] != b->shape[d]) {
            return 0;
        }
    }
    return 1;
}

/* Whether argument a (present, readable) has rank `rank` and, for each
 * d < rank with want[d] >= 0, dim d equal to want[d]. */
static int shape_is(const arg *a, int32_t rank, const int64_t *want) {
    if (a->t.ndim != rank) {
        return 0;
    }
    for (int32_t d = 0; d < rank; d++) {
        if (want[d] >= 0 && a->shape[d] != want[d]) {
            return 0;
        }
    }
    return 1;
}

/* The shape rules of the known rows, from the README's table of ops. Each
 * rule involving an absent or unreadable argument is skipped (its own
 * status covers it). Returns whether a rule is broken. */
static int shapes_wrong(const call *c) {
    const arg *A = c->args;
    int ok[MAX_CALL_ARGS];
    for (int i = 0; i < c->nargs; i++) {
        ok[i] = A[i].present && A[i].readable;
    }
#define BOTH(i, j) (ok[i] && ok[j])
    switch (c->kind) {
    case OP_RELU:
    case OP_SCALE: /* x; y like x */ return BOTH(0, 1) && !same_shape(&A[0], &A[1]);
    case OP_RELU_: return 0;
    case OP_RELU_GRAD: /* dy, x of one shape; dx like dy */
        return (BOTH(0, 1) && !same_shape(&A[0], &A[1])) || (BOTH(0, 2) && !same_shape(&A[0], &A[2]));
    case OP_ADD:
    case OP_MUL:
    case OP_SUM_TO:
    case OP_MUL_GRAD: { /* every pair of inputs broadcasts; the output is their broadcast, or the last one's shape */
        const int n = c->ninputs;
        int32_t nb = 0;
        int64_t b[OPF_MAX_RANK + 1];
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < i; j++) {
                int32_t nt;
                int64_t t[OPF_MAX_RANK + 1];
                if (BOTH(i, j) && !broadcast_shape(A[i].t.ndim, A[i].shape, A[j].t.ndim, A[j].shape, &nt, t)) {
                    return 1;
                }
            }
        }
        for (int i = 0; i < n; i++) {
            if (!ok[i]) {
                return 0; /* the output's shape is not known here */
            }
            int64_t t[OPF_MAX_RANK + 1];
            int32_t nt;
            broadcast_shape(nb, b, A[i].t.ndim, A[i].shape, &nt, t);
            nb = nt;
            memcpy(b, t, sizeof(int64_t) * (size_t)nt);
        }
        if (!ok[n]) {
            return 0;
        }
        return summing_row(c->kind) ? !same_shape(&A[n], &A[n - 1]) : !shape_is(&A[n], nb, b);
    }
    case OP_DENSE: { /* x [N,K], w [K,M], b [M]; y [N,M] */
        const int64_t any2[2] = {-1, -1}, any1[1] = {-1};
        if ((ok[0] && !shape_is(&A[0], 2, any2)) || (ok[1] && !shape_is(&A[1], 2, any2)) ||
            (ok[2] && !shape_is(&A[2], 1, any1))) {
            return 1;
        }
        if (BOTH(0, 1) && A[0].shape[1] != A[1].shape[0]) {
            return 1;
        }
        if (BOTH(1, 2) && A[2].shape[0] != A[1].shape[1]) {
            return 1;
        }
        if (BOTH(0, 1) && ok[3]) {
            const int64_t nm[2] = {A[0].shape[0], A[1].shape[1]};
            return !shape_is(&A[3], 2, nm);
        }
        return 0;
    }
    case OP_DENSE_GRAD: { /* dy [N,M], x [N,K], w [K,M], y like dy; dx like x, dw like w, db [M] */
        const int64_t any2[2] = {-1, -1};
        for (int i = 0; i < 3; i++) {
            if (ok[i] && !shape_is(&A[i], 2, any2)) {
                return 1;
            }
        }
        if ((BOTH(1, 2) && A[1].shape[1] != A[2].shape[0]) || (BOTH(0, 1) && A[0].shape[0] != A[1].shape[0]) ||
            (BOTH(0, 2) && A[0].shape[1] != A[2].shape[1]) || (BOTH(0, 3) && !same_shape(&A[3], &A[0]))) {
            return 1;
        }
        if ((BOTH(1, 4) && !same_shape(&A[4], &A[1])) || (BOTH(2, 5) && !same_shape(&A[5], &A[2]))) {
            return 1;
        }
        if (BOTH(0, 6)) {
            const int64_t m[1] = {A[0].shape[1]};
            return !shape_is(&A[6], 1, m);
        }
        return 0;
    }
    case OP_UNKNOWN: return 0;
    }
#undef BOTH
    return 0;
}

/* Rows whose output may be exactly an input (an output summed over
 * broadcast dims never may). */
static int elementwise_row(op_kind kind) {
    return kind == OP_RELU || kind == OP_RELU_ || kind == OP_RELU_GRAD || kind == OP_SCALE || kind == OP_ADD ||
           kind == OP_MUL;
}

/* Aliasing by brute force over arena element indices (every argument is
 * valid and in the arena or empty): returns the statuses the rules give
 * (LAYOUT or nothing); *maybe is set when the library may also refuse a
 * legal call as too costly to decide (views past EXACT_OVERLAP_LIMIT). */
static unsigned model_aliasing(const call *c, int *maybe) {
    unsigned char *count = calloc(ARENA_BYTES / c->elem, 1); /* per arena element (of the call's dtype) */
    unsigned bad = 0;
    if (count == NULL) {
        FUZZ_FAIL("out of memory");
    }
    *maybe = 0;
    for (int i = 0; i < c->nargs; i++) {
        const arg *w = &c->args[i];
        if (!w->present || !w->written || !w->in_arena) {
            continue;
        }
        /* Its elements must be distinct. */
        int repeats = 0;
        for (int64_t e = 0; e < w->numel; e++) {
            repeats |= count[w->where[e]]++ != 0;
        }
        for (int64_t e = 0; e < w->numel; e++) {
            count[w->where[e]] = 0;
        }
        bad |= repeats ? BIT(OPF_E_LAYOUT) : 0;
        if (!repeats && w->numel << (w->dims_gt1 < 20 ? w->dims_gt1 : 20) > EXACT_OVERLAP_LIMIT) {
            *maybe = 1;
        }
        /* And shared with no other argument, except exactly an input it
         * reads, in an elementwise row. */
        for (int64_t e = 0; e < w->numel; e++) {
            count[w->where[e]] = 1;
        }
        for (int j = 0; j < c->nargs; j++) {
            const arg *x = &c->args[j];
            if (j == i || !x->present || !x->in_arena) {
                continue;
            }
            int meet = 0;
            for (int64_t e = 0; e < x->numel && !meet; e++) {
                meet = count[x->where[e]] != 0;
            }
            int exact = !x->written && elementwise_row(c->kind) && same_shape(w, x) && w->numel == x->numel &&
                        memcmp(w->where, x->where, (size_t)w->numel * sizeof *w->where) == 0;
            if (meet && !exact) {
                bad |= BIT(OPF_E_LAYOUT);
            }
            int spans_meet = w->first <= x->last && x->first <= w->last;
            if (!meet && spans_meet && !exact && (double)w->numel * (double)x->numel > EXACT_OVERLAP_LIMIT) {
                *maybe = 1;
            }
        }
        for (int64_t e = 0; e < w->numel; e++) {
            count[w->where[e]] = 0;
        }
    }
    free(count);
    return bad;
}

/* The statuses the call may return (bits). Sets *runnable to 0 when a call
 * the model accepts would address memory outside the arena. */
static unsigned model_call(call *c, int *runnable) {
    unsigned bad = 0;
    const arg *first = NULL;
    *runnable = 1;
    for (int i = 0; i < c->nargs; i++) {
        arg *a = &c->args[i];
        if (!a->present) {
            bad |= a->optional ? 0 : BIT(OPF_E_INVALID);
            continue;
        }
        model_tensor(a);
        bad |= a->bad;
        if (first == NULL) {
            first = a;
        } else {
            bad |= a->t.dtype != first->t.dtype ? BIT(OPF_E_DTYPE) : 0;
            bad |= a->t.device.id != first->t.device.id ? BIT(OPF_E_DEVICE) : 0;
        }
    }
    if ((c->kind == OP_DENSE || c->kind == OP_DENSE_GRAD) && !c->attrs_null &&
        (c->attrs[0].i < 0 || c->attrs[0].i > 1)) {
        bad |= BIT(OPF_E_INVALID); /* activation: none or relu */
    }
    bad |= shapes_wrong(c) ? BIT(OPF_E_SHAPE) : 0;
    /* Found by the compute function, after every check of the row. */
    const unsigned late =
        c->kind == OP_DENSE_GRAD && !c->args[3].present && !c->attrs_null && c->attrs[0].i == OPF_ACT_RELU
            ? BIT(OPF_E_INVALID) /* relu needs dense's output y */
            : 0;
    if (c->kind == OP_UNKNOWN && bad == 0) {
        bad = ALL_STATUSES; /* the row's own rules are not modelled */
    }
    int all_in_arena = 1;
    for (int i = 0; i < c->nargs; i++) {
        const arg *a = &c->args[i];
        all_in_arena &= !a->present || a->empty || a->in_arena;
    }
    if (bad != 0 && !(bad & BIT(OPF_OK))) {
        return bad; /* refused before anything is read */
    }
    if (!all_in_arena) {
        *runnable = 0;
        return bad ? bad : late ? late : BIT(OPF_OK);
    }
    for (int i = 0; i < c->nargs; i++) {
        arg *a = &c->args[i];
        if (a->present && a->in_arena) {
            enumerate(a, c->elem);
        }
    }
    if (c->kind == OP_UNKNOWN) {
        return bad;
    }
    int maybe;
    bad |= model_aliasing(c, &maybe) | late;
    return (bad ? bad : BIT(OPF_OK)) | (maybe ? BIT(OPF_E_LAYOUT) : 0);
}

/* ------------------------------------------------------------------------ */
/* References                                                                */
/* ------------------------------------------------------------------------ */

static double load(const unsigned char *mem, int64_t at, size_t elem) {
    if (elem == 4) {
        float v;
        memcpy(&v, mem + at * 4, 4);
        return v;
    }
    double v;
    memcpy(&v, mem + at * 8, 8);
    return v;
}

static void store(unsigned char *mem, int64_t at, size_t elem, double v) {
    if (elem == 4) {
        float f = (float)v;
        memcpy(mem + at * 4, &f, 4);
    } else {
        memcpy(mem + at * 8, &v, 8);
    }
}

/* Elementwise rows, in the dtype (tests/c/reference.h). */
static void reference_eltwise(const call *c, const unsigned char *before, unsigned char *want) {
    const arg *A = c->args;
    const size_t e = c->elem;
    const int f32 = e == 4;
    float alpha32 = (float)(c->attrs_null ? 1.0 : c->attrs[0].f);
    double alpha64 = c->attrs_null ? 1.0 : c->attrs[0].f;
    const arg *out = c->kind == OP_RELU_ ? &A[0] : &A[c->ninputs];
    for (int64_t i = 0; i < out->numel; i++) {
        double x = load(before, A[0].where[i], e), v = 0.0;
        switch (c->kind) {
        case OP_RELU:
        case OP_RELU_: v = f32 ? ref_relu_f32((float)x) : ref_relu_f64(x); break;
        case OP_RELU_GRAD: {
            double xv = load(before, A[1].where[i], e);
            v = f32 ? ref_relu_grad_f32((float)x, (float)xv) : ref_relu_grad_f64(x, xv);
            break;
        }
        case OP_SCALE: v = f32 ? ref_scale_f32(alpha32, (float)x) : ref_scale_f64(alpha64, x); break;
        case OP_ADD: {
            double b = load(before, A[1].where[i], e);
            v = f32 ? ref_add_f32((float)x, (float)b) : ref_add_f64(x, b);
            break;
        }
        default: break;
        }
        store(want, out->where[i], e, v);
    }
}

/* Broadcasting rows, from NumPy's rules written out (tests/c/reference.h):
 * add and mul in the dtype; sum_to and mul_grad as exact sums (their values
 * are small dyadic numbers: every order of summation gives the result). */
static void reference_broadcast(const call *c, const unsigned char *before, unsigned char *want) {
    const arg *A = c->args, *out = &A[c->ninputs];
    const size_t e = c->elem;
    const int f32 = e == 4, n = c->ninputs;
    int32_t rank = 0;
    int64_t shape[OPF_MAX_RANK + 1];
    for (int i = 0; i < n; i++) {
        int32_t nt;
        int64_t t[OPF_MAX_RANK + 1];
        broadcast_shape(rank, shape, A[i].t.ndim, A[i].shape, &nt, t);
        rank = nt;
        memcpy(shape, t, sizeof(int64_t) * (size_t)nt);
    }
    const int64_t total = product(rank, shape);
    double *sums = summing_row(c->kind) ? calloc((size_t)(out->numel > 0 ? out->numel : 1), sizeof *sums) : NULL;
    if (summing_row(c->kind) && sums == NULL) {
        FUZZ_FAIL("out of memory");
    }
    for (int64_t i = 0; i < total; i++) {
        double v[3];
        for (int k = 0; k < n; k++) {
            v[k] = load(before, A[k].where[ref_broadcast_offset(rank, shape, i, A[k].t.ndim, A[k].shape)], e);
        }
        switch (c->kind) {
        case OP_ADD: store(want, out->where[i], e, f32 ? ref_add_f32((float)v[0], (float)v[1]) : v[0] + v[1]); break;
        case OP_MUL: store(want, out->where[i], e, f32 ? ref_mul_f32((float)v[0], (float)v[1]) : v[0] * v[1]); break;
        case OP_SUM_TO: sums[ref_broadcast_offset(rank, shape, i, out->t.ndim, out->shape)] += v[0]; break;
        default: sums[ref_broadcast_offset(rank, shape, i, out->t.ndim, out->shape)] += v[0] * v[1]; break;
        }
    }
    for (int64_t o = 0; sums != NULL && o < out->numel; o++) {
        store(want, out->where[o], e, sums[o]);
    }
    free(sums);
}

/* Element (i, j) of a 2-d argument. */
static double at2(const unsigned char *mem, const arg *a, int64_t i, int64_t j, size_t e) {
    return load(mem, a->where[i * a->shape[1] + j], e);
}

/* Dense rows: every value is a small dyadic number, so the double sums here
 * are exact and so is any order the library sums in. */
static void reference_dense(const call *c, const unsigned char *before, unsigned char *want) {
    const arg *A = c->args;
    const size_t e = c->elem;
    const int relu = !c->attrs_null && c->attrs[0].i == OPF_ACT_RELU;
    if (c->kind == OP_DENSE) {
        const arg *x = &A[0], *w = &A[1], *b = A[2].present ? &A[2] : NULL, *y = &A[3];
        int64_t n = x->shape[0], k = x->shape[1], m = w->shape[1];
        for (int64_t i = 0; i < n; i++) {
            for (int64_t j = 0; j < m; j++) {
                double acc = b != NULL ? load(before, b->where[j], e) : 0.0;
                for (int64_t p = 0; p < k; p++) {
                    acc += at2(before, x, i, p, e) * at2(before, w, p, j, e);
                }
                store(want, y->where[i * m + j], e, relu && acc < 0.0 ? 0.0 : acc);
            }
        }
        return;
    }
    const arg *dy = &A[0], *x = &A[1], *w = &A[2], *y = A[3].present ? &A[3] : NULL;
    const arg *dx = A[4].present ? &A[4] : NULL, *dw = A[5].present ? &A[5] : NULL, *db = A[6].present ? &A[6] : NULL;
    int64_t n = dy->shape[0], m = dy->shape[1], k = x->shape[1];
    double *dz = malloc((size_t)(n * m > 0 ? n * m : 1) * sizeof *dz);
    if (dz == NULL) {
        FUZZ_FAIL("out of memory");
    }
    for (int64_t i = 0; i < n; i++) {
        for (int64_t j = 0; j < m; j++) {
            double g = at2(before, dy, i, j, e);
            dz[i * m + j] = relu && !(at2(before, y, i, j, e) > 0.0) ? 0.0 : g;
        }
    }
    for (int64_t i = 0; dx != NULL && i < n; i++) { /* dx = dz w^T */
        for (int64_t p = 0; p < k; p++) {
            double acc = 0.0;
            for (int64_t j = 0; j < m; j++) {
                acc += dz[i * m + j] * at2(before, w, p, j, e);
            }
            store(want, dx->where[i * k + p], e, acc);
        }
    }
    for (int64_t p = 0; dw != NULL && p < k; p++) { /* dw = x^T dz */
        for (int64_t j = 0; j < m; j++) {
            double acc = 0.0;
            for (int64_t i = 0; i < n; i++) {
                acc += at2(before, x, i, p, e) * dz[i * m + j];
            }
            store(want, dw->where[p * m + j], e, acc);
        }
    }
    for (int64_t j = 0; db != NULL && j < m; j++) { /* db = column sums of dz */
        double acc = 0.0;
        for (int64_t i = 0; i < n; i++) {
            acc += dz[i * m + j];
        }
        store(want, db->where[j], e, acc);
    }
    free(dz);
}

/* ------------------------------------------------------------------------ */
/* The target                                                                */
/* ------------------------------------------------------------------------ */

static void fill_arena(fuzz_reader *r, opf_dtype dtype, int dense) {
    static const double general[] = {0.0,   -0.0,    1.0,  -1.0,   0.5,      -2.0,      3.0, -7.25,
                                     1e-40, -1e-310, 1e30, -1e300, INFINITY, -INFINITY, NAN, -NAN};
    static const double dyadic[] = {0, -0.0, 0.5, -0.5, 1, -1, 1.5, -1.5, 2, -2, 3, -3, 4, -4, 0.25, -0.25};
    const size_t elem = opf_dtype_size(dtype) == 8 ? 8 : 4;
    uint64_t state = fuzz_u64(r) | 1;
    for (int64_t i = 0; i < ARENA_BYTES / (int64_t)elem; i++) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        double v = (dense ? dyadic : general)[state >> 60];
        store(arena, i, elem, v);
    }
}

static int values_equal(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }

static void describe(const call *c, opf_status st, unsigned allowed) {
    fprintf(stderr, "op %s, dtype %s, status %s (%s); allowed:", c->op->name, opf_dtype_name(c->dtype),
            opf_status_name(st), opf_last_error());
    for (int s = 0; s <= OPF_E_INTERNAL; s++) {
        if (allowed & BIT(s)) {
            fprintf(stderr, " %s", opf_status_name((opf_status)s));
        }
    }
    fprintf(stderr, "\n");
    for (int i = 0; i < c->nargs; i++) {
        const arg *a = &c->args[i];
        fprintf(stderr, "  %s%s: ", a->name, a->written ? " (written)" : "");
        if (!a->present) {
            fprintf(stderr, "absent\n");
            continue;
        }
        fprintf(stderr, "%s ndim %d, data %p + %llu, shape", opf_dtype_name(a->t.dtype), (int)a->t.ndim, a->t.data,
                (unsigned long long)a->t.byte_offset);
        for (int32_t d = 0; a->t.shape != NULL && d < a->t.ndim && d < SHAPE_CAP; d++) {
            fprintf(stderr, " %lld", (long long)a->shape[d]);
        }
        fprintf(stderr, ", strides");
        for (int32_t d = 0; a->t.strides != NULL && a->t.shape != NULL && d < a->t.ndim && d < SHAPE_CAP; d++) {
            fprintf(stderr, " %lld", (long long)a->t.strides[d]);
        }
        fprintf(stderr, "%s; model: bad 0x%x valid %d empty %d in_arena %d\n", a->t.strides ? "" : " (none)", a->bad,
                a->valid, a->empty, a->in_arena);
    }
}

/* FUZZ_STATS=1 prints, at exit, how many runs of each row ended in each
 * status (and how many were not run): to see what a corpus exercises. */
static long stats[16][OPF_E_INTERNAL + 2];

static void print_stats(void) {
    const opf_op_table *table = opf_builtin_ops();
    for (int64_t i = 0; i < table->num_ops && i < 16; i++) {
        fprintf(stderr, "%-12s", table->ops[i]->name);
        for (int s = 0; s <= OPF_E_INTERNAL; s++) {
            fprintf(stderr, " %s %ld", opf_status_name((opf_status)s) + 4, stats[i][s]);
        }
        fprintf(stderr, " not-run %ld\n", stats[i][OPF_E_INTERNAL + 1]);
    }
}

static void count(const call *c, int outcome) {
    static int registered = 0;
    const char *flag = getenv("FUZZ_STATS");
    if (flag == NULL || flag[0] != '1') {
        return;
    }
    if (!registered) {
        registered = 1;
        atexit(print_stats);
    }
    const opf_op_table *table = opf_builtin_ops();
    for (int64_t i = 0; i < table->num_ops && i < 16; i++) {
        stats[i][outcome] += table->ops[i] == c->op;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_reader r = {data, size, 0};
    const opf_op_table *table = opf_builtin_ops();
    call c;
    memset(&c, 0, sizeof c);
    c.op = table->ops[fuzz_pick(&r, (size_t)table->num_ops)];
    c.kind = OP_UNKNOWN;
    for (int k = 1; k < (int)(sizeof known_rows / sizeof known_rows[0]); k++) {
        c.kind = strcmp(c.op->name, known_rows[k]) == 0 ? (op_kind)k : c.kind;
    }
    c.dtype = fuzz_chance(&r, 128) ? OPF_F32 : OPF_F64;
    c.elem = opf_dtype_size(c.dtype);
    c.ninputs = c.op->num_inputs;
    c.nargs = c.op->num_inputs + c.op->num_outputs;
    for (int i = 0; i < c.nargs; i++) {
        arg *a = &c.args[i];
        const opf_arg_def *def = i < c.ninputs ? &c.op->inputs[i] : &c.op->outputs[i - c.ninputs];
        a->name = def->name;
        a->is_output = i >= c.ninputs;
        a->written = a->is_output || (def->flags & OPF_ARG_MUTATED) != 0;
        a->optional = (def->flags & OPF_ARG_OPTIONAL) != 0;
        a->t = opf_tensor_make(NULL, c.dtype, 0, a->shape);
    }
    intended_shapes(&c, &r);
    arena = malloc(ARENA_BYTES);
    if (arena == NULL) {
        return 0;
    }
    int64_t starts[MAX_CALL_ARGS] = {0};
    for (int i = 0; i < c.nargs; i++) {
        arg *a = &c.args[i];
        a->present = a->optional ? fuzz_chance(&r, 200) : !fuzz_chance(&r, 3);
        if (!a->present) {
            continue;
        }
        mutate_shape(a, &r);
        if (fuzz_chance(&r, 6)) {
            static const opf_dtype others[] = {OPF_F32, OPF_F64, OPF_F16, OPF_BF16, OPF_DTYPE_INVALID};
            a->t.dtype = FUZZ_PICK(&r, others);
        }
        if (fuzz_chance(&r, 3)) {
            a->t.device.type = OPF_DEVICE_CUDA;
        }
        if (fuzz_chance(&r, 3)) {
            a->t.device.id = 1;
        }
        make_layout(&c, i, &r, starts);
    }
    c.attrs_null = fuzz_chance(&r, 64);
    opf_op_default_attrs(c.op, c.attrs);
    for (int i = 0; i < c.op->num_attrs && !c.attrs_null; i++) {
        if (c.op->attrs[i].type == OPF_ATTR_FLOAT) {
            static const double alphas[] = {1.0, -1.0, 0.0, 2.5, -0.5, 3.0, 1e300, -1e-300, NAN, INFINITY, 0.1};
            c.attrs[i].f = FUZZ_PICK(&r, alphas);
        } else {
            static const int64_t choices[] = {0, 1, 0, 1, 0, 1, 2, -1, INT64_MAX, INT64_MIN};
            c.attrs[i].i = FUZZ_PICK(&r, choices);
        }
    }
    /* The dtype the call runs in, if it runs: the first argument's. */
    for (int i = c.nargs - 1; i >= 0; i--) {
        if (c.args[i].present && (c.args[i].t.dtype == OPF_F32 || c.args[i].t.dtype == OPF_F64)) {
            c.dtype = c.args[i].t.dtype;
        }
    }
    c.elem = opf_dtype_size(c.dtype);
    /* Sums (dense, and the rows summed over broadcast dims) over small dyadic values: exact in any order. */
    int dense = c.kind == OP_DENSE || c.kind == OP_DENSE_GRAD || summing_row(c.kind);
    fill_arena(&r, c.dtype, dense);

    int runnable;
    const unsigned allowed = model_call(&c, &runnable);
    unsigned char *before = NULL, *want = NULL;
    if (!runnable) {
        count(&c, OPF_E_INTERNAL + 1);
        goto done;
    }
    before = malloc(ARENA_BYTES);
    want = malloc(ARENA_BYTES);
    if (before == NULL || want == NULL) {
        goto done;
    }
    memcpy(before, arena, ARENA_BYTES);
    const opf_tensor *ins[OPF_MAX_ARGS] = {NULL}, *outs[OPF_MAX_ARGS] = {NULL};
    for (int i = 0; i < c.nargs; i++) {
        const opf_tensor *t = c.args[i].present ? &c.args[i].t : NULL;
        if (i < c.ninputs) {
            ins[i] = t;
        } else {
            outs[i - c.ninputs] = t;
        }
    }
    opf_status st = opf_op_run(c.op, ins, outs, c.attrs_null ? NULL : c.attrs);
    count(&c, (int)st);
    if (!(allowed & BIT(st))) {
        describe(&c, st, allowed);
        FUZZ_FAIL("status %s is not one the contract allows", opf_status_name(st));
    }
    if ((st == OPF_OK) != (opf_last_error()[0] == '\0')) {
        describe(&c, st, allowed);
        FUZZ_FAIL("status %s with last error \"%s\"", opf_status_name(st), opf_last_error());
    }
    if (st != OPF_OK) {
        if (memcmp(arena, before, ARENA_BYTES) != 0) {
            describe(&c, st, allowed);
            FUZZ_FAIL("a refused call wrote to memory");
        }
        goto done;
    }
    /* Accepted: the expected arena is the snapshot with the outputs' elements replaced. */
    memcpy(want, before, ARENA_BYTES);
    unsigned char *written = calloc(ARENA_BYTES / c.elem, 1);
    if (written == NULL) {
        goto done;
    }
    for (int i = 0; i < c.nargs; i++) {
        const arg *a = &c.args[i];
        for (int64_t e = 0; a->present && a->written && a->in_arena && e < a->numel; e++) {
            written[a->where[e]] = 1;
        }
    }
    if (c.kind != OP_UNKNOWN) {
        if (c.kind == OP_DENSE || c.kind == OP_DENSE_GRAD) {
            reference_dense(&c, before, want);
        } else if (broadcasting_row(c.kind)) {
            reference_broadcast(&c, before, want);
        } else {
            reference_eltwise(&c, before, want);
        }
    }
    for (int64_t e = 0; e < ARENA_BYTES / (int64_t)c.elem; e++) {
        const unsigned char *got_bytes = arena + e * (int64_t)c.elem, *want_bytes = want + e * (int64_t)c.elem;
        if (!written[e] ? memcmp(got_bytes, want_bytes, c.elem) != 0
                        : c.kind != OP_UNKNOWN && !values_equal(load(arena, e, c.elem), load(want, e, c.elem))) {
            describe(&c, st, allowed);
            FUZZ_FAIL("element %lld of the arena (%s an output): got %.17g, want %.17g", (long long)e,
                      written[e] ? "in" : "not in", load(arena, e, c.elem), load(want, e, c.elem));
        }
    }
    free(written);
done:
    for (int i = 0; i < c.nargs; i++) {
        free(c.args[i].where);
    }
    free(want);
    free(before);
    free(arena);
    arena = NULL;
    return 0;
}
