"""Every row of the table is an operator that passes torch's own validators."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import torch
from samples import samples

import opforge
import opforge.torch as ot
from opforge._table import builtin_table

TABLE = builtin_table()
OPS = [op.name for op in TABLE.ops]
DIFFERENTIABLE = [op.name for op in TABLE.ops if op.grads]
DTYPES = [torch.float32, torch.float64]


def test_every_row_is_an_operator() -> None:
    for op in TABLE.ops:
        packet = getattr(torch.ops.opforge, op.name)
        schema = packet.default._schema
        assert [a.name for a in schema.arguments][: len(op.inputs)] == [a.name for a in op.inputs]
        mask = ["output_mask"] if any(out.optional for out in op.outputs) else []
        assert [a.name for a in schema.arguments if a.kwarg_only] == [a.name for a in op.attrs] + mask
        for arg, spec in zip(schema.arguments, op.inputs):
            assert bool(arg.alias_info and arg.alias_info.is_write) == spec.mutated
        assert len(schema.returns) == len(op.outputs)


def test_schemas() -> None:
    schemas = {op: str(getattr(torch.ops.opforge, op).default._schema) for op in OPS}
    assert schemas["relu_"] == "opforge::relu_(Tensor(a!) x) -> ()"
    assert schemas["dense"] == 'opforge::dense(Tensor x, Tensor w, Tensor? b=None, *, str activation="none") -> Tensor'
    assert schemas["scale"] == "opforge::scale(Tensor x, *, float alpha=1.) -> Tensor"
    assert schemas["dense_grad"] == (
        'opforge::dense_grad(Tensor dy, Tensor x, Tensor w, Tensor? y=None, *, str activation="none", '
        "bool[3] output_mask=[True, True, True]) -> (Tensor, Tensor, Tensor)"
    )


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", OPS)
def test_opcheck(name: str, dtype: torch.dtype) -> None:
    op = getattr(torch.ops.opforge, name).default
    differentiable = name in DIFFERENTIABLE
    for args, kwargs in samples(name, dtype, requires_grad=differentiable):
        result = torch.library.opcheck(op, args, kwargs)
        assert all(v == "SUCCESS" for v in result.values()), result


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_gradcheck(name: str) -> None:
    """Reverse mode, and forward mode (check_forward_ad) where the row declares tangent rules."""
    op = getattr(torch.ops.opforge, name)
    forward = bool(TABLE.find(name).jvps)  # type: ignore[union-attr]
    for args, kwargs in samples(name, torch.float64, requires_grad=True):
        assert torch.autograd.gradcheck(lambda *a: op(*a, **kwargs), args, check_forward_ad=forward)


# Rows whose gradient ops are themselves differentiable (or identities) get a
# second derivative too.
TWICE_DIFFERENTIABLE = [
    op.name
    for op in TABLE.ops
    if op.grads and all(rule.op is None or TABLE.find(rule.op).grads for rule in op.grads)  # type: ignore[union-attr]
]


@pytest.mark.parametrize("name", TWICE_DIFFERENTIABLE)
def test_gradgradcheck(name: str) -> None:
    op = getattr(torch.ops.opforge, name)
    # forward over reverse where the gradient rows declare tangent rules
    fwd_over_rev = all(rule.op is None or TABLE.find(rule.op).jvps for rule in TABLE.find(name).grads)  # type: ignore[union-attr]
    for args, kwargs in samples(name, torch.float64, requires_grad=True):
        assert torch.autograd.gradgradcheck(lambda *a: op(*a, **kwargs), args, check_fwd_over_rev=fwd_over_rev)


def test_non_differentiable_rows_have_no_formula() -> None:
    # the rows that end a chain of derivatives have no rules: the activations' second-order rows (their third
    # derivative would need the third derivative of f), softmax's, the norms' first-order tangent rows, and the
    # tangent rows of the norms' second-order rows (whose own rules close forward over forward and third order)
    assert set(OPS) - set(DIFFERENTIABLE) == {
        "relu_",
        "softmax_grad_grad",
        "rms_norm_grad_jvp",
        "layer_norm_grad_jvp",
        "layer_norm_grad_jvp_stats",
        "log_softmax_grad_grad_jvp",
        "rms_norm_grad_grad_jvp",
        "rms_norm_grad_grad_jvp_rstd",
        "rms_norm_grad_grad_jvp_w",
        "layer_norm_grad_grad_jvp",
        "layer_norm_grad_grad_jvp_mean",
        "layer_norm_grad_grad_jvp_rstd",
        "layer_norm_grad_grad_jvp_w",
        "layer_norm_grad_grad_affine_jvp",
        "gelu_grad_grad",
        "silu_grad_grad",
        "sigmoid_grad_grad",
        "tanh_grad_grad",
    }
    # every differentiable built-in also has forward mode
    assert [name for name in DIFFERENTIABLE if not TABLE.find(name).jvps] == []  # type: ignore[union-attr]


def test_adapter_has_no_cpp_symbols_of_its_own() -> None:
    out = subprocess.run(["nm", "-D", "--defined-only", ot.library_path()], check=True, capture_output=True, text=True)
    names = [line.split()[-1] for line in out.stdout.splitlines() if line.strip()]
    assert names and not [n for n in names if n.startswith("_Z")], names
    assert {n for n in names if n.startswith("opforge_")} == {
        "opforge_torch_register",
        "opforge_torch_last_error",
        "opforge_torch_capacity",
        "opforge_torch_unregister",
    }


def test_adapter_builds_from_c_alone(tmp_path: Path) -> None:
    """The adapter compiles from its C file and opforge.h, with no torch header."""
    source = Path(__file__).resolve().parents[2] / "adapters" / "torch.c"
    if not source.exists():
        pytest.skip("no source tree")
    command = ["cc", "-std=c11", "-fPIC", "-fexceptions", "-Wall", "-Wextra", "-Werror", "-c",
               f"-I{opforge.get_include()}", str(source), "-o", str(tmp_path / "torch.o")]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True)
