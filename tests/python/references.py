"""NumPy references and tolerances for the opforge tests (NumPy only, never opforge)."""

from __future__ import annotations

import numpy as np

FLOAT_DTYPES = [np.float32, np.float64]


def ref_relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, x.dtype.type(0))  # propagates NaN


def ref_relu_grad(dy: np.ndarray, x: np.ndarray) -> np.ndarray:
    # PyTorch's threshold_backward: 0 where x <= 0, else dy (so a NaN x passes dy).
    return np.where(x <= 0, dy.dtype.type(0), dy)


def ref_scale(x: np.ndarray, alpha: float) -> np.ndarray:
    return x * x.dtype.type(alpha)


def ref_dense(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, activation: str) -> np.ndarray:
    """In float64, whatever the input dtype."""
    y = x.astype(np.float64) @ w.astype(np.float64)
    if b is not None:
        y = y + b.astype(np.float64)
    return np.maximum(y, 0.0) if activation == "relu" else y


def ref_dense_grad(
    dy: np.ndarray, x: np.ndarray, w: np.ndarray, y: np.ndarray | None, activation: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dx = dz @ w.T, dw = x.T @ dz, db = dz.sum(0), dz = dy * (y > 0) for relu; in float64."""
    dz = dy.astype(np.float64)
    if activation == "relu":
        assert y is not None
        dz = dz * (y > 0)
    return dz @ w.astype(np.float64).T, x.astype(np.float64).T @ dz, dz.sum(axis=0)


def assert_matmul_close(actual: np.ndarray, expected: np.ndarray, magnitude: np.ndarray, depth: int) -> None:
    """|actual - expected| <= 2 (depth + 2) eps magnitude, elementwise.

    The standard bound on a float dot product of length ``depth``: magnitude is
    the same product over absolute values (e.g. |x| @ |w| + |b|). The factor 2
    leaves room for the reference's own rounding.
    """
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    eps = np.finfo(actual.dtype).eps
    bound = 2.0 * (depth + 2) * eps * magnitude + np.finfo(actual.dtype).tiny
    error = np.abs(actual.astype(np.float64) - expected)
    bad = error > bound
    if bad.any():
        i = tuple(np.argwhere(bad)[0])
        raise AssertionError(
            f"{bad.sum()} of {bad.size} elements off; first at {i}: got {actual[i]!r}, expected {expected[i]!r}, "
            f"error {error[i]:.3g} > bound {bound[i]:.3g}"
        )
