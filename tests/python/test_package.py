"""The package: bundled files, runtime info, generated functions, and the adapter rules."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import numpy as np
import pytest

import opforge
import opforge.numpy as onp
from opforge import _table
from opforge._capi import ffi, lib

PACKAGE_DIR = Path(opforge.__file__).resolve().parent


def test_bundled_header_and_library() -> None:
    header = Path(opforge.get_include()) / "opforge.h"
    assert header.is_file() and "OPF_CDEF_BEGIN" in header.read_text()
    library = Path(opforge.get_library())
    assert library.is_file() and library.parent == Path(opforge.get_library_dir())
    assert library.name.startswith("libopforge.so.")
    with open(library, "rb") as f:
        assert f.read(4) == b"\x7fELF"
    assert (PACKAGE_DIR / "capi.pxd").is_file()


def test_one_libopforge_in_the_process() -> None:
    """The CFFI extension loads the bundled file (rpath $ORIGIN/lib), and only it.

    Adapter libraries (libopforge_torch.so, ...) may be mapped too when other
    tests ran in this process; only copies of the core library count.
    """
    paths = (line.split()[-1] for line in Path("/proc/self/maps").read_text().splitlines())
    mapped = {p for p in paths if Path(p).name.startswith("libopforge.so")}
    assert mapped == {str(Path(opforge.get_library()).resolve())}


def test_info() -> None:
    info = opforge.info()
    assert set(info) == {"version", "isa", "num_threads", "cuda_devices"}
    assert info["cuda_devices"] >= 0
    assert info["version"] == opforge.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", info["version"])
    assert info["isa"] in {"scalar", "portable", "avx2", "avx512", "neon"}
    assert info["num_threads"] >= 1


def test_version_matches_the_header() -> None:
    text = (Path(opforge.get_include()) / "opforge.h").read_text()
    parts = [re.search(rf"#define OPF_VERSION_{p}\s+(\d+)", text) for p in ("MAJOR", "MINOR", "PATCH")]
    assert opforge.__version__ == ".".join(m.group(1) for m in parts if m)


def test_every_table_row_is_a_function_with_signature_and_doc() -> None:
    table = _table.builtin_table()
    assert table.ops, "the built-in table is empty"
    for op in table.ops:
        fn = getattr(onp, op.name)
        assert fn.__name__ == op.name and op.name in onp.__all__
        params = inspect.signature(fn).parameters
        for arg in op.inputs:
            assert params[arg.name].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
        for attr in op.attrs:
            assert params[attr.name].kind is inspect.Parameter.KEYWORD_ONLY
            assert params[attr.name].default == attr.default
        assert ("out" in params) == bool(op.outputs)
        assert op.doc in fn.__doc__
        for arg in op.inputs + op.outputs:
            assert arg.doc in fn.__doc__


def test_signatures_of_the_seed_ops() -> None:
    def show(fn: object) -> str:
        sig = inspect.signature(fn)  # type: ignore[arg-type]
        return str(sig.replace(parameters=[p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values()]))

    assert show(onp.relu) == "(x, *, out=None)"
    assert show(onp.relu_) == "(x)"
    assert show(onp.scale) == "(x, *, alpha=1.0, out=None)"
    assert show(onp.dense) == "(x, w, b=None, *, activation='none', out=None)"
    assert show(onp.dense_grad) == "(dy, x, w, y=None, *, activation='none', out=None)"


def test_table_reader_sees_gradient_rules() -> None:
    table = _table.builtin_table()
    for op in table.ops:
        for grad in op.grads:
            assert grad.op is None or table.find(grad.op) is not None
            assert len(grad.produces) >= 1


def test_table_reader_sees_argument_flags() -> None:
    table = _table.builtin_table()
    shape_only = {(op.name, arg.name) for op in table.ops for arg in op.inputs if arg.shape_only}
    assert shape_only == {("sum_to", "like"), ("mul_grad", "like")}
    mul_grad = table.find("mul_grad")
    assert mul_grad is not None and not any(arg.shape_only for arg in mul_grad.outputs)
    relu_ = table.find("relu_")
    assert relu_ is not None and relu_.inputs[0].mutated and not relu_.inputs[0].shape_only


def test_keyword_inputs_work() -> None:
    np.testing.assert_array_equal(onp.add(a=np.ones(2), b=np.ones(2)), [2.0, 2.0])


def test_cython_pxd_declares_everything_in_the_cdef_region() -> None:
    """capi.pxd mirrors the header by hand: every function, constant, struct
    field and enum value the CFFI cdef (taken from the header) knows is in it."""
    pxd = (PACKAGE_DIR / "capi.pxd").read_text()
    missing = [name for name in dir(lib) if not re.search(rf"\b{name}\b", pxd)]
    typedefs, structs, unions = ffi.list_types()
    for type_name in typedefs:
        ctype = ffi.typeof(type_name)
        if ctype.kind in ("struct", "union"):
            missing += [f"{type_name}.{field}" for field, _ in ctype.fields if not re.search(rf"\b{field}\b", pxd)]
        if not re.search(rf"\b{type_name}\b", pxd):
            missing.append(type_name)
    assert not missing, f"capi.pxd lacks {missing}"


# -- the rule "adapters never name an op" ------------------------------------------

ADAPTER_SOURCES = ["numpy.py", "_table.py", "_status.py", "__init__.py"]


@pytest.mark.parametrize("source", ADAPTER_SOURCES)
def test_adapters_never_name_an_op(source: str) -> None:
    text = (PACKAGE_DIR / source).read_text()
    for op in _table.builtin_table().ops:
        for quote in ('"', "'"):
            assert f"{quote}{op.name}{quote}" not in text, f"{source} names the op {op.name!r}"
        assert f".{op.name}(" not in text, f"{source} calls the op {op.name!r} by name"


def test_unknown_op_lists_the_ops() -> None:
    with pytest.raises(AttributeError, match=r"no op or attribute 'no_such_op'; its ops are: .*relu"):
        onp.no_such_op  # noqa: B018
