"""``torch.nn``-style modules over the opforge operators."""

from __future__ import annotations

import math
from typing import Optional

import torch
from torch import nn

__all__ = ["ReLU", "Scale", "Dense"]

_ops = torch.ops.opforge


class ReLU(nn.Module):
    """``max(x, 0)`` elementwise, like ``torch.nn.ReLU``.

    ``inplace=True`` overwrites the input with ``opforge::relu_`` when autograd
    does not track it; ``relu_`` has no gradient, so a tensor that requires grad
    (in grad mode) goes through the out-of-place ``relu`` instead, and the
    module stays usable in training."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.inplace and not (x.requires_grad and torch.is_grad_enabled()):
            _ops.relu_(x)
            return x
        return _ops.relu(x)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Scale(nn.Module):
    """``alpha * x`` with a fixed ``alpha``."""

    def __init__(self, alpha: float) -> None:
        super().__init__()
        self.alpha = float(alpha)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ops.scale(x, alpha=self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"


class Dense(nn.Module):
    """``activation(x @ weight + bias)``: ``torch.nn.Linear`` (+ ReLU) in one op.

    ``weight`` is ``[in_features, out_features]`` (opforge's layout: the
    transpose of ``nn.Linear.weight``), initialized exactly as ``nn.Linear``
    initializes its own from the same random state, so that a ``Dense`` and an
    ``nn.Linear`` built after the same ``torch.manual_seed`` hold the same
    numbers. ``activation`` is None or ``"relu"``. Inputs of shape
    ``[..., in_features]`` give ``[..., out_features]``.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        activation: Optional[str] = None,
        device: Optional[torch.device] = None,
        dtype: Optional[torch.dtype] = None,
    ) -> None:
        super().__init__()
        if activation not in (None, "none", "relu"):
            raise ValueError(f"opforge.torch.nn.Dense: activation must be None or 'relu', got {activation!r}")
        self.in_features = in_features
        self.out_features = out_features
        self.activation = "none" if activation is None else activation
        kwargs = {"device": device, "dtype": dtype}
        self.weight = nn.Parameter(torch.empty((in_features, out_features), **kwargs))
        self.bias = nn.Parameter(torch.empty(out_features, **kwargs)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """What ``nn.Linear.reset_parameters`` does, on the transposed weight."""
        with torch.no_grad():
            linear_weight = torch.empty(
                (self.out_features, self.in_features), device=self.weight.device, dtype=self.weight.dtype
            )
            nn.init.kaiming_uniform_(linear_weight, a=math.sqrt(5))
            self.weight.copy_(linear_weight.t())
            if self.bias is not None:
                bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0
                nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 2:
            return _ops.dense(x, self.weight, self.bias, activation=self.activation)
        lead = x.shape[:-1]
        y = _ops.dense(x.reshape(-1, self.in_features), self.weight, self.bias, activation=self.activation)
        return y.reshape(*lead, self.out_features)

    def extra_repr(self) -> str:
        act = "" if self.activation == "none" else f", activation={self.activation!r}"
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}{act}"
