"""Every op of the opforge op table as a JAX function: an XLA FFI custom call.

At import this module walks the built-in table, binds each row to a C handler
of ``libopforge_xla.so`` (``adapters/xla.c``), registers it with XLA as the FFI
target ``opforge.<op>`` for the CPU and CUDA platforms (the CUDA handler runs
the row's CUDA kernel on XLA's stream), and defines one function per row, named after it::

    relu(x)              scale(x, *, alpha=1.0)          add(a, b)
    dense(x, w, b=None, *, activation='none')            dense_grad(dy, x, w, y=None, *, activation='none')

``load_ops(source)`` does the same for a user's library of ops
(``OPF_EXPORT_OP_TABLE``; a shared library, or a ``.c`` file or C source text
that opforge compiles and caches). Nothing here names a particular op.

The functions take and return ``jax.Array``\\ s and work eagerly and under
``jax.jit``, ``jax.grad``/``jax.vjp`` (a ``jax.custom_vjp`` built from the
row's gradient rules, which call other rows), ``jax.vmap`` and
``jax.shard_map``. The custom VJP uses ``symbolic_zeros``: the backward
pass asks a gradient row only for the gradients of inputs that are
differentiated (an optional output nobody needs, e.g. ``dense_grad``'s ``dx``
for a first layer, is not computed: ``opf_outputs``).

Calling convention
------------------
- Tensor arguments are arrays (or Python numbers, which take the dtype of the
  other tensor arguments) of one dtype the row supports (float32, float64 with
  ``jax_enable_x64``). An optional input may be None.
- Attributes are keyword-only: float and int attributes take Python numbers,
  enum attributes one of their choice names (or None for a choice "none").
- Result: the single output, else a tuple. An input the row marks as mutated
  (``OPF_ARG_MUTATED``) cannot be written in place in JAX: the function
  returns its new value instead (XLA aliases the buffers when it can).
- Errors are raised when the call is traced, before anything runs: TypeError
  for a wrong dtype or attribute type, ValueError for shapes (the library's
  shape checks, ``opf_op_infer_shape``) and attribute values, each naming the
  op and the argument. The C handler checks everything again when XLA runs it
  and fails the computation with a message naming the op.

vmap
----
A row whose every input has leading dims "..." in its signature (every
elementwise row; a row-wise row such as ``rowsum(x[..., M])``), or a
hand-written row flagged elementwise, uses ``vmap_method="broadcast_all"``:
its kernel is indifferent to one more leading axis (the signature says the
leading dims are independent rows), so the batched operands go to a single
kernel call (an unbatched operand is broadcast first, since "..." must be
equal across arguments). An elementwise row whose inputs broadcast together
("y[broadcast(a, b)]", "y[sum_to(a)]") aligns their dims from the end, so
its inputs go to the call padded to one rank first (leading dims of size 1,
removed again from the outputs). Other rows use ``"sequential"``: nothing says how a
batch axis maps through their shape rule (dense is rank-2 only; an input such
as ``w[M]`` is shared by all rows), so vmap runs one call per batch element
in a loop inside the compiled program (correct for any row, not fast).
"""

from __future__ import annotations

import ctypes
import functools
import inspect
import itertools
import os
import threading
from typing import Any, Callable, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
try:
    from jax.custom_derivatives import SymbolicZero
except ImportError:  # where the public alias moved: its defining module
    from jax._src.custom_derivatives import SymbolicZero  # type: ignore[no-redef]

from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from . import get_adapter_library
from ._capi import ffi, lib
from ._status import check as _check_status
from ._build import Source, load_user_table
from ._table import (
    AttrDef,
    GradDef,
    GradSource,
    OpDef,
    OpTable,
    RuleRows,
    builtin_table,
    docstring,
    run_grad_rules,
    run_jvp_rules,
)

__all__ = ["OpNamespace", "load_ops", "target_name", "ffi_api_version"]  # + one name per built-in op

_CPU, _CUDA = 0, 1
_MAX_RANK: int = lib.OPF_MAX_RANK
_Attrs = tuple[tuple[str, Any], ...]

# --------------------------------------------------------------------------
# The C adapter
# --------------------------------------------------------------------------

_adapter = ctypes.CDLL(get_adapter_library("xla"))
_adapter.opf_xla_handler.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int)
_adapter.opf_xla_handler.restype = ctypes.c_void_p
_adapter.opf_xla_api_version.argtypes = (ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))
_adapter.opf_xla_max_handlers.restype = ctypes.c_int

_lock = threading.Lock()
_targets: dict[str, int] = {}  # registered target name -> address of its row (opf_op_def *)
_keep_alive: list[Any] = []  # tables whose rows are registered (user libraries stay loaded)


def ffi_api_version() -> tuple[int, int]:
    """The XLA FFI API version (major, minor) of the headers libopforge_xla was built with."""
    major, minor = ctypes.c_int(), ctypes.c_int()
    _adapter.opf_xla_api_version(ctypes.byref(major), ctypes.byref(minor))
    return major.value, minor.value


def target_name(table: OpTable, op: OpDef) -> str:
    """The XLA FFI target a row is registered as: ``<table name>.<op name>``."""
    return f"{table.name}.{op.name}"


def _cuda_wanted() -> bool:
    """Register CUDA targets too (every row: one without a CUDA kernel, or a
    libopforge built without CUDA, then fails with a message naming the op
    rather than XLA's "no implementation" error). Registrations for a platform
    jax has no plugin for just wait in jaxlib's queue."""
    return os.environ.get("OPFORGE_JAX_NO_CUDA") != "1"


def _register(table: OpTable, op: OpDef, label: str, build_id: str = "") -> str:
    """Binds a row to C handlers and registers them with XLA; returns the target name.

    A row registered before (the same library) keeps its target. XLA cannot
    drop a target, so a different row under a name already taken (a changed
    library reloaded) gets a target of its own, ``<table>.<op>.<build_id>``
    (with a counter if that is taken too), and the new code runs from the
    namespace loaded with it."""
    base = target_name(table, op)
    address = int(ffi.cast("uintptr_t", op.cdata))
    with _lock:
        reloaded = f"{base}.{build_id or 'reload'}"
        names = itertools.chain((base, reloaded), (f"{reloaded}.{n}" for n in itertools.count(2)))
        name = next(n for n in names if _targets.get(n, address) == address)
        if name in _targets:
            return name
        platforms = [(_CPU, "cpu")]
        if _cuda_wanted():
            platforms.append((_CUDA, "CUDA"))
        for platform, xla_platform in platforms:
            handler = _adapter.opf_xla_handler(address, label.encode(), platform)
            if not handler:
                raise RuntimeError(
                    f"opforge.jax: cannot register {name}: all {_adapter.opf_xla_max_handlers()} "
                    "XLA handler slots are taken"
                )
            jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(handler), platform=xla_platform)
        _targets[name] = address
        _keep_alive.append(table)
    return name


# --------------------------------------------------------------------------
# One op
# --------------------------------------------------------------------------


def _varying_axes(x: Any) -> frozenset:
    """The manual mesh axes x varies over inside ``jax.shard_map`` (empty outside)."""
    aval = jax.typeof(x)
    mat = getattr(aval, "mat", None)  # jax >= 0.10
    if mat is not None and hasattr(mat, "varying"):
        return frozenset(mat.varying)
    return frozenset(getattr(aval, "vma", ()))


def _make_varying(x: jax.Array, axes: frozenset) -> jax.Array:
    """x typed as varying over `axes` as well. ffi_call gives its results no
    varying axes; inside shard_map an op's results vary as its inputs do
    (else a custom VJP's cotangents do not match its inputs' types)."""
    missing = tuple(sorted(axes - _varying_axes(x), key=str))
    if not missing:
        return x
    if hasattr(jax.lax, "pcast"):
        return jax.lax.pcast(x, missing, to="varying")
    return jax.lax.pvary(x, missing)  # jax < 0.8.2


def _attr_annotation(attr: AttrDef) -> str:
    return {"float": "float", "int": "int", "enum": "str"}[attr.kind]


class _Op:
    """Calls one row of a table on JAX arrays (see the module docstring)."""

    def __init__(self, table: OpTable, op: OpDef, label: str, namespace: "OpNamespace", build_id: str = "") -> None:
        self.op = op
        self.label = label
        self.namespace = namespace
        self.target = _register(table, op, label, build_id)
        self.num_mutated = sum(arg.mutated for arg in op.inputs)
        self.outputs_read = frozenset(
            source.index for rule in op.grads for source in rule.sources if source.kind == "output"
        )
        # One call over a vmapped batch: every input has "..." and every output
        # too (an output without "..." is a sum over all the rows: the batch's
        # would be added up).
        batched = all(arg.core_dims is not None for arg in (*op.inputs, *op.outputs))
        self.vmap_method = "broadcast_all" if op.elementwise or batched else "sequential"
        self.alias_outputs = op.elementwise and os.environ.get("OPFORGE_JAX_ALIAS", "1") == "1"
        # An elementwise row whose inputs broadcast together aligns their dims
        # from the end: they go to the call padded to one rank (leading 1s),
        # so that a batch axis vmap puts in front of each means the same axis.
        self.aligns_from_the_end = op.elementwise and any(rule.broadcasts for rule in op.output_shapes)
        self.signature = self._make_signature()

    # -- signature and arguments ---------------------------------------------

    def _make_signature(self) -> inspect.Signature:
        P = inspect.Parameter
        params = [
            P(arg.name, P.POSITIONAL_OR_KEYWORD, default=None if arg.optional else P.empty, annotation="ArrayLike")
            for arg in self.op.inputs
        ]
        params += [P(a.name, P.KEYWORD_ONLY, default=a.default, annotation=_attr_annotation(a)) for a in self.op.attrs]
        return inspect.Signature(params, return_annotation="jax.Array")

    def _attr_value(self, attr: AttrDef, value: Any) -> Any:
        if attr.kind == "enum":
            if value is None and "none" in attr.choices:
                return "none"
            if not isinstance(value, str) or value not in attr.choices:
                choices = ", ".join(repr(c) for c in attr.choices)
                raise ValueError(f"{self.label}: {attr.name} must be one of {choices}, got {value!r}")
            return value
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            kind = "a float" if attr.kind == "float" else "an integer"
            hint = ""
            if isinstance(value, jax.Array):
                hint = " (attributes are static: close over them, or use static_argnames under jax.jit)"
            raise TypeError(f"{self.label}: {attr.name} must be {kind}, got {value!r}{hint}")
        if attr.kind == "int":
            if isinstance(value, (float, np.floating)):
                if not float(value).is_integer():
                    raise TypeError(f"{self.label}: {attr.name} must be an integer, got {value!r}")
            if not -(2**63) <= int(value) < 2**63:
                raise ValueError(f"{self.label}: {attr.name} is out of the int64 range: {value!r}")
            return int(value)
        return float(value)

    def _arrays(self, values: dict[str, Any]) -> list[Optional[jax.Array]]:
        """The inputs as arrays of one supported dtype (None for absent optional ones)."""
        inputs = self.op.inputs
        dtype: Optional[np.dtype] = None
        first = ""
        for arg in inputs:
            value = values[arg.name]
            if value is None or isinstance(value, (bool, int, float, list, tuple)):
                continue
            if not hasattr(value, "dtype") or not hasattr(value, "shape"):
                raise TypeError(f"{self.label}: {arg.name} must be an array, got {type(value).__name__}")
            this = np.dtype(value.dtype)
            if this.name not in self.op.dtypes:
                raise TypeError(
                    f"{self.label}: {arg.name} has dtype {this.name}; expected {' or '.join(self.op.dtypes)}"
                )
            if dtype is None:
                dtype, first = this, arg.name
            elif this != dtype:
                raise TypeError(
                    f"{self.label}: {arg.name} has dtype {this.name} but {first} has dtype {dtype.name}; "
                    "every tensor argument must have the same dtype"
                )
        if dtype is None:
            dtype = np.dtype(jnp.result_type(float))
        arrays: list[Optional[jax.Array]] = []
        for arg in inputs:
            value = values[arg.name]
            if value is None:
                if not arg.optional:
                    raise TypeError(f"{self.label}: {arg.name} is required, got None")
                arrays.append(None)
            elif isinstance(value, (bool, int, float, list, tuple)):
                if isinstance(value, bool):
                    raise TypeError(f"{self.label}: {arg.name} must be an array, got a bool")
                arrays.append(jnp.asarray(value, dtype=dtype))
            else:
                arrays.append(jnp.asarray(value))
        return arrays

    # -- shapes -------------------------------------------------------------

    @functools.lru_cache(maxsize=1024)
    def _output_shapes(self, shapes: tuple[Optional[tuple[int, ...]], ...]) -> tuple[tuple[int, ...], ...]:
        """Shapes of the outputs by the row's shape checks and rules
        (``opf_op_infer_shape``); raises as the library says."""
        for arg, shape in zip(self.op.inputs, shapes):
            if shape is not None and len(shape) > _MAX_RANK:
                raise ValueError(
                    f"{self.label}: {arg.name} has rank {len(shape)}; supported ranks are 0 to {_MAX_RANK}"
                )
        count = max(len(shapes), 1)
        tensors = ffi.new("opf_tensor[]", count)
        dims = [ffi.new("int64_t[]", list(shape) or [0]) if shape is not None else ffi.NULL for shape in shapes]
        pointers = ffi.new("opf_tensor *[]", count)
        for i, shape in enumerate(shapes):
            if shape is None:
                pointers[i] = ffi.NULL
                continue
            tensors[i].ndim = len(shape)
            tensors[i].shape = dims[i]
            tensors[i].dtype = lib.OPF_F32
            tensors[i].device.type = lib.OPF_DEVICE_CPU
            pointers[i] = tensors + i
        ndim = ffi.new("int32_t *")
        out = ffi.new("int64_t[]", _MAX_RANK)
        result = []
        for o in range(len(self.op.outputs)):
            status = lib.opf_op_infer_shape(self.op.cdata, pointers, o, ndim, out)
            _check_status(status, self.label)
            result.append(tuple(int(out[d]) for d in range(ndim[0])))
        return tuple(result)

    # -- the FFI call -------------------------------------------------------

    def _raw(
        self, present: Sequence[jax.Array], mask: tuple[bool, ...], attrs: _Attrs, outputs: tuple[bool, ...]
    ) -> tuple[jax.Array, ...]:
        """One ffi_call: the present inputs in, the mutated inputs' new values
        and the outputs asked for (``outputs``, one flag per output) out."""
        full: list[Optional[jax.Array]] = []
        it = iter(present)
        for here in mask:
            full.append(next(it) if here else None)
        shapes = tuple(None if a is None else tuple(a.shape) for a in full)
        own_shapes = self._output_shapes(shapes)
        if self.aligns_from_the_end:
            rank = max(len(shape) for shape in shapes if shape is not None)
            present = tuple(a.reshape((1,) * (rank - a.ndim) + a.shape) for a in present)
            full = [None if a is None else a.reshape((1,) * (rank - a.ndim) + a.shape) for a in full]
            shapes = tuple(None if a is None else tuple(a.shape) for a in full)
        out_shapes = self._output_shapes(shapes)
        dtype = present[0].dtype
        results = []
        aliases = {}
        position = 0
        for arg, array, here in zip(self.op.inputs, full, mask):
            if here and arg.mutated:
                assert array is not None
                aliases[position] = len(results)
                results.append(jax.ShapeDtypeStruct(array.shape, dtype))
            position += here
        if self.alias_outputs:
            # An elementwise row may write an output over the input it is
            # shaped like: let XLA reuse that input's buffer when it is dead
            # after the call (in a loop carry, a fused chain of ops), rather
            # than allocate a fresh one (it inserts a copy when it is not).
            positions = [i for i, here in enumerate(mask) if here]
            result = len(results)
            for o, rule in enumerate(self.op.output_shapes):
                if not outputs[o]:
                    continue
                # shaped like an input, or the broadcast of inputs one of which has its shape
                sources = [rule.like] if rule.kind == "like" else list(rule.inputs) if rule.kind == "broadcast" else []
                for i in sources:
                    if mask[i] and shapes[i] == out_shapes[o] and positions.index(i) not in aliases:
                        aliases[positions.index(i)] = result
                        break
                result += 1
        # A skipped optional output has no result: the handler passes NULL for
        # it to opf_op_run, which then does not compute it.
        results += [jax.ShapeDtypeStruct(shape, dtype) for shape, wanted in zip(out_shapes, outputs) if wanted]
        in_mask = sum(1 << i for i, here in enumerate(mask) if here)
        kwargs: dict[str, Any] = {"opf_inputs": np.int64(in_mask)}
        if not all(outputs):
            kwargs["opf_outputs"] = np.int64(sum(1 << o for o, wanted in enumerate(outputs) if wanted))
        for attr, (name, value) in zip(self.op.attrs, attrs):
            encode = {"enum": str, "float": np.float64, "int": np.int64}[attr.kind]
            kwargs[name] = encode(value)
        call = jax.ffi.ffi_call(
            self.target, results, vmap_method=self.vmap_method, input_output_aliases=aliases or None
        )
        outs = tuple(call(*present, **kwargs))
        if self.aligns_from_the_end:  # without the padding: each output at its own shape
            wanted_shapes = [shape for shape, wanted in zip(own_shapes, outputs) if wanted]
            outs = outs[: len(outs) - len(wanted_shapes)] + tuple(
                out.reshape(shape) for out, shape in zip(outs[len(outs) - len(wanted_shapes) :], wanted_shapes)
            )
        varying = frozenset().union(*(_varying_axes(a) for a in present))
        return tuple(_make_varying(out, varying) for out in outs) if varying else outs

    def _rule_call(self, attrs: _Attrs) -> Callable[[str, list[Any], list[bool]], Sequence[Any]]:
        """Runs a row named by a gradient or tangent rule (through its
        differentiable function, so that rules compose to any order): its
        attributes are this row's of the same name; only the products wanted
        are asked for (an optional output nobody needs is not computed, e.g.
        dense_grad's dx for a first layer)."""
        attr_values = dict(attrs)

        def call(name: str, args: list[Any], wanted: list[bool]) -> Sequence[Any]:
            rule_op = self.namespace._ops[name]
            rule_attrs = {a.name: attr_values[a.name] for a in rule_op.op.attrs if a.name in attr_values}
            first = rule_op.num_mutated  # products: the mutated inputs' values, then the outputs
            asked = tuple(first + o < len(wanted) and wanted[first + o] for o in range(len(rule_op.op.outputs)))
            return rule_op._call(args, rule_attrs, asked)

        return call

    @functools.lru_cache(maxsize=256)
    def _function(
        self, mask: tuple[bool, ...], attrs: _Attrs, outputs: tuple[bool, ...]
    ) -> Callable[..., tuple[jax.Array, ...]]:
        """The call for one input presence mask, attribute values and set of
        outputs asked for, differentiable: a ``jax.custom_jvp`` whose tangent
        is the linear primitive of :class:`_Linear` (tangent rules forward,
        gradient rules for its transpose). It returns the mutated inputs' new
        values, then the outputs asked for (a skipped one is left out)."""

        @jax.custom_jvp
        def run(*present: jax.Array) -> tuple[jax.Array, ...]:
            return self._raw(present, mask, attrs, outputs)

        def jvp(primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> tuple[Any, Any]:
            # Through the custom-JVP function, not the bare call: under a
            # second differentiation the outputs must be differentiable too.
            results = run(*primals)
            # symbolic_zeros: an input nothing differentiates has a
            # SymbolicZero tangent; it is left out of the linear map (static).
            which = tuple(not isinstance(t, SymbolicZero) for t in tangents)
            linear = [t for t in tangents if not isinstance(t, SymbolicZero)]
            if not linear:
                return results, tuple(jnp.zeros_like(r) for r in results)
            lin = self._linear(mask, attrs, outputs, which)
            return results, tuple(_linear_p.bind(*primals, *results, *linear, lin=lin))

        run.defjvp(jvp, symbolic_zeros=True)
        # Jitted, so that an eager call takes jit's compiled-call cache (one
        # compilation per shape and dtype) instead of tracing the custom JVP
        # and the FFI call again each time; under an outer jit it is inlined.
        return jax.jit(run)

    @functools.lru_cache(maxsize=256)
    def _linear(
        self, mask: tuple[bool, ...], attrs: _Attrs, outputs: tuple[bool, ...], which: tuple[bool, ...]
    ) -> "_Linear":
        return _Linear(self, mask, attrs, outputs, which)

    def _call(
        self, args: Sequence[Any], kwargs: dict[str, Any], outputs: Optional[tuple[bool, ...]] = None
    ) -> tuple[Optional[jax.Array], ...]:
        """Runs the row: the mutated inputs' new values, then one entry per
        output. ``outputs`` (one flag per output, default all) names the
        outputs wanted: an optional one not wanted is not computed and its
        entry is None (a required one is computed anyway)."""
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{self.label}: {exc}") from None
        bound.apply_defaults()
        values = bound.arguments
        arrays = self._arrays(values)
        attrs = tuple((a.name, self._attr_value(a, values[a.name])) for a in self.op.attrs)
        mask = tuple(a is not None for a in arrays)
        out_mask = (True,) * len(self.op.outputs)
        if outputs is not None:
            # A required output, and one the row's gradient rules read, are
            # computed anyway.
            out_mask = tuple(
                bool(wanted) or not arg.optional or o in self.outputs_read
                for o, (wanted, arg) in enumerate(zip(outputs, self.op.outputs))
            )
        present = [a for a in arrays if a is not None]
        # Inside shard_map, inputs that vary over different mesh axes are all
        # cast to vary over the union before the custom VJP (whose transpose
        # then sums the gradient of an invariant input over the mesh).
        varying = frozenset().union(*(_varying_axes(a) for a in present))
        if varying:
            present = [_make_varying(a, varying) for a in present]
        results = self._function(mask, attrs, out_mask)(*present)
        it = iter(results[self.num_mutated :])
        return tuple(results[: self.num_mutated]) + tuple(next(it) if here else None for here in out_mask)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        results = self._call(args, kwargs)
        return results[0] if len(results) == 1 else tuple(results)


# --------------------------------------------------------------------------
# Derivatives: one linear primitive per call, from the table's rules
# --------------------------------------------------------------------------
#
# JAX differentiates in forward mode and gets reverse mode by transposing the
# forward (linear) map. A row's tangent map is therefore a linear primitive,
# ``opforge_linear``, bound by the row's custom JVP on (residuals: the present
# inputs and the results; linear: the tangents of the inputs differentiated):
# evaluating it runs the row's tangent rules (jvp), transposing it runs the
# row's gradient rules (grad). Both call rows of the table through their own
# differentiable functions, so derivatives compose to any order in either mode
# as far as the rows reached declare their rules. A row without tangent rules
# still has reverse mode (its map is only ever transposed there), and one
# without gradient rules still has forward mode.


class _Linear:
    """The tangent map of one call of a row (a static parameter of
    ``opforge_linear``; compared by identity, cached per call signature)."""

    def __init__(
        self, caller: "_Op", mask: tuple[bool, ...], attrs: _Attrs, outputs: tuple[bool, ...], which: tuple[bool, ...]
    ) -> None:
        self.caller = caller
        self.mask = mask
        self.attrs = attrs
        self.outputs = outputs
        self.which = which  # per present input: whether it has a tangent
        self.num_present = len(which)
        self.num_results = caller.num_mutated + sum(outputs)

    def __repr__(self) -> str:
        return f"<tangent map of {self.caller.label}>"

    # -- the pieces of one call --------------------------------------------

    def _split(self, residuals: Sequence[Any]) -> tuple[list[Any], list[Any]]:
        """Inputs (None where absent) and outputs (None where not computed)."""
        present = iter(residuals[: self.num_present])
        inputs = [next(present) if here else None for here in self.mask]
        computed = iter(residuals[self.num_present + self.caller.num_mutated : self.num_present + self.num_results])
        values = [next(computed) if here else None for here in self.outputs]
        return inputs, values

    def _per_input(self, linear: Sequence[Any]) -> list[Any]:
        """Per input of the row: its entry of `linear` (None for an input
        without one: absent, or not differentiated)."""
        it = iter(linear)
        slots = iter(self.which)
        return [(next(it) if next(slots) else None) if here else None for here in self.mask]

    # -- forward: the tangent rules --------------------------------------------

    def forward(self, args: Sequence[Any]) -> list[jax.Array]:
        caller = self.caller
        op = caller.op
        residuals, linear = args[: self.num_present + self.num_results], args[self.num_present + self.num_results :]
        results = residuals[self.num_present :]
        if not op.jvps:
            raise TypeError(
                f"{caller.label} has no forward mode: its table row declares no tangent rule (jvp); "
                "reverse mode (jax.grad, jax.vjp, jax.jacrev) works where it has a gradient rule"
            )
        inputs, values = self._split(residuals)
        tangent_of = self._per_input(linear)

        def value(source: GradSource) -> Optional[jax.Array]:
            if source.kind == "input":
                return inputs[source.index]
            if source.kind == "output":
                return values[source.index]
            if source.kind == "tangent":
                return tangent_of[source.index]
            return None

        def zeros(i: int) -> Optional[jax.Array]:
            return None if inputs[i] is None else jnp.zeros_like(inputs[i])

        rows = RuleRows(caller.namespace.__opforge_table__)
        tangents = run_jvp_rules(op, list(self.outputs), value, caller._rule_call(self.attrs), zeros, rows=rows)
        outs = iter(tangents)
        # The mutated inputs' new values (rows written in place have no
        # tangent rules of their own: zero), then the outputs computed.
        wanted = [None] * caller.num_mutated + [t for t, here in zip(outs, self.outputs) if here]
        return [jnp.zeros_like(r) if t is None else t.astype(r.dtype) for t, r in zip(wanted, results)]

    # -- transpose: the gradient rules ----------------------------------------

    def transpose(self, residuals: Sequence[Any], cotangents: Sequence[Any]) -> list[Optional[jax.Array]]:
        """The cotangent of each linear input (None: zero) from the results' (None: zero)."""
        caller = self.caller
        op = caller.op
        if not op.grads:
            raise TypeError(f"{caller.label} is not differentiable: its table row has no gradient rule")
        inputs, values = self._split(residuals)
        present = [x for x in inputs if x is not None]
        given = iter(cotangents[caller.num_mutated :])
        cotangent_of = [next(given) if here else None for here in self.outputs]
        shapes = tuple(None if x is None else tuple(x.shape) for x in inputs)

        def cotangent(o: int) -> jax.Array:
            if cotangent_of[o] is not None:
                return cotangent_of[o]
            if values[o] is not None:
                return jnp.zeros_like(values[o])
            zeros = jnp.zeros(caller._output_shapes(shapes)[o], present[0].dtype)
            return _make_varying(zeros, frozenset().union(*(_varying_axes(a) for a in present)))

        def value(source: GradSource) -> Optional[jax.Array]:
            if source.kind == "input":
                return inputs[source.index]
            if source.kind == "output":
                return values[source.index]
            if source.kind == "grad":
                return cotangent(source.index)
            return None

        def zero(rule: GradDef) -> bool:
            # A gradient rule is linear in the cotangents it reads: when all
            # of them are zero (symbolic, or of an output not computed), so is
            # its contribution.
            read = [source.index for source in rule.sources if source.kind == "grad"]
            return bool(read) and all(cotangent_of[o] is None for o in read)

        needs = [slot is not None for slot in self._per_input([True] * sum(self.which))]
        rows = RuleRows(caller.namespace.__opforge_table__)
        grads = run_grad_rules(op, needs, value, caller._rule_call(self.attrs), zero, rows)
        return [grads[i] for i, slot in enumerate(needs) if slot]

    def out_avals(self, avals: Sequence[Any]) -> list[Any]:
        # Each tangent has the type of its result.
        return list(avals[self.num_present : self.num_present + self.num_results])


class _BatchedLinear:
    """A linear map under ``jax.vmap``: the map of one element, vmapped (each
    argument batched along its axis, or not), results batched along axis 0."""

    def __init__(self, base: Any, dims: tuple[Optional[int], ...], size: int) -> None:
        self.base = base
        self.dims = dims
        self.size = size
        self.num_present = base.num_present
        self.num_results = base.num_results

    def __repr__(self) -> str:
        return f"<batched {self.base!r}>"

    def forward(self, args: Sequence[Any]) -> list[jax.Array]:
        return jax.vmap(lambda *a: self.base.forward(a), in_axes=self.dims, out_axes=0, axis_size=self.size)(*args)

    def transpose(self, residuals: Sequence[Any], cotangents: Sequence[Any]) -> list[Optional[jax.Array]]:
        count = self.num_present + self.num_results
        res_dims = self.dims[:count]
        lin_dims = self.dims[count:]
        ct_dims = tuple(None if c is None else 0 for c in cotangents)

        def one(res: Sequence[Any], cts: Sequence[Any]) -> list[Any]:
            return self.base.transpose(res, cts)

        grads = jax.vmap(one, in_axes=(list(res_dims), list(ct_dims)), out_axes=0, axis_size=self.size)(
            list(residuals), list(cotangents)
        )
        result: list[Optional[jax.Array]] = []
        for g, d in zip(grads, lin_dims):
            if g is None:
                result.append(None)
            elif d is None:  # an unbatched tangent: its cotangent sums over the batch
                result.append(g.sum(axis=0))
            else:
                result.append(jnp.moveaxis(g, 0, d))
        return result

    def out_avals(self, avals: Sequence[Any]) -> list[Any]:
        inner = [a if d is None else a.update(shape=a.shape[:d] + a.shape[d + 1 :]) for a, d in zip(avals, self.dims)]
        return [a.update(shape=(self.size,) + a.shape) for a in self.base.out_avals(inner)]


_linear_p = Primitive("opforge_linear")
_linear_p.multiple_results = True


def _linear_impl(*args: Any, lin: Any) -> list[jax.Array]:
    return lin.forward(args)


def _linear_abstract_eval(*avals: Any, lin: Any) -> list[Any]:
    return lin.out_avals(avals)


def _linear_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, lin: Any) -> tuple[Any, Any]:
    # Linear in its linear arguments, not in the residuals: the derivative of
    # the evaluation (tangent rules calling differentiable rows) in both.
    tangents = [ad.instantiate_zeros(t) for t in tangents]
    return jax.jvp(lambda *a: lin.forward(a), tuple(primals), tuple(tangents))


def _linear_transpose(cotangents: Sequence[Any], *args: Any, lin: Any) -> list[Optional[jax.Array]]:
    count = lin.num_present + lin.num_results
    residuals = args[:count]
    if any(ad.is_undefined_primal(r) for r in residuals):
        raise TypeError(f"{lin!r}: cannot transpose in its residuals (the row's inputs and results)")
    cts = [None if type(c) is ad.Zero else c for c in cotangents]
    return [None] * count + list(lin.transpose(residuals, cts))


def _linear_batch(args: Sequence[Any], dims: Sequence[Optional[int]], *, lin: Any) -> tuple[Any, list[int]]:
    dims = tuple(dims)
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    batched = _BatchedLinear(lin, dims, size)
    return _linear_p.bind(*args, lin=batched), [0] * lin.num_results


_linear_p.def_impl(_linear_impl)
_linear_p.def_abstract_eval(_linear_abstract_eval)
ad.primitive_jvps[_linear_p] = _linear_jvp
ad.primitive_transposes[_linear_p] = _linear_transpose
batching.primitive_batchers[_linear_p] = _linear_batch
mlir.register_lowering(_linear_p, mlir.lower_fun(_linear_impl, multiple_results=True))


# --------------------------------------------------------------------------
# Namespaces
# --------------------------------------------------------------------------


def _make_function(caller: _Op) -> Callable[..., Any]:
    op = caller.op

    def function(*args: Any, **kwargs: Any) -> Any:
        return caller(*args, **kwargs)

    function.__name__ = function.__qualname__ = op.name
    function.__signature__ = caller.signature  # type: ignore[attr-defined]
    function.__doc__ = docstring(
        op,
        "jax.Array",
        footer=f"XLA FFI target {caller.target!r}; vmap_method {caller.vmap_method!r}.",
        in_place=False,
    )
    function.__module__ = __name__
    return function


class OpNamespace:
    """The ops of one table as JAX functions (attributes named after the rows)."""

    def __init__(self, table: OpTable, prefix: str, build_id: str = "") -> None:
        self.__opforge_table__ = table
        self._ops: dict[str, _Op] = {}
        for op in table.ops:
            self._ops[op.name] = _Op(table, op, f"{prefix}{op.name}", self, build_id)
        for name, caller in self._ops.items():
            setattr(self, name, _make_function(caller))

    def __repr__(self) -> str:
        return f"<opforge.jax ops of table {self.__opforge_table__.name!r}: {', '.join(self._ops)}>"


def load_ops(source: Source, **build_options: Any) -> OpNamespace:
    """Loads a user library exporting ``opforge_op_table`` and registers its ops with XLA.

    ``source`` is a shared library, a ``.c`` (or ``.cu``) file, C source
    text, or a list of ``.c``/``.cu`` files (``OPF_EXPORT_OP_PARTS``); sources are compiled by opforge and cached (``build_options``:
    ``name``, ``cflags``, ``ldflags``; see ``opforge.build``).

    Its ops become functions of the returned namespace, named after the rows,
    each error message starting with ``<table name>.<op name>``. The library
    stays loaded for the rest of the process (XLA keeps its handlers).
    Loading a changed library again registers its rows under new XLA targets
    (``<table>.<op>.<build id>``): the returned namespace runs the new code,
    one loaded before keeps the old.
    """
    table, built = load_user_table(source, **build_options)
    return OpNamespace(table, f"{table.name}.", built.digest)


_builtin = OpNamespace(builtin_table(), "opforge.jax.")
for _name, _caller in _builtin._ops.items():
    globals()[_name] = getattr(_builtin, _name)
    __all__.append(_name)
del _name, _caller
