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
from typing import Any, Callable, Literal, Optional, Sequence, Union

import cffi

from . import _status
from ._capi import ffi, lib

AttrKind = Literal["float", "int", "enum"]
AttrValue = Union[float, int, str]
CheckKind = Literal["rank", "same_shape", "dim_eq", "min_rank", "dim_is", "batch_eq", "broadcast"]
ShapeKind = Literal["none", "like", "dims", "batch", "broadcast", "summed"]
OpKind = Literal["eltwise", "row", "compute"]
GradSourceKind = Literal["none", "input", "output", "grad", "tangent"]

#: numpy-style dtype names of the dtype bits of ``opf_op_def.dtypes``.
DTYPE_BITS: dict[str, int] = {"float32": lib.OPF_DTYPES_F32, "float64": lib.OPF_DTYPES_F64}
#: ``opf_dtype`` code of each dtype name.
DTYPE_CODES: dict[str, int] = {"float32": lib.OPF_F32, "float64": lib.OPF_F64}

_ATTR_KINDS: dict[int, AttrKind] = {lib.OPF_ATTR_FLOAT: "float", lib.OPF_ATTR_INT: "int", lib.OPF_ATTR_ENUM: "enum"}
_CHECK_KINDS: dict[int, CheckKind] = {
    lib.OPF_CHECK_RANK: "rank",
    lib.OPF_CHECK_SAME_SHAPE: "same_shape",
    lib.OPF_CHECK_DIM_EQ: "dim_eq",
    lib.OPF_CHECK_MIN_RANK: "min_rank",
    lib.OPF_CHECK_DIM_IS: "dim_is",
    lib.OPF_CHECK_BATCH_EQ: "batch_eq",
    lib.OPF_CHECK_BROADCAST: "broadcast",
}
_SHAPE_KINDS: dict[int, ShapeKind] = {
    lib.OPF_SHAPE_NONE: "none",
    lib.OPF_SHAPE_LIKE: "like",
    lib.OPF_SHAPE_DIMS: "dims",
    lib.OPF_SHAPE_BATCH: "batch",
    lib.OPF_SHAPE_BROADCAST: "broadcast",
    lib.OPF_SHAPE_SUM_TO: "summed",
}
_GRAD_SOURCE_KINDS: dict[int, GradSourceKind] = {
    lib.OPF_FROM_NONE: "none",
    lib.OPF_FROM_INPUT: "input",
    lib.OPF_FROM_OUTPUT: "output",
    lib.OPF_FROM_GRAD: "grad",
    lib.OPF_FROM_TANGENT: "tangent",
}


@dataclass(frozen=True)
class ArgDef:
    """An input or output of an op."""

    name: str
    doc: str
    optional: bool  # OPF_ARG_OPTIONAL: may be absent
    mutated: bool  # OPF_ARG_MUTATED: an input written in place (and returned)
    core_dims: Optional[int] = None  # with "..." in the signature: the dims after it; None without
    shape_only: bool = False  # OPF_ARG_SHAPE_ONLY: an input whose values the kernel never reads


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
    """Dimension ``dim`` (negative: from the end) of input ``input``; with
    ``input`` -1, the literal size ``dim``."""

    input: int
    dim: int


@dataclass(frozen=True)
class ShapeRule:
    """How an output's shape follows from the input shapes."""

    kind: ShapeKind
    like: int  # "like", "batch", "summed" (y[sum_to(like)]): the input whose shape (or leading dims) the output has
    dims: tuple[DimRef, ...]  # "dims", "batch": one reference per (trailing) output dimension
    drop: int = 0  # "batch": dims of ``like`` left out at its end
    inputs: tuple[int, ...] = ()  # "broadcast": the inputs whose broadcast the output's shape is

    @property
    def broadcasts(self) -> bool:
        """Whether the output is shaped by broadcasting ("broadcast"), or is
        the sum of a broadcast result to an input's shape ("summed"): it is
        then not "the shape of an input" that an adapter may alias."""
        return self.kind in ("broadcast", "summed")


@dataclass(frozen=True)
class GradSource:
    """An argument of a rule's op: a forward input/output, an output's gradient
    (gradient rules) or an input's tangent (tangent rules)."""

    kind: GradSourceKind
    index: int


@dataclass(frozen=True)
class GradDef:
    """Gradient rule: running ``op`` on ``sources`` gives, in its output j, the
    gradient of forward input ``produces[j]`` (-1: unused). ``op`` None means
    identity: the gradient of input ``produces[0]`` is ``sources[0]``.

    A tangent rule (``OpDef.jvps``) has the same form: its output j adds to the
    tangent of forward output ``produces[j]``."""

    op: Optional[str]
    sources: tuple[GradSource, ...]
    produces: tuple[int, ...]


@dataclass(frozen=True)
class OpDef:
    """One row of an op table."""

    name: str
    doc: str
    qualname: str  # "<table>.<name>", how the library's errors name the op
    signature: str  # the declaration's signature ("" for a hand-written row)
    kind: OpKind  # how the row computes: an authored elementwise or row kernel, or a compute function
    elementwise: bool  # OPF_OP_ELEMENTWISE: an output may be exactly an input
    passes_through: bool  # OPF_OP_PASS_THROUGH: output 0 is input 0 where no dim is summed or broadcast
    dtypes: tuple[str, ...]  # supported dtypes, e.g. ("float32", "float64")
    inputs: tuple[ArgDef, ...]
    outputs: tuple[ArgDef, ...]
    output_shapes: tuple[ShapeRule, ...]
    attrs: tuple[AttrDef, ...]
    checks: tuple[Check, ...]
    grads: tuple[GradDef, ...]
    cdata: Any = field(repr=False, compare=False)  # const opf_op_def *
    jvps: tuple[GradDef, ...] = ()  # tangent rules (forward mode)


@dataclass(frozen=True)
class OpTable:
    """A validated op table: the built-in one or a user library's."""

    name: str
    ops: tuple[OpDef, ...]
    cdata: Any = field(repr=False, compare=False)  # const opf_op_table *
    owner: Any = field(default=None, repr=False, compare=False)  # keeps a user library loaded
    _by_name: dict[str, OpDef] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # The rule walkers look a row up per rule of every gradient and tangent call.
        object.__setattr__(self, "_by_name", {op.name: op for op in self.ops})

    def find(self, name: str) -> Optional[OpDef]:
        """The row called ``name``, or None."""
        return self._by_name.get(name)


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
            core_dims=int(d.core_dims) if d.flags & lib.OPF_ARG_BATCHED else None,
            shape_only=bool(d.flags & lib.OPF_ARG_SHAPE_ONLY),
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
    dims = tuple(DimRef(input=d.input, dim=d.dim) for d in r.dims[0 : r.rank]) if kind in ("dims", "batch") else ()
    inputs = tuple(d.input for d in r.dims[0 : r.rank]) if kind == "broadcast" else ()
    return ShapeRule(kind=kind, like=r.like, dims=dims, drop=r.drop, inputs=inputs)


def _grad(g: Any) -> GradDef:
    return GradDef(
        op=_text(g.op) if g.op != ffi.NULL else None,
        sources=tuple(GradSource(kind=_GRAD_SOURCE_KINDS[s.kind], index=s.index) for s in g.sources[0 : g.num_sources]),
        produces=tuple(g.produces[0 : g.num_produces]),
    )


def read_op(row: Any) -> OpDef:
    """Reads one ``const opf_op_def *``."""
    name = _text(row.name)
    kind: OpKind = "eltwise" if row.eltwise != ffi.NULL else "row" if row.row != ffi.NULL else "compute"
    return OpDef(
        name=name,
        doc=_text(row.doc),
        qualname=_text(row.qualname) or name,
        signature=_text(row.signature),
        kind=kind,
        elementwise=bool(row.flags & lib.OPF_OP_ELEMENTWISE),
        passes_through=bool(row.flags & lib.OPF_OP_PASS_THROUGH),
        dtypes=tuple(name for name, bit in DTYPE_BITS.items() if row.dtypes & bit),
        inputs=_args(row.inputs, row.num_inputs),
        outputs=_args(row.outputs, row.num_outputs),
        output_shapes=tuple(_shape_rule(r) for r in row.output_shapes[0 : row.num_outputs]),
        attrs=tuple(_attr(a) for a in row.attrs[0 : row.num_attrs]),
        checks=tuple(_check(c) for c in row.checks[0 : row.num_checks]),
        grads=tuple(_grad(g) for g in row.grads[0 : row.num_grads]),
        jvps=tuple(_grad(g) for g in row.jvps[0 : row.num_jvps]),
        cdata=row,
    )


# --------------------------------------------------------------------------
# Shapes: the row's checks and rules, evaluated in Python (op.c's twins)
# --------------------------------------------------------------------------

Shape = Sequence[Any]  # ints, or a framework's symbolic sizes


def format_dims(shape: Shape) -> str:
    """``[2,3]``, as the library prints shapes."""
    return "[" + ",".join(str(d) for d in shape) + "]"


def check_shapes(
    op: OpDef,
    shapes: Sequence[Optional[Shape]],
    fail: Callable[[str], Any],
    require: Optional[Callable[[Any, Callable[[], str]], None]] = None,
) -> None:
    """Runs the row's shape checks on the inputs' shapes (None: absent) with
    the library's messages. ``fail(message)`` must raise. Dims are compared by
    ``require(condition, message)`` when given (torch passes ``torch._check``,
    which records a condition on symbolic sizes), else with ``fail``."""

    def equal(a: Any, b: Any, message: Callable[[], str]) -> None:
        if require is not None:
            require(a == b, message)
        elif a != b:
            fail(message())

    names = [arg.name for arg in op.inputs]
    pairs = ("same_shape", "dim_eq", "batch_eq", "broadcast")
    for c in op.checks:
        a = shapes[c.a]
        b = shapes[c.b] if c.kind in pairs else None
        if a is None or (c.kind in pairs and b is None):
            continue
        if c.kind == "rank" and len(a) != c.rank:
            fail(f"{names[c.a]} must have rank {c.rank}, got rank {len(a)} ({format_dims(a)})")
        elif c.kind == "min_rank" and len(a) < c.rank:
            fail(f"{names[c.a]} must have rank {c.rank} or more, got rank {len(a)} ({format_dims(a)})")
        elif c.kind == "dim_is":
            if -len(a) <= c.a_dim < len(a):
                equal(a[c.a_dim], c.rank, lambda: f"{names[c.a]} is {format_dims(a)}; dim {c.a_dim % len(a)} must be {c.rank}")
        elif c.kind == "same_shape" and b is not None:
            message = lambda: f"shape mismatch: {names[c.a]} is {format_dims(a)}, {names[c.b]} is {format_dims(b)}"
            if len(a) != len(b):
                fail(message())
            for da, db in zip(a, b):
                equal(da, db, message)
        elif c.kind == "batch_eq" and b is not None:
            lead_a, lead_b = len(a) - c.a_dim, len(b) - c.b_dim
            message = lambda: (
                f"shape mismatch: {names[c.a]} is {format_dims(a)}, {names[c.b]} is {format_dims(b)}; "
                "their leading dims ('...') must be equal"
            )
            if lead_a != lead_b:
                fail(message())
            for da, db in zip(a[:lead_a], b[:lead_b]):
                equal(da, db, message)
        elif c.kind == "broadcast" and b is not None:
            for k in range(1, min(len(a), len(b)) + 1):
                da, db = a[-k], b[-k]
                if da == 1 or db == 1:  # (a symbolic size is taken as not 1, as the frameworks do)
                    continue
                equal(
                    da,
                    db,
                    lambda: f"shape mismatch: {names[c.a]} is {format_dims(a)}, {names[c.b]} is {format_dims(b)}; "
                    f"they must broadcast together (dim -{k}: {da} vs {db})",
                )
        elif c.kind == "dim_eq" and b is not None:
            if not (-len(a) <= c.a_dim < len(a) and -len(b) <= c.b_dim < len(b)):
                continue  # a rank check of the row reports it
            equal(
                a[c.a_dim],
                b[c.b_dim],
                lambda: f"shape mismatch: {names[c.a]} is {format_dims(a)}, {names[c.b]} is {format_dims(b)}; "
                f"dim {c.a_dim % len(a)} of {names[c.a]} must equal dim {c.b_dim % len(b)} of {names[c.b]}",
            )


def broadcast_shapes(shapes: Sequence[Shape]) -> list[Any]:
    """The broadcast of shapes that broadcast together (NumPy's rules, as
    opf_op_infer_shape computes it): aligned from the end, each dim the one
    size other than 1 (1 if all are)."""
    rank = max(len(shape) for shape in shapes)
    result: list[Any] = [1] * rank
    for shape in shapes:
        for d, size in enumerate(shape, rank - len(shape)):
            if not (size == 1):  # a symbolic size is taken as not 1
                result[d] = size
    return result


def output_shape(op: OpDef, output: int, shapes: Sequence[Optional[Shape]]) -> Optional[list[Any]]:
    """The shape of output ``output`` by its rule, once the checks passed;
    None where the rule cannot apply (an absent input it refers to)."""
    rule = op.output_shapes[output]
    if rule.kind in ("like", "summed"):
        like = shapes[rule.like]
        return None if like is None else list(like)
    if rule.kind == "broadcast":
        present = [shapes[i] for i in rule.inputs if shapes[i] is not None]
        return broadcast_shapes(present) if present else None
    if rule.kind not in ("dims", "batch"):
        return None
    shape: list[Any] = []
    if rule.kind == "batch":
        like = shapes[rule.like]
        if like is None or len(like) < rule.drop:
            return None
        shape = list(like[: len(like) - rule.drop])
    for ref in rule.dims:
        if ref.input < 0:
            shape.append(ref.dim)
            continue
        source = shapes[ref.input]
        if source is None or not -len(source) <= ref.dim < len(source):
            return None
        shape.append(source[ref.dim])
    return shape


# --------------------------------------------------------------------------
# Docs
# --------------------------------------------------------------------------


def _indent(text: str) -> str:
    return "\n".join("    " + line if line else "" for line in (text or "(undocumented)").splitlines())


def docstring(
    op: OpDef,
    tensor: str,
    extra_params: Sequence[tuple[str, str, str]] = (),
    footer: str = "",
    in_place: bool = True,
) -> str:
    """numpydoc-style docs of an op from its row, for every adapter: ``tensor``
    names the framework's array type ("ndarray", "torch.Tensor", ...);
    ``extra_params`` are the adapter's own parameters (name, type, doc), such
    as NumPy's ``out``; ``footer`` ends the text. ``in_place`` False: the
    framework's arrays are immutable, an input "written in place" is returned
    with its new value instead (JAX)."""
    dtypes = " or ".join(op.dtypes)
    lines = [op.doc or "(undocumented)", ""]
    if op.signature:
        lines += [f"Signature: ``{op.signature}``", ""]
    lines += ["Parameters", "----------"]
    for arg in op.inputs:
        written = ", modified in place" if in_place else ", its new value returned"
        kind = f"{tensor} of {dtypes}" + (written if arg.mutated else "")
        lines += [f"{arg.name} : {kind}{', optional' if arg.optional else ''}", _indent(arg.doc)]
    for attr in op.attrs:
        kind = "{" + ", ".join(repr(c) for c in attr.choices) + "}" if attr.kind == "enum" else attr.kind
        lines += [f"{attr.name} : {kind}, default {attr.default!r}", _indent(attr.doc)]
    for name, kind, doc in extra_params:
        lines += [f"{name} : {kind}", _indent(doc)]
    lines += ["", "Returns", "-------"]
    for arg in [a for a in op.inputs if a.mutated] + list(op.outputs):
        lines += [f"{arg.name} : {tensor}", _indent(arg.doc)]
    if footer:
        lines += ["", footer]
    return "\n".join(lines)


# --------------------------------------------------------------------------
# Gradients: the row's rules, run with a framework's values
# --------------------------------------------------------------------------


def static_shape(value: Any) -> Optional[tuple[Any, ...]]:
    """A framework value's shape as a tuple, or None where it is not fully
    known (a TensorFlow graph tensor of unknown rank or dims)."""
    shape = getattr(value, "shape", None)
    try:
        dims = tuple(shape) if shape is not None else None
    except (TypeError, ValueError):  # TensorShape of unknown rank
        return None
    return None if dims is None or any(d is None for d in dims) else dims


class RuleRows:
    """What the rule walkers need to know of the rows a table's rules call."""

    def __init__(self, table: OpTable) -> None:
        self._table = table

    def required(self, name: str) -> tuple[bool, ...]:
        """Per input of row ``name``, whether it is required."""
        row = self._table.find(name)
        return () if row is None else tuple(not arg.optional for arg in row.inputs)

    def passes_through(self, name: str, args: Sequence[Any]) -> bool:
        """Whether row ``name`` (``OPF_OP_PASS_THROUGH``) would return
        ``args[0]`` unchanged: its output has the shape of its first input
        and, on a row that sums, of the broadcast of all its inputs, so that
        nothing is summed or broadcast. Shapes not known statically: False
        (the row runs)."""
        row = self._table.find(name)
        if row is None or not row.passes_through or not args or args[0] is None:
            return False
        shapes = [None if a is None else static_shape(a) for a in args]
        if any(s is None for s, a in zip(shapes, args) if a is not None):
            return False
        result = output_shape(row, 0, shapes)
        if result is None or tuple(result) != shapes[0]:
            return False
        present = [s for s in shapes if s is not None]
        return row.output_shapes[0].kind != "summed" or tuple(broadcast_shapes(present)) == shapes[0]


def _absent_where_required(rule: GradDef, args: Sequence[Any], rows: Optional[RuleRows]) -> bool:
    """Whether a rule passes an absent value (None: an absent input or
    tangent, a gradient of an output not computed) where its op requires one:
    rules are linear in such values, so the rule contributes nothing."""
    if rule.op is None or rows is None:
        return False
    return any(a is None and s.kind != "none" and r for a, s, r in zip(args, rule.sources, rows.required(rule.op)))


def _apply(rule: GradDef, args: list[Any], call: Callable[[str, list[Any], list[bool]], Sequence[Any]], wanted: list[bool], rows: Optional[RuleRows]) -> Sequence[Any]:
    """A rule's outputs: its first source for an identity rule or a row
    that passes it through unchanged, else the row's results."""
    if rule.op is None or (rows is not None and rows.passes_through(rule.op, args)):
        return (args[0],)
    return call(rule.op, args, wanted)


def run_grad_rules(
    op: OpDef,
    needs: Sequence[bool],
    value: Callable[[GradSource], Any],
    call: Callable[[str, list[Any], list[bool]], Sequence[Any]],
    skip: Optional[Callable[[GradDef], bool]] = None,
    rows: Optional[RuleRows] = None,
) -> list[Any]:
    """The gradient of each input of ``op`` by its table rules, in a
    framework's values; None where no rule gives one (or none is needed).

    ``needs[i]``: whether input i needs a gradient (and is present).
    ``value(source)``: a rule's argument: a forward input or output, the
    gradient flowing into an output (zeros where there is none), or None.
    ``call(op_name, args, wanted)``: runs the gradient op; ``wanted[j]`` says
    whether its output j is used (an optional output nobody wants need not be
    computed); returns its outputs in order (None for one not computed).
    ``skip(rule)``: True for a rule known to contribute zero (JAX: all the
    cotangents it reads are symbolic zeros). ``rows``: the table's rows
    (:class:`RuleRows`): a rule that would pass an absent optional input of
    ``op`` where its op requires a tensor contributes nothing (absent
    optional inputs are zero, and a rule is linear in such a value), and a
    row that passes its first argument through unchanged
    (``OPF_OP_PASS_THROUGH``, e.g. a sum to the shape it already has) is not
    run. Contributions to one input add up.
    """
    grads: list[Any] = [None] * len(op.inputs)
    for rule in op.grads:
        wanted = [0 <= target < len(needs) and needs[target] for target in rule.produces]
        if not any(wanted) or (skip is not None and skip(rule)):
            continue
        args = [value(source) for source in rule.sources]
        if _absent_where_required(rule, args, rows):
            continue
        produced = _apply(rule, args, call, wanted, rows)
        for j, target in enumerate(rule.produces):
            if wanted[j] and j < len(produced) and produced[j] is not None:
                grads[target] = produced[j] if grads[target] is None else grads[target] + produced[j]
    return grads


def run_jvp_rules(
    op: OpDef,
    needs: Sequence[bool],
    value: Callable[[GradSource], Any],
    call: Callable[[str, list[Any], list[bool]], Sequence[Any]],
    zeros: Callable[[int], Any],
    skip: Optional[Callable[[GradDef], bool]] = None,
    rows: Optional[RuleRows] = None,
) -> list[Any]:
    """The tangent of each output of ``op`` by its tangent rules, in a
    framework's values; None where no rule gives one (a zero tangent).

    ``needs[o]``: whether output o's tangent is wanted. ``value(source)``: a
    rule's argument: a forward input or output, an input's tangent (None for a
    zero one), or None. ``call`` and ``skip`` as in :func:`run_grad_rules`; a
    rule every tangent source of which is zero is skipped (rules are linear in
    the tangents); ``rows`` as in :func:`run_grad_rules`. Contributions to
    one output add up.
    """
    tangents: list[Any] = [None] * len(op.outputs)
    for rule in op.jvps:
        wanted = [0 <= target < len(needs) and needs[target] for target in rule.produces]
        if not any(wanted) or (skip is not None and skip(rule)):
            continue
        args = [value(source) for source in rule.sources]
        if all(a is None for a, s in zip(args, rule.sources) if s.kind == "tangent"):
            continue
        args = [zeros(s.index) if a is None and s.kind == "tangent" else a for a, s in zip(args, rule.sources)]
        if _absent_where_required(rule, args, rows):
            continue
        produced = _apply(rule, args, call, wanted, rows)
        for j, target in enumerate(rule.produces):
            if wanted[j] and j < len(produced) and produced[j] is not None:
                tangents[target] = produced[j] if tangents[target] is None else tangents[target] + produced[j]
    return tangents


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
        # A declared table (OPF_EXPORT_OPS) that does not resolve: the library says why.
        why = ffi.string(lib.opf_last_error()).decode("utf-8", "replace") or "it returned NULL"
        raise ValueError(f"opforge: the op table of {path} is invalid: {why}")
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
