"""Ops written with the authoring layer (examples/ops/myops.c) in NumPy: values
against NumPy on every layout a NumPy array can have, docs and errors."""

from __future__ import annotations

import shutil
from typing import Any, Callable

import numpy as np
import pytest
from oplib import compile_myops

import opforge.numpy as onp

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

FLOAT_DTYPES = [np.float32, np.float64]


@pytest.fixture(scope="module")
def myops(tmp_path_factory: pytest.TempPathFactory) -> onp.OpNamespace:
    return onp.load_ops(compile_myops(tmp_path_factory.mktemp("myops")))


def softplus(x: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):  # logaddexp(0, -inf) warns, and gives 0
        return np.logaddexp(np.zeros((), x.dtype), x)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return (1 / (1 + np.exp(-x.astype(np.float64)))).astype(x.dtype)


def views(rng: np.random.Generator, dtype: Any) -> dict[str, np.ndarray]:
    """Arrays of every layout: contiguous, transposed, sliced, reversed,
    broadcast (a zero stride), 0-d, empty, and one with a single row."""
    base = (rng.standard_normal((6, 40)) * 6).astype(dtype)
    return {
        "contiguous": base,
        "transposed": base.T,
        "sliced": base[1::2, 3:37:3],
        "reversed": base[::-1, ::-2],
        "broadcast": np.broadcast_to(base[2], (5, 40)),
        "0-d": np.asarray(base[0, 0]),
        "empty": base[:0],
        "one row": base[3],
    }


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_softplus_and_its_gradient(myops: onp.OpNamespace, dtype: Any) -> None:
    rtol = 2e-6 if dtype == np.float32 else 1e-13
    for name, x in views(np.random.default_rng(1), dtype).items():
        np.testing.assert_allclose(myops.softplus(x), softplus(x), rtol=rtol, atol=1e-30, err_msg=name)
        dy = np.ones_like(x)
        np.testing.assert_allclose(myops.softplus_grad(dy, x), sigmoid(x), rtol=rtol, atol=1e-30, err_msg=name)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_softplus_special_values(myops: onp.OpNamespace, dtype: Any) -> None:
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30, 88.0, -104.0, 710.0], dtype)
    with np.errstate(over="ignore"):
        np.testing.assert_allclose(myops.softplus(x), softplus(x), rtol=2e-6, atol=0)
        np.testing.assert_allclose(myops.softplus_grad(np.ones_like(x), x), sigmoid(x), rtol=2e-6, atol=0)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_my_op(myops: onp.OpNamespace, dtype: Any) -> None:
    for name, x in views(np.random.default_rng(2), dtype).items():
        np.testing.assert_array_equal(myops.my_op(x), x * dtype(2), err_msg=name)
        np.testing.assert_array_equal(myops.my_op(x, factor=-0.5), x * dtype(-0.5), err_msg=name)
    x = np.arange(12, dtype=dtype).reshape(3, 4)
    assert myops.my_op(x, factor=3.0, out=x) is x  # in place
    np.testing.assert_array_equal(x, np.arange(12, dtype=dtype).reshape(3, 4) * 3)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_rowsum(myops: onp.OpNamespace, dtype: Any) -> None:
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    for name, x in views(np.random.default_rng(3), dtype).items():
        if x.ndim == 0:
            continue
        np.testing.assert_allclose(myops.rowsum(x), x.sum(-1, dtype=np.float64), rtol=rtol, atol=1e-3, err_msg=name)
    x = np.random.default_rng(4).standard_normal((3, 4, 5)).astype(dtype)
    np.testing.assert_allclose(myops.rowsum(x.transpose(2, 0, 1)), x.transpose(2, 0, 1).sum(-1), rtol=rtol)
    dy = np.random.default_rng(5).standard_normal((3, 4)).astype(dtype)
    np.testing.assert_array_equal(myops.rowsum_grad(dy, x), np.broadcast_to(dy[..., None], x.shape))


def test_threads_do_not_change_results(myops: onp.OpNamespace) -> None:
    import opforge

    x = np.random.default_rng(6).standard_normal((300, 4096)).astype(np.float32)
    threads = opforge.get_num_threads()
    try:
        opforge.set_num_threads(1)
        one = myops.rowsum(x), myops.softplus(x)
        opforge.set_num_threads(2)
        two = myops.rowsum(x), myops.softplus(x)
    finally:
        opforge.set_num_threads(threads)
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda m: m.rowsum(np.float32(1)), ValueError, r"myops\.rowsum: x must have rank 1 or more, got rank 0"),
        (lambda m: m.softplus(np.ones(3, np.int32)), TypeError, r"myops\.softplus: x has dtype int32"),
        (lambda m: m.softplus_grad(np.ones(3), np.ones(4)), ValueError, r"myops\.softplus_grad: shape mismatch"),
        (lambda m: m.rowsum_grad(np.ones(3), np.ones((4, 5))), ValueError, r"myops\.rowsum_grad: shape mismatch"),
        (lambda m: m.my_op(np.ones(3), factor="x"), TypeError, r"myops\.my_op: factor must be a real number"),
    ],
)
def test_errors_name_the_op(myops: onp.OpNamespace, call: Callable[[Any], Any], error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        call(myops)


def test_generated_docs(myops: onp.OpNamespace) -> None:
    doc = myops.rowsum.__doc__ or ""
    assert "Sum over the last axis." in doc
    assert myops.__opforge_table__.find("rowsum").signature == "rowsum(x[..., M]) -> y[...]"


@pytest.mark.slow
def test_authored_op_over_2_pow_31_elements(myops: onp.OpNamespace) -> None:
    """8 GiB of float32 through an authored kernel, in place (OPFORGE_BIG_TESTS=1)."""
    n = 2**31 + 5
    x = np.zeros(n, np.float32)
    probes = np.array([0, 1, 2**31 - 2, 2**31 - 1, 2**31, 2**31 + 1, n - 1])
    x[probes] = np.arange(1, probes.size + 1, dtype=np.float32)
    assert myops.my_op(x, factor=3.0, out=x) is x
    np.testing.assert_array_equal(x[probes], 3 * np.arange(1, probes.size + 1))
    x[probes] = 0
    assert not x.any()
