"""A subclassed model (``class MyModel(keras.Model)`` with ``call``) in
Keras 3's files, as Keras 3.15 writes and reads them:

- ``.keras``: config.json holds the class (``class_name``, and
  ``registered_name``: ``package>Name`` for a class registered with
  ``keras.saving.register_keras_serializable``, else its name), its
  ``get_config()``, ``build_config`` (the input shape it was built for) and
  the compile config; model.weights.h5 holds the variables where Keras's
  saving walk puts them: the model's attributes in sorted order (private
  ones last), each layer at its attribute's name, a list or dict of layers
  as <attribute>/<class name in snake case, numbered>, a layer met twice
  once (where met first), Keras's ``layers`` property among them (so a
  layer no earlier attribute holds is under layers/...), a block or a
  nested subclassed model walked the same way, a Sequential or functional
  model as Keras keeps one (<path>/layers/...); the optimizer's variables
  in the order of Keras's ``trainable_variables`` (model.layers' order, each
  layer's in turn), which may differ from the order call runs the layers
  (cnncuda's get_weights). Loading makes the class again from its
  config (``custom_objects={name: class}`` or a registered class, as Keras
  needs), builds it on the saved input shape and fills the variables.
- ``.h5``: written as Keras writes it (model_config with the class and its
  config, model_weights by layer in model.layers' order); Keras 3 cannot
  load such a file (it does not build the model before reading the
  weights), and loading one here is refused saying so.
"""
import datetime
import io
import json
import zipfile

import numpy as np

from .registration import class_named, registered_name

__all__ = ["keras_bytes", "h5_bytes", "load_keras", "is_subclassed_config"]


def _is_subclassed(obj):
    return getattr(obj, "_is_subclassed", False)


def _is_block(obj):
    from .subclassing import is_block
    from .models import Sequential
    return not isinstance(obj, Sequential) and is_block(obj)


def _is_plain_model(obj):
    from .models import Sequential
    return isinstance(obj, Sequential) and not _is_subclassed(obj)


def _is_layerish(value):
    from .layers import Layer
    from .models import Sequential
    return isinstance(value, (Layer, Sequential))


def _name_key(name):
    return "~" + name if name.startswith("_") else name


def _snake(class_name):
    from .keras_files import _snake as snake
    return snake(class_name)


_BLOCK_SKIP = None


def _attributes(obj):
    """{name: value} of the attributes Keras's walk visits for `obj` (a
    subclassed model or a block): those that hold layers, and for a model
    its ``layers``."""
    global _BLOCK_SKIP
    if _is_subclassed(obj):
        names = list(obj.__dict__.get("_tracked_names", ()))
        out = {name: obj.__dict__.get(name) for name in names}
        out["layers"] = obj.layers
        return out
    if _BLOCK_SKIP is None:
        from .layers import Layer
        _BLOCK_SKIP = set(vars(Layer())) | {"_block_traced", "_call_shape"}
    return {name: value for name, value in vars(obj).items() if name not in _BLOCK_SKIP}


def walk(obj, path="", visited=None, out=None):
    """[(entry, path)]: the layers with variables-holding groups of a
    subclassed model or block, in Keras's walk (see the module's
    docstring); entries are cnncuda's leaf layers and plain (Sequential or
    functional) models; subclassed models and blocks as (obj, path) with
    their own groups too, marked by walk's caller through _is_*."""
    visited = set() if visited is None else visited
    out = [] if out is None else out
    attributes = _attributes(obj)

    def visit(item, where):
        if id(item) in visited:
            return
        visited.add(id(item))
        out.append((item, where))
        if _is_subclassed(item) or _is_block(item):
            walk(item, where, visited, out)

    for name in sorted(attributes, key=_name_key):
        value = attributes[name]
        where = name if not path else path + "/" + name
        if _is_layerish(value):
            visit(value, where)
        elif isinstance(value, (list, tuple, dict)):
            used = {}
            for item in (value.values() if isinstance(value, dict) else value):
                if not _is_layerish(item):
                    continue
                base = _snake(type(item).__name__)
                if base in used:
                    used[base] += 1
                    unique = "%s_%d" % (base, used[base])
                else:
                    used[base] = 0
                    unique = base
                visit(item, where + "/" + unique)
    return out


def _leaf_arrays(model):
    """{id(leaf layer): [its arrays in get_weights order]} and the get_weights
    index of each."""
    arrays, where = {}, {}
    for i, (layer, _, _, _) in enumerate(model._weight_specs()):
        where.setdefault(id(layer), []).append(i)
    weights = model.get_weights()
    for key, indices in where.items():
        arrays[key] = [weights[i] for i in indices]
    return arrays, where


def _keras_layers(obj):
    """The layers of obj in Keras's tracking order, recursively (Keras's
    trainable_variables order): leaf layers only."""
    out = []
    if _is_subclassed(obj):
        entries = obj.layers
    elif _is_block(obj):
        entries = [v for v in _attributes(obj).values() if _is_layerish(v)]
        for value in _attributes(obj).values():
            if isinstance(value, (list, tuple)):
                entries += [v for v in value if _is_layerish(v)]
            elif isinstance(value, dict):
                entries += [v for v in value.values() if _is_layerish(v)]
    else:
        return list(obj._leaves())
    seen = set()
    for entry in entries:
        if id(entry) in seen:
            continue
        seen.add(id(entry))
        if _is_subclassed(entry) or _is_block(entry) or _is_plain_model(entry):
            out.extend(_keras_layers(entry))
        else:
            out.append(entry)
    return out


def keras_trainable_order(model):
    """The model's trainable weights (indices into its trainable weights,
    cnncuda's order) in Keras's trainable_variables order."""
    specs = model._weight_specs()
    trainable = [i for i, spec in enumerate(specs) if spec[3]]
    position = {i: k for k, i in enumerate(trainable)}
    by_layer = {}
    for i, (layer, _, _, is_trainable) in enumerate(specs):
        if is_trainable:
            by_layer.setdefault(id(layer), []).append(position[i])
    order, seen = [], set()
    for layer in _keras_layers(model):
        if id(layer) not in seen:
            seen.add(id(layer))
            order.extend(by_layer.pop(id(layer), []))
    for rest in by_layer.values():     # (none: every leaf is in model.layers' walk)
        order.extend(rest)
    return order


def config_entry(model):
    """config.json's model entry (without compile_config)."""
    try:
        config = model.get_config()
    except NotImplementedError as err:
        raise NotImplementedError("%s: %s" % (type(model).__name__, err)) from None
    return {"module": None, "class_name": type(model).__name__, "config": config,
            "registered_name": registered_name(type(model)),
            "build_config": {"input_shape": [None] + list(model._input_shape)}}


def keras_bytes(model):
    """The bytes of the .keras file of a subclassed model."""
    from .keras_files import _compile_config, _h5py, _optimizer_variables, _write_layers
    h5py = _h5py()
    arrays, _ = _leaf_arrays(model)
    weights = io.BytesIO()
    with h5py.File(weights, "w") as f:
        for entry, path in walk(model):
            group = f.create_group(path)
            if _is_plain_model(entry):
                _write_layers(group.create_group("layers"), entry, iter(entry.get_weights()))
                group.create_group("vars")
                continue
            var = group.create_group("vars")
            if _is_subclassed(entry) or _is_block(entry):
                continue
            for i, a in enumerate(arrays.get(id(entry), [])):
                var.create_dataset(str(i), data=np.asarray(a, np.float32))
        if model.loss is not None:
            opt = f.create_group("optimizer").create_group("vars")
            for i, a in enumerate(_optimizer_variables(model, keras_trainable_order(model))):
                opt.create_dataset(str(i), data=a)
        f.create_group("vars")
    entry = dict(config_entry(model), compile_config=_compile_config(model))
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as z:
        meta = {"keras_version": "3.0.0",
                "date_saved": datetime.datetime.now().strftime("%Y-%m-%d@%H:%M:%S"),
                "saved_by": "cnncuda"}
        z.writestr("metadata.json", json.dumps(meta))
        z.writestr("config.json", json.dumps(entry))
        z.writestr("model.weights.h5", weights.getvalue())
    return data.getvalue()


def h5_bytes(model):
    """The bytes of the .h5 file Keras 3 writes for a subclassed model:
    model_config, training_config, and model_weights by model.layers, each
    layer's weight names as Keras gives them."""
    from .keras_files import _compile_config, _h5py, _is_model, _legacy_order, _write_h5_model_attrs
    h5py = _h5py()
    entry = config_entry(model)
    compile_config = _compile_config(model)
    arrays, _ = _leaf_arrays(model)
    data = io.BytesIO()
    with h5py.File(data, "w") as f:
        _write_h5_model_attrs(f, entry, compile_config)
        group = f.create_group("model_weights")
        named = []
        for layer in model.layers:
            if _is_plain_model(layer) and _is_model(layer):
                specs = layer._weight_specs()
                mine = [("%s/%s/%s" % (layer.name, leaf.name, name), a) for
                        (leaf, name, _, _), a in zip(specs, layer.get_weights())]
                pairs = [mine[i] for i in _legacy_order(layer)]
            elif _is_subclassed(layer) or _is_block(layer):
                leaves = _keras_layers(layer)
                pairs = [("%s/%s/%s/%s" % (model.name, layer.name, leaf.name, name), a)
                         for leaf in leaves
                         for (name, _, _), a in zip(leaf.weight_specs(leaf.input_shape[1:]),
                                                    arrays.get(id(leaf), []))]
                pairs = [p for p in pairs if not p[0].endswith(("moving_mean",
                                                                "moving_variance"))] + \
                    [p for p in pairs if p[0].endswith(("moving_mean", "moving_variance"))]
            else:
                specs = layer.weight_specs(layer.input_shape[1:])
                pairs = [("%s/%s/%s" % (model.name, layer.name, name), a)
                         for (name, _, _), a in zip(specs, arrays.get(id(layer), []))]
            named.append((layer, pairs))
        group.attrs["layer_names"] = [layer.name.encode() for layer, _ in named]
        group.attrs["backend"] = "cnncuda"
        group.attrs["keras_version"] = "3.0.0"
        for layer, pairs in named:
            g = group.create_group(layer.name)
            g.attrs["weight_names"] = [n.encode() for n, _ in pairs] if pairs \
                else np.array([], dtype=np.float64)
            for n, a in pairs:
                g.create_dataset(n, data=np.asarray(a, np.float32))
        top = group.create_group("top_level_model_weights")
        top.attrs["weight_names"] = np.array([], dtype=np.float64)
    return data.getvalue()


def is_subclassed_config(config):
    """Whether a Keras model config names a class other than Sequential and
    Functional (a subclassed model)."""
    return isinstance(config, dict) and config.get("class_name") not in (
        "Sequential", "Functional", "Model")


def _float32_policy(value):
    if value is None or value == "float32":
        return True
    return isinstance(value, dict) and (value.get("config") or {}).get("name") == "float32"


def make_model(config, classes, path):
    """The subclassed model of a Keras config entry, made from its class
    (custom_objects or a registered class) and built on its input shape."""
    name = config.get("class_name")
    cls = class_named(name, config.get("registered_name"), classes)
    if cls is None:
        raise TypeError("%s: could not locate class %r (the file holds a subclassed model): "
                        "pass it, load_model(path, custom_objects={%r: %s}), or decorate it "
                        "with @keras.saving.register_keras_serializable(), as Keras needs"
                        % (path, name, name, name))
    arguments = dict(config.get("config") or {})
    dtype = arguments.pop("dtype", None)
    if not _float32_policy(dtype):
        raise ValueError("%s: model %s has dtype %r; the engines compute in float32"
                         % (path, name, dtype))
    model = cls.from_config(arguments)
    shape = (config.get("build_config") or {}).get("input_shape")
    if shape is None:
        raise ValueError("%s: model %s was saved unbuilt (no build_config input_shape): it "
                         "has no weights to load" % (path, name))
    model.build((None,) + tuple(shape[1:]))
    return model


def load_keras(config, f, compile, device, classes, path):
    """The subclassed model of a .keras file: `config` config.json, `f` its
    model.weights.h5 (open)."""
    from .keras_files import (_count, _load_optimizer_variables, _loss, _metrics,
                              _model_weights, _optimizer)
    model = make_model(config, classes, path)
    _, where = _leaf_arrays(model)
    weights = [None] * len(model._weight_specs())

    def weights_in(group):
        def weights_of(entry, at):
            if hasattr(entry, "_weight_specs"):
                return _model_weights(entry, weights_in(group[at]["layers"]))
            count = _count(entry)
            var = group[at]["vars"] if count else None
            return [np.asarray(var[str(i)], np.float32) for i in range(count)]
        return weights_of

    for entry, at in walk(model):
        if _is_subclassed(entry) or _is_block(entry):
            continue
        if _is_plain_model(entry):
            arrays = _model_weights(entry, weights_in(f[at]["layers"]))
            leaves = entry._weight_specs()
            for (leaf, _, _, _), a in zip(leaves, arrays):
                slot = where[id(leaf)].pop(0)
                weights[slot] = a
            continue
        if id(entry) not in where:
            continue
        count = len(where[id(entry)])
        var = f[at]["vars"]
        for i, slot in enumerate(where[id(entry)]):
            weights[slot] = np.asarray(var[str(i)], np.float32)
        if len(var.keys()) != count:
            raise ValueError("%s: layer %s at %s: %d variables in the file, %d in the model"
                             % (path, entry.name, at, len(var.keys()), count))
    missing = [i for i, w in enumerate(weights) if w is None]
    if missing:
        raise ValueError("%s: the file has no values for %d of the model's weights (from %s)"
                         % (path, len(missing), model._weight_specs()[missing[0]][0].name))
    model.set_weights(weights)
    compile_config = config.get("compile_config")
    if compile and compile_config:
        opt = compile_config.get("optimizer") or compile_config.get("optimizer_config")
        model.compile(optimizer=_optimizer(opt), loss=_loss(compile_config.get("loss")),
                      metrics=_metrics(compile_config.get("metrics")), device=device)
        group = f.get("optimizer")
        _load_optimizer_variables(model, group.get("vars") if group else None,
                                  keras_trainable_order(model))
    return model
