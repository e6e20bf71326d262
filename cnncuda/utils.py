"""Small helpers of the Keras-style API: the default seed, unique layer and
model names, and ``to_categorical``.

The seed: every model draws its initial weights, its dropout masks and its
shuffling order from one integer seed, so a model built twice with the same
seed trains the same way, on every engine. ``Sequential(seed=...)`` sets it
for one model; otherwise the model takes the default seed, 0 unless
``set_random_seed(n)`` (also spelled ``cnncuda.random.set_seed(n)`` and
``cnncuda.keras.utils.set_random_seed(n)``) changed it.
"""
import random as _py_random

import numpy as np

from .checks import nonnegative_int, positive_int

__all__ = ["set_random_seed", "get_random_seed", "unique_name", "reset_names",
           "to_categorical"]

_state = {"seed": 0}
_name_counts = {}


def set_random_seed(seed):
    """Sets the seed of the models created from now on, and, as Keras does,
    seeds Python's `random` and NumPy's global generator too."""
    seed = nonnegative_int(seed, "seed")
    _state["seed"] = seed
    _py_random.seed(seed)
    np.random.seed(seed % 2 ** 32)


def get_random_seed():
    """The seed new models take when none is given (0 by default)."""
    return _state["seed"]


def unique_name(prefix):
    """Keras's automatic names: 'conv2d', then 'conv2d_1', 'conv2d_2', ..."""
    count = _name_counts.get(prefix, 0)
    _name_counts[prefix] = count + 1
    return prefix if count == 0 else "%s_%d" % (prefix, count)


def reset_names():
    """Restarts the automatic names (``keras.backend.clear_session()``)."""
    _name_counts.clear()


def to_categorical(y, num_classes=None, dtype="float32"):
    """One-hot rows of the integer labels y (any shape; a trailing axis of
    1 is dropped, as in Keras)."""
    labels = np.asarray(y)
    if labels.dtype.kind not in "iuf" or (labels.dtype.kind == "f" and
                                          not np.array_equal(labels, np.floor(labels))):
        raise TypeError("y: expected integer class labels, got dtype %s" % labels.dtype)
    shape = labels.shape
    if shape and shape[-1] == 1 and len(shape) > 1:
        shape = shape[:-1]
    labels = labels.reshape(-1).astype(np.int64)
    if labels.size and labels.min() < 0:
        raise ValueError("y: expected labels >= 0, got %d" % labels.min())
    if num_classes is None:
        num_classes = int(labels.max()) + 1 if labels.size else 0
    else:
        num_classes = positive_int(num_classes, "num_classes")
        if labels.size and labels.max() >= num_classes:
            raise ValueError("y: expected labels in [0, %d), got %d" % (num_classes, labels.max()))
    out = np.zeros((labels.size, num_classes), dtype=dtype)
    out[np.arange(labels.size), labels] = 1
    return out.reshape(shape + (num_classes,))
