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
static int opf_is_identifier(const char *name) {
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
        int needs_b = c->kind == OPF_CHECK_SAME_SHAPE || c->kind == OPF_CHECK_DIM_EQ || c->kind == OPF_CHECK_BATCH_EQ;
        int has_rank = c->kind == OPF_CHECK_RANK || c->kind == OPF_CHECK_MIN_RANK;
        int kind_ok = has_rank || needs_b || c->kind == OPF_CHECK_DIM_IS;
        int batch_ok = c->kind != OPF_CHECK_BATCH_EQ ||
                       (c->a_dim >= 0 && c->a_dim <= OPF_MAX_RANK && c->b_dim >= 0 && c->b_dim <= OPF_MAX_RANK);
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
        int ok = (r->kind == OPF_SHAPE_LIKE && opf_in_range(r->like, op->num_inputs)) ||
                 (by_dims && r->rank >= 0 && r->rank <= OPF_MAX_RULE_RANK);
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

static int opf_source_ok(const opf_op_def *op, opf_grad_source src) {
    switch (src.kind) {
    case OPF_FROM_NONE: return 1;
    case OPF_FROM_INPUT: return opf_in_range(src.index, op->num_inputs);
    case OPF_FROM_OUTPUT:
    case OPF_FROM_GRAD: return opf_in_range(src.index, op->num_outputs);
    }
    return 0;
}

static opf_status opf_validate_grads(const opf_op_table *table, const opf_op_def *op) {
    if (op->num_grads < 0 || op->num_grads > OPF_MAX_GRADS) {
        return opf_fail(OPF_E_INVALID, OPF_VALIDATE, "op '%s': %d gradient rules; at most %d", op->name,
                        (int)op->num_grads, OPF_MAX_GRADS);
    }
    for (int32_t g = 0; g < op->num_grads; g++) {
        const opf_grad_def *rule = &op->grads[g];
        int32_t want_sources = 1, want_produces = 1;
        /* Checked before comparing with the gradient row's counts, which that
         * row's own validation may not have reached yet: the loops below read
         * sources[] and produces[] up to these counts. */
        if (rule->num_sources < 0 || rule->num_sources > OPF_MAX_ARGS || rule->num_produces < 0 ||
            rule->num_produces > OPF_MAX_ARGS) {
            return opf_fail(OPF_E_INVALID, OPF_VALIDATE,
                            "op '%s': gradient rule %d has %d sources and %d products; at most %d of each", op->name,
                            (int)g, (int)rule->num_sources, (int)rule->num_produces, OPF_MAX_ARGS);
        }
        if (rule->op != NULL) {
            const opf_op_def *grad_op = opf_op_find(table, rule->op);
            if (grad_op == NULL) {
                return opf_fail(OPF_E_INVALID, OPF_VALIDATE, "op '%s': gradient op '%s' is not in table '%s'", op->name,
                                rule->op, table->name);
            }
            want_sources = grad_op->num_inputs;
            want_produces = grad_op->num_outputs;
        }
        if (rule->num_sources != want_sources || rule->num_produces != want_produces) {
            return opf_fail(OPF_E_INVALID, OPF_VALIDATE,
                            "op '%s': gradient rule %d has %d sources and %d products; expected %d and %d", op->name,
                            (int)g, (int)rule->num_sources, (int)rule->num_produces, (int)want_sources,
                            (int)want_produces);
        }
        for (int32_t i = 0; i < rule->num_sources; i++) {
            if (!opf_source_ok(op, rule->sources[i])) {
                return opf_fail(OPF_E_INVALID, OPF_VALIDATE, "op '%s': gradient rule %d: source %d is out of range",
                                op->name, (int)g, (int)i);
            }
        }
        for (int32_t i = 0; i < rule->num_produces; i++) {
            if (rule->produces[i] != -1 && !opf_in_range(rule->produces[i], op->num_inputs)) {
                return opf_fail(OPF_E_INVALID, OPF_VALIDATE, "op '%s': gradient rule %d produces unknown input %d",
                                op->name, (int)g, (int)rule->produces[i]);
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
        st = opf_validate_grads(table, op);
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
