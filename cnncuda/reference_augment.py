"""reference_augment.py: the NumPy reference of the augmentation layers
(docs/semantics.md "Augmentation layers"; csrc/augment.h is the C form).

Images are NHWC here. Each function takes the layer's key for this training
forward (``rng_key(layer_key, t)``) and the number of the batch's first row
in the whole batch (``row0``); sample i draws ``uniform(key_t, 2 (row0 + i))``
and ``uniform(key_t, 2 (row0 + i) + 1)``. Every float32 operation is one
NumPy operation on float32 values, so the results are the engines' bits
(a rotation's cosine and sine are computed in double and rounded, as there).
The geometry functions (``affine_matrix``, ``affine_transform``) are also
what the tests compare with Keras's own transforms for a fixed draw.
"""
import numpy as np

from .reference import uniform

__all__ = ["FILL_MODES", "INTERPOLATIONS", "draws", "draw_values", "random_flip",
           "affine_matrix", "affine_transform", "random_affine", "random_contrast",
           "crop_offsets", "random_crop"]

FILL_MODES = ("reflect", "constant", "nearest", "wrap")
INTERPOLATIONS = ("bilinear", "nearest")
_F = np.float32


def draws(key_t, n, row0=0):
    """(n, 2) float32: the two draws of rows row0 .. row0 + n - 1."""
    rows = np.arange(row0, row0 + n, dtype=np.uint64)
    counters = np.stack([2 * rows, 2 * rows + np.uint64(1)], axis=1)
    return uniform(key_t, counters)


def draw_values(u, low, high):
    """u (hi - lo) + lo in float32 (jax's uniform), per column of u."""
    low, high = _F(low), _F(high)
    return (u * (high - low)).astype(_F) + low


def random_flip(x, key_t, flip_h, flip_v, training=True, row0=0):
    """RandomFlip: sample i flipped on the mode's axes where its first draw
    is <= 0.5 (Keras's test; 'horizontal_and_vertical' flips both at once)."""
    if not training:
        return x.copy()
    flip = draws(key_t, len(x), row0)[:, 0] <= _F(0.5)
    y = x.copy()
    if flip_h:
        y[flip] = y[flip][:, :, ::-1]
    if flip_v:
        y[flip] = y[flip][:, ::-1]
    return y


def affine_matrix(kind, values, h, w):
    """Keras's first six transform numbers (a0, a1, a2, b0, b1, b2) in
    float32 for one sample's drawn values (v0 the height's, v1 the width's):
    'rotation' (v0 degrees), 'zoom' (v0 = zy, v1 = zx), 'translation' (v0,
    v1 fractions of the height and width)."""
    fh, fw = _F(h), _F(w)
    one = _F(1)
    if kind == "rotation":
        rad = _F(values[0]) * _F(np.pi / 180.0)
        co, si = _F(np.cos(np.float64(rad))), _F(np.sin(np.float64(rad)))
        cx, cy = _F(0.5) * (fw - one), _F(0.5) * (fh - one)
        return np.array([co, -si, (cx - cx * co) - cy * -si,
                         si, co, (cy - cx * si) - cy * co], _F)
    if kind == "zoom":
        zy, zx = _F(values[0]), _F(values[1])
        return np.array([zx, 0, ((fw - one) / _F(2)) * (one - zx),
                         0, zy, ((fh - one) / _F(2)) * (one - zy)], _F)
    if kind == "translation":
        ty, tx = _F(values[0]) * fh, _F(values[1]) * fw
        return np.array([1, 0, -tx, 0, 1, -ty], _F)
    raise ValueError("kind: expected 'rotation', 'zoom' or 'translation', got %r" % (kind,))


def _fix(index, size, fill):
    """Indices outside [0, size) as fill_mode maps them (jax's fixers)."""
    if fill == "reflect":
        k = np.mod(index, 2 * size)
        return np.where(k < size, k, 2 * size - 1 - k)
    if fill == "nearest":
        return np.clip(index, 0, size - 1)
    if fill == "wrap":
        return np.mod(index, size)
    return index


def _round_away(v):
    """Rounded half away from zero (roundf, jax's lax.round), exactly."""
    v = v.astype(np.float64)
    t = np.trunc(v)
    return (t + np.where(np.abs(v - t) >= 0.5, np.sign(v), 0)).astype(np.int64)


def _pixels(img, iy, ix, fill, fill_value):
    """img (h, w, c) at integer (iy, ix) arrays, (..., c)."""
    h, w = img.shape[:2]
    iy, ix = _fix(iy, h, fill), _fix(ix, w, fill)
    inside = (iy >= 0) & (iy < h) & (ix >= 0) & (ix < w)
    v = img[np.clip(iy, 0, h - 1), np.clip(ix, 0, w - 1)]
    return np.where(inside[..., None], v, img.dtype.type(fill_value))


def affine_transform(img, m, fill="reflect", interpolation="bilinear", fill_value=0.0):
    """One image (h, w, c) resampled through m (six numbers, float32):
    output (r, s) reads row (r m4 + s m3) + m5, column (r m1 + s m0) + m2
    (jax's affine_transform with map_coordinates), each step in float32."""
    h, w = img.shape[:2]
    m = np.asarray(m, _F)
    r = np.arange(h, dtype=_F)[:, None]
    s = np.arange(w, dtype=_F)[None, :]
    sy = (r * m[4] + s * m[3]) + m[5]
    sx = (r * m[1] + s * m[0]) + m[2]
    if interpolation == "nearest":
        iy, ix = _round_away(sy), _round_away(sx)
        return _pixels(img, iy, ix, fill, fill_value).astype(img.dtype)
    fy, fx = np.floor(sy), np.floor(sx)
    wy1, wx1 = sy - fy, sx - fx
    wy0, wx0 = _F(1) - wy1, _F(1) - wx1
    y0, x0 = fy.astype(np.int64), fx.astype(np.int64)
    dt = img.dtype
    acc = (wy0 * wx0)[..., None].astype(dt) * _pixels(img, y0, x0, fill, fill_value)
    acc = acc + (wy0 * wx1)[..., None].astype(dt) * _pixels(img, y0, x0 + 1, fill, fill_value)
    acc = acc + (wy1 * wx0)[..., None].astype(dt) * _pixels(img, y0 + 1, x0, fill, fill_value)
    acc = acc + (wy1 * wx1)[..., None].astype(dt) * _pixels(img, y0 + 1, x0 + 1, fill, fill_value)
    return acc


def random_affine(x, key_t, kind, low, high, same_zoom=False, fill="reflect",
                  interpolation="bilinear", fill_value=0.0, training=True, row0=0):
    """RandomRotation, RandomZoom, RandomTranslation: each sample through its
    drawn affine_matrix. low, high: the draws' ranges (height, width)."""
    if not training:
        return x.copy()
    n, h, w, _ = x.shape
    v = draw_values(draws(key_t, n, row0), low, high)
    if kind == "zoom" and same_zoom:
        v[:, 1] = v[:, 0]
    y = np.empty_like(x)
    for i in range(n):
        y[i] = affine_transform(x[i], affine_matrix(kind, v[i], h, w), fill, interpolation,
                                fill_value)
    return y


def random_contrast(x, key_t, low, high, value_range=(0, 255), training=True, row0=0):
    """RandomContrast: factor f = u0 (high - low) + low per sample; per
    channel mean m of the sample (the sum in double, rounded to float32 after
    the division); clip((x - m) f + m) to value_range."""
    if not training:
        return x.copy()
    n, h, w, _ = x.shape
    f = draw_values(draws(key_t, n, row0), (low, low), (high, high))[:, 0]
    dt = x.dtype
    mean = (x.astype(np.float64).sum(axis=(1, 2), keepdims=True) / (h * w)).astype(_F)
    if dt == np.float64:  # the float64 reference: the same formula without rounding
        mean = x.mean(axis=(1, 2), keepdims=True)
    y = (x - mean.astype(dt)) * f.astype(dt)[:, None, None, None] + mean.astype(dt)
    return np.clip(y, dt.type(value_range[0]), dt.type(value_range[1]))


def crop_offsets(key_t, n, h, w, oh, ow, training=True, row0=0):
    """(n, 2) int offsets: (int)(u (h - oh + 1)) (at most h - oh) per axis in
    training, the centre ((h - oh) // 2, (w - ow) // 2) at inference."""
    if not training:
        return np.tile(np.array([(h - oh) // 2, (w - ow) // 2]), (n, 1))
    u = draws(key_t, n, row0)
    oy = np.minimum((u[:, 0] * _F(h - oh + 1)).astype(np.int64), h - oh)
    ox = np.minimum((u[:, 1] * _F(w - ow + 1)).astype(np.int64), w - ow)
    return np.stack([oy, ox], axis=1)


def random_crop(x, key_t, oh, ow, training=True, row0=0):
    """RandomCrop: each sample's (oh, ow) window at crop_offsets."""
    n, h, w, c = x.shape
    off = crop_offsets(key_t, n, h, w, oh, ow, training, row0)
    return np.stack([x[i, oy:oy + oh, ox:ox + ow] for i, (oy, ox) in enumerate(off)]) \
        if n else np.empty((0, oh, ow, c), x.dtype)


AUGMENT_KINDS = ("random_flip", "random_rotation", "random_zoom", "random_translation",
                 "random_contrast", "random_crop")
_AFFINE = {"random_rotation": "rotation", "random_zoom": "zoom",
           "random_translation": "translation"}
_FLIP_MODES = {"horizontal": (True, False), "vertical": (False, True),
               "horizontal_and_vertical": (True, True)}


def make_layer(base, index, spec, in_shape, net_seed, after_weights):
    """The NumpyNet layer of augmentation spec `spec` (cnncuda/engine.py's
    keys), a subclass of reference._Layer `base`; the same checks as the C
    core's (csrc/net/augment.c)."""
    from .reference import rng_key
    kind = spec["kind"]
    if len(in_shape) != 3:
        raise ValueError(f"layer {index} ({kind}) expects an image input (H, W, C), "
                         f"got {tuple(in_shape)}")
    if after_weights:
        raise ValueError(f"layer {index} ({kind}) follows a layer with weights: augmentation "
                         "layers pass no gradient back, so they must come before every layer "
                         "with weights (put them first)")

    class _Augment(base):
        def forward(self, x, training, t):
            key_t = rng_key(self.layer_key, t) if training else None
            return self.op(x, key_t, training)

    layer = _Augment(index, in_shape)
    layer.kind = kind
    seed = spec.get("seed")
    layer.layer_key = rng_key(net_seed if seed is None else int(seed), 2 * index + 1)
    low = tuple(float(v) for v in spec.get("low", (0.0, 0.0)))
    high = tuple(float(v) for v in spec.get("high", (0.0, 0.0)))
    fill = spec.get("fill_mode", "reflect")
    interp = spec.get("interpolation", "bilinear")
    if fill not in FILL_MODES:
        raise ValueError(f"layers[{index}]['fill_mode']: expected one of {FILL_MODES}, got {fill!r}")
    if interp not in INTERPOLATIONS:
        raise ValueError(f"layers[{index}]['interpolation']: expected 'bilinear' or 'nearest', "
                         f"got {interp!r}")
    if not all(np.isfinite(low + high)) or low[0] > high[0] or low[1] > high[1]:
        raise ValueError(f"layer {index} ({kind}): factor range {low}..{high} must be finite "
                         "and ordered")
    fill_value = float(spec.get("fill_value", 0.0))
    if kind == "random_flip":
        mode = spec.get("mode", "horizontal_and_vertical")
        if mode not in _FLIP_MODES:
            raise ValueError(f"layers[{index}]['mode']: expected 'horizontal', 'vertical' or "
                             f"'horizontal_and_vertical', got {mode!r}")
        fh, fv = _FLIP_MODES[mode]
        layer.op = lambda x, k, tr: random_flip(x, k, fh, fv, tr)
    elif kind in _AFFINE:
        same = bool(spec.get("same_zoom", False))
        layer.op = lambda x, k, tr: random_affine(x, k, _AFFINE[kind], low, high, same, fill,
                                                  interp, fill_value, tr)
    elif kind == "random_contrast":
        vr = tuple(float(v) for v in spec.get("value_range", (0.0, 255.0)))
        if not vr[0] < vr[1]:
            raise ValueError(f"layer {index} ({kind}): value_range must be (low, high) with "
                             f"low < high, got {vr}")
        layer.op = lambda x, k, tr: random_contrast(x, k, low[0], high[0], vr, tr)
    else:
        size = spec.get("size")
        oh, ow = (int(size), int(size)) if np.isscalar(size) else (int(size[0]), int(size[1]))
        h, w = in_shape[:2]
        if not (1 <= oh <= h and 1 <= ow <= w):
            raise ValueError(f"layer {index} ({kind}): the crop {oh}x{ow} must fit the "
                             f"{h}x{w} input")
        layer.out_shape = (oh, ow, in_shape[2])
        layer.op = lambda x, k, tr: random_crop(x, k, oh, ow, tr)
    return layer
