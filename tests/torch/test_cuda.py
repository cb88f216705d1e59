"""The CUDA kernels of the rows that have one (skipped without a GPU and a CUDA build of opforge)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import opforge
import opforge.torch as ot
from opforge._table import builtin_table

TABLE = builtin_table()
HAS_CUDA_ROWS = any(op.cdata.compute_cuda for op in TABLE.ops)
pytestmark = pytest.mark.skipif(
    not (torch.cuda.is_available() and opforge.info()["cuda_devices"] > 0 and HAS_CUDA_ROWS),
    reason="needs a CUDA device, torch with CUDA and opforge built with CUDA",
)
DTYPES = [torch.float32, torch.float64]


def test_rows_with_a_cuda_kernel_have_a_cuda_dispatch_key() -> None:
    for op in TABLE.ops:
        has = torch._C._dispatch_has_kernel_for_dispatch_key(f"opforge::{op.name}", "CUDA")
        assert has == bool(op.cdata.compute_cuda), op.name


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_elementwise_match_torch(dtype: torch.dtype) -> None:
    for n in (0, 1, 17, 1023, 1 << 20):
        x = torch.randn(n + 1, device="cuda", dtype=dtype)[1:]  # misaligned view
        if n:
            x[: min(n, 3)] = torch.tensor([float("nan"), float("inf"), -float("inf")][: min(n, 3)], dtype=dtype)
        torch.testing.assert_close(ot.relu(x), torch.relu(x), rtol=0, atol=0, equal_nan=True)
        torch.testing.assert_close(ot.scale(x, alpha=-1.5), torch.mul(x, -1.5), rtol=0, atol=0, equal_nan=True)
        y = torch.randn(n, device="cuda", dtype=dtype)
        torch.testing.assert_close(ot.add(x, y), x + y, rtol=0, atol=0, equal_nan=True)
        torch.testing.assert_close(ot.relu_grad(y, x), torch.where(x <= 0, 0, y), rtol=0, atol=0, equal_nan=True)
        z = x.clone()
        ot.relu_(z)
        torch.testing.assert_close(z, torch.relu(x), rtol=0, atol=0, equal_nan=True)
    t = torch.randn(33, 17, device="cuda", dtype=dtype).t()
    torch.testing.assert_close(ot.relu(t), torch.relu(t), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_dense_matches_linear(dtype: torch.dtype) -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    tol = {"rtol": 1e-4, "atol": 1e-4} if dtype == torch.float32 else {}
    for n, k, m in ((1, 1, 1), (7, 13, 5), (128, 256, 64), (0, 4, 3)):
        x, w, b = (torch.randn(*s, device="cuda", dtype=dtype) for s in ((n, k), (k, m), (m,)))
        torch.testing.assert_close(ot.dense(x, w, b, activation="relu"), torch.relu(F.linear(x, w.t(), b)), **tol)
        torch.testing.assert_close(ot.dense(x, w), x @ w, **tol)


def test_uses_the_current_stream() -> None:
    x = torch.randn(1 << 22, device="cuda")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        y = ot.relu(x)
    side.synchronize()
    torch.testing.assert_close(y, torch.relu(x))


def test_autograd_on_cuda() -> None:
    x = torch.randn(8, 5, device="cuda", dtype=torch.float64, requires_grad=True)
    w = torch.randn(5, 3, device="cuda", dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, w: ot.dense(x, w, activation="relu"), (x, w))


def test_mixed_devices_are_refused() -> None:
    with pytest.raises(RuntimeError, match=r"opforge::add: b is on cpu, expected cuda:0"):
        ot.add(torch.ones(3, device="cuda"), torch.ones(3))


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_tensors_on_a_non_zero_device() -> None:
    x = torch.randn(1000, device="cuda:1")
    with torch.cuda.device(0):
        y = ot.relu(x)
    assert y.device == x.device
    torch.testing.assert_close(y, torch.relu(x))
