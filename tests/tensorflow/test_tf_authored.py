"""Ops written with the authoring layer (examples/ops/myops.c) as TensorFlow
ops: values, tf.function and gradients against TensorFlow's own ops."""

from __future__ import annotations

import shutil
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from oplib import compile_myops

import opforge.tensorflow as otf

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


@pytest.fixture(scope="module")
def myops(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return otf.load_ops(compile_myops(tmp_path_factory.mktemp("tf_myops")), prefix="Authored")


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
def test_values_match_tensorflow(myops: Any, dtype: tf.DType) -> None:
    x = tf.constant(np.random.default_rng(0).standard_normal((6, 40)) * 6, dtype=dtype)
    rtol = 2e-6 if dtype == tf.float32 else 1e-12
    np.testing.assert_allclose(myops.softplus(x), tf.nn.softplus(x), rtol=rtol)
    np.testing.assert_allclose(tf.function(myops.softplus)(tf.transpose(x)), tf.nn.softplus(tf.transpose(x)), rtol=rtol)
    np.testing.assert_array_equal(myops.my_op(x, factor=3.0), x * 3)
    np.testing.assert_allclose(myops.rowsum(x), tf.reduce_sum(x, -1), rtol=1e-5, atol=1e-4)
    assert myops.rowsum(x).shape == (6,)


def test_gradients_match_tensorflow(myops: Any) -> None:
    x = tf.constant(np.random.default_rng(1).standard_normal((5, 9)))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        ours = tf.reduce_sum(myops.rowsum(myops.softplus(x) * myops.my_op(x, factor=2.0)) ** 2)
        theirs = tf.reduce_sum(tf.reduce_sum(tf.nn.softplus(x) * x * 2.0, -1) ** 2)
    np.testing.assert_allclose(tape.gradient(ours, x), tape.gradient(theirs, x), rtol=1e-12)


def test_shape_function(myops: Any) -> None:
    @tf.function(input_signature=[tf.TensorSpec([None, 7, 5], tf.float32)])
    def f(x: tf.Tensor) -> tf.Tensor:
        y = myops.rowsum(x)
        assert y.shape.as_list() == [None, 7]
        return y

    np.testing.assert_allclose(f(tf.ones([2, 7, 5])), tf.fill([2, 7], 5.0))


def test_errors_name_the_op(myops: Any) -> None:
    with pytest.raises((tf.errors.InvalidArgumentError, ValueError), match=r"myops\.rowsum: x must have rank 1"):
        myops.rowsum(tf.constant(1.0))


def test_differentiating_a_row_without_gradient_rules_is_an_error(myops: Any) -> None:
    x = tf.constant([0.5, -1.0], tf.float64)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = myops.softplus_grad(tf.ones_like(x), x)
    with pytest.raises(LookupError, match=r"myops\.softplus_grad \(TensorFlow op .*\) is not differentiable"):
        tape.gradient(y, x)


def test_rowsum_second_order_and_forward_mode(myops: Any) -> None:
    """rowsum declares rules to second order: nested tapes and a
    ForwardAccumulator match tf.reduce_sum's."""
    x0 = tf.constant(np.random.default_rng(4).standard_normal((3, 5)))
    t = tf.constant(np.random.default_rng(5).standard_normal((3, 5)))
    results = []
    for f in (myops.rowsum, lambda v: tf.reduce_sum(v, axis=-1)):
        x = tf.Variable(x0)
        with tf.GradientTape() as outer:
            with tf.GradientTape() as inner:
                y = tf.reduce_sum(f(x) ** 3)
            g = inner.gradient(y, x)
            gg = tf.reduce_sum(g * g)
        with tf.autodiff.ForwardAccumulator(x0, t) as acc:
            z = f(x0)
        results.append((g, outer.gradient(gg, x), acc.jvp(z)))
    for a, e in zip(*results):
        np.testing.assert_allclose(a, e, rtol=1e-12, atol=1e-12)
