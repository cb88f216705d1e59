"""The activations (opforge.tensorflow.gelu, silu, sigmoid, tanh and their gradient
rows) against TensorFlow's own: tf.nn.gelu (approximate False and True),
tf.nn.silu, tf.sigmoid, tf.tanh; values eagerly and in tf.function, gradients to
second order (nested GradientTape), numeric gradients, forward mode
(ForwardAccumulator), special values, bad input."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

pytest.importorskip("tensorflow")  # a clean skip without it (conftest.py)
import tensorflow as tf  # noqa: E402
from references import FLOAT_DTYPES, assert_ulp_close, ref_activation  # noqa: E402

import opforge.tensorflow as otf  # noqa: E402

# (name, opforge function, TensorFlow's function)
PAIRS: list[tuple[str, Callable[..., tf.Tensor], Callable[..., tf.Tensor]]] = [
    ("gelu", lambda x: otf.gelu(x), lambda x: tf.nn.gelu(x, approximate=False)),
    ("gelu_tanh", lambda x: otf.gelu(x, approximate="tanh"), lambda x: tf.nn.gelu(x, approximate=True)),
    ("silu", lambda x: otf.silu(x), tf.nn.silu),
    ("sigmoid", lambda x: otf.sigmoid(x), tf.sigmoid),
    ("tanh", lambda x: otf.tanh(x), tf.tanh),
]
IDS = [p[0] for p in PAIRS]
MODES = ["eager", "function"]


def tolerance(dtype: Any) -> dict[str, float]:
    """Against TensorFlow's results. Its float64 erf (Eigen's) is good to about 1e-9
    absolutely (1e-8 in its derivatives), so gelu differs at that level; opforge's own accuracy
    is checked in ulps against references.py."""
    return {"rtol": 2e-6, "atol": 2e-6} if np.dtype(dtype) == np.float32 else {"rtol": 1e-7, "atol": 3e-8}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name, ours, theirs", PAIRS, ids=IDS)
def test_values(name: str, ours: Callable[..., tf.Tensor], theirs: Callable[..., tf.Tensor], dtype: Any,
                mode: str) -> None:
    x = tf.constant(np.linspace(-8, 8, 4001).astype(dtype))
    f = ours if mode == "eager" else tf.function(ours)
    y = f(x)
    assert y.dtype == x.dtype and y.shape == x.shape
    np.testing.assert_allclose(y, theirs(x), **tolerance(dtype))
    assert_ulp_close(y.numpy(), ref_activation(name, x.numpy())["f"], 8)
    x2 = tf.constant(np.random.default_rng(0).standard_normal((3, 0, 2, 5)).astype(dtype))
    assert f(x2).shape == x2.shape


def second_order(fn: Callable[..., tf.Tensor], x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """d/dx sum(f), and d/dx sum(d/dx sum(f)): nested tapes."""
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = tf.reduce_sum(fn(x))
        g = inner.gradient(y, x)
        s = tf.reduce_sum(g)
    return g, outer.gradient(s, x)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name, ours, theirs", PAIRS, ids=IDS)
def test_gradients_to_second_order(name: str, ours: Callable[..., tf.Tensor], theirs: Callable[..., tf.Tensor],
                                   dtype: Any) -> None:
    """float32 within ±4 (beyond, TensorFlow's float32 tanh form loses its second
    derivative to cancellation)."""
    lim = 6.0 if np.dtype(dtype) == np.float64 else 4.0
    x = tf.constant(np.linspace(-lim, lim, 801).astype(dtype))
    tol = tolerance(dtype) if np.dtype(dtype) == np.float64 else {"rtol": 1e-5, "atol": 1e-5}
    for a, e in zip(second_order(ours, x), second_order(theirs, x)):
        np.testing.assert_allclose(a, e, **tol)
    for a, e in zip(tf.function(lambda v: second_order(ours, v))(x), second_order(theirs, x)):
        np.testing.assert_allclose(a, e, **tol)


@pytest.mark.parametrize("name, ours, theirs", PAIRS, ids=IDS)
def test_numeric_gradients(name: str, ours: Callable[..., tf.Tensor], theirs: Callable[..., tf.Tensor]) -> None:
    x = tf.constant(np.random.default_rng(1).standard_normal((3, 4)) * 2)
    # the function, then its gradient (through the gradient rows' own gradients); finite
    # differences of the latter are good to about 1e-6
    for fn, tol in ((ours, 1e-7), (lambda v: tf.reduce_sum(second_order(ours, v)[0] * v), 2e-6)):
        theoretical, numeric = tf.test.compute_gradient(fn, [x])
        np.testing.assert_allclose(theoretical[0], numeric[0], rtol=10 * tol, atol=tol)


@pytest.mark.parametrize("name, ours, theirs", PAIRS, ids=IDS)
def test_forward_mode(name: str, ours: Callable[..., tf.Tensor], theirs: Callable[..., tf.Tensor]) -> None:
    x = tf.constant(np.linspace(-5, 5, 101))
    t = tf.constant(np.random.default_rng(2).standard_normal(101))
    jvps = []
    for fn in (ours, theirs):
        with tf.autodiff.ForwardAccumulator(x, t) as acc:
            y = fn(x)
        jvps.append(acc.jvp(y))
    np.testing.assert_allclose(jvps[0], jvps[1], **tolerance(np.float64))


def test_gradient_rows_directly() -> None:
    rng = np.random.default_rng(3)
    x, dy, ddx = (tf.constant(rng.standard_normal(257)) for _ in range(3))
    for approximate in (False, True):
        form = "tanh" if approximate else "none"
        d1, d2 = second_order(lambda v, a=approximate: tf.nn.gelu(v, approximate=a), x)
        np.testing.assert_allclose(otf.gelu_grad(dy, x, approximate=form), dy * d1, **tolerance(np.float64))
        ddy, gx = otf.gelu_grad_grad(ddx, dy, x, approximate=form)
        np.testing.assert_allclose(ddy, ddx * d1, **tolerance(np.float64))
        np.testing.assert_allclose(gx, ddx * dy * d2, **tolerance(np.float64))
    y = tf.sigmoid(x)
    np.testing.assert_allclose(otf.sigmoid_grad(dy, y), tf.raw_ops.SigmoidGrad(y=y, dy=dy), rtol=1e-15)
    t = tf.tanh(x)
    np.testing.assert_allclose(otf.tanh_grad(dy, t), tf.raw_ops.TanhGrad(y=t, dy=dy), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_special_values(dtype: Any) -> None:
    """NaN and ±inf propagate as in TensorFlow (gelu and silu of -inf are NaN, their
    gradients NaN at ±inf); huge finite x gets the limits, where TensorFlow's tanh
    form overflows x³ in its gradient."""
    x = tf.constant(np.array([np.nan, -np.inf, np.inf, 0.0, -0.0, 1e30, -1e30], dtype))
    for name, ours, theirs in PAIRS:
        np.testing.assert_array_equal(ours(x), theirs(x), err_msg=name)
        g, want = (second_order(f, x)[0].numpy() for f in (ours, theirs))
        if name == "gelu_tanh":
            want[5:] = [1.0, 0.0]  # TensorFlow's x³ overflows at ±1e30 (NaN); the limits are 1, 0
        np.testing.assert_array_equal(g, want, err_msg=f"{name}'")


def test_bad_input() -> None:
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"Value for attr 'T' of int32 is not in the list of allowed values"):
        otf.gelu(tf.ones(3, tf.int32))
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"attr 'approximate' of \"fast\" is not in the list of allowed values: \"none\", \"tanh\""):
        otf.gelu(tf.ones(3), approximate="fast")
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"opforge\.silu_grad: shape mismatch: dy is \[2,3\], x is \[3,2\]"):
        otf.silu_grad(tf.ones([2, 3]), tf.ones([3, 2]))
    x = tf.ones(3)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = otf.tanh_grad_grad(x, x, x)[0]
    with pytest.raises(LookupError, match=r"opforge\.tanh_grad_grad \(TensorFlow op OpfTanhGradGrad\) is not differentiable"):
        tape.gradient(y, x)
