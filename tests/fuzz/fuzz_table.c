/*
 * fuzz_table.c — opf_op_table_validate on tables built from the input: rows
 * with counts in and out of range (9 inputs, -1 checks, ...), missing or
 * duplicate names, unknown kinds and types, shape checks, shape rules and
 * gradient rules naming indices and rows that do not exist.
 *
 * Each row is a separate allocation, so that ASan sees reads past one. The
 * target compares the verdict with its own validator, written from the
 * documented rules (include/opforge.h: the limits and what each field may
 * hold; README "Hostile input": what a row run by the elementwise or the row
 * engine must tie together). Then, for a table it accepts, it runs every
 * row: shape inference, and opf_op_run on small tensors of fuzzed shapes and
 * layouts, each in its own exactly sized buffer. A raw compute function
 * checks that it is called only with what the row declared; elementwise and
 * row kernels read and write every element the engine hands them, so that
 * ASan sees an engine walking a tensor with the wrong shape. A validated row
 * must be safe to run, whatever the tensors.
 *
 * Values outside the known kinds are drawn far from them (-1, 1000), so that
 * kinds added to the header later do not make the model wrong.
 */
#include <string.h>

#include "fuzz.h"
#include "opforge.h"

enum { MAX_ROWS = 5, BUFFER_ELEMS = 64 };

static const char *const row_names[] = {"a", "b", "c", "d_1", NULL, "", "B", "e f"};
static const char *const arg_names[] = {"x", "y", "z", NULL, "", "X", "_t"};

/* A row with room for its kernels. */
typedef struct fuzz_row {
    opf_op_def def;
    opf_eltwise_kernel eltwise;
    opf_row_kernel row;
} fuzz_row;

static const opf_op_def *current_row; /* the row whose compute may be called */
static int compute_calls;

/* Reads every input element and writes every output element it is given. */
static void touch(const void *in, int64_t in_len, void *out, int64_t out_len, size_t elem) {
    volatile unsigned char sink = 0;
    for (int64_t i = 0; in != NULL && i < in_len * (int64_t)elem; i++) {
        sink ^= ((const unsigned char *)in)[i];
    }
    for (int64_t i = 0; out != NULL && i < out_len * (int64_t)elem; i++) {
        ((unsigned char *)out)[i] = (unsigned char)(sink + 1);
    }
}

static void eltwise_kernel(int64_t n, const void *const *in, void *const *out, const opf_attr_value *attrs, size_t e) {
    (void)attrs;
    const opf_op_def *op = current_row;
    compute_calls++;
    for (int32_t i = 0; i < op->eltwise->num_inputs; i++) {
        touch(in[i], n, NULL, 0, e);
    }
    for (int32_t j = 0; j < op->eltwise->num_outputs; j++) {
        touch(NULL, 0, out[j], n, e);
    }
}

static void eltwise_f32(int64_t n, const void *const *in, void *const *out, const opf_attr_value *attrs) {
    eltwise_kernel(n, in, out, attrs, 4);
}

static void eltwise_f64(int64_t n, const void *const *in, void *const *out, const opf_attr_value *attrs) {
    eltwise_kernel(n, in, out, attrs, 8);
}

static void row_kernel(const opf_row_args *args, size_t e) {
    const opf_op_def *op = current_row;
    compute_calls++;
    for (int32_t i = 0; i < op->row->num_inputs; i++) {
        touch(args->in[i], args->in_len[i], NULL, 0, e);
    }
    for (int32_t j = 0; j < op->row->num_outputs; j++) {
        touch(NULL, 0, args->out[j], args->out_len[j], e);
    }
}

static void row_f32(const opf_row_args *args) { row_kernel(args, 4); }
static void row_f64(const opf_row_args *args) { row_kernel(args, 8); }

/* FUZZ_STATS=1 prints, at exit, how many tables were accepted and how many
 * row runs got to the kernel. */
static long tables[2], runs[2];

static void print_stats(void) {
    fprintf(stderr, "tables: %ld refused, %ld accepted; row runs: %ld refused, %ld computed\n", tables[0], tables[1],
            runs[0], runs[1]);
}

static void count(long *counter) {
    static int registered = 0;
    const char *flag = getenv("FUZZ_STATS");
    if (flag != NULL && flag[0] == '1') {
        if (!registered) {
            registered = 1;
            atexit(print_stats);
        }
        ++*counter;
    }
}

/* Checks what opf_op_run hands a validated row's compute function. */
static opf_status checking_compute(const opf_tensor *const *in, const opf_tensor *const *out,
                                   const opf_attr_value *attrs) {
    const opf_op_def *op = current_row;
    compute_calls++;
    if (in == NULL || out == NULL || attrs == NULL) {
        FUZZ_FAIL("%s: compute got a NULL list", op->name);
    }
    for (int32_t i = 0; i < op->num_inputs; i++) {
        if (in[i] == NULL && !(op->inputs[i].flags & OPF_ARG_OPTIONAL)) {
            FUZZ_FAIL("%s: compute got NULL for required input %d", op->name, (int)i);
        }
    }
    for (int32_t o = 0; o < op->num_outputs; o++) {
        if (out[o] == NULL && !(op->outputs[o].flags & OPF_ARG_OPTIONAL)) {
            FUZZ_FAIL("%s: compute got NULL for required output %d", op->name, (int)o);
        }
    }
    for (int32_t a = 0; a < op->num_attrs; a++) {
        if (op->attrs[a].type == OPF_ATTR_ENUM &&
            (attrs[a].i < 0 || attrs[a].i >= OPF_MAX_CHOICES || op->attrs[a].choices[attrs[a].i] == NULL)) {
            FUZZ_FAIL("%s: compute got choice %lld of enum attr %d", op->name, (long long)attrs[a].i, (int)a);
        }
    }
    return OPF_OK;
}

static int in_range(int32_t v, int32_t n) { return v >= 0 && v < n; }

static int32_t count_value(fuzz_reader *r) {
    static const int32_t counts[] = {1, 0, 2, 1, 3, 2, 8, 9, -1, INT32_MAX, INT32_MIN};
    return FUZZ_PICK(r, counts);
}

static int32_t index_value(fuzz_reader *r) {
    static const int32_t indices[] = {0, 1, 0, 2, 1, -1, 7, 8, 9, INT32_MIN};
    return FUZZ_PICK(r, indices);
}

static int32_t small_value(fuzz_reader *r) {
    static const int32_t values[] = {0, 1, 2, 1, 0, 3, -1, 16, 17, INT32_MIN};
    return FUZZ_PICK(r, values);
}

static void make_row(fuzz_row *fr, fuzz_reader *r) {
    opf_op_def *op = &fr->def;
    memset(fr, 0, sizeof *fr);
    op->name = fuzz_chance(r, 24) ? FUZZ_PICK(r, row_names) : row_names[fuzz_pick(r, 4)];
    static const uint32_t dtypes[] = {OPF_DTYPES_F32 | OPF_DTYPES_F64, OPF_DTYPES_F32, OPF_DTYPES_F64, 0, 4, 7};
    op->dtypes = fuzz_chance(r, 16) ? FUZZ_PICK(r, dtypes) : dtypes[0];
    op->flags = fuzz_chance(r, 128) ? OPF_OP_ELEMENTWISE : 0;
    op->num_inputs = count_value(r);
    op->num_outputs = count_value(r);
    for (int i = 0; i < OPF_MAX_ARGS; i++) {
        static const uint32_t in_flags[] = {0,
                                            0,
                                            OPF_ARG_OPTIONAL,
                                            OPF_ARG_MUTATED,
                                            OPF_ARG_BATCHED,
                                            OPF_ARG_BATCHED,
                                            OPF_ARG_BATCHED | OPF_ARG_OPTIONAL};
        static const uint32_t out_flags[] = {0, 0, OPF_ARG_OPTIONAL, OPF_ARG_BATCHED, OPF_ARG_BATCHED};
        op->inputs[i].name = fuzz_chance(r, 12) ? FUZZ_PICK(r, arg_names) : "in";
        op->inputs[i].flags = FUZZ_PICK(r, in_flags);
        op->inputs[i].core_dims = small_value(r);
        op->outputs[i].name = fuzz_chance(r, 12) ? FUZZ_PICK(r, arg_names) : "out";
        op->outputs[i].flags = FUZZ_PICK(r, out_flags);
        op->outputs[i].core_dims = small_value(r);
    }
    /* How it computes: mostly exactly one kind, with kernels counted like the row. */
    switch (fuzz_pick(r, 8)) {
    case 0: break; /* none */
    case 1:        /* two */
        op->compute = checking_compute;
        op->eltwise = &fr->eltwise;
        break;
    case 2:
    case 3: op->eltwise = &fr->eltwise; break;
    case 4:
    case 5: op->row = &fr->row; break;
    default: op->compute = checking_compute; break;
    }
    int32_t mutated = 0;
    for (int32_t i = 0; i < op->num_inputs && i < OPF_MAX_ARGS && i >= 0; i++) {
        mutated += (op->inputs[i].flags & OPF_ARG_MUTATED) != 0;
    }
    fr->eltwise.num_inputs = fuzz_chance(r, 24) ? count_value(r) : op->num_inputs;
    fr->eltwise.num_outputs = fuzz_chance(r, 24) ? count_value(r) : op->num_outputs > 0 ? op->num_outputs : mutated;
    fr->eltwise.f32[0] = eltwise_f32;
    fr->eltwise.f64[0] = eltwise_f64;
    fr->row.num_inputs = fuzz_chance(r, 24) ? count_value(r) : op->num_inputs;
    fr->row.num_outputs = fuzz_chance(r, 24) ? count_value(r) : op->num_outputs;
    fr->row.f32[0] = row_f32;
    fr->row.f64[0] = row_f64;
    op->num_attrs = fuzz_chance(r, 64) ? count_value(r) : 0;
    for (int i = 0; i < OPF_MAX_ATTRS; i++) {
        opf_attr_def *a = &op->attrs[i];
        static const opf_attr_type types[] = {OPF_ATTR_FLOAT, OPF_ATTR_INT, OPF_ATTR_ENUM, (opf_attr_type)0,
                                              (opf_attr_type)1000};
        a->name = fuzz_chance(r, 12) ? FUZZ_PICK(r, arg_names) : "attr";
        a->type = FUZZ_PICK(r, types);
        int32_t choices = (int32_t)fuzz_pick(r, OPF_MAX_CHOICES + 1);
        for (int32_t c = 0; c < choices; c++) {
            a->choices[c] = "choice";
        }
        a->default_value.i = a->type == OPF_ATTR_FLOAT ? 0 : index_value(r);
    }
    op->num_checks = fuzz_chance(r, 200) ? count_value(r) : 0;
    for (int i = 0; i < OPF_MAX_CHECKS; i++) {
        opf_check *c = &op->checks[i];
        static const opf_check_kind kinds[] = {OPF_CHECK_SAME_SHAPE, OPF_CHECK_RANK,       OPF_CHECK_DIM_EQ,
                                               OPF_CHECK_MIN_RANK,   OPF_CHECK_DIM_IS,     OPF_CHECK_BATCH_EQ,
                                               OPF_CHECK_BATCH_EQ,   OPF_CHECK_SAME_SHAPE, (opf_check_kind)1000,
                                               OPF_CHECK_NONE,       OPF_CHECK_BROADCAST,  OPF_CHECK_BROADCAST};
        static const int32_t dims[] = {0, 1, -1, 2, -2, 5, 17, INT32_MIN};
        c->kind = FUZZ_PICK(r, kinds);
        c->a = index_value(r);
        c->b = index_value(r);
        c->a_dim = FUZZ_PICK(r, dims);
        c->b_dim = FUZZ_PICK(r, dims);
        c->rank = small_value(r);
    }
    for (int o = 0; o < OPF_MAX_ARGS; o++) {
        opf_shape_rule *sr = &op->output_shapes[o];
        static const opf_shape_kind kinds[] = {OPF_SHAPE_LIKE,      OPF_SHAPE_LIKE,  OPF_SHAPE_DIMS,
                                               OPF_SHAPE_BATCH,     OPF_SHAPE_NONE,  (opf_shape_kind)1000,
                                               OPF_SHAPE_BROADCAST, OPF_SHAPE_SUM_TO};
        static const int32_t ranks[] = {1, 2, 0, 4, 5, -1};
        static const int32_t dims[] = {0, 1, -1, -2, 3, INT32_MAX};
        sr->kind = FUZZ_PICK(r, kinds);
        sr->like = index_value(r);
        sr->rank = FUZZ_PICK(r, ranks);
        sr->drop = small_value(r);
        for (int d = 0; d < OPF_MAX_RULE_RANK; d++) {
            sr->dims[d].input = index_value(r);
            sr->dims[d].dim = FUZZ_PICK(r, dims);
        }
    }
    op->num_grads = fuzz_chance(r, 128) ? count_value(r) : 0;
    for (int g = 0; g < OPF_MAX_GRADS; g++) {
        opf_grad_def *rule = &op->grads[g];
        rule->op = fuzz_chance(r, 64) ? NULL : FUZZ_PICK(r, row_names);
        rule->num_sources = count_value(r);
        rule->num_produces = count_value(r);
        for (int i = 0; i < OPF_MAX_ARGS; i++) {
            static const opf_grad_source_kind kinds[] = {OPF_FROM_GRAD, OPF_FROM_INPUT, OPF_FROM_OUTPUT, OPF_FROM_NONE,
                                                         (opf_grad_source_kind)1000};
            rule->sources[i].kind = FUZZ_PICK(r, kinds);
            rule->sources[i].index = index_value(r);
            rule->produces[i] = fuzz_chance(r, 40) ? -1 : index_value(r);
        }
    }
}

/* --- the model: the documented rules, checked independently -------------- */

/* lower_snake_case: [a-z_][a-z0-9_]* */
static int identifier(const char *name) {
    if (name == NULL || name[0] == '\0' || (name[0] >= '0' && name[0] <= '9')) {
        return 0;
    }
    for (const char *c = name; *c != '\0'; c++) {
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_')) {
            return 0;
        }
    }
    return 1;
}

static int args_ok(int32_t count, const opf_arg_def *args) {
    if (count < 0 || count > OPF_MAX_ARGS) {
        return 0;
    }
    for (int32_t i = 0; i < count; i++) {
        if (!identifier(args[i].name) ||
            ((args[i].flags & OPF_ARG_BATCHED) && (args[i].core_dims < 0 || args[i].core_dims > OPF_MAX_RANK))) {
            return 0;
        }
    }
    return 1;
}

static const opf_op_def *find_row(const opf_op_table *t, const char *name) {
    for (int64_t i = 0; i < t->num_ops; i++) {
        if (t->ops[i] != NULL && t->ops[i]->name != NULL && strcmp(t->ops[i]->name, name) == 0) {
            return t->ops[i];
        }
    }
    return NULL;
}

static int check_ok(const opf_check *c, int32_t ni) {
    switch (c->kind) {
    /* b names an input for every kind but RANK, even those that do not compare with it (the runner looks at it). */
    case OPF_CHECK_RANK: return in_range(c->a, ni) && c->rank >= 0 && c->rank <= OPF_MAX_RANK;
    case OPF_CHECK_MIN_RANK: return in_range(c->a, ni) && in_range(c->b, ni) && c->rank >= 0 && c->rank <= OPF_MAX_RANK;
    case OPF_CHECK_SAME_SHAPE:
    case OPF_CHECK_BROADCAST:
    case OPF_CHECK_DIM_EQ: return in_range(c->a, ni) && in_range(c->b, ni);
    case OPF_CHECK_DIM_IS: return in_range(c->a, ni) && in_range(c->b, ni) && c->rank >= 0;
    case OPF_CHECK_BATCH_EQ:
        return in_range(c->a, ni) && in_range(c->b, ni) && c->a_dim >= 0 && c->a_dim <= OPF_MAX_RANK && c->b_dim >= 0 &&
               c->b_dim <= OPF_MAX_RANK;
    default: return 0;
    }
}

static int rule_ok(const opf_shape_rule *sr, int32_t ni) {
    if (sr->kind == OPF_SHAPE_LIKE || sr->kind == OPF_SHAPE_SUM_TO) {
        return in_range(sr->like, ni);
    }
    if (sr->kind == OPF_SHAPE_BROADCAST) { /* 1 to OPF_MAX_RULE_RANK distinct inputs */
        if (sr->rank < 1 || sr->rank > OPF_MAX_RULE_RANK) {
            return 0;
        }
        for (int32_t d = 0; d < sr->rank; d++) {
            for (int32_t e = 0; e < d; e++) {
                if (sr->dims[e].input == sr->dims[d].input) {
                    return 0;
                }
            }
            if (!in_range(sr->dims[d].input, ni)) {
                return 0;
            }
        }
        return 1;
    }
    if (sr->kind != OPF_SHAPE_DIMS && sr->kind != OPF_SHAPE_BATCH) {
        return 0;
    }
    if (sr->rank < 0 || sr->rank > OPF_MAX_RULE_RANK) {
        return 0;
    }
    if (sr->kind == OPF_SHAPE_BATCH && (!in_range(sr->like, ni) || sr->drop < 0 || sr->drop > OPF_MAX_RANK)) {
        return 0;
    }
    for (int32_t d = 0; d < sr->rank; d++) {
        const opf_dim_ref ref = sr->dims[d];
        if (!in_range(ref.input, ni) && !(ref.input == -1 && ref.dim >= 0)) {
            return 0;
        }
    }
    return 1;
}

/* Whether some check of op makes inputs i and j have the same shape (same = 1),
 * the same leading dims as batched inputs (same = 0), or shapes that
 * broadcast together or are equal (same = 2). */
static int linked(const opf_op_def *op, int32_t i, int32_t j, int same) {
    for (int32_t k = 0; k < op->num_checks; k++) {
        const opf_check *c = &op->checks[k];
        int pair = (c->a == i && c->b == j) || (c->a == j && c->b == i);
        if (!pair) {
            continue;
        }
        if (c->kind == OPF_CHECK_SAME_SHAPE && (same || op->inputs[i].core_dims == op->inputs[j].core_dims)) {
            return 1;
        }
        if (same == 2 && c->kind == OPF_CHECK_BROADCAST) {
            return 1;
        }
        if (!same && c->kind == OPF_CHECK_BATCH_EQ && c->a_dim == op->inputs[c->a].core_dims &&
            c->b_dim == op->inputs[c->b].core_dims) {
            return 1;
        }
    }
    return 0;
}

/* Inputs `want` all tied to input 0 by checks that always run together:
 * through required inputs, an optional one by a direct link to a tied
 * required one (a fixpoint over the links). */
static int all_tied(const opf_op_def *op, const int *want, int same) {
    int tied[OPF_MAX_ARGS] = {1};
    for (int round = 0; round < OPF_MAX_ARGS; round++) {
        for (int32_t i = 1; i < op->num_inputs; i++) {
            for (int32_t j = 0; j < op->num_inputs; j++) {
                if (want[i] && tied[j] && !(op->inputs[j].flags & OPF_ARG_OPTIONAL) && linked(op, i, j, same)) {
                    tied[i] = 1;
                }
            }
        }
    }
    for (int32_t i = 0; i < op->num_inputs; i++) {
        if (want[i] && !tied[i]) {
            return 0;
        }
    }
    return 1;
}

/* What the engines rely on (README, "Hostile input"). */
static int engine_ok(const opf_op_def *op) {
    int32_t mutated = 0;
    int want[OPF_MAX_ARGS] = {0};
    for (int32_t i = 0; i < op->num_inputs; i++) {
        mutated += (op->inputs[i].flags & OPF_ARG_MUTATED) != 0;
    }
    if (op->eltwise != NULL) {
        int32_t writes = op->num_outputs > 0 ? op->num_outputs : mutated;
        if (op->eltwise->num_inputs != op->num_inputs || op->eltwise->num_outputs != writes || writes == 0 ||
            (op->num_outputs > 0 && mutated > 0)) {
            return 0;
        }
        for (int32_t i = 0; i < op->num_inputs; i++) {
            if (op->inputs[i].flags & OPF_ARG_OPTIONAL) {
                return 0;
            }
            want[i] = 1;
        }
        /* Over the broadcast of the inputs: tied by same-shape checks, or
         * (writing outputs) by broadcast ones too; each output like an input
         * (inputs of one shape only), the broadcast of all of them (of any
         * when they have one shape), or summed to an input's shape. */
        const int same = all_tied(op, want, 1);
        if (!same && (mutated > 0 || !all_tied(op, want, 2))) {
            return 0;
        }
        for (int32_t o = 0; o < op->num_outputs; o++) {
            const opf_shape_rule *sr = &op->output_shapes[o];
            int named = 0;
            for (int32_t i = 0; sr->kind == OPF_SHAPE_BROADCAST && i < op->num_inputs; i++) {
                for (int32_t d = 0; d < sr->rank; d++) {
                    if (sr->dims[d].input == i) {
                        named++;
                        break;
                    }
                }
            }
            int shaped = sr->kind == OPF_SHAPE_SUM_TO || (sr->kind == OPF_SHAPE_LIKE && same) ||
                         (sr->kind == OPF_SHAPE_BROADCAST && (same || named == op->num_inputs));
            if ((op->outputs[o].flags & OPF_ARG_OPTIONAL) || !shaped) {
                return 0;
            }
        }
        return 1;
    }
    if (op->row != NULL) {
        if (op->row->num_inputs != op->num_inputs || op->row->num_outputs != op->num_outputs || mutated > 0 ||
            op->num_inputs == 0 || (op->inputs[0].flags & OPF_ARG_OPTIONAL) ||
            !(op->inputs[0].flags & OPF_ARG_BATCHED)) {
            return 0;
        }
        int ranked = op->inputs[0].core_dims == 0;
        for (int32_t k = 0; k < op->num_checks; k++) {
            const opf_check *c = &op->checks[k];
            ranked |= c->a == 0 && (c->kind == OPF_CHECK_RANK || c->kind == OPF_CHECK_MIN_RANK) &&
                      c->rank >= op->inputs[0].core_dims;
        }
        for (int32_t i = 0; i < op->num_inputs; i++) {
            want[i] = (op->inputs[i].flags & OPF_ARG_BATCHED) != 0;
        }
        if (!ranked || !all_tied(op, want, 0)) {
            return 0;
        }
        for (int32_t o = 0; o < op->num_outputs; o++) {
            const opf_shape_rule *sr = &op->output_shapes[o];
            if (!(op->outputs[o].flags & OPF_ARG_BATCHED) ||
                (sr->kind != OPF_SHAPE_LIKE && sr->kind != OPF_SHAPE_BATCH) || !want[sr->like] ||
                (sr->kind == OPF_SHAPE_BATCH && sr->drop != op->inputs[sr->like].core_dims)) {
                return 0;
            }
        }
        return 1;
    }
    for (int32_t o = 0; o < op->num_outputs; o++) { /* a compute function sums nothing for the library */
        if (op->output_shapes[o].kind == OPF_SHAPE_SUM_TO) {
            return 0;
        }
    }
    return 1;
}

static int row_ok(const opf_op_table *t, const opf_op_def *op) {
    if (op == NULL || !identifier(op->name)) {
        return 0;
    }
    if ((op->compute != NULL) + (op->eltwise != NULL) + (op->row != NULL) != 1 ||
        (op->eltwise != NULL && !(op->flags & OPF_OP_ELEMENTWISE))) {
        return 0;
    }
    if (op->dtypes == 0 || (op->dtypes & ~(uint32_t)(OPF_DTYPES_F32 | OPF_DTYPES_F64))) {
        return 0;
    }
    if (!args_ok(op->num_inputs, op->inputs) || !args_ok(op->num_outputs, op->outputs)) {
        return 0;
    }
    const int32_t ni = op->num_inputs, no = op->num_outputs;
    if (op->num_attrs < 0 || op->num_attrs > OPF_MAX_ATTRS) {
        return 0;
    }
    for (int32_t i = 0; i < op->num_attrs; i++) {
        const opf_attr_def *a = &op->attrs[i];
        if (a->name == NULL || a->name[0] == '\0') {
            return 0;
        }
        if (a->type == OPF_ATTR_ENUM) {
            int32_t n = 0;
            while (n < OPF_MAX_CHOICES && a->choices[n] != NULL) {
                n++;
            }
            if (a->default_value.i < 0 || a->default_value.i >= n) {
                return 0;
            }
        } else if (a->type != OPF_ATTR_FLOAT && a->type != OPF_ATTR_INT) {
            return 0;
        }
    }
    if (op->num_checks < 0 || op->num_checks > OPF_MAX_CHECKS) {
        return 0;
    }
    for (int32_t i = 0; i < op->num_checks; i++) {
        if (!check_ok(&op->checks[i], ni)) {
            return 0;
        }
    }
    for (int32_t o = 0; o < no; o++) {
        if (!rule_ok(&op->output_shapes[o], ni)) {
            return 0;
        }
    }
    if (op->num_grads < 0 || op->num_grads > OPF_MAX_GRADS) {
        return 0;
    }
    for (int32_t g = 0; g < op->num_grads; g++) {
        const opf_grad_def *rule = &op->grads[g];
        int32_t want_sources = 1, want_produces = 1;
        if (rule->op != NULL) {
            const opf_op_def *grad = find_row(t, rule->op);
            if (grad == NULL) {
                return 0;
            }
            want_sources = grad->num_inputs;
            want_produces = grad->num_outputs;
        }
        if (rule->num_sources < 0 || rule->num_sources > OPF_MAX_ARGS || rule->num_sources != want_sources ||
            rule->num_produces < 0 || rule->num_produces > OPF_MAX_ARGS || rule->num_produces != want_produces) {
            return 0;
        }
        for (int32_t i = 0; i < rule->num_sources; i++) {
            const opf_grad_source src = rule->sources[i];
            int ok = src.kind == OPF_FROM_NONE || (src.kind == OPF_FROM_INPUT && in_range(src.index, ni)) ||
                     ((src.kind == OPF_FROM_OUTPUT || src.kind == OPF_FROM_GRAD) && in_range(src.index, no));
            if (!ok) {
                return 0;
            }
        }
        for (int32_t i = 0; i < rule->num_produces; i++) {
            if (rule->produces[i] != -1 && !in_range(rule->produces[i], ni)) {
                return 0;
            }
        }
    }
    return engine_ok(op);
}

static int table_ok(const opf_op_table *t) {
    if (t->abi_version != OPF_TABLE_ABI_VERSION || !identifier(t->name) || t->num_ops < 0 ||
        (t->num_ops > 0 && t->ops == NULL)) {
        return 0;
    }
    for (int64_t i = 0; i < t->num_ops; i++) {
        if (!row_ok(t, t->ops[i])) {
            return 0;
        }
        for (int64_t j = 0; j < i; j++) { /* names are unique */
            if (strcmp(t->ops[j]->name, t->ops[i]->name) == 0) {
                return 0;
            }
        }
    }
    return 1;
}

/* --- running the rows of an accepted table --------------------------------- */

/* A view over its own buffer: contiguous, reversed, or with gaps. */
static void make_tensor(opf_tensor *t, int64_t *shape, int64_t *strides, double *buffer, int32_t ndim, opf_dtype dtype,
                        fuzz_reader *r) {
    *t = opf_tensor_make(buffer, dtype, ndim, shape);
    int64_t stride = 1, reach = 0;
    const int64_t step = fuzz_chance(r, 48) ? 2 : 1, sign = fuzz_chance(r, 48) ? -1 : 1;
    for (int32_t d = ndim - 1; d >= 0; d--) {
        strides[d] = sign * step * stride;
        reach += shape[d] > 0 ? (shape[d] - 1) * step * stride : 0;
        stride *= shape[d] > 0 ? shape[d] : 1;
    }
    if (step != 1 || sign != 1 || fuzz_chance(r, 32)) {
        t->strides = strides;
        t->byte_offset = sign < 0 ? (uint64_t)reach * opf_dtype_size(dtype) : 0;
    }
}

static void run_row(const opf_op_def *op, fuzz_reader *r) {
    opf_tensor tensors[2 * OPF_MAX_ARGS];
    int64_t shapes[2 * OPF_MAX_ARGS][OPF_MAX_RANK], strides[2 * OPF_MAX_ARGS][OPF_MAX_RANK];
    double *buffers[2 * OPF_MAX_ARGS] = {NULL};
    const opf_tensor *ins[OPF_MAX_ARGS] = {NULL}, *outs[OPF_MAX_ARGS] = {NULL};
    /* Mostly one shape for every input (so that rows get past their checks), with a random rank (0 to 3, dims up to
     * 3: 27 elements, 53 with gaps). */
    int32_t base_rank = (int32_t)fuzz_pick(r, 4);
    int64_t base[3];
    for (int32_t d = 0; d < 3; d++) {
        base[d] = (int64_t)fuzz_pick(r, 4);
    }
    const opf_dtype dtype = fuzz_chance(r, 128) ? OPF_F32 : OPF_F64;
    for (int32_t i = 0; i < op->num_inputs + op->num_outputs; i++) {
        int32_t ndim = base_rank;
        for (int32_t d = 0; d < 3; d++) {
            shapes[i][d] = base[d];
        }
        if (fuzz_chance(r, 40)) {
            ndim = (int32_t)fuzz_pick(r, 4);
            for (int32_t d = 0; d < ndim; d++) {
                shapes[i][d] = (int64_t)fuzz_pick(r, 4);
            }
        }
        buffers[i] = malloc(BUFFER_ELEMS * sizeof(double));
        if (buffers[i] == NULL) {
            FUZZ_FAIL("out of memory");
        }
        memset(buffers[i], 0, BUFFER_ELEMS * sizeof(double));
        make_tensor(&tensors[i], shapes[i], strides[i], buffers[i], ndim, dtype, r);
        const opf_tensor *t = fuzz_chance(r, 24) ? NULL : &tensors[i];
        if (i < op->num_inputs) {
            ins[i] = t;
        } else {
            outs[i - op->num_inputs] = t;
        }
    }
    for (int32_t o = 0; o < op->num_outputs; o++) {
        int32_t ndim = -1;
        int64_t *shape = malloc(sizeof(int64_t) * OPF_MAX_RANK);
        if (shape == NULL) {
            FUZZ_FAIL("out of memory");
        }
        opf_status st = opf_op_infer_shape(op, ins, o, &ndim, shape);
        if (st == OPF_OK && (ndim < 0 || ndim > OPF_MAX_RANK)) {
            FUZZ_FAIL("%s: inferred rank %d", op->name, (int)ndim);
        }
        /* Give the output the inferred shape when it fits its buffer, so that
         * runs get past the shape checks. */
        opf_tensor *t = &tensors[op->num_inputs + o];
        if (st == OPF_OK && outs[o] != NULL && !fuzz_chance(r, 24)) {
            int64_t n = 1;
            for (int32_t d = 0; d < ndim; d++) {
                n *= shape[d] == 0                   ? 1
                     : shape[d] > 0 && shape[d] <= 4 ? shape[d]
                                                     : BUFFER_ELEMS + 1; /* 0: strides still fit */
                n = n > BUFFER_ELEMS ? BUFFER_ELEMS + 1 : n;
            }
            if (n <= BUFFER_ELEMS / 2) {
                memcpy(shapes[op->num_inputs + o], shape, sizeof(int64_t) * (size_t)ndim);
                make_tensor(t, shapes[op->num_inputs + o], strides[op->num_inputs + o], buffers[op->num_inputs + o],
                            ndim, dtype, r);
            }
        }
        free(shape);
    }
    opf_attr_value attrs[OPF_MAX_ATTRS];
    opf_op_default_attrs(op, attrs);
    current_row = op;
    compute_calls = 0;
    opf_status st = opf_op_run(op, ins, outs, fuzz_chance(r, 128) ? NULL : attrs);
    if (st != OPF_OK && compute_calls != 0) {
        FUZZ_FAIL("%s: status %s after %d kernel calls", op->name, opf_status_name(st), compute_calls);
    }
    if (st == OPF_OK && op->compute != NULL && compute_calls != 1) {
        FUZZ_FAIL("%s: OK after %d compute calls", op->name, compute_calls);
    }
    count(&runs[st == OPF_OK]);
    for (int32_t i = 0; i < 2 * OPF_MAX_ARGS; i++) {
        free(buffers[i]);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_reader r = {data, size, 0};
    int64_t rows = 1 + (int64_t)fuzz_pick(&r, MAX_ROWS);
    fuzz_row *defs[MAX_ROWS] = {NULL};
    const opf_op_def **ops = malloc(sizeof *ops * (size_t)rows);
    if (ops == NULL) {
        return 0;
    }
    for (int64_t i = 0; i < rows; i++) {
        defs[i] = fuzz_chance(&r, 6) ? NULL : malloc(sizeof(fuzz_row));
        if (defs[i] != NULL) {
            make_row(defs[i], &r);
        }
        ops[i] = defs[i] != NULL ? &defs[i]->def : NULL;
    }
    opf_op_table table = {OPF_TABLE_ABI_VERSION, "fuzz", rows, ops};
    switch (fuzz_chance(&r, 12) ? fuzz_pick(&r, 6) : 6) {
    case 0: table.abi_version = OPF_TABLE_ABI_VERSION + 1; break;
    case 1: table.name = NULL; break;
    case 2: table.num_ops = -1; break;
    case 3: table.num_ops = 0; break;
    case 4: table.num_ops = rows - 1; break;
    case 5: table.name = "Fuzz"; break;
    default: break;
    }
    const int want = table_ok(&table);
    const opf_status st = opf_op_table_validate(&table);
    count(&tables[st == OPF_OK]);
    if ((st == OPF_OK) != want) {
        FUZZ_FAIL("opf_op_table_validate: %s (%s); the rules say %s", opf_status_name(st), opf_last_error(),
                  want ? "valid" : "invalid");
    }
    if (st != OPF_OK && (st != OPF_E_INVALID || opf_last_error()[0] == '\0')) {
        FUZZ_FAIL("a refused table: %s with message \"%s\"", opf_status_name(st), opf_last_error());
    }
    for (int64_t i = 0; st == OPF_OK && i < table.num_ops; i++) {
        run_row(table.ops[i], &r);
    }
    for (int64_t i = 0; i < rows; i++) {
        free(defs[i]);
    }
    free(ops);
    return 0;
}
