"""Memory layouts through opforge.numpy: strided, broadcast, misaligned, out=, in place."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest
from references import FLOAT_DTYPES, ref_dense, ref_relu, ref_relu_grad

import opforge.numpy as onp

# Views of a (6, 8) base array; each one is not C-contiguous.
VIEWS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "transposed": lambda a: a.T,
    "step": lambda a: a[::2, 1::3],
    "negative steps": lambda a: a[::-1, ::-2],
    "column": lambda a: a[:, 3],
    "broadcast row": lambda a: np.broadcast_to(a[0], (5, 8)),
    "broadcast scalar": lambda a: np.broadcast_to(a[1, 2], (3, 4)),
    "fortran": lambda a: np.asfortranarray(a),
}


def base(dtype: Any, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((6, 8)).astype(dtype)


def misaligned(arr: np.ndarray, offset: int = 1) -> np.ndarray:
    """A copy of arr whose data starts `offset` bytes into a byte buffer (misaligned)."""
    buffer = np.zeros(arr.nbytes + offset, np.uint8)
    out = buffer[offset : offset + arr.nbytes].view(arr.dtype).reshape(arr.shape)
    out[...] = arr
    assert out.ctypes.data % arr.itemsize != 0
    return out


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("view", VIEWS.values(), ids=VIEWS.keys())
def test_strided_inputs(dtype: Any, view: Callable[[np.ndarray], np.ndarray]) -> None:
    x = view(base(dtype, 1))
    dy = view(base(dtype, 2))
    np.testing.assert_array_equal(onp.relu(x), ref_relu(x))
    np.testing.assert_array_equal(onp.relu_grad(dy, x), ref_relu_grad(dy, x))
    np.testing.assert_array_equal(onp.add(x, dy), x + dy)
    np.testing.assert_array_equal(onp.scale(x, alpha=3.0), x * dtype(3.0))


@pytest.mark.parametrize("view", VIEWS.values(), ids=VIEWS.keys())
def test_aligned_views_are_not_copied(monkeypatch: pytest.MonkeyPatch, view: Callable[[np.ndarray], np.ndarray]) -> None:
    def no_copy(arr: np.ndarray) -> np.ndarray:
        raise AssertionError("the adapter copied an aligned array")

    monkeypatch.setattr(onp, "_aligned_copy", no_copy)
    x = view(base(np.float32))
    np.testing.assert_array_equal(onp.relu(x), ref_relu(x))
    out = np.zeros((x.shape[1], x.shape[0]), np.float32).T if x.ndim == 2 else np.zeros(x.shape, np.float32)
    onp.add(x, x, out=out)
    np.testing.assert_array_equal(out, x + x)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_dense_strided_inputs(dtype: Any) -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((20, 13)).astype(dtype)[::-2].T  # [13, 10], negative and non-unit strides
    w = np.asfortranarray(rng.standard_normal((10, 7)).astype(dtype))
    b = np.broadcast_to(dtype(0.5), (7,))
    y = onp.dense(x, w, b, activation="relu")
    np.testing.assert_allclose(y, ref_dense(x, w, b, "relu"), rtol=1e-4 if dtype == np.float32 else 1e-12, atol=1e-5)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_misaligned_inputs_and_outputs(dtype: Any) -> None:
    x = misaligned(base(dtype, 4))
    dy = misaligned(base(dtype, 5))
    np.testing.assert_array_equal(onp.relu(x), ref_relu(x))
    np.testing.assert_array_equal(onp.relu_grad(dy, x), ref_relu_grad(dy, x))
    out = misaligned(np.zeros((6, 8), dtype))
    assert onp.add(x, dy, out=out) is out
    np.testing.assert_array_equal(out, x + dy)
    expected = ref_relu(x)
    assert onp.relu_(x) is x
    np.testing.assert_array_equal(x, expected)


def test_misaligned_dense() -> None:
    rng = np.random.default_rng(6)
    x = misaligned(rng.standard_normal((9, 5)), 3)
    w = misaligned(rng.standard_normal((5, 4)), 5)
    np.testing.assert_allclose(onp.dense(x, w), x @ w, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_out_is_used_and_returned(dtype: Any) -> None:
    x = base(dtype)
    out = np.empty_like(x)
    assert onp.relu(x, out=out) is out
    np.testing.assert_array_equal(out, ref_relu(x))
    strided_out = np.zeros((6, 16), dtype)[:, ::2]
    assert onp.scale(x, alpha=2.0, out=strided_out) is strided_out
    np.testing.assert_array_equal(strided_out, x * dtype(2))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_exact_in_place_elementwise(dtype: Any) -> None:
    x = base(dtype)
    expected = ref_relu(x)
    assert onp.relu(x, out=x) is x
    np.testing.assert_array_equal(x, expected)
    a, b = base(dtype, 1), base(dtype, 2)
    expected = a + b
    onp.add(a, b, out=b)
    np.testing.assert_array_equal(b, expected)
    view = base(dtype, 3)[::-1, 1::2]  # the same strided view in and out
    expected = ref_relu(view)
    onp.relu(view, out=view)
    np.testing.assert_array_equal(view, expected)


def test_dense_grad_out_tuple() -> None:
    rng = np.random.default_rng(8)
    x, w, dy = (rng.standard_normal(s) for s in [(6, 4), (4, 3), (6, 3)])
    outs = (np.empty((6, 4)), np.empty((4, 3)), np.empty(3))
    result = onp.dense_grad(dy, x, w, out=outs)
    assert all(r is o for r, o in zip(result, outs))
    np.testing.assert_allclose(outs[1], x.T @ dy, rtol=1e-12)


def test_broadcast_out_is_rejected() -> None:
    x = base(np.float64)[0]
    target = np.zeros(1)
    writable_broadcast = np.lib.stride_tricks.as_strided(target, shape=(8,), strides=(0,))
    with pytest.raises(ValueError, match=r"relu.*out \(y\).*broadcast"):
        onp.relu(x, out=writable_broadcast)
    with pytest.raises(ValueError, match="read-only"):
        onp.relu(x, out=np.broadcast_to(target, (8,)))


@pytest.mark.parametrize("make_out", [lambda x: x[:, ::-1], lambda x: x[::-1]], ids=["reversed columns", "reversed rows"])
def test_same_memory_other_order_is_rejected(make_out: Callable[[np.ndarray], np.ndarray]) -> None:
    x = base(np.float64)
    with pytest.raises(ValueError, match="overlap"):
        onp.relu(x, out=make_out(x))


def test_shifted_overlap_is_rejected() -> None:
    buffer = np.arange(-10.0, 10.0)
    with pytest.raises(ValueError, match="overlap"):
        onp.relu(buffer[:-1], out=buffer[1:])
    with pytest.raises(ValueError, match="overlap"):
        onp.add(buffer[:10], buffer[10:], out=buffer[5:15])


def test_dense_out_overlapping_input_is_rejected() -> None:
    x = np.ones((4, 4))
    with pytest.raises(ValueError, match="overlap"):
        onp.dense(x, np.eye(4), out=x)


def test_overlapping_outputs_are_rejected() -> None:
    rng = np.random.default_rng(9)
    x, w, dy = (rng.standard_normal(s) for s in [(4, 4), (4, 4), (4, 4)])
    shared = np.empty((4, 4))
    with pytest.raises(ValueError, match="overlap"):
        onp.dense_grad(dy, x, w, out=(shared, shared, None))


def test_python_scalars_and_lists_take_the_other_arguments_dtype() -> None:
    a = np.array([1.5, -2.0], np.float32)
    result = onp.add(a, [1, 2])
    assert result.dtype == np.float32
    np.testing.assert_array_equal(result, [2.5, 0.0])
    assert onp.relu([-1.0, 2.0]).dtype == np.float64  # no typed argument: float64, as np.asarray
    assert onp.relu(-3.0).shape == ()
    assert onp.relu([1, 2], out=np.empty(2, np.float32)).dtype == np.float32  # out= decides
