"""softmax, log_softmax, layer_norm, rms_norm through opforge.tensorflow:
values against tf.nn.softmax, tf.nn.log_softmax and TensorFlow compositions,
gradients (nested GradientTape for second order) against TensorFlow's own."""

from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np
import pytest

pytest.importorskip("tensorflow")  # a clean skip without it (conftest.py)
import tensorflow as tf  # noqa: E402
from references import FLOAT_DTYPES  # noqa: E402

import opforge.tensorflow as otf  # noqa: E402

RNG = np.random.default_rng(77)
MODES = ["eager", "function"]


def run(mode: str, fn: Callable[..., Any], *args: Any) -> Any:
    return fn(*args) if mode == "eager" else tf.function(fn)(*args)


def tol(dtype: Any) -> dict[str, float]:
    return {"rtol": 1e-4, "atol": 1e-5} if np.dtype(dtype) == np.float32 else {"rtol": 1e-10, "atol": 1e-12}


def tf_layer_norm(x: tf.Tensor, w: Optional[tf.Tensor], b: Optional[tf.Tensor], eps: float) -> tuple[tf.Tensor, ...]:
    # (not tf.nn.moments: its variance stops the gradient through the mean, which a second derivative needs)
    mean = tf.reduce_mean(x, axis=-1)
    var = tf.reduce_mean(tf.square(x - mean[..., None]), axis=-1)
    rstd = 1.0 / tf.sqrt(var + eps)  # (tf.math.rsqrt is not correctly rounded in float64)
    y = (x - mean[..., None]) * rstd[..., None]
    y = y if w is None else y * w
    return (y if b is None else y + b), mean, rstd


def tf_rms_norm(x: tf.Tensor, w: Optional[tf.Tensor], eps: float) -> tuple[tf.Tensor, ...]:
    rstd = 1.0 / tf.sqrt(tf.reduce_mean(x * x, axis=-1) + eps)
    y = x * rstd[..., None]
    return (y if w is None else y * w), rstd


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 17), (300, 1030)], ids=str)
def test_values(mode: str, dtype: Any, shape: tuple[int, ...]) -> None:
    x = tf.constant(RNG.standard_normal(shape).astype(dtype) * 3)
    np.testing.assert_allclose(run(mode, otf.softmax, x), tf.nn.softmax(x), **tol(dtype))
    np.testing.assert_allclose(run(mode, otf.log_softmax, x), tf.nn.log_softmax(x), **tol(dtype))
    m = shape[-1]
    w = tf.constant(np.linspace(0.5, 1.5, m).astype(dtype))
    b = tf.constant(np.linspace(-1, 1, m).astype(dtype))
    for wi, bi in ((w, b), (None, None)):
        got = run(mode, lambda x: tuple(otf.layer_norm(x, wi, bi, eps=1e-5)), x)
        for g, e in zip(got, tf_layer_norm(x, wi, bi, 1e-5)):
            np.testing.assert_allclose(g, e, **tol(dtype))
        got = run(mode, lambda x: tuple(otf.rms_norm(x, wi, eps=1e-6)), x)
        for g, e in zip(got, tf_rms_norm(x, wi, 1e-6)):
            np.testing.assert_allclose(g, e, **tol(dtype))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_special_and_empty_rows(dtype: Any) -> None:
    inf, nan = np.inf, np.nan
    x = tf.constant(np.array([[1, -inf, 2], [1e3, -1e3, 999], [nan, 1, 2]], dtype))
    np.testing.assert_allclose(otf.softmax(x)[:2], tf.nn.softmax(x)[:2], **tol(dtype))
    np.testing.assert_allclose(otf.log_softmax(x)[:2], tf.nn.log_softmax(x)[:2], **tol(dtype))
    assert float(otf.softmax(x)[0, 1]) == 0.0
    # A row holding NaN is NaN throughout, as torch.softmax (tf.nn.softmax leaves the other elements 0).
    assert np.isnan(otf.softmax(x)[2]).all() and np.isnan(otf.log_softmax(x)[2]).all()
    y, mean, rstd = otf.layer_norm(tf.zeros([3, 0], dtype))
    assert y.shape == (3, 0) and np.all(mean.numpy() == 0) and np.all(np.isnan(rstd.numpy()))


def tape_gradients(fn: Callable[..., Any], *args: tf.Tensor) -> list[tf.Tensor]:
    with tf.GradientTape() as tape:
        tape.watch(list(args))
        out = fn(*args)
        out = list(out) if isinstance(out, (tuple, list)) else [out]
        loss = tf.add_n([tf.reduce_sum(o * o * tf.cast(tf.range(tf.size(o)) % 3 + 1, o.dtype)[: 1] + o) for o in out])
    return tape.gradient(loss, list(args))


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
@pytest.mark.parametrize("mode", MODES)
def test_gradients_match_tensorflow(dtype: tf.DType, mode: str) -> None:
    x = tf.constant(RNG.standard_normal((8, 33)), dtype)
    w = tf.constant(RNG.uniform(0.5, 1.5, 33), dtype)
    b = tf.constant(RNG.standard_normal(33), dtype)
    grads = tape_gradients if mode == "eager" else tf.function(tape_gradients, reduce_retracing=True)
    pairs = [
        (otf.softmax, tf.nn.softmax, (x,)),
        (otf.log_softmax, tf.nn.log_softmax, (x,)),
        (lambda x, w, b: tuple(otf.layer_norm(x, w, b)), lambda x, w, b: tf_layer_norm(x, w, b, 1e-5), (x, w, b)),
        (lambda x, w: tuple(otf.rms_norm(x, w, eps=1e-5)), lambda x, w: tf_rms_norm(x, w, 1e-5), (x, w)),
    ]
    for ours, theirs, args in pairs:
        for g, e in zip(grads(ours, *args), tape_gradients(theirs, *args)):
            np.testing.assert_allclose(g, e, rtol=1e-3 if dtype == tf.float32 else 1e-9, atol=1e-3 if dtype == tf.float32 else 1e-10)


#: (opforge's, TensorFlow's composition) of each norm, as functions of x, w, b returning a list of outputs.
HIGHER_ORDER_PAIRS: list[tuple[Callable[..., list[tf.Tensor]], Callable[..., list[tf.Tensor]]]] = [
    (lambda x, w, b: [otf.softmax(x)], lambda x, w, b: [tf.nn.softmax(x)]),
    (lambda x, w, b: [otf.log_softmax(x)], lambda x, w, b: [tf.nn.log_softmax(x)]),
    (lambda x, w, b: list(otf.layer_norm(x, w, b, eps=1e-3)), lambda x, w, b: list(tf_layer_norm(x, w, b, 1e-3))),
    (lambda x, w, b: list(otf.layer_norm(x, None, None, eps=1e-3)),
     lambda x, w, b: list(tf_layer_norm(x, None, None, 1e-3))),
    (lambda x, w, b: list(otf.rms_norm(x, w, eps=1e-3)), lambda x, w, b: list(tf_rms_norm(x, w, 1e-3))),
]  # fmt: skip


def test_second_order_matches_tensorflow() -> None:
    """Nested tapes: the gradient of the squared norm of the first gradients
    (through softmax_grad, log_softmax_grad, layer_norm_grad, rms_norm_grad and
    their own gradient rows), against TensorFlow's compositions."""
    x = tf.constant(RNG.standard_normal((5, 7)))
    w = tf.constant(RNG.uniform(0.5, 1.5, 7))
    b = tf.constant(RNG.standard_normal(7))
    cot = tf.constant(RNG.standard_normal((5, 7)))

    def second(fn: Callable[..., list[tf.Tensor]]) -> list[tf.Tensor]:
        variables = [tf.Variable(t) for t in (x, w, b)]
        with tf.GradientTape() as outer:
            with tf.GradientTape() as inner:
                out = fn(*variables)
                loss = tf.add_n([tf.reduce_sum(o * (cot if o.shape.rank == 2 else cot[:, 0])) ** 2 for o in out])
            grads = inner.gradient(loss, variables, unconnected_gradients=tf.UnconnectedGradients.ZERO)
            norm = tf.add_n([tf.reduce_sum(g * g) for g in grads])
        return outer.gradient(norm, variables, unconnected_gradients=tf.UnconnectedGradients.ZERO)

    for ours, theirs in HIGHER_ORDER_PAIRS:
        for a, e in zip(second(ours), second(theirs)):
            np.testing.assert_allclose(a, e, rtol=1e-7, atol=1e-8)


def test_third_order_matches_tensorflow() -> None:
    """Three nested tapes (through the second-order rows' own gradient rules
    and the rows of their tangents), in x, w and b, against TensorFlow's
    compositions. Nested forward accumulators, which TensorFlow derives from
    gradient functions twice over, stop at those rows with the error naming
    one (never zeros)."""
    rng = np.random.default_rng(78)
    x, w = tf.constant(rng.standard_normal((3, 5))), tf.constant(rng.uniform(0.5, 1.5, 5))
    b = tf.constant(rng.standard_normal(5))
    c = [tf.constant(rng.standard_normal(t.shape)) for t in (x, w, b)]

    def third(fn: Callable[..., list[tf.Tensor]]) -> list[tf.Tensor]:
        variables = [tf.Variable(t) for t in (x, w, b)]
        zero = tf.UnconnectedGradients.ZERO
        with tf.GradientTape() as t3:
            with tf.GradientTape() as t2:
                with tf.GradientTape() as t1:
                    loss = tf.add_n([tf.reduce_sum(tf.sin(o) * o * o) for o in fn(*variables)])
                g1 = t1.gradient(loss, variables, unconnected_gradients=zero)
                norm = tf.add_n([tf.reduce_sum(g * g) for g in g1])
            g2 = t2.gradient(norm, variables, unconnected_gradients=zero)
            dot = tf.add_n([tf.reduce_sum(g * d) for g, d in zip(g2, c)])
        return t3.gradient(dot, variables, unconnected_gradients=zero)

    for ours, theirs in HIGHER_ORDER_PAIRS[1:]:  # not softmax: softmax_grad_grad declares no gradient rule
        for a, e in zip(third(ours), third(theirs)):
            np.testing.assert_allclose(a, e, rtol=1e-8, atol=1e-9)
    stops = r"opforge\.layer_norm_grad_grad_jvp\w* \(TensorFlow op .*\) is not differentiable"
    with pytest.raises(LookupError, match=stops):
        with tf.autodiff.ForwardAccumulator(x, c[0]) as outer:
            with tf.autodiff.ForwardAccumulator(x, x) as inner:
                loss = tf.reduce_sum(otf.layer_norm(x, w, b).y ** 3)
            tangent = inner.jvp(loss)
        outer.jvp(tangent)


def test_numeric_gradients() -> None:
    x = tf.constant(RNG.standard_normal((3, 6)))
    w = tf.constant(RNG.uniform(0.5, 1.5, 6))
    for fn, args in (
        (otf.softmax, (x,)),
        (lambda x, w: otf.layer_norm(x, w, None, eps=1e-3).mean + otf.layer_norm(x, w, None, eps=1e-3).rstd, (x, w)),
        (lambda x, w: otf.rms_norm(x, w, eps=1e-3).y, (x, w)),
    ):
        theoretical, numeric = tf.test.compute_gradient(fn, list(args))
        for t, n in zip(theoretical, numeric):
            np.testing.assert_allclose(t, n, rtol=1e-6, atol=1e-7)


def test_bad_input() -> None:
    x = tf.ones([4, 5])
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"softmax.*rank 1 or more"):
        otf.softmax(tf.constant(1.0))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"layer_norm.*shape mismatch: x is \[4,5\], w is \[4\]"):
        otf.layer_norm(x, tf.ones([4]))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"OpfRmsNorm.*expected to be a float tensor but is a double"):
        otf.rms_norm(x, tf.ones([5], tf.float64))


def test_forward_accumulator() -> None:
    """tf.autodiff.ForwardAccumulator (TensorFlow derives forward mode from the
    gradient functions, so through the gradient rows' own rules) against the
    same of TensorFlow's ops, every output."""
    rng = np.random.default_rng(11)
    x, tx = tf.constant(rng.standard_normal((3, 6))), tf.constant(rng.standard_normal((3, 6)))
    w, tw = tf.constant(rng.uniform(0.5, 1.5, 6)), tf.constant(rng.standard_normal(6))
    b, tb = tf.constant(rng.standard_normal(6)), tf.constant(rng.standard_normal(6))
    pairs = [
        (lambda x, w, b: [otf.softmax(x)], lambda x, w, b: [tf.nn.softmax(x)]),
        (lambda x, w, b: [otf.log_softmax(x)], lambda x, w, b: [tf.nn.log_softmax(x)]),
        (lambda x, w, b: list(otf.layer_norm(x, w, b, eps=1e-3)), lambda x, w, b: list(tf_layer_norm(x, w, b, 1e-3))),
        (lambda x, w, b: list(otf.rms_norm(x, w, eps=1e-3)), lambda x, w, b: list(tf_rms_norm(x, w, 1e-3))),
    ]
    for ours, theirs in pairs:
        results = []
        for f in (ours, theirs):
            with tf.autodiff.ForwardAccumulator((x, w, b), (tx, tw, tb)) as acc:
                out = f(x, w, b)
            results.append([acc.jvp(o) for o in out])
        for got, want in zip(*results):
            # (TensorFlow's forward mode of the composite differs from ours by up to ~1e-8 relative in float64)
            np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-9)
