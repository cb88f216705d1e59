"""softmax, log_softmax, layer_norm, rms_norm through opforge.jax: values
against jax.nn and jnp references, eagerly and under jit; gradients (second
order by check_grads) against jax's own; vmap; bad input."""

from __future__ import annotations

from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads
from references import FLOAT_DTYPES

import opforge.jax as oj

MODES = ["eager", "jit"]
SHAPES = [(7,), (3, 5), (2, 3, 17), (300, 1030), (3, 0), (0, 4)]


def run(mode: str, f: Callable[..., Any], *args: Any) -> Any:
    return f(*args) if mode == "eager" else jax.jit(f)(*args)


def tol(dtype: Any) -> dict[str, float]:
    return {"rtol": 1e-4, "atol": 1e-5} if np.dtype(dtype) == np.float32 else {"rtol": 1e-10, "atol": 1e-12}


def jnp_layer_norm(x: jax.Array, w: Optional[jax.Array], b: Optional[jax.Array], eps: float) -> tuple[jax.Array, ...]:
    mean = x.mean(-1)
    rstd = jax.lax.rsqrt(x.var(-1) + eps)
    y = (x - mean[..., None]) * rstd[..., None]
    y = y if w is None else y * w
    return (y if b is None else y + b), mean, rstd


def jnp_rms_norm(x: jax.Array, w: Optional[jax.Array], eps: float) -> tuple[jax.Array, ...]:
    rstd = jax.lax.rsqrt((x * x).mean(-1) + eps)
    y = x * rstd[..., None]
    return (y if w is None else y * w), rstd


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_values(mode: str, dtype: Any, shape: tuple[int, ...]) -> None:
    x = jnp.asarray(np.random.default_rng(len(shape)).standard_normal(shape).astype(dtype) * 3)
    np.testing.assert_allclose(run(mode, oj.softmax, x), jax.nn.softmax(x, -1), **tol(dtype))
    np.testing.assert_allclose(run(mode, oj.log_softmax, x), jax.nn.log_softmax(x, -1), **tol(dtype))
    m = shape[-1]
    w, b = jnp.linspace(0.5, 1.5, m, dtype=dtype), jnp.linspace(-1, 1, m, dtype=dtype)
    if m == 0:
        return  # jnp's mean of nothing warns; the NumPy and C tests cover empty rows
    for wi, bi in ((w, b), (None, None)):
        got = run(mode, lambda x: oj.layer_norm(x, wi, bi, eps=1e-5), x)
        for g, e in zip(got, jnp_layer_norm(x, wi, bi, 1e-5)):
            np.testing.assert_allclose(g, e, **tol(dtype))
        got = run(mode, lambda x: oj.rms_norm(x, wi, eps=1e-6), x)
        for g, e in zip(got, jnp_rms_norm(x, wi, 1e-6)):
            np.testing.assert_allclose(g, e, **tol(dtype))
    eps = float(jnp.finfo(dtype).eps)  # rms_norm's default eps
    np.testing.assert_allclose(run(mode, lambda x: oj.rms_norm(x)[1], x), jnp_rms_norm(x, None, eps)[1], **tol(dtype))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_special_rows(dtype: Any) -> None:
    inf, nan = np.inf, np.nan
    x = jnp.asarray(np.array([[1, -inf, 2], [-inf, -inf, -inf], [nan, 1, 2], [1e3, -1e3, 999]], dtype))
    np.testing.assert_allclose(oj.softmax(x), jax.nn.softmax(x), **tol(dtype))
    np.testing.assert_allclose(oj.log_softmax(x), jax.nn.log_softmax(x), **tol(dtype))
    assert float(oj.softmax(x)[0, 1]) == 0.0


def test_check_grads_second_order() -> None:
    rng = np.random.default_rng(4)
    x = jnp.asarray(rng.standard_normal((3, 6)))
    xt = jnp.asarray(rng.standard_normal((6, 3))).T
    w, b = jnp.asarray(rng.uniform(0.5, 1.5, 6)), jnp.asarray(rng.standard_normal(6))
    cases: list[tuple[Callable[..., Any], tuple[jax.Array, ...]]] = [
        (oj.softmax, (x,)),
        (oj.log_softmax, (xt,)),
        (lambda x, w, b: oj.layer_norm(x, w, b, eps=1e-3), (x, w, b)),
        (lambda x: oj.layer_norm(x, None, None, eps=1e-3)[0], (xt,)),
        (lambda x, w: oj.rms_norm(x, w, eps=1e-3), (xt, w)),
        (lambda x: oj.rms_norm(x, None, eps=1e-3)[0], (x,)),
    ]
    for f, args in cases:
        check_grads(f, args, order=2, modes=["rev"])


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_gradients_match_jax(dtype: Any) -> None:
    """Through every output (mean and rstd too), under jit, against jax's gradients of jnp references."""
    rng = np.random.default_rng(5)
    x = jnp.asarray(rng.standard_normal((8, 33)).astype(dtype))
    w, b = jnp.asarray(rng.uniform(0.5, 1.5, 33).astype(dtype)), jnp.asarray(rng.standard_normal(33).astype(dtype))
    cot = jnp.asarray(rng.standard_normal((8, 33)).astype(dtype))

    def loss(f: Callable[..., Any]) -> Callable[..., Any]:
        def scalar(*args: jax.Array) -> jax.Array:
            out = f(*args)
            out = out if isinstance(out, tuple) else (out,)
            return sum(jnp.sum(o * cot[..., : o.shape[-1]] if o.ndim == 2 else o * cot[:, 0]) for o in out)

        return scalar

    pairs = [
        (oj.softmax, lambda x: jax.nn.softmax(x), (x,)),
        (oj.log_softmax, lambda x: jax.nn.log_softmax(x), (x,)),
        (lambda x, w, b: oj.layer_norm(x, w, b), lambda x, w, b: jnp_layer_norm(x, w, b, 1e-5), (x, w, b)),
        (lambda x, w: oj.rms_norm(x, w, eps=1e-5), lambda x, w: jnp_rms_norm(x, w, 1e-5), (x, w)),
    ]
    for ours, theirs, args in pairs:
        argnums = tuple(range(len(args)))
        got = jax.jit(jax.grad(loss(ours), argnums))(*args)
        want = jax.grad(loss(theirs), argnums)(*args)
        for g, e in zip(got, want):
            np.testing.assert_allclose(g, e, rtol=1e-3 if dtype == np.float32 else 1e-9, atol=1e-3 if dtype == np.float32 else 1e-10)


@pytest.mark.heavy
def test_forward_mode() -> None:
    """jax.jvp against jax.jvp of the jax.nn / jnp references; check_grads in
    forward mode; jax.hessian (forward over reverse) against the references'."""
    rng = np.random.default_rng(8)
    x, xt = jnp.asarray(rng.standard_normal((4, 7))), jnp.asarray(rng.standard_normal((4, 7)))
    w, wt = jnp.asarray(rng.uniform(0.5, 1.5, 7)), jnp.asarray(rng.standard_normal(7))
    b, bt = jnp.asarray(rng.standard_normal(7)), jnp.asarray(rng.standard_normal(7))
    pairs: list[tuple[Callable[..., Any], Callable[..., Any], tuple[jax.Array, ...], tuple[jax.Array, ...]]] = [
        (oj.softmax, jax.nn.softmax, (x,), (xt,)),
        (oj.log_softmax, jax.nn.log_softmax, (x,), (xt,)),
        (lambda x, w, b: oj.layer_norm(x, w, b, eps=1e-3), lambda x, w, b: jnp_layer_norm(x, w, b, 1e-3), (x, w, b),
         (xt, wt, bt)),
        (lambda x, w: oj.rms_norm(x, w, eps=1e-3), lambda x, w: jnp_rms_norm(x, w, 1e-3), (x, w), (xt, wt)),
    ]  # fmt: skip
    for ours, theirs, primals, tangents in pairs:
        got, want = jax.jvp(ours, primals, tangents)[1], jax.jvp(theirs, primals, tangents)[1]
        for g, e in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
            np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-12)
        check_grads(ours, primals, order=1, modes=["fwd"])

        def cube(f: Callable[..., Any]) -> Callable[..., jax.Array]:
            return lambda *a: sum(jnp.sum(o**3) for o in jax.tree_util.tree_leaves(f(*a)))

        for g, e in zip(jax.hessian(cube(ours))(*primals), jax.hessian(cube(theirs))(*primals)):
            np.testing.assert_allclose(g, e, rtol=1e-9, atol=1e-10)
    check_grads(oj.softmax, (x,), order=2, modes=["fwd", "rev"])  # its tangent rule names softmax_grad only


# (ours, reference, arguments) of every norm, weight and bias absent, present or held fixed: the orders below
# differentiate in all the arguments (weight and bias too), through every output (mean and rstd too).
Case = tuple[str, Callable[..., Any], Callable[..., Any], tuple[jax.Array, ...]]


def _norm_cases(x: jax.Array, w: jax.Array, b: jax.Array) -> list[Case]:
    return [
        ("log_softmax", oj.log_softmax, jax.nn.log_softmax, (x,)),
        ("rms_norm(x, w)", lambda x, w: oj.rms_norm(x, w, eps=1e-3), lambda x, w: jnp_rms_norm(x, w, 1e-3), (x, w)),
        ("rms_norm(x)", lambda x: oj.rms_norm(x, eps=1e-3), lambda x: jnp_rms_norm(x, None, 1e-3), (x,)),
        ("layer_norm(x, w, b)", lambda x, w, b: oj.layer_norm(x, w, b, eps=1e-3),
         lambda x, w, b: jnp_layer_norm(x, w, b, 1e-3), (x, w, b)),
        ("layer_norm(x, w)", lambda x, w: oj.layer_norm(x, w, None, eps=1e-3),
         lambda x, w: jnp_layer_norm(x, w, None, 1e-3), (x, w)),
        ("layer_norm(x, b=b)", lambda x, b: oj.layer_norm(x, None, b, eps=1e-3),
         lambda x, b: jnp_layer_norm(x, None, b, 1e-3), (x, b)),
        ("layer_norm(x)", lambda x: oj.layer_norm(x, eps=1e-3), lambda x: jnp_layer_norm(x, None, None, 1e-3), (x,)),
        # weight and bias held fixed: their tangents are (symbolic) zeros
        ("rms_norm(x; w fixed)", lambda x: oj.rms_norm(x, w, eps=1e-3), lambda x: jnp_rms_norm(x, w, 1e-3), (x,)),
        ("layer_norm(x; w, b fixed)", lambda x: oj.layer_norm(x, w, b, eps=1e-3),
         lambda x: jnp_layer_norm(x, w, b, 1e-3), (x,)),
    ]  # fmt: skip


def _scalar(f: Callable[..., Any]) -> Callable[..., jax.Array]:
    """A loss through every output, with non-zero third derivatives."""

    def loss(*args: jax.Array) -> jax.Array:
        out = f(*args)
        outs = out if isinstance(out, tuple) else (out,)
        return sum(jnp.sum(jnp.sin(o) * o**2) for o in outs)  # type: ignore[return-value]

    return loss


def _norm_inputs(seed: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    rng = np.random.default_rng(seed)
    x = jnp.asarray(rng.standard_normal((3, 5)))
    return x, jnp.asarray(rng.uniform(0.5, 1.5, 5)), jnp.asarray(rng.standard_normal(5))


def _assert_trees_close(got: Any, want: Any, what: str, **tols: float) -> None:
    got_leaves, want_leaves = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves), what
    for g, e in zip(got_leaves, want_leaves):
        np.testing.assert_allclose(g, e, err_msg=what, **tols)


F, R = jax.jacfwd, jax.jacrev
SECOND_ORDER = {
    "jacfwd(jacfwd)": lambda f, a: F(F(f, a), a),
    "jacfwd(jacrev)": lambda f, a: F(R(f, a), a),
    "jacrev(jacfwd)": lambda f, a: R(F(f, a), a),
}


@pytest.mark.heavy
@pytest.mark.parametrize("order", SECOND_ORDER)
def test_second_order_forward_and_mixed(order: str) -> None:
    """jax.jacfwd(jax.jacfwd(f)), jax.jacfwd(jax.jacrev(f)) and
    jax.jacrev(jax.jacfwd(f)) of log_softmax, rms_norm and layer_norm (under
    jit) against the same of the jax.nn / jnp references: every block of the
    Hessian, weight and bias included."""
    for name, ours, theirs, args in _norm_cases(*_norm_inputs(11)):
        argnums = tuple(range(len(args)))
        got = jax.jit(SECOND_ORDER[order](_scalar(ours), argnums))(*args)
        want = jax.jit(SECOND_ORDER[order](_scalar(theirs), argnums))(*args)
        _assert_trees_close(got, want, f"{order} of {name}", rtol=1e-9, atol=1e-10)


@pytest.mark.heavy
def test_second_order_check_grads() -> None:
    """check_grads in both modes to second order (JAX transposes tangent
    rules: it needs the second-order rows' tangent and gradient rules)."""
    x, w, b = _norm_inputs(12)
    for name, ours, _, args in _norm_cases(x, w, b):
        check_grads(ours, args, order=2, modes=["fwd", "rev"])


def _dot(a: Any, b: Any) -> jax.Array:
    return sum(jnp.vdot(p, q) for p, q in zip(a, b))  # type: ignore[return-value]


@pytest.mark.heavy
def test_third_order_through_the_second_order_rows() -> None:
    """Third order wherever the second-order rows are differentiated once
    more (their rules cover every output), contracted with random directions
    t, c (all arguments): forward over reverse over reverse (the rows' tangent
    rules) and reverse over reverse over forward (their gradient rules),
    under jit, against the references'."""
    x, w, b = _norm_inputs(13)
    rng = np.random.default_rng(15)

    def frr(f: Callable[..., Any], args: tuple[jax.Array, ...], t: Any, c: Any) -> Any:
        argnums = tuple(range(len(args)))
        vjp_of_grad = lambda *a: jax.vjp(jax.grad(f, argnums), *a)[1](c)  # noqa: E731
        return jax.jvp(vjp_of_grad, args, t)[1]

    def rrf(f: Callable[..., Any], args: tuple[jax.Array, ...], t: Any, c: Any) -> Any:
        argnums = tuple(range(len(args)))
        grad_of_jvp = jax.grad(lambda *a: jax.jvp(f, a, t)[1], argnums)
        return jax.grad(lambda *a: _dot(grad_of_jvp(*a), c), argnums)(*args)

    for name, ours, theirs, args in _norm_cases(x, w, b):
        t, c = (tuple(jnp.asarray(rng.standard_normal(a.shape)) for a in args) for _ in range(2))
        for order, nest in (("jacfwd(jacrev(jacrev))", frr), ("jacrev(jacrev(jacfwd))", rrf)):
            got = jax.jit(lambda *a: nest(_scalar(ours), a, t, c))(*args)
            want = jax.jit(lambda *a: nest(_scalar(theirs), a, t, c))(*args)
            _assert_trees_close(got, want, f"{order} of {name}", rtol=1e-8, atol=1e-9)


def test_third_order_forward_says_which_row_stops() -> None:
    """The rows of the second-order rows' tangents declare no rules: forward
    over forward over forward, and reverse over forward over forward, stop
    there with an error naming the row (never zeros)."""
    x, w, b = _norm_inputs(14)
    with pytest.raises(TypeError, match=r"opforge\.jax\.layer_norm_grad_grad_jvp has no forward mode"):
        F(F(F(lambda x: oj.layer_norm(x)[0].sum() ** 2)))(x)
    with pytest.raises(TypeError, match=r"opforge\.jax\.rms_norm_grad_grad_jvp\w* has no forward mode"):
        F(F(F(lambda x: jnp.sum(oj.rms_norm(x, w)[0] ** 3))))(x)
    with pytest.raises(TypeError, match=r"opforge\.jax\.log_softmax_grad_grad_jvp is not differentiable"):
        R(F(F(lambda x: jnp.sum(oj.log_softmax(x) ** 3))))(x)


def test_vmap() -> None:
    rng = np.random.default_rng(6)
    x = jnp.asarray(rng.standard_normal((4, 3, 7)))
    w = jnp.asarray(rng.uniform(0.5, 1.5, 7))
    np.testing.assert_allclose(jax.vmap(oj.softmax)(x), jax.nn.softmax(x), rtol=1e-12)
    got = jax.vmap(lambda v: oj.layer_norm(v, w, None)[0])(x)
    np.testing.assert_allclose(got, jnp_layer_norm(x, w, None, 1e-5)[0], rtol=1e-10, atol=1e-12)
    # a row with an output summed over the rows (dw) is run once per batch element
    dy = jnp.asarray(rng.standard_normal((4, 3, 7)))
    _, mean, rstd = oj.layer_norm(x)
    dws = jax.vmap(lambda d, v, m, r: oj.layer_norm_grad(v, m, r, d, w)[1])(dy, x, mean, rstd)
    for i in range(4):
        np.testing.assert_allclose(dws[i], oj.layer_norm_grad(x[i], mean[i], rstd[i], dy[i], w)[1], rtol=1e-12)


def test_bad_input() -> None:
    x = jnp.ones((4, 5), jnp.float32)
    with pytest.raises(ValueError, match=r"softmax: x must have rank 1 or more, got rank 0"):
        oj.softmax(jnp.float32(1.0))
    with pytest.raises(ValueError, match=r"layer_norm: shape mismatch: x is \[4,5\], w is \[4\]"):
        oj.layer_norm(x, jnp.ones(4, jnp.float32))
    with pytest.raises(TypeError, match=r"rms_norm"):
        oj.rms_norm(x, jnp.ones(5, jnp.float64))
    with pytest.raises(TypeError, match=r"softmax"):
        oj.softmax(jnp.ones((2, 3), jnp.int32))
