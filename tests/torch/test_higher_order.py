"""Second derivatives and torch.func transforms through opforge's ops,
compared with the same computations on PyTorch's own ops."""

from __future__ import annotations

import contextlib
import shutil
import warnings
from typing import Any, Callable, Iterator

import pytest
import torch
import torch.nn.functional as F
from oplib import compile_myops
from torch.autograd import gradcheck, gradgradcheck
from torch.func import grad, hessian, jacfwd, jacrev, jvp, vmap

import opforge.torch  # noqa: F401  (registers torch.ops.opforge)

F64 = torch.float64
ops = torch.ops.opforge


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def away_from_zero(t: torch.Tensor) -> torch.Tensor:
    """Values at least 0.3 from 0 (no relu kink within a gradcheck step)."""
    return t + 0.3 * torch.where(t >= 0, 1.0, -1.0).to(t.dtype)


def dense_inputs(noncontiguous: bool, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = gen(seed)
    if noncontiguous:
        x = torch.randn(4, 10, dtype=F64, generator=g)[:, ::2]  # [4, 5], column stride 2
        w = torch.randn(3, 5, dtype=F64, generator=g).t()  # [5, 3], transposed
        b = torch.randn(6, dtype=F64, generator=g)[::2]
    else:
        x = torch.randn(4, 5, dtype=F64, generator=g)
        w = torch.randn(5, 3, dtype=F64, generator=g)
        b = torch.randn(3, dtype=F64, generator=g)
    # Pre-activations away from 0: shift b per column so that x @ w + b has no value near 0.
    z = x @ w + b
    b = b + 0.5 * torch.where(z.mean(0) >= 0, 1.0, -1.0).to(F64)
    z = x @ w + b
    assert (z.abs() > 1e-2).all()
    return x, w, b


@pytest.mark.parametrize("noncontiguous", [False, True], ids=["contiguous", "strided"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("activation", ["none", "relu"])
def test_dense_gradgradcheck(activation: str, bias: bool, noncontiguous: bool) -> None:
    x, w, b = dense_inputs(noncontiguous)
    args = tuple(t.clone().requires_grad_() for t in ((x, w, b) if bias else (x, w)))
    if noncontiguous:  # keep the strided layouts
        args = tuple(t.detach().requires_grad_() for t in ((x, w, b) if bias else (x, w)))

    def f(*a: torch.Tensor) -> torch.Tensor:
        return ops.dense(a[0], a[1], a[2] if len(a) > 2 else None, activation=activation)

    assert gradcheck(f, args)
    assert gradgradcheck(f, args)


@pytest.mark.parametrize("activation", ["none", "relu"])
def test_dense_second_derivative_matches_torch(activation: str) -> None:
    x, w, b = dense_inputs(False, seed=1)

    def loss(fn: Callable[..., torch.Tensor], x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return (fn(x, w, b) ** 3).sum()

    def ours(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return ops.dense(x, w, b, activation=activation)

    def theirs(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        y = F.linear(x, w.t(), b)
        return torch.relu(y) if activation == "relu" else y

    results = []
    for fn in (ours, theirs):
        leaves = [t.clone().requires_grad_() for t in (x, w, b)]
        first = torch.autograd.grad(loss(fn, *leaves), leaves, create_graph=True)
        second = torch.autograd.grad(sum((g * g).sum() for g in first), leaves)
        results.append(second)
    for a, e in zip(*results):
        torch.testing.assert_close(a, e)


def test_dense_third_order_rows_are_differentiable() -> None:
    """dense_grad_grad declares gradient and tangent rules: its derivative
    matches PyTorch's of the same bilinear formula, in both modes."""
    x, w, b = dense_inputs(False, seed=7)
    g = gen(8)
    dy, ddx, ddw = torch.randn(4, 3, dtype=F64, generator=g), torch.randn(4, 5, dtype=F64, generator=g), torch.randn(5, 3, dtype=F64, generator=g)

    def ours(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor, ddx: torch.Tensor, ddw: torch.Tensor) -> torch.Tensor:
        gdy, gx, gw = ops.dense_grad_grad(dy, x, w, None, ddx, ddw, b)
        return (gdy**2).sum() + (gx**2).sum() + (gw**2).sum()

    def theirs(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor, ddx: torch.Tensor, ddw: torch.Tensor) -> torch.Tensor:
        gdy, gx, gw = ddx @ w + x @ ddw + b, dy @ ddw.t(), ddx.t() @ dy
        return (gdy**2).sum() + (gx**2).sum() + (gw**2).sum()

    args = (dy, x, w, ddx, ddw)
    for a, e in zip(grad(ours, argnums=tuple(range(5)))(*args), grad(theirs, argnums=tuple(range(5)))(*args)):
        torch.testing.assert_close(a, e)
    for a, e in zip(jacfwd(ours, argnums=tuple(range(5)))(*args), jacfwd(theirs, argnums=tuple(range(5)))(*args)):
        torch.testing.assert_close(a, e)


# --- torch.func --------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def no_fallback() -> Iterator[None]:
    """Fails on vmap's slow-fallback warning (an op without a batching rule)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*fallback.*")
        yield


def test_func_grad_relu() -> None:
    x = torch.randn(7, dtype=F64, generator=gen())
    torch.testing.assert_close(grad(lambda t: ops.relu(t).sum())(x), grad(lambda t: torch.relu(t).sum())(x))
    torch.testing.assert_close(
        grad(lambda t: (ops.scale(t, alpha=3.0) ** 3).sum())(x), grad(lambda t: ((3 * t) ** 3).sum())(x)
    )


@pytest.mark.parametrize("activation", ["none", "relu"])
def test_func_jacrev_dense(activation: str) -> None:
    x, w, b = dense_inputs(False, seed=2)

    def theirs(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        y = F.linear(x, w.t(), b)
        return torch.relu(y) if activation == "relu" else y

    ours = lambda x, w, b: ops.dense(x, w, b, activation=activation)  # noqa: E731
    with no_fallback():
        for a, e in zip(jacrev(ours, argnums=(0, 1, 2))(x, w, b), jacrev(theirs, argnums=(0, 1, 2))(x, w, b)):
            torch.testing.assert_close(a, e)


@pytest.mark.parametrize("activation", ["none", "relu"])
def test_func_second_order_dense(activation: str) -> None:
    """jacrev of jacrev (reverse over reverse) and vmap of grad through dense."""
    x, w, b = dense_inputs(False, seed=3)

    def theirs(w: torch.Tensor) -> torch.Tensor:
        y = F.linear(x, w.t(), b)
        return ((torch.relu(y) if activation == "relu" else y) ** 3).sum()

    def ours(w: torch.Tensor) -> torch.Tensor:
        return (ops.dense(x, w, b, activation=activation) ** 3).sum()

    with no_fallback():
        torch.testing.assert_close(jacrev(jacrev(ours))(w), jacrev(jacrev(theirs))(w))
        ws = torch.randn(5, *w.shape, dtype=F64, generator=gen(4))
        torch.testing.assert_close(vmap(grad(ours))(ws), vmap(grad(theirs))(ws))


@pytest.mark.parametrize("activation", ["none", "relu"])
def test_func_forward_mode_dense(activation: str) -> None:
    """jvp, jacfwd and hessian (jacfwd of jacrev) through dense, against the
    same transforms of PyTorch's own ops."""
    x, w, b = dense_inputs(False, seed=5)

    def theirs(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        y = F.linear(x, w.t(), b)
        return torch.relu(y) if activation == "relu" else y

    ours = lambda x, w, b: ops.dense(x, w, b, activation=activation)  # noqa: E731
    tangents = (torch.randn_like(x), torch.randn_like(w), torch.randn_like(b))
    with no_fallback():
        for a, e in zip(jvp(ours, (x, w, b), tangents), jvp(theirs, (x, w, b), tangents)):
            torch.testing.assert_close(a, e)
        for a, e in zip(jacfwd(ours, argnums=(0, 1, 2))(x, w, b), jacfwd(theirs, argnums=(0, 1, 2))(x, w, b)):
            torch.testing.assert_close(a, e)
        cube = lambda f: lambda w: (f(x, w, b) ** 3).sum()  # noqa: E731
        torch.testing.assert_close(hessian(cube(ours))(w), hessian(cube(theirs))(w))


def test_func_forward_mode_elementwise() -> None:
    x = away_from_zero(torch.randn(3, 4, dtype=F64, generator=gen(6)))
    y = torch.randn(3, 4, dtype=F64, generator=gen(7))
    with no_fallback():
        torch.testing.assert_close(hessian(lambda t: (ops.scale(t, alpha=2.0) ** 3).sum())(x[0]),
                                   hessian(lambda t: ((2 * t) ** 3).sum())(x[0]))
        torch.testing.assert_close(hessian(lambda t: (ops.relu(t) ** 3).sum())(x[0]),
                                   hessian(lambda t: (torch.relu(t) ** 3).sum())(x[0]))
        torch.testing.assert_close(jacfwd(ops.add, argnums=(0, 1))(x[0], y[0]), jacfwd(torch.add, argnums=(0, 1))(x[0], y[0]))
        torch.testing.assert_close(jvp(lambda t: ops.relu_grad(t, x), (y,), (x,))[1], torch.where(x > 0, x, 0.0))


def test_forward_over_forward_adds_the_rules_contributions() -> None:
    """A row whose tangent is the sum of several rules' (mul: a' b + a b'),
    under nested forward transforms, a factor held fixed: the lower level's
    tangent survives the sum (torch runs a jvp with forward grad off)."""
    x = torch.randn(3, 4, dtype=F64, generator=gen(10))
    b = torch.randn(4, dtype=F64, generator=gen(11))
    t1, t2 = torch.randn(3, 4, dtype=F64, generator=gen(12)), torch.randn(3, 4, dtype=F64, generator=gen(13))
    with no_fallback():
        for ours, theirs in ((lambda t: ops.mul(ops.mul(t, t), b), lambda t: t * t * b),
                             (lambda t: ops.mul(t, t), lambda t: t * t)):  # fmt: skip
            twice = lambda f: jvp(lambda t: jvp(f, (t,), (t1,))[1], (x,), (t2,))[1]  # noqa: E731
            torch.testing.assert_close(twice(ours), twice(theirs))
            cube = lambda f: lambda t: (f(t) ** 3).sum()  # noqa: E731
            torch.testing.assert_close(jacfwd(jacfwd(cube(ours)))(x), jacfwd(jacfwd(cube(theirs)))(x))


def test_forward_ad_dual_tensors() -> None:
    """torch.autograd.forward_ad: the tangent of a dual tensor flows through
    an op whose inputs do not require grad (never dropped)."""
    import torch.autograd.forward_ad as fwAD

    x = torch.randn(4, 3, dtype=F64, generator=gen(8))
    t = torch.randn(4, 3, dtype=F64, generator=gen(9))
    with fwAD.dual_level():
        out = fwAD.unpack_dual(ops.relu(fwAD.make_dual(x, t)))
    torch.testing.assert_close(out.primal, torch.relu(x))
    torch.testing.assert_close(out.tangent, torch.where(x > 0, t, 0.0))


def test_vmap_elementwise_and_dense() -> None:
    xs = torch.randn(6, 4, 5, dtype=F64, generator=gen(5))
    ys = torch.randn(4, 6, 5, dtype=F64, generator=gen(6))
    x, w, b = dense_inputs(False, seed=7)
    with no_fallback():
        torch.testing.assert_close(vmap(ops.relu)(xs), torch.relu(xs))
        torch.testing.assert_close(vmap(ops.add, in_dims=(0, 1))(xs, ys), xs + ys.movedim(1, 0))
        torch.testing.assert_close(vmap(ops.add, in_dims=(0, None))(xs, ys[:, 0]), xs + ys[:, 0])
        torch.testing.assert_close(vmap(lambda t: ops.scale(t, alpha=-2.0), in_dims=1)(xs), -2 * xs.movedim(1, 0))
        xb = torch.randn(3, 4, 5, dtype=F64, generator=gen(8))
        torch.testing.assert_close(
            vmap(lambda t: ops.dense(t, w, b, activation="relu"))(xb), torch.relu(F.linear(xb, w.t(), b))
        )
        wb = torch.randn(3, 5, 3, dtype=F64, generator=gen(9))
        torch.testing.assert_close(
            vmap(lambda v: ops.dense(x, v, None), in_dims=0)(wb), torch.stack([x @ v for v in wb])
        )


def test_vmap_batches_elementwise_rows_in_one_call() -> None:
    """A row whose inputs all have "..." is called once for the whole batch."""
    calls: list[Any] = []
    xs = torch.randn(9, 4, dtype=F64, generator=gen())
    with _Spy(torch.ops.opforge.relu.default, calls):
        vmap(ops.relu)(xs)
    assert calls == [(9, 4)]


class _Spy(torch.utils._python_dispatch.TorchDispatchMode):
    """Records the input shapes of one operator's calls."""

    def __init__(self, op: Any, calls: list[Any]) -> None:
        super().__init__()
        self.op, self.calls = op, calls

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func is self.op:
            self.calls.append(tuple(args[0].shape))
        return func(*args, **(kwargs or {}))


# --- user ops (examples/ops/myops.c) -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def myops(tmp_path_factory: pytest.TempPathFactory) -> Any:
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc")
    opforge.torch.load_ops(compile_myops(tmp_path_factory.mktemp("torch_myops_func")))
    return torch.ops.myops


def test_func_user_ops(myops: Any) -> None:
    x = torch.randn(4, 6, dtype=F64, generator=gen(10))
    with no_fallback():
        torch.testing.assert_close(grad(lambda t: myops.softplus(t).sum())(x), grad(lambda t: F.softplus(t).sum())(x))
        torch.testing.assert_close(jacrev(myops.softplus)(x), jacrev(F.softplus)(x))
        torch.testing.assert_close(vmap(myops.softplus)(x), F.softplus(x))
        torch.testing.assert_close(vmap(myops.rowsum)(x), x.sum(-1))
        torch.testing.assert_close(vmap(myops.rowsum, in_dims=1)(x), x.sum(0))
        torch.testing.assert_close(jacrev(myops.rowsum)(x), jacrev(lambda t: t.sum(-1))(x))
        torch.testing.assert_close(
            jacrev(jacrev(lambda t: myops.my_op(t, factor=3.0).pow(3).sum()))(x[0]),
            jacrev(jacrev(lambda t: (3 * t).pow(3).sum()))(x[0]),
        )
        torch.testing.assert_close(
            vmap(grad(lambda t: myops.rowsum(t).pow(2).sum()))(x), vmap(grad(lambda t: t.sum(-1).pow(2).sum()))(x)
        )
        # forward mode from the tangent rules myops.c declares
        torch.testing.assert_close(jacfwd(myops.softplus)(x[0]), jacfwd(F.softplus)(x[0]))
        torch.testing.assert_close(jacfwd(myops.rowsum)(x), jacfwd(lambda t: t.sum(-1))(x))
        torch.testing.assert_close(
            hessian(lambda t: myops.rowsum(t).pow(3).sum())(x[0]), hessian(lambda t: t.sum(-1).pow(3).sum())(x[0])
        )


def test_user_op_without_tangent_rule_says_so(myops: Any) -> None:
    """softplus_grad declares no tangent rule: forward mode through it raises,
    naming it, and hessian of softplus (forward over reverse) does too."""
    x = torch.randn(5, dtype=F64, generator=gen(11))
    with pytest.raises(RuntimeError, match=r"myops::softplus_grad has no forward mode: its table row declares no tangent rule"):
        jvp(lambda t: myops.softplus_grad(t, x), (x,), (x,))
    with pytest.raises(RuntimeError, match=r"myops::softplus_grad has no forward mode"):
        hessian(lambda t: myops.softplus(t).sum())(x)


def test_vmap_over_an_empty_batch() -> None:
    """A batch of size 0 through a row batched per element (dense): the
    shapes come from the table's rules, as torch's own ops give them."""
    x, w = torch.randn(0, 4, 5, dtype=F64), torch.randn(5, 3, dtype=F64)
    with no_fallback():
        got = vmap(lambda t: ops.dense(t, w))(x)
        assert got.shape == vmap(lambda t: t @ w)(x).shape == (0, 4, 3)
        with pytest.raises(RuntimeError, match="dense"):
            vmap(lambda t: ops.dense(t, w))(torch.randn(0, 4, 6, dtype=F64))
