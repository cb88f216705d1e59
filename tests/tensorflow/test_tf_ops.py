"""Every op against TensorFlow's built-in equivalent, eagerly and in tf.function, float32 and float64."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

pytest.importorskip("tensorflow")  # a clean skip without it (conftest.py)
import tensorflow as tf  # noqa: E402
from references import FLOAT_DTYPES, assert_matmul_close, ref_dense, ref_relu_grad  # noqa: E402

import opforge.tensorflow as otf  # noqa: E402

RNG = np.random.default_rng(1234)
MODES = ["eager", "function"]


def run(mode: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    if mode == "eager":
        return fn(*args, **kwargs)
    return tf.function(lambda *a: fn(*a, **kwargs))(*args)


def edge_values(dtype: Any) -> np.ndarray:
    info = np.finfo(dtype)
    return np.array([0.0, -0.0, 1.0, -1.0, info.tiny, -info.tiny, info.max, -info.max, np.inf, -np.inf, np.nan], dtype)


def shapes() -> list[tuple[int, ...]]:
    return [(), (0,), (1,), (7,), (3, 0, 2), (33, 65), (2, 3, 4, 5), (1 << 17,)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("shape", shapes(), ids=str)
def test_elementwise_match_builtins(mode: str, dtype: Any, shape: tuple[int, ...]) -> None:
    x = tf.constant(RNG.standard_normal(shape).astype(dtype))
    y = tf.constant(RNG.standard_normal(shape).astype(dtype))
    np.testing.assert_array_equal(run(mode, otf.relu, x), tf.nn.relu(x))
    np.testing.assert_array_equal(run(mode, otf.add, x, y), tf.add(x, y))
    alpha = float(np.float32(-0.37))  # the attr is a TF float (float32)
    np.testing.assert_array_equal(run(mode, otf.scale, x, alpha=alpha), x * tf.constant(alpha, x.dtype))
    np.testing.assert_array_equal(run(mode, otf.relu_grad, y, x), tf.raw_ops.ReluGrad(gradients=y, features=x))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_elementwise_edge_values(mode: str, dtype: Any) -> None:
    v = edge_values(dtype)
    x, y = np.meshgrid(v, v)
    x, y = tf.constant(x), tf.constant(y)
    np.testing.assert_array_equal(run(mode, otf.relu, x), tf.nn.relu(x))  # NaN stays NaN
    np.testing.assert_array_equal(run(mode, otf.add, x, y), tf.add(x, y))
    np.testing.assert_array_equal(run(mode, otf.scale, x, alpha=2.0), x * 2)
    # relu_grad passes dy where x is NaN (as PyTorch); TF's ReluGrad gives 0 there.
    np.testing.assert_array_equal(run(mode, otf.relu_grad, y, x), ref_relu_grad(y.numpy(), x.numpy()))


def builtin_dense(x: tf.Tensor, w: tf.Tensor, b: Any, activation: str) -> tf.Tensor:
    y = tf.matmul(x, w)
    if b is not None:
        y = y + b
    return tf.nn.relu(y) if activation == "relu" else y


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("n,k,m", [(1, 1, 1), (5, 3, 7), (64, 130, 33), (0, 4, 3), (3, 0, 5), (2, 4, 0)])
@pytest.mark.parametrize("activation", ["none", "relu"])
@pytest.mark.parametrize("bias", [True, False])
def test_dense_matches_matmul(mode: str, dtype: Any, n: int, k: int, m: int, activation: str, bias: bool) -> None:
    x = RNG.standard_normal((n, k)).astype(dtype)
    w = RNG.standard_normal((k, m)).astype(dtype)
    b = RNG.standard_normal(m).astype(dtype) if bias else None
    got = run(mode, otf.dense, tf.constant(x), tf.constant(w), None if b is None else tf.constant(b), activation=activation)
    assert got.dtype == tf.as_dtype(dtype) and got.shape == (n, m)
    magnitude = np.abs(x).astype(np.float64) @ np.abs(w) + (0 if b is None else np.abs(b))
    assert_matmul_close(got.numpy(), ref_dense(x, w, b, activation), magnitude, k)
    builtin = builtin_dense(tf.constant(x), tf.constant(w), None if b is None else tf.constant(b), activation)
    assert_matmul_close(got.numpy(), builtin.numpy().astype(np.float64), magnitude, k)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("activation", ["none", "relu"])
def test_dense_grad_matches_tape_of_builtin(dtype: Any, activation: str) -> None:
    x = tf.constant(RNG.standard_normal((6, 5)).astype(dtype))
    w = tf.constant(RNG.standard_normal((5, 4)).astype(dtype))
    b = tf.constant(RNG.standard_normal(4).astype(dtype))
    dy = tf.constant(RNG.standard_normal((6, 4)).astype(dtype))
    with tf.GradientTape() as tape:
        tape.watch([x, w, b])
        y = builtin_dense(x, w, b, activation)
    expected = tape.gradient(y, [x, w, b], output_gradients=dy)
    got = otf.dense_grad(dy, x, w, y, activation=activation)
    assert got._fields == ("dx", "dw", "db")
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-5)
    # Optional outputs can be skipped: zeros, the others unchanged.
    partial = otf.dense_grad(dy, x, w, y, activation=activation, skip_dx=True, skip_db=True)
    np.testing.assert_array_equal(partial.dx, np.zeros(x.shape, dtype))
    np.testing.assert_array_equal(partial.db, np.zeros(b.shape, dtype))
    np.testing.assert_array_equal(partial.dw, got.dw)


def test_seed_usage_keyword_calls_of_the_raw_module() -> None:
    x = tf.constant([[1.0, -2.0], [3.0, 4.0]])
    y = tf.constant([[0.5, 0.5], [-1.0, 1.0]])
    np.testing.assert_array_equal(otf.lib.opf_add(a=x, b=y), x + y)
    np.testing.assert_array_equal(otf.lib.opf_relu(x=x), tf.nn.relu(x))
    np.testing.assert_array_equal(otf.lib.opf_scale(x=x, alpha=2.0), x * 2)
    np.testing.assert_array_equal(otf.lib.opf_dense(x=x, w=y, b=[], activation="relu"), tf.nn.relu(x @ y))


@pytest.mark.parametrize("mode", MODES)
def test_float_attributes_keep_double_precision(mode: str) -> None:
    """A TensorFlow float attr holds 32 bits; opforge's attributes are doubles
    and reach a float64 kernel exactly (alpha=0.1 is not float32's 0.1),
    gradients included."""
    x = tf.constant(RNG.standard_normal(5))
    np.testing.assert_array_equal(run(mode, otf.scale, x, alpha=0.1), x.numpy() * 0.1)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = otf.scale(x, alpha=0.1)
    np.testing.assert_array_equal(tape.gradient(y, x), np.full(5, 0.1))
    # A raw graph without the double's bits still runs, with the float attr's value.
    np.testing.assert_array_equal(otf.lib.opf_scale(x=x, alpha=0.1), x.numpy() * float(np.float32(0.1)))


def test_numpy_arrays_and_python_scalars_are_accepted() -> None:
    a = np.arange(6, dtype=np.float64).reshape(2, 3) - 2
    got = otf.relu(a)
    assert isinstance(got, tf.Tensor) and got.dtype == tf.float64
    np.testing.assert_array_equal(got, np.maximum(a, 0))
    np.testing.assert_array_equal(otf.add(a, np.ones((2, 3))), a + 1)
    scalar = otf.scale(3.0, alpha=2.0)
    assert scalar.dtype == tf.float32 and scalar.shape == () and float(scalar) == 6.0
    np.testing.assert_array_equal(otf.add(2.5, tf.constant(1.0, tf.float64)), 3.5)
    np.testing.assert_array_equal(otf.relu([[-1.0, 2.0]]), [[0.0, 2.0]])


def test_non_contiguous_sources_are_materialised_correctly() -> None:
    base = RNG.standard_normal((8, 6)).astype(np.float32)
    x = tf.transpose(tf.constant(base))[::2, ::-1]
    np.testing.assert_array_equal(otf.relu(x), np.maximum(base.T[::2, ::-1], 0))
    np.testing.assert_array_equal(otf.relu(base.T[::2, ::-1]), np.maximum(base.T[::2, ::-1], 0))


def test_input_reuse_never_changes_a_live_tensor() -> None:
    # An elementwise kernel may write over an input TF no longer needs; a
    # tensor still referenced must keep its values.
    x = tf.constant([-1.0, 2.0, -3.0])
    before = x.numpy().copy()
    y = otf.relu(x)
    np.testing.assert_array_equal(x, before)
    np.testing.assert_array_equal(y, [0.0, 2.0, 0.0])

    @tf.function
    def chain(v: tf.Tensor) -> tf.Tensor:
        return otf.relu(otf.scale(otf.add(v, v), alpha=-1.0))

    np.testing.assert_array_equal(chain(x), tf.nn.relu(-(x + x)))
    np.testing.assert_array_equal(x, before)


def test_shape_inference_in_graphs() -> None:
    @tf.function(input_signature=[tf.TensorSpec([None, 4]), tf.TensorSpec([4, 7]), tf.TensorSpec([7])])
    def dense(x: tf.Tensor, w: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        y = otf.dense(x, w, b)
        assert y.shape.as_list() == [None, 7]
        z = otf.relu(y)
        assert z.shape.as_list() == [None, 7]
        return z

    assert dense(tf.ones([3, 4]), tf.ones([4, 7]), tf.ones([7])).shape == (3, 7)

    @tf.function(input_signature=[tf.TensorSpec(None), tf.TensorSpec([None, None, 3])])
    def unknown(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        assert otf.relu(a).shape.rank is None
        assert otf.add(b, b).shape.as_list() == [None, None, 3]
        g = otf.dense_grad(tf.ones([2, 3]), tf.ones([2, 5]), tf.ones([5, 3]))
        assert [t.shape.as_list() for t in g] == [[2, 5], [5, 3], [3]]
        return otf.relu(a)

    np.testing.assert_array_equal(unknown(tf.constant([-1.0, 1.0]), tf.ones([1, 2, 3])), [0.0, 1.0])
