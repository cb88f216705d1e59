#!/usr/bin/env python3
"""opforge's row-wise ops (softmax, log_softmax, layer_norm, rms_norm, forward
and backward) vs the installed frameworks' built-ins and vs a copy, one run.

    python bench/bench_norms.py [--rows 8192] [--cols 4096] [--threads 1,2] [--repeats 15]

Each library runs in a process of its own (a framework's idle worker threads
would otherwise take time from the next library's calls), pinned to as many
CPUs as the thread count (sched_setaffinity), with every library told to use
that many threads (OPFORGE_NUM_THREADS, torch.set_num_threads, XLA's and
TensorFlow's intra-op pools). The processes take turns for --rounds rounds;
in each, every implementation of every op is timed in interleaved repeats,
and the best time of each over all rounds is kept: the least disturbed by
other work on the machine.

- The roof is a copy of the same size (the fastest of np.copyto, i.e.
  memcpy, and torch's Tensor.copy_, into an allocated array): roof % = copy
  time / op time for ops that read and write as much as a copy (the forward
  ops; their mean/rstd outputs are 1/M of that).
- opforge runs through opforge.numpy with out= arrays (the C kernels; no
  allocation); "opforge/torch" is torch.ops.opforge.<op> (allocates, as
  torch's own ops do). Every array starts on a 64-byte line (NumPy's own
  start on 16 bytes, which costs every library split vector stores).
- Peers in their best configuration: torch's functional ops and, where aten
  has one, their .out variant (the backward: aten's backward ops called
  directly); JAX under jit (backward: the jitted VJP function of jax.nn /
  jnp, residuals saved); TensorFlow under tf.function, with and without XLA
  (jit_compile), forward only (TensorFlow has no separately callable
  backward). Allocations are made cheap for everyone: the child runs with
  glibc's malloc kept from returning memory to the system (a fresh 128 MiB
  buffer would otherwise be page-faulted in on every call).
- ratio = the fastest peer's time / opforge's time: > 1 means opforge is faster.

Not a test: it asserts nothing. Prints the CPU model (lscpu).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any, Callable

import numpy as np

Impl = Callable[[], Any]


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown (no lscpu)"
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    model = fields.get("Model name", "?").strip()
    return f"{model}, {fields.get('CPU(s)', '?').strip()} CPUs, L2 {fields.get('L2 cache', '?').strip()}, L3 {fields.get('L3 cache', '?').strip()}"


# --------------------------------------------------------------------------
# The child: one thread count
# --------------------------------------------------------------------------


def child(rows: int, cols: int, threads: int, repeats: int, frameworks: list[str]) -> dict[str, Any]:
    """Times the copies, opforge's ops and those of `frameworks` (the names
    of the libraries this process runs: "opforge", "torch", "jax",
    "tensorflow")."""
    cpus = sorted(os.sched_getaffinity(0))[:threads]
    os.sched_setaffinity(0, cpus)
    import opforge
    import opforge.numpy as onp

    opforge.set_num_threads(threads)
    rng = np.random.default_rng(0)
    shape = (rows, cols)

    def aligned(*shape: int) -> np.ndarray:
        """An array whose data starts on a 64-byte line (NumPy's own start on 16 bytes)."""
        raw = np.empty(int(np.prod(shape)) * 4 + 64, np.uint8)
        start = -raw.ctypes.data % 64
        return raw[start : start + int(np.prod(shape)) * 4].view(np.float32).reshape(shape)

    x, dy, y, dx, ycopy = (aligned(*shape) for _ in range(5))
    x[...] = rng.standard_normal(shape, dtype=np.float32)
    dy[...] = rng.standard_normal(shape, dtype=np.float32)
    w, b, dw, db = (aligned(cols) for _ in range(4))
    w[...] = rng.uniform(0.5, 1.5, cols)
    b[...] = rng.standard_normal(cols)
    mean, rstd = aligned(rows), aligned(rows)
    y[...], dx[...], ycopy[...] = 0, 0, 0
    sm, lsm = aligned(*shape), aligned(*shape)
    onp.softmax(x, out=sm)
    onp.log_softmax(x, out=lsm)
    _, ln_mean, ln_rstd = onp.layer_norm(x, w, b)
    _, rms_rstd = onp.rms_norm(x, w, eps=1e-6)

    names = ["copy", "softmax", "log_softmax", "layer_norm", "rms_norm", "softmax bwd", "log_softmax bwd",
             "layer_norm bwd", "rms_norm bwd"]  # fmt: skip
    ops: dict[str, dict[str, Impl]] = {name: {} for name in names}
    ops["copy"]["np.copyto"] = lambda: np.copyto(ycopy, x)
    if "opforge" in frameworks:
        ops["softmax"]["opforge"] = lambda: onp.softmax(x, out=y)
        ops["log_softmax"]["opforge"] = lambda: onp.log_softmax(x, out=y)
        ops["layer_norm"]["opforge"] = lambda: onp.layer_norm(x, w, b, out=(y, mean, rstd))
        ops["rms_norm"]["opforge"] = lambda: onp.rms_norm(x, w, eps=1e-6, out=(y, rstd))
        ops["softmax bwd"]["opforge"] = lambda: onp.softmax_grad(dy, sm, out=dx)
        ops["log_softmax bwd"]["opforge"] = lambda: onp.log_softmax_grad(dy, lsm, out=dx)
        ops["layer_norm bwd"]["opforge"] = lambda: onp.layer_norm_grad(x, ln_mean, ln_rstd, dy, w, out=(dx, dw, db))
        ops["rms_norm bwd"]["opforge"] = lambda: onp.rms_norm_grad(x, rms_rstd, dy, w, out=(dx, dw))
    versions: dict[str, str] = {"opforge": opforge.__version__, "numpy": np.__version__}

    if "torch" in frameworks:
        try:
            import torch
            import torch.nn.functional as F

            import opforge.torch  # noqa: F401

            torch.set_num_threads(threads)
            versions["torch"] = torch.__version__
            aten, oops = torch.ops.aten, torch.ops.opforge
            tx, tdy, tw, tb = (torch.from_numpy(a) for a in (x, dy, w, b))
            ty, tdx, tcopy = torch.from_numpy(y), torch.from_numpy(dx), torch.from_numpy(ycopy)
            tsm, tlsm = torch.softmax(tx, -1), torch.log_softmax(tx, -1)
            _, tmean, trstd = aten.native_layer_norm(tx, [cols], tw, tb, 1e-5)
            _, trms = aten._fused_rms_norm(tx, [cols], tw, 1e-6)
            m1, r1 = torch.empty(rows, 1), torch.empty(rows, 1)
            tdw, tdb = torch.empty(cols), torch.empty(cols)
            grad = torch.no_grad()
            grad.__enter__()  # inference: no autograd graph anywhere
            ops["copy"]["torch.copy_"] = lambda: tcopy.copy_(tx)
            ops["softmax"].update({"torch.softmax": lambda: torch.softmax(tx, -1),
                                   "aten._softmax.out": lambda: aten._softmax.out(tx, -1, False, out=ty),
                                   "opforge/torch": lambda: oops.softmax(tx)})  # fmt: skip
            ops["log_softmax"].update({"torch.log_softmax": lambda: torch.log_softmax(tx, -1),
                                       "aten._log_softmax.out": lambda: aten._log_softmax.out(tx, -1, False, out=ty),
                                       "opforge/torch": lambda: oops.log_softmax(tx)})  # fmt: skip
            ops["layer_norm"].update({
                "F.layer_norm": lambda: F.layer_norm(tx, [cols], tw, tb),
                "aten.native_layer_norm.out": lambda: aten.native_layer_norm.out(tx, [cols], tw, tb, 1e-5, out0=ty,
                                                                                 out1=m1, out2=r1),
                "opforge/torch": lambda: oops.layer_norm(tx, tw, tb)})  # fmt: skip
            ops["rms_norm"].update({"F.rms_norm": lambda: F.rms_norm(tx, [cols], tw, 1e-6),
                                    "aten._fused_rms_norm": lambda: aten._fused_rms_norm(tx, [cols], tw, 1e-6),
                                    "opforge/torch": lambda: oops.rms_norm(tx, tw, eps=1e-6)})  # fmt: skip
            ops["softmax bwd"].update({
                "aten._softmax_backward_data.out": lambda: aten._softmax_backward_data.out(tdy, tsm, -1, torch.float32,
                                                                                           grad_input=tdx),
                "aten._softmax_backward_data": lambda: aten._softmax_backward_data(tdy, tsm, -1, torch.float32),
                "opforge/torch": lambda: oops.softmax_grad(tdy, tsm)})  # fmt: skip
            ops["log_softmax bwd"].update({
                "aten._log_softmax_backward_data.out": lambda: aten._log_softmax_backward_data.out(
                    tdy, tlsm, -1, torch.float32, out=tdx),
                "aten._log_softmax_backward_data": lambda: aten._log_softmax_backward_data(tdy, tlsm, -1, torch.float32),
                "opforge/torch": lambda: oops.log_softmax_grad(tdy, tlsm)})  # fmt: skip
            ops["layer_norm bwd"].update({
                "aten.native_layer_norm_backward.out": lambda: aten.native_layer_norm_backward.out(
                    tdy, tx, [cols], tmean, trstd, tw, tb, [True, True, True], out0=tdx, out1=tdw, out2=tdb),
                "aten.native_layer_norm_backward": lambda: aten.native_layer_norm_backward(
                    tdy, tx, [cols], tmean, trstd, tw, tb, [True, True, True]),
                "opforge/torch": lambda: oops.layer_norm_grad(tx, tmean[:, 0], trstd[:, 0], tdy, tw)})  # fmt: skip
            # rms_norm: aten's fused backward is CUDA-only; on the CPU, autograd's backward of F.rms_norm
            # (the graph recorded once, run again and again)
            with torch.enable_grad():
                xr, wr = tx.clone().requires_grad_(), tw.clone().requires_grad_()
                yr = F.rms_norm(xr, [cols], wr, 1e-6)
            ops["rms_norm bwd"].update({
                "torch.autograd.grad(F.rms_norm)": lambda: torch.autograd.grad(yr, (xr, wr), tdy, retain_graph=True),
                "opforge/torch": lambda: oops.rms_norm_grad(tx, trms.reshape(rows), tdy, tw)})  # fmt: skip
        except ImportError:
            pass

    if "jax" in frameworks:
        try:
            import jax
            import jax.numpy as jnp

            versions["jax"] = jax.__version__
            jx, jdy, jw, jb = (jax.device_put(a) for a in (x, dy, w, b))

            def ln(x: Any, w: Any, b: Any) -> Any:
                mu = x.mean(-1, keepdims=True)
                return (x - mu) * jax.lax.rsqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * w + b

            def rms(x: Any, w: Any) -> Any:
                return x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + 1e-6) * w

            def fwd(f: Callable[..., Any], *args: Any) -> Impl:
                jf = jax.jit(f)
                return lambda: jf(*args).block_until_ready()

            def bwd(f: Callable[..., Any], *args: Any) -> Impl:
                _, vjp = jax.vjp(f, *args)  # the residuals saved, as a training step keeps them
                jv = jax.jit(lambda v, d: v(d))
                return lambda: jax.block_until_ready(jv(vjp, jdy))

            ops["softmax"]["jax.nn.softmax (jit)"] = fwd(jax.nn.softmax, jx)
            ops["log_softmax"]["jax.nn.log_softmax (jit)"] = fwd(jax.nn.log_softmax, jx)
            ops["layer_norm"]["jnp layer norm (jit)"] = fwd(ln, jx, jw, jb)
            ops["rms_norm"]["jnp rms norm (jit)"] = fwd(rms, jx, jw)
            ops["softmax bwd"]["jax.vjp(softmax) (jit)"] = bwd(jax.nn.softmax, jx)
            ops["log_softmax bwd"]["jax.vjp(log_softmax) (jit)"] = bwd(jax.nn.log_softmax, jx)
            ops["layer_norm bwd"]["jax.vjp(layer norm) (jit)"] = bwd(ln, jx, jw, jb)
            ops["rms_norm bwd"]["jax.vjp(rms norm) (jit)"] = bwd(rms, jx, jw)
        except ImportError:
            pass

    if "tensorflow" in frameworks:
        try:
            import tensorflow as tf

            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(1)
            versions["tensorflow"] = tf.__version__
            fx, fw, fb = (tf.constant(a) for a in (x, w, b))

            def tf_ln(x: Any, w: Any, b: Any) -> Any:
                mu, var = tf.nn.moments(x, axes=[-1], keepdims=True)
                return (x - mu) * tf.math.rsqrt(var + 1e-5) * w + b

            def tf_rms(x: Any, w: Any) -> Any:
                return x * tf.math.rsqrt(tf.reduce_mean(x * x, axis=-1, keepdims=True) + 1e-6) * w

            for name, f, args in (("softmax", tf.nn.softmax, (fx,)), ("log_softmax", tf.nn.log_softmax, (fx,)),
                                  ("layer_norm", tf_ln, (fx, fw, fb)), ("rms_norm", tf_rms, (fx, fw))):  # fmt: skip
                for xla in (False, True):
                    g = tf.function(f, jit_compile=xla)
                    ops[name][f"tf.function{' (XLA)' if xla else ''}"] = (lambda g=g, args=args: g(*args).numpy())
        except ImportError:
            pass

    # Warm up (jit compiles, first touches), then interleaved timed rounds.
    for impls in ops.values():
        for fn in impls.values():
            fn()
            fn()
    best: dict[str, dict[str, float]] = {op: {name: float("inf") for name in impls} for op, impls in ops.items()}
    for _ in range(repeats):
        for op, impls in ops.items():
            for name, fn in impls.items():
                t0 = time.perf_counter()
                fn()
                best[op][name] = min(best[op][name], time.perf_counter() - t0)
    return {"threads": threads, "cpus": cpus, "best": best, "versions": versions}


# --------------------------------------------------------------------------
# The parent: one child per thread count, and the table
# --------------------------------------------------------------------------


def report(result: dict[str, Any], rows: int, cols: int) -> None:
    best = result["best"]
    copy_name, copy_time = min(best["copy"].items(), key=lambda kv: kv[1])
    nbytes = 2 * rows * cols * 4
    print(f"\n== {result['threads']} thread(s) (CPUs {result['cpus']}), [{rows}, {cols}] float32")
    print(f"copy roof: {copy_time * 1e3:.2f} ms = {nbytes / copy_time / 1e9:.1f} GB/s read+written ({copy_name}; "
          + ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in best["copy"].items()) + ")")  # fmt: skip
    header = f"{'op':<16} {'opforge ms':>10} {'roof %':>7} {'fastest peer':>40} {'peer ms':>8} {'ratio':>6}"
    print(header)
    print("-" * len(header))
    for op, times in best.items():
        if op == "copy":
            continue
        ours = times["opforge"]
        peers = {k: v for k, v in times.items() if not k.startswith("opforge")}
        roof = f"{100 * copy_time / ours:6.0f}%" if "bwd" not in op else ""
        if peers:
            peer, peer_time = min(peers.items(), key=lambda kv: kv[1])
            print(f"{op:<16} {ours * 1e3:10.2f} {roof:>7} {peer:>40} {peer_time * 1e3:8.2f} {peer_time / ours:6.2f}")
        else:
            print(f"{op:<16} {ours * 1e3:10.2f} {roof:>7} {'(no peer installed)':>40}")
    print("all (ms): ")
    for op, times in best.items():
        print(f"  {op:<16} " + ", ".join(f"{k} {v * 1e3:.2f}" for k, v in sorted(times.items(), key=lambda kv: kv[1])))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=8192)
    parser.add_argument("--cols", type=int, default=4096)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls of each op per round")
    parser.add_argument("--rounds", type=int, default=3, help="turns of the libraries' processes")
    parser.add_argument("--frameworks", default="torch,jax,tensorflow")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    frameworks = [f for f in args.frameworks.split(",") if f]
    if args.child is not None:
        print(json.dumps(child(args.rows, args.cols, args.child, args.repeats, frameworks)))
        return
    print(f"CPU: {cpu_model()}")
    for threads in (int(t) for t in args.threads.split(",")):
        env = dict(os.environ)
        env.update({
            "OPFORGE_NUM_THREADS": str(threads),
            "OMP_NUM_THREADS": str(threads),
            "XLA_FLAGS": (env.get("XLA_FLAGS", "") + f" --xla_cpu_multi_thread_eigen={'true' if threads > 1 else 'false'}"
                          f" intra_op_parallelism_threads={threads}").strip(),
            "TF_CPP_MIN_LOG_LEVEL": "3",
            # Freed memory stays with the process: a fresh large output costs no page faults (for every library).
            "GLIBC_TUNABLES": "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736",
        })  # fmt: skip
        merged: dict[str, Any] = {"threads": threads, "best": {}, "versions": {}}
        for _ in range(args.rounds):
            for library in ["opforge", *frameworks]:
                command = [sys.executable, os.path.abspath(__file__), "--child", str(threads), "--rows", str(args.rows),
                           "--cols", str(args.cols), "--repeats", str(args.repeats), "--frameworks", library]  # fmt: skip
                out = subprocess.run(command, env=env, capture_output=True, text=True)
                if out.returncode != 0:
                    print(out.stderr[-3000:], file=sys.stderr)
                    sys.exit(f"bench_norms: the {library} process for {threads} thread(s) failed")
                result = json.loads(out.stdout.strip().splitlines()[-1])
                merged["cpus"] = result["cpus"]
                merged["versions"].update(result["versions"])
                for op, times in result["best"].items():
                    for name, t in times.items():
                        merged["best"].setdefault(op, {})[name] = min(t, merged["best"].get(op, {}).get(name, t))
        if threads == int(args.threads.split(",")[0]):
            print("versions: " + ", ".join(f"{k} {v}" for k, v in merged["versions"].items()))
        report(merged, args.rows, args.cols)


if __name__ == "__main__":
    main()
