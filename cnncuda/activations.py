"""Keras's activation functions by name, in NumPy, so that
``Dense(10, activation=activations.softmax)`` works as in Keras (the layer
takes the function's name; the engine computes it)."""
import numpy as np

__all__ = ["linear", "relu", "sigmoid", "tanh", "softmax", "get"]


def linear(x):
    """x unchanged."""
    return np.asarray(x)


def relu(x):
    """max(x, 0)."""
    return np.maximum(x, 0)


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


def get(identifier):
    """The function of a name."""
    functions = {f.__name__: f for f in (linear, relu, sigmoid, tanh, softmax)}
    if identifier is None:
        return linear
    if callable(identifier):
        return identifier
    if identifier not in functions:
        raise ValueError("activation: expected one of %s, got %r"
                         % (", ".join(repr(k) for k in functions), identifier))
    return functions[identifier]
