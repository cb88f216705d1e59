/*
 * op.c — the op-table machinery: validating tables, checking a call against
 * its row (dtypes, devices, shape checks, output shapes, aliasing), inferring
 * output shapes, and running a row. Everything here is driven by the row's
 * declarations; no op is named.
 */
#include <stdio.h>
#include <string.h>

#include "engines.h"
#include "error.h"
#include "tensor.h"

/* What errors of a row are prefixed with: "myops.rowsum", or the bare name of
 * a hand-written row. */
static const char *opf_label(const opf_op_def *op) { return op->qualname != NULL ? op->qualname : op->name; }

/* Shapes of a call's inputs, as seen by the shape checks: present flags,
 * ranks and dims (-1: unknown). */
typedef struct opf_shapes {
    int32_t count;
    int present[OPF_MAX_ARGS];
    int32_t ndim[OPF_MAX_ARGS];
    const int64_t *dims[OPF_MAX_ARGS];
} opf_shapes;

static opf_shapes opf_shapes_of(const opf_op_def *op, const opf_tensor *const *inputs) {
    opf_shapes s = {.count = op->num_inputs};
    for (int32_t i = 0; i < op->num_inputs; i++) {
        const opf_tensor *t = inputs != NULL ? inputs[i] : NULL;
        s.present[i] = t != NULL;
        s.ndim[i] = t != NULL ? t->ndim : 0;
        s.dims[i] = t != NULL ? t->shape : NULL;
    }
    return s;
}

/* Resolves a possibly negative dim index of input `arg`; -1 if out of range. */
static int32_t opf_resolve_dim(const opf_shapes *s, int32_t arg, int32_t dim) {
    int32_t d = dim < 0 ? dim + s->ndim[arg] : dim;
    return d >= 0 && d < s->ndim[arg] ? d : -1;
}

static opf_status opf_check_dim_exists(const opf_op_def *op, const opf_shapes *s, int32_t arg, int32_t dim,
                                       int32_t *resolved) {
    *resolved = opf_resolve_dim(s, arg, dim);
    if (*resolved < 0) {
        char buf[OPF_SHAPE_STR_CAPACITY];
        return opf_fail(OPF_E_SHAPE, opf_label(op), "%s has rank %d (%s); dim %d does not exist", op->inputs[arg].name,
                        (int)s->ndim[arg], opf_format_dims(s->ndim[arg], s->dims[arg], buf), (int)dim);
    }
    return OPF_OK;
}

static int opf_dims_agree(int64_t a, int64_t b) { return a < 0 || b < 0 || a == b; }

static opf_status opf_run_check(const opf_op_def *op, const opf_check *c, const opf_shapes *s) {
    char abuf[OPF_SHAPE_STR_CAPACITY], bbuf[OPF_SHAPE_STR_CAPACITY];
    const char *a_name = op->inputs[c->a].name;
    if (!s->present[c->a] || (c->kind != OPF_CHECK_RANK && !s->present[c->b])) {
        return OPF_OK;
    }
    switch (c->kind) {
    case OPF_CHECK_RANK:
        if (s->ndim[c->a] != c->rank) {
            return opf_fail(OPF_E_SHAPE, opf_label(op), "%s must have rank %d, got rank %d (%s)", a_name, (int)c->rank,
                            (int)s->ndim[c->a], opf_format_dims(s->ndim[c->a], s->dims[c->a], abuf));
        }
        return OPF_OK;
    case OPF_CHECK_SAME_SHAPE: {
        int same = s->ndim[c->a] == s->ndim[c->b];
        for (int32_t d = 0; same && d < s->ndim[c->a]; d++) {
            same = opf_dims_agree(s->dims[c->a][d], s->dims[c->b][d]);
        }
        if (!same) {
            return opf_fail(OPF_E_SHAPE, opf_label(op), "shape mismatch: %s is %s, %s is %s", a_name,
                            opf_format_dims(s->ndim[c->a], s->dims[c->a], abuf), op->inputs[c->b].name,
                            opf_format_dims(s->ndim[c->b], s->dims[c->b], bbuf));
        }
        return OPF_OK;
    }
    case OPF_CHECK_DIM_EQ: {
        int32_t da, db;
        opf_status st = opf_check_dim_exists(op, s, c->a, c->a_dim, &da);
        if (st == OPF_OK) {
            st = opf_check_dim_exists(op, s, c->b, c->b_dim, &db);
        }
        if (st != OPF_OK) {
            return st;
        }
        if (!opf_dims_agree(s->dims[c->a][da], s->dims[c->b][db])) {
            return opf_fail(
                OPF_E_SHAPE, opf_label(op), "shape mismatch: %s is %s, %s is %s; dim %d of %s must equal dim %d of %s",
                a_name, opf_format_dims(s->ndim[c->a], s->dims[c->a], abuf), op->inputs[c->b].name,
                opf_format_dims(s->ndim[c->b], s->dims[c->b], bbuf), (int)da, a_name, (int)db, op->inputs[c->b].name);
        }
        return OPF_OK;
    }
    case OPF_CHECK_MIN_RANK:
        if (s->ndim[c->a] < c->rank) {
            return opf_fail(OPF_E_SHAPE, opf_label(op), "%s must have rank %d or more, got rank %d (%s)", a_name,
                            (int)c->rank, (int)s->ndim[c->a], opf_format_dims(s->ndim[c->a], s->dims[c->a], abuf));
        }
        return OPF_OK;
    case OPF_CHECK_DIM_IS: {
        int32_t da;
        opf_status st = opf_check_dim_exists(op, s, c->a, c->a_dim, &da);
        if (st == OPF_OK && !opf_dims_agree(s->dims[c->a][da], c->rank)) {
            return opf_fail(OPF_E_SHAPE, opf_label(op), "%s is %s; dim %d must be %d", a_name,
                            opf_format_dims(s->ndim[c->a], s->dims[c->a], abuf), (int)da, (int)c->rank);
        }
        return st;
    }
    case OPF_CHECK_BATCH_EQ: {
        int32_t na = s->ndim[c->a] - c->a_dim, nb = s->ndim[c->b] - c->b_dim;
        int same = na == nb;
        for (int32_t d = 0; same && d < na; d++) {
            same = opf_dims_agree(s->dims[c->a][d], s->dims[c->b][d]);
        }
        if (!same) {
            return opf_fail(OPF_E_SHAPE, opf_label(op),
                            "shape mismatch: %s is %s, %s is %s; their leading dims ('...') must be equal", a_name,
                            opf_format_dims(s->ndim[c->a], s->dims[c->a], abuf), op->inputs[c->b].name,
                            opf_format_dims(s->ndim[c->b], s->dims[c->b], bbuf));
        }
        return OPF_OK;
    }
    case OPF_CHECK_BROADCAST: {
        int32_t na = s->ndim[c->a], nb = s->ndim[c->b];
        for (int32_t k = 1; k <= na && k <= nb; k++) {
            int64_t da = s->dims[c->a][na - k], db = s->dims[c->b][nb - k];
            if (!opf_dims_agree(da, db) && da != 1 && db != 1) {
                return opf_fail(OPF_E_SHAPE, opf_label(op),
                                "shape mismatch: %s is %s, %s is %s; they must broadcast together (dim -%d: %lld vs "
                                "%lld)",
                                a_name, opf_format_dims(na, s->dims[c->a], abuf), op->inputs[c->b].name,
                                opf_format_dims(nb, s->dims[c->b], bbuf), (int)k, (long long)da, (long long)db);
            }
        }
        return OPF_OK;
    }
    case OPF_CHECK_NONE: break;
    }
    return opf_fail(OPF_E_INTERNAL, opf_label(op), "unknown shape check kind %d", (int)c->kind);
}

static opf_status opf_run_checks(const opf_op_def *op, const opf_shapes *s) {
    for (int32_t i = 0; i < op->num_checks; i++) {
        opf_status st = opf_run_check(op, &op->checks[i], s);
        if (st != OPF_OK) {
            return st;
        }
    }
    return OPF_OK;
}

/* The broadcast of the present inputs a rule names (NumPy's rules; -1, an
 * unknown dim, stays unknown unless another input fixes it). Refuses shapes
 * that do not broadcast, for a hand-written row without the checks. */
static opf_status opf_broadcast_rule(const opf_op_def *op, const opf_shapes *s, int32_t output, int32_t *ndim,
                                     int64_t *shape) {
    const opf_shape_rule *rule = &op->output_shapes[output];
    /* The common case first: inputs of one shape. */
    const int32_t first = rule->dims[0].input, first_ndim = s->ndim[first];
    int same = s->present[first];
    for (int32_t k = 1; same && k < rule->rank; k++) {
        const int32_t in = rule->dims[k].input;
        same = s->present[in] && s->ndim[in] == first_ndim &&
               (first_ndim == 0 || s->dims[in] == s->dims[first] ||
                memcmp(s->dims[in], s->dims[first], sizeof(int64_t) * (size_t)first_ndim) == 0);
    }
    if (same) {
        *ndim = first_ndim;
        if (first_ndim > 0) {
            memcpy(shape, s->dims[first], sizeof(int64_t) * (size_t)first_ndim);
        }
        return OPF_OK;
    }
    int32_t rank = -1;
    for (int32_t k = 0; k < rule->rank; k++) {
        int32_t in = rule->dims[k].input;
        rank = s->present[in] && s->ndim[in] > rank ? s->ndim[in] : rank;
    }
    if (rank < 0) {
        return opf_fail(OPF_E_INVALID, opf_label(op), "%s is the broadcast of inputs that are all absent",
                        op->outputs[output].name);
    }
    for (int32_t d = 0; d < rank; d++) {
        shape[d] = 1;
    }
    for (int32_t k = 0; k < rule->rank; k++) {
        int32_t in = rule->dims[k].input, n = s->ndim[in];
        for (int32_t d = 0; s->present[in] && d < n; d++) {
            int64_t v = s->dims[in][d], *r = &shape[rank - n + d];
            if (v == 1 || (v < 0 && *r >= 0 && *r != 1)) {
                continue;
            }
            if (*r == 1 || *r < 0) {
                *r = v;
            } else if (*r != v) {
                char buf[OPF_SHAPE_STR_CAPACITY], want[OPF_SHAPE_STR_CAPACITY];
                return opf_fail(OPF_E_SHAPE, opf_label(op),
                                "shape mismatch: %s is %s, which does not broadcast with %s (dim -%d: %lld vs %lld)",
                                op->inputs[in].name, opf_format_dims(n, s->dims[in], buf),
                                opf_format_dims(rank, shape, want), (int)(n - d), (long long)v, (long long)*r);
            }
        }
    }
    *ndim = rank;
    return OPF_OK;
}

/* Output shape from the rule, after the checks have passed. */
static opf_status opf_apply_rule(const opf_op_def *op, const opf_shapes *s, int32_t output, int32_t *ndim,
                                 int64_t *shape) {
    const opf_shape_rule *rule = &op->output_shapes[output];
    if (rule->kind == OPF_SHAPE_BROADCAST) {
        return opf_broadcast_rule(op, s, output, ndim, shape);
    }
    if (rule->kind == OPF_SHAPE_LIKE || rule->kind == OPF_SHAPE_SUM_TO) {
        if (!s->present[rule->like]) {
            return opf_fail(OPF_E_INVALID, opf_label(op), "%s takes its shape from %s, which is absent",
                            op->outputs[output].name, op->inputs[rule->like].name);
        }
        *ndim = s->ndim[rule->like];
        if (*ndim > 0) {
            memcpy(shape, s->dims[rule->like], sizeof(int64_t) * (size_t)*ndim);
        }
        return OPF_OK;
    }
    int32_t lead = 0;
    if (rule->kind == OPF_SHAPE_BATCH) {
        if (!s->present[rule->like]) {
            return opf_fail(OPF_E_INVALID, opf_label(op), "%s takes its shape from %s, which is absent",
                            op->outputs[output].name, op->inputs[rule->like].name);
        }
        lead = s->ndim[rule->like] - rule->drop;
        if (lead < 0 || lead + rule->rank > OPF_MAX_RANK) {
            char buf[OPF_SHAPE_STR_CAPACITY];
            return opf_fail(OPF_E_SHAPE, opf_label(op), "%s has rank %d (%s); %s cannot take its shape",
                            op->inputs[rule->like].name, (int)s->ndim[rule->like],
                            opf_format_dims(s->ndim[rule->like], s->dims[rule->like], buf), op->outputs[output].name);
        }
        for (int32_t d = 0; d < lead; d++) {
            shape[d] = s->dims[rule->like][d];
        }
    }
    *ndim = lead + rule->rank;
    for (int32_t d = 0; d < rule->rank; d++) {
        opf_dim_ref ref = rule->dims[d];
        int32_t resolved;
        if (ref.input < 0) {
            shape[lead + d] = ref.dim;
            continue;
        }
        if (!s->present[ref.input]) {
            return opf_fail(OPF_E_INVALID, opf_label(op), "%s takes a dim from %s, which is absent",
                            op->outputs[output].name, op->inputs[ref.input].name);
        }
        opf_status st = opf_check_dim_exists(op, s, ref.input, ref.dim, &resolved);
        if (st != OPF_OK) {
            return st;
        }
        shape[lead + d] = s->dims[ref.input][resolved];
    }
    return OPF_OK;
}

opf_status opf_op_infer_shape(const opf_op_def *op, const opf_tensor *const *inputs, int32_t output, int32_t *ndim,
                              int64_t *shape) {
    opf_clear_error();
    if (op == NULL || ndim == NULL || shape == NULL) {
        return opf_fail(OPF_E_INVALID, "opf_op_infer_shape", "op, ndim and shape must not be NULL");
    }
    if (output < 0 || output >= op->num_outputs) {
        return opf_fail(OPF_E_INVALID, opf_label(op), "has no output %d", (int)output);
    }
    for (int32_t i = 0; i < op->num_inputs; i++) {
        const opf_tensor *t = inputs != NULL ? inputs[i] : NULL;
        if (t == NULL && !(op->inputs[i].flags & OPF_ARG_OPTIONAL)) {
            return opf_fail(OPF_E_INVALID, opf_label(op), "%s is NULL", op->inputs[i].name);
        }
        if (t != NULL && (t->ndim < 0 || t->ndim > OPF_MAX_RANK || (t->ndim > 0 && t->shape == NULL))) {
            return opf_fail(OPF_E_SHAPE, opf_label(op), "%s has an invalid rank %d", op->inputs[i].name, (int)t->ndim);
        }
    }
    opf_shapes s = opf_shapes_of(op, inputs);
    opf_status st = opf_run_checks(op, &s);
    return st != OPF_OK ? st : opf_apply_rule(op, &s, output, ndim, shape);
}

void opf_op_default_attrs(const opf_op_def *op, opf_attr_value *attrs) {
    for (int32_t i = 0; i < op->num_attrs; i++) {
        attrs[i] = op->attrs[i].default_value;
    }
}

/* "'none', 'relu'" into buf. */
static const char *opf_choices_text(const opf_attr_def *attr, char *buf, size_t capacity) {
    buf[0] = '\0';
    for (int32_t c = 0; c < OPF_MAX_CHOICES && attr->choices[c] != NULL; c++) {
        size_t used = strlen(buf);
        snprintf(buf + used, capacity - used, "%s'%s'", c ? ", " : "", attr->choices[c]);
    }
    return buf;
}

static int32_t opf_num_choices(const opf_attr_def *attr) {
    int32_t n = 0;
    while (n < OPF_MAX_CHOICES && attr->choices[n] != NULL) {
        n++;
    }
    return n;
}

opf_status opf_op_attr_choice(const opf_op_def *op, int32_t attr, const char *text, size_t length, int64_t *index) {
    opf_clear_error();
    if (op == NULL || index == NULL || attr < 0 || attr >= op->num_attrs || op->attrs[attr].type != OPF_ATTR_ENUM) {
        return opf_fail(OPF_E_INVALID, "opf_op_attr_choice", "needs an op, an enum attribute of it and an index");
    }
    const opf_attr_def *def = &op->attrs[attr];
    for (int32_t c = 0; c < opf_num_choices(def); c++) {
        if (text != NULL && strlen(def->choices[c]) == length && memcmp(def->choices[c], text, length) == 0) {
            *index = c;
            return OPF_OK;
        }
    }
    char names[OPF_MAX_CHOICES * 36];
    int shown = (int)(length > 200 ? 200 : length);
    return opf_fail(OPF_E_INVALID, opf_label(op), "%s must be one of %s, got '%.*s'", def->name,
                    opf_choices_text(def, names, sizeof names), shown, text != NULL ? text : "");
}

static opf_status opf_check_attrs(const opf_op_def *op, const opf_attr_value *attrs) {
    for (int32_t i = 0; i < op->num_attrs; i++) {
        const opf_attr_def *attr = &op->attrs[i];
        if (attr->type == OPF_ATTR_ENUM && (attrs[i].i < 0 || attrs[i].i >= opf_num_choices(attr))) {
            char names[OPF_MAX_CHOICES * 36];
            return opf_fail(OPF_E_INVALID, opf_label(op), "%s must be one of %s; got choice index %lld", attr->name,
                            opf_choices_text(attr, names, sizeof names), (long long)attrs[i].i);
        }
    }
    return OPF_OK;
}

/* Validates every present tensor argument and that they share one dtype. */
static opf_status opf_check_args(const opf_op_def *op, const opf_tensor *const *args, int32_t count,
                                 const opf_arg_def *defs, opf_device_type device, const opf_tensor **first) {
    for (int32_t i = 0; i < count; i++) {
        const opf_tensor *t = args != NULL ? args[i] : NULL;
        if (t == NULL) {
            if (!(defs[i].flags & OPF_ARG_OPTIONAL)) {
                return opf_fail(OPF_E_INVALID, opf_label(op), "%s is NULL", defs[i].name);
            }
            continue;
        }
        opf_status st = opf_tensor_check(opf_label(op), defs[i].name, t, op->dtypes, device);
        if (st != OPF_OK) {
            return st;
        }
        if (*first == NULL) {
            *first = t;
        } else if (t->dtype != (*first)->dtype) {
            return opf_fail(OPF_E_DTYPE, opf_label(op),
                            "dtype mismatch: %s is %s, expected %s like the other arguments", defs[i].name,
                            opf_dtype_name(t->dtype), opf_dtype_name((*first)->dtype));
        } else if (t->device.id != (*first)->device.id) {
            return opf_fail(OPF_E_DEVICE, opf_label(op),
                            "device mismatch: %s is on device %d, the other arguments on %d", defs[i].name,
                            (int)t->device.id, (int)(*first)->device.id);
        }
    }
    return OPF_OK;
}

/* One tensor argument of a call, as the aliasing rules see it. */
typedef struct opf_alias_arg {
    const opf_tensor *t;
    const char *name;
    int written; /* an output or a mutated input */
    int output;
    int summed; /* an output summed to an input's shape (OPF_SHAPE_SUM_TO): never in place */
} opf_alias_arg;

/* How `w` (written) relates to `x`, another argument: NULL when allowed, else
 * the verb of the refusal; *unsure is set when the overlap could not be
 * decided. Exact in-place is allowed only onto a read-only input of an
 * elementwise row; any other shared byte is refused. */
static const char *opf_alias_conflict(const opf_op_def *op, const opf_alias_arg *w, const opf_alias_arg *x,
                                      int *unsure) {
    opf_overlap overlap = opf_tensors_overlap(w->t, x->t);
    *unsure = overlap == OPF_OVERLAP_UNKNOWN;
    if (overlap == OPF_DISJOINT) {
        return NULL;
    }
    if (x->written) {
        return *unsure ? "may overlap" : "overlap";
    }
    if (!(op->flags & OPF_OP_ELEMENTWISE) || w->summed) {
        return *unsure ? "may overlap input" : "overlaps input";
    }
    if (opf_tensors_alias_exactly(w->t, x->t)) {
        return NULL;
    }
    return *unsure ? "may partially overlap input" : "partially overlaps input";
}

#define OPF_UNSURE " (their strides are too irregular to tell)"

/* No written argument may overlap itself or share memory with another
 * argument, except an output (or mutated input) of an elementwise row that is
 * exactly a read-only input. Read-only inputs may overlap each other. */
static opf_status opf_check_aliasing(const opf_op_def *op, const opf_tensor *const *inputs,
                                     const opf_tensor *const *outputs) {
    opf_alias_arg args[2 * OPF_MAX_ARGS];
    int32_t n = 0;
    for (int32_t i = 0; i < op->num_inputs; i++) {
        if (inputs[i] != NULL) {
            args[n++] =
                (opf_alias_arg){inputs[i], op->inputs[i].name, (op->inputs[i].flags & OPF_ARG_MUTATED) != 0, 0, 0};
        }
    }
    for (int32_t o = 0; o < op->num_outputs; o++) {
        if (outputs[o] != NULL) {
            args[n++] =
                (opf_alias_arg){outputs[o], op->outputs[o].name, 1, 1, op->output_shapes[o].kind == OPF_SHAPE_SUM_TO};
        }
    }
    for (int32_t i = 0; i < n; i++) {
        const opf_alias_arg *w = &args[i];
        if (!w->written) {
            continue;
        }
        opf_overlap self = opf_tensor_self_overlaps(w->t);
        if (self != OPF_DISJOINT) {
            const char *how = self == OPF_OVERLAP ? "has" : "may have";
            return w->output ? opf_fail(OPF_E_LAYOUT, opf_label(op),
                                        "%s %s overlapping elements (a zero or overlapping stride%s); outputs must not",
                                        w->name, how, self == OPF_OVERLAP ? "" : ", or strides too irregular to tell")
                             : opf_fail(OPF_E_LAYOUT, opf_label(op),
                                        "%s is written in place but %s overlapping elements (a zero or overlapping "
                                        "stride%s)",
                                        w->name, how, self == OPF_OVERLAP ? "" : ", or strides too irregular to tell");
        }
    }
    for (int32_t i = 0; i < n; i++) {
        const opf_alias_arg *w = &args[i];
        for (int32_t j = 0; w->written && j < n; j++) {
            const opf_alias_arg *x = &args[j];
            if (j == i || (x->written && j > i)) {
                continue; /* each pair of written arguments once */
            }
            int unsure;
            const char *conflict = opf_alias_conflict(op, w, x, &unsure);
            if (conflict == NULL) {
                continue;
            }
            const char *why = unsure ? OPF_UNSURE : "";
            if (x->written && x->output && w->output) {
                return opf_fail(OPF_E_LAYOUT, opf_label(op), "outputs %s and %s %s%s", x->name, w->name, conflict, why);
            }
            if (x->written) {
                return opf_fail(OPF_E_LAYOUT, opf_label(op),
                                "%s%s and %s%s %s%s; arguments an op writes must not share memory", x->name,
                                x->output ? "" : " (written in place)", w->name, w->output ? "" : " (written in place)",
                                conflict, why);
            }
            return opf_fail(OPF_E_LAYOUT, opf_label(op), "%s%s %s %s%s; %s", w->name,
                            w->output ? "" : " (written in place)", conflict, x->name, why,
                            w->summed                        ? "an output summed over broadcast dims cannot be "
                                                               "written in place"
                            : op->flags & OPF_OP_ELEMENTWISE ? "in place is allowed only onto the same elements"
                                                             : "this op cannot run in place");
        }
    }
    return OPF_OK;
}

/* Outputs must have the inferred shapes; then the aliasing rules above. */
static opf_status opf_check_outputs(const opf_op_def *op, const opf_shapes *s, const opf_tensor *const *inputs,
                                    const opf_tensor *const *outputs) {
    for (int32_t o = 0; o < op->num_outputs; o++) {
        const opf_tensor *y = outputs != NULL ? outputs[o] : NULL;
        const char *name = op->outputs[o].name;
        if (y == NULL) {
            continue;
        }
        int32_t ndim;
        int64_t shape[OPF_MAX_RANK];
        opf_status st = opf_apply_rule(op, s, o, &ndim, shape);
        if (st != OPF_OK) {
            return st;
        }
        int same = ndim == y->ndim;
        for (int32_t d = 0; same && d < ndim; d++) {
            same = shape[d] == y->shape[d];
        }
        if (!same) {
            char got[OPF_SHAPE_STR_CAPACITY], want[OPF_SHAPE_STR_CAPACITY];
            return opf_fail(OPF_E_SHAPE, opf_label(op), "%s has shape %s, expected %s", name,
                            opf_format_dims(y->ndim, y->shape, got), opf_format_dims(ndim, shape, want));
        }
    }
    return opf_check_aliasing(op, inputs, outputs);
}

/* Everything opf_op_run and opf_op_run_cuda check before computing. */
static opf_status opf_op_validate(const opf_op_def *op, const opf_tensor *const *inputs,
                                  const opf_tensor *const *outputs, const opf_attr_value *attrs,
                                  opf_device_type device) {
    const opf_tensor *first = NULL;
    opf_status st = opf_check_args(op, inputs, op->num_inputs, op->inputs, device, &first);
    if (st == OPF_OK) {
        st = opf_check_args(op, outputs, op->num_outputs, op->outputs, device, &first);
    }
    if (st == OPF_OK) {
        st = opf_check_attrs(op, attrs);
    }
    if (st != OPF_OK) {
        return st;
    }
    opf_shapes s = opf_shapes_of(op, inputs);
    st = opf_run_checks(op, &s);
    return st != OPF_OK ? st : opf_check_outputs(op, &s, inputs, outputs);
}

static const opf_tensor *const opf_no_tensors[OPF_MAX_ARGS] = {NULL};

/* A call with its defaults filled in: NULL argument lists become empty ones
 * and NULL attrs the row's defaults (held in `defaults`). */
typedef struct opf_call {
    const opf_tensor *const *inputs;
    const opf_tensor *const *outputs;
    const opf_attr_value *attrs;
    opf_attr_value defaults[OPF_MAX_ATTRS];
} opf_call;

/* Fills `call` and validates it for `device`. */
static opf_status opf_call_prepare(opf_call *call, const opf_op_def *op, const opf_tensor *const *inputs,
                                   const opf_tensor *const *outputs, const opf_attr_value *attrs,
                                   opf_device_type device) {
    call->inputs = inputs != NULL ? inputs : opf_no_tensors;
    call->outputs = outputs != NULL ? outputs : opf_no_tensors;
    if (attrs == NULL) {
        opf_op_default_attrs(op, call->defaults);
        attrs = call->defaults;
    }
    call->attrs = attrs;
    return opf_op_validate(op, call->inputs, call->outputs, call->attrs, device);
}

opf_status opf_op_run(const opf_op_def *op, const opf_tensor *const *inputs, const opf_tensor *const *outputs,
                      const opf_attr_value *attrs) {
    opf_clear_error();
    if (op == NULL) {
        return opf_fail(OPF_E_INVALID, "opf_op_run", "op is NULL");
    }
    opf_call call;
    opf_status st = opf_call_prepare(&call, op, inputs, outputs, attrs, OPF_DEVICE_CPU);
    if (st != OPF_OK) {
        return st;
    }
    if (op->eltwise != NULL) {
        st = opf_eltwise_engine_run(op, call.inputs, call.outputs, call.attrs);
    } else if (op->row != NULL) {
        st = opf_row_engine_run(op, call.inputs, call.outputs, call.attrs);
    } else {
        st = op->compute(call.inputs, call.outputs, call.attrs);
    }
    if (st != OPF_OK) {
        opf_error_attribute(st, opf_label(op));
    }
    return st;
}

opf_status opf_op_run_cuda(const opf_op_def *op, const opf_tensor *const *inputs, const opf_tensor *const *outputs,
                           const opf_attr_value *attrs, void *stream) {
    opf_clear_error();
    if (op == NULL) {
        return opf_fail(OPF_E_INVALID, "opf_op_run_cuda", "op is NULL");
    }
    /* The row's own CUDA kernel, or else its eltwise or row kernel's CUDA
     * build (a declared row names it by opf_cuda_eltwise_compute or
     * opf_cuda_row_compute). */
    int eltwise = 0, rowwise = 0;
#ifdef OPF_HAVE_CUDA
    eltwise = op->eltwise != NULL && op->eltwise->cuda != NULL &&
              (op->compute_cuda == NULL || op->compute_cuda == opf_cuda_eltwise_compute);
    rowwise = !eltwise && op->row != NULL && op->row->cuda != NULL &&
              (op->compute_cuda == NULL || op->compute_cuda == opf_cuda_row_compute);
#endif
    if (op->compute_cuda == NULL && !eltwise && !rowwise) {
        return opf_fail(OPF_E_UNSUPPORTED, opf_label(op), "this op has no CUDA kernel%s",
                        opf_cuda_device_count() == 0 ? " (or this library was built without CUDA)" : "");
    }
    opf_call call;
    opf_status st = opf_call_prepare(&call, op, inputs, outputs, attrs, OPF_DEVICE_CUDA);
    if (st == OPF_OK) {
#ifdef OPF_HAVE_CUDA
        st = eltwise   ? opf_cuda_eltwise_run(opf_label(op), op, call.inputs, call.outputs, call.attrs, stream)
             : rowwise ? opf_cuda_row_run(opf_label(op), op, call.inputs, call.outputs, call.attrs, stream)
                       : op->compute_cuda(call.inputs, call.outputs, call.attrs, stream);
#else
        st = op->compute_cuda(call.inputs, call.outputs, call.attrs, stream);
#endif
        if (st != OPF_OK) {
            opf_error_attribute(st, opf_label(op));
        }
    }
    return st;
}
