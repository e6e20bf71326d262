"""Keras's callbacks: the Callback base class with Keras's hooks, History,
the progress-bar logger, EarlyStopping, ModelCheckpoint, LambdaCallback,
ReduceLROnPlateau, LearningRateScheduler, CSVLogger and TerminateOnNaN.

fit calls them in Keras's order: the user's callbacks, then History, then
the progress bar, so that what a callback adds to the epoch's logs
(``learning_rate``) is in the History and on the bar's line.

Batch hooks: ``fit`` runs the engine in chunks of steps and reads the
engine's loss sums only when the progress bar redraws or the epoch ends, so
that nothing synchronises the device per step. A callback that overrides a
batch hook (``on_train_batch_begin/end``, ``on_batch_begin/end``,
``on_test_batch_*``, ``on_predict_batch_*``) turns that off for the calls it
watches: the loop then runs one step at a time and passes each batch's
running logs, as Keras does.
"""
import collections.abc
import csv
import io
import math
import os
import sys
import warnings

import numpy as np

from .atomic_file import _check_target, write_atomically
from .checks import boolean, choice, nonnegative_int, number_in
from .progbar import Progbar

__all__ = ["Callback", "CallbackList", "History", "ProgbarLogger", "EarlyStopping",
           "ModelCheckpoint", "LambdaCallback", "ReduceLROnPlateau", "LearningRateScheduler",
           "CSVLogger", "TerminateOnNaN"]

_BATCH_HOOKS = {
    "train": ("on_train_batch_begin", "on_train_batch_end", "on_batch_begin", "on_batch_end"),
    "test": ("on_test_batch_begin", "on_test_batch_end"),
    "predict": ("on_predict_batch_begin", "on_predict_batch_end"),
}


class Callback:
    """Base class: override the hooks you need. ``self.model`` is the model
    being trained and ``self.params`` holds verbose, epochs and steps."""

    def __init__(self):
        self.model = None
        self.params = {}

    def set_model(self, model):
        self.model = model

    def set_params(self, params):
        self.params = params

    def on_train_begin(self, logs=None): pass
    def on_train_end(self, logs=None): pass
    def on_epoch_begin(self, epoch, logs=None): pass
    def on_epoch_end(self, epoch, logs=None): pass
    def on_test_begin(self, logs=None): pass
    def on_test_end(self, logs=None): pass
    def on_predict_begin(self, logs=None): pass
    def on_predict_end(self, logs=None): pass
    def on_batch_begin(self, batch, logs=None): pass
    def on_batch_end(self, batch, logs=None): pass
    def on_test_batch_begin(self, batch, logs=None): pass
    def on_test_batch_end(self, batch, logs=None): pass
    def on_predict_batch_begin(self, batch, logs=None): pass
    def on_predict_batch_end(self, batch, logs=None): pass

    def on_train_batch_begin(self, batch, logs=None):
        self.on_batch_begin(batch, logs)

    def on_train_batch_end(self, batch, logs=None):
        self.on_batch_end(batch, logs)

    def implements_batch_hooks(self, mode):
        """Whether this callback overrides a batch hook of `mode`
        ('train', 'test' or 'predict')."""
        return any(getattr(type(self), hook) is not getattr(Callback, hook)
                   for hook in _BATCH_HOOKS[mode])


class CallbackList:
    """Calls every callback's hook in order."""

    def __init__(self, callbacks, model, params):
        self.callbacks = list(callbacks)
        for callback in self.callbacks:
            callback.set_model(model)
            callback.set_params(params)

    def wants_batches(self, mode):
        return any(c.implements_batch_hooks(mode) for c in self.callbacks)

    def __getattr__(self, hook):
        if not hook.startswith("on_"):
            raise AttributeError(hook)

        def call(*args, **kwargs):
            for callback in self.callbacks:
                getattr(callback, hook)(*args, **kwargs)
        return call


class History(Callback):
    """``.history``: a list of values per metric name, one per epoch;
    ``.epoch``: the epoch indices. ``fit`` returns it."""

    def __init__(self):
        super().__init__()
        self.history = {}
        self.epoch = []

    def on_train_begin(self, logs=None):
        self.epoch = []

    def on_epoch_end(self, epoch, logs=None):
        self.epoch.append(epoch)
        for name, value in (logs or {}).items():
            self.history.setdefault(name, []).append(value)
        if self.model is not None:
            self.model.history = self


class ProgbarLogger(Callback):
    """Prints ``Epoch i/n`` and the progress bar (see cnncuda.progbar)."""

    def __init__(self, verbose=1):
        super().__init__()
        self.verbose = verbose
        self.progbar = None

    def on_epoch_begin(self, epoch, logs=None):
        epochs = self.params.get("epochs", 1)
        if self.verbose and epochs > 1:
            sys.stdout.write("Epoch %d/%d\n" % (epoch + 1, epochs))
            sys.stdout.flush()
        self.progbar = Progbar(self.params["steps"], verbose=self.verbose)

    def due(self):
        """Whether a progress update would be drawn now (the fit loop reads
        the engine's sums only then)."""
        return self.progbar is not None and self.progbar.due()

    def update(self, steps, logs):
        self.progbar.update(steps, logs, finalize=False)

    def on_epoch_end(self, epoch, logs=None):
        if self.progbar is not None:
            self.progbar.update(self.params["steps"], logs or {}, finalize=True)


def _monitor_mode(mode, monitor):
    mode = choice(mode, "mode", ("auto", "min", "max"))
    if mode == "auto":
        mode = "max" if ("acc" in monitor or monitor.startswith("fmeasure")) else "min"
    return mode


def _metric_mode(model, monitor, mode):
    """mode='auto' for a compiled host metric (cnncuda/metrics.py), as Keras 3
    asks the metric which way is better: 'max' for the accuracies, Precision,
    Recall and AUC, 'min' for the errors; `mode` for any other name."""
    name = monitor[4:] if monitor.startswith("val_") else monitor
    metric = dict(getattr(model, "_metrics", None) or []).get(name)
    if metric is None:
        return mode
    from .metrics import MAXIMIZED
    return "max" if isinstance(metric, MAXIMIZED) else "min"


class EarlyStopping(Callback):
    """Stops training when `monitor` has not improved by more than
    `min_delta` for `patience` epochs (Keras's rules, restore_best_weights and
    baseline included)."""

    def __init__(self, monitor="val_loss", min_delta=0, patience=0, verbose=0, mode="auto",
                 baseline=None, restore_best_weights=False, start_from_epoch=0):
        super().__init__()
        if not isinstance(monitor, str):
            raise TypeError("monitor: expected a metric name such as 'val_loss', got %r" % (monitor,))
        self.monitor = monitor
        self.patience = nonnegative_int(patience, "patience")
        self.verbose = verbose
        self.baseline = baseline
        self.min_delta = abs(float(min_delta))
        self.restore_best_weights = bool(restore_best_weights)
        self.start_from_epoch = nonnegative_int(start_from_epoch, "start_from_epoch")
        self.mode = _monitor_mode(mode, monitor)
        self._auto = mode == "auto"
        self.wait = 0
        self.stopped_epoch = 0
        self.best = None
        self.best_weights = None
        self.best_epoch = 0

    def _better(self, value, reference):
        if self.mode == "max":
            return value - self.min_delta > reference
        return value + self.min_delta < reference

    def on_train_begin(self, logs=None):
        if self._auto:
            self.mode = _metric_mode(self.model, self.monitor, self.mode)
        self.wait = 0
        self.stopped_epoch = 0
        self.best = math.inf if self.mode == "min" else -math.inf
        self.best_weights = None
        self.best_epoch = 0

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        current = logs.get(self.monitor)
        if current is None:
            warnings.warn("Early stopping conditioned on metric `%s` which is not available. "
                          "Available metrics are: %s" % (self.monitor, ",".join(logs)),
                          RuntimeWarning, stacklevel=2)
            return
        if epoch < self.start_from_epoch:
            return
        if self.restore_best_weights and self.best_weights is None:
            self.best_weights = self.model.get_weights()
        self.wait += 1
        if self._better(current, self.best):
            self.best = current
            self.best_epoch = epoch
            if self.restore_best_weights:
                self.best_weights = self.model.get_weights()
            if self.baseline is None or self._better(current, self.baseline):
                self.wait = 0
            return
        if self.wait >= self.patience and epoch > 0:
            self.stopped_epoch = epoch
            self.model.stop_training = True
            if self.restore_best_weights and self.best_weights is not None:
                if self.verbose > 0:
                    print("Restoring model weights from the end of the best epoch: %d."
                          % (self.best_epoch + 1))
                self.model.set_weights(self.best_weights)

    def on_train_end(self, logs=None):
        if self.stopped_epoch > 0 and self.verbose > 0:
            print("Epoch %d: early stopping" % (self.stopped_epoch + 1))


class ModelCheckpoint(Callback):
    """Saves the model (``model.save``) or its weights (``save_weights``) at
    the end of every epoch, or only when `monitor` improved
    (``save_best_only``). `filepath` may hold ``{epoch:02d}`` and any log
    name, e.g. ``'model-{epoch:02d}-{val_loss:.2f}.cnncuda'``."""

    def __init__(self, filepath, monitor="val_loss", verbose=0, save_best_only=False,
                 save_weights_only=False, mode="auto", save_freq="epoch",
                 initial_value_threshold=None):
        super().__init__()
        if not isinstance(filepath, str) or not filepath:
            raise TypeError("filepath: expected a file name, got %r" % (filepath,))
        if save_freq != "epoch":
            raise ValueError("save_freq: expected 'epoch' (saving every N batches is not "
                             "supported), got %r" % (save_freq,))
        self.filepath = filepath
        self.monitor = monitor
        self.verbose = verbose
        self.save_best_only = bool(save_best_only)
        self.save_weights_only = bool(save_weights_only)
        self.mode = _monitor_mode(mode, monitor)
        self._auto = mode == "auto"
        if initial_value_threshold is not None:
            self.best = float(initial_value_threshold)
        else:
            self.best = math.inf if self.mode == "min" else -math.inf

    def on_train_begin(self, logs=None):
        mode = _metric_mode(self.model, self.monitor, self.mode) if self._auto else self.mode
        if mode != self.mode and self.best in (math.inf, -math.inf):
            self.mode = mode        # nothing seen yet: start from the other end
            self.best = math.inf if mode == "min" else -math.inf

    def _better(self, value):
        return value < self.best if self.mode == "min" else value > self.best

    def _save(self, path):
        if self.save_weights_only:
            self.model.save_weights(path)
        else:
            self.model.save(path)

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        try:
            path = self.filepath.format(epoch=epoch + 1, **logs)
        except KeyError as err:
            raise KeyError('Failed to format this callback filepath: "%s". Reason: %s is not '
                           "in the logs (%s)" % (self.filepath, err, ", ".join(logs))) from None
        if not self.save_best_only:
            if self.verbose > 0:
                print("\nEpoch %d: saving model to %s" % (epoch + 1, path))
            self._save(path)
            return
        current = logs.get(self.monitor)
        if current is None:
            warnings.warn("Can save best model only with %s available, skipping." % self.monitor,
                          RuntimeWarning, stacklevel=2)
            return
        if self._better(current):
            if self.verbose > 0:
                print("\nEpoch %d: %s improved from %.5f to %.5f, saving model to %s"
                      % (epoch + 1, self.monitor, self.best, current, path))
            self.best = float(current)
            self._save(path)
        elif self.verbose > 0:
            print("\nEpoch %d: %s did not improve from %.5f" % (epoch + 1, self.monitor, self.best))


class LambdaCallback(Callback):
    """A callback from functions: ``LambdaCallback(on_epoch_end=lambda epoch, logs: ...)``."""

    def __init__(self, **hooks):
        super().__init__()
        for name, function in hooks.items():
            if not name.startswith("on_") or not hasattr(Callback, name):
                raise TypeError("LambdaCallback: unknown hook %r" % name)
            setattr(self, name, function)

    def implements_batch_hooks(self, mode):
        return any(hook in self.__dict__ for hook in _BATCH_HOOKS[mode])


def _learning_rate(model, who):
    """The optimizer's learning rate as the engines use it (float32), as a
    Python float: what Keras's float32 variable gives."""
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None or not hasattr(optimizer, "learning_rate"):
        raise ValueError("%s: the model has no optimizer with a learning_rate (compile it "
                         "first), got %r" % (who, optimizer))
    return float(np.float32(optimizer.learning_rate))


class ReduceLROnPlateau(Callback):
    """Multiplies the learning rate by `factor` when `monitor` has not
    improved by more than `min_delta` for `patience` epochs, then waits
    `cooldown` epochs; never below `min_lr`. Keras's rules and defaults; the
    new rate is used from the next training step on, and each epoch's logs
    get ``learning_rate`` (so History and the bar show it)."""

    def __init__(self, monitor="val_loss", factor=0.1, patience=10, verbose=0, mode="auto",
                 min_delta=1e-4, cooldown=0, min_lr=0.0):
        super().__init__()
        if not isinstance(monitor, str):
            raise TypeError("monitor: expected a metric name such as 'val_loss', got %r"
                            % (monitor,))
        factor = number_in(factor, "factor", 0.0, math.inf)
        if factor >= 1.0:
            raise ValueError("ReduceLROnPlateau does not support a factor >= 1.0. Received "
                             "factor=%r" % (factor,))
        self.monitor = monitor
        self.factor = factor
        self.patience = nonnegative_int(patience, "patience")
        self.verbose = verbose
        self.mode = choice(mode, "mode", ("auto", "min", "max"))
        self.min_delta = abs(number_in(min_delta, "min_delta", -math.inf, math.inf))
        self.cooldown = nonnegative_int(cooldown, "cooldown")
        self.min_lr = number_in(min_lr, "min_lr", 0.0, math.inf)
        self.cooldown_counter = 0
        self.wait = 0
        self.best = None
        self._direction = None

    def _set_direction(self):
        if self.mode != "auto":
            self._direction = self.mode
            return
        name = self.monitor[4:] if self.monitor.startswith("val_") else self.monitor
        if name == "loss":
            self._direction = "min"
        elif name == getattr(self.model, "metric_name", None):     # an accuracy
            self._direction = "max"
        elif name in dict(getattr(self.model, "_metrics", [])):     # a host metric
            from .metrics import MAXIMIZED
            maximized = isinstance(dict(self.model._metrics)[name], MAXIMIZED)
            self._direction = "max" if maximized else "min"
        else:
            raise ValueError("ReduceLROnPlateau callback received monitor=%s, but cnncuda "
                             "isn't able to automatically determine whether that metric should "
                             "be maximized or minimized. Pass `mode='max'` in order to monitor "
                             "based on the highest metric value, or pass `mode='min'` in order "
                             "to use the lowest value." % self.monitor)

    def _improved(self, current):
        if self.best is None:
            return True
        if self._direction == "min":
            return current + self.min_delta < self.best
        return current - self.min_delta > self.best

    def in_cooldown(self):
        return self.cooldown_counter > 0

    def on_train_begin(self, logs=None):
        self.best = None
        self.cooldown_counter = 0
        self.wait = 0

    def on_epoch_end(self, epoch, logs=None):
        if self._direction is None:
            self._set_direction()
        logs = logs if logs is not None else {}
        logs["learning_rate"] = _learning_rate(self.model, "ReduceLROnPlateau")
        current = logs.get(self.monitor)
        if current is None:
            warnings.warn("Learning rate reduction is conditioned on metric `%s` which is not "
                          "available. Available metrics are: %s."
                          % (self.monitor, ",".join(logs)), stacklevel=2)
            return
        if self.in_cooldown():
            self.cooldown_counter -= 1
            self.wait = 0
        if self._improved(current):
            self.best = current
            self.wait = 0
        elif not self.in_cooldown():
            self.wait += 1
            if self.wait >= self.patience:
                old_lr = logs["learning_rate"]
                if old_lr > np.float32(self.min_lr):
                    new_lr = max(old_lr * self.factor, self.min_lr)
                    self.model.optimizer.learning_rate = new_lr
                    if self.verbose > 0:
                        print("\nEpoch %d: ReduceLROnPlateau reducing learning rate to %s."
                              % (epoch + 1, new_lr))
                    self.cooldown_counter = self.cooldown
                    self.wait = 0


class LearningRateScheduler(Callback):
    """At the start of every epoch sets the learning rate to
    ``schedule(epoch, lr)`` (or ``schedule(epoch)``, Keras's older form),
    epochs counted from 0; each epoch's logs get ``learning_rate``."""

    def __init__(self, schedule, verbose=0):
        super().__init__()
        if not callable(schedule):
            raise TypeError("schedule: expected a function (epoch, lr) -> new lr, got %r"
                            % (schedule,))
        self.schedule = schedule
        self.verbose = verbose

    def on_epoch_begin(self, epoch, logs=None):
        lr = _learning_rate(self.model, "LearningRateScheduler")
        try:
            new_lr = self.schedule(epoch, lr)
        except TypeError:       # Keras's older API: schedule(epoch)
            new_lr = self.schedule(epoch)
        if not isinstance(new_lr, (float, np.float32, np.float64)):
            raise ValueError("The output of the `schedule` function should be a float. Got: %r"
                             % (new_lr,))
        self.model.optimizer.learning_rate = float(new_lr)     # checked there: >= 0, finite
        if self.verbose > 0:
            print("\nEpoch %d: LearningRateScheduler setting learning rate to %s."
                  % (epoch + 1, new_lr))

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["learning_rate"] = _learning_rate(self.model, "LearningRateScheduler")


class TerminateOnNaN(Callback):
    """Stops training at the first batch whose loss is NaN or infinite
    (printing ``Batch N: Invalid loss, terminating training``), or raises
    RuntimeError there with raise_error=True. It watches every batch, as
    Keras's does, so fit runs one step per engine call while it is in the
    list (the loss read back after each)."""

    def __init__(self, raise_error=False):
        super().__init__()
        self.raise_error = boolean(raise_error, "raise_error")

    def on_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is None or np.isfinite(loss):
            return
        if self.raise_error:
            raise RuntimeError("NaN or Inf loss encountered at batch %d. Loss value: %s. "
                               "Terminating training immediately." % (batch, loss))
        print("Batch %d: Invalid loss, terminating training" % batch)
        self.model.stop_training = True


class CSVLogger(Callback):
    """Writes each epoch's logs as a row of a CSV file: ``epoch`` then the
    log names in sorted order (with ``val_`` columns, "NA" until validation
    runs, when the first epoch has none), as Keras's. append=True keeps what
    the file holds and writes the header only when it was empty.

    The file is never left half-written: after each epoch the whole file
    (what it held before, with append, then this fit's rows) is written to a
    temporary file and renamed over it (cnncuda.atomic_file). Without append
    the old file therefore stays whole until the first epoch's row replaces
    it, where Keras empties it when training begins."""

    def __init__(self, filename, separator=",", append=False):
        super().__init__()
        if not isinstance(filename, (str, os.PathLike)) or not os.fspath(filename):
            raise TypeError("filename: expected a file name, got %r" % (filename,))
        if not isinstance(separator, str) or len(separator) != 1 or separator in "\r\n\"":
            raise ValueError("separator: expected one character (not a quote or a line break), "
                             "got %r" % (separator,))
        self.filename = os.fspath(filename)
        self.sep = separator
        self.append = boolean(append, "append")
        self.keys = None
        self._head = b""
        self._text = None

    def on_train_begin(self, logs=None):
        folder = os.path.dirname(os.path.abspath(self.filename))
        if not os.path.isdir(folder):
            raise FileNotFoundError("filename: the folder %s of %s does not exist"
                                    % (folder, self.filename))
        _check_target(self.filename, os.path.realpath(self.filename), "filename")
        self._head = b""
        if self.append and os.path.exists(self.filename):
            with open(self.filename, "rb") as f:
                self._head = f.read()
        self._header = not self._head.split(b"\n", 1)[0]     # Keras: an empty first line
        self.keys = None
        self._text = None

    @staticmethod
    def _value(value):
        if isinstance(value, str):
            return value
        if isinstance(value, collections.abc.Iterable) and not (
                isinstance(value, np.ndarray) and value.ndim == 0):
            return '"[%s]"' % ", ".join(map(str, value))
        return value

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        out = io.StringIO()
        dialect = type("CSVLoggerDialect", (csv.excel,), {"delimiter": self.sep})
        if self.keys is None:
            self.keys = sorted(logs)
            if self.keys and not any(key.startswith("val_") for key in self.keys):
                self.keys.extend(["val_" + key for key in self.keys])
            writer = csv.DictWriter(out, fieldnames=["epoch"] + self.keys, dialect=dialect)
            if self._header:
                writer.writeheader()
            self._text = ""
        writer = csv.DictWriter(out, fieldnames=["epoch"] + self.keys, dialect=dialect)
        row = {"epoch": epoch}
        row.update((key, self._value(logs.get(key, "NA"))) for key in self.keys)
        writer.writerow(row)
        self._text += out.getvalue()
        write_atomically(self.filename, [self._head, self._text.encode("utf-8")], "filename")
