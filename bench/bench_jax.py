#!/usr/bin/env python3
"""opforge's XLA FFI targets vs the JAX built-ins, inside jax.jit, in one run.

- relu on 8M and 16M float32 elements: a jitted ``opforge.jax.relu`` vs a
  jitted ``jax.nn.relu``, one call per program, and 10 calls in a
  ``lax.fori_loop`` in one program (the steady state: no fresh output
  buffers).
- the cost of one call on 8 and 1000 elements, eager and jitted;
- dense + bias + relu, float32: a jitted ``opforge.jax.dense(..., activation=
  "relu")`` vs jitted ``jax.nn.relu(x @ w + b)`` at a few sizes.

Each figure is the median of repeated calls (after warm-up) with
``block_until_ready``; the ratios are built-in time / opforge time (> 1:
opforge faster). Not a test: no assertion on time. Results are checked for
agreement before timing.

    python bench/bench_jax.py [--repeats N] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

import opforge
import opforge.jax as oj


def median_seconds(f: Callable[..., Any], args: tuple[Any, ...], repeats: int) -> float:
    for _ in range(3):
        jax.block_until_ready(f(*args))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(f(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


LOOP = 10  # relu calls per jitted program in the steady-state figure


def bench_relu(n: int, device: Any, repeats: int) -> None:
    """One relu per jitted call (XLA allocates the output each call: page
    faults dominate at these sizes), then LOOP relus in a fori_loop in one
    call (buffers reused: the steady state), per relu."""
    x = jax.device_put(jnp.asarray(np.random.default_rng(0).standard_normal(n).astype(np.float32)), device)
    ours, builtin = jax.jit(oj.relu), jax.jit(jax.nn.relu)
    np.testing.assert_array_equal(np.asarray(ours(x)), np.asarray(builtin(x)))
    t_ours, t_builtin = (median_seconds(f, (x,), repeats) for f in (ours, builtin))
    looped = [jax.jit(lambda v, f=f: jax.lax.fori_loop(0, LOOP, lambda i, u: f(u), v)) for f in (oj.relu, jax.nn.relu)]
    np.testing.assert_array_equal(np.asarray(looped[0](x)), np.asarray(looped[1](x)))
    l_ours, l_builtin = (median_seconds(f, (x,), max(repeats // 2, 3)) / LOOP for f in looped)
    gbs = lambda t: 2 * 4 * n / t / 1e9  # noqa: E731  bytes read + written
    for label, a, b in [("one call", t_ours, t_builtin), (f"{LOOP} in a loop", l_ours, l_builtin)]:
        print(f"relu {n // 2**20:3d}M f32 {label:>13}   opforge {a * 1e3:8.3f} ms ({gbs(a):5.1f} GB/s)   "
              f"jax.nn.relu {b * 1e3:8.3f} ms ({gbs(b):5.1f} GB/s)   ratio builtin/opforge {b / a:5.2f}")  # fmt: skip


def bench_dense(n: int, k: int, m: int, device: Any, repeats: int) -> None:
    rng = np.random.default_rng(1)
    shapes = [(n, k), (k, m), (m,)]
    x, w, b = (jax.device_put(jnp.asarray(rng.standard_normal(s).astype(np.float32)), device) for s in shapes)
    ours = jax.jit(lambda x, w, b: oj.dense(x, w, b, activation="relu"))
    builtin = jax.jit(lambda x, w, b: jax.nn.relu(x @ w + b))
    tol = 2e-3 * np.sqrt(k)
    np.testing.assert_allclose(np.asarray(ours(x, w, b)), np.asarray(builtin(x, w, b)), rtol=2e-3, atol=tol)
    t_ours, t_builtin = (median_seconds(f, (x, w, b), repeats) for f in (ours, builtin))
    flops = lambda t: 2 * n * k * m / t / 1e9  # noqa: E731
    print(f"dense+relu {n}x{k}x{m:<5}  opforge {t_ours * 1e3:8.3f} ms ({flops(t_ours):6.1f} GFLOP/s)   "
          f"relu(x @ w + b) {t_builtin * 1e3:8.3f} ms ({flops(t_builtin):6.1f} GFLOP/s)   "
          f"ratio builtin/opforge {t_builtin / t_ours:5.2f}")  # fmt: skip


def bench_call_overhead(device: Any, repeats: int) -> None:
    """Per-call cost on 8 and 1000 elements, eager and jitted (dispatch dominates)."""
    for size in (8, 1000):
        x = jax.device_put(jnp.ones(size, jnp.float32), device)
        cases = [("eager", oj.relu, jax.nn.relu), ("jit", jax.jit(oj.relu), jax.jit(jax.nn.relu))]
        for label, ours, builtin in cases:
            t_ours, t_builtin = (median_seconds(f, (x,), repeats * 15) for f in (ours, builtin))
            print(f"relu {size:4d} f32 {label:>5} call   opforge {t_ours * 1e6:8.1f} us   "
                  f"jax.nn.relu {t_builtin * 1e6:8.1f} us   ratio builtin/opforge {t_builtin / t_ours:5.2f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    device = jax.devices(args.device)[0]
    info = opforge.info()
    print(f"opforge {info['version']} (isa {info['isa']}, {info['num_threads']} threads), jax {jax.__version__}, "
          f"device {device}, XLA FFI API {oj.ffi_api_version()}\n")  # fmt: skip
    bench_call_overhead(device, args.repeats)
    for n in (8 * 2**20, 16 * 2**20):
        bench_relu(n, device, args.repeats)
    for n, k, m in [(256, 256, 512), (1024, 1024, 1024), (2048, 2048, 2048)]:
        bench_dense(n, k, m, device, max(args.repeats // 2, 5))


if __name__ == "__main__":
    main()
