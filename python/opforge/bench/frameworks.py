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

The transformer section (transformer.py: what each op computes, on float32
[N, M]; a backward row returns the gradients it names, e.g. dx, dw, db):

=============== ============================ ======================================= =====================================
op              opforge ``onp.<row>(out=)``  torch (``aten.``: ``torch.ops.aten.``)  jax (jitted) / tensorflow
=============== ============================ ======================================= =====================================
gelu, gelu_tanh ``gelu(x, approximate=)``    ``torch._C._nn.gelu(x, out=)``          ``jax.nn.gelu`` / ``tf.nn.gelu``
  backward      ``gelu_grad(dy, x)``         ``aten.gelu_backward.grad_input``       vjp / tape
silu            ``silu(x)``                  ``torch._C._nn.silu(x, out=)``          ``jax.nn.silu`` / ``tf.nn.silu``
  backward      ``silu_grad(dy, x)``         ``aten.silu_backward.grad_input``       vjp / tape
sigmoid, tanh   ``sigmoid(x)``, ``tanh(x)``  ``torch.sigmoid(x, out=)``, ``tanh``    ``jax.nn.sigmoid``, ``jnp.tanh`` /
                                                                                     ``tf.sigmoid``, ``tf.tanh``
  backward      ``sigmoid_grad(dy, y)``, ... ``aten.sigmoid_backward.grad_input``    vjp / ``tf.raw_ops.SigmoidGrad``,
                                             (dy, y), ``tanh_backward``              ``TanhGrad``
softmax,        ``softmax(x)``,              ``aten._softmax.out``,                  ``jax.nn.softmax``, ``log_softmax`` /
log_softmax     ``log_softmax(x)``           ``aten._log_softmax.out``               ``tf.nn.log_softmax``
  backward      ``softmax_grad(dy, y)``, ... ``aten._softmax_backward_data.out``,    vjp / its gradient's formula from y
                                             ``_log_softmax_backward_data.out``
layer_norm      ``layer_norm(x, w, b)``      ``aten.native_layer_norm.out``          compositions (``tf.nn.moments``)
  backward      ``layer_norm_grad(x, mean,   ``aten.native_layer_norm_backward.out`` vjp / tape
                rstd, dy, w)``
rms_norm        ``rms_norm(x, w, eps=)``     ``F.rms_norm`` (no ``out=``)            compositions
  backward      ``rms_norm_grad(x, rstd,     ``torch.autograd.grad`` of it (the      vjp / tape
                dy, w)``                     graph recorded once)
add (b: [M])    ``add(x, b)``                ``torch.add(x, b, out=)``               ``jnp.add`` / ``tf.add``
  backward      ``sum_to(dy, b)``            ``torch.sum(dy, 0, out=)``              vjp (b only) / ``tf.reduce_sum``
mul (w: [M])    ``mul(x, w)``                ``torch.mul(x, w, out=)``               ``jnp.multiply`` / ``tf.multiply``
  backward      ``mul_grad`` for x, for w    ``torch.mul``, ``torch.sum`` (``out=``) vjp / ``dy * w``, ``reduce_sum``
=============== ============================ ======================================= =====================================

NumPy has built-ins for tanh (``np.tanh``), add, mul and their backward
(``np.add``, ``np.multiply``, ``np.sum(axis=0)``, all with ``out=``) only.
JAX's backward ("vjp") is the jitted application of the function
``jax.vjp`` returns, its residuals saved beforehand (as a training step keeps
them). TensorFlow runs each op in a ``tf.function``, compiled with XLA
(``jit_compile``) where TF would run more than one kernel: the
compositions, the tape's gradients ("tape": ``GradientTape.gradient`` of the
forward, for ops without a callable gradient kernel), softmax's and mul's
backward. Outputs are preallocated where the API has ``out=``.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from .transformer import LAYER_NORM_EPS, RMS_NORM_EPS, Data, forward_of, is_backward

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

    def transformer(self, d: Data) -> Optional[Runner]:
        """A runner of the transformer-section op d.op (transformer.py), returning its
        checked outputs in order (or the first alone); None without a built-in for it."""
        return None

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

    def transformer(self, d: Data) -> Optional[Runner]:
        onp, x, dy, w, b, out = self._onp, d.x, d.dy, d.w, d.b, d.out
        runners: dict[str, Runner] = {
            "gelu": lambda: onp.gelu(x, out=out),
            "gelu_grad": lambda: onp.gelu_grad(dy, x, out=out),
            "gelu_tanh": lambda: onp.gelu(x, approximate="tanh", out=out),
            "gelu_tanh_grad": lambda: onp.gelu_grad(dy, x, approximate="tanh", out=out),
            "silu": lambda: onp.silu(x, out=out),
            "silu_grad": lambda: onp.silu_grad(dy, x, out=out),
            "sigmoid": lambda: onp.sigmoid(x, out=out),
            "sigmoid_grad": lambda: onp.sigmoid_grad(dy, d.y, out=out),
            "tanh": lambda: onp.tanh(x, out=out),
            "tanh_grad": lambda: onp.tanh_grad(dy, d.y, out=out),
            "softmax": lambda: onp.softmax(x, out=out),
            "softmax_grad": lambda: onp.softmax_grad(dy, d.y, out=out),
            "log_softmax": lambda: onp.log_softmax(x, out=out),
            "log_softmax_grad": lambda: onp.log_softmax_grad(dy, d.y, out=out),
            "layer_norm": lambda: onp.layer_norm(x, w, b, eps=LAYER_NORM_EPS, out=(out, d.out_n, d.out_n2)),
            "layer_norm_grad": lambda: onp.layer_norm_grad(x, d.mean, d.rstd, dy, w, out=(out, d.out_m, d.out_m2)),
            "rms_norm": lambda: onp.rms_norm(x, w, eps=RMS_NORM_EPS, out=(out, d.out_n)),
            "rms_norm_grad": lambda: onp.rms_norm_grad(x, d.rstd, dy, w, out=(out, d.out_m)),
            "add": lambda: onp.add(x, b, out=out),
            "add_grad": lambda: onp.sum_to(dy, b, out=d.out_m),
            "mul": lambda: onp.mul(x, w, out=out),
            "mul_grad": lambda: (onp.mul_grad(dy, w, x, out=out), onp.mul_grad(dy, x, w, out=d.out_m)),
        }
        return runners[d.op]


class NumpyImpl(Implementation):
    """NumPy's ufuncs (single-threaded) and matmul (its BLAS, own threads)."""

    name = "numpy"

    def version(self) -> str:
        return np.__version__

    def threads(self, section: str) -> Optional[int]:
        return 1 if section in ("elementwise", "transformer") else None

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

    def transformer(self, d: Data) -> Optional[Runner]:
        x, dy, w, b, out = d.x, d.dy, d.w, d.b, d.out
        if d.op == "mul_grad":
            product = np.zeros_like(x)

            def mul_grad() -> tuple[np.ndarray, np.ndarray]:
                np.multiply(dy, x, out=product)
                return np.multiply(dy, w, out=out), np.sum(product, axis=0, out=d.out_m)

            return mul_grad
        runners: dict[str, Runner] = {
            "tanh": lambda: np.tanh(x, out=out),
            "add": lambda: np.add(x, b, out=out),
            "add_grad": lambda: np.sum(dy, axis=0, out=d.out_m),
            "mul": lambda: np.multiply(x, w, out=out),
        }
        return runners.get(d.op)


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

    def transformer(self, d: Data) -> Optional[Runner]:
        torch, aten, nn = self._torch, self._torch.ops.aten, self._torch._C._nn
        t = torch.from_numpy
        x, dy, w, b, out, out_m, out_m2 = (t(a) for a in (d.x, d.dy, d.w, d.b, d.out, d.out_m, d.out_m2))
        y = t(d.y) if d.y is not None else None
        n, m = d.x.shape
        if d.op == "rms_norm_grad":  # aten's fused backward is CUDA only: autograd's, on a graph recorded once
            with torch.enable_grad():
                xg, wg = x.detach().requires_grad_(), w.detach().requires_grad_()
                yg = torch.nn.functional.rms_norm(xg, [m], wg, RMS_NORM_EPS)
            return lambda: torch.autograd.grad(yg, (xg, wg), dy, retain_graph=True)
        if d.op == "mul_grad":  # as autograd computes it, with preallocated outputs
            product = torch.zeros_like(x)

            def mul_grad() -> tuple[Any, Any]:
                return torch.mul(dy, w, out=out), torch.sum(torch.mul(dy, x, out=product), 0, out=out_m)

            return mul_grad
        f32 = torch.float32
        runners: dict[str, Runner] = {
            "gelu": lambda: nn.gelu(x, approximate="none", out=out),
            "gelu_grad": lambda: aten.gelu_backward.grad_input(dy, x, approximate="none", grad_input=out),
            "gelu_tanh": lambda: nn.gelu(x, approximate="tanh", out=out),
            "gelu_tanh_grad": lambda: aten.gelu_backward.grad_input(dy, x, approximate="tanh", grad_input=out),
            "silu": lambda: nn.silu(x, out=out),
            "silu_grad": lambda: aten.silu_backward.grad_input(dy, x, grad_input=out),
            "sigmoid": lambda: torch.sigmoid(x, out=out),
            "sigmoid_grad": lambda: aten.sigmoid_backward.grad_input(dy, y, grad_input=out),
            "tanh": lambda: torch.tanh(x, out=out),
            "tanh_grad": lambda: aten.tanh_backward.grad_input(dy, y, grad_input=out),
            "softmax": lambda: aten._softmax.out(x, -1, False, out=out),
            "softmax_grad": lambda: aten._softmax_backward_data.out(dy, y, -1, f32, grad_input=out),
            "log_softmax": lambda: aten._log_softmax.out(x, -1, False, out=out),
            "log_softmax_grad": lambda: aten._log_softmax_backward_data.out(dy, y, -1, f32, out=out),
            "layer_norm": lambda: aten.native_layer_norm.out(x, [m], w, b, LAYER_NORM_EPS, out0=out,
                                                             out1=t(d.out_n).view(n, 1), out2=t(d.out_n2).view(n, 1)),
            "layer_norm_grad": lambda: aten.native_layer_norm_backward.out(
                dy, x, [m], t(d.mean).view(n, 1), t(d.rstd).view(n, 1), w, b, [True, True, True], out0=out,
                out1=out_m, out2=out_m2),
            "rms_norm": lambda: torch.nn.functional.rms_norm(x, [m], w, RMS_NORM_EPS),  # no out= variant
            "add": lambda: torch.add(x, b, out=out),
            "add_grad": lambda: torch.sum(dy, 0, out=out_m),
            "mul": lambda: torch.mul(x, w, out=out),
        }
        return runners[d.op]

    def to_numpy(self, result: Any) -> np.ndarray:
        return np.asarray(result.detach().numpy())


class TensorFlowImpl(Implementation):
    """TensorFlow's eager CPU ops (synchronous on the CPU)."""

    name = "tensorflow"

    def __init__(self) -> None:
        import tensorflow as tf

        tf.get_logger().setLevel("ERROR")  # not a warning per tf.function made (one per transformer op)
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

    def transformer(self, d: Data) -> Optional[Runner]:
        tf = self._tf

        def layer_norm(x: Any, w: Any, b: Any) -> Any:
            mean, var = tf.nn.moments(x, axes=[-1], keepdims=True)
            return (x - mean) * tf.math.rsqrt(var + LAYER_NORM_EPS) * w + b

        def rms_norm(x: Any, w: Any) -> Any:
            return x * tf.math.rsqrt(tf.reduce_mean(x * x, axis=-1, keepdims=True) + RMS_NORM_EPS) * w

        forward: dict[str, tuple[Callable[..., Any], tuple[str, ...]]] = {
            "gelu": (lambda x: tf.nn.gelu(x, approximate=False), ("x",)),
            "gelu_tanh": (lambda x: tf.nn.gelu(x, approximate=True), ("x",)),
            "silu": (tf.nn.silu, ("x",)),
            "sigmoid": (tf.sigmoid, ("x",)),
            "tanh": (tf.tanh, ("x",)),
            "softmax": (tf.nn.softmax, ("x",)),
            "log_softmax": (tf.nn.log_softmax, ("x",)),
            "layer_norm": (layer_norm, ("x", "w", "b")),
            "rms_norm": (rms_norm, ("x", "w")),
            "add": (tf.add, ("x", "b")),
            "mul": (tf.multiply, ("x", "w")),
        }
        # Backward: TF's gradient kernels where they can be called (SigmoidGrad, TanhGrad), the
        # registered gradient's formula from y (softmax), else the tape's gradient of the forward.
        backward: dict[str, tuple[Callable[..., Any], tuple[str, ...]]] = {
            "sigmoid_grad": (lambda dy, y: tf.raw_ops.SigmoidGrad(y=y, dy=dy), ("dy", "y")),
            "tanh_grad": (lambda dy, y: tf.raw_ops.TanhGrad(y=y, dy=dy), ("dy", "y")),
            "softmax_grad": (lambda dy, y: (dy - tf.reduce_sum(dy * y, -1, keepdims=True)) * y, ("dy", "y")),
            "log_softmax_grad": (lambda dy, y: dy - tf.exp(y) * tf.reduce_sum(dy, -1, keepdims=True), ("dy", "y")),
            "add_grad": (lambda dy: tf.reduce_sum(dy, 0), ("dy",)),
            "mul_grad": (lambda dy, x, w: (dy * w, tf.reduce_sum(dy * x, 0)), ("dy", "x", "w")),
        }
        if is_backward(d.op) and d.op not in backward:
            f, names = forward[forward_of(d.op)]

            def tape_gradient(dy: Any, *args: Any) -> Any:
                with tf.GradientTape() as tape:
                    tape.watch(args)
                    y = f(*args)
                return tape.gradient(y, args, output_gradients=dy)

            fn, names = tape_gradient, ("dy", *names)
        else:
            fn, names = backward[d.op] if is_backward(d.op) else forward[d.op]
        # XLA where TF would run more than one kernel (it fuses them); plain tf.function for one.
        one_kernel = ("sigmoid_grad", "tanh_grad", "add_grad")
        xla = d.op in ("layer_norm", "rms_norm") or (is_backward(d.op) and d.op not in one_kernel)
        compiled = tf.function(fn, jit_compile=xla)
        args = self._constants(*(getattr(d, name) for name in names))
        return self._on_cpu(lambda: compiled(*args))

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

    def transformer(self, d: Data) -> Optional[Runner]:
        jax, jnp = self._jax, self._jnp

        def layer_norm(x: Any, w: Any, b: Any) -> Any:
            mean = x.mean(-1, keepdims=True)
            return (x - mean) * jax.lax.rsqrt(((x - mean) ** 2).mean(-1, keepdims=True) + LAYER_NORM_EPS) * w + b

        def rms_norm(x: Any, w: Any) -> Any:
            return x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + RMS_NORM_EPS) * w

        forward: dict[str, tuple[Callable[..., Any], tuple[str, ...]]] = {
            "gelu": (lambda x: jax.nn.gelu(x, approximate=False), ("x",)),
            "gelu_tanh": (lambda x: jax.nn.gelu(x, approximate=True), ("x",)),
            "silu": (jax.nn.silu, ("x",)),
            "sigmoid": (jax.nn.sigmoid, ("x",)),
            "tanh": (jnp.tanh, ("x",)),
            "softmax": (jax.nn.softmax, ("x",)),
            "log_softmax": (jax.nn.log_softmax, ("x",)),
            "layer_norm": (layer_norm, ("x", "w", "b")),
            "rms_norm": (rms_norm, ("x", "w")),
            "add": (jnp.add, ("x", "b")),
            "mul": (jnp.multiply, ("x", "w")),
        }
        f, names = forward[forward_of(d.op)]
        args = self._put(*(getattr(d, name) for name in names))
        if not is_backward(d.op):
            compiled = jax.jit(f)
            return lambda: compiled(*args).block_until_ready()
        if d.op == "add_grad":  # the gradient of the broadcast addend only (x's is dy itself)
            x = args[0]
            f, args = (lambda b: x + b), args[1:]
        _, vjp = jax.vjp(f, *args)  # the residuals saved, as a training step keeps them
        apply = jax.jit(lambda v, dy: v(dy))
        (dy,) = self._put(d.dy)
        return lambda: jax.block_until_ready(apply(vjp, dy))


#: Implementations by name; frameworks are the built-ins opforge is compared to.
IMPLEMENTATIONS: dict[str, type[Implementation]] = {
    "opforge": OpforgeImpl,
    "numpy": NumpyImpl,
    "torch": TorchImpl,
    "tensorflow": TensorFlowImpl,
    "jax": JaxImpl,
}
FRAMEWORKS = ("numpy", "torch", "tensorflow", "jax")
