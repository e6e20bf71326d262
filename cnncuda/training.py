"""The loops behind Sequential.fit, evaluate and predict.

fit uploads the training set to the engine once (``net.set_data``), gives it
each epoch's shuffled order (``set_order``), and runs the epoch in chunks of
steps (``train_range``) whose size adapts so that each takes about one
progress-bar interval (0.05 s) when a bar is drawn in place, or about a
second otherwise (so Ctrl-C is seen). The loss and accuracy sums stay on the
engine; ``read_sums`` -- a device synchronisation on GPU engines -- is called
only when the bar is due to redraw, and at the end of each epoch. Validation
data go to the engine once per fit call too (``net.set_validation``) and are
evaluated there at the end of each epoch (``net.evaluate_validation``). Both
stay on the engine after the call: the next fit with as many samples fills
the same memory again, so its recorded training step is reused.

The user's arrays reach the engine as they are (float64, uint8, ...): the
engine converts them to float32 and checks that every value is finite while
it uploads them, so x is not converted or scanned in Python first. Errors
name the argument and the flat index as before.

Metrics besides the engine's accuracy (cnncuda/metrics.py) are updated on
the host: fit then runs one step per ``train_range`` call, each after the
training forward that step runs, read back (step_outputs,
train_steps_with_outputs), and evaluate reads the outputs of its chunks.
Without such metrics nothing of this runs.

Every argument is checked before anything runs, so a bad call leaves the
model as it was.
"""
import math
import sys
import time
import warnings

import numpy as np

from . import config, sample_weights, several_outputs
from .callbacks import Callback, CallbackList, History, ProgbarLogger
from .checks import boolean, check_targets, nonnegative_int, number_in, positive_int
from .chunks import RateChunker, StepChunker
from .data import feed
from .progbar import Progbar

__all__ = ["fit", "evaluate", "predict"]

_SLOW_CHUNK_SECONDS = 1.0
_RAN_OUT = ("Your input ran out of data; interrupting training. Make sure that your dataset or "
            "generator can generate at least `steps_per_epoch * epochs` batches. You may need "
            "to use the `.repeat()` function when building your dataset.")


def _verbose(value, arg="verbose"):
    if value == "auto":
        return 1
    if isinstance(value, bool) or value not in (0, 1, 2):
        raise ValueError("%s: expected 0, 1, 2 or 'auto', got %r" % (arg, value))
    return int(value)


def _unsupported(**arguments):
    for arg, (value, default) in arguments.items():
        # `is` first: an array compared with == has no truth value
        if value is not default and (default is None or value != default):
            raise ValueError("%s: expected %r (not supported), got %s"
                             % (arg, default, _shown(value)))


def _shown(value):
    """value for a message: an array by its shape and dtype, not its contents."""
    if isinstance(value, np.ndarray):
        return "an array of shape %s, dtype %s" % (value.shape, value.dtype)
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def validation_freq_check(value):
    """Keras's validation_freq: an int >= 1 (every that many epochs) or a
    list of 1-based epoch numbers."""
    if isinstance(value, list):
        for i, epoch in enumerate(value):
            positive_int(epoch, "validation_freq[%d]" % i)
        return list(value)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError("validation_freq: expected an int >= 1 or a list of epoch numbers, "
                        "got %r" % (value,))
    return positive_int(value, "validation_freq")


def should_validate(epoch, freq):
    """Whether fit validates after 0-based `epoch` (Keras's rule)."""
    if isinstance(freq, list):
        return epoch + 1 in freq
    return (epoch + 1) % freq == 0


def _callbacks(value):
    if value is None:
        return []
    if isinstance(value, Callback) or not isinstance(value, (list, tuple)):
        raise TypeError("callbacks: expected a list of Callback objects, got %r" % (value,))
    for i, callback in enumerate(value):
        if not isinstance(callback, Callback):
            raise TypeError("callbacks[%d]: expected a Callback, got %r" % (i, callback))
    return list(value)


def sample_count(model, x):
    """How many samples x holds (predict_on_batch's batch size): of its
    first input where the model has several."""
    if hasattr(model, "_by_name") and (isinstance(x, dict) or model._several_inputs):
        x = model._by_name(x, "x")[0][0]        # (a functional model's named inputs)
    return len(np.asarray(x)) if np.ndim(x) else 1


def _data(model, x, y, x_arg="x", y_arg="y"):
    """(x, y) checked against the model and its loss."""
    if x is None:
        raise ValueError("%s: expected an array of samples, got None" % x_arg)
    if y is None:
        raise ValueError("%s: expected the targets of %s, got None" % (y_arg, x_arg))
    model._build_from_data(x, x_arg)
    x = model._engine_data(x, x_arg)        # the engine checks the values
    if isinstance(model.loss, several_outputs.OutputLosses):
        return x, several_outputs.pack(model, y, len(x), y_arg)
    shape = tuple(model.output_shape[1:])
    y_array = np.asarray(y) if not isinstance(y, np.ndarray) else y
    if y_array.ndim == 0 or len(y_array) != len(x):
        raise ValueError("%s: expected %d samples (as many as %s), got %s"
                         % (y_arg, len(x), x_arg, len(y_array) if y_array.ndim else "a scalar"))
    y = check_targets(y, len(x), model.loss.kind, shape, y_arg)
    return x, y


def _logs(model, loss_sum, correct, count, prefix=""):
    """The logs as Keras 3 gives them: the loss and every compiled metric,
    in sorted order of their names (History's keys, the bar's order); the
    engine's accuracy from its correct count, the others from their host
    objects' state (update_host_metrics)."""
    if isinstance(model.loss, several_outputs.OutputLosses):
        return several_outputs.logs(model, loss_sum, correct, count, _result, prefix)
    values = {"loss": float(loss_sum) / count}
    for name, metric in model._metrics:
        values[name] = float(correct) / count if metric is None else _result(metric)
    return {prefix + name: values[name] for name in sorted(values)}


def _result(metric):
    value = metric.result()
    return float(value) if np.ndim(value) == 0 else np.asarray(value).tolist()


def metric_values(model, logs, prefix=""):
    """evaluate's list: the loss, then the metrics in compile order."""
    if isinstance(model.loss, several_outputs.OutputLosses):
        return several_outputs.metric_values(model, logs, prefix)
    return [logs[prefix + "loss"]] + [logs[prefix + name] for name, _ in model._metrics]


def update_host_metrics(model, metrics, y, outputs):
    """Each host metric updated with the targets y and the engine's outputs,
    brought to the model's output shape (model._keras_y: a Reshape((A, B))
    output is the engine's (1, A, B))."""
    if isinstance(model.loss, several_outputs.OutputLosses):
        return several_outputs.update_host_metrics(model, metrics, y, outputs)
    outputs = model._keras_y(outputs)
    for metric in metrics:
        metric.update_state(y, outputs)


_MODE_KINDS = ("dropout", "spatial_dropout2d", "random_flip", "random_rotation", "random_zoom",
               "random_translation", "random_contrast", "random_crop")


def _training_differs(model):
    """How the model's training forward differs from its inference forward:
    'statistics' where a BatchNormalization normalizes by the batch (and
    moves its moving statistics), else 'masks' where a dropout of rate > 0
    or an augmentation layer draws (the engine's training-forward count
    moves), else None."""
    masks = False
    for d in model._engine_layers():
        kind = d.get("kind")
        if kind == "batchnorm":
            if d.get("trainable", True) and not d.get("inference", False):
                return "statistics"
        elif kind in ("dropout", "spatial_dropout2d"):
            masks = masks or d.get("rate", 0.0) > 0
        elif kind in _MODE_KINDS:
            masks = True
    return "masks" if masks else None


def step_outputs(model, net, x, differs=None):
    """The outputs of the training forward the next step runs on the batch
    x (engine form), for the host metrics, as Keras 3 computes its training
    metrics: the engine runs that forward (the masks and batch statistics
    the step will use: the same training-forward count), then its counters
    (the training-forward count alone: a forward moves no step and no
    optimizer array; and, where a BatchNormalization moved them, its moving
    statistics) are put back, so that the step runs as if it had not (the
    same bits). Where
    the training forward is the inference forward (no Dropout,
    BatchNormalization in training or augmentation), or for a group of
    replicas, the inference outputs."""
    from . import distribute
    if differs is None:
        differs = _training_differs(model)
    if not differs or isinstance(net, distribute.ReplicaGroup):
        return net.predict(x)
    forwards = net.training_forwards
    weights = net.get_weights() if differs == "statistics" else None
    try:
        return net.forward(np.ascontiguousarray(x, dtype=np.float32), training=True)
    finally:
        if weights is not None:
            net.set_weights(weights)
        net.set_training_forwards(forwards)


def train_steps_with_outputs(model, net, x, y, order, start, count, batch, host):
    """train_range's steps one at a time, each step's batch first run
    through the training forward that step will run (step_outputs), for the
    host metrics; the engines keep the step's own outputs on the device
    (the softmax and dense head fused into the loss, CUDA graph replays)."""
    differs = _training_differs(model)
    for at in range(start, start + count, batch):
        rows = order[at:min(start + count, at + batch)]
        update_host_metrics(model, host, y[rows], step_outputs(model, net, x[rows], differs))
        net.train_range(at, len(rows), batch)


class _ResidentData:
    """The training and validation data of one fit, kept on the engine
    (``net.set_data``, ``net.set_validation``).

    A callback may call fit again on the same model (fine-tuning on another
    set at an epoch's end): that fit uploads its own data to the model's
    network, and may rebuild the network (for a larger batch). So this fit
    asks for its network through ``net()`` after every point where a
    callback ran: it gives the model's current network with this fit's data
    and, within an epoch, this epoch's order on it, uploading them again
    only when another call replaced them. ``model._data_token`` names the
    holder of the data on the model's network. The data stay on the engine
    after the call: a later fit with as many samples refills the same memory
    (and keeps its recorded training step)."""

    def __init__(self, model, device, batch, x, y, validation=None, val_arg="x", val_index0=0):
        self.model, self.device, self.batch, self.x, self.y = model, device, batch, x, y
        self.validation, self.val_arg, self.val_index0 = validation, val_arg, val_index0
        self.metric_y = y           # the targets the host metrics see
        self.token = object()
        self.holder = None          # the network this fit last uploaded to
        self.order = None           # this epoch's order, once given

    def net(self):
        net = self.model._get_net(self.device, "train", self.batch)
        if net is not self.holder or self.model._data_token is not self.token:
            self.model._data_token = None       # nobody's, should an upload fail halfway
            net.set_data(self.x, self.y)
            if self.validation is not None:
                net.set_validation(self.validation[0], self.validation[1], x_arg=self.val_arg,
                                   x_index0=self.val_index0)
            else:
                net.set_validation(None, None)
            self.model._data_token, self.holder = self.token, net
            if self.order is not None:
                net.set_order(self.order)
        return net

    def set_order(self, order):
        self.order = None
        self.net().set_order(order)
        self.order = order


def _train_epoch(model, data, n, batch, steps, callbacks, bar, per_batch, first=0):
    """One epoch of `steps` steps over the order already given to the
    engine, from its step `first` on (fit with steps_per_epoch goes on
    through one order over several epochs); returns (logs, seen)."""
    seconds = bar.progbar.interval if (bar and bar.progbar.dynamic and bar.verbose == 1) \
        else _SLOW_CHUNK_SECONDS
    chunker = RateChunker(StepChunker(seconds, steps, single=per_batch), model.optimizer)
    loss_sum = correct = 0.0
    done = 0
    host = model._host_metrics()
    for metric in host:
        metric.reset_state()
    while done < steps:
        count_steps = chunker.next(done)
        if per_batch:
            callbacks.on_train_batch_begin(done)
        start = (first + done) * batch
        count = min(count_steps * batch, n - start)
        net = data.net()        # a batch callback may have fit on other data
        began = time.perf_counter()
        if host:
            train_steps_with_outputs(model, net, data.x, data.metric_y, data.order, start,
                                     count, batch, host)
        else:
            net.train_range(start, count, batch)
        chunker.took(time.perf_counter() - began, count_steps)
        done += count_steps
        # the epoch's last chunk draws nothing: its final line follows at once
        if per_batch or (bar is not None and done < steps and bar.due()):
            part_loss, part_correct = net.read_sums()
            loss_sum += part_loss
            correct += part_correct
            logs = _logs(model, loss_sum, correct, min((first + done) * batch, n) - first * batch)
            if per_batch:
                callbacks.on_train_batch_end(done - 1, logs)
            if bar is not None and done < steps:
                bar.update(done, logs)
            if model.stop_training:
                break
    # a group of replicas over several processes sums its ranks' counts here
    # (a collective call, made by every rank at the same point)
    net = data.net()
    part_loss, part_correct = net.epoch_sums() if hasattr(net, "epoch_sums") else net.read_sums()
    seen = min((first + done) * batch, n) - first * batch
    return _logs(model, loss_sum + part_loss, correct + part_correct, seen), seen


def _row_values(x):
    return int(np.prod(x.shape[1:], dtype=np.int64))


def _evaluate_loop(model, net, x, y, batch, callbacks, progbar, x_arg="x", x_index0=0,
                   resident=False, metric_y=None):
    """(loss_sum, correct) over x in inference mode; in one engine call unless
    a bar or a test-batch callback wants to see the steps. `resident`: x and
    y are the validation data the engine holds (set_validation). The host
    metrics see `metric_y` (the unweighted targets where y carries sample
    weights), else y."""
    n = len(x)
    steps = math.ceil(n / batch)
    per_batch = callbacks is not None and callbacks.wants_batches("test")
    host = model._host_metrics()
    for metric in host:
        metric.reset_state()
    if host:    # the loss on the engine, the outputs read back for the host metrics
        y = np.asarray(y)
        metric_y = y if metric_y is None else np.asarray(metric_y)
    elif not per_batch and (progbar is None or not progbar.dynamic or progbar.verbose != 1):
        if resident:
            return net.evaluate_validation()
        return net.evaluate(x, y, x_arg=x_arg, x_index0=x_index0)
    chunker = StepChunker(progbar.interval if progbar else _SLOW_CHUNK_SECONDS, steps, per_batch)
    loss_sum = correct = 0.0
    done = 0
    while done < steps:
        k = chunker.next(done)
        if per_batch:
            callbacks.on_test_batch_begin(done)
        began = time.perf_counter()
        xs, ys = x[done * batch:(done + k) * batch], y[done * batch:(done + k) * batch]
        index0 = x_index0 + done * batch * _row_values(x)
        part = net.evaluate(xs, ys, x_arg=x_arg, x_index0=index0)
        if host:
            update_host_metrics(model, host, metric_y[done * batch:(done + k) * batch],
                                net.predict(xs, x_arg=x_arg, x_index0=index0))
        chunker.took(time.perf_counter() - began, k)
        loss_sum, correct, done = loss_sum + part[0], correct + part[1], done + k
        logs = _logs(model, loss_sum, correct, min(done * batch, n))
        if per_batch:
            callbacks.on_test_batch_end(done - 1, logs)
        if progbar is not None and done < steps:
            progbar.update(done, logs)
    return loss_sum, correct


def fit(model, x, y, batch_size, epochs, verbose, callbacks, validation_split, validation_data,
        shuffle, class_weight, sample_weight, initial_epoch, steps_per_epoch, validation_steps,
        validation_batch_size, validation_freq):
    """Keras's fit: returns a History with loss, accuracy, val_loss and
    val_accuracy per epoch (the metric names as compiled)."""
    if model.loss is None:
        raise RuntimeError("You must compile your model before training/testing. "
                           "Use `model.compile(optimizer, loss)`.")
    batch = 32 if batch_size is None else positive_int(batch_size, "batch_size")
    epochs = nonnegative_int(epochs, "epochs")
    initial_epoch = nonnegative_int(initial_epoch, "initial_epoch")
    verbose = _verbose(verbose)
    user_callbacks = _callbacks(callbacks)
    split = number_in(validation_split, "validation_split", 0.0, 1.0, high_open=True)
    if shuffle != "batch":
        shuffle = boolean(shuffle, "shuffle")
    validation_freq = validation_freq_check(validation_freq)
    if validation_batch_size is not None:
        validation_batch_size = positive_int(validation_batch_size, "validation_batch_size")
    if feed.is_stream(x):       # a Dataset, a generator or a Sequence: data/feed.py
        feed.refuse_weight_arguments(x, sample_weight, class_weight)
        feed.refuse_array_arguments(x, [("y", y, None), ("batch_size", batch_size, None),
                                        ("validation_split", split, 0.0)])
        return feed.fit(model, x, epochs, verbose, user_callbacks, validation_data, shuffle,
                        initial_epoch, steps_per_epoch, validation_steps,
                        validation_batch_size, validation_freq, class_weight=class_weight)
    if steps_per_epoch is not None:
        steps_per_epoch = positive_int(steps_per_epoch, "steps_per_epoch")
    _unsupported(validation_steps=(validation_steps, None))
    x, y = _data(model, x, y)
    w = sample_weights.weights(model, y, len(x), sample_weight, class_weight)
    validation = val_w = None
    val_arg, val_index0 = "validation_data[0]", 0
    if validation_data is not None:
        if not isinstance(validation_data, (tuple, list)) or len(validation_data) not in (2, 3):
            raise ValueError("validation_data: expected a tuple (x_val, y_val) or (x_val, y_val, "
                             "val_sample_weight), got %s" % type(validation_data).__name__)
        validation = _data(model, validation_data[0], validation_data[1],
                           "validation_data[0]", "validation_data[1]")
        if len(validation_data) == 3:
            val_w = sample_weights.weights(model, validation[1], len(validation[0]),
                                           validation_data[2], arg="validation_data[2]")
    elif split > 0:
        split_at = int(math.floor(len(x) * (1.0 - split)))
        if split_at == 0 or split_at == len(x):
            raise ValueError("Training data contains %d samples, which is not sufficient to split "
                             "it into a validation and training set as specified by "
                             "`validation_split=%r`. Either provide more data, or a different "
                             "value for the `validation_split` argument." % (len(x), split))
        x, y, validation = x[:split_at], y[:split_at], (x[split_at:], y[split_at:])
        val_arg, val_index0 = "x", split_at * _row_values(x)
        if w is not None and class_weight is None:      # Keras splits sample_weight too
            w, val_w = w[:split_at], w[split_at:]
        elif w is not None:
            w = w[:split_at]
    # the host metrics see the targets unweighted (Keras's `metrics`)
    metric_targets = (y, None if validation is None else validation[1])
    weighted = w is not None or val_w is not None
    if weighted:        # the targets that weight each sample's loss
        y = sample_weights.weighted_targets(model, y, w)
        if validation is not None:
            validation = (validation[0],
                          sample_weights.weighted_targets(model, validation[1], val_w))
    with sample_weights.weighted(model, weighted):
        return _fit_arrays(model, x, y, batch, batch_size, epochs, initial_epoch, verbose,
                           user_callbacks, shuffle, steps_per_epoch, validation, val_arg,
                           val_index0, validation_batch_size, validation_freq, metric_targets)


def _fit_arrays(model, x, y, batch, batch_size, epochs, initial_epoch, verbose, user_callbacks,
                shuffle, steps_per_epoch, validation, val_arg, val_index0,
                validation_batch_size, validation_freq, metric_targets=(None, None)):
    """fit over arrays checked (y: the engine's targets; metric_targets: the
    training and validation targets the host metrics see, None: y's)."""
    if batch_size is None and steps_per_epoch is not None:
        batch = math.ceil(len(x) / steps_per_epoch)     # Keras: the data in that many batches
    batch = min(batch, len(x))      # as Keras: a batch_size past the data is one batch of it all
    val_batch = batch if validation_batch_size is None else validation_batch_size
    device = config.resolve_device(model._device)
    data = _ResidentData(model, device, batch, x, y, validation, val_arg, val_index0)
    if metric_targets[0] is not None:
        data.metric_y = metric_targets[0]
    data.net()

    n = len(x)
    steps = math.ceil(n / batch)        # the batches of one pass over the data
    history = History()
    bar = ProgbarLogger(verbose) if verbose else None
    # Keras's order: the user's callbacks, then History, then the bar (whose
    # epoch line shows what the callbacks added to the logs)
    callbacks = CallbackList(user_callbacks + [history] + ([bar] if bar else []), model,
                             {"verbose": verbose, "epochs": epochs,
                              "steps": steps if steps_per_epoch is None else steps_per_epoch})
    per_batch = callbacks.wants_batches("train")
    model.stop_training = False
    callbacks.on_train_begin()
    logs = {}
    position = None     # with steps_per_epoch: the step of the current pass an epoch starts at
    try:
        for epoch in range(initial_epoch, epochs):
            callbacks.on_epoch_begin(epoch)
            if position is None:        # a new pass over the data, in a new order
                order = model._shuffle_rng.permutation(n) if shuffle else np.arange(n)
                data.set_order(order)
                position = 0
            epoch_steps = steps - position
            if steps_per_epoch is not None:
                epoch_steps = min(steps_per_epoch, epoch_steps)
            try:
                logs, seen = _train_epoch(model, data, n, batch, epoch_steps, callbacks, bar,
                                          per_batch, first=position)
            except BaseException:
                # Ctrl-C or an error in a callback: drop the cut epoch's loss and
                # accuracy sums, or the next fit's first epoch would count them
                try:
                    data.holder.read_sums()
                except Exception:
                    pass
                raise
            if steps_per_epoch is not None and steps_per_epoch > steps - position:
                # Keras's array adapter: the epoch ends where the pass does
                warnings.warn(_RAN_OUT, stacklevel=4)
            position += math.ceil(seen / batch)
            if steps_per_epoch is None or position >= steps:
                position = None
            if validation is not None and should_validate(epoch, validation_freq):
                callbacks.on_test_begin()
                loss_sum, correct = _evaluate_loop(model, data.net(), validation[0],
                                                   validation[1], val_batch, callbacks, None,
                                                   val_arg, val_index0, resident=True,
                                                   metric_y=metric_targets[1])
                val_logs = _logs(model, loss_sum, correct, len(validation[0]), "val_")
                callbacks.on_test_end(val_logs)
                logs.update(val_logs)
            callbacks.on_epoch_end(epoch, logs)
            if model.stop_training:
                break
    except BaseException:
        # a group of replicas in other processes too is aborted, so that its
        # other ranks raise instead of waiting for this one (models.py)
        model._forget_failed_group(sys.exc_info()[1])
        raise
    callbacks.on_train_end(logs)
    return history


def evaluate(model, x, y, batch_size, verbose, sample_weight, steps, callbacks, return_dict):
    """Keras's evaluate: [loss, accuracy], the loss alone without metrics, or
    a dict with return_dict=True."""
    if model.loss is None:
        raise RuntimeError("You must compile your model before training/testing. "
                           "Use `model.compile(optimizer, loss)`.")
    batch = 32 if batch_size is None else positive_int(batch_size, "batch_size")
    verbose = _verbose(verbose)
    user_callbacks = _callbacks(callbacks)
    if feed.is_stream(x):
        feed.refuse_weight_arguments(x, sample_weight, None)
        feed.refuse_array_arguments(x, [("y", y, None), ("batch_size", batch_size, None)])
        return feed.evaluate(model, x, verbose, steps, user_callbacks, return_dict)
    _unsupported(steps=(steps, None))
    x, y = _data(model, x, y)
    w = sample_weights.weights(model, y, len(x), sample_weight)
    metric_y = y
    if w is not None:
        y = sample_weights.weighted_targets(model, y, w)
    with sample_weights.weighted(model, w is not None):
        return _evaluate_arrays(model, x, y, batch, verbose, user_callbacks, return_dict,
                                metric_y)


def _evaluate_arrays(model, x, y, batch, verbose, user_callbacks, return_dict, metric_y=None):
    """evaluate over arrays checked (y: the engine's targets; metric_y: the
    targets the host metrics see, None: y)."""
    net = model._get_net(config.resolve_device(model._device), "evaluate")
    n = len(x)
    total_steps = math.ceil(n / batch)
    cbs = CallbackList(user_callbacks, model, {"verbose": verbose, "epochs": 1,
                                               "steps": total_steps})
    progbar = Progbar(total_steps, verbose=verbose) if verbose else None
    cbs.on_test_begin()
    loss_sum, correct = _evaluate_loop(model, net, x, y, batch, cbs, progbar, metric_y=metric_y)
    logs = _logs(model, loss_sum, correct, n)
    if progbar is not None:
        progbar.update(total_steps, logs, finalize=True)
    cbs.on_test_end(logs)
    if return_dict:
        return logs
    values = metric_values(model, logs)
    return values if len(values) > 1 else values[0]


def predict(model, x, batch_size, verbose, steps, callbacks):
    """Keras's predict: the outputs (n,) + output shape, float32."""
    batch = 32 if batch_size is None else positive_int(batch_size, "batch_size")
    verbose = _verbose(verbose)
    user_callbacks = _callbacks(callbacks)
    if feed.is_stream(x):
        feed.refuse_array_arguments(x, [("batch_size", batch_size, None)])
        return feed.predict(model, x, verbose, steps, user_callbacks)
    _unsupported(steps=(steps, None))
    if x is None:
        raise ValueError("x: expected an array of samples, got None")
    model._build_from_data(x)
    x = model._engine_data(x, "x", allow_empty=True)
    net = model._get_net(config.resolve_device(model._device), "predict",
                         min(batch, max(len(x), 1)))
    n = len(x)
    total_steps = max(1, math.ceil(n / batch))
    cbs = CallbackList(user_callbacks, model, {"verbose": verbose, "epochs": 1,
                                               "steps": total_steps})
    progbar = Progbar(total_steps, verbose=verbose) if verbose else None
    per_batch = cbs.wants_batches("predict")
    cbs.on_predict_begin()
    if n == 0:
        outputs = None
    elif not per_batch and (progbar is None or not progbar.dynamic or verbose != 1):
        outputs = net.predict(x, x_arg="x")
    else:
        chunker = StepChunker(progbar.interval if progbar else _SLOW_CHUNK_SECONDS, total_steps,
                              per_batch)
        parts, done = [], 0
        while done < total_steps:
            k = chunker.next(done)
            if per_batch:
                cbs.on_predict_batch_begin(done)
            began = time.perf_counter()
            parts.append(net.predict(x[done * batch:(done + k) * batch], x_arg="x",
                                     x_index0=done * batch * _row_values(x)))
            chunker.took(time.perf_counter() - began, k)
            done += k
            if per_batch:
                cbs.on_predict_batch_end(done - 1, {"outputs": parts[-1]})
            if progbar is not None and done < total_steps:
                progbar.update(done)
        outputs = np.concatenate(parts, axis=0)
    if progbar is not None:
        progbar.update(total_steps, finalize=True)
    cbs.on_predict_end()
    return model._empty_outputs() if outputs is None else model._keras_y(outputs)
