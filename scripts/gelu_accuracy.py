#!/usr/bin/env python3
"""Float32 gelu of opforge and of the installed frameworks against float64: the exact
form, and the gradient of the tanh form.

The exact form's reference is x/2 erfc(-x/sqrt(2)) in double (math.erfc, which keeps its
relative accuracy in the tail where 1 + erf cancels); errors are in ulps of the float32
result (subnormal ulps below FLT_MIN). Inputs: uniform in [-14, 14], a dense sweep of
[-14, -3] and standard normal ones.

The tanh form's gradient (dy = 1) is s + 2 x s (1 - s) v' with s = sigmoid(2 v),
v = sqrt(2/pi) (x + 0.044715 x^3), in double with both tails of s exact. It crosses zero
near x = -0.75, where any float32 evaluation has a large error relative to the result, so
its errors are in ulps of the larger of |result| and the terms' size |s| + |2 x s (1 - s) v'|.
Run with the repository's venv:

    .venv/bin/python scripts/gelu_accuracy.py
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

import opforge.numpy as onp


def inputs() -> np.ndarray:
    rng = np.random.default_rng(1)
    return np.concatenate([
        rng.uniform(-14, 14, 1 << 22).astype(np.float32),
        np.linspace(-14, -3, 1 << 20, dtype=np.float32),
        rng.standard_normal(1 << 22).astype(np.float32),
    ])


def reference(x: np.ndarray) -> np.ndarray:
    erfc = np.frompyfunc(math.erfc, 1, 1)
    xd = x.astype(np.float64)
    return 0.5 * xd * erfc(-xd / math.sqrt(2)).astype(np.float64)


def ulps(y: np.ndarray, ref: np.ndarray) -> np.ndarray:
    spacing = np.maximum(np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64), 2.0**-149)
    return np.abs(y.astype(np.float64) - ref) / spacing


def implementations() -> dict[str, Callable[[np.ndarray], np.ndarray]]:
    impls: dict[str, Callable[[np.ndarray], np.ndarray]] = {"opforge": lambda x: onp.gelu(x)}
    try:
        import torch

        impls["torch"] = lambda x: torch.nn.functional.gelu(torch.from_numpy(x)).numpy()
    except ImportError:
        pass
    try:
        import jax

        impls["jax"] = lambda x: np.asarray(jax.jit(lambda v: jax.nn.gelu(v, approximate=False))(x))
    except ImportError:
        pass
    try:
        import tensorflow as tf

        impls["tensorflow"] = lambda x: tf.nn.gelu(tf.constant(x), approximate=False).numpy()
    except ImportError:
        pass
    return impls


def tanh_grad_reference(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The tanh form's gradient in double, and the size of its terms."""
    xd = x.astype(np.float64)
    c = math.sqrt(2 / math.pi)
    v = c * (xd + 0.044715 * xd**3)
    dv = c * (1 + 3 * 0.044715 * xd**2)
    e = np.exp(-2 * np.abs(v))  # sigmoid(2v) and 1 - sigmoid(2v), each without cancellation
    s = np.where(v < 0, e / (1 + e), 1 / (1 + e))
    rest = np.where(v < 0, 1 / (1 + e), e / (1 + e))
    term = 2 * xd * s * rest * dv
    return s + term, np.abs(s) + np.abs(term)


def tanh_grad_implementations() -> dict[str, Callable[[np.ndarray], np.ndarray]]:
    impls: dict[str, Callable[[np.ndarray], np.ndarray]] = {
        "opforge": lambda x: onp.gelu_grad(np.ones_like(x), x, approximate="tanh")  # dy = 1
    }
    try:
        import torch

        def torch_grad(x: np.ndarray) -> np.ndarray:
            xt = torch.from_numpy(x).requires_grad_()
            torch.nn.functional.gelu(xt, approximate="tanh").backward(torch.ones_like(xt))
            return xt.grad.numpy()

        impls["torch"] = torch_grad
    except ImportError:
        pass
    try:
        import jax

        impls["jax"] = lambda x: np.asarray(jax.jit(jax.grad(lambda v: jax.nn.gelu(v, approximate=True).sum()))(x))
    except ImportError:
        pass
    try:
        import tensorflow as tf

        def tf_grad(x: np.ndarray) -> np.ndarray:
            xt = tf.constant(x)
            with tf.GradientTape() as tape:
                tape.watch(xt)
                y = tf.nn.gelu(xt, approximate=True)
            return tape.gradient(y, xt).numpy()

        impls["tensorflow"] = tf_grad
    except ImportError:
        pass
    return impls


def table(title: str, x: np.ndarray, impls: dict[str, Callable[[np.ndarray], np.ndarray]],
          err: Callable[[np.ndarray], np.ndarray]) -> None:
    bands = {"all": np.ones_like(x, dtype=bool), "[-3, 0)": (x >= -3) & (x < 0), "x >= 0": x >= 0}
    print(f"{title}: max error over {x.size} inputs")
    print(f"{'':12}" + "".join(f"{name:>14}" for name in bands))
    for name, fn in impls.items():
        e = err(fn(x))
        print(f"{name:12}" + "".join(f"{e[mask].max():14.3g}" for mask in bands.values()))


def main() -> None:
    x = inputs()
    ref = reference(x)
    table("float32 gelu, ulps of the result", x, implementations(), lambda y: ulps(y, ref))
    grad, size = tanh_grad_reference(x)
    spacing = np.maximum(np.spacing(np.maximum(np.abs(grad), size).astype(np.float32)).astype(np.float64), 2.0**-149)
    table("float32 gelu_grad (tanh form), ulps of the terms' size", x, tanh_grad_implementations(),
          lambda y: np.abs(y.astype(np.float64) - grad) / spacing)


if __name__ == "__main__":
    main()
