"""Every op against the JAX built-in that computes the same thing, eagerly and under jit."""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from references import FLOAT_DTYPES, assert_matmul_close

import opforge.jax as oj

MODES = ["eager", "jit"]
SHAPES = [(), (0,), (1,), (17,), (3, 5), (2, 3, 4), (4, 0, 3), (1000, 33)]


def run(mode: str, f: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """f(*args, **kwargs) eagerly, or jitted with kwargs closed over."""
    if mode == "eager":
        return f(*args, **kwargs)
    return jax.jit(lambda *a: f(*a, **kwargs))(*args)


def random(shape: tuple[int, ...], dtype: Any, seed: int = 0) -> np.ndarray:
    """Random normal values with the edge cases sprinkled in (when there is room)."""
    x = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 3e38, -3e38], dtype)
    if flat.size >= 2 * specials.size:
        flat[: specials.size] = specials
    return x


def assert_same(actual: Any, expected: Any) -> None:
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    np.testing.assert_array_equal(actual, expected)  # NaN == NaN here


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_relu(mode: str, dtype: Any, shape: tuple[int, ...]) -> None:
    x = jnp.asarray(random(shape, dtype))
    assert_same(run(mode, oj.relu, x), jax.nn.relu(x))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_relu_in_place_returns_new_value(mode: str, dtype: Any, shape: tuple[int, ...]) -> None:
    x = jnp.asarray(random(shape, dtype))
    before = np.array(x)
    assert_same(run(mode, oj.relu_, x), jax.nn.relu(x))
    assert_same(x, before)  # a JAX array is never written in place


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_relu_grad(mode: str, dtype: Any, shape: tuple[int, ...]) -> None:
    dy, x = jnp.asarray(random(shape, dtype, 1)), jnp.asarray(random(shape, dtype, 2))
    _, vjp = jax.vjp(jax.nn.relu, x)
    expected = jnp.where(x <= 0, jnp.zeros_like(dy), dy)  # PyTorch's convention: a NaN x passes dy
    assert_same(run(mode, oj.relu_grad, dy, x), expected)
    finite = jnp.isfinite(x) & (x != 0)  # where jax.nn.relu's own VJP agrees on the convention
    np.testing.assert_array_equal(np.asarray(oj.relu_grad(dy, x))[finite], np.asarray(vjp(dy)[0])[finite])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("alpha", [1.0, -2.5, 0.0, 1e-3])
def test_scale(mode: str, dtype: Any, shape: tuple[int, ...], alpha: float) -> None:
    x = jnp.asarray(random(shape, dtype))
    assert_same(run(mode, oj.scale, x, alpha=alpha), x * jnp.asarray(alpha, dtype))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_scale_default_and_integer_alpha(dtype: Any) -> None:
    x = jnp.asarray(random((7,), dtype))
    assert_same(oj.scale(x), x)
    assert_same(oj.scale(x, alpha=3), x * jnp.asarray(3, dtype))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_add(mode: str, dtype: Any, shape: tuple[int, ...]) -> None:
    a, b = jnp.asarray(random(shape, dtype, 1)), jnp.asarray(random(shape, dtype, 2))
    assert_same(run(mode, oj.add, a, b), a + b)
    assert_same(run(mode, oj.add, a, a), a + a)  # the same array twice


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_python_numbers_take_the_array_dtype(dtype: Any) -> None:
    a = jnp.asarray(random((4,), dtype))
    assert_same(oj.add(a, [1.5] * 4), a + jnp.asarray(1.5, dtype))
    assert_same(oj.scale(2.0, alpha=0.5), jnp.asarray(1.0))  # no array: the default float dtype
    assert_same(oj.add([1.0, -2.0], [3.0, 4.0]), jnp.asarray([4.0, 2.0]))


def dense_reference(x: jax.Array, w: jax.Array, b: Any, activation: str) -> tuple[np.ndarray, np.ndarray]:
    """jnp's x @ w + b in float64 (highest precision), and |x| @ |w| + |b| for the error bound."""
    f64 = lambda a: jnp.asarray(a, jnp.float64)  # noqa: E731
    y = jnp.matmul(f64(x), f64(w), precision=jax.lax.Precision.HIGHEST)
    magnitude = jnp.matmul(jnp.abs(f64(x)), jnp.abs(f64(w)), precision=jax.lax.Precision.HIGHEST)
    if b is not None:
        y, magnitude = y + f64(b), magnitude + jnp.abs(f64(b))
    if activation == "relu":
        y = jax.nn.relu(y)
    return np.asarray(y), np.asarray(magnitude)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("activation", ["none", "relu"])
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("n,k,m", [(1, 1, 1), (7, 5, 3), (64, 96, 48), (0, 4, 3), (3, 0, 2), (130, 257, 17)])
def test_dense(mode: str, dtype: Any, activation: str, with_bias: bool, n: int, k: int, m: int) -> None:
    rng = np.random.default_rng(n * 1000 + k * 10 + m)
    x = jnp.asarray(rng.standard_normal((n, k)).astype(dtype))
    w = jnp.asarray(rng.standard_normal((k, m)).astype(dtype))
    b = jnp.asarray(rng.standard_normal(m).astype(dtype)) if with_bias else None
    y = run(mode, oj.dense, x, w, b, activation=activation)
    assert y.dtype == dtype and y.shape == (n, m)
    expected, magnitude = dense_reference(x, w, b, activation)
    assert_matmul_close(np.asarray(y), expected, magnitude, k)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_dense_propagates_nan_and_inf(dtype: Any) -> None:
    x = jnp.asarray(np.array([[np.nan, 1.0], [np.inf, 1.0], [1.0, 2.0]], dtype))
    w = jnp.asarray(np.array([[1.0, 0.0], [0.0, 1.0]], dtype))
    y = np.asarray(oj.dense(x, w))
    expected = np.asarray(jnp.matmul(x, w, precision=jax.lax.Precision.HIGHEST))
    np.testing.assert_array_equal(y, expected)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("activation", ["none", "relu"])
def test_dense_grad(mode: str, dtype: Any, activation: str) -> None:
    rng = np.random.default_rng(3)
    n, k, m = 33, 20, 9
    x = jnp.asarray(rng.standard_normal((n, k)).astype(dtype))
    w = jnp.asarray(rng.standard_normal((k, m)).astype(dtype))
    dy = jnp.asarray(rng.standard_normal((n, m)).astype(dtype))
    y = jax.nn.relu(x @ w) if activation == "relu" else x @ w
    dx, dw, db = run(mode, oj.dense_grad, dy, x, w, y, activation=activation)
    dz = jnp.asarray(dy, jnp.float64) * ((y > 0) if activation == "relu" else 1.0)
    hi = jax.lax.Precision.HIGHEST
    f64 = lambda a: jnp.asarray(a, jnp.float64)  # noqa: E731
    dz_abs = jnp.abs(dz)
    assert_matmul_close(np.asarray(dx), np.asarray(jnp.matmul(dz, f64(w).T, precision=hi)),
                        np.asarray(jnp.matmul(dz_abs, jnp.abs(f64(w)).T, precision=hi)), m)  # fmt: skip
    assert_matmul_close(np.asarray(dw), np.asarray(jnp.matmul(f64(x).T, dz, precision=hi)),
                        np.asarray(jnp.matmul(jnp.abs(f64(x)).T, dz_abs, precision=hi)), n)  # fmt: skip
    assert_matmul_close(np.asarray(db), np.asarray(dz.sum(0)), np.asarray(dz_abs.sum(0)), n)


def test_float32_inputs_give_float32_under_x64() -> None:
    x = jnp.ones((3,), jnp.float32)
    assert oj.relu(x).dtype == jnp.float32
    assert oj.scale(x, alpha=0.1).dtype == jnp.float32


def test_functions_are_generated_from_the_table() -> None:
    import inspect

    import opforge._table as table

    names = [op.name for op in table.builtin_table().ops]
    assert set(names) <= set(oj.__all__)
    for name in names:
        function = getattr(oj, name)
        assert function.__name__ == name and function.__doc__
    assert str(inspect.signature(oj.dense)).replace("'", "") == (
        "(x: ArrayLike, w: ArrayLike, b: ArrayLike = None, *, activation: str = none) -> jax.Array"
    )
    assert oj.target_name(table.builtin_table(), table.builtin_table().ops[0]) == f"opforge.{names[0]}"


def test_handlers_report_the_installed_jaxlib_api_version() -> None:
    import re
    from pathlib import Path

    header = (Path(jax.ffi.include_dir()) / "xla" / "ffi" / "api" / "c_api.h").read_text()
    major = int(re.search(r"#define XLA_FFI_API_MAJOR (\d+)", header).group(1))  # type: ignore[union-attr]
    minor = int(re.search(r"#define XLA_FFI_API_MINOR (\d+)", header).group(1))  # type: ignore[union-attr]
    assert oj.ffi_api_version() == (major, minor)


def test_large_input_runs_on_the_thread_pool() -> None:
    x = jnp.asarray(np.random.default_rng(5).standard_normal(3_000_001).astype(np.float32))
    assert_same(jax.jit(oj.relu)(x), jax.nn.relu(x))


def test_outputs_written_over_inputs_never_clobber_live_values() -> None:
    # Elementwise rows let XLA reuse an input's buffer for the output; XLA
    # must copy whenever that input is still needed.
    x = jnp.asarray(random((1000,), np.float32))
    both = jax.jit(lambda v: (oj.relu(v), v, oj.add(oj.relu(v), v), oj.scale(v, alpha=2.0)))(x)
    assert_same(both[0], jax.nn.relu(x))
    assert_same(both[1], x)
    assert_same(both[2], jax.nn.relu(x) + x)
    assert_same(both[3], x * 2)
    looped = jax.jit(lambda v: jax.lax.fori_loop(0, 3, lambda i, u: oj.add(oj.scale(u, alpha=0.5), v), v))(x)
    expected = x
    for _ in range(3):
        expected = expected * np.float32(0.5) + x
    assert_same(looped, expected)
    assert_same(x, np.asarray(random((1000,), np.float32)))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_transposed_sliced_and_reversed_operands(dtype: Any) -> None:
    # XLA hands the target row-major buffers (ffi_call's default layout) of
    # whatever view the program computes: the views are materialized first.
    x = jnp.asarray(random((40, 30), dtype, 7))
    views = jax.jit(lambda x: (oj.relu(x.T), oj.add(x[::2, ::-1], x[1::2, :]), oj.scale(x[:, 3], alpha=2.0)))(x)
    assert_same(views[0], jax.nn.relu(x.T))
    assert_same(views[1], x[::2, ::-1] + x[1::2, :])
    assert_same(views[2], x[:, 3] * 2)
    rng = np.random.default_rng(9)
    clean, w = (jnp.asarray(rng.standard_normal(s).astype(dtype)) for s in [(40, 30), (40, 20)])  # finite
    y = jax.jit(lambda x, w: oj.dense(x.T, w[::-1, ::2]))(clean, w)
    expected, magnitude = dense_reference(clean.T, w[::-1, ::2], None, "none")
    assert_matmul_close(np.asarray(y), expected, magnitude, 40)
