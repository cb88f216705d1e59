/*
 * fuzz_infer_shape.c — opf_op_infer_shape on the rows of the built-in table
 * with fuzzed input shapes: ranks in and out of range, unknown dims (-1) and
 * other negative dims, huge dims, NULL shapes, absent inputs, output indices
 * out of range, a NULL input list.
 *
 * Every shape array is allocated with exactly its rank's length and the
 * result with OPF_MAX_RANK entries, so that ASan sees any access past them.
 * For the rows it knows, the target checks the status and the inferred shape
 * against the shape rules of the README's table of ops, with an unknown dim
 * agreeing with anything and copied as -1 (in a broadcast: unknown unless
 * another input's size other than 1 fixes it). For any row: a successful call
 * wrote a rank in [0, OPF_MAX_RANK] and nothing past it.
 */
#include <string.h>

#include "fuzz.h"
#include "opforge.h"

#define BIT(status) (1u << (unsigned)(status))

enum { MAX_INPUTS = OPF_MAX_ARGS, CANARY = 0x5a5a5a5a };

typedef struct input {
    int present;
    opf_tensor t;
    int64_t *dims; /* exactly max(ndim, 0) entries, or NULL */
    int usable;    /* present, rank in range, dims readable */
} input;

/* A dim agreeing with another: equal, or either unknown. */
static int agree(int64_t a, int64_t b) { return a < 0 || b < 0 || a == b; }

static int same_shape(const input *a, const input *b) {
    if (a->t.ndim != b->t.ndim) {
        return 0;
    }
    for (int32_t d = 0; d < a->t.ndim; d++) {
        if (!agree(a->dims[d], b->dims[d])) {
            return 0;
        }
    }
    return 1;
}

/* The expected output: its rank, and for each dim the values it may take:
 * the dims of the inputs the rules equate with it (when one of them is
 * unknown, the contract does not say which one the library copies). */
typedef struct expected {
    int32_t ndim;
    int32_t count[OPF_MAX_RANK];
    int64_t value[OPF_MAX_RANK][3];
} expected;

static void expect_dim(expected *e, int32_t d, const input *a, int32_t ad, const input *b, int32_t bd) {
    e->count[d] = 0;
    e->value[d][e->count[d]++] = a->dims[ad];
    if (b != NULL && b->usable) {
        e->value[d][e->count[d]++] = b->dims[bd];
    }
}

/* Output like input a, each dim also possibly that of b (same shape). */
static void expect_like(expected *e, const input *a, const input *b) {
    e->ndim = a->t.ndim;
    for (int32_t d = 0; d < a->t.ndim; d++) {
        expect_dim(e, d, a, d, b, d);
    }
}

/* NumPy's broadcast of inputs in[0 .. n) (all usable), dims aligned from the
 * end: each dim of the result is the one size other than 1 its inputs have
 * (sizes other than 1 that differ: they do not broadcast), else unknown if
 * one of them is unknown, else 1. Returns 0 when they do not broadcast. */
static int expect_broadcast(expected *e, const input *in, int n) {
    int32_t rank = 0;
    for (int i = 0; i < n; i++) {
        rank = in[i].t.ndim > rank ? in[i].t.ndim : rank;
    }
    e->ndim = rank;
    for (int32_t k = 1; k <= rank; k++) {
        int64_t known = 1;
        int unknown = 0;
        for (int i = 0; i < n; i++) {
            int64_t v = k <= in[i].t.ndim ? in[i].dims[in[i].t.ndim - k] : 1;
            if (v < 0) {
                unknown = 1;
            } else if (v != 1 && known != 1 && v != known) {
                return 0;
            } else if (v != 1) {
                known = v;
            }
        }
        e->count[rank - k] = 1;
        e->value[rank - k][0] = known != 1 ? known : unknown ? -1 : 1;
    }
    return 1;
}

/* The README's shape rules: returns the statuses allowed (bits) and, when OK
 * is one, the expected shape. `in` are the inputs in the row's order. */
static unsigned model(const char *name, const input *in, int32_t output, expected *e) {
#define RANK(i, r) (!in[i].usable || in[i].t.ndim == (r))
#define DIM(i, d) (in[i].dims[d])
    if (strcmp(name, "relu") == 0 || strcmp(name, "scale") == 0) { /* y like x */
        if (output != 0) {
            return BIT(OPF_E_INVALID);
        }
        expect_like(e, &in[0], NULL);
        return BIT(OPF_OK);
    }
    if (strcmp(name, "relu_") == 0) { /* no output */
        return BIT(OPF_E_INVALID);
    }
    if (strcmp(name, "add") == 0 || strcmp(name, "mul") == 0) { /* a and b broadcast; y their broadcast */
        if (output != 0) {
            return BIT(OPF_E_INVALID);
        }
        return expect_broadcast(e, in, 2) ? BIT(OPF_OK) : BIT(OPF_E_SHAPE);
    }
    if (strcmp(name, "sum_to") == 0 || strcmp(name, "mul_grad") == 0) { /* inputs broadcast; output like the last */
        const int n = strcmp(name, "sum_to") == 0 ? 2 : 3;
        if (output != 0) {
            return BIT(OPF_E_INVALID);
        }
        if (!expect_broadcast(e, in, n)) {
            return BIT(OPF_E_SHAPE);
        }
        expect_like(e, &in[n - 1], NULL);
        return BIT(OPF_OK);
    }
    if (strcmp(name, "relu_grad") == 0) { /* inputs of one shape; output like them */
        if (output != 0) {
            return BIT(OPF_E_INVALID);
        }
        if (!same_shape(&in[0], &in[1])) {
            return BIT(OPF_E_SHAPE);
        }
        expect_like(e, &in[0], &in[1]);
        return BIT(OPF_OK);
    }
    if (strcmp(name, "dense") == 0) { /* x [N,K], w [K,M], b [M] or absent; y [N,M] */
        if (output != 0) {
            return BIT(OPF_E_INVALID);
        }
        if (!RANK(0, 2) || !RANK(1, 2) || !RANK(2, 1) || !agree(DIM(0, 1), DIM(1, 0)) ||
            (in[2].usable && !agree(DIM(2, 0), DIM(1, 1)))) {
            return BIT(OPF_E_SHAPE);
        }
        e->ndim = 2;
        expect_dim(e, 0, &in[0], 0, NULL, 0);
        expect_dim(e, 1, &in[1], 1, &in[2], 0);
        return BIT(OPF_OK);
    }
    if (strcmp(name, "dense_grad") == 0) { /* dy [N,M], x [N,K], w [K,M], y like dy; dx [N,K], dw [K,M], db [M] */
        if (output < 0 || output > 2) {
            return BIT(OPF_E_INVALID);
        }
        if (!RANK(0, 2) || !RANK(1, 2) || !RANK(2, 2) || !agree(DIM(1, 1), DIM(2, 0)) || !agree(DIM(0, 0), DIM(1, 0)) ||
            !agree(DIM(0, 1), DIM(2, 1)) || (in[3].usable && !same_shape(&in[3], &in[0]))) {
            return BIT(OPF_E_SHAPE);
        }
        const input *y = in[3].usable ? &in[3] : NULL;
        if (output == 0) { /* N from dy, x or y; K from x or w */
            e->ndim = 2;
            expect_dim(e, 0, &in[0], 0, &in[1], 0);
            if (y != NULL) {
                e->value[0][e->count[0]++] = y->dims[0];
            }
            expect_dim(e, 1, &in[1], 1, &in[2], 0);
        } else if (output == 1) { /* K from x or w; M from dy, w or y */
            e->ndim = 2;
            expect_dim(e, 0, &in[1], 1, &in[2], 0);
            expect_dim(e, 1, &in[0], 1, &in[2], 1);
            if (y != NULL) {
                e->value[1][e->count[1]++] = y->dims[1];
            }
        } else { /* M */
            e->ndim = 1;
            expect_dim(e, 0, &in[0], 1, &in[2], 1);
            if (y != NULL) {
                e->value[0][e->count[0]++] = y->dims[1];
            }
        }
        return BIT(OPF_OK);
    }
#undef RANK
#undef DIM
    return 0; /* a row this target does not know */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_reader r = {data, size, 0};
    const opf_op_table *table = opf_builtin_ops();
    const opf_op_def *op = table->ops[fuzz_pick(&r, (size_t)table->num_ops)];
    input in[MAX_INPUTS];
    const opf_tensor *ptrs[MAX_INPUTS] = {NULL};
    unsigned bad = 0;
    int odd = 0; /* a negative dim other than -1: unknown by the library, unspecified by the contract */
    memset(in, 0, sizeof in);
    for (int32_t i = 0; i < op->num_inputs; i++) {
        input *a = &in[i];
        int optional = (op->inputs[i].flags & OPF_ARG_OPTIONAL) != 0;
        a->present = optional ? fuzz_chance(&r, 160) : !fuzz_chance(&r, 4);
        if (!a->present) {
            bad |= optional ? 0 : BIT(OPF_E_INVALID);
            continue;
        }
        static const int32_t ranks[] = {2, 2, 1, 2, 0, 3, 1, 2, 4, 16, 17, -1, INT32_MAX, INT32_MIN};
        int32_t ndim = FUZZ_PICK(&r, ranks);
        a->t = opf_tensor_make(NULL, OPF_F32, ndim, NULL);
        if (ndim > 0 && ndim <= OPF_MAX_RANK + 1 && !fuzz_chance(&r, 6)) {
            a->dims = malloc(sizeof(int64_t) * (size_t)ndim);
            if (a->dims == NULL) {
                goto done;
            }
            for (int32_t d = 0; d < ndim; d++) {
                static const int64_t values[] = {3,  4,        2, 1, 0, 5, -1, 3, 4, 7, INT64_MAX, (int64_t)1 << 40,
                                                 -2, INT64_MIN};
                a->dims[d] = FUZZ_PICK(&r, values);
                odd |= a->dims[d] < -1;
            }
        }
        a->t.shape = a->dims;
        a->usable = ndim >= 0 && ndim <= OPF_MAX_RANK && (ndim == 0 || a->dims != NULL);
        bad |= a->usable ? 0 : BIT(OPF_E_SHAPE);
        ptrs[i] = &a->t;
    }
    int32_t output = fuzz_chance(&r, 16) ? (int32_t)fuzz_pick(&r, 5) - 2 : (int32_t)fuzz_pick(&r, 3);
    if (output < 0 || output >= op->num_outputs) {
        bad |= BIT(OPF_E_INVALID);
    }
    int all_absent = 1;
    for (int32_t i = 0; i < op->num_inputs; i++) {
        all_absent &= !in[i].present;
    }
    const int null_list = all_absent && fuzz_chance(&r, 128);

    /* The rules: with every input usable, the row's verdict for this
     * output; a wrong output index adds INVALID, and the shape checks'
     * verdict still counts (the contract does not order the two). */
    static const char *const known_rows[] = {"relu",  "relu_",      "relu_grad", "scale",  "add",
                                             "dense", "dense_grad", "mul",       "sum_to", "mul_grad"};
    int known = 0;
    for (size_t k = 0; k < sizeof known_rows / sizeof known_rows[0]; k++) {
        known |= strcmp(op->name, known_rows[k]) == 0;
    }
    expected want = {.ndim = -1};
    unsigned allowed = bad;
    if (bad == 0) {
        allowed = model(op->name, in, output, &want);
    } else if (bad == BIT(OPF_E_INVALID) && op->num_outputs > 0) {
        expected ignored;
        int inputs_fine = 1;
        for (int32_t i = 0; i < op->num_inputs; i++) {
            inputs_fine &= in[i].usable || (!in[i].present && (op->inputs[i].flags & OPF_ARG_OPTIONAL));
        }
        if (inputs_fine) {
            allowed |= model(op->name, in, 0, &ignored) & BIT(OPF_E_SHAPE);
        }
    }
    if (!known || odd) {
        allowed = ~0u; /* only memory safety and the output's bounds are checked */
    }

    int32_t *ndim = malloc(sizeof *ndim);
    int64_t *shape = malloc(sizeof(int64_t) * OPF_MAX_RANK);
    if (ndim == NULL || shape == NULL) {
        free(ndim);
        free(shape);
        goto done;
    }
    *ndim = CANARY;
    for (int d = 0; d < OPF_MAX_RANK; d++) {
        shape[d] = CANARY;
    }
    opf_status st = opf_op_infer_shape(op, null_list ? NULL : ptrs, output, ndim, shape);
    if (!(allowed & BIT(st))) {
        FUZZ_FAIL("%s, output %d: status %s (%s); allowed 0x%x", op->name, (int)output, opf_status_name(st),
                  opf_last_error(), allowed);
    }
    if (st == OPF_OK) {
        if (*ndim < 0 || *ndim > OPF_MAX_RANK) {
            FUZZ_FAIL("%s: inferred rank %d", op->name, (int)*ndim);
        }
        for (int32_t d = *ndim; d < OPF_MAX_RANK; d++) {
            if (shape[d] != CANARY) {
                FUZZ_FAIL("%s: wrote shape[%d] past the inferred rank %d", op->name, (int)d, (int)*ndim);
            }
        }
        if (known && !odd) {
            int same = *ndim == want.ndim;
            for (int32_t d = 0; same && d < want.ndim; d++) {
                int one = 0;
                for (int32_t k = 0; k < want.count[d]; k++) {
                    one |= shape[d] == want.value[d][k];
                }
                same = one;
            }
            if (!same) {
                FUZZ_FAIL("%s, output %d: inferred rank %d (dims %lld %lld), expected rank %d (dims %lld %lld)",
                          op->name, (int)output, (int)*ndim, (long long)(*ndim > 0 ? shape[0] : 0),
                          (long long)(*ndim > 1 ? shape[1] : 0), (int)want.ndim,
                          (long long)(want.ndim > 0 ? want.value[0][0] : 0),
                          (long long)(want.ndim > 1 ? want.value[1][0] : 0));
            }
        }
    } else if (opf_last_error()[0] == '\0') {
        FUZZ_FAIL("%s: status %s without a message", op->name, opf_status_name(st));
    }
    free(ndim);
    free(shape);
done:
    for (int32_t i = 0; i < op->num_inputs; i++) {
        free(in[i].dims);
    }
    return 0;
}
