#!/usr/bin/env python3
"""The same small Keras MLP built twice, with opforge layers and with keras.layers.Dense.

    x [2048, 64] -> Dense(256, relu) -> Dense(256) -> ReLU -> Dense(10)
    loss = mean squared error against a random 'teacher' network

Both models start from the same weights (seeded, then copied), see the same
batches in the same order (shuffle=False) and train with ``model.fit`` and
SGD. Their per-epoch losses must agree to a relative 1e-3, else the script
exits with status 1. Then ``model.fit`` of each is timed in the same run
and the ratio printed (noisy on a shared machine; bench/bench_tensorflow.py
measures per-op ratios).
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

SAMPLES, INPUTS, HIDDEN, OUTPUTS = 2048, 64, 256, 10
BATCH, EPOCHS, TIMED_EPOCHS = 128, 5, 5
LOSS_RTOL = 1e-3
SEED = 0


def make_data(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((SAMPLES, INPUTS)).astype(np.float32)
    teacher = rng.standard_normal((INPUTS, OUTPUTS)).astype(np.float32) / np.sqrt(INPUTS)
    return x, np.tanh(x @ teacher).astype(np.float32)


def make_model(layers: str) -> keras.Model:
    keras.utils.set_random_seed(SEED)
    dense = okeras.Dense if layers == "opforge" else keras.layers.Dense
    relu = okeras.ReLU if layers == "opforge" else keras.layers.ReLU
    model = keras.Sequential(
        [keras.Input((INPUTS,)), dense(HIDDEN, activation="relu"), dense(HIDDEN), relu(), dense(OUTPUTS)],
        name=f"mlp_{layers}",
    )
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.05), loss="mse")
    return model


def main() -> int:
    x, y = make_data(SEED)
    reference = make_model("keras")
    ours = make_model("opforge")
    ours.set_weights(reference.get_weights())

    losses = {}
    for name, model in (("opforge", ours), ("keras", reference)):
        losses[name] = model.fit(x, y, batch_size=BATCH, epochs=EPOCHS, shuffle=False, verbose=0).history["loss"]
    print(f"{'epoch':>5} {'opforge loss':>14} {'keras loss':>14} {'rel. diff':>10}")
    worst = 0.0
    for epoch, (a, b) in enumerate(zip(losses["opforge"], losses["keras"]), 1):
        diff = abs(a - b) / abs(b)
        worst = max(worst, diff)
        print(f"{epoch:5d} {a:14.6g} {b:14.6g} {diff:10.2e}")
    if worst > LOSS_RTOL or not losses["opforge"][-1] < losses["opforge"][0]:
        print(f"FAIL: losses differ by {worst:.2e} (tolerance {LOSS_RTOL:g}) or did not decrease")
        return 1

    seconds = {}
    for name, model in (("opforge", ours), ("keras", reference)):
        start = time.perf_counter()
        model.fit(x, y, batch_size=BATCH, epochs=TIMED_EPOCHS, shuffle=False, verbose=0)
        seconds[name] = time.perf_counter() - start
    print(
        f"model.fit, {TIMED_EPOCHS} epochs of {SAMPLES // BATCH} steps: opforge {seconds['opforge']:.3f} s, "
        f"keras.layers {seconds['keras']:.3f} s, ratio {seconds['opforge'] / seconds['keras']:.2f}x"
    )
    print(f"OK: losses agree to {worst:.1e} (tolerance {LOSS_RTOL:g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
