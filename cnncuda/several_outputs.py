"""Training and evaluating a model of several outputs (a functional or
subclassed model whose call returns a list), as Keras 3 does:

    model.compile(optimizer="rmsprop",
                  loss=["mean_squared_error", "categorical_crossentropy"],
                  loss_weights=[1.0, 0.5],
                  metrics=[["mean_absolute_error"], ["accuracy"]])
    model.fit(x, [priority, department], ...)

``loss``: one loss for every output, a list in the outputs' order, or a
dict keyed by the output layers' names (all of them, as Keras 3);
``loss_weights`` a list or dict (every output's, as Keras 3);
``metrics`` a list of one entry per output (a metric, a list of them or
None: Keras 3 takes a flat list of as many metrics as outputs so too) or a
dict keyed by output names. ``y`` (and validation_data's) is a list in
the outputs' order or a dict keyed by their names; sample_weight one array
for every output.

The engines compute every output's loss and its gradient (csrc/net/
loss_parts.c; the NumPy reference's NumpyNet the same): the network's
output packs the outputs side by side per sample, and its targets come
packed the same way, one float32 row per sample (``pack``): each output's
targets flat in Keras's order, a sparse output's integer labels as exact
floats (the engines convert them to int32 before its loss), and, in a
weighted call, an output with the binary cross-entropy or a regression
loss followed by the sample's weight (the categorical ones take weighted
targets: sample_weights.py). Each call's sums come back per output
(``(loss_sum, parts)``, parts the outputs' loss sums and correct counts in
turn), and the logs are Keras 3's: ``loss`` (the weighted sum of the
outputs' losses, with the regularizers' penalty), ``<output>_loss`` for
every output (unweighted), ``<output>_<metric>``, sorted by name;
evaluate's list is the loss, the outputs' losses in the outputs' order,
then the metrics in sorted order (Keras 3's _flatten_metrics_in_order).
"""
import numbers

import numpy as np

from . import losses
from .checks import check_targets, shape_str

__all__ = ["OutputLosses"]

_CATEGORICAL = ("sparse_categorical_crossentropy", "categorical_crossentropy")
_LABELS_EXACT = 2 ** 24     # float32 holds every integer below it exactly


class OutputLosses:
    """compile's losses of a model of several outputs: ``losses`` (a Loss
    per output, in the outputs' order), ``weights`` (loss_weights, floats)
    and ``names`` (the outputs' names). ``kind`` is 'several'."""

    kind = "several"

    def __init__(self, losses_, weights, names, shapes):
        self.losses, self.weights, self.names = list(losses_), list(weights), list(names)
        self.shapes = [tuple(s[1:]) for s in shapes]

    def engine_loss(self, weighted=False):
        """The engine's loss dict: {"outputs": [one loss dict per output,
        with its classes, positions and weight]}; weighted: the losses of a
        weighted call (sample_weights.py's rule per output)."""
        parts = []
        for loss, weight, shape in zip(self.losses, self.weights, self.shapes):
            part = dict(loss.engine_loss(), classes=int(shape[-1]),
                        positions=int(np.prod(shape[:-1], dtype=np.int64)), weight=weight)
            if weighted:
                if part["kind"] in _CATEGORICAL:
                    part["kind"] = "categorical_crossentropy"
                else:
                    part["weighted"] = True
            parts.append(part)
        return {"outputs": parts}

    def get_config(self):
        return {"losses": [{"class_name": loss.kind, "config": loss.get_config()}
                           for loss in self.losses],
                "loss_weights": list(self.weights), "names": list(self.names)}

    def __repr__(self):
        return "OutputLosses(%s)" % ", ".join("%s=%r" % (name, loss)
                                              for name, loss in zip(self.names, self.losses))


def output_names(model):
    return [model._layers[k].name for k in model._ends]


def _per_output(value, arg, names, what):
    """value given per output: a list of len(names), or a dict keyed by
    names (`what` for a name it leaves out; other keys refused). Returns
    the list, or None where value is one thing for every output."""
    if isinstance(value, dict):
        unknown = [key for key in value if key not in names]
        if unknown:
            raise ValueError("%s: unknown output name%s %s; the model's outputs are %s"
                             % (arg, "s" if len(unknown) > 1 else "",
                                ", ".join(repr(k) for k in unknown), names))
        return [value.get(name, what) for name in names]
    if isinstance(value, (list, tuple)):
        if len(value) != len(names):
            raise ValueError("%s: expected %d entries, one per output (%s, in that order), "
                             "got %d" % (arg, len(names), ", ".join(names), len(value)))
        return list(value)
    return None


def compile_losses(model, loss, loss_weights):
    """The OutputLosses of compile's loss and loss_weights, checked."""
    names = output_names(model)
    shapes = model.output_shape
    if loss is None:
        raise ValueError("loss: expected one of %s or a loss object, a list of them (one per "
                         "output: %s) or a dict keyed by those names, got None"
                         % (", ".join(repr(k) for k in losses.KINDS), ", ".join(names)))
    if isinstance(loss, dict):
        missing = [name for name in names if name not in loss]
        _per_output(loss, "loss", names, None)          # unknown names first
        if missing:
            raise ValueError("loss: a dict of losses needs every output's name, missing %s; "
                             "the model's outputs are %s" % (missing, names))
    given = _per_output(loss, "loss", names, None)
    if given is None:
        given = [loss] * len(names)
    objs = []
    for j, (item, shape) in enumerate(zip(given, shapes)):
        where = "loss['%s']" % names[j] if isinstance(loss, dict) else (
            "loss[%d]" % j if isinstance(loss, (list, tuple)) else "loss")
        if item is None:
            raise ValueError("%s: expected a loss for output %r, got None" % (where, names[j]))
        try:
            obj = losses.get(item)
        except (TypeError, ValueError) as err:
            raise type(err)("%s: %s" % (where, str(err).split(": ", 1)[-1])) from None
        if obj.kind in _CATEGORICAL and shape[-1] < 2:
            raise ValueError("%s: %s expects at least 2 outputs (classes), output %r is %s; "
                             "use binary_crossentropy" % (where, obj.kind, names[j],
                                                          shape_str(shape)))
        if obj.kind == "sparse_categorical_crossentropy" and shape[-1] > _LABELS_EXACT:
            raise ValueError("%s: output %r has %d classes, more than the %d whose labels "
                             "the engines stage exactly"
                             % (where, names[j], shape[-1], _LABELS_EXACT))
        objs.append(obj)
    weights = [1.0] * len(names)
    if loss_weights is not None:
        listed = _per_output(loss_weights, "loss_weights", names, None)
        if isinstance(loss_weights, dict) and None in listed:       # as Keras 3 (a KeyError)
            raise ValueError("loss_weights: a dict of weights needs every output's name, "
                             "missing %s; the model's outputs are %s"
                             % ([name for name in names if name not in loss_weights], names))
        if listed is None:
            raise TypeError("loss_weights: expected a list of %d numbers (one per output: %s) "
                            "or a dict keyed by those names, got %r"
                            % (len(names), ", ".join(names), loss_weights))
        for j, value in enumerate(listed):
            if isinstance(value, bool) or not isinstance(value, numbers.Real) \
                    or not np.isfinite(value) or value < 0:
                raise ValueError("loss_weights: expected finite numbers >= 0, got %r for "
                                 "output %r" % (value, names[j]))
            weights[j] = float(value)
    return OutputLosses(objs, weights, names, shapes)


def compile_metrics(model, metrics, several, compiled_metrics):
    """compile's metrics of a model of several outputs: [(log name,
    object or None for the engine's accuracy count)] and the output each
    reads. `compiled_metrics` is models._compiled_metrics."""
    names = several.names
    if metrics is None:
        return [], []
    if isinstance(metrics, dict):
        listed = _per_output(metrics, "metrics", names, None)
    elif isinstance(metrics, (list, tuple)):
        if len(metrics) != len(names):
            raise ValueError("metrics: expected a list of %d entries, one per output (%s, in "
                             "that order; each a metric, a list of them or None), or a dict "
                             "keyed by those names, as Keras 3, got %d entries: %r"
                             % (len(names), ", ".join(names), len(metrics), list(metrics)))
        listed = list(metrics)
    else:
        raise TypeError("metrics: expected a list of one entry per output (%s) or a dict keyed "
                        "by their names, got %r" % (", ".join(names), metrics))
    out, outputs = [], []
    for j, entry in enumerate(listed):
        if entry is None:
            continue
        entry = list(entry) if isinstance(entry, (list, tuple)) else [entry]
        try:
            compiled = compiled_metrics(entry, several.losses[j].kind)
        except (TypeError, ValueError) as err:
            raise type(err)("metrics for output %r: %s" % (names[j], err)) from None
        for name, obj in compiled:
            out.append(("%s_%s" % (names[j], name), obj))
            outputs.append(j)
    return out, outputs


def metrics_config(model, serialize):
    """compile's metrics as saved (Keras 3's form for several outputs): a
    list per output of its metrics, strings or Keras's form of the objects
    (`serialize`)."""
    out = [[] for _ in model.loss.names]
    for (name, obj), j in zip(model._metrics, model._metric_outputs):
        given = name[len(model.loss.names[j]) + 1:]
        out[j].append(given if obj is None else getattr(obj, "_from_string", None)
                      or serialize(obj))
    return out


def compile_arguments(config):
    """loss and loss_weights of compile from OutputLosses.get_config
    (cnncuda's own files)."""
    return ([losses.from_config(entry["class_name"], entry["config"])
             for entry in config["losses"]], list(config["loss_weights"]))


def _target_width(loss, shape, weighted):
    k, positions = shape[-1], int(np.prod(shape[:-1], dtype=np.int64))
    if loss.kind == "sparse_categorical_crossentropy":
        return k if weighted else positions
    return positions * k + (weighted and loss.kind not in _CATEGORICAL)


def _y_parts(model, y, arg):
    """[(the targets of each output, how messages name them)] from y."""
    names = model.loss.names
    if isinstance(y, dict):
        unknown = [key for key in y if key not in names]
        missing = [name for name in names if name not in y]
        if unknown or missing:
            raise ValueError("%s: a dict of targets needs the keys %s (the outputs' names)%s%s"
                             % (arg, names,
                                "; unknown %s" % sorted(map(str, unknown)) if unknown else "",
                                "; missing %s" % missing if missing else ""))
        return [(y[name], "%s['%s']" % (arg, name)) for name in names]
    if not isinstance(y, (list, tuple)):
        raise TypeError("%s: the model has %d outputs (%s): expected a list or tuple of %d "
                        "target arrays in that order, or a dict keyed by those names, got %s"
                        % (arg, len(names), ", ".join(names), len(names), type(y).__name__))
    if len(y) != len(names):
        raise ValueError("%s: expected %d target arrays, one per output (%s, in that order), "
                         "got %d" % (arg, len(names), ", ".join(names), len(y)))
    return [(value, "%s[%d] (output %r)" % (arg, j, names[j])) for j, value in enumerate(y)]


def pack(model, y, n, arg="y"):
    """The targets y (a list or dict, see the module's docstring) checked
    against each output and its loss, packed: float32 (n, width), each
    output's targets flat in turn, sparse labels as exact floats."""
    several = model.loss
    blocks = []
    for (value, where), loss, shape in zip(_y_parts(model, y, arg), several.losses,
                                           several.shapes):
        if value is None:
            raise ValueError("%s: expected the targets of %d samples, got None" % (where, n))
        array = np.asarray(value) if not isinstance(value, np.ndarray) else value
        if array.ndim == 0 or len(array) != n:
            raise ValueError("%s: expected %d samples (as many as x), got %s"
                             % (where, n, len(array) if array.ndim else "a scalar"))
        checked = check_targets(value, n, loss.kind, shape, where)
        blocks.append(np.asarray(checked, np.float32).reshape(n, -1))
    return np.ascontiguousarray(np.concatenate(blocks, axis=1), np.float32)


def unpack(model, packed):
    """The packed unweighted targets taken apart: each output's, (n,) +
    its shape ((n,) + its shape without the last axis for sparse labels)."""
    parts, start = [], 0
    n = len(packed)
    for loss, shape in zip(model.loss.losses, model.loss.shapes):
        width = _target_width(loss, shape, False)
        block = packed[:, start:start + width]
        start += width
        if loss.kind == "sparse_categorical_crossentropy":
            parts.append(block.reshape((n,) + tuple(shape[:-1])))
        else:
            parts.append(block.reshape((n,) + tuple(shape)))
    return parts


def weights_check(model, w, where, index_of):
    """sample_weights.weights' value check for several outputs: finite and
    >= 0, and not 0 where an output with a categorical cross-entropy has
    the engine's accuracy compiled (its count would go wrong, as for one
    output)."""
    bad = ~np.isfinite(w) | (w < 0)
    counted = [model.loss.names[j] for name, obj, j in _engine_metrics(model)
               if model.loss.losses[j].kind in _CATEGORICAL]
    if counted:
        bad |= w == 0
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError("%s: expected finite weights >= 0%s, got %g"
                         % (where % index_of(i),
                            (" and, with an accuracy compiled for output %r, not 0 (the accuracy "
                             "would count its sample wrongly)" % counted[0]) if counted else "",
                            w[i]))


def _engine_metrics(model):
    return [(name, obj, j) for (name, obj), j in zip(model._metrics, model._metric_outputs)
            if obj is None]


def weighted_pack(model, packed, w):
    """The packed targets of a weighted call (OutputLosses.engine_loss with
    weighted=True): a categorical output's targets times w (a sparse one's
    one-hot), another output's targets then w. w None: weight 1."""
    n = len(packed)
    w = np.ones(n, np.float32) if w is None else np.asarray(w, np.float32)
    blocks = []
    for loss, shape, block in zip(model.loss.losses, model.loss.shapes, unpack(model, packed)):
        k = shape[-1]
        if loss.kind == "sparse_categorical_crossentropy":
            t = np.zeros((n, k), np.float32)
            t[np.arange(n), block.reshape(n).astype(np.int64)] = 1.0
            blocks.append(t * w[:, None])
        elif loss.kind == "categorical_crossentropy":
            blocks.append(block.reshape(n, -1) * w[:, None])
        else:
            blocks.append(np.concatenate([block.reshape(n, -1), w[:, None]], axis=1))
    return np.ascontiguousarray(np.concatenate(blocks, axis=1), np.float32)


def _parts(model, parts):
    parts = np.asarray(parts, np.float64)
    if parts.ndim == 0:         # no step summed yet
        parts = np.zeros(2 * len(model.loss.names))
    return parts


def logs(model, loss_sum, parts, count, result, prefix=""):
    """Keras 3's logs of several outputs (see the module's docstring);
    `result` gives a host metric's value."""
    parts = _parts(model, parts)
    values = {"loss": float(loss_sum) / count}
    for j, name in enumerate(model.loss.names):
        values["%s_loss" % name] = float(parts[2 * j]) / count
    for (name, metric), j in zip(model._metrics, model._metric_outputs):
        values[name] = float(parts[2 * j + 1]) / count if metric is None else result(metric)
    return {prefix + name: values[name] for name in sorted(values)}


def metric_values(model, logs, prefix="", names=False):
    """evaluate's list: the loss, each output's loss in the outputs' order,
    then the metrics in sorted order (Keras 3's); names: their names."""
    first = [prefix + "loss"] + [prefix + "%s_loss" % name for name in model.loss.names]
    rest = sorted(prefix + name for name, _ in model._metrics)
    return first + rest if names else [logs[key] for key in first + rest]


def update_host_metrics(model, metrics, y, outputs):
    """Each host metric updated with its output's targets (out of the
    packed unweighted y) and outputs (the engine's packed outputs taken
    apart, model._keras_y)."""
    outs = model._keras_y(outputs)
    ys = unpack(model, np.asarray(y))
    by_object = {id(obj): j for (_, obj), j in zip(model._metrics, model._metric_outputs)
                 if obj is not None}
    for metric in metrics:
        j = by_object[id(metric)]
        metric.update_state(ys[j], outs[j])


def refuse_weights_argument(model, sample_weight, class_weight):
    """Per-output sample weights and class_weight are refused (Keras 3
    refuses class_weight for several outputs too)."""
    if class_weight is not None:
        raise ValueError("class_weight: not supported for a model of several outputs (%s), as "
                         "in Keras 3; give sample_weight" % ", ".join(model.loss.names))
    if isinstance(sample_weight, (list, tuple, dict)) and not (
            isinstance(sample_weight, (list, tuple)) and sample_weight
            and isinstance(sample_weight[0], numbers.Real)):
        raise ValueError("sample_weight: one array of weights for every output is supported "
                         "for a model of several outputs (%s); per-output sample weights (a "
                         "list or dict) are not" % ", ".join(model.loss.names))
