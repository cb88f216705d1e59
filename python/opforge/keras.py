"""Keras 3 layers on opforge's TensorFlow ops.

``Dense`` computes ``activation(x @ kernel + bias)`` with one ``OpfDense`` op
(ReLU is fused into it; any other activation is applied after it), ``ReLU``
with ``OpfRelu``; their gradients are opforge's gradient ops. Both are
registered Keras serializables (package "opforge"): ``model.save("m.keras")``
and ``keras.models.load_model("m.keras")`` round-trip once this module is
imported.

They need Keras' TensorFlow backend (the default when TensorFlow is
installed): the layers run TensorFlow ops. Under another backend (JAX,
PyTorch) creating a layer raises ``RuntimeError``. Weights and inputs must be
float32 or float64 (a mixed-precision policy such as "mixed_float16" is
refused when the layer is built).
"""

from __future__ import annotations

from typing import Any, Optional

import keras
import tensorflow as tf

from . import tensorflow as otf

__all__ = ["Dense", "ReLU"]

_FLOAT_DTYPES = ("float32", "float64")


def _require_tensorflow_backend(layer: str) -> None:
    backend = keras.backend.backend()
    if backend != "tensorflow":
        raise RuntimeError(
            f"opforge.keras.{layer} runs TensorFlow ops and needs Keras' TensorFlow backend "
            f"(KERAS_BACKEND=tensorflow); this Keras uses {backend!r}"
        )


def _check_dtype(layer: keras.layers.Layer) -> None:
    for kind, dtype in (("compute", layer.compute_dtype), ("variable", layer.variable_dtype)):
        if dtype not in _FLOAT_DTYPES:
            raise TypeError(
                f"opforge.keras.{type(layer).__name__} {layer.name!r}: {kind} dtype {dtype} is not supported; "
                f"use float32 or float64 (dtype policy {layer.dtype_policy.name!r})"
            )


@keras.saving.register_keras_serializable(package="opforge")
class Dense(keras.layers.Layer):
    """Densely connected layer, ``activation(inputs @ kernel + bias)``, on opforge's dense op.

    Takes the arguments of ``keras.layers.Dense`` (except LoRA and
    quantization); inputs of rank > 2 are multiplied along their last axis.
    """

    def __init__(
        self,
        units: int,
        activation: Any = None,
        use_bias: bool = True,
        kernel_initializer: Any = "glorot_uniform",
        bias_initializer: Any = "zeros",
        kernel_regularizer: Any = None,
        bias_regularizer: Any = None,
        activity_regularizer: Any = None,
        kernel_constraint: Any = None,
        bias_constraint: Any = None,
        **kwargs: Any,
    ) -> None:
        _require_tensorflow_backend("Dense")
        super().__init__(activity_regularizer=activity_regularizer, **kwargs)
        if not isinstance(units, int) or isinstance(units, bool) or units <= 0:
            raise ValueError(f"opforge.keras.Dense: units must be a positive int, got {units!r}")
        self.units = units
        self.activation = keras.activations.get(activation)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.bias_regularizer = keras.regularizers.get(bias_regularizer)
        self.kernel_constraint = keras.constraints.get(kernel_constraint)
        self.bias_constraint = keras.constraints.get(bias_constraint)
        self.input_spec = keras.layers.InputSpec(min_ndim=2)
        self.supports_masking = True
        # ReLU runs fused in the op; other activations after it.
        self._fused = "relu" if self.activation is keras.activations.relu else "none"
        self._after: Optional[Any] = (
            None if self.activation in (keras.activations.relu, keras.activations.linear) else self.activation
        )

    def build(self, input_shape: tuple[Optional[int], ...]) -> None:
        _check_dtype(self)
        depth = input_shape[-1]
        if depth is None:
            raise ValueError(f"opforge.keras.Dense {self.name!r}: the last axis of the input must be known")
        self.kernel = self.add_weight(
            name="kernel",
            shape=(depth, self.units),
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint,
        )
        self.bias = (
            self.add_weight(
                name="bias",
                shape=(self.units,),
                initializer=self.bias_initializer,
                regularizer=self.bias_regularizer,
                constraint=self.bias_constraint,
            )
            if self.use_bias
            else None
        )
        self.input_spec = keras.layers.InputSpec(min_ndim=2, axes={-1: depth})

    def call(self, inputs: Any) -> tf.Tensor:
        x = tf.convert_to_tensor(inputs, dtype=self.compute_dtype)
        kernel = tf.convert_to_tensor(self.kernel, dtype=self.compute_dtype)
        bias = None if self.bias is None else tf.convert_to_tensor(self.bias, dtype=self.compute_dtype)
        flat = x if x.shape.rank == 2 else tf.reshape(x, [-1, tf.shape(x)[-1]])
        y = otf.dense(flat, kernel, bias, activation=self._fused)
        if x.shape.rank != 2:
            y = tf.reshape(y, tf.concat([tf.shape(x)[:-1], [self.units]], axis=0))
        return y if self._after is None else self._after(y)

    def compute_output_shape(self, input_shape: tuple[Optional[int], ...]) -> tuple[Optional[int], ...]:
        return tuple(input_shape[:-1]) + (self.units,)

    def get_config(self) -> dict[str, Any]:
        config: dict[str, Any] = super().get_config()
        config.update(
            units=self.units,
            activation=keras.activations.serialize(self.activation),
            use_bias=self.use_bias,
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
            bias_initializer=keras.initializers.serialize(self.bias_initializer),
            kernel_regularizer=keras.regularizers.serialize(self.kernel_regularizer),
            bias_regularizer=keras.regularizers.serialize(self.bias_regularizer),
            kernel_constraint=keras.constraints.serialize(self.kernel_constraint),
            bias_constraint=keras.constraints.serialize(self.bias_constraint),
        )
        return config


@keras.saving.register_keras_serializable(package="opforge")
class ReLU(keras.layers.Layer):
    """``max(inputs, 0)`` on opforge's relu op (NaN stays NaN)."""

    def __init__(self, **kwargs: Any) -> None:
        _require_tensorflow_backend("ReLU")
        super().__init__(**kwargs)
        self.supports_masking = True

    def build(self, input_shape: tuple[Optional[int], ...]) -> None:
        _check_dtype(self)

    def call(self, inputs: Any) -> tf.Tensor:
        return otf.relu(tf.convert_to_tensor(inputs, dtype=self.compute_dtype))

    def compute_output_shape(self, input_shape: tuple[Optional[int], ...]) -> tuple[Optional[int], ...]:
        return input_shape
