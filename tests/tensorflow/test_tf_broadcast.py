"""Broadcasting add and mul (and their gradient rows sum_to, mul_grad) as
TensorFlow ops, against tf.add / tf.multiply: values eagerly and in graphs
(shape inference with unknown dims), gradients to second order (nested
GradientTape), ForwardAccumulator, and errors."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

pytest.importorskip("tensorflow")  # a clean skip without it (conftest.py)
import tensorflow as tf  # noqa: E402
from references import BROADCAST_PAIRS as PAIRS  # noqa: E402
from references import FLOAT_DTYPES  # noqa: E402

import opforge.tensorflow as otf  # noqa: E402

MODES = ["eager", "function"]
THEIRS: dict[str, Callable[..., tf.Tensor]] = {"add": tf.add, "mul": tf.multiply}


def rand(shape: tuple[int, ...], dtype: Any = np.float64, seed: int = 0) -> tf.Tensor:
    return tf.constant(np.random.default_rng(seed).uniform(0.5, 2.0, shape).astype(dtype))


def run(mode: str, fn: Callable[..., Any], *args: Any) -> Any:
    return fn(*args) if mode == "eager" else tf.function(fn)(*args)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("sa,sb", PAIRS)
@pytest.mark.parametrize("name", ["add", "mul"])
def test_values_match_tensorflow(mode: str, dtype: Any, sa: Any, sb: Any, name: str) -> None:
    a, b = rand(sa, dtype, 1), rand(sb, dtype, 2)
    ours = run(mode, getattr(otf, name), a, b)
    assert ours.shape == tuple(np.broadcast_shapes(sa, sb)) and ours.dtype == a.dtype
    np.testing.assert_array_equal(ours, THEIRS[name](a, b))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("sa,sb", PAIRS)
@pytest.mark.parametrize("name", ["add", "mul"])
def test_gradients_match_tensorflow(dtype: Any, sa: Any, sb: Any, name: str) -> None:
    a, b = rand(sa, dtype, 3), rand(sb, dtype, 4)
    w = rand(np.broadcast_shapes(sa, sb), dtype, 5)
    grads = []
    for f in (getattr(otf, name), THEIRS[name]):
        with tf.GradientTape() as tape:
            tape.watch([a, b])
            loss = tf.reduce_sum(f(a, b) * w)
        grads.append(tape.gradient(loss, [a, b]))
    for ours, theirs in zip(*grads):
        assert ours.shape == theirs.shape
        np.testing.assert_allclose(ours, theirs, rtol=1e-5 if dtype == np.float32 else 1e-12)


def test_numeric_gradients() -> None:
    for sa, sb in [((3, 1), (1, 4)), ((4,), (2, 3, 4)), ((), (2, 3))]:
        for name in ("add", "mul"):
            theoretical, numeric = tf.test.compute_gradient(getattr(otf, name), [rand(sa, seed=6), rand(sb, seed=7)])
            for t, n in zip(theoretical, numeric):
                np.testing.assert_allclose(t, n, rtol=1e-6, atol=1e-7)
    like = rand((3, 1), seed=8)
    theoretical, numeric = tf.test.compute_gradient(lambda x: otf.sum_to(x, like), [rand((2, 3, 4), seed=9)])
    np.testing.assert_allclose(theoretical[0], numeric[0], rtol=1e-6, atol=1e-7)
    other = rand((3, 1), seed=10)
    theoretical, numeric = tf.test.compute_gradient(lambda d, o: otf.mul_grad(d, o, like), [rand((2, 3, 4), seed=11), other])
    for t, n in zip(theoretical, numeric):
        np.testing.assert_allclose(t, n, rtol=1e-6, atol=1e-7)


def test_second_order_and_forward_mode_match_tensorflow() -> None:
    """Nested GradientTape (through sum_to's and mul_grad's own gradients) and
    ForwardAccumulator, against the same computation on TensorFlow's ops."""
    a0, b0 = rand((3, 1), seed=12), rand((2, 1, 4), seed=13)
    ta, tb = rand((3, 1), seed=14), rand((2, 1, 4), seed=15)

    def ours(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        return tf.reduce_sum(otf.mul(otf.mul(a, b), otf.add(a, b)) ** 2)

    def theirs(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        return tf.reduce_sum((a * b * (a + b)) ** 2)

    results = []
    for f in (ours, theirs):
        a, b = tf.Variable(a0), tf.Variable(b0)
        with tf.GradientTape(persistent=True) as outer:
            with tf.GradientTape() as inner:
                y = f(a, b)
            ga, gb = inner.gradient(y, [a, b])
            gg = tf.reduce_sum(ga * ga) + tf.reduce_sum(gb * gb)
        second = outer.gradient(gg, [a, b])
        with tf.autodiff.ForwardAccumulator([a0, b0], [ta, tb]) as acc:
            z = f(a0, b0)
        results.append((ga, gb, *second, acc.jvp(z)))
    for o, t in zip(*results):
        np.testing.assert_allclose(o, t, rtol=1e-10)


def test_shape_inference_in_graphs() -> None:
    """Static shapes from the library's rule, unknown dims kept unknown."""
    seen: dict[str, Any] = {}

    @tf.function(input_signature=[tf.TensorSpec([None, 1, 4]), tf.TensorSpec([3, None])])
    def partly_known(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        seen["add"] = otf.add(a, b).shape.as_list()
        seen["sum_to"] = otf.sum_to(a, b).shape.as_list()
        return otf.mul(a, b)

    partly_known.get_concrete_function()
    assert seen == {"add": [None, 3, 4], "sum_to": [3, None]}

    @tf.function(input_signature=[tf.TensorSpec(None), tf.TensorSpec([4])])
    def unknown_rank(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        seen["unknown"] = otf.add(a, b).shape.rank
        return otf.add(a, b)

    assert unknown_rank.get_concrete_function().output_shapes.rank is None
    assert seen["unknown"] is None
    np.testing.assert_array_equal(unknown_rank(tf.ones([2, 4]), tf.ones([4])), np.full((2, 4), 2.0))


def test_same_shape_add_passes_its_gradient_through() -> None:
    """sum_to is OPF_OP_PASS_THROUGH: an input of the output's shape gets the
    incoming gradient as is, with no op in the graph; one that broadcasts is
    summed; where the shapes are not known, the op runs."""
    a, b, c = rand((3, 4)), rand((4,), seed=1), rand((3, 4), seed=2)

    def grads(a: tf.Tensor, b: tf.Tensor, c: tf.Tensor) -> list[tf.Tensor]:
        with tf.GradientTape() as tape:
            tape.watch([a, b, c])
            y = otf.add(otf.add(a, b), c) * a
        return tape.gradient(y, [a, b, c])

    def sum_to_ops(signature: list[tf.TensorSpec]) -> int:
        graph = tf.function(grads, input_signature=signature).get_concrete_function().graph
        return sum(op.type.endswith("SumTo") for op in graph.get_operations())

    spec = [tf.TensorSpec([3, 4], tf.float64), tf.TensorSpec([4], tf.float64), tf.TensorSpec([3, 4], tf.float64)]
    assert sum_to_ops(spec) == 1
    assert sum_to_ops([tf.TensorSpec(None, tf.float64)] * 3) == 4
    for mode in MODES:
        ours = run(mode, grads, a, b, c)
        with tf.GradientTape() as tape:
            tape.watch([a, b, c])
            y = (a + b + c) * a
        for o, t in zip(ours, tape.gradient(y, [a, b, c])):
            np.testing.assert_allclose(o, t, rtol=1e-14)


def test_sum_to_and_mul_grad_values() -> None:
    x, like = rand((8, 3, 5), seed=16), rand((3, 1), seed=17)
    np.testing.assert_allclose(otf.sum_to(x, like), tf.reduce_sum(x, axis=[0, 2])[:, None], rtol=1e-12)
    np.testing.assert_allclose(otf.sum_to(like, x), tf.broadcast_to(like, x.shape), rtol=0)
    other = rand((5,), seed=18)
    np.testing.assert_allclose(otf.mul_grad(x, other, like), tf.reduce_sum(x * other, axis=[0, 2])[:, None], rtol=1e-12)


def test_shapes_that_do_not_broadcast() -> None:
    for name in ("add", "mul"):
        pattern = rf"opforge\.{name}: shape mismatch: a is \[2,3\], b is \[4\]; they must broadcast together"
        with pytest.raises(tf.errors.InvalidArgumentError, match=pattern):
            getattr(otf, name)(tf.ones([2, 3]), tf.ones([4]))
        with pytest.raises(ValueError, match=pattern):  # when the graph is built
            tf.function(getattr(otf, name)).get_concrete_function(tf.TensorSpec([2, 3]), tf.TensorSpec([4]))
        unknown = tf.function(getattr(otf, name), input_signature=[tf.TensorSpec(None), tf.TensorSpec(None)])
        with pytest.raises(tf.errors.InvalidArgumentError, match=pattern):  # when it runs
            unknown(tf.ones([2, 3]), tf.ones([4]))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"opforge\.sum_to: shape mismatch: x is \[2,3\], like is \[2\]"):
        otf.sum_to(tf.ones([2, 3]), tf.ones([2]))
