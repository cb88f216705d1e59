"""Train an opforge model and the framework's own model side by side (shared
by the PyTorch demos): the same batches, the same optimizer steps, both losses
printed per epoch and the median time of a training step compared."""

from __future__ import annotations

import statistics
import sys
import time
from typing import Callable, Sequence

import torch
from torch import nn

Batch = tuple[torch.Tensor, torch.Tensor]
Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def step(model: nn.Module, optimizer: torch.optim.Optimizer, loss_fn: Loss, x: torch.Tensor, t: torch.Tensor) -> float:
    optimizer.zero_grad()
    loss = loss_fn(model(x), t)
    loss.backward()
    optimizer.step()
    return float(loss.detach())


def train(
    ours: nn.Module,
    theirs: nn.Module,
    optimizer: Callable[[nn.Module], torch.optim.Optimizer],
    loss_fn: Loss,
    batches: Sequence[Batch],
    epochs: int,
    rtol: float,
) -> int:
    """Trains both models; returns the exit status (1 when the losses disagree)."""
    opt_ours, opt_theirs = optimizer(ours), optimizer(theirs)
    times_ours: list[float] = []
    times_theirs: list[float] = []
    ok = True
    print(f"{'epoch':>5}  {'opforge loss':>13}  {'torch.nn loss':>13}  {'|diff|':>9}")
    for epoch in range(epochs):
        loss_ours = loss_theirs = 0.0
        for x, t in batches:
            start = time.perf_counter()
            loss_ours += step(ours, opt_ours, loss_fn, x, t)
            middle = time.perf_counter()
            loss_theirs += step(theirs, opt_theirs, loss_fn, x, t)
            times_ours.append(middle - start)
            times_theirs.append(time.perf_counter() - middle)
        loss_ours /= len(batches)
        loss_theirs /= len(batches)
        diff = abs(loss_ours - loss_theirs)
        ok = ok and diff <= rtol * max(1.0, abs(loss_theirs))
        print(f"{epoch:>5}  {loss_ours:>13.6f}  {loss_theirs:>13.6f}  {diff:>9.2e}")
    median_ours, median_theirs = statistics.median(times_ours), statistics.median(times_theirs)
    print(
        f"training step, median of {len(times_ours)}: opforge {median_ours * 1e3:.3f} ms, "
        f"torch.nn {median_theirs * 1e3:.3f} ms, ratio {median_ours / median_theirs:.2f}x "
        f"(threads: torch {torch.get_num_threads()})"
    )
    if not ok:
        print("FAIL: the losses disagree", file=sys.stderr)
        return 1
    print("PASS: opforge and torch.nn losses agree")
    return 0
