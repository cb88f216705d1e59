"""Ops written with the authoring layer (examples/ops/myops.c) as PyTorch
operators: values and gradients against PyTorch's own ops on every layout,
opcheck, torch.compile, errors."""

from __future__ import annotations

import shutil
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from oplib import compile_myops

import opforge.torch as ot

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


@pytest.fixture(scope="module")
def myops(tmp_path_factory: pytest.TempPathFactory) -> Any:
    ot.load_ops(compile_myops(tmp_path_factory.mktemp("torch_myops")))
    return torch.ops.myops


def layouts(dtype: torch.dtype) -> dict[str, torch.Tensor]:
    base = torch.randn(6, 40, dtype=dtype, generator=torch.Generator().manual_seed(0)) * 6
    return {
        "contiguous": base,
        "transposed": base.t(),
        "sliced": base[1::2, 3:37:3],
        "reversed": base.flip(0)[:, ::2],
        "broadcast": base[2].expand(5, 40),
        "0-d": base[0, 0],
        "empty": base[:0],
    }


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_values_match_torch(myops: Any, dtype: torch.dtype) -> None:
    for name, x in layouts(dtype).items():
        torch.testing.assert_close(myops.softplus(x), F.softplus(x), msg=name)
        torch.testing.assert_close(myops.my_op(x, factor=-0.5), x * -0.5, msg=name)
        if x.dim() > 0:
            torch.testing.assert_close(myops.rowsum(x), x.sum(-1), msg=name, rtol=1e-5, atol=1e-4)


def test_gradients_match_torch(myops: Any) -> None:
    for name, x in layouts(torch.float64).items():
        a = x.detach().clone().requires_grad_()
        b = x.detach().clone().requires_grad_()
        (myops.softplus(a) * myops.my_op(a, factor=3.0)).sum().backward()
        (F.softplus(b) * b * 3.0).sum().backward()
        torch.testing.assert_close(a.grad, b.grad, msg=name)
        if x.dim() > 0 and x.numel() > 0:
            a.grad = b.grad = None
            (myops.rowsum(a) ** 2).sum().backward()
            (b.sum(-1) ** 2).sum().backward()
            torch.testing.assert_close(a.grad, b.grad, msg=name)


def test_gradcheck(myops: Any) -> None:
    x = torch.randn(4, 7, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(myops.softplus, (x,))
    assert torch.autograd.gradcheck(lambda v: myops.my_op(v, factor=-1.5), (x,))
    assert torch.autograd.gradcheck(myops.rowsum, (x,))
    assert torch.autograd.gradgradcheck(myops.rowsum, (x,))  # rowsum_grad declares its own gradient


@pytest.mark.parametrize("op, args", [("softplus", (torch.randn(3, 5),)), ("rowsum", (torch.randn(2, 3, 4),))])
def test_opcheck(myops: Any, op: str, args: tuple[torch.Tensor, ...]) -> None:
    result = torch.library.opcheck(getattr(myops, op).default, args)
    assert all(v == "SUCCESS" for v in result.values()), result


def test_compile_fullgraph(myops: Any) -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return myops.rowsum(myops.softplus(myops.my_op(x, factor=0.5)))

    x = torch.randn(8, 16)
    torch.testing.assert_close(torch.compile(f, fullgraph=True)(x), f(x))


def test_errors_name_the_op(myops: Any) -> None:
    with pytest.raises(RuntimeError, match=r"myops::rowsum: x must have rank 1 or more, got rank 0"):
        myops.rowsum(torch.tensor(1.0))
    with pytest.raises(RuntimeError, match=r"myops::softplus_grad: shape mismatch: dy is \[3\], x is \[4\]"):
        myops.softplus_grad(torch.ones(3), torch.ones(4))
    with pytest.raises(RuntimeError, match=r"myops::softplus: x has dtype int32"):
        myops.softplus(torch.ones(3, dtype=torch.int32))
