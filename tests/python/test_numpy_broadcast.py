"""Broadcasting ops through opforge.numpy (add, mul and their gradient rows
sum_to and mul_grad) against NumPy's own broadcasting and sums."""

from __future__ import annotations

import math

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from references import FLOAT_DTYPES

import opforge.numpy as onp

settings.register_profile("opforge", deadline=None, max_examples=100)
settings.load_profile("opforge")

dtypes = st.sampled_from(FLOAT_DTYPES)
# Pairs of shapes that broadcast together: ranks 0 to 4, size-1 and size-0 dims.
shape_pairs = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, min_side=0, max_side=5)

# Hand-picked pairs: 0-d with n-d, [3,1] with [1,4], rank mismatch, empty dims, long rows.
PAIRS = [
    ((), (2, 3)),
    ((2, 3), ()),
    ((3, 1), (1, 4)),
    ((4,), (2, 3, 4)),
    ((2, 1, 4), (3, 1)),
    ((2, 1, 3, 1), (5, 1, 6)),
    ((0, 4), (4,)),
    ((1, 4), (0, 1)),
    ((5, 7), (5, 7)),
    ((300, 1), (1, 257)),
    ((1000, 64), (64,)),
]


def view(base: np.ndarray, kind: str) -> np.ndarray:
    """A non-contiguous array with base's values: transposed, reversed or strided storage."""
    if kind == "contiguous" or base.ndim == 0:
        return base
    if kind == "transposed":
        return np.ascontiguousarray(base.T).T
    if kind == "reversed":
        return np.flip(np.flip(base).copy())
    spread = np.zeros(base.shape[:-1] + (2 * base.shape[-1],), base.dtype)  # every other element
    spread[..., ::2] = base
    return spread[..., ::2]


def values(dtype: Any, shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-2, 2, shape).astype(dtype)


def summed_to(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """x broadcast with an array of `shape`, then summed down to `shape` (in float64)."""
    full = np.broadcast_shapes(x.shape, shape)
    y = np.broadcast_to(x.astype(np.float64), full)
    lead = len(full) - len(shape)
    y = y.sum(axis=tuple(range(lead))) if lead else y
    axes = tuple(d for d, n in enumerate(shape) if n == 1 and y.shape[d] != 1)
    y = y.sum(axis=axes, keepdims=True) if axes else y
    return np.broadcast_to(y, shape)


def terms_per_output(x_shape: tuple[int, ...], shape: tuple[int, ...]) -> int:
    """How many elements of x (broadcast with `shape`) each element of the sum to `shape` adds."""
    return math.prod(np.broadcast_shapes(x_shape, shape)) // max(1, math.prod(shape))


def assert_sum_close(got: np.ndarray, want: np.ndarray, magnitude: np.ndarray, terms: int) -> None:
    """|got - want| <= k eps * (sum of |terms|), the bound of the library's
    sums and the reference's together: float32 is summed in double (k = 4);
    float64 in 32 lanes that each add their share of the terms in turn,
    combined in a tree of depth 5, against NumPy's pairwise sum (depth
    log2(terms)): k = terms / 32 + log2(terms) + 8, the worst case, which
    random data stays far below but a search for it (hypothesis) can reach."""
    assert got.shape == want.shape, (got.shape, want.shape)
    k = 4 if got.dtype == np.float32 else -(-terms // 32) + math.log2(max(terms, 1)) + 8
    bound = k * np.finfo(got.dtype).eps * magnitude + np.finfo(got.dtype).tiny
    error = np.abs(got.astype(np.float64) - want)
    assert (error <= bound).all(), f"max error {error.max():.3g}, bound {bound[error > bound].min():.3g}"


# -- add and mul -----------------------------------------------------------------


@given(dtypes, shape_pairs, st.sampled_from(["add", "mul"]), st.data())
def test_add_mul_broadcast_like_numpy(dtype: Any, shapes: Any, name: str, data: st.DataObject) -> None:
    sa, sb = shapes.input_shapes
    a = data.draw(hnp.arrays(dtype, sa, elements=st.floats(width=np.finfo(dtype).bits)))
    b = data.draw(hnp.arrays(dtype, sb, elements=st.floats(width=np.finfo(dtype).bits)))
    with np.errstate(all="ignore"):
        expected = a + b if name == "add" else a * b
    result = getattr(onp, name)(a, b)
    assert result.dtype == dtype and result.shape == expected.shape == shapes.result_shape
    np.testing.assert_array_equal(result, expected)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("sa,sb", PAIRS)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "reversed", "strided"])
def test_add_mul_layouts(dtype: Any, sa: tuple[int, ...], sb: tuple[int, ...], layout: str) -> None:
    a, b = values(dtype, sa, 1), values(dtype, sb, 2)
    va, vb = view(a, layout), view(b, "strided" if layout == "contiguous" else "contiguous")
    np.testing.assert_array_equal(onp.add(va, vb), a + b)
    np.testing.assert_array_equal(onp.mul(va, vb), a * b)
    out = view(np.zeros(np.broadcast_shapes(sa, sb), dtype), layout)
    assert onp.mul(va, vb, out=out) is out
    np.testing.assert_array_equal(out, a * b)


def test_numpy_broadcast_views_as_inputs() -> None:
    """Zero-stride inputs (np.broadcast_to) broadcast as any others."""
    a = np.broadcast_to(np.arange(4.0), (3, 4))
    b = np.arange(3.0).reshape(3, 1)
    np.testing.assert_array_equal(onp.add(a, b), a + b)
    np.testing.assert_array_equal(onp.sum_to(a, np.empty(4)), a.sum(axis=0))


def test_scalars_and_lists_broadcast() -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    result = onp.add(a, 1.5)
    assert result.dtype == np.float32
    np.testing.assert_array_equal(result, a + np.float32(1.5))
    np.testing.assert_array_equal(onp.mul([1.0, 2.0, 3.0], a), a * [1.0, 2.0, 3.0])


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_in_place_onto_the_full_input(dtype: Any) -> None:
    a, b = values(dtype, (4, 5), 3), values(dtype, (5,), 4)
    expected = a * b
    assert onp.mul(a, b, out=a) is a
    np.testing.assert_array_equal(a, expected)


# -- sum_to and mul_grad -----------------------------------------------------------


@given(dtypes, shape_pairs, st.data())
def test_sum_to_like_numpy(dtype: Any, shapes: Any, data: st.DataObject) -> None:
    """sum_to(x, like): x summed over the dims like broadcasts along, or broadcast up to like."""
    sx, sl = shapes.input_shapes
    x = data.draw(hnp.arrays(dtype, sx, elements=st.floats(-100, 100, width=np.finfo(dtype).bits)))
    like = np.empty(sl, dtype)
    y = onp.sum_to(x, like)
    assert y.dtype == dtype and y.shape == sl
    assert_sum_close(y, summed_to(x, sl), summed_to(np.abs(x), sl), terms_per_output(x.shape, sl))


@given(dtypes, hnp.mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=4, max_side=4), st.data())
def test_mul_grad_like_numpy(dtype: Any, shapes: Any, data: st.DataObject) -> None:
    """mul_grad(dy, other, like) = sum_to(dy * other, like)."""
    sd, so, sl = shapes.input_shapes
    floats = st.floats(-10, 10, width=np.finfo(dtype).bits)
    dy = data.draw(hnp.arrays(dtype, sd, elements=floats))
    other = data.draw(hnp.arrays(dtype, so, elements=floats))
    product = dy * other
    dx = onp.mul_grad(dy, other, np.empty(sl, dtype))
    assert dx.shape == sl
    magnitude = summed_to(np.abs(product.astype(np.float64)), sl)
    assert_sum_close(dx, summed_to(product, sl), magnitude, terms_per_output(product.shape, sl))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize(
    "sx,sl",
    [
        ((4096, 96), (96,)),
        ((96, 4096), (96, 1)),
        ((8, 128, 96), (1, 128, 96)),
        ((8, 128, 96), (8, 1, 1)),
        ((1_000_003,), ()),
        ((100_000, 3), (100_000, 1)),
        ((50_000, 8), (8,)),
    ],
)
def test_large_sums(dtype: Any, sx: tuple[int, ...], sl: tuple[int, ...]) -> None:
    x = values(dtype, sx, 5)
    y = onp.sum_to(view(x, "transposed"), np.empty(sl, dtype))
    assert_sum_close(y, summed_to(x, sl), summed_to(np.abs(x), sl), terms_per_output(x.shape, sl))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_same_shape_sum_to_is_a_copy(dtype: Any) -> None:
    x = values(dtype, (3, 4), 6)
    y = onp.sum_to(x, x)
    assert y is not x and not np.shares_memory(x, y)
    np.testing.assert_array_equal(y, x)


def test_sum_over_empty_dims_is_zero() -> None:
    np.testing.assert_array_equal(onp.sum_to(np.empty((0, 3)), np.empty(3)), np.zeros(3))
    np.testing.assert_array_equal(onp.sum_to(np.empty((0, 3)), np.empty(())), 0.0)
    np.testing.assert_array_equal(onp.mul_grad(np.empty((2, 0)), np.empty(0), np.empty((2, 1))), np.zeros((2, 1)))


# -- mistakes --------------------------------------------------------------------


@pytest.mark.parametrize("name", ["add", "mul"])
def test_shapes_that_do_not_broadcast(name: str) -> None:
    with pytest.raises(
        ValueError,
        match=rf"opforge\.{name}: shape mismatch: a is \[2,3\], b is \[4\]; they must broadcast together "
        r"\(dim -1: 3 vs 4\)",
    ):
        getattr(onp, name)(np.ones((2, 3)), np.ones(4))
    with pytest.raises(ValueError, match=r"b is \[2,4\]"):
        getattr(onp, name)(np.ones((3, 2, 3)), np.ones((2, 4)))


def test_sum_to_shapes_that_do_not_broadcast() -> None:
    with pytest.raises(ValueError, match=r"opforge\.sum_to: shape mismatch: x is \[2,3\], like is \[2\]"):
        onp.sum_to(np.ones((2, 3)), np.ones(2))


def test_out_of_the_wrong_shape() -> None:
    with pytest.raises(ValueError, match=r"out \(y\) has shape \[3\]; expected \[2,3\]"):
        onp.add(np.ones((2, 3)), np.ones(3), out=np.empty(3))


def test_summed_output_never_in_place() -> None:
    like = np.ones((1, 3))
    with pytest.raises(ValueError, match=r"opforge\.sum_to: y overlaps input like"):
        onp.sum_to(np.ones((2, 3)), like, out=like)


def test_output_over_a_broadcast_input_is_refused() -> None:
    y = np.zeros((3, 4))
    with pytest.raises(ValueError, match=r"partially overlaps input b"):
        onp.add(np.ones((3, 4)), y[0], out=y)
