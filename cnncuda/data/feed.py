"""fit, evaluate and predict over batches that arrive one at a time: a
cnncuda.data.Dataset, a Python generator (or any iterator) and a
keras.utils.Sequence / PyDataset.

The batches are the pipeline's own: consecutive batches of one size are
joined into a block and given to the engine in one call (``set_data`` of the
block, ``set_order`` in its order, ``train_range`` over it), so training on
k batches costs one engine call and gives exactly the results of training
them one by one. How many batches a call takes adapts so that each lasts
about one progress-bar interval (cnncuda.chunks.StepChunker), holding at
most 256 MiB of float32 samples (data larger than the device goes in
such blocks, each uploaded in turn; a larger batch is a block); a callback
with batch hooks gets one batch a call. Each call reads the engine's sums
(the loss shown). Arrays keep fit's resident path (training.py).

Overlap: the stream is iterated, and its blocks joined, on one producer
thread (prefetch.Producer) while the engine trains on the block before
(the engine calls release the GIL), at most two blocks ahead; a generator
is touched by that thread only. The producer groups batches by its own
step count; the caller's thread cuts a block where a learning-rate
schedule's rate may change (cnncuda.chunks.RateChunker's rule) and makes
every engine and model call, so the order of the batches and every result
are those of the same loop on one thread (``overlap=False``). What the
stream raises comes out where that loop would have raised it, after the
blocks before it trained. A fit that stops early (stop_training, an
error, Ctrl-C) has read a few blocks past the last one it trained (two
queued, one waiting for room, one being made) and the batch held back to
join with the next; they are dropped (a generator does not give them
again).

Per epoch: a Dataset is iterated anew (its shuffle reshuffles); a Sequence's
batches are visited in a shuffled order when shuffle=True, and its
on_epoch_end is called; a generator is one stream for the whole fit. With
steps_per_epoch the epoch ends after that many batches, and the next epoch
goes on from there (a Dataset or Sequence starts over once it runs out);
a generator that runs out ends training with Keras's warning.
"""
import collections.abc
import contextlib
import sys
import time
import warnings

import numpy as np

from .. import config, sample_weights
from ..callbacks import CallbackList, History, ProgbarLogger
from ..checks import positive_int
from ..chunks import StepChunker
from ..progbar import Progbar
from .dataset import INFINITE, Dataset
from . import batch_parts
from .prefetch import Producer
from .sequence import PyDataset

__all__ = ["is_stream", "fit", "evaluate", "predict", "FeedStats"]

_CHUNK_SECONDS = 1.0     # an engine call's length when no bar is redrawn in place
# a block's samples as the engine holds them (float32) at most, where one
# batch is not larger: a block lives on the host (up to four of them with
# the overlap) and on the device at once
_BLOCK_BYTES = 256 << 20


def is_stream(x):
    """Whether x is a Dataset, a Sequence / PyDataset or an iterator of batches."""
    return isinstance(x, (Dataset, PyDataset)) or (
        isinstance(x, collections.abc.Iterator) and not isinstance(x, np.ndarray))


def _kind(x):
    if isinstance(x, Dataset):
        return "a Dataset"
    if isinstance(x, PyDataset):
        return "a PyDataset"
    return "a generator"


def refuse_array_arguments(x, arg_values):
    """Keras's rule: a stream brings its own batches and targets."""
    for arg, value, default in arg_values:
        if value is not default and not (default == 0.0 and value == 0.0):
            raise ValueError("%s: expected %r when x is %s (it brings its own batches%s), got %r"
                             % (arg, default, _kind(x),
                                " and targets" if arg == "y" else "", value))


class _Batches:
    """The batches of one stream, an epoch at a time: ``epoch(limit)``
    yields (x, y) pairs (y None where the batch has none); ``steps`` is the
    number of batches of a whole pass where it is known."""

    def __init__(self, x, arg, shuffle=False, rng=None):
        self.x, self.arg, self.shuffle, self.rng = x, arg, shuffle, rng
        self.current = None          # the iterator an epoch with a step limit goes on from
        if isinstance(x, Dataset):
            card = x.cardinality()
            self.steps = card if card >= 0 else None
            self.infinite = card == INFINITE
        elif isinstance(x, PyDataset):
            self.steps, self.infinite = len(x), False
        else:
            self.steps, self.infinite = None, False
            self.current = x

    def _fresh(self):
        if isinstance(self.x, Dataset):
            return iter(self.x)
        if isinstance(self.x, PyDataset):
            order = np.arange(len(self.x))
            if self.shuffle:
                order = self.rng.permutation(order)
            return (self.x[int(i)] for i in order)
        return None                  # a generator has one pass only

    def epoch(self, limit=None):
        """The batches of one epoch: all of a fresh pass, or `limit` of
        them, going on from where the last epoch stopped. Sets
        ``ran_out`` when a generator ended before `limit`."""
        self.ran_out = False
        if limit is None:
            source = self._fresh() if not self._is_generator() else self.current
            for element in source:
                yield self._split(element)
            return
        given = 0
        while given < limit:
            if self.current is None:
                self.current = self._fresh()
            try:
                element = next(self.current)
            except StopIteration:
                if self._is_generator():
                    self.ran_out = True
                    return
                self.current = None
                if given == 0 and self.steps == 0:
                    return
                continue
            given += 1
            yield self._split(element)

    def end_epoch(self):
        if isinstance(self.x, PyDataset):
            self.x.on_epoch_end()

    def _is_generator(self):
        return not isinstance(self.x, (Dataset, PyDataset))

    def _split(self, element):
        return batch_parts.split(element, self.arg)


def _blocks(batches, chunker, done_before=0):
    """Groups consecutive batches of one size and structure (batch_parts):
    yields (xs, ys, ws, batch, count) with `count` batches each, as many as
    chunker asks for and as fit in _BLOCK_BYTES."""
    pending, size, key = [], 0, None

    def flush():
        xs, ys, ws = batch_parts.join(pending)
        return xs, ys, ws, batch_parts.rows(pending[0][0]), len(pending)

    done = done_before
    for xb, yb, wb in batches:
        rows = batch_parts.rows(xb)
        bytes_ = batch_parts.nbytes(xb)
        this = (rows, batch_parts.signature(xb, yb, wb))
        if pending and (this != key or len(pending) >= chunker.next(done)
                        or size + bytes_ > _BLOCK_BYTES):
            block = flush()
            done += block[4]
            pending, size = [], 0
            yield block
        pending.append((xb, yb, wb))
        size += bytes_
        key = this
    if pending:
        yield flush()


class FeedStats:
    """Where a fit over a stream spent its time (cnncuda.bench.stream), summed
    over the fit: ``engine`` seconds inside the engine's calls on the
    training blocks (the upload, the steps and the sums read back),
    ``upload`` those of set_data alone, ``wait`` seconds the caller's
    thread waited for the stream's next block (decoding it, with
    overlap=False), ``samples`` and ``blocks`` trained."""

    def __init__(self):
        self.engine = self.upload = self.wait = 0.0
        self.samples = self.blocks = 0

    def __repr__(self):
        return ("FeedStats(engine=%.3fs, upload=%.3fs, wait=%.3fs, samples=%d, blocks=%d)"
                % (self.engine, self.upload, self.wait, self.samples, self.blocks))


class _Feed:
    """A call's passes over its streams: made on one producer thread
    (overlap) or on the caller's thread, as the loop asks for them."""

    def __init__(self, overlap, stats=None):
        self.producer = Producer() if overlap else None
        self.stats = stats

    def items(self, make):
        """The items of make(); close() it (contextlib.closing) when left early."""
        items = self.producer.items(make) if self.producer is not None else iter(make())
        try:
            while True:
                began = time.perf_counter()
                try:
                    item = next(items)
                except StopIteration:
                    return
                finally:
                    if self.stats is not None:
                        self.stats.wait += time.perf_counter() - began
                yield item
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    def close(self):
        if self.producer is not None:
            self.producer.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _contiguous(blocks):
    """Blocks whose arrays are C-contiguous, as the engine uploads them."""
    for xs, ys, ws, batch, count in blocks:
        yield (batch_parts.contiguous(xs),
               ys if ys is None or not isinstance(ys, np.ndarray) else np.ascontiguousarray(ys),
               ws, batch, count)


def _check_pair(model, xb, yb, arg):
    from ..training import _data
    if yb is None:
        raise ValueError("%s: expected batches (x, y) to train or evaluate on, got batches of "
                         "x alone" % arg)
    return _data(model, xb, yb, arg, arg + "'s targets")


def _check_batch(model, xb, yb, wb, arg, class_weight=None):
    """A batch (or block) checked against the model, in the engine's form:
    (x, the engine's targets, the targets the host metrics see). Weights
    (the batch's sample_weight, or class_weight's of its targets) turn the
    model's weighted mode on for the rest of the call (the caller restores
    it: sample_weights.weighted): from then on every batch's targets are
    given weighted, weight 1 where a batch has none."""
    xb, yb = _check_pair(model, xb, yb, arg)
    metric_y = yb
    w = None
    if wb is not None or class_weight is not None:
        w = sample_weights.weights(model, yb, len(xb), wb, class_weight,
                                   arg=arg + "'s sample_weight")
        model._weighted = True
    if model._weighted:
        yb = sample_weights.weighted_targets(model, yb, w)
    return xb, yb, metric_y


def refuse_weight_arguments(x, sample_weight, class_weight):
    """Keras 3's rules: a stream brings its own sample weights; class_weight
    is taken with a Dataset or a PyDataset (applied to each batch), not with
    a generator."""
    kind = _kind(x)[2:]
    if sample_weight is not None:
        raise ValueError("When providing `x` as %s, `sample_weight` should not be passed. "
                         "Instead, the sample weights should be included as part of the %s "
                         "(batches (x, y, sample_weight)); got sample_weight=%s"
                         % (_kind(x), kind, _shown(sample_weight)))
    if class_weight is None:
        return
    if not isinstance(x, (Dataset, PyDataset)):
        raise ValueError("Argument `class_weight` is not supported for Python generator inputs. "
                         "Received: class_weight=%s" % _shown(class_weight))
    if not isinstance(class_weight, dict):
        raise TypeError("class_weight: expected a dict {class index: weight}, got %s"
                        % _shown(class_weight))


def _shown(value):
    from ..training import _shown as shown
    return shown(value)


def _logs(model, loss_sum, correct, count, prefix=""):
    from ..training import _logs as logs
    return logs(model, loss_sum, correct, max(count, 1), prefix)


def _host(model):
    """The model's host metrics, their state reset."""
    host = model._host_metrics()
    for metric in host:
        metric.reset_state()
    return host


def _update(model, host, net, xs, ys, x_arg="x"):
    from ..training import update_host_metrics
    if host:
        update_host_metrics(model, host, ys, net.predict(xs, x_arg=x_arg))


def should_validate(epoch, freq):
    from ..training import should_validate as check
    return check(epoch, freq)


def _steps(value, arg):
    return None if value is None else positive_int(value, arg)


def fit(model, x, epochs, verbose, callbacks, validation_data, shuffle, initial_epoch,
        steps_per_epoch, validation_steps, validation_batch_size, validation_freq,
        overlap=True, stats=None, class_weight=None):
    """fit over a stream (training.fit checked the common arguments).
    `overlap`: the stream read on a producer thread while the engine trains
    (False: on the caller's thread, between the engine's calls; the
    results are the same). `stats`: a FeedStats that gathers where the
    time went. `class_weight`: weights each batch's samples by their class
    (a Dataset's or PyDataset's, as Keras 3)."""
    with sample_weights.weighted(model, class_weight is not None):
        return _fit(model, x, epochs, verbose, callbacks, validation_data, shuffle,
                    initial_epoch, steps_per_epoch, validation_steps, validation_freq, overlap,
                    stats, class_weight)


def _fit(model, x, epochs, verbose, callbacks, validation_data, shuffle, initial_epoch,
         steps_per_epoch, validation_steps, validation_freq, overlap, stats, class_weight):
    steps_per_epoch = _steps(steps_per_epoch, "steps_per_epoch")
    validation_steps = _steps(validation_steps, "validation_steps")
    # validation_batch_size (checked by training.fit) changes nothing here:
    # validation arrays are evaluated in one engine call, whose sums do not
    # depend on the batch, and a validation stream brings its own batches
    source = _Batches(x, "x", shuffle=bool(shuffle), rng=model._shuffle_rng)
    if source.infinite and steps_per_epoch is None:
        raise ValueError("steps_per_epoch: expected the number of batches of an epoch: x is an "
                         "infinite dataset (repeat() without a count), got None")
    validation = None
    if validation_data is not None:
        if is_stream(validation_data):
            validation = _Batches(validation_data, "validation_data")
            if validation.infinite and validation_steps is None:
                raise ValueError("validation_steps: expected the number of batches to "
                                 "evaluate: validation_data is infinite, got None")
        elif isinstance(validation_data, (tuple, list)) and len(validation_data) in (2, 3):
            vx, vy = _check_pair(model, validation_data[0], validation_data[1],
                                 "validation_data[0]")
            vw = None
            if len(validation_data) == 3:
                vw = sample_weights.weights(model, vy, len(vx), validation_data[2],
                                            arg="validation_data[2]")
            validation = (vx, vy, vw)
        else:
            raise ValueError("validation_data: expected a tuple (x_val, y_val) or (x_val, "
                             "y_val, val_sample_weight), or a dataset, got %s"
                             % type(validation_data).__name__)
    device = config.resolve_device(model._device)
    steps = steps_per_epoch if steps_per_epoch is not None else source.steps
    history = History()
    bar = ProgbarLogger(verbose) if verbose else None
    params = {"verbose": verbose, "epochs": epochs, "steps": steps}
    cbs = CallbackList(list(callbacks) + [history] + ([bar] if bar else []), model, params)
    per_batch = cbs.wants_batches("train")
    model.stop_training = False
    cbs.on_train_begin()
    logs = {}
    feed = _Feed(overlap, stats)
    try:
        for epoch in range(initial_epoch, epochs):
            cbs.on_epoch_begin(epoch)
            logs, done = _train_epoch(model, device, source, steps_per_epoch, cbs, bar, per_batch,
                                      feed, class_weight)
            source.end_epoch()
            if params["steps"] is None:
                params["steps"] = done      # known after the first pass, as Keras learns it
            if source.ran_out:
                warnings.warn("Your input ran out of data; interrupting training. Make sure "
                              "that your dataset or generator can generate at least "
                              "`steps_per_epoch * epochs` batches.", stacklevel=3)
                model.stop_training = True
            if validation is not None and done and should_validate(epoch, validation_freq):
                cbs.on_test_begin()
                val_logs = _evaluate_validation(model, device, validation, validation_steps,
                                                feed)
                cbs.on_test_end(val_logs)
                logs.update(val_logs)
            cbs.on_epoch_end(epoch, logs)
            if model.stop_training:
                break
    except BaseException:
        model._forget_failed_group(sys.exc_info()[1])
        raise
    finally:
        feed.close()
    cbs.on_train_end(logs)
    return history


def _train_epoch(model, device, source, limit, cbs, bar, per_batch, feed, class_weight=None):
    """One epoch; the loss and accuracy sums stay on the engine (read
    without reset after each block, reset at the end), so they are summed
    as fit over arrays sums them. The blocks come from `feed` (made on its
    producer's thread); every engine and model call is made here."""
    seconds = bar.progbar.interval if (bar and bar.progbar.dynamic and bar.verbose == 1) \
        else _CHUNK_SECONDS
    chunker = StepChunker(seconds, limit or (1 << 40), single=per_batch)
    state = _EpochState(model, device, cbs, per_batch, feed.stats)

    def make():
        return _contiguous(_blocks(source.epoch(limit), chunker))
    try:
        with contextlib.closing(feed.items(make)) as blocks:
            for xs, ys, ws, batch, count in blocks:
                began = time.perf_counter()
                if state.per_batch:
                    state.cbs.on_train_batch_begin(state.done)
                xs, ys, metric_y = _check_batch(model, xs, ys, ws, "x", class_weight)
                # a schedule's rate is the engine's from one call to the next
                # (chunks.RateChunker): the block is cut where it may change
                at = 0
                while at < count:
                    k = _constant_steps(model.optimizer, count - at)
                    rows = slice(at * batch, min((at + k) * batch, len(xs)))
                    state.train(xs[rows], ys[rows], metric_y[rows], batch, k)
                    at += k
                chunker.took(time.perf_counter() - began, count)
                if bar is not None and (limit is None or state.done < limit) and bar.due():
                    bar.update(state.done, state.logs())
                if model.stop_training:
                    break
    finally:
        if state.net is not None:
            try:
                state.net.read_sums(reset=True)    # the next epoch (or fit) starts from zero
            except Exception:
                pass
    return state.logs(), state.done


def _constant_steps(optimizer, count):
    """How many of the next `count` steps surely train at one rate."""
    constant = optimizer.constant_rate_steps() if optimizer is not None else None
    return count if constant is None else max(1, min(count, constant))


class _EpochState:
    """An epoch's engine calls over its blocks and the sums they leave."""

    def __init__(self, model, device, cbs, per_batch, stats):
        self.model, self.device, self.cbs, self.per_batch = model, device, cbs, per_batch
        self.stats = stats
        self.host = _host(model)
        self.base_loss = self.base_correct = 0.0   # sums of a network replaced within the epoch
        self.loss_sum = self.correct = 0.0
        self.seen = self.done = 0
        self.net = None

    def logs(self):
        return _logs(self.model, self.loss_sum, self.correct, self.seen)

    def train(self, xs, ys, metric_y, batch, count):
        """`count` batches of `batch` samples (the last one may be short),
        checked (_check_batch); the host metrics see metric_y."""
        model = self.model
        new = model._get_net(self.device, "train", max(batch, _built_batch(model)))
        if self.net is not None and new is not self.net:
            part_loss, part_correct = self.net.read_sums(reset=True)
            self.base_loss += part_loss
            self.base_correct += part_correct
        net = self.net = new
        began = time.perf_counter()
        model._data_token = None      # the network holds this block, no fit's data
        net.set_data(xs, ys)
        uploaded = time.perf_counter()
        net.set_order(np.arange(len(xs)))
        if self.host:        # see training.train_steps_with_outputs
            from ..training import train_steps_with_outputs
            train_steps_with_outputs(model, net, xs, metric_y, np.arange(len(xs)), 0,
                                     len(xs), batch, self.host)
        else:
            net.train_range(0, len(xs), batch)
        part_loss, part_correct = net.read_sums(reset=False)
        if self.stats is not None:
            self.stats.engine += time.perf_counter() - began
            self.stats.upload += uploaded - began
            self.stats.samples += len(xs)
            self.stats.blocks += 1
        self.loss_sum = self.base_loss + part_loss
        self.correct = self.base_correct + part_correct
        self.seen += len(xs)
        self.done += count
        if self.per_batch:
            self.cbs.on_train_batch_end(self.done - 1, self.logs())


def _built_batch(model):
    net = model._current_net()
    return net.max_batch if net is not None else 1


def _evaluate_validation(model, device, validation, steps, feed):
    host = _host(model)
    if isinstance(validation, tuple):
        vx, vy, vw = validation
        metric_y = vy
        if vw is not None:
            model._weighted = True
        if model._weighted:
            vy = sample_weights.weighted_targets(model, vy, vw)
        net = model._get_net(device, "evaluate")
        loss_sum, correct = net.evaluate(vx, vy, x_arg="validation_data[0]")
        _update(model, host, net, vx, metric_y, "validation_data[0]")
        return _logs(model, loss_sum, correct, len(vx), "val_")
    loss_sum = correct = 0.0
    seen = 0
    with contextlib.closing(feed.items(lambda: validation.epoch(steps))) as batches:
        for xb, yb, wb in batches:
            xb, yb, metric_y = _check_batch(model, xb, yb, wb, "validation_data")
            net = model._get_net(device, "evaluate")
            part_loss, part_correct = net.evaluate(xb, yb, x_arg="validation_data")
            _update(model, host, net, xb, metric_y, "validation_data")
            loss_sum += part_loss
            correct += part_correct
            seen += len(xb)
    validation.end_epoch()
    return _logs(model, loss_sum, correct, seen, "val_")


def evaluate(model, x, verbose, steps, callbacks, return_dict, overlap=True):
    """evaluate over a stream: the loss and metric over every sample of its
    batches, each weighted by its batch's sample_weight where it has one
    (`overlap` as fit's)."""
    with sample_weights.weighted(model, False):
        return _evaluate(model, x, verbose, steps, callbacks, return_dict, overlap)


def _evaluate(model, x, verbose, steps, callbacks, return_dict, overlap):
    steps = _steps(steps, "steps")
    source = _Batches(x, "x")
    if source.infinite and steps is None:
        raise ValueError("steps: expected the number of batches to evaluate: x is an infinite "
                         "dataset, got None")
    total = steps if steps is not None else source.steps
    cbs = CallbackList(list(callbacks), model, {"verbose": verbose, "epochs": 1, "steps": total})
    progbar = Progbar(total, verbose=verbose) if verbose else None
    cbs.on_test_begin()
    host = _host(model)
    loss_sum = correct = 0.0
    seen = done = 0
    with _Feed(overlap) as feed, \
            contextlib.closing(feed.items(lambda: source.epoch(steps))) as batches:
        for xb, yb, wb in batches:
            cbs.on_test_batch_begin(done)
            # builds an unbuilt model from xb
            xb, yb, metric_y = _check_batch(model, xb, yb, wb, "x")
            net = model._get_net(config.resolve_device(model._device), "evaluate")
            part_loss, part_correct = net.evaluate(xb, yb)
            _update(model, host, net, xb, metric_y)
            loss_sum += part_loss
            correct += part_correct
            seen += len(xb)
            done += 1
            logs = _logs(model, loss_sum, correct, seen)
            cbs.on_test_batch_end(done - 1, logs)
            if progbar is not None and (total is None or done < total):
                progbar.update(done, logs)
    source.end_epoch()
    logs = _logs(model, loss_sum, correct, seen)
    if progbar is not None:
        if progbar.target is None:
            progbar.target = done
        progbar.update(done, logs, finalize=True)
    cbs.on_test_end(logs)
    if return_dict:
        return logs
    from ..training import metric_values
    values = metric_values(model, logs)
    return values if len(values) > 1 else values[0]


def predict(model, x, verbose, steps, callbacks, overlap=True):
    """predict over a stream: the outputs of every batch's x, in order
    (`overlap` as fit's)."""
    steps = _steps(steps, "steps")
    source = _Batches(x, "x")
    if source.infinite and steps is None:
        raise ValueError("steps: expected the number of batches to predict: x is an infinite "
                         "dataset, got None")
    total = steps if steps is not None else source.steps
    cbs = CallbackList(list(callbacks), model, {"verbose": verbose, "epochs": 1, "steps": total})
    progbar = Progbar(total, verbose=verbose) if verbose else None
    cbs.on_predict_begin()
    parts, done = [], 0
    with _Feed(overlap) as feed, \
            contextlib.closing(feed.items(lambda: source.epoch(steps))) as batches:
        for xb, _, _ in batches:
            cbs.on_predict_batch_begin(done)
            model._build_from_data(xb)
            xb = model._engine_data(xb, "x", finite=False)
            net = model._get_net(config.resolve_device(model._device), "predict", len(xb))
            parts.append(net.predict(xb, x_arg="x"))
            done += 1
            cbs.on_predict_batch_end(done - 1, {"outputs": parts[-1]})
            if progbar is not None and (total is None or done < total):
                progbar.update(done)
    source.end_epoch()
    if progbar is not None:
        if progbar.target is None:
            progbar.target = done
        progbar.update(done, finalize=True)
    cbs.on_predict_end()
    if not parts:
        if not model.built:
            raise ValueError("x: expected at least one batch, got an empty dataset")
        return np.zeros((0,) + tuple(model.output_shape[1:]), np.float32)
    return model._keras_y(np.concatenate(parts, axis=0))
