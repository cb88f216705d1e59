"""How opforge.numpy calls the library: the direct path of common calls, the
C memory it reuses between calls, and errors that read the same on every path."""

from __future__ import annotations

import gc
import threading
import weakref
from typing import Any, Callable, Iterator

import numpy as np
import pytest
from references import FLOAT_DTYPES, ref_relu

import opforge.numpy as onp


@pytest.fixture
def generic_path_forbidden(monkeypatch: pytest.MonkeyPatch) -> None:
    """Makes the generic path (argument binding in Python) fail."""

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the call took the generic path")

    monkeypatch.setattr(onp._Binder, "__call__", forbidden)


@pytest.mark.usefixtures("generic_path_forbidden")
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_common_calls_take_the_direct_path(dtype: Any) -> None:
    x = np.linspace(-2, 2, 12, dtype=dtype).reshape(3, 4)
    y = np.empty_like(x)
    assert onp.relu(x, out=y) is y
    np.testing.assert_array_equal(y, ref_relu(x))
    np.testing.assert_array_equal(onp.relu(x.T[::-1]), ref_relu(x.T[::-1]))
    np.testing.assert_array_equal(onp.add(x, x), x + x)
    np.testing.assert_array_equal(onp.scale(x, alpha=2), x * 2)
    np.testing.assert_array_equal(onp.scale(x, alpha=0.5, out=y), x * dtype(0.5))
    np.testing.assert_allclose(onp.dense(x, x.T, None, activation=None), x @ x.T, rtol=1e-6)
    np.testing.assert_allclose(onp.dense(x, x.T, x[:, 0], activation="relu"), np.maximum(x @ x.T + x[:, 0], 0), rtol=1e-6)
    dx, dw, db = onp.dense_grad(x, x, np.eye(4, dtype=dtype), out=(None, onp.SKIP, None))
    assert dw is None and dx.shape == (3, 4) and db.shape == (4,)
    z = x.copy()
    assert onp.relu_(z) is z
    np.testing.assert_array_equal(z, ref_relu(x))


def test_reused_views_follow_every_change_of_layout() -> None:
    """The C structs of an op are reused call after call; each call must see
    its own shape, rank, strides, dtype and contiguity, never the last call's."""
    rng = np.random.default_rng(21)
    base = rng.standard_normal((6, 8))
    cases: list[np.ndarray] = [
        base,
        base.astype(np.float32),
        base[::2, 1::3],
        base.T,
        base.astype(np.float32)[::-1],
        base[0],
        base[:0],
        np.float64(-1.5) * np.ones(()),
        base.reshape(2, 3, 8),
        base.reshape(2, 3, 8)[:, ::-1, ::4],
        np.broadcast_to(base[1], (3, 8)),
        base.astype(np.float32).reshape(48),
        base[:, :1],
        base,
    ]
    for x in cases * 2:
        np.testing.assert_array_equal(onp.relu(x), ref_relu(x))
        out = np.zeros((x.shape[::-1]), x.dtype).T  # a transposed (strided) output
        assert onp.relu(x, out=out) is out
        np.testing.assert_array_equal(out, ref_relu(x))
        np.testing.assert_array_equal(onp.add(x, x), x + x)


def test_optional_arguments_come_and_go() -> None:
    rng = np.random.default_rng(22)
    x, w, b = rng.standard_normal((5, 3)), rng.standard_normal((3, 4)), rng.standard_normal(4)
    dy = rng.standard_normal((5, 4))
    for bias in (b, None, b, None):
        expected = x @ w + (0 if bias is None else bias)
        np.testing.assert_allclose(onp.dense(x, w, bias), expected, rtol=1e-12)
    for outs in ((None, None, None), (onp.SKIP, None, onp.SKIP), (None, onp.SKIP, None), (None, None, None)):
        result = onp.dense_grad(dy, x, w, out=outs)
        for entry, got, want in zip(outs, result, (dy @ w.T, x.T @ dy, dy.sum(axis=0))):
            if entry is onp.SKIP:
                assert got is None
            else:
                np.testing.assert_allclose(got, want, rtol=1e-12)


def test_calls_keep_no_array_alive() -> None:
    x = np.linspace(-1, 1, 8)
    y = np.empty_like(x)
    refs = [weakref.ref(x), weakref.ref(y)]
    onp.relu(x, out=y)
    result = onp.relu(x[::2])
    refs.append(weakref.ref(result))
    del x, y, result
    gc.collect()
    assert all(ref() is None for ref in refs)


def test_small_calls_from_many_threads() -> None:
    """Threads calling one op at once each get their own C structs (the C
    call runs without the GIL, so calls really overlap)."""
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        try:
            rng = np.random.default_rng(seed)
            x = rng.standard_normal(seed % 7 + 3).astype(FLOAT_DTYPES[seed % 2])
            y = np.empty_like(x)
            expected = ref_relu(x)
            for _ in range(2000):
                assert onp.relu(x, out=y) is y
                np.testing.assert_array_equal(y, expected)
                y[...] = np.nan
                np.testing.assert_array_equal(onp.add(x, x), x + x)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


@pytest.fixture
def frequent_gc() -> Iterator[None]:
    threshold = gc.get_threshold()
    gc.set_threshold(1, 1, 1)
    yield
    gc.set_threshold(*threshold)


@pytest.mark.usefixtures("frequent_gc")
def test_calls_from_inside_a_call() -> None:
    """Code run by the garbage collector (a gc callback here, a __del__
    elsewhere) may call an op in the middle of another call of it."""
    inner_x = np.linspace(-3, 3, 5).reshape(5, 1)[::-1]
    inner_calls: list[bool] = []
    busy = False

    def call_relu(phase: str, info: dict[str, Any]) -> None:
        nonlocal busy
        if busy or phase != "start":
            return
        busy = True
        try:
            inner_calls.append(np.array_equal(onp.relu(inner_x), ref_relu(inner_x)))
        finally:
            busy = False

    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    y = np.empty_like(x)
    gc.callbacks.append(call_relu)
    try:
        for _ in range(300):
            y[...] = np.nan
            assert onp.relu(x, out=y) is y
            np.testing.assert_array_equal(y, ref_relu(x))
            np.testing.assert_array_equal(onp.relu(x.T), ref_relu(x.T))
    finally:
        gc.callbacks.remove(call_relu)
    assert inner_calls and all(inner_calls)


# -- the same error on every path ------------------------------------------------

F64 = np.linspace(-1, 1, 6).reshape(2, 3)
BUFFER = np.arange(-10.0, 10.0)

# (direct call, the same call by keyword: the generic path)
BAD_CALLS: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {
    "out shape": (lambda: onp.relu(F64, out=np.empty((3, 2))), lambda: onp.relu(x=F64, out=np.empty((3, 2)))),
    "out dtype": (
        lambda: onp.relu(F64, out=np.empty((2, 3), np.float32)),
        lambda: onp.relu(x=F64, out=np.empty((2, 3), np.float32)),
    ),
    "shape mismatch": (lambda: onp.add(F64, F64.T), lambda: onp.add(a=F64, b=F64.T)),
    "inner dims": (lambda: onp.dense(F64, F64), lambda: onp.dense(x=F64, w=F64)),
    "rank": (lambda: onp.dense(F64[0], F64.T), lambda: onp.dense(x=F64[0], w=F64.T)),
    "rank above the limit": (lambda: onp.relu(np.ones((1,) * 17)), lambda: onp.relu(x=np.ones((1,) * 17))),
    "broadcast out": (
        lambda: onp.relu(F64[0], out=np.lib.stride_tricks.as_strided(np.zeros(1), (3,), (0,))),
        lambda: onp.relu(x=F64[0], out=np.lib.stride_tricks.as_strided(np.zeros(1), (3,), (0,))),
    ),
    "partial overlap": (
        lambda: onp.relu(BUFFER[:-1], out=BUFFER[1:]),
        lambda: onp.relu(x=BUFFER[:-1], out=BUFFER[1:]),
    ),
    "out overlaps input": (lambda: onp.dense(F64, F64.T, out=F64[:, :2]), lambda: onp.dense(x=F64, w=F64.T, out=F64[:, :2])),
    "outputs overlap": (
        lambda: onp.dense_grad(F64, F64, np.eye(3), out=(BUFFER[:6].reshape(2, 3), BUFFER[:9].reshape(3, 3), None)),
        lambda: onp.dense_grad(dy=F64, x=F64, w=np.eye(3), out=(BUFFER[:6].reshape(2, 3), BUFFER[:9].reshape(3, 3), None)),
    ),
    "skipped required output": (lambda: onp.relu(F64, out=onp.SKIP), lambda: onp.relu(x=F64, out=onp.SKIP)),
    "dense_grad relu without y": (
        lambda: onp.dense_grad(F64, F64, np.eye(3), activation="relu"),
        lambda: onp.dense_grad(dy=F64, x=F64, w=np.eye(3), activation="relu"),
    ),
    "huge alpha": (lambda: onp.scale(F64, alpha=10**400), lambda: onp.scale(x=F64, alpha=10**400)),
    "in place broadcast": (
        lambda: onp.relu_(np.lib.stride_tricks.as_strided(np.zeros(1), (3,), (0,))),
        lambda: onp.relu_(x=np.lib.stride_tricks.as_strided(np.zeros(1), (3,), (0,))),
    ),
}


@pytest.mark.parametrize("direct, generic", BAD_CALLS.values(), ids=BAD_CALLS.keys())
def test_errors_read_the_same_on_every_path(direct: Callable[[], Any], generic: Callable[[], Any]) -> None:
    with pytest.raises(Exception) as on_generic:
        generic()
    with pytest.raises(Exception) as on_direct:
        direct()
    assert (type(on_direct.value), str(on_direct.value)) == (type(on_generic.value), str(on_generic.value))
    assert str(on_direct.value).startswith("opforge.") or on_direct.type is OverflowError


def test_failed_calls_leave_later_calls_right() -> None:
    x = np.linspace(-1, 1, 6).reshape(2, 3)
    for direct, _ in BAD_CALLS.values():
        with pytest.raises(Exception):
            direct()
        np.testing.assert_array_equal(onp.relu(x), ref_relu(x))
        np.testing.assert_array_equal(onp.add(x, x), x + x)
