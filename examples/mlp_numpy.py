#!/usr/bin/env python3
"""A two-layer MLP trained with opforge ops, checked step by step against NumPy.

    x [256, 256] -> dense + relu -> h [256, 512] -> dense -> y [256, 10]
    loss = sum((y - t)^2) / (2 * batch)

Forward: ``dense`` with the relu fused, then ``dense``. Backward: ``dense_grad``
twice (the first layer's one skips dx, which nobody needs). SGD update:
``scale`` then ``add`` in place. Only the loss reduction is NumPy.

A plain NumPy implementation trains an identical copy of the model in
lockstep; every step's loss and gradients must agree, else the script exits
with status 1. Then both are timed on the same machine in the same run.
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np

import opforge
import opforge.numpy as onp

BATCH, INPUTS, HIDDEN, OUTPUTS = 256, 256, 512, 10
DTYPE = np.float32
LEARNING_RATE = 0.02
STEPS = 8
LOSS_RTOL = 1e-5  # relative, per step
GRAD_RTOL = 1e-4  # max |difference| relative to max |gradient|, per parameter
WARMUP, TIMED = 5, 30

Params = dict[str, np.ndarray]
PARAM_NAMES = ("w1", "b1", "w2", "b2")


def make_problem(seed: int = 0) -> tuple[np.ndarray, np.ndarray, Params]:
    """Inputs, regression targets from a random 'teacher' network, initial parameters."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((BATCH, INPUTS))
    teacher = rng.standard_normal((INPUTS, OUTPUTS)) / np.sqrt(INPUTS)
    targets = np.tanh(x @ teacher) + 0.1 * rng.standard_normal((BATCH, OUTPUTS))
    params = {
        "w1": rng.standard_normal((INPUTS, HIDDEN)) / np.sqrt(INPUTS),
        "b1": np.zeros(HIDDEN),
        "w2": rng.standard_normal((HIDDEN, OUTPUTS)) / np.sqrt(HIDDEN),
        "b2": np.zeros(OUTPUTS),
    }
    return x.astype(DTYPE), targets.astype(DTYPE), {k: v.astype(DTYPE) for k, v in params.items()}


class OpforgeMLP:
    """The model on opforge ops, with every activation and gradient buffer allocated once."""

    def __init__(self, params: Params) -> None:
        self.params = {k: v.copy() for k, v in params.items()}
        self.grads = {k: np.empty_like(v) for k, v in params.items()}
        new = lambda *shape: np.empty(shape, DTYPE)  # noqa: E731
        self.h, self.y, self.diff, self.dy, self.dh = (
            new(BATCH, HIDDEN), new(BATCH, OUTPUTS), new(BATCH, OUTPUTS), new(BATCH, OUTPUTS), new(BATCH, HIDDEN)
        )  # fmt: skip
        self.minus_t = new(BATCH, OUTPUTS)

    def loss_and_grads(self, x: np.ndarray, t: np.ndarray) -> float:
        p, g = self.params, self.grads
        onp.dense(x, p["w1"], p["b1"], activation="relu", out=self.h)
        onp.dense(self.h, p["w2"], p["b2"], out=self.y)
        onp.scale(t, alpha=-1.0, out=self.minus_t)
        onp.add(self.y, self.minus_t, out=self.diff)
        loss = float(np.vdot(self.diff, self.diff)) / (2 * BATCH)
        onp.scale(self.diff, alpha=1.0 / BATCH, out=self.dy)
        onp.dense_grad(self.dy, self.h, p["w2"], out=(self.dh, g["w2"], g["b2"]))
        onp.dense_grad(self.dh, x, p["w1"], self.h, activation="relu", out=(onp.SKIP, g["w1"], g["b1"]))
        return loss

    def update(self) -> None:
        for name, param in self.params.items():
            step = onp.scale(self.grads[name], alpha=-LEARNING_RATE, out=self.grads[name])
            onp.add(param, step, out=param)


class NumpyMLP:
    """The same model in plain NumPy: the reference."""

    def __init__(self, params: Params) -> None:
        self.params = {k: v.copy() for k, v in params.items()}
        self.grads: Params = {}

    def loss_and_grads(self, x: np.ndarray, t: np.ndarray) -> float:
        p = self.params
        z = x @ p["w1"] + p["b1"]
        h = np.maximum(z, 0)
        diff = h @ p["w2"] + p["b2"] - t
        loss = float(np.vdot(diff, diff)) / (2 * BATCH)
        dy = diff / DTYPE(BATCH)
        dz = (dy @ p["w2"].T) * (z > 0)
        self.grads = {"w1": x.T @ dz, "b1": dz.sum(axis=0), "w2": h.T @ dy, "b2": dy.sum(axis=0)}
        return loss

    def update(self) -> None:
        for name, param in self.params.items():
            param -= DTYPE(LEARNING_RATE) * self.grads[name]


def max_grad_error(a: Params, b: Params) -> float:
    """Largest |difference| over all gradients, each relative to that gradient's max |value|."""
    return max(float(np.abs(a[k] - b[k]).max() / max(np.abs(b[k]).max(), 1e-30)) for k in PARAM_NAMES)


def time_step(model: OpforgeMLP | NumpyMLP, x: np.ndarray, t: np.ndarray) -> float:
    """Median seconds of one training step (loss, gradients, update) after a warm-up."""

    def step() -> None:
        model.loss_and_grads(x, t)
        model.update()

    times = []
    for i in range(WARMUP + TIMED):
        start = time.perf_counter()
        step()
        if i >= WARMUP:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    x, t, params = make_problem()
    ours, reference = OpforgeMLP(params), NumpyMLP(params)
    info = opforge.info()
    print(f"MLP {INPUTS} -> {HIDDEN} (relu) -> {OUTPUTS}, batch {BATCH}, {np.dtype(DTYPE).name}, SGD lr {LEARNING_RATE}")
    print(f"opforge {info['version']} (isa {info['isa']}, {info['num_threads']} threads), numpy {np.__version__}\n")
    print(f"{'step':>4}  {'loss opforge':>14}  {'loss numpy':>14}  {'max grad diff (rel)':>19}")

    failures = []
    for step in range(1, STEPS + 1):
        loss, ref_loss = ours.loss_and_grads(x, t), reference.loss_and_grads(x, t)
        grad_error = max_grad_error(ours.grads, reference.grads)
        print(f"{step:>4}  {loss:>14.7f}  {ref_loss:>14.7f}  {grad_error:>19.2e}")
        if abs(loss - ref_loss) > LOSS_RTOL * abs(ref_loss) or not grad_error <= GRAD_RTOL:
            failures.append(step)
        ours.update()
        reference.update()

    if failures:
        print(f"\nMISMATCH at steps {failures} (loss rtol {LOSS_RTOL}, gradient rtol {GRAD_RTOL})")
        return 1
    print(f"\nall {STEPS} steps agree (loss rtol {LOSS_RTOL:g}, gradients within {GRAD_RTOL:g} of their max)")

    ours_time, ref_time = time_step(ours, x, t), time_step(reference, x, t)
    ratio = ref_time / ours_time
    print(f"\ntime per training step (median of {TIMED}, after {WARMUP} warm-up steps):")
    print(f"  opforge  {ours_time * 1e3:8.3f} ms   (out= buffers reused)")
    print(f"  numpy    {ref_time * 1e3:8.3f} ms")
    verdict = "faster" if ratio >= 1 else "slower"
    print(f"  opforge is {max(ratio, 1 / ratio):.2f}x {verdict} than numpy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
