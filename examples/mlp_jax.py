#!/usr/bin/env python3
"""The MLP of mlp_numpy.py trained under jax.jit, with opforge ops and with JAX built-ins.

    x [256, 256] -> dense + relu -> h [256, 512] -> dense -> y [256, 10]
    loss = sum((y - t)^2) / (2 * batch)

The opforge model runs ``dense`` (relu fused), ``scale`` and ``add`` as XLA
FFI custom calls; ``jax.value_and_grad`` differentiates it through their
custom VJPs (``dense_grad``...), and the SGD update is opforge ``scale`` and
``add`` too. The reference is the same model in ``jnp``/``jax.nn``. Both start
from the same parameters (mlp_numpy.make_problem, one seed) and train in
lockstep, one jitted step each; every step's loss must agree, else the script
exits with status 1. Then both steps are timed in the same run.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from mlp_numpy import BATCH, HIDDEN, INPUTS, LEARNING_RATE, OUTPUTS, make_problem  # noqa: E402

import opforge  # noqa: E402
import opforge.jax as oj  # noqa: E402

STEPS = 8
LOSS_RTOL = 1e-5  # relative, per step
PARAM_RTOL = 1e-4  # max |difference| relative to max |parameter|, after training
WARMUP, TIMED = 5, 30

Params = dict[str, jax.Array]


def opforge_loss(p: Params, x: jax.Array, t: jax.Array) -> jax.Array:
    h = oj.dense(x, p["w1"], p["b1"], activation="relu")
    y = oj.dense(h, p["w2"], p["b2"])
    diff = oj.add(y, oj.scale(t, alpha=-1.0))
    return jnp.vdot(diff, diff) / (2 * BATCH)


def builtin_loss(p: Params, x: jax.Array, t: jax.Array) -> jax.Array:
    h = jax.nn.relu(x @ p["w1"] + p["b1"])
    diff = h @ p["w2"] + p["b2"] - t
    return jnp.vdot(diff, diff) / (2 * BATCH)


Loss = Callable[[Params, jax.Array, jax.Array], jax.Array]
Step = Callable[[Params, jax.Array, jax.Array], tuple[jax.Array, Params]]


def make_step(loss: Loss, update: Callable[[jax.Array, jax.Array], jax.Array]) -> Step:
    """One jitted SGD step: the loss, its gradients, every parameter updated."""

    @jax.jit
    def step(p: Params, x: jax.Array, t: jax.Array) -> tuple[jax.Array, Params]:
        value, grads = jax.value_and_grad(loss)(p, x, t)
        return value, jax.tree.map(update, p, grads)

    return step


opforge_step = make_step(opforge_loss, lambda p, g: oj.add(p, oj.scale(g, alpha=-LEARNING_RATE)))
builtin_step = make_step(builtin_loss, lambda p, g: p - LEARNING_RATE * g)


def time_step(step: Step, params: Params, x: jax.Array, t: jax.Array) -> float:
    """Median seconds of one jitted training step after a warm-up."""
    times = []
    for i in range(WARMUP + TIMED):
        start = time.perf_counter()
        loss, params = step(params, x, t)
        jax.block_until_ready((loss, params))
        if i >= WARMUP:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    x_np, t_np, params_np = make_problem()
    x, t = jnp.asarray(x_np), jnp.asarray(t_np)
    ours: Params = {k: jnp.asarray(v) for k, v in params_np.items()}
    reference: Params = dict(ours)
    info = opforge.info()
    print(f"MLP {INPUTS} -> {HIDDEN} (relu) -> {OUTPUTS}, batch {BATCH}, float32, SGD lr {LEARNING_RATE}, jax.jit")
    print(f"opforge {info['version']} (isa {info['isa']}, {info['num_threads']} threads), jax {jax.__version__}, "
          f"XLA FFI API {oj.ffi_api_version()}, devices {jax.devices()}\n")  # fmt: skip
    print(f"{'step':>4}  {'loss opforge':>14}  {'loss jax':>14}")

    failures = []
    for step in range(1, STEPS + 1):
        loss, ours = opforge_step(ours, x, t)
        ref_loss, reference = builtin_step(reference, x, t)
        print(f"{step:>4}  {float(loss):>14.7f}  {float(ref_loss):>14.7f}")
        if not abs(float(loss) - float(ref_loss)) <= LOSS_RTOL * abs(float(ref_loss)):
            failures.append(step)
    param_error = max(
        float(jnp.max(jnp.abs(ours[k] - reference[k])) / jnp.max(jnp.abs(reference[k]))) for k in reference
    )
    if failures or not param_error <= PARAM_RTOL:
        print(f"\nMISMATCH at steps {failures} (loss rtol {LOSS_RTOL}), parameters differ by {param_error:.2e}")
        return 1
    print(f"\nall {STEPS} steps agree (loss rtol {LOSS_RTOL:g}); parameters after training within {param_error:.1e}")

    ours_time, ref_time = time_step(opforge_step, ours, x, t), time_step(builtin_step, reference, x, t)
    ratio = ref_time / ours_time
    print(f"\ntime per jitted training step (median of {TIMED}, after {WARMUP} warm-up steps):")
    print(f"  opforge ops (XLA FFI)  {ours_time * 1e3:8.3f} ms")
    print(f"  jax.nn / jnp           {ref_time * 1e3:8.3f} ms")
    verdict = "faster" if ratio >= 1 else "slower"
    print(f"  opforge is {max(ratio, 1 / ratio):.2f}x {verdict} than the JAX built-ins")
    return 0


if __name__ == "__main__":
    sys.exit(main())
