"""Sample inputs for every built-in op (tests name ops; the adapter never does)."""

from __future__ import annotations

from typing import Any, Callable

import torch

Sample = tuple[tuple[Any, ...], dict[str, Any]]


def _r(*shape: int, dtype: torch.dtype, requires_grad: bool = False, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed + 7 * len(shape) + sum(shape))
    t = torch.randn(shape, generator=g, dtype=dtype)
    # keep values away from ReLU's kink, where finite differences are meaningless
    t = torch.where(t.abs() < 0.05, t.sign() * 0.05 + t, t)
    return t.requires_grad_(requires_grad)


def samples(name: str, dtype: torch.dtype, requires_grad: bool = False) -> list[Sample]:
    """Calls of op `name`: (positional inputs, keyword attributes)."""
    R: Callable[..., torch.Tensor] = lambda *s, seed=0: _r(*s, dtype=dtype, requires_grad=requires_grad, seed=seed)  # noqa: E731
    if name in ("relu", "relu_"):
        return [((R(3, 5),), {}), ((R(2, 3, 4).transpose(0, 2),), {}), ((R(7),), {})]
    if name == "relu_grad":
        return [((R(4, 6), R(4, 6, seed=1)), {}), ((R(5), R(5, seed=2)), {})]
    if name == "scale":
        return [((R(3, 4),), {"alpha": 2.5}), ((R(6)[::2],), {"alpha": -0.5}), ((R(2, 2),), {})]
    if name in ("add", "mul"):  # same shapes, then broadcasting pairs (0-d, size-1 dims, rank mismatch)
        return [
            ((R(3, 4), R(3, 4, seed=1)), {}),
            ((R(4, 3).t(), R(3, 4, seed=2)), {}),
            ((R(3, 1), R(1, 4, seed=3)), {}),
            ((R(4), R(2, 3, 4, seed=4)), {}),
            ((R(2, 3, 4)[:, ::2], R()), {}),
            ((R(2, 1, 4), R(3, 1, seed=5).t().t()), {}),
        ]
    if name == "sum_to":  # summed down to like's shape, or broadcast up to it
        return [
            ((R(2, 3, 4), R(3, 1, seed=1)), {}),
            ((R(3, 4).t(), R(3, seed=2)), {}),
            ((R(3, 1), R(2, 3, 4, seed=3)), {}),
            ((R(5), R(seed=4)), {}),
            ((R(3, 4), R(3, 4, seed=5)), {}),
        ]
    if name == "mul_grad":  # (dy, other, like): sum_to(dy * other, like)
        return [
            ((R(2, 3, 4), R(3, 1, seed=1), R(4, seed=2)), {}),
            ((R(3, 4), R(3, 4, seed=1), R(1, 4, seed=2)), {}),
            ((R(3, 1), R(1, 4, seed=1), R(3, 4, seed=2)), {}),
            ((R(4, 3).t(), R(seed=1), R(seed=2)), {}),
        ]
    if name == "dense":
        return [
            ((R(3, 4), R(4, 5, seed=1), R(5, seed=2)), {"activation": "relu"}),
            ((R(3, 4), R(4, 5, seed=1)), {}),
            ((R(4, 3).t(), R(4, 2, seed=3), R(2, seed=4)), {"activation": "none"}),
        ]
    if name == "dense_grad":
        return [
            ((R(3, 5), R(3, 4, seed=1), R(4, 5, seed=2), R(3, 5, seed=3).abs()), {"activation": "relu"}),
            ((R(3, 5), R(3, 4, seed=1), R(4, 5, seed=2)), {}),
            ((R(3, 5), R(3, 4, seed=1), R(4, 5, seed=2), R(3, 5, seed=3).abs()),
             {"activation": "relu", "output_mask": [False, True, True]}),
            ((R(3, 5), R(3, 4, seed=1), R(4, 5, seed=2)), {"output_mask": [True, False, False]}),
        ]
    if name == "dense_grad_grad":
        dy, x, w, y = R(3, 5), R(3, 4, seed=1), R(4, 5, seed=2), R(3, 5, seed=3).abs()
        ddx, ddw, ddb = R(3, 4, seed=4), R(4, 5, seed=5), R(5, seed=6)
        return [
            ((dy, x, w, y, ddx, ddw, ddb), {"activation": "relu"}),
            ((dy, x, w, None, ddx, ddw, ddb), {}),
            ((dy, x, w, None, None, ddw), {"output_mask": [True, True, False]}),
            ((dy, x, w, y, ddx, None, ddb), {"activation": "relu", "output_mask": [False, False, True]}),
        ]
    raise KeyError(f"no samples for op {name!r}: add some to tests/torch/samples.py")
