"""The transformer section of ``opforge bench``: the ops of a transformer
block, forward and backward, on one float32 [N, M] tensor (rows of M).

=================== ===================================================================
op                  what it computes (x, dy: [N, M]; w, b: [M])
=================== ===================================================================
gelu, gelu_tanh     gelu(x), approximate "none" (erf) and "tanh"
silu, sigmoid, tanh the activation of x
softmax,            over each row
log_softmax
layer_norm          (x - mean) * rstd * w + b, eps 1e-5 (mean and rstd are outputs too)
rms_norm            x * rstd * w, eps 1e-6 (rstd is an output too)
add, mul            x + b, x * w: [M] broadcast over the rows
<op>_grad           the gradient rows, from dy: gelu/silu: dx(dy, x); sigmoid/tanh/
                    softmax/log_softmax: dx(dy, y) with y the forward output;
                    layer_norm: dx, dw, db(x, mean, rstd, dy, w); rms_norm: dx, dw(x,
                    rstd, dy, w); add: db = dy summed over rows (opforge's sum_to; dx is
                    dy itself); mul: dx = dy * w and dw = (dy * x) summed over rows
=================== ===================================================================

This module is NumPy only: the inputs (the same in every worker: fixed
seeds, forward outputs and statistics computed here) and the float64
references that each result is checked against after timing. Who runs what
is in frameworks.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional, Union

import numpy as np
import numpy.typing as npt

#: Report order: each forward op, then its gradient row(s).
OPS = tuple(
    name
    for op in ("gelu", "gelu_tanh", "silu", "sigmoid", "tanh", "softmax", "log_softmax", "layer_norm", "rms_norm",
               "add", "mul")
    for name in (op, op + "_grad")
)  # fmt: skip
#: [N, M] arrays read + written per call (the [M] and [N] vectors not counted), for GB/s.
STREAMS = {op: 3 if op.endswith("_grad") else 2 for op in OPS} | {"add": 3, "mul": 3, "add_grad": 1}
LAYER_NORM_EPS = 1e-5
RMS_NORM_EPS = 1e-6
#: The outputs that are checked, in the order every implementation returns them.
CHECKED = {"layer_norm_grad": ("dx", "dw", "db"), "rms_norm_grad": ("dx", "dw"), "add_grad": ("db",),
           "mul_grad": ("dx", "dw")}  # fmt: skip


def copied_input(d: Data) -> np.ndarray:
    """The [N, M] input that the copy timed beside op d.op reads (worker.py):
    x for the forward ops, dy for the gradient rows (each of which reads it)."""
    return d.dy if is_backward(d.op) else d.x


def forward_of(op: str) -> str:
    """The forward op of a gradient row ("softmax_grad" -> "softmax"); op itself if forward."""
    return op.removesuffix("_grad")


def is_backward(op: str) -> bool:
    return op.endswith("_grad")


@dataclass
class Data:
    """One op's inputs and preallocated outputs (outputs touched before timing)."""

    op: str
    x: np.ndarray  # [N, M], standard normal
    dy: np.ndarray  # [N, M], standard normal: the cotangent of the gradient rows
    w: np.ndarray  # [M] in [0.5, 1.5]: the norms' weight, mul's broadcast factor
    b: np.ndarray  # [M], standard normal: layer_norm's bias, add's broadcast addend
    out: np.ndarray  # [N, M]
    out_m: np.ndarray  # [M]: dw, db
    out_m2: np.ndarray  # [M]
    out_n: np.ndarray  # [N]: mean, rstd
    out_n2: np.ndarray  # [N]
    y: Optional[np.ndarray] = None  # the forward output that sigmoid/tanh/softmax/log_softmax's gradients take
    mean: Optional[np.ndarray] = None  # [N], layer_norm's, for its gradient
    rstd: Optional[np.ndarray] = None  # [N], layer_norm's or rms_norm's, for the gradient


def make_data(op: str, shape: tuple[int, int]) -> Data:
    """The inputs of op on a [N, M] = shape float32 tensor, the same for every implementation."""
    n, m = shape
    rng = np.random.default_rng(20263)
    x = rng.standard_normal(shape, dtype=np.float32)
    dy = rng.standard_normal(shape, dtype=np.float32)
    w = rng.uniform(0.5, 1.5, m).astype(np.float32)
    b = rng.standard_normal(m, dtype=np.float32)
    d = Data(op, x, dy, w, b, np.zeros(shape, np.float32), np.zeros(m, np.float32), np.zeros(m, np.float32),
             np.zeros(n, np.float32), np.zeros(n, np.float32))
    if op in ("sigmoid_grad", "tanh_grad", "softmax_grad", "log_softmax_grad"):
        d.y = _forward(forward_of(op), x.astype(np.float64)).astype(np.float32)
    elif op == "layer_norm_grad":
        mean, rstd = _layer_norm_stats(x.astype(np.float64))
        d.mean, d.rstd = mean.astype(np.float32), rstd.astype(np.float32)
    elif op == "rms_norm_grad":
        d.rstd = _rms_rstd(x.astype(np.float64)).astype(np.float32)
    return d


# --------------------------------------------------------------------------
# float64 references
# --------------------------------------------------------------------------

F64 = npt.NDArray[np.float64]

_erf_scalar = np.vectorize(math.erf, otypes=[np.float64])


def _erf(x: F64) -> F64:
    result: F64 = _erf_scalar(x)
    return result
_TANH_C = math.sqrt(2 / math.pi)


def _sigmoid(x: F64) -> F64:
    return 0.5 * (1 + np.tanh(0.5 * x))


def _layer_norm_stats(x: F64) -> tuple[F64, F64]:
    mean = x.mean(-1)
    return mean, 1 / np.sqrt(x.var(-1) + LAYER_NORM_EPS)


def _rms_rstd(x: F64) -> F64:
    mean_square: F64 = (x * x).mean(-1)
    return 1 / np.sqrt(mean_square + RMS_NORM_EPS)


def _forward(op: str, x: F64, w: Union[F64, float] = 1.0, b: Union[F64, float] = 0.0) -> F64:
    """A forward op on float64 rows (w, b: the [M] vectors where the op takes them)."""
    if op == "gelu":
        return 0.5 * x * (1 + _erf(x / math.sqrt(2)))
    if op == "gelu_tanh":
        t: F64 = np.tanh(_TANH_C * (x + 0.044715 * x * x * x))
        return 0.5 * x * (1 + t)
    if op == "silu":
        return x * _sigmoid(x)
    if op == "sigmoid":
        return _sigmoid(x)
    if op == "tanh":
        return np.tanh(x)
    if op in ("softmax", "log_softmax"):
        shifted: F64 = x - x.max(-1, keepdims=True)
        lse: F64 = np.log(np.exp(shifted).sum(-1, keepdims=True))
        return np.exp(shifted - lse) if op == "softmax" else shifted - lse
    if op == "layer_norm":
        mean, rstd = _layer_norm_stats(x)
        return (x - mean[:, None]) * rstd[:, None] * w + b
    if op == "rms_norm":
        return x * _rms_rstd(x)[:, None] * w
    if op == "add":
        return x + b
    return x * w  # mul


def _column_sum(d: Data, term: Callable[[slice], np.ndarray]) -> np.ndarray:
    """The sum over all rows of term(rows of x, dy, ...) as float64, in blocks of rows."""
    n = d.x.shape[0]
    return sum((term(slice(i, min(i + 256, n))) for i in range(0, n, 256)), np.zeros(d.x.shape[1]))


def references(d: Data, rows: np.ndarray) -> list[np.ndarray]:
    """The float64 values of the checked outputs: [N, M] outputs at `rows`, [M] outputs whole."""
    op = d.op
    f64 = np.float64
    x, dy, w, b = d.x[rows].astype(f64), d.dy[rows].astype(f64), d.w.astype(f64), d.b.astype(f64)
    if not is_backward(op):
        return [_forward(op, x, w, b)]
    if op == "gelu_grad":
        return [dy * (0.5 * (1 + _erf(x / math.sqrt(2))) + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi))]
    if op == "gelu_tanh_grad":
        t = np.tanh(_TANH_C * (x + 0.044715 * x**3))
        return [dy * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _TANH_C * (1 + 3 * 0.044715 * x * x))]
    if op == "silu_grad":
        s = _sigmoid(x)
        return [dy * s * (1 + x * (1 - s))]
    if d.y is not None:  # the gradients from the forward output
        y = d.y[rows].astype(f64)
        if op == "sigmoid_grad":
            return [dy * y * (1 - y)]
        if op == "tanh_grad":
            return [dy * (1 - y * y)]
        if op == "softmax_grad":
            return [y * (dy - (dy * y).sum(-1, keepdims=True))]
        return [dy - np.exp(y) * dy.sum(-1, keepdims=True)]  # log_softmax_grad
    if op == "layer_norm_grad":
        assert d.mean is not None and d.rstd is not None
        mean, rstd = d.mean.astype(f64), d.rstd.astype(f64)
        xh = (x - mean[rows, None]) * rstd[rows, None]
        g = dy * w
        dx = rstd[rows, None] * (g - g.mean(-1, keepdims=True) - xh * (g * xh).mean(-1, keepdims=True))
        dw = _column_sum(d, lambda s: (d.dy[s] * ((d.x[s] - mean[s, None]) * rstd[s, None])).sum(0))
        return [dx, dw, _column_sum(d, lambda s: d.dy[s].astype(f64).sum(0))]
    if op == "rms_norm_grad":
        assert d.rstd is not None
        rstd = d.rstd.astype(f64)
        r = rstd[rows, None]
        g = dy * w
        dx = r * g - x * r**3 / x.shape[-1] * (g * x).sum(-1, keepdims=True)
        return [dx, _column_sum(d, lambda s: (d.dy[s] * d.x[s].astype(f64) * rstd[s, None]).sum(0))]
    if op == "add_grad":
        return [_column_sum(d, lambda s: d.dy[s].astype(f64).sum(0))]
    # mul_grad
    return [dy * w, _column_sum(d, lambda s: (d.dy[s].astype(f64) * d.x[s]).sum(0))]


def _relative_error(result: np.ndarray, reference: np.ndarray) -> float:
    scale = float(np.max(np.abs(reference))) if reference.size else 0.0
    error = float(np.max(np.abs(result.astype(np.float64) - reference))) if reference.size else 0.0
    return error / scale if scale > 0 else error


def check(d: Data, results: list[np.ndarray]) -> float:
    """The largest relative error (to the largest reference value) of the checked outputs,
    on about 16 sampled rows of [N, M] outputs and all of [M] outputs; inf if any is missing
    or misshapen."""
    n = d.x.shape[0]
    rows = np.unique(np.linspace(0, n - 1, num=min(16, n)).astype(int))
    errors = []
    for result, reference in zip(results, references(d, rows), strict=False):
        full = reference.ndim == 1
        if result.shape != (d.x.shape[1:] if full else d.x.shape):
            return math.inf
        errors.append(_relative_error(result if full else result[rows], reference))
    expected = len(CHECKED.get(d.op, ("y",)))
    return max(errors) if len(errors) == expected else math.inf
