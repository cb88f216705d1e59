"""Registered gradients against TensorFlow's numeric gradients (float64) and built-in ops' gradients."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

pytest.importorskip("tensorflow")  # a clean skip without it (conftest.py)
import tensorflow as tf  # noqa: E402

import opforge.tensorflow as otf  # noqa: E402

RNG = np.random.default_rng(99)


def away_from_kink(shape: tuple[int, ...]) -> tf.Tensor:
    """float64 values at least 0.1 away from 0 (relu's kink breaks finite differences)."""
    v = RNG.uniform(0.1, 2.0, shape) * RNG.choice([-1.0, 1.0], shape)
    return tf.constant(v)


def assert_numeric_gradient(fn: Callable[..., tf.Tensor], *args: tf.Tensor) -> None:
    theoretical, numeric = tf.test.compute_gradient(fn, list(args))
    for t, n in zip(theoretical, numeric):
        np.testing.assert_allclose(t, n, rtol=1e-6, atol=1e-7)


def test_relu_gradient() -> None:
    assert_numeric_gradient(otf.relu, away_from_kink((3, 4)))


def test_scale_gradient() -> None:
    assert_numeric_gradient(lambda x: otf.scale(x, alpha=-1.75), away_from_kink((5,)))


def test_add_gradient() -> None:
    assert_numeric_gradient(otf.add, away_from_kink((2, 3)), away_from_kink((2, 3)))


def test_relu_grad_gradient() -> None:
    # relu_grad is linear in dy; its gradient to x is zero (none registered).
    x = away_from_kink((4, 2))
    assert_numeric_gradient(lambda dy: otf.relu_grad(dy, x), away_from_kink((4, 2)))


@pytest.mark.parametrize("activation", ["none", "relu"])
def test_dense_gradient_with_bias(activation: str) -> None:
    x, w, b = away_from_kink((4, 3)), away_from_kink((3, 5)), away_from_kink((5,))
    # keep the pre-activation away from 0 so that finite differences see one side of relu
    y = (x @ w + b).numpy()
    b = b + tf.constant(np.where(np.abs(y) < 0.1, 0.3, 0.0).max(axis=0))
    assert_numeric_gradient(lambda x, w, b: otf.dense(x, w, b, activation=activation), x, w, b)


@pytest.mark.parametrize("activation", ["none", "relu"])
def test_dense_gradient_without_bias(activation: str) -> None:
    x, w = away_from_kink((3, 2)), away_from_kink((2, 4))
    if np.abs((x @ w).numpy()).min() < 1e-3:
        x = x + 0.05
    assert_numeric_gradient(lambda x, w: otf.dense(x, w, activation=activation), x, w)


def builtin_mlp(x: tf.Tensor, w: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    return tf.reduce_sum(tf.nn.relu(tf.nn.relu(x @ w + b) * 0.5 + x @ w) ** 2)


def opforge_mlp(x: tf.Tensor, w: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    h = otf.scale(otf.dense(x, w, b, activation="relu"), alpha=0.5)
    return tf.reduce_sum(otf.relu(otf.add(h, otf.dense(x, w))) ** 2)


def tape_gradients(fn: Callable[..., tf.Tensor], *args: Any) -> list[tf.Tensor]:
    with tf.GradientTape() as tape:
        tape.watch(args)
        loss = fn(*args)
    return tape.gradient(loss, list(args))


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
@pytest.mark.parametrize("mode", ["eager", "function"])
def test_gradient_tape_matches_builtin_ops(dtype: tf.DType, mode: str) -> None:
    x = tf.constant(RNG.standard_normal((16, 8)), dtype)
    w = tf.constant(RNG.standard_normal((8, 8)), dtype)
    b = tf.constant(RNG.standard_normal(8), dtype)
    run = tape_gradients if mode == "eager" else tf.function(tape_gradients, reduce_retracing=True)
    got = run(opforge_mlp, x, w, b)
    expected = tape_gradients(builtin_mlp, x, w, b)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-4 if dtype == tf.float32 else 1e-10, atol=1e-4)


def test_variables_and_second_order() -> None:
    v = tf.Variable([[-1.0, 2.0, 0.5]], dtype=tf.float64)
    with tf.GradientTape() as outer:
        with tf.GradientTape() as inner:
            y = tf.reduce_sum(otf.scale(otf.relu(v), alpha=3.0) ** 2)
        g = inner.gradient(y, v)  # 18 * relu(v), computed with relu_grad
        gg = tf.reduce_sum(g * g)
    np.testing.assert_allclose(g, [[0.0, 36.0, 9.0]])
    # d/dv sum((18 relu(v))^2) = 2 * 18^2 relu(v) * (v > 0); relu_grad's gradient to dy.
    np.testing.assert_allclose(outer.gradient(gg, v), [[0.0, 2 * 324 * 2.0, 2 * 324 * 0.5]])


def test_dense_grad_grad_matches_its_formula() -> None:
    """dense_grad_grad declares gradient rules too: the tape's gradient matches
    TensorFlow's own of the same bilinear formula (gdy = ddx @ w + x @ ddw)."""
    rng = np.random.default_rng(3)
    x, w, dy = (tf.constant(rng.standard_normal(s)) for s in ((2, 3), (3, 4), (2, 4)))
    ddx, ddw = tf.constant(rng.standard_normal((2, 3))), tf.constant(rng.standard_normal((3, 4)))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([x, w, dy, ddx, ddw])
        out = otf.dense_grad_grad(dy, x, w, None, ddx, ddw)
        ours = tf.reduce_sum(out.gdy**2) + tf.reduce_sum(out.gx**2) + tf.reduce_sum(out.gw**2)
        theirs = (
            tf.reduce_sum((ddx @ w + x @ ddw) ** 2)
            + tf.reduce_sum((dy @ tf.transpose(ddw)) ** 2)
            + tf.reduce_sum((tf.transpose(ddx) @ dy) ** 2)
        )
    for a, e in zip(tape.gradient(ours, [x, w, dy, ddx, ddw]), tape.gradient(theirs, [x, w, dy, ddx, ddw])):
        np.testing.assert_allclose(a, e, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("activation", ["none", "relu"])
def test_dense_second_order_matches_builtin_ops(activation: str, bias: bool) -> None:
    """Nested tapes through dense (its gradient dense_grad, whose own is
    dense_grad_grad) against TensorFlow's matmul + bias + relu."""
    x, w, b = away_from_kink((5, 4)), away_from_kink((4, 3)), away_from_kink((3,))

    def ours(x: tf.Tensor, w: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        return otf.dense(x, w, b if bias else None, activation=activation)

    def builtin(x: tf.Tensor, w: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        z = tf.matmul(x, w) + (b if bias else 0)
        return tf.nn.relu(z) if activation == "relu" else z

    def second(fn: Callable[..., tf.Tensor]) -> list[tf.Tensor]:
        variables = [tf.Variable(t) for t in (x, w, b)]
        with tf.GradientTape() as outer:
            with tf.GradientTape() as inner:
                loss = tf.reduce_sum(fn(*variables) ** 3)
            grads = inner.gradient(loss, variables[:2] + variables[2:] * bias)
            norm = tf.add_n([tf.reduce_sum(g * g) for g in grads])
        return outer.gradient(norm, variables[:2] + variables[2:] * bias)

    for a, e in zip(second(ours), second(builtin)):
        np.testing.assert_allclose(a, e, rtol=1e-10, atol=1e-10)


def test_dense_second_order_numeric() -> None:
    x, w, b = away_from_kink((3, 4)), away_from_kink((4, 2)), away_from_kink((2,))
    dy = away_from_kink((3, 2))

    def grads(x: tf.Tensor, w: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            tape.watch([x, w, b])
            y = otf.dense(x, w, b, activation="relu")
        dx, dw, db = tape.gradient(y, [x, w, b], output_gradients=dy)
        return tf.concat([tf.reshape(dx, [-1]), tf.reshape(dw, [-1]), db], 0)

    assert_numeric_gradient(grads, x, w, b)


def test_unconnected_gradients_of_a_multi_output_op() -> None:
    x, w = tf.ones([2, 3], tf.float64), tf.ones([3, 4], tf.float64)
    with tf.GradientTape() as tape:
        tape.watch([x, w])
        y = otf.dense(x, w, activation="relu")
        loss = tf.reduce_sum(tf.zeros([1], tf.float64))
    assert tape.gradient(loss, [x, w]) == [None, None]
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = otf.dense(x, w)
    np.testing.assert_array_equal(tape.gradient(y, x), np.full((2, 3), 4.0))


def test_gradients_nobody_asked_for_are_not_computed() -> None:
    @tf.function
    def weight_gradient(x: tf.Tensor, w: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            tape.watch(w)
            loss = tf.reduce_sum(otf.dense(x, w, b, activation="relu") ** 2)
        return tape.gradient(loss, w)

    x, w, b = tf.ones([3, 4]), tf.fill([4, 2], 0.5), tf.ones([2])
    graph = weight_gradient.get_concrete_function(x, w, b).graph
    (grad_op,) = [op for op in graph.get_operations() if op.type == "OpfDenseGrad"]
    assert (grad_op.get_attr("skip_dx"), grad_op.get_attr("skip_dw"), grad_op.get_attr("skip_db")) == (True, False, True)
    # d/dw sum(relu(xw + b)^2) = x^T 2 (xw + b) with xw + b = 3 everywhere
    np.testing.assert_allclose(weight_gradient(x, w, b), np.full((4, 2), 3 * 2 * 3.0))


@pytest.mark.parametrize("activation", ["none", "relu"])
def test_forward_accumulator_through_dense(activation: str) -> None:
    """tf.autodiff.ForwardAccumulator (forward mode, which TensorFlow derives
    from the gradient functions: it needs the gradient rows' own rules)
    against the same of TensorFlow's ops."""
    rng = np.random.default_rng(5)
    x, w, b = (tf.constant(rng.standard_normal(s)) for s in ((3, 4), (4, 2), (2,)))
    tx, tw, tb = (tf.constant(rng.standard_normal(s)) for s in ((3, 4), (4, 2), (2,)))

    def theirs(x: tf.Tensor, w: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        z = x @ w + b
        return tf.nn.relu(z) if activation == "relu" else z

    results = []
    for f in (lambda x, w, b: otf.dense(x, w, b, activation=activation), theirs):
        with tf.autodiff.ForwardAccumulator((x, w, b), (tx, tw, tb)) as acc:
            y = f(x, w, b)
        results.append(acc.jvp(y))
    np.testing.assert_allclose(results[0], results[1], rtol=1e-12, atol=1e-12)
