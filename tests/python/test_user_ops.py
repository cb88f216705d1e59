"""A user's own op, written in C, compiled here and loaded with opforge.numpy.load_ops."""

from __future__ import annotations

import inspect
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from references import FLOAT_DTYPES
from oplib import compile_op_library

import opforge
import opforge.numpy as onp

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

# One elementwise op with an attribute of each kind. Its compute function
# handles any strides, as compute functions must.
USER_OPS_C = r"""
#include <math.h>
#include <opforge.h>

static int64_t num_elements(const opf_tensor *t) {
    int64_t n = 1;
    for (int32_t d = 0; d < t->ndim; ++d) n *= t->shape[d];
    return n;
}

/* Address of element `index` (counted in C order) of t. */
static char *element(const opf_tensor *t, int64_t index) {
    int64_t offset = 0, contiguous_stride = 1;
    for (int32_t d = t->ndim - 1; d >= 0; --d) {
        offset += (index % t->shape[d]) * (t->strides ? t->strides[d] : contiguous_stride);
        index /= t->shape[d];
        contiguous_stride *= t->shape[d];
    }
    return (char *)t->data + t->byte_offset + offset * (int64_t)opf_dtype_size(t->dtype);
}

static opf_status negate_compute(const opf_tensor *const *inputs, const opf_tensor *const *outputs,
                                 const opf_attr_value *attrs) {
    const opf_tensor *x = inputs[0], *y = outputs[0];
    double sign = (attrs[0].i % 2) ? -1.0 : 1.0, offset = attrs[1].f;
    int absolute = attrs[2].i == 1;
    for (int64_t i = 0, n = num_elements(x); i < n; ++i) {
        double v = sign * (x->dtype == OPF_F32 ? *(float *)element(x, i) : *(double *)element(x, i)) + offset;
        if (absolute) v = fabs(v);
        if (y->dtype == OPF_F32) *(float *)element(y, i) = (float)v;
        else *(double *)element(y, i) = v;
    }
    return OPF_OK;
}

static const opf_op_def negate_op = {
    .name = "negate",
    .doc = "y = offset + (-1)^times * x, then |y| when mode is 'abs'.",
    .flags = OPF_OP_ELEMENTWISE,
    .dtypes = OPF_DTYPES_F32 | OPF_DTYPES_F64,
    .num_inputs = 1,
    .inputs = {{.name = "x", .doc = "input, any shape"}},
    .num_outputs = 1,
    .outputs = {{.name = "y", .doc = "the result, the shape of x"}},
    .output_shapes = {{.kind = OPF_SHAPE_LIKE, .like = 0}},
    .num_attrs = 3,
    .attrs = {
        {.name = "times", .type = OPF_ATTR_INT, .default_value = {.i = 1}, .doc = "how many times to negate"},
        {.name = "offset", .type = OPF_ATTR_FLOAT, .default_value = {.f = 0.0}, .doc = "added after negating"},
        {.name = "mode", .type = OPF_ATTR_ENUM, .default_value = {.i = 0}, .choices = {"none", "abs"},
         .doc = "'abs': take the absolute value of the result"},
    },
    .compute = negate_compute,
};

static const opf_op_def *const rows[] = {&negate_op};

#ifdef BROKEN_ABI
static const opf_op_table table = {.abi_version = 999, .name = "testops", .num_ops = 1, .ops = rows};
#else
static const opf_op_table table = {.abi_version = OPF_TABLE_ABI_VERSION, .name = "testops", .num_ops = 1, .ops = rows};
#endif

OPF_EXPORT_OP_TABLE(table)
"""


def compile_library(directory: Path, name: str, *defines: str) -> Path:
    return compile_op_library(directory, name, USER_OPS_C, *defines)


@pytest.fixture(scope="module")
def user_ops(tmp_path_factory: pytest.TempPathFactory) -> onp.OpNamespace:
    return onp.load_ops(compile_library(tmp_path_factory.mktemp("userops"), "testops"))


def ref_negate(x: np.ndarray, times: int = 1, offset: float = 0.0, mode: str = "none") -> np.ndarray:
    v = (-1.0) ** times * x.astype(np.float64) + offset
    return (np.abs(v) if mode == "abs" else v).astype(x.dtype)


def test_user_op_gets_a_generated_function(user_ops: onp.OpNamespace) -> None:
    negate = user_ops.negate
    assert str(inspect.signature(negate)).replace("'", "") == (
        "(x: ArrayLike, *, times: int = 1, offset: float = 0.0, mode: str = none, "
        "out: np.ndarray | tuple | None = None)"
    )
    doc = negate.__doc__ or ""
    assert "y = offset + (-1)^times * x" in doc
    assert "mode : {'none', 'abs'}, default 'none'" in doc
    assert "negate" in repr(user_ops) and "testops" in repr(user_ops)
    assert user_ops.__opforge_table__.name == "testops"


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_user_op_matches_numpy(user_ops: onp.OpNamespace, dtype: Any) -> None:
    x = np.random.default_rng(0).standard_normal((5, 7)).astype(dtype)
    np.testing.assert_array_equal(user_ops.negate(x), ref_negate(x))
    np.testing.assert_array_equal(user_ops.negate(x, times=2, offset=0.5), ref_negate(x, 2, 0.5))
    np.testing.assert_array_equal(user_ops.negate(x, offset=-1.25, mode="abs"), ref_negate(x, 1, -1.25, "abs"))
    view = x[::-2, 1::3].T
    out = np.empty(view.shape, dtype)
    assert user_ops.negate(view, out=out) is out
    np.testing.assert_array_equal(out, ref_negate(view))
    np.testing.assert_array_equal(user_ops.negate(x, out=x), ref_negate(ref_negate(x)))


def test_user_op_argument_errors(user_ops: onp.OpNamespace) -> None:
    x = np.ones(3)
    with pytest.raises(TypeError, match=r"testops\.negate: x has dtype int64; expected float32 or float64"):
        user_ops.negate(np.ones(3, np.int64))
    with pytest.raises(TypeError, match=r"testops\.negate: times must be an integer, got 1\.5"):
        user_ops.negate(x, times=1.5)
    with pytest.raises(ValueError, match=r"testops\.negate: mode must be one of 'none', 'abs'"):
        user_ops.negate(x, mode="sqrt")


def test_one_libopforge_serves_user_ops(user_ops: onp.OpNamespace) -> None:
    paths = (line.split()[-1] for line in Path("/proc/self/maps").read_text().splitlines())
    mapped = {p for p in paths if Path(p).name.startswith("libopforge.so")}  # the core library, not adapters
    assert mapped == {str(Path(opforge.get_library()).resolve())}


def test_builtin_ops_are_unaffected(user_ops: onp.OpNamespace) -> None:
    assert not hasattr(user_ops, "relu")
    assert not hasattr(onp, "negate")


def test_invalid_table_is_rejected(tmp_path: Path) -> None:
    library = compile_library(tmp_path, "brokenops", "-DBROKEN_ABI")
    with pytest.raises(ValueError, match="999|abi|ABI"):
        onp.load_ops(library)


def test_library_without_a_table_is_rejected(tmp_path: Path) -> None:
    source = tmp_path / "empty.c"
    source.write_text("int not_a_table(void) { return 0; }\n")
    library = tmp_path / "libempty.so"
    subprocess.run(["gcc", "-shared", "-fPIC", str(source), "-o", str(library)], check=True)
    with pytest.raises(OSError, match="cannot load an op table"):
        onp.load_ops(library)
    with pytest.raises(OSError, match="cannot load an op table"):
        onp.load_ops(tmp_path / "missing.so")
