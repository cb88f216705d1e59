"""A user's own op table, compiled here, registered with opforge.tensorflow.load_ops."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from oplib import ELEMENT_ACCESS_C, compile_op_library

pytest.importorskip("tensorflow")  # a clean skip without it (conftest.py)
import tensorflow as tf  # noqa: E402

import opforge.tensorflow as otf  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

# "axpb": y = alpha * x (+ b), b optional, with gradients (an op of the table
# and an identity rule); "negate": attributes of every kind, no gradient.
USER_OPS_C = ELEMENT_ACCESS_C + r"""
#include <math.h>

static opf_status axpb_compute(const opf_tensor *const *in, const opf_tensor *const *out, const opf_attr_value *attrs) {
    for (int64_t i = 0, n = count(in[0]); i < n; ++i)
        put(out[0], i, attrs[0].f * get(in[0], i) + (in[1] ? get(in[1], i) : 0.0));
    return OPF_OK;
}

static opf_status negate_compute(const opf_tensor *const *in, const opf_tensor *const *out, const opf_attr_value *attrs) {
    double sign = (attrs[0].i % 2) ? -1.0 : 1.0;
    for (int64_t i = 0, n = count(in[0]); i < n; ++i) {
        double v = sign * get(in[0], i) + attrs[1].f;
        put(out[0], i, attrs[2].i == 1 ? fabs(v) : v);
    }
    return OPF_OK;
}

static const opf_op_def axpb_op = {
    .name = "axpb",
    .doc = "y = alpha * x + b (b optional, the shape of x).",
    .flags = OPF_OP_ELEMENTWISE,
    .dtypes = OPF_DTYPES_F32 | OPF_DTYPES_F64,
    .num_inputs = 2,
    .inputs = {{.name = "x", .doc = "input"}, {.name = "b", .flags = OPF_ARG_OPTIONAL, .doc = "added"}},
    .num_outputs = 1,
    .outputs = {{.name = "y", .doc = "alpha * x + b"}},
    .output_shapes = {{.kind = OPF_SHAPE_LIKE, .like = 0}},
    .num_attrs = 1,
    .attrs = {{.name = "alpha", .type = OPF_ATTR_FLOAT, .default_value = {.f = 2.0}, .doc = "factor"}},
    .num_checks = 1,
    .checks = {{.kind = OPF_CHECK_SAME_SHAPE, .a = 0, .b = 1}},
    .num_grads = 2,
    .grads = {{.op = "axpb", .num_sources = 2, .sources = {{OPF_FROM_GRAD, 0}, {OPF_FROM_NONE, 0}}, .num_produces = 1,
               .produces = {0}},
              {.op = NULL, .num_sources = 1, .sources = {{OPF_FROM_GRAD, 0}}, .num_produces = 1, .produces = {1}}},
    .compute = axpb_compute,
};

static const opf_op_def negate_op = {
    .name = "negate",
    .doc = "y = offset + (-1)^times * x, then |y| when mode is 'abs'.",
    .flags = OPF_OP_ELEMENTWISE,
    .dtypes = OPF_DTYPES_F64,
    .num_inputs = 1,
    .inputs = {{.name = "x", .doc = "input"}},
    .num_outputs = 1,
    .outputs = {{.name = "y", .doc = "the result"}},
    .output_shapes = {{.kind = OPF_SHAPE_LIKE, .like = 0}},
    .num_attrs = 3,
    .attrs = {
        {.name = "times", .type = OPF_ATTR_INT, .default_value = {.i = 1}, .doc = "how many times to negate"},
        {.name = "offset", .type = OPF_ATTR_FLOAT, .default_value = {.f = 0.0}, .doc = "added after negating"},
        {.name = "mode", .type = OPF_ATTR_ENUM, .default_value = {.i = 0}, .choices = {"none", "abs"}, .doc = "abs"},
    },
    .compute = negate_compute,
};

static const opf_op_def *const rows[] = {&axpb_op, &negate_op};
static const opf_op_table table = {.abi_version = OPF_TABLE_ABI_VERSION, .name = "tf_user_ops", .num_ops = 2, .ops = rows};
OPF_EXPORT_OP_TABLE(table)
"""


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_op_library(tmp_path_factory.mktemp("tfuserops"), "tfuserops", USER_OPS_C)


@pytest.fixture(scope="module")
def ops(library: Path) -> otf.OpNamespace:
    return otf.load_ops(library)


def test_user_ops_are_registered_with_table_derived_names(ops: otf.OpNamespace) -> None:
    assert ops.axpb.tf_op_name == "TfUserOpsAxpb" and ops.negate.tf_op_name == "TfUserOpsNegate"
    assert callable(ops.raw.tf_user_ops_axpb)
    assert "y = alpha * x + b" in (ops.axpb.__doc__ or "")


@pytest.mark.parametrize("mode", ["eager", "function"])
def test_user_ops_compute_with_attributes(ops: otf.OpNamespace, mode: str) -> None:
    x = tf.constant(np.random.default_rng(3).standard_normal((4, 5)))
    b = tf.ones([4, 5], tf.float64)

    def run(fn, *args, **kwargs):  # type: ignore[no-untyped-def]
        return fn(*args, **kwargs) if mode == "eager" else tf.function(lambda *a: fn(*a, **kwargs))(*args)

    np.testing.assert_array_equal(run(ops.axpb, x), 2 * x)
    np.testing.assert_array_equal(run(ops.axpb, x, b, alpha=-0.5), -0.5 * x + 1)
    np.testing.assert_array_equal(run(ops.axpb, tf.cast(x, tf.float32), alpha=3.0), 3 * tf.cast(x, tf.float32))
    np.testing.assert_array_equal(run(ops.negate, x), -x)
    np.testing.assert_array_equal(run(ops.negate, x, times=2, offset=0.25), x + 0.25)
    np.testing.assert_array_equal(run(ops.negate, x, offset=-1.0, mode="abs"), np.abs(-x - 1.0))


def test_user_op_gradients(ops: otf.OpNamespace) -> None:
    x = tf.constant(np.random.default_rng(4).standard_normal((3, 2)))
    b = tf.constant(np.random.default_rng(5).standard_normal((3, 2)))
    theoretical, numeric = tf.test.compute_gradient(lambda x, b: ops.axpb(x, b, alpha=-1.5), [x, b])
    for t, n in zip(theoretical, numeric):
        np.testing.assert_allclose(t, n, rtol=1e-7, atol=1e-8)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = ops.negate(x)
    with pytest.raises(LookupError, match=r"tf_user_ops\.negate .* is not differentiable"):
        tape.gradient(y, x)


def test_user_op_errors(ops: otf.OpNamespace, library: Path) -> None:
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"shape mismatch: x is \[2\], b is \[3\]"):
        ops.axpb(tf.ones(2), tf.ones(3))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"attr 'T' of float is not in the list of allowed values: double"):
        ops.negate(tf.ones(2))
    assert otf.load_ops(library) is ops  # the same library again: the ops registered first
    again = otf.load_ops(library, prefix="Second")
    np.testing.assert_array_equal(again.axpb(tf.ones(2)), [2.0, 2.0])
    with pytest.raises(ValueError, match=r"prefix 'bad name' must be CamelCase"):
        otf.load_ops(library, prefix="bad name")
