"""softmax, log_softmax, layer_norm, rms_norm: values and gradients (first
and second order) against torch's own ops, torch.compile, bad input."""

from __future__ import annotations

from typing import Any, Callable, Optional

import pytest
import torch
import torch.nn.functional as F
from torch.autograd import gradcheck, gradgradcheck
from torch.func import jacfwd, jacrev, jvp

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


def _layer_norm_composite(
    x: torch.Tensor, w: Optional[torch.Tensor], b: Optional[torch.Tensor], eps: float
) -> tuple[torch.Tensor, ...]:
    mean = x.mean(-1)
    rstd = torch.rsqrt(x.var(-1, unbiased=False) + eps)
    y = (x - mean[..., None]) * rstd[..., None]
    y = y if w is None else y * w
    return (y if b is None else y + b), mean, rstd


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
    from torch.func import hessian

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


# (ours, reference, arguments) of log_softmax, rms_norm and layer_norm, weight and bias absent, present or held
# fixed; the derivatives below are in every argument (weight and bias too), through every output (mean and rstd
# too). layer_norm's reference is the composite: torch.func's second derivatives of F.layer_norm itself are wrong
# in torch 2.15 (jacfwd(jacfwd) in x, and the (w, x) block of jacrev(jacrev), where plain double backward agrees
# with the composite).
Case = tuple[str, Callable[..., Any], Callable[..., Any], tuple[torch.Tensor, ...]]


def _norm_cases(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> list[Case]:
    m = x.shape[-1]

    def rms_ref(x: torch.Tensor, w: Optional[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        return F.rms_norm(x, [m], w, 1e-3), torch.rsqrt(x.pow(2).mean(-1) + 1e-3)

    def ln(w: Optional[torch.Tensor], b: Optional[torch.Tensor]) -> Callable[[torch.Tensor], Any]:
        return lambda x: ops.layer_norm(x, w, b, eps=1e-3)

    def ln_ref(w: Optional[torch.Tensor], b: Optional[torch.Tensor]) -> Callable[[torch.Tensor], Any]:
        return lambda x: _layer_norm_composite(x, w, b, 1e-3)

    return [
        ("log_softmax", ops.log_softmax, lambda x: F.log_softmax(x, -1), (x,)),
        ("rms_norm(x, w)", lambda x, w: ops.rms_norm(x, w, eps=1e-3), rms_ref, (x, w)),
        ("rms_norm(x)", lambda x: ops.rms_norm(x, None, eps=1e-3), lambda x: rms_ref(x, None), (x,)),
        ("rms_norm(x; w fixed)", lambda x: ops.rms_norm(x, w, eps=1e-3), lambda x: rms_ref(x, w), (x,)),
        ("layer_norm(x, w, b)", lambda x, w, b: ln(w, b)(x), lambda x, w, b: ln_ref(w, b)(x), (x, w, b)),
        ("layer_norm(x, w)", lambda x, w: ln(w, None)(x), lambda x, w: ln_ref(w, None)(x), (x, w)),
        ("layer_norm(x, b=b)", lambda x, b: ln(None, b)(x), lambda x, b: ln_ref(None, b)(x), (x, b)),
        ("layer_norm(x)", ln(None, None), ln_ref(None, None), (x,)),
        ("layer_norm(x; w, b fixed)", ln(w, b), ln_ref(w, b), (x,)),
    ]


def _norm_inputs(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(3, 5, generator=g, dtype=torch.float64)
    return x, torch.rand(5, generator=g, dtype=torch.float64) + 0.5, torch.randn(5, generator=g, dtype=torch.float64)


def _scalar(f: Callable[..., Any]) -> Callable[..., torch.Tensor]:
    """A loss through every output, with non-zero third derivatives."""

    def loss(*args: torch.Tensor) -> torch.Tensor:
        out = f(*args)
        outs = out if isinstance(out, tuple) else (out,)
        return sum((o.sin() * o**2).sum() for o in outs)  # type: ignore[return-value]

    return loss


SECOND_ORDER: dict[str, Callable[[Callable[..., Any], tuple[int, ...]], Callable[..., Any]]] = {
    "jacfwd(jacfwd)": lambda f, a: jacfwd(jacfwd(f, a), a),
    "jacfwd(jacrev)": lambda f, a: jacfwd(jacrev(f, a), a),
    "jacrev(jacfwd)": lambda f, a: jacrev(jacfwd(f, a), a),
}


@pytest.mark.parametrize("order", SECOND_ORDER)
def test_second_order_forward_and_mixed(order: str) -> None:
    """torch.func.jacfwd(jacfwd(f)), jacfwd(jacrev(f)) and jacrev(jacfwd(f))
    of log_softmax, rms_norm and layer_norm against the same of torch's ops:
    every block of the Hessian, weight and bias included."""
    for name, ours, theirs, args in _norm_cases(*_norm_inputs(21)):
        argnums = tuple(range(len(args)))
        got = SECOND_ORDER[order](_scalar(ours), argnums)(*args)
        want = SECOND_ORDER[order](_scalar(theirs), argnums)(*args)
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-10, msg=lambda m: f"{order} of {name}: {m}")
    # softmax's tangent rule names softmax_grad only (no second-order row)
    x = _norm_inputs(22)[0]
    got = SECOND_ORDER[order](_scalar(ops.softmax), (0,))(x)
    torch.testing.assert_close(got, SECOND_ORDER[order](_scalar(lambda x: torch.softmax(x, -1)), (0,))(x))


def test_third_order_through_the_second_order_rows() -> None:
    """Third order wherever the second-order rows are differentiated once
    more (their rules cover every output), contracted with random directions
    t, c (all arguments): forward over reverse over reverse (the rows' tangent
    rules) and reverse over reverse over reverse (their gradient rules)."""
    from torch.func import grad, vjp

    g = torch.Generator().manual_seed(23)

    def frr(f: Callable[..., Any], args: tuple[torch.Tensor, ...], t: Any, c: Any) -> Any:
        argnums = tuple(range(len(args)))
        return jvp(lambda *a: vjp(grad(f, argnums), *a)[1](c), args, t)[1]

    def rrr(f: Callable[..., Any], args: tuple[torch.Tensor, ...], t: Any, c: Any) -> Any:
        argnums = tuple(range(len(args)))
        second = lambda *a: vjp(grad(f, argnums), *a)[1](c)  # noqa: E731
        return grad(lambda *a: sum((s * u).sum() for s, u in zip(second(*a), t)), argnums)(*args)

    for name, ours, theirs, args in _norm_cases(*_norm_inputs(24)):
        t, c = (tuple(torch.randn(a.shape, generator=g, dtype=a.dtype) for a in args) for _ in range(2))
        for order, nest in (("jacfwd(jacrev(jacrev))", frr), ("jacrev(jacrev(jacrev))", rrr)):
            got, want = nest(_scalar(ours), args, t, c), nest(_scalar(theirs), args, t, c)
            torch.testing.assert_close(got, want, rtol=1e-8, atol=1e-9, msg=lambda m: f"{order} of {name}: {m}")


def test_third_order_forward_says_which_row_stops() -> None:
    """The rows of the second-order rows' tangents declare no rules: forward
    over forward over forward, and reverse over forward over forward, stop
    there with an error naming the row (never zeros)."""
    x, w, _ = _norm_inputs(25)
    with pytest.raises(RuntimeError, match=r"opforge::layer_norm_grad_grad_jvp has no forward mode"):
        jacfwd(jacfwd(jacfwd(lambda x: ops.layer_norm(x, None, None)[0].pow(3).sum())))(x)
    with pytest.raises(RuntimeError, match=r"opforge::rms_norm_grad_grad_jvp\w* has no forward mode"):
        jacfwd(jacfwd(jacfwd(lambda x: ops.rms_norm(x, w)[0].pow(3).sum())))(x)
    with pytest.raises(RuntimeError, match=r"opforge::log_softmax_grad_grad_jvp is not differentiable"):
        jacrev(jacfwd(jacfwd(lambda x: ops.log_softmax(x).pow(3).sum())))(x)


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
