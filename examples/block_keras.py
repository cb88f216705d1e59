#!/usr/bin/env python3
"""A transformer MLP block of opforge's Keras layers trained with
``model.fit``, next to the same block of Keras' own layers:

    x [., 64] -> LayerNorm -> Dense(256) -> GELU -> Dense(64) -> + x
              -> RMSNorm -> Dense(10) -> Softmax     (sparse categorical cross-entropy)

Both models start from the same weights and see the same batches; the
per-epoch losses must agree (relative 1e-3), else the script exits with
status 1. Then it prints the time ratio of ``model.fit`` (opforge / keras).
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import numpy as np  # noqa: E402

import opforge.keras as okeras  # noqa: E402

SAMPLES, WIDTH, HIDDEN, CLASSES = 2048, 64, 256, 10
BATCH, EPOCHS = 128, 4
LOSS_RTOL = 1e-3


def make_data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((SAMPLES, WIDTH)).astype(np.float32)
    teacher = rng.standard_normal((WIDTH, CLASSES)).astype(np.float32)
    return x, (x @ teacher).argmax(-1).astype(np.int32)


def make_model(layers: str) -> keras.Model:
    keras.utils.set_random_seed(0)
    ours = layers == "opforge"
    norm = okeras.LayerNorm() if ours else keras.layers.LayerNormalization()
    gelu = okeras.GELU() if ours else keras.layers.Activation(keras.activations.gelu)
    rms = okeras.RMSNorm() if ours else keras.layers.RMSNormalization()
    softmax = okeras.Softmax() if ours else keras.layers.Softmax()
    dense = okeras.Dense if ours else keras.layers.Dense
    x = keras.Input((WIDTH,))
    h = keras.layers.Add()([x, dense(WIDTH)(gelu(dense(HIDDEN)(norm(x))))])
    model = keras.Model(x, softmax(dense(CLASSES)(rms(h))), name=f"block_{layers}")
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=3e-3), loss="sparse_categorical_crossentropy")
    return model


def main() -> int:
    x, y = make_data()
    reference, ours = make_model("keras"), make_model("opforge")
    ours.set_weights(reference.get_weights())
    losses = {}
    seconds = {}
    for name, model in (("opforge", ours), ("keras", reference)):
        start = time.perf_counter()
        losses[name] = model.fit(x, y, batch_size=BATCH, epochs=EPOCHS, shuffle=False, verbose=0).history["loss"]
        seconds[name] = time.perf_counter() - start
    print(f"{'epoch':>5} {'opforge loss':>14} {'keras loss':>14} {'rel. diff':>10}")
    worst = 0.0
    for epoch, (a, b) in enumerate(zip(losses["opforge"], losses["keras"]), 1):
        diff = abs(a - b) / abs(b)
        worst = max(worst, diff)
        print(f"{epoch:5d} {a:14.6g} {b:14.6g} {diff:10.2e}")
    if worst > LOSS_RTOL or not losses["opforge"][-1] < losses["opforge"][0]:
        print(f"FAIL: losses differ by {worst:.2e} (tolerance {LOSS_RTOL:g}) or did not decrease")
        return 1
    print(
        f"model.fit, {EPOCHS} epochs of {SAMPLES // BATCH} steps (first includes tracing): opforge "
        f"{seconds['opforge']:.3f} s, keras.layers {seconds['keras']:.3f} s, ratio "
        f"{seconds['opforge'] / seconds['keras']:.2f}x"
    )
    print(f"OK: losses agree to {worst:.1e} (tolerance {LOSS_RTOL:g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
