"""Argument checks shared by the Keras-style API.

Every public function checks its arguments once, at the boundary, with these
helpers, and raises TypeError or ValueError naming the argument, what was
expected and what was given (``batch_size: expected an int >= 1, got 0``),
before anything changes.
"""
import numbers

import numpy as np

__all__ = ["positive_int", "nonnegative_int", "int_pair", "choice", "number_in",
           "boolean", "shape_str", "check_x", "check_targets"]


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def positive_int(value, arg):
    """value as an int >= 1."""
    if not _is_int(value) or value < 1:
        kind = TypeError if not _is_int(value) else ValueError
        raise kind("%s: expected an int >= 1, got %r" % (arg, value))
    return int(value)


def nonnegative_int(value, arg):
    """value as an int >= 0."""
    if not _is_int(value) or value < 0:
        kind = TypeError if not _is_int(value) else ValueError
        raise kind("%s: expected an int >= 0, got %r" % (arg, value))
    return int(value)


def int_pair(value, arg):
    """An int or a pair of ints >= 1 as a tuple of two ints (Keras's kernel_size,
    strides, pool_size)."""
    if _is_int(value):
        value = (value, value)
    if (not isinstance(value, (tuple, list)) or len(value) != 2
            or not all(_is_int(v) for v in value)):
        raise TypeError("%s: expected an int or a tuple of 2 ints, got %r" % (arg, value))
    if min(value) < 1:
        raise ValueError("%s: expected values >= 1, got %r" % (arg, tuple(value)))
    return (int(value[0]), int(value[1]))


def choice(value, arg, options, lower=True):
    """value (a str, lower-cased when `lower`) if it is one of `options`."""
    if not isinstance(value, str):
        raise TypeError("%s: expected one of %s, got %r"
                        % (arg, ", ".join(repr(o) for o in options), value))
    key = value.lower() if lower else value
    if key not in options:
        raise ValueError("%s: expected one of %s, got %r"
                         % (arg, ", ".join(repr(o) for o in options), value))
    return key


def number_in(value, arg, low, high, low_open=False, high_open=False):
    """A real number in [low, high] (ends open where asked), as a float."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError("%s: expected a number, got %r" % (arg, value))
    value = float(value)
    bad = (not np.isfinite(value) or value < low or value > high
           or (low_open and value == low) or (high_open and value == high))
    if bad:
        raise ValueError("%s: expected a number in %s%g, %g%s, got %r"
                         % (arg, "(" if low_open else "[", low, high,
                            ")" if high_open else "]", value))
    return value


def boolean(value, arg):
    """value if it is a bool (NumPy bools included)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError("%s: expected True or False, got %r" % (arg, value))
    return bool(value)


def shape_str(shape):
    """(None, 32, 32, 3) the way Keras prints shapes."""
    shape = tuple(shape)
    if len(shape) == 1:
        return "(%s,)" % (shape[0],)
    return "(" + ", ".join("None" if d is None else str(d) for d in shape) + ")"


def _as_array(value, arg):
    if isinstance(value, (str, bytes)) or value is None:
        raise TypeError("%s: expected a real numeric array, got %s" % (arg, type(value).__name__))
    try:
        array = np.asarray(value)
    except Exception as err:  # ragged lists and the like
        raise TypeError("%s: expected a real numeric array, got %s (%s)"
                        % (arg, type(value).__name__, err)) from None
    if array.dtype.kind not in "biuf":
        raise TypeError("%s: expected a real numeric array, got dtype %s" % (arg, array.dtype))
    return array


# The smallest magnitude that becomes infinity in float32, which the engines
# compute in: (2 - 2**-24) * 2**127.
_F32_OVERFLOW = 3.4028235677973366e38


def _first_bad(array):
    """(flat index, what it is) of the first value that is NaN, infinite, or
    becomes infinite in float32 (1e300 in float64), or None. Checked here so
    that fit refuses such validation data before it trains, not after."""
    if array.dtype.kind != "f" or array.size == 0:
        return None
    wide = array.dtype.itemsize > 4
    low, high = array.min(), array.max()           # NaN comes through both
    if np.isfinite(low) and np.isfinite(high) and (
            not wide or (-_F32_OVERFLOW < low and high < _F32_OVERFLOW)):
        return None
    bad = ~np.isfinite(array)
    if wide:
        with np.errstate(invalid="ignore"):
            bad |= np.abs(array) >= _F32_OVERFLOW
    index = int(np.argmax(bad.reshape(-1)))
    value = array.reshape(-1)[index]
    if np.isnan(value):
        return index, "NaN"
    if np.isinf(value):
        return index, "infinity"
    return index, "%g (infinity in float32)" % value


def check_x(x, input_shape, arg="x", allow_empty=False, finite=True):
    """x as an array of shape (n,) + input_shape, with finite values unless
    `finite` is False (fit, evaluate and predict leave that check to the
    engine, which makes it while it converts and uploads x)."""
    array = _as_array(x, arg)
    want = (None,) + tuple(input_shape)
    if array.ndim != len(want) or array.shape[1:] != tuple(input_shape):
        raise ValueError("%s: expected shape %s, got %s" % (arg, shape_str(want), shape_str(array.shape)))
    if array.shape[0] == 0 and not allow_empty:
        raise ValueError("%s: expected at least one sample, got an empty array" % arg)
    bad = _first_bad(array) if finite else None
    if bad is not None:
        raise ValueError("%s: expected finite values, got %s at flat index %d"
                         % (arg, bad[1], bad[0]))
    return array


def check_targets(y, n, loss_kind, classes, arg="y"):
    """y checked for the loss: integer labels in [0, classes) of shape (n,) or
    (n, 1) for the sparse loss, finite targets (n, classes) otherwise ((n,)
    accepted for a binary or regression loss with one output). `classes` may
    be the model's whole output shape (without the batch axis): the loss is
    then Keras's along its last axis at every other position, the sparse
    labels of shape (n,) + shape[:-1] (or with a last axis of 1), the other
    targets of shape (n,) + shape ((n,) + shape[:-1] for one output). Returns
    the array to pass on."""
    if isinstance(classes, tuple):
        if len(classes) > 1:
            return _check_position_targets(y, n, loss_kind, classes, arg)
        classes = classes[0]
    array = _as_array(y, arg)
    if loss_kind == "sparse_categorical_crossentropy":
        if array.shape not in ((n,), (n, 1)):
            raise ValueError("%s: expected shape (%d,) or (%d, 1), got %s"
                             % (arg, n, n, shape_str(array.shape)))
        flat = array.reshape(-1)
        if flat.dtype.kind == "f":
            bad = ~np.isfinite(flat) | (flat != np.floor(flat)) | (flat < 0) | (flat >= classes)
        else:
            bad = (flat < 0) | (flat >= classes)
        if bad.any():
            index = int(np.argmax(bad))
            value = flat[index]
            shown = ("%g" % value) if flat.dtype.kind == "f" else str(value)
            raise ValueError("%s: expected integer class labels in [0, %d), got %s at index %d"
                             % (arg, classes, shown, index))
        return array
    if loss_kind != "categorical_crossentropy" and classes == 1 and array.shape == (n,):
        array = array.reshape(n, 1)
    if array.shape != (n, classes):
        raise ValueError("%s: expected shape (%d, %d), got %s"
                         % (arg, n, classes, shape_str(array.shape)))
    bad = _first_bad(array)
    if bad is not None:
        raise ValueError("%s: expected finite values, got %s at flat index %d"
                         % (arg, bad[1], bad[0]))
    return array


def _check_position_targets(y, n, loss_kind, shape, arg):
    """check_targets for an output of several positions per sample."""
    array = _as_array(y, arg)
    k, spatial = shape[-1], tuple(shape[:-1])
    if loss_kind == "sparse_categorical_crossentropy":
        forms = [(n,) + spatial, (n,) + spatial + (1,)]
    else:
        forms = [(n,) + tuple(shape)] + ([(n,) + spatial] if k == 1 else [])
    if array.shape not in forms:
        raise ValueError("%s: expected shape %s, got %s (the loss is taken along the last axis "
                         "of the model's output %s)"
                         % (arg, " or ".join(shape_str(f) for f in forms),
                            shape_str(array.shape), shape_str((None,) + tuple(shape))))
    if loss_kind == "sparse_categorical_crossentropy":
        flat = array.reshape(-1)
        if flat.dtype.kind == "f":
            bad = ~np.isfinite(flat) | (flat != np.floor(flat)) | (flat < 0) | (flat >= k)
        else:
            bad = (flat < 0) | (flat >= k)
        if bad.any():
            index = int(np.argmax(bad))
            value = flat[index]
            shown = ("%g" % value) if flat.dtype.kind == "f" else str(value)
            raise ValueError("%s: expected integer class labels in [0, %d), got %s at flat index "
                             "%d" % (arg, k, shown, index))
        return array.reshape((n,) + spatial)
    array = array.reshape((n,) + tuple(shape))
    bad = _first_bad(array)
    if bad is not None:
        raise ValueError("%s: expected finite values, got %s at flat index %d"
                         % (arg, bad[1], bad[0]))
    return array
