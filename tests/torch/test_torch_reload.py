"""Loading a changed op library again under the same table name: the new code
runs, from torch.ops and from operator objects taken before the reload."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Iterator

import pytest
import torch
from reloadlib import times_source  # tests/python

import opforge.torch as ot

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("OPFORGE_CACHE_DIR", str(tmp_path / "cache"))
    yield


def gradient(op: object, x: torch.Tensor, **kwargs: object) -> torch.Tensor:
    x = x.clone().requires_grad_()
    op(x, **kwargs).sum().backward()  # type: ignore[operator]
    assert x.grad is not None
    return x.grad


def test_a_changed_source_replaces_the_ops(tmp_path: Path) -> None:
    source = tmp_path / "torchreload.c"
    source.write_text(times_source("torchreload", 2.0))
    ops = ot.load_ops(source)
    assert ops is torch.ops.torchreload
    x = torch.arange(4.0, dtype=torch.float64)
    torch.testing.assert_close(ops.times(x), 2 * x)
    stale_packet, stale_overload = torch.ops.torchreload.times, torch.ops.torchreload.times.default
    assert ot.load_ops(source) is ops  # the same library again: nothing to do

    source.write_text(times_source("torchreload", 3.0))
    ops = ot.load_ops(source)
    torch.testing.assert_close(torch.ops.torchreload.times(x), 3 * x)
    torch.testing.assert_close(gradient(torch.ops.torchreload.times, x), torch.full_like(x, 3.0))
    torch.testing.assert_close(stale_packet(x), 3 * x)  # taken before the reload: runs the new kernel
    torch.testing.assert_close(stale_overload(x), 3 * x)
    result = torch.library.opcheck(torch.ops.torchreload.times.default, (torch.randn(3),))
    assert all(v == "SUCCESS" for v in result.values()), result
    compiled = torch.compile(lambda v: torch.ops.torchreload.times(v) + 1, fullgraph=True, backend="eager")
    torch.testing.assert_close(compiled(x), 3 * x + 1)


def test_a_changed_schema_is_registered_anew(tmp_path: Path) -> None:
    source = tmp_path / "schemareload.c"
    source.write_text(times_source("schemareload", 2.0))
    ot.load_ops(source)
    assert str(torch.ops.schemareload.times.default._schema) == "schemareload::times(Tensor x) -> Tensor"
    source.write_text(times_source("schemareload", 4.0, shift=True))
    ops = ot.load_ops(source)
    assert str(ops.times.default._schema) == "schemareload::times(Tensor x, *, float shift=0.) -> Tensor"
    x = torch.ones(3)
    torch.testing.assert_close(ops.times(x, shift=1.0), torch.full((3,), 5.0))
    torch.testing.assert_close(gradient(ops.times, x, shift=1.0), torch.full((3,), 4.0))
    result = torch.library.opcheck(ops.times.default, (x,), {"shift": 0.5})
    assert all(v == "SUCCESS" for v in result.values()), result


def test_source_text_reloads_too() -> None:
    first = ot.load_ops(times_source("textreload", 2.0))
    torch.testing.assert_close(first.times(torch.ones(2)), torch.full((2,), 2.0))
    second = ot.load_ops(times_source("textreload", -1.0))
    torch.testing.assert_close(second.times(torch.ones(2)), torch.full((2,), -1.0))


def test_opforges_own_namespace_is_not_replaced(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="'opforge' is opforge's own"):
        ot.load_ops(times_source("opforge", 2.0))
    torch.testing.assert_close(torch.ops.opforge.relu(torch.tensor([-1.0, 2.0])), torch.tensor([0.0, 2.0]))


def test_the_adapters_slots_are_reused() -> None:
    sources = [times_source("slotreload", 1.0), times_source("slotreload", 2.0)]
    room = ot._ADAPTER.opforge_torch_capacity()
    for i in range(140):  # two libraries in turn, each load a reload: 280 rows, more than the 256 slots
        ops = ot.load_ops(sources[i % 2])
    torch.testing.assert_close(ops.times(torch.ones(1)), torch.full((1,), 2.0))
    assert ot._ADAPTER.opforge_torch_capacity() == room - 2
