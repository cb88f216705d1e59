/*
 * decl.c — resolving a declared table (opf_ops_decl) into rows.
 *
 * Each opf_op_decl is one signature string, e.g.
 *     "dense(x[N,K], w[K,M], b[M]?, *, activation: {none, relu} = none) -> y[N,M]"
 * plus optional gradient and tangent rule strings and a kernel. This file parses them and
 * writes the row an adapter reads: arguments, attributes, the shape checks
 * and output shape rules implied by the dims, gradient rules, flags. Every
 * mistake is refused with a message naming the table, the row and the place.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engines.h"
#include "error.h"

enum {
    OPF_MAX_SYMBOLS = 32,    /* distinct dim names in one signature */
    OPF_DECL_ERROR_MAX = 384 /* room for one parse error */
};

/* The dims of one tensor in a signature: "[..., N, 3]"; or, for an output,
 * a shape function of inputs: "[broadcast(a, b)]", "[sum_to(a)]". */
typedef struct opf_pattern {
    int ellipsis; /* a leading "..." (a tensor without dims is "[...]") */
    int32_t ndims;
    int32_t sym[OPF_MAX_RANK]; /* symbol index, or -1 for a literal size */
    int64_t size[OPF_MAX_RANK];
    opf_shape_kind func;        /* OPF_SHAPE_BROADCAST or OPF_SHAPE_SUM_TO for a shape function; else NONE */
    int32_t num_refs;           /* the function's inputs */
    int32_t refs[OPF_MAX_ARGS]; /* their indices */
} opf_pattern;

/* A parse in progress: the text, a cursor, the string arena, the symbols. */
typedef struct opf_parser {
    const char *text, *at;
    char *arena, *arena_end;
    const char *symbols[OPF_MAX_SYMBOLS];
    int32_t num_symbols;
    char error[OPF_DECL_ERROR_MAX];
} opf_parser;

static int opf_parse_fail(opf_parser *p, const char *fmt, ...) OPF_PRINTF(2, 3);
static int opf_parse_fail(opf_parser *p, const char *fmt, ...) {
    if (p->error[0] != '\0') {
        return 0;
    }
    /* While text is parsed, say where; later checks (text == NULL) name what. */
    int used = p->text != NULL ? snprintf(p->error, sizeof p->error, "at column %d: ", (int)(p->at - p->text) + 1) : 0;
    va_list args;
    va_start(args, fmt);
    if (used >= 0 && (size_t)used < sizeof p->error) {
        vsnprintf(p->error + used, sizeof p->error - (size_t)used, fmt, args);
    }
    va_end(args);
    return 0;
}

static void opf_skip_space(opf_parser *p) {
    while (*p->at != '\0' && isspace((unsigned char)*p->at)) {
        p->at++;
    }
}

/* Consumes `token` if it comes next. */
static int opf_accept(opf_parser *p, const char *token) {
    opf_skip_space(p);
    size_t len = strlen(token);
    if (strncmp(p->at, token, len) == 0) {
        p->at += len;
        return 1;
    }
    return 0;
}

static int opf_expect(opf_parser *p, const char *token) {
    return opf_accept(p, token) || opf_parse_fail(p, "expected '%s'", token);
}

/* A copy of text[0 .. len) in the arena (sized by the caller to fit). */
static const char *opf_intern(opf_parser *p, const char *text, size_t len) {
    if ((size_t)(p->arena_end - p->arena) < len + 1) {
        return NULL;
    }
    char *copy = p->arena;
    memcpy(copy, text, len);
    copy[len] = '\0';
    p->arena += len + 1;
    return copy;
}

/* An identifier: [A-Za-z_][A-Za-z0-9_]*. */
static const char *opf_ident(opf_parser *p, const char *what) {
    opf_skip_space(p);
    const char *start = p->at;
    if (!(isalpha((unsigned char)*p->at) || *p->at == '_')) {
        opf_parse_fail(p, "expected %s", what);
        return NULL;
    }
    while (isalnum((unsigned char)*p->at) || *p->at == '_') {
        p->at++;
    }
    const char *name = opf_intern(p, start, (size_t)(p->at - start));
    if (name == NULL) {
        opf_parse_fail(p, "out of room for names");
    }
    return name;
}

static int32_t opf_symbol(opf_parser *p, const char *name) {
    for (int32_t i = 0; i < p->num_symbols; i++) {
        if (strcmp(p->symbols[i], name) == 0) {
            return i;
        }
    }
    if (p->num_symbols == OPF_MAX_SYMBOLS) {
        return opf_parse_fail(p, "more than %d dim names", OPF_MAX_SYMBOLS) - 1;
    }
    p->symbols[p->num_symbols] = name;
    return p->num_symbols++;
}

static int32_t opf_arg_index(const opf_arg_def *args, int32_t count, const char *name, size_t len);

/* The shape functions an output's brackets may hold. */
static const struct {
    const char *name;
    opf_shape_kind kind;
} opf_shape_funcs[] = {{"broadcast", OPF_SHAPE_BROADCAST}, {"sum_to", OPF_SHAPE_SUM_TO}};

/* After "[": "broadcast(a, b)]" or "sum_to(a)]" when a name and '(' come
 * next (a dim name is never followed by '('); 1 with pat->func set, 1 with
 * nothing consumed for plain dims, 0 on an error. `row` holds the inputs
 * (NULL while the inputs themselves are parsed: no shape function there). */
static int opf_parse_shape_func(opf_parser *p, const opf_op_def *row, opf_pattern *pat) {
    opf_skip_space(p);
    const char *start = p->at, *end = p->at;
    while (isalnum((unsigned char)*end) || *end == '_') {
        end++;
    }
    const char *after = end;
    while (isspace((unsigned char)*after)) {
        after++;
    }
    if (end == start || isdigit((unsigned char)*start) || *after != '(') {
        return 1;
    }
    size_t len = (size_t)(end - start);
    for (size_t f = 0; f < sizeof opf_shape_funcs / sizeof opf_shape_funcs[0]; f++) {
        if (strlen(opf_shape_funcs[f].name) == len && strncmp(opf_shape_funcs[f].name, start, len) == 0) {
            pat->func = opf_shape_funcs[f].kind;
        }
    }
    if (pat->func == OPF_SHAPE_NONE) {
        return opf_parse_fail(p, "unknown shape function '%.*s' (broadcast(...) or sum_to(...))", (int)len, start);
    }
    if (row == NULL) {
        return opf_parse_fail(p, "%.*s(...) gives an output's shape; an input's dims are names, sizes or '...'",
                              (int)len, start);
    }
    p->at = after + 1;
    do {
        opf_skip_space(p);
        const char *name = p->at;
        while (isalnum((unsigned char)*p->at) || *p->at == '_') {
            p->at++;
        }
        int32_t i = opf_arg_index(row->inputs, row->num_inputs, name, (size_t)(p->at - name));
        if (i < 0) {
            p->at = name;
            return opf_parse_fail(p, "expected the name of an input of this op");
        }
        for (int32_t k = 0; k < pat->num_refs; k++) {
            if (pat->refs[k] == i) {
                return opf_parse_fail(p, "input '%s' is named twice", row->inputs[i].name);
            }
        }
        pat->refs[pat->num_refs++] = i; /* at most num_inputs, all distinct */
    } while (opf_accept(p, ","));
    if (!opf_expect(p, ")") || !opf_expect(p, "]")) {
        return 0;
    }
    if (pat->func == OPF_SHAPE_SUM_TO && pat->num_refs != 1) {
        return opf_parse_fail(p, "sum_to(...) names one input");
    }
    if (pat->func == OPF_SHAPE_BROADCAST && pat->num_refs > OPF_MAX_RULE_RANK) {
        return opf_parse_fail(p, "broadcast(...) names at most %d inputs", OPF_MAX_RULE_RANK);
    }
    return 1;
}

/* "[...]", "[N, M]", "[..., 3]"; nothing at all means "[...]"; for an output
 * (row != NULL) also "[broadcast(a, b)]" and "[sum_to(a)]". */
static int opf_parse_pattern(opf_parser *p, const opf_op_def *row, opf_pattern *pat) {
    memset(pat, 0, sizeof *pat);
    if (!opf_accept(p, "[")) {
        pat->ellipsis = 1;
        return 1;
    }
    if (opf_accept(p, "]")) {
        return 1; /* a 0-d tensor */
    }
    if (!opf_parse_shape_func(p, row, pat)) {
        return 0;
    }
    if (pat->func != OPF_SHAPE_NONE) {
        return 1;
    }
    do {
        if (opf_accept(p, "...")) {
            if (pat->ellipsis || pat->ndims > 0) {
                return opf_parse_fail(p, "'...' may only come first among a tensor's dims");
            }
            pat->ellipsis = 1;
            continue;
        }
        if (pat->ndims == OPF_MAX_RANK) {
            return opf_parse_fail(p, "more than %d dims", OPF_MAX_RANK);
        }
        opf_skip_space(p);
        if (isdigit((unsigned char)*p->at)) {
            char *end;
            errno = 0;
            long long size = strtoll(p->at, &end, 10);
            if (errno != 0 || size < 0 || size > INT32_MAX) {
                return opf_parse_fail(p, "a literal dim size must be between 0 and %d", INT32_MAX);
            }
            p->at = end;
            pat->sym[pat->ndims] = -1;
            pat->size[pat->ndims++] = size;
            continue;
        }
        const char *name = opf_ident(p, "a dim name, a size or '...'");
        int32_t sym = name != NULL ? opf_symbol(p, name) : -1;
        if (sym < 0) {
            return 0;
        }
        pat->sym[pat->ndims++] = sym;
    } while (opf_accept(p, ","));
    return opf_expect(p, "]");
}

/* The parsed tensors of a signature, with their patterns. */
typedef struct opf_parsed {
    opf_pattern in[OPF_MAX_ARGS], out[OPF_MAX_ARGS];
    int broadcast[OPF_MAX_ARGS]; /* inputs that broadcast together (named by broadcast(...) or sum_to(...)) */
} opf_parsed;

/* One tensor argument: name, dims, '?' and (inputs) '!' and ": shape". */
static int opf_parse_tensor(opf_parser *p, const opf_op_def *row, opf_arg_def *arg, opf_pattern *pat, int is_input) {
    arg->name = opf_ident(p, is_input ? "an input name" : "an output name");
    if (arg->name == NULL || !opf_parse_pattern(p, is_input ? NULL : row, pat)) {
        return 0;
    }
    if (pat->ellipsis) {
        arg->flags |= OPF_ARG_BATCHED;
        arg->core_dims = pat->ndims;
    }
    for (;;) {
        if (opf_accept(p, "?")) {
            arg->flags |= OPF_ARG_OPTIONAL;
        } else if (is_input && opf_accept(p, "!")) {
            arg->flags |= OPF_ARG_MUTATED;
        } else if (is_input && opf_accept(p, ":")) {
            const char *kind = opf_ident(p, "'shape' after ':'");
            if (kind == NULL) {
                return 0;
            }
            if (strcmp(kind, "shape") != 0) {
                return opf_parse_fail(p, "input '%s': expected 'shape' after ':', got '%s' (attributes go after '*')",
                                      arg->name, kind);
            }
            arg->flags |= OPF_ARG_SHAPE_ONLY;
        } else {
            return 1;
        }
    }
}

/* A number: a float or an integer attribute's default. */
static int opf_parse_number(opf_parser *p, opf_attr_def *attr) {
    opf_skip_space(p);
    char *end;
    errno = 0;
    if (attr->type == OPF_ATTR_INT) {
        attr->default_value.i = strtoll(p->at, &end, 10);
    } else {
        attr->default_value.f = strtod(p->at, &end);
    }
    if (end == p->at || errno != 0) {
        return opf_parse_fail(p, "expected a %s default for '%s'", attr->type == OPF_ATTR_INT ? "integer" : "number",
                              attr->name);
    }
    p->at = end;
    return 1;
}

/* "name: float = 1.5", "n: int = 3", "act: {none, relu} = none". */
static int opf_parse_attr(opf_parser *p, opf_attr_def *attr) {
    attr->name = opf_ident(p, "an attribute name");
    if (attr->name == NULL || !opf_expect(p, ":")) {
        return 0;
    }
    int32_t choices = 0;
    if (opf_accept(p, "{")) {
        attr->type = OPF_ATTR_ENUM;
        do {
            if (choices == OPF_MAX_CHOICES - 1) {
                return opf_parse_fail(p, "'%s' has more than %d choices", attr->name, OPF_MAX_CHOICES - 1);
            }
            if ((attr->choices[choices++] = opf_ident(p, "a choice name")) == NULL) {
                return 0;
            }
        } while (opf_accept(p, ","));
        if (!opf_expect(p, "}")) {
            return 0;
        }
    } else if (opf_accept(p, "float")) {
        attr->type = OPF_ATTR_FLOAT;
    } else if (opf_accept(p, "int")) {
        attr->type = OPF_ATTR_INT;
    } else {
        return opf_parse_fail(p, "attribute '%s' needs a type: float, int or {choice, ...}", attr->name);
    }
    if (!opf_accept(p, "=")) {
        return 1; /* zero, or the first choice */
    }
    if (attr->type != OPF_ATTR_ENUM) {
        return opf_parse_number(p, attr);
    }
    const char *value = opf_ident(p, "a choice name");
    for (int32_t c = 0; value != NULL && c < choices; c++) {
        if (strcmp(attr->choices[c], value) == 0) {
            attr->default_value.i = c;
            return 1;
        }
    }
    return value != NULL && opf_parse_fail(p, "default '%s' of '%s' is not one of its choices", value, attr->name);
}

/* "name(inputs, *, attrs) -> outputs" into the row's arguments and attrs. */
static int opf_parse_signature(opf_parser *p, opf_op_def *row, opf_parsed *parsed) {
    if ((row->name = opf_ident(p, "the op's name")) == NULL || !opf_expect(p, "(")) {
        return 0;
    }
    int in_attrs = 0;
    if (!opf_accept(p, ")")) {
        do {
            if (!in_attrs && opf_accept(p, "*")) {
                in_attrs = 1;
                continue;
            }
            if (in_attrs) {
                if (row->num_attrs == OPF_MAX_ATTRS) {
                    return opf_parse_fail(p, "more than %d attributes", OPF_MAX_ATTRS);
                }
                if (!opf_parse_attr(p, &row->attrs[row->num_attrs++])) {
                    return 0;
                }
                continue;
            }
            if (row->num_inputs == OPF_MAX_ARGS) {
                return opf_parse_fail(p, "more than %d inputs", OPF_MAX_ARGS);
            }
            int32_t i = row->num_inputs++;
            if (!opf_parse_tensor(p, row, &row->inputs[i], &parsed->in[i], 1)) {
                return 0;
            }
        } while (opf_accept(p, ","));
        if (!opf_expect(p, ")")) {
            return 0;
        }
    }
    if (!opf_expect(p, "->")) {
        return 0;
    }
    int parens = opf_accept(p, "(");
    if (!(parens && opf_accept(p, ")"))) {
        do {
            if (row->num_outputs == OPF_MAX_ARGS) {
                return opf_parse_fail(p, "more than %d outputs", OPF_MAX_ARGS);
            }
            int32_t o = row->num_outputs++;
            if (!opf_parse_tensor(p, row, &row->outputs[o], &parsed->out[o], 0)) {
                return 0;
            }
        } while (opf_accept(p, ","));
        if (parens && !opf_expect(p, ")")) {
            return 0;
        }
    }
    opf_skip_space(p);
    return *p->at == '\0' || opf_parse_fail(p, "unexpected '%s' after the outputs", p->at);
}

/* --- checks and shape rules from the dims ------------------------------------------------------------------------- */

static int opf_add_check(opf_parser *p, opf_op_def *row, opf_check check) {
    if (row->num_checks == OPF_MAX_CHECKS) {
        return opf_parse_fail(p, "the dims imply more than %d shape checks", OPF_MAX_CHECKS);
    }
    row->checks[row->num_checks++] = check;
    return 1;
}

/* Where a dim of an input sits, counted from the end when the input has "...". */
static int32_t opf_dim_index(const opf_pattern *pat, int32_t d) { return pat->ellipsis ? d - pat->ndims : d; }

static int opf_same_pattern(const opf_pattern *a, const opf_pattern *b) {
    if (a->ellipsis != b->ellipsis || a->ndims != b->ndims) {
        return 0;
    }
    for (int32_t d = 0; d < a->ndims; d++) {
        if (a->sym[d] != b->sym[d] || (a->sym[d] < 0 && a->size[d] != b->size[d])) {
            return 0;
        }
    }
    return 1;
}

/* The input holding the first occurrence of `sym`, preferring a required
 * input (a check naming an absent optional input is skipped). */
static int opf_find_symbol(const opf_op_def *row, const opf_parsed *parsed, int32_t sym, int32_t *input, int32_t *dim) {
    for (int pass = 0; pass < 2; pass++) {
        for (int32_t i = 0; i < row->num_inputs; i++) {
            int optional = (row->inputs[i].flags & OPF_ARG_OPTIONAL) != 0;
            if (optional != pass) {
                continue;
            }
            for (int32_t d = 0; d < parsed->in[i].ndims; d++) {
                if (parsed->in[i].sym[d] == sym) {
                    *input = i;
                    *dim = opf_dim_index(&parsed->in[i], d);
                    return 1;
                }
            }
        }
    }
    return 0;
}

/* The reference input for "...": the first required input that has it
 * (inputs that broadcast are no reference: their dims are their own). */
static int32_t opf_batch_input(const opf_op_def *row, const opf_parsed *parsed) {
    int32_t found = -1;
    for (int32_t i = row->num_inputs - 1; i >= 0; i--) {
        if (parsed->in[i].ellipsis && !parsed->broadcast[i] &&
            (found < 0 || !(row->inputs[i].flags & OPF_ARG_OPTIONAL))) {
            found = i;
        }
    }
    return found;
}

static int opf_input_checks(opf_parser *p, opf_op_def *row, const opf_parsed *parsed) {
    int32_t batch = opf_batch_input(row, parsed);
    for (int32_t i = 0; i < row->num_inputs; i++) {
        const opf_pattern *pat = &parsed->in[i];
        if (parsed->broadcast[i]) {
            /* Inputs that broadcast: every pair broadcasts together (pairs
             * suffice: each dim's sizes other than 1 are then all equal). */
            for (int32_t j = 0; j < i; j++) {
                if (parsed->broadcast[j] &&
                    !opf_add_check(p, row, (opf_check){.kind = OPF_CHECK_BROADCAST, .a = j, .b = i})) {
                    return 0;
                }
            }
            continue;
        }
        /* An input with exactly another input's dims: one same-shape check. */
        int32_t twin = -1;
        for (int32_t j = 0; j < i && twin < 0; j++) {
            if (!(row->inputs[j].flags & OPF_ARG_OPTIONAL) && opf_same_pattern(&parsed->in[j], pat) &&
                (pat->ndims > 0 || !pat->ellipsis || j == batch)) {
                twin = j;
            }
        }
        if (twin >= 0) {
            if (!opf_add_check(p, row, (opf_check){.kind = OPF_CHECK_SAME_SHAPE, .a = twin, .b = i})) {
                return 0;
            }
            continue;
        }
        if ((pat->ndims > 0 || !pat->ellipsis) &&
            !opf_add_check(
                p, row,
                (opf_check){.kind = pat->ellipsis ? OPF_CHECK_MIN_RANK : OPF_CHECK_RANK, .a = i, .rank = pat->ndims})) {
            return 0;
        }
        if (pat->ellipsis && i != batch &&
            !opf_add_check(p, row,
                           (opf_check){.kind = OPF_CHECK_BATCH_EQ,
                                       .a = batch,
                                       .a_dim = parsed->in[batch].ndims,
                                       .b = i,
                                       .b_dim = pat->ndims})) {
            return 0;
        }
        for (int32_t d = 0; d < pat->ndims; d++) {
            int32_t at = opf_dim_index(pat, d), ref, ref_dim;
            if (pat->sym[d] < 0) {
                if (!opf_add_check(
                        p, row,
                        (opf_check){.kind = OPF_CHECK_DIM_IS, .a = i, .a_dim = at, .rank = (int32_t)pat->size[d]})) {
                    return 0;
                }
                continue;
            }
            opf_find_symbol(row, parsed, pat->sym[d], &ref, &ref_dim);
            if ((ref != i || ref_dim != at) &&
                !opf_add_check(
                    p, row, (opf_check){.kind = OPF_CHECK_DIM_EQ, .a = ref, .a_dim = ref_dim, .b = i, .b_dim = at})) {
                return 0;
            }
        }
    }
    return 1;
}

static int opf_output_rule(opf_parser *p, const opf_op_def *row, const opf_parsed *parsed, int32_t o,
                           opf_shape_rule *rule) {
    const opf_pattern *pat = &parsed->out[o];
    int32_t batch = opf_batch_input(row, parsed);
    if (pat->func == OPF_SHAPE_SUM_TO) {
        *rule = (opf_shape_rule){.kind = OPF_SHAPE_SUM_TO, .like = pat->refs[0]};
        return 1;
    }
    if (pat->func == OPF_SHAPE_BROADCAST) {
        *rule = (opf_shape_rule){.kind = OPF_SHAPE_BROADCAST, .rank = pat->num_refs};
        for (int32_t k = 0; k < pat->num_refs; k++) {
            rule->dims[k] = (opf_dim_ref){.input = pat->refs[k], .dim = 0};
        }
        return 1;
    }
    if (pat->ellipsis) {
        if (batch < 0) {
            return opf_parse_fail(p, "output '%s' has '...' but no input has", row->outputs[o].name);
        }
        if (opf_same_pattern(pat, &parsed->in[batch])) {
            *rule = (opf_shape_rule){.kind = OPF_SHAPE_LIKE, .like = batch};
            return 1;
        }
        *rule = (opf_shape_rule){.kind = OPF_SHAPE_BATCH, .like = batch, .drop = parsed->in[batch].ndims};
    } else {
        *rule = (opf_shape_rule){.kind = OPF_SHAPE_DIMS};
    }
    if (pat->ndims > OPF_MAX_RULE_RANK) {
        return opf_parse_fail(p, "output '%s' names more than %d dims", row->outputs[o].name, OPF_MAX_RULE_RANK);
    }
    rule->rank = pat->ndims;
    for (int32_t d = 0; d < pat->ndims; d++) {
        if (pat->sym[d] < 0) {
            rule->dims[d] = (opf_dim_ref){.input = -1, .dim = (int32_t)pat->size[d]};
        } else if (!opf_find_symbol(row, parsed, pat->sym[d], &rule->dims[d].input, &rule->dims[d].dim)) {
            return opf_parse_fail(p, "output '%s': dim '%s' is not a dim of any input", row->outputs[o].name,
                                  p->symbols[pat->sym[d]]);
        }
    }
    return 1;
}

/* Which inputs broadcast: those an output's broadcast(...) names and, on an
 * elementwise row with such an output, all of them (its kernel runs over
 * their broadcast). */
static int opf_broadcast_inputs(opf_parser *p, const opf_op_def *row, opf_parsed *parsed, const opf_op_decl *decl) {
    int any = 0;
    for (int32_t o = 0; o < row->num_outputs; o++) {
        const opf_pattern *pat = &parsed->out[o];
        if (pat->func == OPF_SHAPE_NONE) {
            continue;
        }
        any = 1;
        const char *func = pat->func == OPF_SHAPE_SUM_TO ? "sum_to" : "broadcast";
        if (decl->row != NULL || (pat->func == OPF_SHAPE_SUM_TO && decl->eltwise == NULL)) {
            return opf_parse_fail(p, "output '%s': %s(...) is for %s", row->outputs[o].name, func,
                                  pat->func == OPF_SHAPE_SUM_TO ? "elementwise ops"
                                                                : "elementwise ops and compute functions");
        }
        for (int32_t k = 0; k < pat->num_refs; k++) {
            parsed->broadcast[pat->refs[k]] = 1;
        }
        if (decl->eltwise != NULL && pat->func == OPF_SHAPE_BROADCAST && pat->num_refs != row->num_inputs) {
            return opf_parse_fail(p, "output '%s' of an elementwise op is the broadcast of all its inputs: %s",
                                  row->outputs[o].name, "name every input in broadcast(...)");
        }
    }
    for (int32_t o = 0; any && decl->eltwise != NULL && o < row->num_outputs; o++) {
        if (parsed->out[o].func == OPF_SHAPE_NONE) {
            return opf_parse_fail(p,
                                  "output '%s': an elementwise op whose inputs broadcast gives each output as "
                                  "[broadcast(<all inputs>)] or [sum_to(<an input>)]",
                                  row->outputs[o].name);
        }
    }
    for (int32_t i = 0; i < row->num_inputs; i++) {
        parsed->broadcast[i] |= any && decl->eltwise != NULL;
        if (parsed->broadcast[i] && (parsed->in[i].ndims > 0 || !parsed->in[i].ellipsis)) {
            return opf_parse_fail(p, "input '%s' broadcasts: it takes no dims", row->inputs[i].name);
        }
    }
    return 1;
}

/* The row's kind (elementwise, row-wise, raw) and what each kind requires. */
static int opf_kind_rules(opf_parser *p, opf_op_def *row, opf_parsed *parsed, const opf_op_decl *decl) {
    int kinds = (decl->eltwise != NULL) + (decl->row != NULL) + (decl->compute != NULL);
    if (kinds != 1) {
        return opf_parse_fail(p, "needs exactly one of eltwise, row and compute (it has %d)", kinds);
    }
    if (!opf_broadcast_inputs(p, row, parsed, decl)) {
        return 0;
    }
    int32_t mutated = 0;
    for (int32_t i = 0; i < row->num_inputs; i++) {
        mutated += (row->inputs[i].flags & OPF_ARG_MUTATED) != 0;
    }
    if (decl->eltwise != NULL) {
        const opf_eltwise_kernel *k = decl->eltwise;
        int32_t writes = row->num_outputs > 0 ? row->num_outputs : mutated;
        if (k->num_inputs != row->num_inputs || k->num_outputs != writes) {
            return opf_parse_fail(p, "its kernel reads %d and writes %d tensors; the signature has %d inputs and %d %s",
                                  (int)k->num_inputs, (int)k->num_outputs, (int)row->num_inputs, (int)writes,
                                  row->num_outputs > 0 ? "outputs" : "inputs written in place");
        }
        if (row->num_outputs > 0 && mutated > 0) {
            return opf_parse_fail(p, "an elementwise op writes either its outputs or its '!' inputs, not both");
        }
        for (int32_t i = 0; i < row->num_inputs; i++) {
            if (parsed->in[i].ndims > 0 || !parsed->in[i].ellipsis || (row->inputs[i].flags & OPF_ARG_OPTIONAL)) {
                return opf_parse_fail(p, "input '%s' of an elementwise op takes no dims and is not optional",
                                      row->inputs[i].name);
            }
        }
        for (int32_t o = 0; o < row->num_outputs; o++) {
            const opf_pattern *pat = &parsed->out[o];
            if ((pat->func == OPF_SHAPE_NONE && (pat->ndims > 0 || !pat->ellipsis)) ||
                (row->outputs[o].flags & OPF_ARG_OPTIONAL)) {
                return opf_parse_fail(p,
                                      "output '%s' of an elementwise op takes no dims (or a shape function) and is "
                                      "not optional",
                                      row->outputs[o].name);
            }
        }
        row->flags |= OPF_OP_ELEMENTWISE;
        row->eltwise = k;
    } else if (decl->row != NULL) {
        const opf_row_kernel *k = decl->row;
        if (k->num_inputs != row->num_inputs || k->num_outputs != row->num_outputs) {
            return opf_parse_fail(p, "its kernel reads %d and writes %d tensors; the signature has %d and %d",
                                  (int)k->num_inputs, (int)k->num_outputs, (int)row->num_inputs, (int)row->num_outputs);
        }
        if (opf_batch_input(row, parsed) < 0 || (row->inputs[0].flags & OPF_ARG_OPTIONAL) || !parsed->in[0].ellipsis) {
            return opf_parse_fail(p, "a row-wise op's first input is required and has '...' (its rows)");
        }
        if (mutated > 0) {
            return opf_parse_fail(p, "a row-wise op writes its outputs, not its inputs");
        }
        /* An output without "..." is a sum over the rows (the row engine's
         * accumulators); one with "..." has a row per row. */
        row->row = k;
    } else {
        row->compute = decl->compute;
    }
    row->compute_cuda = decl->compute_cuda;
#ifdef OPF_HAVE_CUDA
    /* An authored elementwise or row kernel compiled by nvcc: the row runs
     * its CUDA build (opf_op_run_cuda), and says so to the adapters. */
    if (row->compute_cuda == NULL && row->eltwise != NULL && row->eltwise->cuda != NULL) {
        row->compute_cuda = opf_cuda_eltwise_compute;
    }
    if (row->compute_cuda == NULL && row->row != NULL && row->row->cuda != NULL) {
        row->compute_cuda = opf_cuda_row_compute;
    }
#endif
    return 1;
}

/* --- gradient rules ------------------------------------------------------------------------------------------------
 */

static int32_t opf_arg_index(const opf_arg_def *args, int32_t count, const char *name, size_t len) {
    for (int32_t i = 0; i < count; i++) {
        if (strlen(args[i].name) == len && strncmp(args[i].name, name, len) == 0) {
            return i;
        }
    }
    return -1;
}

/* Gradient rules ("dx = relu_grad(dy, x)") and tangent rules ("y' = relu_grad(x', x)") share one form. */
typedef enum opf_rule_kind { OPF_RULE_GRAD, OPF_RULE_JVP } opf_rule_kind;

/* A name followed, in a tangent rule, by an optional prime. */
static size_t opf_rule_name(opf_parser *p, const char **start, int *primed) {
    opf_skip_space(p);
    *start = p->at;
    while (isalnum((unsigned char)*p->at) || *p->at == '_') {
        p->at++;
    }
    size_t len = (size_t)(p->at - *start);
    *primed = *p->at == '\'';
    if (*primed) {
        p->at++;
    }
    return len;
}

/* A source: an input, an output, '_', and "d<output>" (gradient rules) or "<input>'" (tangent rules). */
static int opf_parse_source(opf_parser *p, const opf_op_def *row, opf_rule_kind kind, opf_grad_source *src) {
    const char *start;
    int primed;
    size_t len = opf_rule_name(p, &start, &primed);
    int32_t i;
    if (primed) {
        if (kind == OPF_RULE_JVP && (i = opf_arg_index(row->inputs, row->num_inputs, start, len)) >= 0) {
            *src = (opf_grad_source){OPF_FROM_TANGENT, i};
            return 1;
        }
    } else if (len == 1 && *start == '_') {
        *src = (opf_grad_source){OPF_FROM_NONE, 0};
        return 1;
    } else if ((i = opf_arg_index(row->inputs, row->num_inputs, start, len)) >= 0) {
        *src = (opf_grad_source){OPF_FROM_INPUT, i};
        return 1;
    } else if ((i = opf_arg_index(row->outputs, row->num_outputs, start, len)) >= 0) {
        *src = (opf_grad_source){OPF_FROM_OUTPUT, i};
        return 1;
    } else if (kind == OPF_RULE_GRAD && len > 1 && *start == 'd' &&
               (i = opf_arg_index(row->outputs, row->num_outputs, start + 1, len - 1)) >= 0) {
        *src = (opf_grad_source){OPF_FROM_GRAD, i};
        return 1;
    }
    p->at = start;
    return opf_parse_fail(p, "'%.*s%s' is not %s", (int)len, start, primed ? "'" : "",
                          kind == OPF_RULE_GRAD ? "an input, an output, d<output> or '_'"
                                                : "an input, an input's tangent <input>', an output or '_'");
}

/* What a rule gives: in a gradient rule "d<input>" (the gradient of that
 * input), in a tangent rule "<output>'" (the tangent of that output); '_'
 * drops an output of the rule's op. Sets *index (-1 for '_'). */
static int opf_parse_product(opf_parser *p, const opf_op_def *row, opf_rule_kind kind, int32_t *index) {
    const char *start;
    int primed;
    size_t len = opf_rule_name(p, &start, &primed);
    *index = -1;
    if (len == 1 && *start == '_' && !primed) {
        return 1;
    }
    if (kind == OPF_RULE_GRAD && !primed && len > 1 && *start == 'd' &&
        (*index = opf_arg_index(row->inputs, row->num_inputs, start + 1, len - 1)) >= 0) {
        return 1;
    }
    if (kind == OPF_RULE_JVP && primed && (*index = opf_arg_index(row->outputs, row->num_outputs, start, len)) >= 0) {
        return 1;
    }
    p->at = start;
    return opf_parse_fail(p, kind == OPF_RULE_GRAD ? "expected d<input> or '_' before '='"
                                                   : "expected <output>' or '_' before '='");
}

/* One rule: "dx, _, db = op(src, ...)" or "da = dy" (tangent rules: "y', _ = op(src, ...)", "y' = a'"). */
static int opf_parse_rule(opf_parser *p, const opf_op_table *table, const opf_op_def *row, opf_rule_kind kind,
                          opf_grad_def *rule) {
    const char *what = kind == OPF_RULE_GRAD ? "gradient" : "tangent";
    do {
        if (rule->num_produces == OPF_MAX_ARGS) {
            return opf_parse_fail(p, "more than %d %ss in one rule", OPF_MAX_ARGS, what);
        }
        if (!opf_parse_product(p, row, kind, &rule->produces[rule->num_produces++])) {
            return 0;
        }
    } while (opf_accept(p, ","));
    if (!opf_expect(p, "=")) {
        return 0;
    }
    opf_skip_space(p);
    const char *name_start = p->at;
    while (isalnum((unsigned char)*p->at) || *p->at == '_') {
        p->at++;
    }
    size_t name_len = (size_t)(p->at - name_start);
    if (!opf_accept(p, "(")) { /* identity: "dx = dy", "y' = x'" */
        p->at = name_start;
        rule->num_sources = 1;
        if (!opf_parse_source(p, row, kind, &rule->sources[0])) {
            return 0;
        }
        if (rule->num_produces != 1 || rule->produces[0] < 0 || rule->sources[0].kind == OPF_FROM_NONE) {
            return opf_parse_fail(p, "an identity rule gives one %s from one value", what);
        }
        return 1;
    }
    const opf_op_def *rule_op = NULL;
    for (int64_t r = 0; r < table->num_ops; r++) {
        const char *n = table->ops[r]->name;
        if (n != NULL && strlen(n) == name_len && strncmp(n, name_start, name_len) == 0) {
            rule_op = table->ops[r];
        }
    }
    if (rule_op == NULL) {
        p->at = name_start;
        return opf_parse_fail(p, "%s op '%.*s' is not in table '%s'", what, (int)name_len, name_start, table->name);
    }
    rule->op = rule_op->name;
    if (!opf_accept(p, ")")) {
        do {
            if (rule->num_sources == OPF_MAX_ARGS) {
                return opf_parse_fail(p, "more than %d arguments", OPF_MAX_ARGS);
            }
            if (!opf_parse_source(p, row, kind, &rule->sources[rule->num_sources++])) {
                return 0;
            }
        } while (opf_accept(p, ","));
        if (!opf_expect(p, ")")) {
            return 0;
        }
    }
    if (rule->num_sources != rule_op->num_inputs || rule->num_produces != rule_op->num_outputs) {
        return opf_parse_fail(p, "'%s' takes %d inputs and gives %d outputs; the rule passes %d and names %d",
                              rule_op->name, (int)rule_op->num_inputs, (int)rule_op->num_outputs,
                              (int)rule->num_sources, (int)rule->num_produces);
    }
    return 1;
}

static int opf_parse_rules(opf_parser *p, const opf_op_table *table, const opf_op_def *row, opf_rule_kind kind,
                           int32_t *count, opf_grad_def *rules) {
    do {
        opf_skip_space(p);
        if (*p->at == '\0') {
            break; /* a trailing ';' */
        }
        if (*count == OPF_MAX_GRADS) {
            return opf_parse_fail(p, "more than %d %s rules", OPF_MAX_GRADS,
                                  kind == OPF_RULE_GRAD ? "gradient" : "tangent");
        }
        if (!opf_parse_rule(p, table, row, kind, &rules[(*count)++])) {
            return 0;
        }
    } while (opf_accept(p, ";"));
    opf_skip_space(p);
    return *p->at == '\0' || opf_parse_fail(p, "unexpected '%s'", p->at);
}

/* "x: the input; y: the result" into the docs of arguments and attributes. */
static int opf_parse_arg_docs(opf_parser *p, opf_op_def *row) {
    while (opf_skip_space(p), *p->at != '\0') {
        const char *name = opf_ident(p, "an argument name");
        if (name == NULL || !opf_expect(p, ":")) {
            return 0;
        }
        opf_skip_space(p);
        const char *start = p->at;
        while (*p->at != '\0' && *p->at != ';') {
            p->at++;
        }
        const char *doc = opf_intern(p, start, (size_t)(p->at - start));
        const char **slot = NULL;
        int32_t i = opf_arg_index(row->inputs, row->num_inputs, name, strlen(name));
        if (i >= 0) {
            slot = &row->inputs[i].doc;
        } else if ((i = opf_arg_index(row->outputs, row->num_outputs, name, strlen(name))) >= 0) {
            slot = &row->outputs[i].doc;
        }
        for (int32_t a = 0; slot == NULL && a < row->num_attrs; a++) {
            slot = strcmp(row->attrs[a].name, name) == 0 ? &row->attrs[a].doc : NULL;
        }
        if (slot == NULL || doc == NULL) {
            return opf_parse_fail(p, "arg_docs names '%s', which is not an argument or attribute", name);
        }
        *slot = doc;
        opf_accept(p, ";");
    }
    return 1;
}

/* --- the table ------------------------------------------------------------------------------------------------------
 */

/* One allocation holds the table, its row pointers, the rows and the strings. */
typedef struct opf_resolved {
    opf_op_table table;
    const opf_op_def **ptrs;
    opf_op_def *rows;
    char *arena, *arena_end;
} opf_resolved;

static size_t opf_len(const char *s) { return s != NULL ? strlen(s) : 0; }

static opf_status opf_decl_fail(const opf_ops_decl *decl, int64_t index, const char *what, const opf_parser *p) {
    const opf_op_decl *op = &decl->ops[index];
    return opf_fail(OPF_E_INVALID, "opf_ops_resolve", "table '%s', op %lld (\"%s\"): %s: %s", decl->name,
                    (long long)index, op->signature, what, p->error);
}

/* Parses the signature of row `index` into rows[index]. */
static opf_status opf_resolve_row(opf_resolved *r, const opf_ops_decl *decl, int64_t index, opf_parsed *parsed) {
    const opf_op_decl *d = &decl->ops[index];
    opf_op_def *row = &r->rows[index];
    opf_parser p = {.text = d->signature, .at = d->signature, .arena = r->arena, .arena_end = r->arena_end};
    memset(parsed, 0, sizeof *parsed);
    int ok = opf_parse_signature(&p, row, parsed);
    p.text = NULL;
    if (ok && !opf_is_identifier(row->name)) {
        ok = opf_parse_fail(&p, "op name '%s' must be lower_snake_case", row->name);
    }
    for (int32_t i = 0; ok && i < row->num_inputs + row->num_outputs + row->num_attrs; i++) {
        const char *name = i < row->num_inputs ? row->inputs[i].name
                           : i < row->num_inputs + row->num_outputs
                               ? row->outputs[i - row->num_inputs].name
                               : row->attrs[i - row->num_inputs - row->num_outputs].name;
        if (!opf_is_identifier(name)) {
            ok = opf_parse_fail(&p, "name '%s' must be lower_snake_case", name);
        }
    }
    /* Optional inputs come last: frameworks take arguments with defaults
     * after those without (a torch schema refuses "x?, y"). */
    for (int32_t i = 1; ok && i < row->num_inputs; i++) {
        if ((row->inputs[i - 1].flags & OPF_ARG_OPTIONAL) && !(row->inputs[i].flags & OPF_ARG_OPTIONAL)) {
            ok = opf_parse_fail(&p, "required input '%s' follows optional input '%s' (optional inputs come last)",
                                row->inputs[i].name, row->inputs[i - 1].name);
        }
    }
    ok = ok && opf_kind_rules(&p, row, parsed, d) && opf_input_checks(&p, row, parsed);
    for (int32_t o = 0; ok && o < row->num_outputs; o++) {
        ok = opf_output_rule(&p, row, parsed, o, &row->output_shapes[o]);
    }
    if (ok && d->arg_docs != NULL) {
        p.text = p.at = d->arg_docs;
        ok = opf_parse_arg_docs(&p, row);
    }
    if (ok) {
        size_t need = strlen(decl->name) + strlen(row->name) + 2;
        char *qualname = (size_t)(p.arena_end - p.arena) >= need ? p.arena : NULL;
        if (qualname == NULL) {
            ok = opf_parse_fail(&p, "out of room for names");
        } else {
            snprintf(qualname, need, "%s.%s", decl->name, row->name);
            p.arena += need;
            row->qualname = qualname;
        }
    }
    if (ok && (d->flags & ~(uint32_t)OPF_OP_PASS_THROUGH) != 0) {
        ok = opf_parse_fail(&p, "has flags 0x%x; a declaration may set only OPF_OP_PASS_THROUGH", (unsigned)d->flags);
    }
    r->arena = p.arena;
    if (!ok) {
        return opf_decl_fail(decl, index, "signature", &p);
    }
    row->doc = d->doc;
    row->signature = d->signature;
    row->dtypes = d->dtypes != 0 ? d->dtypes : (OPF_DTYPES_F32 | OPF_DTYPES_F64);
    row->flags |= d->flags; /* what it implies is checked with the rest of the row by opf_op_table_validate */
    return OPF_OK;
}

/* The gradient and tangent rules of row `index` (after every row exists: rules name other rows). */
static opf_status opf_resolve_rules(opf_resolved *r, const opf_ops_decl *decl, int64_t index) {
    opf_op_def *row = &r->rows[index];
    const char *grad = decl->ops[index].grad, *jvp = decl->ops[index].jvp;
    if (grad != NULL) {
        opf_parser p = {.text = grad, .at = grad, .arena = r->arena, .arena_end = r->arena_end};
        if (!opf_parse_rules(&p, &r->table, row, OPF_RULE_GRAD, &row->num_grads, row->grads)) {
            return opf_decl_fail(decl, index, "grad", &p);
        }
    }
    if (jvp != NULL) {
        opf_parser p = {.text = jvp, .at = jvp, .arena = r->arena, .arena_end = r->arena_end};
        if (!opf_parse_rules(&p, &r->table, row, OPF_RULE_JVP, &row->num_jvps, row->jvps)) {
            return opf_decl_fail(decl, index, "jvp", &p);
        }
    }
    return OPF_OK;
}

const opf_op_table *opf_ops_resolve(const opf_ops_decl *decl) {
    opf_clear_error();
    if (decl == NULL || decl->ops == NULL || decl->name == NULL) {
        opf_fail(OPF_E_INVALID, "opf_ops_resolve", "the declaration, its name and its ops must not be NULL");
        return NULL;
    }
    if (decl->abi_version != OPF_TABLE_ABI_VERSION) {
        opf_fail(OPF_E_INVALID, "opf_ops_resolve",
                 "table '%s' was built for table ABI version %u; this opforge reads version %d: rebuild it", decl->name,
                 (unsigned)decl->abi_version, OPF_TABLE_ABI_VERSION);
        return NULL;
    }
    if (!opf_is_identifier(decl->name)) {
        opf_fail(OPF_E_INVALID, "opf_ops_resolve", "table name '%s' must be lower_snake_case", decl->name);
        return NULL;
    }
    int64_t count = 0;
    size_t text = 0;
    while (decl->ops[count].signature != NULL) {
        const opf_op_decl *d = &decl->ops[count++];
        text += 2 * (opf_len(d->signature) + opf_len(d->arg_docs)) + strlen(decl->name) + 4;
    }
    size_t rows_bytes = sizeof(opf_op_def) * (size_t)count, ptrs_bytes = sizeof(opf_op_def *) * (size_t)count;
    opf_resolved *r = calloc(1, sizeof *r + rows_bytes + ptrs_bytes + text + 1);
    if (r == NULL) {
        opf_fail(OPF_E_NOMEM, "opf_ops_resolve", "out of memory resolving table '%s'", decl->name);
        return NULL;
    }
    r->rows = (opf_op_def *)(r + 1);
    r->ptrs = (const opf_op_def **)((char *)r->rows + rows_bytes);
    r->arena = (char *)r->ptrs + ptrs_bytes;
    r->arena_end = r->arena + text + 1;
    r->table = (opf_op_table){OPF_TABLE_ABI_VERSION, decl->name, count, r->ptrs};
    opf_status st = OPF_OK;
    opf_parsed parsed;
    for (int64_t i = 0; st == OPF_OK && i < count; i++) {
        r->ptrs[i] = &r->rows[i];
        st = opf_resolve_row(r, decl, i, &parsed);
    }
    for (int64_t i = 0; st == OPF_OK && i < count; i++) {
        st = opf_resolve_rules(r, decl, i);
    }
    if (st == OPF_OK && opf_op_table_validate(&r->table) != OPF_OK) {
        char why[OPF_DECL_ERROR_MAX];
        snprintf(why, sizeof why, "%s", opf_last_error_detail());
        st = opf_fail(OPF_E_INVALID, "opf_ops_resolve", "table '%s': %s", decl->name, why);
    }
    if (st != OPF_OK) {
        free(r);
        return NULL;
    }
    return &r->table;
}

const opf_op_table *opf_ops_resolve_parts(uint32_t abi_version, const char *name, const opf_op_decl *const *parts) {
    opf_clear_error();
    if (name == NULL || parts == NULL) {
        opf_fail(OPF_E_INVALID, "opf_ops_resolve_parts", "the table's name and its list of parts must not be NULL");
        return NULL;
    }
    if (abi_version != OPF_TABLE_ABI_VERSION) { /* (the parts' rows have another layout: not read) */
        opf_fail(OPF_E_INVALID, "opf_ops_resolve_parts",
                 "table '%s' was built for table ABI version %u; this opforge reads version %d: rebuild it", name,
                 (unsigned)abi_version, OPF_TABLE_ABI_VERSION);
        return NULL;
    }
    size_t count = 0;
    for (size_t p = 0; parts[p] != NULL; p++) {
        for (const opf_op_decl *d = parts[p]; d->signature != NULL; d++) {
            count++;
        }
    }
    opf_op_decl *all = malloc((count + 1) * sizeof *all);
    if (all == NULL) {
        opf_fail(OPF_E_NOMEM, "opf_ops_resolve_parts", "out of memory resolving table '%s'", name);
        return NULL;
    }
    size_t at = 0;
    for (size_t p = 0; parts[p] != NULL; p++) {
        for (const opf_op_decl *d = parts[p]; d->signature != NULL; d++) {
            all[at++] = *d;
        }
    }
    all[at] = (opf_op_decl){0};
    const opf_ops_decl decl = {abi_version, name, all};
    const opf_op_table *table = opf_ops_resolve(&decl); /* (keeps no pointer into `all`) */
    free(all);
    return table;
}

void opf_ops_release(const opf_op_table *table) {
    /* The table is the first member of its allocation. */
    free((void *)(uintptr_t)table);
}
