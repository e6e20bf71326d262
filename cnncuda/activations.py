"""Keras's activation functions by name, in NumPy, so that
``Dense(10, activation=activations.softmax)`` works as in Keras (the layer
takes the function's name; the engine computes it). Each is Keras 3's
formula with its defaults (``keras.activations``); the elementwise ones are
those of the NumPy reference (cnncuda/reference.py), which the engines
follow."""
import numpy as np

from . import reference

__all__ = ["linear", "relu", "sigmoid", "tanh", "softmax", "elu", "selu", "gelu", "silu",
           "swish", "softplus", "softsign", "hard_sigmoid", "leaky_relu", "relu6",
           "exponential", "mish", "get"]


def _float(x):
    x = np.asarray(x)
    return x if np.issubdtype(x.dtype, np.floating) else x.astype(np.float64)


def linear(x):
    """x unchanged."""
    return np.asarray(x)


def relu(x, negative_slope=0.0, max_value=None, threshold=0.0):
    """Keras's relu: max(x, 0); with negative_slope, max_value or threshold,
    x above threshold (capped at max_value) and negative_slope (x -
    threshold) below it, as keras.activations.relu computes it."""
    if not negative_slope and max_value is None and not threshold:
        return np.maximum(x, 0)
    x = _float(x)
    t = x.dtype.type
    if negative_slope and max_value is None and not threshold:
        return leaky_relu(x, negative_slope)
    y = np.where(x > t(threshold), x, t(0)) if threshold else np.maximum(x, t(0))
    if max_value is not None:
        y = np.clip(y, t(0), t(max_value))
    if negative_slope:
        y = y - t(negative_slope) * np.maximum(t(threshold) - x, t(0))
    return y


def sigmoid(x):
    """1 / (1 + exp(-x))."""
    return 1.0 / (1.0 + np.exp(-np.asarray(x)))


def tanh(x):
    """The hyperbolic tangent."""
    return np.tanh(x)


def softmax(x, axis=-1):
    """exp(x) normalized over the last axis."""
    x = np.asarray(x)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def elu(x, alpha=1.0):
    """x where x > 0, else alpha (exp(x) - 1)."""
    return reference.elementwise_forward(_float(x), "elu", alpha=alpha)


def selu(x):
    """scale elu(x, alpha) with Keras's scale 1.0507009873554805 and alpha
    1.6732632423543772."""
    return reference.elementwise_forward(_float(x), "selu")


def gelu(x, approximate=False):
    """x P(X <= x) for X ~ N(0, 1): x erfc(-x / sqrt(2)) / 2 (Keras's default,
    approximate=False); with approximate, the tanh form."""
    x = _float(x)
    if approximate:
        t = x.dtype.type
        inner = t(np.sqrt(2 / np.pi)) * (x + t(0.044715) * x ** 3)
        return t(0.5) * x * (t(1) + np.tanh(inner))
    return reference.elementwise_forward(x, "gelu")


def silu(x):
    """x sigmoid(x) (swish)."""
    return reference.elementwise_forward(_float(x), "swish")


swish = silu


def softplus(x):
    """log(exp(x) + 1), computed without overflow."""
    return reference.elementwise_forward(_float(x), "softplus")


def softsign(x):
    """x / (|x| + 1)."""
    return reference.elementwise_forward(_float(x), "softsign")


def hard_sigmoid(x):
    """relu6(x + 3) / 6 (Keras 3's)."""
    return reference.elementwise_forward(_float(x), "hard_sigmoid")


def leaky_relu(x, negative_slope=0.2):
    """x where x >= 0, else negative_slope x."""
    return reference.elementwise_forward(_float(x), "leaky_relu", alpha=negative_slope)


def relu6(x):
    """min(max(x, 0), 6)."""
    return reference.elementwise_forward(_float(x), "relu6")


def exponential(x):
    """exp(x)."""
    return np.exp(_float(x))


def mish(x):
    """x tanh(softplus(x))."""
    return reference.elementwise_forward(_float(x), "mish")


_FUNCTIONS = {f.__name__: f for f in (linear, relu, sigmoid, tanh, softmax, elu, selu, gelu, silu,
                                      softplus, softsign, hard_sigmoid, leaky_relu, relu6,
                                      exponential, mish)}
_FUNCTIONS["swish"] = silu


def get(identifier):
    """The function of a name."""
    if identifier is None:
        return linear
    if callable(identifier):
        return identifier
    if identifier not in _FUNCTIONS:
        raise ValueError("activation: expected one of %s, got %r"
                         % (", ".join(repr(k) for k in _FUNCTIONS), identifier))
    return _FUNCTIONS[identifier]
