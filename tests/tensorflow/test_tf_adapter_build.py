"""The TensorFlow adapter compiled at first import when no bundled one matches
the installed TensorFlow (here: bundled ones hidden)."""

from __future__ import annotations

from pathlib import Path

import pytest

tf = pytest.importorskip("tensorflow")
from adapterlib import check_built_adapter  # noqa: E402  (tests/python)

from opforge import _build  # noqa: E402


def test_the_adapter_is_built_from_its_source_and_cached(tmp_path: Path) -> None:
    check = "import opforge.tensorflow as otf\nprint(otf.relu([-1.0, 2.0]).numpy().tolist())"
    check_built_adapter("tensorflow", check, "[0.0, 2.0]", tmp_path)


def test_a_bundled_adapter_serves_only_its_tensorflow_version() -> None:
    assert _build.prebuilt_adapter("tensorflow", tf.__version__) is not None
    assert _build.prebuilt_adapter("tensorflow", "2.0.0") is None
