"""A user's own op library (C, built here) registers through the same adapter."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from partslib import write_parts  # tests/python: a library in several files
from test_user_ops import compile_library, ref_negate  # tests/python: the NumPy adapter's user library

import opforge.torch as ot

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


@pytest.fixture(scope="module")
def testops(tmp_path_factory: pytest.TempPathFactory) -> object:
    return ot.load_ops(compile_library(tmp_path_factory.mktemp("torch_userops"), "testops"))


def test_user_op_is_an_operator(testops: object) -> None:
    schema = str(torch.ops.testops.negate.default._schema)
    assert schema == 'testops::negate(Tensor x, *, int times=1, float offset=0., str mode="none") -> Tensor'
    x = torch.randn(4, 5, dtype=torch.float64)
    for kwargs in ({}, {"times": 2, "offset": 0.5}, {"offset": -1.25, "mode": "abs"}):
        expected = ref_negate(x.numpy(), **kwargs)
        torch.testing.assert_close(torch.ops.testops.negate(x, **kwargs), torch.from_numpy(expected))
    view = x[:, 1::2].t()
    torch.testing.assert_close(torch.ops.testops.negate(view), torch.from_numpy(ref_negate(view.numpy())))


def test_user_op_passes_opcheck(testops: object) -> None:
    x = torch.randn(3, 4)
    result = torch.library.opcheck(torch.ops.testops.negate.default, (x,), {"times": 3, "mode": "abs"})
    assert all(v == "SUCCESS" for v in result.values()), result


def test_user_op_errors(testops: object) -> None:
    with pytest.raises(RuntimeError, match=r"testops::negate: mode must be one of 'none', 'abs', got 'sqrt'"):
        torch.ops.testops.negate(torch.ones(2), mode="sqrt")
    with pytest.raises(RuntimeError, match=r"testops::negate: x has dtype int32"):
        torch.ops.testops.negate(torch.ones(2, dtype=torch.int32))


def test_loading_twice_is_harmless(testops: object) -> None:
    assert ot.register_table(ot._REGISTERED["testops"].table) is torch.ops.testops


def test_invalid_table_is_rejected(tmp_path: Path) -> None:
    library = compile_library(tmp_path, "brokenops", "-DBROKEN_ABI")
    with pytest.raises(ValueError, match="999|abi|ABI"):
        ot.load_ops(library)


def test_a_library_of_several_files_differentiates_across_its_parts(tmp_path: Path) -> None:
    """shift_scale's gradient rule names scale3, a row of another file's part."""
    ops = ot.load_ops(write_parts(tmp_path, shift=2.0))
    x = torch.linspace(-1.0, 1.0, 5, dtype=torch.float64, requires_grad=True)
    y = ops.shift_scale(x)
    torch.testing.assert_close(y, 3 * x.detach() + 2.0, rtol=0, atol=0)
    (g,) = torch.autograd.grad(y.sum(), x)
    torch.testing.assert_close(g, torch.full_like(g, 3.0), rtol=0, atol=0)
    assert torch.autograd.gradcheck(ops.shift_scale, (x,))
    assert torch.autograd.gradgradcheck(ops.shift_scale, (x,))
