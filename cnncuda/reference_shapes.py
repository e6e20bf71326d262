"""reference_shapes.py: the NumPy reference of the shape and image layers
(Rescaling, Reshape, ZeroPadding2D, Cropping2D, UpSampling2D,
SpatialDropout2D), in Keras's layouts as the rest of cnncuda/reference.py,
and their layers of the `numpy` engine (`SHAPE_LAYERS`, used by
NumpyNet). docs/semantics.md ("Shape and image layers") is the contract.

Shapes are the engine's: images (H, W, C), features (F,); a Keras shape
(A, B) is the image (1, A, B), as models give the engine channel-less
inputs.
"""
import numpy as np

from .reference import _dropout_scale, _Layer, _pair, _require, rng_key, uniform

__all__ = ["rescale_forward", "rescale_backward", "reshape_forward", "pad2d",
           "upsample_forward", "upsample_backward",
           "bilinear_weights", "upsample_bilinear_forward", "upsample_bilinear_backward", "spatial_dropout_mask",
           "spatial_dropout_forward", "spatial_dropout_backward", "SHAPE_LAYERS"]


def _f32(value, dtype):
    """A float32 constant or per-channel array (as the engines take it) in dtype."""
    return np.asarray(value, np.float32).astype(dtype)


def rescale_forward(x, scale, offset=0.0):
    """x * scale + offset, scale and offset float32 numbers or per-channel
    arrays (over the last axis, Keras's); in float32 the product is rounded
    before the sum (as Keras's and the engines')."""
    return x * _f32(scale, x.dtype) + _f32(offset, x.dtype)


def rescale_backward(dy, scale):
    return dy * _f32(scale, dy.dtype)


def reshape_forward(x, shape):
    """x (N, ...) to (N,) + shape, in the flat (Keras's) order."""
    return x.reshape((x.shape[0],) + tuple(shape)).copy()


def pad2d(x, top, bottom, left, right):
    """Images (N, H, W, C): rows and columns added (> 0, zeros) or removed
    (< 0) at each side."""
    n, h, w, c = x.shape
    oh, ow = h + top + bottom, w + left + right
    y = np.zeros((n, oh, ow, c), x.dtype)
    r0, r1 = max(top, 0), min(h + top, oh)       # output rows that read x
    s0, s1 = max(left, 0), min(w + left, ow)
    if r0 < r1 and s0 < s1:
        y[:, r0:r1, s0:s1, :] = x[:, r0 - top:r1 - top, s0 - left:s1 - left, :]
    return y


def upsample_forward(x, size):
    """Nearest upsampling of (N, H, W, C) by size (sh, sw)."""
    sh, sw = size
    return np.repeat(np.repeat(x, sh, axis=1), sw, axis=2)


def upsample_backward(dy, size):
    """dx (N, H, W, C): each the sum of its (sh, sw) block of dy."""
    sh, sw = size
    n, oh, ow, c = dy.shape
    return dy.reshape(n, oh // sh, sh, ow // sw, sw, c).sum(axis=(2, 4))


def bilinear_weights(size, s, dtype):
    """(size * s, size) weights of bilinear upsampling along one axis: output
    pixel o reads src = (o + 0.5) / s - 0.5 clipped to [0, size - 1] (Keras's
    half-pixel centres, edges clamped), from floor(src) with weight 1 - f and
    the next pixel (the last one at the edge) with weight f."""
    src = np.clip((np.arange(size * s, dtype=np.float64) + 0.5) / s - 0.5, 0, size - 1)
    i0 = np.floor(src).astype(np.int64)
    i1 = np.minimum(i0 + 1, size - 1)
    f = src - i0
    w = np.zeros((size * s, size), np.float64)
    np.add.at(w, (np.arange(size * s), i0), 1 - f)
    np.add.at(w, (np.arange(size * s), i1), f)
    return w.astype(dtype)


def upsample_bilinear_forward(x, size):
    """Bilinear upsampling of (N, H, W, C) by size (sh, sw), as Keras's."""
    n, h, w, c = x.shape
    wr, ws = bilinear_weights(h, size[0], x.dtype), bilinear_weights(w, size[1], x.dtype)
    return np.einsum("rh,nhwc,sw->nrsc", wr, x, ws)


def upsample_bilinear_backward(dy, size):
    n, oh, ow, c = dy.shape
    h, w = oh // size[0], ow // size[1]
    wr, ws = bilinear_weights(h, size[0], dy.dtype), bilinear_weights(w, size[1], dy.dtype)
    return np.einsum("rh,nrsc,sw->nhwc", wr, dy, ws)


def spatial_dropout_mask(shape, rate, key):
    """Keep mask of images `shape` (N, H, W, C), broadcastable (N, 1, 1, C):
    channel ch of row i is kept when uniform(key, i*C + ch) >= rate."""
    n, c = shape[0], shape[-1]
    u = uniform(key, np.arange(n * c, dtype=np.uint64))
    return (u >= np.float32(rate)).reshape(n, 1, 1, c)


def spatial_dropout_forward(x, rate, key):
    """Training-mode SpatialDropout2D of images x under `key` (the layer's key
    for this training forward): whole channels zeroed per sample, the others
    scaled by the float32 1 / (1 - rate). Rate 0 passes x through."""
    if rate == 0:
        return x.copy()
    keep = spatial_dropout_mask(x.shape, rate, key)
    return np.where(keep, x * _dropout_scale(rate, x.dtype), x.dtype.type(0))


def spatial_dropout_backward(dy, rate, key):
    return spatial_dropout_forward(dy, rate, key)


# ---------------------------------------------------------------------------
# The numpy engine's layers
# ---------------------------------------------------------------------------

def _pads(spec, key, index):
    value = _require(spec, key, index)
    try:
        (top, bottom), (left, right) = value
        pads = tuple(int(v) for v in (top, bottom, left, right))
    except (TypeError, ValueError):
        raise TypeError(f"layer {index}: {key!r} must be ((top, bottom), (left, right)), "
                        f"got {value!r}") from None
    if min(pads) < 0:
        raise ValueError(f"layer {index}: {key!r} must be >= 0, got {value!r}")
    return pads


class _Rescaling(_Layer):
    kind = "rescaling"

    def __init__(self, index, spec, in_shape):
        super().__init__(index, in_shape)
        # numbers, or per channel (the last axis) where either is a sequence
        scale, offset = spec.get("scale", 1.0), spec.get("offset", 0.0)
        self.scale = np.asarray(scale, np.float64).astype(np.float32)
        self.offset = np.asarray(offset, np.float64).astype(np.float32)
        sizes = {a.size for a in (self.scale, self.offset) if a.ndim}
        if any(a.ndim > 1 for a in (self.scale, self.offset)) or len(sizes) > 1:
            raise ValueError(f"layer {index} (rescaling): per-channel scale and offset must be "
                             f"sequences of one length, got {scale!r} and {offset!r}")
        if sizes and sizes != {self.in_shape[-1]}:
            raise ValueError(f"layer {index} (rescaling): {sizes.pop()} scales and offsets per "
                             f"channel for an input of {self.in_shape[-1]} channels")
        if not (np.all(np.isfinite(self.scale)) and np.all(np.isfinite(self.offset))):
            raise ValueError(f"layer {index} (rescaling): scale and offset must be finite, "
                             f"got {scale!r} and {offset!r}")

    def forward(self, x, training, t):
        return rescale_forward(x, self.scale, self.offset)

    def backward(self, dy):
        return rescale_backward(dy, self.scale)


class _Reshape(_Layer):
    kind = "reshape"

    def __init__(self, index, spec, in_shape):
        super().__init__(index, in_shape)
        shape = tuple(int(d) for d in _require(spec, "shape", index))
        if len(shape) not in (1, 3) or min(shape) < 1:
            raise ValueError(f"layer {index} (reshape): target shape must be (H, W, C) or "
                             f"(F,) of positive sizes, got {shape}")
        if int(np.prod(shape)) != int(np.prod(self.in_shape)):
            raise ValueError(f"layer {index} (reshape): the input's {int(np.prod(self.in_shape))}"
                             f" values cannot become {shape}")
        self.out_shape = shape

    def forward(self, x, training, t):
        return reshape_forward(x, self.out_shape)

    def backward(self, dy):
        return reshape_forward(dy, self.in_shape)


class _Pad2D(_Layer):
    """ZeroPadding2D (sign 1) and Cropping2D (sign -1)."""

    def __init__(self, index, spec, in_shape, kind):
        super().__init__(index, in_shape)
        self.kind = kind
        self._need_image()
        sign = 1 if kind == "zero_padding2d" else -1
        key = "padding" if sign == 1 else "cropping"
        self.pads = tuple(sign * p for p in _pads(spec, key, index))
        h, w, c = self.in_shape
        top, bottom, left, right = self.pads
        self.out_shape = (h + top + bottom, w + left + right, c)
        if min(self.out_shape[:2]) < 1:
            raise ValueError(f"layer {index} ({kind}): {spec[key]!r} leaves no pixel of the "
                             f"{h}x{w} input")

    def forward(self, x, training, t):
        return pad2d(x, *self.pads)

    def backward(self, dy):
        return pad2d(dy, *(-p for p in self.pads))


class _UpSampling2D(_Layer):
    kind = "upsampling2d"

    def __init__(self, index, spec, in_shape):
        super().__init__(index, in_shape)
        self._need_image()
        self.interpolation = spec.get("interpolation", "nearest")
        if self.interpolation not in ("nearest", "bilinear"):
            raise ValueError(f"layer {index} (upsampling2d): interpolation must be 'nearest' or "
                             f"'bilinear', got {self.interpolation!r}")
        size = spec.get("size")      # absent or None: (2, 2), as the C binding
        self.size = _pair((2, 2) if size is None else size, "size")
        h, w, c = self.in_shape
        self.out_shape = (h * self.size[0], w * self.size[1], c)

    def forward(self, x, training, t):
        if self.interpolation == "bilinear":
            return upsample_bilinear_forward(x, self.size)
        return upsample_forward(x, self.size)

    def backward(self, dy):
        if self.interpolation == "bilinear":
            return upsample_bilinear_backward(dy, self.size)
        return upsample_backward(dy, self.size)


class _SpatialDropout2D(_Layer):
    kind = "spatial_dropout2d"

    def __init__(self, index, spec, in_shape, seed):
        super().__init__(index, in_shape)
        self._need_image()
        self.rate = float(_require(spec, "rate", index))
        if not 0.0 <= self.rate < 1.0:
            raise ValueError(f"layer {index}: spatial dropout rate must be in [0, 1), "
                             f"got {self.rate}")
        self.layer_key = rng_key(seed, 2 * index + 1)     # Dropout's stream

    def forward(self, x, training, t):
        self.key = rng_key(self.layer_key, t) if training else None
        return spatial_dropout_forward(x, self.rate, self.key) if training else x.copy()

    def backward(self, dy):
        if self.key is None:
            return dy.copy()
        return spatial_dropout_backward(dy, self.rate, self.key)


def make_shape_layer(i, spec, shape, seed):
    """The numpy engine's layer of kind spec['kind'], or None for another kind."""
    kind = spec.get("kind")
    if kind == "rescaling":
        return _Rescaling(i, spec, shape)
    if kind == "reshape":
        return _Reshape(i, spec, shape)
    if kind in ("zero_padding2d", "cropping2d"):
        return _Pad2D(i, spec, shape, kind)
    if kind == "upsampling2d":
        return _UpSampling2D(i, spec, shape)
    if kind == "spatial_dropout2d":
        return _SpatialDropout2D(i, spec, shape, seed)
    return None


SHAPE_LAYERS = ("rescaling", "reshape", "zero_padding2d", "cropping2d", "upsampling2d",
                "spatial_dropout2d")
