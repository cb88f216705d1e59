"""A user's install: plain ``pip install .`` (pip's build isolation: no framework
in the build environment, so no adapter is bundled) into a fresh venv, then
torch installed afterwards; ``import opforge.torch`` must then build the
torch adapter from the source the package ships, and work.

Slow (a venv, a package build, the pinned torch: a few minutes, several GiB
of disk, removed afterwards) and needs the package registry: run by ``make
test-install`` (part of ``make test``), with OPFORGE_INSTALL_TESTS=1.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    os.environ.get("OPFORGE_INSTALL_TESTS") != "1", reason="slow; run with OPFORGE_INSTALL_TESTS=1 (make test-install)"
)


def pinned(requirement: str) -> str:
    """The requirement line of ``requirement`` in requirements-dev.txt (e.g. "torch==2.15.0")."""
    for line in (REPO_ROOT / "requirements-dev.txt").read_text().splitlines():
        if re.match(rf"{re.escape(requirement)}\s*==", line):
            return line.split(";")[0].strip()
    raise LookupError(f"{requirement} is not pinned in requirements-dev.txt")


def run(command: list[str], timings: dict[str, float], step: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]
    timings[step] = time.perf_counter() - start
    assert result.returncode == 0, f"{step} failed:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture
def workdir() -> Iterator[Path]:
    """A directory under build/ (not the pytest temp dir, which keeps old runs), removed afterwards."""
    (REPO_ROOT / "build").mkdir(exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix="fresh-install-", dir=REPO_ROOT / "build"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


CHECK = """
import time
start = time.perf_counter()
import torch, opforge, opforge.torch as ot
imported = time.perf_counter()
assert torch.ops.opforge.relu(torch.tensor([-1.0, 2.0])).tolist() == [0.0, 2.0]
x = torch.tensor([-1.0, 3.0], requires_grad=True)
ot.relu(x).sum().backward()
assert x.grad.tolist() == [0.0, 1.0]
print(opforge.get_adapter_library("torch"))
print(f"import {imported - start:.2f} s")
"""


def test_plain_pip_install_then_torch(workdir: Path) -> None:
    timings: dict[str, float] = {}
    venv = workdir / "venv"
    base_python = getattr(sys, "_base_executable", sys.executable)
    run([base_python, "-m", "venv", str(venv)], timings, "venv")
    python = str(venv / "bin" / "python")
    env = dict(os.environ, OPFORGE_CACHE_DIR=str(workdir / "cache"))
    env.pop("PYTHONPATH", None)
    run([python, "-m", "pip", "install", "--quiet", str(REPO_ROOT)], timings, "pip install .", env=env)

    package = Path(run([python, "-c", "import opforge; print(opforge.__file__)"], timings, "import", env=env,
                       cwd=workdir).stdout.strip()).parent  # fmt: skip
    assert json.loads((package / "lib" / "adapters.json").read_text()) == {}  # nothing to build an adapter against
    assert not list((package / "lib").glob("libopforge_*.so"))
    assert (package / "adapters" / "torch.c").is_file()
    run([python, "-c", "import numpy, opforge.numpy as onp; assert onp.relu(numpy.array([-1.0])).tolist() == [0.0]"],
        timings, "numpy", env=env, cwd=workdir)  # fmt: skip
    missing = subprocess.run([python, "-c", "import opforge.torch"], capture_output=True, text=True, env=env, cwd=workdir)
    assert missing.returncode != 0 and "No module named 'torch'" in missing.stderr

    run([python, "-m", "pip", "install", "--quiet", pinned("torch")], timings, "pip install torch", env=env)
    first = run([python, "-c", CHECK], timings, "first import opforge.torch (builds the adapter)", env=env, cwd=workdir)
    adapter = Path(first.stdout.splitlines()[0])
    assert adapter.parent == workdir / "cache" / "adapters" and adapter.name.startswith("libopforge_torch-")
    again = run([python, "-c", CHECK], timings, "second import (cached adapter)", env=env, cwd=workdir)
    assert again.stdout.splitlines()[0] == str(adapter)
    print("\n".join(f"{step}: {seconds:.1f} s" for step, seconds in timings.items()))
