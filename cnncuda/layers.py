"""Keras layers, with Keras's argument names and defaults.

Each layer knows its output shape for an input shape (checked the way Keras
reports a mismatch: layer name, what it expects, what it got), its weights'
shapes in Keras's layouts, and the engine layers it becomes (see
cnncuda.engine): ``Conv2D(32, 3, activation='relu')`` becomes a ``conv2d``
engine layer followed by an ``activation`` one.

Shapes here leave out the batch axis: an image input is (height, width,
channels), a feature input is (features,).

Weights take Keras's initializers (cnncuda.initializers: by name or
object) and regularizers (cnncuda.regularizers: l1, l2, l1_l2), and a
layer freezes with ``trainable=False`` (or ``layer.trainable = False``
later): the optimizer then skips its weights, and a frozen
BatchNormalization normalizes with its moving statistics in training too,
as Keras 3's.

Keras arguments that the engines cannot honour (``dilation_rate`` other than
1, ``data_format='channels_first'``, activity regularizers, constraints)
raise ValueError naming the argument rather than being ignored.
"""
import inspect
import math
import numbers
import warnings

from . import initializers, regularizers
from .checks import boolean, choice, int_pair, number_in, positive_int, shape_str
from .utils import unique_name

__all__ = ["Layer", "InputLayer", "Input", "Conv2D", "MaxPooling2D", "AveragePooling2D",
           "MaxPool2D", "AvgPool2D", "GlobalAveragePooling2D", "GlobalMaxPooling2D",
           "GlobalAvgPool2D", "GlobalMaxPool2D", "Flatten", "Dense", "Dropout",
           "BatchNormalization", "Activation", "ReLU", "LeakyReLU", "ELU", "PReLU", "Softmax",
           "Rescaling", "Reshape", "ZeroPadding2D", "Cropping2D", "UpSampling2D",
           "SpatialDropout2D", "RandomFlip", "RandomRotation", "RandomZoom", "RandomTranslation",
           "RandomContrast", "RandomCrop", "Add", "Concatenate", "ACTIVATIONS", "LAYER_CLASSES",
           "deserialize"]

# the activations by name (Keras 3's, with their defaults: elu alpha 1.0,
# leaky_relu negative_slope 0.2, gelu the erf form); swish is silu
ACTIVATIONS = ("linear", "relu", "sigmoid", "tanh", "softmax", "elu", "selu", "gelu", "silu",
               "swish", "softplus", "softsign", "hard_sigmoid", "leaky_relu", "relu6",
               "exponential", "mish")
_ENGINE_NAMES = {"silu": "swish"}  # the engines' name where it differs


# layers that may stand for an activation (``Dense(64, activation=LeakyReLU(0.2))``,
# as Keras allows any callable): those without weights
_ACTIVATION_LAYERS = ("ReLU", "LeakyReLU", "ELU", "Softmax", "Activation")


def activation_name(value, arg="activation"):
    """None, one of ACTIVATIONS, a function of that name (e.g.
    ``cnncuda.keras.activations.relu``), or an activation layer without
    weights (_ACTIVATION_LAYERS: the object, or its Keras config as a dict)
    -> a name (swish as Keras names it: silu), the layer, or None."""
    if value is None:
        return None
    if isinstance(value, Layer):
        if type(value).__name__ not in _ACTIVATION_LAYERS:
            raise ValueError("%s: expected a name, a function or a layer of %s, got a %s layer"
                             % (arg, ", ".join(_ACTIVATION_LAYERS), type(value).__name__))
        return value
    if isinstance(value, dict):
        return _activation_from_config(value, arg)
    if callable(value) and not isinstance(value, str):
        value = getattr(value, "__name__", repr(value))
    name = choice(value, arg, ACTIVATIONS)
    if name == "swish":
        name = "silu"
    return None if name == "linear" else name


def _activation_from_config(entry, arg):
    """A serialized activation: Keras's {"class_name": "function", "config":
    name} or an activation layer's {"class_name": "LeakyReLU", "config": {...}}."""
    class_name, config = entry.get("class_name"), entry.get("config")
    if class_name == "function" or isinstance(config, str):
        return activation_name(config, arg)
    if class_name not in _ACTIVATION_LAYERS or not isinstance(config, dict):
        raise ValueError("%s: expected a name, a function or a layer of %s, got %r"
                         % (arg, ", ".join(_ACTIVATION_LAYERS), entry))
    cls = LAYER_CLASSES[class_name]
    takes = inspect.signature(cls.__init__).parameters
    kwargs = {k: v for k, v in config.items() if k in takes and k not in ("self", "kwargs")}
    if config.get("name"):
        kwargs["name"] = config["name"]
    if config.get("dtype") is not None:
        kwargs["dtype"] = config["dtype"]
    return cls(**kwargs)


def _activation_config(activation):
    """How a config writes an activation: its name, or a layer as Keras
    serializes one."""
    if activation is None:
        return "linear"
    if isinstance(activation, str):
        return activation
    config = {"name": activation.name, "trainable": True,
              "dtype": {"module": "keras", "class_name": "DTypePolicy",
                        "config": {"name": "float32"}, "registered_name": None}}
    config.update(activation._arguments())
    return {"module": "keras.layers", "class_name": type(activation).__name__, "config": config,
            "registered_name": None}


def _activation_engine(activation):
    """The engine layers of an activation (a name, a layer or None)."""
    if activation is None or isinstance(activation, str):
        return _activation_dicts(activation)
    return activation.engine_layers()


def _activation_shape(activation, shape):
    """An activation layer's check of the shape it is applied to."""
    return shape if activation is None or isinstance(activation, str) else \
        activation.compute_output_shape(shape)


def _activation_dicts(name, **params):
    if name is None:
        return []
    return [dict({"kind": "activation", "activation": _ENGINE_NAMES.get(name, name)}, **params)]


def _only(value, arg, allowed, why):
    """Keras arguments whose other values the engines cannot run."""
    if value not in allowed:
        raise ValueError("%s: expected %s (%s), got %r"
                         % (arg, " or ".join(repr(a) for a in allowed), why, value))


def _weight_arguments(layer, kernel_initializer, bias_initializer, kernel_regularizer,
                      bias_regularizer, activity_regularizer, kernel_constraint,
                      bias_constraint):
    """Conv2D's and Dense's weight arguments: initializers and regularizers
    (by name or object), no activity regularizer, no constraints."""
    layer.kernel_initializer = initializers.get(kernel_initializer, "kernel_initializer")
    layer.bias_initializer = initializers.get(bias_initializer, "bias_initializer")
    layer.kernel_regularizer = regularizers.get(kernel_regularizer, "kernel_regularizer")
    layer.bias_regularizer = regularizers.get(bias_regularizer, "bias_regularizer")
    _only(activity_regularizer, "activity_regularizer", (None,),
          "activity regularizers are not supported; kernel_regularizer and bias_regularizer are")
    for arg, value in (("kernel_constraint", kernel_constraint),
                       ("bias_constraint", bias_constraint)):
        _only(value, arg, (None,), "constraints are not supported")


def _weight_config(layer):
    """Conv2D's and Dense's weight arguments in Keras's config form."""
    return {"kernel_initializer": initializers.serialize(layer.kernel_initializer),
            "bias_initializer": initializers.serialize(layer.bias_initializer),
            "kernel_regularizer": (None if layer.kernel_regularizer is None
                                   else regularizers.serialize(layer.kernel_regularizer)),
            "bias_regularizer": (None if layer.bias_regularizer is None
                                 else regularizers.serialize(layer.bias_regularizer))}


def _weight_engine_keys(layer):
    """Conv2D's and Dense's engine-layer keys for freezing and regularizers
    (only where they differ from the defaults)."""
    keys = {} if layer.trainable else {"trainable": False}
    for name, reg in (("kernel", layer.kernel_regularizer), ("bias", layer.bias_regularizer)):
        if reg is not None and (name == "kernel" or layer.use_bias):
            l1, l2 = reg.engine()
            if l1:
                keys[name + "_l1"] = l1
            if l2:
                keys[name + "_l2"] = l2
    return keys


class Layer:
    """Base class. Subclasses set ``prefix`` (the automatic name) and define
    ``_arguments`` (their Keras config), ``compute_output_shape``,
    ``engine_layers`` and, when they hold weights, ``weight_specs``."""

    prefix = "layer"

    def __init__(self, name=None, input_shape=None, batch_input_shape=None, batch_size=None,
                 dtype=None, trainable=True):
        if name is not None and (not isinstance(name, str) or not name):
            raise TypeError("name: expected a non-empty str, got %r" % (name,))
        if batch_input_shape is not None:
            if input_shape is not None:
                raise ValueError("input_shape: give input_shape or batch_input_shape, not both")
            if not isinstance(batch_input_shape, (tuple, list)) or len(batch_input_shape) < 2:
                raise TypeError("batch_input_shape: expected a tuple (batch, ...), got %r"
                                % (batch_input_shape,))
            input_shape = tuple(batch_input_shape)[1:]
        self._input_shape_arg = _check_input_shape(input_shape) if input_shape is not None else None
        from .mixed_precision import policy_of
        self._dtype_policy = policy_of(dtype)     # None: the global policy now, as Keras
        self._trainable = boolean(trainable, "trainable")
        self.name = name or unique_name(_default_prefix(self))
        self.input_shape = None     # (None, ...) once the model knows it
        self.output_shape = None
        self._model = None          # the first model it was put in
        self._holder = None         # the model whose network has its latest weights (models.py)
        self._call_shape = None     # the input shape of its calls on KerasTensors

    def __call__(self, inputs, *args, **kwargs):
        """The functional API: called on a KerasTensor (``keras.Input(...)``
        or another layer's output), returns its output's KerasTensor. A layer
        runs on data only inside a model."""
        from .symbolic import call_symbolic, is_symbolic
        if args:
            raise TypeError('layer "%s": expected the input tensor and keyword arguments, got '
                            "%d more positional arguments" % (self.name, len(args)))
        block = _block_of(self)
        if not is_symbolic(inputs):
            raise TypeError('layer "%s" was called on %s: cnncuda\'s layers run on data inside a '
                            "model; call them on keras.Input(...) tensors to build a functional "
                            "model (keras.Model(inputs, outputs)) or put them in a Sequential"
                            % (self.name, type(inputs).__name__))
        if block:
            return _call_block(self, inputs, kwargs)
        return call_symbolic(self, inputs, kwargs, 'layer "%s"' % self.name)

    def build(self, input_shape):
        """Keras's hook, called once before a block's call is traced (a
        block may make its layers here); cnncuda's layers need none."""

    def add_weight(self, *args, **kwargs):
        """Keras's way for a custom layer to make a weight: refused, since the
        engines run cnncuda's layers only (a custom layer's math in call has
        no engine form)."""
        raise NotImplementedError(
            "%s.add_weight: a custom layer with weights of its own cannot run on cnncuda's "
            "engines (they run cnncuda's built-in layers, and a layer class whose call only "
            "calls such layers); write %s from built-in layers (Dense, Conv2D, ...)"
            % (type(self).__name__, type(self).__name__))

    # -- what subclasses define -----------------------------------------------

    def _arguments(self):
        return {}

    def compute_output_shape(self, input_shape):
        """Output shape (no batch axis) for `input_shape`; raises ValueError."""
        return tuple(input_shape)

    def engine_layers(self):
        return []

    def weight_specs(self, input_shape):
        """[(name, shape, trainable)] in Keras's order, for `input_shape`."""
        return []

    def weight_initializers(self):
        """{weight name: initializer} of the layer's weights."""
        return {}

    # -- Keras's layer interface ---------------------------------------------

    @property
    def dtype_policy(self):
        """Keras's dtype policy (keras.mixed_precision): the layer's
        ``dtype=``, else the global policy when it was made. The engines
        run a model's layers in the model's policy (docs/semantics.md)."""
        from .mixed_precision import Policy
        return self.__dict__.get("_dtype_policy") or Policy("float32")

    @property
    def compute_dtype(self):
        return self.dtype_policy.compute_dtype

    @property
    def variable_dtype(self):
        return self.dtype_policy.variable_dtype

    @property
    def dtype(self):
        """The weights' dtype (Keras 3's layer.dtype: the variable dtype)."""
        return self.dtype_policy.variable_dtype

    @property
    def trainable(self):
        """Whether the optimizer updates the layer's weights (Keras's flag:
        ``layer.trainable = False`` freezes it from the next fit on)."""
        return self._trainable

    @trainable.setter
    def trainable(self, value):
        self._trainable = boolean(value, "trainable")

    @property
    def weights(self):
        """The layer's weights as Variables (cnncuda.variables), [] outside a
        built model."""
        traced = self.__dict__.get("_block_traced")
        if traced is not None:      # a block: the weights of the model it was traced into
            return traced.weights
        if self._model is None or self.input_shape is None:
            return []
        return [v for v in self._model.weights if v._layer is self]

    @property
    def trainable_weights(self):
        return [v for v in self.weights if v.trainable]

    @property
    def non_trainable_weights(self):
        return [v for v in self.weights if not v.trainable]

    def get_config(self):
        """The layer's arguments as Keras names them (JSON-friendly); the
        dtype policy where it is not 'float32' (as Keras serializes it)."""
        config = {"name": self.name, "trainable": self.trainable}
        if self.dtype_policy.name != "float32":
            config["dtype"] = {"module": "keras", "class_name": "DTypePolicy",
                               "config": self.dtype_policy.get_config(), "registered_name": None}
        config.update(self._arguments())
        if self._input_shape_arg is not None:
            config["input_shape"] = list(self._input_shape_arg)
        return config

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def count_params(self):
        """Parameters of the layer (needs a model that knows its input shape)."""
        if self.input_shape is None:
            raise ValueError('You tried to call `count_params` on layer "%s", but the layer '
                             "isn't built. Add it to a model with a known input shape." % self.name)
        traced = self.__dict__.get("_block_traced")
        if traced is not None:
            return traced.count_params()
        total = 0
        for _, shape, _ in self.weight_specs(self.input_shape[1:]):
            size = 1
            for d in shape:
                size *= d
            total += size
        return total

    def get_weights(self):
        """The layer's weights (Keras layouts), or [] outside a built model."""
        traced = self.__dict__.get("_block_traced")
        if traced is not None:
            return traced.get_weights()
        if self._model is None or self.input_shape is None:
            return []
        return self._model._layer_weights(self)

    def set_weights(self, weights):
        """Sets the layer's weights; shapes are checked before anything changes."""
        traced = self.__dict__.get("_block_traced")
        if traced is not None:
            traced.set_weights(weights)
            return
        if self._model is None or self.input_shape is None:
            raise ValueError('layer "%s": set_weights needs the layer in a model with a known '
                             "input shape" % self.name)
        self._model._set_layer_weights(self, weights)

    def _incompatible(self, input_shape, expected):
        return ValueError('Input 0 of layer "%s" is incompatible with the layer: expected %s, '
                          "found ndim=%d. Full shape received: %s"
                          % (self.name, expected, len(input_shape) + 1,
                             shape_str((None,) + tuple(input_shape))))

    def _needs_image(self, input_shape):
        if len(input_shape) != 3:
            raise self._incompatible(input_shape, "ndim=4 (batch, height, width, channels)")

    def __repr__(self):
        return "<%s name=%s>" % (type(self).__name__, self.name)


def _default_prefix(layer):
    """A layer's automatic name: its class's prefix; Keras's snake_case of
    the class name for a subclass of the user's ('ConvBlock': 'conv_block')."""
    if type(layer).__module__.split(".")[0] == "cnncuda":
        return layer.prefix
    from .subclassing import snake_case
    return snake_case(type(layer).__name__)


def _block_of(layer):
    """Whether `layer` is a block: a Layer subclass of the user's with a call."""
    from .subclassing import is_block
    return is_block(layer)


def _call_block(block, inputs, kwargs):
    """A block called on a KerasTensor: its traced model (subclassing.py) called on it."""
    from .subclassing import block_model
    if isinstance(inputs, (list, tuple)):
        raise ValueError('layer "%s" (%s): blocks take one input tensor, got a list of %d'
                         % (block.name, type(block).__name__, len(inputs)))
    return block_model(block, tuple(inputs.shape[1:]))(inputs, **kwargs)


def _check_input_shape(shape):
    if not isinstance(shape, (tuple, list)) or not shape or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in shape):
        raise ValueError("input_shape: expected a tuple of positive ints such as (32, 32, 3), "
                         "got %r" % (shape,))
    if len(shape) not in (1, 2, 3):
        raise ValueError("input_shape: expected (height, width, channels), (height, width) or "
                         "(features,), got %r" % (tuple(shape),))
    return tuple(int(d) for d in shape)


class InputLayer(Layer):
    """The model's input: ``InputLayer(input_shape=(28, 28, 1))``; usually
    written ``Input(shape=(28, 28, 1))`` or as ``input_shape=`` on the first
    layer. It adds no engine layer and is not listed in ``model.layers``."""

    prefix = "input_layer"

    def __init__(self, input_shape=None, name=None, **kwargs):
        if input_shape is None:
            raise ValueError("input_shape: expected a tuple such as (32, 32, 3), got None")
        super().__init__(name=name or unique_name("input_layer"), input_shape=input_shape,
                         **kwargs)
        self.input_shape = self.output_shape = (None,) + self._input_shape_arg


def Input(shape=None, batch_size=None, dtype=None, sparse=None, batch_shape=None, name=None,
          tensor=None, optional=False):
    """Keras's ``Input(shape=...)``: the KerasTensor a functional model starts
    from (cnncuda.symbolic), also usable as the first entry of a Sequential."""
    from .symbolic import KerasTensor
    _only(sparse, "sparse", (None, False), "inputs are dense arrays")
    _only(tensor, "tensor", (None,), "an Input is made from its shape")
    _only(optional, "optional", (False,), "every input is given")
    if batch_shape is not None:
        if shape is not None:
            raise ValueError("shape: give shape or batch_shape, not both")
        if not isinstance(batch_shape, (tuple, list)) or len(batch_shape) < 2:
            raise ValueError("batch_shape: expected a tuple (batch, ...), got %r" % (batch_shape,))
        shape = tuple(batch_shape)[1:]
    if isinstance(shape, int) and not isinstance(shape, bool):
        shape = (shape,)
    layer = InputLayer(input_shape=shape, name=name, batch_size=batch_size, dtype=dtype)
    return KerasTensor(layer._input_shape_arg, layer)


def _window_output(layer, input_shape, window, strides, padding, what):
    layer._needs_image(input_shape)
    h, w, c = input_shape
    out = []
    for size, k, s in ((h, window[0], strides[0]), (w, window[1], strides[1])):
        n = -(-size // s) if padding == "same" else (size - k) // s + 1
        if n < 1:
            raise ValueError('Layer "%s": %s %s does not fit its input with padding %r: '
                             "expected height and width >= %s, got input shape %s"
                             % (layer.name, what, tuple(window), padding, tuple(window),
                                shape_str((None,) + tuple(input_shape))))
        out.append(n)
    return out[0], out[1], c


class Conv2D(Layer):
    """2-D convolution over (height, width, channels) images, then the activation."""

    prefix = "conv2d"

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", data_format=None,
                 dilation_rate=(1, 1), groups=1, activation=None, use_bias=True,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, **kwargs):
        self.filters = positive_int(filters, "filters")
        self.kernel_size = int_pair(kernel_size, "kernel_size")
        self.strides = int_pair(strides, "strides")
        self.padding = choice(padding, "padding", ("valid", "same"))
        _only(data_format, "data_format", (None, "channels_last"), "images are channels-last")
        _only(int_pair(dilation_rate, "dilation_rate"), "dilation_rate", ((1, 1),),
              "dilated convolution is not supported")
        _only(groups, "groups", (1,), "grouped convolution is not supported")
        self.activation = activation_name(activation)
        self.use_bias = boolean(use_bias, "use_bias")
        _weight_arguments(self, kernel_initializer, bias_initializer, kernel_regularizer,
                          bias_regularizer, activity_regularizer, kernel_constraint,
                          bias_constraint)
        super().__init__(**kwargs)

    def _arguments(self):
        return dict({"filters": self.filters, "kernel_size": list(self.kernel_size),
                     "strides": list(self.strides), "padding": self.padding,
                     "activation": _activation_config(self.activation), "use_bias": self.use_bias},
                    **_weight_config(self))

    def compute_output_shape(self, input_shape):
        h, w, _ = _window_output(self, input_shape, self.kernel_size, self.strides,
                                 self.padding, "kernel_size")
        return _activation_shape(self.activation, (h, w, self.filters))

    def engine_layers(self):
        return [dict({"kind": "conv2d", "units": self.filters, "kernel": self.kernel_size,
                      "strides": self.strides, "padding": self.padding,
                      "use_bias": self.use_bias}, **_weight_engine_keys(self))] + \
            _activation_engine(self.activation)

    def weight_specs(self, input_shape):
        specs = [("kernel", self.kernel_size + (input_shape[-1], self.filters), self.trainable)]
        if self.use_bias:
            specs.append(("bias", (self.filters,), self.trainable))
        return specs

    def weight_initializers(self):
        return {"kernel": self.kernel_initializer, "bias": self.bias_initializer}


class _Pooling2D(Layer):
    kind = None

    def __init__(self, pool_size=(2, 2), strides=None, padding="valid", data_format=None,
                 **kwargs):
        self.pool_size = int_pair(pool_size, "pool_size")
        self.strides = self.pool_size if strides is None else int_pair(strides, "strides")
        self.padding = choice(padding, "padding", ("valid", "same"))
        _only(data_format, "data_format", (None, "channels_last"), "images are channels-last")
        super().__init__(**kwargs)

    def _arguments(self):
        return {"pool_size": list(self.pool_size), "strides": list(self.strides),
                "padding": self.padding}

    def compute_output_shape(self, input_shape):
        return _window_output(self, input_shape, self.pool_size, self.strides, self.padding,
                              "pool_size")

    def engine_layers(self):
        return [{"kind": self.kind, "kernel": self.pool_size, "strides": self.strides,
                 "padding": self.padding}]


class MaxPooling2D(_Pooling2D):
    """Max pooling; strides default to pool_size."""

    prefix = "max_pooling2d"
    kind = "maxpool"


class AveragePooling2D(_Pooling2D):
    """Average pooling; strides default to pool_size; 'same' windows divide by
    the in-image count."""

    prefix = "average_pooling2d"
    kind = "avgpool"


MaxPool2D = MaxPooling2D
AvgPool2D = AveragePooling2D


class _GlobalPooling2D(Layer):
    """The pooling of every position of each channel: the engine's pooling
    with one window the size of the image, then a Flatten unless keepdims."""

    kind = None

    def __init__(self, data_format=None, keepdims=False, **kwargs):
        _only(data_format, "data_format", (None, "channels_last"), "images are channels-last")
        self.keepdims = boolean(keepdims, "keepdims")
        super().__init__(**kwargs)

    def _arguments(self):
        return {"keepdims": self.keepdims}

    def compute_output_shape(self, input_shape):
        self._needs_image(input_shape)
        c = input_shape[2]
        return (1, 1, c) if self.keepdims else (c,)

    def engine_layers(self):
        h, w = self.input_shape[1:3]
        pool = {"kind": self.kind, "kernel": (h, w), "strides": (h, w), "padding": "valid"}
        return [pool] if self.keepdims else [pool, {"kind": "flatten"}]


class GlobalAveragePooling2D(_GlobalPooling2D):
    """The mean of each channel over the image: (h, w, c) -> (c,) (or (1, 1, c))."""

    prefix = "global_average_pooling2d"
    kind = "avgpool"


class GlobalMaxPooling2D(_GlobalPooling2D):
    """The largest value of each channel over the image: (h, w, c) -> (c,)."""

    prefix = "global_max_pooling2d"
    kind = "maxpool"


GlobalAvgPool2D = GlobalAveragePooling2D
GlobalMaxPool2D = GlobalMaxPooling2D


class Flatten(Layer):
    """(height, width, channels) -> (height * width * channels,), in Keras's order."""

    prefix = "flatten"

    def __init__(self, data_format=None, **kwargs):
        _only(data_format, "data_format", (None, "channels_last"), "images are channels-last")
        super().__init__(**kwargs)

    def compute_output_shape(self, input_shape):
        size = 1
        for d in input_shape:
            size *= d
        return (size,)

    def engine_layers(self):
        return [{"kind": "flatten"}]


class Dense(Layer):
    """Fully connected layer on (features,) inputs, then the activation."""

    prefix = "dense"

    def __init__(self, units, activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None,
                 activity_regularizer=None, kernel_constraint=None, bias_constraint=None,
                 **kwargs):
        self.units = positive_int(units, "units")
        self.activation = activation_name(activation)
        self.use_bias = boolean(use_bias, "use_bias")
        _weight_arguments(self, kernel_initializer, bias_initializer, kernel_regularizer,
                          bias_regularizer, activity_regularizer, kernel_constraint,
                          bias_constraint)
        super().__init__(**kwargs)

    def _arguments(self):
        return dict({"units": self.units, "activation": _activation_config(self.activation),
                     "use_bias": self.use_bias}, **_weight_config(self))

    def compute_output_shape(self, input_shape):
        if len(input_shape) != 1:
            raise ValueError('Input 0 of layer "%s" is incompatible with the layer: expected '
                             "ndim=2 (batch, features), found ndim=%d. Full shape received: %s. "
                             "Add a Flatten layer before it."
                             % (self.name, len(input_shape) + 1,
                                shape_str((None,) + tuple(input_shape))))
        return _activation_shape(self.activation, (self.units,))

    def engine_layers(self):
        return [dict({"kind": "dense", "units": self.units, "use_bias": self.use_bias},
                     **_weight_engine_keys(self))] + _activation_engine(self.activation)

    def weight_specs(self, input_shape):
        specs = [("kernel", (input_shape[0], self.units), self.trainable)]
        if self.use_bias:
            specs.append(("bias", (self.units,), self.trainable))
        return specs

    def weight_initializers(self):
        return {"kernel": self.kernel_initializer, "bias": self.bias_initializer}


class Dropout(Layer):
    """Inverted dropout while training; masks come from the model's seed."""

    prefix = "dropout"

    def __init__(self, rate, noise_shape=None, seed=None, **kwargs):
        self.rate = number_in(rate, "rate", 0.0, 1.0, high_open=True)
        _only(noise_shape, "noise_shape", (None,), "masks are drawn per element")
        _only(seed, "seed", (None,), "dropout masks come from the model's seed: "
                                     "Sequential(seed=...)")
        super().__init__(**kwargs)

    def _arguments(self):
        return {"rate": self.rate}

    def engine_layers(self):
        return [{"kind": "dropout", "rate": self.rate}]


class BatchNormalization(Layer):
    """Batch normalization over the last axis (channels), Keras's momentum
    0.99 and epsilon 1e-3; weights gamma, beta, moving_mean, moving_variance."""

    prefix = "batch_normalization"

    def __init__(self, axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True,
                 beta_initializer="zeros", gamma_initializer="ones",
                 moving_mean_initializer="zeros", moving_variance_initializer="ones", **kwargs):
        if axis not in (-1, 1, 3) or isinstance(axis, bool):
            raise ValueError("axis: expected -1 (the channels, last), got %r" % (axis,))
        self.axis = axis
        self.momentum = number_in(momentum, "momentum", 0.0, 1.0)
        self.epsilon = number_in(epsilon, "epsilon", 0.0, float("inf"), low_open=True)
        _only(center, "center", (True,), "beta is always used")
        _only(scale, "scale", (True,), "gamma is always used")
        self.beta_initializer = initializers.get(beta_initializer, "beta_initializer")
        self.gamma_initializer = initializers.get(gamma_initializer, "gamma_initializer")
        self.moving_mean_initializer = initializers.get(moving_mean_initializer,
                                                        "moving_mean_initializer")
        self.moving_variance_initializer = initializers.get(moving_variance_initializer,
                                                            "moving_variance_initializer")
        for arg in ("beta_regularizer", "gamma_regularizer", "beta_constraint",
                    "gamma_constraint"):
            _only(kwargs.pop(arg, None), arg, (None,), "not supported")
        super().__init__(**kwargs)

    def _arguments(self):
        return {"axis": self.axis, "momentum": self.momentum, "epsilon": self.epsilon,
                "beta_initializer": initializers.serialize(self.beta_initializer),
                "gamma_initializer": initializers.serialize(self.gamma_initializer),
                "moving_mean_initializer": initializers.serialize(self.moving_mean_initializer),
                "moving_variance_initializer":
                    initializers.serialize(self.moving_variance_initializer)}

    def compute_output_shape(self, input_shape):
        if self.axis != -1 and self.axis != len(input_shape):
            raise ValueError('Layer "%s": axis %d is not the last axis of input shape %s'
                             % (self.name, self.axis, shape_str((None,) + tuple(input_shape))))
        return tuple(input_shape)

    def engine_layers(self):
        frozen = {} if self.trainable else {"trainable": False}
        return [dict({"kind": "batchnorm", "momentum": self.momentum, "epsilon": self.epsilon},
                     **frozen)]

    def weight_specs(self, input_shape):
        c = (input_shape[-1],)
        return [("gamma", c, self.trainable), ("beta", c, self.trainable),
                ("moving_mean", c, False), ("moving_variance", c, False)]

    def weight_initializers(self):
        return {"gamma": self.gamma_initializer, "beta": self.beta_initializer,
                "moving_mean": self.moving_mean_initializer,
                "moving_variance": self.moving_variance_initializer}


class Activation(Layer):
    """An activation on its own, by name (ACTIVATIONS) or function."""

    prefix = "activation"

    def __init__(self, activation, **kwargs):
        self.activation = activation_name(activation)
        super().__init__(**kwargs)

    def _arguments(self):
        return {"activation": _activation_config(self.activation)}

    def compute_output_shape(self, input_shape):
        if self.activation == "softmax" and len(input_shape) != 1:
            raise ValueError('Layer "%s": softmax expects a (batch, features) input, got %s'
                             % (self.name, shape_str((None,) + tuple(input_shape))))
        return _activation_shape(self.activation, tuple(input_shape))

    def engine_layers(self):
        return _activation_engine(self.activation)


def _nonnegative(value, arg, layer):
    """A finite number >= 0, as Keras's activation layers require (their
    message: the layer and the value)."""
    if value is None or isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise (ValueError if value is None else TypeError)(
            "%s: %s expected a number >= 0, got %r" % (arg, layer, value))
    if not math.isfinite(value) or value < 0:
        raise ValueError("%s: %s expected a finite number >= 0, got %r" % (arg, layer, value))
    return float(value)


class ReLU(Layer):
    """Keras's ReLU layer: x above threshold (capped at max_value, None: no
    cap), negative_slope (x - threshold) at or below it."""

    prefix = "re_lu"

    def __init__(self, max_value=None, negative_slope=0.0, threshold=0.0, **kwargs):
        self.max_value = None if max_value is None else \
            _nonnegative(max_value, "max_value", "ReLU")
        self.negative_slope = _nonnegative(negative_slope, "negative_slope", "ReLU")
        self.threshold = _nonnegative(threshold, "threshold", "ReLU")
        super().__init__(**kwargs)

    def _arguments(self):
        return {"max_value": self.max_value, "negative_slope": self.negative_slope,
                "threshold": self.threshold}

    def engine_layers(self):
        """Keras's branches (activations.relu): the plain ReLU, leaky_relu,
        relu6, or the general form."""
        slope, cap, thr = self.negative_slope, self.max_value, self.threshold
        if cap is None and thr == 0:
            return _activation_dicts("leaky_relu", alpha=slope) if slope else \
                _activation_dicts("relu")
        if cap == 6 and thr == 0 and slope == 0:
            return _activation_dicts("relu6")
        return _activation_dicts("relu_general", alpha=slope, max_value=cap, threshold=thr)


class LeakyReLU(Layer):
    """x where x >= 0, else negative_slope x (Keras 3's default slope 0.3;
    its deprecated ``alpha`` is taken too)."""

    prefix = "leaky_re_lu"

    def __init__(self, negative_slope=0.3, **kwargs):
        if "alpha" in kwargs:
            negative_slope = kwargs.pop("alpha")
            warnings.warn("Argument `alpha` is deprecated. Use `negative_slope` instead.")
        self.negative_slope = _nonnegative(negative_slope, "negative_slope", "LeakyReLU")
        super().__init__(**kwargs)

    def _arguments(self):
        return {"negative_slope": self.negative_slope}

    def engine_layers(self):
        return _activation_dicts("leaky_relu", alpha=self.negative_slope)


class ELU(Layer):
    """x where x > 0, else alpha (exp(x) - 1) (Keras's default alpha 1.0)."""

    prefix = "elu"

    def __init__(self, alpha=1.0, **kwargs):
        if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or \
                not math.isfinite(alpha):
            raise TypeError("alpha: ELU expected a finite number, got %r" % (alpha,))
        self.alpha = float(alpha)
        super().__init__(**kwargs)

    def _arguments(self):
        return {"alpha": self.alpha}

    def engine_layers(self):
        return _activation_dicts("elu", alpha=self.alpha)


_ZEROS_INITIALIZER = {"module": "keras.initializers", "class_name": "Zeros", "config": {},
                      "registered_name": None}


class PReLU(Layer):
    """x where x > 0, else alpha x, with alpha learned: one per element of
    the input (without the batch), or shared along ``shared_axes`` (Keras's
    axes: 1, 2, 3 of (height, width, channels) images). alpha starts at
    zero (Keras's default initializer, the only one here); it is a
    trainable weight like a kernel."""

    prefix = "p_re_lu"

    def __init__(self, alpha_initializer="Zeros", alpha_regularizer=None, alpha_constraint=None,
                 shared_axes=None, **kwargs):
        init = alpha_initializer
        if isinstance(init, dict):
            init = init.get("class_name")
        if not isinstance(init, str) or init.lower() != "zeros":
            raise ValueError("alpha_initializer: expected 'zeros' (alpha starts at zero, "
                             "Keras's default; others are not supported), got %r"
                             % (alpha_initializer,))
        _only(alpha_regularizer, "alpha_regularizer", (None,), "not supported")
        _only(alpha_constraint, "alpha_constraint", (None,), "not supported")
        if shared_axes is not None:
            axes = list(shared_axes) if isinstance(shared_axes, (list, tuple)) else [shared_axes]
            for a in axes:
                if isinstance(a, bool) or not isinstance(a, numbers.Integral) or not 1 <= a <= 3:
                    raise ValueError("shared_axes: expected axes 1, 2 or 3 of the input "
                                     "(height, width, channels; 1 for features), got %r"
                                     % (shared_axes,))
            shared_axes = sorted(set(int(a) for a in axes))
        self.shared_axes = shared_axes
        super().__init__(**kwargs)

    def _arguments(self):
        return {"alpha_initializer": dict(_ZEROS_INITIALIZER), "alpha_regularizer": None,
                "alpha_constraint": None, "shared_axes": self.shared_axes}

    def compute_output_shape(self, input_shape):
        if len(input_shape) == 2:
            raise ValueError('Layer "%s": PReLU on a (height, width) input without a channel '
                             "axis is not supported, got %s: give the input a channel axis or "
                             "add a Flatten before it"
                             % (self.name, shape_str((None,) + tuple(input_shape))))
        for a in self.shared_axes or ():
            if a > len(input_shape):
                raise ValueError('Layer "%s": shared_axes %r are not axes of the input %s'
                                 % (self.name, self.shared_axes,
                                    shape_str((None,) + tuple(input_shape))))
        return tuple(input_shape)

    def engine_layers(self):
        return [{"kind": "prelu", "shared_axes": list(self.shared_axes or ())}]

    def weight_specs(self, input_shape):
        shared = self.shared_axes or ()
        return [("alpha", tuple(1 if k + 1 in shared else d
                                for k, d in enumerate(input_shape)), True)]


class Softmax(Layer):
    """The softmax over the last axis of (features,) inputs (Keras's default
    axis=-1, or 1, the same axis there); images would need it over their
    channels, which the engines do not run."""

    prefix = "softmax"

    def __init__(self, axis=-1, **kwargs):
        if isinstance(axis, (list, tuple)) and len(axis) == 1:
            axis = axis[0]
        _only(axis, "axis", (-1, 1), "the softmax runs over the last axis of (batch, "
                                     "features) inputs")
        self.axis = axis
        super().__init__(**kwargs)

    def _arguments(self):
        return {"axis": self.axis}

    def compute_output_shape(self, input_shape):
        if len(input_shape) != 1:
            raise ValueError('Layer "%s": softmax expects a (batch, features) input, got %s'
                             % (self.name, shape_str((None,) + tuple(input_shape))))
        return tuple(input_shape)

    def engine_layers(self):
        return _activation_dicts("softmax")


class _Merge(Layer):
    """A layer of several inputs, called on a list of tensors in a
    functional model (cnncuda.functional: the engines run the graph)."""

    _merge = True

    def _shapes(self, input_shapes):
        if not isinstance(input_shapes, list) or len(input_shapes) < 2:
            raise ValueError('Layer "%s" (%s) expects a list of at least 2 inputs, got input '
                             "shape %s: call it on a list of tensors in a functional model "
                             "(keras.Model(inputs, outputs))"
                             % (self.name, type(self).__name__, input_shapes))
        if len(input_shapes) > MAX_INPUTS:
            raise ValueError('Layer "%s" (%s): at most %d inputs, got %d'
                             % (self.name, type(self).__name__, MAX_INPUTS, len(input_shapes)))
        return [tuple(shape) for shape in input_shapes]

    def _check_engine(self):
        """Raises where the engines cannot run the layer as configured."""

    def engine_layers(self):
        self._check_engine()
        return [{"kind": self.kind}]


MAX_INPUTS = 8      # the engines' CNN_MAX_INPUTS (csrc/cnn.h)


class Add(_Merge):
    """The sum of its inputs, which have one shape (Keras's ``Add()``),
    added in their order."""

    prefix = "add"
    kind = "add"

    def compute_output_shape(self, input_shapes):
        shapes = self._shapes(input_shapes)
        for shape in shapes[1:]:
            if shape != shapes[0]:
                raise ValueError('Layer "%s" (Add): its inputs must have one shape, got %s'
                                 % (self.name, ", ".join(shape_str((None,) + s)
                                                         for s in shapes)))
        return shapes[0]


class Concatenate(_Merge):
    """Its inputs joined along ``axis`` (Keras's default -1, the channels;
    the engines join along the last axis only)."""

    prefix = "concatenate"
    kind = "concatenate"

    def __init__(self, axis=-1, **kwargs):
        if isinstance(axis, bool) or not isinstance(axis, int):
            raise TypeError("axis: expected an int, got %r" % (axis,))
        self.axis = axis
        super().__init__(**kwargs)

    def _arguments(self):
        return {"axis": self.axis}

    def compute_output_shape(self, input_shapes):
        shapes = self._shapes(input_shapes)
        rank = len(shapes[0])
        axis = self.axis if self.axis < 0 else self.axis - 1     # without the batch axis
        if not -rank <= axis < rank or self.axis == 0 or any(len(s) != rank for s in shapes):
            raise ValueError('Layer "%s" (Concatenate): axis %d does not fit inputs of shapes %s'
                             % (self.name, self.axis, ", ".join(shape_str((None,) + s)
                                                                for s in shapes)))
        axis %= rank
        for shape in shapes[1:]:
            if shape[:axis] + shape[axis + 1:] != shapes[0][:axis] + shapes[0][axis + 1:]:
                raise ValueError('Layer "%s" (Concatenate): its inputs must match except on '
                                 "axis %d, got %s" % (self.name, self.axis,
                                                      ", ".join(shape_str((None,) + s)
                                                                for s in shapes)))
        out = list(shapes[0])
        out[axis] = sum(s[axis] for s in shapes)
        return tuple(out)

    def _check_engine(self):
        shape = self.input_shape[0][1:] if isinstance(self.input_shape, list) else None
        if shape is not None and self.axis not in (-1, len(shape)):
            raise ValueError('layer "%s" (Concatenate): axis %d; the engines join tensors along '
                             "their last axis (the channels), axis=-1 (or %d here)"
                             % (self.name, self.axis, len(shape)))


from .augmentation import (RandomContrast, RandomCrop, RandomFlip,  # noqa: E402
                           RandomRotation, RandomTranslation, RandomZoom)

LAYER_CLASSES = {cls.__name__: cls for cls in (InputLayer, Conv2D, MaxPooling2D, AveragePooling2D,
                                               GlobalAveragePooling2D, GlobalMaxPooling2D,
                                               Flatten, Dense, Dropout, BatchNormalization,
                                               Activation, ReLU, LeakyReLU, ELU, PReLU,
                                               Softmax, RandomFlip, RandomRotation, RandomZoom,
                                               RandomTranslation, RandomContrast, RandomCrop,
                                               Add, Concatenate)}

# the shape and image layers (shape_layers.py, which builds on Layer above)
from .shape_layers import (Cropping2D, Rescaling, Reshape, SHAPE_LAYER_CLASSES,  # noqa: E402
                           SpatialDropout2D, UpSampling2D, ZeroPadding2D)

LAYER_CLASSES.update(SHAPE_LAYER_CLASSES)


def deserialize(entry):
    """A layer from ``{"class_name": ..., "config": {...}}`` (as a saved model holds it)."""
    if not isinstance(entry, dict) or entry.get("class_name") not in LAYER_CLASSES:
        raise ValueError("layer: expected {'class_name': one of %s, 'config': {...}}, got %r"
                         % (", ".join(LAYER_CLASSES), entry))
    config = dict(entry.get("config") or {})
    if "input_shape" in config:
        config["input_shape"] = tuple(config["input_shape"])
    for key in ("kernel_size", "strides", "pool_size"):
        if key in config:
            config[key] = tuple(config[key])
    return LAYER_CLASSES[entry["class_name"]].from_config(config)
