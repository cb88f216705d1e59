"""Optional outputs nobody needs are not computed: the custom VJP asks a
gradient row only for the gradients of inputs that are differentiated
(``symbolic_zeros``), the handler passes NULL for the others to opf_op_run.

A user library built here counts which outputs its gradient row's compute
function is given; the built-in dense is checked through the HLO and against
JAX's own gradients."""

from __future__ import annotations

import ctypes
import shutil
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads
from references import FLOAT_DTYPES
from oplib import ELEMENT_ACCESS_C, compile_op_library

import opforge.jax as oj

# "mul": y = a * b, differentiated by "mul_grad": da = dy * b, db = dy * a, both
# optional. mul_grad differentiates itself (a second order), and counts its
# calls and the outputs it was asked for (mul_counts).
COUNTING_OPS_C = ELEMENT_ACCESS_C + r"""
static int64_t counts[3]; /* calls, da computed, db computed */

__attribute__((visibility("default"))) void mul_counts(int64_t *out) {
    for (int i = 0; i < 3; ++i) out[i] = counts[i];
}

static opf_status mul_compute(const opf_tensor *const *in, const opf_tensor *const *out, const opf_attr_value *attrs) {
    (void)attrs;
    for (int64_t i = 0, n = count(in[0]); i < n; ++i) put(out[0], i, get(in[0], i) * get(in[1], i));
    return OPF_OK;
}

static opf_status mul_grad_compute(const opf_tensor *const *in, const opf_tensor *const *out,
                                   const opf_attr_value *attrs) {
    (void)attrs;
    counts[0]++;
    counts[1] += out[0] != NULL;
    counts[2] += out[1] != NULL;
    for (int64_t i = 0, n = count(in[0]); i < n; ++i) {
        double dy = get(in[0], i), a = get(in[1], i), b = get(in[2], i); /* an output may alias an input */
        if (out[0]) put(out[0], i, dy * b);
        if (out[1]) put(out[1], i, dy * a);
    }
    return OPF_OK;
}

static const opf_op_def mul_op = {
    .name = "mul",
    .doc = "y = a * b",
    .flags = OPF_OP_ELEMENTWISE,
    .dtypes = OPF_DTYPES_F32 | OPF_DTYPES_F64,
    .num_inputs = 2,
    .inputs = {{.name = "a", .doc = "factor"}, {.name = "b", .doc = "factor"}},
    .num_outputs = 1,
    .outputs = {{.name = "y", .doc = "a * b"}},
    .output_shapes = {{.kind = OPF_SHAPE_LIKE, .like = 0}},
    .num_checks = 1,
    .checks = {{.kind = OPF_CHECK_SAME_SHAPE, .a = 0, .b = 1}},
    .num_grads = 1,
    .grads = {{.op = "mul_grad", .num_sources = 3, .sources = {{OPF_FROM_GRAD, 0}, {OPF_FROM_INPUT, 0},
               {OPF_FROM_INPUT, 1}}, .num_produces = 2, .produces = {0, 1}}},
    .compute = mul_compute,
};

/* da = dy * b: d/ddy = g_da * b, d/db = g_da * dy, i.e. mul_grad(g_da, dy, b)
 * gives them in (da, db); db = dy * a likewise with mul_grad(g_db, dy, a). */
static const opf_op_def mul_grad_op = {
    .name = "mul_grad",
    .doc = "da = dy * b, db = dy * a, each optional",
    .flags = OPF_OP_ELEMENTWISE,
    .dtypes = OPF_DTYPES_F32 | OPF_DTYPES_F64,
    .num_inputs = 3,
    .inputs = {{.name = "dy", .doc = "gradient of y"}, {.name = "a", .doc = "factor"}, {.name = "b", .doc = "factor"}},
    .num_outputs = 2,
    .outputs = {{.name = "da", .flags = OPF_ARG_OPTIONAL, .doc = "gradient of a"},
                {.name = "db", .flags = OPF_ARG_OPTIONAL, .doc = "gradient of b"}},
    .output_shapes = {{.kind = OPF_SHAPE_LIKE, .like = 0}, {.kind = OPF_SHAPE_LIKE, .like = 0}},
    .num_checks = 2,
    .checks = {{.kind = OPF_CHECK_SAME_SHAPE, .a = 0, .b = 1}, {.kind = OPF_CHECK_SAME_SHAPE, .a = 0, .b = 2}},
    .num_grads = 2,
    .grads = {{.op = "mul_grad", .num_sources = 3, .sources = {{OPF_FROM_GRAD, 0}, {OPF_FROM_INPUT, 0},
               {OPF_FROM_INPUT, 2}}, .num_produces = 2, .produces = {0, 2}},
              {.op = "mul_grad", .num_sources = 3, .sources = {{OPF_FROM_GRAD, 1}, {OPF_FROM_INPUT, 0},
               {OPF_FROM_INPUT, 1}}, .num_produces = 2, .produces = {0, 1}}},
    .compute = mul_grad_compute,
};

static const opf_op_def *const rows[] = {&mul_op, &mul_grad_op};
static const opf_op_table table = {.abi_version = OPF_TABLE_ABI_VERSION, .name = "counting", .num_ops = 2, .ops = rows};
OPF_EXPORT_OP_TABLE(table)
"""  # fmt: skip

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_op_library(tmp_path_factory.mktemp("countingops"), "countingops", COUNTING_OPS_C)


@pytest.fixture(scope="module")
def ops(library: Path) -> oj.OpNamespace:
    return oj.load_ops(library)


@pytest.fixture(scope="module")
def counts(library: Path, ops: oj.OpNamespace) -> Any:
    """mul_grad's (calls, da computed, db computed) so far (the library load_ops loaded)."""
    handle = ctypes.CDLL(str(library))
    handle.mul_counts.argtypes = (ctypes.POINTER(ctypes.c_int64),)

    def read() -> tuple[int, int, int]:
        out = (ctypes.c_int64 * 3)()
        handle.mul_counts(out)
        return (out[0], out[1], out[2])

    return read


def delta(counts: Any, run: Any) -> tuple[int, ...]:
    before = counts()
    jax.block_until_ready(run())
    return tuple(after - b for after, b in zip(counts(), before))


@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_only_the_gradients_asked_for_are_computed(ops: oj.OpNamespace, counts: Any, mode: str) -> None:
    a = jnp.asarray([1.0, -2.0, 3.0])
    b = jnp.asarray([0.5, 4.0, -1.0])
    loss = lambda a, b: jnp.sum(ops.mul(a, b) ** 2)  # noqa: E731
    wrap = jax.jit if mode == "jit" else (lambda f: f)
    for argnums, expected in [(0, (1, 1, 0)), (1, (1, 0, 1)), ((0, 1), (1, 1, 1))]:
        grad = wrap(jax.grad(loss, argnums=argnums))
        assert delta(counts, lambda: grad(a, b)) == expected, argnums
    # the gradient row called directly computes everything
    assert delta(counts, lambda: ops.mul_grad(a, a, b)) == (1, 1, 1)


def test_gradients_of_partial_gradients_are_right(ops: oj.OpNamespace, counts: Any) -> None:
    rng = np.random.default_rng(0)
    a, b = jnp.asarray(rng.standard_normal((3, 4))), jnp.asarray(rng.standard_normal((3, 4)))
    for argnums in (0, 1, (0, 1)):
        got = jax.grad(lambda a, b: jnp.sum(jnp.sin(ops.mul(a, b))), argnums=argnums)(a, b)
        expected = jax.grad(lambda a, b: jnp.sum(jnp.sin(a * b)), argnums=argnums)(a, b)
        for g, e in zip(jax.tree.leaves(got), jax.tree.leaves(expected)):
            np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)
    check_grads(ops.mul, (a, b), order=2, modes=["rev"])
    check_grads(lambda a: ops.mul(a, b), (a,), order=2, modes=["rev"])
    # second order in a alone: d/da of (dy * b) is zero, so mul_grad's own
    # rules give nothing; the Hessian-vector product of sum(sin(a b)) in a
    hvp = jax.grad(lambda a: jnp.vdot(jax.grad(lambda a: jnp.sum(jnp.sin(ops.mul(a, b))))(a), a))(a)
    expected = jax.grad(lambda a: jnp.vdot(jax.grad(lambda a: jnp.sum(jnp.sin(a * b)))(a), a))(a)
    np.testing.assert_allclose(hvp, expected, rtol=1e-12, atol=1e-12)


def test_vmap_of_a_partial_gradient(ops: oj.OpNamespace, counts: Any) -> None:
    rng = np.random.default_rng(1)
    a, b = jnp.asarray(rng.standard_normal((5, 3))), jnp.asarray(rng.standard_normal((5, 3)))
    grad_b = jax.grad(lambda a, b: jnp.sum(ops.mul(a, b) ** 2), argnums=1)
    got = jax.vmap(grad_b)(a, b)
    np.testing.assert_allclose(got, 2 * a * a * b, rtol=1e-12)
    calls, da, db = delta(counts, lambda: jax.jit(jax.vmap(grad_b))(a, b))
    assert calls >= 1 and da == 0 and db == calls


def dense_grad_calls(f: Any, *args: Any) -> list[str]:
    """The dense_grad custom calls of f's compiled program (their attributes)."""
    text = jax.jit(f).lower(*args).as_text()
    return [line for line in text.splitlines() if "@opforge.dense_grad" in line]


def test_first_layer_input_gradient_is_not_computed() -> None:
    x, w, b = jnp.ones((3, 4)), jnp.full((4, 2), 0.5), jnp.ones(2)
    loss = lambda x, w, b: jnp.sum(oj.dense(x, w, b, activation="relu") ** 2)  # noqa: E731
    # outputs (dx, dw, db): bit o set when output o is asked for
    for argnums, mask in [(1, 2), (2, 4), ((1, 2), 6), (0, 1), ((0, 1, 2), None)]:
        (call,) = dense_grad_calls(jax.grad(loss, argnums=argnums), x, w, b)
        if mask is None:
            assert "opf_outputs" not in call
        else:
            assert f"opf_outputs = {mask} : i64" in call, (argnums, call)
    # d/dw sum(relu(xw + b)^2) = x^T 2 (xw + b), with xw + b = 3 everywhere
    np.testing.assert_allclose(jax.grad(loss, argnums=1)(x, w, b), np.full((4, 2), 3 * 2 * 3.0))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_mlp_gradients_match_the_builtins(dtype: Any) -> None:
    """Parameters differentiated, the data not: the first layer's dx is skipped."""
    rng = np.random.default_rng(2)
    x, t = jnp.asarray(rng.standard_normal((8, 6)), dtype), jnp.asarray(rng.standard_normal((8, 3)), dtype)
    params = {
        "w1": jnp.asarray(rng.standard_normal((6, 5)), dtype), "b1": jnp.asarray(rng.standard_normal(5), dtype),
        "w2": jnp.asarray(rng.standard_normal((5, 3)), dtype), "b2": jnp.asarray(rng.standard_normal(3), dtype),
    }  # fmt: skip

    def ours(p: dict[str, jax.Array]) -> jax.Array:
        h = oj.dense(x, p["w1"], p["b1"], activation="relu")
        return jnp.sum((oj.dense(h, p["w2"], p["b2"]) - t) ** 2)

    def builtin(p: dict[str, jax.Array]) -> jax.Array:
        hp = jax.lax.Precision.HIGHEST
        h = jax.nn.relu(jnp.matmul(x, p["w1"], precision=hp) + p["b1"])
        return jnp.sum((jnp.matmul(h, p["w2"], precision=hp) + p["b2"] - t) ** 2)

    calls = dense_grad_calls(jax.grad(ours), params)
    assert sorted("opf_outputs = 6 : i64" in call for call in calls) == [False, True]  # layer 2 needs dx
    got, expected = jax.jit(jax.grad(ours))(params), jax.grad(builtin)(params)
    tol = 1e-4 if dtype == np.float32 else 1e-11
    for k in params:
        assert got[k].dtype == dtype
        np.testing.assert_allclose(got[k], expected[k], rtol=tol, atol=tol)


def test_handler_skips_and_requires_outputs() -> None:
    dy, x, w = jnp.ones((2, 3), jnp.float32), jnp.ones((2, 4), jnp.float32), jnp.ones((4, 3), jnp.float32)
    only_dw = jax.ffi.ffi_call("opforge.dense_grad", [jax.ShapeDtypeStruct((4, 3), jnp.float32)],
                               vmap_method="sequential")  # fmt: skip
    (dw,) = only_dw(dy, x, w, opf_inputs=np.int64(7), opf_outputs=np.int64(2))
    np.testing.assert_array_equal(dw, np.full((4, 3), 2.0))
    relu = jax.ffi.ffi_call("opforge.relu", [], vmap_method="sequential", has_side_effect=True)  # not dropped
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"opforge\.jax\.relu: output y is required"):
        jax.block_until_ready(relu(x, opf_outputs=np.int64(0)))
