"""Results do not depend on the thread count; tensors over 2^31 elements work."""

from __future__ import annotations

import threading
from typing import Any, Callable

import numpy as np
import pytest
from references import FLOAT_DTYPES

import opforge
import opforge.numpy as onp


def run_with_threads(num_threads: int, fn: Callable[[], Any]) -> Any:
    opforge.set_num_threads(num_threads)
    assert opforge.get_num_threads() == num_threads
    return fn()


@pytest.mark.usefixtures("restore_threads")
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_elementwise_bitwise_equal_for_1_and_2_threads(dtype: Any) -> None:
    rng = np.random.default_rng(11)
    x, b = (rng.standard_normal(1 << 20).astype(dtype) for _ in range(2))
    calls = [
        lambda: onp.relu(x),
        lambda: onp.relu_grad(b, x),
        lambda: onp.scale(x, alpha=0.3),
        lambda: onp.add(x, b),
    ]
    for call in calls:
        one, two = run_with_threads(1, call), run_with_threads(2, call)
        assert one.tobytes() == two.tobytes()


@pytest.mark.usefixtures("restore_threads")
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_dense_bitwise_equal_for_1_and_2_threads(dtype: Any) -> None:
    rng = np.random.default_rng(12)
    x = rng.standard_normal((300, 200)).astype(dtype)
    w = rng.standard_normal((200, 150)).astype(dtype)
    b = rng.standard_normal(150).astype(dtype)
    dy = rng.standard_normal((300, 150)).astype(dtype)
    for call in (
        lambda: (onp.dense(x, w, b, activation="relu"),),
        lambda: onp.dense_grad(dy, x, w, onp.dense(x, w, b, activation="relu"), activation="relu"),
    ):
        one, two = run_with_threads(1, call), run_with_threads(2, call)
        for a, c in zip(one, two):
            assert a.tobytes() == c.tobytes()


def test_set_num_threads_rejects_bad_values(restore_threads: None) -> None:
    with pytest.raises(ValueError):
        opforge.set_num_threads(0)
    with pytest.raises(TypeError):
        opforge.set_num_threads(1.5)  # type: ignore[arg-type]


def test_calls_from_python_threads_run_concurrently_and_correctly() -> None:
    """The C call runs without the GIL; concurrent callers each get their own result."""
    rng = np.random.default_rng(13)
    inputs = [rng.standard_normal((256, 256)) for _ in range(4)]
    results: list[Any] = [None] * len(inputs)

    def work(i: int) -> None:
        for _ in range(5):
            results[i] = onp.dense(inputs[i], inputs[i], activation="relu")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for x, y in zip(inputs, results):
        np.testing.assert_allclose(y, np.maximum(x @ x, 0), rtol=1e-10, atol=1e-10)


def test_reduction_over_more_than_2_pow_31_rows() -> None:
    """db of dense_grad sums 2^31 + 5 rows of a zero-stride (broadcast) dy:
    cheap in memory, and exact in float64, so int32 indexing anywhere shows."""
    n = 2**31 + 5
    dy = np.broadcast_to(np.ones((1, 1)), (n, 1))
    x = np.broadcast_to(np.ones((1, 1)), (n, 1))
    _, _, db = onp.dense_grad(dy, x, np.ones((1, 1)), out=(onp.SKIP, onp.SKIP, None))
    assert db.tolist() == [float(n)]


@pytest.mark.slow
def test_relu_in_place_over_2_pow_31_elements() -> None:
    """8 GiB of float32 (OPFORGE_BIG_TESTS=1)."""
    n = 2**31 + 5
    x = np.full(n, -1.0, np.float32)
    probes = np.array([0, 1, 2**31 - 2, 2**31 - 1, 2**31, 2**31 + 1, n - 1])
    x[probes] = np.arange(1, probes.size + 1, dtype=np.float32)
    assert onp.relu(x, out=x) is x
    np.testing.assert_array_equal(x[probes], np.arange(1, probes.size + 1))
    x[probes] = 0
    assert not x.any()
