"""Keras's functional API: ``Model(inputs, outputs)``.

    inputs = keras.Input(shape=(28, 28, 1))
    x = layers.Conv2D(32, 3, activation="relu")(inputs)
    x = layers.Flatten()(x)
    outputs = layers.Dense(10)(x)
    model = keras.Model(inputs, outputs, name="mnist")

The model walks its graph back from the output to the input
(cnncuda.symbolic's KerasTensors). The engines run a chain of layers, each
on the output of the one before, so the graph must be one: one input, one
output, every layer called on one tensor. Such a model is the Sequential
model of the same layers -- same engine network, same initial weights for
the same seed, the same bits after training -- with Keras's functional face:
``model.layers`` starts with its InputLayer, its Keras class name is
'Functional' (summary, configs, .keras and .h5 files). A graph that branches
(Add, Concatenate, several inputs or outputs) is refused when the model is
made, naming the layer (docs/internals.md, "Branches", has the design that
would run it).

Layers called in several models (a model used as a layer, an encoder
inside an autoencoder) share their weights between those models
(models.Sequential._pull_shared).
"""
from .layers import InputLayer, branch_error
from .models import Sequential
from .symbolic import KerasTensor
from .utils import unique_name

__all__ = ["Model", "Functional"]


def _one(value, arg):
    """The single KerasTensor of `inputs` or `outputs`."""
    if isinstance(value, dict):
        raise ValueError("%s: a dict of tensors is not supported (models have one input and one "
                         "output), got keys %s" % (arg, sorted(value)))
    if isinstance(value, (list, tuple)):
        if len(value) != 1:
            if len(value) > 1 and all(isinstance(v, KerasTensor) for v in value):
                raise ValueError("%s: models with several %s are not supported yet (the engines "
                                 "run a chain of layers from one input to one output), got %d "
                                 "tensors" % (arg, arg, len(value)))
            raise TypeError("%s: expected a KerasTensor (keras.Input(...) or a layer's output), "
                            "got %r" % (arg, value))
        value = value[0]
    if not isinstance(value, KerasTensor):
        raise TypeError("%s: expected a KerasTensor (keras.Input(...) or a layer's output), got %r"
                        % (arg, value))
    return value


def _chain(inputs, outputs):
    """(the InputLayer, [the layers from the input to the output])."""
    start, end = _one(inputs, "inputs"), _one(outputs, "outputs")
    if start._inputs or not isinstance(start._layer, InputLayer):
        raise ValueError("inputs: expected the tensor of keras.Input(...), got the output of "
                         'layer "%s"' % start._layer.name)
    layers, tensor = [], end
    while tensor is not start:
        layer = tensor._layer
        if not tensor._inputs:
            raise ValueError('Graph disconnected: the output depends on input "%s", which is not '
                             'the model\'s input "%s"' % (layer.name, start._layer.name))
        if len(tensor._inputs) != 1:
            raise branch_error(layer)
        layers.append(layer)
        tensor = tensor._inputs[0]
    layers.reverse()
    seen = set()
    for layer in layers:
        if id(layer) in seen:
            raise ValueError('layer "%s" is called more than once between the input and the '
                             "output: a layer shared within one model is not supported"
                             % layer.name)
        seen.add(id(layer))
    return start._layer, layers


class Model(Sequential):
    """``Model(inputs, outputs, name=None)``: the functional model from the
    KerasTensor `inputs` to `outputs` (see the module's docstring). ``seed``
    is cnncuda's, as Sequential's (the default seed otherwise)."""

    _class_name = "Functional"

    def __init__(self, inputs=None, outputs=None, name=None, seed=None, trainable=True,
                 **kwargs):
        if kwargs:
            raise TypeError("Model: unexpected arguments %s" % ", ".join(sorted(kwargs)))
        if inputs is None or outputs is None:
            raise TypeError("Model: expected inputs and outputs (keras.Model(inputs, outputs)); "
                            "subclassed models (a call method) are not supported: write the "
                            "model with the functional API or as a Sequential")
        if trainable is not True:
            raise ValueError("trainable: expected True (freezing is not supported), got %r"
                             % (trainable,))
        input_layer, layers = _chain(inputs, outputs)
        super().__init__(name=name or unique_name("functional"), seed=seed)
        self._input_layer = input_layer
        self.inputs, self.outputs = [_one(inputs, "inputs")], [_one(outputs, "outputs")]
        self._append(input_layer, shared=True)
        for layer in layers:
            self._append(layer, shared=True)

    @classmethod
    def _from_chain(cls, input_shape, layers, name=None, seed=None, input_name=None):
        """The functional model of `layers` called one after the other on an
        Input of `input_shape`."""
        from .layers import Input
        inputs = x = Input(shape=input_shape, name=input_name)
        for layer in layers:
            x = layer(x)
        return cls(inputs, x, name=name, seed=seed)

    @property
    def layers(self):
        """The InputLayer, then the model's layers (Keras's functional order)."""
        return [self._input_layer] + list(self._layers)

    @property
    def input(self):
        return self.inputs[0]

    @property
    def output(self):
        return self.outputs[0]

    def get_config(self):
        """Sequential's config (the chain of layers in order) and the
        Input's name."""
        return dict(super().get_config(), input_name=self._input_layer.name)

    def add(self, layer):
        raise AttributeError("'Functional' object has no attribute 'add' (a functional model's "
                             "layers come from its graph)")

    def pop(self):
        raise AttributeError("'Functional' object has no attribute 'pop' (a functional model's "
                             "layers come from its graph)")


Functional = Model
