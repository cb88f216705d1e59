/*
 * table.c — looking up rows and validating a table before an adapter
 * registers it. Validation catches authoring mistakes in a user's table
 * (counts, indices, dangling gradient ops) with a message naming the row.
 */
#include <string.h>

#include "error.h"

#define OPF_VALIDATE "opf_op_table_validate"

const opf_op_def *opf_op_find(const opf_op_table *table, const char *name) {
    if (table == NULL || name == NULL) {
        return NULL;
    }
    for (int64_t i = 0; i < table->num_ops; i++) {
        if (table->ops[i] != NULL && table->ops[i]->name != NULL && strcmp(table->ops[i]->name, name) == 0) {
            return table->ops[i];
        }
    }
    return NULL;
}

/* lower_snake_case: what every framework accepts as a namespace, an op, an
 * argument (a torch schema, a TF op, a Python identifier). */
int opf_is_identifier(const char *name) {
    if (name == NULL || !((name[0] >= 'a' && name[0] <= 'z') || name[0] == '_')) {
        return 0;
    }
    for (const char *c = name; *c != '\0'; c++) {
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_')) {
            return 0;
        }
    }
    return 1;
}

static int opf_in_range(int32_t value, int32_t count) { return value >= 0 && value < count; }

static opf_status opf_validate_args(const opf_op_def *op, const char *what, int32_t count, const opf_arg_def *args) {
    if (count < 0 || count > OPF_MAX_ARGS) {
        return opf_fail(OPF_E_INVALID, OPF_VALIDATE, "op '%s': %d %s; at most %d", op->name, (int)count, what,
                        OPF_MAX_ARGS);
    }
    for (int32_t i = 0; i < count; i++) {
        if (args[i].name == NULL || args[i].name[0] == '\0') {
            return opf_fail(OPF_E_INVALID, OPF_VALIDATE, "op '%s': %s %d has no name", op->name, what, (int)i);
        }
        if (!opf_is_identifier(args[i].name)) {
            return opf_fail(OPF_E_INVALID, OPF_VALIDATE, "op '%s': %s name '%s' must be lower_snake_case", op->name,
                            what, args[i].name);
        }
        const int input = what[0] == 'i';
        const uint32_t known = OPF_ARG_OPTIONAL | OPF_ARG_BATCHED | (input ? OPF_ARG_MUTATED | OPF_ARG_SHAPE_ONLY : 0);
        if ((args[i].flags & ~known) != 0) {
            return opf_fail(OPF_E_INVALID, OPF_VALIDATE, "op '%s': %s '%s' has flags 0x%x unknown to %s", op->name,
                            what, args[i].name, (unsigned)(args[i].flags & ~known), what);
        }
        if ((args[i].flags & OPF_ARG_SHAPE_ONLY) && (args[i].flags & OPF_ARG_MUTATED)) {
            return opf_fail(OPF_E_INVALID, OPF_VALIDATE,
                            "op '%s': input '%s' is written in place, so its values are more than its shape", op->name,
                            args[i].name);
        }
        if ((args[i].flags & OPF_ARG_BATCHED) && (args[i].core_dims < 0 || args[i].core_dims > OPF_MAX_RANK)) {
            return opf_fail(OPF_E_INVALID, OPF_VALIDATE, "op '%s': %s '%s' has core_dims %d", op->name, what,
                            args[i].name, (int)args[i].core_dims);
        }
    }
    return OPF_OK;
}

static opf_status opf_validate_attrs(const opf_op_def *op) {
    if (op->num_attrs < 0 || op->num_attrs > OPF_MAX_ATTRS) {
        return opf_fail(OPF_E_INVALID, OPF_VALIDATE, "op '%s': %d attrs; at most %d", op->name, (int)op->num_attrs,
                        OPF_MAX_ATTRS);
    }
    for (int32_t i = 0; i < op->num_attrs; i++) {
        const opf_attr_def *a = &op->attrs[i];
        if (a->name == NULL || a->name[0] == '\0') {
            return opf_fail(OPF_E_INVALID, OPF_VALIDATE, "op '%s': attr %d has no name", op->name, (int)i);
        }
        if (a->type != OPF_ATTR_FLOAT && a->type != OPF_ATTR_INT && a->type != OPF_ATTR_ENUM) {
            return opf_fail(OPF_E_INVALID, OPF_VALIDATE, "op '%s': attr '%s' has unknown type %d", op->name, a->name,
                            (int)a->type);
        }
        if (a->type == OPF_ATTR_ENUM) {
            int32_t n = 0;
            while (n < OPF_MAX_CHOICES && a->choices[n] != NULL) {
                n++;
            }
            if (n == 0 || a->default_value.i < 0 || a->default_value.i >= n) {
                return opf_fail(OPF_E_INVALID, OPF_VALIDATE,
                                "op '%s': enum attr '%s' needs choices and a default index among them", op->name,
                                a->name);
            }
        }
    }
    return OPF_OK;
}

static opf_status opf_validate_shapes(const opf_op_def *op) {
    if (op->num_checks < 0 || op->num_checks > OPF_MAX_CHECKS) {
        return opf_fail(OPF_E_INVALID, OPF_VALIDATE, "op '%s': %d checks; at most %d", op->name, (int)op->num_checks,
                        OPF_MAX_CHECKS);
    }
    for (int32_t i = 0; i < op->num_checks; i++) {
        const opf_check *c = &op->checks[i];
        int needs_b = c->kind == OPF_CHECK_SAME_SHAPE || c->kind == OPF_CHECK_DIM_EQ || c->kind == OPF_CHECK_BATCH_EQ ||
                      c->kind == OPF_CHECK_BROADCAST;
        int has_rank = c->kind == OPF_CHECK_RANK || c->kind == OPF_CHECK_MIN_RANK;
        int kind_ok = has_rank || needs_b || c->kind == OPF_CHECK_DIM_IS;
        int batch_ok = c->kind != OPF_CHECK_BATCH_EQ ||
                       (c->a_dim >= 0 && c->a_dim <= OPF_MAX_RANK && c->b_dim >= 0 && c->b_dim <= OPF_MAX_RANK);
        /* The runner looks at input b of every kind but RANK (whether it is
         * present), so b must name an input even where the kind ignores it. */
        needs_b |= c->kind != OPF_CHECK_RANK;
        if (!kind_ok || !batch_ok || !opf_in_range(c->a, op->num_inputs) ||
            (needs_b && !opf_in_range(c->b, op->num_inputs)) || (has_rank && (c->rank < 0 || c->rank > OPF_MAX_RANK)) ||
            (c->kind == OPF_CHECK_DIM_IS && c->rank < 0)) {
            return opf_fail(OPF_E_INVALID, OPF_VALIDATE, "op '%s': check %d names an unknown kind, input or rank",
                            op->name, (int)i);
        }
    }
    for (int32_t o = 0; o < op->num_outputs; o++) {
        const opf_shape_rule *r = &op->output_shapes[o];
        int by_dims = r->kind == OPF_SHAPE_DIMS || r->kind == OPF_SHAPE_BATCH;
        int ok =
            ((r->kind == OPF_SHAPE_LIKE || r->kind == OPF_SHAPE_SUM_TO) && opf_in_range(r->like, op->num_inputs)) ||
            (by_dims && r->rank >= 0 && r->rank <= OPF_MAX_RULE_RANK);
        if (r->kind == OPF_SHAPE_BROADCAST) {
            /* One or more distinct inputs. */
            ok = r->rank >= 1 && r->rank <= OPF_MAX_RULE_RANK;
            for (int32_t d = 0; ok && d < r->rank; d++) {
                ok = opf_in_range(r->dims[d].input, op->num_inputs);
                for (int32_t e = 0; ok && e < d; e++) {
                    ok = r->dims[e].input != r->dims[d].input;
                }
            }
        }
        if (r->kind == OPF_SHAPE_BATCH) {
            ok = ok && opf_in_range(r->like, op->num_inputs) && r->drop >= 0 && r->drop <= OPF_MAX_RANK;
        }
        for (int32_t d = 0; ok && by_dims && d < r->rank; d++) {
            ok = opf_in_range(r->dims[d].input, op->num_inputs) || (r->dims[d].input == -1 && r->dims[d].dim >= 0);
        }
        if (!ok) {
            return opf_fail(OPF_E_INVALID, OPF_VALIDATE, "op '%s': the shape rule of output '%s' is invalid", op->name,
                            op->outputs[o].name);
        }
    }
    return OPF_OK;
}

/* A source of a gradient rule (jvp = 0) or a tangent rule (jvp = 1). */
static int opf_source_ok(const opf_op_def *op, opf_grad_source src, int jvp) {
    switch (src.kind) {
    case OPF_FROM_NONE: return 1;
    case OPF_FROM_INPUT: return opf_in_range(src.index, op->num_inputs);
    case OPF_FROM_OUTPUT: return opf_in_range(src.index, op->num_outputs);
    case OPF_FROM_GRAD: return !jvp && opf_in_range(src.index, op->num_outputs);
    case OPF_FROM_TANGENT: return jvp && opf_in_range(src.index, op->num_inputs);
    }
    return 0;
}

/* The gradient rules (jvp = 0: they give gradients of inputs) or the tangent
 * rules (jvp = 1: they give tangents of outputs) of a row. */
static opf_status opf_validate_rules(const opf_op_table *table, const opf_op_def *op, int jvp) {
    const char *what = jvp ? "tangent" : "gradient";
    int32_t count = jvp ? op->num_jvps : op->num_grads, targets = jvp ? op->num_outputs : op->num_inputs;
    if (count < 0 || count > OPF_MAX_GRADS) {
        return opf_fail(OPF_E_INVALID, OPF_VALIDATE, "op '%s': %d %s rules; at most %d", op->name, (int)count, what,
                        OPF_MAX_GRADS);
    }
    for (int32_t g = 0; g < count; g++) {
        const opf_grad_def *rule = jvp ? &op->jvps[g] : &op->grads[g];
        int32_t want_sources = 1, want_produces = 1;
        /* Checked before comparing with the rule op's counts, which that
         * row's own validation may not have reached yet: the loops below read
         * sources[] and produces[] up to these counts. */
        if (rule->num_sources < 0 || rule->num_sources > OPF_MAX_ARGS || rule->num_produces < 0 ||
            rule->num_produces > OPF_MAX_ARGS) {
            return opf_fail(OPF_E_INVALID, OPF_VALIDATE,
                            "op '%s': %s rule %d has %d sources and %d products; at most %d of each", op->name, what,
                            (int)g, (int)rule->num_sources, (int)rule->num_produces, OPF_MAX_ARGS);
        }
        if (rule->op != NULL) {
            const opf_op_def *rule_op = opf_op_find(table, rule->op);
            if (rule_op == NULL) {
                return opf_fail(OPF_E_INVALID, OPF_VALIDATE, "op '%s': %s op '%s' is not in table '%s'", op->name, what,
                                rule->op, table->name);
            }
            want_sources = rule_op->num_inputs;
            want_produces = rule_op->num_outputs;
        }
        if (rule->num_sources != want_sources || rule->num_produces != want_produces) {
            return opf_fail(OPF_E_INVALID, OPF_VALIDATE,
                            "op '%s': %s rule %d has %d sources and %d products; expected %d and %d", op->name, what,
                            (int)g, (int)rule->num_sources, (int)rule->num_produces, (int)want_sources,
                            (int)want_produces);
        }
        for (int32_t i = 0; i < rule->num_sources; i++) {
            if (!opf_source_ok(op, rule->sources[i], jvp)) {
                return opf_fail(OPF_E_INVALID, OPF_VALIDATE, "op '%s': %s rule %d: source %d is invalid", op->name,
                                what, (int)g, (int)i);
            }
        }
        for (int32_t i = 0; i < rule->num_produces; i++) {
            if (rule->produces[i] != -1 && !opf_in_range(rule->produces[i], targets)) {
                return opf_fail(OPF_E_INVALID, OPF_VALIDATE, "op '%s': %s rule %d produces unknown %s %d", op->name,
                                what, (int)g, jvp ? "output" : "input", (int)rule->produces[i]);
            }
        }
    }
    return OPF_OK;
}

/* --- what the engines rely on ------------------------------------------------
 *
 * A row run by the elementwise or the row engine is walked with the shapes of
 * some of its arguments, so those shapes must be tied together by the row's
 * checks and rules; a declared row (decl.c) always is, a hand-written one
 * must say so too, or be refused here rather than read outside a tensor when
 * it runs. A check ties two inputs only when both are present, so an optional
 * input is tied by a check it shares with a required input. */

/* Whether check c ties inputs i and j (in either order) as `tie` requires. */
typedef int (*opf_tie_fn)(const opf_op_def *op, const opf_check *c, int32_t i, int32_t j);

static int opf_names_pair(const opf_check *c, int32_t i, int32_t j) {
    return (c->a == i && c->b == j) || (c->a == j && c->b == i);
}

/* Same shape. */
static int opf_tie_shape(const opf_op_def *op, const opf_check *c, int32_t i, int32_t j) {
    (void)op;
    return c->kind == OPF_CHECK_SAME_SHAPE && opf_names_pair(c, i, j);
}

/* Same shape, or shapes that broadcast together. */
static int opf_tie_broadcast(const opf_op_def *op, const opf_check *c, int32_t i, int32_t j) {
    return opf_tie_shape(op, c, i, j) || (c->kind == OPF_CHECK_BROADCAST && opf_names_pair(c, i, j));
}

/* Same leading ("...") dims of two batched inputs. */
static int opf_tie_batch(const opf_op_def *op, const opf_check *c, int32_t i, int32_t j) {
    if (!opf_names_pair(c, i, j)) {
        return 0;
    }
    if (c->kind == OPF_CHECK_SAME_SHAPE) {
        return op->inputs[i].core_dims == op->inputs[j].core_dims;
    }
    return c->kind == OPF_CHECK_BATCH_EQ && c->a_dim == op->inputs[c->a].core_dims &&
           c->b_dim == op->inputs[c->b].core_dims;
}

/* Whether every input in `members` is tied to input 0 through checks of kind
 * `tie`: required inputs through chains of required inputs, optional ones by
 * a check with a tied required input. */
static int opf_tied_to_first(const opf_op_def *op, const int *members, opf_tie_fn tie) {
    int tied[OPF_MAX_ARGS] = {1};
    for (int grew = 1; grew;) {
        grew = 0;
        for (int32_t i = 1; i < op->num_inputs; i++) {
            for (int32_t c = 0; members[i] && !tied[i] && c < op->num_checks; c++) {
                for (int32_t j = 0; j < op->num_inputs && !tied[i]; j++) {
                    int via = tied[j] && !(op->inputs[j].flags & OPF_ARG_OPTIONAL);
                    if (via && tie(op, &op->checks[c], i, j)) {
                        tied[i] = 1;
                        grew |= !(op->inputs[i].flags & OPF_ARG_OPTIONAL);
                    }
                }
            }
        }
    }
    for (int32_t i = 0; i < op->num_inputs; i++) {
        if (members[i] && !tied[i]) {
            return 0;
        }
    }
    return 1;
}

static opf_status opf_validate_engine(const opf_op_def *op) {
    const opf_arg_def *in = op->inputs;
    int32_t mutated = 0;
    for (int32_t i = 0; i < op->num_inputs; i++) {
        mutated += (in[i].flags & OPF_ARG_MUTATED) != 0;
    }
    if (op->eltwise != NULL) {
        /* The engine walks every argument with the shape of the first one
         * written: all present, all of one shape. */
        const int32_t writes = op->num_outputs > 0 ? op->num_outputs : mutated;
        if (op->eltwise->num_inputs != op->num_inputs || op->eltwise->num_outputs != writes || writes == 0 ||
            (op->num_outputs > 0 && mutated > 0)) {
            return opf_fail(OPF_E_INVALID, OPF_VALIDATE,
                            "op '%s': its elementwise kernel reads %d and writes %d tensors; the row has %d inputs, %d "
                            "outputs and %d inputs written in place (it must write its outputs or else those inputs)",
                            op->name, (int)op->eltwise->num_inputs, (int)op->eltwise->num_outputs, (int)op->num_inputs,
                            (int)op->num_outputs, (int)mutated);
        }
        int all[OPF_MAX_ARGS] = {0};
        for (int32_t i = 0; i < op->num_inputs; i++) {
            all[i] = 1;
            if (in[i].flags & OPF_ARG_OPTIONAL) {
                return opf_fail(OPF_E_INVALID, OPF_VALIDATE, "op '%s': input '%s' of an elementwise row is optional",
                                op->name, in[i].name);
            }
        }
        /* The engine runs the kernel over the broadcast of all the inputs:
         * each pair must be tied by a same-shape check or (on a row that
         * writes outputs) a broadcast one, and every output must have that
         * shape (like an input, when the inputs all have one shape; the
         * broadcast of all of them) or be summed to an input's. */
        const int same = opf_tied_to_first(op, all, opf_tie_shape);
        if (!same && (mutated > 0 || !opf_tied_to_first(op, all, opf_tie_broadcast))) {
            return opf_fail(OPF_E_INVALID, OPF_VALIDATE,
                            "op '%s': the inputs of an elementwise row need same-shape checks tying them together "
                            "(or, on a row that writes outputs, broadcast checks)",
                            op->name);
        }
        for (int32_t o = 0; o < op->num_outputs; o++) {
            const opf_shape_rule *r = &op->output_shapes[o];
            int ok = r->kind == OPF_SHAPE_SUM_TO || (r->kind == OPF_SHAPE_LIKE && same);
            if (r->kind == OPF_SHAPE_BROADCAST) {
                int named[OPF_MAX_ARGS] = {0}, count = 0;
                for (int32_t d = 0; d < r->rank; d++) {
                    count += !named[r->dims[d].input];
                    named[r->dims[d].input] = 1;
                }
                ok = same || count == op->num_inputs;
            }
            if ((op->outputs[o].flags & OPF_ARG_OPTIONAL) || !ok) {
                return opf_fail(OPF_E_INVALID, OPF_VALIDATE,
                                "op '%s': output '%s' of an elementwise row must be required and have the shape of "
                                "the broadcast of its inputs (or be summed to an input's shape)",
                                op->name, op->outputs[o].name);
            }
        }
    } else if (op->row != NULL) {
        /* The engine takes the rows from input 0's leading dims and walks
         * every batched argument with them. */
        if (op->row->num_inputs != op->num_inputs || op->row->num_outputs != op->num_outputs || mutated > 0 ||
            op->num_inputs == 0 || (in[0].flags & (OPF_ARG_OPTIONAL | OPF_ARG_BATCHED)) != OPF_ARG_BATCHED) {
            return opf_fail(OPF_E_INVALID, OPF_VALIDATE,
                            "op '%s': its row kernel reads %d and writes %d tensors; the row has %d inputs and %d "
                            "outputs, must write no input, and its first input must be required and batched",
                            op->name, (int)op->row->num_inputs, (int)op->row->num_outputs, (int)op->num_inputs,
                            (int)op->num_outputs);
        }
        int ranked = in[0].core_dims == 0, batched[OPF_MAX_ARGS] = {0};
        for (int32_t c = 0; c < op->num_checks; c++) {
            const opf_check *k = &op->checks[c];
            ranked |=
                k->a == 0 && (k->kind == OPF_CHECK_RANK || k->kind == OPF_CHECK_MIN_RANK) && k->rank >= in[0].core_dims;
        }
        for (int32_t i = 0; i < op->num_inputs; i++) {
            batched[i] = (in[i].flags & OPF_ARG_BATCHED) != 0;
        }
        if (!ranked || !opf_tied_to_first(op, batched, opf_tie_batch)) {
            return opf_fail(OPF_E_INVALID, OPF_VALIDATE,
                            "op '%s': a row-wise row needs a check that its first input has at least its %d row dims, "
                            "and checks tying the leading dims of its batched inputs together",
                            op->name, (int)in[0].core_dims);
        }
        /* A batched output has the leading dims of a batched input; an
         * unbatched one (a sum over the rows) any shape its rule gives. */
        for (int32_t o = 0; o < op->num_outputs; o++) {
            const opf_shape_rule *r = &op->output_shapes[o];
            int ok = (op->outputs[o].flags & OPF_ARG_BATCHED)
                         ? (r->kind == OPF_SHAPE_LIKE || r->kind == OPF_SHAPE_BATCH) && batched[r->like] &&
                               (r->kind == OPF_SHAPE_LIKE || r->drop == in[r->like].core_dims)
                         : r->kind == OPF_SHAPE_DIMS;
            if (!ok) {
                return opf_fail(OPF_E_INVALID, OPF_VALIDATE,
                                "op '%s': output '%s' of a row-wise row must be batched, with the leading dims of a "
                                "batched input, or unbatched (a sum over the rows) with a shape of its own dims",
                                op->name, op->outputs[o].name);
            }
        }
    } else {
        for (int32_t o = 0; o < op->num_outputs; o++) {
            if (op->output_shapes[o].kind == OPF_SHAPE_SUM_TO) {
                return opf_fail(OPF_E_INVALID, OPF_VALIDATE,
                                "op '%s': output '%s' is summed to an input's shape, which only an elementwise row "
                                "does",
                                op->name, op->outputs[o].name);
            }
        }
    }
    return OPF_OK;
}

static opf_status opf_validate_op(const opf_op_table *table, const opf_op_def *op, int64_t index) {
    if (op == NULL || op->name == NULL || op->name[0] == '\0') {
        return opf_fail(OPF_E_INVALID, OPF_VALIDATE, "row %lld of table '%s' has no name", (long long)index,
                        table->name);
    }
    for (int64_t j = 0; j < index; j++) {
        if (strcmp(table->ops[j]->name, op->name) == 0) {
            return opf_fail(OPF_E_INVALID, OPF_VALIDATE, "op '%s' appears twice in table '%s' (rows %lld and %lld)",
                            op->name, table->name, (long long)j, (long long)index);
        }
    }
    if (!opf_is_identifier(op->name)) {
        return opf_fail(OPF_E_INVALID, OPF_VALIDATE, "op name '%s' must be lower_snake_case", op->name);
    }
    int kinds = (op->compute != NULL) + (op->eltwise != NULL) + (op->row != NULL);
    if (kinds != 1) {
        return opf_fail(OPF_E_INVALID, OPF_VALIDATE, "op '%s' needs exactly one of compute, eltwise and row (has %d)",
                        op->name, kinds);
    }
    if (op->eltwise != NULL && !(op->flags & OPF_OP_ELEMENTWISE)) {
        return opf_fail(OPF_E_INVALID, OPF_VALIDATE, "op '%s' has an elementwise kernel but not OPF_OP_ELEMENTWISE",
                        op->name);
    }
    if ((op->flags & ~(uint32_t)(OPF_OP_ELEMENTWISE | OPF_OP_PASS_THROUGH)) != 0) {
        return opf_fail(OPF_E_INVALID, OPF_VALIDATE, "op '%s' has unknown flags 0x%x", op->name, (unsigned)op->flags);
    }
    if ((op->flags & OPF_OP_PASS_THROUGH) &&
        (!(op->flags & OPF_OP_ELEMENTWISE) || op->num_inputs < 1 || op->num_outputs != 1 ||
         (op->inputs[0].flags & (OPF_ARG_OPTIONAL | OPF_ARG_MUTATED | OPF_ARG_SHAPE_ONLY)) ||
         (op->outputs[0].flags & OPF_ARG_OPTIONAL))) {
        return opf_fail(OPF_E_INVALID, OPF_VALIDATE,
                        "op '%s' is OPF_OP_PASS_THROUGH, which needs an elementwise row with a required first input "
                        "(read, neither written in place nor shape only) and exactly one required output",
                        op->name);
    }
    if (op->dtypes == 0 || (op->dtypes & ~(uint32_t)(OPF_DTYPES_F32 | OPF_DTYPES_F64)) != 0) {
        return opf_fail(OPF_E_INVALID, OPF_VALIDATE, "op '%s' has invalid dtypes 0x%x", op->name, (unsigned)op->dtypes);
    }
    opf_status st = opf_validate_args(op, "inputs", op->num_inputs, op->inputs);
    if (st == OPF_OK) {
        st = opf_validate_args(op, "outputs", op->num_outputs, op->outputs);
    }
    if (st == OPF_OK) {
        st = opf_validate_attrs(op);
    }
    if (st == OPF_OK) {
        st = opf_validate_shapes(op);
    }
    if (st == OPF_OK) {
        st = opf_validate_rules(table, op, 0);
    }
    if (st == OPF_OK) {
        st = opf_validate_rules(table, op, 1);
    }
    if (st == OPF_OK) {
        st = opf_validate_engine(op);
    }
    return st;
}

opf_status opf_op_table_validate(const opf_op_table *table) {
    opf_clear_error();
    if (table == NULL) {
        return opf_fail(OPF_E_INVALID, OPF_VALIDATE, "table is NULL");
    }
    if (table->abi_version != OPF_TABLE_ABI_VERSION) {
        return opf_fail(OPF_E_INVALID, OPF_VALIDATE, "table has ABI version %u; this library reads version %d",
                        (unsigned)table->abi_version, OPF_TABLE_ABI_VERSION);
    }
    if (table->name == NULL || table->num_ops < 0 || (table->num_ops > 0 && table->ops == NULL)) {
        return opf_fail(OPF_E_INVALID, OPF_VALIDATE, "table needs a name and %s", "a list of num_ops rows");
    }
    if (!opf_is_identifier(table->name)) {
        return opf_fail(OPF_E_INVALID, OPF_VALIDATE, "table name '%s' must be lower_snake_case", table->name);
    }
    for (int64_t i = 0; i < table->num_ops; i++) {
        opf_status st = opf_validate_op(table, table->ops[i], i);
        if (st != OPF_OK) {
            return st;
        }
    }
    return OPF_OK;
}
