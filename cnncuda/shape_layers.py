"""The shape and image layers, with Keras 3's argument names, defaults,
output shapes and configs: Rescaling, Reshape, ZeroPadding2D, Cropping2D,
UpSampling2D and SpatialDropout2D (cnncuda.layers exports them).

Each becomes one engine layer (cnncuda/engine.py: rescaling, reshape,
zero_padding2d, cropping2d, upsampling2d, spatial_dropout2d) that every
engine runs (csrc/net/shape_steps.c; docs/semantics.md, "Shape and image
layers"). Reshape gives Keras's element order, the flat order of NHWC
tensors, although the engines keep images NCHW inside. A Keras shape of two
axes (A, B) is the engine's image (1, A, B), as the model gives the engines
channel-less inputs.

What the engines cannot run is refused, naming the argument: interpolations
other than 'nearest' and 'bilinear',
data_format='channels_first', SpatialDropout2D's own seed (masks come from
the model's seed, as Dropout's).
"""
import numbers

from .checks import choice, int_pair, nonnegative_int, number_in, shape_str
from .layers import Layer, _only

__all__ = ["Rescaling", "Reshape", "ZeroPadding2D", "Cropping2D", "UpSampling2D",
           "SpatialDropout2D", "SHAPE_LAYER_CLASSES"]


def _engine_shape(shape):
    """The engine's shape of a Keras shape without the batch axis."""
    return (1,) + tuple(shape) if len(shape) == 2 else tuple(shape)


def _scale(value, arg):
    """A finite number as a float, or a sequence of them (one per channel:
    a list, tuple or 1-D array) as a list of floats."""
    if isinstance(value, (list, tuple)) or getattr(value, "ndim", 0):
        items = list(value) if isinstance(value, (list, tuple)) else None
        if items is None and getattr(value, "ndim", 0) == 1:
            items = [v.item() if hasattr(v, "item") else v for v in value]
        if not items or not all(isinstance(v, numbers.Real) and not isinstance(v, bool)
                                for v in items):
            raise ValueError("%s: expected a number or a 1-D sequence of numbers (one per "
                             "channel), got %r" % (arg, value))
        return [number_in(v, arg, -float("inf"), float("inf")) for v in items]
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError("%s: expected a number or a sequence of numbers, got %r" % (arg, value))
    return number_in(value, arg, -float("inf"), float("inf"))


def _data_format(value):
    _only(value, "data_format", (None, "channels_last"), "images are channels-last")


class Rescaling(Layer):
    """y = x * scale + offset (the product rounded in float32 before the sum,
    as Keras computes it): ``Rescaling(1. / 255)`` maps pixels to [0, 1].
    scale and offset are numbers or, as Keras's, sequences of one value per
    channel (the last axis); a sequence of one value stands for every
    channel."""

    prefix = "rescaling"

    def __init__(self, scale, offset=0.0, **kwargs):
        self.scale = _scale(scale, "scale")
        self.offset = _scale(offset, "offset")
        super().__init__(**kwargs)

    def _arguments(self):
        return {"scale": self.scale, "offset": self.offset}

    def _per_channel(self, channels):
        """(scales, offsets) as lists of `channels` floats, or None for numbers."""
        if not isinstance(self.scale, list) and not isinstance(self.offset, list):
            return None
        out = []
        for arg, value in (("scale", self.scale), ("offset", self.offset)):
            values = value if isinstance(value, list) else [value]
            if len(values) not in (1, channels):
                raise ValueError('Layer "%s": %s: expected 1 value or one per channel of the '
                                 "input's last axis (%d), got %d"
                                 % (self.name, arg, channels, len(values)))
            out.append(values * channels if len(values) == 1 else list(values))
        return tuple(out)

    def compute_output_shape(self, input_shape):
        self._per_channel(input_shape[-1])
        return tuple(input_shape)

    def engine_layers(self):
        per_channel = self._per_channel(self.input_shape[-1])
        if per_channel is None:
            return [{"kind": "rescaling", "scale": self.scale, "offset": self.offset}]
        return [{"kind": "rescaling", "scale": per_channel[0], "offset": per_channel[1]}]

    @staticmethod
    def _keras_arguments(config):
        return {"scale": config["scale"], "offset": config.get("offset", 0.0)}


class Reshape(Layer):
    """The values of each sample in a new shape, in Keras's (row-major, NHWC)
    order; one entry of target_shape may be -1 (worked out from the input).
    Targets of 1, 2 or 3 axes."""

    prefix = "reshape"

    def __init__(self, target_shape, **kwargs):
        if isinstance(target_shape, numbers.Integral) and not isinstance(target_shape, bool):
            target_shape = (target_shape,)
        if not isinstance(target_shape, (tuple, list)) or not target_shape or not all(
                isinstance(d, numbers.Integral) and not isinstance(d, bool) and
                (d >= 1 or d == -1) for d in target_shape):
            raise ValueError("target_shape: expected a tuple of positive ints (one may be -1), "
                             "got %r" % (target_shape,))
        if list(target_shape).count(-1) > 1:
            raise ValueError("target_shape: expected at most one -1, got %r"
                             % (tuple(target_shape),))
        if len(target_shape) > 3:
            raise ValueError("target_shape: expected 1, 2 or 3 axes (the engines' tensors are "
                             "(batch, features) or (batch, height, width, channels)), got %r"
                             % (tuple(target_shape),))
        self.target_shape = tuple(int(d) for d in target_shape)
        super().__init__(**kwargs)

    def _arguments(self):
        return {"target_shape": list(self.target_shape)}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["target_shape"] = tuple(config["target_shape"])
        return cls(**config)

    def compute_output_shape(self, input_shape):
        size = 1
        for d in input_shape:
            size *= d
        known = 1
        for d in self.target_shape:
            known *= d if d != -1 else 1
        shape = self.target_shape
        if -1 in shape and size % known == 0:
            shape = tuple(size // known if d == -1 else d for d in shape)
        total = 1
        for d in shape:
            total *= d
        if -1 in shape or total != size or min(shape) < 1:
            raise ValueError("The total size of the tensor must be unchanged. Received: "
                             "input_shape=%s, target_shape=%s (layer \"%s\")"
                             % (tuple(input_shape), self.target_shape, self.name))
        return shape

    def engine_layers(self):
        return [{"kind": "reshape",
                 "shape": _engine_shape(self.compute_output_shape(self.input_shape[1:]))}]

    @staticmethod
    def _keras_arguments(config):
        return {"target_shape": tuple(config["target_shape"])}


def _sides(value, arg):
    """Keras's int, (rows, columns) or ((top, bottom), (left, right)) as
    ((top, bottom), (left, right)) of ints >= 0."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = ((value, value), (value, value))
    elif (isinstance(value, (tuple, list)) and len(value) == 2 and
          all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in value)):
        value = ((value[0], value[0]), (value[1], value[1]))
    if (not isinstance(value, (tuple, list)) or len(value) != 2 or
            not all(isinstance(p, (tuple, list)) and len(p) == 2 for p in value)):
        raise ValueError("%s: expected an int, a tuple of 2 ints or a tuple of 2 tuples of 2 "
                         "ints, got %r" % (arg, value))
    return tuple(tuple(nonnegative_int(v, arg) for v in pair) for pair in value)


class _Sides2D(Layer):
    """ZeroPadding2D and Cropping2D: rows at the top and bottom, columns at
    the left and right, added (zeros) or removed."""

    arg = None
    kind = None
    sign = 1

    def __init__(self, value, data_format=None, **kwargs):
        self.sides = _sides(value, self.arg)
        _data_format(data_format)
        super().__init__(**kwargs)

    def _arguments(self):
        return {self.arg: [list(p) for p in self.sides]}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get(cls.arg), list):
            config[cls.arg] = tuple(tuple(p) if isinstance(p, list) else p
                                    for p in config[cls.arg])
        return cls(**config)

    def compute_output_shape(self, input_shape):
        self._needs_image(input_shape)
        h, w, c = input_shape
        (top, bottom), (left, right) = self.sides
        oh, ow = h + self.sign * (top + bottom), w + self.sign * (left + right)
        if oh < 1 or ow < 1:
            raise ValueError('Layer "%s": %s %s leaves no pixel of its input: expected the rows '
                             "(%d) below the height and the columns (%d) below the width, got "
                             "input shape %s" % (self.name, self.arg, self.sides, top + bottom,
                                                 left + right,
                                                 shape_str((None,) + tuple(input_shape))))
        return (oh, ow, c)

    def engine_layers(self):
        return [{"kind": self.kind, self.arg: self.sides}]

    @classmethod
    def _keras_arguments(cls, config):
        _data_format(config.get("data_format"))
        value = config.get(cls.arg, ((1, 1), (1, 1)) if cls.sign == 1 else ((0, 0), (0, 0)))
        return {cls.arg: _sides(value, cls.arg)}


class ZeroPadding2D(_Sides2D):
    """Rows and columns of zeros around images: padding an int, (rows,
    columns) or ((top, bottom), (left, right)); default 1 on every side."""

    prefix = "zero_padding2d"
    arg = "padding"
    kind = "zero_padding2d"
    sign = 1

    def __init__(self, padding=(1, 1), data_format=None, **kwargs):
        super().__init__(padding, data_format, **kwargs)


class Cropping2D(_Sides2D):
    """Rows and columns removed from images: cropping an int, (rows,
    columns) or ((top, bottom), (left, right)); default none."""

    prefix = "cropping2d"
    arg = "cropping"
    kind = "cropping2d"
    sign = -1

    def __init__(self, cropping=((0, 0), (0, 0)), data_format=None, **kwargs):
        super().__init__(cropping, data_format, **kwargs)


class UpSampling2D(Layer):
    """Images size[0] x size[1] times larger: each pixel repeated
    (interpolation 'nearest') or mixed from its neighbours ('bilinear', as
    Keras: half-pixel centres, edges clamped); Keras's other interpolations
    are refused."""

    prefix = "up_sampling2d"

    def __init__(self, size=(2, 2), data_format=None, interpolation="nearest", **kwargs):
        self.size = int_pair(size, "size")
        _data_format(data_format)
        name = choice(interpolation, "interpolation",
                      ("nearest", "bilinear", "bicubic", "lanczos3", "lanczos5", "area"))
        _only(name, "interpolation", ("nearest", "bilinear"), "the engines' interpolations")
        self.interpolation = name
        super().__init__(**kwargs)

    def _arguments(self):
        return {"size": list(self.size), "interpolation": self.interpolation}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("size"), list):
            config["size"] = tuple(config["size"])
        return cls(**config)

    def compute_output_shape(self, input_shape):
        self._needs_image(input_shape)
        h, w, c = input_shape
        return (h * self.size[0], w * self.size[1], c)

    def engine_layers(self):
        return [{"kind": "upsampling2d", "size": self.size, "interpolation": self.interpolation}]

    @staticmethod
    def _keras_arguments(config):
        _data_format(config.get("data_format"))
        return {"size": tuple(config.get("size", (2, 2))),
                "interpolation": config.get("interpolation", "nearest")}


class SpatialDropout2D(Layer):
    """Dropout of whole channels: while training, each channel of each
    sample is zeroed with probability rate, the others scaled by
    1 / (1 - rate); at inference the identity. Masks come from the model's
    seed (Sequential(seed=...)), on Dropout's stream."""

    prefix = "spatial_dropout2d"

    def __init__(self, rate, data_format=None, seed=None, **kwargs):
        self.rate = number_in(rate, "rate", 0.0, 1.0, high_open=True)
        _data_format(data_format)
        _only(seed, "seed", (None,), "dropout masks come from the model's seed: "
                                     "Sequential(seed=...)")
        super().__init__(**kwargs)

    def _arguments(self):
        return {"rate": self.rate}

    def get_config(self):
        config = super().get_config()
        config.pop("trainable")     # Keras 3's SpatialDropout2D config has none
        return config

    def compute_output_shape(self, input_shape):
        self._needs_image(input_shape)
        return tuple(input_shape)

    def engine_layers(self):
        return [{"kind": "spatial_dropout2d", "rate": self.rate}]

    @staticmethod
    def _keras_arguments(config):
        _data_format(config.get("data_format"))
        return {"rate": config["rate"]}


SHAPE_LAYER_CLASSES = {cls.__name__: cls for cls in (Rescaling, Reshape, ZeroPadding2D,
                                                     Cropping2D, UpSampling2D, SpatialDropout2D)}


def keras_config(layer):
    """The Keras config entries of a shape layer beyond name, trainable and
    dtype (cnncuda/keras_files.py)."""
    name = type(layer).__name__
    if name == "Rescaling":
        return {"scale": layer.scale, "offset": layer.offset}
    if name == "Reshape":
        return {"target_shape": list(layer.target_shape)}
    if name in ("ZeroPadding2D", "Cropping2D"):
        return {layer.arg: [list(p) for p in layer.sides], "data_format": "channels_last"}
    if name == "UpSampling2D":
        return {"size": list(layer.size), "data_format": "channels_last",
                "interpolation": layer.interpolation}
    if name == "SpatialDropout2D":
        return {"rate": layer.rate, "seed": None, "data_format": "channels_last"}
    raise ValueError("layer %s: %s is not a shape layer" % (layer.name, name))
