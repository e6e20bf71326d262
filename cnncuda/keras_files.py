"""Keras's own model files, written and read in Keras's layout, so that a
model trained here opens in Keras 3 (and TensorFlow) and a Sequential or
functional model saved by Keras loads here (nested models too; functional
graphs of one or several inputs and outputs; several outputs with a loss
per output, loss_weights and metrics per output in their compile settings;
a top-level subclassed model: keras_subclassed.py):

- ``.keras``: a zip of config.json (the architecture and compile settings as
  Keras serializes them), metadata.json and model.weights.h5 (each layer's
  variables under layers/<class name in snake case, numbered>/vars/<i>);
- ``.h5`` / ``.hdf5``: the legacy HDF5 file (attributes model_config and
  training_config, each layer's weights under model_weights/<layer>/).

Through h5py (an optional dependency: ``pip install h5py``). What crosses:
the layers cnncuda has (InputLayer, Conv2D, MaxPooling2D, AveragePooling2D,
GlobalAveragePooling2D, GlobalMaxPooling2D, Flatten, Dense, Dropout,
BatchNormalization, Activation, ReLU, LeakyReLU, ELU, PReLU, Softmax,
Rescaling, Reshape, ZeroPadding2D, Cropping2D, UpSampling2D,
SpatialDropout2D, Add, Concatenate, and the augmentation layers RandomFlip, RandomRotation,
RandomZoom, RandomTranslation, RandomContrast, RandomCrop, whose configs are
Keras's and which have no variables) with their weights, and the compile
settings (Adam, SGD, RMSprop, Adagrad, Adadelta,
Adamax, Nadam or AdamW with their hyperparameters,
the cross-entropy and regression losses, the metrics) and, in ``.keras`` files,
the optimizer's variables as Keras keeps them (optimizer/vars/<i>: the
iteration count, the learning rate, then the slots in Keras's order with
its names: ``Optimizer.slot_names``, ``keras_slot_order``; Nadam's
u_product last), so that training continues in either. What does not: the
optimizer state of ``.h5`` files (a model loaded from one, or from a
``.keras`` file whose optimizer variables do not match, starts its optimizer
afresh, as Keras does), and the dropout, augmentation and shuffling
counters, which only
cnncuda's own format keeps (any other extension,
docs/model-file-format.md).
"""
import datetime
import inspect
import io
import json
import re
import warnings
import zipfile

import numpy as np

from . import layers as layer_module
from . import shape_layers
from . import losses, mixed_precision, optimizers, schedules, several_outputs
from .atomic_file import write_atomically

__all__ = ["is_keras_path", "save", "load", "kind_of_bytes"]

_LAYER_MODULE = "keras.layers"
_LOSS_CLASSES = {"sparse_categorical_crossentropy": "SparseCategoricalCrossentropy",
                 "categorical_crossentropy": "CategoricalCrossentropy",
                 "binary_crossentropy": "BinaryCrossentropy",
                 "mean_squared_error": "MeanSquaredError",
                 "mean_absolute_error": "MeanAbsoluteError",
                 "huber": "Huber",
                 "mean_squared_logarithmic_error": "MeanSquaredLogarithmicError",
                 "log_cosh": "LogCosh",
                 "mean_absolute_percentage_error": "MeanAbsolutePercentageError"}


def is_keras_path(path):
    """'keras', 'h5' or None: the format a path's extension asks for."""
    name = str(path).lower()
    if name.endswith(".keras"):
        return "keras"
    if name.endswith((".h5", ".hdf5")):
        return "h5"
    return None


def kind_of_bytes(head):
    """'keras' (a zip), 'h5' (HDF5) or None, from a file's first bytes."""
    if head.startswith(b"PK\x03\x04"):
        return "keras"
    if head.startswith(b"\x89HDF\r\n\x1a\n"):
        return "h5"
    return None


def _h5py():
    try:
        import h5py
    except ImportError:
        raise ImportError("Keras's .keras and .h5 files need h5py: pip install h5py (or save "
                          "under another extension for cnncuda's own format)") from None
    return h5py


# -- cnncuda -> Keras ----------------------------------------------------------------

def _dtype_policy(policy="float32"):
    return {"module": "keras", "class_name": "DTypePolicy", "config": {"name": policy},
            "registered_name": None}


def _layer_config(layer):
    """(class_name, Keras config) of one of cnncuda's layers."""
    name = type(layer).__name__
    mine = layer.get_config()
    config = {"name": layer.name, "trainable": layer.trainable,
              "dtype": _dtype_policy(layer.dtype_policy.name)}
    weight_keys = ("kernel_initializer", "bias_initializer", "kernel_regularizer",
                   "bias_regularizer")
    if name in ("Conv2D",):
        config.update(filters=mine["filters"], kernel_size=mine["kernel_size"],
                      strides=mine["strides"], padding=mine["padding"],
                      data_format="channels_last", dilation_rate=[1, 1], groups=1,
                      activation=mine["activation"], use_bias=mine["use_bias"],
                      **{k: mine[k] for k in weight_keys})
    elif name in ("MaxPooling2D", "AveragePooling2D"):
        config.update(pool_size=mine["pool_size"], strides=mine["strides"],
                      padding=mine["padding"], data_format="channels_last")
    elif name in ("GlobalAveragePooling2D", "GlobalMaxPooling2D"):
        config.update(data_format="channels_last", keepdims=mine["keepdims"])
    elif name == "Flatten":
        config.update(data_format="channels_last")
    elif name == "Dense":
        config.update(units=mine["units"], activation=mine["activation"],
                      use_bias=mine["use_bias"], **{k: mine[k] for k in weight_keys})
    elif name == "Dropout":
        config.update(rate=mine["rate"], seed=None, noise_shape=None)
    elif name == "BatchNormalization":
        config.update(axis=mine["axis"], momentum=mine["momentum"], epsilon=mine["epsilon"],
                      center=True, scale=True,
                      **{k: mine[k] for k in ("beta_initializer", "gamma_initializer",
                                              "moving_mean_initializer",
                                              "moving_variance_initializer")})
    elif name == "Activation":
        config.update(activation=mine["activation"])
    elif name in ("ReLU", "LeakyReLU", "ELU", "PReLU", "Softmax"):
        config.update(mine)     # Keras's own arguments, as Keras writes them
        config.pop("input_shape", None)
    elif name in _AUGMENTATION:
        config.update(mine, name=layer.name)
        config.pop("input_shape", None)
        config["data_format"] = "channels_last"
    elif name in shape_layers.SHAPE_LAYER_CLASSES:
        config.update(shape_layers.keras_config(layer))
        if name == "SpatialDropout2D":      # Keras 3's takes no trainable argument
            del config["trainable"]
    elif name == "Add":
        pass
    elif name == "Concatenate":
        config.update(axis=mine["axis"])
    else:
        raise ValueError("layer %s: %s has no Keras form here" % (layer.name, name))
    return name, config


# the augmentation layers: their cnncuda config is Keras's (but data_format)
_AUGMENTATION = ("RandomFlip", "RandomRotation", "RandomZoom", "RandomTranslation",
                 "RandomContrast", "RandomCrop")


def _is_model(entry):
    return hasattr(entry, "_leaves")


def _class_of(entry):
    """Keras's class name of a layer or a model ('Sequential', 'Functional')."""
    return entry._class_name if _is_model(entry) else type(entry).__name__


def _input_entry(shape, name):
    return {"module": _LAYER_MODULE, "class_name": "InputLayer",
            "config": {"batch_shape": shape, "dtype": "float32", "sparse": False,
                       "ragged": False, "name": name, "optional": False},
            "registered_name": None}


def _entry(layer, input_shape):
    """Keras's serialized form of a layer or a nested model."""
    if _is_model(layer):
        return _model_entry(layer)
    class_name, config = _layer_config(layer)
    return {"module": _LAYER_MODULE, "class_name": class_name, "config": config,
            "registered_name": None, "build_config": {"input_shape": input_shape}}


def _model_entry(model):
    """Keras 3's serialized form of a Sequential or functional model (no
    compile config): a functional model's layers each with its inbound node,
    the keras_history of the layer before it (the graph is a chain)."""
    shape = [None] + list(model._input_shape)
    if model._class_name == "Sequential":
        entries = [_input_entry(shape, "input_layer")]
        entries += [_entry(layer, [None] + list(shape_in))
                    for layer, (shape_in, _) in zip(model._layers,
                                                    model._infer_shapes(model._input_shape,
                                                                        model._layers))]
        return {"module": "keras", "class_name": "Sequential",
                "config": {"name": model.name, "trainable": model.trainable,
                           "dtype": _dtype_policy(model.dtype_policy.name), "layers": entries,
                           "build_input_shape": shape},
                "registered_name": None, "build_config": {"input_shape": shape}}
    shapes = model._infer_shapes(model._input_shape, model._layers)
    inputs = model._input_layers
    place = {id(layer): i for i, layer in enumerate(model._layers)}
    entries = []
    for entry in _listing(model):   # Keras's order, each InputLayer in its place
        if id(entry) not in place:
            entries.append(dict(_input_entry([None] + list(entry._input_shape_arg), entry.name),
                                name=entry.name, inbound_nodes=[]))
            continue
        i, layer = place[id(entry)], entry
        tensors = []
        for j in model._reads[i]:
            source = [None] + list(model._source_shape(j, model._input_shape) if j < 0
                                   else shapes[j][1])
            tensors.append({"class_name": "__keras_tensor__",
                            "config": {"shape": source, "dtype": "float32",
                                       "keras_history": [inputs[-1 - j].name if j < 0
                                                         else model._layers[j].name, 0, 0]}})
        merge = getattr(layer, "_merge", False)
        shape_in = [t["config"]["shape"] for t in tensors] if merge else tensors[0]["config"]["shape"]
        entries.append(dict(_entry(layer, shape_in), name=layer.name,
                            inbound_nodes=[{"args": [tensors] if merge else tensors,
                                            "kwargs": {}}]))
    refs = [[layer.name, 0, 0] for layer in inputs]
    outs = [[model._layers[k].name, 0, 0] for k in model._ends]
    return {"module": "keras.src.models.functional", "class_name": "Functional",
            "config": {"name": model.name, "trainable": model.trainable, "layers": entries,
                       "input_layers": refs[0] if len(refs) == 1 else refs,
                       "output_layers": outs[0] if len(outs) == 1 else outs},
            "registered_name": "Functional", "build_config": {"input_shape": None}}


def _keras_config(model):
    return dict(_model_entry(model), compile_config=_compile_config(model))


def optimizer_keras_config(opt):
    """An optimizer as Keras's configs serialize it (a LossScaleOptimizer
    with its inner optimizer; one that compile made under mixed_float16 as
    its inner one, as Keras's compile_config keeps the optimizer it was
    given)."""
    if isinstance(opt, mixed_precision.LossScaleOptimizer) and opt._made_by_compile:
        opt = opt.inner_optimizer
    if isinstance(opt, mixed_precision.LossScaleOptimizer):
        return {"module": "keras.optimizers", "class_name": "LossScaleOptimizer",
                "config": opt.get_config(), "registered_name": None}
    return {"module": "keras.optimizers", "class_name": type(opt).__name__,
            "config": dict(opt.get_config(), name=opt.kind), "registered_name": None}


def _compile_config(model):
    if model.loss is None:
        return None
    loss = model.loss
    several = isinstance(loss, several_outputs.OutputLosses)
    return {"optimizer": optimizer_keras_config(model.optimizer),
            # several outputs: a loss per output in their order, as Keras 3 saves a list
            "loss": [_loss_entry(one) for one in loss.losses] if several else _loss_entry(loss),
            "loss_weights": list(loss.weights) if several else None,
            "metrics": model._compile_metrics_config(),
            "weighted_metrics": None, "run_eagerly": False, "steps_per_execution": 1,
            "jit_compile": False}


def _loss_entry(loss):
    return {"module": "keras.losses", "class_name": _LOSS_CLASSES[loss.kind],
            "config": _loss_config(loss), "registered_name": None}


def _loss_config(loss):
    """Keras's config of the compiled loss (Huber's delta kept, though
    Keras's own get_config leaves it out)."""
    if loss.kind in losses.CROSSENTROPY_KINDS:
        return {"name": loss.kind, "reduction": "sum_over_batch_size",
                "from_logits": loss.from_logits}
    return loss.get_config()


def _snake(class_name):
    """Keras's snake-case of a class name (Conv2D -> conv2d, ReLU -> re_lu)."""
    name = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", class_name)
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", name).lower()


def _weight_paths(class_names):
    """Where a .keras file keeps each layer's variables: layers/<the class's
    snake-case name>, numbered _1, _2, ... for the second, third, ... of a
    class, in the model's order (as Keras walks a Sequential's layers; the
    layers' own names play no part)."""
    used, paths = {}, []
    for class_name in class_names:
        name = _snake(class_name)
        if name in used:
            used[name] += 1
            name = "%s_%d" % (name, used[name])
        else:
            used[name] = 0
        paths.append(name)
    return paths


def _entries(model):
    """[(entry, path)]: the model's layers (Keras's ``model.layers``: a
    functional model's InputLayer first, nested models as one entry) with
    where a .keras file keeps each one's variables."""
    entries = _listing(model)
    return list(zip(entries, _weight_paths([_class_of(e) for e in entries])))


def _listing(model):
    """model.layers, or for a subclassed model (nested in a Sequential or
    functional model) its traced graph's, which the file holds."""
    listing = getattr(model, "_graph_listing", None)
    return listing() if listing is not None else model.layers


def _count(entry):
    """How many weight arrays a layer or a nested model has."""
    if _is_model(entry):
        return len(entry._weight_specs())
    if type(entry).__name__ == "InputLayer":
        return 0
    return len(entry.weight_specs(entry.input_shape[1:]))


def _legacy_order(model):
    """The order of a nested model's weights in a .h5 file (Keras's legacy
    weights: the trainable ones, then the others), as indices into its
    get_weights list."""
    specs = model._weight_specs()
    return [i for i, spec in enumerate(specs) if spec[3]] + \
        [i for i, spec in enumerate(specs) if not spec[3]]


def _per_layer_weights(model):
    """[(entry, [(name, array) in Keras's order])] for every entry of
    model.layers but InputLayer; a nested model's names are its layers'
    (dense/kernel), in _legacy_order."""
    weights = iter(model.get_weights())
    out = []
    for entry in _listing(model):
        if type(entry).__name__ == "InputLayer":
            continue
        if _is_model(entry):
            mine = [("%s/%s" % (layer.name, name), next(weights))
                    for layer, name, _, _ in entry._weight_specs()]
            out.append((entry, [mine[i] for i in _legacy_order(entry)]))
        else:
            specs = entry.weight_specs(entry.input_shape[1:])
            out.append((entry, [(name, next(weights)) for name, _, _ in specs]))
    return out


def _write_layers(group, model, weights):
    """model.layers' variables under `group` (layers/ of a .keras weights
    file), nested models as Keras keeps them (<path>/layers/..., <path>/vars),
    the arrays taken in order from the iterator `weights`."""
    for entry, path in _entries(model):
        if _is_model(entry):
            sub = group.create_group(path)
            _write_layers(sub.create_group("layers"), entry, weights)
            sub.create_group("vars")
            continue
        var = group.create_group(path).create_group("vars")
        for i in range(_count(entry)):
            var.create_dataset(str(i), data=np.asarray(next(weights), np.float32))


def _keras_bytes(model):
    h5py = _h5py()
    weights = io.BytesIO()
    with h5py.File(weights, "w") as f:
        _write_layers(f.create_group("layers"), model, iter(model.get_weights()))
        if model.loss is not None:
            group = f.create_group("optimizer")
            inner = _optimizer_variables(model)
            variables = inner
            if isinstance(model.optimizer, mixed_precision.LossScaleOptimizer):
                # Keras's layout: the wrapper's iteration, learning_rate (0),
                # step_counter and dynamic_scale, then the inner optimizer's,
                # which its own group holds too
                scale, good = _loss_scale_state(model)
                variables = [inner[0], np.float32(0.0), np.int64(good),
                             np.float32(scale)] + inner
                vars_in = group.create_group("inner_optimizer").create_group("vars")
                for i, a in enumerate(inner):
                    vars_in.create_dataset(str(i), data=a)
            opt = group.create_group("vars")
            for i, a in enumerate(variables):
                opt.create_dataset(str(i), data=a)
        f.create_group("vars")
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as z:
        meta = {"keras_version": "3.0.0",
                "date_saved": datetime.datetime.now().strftime("%Y-%m-%d@%H:%M:%S"),
                "saved_by": "cnncuda"}
        z.writestr("metadata.json", json.dumps(meta))
        z.writestr("config.json", json.dumps(_keras_config(model)))
        z.writestr("model.weights.h5", weights.getvalue())
    return data.getvalue()


def _slot_order(optimizer, n_weights):
    """(trainable weight, slot) in the order of Keras's optimizer variables."""
    order = [(t, k) for t in range(n_weights) for k in range(len(optimizer.slot_names()))]
    if optimizer.keras_slot_order == "per_slot":
        order.sort(key=lambda tk: (tk[1], tk[0]))
    return order


def _nadam_u_product(beta_1, steps):
    """Keras's Nadam u_product after `steps` steps: the product of
    beta_1 (1 - 0.5 0.96^i), i = 1..steps (float32, as Keras keeps it)."""
    u = 1.0
    for i in range(1, steps + 1):
        u *= float(beta_1) * (1.0 - 0.5 * 0.96 ** i)
    return np.float32(u)


def _optimizer_variables(model, order=None):
    """The compiled optimizer's variables as Keras 3 keeps them: iteration
    (int64), learning_rate (float32), the slots (float32, Keras's order),
    and for Nadam its u_product. `order`: the trainable weights (indices in
    cnncuda's order) in Keras's order where it differs (a subclassed
    model's, keras_subclassed.py)."""
    opt = _inner(model.optimizer)
    state = model._optimizer_state()
    shapes = [tuple(shape) for _, _, shape, trainable in model._weight_specs() if trainable]
    slots = [list(per) for per in state["slots"]]
    start = opt.initial_accumulator_value if opt.kind == "adagrad" else 0.0
    for shape in shapes[len(slots):]:           # fresh: Keras's initial values
        slots.append([np.full(shape, start, np.float32) for _ in opt.slot_names()])
    out = [np.int64(model._iterations())]
    if opt.learning_rate_schedule is None:      # Keras keeps no variable for a schedule
        out.append(np.float32(opt.learning_rate))
    if order is not None:
        slots = [slots[t] for t in order]
    out += [np.asarray(slots[t][k], np.float32) for t, k in _slot_order(opt, len(shapes))]
    if opt.kind == "nadam":
        out.append(_nadam_u_product(opt.beta_1, int(state["steps"])))
    return out


def _loss_scale_state(model):
    """(scale, good steps) of a LossScaleOptimizer's model: its network's,
    else the initial scale."""
    state = model._optimizer_state().get("loss_scale")
    return tuple(state) if state is not None else (model.optimizer.initial_scale, 0)


def _load_optimizer_variables(model, group, keras_order=None):
    """Takes a .keras file's optimizer variables (group optimizer/vars) for
    the model's next network where they match its compiled optimizer (their
    count and shapes; a LossScaleOptimizer's four first, Keras's layout);
    otherwise the optimizer starts afresh, as in Keras. `keras_order`: as
    _optimizer_variables' `order`."""
    opt = _inner(model.optimizer)
    wrapped = opt is not model.optimizer
    shapes = [tuple(shape) for _, _, shape, trainable in model._weight_specs() if trainable]
    if keras_order is not None:
        shapes = [shapes[t] for t in keras_order]
    order = _slot_order(opt, len(shapes))
    at = 4 if wrapped else 0                  # the wrapper's variables first
    first = at + (1 if opt.learning_rate_schedule is not None else 2)  # no lr variable
    count = first + len(order) + (opt.kind == "nadam")
    if group is None or sorted(group.keys()) != sorted(str(i) for i in range(count)):
        return
    iterations = int(np.asarray(group[str(at)]))
    if iterations < 0:
        return
    slots = [[None] * len(opt.slot_names()) for _ in shapes]
    for i, (t, k) in enumerate(order):
        a = np.asarray(group[str(first + i)], np.float32)
        if a.shape != shapes[t]:
            return
        slots[t][k] = a
    if keras_order is not None:       # back to cnncuda's order
        mine = [None] * len(slots)
        for position, t in enumerate(keras_order):
            mine[t] = slots[position]
        slots = mine
    model._carried_state = {"steps": iterations, "training_forwards": iterations,
                            "slots": slots}
    if wrapped:
        scale, good = float(np.asarray(group["3"])), int(np.asarray(group["2"]))
        if 0.0 < scale < float("inf") and 0 <= good < model.optimizer.dynamic_growth_steps:
            model._carried_state["loss_scale"] = (scale, good)
    model._iterations_offset = 0


def _write_h5_model_attrs(f, entry, compile_config):
    """A legacy .h5 file's attributes: the model's config (`entry`'s
    class_name and config) and, when compiled, Keras's training_config."""
    f.attrs["backend"] = "cnncuda"
    f.attrs["keras_version"] = "3.0.0"
    f.attrs["model_config"] = json.dumps({"class_name": entry["class_name"],
                                          "config": entry["config"]})
    if compile_config is not None:
        training = {k: v for k, v in compile_config.items() if k != "optimizer"}
        training["optimizer_config"] = {"class_name": compile_config["optimizer"]["class_name"],
                                        "config": compile_config["optimizer"]["config"]}
        f.attrs["training_config"] = json.dumps(training)


def _h5_bytes(model):
    h5py = _h5py()
    config = _keras_config(model)
    compile_config = config.pop("compile_config")
    data = io.BytesIO()
    with h5py.File(data, "w") as f:
        _write_h5_model_attrs(f, config, compile_config)
        group = f.create_group("model_weights")
        named = _per_layer_weights(model)
        group.attrs["layer_names"] = [layer.name.encode() for layer, _ in named]
        group.attrs["backend"] = "cnncuda"
        group.attrs["keras_version"] = "3.0.0"
        for layer, arrays in named:
            g = group.create_group(layer.name)
            names = ["%s/%s/%s" % (model.name, layer.name, name) for name, _ in arrays] \
                if not _is_model(layer) else ["%s/%s" % (layer.name, name) for name, _ in arrays]
            g.attrs["weight_names"] = [n.encode() for n in names]
            for n, (_, a) in zip(names, arrays):
                g.create_dataset(n, data=np.asarray(a, np.float32))
        top = group.create_group("top_level_model_weights")
        top.attrs["weight_names"] = np.array([], dtype=np.float64)
    return data.getvalue()


def save(model, path, kind):
    """Writes `model` to `path` as a Keras file of `kind` ('keras' or 'h5'),
    atomically (the old file stays whole if anything fails)."""
    if getattr(model, "_is_subclassed", False):
        from . import keras_subclassed
        data = keras_subclassed.keras_bytes(model) if kind == "keras" \
            else keras_subclassed.h5_bytes(model)
    else:
        data = _keras_bytes(model) if kind == "keras" else _h5_bytes(model)
    write_atomically(path, [data])


# -- Keras -> cnncuda ------------------------------------------------------------------

def _cnncuda_layer(entry):
    class_name = entry.get("class_name")
    config = dict(entry.get("config") or {})
    keep = {"name": config.get("name"), "trainable": config.get("trainable", True)}
    policy = config.get("dtype")
    if isinstance(policy, dict) and isinstance(policy.get("config"), dict):
        policy = policy["config"].get("name")
    if policy in ("mixed_float16", "mixed_bfloat16"):
        keep["dtype"] = policy      # other names: the engines' float32
    if class_name in ("Conv2D", "Dense"):
        for key in ("kernel_initializer", "bias_initializer", "kernel_regularizer",
                    "bias_regularizer", "activity_regularizer", "kernel_constraint",
                    "bias_constraint"):
            if key in config:
                keep[key] = config[key]     # the layer refuses what it cannot run
    elif class_name == "BatchNormalization":
        for key in ("beta_initializer", "gamma_initializer", "moving_mean_initializer",
                    "moving_variance_initializer", "beta_regularizer", "gamma_regularizer",
                    "beta_constraint", "gamma_constraint"):
            if key in config:
                keep[key] = config[key]
    if class_name == "Conv2D":
        if config.get("data_format", "channels_last") != "channels_last" or \
                list(config.get("dilation_rate", [1, 1])) != [1, 1] or config.get("groups", 1) != 1:
            raise ValueError("layer %s: only channels_last, undilated, ungrouped convolutions "
                             "load here" % keep["name"])
        keep.update(filters=config["filters"], kernel_size=tuple(config["kernel_size"]),
                    strides=tuple(config.get("strides", (1, 1))),
                    padding=config.get("padding", "valid"),
                    activation=_activation(config.get("activation")),
                    use_bias=config.get("use_bias", True))
    elif class_name in ("MaxPooling2D", "AveragePooling2D"):
        keep.update(pool_size=tuple(config["pool_size"]),
                    strides=tuple(config["strides"]) if config.get("strides") else None,
                    padding=config.get("padding", "valid"))
    elif class_name in ("GlobalAveragePooling2D", "GlobalMaxPooling2D"):
        if config.get("data_format", "channels_last") != "channels_last":
            raise ValueError("layer %s: only channels_last poolings load here" % keep["name"])
        keep.update(keepdims=config.get("keepdims", False))
    elif class_name == "Softmax":
        axis = config.get("axis", -1)
        keep.update(axis=axis[0] if isinstance(axis, list) and len(axis) == 1 else axis)
    elif class_name == "Flatten":
        pass
    elif class_name == "Dense":
        keep.update(units=config["units"], activation=_activation(config.get("activation")),
                    use_bias=config.get("use_bias", True))
    elif class_name == "Dropout":
        keep.update(rate=config["rate"])
    elif class_name == "BatchNormalization":
        axis = config.get("axis", -1)
        keep.update(axis=axis[0] if isinstance(axis, list) else axis,
                    momentum=config.get("momentum", 0.99), epsilon=config.get("epsilon", 1e-3))
    elif class_name == "Activation":
        keep.update(activation=_activation(config.get("activation")))
    elif class_name == "ReLU":
        keep.update(max_value=config.get("max_value"),
                    negative_slope=config.get("negative_slope", 0.0),
                    threshold=config.get("threshold", 0.0))
    elif class_name == "LeakyReLU":
        keep.update(negative_slope=config.get("negative_slope", config.get("alpha", 0.3)))
    elif class_name == "ELU":
        keep.update(alpha=config.get("alpha", 1.0))
    elif class_name == "PReLU":
        keep.update(alpha_initializer=config.get("alpha_initializer", "Zeros"),
                    alpha_regularizer=config.get("alpha_regularizer"),
                    alpha_constraint=config.get("alpha_constraint"),
                    shared_axes=config.get("shared_axes"))
    elif class_name in _AUGMENTATION:
        if config.get("data_format", "channels_last") not in (None, "channels_last"):
            raise ValueError("layer %s: only channels_last augmentation layers load here"
                             % keep["name"])
        cls = layer_module.LAYER_CLASSES[class_name]
        takes = [k for k in inspect.signature(cls).parameters if k not in ("kwargs", "name")]
        keep.update({k: config[k] for k in takes if k in config and k != "data_format"})
    elif class_name in shape_layers.SHAPE_LAYER_CLASSES:
        keep.update(shape_layers.SHAPE_LAYER_CLASSES[class_name]._keras_arguments(config))
    elif class_name == "Add":
        pass
    elif class_name == "Concatenate":
        keep.update(axis=config.get("axis", -1))
    else:
        raise ValueError("layer %s: Keras's %s has no cnncuda form (cnncuda has %s)"
                         % (keep["name"], class_name, ", ".join(layer_module.LAYER_CLASSES)))
    return layer_module.LAYER_CLASSES[class_name](**keep)


def _activation(value):
    """A config's activation: a name, or a serialized function or layer
    (the layer constructor reads those: layers.activation_name)."""
    if isinstance(value, dict) and isinstance(value.get("config"), str):  # a function
        value = value["config"]
    return value or "linear"


def _input_shape(config, layers_config):
    for entry in layers_config:
        if entry.get("class_name") == "InputLayer":
            c = entry["config"]
            shape = c.get("batch_shape") or c.get("batch_input_shape")
            return tuple(shape[1:])
    shape = config.get("build_input_shape")
    if shape:
        return tuple(shape[1:])
    for entry in layers_config:
        c = entry.get("config", {})
        if c.get("batch_input_shape"):
            return tuple(c["batch_input_shape"][1:])
    raise ValueError("the model has no input shape (an unbuilt Keras model)")


_MODEL_CLASSES = ("Sequential", "Functional", "Model")


def _layer_or_model(entry):
    if entry.get("class_name") in _MODEL_CLASSES:
        return _model_of(entry)
    return _cnncuda_layer(entry)


def _model_of(entry):
    """cnncuda's model of a Keras model config (Sequential, or functional
    with a chain for a graph), without weights."""
    from .layers import InputLayer
    from .models import Sequential
    class_name = entry.get("class_name")
    inner = entry["config"]
    if class_name in ("Functional", "Model"):
        return _functional(inner)
    if class_name != "Sequential":
        raise ValueError("a Keras %s; only Sequential and functional models load here"
                         % class_name)
    entries = inner["layers"]
    model = Sequential(name=inner.get("name"))
    model.add(InputLayer(input_shape=_input_shape(inner, entries), name="_input"))
    for layer_entry in entries:
        if layer_entry.get("class_name") == "InputLayer":
            continue
        model.add(_layer_or_model(layer_entry))
    return model


def _refs(value):
    """Layer names of a functional config's input_layers or output_layers:
    Keras 3's ["name", 0, 0] for one, [["name", 0, 0], ...] otherwise."""
    if value and isinstance(value[0], str):
        return [value[0]]
    return [ref[0] for ref in value]


def _history_names(value, out):
    """The layer names in the keras_history of the tensors in `value` (a
    Keras 3 inbound node's args)."""
    if isinstance(value, dict):
        if value.get("class_name") == "__keras_tensor__":
            out.append(value["config"]["keras_history"][0])
        else:
            for v in value.values():
                _history_names(v, out)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _history_names(v, out)
    return out


def _inbound(entry):
    """(the names of the layers whose outputs a functional layer entry is
    called on, its call's training= or None); raises for a layer called more
    than once."""
    nodes = entry.get("inbound_nodes") or []
    name = entry.get("name") or entry.get("config", {}).get("name")
    if len(nodes) != 1:
        raise ValueError('layer "%s" is called %d times in the graph: a layer shared within '
                         "one model is not supported" % (name, len(nodes)))
    node = nodes[0]
    if isinstance(node, dict):                      # Keras 3
        return _history_names(node.get("args", []), []), \
            (node.get("kwargs") or {}).get("training")
    refs = [ref[0] for ref in node]                 # Keras 2: [[name, node, tensor, kwargs]]
    kwargs = node[0][3] if node and len(node[0]) > 3 and isinstance(node[0][3], dict) else {}
    return refs, kwargs.get("training")


def _functional(inner):
    """The functional model of a Keras Functional config whose graph is a
    chain; a branch is refused naming its layer."""
    from .functional import Model
    entries = inner["layers"]
    by_name = {(e.get("name") or e["config"]["name"]): e for e in entries}
    inputs, outputs = _refs(inner["input_layers"]), _refs(inner["output_layers"])
    tensors = {}
    for name in inputs:
        config = by_name[name]["config"]
        shape = tuple((config.get("batch_shape") or config.get("batch_input_shape"))[1:])
        tensors[name] = _input_tensor(shape, name)
    pending = set()

    def tensor_of(name):
        """The output of layer `name`, its layer made and called (depth
        first: a cycle is refused)."""
        if name in tensors:
            return tensors[name]
        if name in pending or name not in by_name:
            raise ValueError("model %s: bad graph at layer %s" % (inner.get("name"), name))
        pending.add(name)
        entry = by_name[name]
        parents, training = _inbound(entry)
        args = [tensor_of(p) for p in parents]
        layer = _layer_or_model(entry)
        arg = args if getattr(layer, "_merge", False) else args[0] if len(args) == 1 else args
        tensors[name] = layer(arg) if training is None else layer(arg, training=training)
        return tensors[name]
    starts = [tensors[name] for name in inputs]
    ends = [tensor_of(name) for name in outputs]
    return Model(starts if len(starts) > 1 else starts[0], ends if len(ends) > 1 else ends[0],
                 name=inner.get("name"))


def _input_tensor(shape, name):
    from .layers import Input
    return Input(shape=shape, name=name)


def _model_weights(model, weights_of):
    """The model's weights in get_weights order, `weights_of(entry, path)`
    giving each entry's of model.layers (its path in a .keras file)."""
    arrays = []
    for entry, path in _entries(model):
        if type(entry).__name__ != "InputLayer":
            arrays.extend(weights_of(entry, path))
    return arrays


def _build(config, weights_of, compile_config, compile, device, path):
    if config.get("class_name") not in _MODEL_CLASSES:
        raise ValueError("%s: a Keras %s; only Sequential and functional models load here"
                         % (path, config.get("class_name")))
    model = _model_of(config)
    policy = (config.get("config") or {}).get("dtype")
    if isinstance(policy, dict) and isinstance(policy.get("config"), dict):
        policy = policy["config"].get("name")
    if policy in mixed_precision.POLICIES:     # the model's, as Keras keeps it: compile's wrap
        model._dtype_policy = mixed_precision.Policy(policy)
    # weights_of None (model_from_json): the architecture alone, fresh weights
    if weights_of is not None and model._weight_specs():
        model.set_weights(_model_weights(model, weights_of))
    if compile and compile_config and getattr(model, "_several_outputs", False):
        # a loss per output (a list, a dict by output name, or one for all)
        opt = compile_config.get("optimizer") or compile_config.get("optimizer_config")
        try:
            loss = compile_config.get("loss")
            if isinstance(loss, list):
                loss = [_loss(entry) for entry in loss]
            elif isinstance(loss, dict) and "class_name" not in loss:
                loss = {name: _loss(entry) for name, entry in loss.items()}
            else:
                loss = _loss(loss)
            metrics = compile_config.get("metrics")
            model.compile(optimizer=_optimizer(opt), loss=loss,
                          loss_weights=compile_config.get("loss_weights"),
                          metrics=metrics, device=device)
        except (TypeError, ValueError, KeyError, AttributeError) as err:
            warnings.warn("%s: model \"%s\" has several outputs and a compile config cnncuda "
                          "cannot read (%s); it loads uncompiled (predict runs)"
                          % (path, model.name, err), stacklevel=4)
    elif compile and compile_config:
        opt = compile_config.get("optimizer") or compile_config.get("optimizer_config")
        loss = compile_config.get("loss")
        model.compile(optimizer=_optimizer(opt), loss=_loss(loss),
                      metrics=_metrics(compile_config.get("metrics")),
                      device=device)
    return model


_H5_METRIC_NAMES = {"mae": "mean_absolute_error", "mse": "mean_squared_error"}


def _h5_metric_names(entries):
    """A legacy .h5 file's metrics with _H5_METRIC_NAMES's names, nested
    lists and dicts (one entry per output) kept as they are."""
    if isinstance(entries, str):
        return _H5_METRIC_NAMES.get(entries, entries)
    if isinstance(entries, list):
        return [_h5_metric_names(entry) for entry in entries]
    if isinstance(entries, dict) and "class_name" not in entries:
        return {key: _h5_metric_names(entry) for key, entry in entries.items()}
    return entries


def _metrics(entries):
    """compile's metrics from a Keras compile config: names and Keras's
    serialized metric objects (a nested list, one per output, is flattened)."""
    flat = []
    for entry in entries or []:
        flat.extend(entry if isinstance(entry, list) else [entry])
    return [entry for entry in flat if entry is not None]


def _inner(opt):
    """The optimizer whose slots and iteration a file holds: a
    LossScaleOptimizer's inner one (its own variables come first, Keras's
    layout: _optimizer_variables' caller and _load_optimizer_variables)."""
    return opt.inner_optimizer if isinstance(opt, mixed_precision.LossScaleOptimizer) else opt


def optimizer_from_keras_config(entry):
    return _optimizer(entry)


def _optimizer(entry):
    """cnncuda's optimizer for a Keras compile config's entry (a name, or
    {"class_name", "config"}): the hyperparameters cnncuda's class takes,
    Keras's defaults for those missing; the rest of Keras's config (name,
    clipnorm, ...) is not read. A LossScaleOptimizer wraps its inner one."""
    if isinstance(entry, str):
        return optimizers.get(entry.lower())
    if isinstance(entry, dict) and entry.get("class_name") == "LossScaleOptimizer":
        config = dict(entry.get("config", {}))
        return mixed_precision.LossScaleOptimizer(
            _optimizer(config["inner_optimizer"]),
            **{k: config[k] for k in ("initial_scale", "dynamic_growth_steps") if k in config})
    try:
        cls = type(optimizers.get(entry["class_name"].lower()))
    except (TypeError, ValueError):
        raise ValueError("optimizer: Keras's %s has no cnncuda form (%s)"
                         % (entry["class_name"], ", ".join(c.__name__ for c in optimizers._CLASSES))
                         ) from None
    config = entry.get("config", {})
    takes = [k for k in inspect.signature(cls).parameters if k != "name"]
    settings = {k: config[k] for k in takes if k in config}
    if isinstance(settings.get("learning_rate"), dict):     # a serialized schedule
        settings["learning_rate"] = schedules.deserialize(settings["learning_rate"])
    return cls(**settings)


def _loss(entry):
    if isinstance(entry, str):
        return losses.get(entry)
    by_class = {v: k for k, v in _LOSS_CLASSES.items()}
    kind = by_class.get(entry.get("class_name"))
    if kind is None:
        raise ValueError("loss: Keras's %s has no cnncuda form" % entry.get("class_name"))
    config = entry.get("config") or {}
    if kind in losses.REGRESSION_KINDS:
        return losses.from_config(kind, {"delta": config["delta"]}
                                  if kind == "huber" and "delta" in config else {})
    return losses.from_config(kind, {"from_logits": config.get("from_logits", False)})


def load(path, data, kind, compile=True, device=None, classes=None):
    """The model in Keras file `data` (the bytes of `path`): Sequential,
    functional, or a subclassed model of a class in `classes` ({name:
    class}, load_model's custom_objects) or registered
    (keras_subclassed.py)."""
    from . import keras_subclassed
    h5py = _h5py()
    if kind == "keras":
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            config = json.loads(z.read("config.json"))
            f = h5py.File(io.BytesIO(z.read("model.weights.h5")), "r")
            if keras_subclassed.is_subclassed_config(config):
                with f:
                    return keras_subclassed.load_keras(config, f, compile, device, classes,
                                                       path)

            def weights_in(group):
                def weights_of(entry, path):
                    if _is_model(entry):        # <path>/layers/<its layers' paths>
                        return _model_weights(entry, weights_in(group[path]["layers"]))
                    count = _count(entry)
                    var = group[path]["vars"] if count else None
                    return [np.asarray(var[str(i)], np.float32) for i in range(count)]
                return weights_of
            weights_of = weights_in(f["layers"])
            with f:
                model = _build(config, weights_of, config.get("compile_config"), compile,
                               device, path)
                if model.loss is not None:
                    group = f.get("optimizer")
                    _load_optimizer_variables(model, group.get("vars") if group else None)
                return model
    with h5py.File(io.BytesIO(data), "r") as f:
        config = json.loads(_text(f.attrs["model_config"]))
        if keras_subclassed.is_subclassed_config(config):
            raise ValueError("the file holds a subclassed model (class %s); Keras 3 writes such "
                             ".h5 files but cannot load them either (it reads the weights "
                             "before the model is built): save it as .keras"
                             % config.get("class_name"))
        training = json.loads(_text(f.attrs["training_config"])) \
            if "training_config" in f.attrs else None
        if training and training.get("metrics"):
            # Keras's legacy loader makes 'mae' and 'mse' metric objects named after
            # their function, as it does with its own .h5 files
            # (several outputs' metrics keep their nesting: a list or dict per output)
            training["metrics"] = _h5_metric_names(training["metrics"])
        group = f["model_weights"] if "model_weights" in f else f

        def weights_of(entry, path):
            name, count = entry.name, _count(entry)
            names = [_text(n) for n in group[name].attrs.get("weight_names", [])]
            if len(names) != count:
                raise ValueError("layer %s: %d weights in the file, %d in the model"
                                 % (name, len(names), count))
            arrays = [np.asarray(group[name][n], np.float32) for n in names]
            if _is_model(entry):            # back from _legacy_order
                mine = [None] * count
                for array, i in zip(arrays, _legacy_order(entry)):
                    mine[i] = array
                arrays = mine
            return arrays
        return _build(config, weights_of, training, compile, device, path)


def _text(value):
    return value.decode() if isinstance(value, bytes) else str(value)
