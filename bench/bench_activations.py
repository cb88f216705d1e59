#!/usr/bin/env python3
"""opforge's activations vs the frameworks' built-ins, ratios measured in one run.

    python bench/bench_activations.py [--threads 1,2] [--shape 8192,4096] [--frameworks torch,jax,tensorflow]

For gelu (erf and tanh forms), silu, sigmoid and tanh, forward and backward,
float32 on a [8192, 4096] tensor, at each thread count: the time per call of

  - opforge: the table's row through opforge.numpy with out= (the C kernel on
    the tensors' memory, nothing allocated);
  - torch: the ATen op with out= (F.gelu's torch._C._nn.gelu(x, out=...),
    torch.sigmoid(x, out=...), aten::gelu_backward.grad_input(dy, x, grad_input=...),
    aten::sigmoid_backward.grad_input(dy, y, ...), ...);
  - jax: jax.jit of jax.nn.gelu / silu / sigmoid, jnp.tanh, and of their VJP
    (jax.vjp(f, x)[1](dy)); each result deleted before the next call;
  - tensorflow: tf.function of tf.nn.gelu / silu, tf.sigmoid, tf.tanh, and of
    their gradient (tape for gelu and silu, tf.raw_ops.SigmoidGrad/TanhGrad).

Backward rows take what the frameworks' backward ops take: gelu_grad and
silu_grad (dy, x); sigmoid_grad and tanh_grad (dy, y) with y the forward output.
Each thread count runs in a subprocess pinned to that many CPUs
(os.sched_setaffinity), with torch.set_num_threads, opforge.set_num_threads and
XLA's and TensorFlow's intra-op threads set to it. Repetitions are interleaved
(opforge, then each framework, then again) and the best of each is kept. The
ratio is the fastest framework's time over opforge's: >= 1 means opforge is as
fast or faster. Not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from typing import Any, Callable

OPS = ["gelu", "gelu_tanh", "silu", "sigmoid", "tanh"]


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def best_time(fns: dict[str, Callable[[], Any]], reps: int, min_time: float = 0.25) -> dict[str, float]:
    """Seconds per call of each function: interleaved rounds, best round each."""
    for fn in fns.values():  # warm up (compilation, first-touch of outputs)
        fn()
        fn()
    best = {name: float("inf") for name in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            n, start = 0, time.perf_counter()
            while True:
                fn()
                n += 1
                elapsed = time.perf_counter() - start
                if elapsed >= min_time / reps or n >= 3:
                    break
            best[name] = min(best[name], elapsed / n)
    return best


def worker(threads: int, shape: tuple[int, ...], frameworks: list[str], reps: int) -> dict[str, Any]:
    os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:threads]))
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               f" --xla_cpu_multi_thread_eigen={'true' if threads > 1 else 'false'}"
                               f" intra_op_parallelism_threads={threads}").strip()
    import numpy as np
    import torch

    import opforge
    import opforge.numpy as onp

    torch.set_num_threads(threads)
    opforge.set_num_threads(threads)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(*shape, generator=gen) * 3
    dy = torch.randn(*shape, generator=gen)
    out = torch.empty_like(x)
    xn, dyn, outn = x.numpy(), dy.numpy(), out.numpy()
    y_of = {"sigmoid": torch.sigmoid(x), "tanh": torch.tanh(x)}

    jax = tf = jnp = None
    if "jax" in frameworks:
        import jax
        import jax.numpy as jnp
    if "tensorflow" in frameworks:
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(1)

    def jax_call(f: Callable[..., Any], *args: Any) -> Callable[[], None]:
        jf = jax.jit(f)
        dev = [jnp.asarray(a.numpy()) for a in args]

        def call() -> None:
            r = jf(*dev)
            r.block_until_ready()
            r.delete()

        return call

    def tf_call(f: Callable[..., Any], *args: Any) -> Callable[[], None]:
        tff = tf.function(f)
        dev = [tf.constant(a.numpy()) for a in args]
        return lambda: tff(*dev)  # the result is computed when the call returns (CPU)

    results: dict[str, Any] = {}
    for op in OPS:
        base = "gelu" if op.startswith("gelu") else op
        form = "tanh" if op == "gelu_tanh" else "none"
        attrs = {"approximate": form} if base == "gelu" else {}
        y = y_of.get(base)
        second = y if y is not None else x  # what the gradient row takes besides dy
        # forward
        fwd: dict[str, Callable[[], Any]] = {
            "opforge": lambda base=base, attrs=attrs: getattr(onp, base)(xn, out=outn, **attrs)}
        if "torch" in frameworks:
            fwd["torch"] = {
                "gelu": lambda: torch._C._nn.gelu(x, approximate=form, out=out),
                "silu": lambda: torch._C._nn.silu(x, out=out),
                "sigmoid": lambda: torch.sigmoid(x, out=out),
                "tanh": lambda: torch.tanh(x, out=out),
            }[base]
        jax_f = tf_f = None
        if jax is not None:
            jax_f = {"gelu": lambda v: jax.nn.gelu(v, approximate=form == "tanh"), "silu": jax.nn.silu,
                     "sigmoid": jax.nn.sigmoid, "tanh": jnp.tanh}[base]
            fwd["jax"] = jax_call(jax_f, x)
        if tf is not None:
            tf_f = {"gelu": lambda v: tf.nn.gelu(v, approximate=form == "tanh"), "silu": tf.nn.silu,
                    "sigmoid": tf.sigmoid, "tanh": tf.tanh}[base]
            fwd["tensorflow"] = tf_call(tf_f, x)
        # backward
        secondn = second.numpy()
        bwd: dict[str, Callable[[], Any]] = {
            "opforge": lambda base=base, attrs=attrs, s=secondn: getattr(onp, base + "_grad")(dyn, s, out=outn, **attrs)}
        if "torch" in frameworks:
            bwd["torch"] = {
                "gelu": lambda: torch.ops.aten.gelu_backward.grad_input(dy, x, approximate=form, grad_input=out),
                "silu": lambda: torch.ops.aten.silu_backward.grad_input(dy, x, grad_input=out),
                "sigmoid": lambda: torch.ops.aten.sigmoid_backward.grad_input(dy, y, grad_input=out),
                "tanh": lambda: torch.ops.aten.tanh_backward.grad_input(dy, y, grad_input=out),
            }[base]
        if jax is not None:
            if base in ("sigmoid", "tanh"):  # JAX's own rules from the output
                jb = (lambda d, s: d * s * (1 - s)) if base == "sigmoid" else (lambda d, s: d * (1 - s * s))
                bwd["jax"] = jax_call(jb, dy, second)
            else:
                bwd["jax"] = jax_call(lambda d, v, f=jax_f: jax.vjp(f, v)[1](d)[0], dy, x)
        if tf is not None:
            if base == "sigmoid":
                bwd["tensorflow"] = tf_call(lambda d, s: tf.raw_ops.SigmoidGrad(y=s, dy=d), dy, second)
            elif base == "tanh":
                bwd["tensorflow"] = tf_call(lambda d, s: tf.raw_ops.TanhGrad(y=s, dy=d), dy, second)
            else:
                def tf_grad(d: Any, v: Any, f: Any = tf_f) -> Any:
                    with tf.GradientTape() as tape:
                        tape.watch(v)
                        r = f(v)
                    return tape.gradient(r, v, output_gradients=d)

                bwd["tensorflow"] = tf_call(tf_grad, dy, x)
        results[op] = {"forward": best_time(fwd, reps), "backward": best_time(bwd, reps)}
        del fwd, bwd
    versions = {"torch": torch.__version__, "opforge": opforge.__version__, "isa": opforge.info()["isa"]}
    if jax is not None:
        versions["jax"] = jax.__version__
    if tf is not None:
        versions["tensorflow"] = tf.__version__
    return {"threads": threads, "results": results, "versions": versions, "numpy": np.__version__}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--shape", default="8192,4096")
    p.add_argument("--frameworks", default="torch,jax,tensorflow")
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    shape = tuple(int(s) for s in args.shape.split(","))
    frameworks = [f for f in args.frameworks.split(",") if f]
    if args.worker is not None:
        print(json.dumps(worker(args.worker, shape, frameworks, args.reps)))
        return
    print(f"CPU: {cpu_model()} ({os.cpu_count()} CPUs available to this process: "
          f"{len(os.sched_getaffinity(0))}); float32 {list(shape)}")
    for threads in (int(t) for t in args.threads.split(",")):
        if threads > len(os.sched_getaffinity(0)):
            print(f"\n{threads} threads: skipped, only {len(os.sched_getaffinity(0))} CPUs")
            continue
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
        run = subprocess.run([sys.executable, __file__, "--worker", str(threads), "--shape", args.shape,
                              "--frameworks", ",".join(frameworks), "--reps", str(args.reps)],
                             capture_output=True, text=True, env=env, check=False)
        lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
        if run.returncode != 0 or not lines:
            print(run.stdout, run.stderr, file=sys.stderr)
            raise SystemExit(f"the {threads}-thread worker failed")
        data = json.loads(lines[-1])
        print(f"\n{threads} thread{'s' if threads > 1 else ''}: " +
              ", ".join(f"{k} {v}" for k, v in data["versions"].items()))
        peers = [f for f in frameworks if f in ("torch", "jax", "tensorflow")]
        print(f"{'op':<11} {'pass':<9} {'opforge ms':>10} " + " ".join(f"{f + ' ms':>13}" for f in peers) +
              f" {'fastest':>11} {'ratio':>7}")
        for op, passes in data["results"].items():
            for name, t in passes.items():
                peer_times = {f: t[f] for f in peers if f in t}
                fastest = min(peer_times, key=peer_times.get)
                ratio = peer_times[fastest] / t["opforge"]
                print(f"{op:<11} {name:<9} {t['opforge'] * 1e3:>10.2f} " +
                      " ".join(f"{peer_times[f] * 1e3:>13.2f}" for f in peers) +
                      f" {fastest:>11} {ratio:>6.2f}x")


if __name__ == "__main__":
    main()
