"""opforge.torch.nn's transformer modules (Softmax, LayerNorm, RMSNorm, GELU,
SiLU) against torch.nn's own: values, parameter and input gradients, dtypes,
layouts and the errors they raise."""

from __future__ import annotations

from typing import Callable

import pytest

torch = pytest.importorskip("torch")  # a clean skip without it (conftest.py)

import opforge.torch.nn as onn  # noqa: E402

Pair = Callable[[], tuple["torch.nn.Module", "torch.nn.Module"]]

PAIRS: dict[str, Pair] = {
    "softmax": lambda: (onn.Softmax(dim=-1), torch.nn.Softmax(dim=-1)),
    "softmax_dim0": lambda: (onn.Softmax(dim=0), torch.nn.Softmax(dim=0)),
    "softmax_dim1": lambda: (onn.Softmax(dim=1), torch.nn.Softmax(dim=1)),
    "gelu": lambda: (onn.GELU(), torch.nn.GELU()),
    "gelu_tanh": lambda: (onn.GELU(approximate="tanh"), torch.nn.GELU(approximate="tanh")),
    "silu": lambda: (onn.SiLU(), torch.nn.SiLU()),
    "layer_norm": lambda: (onn.LayerNorm(7), torch.nn.LayerNorm(7)),
    "layer_norm_eps": lambda: (onn.LayerNorm(7, eps=1e-2), torch.nn.LayerNorm(7, eps=1e-2)),
    "layer_norm_no_bias": lambda: (onn.LayerNorm(7, bias=False), torch.nn.LayerNorm(7, bias=False)),
    "layer_norm_no_affine": lambda: (
        onn.LayerNorm(7, elementwise_affine=False),
        torch.nn.LayerNorm(7, elementwise_affine=False),
    ),
    "layer_norm_2d": lambda: (onn.LayerNorm([5, 7]), torch.nn.LayerNorm([5, 7])),
    "rms_norm": lambda: (onn.RMSNorm(7), torch.nn.RMSNorm(7)),
    "rms_norm_eps": lambda: (onn.RMSNorm(7, eps=1e-3), torch.nn.RMSNorm(7, eps=1e-3)),
    "rms_norm_no_affine": lambda: (onn.RMSNorm(7, elementwise_affine=False), torch.nn.RMSNorm(7, elementwise_affine=False)),
    "rms_norm_2d": lambda: (onn.RMSNorm([5, 7]), torch.nn.RMSNorm([5, 7])),
}

LAYOUTS: dict[str, Callable[["torch.Tensor"], "torch.Tensor"]] = {
    "contiguous": lambda x: x,
    "sliced": lambda x: torch.cat([x, x], dim=0)[1::2],  # every other batch: rows apart
    "strided": lambda x: torch.cat([x, x], dim=-1)[..., ::2],
    "transposed": lambda x: x.transpose(0, 1).contiguous().transpose(0, 1),
}


def same_parameters(ours: "torch.nn.Module", theirs: "torch.nn.Module", generator: "torch.Generator") -> None:
    """Random (not default) weights and biases, the same in both modules."""
    for a, b in zip(ours.parameters(), theirs.parameters(), strict=True):
        values = torch.randn(b.shape, generator=generator, dtype=b.dtype)
        with torch.no_grad():
            b.copy_(values)
            a.copy_(values.reshape(a.shape))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", PAIRS)
def test_module_matches_torch_nn(name: str, dtype: "torch.dtype", layout: str) -> None:
    g = torch.Generator().manual_seed(hash(name) % 1000)
    ours, theirs = PAIRS[name]()
    ours, theirs = ours.to(dtype), theirs.to(dtype)
    same_parameters(ours, theirs, g)
    x = LAYOUTS[layout](torch.randn(3, 5, 7, generator=g, dtype=dtype) * 3)
    xa, xb = x.detach().clone().requires_grad_(), x.detach().clone().requires_grad_()
    ya, yb = ours(xa), theirs(xb)
    assert ya.shape == yb.shape and ya.dtype == dtype
    torch.testing.assert_close(ya, yb)
    dy = torch.randn(yb.shape, generator=g, dtype=dtype)
    (ya * dy).sum().backward()
    (yb * dy).sum().backward()
    torch.testing.assert_close(xa.grad, xb.grad)
    for a, b in zip(ours.parameters(), theirs.parameters(), strict=True):
        torch.testing.assert_close(a.grad.reshape(b.shape), b.grad)


@pytest.mark.parametrize("name", ["layer_norm", "rms_norm", "softmax", "gelu"])
def test_module_second_order(name: str) -> None:
    """gradgradcheck through the module, parameters included."""
    ours, _ = PAIRS[name]()
    ours = ours.double()
    g = torch.Generator().manual_seed(3)
    same_parameters(ours, PAIRS[name]()[1].double(), g)
    x = torch.randn(2, 3, 7, dtype=torch.float64, generator=g, requires_grad=True)
    names = [n for n, _ in ours.named_parameters()]

    def f(x: "torch.Tensor", *weights: "torch.Tensor") -> "torch.Tensor":
        return torch.func.functional_call(ours, dict(zip(names, weights)), (x,))

    inputs = (x, *(p.detach().clone().requires_grad_() for p in ours.parameters()))
    assert torch.autograd.gradcheck(f, inputs)
    assert torch.autograd.gradgradcheck(f, inputs)


def test_nan_and_inf_rows_match_torch() -> None:
    x = torch.tensor([[0.0, 1.0, float("inf")], [float("-inf")] * 3, [1.0, float("nan"), 2.0], [float("inf")] * 3])
    torch.testing.assert_close(onn.Softmax()(x), torch.nn.Softmax(dim=-1)(x), equal_nan=True)
    torch.testing.assert_close(onn.LayerNorm(3)(x), torch.nn.LayerNorm(3)(x), equal_nan=True)
    torch.testing.assert_close(onn.RMSNorm(3)(x), torch.nn.RMSNorm(3)(x), equal_nan=True)


def test_modules_train_in_a_model_and_compile() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(onn.LayerNorm(8), onn.Dense(8, 16), onn.GELU(), onn.Dense(16, 8), onn.RMSNorm(8))
    x = torch.randn(4, 8)
    eager = model(x)
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)(x)
    torch.testing.assert_close(compiled, eager)
    eager.square().sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


def test_reprs_and_state_dict_match_torch_nn() -> None:
    assert repr(onn.LayerNorm(4)) == "LayerNorm((4,), eps=1e-05, elementwise_affine=True)"
    assert repr(onn.GELU(approximate="tanh")) == "GELU(approximate='tanh')"
    assert repr(onn.Softmax(dim=1)) == "Softmax(dim=1)"
    ours, theirs = onn.LayerNorm(6), torch.nn.LayerNorm(6)
    theirs.weight.data.uniform_()
    ours.load_state_dict(theirs.state_dict())
    torch.testing.assert_close(ours.weight, theirs.weight)
    assert set(onn.RMSNorm(6).state_dict()) == set(torch.nn.RMSNorm(6).state_dict())


def test_bad_input() -> None:
    with pytest.raises(ValueError, match=r"opforge.torch.nn.LayerNorm: input of shape \[2, 5\] does not end in \[4\]"):
        onn.LayerNorm(4)(torch.ones(2, 5))
    with pytest.raises(ValueError, match=r"opforge.torch.nn.RMSNorm: input of shape \[5\] does not end in \[2, 5\]"):
        onn.RMSNorm([2, 5])(torch.ones(5))
    with pytest.raises(ValueError, match=r"opforge.torch.nn.LayerNorm: normalized_shape must be a non-empty"):
        onn.LayerNorm([])
    with pytest.raises(ValueError, match=r"opforge.torch.nn.GELU: approximate must be 'none' or 'tanh', got 'fast'"):
        onn.GELU(approximate="fast")
    with pytest.raises(RuntimeError, match=r"opforge::softmax: x has dtype int64; expected float32 or float64"):
        onn.Softmax()(torch.ones(2, 3, dtype=torch.int64))
    with pytest.raises(RuntimeError, match=r"opforge::layer_norm: .*dtype"):
        onn.LayerNorm(3)(torch.ones(2, 3, dtype=torch.float64))  # float32 weight, float64 input
    with pytest.raises(RuntimeError, match=r"opforge::softmax: x must have rank 1 or more, got rank 0"):
        onn.Softmax()(torch.tensor(1.0))
