"""``torch.nn``-style modules over the opforge operators."""

from __future__ import annotations

import math
from typing import Optional, Sequence, Union

import torch
from torch import nn

__all__ = ["ReLU", "Scale", "Dense", "GELU", "SiLU", "Softmax", "LayerNorm", "RMSNorm"]

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


class GELU(nn.Module):
    """Gaussian error linear unit, like ``torch.nn.GELU``: ``approximate`` is
    ``"none"`` (the erf form) or ``"tanh"``."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"opforge.torch.nn.GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ops.gelu(x, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class SiLU(nn.Module):
    """``x * sigmoid(x)``, like ``torch.nn.SiLU``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ops.silu(x)


class Softmax(nn.Module):
    """Softmax over ``dim``, like ``torch.nn.Softmax`` (opforge's op works on
    the last axis; another ``dim`` is moved there as a view, and the row
    engine gathers its strided rows)."""

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.dim in (-1, x.dim() - 1):
            return _ops.softmax(x)
        return _ops.softmax(x.movedim(self.dim, -1)).movedim(-1, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


def _normalized_size(layer: str, normalized_shape: Union[int, Sequence[int]]) -> tuple[tuple[int, ...], int]:
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if not shape or any(not isinstance(d, int) or d < 0 for d in shape):
        raise ValueError(f"opforge.torch.nn.{layer}: normalized_shape must be a non-empty list of sizes, got {normalized_shape!r}")
    return shape, math.prod(shape)


def _rows(layer: str, x: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """x with its normalized dims (the last len(shape)) flattened into one."""
    if tuple(x.shape[x.dim() - len(shape) :]) != shape:
        raise ValueError(f"opforge.torch.nn.{layer}: input of shape {list(x.shape)} does not end in {list(shape)}")
    return x if len(shape) == 1 else x.reshape(*x.shape[: x.dim() - len(shape)], -1)


def _unrows(y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """y (computed on _rows(x)) in x's shape: itself where it has it (one
    normalized dim), as a reshape in grad mode is a node of its own."""
    return y if y.dim() == x.dim() else y.reshape(x.shape)


class LayerNorm(nn.Module):
    """Layer normalization over the last dims, like ``torch.nn.LayerNorm``:
    ``(x - mean) / sqrt(var + eps) * weight + bias``, one ``opforge::layer_norm``."""

    def __init__(
        self,
        normalized_shape: Union[int, Sequence[int]],
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        device: Optional[torch.device] = None,
        dtype: Optional[torch.dtype] = None,
    ) -> None:
        super().__init__()
        self.normalized_shape, size = _normalized_size("LayerNorm", normalized_shape)
        self.eps = float(eps)
        self.elementwise_affine = elementwise_affine
        kwargs = {"device": device, "dtype": dtype}
        self.weight = nn.Parameter(torch.ones(size, **kwargs)) if elementwise_affine else None
        self.bias = nn.Parameter(torch.zeros(size, **kwargs)) if elementwise_affine and bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = _ops.layer_norm(_rows("LayerNorm", x, self.normalized_shape), self.weight, self.bias, eps=self.eps)[0]
        return _unrows(y, x)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class RMSNorm(nn.Module):
    """Root-mean-square normalization over the last dims, like
    ``torch.nn.RMSNorm``: ``x / sqrt(mean(x^2) + eps) * weight``; ``eps=None``
    takes the machine epsilon of the input's dtype, as PyTorch does."""

    def __init__(
        self,
        normalized_shape: Union[int, Sequence[int]],
        eps: Optional[float] = None,
        elementwise_affine: bool = True,
        device: Optional[torch.device] = None,
        dtype: Optional[torch.dtype] = None,
    ) -> None:
        super().__init__()
        self.normalized_shape, size = _normalized_size("RMSNorm", normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        self.weight = nn.Parameter(torch.ones(size, device=device, dtype=dtype)) if elementwise_affine else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        eps = torch.finfo(x.dtype).eps if self.eps is None else self.eps
        y = _ops.rms_norm(_rows("RMSNorm", x, self.normalized_shape), self.weight, eps=eps)[0]
        return _unrows(y, x)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
