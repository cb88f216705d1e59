"""The activations (torch.ops.opforge.gelu, silu, sigmoid, tanh and their gradient
rows) against PyTorch's own: F.gelu (both approximations), F.silu, torch.sigmoid,
torch.tanh; values, first and second derivatives in both modes, gradcheck and
gradgradcheck (non-contiguous inputs too), torch.compile, special values and
bad input."""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch
import torch.nn.functional as F

import opforge.torch  # noqa: F401  (registers torch.ops.opforge)
from opforge.torch import nn as onn

ops = torch.ops.opforge

# (name, opforge function, PyTorch's function)
PAIRS: list[tuple[str, Callable[..., torch.Tensor], Callable[..., torch.Tensor]]] = [
    ("gelu", lambda x: ops.gelu(x), lambda x: F.gelu(x)),
    ("gelu_tanh", lambda x: ops.gelu(x, approximate="tanh"), lambda x: F.gelu(x, approximate="tanh")),
    ("silu", lambda x: ops.silu(x), F.silu),
    ("sigmoid", lambda x: ops.sigmoid(x), torch.sigmoid),
    ("tanh", lambda x: ops.tanh(x), torch.tanh),
]
IDS = [p[0] for p in PAIRS]
DTYPES = [torch.float32, torch.float64]


def grid(dtype: torch.dtype, lo: float = -8.0, hi: float = 8.0, n: int = 4001) -> torch.Tensor:
    return torch.linspace(lo, hi, n, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name, ours, theirs", PAIRS, ids=IDS)
def test_values(name: str, ours: Callable[..., torch.Tensor], theirs: Callable[..., torch.Tensor],
                dtype: torch.dtype) -> None:
    x = grid(dtype)
    torch.testing.assert_close(ours(x), theirs(x))
    # a non-contiguous view
    xt = torch.randn(6, 5, dtype=dtype).t()[:, ::2]
    torch.testing.assert_close(ours(xt), theirs(xt))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name, ours, theirs", PAIRS, ids=IDS)
def test_first_and_second_derivatives(name: str, ours: Callable[..., torch.Tensor],
                                      theirs: Callable[..., torch.Tensor], dtype: torch.dtype) -> None:
    """dy f'(x) and the gradient of that (f''), reverse over reverse, against PyTorch's
    own backward and double backward."""
    x0 = grid(dtype, -6.0, 6.0, 1001)
    dy = torch.randn_like(x0)
    results = []
    for f in (ours, theirs):
        x = x0.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(f(x), x, dy, create_graph=True)
        (gg,) = torch.autograd.grad(g, x, torch.ones_like(g))
        results.append((g, gg))
    tol: dict[str, Any] = {} if dtype == torch.float64 else {"rtol": 1e-5, "atol": 1e-5}
    torch.testing.assert_close(results[0][0], results[1][0], **tol)
    torch.testing.assert_close(results[0][1], results[1][1], **tol)


@pytest.mark.parametrize("name, ours, theirs", PAIRS, ids=IDS)
def test_forward_mode(name: str, ours: Callable[..., torch.Tensor], theirs: Callable[..., torch.Tensor]) -> None:
    """torch.func.jvp (the tangent rules) and the Hessian diagonal (forward over
    reverse: the gradient rows' tangent rules) against PyTorch's."""
    x = grid(torch.float64, -5.0, 5.0, 201)
    t = torch.randn_like(x)
    _, ours_t = torch.func.jvp(ours, (x,), (t,))
    _, theirs_t = torch.func.jvp(theirs, (x,), (t,))
    torch.testing.assert_close(ours_t, theirs_t)
    h = lambda f: torch.func.jvp(torch.func.grad(lambda v: f(v).sum()), (x,), (torch.ones_like(x),))[1]  # noqa: E731
    torch.testing.assert_close(h(ours), h(theirs))


@pytest.mark.parametrize("name, ours, theirs", PAIRS, ids=IDS)
def test_gradcheck_and_gradgradcheck(name: str, ours: Callable[..., torch.Tensor],
                                     theirs: Callable[..., torch.Tensor]) -> None:
    contiguous = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    strided = torch.randn(6, 8, dtype=torch.float64).t()[::2, 1:].detach().requires_grad_(True)
    for x in (contiguous, strided):
        assert torch.autograd.gradcheck(ours, (x,))
        assert torch.autograd.gradgradcheck(ours, (x,), check_fwd_over_rev=True)


@pytest.mark.parametrize("name, ours, theirs", PAIRS, ids=IDS)
def test_torch_compile(name: str, ours: Callable[..., torch.Tensor], theirs: Callable[..., torch.Tensor]) -> None:
    x = torch.randn(3, 7, requires_grad=True)
    compiled = torch.compile(lambda v: ours(v * 2.0).sum(), fullgraph=True)
    (g,) = torch.autograd.grad(compiled(x), x)
    (want,) = torch.autograd.grad(theirs(x * 2.0).sum(), x)
    torch.testing.assert_close(g, want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_special_values(dtype: torch.dtype) -> None:
    """NaN and ±inf as PyTorch: NaN stays NaN, gelu and silu of -inf are NaN, their
    derivatives NaN at ±inf, sigmoid and tanh saturate. One deliberate difference:
    opforge's gelu(+inf) is +inf (as JAX and TensorFlow, and PyTorch's tanh form);
    PyTorch's exact CPU gelu gives NaN there."""
    x = torch.tensor([float("nan"), -float("inf"), float("inf"), 0.0, -0.0, 1e30, -1e30], dtype=dtype)
    for name, ours, theirs in PAIRS:
        want = theirs(x)
        if name == "gelu":
            want[2] = float("inf")
        torch.testing.assert_close(ours(x), want, equal_nan=True, msg=name)
        xg = x.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(ours(xg), xg, torch.ones_like(x))
        xt = x.clone().requires_grad_(True)
        (g_want,) = torch.autograd.grad(theirs(xt), xt, torch.ones_like(x))
        if name == "gelu_tanh":
            g_want[5:] = torch.tensor([1.0, 0.0])  # PyTorch's x³ overflows at ±1e30 (NaN); the limits are 1, 0
        torch.testing.assert_close(g, g_want, equal_nan=True, msg=f"{name}'")


def test_gradient_rows_directly() -> None:
    x, dy, ddx = (torch.randn(257, dtype=torch.float64) for _ in range(3))
    for approximate in ("none", "tanh"):
        d1 = ops.gelu_grad(torch.ones_like(x), x, approximate=approximate)
        ddy, gx = ops.gelu_grad_grad(ddx, dy, x, approximate=approximate)
        torch.testing.assert_close(ops.gelu_grad(dy, x, approximate=approximate), dy * d1)
        torch.testing.assert_close(ddy, ddx * d1)
        xr = x.clone().requires_grad_(True)
        (d2,) = torch.autograd.grad(F.gelu(xr, approximate=approximate), xr, torch.ones_like(x), create_graph=True)
        (d2,) = torch.autograd.grad(d2, xr, torch.ones_like(x))
        torch.testing.assert_close(gx, ddx * dy * d2)
    y = torch.sigmoid(x)
    torch.testing.assert_close(ops.sigmoid_grad(dy, y), torch.ops.aten.sigmoid_backward(dy, y))
    t = torch.tanh(x)
    torch.testing.assert_close(ops.tanh_grad(dy, t), torch.ops.aten.tanh_backward(dy, t))
    torch.testing.assert_close(ops.silu_grad(dy, x), torch.ops.aten.silu_backward(dy, x))


def test_nn_modules() -> None:
    x = torch.randn(4, 9)
    torch.testing.assert_close(onn.GELU()(x), torch.nn.GELU()(x))
    torch.testing.assert_close(onn.GELU(approximate="tanh")(x), torch.nn.GELU(approximate="tanh")(x))
    torch.testing.assert_close(onn.SiLU()(x), torch.nn.SiLU()(x))


def test_bad_input() -> None:
    with pytest.raises(RuntimeError, match=r"opforge::gelu: x has dtype int64; expected float32 or float64"):
        ops.gelu(torch.ones(3, dtype=torch.int64))
    with pytest.raises(RuntimeError, match=r"opforge::gelu: approximate must be one of 'none', 'tanh', got 'fast'"):
        ops.gelu(torch.ones(3), approximate="fast")
    with pytest.raises(RuntimeError, match=r"opforge::silu_grad: .*dtype mismatch.*x is float64"):
        ops.silu_grad(torch.ones(3), torch.ones(3, dtype=torch.float64))
    with pytest.raises(RuntimeError, match=r"opforge::sigmoid_grad: shape mismatch: dy is \[2,3\], y is \[3,2\]"):
        ops.sigmoid_grad(torch.ones(2, 3), torch.ones(3, 2))
    with pytest.raises(RuntimeError, match=r"opforge::tanh_grad_grad is not differentiable"):
        x = torch.ones(3, requires_grad=True)
        ops.tanh_grad_grad(x, x, x)[0].sum().backward()
