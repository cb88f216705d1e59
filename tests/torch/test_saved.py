"""What a backward keeps alive: an opforge op saves for its gradient only
what its gradient rules read, and of an argument passed only where the
rule's row declares it shape-only ("like: shape": add's sum_to) not even
that, so that a training step holds no more memory than with PyTorch's own
ops. Measured with torch.autograd.graph.saved_tensors_hooks against the
built-in of each op, then the gradients checked to be unchanged."""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch
import torch.nn.functional as F

import opforge.torch  # noqa: F401  (registers torch.ops.opforge)

ops = torch.ops.opforge

N, M = 32, 64


def saved_bytes(fn: Callable[..., Any], *args: torch.Tensor) -> tuple[int, Any]:
    """Bytes of the distinct storages the graph of fn(*args) saves for backward, and fn's result."""
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn(*args)
    return sum(storages.values()), out


def first(y: Any) -> torch.Tensor:
    return y[0] if isinstance(y, (tuple, list)) else y


# (name, opforge's op, PyTorch's, the shapes of its inputs)
CASES: list[tuple[str, Callable[..., Any], Callable[..., Any], list[tuple[int, ...]]]] = [
    ("relu", lambda x: ops.relu(x), torch.relu, [(N, M)]),
    ("add", lambda a, b: ops.add(a, b), torch.add, [(N, M), (N, M)]),
    ("add_broadcast", lambda a, b: ops.add(a, b), torch.add, [(N, M), (M,)]),
    ("mul", lambda a, b: ops.mul(a, b), torch.mul, [(N, M), (M,)]),
    ("gelu", lambda x: ops.gelu(x), F.gelu, [(N, M)]),
    ("silu", lambda x: ops.silu(x), F.silu, [(N, M)]),
    ("sigmoid", lambda x: ops.sigmoid(x), torch.sigmoid, [(N, M)]),
    ("tanh", lambda x: ops.tanh(x), torch.tanh, [(N, M)]),
    ("softmax", lambda x: ops.softmax(x), lambda x: torch.softmax(x, -1), [(N, M)]),
    ("log_softmax", lambda x: ops.log_softmax(x), lambda x: torch.log_softmax(x, -1), [(N, M)]),
    ("layer_norm", lambda x, w, b: first(ops.layer_norm(x, w, b)), lambda x, w, b: F.layer_norm(x, [M], w, b),
     [(N, M), (M,), (M,)]),
    ("rms_norm", lambda x, w: first(ops.rms_norm(x, w)), lambda x, w: F.rms_norm(x, [M], w), [(N, M), (M,)]),
]


@pytest.mark.parametrize("name, ours, theirs, shapes", CASES, ids=[c[0] for c in CASES])
def test_saves_no_more_than_torch(name: str, ours: Callable[..., Any], theirs: Callable[..., Any],
                                  shapes: list[tuple[int, ...]]) -> None:
    gen = torch.Generator().manual_seed(3)
    args = [torch.randn(s, generator=gen).requires_grad_() for s in shapes]
    ours_bytes, y = saved_bytes(ours, *args)
    theirs_bytes, ref = saved_bytes(theirs, *args)
    assert ours_bytes <= theirs_bytes, f"{name}: opforge saves {ours_bytes} bytes, PyTorch {theirs_bytes}"
    # and the gradients are PyTorch's
    dy = torch.randn(ref.shape, generator=gen)
    got = torch.autograd.grad(first(y), args, dy)
    want = torch.autograd.grad(ref, args, dy)
    for g, w, a in zip(got, want, args):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5, msg=lambda m: f"{name}, input of shape {a.shape}: {m}")


def test_add_saves_nothing_and_its_second_derivative_still_works() -> None:
    """add's rules read its inputs' shapes only: nothing is saved, and the
    gradient of the gradient (through sum_to, itself saving shapes only)
    still broadcasts back up to the shapes."""
    a = torch.randn(4, 1, 3, dtype=torch.float64, requires_grad=True)
    b = torch.randn(5, 1, dtype=torch.float64, requires_grad=True)
    nbytes, y = saved_bytes(lambda a, b: ops.add(a, b) * 1.0, a, b)
    assert nbytes == 0
    torch.autograd.gradcheck(lambda a, b: ops.add(a, b), (a, b))
    torch.autograd.gradgradcheck(lambda a, b: ops.add(a, b), (a, b))
    torch.autograd.gradgradcheck(lambda a, b: ops.mul(a, b), (a, b))


def test_forward_mode_still_has_what_its_rules_read() -> None:
    """Under forward-mode AD every tangent rule finds its values (the
    Function then saves everything, as the tangent rules may read more)."""
    x = torch.randn(6, 7, dtype=torch.float64)
    t = torch.randn(6, 7, dtype=torch.float64)
    w = torch.randn(7, dtype=torch.float64)
    for fn in (lambda x: ops.softmax(x), lambda x: ops.layer_norm(x, w, None)[0], lambda x: ops.add(x, w)):
        _, got = torch.func.jvp(fn, (x,), (t,))
        with torch.autograd.forward_ad.dual_level():
            dual = torch.autograd.forward_ad.make_dual(x, t)
            via_dual = torch.autograd.forward_ad.unpack_dual(fn(dual)).tangent
        eps = 1e-6
        want = (fn(x + eps * t) - fn(x - eps * t)) / (2 * eps)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-7)
        torch.testing.assert_close(via_dual, want, rtol=1e-5, atol=1e-7)
