"""Optional outputs: ``output_mask`` skips them, and backward masks the
outputs of a gradient op whose inputs need no gradient."""

from __future__ import annotations

import ctypes
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from oplib import ELEMENT_ACCESS_C, compile_op_library

import opforge.torch as ot

# "mul": y = a * b (same shapes), differentiated by "mul_grad", whose two
# outputs are optional and whose compute counts, per output, the calls that
# asked for it (a non-NULL output); "twice": y = x and, optional, z = 2 x.
MASK_OPS_C = ELEMENT_ACCESS_C + r"""
long long mul_grad_computed[2];
long long mul_grad_calls;

static opf_status mul_compute(const opf_tensor *const *in, const opf_tensor *const *out, const opf_attr_value *attrs) {
    (void)attrs;
    for (int64_t i = 0, n = count(in[0]); i < n; ++i) put(out[0], i, get(in[0], i) * get(in[1], i));
    return OPF_OK;
}

static opf_status mul_grad_compute(const opf_tensor *const *in, const opf_tensor *const *out,
                                   const opf_attr_value *attrs) {
    (void)attrs;
    ++mul_grad_calls;
    for (int k = 0; k < 2; ++k) {
        if (!out[k]) continue;
        ++mul_grad_computed[k];
        for (int64_t i = 0, n = count(in[0]); i < n; ++i) put(out[k], i, get(in[0], i) * get(in[2 - k], i));
    }
    return OPF_OK;
}

static const opf_op_def mul_op = {
    .name = "mul",
    .doc = "y = a * b",
    .flags = OPF_OP_ELEMENTWISE,
    .dtypes = OPF_DTYPES_F32 | OPF_DTYPES_F64,
    .num_inputs = 2,
    .inputs = {{.name = "a", .doc = "factor"}, {.name = "b", .doc = "factor"}},
    .num_outputs = 1,
    .outputs = {{.name = "y", .doc = "a * b"}},
    .output_shapes = {{.kind = OPF_SHAPE_LIKE, .like = 0}},
    .num_checks = 1,
    .checks = {{.kind = OPF_CHECK_SAME_SHAPE, .a = 0, .b = 1}},
    .num_grads = 1,
    .grads = {{.op = "mul_grad", .num_sources = 3, .sources = {{OPF_FROM_GRAD, 0}, {OPF_FROM_INPUT, 0},
               {OPF_FROM_INPUT, 1}}, .num_produces = 2, .produces = {0, 1}}},
    .compute = mul_compute,
};

static const opf_op_def mul_grad_op = {
    .name = "mul_grad",
    .doc = "da = dy * b, db = dy * a, each optional",
    .flags = OPF_OP_ELEMENTWISE,
    .dtypes = OPF_DTYPES_F32 | OPF_DTYPES_F64,
    .num_inputs = 3,
    .inputs = {{.name = "dy", .doc = "gradient of y"}, {.name = "a", .doc = "factor"}, {.name = "b", .doc = "factor"}},
    .num_outputs = 2,
    .outputs = {{.name = "da", .flags = OPF_ARG_OPTIONAL, .doc = "gradient of a"},
                {.name = "db", .flags = OPF_ARG_OPTIONAL, .doc = "gradient of b"}},
    .output_shapes = {{.kind = OPF_SHAPE_LIKE, .like = 1}, {.kind = OPF_SHAPE_LIKE, .like = 2}},
    .num_checks = 2,
    .checks = {{.kind = OPF_CHECK_SAME_SHAPE, .a = 0, .b = 1}, {.kind = OPF_CHECK_SAME_SHAPE, .a = 0, .b = 2}},
    .compute = mul_grad_compute,
};

static opf_status twice_compute(const opf_tensor *const *in, const opf_tensor *const *out,
                                const opf_attr_value *attrs) {
    (void)attrs;
    for (int64_t i = 0, n = count(in[0]); i < n; ++i) {
        put(out[0], i, get(in[0], i));
        if (out[1]) put(out[1], i, 2 * get(in[0], i));
    }
    return OPF_OK;
}

static const opf_op_def twice_op = {
    .name = "twice",
    .doc = "y = x, z = 2 x (optional)",
    .flags = OPF_OP_ELEMENTWISE,
    .dtypes = OPF_DTYPES_F32 | OPF_DTYPES_F64,
    .num_inputs = 1,
    .inputs = {{.name = "x", .doc = "input"}},
    .num_outputs = 2,
    .outputs = {{.name = "y", .doc = "x"}, {.name = "z", .flags = OPF_ARG_OPTIONAL, .doc = "2 x"}},
    .output_shapes = {{.kind = OPF_SHAPE_LIKE, .like = 0}, {.kind = OPF_SHAPE_LIKE, .like = 0}},
    .compute = twice_compute,
};

static const opf_op_def *const rows[] = {&mul_op, &mul_grad_op, &twice_op};
static const opf_op_table table = {.abi_version = OPF_TABLE_ABI_VERSION, .name = "maskops", .num_ops = 3, .ops = rows};
OPF_EXPORT_OP_TABLE(table)
"""

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


@pytest.fixture(scope="module")
def maskops(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    path = compile_op_library(tmp_path_factory.mktemp("torch_maskops"), "maskops", MASK_OPS_C)
    ot.load_ops(path)
    return ctypes.CDLL(str(Path(path)))


def computed(lib: ctypes.CDLL) -> tuple[int, int, int]:
    """(calls of mul_grad, how many computed da, how many computed db)."""
    counts = (ctypes.c_longlong * 2).in_dll(lib, "mul_grad_computed")
    return ctypes.c_longlong.in_dll(lib, "mul_grad_calls").value, counts[0], counts[1]


def test_schema_has_an_output_mask(maskops: ctypes.CDLL) -> None:
    assert str(torch.ops.maskops.mul_grad.default._schema) == (
        "maskops::mul_grad(Tensor dy, Tensor a, Tensor b, *, bool[2] output_mask=[True, True]) -> (Tensor, Tensor)"
    )
    assert str(torch.ops.maskops.mul.default._schema) == "maskops::mul(Tensor a, Tensor b) -> Tensor"
    assert "bool[3] output_mask=[True, True, True]" in str(torch.ops.opforge.dense_grad.default._schema)


@pytest.mark.parametrize("needs", [(True, True), (True, False), (False, True)])
def test_backward_computes_only_the_needed_outputs(maskops: ctypes.CDLL, needs: tuple[bool, bool]) -> None:
    g = torch.Generator().manual_seed(5)
    a = torch.randn(3, 4, generator=g, dtype=torch.float64, requires_grad=needs[0])
    b = torch.randn(3, 4, generator=g, dtype=torch.float64, requires_grad=needs[1])
    before = computed(maskops)
    y = torch.ops.maskops.mul(a, b)
    dy = torch.randn(3, 4, generator=g, dtype=torch.float64)
    wanted = [t for t, n in zip((a, b), needs) if n]
    got = torch.autograd.grad(y, wanted, dy)
    after = computed(maskops)
    assert (after[0] - before[0], after[1] - before[1], after[2] - before[2]) == (1, int(needs[0]), int(needs[1]))
    # the same gradients as torch's own multiplication
    expected = torch.autograd.grad(torch.mul(a, b), wanted, dy)
    for x, e in zip(got, expected):
        torch.testing.assert_close(x, e, rtol=0, atol=0)


def test_masked_outputs_are_empty(maskops: ctypes.CDLL) -> None:
    dy, a, b = torch.randn(2, 3), torch.randn(2, 3), torch.randn(2, 3)
    da, db = torch.ops.maskops.mul_grad(dy, a, b, output_mask=[False, True])
    assert da.shape == (0,) and da.dtype == dy.dtype
    torch.testing.assert_close(db, dy * a)
    before = computed(maskops)
    torch.ops.maskops.mul_grad(dy, a, b, output_mask=[False, False])
    after = computed(maskops)
    assert (after[0] - before[0], after[1] - before[1], after[2] - before[2]) == (1, 0, 0)
    with torch.device("meta"):
        fake = torch.ops.maskops.mul_grad(dy.to("meta"), a.to("meta"), b.to("meta"), output_mask=[True, False])
    assert fake[0].shape == (2, 3) and fake[1].shape == (0,)


def test_only_optional_outputs_can_be_masked(maskops: ctypes.CDLL) -> None:
    x = torch.randn(2, 3)
    y, z = torch.ops.maskops.twice(x, output_mask=[True, False])
    torch.testing.assert_close(y, x)
    assert z.shape == (0,)
    torch.testing.assert_close(torch.ops.maskops.twice(x)[1], 2 * x)
    w = torch.randn(3, 4)
    dy = torch.randn(2, 4)
    for device in ("cpu", "meta"):  # the C kernel and the fake kernel say the same
        with pytest.raises(RuntimeError, match=r"maskops::twice: output y is not optional: its output_mask value"):
            torch.ops.maskops.twice(x.to(device), output_mask=[False, True])
        args = [t.to(device) for t in (dy, x, w)]
        with pytest.raises(RuntimeError, match=r"opforge::dense_grad: output_mask has 2 values, expected 3"):
            torch.ops.opforge.dense_grad(*args, output_mask=[True, True])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("mask", [[True, False], [False, True], [False, False]])
def test_masked_calls_pass_opcheck(maskops: ctypes.CDLL, dtype: torch.dtype, mask: list[bool]) -> None:
    args = tuple(torch.randn(3, 4, dtype=dtype) for _ in range(3))
    result = torch.library.opcheck(torch.ops.maskops.mul_grad.default, args, {"output_mask": mask})
    assert all(v == "SUCCESS" for v in result.values()), result


def test_gradcheck_of_a_user_row_with_a_masked_gradient(maskops: ctypes.CDLL) -> None:
    a = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    b = torch.randn(3, 4, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda t: torch.ops.maskops.mul(t, b), (a,))
    assert torch.autograd.gradcheck(lambda t: torch.ops.maskops.mul(b, t), (a,))


class _Recorder(TorchDispatchMode):
    """Records the output_mask of every dense_grad call."""

    def __init__(self) -> None:
        super().__init__()
        self.masks: list[list[bool]] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is torch.ops.opforge.dense_grad.default:
            self.masks.append(list(kwargs.get("output_mask", [True, True, True])))
        return func(*args, **kwargs)


@pytest.mark.parametrize("bias", [True, False])
def test_mlp_first_layer_skips_dx(bias: bool) -> None:
    torch.manual_seed(0)
    first = ot.nn.Dense(6, 5, activation="relu", bias=bias)
    second = ot.nn.Dense(5, 2)
    x = torch.randn(8, 6)  # data: needs no gradient
    with _Recorder() as recorder:
        loss = second(first(x)).square().sum()
        loss.backward()
    # backward runs the second layer first: it needs dx (the first layer's output)
    assert recorder.masks == [[True, True, True], [False, True, bias]]
    # the gradients torch computes for the same layers
    w1 = first.weight.detach().clone().requires_grad_()
    w2 = second.weight.detach().clone().requires_grad_()
    b1 = first.bias.detach().clone().requires_grad_() if bias else None
    b2 = second.bias.detach().clone().requires_grad_()
    ref = F.linear(torch.relu(F.linear(x, w1.t(), b1)), w2.t(), b2).square().sum()
    ref.backward()
    tol = {"rtol": 1e-5, "atol": 1e-5}
    torch.testing.assert_close(first.weight.grad, w1.grad, **tol)
    torch.testing.assert_close(second.weight.grad, w2.grad, **tol)
    torch.testing.assert_close(second.bias.grad, b2.grad, **tol)
    if bias:
        torch.testing.assert_close(first.bias.grad, b1.grad, **tol)  # type: ignore[union-attr]


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_backward_with_masks_matches_eager(backend: str) -> None:
    torch._dynamo.reset()
    torch.manual_seed(1)
    model = torch.nn.Sequential(ot.nn.Dense(6, 5, activation="relu"), ot.nn.Dense(5, 3))
    x = torch.randn(4, 6)
    compiled = torch.compile(model, backend=backend, fullgraph=True)
    compiled(x).sum().backward()
    got = [p.grad.clone() for p in model.parameters()]  # type: ignore[union-attr]
    model.zero_grad()
    model(x).sum().backward()
    for a, e in zip(got, [p.grad for p in model.parameters()]):
        torch.testing.assert_close(a, e)
