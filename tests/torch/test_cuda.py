"""The CUDA kernels of the rows that have one (skipped without a GPU and a CUDA build of opforge)."""

from __future__ import annotations

import shutil

import pytest

try:  # without them: a skip (an error under OPFORGE_REQUIRE_FRAMEWORKS=1, see conftest.py)
    import torch
    import torch.nn.functional as F

    import opforge.torch as ot
except ImportError as exc:
    pytest.skip(f"PyTorch adapter unavailable: {exc}", allow_module_level=True)

from oplib import MYOPS_SOURCE  # noqa: E402

import opforge  # noqa: E402
from opforge._table import builtin_table  # noqa: E402

TABLE = builtin_table()
HAS_CUDA_ROWS = any(op.cdata.compute_cuda for op in TABLE.ops)
needs_gpu = pytest.mark.skipif(
    not (torch.cuda.is_available() and opforge.info()["cuda_devices"] > 0 and HAS_CUDA_ROWS),
    reason="needs a CUDA device, torch with CUDA and opforge built with CUDA",
)
DTYPES = [torch.float32, torch.float64]


@pytest.mark.skipif(
    torch.version.cuda is None or not HAS_CUDA_ROWS, reason="needs a CUDA build of torch and opforge built with CUDA"
)
def test_rows_with_a_cuda_kernel_have_a_cuda_dispatch_key() -> None:
    """Registration needs no GPU: a CUDA build of torch is enough (libtorch_cuda
    is loaded and exports the current-stream getter the CUDA kernels use)."""
    for op in TABLE.ops:
        has = torch._C._dispatch_has_kernel_for_dispatch_key(f"opforge::{op.name}", "CUDA")
        assert has == bool(op.cdata.compute_cuda), op.name


@needs_gpu
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
        expected = torch.ops.aten.threshold_backward(y, x, 0)  # relu's backward: x <= 0 ? 0 : dy
        torch.testing.assert_close(ot.relu_grad(y, x), expected, rtol=0, atol=0, equal_nan=True)
        buffer = torch.cat([torch.full((1,), 7.0, device="cuda", dtype=dtype), x])
        z = buffer[1:]  # in place on a misaligned view
        assert ot.relu_(z) is z
        torch.testing.assert_close(z, torch.relu(x), rtol=0, atol=0, equal_nan=True)
        assert buffer[0].item() == 7.0
    t = torch.randn(33, 17, device="cuda", dtype=dtype).t()
    torch.testing.assert_close(ot.relu(t), torch.relu(t), rtol=0, atol=0)
    torch.testing.assert_close(ot.add(t, t), t + t, rtol=0, atol=0)


@needs_gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_dense_matches_linear(dtype: torch.dtype) -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    tol = {"rtol": 1e-4, "atol": 1e-4} if dtype == torch.float32 else {}
    for n, k, m in ((1, 1, 1), (7, 13, 5), (128, 256, 64), (0, 4, 3)):
        x, w, b = (torch.randn(*s, device="cuda", dtype=dtype) for s in ((n, k), (k, m), (m,)))
        torch.testing.assert_close(ot.dense(x, w, b, activation="relu"), torch.relu(F.linear(x, w.t(), b)), **tol)
        torch.testing.assert_close(ot.dense(x, w, b), F.linear(x, w.t(), b), **tol)
        torch.testing.assert_close(ot.dense(x, w), F.linear(x, w.t()), **tol)
    # Misaligned (offset by one element) and transposed operands, odd sizes.
    n, k, m = 37, 19, 11
    x = torch.randn(n * k + 1, device="cuda", dtype=dtype)[1:].view(n, k)
    w = torch.randn(m, k, device="cuda", dtype=dtype).t()
    b = torch.randn(m + 1, device="cuda", dtype=dtype)[1:]
    torch.testing.assert_close(ot.dense(x, w, b, activation="relu"), torch.relu(F.linear(x, w.t(), b)), **tol)
    # Inf in the bias goes through as in F.linear.
    b[0] = float("inf")
    b[1] = -float("inf")
    torch.testing.assert_close(ot.dense(x, w, b, activation="relu"), torch.relu(F.linear(x, w.t(), b)), **tol)


@needs_gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("activation", ["none", "relu"])
def test_dense_grad_matches_autograd_of_linear(dtype: torch.dtype, activation: str) -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    tol = {"rtol": 1e-4, "atol": 1e-4} if dtype == torch.float32 else {}
    for n, k, m in ((1, 1, 1), (33, 20, 9), (300, 17, 5)):
        x = torch.randn(n, k, device="cuda", dtype=dtype, requires_grad=True)
        w = torch.randn(k, m, device="cuda", dtype=dtype, requires_grad=True)
        b = torch.randn(m, device="cuda", dtype=dtype, requires_grad=True)
        dy = torch.randn(n, m, device="cuda", dtype=dtype)
        y = F.linear(x, w.t(), b)
        if activation == "relu":
            y = torch.relu(y)
        want = torch.autograd.grad(y, (x, w, b), dy)
        got = ot.dense_grad(dy, x.detach(), w.detach(), y.detach(), activation=activation)
        for name, a, e in zip(("dx", "dw", "db"), got, want):
            assert a.device == e.device, name
            torch.testing.assert_close(a, e, **tol, msg=lambda text, name=name: f"{name}: {text}")


@needs_gpu
def test_uses_the_current_stream() -> None:
    x = torch.randn(1 << 22, device="cuda")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        y = ot.relu(x)
    side.synchronize()
    torch.testing.assert_close(y, torch.relu(x))


@needs_gpu
def test_autograd_on_cuda() -> None:
    x = torch.randn(8, 5, device="cuda", dtype=torch.float64, requires_grad=True)
    w = torch.randn(5, 3, device="cuda", dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, w: ot.dense(x, w, activation="relu"), (x, w))


@needs_gpu
def test_autograd_matches_torch_on_cuda() -> None:
    """Backward through the CUDA kernels (relu_grad, dense_grad, scale, add) vs torch's own."""
    torch.backends.cuda.matmul.allow_tf32 = False
    x = torch.randn(16, 12, device="cuda", dtype=torch.float64, requires_grad=True)
    w = torch.randn(12, 6, device="cuda", dtype=torch.float64, requires_grad=True)
    b = torch.randn(6, device="cuda", dtype=torch.float64, requires_grad=True)
    h = ot.dense(x, w, b, activation="relu")
    got_loss = ot.scale(ot.add(ot.relu(ot.dense(x, w, b)), h), alpha=0.5).sum()
    ref = torch.relu(F.linear(x, w.t(), b))
    want_loss = (0.5 * (ref + ref)).sum()
    got = torch.autograd.grad(got_loss, (x, w, b))
    want = torch.autograd.grad(want_loss, (x, w, b))
    for a, e in zip(got, want):
        assert a.is_cuda
        torch.testing.assert_close(a, e)


@needs_gpu
def test_mixed_devices_are_refused() -> None:
    with pytest.raises(RuntimeError, match=r"opforge::add: b is on cpu, expected cuda:0"):
        ot.add(torch.ones(3, device="cuda"), torch.ones(3))
    with pytest.raises(RuntimeError, match=r"opforge::dense: w is on cpu, expected cuda:0"):
        ot.dense(torch.ones(2, 3, device="cuda"), torch.ones(3, 4))


@needs_gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_tensors_on_a_non_zero_device() -> None:
    x = torch.randn(1000, device="cuda:1")
    with torch.cuda.device(0):
        y = ot.relu(x)
    assert y.device == x.device
    torch.testing.assert_close(y, torch.relu(x))
    a = torch.randn(9, 7, device="cuda:1", dtype=torch.float64)
    w = torch.randn(7, 5, device="cuda:1", dtype=torch.float64)
    with torch.cuda.device(0):
        z = ot.dense(a, w, activation="relu")
    assert z.device == a.device
    torch.testing.assert_close(z, torch.relu(a @ w))
    with pytest.raises(RuntimeError, match=r"is on cuda:0, expected cuda:1"):
        ot.add(x, torch.ones(1000, device="cuda:0"))


@needs_gpu
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_a_users_row_ops_built_by_nvcc_run_on_cuda(dtype: torch.dtype) -> None:
    """examples/ops/myops.c compiled by nvcc (its table renamed): rowsum and,
    through autograd, rowsum_grad run as CUDA builds of their row kernels on
    rows in place, rows gathered (transposed, every other element) and empty
    rows."""
    source = MYOPS_SOURCE.read_text().replace('OPF_EXPORT_OPS("myops"', 'OPF_EXPORT_OPS("myops_cuda"')
    ot.load_ops(source, cuda=True, name="myops_cuda")
    rowsum = torch.ops.myops_cuda.rowsum
    x = torch.randn(6, 5, 37, device="cuda", dtype=dtype)
    for v in (x, x.transpose(0, 2), x[..., ::2], x[:, :, :0], x[:0]):
        got = rowsum(v)
        assert got.is_cuda and got.shape == v.shape[:-1]
        torch.testing.assert_close(got, v.sum(-1))
    w = x.detach().clone().requires_grad_()
    dy = torch.randn(6, 5, device="cuda", dtype=dtype)
    (dx,) = torch.autograd.grad(rowsum(w), (w,), dy)
    assert dx.is_cuda
    torch.testing.assert_close(dx, dy[..., None].expand_as(w), rtol=0, atol=0)


# The transformer ops on CUDA tensors: the CUDA builds of their elementwise
# and row kernels (one thread per row; sums over rows added up in the CPU
# engine's order) against torch's own ops on the same GPU, forward and
# backward, contiguous and transposed.
TRANSFORMER = {
    "gelu": (lambda x: ot.gelu(x), lambda x: F.gelu(x)),
    "gelu_tanh": (lambda x: ot.gelu(x, approximate="tanh"), lambda x: F.gelu(x, approximate="tanh")),
    "silu": (lambda x: ot.silu(x), F.silu),
    "sigmoid": (lambda x: ot.sigmoid(x), torch.sigmoid),
    "tanh": (lambda x: ot.tanh(x), torch.tanh),
    "softmax": (lambda x: ot.softmax(x), lambda x: torch.softmax(x, -1)),
    "log_softmax": (lambda x: ot.log_softmax(x), lambda x: torch.log_softmax(x, -1)),
    "mul_broadcast": (lambda x: ot.mul(x, x[:1]), lambda x: x * x[:1]),
    "add_broadcast": (lambda x: ot.add(x[:, :1], x), lambda x: x[:, :1] + x),
}


@needs_gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", TRANSFORMER)
def test_transformer_ops_match_torch_on_cuda(name: str, dtype: torch.dtype) -> None:
    ours, theirs = TRANSFORMER[name]
    for shape, transpose in (((64, 300), False), ((300, 64), True), ((3, 0), False), ((1, 4097), False)):
        base = torch.randn(shape, device="cuda", dtype=dtype) * 3
        x = base.t() if transpose else base
        xa, xb = x.detach().clone().requires_grad_(), x.detach().clone().requires_grad_()
        ya, yb = ours(xa), theirs(xb)
        assert ya.is_cuda and ya.shape == yb.shape
        torch.testing.assert_close(ya, yb)
        dy = torch.randn_like(yb)
        (ga,) = torch.autograd.grad(ya, xa, dy)
        (gb,) = torch.autograd.grad(yb, xb, dy)
        torch.testing.assert_close(ga, gb)


@needs_gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("norm", ["layer_norm", "layer_norm_no_affine", "rms_norm"])
def test_norms_and_their_weight_gradients_on_cuda(norm: str, dtype: torch.dtype) -> None:
    """The weight gradients are sums over rows: computed on the GPU, equal to torch's."""
    x = (torch.randn(513, 96, device="cuda", dtype=dtype) * 2).requires_grad_()
    w = torch.randn(96, device="cuda", dtype=dtype, requires_grad=True)
    b = torch.randn(96, device="cuda", dtype=dtype, requires_grad=True)
    if norm == "layer_norm":
        params = (x, w, b)
        ours, theirs = ot.layer_norm(x, w, b)[0], F.layer_norm(x, (96,), w, b)
    elif norm == "layer_norm_no_affine":
        params = (x,)
        ours, theirs = ot.layer_norm(x)[0], F.layer_norm(x, (96,))
    else:
        params = (x, w)
        ours, theirs = ot.rms_norm(x, w, eps=1e-6)[0], F.rms_norm(x, (96,), w, eps=1e-6)
    torch.testing.assert_close(ours, theirs)
    dy = torch.randn_like(theirs)
    tolerance = {"rtol": 1e-4, "atol": 1e-4} if dtype == torch.float32 else {}  # sums over 513 rows
    for a, e in zip(torch.autograd.grad(ours, params, dy), torch.autograd.grad(theirs, params, dy)):
        assert a.is_cuda
        torch.testing.assert_close(a, e, **tolerance)


@needs_gpu
def test_norms_second_order_on_cuda() -> None:
    x = torch.randn(6, 9, device="cuda", dtype=torch.float64, requires_grad=True)
    w = torch.randn(9, device="cuda", dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradgradcheck(lambda x, w: ot.layer_norm(x, w)[0], (x, w))
    assert torch.autograd.gradgradcheck(lambda x, w: ot.rms_norm(x, w)[0], (x, w))
    assert torch.autograd.gradgradcheck(lambda x: ot.softmax(x), (x,))
