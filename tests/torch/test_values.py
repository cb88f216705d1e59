"""Results match torch's built-ins on random and edge inputs."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import opforge.torch as ot

DTYPES = [torch.float32, torch.float64]
SPECIAL = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e-45, -3.0, 2.0]


def inputs(dtype: torch.dtype) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    base = torch.randn(6, 10, generator=g, dtype=dtype)
    return [
        base,
        torch.empty(0, dtype=dtype),
        torch.empty(3, 0, 2, dtype=dtype),
        torch.tensor(-1.5, dtype=dtype),  # 0-d
        torch.tensor(SPECIAL, dtype=dtype),
        base.t(),  # transposed
        base[::2, 1::3],  # strided
        base.flip(1),  # negative strides in torch's sense (a copy) / any order
        torch.randn(2, 3, 4, generator=g, dtype=dtype).permute(2, 0, 1),
        torch.randn(1, generator=g, dtype=dtype).expand(5),  # zero stride
        torch.randn(1 << 20, generator=g, dtype=dtype),  # large: the threaded path
    ]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_relu(dtype: torch.dtype) -> None:
    for x in inputs(dtype):
        torch.testing.assert_close(torch.ops.opforge.relu(x), torch.relu(x), rtol=0, atol=0, equal_nan=True)
        assert ot.relu(x).is_contiguous()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_relu_in_place(dtype: torch.dtype) -> None:
    for x in inputs(dtype):
        if x.stride() and 0 in x.stride() and x.numel() > 1:
            continue  # torch refuses in-place ops on overlapping memory too
        expected = torch.relu(x)
        y = x.clone() if x.is_contiguous() else x.clone().transpose(0, -1).contiguous().transpose(0, -1)
        assert ot.relu_(y) is y
        torch.testing.assert_close(y, expected, rtol=0, atol=0, equal_nan=True)
    base = torch.randn(4, 6, dtype=dtype)
    view = base[:, ::2]  # writes through a view: the base sees it
    expected = base.clone()
    expected[:, ::2] = torch.relu(expected[:, ::2])
    torch.ops.opforge.relu_(view)
    torch.testing.assert_close(base, expected, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_scale(dtype: torch.dtype) -> None:
    for x in inputs(dtype):
        for alpha in (2.5, -1.0, 0.0, 1e300):
            expected = torch.mul(x, alpha)  # alpha rounded to x's dtype, as opforge does
            torch.testing.assert_close(ot.scale(x, alpha=alpha), expected, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_add(dtype: torch.dtype) -> None:
    for x in inputs(dtype):
        y = torch.randn(x.shape, dtype=dtype).flip(0) if x.dim() else torch.tensor(0.25, dtype=dtype)
        torch.testing.assert_close(ot.add(x, y), torch.add(x, y), rtol=0, atol=0, equal_nan=True)
    x = inputs(dtype)[0]
    torch.testing.assert_close(ot.add(x, x), x + x, rtol=0, atol=0)  # aliased inputs


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(1, 1, 1), (7, 13, 5), (64, 100, 33), (0, 4, 3), (3, 0, 2), (2, 3, 0), (300, 70, 129)])
def test_dense_matches_linear(dtype: torch.dtype, shape: tuple[int, int, int]) -> None:
    n, k, m = shape
    g = torch.Generator().manual_seed(n * 1000 + k * 10 + m)
    x = torch.randn(n, k, generator=g, dtype=dtype)
    w = torch.randn(k, m, generator=g, dtype=dtype)
    b = torch.randn(m, generator=g, dtype=dtype)
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 1e-12, "atol": 1e-12}
    torch.testing.assert_close(ot.dense(x, w, b), F.linear(x, w.t(), b), **tol)
    torch.testing.assert_close(ot.dense(x, w, b, activation="relu"), torch.relu(F.linear(x, w.t(), b)), **tol)
    torch.testing.assert_close(ot.dense(x, w), F.linear(x, w.t()), **tol)
    # non-contiguous operands
    torch.testing.assert_close(ot.dense(x.t().contiguous().t(), w.t().contiguous().t(), b), F.linear(x, w.t(), b), **tol)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_dense_special_values(dtype: torch.dtype) -> None:
    x = torch.tensor([[float("nan"), 1.0], [float("inf"), 2.0], [1.0, 1.0]], dtype=dtype)
    w = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=dtype)
    torch.testing.assert_close(ot.dense(x, w), x @ w, equal_nan=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gradient_ops_match_autograd(dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(3)
    x = torch.randn(5, 4, generator=g, dtype=dtype, requires_grad=True)
    w = torch.randn(4, 3, generator=g, dtype=dtype, requires_grad=True)
    b = torch.randn(3, generator=g, dtype=dtype, requires_grad=True)
    dy = torch.randn(5, 3, generator=g, dtype=dtype)
    y = torch.relu(F.linear(x, w.t(), b))
    dx, dw, db = torch.autograd.grad(y, (x, w, b), dy)
    got = ot.dense_grad(dy, x.detach(), w.detach(), y.detach(), activation="relu")
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {}
    for a, e in zip(got, (dx, dw, db)):
        torch.testing.assert_close(a, e, **tol)
    xs = torch.tensor([-1.0, 0.0, 2.0, float("nan")], dtype=dtype)
    dys = torch.ones(4, dtype=dtype)
    expected = torch.ops.aten.threshold_backward(dys, xs, 0)
    torch.testing.assert_close(ot.relu_grad(dys, xs), expected, equal_nan=True)


def test_autograd_through_an_expression() -> None:
    g = torch.Generator().manual_seed(4)
    x = torch.randn(8, 6, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(6, 4, generator=g, dtype=torch.float64, requires_grad=True)
    b = torch.randn(4, generator=g, dtype=torch.float64, requires_grad=True)
    y = ot.scale(ot.add(ot.relu(ot.dense(x, w, b)), ot.dense(x, w, b, activation="relu")), alpha=0.5).sum()
    ref = (0.5 * (torch.relu(x @ w + b) + torch.relu(x @ w + b))).sum()
    got = torch.autograd.grad(y, (x, w, b))
    want = torch.autograd.grad(ref, (x, w, b))
    for a, e in zip(got, want):
        torch.testing.assert_close(a, e)
