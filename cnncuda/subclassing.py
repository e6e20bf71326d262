"""Subclassed models and layer blocks: Keras's ``call`` traced into a graph.

    class MyModel(keras.Model):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.conv1 = layers.Conv2D(32, 3, activation="relu")
            self.flatten = layers.Flatten()
            self.d1 = layers.Dense(128, activation="relu")
            self.drop = layers.Dropout(0.2)
            self.d2 = layers.Dense(10)

        def call(self, x, training=False):
            x = self.d1(self.flatten(self.conv1(x)))
            return self.d2(self.drop(x, training=training))

The engines run graphs of cnncuda's layers, not Python. So when such a model
is built (its first fit, evaluate, predict or call on data, or
``model.build(input_shape)``), ``call`` runs on a symbolic input
(``keras.Input`` of that shape: cnncuda.symbolic's KerasTensor) and what it
returns is the output of a functional graph (a model's call may return a
list of outputs: cnncuda/several_outputs.py), which the model then runs as
``keras.Model(inputs, outputs)`` would: the same engine network, weights and
bits. ``call`` is traced with ``training=True`` and with ``training=False``
(where it takes a ``training`` argument), and the two graphs must be the same
layers wired the same way: ``if training:`` that changes the graph is
refused. A layer called with ``training=training`` follows the engine's mode
(training in fit, inference in evaluate and predict), as in Keras; a fixed
mode (``training=False`` written on a Dropout) cannot be expressed and is
refused.

The traced model lists its layers, and orders its weights, in the order
call runs them (Keras: the order the attributes were set, which is the
same for a model that sets its layers in the order it calls them).

A ``keras.layers.Layer`` subclass whose ``call`` calls other layers (a
block) is traced the same way, once per instance, into a functional model
that stands in its place (``block_model``). A Layer subclass that makes
weights of its own (``add_weight``) or computes in Python cannot run on the
engines and is refused, naming its class.

Keras's custom training (``train_step``, ``test_step``, ``predict_step``,
``compute_loss``) is refused at compile and fit (``check_no_custom_steps``).
"""
import inspect
import threading

__all__ = ["trace", "block_model", "accepts_training", "in_trace", "check_no_custom_steps",
           "CUSTOM_STEPS", "snake_case", "is_block"]

# Model methods whose override means a custom training loop
CUSTOM_STEPS = ("train_step", "test_step", "predict_step", "compute_loss", "compute_metrics")

_STATE = threading.local()       # .modes: the training value of each trace being run


def snake_case(name):
    """Keras's default name of a subclass: 'MyModel' -> 'my_model'."""
    out = []
    for i, ch in enumerate(name):
        if ch.isupper() and i and (not name[i - 1].isupper() or
                                   (i + 1 < len(name) and name[i + 1].islower())):
            out.append("_")
        out.append(ch.lower())
    return "".join(out)


def is_block(layer):
    """Whether `layer` is a Layer subclass of the user's with a call method."""
    return callable(getattr(type(layer), "call", None))


def in_trace():
    """Whether a subclassed model's or a block's call is being traced."""
    return bool(getattr(_STATE, "modes", None))


def accepts_training(training):
    """A layer or model with Dropout or BatchNormalization inside was called
    with training=`training` during a trace: True where that follows the
    engine's mode (the value the trace passes to call), False where it fixes
    one (a literal, or no trace)."""
    modes = getattr(_STATE, "modes", None)
    if not modes or modes[-1] is None:
        return False
    return bool(training) is modes[-1]


def _takes_training(call):
    try:
        params = inspect.signature(call).parameters
    except (TypeError, ValueError):
        return False
    return "training" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def _run(owner, shape, training):
    """One trace of owner.call on a fresh Input of `shape`: (input, output)."""
    from .layers import Input
    from .symbolic import KerasTensor
    what = "%s.call" % type(owner).__name__
    inputs = Input(shape=shape, name="%s_input" % owner.name)
    modes = _STATE.__dict__.setdefault("modes", [])
    modes.append(training)
    try:
        if training is None:
            out = owner.call(inputs)
        else:
            out = owner.call(inputs, training=training)
    except (TypeError, ValueError, AttributeError, NotImplementedError, IndexError) as err:
        try:
            named = type(err)("%s (%s) cannot be traced into a graph of cnncuda layers: %s"
                              % (what, owner.name, err))
        except Exception:       # an exception class that takes other arguments
            raise err from None
        raise named from err
    finally:
        modes.pop()
    if isinstance(out, (list, tuple)) and len(out) == 1:
        out = out[0]
    from .functional import Model
    if isinstance(owner, Model) and isinstance(out, (list, tuple)) and \
            all(isinstance(t, KerasTensor) for t in out):
        return inputs, list(out)        # a model of several outputs (several_outputs.py)
    if not isinstance(out, KerasTensor):
        raise TypeError("%s (%s) returned %s: it must return the output tensor of a layer it "
                        "called on its input (one output; a model's call may return a list "
                        "of them; cnncuda runs call's layers as a graph, not the Python in it)"
                        % (what, owner.name, type(out).__name__ if not isinstance(out, (
                            list, tuple, dict)) else "%d outputs" % len(out)))
    return inputs, out


def trace(owner, shape):
    """Traces `owner.call` (a subclassed Model or a block) on inputs of
    `shape` (no batch axis): (input tensor, output tensor), from the trace
    with training=False. Where call takes `training`, the trace with
    training=True must give the same graph."""
    what = "%s.call" % type(owner).__name__
    if not _takes_training(owner.call):
        out = _run(owner, shape, None)
        _walk(owner, out)
        return out
    first = _run(owner, shape, True)
    second = _run(owner, shape, False)
    (_, a_layers, a_reads, _, _, _), (_, b_layers, b_reads, _, _, _) = (
        _walk(owner, first), _walk(owner, second))
    same = len(a_layers) == len(b_layers) and all(
        x is y for x, y in zip(a_layers, b_layers)) and a_reads == b_reads
    if not same:
        kinds = [type(x).__name__ for x in a_layers], [type(x).__name__ for x in b_layers]
        if kinds[0] == kinds[1] and a_reads == b_reads:
            why = ("it makes new layers each time it runs (create the layers in __init__ and "
                   "call them in call)")
        else:
            why = ("with training=True it runs %s, with training=False %s (cnncuda traces call "
                   "once and runs the graph in fit, evaluate and predict, so `if training:` "
                   "must not change which layers run; Dropout and BatchNormalization follow "
                   "the mode by themselves)"
                   % ([x.name for x in a_layers], [x.name for x in b_layers]))
        raise ValueError("%s (%s) builds a different graph for training=True than for "
                         "training=False: %s" % (what, owner.name, why))
    # the trace with training=True: a call that fixes training=False differs
    # from the mode there, so its output is marked (symbolic.call_symbolic)
    return first


def _walk(owner, traced):
    """functional._graph of a trace, its errors naming the class."""
    from .functional import _graph
    try:
        return _graph(*traced)
    except ValueError as err:
        raise ValueError("%s.call (%s): %s" % (type(owner).__name__, owner.name, err)) from err


def block_model(block, shape):
    """The functional model that runs `block` (a Layer subclass whose call
    calls other layers) on inputs of `shape`, traced once per block."""
    from .functional import Model
    shape = tuple(shape)
    model = block.__dict__.get("_block_traced")
    if model is not None:
        if model._input_shape != shape:
            raise ValueError('layer "%s" (%s) was built for inputs of shape %s and is now '
                             "called on %s: a layer takes one input shape"
                             % (block.name, type(block).__name__,
                                (None,) + model._input_shape, (None,) + shape))
        return model
    if type(block).build is not _layer_build():
        block.build((None,) + shape)
    inputs, outputs = trace(block, shape)
    model = Model(inputs, outputs, name=block.name)
    model._display_class = type(block).__name__
    if not block.trainable:
        model.trainable = False
    block._block_traced = model
    block.input_shape, block.output_shape = (None,) + shape, model.output_shape
    return model


def _layer_build():
    from .layers import Layer
    return Layer.build


def check_no_custom_steps(model):
    """Refuses a model subclass that overrides Keras's training steps."""
    from .functional import Model
    for name in CUSTOM_STEPS:
        mine = getattr(type(model), name, None)
        if mine is not None and mine is not getattr(Model, name, None):
            raise NotImplementedError(
                "%s.%s: custom training steps are not supported (cnncuda runs fit, evaluate "
                "and predict on its engines, whose steps are fixed: the forward of call's "
                "layers, the compiled loss, the optimizer); remove the override and use "
                "compile's loss and metrics" % (type(model).__name__, name))
