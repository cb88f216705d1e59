/*
 * fuzz_table.c — opf_op_table_validate on tables built from the input: rows
 * with counts in and out of range (9 inputs, -1 checks, ...), missing or
 * duplicate names, unknown kinds and types, shape checks, shape rules and
 * gradient rules naming indices and rows that do not exist.
 *
 * Each row is a separate allocation, so that ASan sees reads past one. The
 * target compares the verdict with its own validator, written from the
 * documented rules (include/opforge.h: the limits and what each field may
 * hold). Then, for a table it accepts, it runs every row: shape inference
 * and opf_op_run on small tensors of fuzzed shapes, whose compute function
 * checks that it is called only with what the row declared (a validated row
 * must be safe to run whatever the tensors).
 *
 * Values outside the known kinds are drawn far from them (-1, 1000), so that
 * kinds added to the header later do not make the model wrong.
 */
#include <string.h>

#include "fuzz.h"
#include "opforge.h"

enum { MAX_ROWS = 5 };

static const char *const row_names[] = {"a", "b", "c", "d", NULL, ""};
static const char *const arg_names[] = {"x", "y", "z", NULL, ""};

static const opf_op_def *current_row; /* the row whose compute may be called */
static int compute_calls;

/* FUZZ_STATS=1 prints, at exit, how many tables were accepted and how many
 * row runs got to the compute function. */
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
    static const int32_t counts[] = {1, 0, 2, 1, 3, 8, 9, -1, INT32_MAX, INT32_MIN};
    return FUZZ_PICK(r, counts);
}

static int32_t index_value(fuzz_reader *r) {
    static const int32_t indices[] = {0, 1, 0, 2, -1, 7, 8, 9, INT32_MIN};
    return FUZZ_PICK(r, indices);
}

static void make_row(opf_op_def *op, fuzz_reader *r) {
    memset(op, 0, sizeof *op);
    op->name = FUZZ_PICK(r, row_names);
    op->compute = fuzz_chance(r, 8) ? NULL : checking_compute;
    static const uint32_t dtypes[] = {OPF_DTYPES_F32 | OPF_DTYPES_F64, OPF_DTYPES_F32, OPF_DTYPES_F64, 0, 4, 7};
    op->dtypes = FUZZ_PICK(r, dtypes);
    op->flags = fuzz_chance(r, 100) ? OPF_OP_ELEMENTWISE : 0;
    op->num_inputs = count_value(r);
    op->num_outputs = count_value(r);
    for (int i = 0; i < OPF_MAX_ARGS; i++) {
        op->inputs[i].name = fuzz_chance(r, 12) ? FUZZ_PICK(r, arg_names) : "in";
        op->inputs[i].flags = fuzz_u8(r) & (OPF_ARG_OPTIONAL | OPF_ARG_MUTATED);
        op->outputs[i].name = fuzz_chance(r, 12) ? FUZZ_PICK(r, arg_names) : "out";
        op->outputs[i].flags = fuzz_u8(r) & OPF_ARG_OPTIONAL;
    }
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
    op->num_checks = fuzz_chance(r, 128) ? count_value(r) : 0;
    for (int i = 0; i < OPF_MAX_CHECKS; i++) {
        opf_check *c = &op->checks[i];
        static const opf_check_kind kinds[] = {OPF_CHECK_RANK, OPF_CHECK_SAME_SHAPE, OPF_CHECK_DIM_EQ,
                                               OPF_CHECK_NONE, (opf_check_kind)1000, (opf_check_kind)-1};
        static const int32_t ranks[] = {2, 1, 0, 16, 17, -1};
        static const int32_t dims[] = {0, 1, -1, -2, 5, INT32_MIN};
        c->kind = FUZZ_PICK(r, kinds);
        c->a = index_value(r);
        c->b = index_value(r);
        c->a_dim = FUZZ_PICK(r, dims);
        c->b_dim = FUZZ_PICK(r, dims);
        c->rank = FUZZ_PICK(r, ranks);
    }
    for (int o = 0; o < OPF_MAX_ARGS; o++) {
        opf_shape_rule *s = &op->output_shapes[o];
        static const opf_shape_kind kinds[] = {OPF_SHAPE_LIKE, OPF_SHAPE_DIMS, OPF_SHAPE_NONE, (opf_shape_kind)1000};
        static const int32_t ranks[] = {1, 2, 0, 4, 5, -1};
        static const int32_t dims[] = {0, 1, -1, -2, 3, INT32_MAX};
        s->kind = FUZZ_PICK(r, kinds);
        s->like = index_value(r);
        s->rank = FUZZ_PICK(r, ranks);
        for (int d = 0; d < OPF_MAX_RULE_RANK; d++) {
            s->dims[d].input = index_value(r);
            s->dims[d].dim = FUZZ_PICK(r, dims);
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

static int args_ok(int32_t count, const opf_arg_def *args) {
    if (count < 0 || count > OPF_MAX_ARGS) {
        return 0;
    }
    for (int32_t i = 0; i < count; i++) {
        if (args[i].name == NULL || args[i].name[0] == '\0') {
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

static int row_ok(const opf_op_table *t, const opf_op_def *op) {
    if (op == NULL || op->name == NULL || op->name[0] == '\0' || op->compute == NULL) {
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
        const opf_check *c = &op->checks[i];
        switch (c->kind) {
        case OPF_CHECK_RANK:
            if (!in_range(c->a, ni) || c->rank < 0 || c->rank > OPF_MAX_RANK) {
                return 0;
            }
            break;
        case OPF_CHECK_SAME_SHAPE:
        case OPF_CHECK_DIM_EQ:
            if (!in_range(c->a, ni) || !in_range(c->b, ni)) {
                return 0;
            }
            break;
        default: return 0;
        }
    }
    for (int32_t o = 0; o < no; o++) {
        const opf_shape_rule *s = &op->output_shapes[o];
        if (s->kind == OPF_SHAPE_LIKE) {
            if (!in_range(s->like, ni)) {
                return 0;
            }
        } else if (s->kind == OPF_SHAPE_DIMS) {
            if (s->rank < 0 || s->rank > OPF_MAX_RULE_RANK) {
                return 0;
            }
            for (int32_t d = 0; d < s->rank; d++) {
                if (!in_range(s->dims[d].input, ni)) {
                    return 0;
                }
            }
        } else {
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
            const opf_grad_source s = rule->sources[i];
            int ok = s.kind == OPF_FROM_NONE || (s.kind == OPF_FROM_INPUT && in_range(s.index, ni)) ||
                     ((s.kind == OPF_FROM_OUTPUT || s.kind == OPF_FROM_GRAD) && in_range(s.index, no));
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
    return 1;
}

static int table_ok(const opf_op_table *t) {
    if (t->abi_version != OPF_TABLE_ABI_VERSION || t->name == NULL || t->num_ops < 0 ||
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

static void run_row(const opf_op_def *op, fuzz_reader *r) {
    enum { ELEMS = 64 };
    opf_tensor tensors[2 * OPF_MAX_ARGS];
    int64_t shapes[2 * OPF_MAX_ARGS][3];
    double *buffers[2 * OPF_MAX_ARGS] = {NULL};
    const opf_tensor *ins[OPF_MAX_ARGS] = {NULL}, *outs[OPF_MAX_ARGS] = {NULL};
    for (int32_t i = 0; i < op->num_inputs + op->num_outputs; i++) {
        int32_t ndim = (int32_t)fuzz_pick(r, 4);
        for (int32_t d = 0; d < ndim; d++) {
            shapes[i][d] = (int64_t)fuzz_pick(r, 4);
        }
        buffers[i] = calloc(ELEMS, sizeof(double)); /* 4^3 elements at most */
        if (buffers[i] == NULL) {
            FUZZ_FAIL("out of memory");
        }
        tensors[i] = opf_tensor_make(buffers[i], fuzz_chance(r, 128) ? OPF_F32 : OPF_F64, ndim, shapes[i]);
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
        /* Give the output the inferred shape when it fits, so that runs get past the shape checks. */
        if (st == OPF_OK && ndim <= 3 && outs[o] != NULL && fuzz_chance(r, 200)) {
            int64_t n = 1;
            for (int32_t d = 0; d < ndim; d++) {
                n *= shape[d] >= 0 && shape[d] <= 4 ? shape[d] : ELEMS + 1;
            }
            if (n <= ELEMS) {
                opf_tensor *t = &tensors[op->num_inputs + o];
                memcpy(shapes[op->num_inputs + o], shape, sizeof(int64_t) * (size_t)ndim);
                t->ndim = ndim;
            }
        }
        free(shape);
    }
    opf_attr_value attrs[OPF_MAX_ATTRS];
    opf_op_default_attrs(op, attrs);
    current_row = op;
    compute_calls = 0;
    opf_status st = opf_op_run(op, ins, outs, fuzz_chance(r, 128) ? NULL : attrs);
    if ((st == OPF_OK) != (compute_calls == 1)) {
        FUZZ_FAIL("%s: status %s after %d compute calls", op->name, opf_status_name(st), compute_calls);
    }
    count(&runs[st == OPF_OK]);
    for (int32_t i = 0; i < 2 * OPF_MAX_ARGS; i++) {
        free(buffers[i]);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_reader r = {data, size, 0};
    int64_t rows = 1 + (int64_t)fuzz_pick(&r, MAX_ROWS);
    opf_op_def *defs[MAX_ROWS] = {NULL};
    const opf_op_def **ops = malloc(sizeof *ops * (size_t)rows);
    if (ops == NULL) {
        return 0;
    }
    for (int64_t i = 0; i < rows; i++) {
        defs[i] = fuzz_chance(&r, 6) ? NULL : malloc(sizeof(opf_op_def));
        if (defs[i] != NULL) {
            make_row(defs[i], &r);
        }
        ops[i] = defs[i];
    }
    opf_op_table table = {OPF_TABLE_ABI_VERSION, "fuzz", rows, ops};
    switch (fuzz_chance(&r, 12) ? fuzz_pick(&r, 5) : 5) {
    case 0: table.abi_version = OPF_TABLE_ABI_VERSION + 1; break;
    case 1: table.name = NULL; break;
    case 2: table.num_ops = -1; break;
    case 3: table.num_ops = 0; break;
    case 4: table.num_ops = rows - 1; break;
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
