"""Keras 3's metrics (``keras.metrics``), computed on the host with NumPy.

compile(metrics=[...]) takes these objects and the strings of STRINGS. The
accuracy strings that match the loss ('accuracy', 'acc' and the loss's own
accuracy name) are counted by the engine as before (its correct count);
every other metric is one of these objects, updated from the model's
outputs read back to the host (see cnncuda/training.py for which outputs).

Each object has Keras's API on NumPy arrays: ``update_state(y_true, y_pred,
sample_weight=None)``, ``result()``, ``reset_state()``, ``get_config()``,
``from_config(config)`` and calling it (an update, then the result). The
numbers follow Keras 3 (docs/semantics.md, "Metrics"); the sums are kept in
float64, so a result may differ from Keras's float32 in the last digits.
"""
import numpy as np

from .utils import unique_name

__all__ = ["Metric", "Mean", "MeanMetricWrapper", "Accuracy", "BinaryAccuracy",
           "CategoricalAccuracy", "SparseCategoricalAccuracy", "TopKCategoricalAccuracy",
           "SparseTopKCategoricalAccuracy", "MeanAbsoluteError", "MeanSquaredError",
           "Precision", "Recall", "AUC", "get", "serialize", "deserialize",
           "accuracy", "binary_accuracy", "categorical_accuracy", "sparse_categorical_accuracy",
           "top_k_categorical_accuracy", "sparse_top_k_categorical_accuracy",
           "mean_absolute_error", "mean_squared_error", "mae", "mse"]

_EPSILON = 1e-7     # Keras's backend.epsilon(): AUC's outer thresholds


def _float(a, arg):
    array = np.asarray(a)
    if array.dtype.kind not in "biuf":
        raise TypeError("%s: expected a numeric array, got dtype %s" % (arg, array.dtype))
    return array.astype(np.float64)


def _same_rank(y_true, y_pred):
    """Keras's squeeze_or_expand_to_same_rank: a trailing axis of 1 dropped
    (or added) so that the two have the same rank."""
    if y_true.ndim == y_pred.ndim + 1 and y_true.shape[-1] == 1:
        y_true = y_true[..., 0]
    elif y_pred.ndim == y_true.ndim + 1 and y_pred.shape[-1] == 1:
        y_pred = y_pred[..., 0]
    return y_true, y_pred


def _check_same_shape(y_true, y_pred, metric):
    if y_true.shape != y_pred.shape:
        raise ValueError("%s: expected y_true of the shape of y_pred %s, got %s (Keras "
                         "computes this metric on targets of the outputs' shape: one-hot "
                         "targets and a categorical loss, not integer labels)"
                         % (metric, y_pred.shape, y_true.shape))


# -- the per-sample functions of the mean metrics ---------------------------------

def accuracy(y_true, y_pred):
    y_true, y_pred = _same_rank(_float(y_true, "y_true"), _float(y_pred, "y_pred"))
    return (y_true == y_pred).astype(np.float64)


def binary_accuracy(y_true, y_pred, threshold=0.5):
    y_true, y_pred = _same_rank(_float(y_true, "y_true"), _float(y_pred, "y_pred"))
    return np.mean(y_true == (y_pred > threshold), axis=-1)


def categorical_accuracy(y_true, y_pred):
    y_true, y_pred = _float(y_true, "y_true"), _float(y_pred, "y_pred")
    return (np.argmax(y_true, axis=-1) == np.argmax(y_pred, axis=-1)).astype(np.float64)


def _labels(y_true, y_pred):
    y_true = _float(y_true, "y_true")
    if y_true.ndim == y_pred.ndim and y_true.shape[-1] == 1:
        y_true = y_true[..., 0]
    return y_true


def sparse_categorical_accuracy(y_true, y_pred):
    y_pred = _float(y_pred, "y_pred")
    y_true = _labels(y_true, y_pred)
    return (np.argmax(y_pred, axis=-1) == y_true).astype(np.float64)


def _in_top_k(labels, y_pred, k):
    """Keras's in_top_k: the label's score ranks within the k largest (1 plus
    the count of strictly greater scores <= k; a NaN score ranks last)."""
    labels = labels.astype(np.int64)
    at_label = np.take_along_axis(y_pred, labels[..., None], axis=-1)
    at_label = np.where(np.isnan(at_label), -np.inf, at_label)
    rank = 1 + np.sum(y_pred > at_label, axis=-1)
    return (rank <= k).astype(np.float64)


def top_k_categorical_accuracy(y_true, y_pred, k=5):
    y_true, y_pred = _float(y_true, "y_true"), _float(y_pred, "y_pred")
    return _in_top_k(np.argmax(y_true, axis=-1), y_pred, k)


def sparse_top_k_categorical_accuracy(y_true, y_pred, k=5):
    y_pred = _float(y_pred, "y_pred")
    return _in_top_k(_labels(y_true, y_pred), y_pred, k)


def mean_absolute_error(y_true, y_pred):
    y_true, y_pred = _same_rank(_float(y_true, "y_true"), _float(y_pred, "y_pred"))
    _check_same_shape(y_true, y_pred, "mean_absolute_error")
    return np.mean(np.abs(y_true - y_pred), axis=-1)


def mean_squared_error(y_true, y_pred):
    y_true, y_pred = _same_rank(_float(y_true, "y_true"), _float(y_pred, "y_pred"))
    _check_same_shape(y_true, y_pred, "mean_squared_error")
    return np.mean(np.square(y_true - y_pred), axis=-1)


mae = mean_absolute_error
mse = mean_squared_error


# -- the objects --------------------------------------------------------------------

class Metric:
    """Keras's Metric: state updated by update_state, read by result."""

    _default_name = "metric"

    def __init__(self, name=None, dtype=None):
        if name is not None and (not isinstance(name, str) or not name):
            raise TypeError("name: expected a non-empty str, got %r" % (name,))
        if dtype not in (None, "float32"):
            raise ValueError("dtype: expected None or 'float32', got %r" % (dtype,))
        self.name = name if name is not None else unique_name(self._default_name)
        self.dtype = "float32"
        self.reset_state()

    def __call__(self, y_true, y_pred, sample_weight=None):
        self.update_state(y_true, y_pred, sample_weight=sample_weight)
        return self.result()

    def get_config(self):
        return {"name": self.name, "dtype": self.dtype}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __repr__(self):
        return "<%s name=%s>" % (type(self).__name__, self.name)


def _weights(sample_weight, values):
    """Per-sample weights broadcast to values' leading (sample) axes."""
    if sample_weight is None:
        return np.ones(values.shape, np.float64)
    w = _float(sample_weight, "sample_weight")
    while w.ndim > values.ndim and w.shape[-1] == 1:
        w = w[..., 0]
    while w.ndim < values.ndim:
        w = w[..., None]
    try:
        return np.broadcast_to(w, values.shape)
    except ValueError:
        raise ValueError("sample_weight: expected a shape that broadcasts to %s, got %s"
                         % (values.shape, np.shape(sample_weight))) from None


class Mean(Metric):
    """The weighted mean of the values given to update_state."""

    _default_name = "mean"

    def reset_state(self):
        self._total, self._count = 0.0, 0.0

    def _add(self, values, sample_weight):
        values = np.asarray(values, np.float64)
        if values.ndim > 1:     # Keras: the mean over the axes past the samples'
            values = values.reshape(values.shape[0], -1).mean(axis=1)
        w = _weights(sample_weight, values)
        self._total += float(np.sum(values * w))
        self._count += float(np.sum(w))

    def update_state(self, values, sample_weight=None):
        self._add(_float(values, "values"), sample_weight)

    def result(self):
        return np.float32(self._total / self._count if self._count else 0.0)


class MeanMetricWrapper(Mean):
    """The mean of fn(y_true, y_pred, **kwargs) over the samples."""

    def __init__(self, fn, name=None, dtype=None, **kwargs):
        self._fn, self._fn_kwargs = fn, kwargs
        super().__init__(name=name, dtype=dtype)

    def update_state(self, y_true, y_pred, sample_weight=None):
        self._add(self._fn(y_true, y_pred, **self._fn_kwargs), sample_weight)

    def get_config(self):
        return dict(super().get_config(), **self._fn_kwargs)

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def _wrapper(class_name, fn, default_name, doc, **defaults):
    def __init__(self, name=None, dtype=None, **kwargs):
        unknown = set(kwargs) - set(defaults)
        if unknown:
            raise TypeError("%s: unexpected argument %s" % (class_name, sorted(unknown)[0]))
        values = dict(defaults, **kwargs)
        for key, value in values.items():
            if key == "k" and (isinstance(value, bool) or not isinstance(value, (int, np.integer))
                               or value < 1):
                raise ValueError("k: expected an int >= 1, got %r" % (value,))
            if key == "threshold" and (isinstance(value, bool)
                                       or not isinstance(value, (int, float))):
                raise TypeError("threshold: expected a float, got %r" % (value,))
        MeanMetricWrapper.__init__(self, fn, name=name, dtype=dtype, **values)
    return type(class_name, (MeanMetricWrapper,),
                {"__init__": __init__, "_default_name": default_name, "__doc__": doc,
                 "from_config": classmethod(lambda cls, config: cls(**config))})


Accuracy = _wrapper("Accuracy", accuracy, "accuracy",
                    "How often the predictions equal the targets.")
BinaryAccuracy = _wrapper("BinaryAccuracy", binary_accuracy, "binary_accuracy",
                          "How often (y_pred > threshold) equals y_true.", threshold=0.5)
CategoricalAccuracy = _wrapper("CategoricalAccuracy", categorical_accuracy,
                               "categorical_accuracy",
                               "How often argmax(y_pred) equals argmax(y_true) (one-hot).")
SparseCategoricalAccuracy = _wrapper("SparseCategoricalAccuracy", sparse_categorical_accuracy,
                                     "sparse_categorical_accuracy",
                                     "How often argmax(y_pred) equals the integer label.")
TopKCategoricalAccuracy = _wrapper("TopKCategoricalAccuracy", top_k_categorical_accuracy,
                                   "top_k_categorical_accuracy",
                                   "How often the one-hot target is in the top k scores.", k=5)
SparseTopKCategoricalAccuracy = _wrapper(
    "SparseTopKCategoricalAccuracy", sparse_top_k_categorical_accuracy,
    "sparse_top_k_categorical_accuracy", "How often the integer label is in the top k scores.",
    k=5)
MeanAbsoluteError = _wrapper("MeanAbsoluteError", mean_absolute_error, "mean_absolute_error",
                             "The mean of |y_true - y_pred|.")
MeanSquaredError = _wrapper("MeanSquaredError", mean_squared_error, "mean_squared_error",
                            "The mean of (y_true - y_pred)**2.")


def _thresholds_arg(thresholds):
    if thresholds is None:
        return [0.5], True
    single = isinstance(thresholds, (int, float)) and not isinstance(thresholds, bool)
    values = [thresholds] if single else list(thresholds)
    for value in values:
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not 0 <= value <= 1:
            raise ValueError("thresholds: expected values in [0, 1], got %r" % (thresholds,))
    return [float(v) for v in values], single


def _confusion(y_true, y_pred, thresholds, sample_weight, top_k=None, class_id=None,
               metric="metric"):
    """(tp, fp, tn, fn) per threshold, as Keras's update_confusion_matrix_variables:
    a prediction is positive where y_pred > threshold; every element counts."""
    y_true, y_pred = _same_rank(_float(y_true, "y_true"), _float(y_pred, "y_pred"))
    _check_same_shape(y_true, y_pred, metric)
    if top_k is not None:       # only the k largest of each row can be positive
        order = np.argsort(-y_pred, axis=-1, kind="stable")[..., :top_k]
        kept = np.full(y_pred.shape, -np.inf)
        np.put_along_axis(kept, order, np.take_along_axis(y_pred, order, axis=-1), axis=-1)
        y_pred = kept
    if class_id is not None:
        y_true, y_pred = y_true[..., class_id], y_pred[..., class_id]
    positive = y_true.astype(bool).reshape(-1)
    w = _weights(sample_weight, y_pred.reshape(y_pred.shape[0], -1) if y_pred.ndim > 1
                 else y_pred).reshape(-1) if sample_weight is not None \
        else np.ones(positive.shape, np.float64)
    scores = y_pred.reshape(-1)
    above = scores[None, :] > np.asarray(thresholds, np.float64)[:, None]
    tp = (above & positive).astype(np.float64) @ w
    fp = (above & ~positive).astype(np.float64) @ w
    fn = (~above & positive).astype(np.float64) @ w
    tn = (~above & ~positive).astype(np.float64) @ w
    return tp, fp, tn, fn


def _ratio(a, b):
    """Keras's divide_no_nan: 0 where b is 0."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.where(b == 0, 0.0, a / np.where(b == 0, 1.0, b))


class _PrecisionRecall(Metric):

    def __init__(self, thresholds=None, top_k=None, class_id=None, name=None, dtype=None):
        self._thresholds, self._single = _thresholds_arg(thresholds)
        if thresholds is None and top_k is not None:
            self._thresholds = [-np.inf]        # Keras: each row's top k are the positives
        self.init_thresholds = thresholds
        if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int)
                                  or top_k < 1):
            raise ValueError("top_k: expected None or an int >= 1, got %r" % (top_k,))
        if class_id is not None and (isinstance(class_id, bool)
                                     or not isinstance(class_id, int) or class_id < 0):
            raise ValueError("class_id: expected None or an int >= 0, got %r" % (class_id,))
        self.top_k, self.class_id = top_k, class_id
        super().__init__(name=name, dtype=dtype)

    def reset_state(self):
        n = len(self._thresholds)
        self._tp, self._fp, self._fn = np.zeros(n), np.zeros(n), np.zeros(n)

    def update_state(self, y_true, y_pred, sample_weight=None):
        tp, fp, _, fn = _confusion(y_true, y_pred, self._thresholds, sample_weight, self.top_k,
                                   self.class_id, self.name)
        self._tp += tp
        self._fp += fp
        self._fn += fn

    def result(self):
        values = self._values().astype(np.float32)
        return values[0] if self._single else values

    def get_config(self):
        return dict(super().get_config(), thresholds=self.init_thresholds, top_k=self.top_k,
                    class_id=self.class_id)


class Precision(_PrecisionRecall):
    """tp / (tp + fp) with positives where y_pred > threshold (0.5)."""

    _default_name = "precision"

    def _values(self):
        return _ratio(self._tp, self._tp + self._fp)


class Recall(_PrecisionRecall):
    """tp / (tp + fn) with positives where y_pred > threshold (0.5)."""

    _default_name = "recall"

    def _values(self):
        return _ratio(self._tp, self._tp + self._fn)


class AUC(Metric):
    """The area under the ROC (or PR) curve, from confusion counts at
    num_thresholds thresholds, as Keras's AUC (labels and scores of every
    element together: multi_label=False)."""

    _default_name = "auc"

    def __init__(self, num_thresholds=200, curve="ROC", summation_method="interpolation",
                 name=None, dtype=None, thresholds=None, multi_label=False, num_labels=None,
                 label_weights=None, from_logits=False):
        if curve not in ("ROC", "PR"):
            raise ValueError("curve: expected 'ROC' or 'PR', got %r" % (curve,))
        if summation_method not in ("interpolation", "minoring", "majoring"):
            raise ValueError("summation_method: expected 'interpolation', 'minoring' or "
                             "'majoring', got %r" % (summation_method,))
        for arg, value in (("multi_label", multi_label), ("num_labels", num_labels),
                           ("label_weights", label_weights)):
            if value not in (False, None):
                raise ValueError("%s: expected %r (not supported), got %r"
                                 % (arg, False if arg == "multi_label" else None, value))
        if from_logits not in (False, True):
            raise TypeError("from_logits: expected a bool, got %r" % (from_logits,))
        if thresholds is not None:
            inner = sorted(_thresholds_arg(thresholds)[0])
            self._thresholds = [0.0 - _EPSILON] + inner + [1.0 + _EPSILON]
            num_thresholds = len(self._thresholds)
        else:
            if isinstance(num_thresholds, bool) or not isinstance(num_thresholds, int) \
                    or num_thresholds <= 1:
                raise ValueError("num_thresholds: expected an int > 1, got %r"
                                 % (num_thresholds,))
            step = num_thresholds - 1
            self._thresholds = [0.0 - _EPSILON] + \
                [i / step for i in range(1, num_thresholds - 1)] + [1.0 + _EPSILON]
        self.num_thresholds, self.curve = num_thresholds, curve
        self.summation_method, self.multi_label = summation_method, False
        self.from_logits = from_logits
        self._given_thresholds = thresholds
        super().__init__(name=name, dtype=dtype)

    @property
    def thresholds(self):
        return list(self._thresholds)

    def reset_state(self):
        n = len(self._thresholds)
        self._tp, self._fp, self._tn, self._fn = (np.zeros(n) for _ in range(4))

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_pred = _float(y_pred, "y_pred")
        if self.from_logits:
            y_pred = 1.0 / (1.0 + np.exp(-y_pred))
        tp, fp, tn, fn = _confusion(y_true, y_pred, self._thresholds, sample_weight,
                                    metric=self.name)
        self._tp += tp
        self._fp += fp
        self._tn += tn
        self._fn += fn

    def result(self):
        tp, fp, tn, fn = self._tp, self._fp, self._tn, self._fn
        if self.curve == "PR" and self.summation_method == "interpolation":
            return np.float32(self._interpolated_pr())
        recall = _ratio(tp, tp + fn)
        if self.curve == "ROC":
            x, y = _ratio(fp, fp + tn), recall
        else:
            x, y = recall, _ratio(tp, tp + fp)
        if self.summation_method == "interpolation":
            heights = (y[:-1] + y[1:]) / 2.0
        elif self.summation_method == "minoring":
            heights = np.minimum(y[:-1], y[1:])
        else:
            heights = np.maximum(y[:-1], y[1:])
        return np.float32(np.sum((x[:-1] - x[1:]) * heights))

    def _interpolated_pr(self):
        """Davis & Goadrich's interpolation of precision between thresholds."""
        tp, fp, fn = self._tp, self._fp, self._fn
        dtp = tp[:-1] - tp[1:]
        p = tp + fp
        dp = p[:-1] - p[1:]
        slope = _ratio(dtp, np.maximum(dp, 0.0))
        intercept = tp[1:] - slope * p[1:]
        both = (p[:-1] > 0) & (p[1:] > 0)
        p_ratio = np.where(both, _ratio(p[:-1], np.maximum(p[1:], 0.0)), 1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            log_ratio = np.log(np.where(p_ratio > 0, p_ratio, 1.0))
        increments = _ratio(slope * (dtp + intercept * log_ratio), np.maximum(tp[1:] + fn[1:], 0))
        return np.sum(increments)

    def get_config(self):
        config = dict(super().get_config(), num_thresholds=self.num_thresholds,
                      curve=self.curve, summation_method=self.summation_method,
                      multi_label=False, num_labels=None, label_weights=None,
                      from_logits=self.from_logits)
        if self._given_thresholds is not None:
            config["thresholds"] = self._thresholds[1:-1]
        return config


# -- names --------------------------------------------------------------------------

# the strings compile takes besides the engine's accuracy: their class and
# arguments (the metric's name is the string itself, as Keras's)
STRINGS = {
    "accuracy": None, "acc": None,    # the loss's accuracy (models.py: the engine's)
    "binary_accuracy": BinaryAccuracy, "categorical_accuracy": CategoricalAccuracy,
    "sparse_categorical_accuracy": SparseCategoricalAccuracy,
    "top_k_categorical_accuracy": TopKCategoricalAccuracy,
    "sparse_top_k_categorical_accuracy": SparseTopKCategoricalAccuracy,
    "mae": MeanAbsoluteError, "mean_absolute_error": MeanAbsoluteError,
    "mse": MeanSquaredError, "mean_squared_error": MeanSquaredError,
    "precision": Precision, "recall": Recall, "auc": AUC,
}
# strings whose object keeps its automatic name, as Keras's ('auc', then 'auc_1', ...)
_AUTO_NAMED = ("precision", "recall", "auc")

CLASSES = {cls.__name__: cls for cls in (
    Accuracy, BinaryAccuracy, CategoricalAccuracy, SparseCategoricalAccuracy,
    TopKCategoricalAccuracy, SparseTopKCategoricalAccuracy, MeanAbsoluteError,
    MeanSquaredError, Precision, Recall, AUC, Mean)}

# whether a larger value is better (callbacks' mode='auto')
MAXIMIZED = (Accuracy, BinaryAccuracy, CategoricalAccuracy, SparseCategoricalAccuracy,
             TopKCategoricalAccuracy, SparseTopKCategoricalAccuracy, Precision, Recall, AUC)


def get(identifier):
    """A metric object for a string of STRINGS (not 'accuracy'/'acc', which
    depend on the loss), a class name, a config dict or an object."""
    if isinstance(identifier, Metric):
        return identifier
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if isinstance(identifier, str):
        if identifier in _AUTO_NAMED:
            return STRINGS[identifier]()
        if STRINGS.get(identifier) is not None:
            return STRINGS[identifier](name=identifier)
        if identifier in CLASSES:
            return CLASSES[identifier]()
    raise ValueError("metrics: expected one of %s, a class name of %s or a metric object, "
                     "got %r" % (", ".join(repr(s) for s in STRINGS),
                                 ", ".join(sorted(CLASSES)), identifier))


def serialize(metric):
    """Keras's form in a compile config."""
    return {"module": "keras.metrics", "class_name": type(metric).__name__,
            "config": metric.get_config(), "registered_name": None}


def deserialize(config):
    if not isinstance(config, dict) or config.get("class_name") not in CLASSES:
        raise ValueError("metrics: expected a metric config with a class_name of %s, got %r"
                         % (", ".join(sorted(CLASSES)), config))
    return CLASSES[config["class_name"]].from_config(dict(config.get("config") or {}))
