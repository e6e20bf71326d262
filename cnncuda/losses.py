"""Keras's losses, by name or as objects: the cross-entropies and the
regression losses.

``compile(loss='sparse_categorical_crossentropy')``,
``compile(loss=SparseCategoricalCrossentropy(from_logits=True))``,
``compile(loss='mse')`` or ``compile(loss=Huber(delta=2.0))``: the engines
compute the loss (the mean over the batch of per-sample losses, as Keras's
default reduction 'sum_over_batch_size') and its gradient in one fused op,
following docs/semantics.md. A regression loss's per-sample value is the
mean over the outputs of an elementwise term (Keras's ``mean(..., axis=-1)``).
A loss object can also be called on arrays, ``loss(y_true, y_pred)``, which
computes the same mean in NumPy (float64).
"""
import numbers

import numpy as np

from . import reference
from .checks import boolean, choice, number_in

__all__ = ["Loss", "SparseCategoricalCrossentropy", "CategoricalCrossentropy",
           "BinaryCrossentropy", "MeanSquaredError", "MeanAbsoluteError", "Huber",
           "MeanSquaredLogarithmicError", "LogCosh", "MeanAbsolutePercentageError", "get",
           "sparse_categorical_crossentropy", "categorical_crossentropy", "binary_crossentropy",
           "mean_squared_error", "mean_absolute_error", "huber",
           "mean_squared_logarithmic_error", "log_cosh", "mean_absolute_percentage_error",
           "mse", "mae", "msle", "mape", "KINDS", "REGRESSION_KINDS"]

CROSSENTROPY_KINDS = ("sparse_categorical_crossentropy", "categorical_crossentropy",
                      "binary_crossentropy")
REGRESSION_KINDS = reference.REGRESSION_LOSS_KINDS
KINDS = CROSSENTROPY_KINDS + REGRESSION_KINDS
# Keras's short names of the regression losses (keras.losses.get)
ALIASES = {"mse": "mean_squared_error", "mae": "mean_absolute_error",
           "msle": "mean_squared_logarithmic_error", "mape": "mean_absolute_percentage_error"}


class Loss:
    """A loss: ``kind`` (the engine's name); the cross-entropies have
    ``from_logits``, the regression losses have it False."""

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
        """The mean loss of a batch, in NumPy (float64): along the last axis
        of y_pred, averaged over every other position (Keras's reduction)."""
        y_pred = np.asarray(y_pred, dtype=np.float64)
        rows = y_pred.reshape(-1, y_pred.shape[-1]) if y_pred.ndim > 1 else y_pred.reshape(-1, 1)
        y_true = np.asarray(y_true)
        if self.kind == "sparse_categorical_crossentropy":
            y_true = y_true.reshape(len(rows)).astype(np.int64)
        else:
            y_true = y_true.astype(np.float64).reshape(rows.shape)
        loss_sum, _, _ = reference.loss_forward_backward(self.kind, rows, y_true,
                                                         self.from_logits, grad=False)
        return float(loss_sum) / len(rows)

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


class _Regression(Loss):
    """A regression loss: targets of the outputs' shape ((n,) for one
    output), the mean over the outputs of an elementwise term
    (csrc/regression_math.h, docs/semantics.md)."""

    default_name = None

    def __init__(self, reduction="sum_over_batch_size", name=None, dtype=None):
        choice(reduction, "reduction", ("auto", "sum_over_batch_size"))
        if dtype not in (None, "float32"):
            raise ValueError("dtype: expected None or 'float32' (the engines compute in "
                             "float32), got %r" % (dtype,))
        if name is not None and (not isinstance(name, str) or not name):
            raise TypeError("name: expected a non-empty str, got %r" % (name,))
        self.from_logits = False
        self.name = name or self.default_name

    def get_config(self):
        return {"name": self.name, "reduction": "sum_over_batch_size"}

    def __call__(self, y_true, y_pred):
        """The mean loss of a batch in NumPy (float64), as Keras's: the mean
        over the last axis, then over every other position and the batch."""
        y_pred = np.asarray(y_pred, dtype=np.float64)
        y_true = np.asarray(y_true, dtype=np.float64)
        if y_true.ndim == y_pred.ndim + 1 and y_true.shape[-1] == 1:
            y_true = y_true[..., 0]
        elif y_pred.ndim == y_true.ndim + 1 and y_pred.shape[-1] == 1:
            y_pred = y_pred[..., 0]
        if y_true.shape != y_pred.shape:
            raise ValueError("y_true: expected the shape of y_pred %s, got %s"
                             % (y_pred.shape, y_true.shape))
        term, _ = reference._regression_terms(self.kind, y_pred, y_true,
                                              getattr(self, "delta", 1.0))
        return float(np.mean(term)) if term.size else 0.0

    def __repr__(self):
        return "%s()" % type(self).__name__


class MeanSquaredError(_Regression):
    """mean((y_true - y_pred)^2) over the outputs."""

    kind = default_name = "mean_squared_error"


class MeanAbsoluteError(_Regression):
    """mean(|y_true - y_pred|) over the outputs."""

    kind = default_name = "mean_absolute_error"


class MeanSquaredLogarithmicError(_Regression):
    """mean((log(max(y_pred, eps) + 1) - log(max(y_true, eps) + 1))^2), eps 1e-7."""

    kind = default_name = "mean_squared_logarithmic_error"


class LogCosh(_Regression):
    """mean(log(cosh(y_pred - y_true))), as x + softplus(-2 x) - log 2."""

    kind = default_name = "log_cosh"


class MeanAbsolutePercentageError(_Regression):
    """100 mean(|(y_true - y_pred) / max(|y_true|, eps)|), eps 1e-7."""

    kind = default_name = "mean_absolute_percentage_error"


class Huber(_Regression):
    """mean of e^2 / 2 where |e| <= delta, delta |e| - delta^2 / 2 elsewhere
    (e = y_pred - y_true)."""

    kind = "huber"
    default_name = "huber_loss"

    def __init__(self, delta=1.0, reduction="sum_over_batch_size", name=None, dtype=None):
        if isinstance(delta, bool) or not isinstance(delta, numbers.Real) \
                or not np.isfinite(delta) or delta <= 0 or float(np.float32(delta)) <= 0:
            raise ValueError("delta: expected a finite number > 0, got %r" % (delta,))
        self.delta = float(delta)
        super().__init__(reduction, name, dtype)

    def engine_loss(self):
        return dict(super().engine_loss(), delta=self.delta)

    def get_config(self):
        # Keras 3's Huber.get_config leaves delta out (a saved Keras model
        # comes back with 1.0); cnncuda keeps it, which Keras's from_config reads
        return dict(super().get_config(), delta=self.delta)

    def __repr__(self):
        return "Huber(delta=%r)" % (self.delta,)


_BY_KIND = {cls.kind: cls for cls in (
    SparseCategoricalCrossentropy, CategoricalCrossentropy, BinaryCrossentropy, MeanSquaredError,
    MeanAbsoluteError, Huber, MeanSquaredLogarithmicError, LogCosh, MeanAbsolutePercentageError)}


def get(identifier):
    """A Loss from a name, a Loss, or a loss function of this module."""
    if isinstance(identifier, Loss):
        return identifier
    if callable(identifier) and getattr(identifier, "__name__", None) in _BY_KIND:
        return _BY_KIND[identifier.__name__]()
    if isinstance(identifier, str):
        key = choice(identifier, "loss", KINDS + tuple(ALIASES))
        return _BY_KIND[ALIASES.get(key, key)]()
    raise TypeError("loss: expected one of %s or a loss object such as "
                    "SparseCategoricalCrossentropy(from_logits=True), got %r"
                    % (", ".join(repr(k) for k in KINDS + tuple(ALIASES)), identifier))


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


def mean_squared_error(y_true, y_pred):
    """Mean squared error of a batch (the mean over outputs and samples)."""
    return MeanSquaredError()(y_true, y_pred)


def mean_absolute_error(y_true, y_pred):
    """Mean absolute error of a batch."""
    return MeanAbsoluteError()(y_true, y_pred)


def huber(y_true, y_pred, delta=1.0):
    """Mean Huber loss of a batch."""
    return Huber(delta)(y_true, y_pred)


def mean_squared_logarithmic_error(y_true, y_pred):
    """Mean squared logarithmic error of a batch."""
    return MeanSquaredLogarithmicError()(y_true, y_pred)


def log_cosh(y_true, y_pred):
    """Mean log-cosh loss of a batch."""
    return LogCosh()(y_true, y_pred)


def mean_absolute_percentage_error(y_true, y_pred):
    """Mean absolute percentage error of a batch."""
    return MeanAbsolutePercentageError()(y_true, y_pred)


mse = mean_squared_error
mae = mean_absolute_error
msle = mean_squared_logarithmic_error
mape = mean_absolute_percentage_error
