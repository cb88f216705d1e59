"""Loading an op library again: TensorFlow cannot unregister an op, so the same
library again gives the ops registered first, and a changed one is refused
with a message that says how to proceed."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
otf = pytest.importorskip("opforge.tensorflow")
from reloadlib import times_source  # noqa: E402  (tests/python)

import opforge  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("OPFORGE_CACHE_DIR", str(tmp_path / "cache"))
    yield


def test_the_same_source_again_gives_the_registered_ops(tmp_path: Path) -> None:
    source = tmp_path / "tfsame.c"
    source.write_text(times_source("tfsame", 2.0))
    ops = otf.load_ops(source)
    assert otf.load_ops(source) is ops
    library = opforge.build(source).path
    assert otf.load_ops(library) is ops  # the same bytes
    shutil.rmtree(tmp_path / "cache")
    assert otf.load_ops(source) is ops  # compiled anew, to the same bytes


def test_a_changed_source_is_refused_with_how_to_proceed(tmp_path: Path) -> None:
    source = tmp_path / "tfreload.c"
    source.write_text(times_source("tfreload", 2.0))
    ops = otf.load_ops(source)
    source.write_text(times_source("tfreload", 3.0))
    with pytest.raises(RuntimeError) as caught:
        otf.load_ops(source)
    message = str(caught.value)
    assert str(tmp_path / "tfreload.c") in message
    assert "TfreloadTimes, TfreloadTimesGrad" in message and "table 'tfreload'" in message
    assert "restart the Python process" in message and "prefix=" in message
    np.testing.assert_array_equal(ops.times(tf.ones(2)), [2.0, 2.0])  # the registered ops are unchanged
    renamed = otf.load_ops(source, prefix="TfreloadV2")
    np.testing.assert_array_equal(renamed.times(tf.ones(2)), [3.0, 3.0])
    assert renamed.times.tf_op_name == "TfreloadV2Times"
    x = tf.ones(3)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = renamed.times(x)
    np.testing.assert_array_equal(tape.gradient(y, x), [3.0, 3.0, 3.0])


def test_op_names_taken_elsewhere_are_refused(tmp_path: Path) -> None:
    source = times_source("tfclash", 2.0).replace('.name = "times",', '.name = "relu",')
    with pytest.raises(ValueError, match=r"TensorFlow ops OpfRelu already exist; pass another prefix"):
        otf.load_ops(source, prefix="Opf")
