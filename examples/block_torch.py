#!/usr/bin/env python3
"""A transformer MLP block trained with opforge's torch modules, next to the
same block in torch.nn:

    x [256, 64] -> LayerNorm -> Dense(64, 256) -> GELU -> Dense(256, 64) -> + x
                -> RMSNorm -> Dense(64, 10) -> Softmax -> cross-entropy

Both models are built after the same ``torch.manual_seed`` (opforge's
``Dense`` initializes like ``nn.Linear``; the norms start at ones and zeros),
see the same batches and take the same Adam steps. Each epoch prints both
losses; they must agree to float32 tolerance, else the script exits with
status 1. Then it prints the time ratio of a training step (opforge / torch.nn).
"""

from __future__ import annotations

import statistics
import sys
import time

import torch
from torch import nn

import opforge
import opforge.torch.nn as onn

WIDTH, HIDDEN, CLASSES = 64, 256, 10
BATCH, BATCHES, EPOCHS, LEARNING_RATE = 256, 8, 5, 3e-3


class Block(nn.Module):
    """The block, from opforge's modules (``ours``) or torch.nn's."""

    def __init__(self, ours: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        if ours:
            self.norm, self.up, self.act = onn.LayerNorm(WIDTH), onn.Dense(WIDTH, HIDDEN), onn.GELU()
            self.down, self.norm2, self.head = onn.Dense(HIDDEN, WIDTH), onn.RMSNorm(WIDTH), onn.Dense(WIDTH, CLASSES)
            self.softmax: nn.Module = onn.Softmax(dim=-1)
        else:
            self.norm, self.up, self.act = nn.LayerNorm(WIDTH), nn.Linear(WIDTH, HIDDEN), nn.GELU()
            self.down, self.norm2, self.head = nn.Linear(HIDDEN, WIDTH), nn.RMSNorm(WIDTH), nn.Linear(WIDTH, CLASSES)
            self.softmax = nn.Softmax(dim=-1)
        self.ours = ours

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        update = self.down(self.act(self.up(self.norm(x))))
        h = torch.ops.opforge.add(x, update) if self.ours else x + update
        return self.softmax(self.head(self.norm2(h)))


def data() -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    teacher = torch.randn(WIDTH, CLASSES, generator=g)
    batches = []
    for _ in range(BATCHES):
        x = torch.randn(BATCH, WIDTH, generator=g)
        batches.append((x, (x @ teacher).argmax(-1)))
    return batches


def step(model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, labels: torch.Tensor) -> float:
    optimizer.zero_grad()
    probs = model(x)
    loss = -torch.log(probs.gather(1, labels[:, None]) + 1e-12).mean()
    loss.backward()
    optimizer.step()
    return float(loss.detach())


def main() -> int:
    torch.set_num_threads(1)  # like for like, and steadier on a shared machine
    opforge.set_num_threads(1)
    batches = data()
    ours, theirs = Block(ours=True), Block(ours=False)
    for a, b in zip(ours.parameters(), theirs.parameters()):  # same numbers (Dense stores W^T)
        assert torch.equal(a, b) or torch.equal(a, b.t())
    opt_ours = torch.optim.Adam(ours.parameters(), lr=LEARNING_RATE)
    opt_theirs = torch.optim.Adam(theirs.parameters(), lr=LEARNING_RATE)
    times_ours: list[float] = []
    times_theirs: list[float] = []
    ok = True
    print(f"{'epoch':>5}  {'opforge loss':>13}  {'torch.nn loss':>13}  {'|diff|':>9}")
    for epoch in range(EPOCHS):
        loss_ours = loss_theirs = 0.0
        for x, labels in batches:
            start = time.perf_counter()
            loss_ours += step(ours, opt_ours, x, labels)
            middle = time.perf_counter()
            loss_theirs += step(theirs, opt_theirs, x, labels)
            times_ours.append(middle - start)
            times_theirs.append(time.perf_counter() - middle)
        loss_ours /= len(batches)
        loss_theirs /= len(batches)
        diff = abs(loss_ours - loss_theirs)
        ok = ok and diff <= 1e-3 * max(1.0, abs(loss_theirs))
        print(f"{epoch:>5}  {loss_ours:>13.6f}  {loss_theirs:>13.6f}  {diff:>9.2e}")
    ratio = statistics.median(times_ours) / statistics.median(times_theirs)
    print(
        f"training step, median of {len(times_ours)}: opforge {statistics.median(times_ours) * 1e3:.3f} ms, "
        f"torch.nn {statistics.median(times_theirs) * 1e3:.3f} ms, ratio {ratio:.2f}x (1 thread each)"
    )
    if not ok:
        print("FAIL: the losses disagree", file=sys.stderr)
        return 1
    print("PASS: opforge and torch.nn losses agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
