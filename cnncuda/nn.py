"""``tf.nn``'s activation functions on arrays: ``tf.nn.softmax(logits)``
as TensorFlow's tutorials apply it to ``model.predict``'s output (scores
from logits), ``relu``, ``sigmoid``, ``tanh`` and ``log_softmax``, and
``elu``, ``selu``, ``gelu``, ``silu`` / ``swish``, ``softplus``,
``softsign``, ``leaky_relu`` and ``relu6`` with TensorFlow's defaults
(gelu exact, leaky_relu's alpha 0.2; the formulas are Keras's,
cnncuda.activations).

They compute in NumPy and return NumPy arrays (not tensors: there is no
``.numpy()``; ``np.argmax(score)`` and ``100 * np.max(score)`` work as in
the tutorials). Floating-point input keeps its dtype (float32 stays
float32, as in TensorFlow); integer and bool input is refused, as
TensorFlow refuses it for these functions.
"""
import numpy as np

from . import activations
from .checks import _as_array

__all__ = ["softmax", "log_softmax", "relu", "sigmoid", "tanh", "elu", "selu", "gelu", "silu",
           "swish", "softplus", "softsign", "leaky_relu", "relu6"]


def _floats(value, arg):
    array = _as_array(value, arg)           # strings, None, ragged lists, complex: refused
    if array.dtype.kind != "f":
        if array.dtype.kind in "iub" and isinstance(value, (float, list, tuple)):
            array = array.astype(np.float32)     # Python numbers: TensorFlow makes float32
        else:
            raise TypeError("%s: expected an array of floats (float16, float32 or float64), "
                            "got dtype %s" % (arg, array.dtype))
    return array


def _axis(axis, ndim, arg="axis"):
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError("%s: expected an int, got %r" % (arg, axis))
    if ndim == 0 or not -ndim <= axis < ndim:
        raise ValueError("%s: expected an axis in [%d, %d) for an array of %d dimensions, got %d"
                         % (arg, -max(ndim, 1), max(ndim, 1), ndim, axis))
    return int(axis)


def softmax(logits, axis=None, name=None):
    """exp(logits) normalized along `axis` (default: the last)."""
    x = _floats(logits, "logits")
    axis = _axis(-1 if axis is None else axis, x.ndim)
    shifted = x - x.max(axis=axis, keepdims=True)
    e = np.exp(shifted)
    return (e / e.sum(axis=axis, keepdims=True)).astype(x.dtype, copy=False)


def log_softmax(logits, axis=None, name=None):
    """logits - log(sum(exp(logits))) along `axis` (default: the last)."""
    x = _floats(logits, "logits")
    axis = _axis(-1 if axis is None else axis, x.ndim)
    shifted = x - x.max(axis=axis, keepdims=True)
    out = shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))
    return out.astype(x.dtype, copy=False)


def relu(features, name=None):
    """max(features, 0)."""
    x = _floats(features, "features")
    return np.maximum(x, x.dtype.type(0))


def sigmoid(x, name=None):
    """1 / (1 + exp(-x)), without overflow warnings for large |x|."""
    x = _floats(x, "x")
    out = np.empty_like(x)
    positive = x >= 0
    out[positive] = 1 / (1 + np.exp(-x[positive]))
    e = np.exp(x[~positive])
    out[~positive] = e / (1 + e)
    return out if out.ndim else out[()]


def tanh(x, name=None):
    """The hyperbolic tangent."""
    return np.tanh(_floats(x, "x"))


def _kept(y, x):
    y = np.asarray(y).astype(x.dtype, copy=False)
    return y if y.ndim else y[()]


def elu(features, name=None):
    """features where > 0, else exp(features) - 1."""
    x = _floats(features, "features")
    return _kept(activations.elu(x), x)


def selu(features, name=None):
    """scale elu(features, alpha), Keras's constants."""
    x = _floats(features, "features")
    return _kept(activations.selu(x), x)


def gelu(features, approximate=False, name=None):
    """features P(X <= features), X ~ N(0, 1); the tanh form with approximate."""
    x = _floats(features, "features")
    return _kept(activations.gelu(x, approximate=bool(approximate)), x)


def silu(features, beta=1.0):
    """features sigmoid(beta features)."""
    x = _floats(features, "features")
    if beta == 1.0:
        return _kept(activations.silu(x), x)
    return _kept(x * sigmoid(x * x.dtype.type(beta)), x)


swish = silu


def softplus(features, name=None):
    """log(exp(features) + 1), without overflow."""
    x = _floats(features, "features")
    return _kept(activations.softplus(x), x)


def softsign(features, name=None):
    """features / (|features| + 1)."""
    x = _floats(features, "features")
    return _kept(activations.softsign(x), x)


def leaky_relu(features, alpha=0.2, name=None):
    """features where >= 0, else alpha features."""
    x = _floats(features, "features")
    return _kept(activations.leaky_relu(x, alpha), x)


def relu6(features, name=None):
    """min(max(features, 0), 6)."""
    x = _floats(features, "features")
    return _kept(activations.relu6(x), x)
