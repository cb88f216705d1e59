"""Shared fixtures of the opforge Python tests.

Which opforge is tested: the installed one (``pip install .``) if there is
one, else the in-tree package built in place (``python setup.py build_ext
--inplace`` leaves python/opforge/_capi*.so). The pytest header says which.

The NumPy references and tolerances are in references.py.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Iterator

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
_IN_TREE = REPO_ROOT / "python"
if importlib.util.find_spec("opforge") is None and any((_IN_TREE / "opforge").glob("_capi*.so")):
    sys.path.insert(0, str(_IN_TREE))

import opforge  # noqa: E402


def pytest_report_header(config: pytest.Config) -> str:
    info = opforge.info()
    return f"opforge {info['version']} from {Path(opforge.__file__).parent} (isa {info['isa']}, {info['num_threads']} threads)"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("OPFORGE_BIG_TESTS") == "1":
        return
    skip = pytest.mark.skip(reason="needs OPFORGE_BIG_TESTS=1 (many GiB of memory)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def restore_threads() -> Iterator[None]:
    """Puts the library's thread count back after a test that changes it."""
    before = opforge.get_num_threads()
    yield
    opforge.set_num_threads(before)
