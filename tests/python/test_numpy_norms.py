"""The row-wise built-ins (softmax, log_softmax, layer_norm, rms_norm and their
gradient rows) through opforge.numpy against NumPy references."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from references import (
    FLOAT_DTYPES,
    ref_layer_norm,
    ref_layer_norm_grad,
    ref_log_softmax,
    ref_log_softmax_grad,
    ref_rms_norm,
    ref_rms_norm_grad,
    ref_softmax,
    ref_softmax_grad,
)

import opforge.numpy as onp

settings.register_profile("opforge", deadline=None, max_examples=60)
settings.load_profile("opforge")


def tol(dtype: Any) -> dict[str, float]:
    return {"rtol": 2e-5, "atol": 2e-6} if np.dtype(dtype) == np.float32 else {"rtol": 1e-11, "atol": 1e-12}


row_shapes = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5).flatmap(
    lambda lead: st.integers(1, 70).map(lambda m: (*lead[:-1], m))
)


@st.composite
def row_case(draw: st.DrawFn) -> tuple[np.ndarray, Any]:
    dtype = draw(st.sampled_from(FLOAT_DTYPES))
    shape = draw(row_shapes)
    width = 32 if dtype == np.float32 else 64
    x = draw(hnp.arrays(dtype, shape, elements=st.floats(-30, 30, width=width)))
    if draw(st.booleans()) and x.ndim >= 2:
        x = np.ascontiguousarray(np.swapaxes(x, 0, -1)).swapaxes(0, -1)  # rows not contiguous in memory
    return x, dtype


@given(row_case())
def test_softmax_and_log_softmax(case: tuple[np.ndarray, Any]) -> None:
    x, dtype = case
    for op, ref in ((onp.softmax, ref_softmax), (onp.log_softmax, ref_log_softmax)):
        y = op(x)
        assert y.dtype == dtype and y.shape == x.shape
        np.testing.assert_allclose(y, ref(x), **tol(dtype))


@given(row_case(), st.integers(0, 3))
def test_layer_norm_and_rms_norm(case: tuple[np.ndarray, Any], optional: int) -> None:
    x, dtype = case
    rng = np.random.default_rng(x.size)
    w = rng.uniform(0.5, 1.5, x.shape[-1]).astype(dtype) if optional & 1 else None
    b = rng.standard_normal(x.shape[-1]).astype(dtype) if optional & 2 else None
    loose = {"rtol": 1e-4, "atol": 1e-4} if dtype == np.float32 else tol(dtype)
    y, mean, rstd = onp.layer_norm(x, w, b, eps=1e-3)
    for got, want in zip((y, mean, rstd), ref_layer_norm(x, w, b, 1e-3)):
        np.testing.assert_allclose(got, want, **loose)
    y, rstd = onp.rms_norm(x, w, eps=1e-3)
    for got, want in zip((y, rstd), ref_rms_norm(x, w, 1e-3)):
        np.testing.assert_allclose(got, want, **loose)


@given(row_case())
def test_softmax_grads(case: tuple[np.ndarray, Any]) -> None:
    x, dtype = case
    dy = np.random.default_rng(x.size).standard_normal(x.shape).astype(dtype)
    y = ref_softmax(x).astype(dtype)
    np.testing.assert_allclose(onp.softmax_grad(dy, y), ref_softmax_grad(dy, y), **tol(dtype))
    y = ref_log_softmax(x).astype(dtype)
    np.testing.assert_allclose(onp.log_softmax_grad(dy, y), ref_log_softmax_grad(dy, y), rtol=1e-4, atol=1e-5)


@given(row_case(), st.integers(0, 7))
def test_norm_grads(case: tuple[np.ndarray, Any], optional: int) -> None:
    """Every combination of w, dmean and drstd; dx, dw and db against the chain rule."""
    x, dtype = case
    rng = np.random.default_rng(x.size + optional)
    dy = rng.standard_normal(x.shape).astype(dtype)
    w = rng.uniform(0.5, 1.5, x.shape[-1]).astype(dtype) if optional & 1 else None
    dmean = rng.standard_normal(x.shape[:-1]).astype(dtype) if optional & 2 else None
    drstd = rng.standard_normal(x.shape[:-1]).astype(dtype) if optional & 4 else None
    eps = 0.1
    rows = int(np.prod(x.shape[:-1]))
    loose = {"rtol": 1e-3, "atol": 1e-4 * (1 + rows)} if dtype == np.float32 else {"rtol": 1e-9, "atol": 1e-10}
    _, mean, rstd = onp.layer_norm(x, eps=eps)
    dx, dw, db = onp.layer_norm_grad(x, mean, rstd, dy, w, dmean, drstd)
    for got, want in zip((dx, dw, db), ref_layer_norm_grad(dy, x, w, eps, dmean, drstd)):
        np.testing.assert_allclose(got, want, **loose)
    _, rstd = onp.rms_norm(x, eps=eps)
    dx, dw = onp.rms_norm_grad(x, rstd, dy, w, drstd)
    for got, want in zip((dx, dw), ref_rms_norm_grad(dy, x, w, eps, drstd)):
        np.testing.assert_allclose(got, want, **loose)


def test_rms_norm_default_eps_is_the_dtype_epsilon() -> None:
    x = np.array([[1e-4, -2e-4, 3e-4]])
    for dtype in FLOAT_DTYPES:
        y, rstd = onp.rms_norm(x.astype(dtype))
        np.testing.assert_allclose(rstd, ref_rms_norm(x.astype(dtype), None, None)[1], rtol=1e-6)
        assert onp.rms_norm.__signature__.parameters["eps"].default == -1.0  # type: ignore[attr-defined]


def test_second_order_rows_against_differences() -> None:
    """softmax_grad_grad and log_softmax_grad_grad: the gradients of <ddx, dx>
    against central differences of the first-order references."""
    rng = np.random.default_rng(5)
    dy, ddx = rng.standard_normal((2, 3, 6))
    for op, ref, y in (
        (lambda ddx, dy, y: onp.softmax_grad_grad(ddx, dy, y)[:2], ref_softmax_grad, ref_softmax(rng.standard_normal((3, 6)))),
        (lambda ddx, dy, y: onp.log_softmax_grad_grad(ddx, y, dy), ref_log_softmax_grad,
         ref_log_softmax(rng.standard_normal((3, 6)))),
    ):
        gdy, gy = op(ddx, dy, y)
        h = 1e-6
        for got, which in ((gdy, 0), (gy, 1)):
            want = np.zeros_like(got)
            for i in np.ndindex(*got.shape):
                args = [dy.copy(), y.copy()]
                args[which][i] += h
                up = (ddx * ref(*args)).sum()
                args[which][i] -= 2 * h
                want[i] = (up - (ddx * ref(*args)).sum()) / (2 * h)
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_log_softmax_grad_grad_jvp_against_differences() -> None:
    """log_softmax_grad_grad_jvp: the derivative of log_softmax_grad_grad's
    gdy and gy (the gradients of <ddx, dx>) along a tangent yt of y, against
    central differences in y of central differences of the first-order
    reference; dy absent is zero."""
    rng = np.random.default_rng(6)
    dy, ddx, yt = rng.standard_normal((3, 3, 6))
    y = ref_log_softmax(rng.standard_normal((3, 6)))

    def gradient(which: int, y: np.ndarray) -> np.ndarray:  # of <ddx, dx> in dy (0) or y (1)
        h, out = 1e-5, np.zeros_like(y)
        for i in np.ndindex(*y.shape):
            args = [dy.copy(), y.copy()]
            args[which][i] += h
            up = (ddx * ref_log_softmax_grad(*args)).sum()
            args[which][i] -= 2 * h
            out[i] = (up - (ddx * ref_log_softmax_grad(*args)).sum()) / (2 * h)
        return out

    gdyt, gyt = onp.log_softmax_grad_grad_jvp(ddx, y, dy, yt)
    h = 1e-4
    for got, which in ((gdyt, 0), (gyt, 1)):
        want = (gradient(which, y + h * yt) - gradient(which, y - h * yt)) / (2 * h)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    gdyt0, gyt0 = onp.log_softmax_grad_grad_jvp(ddx, y, None, yt)
    np.testing.assert_array_equal(gyt0, 0.0)
    np.testing.assert_allclose(gdyt0, gdyt, rtol=1e-12)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_special_rows(dtype: Any) -> None:
    inf, nan = np.inf, np.nan
    x = np.array([[1, inf, 2], [1, -inf, 2], [-inf, -inf, -inf], [nan, 1, 2], [-inf, 0, inf], [1000, -1000, 999]], dtype)
    for op, ref in ((onp.softmax, ref_softmax), (onp.log_softmax, ref_log_softmax)):
        np.testing.assert_allclose(op(x), ref(x), rtol=1e-6, atol=1e-7)
    assert onp.softmax(x)[1, 1] == 0 and onp.log_softmax(x)[1, 1] == -inf  # a masked element exactly
    assert np.isnan(onp.layer_norm(x)[0][[0, 3]]).all()
    np.testing.assert_allclose(onp.rms_norm(x)[0], ref_rms_norm(x, None, None)[0], rtol=1e-6)  # [1, inf, 2] -> [0, nan, 0]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_empty_rows_and_no_rows(dtype: Any) -> None:
    empty = np.zeros((3, 0), dtype)
    assert onp.softmax(empty).shape == (3, 0)
    y, mean, rstd = onp.layer_norm(empty)
    assert y.shape == (3, 0) and (mean == 0).all() and np.isnan(rstd).all()  # as torch.native_layer_norm
    assert np.isnan(onp.rms_norm(empty)[1]).all()
    none = np.zeros((0, 4), dtype)
    dx, dw, db = onp.layer_norm_grad(none, np.zeros(0, dtype), np.zeros(0, dtype), none, np.ones(4, dtype))
    assert dx.shape == (0, 4) and (dw == 0).all() and (db == 0).all() and dw.shape == (4,)


def test_layouts_and_out() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 9, 5))
    xt = x.transpose(2, 1, 0)[::-1]  # rows strided and reversed
    out = np.empty((5, 9, 6))[:, :, :]
    np.testing.assert_allclose(onp.softmax(xt, out=out), ref_softmax(xt), rtol=1e-12)
    w = rng.standard_normal(12)[::2]
    y, mean, rstd = onp.layer_norm(xt, w, w, out=(None, None, np.empty((5, 9))))
    np.testing.assert_allclose(y, ref_layer_norm(xt, w, w, 1e-5)[0], rtol=1e-10, atol=1e-12)
    dy = rng.standard_normal(xt.shape)
    dx, dw, db = onp.layer_norm_grad(xt, mean, rstd, dy, w, out=(onp.SKIP, None, onp.SKIP))
    assert dx is None and db is None
    np.testing.assert_allclose(dw, ref_layer_norm_grad(dy, xt, w, 1e-5)[1], rtol=1e-10, atol=1e-10)
    broadcast = np.broadcast_to(rng.standard_normal(7), (4, 7))
    np.testing.assert_allclose(onp.log_softmax(broadcast), ref_log_softmax(broadcast), rtol=1e-12)


def test_bad_input() -> None:
    x = np.ones((4, 5), np.float32)
    with pytest.raises(TypeError, match=r"softmax: x has dtype int64; expected float32 or float64"):
        onp.softmax(np.ones((2, 3), np.int64))
    with pytest.raises(ValueError, match=r"softmax: x must have rank 1 or more, got rank 0"):
        onp.softmax(np.float32(1.0))
    with pytest.raises(ValueError, match=r"layer_norm: shape mismatch: x is \[4,5\], w is \[4\]"):
        onp.layer_norm(x, np.ones(4, np.float32))
    with pytest.raises(TypeError, match=r"rms_norm: .*float64"):
        onp.rms_norm(x, np.ones(5))
    with pytest.raises(ValueError, match=r"layer_norm_grad: .*leading dims"):
        onp.layer_norm_grad(x, np.zeros(3, np.float32), np.zeros(4, np.float32), x)
    with pytest.raises(ValueError, match=r"softmax: .*in place"):
        onp.softmax(x, out=x)
