"""Keras's Sequential model on cnncuda's engines, and load_model (the
functional ``Model`` builds on Sequential: cnncuda/functional.py).

    model = Sequential([Conv2D(32, 3, activation="relu", input_shape=(32, 32, 3)),
                        MaxPooling2D(), Flatten(), Dense(10)], seed=0)
    model.compile(optimizer="adam",
                  loss=SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], device="cpu")
    history = model.fit(x, y, epochs=5, validation_data=(xt, yt))

The model keeps its layers in Python and runs them as one network of the C
core (or the NumPy reference) built by cnncuda.engine.make_net. That network
is built when first needed and rebuilt, with the weights carried over, when
the engine changes (``with cnncuda.device(...)``), when TF32 was switched on
or off since it was built on a GPU engine
(``cnncuda.config.experimental.enable_tensor_float_32_execution``), when a
fit asks for a larger batch than it was built for, or after ``compile``. Once training has
begun, a rebuilt network also takes over the optimizer's state (Adam's
moments or SGD's velocity, the step count and the dropout counter), so
training goes on as if the network had not changed; a model loaded from a
file gets its saved state the same way.

Seeds: ``Sequential(seed=n)`` fixes the initial weights, the dropout masks and
the shuffling order (the same on every engine); without it the model takes
the default seed (0, or what cnncuda.utils.set_random_seed set).
"""
import weakref

import numpy as np

from . import (config, distribute, initializers, losses, mixed_precision, optimizers,
               sample_weights, several_outputs, training)
from . import metrics as metrics_module
from .checks import nonnegative_int, shape_str
from .engine import make_net
from .exclusive import exclusive
from .fixed_mode import inference_form
from .layers import InputLayer, Layer, deserialize
from .model_files import ModelFiles
from .utils import get_random_seed, unique_name

__all__ = ["Sequential", "Model", "load_model", "model_from_json"]

# every model, for park_networks_at_exit: plain weak references without a
# callback. A WeakSet's callback is Python code run whenever a model is
# collected, in the middle of whatever runs then: a Ctrl-C that lands there
# is swallowed ("Exception ignored"), and an interrupted fit went on.
_LIVE = []


def _remember(model):
    _LIVE[:] = [ref for ref in _LIVE if ref() is not None]
    _LIVE.append(weakref.ref(model))


_PLACEHOLDER_LOSS = {"kind": "sparse_categorical_crossentropy", "from_logits": True}
_PLACEHOLDER_OPTIMIZER = {"kind": "adam"}
_ACCURACY_NAMES = {
    "sparse_categorical_crossentropy": ("accuracy", "acc", "sparse_categorical_accuracy"),
    "categorical_crossentropy": ("accuracy", "acc", "categorical_accuracy"),
    "binary_crossentropy": ("accuracy", "acc", "binary_accuracy"),
}
# the regression losses: 'accuracy' is Keras's choice for their outputs
# (BinaryAccuracy for one output, CategoricalAccuracy for several), counted
# by the engine's regression loss op (docs/semantics.md, "Metrics")
_ACCURACY_NAMES.update({kind: ("accuracy", "acc") for kind in losses.REGRESSION_KINDS})


def _compiled_metrics(metrics, loss_kind):
    """compile's metrics: [(name, object)], the object None for the accuracy
    strings the engine counts (the loss's own accuracy)."""
    if metrics is None:
        metrics = []
    if isinstance(metrics, (str, metrics_module.Metric)) or not isinstance(metrics, (list, tuple)):
        raise TypeError("metrics: expected a list such as ['accuracy'], got %r" % (metrics,))
    compiled = []
    for i, metric in enumerate(metrics):
        if isinstance(metric, str) and metric in _ACCURACY_NAMES[loss_kind]:
            compiled.append((metric, None))
            continue
        if isinstance(metric, str) and metric in ("accuracy", "acc"):
            raise ValueError("metrics[%d]: %r for the loss %s is not supported" % (i, metric,
                                                                                 loss_kind))
        try:
            obj = metrics_module.get(metric)
        except ValueError as err:
            raise ValueError("metrics[%d]: %s" % (i, str(err).split(": ", 1)[1])) from None
        if isinstance(metric, str):
            obj._from_string = metric       # saved as the string, as Keras's compile config
        compiled.append((obj.name, obj))
    names = [name for name, _ in compiled]
    for name in names:
        if names.count(name) > 1:
            raise ValueError("metrics: two metrics named %r (give one another name)" % (name,))
    return compiled


class Sequential(ModelFiles):
    """A linear stack of layers: ``Sequential([layer, ...])`` or ``.add(layer)``.
    A model is a layer too: ``Sequential([model, layers.Softmax()])`` runs
    `model`'s layers, its weights shared with it (see _pull_shared)."""

    _class_name = "Sequential"      # Keras's class name, in configs and summaries
    # ids of the layers a functional model's graph calls with training=False
    # (fixed_mode.py); a Sequential has none
    _inference_calls = frozenset()

    def __init__(self, layers=None, name=None, seed=None):
        if name is not None and (not isinstance(name, str) or not name):
            raise TypeError("name: expected a non-empty str, got %r" % (name,))
        self.seed = get_random_seed() if seed is None else nonnegative_int(seed, "seed")
        self.name = name or unique_name("sequential")
        self._layers = []
        self._input_shape = None          # without the batch axis, once known
        self._net = None                  # the engine network, built when needed
        self._net_device = None
        self._net_precision = None        # 'float32', 'tf32', 'bf16', 'fp16' (config.precision_for)
        self._dtype_policy = mixed_precision.global_policy()   # Keras's: the global one when made
        self._net_compile = None          # the compile it was built for (None: placeholder)
        self._data_token = None           # whose training data the network holds (training.py)
        self._compiled_optimizer = None   # the optimizer's engine dict at compile: nets' layout
        self._net_optimizer = None        # the hyperparameters the network has now
        self._net_layers = None           # the engine layers it was built from
        self._net_loss = None             # the engine loss it was built with
        self._weighted = False            # a weighted fit or evaluate runs (sample_weights.py)
        self._carried = None              # weights of a dropped network, for the next one
        self._carried_state = None        # its optimizer state (or a file's), for the next one
        self._compile_version = 0
        self._iterations_offset = 0       # steps before the engine's count began (version-1 files)
        self._device = None
        self._strategy = distribute.get_strategy()   # built under strategy.scope()
        self.loss = None
        self.optimizer = None
        self.metric_name = None
        self._metrics = []                # [(name, host metric object or None: the engine's)]
        self._metric_outputs = []         # the output each of _metrics reads (several outputs)
        self.stop_training = False
        self.history = None
        self._shuffle_rng = np.random.default_rng(self.seed)
        self._trainable = True
        self._synced = {}                 # shared layer -> its holder's version we hold
        self._claims = 0                  # times this model took its layers' weights
        self._pulling = False
        self._call_shape = None
        _remember(self)
        if layers is not None:
            if isinstance(layers, Layer) or not hasattr(layers, "__iter__"):
                raise TypeError("layers: expected a list of layers, got %r" % (layers,))
            for layer in layers:
                self.add(layer)

    # -- structure ----------------------------------------------------------

    @property
    def layers(self):
        """The model's layers (an Input is not one of them, as in Keras)."""
        return list(self._layers)

    @property
    def built(self):
        return self._input_shape is not None

    @property
    def input_shape(self):
        self._require_built()
        return (None,) + self._input_shape

    @property
    def output_shape(self):
        self._require_built()
        return self._layers[-1].output_shape if self._layers else self.input_shape

    def _infer_shapes(self, input_shape, layers):
        """[(input_shape, output_shape)] of every layer (no batch axis); raises
        the layer's ValueError where a shape does not fit."""
        shapes, shape, weighted = [], tuple(input_shape), None
        for layer in layers:
            if getattr(layer, "augmentation", False) and weighted is not None:
                raise ValueError('Layer "%s" (%s) comes after layer "%s", which has weights: '
                                 "augmentation layers pass no gradient back, so they must come "
                                 "before every layer with weights (put them first)"
                                 % (layer.name, type(layer).__name__, weighted.name))
            out = tuple(layer.compute_output_shape(shape))
            has_weights = layer._weighted_leaves() if isinstance(layer, Sequential) \
                else layer.weight_specs(shape)
            if weighted is None and has_weights:
                weighted = layer
            shapes.append((shape, out))
            shape = out
        return shapes

    def _commit_shapes(self, input_shape):
        for layer, (shape_in, shape_out) in zip(self._layers,
                                                self._infer_shapes(input_shape, self._layers)):
            if isinstance(layer, Sequential):
                if not layer.built:
                    layer.build((None,) + shape_in)
                continue
            layer.input_shape = (None,) + shape_in
            layer.output_shape = (None,) + shape_out
        self._input_shape = tuple(input_shape)

    # -- a model as a layer ----------------------------------------------------------

    def compute_output_shape(self, input_shape):
        """The output shape (no batch axis) of this model used as a layer on
        inputs of `input_shape`; raises ValueError naming the model."""
        shape = tuple(input_shape)
        if self.built:
            if shape != self._input_shape:
                raise ValueError('Input 0 of model "%s" is incompatible with it: expected '
                                 "shape %s, got %s" % (self.name, shape_str(self.input_shape),
                                                      shape_str((None,) + shape)))
            return tuple(self.output_shape[1:])
        shapes = self._infer_shapes(shape, self._layers)
        return shapes[-1][1] if shapes else shape

    def _leaves(self):
        """The layers that run, in order: nested models' layers in their place."""
        out = []
        for layer in self._layers:
            out.extend(layer._leaves() if isinstance(layer, Sequential) else [layer])
        return out

    def _weighted_leaves(self):
        return [layer for layer in self._leaves() if layer.weight_specs(layer.input_shape[1:])]

    def __call__(self, x, training=None, **kwargs):
        """On a KerasTensor: the model as a layer of a functional model (its
        weights shared). On data: its predictions (inference), as predict."""
        from .symbolic import call_symbolic, is_symbolic
        if is_symbolic(x):
            if training is not None:
                kwargs["training"] = training
            if not self.built and not isinstance(x, (list, tuple)):
                self.build(x.shape)         # as Keras builds a model called on a tensor
            return call_symbolic(self, x, kwargs, 'model "%s"' % self.name)
        if kwargs:
            raise TypeError("unexpected arguments %s" % ", ".join(sorted(kwargs)))
        if training:
            return self._training_forward(x)
        return self.predict(x, verbose=0)

    @exclusive
    def _training_forward(self, x):
        """``model(x, training=True)``: the outputs of one training-mode
        forward over all of x, as Keras 3's: Dropout draws its masks (the
        engine's next ones, as fit's next step would), BatchNormalization
        normalizes by the batch's statistics and updates its moving ones;
        no gradient, no optimizer step."""
        from .checks import check_x
        if isinstance(x, (list, tuple)):
            x = np.asarray(x)
        if not isinstance(x, np.ndarray):
            raise TypeError("x: expected a NumPy array of samples, got %s" % type(x).__name__)
        self._build_from_data(x)
        x = check_x(x, self.input_shape[1:], "x")
        if self._strategy is not None:
            raise ValueError("training: calling a model with training=True under a "
                             "distribution strategy is not supported (its replicas train in "
                             "fit only); call it outside strategy.scope()")
        net = self._get_net(config.resolve_device(self._device), "forward", len(x))
        y = net.forward(self._engine_x(np.ascontiguousarray(x)), training=True)
        self._claim_leaves()        # the moving statistics changed here
        return self._keras_y(np.asarray(y))

    # -- weights shared between models ---------------------------------------------
    #
    # A layer may be in several models (a model used as a layer, layers of
    # one functional graph in two models). Each model's engine network has
    # its own copy of the weights; the layer names the model whose network
    # has its latest weights (layer._holder), and that model's version
    # (_weights_version: changes whenever its network may have changed them).
    # Before a model's network is used, _pull_shared copies the layers that
    # another model changed since; a model about to change them (a training
    # network, set_weights) takes them (_claim_leaves). So training one model
    # changes the other's predictions, as Keras's shared variables do.

    def _weights_version(self):
        return (self._claims, self._iterations())

    def _pull_shared(self, net):
        """Copies into `net` (this model's network, or a copy of it for
        another engine) the weights of its layers that another model holds
        newer."""
        if self._pulling:
            return
        stale = []
        for layer in self._weighted_leaves():
            holder = layer._holder
            if holder is None:
                layer._holder = self
            elif holder is not self:
                version = holder._weights_version()
                if self._synced.get(layer) != version:
                    stale.append((layer, holder, version))
        if not stale:
            return
        self._pulling = True
        try:
            weights, theirs = net.get_weights(), {}
            for layer, holder, _ in stale:
                if id(holder) not in theirs:        # one read of each holder's weights
                    theirs[id(holder)] = holder.get_weights()
                start, count = self._layer_slice(layer)
                h_start, _ = holder._layer_slice(layer)
                weights[start:start + count] = theirs[id(holder)][h_start:h_start + count]
            net.set_weights(weights)
        finally:
            self._pulling = False
        if net is self._net:
            for layer, _, version in stale:
                self._synced[layer] = version

    def _claim_leaves(self):
        """This model's network is about to change its weights: it holds the
        latest of all its layers from now on."""
        self._claims += 1
        for layer in self._weighted_leaves():
            layer._holder = self

    def _drop_net(self):
        """Forgets the engine network after a change of layers, keeping its
        weights and, when it was built for this compile, its optimizer state."""
        if self._net is not None:
            self._carried = self._net.get_weights()
            if self._net_compile == self._compile_version:
                self._carried_state = self._net.get_optimizer_state()
            self._net = self._net_optimizer = None

    @exclusive
    def _park_net(self):
        """_drop_net at interpreter exit (park_networks_at_exit)."""
        self._drop_net()

    def _forget_failed_group(self, exc):
        """fit stopped with `exc`. A group of replicas in other processes too
        is aborted, since its other ranks would wait for this one (a group of
        this process's replicas stays: they all finished their calls, so an
        interrupted fit can go on). A failed group is dropped: the next fit
        builds a new one from the weights and optimizer state of the last step
        every replica completed (the first replica's)."""
        net = self._net
        if not isinstance(net, distribute.ReplicaGroup):
            return
        if net.spans_processes:
            net.fail("%s: %s" % (type(exc).__name__, exc))
        if net.failed:
            try:
                self._drop_net()
            except Exception:       # the weights cannot be read: the group stays, failed
                pass

    @exclusive
    def add(self, layer):
        """Appends a layer (or a model, which runs as one layer); with a known
        input shape its output shape is checked now, and a layer that does not
        fit leaves the model unchanged."""
        self._append(layer, shared=False)

    def _append(self, layer, shared):
        """add's work; `shared`: the layer may be in other models already
        (the functional API's layers), not only in this one."""
        from .symbolic import KerasTensor
        if isinstance(layer, KerasTensor) and isinstance(layer._layer, InputLayer) \
                and not layer._inputs:
            layer = layer._layer            # Sequential([keras.Input(shape), ...])
        if isinstance(layer, Layer) and _is_block(layer):
            layer = self._block_in_place(layer)
        if not isinstance(layer, (Layer, Sequential)):
            raise TypeError("layer: expected a cnncuda layer such as layers.Dense(10), got %r"
                            % (layer,))
        if layer is self:
            raise ValueError('layer: model "%s" cannot be a layer of itself' % self.name)
        if isinstance(layer, Sequential):
            taken = set(map(id, self._leaves()))
            if any(id(leaf) in taken for leaf in layer._leaves()):
                raise ValueError('layer: model "%s" shares layers with model "%s": a layer runs '
                                 "once in a model" % (layer.name, self.name))
            if self in _all_models(layer):
                raise ValueError('layer: model "%s" holds model "%s"' % (layer.name, self.name))
        elif layer._model is not None and not shared:
            raise ValueError('layer: "%s" already belongs to model "%s"'
                             % (layer.name, layer._model.name))
        if isinstance(layer, InputLayer):
            if self._layers or self._input_shape is not None:
                raise ValueError("layer: an Input must come first, and only once")
            self._input_shape = layer._input_shape_arg
            return
        if any(existing.name == layer.name for existing in self._layers):
            raise ValueError("All layers added to a Sequential model should have unique names. "
                             'Name "%s" is already the name of a layer in this model. Update the '
                             "`name` argument to pass a unique name." % layer.name)
        input_shape = self._input_shape
        first_shape = layer._input_shape if isinstance(layer, Sequential) \
            else layer._input_shape_arg
        if not self._layers and first_shape is not None:
            if input_shape is not None and input_shape != first_shape:
                raise ValueError('layer "%s": input_shape %s differs from the Input %s'
                                 % (layer.name, first_shape, input_shape))
            input_shape = first_shape
        if input_shape is not None:
            self._infer_shapes(input_shape, self._layers + [layer])   # raises, changes nothing
        self._drop_net()
        self._layers.append(layer)
        if not isinstance(layer, Sequential) and layer._model is None:
            layer._model = self
        if input_shape is not None:
            self._commit_shapes(input_shape)

    def _block_in_place(self, block):
        """The traced model of a block (a Layer subclass with a call,
        cnncuda/subclassing.py) added here: its input shape must be known."""
        from .subclassing import block_model
        if self._layers:
            shape = self._layers[-1].output_shape[1:] if self.built else None
        else:
            shape = self._input_shape or block._input_shape_arg
        if shape is None:
            raise ValueError('layer "%s" (%s): a layer subclass with a call is traced on its '
                             "input shape when it is added, and this model's is not known yet "
                             "(give the model a keras.Input(shape=...) first, or the layer "
                             "input_shape=)" % (block.name, type(block).__name__))
        return block_model(block, tuple(shape))

    @exclusive
    def pop(self):
        """Removes the last layer (its weights go; the others keep theirs)."""
        if not self._layers:
            raise TypeError("There are no layers in the model.")
        last = self._layers[-1]
        if isinstance(last, Sequential) and self.built and \
                any(leaf._holder is self for leaf in last._weighted_leaves()):
            last.set_weights(last.get_weights())    # the model keeps what training here gave
        self._drop_net()
        layer = self._layers.pop()
        leaves = layer._leaves() if isinstance(layer, Sequential) else [layer]
        for leaf in leaves:
            if leaf._holder is self:
                leaf._holder = None
            self._synced.pop(leaf, None)
        if not isinstance(layer, Sequential) and layer._model is self:
            layer._model = None
            layer.input_shape = layer.output_shape = None
        if self._carried is not None:
            self._carried = self._carried[:len(self._weight_specs())] if self.built else None
        if self._carried_state is not None:
            trainable = sum(1 for spec in self._weight_specs() if spec[3]) if self.built else 0
            self._carried_state = dict(self._carried_state,
                                       slots=self._carried_state["slots"][:trainable])
        return layer

    @exclusive
    def build(self, input_shape=None):
        """Sets the input shape, Keras style: ``build((None, 28, 28, 1))``."""
        if input_shape is None:
            self._require_built()
            return
        if not isinstance(input_shape, (tuple, list)) or len(input_shape) not in (2, 3, 4):
            raise ValueError("input_shape: expected (None, height, width, channels), (None, "
                             "height, width) or (None, features), got %r" % (input_shape,))
        shape = tuple(input_shape)[1:]
        InputLayer(input_shape=shape, name="_check")        # checks the dimensions
        if self.built:
            if shape != self._input_shape:
                raise ValueError("input_shape: the model is built for %s, got %s"
                                 % (shape_str(self.input_shape), shape_str((None,) + shape)))
            return
        self._infer_shapes(shape, self._layers)
        self._commit_shapes(shape)

    def _build_from_data(self, x, arg="x"):
        """Builds an unbuilt model from the shape of its first data."""
        if self.built:
            return
        shape = np.shape(x)
        if len(shape) not in (2, 3, 4):
            raise ValueError("%s: expected an array of shape (None, height, width, channels), "
                             "(None, height, width) or (None, features), got %s"
                             % (arg, shape_str(shape)))
        self.build((None,) + tuple(shape[1:]))

    def _require_built(self):
        if not self.built:
            raise ValueError("This model has not yet been built. Build the model first by "
                             "calling `build()` or by calling the model on a batch of data, or "
                             "give the first layer an `input_shape`.")

    def _engine_layers(self):
        return self._engine_block(0, -1)

    def _engine_block(self, offset, source):
        """The engine layers of this model placed at index `offset` of a
        network, its input the output of engine layer `source` (-1 the
        network's input); a model inside reads the layer before it."""
        out = []
        for entry in self._layers:
            start = offset + len(out)
            if isinstance(entry, Sequential):
                dicts = entry._engine_block(start, start - 1 if out else source)
            else:
                dicts = [dict(d) for d in entry.engine_layers()]
            if id(entry) in self._inference_calls:
                dicts = inference_form(dicts)
            if not out and dicts and source != start - 1 and "inputs" not in dicts[0]:
                dicts[0]["inputs"] = [source]
            out.extend(dicts)
        return out

    def _engine_input_shape(self):
        """The engine's input shape: images without a channel axis, (height,
        width) as in Keras's first MNIST lessons, are one row of `height`
        pixels by `width` channels, (1, height, width): flattened, they give
        Keras's order, and a BatchNormalization over their last axis (the
        channels) is Keras's too."""
        shape = self._input_shape
        return (1,) + shape if len(shape) == 2 else shape

    def _engine_data(self, x, arg="x", allow_empty=False, finite=False):
        """x checked against the model's input (check_x), as the engine
        takes it (functional models of several inputs pack theirs)."""
        from .checks import check_x
        return self._engine_x(check_x(x, self.input_shape[1:], arg, allow_empty, finite))

    def _engine_prefix(self):
        """How many engine layers come before the first layer's (the
        inputs' slices of a functional model of several inputs)."""
        return 0

    def _engine_x(self, x):
        """Samples checked against input_shape, as the engine takes them (a view)."""
        if len(self._input_shape) == 2:
            return x.reshape((len(x),) + self._engine_input_shape())
        return x

    def _initial_values(self, first):
        """{index in get_weights: initial array} of the weights from index
        `first` on whose initializers are not the ones the engines draw
        (cnncuda.initializers says how the values are keyed)."""
        from .reference import rng_key
        drawn, k, engine_index = {}, 0, self._engine_prefix()
        for layer in self._leaves():     # in the engine's order (_engine_block)
            inits = layer.weight_initializers()
            for name, shape, _ in layer.weight_specs(layer.input_shape[1:]):
                init = inits.get(name)
                if k >= first and init is not None and not _engine_default(name, init):
                    key = rng_key(self.seed, 2 * engine_index)
                    if name != "kernel":
                        key = rng_key(key, initializers.ROLE_STREAMS[name])
                    drawn[k] = init.draw(shape, key)
                k += 1
            engine_index += len(layer.engine_layers())
        return drawn

    @property
    def trainable(self):
        """Keras's model.trainable: setting it sets every layer's."""
        return self._trainable

    @trainable.setter
    def trainable(self, value):
        from .checks import boolean
        value = boolean(value, "trainable")
        for layer in self._layers:
            layer.trainable = value
        self._trainable = value

    def _keras_y(self, y):
        """The engine's outputs in the model's output shape: an output of two
        axes (A, B) (after a Reshape) is the engine's image (1, A, B)."""
        return y.reshape((len(y),) + tuple(self.output_shape[1:]))

    def _empty_outputs(self):
        """predict's outputs for no samples."""
        return np.zeros((0,) + tuple(self.output_shape[1:]), np.float32)

    def _weight_specs(self):
        """[(layer, name, shape, trainable)] in get_weights order."""
        return [(layer, name, shape, trainable) for layer in self._leaves()
                for name, shape, trainable in layer.weight_specs(layer.input_shape[1:])]

    # -- the engine network ---------------------------------------------------

    def _current_net(self):
        """The engine network if it was built for the current compile, else None."""
        if self._net is not None and self._net_compile == self._compile_version:
            return self._net
        return None

    def _optimizer_state(self):
        """The optimizer state training continues from (engine form): the
        current network's, else the one waiting for the next network, else a
        fresh one (no slots: they start at zero)."""
        net = self._current_net()
        if net is not None:
            return net.get_optimizer_state()
        if self._carried_state is not None:
            return self._carried_state
        return {"steps": 0, "training_forwards": 0, "slots": []}

    def _iterations(self):
        net = self._current_net()
        if net is not None:
            steps = net.steps
        elif self._carried_state is not None:
            steps = self._carried_state["steps"]
        else:
            steps = 0
        return self._iterations_offset + int(steps)

    _iterations = exclusive(_iterations, "optimizer.iterations")

    def _output_classes(self):
        shape = self.output_shape[1:]
        return shape[0] if len(shape) == 1 else None

    def _get_net(self, device, purpose, batch_size=32):
        """The engine network on `device` for 'weights', 'predict', 'evaluate',
        'train' (with batches of `batch_size`) or 'forward' (a training-mode
        forward of `batch_size` samples, no step), built or rebuilt as needed
        with the current weights. The old network stays if building fails, and
        stays the model's network when inference runs on another engine after
        training began (the new one is then a copy for that call); on the same
        engine in another precision (cnncuda.config's TF32 switch) the new one
        replaces it, optimizer state carried.

        Under a distribution strategy, training builds the strategy's group
        of replicas (batch_size is then the whole batch of all of them), and
        inference runs on the group's first local replica once it exists, in
        the group's precision (a TF32 switch takes effect at the next fit):
        only fit makes a collective call, so a script may evaluate or predict
        on one rank alone."""
        self._require_built()
        if not self._layers:
            raise ValueError("the model has no layers: add some first")
        net = self._net
        strategy = self._strategy
        group = strategy is not None and (
            purpose == "train" or (purpose in ("evaluate", "predict")
                                   and isinstance(net, distribute.ReplicaGroup)))
        if group:
            device = strategy.key
            precision = config.precision_for(strategy.engine, self.dtype_policy)
            if purpose != "train" and net is not None:
                # inference makes no collective call: a group keeps its
                # precision until the next fit rebuilds it
                precision = self._net_precision
        else:
            precision = config.precision_for(device, self.dtype_policy)
        fits = net is not None and (purpose == "weights" or (self._net_device == device and
                                                             self._net_precision == precision))
        if fits and purpose in ("evaluate", "train"):
            fits = (self._net_compile == self._compile_version
                    and self._net_loss == self._engine_loss())
        if fits and purpose in ("train", "forward"):
            fits = net.max_batch >= batch_size
        if fits and purpose != "weights":
            # a layer setting changed since the build (layer.rate = 0.5): Keras
            # uses it from the next call on; the network is rebuilt for it.
            # Freezing (layer.trainable) matters to training only.
            if purpose == "train":
                fits = self._engine_layers() == self._net_layers
            else:
                fits = _inference_form(self._engine_layers()) == \
                    _inference_form(self._net_layers)
        if fits:
            self._pull_shared(net)
            if purpose == "train":
                self._sync_optimizer(net)
                self._claim_leaves()
            return net
        compiled = self.loss is not None
        if purpose in ("evaluate", "train") and not compiled:
            raise RuntimeError("You must compile your model before training/testing. "
                               "Use `model.compile(optimizer, loss)`.")
        if purpose == "weights":     # any engine holds weights; cpu is always built
            device, batch_size, precision = "cpu", 32, "float32"
        elif purpose == "forward":
            batch_size = max(batch_size, net.max_batch if net is not None else 32)
        elif purpose != "train" and net is not None:
            batch_size = net.max_batch
        args = (self._engine_layers(), self._engine_input_shape(), batch_size,
                self._engine_loss() if compiled else _PLACEHOLDER_LOSS,
                self._compiled_optimizer if compiled else _PLACEHOLDER_OPTIMIZER)
        if group:
            if isinstance(self.loss, several_outputs.OutputLosses):
                raise ValueError("fit: model \"%s\" has %d outputs; data parallel training "
                                 "(a distribution strategy) of a model of several outputs is "
                                 "not supported: compile it outside strategy.scope()"
                                 % (self.name, len(self.loss.names)))
            new = strategy.make_group(*args, seed=self.seed, precision=precision)
        else:
            new = make_net(device, *args, seed=self.seed, precision=precision)
        if net is not None:
            new.set_weights(net.get_weights())
        else:
            # the weights a dropped network carried, then the initial values
            # of the others where their initializers are not the engines'
            carried = list(self._carried or [])
            weights = new.get_weights()
            count = min(len(carried), len(weights))
            drawn = self._initial_values(count)
            if count or drawn:
                new.set_weights(carried[:count] + [drawn.get(k, weights[k])
                                                   for k in range(count, len(weights))])
        current = self._current_net() is not None
        if (current and net.steps > 0 and purpose in ("predict", "evaluate")
                and device != self._net_device):
            self._pull_shared(new)
            return new      # inference elsewhere: a copy, so the optimizer state stays put
        # (on the same engine in another precision, the new network takes
        # the old one's place, optimizer state and all, so that the next
        # inference does not build it again)
        if compiled:
            state = net.get_optimizer_state() if current else self._carried_state
            if current and _trainable_flags(args[0]) != _trainable_flags(self._net_layers):
                # a layer was frozen or unfrozen since this compile's network was built
                if state["steps"] > 0:
                    raise ValueError(
                        "layer.trainable: the trainable weights changed since the model was "
                        "compiled and trained (%d now, %d then); compile the model again to "
                        "train with the new setting (Keras 3 needs that too)"
                        % (sum(1 for spec in self._weight_specs() if spec[3]),
                           len(state["slots"])))
                state = None        # nothing trained yet: the optimizer starts afresh
            if state is not None:
                _set_optimizer_state(new, state)
            self._carried_state = None
        self._net, self._net_device, self._carried = new, device, None
        self._net_precision = precision
        self._net_compile = self._compile_version if compiled else None
        self._net_optimizer, self._net_layers, self._net_loss = args[4], args[0], args[3]
        self._pull_shared(new)
        if purpose == "train":
            self._sync_optimizer(new)
            self._claim_leaves()
        return new

    def _engine_loss(self):
        """The engine's loss dict: the compiled loss's, or while a weighted
        fit or evaluate runs, the categorical cross-entropy that its
        weighted targets are given to, or for the other losses the same
        loss with the weight after each target row (sample_weights.py)."""
        if isinstance(self.loss, several_outputs.OutputLosses):
            return self.loss.engine_loss(bool(self.__dict__.get("_weighted")))
        loss = self.loss.engine_loss()
        if self.__dict__.get("_weighted"):
            loss = dict(loss, kind="categorical_crossentropy") if loss["kind"] in (
                "sparse_categorical_crossentropy", "categorical_crossentropy") \
                else dict(loss, weighted=True)     # the weight after each target row
        return loss

    def _sync_optimizer(self, net):
        """Gives the model's network the optimizer's hyperparameters as they
        are now, when they changed since it got them: Keras uses a value set
        after compile (model.optimizer.learning_rate = ...) from the next
        step on. The network keeps the layout of the compile (Adam's moments,
        SGD's velocity or none)."""
        wanted = self.optimizer.engine_optimizer()
        if wanted == self._net_optimizer:
            return
        cls = type(self.optimizer).__name__
        if wanted["kind"] in ("sgd", "rmsprop") and wanted["momentum"] and \
                not self._compiled_optimizer["momentum"]:
            raise ValueError("optimizer.momentum: the model was compiled with momentum 0, so its "
                             "optimizer keeps no %s; got %r: compile again with "
                             "%s(momentum=%r) to train with momentum"
                             % ("velocity" if wanted["kind"] == "sgd" else "momentum slot",
                                wanted["momentum"], cls, wanted["momentum"]))
        if wanted["kind"] == "rmsprop" and \
                wanted["centered"] != self._compiled_optimizer["centered"]:
            raise ValueError("optimizer.centered: the model was compiled with centered=%r, got "
                             "%r: compile again with RMSprop(centered=%r)"
                             % (self._compiled_optimizer["centered"], wanted["centered"],
                                wanted["centered"]))
        net.set_optimizer(wanted)
        self._net_optimizer = wanted

    @property
    def dtype_policy(self):
        """Keras's dtype policy of the model: the global policy when it was
        made (keras.mixed_precision); it picks the GPU engines' precision."""
        return self.__dict__.get("_dtype_policy") or mixed_precision.Policy("float32")

    @property
    def compute_dtype(self):
        return self.dtype_policy.compute_dtype

    @property
    def variable_dtype(self):
        return self.dtype_policy.variable_dtype

    def _loss_scale(self):
        """The loss scale of the next step (LossScaleOptimizer): the
        network's, or the one a dropped network or a file left for the next;
        None before any (the initial scale then)."""
        net = self._current_net()
        if net is not None:
            state = net.get_loss_scale_state()
        else:
            state = (self._carried_state or {}).get("loss_scale")
        return None if state is None else float(state[0])

    @property
    def device(self):
        """The engine the model would run on now (see cnncuda.config)."""
        return config.resolve_device(self._device)

    # -- compile ---------------------------------------------------------------

    @exclusive
    def compile(self, optimizer="rmsprop", loss=None, metrics=None, loss_weights=None,
                weighted_metrics=None, run_eagerly=None, steps_per_execution=None,
                jit_compile=None, device=None):
        """Sets the optimizer ('adam', 'sgd', 'rmsprop', 'adagrad', 'adadelta',
        'adamax', 'nadam', 'adamw' or an object; the default is Keras's,
        'rmsprop'), the loss (a name or a loss object), metrics (['accuracy']
        or none) and, optionally, the engine (``device='cpu'`` and so on; see
        cnncuda.config). The optimizer starts afresh; the weights stay. A
        model of several outputs takes a loss per output, ``loss_weights``
        and metrics per output, as Keras 3 (cnncuda/several_outputs.py)."""
        opt = optimizers.get(optimizer)
        if self.dtype_policy.name == "mixed_float16" and \
                not isinstance(opt, mixed_precision.LossScaleOptimizer):
            # Keras 3 (auto_scale_loss): dynamic loss scaling under mixed_float16
            opt = mixed_precision.LossScaleOptimizer(opt, name="loss_scale_optimizer")
            opt._made_by_compile = True
        several = self.built and getattr(self, "_several_outputs", False)
        if several:     # a loss per output (several_outputs.py)
            loss_obj = several_outputs.compile_losses(self, loss, loss_weights)
            compiled, metric_outputs = several_outputs.compile_metrics(
                self, metrics, loss_obj, _compiled_metrics)
        else:
            if loss is None:
                raise ValueError("loss: expected one of %s or a loss object, got None"
                                 % ", ".join(repr(k) for k in losses.KINDS))
            loss_obj = losses.get(loss)
            if metrics is None:
                metrics = []
            if isinstance(metrics, str) or not isinstance(metrics, (list, tuple)):
                raise TypeError("metrics: expected a list such as ['accuracy'], got %r"
                                % (metrics,))
            compiled = _compiled_metrics(metrics, loss_obj.kind)
            metric_outputs = [0] * len(compiled)
        if loss_weights is not None and not several:
            raise ValueError("loss_weights: expected None (a weight per output is for a model of "
                             "several outputs), got %r" % (loss_weights,))
        if weighted_metrics is not None:
            raise ValueError("weighted_metrics: expected None (not supported), got %r"
                             % (weighted_metrics,))
        if steps_per_execution not in (None, 1) and not isinstance(steps_per_execution, int):
            raise TypeError("steps_per_execution: expected an int, got %r" % (steps_per_execution,))
        if device is not None:
            config.engine_for(device)          # a bad or unavailable engine fails here
        if self.built and not several:
            _check_loss_fits(loss_obj, self.output_shape)
        self.optimizer, self.loss, self._device = opt, loss_obj, device
        self._compiled_optimizer = opt.engine_optimizer()
        if distribute.has_strategy():       # compiled under strategy.scope()
            if self._strategy is not distribute.get_strategy():
                self._drop_net()
            self._strategy = distribute.get_strategy()
        self._metrics = compiled
        self._metric_outputs = metric_outputs   # the output each metric reads
        # the first of the engine's accuracy names (callbacks' mode='auto')
        self.metric_name = next((name for name, obj in compiled if obj is None), None)
        opt._model = self
        self._compile_version += 1
        self._carried_state = None
        self._iterations_offset = 0

    @property
    def metrics_names(self):
        if isinstance(self.loss, several_outputs.OutputLosses):     # evaluate's list order
            return several_outputs.metric_values(self, {}, names=True)
        return ["loss"] + [name for name, _ in self._metrics]

    def _host_metrics(self):
        return [obj for _, obj in self._metrics if obj is not None]

    def _compile_metrics_config(self):
        """compile's metrics as saved: strings, and Keras's form of the objects
        (with several outputs a list of them per output)."""
        if isinstance(self.loss, several_outputs.OutputLosses):
            return several_outputs.metrics_config(self, metrics_module.serialize)
        return [name if obj is None else getattr(obj, "_from_string", None)
                or metrics_module.serialize(obj)
                for name, obj in self._metrics]

    # -- training and inference (cnncuda/training.py) ----------------------------

    @exclusive
    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose="auto", callbacks=None,
            validation_split=0.0, validation_data=None, shuffle=True, class_weight=None,
            sample_weight=None, initial_epoch=0, steps_per_epoch=None, validation_steps=None,
            validation_batch_size=None, validation_freq=1):
        """Trains for `epochs` epochs; returns a History (see cnncuda.training.fit)."""
        return training.fit(self, x, y, batch_size, epochs, verbose, callbacks, validation_split,
                            validation_data, shuffle, class_weight, sample_weight, initial_epoch,
                            steps_per_epoch, validation_steps, validation_batch_size,
                            validation_freq)

    @exclusive
    def evaluate(self, x=None, y=None, batch_size=None, verbose="auto", sample_weight=None,
                 steps=None, callbacks=None, return_dict=False):
        """[loss, accuracy] (or the loss alone without metrics; a dict with
        return_dict=True) over all of x, in inference mode."""
        return training.evaluate(self, x, y, batch_size, verbose, sample_weight, steps,
                                 callbacks, return_dict)

    @exclusive
    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None):
        """The model's outputs for x, float32 of shape (n,) + output shape."""
        return training.predict(self, x, batch_size, verbose, steps, callbacks)

    @exclusive
    def train_on_batch(self, x, y=None, sample_weight=None, class_weight=None,
                       return_dict=False):
        """One optimizer step on the batch (x, y), as Keras's: returns the
        batch's loss (and accuracy) computed in the step's forward pass -- a
        float, [loss, accuracy], or a dict with return_dict=True. The values
        are checked first (finite, labels in range), so a refused batch
        leaves the model as it was."""
        return self._on_batch("train", x, y, sample_weight, class_weight, return_dict)

    @exclusive
    def test_on_batch(self, x, y=None, sample_weight=None, return_dict=False):
        """The loss (and accuracy) of the batch (x, y) in inference mode, as
        Keras's: a float, [loss, accuracy], or a dict with return_dict=True."""
        return self._on_batch("test", x, y, sample_weight, None, return_dict)

    def _on_batch(self, kind, x, y, sample_weight, class_weight, return_dict):
        from .checks import boolean
        return_dict = boolean(return_dict, "return_dict")
        if self.loss is None:
            raise RuntimeError("You must compile your model before training/testing. "
                               "Use `model.compile(optimizer, loss)`.")
        if x is not None:
            self._build_from_data(x)
            self._engine_data(x, "x", finite=True)       # finite values: nothing runs on NaN
        x, y = training._data(self, x, y)
        w = sample_weights.weights(self, y, len(x), sample_weight, class_weight)
        metric_y = y            # the host metrics see the targets unweighted
        if w is not None:
            y = sample_weights.weighted_targets(self, y, w)
        device = config.resolve_device(self._device)
        host = self._host_metrics()
        for metric in host:
            metric.reset_state()
        with sample_weights.weighted(self, w is not None):
            if kind == "train":
                net = self._get_net(device, "train", len(x))
                self._data_token = None     # the step may reuse the resident batch buffers
                if host:    # the step's training forward (training.step_outputs)
                    training.update_host_metrics(self, host, metric_y,
                                                 training.step_outputs(self, net, x))
                loss_sum, correct = net.train_batch(x, y)
            else:
                net = self._get_net(device, "evaluate")
                loss_sum, correct = net.evaluate(x, y)
                if host:
                    training.update_host_metrics(self, host, metric_y, net.predict(x))
        logs = training._logs(self, loss_sum, correct, len(x))
        if return_dict:
            return logs
        values = training.metric_values(self, logs)
        return values if len(values) > 1 else values[0]

    @exclusive
    def predict_on_batch(self, x):
        """The outputs for the batch x in inference mode (float32, as predict)."""
        from .data import feed
        if feed.is_stream(x):
            raise TypeError("x: expected an array of samples, got %s (use predict for a "
                            "dataset or generator)" % type(x).__name__)
        if x is None:
            raise ValueError("x: expected an array of samples, got None")
        return training.predict(self, x, max(training.sample_count(self, x), 1), 0, None, None)

    # -- layers and variables --------------------------------------------------

    def get_layer(self, name=None, index=None):
        """A layer by its name or by its index in ``model.layers`` (Keras's rules)."""
        if index is not None and name is not None:
            raise ValueError("Provide only a layer name or a layer index. Received: index=%r, "
                             "name=%r." % (index, name))
        if index is not None:
            if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
                raise TypeError("index: expected an int, got %r" % (index,))
            if len(self.layers) <= index:
                raise ValueError("Was asked to retrieve layer at index %d but model only has "
                                 "%d layers." % (index, len(self.layers)))
            return self.layers[index]
        if name is not None:
            if not isinstance(name, str):
                raise TypeError("name: expected a layer name (str), got %r" % (name,))
            for layer in self.layers:
                if layer.name == name:
                    return layer
            raise ValueError("No such layer: %s. Existing layers are: %s."
                             % (name, [layer.name for layer in self.layers]))
        raise ValueError("Provide either a layer name or layer index at `get_layer`.")

    @property
    def weights(self):
        """Every weight as a Variable (cnncuda.variables), in get_weights order
        ([] before the model is built)."""
        from .variables import Variable
        if not self.built:
            return []
        return [Variable(self, layer, name, shape, trainable)
                for layer, name, shape, trainable in self._weight_specs()]

    @property
    def trainable_weights(self):
        return [v for v in self.weights if v.trainable]

    @property
    def non_trainable_weights(self):
        return [v for v in self.weights if not v.trainable]

    @property
    def variables(self):
        return self.weights

    @property
    def trainable_variables(self):
        return self.trainable_weights

    @property
    def non_trainable_variables(self):
        return self.non_trainable_weights

    # -- weights ---------------------------------------------------------------

    @exclusive
    def get_weights(self):
        """Every weight in Keras's order and layouts ([] before the model is built)."""
        if not self.built or not self._layers:
            return []
        return self._get_net(None, "weights").get_weights()

    @exclusive
    def set_weights(self, weights):
        """Sets every weight; all shapes are checked before anything changes."""
        self._require_built()
        specs = self._weight_specs()
        weights = _weight_list(weights, "weights")
        if len(weights) != len(specs):
            raise ValueError("weights: expected a list of %d arrays, got %d"
                             % (len(specs), len(weights)))
        for i, (w, (layer, name, shape, _)) in enumerate(zip(weights, specs)):
            if np.shape(w) != tuple(shape):
                raise ValueError("weights[%d] (%s/%s): expected shape %s, got %s"
                                 % (i, layer.name, name, tuple(shape), np.shape(w)))
        self._get_net(None, "weights").set_weights(weights)
        self._claim_leaves()

    def _layer_slice(self, layer):
        start = 0
        for other in self._leaves():
            count = len(other.weight_specs(other.input_shape[1:]))
            if other is layer:
                return start, count
            start += count
        raise ValueError('layer "%s" is not in model "%s"' % (layer.name, self.name))

    def _layer_weights(self, layer):
        start, count = self._layer_slice(layer)
        return self.get_weights()[start:start + count]

    def _set_layer_weights(self, layer, weights):
        start, count = self._layer_slice(layer)
        weights = _weight_list(weights, "weights")
        if len(weights) != count:
            raise ValueError('layer "%s": weights: expected a list of %d arrays, got %d'
                             % (layer.name, count, len(weights)))
        full = self.get_weights()
        full[start:start + count] = weights
        self.set_weights(full)

    def count_params(self):
        """Every parameter, trainable or not."""
        self._require_built()
        return sum(layer.count_params() for layer in self._layers)

    # -- summary -------------------------------------------------------------------

    def profile(self, x, y, batch_size=32, steps=10, device=None):
        """Where a training step's time goes, per layer: each planned step's
        time (forward, data and weight gradients, the loss, the update) on
        the first batch_size samples, with its FLOPs, bytes and rates, and an
        ordinary step's time beside them (cnncuda.profile). The model is left
        as it was (a copy of its network is timed). device: another engine
        than the model's ('cpu', 'omp:4', 'cuda', 'cudnn')."""
        from .profile import profile_model
        if self.loss is None:
            raise RuntimeError("You must compile your model before profiling it. "
                               "Use `model.compile(optimizer, loss)`.")
        return profile_model(self, x, y, batch_size=batch_size, steps=steps, device=device)

    def summary(self, line_length=None, positions=None, print_fn=None):
        """Prints the layers, output shapes and parameter counts as Keras does."""
        self._require_built()
        connected = self._connections()        # a graph's: what each layer reads
        line_length = line_length or (98 if connected else 65)
        positions = positions or ([0.33, 0.55, 0.67, 1.0] if connected else [0.45, 0.85, 1.0])
        if positions[-1] <= 1:
            positions = [int(line_length * p) for p in positions]
        print_fn = print_fn or print

        def row(fields):
            line = ""
            for i, field in enumerate(fields):
                if i > 0:
                    line = line[:-1] + " "
                line += str(field)
                line = line[:positions[i]]
                line += " " * (positions[i] - len(line))
            print_fn(line)

        print_fn('Model: "%s"' % self.name)
        print_fn("_" * line_length)
        row(["Layer (type)", "Output Shape", "Param #"] + (["Connected to"] if connected else []))
        print_fn("=" * line_length)
        listed = self.layers
        for i, layer in enumerate(listed):
            row(["%s (%s)" % (layer.name, _display_class(layer)),
                 shape_str(layer.output_shape), layer.count_params()] +
                ([connected[i]] if connected else []))
            print_fn(("=" if i == len(listed) - 1 else "_") * line_length)
        if not listed:
            print_fn("=" * line_length)
        trainable = non_trainable = 0
        for _, _, shape, is_trainable in self._weight_specs():
            size = int(np.prod(shape))
            if is_trainable:
                trainable += size
            else:
                non_trainable += size
        print_fn("Total params: {:,}".format(trainable + non_trainable))
        print_fn("Trainable params: {:,}".format(trainable))
        print_fn("Non-trainable params: {:,}".format(non_trainable))
        print_fn("_" * line_length)

    def _connections(self):
        """A graph's "Connected to" column (None for a chain)."""
        return None

    # -- files ---------------------------------------------------------------------

    def get_config(self):
        """The architecture as JSON-able data (what a model file holds)."""
        return {"name": self.name, "seed": self.seed,
                "input_shape": list(self._input_shape) if self.built else None,
                "layers": [{"class_name": getattr(layer, "_class_name", type(layer).__name__),
                            "config": layer._architecture() if isinstance(layer, Sequential)
                            else layer.get_config()} for layer in self._layers]}

    def _architecture(self):
        """The config cnncuda's files and copies hold (get_config's; a
        subclassed model's get_config is its class's arguments instead)."""
        return Sequential.get_config(self)

    @classmethod
    def from_config(cls, config):
        """The model of a get_config() dict, with fresh weights."""
        return _model_from_config(cls._class_name, config)

    def __repr__(self):
        return "<%s name=%s, %d layers>" % (self._class_name, self.name, len(self.layers))


def _display_class(layer):
    """The class summary shows: Keras's for cnncuda's models, the user's for
    a subclassed model or a block (which run as functional models)."""
    if isinstance(layer, Sequential):
        if layer.__dict__.get("_subclassed"):
            return type(layer).__name__
        return layer.__dict__.get("_display_class") or layer._class_name
    return type(layer).__name__


def _is_block(layer):
    from .subclassing import is_block
    return is_block(layer)


def _all_models(model):
    """`model` and every model nested in it."""
    out = [model]
    for layer in model._layers:
        if isinstance(layer, Sequential):
            out.extend(_all_models(layer))
    return out


def _model_from_config(class_name, spec):
    """A Sequential or functional Model from its get_config() dict (the
    layers of a functional model are a chain: they run in the listed order)."""
    entries = [_deserialize(entry) for entry in spec["layers"]]
    shape = tuple(spec["input_shape"]) if spec.get("input_shape") else None
    if class_name == "Functional":
        from .functional import Model
        return Model._from_chain(shape, entries, name=spec["name"], seed=spec["seed"],
                                 input_name=spec.get("input_name"), reads=spec.get("reads"),
                                 inputs=spec.get("inputs"), outputs=spec.get("outputs"),
                                 inference_calls=spec.get("inference_calls", ()))
    model = Sequential(name=spec["name"], seed=spec["seed"])
    if shape is not None:
        model.add(InputLayer(input_shape=shape, name="_input"))
    for layer in entries:
        model.add(layer)
    return model


def _deserialize(entry):
    """A layer, or a nested model, from {"class_name", "config"}."""
    if isinstance(entry, dict) and entry.get("class_name") in ("Sequential", "Functional"):
        return _model_from_config(entry["class_name"], entry["config"])
    return deserialize(entry)


def park_networks_at_exit():
    """Run at interpreter exit just before the engines' memory is released
    (cnncuda/__init__.py): every model's network hands its weights and
    optimizer state to the model, so that an exit handler that runs later
    (one registered before cnncuda was imported) can still save, predict or
    train -- on a new network built from them. A model in use on another
    thread keeps its network (released with the others)."""
    for model in [ref() for ref in _LIVE]:
        if model is None:
            continue
        try:
            model._park_net()
        except Exception:       # busy on another thread, or its engine failed: left as it is
            pass


def _engine_default(name, init):
    """Whether `init` gives the values the engines draw for weight `name`
    themselves: an unseeded glorot_uniform kernel, zero biases and betas and
    moving means, unit gammas and moving variances."""
    if name == "kernel":
        return type(init) is initializers.GlorotUniform and init.seed is None
    if name in ("gamma", "moving_variance"):
        return type(init) is initializers.Ones or \
            (type(init) is initializers.Constant and init.value == 1.0)
    return type(init) is initializers.Zeros or \
        (type(init) is initializers.Constant and init.value == 0.0)


def _trainable_flags(layers):
    """The 'trainable' flag of each engine layer dict (True where absent)."""
    return [d.get("trainable", True) for d in layers or []]


def _inference_form(layers):
    """Engine layer dicts without what matters to training only (freezing)."""
    if layers is None:
        return None
    return [{k: v for k, v in d.items() if k != "trainable"} for d in layers]


def _set_optimizer_state(net, state):
    """Gives `net` an optimizer state taken from another network or a file;
    trainable weights past the end of its slots (layers added since) start at
    zero."""
    fresh = net.get_optimizer_state()["slots"]
    slots = list(state["slots"])[:len(fresh)]
    carried = {"steps": state["steps"], "training_forwards": state["training_forwards"],
               "slots": slots + fresh[len(slots):]}
    if state.get("loss_scale") is not None and net.get_loss_scale_state() is not None:
        carried["loss_scale"] = state["loss_scale"]     # dynamic loss scaling goes on
    net.set_optimizer_state(carried)


def _weight_list(weights, arg):
    if isinstance(weights, np.ndarray) or not isinstance(weights, (list, tuple)):
        raise TypeError("%s: expected a list of arrays, got %s" % (arg, type(weights).__name__))
    return list(weights)


def _check_loss_fits(loss, output_shape):
    """Keras's losses are taken along the output's last axis (at every other
    position of a sample, averaged)."""
    shape = tuple(output_shape)[1:]
    if loss.kind in ("sparse_categorical_crossentropy", "categorical_crossentropy") \
            and shape[-1] < 2:
        raise ValueError("loss: %s expects at least 2 outputs (classes), the model outputs %s; "
                         "use binary_crossentropy for one output"
                         % (loss.kind, shape_str(output_shape)))


from .functional import Model  # noqa: E402  (functional.py builds on Sequential)
# the files' side (model_loading.py); _model_from_bytes here too, by the name
# pickles of models made before it moved hold
from .model_loading import (_model_from_bytes, _subclass_from_bytes,  # noqa: E402, F401
                            load_model, model_from_json)
