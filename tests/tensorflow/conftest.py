"""Fixtures of the TensorFlow adapter tests.

Without TensorFlow (or Keras) these tests are skipped, unless
OPFORGE_REQUIRE_FRAMEWORKS=1 (``make test-tensorflow``), which makes a missing
framework an error (each test module starts with pytest.importorskip). The
NumPy references come from tests/python/references.py.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

_missing = [name for name in ("tensorflow", "keras") if importlib.util.find_spec(name) is None]
if _missing and os.environ.get("OPFORGE_REQUIRE_FRAMEWORKS") == "1":
    raise RuntimeError(f"OPFORGE_REQUIRE_FRAMEWORKS=1 but {', '.join(_missing)} cannot be imported")


def pytest_report_header(config: pytest.Config) -> str:
    if _missing:
        return f"TensorFlow adapter tests skipped: no {', '.join(_missing)}"
    import opforge.tensorflow as otf
    import tensorflow as tf

    return f"tensorflow {tf.__version__}, adapter {otf.library_path}"
