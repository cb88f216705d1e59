"""opforge ops as TensorFlow ops.

Importing this module loads ``libopforge_tensorflow.so`` with
``tf.load_op_library``; its constructor registers every row of opforge's op
table as a TensorFlow op (``OpfRelu``, ``OpfDense``, ...) with a shape
function and float32/float64 CPU kernels. This module then registers a
gradient for every differentiable op (computed by the opforge gradient ops the
table names) and exposes one Python function per op, generated from the
table::

    import opforge.tensorflow as otf
    y = otf.dense(x, w, b, activation="relu")   # eager or inside tf.function
    otf.lib.opf_add(a=x, b=y)                   # the raw generated op wrappers

Inputs may be tensors, NumPy arrays or Python scalars, as for TF's own ops.
A shape mismatch raises ``tf.errors.InvalidArgumentError`` when the op runs,
or ``ValueError`` when it is detected while a graph is built; an unsupported
dtype is refused when the op is constructed. An optional input is ``None``
when absent. Optional outputs are always computed. Rows that write an input
in place are not registered (TensorFlow tensors are immutable).

``load_ops(source)`` does the same for a user's op library (a ``.so`` exporting
``OPF_EXPORT_OP_TABLE``, or a ``.c`` file or C source text that opforge
compiles and caches). Ops run on the CPU only; ``tf.function(jit_compile=
True)`` cannot compile them (TensorFlow offers no way to add an XLA lowering
from outside its tree): use ``opforge.jax`` for XLA-compiled code.
"""

from __future__ import annotations

import ctypes
import keyword
import os
import re
import struct
import threading
import types
from typing import Any, Callable, Optional, Sequence

import tensorflow as tf

from cffi import FFI

from . import get_adapter_library
from ._build import Source, is_source_text, load_user_table, source_label
from ._table import (
    GradSource,
    OpDef,
    OpTable,
    RuleRows,
    builtin_table,
    docstring,
    export_functions,
    run_grad_rules,
)

__all__ = ["OpNamespace", "lib", "library_path", "load_ops", "tf_op_name"]

#: Prefix of the TensorFlow names of the built-in ops ("my_op" -> "OpfMyOp").
BUILTIN_PREFIX = "Opf"

library_path: str = get_adapter_library("tensorflow")
#: The module ``tf.load_op_library`` made for the built-in ops
#: (``lib.opf_relu(x)``, ``lib.opf_add(a=x, b=y)``, ...).
lib: types.ModuleType = tf.load_op_library(library_path)
_adapter = ctypes.CDLL(library_path)
_adapter.opforge_tf_error.restype = ctypes.c_char_p
_adapter.opforge_tf_register_table.restype = ctypes.c_int
_adapter.opforge_tf_register_table.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_registration_error = _adapter.opforge_tf_error().decode()
_register_lock = threading.Lock()
if _registration_error:
    raise ImportError(f"opforge.tensorflow: registering the built-in ops failed: {_registration_error}")

# Tables whose kernels TensorFlow may call: they must stay loaded.
_live_tables: list[OpTable] = []


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_") if part)


def tf_op_name(op: OpDef, prefix: str = BUILTIN_PREFIX) -> str:
    """The TensorFlow op name of a row: ``prefix`` + CamelCase of its name."""
    return prefix + _camel(op.name)


def _registered(table: OpTable) -> list[OpDef]:
    """The rows the adapter registers: all but those mutating an input."""
    return [op for op in table.ops if not any(arg.mutated for arg in op.inputs)]


def _raw_functions(module: types.ModuleType) -> dict[str, Callable[..., Any]]:
    """The generated wrappers of ``module`` by lower-case op name without '_'."""
    from tensorflow.python.util import tf_decorator

    found = {}
    for attr, value in vars(module).items():
        # snake_case functions only (the module also exports the CamelCase raw ops)
        if callable(value) and attr.islower() and not attr.startswith("_") and not attr.endswith("_eager_fallback"):
            key = attr.replace("_", "").lower()
            if key in found:  # e.g. "my_op" and "myop": cannot tell them apart
                raise ImportError(f"opforge.tensorflow: ops {attr!r} and another differ only in '_'")
            # Call the generated function itself, not its keyword-only export wrapper.
            found[key] = tf_decorator.unwrap(value)[1]
    return found


# --------------------------------------------------------------- Python functions


def _not_for_autograph(function: Callable[..., Any]) -> Callable[..., Any]:
    """Marks ``function`` as one AutoGraph calls as is inside tf.function (it
    has no source file to convert, and only calls an op)."""
    try:
        from tensorflow.python.autograph.impl.api import autograph_artifact
    except ImportError:  # a TensorFlow that moved it: the public wrapper costs a call more
        return tf.autograph.experimental.do_not_convert(function)
    return autograph_artifact(function)


def _make_function(op: OpDef, raw: Callable[..., Any], tf_name: str, module: str) -> Callable[..., Any]:
    """``def <op>(<inputs>, <attrs>=<defaults>, name=None)`` calling ``raw``.

    The function is generated as source so that an eager call costs one
    Python frame over TensorFlow's own wrapper. Optional inputs are ``None``
    when absent and become the 0- or 1-element lists the TF op takes."""
    skips = [f"skip_{arg.name}" for arg in op.outputs if arg.optional]
    names = [arg.name for arg in op.inputs] + [attr.name for attr in op.attrs] + skips
    names += [f"{attr.name}_f64" for attr in op.attrs if attr.kind == "float"]
    bad = [n for n in names if not n.isidentifier() or keyword.iskeyword(n) or n in ("name", "raw")]
    bad += sorted({n for n in names if names.count(n) > 1})
    if bad:
        raise ValueError(f"{tf_name}: argument names {bad} cannot be Python parameters")
    params, passed = [], []
    defaults: dict[str, Any] = {}
    for arg in op.inputs:
        if arg.optional:
            params.append(f"{arg.name}=None")
            passed.append(f"{arg.name}=[] if {arg.name} is None else [{arg.name}]")
        else:
            params.append(arg.name)
            passed.append(f"{arg.name}={arg.name}")
    for attr in op.attrs:
        defaults[f"_default_{attr.name}"] = attr.default
        params.append(f"{attr.name}=_default_{attr.name}")
        passed.append(f"{attr.name}={attr.name}")
        if attr.kind == "float":  # the double's bits beside TensorFlow's 32-bit float attr
            passed.append(f"{attr.name}_f64=_f64_bits({attr.name})")
    for skip in skips:
        params.append(f"{skip}=False")
        passed.append(f"{skip}={skip}")
    source = (
        f"def {op.name}({', '.join(params + ['name=None'])}):\n"
        f"    return raw({', '.join(passed + ['name=name'])})\n"
    )
    namespace: dict[str, Any] = {"raw": raw, "_f64_bits": _f64_bits, **defaults}
    exec(compile(source, f"<opforge.tensorflow {op.name}>", "exec"), namespace)  # noqa: S102 (generated from the table)
    function = namespace[op.name]
    function.__module__ = module
    function.__qualname__ = op.name
    function.__doc__ = _docstring(op, tf_name)
    function.opdef = op
    function.tf_op_name = tf_name
    return _not_for_autograph(function)


def _docstring(op: OpDef, tf_name: str) -> str:
    extra = [(f"skip_{arg.name}", "bool, default False", f"return zeros for {arg.name} instead of computing it")
             for arg in op.outputs if arg.optional]  # fmt: skip
    extra.append(("name", "str, optional", "name of the operation"))
    return docstring(op, "tf.Tensor", extra, f"TensorFlow op ``{tf_name}``.")


# --------------------------------------------------------------- gradients


def _input_starts(op: OpDef, tf_op: tf.Operation) -> tuple[list[int], list[int]]:
    """Number of tensors in each table input of ``tf_op`` and the flat index of its first."""
    counts = [int(tf_op.get_attr(f"num_{arg.name}")) if arg.optional else 1 for arg in op.inputs]
    starts, flat = [], 0
    for count in counts:
        starts.append(flat)
        flat += count
    return counts, starts


def _f64_bits(value: float) -> int:
    """The bits of ``value`` as a double: a float attribute's ``<name>_f64``
    (TensorFlow's ``float`` attrs hold 32 bits; opforge's attributes are doubles).
    A value that is no number gives 0: TensorFlow then refuses the float attr itself."""
    try:
        return int(struct.unpack("<q", struct.pack("<d", float(value)))[0])
    except (TypeError, ValueError):
        return 0


def _attr_value(tf_op: tf.Operation, name: str) -> Any:
    value = tf_op.get_attr(name)
    if isinstance(value, float):  # the exact double, as the kernel reads it (adapters/tensorflow.c)
        exact = struct.unpack("<d", struct.pack("<q", tf_op.get_attr(f"{name}_f64")))[0]
        return exact if ctypes.c_float(exact).value == value else value
    return value.decode() if isinstance(value, bytes) else value


def _make_gradient(
    op: OpDef, functions: dict[str, Callable[..., Any]], table: OpTable
) -> Callable[..., list[Optional[tf.Tensor]]]:
    forward_attrs = {attr.name for attr in op.attrs}

    def gradient(tf_op: tf.Operation, *grads: Optional[tf.Tensor]) -> list[Optional[tf.Tensor]]:
        counts, starts = _input_starts(op, tf_op)
        results: list[Optional[tf.Tensor]] = [None] * len(tf_op.inputs)
        # Inputs whose gradient nobody asked for (set by the eager / tf.function tape).
        skipped = set(getattr(tf_op, "skip_input_indices", None) or ())

        def value(source: GradSource) -> Optional[tf.Tensor]:
            if source.kind == "input":
                return tf_op.inputs[starts[source.index]] if counts[source.index] else None
            if source.kind == "output":
                return tf_op.outputs[source.index]
            if source.kind == "grad":
                g = grads[source.index]
                return tf.zeros_like(tf_op.outputs[source.index]) if g is None else g
            return None

        def call(name: str, args: list[Any], wanted: list[bool]) -> Sequence[Any]:
            grad_op = table.find(name)
            assert grad_op is not None  # opf_op_table_validate checked it
            attrs = {a.name: _attr_value(tf_op, a.name) for a in grad_op.attrs if a.name in forward_attrs}
            for j, output in enumerate(grad_op.outputs):
                if output.optional and not (j < len(wanted) and wanted[j]):
                    attrs[f"skip_{output.name}"] = True
            out = functions[name](*args, **attrs)
            return list(out) if len(grad_op.outputs) > 1 else [out]

        needs = [counts[i] > 0 and starts[i] not in skipped for i in range(len(op.inputs))]
        for i, g in enumerate(run_grad_rules(op, needs, value, call, rows=RuleRows(table))):
            if g is not None:
                results[starts[i]] = g
        return results

    return gradient


def _no_gradient(
    op: OpDef, functions: dict[str, Callable[..., Any]], table: OpTable
) -> Callable[..., list[Optional[tf.Tensor]]]:
    """A row without gradient rules: differentiating through it is an error
    (TensorFlow's eager tape would otherwise return None, a silent zero)."""

    def gradient(tf_op: tf.Operation, *grads: Optional[tf.Tensor]) -> list[Optional[tf.Tensor]]:
        raise LookupError(f"{table.name}.{op.name} (TensorFlow op {tf_op.type}) is not differentiable")

    return gradient


# --------------------------------------------------------------- tables


class OpNamespace(types.SimpleNamespace):
    """The Python functions of a table's ops, as attributes; ``raw`` is the
    module of TensorFlow's generated wrappers, ``__opforge_table__`` the op table."""


def _bind_table(
    table: OpTable, module: types.ModuleType, prefix: str, module_name: str
) -> dict[str, Callable[..., Any]]:
    raw = _raw_functions(module)
    functions: dict[str, Callable[..., Any]] = {}
    ops = _registered(table)
    for op in ops:
        tf_name = tf_op_name(op, prefix)
        wrapper = raw.get(tf_name.lower())
        if wrapper is None:
            raise ImportError(f"opforge.tensorflow: TensorFlow made no wrapper for op {tf_name}")
        functions[op.name] = _make_function(op, wrapper, tf_name, module_name)
    for op in ops:
        maker = _make_gradient if op.grads else _no_gradient
        tf.RegisterGradient(tf_op_name(op, prefix))(maker(op, functions, table))
    _live_tables.append(table)
    return functions


def _wrappers_module(table: OpTable, prefix: str) -> types.ModuleType:
    """Python wrappers for ops registered after load (what tf.load_op_library builds)."""
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.python.framework import _pywrap_python_op_gen
    from tensorflow.python.framework import op_def_registry

    op_list = op_def_pb2.OpList()
    for op in _registered(table):
        op_def = op_def_registry.get(tf_op_name(op, prefix))
        if op_def is None:
            raise RuntimeError(f"opforge.tensorflow: op {tf_op_name(op, prefix)} is not registered")
        op_list.op.append(op_def)
    source = _pywrap_python_op_gen.GetPythonWrappers(op_list.SerializeToString())
    module = types.ModuleType(f"opforge.tensorflow.ops_{prefix}")
    exec(source, module.__dict__)  # noqa: S102 (TensorFlow's own generated wrappers)
    return module


# Tables loaded by load_ops, by prefix: the digest of the library and its namespace.
_loaded: dict[str, tuple[str, OpNamespace]] = {}


def load_ops(source: Source, prefix: Optional[str] = None, **build_options: Any) -> OpNamespace:
    """Registers the op table of a user library (``OPF_EXPORT_OP_TABLE``) with
    TensorFlow and returns its ops as Python functions (with gradients).

    ``source`` is a shared library, a ``.c`` file, C source text, or a list
    of ``.c``/``.cu`` files; sources are compiled by opforge and cached (``build_options``: ``name``,
    ``cflags``, ``ldflags``; see ``opforge.build``).

    Op names are ``prefix`` + CamelCase of the row's name; ``prefix`` defaults
    to the CamelCase of the table's name ("my_ops" -> "MyOpsNegate").
    TensorFlow cannot unregister an op: loading the same library (the same
    bytes, or the same source and flags) again with one prefix returns the
    namespace registered first, and loading a changed one under a prefix
    already used raises RuntimeError (restart the process, or pass another
    prefix). Op names TensorFlow has from elsewhere raise ValueError."""
    table, built = load_user_table(source, **build_options)
    prefix = _camel(table.name) if prefix is None else prefix
    if not re.fullmatch(r"[A-Z][A-Za-z0-9]*", prefix):
        raise ValueError(f"opforge.tensorflow.load_ops: prefix {prefix!r} must be CamelCase letters and digits")
    label = os.fspath(built.path) if is_source_text(source) else source_label(source)
    with _register_lock:  # the adapter's error message is the last registration's
        previous = _loaded.get(prefix)
        if previous is not None:
            digest, namespace = previous
            if digest and digest == built.digest:
                return namespace
            names = ", ".join(tf_op_name(op, prefix) for op in _registered(namespace.__opforge_table__))
            raise RuntimeError(
                f"opforge.tensorflow.load_ops: {label}: TensorFlow already has the ops {names} of an earlier "
                f"build of table {namespace.__opforge_table__.name!r} under prefix {prefix!r}, and TensorFlow cannot "
                "unregister an op: restart the Python process to run the changed code, or load it under new "
                "op names with load_ops(..., prefix='<another CamelCase prefix>')"
            )
        from tensorflow.python.framework import op_def_registry

        taken = [tf_op_name(op, prefix) for op in _registered(table) if op_def_registry.get(tf_op_name(op, prefix))]
        if taken:
            raise ValueError(
                f"opforge.tensorflow.load_ops: TensorFlow ops {', '.join(taken)} already exist; pass another prefix"
            )
        address = int(FFI().cast("uintptr_t", table.cdata))
        if _adapter.opforge_tf_register_table(address, prefix.encode()) < 0:
            raise ValueError(f"opforge.tensorflow.load_ops: {label}: {_adapter.opforge_tf_error().decode()}")
        module = _wrappers_module(table, prefix)
        functions = _bind_table(table, module, prefix, f"opforge.tensorflow.{table.name}")
        namespace = OpNamespace(raw=module, __opforge_table__=table, **functions)
        _loaded[prefix] = (built.digest, namespace)
    return namespace


__all__ += export_functions(globals(), _bind_table(builtin_table(), lib, BUILTIN_PREFIX, __name__), __name__)


def __getattr__(name: str) -> Callable[..., Any]:
    """Only reached for names that are not ops (the ops are module globals)."""
    raise AttributeError(f"module {__name__!r} has no op or attribute {name!r}; its ops are: {', '.join(__all__)}")

