"""CFFI builder for ``opforge._capi`` (out-of-line API mode).

The cdef is not written by hand: it is the region of ``include/opforge.h``
between ``/* OPF_CDEF_BEGIN */`` and ``/* OPF_CDEF_END */``, with the
``OPF_API`` visibility token removed. CFFI understands the rest of that region
as is (including array sizes given by ``#define`` constants).

The extension links ``libopforge`` from ``build/`` (made by ``make lib``) and
finds it at run time through the rpath ``$ORIGIN/lib``: setup.py copies the
library into ``opforge/lib/`` next to the extension, so the process loads one
copy of libopforge that framework adapters can link too.

Run by setuptools through ``cffi_modules`` (see setup.py); it can also be run
directly to emit the generated C source: ``python _build_capi.py``.
"""

from __future__ import annotations

import re
from pathlib import Path

from cffi import FFI

REPO_ROOT = Path(__file__).resolve().parents[2]
HEADER = REPO_ROOT / "include" / "opforge.h"
NATIVE_BUILD_DIR = REPO_ROOT / "build"

CDEF_BEGIN = "/* OPF_CDEF_BEGIN */"
CDEF_END = "/* OPF_CDEF_END */"


def header_cdef(header_text: str) -> str:
    """Returns the plain-declaration region of the public header, ready for cdef."""
    try:
        start = header_text.index(CDEF_BEGIN) + len(CDEF_BEGIN)
        end = header_text.index(CDEF_END, start)
    except ValueError:
        raise RuntimeError(f"{HEADER}: markers {CDEF_BEGIN} ... {CDEF_END} not found") from None
    return re.sub(r"\bOPF_API\b", "", header_text[start:end])


def make_ffibuilder() -> FFI:
    """An FFI describing opforge.h, set up to build ``opforge._capi``."""
    builder = FFI()
    builder.cdef(header_cdef(HEADER.read_text()))
    builder.set_source(
        "opforge._capi",
        '#include "opforge.h"',
        include_dirs=[str(HEADER.parent)],
        library_dirs=[str(NATIVE_BUILD_DIR)],
        libraries=["opforge"],
        # Not a shell: "$ORIGIN" reaches the linker literally.
        extra_link_args=["-Wl,-rpath,$ORIGIN/lib"],
    )
    return builder


ffibuilder = make_ffibuilder()

if __name__ == "__main__":
    ffibuilder.emit_c_code("_capi.c")
