"""Every built-in op through opforge.numpy against an independent NumPy reference."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from references import (
    FLOAT_DTYPES,
    assert_matmul_close,
    ref_dense,
    ref_dense_grad,
    ref_relu,
    ref_relu_grad,
    ref_scale,
)

import opforge.numpy as onp

settings.register_profile("opforge", deadline=None, max_examples=100)
settings.load_profile("opforge")

# -- strategies ----------------------------------------------------------------

dtypes = st.sampled_from(FLOAT_DTYPES)
# Any rank from 0-d to 4-d (0-size dims included), plus 1-d lengths that cover SIMD tails.
elementwise_shapes = st.one_of(
    hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=6),
    st.integers(0, 300).map(lambda n: (n,)),
)


def floats(dtype: Any, special: bool = True, bound: float | None = None) -> st.SearchStrategy[float]:
    """Values of dtype: any (NaN and ±Inf included) when special, else finite within ±bound."""
    width: Literal[32, 64] = 32 if np.dtype(dtype) == np.float32 else 64
    if special:
        return st.floats(width=width)
    return st.floats(width=width, min_value=-bound if bound else None, max_value=bound, allow_nan=False)


def arrays(
    dtype: Any, shape: tuple[int, ...], special: bool = True, bound: float | None = None
) -> st.SearchStrategy[np.ndarray]:
    return hnp.arrays(dtype, shape, elements=floats(dtype, special, bound))


@st.composite
def same_shape_arrays(draw: st.DrawFn, count: int) -> list[np.ndarray]:
    dtype = draw(dtypes)
    shape = draw(elementwise_shapes)
    return [draw(arrays(dtype, shape)) for _ in range(count)]


@st.composite
def dense_case(draw: st.DrawFn) -> dict[str, Any]:
    """x [N,K], w [K,M], optional b [M], an activation, and dy [N,M] for the gradient."""
    dtype = draw(dtypes)
    n, k, m = (draw(st.integers(0, 40)) for _ in range(3))
    return {
        "x": draw(arrays(dtype, (n, k), special=False, bound=8.0)),
        "w": draw(arrays(dtype, (k, m), special=False, bound=8.0)),
        "b": draw(st.none() | arrays(dtype, (m,), special=False, bound=8.0)),
        "activation": draw(st.sampled_from(["none", "relu"])),
        "dy": draw(arrays(dtype, (n, m), special=False, bound=8.0)),
    }


def check_dense(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, activation: str) -> np.ndarray:
    y = onp.dense(x, w, b, activation=activation)
    assert y.dtype == x.dtype and y.shape == (x.shape[0], w.shape[1])
    magnitude = np.abs(x.astype(np.float64)) @ np.abs(w.astype(np.float64))
    if b is not None:
        magnitude = magnitude + np.abs(b.astype(np.float64))
    assert_matmul_close(y, ref_dense(x, w, b, activation), magnitude, depth=x.shape[1])
    return y


def check_dense_grad(dy: np.ndarray, x: np.ndarray, w: np.ndarray, y: np.ndarray | None, activation: str) -> None:
    dx, dw, db = onp.dense_grad(dy, x, w, y, activation=activation)
    ref_dx, ref_dw, ref_db = ref_dense_grad(dy, x, w, y, activation)
    abs_dz = np.abs(dy.astype(np.float64))
    if activation == "relu":
        assert y is not None
        abs_dz = abs_dz * (y > 0)
    n, k = x.shape
    m = w.shape[1]
    assert_matmul_close(dx, ref_dx, abs_dz @ np.abs(w.astype(np.float64)).T, depth=m)
    assert_matmul_close(dw, ref_dw, np.abs(x.astype(np.float64)).T @ abs_dz, depth=n)
    assert_matmul_close(db, ref_db, abs_dz.sum(axis=0), depth=n)
    assert (dx.shape, dw.shape, db.shape) == ((n, k), (k, m), (m,))


# -- elementwise ---------------------------------------------------------------


@given(same_shape_arrays(1))
def test_relu(arrays: list[np.ndarray]) -> None:
    (x,) = arrays
    y = onp.relu(x)
    assert isinstance(y, np.ndarray) and y.dtype == x.dtype and y.shape == x.shape
    np.testing.assert_array_equal(y, ref_relu(x))


@given(same_shape_arrays(1))
def test_relu_in_place(arrays: list[np.ndarray]) -> None:
    (x,) = arrays
    expected = ref_relu(x)
    result = onp.relu_(x)
    assert result is x
    np.testing.assert_array_equal(x, expected)


@given(same_shape_arrays(2))
def test_relu_grad(arrays: list[np.ndarray]) -> None:
    dy, x = arrays
    dx = onp.relu_grad(dy, x)
    assert dx.dtype == x.dtype and dx.shape == x.shape
    np.testing.assert_array_equal(dx, ref_relu_grad(dy, x))


@given(same_shape_arrays(1), st.floats(min_value=-1e30, max_value=1e30))
def test_scale(arrays: list[np.ndarray], alpha: float) -> None:
    (x,) = arrays
    with np.errstate(over="ignore", invalid="ignore"):
        expected = ref_scale(x, alpha)
    np.testing.assert_array_equal(onp.scale(x, alpha=alpha), expected)


@given(same_shape_arrays(2))
def test_add(arrays: list[np.ndarray]) -> None:
    a, b = arrays
    with np.errstate(over="ignore", invalid="ignore"):
        expected = a + b
    np.testing.assert_array_equal(onp.add(a, b), expected)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_scale_default_alpha_is_identity(dtype: Any) -> None:
    x = np.linspace(-3, 3, 17, dtype=dtype)
    np.testing.assert_array_equal(onp.scale(x), x)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_special_values(dtype: Any) -> None:
    x = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, np.finfo(dtype).tiny], dtype=dtype)
    y = onp.relu(x)
    assert np.isnan(y[0]) and np.isnan(y[1])  # relu(NaN) is NaN
    np.testing.assert_array_equal(y[2:], [np.inf, 0, 0, 0, 1, 0, np.finfo(dtype).tiny])
    dy = np.arange(1, x.size + 1, dtype=dtype)
    # NaN x passes dy (x <= 0 is false), as PyTorch's threshold_backward.
    np.testing.assert_array_equal(onp.relu_grad(dy, x), [1, 2, 3, 0, 0, 0, 7, 0, 9])
    np.testing.assert_array_equal(onp.relu_grad(np.full_like(x, np.nan), x)[[3, 4, 5, 7]], 0)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("shape", [(), (1,), (0,), (3, 0, 2), (1, 1, 1, 1)])
def test_degenerate_shapes(dtype: Any, shape: tuple[int, ...]) -> None:
    x = np.full(shape, -2.5, dtype)
    for result in (onp.relu(x), onp.scale(x, alpha=2.0), onp.add(x, x), onp.relu_grad(x, x)):
        assert result.shape == shape and result.dtype == dtype
    np.testing.assert_array_equal(onp.scale(x, alpha=2.0), np.full(shape, -5.0, dtype))


# -- dense ---------------------------------------------------------------------


@given(dense_case())
def test_dense(case: dict[str, Any]) -> None:
    check_dense(case["x"], case["w"], case["b"], case["activation"])


@given(dense_case())
def test_dense_grad(case: dict[str, Any]) -> None:
    x, w, activation = case["x"], case["w"], case["activation"]
    y = ref_dense(x, w, case["b"], activation).astype(x.dtype) if activation == "relu" else None
    check_dense_grad(case["dy"], x, w, y, activation)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("n,k,m", [(300, 200, 150), (513, 257, 129), (1, 1000, 1), (64, 1, 64)])
@pytest.mark.parametrize("activation", ["none", "relu"])
def test_dense_larger(dtype: Any, n: int, k: int, m: int, activation: str) -> None:
    rng = np.random.default_rng(n * k + m)
    x = rng.standard_normal((n, k)).astype(dtype)
    w = rng.standard_normal((k, m)).astype(dtype)
    b = rng.standard_normal(m).astype(dtype)
    y = check_dense(x, w, b, activation)
    dy = rng.standard_normal((n, m)).astype(dtype)
    check_dense_grad(dy, x, w, y if activation == "relu" else None, activation)


def test_dense_activation_none_accepts_python_none() -> None:
    x = np.eye(3, dtype=np.float32) - 2
    w = np.eye(3, dtype=np.float32)
    np.testing.assert_array_equal(onp.dense(x, w, activation=None), x)
    np.testing.assert_array_equal(onp.dense(x, w, activation="relu"), np.maximum(x, 0))


def test_dense_grad_skipped_outputs() -> None:
    rng = np.random.default_rng(7)
    x, w, dy = (rng.standard_normal(s) for s in [(5, 4), (4, 3), (5, 3)])
    dx, dw, db = onp.dense_grad(dy, x, w, out=(onp.SKIP, None, onp.SKIP))
    assert dx is None and db is None
    np.testing.assert_allclose(dw, x.T @ dy, rtol=1e-12, atol=1e-12)
