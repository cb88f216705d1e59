"""Bad input gives TensorFlow's own exceptions with a message naming the op, the argument and what was expected."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

pytest.importorskip("tensorflow")  # a clean skip without it (conftest.py)
import tensorflow as tf  # noqa: E402

import opforge.tensorflow as otf  # noqa: E402


def test_shape_mismatch_eager_is_invalid_argument() -> None:
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"opforge\.add: shape mismatch: a is \[2,3\], b is \[3,2\]"):
        otf.lib.opf_add(a=tf.ones([2, 3]), b=tf.ones([3, 2]))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"opforge\.dense: shape mismatch: x is \[2,3\], w is \[4,2\]"):
        otf.dense(tf.ones([2, 3]), tf.ones([4, 2]))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"opforge\.dense: shape mismatch: w is \[3,2\], b is \[3\]"):
        otf.dense(tf.ones([2, 3]), tf.ones([3, 2]), tf.ones([3]))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"opforge\.dense: x must have rank 2, got rank 1"):
        otf.dense(tf.ones([3]), tf.ones([3, 2]))


def test_shape_mismatch_rejected_when_a_graph_is_built() -> None:
    @tf.function(input_signature=[tf.TensorSpec([2, 3]), tf.TensorSpec([3, 2])])
    def add(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
        return otf.add(a, b)

    with pytest.raises(ValueError, match=r"opforge\.add: shape mismatch: a is \[2,3\], b is \[3,2\]"):
        add.get_concrete_function()

    @tf.function(input_signature=[tf.TensorSpec([None, 3]), tf.TensorSpec([None])])
    def dense(x: tf.Tensor, w: tf.Tensor) -> tf.Tensor:
        return otf.dense(x, w)

    with pytest.raises(ValueError, match=r"opforge\.dense: w must have rank 2, got rank 1"):
        dense.get_concrete_function()


def test_shape_mismatch_found_at_run_time_in_a_graph() -> None:
    add = tf.function(otf.add, input_signature=[tf.TensorSpec(None), tf.TensorSpec([None, None])])
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"opforge\.add: shape mismatch: a is \[2,3\], b is \[3,2\]"):
        add(tf.ones([2, 3]), tf.ones([3, 2]))


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float16, np.complex64, np.bool_])
def test_unsupported_dtype_refused_at_op_construction(dtype: type) -> None:
    x = tf.constant(np.ones(3, dtype))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"Value for attr 'T' of \w+ is not in the list of allowed values: float, double"):
        otf.relu(x)
    with pytest.raises(TypeError, match=r"Value passed to parameter 'x' has DataType \w+ not in list of allowed values: float32, float64"):
        tf.function(otf.relu).get_concrete_function(tf.TensorSpec([3], x.dtype))


def test_mixed_dtypes_refused() -> None:
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"OpfAdd as input #1\(zero-based\) was expected to be a float tensor but is a double"):
        otf.add(tf.ones(2), tf.ones(2, tf.float64))
    with pytest.raises(TypeError, match=r"Input 'b' of 'OpfAdd' Op has type float64 that does not match type float32 of argument 'a'"):
        tf.function(otf.add).get_concrete_function(tf.TensorSpec([2]), tf.TensorSpec([2], tf.float64))


def test_bad_attributes_refused() -> None:
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"attr 'activation' of \"gelu\" is not in the list of allowed values: \"none\", \"relu\""):
        otf.dense(tf.ones([2, 3]), tf.ones([3, 2]), activation="gelu")
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"OpfDense: input 'b' is optional: pass no tensor or one, not 2"):
        otf.lib.opf_dense(x=tf.ones([2, 3]), w=tf.ones([3, 2]), b=[tf.ones([2]), tf.ones([2])])
    with pytest.raises(TypeError):
        otf.scale(tf.ones(2), alpha="big")


def test_nan_and_inf_attributes_pass_through() -> None:
    np.testing.assert_array_equal(otf.scale(tf.ones(2), alpha=float("nan")), [np.nan, np.nan])
    np.testing.assert_array_equal(otf.scale(tf.ones(2, tf.float64), alpha=float("inf")), [np.inf, np.inf])


def test_xla_compilation_is_refused_not_faked() -> None:
    relu = tf.function(otf.relu, jit_compile=True)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"No registered 'OpfRelu' OpKernel for XLA_CPU_JIT"):
        relu(tf.ones(3))


@pytest.mark.skipif(shutil.which("nm") is None, reason="needs nm")
def test_library_needs_only_tensorflow_c_api_opforge_and_libc() -> None:
    out = subprocess.run(["nm", "-D", "--undefined-only", otf.library_path], check=True, capture_output=True, text=True)
    symbols = [line.split()[-1] for line in out.stdout.splitlines() if line.strip()]
    assert any(s.startswith("TF_") for s in symbols)
    libc = {"calloc", "free", "memset", "snprintf", "vsnprintf", "strcmp", "strlen", "__cxa_finalize"}
    libc |= {"pthread_mutex_lock", "pthread_mutex_unlock"}  # the registration lock (in libc.so.6 since glibc 2.34)
    weak = {"_ITM_deregisterTMCloneTable", "_ITM_registerTMCloneTable", "__gmon_start__"}
    other = [
        s for s in symbols
        if not (s.startswith("TF_") or s.startswith("opf_") or s.split("@")[0] in libc | weak)
    ]  # fmt: skip
    assert other == []
    needed = subprocess.run(["readelf", "-d", otf.library_path], check=True, capture_output=True, text=True).stdout
    libraries = sorted(line.split("[")[1].rstrip("]") for line in needed.splitlines() if "(NEEDED)" in line)
    assert libraries == ["libc.so.6", "libopforge.so.0", "libtensorflow_framework.so.2"]
