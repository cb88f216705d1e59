"""The XLA adapter compiled at first import when no bundled one matches the
installed jaxlib (here: bundled ones hidden)."""

from __future__ import annotations

from pathlib import Path

import jaxlib.version
from adapterlib import check_built_adapter  # tests/python

from opforge import _build


def test_the_adapter_is_built_from_its_source_and_cached(tmp_path: Path) -> None:
    check = "import jax.numpy as jnp, opforge.jax as oj\nprint(oj.relu(jnp.array([-1.0, 2.0])).tolist())"
    check_built_adapter("xla", check, "[0.0, 2.0]", tmp_path)


def test_a_bundled_adapter_serves_only_its_jaxlib_version() -> None:
    assert _build.prebuilt_adapter("xla", jaxlib.version.__version__) is not None
    assert _build.prebuilt_adapter("xla", "0.0.1") is None
