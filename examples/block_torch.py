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

import sys

import torch
from torch import nn

import opforge
import opforge.torch.nn as onn
import side_by_side

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


def cross_entropy(probs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return -torch.log(probs.gather(1, labels[:, None]) + 1e-12).mean()


def main() -> int:
    torch.set_num_threads(1)  # like for like, and steadier on a shared machine
    opforge.set_num_threads(1)
    ours, theirs = Block(ours=True), Block(ours=False)
    for a, b in zip(ours.parameters(), theirs.parameters()):  # same numbers (Dense stores W^T)
        assert torch.equal(a, b) or torch.equal(a, b.t())
    return side_by_side.train(
        ours, theirs, lambda m: torch.optim.Adam(m.parameters(), lr=LEARNING_RATE), cross_entropy, data(), EPOCHS,
        rtol=1e-3,
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
