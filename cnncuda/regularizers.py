"""Keras 3's weight regularizers: ``Dense(10, kernel_regularizer=regularizers.l2(1e-4))``.

A regularizer adds ``l1 sum(|w|) + l2 sum(w^2)`` of its weight to the loss
that training minimizes and that fit and evaluate report (as Keras 3 adds a
layer's ``losses``). The engines add its gradient, ``l1 sign(w) + 2 l2 w``
(sign(0) = 0), to the weight's gradient after the backward pass and before
the optimizer, and ``n`` times the penalty (n the batch's rows) to the
loss sums (docs/semantics.md, "Regularizers").

``L1``, ``L2`` and ``L1L2`` (and ``l1``, ``l2``, ``l1_l2``, and the strings
'l1', 'l2', 'l1_l2') with Keras 3's arguments, defaults and configs (as in
Keras 3, ``l1_l2`` is ``L1L2``: both factors 0 unless given); a
regularizer is also callable on an array (its penalty, a float).
"""
import math
import numbers

import numpy as np

from .config_object import ConfigObject

__all__ = ["Regularizer", "L1", "L2", "L1L2", "l1", "l2", "l1_l2", "get", "serialize",
           "deserialize"]


def _factor(value, arg):
    if not isinstance(value, numbers.Real) or isinstance(value, bool) \
            or not math.isfinite(value) or value < 0:
        raise ValueError("Invalid value for argument %s: expected a non-negative float."
                         "Received: %s=%r" % (arg, arg, value))
    return float(value)


class Regularizer(ConfigObject):
    """Base class: the factors ``l1`` and ``l2`` of its penalty."""

    l1 = 0.0
    l2 = 0.0

    def __call__(self, x):
        x = np.asarray(x, np.float32)
        penalty = np.float32(0)
        if self.l1:
            penalty += np.float32(self.l1) * np.abs(x).sum(dtype=np.float32)
        if self.l2:
            penalty += np.float32(self.l2) * np.square(x).sum(dtype=np.float32)
        return float(penalty)

    def engine(self):
        """(l1, l2) as the engines take them."""
        return (self.l1, self.l2)


class L1L2(Regularizer):
    """``l1 sum(|w|) + l2 sum(w^2)``; both 0 by default (Keras's L1L2)."""

    def __init__(self, l1=0.0, l2=0.0):
        self.l1 = _factor(0.0 if l1 is None else l1, "l1")
        self.l2 = _factor(0.0 if l2 is None else l2, "l2")

    def get_config(self):
        return {"l1": self.l1, "l2": self.l2}


class L1(Regularizer):
    """``l1 sum(|w|)``, l1 0.01 by default. Its config holds l1 as float32
    gives it, as Keras 3's does (0.01 -> 0.009999999776482582)."""

    def __init__(self, l1=0.01):
        self.l1 = float(np.float32(_factor(0.01 if l1 is None else l1, "l1")))

    def get_config(self):
        return {"l1": self.l1}


class L2(Regularizer):
    """``l2 sum(w^2)``, l2 0.01 by default."""

    def __init__(self, l2=0.01):
        self.l2 = _factor(0.01 if l2 is None else l2, "l2")

    def get_config(self):
        return {"l2": self.l2}


# Keras 3 exports the classes under these names too: l1_l2() is L1L2(),
# both factors 0 (tf.keras 2's l1_l2 defaulted to 0.01 each)
l1, l2, l1_l2 = L1, L2, L1L2

CLASSES = {"L1": L1, "L2": L2, "L1L2": L1L2}
NAMES = {"l1": L1, "l2": L2, "l1_l2": L1L2, "L1": L1, "L2": L2, "L1L2": L1L2}


def serialize(regularizer):
    """Keras's serialized form of a regularizer."""
    return {"module": "keras.regularizers", "class_name": type(regularizer).__name__,
            "config": regularizer.get_config(), "registered_name": None}


def deserialize(config, arg="regularizer"):
    """A regularizer from Keras's serialized form or a name."""
    if isinstance(config, str):
        return get(config, arg)
    if not isinstance(config, dict) or config.get("class_name") not in CLASSES:
        raise ValueError("%s: expected {'class_name': one of L1, L2, L1L2, 'config': {...}}, "
                         "got %r" % (arg, config))
    try:
        return CLASSES[config["class_name"]].from_config(dict(config.get("config") or {}))
    except TypeError as exc:
        raise ValueError("%s: %s config %r: %s" % (arg, config["class_name"],
                                                   config.get("config"), exc))


def get(identifier, arg="regularizer"):
    """None, a regularizer object, a name ('l1', 'l2', 'l1_l2') or a
    serialized dict -> a regularizer or None."""
    if identifier is None or isinstance(identifier, Regularizer):
        return identifier
    if isinstance(identifier, dict):
        return deserialize(identifier, arg)
    if isinstance(identifier, str):
        if identifier not in NAMES:
            raise ValueError("%s: expected one of 'l1', 'l2', 'l1_l2', a regularizer object "
                             "or None, got %r" % (arg, identifier))
        return NAMES[identifier]()
    if type(identifier).__module__.startswith("keras"):
        raise TypeError("%s: expected a cnncuda regularizer (cnncuda.keras.regularizers), got "
                        "Keras's %s" % (arg, type(identifier).__name__))
    raise TypeError("%s: expected 'l1', 'l2', 'l1_l2', a regularizer such as "
                    "regularizers.l2(1e-4), or None, got %r (custom regularizer functions are "
                    "not supported)" % (arg, identifier))
