#!/usr/bin/env python3
"""opforge's torch operators vs torch's built-ins, ratios measured in one run.

    python bench/bench_torch.py            (make bench-torch)

Per-call time (best of repeats) of
  - torch.ops.opforge.relu vs torch.relu on 8 elements (and vs
    torch.ops.aten.relu, which goes through the same Python-to-dispatcher path
    as torch.ops.opforge.*, where torch.relu has a direct binding): in the default mode
    and under torch.no_grad() (the Python autograd kernel is in the path either
    way), and under torch.inference_mode() (the C kernel alone: the dispatcher
    skips the Autograd key);
  - the same on 16M float32 elements (memory bound);
  - torch.ops.opforge.dense(x, w, b[, relu]) vs F.linear(x, w.T, b)[+relu], at
    a small and a large size.
Both sides allocate their outputs; torch and opforge use the same number of
threads ($BENCH_THREADS, default 1). A ratio > 1 means opforge is slower. Not a test: it asserts nothing.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable

import torch
import torch.nn.functional as F

import opforge
import opforge.torch  # noqa: F401  (registers torch.ops.opforge)

ops = torch.ops.opforge


def per_call(fn: Callable[[], Any], min_time: float = 0.2, repeats: int = 7) -> float:
    """Seconds per call: the best of `repeats` timed loops of about min_time
    each (the least disturbed by other work on the machine)."""
    fn()
    n, elapsed = 1, 0.0
    while elapsed < min_time / 4:
        n *= 2
        start = time.perf_counter()
        for _ in range(n):
            fn()
        elapsed = time.perf_counter() - start
    loops = max(1, int(n * min_time / 4 / elapsed))
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(loops):
            fn()
        samples.append((time.perf_counter() - start) / loops)
    return min(samples)


def row(name: str, ours: float, theirs: float) -> None:
    print(f"{name:<44} {ours * 1e6:>10.2f} us {theirs * 1e6:>10.2f} us {ours / theirs:>7.2f}x")


def main() -> None:
    threads = int(os.environ.get("BENCH_THREADS", "1"))  # 1: steadier on a shared machine
    torch.set_num_threads(threads)
    opforge.set_num_threads(threads)
    print(f"torch {torch.__version__}, opforge {opforge.__version__} ({opforge.info()['isa']}), "
          f"{opforge.get_num_threads()} threads")  # fmt: skip
    print(f"{'case':<44} {'opforge':>13} {'torch':>13} {'ratio':>8}")
    tiny = torch.randn(8)
    row("relu, 8 elements", per_call(lambda: ops.relu(tiny)), per_call(lambda: torch.relu(tiny)))
    row("relu, 8 elements, vs torch.ops.aten.relu", per_call(lambda: ops.relu(tiny)),
        per_call(lambda: torch.ops.aten.relu(tiny)))  # fmt: skip
    with torch.no_grad():
        row("relu, 8 elements, no_grad", per_call(lambda: ops.relu(tiny)), per_call(lambda: torch.relu(tiny)))
    with torch.inference_mode():
        t = torch.randn(8)
        row("relu, 8 elements, inference_mode", per_call(lambda: ops.relu(t)), per_call(lambda: torch.relu(t)))
    big = torch.randn(1 << 24)
    row("relu, 16M elements", per_call(lambda: ops.relu(big), 1.0, 5), per_call(lambda: torch.relu(big), 1.0, 5))
    for n, k, m in ((32, 64, 64), (1024, 1024, 1024)):
        x, w, b = torch.randn(n, k), torch.randn(k, m), torch.randn(m)
        wt = w.t().contiguous()
        budget = 0.2 if n < 512 else 1.0
        row(f"dense {n}x{k}x{m} vs F.linear",
            per_call(lambda: ops.dense(x, w, b), budget), per_call(lambda: F.linear(x, wt, b), budget))  # fmt: skip
        row(f"dense+relu {n}x{k}x{m} vs relu(F.linear)",
            per_call(lambda: ops.dense(x, w, b, activation="relu"), budget),
            per_call(lambda: torch.relu(F.linear(x, wt, b)), budget))  # fmt: skip


if __name__ == "__main__":
    main()
