"""A model's files, the writing side: save (cnncuda's format, or Keras's .keras
and .h5 by the file's extension), save_weights and load_weights, to_json,
copy.deepcopy and pickle (through the file format's bytes), and a saved
optimizer state taken back (for load_model, model_loading.py). Sequential,
and so every model, has these as the methods of ModelFiles."""
import os

import numpy as np

from . import keras_files, saving, schedules
from .exclusive import exclusive


class ModelFiles:
    """The file methods of Sequential (models.py), which holds what they
    read: the layers, weights, compile settings and optimizer state."""

    def to_json(self, **kwargs):
        """The architecture (and compile settings) as Keras 3 writes them
        (``json.dumps`` takes kwargs such as indent=2): Keras's
        ``model_from_json`` reads it, and so does cnncuda's
        (``models.model_from_json``). Weights are not included."""
        import json
        self._require_built()
        config = keras_files._keras_config(self)
        if config.get("compile_config") is None:
            config.pop("compile_config", None)
        return json.dumps(config, **kwargs)

    def _file_header(self, kind, user_schedule=False):
        """`user_schedule`: the optimizer's config holds the rate of the next
        step where it has a schedule of the user's (copy and pickle carry
        the schedule object beside the bytes)."""
        specs = self._weight_specs() if self.built else []
        header = {"kind": kind, "cnncuda_version": _version(),
                  "model": {"class_name": self._class_name, "config": self._architecture()},
                  "weights": [{"layer": layer.name, "name": name, "trainable": trainable}
                              for layer, name, _, trainable in specs]}
        if kind == "model":
            # a LossScaleOptimizer's inner optimizer (compile wraps it again
            # under mixed_float16; the scale starts again from its initial value)
            opt = getattr(self.optimizer, "inner_optimizer", self.optimizer)
            header["compile"] = None if self.loss is None else {
                "loss": {"class_name": self.loss.kind, "config": self.loss.get_config()},
                "optimizer": {"class_name": opt.kind,
                              "config": opt._hyperparameters() if user_schedule
                              else opt.get_config()},
                "metrics": self._compile_metrics_config()}
            header["optimizer_state"] = None
        return header

    @exclusive
    def save(self, filepath, overwrite=True, include_optimizer=True, save_format=None):
        """Writes the architecture, weights, compile settings and (unless
        include_optimizer=False) the optimizer's state to one file
        (docs/model-file-format.md), atomically: a model loaded from it trains
        on exactly as this one would."""
        self._require_built()
        _check_overwrite(filepath, overwrite)
        kind = keras_files.is_keras_path(filepath) if isinstance(filepath, (str, os.PathLike)) \
            else None
        if kind is not None:
            keras_files.save(self, os.fspath(filepath), kind)
            return
        saving.write_model_file(filepath, *self._file_parts(include_optimizer))

    def _file_parts(self, include_optimizer, user_schedule=False):
        """(header, weights, slots) of the model file of save."""
        header = self._file_header("model", user_schedule)
        weights = self.get_weights()
        slots = None
        if include_optimizer and self.loss is not None:
            state = self._optimizer_state()
            header["optimizer_state"] = {
                "iterations": self._iterations(), "steps": int(state["steps"]),
                "training_forwards": int(state["training_forwards"]),
                "shuffle_rng": self._shuffle_rng.bit_generator.state}
            slots = state["slots"]
        return header, weights, slots

    @exclusive
    def __reduce__(self):
        """copy.deepcopy and pickle go through the model file format: the
        copy has the layers (names included), the weights, the compile
        settings, the engine asked for and the optimizer's state, so that it
        trains on exactly as the original would, on a network of its own.
        (copy.copy makes such a copy too: two models must not share one
        network.)"""
        schedule = self.optimizer.learning_rate_schedule if self.loss is not None else None
        if schedule is not None and schedules.is_builtin(schedule):
            schedule = None         # in the bytes, as a file holds it
        header, weights, slots = self._file_parts(include_optimizer=self.built,
                                                  user_schedule=schedule is not None)
        from .model_loading import _model_from_bytes
        return _model_from_bytes, (b"".join(saving.model_file_bytes(header, weights, slots)),
                                   self._device, schedule)

    @exclusive
    def save_weights(self, filepath, overwrite=True, save_format=None):
        """Writes the weights (with the architecture, to check them against on load)."""
        self._require_built()
        _check_overwrite(filepath, overwrite)
        saving.write_model_file(filepath, self._file_header("weights"), self.get_weights())

    @exclusive
    def load_weights(self, filepath):
        """Sets the weights from a file written by save_weights or save; the
        layers' weight shapes must match this model's."""
        self._require_built()
        header, weights, _ = saving.read_model_file(filepath)
        specs = self._weight_specs()
        saved = [tuple(e["shape"]) for e in header["weights"]]
        mine = [tuple(shape) for _, _, shape, _ in specs]
        if saved != mine:
            raise ValueError("%s: the file's weights (%d arrays, shapes %s) do not match this "
                             "model's (%d arrays, shapes %s)"
                             % (filepath, len(saved), saved, len(mine), mine))
        self.set_weights(weights)

    def _restore_optimizer_state(self, saved, slots, filepath):
        """Takes a file's optimizer_state (and slot arrays) for the next
        engine network, checking them against this compiled model first."""
        def bad(what):
            return saving.ModelFileError("%s: corrupted cnncuda model file: bad optimizer_state "
                                         "(%s)" % (filepath, what))
        if not isinstance(saved, dict):
            raise bad("expected an object, got %r" % (saved,))
        counters = {}
        for key in ("iterations", "steps", "training_forwards"):
            value = saved.get(key, 0)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise bad("%s: expected an int >= 0, got %r" % (key, value))
            counters[key] = value
        if "steps" not in saved:
            # a version-1 file: the step count only; the engine's counters and
            # moments restart at zero (Adam's bias correction restarts at step 1)
            counters["steps"] = counters["training_forwards"] = 0
        if counters["steps"] > counters["iterations"]:
            raise bad("steps %d > iterations %d" % (counters["steps"], counters["iterations"]))
        shapes = [tuple(shape) for _, _, shape, trainable in self._weight_specs() if trainable]
        per_weight = _slot_count(self.optimizer)
        if len(slots) > len(shapes):
            raise bad("slots: %d entries for %d trainable weights" % (len(slots), len(shapes)))
        for i, (arrays, shape) in enumerate(zip(slots, shapes)):
            if len(arrays) != per_weight or any(a.shape != shape for a in arrays):
                raise bad("slots[%d]: expected %d arrays of shape %s for %s, got shapes %s"
                          % (i, per_weight, shape, self.optimizer.kind,
                             [a.shape for a in arrays]))
        if saved.get("shuffle_rng") is not None:
            rng = np.random.default_rng(self.seed)
            try:
                rng.bit_generator.state = saved["shuffle_rng"]
            except (TypeError, ValueError, KeyError, OverflowError) as err:
                # OverflowError: a negative or huge integer in a forged state
                raise bad("shuffle_rng: %s" % (err,)) from None
            self._shuffle_rng = rng
        self._carried_state = {"steps": counters["steps"],
                               "training_forwards": counters["training_forwards"],
                               "slots": [list(arrays) for arrays in slots]}
        self._iterations_offset = counters["iterations"] - counters["steps"]


def _slot_count(optimizer):
    """Arrays the engine keeps per trainable weight (optimizer.slot_names():
    Adam m and v, SGD with momentum its velocity, plain SGD none, ...)."""
    return len(optimizer.slot_names())


def _version():
    from .runtime import __version__
    return __version__


def _check_overwrite(filepath, overwrite):
    if not isinstance(filepath, (str, os.PathLike)):
        raise TypeError("filepath: expected a file name, got %r" % (filepath,))
    if not overwrite and os.path.exists(filepath):
        raise FileExistsError("filepath: %s exists and overwrite=False" % os.fspath(filepath))
