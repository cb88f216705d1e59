#!/usr/bin/env python3
"""opforge TensorFlow ops against TF built-ins: time ratios measured in one run.

    .venv/bin/python bench/bench_tensorflow.py [--repeat N]

Cases (float32, CPU):
  relu 8 elements         eager per-call overhead: opforge.tensorflow.relu vs tf.nn.relu
  relu 16M elements       eager throughput
  dense 256x512x512       opforge dense(relu fused) vs tf.nn.relu(tf.matmul(x, w) + b)
  dense in tf.function    the same inside one traced function each
  mlp step tf.function    forward + GradientTape backward of a 2-layer MLP

Each case alternates the two candidates over --repeat rounds and reports the
median time of each and the ratio opforge / built-in (< 1: opforge faster).
Not a test: no assertions; numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import opforge  # noqa: E402
import opforge.tensorflow as otf  # noqa: E402


def per_call(fn: Callable[[], object], calls: int) -> float:
    """Seconds per call of ``fn`` over ``calls`` calls (results forced to the host only at the end)."""
    start = time.perf_counter()
    for _ in range(calls):
        out = fn()
    if isinstance(out, tf.Tensor):
        out.numpy()
    return (time.perf_counter() - start) / calls


def compare(name: str, ours: Callable[[], object], theirs: Callable[[], object], calls: int, repeat: int) -> None:
    ours(), theirs()  # warm up (tracing, allocator)
    a, b = [], []
    for _ in range(repeat):
        a.append(per_call(ours, calls))
        b.append(per_call(theirs, calls))
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"{name:<30} {ma * 1e6:>12.2f} {mb * 1e6:>12.2f} {ma / mb:>8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    info = opforge.info()
    print(
        f"tensorflow {tf.__version__}, opforge {info['version']} isa {info['isa']} threads {info['num_threads']}, "
        f"TF intra-op threads {tf.config.threading.get_intra_op_parallelism_threads() or 'default'}"
    )
    print(f"{'case':<30} {'opforge us':>12} {'builtin us':>12} {'ratio':>8}")

    small = tf.constant(rng.standard_normal(8).astype(np.float32))
    compare("relu 8 eager", lambda: otf.relu(small), lambda: tf.nn.relu(small), 2000, args.repeat)
    big = tf.constant(rng.standard_normal(1 << 24).astype(np.float32))
    compare("relu 16M eager", lambda: otf.relu(big), lambda: tf.nn.relu(big), 5, args.repeat)

    x = tf.constant(rng.standard_normal((256, 512)).astype(np.float32))
    w = tf.constant(rng.standard_normal((512, 512)).astype(np.float32) / 20)
    b = tf.constant(rng.standard_normal(512).astype(np.float32))

    def builtin_dense(x: tf.Tensor, w: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        return tf.nn.relu(tf.matmul(x, w) + b)

    def opforge_dense(x: tf.Tensor, w: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        return otf.dense(x, w, b, activation="relu")

    compare(
        "dense 256x512x512 eager", lambda: opforge_dense(x, w, b), lambda: builtin_dense(x, w, b), 50, args.repeat
    )
    fo, fb = tf.function(opforge_dense), tf.function(builtin_dense)
    compare("dense 256x512x512 tf.function", lambda: fo(x, w, b), lambda: fb(x, w, b), 50, args.repeat)
    small_x, small_w, small_b = x[:4, :16], w[:16, :8], b[:8]
    fo_small, fb_small = tf.function(opforge_dense), tf.function(builtin_dense)
    compare(
        "dense 4x16x8 tf.function",
        lambda: fo_small(small_x, small_w, small_b),
        lambda: fb_small(small_x, small_w, small_b),
        1000,
        args.repeat,
    )

    w2 = tf.constant(rng.standard_normal((512, 10)).astype(np.float32) / 20)

    def step(layer: Callable[..., tf.Tensor]) -> Callable[..., list[tf.Tensor]]:
        @tf.function
        def run(x: tf.Tensor, w: tf.Tensor, b: tf.Tensor, w2: tf.Tensor) -> list[tf.Tensor]:
            with tf.GradientTape() as tape:
                tape.watch([w, b, w2])
                loss = tf.reduce_sum(tf.matmul(layer(x, w, b), w2) ** 2)
            return tape.gradient(loss, [w, b, w2])

        return run

    so, sb = step(opforge_dense), step(builtin_dense)
    compare("mlp step tf.function", lambda: so(x, w, b, w2)[0], lambda: sb(x, w, b, w2)[0], 30, args.repeat)


if __name__ == "__main__":
    main()
