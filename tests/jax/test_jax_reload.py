"""Loading a changed op library again under the same table name: XLA cannot
drop an FFI target, so the new rows get targets of their own and the
namespace loaded with them runs the new code."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Iterator

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from reloadlib import times_source  # tests/python

import opforge.jax as oj

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("OPFORGE_CACHE_DIR", str(tmp_path / "cache"))
    yield


def test_a_changed_source_runs_the_new_code(tmp_path: Path) -> None:
    source = tmp_path / "jaxreload.c"
    source.write_text(times_source("jaxreload", 2.0))
    first = oj.load_ops(source)
    x = jnp.arange(3.0)
    np.testing.assert_array_equal(first.times(x), 2 * np.arange(3.0))
    assert first._ops["times"].target == "jaxreload.times"
    assert oj.load_ops(source)._ops["times"].target == "jaxreload.times"  # the same library: the same target

    source.write_text(times_source("jaxreload", 3.0, shift=True))
    second = oj.load_ops(source)
    assert second._ops["times"].target.startswith("jaxreload.times.")
    np.testing.assert_array_equal(second.times(x, shift=1.0), 3 * np.arange(3.0) + 1)
    np.testing.assert_array_equal(jax.jit(lambda v: second.times(v))(x), 3 * np.arange(3.0))
    np.testing.assert_array_equal(jax.grad(lambda v: second.times(v).sum())(x), [3.0, 3.0, 3.0])
    np.testing.assert_array_equal(first.times(x), 2 * np.arange(3.0))  # the first namespace keeps its code

    source.write_text(times_source("jaxreload", 4.0))
    third = oj.load_ops(source)
    assert len({ns._ops["times"].target for ns in (first, second, third)}) == 3
    np.testing.assert_array_equal(third.times(x), 4 * np.arange(3.0))
