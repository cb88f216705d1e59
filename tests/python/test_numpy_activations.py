"""The activations (gelu in both forms, silu, sigmoid, tanh) and their gradient
rows through opforge.numpy, against the NumPy references of references.py
(math.erfc, np.longdouble) in units in the last place."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from references import FLOAT_DTYPES, assert_ulp_close, ref_activation

import opforge.numpy as onp

settings.register_profile("opforge", deadline=None, max_examples=100)
settings.load_profile("opforge")

# (table op, attributes, reference name)
X_FORMS = [("gelu", {}, "gelu"), ("gelu", {"approximate": "tanh"}, "gelu_tanh"), ("silu", {}, "silu")]
ALL_FORMS = X_FORMS + [("sigmoid", {}, "sigmoid"), ("tanh", {}, "tanh")]
ULPS = 8  # docs/ops.md's measured maxima are below; the products with dy and ddx add a rounding each


def sweep(dtype: Any) -> np.ndarray:
    """A dense grid over every activation's range, its tails, tiny and huge
    magnitudes, and the special values."""
    fin = np.finfo(dtype)
    mags = np.logspace(-30, 2.9, 400)
    x = np.concatenate([np.linspace(-40, 40, 8001), mags, -mags,
                        [0.0, -0.0, np.inf, -np.inf, np.nan, fin.tiny, -fin.tiny, fin.max, -fin.max, 1e30, -1e30]])
    return x.astype(dtype)


def floor(x: np.ndarray) -> np.ndarray:
    """Absolute slack for results in the subnormal range: a few subnormal ulps per unit of |x|."""
    with np.errstate(invalid="ignore", over="ignore"):
        return np.nan_to_num(np.abs(x).astype(np.float64) * np.finfo(x.dtype).tiny * 8, nan=0.0, posinf=0.0)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("op, attrs, name", ALL_FORMS)
def test_forward(op: str, attrs: dict[str, Any], name: str, dtype: Any) -> None:
    x = sweep(dtype)
    y = getattr(onp, op)(x, **attrs)
    assert y.dtype == x.dtype and y.shape == x.shape
    assert_ulp_close(y, ref_activation(name, x)["f"], ULPS, floor(x))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("op, attrs, name", X_FORMS)
def test_gradient_rows(op: str, attrs: dict[str, Any], name: str, dtype: Any) -> None:
    """op_grad(dy, x) = dy f'(x); op_grad_grad(ddx, dy, x) = (ddx f'(x), ddx dy f''(x)),
    measured against the magnitude of f''s terms near its zeros."""
    x = sweep(dtype)
    rng = np.random.default_rng(0)
    dy, ddx = (rng.uniform(-4, 4, x.shape).astype(dtype) for _ in range(2))
    ref = ref_activation(name, x)
    s1 = np.nan_to_num(ref["s1"].astype(np.float64))
    s2 = np.nan_to_num(ref["s2"].astype(np.float64))
    dx = getattr(onp, op + "_grad")(dy, x, **attrs)
    assert_ulp_close(dx, dy.astype(np.longdouble) * ref["d1"], ULPS, np.maximum(np.abs(dy) * s1, floor(x)))
    ddy, gx = getattr(onp, op + "_grad_grad")(ddx, dy, x, **attrs)
    assert_ulp_close(ddy, ddx.astype(np.longdouble) * ref["d1"], ULPS, np.maximum(np.abs(ddx) * s1, floor(x)))
    product = ddx * dy  # formed in the dtype
    assert_ulp_close(gx, product.astype(np.longdouble) * ref["d2"], ULPS + 2,
                     np.maximum(np.abs(product) * s2, floor(x)))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("op", ["sigmoid", "tanh"])
def test_output_gradient_rows(op: str, dtype: Any) -> None:
    """sigmoid_grad(dy, y) = dy y (1 - y), tanh_grad(dy, y) = dy (1 - y²) from the
    forward op's output; their grad_grad rows: (ddx f'(y), ddx dy (1 - 2y) or -2 ddx dy y)."""
    x = sweep(dtype)
    y = getattr(onp, op)(x)
    rng = np.random.default_rng(1)
    dy, ddx = (rng.uniform(-4, 4, x.shape).astype(dtype) for _ in range(2))
    yl = y.astype(np.longdouble)
    d1 = (1 - yl) * (1 + yl) if op == "tanh" else yl * (1 - yl)
    d2 = -2 * yl if op == "tanh" else 1 - 2 * yl
    tiny = np.finfo(dtype).tiny * 8
    assert_ulp_close(getattr(onp, op + "_grad")(dy, y), dy * d1, 3, tiny)
    ddy, gy = getattr(onp, op + "_grad_grad")(ddx, dy, y)
    assert_ulp_close(ddy, ddx * d1, 3, tiny)
    assert_ulp_close(gy, (ddx * dy).astype(np.longdouble) * d2, 3, tiny)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_special_values(dtype: Any) -> None:
    """NaN gives NaN; gelu and silu of +inf are +inf and of -inf NaN, their derivatives
    NaN at ±inf (PyTorch, JAX and TensorFlow alike); sigmoid and tanh saturate;
    huge finite x gets the limits; ±0 keep their sign."""
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30], dtype)
    big = x[5]
    one = np.ones_like(x)
    for attrs in ({}, {"approximate": "tanh"}):
        np.testing.assert_array_equal(onp.gelu(x, **attrs), [np.nan, np.inf, np.nan, 0.0, -0.0, big, -0.0])
        np.testing.assert_array_equal(onp.gelu_grad(one, x, **attrs), [np.nan, np.nan, np.nan, 0.5, 0.5, 1.0, 0.0])
        ddy, gx = onp.gelu_grad_grad(one, one, x, **attrs)
        np.testing.assert_array_equal(ddy, [np.nan, np.nan, np.nan, 0.5, 0.5, 1.0, 0.0])
        assert np.isnan(gx[:3]).all() and gx[3] > 0 and gx[5] == 0 and gx[6] == 0
        assert np.signbit(onp.gelu(x, **attrs)[4]) and not np.signbit(onp.gelu(x, **attrs)[3])
    np.testing.assert_array_equal(onp.silu(x), [np.nan, np.inf, np.nan, 0.0, -0.0, big, -0.0])
    np.testing.assert_array_equal(onp.silu_grad(one, x), [np.nan, np.nan, np.nan, 0.5, 0.5, 1.0, 0.0])
    np.testing.assert_array_equal(onp.sigmoid(x), [np.nan, 1.0, 0.0, 0.5, 0.5, 1.0, 0.0])
    np.testing.assert_array_equal(onp.tanh(x), [np.nan, 1.0, -1.0, 0.0, -0.0, 1.0, -1.0])
    assert np.signbit(onp.tanh(x)[4])
    y = np.array([np.nan, 0.0, 1.0, -1.0], dtype)
    np.testing.assert_array_equal(onp.sigmoid_grad(np.ones_like(y), y), [np.nan, 0.0, 0.0, -2.0])
    np.testing.assert_array_equal(onp.tanh_grad(np.ones_like(y), y), [np.nan, 1.0, 0.0, 0.0])


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_approximate_choices(dtype: Any) -> None:
    x = np.linspace(-5, 5, 101, dtype=dtype)
    exact = onp.gelu(x)
    np.testing.assert_array_equal(onp.gelu(x, approximate="none"), exact)
    np.testing.assert_array_equal(onp.gelu(x, approximate=None), exact)  # None is the choice "none"
    tanh = onp.gelu(x, approximate="tanh")
    assert not np.array_equal(tanh, exact)
    np.testing.assert_allclose(tanh, exact, atol=1e-3)  # the approximation is close


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_out_and_in_place(dtype: Any) -> None:
    x = np.linspace(-6, 6, 1001, dtype=dtype)
    want = onp.gelu(x)
    out = np.empty_like(x)
    assert onp.gelu(x, out=out) is out
    np.testing.assert_array_equal(out, want)
    xc = x.copy()
    onp.gelu(xc, out=xc)  # elementwise: the output may be exactly the input
    np.testing.assert_array_equal(xc, want)
    dy = np.ones_like(x)
    ddy, gx = np.empty_like(x), np.empty_like(x)
    assert onp.silu_grad_grad(dy, dy, x, out=(ddy, gx)) == (ddy, gx)
    np.testing.assert_array_equal(ddy, onp.silu_grad(dy, x))


@given(st.sampled_from(FLOAT_DTYPES).flatmap(
    lambda dt: hnp.arrays(dt, hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=6),
                          elements=st.floats(width=32 if dt == np.float32 else 64))),
       st.sampled_from(ALL_FORMS), st.booleans())
def test_any_shape_and_layout(x: np.ndarray, form: tuple[str, dict[str, Any], str], transpose: bool) -> None:
    """Every shape (0-d, empty) and layout (transposed, reversed views) gives the reference."""
    op, attrs, name = form
    if transpose:
        x = x.T[..., ::-1] if x.ndim else x
    y = getattr(onp, op)(x, **attrs)
    assert y.shape == x.shape and y.dtype == x.dtype
    assert_ulp_close(y, ref_activation(name, x)["f"], ULPS, floor(x))
