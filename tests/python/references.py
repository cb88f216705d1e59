"""NumPy references and tolerances for the opforge tests (NumPy only, never opforge)."""

from __future__ import annotations

import math

import numpy as np

FLOAT_DTYPES = [np.float32, np.float64]

# Shape pairs that broadcast together, for every adapter's broadcasting tests:
# 0-d with n-d, [3,1] with [1,4], rank mismatch, size-0 dims, equal shapes, long rows.
BROADCAST_PAIRS = [
    ((), (2, 3)),
    ((2, 3), ()),
    ((3, 1), (1, 4)),
    ((4,), (2, 3, 4)),
    ((2, 3, 4), (3, 1)),
    ((2, 1, 3, 1), (5, 1, 6)),
    ((0, 4), (4,)),
    ((1, 4), (0, 1)),
    ((3, 4), (3, 4)),
    ((64, 1), (1, 300)),
]


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


# -- activations ---------------------------------------------------------------
# f(x), f'(x), f''(x) of gelu (erf and tanh forms), silu, sigmoid and tanh, and
# the magnitudes of the terms each derivative sums ("scale": near a zero of a
# derivative those terms cancel, and errors are measured against them). The
# sigmoid forms are computed in np.longdouble; Φ in float64 by math.erfc with
# the rounding of x/√2 corrected to first order (it would cost up to x² ulps).

_erfc = np.vectorize(math.erfc, otypes=[np.float64])
_SQRT2_LD = np.sqrt(np.longdouble(2))
_PI_LD = np.longdouble("3.14159265358979323846264338327950288")  # (np.pi is a float64)
_GELU_B1 = 2 * np.sqrt(2 / _PI_LD)  # 2 √(2/π), v = B1 x + B3 x³
_GELU_B3 = np.longdouble("0.044715") * _GELU_B1


def ref_normal_cdf(x: np.ndarray) -> np.ndarray:
    """Φ(x), float64."""
    x = np.asarray(x, np.float64)
    z = -x / np.sqrt(2.0)
    with np.errstate(invalid="ignore", over="ignore"):
        delta = np.where(np.isfinite(x), (-np.longdouble(1) * x / _SQRT2_LD - z).astype(np.float64), 0.0)
        return 0.5 * (_erfc(z) - delta * (2 / math.sqrt(math.pi)) * np.exp(-z * z))


def _sigmoid_ld(v: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(-np.abs(v))
        return np.where(v >= 0, 1 / (1 + e), e / (1 + e))


def ref_activation(name: str, x: np.ndarray) -> dict[str, np.ndarray]:
    """f, d1, d2 (f', f'') and s1, s2 (their scales) for x, in float64 or wider.
    name: gelu, gelu_tanh, silu, sigmoid, tanh. NaN and ±inf as the frameworks:
    gelu and silu give NaN at -inf and NaN derivatives at ±inf."""
    with np.errstate(over="ignore", invalid="ignore"):
        if name == "gelu":
            xd = np.asarray(x, np.float64)
            cdf = ref_normal_cdf(xd)
            xl, cdf = xd.astype(np.longdouble), cdf.astype(np.longdouble)
            phi = np.exp(-xl * xl / 2) / np.sqrt(2 * _PI_LD)
            out = {"f": xl * cdf, "d1": cdf + xl * phi, "d2": phi * (2 - xl * xl),
                   "s1": cdf + np.abs(xl) * phi, "s2": phi * (2 + xl * xl)}
        elif name in ("gelu_tanh", "silu"):
            xl = np.asarray(x, np.longdouble)
            gelu = name == "gelu_tanh"
            v = xl * (_GELU_B1 + _GELU_B3 * xl * xl) if gelu else xl
            vd = _GELU_B1 + 3 * _GELU_B3 * xl * xl if gelu else np.ones_like(xl)
            vdd = 6 * _GELU_B3 * xl if gelu else np.zeros_like(xl)
            s, sb = _sigmoid_ld(v), _sigmoid_ld(-v)
            out = {"f": xl * s, "d1": s + xl * s * sb * vd, "d2": s * sb * (2 * vd + xl * (sb - s) * vd * vd + xl * vdd),
                   "s1": s + np.abs(xl) * s * sb * vd,
                   "s2": s * sb * (2 * vd + np.abs(xl) * np.abs(sb - s) * vd * vd + np.abs(xl * vdd))}
        elif name == "sigmoid":
            out = {"f": _sigmoid_ld(np.asarray(x, np.longdouble))}
        elif name == "tanh":
            out = {"f": np.tanh(np.asarray(x, np.longdouble))}
        else:
            raise KeyError(name)
        if "d1" in out:
            inf = np.isinf(np.asarray(x))
            out["d1"] = np.where(inf, np.nan, out["d1"])
            out["d2"] = np.where(inf, np.nan, out["d2"])
    return out


def assert_ulp_close(actual: np.ndarray, expected: np.ndarray, ulps: float, scale: np.ndarray | None = None) -> None:
    """|actual - expected| <= ulps units in the last place of max(|expected|,
    scale) in actual's dtype (subnormal ulps below the normal range); NaN where
    expected is NaN, and equal infinities."""
    actual = np.asarray(actual)
    dtype = actual.dtype
    expected = np.broadcast_to(np.asarray(expected, np.longdouble), actual.shape)
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(actual), nan), (
        f"NaN mismatch at {np.argwhere(np.isnan(actual) != nan)[:5].tolist()}: got {actual[np.isnan(actual) != nan][:5]}, "
        f"expected {expected[np.isnan(actual) != nan][:5]}")
    inf = np.isinf(expected) | np.isinf(actual)
    assert np.array_equal(actual[inf & ~nan], expected[inf & ~nan].astype(dtype)), "infinities differ"
    fin = ~nan & ~inf
    of = np.abs(expected[fin]).astype(np.float64)
    if scale is not None:
        of = np.maximum(of, np.broadcast_to(np.asarray(scale, np.float64), actual.shape)[fin])
    with np.errstate(over="ignore"):
        unit = np.spacing(np.minimum(of, np.finfo(dtype).max).astype(dtype)).astype(np.float64)
    err = np.abs(actual[fin].astype(np.longdouble) - expected[fin]).astype(np.float64) / unit
    if err.size and err.max() > ulps:
        i = int(np.argmax(err))
        raise AssertionError(
            f"{int((err > ulps).sum())} of {err.size} elements off by more than {ulps} ulp; worst {err[i]:.3g} ulp: "
            f"got {actual[fin][i]!r}, expected {float(expected[fin][i])!r}")


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
    """(y, mean, rstd); the biased variance, as torch.nn.functional.layer_norm.
    Computed in long double (where NumPy has one wider than double): x - mean
    of a row of equal values is then 0 to well below a float64 ulp, as it is
    exactly, not float64's rounding of the mean times rstd."""
    x = x.astype(np.longdouble)
    mean = x.mean(-1) if x.shape[-1] else np.zeros(x.shape[:-1], np.longdouble)
    with np.errstate(invalid="ignore", divide="ignore"):
        rstd = 1.0 / np.sqrt(((x - mean[..., None]) ** 2).mean(-1) + eps) if x.shape[-1] else np.full(x.shape[:-1], np.nan)
    y = (x - mean[..., None]) * rstd[..., None]
    if w is not None:
        y = y * w.astype(np.longdouble)
    if b is not None:
        y = y + b.astype(np.longdouble)
    return y.astype(np.float64), mean.astype(np.float64), rstd.astype(np.float64)


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
