"""Importing a framework adapter with the bundled adapters hidden
(OPFORGE_PREBUILT_ADAPTERS=0), in a child process with a cache of its own:
the adapter is then compiled from the C source the package ships."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CHILD = """
import sys
from pathlib import Path
exec(sys.argv[1])  # the check: imports the adapter module and prints a result
maps = (line.split()[-1] for line in Path("/proc/self/maps").read_text().splitlines())
print("adapter:", *sorted({p for p in maps if Path(p).name.startswith("libopforge_")}))
"""


def import_building_the_adapter(check: str, cache: Path) -> tuple[list[str], list[str]]:
    """Runs ``check`` in a child process that cannot use a bundled adapter;
    returns its printed lines before the last and the adapter libraries it had mapped."""
    env = dict(os.environ, OPFORGE_PREBUILT_ADAPTERS="0", OPFORGE_CACHE_DIR=str(cache), TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, "-c", CHILD, check], capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[-1].startswith("adapter:")
    return lines[:-1], lines[-1].split()[1:]


def check_built_adapter(framework: str, check: str, expected: str, tmp_path: Path) -> None:
    """The adapter of ``framework`` is compiled into the cache on first import,
    used (the bundled one is not mapped), and reused by the next process."""
    cache = tmp_path / "cache"
    printed, mapped = import_building_the_adapter(check, cache)
    assert printed == [expected]
    built = sorted((cache / "adapters").glob(f"libopforge_{framework}-*.so"))
    assert len(built) == 1 and mapped == [str(built[0])], mapped
    stamp = built[0].stat().st_mtime_ns
    printed, mapped = import_building_the_adapter(check, cache)
    assert printed == [expected] and mapped == [str(built[0])]
    assert built[0].stat().st_mtime_ns == stamp  # from the cache
