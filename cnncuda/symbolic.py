"""Keras's symbolic tensors, for the functional API.

``Input(shape=(28, 28, 1))`` gives a KerasTensor; a layer (or a model)
called on one gives the KerasTensor of its output, with the shape the layer
computes (its shape check runs then, as in Keras)::

    inputs = keras.Input(shape=(28, 28, 1))
    x = layers.Conv2D(32, 3, activation="relu")(inputs)
    outputs = layers.Dense(10)(layers.Flatten()(x))
    model = keras.Model(inputs, outputs)

A KerasTensor holds no values: only its shape and how it was made (the
layer and the tensors it was called on), which ``Model`` walks back from the
outputs to the inputs (cnncuda/functional.py).
"""
from .checks import shape_str
from .subclassing import accepts_training, in_trace

__all__ = ["KerasTensor", "is_symbolic", "call_symbolic"]


class KerasTensor:
    """The output of a layer in a functional model under construction:
    ``shape`` (batch axis None first) and ``dtype``: as Keras reports it, the
    layer's compute dtype (keras.mixed_precision: 'float16' or 'bfloat16'
    under a mixed policy; 'float32' for an Input), though the engines store
    every activation in float32 (docs/semantics.md, "Mixed precision")."""

    def __init__(self, shape, layer, inputs=()):
        from .layers import InputLayer
        self.shape = (None,) + tuple(shape)
        self.dtype = "float32" if isinstance(layer, InputLayer) else \
            getattr(layer, "compute_dtype", "float32")
        self._layer = layer            # the layer that made it (an InputLayer for an Input)
        self._inputs = tuple(inputs)   # the tensors that layer was called on
        self._inference = False        # the call fixed training=False (call_symbolic)

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def name(self):
        return self._layer.name

    def __repr__(self):
        return "<KerasTensor shape=%s, dtype=%s, name=%s>" % (shape_str(self.shape), self.dtype,
                                                              self._layer.name)

    def __bool__(self):
        raise TypeError("A KerasTensor is symbolic: it has no value to test (it is the "
                        "placeholder of a functional model's input or of a layer's output)")

    def __array__(self, dtype=None, copy=None):
        raise TypeError("A KerasTensor is symbolic: it has no values to convert to an array. "
                        "Build a model with keras.Model(inputs, outputs) and call predict")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        raise TypeError("NumPy's %s on a KerasTensor: a symbolic tensor has no values, and "
                        "cnncuda runs only its layers (use a layer, such as layers.Activation, "
                        "layers.Add or layers.Rescaling)" % ufunc.__name__)

    def _no_op(self, op):
        raise TypeError("the operation %s on a KerasTensor has no symbolic form in cnncuda: "
                        "a model's graph is made of cnncuda's layers only (use a layer, such "
                        "as layers.Add, layers.Rescaling or layers.Activation)" % op)

    def __add__(self, other):
        self._no_op("+")

    __radd__ = __add__

    def __sub__(self, other):
        self._no_op("-")

    __rsub__ = __sub__

    def __mul__(self, other):
        self._no_op("*")

    __rmul__ = __mul__

    def __truediv__(self, other):
        self._no_op("/")

    __rtruediv__ = __truediv__

    def __matmul__(self, other):
        self._no_op("@")

    __rmatmul__ = __matmul__

    def __pow__(self, other):
        self._no_op("**")

    def __neg__(self):
        self._no_op("unary -")

    def __abs__(self):
        self._no_op("abs()")

    def __lt__(self, other):
        self._no_op("< (branching on a tensor's value)")

    __le__ = __gt__ = __ge__ = __lt__

    def __getitem__(self, key):
        self._no_op("[] (indexing)")

    def __float__(self):
        self._no_op("float()")

    __int__ = __index__ = __float__

    def __iter__(self):
        self._no_op("iteration")


def is_symbolic(value):
    """True for a KerasTensor, or a non-empty list or tuple of them."""
    if isinstance(value, KerasTensor):
        return True
    return isinstance(value, (list, tuple)) and len(value) > 0 and \
        all(isinstance(v, KerasTensor) for v in value)


_MODE_CLASSES = ("Dropout", "SpatialDropout2D", "BatchNormalization", "RandomFlip",
                 "RandomRotation", "RandomZoom", "RandomTranslation", "RandomContrast",
                 "RandomCrop")


def _mode_layers(layer):
    """The layers under `layer` whose behaviour depends on training mode."""
    leaves = layer._leaves() if hasattr(layer, "_leaves") else [layer]
    return [leaf for leaf in leaves if type(leaf).__name__ in _MODE_CLASSES]


def _fixed_mode(layer, training, what):
    """True where `layer` is called with training=False fixed in a
    subclassed model's (or a block's) call, not the mode its trace passes
    on: the layer then runs in inference mode for good (fixed_mode.py); a
    fixed training=True there is refused. In a functional graph, Keras 3
    passes the model call's own mode to every layer that takes training=
    (fit's True, predict's and evaluate's False), over what the graph's
    call said: there the layer follows the engine's mode."""
    if training is None or not in_trace():
        return False
    mode = _mode_layers(layer)
    if not mode or accepts_training(training):
        return False
    if training:
        raise ValueError("training: %s was called with training=True, but layer \"%s\" (%s) "
                         "would then run in training mode in evaluate and predict too "
                         "(Monte-Carlo dropout): the engines run a network's layers in one "
                         "mode, so a fixed training=True is not supported (call it without "
                         "training=, or in a subclassed model's call with training=training, "
                         "the mode call is given)"
                         % (what, mode[0].name, type(mode[0]).__name__))
    crop = [leaf for leaf in mode if type(leaf).__name__ == "RandomCrop"]
    if crop:
        raise ValueError("training: %s was called with training=False, but layer \"%s\" "
                         "(RandomCrop) changes the image's shape in training and not in "
                         "Keras's inference mode, which cnncuda cannot run (call it without "
                         "training=)" % (what, crop[0].name))
    return True


def call_symbolic(layer, inputs, kwargs, what):
    """``layer(inputs, **kwargs)`` for symbolic inputs: the output's
    KerasTensor. `what` names the callee in messages ('layer "dense"').
    A call with training=False fixed marks its output (``_inference``):
    the model runs that call's layer in inference mode in training too."""
    for key in kwargs:
        if key != "training":
            raise TypeError("%s: unexpected argument %r in the call (cnncuda's layers take the "
                            "input tensor and training=)" % (what, key))
    fixed = _fixed_mode(layer, kwargs.get("training"), what)
    out = _call(layer, inputs, what)
    out._inference = fixed
    return out


def _call(layer, inputs, what):
    if isinstance(inputs, (list, tuple)):
        merge = getattr(layer, "_merge", False)
        if not merge:
            if len(inputs) == 1:
                inputs = inputs[0]
            else:
                raise ValueError("%s expects one input tensor, got a list of %d"
                                 % (what, len(inputs)))
        else:
            shapes = [tuple(t.shape[1:]) for t in inputs]
            return KerasTensor(layer.compute_output_shape(shapes), layer, inputs)
    elif getattr(layer, "_merge", False):
        raise ValueError("%s expects a list of at least 2 input tensors, got %r"
                         % (what, inputs))
    shape = tuple(inputs.shape[1:])
    built = getattr(layer, "_call_shape", None)
    if built is not None and built != shape:
        raise ValueError("%s was built for inputs of shape %s and is now called on %s: a "
                         "layer takes one input shape"
                         % (what, shape_str((None,) + built), shape_str(inputs.shape)))
    out = tuple(layer.compute_output_shape(shape))
    layer._call_shape = shape
    if not hasattr(layer, "_leaves"):       # a layer, built by the call as in Keras
        layer.input_shape, layer.output_shape = (None,) + shape, (None,) + out
    return KerasTensor(out, layer, (inputs,))
