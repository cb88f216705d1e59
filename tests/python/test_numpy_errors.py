"""Errors of opforge.numpy: the right exception, naming the op and the argument."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import opforge.numpy as onp

F32 = np.ones((2, 3), np.float32)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.complex128, np.bool_, np.float16])
def test_unsupported_dtype_names_op_and_argument(dtype: Any) -> None:
    x = np.ones((2, 3), dtype)
    with pytest.raises(TypeError, match=rf"opforge\.numpy\.relu: x has dtype {np.dtype(dtype)}; expected float32 or float64"):
        onp.relu(x)
    with pytest.raises(TypeError, match=rf"opforge\.numpy\.add: b has dtype {np.dtype(dtype)}"):
        onp.add(F32, x)


def test_mixed_dtypes_name_both_arguments() -> None:
    with pytest.raises(TypeError, match=r"add: a has dtype float32 but b has dtype float64"):
        onp.add(F32, F32.astype(np.float64))
    with pytest.raises(TypeError, match=r"dense: x has dtype float32 but w has dtype float64"):
        onp.dense(F32, np.ones((3, 2)))


def test_python_complex_is_rejected() -> None:
    with pytest.raises(TypeError, match=r"relu: x has dtype complex128"):
        onp.relu(1j)
    with pytest.raises(TypeError, match=r"add: b cannot be converted to float32"):
        onp.add(np.ones(2, np.float32), [1j, 2])


def test_add_shape_mismatch_names_both_shapes() -> None:
    with pytest.raises(ValueError) as info:
        onp.add(np.ones((2, 3)), np.ones((3, 2)))
    assert "[2,3]" in str(info.value) and "[3,2]" in str(info.value)
    assert "add" in str(info.value)


def test_dense_rank_and_inner_dim_errors() -> None:
    with pytest.raises(ValueError, match="dense"):
        onp.dense(np.ones((2, 3, 4)), np.ones((4, 5)))
    with pytest.raises(ValueError, match="dense"):
        onp.dense(np.ones((2, 3)), np.ones((4, 5)))
    with pytest.raises(ValueError, match="dense"):
        onp.dense(np.ones((2, 3)), np.ones((3, 5)), np.ones(4))


def test_wrong_out_dtype_and_shape() -> None:
    with pytest.raises(TypeError, match=r"relu: out \(y\) has dtype float64; expected float32"):
        onp.relu(F32, out=np.empty((2, 3)))
    with pytest.raises(ValueError, match=r"relu: out \(y\) has shape \[3,2\]; expected \[2,3\]"):
        onp.relu(F32, out=np.empty((3, 2), np.float32))
    with pytest.raises(TypeError, match=r"relu: out \(y\) must be a NumPy array, got list"):
        onp.relu(F32, out=[0.0] * 6)
    with pytest.raises(TypeError, match=r"dense_grad: out must be a tuple of 3 entries \(dx, dw, db\)"):
        onp.dense_grad(np.ones((2, 2)), np.ones((2, 2)), np.ones((2, 2)), out=np.empty((2, 2)))
    read_only = np.empty((2, 3), np.float32)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match=r"relu: out \(y\) is read-only"):
        onp.relu(F32, out=read_only)


def test_skip_only_for_optional_outputs() -> None:
    with pytest.raises(ValueError, match=r"relu: output y is not optional"):
        onp.relu(F32, out=onp.SKIP)


def test_in_place_op_needs_a_writable_ndarray() -> None:
    read_only = np.ones(4)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match=r"relu_: x is modified in place but the array is read-only"):
        onp.relu_(read_only)
    with pytest.raises(ValueError, match="read-only"):
        onp.relu_(np.broadcast_to(np.ones(1), (4,)))
    with pytest.raises(TypeError, match=r"relu_: x is modified in place and must be a NumPy array, got list"):
        onp.relu_([1.0, -1.0])


def test_bad_enum_value_lists_the_choices() -> None:
    with pytest.raises(ValueError, match=r"dense: activation must be one of 'none', 'relu' \(or None for 'none'\); got 'gelu'"):
        onp.dense(np.ones((2, 2)), np.ones((2, 2)), activation="gelu")
    with pytest.raises(ValueError, match="activation must be one of"):
        onp.dense(np.ones((2, 2)), np.ones((2, 2)), activation=1)


def test_bad_gelu_approximate_lists_the_choices() -> None:
    with pytest.raises(ValueError, match=r"gelu: approximate must be one of 'none', 'tanh' \(or None for 'none'\); got 'fast'"):
        onp.gelu(F32, approximate="fast")
    with pytest.raises(ValueError, match=r"gelu_grad_grad: approximate must be one of 'none', 'tanh'"):
        onp.gelu_grad_grad(F32, F32, F32, approximate=True)
    with pytest.raises(TypeError, match=r"opforge\.numpy\.silu: .*unexpected keyword argument 'approximate'"):
        onp.silu(F32, approximate="tanh")


@pytest.mark.parametrize("op", ["gelu", "silu", "sigmoid", "tanh"])
def test_activation_dtype_and_shape_errors(op: str) -> None:
    with pytest.raises(TypeError, match=rf"opforge\.numpy\.{op}: x has dtype int32; expected float32 or float64"):
        getattr(onp, op)(np.ones((2, 3), np.int32))
    grad = getattr(onp, op + "_grad")
    second = "y" if op in ("sigmoid", "tanh") else "x"
    with pytest.raises(TypeError, match=rf"{op}_grad: dy has dtype float32 but {second} has dtype float64"):
        grad(F32, F32.astype(np.float64))
    with pytest.raises(ValueError, match=rf"{op}_grad: .*shape"):
        grad(F32, np.ones((3, 2), np.float32))
    with pytest.raises(TypeError, match=rf"{op}_grad_grad: out \(ddy\) has dtype float64; expected float32"):
        getattr(onp, op + "_grad_grad")(F32, F32, F32, out=(np.empty((2, 3)), np.empty((2, 3), np.float32)))


def test_bad_float_attribute() -> None:
    with pytest.raises(TypeError, match=r"scale: alpha must be a real number, got '2'"):
        onp.scale(F32, alpha="2")


def test_bad_call_signature_names_the_op() -> None:
    with pytest.raises(TypeError, match=r"opforge\.numpy\.add: missing a required argument: 'b'"):
        onp.add(F32)
    with pytest.raises(TypeError, match=r"opforge\.numpy\.relu: .*unexpected keyword argument 'alpha'"):
        onp.relu(F32, alpha=2.0)
    with pytest.raises(TypeError, match=r"opforge\.numpy\.scale: too many positional arguments"):
        onp.scale(F32, 2.0)
    with pytest.raises(TypeError, match=r"opforge\.numpy\.add: multiple values for argument 'a'"):
        onp.add(F32, F32, a=F32)
    with pytest.raises(TypeError, match=r"relu: x is required, got None"):
        onp.relu(None)


def test_dense_grad_relu_without_y_is_an_error() -> None:
    with pytest.raises(ValueError, match="dense_grad"):
        onp.dense_grad(np.ones((2, 2)), np.ones((2, 2)), np.ones((2, 2)), activation="relu")


def test_rank_above_the_limit_is_a_value_error() -> None:
    assert onp.relu(-np.ones((1,) * 16)).shape == (1,) * 16
    with pytest.raises(ValueError, match="relu"):
        onp.relu(np.ones((1,) * 17))
