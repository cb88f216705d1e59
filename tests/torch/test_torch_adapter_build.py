"""The torch adapter compiled at first import when no bundled one matches the
installed torch (here: bundled ones hidden)."""

from __future__ import annotations

from pathlib import Path

import torch
from adapterlib import check_built_adapter  # tests/python

from opforge import _build


def test_the_adapter_is_built_from_its_source_and_cached(tmp_path: Path) -> None:
    check = "import torch, opforge.torch\nprint(torch.ops.opforge.relu(torch.tensor([-1.0, 2.0])).tolist())"
    check_built_adapter("torch", check, "[0.0, 2.0]", tmp_path)


def test_a_bundled_adapter_serves_only_its_torch_version() -> None:
    assert _build.prebuilt_adapter("torch", str(torch.__version__)) is not None
    assert _build.prebuilt_adapter("torch", "1.0.0") is None
