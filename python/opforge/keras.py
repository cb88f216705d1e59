"""Keras 3 layers on opforge's TensorFlow ops.

``Dense`` computes ``activation(x @ kernel + bias)`` with one ``OpfDense`` op
(ReLU is fused into it; any other activation is applied after it), ``ReLU``
with ``OpfRelu``, ``GELU``, ``Softmax``, ``LayerNorm`` and ``RMSNorm`` with
opforge's ops of those names (the last axis); their gradients are opforge's
gradient ops. All are registered Keras serializables (package "opforge"): ``model.save("m.keras")``
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

__all__ = ["Dense", "ReLU", "GELU", "Softmax", "LayerNorm", "RMSNorm"]

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


class _Elementwise(keras.layers.Layer):
    """A layer that applies one opforge op to its input, keeping its shape."""

    def __init__(self, **kwargs: Any) -> None:
        _require_tensorflow_backend(type(self).__name__)
        super().__init__(**kwargs)
        self.supports_masking = True

    def build(self, input_shape: tuple[Optional[int], ...]) -> None:
        _check_dtype(self)

    def compute_output_shape(self, input_shape: tuple[Optional[int], ...]) -> tuple[Optional[int], ...]:
        return input_shape


@keras.saving.register_keras_serializable(package="opforge")
class GELU(_Elementwise):
    """Gaussian error linear unit on opforge's gelu op, like
    ``keras.activations.gelu(x, approximate)``: the erf form, or the tanh
    approximation with ``approximate=True``."""

    def __init__(self, approximate: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.approximate = bool(approximate)

    def call(self, inputs: Any) -> tf.Tensor:
        x = tf.convert_to_tensor(inputs, dtype=self.compute_dtype)
        return otf.gelu(x, approximate="tanh" if self.approximate else "none")

    def get_config(self) -> dict[str, Any]:
        config: dict[str, Any] = super().get_config()
        config.update(approximate=self.approximate)
        return config


def _last_axis(layer: str, axis: Any) -> int:
    if axis not in (-1,):
        raise ValueError(f"opforge.keras.{layer}: only axis=-1 (the last axis) is supported, got {axis!r}")
    return -1


@keras.saving.register_keras_serializable(package="opforge")
class Softmax(_Elementwise):
    """Softmax over the last axis on opforge's softmax op, like ``keras.layers.Softmax``
    (masks are not supported)."""

    def __init__(self, axis: int = -1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.axis = _last_axis("Softmax", axis)

    def call(self, inputs: Any) -> tf.Tensor:
        return otf.softmax(tf.convert_to_tensor(inputs, dtype=self.compute_dtype))

    def get_config(self) -> dict[str, Any]:
        config: dict[str, Any] = super().get_config()
        config.update(axis=self.axis)
        return config


class _Norm(keras.layers.Layer):
    """Shared by LayerNorm and RMSNorm: a weight (and bias) over the last axis."""

    def __init__(self, axis: int, epsilon: float, **kwargs: Any) -> None:
        _require_tensorflow_backend(type(self).__name__)
        super().__init__(**kwargs)
        self.axis = _last_axis(type(self).__name__, axis)
        self.epsilon = float(epsilon)
        self.supports_masking = True

    def _depth(self, input_shape: tuple[Optional[int], ...]) -> int:
        _check_dtype(self)
        depth = input_shape[-1]
        if depth is None:
            raise ValueError(f"opforge.keras.{type(self).__name__} {self.name!r}: the last axis of the input must be known")
        return int(depth)

    def compute_output_shape(self, input_shape: tuple[Optional[int], ...]) -> tuple[Optional[int], ...]:
        return input_shape

    def get_config(self) -> dict[str, Any]:
        config: dict[str, Any] = super().get_config()
        config.update(axis=self.axis, epsilon=self.epsilon)
        return config


@keras.saving.register_keras_serializable(package="opforge")
class LayerNorm(_Norm):
    """Layer normalization over the last axis on opforge's layer_norm op, like
    ``keras.layers.LayerNormalization`` (``center``: a bias, ``scale``: a
    weight; ``epsilon`` defaults to Keras' 1e-3)."""

    def __init__(
        self, axis: int = -1, epsilon: float = 1e-3, center: bool = True, scale: bool = True, **kwargs: Any
    ) -> None:
        super().__init__(axis, epsilon, **kwargs)
        self.center = bool(center)
        self.scale = bool(scale)

    def build(self, input_shape: tuple[Optional[int], ...]) -> None:
        depth = self._depth(input_shape)
        self.gamma = self.add_weight(name="gamma", shape=(depth,), initializer="ones") if self.scale else None
        self.beta = self.add_weight(name="beta", shape=(depth,), initializer="zeros") if self.center else None

    def call(self, inputs: Any) -> tf.Tensor:
        x = tf.convert_to_tensor(inputs, dtype=self.compute_dtype)
        gamma = None if self.gamma is None else tf.convert_to_tensor(self.gamma, dtype=self.compute_dtype)
        beta = None if self.beta is None else tf.convert_to_tensor(self.beta, dtype=self.compute_dtype)
        return otf.layer_norm(x, gamma, beta, eps=self.epsilon)[0]

    def get_config(self) -> dict[str, Any]:
        config: dict[str, Any] = super().get_config()
        config.update(center=self.center, scale=self.scale)
        return config


@keras.saving.register_keras_serializable(package="opforge")
class RMSNorm(_Norm):
    """Root-mean-square normalization over the last axis on opforge's rms_norm
    op, like ``keras.layers.RMSNormalization`` (a weight ``scale``; ``epsilon``
    defaults to Keras' 1e-6)."""

    def __init__(self, axis: int = -1, epsilon: float = 1e-6, **kwargs: Any) -> None:
        super().__init__(axis, epsilon, **kwargs)

    def build(self, input_shape: tuple[Optional[int], ...]) -> None:
        self.scale = self.add_weight(name="scale", shape=(self._depth(input_shape),), initializer="ones")

    def call(self, inputs: Any) -> tf.Tensor:
        x = tf.convert_to_tensor(inputs, dtype=self.compute_dtype)
        return otf.rms_norm(x, tf.convert_to_tensor(self.scale, dtype=self.compute_dtype), eps=self.epsilon)[0]
