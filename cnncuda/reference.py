"""reference.py: the NumPy reference of every cnncuda op, and the `numpy` engine.

This module is the executable form of docs/semantics.md. It has two jobs:

1. Tests check the C and CUDA engines against these functions, so they follow
   semantics.md to the letter (padding, RNG, initial weights, dropout keys,
   loss clipping, Keras's optimizer formulas).
2. `NumpyNet` is the `numpy` engine: the same Python interface as the C
   binding's Net, timed by users as the slowest baseline -- a plain,
   vectorized NumPy CNN.

Everything works in Keras layouts:
    images        (N, H, W, C)            (NHWC)
    conv kernel   (KH, KW, C, F)
    dense kernel  (IN, OUT)
    biases        (F,)      batchnorm weights (C,)

Every op computes in the dtype of its inputs (float32 or float64); scalar
constants are cast to that dtype so float32 stays float32. No function modifies
its inputs, except the optimizer steps, which update their parameter and state
arrays IN PLACE (as the C engines do) and say so.
"""

import contextlib
import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .checks import _first_bad

__all__ = [
    "mix64", "rng_key", "uniform", "glorot_uniform",
    "output_size", "same_padding", "padding_geometry",
    "conv2d_forward", "conv2d_backward",
    "max_pool2d_forward", "max_pool2d_backward",
    "avg_pool2d_forward", "avg_pool2d_backward",
    "flatten_forward", "flatten_backward",
    "dense_forward", "dense_backward",
    "ACTIVATIONS", "ELEMENTWISE", "ACTIVATION_PARAMETERS", "activation_forward",
    "activation_backward", "elementwise_forward", "elementwise_backward",
    "prelu_forward", "prelu_backward",
    "dropout_mask", "dropout_forward", "dropout_backward",
    "batchnorm_forward_train", "batchnorm_forward_infer",
    "batchnorm_backward", "batchnorm_backward_infer",
    "PROB_EPS", "LOSS_KINDS", "REGRESSION_LOSS_KINDS", "regression_loss",
    "sparse_categorical_crossentropy", "categorical_crossentropy",
    "binary_crossentropy", "loss_forward_backward",
    "adam_step", "sgd_step", "rmsprop_step", "adagrad_step", "adadelta_step",
    "adamax_step", "nadam_coefficients", "nadam_step", "adamw_step", "OPTIMIZER_DEFAULTS",
    "NumpyNet",
]

# ---------------------------------------------------------------------------
# The RNG (semantics.md "The RNG"; cnn_mix64 / cnn_rng_key / cnn_uniform)
# ---------------------------------------------------------------------------

_MASK64 = (1 << 64) - 1
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MUL1 = np.uint64(0xBF58476D1CE4E5B9)
_MUL2 = np.uint64(0x94D049BB133111EB)
_S27, _S30, _S31, _S40 = np.uint64(27), np.uint64(30), np.uint64(31), np.uint64(40)


def _as_u64(v):
    """A Python int, NumPy integer or integer array as uint64 (mod 2**64)."""
    if isinstance(v, (int, np.integer)):
        return np.uint64(int(v) & _MASK64)
    return np.asarray(v).astype(np.uint64)


def mix64(z):
    """The splitmix64 finalizer with uint64 wrap-around; scalar or array."""
    z = _as_u64(z)
    with np.errstate(over="ignore"):  # wrap-around is the point
        z = z + _GOLDEN
        z = (z ^ (z >> _S30)) * _MUL1
        z = (z ^ (z >> _S27)) * _MUL2
        return z ^ (z >> _S31)


def rng_key(seed, stream):
    """key(seed, stream) = mix64(seed ^ mix64(stream)), a np.uint64."""
    return np.uint64(mix64(_as_u64(seed) ^ mix64(stream)))


def uniform(key, counters):
    """Uniform floats in [0, 1), multiples of 2**-24, one per counter.

    uniform(key, c) = (mix64(key ^ mix64(c)) >> 40) * 2**-24 as float32.
    `counters` may be a scalar (returns a np.float32) or any integer array
    (returns a float32 array of its shape).
    """
    key = _as_u64(key)
    c = _as_u64(counters)
    top24 = mix64(key ^ mix64(c)) >> _S40          # < 2**24: exact in float32
    out = np.asarray(top24).astype(np.float32) * np.float32(1.0 / 16777216.0)
    return out[()] if out.ndim == 0 else out


# ---------------------------------------------------------------------------
# Initial weights (semantics.md "Initial weights")
# ---------------------------------------------------------------------------

def glorot_uniform(seed, layer_index, keras_shape, fan_in, fan_out):
    """Glorot-uniform kernel of layer `layer_index`, bit-exact with the C core.

    u_j = uniform(key(seed, 2 i), j) for j the flat index in the Keras layout;
    limit = sqrt(6 / (fan_in + fan_out)) in float32; w = (2 u - 1) * limit.
    Returns a float32 array of shape `keras_shape`.
    """
    shape = tuple(int(d) for d in keras_shape)
    count = int(np.prod(shape, dtype=np.int64))
    u = uniform(rng_key(seed, 2 * layer_index), np.arange(count, dtype=np.uint64))
    one, two = np.float32(1), np.float32(2)
    # float32 division then float32 sqrt, as sqrtf(6.0f / (float)(fan_in + fan_out))
    limit = np.sqrt(np.float32(6) / np.float32(fan_in + fan_out))
    w = (two * u - one) * limit                     # 2u - 1 is exact; one rounding
    return w.astype(np.float32).reshape(shape)


# ---------------------------------------------------------------------------
# Padding geometry, shared by convolution and pooling (semantics.md "Padding")
# ---------------------------------------------------------------------------

def same_padding(in_size, k, s):
    """'same' padding of one axis: (pad_before, pad_after).

    out = ceil(in / s); pad_total = max((out - 1) s + k - in, 0); the extra
    row (odd pad_total) goes after (bottom / right), as in Keras/TensorFlow.
    """
    out = -(-in_size // s)
    pad_total = max((out - 1) * s + k - in_size, 0)
    return pad_total // 2, pad_total - pad_total // 2


def output_size(in_size, k, s, padding):
    """Output length of one axis for 'same' or 'valid' padding."""
    if padding == "same":
        return -(-in_size // s)
    if padding == "valid":
        return (in_size - k) // s + 1
    raise ValueError(f"padding must be 'same' or 'valid', got {padding!r}")


def padding_geometry(in_size, k, s, padding):
    """(out, pad_before, pad_after) of one axis; 'valid' pads nothing."""
    if k < 1 or s < 1:
        raise ValueError(f"window {k} and stride {s} must be >= 1")
    out = output_size(in_size, k, s, padding)
    if out < 1:
        raise ValueError(f"window {k} does not fit an input of size {in_size} "
                         f"with padding {padding!r}")
    before, after = same_padding(in_size, k, s) if padding == "same" else (0, 0)
    return out, before, after


def _geometry_2d(x_shape, kernel, strides, padding):
    """((oh, pt, pb), (ow, pl, pr)) for x of shape (N, H, W, C)."""
    _, h, w, _ = x_shape
    return (padding_geometry(h, kernel[0], strides[0], padding),
            padding_geometry(w, kernel[1], strides[1], padding))


def _windows(xp, kernel, strides, oh, ow):
    """Strided windows of the padded input: a view (N, OH, OW, C, KH, KW).

    Window (r, c) starts at padded row r*sh and column c*sw, which is image
    row r*sh - pad_top (semantics.md).
    """
    v = sliding_window_view(xp, kernel, axis=(1, 2))  # (N, H'-kh+1, W'-kw+1, C, KH, KW)
    return v[:, ::strides[0], ::strides[1]][:, :oh, :ow]


def _col2im(cols, padded_hw, strides):
    """Adjoint of _windows: sums cols (N, OH, OW, KH, KW, C) into the padded
    image (N, H', W', C). Loops over the (small) window only."""
    n, oh, ow, kh, kw, c = cols.shape
    sh, sw = strides
    out = np.zeros((n, padded_hw[0], padded_hw[1], c), dtype=cols.dtype)
    for i in range(kh):
        for j in range(kw):
            out[:, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw, :] += cols[:, :, :, i, j, :]
    return out


def _pad(x, pads_h, pads_w, value=0):
    """Pads the H and W axes of x (N, H, W, C) with a constant."""
    return np.pad(x, ((0, 0), pads_h, pads_w, (0, 0)), mode="constant", constant_values=value)


# ---------------------------------------------------------------------------
# Conv2D
# ---------------------------------------------------------------------------

def conv2d_forward(x, w, b=None, strides=(1, 1), padding="valid"):
    """y = conv(x, w) + b.

    x (N, H, W, C), w (KH, KW, C, F), b (F,) or None -> y (N, OH, OW, F).
    Rows outside the image read as zero.
    """
    kh, kw, c, f = w.shape
    (oh, pt, pb), (ow, pl, pr) = _geometry_2d(x.shape, (kh, kw), strides, padding)
    xp = _pad(x, (pt, pb), (pl, pr))                        # (N, H', W', C)
    patches = _windows(xp, (kh, kw), strides, oh, ow)       # (N, OH, OW, C, KH, KW)
    # contract (C, KH, KW) of the patches with (C, KH, KW) of the kernel
    y = np.tensordot(patches, w, axes=([3, 4, 5], [2, 0, 1]))  # (N, OH, OW, F)
    if b is not None:
        y += b
    return y


def conv2d_backward(dy, x, w, strides=(1, 1), padding="valid", use_bias=True):
    """Gradients of conv2d_forward: (dx, dw, db).

    dy (N, OH, OW, F), x (N, H, W, C), w (KH, KW, C, F) ->
    dx (N, H, W, C), dw (KH, KW, C, F), db (F,) (None when not use_bias).
    """
    kh, kw, c, f = w.shape
    n, h, wd, _ = x.shape
    (oh, pt, pb), (ow, pl, pr) = _geometry_2d(x.shape, (kh, kw), strides, padding)
    xp = _pad(x, (pt, pb), (pl, pr))
    patches = _windows(xp, (kh, kw), strides, oh, ow)       # (N, OH, OW, C, KH, KW)
    # dw[i, j, c, f] = sum over (n, r, s) of patches[n, r, s, c, i, j] dy[n, r, s, f]
    dw = np.tensordot(patches, dy, axes=([0, 1, 2], [0, 1, 2]))  # (C, KH, KW, F)
    dw = dw.transpose(1, 2, 0, 3).copy()                          # (KH, KW, C, F)
    db = dy.sum(axis=(0, 1, 2)) if use_bias else None
    # each output position sends dy @ w^T back to its window
    dcols = np.tensordot(dy, w, axes=([3], [3]))            # (N, OH, OW, KH, KW, C)
    dxp = _col2im(dcols, xp.shape[1:3], strides)            # (N, H', W', C)
    dx = dxp[:, pt:pt + h, pl:pl + wd, :].copy()            # drop the padding
    return dx, dw, db


# ---------------------------------------------------------------------------
# Pooling: windows clipped to the image (max ignores padding, average divides
# by the in-image count)
# ---------------------------------------------------------------------------

def max_pool2d_forward(x, pool, strides=None, padding="valid"):
    """Max pooling: (y, argmax).

    x (N, H, W, C) -> y (N, OH, OW, C) and argmax (N, OH, OW, C), the index of
    the winner in row-major window order (0 .. PH*PW - 1; the first maximum
    wins). NOTE: the C engines store a flat index into the image plane instead;
    this one only feeds max_pool2d_backward. Padding is -inf, so never wins.
    """
    strides = tuple(pool) if strides is None else tuple(strides)
    (oh, pt, pb), (ow, pl, pr) = _geometry_2d(x.shape, pool, strides, padding)
    xp = _pad(x, (pt, pb), (pl, pr), value=-np.inf)
    win = _windows(xp, tuple(pool), strides, oh, ow)        # (N, OH, OW, C, PH, PW)
    win = win.reshape(win.shape[:4] + (-1,))                # (N, OH, OW, C, PH*PW), a copy
    argmax = np.argmax(win, axis=-1)                        # first maximum wins
    y = np.take_along_axis(win, argmax[..., None], axis=-1)[..., 0]
    return y, argmax


def max_pool2d_backward(dy, argmax, x_shape, pool, strides=None, padding="valid"):
    """Gradient of max pooling: dy (N, OH, OW, C) goes to each window's winner.
    Returns dx of shape x_shape (N, H, W, C)."""
    strides = tuple(pool) if strides is None else tuple(strides)
    ph, pw = pool
    n, h, w, c = x_shape
    (oh, pt, pb), (ow, pl, pr) = _geometry_2d(x_shape, pool, strides, padding)
    onehot = np.arange(ph * pw) == argmax[..., None]        # (N, OH, OW, C, PH*PW)
    cols = np.where(onehot, dy[..., None], dy.dtype.type(0))
    cols = cols.reshape(n, oh, ow, c, ph, pw).transpose(0, 1, 2, 4, 5, 3)  # (N, OH, OW, PH, PW, C)
    dxp = _col2im(cols, (h + pt + pb, w + pl + pr), strides)
    return dxp[:, pt:pt + h, pl:pl + w, :].copy()


def _pool_counts(h, w, pool, strides, geo_h, geo_w, dtype):
    """In-image element count of every window: (OH, OW, 1) in dtype."""
    def axis_counts(size, k, s, out, before):
        start = np.arange(out) * s - before                 # first image row of each window
        return np.minimum(start + k, size) - np.maximum(start, 0)
    ch = axis_counts(h, pool[0], strides[0], geo_h[0], geo_h[1])
    cw = axis_counts(w, pool[1], strides[1], geo_w[0], geo_w[1])
    return (ch[:, None] * cw[None, :]).astype(dtype)[:, :, None]


def avg_pool2d_forward(x, pool, strides=None, padding="valid"):
    """Average pooling over the in-image part of each window.
    x (N, H, W, C) -> y (N, OH, OW, C)."""
    strides = tuple(pool) if strides is None else tuple(strides)
    n, h, w, c = x.shape
    geo_h, geo_w = _geometry_2d(x.shape, pool, strides, padding)
    (oh, pt, pb), (ow, pl, pr) = geo_h, geo_w
    xp = _pad(x, (pt, pb), (pl, pr))                        # zeros add nothing to the sum
    win = _windows(xp, tuple(pool), strides, oh, ow)        # (N, OH, OW, C, PH, PW)
    counts = _pool_counts(h, w, pool, strides, geo_h, geo_w, x.dtype)  # (OH, OW, 1)
    return win.sum(axis=(4, 5)) / counts


def avg_pool2d_backward(dy, x_shape, pool, strides=None, padding="valid"):
    """Gradient of average pooling: dy / count spread over each window's
    in-image elements. Returns dx of shape x_shape (N, H, W, C)."""
    strides = tuple(pool) if strides is None else tuple(strides)
    ph, pw = pool
    n, h, w, c = x_shape
    geo_h, geo_w = _geometry_2d(x_shape, pool, strides, padding)
    (oh, pt, pb), (ow, pl, pr) = geo_h, geo_w
    g = dy / _pool_counts(h, w, pool, strides, geo_h, geo_w, dy.dtype)   # (N, OH, OW, C)
    cols = np.broadcast_to(g[:, :, :, None, None, :], (n, oh, ow, ph, pw, c))
    dxp = _col2im(cols, (h + pt + pb, w + pl + pr), strides)
    return dxp[:, pt:pt + h, pl:pl + w, :].copy()           # padding's share is dropped


# ---------------------------------------------------------------------------
# Flatten and Dense
# ---------------------------------------------------------------------------

def flatten_forward(x):
    """(N, H, W, C) -> (N, H*W*C) in NHWC (Keras) order."""
    return x.reshape(x.shape[0], -1).copy()


def flatten_backward(dy, x_shape):
    """(N, H*W*C) -> x_shape."""
    return dy.reshape(x_shape).copy()


def dense_forward(x, w, b=None):
    """y = x w + b: x (N, IN), w (IN, OUT), b (OUT,) or None -> (N, OUT)."""
    y = x @ w
    if b is not None:
        y += b
    return y


def dense_backward(dy, x, w, use_bias=True):
    """(dx (N, IN), dw (IN, OUT), db (OUT,) or None) from dy (N, OUT)."""
    dx = dy @ w.T
    dw = x.T @ dy
    db = dy.sum(axis=0) if use_bias else None
    return dx, dw, db


# ---------------------------------------------------------------------------
# Activations (the first five: backward from the forward's output y, as the
# C engines; the elementwise ones from ELEMENTWISE on: from x and y)
# ---------------------------------------------------------------------------

ELEMENTWISE = ("elu", "selu", "gelu", "swish", "softplus", "softsign", "hard_sigmoid",
               "leaky_relu", "relu6", "exponential", "mish", "relu_general")
ACTIVATIONS = ("linear", "relu", "sigmoid", "tanh", "softmax") + ELEMENTWISE
# the parameters an elementwise activation reads, with Keras's defaults
# (relu_general: Keras's relu(x, negative_slope=alpha, max_value, threshold))
ACTIVATION_PARAMETERS = {"elu": {"alpha": 1.0}, "leaky_relu": {"alpha": 0.2},
                         "relu_general": {"alpha": 0.0, "max_value": None, "threshold": 0.0}}
_SELU_ALPHA = 1.6732632423543772
_SELU_SCALE = 1.0507009873554805


def _sigmoid(x):
    """Overflow-free logistic: e = exp(-|x|) never overflows."""
    e = np.exp(-np.abs(x))
    one = x.dtype.type(1)
    return np.where(x >= 0, one / (one + e), e / (one + e))


def _softmax(x):
    """Softmax over the last axis."""
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _erfc(x):
    """erfc elementwise (math.erfc; NumPy has none), in x's dtype."""
    return np.vectorize(math.erfc, otypes=[np.float64])(x).astype(x.dtype)


def _softplus(x):
    zero, one = x.dtype.type(0), x.dtype.type(1)
    return np.maximum(x, zero) + np.log1p(np.exp(-np.abs(x))) * one


def _parameters(act, params):
    """The parameters of `act` (ACTIVATION_PARAMETERS), given ones first."""
    unknown = set(params) - set(ACTIVATION_PARAMETERS.get(act, {}))
    if unknown:
        raise ValueError(f"activation {act!r} takes no {sorted(unknown)}")
    return dict(ACTIVATION_PARAMETERS.get(act, {}), **params)


def elementwise_forward(x, act, **params):
    """y = act(x) for the elementwise activations (ELEMENTWISE), Keras 3's
    formulas (csrc/activation_math.h has the same, one line each)."""
    p = _parameters(act, params)
    t = x.dtype.type
    zero, one = t(0), t(1)
    if act == "elu":
        return np.where(x > 0, x, t(p["alpha"]) * np.expm1(np.minimum(x, zero)))
    if act == "selu":
        return t(_SELU_SCALE) * np.where(x > 0, x, t(_SELU_ALPHA) * np.expm1(np.minimum(x, zero)))
    if act == "gelu":
        return x * _erfc(-x * t(1 / math.sqrt(2))) * t(0.5)
    if act == "swish":
        return x * _sigmoid(x)
    if act == "softplus":
        return _softplus(x)
    if act == "softsign":
        return x / (one + np.abs(x))
    if act == "hard_sigmoid":
        return np.minimum(np.maximum(x + t(3), zero), t(6)) / t(6)
    if act == "leaky_relu":
        return np.where(x >= 0, x, t(p["alpha"]) * x)
    if act == "relu6":
        return np.minimum(np.maximum(x, zero), t(6))
    if act == "exponential":
        return np.exp(x)
    if act == "mish":
        return x * np.tanh(_softplus(x))
    if act == "relu_general":
        cap = np.inf if p["max_value"] is None else p["max_value"]
        thr = t(p["threshold"])
        return np.where(x > thr, np.minimum(x, t(cap)), zero - t(p["alpha"]) * (thr - x))
    raise ValueError(f"unknown activation {act!r}; expected one of {ELEMENTWISE}")


def elementwise_backward(x, y, dy, act, **params):
    """dx of the elementwise activations from the forward's input x, its
    output y and dy (at a kink, the side activation_math.h takes)."""
    p = _parameters(act, params)
    t = x.dtype.type
    zero, one = t(0), t(1)
    if act == "elu":
        return np.where(x > 0, dy, dy * (t(p["alpha"]) * np.exp(np.minimum(x, zero))))
    if act == "selu":
        return np.where(x > 0, dy * t(_SELU_SCALE),
                        dy * (t(_SELU_SCALE * _SELU_ALPHA) * np.exp(np.minimum(x, zero))))
    if act == "gelu":
        pdf = np.exp(t(-0.5) * x * x) * t(1 / math.sqrt(2 * math.pi))
        return dy * (t(0.5) * _erfc(-x * t(1 / math.sqrt(2))) + x * pdf)
    if act == "swish":
        s = _sigmoid(x)
        return dy * (s * (one + x * (one - s)))
    if act == "softplus":
        return dy * _sigmoid(x)
    if act == "softsign":
        return dy / (one + np.abs(x)) ** 2
    if act == "hard_sigmoid":
        u = x + t(3)
        return np.where((u > 0) & (u < 6), dy / t(6), zero)
    if act == "leaky_relu":
        return np.where(x >= 0, dy, dy * t(p["alpha"]))
    if act == "relu6":
        return np.where((x > 0) & (x < 6), dy, zero)
    if act == "exponential":
        return dy * y
    if act == "mish":
        th = np.tanh(_softplus(x))
        return dy * (th + x * (one - th * th) * _sigmoid(x))
    if act == "relu_general":
        cap = np.inf if p["max_value"] is None else p["max_value"]
        thr = t(p["threshold"])
        return np.where(x > thr, np.where(x < cap, dy, zero),
                        np.where(x < thr, dy * t(p["alpha"]), zero))
    raise ValueError(f"unknown activation {act!r}; expected one of {ELEMENTWISE}")


def activation_forward(x, act, **params):
    """y = act(x); softmax is over the last axis."""
    if act in ELEMENTWISE:
        return elementwise_forward(x, act, **params)
    if act == "linear":
        return x.copy()
    if act == "relu":
        return np.maximum(x, x.dtype.type(0))
    if act == "sigmoid":
        return _sigmoid(x)
    if act == "tanh":
        return np.tanh(x)
    if act == "softmax":
        return _softmax(x)
    raise ValueError(f"unknown activation {act!r}; expected one of {ACTIVATIONS}")


def activation_backward(y, dy, act, x=None, **params):
    """dx from the forward's output y and the upstream gradient dy (the
    elementwise activations also read the forward's input x)."""
    if act in ELEMENTWISE:
        return elementwise_backward(x, y, dy, act, **params)
    one = y.dtype.type(1)
    if act == "linear":
        return dy.copy()
    if act == "relu":
        return np.where(y > 0, dy, dy.dtype.type(0))        # gradient 1 where y > 0
    if act == "sigmoid":
        return dy * y * (one - y)
    if act == "tanh":
        return dy * (one - y * y)
    if act == "softmax":
        # J^T dy for J = diag(y) - y y^T, per row
        return y * (dy - (dy * y).sum(axis=-1, keepdims=True))
    raise ValueError(f"unknown activation {act!r}; expected one of {ACTIVATIONS}")


def prelu_forward(x, alpha):
    """PReLU: x where x > 0, else alpha x (alpha broadcast over x's sample
    shape: Keras's layout, 1 on the shared axes)."""
    return np.where(x > 0, x, alpha * x)


def prelu_backward(dy, x, alpha):
    """(dx, dalpha): dx = dy where x > 0, alpha dy where x < 0, 0 at 0;
    dalpha the sum of dy x where x < 0 over the batch and the shared axes."""
    zero = x.dtype.type(0)
    dx = np.where(x > 0, dy, np.where(x < 0, alpha * dy, zero))
    g = np.where(x < 0, dy * x, zero)
    axes = (0,) + tuple(k + 1 for k, a in enumerate(alpha.shape) if a == 1)
    return dx, g.sum(axis=axes, keepdims=True).reshape(alpha.shape)


# ---------------------------------------------------------------------------
# Dropout (inverted; semantics.md "Dropout")
# ---------------------------------------------------------------------------

def _dropout_scale(rate, dtype):
    """The float32 scale 1 / (1 - rate), then in dtype."""
    one = np.float32(1)
    return np.dtype(dtype).type(one / (one - np.float32(rate)))


def dropout_mask(shape, rate, key):
    """Keep mask of a tensor of Keras shape `shape` (bool, same shape): the
    element at NHWC flat index j is kept when uniform(key, j) >= rate."""
    count = int(np.prod(shape, dtype=np.int64))
    u = uniform(key, np.arange(count, dtype=np.uint64))    # float32
    return (u >= np.float32(rate)).reshape(shape)


def dropout_forward(x, rate, key):
    """Training-mode dropout of x (any Keras shape) under `key` (the layer's
    key for this training forward). Rate 0 passes x through (a copy)."""
    if rate == 0:
        return x.copy()
    keep = dropout_mask(x.shape, rate, key)
    return np.where(keep, x * _dropout_scale(rate, x.dtype), x.dtype.type(0))


def dropout_backward(dy, rate, key):
    """Gradient of dropout_forward: the same mask and scale applied to dy."""
    return dropout_forward(dy, rate, key)


# ---------------------------------------------------------------------------
# Batch normalization (per channel = last axis; statistics over all others)
# ---------------------------------------------------------------------------

def batchnorm_forward_train(x, gamma, beta, moving_mean, moving_var, momentum=0.99, epsilon=1e-3):
    """Training mode: normalize with the batch's mean and biased variance.

    x (N, H, W, C) or (N, C); gamma, beta, moving_* (C,).
    Returns (y, save_mean, save_invstd, new_moving_mean, new_moving_var), all
    new arrays: y like x, the rest (C,). moving = moving m + batch (1 - m).
    """
    dt = x.dtype.type
    axes = tuple(range(x.ndim - 1))
    mean = x.mean(axis=axes)
    var = ((x - mean) ** 2).mean(axis=axes)                 # biased, as Keras
    invstd = dt(1) / np.sqrt(var + dt(epsilon))
    y = gamma * ((x - mean) * invstd) + beta
    m, one_m = dt(momentum), dt(1) - dt(momentum)
    new_mean = moving_mean * m + mean * one_m
    new_var = moving_var * m + var * one_m
    return y, mean, invstd, new_mean, new_var


def batchnorm_forward_infer(x, gamma, beta, moving_mean, moving_var, epsilon=1e-3):
    """Inference mode: normalize with the moving statistics. y like x."""
    dt = x.dtype.type
    invstd = dt(1) / np.sqrt(moving_var + dt(epsilon))
    return gamma * ((x - moving_mean) * invstd) + beta


def batchnorm_backward(dy, x, gamma, save_mean, save_invstd):
    """Gradient of the training-mode forward (the batch statistics depend on x).

    Returns (dx like x, dgamma (C,), dbeta (C,)).
    """
    axes = tuple(range(x.ndim - 1))
    m = x.dtype.type(x.size // x.shape[-1])                 # elements per channel
    xhat = (x - save_mean) * save_invstd
    dbeta = dy.sum(axis=axes)
    dgamma = (dy * xhat).sum(axis=axes)
    # dx = gamma invstd (dy - mean(dy) - xhat mean(dy xhat))
    dx = (gamma * save_invstd / m) * (m * dy - dbeta - xhat * dgamma)
    return dx, dgamma, dbeta


def batchnorm_backward_infer(dy, x, gamma, moving_mean, moving_var, epsilon=1e-3):
    """Gradient of the inference-mode forward (a per-channel affine map).

    Returns (dx like x, dgamma (C,), dbeta (C,)).
    """
    dt = x.dtype.type
    axes = tuple(range(x.ndim - 1))
    invstd = dt(1) / np.sqrt(moving_var + dt(epsilon))
    xhat = (x - moving_mean) * invstd
    return dy * (gamma * invstd), (dy * xhat).sum(axis=axes), dy.sum(axis=axes)


# ---------------------------------------------------------------------------
# Losses and accuracy (semantics.md "Losses", "Accuracy")
#
# Each returns (loss_sum, correct, dy): the SUM over the batch of per-sample
# losses (a Python float), the count of correct samples (a Python float;
# binary counts the mean over k per sample), and the gradient of the MEAN
# loss over `scale_n` samples (default: the batch size), like y; dy is None
# when grad=False.
# ---------------------------------------------------------------------------

PROB_EPS = 1e-7


def _prob_bounds(dt):
    """Keras's clip of probabilities to [eps, 1 - eps], its bounds as float32
    makes them (Keras computes in float32: 1 - 1e-7 is 0.99999988, whose
    -log(1 - hi) is 15.94, not 16.12), in dtype dt: a float64 reference
    clips where the engines do."""
    eps = np.float32(PROB_EPS)
    return dt(eps), dt(np.float32(1) - eps)


REGRESSION_LOSS_KINDS = ("mean_squared_error", "mean_absolute_error", "huber",
                         "mean_squared_logarithmic_error", "log_cosh",
                         "mean_absolute_percentage_error")
LOSS_KINDS = ("sparse_categorical_crossentropy", "categorical_crossentropy",
              "binary_crossentropy") + REGRESSION_LOSS_KINDS


def _logsumexp_softmax(z):
    """(lse (N, 1), softmax (N, K)) of logits z, stably."""
    zmax = z.max(axis=1, keepdims=True)
    e = np.exp(z - zmax)
    s = e.sum(axis=1, keepdims=True)
    return zmax + np.log(s), e / s


def _prob_crossentropy(y, t, scale_n, grad):
    """Categorical CE of unnormalized probabilities y against targets t (N, K):
    q = y / sum(y), clipped to [eps, 1 - eps]; loss -sum(t log q)."""
    dt = y.dtype.type
    eps, hi = _prob_bounds(dt)
    s = y.sum(axis=1, keepdims=True)                        # (N, 1)
    q = y / s
    loss = -(t * np.log(np.clip(q, eps, hi))).sum(axis=1)   # (N,)
    dy = None
    if grad:
        inside = (q >= eps) & (q <= hi)                     # clipped entries get no gradient
        g = np.zeros_like(q)
        np.divide(-t, q, out=g, where=inside)               # g_j = -t_j / q_j
        dy = (g - (g * q).sum(axis=1, keepdims=True)) / s / dt(scale_n)
    return loss, dy


def _check_2d(y):
    if y.ndim != 2:
        raise ValueError(f"loss expects y of shape (N, K), got {y.shape}")


def sparse_categorical_crossentropy(y, labels, from_logits=False, scale_n=None, grad=True):
    """y (N, K) logits or probabilities; labels int (N,) in [0, K)."""
    _check_2d(y)
    n, k = y.shape
    labels = np.asarray(labels).reshape(-1).astype(np.intp)
    if labels.shape != (n,) or (n and (labels.min() < 0 or labels.max() >= k)):
        raise ValueError(f"labels must be {n} integers in [0, {k})")
    scale_n = n if scale_n is None else scale_n
    rows = np.arange(n)
    correct = float(np.count_nonzero(np.argmax(y, axis=1) == labels))
    if from_logits:
        lse, sm = _logsumexp_softmax(y)
        loss = lse[:, 0] - y[rows, labels]                  # lse(z) - z[label]
        dy = None
        if grad:
            dy = sm.copy()
            dy[rows, labels] -= y.dtype.type(1)
            dy /= y.dtype.type(scale_n)                     # (softmax - onehot) / N
    else:
        t = np.zeros_like(y)
        t[rows, labels] = 1
        loss, dy = _prob_crossentropy(y, t, scale_n, grad)
    return float(loss.sum()), correct, dy


def categorical_crossentropy(y, targets, from_logits=False, scale_n=None, grad=True):
    """y (N, K) logits or probabilities; targets float (N, K)."""
    _check_2d(y)
    n, k = y.shape
    t = np.asarray(targets, dtype=y.dtype)
    if t.shape != y.shape:
        raise ValueError(f"targets must have shape {y.shape}, got {t.shape}")
    scale_n = n if scale_n is None else scale_n
    correct = float(np.count_nonzero(np.argmax(y, axis=1) == np.argmax(t, axis=1)))
    if from_logits:
        lse, sm = _logsumexp_softmax(y)
        tsum = t.sum(axis=1, keepdims=True)                 # (N, 1)
        loss = tsum[:, 0] * lse[:, 0] - (t * y).sum(axis=1)
        dy = (sm * tsum - t) / y.dtype.type(scale_n) if grad else None
    else:
        loss, dy = _prob_crossentropy(y, t, scale_n, grad)
    return float(loss.sum()), correct, dy


def binary_crossentropy(y, targets, from_logits=False, scale_n=None, grad=True, weights=None):
    """y (N, K) logits or probabilities; targets float (N, K) in [0, 1].
    Per-sample loss and accuracy are means over K; weights (N,) or None: a
    sample's loss and gradient times its weight (the accuracy unweighted)."""
    _check_2d(y)
    n, k = y.shape
    dt = y.dtype.type
    t = np.asarray(targets, dtype=y.dtype)
    if t.shape != y.shape:
        raise ValueError(f"targets must have shape {y.shape}, got {t.shape}")
    scale_n = n if scale_n is None else scale_n
    one = dt(1)
    thr = dt(0) if from_logits else dt(0.5)
    hits = ((y > thr) == (t > dt(0.5))).astype(y.dtype)
    correct = float((hits.sum(axis=1) / dt(k)).sum())
    denom = dt(scale_n) * dt(k)
    if from_logits:
        elem = np.maximum(y, dt(0)) - y * t + np.log1p(np.exp(-np.abs(y)))
        dy = (_sigmoid(y) - t) / denom if grad else None
    else:
        eps, hi = _prob_bounds(dt)
        p = np.clip(y, eps, hi)
        elem = -(t * np.log(p) + (one - t) * np.log(one - p))
        dy = None
        if grad:
            inside = (y >= eps) & (y <= hi)                 # clipped entries get no gradient
            dy = np.where(inside, -t / p + (one - t) / (one - p), dt(0)) / denom
    loss = elem.sum(axis=1) / dt(k)
    return _weighted(loss, correct, dy, weights)


def _weighted(loss, correct, dy, weights):
    """(loss sum, correct, dy) with each row's loss and gradient times its weight."""
    if weights is None:
        return float(loss.sum()), correct, dy
    w = np.asarray(weights, dtype=loss.dtype)
    return float((loss * w).sum()), correct, (dy * w[:, None] if dy is not None else None)


KERAS_EPSILON = 1e-7     # keras.backend.epsilon()


def _regression_terms(kind, y, t, delta):
    """(term, d term / d y) elementwise: csrc/regression_math.h's formulas
    (Keras 3's losses; at a kink jax's derivative)."""
    dt = y.dtype.type
    eps = dt(np.float32(KERAS_EPSILON))
    e = y - t
    if kind == "mean_squared_error":
        return e * e, dt(2) * e
    if kind == "mean_absolute_error":
        return np.abs(t - y), np.where(y > t, dt(1), dt(-1))
    if kind == "huber":
        d = dt(np.float32(delta))
        a = np.abs(e)
        inside = a <= d
        return (np.where(inside, dt(0.5) * (e * e), d * a - dt(0.5) * (d * d)),
                np.where(inside, e, np.where(e > 0, d, -d)))
    if kind == "mean_squared_logarithmic_error":
        ym = np.maximum(y, eps)
        r = np.log(ym + dt(1)) - np.log(np.maximum(t, eps) + dt(1))
        m = np.where(y > eps, dt(1), np.where(y == eps, dt(0.5), dt(0)))
        return r * r, dt(2) * r * m / (ym + dt(1))
    if kind == "log_cosh":
        z = dt(-2) * e
        softplus = np.maximum(z, dt(0)) + np.log1p(np.exp(-np.abs(z)))
        return (e + softplus) - dt(np.log(2.0)), np.tanh(e)
    if kind == "mean_absolute_percentage_error":
        den = np.maximum(np.abs(t), eps)
        return dt(100) * np.abs((t - y) / den), np.where(y > t, dt(100), dt(-100)) / den
    raise ValueError(f"unknown regression loss {kind!r}; expected one of {REGRESSION_LOSS_KINDS}")


def regression_loss(kind, y, targets, scale_n=None, grad=True, delta=1.0, weights=None):
    """y (N, K) predictions, targets float (N, K). The per-sample loss is
    the mean over K of the elementwise term; the accuracy is Keras's
    'accuracy' for such a loss: K == 1 [(y > 0.5) == t] (BinaryAccuracy),
    K > 1 [argmax y == argmax t] (CategoricalAccuracy)."""
    _check_2d(y)
    n, k = y.shape
    dt = y.dtype.type
    t = np.asarray(targets, dtype=y.dtype)
    if t.shape != y.shape:
        raise ValueError(f"targets must have shape {y.shape}, got {t.shape}")
    if kind == "huber" and not (np.isfinite(delta) and delta > 0):
        raise ValueError(f"huber: delta must be finite and > 0, got {delta!r}")
    scale_n = n if scale_n is None else scale_n
    if k == 1:
        correct = float((np.where(y[:, 0] > dt(0.5), dt(1), dt(0)) == t[:, 0]).sum())
    else:
        correct = float((np.argmax(y, axis=1) == np.argmax(t, axis=1)).sum())
    term, d = _regression_terms(kind, y, t, delta)
    loss = term.sum(axis=1) / dt(k)
    dy = d / (dt(scale_n) * dt(k)) if grad else None
    return _weighted(loss, correct, dy, weights)


def loss_forward_backward(kind, y, target, from_logits=False, scale_n=None, grad=True,
                          delta=1.0, weights=None):
    """Dispatches on kind (one of LOSS_KINDS); delta: huber's; weights (N,)
    per-sample weights (the binary and regression losses; the categorical
    ones take weighted targets, cnncuda/sample_weights.py)."""
    if kind in REGRESSION_LOSS_KINDS:
        return regression_loss(kind, y, target, scale_n, grad, delta, weights)
    if weights is not None and kind != "binary_crossentropy":
        raise ValueError(f"{kind}: weights are given as weighted targets")
    if kind == "sparse_categorical_crossentropy":
        return sparse_categorical_crossentropy(y, target, from_logits, scale_n, grad)
    if kind == "categorical_crossentropy":
        return categorical_crossentropy(y, target, from_logits, scale_n, grad)
    if kind == "binary_crossentropy":
        return binary_crossentropy(y, target, from_logits, scale_n, grad, weights)
    raise ValueError(f"unknown loss {kind!r}; expected one of {LOSS_KINDS}")


# ---------------------------------------------------------------------------
# Optimizers (Keras 3's forms: keras/src/optimizers/<name>.py, update_step).
# Each updates p and its state IN PLACE and returns None. Hyperparameters are first rounded to p's dtype (the C
# descriptor holds floats), so float32 matches the C engines.
# ---------------------------------------------------------------------------

def adam_step(p, g, m, v, step, learning_rate=1e-3, beta_1=0.9, beta_2=0.999, epsilon=1e-7):
    """One Adam step, t = step counting from 1. Updates p, m, v in place.

    lr_t = lr sqrt(1 - b2^t) / (1 - b1^t) (in double, then p's dtype);
    m += (g - m)(1 - b1); v += (g^2 - v)(1 - b2); p -= lr_t m / (sqrt(v) + eps).
    """
    if step < 1:
        raise ValueError("Adam's step counts from 1")
    dt = p.dtype.type
    lr, b1, b2, eps = dt(learning_rate), dt(beta_1), dt(beta_2), dt(epsilon)
    lr_t = dt(float(lr) * math.sqrt(1.0 - float(b2) ** step) / (1.0 - float(b1) ** step))
    m += (g - m) * (dt(1) - b1)
    v += (g * g - v) * (dt(1) - b2)
    p -= lr_t * m / (np.sqrt(v) + eps)


def sgd_step(p, g, velocity=None, learning_rate=0.01, momentum=0.0, nesterov=False):
    """One SGD step. Updates p (and velocity, needed when momentum != 0) in place.

    momentum 0: p -= lr g. Otherwise v = momentum v - lr g; then p += v, or
    with nesterov p += momentum v - lr g.
    """
    dt = p.dtype.type
    lr, mom = dt(learning_rate), dt(momentum)
    if momentum == 0:
        p -= lr * g
        return
    if velocity is None:
        raise ValueError("SGD with momentum needs a velocity array")
    velocity *= mom
    velocity -= lr * g
    if nesterov:
        p += mom * velocity - lr * g
    else:
        p += velocity


def rmsprop_step(p, g, velocity, momentum_slot=None, average_gradient=None, learning_rate=1e-3,
                 rho=0.9, momentum=0.0, epsilon=1e-7, centered=False):
    """One RMSprop step (Keras 3's rmsprop.py). Updates p and the slots in place.

    velocity = rho velocity + (1 - rho) g^2; centered: average_gradient =
    rho average_gradient + (1 - rho) g and denominator = velocity -
    average_gradient^2 + eps, else velocity + eps; increment = lr g /
    sqrt(denominator); momentum > 0: momentum_slot = momentum momentum_slot +
    increment, p -= momentum_slot; else p -= increment.
    """
    dt = p.dtype.type
    lr, r, mom, eps = dt(learning_rate), dt(rho), dt(momentum), dt(epsilon)
    velocity[...] = r * velocity + (dt(1) - r) * (g * g)
    if centered:
        if average_gradient is None:
            raise ValueError("centered RMSprop needs an average_gradient array")
        average_gradient[...] = r * average_gradient + (dt(1) - r) * g
        denominator = (velocity - average_gradient * average_gradient) + eps
    else:
        denominator = velocity + eps
    increment = (lr * g) / np.sqrt(denominator)
    if momentum > 0:
        if momentum_slot is None:
            raise ValueError("RMSprop with momentum needs a momentum array")
        momentum_slot[...] = mom * momentum_slot + increment
        p -= momentum_slot
    else:
        p -= increment


def adagrad_step(p, g, accumulator, learning_rate=1e-3, initial_accumulator_value=0.1,
                 epsilon=1e-7):
    """One Adagrad step (Keras 3's adagrad.py); the accumulator starts at
    initial_accumulator_value (not read here). accumulator += g^2;
    p -= lr g / sqrt(accumulator + eps)."""
    dt = p.dtype.type
    lr, eps = dt(learning_rate), dt(epsilon)
    accumulator += g * g
    p -= (lr * g) / np.sqrt(accumulator + eps)


def adadelta_step(p, g, accumulated_grad, accumulated_delta_var, learning_rate=1e-3, rho=0.95,
                  epsilon=1e-7):
    """One Adadelta step (Keras 3's adadelta.py).

    accumulated_grad = rho accumulated_grad + (1 - rho) g^2;
    delta = -sqrt(accumulated_delta_var + eps) g / sqrt(accumulated_grad + eps);
    accumulated_delta_var = rho accumulated_delta_var + (1 - rho) delta^2;
    p += lr delta.
    """
    dt = p.dtype.type
    lr, r, eps = dt(learning_rate), dt(rho), dt(epsilon)
    accumulated_grad[...] = r * accumulated_grad + (dt(1) - r) * (g * g)
    delta = -((np.sqrt(accumulated_delta_var + eps) * g) / np.sqrt(accumulated_grad + eps))
    accumulated_delta_var[...] = r * accumulated_delta_var + (dt(1) - r) * (delta * delta)
    p += lr * delta


def adamax_step(p, g, m, u, step, learning_rate=1e-3, beta_1=0.9, beta_2=0.999, epsilon=1e-7):
    """One Adamax step (Keras 3's adamax.py), t = step counting from 1.

    m += (g - m)(1 - b1); u = max(b2 u, |g|); p -= lr_t m / (u + eps) with
    lr_t = lr / (1 - b1^t) (in double, then p's dtype).
    """
    if step < 1:
        raise ValueError("Adamax's step counts from 1")
    dt = p.dtype.type
    lr, b1, b2, eps = dt(learning_rate), dt(beta_1), dt(beta_2), dt(epsilon)
    lr_t = dt(float(lr) / (1.0 - float(b1) ** step))
    m += (g - m) * (dt(1) - b1)
    u[...] = np.maximum(b2 * u, np.abs(g))
    p -= (m * lr_t) / (u + eps)


def nadam_coefficients(beta_1, beta_2, step):
    """Nadam's (c_m, c_g, c_v) at step t >= 1 (Keras 3's nadam.py, in double):
    u_i = b1 (1 - 0.5 0.96^i), U_t = u_1 ... u_t (Keras's u_product);
    c_m = u_{t+1} / (1 - U_t u_{t+1}), c_g = (1 - u_t) / (1 - U_t),
    c_v = 1 - b2^t. The factors (1 - 0.5 0.96^i) are 1 in double from
    i = 1000 on."""
    b1 = float(beta_1)
    d, prod = 1.0, 1.0
    for _ in range(min(step, 1000)):
        d *= 0.96
        prod *= 1.0 - 0.5 * d
    u_t = b1 * (1.0 - 0.5 * d)
    u_next = b1 * (1.0 - 0.5 * (d * 0.96))
    u_prod = b1 ** step * prod
    return (u_next / (1.0 - u_prod * u_next), (1.0 - u_t) / (1.0 - u_prod),
            1.0 - float(beta_2) ** step)


def nadam_step(p, g, m, v, step, learning_rate=1e-3, beta_1=0.9, beta_2=0.999, epsilon=1e-7):
    """One Nadam step (Keras 3's nadam.py), t = step counting from 1.

    m += (g - m)(1 - b1); v += (g^2 - v)(1 - b2); m_hat = c_m m + c_g g;
    v_hat = v / c_v; p -= lr m_hat / (sqrt(v_hat) + eps) (nadam_coefficients,
    rounded to p's dtype).
    """
    if step < 1:
        raise ValueError("Nadam's step counts from 1")
    dt = p.dtype.type
    lr, b1, b2, eps = dt(learning_rate), dt(beta_1), dt(beta_2), dt(epsilon)
    c_m, c_g, c_v = (dt(c) for c in nadam_coefficients(b1, b2, step))
    m += (g - m) * (dt(1) - b1)
    v += (g * g - v) * (dt(1) - b2)
    m_hat = c_m * m + c_g * g
    p -= (m_hat * lr) / (np.sqrt(v / c_v) + eps)


def adamw_step(p, g, m, v, step, learning_rate=1e-3, weight_decay=0.004, beta_1=0.9,
               beta_2=0.999, epsilon=1e-7):
    """One AdamW step (Keras 3): the base optimizer's weight decay
    (base_optimizer.py, _apply_weight_decay: p = p - p wd lr), then adam_step."""
    dt = p.dtype.type
    p -= p * (dt(learning_rate) * dt(weight_decay))
    adam_step(p, g, m, v, step, learning_rate, beta_1, beta_2, epsilon)


# ---------------------------------------------------------------------------
# The `numpy` engine: NumpyNet, a Sequential net of small layer objects
# ---------------------------------------------------------------------------

def _pair(v, name):
    """An int or a pair of ints as a tuple of two positive ints."""
    if v is None:  # as the C binding: no default window here
        raise TypeError(f"{name}: expected an int or a pair of ints, got None")
    t = (int(v), int(v)) if np.isscalar(v) else tuple(int(e) for e in v)
    if len(t) != 2 or min(t) < 1:
        raise ValueError(f"{name} must be a positive int or a pair of them, got {v!r}")
    return t


def _require(spec, key, index):
    if key not in spec:
        raise ValueError(f"layer {index} ({spec.get('kind')}): missing {key!r}")
    return spec[key]


def add_forward(xs):
    """Keras's Add: the inputs summed in their order ((x0 + x1) + x2 ...)."""
    y = xs[0] + xs[1]
    for x in xs[2:]:
        y = y + x
    return y


def concat_forward(xs):
    """Keras's Concatenate over the last axis (the channels)."""
    return np.concatenate(xs, axis=-1)


def concat_backward(dy, sizes):
    """The gradient of each input of concat_forward: dy's channels split
    into parts of `sizes`."""
    return np.split(dy, np.cumsum(sizes)[:-1], axis=-1)


class _Layer:
    """A layer: built from its input shape (without the batch dim).

    weights: arrays in Keras order; trainable: one bool per weight;
    grads: one array per trainable weight, same order (overwritten by
    backward). forward(x, training, t) caches what backward(dy) needs; t is
    the net's training-forward counter (keys dropout).
    """

    def __init__(self, index, in_shape):
        self.index = index
        self.in_shape = tuple(in_shape)
        self.out_shape = self.in_shape
        self.weights, self.trainable, self.grads = [], [], []

    frozen = False
    regularizers = ()   # (weight index, l1, l2) per regularized weight

    def _zero_grads(self):
        self.grads = [np.zeros_like(w) for w, tr in zip(self.weights, self.trainable) if tr]

    def _weight_options(self, spec):
        """A conv or dense layer's 'trainable' (False: frozen) and its
        kernel's and bias's regularizer factors ('kernel_l1', ...)."""
        self.frozen = not bool(spec.get("trainable", True))
        self.trainable = [not self.frozen] * len(self.weights)
        regs = []
        for j, name in enumerate(("kernel", "bias")[:len(self.weights)]):
            l1, l2 = float(spec.get(name + "_l1", 0.0)), float(spec.get(name + "_l2", 0.0))
            if not (0 <= l1 < math.inf and 0 <= l2 < math.inf):
                raise ValueError(f"layer {self.index}: regularizer factors must be finite and "
                                 f">= 0, got {l1}, {l2}")
            if (l1 or l2) and not self.frozen:
                regs.append((j, l1, l2))
        self.regularizers = tuple(regs)
        self._zero_grads()

    def penalty(self):
        """The regularizers' penalty (semantics.md "Regularizers"), a float:
        l1 sum|w| + l2 sum w^2 with the sums in float64."""
        total = 0.0
        for j, l1, l2 in self.regularizers:
            w = self.weights[j].astype(np.float64)
            dt = self.weights[j].dtype.type
            total += float(dt(l1)) * np.abs(w).sum() + float(dt(l2)) * np.square(w).sum()
        return total

    def add_penalty_gradients(self):
        """grads += l1 sign(w) + (2 l2) w, in the weights' dtype."""
        for j, l1, l2 in self.regularizers:
            w = self.weights[j]
            dt = w.dtype.type
            self.grads[j] += dt(l1) * np.sign(w) + (dt(2) * dt(l2)) * w

    def _need_image(self):
        if len(self.in_shape) != 3:
            raise ValueError(f"layer {self.index} ({self.kind}) needs an image input "
                             f"(H, W, C), got {self.in_shape}")


class _Conv2D(_Layer):
    kind = "conv2d"

    def __init__(self, index, spec, in_shape, seed, dtype):
        super().__init__(index, in_shape)
        self._need_image()
        h, w, c = self.in_shape
        f = int(_require(spec, "units", index))
        self.kernel = _pair(_require(spec, "kernel", index), "kernel")
        strides = spec.get("strides")  # absent or None: 1, as the C binding
        self.strides = _pair((1, 1) if strides is None else strides, "strides")
        self.padding = spec.get("padding", "valid")
        self.use_bias = bool(spec.get("use_bias", True))
        kh, kw = self.kernel
        oh, _, _ = padding_geometry(h, kh, self.strides[0], self.padding)
        ow, _, _ = padding_geometry(w, kw, self.strides[1], self.padding)
        self.out_shape = (oh, ow, f)
        kernel = glorot_uniform(seed, index, (kh, kw, c, f), kh * kw * c, kh * kw * f)
        self.weights = [kernel.astype(dtype)]                        # (KH, KW, C, F)
        if self.use_bias:
            self.weights.append(np.zeros(f, dtype))                  # (F,)
        self._weight_options(spec)

    def forward(self, x, training, t):
        self.x = x                                                   # (N, H, W, C)
        b = self.weights[1] if self.use_bias else None
        return conv2d_forward(x, self.weights[0], b, self.strides, self.padding)

    def backward(self, dy):
        dx, dw, db = conv2d_backward(dy, self.x, self.weights[0], self.strides,
                                     self.padding, self.use_bias)
        self.grads = [dw] + ([db] if self.use_bias else [])
        return dx


class _Pool(_Layer):
    def __init__(self, index, spec, in_shape, kind):
        super().__init__(index, in_shape)
        self.kind = kind
        self._need_image()
        h, w, c = self.in_shape
        self.pool = _pair(_require(spec, "kernel", index), "kernel")
        self.strides = _pair(spec.get("strides") or self.pool, "strides")
        self.padding = spec.get("padding", "valid")
        oh, _, _ = padding_geometry(h, self.pool[0], self.strides[0], self.padding)
        ow, _, _ = padding_geometry(w, self.pool[1], self.strides[1], self.padding)
        self.out_shape = (oh, ow, c)

    def forward(self, x, training, t):
        self.x_shape = x.shape
        if self.kind == "maxpool":
            y, self.argmax = max_pool2d_forward(x, self.pool, self.strides, self.padding)
            return y
        return avg_pool2d_forward(x, self.pool, self.strides, self.padding)

    def backward(self, dy):
        if self.kind == "maxpool":
            return max_pool2d_backward(dy, self.argmax, self.x_shape, self.pool,
                                       self.strides, self.padding)
        return avg_pool2d_backward(dy, self.x_shape, self.pool, self.strides, self.padding)


class _Flatten(_Layer):
    kind = "flatten"

    def __init__(self, index, spec, in_shape):
        super().__init__(index, in_shape)
        self.out_shape = (int(np.prod(self.in_shape)),)

    def forward(self, x, training, t):
        self.x_shape = x.shape
        return flatten_forward(x)

    def backward(self, dy):
        return flatten_backward(dy, self.x_shape)


class _Dense(_Layer):
    kind = "dense"

    def __init__(self, index, spec, in_shape, seed, dtype):
        super().__init__(index, in_shape)
        if len(self.in_shape) != 1:
            raise ValueError(f"layer {index} (dense) needs a vector input; add a "
                             f"flatten before it (got {self.in_shape})")
        n_in = self.in_shape[0]
        units = int(_require(spec, "units", index))
        self.use_bias = bool(spec.get("use_bias", True))
        self.out_shape = (units,)
        kernel = glorot_uniform(seed, index, (n_in, units), n_in, units)
        self.weights = [kernel.astype(dtype)]                        # (IN, OUT)
        if self.use_bias:
            self.weights.append(np.zeros(units, dtype))              # (OUT,)
        self._weight_options(spec)

    def forward(self, x, training, t):
        self.x = x                                                   # (N, IN)
        return dense_forward(x, self.weights[0], self.weights[1] if self.use_bias else None)

    def backward(self, dy):
        dx, dw, db = dense_backward(dy, self.x, self.weights[0], self.use_bias)
        self.grads = [dw] + ([db] if self.use_bias else [])
        return dx


class _Activation(_Layer):
    kind = "activation"

    def __init__(self, index, spec, in_shape):
        super().__init__(index, in_shape)
        self.act = _require(spec, "activation", index)
        if self.act not in ACTIVATIONS:
            raise ValueError(f"layer {index}: unknown activation {self.act!r}; "
                             f"expected one of {ACTIVATIONS}")
        if self.act == "softmax" and len(self.in_shape) != 1:
            raise ValueError(f"layer {index}: softmax needs a vector input (N, F), "
                             f"got {self.in_shape}")
        self.params = {k: spec.get(k, d)
                       for k, d in ACTIVATION_PARAMETERS.get(self.act, {}).items()}
        for k, v in self.params.items():
            if v is not None and not math.isfinite(float(v)) and k != "max_value":
                raise ValueError(f"layer {index} (activation): {k} must be finite, got {v}")
        if self.act == "relu_general":
            cap, thr = self.params["max_value"], float(self.params["threshold"])
            if (cap is not None and not cap >= 0) or not (math.isfinite(thr) and thr >= 0):
                raise ValueError(f"layer {index} (activation): relu_general needs max_value "
                                 f">= 0 and a finite threshold >= 0, got max_value {cap} "
                                 f"threshold {thr}")

    def forward(self, x, training, t):
        self.x = x
        self.y = activation_forward(x, self.act, **self.params)
        return self.y

    def backward(self, dy):
        return activation_backward(self.y, dy, self.act, self.x, **self.params)


class _PReLU(_Layer):
    kind = "prelu"

    def __init__(self, index, spec, in_shape, dtype):
        super().__init__(index, in_shape)
        shared = spec.get("shared_axes") or ()
        if any(not 1 <= int(a) <= len(self.in_shape) for a in shared):
            raise ValueError(f"layer {index} (prelu): shared_axes must be axes of its input "
                             f"(1 to {len(self.in_shape)}), got {list(shared)}")
        shape = tuple(1 if k + 1 in shared else d for k, d in enumerate(self.in_shape))
        self.weights = [np.zeros(shape, dtype)]                     # alpha, Keras's initializer
        self.trainable = [True]
        self._zero_grads()

    def forward(self, x, training, t):
        self.x = x
        return prelu_forward(x, self.weights[0])

    def backward(self, dy):
        dx, dalpha = prelu_backward(dy, self.x, self.weights[0])
        self.grads = [dalpha]
        return dx


class _Dropout(_Layer):
    kind = "dropout"

    def __init__(self, index, spec, in_shape, seed):
        super().__init__(index, in_shape)
        self.rate = float(_require(spec, "rate", index))
        if not 0.0 <= self.rate < 1.0:
            raise ValueError(f"layer {index}: dropout rate must be in [0, 1), got {self.rate}")
        self.layer_key = rng_key(seed, 2 * index + 1)

    def forward(self, x, training, t):
        # the t-th training forward uses key(key(seed, 2 i + 1), t)
        self.key = rng_key(self.layer_key, t) if training else None
        return dropout_forward(x, self.rate, self.key) if training else x.copy()

    def backward(self, dy):
        return dropout_backward(dy, self.rate, self.key) if self.key is not None else dy.copy()


class _BatchNorm(_Layer):
    kind = "batchnorm"

    def __init__(self, index, spec, in_shape, dtype):
        super().__init__(index, in_shape)
        c = self.in_shape[-1]
        self.momentum = float(spec.get("momentum", 0.99))
        self.epsilon = float(spec.get("epsilon", 1e-3))
        # gamma, beta, moving_mean, moving_variance (C,)
        self.weights = [np.ones(c, dtype), np.zeros(c, dtype),
                        np.zeros(c, dtype), np.ones(c, dtype)]
        # frozen (trainable False): no trainable weights, and inference mode
        # in training too, as Keras 3
        self.frozen = not bool(spec.get("trainable", True))
        self.trainable = [not self.frozen, not self.frozen, False, False]
        # called with training=False (fixed_mode.py): inference mode in
        # training too, gamma and beta trained through it
        self.inference = bool(spec.get("inference", False))
        self._zero_grads()

    def forward(self, x, training, t):
        gamma, beta, mmean, mvar = self.weights
        training = training and not self.frozen and not self.inference
        self.x, self.training = x, training
        if not training:
            return batchnorm_forward_infer(x, gamma, beta, mmean, mvar, self.epsilon)
        y, self.mean, self.invstd, new_mean, new_var = batchnorm_forward_train(
            x, gamma, beta, mmean, mvar, self.momentum, self.epsilon)
        mmean[...] = new_mean                                        # in place: the arrays persist
        mvar[...] = new_var
        return y

    def backward(self, dy):
        gamma, _, mmean, mvar = self.weights
        if self.training:
            dx, dgamma, dbeta = batchnorm_backward(dy, self.x, gamma, self.mean, self.invstd)
        else:
            dx, dgamma, dbeta = batchnorm_backward_infer(dy, self.x, gamma, mmean, mvar,
                                                         self.epsilon)
        self.grads = [] if self.frozen else [dgamma, dbeta]
        return dx


_ADAM_DEFAULTS = {"learning_rate": 1e-3, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-7}
_SGD_DEFAULTS = {"learning_rate": 0.01, "momentum": 0.0, "nesterov": False}
# every optimizer's hyperparameters and Keras 3's defaults
OPTIMIZER_DEFAULTS = {
    "adam": _ADAM_DEFAULTS,
    "sgd": _SGD_DEFAULTS,
    "rmsprop": {"learning_rate": 1e-3, "rho": 0.9, "momentum": 0.0, "epsilon": 1e-7,
                "centered": False},
    "adagrad": {"learning_rate": 1e-3, "initial_accumulator_value": 0.1, "epsilon": 1e-7},
    "adadelta": {"learning_rate": 1e-3, "rho": 0.95, "epsilon": 1e-7},
    "adamax": _ADAM_DEFAULTS,
    "nadam": _ADAM_DEFAULTS,
    "adamw": dict(_ADAM_DEFAULTS, weight_decay=0.004),
}
_BETAS = ("adam", "adamax", "nadam", "adamw")


def _optimizer_slot_count(kind, opt):
    """Arrays per trainable weight, in Keras's variable order (cnn.h)."""
    if kind == "sgd":
        return 1 if opt["momentum"] else 0
    if kind == "adagrad":
        return 1
    if kind == "rmsprop":
        return 1 + bool(opt["momentum"]) + bool(opt["centered"])
    return 2


def _check_optimizer(kind, opt):
    """The C core's checks (csrc/net/create.c, net_validate_optimizer)."""
    if not (opt["learning_rate"] >= 0 and math.isfinite(opt["learning_rate"])):
        raise ValueError("learning_rate must be a finite number >= 0, got %r"
                         % (opt["learning_rate"],))
    if kind in _BETAS and not (0 <= opt["beta_1"] < 1 and 0 <= opt["beta_2"] < 1
                               and 0 <= opt["epsilon"] < math.inf):
        raise ValueError("%s needs beta_1 and beta_2 in [0, 1) and epsilon >= 0, got %r"
                         % (kind, opt))
    if kind in ("sgd", "rmsprop") and not 0 <= opt["momentum"] <= 1:
        raise ValueError("%s momentum must be in [0, 1], got %r" % (kind, opt["momentum"]))
    if kind in ("rmsprop", "adadelta") and not 0 <= opt["rho"] <= 1:
        raise ValueError("%s rho must be in [0, 1], got %r" % (kind, opt["rho"]))
    if kind in ("rmsprop", "adagrad", "adadelta") and not 0 <= opt["epsilon"] < math.inf:
        raise ValueError("%s epsilon must be a finite number >= 0, got %r"
                         % (kind, opt["epsilon"]))
    if kind == "adagrad" and not 0 <= opt["initial_accumulator_value"] < math.inf:
        raise ValueError("adagrad initial_accumulator_value must be a finite number >= 0, got %r"
                         % (opt["initial_accumulator_value"],))
    if kind == "adamw" and not 0 <= opt["weight_decay"] < math.inf:
        raise ValueError("adamw weight_decay must be a finite number >= 0, got %r"
                         % (opt["weight_decay"],))


class _Merge(_Layer):
    """A layer of several inputs (Add, Concatenate): in_shapes one per input;
    forward takes the list of inputs, backward gives the list of their
    gradients. No weights."""

    def __init__(self, index, kind, in_shapes):
        self.index, self.kind = index, kind
        self.in_shapes = [tuple(s) for s in in_shapes]
        first = self.in_shapes[0]
        for k, shape in enumerate(self.in_shapes):
            if kind == "add" and shape != first or \
                    kind == "concatenate" and (len(shape) != len(first) or shape[:-1] != first[:-1]):
                raise ValueError(f"layer {index} ({kind}): input {k} has shape {shape}, input 0 "
                                 f"{first}")
        self.out_shape = first if kind == "add" else \
            first[:-1] + (sum(s[-1] for s in self.in_shapes),)
        self.in_shape = first
        self.weights, self.trainable, self.grads = [], [], []

    def forward(self, xs, training, t):
        return add_forward(xs) if self.kind == "add" else concat_forward(xs)

    def backward(self, dy):
        if self.kind == "add":
            return [dy for _ in self.in_shapes]
        return concat_backward(dy, [s[-1] for s in self.in_shapes])


def input_slice_forward(x, offset, shape):
    """One input of a model of several inputs: the values [offset, offset +
    prod(shape)) of each sample of the packed x (N, F), as (N,) + shape
    (Keras's layout)."""
    count = int(np.prod(shape))
    return x[:, offset:offset + count].reshape((x.shape[0],) + tuple(shape)).copy()


class _InputSlice(_Layer):
    """An input of a model of several inputs (engine kind 'input_slice'):
    it reads the packed network input and comes before every other layer;
    no gradient passes back through it."""
    kind = "input_slice"

    def __init__(self, index, spec, in_shape):
        super().__init__(index, in_shape)
        self.offset = int(_require(spec, "offset", index))
        self.out_shape = tuple(int(d) for d in _require(spec, "shape", index))
        if len(self.in_shape) != 1 or len(self.out_shape) not in (1, 3) or \
                min(self.out_shape) < 1 or self.offset < 0 or \
                self.offset + int(np.prod(self.out_shape)) > self.in_shape[0]:
            raise ValueError(f"layer {index} (input_slice): a {self.out_shape} input at value "
                             f"{self.offset} does not fit the network's input {self.in_shape}")

    def forward(self, x, training, t):
        return input_slice_forward(x, self.offset, self.out_shape)

    def backward(self, dy):
        raise ValueError(f"layer {self.index} (input_slice) passes no gradient back")


class NumpyNet:
    """The `numpy` engine: a Sequential CNN in NumPy with the C binding's Net
    interface (see the module docstring of cnncuda and docs/semantics.md).

    NumpyNet(layers, input_shape, max_batch, loss, optimizer, seed=0,
             dtype=np.float32)
    """

    device = "numpy"

    def __init__(self, layers, input_shape, max_batch, loss, optimizer, seed=0,
                 dtype=np.float32):
        self.dtype = np.dtype(dtype)
        if self.dtype not in (np.float32, np.float64):
            raise ValueError(f"dtype must be float32 or float64, got {self.dtype}")
        self.input_shape = tuple(int(d) for d in input_shape)
        if len(self.input_shape) not in (1, 3) or min(self.input_shape) < 1:
            raise ValueError(f"input_shape must be (H, W, C) or (F,), got {input_shape!r}")
        self._max_batch = int(max_batch)
        if self._max_batch < 1:
            raise ValueError("max_batch must be >= 1")
        self.seed = int(seed)

        # layers, each built on the output shapes of the layers it reads
        # (spec["inputs"]: their indices, -1 the network's input; without
        # it, the layer before: a chain); below _aug_floor (1 + the last
        # augmentation layer) no layer has weights
        self._aug_floor = 0
        self.layers, self._reads = [], []
        readers = [0] * (len(layers) + 1)
        shape = self.input_shape
        for i, spec in enumerate(layers):
            spec = dict(spec)
            inputs = spec.get("inputs")
            inputs = [i - 1] if inputs is None else [int(j) for j in inputs]
            if not inputs or any(not -1 <= j < i for j in inputs):
                raise ValueError(f"layer {i}: inputs {inputs}: a layer reads the network's "
                                 f"input (-1) or earlier layers")
            shapes = [self.input_shape if j < 0 else self.layers[j].out_shape for j in inputs]
            if spec.get("kind") in ("add", "concatenate"):
                if len(inputs) < 2:
                    raise ValueError(f"layer {i} ({spec['kind']}) needs at least 2 inputs")
                layer = _Merge(i, spec["kind"], shapes)
            else:
                if len(inputs) != 1:
                    raise ValueError(f"layer {i} ({spec.get('kind')}) takes one input")
                self._reading = inputs      # (for an augmentation layer's check)
                layer = self._make_layer(i, spec, shapes[0])
            for j in inputs:
                readers[j + 1] += 1
            self.layers.append(layer)
            self._reads.append(inputs)
            shape = layer.out_shape
        for j in range(len(layers) - 1):
            if not readers[j + 1]:
                raise ValueError(f"layer {j}: its output is read by no layer")
        self._output_shape = tuple(shape)

        # several outputs (cnncuda/several_outputs.py; csrc/net/loss_parts.c):
        # the last layer concatenates them, a loss per output over the
        # packed float targets; the network's loss is then MSE's placeholder
        self._parts = None
        if "outputs" in loss:
            self._parts = self._loss_parts(loss["outputs"])
            loss = {"kind": "mean_squared_error"}
        # loss: the output must be (K,)
        self.loss_kind = loss["kind"]
        self.from_logits = bool(loss.get("from_logits", False))
        self.loss_delta = float(loss.get("delta", 1.0))
        # weighted: each target row carries the sample's weight after its K
        # targets (cnncuda/sample_weights.py; binary and regression losses)
        self.loss_weighted = bool(loss.get("weighted", False))
        if self.loss_weighted and loss["kind"] in ("sparse_categorical_crossentropy",
                                                   "categorical_crossentropy"):
            raise ValueError(f"loss {loss['kind']!r}: weighted is for the binary and "
                             f"regression losses")
        if self.loss_kind not in LOSS_KINDS:
            raise ValueError(f"unknown loss {self.loss_kind!r}; expected one of {LOSS_KINDS}")

        # optimizer and its state, one slot per trainable weight
        kind = optimizer["kind"]
        defaults = OPTIMIZER_DEFAULTS.get(kind)
        if defaults is None:
            raise ValueError(f"unknown optimizer {kind!r}; expected one of "
                             f"{', '.join(OPTIMIZER_DEFAULTS)}")
        self.opt_kind = kind
        self.opt = {k: optimizer.get(k, d) for k, d in defaults.items()}
        _check_optimizer(kind, self.opt)
        self._with_velocity = kind == "sgd" and bool(self.opt["momentum"])
        self._n_slots = _optimizer_slot_count(kind, self.opt)
        self._params = [(layer, j) for layer in self.layers
                        for j, tr in enumerate(layer.trainable) if tr]
        # the slots in Keras's variable order; SGD without momentum keeps an
        # unused velocity; Adagrad's accumulator starts at its initial value
        start = self.opt["initial_accumulator_value"] if kind == "adagrad" else 0.0
        self._slots = [[np.full_like(layer.weights[j], start)
                        for _ in range(max(self._n_slots, 1))]
                       for layer, j in self._params]
        self._steps = 0
        self._training_forwards = 0
        self._last_out_shape = None  # shape of the last forward's output
        # dynamic loss scaling (LossScaleOptimizer: the optimizer dict's
        # 'loss_scale' > 0): [scale S, finite steps since it changed], the
        # growth count, and whether the last gradients were not all finite
        self._loss_scaling = "loss_scale" in optimizer
        if self._loss_scaling:
            scale = float(optimizer["loss_scale"])
            growth = optimizer.get("loss_scale_growth_steps", 2000)
            if not 0.0 < scale < float("inf"):
                raise ValueError(f"optimizer['loss_scale']: expected a finite number > 0, "
                                 f"got {scale:g}")
            if not (float(growth) == int(growth) and 1 <= int(growth) <= 2 ** 24):
                raise ValueError(f"optimizer['loss_scale_growth_steps']: expected an int in "
                                 f"[1, 2^24], got {growth:g}")
            self._scale, self._scale_good = np.float32(scale), 0
            self._scale_growth = int(growth)
        self._skip = False

    def _make_layer(self, i, spec, shape):
        kind = spec.get("kind")
        if kind in ("conv2d", "dense") and spec.get("activation") not in (None, "linear"):
            raise ValueError(f"layer {i} ({kind}): use a separate activation layer")
        if kind == "conv2d":
            return _Conv2D(i, spec, shape, self.seed, self.dtype)
        if kind in ("maxpool", "avgpool"):
            return _Pool(i, spec, shape, kind)
        if kind == "flatten":
            return _Flatten(i, spec, shape)
        if kind == "dense":
            return _Dense(i, spec, shape, self.seed, self.dtype)
        if kind == "activation":
            return _Activation(i, spec, shape)
        if kind == "dropout":
            return _Dropout(i, spec, shape, self.seed)
        if kind == "batchnorm":
            return _BatchNorm(i, spec, shape, self.dtype)
        if kind == "prelu":
            return _PReLU(i, spec, shape, self.dtype)
        if kind == "input_slice":
            if any(not isinstance(layer, _InputSlice) for layer in self.layers) or \
                    list(spec.get("inputs") or []) != [-1]:
                raise ValueError(f"layer {i} (input_slice) reads the network's input (-1) "
                                 "alone and comes before every other layer")
            self._aug_floor = i + 1
            return _InputSlice(i, spec, shape)
        from . import reference_augment
        if kind in reference_augment.AUGMENT_KINDS:
            layer = reference_augment.make_layer(_Layer, i, spec, shape, self.seed,
                                                 self._weights_above(self._reading))
            self._aug_floor = i + 1
            return layer
        from .reference_shapes import make_shape_layer    # it imports this module
        layer = make_shape_layer(i, spec, shape, self.seed)
        if layer is not None:
            return layer
        raise ValueError(f"layer {i}: unknown kind {kind!r}")

    def _sliced(self):
        """Whether the network has several inputs (input_slice layers first)."""
        return bool(self.layers) and isinstance(self.layers[0], _InputSlice)

    def _weights_above(self, inputs):
        """Whether a layer with weights is upstream of a layer reading
        `inputs` (a network of several inputs), else before it (as the C
        core: csrc/net/augment.c)."""
        if not self._sliced():
            return any(layer.weights for layer in self.layers)
        todo, seen = [j for j in inputs if j >= 0], set()
        while todo:
            j = todo.pop()
            if j in seen:
                continue
            seen.add(j)
            if self.layers[j].weights:
                return True
            todo.extend(k for k in self._reads[j] if k >= 0)
        return False

    # -- properties -------------------------------------------------------

    @property
    def output_shape(self):
        return self._output_shape

    @property
    def max_batch(self):
        return self._max_batch

    @property
    def steps(self):
        return self._steps

    @property
    def training_forwards(self):
        return self._training_forwards

    def set_training_forwards(self, n):
        """The training-forward count (it keys the dropout masks); the step
        count and the optimizer's arrays kept."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 0 <= n < 2**63:
            raise ValueError("n: expected an int >= 0, got %r" % (n,))
        self._training_forwards = int(n)

    # -- input checks -----------------------------------------------------

    def _check_loss_output(self):
        """The loss is taken along the output's last axis (K), at every
        other position of a sample (Keras's)."""
        if (self.loss_kind in ("sparse_categorical_crossentropy", "categorical_crossentropy")
                and self._output_shape[-1] < 2):
            raise ValueError(f"{self.loss_kind} needs at least 2 outputs along the last axis, "
                             f"the net's output is {self._output_shape}")

    def _loss_parts(self, outputs):
        """Each output's loss, checked against its source (input j of the
        last layer, a concatenation), with its offsets in the packed output
        and target rows."""
        last = self.layers[-1]
        if not (2 <= len(outputs) <= 8) or not isinstance(last, _Merge) or \
                last.kind != "concatenate" or len(self._reads[-1]) != len(outputs):
            raise ValueError(f"loss: the losses of {len(outputs)} outputs need a last layer "
                             f"that concatenates {len(outputs)} outputs")
        parts, y_off, t_off = [], 0, 0
        for j, (spec, src) in enumerate(zip(outputs, self._reads[-1])):
            kind = spec["kind"]
            if kind not in LOSS_KINDS:
                raise ValueError(f"loss of output {j}: unknown loss {kind!r}")
            k, p = int(spec["classes"]), int(spec.get("positions", 1))
            weighted = bool(spec.get("weighted", False))
            weight = float(spec.get("weight", 1.0))
            shape = self.input_shape if src < 0 else self.layers[src].out_shape
            count = int(np.prod(shape))
            if src < 0 or len(shape) != 1 or k * p != count:
                raise ValueError(f"loss of output {j}: {k} values at {p} positions per sample, "
                                 f"the output gives {shape}")
            if kind in ("sparse_categorical_crossentropy", "categorical_crossentropy"):
                if weighted:
                    raise ValueError(f"loss of output {j}: weighted is for the binary and "
                                     f"regression losses")
                if k < 2:
                    raise ValueError(f"loss of output {j}: {kind} needs at least 2 outputs")
            if weighted and p > 1:
                raise ValueError(f"loss of output {j}: weighted targets need one position")
            if not (np.isfinite(weight) and weight >= 0):
                raise ValueError(f"loss of output {j}: its weight must be finite and >= 0")
            width = p if kind == "sparse_categorical_crossentropy" else p * k + weighted
            parts.append({"kind": kind, "from_logits": bool(spec.get("from_logits", False)),
                          "delta": float(spec.get("delta", 1.0)), "weighted": weighted,
                          "weight": weight, "k": k, "p": p, "y_off": y_off, "count": count,
                          "t_off": t_off, "width": width})
            y_off += count
            t_off += width
        self._part_width = t_off
        return parts

    def _loss_of_parts(self, out, target, grad):
        """_loss for several outputs: (the weighted sum of the outputs'
        loss sums, [loss sum, correct of each output in turn], the packed
        output's gradient), each output's as one output's loss, its
        gradient times its weight in the network's float type."""
        n = out.shape[0]
        total, sums = 0.0, np.zeros(2 * len(self._parts))
        dout = np.zeros_like(out) if grad else None
        for j, part in enumerate(self._parts):
            k, p = part["k"], part["p"]
            rows = out[:, part["y_off"]:part["y_off"] + part["count"]].reshape(n * p, k)
            t = target[:, part["t_off"]:part["t_off"] + part["width"]]
            weights = None
            if part["kind"] == "sparse_categorical_crossentropy":
                # the engines' labels_from_floats: (int) t clamped into [0, k)
                t = np.clip(np.where(t > 0, t, 0), 0, k - 1).astype(np.int64).reshape(n * p)
            elif part["weighted"]:
                t, weights = t[:, :k], t[:, k]
            else:
                t = t.reshape(n * p, k)
            loss_sum, correct, d = loss_forward_backward(
                part["kind"], rows, t, part["from_logits"], scale_n=max(n * p, 1), grad=grad,
                delta=part["delta"], weights=weights)
            if p > 1:
                loss_sum, correct = loss_sum / p, correct / p
            sums[2 * j], sums[2 * j + 1] = loss_sum, correct
            total += part["weight"] * float(loss_sum)
            if grad:
                if part["weight"] != 1.0:
                    d = d * self.dtype.type(part["weight"])
                dout[:, part["y_off"]:part["y_off"] + part["count"]] = d.reshape(n, -1)
        return total, sums, dout

    def _loss_positions(self):
        return int(np.prod(self._output_shape[:-1], dtype=np.int64))

    def _loss(self, out, target, grad):
        """(loss_sum, correct, dout) of outputs out (n,) + output_shape: the
        loss of the n P rows of K (P the positions of a sample), a sample's
        loss and correct count the means over its rows, the gradient that of
        the mean over all rows (Keras's sum_over_batch_size)."""
        if self._parts is not None:
            return self._loss_of_parts(out, target, grad)
        n, k, p = out.shape[0], self._output_shape[-1], self._loss_positions()
        rows = out.reshape(n * p, k)
        weights = None
        if self.loss_weighted:      # (n, K + 1): the targets, then the weight
            target, weights = target[:, :k], target[:, k]
        t = target.reshape(n * p) if self.loss_kind == "sparse_categorical_crossentropy" \
            else target.reshape(n * p, k)
        loss_sum, correct, d = loss_forward_backward(self.loss_kind, rows, t, self.from_logits,
                                                     scale_n=max(n * p, 1), grad=grad,
                                                     delta=self.loss_delta, weights=weights)
        if p > 1:
            loss_sum, correct = loss_sum / p, correct / p
        return loss_sum, correct, (d.reshape(out.shape) if d is not None else None)

    def _inputs(self, x, batch=True):
        """x as an array of self.dtype with shape (n,) + input_shape."""
        x = np.asarray(x, dtype=self.dtype)
        if x.ndim != len(self.input_shape) + 1 or x.shape[1:] != self.input_shape:
            raise ValueError(f"x must have shape (n,) + {self.input_shape}, got {x.shape}")
        if batch and not 1 <= x.shape[0] <= self._max_batch:
            raise ValueError(f"batch of {x.shape[0]} samples; expected 1 .. max_batch "
                             f"= {self._max_batch}")
        return x

    def _targets(self, y, n):
        """Labels (n,) for sparse losses, float targets (n, K) otherwise;
        with several outputs their packed float targets (n, width)."""
        if self._parts is not None:
            y = np.asarray(y)
            if y.shape != (n, self._part_width):
                raise ValueError(f"targets must have shape ({n}, {self._part_width}) (the "
                                 f"outputs' packed targets), got {y.shape}")
            if not np.all(np.isfinite(y)):
                raise ValueError("y: expected finite values")
            return y.astype(self.dtype)
        k = self._output_shape[-1]
        p = self._loss_positions()
        y = np.asarray(y)
        if len(self._output_shape) > 1:     # an image: targets of any shape of that size
            want = n * p * (1 if self.loss_kind == "sparse_categorical_crossentropy" else k)
            if y.ndim < 1 or y.shape[0] != n or y.size != want:
                raise ValueError(f"targets must have {want // max(n, 1)} values per sample "
                                 f"(the output's {p} positions), got shape {y.shape}")
            if self.loss_kind == "sparse_categorical_crossentropy":
                labels = y.reshape(n, p).astype(np.int64)
                if not np.array_equal(labels, y.reshape(n, p)) or \
                        (labels.size and (labels.min() < 0 or labels.max() >= k)):
                    raise ValueError(f"labels must be integers in [0, {k})")
                return labels
            return y.reshape((n,) + self._output_shape).astype(self.dtype)
        if self.loss_kind == "sparse_categorical_crossentropy":
            if y.shape == (n, 1):
                y = y.reshape(n)
            if y.shape != (n,):
                raise ValueError(f"labels must have shape ({n},) or ({n}, 1), got {y.shape}")
            labels = y.astype(np.int64)
            if not np.array_equal(labels, y) or (n and (labels.min() < 0 or labels.max() >= k)):
                raise ValueError(f"labels must be integers in [0, {k})")
            return labels
        if self.loss_weighted:      # the targets, then the sample's weight
            k += 1
        elif self.loss_kind != "categorical_crossentropy" and k == 1 and y.shape == (n,):
            y = y.reshape(n, 1)
        if y.shape != (n, k):
            raise ValueError(f"targets must have shape ({n}, {k}), got {y.shape}")
        return y.astype(self.dtype)

    # -- forward / backward -----------------------------------------------

    def _forward(self, x, training):
        t = self._training_forwards
        if training:
            self._training_forwards += 1
        outs = []
        for layer, inputs in zip(self.layers, self._reads):
            xs = [x if j < 0 else outs[j] for j in inputs]
            outs.append(layer.forward(xs if isinstance(layer, _Merge) else xs[0], training, t))
        self._last_out_shape = outs[-1].shape
        return outs[-1]

    def forward(self, x, training=False):
        """Output of n <= max_batch samples. Training uses batch statistics
        and dropout, and advances the training-forward counter."""
        return self._forward(self._inputs(x), bool(training))

    def backward(self, dy):
        """Backward of the last forward from dy (the output's Keras layout).
        Stores the parameter gradients; returns dx (the input's layout)."""
        if self._aug_floor:
            aug = self.layers[self._aug_floor - 1]
            what = "an input of several" if aug.kind == "input_slice" else \
                "an augmentation layer"
            raise ValueError(f"backward: the input's gradient is not computed through layer "
                             f"{aug.index} ({aug.kind}), {what} (they pass no gradient back)")
        return self._backward(dy)

    def _backward(self, dy):
        """backward without the layers below the augmentation layers (they
        have no weights; no input gradient: returns None where there are)."""
        if self._last_out_shape is None:
            raise ValueError("backward needs a forward first")
        dy = np.asarray(dy, dtype=self.dtype)
        if dy.shape != self._last_out_shape:
            raise ValueError(f"dy must have shape {self._last_out_shape}, got {dy.shape}")
        # each output's gradient summed over the layers that read it, in the
        # order the C engines add them (csrc/net/graph.c): readers last to
        # first, a layer's inputs in their order; none below the
        # augmentation layers (no weights there, no input gradient)
        # (a network of several inputs follows each path back from the
        # output, stopping at the input slices and augmentation layers, as
        # csrc/net/graph.c does)
        grads = [None] * len(self.layers) + [None]           # [-1]: the input's
        grads[-2] = dy
        sliced = self._sliced()
        from .reference_augment import AUGMENT_KINDS
        for i in range(len(self.layers) - 1, 0 if sliced else self._aug_floor - 1, -1):
            layer, inputs = self.layers[i], self._reads[i]
            if sliced and (grads[i] is None or isinstance(layer, _InputSlice) or
                           layer.kind in AUGMENT_KINDS):
                continue        # no gradient comes back to it (several inputs only)
            dxs = layer.backward(grads[i])
            if layer.frozen:
                layer.grads = []
            if not isinstance(layer, _Merge):
                dxs = [dxs]
            for j, dx in zip(inputs, dxs):
                grads[j] = dx if grads[j] is None else grads[j] + dx
        return None if self._aug_floor else grads[-1]

    def _penalty(self):
        return sum(layer.penalty() for layer in self.layers)

    # -- training ---------------------------------------------------------

    def compute_gradients(self, x, y):
        """Training forward, loss and backward, without an optimizer step.
        Returns (loss_sum, correct) over the batch."""
        self._check_loss_output()
        x = self._inputs(x)
        target = self._targets(y, x.shape[0])
        # under loss scaling an overflow is expected now and then (the step is skipped)
        with np.errstate(over="ignore", invalid="ignore") if self._loss_scaling else \
                contextlib.nullcontext():
            out = self._forward(x, True)
            loss_sum, correct, dout = self._loss(out, target, True)
            if self._loss_scaling:      # the backward from S times the loss's gradient
                dout = dout * self._scale.astype(dout.dtype)
            self._backward(dout)
            if self._loss_scaling:
                self._unscale()
        for layer in self.layers:
            layer.add_penalty_gradients()
        # Keras reports the batch's mean loss plus the penalty: n times it here
        return loss_sum + x.shape[0] * self._penalty(), correct

    def _unscale(self):
        """Dynamic loss scaling, after the backward: the trainable weights'
        gradients divided by S (in place), the step marked to be skipped
        where one is not finite (as the C engines' loss_unscale)."""
        scale = self._scale.astype(self.dtype)
        for layer in self.layers:
            if layer.frozen:
                continue
            for g in layer.grads:
                if not np.all(np.isfinite(g)):
                    self._skip = True
                g /= scale

    def _scale_update(self):
        """The scale after a step (cnn.h cnn_loss_scale_next): a skipped step
        halves it; dynamic_growth_steps finite ones in a row double it."""
        if self._skip:
            self._scale, self._scale_good = np.float32(self._scale * np.float32(0.5)), 0
        elif self._scale_good + 1 >= self._scale_growth:
            self._scale, self._scale_good = np.float32(self._scale * np.float32(2.0)), 0
        else:
            self._scale_good += 1
        self._skip = False

    @property
    def loss_scale(self):
        """The dynamic loss scale of the next step (None without scaling)."""
        return float(self._scale) if self._loss_scaling else None

    def get_loss_scale_state(self):
        return (float(self._scale), self._scale_good) if self._loss_scaling else None

    def set_loss_scale_state(self, state):
        if not self._loss_scaling:
            raise ValueError("state: this network was built without dynamic loss scaling")
        scale, good = state
        if not 0.0 < float(scale) < float("inf") or not 0 <= int(good) < self._scale_growth:
            raise ValueError(f"loss scale: expected a finite scale > 0 and 0 <= good steps < "
                             f"{self._scale_growth}, got {scale!r} and {good!r}")
        self._scale, self._scale_good = np.float32(scale), int(good)

    def apply_gradients(self):
        """One optimizer step with the stored gradients (under loss scaling
        none where they were not all finite: weights, slots and the step
        count stay; then the scale's update)."""
        if self._loss_scaling and self._skip:
            self._scale_update()
            return
        self._steps += 1
        self._apply_step()
        if self._loss_scaling:
            self._scale_update()

    def _apply_step(self):
        grads = [g for layer in self.layers for g in layer.grads]
        for (layer, j), g, slot in zip(self._params, grads, self._slots):
            p = layer.weights[j]
            kind = self.opt_kind
            if kind == "sgd":
                sgd_step(p, g, slot[0], **self.opt)
            elif kind == "rmsprop":
                extra = iter(slot[1:])
                mom = next(extra) if self.opt_built_momentum else None
                avg = next(extra) if self.opt["centered"] else None
                rmsprop_step(p, g, slot[0], mom, avg, **self.opt)
            elif kind == "adagrad":
                adagrad_step(p, g, slot[0], **self.opt)
            elif kind == "adadelta":
                adadelta_step(p, g, slot[0], slot[1], **self.opt)
            else:
                step = {"adam": adam_step, "adamax": adamax_step, "nadam": nadam_step,
                        "adamw": adamw_step}[kind]
                step(p, g, slot[0], slot[1], self._steps, **self.opt)

    def train_batch(self, x, y):
        """compute_gradients then apply_gradients. Returns (loss_sum, correct)."""
        result = self.compute_gradients(x, y)
        self.apply_gradients()
        return result

    # -- whole data sets, in chunks of max_batch ---------------------------

    def _samples(self, x, x_arg, x_index0):
        """x as _inputs gives it, refused as the C engines refuse it when a
        value is not finite in float32 (errors name x_arg, flat indices
        counted from x_index0)."""
        x_arr = np.asarray(x)
        bad = _first_bad(x_arr) if x_arr.dtype.kind in "biuf" else None
        if bad is not None:
            raise ValueError("%s: expected finite values, got %s at flat index %d"
                             % (x_arg, bad[1], x_index0 + bad[0]))
        return self._inputs(x_arr, batch=False)

    def evaluate(self, x, y, x_arg="x", x_index0=0):
        """(loss_sum, correct) summed over all n samples, inference mode."""
        self._check_loss_output()
        x = self._samples(x, x_arg, x_index0)
        target = self._targets(y, x.shape[0])
        loss_sum, correct = 0.0, 0.0
        for s in range(0, x.shape[0], self._max_batch):
            out = self._forward(x[s:s + self._max_batch], False)
            l, c, _ = self._loss(out, target[s:s + self._max_batch], False)
            loss_sum += l + out.shape[0] * self._penalty()
            correct += c
        return loss_sum, correct

    def predict(self, x, x_arg="x", x_index0=0):
        """Outputs (n,) + output_shape for any n, inference mode."""
        x = self._samples(x, x_arg, x_index0)
        outs = [self._forward(x[s:s + self._max_batch], False)
                for s in range(0, x.shape[0], self._max_batch)]
        if not outs:
            return np.zeros((0,) + self._output_shape, self.dtype)
        return np.concatenate(outs, axis=0)

    # -- resident training data, as the C engines keep it for fit ---------

    def set_data(self, x, y, x_arg="x", x_index0=0):
        """Keeps the training set (checked like train_batch's arguments)."""
        self._check_loss_output()
        x = self._samples(x, x_arg, x_index0)
        self._data = (x, self._targets(y, x.shape[0]))
        self._order = None

    def set_validation(self, x, y, x_arg="x", x_index0=0):
        """Keeps validation data for evaluate_validation (None, None drops it)."""
        if x is None and y is None:
            self._validation = None
            return
        self._check_loss_output()
        x = self._samples(x, x_arg, x_index0)
        self._validation = (x, y)

    def evaluate_validation(self):
        """evaluate over the data of set_validation."""
        if getattr(self, "_validation", None) is None:
            raise ValueError("evaluate_validation needs set_validation first")
        return self.evaluate(*self._validation)

    def set_order(self, order):
        """An epoch's order: len(x) indices into the data."""
        if getattr(self, "_data", None) is None:
            raise ValueError("set_order needs set_data first")
        order = np.asarray(order)
        n = self._data[0].shape[0]
        if order.shape != (n,) or order.dtype.kind not in "iu":
            raise ValueError(f"order: expected {n} integer indices, got {order.dtype} {order.shape}")
        if n and (order.min() < 0 or order.max() >= n):
            raise ValueError(f"order: expected indices in [0, {n})")
        self._order = order.astype(np.int64)

    def train_range(self, start, count, batch):
        """Trains on order[start:start+count] in steps of `batch` samples."""
        if getattr(self, "_order", None) is None:
            raise ValueError("train_range needs set_data and set_order first")
        if not 1 <= batch <= self._max_batch or start < 0 or count < 1 \
                or start + count > len(self._order):
            raise ValueError(f"train_range: bad range start {start} count {count} batch {batch}")
        x, t = self._data
        sums = getattr(self, "_run_sums", [0.0, 0.0])
        for at in range(start, start + count, batch):
            idx = self._order[at:min(start + count, at + batch)]
            loss_sum, correct = self.train_batch(x[idx], t[idx])
            sums = [sums[0] + loss_sum, sums[1] + correct]
        self._run_sums = sums

    def read_sums(self, reset=True):
        """(loss_sum, correct) accumulated by train_range since the last reset."""
        sums = tuple(getattr(self, "_run_sums", [0.0, 0.0]))
        if reset:
            self._run_sums = [0.0, 0.0]
        return sums

    # -- optimizer state, as the C engines hand it out ---------------------

    def _slot_count(self):
        return self._n_slots

    @property
    def opt_built_momentum(self):
        """RMSprop: whether the net was built with momentum (keeps its slot)."""
        return self.opt_kind == "rmsprop" and self._n_slots - bool(self.opt["centered"]) == 2

    def set_optimizer(self, optimizer):
        """The optimizer's hyperparameters from the next step on, as the C
        engines' set_optimizer: the same kind; momentum only where the net
        was built with it (a velocity)."""
        kind = optimizer.get("kind")
        if kind != self.opt_kind:
            raise ValueError(f"optimizer: this network was built for {self.opt_kind}, got "
                             f"{kind!r} (a new kind of optimizer needs a new network)")
        opt = {k: optimizer.get(k, d) for k, d in OPTIMIZER_DEFAULTS[kind].items()}
        _check_optimizer(kind, opt)
        if kind == "sgd" and opt["momentum"] and not self._with_velocity:
            raise ValueError("sgd momentum: this network was built without momentum (it keeps "
                             "no velocity), got momentum %r" % (opt["momentum"],))
        if kind == "rmsprop" and opt["momentum"] and not self.opt_built_momentum:
            raise ValueError("rmsprop momentum: this network was built without momentum (it "
                             "keeps no momentum slot), got momentum %r" % (opt["momentum"],))
        if kind == "rmsprop" and bool(opt["centered"]) != bool(self.opt["centered"]):
            raise ValueError("rmsprop centered: this network was built with centered=%r, got "
                             "centered=%r (a new network is needed)"
                             % (bool(self.opt["centered"]), bool(opt["centered"])))
        self.opt = opt

    def get_optimizer_state(self):
        """{'steps', 'training_forwards', 'slots'}: per trainable weight its
        optimizer arrays in Keras's variable order (Adam [m, v], SGD with
        momentum [velocity], plain SGD [], RMSprop [velocity, momentum?,
        average_gradient?], Adagrad [accumulator], ...)."""
        n = self._slot_count()
        state = {"steps": self._steps, "training_forwards": self._training_forwards,
                 "slots": [[a.copy() for a in slot[:n]] for slot in self._slots]}
        if self._loss_scaling:
            state["loss_scale"] = self.get_loss_scale_state()
        return state

    def set_optimizer_state(self, state):
        """Sets what get_optimizer_state gave; checks everything first."""
        n = self._slot_count()
        slots = list(state["slots"])
        if len(slots) != len(self._slots):
            raise ValueError(f"state['slots']: expected {len(self._slots)} entries, "
                             f"got {len(slots)}")
        new = []
        for t, (given, mine) in enumerate(zip(slots, self._slots)):
            given = [np.asarray(a, dtype=self.dtype) for a in given]
            if len(given) != n or any(a.shape != m.shape for a, m in zip(given, mine)):
                raise ValueError(f"state['slots'][{t}]: expected {n} arrays of shape "
                                 f"{mine[0].shape}")
            new.append(given)
        steps, forwards = int(state["steps"]), int(state["training_forwards"])
        if steps < 0 or forwards < 0:
            raise ValueError("state: counters must be >= 0")
        for given, mine in zip(new, self._slots):
            for a, m in zip(given, mine):
                m[...] = a
        self._steps, self._training_forwards = steps, forwards
        if state.get("loss_scale") is not None and self._loss_scaling:
            self.set_loss_scale_state(state["loss_scale"])

    # -- weights ----------------------------------------------------------

    def get_weights(self):
        """Copies of every weight in Keras order and layout."""
        return [w.copy() for layer in self.layers for w in layer.weights]

    def set_weights(self, weights):
        """Sets every weight; all shapes are checked before anything changes."""
        targets = [w for layer in self.layers for w in layer.weights]
        weights = list(weights)
        if len(weights) != len(targets):
            raise ValueError(f"expected {len(targets)} arrays, got {len(weights)}")
        new = [np.asarray(w, dtype=self.dtype) for w in weights]
        for i, (w, t) in enumerate(zip(new, targets)):
            if w.shape != t.shape:
                raise ValueError(f"weight {i}: expected shape {t.shape}, got {w.shape}")
        for w, t in zip(new, targets):
            t[...] = w                                               # copies into the net's arrays

    def get_gradients(self):
        """Copies of the gradients of the trainable weights after the last
        backward (zeros before any), in get_weights order."""
        return [g.copy() for layer in self.layers for g in layer.grads]

    def __repr__(self):
        kinds = ", ".join(layer.kind for layer in self.layers)
        return (f"NumpyNet([{kinds}], input_shape={self.input_shape}, "
                f"output_shape={self._output_shape}, dtype={self.dtype.name})")
