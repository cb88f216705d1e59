"""The CUDA targets (opf_op_run_cuda on XLA's stream), where jax has a GPU and libopforge was built with CUDA.

conftest.py makes the CPU jax's default device, so every array here is put on
the GPU explicitly (``jax.device_put(..., gpu)``); a computation runs where its
committed operands are, and each test checks that its results are on the GPU.
The references are jax's own built-ins, run on the same GPU.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

try:  # without them: a skip (an error under OPFORGE_REQUIRE_FRAMEWORKS=1, see conftest.py)
    import jax
    import jax.numpy as jnp
    import numpy as np
    from references import FLOAT_DTYPES, assert_matmul_close

    import opforge.jax as oj
except ImportError as exc:
    pytest.skip(f"opforge.jax unavailable: {exc}", allow_module_level=True)

import opforge  # noqa: E402

HIGHEST = jax.lax.Precision.HIGHEST  # float32 GEMMs in float32, not TF32


def _gpus() -> list[Any]:
    try:
        return jax.devices("cuda")
    except RuntimeError:
        return []


pytestmark = pytest.mark.skipif(
    not _gpus() or opforge.info()["cuda_devices"] == 0, reason="needs a CUDA device for both jax and libopforge"
)


def _on_gpu(a: np.ndarray) -> jax.Array:
    return jax.device_put(a, _gpus()[0])


def _random(shape: tuple[int, ...], dtype: Any, seed: int, special: bool = False) -> np.ndarray:
    a = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    if special and a.size:
        flat = a.reshape(-1)
        values = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0], dtype)
        flat[: min(flat.size, values.size)] = values[: flat.size]
    return a


def _assert_on_gpu(*arrays: jax.Array) -> None:
    for a in arrays:
        assert a.devices() == {_gpus()[0]}, a.devices()


def test_cuda_targets_are_compiled_in() -> None:
    """The GPU executable calls opforge's FFI target (not some fallback)."""
    x = _on_gpu(np.ones((4, 4), np.float32))
    text = jax.jit(oj.relu).lower(x).compile().as_text()
    assert "opforge.relu" in text


ELEMENTWISE: list[tuple[str, Callable[..., Any], Callable[..., Any]]] = [
    ("relu", lambda x, y: oj.relu(x), lambda x, y: jax.nn.relu(x)),
    ("relu_", lambda x, y: oj.relu_(x), lambda x, y: jax.nn.relu(x)),
    ("scale", lambda x, y: oj.scale(x, alpha=-1.5), lambda x, y: x * jnp.asarray(-1.5, x.dtype)),
    ("add", lambda x, y: oj.add(x, y), lambda x, y: x + y),
    ("relu_grad", lambda x, y: oj.relu_grad(y, x), lambda x, y: jnp.where(x <= 0, jnp.zeros_like(y), y)),
]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name,op,builtin", ELEMENTWISE, ids=[e[0] for e in ELEMENTWISE])
def test_elementwise_matches_jax(name: str, op: Callable[..., Any], builtin: Callable[..., Any], dtype: Any) -> None:
    for shape in [(0,), (1,), (17,), (1000, 33), (2, 3, 4), ((1 << 20) + 3,)]:
        x = _on_gpu(_random(shape, dtype, 0, special=True))
        y = _on_gpu(_random(shape, dtype, 1, special=True))
        want = builtin(x, y)
        for got in (op(x, y), jax.jit(op)(x, y)):  # eager and jit
            _assert_on_gpu(got)
            assert got.dtype == want.dtype and got.shape == want.shape
            # Exact: the kernels are bit-identical to jax's (NaN payloads aside).
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=f"{name} {shape}")


def _dense_reference(x: jax.Array, w: jax.Array, b: jax.Array, activation: str) -> jax.Array:
    y = jnp.matmul(x, w, precision=HIGHEST) + b
    return jax.nn.relu(y) if activation == "relu" else y


def _magnitude(x: jax.Array, w: jax.Array, b: jax.Array) -> np.ndarray:
    xs, ws, bs = (np.abs(np.asarray(a, np.float64)) for a in (x, w, b))
    return xs @ ws + bs


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("activation", ["none", "relu"])
def test_dense_matches_jax(dtype: Any, activation: str) -> None:
    for n, k, m in [(1, 1, 1), (7, 13, 5), (64, 96, 48), (130, 257, 17)]:
        x, w, b = (_on_gpu(_random(s, dtype, seed)) for seed, s in enumerate([(n, k), (k, m), (m,)]))
        want = np.asarray(_dense_reference(x, w, b, activation), np.float64)
        for got in (oj.dense(x, w, b, activation=activation),
                    jax.jit(lambda x, w, b: oj.dense(x, w, b, activation=activation))(x, w, b)):  # fmt: skip
            _assert_on_gpu(got)
            assert_matmul_close(np.asarray(got), want, _magnitude(x, w, b), k)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("activation", ["none", "relu"])
def test_dense_grad_matches_jax_vjp(dtype: Any, activation: str) -> None:
    n, k, m = 33, 20, 9
    x, w, b, dy = (_on_gpu(_random(s, dtype, seed)) for seed, s in enumerate([(n, k), (k, m), (m,), (n, m)]))
    y, vjp = jax.vjp(lambda x, w, b: _dense_reference(x, w, b, activation), x, w, b)
    want = vjp(dy)
    got = jax.jit(lambda dy, x, w, y: oj.dense_grad(dy, x, w, y, activation=activation))(dy, x, w, y)
    _assert_on_gpu(*got)
    dz = np.abs(np.asarray(dy, np.float64)) * (np.asarray(y) > 0 if activation == "relu" else 1.0)
    xs, ws = (np.abs(np.asarray(a, np.float64)) for a in (x, w))
    assert_matmul_close(np.asarray(got[0]), np.asarray(want[0], np.float64), dz @ ws.T, m)
    assert_matmul_close(np.asarray(got[1]), np.asarray(want[1], np.float64), xs.T @ dz, n)
    assert_matmul_close(np.asarray(got[2]), np.asarray(want[2], np.float64), dz.sum(0), n)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_grad_through_the_cuda_kernels(dtype: Any) -> None:
    """jax.grad (custom_vjp from the row's gradient rules: relu_grad, dense_grad) vs jax.grad of the built-ins."""
    x, w, b = (_on_gpu(_random(s, dtype, seed + 3)) for seed, s in enumerate([(64, 96), (96, 48), (48,)]))

    def ours(x: jax.Array, w: jax.Array, b: jax.Array) -> jax.Array:
        h = oj.dense(x, w, b, activation="relu")
        return oj.scale(oj.add(oj.relu(oj.dense(x, w, b)), h), alpha=0.5).sum()

    def theirs(x: jax.Array, w: jax.Array, b: jax.Array) -> jax.Array:
        return _dense_reference(x, w, b, "relu").sum()

    got = jax.jit(jax.grad(ours, argnums=(0, 1, 2)))(x, w, b)
    want = jax.jit(jax.grad(theirs, argnums=(0, 1, 2)))(x, w, b)
    _assert_on_gpu(*got)
    y = np.asarray(_dense_reference(x, w, b, "relu"))
    dz = (y > 0).astype(np.float64)
    xs, ws = (np.abs(np.asarray(a, np.float64)) for a in (x, w))
    assert_matmul_close(np.asarray(got[0]), np.asarray(want[0], np.float64), dz @ ws.T, 48)
    assert_matmul_close(np.asarray(got[1]), np.asarray(want[1], np.float64), xs.T @ dz, 64)
    assert_matmul_close(np.asarray(got[2]), np.asarray(want[2], np.float64), dz.sum(0), 64)


def _jax_layer_norm(x: jax.Array, w: jax.Array, b: jax.Array) -> jax.Array:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / jnp.sqrt(var + 1e-5) * w + b


def _jax_rms_norm(x: jax.Array, w: jax.Array) -> jax.Array:
    return x / jnp.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * w


# The transformer ops on the GPU (their CUDA builds: elementwise kernels, and
# row kernels one thread per row with sums over rows added up in the CPU
# engine's order) against jax's own on the same GPU: values and jax.grad of
# every argument (the weights' gradients are sums over rows).
TRANSFORMER: dict[str, tuple[Callable[..., Any], Callable[..., Any], int]] = {
    "gelu": (lambda x, w, b: oj.gelu(x), lambda x, w, b: jax.nn.gelu(x, approximate=False), 1),
    "gelu_tanh": (lambda x, w, b: oj.gelu(x, approximate="tanh"), lambda x, w, b: jax.nn.gelu(x, approximate=True), 1),
    "silu": (lambda x, w, b: oj.silu(x), lambda x, w, b: jax.nn.silu(x), 1),
    "sigmoid": (lambda x, w, b: oj.sigmoid(x), lambda x, w, b: jax.nn.sigmoid(x), 1),
    "tanh": (lambda x, w, b: oj.tanh(x), lambda x, w, b: jnp.tanh(x), 1),
    "softmax": (lambda x, w, b: oj.softmax(x), lambda x, w, b: jax.nn.softmax(x, axis=-1), 1),
    "log_softmax": (lambda x, w, b: oj.log_softmax(x), lambda x, w, b: jax.nn.log_softmax(x, axis=-1), 1),
    "mul_broadcast": (lambda x, w, b: oj.mul(x, w), lambda x, w, b: x * w, 2),
    "add_broadcast": (lambda x, w, b: oj.add(w, x), lambda x, w, b: w + x, 2),
    "layer_norm": (lambda x, w, b: oj.layer_norm(x, w, b)[0], _jax_layer_norm, 3),
    "rms_norm": (lambda x, w, b: oj.rms_norm(x, w, eps=1e-6)[0], lambda x, w, b: _jax_rms_norm(x, w), 2),
}


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", TRANSFORMER)
def test_transformer_ops_match_jax(name: str, dtype: Any) -> None:
    ours, theirs, args = TRANSFORMER[name]
    tolerance = {"rtol": 1e-4, "atol": 1e-4} if dtype == np.float32 else {"rtol": 1e-10, "atol": 1e-10}
    for rows, m in ((513, 96), (2, 4097), (0, 8)):
        x, w, b = (_on_gpu(_random(s, dtype, seed)) for seed, s in enumerate([(rows, m), (m,), (m,)]))
        got, want = jax.jit(ours)(x, w, b), jax.jit(theirs)(x, w, b)
        _assert_on_gpu(got)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), **tolerance)
        argnums = tuple(range(args))
        loss_ours = lambda x, w, b: (jnp.sin(ours(x, w, b))).sum()  # noqa: E731
        loss_theirs = lambda x, w, b: (jnp.sin(theirs(x, w, b))).sum()  # noqa: E731
        grads = jax.jit(jax.grad(loss_ours, argnums))(x, w, b)
        wanted = jax.jit(jax.grad(loss_theirs, argnums))(x, w, b)
        _assert_on_gpu(*grads)
        for g, e in zip(grads, wanted):
            np.testing.assert_allclose(np.asarray(g), np.asarray(e), **tolerance)
