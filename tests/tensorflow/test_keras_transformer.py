"""opforge.keras's transformer layers (GELU, Softmax, LayerNorm, RMSNorm)
against Keras' own: values, gradients of inputs and weights, float64, a
model that trains like Keras' and survives saving, and refused configurations."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import pytest

pytest.importorskip("tensorflow")  # a clean skip without it (conftest.py)
pytest.importorskip("keras")  # a clean skip without it (conftest.py)

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

import opforge.keras as okeras  # noqa: E402

Pair = Callable[[str], tuple[keras.layers.Layer, keras.layers.Layer]]

PAIRS: dict[str, Pair] = {
    "gelu": lambda d: (okeras.GELU(dtype=d), keras.layers.Activation(keras.activations.gelu, dtype=d)),
    "gelu_tanh": lambda d: (
        okeras.GELU(approximate=True, dtype=d),
        keras.layers.Activation(lambda x: keras.activations.gelu(x, approximate=True), dtype=d),
    ),
    "softmax": lambda d: (okeras.Softmax(dtype=d), keras.layers.Softmax(dtype=d)),
    "layer_norm": lambda d: (okeras.LayerNorm(dtype=d), keras.layers.LayerNormalization(dtype=d)),
    "layer_norm_eps_no_center": lambda d: (
        okeras.LayerNorm(epsilon=1e-5, center=False, dtype=d),
        keras.layers.LayerNormalization(epsilon=1e-5, center=False, dtype=d),
    ),
    "layer_norm_no_scale": lambda d: (
        okeras.LayerNorm(scale=False, dtype=d),
        keras.layers.LayerNormalization(scale=False, dtype=d),
    ),
    "rms_norm": lambda d: (okeras.RMSNorm(dtype=d), keras.layers.RMSNormalization(dtype=d)),
    "rms_norm_eps": lambda d: (okeras.RMSNorm(epsilon=1e-3, dtype=d), keras.layers.RMSNormalization(epsilon=1e-3, dtype=d)),
}


def tolerance(name: str, dtype: str) -> dict[str, float]:
    if dtype == "float32":
        return {"rtol": 1e-5, "atol": 1e-5}
    if name.startswith("gelu"):  # TensorFlow's float64 gelu is off by up to ~3e-7 relative (opforge's
        return {"rtol": 1e-6, "atol": 1e-8}  # is checked to a few ulps against math.erf elsewhere)
    return {"rtol": 1e-11, "atol": 1e-11}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", PAIRS)
def test_layer_matches_keras(name: str, dtype: str) -> None:
    rng = np.random.default_rng(len(name))
    x = (rng.standard_normal((3, 4, 9)) * 3).astype(dtype)
    ours, theirs = PAIRS[name](dtype)
    ours.build(x.shape)
    theirs.build(x.shape)
    weights = [rng.standard_normal(w.shape).astype(dtype) for w in theirs.get_weights()]
    ours.set_weights(weights)
    theirs.set_weights(weights)
    xt = tf.constant(x)
    dy = tf.constant(rng.standard_normal(x.shape).astype(dtype))
    grads = []
    for layer in (ours, theirs):
        with tf.GradientTape() as tape:
            tape.watch(xt)
            y = layer(xt)
            loss = tf.reduce_sum(y * dy)
        assert y.dtype == dtype and y.shape == x.shape
        grads.append((y, *tape.gradient(loss, [xt, *layer.trainable_weights])))
    for a, b in zip(*grads, strict=True):
        np.testing.assert_allclose(a, b, **tolerance(name, dtype))


def test_layer_norm_second_order_matches_tensorflow_math() -> None:
    """A gradient of a gradient (the input's Hessian-vector product) through
    LayerNorm, against the same normalization in plain TensorFlow ops.
    (keras.layers.LayerNormalization is not the reference here: its second
    derivative on the TensorFlow backend differs from PyTorch's, plain
    TensorFlow's and opforge's, which agree to 1e-15.)"""
    rng = np.random.default_rng(5)
    x = tf.constant(rng.standard_normal((2, 6)))
    v = tf.constant(rng.standard_normal((2, 6)))
    w = tf.constant(rng.standard_normal(6))

    def plain(t: tf.Tensor) -> tf.Tensor:
        centered = t - tf.reduce_mean(t, -1, keepdims=True)
        return centered / tf.sqrt(tf.math.reduce_variance(t, -1, keepdims=True) + 1e-3) * w

    ours = okeras.LayerNorm(dtype="float64", center=False)
    ours.build(x.shape)
    ours.set_weights([w.numpy()])
    results = []
    for f in (ours, plain):
        with tf.GradientTape() as outer:
            outer.watch(x)
            with tf.GradientTape() as inner:
                inner.watch(x)
                loss = tf.reduce_sum(tf.sin(f(x)))
            gv = tf.reduce_sum(inner.gradient(loss, x) * v)
        results.append(outer.gradient(gv, x))
    np.testing.assert_allclose(results[0], results[1], rtol=1e-10, atol=1e-12)


def block(layers: str) -> keras.Model:
    """A transformer MLP block: layernorm -> dense -> gelu -> dense, + residual, rmsnorm, softmax head."""
    ours = layers == "opforge"
    dense = okeras.Dense if ours else keras.layers.Dense
    x = keras.Input((8,))
    h = (okeras.LayerNorm() if ours else keras.layers.LayerNormalization())(x)
    h = (okeras.GELU() if ours else keras.layers.Activation("gelu"))(dense(16)(h))
    h = keras.layers.Add()([x, dense(8)(h)])
    h = (okeras.RMSNorm() if ours else keras.layers.RMSNormalization())(h)
    y = (okeras.Softmax() if ours else keras.layers.Softmax())(dense(3)(h))
    return keras.Model(x, y, name=f"block_{layers}")


def test_block_trains_like_keras_saves_and_loads(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((96, 8)).astype(np.float32)
    labels = (x[:, :3] @ rng.standard_normal((3, 3))).argmax(-1)
    models = {}
    for layers in ("opforge", "keras"):
        keras.utils.set_random_seed(3)
        models[layers] = block(layers)
        models[layers].compile(optimizer=keras.optimizers.Adam(1e-2), loss="sparse_categorical_crossentropy")
    models["opforge"].set_weights(models["keras"].get_weights())
    fit = {k: m.fit(x, labels, batch_size=32, epochs=3, shuffle=False, verbose=0) for k, m in models.items()}
    losses = {k: h.history["loss"] for k, h in fit.items()}
    assert losses["opforge"][-1] < losses["opforge"][0]
    np.testing.assert_allclose(losses["opforge"], losses["keras"], rtol=1e-4)

    path = tmp_path / "block.keras"
    models["opforge"].save(path)
    loaded = keras.models.load_model(path)
    kinds = {type(layer) for layer in loaded.layers}
    assert {okeras.LayerNorm, okeras.GELU, okeras.RMSNorm, okeras.Softmax} <= kinds
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), models["opforge"].predict(x, verbose=0))


def test_configs_round_trip() -> None:
    for layer in (okeras.GELU(approximate=True), okeras.LayerNorm(epsilon=1e-4, center=False), okeras.RMSNorm(epsilon=0.5)):
        clone = type(layer).from_config(layer.get_config())
        assert clone.get_config() == layer.get_config()


def test_nan_and_inf_rows_follow_torch_softmax() -> None:
    """Rows with +inf, all -inf or a NaN give what torch.softmax gives (the
    textbook exp(x - max) / sum in NumPy): NaN across the row. (tf.nn.softmax
    keeps zeros beside a NaN or +inf instead.)"""
    x = np.array([[0.0, 1.0, np.inf], [-np.inf] * 3, [1.0, np.nan, 2.0], [0.0, -np.inf, 1.0]], np.float32)
    with np.errstate(invalid="ignore"):
        e = np.exp(x - x.max(-1, keepdims=True))
        expected = e / e.sum(-1, keepdims=True)
    np.testing.assert_allclose(okeras.Softmax()(x), expected, rtol=1e-6, equal_nan=True)


def test_bad_configurations_and_inputs() -> None:
    with pytest.raises(ValueError, match=r"opforge.keras.Softmax: only axis=-1 \(the last axis\) is supported, got 1"):
        okeras.Softmax(axis=1)
    with pytest.raises(ValueError, match=r"opforge.keras.LayerNorm: only axis=-1"):
        okeras.LayerNorm(axis=0)
    with pytest.raises(TypeError, match=r"compute dtype float16 is not supported; use float32 or float64"):
        okeras.RMSNorm(dtype="mixed_float16")(np.ones((2, 4), np.float32))
    with pytest.raises(ValueError, match=r"the last axis of the input must be known"):
        okeras.LayerNorm().build((None, None))
    layer = okeras.LayerNorm()
    layer.build((2, 4))
    with pytest.raises((tf.errors.InvalidArgumentError, ValueError), match=r"layer_norm"):
        layer(np.ones((2, 5), np.float32))  # weight of 4 for rows of 5
