"""softmax, log_softmax, layer_norm, rms_norm: values and gradients (first
and second order) against torch's own ops, torch.compile, bad input."""

from __future__ import annotations

from typing import Any, Callable, Optional

import pytest
import torch
import torch.nn.functional as F
from torch.autograd import gradcheck, gradgradcheck

import opforge.torch  # noqa: F401  (registers torch.ops.opforge)

ops = torch.ops.opforge
DTYPES = [torch.float32, torch.float64]


def tol(dtype: torch.dtype) -> dict[str, float]:
    return {"rtol": 2e-5, "atol": 2e-6} if dtype == torch.float32 else {"rtol": 1e-11, "atol": 1e-12}


def inputs(dtype: torch.dtype) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    base = torch.randn(6, 10, generator=g, dtype=dtype) * 3
    return [
        base,
        base.t(),  # rows not contiguous
        base[::2, 1::2],
        torch.randn(2, 3, 4, generator=g, dtype=dtype).permute(2, 0, 1),
        torch.randn(7, generator=g, dtype=dtype),  # one row
        torch.randn(1, 5, generator=g, dtype=dtype).expand(4, 5),  # zero stride
        torch.randn(300, 1030, generator=g, dtype=dtype),  # streamed outputs, several threads
        torch.empty(3, 0, dtype=dtype),
        torch.empty(0, 4, dtype=dtype),
    ]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_values(dtype: torch.dtype) -> None:
    for x in inputs(dtype):
        m = x.shape[-1]
        w = torch.linspace(0.5, 1.5, m, dtype=dtype)
        b = torch.linspace(-1, 1, m, dtype=dtype)
        torch.testing.assert_close(ops.softmax(x), torch.softmax(x, -1), **tol(dtype))
        torch.testing.assert_close(ops.log_softmax(x), torch.log_softmax(x, -1), **tol(dtype))
        loose = {"rtol": 1e-4, "atol": 1e-5} if dtype == torch.float32 else tol(dtype)
        for wi, bi in ((w, b), (None, None), (w, None), (None, b)):
            y, mean, rstd = ops.layer_norm(x, wi, bi, eps=1e-5)
            ref, ref_mean, ref_rstd = torch.native_layer_norm(x, [m], wi, bi, 1e-5)
            torch.testing.assert_close(y, ref, **loose)
            torch.testing.assert_close(mean, ref_mean.squeeze(-1), **loose, equal_nan=True)
            torch.testing.assert_close(rstd, ref_rstd.squeeze(-1), **loose, equal_nan=True)
            torch.testing.assert_close(y, F.layer_norm(x, [m], wi, bi), **loose)
            for eps in (None, 1e-6, 0.5):
                y = ops.rms_norm(x, wi) if eps is None else ops.rms_norm(x, wi, eps=eps)
                torch.testing.assert_close(y[0], F.rms_norm(x, [m], wi, eps), **loose)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_special_rows(dtype: torch.dtype) -> None:
    inf, nan = float("inf"), float("nan")
    x = torch.tensor(
        [[1, inf, 2], [1, -inf, 2], [-inf, -inf, -inf], [nan, 1, 2], [-inf, 0, inf], [1e3, -1e3, 999]], dtype=dtype
    )
    torch.testing.assert_close(ops.softmax(x), torch.softmax(x, -1), equal_nan=True, **tol(dtype))
    torch.testing.assert_close(ops.log_softmax(x), torch.log_softmax(x, -1), equal_nan=True, **tol(dtype))
    assert ops.softmax(x)[1, 1].item() == 0.0
    torch.testing.assert_close(ops.rms_norm(x, None)[0], F.rms_norm(x, [3]), equal_nan=True)
    torch.testing.assert_close(ops.layer_norm(x, None, None)[0], F.layer_norm(x, [3]), equal_nan=True, rtol=1e-4, atol=1e-5)


def _grads(f: Callable[..., Any], args: list[Optional[torch.Tensor]], dy: Any) -> list[Optional[torch.Tensor]]:
    leaves = [a for a in args if a is not None]
    out = f(*args)
    torch.autograd.backward(out, dy)
    return [a.grad for a in leaves]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gradients_match_torch(dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(5)
    for shape in ((4, 9), (2, 3, 17), (300, 1030)):
        m = shape[-1]
        x0 = torch.randn(*shape, generator=g, dtype=dtype)
        dy = torch.randn(*shape, generator=g, dtype=dtype)
        w0 = torch.rand(m, generator=g, dtype=dtype) + 0.5
        b0 = torch.randn(m, generator=g, dtype=dtype)
        loose = {"rtol": 1e-4, "atol": 1e-4 * shape[0]} if dtype == torch.float32 else {"rtol": 1e-9, "atol": 1e-10}

        def fresh(*ts: torch.Tensor) -> list[torch.Tensor]:
            return [t.clone().requires_grad_(True) for t in ts]

        for ours, theirs in ((ops.softmax, lambda x: torch.softmax(x, -1)),
                             (ops.log_softmax, lambda x: torch.log_softmax(x, -1))):  # fmt: skip
            torch.testing.assert_close(_grads(ours, fresh(x0), dy), _grads(theirs, fresh(x0), dy), **loose)
        got = _grads(lambda x, w, b: ops.layer_norm(x, w, b)[0], fresh(x0, w0, b0), dy)
        want = _grads(lambda x, w, b: F.layer_norm(x, [m], w, b), fresh(x0, w0, b0), dy)
        torch.testing.assert_close(got, want, **loose)
        got = _grads(lambda x, w: ops.rms_norm(x, w, eps=1e-5)[0], fresh(x0, w0), dy)
        want = _grads(lambda x, w: F.rms_norm(x, [m], w, 1e-5), fresh(x0, w0), dy)
        torch.testing.assert_close(got, want, **loose)


def _layer_norm_composite(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> tuple[torch.Tensor, ...]:
    mean = x.mean(-1)
    rstd = torch.rsqrt(x.var(-1, unbiased=False) + eps)
    return (x - mean[..., None]) * rstd[..., None] * w + b, mean, rstd


def test_cotangents_of_mean_and_rstd_are_exact() -> None:
    """Gradients flowing into mean and rstd reach x (torch.native_layer_norm
    drops them; a composite layer norm does not)."""
    g = torch.Generator().manual_seed(6)
    x = torch.randn(5, 8, generator=g, dtype=torch.float64)
    w, b = torch.rand(8, generator=g, dtype=torch.float64) + 0.5, torch.randn(8, generator=g, dtype=torch.float64)
    cot = [torch.randn(5, 8, generator=g, dtype=torch.float64), torch.randn(5, generator=g, dtype=torch.float64),
           torch.randn(5, generator=g, dtype=torch.float64)]  # fmt: skip
    args = [x, w, b]
    got = _grads(lambda x, w, b: ops.layer_norm(x, w, b, eps=1e-3), [a.clone().requires_grad_() for a in args], cot)
    want = _grads(lambda x, w, b: _layer_norm_composite(x, w, b, 1e-3), [a.clone().requires_grad_() for a in args], cot)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
    # rms_norm's rstd likewise, against rsqrt(mean(x^2) + eps)
    got = _grads(lambda x: ops.rms_norm(x, None, eps=1e-3)[1], [x.clone().requires_grad_()], cot[1])
    want = _grads(lambda x: torch.rsqrt(x.pow(2).mean(-1) + 1e-3), [x.clone().requires_grad_()], cot[1])
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


def test_gradcheck_and_gradgradcheck() -> None:
    """float64, transposed and strided inputs, weight and bias absent or present,
    every output (mean and rstd included)."""
    g = torch.Generator().manual_seed(7)

    def r(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g, dtype=torch.float64).requires_grad_(True)

    xt = r(6, 4).t()  # rows strided
    x3 = r(2, 3, 5)[:, ::2]
    w, b = (torch.rand(6, generator=g, dtype=torch.float64) + 0.5).requires_grad_(True), r(6)
    w5, b5 = (torch.rand(5, generator=g, dtype=torch.float64) + 0.5).requires_grad_(True), r(5)
    cases: list[tuple[Callable[..., Any], tuple[torch.Tensor, ...]]] = [
        (ops.softmax, (xt,)),
        (ops.log_softmax, (x3,)),
        (lambda x, w, b: ops.layer_norm(x, w, b, eps=1e-3), (xt, w, b)),
        (lambda x: ops.layer_norm(x, None, None), (x3,)),
        (lambda x, b: ops.layer_norm(x, None, b, eps=0.1), (x3, b5)),
        (lambda x, w: ops.rms_norm(x, w, eps=1e-3), (xt, w)),
        (lambda x: ops.rms_norm(x, None, eps=1e-2), (x3,)),
        (lambda x, w: ops.rms_norm(x, w)[1], (x3, w5)),
    ]
    for f, args in cases:
        assert gradcheck(f, args)
        assert gradgradcheck(f, args)


def test_backward_of_a_grad_row_without_its_cotangents() -> None:
    """rms_norm_grad with only dw wanted (x needs no gradient), then its own
    gradient: the absent cotangent of dx counts as zero, never as an error."""
    g = torch.Generator().manual_seed(8)
    x = torch.randn(4, 6, generator=g, dtype=torch.float64)
    w = (torch.rand(6, generator=g, dtype=torch.float64) + 0.5).requires_grad_(True)
    y, rstd = ops.rms_norm(x, w, eps=1e-3)
    (gw,) = torch.autograd.grad(y.pow(2).sum(), w, create_graph=True)
    (ggw,) = torch.autograd.grad(gw.sum(), w)
    wr = w.detach().clone().requires_grad_(True)
    (gw_ref,) = torch.autograd.grad(F.rms_norm(x, [6], wr, 1e-3).pow(2).sum(), wr, create_graph=True)
    (ggw_ref,) = torch.autograd.grad(gw_ref.sum(), wr)
    torch.testing.assert_close(ggw, ggw_ref, rtol=1e-10, atol=1e-12)


def test_forward_mode_matches_torch() -> None:
    """torch.func.jvp of every output against torch's own ops' forward mode,
    and forward-over-reverse (torch.func.hessian) against torch's."""
    from torch.func import hessian, jvp

    g = torch.Generator().manual_seed(9)
    x, xt = (torch.randn(4, 7, generator=g, dtype=torch.float64) for _ in range(2))
    w, wt, b, bt = (torch.randn(7, generator=g, dtype=torch.float64) for _ in range(4))
    w = w.abs() + 0.5

    def ln_ref(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return _layer_norm_composite(x, w, b, 1e-3)

    def rms_ref(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
        rstd = torch.rsqrt(x.pow(2).mean(-1) + 1e-3)
        return x * rstd[..., None] * w, rstd

    pairs: list[tuple[Callable[..., Any], Callable[..., Any], tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]] = [
        (ops.softmax, lambda x: torch.softmax(x, -1), (x,), (xt,)),
        (ops.log_softmax, lambda x: torch.log_softmax(x, -1), (x,), (xt,)),
        (lambda x, w, b: ops.layer_norm(x, w, b, eps=1e-3), ln_ref, (x, w, b), (xt, wt, bt)),
        (lambda x, w: ops.rms_norm(x, w, eps=1e-3), rms_ref, (x, w), (xt, wt)),
    ]
    for ours, theirs, primals, tangents in pairs:
        got, want = jvp(ours, primals, tangents)[1], jvp(theirs, primals, tangents)[1]
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)

        def loss(f: Callable[..., Any]) -> Callable[..., torch.Tensor]:
            def scalar(*args: torch.Tensor) -> torch.Tensor:
                out = f(*args)
                return sum((o**3).sum() for o in (out if isinstance(out, tuple) else (out,)))  # type: ignore[return-value]

            return scalar

        torch.testing.assert_close(hessian(loss(ours))(*primals), hessian(loss(theirs))(*primals), rtol=1e-9, atol=1e-10)


def test_forward_over_forward_says_which_row_stops() -> None:
    """jacfwd(jacfwd) of softmax works; the others' tangent rules name a
    second-order row without tangent rules, and torch says so (never zeros)."""
    from torch.func import jacfwd

    x = torch.randn(2, 4, dtype=torch.float64)
    h = jacfwd(jacfwd(lambda x: ops.softmax(x).pow(3).sum()))(x)
    torch.testing.assert_close(h, jacfwd(jacfwd(lambda x: torch.softmax(x, -1).pow(3).sum()))(x))
    with pytest.raises(RuntimeError, match=r"opforge::layer_norm_grad_grad has no forward mode"):
        jacfwd(jacfwd(lambda x: ops.layer_norm(x, None, None)[0].pow(3).sum()))(x)


def test_second_order_rows_are_not_differentiable() -> None:
    x = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    gdy, gy, jy = ops.softmax_grad_grad(x, x, x)
    with pytest.raises(RuntimeError, match="softmax_grad_grad is not differentiable"):
        gdy.sum().backward()


def test_torch_compile() -> None:
    def block(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        h = ops.layer_norm(x, w, b)[0]
        h = ops.rms_norm(h, w, eps=1e-6)[0]
        return ops.log_softmax(ops.softmax(h) * 3)

    compiled = torch.compile(block, fullgraph=True, backend="aot_eager")
    x = torch.randn(4, 16, requires_grad=True)
    w, b = torch.rand(16) + 0.5, torch.randn(16)
    torch.testing.assert_close(compiled(x, w, b), block(x, w, b))
    compiled(x, w, b).sum().backward()
    gx = x.grad
    x.grad = None
    block(x, w, b).sum().backward()
    torch.testing.assert_close(gx, x.grad)


def test_bad_input() -> None:
    x = torch.randn(4, 5)
    with pytest.raises(RuntimeError, match=r"opforge::softmax: x has dtype int64; expected float32 or float64"):
        ops.softmax(torch.ones(2, 3, dtype=torch.int64))
    with pytest.raises(RuntimeError, match=r"softmax: x must have rank 1 or more, got rank 0"):
        ops.softmax(torch.tensor(1.0))
    with pytest.raises(RuntimeError, match=r"layer_norm: shape mismatch: x is \[4,5\], w is \[4\]"):
        ops.layer_norm(x, torch.ones(4))
    with pytest.raises(RuntimeError, match=r"rms_norm: dtype mismatch"):
        ops.rms_norm(x, torch.ones(5, dtype=torch.float64))
    with pytest.raises(RuntimeError, match=r"layer_norm_grad: .*leading dims"):
        ops.layer_norm_grad(x, torch.zeros(3), torch.zeros(4), x)
