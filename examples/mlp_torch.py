#!/usr/bin/env python3
"""An MLP trained with opforge's torch modules, next to the same MLP in torch.nn.

    x [512, 64] -> Dense(64, 128, relu) -> Dense(128, 64) -> ReLU -> Dense(64, 10)

Both models are built after the same ``torch.manual_seed`` (``Dense``
initializes exactly like ``nn.Linear``, on the transposed weight), see the
same batches and take the same SGD steps. Each epoch prints both losses; they
must agree to float32 tolerance, else the script exits with status 1. Then it
prints the time ratio of a training step (opforge / torch.nn), measured here.
"""

from __future__ import annotations

import statistics
import sys
import time

import torch
from torch import nn

import opforge
import opforge.torch.nn as onn

SIZES = (64, 128, 64, 10)
BATCH, BATCHES, EPOCHS, LEARNING_RATE = 512, 8, 6, 0.05


def opforge_mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        onn.Dense(SIZES[0], SIZES[1], activation="relu"), onn.Dense(SIZES[1], SIZES[2]), onn.ReLU(),
        onn.Dense(SIZES[2], SIZES[3]),
    )  # fmt: skip


def torch_mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(SIZES[0], SIZES[1]), nn.ReLU(), nn.Linear(SIZES[1], SIZES[2]), nn.ReLU(),
        nn.Linear(SIZES[2], SIZES[3]),
    )  # fmt: skip


def data() -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    teacher = torch.randn(SIZES[0], SIZES[-1], generator=g) / SIZES[0] ** 0.5
    batches = []
    for _ in range(BATCHES):
        x = torch.randn(BATCH, SIZES[0], generator=g)
        batches.append((x, torch.tanh(x @ teacher) + 0.05 * torch.randn(BATCH, SIZES[-1], generator=g)))
    return batches


def step(model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, t: torch.Tensor) -> float:
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), t)
    loss.backward()
    optimizer.step()
    return float(loss.detach())


def main() -> int:
    torch.set_num_threads(1)  # like for like, and steadier on a shared machine
    opforge.set_num_threads(1)
    batches = data()
    ours, theirs = opforge_mlp(), torch_mlp()
    opt_ours = torch.optim.SGD(ours.parameters(), lr=LEARNING_RATE)
    opt_theirs = torch.optim.SGD(theirs.parameters(), lr=LEARNING_RATE)
    times_ours: list[float] = []
    times_theirs: list[float] = []
    ok = True
    print(f"{'epoch':>5}  {'opforge loss':>13}  {'torch.nn loss':>13}  {'|diff|':>9}")
    for epoch in range(EPOCHS):
        loss_ours = loss_theirs = 0.0
        for x, t in batches:
            start = time.perf_counter()
            loss_ours += step(ours, opt_ours, x, t)
            middle = time.perf_counter()
            loss_theirs += step(theirs, opt_theirs, x, t)
            times_ours.append(middle - start)
            times_theirs.append(time.perf_counter() - middle)
        loss_ours /= len(batches)
        loss_theirs /= len(batches)
        diff = abs(loss_ours - loss_theirs)
        ok = ok and diff <= 1e-4 * max(1.0, abs(loss_theirs))
        print(f"{epoch:>5}  {loss_ours:>13.6f}  {loss_theirs:>13.6f}  {diff:>9.2e}")
    ratio = statistics.median(times_ours) / statistics.median(times_theirs)
    print(
        f"training step, median of {len(times_ours)}: opforge {statistics.median(times_ours) * 1e3:.3f} ms, "
        f"torch.nn {statistics.median(times_theirs) * 1e3:.3f} ms, ratio {ratio:.2f}x "
        "(1 thread each)"
    )
    if not ok:
        print("FAIL: the losses disagree", file=sys.stderr)
        return 1
    print("PASS: opforge and torch.nn losses agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
