"""Keras 3's optimizers, with Keras's class names, argument names and defaults:
Adam, SGD, RMSprop, Adagrad, Adadelta, Adamax, Nadam and AdamW.

``compile(optimizer='adam')`` (or 'sgd', 'rmsprop', 'adagrad', 'adadelta',
'adamax', 'nadam', 'adamw', any case) or
``compile(optimizer=Adam(learning_rate=1e-4))``.
The engines run the update (one call over every parameter; formulas in
docs/semantics.md). ``optimizer.iterations`` counts the steps taken since
``compile`` (or, for a loaded model, since it was saved and then on).

The hyperparameters may be set after compile, between fits or from a
callback (``model.optimizer.learning_rate = 1e-4``): as in Keras, training
uses the new value from its next step, on every engine (the model gives it
to its network before the next training call). Each is checked when set.
SGD's and RMSprop's momentum cannot become non-zero after a compile with
momentum 0 (no velocity or momentum slot is kept then), nor RMSprop's
centered change: compile again.

The slots (Adam's m and v, SGD's velocity, ...: ``slot_names``, Keras's
names for them) live on the engine; they move
with the model when it changes engine or batch size, and model files keep
them, so training continues exactly.
"""
from . import schedules
from .checks import boolean, choice, number_in

__all__ = ["Optimizer", "Adam", "SGD", "RMSprop", "Adagrad", "Adadelta", "Adamax", "Nadam",
           "AdamW", "get", "from_config", "schedules"]


_INF = float("inf")


class _Hyperparameter:
    """An optimizer attribute checked whenever it is set, by check(value, name)."""

    def __init__(self, check):
        self.check = check

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, owner=None):
        return self if obj is None else obj.__dict__[self.name]

    def __set__(self, obj, value):
        obj.__dict__[self.name] = self.check(value, self.name)


class _LearningRate:
    """An optimizer's learning_rate: a number >= 0 or a
    schedules.LearningRateSchedule. Read, it is the rate of the optimizer's
    next step (the schedule at ``iterations``), as Keras's. An optimizer
    made with a schedule takes another schedule but no number (Keras's
    TypeError)."""

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        schedule = obj.__dict__.get("_schedule")
        if schedule is not None:
            return schedules.rate_at(schedule, obj.iterations)
        return obj.__dict__[self.name]

    def __set__(self, obj, value):
        if schedules.is_schedule(value):
            obj.__dict__["_schedule"] = value
            return
        if callable(value):
            raise TypeError("learning_rate: expected a number >= 0 or a keras.optimizers."
                            "schedules.LearningRateSchedule, got %r (a callable without "
                            "arguments is not supported)" % (value,))
        if obj.__dict__.get("_schedule") is not None:
            raise TypeError("This optimizer was created with a `LearningRateSchedule` object as "
                            "its `learning_rate` constructor argument, hence its learning rate "
                            "is not settable. If you need the learning rate to be settable, you "
                            "should instantiate the optimizer with a float `learning_rate` "
                            "argument.")
        obj.__dict__[self.name] = _rate(value, self.name)


def _rate(value, name):
    return number_in(value, name, 0.0, _INF)


def _beta(value, name):
    return number_in(value, name, 0.0, 1.0, high_open=True)


def _unit(value, name):
    return number_in(value, name, 0.0, 1.0)


def _no_amsgrad(amsgrad):
    if boolean(amsgrad, "amsgrad"):
        raise ValueError("amsgrad: expected False (AMSGrad is not supported), got True")


class Optimizer:
    """Base class: ``kind`` (the engine's name) and the hyperparameters."""

    kind = None
    # how Keras orders the slot variables: "per_weight" (each weight's slots
    # together: one add_optimizer_variables call for all of them) or
    # "per_slot" (every weight's first slot, then every weight's second...)
    keras_slot_order = "per_weight"

    def __init__(self):
        self._model = None

    def engine_optimizer(self):
        """The engine's optimizer dict: the hyperparameters of the next step
        (a schedule's rate at ``iterations``)."""
        return dict(self._hyperparameters(), kind=self.kind)

    @property
    def learning_rate_schedule(self):
        """The LearningRateSchedule given as learning_rate, else None."""
        return self.__dict__.get("_schedule")

    def constant_rate_steps(self):
        """How many steps from the next one on surely train at the same rate
        (1 under a schedule that does not know its plateaus; None without a
        schedule)."""
        schedule = self.learning_rate_schedule
        return None if schedule is None else max(1, schedule.constant_steps(self.iterations))

    def _learning_rate_config(self):
        """learning_rate as get_config gives it: the number, or the
        schedule serialized as Keras serializes it."""
        schedule = self.learning_rate_schedule
        return self.learning_rate if schedule is None else schedules.serialize(schedule)

    def get_config(self):
        """The hyperparameters as Keras's get_config gives them (a schedule
        serialized as Keras serializes it)."""
        return dict(self._hyperparameters(), learning_rate=self._learning_rate_config())

    def _hyperparameters(self):
        """The hyperparameters of the next step (a schedule's current rate)."""
        raise NotImplementedError

    def slot_names(self):
        """Keras's names of the arrays the optimizer keeps per trainable
        weight, in the order of Keras's variables and of the engine's slots
        (get_optimizer_state)."""
        raise NotImplementedError

    @property
    def iterations(self):
        """Optimizer steps taken by the model this optimizer was compiled into."""
        return 0 if self._model is None else self._model._iterations()

    def __repr__(self):
        config = self._hyperparameters()
        if self.learning_rate_schedule is not None:
            config["learning_rate"] = self.learning_rate_schedule
        return "%s(%s)" % (type(self).__name__, ", ".join("%s=%r" % kv for kv in config.items()))


class _Moments(Optimizer):
    """The hyperparameters of Adam and its kin (Adamax, Nadam): learning_rate,
    beta_1, beta_2 and epsilon, with Keras's defaults."""

    learning_rate = _LearningRate()
    beta_1 = _Hyperparameter(_beta)
    beta_2 = _Hyperparameter(_beta)
    epsilon = _Hyperparameter(_rate)

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7, name=None):
        super().__init__()
        self.learning_rate, self.beta_1, self.beta_2 = learning_rate, beta_1, beta_2
        self.epsilon = epsilon
        self.name = name or type(self).__name__

    def _hyperparameters(self):
        return {"learning_rate": self.learning_rate, "beta_1": self.beta_1,
                "beta_2": self.beta_2, "epsilon": self.epsilon}


class Adam(_Moments):
    """Adam in Keras's form: lr_t = lr sqrt(1 - beta_2^t) / (1 - beta_1^t)."""

    kind = "adam"

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7,
                 amsgrad=False, name="Adam"):
        super().__init__(learning_rate, beta_1, beta_2, epsilon, name)
        _no_amsgrad(amsgrad)

    def slot_names(self):
        return ["momentum", "velocity"]


class SGD(Optimizer):
    """Stochastic gradient descent, with momentum and Nesterov as in Keras."""

    kind = "sgd"
    learning_rate = _LearningRate()
    momentum = _Hyperparameter(_unit)
    nesterov = _Hyperparameter(boolean)

    def __init__(self, learning_rate=0.01, momentum=0.0, nesterov=False, name="SGD"):
        super().__init__()
        self.learning_rate, self.momentum, self.nesterov = learning_rate, momentum, nesterov
        self.name = name

    def _hyperparameters(self):
        return {"learning_rate": self.learning_rate, "momentum": self.momentum,
                "nesterov": self.nesterov}

    def slot_names(self):
        return ["momentum"] if self.momentum else []


class RMSprop(Optimizer):
    """RMSprop in Keras 3's form: velocity = rho velocity + (1 - rho) g^2
    (centered: minus the square of the gradient's running mean);
    p -= lr g / sqrt(velocity + epsilon), through a momentum slot when
    momentum > 0."""

    kind = "rmsprop"
    keras_slot_order = "per_slot"
    learning_rate = _LearningRate()
    rho = _Hyperparameter(_unit)
    momentum = _Hyperparameter(_unit)
    epsilon = _Hyperparameter(_rate)
    centered = _Hyperparameter(boolean)

    def __init__(self, learning_rate=0.001, rho=0.9, momentum=0.0, epsilon=1e-7,
                 centered=False, name="RMSprop"):
        super().__init__()
        self.learning_rate, self.rho, self.momentum = learning_rate, rho, momentum
        self.epsilon, self.centered = epsilon, centered
        self.name = name

    def _hyperparameters(self):
        return {"learning_rate": self.learning_rate, "rho": self.rho,
                "momentum": self.momentum, "epsilon": self.epsilon, "centered": self.centered}

    def slot_names(self):
        return (["velocity"] + (["momentum"] if self.momentum else [])
                + (["average_gradient"] if self.centered else []))


class Adagrad(Optimizer):
    """Adagrad in Keras 3's form: accumulator += g^2 (from
    initial_accumulator_value); p -= lr g / sqrt(accumulator + epsilon)."""

    kind = "adagrad"
    learning_rate = _LearningRate()
    initial_accumulator_value = _Hyperparameter(_rate)
    epsilon = _Hyperparameter(_rate)

    def __init__(self, learning_rate=0.001, initial_accumulator_value=0.1, epsilon=1e-7,
                 name="Adagrad"):
        super().__init__()
        self.learning_rate = learning_rate
        self.initial_accumulator_value, self.epsilon = initial_accumulator_value, epsilon
        self.name = name

    def _hyperparameters(self):
        return {"learning_rate": self.learning_rate,
                "initial_accumulator_value": self.initial_accumulator_value,
                "epsilon": self.epsilon}

    def slot_names(self):
        return ["accumulator"]


class Adadelta(Optimizer):
    """Adadelta in Keras 3's form (with its learning rate, default 0.001)."""

    kind = "adadelta"
    learning_rate = _LearningRate()
    rho = _Hyperparameter(_unit)
    epsilon = _Hyperparameter(_rate)

    def __init__(self, learning_rate=0.001, rho=0.95, epsilon=1e-7, name="Adadelta"):
        super().__init__()
        self.learning_rate, self.rho, self.epsilon = learning_rate, rho, epsilon
        self.name = name

    def _hyperparameters(self):
        return {"learning_rate": self.learning_rate, "rho": self.rho, "epsilon": self.epsilon}

    def slot_names(self):
        return ["accumulated_grad", "accumulated_delta_var"]


class Adamax(_Moments):
    """Adamax in Keras 3's form: u = max(beta_2 u, |g|);
    p -= lr m / ((1 - beta_1^t)(u + epsilon))."""

    kind = "adamax"

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7,
                 name="Adamax"):
        super().__init__(learning_rate, beta_1, beta_2, epsilon, name)

    def slot_names(self):
        return ["momentum", "norm"]


class Nadam(_Moments):
    """Nadam in Keras 3's form (momentum schedule u_t = beta_1 (1 - 0.5 0.96^t);
    the product of the u_t, Keras's u_product, follows from the step count)."""

    kind = "nadam"

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7,
                 name="Nadam"):
        super().__init__(learning_rate, beta_1, beta_2, epsilon, name)

    def slot_names(self):
        return ["momentum", "velocity"]


class AdamW(Optimizer):
    """AdamW in Keras 3's form: p -= p weight_decay lr on every trainable
    weight, then Adam's step."""

    kind = "adamw"
    learning_rate = _LearningRate()
    weight_decay = _Hyperparameter(_rate)
    beta_1 = _Hyperparameter(_beta)
    beta_2 = _Hyperparameter(_beta)
    epsilon = _Hyperparameter(_rate)

    def __init__(self, learning_rate=0.001, weight_decay=0.004, beta_1=0.9, beta_2=0.999,
                 epsilon=1e-7, amsgrad=False, name="AdamW"):
        super().__init__()
        if weight_decay is None:
            raise TypeError("weight_decay: expected a number, got None")
        self.learning_rate, self.weight_decay = learning_rate, weight_decay
        self.beta_1, self.beta_2, self.epsilon = beta_1, beta_2, epsilon
        _no_amsgrad(amsgrad)
        self.name = name

    def _hyperparameters(self):
        return {"learning_rate": self.learning_rate, "weight_decay": self.weight_decay,
                "beta_1": self.beta_1, "beta_2": self.beta_2, "epsilon": self.epsilon}

    def slot_names(self):
        return ["momentum", "velocity"]


_CLASSES = (Adam, SGD, RMSprop, Adagrad, Adadelta, Adamax, Nadam, AdamW)
_BY_KIND = {cls.kind: cls for cls in _CLASSES}
_NAMES = ", ".join(repr(k) for k in _BY_KIND)


def get(identifier):
    """An Optimizer from a name ('adam', 'sgd', 'rmsprop', 'adagrad',
    'adadelta', 'adamax', 'nadam', 'adamw'; any case; Keras's defaults) or an
    Optimizer."""
    from .mixed_precision import LossScaleOptimizer
    if isinstance(identifier, (Optimizer, LossScaleOptimizer)):
        return identifier
    if isinstance(identifier, str):
        return _BY_KIND[choice(identifier, "optimizer", tuple(_BY_KIND))]()
    raise TypeError("optimizer: expected one of %s or an optimizer object such as "
                    "Adam(learning_rate=1e-3), got %r" % (_NAMES, identifier))


def from_config(kind, config):
    """The Optimizer of `kind` (its engine name, or Keras's class name in
    any case) with `config` (as a saved model holds them)."""
    key = kind.lower() if isinstance(kind, str) else kind
    if key not in _BY_KIND:
        raise ValueError("optimizer: expected one of %s, got %r" % (_NAMES, kind))
    if isinstance(config, dict) and isinstance(config.get("learning_rate"), dict):
        config = dict(config, learning_rate=schedules.deserialize(config["learning_rate"]))
    return _BY_KIND[key](**config)
