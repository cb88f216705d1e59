"""A user's own op library (the one tests/python/test_user_ops.py builds) registered with XLA by opforge.jax."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from references import FLOAT_DTYPES
from test_user_ops import compile_library, ref_negate

import opforge.jax as oj

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_library(tmp_path_factory.mktemp("userops"), "testops")


@pytest.fixture(scope="module")
def user_ops(library: Path) -> oj.OpNamespace:
    return oj.load_ops(library)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_user_op_matches_numpy(user_ops: oj.OpNamespace, dtype: Any) -> None:
    x = np.random.default_rng(0).standard_normal((5, 7)).astype(dtype)
    negate = user_ops.negate
    np.testing.assert_array_equal(negate(jnp.asarray(x)), ref_negate(x))
    np.testing.assert_array_equal(
        jax.jit(lambda v: negate(v, times=2, offset=0.5))(jnp.asarray(x)), ref_negate(x, 2, 0.5)
    )
    np.testing.assert_array_equal(negate(jnp.asarray(x), offset=-1.25, mode="abs"), ref_negate(x, 1, -1.25, "abs"))
    batched = jax.vmap(lambda v: negate(v, mode="abs"))(jnp.asarray(x))
    np.testing.assert_array_equal(batched, ref_negate(x, 1, 0.0, "abs"))


def test_user_op_is_registered_under_its_table_name(user_ops: oj.OpNamespace, library: Path) -> None:
    table = user_ops.__opforge_table__
    assert oj.target_name(table, table.ops[0]) == "testops.negate"
    assert not hasattr(user_ops, "relu") and not hasattr(oj, "negate")
    again = oj.load_ops(library)  # the same rows again: the same targets
    np.testing.assert_array_equal(again.negate(jnp.ones(2)), -np.ones(2))


def test_user_op_errors_name_the_op(user_ops: oj.OpNamespace) -> None:
    with pytest.raises(TypeError, match=r"testops\.negate: x has dtype int32; expected float32 or float64"):
        user_ops.negate(jnp.ones(3, jnp.int32))
    with pytest.raises(TypeError, match=r"testops\.negate: times must be an integer, got 1\.5"):
        user_ops.negate(jnp.ones(3), times=1.5)
    with pytest.raises(ValueError, match=r"testops\.negate: mode must be one of 'none', 'abs'"):
        user_ops.negate(jnp.ones(3), mode="sqrt")
    with pytest.raises(TypeError, match=r"testops\.negate is not differentiable"):
        jax.grad(lambda v: user_ops.negate(v).sum())(jnp.ones(3))


def test_a_second_library_of_the_same_table_name_gets_targets_of_its_own(
    user_ops: oj.OpNamespace, tmp_path: Path
) -> None:
    other = compile_library(tmp_path, "othertestops")  # another library whose table is also "testops"
    again = oj.load_ops(other)
    target = again._ops["negate"].target
    assert target.startswith("testops.negate.") and target != user_ops._ops["negate"].target
    np.testing.assert_array_equal(again.negate(jnp.ones(2)), -np.ones(2))
    np.testing.assert_array_equal(user_ops.negate(jnp.ones(2)), -np.ones(2))
