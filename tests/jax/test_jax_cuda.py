"""The CUDA targets (opf_op_run_cuda on XLA's stream), where jax has a GPU and libopforge was built with CUDA."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from references import FLOAT_DTYPES, assert_matmul_close

import opforge
import opforge.jax as oj


def _gpus() -> list[Any]:
    try:
        return jax.devices("cuda")
    except RuntimeError:
        return []


pytestmark = pytest.mark.skipif(
    not _gpus() or opforge.info()["cuda_devices"] == 0, reason="needs a CUDA device for both jax and libopforge"
)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_elementwise_on_gpu(dtype: Any) -> None:
    gpu = _gpus()[0]
    x = jax.device_put(jnp.asarray(np.random.default_rng(0).standard_normal((1000, 33)).astype(dtype)), gpu)
    y = jax.device_put(jnp.asarray(np.random.default_rng(1).standard_normal((1000, 33)).astype(dtype)), gpu)
    for f, g in [
        (oj.relu, jax.nn.relu),
        (lambda v: oj.scale(v, alpha=-1.5), lambda v: v * jnp.asarray(-1.5, dtype)),
        (lambda v: oj.add(v, y), lambda v: v + y),
        (lambda v: oj.relu_grad(y, v), lambda v: jnp.where(v <= 0, jnp.zeros_like(y), y)),
    ]:
        got = jax.jit(f)(x)
        assert got.devices() == {gpu}
        np.testing.assert_array_equal(np.asarray(got), np.asarray(g(x)))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_dense_and_grad_on_gpu(dtype: Any) -> None:
    gpu = _gpus()[0]
    rng = np.random.default_rng(2)
    x, w, b = (jax.device_put(jnp.asarray(rng.standard_normal(s).astype(dtype)), gpu)
                for s in [(64, 96), (96, 48), (48,)])
    y = jax.jit(lambda x, w, b: oj.dense(x, w, b, activation="relu"))(x, w, b)
    xs, ws, bs = (np.asarray(a, np.float64) for a in (x, w, b))
    assert_matmul_close(np.asarray(y), np.maximum(xs @ ws + bs, 0), np.abs(xs) @ np.abs(ws) + np.abs(bs), 96)
    dw = jax.jit(jax.grad(lambda w: oj.dense(x, w, b, activation="relu").sum()))(w)
    dz = (xs @ ws + bs > 0).astype(np.float64)
    assert_matmul_close(np.asarray(dw), xs.T @ dz, np.abs(xs).T @ dz, 64)
