"""Fixtures of the PyTorch adapter tests.

Without torch (or without the adapter in this build of opforge) every test
here is skipped, unless OPFORGE_REQUIRE_FRAMEWORKS=1 (``make test-torch``),
which makes that an error.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "tests" / "python"))  # references.py, test_user_ops.py

_REQUIRED = os.environ.get("OPFORGE_REQUIRE_FRAMEWORKS") == "1"

try:
    import torch  # noqa: F401

    import opforge.torch  # noqa: F401
except ImportError as exc:
    if _REQUIRED:
        raise
    pytest.skip(f"PyTorch adapter unavailable: {exc}", allow_module_level=True)
