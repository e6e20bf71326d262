"""fit as a user calls it: the seed script's own path, timed
(``python -m cnncuda.bench --script``).

The engine rows of the bench time an epoch once the data is on the engine.
A user runs the script: float64 images (``uint8 / 255.0``), ``model.fit(x,
y, epochs=E, validation_data=(x_test, y_test))`` with the progress bar on.
This row times that call, split where the user's time goes:

- ``fixed_s``: from the call to the first epoch's start (the arrays checked,
  converted and uploaded: training and validation data);
- ``fit_s_per_epoch``: the rest of the call over its epochs (training,
  validation, the bar, callbacks), which is what the user waits per epoch;
- ``val_s_per_epoch``: of that, the validation pass.

The model is the seed network written with cnncuda's Keras layers, built on
the same engine, with the same seed; the data are the bench's (real or
synthetic), cast to float64 as ``/ 255.0`` leaves them.
"""
import time

import numpy as np

from ..callbacks import Callback
from ..seeds import SEEDS

__all__ = ["keras_model", "script_row"]


def keras_model(name, device, seed=0):
    """The seed network `name` as a compiled Keras-style Sequential on `device`."""
    from ..keras import layers, losses, models
    spec = SEEDS[name]
    stack = []
    for i, layer in enumerate(spec["layers"]):
        kind = layer["kind"]
        first = {"input_shape": spec["input_shape"]} if i == 0 else {}
        if kind == "conv2d":
            stack.append(layers.Conv2D(layer["units"], layer["kernel"],
                                       padding=layer.get("padding", "valid"), **first))
        elif kind in ("maxpool", "avgpool"):
            pool = layers.MaxPooling2D if kind == "maxpool" else layers.AveragePooling2D
            stack.append(pool(layer["kernel"], **first))
        elif kind == "flatten":
            stack.append(layers.Flatten(**first))
        elif kind == "dense":
            stack.append(layers.Dense(layer["units"], **first))
        elif kind == "activation":
            stack.append(layers.Activation(layer["activation"], **first))
        elif kind == "dropout":
            stack.append(layers.Dropout(layer["rate"], **first))
        elif kind == "batchnorm":
            stack.append(layers.BatchNormalization(**first))
        else:
            raise ValueError("model: the seed %s has a %r layer that keras_model does not "
                             "write" % (name, kind))
    model = models.Sequential(stack, seed=seed)
    loss = spec["loss"]
    loss_class = {"sparse_categorical_crossentropy": losses.SparseCategoricalCrossentropy,
                  "categorical_crossentropy": losses.CategoricalCrossentropy,
                  "binary_crossentropy": losses.BinaryCrossentropy}[loss["kind"]]
    model.compile(optimizer="adam", loss=loss_class(from_logits=loss["from_logits"]),
                  metrics=["accuracy"], device=device)
    return model


class _Clock(Callback):
    """Times of the call's stages (epoch and validation hooks only: it asks
    for no per-batch calls, so fit keeps its chunked path)."""

    def __init__(self):
        super().__init__()
        self.epoch_began, self.val_seconds = [], []

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch_began.append(time.perf_counter())

    def on_test_begin(self, logs=None):
        self._test = time.perf_counter()

    def on_test_end(self, logs=None):
        self.val_seconds.append(time.perf_counter() - self._test)


def _validation_forward(model, x_val, y_val):
    """Seconds of the validation pass alone on the engine (the data resident,
    best of three), for the ratio the fit-speed goal states."""
    net = model._net
    if net is None or not hasattr(net, "set_validation"):
        return None
    net.set_validation(x_val, y_val)
    try:
        best = None
        for _ in range(3):
            began = time.perf_counter()
            net.evaluate_validation()
            took = time.perf_counter() - began
            best = took if best is None else min(best, took)
        return best
    finally:
        net.set_validation(None, None)


def script_row(model, device, data, batch, epochs, seed=0, verbose=1):
    """One fit call of `epochs` epochs as the seed script makes it (the bar
    drawn to stdout as the user sees it with verbose 1); returns a dict with
    the call's seconds, split as the module docstring says, and
    ``val_forward_s``, the validation pass alone on the engine."""
    x = data.x.astype(np.float64)
    x_val = data.x_val.astype(np.float64) if len(data.x_val) else None
    keras = keras_model(model, device, seed)
    clock = _Clock()
    began = time.perf_counter()
    history = keras.fit(x, data.y, batch_size=batch, epochs=epochs, verbose=verbose,
                        validation_data=(x_val, data.y_val) if x_val is not None else None,
                        callbacks=[clock])
    ended = time.perf_counter()
    first = clock.epoch_began[0]
    return {
        "model": model, "device": device, "batch_size": batch, "epochs": epochs,
        "images": len(x), "val_images": 0 if x_val is None else len(x_val),
        "input_dtype": "float64", "data": data.kind, "dataset": data.dataset,
        "fit_s": ended - began, "fixed_s": first - began,
        "fit_s_per_epoch": (ended - first) / epochs,
        "val_s_per_epoch": float(np.mean(clock.val_seconds)) if clock.val_seconds else 0.0,
        "val_forward_s": (_validation_forward(keras, x_val, data.y_val)
                          if x_val is not None else None),
        "accuracy": history.history.get("accuracy", [None])[-1],
        "val_accuracy": history.history.get("val_accuracy", [None])[-1],
    }


def format_script_rows(rows, engine_rows=()):
    """The script rows as a table, each beside the engine's epoch of the
    main table (same model, batch and engine) where there is one: ``ratio``
    is fit's epoch over the engine's epoch plus the validation pass alone,
    the figure the fit-speed goal bounds (1.10)."""
    engine = {(r.get("model"), r.get("batch_size"), r.get("device")): r.get("seconds_per_epoch")
              for r in engine_rows}
    head = ("model", "batch", "engine", "fit s/epoch", "engine s/epoch", "val s", "val fwd s",
            "ratio", "fixed s", "val acc")
    lines = [head]
    for r in rows:
        e = engine.get((r["model"], r["batch_size"], r["device"]))
        fwd = r["val_forward_s"] or 0.0
        lines.append((r["model"], str(r["batch_size"]), r["device"],
                      "%.3f" % r["fit_s_per_epoch"], "%.3f" % e if e else "-",
                      "%.3f" % r["val_s_per_epoch"],
                      "%.3f" % r["val_forward_s"] if r["val_forward_s"] is not None else "-",
                      "%.2f" % (r["fit_s_per_epoch"] / (e + fwd)) if e else "-",
                      "%.3f" % r["fixed_s"],
                      "%.4f" % r["val_accuracy"] if r["val_accuracy"] is not None else "-"))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    return ["  ".join(v.rjust(w) for v, w in zip(line, widths)) for line in lines]
