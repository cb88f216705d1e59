"""torch.compile of opforge modules, and the nn modules against torch.nn."""

from __future__ import annotations

import torch
from torch import nn

import opforge.torch.nn as onn


def mlp(seed: int, opforge: bool) -> nn.Module:
    torch.manual_seed(seed)
    if opforge:
        return nn.Sequential(
            onn.Dense(12, 32, activation="relu"), onn.Dense(32, 16), onn.ReLU(), onn.Scale(0.5), onn.Dense(16, 3)
        )
    return nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 3))


def scaled_reference(seed: int) -> nn.Module:
    ref = mlp(seed, opforge=False)
    ref[3] = nn.Identity()  # replaced by Scale(0.5) below

    class WithScale(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = ref

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.body[1](self.body[0](x))
            h = torch.relu(self.body[2](h)) * 0.5
            return self.body[4](h)

    return WithScale()


def test_dense_initializes_like_linear() -> None:
    torch.manual_seed(0)
    linear = nn.Linear(7, 5)
    torch.manual_seed(0)
    dense = onn.Dense(7, 5)
    assert torch.equal(dense.weight, linear.weight.t())
    assert dense.bias is not None and torch.equal(dense.bias, linear.bias)
    assert onn.Dense(7, 5, bias=False).bias is None
    assert "activation='relu'" in repr(onn.Dense(2, 2, activation="relu"))


def test_modules_match_torch_nn_forward_and_backward() -> None:
    model, ref = mlp(1, True), scaled_reference(1)
    x = torch.randn(10, 12)
    torch.testing.assert_close(model(x), ref(x))
    model(x).square().sum().backward()
    ref(x).square().sum().backward()
    torch.testing.assert_close(model[0].weight.grad, ref.body[0].weight.grad.t())
    torch.testing.assert_close(model[4].bias.grad, ref.body[4].bias.grad)


def test_dense_on_batched_input() -> None:
    dense = onn.Dense(4, 3)
    x = torch.randn(2, 5, 4)
    torch.testing.assert_close(dense(x), x @ dense.weight + dense.bias)


def test_relu_module_in_place() -> None:
    x = torch.randn(6)
    expected = torch.relu(x)
    y = onn.ReLU(inplace=True)(x)
    assert y is x and torch.equal(x, expected)
    assert repr(onn.ReLU(inplace=True)) == "ReLU(inplace=True)"
    tracked = torch.randn(6, requires_grad=True) * 1.0
    out = onn.ReLU(inplace=True)(tracked)  # relu_ has no gradient: out of place
    out.sum().backward()
    torch.testing.assert_close(out, torch.relu(tracked))


def test_compile_with_in_place_relu() -> None:
    torch._dynamo.reset()
    torch.manual_seed(5)
    model = torch.nn.Sequential(onn.Dense(4, 8), onn.ReLU(inplace=True), onn.Dense(8, 2))
    x = torch.randn(3, 4)
    compiled = torch.compile(model, fullgraph=True)
    torch.testing.assert_close(compiled(x), model(x))
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))


def test_compile_fullgraph_matches_eager() -> None:
    torch._dynamo.reset()
    model = mlp(2, True)
    x = torch.randn(9, 12)
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(x), model(x))
    loss = compiled(x).sum()
    loss.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model(x).sum().backward()
    for a, e in zip(grads, [p.grad for p in model.parameters()]):
        torch.testing.assert_close(a, e)


def test_compile_inductor_no_graph_break() -> None:
    torch._dynamo.reset()
    model = mlp(3, True)
    x = torch.randn(4, 12)
    explanation = torch._dynamo.explain(model)(x)
    assert explanation.graph_break_count == 0
    compiled = torch.compile(model, fullgraph=True)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))
