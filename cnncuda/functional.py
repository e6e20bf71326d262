"""Keras's functional API: ``Model(inputs, outputs)``, and subclassed models.

    inputs = keras.Input(shape=(28, 28, 1))
    x = layers.Conv2D(32, 3, activation="relu")(inputs)
    x = layers.Flatten()(x)
    outputs = layers.Dense(10)(x)
    model = keras.Model(inputs, outputs, name="mnist")

The model walks its graph back from its outputs to its inputs
(cnncuda.symbolic's KerasTensors), each layer called once. A chain
(every layer called on the one before) is the Sequential
model of the same layers -- same engine network, same initial weights for
the same seed, the same bits after training -- with Keras's functional face:
``model.layers`` starts with its InputLayer, its Keras class name is
'Functional' (summary, configs, .keras and .h5 files). A graph that
branches and joins again (``layers.Add``, ``layers.Concatenate``, a tensor
read by several layers) goes to the engine in Keras's layer order, each
layer naming the outputs it reads (csrc/net/graph.c; docs/internals.md,
"Graphs of layers"). Several inputs are packed side by side per sample
into the engine's one input and taken apart by its input_slice layers;
several outputs are joined into one engine output (predict gives them
back as a list), and trained with a loss per output, their targets packed
the same way (cnncuda/several_outputs.py).

A subclass of ``Model`` that defines ``call`` and gives no inputs and
outputs is a subclassed model: when it is built, call is traced on a
symbolic input into such a graph (cnncuda/subclassing.py), which then runs
as above.

Layers called in several models (a model used as a layer, an encoder
inside an autoencoder) share their weights between those models
(models.Sequential._pull_shared).
"""
import numpy as np

from .exclusive import exclusive
from .fixed_mode import inference_form
from .layers import InputLayer, Layer
from .model_loading import _subclass_from_bytes
from .models import Sequential
from .subclassing import check_no_custom_steps, snake_case, trace
from .symbolic import KerasTensor
from .utils import unique_name

__all__ = ["Model", "Functional"]


def _outputs(value):
    """The KerasTensors of `outputs`: one, or a list or tuple of them (each
    a layer's output, each once)."""
    if isinstance(value, dict):
        raise ValueError("outputs: a dict of tensors is not supported; give a list, got keys %s"
                         % sorted(value))
    tensors = list(value) if isinstance(value, (list, tuple)) else [value]
    if not tensors or not all(isinstance(t, KerasTensor) for t in tensors):
        raise TypeError("outputs: expected a KerasTensor (a layer's output) or a list of them, "
                        "got %r" % (value,))
    for k, tensor in enumerate(tensors):
        if any(other is tensor for other in tensors[:k]):
            raise ValueError('outputs: the output of layer "%s" is given twice (at %d and %d)'
                             % (tensor.name, tensors.index(tensor), k))
    return tensors


def _inputs(value):
    """The KerasTensors of `inputs`: one, or a list or tuple of them (each
    the tensor of a keras.Input, each once)."""
    if isinstance(value, dict):
        raise ValueError("inputs: a dict of tensors is not supported; give a list (x may still "
                         "be a dict keyed by the Inputs' names), got keys %s" % sorted(value))
    several = isinstance(value, (list, tuple))
    tensors = list(value) if several else [value]
    if not tensors or not all(isinstance(t, KerasTensor) for t in tensors):
        raise TypeError("inputs: expected a KerasTensor (keras.Input(...)) or a list of them, "
                        "got %r" % (value,))
    for k, tensor in enumerate(tensors):
        if tensor._inputs or not isinstance(tensor._layer, InputLayer):
            raise ValueError("%s: expected the tensor of keras.Input(...), got the output of "
                             'layer "%s"' % ("inputs[%d]" % k if len(tensors) > 1 else "inputs",
                                             tensor._layer.name))
        if any(other is tensor for other in tensors[:k]):
            raise ValueError('inputs: input "%s" is given twice (at %d and %d)'
                             % (tensor.name, tensors.index(tensor), k))
    names = [t.name for t in tensors]
    for k, name in enumerate(names):
        if name in names[:k]:
            raise ValueError('inputs: the name "%s" is used by inputs %d and %d; the inputs of '
                             "a model need unique names (keras.Input(name=...))"
                             % (name, names.index(name), k))
    return tensors


def _graph(inputs, outputs):
    """(the InputLayers, [the layers the output depends on, each after the
    layers it reads], [for each, the indices of the layers it reads, -1 -
    k for input k], Keras's list of the model's layers, InputLayers
    included, the ids of the layers whose call fixed training=False),
    walked back from the output."""
    starts, ends = _inputs(inputs), _outputs(outputs)
    inference = set()
    where = {id(t): -1 - k for k, t in enumerate(starts)}
    order, index, reads = [], {}, []
    calls = {}          # id(layer) -> the tensor its call in this graph made
    first_seen = []     # the layers (InputLayers too) in the order the walk first meets them
    used = set()

    def visit(tensor):
        if id(tensor) in where:
            if id(tensor) not in used:
                used.add(id(tensor))
                first_seen.append(tensor._layer)
            return where[id(tensor)]
        key = id(tensor)
        if key in index:
            return index[key]
        layer = tensor._layer
        if not tensor._inputs:
            if len(starts) == 1:
                raise ValueError('Graph disconnected: the output depends on input "%s", which '
                                 'is not the model\'s input "%s"'
                                 % (layer.name, starts[0]._layer.name))
            raise ValueError('Graph disconnected: the output depends on input "%s", which is '
                             "not one of the model's inputs (%s)"
                             % (layer.name, ", ".join('"%s"' % t.name for t in starts)))
        if calls.setdefault(id(layer), tensor) is not tensor:
            raise ValueError('layer "%s" is called more than once between the input and the '
                             "output: a layer shared within one model is not supported"
                             % layer.name)
        first_seen.append(layer)
        if tensor._inference:
            inference.add(id(layer))
        sources = [visit(t) for t in tensor._inputs]
        index[key] = len(order)
        order.append(layer)
        reads.append(sources)
        return index[key]

    ends_at = []
    for k, end in enumerate(ends):
        ends_at.append(visit(end))
        if ends_at[-1] < 0:
            raise ValueError("%s: the model's output is its input \"%s\"; give it at least one "
                             "layer" % ("outputs[%d]" % k if len(ends) > 1 else "outputs",
                                        end.name))
    for k, tensor in enumerate(starts):
        if id(tensor) not in used:
            raise ValueError('inputs[%d] ("%s"): the output does not depend on this input; '
                             "give only the inputs the outputs are computed from"
                             % (k, tensor.name))
    input_layers = [t._layer for t in starts]
    layers, reads, listing = _keras_order(order, reads, first_seen, input_layers)
    place = {id(layer): k for k, layer in enumerate(layers)}
    return (input_layers, layers, reads, listing, [place[id(order[i])] for i in ends_at],
            inference)


def _keras_order(order, reads, first_seen, input_layers):
    """The layers (a topological order, and what each reads) in Keras's
    order of a functional model's layers (keras.src.ops.function.map_graph):
    by depth, the number of layers between a layer and the output, largest
    first, and at one depth in the order the walk back from the output met
    them; so weights, .keras files and optimizer variables follow Keras's.
    Also Keras's model.layers: the InputLayers (each as deep as its deepest
    reader plus one) in their places among them."""
    depth = [0] * len(order)
    in_depth = [0] * len(input_layers)
    for i in range(len(order) - 1, -1, -1):     # from the output back
        for j in reads[i]:
            if j >= 0:
                depth[j] = max(depth[j], depth[i] + 1)
            else:
                in_depth[-1 - j] = max(in_depth[-1 - j], depth[i] + 1)
    seen = {id(layer): k for k, layer in enumerate(first_seen)}
    new = sorted(range(len(order)), key=lambda i: (-depth[i], seen[id(order[i])]))
    place = {old: k for k, old in enumerate(new)}
    listing = sorted([(-d, seen[id(layer)], layer) for d, layer in zip(in_depth, input_layers)] +
                     [(-depth[i], seen[id(order[i])], order[i]) for i in new],
                     key=lambda e: e[:2])
    return ([order[i] for i in new], [[place[j] if j >= 0 else j for j in reads[i]] for i in new],
            [e[2] for e in listing])


def _is_chain(reads):
    """Whether layer i reads layer i - 1 alone and nothing else reads it."""
    return all(r == [i - 1] for i, r in enumerate(reads))


class Model(Sequential):
    """``Model(inputs, outputs, name=None)``: the functional model from the
    KerasTensor `inputs` to `outputs` (see the module's docstring). ``seed``
    is cnncuda's, as Sequential's (the default seed otherwise);
    ``trainable=False`` freezes every layer, as Keras's. A subclass that
    defines ``call`` and gives no inputs and outputs is a subclassed model
    (cnncuda/subclassing.py: call is traced when the model is built)."""

    _class_name = "Functional"

    def __new__(cls, *args, **kwargs):
        # keras.Model(inputs, outputs) is a Functional, as in Keras
        model = super().__new__(Functional if cls is Model else cls)
        if _subclassed(cls):
            model._init_arguments = _auto_config(cls, args, kwargs)
        return model

    def __init__(self, inputs=None, outputs=None, name=None, seed=None, trainable=True,
                 **kwargs):
        from .checks import boolean
        if kwargs:
            raise TypeError("Model: unexpected arguments %s" % ", ".join(sorted(kwargs)))
        trainable = boolean(trainable, "trainable")
        if inputs is None and outputs is None and _subclassed(type(self)):
            super().__init__(name=name or unique_name(snake_case(type(self).__name__)),
                             seed=seed)
            self._subclassed = True
            self._input_layer, self._reads = None, []
            self._input_layers, self._ends, self._listing = [], [], []
            self.inputs = self.outputs = None
            self._trainable = trainable     # applied to the layers when call is traced
            return
        if inputs is None or outputs is None:
            raise TypeError("Model: expected inputs and outputs (keras.Model(inputs, outputs)), "
                            "or a subclass of keras.Model that defines call(inputs, "
                            "training=None) and gives none")
        super().__init__(name=name or unique_name("functional"), seed=seed)
        self._adopt(inputs, outputs)
        if not trainable:
            self.trainable = False

    def _adopt(self, inputs, outputs):
        """Takes the graph from `inputs` to `outputs` as the model's layers."""
        input_layers, layers, reads, listing, ends, inference = _graph(inputs, outputs)
        self._inference_calls = inference       # ids of layers run in inference mode for good
        self._input_layers = input_layers
        self._input_layer = input_layers[0]
        self._listing = listing
        self.inputs, self.outputs = _inputs(inputs), _outputs(outputs)
        self._reads = reads
        self._ends = ends       # the outputs: indices into the layers
        if len(input_layers) > 1 or len(ends) > 1:
            # the engine's input: the inputs packed side by side per sample
            if len(input_layers) > 1:
                self._input_shape = (sum(int(np.prod(layer._input_shape_arg))
                                         for layer in input_layers),)
            else:
                self._input_shape = tuple(self._input_layer._input_shape_arg)
            self._set_graph(layers)
            return
        self._append(self._input_layer, shared=True)
        if _is_chain(reads):
            for layer in layers:
                self._append(layer, shared=True)
            return
        self._set_graph(layers)

    # -- subclassed models (cnncuda/subclassing.py) ------------------------------

    @property
    def _is_subclassed(self):
        return self.__dict__.get("_subclassed", False)

    @exclusive
    def build(self, input_shape=None):
        """Sequential's; a subclassed model traces its call on inputs of
        `input_shape` ((None, height, width, channels) ...) the first time."""
        if not self._is_subclassed or self.built or input_shape is None:
            return Sequential.build(self, input_shape)
        if not isinstance(input_shape, (tuple, list)) or len(input_shape) not in (2, 3, 4):
            raise ValueError("input_shape: expected (None, height, width, channels), (None, "
                             "height, width) or (None, features), got %r" % (input_shape,))
        shape = tuple(input_shape)[1:]
        InputLayer(input_shape=shape, name="_check")        # checks the dimensions
        inputs, outputs = trace(self, shape)
        self._adopt(inputs, outputs)
        if not self._trainable:
            self.trainable = False
        deferred = self.__dict__.pop("_deferred_compile", None)
        if deferred is not None and (deferred[2] or self._several_outputs):
            self.compile(*deferred[0], **deferred[1])       # (see compile)

    def compute_output_shape(self, input_shape):
        if self._is_subclassed and not self.built:
            self.build((None,) + tuple(input_shape))
        return super().compute_output_shape(input_shape)

    def _get_net(self, device, purpose, batch_size=32):
        if purpose != "weights":
            check_no_custom_steps(self)
        return super()._get_net(device, purpose, batch_size)

    @classmethod
    def from_config(cls, config):
        """A subclassed model from its get_config() (``cls(**config)``, as
        Keras's); other models as Sequential's."""
        if not _subclassed(cls):
            return super().from_config(config)
        try:
            return cls(**config)
        except TypeError as err:
            raise TypeError("Unable to revive model from config. When overriding the "
                            "`get_config()` method, make sure that the returned config contains "
                            "all items used as arguments in the constructor to %s, which is "
                            "the default behavior. You can override this default behavior by "
                            "defining a `from_config(cls, config)` class method to specify how "
                            "to create an instance of %s from its config. Error: %s"
                            % (cls.__name__, cls.__name__, err)) from None

    def _file_header(self, kind, user_schedule=False):
        """Sequential's (the traced graph); a subclassed model adds its class
        and get_config(), which load_model needs to make it again."""
        header = super()._file_header(kind, user_schedule)
        if self._is_subclassed:
            try:
                config = self.get_config()
            except NotImplementedError:
                config = None
            header["subclass"] = {"class_name": type(self).__name__, "config": config}
        return header

    def to_json(self, **kwargs):
        """Sequential's; refused for a subclassed model (Keras's JSON of one
        names its class, which cnncuda cannot make from JSON)."""
        if self._is_subclassed:
            raise NotImplementedError(
                "%s.to_json: a subclassed model has no Keras JSON cnncuda can write (Keras "
                "names its class and needs its code); use the functional model of its traced "
                "graph, keras.Model(model.inputs, model.outputs).to_json()"
                % type(self).__name__)
        return super().to_json(**kwargs)

    def __reduce__(self):
        """Sequential's (a copy through the model file); a subclassed model's
        copy is of its class again (an unbuilt one: its class made from its
        get_config(), as Keras's from_config)."""
        if self._is_subclassed and not self.built:
            return type(self).from_config, (self.get_config(),)
        function, args = super().__reduce__()
        if not self._is_subclassed:
            return function, args
        return _subclass_from_bytes, (type(self),) + args

    @property
    def _several_inputs(self):
        return len(self._input_layers) > 1

    @property
    def _several_outputs(self):
        return len(self._ends) > 1

    def _source_shape(self, j, input_shape):
        """The shape of input -1 - j (j < 0) of the graph."""
        if self._several_inputs:
            return tuple(self._input_layers[-1 - j]._input_shape_arg)
        return tuple(input_shape)

    def _set_graph(self, layers):
        """The layers of a graph (self._reads says what each reads), its
        shapes checked and set."""
        names = set()
        for layer in layers:
            if layer.name in names:
                raise ValueError('The name "%s" is used 2 times in the model. All layer names '
                                 "should be unique." % layer.name)
            names.add(layer.name)
            if isinstance(layer, Sequential):
                if not layer.built:
                    raise ValueError('model "%s": a model used as a layer of a graph must be '
                                     "built (give it an input shape)" % layer.name)
        shapes = self._graph_shapes(self._input_shape, layers)     # raises, changes nothing
        self._layers = list(layers)
        for layer, (shape_in, shape_out) in zip(layers, shapes):
            if not isinstance(layer, Sequential):
                if layer._model is None:
                    layer._model = self
                layer.input_shape = [(None,) + s for s in shape_in] \
                    if getattr(layer, "_merge", False) else (None,) + shape_in
                layer.output_shape = (None,) + shape_out
        for layer in layers:
            if getattr(layer, "_merge", False):
                layer._check_engine()

    def _graph_shapes(self, input_shape, layers):
        """[(input shape(s), output shape)] of every layer of the graph."""
        outs, shapes = [], []
        for layer, sources in zip(layers, self._reads):
            ins = [self._source_shape(j, input_shape) if j < 0 else outs[j] for j in sources]
            shape_in = ins if getattr(layer, "_merge", False) else ins[0]
            out = tuple(layer.compute_output_shape(shape_in))
            shapes.append((shape_in, out))
            outs.append(out)
        return shapes

    @property
    def _is_graph(self):
        return not _is_chain(self._reads) or self._several_outputs

    def _infer_shapes(self, input_shape, layers):
        if self._is_graph and layers is self._layers:
            return self._graph_shapes(input_shape, layers)
        return super()._infer_shapes(input_shape, layers)

    def _commit_shapes(self, input_shape):
        if not self._is_graph:
            super()._commit_shapes(input_shape)
            return
        self._input_shape = tuple(input_shape)

    def _connections(self):
        if not self._is_graph:
            return None
        names = [layer.name for layer in self._layers]
        names = {j: (names[j] if j >= 0 else self._input_layers[-1 - j].name)
                 for reads in self._reads for j in reads}
        column = {id(layer): ", ".join("%s[0][0]" % names[j] for j in reads)
                  for layer, reads in zip(self._layers, self._reads)}
        return [column.get(id(layer), "") for layer in self.layers]

    def _input_slices(self):
        """The engine layers of a model of several inputs: each input's
        values out of the packed input ('input_slice', cnn.h)."""
        out, offset = [], 0
        for layer in self._input_layers:
            shape = tuple(layer._input_shape_arg)
            out.append({"kind": "input_slice", "offset": offset, "inputs": [-1],
                        "shape": list((1,) + shape if len(shape) == 2 else shape)})
            offset += int(np.prod(shape))
        return out

    def _engine_prefix(self):
        return len(self._input_layers) if self._several_inputs else 0

    def _engine_block(self, offset, source):
        """Sequential's, for a graph: the first engine layer of each layer
        names the engine layers it reads ("inputs") where that is not the
        one before it."""
        if not self._is_graph:
            return super()._engine_block(offset, source)
        out, ends, starts = [], [], [source]
        if self._several_inputs:
            if offset != 0:
                raise ValueError('model "%s" has several inputs: it cannot run inside another '
                                 "model" % self.name)
            out = self._input_slices()
            starts = list(range(len(out)))
        for layer, sources in zip(self._layers, self._reads):
            start = offset + len(out)
            wanted = [starts[-1 - j] if j < 0 else ends[j] for j in sources]
            if isinstance(layer, Sequential):
                dicts = layer._engine_block(start, wanted[0])
            else:
                dicts = [dict(d) for d in layer.engine_layers()]
                if wanted != [start - 1]:
                    dicts[0]["inputs"] = wanted
            if id(layer) in self._inference_calls:
                dicts = inference_form(dicts)
            out.extend(dicts)
            ends.append(offset + len(out) - 1)
        if self._several_outputs:
            if offset != 0:
                raise ValueError('model "%s" has several outputs: it cannot run inside another '
                                 "model" % self.name)
            # the outputs packed side by side per sample, each flat in Keras's
            # order: the engine's output (_keras_y takes them apart)
            packed = []
            for k in self._ends:
                packed.append(ends[k])
                if len(self._layers[k].output_shape) > 2:
                    out.append({"kind": "flatten", "inputs": [ends[k]]})
                    packed[-1] = len(out) - 1
            out.append({"kind": "concatenate", "inputs": packed})
        return out

    @property
    def output_shape(self):
        if self._several_outputs:
            return [self._layers[k].output_shape for k in self._ends]
        return super().output_shape

    @property
    def output(self):
        return list(self.outputs) if self._several_outputs else self.outputs[0]

    def _keras_y(self, y):
        """The engine's outputs in the model's: with several outputs, the
        list of each one's (n,) + shape, taken out of the packed rows."""
        if not self._several_outputs:
            return super()._keras_y(y)
        parts, start = [], 0
        for shape in self.output_shape:
            count = int(np.prod(shape[1:]))
            parts.append(y[:, start:start + count].reshape((len(y),) + tuple(shape[1:])))
            start += count
        return parts

    def _empty_outputs(self):
        if self._several_outputs:
            count = sum(int(np.prod(shape[1:])) for shape in self.output_shape)
            return self._keras_y(np.zeros((0, count), np.float32))
        return super()._empty_outputs()

    def compile(self, optimizer="rmsprop", loss=None, metrics=None, loss_weights=None,
                **kwargs):
        check_no_custom_steps(self)
        self.__dict__.pop("_deferred_compile", None)
        per_output = isinstance(loss, (list, tuple, dict)) or loss_weights is not None or \
            isinstance(metrics, dict)
        if self._is_subclassed and not self.built and loss:
            # a subclassed model's outputs are known once call is traced
            # (build, or fit's first data): where it has several, compile
            # runs again then (several_outputs.py); until then a loss per
            # output is stood for by the first
            if per_output:
                first = list(loss.values())[0] if isinstance(loss, dict) else (
                    loss[0] if isinstance(loss, (list, tuple)) else loss)
                super().compile(optimizer, first, None, None, **kwargs)
            else:
                super().compile(optimizer, loss, metrics, loss_weights, **kwargs)
            self._deferred_compile = ((optimizer, loss, metrics, loss_weights), kwargs,
                                      per_output)
            return None
        return super().compile(optimizer, loss, metrics, loss_weights, **kwargs)

    @classmethod
    def _from_chain(cls, input_shape, layers, name=None, seed=None, input_name=None,
                    reads=None, inputs=None, outputs=None, inference_calls=()):
        """The functional model of `layers` called on an Input of
        `input_shape`: one after the other, or each on the outputs `reads`
        names (indices into the layers, -1 - k input k); with `inputs`,
        [(name, shape)] of each of several Inputs, in the model's order;
        with `outputs`, the indices of the layers whose outputs are the
        model's (else the last layer's); `inference_calls`: the names of the
        layers called with training=False."""
        from .layers import Input
        if inputs is None:
            tensors_in = [Input(shape=input_shape, name=input_name)]
        else:
            tensors_in = [Input(shape=tuple(shape), name=in_name) for in_name, shape in inputs]
        tensors = []
        for i, layer in enumerate(layers):
            sources = [i - 1] if reads is None else reads[i]
            args = [tensors_in[-1 - j] if j < 0 else tensors[j] for j in sources]
            arg = args if getattr(layer, "_merge", False) else args[0]
            tensors.append(layer(arg))
            if layer.name in inference_calls:       # (checked when first called)
                tensors[-1]._inference = True
        ends = tensors[-1] if outputs is None else [tensors[k] for k in outputs]
        return cls(tensors_in if inputs is not None else tensors_in[0], ends, name=name,
                   seed=seed)

    def __setattr__(self, name, value):
        # a subclassed model tracks the layers its attributes hold, in the
        # order Keras 3's tracker meets them (model.layers)
        track = name not in _INTERNAL and self.__dict__.get("_subclassed") and \
            isinstance(value, (Layer, Sequential, list, tuple, dict))
        if track:
            self._track_layers()        # what lists got since the last attribute first
            names = self.__dict__.setdefault("_tracked_names", [])
            if name not in names:
                names.append(name)
        object.__setattr__(self, name, value)
        if track:
            self._track_layers()

    def _track_layers(self):
        """Adds to the tracked layers those the tracked attributes hold now
        (in lists, tuples and dict values too) that are not there yet: a
        layer appended to a list later comes after those set before."""
        out = self.__dict__.setdefault("_tracked", [])
        seen = {id(layer) for layer in out}

        def add(value):
            if isinstance(value, (Layer, Sequential)):
                if id(value) not in seen:
                    seen.add(id(value))
                    out.append(value)
            elif isinstance(value, (list, tuple)):
                for v in value:
                    add(v)
            elif isinstance(value, dict):
                for v in value.values():
                    add(v)
        for name in self.__dict__.get("_tracked_names", ()):
            add(self.__dict__.get(name))
        return out

    def _tracked_layers(self):
        """A subclassed model's layers as Keras 3 lists them: those its
        attributes hold, in the order they were tracked, each once; after
        them any layer of the traced graph none holds."""
        out = list(self._track_layers())
        # a block in the graph is the functional model of its traced call
        shown = {id(layer) for layer in out} | {
            id(layer.__dict__["_block_traced"]) for layer in out
            if "_block_traced" in getattr(layer, "__dict__", {})}
        return out + [layer for layer in self._layers if id(layer) not in shown]

    def _graph_listing(self):
        """model.layers of the functional model the graph is (a subclassed
        model's traced graph: its Input, then its layers as call runs them,
        a block as the functional model of its call): what Keras's files
        hold for a model nested in a Sequential or functional model."""
        if self._is_subclassed:
            return [self._input_layer] + list(self._layers)
        return self.layers

    @property
    def layers(self):
        """The InputLayer, then the model's layers (Keras's functional order;
        with several inputs, each InputLayer in its place in that order); a
        subclassed model's the layers its attributes hold, in the order they
        were set (Keras 3's, before and after it is built; no InputLayer)."""
        if self._is_subclassed:
            return self._tracked_layers()
        if self._several_inputs:
            return list(self._listing)
        return [self._input_layer] + list(self._layers)

    @property
    def input(self):
        return list(self.inputs) if self._several_inputs else self.inputs[0]

    @property
    def input_shape(self):
        if self._several_inputs:
            return [(None,) + tuple(layer._input_shape_arg) for layer in self._input_layers]
        return super().input_shape

    def __call__(self, x, training=None, **kwargs):
        from .symbolic import is_symbolic
        if (self._several_inputs or self._several_outputs) and is_symbolic(x):
            raise ValueError('model "%s" has %d inputs and %d outputs: using a model of several '
                             "inputs or outputs as a layer of another model is not supported"
                             % (self.name, len(self._input_layers), len(self._ends)))
        return super().__call__(x, training=training, **kwargs)

    def _build_from_data(self, x, arg="x"):
        if not self._several_inputs:
            super()._build_from_data(x, arg)

    def _engine_data(self, x, arg="x", allow_empty=False, finite=False):
        """x checked and in the engine's form; with several inputs, x is a
        list or tuple of arrays in the order of `inputs`, or a dict keyed by
        the Inputs' names (Keras's rules: other keys are ignored), and the
        engine takes them packed side by side per sample."""
        from .checks import check_x
        if not self._several_inputs:
            if isinstance(x, dict):
                x = self._by_name(x, arg)[0][0]
            return super()._engine_data(x, arg, allow_empty, finite)
        arrays = [check_x(value, layer._input_shape_arg, where, allow_empty, finite)
                  for (value, where), layer in zip(self._by_name(x, arg), self._input_layers)]
        counts = [len(a) for a in arrays]
        if len(set(counts)) > 1:
            raise ValueError("%s: every input needs the same number of samples, got %s"
                             % (arg, ", ".join("%d (%s)" % (n, l.name) for n, l in
                                               zip(counts, self._input_layers))))
        return np.concatenate([a.reshape(len(a), int(np.prod(a.shape[1:]))) for a in arrays],
                              axis=1)

    def _by_name(self, x, arg):
        """[(the array of each input, how messages name it)] from x."""
        names = [layer.name for layer in self._input_layers]
        if isinstance(x, dict):
            missing = [name for name in names if name not in x]
            if missing:
                raise ValueError("%s: a dict of inputs needs the keys %s (the Inputs' names), "
                                 "missing %s; got keys %s"
                                 % (arg, names, missing, sorted(map(str, x))))
            return [(x[name], "%s['%s']" % (arg, name)) for name in names]
        if len(names) == 1:
            return [(x, arg)]
        if not isinstance(x, (list, tuple)):
            raise TypeError("%s: the model has %d inputs (%s): expected a list or tuple of %d "
                            "arrays in that order, or a dict keyed by those names, got %s"
                            % (arg, len(names), ", ".join(names), len(names), type(x).__name__))
        if len(x) != len(names):
            raise ValueError("%s: expected %d arrays, one per input (%s, in that order), got %d"
                             % (arg, len(names), ", ".join(names), len(x)))
        return [(value, "%s[%d]" % (arg, k)) for k, value in enumerate(x)]

    def get_config(self):
        """Sequential's config (the layers in order) and the Input's name;
        for a graph, what each layer reads ("reads": indices into the
        layers, -1 - k input k); with several inputs, "inputs": [name,
        shape] of each ("input_shape" is then the engine's packed one). A
        subclassed model's is Keras's: its name,
        trainable and the arguments its class was made with, where they are
        JSON values (a subclass whose arguments are not overrides
        get_config, as Keras asks)."""
        if not self._is_subclassed:
            return self._architecture()
        config = {"name": self.name, "trainable": self.trainable}
        if type(self).get_config is not Model.get_config:
            return config            # super().get_config() of the subclass's own
        arguments = self.__dict__.get("_init_arguments")
        if arguments is None:
            raise NotImplementedError(
                "Object %s was created by passing non-serializable argument values in "
                "`__init__()`, and therefore the object must override `get_config()` in order "
                "to be serializable. Please implement `get_config()`." % type(self).__name__)
        config.update(arguments)
        return config

    def _architecture(self):
        """The graph's config (get_config's for a functional model), which
        cnncuda's files and copies hold."""
        self._require_built()
        config = dict(Sequential.get_config(self), input_name=self._input_layer.name)
        if self._is_graph:
            config["reads"] = [list(r) for r in self._reads]
        if self._several_inputs:
            config["inputs"] = [[layer.name, list(layer._input_shape_arg)]
                                for layer in self._input_layers]
        if self._several_outputs:
            config["outputs"] = list(self._ends)
        if self._inference_calls:       # the calls with training=False (fixed_mode.py)
            config["inference_calls"] = [layer.name for layer in self._layers
                                         if id(layer) in self._inference_calls]
        return config

    def add(self, layer):
        raise AttributeError("'Functional' object has no attribute 'add' (a functional model's "
                             "layers come from its graph)")

    def pop(self):
        raise AttributeError("'Functional' object has no attribute 'pop' (a functional model's "
                             "layers come from its graph)")


# the model's own attributes that hold layers (not tracked as the user's)
_INTERNAL = frozenset(("_layers", "_input_layer", "_input_layers", "_listing", "_tracked",
                       "_tracked_names"))


class Functional(Model):
    """What ``keras.Model(inputs, outputs)`` makes (Keras's class name)."""


def _subclassed(cls):
    """Whether `cls` is a Model subclass of the user's with a call method."""
    return cls not in (Model, Functional) and callable(getattr(cls, "call", None))


_JSON_TYPES = (type(None), bool, int, float, str)


def _json_value(value):
    if isinstance(value, _JSON_TYPES):
        return True
    if isinstance(value, (list, tuple)):
        return all(_json_value(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_value(v) for k, v in value.items())
    return False


def _auto_config(cls, args, kwargs):
    """The arguments a subclass was made with, by name, where all are JSON
    values (Keras's automatic config of a subclass), else None."""
    import inspect
    try:
        bound = inspect.signature(cls.__init__).bind(None, *args, **kwargs)
    except TypeError:
        return None          # __init__ raises the error itself
    out = {}
    for i, (key, value) in enumerate(bound.arguments.items()):
        if i == 0:
            continue         # self
        param = bound.signature.parameters[key]
        if param.kind is param.VAR_KEYWORD:
            out.update(value)
        elif param.kind is param.VAR_POSITIONAL:
            if value:
                return None
        else:
            out[key] = value
    return out if _json_value(out) else None
