"""opforge vs NumPy, measured in one run (not a test: no assertions on time).

Prints, for float32 and float64 at 16M elements: relu, scale and add through
opforge.numpy and their NumPy built-ins, as GB/s of memory traffic and as
ratios to NumPy and to a copy (np.copyto) measured in the same run; then dense
(bias + relu fused) against NumPy's matmul + bias + maximum.

    make venv && .venv/bin/python bench/bench_numpy.py

Outputs are preallocated and reused (out=): fresh outputs would measure page
faults, not kernels.
"""

from __future__ import annotations

import argparse
import time
from typing import Callable

import numpy as np

import opforge
from opforge import numpy as onp


def best_time(fn: Callable[[], object], repeats: int) -> float:
    """Fastest of `repeats` runs after one warm-up, in seconds."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def eltwise_rows(n: int, dtype: type, repeats: int) -> list[tuple[str, float, float, float]]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(dtype)
    b = rng.standard_normal(n).astype(dtype)
    y = np.empty_like(x)
    nbytes = x.nbytes
    copy_s = best_time(lambda: np.copyto(y, x), repeats)
    copy_gbs = 2 * nbytes / copy_s / 1e9
    cases = [
        ("relu", 2, lambda: onp.relu(x, out=y), lambda: np.maximum(x, 0, out=y)),
        ("scale", 2, lambda: onp.scale(x, alpha=2.0, out=y), lambda: np.multiply(x, dtype(2.0), out=y)),
        ("add", 3, lambda: onp.add(x, b, out=y), lambda: np.add(x, b, out=y)),
    ]
    rows = []
    for name, streams, ours, theirs in cases:
        ours_gbs = streams * nbytes / best_time(ours, repeats) / 1e9
        theirs_gbs = streams * nbytes / best_time(theirs, repeats) / 1e9
        rows.append((name, ours_gbs, theirs_gbs, copy_gbs))
    return rows


def dense_rows(sizes: list[int], dtype: type, repeats: int) -> list[tuple[str, float, float]]:
    rng = np.random.default_rng(1)
    rows = []
    for n in sizes:
        x = rng.standard_normal((n, n)).astype(dtype)
        w = rng.standard_normal((n, n)).astype(dtype)
        b = rng.standard_normal(n).astype(dtype)
        y = np.empty((n, n), dtype)
        flops = 2.0 * n * n * n

        def reference() -> None:
            np.matmul(x, w, out=y)
            np.add(y, b, out=y)  # not `y += b`: that would make y local to reference()
            np.maximum(y, 0, out=y)

        ours = flops / best_time(lambda: onp.dense(x, w, b, activation="relu", out=y), repeats) / 1e9
        theirs = flops / best_time(reference, repeats) / 1e9
        rows.append((f"dense {n}x{n}x{n}", ours, theirs))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=1 << 24)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    info = opforge.info()
    print(f"opforge {info['version']}, isa {info['isa']}, {info['num_threads']} threads; numpy {np.__version__}")
    for dtype in (np.float32, np.float64):
        name = np.dtype(dtype).name
        print(f"\n{name}, {args.elements} elements (GB/s of reads + writes)")
        print(f"{'op':<8}{'opforge':>10}{'numpy':>10}{'copy':>10}{'vs numpy':>10}{'vs copy':>10}")
        for op, ours, theirs, copy in eltwise_rows(args.elements, dtype, args.repeats):
            print(f"{op:<8}{ours:>10.1f}{theirs:>10.1f}{copy:>10.1f}{ours / theirs:>9.2f}x{ours / copy:>9.0%}")
        print(f"\n{name} dense, bias + relu (GFLOP/s)")
        print(f"{'shape':<22}{'opforge':>10}{'numpy':>10}{'ratio':>10}")
        for label, ours, theirs in dense_rows([256, 512, 1024], dtype, max(3, args.repeats // 3)):
            print(f"{label:<22}{ours:>10.1f}{theirs:>10.1f}{ours / theirs:>9.2f}x")


if __name__ == "__main__":
    main()
