"""Ops written with the authoring layer against opforge's own built-ins, the
frameworks' built-ins and the machine's copy roof, measured in one run.

    .venv/bin/python bench/bench_authoring.py [--quick]

- softplus (examples/ops/myops.c: one line of math) on 16M float32, at 1 and 2
  threads, against opforge's built-in ``scale`` (the same memory traffic: one
  read, one write), NumPy's ``np.logaddexp(0, x, out=)``, PyTorch's
  ``F.softplus(x, out=)`` and JAX's jitted ``jax.nn.softplus``; every peer
  writes into a preallocated output where its API allows, and runs with the
  same thread count.
- rowsum (one line: ``y[0] = opf_sum(n, x)``) over [4096, 4096] float32, as
  GB/s of the input read, against the copy roof opforge bench's probe
  measures in this run (best of plain, non-temporal and memcpy stores).

Prints ratios (time of the peer / time of opforge's op; above 1: opforge
faster) and the CPU they come from.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

import opforge
import opforge.numpy as onp
from opforge.bench import limits
from opforge.bench.machine import cpu_model
from opforge.bench.measure import Progress

ROOT = Path(__file__).resolve().parents[1]


def best_seconds(fn: Callable[[], Any], repeats: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def build_myops(directory: str) -> Path:
    library = Path(directory) / "libmyops.so"
    subprocess.run(
        ["gcc", "-std=c11", "-O3", "-shared", "-fPIC", f"-I{opforge.get_include()}", str(ROOT / "examples/ops/myops.c"),
         opforge.get_library(), f"-Wl,-rpath,{opforge.get_library_dir()}", "-lm", "-o", str(library)],
        check=True,
    )  # fmt: skip
    return library


def framework_peers(x: np.ndarray, threads: int) -> dict[str, Callable[[], Any]]:
    """The frameworks' softplus, each with the given thread count."""
    peers: dict[str, Callable[[], Any]] = {}
    out = np.empty_like(x)
    zero = np.float32(0)
    peers["numpy np.logaddexp(0, x, out=)"] = lambda: np.logaddexp(zero, x, out=out)
    try:
        import torch
        import torch.nn.functional as F

        torch.set_num_threads(threads)
        tx, ty = torch.from_numpy(x), torch.empty(x.shape)
        peers["torch F.softplus(x, out=)"] = lambda: torch._C._nn.softplus(tx, 1, 20, out=ty)
        peers["torch F.softplus(x)"] = lambda: F.softplus(tx)
    except ImportError:
        pass
    return peers


def jax_peer(x: np.ndarray) -> Optional[Callable[[], Any]]:
    """jax.nn.softplus, jitted (XLA's CPU thread pool: its own thread count)."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jx = jnp.asarray(x)
    f = jax.jit(jax.nn.softplus)
    return lambda: f(jx).block_until_ready()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    args = parser.parse_args()
    repeats = 5 if args.quick else 20
    print(f"CPU: {cpu_model()}; opforge ISA level {opforge.info()['isa']}")
    with tempfile.TemporaryDirectory() as tmp:
        myops = onp.load_ops(build_myops(tmp))
        n = 1 << 24
        x = (np.random.default_rng(0).standard_normal(n) * 4).astype(np.float32)
        y = np.empty_like(x)
        rows = (np.random.default_rng(1).standard_normal((4096, 4096))).astype(np.float32)
        sums = np.empty(4096, np.float32)
        roofs: dict[int, float] = {}
        if limits.probe_available():
            measured = limits.measure_copy(n, [1, 2], repeats, 10.0, 0.0, Progress(False))
            for limit in measured:
                roofs[limit.threads] = max(roofs.get(limit.threads, 0.0), limit.value)
        # The arithmetic alone: softplus and scale on 64 Ki elements (512 KiB
        # read + written: in L2) on one thread, scaled to n, less a 16-element
        # call's time (the fixed cost of a call).
        small, small_out, tiny, tiny_out = x[: 1 << 16].copy(), y[: 1 << 16].copy(), x[:16].copy(), y[:16].copy()
        saved = opforge.get_num_threads()
        opforge.set_num_threads(1)

        def in_cache(fn: Callable[[np.ndarray, np.ndarray], Any]) -> float:
            whole = best_seconds(lambda: fn(small, small_out), 10 * repeats)
            fixed = best_seconds(lambda: fn(tiny, tiny_out), 10 * repeats)
            return (whole - fixed) * n / (small.size - tiny.size)

        softplus_in_cache = in_cache(lambda a, b: myops.softplus(a, out=b))
        scale_in_cache = in_cache(lambda a, b: onp.scale(a, alpha=2.0, out=b))
        print(f"In L2, one thread, per {n} elements: softplus {softplus_in_cache * 1e3:.2f} ms, "
              f"scale {scale_in_cache * 1e3:.2f} ms (the arithmetic, with no memory traffic)")
        try:
            for threads in (1, 2):
                opforge.set_num_threads(threads)
                ours = best_seconds(lambda: myops.softplus(x, out=y), repeats)
                scale = best_seconds(lambda: onp.scale(x, alpha=2.0, out=y), repeats)
                gbs = 8 * n / ours / 1e9
                print(f"\n{threads} thread(s), softplus on {n} float32: {ours * 1e3:.2f} ms ({gbs:.1f} GB/s)")
                print(f"  vs opforge scale (same traffic):  {ours / scale:5.2f}x its time (goal <= 1.25)")
                print(f"  softplus arithmetic alone (in L2):  {softplus_in_cache / threads / scale:5.2f}x scale's time; "
                      f"softplus reaches {softplus_in_cache / threads / ours:.0%} of that floor")
                for name, fn in framework_peers(x, threads).items():
                    print(f"  vs {name:34s} {best_seconds(fn, repeats) / ours:5.2f}x faster")
                if threads == 2:
                    peer = jax_peer(x)
                    if peer is not None:
                        print(f"  vs {'jax jit(jax.nn.softplus)':34s} {best_seconds(peer, repeats) / ours:5.2f}x faster")
                rowsum = best_seconds(lambda: myops.rowsum(rows, out=sums), repeats)
                rgbs = (rows.nbytes + sums.nbytes) / rowsum / 1e9
                roof = roofs.get(threads)
                versus = f", {rgbs / roof:.0%} of the copy roof {roof:.1f} GB/s (goal >= 80%)" if roof else ""
                print(f"  rowsum [4096, 4096]: {rgbs:.1f} GB/s{versus}")
        finally:
            opforge.set_num_threads(saved)
    return 0


if __name__ == "__main__":
    sys.exit(main())
