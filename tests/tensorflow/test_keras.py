"""opforge.keras layers: same results as keras.layers, training, saving and loading."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tensorflow")  # a clean skip without it (conftest.py)
pytest.importorskip("keras")  # a clean skip without it (conftest.py)

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

import opforge.keras as okeras  # noqa: E402


def data(n: int = 128, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 6)).astype(np.float32)
    y = (np.sin(x[:, :1]) + 0.5 * x[:, 1:2] ** 2).astype(np.float32)
    return x, y


@pytest.mark.parametrize("activation", [None, "relu", "tanh"])
@pytest.mark.parametrize("use_bias", [True, False])
def test_dense_matches_keras_dense(activation: str | None, use_bias: bool) -> None:
    x, _ = data(16)
    ours = okeras.Dense(5, activation=activation, use_bias=use_bias)
    theirs = keras.layers.Dense(5, activation=activation, use_bias=use_bias)
    ours.build(x.shape)
    theirs.build(x.shape)
    weights = [np.random.default_rng(1).standard_normal(w.shape).astype(np.float32) for w in theirs.get_weights()]
    ours.set_weights(weights)
    theirs.set_weights(weights)
    np.testing.assert_allclose(ours(x), theirs(x), rtol=1e-5, atol=1e-5)
    x3 = x.reshape(4, 4, 6)
    np.testing.assert_allclose(ours(x3), theirs(x3), rtol=1e-5, atol=1e-5)
    assert ours.compute_output_shape((None, 4, 6)) == (None, 4, 5)


def test_relu_layer_matches_keras() -> None:
    x = np.array([[-1.0, 0.0, 2.0, np.nan]], np.float32)
    np.testing.assert_array_equal(okeras.ReLU()(x), keras.layers.ReLU()(x))


def mlp(layers: str) -> keras.Model:
    dense = okeras.Dense if layers == "opforge" else keras.layers.Dense
    relu = okeras.ReLU if layers == "opforge" else keras.layers.ReLU
    return keras.Sequential(
        [keras.Input((6,)), dense(16, activation="relu"), dense(16), relu(), dense(1)], name=f"mlp_{layers}"
    )


def test_model_trains_like_keras_saves_and_loads(tmp_path: Path) -> None:
    x, y = data()
    models = {}
    for layers in ("opforge", "keras"):
        keras.utils.set_random_seed(7)
        model = mlp(layers)
        model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
        models[layers] = model
    models["opforge"].set_weights(models["keras"].get_weights())
    history = {k: m.fit(x, y, batch_size=32, epochs=4, shuffle=False, verbose=0).history["loss"] for k, m in models.items()}
    assert history["opforge"][-1] < history["opforge"][0]  # it learns
    np.testing.assert_allclose(history["opforge"], history["keras"], rtol=1e-4)

    model = models["opforge"]
    path = tmp_path / "m.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    assert [type(layer) for layer in loaded.layers] == [okeras.Dense, okeras.Dense, okeras.ReLU, okeras.Dense]
    assert loaded.layers[0].get_config()["activation"] == "relu"
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))
    loaded.fit(x, y, epochs=1, verbose=0)  # the loaded model trains (gradients registered)


def test_float64_layers() -> None:
    layer = okeras.Dense(3, dtype="float64")
    out = layer(np.ones((2, 4)))
    assert out.dtype == tf.float64
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(layer(np.ones((2, 4))) ** 2)
    assert all(g is not None and g.dtype == tf.float64 for g in tape.gradient(loss, layer.trainable_weights))


def test_unsupported_configurations_are_refused() -> None:
    with pytest.raises(TypeError, match=r"compute dtype float16 is not supported; use float32 or float64"):
        okeras.Dense(3, dtype="mixed_float16")(np.ones((2, 4), np.float32))
    with pytest.raises(ValueError, match=r"units must be a positive int"):
        okeras.Dense(0)
    with pytest.raises(ValueError):
        okeras.Dense(3)(np.ones(4, np.float32))  # rank 1: min_ndim=2


def test_another_keras_backend_is_refused_clearly() -> None:
    if importlib.util.find_spec("jax") is None:
        pytest.skip("needs jax for a second Keras backend")
    code = (
        "import keras, opforge.keras as ok\n"
        "assert keras.backend.backend() == 'jax'\n"
        "try:\n    ok.Dense(2)\nexcept RuntimeError as e:\n    print(e)\n"
    )
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "opforge.keras.Dense runs TensorFlow ops and needs Keras' TensorFlow backend" in out.stdout
    assert "this Keras uses 'jax'" in out.stdout
