"""Fixtures of the PyTorch adapter tests.

Without torch (or without the adapter in this build of opforge) the tests
here are not collected (a module named on the command line skips itself),
unless OPFORGE_REQUIRE_FRAMEWORKS=1 (``make test-torch``), which makes that an
error.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "tests" / "python"))  # references.py, test_user_ops.py

_REQUIRED = os.environ.get("OPFORGE_REQUIRE_FRAMEWORKS") == "1"

_UNAVAILABLE = ""
try:
    import torch  # noqa: F401

    import opforge.torch  # noqa: F401
except ImportError as exc:
    if _REQUIRED:
        raise
    # (pytest.skip here, in a conftest, is an error in recent pytest.) Not
    # collected when the directory is run; a module named on the command line
    # skips itself (it starts with the same imports under try).
    _UNAVAILABLE = f"PyTorch adapter unavailable: {exc}"
    collect_ignore_glob = ["test_*.py"]


def pytest_report_header(config: pytest.Config) -> str:
    return _UNAVAILABLE or f"torch {torch.__version__}, adapter {opforge.torch.library_path()}"
