"""Broadcasting add and mul (and their gradient rows sum_to, mul_grad) as
torch operators, against torch.add / torch.mul and their autograd: values,
gradients to second order in both modes, torch.func transforms, compile with
dynamic shapes, and errors."""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch
from references import BROADCAST_PAIRS as PAIRS
from torch.func import grad, hessian, jacfwd, jacrev, jvp, vmap

import opforge.torch as ot

F64 = torch.float64
ops = torch.ops.opforge
DTYPES = [torch.float32, torch.float64]

THEIRS: dict[str, Callable[..., torch.Tensor]] = {"add": torch.add, "mul": torch.mul}


def rand(shape: tuple[int, ...], dtype: torch.dtype = F64, seed: int = 0, layout: str = "contiguous") -> torch.Tensor:
    """Values away from 0, in a contiguous, transposed, strided or expanded layout."""
    t = torch.randn(shape, dtype=dtype, generator=torch.Generator().manual_seed(seed)) + 0.5
    if layout == "transposed" and t.dim() > 1:
        return t.mT.contiguous().mT
    if layout == "strided" and t.dim() > 0:
        return torch.stack([t, t], dim=-1)[..., 0]
    if layout == "expanded" and t.dim() > 0 and t.shape[0] > 0:  # a zero stride on dim 0
        return t[:1].expand(t.shape)
    return t


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("sa,sb", PAIRS)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided", "expanded"])
@pytest.mark.parametrize("name", ["add", "mul"])
def test_values_match_torch(name: str, dtype: torch.dtype, sa: Any, sb: Any, layout: str) -> None:
    a, b = rand(sa, dtype, 1, layout), rand(sb, dtype, 2, "contiguous" if layout == "expanded" else layout)
    ours = getattr(ot, name)(a, b)
    torch.testing.assert_close(ours, THEIRS[name](a, b), rtol=0, atol=0)
    assert ours.shape == torch.broadcast_shapes(sa, sb) and ours.dtype == dtype


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("sa,sb", PAIRS)
@pytest.mark.parametrize("name", ["add", "mul"])
def test_gradients_match_torch(name: str, dtype: torch.dtype, sa: Any, sb: Any) -> None:
    """Each input's gradient is the output's summed over the dims it broadcasts along."""
    a, b = rand(sa, dtype, 3).requires_grad_(), rand(sb, dtype, 4).requires_grad_()
    w = rand(torch.broadcast_shapes(sa, sb), dtype, 5)
    ours = torch.autograd.grad((getattr(ot, name)(a, b) * w).sum(), (a, b))
    theirs = torch.autograd.grad((THEIRS[name](a, b) * w).sum(), (a, b))
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {}
    for o, t in zip(ours, theirs):
        assert o.shape == t.shape
        torch.testing.assert_close(o, t, **tol)


def ops_run(fn: Callable[[], Any]) -> list[str]:
    """The opforge operators fn runs (torch's profiler records each)."""
    with torch.autograd.profiler.profile() as prof:
        fn()
    return [e.name for e in prof.function_events if e.name.startswith("opforge::")]


def test_same_shape_add_passes_its_gradient_through() -> None:
    """sum_to is OPF_OP_PASS_THROUGH: where an input has the output's shape,
    its gradient is the incoming one itself (no kernel runs, no copy); where
    it broadcasts, the gradient is summed."""
    a, b = rand((3, 4)).requires_grad_(), rand((4,), seed=1).requires_grad_()
    same = rand((3, 4), seed=2).requires_grad_()
    g = rand((3, 4), seed=3)
    y = ot.add(ot.add(a, b), same)
    run = ops_run(lambda: torch.autograd.grad(y, (a, b, same), g, retain_graph=True))
    assert run.count("opforge::sum_to") == 1  # b's, the one that sums
    ga, gb, gs = torch.autograd.grad(y, (a, b, same), g)
    assert ga.data_ptr() == g.data_ptr() and gs.data_ptr() == g.data_ptr()
    torch.testing.assert_close(gb, g.sum(0), rtol=0, atol=1e-15)
    # Forward mode: a tangent of the output's shape passes through too; one
    # that broadcasts runs the row.
    assert "opforge::sum_to" not in ops_run(lambda: jvp(lambda x: ot.add(x, same.detach()), (a.detach(),), (g,)))
    _, t = jvp(lambda x: ot.add(x, same.detach()), (a.detach(),), (g,))
    torch.testing.assert_close(t, g, rtol=0, atol=0)
    assert "opforge::sum_to" in ops_run(lambda: jvp(lambda x: ot.add(a.detach(), x), (b.detach(),), (g[0],)))
    _, t = jvp(lambda x: ot.add(a.detach(), x), (b.detach(),), (g[0],))
    torch.testing.assert_close(t, g[0].expand(3, 4), rtol=0, atol=0)


def test_gradcheck_and_gradgradcheck() -> None:
    """float64, both modes, to second order (the gradient rows sum_to and
    mul_grad have their own gradient and tangent rules)."""
    for sa, sb in [((3, 1), (1, 4)), ((4,), (2, 3, 4)), ((), (2, 3)), ((2, 3), (2, 3))]:
        a, b = rand(sa, seed=6).requires_grad_(), rand(sb, seed=7).requires_grad_()
        for f in (ops.add, ops.mul):
            assert torch.autograd.gradcheck(f, (a, b), check_forward_ad=True)
            assert torch.autograd.gradgradcheck(f, (a, b), check_fwd_over_rev=True)
    x, like = rand((2, 3, 4), seed=8).requires_grad_(), rand((3, 1), seed=9)
    assert torch.autograd.gradgradcheck(ops.sum_to, (x, like), check_fwd_over_rev=True)
    dy, other = rand((2, 3, 4), seed=10).requires_grad_(), rand((3, 1), seed=11).requires_grad_()
    assert torch.autograd.gradgradcheck(lambda d, o: ops.mul_grad(d, o, like), (dy, other), check_fwd_over_rev=True)


def test_second_order_matches_torch() -> None:
    a, b = rand((3, 1), seed=12), rand((2, 1, 4), seed=13)
    f_ours = lambda u, v: (ops.mul(ops.mul(u, v), ops.add(u, v)) ** 2).sum()  # noqa: E731
    f_theirs = lambda u, v: ((u * v * (u + v)) ** 2).sum()  # noqa: E731
    for argnums in (0, 1):
        torch.testing.assert_close(hessian(f_ours, argnums=argnums)(a, b), hessian(f_theirs, argnums=argnums)(a, b))
        torch.testing.assert_close(
            jacrev(jacrev(f_ours, argnums=argnums), argnums=argnums)(a, b),
            hessian(f_theirs, argnums=argnums)(a, b),
        )
    torch.testing.assert_close(grad(f_ours)(a, b), grad(f_theirs)(a, b))
    ta, tb = rand((3, 1), seed=14), rand((2, 1, 4), seed=15)
    ours = jvp(lambda u, v: ops.mul(u, v), (a, b), (ta, tb))
    theirs = jvp(torch.mul, (a, b), (ta, tb))
    torch.testing.assert_close(ours, theirs)
    torch.testing.assert_close(jacfwd(ops.add, argnums=(0, 1))(a, b), jacfwd(torch.add, argnums=(0, 1))(a, b))


def test_vmap_batches_in_one_call() -> None:
    xs, b, bs = rand((6, 4, 5), seed=16), rand((5,), seed=17), rand((6, 1), seed=18)
    torch.testing.assert_close(vmap(ops.add, in_dims=(0, None))(xs, b), xs + b)
    torch.testing.assert_close(vmap(ops.mul, in_dims=(0, 0))(xs, bs), xs * bs[:, None, :])
    torch.testing.assert_close(vmap(ops.mul, in_dims=(None, 2))(b[:4], xs), xs.movedim(2, 0) * b[:4])
    torch.testing.assert_close(vmap(ops.sum_to, in_dims=(0, None))(xs, b), xs.sum(1))
    torch.testing.assert_close(vmap(ops.sum_to, in_dims=(0, 0))(xs, bs), xs.sum((1, 2)).reshape(6, 1))
    torch.testing.assert_close(vmap(ops.sum_to, in_dims=(None, 0))(b, xs), b.expand(6, 4, 5))
    torch.testing.assert_close(vmap(ops.mul_grad, in_dims=(0, None, None))(xs, b, b), (xs * b).sum(1))


@pytest.mark.parametrize("dynamic", [False, True])
def test_compile(dynamic: bool) -> None:
    def f(x: torch.Tensor, bias: torch.Tensor, gain: torch.Tensor) -> torch.Tensor:
        return ot.mul(ot.add(x, bias), gain)

    compiled = torch.compile(f, fullgraph=True, dynamic=dynamic, backend="aot_eager")
    for n in (3, 5, 7):
        x = rand((n, 4, 8), seed=n).requires_grad_()
        bias, gain = rand((8,), seed=19).requires_grad_(), rand((4, 1), seed=20).requires_grad_()
        ours = compiled(x, bias, gain)
        torch.testing.assert_close(ours, (x + bias) * gain)
        got = torch.autograd.grad(ours.sum(), (x, bias, gain))
        want = torch.autograd.grad(((x + bias) * gain).sum(), (x, bias, gain))
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w)


def test_meta_tensors_take_the_broadcast_shape() -> None:
    a, b = torch.empty(3, 1, device="meta"), torch.empty(2, 1, 4, device="meta")
    assert ops.add(a, b).shape == (2, 3, 4)
    assert ops.sum_to(torch.empty(2, 3, 4, device="meta"), a).shape == (3, 1)


def test_shapes_that_do_not_broadcast() -> None:
    for f in (ops.add, ops.mul):
        name = f.default.name().split("::")[1]
        with pytest.raises(
            RuntimeError,
            match=rf"opforge::{name}: shape mismatch: a is \[2,3\], b is \[4\]; they must broadcast together "
            r"\(dim -1: 3 vs 4\)",
        ):
            f(torch.ones(2, 3), torch.ones(4))
        with pytest.raises(RuntimeError, match=rf"opforge::{name}: shape mismatch: a is \[2,3\], b is \[4\]"):
            f(torch.ones(2, 3, device="meta"), torch.ones(4, device="meta"))  # the fake kernel says the same
    with pytest.raises(RuntimeError, match=r"opforge::sum_to: shape mismatch: x is \[2,3\], like is \[2\]"):
        ops.sum_to(torch.ones(2, 3), torch.ones(2))


def test_out_of_place_only_for_summed_outputs() -> None:
    """The library refuses a summed output over an input; the operator always allocates."""
    like = torch.ones(1, 3)
    y = ops.sum_to(torch.ones(2, 3), like)
    assert y.data_ptr() != like.data_ptr()
    torch.testing.assert_close(y, torch.full((1, 3), 2.0))
