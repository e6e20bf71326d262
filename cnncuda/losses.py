"""Keras's cross-entropy losses, by name or as objects.

``compile(loss='sparse_categorical_crossentropy')`` or
``compile(loss=SparseCategoricalCrossentropy(from_logits=True))``: the engines
compute the loss (the mean over the batch of per-sample losses, as Keras's
default reduction) and its gradient in one fused op, following
docs/semantics.md. A loss object can also be called on arrays,
``loss(y_true, y_pred)``, which computes the same mean in NumPy.
"""
import numpy as np

from . import reference
from .checks import boolean, choice, number_in

__all__ = ["Loss", "SparseCategoricalCrossentropy", "CategoricalCrossentropy",
           "BinaryCrossentropy", "get", "sparse_categorical_crossentropy",
           "categorical_crossentropy", "binary_crossentropy", "KINDS"]

KINDS = ("sparse_categorical_crossentropy", "categorical_crossentropy", "binary_crossentropy")


class Loss:
    """A cross-entropy loss: ``kind`` (the engine's name) and ``from_logits``."""

    kind = None

    def __init__(self, from_logits=False, reduction="auto", name=None):
        self.from_logits = boolean(from_logits, "from_logits")
        choice(reduction, "reduction", ("auto", "sum_over_batch_size"))
        self.name = name or self.kind

    def engine_loss(self):
        """The engine's loss dict."""
        return {"kind": self.kind, "from_logits": self.from_logits}

    def get_config(self):
        return {"name": self.name, "from_logits": self.from_logits}

    def __call__(self, y_true, y_pred):
        """The mean loss of a batch, in NumPy (float64)."""
        y_pred = np.asarray(y_pred, dtype=np.float64)
        y_true = np.asarray(y_true)
        if self.kind == "sparse_categorical_crossentropy":
            y_true = y_true.reshape(len(y_pred)).astype(np.int64)
        else:
            y_true = y_true.astype(np.float64).reshape(y_pred.shape)
        loss_sum, _, _ = reference.loss_forward_backward(self.kind, y_pred, y_true,
                                                         self.from_logits, grad=False)
        return float(loss_sum) / len(y_pred)

    def __repr__(self):
        return "%s(from_logits=%r)" % (type(self).__name__, self.from_logits)


class SparseCategoricalCrossentropy(Loss):
    """Integer class labels of shape (n,) or (n, 1)."""

    kind = "sparse_categorical_crossentropy"


class CategoricalCrossentropy(Loss):
    """One-hot (or soft) targets of shape (n, classes)."""

    kind = "categorical_crossentropy"

    def __init__(self, from_logits=False, label_smoothing=0.0, **kwargs):
        if number_in(label_smoothing, "label_smoothing", 0.0, 1.0) != 0.0:
            raise ValueError("label_smoothing: expected 0 (smooth the targets yourself), got %r"
                             % (label_smoothing,))
        super().__init__(from_logits, **kwargs)


class BinaryCrossentropy(Loss):
    """0/1 targets of shape (n, outputs) (or (n,) for one output)."""

    kind = "binary_crossentropy"

    def __init__(self, from_logits=False, label_smoothing=0.0, **kwargs):
        if number_in(label_smoothing, "label_smoothing", 0.0, 1.0) != 0.0:
            raise ValueError("label_smoothing: expected 0 (smooth the targets yourself), got %r"
                             % (label_smoothing,))
        super().__init__(from_logits, **kwargs)


_BY_KIND = {cls.kind: cls for cls in (SparseCategoricalCrossentropy, CategoricalCrossentropy,
                                       BinaryCrossentropy)}


def get(identifier):
    """A Loss from a name, a Loss, or a loss function of this module."""
    if isinstance(identifier, Loss):
        return identifier
    if callable(identifier) and getattr(identifier, "__name__", None) in _BY_KIND:
        return _BY_KIND[identifier.__name__]()
    if isinstance(identifier, str):
        return _BY_KIND[choice(identifier, "loss", KINDS)]()
    raise TypeError("loss: expected one of %s or a loss object such as "
                    "SparseCategoricalCrossentropy(from_logits=True), got %r"
                    % (", ".join(repr(k) for k in KINDS), identifier))


def from_config(kind, config):
    """The Loss of `kind` with `config` (as a saved model holds them)."""
    if kind not in _BY_KIND:
        raise ValueError("loss: expected one of %s, got %r" % (", ".join(KINDS), kind))
    return _BY_KIND[kind](**config)


def sparse_categorical_crossentropy(y_true, y_pred, from_logits=False):
    """Mean sparse categorical cross-entropy of a batch."""
    return SparseCategoricalCrossentropy(from_logits)(y_true, y_pred)


def categorical_crossentropy(y_true, y_pred, from_logits=False):
    """Mean categorical cross-entropy of a batch."""
    return CategoricalCrossentropy(from_logits)(y_true, y_pred)


def binary_crossentropy(y_true, y_pred, from_logits=False):
    """Mean binary cross-entropy of a batch."""
    return BinaryCrossentropy(from_logits)(y_true, y_pred)
