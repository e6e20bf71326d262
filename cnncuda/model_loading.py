"""Models from what holds them: load_model (cnncuda's files, Keras's .keras
and .h5), model_from_json, and the copies that pickle and copy.deepcopy make
(Sequential.__reduce__ and Model.__reduce__ name _model_from_bytes and
_subclass_from_bytes). cnncuda.models re-exports them; model_files.py
writes the files. models.py imports this module at its end, so what this
one needs of it is imported where it is used."""
import os

from . import config, keras_files, losses, optimizers, saving, several_outputs
from .layers import Layer


def load_model(filepath, compile=True, device=None, custom_objects=None):
    """A Sequential or functional model from a file written by ``model.save``: architecture,
    weights, and (with compile=True) its loss, optimizer, metrics and the
    optimizer's state, so that fit goes on exactly where the saved model
    stopped. ``device`` is passed to compile. ``custom_objects``:
    {name: class} of the subclassed models a file holds (layer subclasses,
    blocks, may be listed too: a file holds them as their traced graphs). Raises
    cnncuda.saving.ModelFileError for a file that is not a cnncuda model,
    truncated, corrupted or of another format version."""
    classes = _custom_classes(custom_objects)
    if device is not None:
        config.engine_for(device)     # the caller's argument: its error is not the file's
    model = _model_from_keras_file(filepath, compile, device, classes)
    if model is not None:
        return model
    header, weights, slots = saving.read_model_file(filepath)
    try:
        return _model_from_file(filepath, header, weights, slots, compile, device, classes)
    except RecursionError:
        # a value nested nearly as deep as the parser takes, too deep for
        # what reads it next (a repr in a message, a comparison)
        raise saving.ModelFileError("%s: corrupted cnncuda model file: bad header (nested too "
                                    "deeply)" % filepath) from None


def model_from_json(json_string, custom_objects=None):
    """A Sequential or functional model from the JSON of ``model.to_json()``,
    cnncuda's or Keras 3's: the layers with fresh weights (the model's seed), compiled
    when the JSON holds compile settings, as Keras does."""
    import json
    if custom_objects:
        raise ValueError("custom_objects: expected None (cnncuda has no custom layers), got %r"
                         % (custom_objects,))
    if not isinstance(json_string, (str, bytes, bytearray)):
        raise TypeError("json_string: expected the str of model.to_json(), got %s"
                        % type(json_string).__name__)
    try:
        config = json.loads(json_string)
    except ValueError as err:
        raise ValueError("json_string: expected JSON, got text that does not parse (%s)"
                         % err) from None
    if not isinstance(config, dict) or config.get("class_name") not in ("Sequential",
                                                                        "Functional") \
            or not isinstance(config.get("config"), dict):
        raise ValueError("json_string: expected a Sequential or functional model's JSON "
                         "(class_name 'Sequential' or 'Functional'), got %s"
                         % ("class_name %r" % config.get("class_name")
                            if isinstance(config, dict) else type(config).__name__))
    try:
        return keras_files._build(config, None, config.get("compile_config"), True, None,
                                  "json_string")
    except (KeyError, TypeError, IndexError, AttributeError) as err:
        raise ValueError("json_string: not a model cnncuda can build (%s: %s)"
                         % (type(err).__name__, err)) from None


def _model_from_keras_file(filepath, compile, device, classes=None):
    """The model of a Keras .keras (zip) or .h5 (HDF5) file, known by its
    first bytes (keras_files.py), or None for any other file. Only a regular
    file is looked at: a pipe read here could not be read again."""
    if not isinstance(filepath, (str, os.PathLike)) or not os.path.isfile(filepath):
        return None
    with open(filepath, "rb") as f:
        kind = keras_files.kind_of_bytes(f.read(8))
        if kind is None:
            return None
        f.seek(0)
        data = f.read()
    try:
        return keras_files.load(filepath, data, kind, compile, device, classes)
    except ImportError:
        raise
    except Exception as err:     # h5py's and zipfile's errors, a layer refused, ...
        raise saving.ModelFileError("%s: not a loadable Keras %s file (%s: %s)"
                                    % (filepath, ".keras" if kind == "keras" else ".h5",
                                       type(err).__name__, err)) from None


def _model_from_bytes(data, device, schedule=None):
    """The model pickle or copy.deepcopy made (Sequential.__reduce__);
    `schedule`: the user's LearningRateSchedule of its optimizer (copied
    with it), whose current rate the bytes hold."""
    header, weights, slots = saving.read_model_bytes(data, "<a pickled model>")
    model = _model_from_file("<a pickled model>", header, weights, slots, True, device)
    if schedule is not None:
        model.optimizer.learning_rate = schedule
    return model


def _custom_classes(custom_objects):
    """load_model's custom_objects: {class name: subclassed Model class}
    (the classes of subclassed models saved in cnncuda's format)."""
    if custom_objects is None:
        return {}
    if not isinstance(custom_objects, dict):
        raise TypeError("custom_objects: expected a dict {name: class}, got %r"
                        % (custom_objects,))
    from .functional import Model
    for key, value in custom_objects.items():
        if not (isinstance(value, type) and issubclass(value, (Model, Layer))):
            raise ValueError("custom_objects[%r]: expected a subclass of keras.Model or of "
                             "keras.layers.Layer (cnncuda runs no custom functions), got %r"
                             % (key, value))
    return {key: value for key, value in custom_objects.items() if issubclass(value, Model)}


def _subclass_from_file(filepath, header, classes):
    """The subclassed model a file holds (its "subclass" entry: class name
    and get_config()), made again from its class, built on the saved input
    shape."""
    info = header["subclass"]
    name = info.get("class_name")
    cls = classes.get(name)
    if cls is None:
        raise saving.ModelFileError(
            "%s: the file holds a subclassed model of class %s: pass its class, "
            "load_model(path, custom_objects={%r: %s}) (Keras needs it too)"
            % (filepath, name, name, name))
    if info.get("config") is None:
        raise saving.ModelFileError(
            "%s: the file holds a subclassed model of class %s without a config (its "
            "get_config raised NotImplementedError when it was saved): make the model again "
            "in code and call load_weights(path)" % (filepath, name))
    model = cls.from_config(info["config"])
    model.build((None,) + tuple(header["model"]["config"]["input_shape"]))
    return model


def _subclass_from_bytes(cls, data, device, schedule=None):
    """A copy of a subclassed model (Model.__reduce__): of its class again."""
    header, weights, slots = saving.read_model_bytes(data, "<a pickled model>")
    model = _model_from_file("<a pickled model>", header, weights, slots, True, device,
                             {header["subclass"]["class_name"]: cls})
    if schedule is not None:
        model.optimizer.learning_rate = schedule
    return model


def _model_from_file(filepath, header, weights, slots, compile, device, classes=None):
    # The checksum proves the file whole, not its contents sound (a file of
    # another program, or forged): whatever in it the layers, set_weights or
    # compile refuse is a corrupted file too.
    from .models import _model_from_config
    try:
        if header.get("kind") != "model":
            raise saving.ModelFileError("%s: holds only weights (save_weights); build the model "
                                        "and call load_weights" % filepath)
        if isinstance(header.get("subclass"), dict):
            model = _subclass_from_file(filepath, header, classes or {})
        else:
            model = _model_from_config(header["model"].get("class_name", "Sequential"),
                                       header["model"]["config"])
        if weights:
            model.set_weights(weights)
    except saving.ModelFileError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as err:
        raise saving.ModelFileError("%s: corrupted cnncuda model file: bad architecture or "
                                    "weights (%s)" % (filepath, err)) from None
    info = header.get("compile")
    if compile and info:
        try:
            loss_weights = None
            if info["loss"]["class_name"] == several_outputs.OutputLosses.kind:
                loss, loss_weights = several_outputs.compile_arguments(info["loss"]["config"])
            else:
                loss = losses.from_config(info["loss"]["class_name"], info["loss"]["config"])
            model.compile(optimizer=optimizers.from_config(info["optimizer"]["class_name"],
                                                           info["optimizer"]["config"]),
                          loss=loss, loss_weights=loss_weights,
                          metrics=list(info.get("metrics") or []), device=device)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as err:
            raise saving.ModelFileError("%s: corrupted cnncuda model file: bad compile settings "
                                        "(%s)" % (filepath, err)) from None
        if header.get("optimizer_state") is not None:
            model._restore_optimizer_state(header["optimizer_state"], slots, filepath)
    return model
