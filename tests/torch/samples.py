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
    # the activations: gelu (both forms) and silu take x; sigmoid's and tanh's gradient rows take
    # the forward output y (Y: values in (0, 1)); non-contiguous views among them
    Y: Callable[..., torch.Tensor] = lambda *s, seed=0: _r(*s, dtype=dtype, seed=seed).sigmoid().requires_grad_(  # noqa: E731
        requires_grad)
    if name in ("gelu", "silu", "sigmoid", "tanh"):
        forms = [{}, {"approximate": "tanh"}, {"approximate": "none"}] if name == "gelu" else [{}, {}, {}]
        return [((R(3, 5),), forms[0]), ((R(2, 3, 4).transpose(0, 2),), forms[1]), ((R(9)[::2],), forms[2])]
    if name in ("gelu_grad", "silu_grad"):
        tanh = {"approximate": "tanh"} if name == "gelu_grad" else {}
        return [((R(4, 6), R(4, 6, seed=1)), {}), ((R(5), R(5, seed=2)), tanh), ((R(4, 3).t(), R(3, 4, seed=3)), tanh)]
    if name in ("gelu_grad_grad", "silu_grad_grad"):
        tanh = {"approximate": "tanh"} if name == "gelu_grad_grad" else {}
        return [((R(3, 4), R(3, 4, seed=1), R(3, 4, seed=2)), {}),
                ((R(5), R(5, seed=3), R(5, seed=4)), tanh),
                ((R(4, 3).t(), R(3, 4, seed=5), R(6, 8, seed=6)[::2, ::2]), tanh)]
    if name in ("sigmoid_grad", "tanh_grad"):
        return [((R(4, 6), Y(4, 6, seed=1)), {}), ((R(4, 3).t(), Y(3, 4, seed=2)), {})]
    if name in ("sigmoid_grad_grad", "tanh_grad_grad"):
        return [((R(3, 4), R(3, 4, seed=1), Y(3, 4, seed=2)), {}),
                ((R(4, 3).t(), R(3, 4, seed=3), Y(6, 8, seed=4)[::2, ::2]), {})]
    if name in ("softmax", "log_softmax"):
        return [((R(3, 5),), {}), ((R(4, 3, 6).transpose(0, 2),), {}), ((R(7),), {})]
    if name in ("softmax_grad", "log_softmax_grad"):
        y = torch.softmax(R(3, 5, seed=1).detach(), -1)
        y = (y if name == "softmax_grad" else y.log()).requires_grad_(requires_grad)
        return [((R(3, 5), y), {})]
    if name == "softmax_grad_grad":
        y = torch.softmax(R(3, 5, seed=1).detach(), -1).requires_grad_(requires_grad)
        return [((R(3, 5, seed=2), R(3, 5), y), {}), ((R(3, 5, seed=2), R(3, 5), y), {"output_mask": [False, True, False]})]
    if name == "log_softmax_grad_grad":
        y = torch.log_softmax(R(3, 5, seed=1).detach(), -1).requires_grad_(requires_grad)
        return [((R(3, 5, seed=2), y, R(3, 5)), {}), ((R(3, 5, seed=2), y), {"output_mask": [True, False]})]
    w = (1.0 + 0.1 * _r(5, dtype=dtype, seed=9)).requires_grad_(requires_grad)
    stats = torch.ops.opforge.layer_norm(_r(3, 5, dtype=dtype, seed=1), None, None)
    mean, rstd = (t.detach().requires_grad_(requires_grad) for t in stats[1:])
    rms_rstd = torch.ops.opforge.rms_norm(_r(3, 5, dtype=dtype, seed=1), None)[1].detach().requires_grad_(requires_grad)
    if name == "rms_norm":
        return [((R(3, 5), w), {"eps": 1e-3}), ((R(2, 6).t(),), {}), ((R(4, 3, 5), w), {})]
    if name == "layer_norm":
        return [((R(3, 5), w, R(5, seed=3)), {"eps": 1e-3}), ((R(2, 6).t(),), {}), ((R(4, 3, 5), None, R(5)), {})]
    x = R(3, 5, seed=1)
    if name == "rms_norm_grad":
        return [
            ((x, rms_rstd, R(3, 5), w, R(3, seed=4)), {}),
            ((x, rms_rstd, R(3, 5)), {"output_mask": [True, False]}),
            ((x, rms_rstd, None, w, R(3, seed=4)), {}),
        ]
    if name == "layer_norm_grad":
        return [
            ((x, mean, rstd, R(3, 5), w, R(3, seed=4), R(3, seed=5)), {}),
            ((x, mean, rstd, R(3, 5)), {"output_mask": [True, False, True]}),
            ((x, mean, rstd, None, w, R(3, seed=4)), {}),
        ]
    if name == "rms_norm_grad_grad":
        return [
            ((x, rms_rstd, R(3, 5), w, R(3, seed=4), R(3, 5, seed=6), R(5, seed=7)), {}),
            ((x, rms_rstd, R(3, 5), None, None, R(3, 5, seed=6)), {"output_mask": [True, True, True, False, False]}),
        ]
    if name == "rms_norm_grad_jvp":
        return [
            ((x, rms_rstd, R(3, 5), w, R(3, seed=4), R(3, 5, seed=6), R(3, seed=7), R(5, seed=8)), {}),
            ((x, rms_rstd, R(3, 5), None, None, R(3, 5, seed=6)), {"output_mask": [True, False]}),
        ]
    if name == "layer_norm_grad_grad":
        return [
            ((x, mean, rstd, R(3, 5), w, R(3, seed=4), R(3, seed=5), R(3, 5, seed=6)), {}),
            ((x, mean, rstd, R(3, 5), None, None, None, R(3, 5, seed=6)),
             {"output_mask": [True, True, True, True, False, False, False]}),
        ]  # fmt: skip
    if name == "layer_norm_grad_grad_affine":
        return [
            ((x, mean, rstd, R(3, 5), R(5, seed=7), R(5, seed=8)), {}),
            ((x, mean, rstd, R(3, 5), R(5, seed=7)), {"output_mask": [True, True, False, False]}),
        ]
    if name in ("layer_norm_grad_jvp", "layer_norm_grad_jvp_stats"):
        tangents = (R(3, 5, seed=6), R(5, seed=7)) if name == "layer_norm_grad_jvp" else (R(3, seed=6), R(3, seed=7))
        return [
            ((x, mean, rstd, R(3, 5), w, R(3, seed=4), *tangents), {}),
            ((x, mean, rstd, R(3, 5), None, None, tangents[0]), {"output_mask": [True, False]}),
        ]
    # the tangents of the second-order rows: the second-order row's inputs, then a tangent
    if name == "log_softmax_grad_grad_jvp":
        y = torch.log_softmax(R(3, 5, seed=1).detach(), -1)
        return [((R(3, 5, seed=2), y, R(3, 5), R(3, 5, seed=3)), {}),
                ((R(3, 5, seed=2), y, None, R(3, 5, seed=3)), {"output_mask": [True, False]})]  # fmt: skip
    if name in ("rms_norm_grad_grad_jvp", "rms_norm_grad_grad_jvp_rstd"):
        tangent = R(3, 5, seed=8) if name == "rms_norm_grad_grad_jvp" else R(3, seed=8)
        return [
            ((x, rms_rstd, R(3, 5), w, R(3, seed=4), R(3, 5, seed=6), R(5, seed=7), tangent), {}),
            ((x, rms_rstd, R(3, 5), None, None, R(3, 5, seed=6), None, tangent),
             {"output_mask": [True, True, True, False, False]}),
        ]  # fmt: skip
    if name == "rms_norm_grad_grad_jvp_w":
        return [((x, rms_rstd, R(3, 5), R(3, 5, seed=6), R(5, seed=8)), {}),
                ((x, rms_rstd, None, R(3, 5, seed=6), R(5, seed=8)), {"output_mask": [False, True, True]})]  # fmt: skip
    if name in ("layer_norm_grad_grad_jvp", "layer_norm_grad_grad_jvp_mean", "layer_norm_grad_grad_jvp_rstd"):
        tangent = R(3, 5, seed=8) if name == "layer_norm_grad_grad_jvp" else R(3, seed=8)
        return [
            ((x, mean, rstd, R(3, 5), w, R(3, seed=5), R(3, 5, seed=6), tangent), {}),
            ((x, mean, rstd, R(3, 5), None, None, R(3, 5, seed=6), tangent),
             {"output_mask": [True, True, True, True, False, False]}),
        ]  # fmt: skip
    if name == "layer_norm_grad_grad_jvp_w":
        return [
            ((x, mean, rstd, R(3, 5), R(3, 5, seed=6), R(5, seed=8)), {}),
            ((x, mean, rstd, None, R(3, 5, seed=6), R(5, seed=8)), {"output_mask": [False, True, True, True]}),
        ]
    if name == "layer_norm_grad_grad_affine_jvp":
        return [
            ((x, mean, rstd, R(3, 5), R(5, seed=7), R(3, 5, seed=8), R(3, seed=9), R(3, seed=10)), {}),
            ((x, mean, rstd, R(3, 5), R(5, seed=7), R(3, 5, seed=8)), {"output_mask": [True, False, True, True]}),
        ]
    raise KeyError(f"no samples for op {name!r}: add some to tests/torch/samples.py")
