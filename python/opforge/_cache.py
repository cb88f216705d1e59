"""The build cache's upkeep: what it holds, and removing what has not been
used.

Everything opforge compiles goes to the cache directory (``_build.cache_dir()``,
which the functions here take as ``root``): users' op libraries with their
manifests and lock files in ``ops/``, the objects of libraries built from
several files in ``ops/objects/``, source text given as a str in ``ops/src/``,
copies of rebuilt libraries in ``libs/`` and framework adapters in
``adapters/``. Every name carries a key, so an edit adds files and
never replaces one: without upkeep the cache only grows.

A file's last use is the later of its access and modification times; a
lookup that finds a file marks it used (its access time, set explicitly, so
that ``noatime`` mounts do not matter; its modification time stays the
build's). After every build that wrote a file, the cache is trimmed to
``OPFORGE_CACHE_SIZE`` (default 2G; ``0``: no limit): the files used least
recently go first, down to 90% of the limit, but never one used within the
last hour, which another process may be about to load. ``clean()`` removes
everything, or what has not been used for a given time. Removing a library
that a process has loaded does not affect it; the next lookup builds it again.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional, Union

__all__ = ["CacheSection", "cache_limit", "clean", "last_use", "mark_used", "sections", "trim"]

#: The cache's folders, each with what it holds.
SECTIONS = {
    "ops": "op libraries, their manifests and locks",
    "ops/objects": "objects of libraries built from several files",
    "ops/src": "source text given to build() as a str",
    "libs": "copies of libraries rebuilt at a path already loaded",
    "adapters": "framework adapters compiled here",
}
DEFAULT_LIMIT = 2 << 30
#: Seconds since its last use within which trim() leaves a file alone.
GRACE = 3600.0
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


@dataclass(frozen=True)
class CacheSection:
    """One folder of the cache: its files, their bytes and their last uses
    (epoch seconds; None when it holds no file)."""

    name: str
    description: str
    files: int
    bytes: int
    oldest_use: Optional[float]
    newest_use: Optional[float]


def last_use(st: os.stat_result) -> float:
    """When a file was last used: the later of its access and modification times."""
    return max(st.st_atime, st.st_mtime)


def mark_used(*paths: Union[str, Path]) -> None:
    """Records a use of each file (its access time, now); missing files and
    read-only caches are passed over."""
    now = time.time_ns()
    for path in paths:
        try:
            os.utime(path, ns=(now, os.stat(path).st_mtime_ns))
        except OSError:
            pass


def _files_of(folder: Path) -> Iterator[tuple[Path, os.stat_result]]:
    """The files of one folder (not its subfolders), with their stats."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.is_file(follow_symlinks=False):
                yield Path(entry.path), entry.stat(follow_symlinks=False)
        except OSError:
            continue  # removed meanwhile


def _files(root: Path) -> Iterator[tuple[Path, os.stat_result]]:
    """Every file of the cache's sections, with its stat."""
    for section in SECTIONS:
        yield from _files_of(root / section)


def sections(root: Path) -> list[CacheSection]:
    """What each folder of the cache at ``root`` holds."""
    result = []
    for section, description in SECTIONS.items():
        files = [st for _, st in _files_of(root / section)]
        uses = [last_use(st) for st in files]
        result.append(
            CacheSection(
                section, description, len(files), sum(st.st_size for st in files),
                min(uses) if uses else None, max(uses) if uses else None,
            )
        )  # fmt: skip
    return result


def cache_limit() -> int:
    """The cache's size limit in bytes: ``OPFORGE_CACHE_SIZE`` (a number of
    bytes, or with K, M, G or T: binary multiples), else 2 GiB; 0: none."""
    text = os.environ.get("OPFORGE_CACHE_SIZE", "").strip()
    if not text:
        return DEFAULT_LIMIT
    match = re.fullmatch(r"(\d+(?:\.\d*)?)\s*([KMGT]?)(?:i?B)?", text, re.IGNORECASE)
    if match is None:
        raise ValueError(
            f"opforge: OPFORGE_CACHE_SIZE={text!r}: expected a size such as 500M or 2G (bytes, K, M, G or T; "
            "0 for no limit)"
        )
    return int(float(match.group(1)) * _UNITS[match.group(2).upper()])


def _remove(files: list[tuple[Path, os.stat_result]]) -> tuple[int, int]:
    count = size = 0
    for path, st in files:
        try:
            os.unlink(path)
        except FileNotFoundError:
            continue  # another process removed it
        count += 1
        size += st.st_size
    return count, size


def _in_flight(path: Path, st: os.stat_result, now: float) -> bool:
    """A build's temporary file, written within GRACE seconds: another
    process's compiler may be writing it."""
    return path.name.startswith(".tmp-") and last_use(st) >= now - GRACE


def clean(root: Path, unused_for: Optional[float] = None) -> tuple[int, int]:
    """Removes every file of the cache at ``root``, or, with ``unused_for`` (seconds),
    those not used for that long; never a build's temporary file that may
    still be written. Returns the files and bytes removed."""
    if unused_for is not None and not unused_for >= 0:
        raise ValueError(f"opforge: clean(unused_for={unused_for!r}): expected seconds, 0 or more")
    now = time.time()
    cutoff = None if unused_for is None else now - unused_for
    chosen = [
        (path, st)
        for path, st in _files(root)
        if (cutoff is None or last_use(st) < cutoff) and not _in_flight(path, st, now)
    ]
    return _remove(chosen)


def trim(root: Path, limit: Optional[int] = None) -> tuple[int, int]:
    """Removes the files used least recently while the cache at ``root`` is over
    ``limit`` bytes (default: cache_limit()), down to 90% of it, leaving
    those used within GRACE seconds. Returns the files and bytes removed."""
    limit = cache_limit() if limit is None else limit
    if limit <= 0:
        return 0, 0
    files = list(_files(root))
    total = sum(st.st_size for _, st in files)
    if total <= limit:
        return 0, 0
    cutoff = time.time() - GRACE
    chosen = []
    for path, st in sorted(files, key=lambda item: last_use(item[1])):
        if total <= limit * 0.9 or last_use(st) >= cutoff:
            break
        chosen.append((path, st))
        total -= st.st_size
    return _remove(chosen)
