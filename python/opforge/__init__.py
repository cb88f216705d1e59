"""opforge: ML kernels written once in C, used from NumPy and other frameworks.

- ``opforge.numpy``: every op of the table as a NumPy function;
- ``opforge.get_include()`` / ``get_library()`` / ``get_library_dir()``: where
  the bundled ``opforge.h`` and ``libopforge`` are, to build C, Cython or
  framework extensions against the very library this package loads;
- ``opforge.info()``, ``opforge.set_num_threads()``: the runtime;
- ``opforge.build(source)``: compiles a C op library (cached; see
  ``opforge._build``); every adapter's ``load_ops`` takes a ``.c`` file or C
  source text too. ``BuildError`` is what a failed compile raises.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import _status
from ._build import BuildError, BuildWarning, build
from ._capi import ffi, lib

__all__ = [
    "__version__",
    "BuildError",
    "BuildWarning",
    "build",
    "get_include",
    "get_library",
    "get_library_dir",
    "get_adapter_library",
    "info",
    "get_num_threads",
    "set_num_threads",
]

_PACKAGE_DIR = Path(__file__).resolve().parent

__version__: str = ffi.string(lib.opf_version()).decode()


def get_include() -> str:
    """Directory holding ``opforge.h`` (for ``-I``)."""
    return str(_PACKAGE_DIR / "include")


def get_library_dir() -> str:
    """Directory holding the bundled ``libopforge`` (for ``-L`` and an rpath)."""
    return str(_PACKAGE_DIR / "lib")


def get_library() -> str:
    """Path of the bundled ``libopforge`` shared library, the one this package loads.

    Link extensions against this file, or with ``-L{get_library_dir()}
    -lopforge``, and an rpath to get_library_dir(): either way they need the
    library by its soname, which the process has already loaded, so one copy
    of libopforge serves everyone.
    """
    # lib/libopforge.so, if present, is a linker script for -lopforge: skip it.
    candidates = sorted(Path(get_library_dir()).glob("libopforge.so.*"))
    if not candidates:
        raise FileNotFoundError(f"opforge: no libopforge.so.* in {get_library_dir()}; was the package built?")
    return str(candidates[0])


def get_adapter_library(framework: str) -> str:
    """Path of the adapter library for ``framework`` ("torch", "tensorflow", "xla").

    The bundled one when it was built against the installed version of the
    framework; otherwise the adapter is compiled from its C source (bundled
    in the package) on first use and cached (see ``opforge._build``). Imports
    the framework. Raises ImportError when the adapter can be neither found
    nor built.
    """
    from ._build import adapter_library

    return adapter_library(framework)


def info() -> dict[str, Any]:
    """Version, kernel instruction set in use, thread count and usable CUDA devices."""
    return {
        "version": __version__,
        "isa": ffi.string(lib.opf_isa_name(lib.opf_get_isa())).decode(),
        "num_threads": int(lib.opf_get_num_threads()),
        "cuda_devices": int(lib.opf_cuda_device_count()),
    }


def get_num_threads() -> int:
    """Threads the library's pool uses for later calls."""
    return int(lib.opf_get_num_threads())


def set_num_threads(num_threads: int) -> None:
    """Sets the threads (>= 1) the library uses for later calls; ValueError if invalid."""
    if isinstance(num_threads, bool) or not isinstance(num_threads, int):
        raise TypeError(f"opforge.set_num_threads: expected an int, got {type(num_threads).__name__}")
    if not 1 <= num_threads <= 2**31 - 1:
        raise ValueError(f"opforge.set_num_threads: num_threads must be >= 1, got {num_threads}")
    _status.check(lib.opf_set_num_threads(num_threads))
