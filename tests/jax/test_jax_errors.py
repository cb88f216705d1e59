"""Bad input raises a Python exception naming the op, never crashes: first the
Python checks made while tracing, then the C handler's own checks, reached by
calling the XLA targets directly with what opforge.jax would never send."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import opforge.jax as oj


@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_int32_array(mode: str) -> None:
    x = jnp.arange(6, dtype=jnp.int32)
    f = oj.relu if mode == "eager" else jax.jit(oj.relu)
    with pytest.raises(TypeError, match=r"opforge\.jax\.relu: x has dtype int32; expected float32 or float64"):
        f(x)


def test_other_bad_dtypes() -> None:
    with pytest.raises(TypeError, match=r"opforge\.jax\.add: b has dtype float32 but a has dtype float64"):
        oj.add(jnp.ones(3, jnp.float64), jnp.ones(3, jnp.float32))
    with pytest.raises(TypeError, match=r"opforge\.jax\.scale: x has dtype bfloat16"):
        oj.scale(jnp.ones(3, jnp.bfloat16))
    with pytest.raises(TypeError, match=r"opforge\.jax\.relu: x has dtype complex64"):
        oj.relu(jnp.ones(3, jnp.complex64))
    with pytest.raises(TypeError, match=r"opforge\.jax\.relu: x must be an array, got a bool"):
        oj.relu(True)
    with pytest.raises(TypeError, match=r"opforge\.jax\.relu: x must be an array, got str"):
        oj.relu("1.0")


@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_mismatched_add_shapes(mode: str) -> None:
    a, b = jnp.ones((2, 3)), jnp.ones((3, 2))
    f = oj.add if mode == "eager" else jax.jit(oj.add)
    with pytest.raises(ValueError, match=r"opforge\.jax\.add: shape mismatch: a is \[2,3\], b is \[3,2\]"):
        f(a, b)


def test_wrong_dense_ranks_and_dims() -> None:
    with pytest.raises(ValueError, match=r"opforge\.jax\.dense: .*x .*rank"):
        oj.dense(jnp.ones((2, 3, 4)), jnp.ones((4, 5)))
    with pytest.raises(ValueError, match=r"opforge\.jax\.dense: .*w .*rank"):
        oj.dense(jnp.ones((2, 3)), jnp.ones(3))
    with pytest.raises(ValueError, match=r"opforge\.jax\.dense: "):
        oj.dense(jnp.ones((2, 3)), jnp.ones((4, 5)))
    with pytest.raises(ValueError, match=r"opforge\.jax\.dense: "):
        oj.dense(jnp.ones((2, 3)), jnp.ones((3, 5)), jnp.ones(4))
    with pytest.raises(ValueError, match=r"opforge\.jax\.relu: x has rank 17"):
        oj.relu(jnp.ones((1,) * 17))


def test_bad_arguments_and_attributes() -> None:
    x = jnp.ones((2, 2))
    with pytest.raises(ValueError, match=r"opforge\.jax\.dense: activation must be one of 'none', 'relu', got 'gelu'"):
        oj.dense(x, x, activation="gelu")
    with pytest.raises(TypeError, match=r"opforge\.jax\.scale: alpha must be a float, got '2'"):
        oj.scale(x, alpha="2")
    with pytest.raises(TypeError, match=r"opforge\.jax\.scale: alpha must be a float, got True"):
        oj.scale(x, alpha=True)
    with pytest.raises(TypeError, match=r"opforge\.jax\.scale: alpha must be a float.*static"):
        jax.jit(oj.scale)(x, alpha=2.0)
    with pytest.raises(TypeError, match=r"opforge\.jax\.scale: .*unexpected keyword argument 'beta'"):
        oj.scale(x, beta=2.0)
    with pytest.raises(TypeError, match=r"opforge\.jax\.add: .*missing a required argument: 'b'"):
        oj.add(x)
    with pytest.raises(TypeError, match=r"opforge\.jax\.add: b is required, got None"):
        oj.add(x, None)
    assert oj.dense(x, x, activation=None).shape == (2, 2)  # None means "none"


# -- the C handler ---------------------------------------------------------------


def call_target(op: str, results: Any, *args: Any, **attrs: Any) -> Any:
    """The built-in row's XLA target called without opforge.jax's checks."""
    return jax.ffi.ffi_call(f"opforge.{op}", results, vmap_method="sequential")(*args, **attrs)


def handler_error(pattern: str) -> Any:
    """pytest.raises for the error the C handler returns (XLA's runtime error)."""
    return pytest.raises(jax.errors.JaxRuntimeError, match=pattern)


def run(op: str, results: Any, *args: Any, **attrs: Any) -> None:
    jax.block_until_ready(call_target(op, results, *args, **attrs))


def sds(shape: tuple[int, ...], dtype: Any = jnp.float32) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(shape, dtype)


def test_handler_rejects_int32() -> None:
    x = jnp.arange(4, dtype=jnp.int32)
    with handler_error(r"opforge\.jax\.relu: input x has dtype int32; expected float32 or float64"):
        run("relu", sds((4,), jnp.int32), x)
    with handler_error(r"opforge\.jax\.relu: output y has dtype int32"):
        run("relu", sds((4,), jnp.int32), jnp.ones(4, jnp.float32))


def test_handler_rejects_bad_shapes() -> None:
    with handler_error(r"opforge\.jax\.add: shape mismatch: a is \[2,3\], b is \[3,2\]"):
        run("add", sds((2, 3)), jnp.ones((2, 3), jnp.float32), jnp.ones((3, 2), jnp.float32))
    with handler_error(r"opforge\.jax\.dense: .*rank"):
        x3, w = jnp.ones((2, 3, 4), jnp.float32), jnp.ones((4, 5), jnp.float32)
        run("dense", sds((2, 5)), x3, w, opf_inputs=np.int64(3))
    with handler_error(r"opforge\.jax\.relu: .*y"):
        run("relu", sds((5,)), jnp.ones(4, jnp.float32))
    with handler_error(r"opforge\.jax\.add: .*dtype"):
        run("add", sds((3,)), jnp.ones(3, jnp.float32), jnp.ones(3, jnp.float64))


def test_handler_rejects_bad_counts_and_attributes() -> None:
    x = jnp.ones((2, 2), jnp.float32)
    with handler_error(r"opforge\.jax\.add: expected 2 operands and 1 results, got 1 and 1"):
        run("add", sds((2, 2)), x)
    with handler_error(r"opforge\.jax\.relu: unknown attribute 'alpha'"):
        run("relu", sds((2, 2)), x, alpha=np.float32(1))
    with handler_error(r"opforge\.jax\.scale: attribute alpha must be a float scalar"):
        run("scale", sds((2, 2)), x, alpha="2")
    with handler_error(r"opforge\.jax\.dense: activation must be one of 'none', 'relu', got 'tanh'"):
        run("dense", sds((2, 2)), x, x, activation="tanh", opf_inputs=np.int64(3))
    with handler_error(r"opforge\.jax\.dense: input x is required"):
        run("dense", sds((2, 2)), x, x, opf_inputs=np.int64(6))
    with handler_error(r"opforge\.jax\.dense: attribute opf_inputs must be an integer bit mask"):
        run("dense", sds((2, 2)), x, x, opf_inputs=np.int64(64))


def test_handler_takes_float32_and_float64_alpha() -> None:
    x = jnp.asarray([1.0, -2.0], jnp.float32)
    for alpha in (np.float32(0.5), np.float64(0.5), np.int32(2)):
        expected = x * jnp.float32(alpha)
        np.testing.assert_array_equal(call_target("scale", sds((2,)), x, alpha=alpha), expected)


def test_process_survives_errors() -> None:
    x = jnp.asarray([-1.0, 2.0])
    with pytest.raises(jax.errors.JaxRuntimeError):
        run("add", sds((2,), jnp.float64), x, jnp.ones(3))
    np.testing.assert_array_equal(oj.relu(x), jnp.asarray([0.0, 2.0]))
