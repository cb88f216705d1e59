"""Ops written with the authoring layer (examples/ops/myops.c) as XLA custom
calls: values, jit, grad and vmap against JAX's own ops."""

from __future__ import annotations

import shutil
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads
from oplib import compile_myops

import opforge.jax as oj

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


@pytest.fixture(scope="module")
def myops(tmp_path_factory: pytest.TempPathFactory) -> oj.OpNamespace:
    return oj.load_ops(compile_myops(tmp_path_factory.mktemp("jax_myops")))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_values_match_jax(myops: oj.OpNamespace, dtype: Any) -> None:
    x = jnp.asarray((np.random.default_rng(0).standard_normal((6, 40)) * 6).astype(dtype))
    rtol = 2e-6 if dtype == np.float32 else 1e-12
    for name, v in {"plain": x, "transposed": x.T, "0-d": x[0, 0], "empty": x[:0]}.items():
        np.testing.assert_allclose(myops.softplus(v), jax.nn.softplus(v), rtol=rtol, err_msg=name)
        np.testing.assert_allclose(jax.jit(myops.softplus)(v), jax.nn.softplus(v), rtol=rtol, err_msg=name)
        np.testing.assert_array_equal(myops.my_op(v, factor=3.0), v * 3, err_msg=name)
    np.testing.assert_allclose(myops.rowsum(x), x.sum(-1), rtol=1e-5, atol=1e-4)


def test_grad_matches_jax(myops: oj.OpNamespace) -> None:
    x = jnp.asarray(np.random.default_rng(1).standard_normal((5, 9)))

    def ours(v: jax.Array) -> jax.Array:
        return (myops.rowsum(myops.softplus(v) * myops.my_op(v, factor=2.0)) ** 2).sum()

    def theirs(v: jax.Array) -> jax.Array:
        return ((jax.nn.softplus(v) * v * 2.0).sum(-1) ** 2).sum()

    np.testing.assert_allclose(jax.grad(ours)(x), jax.grad(theirs)(x), rtol=1e-12)
    np.testing.assert_allclose(jax.jit(jax.grad(ours))(x), jax.grad(theirs)(x), rtol=1e-12)


def test_vmap(myops: oj.OpNamespace) -> None:
    x = jnp.asarray(np.random.default_rng(2).standard_normal((3, 4, 5)), dtype=jnp.float32)
    np.testing.assert_allclose(jax.vmap(myops.rowsum)(x), x.sum(-1), rtol=1e-5)
    np.testing.assert_allclose(jax.vmap(myops.softplus)(x), jax.nn.softplus(x), rtol=2e-6)


def test_errors_name_the_op(myops: oj.OpNamespace) -> None:
    with pytest.raises(ValueError, match=r"myops\.rowsum: x must have rank 1 or more, got rank 0"):
        myops.rowsum(jnp.float32(1))
    with pytest.raises(ValueError, match=r"myops\.softplus_grad: shape mismatch"):
        myops.softplus_grad(jnp.ones(3), jnp.ones(4))


def test_row_ops_batch_in_one_call(myops: oj.OpNamespace) -> None:
    """Every input of rowsum has "..." in its signature: vmap adds the batch
    axis to the rows of one call instead of looping."""
    assert myops.rowsum.__doc__ is not None and "broadcast_all" in myops.rowsum.__doc__
    x = jnp.asarray(np.random.default_rng(3).standard_normal((4, 3, 6)))
    dy = jnp.ones((4, 3))
    np.testing.assert_allclose(jax.vmap(myops.rowsum_grad)(dy, x), jnp.ones_like(x))
    text = jax.jit(jax.vmap(myops.rowsum)).lower(x).as_text()
    assert text.count("custom_call") == 1 and "while" not in text


def test_forward_mode_from_tangent_rules(myops: oj.OpNamespace) -> None:
    """softplus declares a tangent rule: jvp and jacfwd match jax.nn.softplus's.
    softplus_grad declares none: forward mode through it is refused with a
    message naming it (never zeros), while its reverse mode is unaffected."""
    x = jnp.asarray(np.linspace(-4.0, 4.0, 9))
    t = jnp.asarray(np.linspace(1.0, 2.0, 9))
    for a, e in zip(jax.jvp(myops.softplus, (x,), (t,)), jax.jvp(jax.nn.softplus, (x,), (t,))):
        np.testing.assert_allclose(a, e, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(jax.jacfwd(myops.softplus)(x), jax.jacfwd(jax.nn.softplus)(x), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(
        jax.jvp(lambda v: myops.rowsum(v), (x.reshape(3, 3),), (t.reshape(3, 3),))[1], t.reshape(3, 3).sum(-1)
    )
    with pytest.raises(TypeError, match=r"myops\.softplus_grad has no forward mode: its table row declares no tangent rule"):
        jax.jvp(lambda v: myops.softplus_grad(v, x), (t,), (t,))
    with pytest.raises(TypeError, match=r"myops\.softplus_grad has no forward mode"):
        jax.hessian(lambda v: myops.softplus(v).sum())(x)


def test_rowsum_declares_all_three(myops: oj.OpNamespace) -> None:
    """rowsum and rowsum_grad declare gradient and tangent rules: first and
    second order in both modes, and jax.hessian, against jnp.sum's."""
    x = jnp.asarray(np.random.default_rng(4).standard_normal((3, 5)))
    check_grads(myops.rowsum, (x,), order=2, modes=("fwd", "rev"))
    cube = lambda f: lambda v: jnp.sum(f(v) ** 3)  # noqa: E731
    np.testing.assert_allclose(
        jax.hessian(cube(myops.rowsum))(x), jax.hessian(cube(lambda v: jnp.sum(v, axis=-1)))(x), rtol=1e-12, atol=1e-12
    )
