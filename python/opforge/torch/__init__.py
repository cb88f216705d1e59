"""opforge's ops as PyTorch operators: ``torch.ops.opforge.<op>``.

Importing this module loads ``libopforge_torch.so`` (``torch.ops.load_library``),
whose C code registers every row of the op table with the dispatcher: a schema
and a boxed CPU kernel each. This module then adds, from the same table and
without naming any op:

- a fake (meta) kernel per op, from the row's dtypes, shape checks and shape
  rules, so that ``torch.compile`` and ``torch.export`` trace through the ops;
- an autograd formula per differentiable op, from the row's gradient rules:
  backward runs the gradient ops of the table (themselves registered ops),
  with an ``output_mask`` that leaves out the optional outputs whose inputs
  need no gradient.

A row with optional outputs takes a last keyword ``output_mask: bool[N]``
(one per output, all ``True`` by default, as aten's backward ops): an output
masked ``False`` is not computed and is returned as an empty tensor (shape
``[0]``); only optional outputs may be masked.

The ops are then ``torch.ops.opforge.relu(x)``, ``torch.ops.opforge.dense(x, w,
b, activation="relu")`` ... and, as plain functions, ``opforge.torch.relu`` etc.
(a mutating op such as ``relu_`` returns its mutated input here; the
operator itself returns nothing). ``load_ops(source)`` does the same for a
user's own library of ops (``OPF_EXPORT_OP_TABLE``: a shared library, a
``.c``/``.cu`` file or C source text, compiled and cached by opforge), as
``torch.ops.<its table name>``. Loading a changed library under a table name
already registered replaces the old registration: the new code runs, from
``torch.ops.<name>`` and from operator objects taken before the reload alike.
``opforge.torch.nn`` holds ``torch.nn``-style modules.

The adapter library is the one bundled with opforge when it was built for
the installed torch, else it is compiled from its bundled C source on first
import and cached (``opforge.get_adapter_library``).

Errors are ``RuntimeError`` naming the op, the argument and what was expected.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import torch

import opforge

from .._build import Source, load_user_table
from .._capi import ffi
from .._table import (
    GradDef,
    GradSource,
    OpDef,
    OpTable,
    RuleRows,
    builtin_table,
    check_shapes,
    docstring,
    output_shape,
    run_grad_rules,
    run_jvp_rules,
)

__all__ = ["load_ops", "register_table", "library_path"]  # + one function per built-in op


def library_path() -> str:
    """Path of the adapter library (the bundled one)."""
    return opforge.get_adapter_library("torch")


def _load_adapter() -> ctypes.CDLL:
    path = library_path()
    torch.ops.load_library(path)
    adapter = ctypes.CDLL(path)
    for entry in (adapter.opforge_torch_register, adapter.opforge_torch_unregister):
        entry.argtypes = [ctypes.c_void_p]
        entry.restype = ctypes.c_int
    adapter.opforge_torch_last_error.restype = ctypes.c_char_p
    return adapter


_ADAPTER = _load_adapter()


# --------------------------------------------------------------------------
# Fake kernels (shapes, dtypes, devices) from the table
# --------------------------------------------------------------------------


def _dims(t: torch.Tensor) -> str:
    return "[" + ",".join(str(d) for d in t.shape) + "]"


def _dtype_list(op: OpDef) -> str:
    return " or ".join(op.dtypes)


def _fake_kernel(namespace: str, op: OpDef) -> Callable[..., Any]:
    label = f"{namespace}::{op.name}"
    dtypes = tuple(getattr(torch, name) for name in op.dtypes)
    names = [arg.name for arg in op.inputs]
    num_outputs = len(op.outputs)

    def fail(text: str) -> None:
        raise RuntimeError(f"{label}: {text}")

    def fake(*given: Optional[torch.Tensor], **attrs: Any) -> Any:
        inputs = given + (None,) * (len(names) - len(given))  # the dispatcher drops trailing defaults
        present = [t for t in inputs if t is not None]
        mask = attrs.get("output_mask")
        wanted = [True] * num_outputs if mask is None else [bool(m) for m in mask]
        if len(wanted) != num_outputs:
            fail(f"output_mask has {len(wanted)} values, expected {num_outputs} (one per output)")
        for arg, want in zip(op.outputs, wanted):
            if not want and not arg.optional:
                fail(f"output {arg.name} is not optional: its output_mask value must be True")
        for name, t in zip(names, inputs):
            if t is None:
                continue
            if t.dtype not in dtypes:
                fail(f"{name} has dtype {str(t.dtype).removeprefix('torch.')}; expected {_dtype_list(op)}")
            if t.dtype != present[0].dtype:
                fail(f"dtype mismatch: {name} is {str(t.dtype).removeprefix('torch.')}, expected "
                     f"{str(present[0].dtype).removeprefix('torch.')} like the other arguments")  # fmt: skip
            if t.device != present[0].device:
                fail(f"{name} is on {t.device}, expected {present[0].device} like the other arguments")
        shapes = [None if t is None else tuple(t.shape) for t in inputs]
        check_shapes(op, shapes, fail, lambda ok, message: torch._check(ok, lambda: f"{label}: {message()}"))
        outputs = []
        for rule, want in zip(op.output_shapes, wanted):
            if not want:
                outputs.append(present[0].new_empty([0]))  # not computed
                continue
            shape = output_shape(op, len(outputs), shapes)
            assert shape is not None  # the checks passed and the rule's inputs are present
            outputs.append(present[0].new_empty(shape))
        if not outputs:
            return None
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    fake.__name__ = f"{op.name}_fake"
    return fake


# --------------------------------------------------------------------------
# Autograd from the table's gradient rules
# --------------------------------------------------------------------------


_AFTER_AUTOGRAD = torch._C._after_autograd_keyset
_BELOW_AUTOGRAD = torch._C._AutoDispatchBelowAutograd
_grad_enabled = torch._C.is_grad_enabled
# The autograd kernels record their node as aten's do, by the C apply of an
# autograd.Function without torch.autograd.Function's functorch check: a
# kernel runs inside the dispatcher, where torch.func's transforms have
# already wrapped (grad: wrapper tensors recorded by this same autograd) or
# batched (vmap: the rule registered with torch.library.register_vmap) the
# tensors, so the op composes with torch.func as an aten op does.
_Function = torch.autograd.function._SingleLevelFunction
_fwd_grad_enabled = torch.autograd.forward_ad._set_fwd_grad_enabled
_transforms_active = torch._C._are_functorch_transforms_active
_single_level_allowed = torch._C._functorch.get_single_level_autograd_function_allowed
_allow_single_level = torch._C._functorch.set_single_level_autograd_function_allowed


def _apply(function: Any, *args: Any) -> Any:
    """``function.apply(*args)``, allowed inside torch.func's transforms."""
    if not _transforms_active() or _single_level_allowed():
        return function.apply(*args)
    _allow_single_level(True)
    try:
        return function.apply(*args)
    finally:
        _allow_single_level(False)
_any_requires_grad = torch._C._any_requires_grad
_forward_ad = torch.autograd.forward_ad


def _forward(handle: Any) -> Callable[..., Any]:
    """The op below autograd: its backend kernel (the C one), for the
    dispatch keys of the call."""

    def forward(keyset: Any, attrs: dict[str, Any], *args: Any) -> Any:
        if _transforms_active():
            # Under torch.func, the call goes on to the transforms' lower
            # levels, whose own autograd must record it: an autograd.Function
            # runs forward with (forward and backward) grad mode off, which
            # would hide it from them.
            with torch.enable_grad(), _fwd_grad_enabled(True), _BELOW_AUTOGRAD():
                return handle.redispatch_boxed(keyset & _AFTER_AUTOGRAD, *args, **attrs)
        with _BELOW_AUTOGRAD():
            return handle.redispatch_boxed(keyset & _AFTER_AUTOGRAD, *args, **attrs)

    return forward


def _batches_in_one_call(op: OpDef) -> bool:
    """Whether a batch dim put in front of every input is just more leading
    dims for the row: every input has "..." (or the row is elementwise) and
    every output's shape carries them (like an input, or "..." itself)."""
    if not op.inputs or any(arg.mutated for arg in op.inputs):
        return False
    leading = op.elementwise or all(arg.core_dims is not None for arg in op.inputs)
    kinds = ("like", "batch", "broadcast", "summed") if op.elementwise else ("like", "batch")
    return leading and all(rule.kind in kinds for rule in op.output_shapes)


def _aligns_from_the_end(op: OpDef) -> bool:
    """Whether the row's inputs broadcast together (an elementwise row with a
    broadcast or summed output): their dims align from the end, so a batch
    dim put in front of each needs their own dims padded to one rank first."""
    return op.elementwise and any(rule.broadcasts for rule in op.output_shapes)


def _vmap_rule(namespace: str, op: OpDef) -> Callable[..., Any]:
    """How ``torch.vmap`` runs a row, as ``torch.library.register_vmap`` and an
    autograd.Function's ``vmap`` take it: ``rule(info, in_dims, *inputs,
    **attrs) -> (outputs, out_dims)``. The operator itself is called (its
    autograd and lower transforms apply), once with the batch dim in front
    where the row's "..." allow it, else once per batch element."""
    packet = getattr(getattr(torch.ops, namespace), op.name).default
    one_call = _batches_in_one_call(op)
    aligned = _aligns_from_the_end(op)
    num_outputs = len(op.outputs)

    def masked(attrs: dict[str, Any]) -> list[bool]:
        mask = attrs.get("output_mask")
        return [False] * num_outputs if mask is None else [not m for m in mask]

    def rule(info: Any, in_dims: Sequence[Optional[int]], *args: Any, **attrs: Any) -> Any:
        args = args + (None,) * (len(op.inputs) - len(args))
        in_dims = tuple(in_dims) + (None,) * (len(args) - len(in_dims))
        skipped = masked(attrs)  # outputs not computed: an unbatched [0]
        if one_call:
            moved = [
                None if a is None else a.expand(info.batch_size, *a.shape) if d is None else a.movedim(d, 0)
                for a, d in zip(args, in_dims)
            ]
            shapes = [None if a is None else a.shape[1:] for a in moved]  # each input's own dims
            if aligned:
                rank = max(len(shape) for shape in shapes if shape is not None)
                moved = [None if a is None else a[(slice(None),) + (None,) * (rank + 1 - a.dim())] for a in moved]
            result = packet(*moved, **attrs)
            outputs = result if isinstance(result, tuple) else (result,)
            if aligned:  # an output summed to an input's shape: without the padding
                outputs = tuple(
                    y.reshape(y.shape[0], *shapes[rule.like]) if rule.kind == "summed" and not skipped[j] else y
                    for j, (y, rule) in enumerate(zip(outputs, op.output_shapes))
                )
        else:
            results = []
            for i in range(info.batch_size):
                sliced = [a if a is None or d is None else a.select(d, i) for a, d in zip(args, in_dims)]
                result = packet(*sliced, **attrs)
                results.append(result if isinstance(result, tuple) else (result,))
            if not results:
                # A batch of size 0: the shapes of one element's outputs from
                # the row's shape rules (one call on meta tensors, which runs
                # its fake kernel and checks), with a batch dim of 0.
                sliced = [
                    a if a is None else a.new_empty(a.shape if d is None else a.shape[:d] + a.shape[d + 1 :], device="meta")
                    for a, d in zip(args, in_dims)
                ]
                result = packet(*sliced, **attrs)
                like = next(a for a in args if a is not None)
                shapes = [r.shape for r in (result if isinstance(result, tuple) else (result,))]
                outputs = tuple(like.new_empty(shape if skipped[j] else (0, *shape)) for j, shape in enumerate(shapes))
                dims = tuple(None if skipped[j] else 0 for j in range(num_outputs))
                return (outputs[0], dims[0]) if num_outputs == 1 else (tuple(outputs), dims)
            outputs = tuple(
                results[0][j] if skipped[j] else torch.stack([r[j] for r in results]) for j in range(num_outputs)
            )
        dims = tuple(None if skipped[j] else 0 for j in range(num_outputs))
        if num_outputs == 1:
            return outputs[0], dims[0]
        return tuple(outputs), dims

    rule.__name__ = f"{op.name}_vmap"
    return rule


def _autograd_kernel(namespace: str, op: OpDef, table: OpTable) -> Callable[..., Any]:
    """The Autograd-key kernel of a row that writes no input in place.

    When grad mode is off or no input requires grad, it redispatches straight
    to the backend kernel (the C one): this is the common path, kept to a few
    Python operations. Otherwise it runs an ``autograd.Function`` whose
    backward follows the row's gradient rules and whose ``jvp`` (forward mode:
    ``torch.func.jvp``, ``jacfwd``, ``hessian``, ``torch.autograd.forward_ad``)
    follows its tangent rules, calling the table's rows named by the rules
    (registered operators themselves, so derivatives compose to any order as
    far as those rows declare rules). A row without gradient rules raises on
    backward, one without tangent rules on a forward-mode derivative, naming
    the op (never silent zeros). This does what
    ``torch.library.register_autograd`` does, at about half its per-call cost.
    """
    handle = getattr(getattr(torch.ops, namespace), op.name).default._handle
    num_inputs = len(op.inputs)
    num_outputs = len(op.outputs)
    attr_names = {attr.name for attr in op.attrs}
    # Per row a rule names: its operator, the forward attributes it takes, and
    # whether it has optional outputs (then its output_mask skips unwanted ones).
    rule_ops: dict[str, tuple[Any, tuple[str, ...], Optional[tuple[bool, ...]]]] = {}
    for rule in (*op.grads, *op.jvps):
        rule_op = None if rule.op is None else table.find(rule.op)
        if rule_op is not None:
            optional = tuple(out.optional for out in rule_op.outputs)
            rule_ops[rule_op.name] = (
                getattr(getattr(torch.ops, namespace), rule_op.name).default,
                tuple(a.name for a in rule_op.attrs if a.name in attr_names),
                optional if any(optional) else None,
            )

    def caller(attrs: dict[str, Any]) -> Callable[[str, list[Any], list[bool]], Sequence[Any]]:
        def call(name: str, args: list[Any], wanted: list[bool]) -> Sequence[Any]:
            rule_fn, rule_attrs, optional = rule_ops[name]
            kwargs = {a: attrs[a] for a in rule_attrs if a in attrs}
            if optional is not None:
                kwargs["output_mask"] = [not opt or (j < len(wanted) and wanted[j]) for j, opt in enumerate(optional)]
            result = rule_fn(*args, **kwargs)
            return result if isinstance(result, (tuple, list)) else (result,)

        return call

    def gradients(
        saved: _Saved,
        attrs: dict[str, Any],
        grads: Sequence[Optional[torch.Tensor]],
        needs: Sequence[bool],
    ) -> list[Optional[torch.Tensor]]:
        def value(source: GradSource) -> Optional[torch.Tensor]:
            if source.kind == "input":
                return saved.value(source.index)
            if source.kind == "output":
                return saved.value(num_inputs + source.index)
            if source.kind == "grad":
                g = grads[source.index]
                mask = attrs.get("output_mask")
                if mask is not None and not mask[source.index]:
                    return None  # an output not computed: nothing flows into it
                return saved.zeros(num_inputs + source.index) if g is None else g
            return None

        present = [need and saved.present(i) for i, need in enumerate(needs[:num_inputs])]
        return run_grad_rules(op, present, value, caller(attrs), rows=rows)

    def tangents(
        inputs: Sequence[Optional[torch.Tensor]],
        outputs: Sequence[torch.Tensor],
        attrs: dict[str, Any],
        tangent_of: Sequence[Optional[torch.Tensor]],
    ) -> list[Optional[torch.Tensor]]:
        def value(source: GradSource) -> Optional[torch.Tensor]:
            if source.kind == "input":
                return inputs[source.index]
            if source.kind == "output":
                return outputs[source.index]
            if source.kind == "tangent":
                return tangent_of[source.index]
            return None

        def zeros(i: int) -> Optional[torch.Tensor]:
            x = inputs[i]
            return None if x is None else torch.zeros_like(x)

        mask = attrs.get("output_mask")
        needs = [True] * num_outputs if mask is None else [bool(m) for m in mask]
        if not _transforms_active():
            return run_jvp_rules(op, needs, value, caller(attrs), zeros, rows=rows)
        # torch runs jvp with forward grad mode off. Under nested torch.func
        # forward transforms (jacfwd(jacfwd)) the tangents carry the lower
        # levels' tangents: the rows the rules call pass them on themselves
        # (their kernel redispatches to the lower levels with forward grad on,
        # see _forward), but the rules' own arithmetic (the sum of several
        # rules' contributions) needs forward grad on, or the lower levels'
        # tangents are silently dropped. The rows are still called with it
        # off (on, this level would differentiate its own tangent rules).
        call = caller(attrs)

        def call_at_lower_levels(name: str, args: list[Any], wanted: list[bool]) -> Sequence[Any]:
            with _fwd_grad_enabled(False):
                return call(name, args, wanted)

        with _fwd_grad_enabled(True):
            return run_jvp_rules(op, needs, value, call_at_lower_levels, zeros, rows=rows)

    rows = RuleRows(table)
    backward_uses = _rule_uses(op.grads, table, num_inputs, num_outputs)
    not_differentiable = f"{namespace}::{op.name} is not differentiable: its table row has no gradient rule"
    no_forward_mode = (
        f"{namespace}::{op.name} has no forward mode: its table row declares no tangent rule (jvp); "
        "reverse mode (backward, torch.func.grad, jacrev) works where it has a gradient rule"
    )
    forward = _forward(handle)

    class Function(_Function):
        @staticmethod
        def forward(keyset: Any, attrs: dict[str, Any], *args: Any) -> Any:  # type: ignore[override]
            return forward(keyset, attrs, *args)

        @staticmethod
        def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
            args = inputs[2:]
            outputs = output if isinstance(output, tuple) else (output,)
            padded = (*args, *(None,) * (num_inputs - len(args)), *outputs)
            # Forward mode (jvp runs now) or torch.func: everything, as the
            # tangent rules and the transforms' wrapped tensors may need it.
            # Otherwise only what the gradient rules read: their values, or
            # just the shape of one passed only where the rule's row declares
            # it shape-only ("like: shape"), as torch's own add saves nothing.
            everything = _transforms_active() or _forward_ad._current_level >= 0
            uses = None if everything else backward_uses
            ctx.save_for_backward(*(t if uses is None or uses[k] == "value" else None for k, t in enumerate(padded)))
            if everything:
                ctx.save_for_forward(*padded)
            ctx.layout = _Saved.layout(padded, uses)
            ctx.attrs = inputs[1]

        @staticmethod
        def backward(ctx: Any, *grads: Optional[torch.Tensor]) -> tuple[Optional[torch.Tensor], ...]:  # type: ignore[override]
            if not op.grads:
                raise RuntimeError(not_differentiable)
            saved = _Saved(ctx.saved_tensors, ctx.layout)
            needs = tuple(ctx.needs_input_grad[2:]) + (False,) * num_inputs
            mask = ctx.attrs.get("output_mask")
            if mask is not None:  # an output not computed has no gradient (not a zero of its [0] shape)
                grads = tuple(None if not m else g for m, g in zip(mask, grads))
            result = gradients(saved, ctx.attrs, grads, needs)
            return (None, None, *result[: len(ctx.needs_input_grad) - 2])

        @staticmethod
        def jvp(ctx: Any, _keyset: Any, _attrs: Any, *tangent_of: Optional[torch.Tensor]) -> Any:  # type: ignore[override]
            if not op.jvps:
                raise RuntimeError(no_forward_mode)
            saved = ctx.saved_tensors
            outputs = saved[num_inputs : num_inputs + num_outputs]
            padded = (*tangent_of, *(None,) * (num_inputs - len(tangent_of)))
            result = tangents(saved[:num_inputs], outputs, ctx.attrs, padded)
            # A zero tangent (no rule gives one, or only zero tangents reach
            # it) is a zero tensor; an output not computed keeps its [0] shape.
            out = tuple(torch.zeros_like(o) if t is None else t for t, o in zip(result, outputs))
            return out if num_outputs > 1 else out[0]

    Function.__name__ = f"{namespace}_{op.name}_Function"

    return _function_kernel(handle, Function, f"{op.name}_autograd")


def _rule_uses(
    rules: Sequence[GradDef], table: OpTable, num_inputs: int, num_outputs: int
) -> tuple[Optional[str], ...]:
    """What ``rules`` read of each forward input, then output: "value",
    "shape" (only ever passed where the rule's row declares the argument
    shape-only) or None (nothing)."""
    uses: list[Optional[str]] = [None] * (num_inputs + num_outputs)
    for rule in rules:
        rule_op = None if rule.op is None else table.find(rule.op)
        for j, source in enumerate(rule.sources):
            if source.kind not in ("input", "output"):
                continue
            k = source.index + (num_inputs if source.kind == "output" else 0)
            shape_only = rule_op is not None and j < len(rule_op.inputs) and rule_op.inputs[j].shape_only
            uses[k] = "value" if not shape_only or uses[k] == "value" else "shape"
    return tuple(uses)


class _Saved:
    """A Function's saved inputs and outputs (in that order): those saved,
    and for the others their shape, dtype and device, from which a
    shape-only argument or a zero is made when a rule needs one."""

    SAVED: Any = object()  # the layout's entry for a tensor saved itself (its metadata is its own)

    def __init__(self, tensors: Sequence[Optional[torch.Tensor]], layout: Sequence[Any]) -> None:
        self._tensors = tensors
        self._layout = layout

    @staticmethod
    def layout(padded: Sequence[Optional[torch.Tensor]], uses: Optional[Sequence[Optional[str]]]) -> tuple[Any, ...]:
        """Per tensor: None where absent, SAVED where it is saved (uses None:
        every tensor is), else (shape, dtype, device, use). Only the tensors
        not saved pay for the metadata reads (a few microseconds a call)."""
        if uses is None:
            return tuple(None if t is None else _Saved.SAVED for t in padded)
        return tuple(
            None if t is None else _Saved.SAVED if uses[k] == "value" else (t.shape, t.dtype, t.device, uses[k])
            for k, t in enumerate(padded)
        )

    def present(self, k: int) -> bool:
        return self._layout[k] is not None

    def value(self, k: int) -> Optional[torch.Tensor]:
        """Tensor k as a rule takes it: itself, or zeros broadcast to its
        shape (no memory) where the rule reads only the shape."""
        entry = self._layout[k]
        if entry is None or entry is _Saved.SAVED or entry[3] is None:
            return self._tensors[k]
        shape, dtype, device, _ = entry
        return torch.zeros((), dtype=dtype, device=device).expand(shape)

    def zeros(self, k: int) -> torch.Tensor:
        """Zeros of tensor k's shape (a gradient that did not flow)."""
        entry = self._layout[k]
        t = self._tensors[k]
        if t is not None:
            return torch.zeros_like(t)
        shape, dtype, device, _ = entry
        return torch.zeros(shape, dtype=dtype, device=device)


def _function_kernel(handle: Any, function: Any, name: str) -> Callable[..., Any]:
    """An Autograd-key kernel: through ``function`` (an autograd Function) when
    a derivative may be asked for, else straight to the backend kernel."""

    def kernel(keyset: Any, *args: Any, **attrs: Any) -> Any:
        # Under torch.func, and inside torch.autograd.forward_ad.dual_level()
        # (where an input may carry a tangent), always through the Function:
        # its jvp carries the tangents, or fails rather than drop them.
        if (
            _transforms_active()
            or (_grad_enabled() and _any_requires_grad(*args))
            or _forward_ad._current_level >= 0
        ):
            return _apply(function, keyset, attrs, *args)
        with _BELOW_AUTOGRAD():
            return handle.redispatch_boxed(keyset & _AFTER_AUTOGRAD, *args, **attrs)

    kernel.__name__ = name
    return kernel


def _refuse_grad_kernel(namespace: str, op: OpDef) -> Callable[..., Any]:
    """Autograd kernel of an op that mutates inputs and has no gradient rule:
    it refuses a mutated input that requires grad (with grad mode on), as
    torch refuses an in-place op on a leaf that requires grad; otherwise it
    runs the op below autograd."""
    handle = getattr(getattr(torch.ops, namespace), op.name).default._handle
    mutated = [(i, arg.name) for i, arg in enumerate(op.inputs) if arg.mutated]

    def kernel(keyset: Any, *args: Any, **kwargs: Any) -> Any:
        if torch.is_grad_enabled():
            for i, name in mutated:
                value = args[i] if i < len(args) else kwargs.get(name)
                if isinstance(value, torch.Tensor) and value.requires_grad:
                    raise RuntimeError(
                        f"{namespace}::{op.name}: {name} requires grad; this in-place op has no gradient "
                        "(use the out-of-place op, or run it under torch.no_grad())"
                    )
        with _BELOW_AUTOGRAD():
            return handle.redispatch_boxed(keyset & _AFTER_AUTOGRAD, *args, **kwargs)

    return kernel


# --------------------------------------------------------------------------
# Registration
# --------------------------------------------------------------------------

@dataclass
class _Registration:
    """A table registered with torch, and the Python-side registrations of
    its ops (fake kernel, autograd kernel), one torch Library per op."""

    table: OpTable  # keeps a user library loaded
    libraries: dict[str, torch.library.Library] = field(default_factory=dict)


_REGISTERED: dict[str, _Registration] = {}  # by namespace
# What a reload replaced, kept for the life of the process: the Libraries of
# ops the new table lacks (so that the dispatcher keeps their entries and a
# stale reference to such an op fails cleanly instead of pointing at freed
# memory), and the replaced tables (their libraries stay loaded, as TensorFlow
# and XLA keep theirs: code that captured a row may still run).
_RETIRED: list[Any] = []


def _c_register(table: OpTable) -> None:
    if _ADAPTER.opforge_torch_register(int(ffi.cast("uintptr_t", table.cdata))) != 0:
        message = (_ADAPTER.opforge_torch_last_error() or b"").decode("utf-8", "replace")
        raise RuntimeError(f"opforge.torch: cannot register table {table.name!r}: {message}")


def _python_registrations(namespace: str, table: OpTable) -> dict[str, torch.library.Library]:
    """Fake and autograd kernels of every row, one Library per op."""
    libraries = {}
    for op in table.ops:
        library = torch.library.Library(namespace, "FRAGMENT")
        torch.library.register_fake(f"{namespace}::{op.name}", _fake_kernel(namespace, op), lib=library)
        kernel = None
        if any(arg.mutated for arg in op.inputs):
            kernel = _refuse_grad_kernel(namespace, op)
        else:
            kernel = _autograd_kernel(namespace, op, table)
        if kernel is not None:
            library.impl(op.name, kernel, "Autograd", with_keyset=True)
        if not any(arg.mutated for arg in op.inputs):
            torch.library.register_vmap(f"{namespace}::{op.name}", _vmap_rule(namespace, op), lib=library)
        libraries[op.name] = library
    return libraries


def _forget_packets(namespace: str, names: Sequence[str]) -> None:
    """Drops torch.ops' cached operator objects (they hold the old schemas)."""
    ops_namespace = getattr(torch.ops, namespace)
    for name in names:
        if name in vars(ops_namespace):
            delattr(ops_namespace, name)
        if name in getattr(ops_namespace, "_dir", ()):
            ops_namespace._dir.remove(name)


def _reregister(old: _Registration, table: OpTable) -> None:
    """Replaces a registered table by another of the same name.

    The old schemas and C kernels are unregistered and the new ones
    registered while the old fake (Meta) kernels still hold each operator's
    dispatcher entry, so the entries survive the swap: operator objects
    taken before the reload stay valid and run the new kernels. Only then
    are the old Python registrations dropped and the new ones added."""
    namespace = table.name
    old_pointer = int(ffi.cast("uintptr_t", old.table.cdata))
    if _ADAPTER.opforge_torch_unregister(old_pointer) != 0:
        message = (_ADAPTER.opforge_torch_last_error() or b"").decode("utf-8", "replace")
        raise RuntimeError(f"opforge.torch: cannot unregister the previous table {namespace!r}: {message}")
    try:
        _c_register(table)
    except RuntimeError:
        _c_register(old.table)  # put the previous one back
        raise
    kept = {op.name for op in table.ops}
    for name, library in old.libraries.items():
        if name in kept:
            library._destroy()
        else:
            _RETIRED.append(library)
    _forget_packets(namespace, [op.name for op in old.table.ops])
    _RETIRED.append(old.table)


def register_table(table: OpTable) -> Any:
    """Registers every row of ``table`` with PyTorch and returns
    ``torch.ops.<table.name>``.

    Registering the same table again does nothing. A different table under a
    name that a user table already holds replaces it (a reload; see
    ``_reregister``); opforge's own namespace cannot be replaced."""
    namespace = table.name
    old = _REGISTERED.get(namespace)
    if old is not None:
        if old.table.cdata == table.cdata:
            return getattr(torch.ops, namespace)
        if namespace == _BUILTIN_NAMESPACE:
            raise RuntimeError(
                f"opforge.torch: the table name {namespace!r} is opforge's own; give your table another name"
            )
        _reregister(old, table)
    else:
        _c_register(table)
    _REGISTERED[namespace] = _Registration(table, _python_registrations(namespace, table))
    return getattr(torch.ops, namespace)


def _function(packet: Any, op: OpDef) -> Callable[..., Any]:
    """The Python function of an op: the operator itself, except that a
    mutating op returns its mutated input(s), as ``torch.relu_`` does."""
    mutated = [i for i, arg in enumerate(op.inputs) if arg.mutated]
    if not mutated:
        return packet

    def call(*args: Any, **kwargs: Any) -> Any:
        packet(*args, **kwargs)
        names = [op.inputs[i].name for i in mutated]
        values = [args[i] if i < len(args) else kwargs[name] for i, name in zip(mutated, names)]
        return values[0] if len(values) == 1 else tuple(values)

    call.__name__ = call.__qualname__ = op.name
    call.__doc__ = docstring(op, "torch.Tensor")
    return call


def load_ops(source: Source, **build_options: Any) -> Any:
    """Registers the op table of a user library (``OPF_EXPORT_OP_TABLE``) and
    returns ``torch.ops.<table name>``.

    ``source`` is a shared library, a ``.c`` (or ``.cu``) file, C source
    text, or a list of ``.c``/``.cu`` files (``OPF_EXPORT_OP_PARTS``); sources are compiled by opforge and cached (``build_options``:
    ``name``, ``cflags``, ``ldflags``; see ``opforge.build``). A compile error
    raises ``opforge.BuildError`` with the compiler's messages.

    Loading a changed library whose table has the name of one loaded before
    replaces it (its ops, schemas, fake and autograd kernels): the new code
    runs. Do not reload while another thread runs the table's ops."""
    table, _ = load_user_table(source, **build_options)
    return register_table(table)


_BUILTINS = builtin_table()
_BUILTIN_NAMESPACE = _BUILTINS.name
ops = register_table(_BUILTINS)
for _op in _BUILTINS.ops:
    if _op.name in globals():
        raise ImportError(f"opforge.torch: op name {_op.name!r} clashes with a name of the module")
    globals()[_op.name] = _function(getattr(ops, _op.name), _op)
    __all__.append(_op.name)
del _op

from . import nn  # noqa: E402  (uses the ops above)

__all__ += ["nn", "ops"]
