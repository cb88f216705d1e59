"""Compiling a user's op library (C source with OPF_EXPORT_OP_TABLE) for the
tests of every adapter: one gcc command, against the header and the
libopforge that the installed package bundles."""

from __future__ import annotations

import subprocess
from pathlib import Path

import opforge


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
