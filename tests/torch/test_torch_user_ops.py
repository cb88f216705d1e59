"""A user's own op library (C, built here) registers through the same adapter."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
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
