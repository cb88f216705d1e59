"""opforge's CUDA kernels vs PyTorch's CUDA built-ins, in one run.

(a) Checks: every row with a CUDA kernel, called through a small ctypes
    binding of opf_op_run_cuda on torch CUDA tensors (data_ptr, shape,
    strides; torch's current stream), against torch: relu, relu_, relu_grad
    (torch.where(x <= 0, 0, dy)), scale (torch.mul), add, dense
    (relu(F.linear(x, w.T, b))) and dense_grad (autograd) — odd sizes,
    misaligned views (x[1:]), transposed views, NaN/Inf, float32 and float64,
    on the default stream and on a side stream; softmax, log_softmax,
    layer_norm and rms_norm (rows of 7 to 4096 elements: one thread per row
    below 32, a team of threads per row from 32) against torch.softmax,
    torch.log_softmax, F.layer_norm and F.rms_norm in float64. Prints
    PASS/FAIL lines.
(b) Timings (CUDA events, median of 20 after warm-up, outputs preallocated;
    each both with 10 calls back to back between the events — the device's
    time per call, used for the ratios — and as one synchronized call, which
    adds the host's launch latency): relu on 256 MiB float32 vs a
    device-to-device copy (y.copy_(x)) and torch.relu; dense with bias + relu
    at 4096x4096x4096 and batch 32 vs torch.relu(F.linear(...)) with TF32 off
    (like for like) and on; softmax, log_softmax, layer_norm and rms_norm on
    [8192, 4096] float32 vs torch's and vs a device copy of the same bytes;
    gelu (erf and tanh), silu, gelu_grad, silu_grad and softmax_grad on
    [8192, 4096] float32 vs torch's built-ins; layer_norm_grad and
    rms_norm_grad (dx, dw, and layer_norm's db) vs torch's backward of
    F.layer_norm and F.rms_norm.

Exits 1 if any check failed. Needs: python3, torch with CUDA, a CUDA build of
libopforge ($OPFORGE_LIB, default build/libopforge.so). No network.

    OPFORGE_CUBLASLT=/path/to/libcublasLt.so.13 python3 bench/gpu_bench.py
"""

from __future__ import annotations

import ctypes
import os
import statistics
import sys

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# --- ctypes binding of the few C declarations needed (include/opforge.h) --------

OPF_F32, OPF_F64 = 0x00012002, 0x00014002
OPF_DEVICE_CUDA = 2
OPF_ACT_NONE, OPF_ACT_RELU = 0, 1


class Device(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int32), ("id", ctypes.c_int32)]


class Tensor(ctypes.Structure):  # opf_tensor (DLTensor layout)
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", Device),
        ("ndim", ctypes.c_int32),
        ("dtype", ctypes.c_uint32),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class AttrValue(ctypes.Union):  # opf_attr_value
    _fields_ = [("f", ctypes.c_double), ("i", ctypes.c_int64)]


lib = ctypes.CDLL(os.environ.get("OPFORGE_LIB", os.path.join(ROOT, "build", "libopforge.so")))
lib.opf_builtin_ops.restype = ctypes.c_void_p
lib.opf_op_find.restype = ctypes.c_void_p
lib.opf_op_find.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
lib.opf_op_run_cuda.restype = ctypes.c_int
lib.opf_op_run_cuda.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
lib.opf_last_error.restype = ctypes.c_char_p
lib.opf_status_name.restype = ctypes.c_char_p
lib.opf_status_name.argtypes = [ctypes.c_int]
lib.opf_cuda_device_count.restype = ctypes.c_int
TABLE = lib.opf_builtin_ops()


def row(name: str) -> int:
    r = lib.opf_op_find(TABLE, name.encode())
    if not r:
        raise RuntimeError(f"no row {name}")
    return r


class Call:
    """Argument arrays for one opf_op_run_cuda call, built once (so a timed
    loop measures the call, not the marshalling) and kept alive."""

    def __init__(self, op: str, inputs, outputs, attr=None):
        self.op = row(op)
        self.keep = []
        self.inputs = self._array(inputs)
        self.outputs = self._array(outputs) if outputs else None
        self.attrs = None
        if attr is not None:
            a = AttrValue()
            if isinstance(attr, float):
                a.f = attr
            else:
                a.i = attr
            self.attrs = (AttrValue * 1)(a)

    def _tensor(self, t: torch.Tensor):
        if t is None:
            return None
        assert t.is_cuda and t.dtype in (torch.float32, torch.float64)
        shape = (ctypes.c_int64 * max(t.dim(), 1))(*t.shape)
        strides = (ctypes.c_int64 * max(t.dim(), 1))(*t.stride())
        ct = Tensor(
            t.data_ptr(),  # includes the storage offset
            Device(OPF_DEVICE_CUDA, t.device.index),
            t.dim(),
            OPF_F32 if t.dtype == torch.float32 else OPF_F64,
            shape,
            strides,
            0,
        )
        self.keep += [shape, strides, ct]
        return ctypes.pointer(ct)

    def _array(self, ts):
        arr = (ctypes.POINTER(Tensor) * len(ts))(*[self._tensor(t) for t in ts])
        self.keep.append(arr)
        return arr

    def __call__(self, stream=None) -> None:
        s = torch.cuda.current_stream() if stream is None else stream
        st = lib.opf_op_run_cuda(
            self.op,
            ctypes.cast(self.inputs, ctypes.c_void_p),
            ctypes.cast(self.outputs, ctypes.c_void_p) if self.outputs is not None else None,
            ctypes.cast(self.attrs, ctypes.c_void_p) if self.attrs is not None else None,
            ctypes.c_void_p(s.cuda_stream),
        )
        if st != 0:
            raise RuntimeError(f"{lib.opf_status_name(st).decode()}: {lib.opf_last_error().decode()}")


def run(op, inputs, outputs, attr=None):
    Call(op, inputs, outputs, attr)()


# --- (a) checks ---------------------------------------------------------------------

failures = 0


def report(name: str, ok: bool, detail: str = "") -> None:
    global failures
    failures += not ok
    print(f"{'PASS' if ok else 'FAIL'} {name}{(': ' + detail) if detail else ''}", flush=True)


def same(got: torch.Tensor, want: torch.Tensor) -> tuple[bool, str]:
    """Equal values, NaN matching NaN (+0 == -0: torch may differ in the sign
    of a zero relu result)."""
    eq = (got == want) | (got.isnan() & want.isnan())
    bad = int((~eq).sum())
    if bad == 0:
        return True, ""
    i = int((~eq).flatten().nonzero()[0])
    return False, f"{bad} differ, first at {i}: got {got.flatten()[i].item()!r}, want {want.flatten()[i].item()!r}"


def close(got: torch.Tensor, want: torch.Tensor, tol: torch.Tensor) -> tuple[bool, str]:
    if got.numel() == 0:
        return tuple(got.shape) == tuple(want.shape), "empty"
    err = (got - want).abs()
    ok = (err <= tol) | (got == want) | (got.isnan() & want.isnan())
    bad = int((~ok).sum())
    if bad == 0:
        ratio = (err.double() / tol.double().clamp_min(1e-300)).nan_to_num(0.0, 0.0, 0.0)
        return True, f"max err/tol {float(ratio.max()):.3g}"
    i = int((~ok).flatten().nonzero()[0])
    return False, (
        f"{bad} outside tolerance, first at {i}: got {got.flatten()[i].item()!r}, "
        f"want {want.flatten()[i].item()!r}, tol {tol.flatten()[i].item():.3g}"
    )


def specials(t: torch.Tensor) -> torch.Tensor:
    """Sprinkle NaN, +-Inf, +-0 into a tensor (in place)."""
    flat = t.view(-1) if t.is_contiguous() else None
    if flat is None or flat.numel() < 8:
        return t
    vals = [float("nan"), float("inf"), float("-inf"), 0.0, -0.0, -float("nan")]
    idx = torch.randperm(flat.numel(), device=t.device)[: max(len(vals), flat.numel() // 16)]
    for k, i in enumerate(idx.tolist()[: 64]):
        flat[i] = vals[k % len(vals)]
    return t


def views(n: int, dtype, gen):
    """(name, tensor) pairs: contiguous, misaligned x[1:], a transposed 2-D view."""
    base = specials(torch.randn(n + 1, device="cuda", dtype=dtype, generator=gen))
    out = [("contiguous", base[:n].clone()), ("misaligned x[1:]", base[1:])]
    if n >= 6 and n % 2 == 0:
        out.append(("transposed", base[:n].view(2, n // 2).t()))
    return out


def check_eltwise() -> None:
    gen = torch.Generator(device="cuda").manual_seed(0)
    for dtype in (torch.float32, torch.float64):
        dn = "f32" if dtype == torch.float32 else "f64"
        for n in (1, 7, 17, 1000, 1000002, (1 << 20) + 3):
            for vname, x in views(n, dtype, gen):
                tag = f"{dn} n={n} {vname}"
                y = torch.empty_like(x)
                run("relu", [x], [y])
                report(f"relu {tag}", *same(y, torch.relu(x)))
                z = x.clone()
                run("relu_", [z], [])
                report(f"relu_ {tag}", *same(z, torch.relu(x)))
                dy = torch.randn(x.shape, device="cuda", dtype=dtype, generator=gen)
                dx = torch.empty_like(x)
                run("relu_grad", [dy, x], [dx])
                report(f"relu_grad {tag}", *same(dx, torch.where(x <= 0, torch.zeros_like(dy), dy)))
                for alpha in (2.0, -0.3):
                    run("scale", [x], [y], alpha)
                    report(f"scale alpha={alpha} {tag}", *same(y, torch.mul(x, alpha)))
                b = specials(torch.randn(x.shape, device="cuda", dtype=dtype, generator=gen))
                run("add", [x, b], [y])
                report(f"add {tag}", *same(y, torch.add(x, b)))
    # a side stream: the op runs where it is told, ordered with torch's work there
    s = torch.cuda.Stream()
    x = torch.randn(1 << 22, device="cuda")
    y = torch.empty_like(x)
    s.wait_stream(torch.cuda.current_stream())  # x was made on the default stream
    with torch.cuda.stream(s):
        x2 = x * 3.0  # queued on s
        run("relu", [x2], [y])  # current stream is s
        want = torch.relu(x2)
    s.synchronize()
    report("relu on a side stream (torch.cuda.Stream)", *same(y, want))


ROW_OPS = ("softmax", "log_softmax", "layer_norm", "rms_norm")


def row_call(op: str, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> tuple[Call, torch.Tensor]:
    """opforge's call of a row op on x (layer_norm and rms_norm with weight,
    layer_norm with bias) and its output y."""
    y = torch.empty_like(x)
    stats = [torch.empty(x.shape[:-1], device=x.device, dtype=x.dtype) for _ in range(2)]
    if op == "layer_norm":
        return Call(op, [x, w, b], [y, stats[0], stats[1]], 1e-5), y
    if op == "rms_norm":
        return Call(op, [x, w], [y, stats[0]], 1e-6), y
    return Call(op, [x], [y]), y


def torch_row(op: str, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if op == "softmax":
        return torch.softmax(x, -1)
    if op == "log_softmax":
        return torch.log_softmax(x, -1)
    if op == "layer_norm":
        return F.layer_norm(x, x.shape[-1:], w, b, 1e-5)
    return F.rms_norm(x, x.shape[-1:], w, 1e-6)


def check_rows() -> None:
    gen = torch.Generator(device="cuda").manual_seed(5)
    for dtype in (torch.float32, torch.float64):
        for rows, m in ((64, 7), (6, 33), (3, 1000), (64, 4096), (2, 100_000)):
            x = torch.randn(rows, m, device="cuda", dtype=dtype, generator=gen) * 3
            w = torch.randn(m, device="cuda", dtype=dtype, generator=gen)
            b = torch.randn(m, device="cuda", dtype=dtype, generator=gen)
            for op in ROW_OPS:
                call, y = row_call(op, x, w, b)
                call()
                want = torch_row(op, x.double(), w.double(), b.double())
                eps = torch.finfo(dtype).eps
                # sums of m terms in another order, an exponential or a square root: a few ulp of the
                # element (softmax) or of the row's largest (the others, whose elements can cancel)
                scale = want.abs() if op == "softmax" else want.abs() + want.abs().amax(-1, keepdim=True)
                tol = (8 + 2 * m**0.5) * eps * scale
                ok, detail = close(y.double(), want, tol)
                report(f"{op} {str(dtype)[6:]} [{rows}, {m}] vs torch", ok, detail)


def gemm_tol(a: torch.Tensor, b: torch.Tensor, extra: torch.Tensor | None, k: int, dtype) -> torch.Tensor:
    """2 (k + 2) u (|a| |b| + |extra|): a forward error bound for two orders."""
    u = 2.0**-24 if dtype == torch.float32 else 2.0**-53
    s = a.abs().double() @ b.abs().double()
    if extra is not None:
        s = s + extra.abs().double()
    return (2.0 * (k + 2) * u * s + 1e-300).to(dtype)


def check_dense() -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    gen = torch.Generator(device="cuda").manual_seed(1)
    shapes = [(1, 1, 1), (1, 33, 65), (129, 65, 1), (129, 65, 33), (7, 0, 5), (256, 512, 384), (33, 1000, 9)]
    for dtype in (torch.float32, torch.float64):
        dn = "f32" if dtype == torch.float32 else "f64"
        for n, k, m in shapes:
            for layout in ("contiguous", "misaligned", "transposed-w"):
                def mk(r, c):
                    flat = torch.randn(r * c + 1, device="cuda", dtype=dtype, generator=gen)
                    return flat[1:].view(r, c) if layout == "misaligned" else flat[: r * c].view(r, c)

                x = mk(n, k)
                w = mk(m, k).t() if layout == "transposed-w" else mk(k, m)
                b = mk(1, m)[0]
                for relu in (False, True):
                    for with_bias in (False, True):
                        tag = f"{dn} {n}x{k}x{m} {layout} bias={int(with_bias)} relu={int(relu)}"
                        y = torch.empty(n, m, device="cuda", dtype=dtype)
                        bb = b if with_bias else None
                        run("dense", [x, w, bb], [y], OPF_ACT_RELU if relu else OPF_ACT_NONE)
                        want = F.linear(x, w.t(), bb)
                        if relu:
                            want = torch.relu(want)
                        report(f"dense {tag}", *close(y, want, gemm_tol(x, w, bb, k, dtype)))
                # dense_grad vs autograd (relu and none), all outputs and dw alone
                for relu in (False, True):
                    xa = x.detach().clone().requires_grad_(True)
                    wa = w.detach().clone().requires_grad_(True)
                    ba = b.detach().clone().requires_grad_(True)
                    ya = F.linear(xa, wa.t(), ba)
                    if relu:
                        ya = torch.relu(ya)
                    dy = torch.randn(n, m, device="cuda", dtype=dtype, generator=gen)
                    ya.backward(dy)
                    dx, dw, db = torch.empty_like(x), torch.empty_like(w), torch.empty_like(b)
                    yd = ya.detach()  # the same mask as autograd's
                    act = OPF_ACT_RELU if relu else OPF_ACT_NONE
                    run("dense_grad", [dy, x, w, yd if relu else None], [dx, dw, db], act)
                    tag = f"{dn} {n}x{k}x{m} {layout} relu={int(relu)}"
                    report(f"dense_grad dx {tag}", *close(dx, xa.grad, gemm_tol(dy, w.t(), None, m, dtype)))
                    report(f"dense_grad dw {tag}", *close(dw, wa.grad, gemm_tol(x.t(), dy, None, n, dtype)))
                    ones = torch.ones(1, n, device="cuda", dtype=dtype)
                    report(f"dense_grad db {tag}", *close(db, ba.grad, gemm_tol(ones, dy, None, n, dtype)[0]))
                    dw2 = torch.empty_like(w)
                    run("dense_grad", [dy, x, w, yd if relu else None], [None, dw2, None], act)
                    report(f"dense_grad dw only {tag}", *same(dw2, dw))
    # NaN / Inf through dense (no relu: IEEE propagation must match torch)
    x = torch.randn(4, 8, device="cuda")
    x[0, 0], x[1, 0], x[2, 0] = float("nan"), float("inf"), float("-inf")
    w, b = torch.randn(8, 5, device="cuda"), torch.randn(5, device="cuda")
    y = torch.empty(4, 5, device="cuda")
    run("dense", [x, w, b], [y], OPF_ACT_NONE)
    want = F.linear(x, w.t(), b)
    report("dense f32 NaN/Inf inputs, no activation", *close(y, want, gemm_tol(x.nan_to_num(0, 0, 0), w, b, 8, x.dtype)))
    run("dense", [x, w, b], [y], OPF_ACT_RELU)
    relu_nan = torch.relu(want)
    nan_rows = relu_nan.isnan()
    print(
        "NOTE dense relu with a NaN pre-activation: opforge gives "
        + ("NaN (as torch.relu)" if bool(y[nan_rows].isnan().all()) else "0 (cuBLASLt epilogue max(x, 0))")
    )


# --- (b) timings -----------------------------------------------------------------------


# Two ways of timing a call, both with CUDA events, median of 20 samples after
# warm-up, outputs preallocated:
#   stream   BACK_TO_BACK calls enqueued between one pair of events, time / calls:
#            the device's time per call, with the host running ahead as in a
#            training loop. Bandwidth and FLOP/s ratios use this.
#   single   one call between the events, synchronized after each: the GPU
#            waits for the host's launch too (Python, ctypes, argument checks),
#            and every sample follows a synchronization.
BACK_TO_BACK = 10


def median_ms(fn, reps: int = 20, warmup: int = 3, calls: int = 1) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / calls)
    return statistics.median(times)


def stream_and_single(fn) -> tuple[float, float]:
    return median_ms(fn, calls=BACK_TO_BACK), median_ms(fn)


def bench_relu() -> None:
    n = (256 << 20) // 4  # 256 MiB of float32
    x = torch.randn(n, device="cuda")
    y = torch.empty_like(x)
    gbs = lambda ms: 2 * x.numel() * 4 / (ms * 1e-3) / 1e9  # noqa: E731
    rows = {
        "opforge relu": stream_and_single(Call("relu", [x], [y])),
        "y.copy_(x)": stream_and_single(lambda: y.copy_(x)),
        "torch.relu(x)": stream_and_single(lambda: torch.relu(x)),
        "torch.clamp_min(out=y)": stream_and_single(lambda: torch.clamp_min(x, 0, out=y)),
    }
    print(f"relu 256 MiB f32, out of place (2 x 256 MiB moved), median of 20, stream = {BACK_TO_BACK} calls in a row:")
    for name, (t_stream, t_single) in rows.items():
        print(
            f"  {name:24s} stream {t_stream:7.3f} ms {gbs(t_stream):6.0f} GB/s | "
            f"single {t_single:7.3f} ms {gbs(t_single):6.0f} GB/s"
        )
    ours, copy, builtin = rows["opforge relu"], rows["y.copy_(x)"], rows["torch.relu(x)"]
    print(
        f"  ratios (stream): opforge/copy bandwidth {copy[0] / ours[0]:.3f}, opforge/torch.relu speed "
        f"{builtin[0] / ours[0]:.3f}; (single): {copy[1] / ours[1]:.3f}, {builtin[1] / ours[1]:.3f}"
    )


def bench_dense() -> None:
    for n, k, m in ((4096, 4096, 4096), (32, 4096, 4096)):
        x = torch.randn(n, k, device="cuda")
        w = torch.randn(k, m, device="cuda") / 64
        b = torch.randn(m, device="cuda")
        y = torch.empty(n, m, device="cuda")
        flop = 2.0 * n * k * m
        ours = stream_and_single(Call("dense", [x, w, b], [y], OPF_ACT_RELU))
        wt = w.t()
        res = {}
        for tf32 in (False, True):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            res[tf32] = stream_and_single(lambda: torch.relu(F.linear(x, wt, b)))
        torch.backends.cuda.matmul.allow_tf32 = False
        tfs = lambda ms: flop / (ms * 1e-3) / 1e12  # noqa: E731
        print(f"dense f32 bias+relu N={n} K={k} M={m}, median of 20; stream = {BACK_TO_BACK} calls back to back:")
        for name, (t_stream, t_single) in (
            ("opforge dense (cuBLASLt, fp32, RELU_BIAS)", ours),
            ("torch relu(linear), TF32 off", res[False]),
            ("torch relu(linear), TF32 on", res[True]),
        ):
            print(
                f"  {name:42s} stream {t_stream:7.3f} ms {tfs(t_stream):6.1f} TFLOP/s | "
                f"single {t_single:7.3f} ms {tfs(t_single):6.1f} TFLOP/s"
            )
        print(
            f"  ratios (torch time / opforge time), stream: vs TF32 off {res[False][0] / ours[0]:.3f} "
            f"(like for like), vs TF32 on {res[True][0] / ours[0]:.3f}; single: vs TF32 off {res[False][1] / ours[1]:.3f}"
        )


def bench_rows() -> None:
    x = torch.randn(8192, 4096, device="cuda")
    w, b = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    y = torch.empty_like(x)
    gbs = lambda ms: 2 * x.numel() * 4 / (ms * 1e-3) / 1e9  # noqa: E731
    copy = stream_and_single(lambda: y.copy_(x))
    print(f"row ops on [8192, 4096] f32 (x read, y written: 2 x 128 MiB), median of 20, stream = {BACK_TO_BACK} calls:")
    print(f"  {'y.copy_(x)':24s} stream {copy[0]:7.3f} ms {gbs(copy[0]):6.0f} GB/s")
    for op in ROW_OPS:
        ours = stream_and_single(row_call(op, x, w, b)[0])
        theirs = stream_and_single(lambda: torch_row(op, x, w, b))
        print(
            f"  {op:12s} opforge {ours[0]:7.3f} ms {gbs(ours[0]):6.0f} GB/s ({copy[0] / ours[0]:.2f} of the copy) | "
            f"torch {theirs[0]:7.3f} ms | torch time / opforge time {theirs[0] / ours[0]:.3f}"
        )


def bench_transformer_eltwise() -> None:
    """The activations and the row ops' backward on [8192, 4096] f32 against
    torch's built-ins (aten's gelu_backward and _softmax_backward_data are
    what autograd runs for F.gelu and torch.softmax)."""
    x, dy = torch.randn(8192, 4096, device="cuda"), torch.randn(8192, 4096, device="cuda")
    y = torch.empty_like(x)
    sm = torch.softmax(x, -1)
    mib = x.numel() * 4
    cases = [
        # name, opforge call, torch call, arrays moved (read + written)
        ("gelu", Call("gelu", [x], [y], 0), lambda: F.gelu(x), 2),
        ("gelu tanh", Call("gelu", [x], [y], 1), lambda: F.gelu(x, approximate="tanh"), 2),
        ("silu", Call("silu", [x], [y]), lambda: F.silu(x), 2),
        ("gelu_grad", Call("gelu_grad", [dy, x], [y], 0), lambda: torch.ops.aten.gelu_backward(dy, x), 3),
        ("silu_grad", Call("silu_grad", [dy, x], [y]), lambda: torch.ops.aten.silu_backward(dy, x), 3),
        (
            "softmax_grad",
            Call("softmax_grad", [dy, sm], [y]),
            lambda: torch.ops.aten._softmax_backward_data(dy, sm, -1, torch.float32),
            3,
        ),
    ]
    print(f"activations and backward rows on [8192, 4096] f32, median of 20, stream = {BACK_TO_BACK} calls:")
    for name, ours_fn, theirs_fn, arrays in cases:
        ours, theirs = median_ms(ours_fn, calls=BACK_TO_BACK), median_ms(theirs_fn, calls=BACK_TO_BACK)
        print(
            f"  {name:12s} opforge {ours:7.3f} ms {arrays * mib / (ours * 1e-3) / 1e9:6.0f} GB/s | "
            f"torch {theirs:7.3f} ms | torch time / opforge time {theirs / ours:.3f}"
        )


def bench_norm_grads() -> None:
    """layer_norm_grad (dx, dw, db) and rms_norm_grad (dx, dw) against torch's
    backward of F.layer_norm and F.rms_norm, run by autograd.grad on a
    saved graph (the host's autograd work overlaps the device's when calls
    run back to back)."""
    x, dy = torch.randn(8192, 4096, device="cuda"), torch.randn(8192, 4096, device="cuda")
    w, b = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    dx, dw, db = torch.empty_like(x), torch.empty_like(w), torch.empty_like(b)
    mean, rstd, rstd_rms = (torch.empty(8192, device="cuda") for _ in range(3))
    Call("layer_norm", [x, w, b], [torch.empty_like(x), mean, rstd], 1e-5)()
    ln_grad = Call("layer_norm_grad", [x, mean, rstd, dy, w, None, None], [dx, dw, db])
    Call("rms_norm", [x, w], [torch.empty_like(x), rstd_rms], 1e-6)()
    rms_grad = Call("rms_norm_grad", [x, rstd_rms, dy, w, None], [dx, dw])
    xr, wr, br = x.clone().requires_grad_(), w.clone().requires_grad_(), b.clone().requires_grad_()
    y_ln = F.layer_norm(xr, (4096,), wr, br, 1e-5)
    y_rms = F.rms_norm(xr, (4096,), wr, 1e-6)
    mib = x.numel() * 4
    print(f"norm gradients (dx, dw and layer_norm's db) on [8192, 4096] f32, median of 20, stream = {BACK_TO_BACK} calls:")
    for name, ours_fn, theirs_fn in (
        ("layer_norm_grad", ln_grad, lambda: torch.autograd.grad(y_ln, (xr, wr, br), dy, retain_graph=True)),
        ("rms_norm_grad", rms_grad, lambda: torch.autograd.grad(y_rms, (xr, wr), dy, retain_graph=True)),
    ):
        ours, theirs = median_ms(ours_fn, calls=BACK_TO_BACK), median_ms(theirs_fn, calls=BACK_TO_BACK)
        print(
            f"  {name:16s} opforge {ours:7.3f} ms {3 * mib / (ours * 1e-3) / 1e9:6.0f} GB/s (x, dy read, dx written) | "
            f"torch {theirs:7.3f} ms | torch time / opforge time {theirs / ours:.3f}"
        )


def main() -> int:
    if not torch.cuda.is_available():
        print("SKIP gpu_bench: torch sees no CUDA device")
        return 0
    if lib.opf_cuda_device_count() == 0:
        print("FAIL gpu_bench: libopforge sees no CUDA device (built without CUDA?)")
        return 1
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}")
    print(f"libopforge: {lib._name}; OPFORGE_CUBLASLT={os.environ.get('OPFORGE_CUBLASLT', '(unset)')}")
    print("== (a) checks against torch")
    for part in (check_eltwise, check_dense, check_rows):
        try:
            part()
        except Exception as e:  # a crash in one part is a failure, not the end of the run
            report(part.__name__, False, f"{type(e).__name__}: {e}")
    torch.cuda.synchronize()
    print(f"checks: {failures} failed")
    print("== (b) timings")
    try:
        bench_relu()
        bench_dense()
        bench_rows()
        bench_transformer_eltwise()
        bench_norm_grads()
    except Exception as e:
        report("timings", False, f"{type(e).__name__}: {e}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
