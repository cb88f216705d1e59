"""C sources of a small op table for the build and reload tests of every adapter.

``times_source(table, factor)`` declares ``times(x) -> y = factor * x`` (with
``shift=True``, ``times(x, *, shift=0.0) -> y = factor * x + shift``: another
schema) and its gradient op ``times_grad(dy) -> dx = factor * dy``. Changing
the factor changes the code and nothing else; a test that loads a changed
source under the same table name sees which code runs.
"""

from __future__ import annotations

from oplib import ELEMENT_ACCESS_C


def times_source(table: str, factor: float, *, shift: bool = False) -> str:
    """C source of table ``table`` whose ops multiply by ``factor``."""
    shift_attr = (
        '.num_attrs = 1, .attrs = {{.name = "shift", .type = OPF_ATTR_FLOAT, .default_value = {.f = 0.0}, '
        '.doc = "added to the product"}},'
        if shift
        else ""
    )
    shift_term = " + attrs[0].f" if shift else ""
    return ELEMENT_ACCESS_C + rf"""
#define FACTOR {factor!r}

static opf_status times_compute(const opf_tensor *const *in, const opf_tensor *const *out,
                                const opf_attr_value *attrs) {{
    (void)attrs;
    for (int64_t i = 0, n = count(in[0]); i < n; ++i) put(out[0], i, FACTOR * get(in[0], i){shift_term});
    return OPF_OK;
}}

static opf_status times_grad_compute(const opf_tensor *const *in, const opf_tensor *const *out,
                                     const opf_attr_value *attrs) {{
    (void)attrs;
    for (int64_t i = 0, n = count(in[0]); i < n; ++i) put(out[0], i, FACTOR * get(in[0], i));
    return OPF_OK;
}}

static const opf_op_def times_op = {{
    .name = "times", .doc = "y = FACTOR * x", .flags = OPF_OP_ELEMENTWISE,
    .dtypes = OPF_DTYPES_F32 | OPF_DTYPES_F64,
    .num_inputs = 1, .inputs = {{{{.name = "x"}}}},
    .num_outputs = 1, .outputs = {{{{.name = "y"}}}},
    .output_shapes = {{{{.kind = OPF_SHAPE_LIKE, .like = 0}}}},
    {shift_attr}
    .num_grads = 1,
    .grads = {{{{.op = "times_grad", .num_sources = 1, .sources = {{{{OPF_FROM_GRAD, 0}}}},
               .num_produces = 1, .produces = {{0}}}}}},
    .compute = times_compute,
}};

static const opf_op_def times_grad_op = {{
    .name = "times_grad", .doc = "dx = FACTOR * dy", .flags = OPF_OP_ELEMENTWISE,
    .dtypes = OPF_DTYPES_F32 | OPF_DTYPES_F64,
    .num_inputs = 1, .inputs = {{{{.name = "dy"}}}},
    .num_outputs = 1, .outputs = {{{{.name = "dx"}}}},
    .output_shapes = {{{{.kind = OPF_SHAPE_LIKE, .like = 0}}}},
    .compute = times_grad_compute,
}};

static const opf_op_def *const rows[] = {{&times_op, &times_grad_op}};
static const opf_op_table table = {{.abi_version = OPF_TABLE_ABI_VERSION, .name = "{table}", .num_ops = 2,
                                    .ops = rows}};
OPF_EXPORT_OP_TABLE(table)
"""
