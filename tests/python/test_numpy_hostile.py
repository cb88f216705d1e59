"""Hostile views through opforge.numpy: aliasing decided element by element
(interleaved views that share no element are accepted, as NumPy accepts
them), extreme strides on size-1 dims, empty arrays. The C suite's
test_hostile.c covers the same ground with views NumPy cannot make."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided
from references import FLOAT_DTYPES, ref_relu

import opforge.numpy as onp


def expect_same_as_numpy(dtype: Any, make: Any) -> None:
    """Runs onp.relu(x, out=y) and np.maximum(x, 0, out=y) on views of two
    equal arrays made by make(buffer) -> (x, y); both buffers must end equal."""
    ours = np.random.default_rng(3).standard_normal(48).astype(dtype)
    theirs = ours.copy()
    x, y = make(ours)
    onp.relu(x, out=y)
    tx, ty = make(theirs)
    np.maximum(tx, 0, out=ty)
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_relu_of_left_columns_into_right_columns(dtype: Any) -> None:
    """onp.relu(b[:, :2], out=b[:, 2:]): the spans meet, the elements do not."""
    b = np.random.default_rng(0).standard_normal((5, 4)).astype(dtype)
    left = b[:, :2].copy()
    onp.relu(b[:, :2], out=b[:, 2:])
    np.testing.assert_array_equal(b[:, :2], left)
    np.testing.assert_array_equal(b[:, 2:], ref_relu(left))
    expect_same_as_numpy(dtype, lambda buf: (buf.reshape(12, 4)[:, :2], buf.reshape(12, 4)[:, 2:]))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_relu_of_even_elements_into_odd_elements(dtype: Any) -> None:
    """onp.relu(a[0::2], out=a[1::2])."""
    a = np.random.default_rng(1).standard_normal(20).astype(dtype)
    even = a[0::2].copy()
    onp.relu(a[0::2], out=a[1::2])
    np.testing.assert_array_equal(a[0::2], even)
    np.testing.assert_array_equal(a[1::2], ref_relu(even))
    expect_same_as_numpy(dtype, lambda buf: (buf[0::2], buf[1::2]))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_more_interleavings(dtype: Any) -> None:
    cases = {
        "thirds": lambda buf: (buf[0::3], buf[1::3]),
        "rows even to odd, reversed": lambda buf: (buf.reshape(8, 6)[0::2], buf.reshape(8, 6)[-1::-2]),
        "coprime steps": lambda buf: (buf[0:15:5], buf[1:22:7]),
        "transposed halves": lambda buf: (buf.reshape(6, 8)[:, :4].T, buf.reshape(6, 8)[:, 4:].T),
    }
    for make in cases.values():
        expect_same_as_numpy(dtype, make)


def test_add_into_the_middle_third() -> None:
    c = np.arange(1.0, 10.0)
    a, b = c[0::3].copy(), c[2::3].copy()
    onp.add(c[0::3], c[2::3], out=c[1::3])
    np.testing.assert_array_equal(c[1::3], a + b)
    np.testing.assert_array_equal(c[0::3], a)


@pytest.mark.parametrize(
    "make",
    [
        lambda buf: (buf[0:10:2], buf[2:12:2]),  # shifted by one element of the view
        lambda buf: (buf[0:15:3], buf[3:18:3][::-1]),  # the same elements, another order
        lambda buf: (buf.reshape(6, 8)[:, :5], buf.reshape(6, 8)[:, 3:]),  # columns 3 and 4 in both
    ],
    ids=["shifted", "reversed", "overlapping columns"],
)
def test_views_sharing_some_elements_are_refused(make: Any) -> None:
    buf = np.arange(48.0)
    before = buf.copy()
    x, y = make(buf)
    with pytest.raises(ValueError, match="overlap"):
        onp.relu(x, out=y)
    np.testing.assert_array_equal(buf, before)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_huge_strides_on_size_one_dims(dtype: Any) -> None:
    """A stride on a dim of size 1 is never used: any value is valid."""
    x = np.array([[-1.0, 2.0, -3.0]], dtype)
    huge = as_strided(x, shape=(1, 3), strides=(2**62, x.itemsize))
    y = np.zeros((1, 3), dtype)
    onp.relu(huge, out=y)
    np.testing.assert_array_equal(y, [[0, 2, 0]])
    w = np.arange(6.0, dtype=dtype).reshape(3, 2)
    out = onp.dense(huge, w)
    np.testing.assert_allclose(out, x @ w)


def test_empty_arrays_with_large_other_dims() -> None:
    x = np.empty((0, 2**40), np.float32)  # no memory: one dim is 0
    assert onp.relu(x).shape == (0, 2**40)
    y = np.empty((2**20, 0, 2**20), np.float64)
    out = np.empty_like(y)
    onp.relu(y, out=out)
    assert onp.add(y, y).shape == y.shape


def test_interleaved_disjoint_outputs_are_accepted() -> None:
    """dense_grad's dx and dw as the even and odd rows of one buffer: they share
    a memory span but no element, as the library decides (NumPy too)."""
    rng = np.random.default_rng(7)
    dy, x, w = (rng.standard_normal((2, 2)) for _ in range(3))
    buffer = np.zeros((4, 2))
    dx, dw = buffer[0::2], buffer[1::2]
    onp.dense_grad(dy, x, w, out=(dx, dw, onp.SKIP))
    np.testing.assert_allclose(dx, dy @ w.T, rtol=1e-12)
    np.testing.assert_allclose(dw, x.T @ dy, rtol=1e-12)
    with pytest.raises(ValueError, match="overlap"):
        onp.dense_grad(dy, x, w, out=(buffer[0:2], buffer[1:3], onp.SKIP))
