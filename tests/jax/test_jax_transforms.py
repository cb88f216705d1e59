"""grad (check_grads and against the built-ins' gradients), vmap against a loop, shard_map over two devices."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, PartitionSpec
from jax.test_util import check_grads
from references import FLOAT_DTYPES

import opforge.jax as oj


def away_from_zero(shape: tuple[int, ...], dtype: Any, seed: int) -> jax.Array:
    """Random values with |v| >= 0.1, so finite differences never cross relu's kink."""
    v = np.random.default_rng(seed).standard_normal(shape)
    return jnp.asarray(np.where(np.abs(v) < 0.1, 0.1 * np.sign(v) + 0.1 * (v == 0), v).astype(dtype))


# -- grad -----------------------------------------------------------------------


@pytest.mark.heavy
def test_check_grads_elementwise() -> None:
    """Every differentiable elementwise row, second order in both modes, on
    contiguous and transposed (non-contiguous) inputs."""
    x, y = away_from_zero((4, 5), np.float64, 0), away_from_zero((4, 5), np.float64, 1)
    for a, b in ((x, y), (x.T, y.T)):
        check_grads(oj.relu, (a,), order=2, modes=["fwd", "rev"])
        check_grads(lambda v: oj.scale(v, alpha=-1.75), (a,), order=2, modes=["fwd", "rev"])
        check_grads(oj.add, (a, b), order=2, modes=["fwd", "rev"])
        check_grads(oj.relu_grad, (b, a), order=2, modes=["fwd", "rev"])


def test_forward_mode_matches_jnp() -> None:
    """jvp, jacfwd and hessian (forward over reverse) against the same of jnp."""
    x, t = away_from_zero((3, 4), np.float64, 2), away_from_zero((3, 4), np.float64, 3)
    got = jax.jvp(oj.relu, (x,), (t,))
    want = jax.jvp(lambda v: jnp.maximum(v, 0), (x,), (t,))
    for a, e in zip(got, want):
        np.testing.assert_allclose(a, e, rtol=0, atol=0)
    np.testing.assert_allclose(
        jax.jacfwd(lambda v: oj.scale(v, alpha=2.5))(x), jax.jacfwd(lambda v: 2.5 * v)(x), rtol=0, atol=0
    )
    hess = jax.hessian(lambda v: jnp.sum(oj.relu(v) ** 3))(x)
    np.testing.assert_allclose(hess, jax.hessian(lambda v: jnp.sum(jnp.maximum(v, 0) ** 3))(x), rtol=1e-12, atol=1e-12)


def test_vmap_of_jvp_and_jvp_of_vmap() -> None:
    x, t = away_from_zero((5, 3), np.float64, 4), away_from_zero((5, 3), np.float64, 5)
    w = away_from_zero((3, 2), np.float64, 6)
    ref = jax.vmap(lambda v, u: jax.jvp(lambda z: jnp.maximum(z, 0), (v,), (u,))[1])(x, t)
    np.testing.assert_allclose(jax.vmap(lambda v, u: jax.jvp(oj.relu, (v,), (u,))[1])(x, t), ref)
    np.testing.assert_allclose(jax.jvp(jax.vmap(oj.relu), (x,), (t,))[1], ref)
    # dense under vmap runs per element ("sequential"); its tangent map batches the same way
    xs, ts = x.reshape(5, 1, 3), t.reshape(5, 1, 3)
    got = jax.vmap(lambda v, u: jax.jvp(lambda z: oj.dense(z, w), (v,), (u,))[1])(xs, ts)
    np.testing.assert_allclose(got, ts @ w, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("activation", ["none", "relu"])
@pytest.mark.parametrize("with_bias", [True, False])
def test_check_grads_dense(activation: str, with_bias: bool) -> None:
    x, w = away_from_zero((5, 4), np.float64, 3), away_from_zero((4, 3), np.float64, 4)
    b = away_from_zero((3,), np.float64, 5)
    # Second order: dense's VJP is dense_grad, whose own rule is dense_grad_grad.
    if with_bias:
        check_grads(lambda x, w, b: oj.dense(x, w, b, activation=activation), (x, w, b), order=2, modes=["fwd", "rev"])
    else:
        check_grads(lambda x, w: oj.dense(x, w, activation=activation), (x, w), order=2, modes=["fwd", "rev"])
    # the gradient rows themselves (dense_grad without y for "none", as dense's rule may pass it)
    dy = away_from_zero((5, 3), np.float64, 8)
    y = oj.dense(x, w, b, activation=activation)
    check_grads(
        lambda dy, x, w: oj.dense_grad(dy, x.T.T, w, y, activation=activation), (dy, x, w), order=2, modes=["fwd", "rev"]
    )
    ddx, ddw = away_from_zero((5, 4), np.float64, 9), away_from_zero((4, 3), np.float64, 10)
    check_grads(
        lambda dy, x, w, ddx, ddw, ddb: oj.dense_grad_grad(dy, x, w, y, ddx, ddw, ddb, activation=activation),
        (dy, x, w, ddx, ddw, b),
        order=1,
        modes=["fwd", "rev"],
    )


@pytest.mark.heavy
@pytest.mark.parametrize("activation", ["none", "relu"])
def test_dense_hessian_matches_jnp(activation: str) -> None:
    x, w = away_from_zero((5, 4), np.float64, 10), away_from_zero((4, 3), np.float64, 11)
    b = away_from_zero((3,), np.float64, 12)

    def act(z: jax.Array) -> jax.Array:
        return jnp.maximum(z, 0) if activation == "relu" else z

    def ours(x: jax.Array, w: jax.Array, b: jax.Array) -> jax.Array:
        return jnp.sum(oj.dense(x, w, b, activation=activation) ** 3)

    def builtin(x: jax.Array, w: jax.Array, b: jax.Array) -> jax.Array:
        return jnp.sum(act(jnp.dot(x, w) + b) ** 3)

    # jax.hessian is forward over reverse: second order by reverse over reverse here.
    def rev_hessian(f: Any) -> Any:
        return jax.jacrev(jax.jacrev(f, argnums=(0, 1, 2)), argnums=(0, 1, 2))

    for a, e in zip(jax.tree.leaves(rev_hessian(ours)(x, w, b)), jax.tree.leaves(rev_hessian(builtin)(x, w, b))):
        np.testing.assert_allclose(a, e, rtol=1e-10, atol=1e-10)
    # the same under jit, and a gradient of a gradient norm
    gnorm = lambda f: lambda x, w, b: sum(jnp.sum(g**2) for g in jax.grad(f, argnums=(0, 1, 2))(x, w, b))  # noqa: E731
    for a, e in zip(jax.jit(jax.grad(gnorm(ours), argnums=(0, 1, 2)))(x, w, b), jax.grad(gnorm(builtin), argnums=(0, 1, 2))(x, w, b)):
        np.testing.assert_allclose(a, e, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_grads_match_the_builtins(dtype: Any, mode: str) -> None:
    x, w = away_from_zero((8, 6), dtype, 6), away_from_zero((6, 5), dtype, 7)
    b, t = away_from_zero((5,), dtype, 8), away_from_zero((8, 5), dtype, 9)

    def ours(x: jax.Array, w: jax.Array, b: jax.Array) -> jax.Array:
        h = oj.dense(x, w, b, activation="relu")
        return jnp.sum(oj.add(oj.scale(oj.relu(h), alpha=0.5), t) ** 2)

    def builtin(x: jax.Array, w: jax.Array, b: jax.Array) -> jax.Array:
        h = jax.nn.relu(jnp.matmul(x, w, precision=jax.lax.Precision.HIGHEST) + b)
        return jnp.sum((jax.nn.relu(h) * 0.5 + t) ** 2)

    grad = jax.grad(ours, argnums=(0, 1, 2))
    got = (jax.jit(grad) if mode == "jit" else grad)(x, w, b)
    expected = jax.grad(builtin, argnums=(0, 1, 2))(x, w, b)
    tol = 1e-4 if dtype == np.float32 else 1e-11
    for g, e in zip(got, expected):
        assert g.dtype == dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=tol, atol=tol)


def test_rows_without_gradient_rules_say_so() -> None:
    x = jnp.ones((2, 2))
    with pytest.raises(TypeError, match=r"opforge\.jax\.relu_ is not differentiable"):
        jax.grad(lambda x: oj.relu_(x).sum())(x)


# -- vmap -----------------------------------------------------------------------


def loop(f: Any, *batched: jax.Array, **unbatched: Any) -> jax.Array:
    outs = [f(*(a[i] for a in batched), **unbatched) for i in range(batched[0].shape[0])]
    return jax.tree.map(lambda *xs: jnp.stack(xs), *outs)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_vmap_elementwise(dtype: Any) -> None:
    x, y = away_from_zero((3, 4, 5), dtype, 10), away_from_zero((3, 4, 5), dtype, 11)
    np.testing.assert_array_equal(jax.vmap(oj.relu)(x), loop(oj.relu, x))
    np.testing.assert_array_equal(jax.vmap(oj.relu_)(x), loop(oj.relu_, x))
    np.testing.assert_array_equal(jax.vmap(lambda v: oj.scale(v, alpha=3.0))(x), loop(oj.scale, x, alpha=3.0))
    np.testing.assert_array_equal(jax.vmap(oj.add)(x, y), loop(oj.add, x, y))
    np.testing.assert_array_equal(jax.vmap(oj.relu_grad)(x, y), loop(oj.relu_grad, x, y))
    # one operand unbatched, and the batch axis not first
    np.testing.assert_array_equal(jax.vmap(oj.add, in_axes=(None, 0))(x[0], y), loop(lambda b: oj.add(x[0], b), y))
    moved = jnp.moveaxis(x, 0, 2)
    np.testing.assert_array_equal(jax.jit(jax.vmap(oj.relu, in_axes=2))(moved), loop(oj.relu, x))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_vmap_dense(dtype: Any) -> None:
    x, w = away_from_zero((4, 6, 5), dtype, 12), away_from_zero((4, 5, 3), dtype, 13)
    b = away_from_zero((4, 3), dtype, 14)
    dense = lambda x, w, b: oj.dense(x, w, b, activation="relu")  # noqa: E731
    np.testing.assert_array_equal(jax.vmap(dense)(x, w, b), loop(dense, x, w, b))
    shared = lambda x: oj.dense(x, w[0], b[0])  # noqa: E731
    np.testing.assert_array_equal(jax.jit(jax.vmap(shared))(x), loop(shared, x))
    grads = jax.vmap(jax.grad(lambda x, w: oj.dense(x, w).sum(), argnums=1))(x, w)
    np.testing.assert_array_equal(grads, loop(jax.grad(lambda x, w: oj.dense(x, w).sum(), argnums=1), x, w))


def test_vmap_of_grad_of_elementwise() -> None:
    x = away_from_zero((5, 7), np.float64, 15)
    per_example = jax.grad(lambda v: jnp.sum(oj.scale(oj.relu(v), alpha=2.0) ** 2))
    np.testing.assert_array_equal(jax.vmap(per_example)(x), loop(per_example, x))


# -- shard_map ----------------------------------------------------------------


def test_shard_map_over_two_devices_matches_unsharded() -> None:
    devices = jax.devices("cpu")
    assert len(devices) >= 2, "conftest sets --xla_force_host_platform_device_count=2"
    mesh = Mesh(np.array(devices[:2]), ("batch",))
    x, w = away_from_zero((16, 8), np.float32, 16), away_from_zero((8, 4), np.float32, 17)
    b = away_from_zero((4,), np.float32, 18)

    def model(x: jax.Array, w: jax.Array, b: jax.Array) -> jax.Array:
        h = oj.dense(x, w, b, activation="relu")
        return oj.add(oj.scale(h, alpha=2.0), oj.relu(h))

    sharded = jax.jit(
        jax.shard_map(model, mesh=mesh, in_specs=(PartitionSpec("batch"), PartitionSpec(), PartitionSpec()),
                      out_specs=PartitionSpec("batch"))
    )  # fmt: skip
    got = sharded(x, w, b)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(model(x, w, b)))
    assert len(got.sharding.device_set) == 2

    # gradients through shard_map: per-shard dw summed over the mesh
    def loss(w: jax.Array) -> jax.Array:
        def shard_loss(x: jax.Array, w: jax.Array) -> jax.Array:
            return jax.lax.psum(jnp.sum(oj.dense(x, w, b, activation="relu")), "batch")

        return jax.shard_map(shard_loss, mesh=mesh, in_specs=(PartitionSpec("batch"), PartitionSpec()),
                             out_specs=PartitionSpec())(x, w)  # fmt: skip

    expected = jax.grad(lambda w: jnp.sum(oj.dense(x, w, b, activation="relu")))(w)
    np.testing.assert_allclose(np.asarray(jax.jit(jax.grad(loss))(w)), np.asarray(expected), rtol=1e-5, atol=1e-5)


def test_vmap_methods_follow_the_elementwise_flag() -> None:
    x = jnp.ones((4, 3, 2))
    elementwise = str(jax.make_jaxpr(jax.vmap(oj.relu))(x))
    assert elementwise.count("ffi_call") == 1 and "scan" not in elementwise  # one call on the whole batch
    dense = str(jax.make_jaxpr(jax.vmap(lambda v: oj.dense(v, v.T)))(x))
    assert "scan" in dense  # sequential: one call per batch element
