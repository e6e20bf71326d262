"""fit's sample_weight and class_weight, evaluate's and the batch calls'
sample_weight: Keras weights each sample's loss, l = sum_i(w_i l_i) / n
(Keras 3's 'sum_over_batch_size'; the epoch's loss the same over all
samples), and leaves the metrics given as ``metrics=`` unweighted.

The engines need no weighted kernels for this: the categorical
cross-entropies are linear in their targets (from logits sum(t) lse(z) -
sum(t z), from probabilities -sum(t log q); docs/semantics.md), so a sample
weighted w is the categorical cross-entropy of the targets w t (w times the
one-hot of a sparse label), loss and gradient alike. A weighted call gives
the engine those targets and a network built with the categorical
cross-entropy (``model._weighted``; the model's network is rebuilt, weights
and optimizer state carried, when a call of the other kind follows). The
accuracy of targets w t is argmax(w t) == argmax(t) for w > 0, so zero
weights are refused while an accuracy is compiled, as are negative ones.
The binary cross-entropy and the regression losses are not linear in their
targets: for them the engines' loss ops take the weight itself, after each
sample's targets (a target row of k + 1 values; the engine loss dict's
``weighted``), which multiplies the sample's loss and gradient; the accuracy
count stays unweighted, so zero weights are fine there. Outputs of several
positions per sample are refused. A model of several outputs takes one
array of weights for all of them, each output's targets weighted by its
loss's rule (several_outputs.weighted_pack). The metrics computed on the host
(metrics.py) are given the targets as the user gave them, so they stay
unweighted too (training.py's metric targets).
"""
import contextlib
import numbers

import numpy as np

from . import several_outputs
from .checks import shape_str

__all__ = ["weights", "weighted_targets", "weighted"]


def _shown(value):
    if isinstance(value, np.ndarray):
        return "an array of shape %s" % (shape_str(value.shape),)
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _labels(model, y):
    """The class of each target row (Keras's class_weight rule: argmax of
    one-hot rows, the rounded label of sparse ones)."""
    y = np.asarray(y)
    if y.ndim > 1:
        y = np.argmax(y, axis=-1) if y.shape[-1] != 1 else y.reshape(-1)
    return np.round(y).astype(np.int64)


def weights(model, y, n, sample_weight=None, class_weight=None, arg="sample_weight"):
    """The per-sample weights (float32, shape (n,)) of a call, or None when
    it gives none; checked: the output (one position per sample), the shape,
    finite values >= 0 (> 0 with an accuracy metric and a categorical
    cross-entropy). `y` holds the checked targets."""
    if sample_weight is None and class_weight is None:
        return None
    if sample_weight is not None and class_weight is not None:
        raise ValueError("You cannot `class_weight` and `sample_weight` at the same time.")
    which = arg if class_weight is None else "class_weight"
    several = isinstance(model.loss, several_outputs.OutputLosses)
    if several:
        several_outputs.refuse_weights_argument(model, sample_weight, class_weight)
        shaped = [name for name, shape in zip(model.loss.names, model.loss.shapes)
                  if len(shape) > 1]
        if shaped:
            raise ValueError("%s: weighting samples is supported for outputs of shape (None, "
                             "classes); output %r has several positions per sample"
                             % (which, shaped[0]))
    elif len(model.output_shape) > 2:
        raise ValueError("%s: weighting samples is supported for outputs of shape (None, "
                         "classes); the model outputs %s (a loss at several positions per "
                         "sample)" % (which, shape_str(model.output_shape)))
    if class_weight is not None:
        if not isinstance(class_weight, dict):
            raise TypeError("class_weight: expected a dict {class index: weight}, got %s"
                            % _shown(class_weight))
        table = {}
        for key, value in class_weight.items():
            if isinstance(key, bool) or not isinstance(key, (numbers.Integral, np.integer)):
                raise TypeError("class_weight: expected int class indices as keys, got %r"
                                % (key,))
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise TypeError("class_weight[%r]: expected a number, got %r" % (key, value))
            table[int(key)] = float(value)
        labels = _labels(model, y)
        w = np.array([table.get(int(c), 1.0) for c in labels], np.float64)
        where = "class_weight[%d]"

        def index_of(i):
            return int(labels[i])
    else:
        if isinstance(sample_weight, (str, bytes, dict)):
            raise TypeError("%s: expected an array of %d weights, got %s"
                            % (arg, n, _shown(sample_weight)))
        try:
            w = np.asarray(sample_weight, np.float64)
        except (TypeError, ValueError):
            raise TypeError("%s: expected an array of %d weights, got %s"
                            % (arg, n, _shown(sample_weight))) from None
        if w.shape not in ((n,), (n, 1)):
            raise ValueError("%s: expected shape (%d,) (a weight per sample), got %s"
                             % (arg, n, shape_str(w.shape) if w.ndim else "a scalar"))
        w = w.reshape(n)
        where = arg + "[%d]"
        index_of = int
    if several:
        several_outputs.weights_check(model, w, where, index_of)
        return np.asarray(w, np.float32)
    bad = ~np.isfinite(w) | (w < 0)
    if model.metric_name and _categorical(model):
        bad |= w == 0
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError("%s: expected finite weights >= 0%s, got %g"
                         % (where % index_of(i),
                            (" and, with metrics=[%r], not 0 (the accuracy would count its "
                             "sample wrongly)" % model.metric_name) if model.metric_name else "",
                            w[i]))
    return np.asarray(w, np.float32)


def _categorical(model):
    return model.loss.kind in ("sparse_categorical_crossentropy", "categorical_crossentropy")


def weighted_targets(model, y, w):
    """The targets (n, classes) float32 that give sample i's loss times
    w[i]: for the categorical cross-entropies w[i] times the one-hot of a
    sparse label, or of the target row; for the other losses the target row
    and then w[i] ((n, classes + 1)). w None: weight 1. With several
    outputs, their packed targets (several_outputs.weighted_pack)."""
    if isinstance(model.loss, several_outputs.OutputLosses):
        return several_outputs.weighted_pack(model, y, w)
    classes = model._output_classes()
    y = np.asarray(y)
    if not _categorical(model):
        t = np.empty((len(y), classes + 1), np.float32)
        t[:, :classes] = y.reshape(len(y), classes)
        t[:, classes] = 1.0 if w is None else w
        return t
    if model.loss.kind == "sparse_categorical_crossentropy":
        t = np.zeros((len(y), classes), np.float32)
        t[np.arange(len(y)), y.reshape(-1).astype(np.int64)] = 1.0
    else:
        t = np.array(y, np.float32, copy=True)
    if w is not None:
        t *= w[:, None]
    return t


@contextlib.contextmanager
def weighted(model, on=True):
    """While the block runs, the model's training and evaluation networks
    take the weighted (categorical) targets."""
    before = model.__dict__.get("_weighted", False)
    model._weighted = bool(on)
    try:
        yield
    finally:
        model._weighted = before
