"""CFFI builder for ``opforge._probe`` (out-of-line API mode), the native half
of ``opforge bench``: FMA-peak and copy-bandwidth loops (probe.c, probe.h).

The cdef is the region of probe.h between ``/* OPFP_CDEF_BEGIN */`` and
``/* OPFP_CDEF_END */``. The extension does not link libopforge: it measures
the machine, not the library.

Run by setuptools through ``cffi_modules`` (see setup.py), next to
``opforge._capi``.
"""

from __future__ import annotations

from pathlib import Path

from cffi import FFI

HERE = Path(__file__).resolve().parent
HEADER = HERE / "probe.h"
SOURCE = HERE / "probe.c"

CDEF_BEGIN = "/* OPFP_CDEF_BEGIN */"
CDEF_END = "/* OPFP_CDEF_END */"


def header_cdef(header_text: str) -> str:
    """The declarations region of probe.h, ready for cdef."""
    try:
        start = header_text.index(CDEF_BEGIN) + len(CDEF_BEGIN)
        end = header_text.index(CDEF_END, start)
    except ValueError:
        raise RuntimeError(f"{HEADER}: markers {CDEF_BEGIN} ... {CDEF_END} not found") from None
    return header_text[start:end]


def make_ffibuilder() -> FFI:
    """An FFI describing probe.h, set up to build ``opforge._probe``."""
    builder = FFI()
    builder.cdef(header_cdef(HEADER.read_text()))
    builder.set_source(
        "opforge._probe",
        '#include "probe.h"',
        # Relative to the directory setup.py runs in keeps absolute paths out of
        # the build; setuptools resolves it from the project root.
        sources=[str(SOURCE.relative_to(Path.cwd())) if SOURCE.is_relative_to(Path.cwd()) else str(SOURCE)],
        include_dirs=[str(HERE)],
        # No -march: each loop carries its own target attribute and runs only
        # where the CPU has that ISA.
        extra_compile_args=["-O2", "-pthread"],
        extra_link_args=["-pthread"],
    )
    return builder


ffibuilder = make_ffibuilder()

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
