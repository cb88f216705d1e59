"""Bad inputs raise RuntimeError naming the op, the argument and what was expected; never a crash."""

from __future__ import annotations

import pytest
import torch

import opforge.torch as ot

ops = torch.ops.opforge


def raises(pattern: str) -> pytest.RaisesContext:  # type: ignore[type-arg]
    return pytest.raises(RuntimeError, match=pattern)


def test_wrong_dtype() -> None:
    with raises(r"opforge::relu: x has dtype int64; expected float32 or float64"):
        ops.relu(torch.ones(3, dtype=torch.int64))
    with raises(r"opforge::add: b has dtype float16; expected float32 or float64"):
        ops.add(torch.ones(3), torch.ones(3, dtype=torch.float16))
    with raises(r"opforge::add: .*dtype mismatch.*b is float64"):
        ops.add(torch.ones(3), torch.ones(3, dtype=torch.float64))


def test_shape_mismatch_in_add() -> None:
    with raises(r"opforge::add: shape mismatch: a is \[2,3\], b is \[3,2\]"):
        ops.add(torch.ones(2, 3), torch.ones(3, 2))


def test_wrong_rank_in_dense() -> None:
    with raises(r"opforge::dense: w must have rank 2, got rank 1"):
        ops.dense(torch.ones(2, 3), torch.ones(3))
    with raises(r"opforge::dense: .*x.*rank 2"):
        ops.dense(torch.ones(2, 3, 4), torch.ones(4, 5))
    with raises(r"opforge::dense: .*"):
        ops.dense(torch.ones(2, 3), torch.ones(4, 5))  # inner dimensions differ
    with raises(r"opforge::dense: .*b"):
        ops.dense(torch.ones(2, 3), torch.ones(3, 5), torch.ones(4))


def test_bad_enum_attribute() -> None:
    with raises(r"opforge::dense: activation must be one of 'none', 'relu', got 'gelu'"):
        ops.dense(torch.ones(2, 3), torch.ones(3, 5), activation="gelu")


def test_mismatched_devices() -> None:
    # A meta tensor with a CPU tensor dispatches to the fake kernel, which checks devices.
    with raises(r"opforge::add: b is on meta, expected cpu"):
        ops.add(torch.ones(3), torch.ones(3, device="meta"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_tensor_with_cpu_tensor() -> None:
    with pytest.raises((RuntimeError, NotImplementedError)):
        ops.add(torch.ones(3), torch.ones(3, device="cuda"))


def test_in_place_op_refuses_a_tensor_requiring_grad() -> None:
    leaf = torch.randn(3, requires_grad=True)
    with raises(r"opforge::relu_: x requires grad"):
        ops.relu_(leaf)
    with torch.no_grad():  # as torch allows
        ops.relu_(leaf)
    assert (leaf >= 0).all()
    with pytest.raises(RuntimeError):  # torch's own refusal, for comparison
        torch.relu_(torch.randn(3, requires_grad=True))


def test_wrong_argument_types_are_caught_by_the_schema() -> None:
    with pytest.raises((RuntimeError, TypeError)):
        ops.scale(torch.ones(2), alpha="big")
    with pytest.raises((RuntimeError, TypeError)):
        ops.relu([1.0, 2.0])


def test_errors_leave_no_handles_behind() -> None:
    """Each failure releases what the kernel held: many failing calls, then
    the inputs' reference counts are what they were."""
    import sys

    x = torch.ones(2, 3)
    w = torch.ones(3)
    before = sys.getrefcount(x), x._version
    for _ in range(2000):
        with pytest.raises(RuntimeError):
            ops.dense(x, w, None, activation="none")
        with pytest.raises(RuntimeError):
            ops.dense(x, torch.ones(3, 5), activation="bad")
    assert (sys.getrefcount(x), x._version) == before
    assert ot.relu(x).equal(x)  # still usable


def test_errors_from_other_threads() -> None:
    from concurrent.futures import ThreadPoolExecutor

    def bad(_: int) -> str:
        try:
            ops.add(torch.ones(2, 3), torch.ones(3, 2))
        except RuntimeError as exc:
            return str(exc)
        return "no error"

    with ThreadPoolExecutor(4) as pool:
        messages = list(pool.map(bad, range(64)))
    assert all("opforge::add: shape mismatch" in m for m in messages)


def test_c_kernel_checks_devices() -> None:
    """The CPU kernel itself refuses tensors of another device (called here
    directly below the dispatcher, as a mixed-device call would reach it)."""
    cpu_only = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
    with raises(r"opforge::add: b is on meta, expected cpu like the other tensors"):
        ops.add.default.redispatch(cpu_only, torch.ones(3), torch.ones(3, device="meta"))
    with raises(r"opforge::relu: x is on meta; expected a CPU"):
        ops.relu.default.redispatch(cpu_only, torch.ones(3, device="meta"))
