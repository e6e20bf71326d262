"""Keras 3's learning-rate schedules (``keras.optimizers.schedules``):
ExponentialDecay, PiecewiseConstantDecay, CosineDecay (with its linear
warmup), InverseTimeDecay, and LearningRateSchedule, the base class of a
user's own (``__call__(self, step)``).

A schedule is given as an optimizer's learning_rate
(``Adam(learning_rate=ExponentialDecay(1e-3, 1000, 0.9))``). The step that
trains with ``optimizer.iterations == t`` uses ``schedule(t)``, as Keras's.
The formulas are Keras 3's, in float32 as Keras computes them
(docs/semantics.md). The engines take the rate from the host between steps
(fit runs one step per engine call while a schedule is set, or a run of
steps over which the rate is constant: a staircase's or a piecewise
constant schedule's plateaus).

``serialize`` and ``deserialize`` use Keras's form, {"module":
"keras.optimizers.schedules", "class_name", "config", "registered_name"},
which is what optimizers' get_config hold for a schedule in both Keras's
and cnncuda's model files.
"""
import math

import numpy as np

from .checks import boolean, number_in

__all__ = ["LearningRateSchedule", "ExponentialDecay", "PiecewiseConstantDecay", "CosineDecay",
           "InverseTimeDecay", "serialize", "deserialize"]

_F = np.float32


def _positive(value, arg):
    number_in(value, arg, 0.0, float("inf"), low_open=True)
    return value


def _finite(value, arg):
    number_in(value, arg, -float("inf"), float("inf"))
    return value


def _rate(value, arg):
    number_in(value, arg, 0.0, float("inf"))
    return value


class LearningRateSchedule:
    """The base of learning-rate schedules: a subclass defines
    ``__call__(self, step)`` (the rate of the step taken at optimizer
    iteration `step`, an int) and, to be saved, ``get_config()``."""

    def __call__(self, step):
        raise NotImplementedError("Learning rate schedule '%s' must override `__call__(self, "
                                  "step)`." % type(self).__name__)

    def get_config(self):
        raise NotImplementedError("Learning rate schedule '%s' must override `get_config()` in "
                                  "order to be serializable." % type(self).__name__)

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def constant_steps(self, step):
        """How many steps from `step` on (at least 1) certainly have the rate
        of `step`: 1 unless the schedule knows its plateaus."""
        return 1

    def __repr__(self):
        try:
            config = self.get_config()
        except NotImplementedError:
            return "<%s>" % type(self).__name__
        return "%s(%s)" % (type(self).__name__, ", ".join("%s=%r" % kv for kv in config.items()))


def rate_at(schedule, step):
    """The schedule's rate at `step` as a float, checked: a finite number >= 0."""
    value = schedule(int(step))
    try:
        rate = float(np.asarray(value, np.float64))
    except (TypeError, ValueError):
        raise TypeError("learning_rate: the schedule %s returned %r at step %d; expected a "
                        "number" % (type(schedule).__name__, value, step)) from None
    if not math.isfinite(rate) or rate < 0:
        raise ValueError("learning_rate: the schedule %s returned %r at step %d; expected a "
                         "finite number >= 0" % (type(schedule).__name__, rate, step))
    return rate


def _plateau(schedule, step, end):
    """Steps from `step` to `end` (exclusive; a step where the rate may
    change), or 1 where the rate at end - 1 differs from the rate at step."""
    end = max(int(end), step + 1)
    if end - 1 > step and schedule(end - 1) != schedule(step):
        return 1
    return end - step


class _Decay(LearningRateSchedule):
    """A decay of initial_learning_rate by decay_rate over the progress
    p = step / decay_steps (floored with staircase=True): the arguments,
    plateaus and config ExponentialDecay and InverseTimeDecay share."""

    def __init__(self, initial_learning_rate, decay_steps, decay_rate, staircase, name):
        self.initial_learning_rate = _rate(initial_learning_rate, "initial_learning_rate")
        self.decay_steps = _positive(decay_steps, "decay_steps")
        self.decay_rate = _finite(decay_rate, "decay_rate")
        self.staircase = boolean(staircase, "staircase")
        self.name = name

    def _progress(self, step):
        p = _F(step) / _F(self.decay_steps)
        return np.floor(p) if self.staircase else p

    def constant_steps(self, step):
        if not self.staircase:
            return 1
        return _plateau(self, step,
                        math.ceil((math.floor(step / self.decay_steps) + 1) * self.decay_steps))

    def get_config(self):
        return {"initial_learning_rate": self.initial_learning_rate,
                "decay_steps": self.decay_steps, "decay_rate": self.decay_rate,
                "staircase": self.staircase, "name": self.name}


class ExponentialDecay(_Decay):
    """initial_learning_rate * decay_rate ^ (step / decay_steps), the
    exponent floored with staircase=True."""

    def __init__(self, initial_learning_rate, decay_steps, decay_rate, staircase=False,
                 name="ExponentialDecay"):
        super().__init__(initial_learning_rate, decay_steps, decay_rate, staircase, name)

    def __call__(self, step):
        return float(_F(self.initial_learning_rate) *
                     np.power(_F(self.decay_rate), self._progress(step)))


class InverseTimeDecay(_Decay):
    """initial_learning_rate / (1 + decay_rate * step / decay_steps), the
    quotient floored with staircase=True."""

    def __init__(self, initial_learning_rate, decay_steps, decay_rate, staircase=False,
                 name="InverseTimeDecay"):
        super().__init__(initial_learning_rate, decay_steps, decay_rate, staircase, name)

    def __call__(self, step):
        return float(_F(self.initial_learning_rate) /
                     (_F(1) + _F(self.decay_rate) * self._progress(step)))


class PiecewiseConstantDecay(LearningRateSchedule):
    """values[0] while step <= boundaries[0], values[1] while step <=
    boundaries[1], ..., values[-1] after boundaries[-1] (the boundaries
    compared as integers, as Keras compares them with its int64 step)."""

    def __init__(self, boundaries, values, name="PiecewiseConstant"):
        if not isinstance(boundaries, (list, tuple)) or not isinstance(values, (list, tuple)):
            raise TypeError("boundaries, values: expected two lists, got %r and %r"
                            % (boundaries, values))
        if len(boundaries) != len(values) - 1:
            raise ValueError("The length of boundaries should be 1 less than the length of "
                             "values. Received: boundaries=%r of length %d, and values=%r of "
                             "length %d." % (boundaries, len(boundaries), values, len(values)))
        for i, b in enumerate(boundaries):
            _finite(b, "boundaries[%d]" % i)
        for i, v in enumerate(values):
            _rate(v, "values[%d]" % i)
        self.boundaries, self.values = list(boundaries), list(values)
        self.name = name

    def __call__(self, step):
        step = int(step)
        index = sum(1 for b in self.boundaries if step > int(b))
        return float(_F(self.values[index]))

    def constant_steps(self, step):
        later = [int(b) + 1 for b in self.boundaries if int(b) >= step]
        return _plateau(self, step, min(later)) if later else 1 << 30

    def get_config(self):
        return {"boundaries": self.boundaries, "values": self.values, "name": self.name}


class CosineDecay(LearningRateSchedule):
    """Cosine decay from initial_learning_rate (or, after a linear warmup
    of warmup_steps steps to warmup_target, from warmup_target) to alpha
    times it over decay_steps steps, then constant."""

    def __init__(self, initial_learning_rate, decay_steps, alpha=0.0, name="CosineDecay",
                 warmup_target=None, warmup_steps=0):
        self.initial_learning_rate = _rate(initial_learning_rate, "initial_learning_rate")
        self.decay_steps = _positive(decay_steps, "decay_steps")
        self.alpha = _finite(alpha, "alpha")
        self.name = name
        if warmup_target is not None:
            _rate(warmup_target, "warmup_target")
        self.warmup_target = warmup_target
        self.warmup_steps = _rate(warmup_steps, "warmup_steps")

    def _decay(self, step, decay_steps, decay_from):
        fraction = step / decay_steps
        cosine = _F(0.5) * (_F(1.0) + np.cos(_F(math.pi) * fraction))
        return decay_from * (_F(1 - self.alpha) * cosine + _F(self.alpha))

    def __call__(self, step):
        initial = _F(self.initial_learning_rate)
        decay_steps = _F(self.decay_steps)
        step = _F(step)
        if self.warmup_target is None:
            return float(self._decay(np.minimum(step, decay_steps), decay_steps, initial))
        target, warmup_steps = _F(self.warmup_target), _F(self.warmup_steps)
        step = np.minimum(step, decay_steps + warmup_steps)
        if step < warmup_steps:
            return float((target - initial) * (step / warmup_steps) + initial)
        return float(self._decay(step - warmup_steps, decay_steps, target))

    def constant_steps(self, step):
        # constant once the decay is over
        end = self.decay_steps + (self.warmup_steps if self.warmup_target is not None else 0)
        return 1 << 30 if step >= math.ceil(end) else 1

    def get_config(self):
        return {"initial_learning_rate": self.initial_learning_rate,
                "decay_steps": self.decay_steps, "alpha": self.alpha, "name": self.name,
                "warmup_target": self.warmup_target, "warmup_steps": self.warmup_steps}


_CLASSES = {cls.__name__: cls for cls in (ExponentialDecay, PiecewiseConstantDecay, CosineDecay,
                                          InverseTimeDecay)}


def serialize(schedule):
    """Keras's serialized form of a schedule."""
    if not isinstance(schedule, LearningRateSchedule):
        raise TypeError("schedule: expected a LearningRateSchedule, got %r" % (schedule,))
    cls = type(schedule)
    own = is_builtin(schedule)
    return {"module": "keras.optimizers.schedules" if own else cls.__module__,
            "class_name": cls.__name__, "config": schedule.get_config(),
            "registered_name": None if own else cls.__name__}


def deserialize(config):
    """A schedule from Keras's serialized form (or {"class_name", "config"})."""
    if isinstance(config, LearningRateSchedule):
        return config
    if not isinstance(config, dict) or "class_name" not in config:
        raise TypeError("learning_rate: expected a number or a serialized schedule "
                        "{'class_name': ..., 'config': ...}, got %r" % (config,))
    cls = _CLASSES.get(config["class_name"])
    if cls is None:
        raise ValueError("learning_rate: the schedule %r is not one of cnncuda's (%s); a "
                         "custom LearningRateSchedule cannot be loaded from a file"
                         % (config["class_name"], ", ".join(_CLASSES)))
    settings = config.get("config", {})
    if not isinstance(settings, dict):
        raise TypeError("learning_rate: expected the schedule's config as a dict, got %r"
                        % (settings,))
    try:
        return cls.from_config(settings)
    except TypeError as e:
        raise ValueError("learning_rate: bad %s config %r (%s)"
                         % (config["class_name"], settings, e)) from None


def is_schedule(value):
    return isinstance(value, LearningRateSchedule)


def is_builtin(schedule):
    """Whether `schedule` is one of this module's classes (files name them)."""
    return _CLASSES.get(type(schedule).__name__) is type(schedule)
