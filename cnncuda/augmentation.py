"""Keras 3's image augmentation layers: RandomFlip, RandomRotation,
RandomZoom, RandomTranslation, RandomContrast, RandomCrop.

Active in training steps only (fit, train_on_batch); predict, evaluate and
inference forwards pass the images through (RandomCrop: the centre crop, so
that the layers after it get the shape they were built for). They run on the
engine, on each training batch, with the random stream of docs/semantics.md
"Augmentation layers": the layer's ``seed``, or the model's seed when it has
none, and the number of the training step, so the same seed gives the same
augmented batches on every engine. They pass no gradient back, so a model
takes them only before its first layer with weights (where Keras models have
them); a model that puts one later is refused when it is built.

Arguments, their forms (a float f for (-f, f), or a (low, high) pair, as
fractions of the image's size or of a full turn) and defaults are Keras 3's.
"""
import numbers

from .checks import choice, nonnegative_int, positive_int
from .layers import Layer, _only

__all__ = ["RandomFlip", "RandomRotation", "RandomZoom", "RandomTranslation", "RandomContrast",
           "RandomCrop"]

FILL_MODES = ("reflect", "wrap", "constant", "nearest")
INTERPOLATIONS = ("nearest", "bilinear")


def _factor(value, arg, low, high, low_open=False, clip_low=None):
    """Keras's factor: a number f -> (-|f|, |f|) (the low end no lower than
    clip_low where given), or a pair (sorted); each number in [low, high]
    (the low end open where asked). Returns (lower, upper)."""
    def number(v):
        if not isinstance(v, numbers.Real) or isinstance(v, bool):
            raise TypeError("%s: expected a number or a pair of numbers, got %r" % (arg, value))
        v = float(v)
        if not (low < v if low_open else low <= v) or not v <= high:
            raise ValueError("%s: expected numbers in %s%g, %g], got %r"
                             % (arg, "(" if low_open else "[", low, high, value))
        return v
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError("%s: expected a number or a pair of numbers, got %r" % (arg, value))
        lower, upper = sorted(number(v) for v in value)
        return lower, upper
    f = abs(number(value))
    lower = -f if clip_low is None else max(-f, clip_low)
    return lower, f


def _seed(seed):
    return None if seed is None else nonnegative_int(seed, "seed")


def _data_format(data_format):
    _only(data_format, "data_format", (None, "channels_last"), "images are channels-last")


def _as_given(value):
    return list(value) if isinstance(value, (tuple, list)) else value


class _Augmentation(Layer):
    """Shape-preserving on images; no weights; one engine layer."""

    augmentation = True
    kind = None

    def compute_output_shape(self, input_shape):
        self._needs_image(input_shape)
        return tuple(input_shape)

    def _engine(self):
        return {}

    def engine_layers(self):
        d = {"kind": self.kind, "seed": self.seed}
        d.update(self._engine())
        return [d]


class RandomFlip(_Augmentation):
    """Flips each image with probability 1/2: left-right ('horizontal'),
    top-bottom ('vertical'), or both at once ('horizontal_and_vertical',
    Keras's default, which flips a sample on both axes with one draw)."""

    prefix = "random_flip"
    kind = "random_flip"

    def __init__(self, mode="horizontal_and_vertical", seed=None, data_format=None, **kwargs):
        self.mode = choice(mode, "mode", ("horizontal", "vertical", "horizontal_and_vertical"),
                           lower=False)
        self.seed = _seed(seed)
        _data_format(data_format)
        super().__init__(**kwargs)

    def _arguments(self):
        return {"mode": self.mode, "seed": self.seed}

    def _engine(self):
        return {"mode": self.mode}


class _Affine(_Augmentation):
    """The resampling layers' fill_mode, interpolation and fill_value."""

    def _resampling(self, fill_mode, interpolation, fill_value):
        self.fill_mode = choice(fill_mode, "fill_mode", FILL_MODES, lower=False)
        self.interpolation = choice(interpolation, "interpolation", INTERPOLATIONS, lower=False)
        if not isinstance(fill_value, numbers.Real) or isinstance(fill_value, bool):
            raise TypeError("fill_value: expected a number, got %r" % (fill_value,))
        self.fill_value = float(fill_value)

    def _engine(self):
        return {"fill_mode": self.fill_mode, "interpolation": self.interpolation,
                "fill_value": self.fill_value}


class RandomRotation(_Affine):
    """Rotates each image by a random angle of factor (a fraction of a full
    turn: 0.1 is up to 36 degrees either way) about its centre."""

    prefix = "random_rotation"
    kind = "random_rotation"

    def __init__(self, factor, fill_mode="reflect", interpolation="bilinear", seed=None,
                 fill_value=0.0, data_format=None, **kwargs):
        self.factor = _factor(factor, "factor", -1.0, 1.0, clip_low=-1.0)
        self._resampling(fill_mode, interpolation, fill_value)
        self.seed = _seed(seed)
        _data_format(data_format)
        super().__init__(**kwargs)

    def _arguments(self):
        return {"factor": list(self.factor), "fill_mode": self.fill_mode,
                "fill_value": self.fill_value, "interpolation": self.interpolation,
                "seed": self.seed}

    def _engine(self):
        d = super()._engine()
        d.update(low=(self.factor[0] * 360.0, 0.0), high=(self.factor[1] * 360.0, 0.0))
        return d


class RandomZoom(_Affine):
    """Zooms each image about its centre by 1 + a random height_factor
    (negative: in, positive: out) and width_factor (None: the height's, which
    keeps the aspect ratio)."""

    prefix = "random_zoom"
    kind = "random_zoom"

    def __init__(self, height_factor, width_factor=None, fill_mode="reflect",
                 interpolation="bilinear", seed=None, fill_value=0.0, data_format=None,
                 **kwargs):
        self.height_factor = _as_given(height_factor)
        self.width_factor = _as_given(width_factor)
        self._height = _factor(height_factor, "height_factor", -1.0, 1.0, low_open=True)
        self._width = None if width_factor is None else \
            _factor(width_factor, "width_factor", -1.0, 1.0, low_open=True)
        self._resampling(fill_mode, interpolation, fill_value)
        self.seed = _seed(seed)
        _data_format(data_format)
        super().__init__(**kwargs)

    def _arguments(self):
        return {"height_factor": self.height_factor, "width_factor": self.width_factor,
                "fill_mode": self.fill_mode, "interpolation": self.interpolation,
                "seed": self.seed, "fill_value": self.fill_value}

    def _engine(self):
        d = super()._engine()
        width = self._width or self._height
        d.update(low=(1.0 + self._height[0], 1.0 + width[0]),
                 high=(1.0 + self._height[1], 1.0 + width[1]),
                 same_zoom=self._width is None)
        return d


class RandomTranslation(_Affine):
    """Shifts each image by random fractions of its height (height_factor)
    and width (width_factor)."""

    prefix = "random_translation"
    kind = "random_translation"

    def __init__(self, height_factor, width_factor, fill_mode="reflect",
                 interpolation="bilinear", seed=None, fill_value=0.0, data_format=None,
                 **kwargs):
        self.height_factor = _as_given(height_factor)
        self.width_factor = _as_given(width_factor)
        self._height = _factor(height_factor, "height_factor", -1.0, 1.0)
        self._width = _factor(width_factor, "width_factor", -1.0, 1.0)
        self._resampling(fill_mode, interpolation, fill_value)
        self.seed = _seed(seed)
        _data_format(data_format)
        super().__init__(**kwargs)

    def _arguments(self):
        return {"height_factor": self.height_factor, "width_factor": self.width_factor,
                "fill_mode": self.fill_mode, "interpolation": self.interpolation,
                "seed": self.seed, "fill_value": self.fill_value}

    def _engine(self):
        d = super()._engine()
        d.update(low=(self._height[0], self._width[0]), high=(self._height[1], self._width[1]))
        return d


class RandomContrast(_Augmentation):
    """Scales each image's channels about their means by a random factor in
    [1 - lower, 1 + upper] (factor: f for (0, f), as Keras 3 reads it, or a
    pair), then clips to value_range."""

    prefix = "random_contrast"
    kind = "random_contrast"

    def __init__(self, factor, value_range=(0, 255), seed=None, data_format=None, **kwargs):
        self.factor = _factor(factor, "factor", 0.0, 1.0, clip_low=0.0)
        if (not isinstance(value_range, (tuple, list)) or len(value_range) != 2 or
                not all(isinstance(v, numbers.Real) and not isinstance(v, bool)
                        for v in value_range) or not value_range[0] < value_range[1]):
            raise ValueError("value_range: expected (low, high) with low < high, got %r"
                             % (value_range,))
        self.value_range = (value_range[0], value_range[1])
        self.seed = _seed(seed)
        _data_format(data_format)
        super().__init__(**kwargs)

    def _arguments(self):
        return {"factor": list(self.factor), "value_range": list(self.value_range),
                "seed": self.seed}

    def _engine(self):
        return {"low": (1.0 - self.factor[0], 0.0), "high": (1.0 + self.factor[1], 0.0),
                "value_range": tuple(float(v) for v in self.value_range)}


class RandomCrop(_Augmentation):
    """A random height x width window of each image while training; the
    centre window at inference (Keras 3 returns the uncropped image there,
    which the layers after it could not take)."""

    prefix = "random_crop"
    kind = "random_crop"

    def __init__(self, height, width, seed=None, data_format=None, **kwargs):
        self.height = positive_int(height, "height")
        self.width = positive_int(width, "width")
        self.seed = _seed(seed)
        _data_format(data_format)
        super().__init__(**kwargs)

    def _arguments(self):
        return {"height": self.height, "width": self.width, "seed": self.seed}

    def compute_output_shape(self, input_shape):
        self._needs_image(input_shape)
        h, w, c = input_shape
        if self.height > h or self.width > w:
            raise ValueError('Layer "%s": the crop %dx%d does not fit its input: expected '
                             "height >= %d and width >= %d, got input shape (None, %d, %d, %d)"
                             % (self.name, self.height, self.width, self.height, self.width,
                                h, w, c))
        return (self.height, self.width, c)

    def _engine(self):
        return {"size": (self.height, self.width)}
