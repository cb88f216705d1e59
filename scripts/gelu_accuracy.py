#!/usr/bin/env python3
"""Float32 gelu (exact form) of opforge and of the installed frameworks against float64.

The reference is x/2 erfc(-x/sqrt(2)) in double (math.erfc, which keeps its relative
accuracy in the tail where 1 + erf cancels); errors are in ulps of the float32 result
(subnormal ulps below FLT_MIN). Inputs: uniform in [-14, 14], a dense sweep of
[-14, -3] and standard normal ones. Run with the repository's venv:

    .venv/bin/python scripts/gelu_accuracy.py
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

import opforge.numpy as onp


def inputs() -> np.ndarray:
    rng = np.random.default_rng(1)
    return np.concatenate([
        rng.uniform(-14, 14, 1 << 22).astype(np.float32),
        np.linspace(-14, -3, 1 << 20, dtype=np.float32),
        rng.standard_normal(1 << 22).astype(np.float32),
    ])


def reference(x: np.ndarray) -> np.ndarray:
    erfc = np.frompyfunc(math.erfc, 1, 1)
    xd = x.astype(np.float64)
    return 0.5 * xd * erfc(-xd / math.sqrt(2)).astype(np.float64)


def ulps(y: np.ndarray, ref: np.ndarray) -> np.ndarray:
    spacing = np.maximum(np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64), 2.0**-149)
    return np.abs(y.astype(np.float64) - ref) / spacing


def implementations() -> dict[str, Callable[[np.ndarray], np.ndarray]]:
    impls: dict[str, Callable[[np.ndarray], np.ndarray]] = {"opforge": lambda x: onp.gelu(x)}
    try:
        import torch

        impls["torch"] = lambda x: torch.nn.functional.gelu(torch.from_numpy(x)).numpy()
    except ImportError:
        pass
    try:
        import jax

        impls["jax"] = lambda x: np.asarray(jax.jit(lambda v: jax.nn.gelu(v, approximate=False))(x))
    except ImportError:
        pass
    try:
        import tensorflow as tf

        impls["tensorflow"] = lambda x: tf.nn.gelu(tf.constant(x), approximate=False).numpy()
    except ImportError:
        pass
    return impls


def main() -> None:
    x = inputs()
    ref = reference(x)
    bands = {"all": np.ones_like(x, dtype=bool), "[-3, 0)": (x >= -3) & (x < 0), "x >= 0": x >= 0}
    print(f"float32 gelu, max error in ulps over {x.size} inputs")
    print(f"{'':12}" + "".join(f"{name:>14}" for name in bands))
    for name, fn in implementations().items():
        err = ulps(fn(x), ref)
        print(f"{name:12}" + "".join(f"{err[mask].max():14.3g}" for mask in bands.values()))


if __name__ == "__main__":
    main()
