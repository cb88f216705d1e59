"""Shared setup of the opforge.jax tests.

XLA_FLAGS gets --xla_force_host_platform_device_count=2 before jax is
imported (the shard_map tests need two CPU devices), and float64 is enabled
(jax_enable_x64) so that every op is tested in float32 and float64.

Without jax the tests skip, unless OPFORGE_REQUIRE_FRAMEWORKS=1 (as `make
test-jax` sets): then a missing jax is an error.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "tests" / "python"))  # references.py, test_user_ops.py
_IN_TREE = REPO_ROOT / "python"
if importlib.util.find_spec("opforge") is None and any((_IN_TREE / "opforge").glob("_capi*.so")):
    sys.path.insert(0, str(_IN_TREE))

if "jax" not in sys.modules:
    flag = "--xla_force_host_platform_device_count=2"
    if flag not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + flag).strip()

_REQUIRED = os.environ.get("OPFORGE_REQUIRE_FRAMEWORKS") == "1"
if importlib.util.find_spec("jax") is None:
    if _REQUIRED:
        raise ImportError("opforge.jax tests: jax is not installed (OPFORGE_REQUIRE_FRAMEWORKS=1)")
    collect_ignore_glob = ["test_*.py"]
else:
    import jax

    jax.config.update("jax_enable_x64", True)
    # The tests run on the CPU even where jax has a GPU (test_jax_cuda.py puts
    # its arrays on the GPU explicitly).
    jax.config.update("jax_default_device", jax.devices("cpu")[0])

    import opforge  # noqa: E402

    try:
        import opforge.jax  # noqa: F401
    except ImportError:
        if _REQUIRED:
            raise
        collect_ignore_glob = ["test_*.py"]

    def pytest_report_header(config: pytest.Config) -> str:
        import opforge.jax as oj

        info = opforge.info()
        devices = ", ".join(str(d) for d in jax.devices())
        return (
            f"opforge {info['version']} from {Path(opforge.__file__).parent} (isa {info['isa']}); "
            f"jax {jax.__version__}, XLA FFI API {oj.ffi_api_version()}; devices {devices}"
        )


def pytest_configure(config: pytest.Config) -> None:
    # Tests whose time is XLA compiling higher-order compositions (third
    # order, jacfwd of jacrev, check_grads to second order) rather than
    # opforge running: `make test-python-asan` leaves them out (-m "not
    # heavy"); the unsanitized run, and the C suites under ASan, cover the
    # rows they call.
    config.addinivalue_line("markers", "heavy: compile-heavy; left out of the ASan run")
