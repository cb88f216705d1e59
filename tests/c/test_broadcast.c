/*
 * test_broadcast.c — rows that broadcast: the built-in add, mul, sum_to and
 * mul_grad, and a user's rows declared with "y[broadcast(a, b)]" and
 * "y[sum_to(a)]". Shapes and values against NumPy's broadcasting rules
 * written out here (reference.h): shape pairs of every kind (0-d, size-1
 * dims, rank mismatch, empty dims), every layout the harness makes, sums
 * over broadcast dims on every path of the engine (chunks owning their
 * outputs, partial sums), thread-count independence, and the mistakes
 * (shapes that do not broadcast, a summed output in place, declarations),
 * and inputs of which only the shape counts, never read.
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "reference.h"

/* --- a user's broadcasting rows ----------------------------------------------------------------------------------- */

/* Two outputs, both the broadcast shape. */
OPF_ELTWISE_KERNEL(bsum_diff, (a, b), (s, d), s = a + b; d = a - b;)
/* Two summed outputs of different shapes: the gradient of a - b. */
OPF_ELTWISE_KERNEL(sub_grad, (dy, a, b), (da, db), da = dy; db = -dy;)
/* A summed output and a full one. */
OPF_ELTWISE_KERNEL(scaled_and_sum, (x, like), (y, s), y = 2 * x; s = x;)

static opf_status noop_compute(const opf_tensor *const *in, const opf_tensor *const *out, const opf_attr_value *attrs) {
    (void)in, (void)out, (void)attrs;
    return OPF_OK;
}

static const opf_op_decl user_decls[] = {
    {"bsum_diff(a, b) -> (s[broadcast(a, b)], d[broadcast(b, a)])", .eltwise = &bsum_diff},
    {"sub_grad(dy, a, b) -> (da[sum_to(a)], db[sum_to(b)])", .eltwise = &sub_grad},
    {"scaled_and_sum(x, like) -> (y[broadcast(x, like)], s[sum_to(like)])", .eltwise = &scaled_and_sum},
    /* A compute function with a broadcast output, next to an input of its own. */
    {"where_like(c, a, b, w[N]) -> (y[broadcast(c, a, b)], z[N])", .compute = noop_compute},
    {0},
};

static const opf_op_table *user_table(void) {
    static const opf_ops_decl decl = {OPF_TABLE_ABI_VERSION, "bops", user_decls};
    static const opf_op_table *table;
    return resolve_once(&decl, &table);
}

static const opf_op_def *builtin(const char *name) { return opf_op_find(opf_builtin_ops(), name); }
static const opf_op_def *user_op(const char *name) { return opf_op_find(user_table(), name); }

/* --- shapes ------------------------------------------------------------------------------------------------------- */

typedef struct shape {
    int32_t n;
    int64_t d[4];
} shape;

/* Pairs that broadcast together: 0-d with n-d, size-1 dims on either side,
 * rank mismatch, empty dims, equal shapes, rows longer than a block. */
static const struct {
    shape a, b;
} pairs[] = {
    {{0, {0}}, {2, {3, 4}}},       {{2, {3, 4}}, {0, {0}}},
    {{0, {0}}, {0, {0}}},          {{2, {3, 1}}, {2, {1, 4}}},
    {{1, {4}}, {3, {2, 3, 4}}},    {{3, {2, 3, 4}}, {1, {4}}},
    {{3, {2, 1, 4}}, {2, {3, 1}}}, {{4, {2, 1, 3, 1}}, {3, {5, 1, 6}}},
    {{2, {5, 1}}, {2, {5, 7}}},    {{1, {1}}, {2, {3, 1}}},
    {{2, {1, 1}}, {2, {1, 1}}},    {{2, {3, 4}}, {2, {3, 4}}},
    {{2, {0, 4}}, {1, {4}}},       {{2, {1, 4}}, {2, {0, 1}}},
    {{1, {0}}, {0, {0}}},          {{2, {3, 300}}, {1, {300}}},
    {{2, {300, 1}}, {2, {1, 3}}},
};

static shape broadcast_of(shape a, shape b) {
    shape s = {a.n > b.n ? a.n : b.n, {0}};
    int ok = ref_broadcast_shape(a.n, a.d, b.n, b.d, s.d);
    CHECK(ok, "the test's pair does not broadcast");
    return s;
}

static int64_t numel(shape s) {
    int64_t n = 1;
    for (int32_t d = 0; d < s.n; d++) {
        n *= s.d[d];
    }
    return n;
}

static double value(const void *p, opf_dtype dt, int64_t i) {
    return dt == OPF_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

static const tv_layout layouts[] = {TV_CONTIG, TV_TRANSPOSED, TV_STEP2, TV_NEGATIVE};
enum { NUM_LAYOUTS = sizeof layouts / sizeof layouts[0] };

/* --- the table ---------------------------------------------------------------------------------------------------- */

TEST(test_rows_declared) {
    const opf_op_def *add = builtin("add"), *mul = builtin("mul"), *sum_to = builtin("sum_to"),
                     *mul_grad = builtin("mul_grad");
    if (!CHECK(add && mul && sum_to && mul_grad, "a broadcasting built-in is missing")) {
        return;
    }
    const opf_op_def *binary[] = {add, mul};
    for (int k = 0; k < 2; k++) {
        const opf_op_def *op = binary[k];
        CHECK(op->flags & OPF_OP_ELEMENTWISE, "%s is elementwise", op->name);
        CHECK(op->num_checks == 1 && op->checks[0].kind == OPF_CHECK_BROADCAST && op->checks[0].a == 0 &&
                  op->checks[0].b == 1,
              "%s checks that a and b broadcast together", op->name);
        const opf_shape_rule *r = &op->output_shapes[0];
        CHECK(r->kind == OPF_SHAPE_BROADCAST && r->rank == 2 && r->dims[0].input == 0 && r->dims[1].input == 1,
              "%s's output is the broadcast of a and b", op->name);
    }
    CHECK(sum_to->output_shapes[0].kind == OPF_SHAPE_SUM_TO && sum_to->output_shapes[0].like == 1,
          "sum_to's output is summed to like");
    CHECK(sum_to->num_checks == 1 && sum_to->checks[0].kind == OPF_CHECK_BROADCAST, "sum_to: one broadcast check");
    CHECK(mul_grad->output_shapes[0].kind == OPF_SHAPE_SUM_TO && mul_grad->output_shapes[0].like == 2,
          "mul_grad's output is summed to like");
    CHECK(mul_grad->num_checks == 3, "mul_grad: a broadcast check per pair of inputs, got %d", mul_grad->num_checks);
    /* like gives a shape only: its memory is neither read nor prefetched. */
    CHECK((sum_to->inputs[1].flags & OPF_ARG_SHAPE_ONLY) && !(sum_to->inputs[0].flags & OPF_ARG_SHAPE_ONLY),
          "sum_to's like is shape only");
    CHECK((mul_grad->inputs[2].flags & OPF_ARG_SHAPE_ONLY) && !(mul_grad->inputs[1].flags & OPF_ARG_SHAPE_ONLY),
          "mul_grad's like is shape only");
    /* The gradient rules: sums to each input's shape, closed under differentiation. */
    CHECK(add->num_grads == 2 && strcmp(add->grads[0].op, "sum_to") == 0 && strcmp(add->grads[1].op, "sum_to") == 0,
          "add's gradients are sum_to");
    CHECK(sum_to->num_grads == 1 && strcmp(sum_to->grads[0].op, "sum_to") == 0, "sum_to is its own gradient");
    CHECK(mul->num_grads == 2 && strcmp(mul->grads[0].op, "mul_grad") == 0, "mul's gradients are mul_grad");
    CHECK(mul_grad->num_grads == 2 && strcmp(mul_grad->grads[0].op, "mul_grad") == 0 &&
              strcmp(mul_grad->grads[1].op, "mul_grad") == 0,
          "mul_grad's gradients are mul_grad");
    /* Tangent rules: a tangent broadcast to the output (add), linear in each factor (mul, mul_grad). */
    CHECK(add->num_jvps == 2 && strcmp(add->jvps[0].op, "sum_to") == 0 &&
              add->jvps[0].sources[1].kind == OPF_FROM_OUTPUT,
          "add's tangents are broadcast to y by sum_to");
    CHECK(mul->num_jvps == 2 && strcmp(mul->jvps[0].op, "mul") == 0, "mul's tangents");
    CHECK(sum_to->num_jvps == 1 && strcmp(sum_to->jvps[0].op, "sum_to") == 0, "sum_to's tangent");
    CHECK(mul_grad->num_jvps == 2 && strcmp(mul_grad->jvps[1].op, "mul_grad") == 0, "mul_grad's tangents");
    /* A user's rows. */
    const opf_op_table *t = user_table();
    if (!CHECK(t != NULL, "user table: %s", opf_last_error())) {
        return;
    }
    const opf_op_def *w = user_op("where_like");
    CHECK(w->output_shapes[0].kind == OPF_SHAPE_BROADCAST && w->output_shapes[0].rank == 3, "where_like: y");
    CHECK(w->output_shapes[1].kind == OPF_SHAPE_DIMS && w->output_shapes[1].dims[0].input == 3, "where_like: z");
    int broadcast_checks = 0, others = 0;
    for (int32_t c = 0; c < w->num_checks; c++) {
        broadcast_checks += w->checks[c].kind == OPF_CHECK_BROADCAST;
        others += w->checks[c].kind != OPF_CHECK_BROADCAST;
    }
    CHECK(broadcast_checks == 3 && others == 1, "where_like: 3 broadcast checks (c, a, b) and w's rank: %d, %d",
          broadcast_checks, others);
}

TEST(test_declaration_mistakes) {
    static const struct {
        opf_op_decl decl;
        const char *expect;
    } cases[] = {
        {{"f(a, b) -> y[broadcast(a, c)]", .eltwise = &bsum_diff}, "expected the name of an input of this op"},
        {{"f(a, b) -> y[broadcast(a, a)]", .eltwise = &bsum_diff}, "input 'a' is named twice"},
        {{"f(a, b) -> y[product(a, b)]", .eltwise = &bsum_diff}, "unknown shape function 'product'"},
        {{"f(a[broadcast(b)], b) -> y", .eltwise = &bsum_diff}, "gives an output's shape"},
        {{"f(a, b) -> y[broadcast(a, b), 3]", .eltwise = &bsum_diff}, "expected ']'"},
        {{"f(a, b) -> y[broadcast(a)]", .eltwise = &bsum_diff}, "name every input in broadcast(...)"},
        {{"f(a, b) -> (s[broadcast(a, b)], d)", .eltwise = &bsum_diff}, "output 'd': an elementwise op whose inputs"},
        {{"f(a, b) -> y[sum_to(a, b)]", .eltwise = &bsum_diff}, "sum_to(...) names one input"},
        {{"f(a, b) -> y[sum_to(a)]", .compute = noop_compute}, "sum_to(...) is for elementwise ops"},
        {{"f(a[N], b) -> y[broadcast(a, b)]", .compute = noop_compute}, "input 'a' broadcasts: it takes no dims"},
        {{"f(a, b, c, d, e) -> y[broadcast(a, b, c, d, e)]", .compute = noop_compute},
         "broadcast(...) names at most 4 inputs"},
        {{"f(a, b: float) -> y[broadcast(a, b)]", .eltwise = &bsum_diff},
         "input 'b': expected 'shape' after ':', got 'float' (attributes go after '*')"},
        {{"f(a, b:) -> y[broadcast(a, b)]", .eltwise = &bsum_diff}, "expected 'shape' after ':'"},
        {{"f(a, *, b: shape) -> y", .eltwise = &bsum_diff}, "attribute 'b' needs a type"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const opf_op_decl decls[2] = {cases[i].decl, {0}};
        const opf_ops_decl decl = {OPF_TABLE_ABI_VERSION, "badops", decls};
        const opf_op_table *t = opf_ops_resolve(&decl);
        if (!CHECK(t == NULL, "case %zu (%s) was accepted", i, cases[i].decl.signature)) {
            opf_ops_release(t);
            continue;
        }
        CHECK_CONTAINS(opf_last_error(), cases[i].expect);
        CHECK_CONTAINS(opf_last_error(), "table 'badops', op 0");
    }
}

/* Hand-written rows: the validator refuses rules the engine cannot honour. */
TEST(test_validate_rows) {
    const opf_op_def *add = builtin("add");
    opf_op_def *row = xmalloc(sizeof *row);
    const opf_op_def *rows[1] = {row};
    const opf_op_table table = {OPF_TABLE_ABI_VERSION, "hand", 1, rows};
    *row = *add;
    row->num_grads = 0;
    row->num_jvps = 0;
    row->qualname = NULL;
    CHECK(opf_op_table_validate(&table) == OPF_OK, "a copy of add: %s", opf_last_error());
    /* Shaped like a, while the kernel runs over the broadcast of a and b. */
    row->output_shapes[0] = (opf_shape_rule){.kind = OPF_SHAPE_LIKE, .like = 0};
    CHECK(opf_op_table_validate(&table) == OPF_E_INVALID, "a like-a output of a broadcasting row");
    CHECK_CONTAINS(opf_last_error(), "the broadcast of its inputs");
    /* The broadcast of a alone. */
    row->output_shapes[0] = (opf_shape_rule){.kind = OPF_SHAPE_BROADCAST, .rank = 1, .dims = {{0, 0}}};
    CHECK(opf_op_table_validate(&table) == OPF_E_INVALID, "broadcast of a only");
    /* An input named twice, none, or one out of range. */
    row->output_shapes[0] = (opf_shape_rule){.kind = OPF_SHAPE_BROADCAST, .rank = 2, .dims = {{0, 0}, {0, 0}}};
    CHECK(opf_op_table_validate(&table) == OPF_E_INVALID, "broadcast of a and a");
    CHECK_CONTAINS(opf_last_error(), "shape rule of output 'y' is invalid");
    row->output_shapes[0] = (opf_shape_rule){.kind = OPF_SHAPE_BROADCAST, .rank = 0};
    CHECK(opf_op_table_validate(&table) == OPF_E_INVALID, "broadcast of nothing");
    row->output_shapes[0] = (opf_shape_rule){.kind = OPF_SHAPE_BROADCAST, .rank = 2, .dims = {{0, 0}, {2, 0}}};
    CHECK(opf_op_table_validate(&table) == OPF_E_INVALID, "broadcast of input 2 of 2");
    row->output_shapes[0] = (opf_shape_rule){.kind = OPF_SHAPE_SUM_TO, .like = 5};
    CHECK(opf_op_table_validate(&table) == OPF_E_INVALID, "sum_to input 5");
    /* No check ties a and b. */
    *row = *add;
    row->num_grads = 0;
    row->num_jvps = 0;
    row->num_checks = 0;
    CHECK(opf_op_table_validate(&table) == OPF_E_INVALID, "no broadcast check");
    /* A check of an input out of range. */
    *row = *add;
    row->num_grads = 0;
    row->num_jvps = 0;
    row->checks[0].b = 2;
    CHECK(opf_op_table_validate(&table) == OPF_E_INVALID, "broadcast check of input 2");
    /* A summed output on a compute row. */
    *row = *add;
    row->num_grads = 0;
    row->num_jvps = 0;
    row->eltwise = NULL;
    row->flags = 0;
    row->compute = noop_compute;
    row->output_shapes[0] = (opf_shape_rule){.kind = OPF_SHAPE_SUM_TO, .like = 0};
    CHECK(opf_op_table_validate(&table) == OPF_E_INVALID, "sum_to on a compute row");
    CHECK_CONTAINS(opf_last_error(), "only an elementwise row");
    free(row);
}

/* --- shape inference ---------------------------------------------------------------------------------------------- */

static void expect_shape(const opf_op_def *op, shape a, shape b, opf_status want, shape out) {
    opf_tensor ta = opf_tensor_make(NULL, OPF_F32, a.n, a.d), tb = opf_tensor_make(NULL, OPF_F32, b.n, b.d);
    int32_t ndim = -7;
    int64_t got[OPF_MAX_RANK];
    char sa[64], sb[64];
    fmt_shape(sa, sizeof sa, a.n, a.d);
    fmt_shape(sb, sizeof sb, b.n, b.d);
    opf_status st = opf_op_infer_shape(op, (const opf_tensor *[]){&ta, &tb}, 0, &ndim, got);
    if (!CHECK(st == want, "%s(%s, %s): %s, expected %s (%s)", op->name, sa, sb, opf_status_name(st),
               opf_status_name(want), opf_last_error()) ||
        st != OPF_OK) {
        return;
    }
    int same = ndim == out.n;
    for (int32_t d = 0; same && d < ndim; d++) {
        same = got[d] == out.d[d];
    }
    char sg[64], so[64];
    CHECK(same, "%s(%s, %s) is %s, expected %s", op->name, sa, sb, fmt_shape(sg, sizeof sg, ndim, got),
          fmt_shape(so, sizeof so, out.n, out.d));
}

TEST(test_infer_shape) {
    const opf_op_def *add = builtin("add"), *sum_to = builtin("sum_to");
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        expect_shape(add, pairs[i].a, pairs[i].b, OPF_OK, broadcast_of(pairs[i].a, pairs[i].b));
        expect_shape(sum_to, pairs[i].a, pairs[i].b, OPF_OK, pairs[i].b);
    }
    /* Unknown dims (-1, as TensorFlow's shape functions pass them). */
    expect_shape(add, (shape){2, {-1, 1}}, (shape){2, {1, 5}}, OPF_OK, (shape){2, {-1, 5}});
    expect_shape(add, (shape){1, {-1}}, (shape){1, {3}}, OPF_OK, (shape){1, {3}});
    expect_shape(add, (shape){1, {3}}, (shape){1, {-1}}, OPF_OK, (shape){1, {3}});
    expect_shape(add, (shape){2, {-1, -1}}, (shape){1, {4}}, OPF_OK, (shape){2, {-1, 4}});
    expect_shape(add, (shape){1, {-1}}, (shape){1, {1}}, OPF_OK, (shape){1, {-1}});
    expect_shape(add, (shape){1, {-1}}, (shape){1, {-1}}, OPF_OK, (shape){1, {-1}});
    expect_shape(add, (shape){2, {2, -1}}, (shape){2, {3, 1}}, OPF_E_SHAPE, (shape){0, {0}});
    /* Shapes that do not broadcast. */
    expect_shape(add, (shape){2, {2, 3}}, (shape){2, {3, 2}}, OPF_E_SHAPE, (shape){0, {0}});
    CHECK_CONTAINS(opf_last_error(),
                   "opforge.add: shape mismatch: a is [2,3], b is [3,2]; they must broadcast together");
    expect_shape(add, (shape){2, {2, 3}}, (shape){1, {4}}, OPF_E_SHAPE, (shape){0, {0}});
    CHECK_CONTAINS(opf_last_error(), "(dim -1: 3 vs 4)");
    expect_shape(add, (shape){3, {2, 3, 4}}, (shape){2, {2, 4}}, OPF_E_SHAPE, (shape){0, {0}});
    CHECK_CONTAINS(opf_last_error(), "(dim -2: 3 vs 2)");
    expect_shape(add, (shape){1, {0}}, (shape){1, {2}}, OPF_E_SHAPE, (shape){0, {0}});
    expect_shape(sum_to, (shape){2, {2, 3}}, (shape){1, {2}}, OPF_E_SHAPE, (shape){0, {0}});
    CHECK_CONTAINS(opf_last_error(), "opforge.sum_to: shape mismatch: x is [2,3], like is [2]");
}

/* --- values ------------------------------------------------------------------------------------------------------- */

/* add and mul of pair p, inputs and output in the given layouts, against
 * the broadcast written out. */
static void binary_once(const char *name, opf_dtype dt, shape sa, shape sb, tv_layout la, tv_layout lb, tv_layout ly,
                        rng *r) {
    const opf_op_def *op = builtin(name);
    const int is_mul = strcmp(name, "mul") == 0;
    shape sy = broadcast_of(sa, sb);
    tview a, b, y;
    tv_make(&a, dt, sa.n, sa.d, la, 1);
    tv_make(&b, dt, sb.n, sb.d, lb, 2);
    tv_make(&y, dt, sy.n, sy.d, ly, 3);
    const size_t elem = opf_dtype_size(dt);
    void *va = xcalloc(a.numel + 1, elem), *vb = xcalloc(b.numel + 1, elem), *got = xcalloc(y.numel + 1, elem);
    double *want = xcalloc(y.numel + 1, sizeof(double)), *gotd = xcalloc(y.numel + 1, sizeof(double));
    tv_fill(&a, r, 0, va);
    tv_fill(&b, r, 0, vb);
    opf_status st = opf_op_run(op, (const opf_tensor *[]){&a.t, &b.t}, (const opf_tensor *[]){&y.t}, NULL);
    char s1[64], s2[64];
    fmt_shape(s1, sizeof s1, sa.n, sa.d);
    fmt_shape(s2, sizeof s2, sb.n, sb.d);
    if (CHECK(st == OPF_OK, "%s %s(%s %s, %s %s): %s", opf_dtype_name(dt), name, s1, tv_layout_name(la), s2,
              tv_layout_name(lb), opf_last_error())) {
        tv_gather(&y, got);
        for (int64_t i = 0; i < (int64_t)y.numel; i++) {
            double x1 = value(va, dt, ref_broadcast_offset(sy.n, sy.d, i, sa.n, sa.d));
            double x2 = value(vb, dt, ref_broadcast_offset(sy.n, sy.d, i, sb.n, sb.d));
            /* One rounding of the exact double result: the dtype's own. */
            want[i] = dt == OPF_F32 ? (double)(is_mul ? (float)x1 * (float)x2 : (float)x1 + (float)x2)
                                    : (is_mul ? x1 * x2 : x1 + x2);
            gotd[i] = value(got, dt, i);
        }
        CHECK_CLOSE_F64(gotd, want, y.numel, 0, 0, "%s %s(%s %s, %s %s) into %s", opf_dtype_name(dt), name, s1,
                        tv_layout_name(la), s2, tv_layout_name(lb), tv_layout_name(ly));
        CHECK_TV_GUARDS(&y, "%s %s: guards of y", name, s1);
    }
    free(va), free(vb), free(got), free(want), free(gotd);
    tv_free(&a), tv_free(&b), tv_free(&y);
}

TEST(test_add_mul_values) {
    rng r = rng_seed(0xB40ADCA5);
    static const char *const names[] = {"add", "mul"};
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
        for (int dt = 0; dt < 2; dt++) {
            for (int k = 0; k < 2; k++) {
                for (int la = 0; la < NUM_LAYOUTS; la++) {
                    for (int lb = 0; lb < NUM_LAYOUTS; lb++) {
                        tv_layout ly = layouts[(la + lb) % NUM_LAYOUTS];
                        binary_once(names[k], dt ? OPF_F64 : OPF_F32, pairs[p].a, pairs[p].b, layouts[la], layouts[lb],
                                    ly, &r);
                    }
                }
            }
        }
    }
}

/* sum_to(x, like) and mul_grad(dy, other, like) against sums in double:
 * the result of each element is within eps of the dtype times the sum of
 * the magnitudes of its terms (the engine adds in double). Inputs in the
 * given layouts. */
static void reduce_once(const char *name, opf_dtype dt, int num_in, const shape *s, tv_layout layout, rng *r) {
    const opf_op_def *op = builtin(name);
    shape iter = s[0];
    for (int k = 1; k < num_in; k++) {
        iter = broadcast_of(iter, s[k]);
    }
    const shape out = s[num_in - 1];
    tview in[3], y;
    void *v[3];
    const size_t elem = opf_dtype_size(dt);
    for (int k = 0; k < num_in; k++) {
        tv_make(&in[k], dt, s[k].n, s[k].d, k == 0 ? layout : layouts[(k + (int)layout) % NUM_LAYOUTS], k);
        v[k] = xcalloc(in[k].numel + 1, elem);
        tv_fill(&in[k], r, 0, v[k]);
    }
    tv_make(&y, dt, out.n, out.d, layout == TV_CONTIG ? TV_CONTIG : TV_NEGATIVE, 5);
    const int64_t ny = numel(out), ni = numel(iter);
    void *junk = xmalloc(((size_t)ny + 1) * elem); /* the engine must overwrite every element */
    memset(junk, 0x7f, ((size_t)ny + 1) * elem);
    tv_scatter(&y, junk);
    free(junk);
    double *want = xcalloc((size_t)ny + 1, sizeof(double)), *tol = xcalloc((size_t)ny + 1, sizeof(double)),
           *gotd = xcalloc((size_t)ny + 1, sizeof(double));
    void *got = xcalloc((size_t)ny + 1, elem);
    for (int64_t i = 0; i < ni; i++) {
        double term = value(v[0], dt, ref_broadcast_offset(iter.n, iter.d, i, s[0].n, s[0].d));
        if (num_in == 3) {
            double other = value(v[1], dt, ref_broadcast_offset(iter.n, iter.d, i, s[1].n, s[1].d));
            term = dt == OPF_F32 ? (double)((float)term * (float)other) : term * other;
        }
        int64_t at = ref_broadcast_offset(iter.n, iter.d, i, out.n, out.d);
        want[at] += term;
        tol[at] += fabs(term);
    }
    /* float32 adds up to OPF_EW_BLOCK / 32 = 8 terms per lane in the dtype: 7 roundings at most. */
    const double eps = dt == OPF_F32 ? 4 * FLT_EPSILON : 8 * DBL_EPSILON;
    for (int64_t i = 0; i < ny; i++) {
        tol[i] = tol[i] * eps + 1e-300;
    }
    const opf_tensor *ins[3] = {&in[0].t, &in[1].t, num_in == 3 ? &in[2].t : NULL};
    opf_status st = opf_op_run(op, ins, (const opf_tensor *[]){&y.t}, NULL);
    char s0[64], s1[64];
    fmt_shape(s0, sizeof s0, s[0].n, s[0].d);
    fmt_shape(s1, sizeof s1, out.n, out.d);
    if (CHECK(st == OPF_OK, "%s %s(%s, ... %s): %s", opf_dtype_name(dt), name, s0, s1, opf_last_error())) {
        tv_gather(&y, got);
        for (int64_t i = 0; i < ny; i++) {
            gotd[i] = value(got, dt, i);
        }
        CHECK_CLOSE_TOL(gotd, want, tol, (size_t)ny, "%s %s(%s %s) to %s", opf_dtype_name(dt), name, s0,
                        tv_layout_name(layout), s1);
        CHECK_TV_GUARDS(&y, "%s: guards of the output", name);
    }
    for (int k = 0; k < num_in; k++) {
        free(v[k]);
        tv_free(&in[k]);
    }
    free(want), free(tol), free(gotd), free(got);
    tv_free(&y);
}

TEST(test_sum_to_values) {
    rng r = rng_seed(0x5A0570);
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
        for (int dt = 0; dt < 2; dt++) {
            for (int l = 0; l < NUM_LAYOUTS; l++) {
                /* Down from the broadcast shape to either input, and from a
                 * to b's shape (summed where a is larger, broadcast where b
                 * is). */
                shape full = broadcast_of(pairs[p].a, pairs[p].b);
                const shape down_a[2] = {full, pairs[p].a}, down_b[2] = {full, pairs[p].b},
                            across[2] = {pairs[p].a, pairs[p].b};
                reduce_once("sum_to", dt ? OPF_F64 : OPF_F32, 2, down_a, layouts[l], &r);
                reduce_once("sum_to", dt ? OPF_F64 : OPF_F32, 2, down_b, layouts[l], &r);
                reduce_once("sum_to", dt ? OPF_F64 : OPF_F32, 2, across, layouts[l], &r);
            }
        }
    }
}

TEST(test_mul_grad_values) {
    rng r = rng_seed(0x6A6A6A);
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
        shape full = broadcast_of(pairs[p].a, pairs[p].b);
        for (int dt = 0; dt < 2; dt++) {
            for (int l = 0; l < NUM_LAYOUTS; l++) {
                /* mul's gradients for a and for b, and a dy smaller than the
                 * broadcast of the factors (the row broadcasts it too). */
                const shape for_a[3] = {full, pairs[p].b, pairs[p].a}, for_b[3] = {full, pairs[p].a, pairs[p].b},
                            small_dy[3] = {pairs[p].a, pairs[p].b, full};
                reduce_once("mul_grad", dt ? OPF_F64 : OPF_F32, 3, for_a, layouts[l], &r);
                reduce_once("mul_grad", dt ? OPF_F64 : OPF_F32, 3, for_b, layouts[l], &r);
                reduce_once("mul_grad", dt ? OPF_F64 : OPF_F32, 3, small_dy, layouts[l], &r);
            }
        }
    }
}

/* Sizes that take every path of the reduction: chunks cut along a kept outer
 * dim, along a kept inner dim, partial sums of small and larger outputs, a
 * sum of everything; and a broadcast add larger than a thread's grain. */
TEST(test_large_reductions) {
    rng r = rng_seed(0x1A26E);
    static const shape cases[][2] = {
        {{2, {300, 2000}}, {2, {300, 1}}},       /* inner summed, chunks own rows */
        {{2, {2000, 300}}, {1, {300}}},          /* outer summed, short kept rows: partial sums */
        {{2, {64, 16384}}, {2, {1, 16384}}},     /* outer summed, chunks cut along the kept inner dim */
        {{1, {1000003}}, {0, {0}}},              /* everything */
        {{3, {40, 50, 300}}, {3, {40, 1, 300}}}, /* a middle dim summed */
        {{3, {7, 9000, 3}}, {3, {1, 9000, 1}}},  /* outer and inner summed, short rows */
        /* Short rows summed down their columns in place: float32 tiles of
         * OPF_EW_SUM_TILE bytes (64 rows of 64, 73 of 56, 682 of 6, 819 of
         * 5: a short last tile in each chunk), rows under a vector of 8. */
        {{2, {16389, 64}}, {1, {64}}},
        {{2, {7777, 56}}, {1, {56}}},
        {{2, {40000, 6}}, {1, {6}}},
        {{2, {9001, 5}}, {2, {1, 5}}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int dt = 0; dt < 2; dt++) {
            reduce_once("sum_to", dt ? OPF_F64 : OPF_F32, 2, cases[c], TV_CONTIG, &r);
            const shape grad[3] = {cases[c][0], cases[c][1], cases[c][1]};
            reduce_once("mul_grad", dt ? OPF_F64 : OPF_F32, 3, grad, TV_STEP2, &r);
        }
    }
    /* Long rows summed down their columns, which sum_to (a row that copies
     * its input) takes OPF_EW_SUM_ROWS rows at a time, in every layout (rows
     * walked in place with a stride, gathered, reversed) and with a row
     * count that leaves a short last tile. */
    static const shape long_rows[][2] = {
        {{2, {37, 1000}}, {1, {1000}}},
        {{3, {3, 6, 700}}, {3, {3, 1, 700}}},
        {{2, {5, 4096}}, {2, {1, 4096}}},
    };
    for (size_t c = 0; c < sizeof long_rows / sizeof long_rows[0]; c++) {
        for (int l = 0; l < NUM_LAYOUTS; l++) {
            reduce_once("sum_to", l % 2 ? OPF_F64 : OPF_F32, 2, long_rows[c], layouts[l], &r);
        }
    }
    binary_once("add", OPF_F32, (shape){2, {1000, 300}}, (shape){1, {300}}, TV_CONTIG, TV_CONTIG, TV_CONTIG, &r);
    binary_once("mul", OPF_F64, (shape){2, {1000, 1}}, (shape){2, {1, 300}}, TV_CONTIG, TV_NEGATIVE, TV_TRANSPOSED, &r);
    /* Two inputs of more than 16 MiB together, read in place by the kernel in
     * tiles of one row (1024 elements, then 76): the accumulator's loop asks
     * for the next tile's memory as it adds (opf_ew_pf), past the arrays'
     * end after the last tile. float64 too (tiles of 1 KiB). */
    const shape big[3] = {{2, {2100, 1100}}, {2, {2100, 1100}}, {1, {1100}}};
    reduce_once("mul_grad", OPF_F32, 3, big, TV_CONTIG, &r);
    reduce_once("mul_grad", OPF_F64, 3, big, TV_CONTIG, &r);
    /* The same cut along the columns (chunks of 4250 columns at one thread:
     * tiles of 1024, then 154, whose next tile is the next row's). */
    const shape big_wide[3] = {{2, {128, 17000}}, {2, {128, 17000}}, {1, {17000}}};
    reduce_once("mul_grad", OPF_F32, 3, big_wide, TV_CONTIG, &r);
    /* Columns cut into chunks by the thread count: at one thread, 4 chunks
     * of 2048 columns ([128, 8192]; OPF_EW_SUM_SEGMENT); at 16, 16 chunks of
     * 512. float64 too. */
    const shape wide[2] = {{2, {128, 8192}}, {1, {8192}}};
    const int threads = opf_get_num_threads();
    for (int t = 1; t <= 16; t += 15) {
        opf_set_num_threads(t);
        reduce_once("sum_to", OPF_F32, 2, wide, TV_CONTIG, &r);
        reduce_once("sum_to", OPF_F64, 2, wide, TV_CONTIG, &r);
    }
    /* Inputs of more than 16 MiB summed down their columns in place: pieces
     * of 8 KiB of each row (2048 floats, 1024 doubles), a short last piece
     * (4100 columns) and a short last tile of rows (1029 = 128 * 8 + 5);
     * then the columns cut into chunks by the thread count ([160, 32768]:
     * chunks of 4096 columns at one thread, of 512 at 16, each a piece). */
    const shape far_rows[2] = {{2, {1029, 4100}}, {1, {4100}}}, far_rows64[2] = {{2, {520, 4100}}, {1, {4100}}};
    reduce_once("sum_to", OPF_F32, 2, far_rows, TV_CONTIG, &r);
    reduce_once("sum_to", OPF_F64, 2, far_rows64, TV_CONTIG, &r);
    const shape far_wide[2] = {{2, {160, 32768}}, {1, {32768}}};
    for (int t = 1; t <= 16; t += 15) {
        opf_set_num_threads(t);
        reduce_once("sum_to", OPF_F32, 2, far_wide, TV_CONTIG, &r);
    }
    opf_set_num_threads(threads);
}

/* Broadcasts large enough to be streamed (more than 16 MiB read and written):
 * blocks computed into a buffer while the inputs are walked, rows that end
 * inside a block, rows longer than a block, inputs in place, gathered and
 * reversed; an output that is not dense (the plain walk); two outputs; and
 * the output on an input. */
TEST(test_large_broadcasts) {
    rng r = rng_seed(0x5E1B0C);
    binary_once("add", OPF_F32, (shape){2, {2060, 1100}}, (shape){1, {1100}}, TV_CONTIG, TV_CONTIG, TV_CONTIG, &r);
    binary_once("mul", OPF_F32, (shape){2, {2060, 1100}}, (shape){2, {2060, 1}}, TV_CONTIG, TV_STEP2, TV_CONTIG, &r);
    binary_once("mul", OPF_F64, (shape){2, {1000, 1100}}, (shape){2, {1000, 1}}, TV_TRANSPOSED, TV_CONTIG, TV_CONTIG,
                &r);
    binary_once("add", OPF_F32, (shape){3, {4, 1000, 600}}, (shape){2, {1000, 1}}, TV_STEP2, TV_NEGATIVE, TV_CONTIG,
                &r);
    binary_once("add", OPF_F64, (shape){2, {3, 1}}, (shape){2, {1, 750000}}, TV_NEGATIVE, TV_CONTIG, TV_CONTIG, &r);
    binary_once("add", OPF_F32, (shape){2, {2060, 1100}}, (shape){1, {1100}}, TV_CONTIG, TV_CONTIG, TV_NEGATIVE, &r);
    /* Short rows repeated along the outer dims (read from a buffer of the
     * row repeated, whole blocks per kernel call): rows a whole number of
     * lines long or not, the repeated input first or second, float64, and
     * walked instead: a row gathered (step 2), a row repeated along only
     * some outer dims. */
    binary_once("add", OPF_F32, (shape){2, {65536, 64}}, (shape){1, {64}}, TV_CONTIG, TV_CONTIG, TV_CONTIG, &r);
    binary_once("mul", OPF_F32, (shape){2, {1, 33}}, (shape){2, {80000, 33}}, TV_CONTIG, TV_CONTIG, TV_CONTIG, &r);
    binary_once("mul", OPF_F64, (shape){3, {100, 400, 48}}, (shape){1, {48}}, TV_CONTIG, TV_CONTIG, TV_CONTIG, &r);
    binary_once("mul", OPF_F64, (shape){3, {100, 400, 48}}, (shape){1, {48}}, TV_CONTIG, TV_STEP2, TV_CONTIG, &r);
    binary_once("add", OPF_F32, (shape){2, {2100, 1024}}, (shape){1, {1024}}, TV_CONTIG, TV_CONTIG, TV_CONTIG, &r);
    binary_once("add", OPF_F32, (shape){3, {256, 1, 64}}, (shape){3, {256, 192, 64}}, TV_CONTIG, TV_CONTIG, TV_CONTIG,
                &r);

    /* bsum_diff's two outputs, one of them reversed (so not streamed: the plain walk). */
    const int64_t sx[2] = {1500, 1001}, sb[1] = {1001};
    for (int layout = 0; layout < 2; layout++) {
        tview a, b, s, d;
        tv_make(&a, OPF_F32, 2, sx, TV_CONTIG, 1);
        tv_make(&b, OPF_F32, 1, sb, TV_CONTIG, 2);
        tv_make(&s, OPF_F32, 2, sx, TV_CONTIG, 3);
        tv_make(&d, OPF_F32, 2, sx, layout ? TV_NEGATIVE : TV_CONTIG, 4);
        float *va = xcalloc(a.numel, sizeof(float)), *vb = xcalloc(b.numel, sizeof(float));
        float *gs = xcalloc(s.numel, sizeof(float)), *gd = xcalloc(d.numel, sizeof(float));
        tv_fill(&a, &r, 0, va);
        tv_fill(&b, &r, 0, vb);
        CHECK(opf_op_run(user_op("bsum_diff"), (const opf_tensor *[]){&a.t, &b.t}, (const opf_tensor *[]){&s.t, &d.t},
                         NULL) == OPF_OK,
              "%s", opf_last_error());
        tv_gather(&s, gs);
        tv_gather(&d, gd);
        int64_t wrong = 0;
        for (int64_t i = 0; i < (int64_t)s.numel; i++) {
            const float x = va[i], z = vb[i % sb[0]];
            wrong += gs[i] != x + z || gd[i] != x - z;
        }
        CHECK(wrong == 0, "bsum_diff [1500, 1001] (d %s): %lld elements wrong", layout ? "reversed" : "contiguous",
              (long long)wrong);
        CHECK_TV_GUARDS(&s, "bsum_diff: guards of s");
        CHECK_TV_GUARDS(&d, "bsum_diff: guards of d");
        free(va), free(vb), free(gs), free(gd);
        tv_free(&a), tv_free(&b), tv_free(&s), tv_free(&d);
    }

    /* The output on the full input: add(x, b) into x. */
    const int64_t n = 2100, m = 1030;
    float *x = xmalloc((size_t)(n * m) * sizeof(float)), *bias = xmalloc((size_t)m * sizeof(float));
    float *want = xmalloc((size_t)(n * m) * sizeof(float));
    for (int64_t i = 0; i < n * m; i++) {
        x[i] = (float)rng_uniform(&r, -2, 2);
    }
    for (int64_t j = 0; j < m; j++) {
        bias[j] = (float)rng_uniform(&r, -2, 2);
    }
    for (int64_t i = 0; i < n * m; i++) {
        want[i] = x[i] + bias[i % m];
    }
    const int64_t sxm[2] = {n, m}, sm[1] = {m};
    opf_tensor tx = opf_tensor_make(x, OPF_F32, 2, sxm), tb = opf_tensor_make(bias, OPF_F32, 1, sm);
    CHECK(opf_add(&tx, &tb, &tx) == OPF_OK, "add into x: %s", opf_last_error());
    CHECK(memcmp(x, want, (size_t)(n * m) * sizeof(float)) == 0, "add(x, b) into x: wrong values");
    free(x), free(bias), free(want);
}

/* The results never depend on the number of threads, bit for bit. */
TEST(test_thread_count_independent) {
    rng r = rng_seed(0x7EAD5);
    /* (the last two of more than 16 MiB: summed in pieces, the second with its columns cut by the thread
     * count; see test_large_reductions) */
    static const shape cases[][2] = {
        {{2, {2000, 300}}, {1, {300}}},      {{1, {1000003}}, {0, {0}}},       {{2, {300, 2000}}, {2, {300, 1}}},
        {{2, {64, 16384}}, {2, {1, 16384}}}, {{2, {1029, 4100}}, {1, {4100}}}, {{2, {160, 32768}}, {1, {32768}}},
    };
    const int before = opf_get_num_threads();
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tview x, like, y;
        tv_make(&x, OPF_F32, cases[c][0].n, cases[c][0].d, TV_CONTIG, 0);
        tv_make(&like, OPF_F32, cases[c][1].n, cases[c][1].d, TV_CONTIG, 0);
        tv_make(&y, OPF_F32, cases[c][1].n, cases[c][1].d, TV_CONTIG, 0);
        tv_fill(&x, &r, 0, NULL);
        float *first = xcalloc(y.numel, sizeof(float));
        for (int threads = 1; threads <= 4; threads++) {
            opf_set_num_threads(threads);
            CHECK(opf_op_run(builtin("sum_to"), (const opf_tensor *[]){&x.t, &like.t}, (const opf_tensor *[]){&y.t},
                             NULL) == OPF_OK,
                  "%s", opf_last_error());
            if (threads == 1) {
                memcpy(first, y.t.data, y.numel * sizeof(float));
            } else {
                CHECK_SAME_BITS(y.t.data, first, y.numel, sizeof(float), "case %zu with %d threads", c, threads);
            }
        }
        free(first);
        tv_free(&x), tv_free(&like), tv_free(&y);
    }
    opf_set_num_threads(before);
}

/* A user's rows: two broadcast outputs; two outputs summed to different
 * shapes; a summed output next to a full one. */
TEST(test_user_rows) {
    rng r = rng_seed(0xC0FFEE);
    const shape sa = {2, {3, 1}}, sb = {3, {2, 1, 4}}, sy = {3, {2, 3, 4}};
    tview a, b, s, d;
    tv_make(&a, OPF_F64, sa.n, sa.d, TV_TRANSPOSED, 0);
    tv_make(&b, OPF_F64, sb.n, sb.d, TV_NEGATIVE, 0);
    tv_make(&s, OPF_F64, sy.n, sy.d, TV_CONTIG, 0);
    tv_make(&d, OPF_F64, sy.n, sy.d, TV_STEP2, 0);
    double va[3], vb[8], gs[24], gd[24], ws[24], wd[24];
    tv_fill(&a, &r, 0, va);
    tv_fill(&b, &r, 0, vb);
    CHECK(opf_op_run(user_op("bsum_diff"), (const opf_tensor *[]){&a.t, &b.t}, (const opf_tensor *[]){&s.t, &d.t},
                     NULL) == OPF_OK,
          "%s", opf_last_error());
    for (int64_t i = 0; i < 24; i++) {
        double x = va[ref_broadcast_offset(3, sy.d, i, sa.n, sa.d)], z = vb[ref_broadcast_offset(3, sy.d, i, 3, sb.d)];
        ws[i] = x + z;
        wd[i] = x - z;
    }
    tv_gather(&s, gs);
    tv_gather(&d, gd);
    CHECK_CLOSE_F64(gs, ws, 24, 0, 0, "bsum_diff: s");
    CHECK_CLOSE_F64(gd, wd, 24, 0, 0, "bsum_diff: d");

    /* sub_grad(dy, a, b) -> (da[sum_to(a)], db[sum_to(b)]). */
    tview dy, da, db;
    tv_make(&dy, OPF_F64, sy.n, sy.d, TV_STEP2, 0);
    tv_make(&da, OPF_F64, sa.n, sa.d, TV_CONTIG, 0);
    tv_make(&db, OPF_F64, sb.n, sb.d, TV_NEGATIVE, 0);
    double vdy[24], gda[3], gdb[8], wda[3] = {0}, wdb[8] = {0};
    tv_fill(&dy, &r, 0, vdy);
    CHECK(opf_op_run(user_op("sub_grad"), (const opf_tensor *[]){&dy.t, &a.t, &b.t},
                     (const opf_tensor *[]){&da.t, &db.t}, NULL) == OPF_OK,
          "%s", opf_last_error());
    for (int64_t i = 0; i < 24; i++) {
        wda[ref_broadcast_offset(3, sy.d, i, sa.n, sa.d)] += vdy[i];
        wdb[ref_broadcast_offset(3, sy.d, i, sb.n, sb.d)] -= vdy[i];
    }
    tv_gather(&da, gda);
    tv_gather(&db, gdb);
    CHECK_CLOSE_F64(gda, wda, 3, 1e-14, 1e-14, "sub_grad: da");
    CHECK_CLOSE_F64(gdb, wdb, 8, 1e-14, 1e-14, "sub_grad: db");

    /* scaled_and_sum(x, like) -> (y[broadcast(x, like)], s[sum_to(like)]): y = 2x at the broadcast shape. */
    tview sy2, ss;
    tv_make(&sy2, OPF_F64, sy.n, sy.d, TV_CONTIG, 0);
    tv_make(&ss, OPF_F64, sa.n, sa.d, TV_CONTIG, 0);
    CHECK(opf_op_run(user_op("scaled_and_sum"), (const opf_tensor *[]){&dy.t, &a.t},
                     (const opf_tensor *[]){&sy2.t, &ss.t}, NULL) == OPF_OK,
          "%s", opf_last_error());
    double gy[24], wy[24], gss[3];
    tv_gather(&sy2, gy);
    tv_gather(&ss, gss);
    for (int64_t i = 0; i < 24; i++) {
        wy[i] = 2 * vdy[i];
    }
    CHECK_CLOSE_F64(gy, wy, 24, 0, 0, "scaled_and_sum: y");
    CHECK_CLOSE_F64(gss, wda, 3, 1e-14, 1e-14, "scaled_and_sum: s");
    tv_free(&a), tv_free(&b), tv_free(&s), tv_free(&d), tv_free(&dy), tv_free(&da), tv_free(&db), tv_free(&sy2),
        tv_free(&ss);
}

/* --- in place and mistakes ---------------------------------------------------------------------------------------- */

TEST(test_in_place_and_errors) {
    float a[12], b[4], y[12], like[4];
    for (int i = 0; i < 12; i++) {
        a[i] = (float)i;
    }
    for (int i = 0; i < 4; i++) {
        b[i] = (float)(10 * i);
    }
    const int64_t s34[2] = {3, 4}, s4[1] = {4}, s14[2] = {1, 4}, s43[2] = {4, 3}, s3[1] = {3};
    opf_tensor ta = opf_tensor_make(a, OPF_F32, 2, s34), tb = opf_tensor_make(b, OPF_F32, 1, s4),
               ty = opf_tensor_make(y, OPF_F32, 2, s34);
    /* The output exactly on the full input: allowed. */
    CHECK(opf_add(&ta, &tb, &ta) == OPF_OK, "add into a: %s", opf_last_error());
    for (int i = 0; i < 12; i++) {
        CHECK(a[i] == (float)i + (float)(10 * (i % 4)), "add in place: a[%d] = %g", i, (double)a[i]);
    }
    /* Onto the broadcast input: it overlaps part of y's elements only. */
    float big[12] = {0};
    opf_tensor row0 = opf_tensor_make(big, OPF_F32, 1, s4), all = opf_tensor_make(big, OPF_F32, 2, s34);
    opf_status st = opf_add(&ta, &row0, &all);
    CHECK(st == OPF_E_LAYOUT, "y over the broadcast b: %s", opf_status_name(st));
    CHECK_CONTAINS(opf_last_error(), "partially overlaps input b");
    /* A summed output never in place, even exactly on an input of its shape. */
    opf_tensor tl = opf_tensor_make(like, OPF_F32, 2, s14);
    st = opf_op_run(builtin("sum_to"), (const opf_tensor *[]){&ta, &tl}, (const opf_tensor *[]){&tl}, NULL);
    CHECK(st == OPF_E_LAYOUT, "sum_to into like: %s", opf_status_name(st));
    CHECK_CONTAINS(opf_last_error(), "opforge.sum_to: y overlaps input like");
    CHECK_CONTAINS(opf_last_error(), "cannot be written in place");
    /* Shapes that do not broadcast, and an output of another shape; y untouched. */
    for (int i = 0; i < 12; i++) {
        y[i] = 42;
    }
    opf_tensor t43 = opf_tensor_make(a, OPF_F32, 2, s43), t3 = opf_tensor_make(b, OPF_F32, 1, s3);
    st = opf_add(&ta, &t3, &ty);
    CHECK(st == OPF_E_SHAPE, "[3,4] + [3]: %s", opf_status_name(st));
    CHECK_CONTAINS(opf_last_error(), "opforge.add: shape mismatch: a is [3,4], b is [3]; they must broadcast together");
    st = opf_op_run(builtin("mul"), (const opf_tensor *[]){&ta, &tb}, (const opf_tensor *[]){&t43}, NULL);
    CHECK(st == OPF_E_SHAPE, "mul into [4,3]: %s", opf_status_name(st));
    CHECK_CONTAINS(opf_last_error(), "opforge.mul: y has shape [4,3], expected [3,4]");
    st = opf_op_run(builtin("mul"), (const opf_tensor *[]){&ta, &tb}, (const opf_tensor *[]){&tb}, NULL);
    CHECK(st == OPF_E_SHAPE, "mul into [4]: %s", opf_status_name(st));
    for (int i = 0; i < 12; i++) {
        CHECK(y[i] == 42, "y written by a failed call");
    }
    /* A dtype mismatch names the argument. */
    double d4[4] = {0};
    opf_tensor td = opf_tensor_make(d4, OPF_F64, 1, s4);
    st = opf_add(&ta, &td, &ty);
    CHECK(st == OPF_E_DTYPE, "f32 + f64: %s", opf_status_name(st));
    CHECK_CONTAINS(opf_last_error(), "b is float64");
}

/* Memory that faults when touched: `bytes` of it (whole pages), or NULL. */
static char *untouchable(size_t bytes) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), len = (bytes + page - 1) / page * page;
    void *map = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return map == MAP_FAILED ? NULL : map;
}

/* A shape-only input (sum_to's and mul_grad's like) is never read: laid out
 * any way but contiguously over memory that faults when touched, the
 * results are the references' (a gather or a prefetch-and-load of it would
 * crash the test), at a size whose output is streamed and at a small one,
 * into an output of like's shape or summed down to it; contiguous and full
 * of NaN, it changes nothing either. */
TEST(test_shape_only_inputs_unread) {
    const int64_t R = harness_slow() ? 96 : 4096, C = harness_slow() ? 80 : 1024; /* 16 MiB of float32: streamed */
    for (int big = 0; big < 2; big++) {
        const int64_t r = big ? R : 7, c = big ? C : 33, n = r * c;
        char *nothing = untouchable((size_t)(2 * n) * sizeof(double));
        float *x = xmalloc(sizeof(float) * (size_t)n), *dy = xmalloc(sizeof(float) * (size_t)n),
              *w = xmalloc(sizeof(float) * (size_t)c), *y = xmalloc(sizeof(float) * (size_t)n),
              *nan_like = xmalloc(sizeof(float) * (size_t)n), *want = xmalloc(sizeof(float) * (size_t)n);
        if (!CHECK(nothing != NULL, "mmap failed")) {
            return;
        }
        rng g = rng_seed(41);
        fill_uniform_f32(&g, x, (size_t)n, -2, 2);
        fill_uniform_f32(&g, dy, (size_t)n, -2, 2);
        fill_uniform_f32(&g, w, (size_t)c, -2, 2);
        for (int64_t i = 0; i < n; i++) {
            nan_like[i] = NAN;
        }
        const int64_t s2[2] = {r, c}, s1[1] = {c}, col_major[2] = {1, r}, every_other[1] = {2};
        opf_tensor tx = opf_tensor_make(x, OPF_F32, 2, s2), tdy = opf_tensor_make(dy, OPF_F32, 2, s2),
                   tw = opf_tensor_make(w, OPF_F32, 1, s1), ty = opf_tensor_make(y, OPF_F32, 2, s2),
                   ty1 = opf_tensor_make(y, OPF_F32, 1, s1), tnan = opf_tensor_make(nan_like, OPF_F32, 2, s2);
        opf_tensor like2 = opf_tensor_make(nothing, OPF_F32, 2, s2), like1 = opf_tensor_make(nothing, OPF_F32, 1, s1);
        like2.strides = col_major;
        like1.strides = every_other;
        /* sum_to(x, like) with like of x's shape: x. */
        opf_status st =
            opf_op_run(builtin("sum_to"), (const opf_tensor *[]){&tx, &like2}, (const opf_tensor *[]){&ty}, NULL);
        CHECK(st == OPF_OK, "sum_to [%lld, %lld]: %s", (long long)r, (long long)c, opf_last_error());
        CHECK_SAME_BITS(y, x, (size_t)n, sizeof(float), "sum_to [%lld, %lld], like column-major", (long long)r,
                        (long long)c);
        /* mul_grad(dy, w, like): dy * w, of like's shape. */
        for (int64_t i = 0; i < n; i++) {
            want[i] = dy[i] * w[i % c];
        }
        const opf_tensor *likes[2] = {&like2, &tnan};
        for (int k = 0; k < 2; k++) {
            st = opf_op_run(builtin("mul_grad"), (const opf_tensor *[]){&tdy, &tw, likes[k]},
                            (const opf_tensor *[]){&ty}, NULL);
            CHECK(st == OPF_OK, "mul_grad: %s", opf_last_error());
            CHECK_SAME_BITS(y, want, (size_t)n, sizeof(float), "mul_grad [%lld, %lld], like %s", (long long)r,
                            (long long)c, k == 0 ? "column-major" : "of NaN");
        }
        /* sum_to(x, like[c]) and mul_grad(dy, x, like[c]): sums down the rows. */
        double sum[1024] = {0}, prod[1024] = {0}, tol[1024];
        for (int64_t i = 0; i < n; i++) {
            sum[i % c] += x[i];
            prod[i % c] += (double)dy[i] * x[i];
        }
        const double *refs[2] = {sum, prod};
        for (int k = 0; k < 2; k++) {
            st = k == 0 ? opf_op_run(builtin("sum_to"), (const opf_tensor *[]){&tx, &like1},
                                     (const opf_tensor *[]){&ty1}, NULL)
                        : opf_op_run(builtin("mul_grad"), (const opf_tensor *[]){&tdy, &tx, &like1},
                                     (const opf_tensor *[]){&ty1}, NULL);
            CHECK(st == OPF_OK, "%s down the rows: %s", k == 0 ? "sum_to" : "mul_grad", opf_last_error());
            double got[1024];
            for (int64_t j = 0; j < c; j++) {
                got[j] = y[j];
                tol[j] = 1e-5 * (double)r * 4 + 1e-6 * fabs(refs[k][j]);
            }
            CHECK_CLOSE_TOL(got, refs[k], tol, (size_t)c, "%s [%lld, %lld] to [%lld], like strided",
                            k == 0 ? "sum_to" : "mul_grad", (long long)r, (long long)c, (long long)c);
        }
        munmap(nothing, (size_t)(2 * n) * sizeof(double));
        free(x), free(dy), free(w), free(y), free(nan_like), free(want);
    }
}

int main(void) {
    RUN_TEST(test_rows_declared);
    RUN_TEST(test_declaration_mistakes);
    RUN_TEST(test_validate_rows);
    RUN_TEST(test_infer_shape);
    RUN_TEST(test_add_mul_values);
    RUN_TEST(test_sum_to_values);
    RUN_TEST(test_mul_grad_values);
    RUN_TEST(test_large_reductions);
    RUN_TEST(test_large_broadcasts);
    RUN_TEST(test_thread_count_independent);
    RUN_TEST(test_user_rows);
    RUN_TEST(test_in_place_and_errors);
    RUN_TEST(test_shape_only_inputs_unread);
    opf_ops_release(user_table());
    return harness_summary();
}
