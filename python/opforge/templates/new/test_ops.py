"""The ops of ${name}.c in every installed framework, against NumPy.

Run with `python -m pytest`. A framework that is not installed is skipped.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

SOURCE = Path(__file__).resolve().with_name("${name}.c")
SLOPE = 0.1
X = np.array([[-2.0, -0.5, 0.0], [0.25, 1.0, 3.0]])
DY = np.array([[1.0, -2.0, 3.0], [0.5, -1.5, 2.0]])


def reference(x: np.ndarray, slope: float = SLOPE) -> np.ndarray:
    return np.where(x > 0, x, slope * x)


def reference_grad(dy: np.ndarray, x: np.ndarray, slope: float = SLOPE) -> np.ndarray:
    return np.where(x > 0, dy, slope * dy)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_numpy(dtype: type) -> None:
    import opforge.numpy as onp

    ops = onp.load_ops(SOURCE)
    x, dy = X.astype(dtype), DY.astype(dtype)
    np.testing.assert_allclose(ops.leaky_relu(x, slope=SLOPE), reference(x), rtol=1e-6)
    np.testing.assert_allclose(ops.leaky_relu_grad(dy, x, slope=SLOPE), reference_grad(dy, x), rtol=1e-6)
    np.testing.assert_allclose(ops.leaky_relu(x.T), reference(x.T, 0.01), rtol=1e-6)  # strided, default slope


def test_torch() -> None:
    torch = pytest.importorskip("torch")
    import opforge.torch as ot

    ops = ot.load_ops(SOURCE)
    x = torch.tensor(X, requires_grad=True)
    y = ops.leaky_relu(x, slope=SLOPE)
    y.backward(torch.tensor(DY))
    np.testing.assert_allclose(y.detach().numpy(), reference(X))
    np.testing.assert_allclose(x.grad.numpy(), reference_grad(DY, X))
    assert torch.autograd.gradcheck(lambda v: ops.leaky_relu(v, slope=SLOPE), (torch.tensor(X + 0.01, requires_grad=True),))


def test_tensorflow() -> None:
    tf = pytest.importorskip("tensorflow")
    import opforge.tensorflow as otf

    ops = otf.load_ops(SOURCE)
    x = tf.constant(X)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = ops.leaky_relu(x, slope=SLOPE)
    np.testing.assert_allclose(y.numpy(), reference(X))
    np.testing.assert_allclose(tape.gradient(y, x, output_gradients=tf.constant(DY)).numpy(), reference_grad(DY, X))


def test_jax() -> None:
    jax = pytest.importorskip("jax")
    import opforge.jax as oj

    ops = oj.load_ops(SOURCE)
    x, dy = X.astype(np.float32), DY.astype(np.float32)
    y, vjp = jax.vjp(lambda v: ops.leaky_relu(v, slope=SLOPE), jax.numpy.asarray(x))
    np.testing.assert_allclose(np.asarray(y), reference(x), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(vjp(jax.numpy.asarray(dy))[0]), reference_grad(dy, x), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(jax.jit(ops.leaky_relu)(x)), reference(x, 0.01), rtol=1e-6)
