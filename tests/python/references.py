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


# -- row-wise ops over the last axis (float64, whatever the input dtype) ------


def _nan_rows(x: np.ndarray) -> np.ndarray:
    """torch.softmax's NaN rows: holding NaN or +inf, or only -inf (keepdims)."""
    bad = np.isnan(x) | (x == np.inf)
    return (bad.any(-1) | (x == -np.inf).all(-1))[..., None]


def ref_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        e = np.exp(x - x.max(-1, keepdims=True, initial=-np.inf))
        return np.where(_nan_rows(x), np.nan, e / e.sum(-1, keepdims=True))


def ref_log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        shifted = x - x.max(-1, keepdims=True, initial=-np.inf)
        return np.where(_nan_rows(x), np.nan, shifted - np.log(np.exp(shifted).sum(-1, keepdims=True)))


def ref_softmax_grad(dy: np.ndarray, y: np.ndarray) -> np.ndarray:
    """dx = J^T dy with J = diag(y) - y y^T, as an explicit matrix per row."""
    y64 = y.astype(np.float64)
    jac = np.einsum("...i,ij->...ij", y64, np.eye(y.shape[-1])) - y64[..., :, None] * y64[..., None, :]
    return np.einsum("...ij,...j->...i", jac, dy.astype(np.float64))


def ref_log_softmax_grad(dy: np.ndarray, y: np.ndarray) -> np.ndarray:
    """dx = J^T dy with J_ji = delta_ji - softmax_i."""
    p = np.exp(y.astype(np.float64))
    jac = np.eye(y.shape[-1]) - p[..., None, :]  # [j, i]
    return np.einsum("...ji,...j->...i", jac, dy.astype(np.float64))


def ref_layer_norm(
    x: np.ndarray, w: np.ndarray | None, b: np.ndarray | None, eps: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(y, mean, rstd); the biased variance, as torch.nn.functional.layer_norm."""
    x = x.astype(np.float64)
    mean = x.mean(-1) if x.shape[-1] else np.zeros(x.shape[:-1])
    with np.errstate(invalid="ignore", divide="ignore"):
        rstd = 1.0 / np.sqrt(((x - mean[..., None]) ** 2).mean(-1) + eps) if x.shape[-1] else np.full(x.shape[:-1], np.nan)
    y = (x - mean[..., None]) * rstd[..., None]
    if w is not None:
        y = y * w.astype(np.float64)
    if b is not None:
        y = y + b.astype(np.float64)
    return y, mean, rstd


def ref_layer_norm_grad(
    dy: np.ndarray, x: np.ndarray, w: np.ndarray | None, eps: float, dmean: np.ndarray | None = None,
    drstd: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dx, dw, db) by the chain rule through mean and rstd, the Jacobian
    d(xh_j)/d(x_i) written out per row; dmean, drstd: cotangents of those outputs."""
    x = x.astype(np.float64)
    m = x.shape[-1]
    mu = x.mean(-1, keepdims=True)
    r = 1.0 / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps)
    xc = x - mu
    dr_dx = -(r**3) * xc / m  # d rstd / d x_i
    # d xh_j / d x_i = (delta_ij - 1/m) r + xc_j dr_dx_i, indexed [..., j, i]
    jac = (np.eye(m) - 1.0 / m) * r[..., None] + xc[..., :, None] * dr_dx[..., None, :]
    g = dy.astype(np.float64) * (1.0 if w is None else w.astype(np.float64))
    dx = np.einsum("...ji,...j->...i", jac, g)
    if dmean is not None:
        dx = dx + dmean.astype(np.float64)[..., None] / m
    if drstd is not None:
        dx = dx + drstd.astype(np.float64)[..., None] * dr_dx
    lead = tuple(range(x.ndim - 1))
    return dx, (dy * xc * r).sum(lead), dy.astype(np.float64).sum(lead)


def ref_rms_norm(x: np.ndarray, w: np.ndarray | None, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """(y, rstd) as torch.nn.functional.rms_norm; eps None: the dtype's machine epsilon."""
    if eps is None:
        eps = float(np.finfo(x.dtype).eps)
    x64 = x.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        rstd = 1.0 / np.sqrt((x64**2).mean(-1) + eps) if x.shape[-1] else np.full(x.shape[:-1], np.nan)
        y = x64 * rstd[..., None]
    return (y if w is None else y * w.astype(np.float64)), rstd


def ref_rms_norm_grad(
    dy: np.ndarray, x: np.ndarray, w: np.ndarray | None, eps: float, drstd: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(dx, dw), Jacobians written out per row."""
    x = x.astype(np.float64)
    m = x.shape[-1]
    r = 1.0 / np.sqrt((x**2).mean(-1, keepdims=True) + eps)
    dr_dx = -(r**3) * x / m
    jac = np.eye(m) * r[..., None] + x[..., :, None] * dr_dx[..., None, :]  # [..., j, i] = d y_j / d x_i (w apart)
    g = dy.astype(np.float64) * (1.0 if w is None else w.astype(np.float64))
    dx = np.einsum("...ji,...j->...i", jac, g)
    if drstd is not None:
        dx = dx + drstd.astype(np.float64)[..., None] * dr_dx
    return dx, (dy * x * r).sum(tuple(range(x.ndim - 1)))
