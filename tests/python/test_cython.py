"""Cython users `cimport opforge.capi` and call kernels without the GIL."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Iterator

import numpy as np
import pytest

import opforge

pytest.importorskip("Cython")

PYX = textwrap.dedent(
    """
    # cython: language_level=3
    from libc.stdint cimport int64_t
    from opforge.capi cimport *  # as the README shows


    cdef opf_tensor view2d(float[:, :] a, int64_t *shape, int64_t *strides):
        # An opf_tensor over a (possibly strided) typed memoryview.
        shape[0] = a.shape[0]
        shape[1] = a.shape[1]
        strides[0] = a.strides[0] // sizeof(float)
        strides[1] = a.strides[1] // sizeof(float)
        cdef opf_tensor t = opf_tensor_make(&a[0, 0], OPF_F32, 2, shape)
        t.strides = strides
        return t


    cdef check(opf_status status):
        if status != OPF_OK:
            raise ValueError(opf_last_error().decode())


    def relu_then_add(float[:, :] x, float[:, :] b, float[:, ::1] out):
        # out = relu(x) + b, both kernels called without the GIL.
        cdef int64_t xs[2]
        cdef int64_t xst[2]
        cdef int64_t bs[2]
        cdef int64_t bst[2]
        cdef int64_t os[2]
        cdef int64_t ost[2]
        cdef opf_tensor tx = view2d(x, xs, xst)
        cdef opf_tensor tb = view2d(b, bs, bst)
        cdef opf_tensor to = view2d(out, os, ost)
        cdef opf_status status
        with nogil:
            status = opf_relu(&tx, &to)
            if status == OPF_OK:
                status = opf_add(&to, &tb, &to)
        check(status)
    """
)

SETUP = textwrap.dedent(
    """
    import sys
    from Cython.Build import cythonize
    from setuptools import Extension, setup

    include, package_parent, library_dir = sys.argv[1:4]
    sys.argv[1:] = ["build_ext", "--inplace", "-q"]
    extension = Extension(
        "opf_cython_check",
        ["opf_cython_check.pyx"],
        include_dirs=[include],
        libraries=["opforge"],
        library_dirs=[library_dir],
        runtime_library_dirs=[library_dir],
    )
    setup(ext_modules=cythonize([extension], include_path=[package_parent], quiet=True))
    """
)


@pytest.fixture(scope="module")
def cython_module(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    directory = tmp_path_factory.mktemp("cython")
    (directory / "opf_cython_check.pyx").write_text(PYX)
    (directory / "setup.py").write_text(SETUP)
    package_parent = str(Path(opforge.__file__).resolve().parent.parent)
    args = [opforge.get_include(), package_parent, opforge.get_library_dir()]
    build = subprocess.run(
        [sys.executable, "setup.py", *args], cwd=directory, capture_output=True, text=True, timeout=600
    )
    assert build.returncode == 0, build.stdout + build.stderr
    sys.path.insert(0, str(directory))
    try:
        yield importlib.import_module("opf_cython_check")
    finally:
        sys.path.remove(str(directory))


def test_extension_uses_the_bundled_library(cython_module: ModuleType) -> None:
    maps = Path("/proc/self/maps").read_text().splitlines()
    core = {line.split()[-1] for line in maps if re.search(r"/libopforge\.so[.0-9]*$", line)}  # not the adapters'
    assert core == {str(Path(opforge.get_library()).resolve())}


def test_cimport_and_call_without_gil(cython_module: ModuleType) -> None:
    rng = np.random.default_rng(21)
    x = rng.standard_normal((40, 30)).astype(np.float32)
    b = rng.standard_normal((30, 40)).astype(np.float32).T  # strided view
    out = np.empty((40, 30), np.float32)
    cython_module.relu_then_add(x, b, out)
    np.testing.assert_array_equal(out, np.maximum(x, 0) + b)


def test_cython_error_message_from_c(cython_module: ModuleType) -> None:
    x = np.ones((2, 3), np.float32)
    with pytest.raises(ValueError, match=r"\[2,3\].*\[3,2\]|\[3,2\].*\[2,3\]"):
        cython_module.relu_then_add(x, np.ones((3, 2), np.float32), np.empty((2, 3), np.float32))
