"""Every op of the opforge op table as a NumPy function.

This adapter is table-driven: it never names an op. At import it walks the
built-in table (``opf_builtin_ops()``) and defines one function per row, named
after the row, with a real signature and docstring::

    relu(x, *, out=None)                 scale(x, *, alpha=1.0, out=None)
    dense(x, w, b=None, *, activation='none', out=None)        ...

``load_ops(source)`` does the same for a user's own library of ops (a shared
library, or a ``.c`` file or C source text that opforge compiles and caches).

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

Per-call cost
-------------
A call costs a few microseconds over the kernel itself. Everything static
about a row (argument kinds, attribute encoders, shape rules) is worked out at
import, and the C structs a call passes (``opf_tensor`` views, pointer arrays,
attribute values) are allocated once per op and reused (``_Views``). The
common call (inputs by position, NumPy arrays of one supported dtype that need
no copy, ``out=`` arrays or None) takes a direct path that leaves every check
the library makes to ``opf_op_run``; only when that fails does the adapter
redo its own checks, so errors read the same on every path. Anything else
(Python numbers and lists, keyword inputs, misaligned arrays, ...) goes
through the generic path, which binds and checks every argument in Python.
"""

from __future__ import annotations

import inspect
import numbers
import operator
from typing import Any, Callable, NoReturn, Optional, Sequence, Union

import numpy as np

from . import _status, _table
from ._build import Source, load_user_table
from ._capi import ffi, lib
from ._table import DTYPE_CODES, ArgDef, AttrDef, OpDef, OpTable, builtin_table, export_functions

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

_MAX_RANK: int = lib.OPF_MAX_RANK
_NULL = ffi.NULL
_from_buffer = ffi.from_buffer
_DTYPE_CODES: dict[np.dtype, int] = {np.dtype(name): code for name, code in DTYPE_CODES.items()}
# Dtypes whose NumPy ALIGNED flag says exactly what the library requires: data
# pointer and strides (of dimensions of extent > 1) multiples of the element
# size. True of float32 and float64 on 64-bit ABIs; other dtypes take the
# explicit test in _needs_copy, and never the direct path.
_ALIGNED_FLAG_SUFFICES = frozenset(dt for dt in _DTYPE_CODES if dt.alignment % dt.itemsize == 0)
_ORIGIN = tuple((0,) * n + (Ellipsis,) for n in range(_MAX_RANK + 1))  # see _origin


def _origin(arr: np.ndarray) -> np.ndarray:
    """Element [0, ..., 0] of arr as a 0-d view: a C-contiguous array whose
    buffer starts at arr's data pointer (arr must not be empty)."""
    ndim = arr.ndim
    return arr[_ORIGIN[ndim] if ndim <= _MAX_RANK else (0,) * ndim + (Ellipsis,)]


def _needs_copy(arr: np.ndarray) -> bool:
    """True when arr's data pointer, or its stride in a dimension of extent > 1,
    is not a multiple of its element size (the library cannot use it in place)."""
    if arr.dtype in _ALIGNED_FLAG_SUFFICES:
        return not arr.flags.aligned
    itemsize = arr.itemsize
    if arr.size == 0:
        return False
    if arr.ctypes.data % itemsize:
        return True
    return any(stride % itemsize for extent, stride in zip(arr.shape, arr.strides) if extent > 1)


def _aligned_copy(arr: np.ndarray) -> np.ndarray:
    """A C-contiguous, aligned copy of arr (the only copy the adapter makes)."""
    return np.array(arr, order="C", copy=True)


def _usable(arr: np.ndarray, written: bool, copy_back: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """arr, or an aligned copy of it if the library cannot use it in place; the
    copy of an array the op writes is recorded in copy_back, to be copied into
    arr after the call."""
    if not _needs_copy(arr):
        return arr
    temp = _aligned_copy(arr)
    if written:
        copy_back.append((arr, temp))
    return temp


class _Slot:
    """One ``opf_tensor`` of a _Views, with room for OPF_MAX_RANK dims and
    strides, and the layout it holds (to write only what changed)."""

    __slots__ = ("tensor", "shape", "strides", "layout")

    def __init__(self, tensor: Any, dims: Any) -> None:
        self.tensor = tensor  # an opf_tensor in a _Views' memory
        self.shape = dims  # int64_t[OPF_MAX_RANK] the tensor's shape points to
        self.strides = dims + _MAX_RANK  # int64_t[OPF_MAX_RANK] for its strides
        #: (shape, element strides or None for C-contiguous, dtype code) in the tensor
        self.layout: Optional[tuple[Any, ...]] = None
        tensor.device.type = lib.OPF_DEVICE_CPU
        tensor.shape = dims

    def set_layout(self, ndim: int, layout: tuple[Any, ...]) -> None:
        """Writes rank, dtype, shape and strides of a tensor of this layout."""
        self.layout = None  # (if interrupted, the views are dropped: see _Views)
        tensor = self.tensor
        tensor.ndim = ndim
        tensor.dtype = layout[2]
        if ndim > _MAX_RANK:  # the library rejects this rank before reading dims or strides
            tensor.strides = _NULL
            return
        self.shape[0:ndim] = layout[0]
        if layout[1] is None:
            tensor.strides = _NULL
        else:
            self.strides[0:ndim] = layout[1]
            tensor.strides = self.strides
        self.layout = layout


class _Views:
    """The C memory of one call of an op: an ``opf_tensor`` per input and
    output, the pointer arrays and the attribute values ``opf_op_run`` takes.

    Allocated once and reused: a call takes one from its op's free list and
    puts it back when ``opf_op_run`` has returned, so concurrent calls (the C
    call runs without the GIL) and re-entrant ones (a ``__del__`` calling an
    op mid-call) never share one. A call that raises before putting it back
    drops it (it may be half written).
    """

    __slots__ = ("inputs", "outputs", "attrs", "_slots", "_nullable", "_defaults", "_memory")

    def __init__(self, op: OpDef) -> None:
        num_inputs = len(op.inputs)
        args = op.inputs + op.outputs
        count = max(len(args), 1)
        tensors = ffi.new("opf_tensor[]", count)  # zeroed: byte_offset 0, device id 0
        dims = ffi.new("int64_t[]", count * 2 * _MAX_RANK)
        self._slots = [_Slot(tensors[i], dims + 2 * _MAX_RANK * i) for i in range(len(args))]
        pointers = [tensors + i for i in range(len(args))]
        self.inputs = ffi.new("opf_tensor *[]", pointers[:num_inputs] or [_NULL])
        self.outputs = ffi.new("opf_tensor *[]", pointers[num_inputs:] or [_NULL])
        #: (index, pointer array, position in it, tensor pointer) of each optional argument
        self._nullable = [
            (i, self.inputs, i, pointers[i]) if i < num_inputs else (i, self.outputs, i - num_inputs, pointers[i])
            for i, arg in enumerate(args)
            if arg.optional
        ]
        self.attrs = ffi.new("opf_attr_value[]", max(len(op.attrs), 1))
        self._defaults = ffi.new("opf_attr_value[]", max(len(op.attrs), 1))
        lib.opf_op_default_attrs(op.cdata, self._defaults)
        self._memory = (tensors, dims)  # what the slots and pointers point into

    def set(self, arrays: Sequence[Optional[np.ndarray]], code: int) -> list[Any]:
        """Points the tensors at arrays, the inputs then the outputs (None: a
        NULL pointer), arrays of dtype code `code` that need no copy. Returns
        what holds their buffers: keep it until the C call returns."""
        for index, pointers, position, pointer in self._nullable:
            pointers[position] = _NULL if arrays[index] is None else pointer
        keep = []
        for arr, slot in zip(arrays, self._slots):
            if arr is None:
                continue
            if arr.flags.c_contiguous:
                data = _from_buffer(arr)
                layout: tuple[Any, ...] = (arr.shape, None, code)
            else:
                data = _from_buffer(_origin(arr))
                itemsize = arr.itemsize
                # A stride of a dimension of extent 1 need not be a multiple of
                # the element size; it is never stepped over.
                strides = tuple(s // itemsize if s % itemsize == 0 else 0 for s in arr.strides)
                layout = (arr.shape, strides, code)
            slot.tensor.data = data
            keep.append(data)
            if layout != slot.layout:
                slot.set_layout(arr.ndim, layout)
        return keep

    def set_attrs(self, values: Sequence[tuple[int, bool, _Value]]) -> Any:
        """The attribute array: the table's defaults, then each (index, is a
        float, value) of values."""
        attrs = self.attrs
        ffi.memmove(attrs, self._defaults, ffi.sizeof(attrs))
        for index, is_float, value in values:
            if is_float:
                attrs[index].f = value
            else:
                attrs[index].i = value
        return attrs


def _library_error(status: int) -> Exception:
    """The exception ``_status.check`` raises for a failed status (built now,
    while the calling thread's last error message is this call's)."""
    try:
        _status.check(status)
    except Exception as exc:  # noqa: BLE001 - every status maps to some exception
        return exc
    raise AssertionError(f"status {status} is not a failure")


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


# Kinds of inputs, for the direct path.
_REQUIRED, _OPTIONAL, _MUTATED = "required", "optional", "mutated"
_ndarray = np.ndarray
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_FLOAT_INT_LIMIT = 2**1023  # ints below this in magnitude convert to float


class _FastAttr:
    """How the direct path takes one attribute: the values of exactly the Python
    types below (anything else goes through the generic path's checks)."""

    __slots__ = ("index", "is_float", "choices")

    def __init__(self, index: int, attr: AttrDef) -> None:
        self.index = index
        self.is_float = attr.kind == "float"
        #: enum: choice index by name, and by None when a choice is named "none"
        self.choices: Optional[dict[Optional[str], int]] = None
        if attr.kind == "enum":
            self.choices = {name: i for i, name in enumerate(attr.choices)}
            if "none" in self.choices:
                self.choices[None] = self.choices["none"]

    def encode(self, value: Any) -> Optional[_Value]:
        """The value to store (what ``_attr_value`` gives), or None to take
        the generic path (which also reports bad values, in its order)."""
        kind = type(value)
        if self.choices is not None:
            return self.choices.get(value) if kind is str or value is None else None
        if kind is int:
            if self.is_float:
                return float(value) if -_FLOAT_INT_LIMIT < value < _FLOAT_INT_LIMIT else None
            return value if _INT64_MIN <= value <= _INT64_MAX else None
        return value if kind is float and self.is_float else None


class _OpCaller:
    """Calls one row of a table on NumPy arrays (see the module docstring): the
    generic path, and what the direct path (``_direct_function``) shares with it."""

    def __init__(self, op: OpDef, label: str) -> None:
        self.op = op
        self.label = label  # "opforge.numpy.relu": prefix of every error message
        self.dtypes = tuple(np.dtype(name) for name in op.dtypes)
        self.signature = _signature(op, label)
        self.bind = _Binder(self.signature)
        self.free_views: list[_Views] = []  # see _Views
        self.min_args = sum(name not in self.bind.defaults for name in self.bind.positional)
        self.input_kinds = tuple(_MUTATED if a.mutated else _OPTIONAL if a.optional else _REQUIRED for a in op.inputs)
        #: Nones for the inputs a call of n positional arguments leaves out, by n
        self.absent = [(None,) * (len(op.inputs) - n) for n in range(len(op.inputs) + 1)]

    # -- errors ------------------------------------------------------------

    def _dtype_list(self) -> str:
        return " or ".join(dt.name for dt in self.dtypes)

    def _type_error(self, message: str) -> TypeError:
        return TypeError(f"{self.label}: {message}")

    def _value_error(self, message: str) -> ValueError:
        return ValueError(f"{self.label}: {message}")

    # -- call --------------------------------------------------------------

    def take_views(self) -> _Views:
        try:
            return self.free_views.pop()
        except IndexError:
            return _Views(self.op)

    def output_shape(self, output: int, arrays: Sequence[Optional[np.ndarray]]) -> Optional[tuple[int, ...]]:
        """Shape of an output by the row's rule, as ``opf_op_infer_shape``
        gives it once the shape checks pass; None if the rule cannot apply."""
        shape = _table.output_shape(self.op, output, [None if a is None else a.shape for a in arrays])
        return None if shape is None else tuple(shape)

    def raise_failure(self, status: int, args: tuple[Any, ...], kwargs: dict[str, Any]) -> NoReturn:
        """``opf_op_run`` rejected a call of the direct path. The generic path's
        Python checks of the same arguments give the error the adapter has
        always given (naming ``out (y)``, say, where the library says ``y``):
        raise that if they find one, else the library's error."""
        error = _library_error(status)
        self.call_generic(args, kwargs, run=False)
        raise error

    def returned(self, tensors: Sequence[Optional[np.ndarray]]) -> Any:
        """The mutated inputs, then the outputs (tensors: inputs then outputs):
        one of them alone, else a tuple."""
        returned = [arr for arr, kind in zip(tensors, self.input_kinds) if kind is _MUTATED]
        returned += tensors[len(self.op.inputs) :]
        return returned[0] if len(returned) == 1 else tuple(returned)

    def call_generic(self, args: tuple[Any, ...], kwargs: dict[str, Any], run: bool = True) -> Any:
        """Any call: binds and checks the arguments in Python, converts Python
        numbers and lists, copies arrays the library cannot use in place, then
        runs the op. With run=False it stops after the checks."""
        try:
            values = self.bind(args, kwargs)
        except TypeError as exc:
            raise self._type_error(str(exc)) from None
        outs = self._out_entries(values.get("out"))
        arrays, dtype = self._inputs(values, outs)
        attrs = [
            (i, attr.kind == "float", self._attr_value(attr, values[attr.name])) for i, attr in enumerate(self.op.attrs)
        ]
        code = _DTYPE_CODES[dtype]

        copy_back: list[tuple[np.ndarray, np.ndarray]] = []
        usable = [
            None if arr is None else _usable(arr, arg.mutated, copy_back) for arr, arg in zip(arrays, self.op.inputs)
        ]
        views = self.take_views()
        keep = views.set(usable + [None] * len(self.op.outputs), code)  # for opf_op_infer_shape
        results = self._outputs(outs, views.inputs, dtype)
        if not run:
            self.free_views.append(views)
            return None
        keep = views.set(usable + [None if arr is None else _usable(arr, True, copy_back) for arr in results], code)
        status = lib.opf_op_run(self.op.cdata, views.inputs, views.outputs, views.set_attrs(attrs))
        del keep
        self.free_views.append(views)
        _status.check(status)
        for target, temp in copy_back:
            np.copyto(target, temp)
        return self.returned(arrays + results)

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

    def _outputs(self, outs: list[Any], in_ptrs: Any, dtype: np.dtype) -> list[Optional[np.ndarray]]:
        """The output arrays: checked ``out=`` entries or new arrays (None: skipped)."""
        results: list[Optional[np.ndarray]] = []
        for j, (arg, out) in enumerate(zip(self.op.outputs, outs)):
            if out is SKIP:
                results.append(None)
                continue
            shape = self._infer_shape(in_ptrs, j)
            if out is None:
                results.append(np.empty(shape, dtype))
                continue
            self._check_out(arg, out, shape, dtype)
            results.append(out)
        self._check_outputs_disjoint(results)
        return results

    def _infer_shape(self, in_ptrs: Any, output: int) -> tuple[int, ...]:
        ndim = ffi.new("int32_t *")
        shape = ffi.new("int64_t[]", _MAX_RANK)  # inputs of a higher rank fail the call
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
                try:  # element by element, as the library decides: interleaved disjoint views pass
                    overlap = np.shares_memory(a, b, max_work=10_000)
                except np.exceptions.TooHardError:
                    continue  # the library decides (and refuses what it cannot tell)
                if overlap:
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


def _docstring(op: OpDef) -> str:
    """numpydoc-style docs from the row's docs (help() shows the signature itself)."""
    extra = []
    if op.outputs:
        names = ", ".join(o.name for o in op.outputs)
        what = "an array" if len(op.outputs) == 1 else f"a tuple of arrays ({names}); None allocates, SKIP omits an optional one"
        extra.append(("out", "ndarray or tuple, optional", f"Where to write the result: {what}."))
    return _table.docstring(op, "ndarray", extra)


def _direct_function(caller: _OpCaller) -> Callable[..., Any]:
    """The function of an op, built around its direct path.

    The common call takes that path: inputs by position, all NumPy arrays of
    one supported dtype that need no copy; attributes of their exact Python
    type; ``out=`` arrays of that dtype (aligned, writable), None or SKIP. It
    leaves every check the library makes to ``opf_op_run``; if that fails,
    ``caller.raise_failure`` finds the error the generic path gives. Any other
    call goes through the generic path, ``caller.call_generic``. The op's
    constants are bound here once, as closure variables.
    """
    op = caller.op
    generic = caller.call_generic
    min_args = caller.min_args
    num_inputs, num_outputs = len(op.inputs), len(op.outputs)
    input_kinds = caller.input_kinds
    optional_outputs = tuple(arg.optional for arg in op.outputs)
    absent = caller.absent
    no_out = (None,) * num_outputs
    returns_last = num_outputs == 1 and _MUTATED not in input_kinds
    fast_attrs = {attr.name: _FastAttr(i, attr) for i, attr in enumerate(op.attrs)}
    fast_codes = {dt: _DTYPE_CODES[dt] for dt in caller.dtypes if dt in _ALIGNED_FLAG_SUFFICES}
    output_shape = caller.output_shape
    free_views = caller.free_views
    run = lib.opf_op_run
    row = op.cdata

    def op_function(*args: Any, **kwargs: Any) -> Any:
        num_args = len(args)
        if not min_args <= num_args <= num_inputs:
            return generic(args, kwargs)
        out = None
        attrs: list[tuple[int, bool, _Value]] = []
        for name, value in kwargs.items():
            if name == "out" and num_outputs:
                out = value
                continue
            fast_attr = fast_attrs.get(name)
            encoded = None if fast_attr is None else fast_attr.encode(value)
            if encoded is None:
                return generic(args, kwargs)
            attrs.append((fast_attr.index, fast_attr.is_float, encoded))  # type: ignore[union-attr]

        # Inputs: arrays of one dtype, aligned; those written in place writable.
        tensors: list[Optional[np.ndarray]] = [*args, *absent[num_args]]  # the inputs, then the outputs
        dtype = None
        for arr, kind in zip(tensors, input_kinds):
            if arr is None:
                if kind is _OPTIONAL:
                    continue
                return generic(args, kwargs)
            if type(arr) is not _ndarray:
                return generic(args, kwargs)
            if dtype is None:
                dtype = arr.dtype
            elif arr.dtype is not dtype and arr.dtype != dtype:
                return generic(args, kwargs)
            flags = arr.flags
            if not flags.aligned or (kind is _MUTATED and not flags.writeable):
                return generic(args, kwargs)
        code = fast_codes.get(dtype)  # type: ignore[arg-type]
        if code is None:
            return generic(args, kwargs)

        # Outputs: out= arrays of that dtype, aligned and writable, or new
        # arrays of the shapes the row's rules give.
        if out is None:
            outs: Sequence[Any] = no_out
        elif isinstance(out, _ndarray) and num_outputs == 1:
            outs = (out,)
        elif type(out) is tuple and len(out) == num_outputs:
            outs = out
        else:
            return generic(args, kwargs)
        for j, entry in enumerate(outs):
            if entry is None:
                shape = output_shape(j, tensors)
                if shape is None:
                    return generic(args, kwargs)
                try:
                    entry = np.empty(shape, dtype)
                except (ValueError, MemoryError):  # the library may reject the inputs first
                    return generic(args, kwargs)
            elif entry is SKIP:
                if not optional_outputs[j]:
                    return generic(args, kwargs)
                entry = None
            elif isinstance(entry, _ndarray):
                flags = entry.flags
                if (entry.dtype is not dtype and entry.dtype != dtype) or not (flags.aligned and flags.writeable):
                    return generic(args, kwargs)
            else:
                return generic(args, kwargs)
            tensors.append(entry)

        try:
            views = free_views.pop()
        except IndexError:
            views = _Views(op)
        keep = views.set(tensors, code)
        status = run(row, views.inputs, views.outputs, views.set_attrs(attrs) if attrs else _NULL)
        del keep  # the buffers of the arrays, held until the op has run
        free_views.append(views)
        if status:
            caller.raise_failure(status, args, kwargs)
        return tensors[-1] if returns_last else caller.returned(tensors)

    return op_function


def _make_function(op: OpDef, label: str, module: str) -> Callable[..., Any]:
    """A Python function calling the row ``op``, with its signature and docs."""
    caller = _OpCaller(op, label)
    op_function = _direct_function(caller)
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


def load_ops(source: Source, **build_options: Any) -> OpNamespace:
    """Loads a library exporting an op table (``OPF_EXPORT_OP_TABLE``),
    validates it (``opf_op_table_validate``) and returns its ops as NumPy
    functions. Error messages name them ``<table name>.<op>``.

    ``source`` is a shared library, a ``.c`` (or ``.cu``) file, C source
    text, or a list of ``.c``/``.cu`` files (``OPF_EXPORT_OP_PARTS``); sources are compiled by opforge and cached (``build_options``:
    ``name``, ``cflags``, ``ldflags``; see ``opforge.build``). Each load of a
    changed source or library gets the new code (a namespace loaded before
    keeps the code it was loaded with)."""
    table, _ = load_user_table(source, **build_options)
    return OpNamespace(table, table.name)


__all__ += export_functions(globals(), make_functions(builtin_table(), __name__), __name__)


def __getattr__(name: str) -> Callable[..., Any]:
    """Only reached for names that are not ops (the ops are module globals);
    typed so that static checkers accept ``opforge.numpy.<op>``."""
    ops = ", ".join(sorted(set(__all__) - {"OpNamespace", "SKIP", "load_ops"}))
    raise AttributeError(f"module {__name__!r} has no op or attribute {name!r}; its ops are: {ops}")
