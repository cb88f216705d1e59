"""The implementations that ``opforge bench`` times: opforge itself and every
installed framework's built-ins.

Each implementation turns NumPy inputs (made once by the worker) into its own
tensors *before* timing, and returns a callable that runs the op once, to
completion, and returns its result (for the correctness check after timing):

=========== ============================= ==================================== ==============================
            relu                          scale (alpha) / add                  dense: relu(x @ w + b)
=========== ============================= ==================================== ==============================
opforge     ``onp.relu(x, out=y)``        ``onp.scale(x, alpha=, out=y)``,     ``onp.dense(x, w, b,
                                          ``onp.add(x, b, out=y)``             activation="relu", out=y)``
numpy       ``np.maximum(x, 0, out=y)``   ``np.multiply(x, alpha, out=y)``,    ``np.matmul(x, w, out=y)``,
                                          ``np.add(x, b, out=y)``              then ``+= b`` and ``maximum``
                                                                               in place
torch       ``torch.clamp_min(x, 0,       ``torch.mul(x, alpha, out=y)``,      ``F.linear(x, wT, b)`` (wT =
            out=y)``                      ``torch.add(x, b, out=y)``           w.T made contiguous
                                                                               beforehand), ``relu_``
tensorflow  ``tf.nn.relu(x)`` (eager)     ``tf.multiply``, ``tf.add``          ``tf.nn.relu(tf.nn.bias_add(
                                                                               tf.matmul(x, w), b))``
jax         ``jax.jit(jax.nn.relu)``,     jitted ``x * alpha``,                jitted ``jax.nn.relu(x @ w +
            ``block_until_ready()``       ``jnp.add``                          b)``
=========== ============================= ==================================== ==============================

NumPy and torch write into preallocated outputs; TensorFlow's eager ops and
JAX allocate theirs (they have no ``out=``). Everything runs on the CPU. The
frameworks are imported only by the worker that measures them, so none is
needed to run the benchmark.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

#: Runs the op once, to completion; returns its result.
Runner = Callable[[], Any]

ELTWISE_OPS = ("relu", "scale", "add")
#: Arrays read + written per element, for GB/s.
ELTWISE_STREAMS = {"relu": 2, "scale": 2, "add": 3}
SCALE_ALPHA = 2.0


class Implementation:
    """Base of the implementations: name, version, thread count and runners."""

    name = "?"
    builtin = True

    def version(self) -> str:
        raise NotImplementedError

    def threads(self, section: str) -> Optional[int]:
        """Threads it uses for a section ("elementwise" or "dense"); None if unknown."""
        return None

    def eltwise(self, op: str, x: np.ndarray, b: np.ndarray, out: np.ndarray) -> Runner:
        raise NotImplementedError

    def dense(self, x: np.ndarray, w: np.ndarray, b: np.ndarray, out: np.ndarray) -> Runner:
        raise NotImplementedError

    def to_numpy(self, result: Any) -> np.ndarray:
        return np.asarray(result)


class OpforgeImpl(Implementation):
    """opforge through its NumPy adapter, at the ISA level of this process."""

    name = "opforge"
    builtin = False

    def __init__(self) -> None:
        import opforge
        from opforge import numpy as onp

        self._opforge = opforge
        self._onp = onp

    def version(self) -> str:
        return str(self._opforge.__version__)

    def threads(self, section: str) -> Optional[int]:
        return self._opforge.get_num_threads()

    def eltwise(self, op: str, x: np.ndarray, b: np.ndarray, out: np.ndarray) -> Runner:
        onp = self._onp
        if op == "relu":
            return lambda: onp.relu(x, out=out)
        if op == "scale":
            return lambda: onp.scale(x, alpha=SCALE_ALPHA, out=out)
        return lambda: onp.add(x, b, out=out)

    def dense(self, x: np.ndarray, w: np.ndarray, b: np.ndarray, out: np.ndarray) -> Runner:
        onp = self._onp
        return lambda: onp.dense(x, w, b, activation="relu", out=out)


class NumpyImpl(Implementation):
    """NumPy's ufuncs (single-threaded) and matmul (its BLAS, own threads)."""

    name = "numpy"

    def version(self) -> str:
        return np.__version__

    def threads(self, section: str) -> Optional[int]:
        return 1 if section == "elementwise" else None

    def eltwise(self, op: str, x: np.ndarray, b: np.ndarray, out: np.ndarray) -> Runner:
        if op == "relu":
            return lambda: np.maximum(x, 0, out=out)
        if op == "scale":
            alpha = x.dtype.type(SCALE_ALPHA)
            return lambda: np.multiply(x, alpha, out=out)
        return lambda: np.add(x, b, out=out)

    def dense(self, x: np.ndarray, w: np.ndarray, b: np.ndarray, out: np.ndarray) -> Runner:
        def run() -> np.ndarray:
            np.matmul(x, w, out=out)
            np.add(out, b, out=out)
            np.maximum(out, 0, out=out)
            return out

        return run


class TorchImpl(Implementation):
    """PyTorch's CPU built-ins on tensors sharing the NumPy inputs' memory."""

    name = "torch"

    def __init__(self) -> None:
        import torch
        import torch.nn.functional

        self._torch = torch
        self._linear = torch.nn.functional.linear

    def version(self) -> str:
        return str(self._torch.__version__)

    def threads(self, section: str) -> Optional[int]:
        return int(self._torch.get_num_threads())

    def eltwise(self, op: str, x: np.ndarray, b: np.ndarray, out: np.ndarray) -> Runner:
        torch = self._torch
        tx, tb, ty = torch.from_numpy(x), torch.from_numpy(b), torch.from_numpy(out)
        if op == "relu":
            return lambda: torch.clamp_min(tx, 0, out=ty)
        if op == "scale":
            return lambda: torch.mul(tx, SCALE_ALPHA, out=ty)
        return lambda: torch.add(tx, tb, out=ty)

    def dense(self, x: np.ndarray, w: np.ndarray, b: np.ndarray, out: np.ndarray) -> Runner:
        torch, linear = self._torch, self._linear
        tx, tb = torch.from_numpy(x), torch.from_numpy(b)
        weight = torch.from_numpy(np.ascontiguousarray(w.T))  # torch's weight is [out, in]

        def run() -> Any:
            return torch.relu_(linear(tx, weight, tb))

        return run

    def to_numpy(self, result: Any) -> np.ndarray:
        return np.asarray(result.numpy())


class TensorFlowImpl(Implementation):
    """TensorFlow's eager CPU ops (synchronous on the CPU)."""

    name = "tensorflow"

    def __init__(self) -> None:
        import tensorflow as tf

        self._tf = tf

    def version(self) -> str:
        return str(self._tf.__version__)

    def _on_cpu(self, fn: Callable[[], Any]) -> Runner:
        tf = self._tf

        def run() -> Any:
            with tf.device("/CPU:0"):
                return fn()

        return run

    def _constants(self, *arrays: np.ndarray) -> list[Any]:
        with self._tf.device("/CPU:0"):
            return [self._tf.constant(a) for a in arrays]

    def eltwise(self, op: str, x: np.ndarray, b: np.ndarray, out: np.ndarray) -> Runner:
        tf = self._tf
        tx, tb, alpha = self._constants(x, b, np.asarray(SCALE_ALPHA, x.dtype))
        if op == "relu":
            return self._on_cpu(lambda: tf.nn.relu(tx))
        if op == "scale":
            return self._on_cpu(lambda: tf.multiply(tx, alpha))
        return self._on_cpu(lambda: tf.add(tx, tb))

    def dense(self, x: np.ndarray, w: np.ndarray, b: np.ndarray, out: np.ndarray) -> Runner:
        tf = self._tf
        tx, tw, tb = self._constants(x, w, b)
        return self._on_cpu(lambda: tf.nn.relu(tf.nn.bias_add(tf.matmul(tx, tw), tb)))

    def to_numpy(self, result: Any) -> np.ndarray:
        return np.asarray(result.numpy())


class JaxImpl(Implementation):
    """JAX on its CPU device, jitted, float64 enabled (jax_enable_x64)."""

    name = "jax"

    def __init__(self) -> None:
        import jax

        jax.config.update("jax_enable_x64", True)  # type: ignore[no-untyped-call]  # before any array exists
        import jax.numpy as jnp

        self._jax = jax
        self._jnp = jnp
        self._cpu = jax.devices("cpu")[0]

    def version(self) -> str:
        return str(self._jax.__version__)

    def _put(self, *arrays: np.ndarray) -> list[Any]:
        return [self._jax.device_put(a, self._cpu) for a in arrays]

    def eltwise(self, op: str, x: np.ndarray, b: np.ndarray, out: np.ndarray) -> Runner:
        jax, jnp = self._jax, self._jnp
        jx, jb = self._put(x, b)
        if op == "relu":
            relu = jax.jit(jax.nn.relu)
            return lambda: relu(jx).block_until_ready()
        if op == "scale":
            scale = jax.jit(lambda v: v * SCALE_ALPHA)  # a Python float keeps v's dtype
            return lambda: scale(jx).block_until_ready()
        add = jax.jit(jnp.add)
        return lambda: add(jx, jb).block_until_ready()

    def dense(self, x: np.ndarray, w: np.ndarray, b: np.ndarray, out: np.ndarray) -> Runner:
        jax = self._jax
        jx, jw, jb = self._put(x, w, b)
        dense = jax.jit(lambda x_, w_, b_: jax.nn.relu(x_ @ w_ + b_))
        return lambda: dense(jx, jw, jb).block_until_ready()


#: Implementations by name; frameworks are the built-ins opforge is compared to.
IMPLEMENTATIONS: dict[str, type[Implementation]] = {
    "opforge": OpforgeImpl,
    "numpy": NumpyImpl,
    "torch": TorchImpl,
    "tensorflow": TensorFlowImpl,
    "jax": JaxImpl,
}
FRAMEWORKS = ("numpy", "torch", "tensorflow", "jax")
