"""Compiling a user's op library (C source with OPF_EXPORT_OP_TABLE) for the
tests of every adapter: one gcc command, against the header and the
libopforge that the installed package bundles."""

from __future__ import annotations

import subprocess
from pathlib import Path

import opforge

# C helpers for the op libraries the tests write: the header, and element i
# (flat, row-major) of a float32 or float64 tensor with any strides (NULL:
# contiguous). Prepend to a fixture's source.
ELEMENT_ACCESS_C = r"""
#include <opforge.h>

static inline int64_t count(const opf_tensor *t) {
    int64_t n = 1;
    for (int32_t d = 0; d < t->ndim; ++d) n *= t->shape[d];
    return n;
}

static inline int64_t offset_of(const opf_tensor *t, int64_t i) {
    if (!t->strides) return i;
    int64_t offset = 0, rest = i;
    for (int32_t d = t->ndim - 1; d >= 0; --d) {
        offset += (rest % t->shape[d]) * t->strides[d];
        rest /= t->shape[d];
    }
    return offset;
}

static inline double get(const opf_tensor *t, int64_t i) {
    const char *base = (const char *)t->data + t->byte_offset;
    int64_t k = offset_of(t, i);
    return t->dtype == OPF_F32 ? ((const float *)base)[k] : ((const double *)base)[k];
}

static inline void put(const opf_tensor *t, int64_t i, double v) {
    char *base = (char *)t->data + t->byte_offset;
    int64_t k = offset_of(t, i);
    if (t->dtype == OPF_F32) ((float *)base)[k] = (float)v;
    else ((double *)base)[k] = v;
}
"""


def compile_op_library(directory: Path, name: str, source: str, *flags: str) -> Path:
    """Writes ``source`` to ``directory`` and builds ``lib<name>.so`` from it; returns its path."""
    source_path = directory / f"{name}.c"
    source_path.write_text(source)
    library = directory / f"lib{name}.so"
    command = [
        "gcc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", *flags,
        f"-I{opforge.get_include()}", str(source_path), opforge.get_library(),
        f"-Wl,-rpath,{opforge.get_library_dir()}", "-lm", "-o", str(library),
    ]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, text=True)
    return library


#: examples/ops/myops.c: softplus (+ grad), MyOp and rowsum (+ grad), written
#: with the authoring layer; every adapter's suite tests it against its
#: framework's own ops.
MYOPS_SOURCE = Path(__file__).resolve().parents[2] / "examples" / "ops" / "myops.c"


def compile_myops(directory: Path) -> Path:
    """Builds examples/ops/myops.c into ``directory``; returns the library's path."""
    return compile_op_library(directory, "myops", MYOPS_SOURCE.read_text())
