"""Random shapes and strided views against torch's built-ins (Hypothesis)."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import opforge.torch as ot


@st.composite
def views(draw: st.DrawFn) -> tuple[torch.Tensor, torch.Tensor]:
    """Two tensors of one random shape, each a random view (sliced, stepped,
    transposed) of a larger random tensor, float32 or float64."""
    dtype = draw(st.sampled_from([torch.float32, torch.float64]))
    shape = draw(st.lists(st.integers(0, 6), min_size=0, max_size=4))
    out = []
    for seed in range(2):
        steps = [draw(st.integers(1, 3)) for _ in shape]
        base = torch.randn([n * s + 1 for n, s in zip(shape, steps)], generator=torch.Generator().manual_seed(seed),
                           dtype=dtype)  # fmt: skip
        view = base[tuple(slice(1, None, s) for s in steps)][tuple(slice(0, n) for n in shape)]
        if len(shape) >= 2 and draw(st.booleans()):
            view = view.transpose(0, -1).contiguous().transpose(0, -1)  # column-major
        out.append(view)
    return out[0], out[1]


@settings(max_examples=60, deadline=None)
@given(views(), st.floats(-4, 4))
def test_elementwise_ops_on_random_views(pair: tuple[torch.Tensor, torch.Tensor], alpha: float) -> None:
    x, y = pair
    assert x.shape == y.shape
    torch.testing.assert_close(ot.relu(x), torch.relu(x), rtol=0, atol=0)
    torch.testing.assert_close(ot.scale(x, alpha=alpha), torch.mul(x, alpha), rtol=0, atol=0)
    torch.testing.assert_close(ot.add(x, y), torch.add(x, y), rtol=0, atol=0)
    torch.testing.assert_close(ot.relu_grad(y, x), torch.where(x <= 0, 0, y), rtol=0, atol=0)
    z = x.clone()
    ot.relu_(z)
    torch.testing.assert_close(z, torch.relu(x), rtol=0, atol=0)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 9), st.integers(0, 9), st.integers(0, 9), st.booleans(), st.booleans())
def test_dense_random_shapes(n: int, k: int, m: int, bias: bool, relu: bool) -> None:
    g = torch.Generator().manual_seed(n * 100 + k * 10 + m)
    x, w, b = torch.randn(n, k, generator=g, dtype=torch.float64), torch.randn(k, m, generator=g,
                          dtype=torch.float64), torch.randn(m, generator=g, dtype=torch.float64)  # fmt: skip
    expected = torch.nn.functional.linear(x, w.t(), b if bias else None)
    if relu:
        expected = torch.relu(expected)
    got = ot.dense(x, w, b if bias else None, activation="relu" if relu else "none")
    torch.testing.assert_close(got, expected)
