"""Every op of the opforge op table as a NumPy function.

This adapter is table-driven: it never names an op. At import it walks the
built-in table (``opf_builtin_ops()``) and defines one function per row, named
after the row, with a real signature and docstring::

    relu(x, *, out=None)                 scale(x, *, alpha=1.0, out=None)
    dense(x, w, b=None, *, activation='none', out=None)        ...

``load_ops(path)`` does the same for a user's own library of ops.

Calling convention
------------------
- Inputs are anything ``np.asarray`` accepts, of dtype float32 or float64 (as
  far as the row allows); all tensor arguments share one dtype. Python numbers,
  lists and tuples take the dtype of the other tensor arguments (float64 when there is
  none, as ``np.asarray`` would give; an ``out=`` array's dtype counts too).
- Arrays are passed zero-copy: data pointer, shape and element strides go
  straight to C, so transposed, sliced, reversed and broadcast (zero-stride)
  views cost nothing. Only an array whose data or strides are not aligned to
  its element size is copied (outputs: computed into a temporary, then copied).
- Outputs are allocated with the shapes ``opf_op_infer_shape`` gives, or
  written to ``out=`` (an array for one output, a tuple for several; ``None``
  in the tuple allocates that one, ``SKIP`` leaves an optional output
  uncomputed and returns None for it). ``out=`` must be a writable ndarray of
  exactly the right dtype and shape that does not overlap itself (no zero
  strides) nor another output. Overlap with an input is judged by the C
  library: only exact aliasing, for elementwise ops (``relu(x, out=x)``).
- 0-d inputs give 0-d arrays (not NumPy scalars).
- An input the row marks as mutated (``OPF_ARG_MUTATED``) must be a writable
  ndarray; it is modified in place and returned.
- The result is the single output (or mutated input), else a tuple: mutated
  inputs first, then outputs.
- Attributes are keyword-only: float and int attributes take Python numbers,
  enum attributes take one of their choice names (or None for a choice named
  "none").
- Errors: a bad argument raises TypeError/ValueError naming the function and
  the argument; a failed C call raises per ``opforge._status.check``
  (TypeError, ValueError, MemoryError, RuntimeError) with the library's message.
- The C call runs without the GIL.
"""

from __future__ import annotations

import inspect
import numbers
import operator
import os
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from . import _status
from ._capi import ffi, lib
from ._table import DTYPE_CODES, ArgDef, AttrDef, OpDef, OpTable, builtin_table, load_table

__all__ = ["OpNamespace", "SKIP", "load_ops"]  # + one name per built-in op, added below


class _Skip:
    """Type of SKIP."""

    def __repr__(self) -> str:
        return "opforge.numpy.SKIP"


#: In an ``out=`` tuple: do not compute this (optional) output.
SKIP = _Skip()

_Value = Union[float, int]
# Python values that take their dtype from the other tensor arguments.
_WEAK_TYPES = (bool, int, float, list, tuple)


def _is_weak(value: Any) -> bool:
    return isinstance(value, _WEAK_TYPES) and not isinstance(value, np.generic)


def _dims(shape: Sequence[int]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


# --------------------------------------------------------------------------
# Tensor views
# --------------------------------------------------------------------------


_DTYPE_CODES: dict[np.dtype, int] = {np.dtype(name): code for name, code in DTYPE_CODES.items()}
_Layout = tuple[Any, Optional[list[int]]]  # (data pointer cdata, element strides; None: C-contiguous)


def _layout(arr: np.ndarray) -> Optional[_Layout]:
    """Where arr's elements are, for an opf_tensor; None when its data pointer
    or a stride is not a multiple of the element size (arr must be copied)."""
    itemsize = arr.itemsize
    if arr.flags.c_contiguous:
        data = ffi.from_buffer(arr)  # 10x faster than arr.ctypes.data
        return None if int(ffi.cast("uintptr_t", data)) % itemsize else (data, None)
    address = arr.ctypes.data
    if address % itemsize:
        return None
    strides = []
    for extent, stride in zip(arr.shape, arr.strides):
        if stride % itemsize:
            if extent > 1:
                return None
            stride = 0  # a dimension of extent <= 1 is never stepped over
        strides.append(stride // itemsize)
    return ffi.cast("void *", address), strides


def _tensor(arr: np.ndarray, layout: _Layout, keepalive: list[Any]) -> Any:
    """An ``opf_tensor *`` viewing arr; it and the arrays it points to go to keepalive."""
    data, strides = layout
    tensor = ffi.new("opf_tensor *")
    tensor.data = data
    tensor.device.type = lib.OPF_DEVICE_CPU
    tensor.ndim = arr.ndim
    tensor.dtype = _DTYPE_CODES[arr.dtype]
    tensor.shape = shape_c = ffi.new("int64_t[]", arr.shape)
    tensor.strides = strides_c = ffi.NULL if strides is None else ffi.new("int64_t[]", strides)
    keepalive += (data, shape_c, strides_c, tensor)  # a pointer stored in C does not keep its owner alive
    return tensor


def _aligned_copy(arr: np.ndarray) -> np.ndarray:
    """A C-contiguous, aligned copy of arr (the only copy the adapter makes)."""
    return np.array(arr, order="C", copy=True)


def _input_tensor(arr: np.ndarray, keepalive: list[Any]) -> Any:
    """View of an input, copied first if its layout needs it."""
    layout = _layout(arr)
    if layout is None:
        arr = _aligned_copy(arr)
        keepalive.append(arr)
        layout = (ffi.from_buffer(arr), None)
    return _tensor(arr, layout, keepalive)


def _output_tensor(arr: np.ndarray, keepalive: list[Any], copy_back: list[tuple[np.ndarray, np.ndarray]]) -> Any:
    """View of an array written by the op; a misaligned one gets a temporary
    that is copied into it after the call (recorded in copy_back)."""
    layout = _layout(arr)
    if layout is None:
        temp = _aligned_copy(arr)
        copy_back.append((arr, temp))
        keepalive.append(temp)
        arr, layout = temp, (ffi.from_buffer(temp), None)
    return _tensor(arr, layout, keepalive)


# --------------------------------------------------------------------------
# One op
# --------------------------------------------------------------------------


class _Binder:
    """``Signature.bind`` + ``apply_defaults`` for the signatures made here
    (positional-or-keyword, then keyword-only parameters), 4x faster; same
    error messages."""

    def __init__(self, signature: inspect.Signature) -> None:
        params = signature.parameters.values()
        self.positional = tuple(p.name for p in params if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD)
        self.defaults = {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}
        self.required = tuple(p.name for p in params if p.default is inspect.Parameter.empty)
        self.names = frozenset(signature.parameters)

    def __call__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        if len(args) > len(self.positional):
            raise TypeError("too many positional arguments")
        values = dict(self.defaults)
        values.update(zip(self.positional, args))
        for name, value in kwargs.items():
            if name not in self.names:
                raise TypeError(f"got an unexpected keyword argument {name!r}")
            if name in self.positional[: len(args)]:
                raise TypeError(f"multiple values for argument {name!r}")
            values[name] = value
        for name in self.required:
            if name not in values:
                raise TypeError(f"missing a required argument: {name!r}")
        return values


class _OpCaller:
    """Calls one row of a table on NumPy arrays (see the module docstring)."""

    def __init__(self, op: OpDef, label: str) -> None:
        self.op = op
        self.label = label  # "opforge.numpy.relu": prefix of every error message
        self.dtypes = tuple(np.dtype(name) for name in op.dtypes)
        self.signature = _signature(op, label)
        self.bind = _Binder(self.signature)

    # -- errors ------------------------------------------------------------

    def _dtype_list(self) -> str:
        return " or ".join(dt.name for dt in self.dtypes)

    def _type_error(self, message: str) -> TypeError:
        return TypeError(f"{self.label}: {message}")

    def _value_error(self, message: str) -> ValueError:
        return ValueError(f"{self.label}: {message}")

    # -- call --------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            values = self.bind(args, kwargs)
        except TypeError as exc:
            raise self._type_error(str(exc)) from None
        outs = self._out_entries(values.get("out"))
        arrays, dtype = self._inputs(values, outs)
        attrs = self._attrs(values)

        keepalive: list[Any] = []
        copy_back: list[tuple[np.ndarray, np.ndarray]] = []
        in_ptrs = ffi.new("opf_tensor *[]", len(arrays))
        for i, (arg, arr) in enumerate(zip(self.op.inputs, arrays)):
            if arr is None:
                continue
            if arg.mutated:
                in_ptrs[i] = _output_tensor(arr, keepalive, copy_back)
            else:
                in_ptrs[i] = _input_tensor(arr, keepalive)

        max_rank = max([lib.OPF_MAX_RANK] + [arr.ndim for arr in arrays if arr is not None])
        results = self._outputs(outs, in_ptrs, dtype, max_rank)
        out_ptrs = ffi.new("opf_tensor *[]", len(results))
        for j, arr in enumerate(results):
            if arr is not None:
                out_ptrs[j] = _output_tensor(arr, keepalive, copy_back)

        _status.check(lib.opf_op_run(self.op.cdata, in_ptrs, out_ptrs, attrs))
        for target, temp in copy_back:
            np.copyto(target, temp)

        returned = [arr for arg, arr in zip(self.op.inputs, arrays) if arg.mutated] + results
        return returned[0] if len(returned) == 1 else tuple(returned)

    # -- inputs ------------------------------------------------------------

    def _inputs(self, values: dict[str, Any], outs: list[Any]) -> tuple[list[Optional[np.ndarray]], np.dtype]:
        """The input arrays (None where absent) and their common dtype."""
        arrays: list[Any] = []
        typed: list[tuple[str, np.ndarray]] = []  # (name, array) of arguments with a dtype of their own
        for arg in self.op.inputs:
            value = values[arg.name]
            if value is None:
                if not arg.optional:
                    raise self._type_error(f"{arg.name} is required, got None")
            elif arg.mutated:
                value = self._mutated_input(arg, value)
                typed.append((arg.name, value))
            elif not _is_weak(value):
                value = np.asarray(value)
                typed.append((arg.name, value))
            arrays.append(value)
        dtype = self._common_dtype(typed, outs)
        for i, value in enumerate(arrays):
            if value is not None and not isinstance(value, np.ndarray):
                arrays[i] = self._convert(self.op.inputs[i], value, dtype)
        return arrays, dtype

    def _mutated_input(self, arg: ArgDef, value: Any) -> np.ndarray:
        if not isinstance(value, np.ndarray):
            raise self._type_error(
                f"{arg.name} is modified in place and must be a NumPy array, got {type(value).__name__}"
            )
        if not value.flags.writeable:
            raise self._value_error(f"{arg.name} is modified in place but the array is read-only")
        self._check_no_self_overlap(arg.name, value)
        return value

    def _common_dtype(self, typed: list[tuple[str, np.ndarray]], outs: list[Any]) -> np.dtype:
        """The one dtype of all tensor arguments (TypeError if unsupported or mixed)."""
        for name, arr in typed:
            if arr.dtype not in self.dtypes:
                raise self._type_error(f"{name} has dtype {arr.dtype}; expected {self._dtype_list()}")
        if typed:
            first_name, first = typed[0]
            for name, arr in typed[1:]:
                if arr.dtype != first.dtype:
                    raise self._type_error(
                        f"{first_name} has dtype {first.dtype} but {name} has dtype {arr.dtype}; "
                        "all tensor arguments must have the same dtype"
                    )
            return first.dtype
        for out in outs:  # only Python numbers/lists as inputs: an out= array decides
            if isinstance(out, np.ndarray) and out.dtype in self.dtypes:
                return out.dtype
        float64 = np.dtype(np.float64)
        return float64 if float64 in self.dtypes else self.dtypes[0]

    def _convert(self, arg: ArgDef, value: Any, dtype: np.dtype) -> np.ndarray:
        try:
            return np.asarray(value, dtype=dtype)
        except (TypeError, ValueError) as exc:
            raise self._type_error(f"{arg.name} cannot be converted to {dtype}: {exc}") from None

    # -- attributes --------------------------------------------------------

    def _attrs(self, values: dict[str, Any]) -> Any:
        """The ``opf_attr_value[]`` of the attribute arguments, in declared order."""
        attrs = ffi.new("opf_attr_value[]", max(len(self.op.attrs), 1))
        for i, attr in enumerate(self.op.attrs):
            value = self._attr_value(attr, values[attr.name])
            if attr.kind == "float":
                attrs[i].f = value
            else:
                attrs[i].i = value
        return attrs

    def _attr_value(self, attr: AttrDef, value: Any) -> _Value:
        if attr.kind == "float":
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise self._type_error(f"{attr.name} must be a real number, got {value!r}")
            return float(value)
        if attr.kind == "int":
            if isinstance(value, bool):
                raise self._type_error(f"{attr.name} must be an integer, got {value!r}")
            try:
                return operator.index(value)
            except TypeError:
                raise self._type_error(f"{attr.name} must be an integer, got {value!r}") from None
        if value is None and "none" in attr.choices:
            value = "none"
        if isinstance(value, str) and value in attr.choices:
            return attr.choices.index(value)
        choices = ", ".join(repr(c) for c in attr.choices)
        none_note = " (or None for 'none')" if "none" in attr.choices else ""
        raise self._value_error(f"{attr.name} must be one of {choices}{none_note}; got {value!r}")

    # -- outputs -----------------------------------------------------------

    def _out_entries(self, out: Any) -> list[Any]:
        """The ``out=`` argument as one entry (ndarray, None or SKIP) per output."""
        count = len(self.op.outputs)
        if out is None:
            return [None] * count
        if count == 1 and not isinstance(out, tuple):
            out = (out,)
        if not isinstance(out, (tuple, list)) or len(out) != count:
            names = ", ".join(o.name for o in self.op.outputs)
            raise self._type_error(f"out must be a tuple of {count} entries ({names}) or None")
        for arg, entry in zip(self.op.outputs, out):
            if entry is SKIP:
                if not arg.optional:
                    raise self._value_error(f"output {arg.name} is not optional and cannot be skipped")
            elif entry is not None and not isinstance(entry, np.ndarray):
                raise self._type_error(f"out ({arg.name}) must be a NumPy array, got {type(entry).__name__}")
        return list(out)

    def _outputs(self, outs: list[Any], in_ptrs: Any, dtype: np.dtype, max_rank: int) -> list[Optional[np.ndarray]]:
        """The output arrays: checked ``out=`` entries or new arrays (None: skipped)."""
        results: list[Optional[np.ndarray]] = []
        for j, (arg, out) in enumerate(zip(self.op.outputs, outs)):
            if out is SKIP:
                results.append(None)
                continue
            shape = self._infer_shape(in_ptrs, j, max_rank)
            if out is None:
                results.append(np.empty(shape, dtype))
                continue
            self._check_out(arg, out, shape, dtype)
            results.append(out)
        self._check_outputs_disjoint(results)
        return results

    def _infer_shape(self, in_ptrs: Any, output: int, max_rank: int) -> tuple[int, ...]:
        ndim = ffi.new("int32_t *")
        shape = ffi.new("int64_t[]", max_rank)
        _status.check(lib.opf_op_infer_shape(self.op.cdata, in_ptrs, output, ndim, shape))
        return tuple(shape[0 : ndim[0]])

    def _check_out(self, arg: ArgDef, out: np.ndarray, shape: tuple[int, ...], dtype: np.dtype) -> None:
        name = f"out ({arg.name})"
        if out.dtype != dtype:
            raise self._type_error(f"{name} has dtype {out.dtype}; expected {dtype}")
        if out.shape != shape:
            raise self._value_error(f"{name} has shape {_dims(out.shape)}; expected {_dims(shape)}")
        if not out.flags.writeable:
            raise self._value_error(f"{name} is read-only")
        self._check_no_self_overlap(name, out)

    def _check_no_self_overlap(self, name: str, arr: np.ndarray) -> None:
        if arr.size == 0:
            return
        for d, (extent, stride) in enumerate(zip(arr.shape, arr.strides)):
            if stride == 0 and extent > 1:
                raise self._value_error(
                    f"{name} is a broadcast view (stride 0 in dimension {d}); an array written by an op "
                    "must not overlap itself"
                )

    def _check_outputs_disjoint(self, results: list[Optional[np.ndarray]]) -> None:
        present = [(arg.name, arr) for arg, arr in zip(self.op.outputs, results) if arr is not None]
        for i, (name_a, a) in enumerate(present):
            for name_b, b in present[i + 1 :]:
                if np.may_share_memory(a, b):
                    raise self._value_error(f"outputs {name_a} and {name_b} overlap in memory")


# --------------------------------------------------------------------------
# Signatures and docstrings
# --------------------------------------------------------------------------

_ATTR_ANNOTATIONS = {"float": "float", "int": "int", "enum": "str"}


def _signature(op: OpDef, label: str) -> inspect.Signature:
    """Inputs positional-or-keyword (optional ones default to None when no
    required input follows), attributes keyword-only with the table's defaults,
    then ``out=None`` when the op has outputs."""
    P = inspect.Parameter
    try:
        inputs: list[inspect.Parameter] = []
        trailing_optional = True
        for arg in reversed(op.inputs):
            trailing_optional = trailing_optional and arg.optional
            annotation = "np.ndarray" if arg.mutated else "ArrayLike | None" if arg.optional else "ArrayLike"
            default = None if trailing_optional else P.empty
            inputs.insert(0, P(arg.name, P.POSITIONAL_OR_KEYWORD, default=default, annotation=annotation))
        attrs = [P(a.name, P.KEYWORD_ONLY, default=a.default, annotation=_ATTR_ANNOTATIONS[a.kind]) for a in op.attrs]
        out = [P("out", P.KEYWORD_ONLY, default=None, annotation="np.ndarray | tuple | None")] if op.outputs else []
        return inspect.Signature(inputs + attrs + out)
    except ValueError as exc:  # duplicate names, a Python keyword as a name, ...
        raise ValueError(f"{label}: the op's arguments cannot form a Python signature: {exc}") from None


def _indent(text: str) -> str:
    return "\n".join("    " + line if line else "" for line in (text or "(undocumented)").splitlines())


def _docstring(op: OpDef) -> str:
    """numpydoc-style docs from the row's docs (help() shows the signature itself)."""
    dtypes = " or ".join(op.dtypes)
    lines = [op.doc or "(undocumented)", "", "Parameters", "----------"]
    for arg in op.inputs:
        kind = f"ndarray of {dtypes}, modified in place" if arg.mutated else f"array_like of {dtypes}"
        lines += [f"{arg.name} : {kind}{', optional' if arg.optional else ''}", _indent(arg.doc)]
    for attr in op.attrs:
        if attr.kind == "enum":
            kind = "{" + ", ".join(repr(c) for c in attr.choices) + "}"
        else:
            kind = attr.kind
        lines += [f"{attr.name} : {kind}, default {attr.default!r}", _indent(attr.doc)]
    if op.outputs:
        names = ", ".join(o.name for o in op.outputs)
        what = "an array" if len(op.outputs) == 1 else f"a tuple of arrays ({names}); None allocates, SKIP omits an optional one"
        lines += ["out : ndarray or tuple, optional", _indent(f"Where to write the result: {what}.")]
    lines += ["", "Returns", "-------"]
    for arg in [a for a in op.inputs if a.mutated] + list(op.outputs):
        lines += [f"{arg.name} : ndarray", _indent(arg.doc)]
    return "\n".join(lines)


def _make_function(op: OpDef, label: str, module: str) -> Callable[..., Any]:
    """A Python function calling the row ``op``, with its signature and docs."""
    caller = _OpCaller(op, label)

    def op_function(*args: Any, **kwargs: Any) -> Any:
        return caller(*args, **kwargs)

    op_function.__name__ = op_function.__qualname__ = op.name
    op_function.__module__ = module
    op_function.__signature__ = caller.signature  # type: ignore[attr-defined]
    op_function.__doc__ = _docstring(op)
    op_function.opdef = op  # type: ignore[attr-defined]
    return op_function


def make_functions(table: OpTable, label: str) -> dict[str, Callable[..., Any]]:
    """One function per row of table, by op name; error messages start with label.op."""
    return {op.name: _make_function(op, f"{label}.{op.name}", __name__) for op in table.ops}


# --------------------------------------------------------------------------
# Namespaces
# --------------------------------------------------------------------------


class OpNamespace:
    """The NumPy functions of one op table, as attributes named after the ops.

    ``__opforge_table__`` is the table they come from (an opforge._table.OpTable);
    keeping the namespace alive keeps a user library loaded.
    """

    def __init__(self, table: OpTable, label: str) -> None:
        self.__dict__.update(make_functions(table, label))
        self.__opforge_table__ = table

    def __repr__(self) -> str:
        table = self.__opforge_table__
        return f"<opforge.numpy ops of table {table.name!r}: {', '.join(op.name for op in table.ops)}>"

    def __getattr__(self, name: str) -> Callable[..., Any]:  # only for names that are not ops
        table = self.__dict__.get("__opforge_table__")
        ops = ", ".join(op.name for op in table.ops) if table else ""
        raise AttributeError(f"no op {name!r} in table {table.name if table else '?'!r}; it has: {ops}")


def load_ops(path: Union[str, os.PathLike[str]]) -> OpNamespace:
    """Loads a shared library exporting an op table (``OPF_EXPORT_OP_TABLE``),
    validates it (``opf_op_table_validate``) and returns its ops as NumPy
    functions. Error messages name them ``<table name>.<op>``."""
    table = load_table(path)
    return OpNamespace(table, table.name)


def _export_builtins() -> list[str]:
    functions = make_functions(builtin_table(), __name__)
    clashes = sorted(set(functions) & set(globals()))
    if clashes:
        raise ImportError(f"{__name__}: op names clash with the module's own names: {', '.join(clashes)}")
    globals().update(functions)
    return sorted(functions)


__all__ += _export_builtins()


def __getattr__(name: str) -> Callable[..., Any]:
    """Only reached for names that are not ops (the ops are module globals);
    typed so that static checkers accept ``opforge.numpy.<op>``."""
    ops = ", ".join(sorted(set(__all__) - {"OpNamespace", "SKIP", "load_ops"}))
    raise AttributeError(f"module {__name__!r} has no op or attribute {name!r}; its ops are: {ops}")
