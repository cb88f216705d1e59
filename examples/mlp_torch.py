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

import sys

import torch
from torch import nn

import opforge
import opforge.torch.nn as onn
import side_by_side

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


def main() -> int:
    torch.set_num_threads(1)  # like for like, and steadier on a shared machine
    opforge.set_num_threads(1)
    return side_by_side.train(
        opforge_mlp(), torch_mlp(), lambda m: torch.optim.SGD(m.parameters(), lr=LEARNING_RATE),
        nn.functional.mse_loss, data(), EPOCHS, rtol=1e-4,
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
