"""An op table read into plain, immutable Python objects.

Every framework adapter starts here: it walks ``OpTable.ops`` and registers
each ``OpDef``. Nothing in this module knows a framework (no NumPy), and
nothing anywhere in the adapters names a particular op.

The objects mirror the C structs of ``opforge.h`` (``opf_op_def`` and
friends); enums become short strings, flags become booleans. Each ``OpDef``
keeps the C row (``cdata``) that ``opf_op_run`` needs, and each ``OpTable``
keeps alive whatever owns that memory (a user library stays loaded as long as
its table object lives).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Literal, Optional, Union

import cffi

from . import _status
from ._capi import ffi, lib

AttrKind = Literal["float", "int", "enum"]
AttrValue = Union[float, int, str]
CheckKind = Literal["rank", "same_shape", "dim_eq"]
ShapeKind = Literal["none", "like", "dims"]
GradSourceKind = Literal["none", "input", "output", "grad"]

#: numpy-style dtype names of the dtype bits of ``opf_op_def.dtypes``.
DTYPE_BITS: dict[str, int] = {"float32": lib.OPF_DTYPES_F32, "float64": lib.OPF_DTYPES_F64}
#: ``opf_dtype`` code of each dtype name.
DTYPE_CODES: dict[str, int] = {"float32": lib.OPF_F32, "float64": lib.OPF_F64}

_ATTR_KINDS: dict[int, AttrKind] = {lib.OPF_ATTR_FLOAT: "float", lib.OPF_ATTR_INT: "int", lib.OPF_ATTR_ENUM: "enum"}
_CHECK_KINDS: dict[int, CheckKind] = {
    lib.OPF_CHECK_RANK: "rank",
    lib.OPF_CHECK_SAME_SHAPE: "same_shape",
    lib.OPF_CHECK_DIM_EQ: "dim_eq",
}
_SHAPE_KINDS: dict[int, ShapeKind] = {
    lib.OPF_SHAPE_NONE: "none",
    lib.OPF_SHAPE_LIKE: "like",
    lib.OPF_SHAPE_DIMS: "dims",
}
_GRAD_SOURCE_KINDS: dict[int, GradSourceKind] = {
    lib.OPF_FROM_NONE: "none",
    lib.OPF_FROM_INPUT: "input",
    lib.OPF_FROM_OUTPUT: "output",
    lib.OPF_FROM_GRAD: "grad",
}


@dataclass(frozen=True)
class ArgDef:
    """An input or output of an op."""

    name: str
    doc: str
    optional: bool  # OPF_ARG_OPTIONAL: may be absent
    mutated: bool  # OPF_ARG_MUTATED: an input written in place (and returned)


@dataclass(frozen=True)
class AttrDef:
    """An attribute (a non-tensor parameter) of an op."""

    name: str
    kind: AttrKind
    default: AttrValue  # for "enum": the name of the default choice
    choices: tuple[str, ...]  # "enum" only
    doc: str


@dataclass(frozen=True)
class Check:
    """A shape check on the inputs (indices are input positions)."""

    kind: CheckKind
    a: int
    a_dim: int
    b: int
    b_dim: int
    rank: int


@dataclass(frozen=True)
class DimRef:
    """Dimension ``dim`` (negative: from the end) of input ``input``."""

    input: int
    dim: int


@dataclass(frozen=True)
class ShapeRule:
    """How an output's shape follows from the input shapes."""

    kind: ShapeKind
    like: int  # "like": the input whose shape the output has
    dims: tuple[DimRef, ...]  # "dims": one reference per output dimension


@dataclass(frozen=True)
class GradSource:
    """An argument of a gradient op: a forward input/output or an output's gradient."""

    kind: GradSourceKind
    index: int


@dataclass(frozen=True)
class GradDef:
    """Gradient rule: running ``op`` on ``sources`` gives, in its output j, the
    gradient of forward input ``produces[j]`` (-1: unused). ``op`` None means
    identity: the gradient of input ``produces[0]`` is ``sources[0]``."""

    op: Optional[str]
    sources: tuple[GradSource, ...]
    produces: tuple[int, ...]


@dataclass(frozen=True)
class OpDef:
    """One row of an op table."""

    name: str
    doc: str
    elementwise: bool  # OPF_OP_ELEMENTWISE: an output may be exactly an input
    dtypes: tuple[str, ...]  # supported dtypes, e.g. ("float32", "float64")
    inputs: tuple[ArgDef, ...]
    outputs: tuple[ArgDef, ...]
    output_shapes: tuple[ShapeRule, ...]
    attrs: tuple[AttrDef, ...]
    checks: tuple[Check, ...]
    grads: tuple[GradDef, ...]
    cdata: Any = field(repr=False, compare=False)  # const opf_op_def *


@dataclass(frozen=True)
class OpTable:
    """A validated op table: the built-in one or a user library's."""

    name: str
    ops: tuple[OpDef, ...]
    cdata: Any = field(repr=False, compare=False)  # const opf_op_table *
    owner: Any = field(default=None, repr=False, compare=False)  # keeps a user library loaded

    def find(self, name: str) -> Optional[OpDef]:
        """The row called ``name``, or None."""
        return next((op for op in self.ops if op.name == name), None)


def _text(ptr: Any) -> str:
    """A C string as str ("" for NULL)."""
    return "" if ptr == ffi.NULL else ffi.string(ptr).decode("utf-8")


def _args(defs: Any, count: int) -> tuple[ArgDef, ...]:
    return tuple(
        ArgDef(
            name=_text(d.name),
            doc=_text(d.doc),
            optional=bool(d.flags & lib.OPF_ARG_OPTIONAL),
            mutated=bool(d.flags & lib.OPF_ARG_MUTATED),
        )
        for d in defs[0:count]
    )


def _attr(d: Any) -> AttrDef:
    kind = _ATTR_KINDS[d.type]
    choices: tuple[str, ...] = ()
    if kind == "enum":
        names = []
        for ptr in d.choices:
            if ptr == ffi.NULL:
                break
            names.append(_text(ptr))
        choices = tuple(names)
    default: AttrValue
    if kind == "float":
        default = float(d.default_value.f)
    elif kind == "int":
        default = int(d.default_value.i)
    else:
        default = choices[d.default_value.i]
    return AttrDef(name=_text(d.name), kind=kind, default=default, choices=choices, doc=_text(d.doc))


def _check(c: Any) -> Check:
    return Check(kind=_CHECK_KINDS[c.kind], a=c.a, a_dim=c.a_dim, b=c.b, b_dim=c.b_dim, rank=c.rank)


def _shape_rule(r: Any) -> ShapeRule:
    kind = _SHAPE_KINDS[r.kind]
    dims = tuple(DimRef(input=d.input, dim=d.dim) for d in r.dims[0 : r.rank]) if kind == "dims" else ()
    return ShapeRule(kind=kind, like=r.like, dims=dims)


def _grad(g: Any) -> GradDef:
    return GradDef(
        op=_text(g.op) if g.op != ffi.NULL else None,
        sources=tuple(GradSource(kind=_GRAD_SOURCE_KINDS[s.kind], index=s.index) for s in g.sources[0 : g.num_sources]),
        produces=tuple(g.produces[0 : g.num_produces]),
    )


def read_op(row: Any) -> OpDef:
    """Reads one ``const opf_op_def *``."""
    return OpDef(
        name=_text(row.name),
        doc=_text(row.doc),
        elementwise=bool(row.flags & lib.OPF_OP_ELEMENTWISE),
        dtypes=tuple(name for name, bit in DTYPE_BITS.items() if row.dtypes & bit),
        inputs=_args(row.inputs, row.num_inputs),
        outputs=_args(row.outputs, row.num_outputs),
        output_shapes=tuple(_shape_rule(r) for r in row.output_shapes[0 : row.num_outputs]),
        attrs=tuple(_attr(a) for a in row.attrs[0 : row.num_attrs]),
        checks=tuple(_check(c) for c in row.checks[0 : row.num_checks]),
        grads=tuple(_grad(g) for g in row.grads[0 : row.num_grads]),
        cdata=row,
    )


def read_table(table: Any, owner: Any = None) -> OpTable:
    """Validates a ``const opf_op_table *`` and reads all its rows.

    Raises the exception of ``opf_op_table_validate``'s status (ValueError for
    an inconsistent table) with the library's message.
    """
    _status.check(lib.opf_op_table_validate(table))
    return OpTable(
        name=_text(table.name),
        ops=tuple(read_op(table.ops[i]) for i in range(table.num_ops)),
        cdata=table,
        owner=owner,
    )


def builtin_table() -> OpTable:
    """The table of opforge's built-in ops."""
    return read_table(lib.opf_builtin_ops())


def load_table(path: Union[str, os.PathLike[str]]) -> OpTable:
    """Loads a user library that exports ``opforge_op_table`` (OPF_EXPORT_OP_TABLE).

    The library is opened with ``ffi.dlopen`` of a small ABI-mode FFI that only
    declares that symbol (``opforge._capi`` is an API-mode module, whose
    ``dlopen`` resolves names to its own compiled functions); the pointer it
    returns is cast to ``opforge._capi``'s ``opf_op_table``. The library stays
    loaded while the returned table lives.
    """
    loader = cffi.FFI()
    loader.cdef("const void *opforge_op_table(void);")
    path = os.fspath(path)
    try:
        handle = loader.dlopen(path)
        getter = handle.opforge_op_table
    except (OSError, AttributeError) as exc:
        raise OSError(f"opforge: cannot load an op table from {path}: {exc}") from exc
    raw = getter()
    if raw == loader.NULL:
        raise ValueError(f"opforge: opforge_op_table() in {path} returned NULL")
    table = ffi.cast("const opf_op_table *", int(loader.cast("uintptr_t", raw)))
    return read_table(table, owner=(loader, handle))


def export_functions(namespace: dict[str, Any], functions: dict[str, Any], module: str) -> list[str]:
    """Adds an adapter's op functions to its module's globals (``namespace``);
    returns their names. ImportError if an op would shadow a name the module
    defines itself."""
    clashes = sorted(set(functions) & set(namespace))
    if clashes:
        raise ImportError(f"{module}: op names clash with the module's own names: {', '.join(clashes)}")
    namespace.update(functions)
    return sorted(functions)
