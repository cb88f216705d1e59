"""The activations (opforge.jax.gelu, silu, sigmoid, tanh and their gradient rows)
against JAX's own: jax.nn.gelu (approximate False and True), jax.nn.silu,
jax.nn.sigmoid, jnp.tanh; values eager and under jit, derivatives to second
order in both modes (check_grads, hessian), vmap, special values, bad input."""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads
from references import FLOAT_DTYPES, assert_ulp_close, ref_activation

import opforge.jax as oj

# (name, opforge function, JAX's function)
PAIRS: list[tuple[str, Callable[..., jax.Array], Callable[..., jax.Array]]] = [
    ("gelu", lambda x: oj.gelu(x), lambda x: jax.nn.gelu(x, approximate=False)),
    ("gelu_tanh", lambda x: oj.gelu(x, approximate="tanh"), lambda x: jax.nn.gelu(x, approximate=True)),
    ("silu", lambda x: oj.silu(x), jax.nn.silu),
    ("sigmoid", lambda x: oj.sigmoid(x), jax.nn.sigmoid),
    ("tanh", lambda x: oj.tanh(x), jnp.tanh),
]
IDS = [p[0] for p in PAIRS]


def tolerance(dtype: Any) -> dict[str, float]:
    return {"rtol": 2e-6, "atol": 2e-6} if np.dtype(dtype) == np.float32 else {"rtol": 1e-12, "atol": 1e-13}


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name, ours, theirs", PAIRS, ids=IDS)
def test_values(name: str, ours: Callable[..., jax.Array], theirs: Callable[..., jax.Array], dtype: Any) -> None:
    x = jnp.linspace(-8, 8, 4001, dtype=dtype)
    for f in (ours, jax.jit(ours)):
        y = f(x)
        assert y.dtype == x.dtype
        np.testing.assert_allclose(y, theirs(x), **tolerance(dtype))
        assert_ulp_close(np.asarray(y), ref_activation(name, np.asarray(x))["f"], 8)
    xt = jnp.asarray(np.random.default_rng(0).standard_normal((6, 5)), dtype).T  # transposed
    np.testing.assert_allclose(jax.jit(ours)(xt), theirs(xt), **tolerance(dtype))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name, ours, theirs", PAIRS, ids=IDS)
def test_derivatives_match_jax(name: str, ours: Callable[..., jax.Array], theirs: Callable[..., jax.Array],
                               dtype: Any) -> None:
    """First and second derivatives (reverse over reverse, forward over reverse)
    against JAX's derivatives of its own functions (float32 within ±4: beyond, JAX's
    float32 tanh form loses its second derivative to cancellation)."""
    x = jnp.linspace(-6, 6, 1001, dtype=dtype) if np.dtype(dtype) == np.float64 else jnp.linspace(-4, 4, 801, dtype=dtype)
    tol = tolerance(dtype) if np.dtype(dtype) == np.float64 else {"rtol": 1e-5, "atol": 1e-5}
    d1 = lambda f: jax.grad(lambda v: jnp.sum(f(v)))  # noqa: E731
    np.testing.assert_allclose(jax.jit(d1(ours))(x), d1(theirs)(x), **tol)
    d2 = lambda f: jax.grad(lambda v: jnp.sum(d1(f)(v)))  # noqa: E731
    np.testing.assert_allclose(jax.jit(d2(ours))(x), d2(theirs)(x), **tol)
    hvp = lambda f: jax.jvp(d1(f), (x,), (jnp.ones_like(x),))[1]  # noqa: E731
    np.testing.assert_allclose(hvp(ours), hvp(theirs), **tol)
    t = jnp.asarray(np.random.default_rng(1).standard_normal(x.shape), dtype)
    np.testing.assert_allclose(jax.jvp(ours, (x,), (t,))[1], jax.jvp(theirs, (x,), (t,))[1], **tol)


@pytest.mark.parametrize("name, ours, theirs", PAIRS, ids=IDS)
def test_check_grads_second_order_both_modes(name: str, ours: Callable[..., jax.Array],
                                             theirs: Callable[..., jax.Array]) -> None:
    x = jnp.asarray(np.random.default_rng(2).standard_normal((4, 5)) * 2)
    for a in (x, x.T):
        check_grads(ours, (a,), order=2, modes=["fwd", "rev"])


def test_check_grads_of_the_gradient_rows() -> None:
    """The gradient rows themselves, first order in both modes (their rules name
    the grad_grad rows, which end the chain: a third order is not declared)."""
    rng = np.random.default_rng(3)
    dy, x = (jnp.asarray(rng.standard_normal((3, 4))) for _ in range(2))
    y = jax.nn.sigmoid(x)
    for approximate in ("none", "tanh"):
        check_grads(lambda a, b: oj.gelu_grad(a, b, approximate=approximate), (dy, x), order=1, modes=["fwd", "rev"])
    check_grads(oj.silu_grad, (dy, x), order=1, modes=["fwd", "rev"])
    check_grads(oj.sigmoid_grad, (dy, y), order=1, modes=["fwd", "rev"])
    check_grads(oj.tanh_grad, (dy, jnp.tanh(x)), order=1, modes=["fwd", "rev"])


def test_gradient_rows_against_jax() -> None:
    rng = np.random.default_rng(4)
    x, dy, ddx = (jnp.asarray(rng.standard_normal(257)) for _ in range(3))
    for approximate in (False, True):
        form = "tanh" if approximate else "none"
        f = lambda v, approximate=approximate: jax.nn.gelu(v, approximate=approximate)  # noqa: E731
        d1 = jax.vmap(jax.grad(f))(x)
        d2 = jax.vmap(jax.grad(jax.grad(f)))(x)
        np.testing.assert_allclose(oj.gelu_grad(dy, x, approximate=form), dy * d1, rtol=1e-12, atol=1e-13)
        ddy, gx = oj.gelu_grad_grad(ddx, dy, x, approximate=form)
        np.testing.assert_allclose(ddy, ddx * d1, rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(gx, ddx * dy * d2, rtol=1e-12, atol=1e-13)
    y = jax.nn.sigmoid(x)
    np.testing.assert_allclose(oj.sigmoid_grad(dy, y), dy * y * (1 - y), rtol=1e-14)
    t = jnp.tanh(x)
    np.testing.assert_allclose(oj.tanh_grad(dy, t), dy * (1 - t * t), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name, ours, theirs", PAIRS, ids=IDS)
def test_vmap(name: str, ours: Callable[..., jax.Array], theirs: Callable[..., jax.Array]) -> None:
    x = jnp.asarray(np.random.default_rng(5).standard_normal((3, 4, 5)))
    np.testing.assert_allclose(jax.vmap(ours)(x), theirs(x), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(jax.vmap(jax.grad(lambda v: jnp.sum(ours(v))))(x),
                               jax.vmap(jax.grad(lambda v: jnp.sum(theirs(v))))(x), rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_special_values(dtype: Any) -> None:
    """NaN and ±inf propagate as in JAX (gelu and silu of -inf are NaN, their
    derivatives NaN at ±inf); huge finite x gets the limits, where JAX's tanh
    form overflows x³ in its derivative."""
    x = jnp.asarray([np.nan, -np.inf, np.inf, 0.0, -0.0, 1e30, -1e30], dtype)
    for name, ours, theirs in PAIRS:
        np.testing.assert_array_equal(ours(x), theirs(x), err_msg=name)
        g = jax.vmap(jax.grad(ours))(x)
        want = np.array(jax.vmap(jax.grad(theirs))(x))
        if name == "gelu_tanh":
            want[5:] = [1.0, 0.0]  # JAX's x³ overflows at ±1e30 (NaN); the limits are 1, 0
        np.testing.assert_array_equal(g, want, err_msg=f"{name}'")


def test_bad_input() -> None:
    with pytest.raises(TypeError, match=r"opforge\.jax\.gelu: x has dtype int32; expected float32 or float64"):
        oj.gelu(jnp.arange(3, dtype=jnp.int32))
    with pytest.raises(ValueError, match=r"opforge\.jax\.gelu: approximate must be one of 'none', 'tanh', got 'fast'"):
        oj.gelu(jnp.ones(3), approximate="fast")
    with pytest.raises(ValueError, match=r"opforge\.jax\.gelu_grad: approximate must be one of 'none', 'tanh'"):
        jax.jit(lambda a: oj.gelu_grad(a, a, approximate="exact"))(jnp.ones(3))
    with pytest.raises(TypeError, match=r"opforge\.jax\.silu_grad: x has dtype float32 but dy has dtype float64"):
        oj.silu_grad(jnp.ones(3, jnp.float64), jnp.ones(3, jnp.float32))
    with pytest.raises(ValueError, match=r"opforge\.jax\.tanh_grad: "):
        oj.tanh_grad(jnp.ones((2, 3)), jnp.ones((3, 2)))
    with pytest.raises(TypeError, match=r"opforge\.jax\.sigmoid_grad_grad is not differentiable"):
        jax.grad(lambda v: oj.sigmoid_grad_grad(v, v, v)[0].sum())(jnp.ones(3))
