"""Broadcasting add and mul (and their gradient rows sum_to, mul_grad) in
JAX, against jnp.add / jnp.multiply: values, gradients, check_grads to second
order in both modes, jvp/hessian, vmap in one call, jit, and errors."""

from __future__ import annotations

import re
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads
from references import BROADCAST_PAIRS as PAIRS
from references import FLOAT_DTYPES

import opforge.jax as oj

THEIRS: dict[str, Callable[..., jax.Array]] = {"add": jnp.add, "mul": jnp.multiply}


def rand(shape: tuple[int, ...], dtype: Any = np.float64, seed: int = 0) -> jax.Array:
    return jnp.asarray(np.random.default_rng(seed).uniform(0.5, 2.0, shape).astype(dtype))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("sa,sb", PAIRS)
@pytest.mark.parametrize("name", ["add", "mul"])
@pytest.mark.parametrize("jit", [False, True])
def test_values_match_jnp(dtype: Any, sa: Any, sb: Any, name: str, jit: bool) -> None:
    a, b = rand(sa, dtype, 1), rand(sb, dtype, 2)
    f = jax.jit(getattr(oj, name)) if jit else getattr(oj, name)
    ours = f(a, b)
    assert ours.shape == np.broadcast_shapes(sa, sb) and ours.dtype == a.dtype
    np.testing.assert_array_equal(ours, THEIRS[name](a, b))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("sa,sb", PAIRS)
@pytest.mark.parametrize("name", ["add", "mul"])
def test_gradients_match_jnp(dtype: Any, sa: Any, sb: Any, name: str) -> None:
    a, b = rand(sa, dtype, 3), rand(sb, dtype, 4)
    w = rand(np.broadcast_shapes(sa, sb), dtype, 5)
    ours = jax.grad(lambda u, v: jnp.sum(getattr(oj, name)(u, v) * w), argnums=(0, 1))(a, b)
    theirs = jax.grad(lambda u, v: jnp.sum(THEIRS[name](u, v) * w), argnums=(0, 1))(a, b)
    for o, t in zip(ours, theirs):
        assert o.shape == t.shape
        np.testing.assert_allclose(o, t, rtol=1e-5 if dtype == np.float32 else 1e-12)


@pytest.mark.heavy
def test_check_grads_second_order() -> None:
    """Both modes to second order: add, mul, and the gradient rows sum_to and
    mul_grad (whose own gradient and tangent rules close the recursion)."""
    for sa, sb in [((3, 1), (1, 4)), ((4,), (2, 3, 4)), ((), (2, 3)), ((2, 3), (2, 3))]:
        a, b = rand(sa, seed=6), rand(sb, seed=7)
        check_grads(oj.add, (a, b), order=2, modes=["fwd", "rev"])
        check_grads(oj.mul, (a, b), order=2, modes=["fwd", "rev"])
    like = rand((3, 1), seed=8)
    check_grads(lambda x: oj.sum_to(x, like), (rand((2, 3, 4), seed=9),), order=2, modes=["fwd", "rev"])
    check_grads(lambda x: oj.sum_to(x, rand((2, 3, 4))), (like,), order=2, modes=["fwd", "rev"])
    check_grads(lambda d, o: oj.mul_grad(d, o, like), (rand((2, 3, 4), seed=10), rand((3, 1), seed=11)), order=2,
                modes=["fwd", "rev"])  # fmt: skip


@pytest.mark.heavy
def test_hessian_and_jvp_match_jnp() -> None:
    a, b = rand((3, 1), seed=12), rand((2, 1, 4), seed=13)

    def ours(u: jax.Array, v: jax.Array) -> jax.Array:
        return jnp.sum(oj.mul(oj.mul(u, v), oj.add(u, v)) ** 2)

    def theirs(u: jax.Array, v: jax.Array) -> jax.Array:
        return jnp.sum((u * v * (u + v)) ** 2)

    for argnums in (0, 1):
        np.testing.assert_allclose(jax.hessian(ours, argnums)(a, b), jax.hessian(theirs, argnums)(a, b), rtol=1e-10)
        np.testing.assert_allclose(
            jax.jacrev(jax.jacrev(ours, argnums), argnums)(a, b), jax.hessian(theirs, argnums)(a, b), rtol=1e-10
        )
    ta, tb = rand((3, 1), seed=14), rand((2, 1, 4), seed=15)
    for o, t in zip(jax.jvp(oj.mul, (a, b), (ta, tb)), jax.jvp(jnp.multiply, (a, b), (ta, tb))):
        np.testing.assert_allclose(o, t, rtol=1e-12)


def test_vmap_in_one_call() -> None:
    xs, b, bs = rand((6, 4, 5), seed=16), rand((5,), seed=17), rand((6, 1), seed=18)
    cases: list[tuple[Any, Any, Any]] = [
        (jax.vmap(oj.add, in_axes=(0, None)), (xs, b), xs + b),
        (jax.vmap(oj.mul, in_axes=(0, 0)), (xs, bs), xs * bs[:, None, :]),
        (jax.vmap(oj.mul, in_axes=(None, 2)), (b[:4], xs), jnp.moveaxis(xs, 2, 0) * b[:4]),
        (jax.vmap(oj.sum_to, in_axes=(0, None)), (xs, b), xs.sum(1)),
        (jax.vmap(oj.sum_to, in_axes=(0, 0)), (xs, bs), xs.sum((1, 2)).reshape(6, 1)),
        (jax.vmap(oj.sum_to, in_axes=(None, 0)), (b, xs), jnp.broadcast_to(b, (6, 4, 5))),
        (jax.vmap(oj.mul_grad, in_axes=(0, None, None)), (xs, b, b), (xs * b).sum(1)),
    ]
    for f, args, want in cases:
        np.testing.assert_allclose(f(*args), want, rtol=1e-12)
        jaxpr = str(jax.make_jaxpr(f)(*args))
        assert jaxpr.count("ffi_call") == 1 and "scan" not in jaxpr  # one call on the whole batch
    # per-example gradients of a broadcast bias
    grads = jax.vmap(jax.grad(lambda x, bias: jnp.sum(oj.add(x, bias) ** 2), argnums=1), in_axes=(0, None))(xs, b)
    np.testing.assert_allclose(grads, (2 * (xs + b)).sum(1), rtol=1e-12)


def custom_calls(fn: Callable[..., Any], *args: Any) -> list[str]:
    """The opforge custom calls of fn's compiled program, in order."""
    return re.findall(r"opforge\.\w+", jax.jit(fn).lower(*args).as_text())


def test_same_shape_add_passes_its_gradient_through() -> None:
    """sum_to is OPF_OP_PASS_THROUGH: an input of the output's shape gets the
    incoming cotangent (or gives its tangent) as is, with no custom call;
    one that broadcasts is summed."""
    a, b, c = rand((3, 4)), rand((4,), seed=1), rand((3, 4), seed=2)

    def f(a: jax.Array, b: jax.Array, c: jax.Array) -> jax.Array:
        return (oj.add(oj.add(a, b), c) * a).sum()

    assert custom_calls(jax.grad(f, argnums=(0, 1, 2)), a, b, c) == ["opforge.add", "opforge.add", "opforge.sum_to"]
    theirs = jax.grad(lambda a, b, c: ((a + b + c) * a).sum(), argnums=(0, 1, 2))(a, b, c)
    for o, t in zip(jax.grad(f, argnums=(0, 1, 2))(a, b, c), theirs):
        np.testing.assert_allclose(o, t, rtol=1e-14)
    same = lambda x, t: jax.jvp(lambda x: oj.add(x, c), (x,), (t,))  # noqa: E731
    assert custom_calls(same, a, a) == ["opforge.add"]
    np.testing.assert_array_equal(same(a, b + a)[1], b + a)
    summed = lambda x, t: jax.jvp(lambda x: oj.add(a, x), (x,), (t,))  # noqa: E731
    assert "opforge.sum_to" in custom_calls(summed, b, b)
    np.testing.assert_array_equal(summed(b, c[0])[1], jnp.broadcast_to(c[0], (3, 4)))


def test_sum_to_and_mul_grad_values() -> None:
    x, like = rand((8, 3, 5), seed=19), rand((3, 1), seed=20)
    np.testing.assert_allclose(oj.sum_to(x, like), x.sum((0, 2))[:, None], rtol=1e-12)
    np.testing.assert_allclose(oj.sum_to(like, x), jnp.broadcast_to(like, x.shape), rtol=0)
    other = rand((5,), seed=21)
    np.testing.assert_allclose(oj.mul_grad(x, other, like), (x * other).sum((0, 2))[:, None], rtol=1e-12)
    np.testing.assert_array_equal(oj.sum_to(jnp.ones((0, 3)), jnp.ones(3)), np.zeros(3))


def test_shapes_that_do_not_broadcast() -> None:
    for name in ("add", "mul"):
        pattern = rf"opforge\.jax\.{name}: shape mismatch: a is \[2,3\], b is \[4\]; they must broadcast together"
        with pytest.raises(ValueError, match=pattern):
            getattr(oj, name)(jnp.ones((2, 3)), jnp.ones(4))
        with pytest.raises(ValueError, match=pattern):
            jax.jit(getattr(oj, name))(jnp.ones((2, 3)), jnp.ones(4))
    with pytest.raises(ValueError, match=r"opforge\.jax\.sum_to: shape mismatch: x is \[2,3\], like is \[2\]"):
        oj.sum_to(jnp.ones((2, 3)), jnp.ones(2))
