"""Keras's Adam and SGD, with Keras's argument names and defaults.

``compile(optimizer='adam')`` or ``compile(optimizer=Adam(learning_rate=1e-4))``.
The engines run the update (one call over every parameter; formulas in
docs/semantics.md). ``optimizer.iterations`` counts the steps taken since
``compile`` (or, for a loaded model, since it was saved and then on).

The hyperparameters may be set after compile, between fits or from a
callback (``model.optimizer.learning_rate = 1e-4``): as in Keras, training
uses the new value from its next step, on every engine (the model gives it
to its network before the next training call). Each is checked when set.
SGD's momentum cannot become non-zero after a compile with momentum 0 (no
velocity is kept then): compile again.

The moments (Adam's m and v, SGD's velocity) live on the engine; they move
with the model when it changes engine or batch size, and model files keep
them, so training continues exactly.
"""
from .checks import boolean, choice, number_in

__all__ = ["Optimizer", "Adam", "SGD", "get", "from_config"]


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


def _rate(value, name):
    return number_in(value, name, 0.0, _INF)


def _beta(value, name):
    return number_in(value, name, 0.0, 1.0, high_open=True)


class Optimizer:
    """Base class: ``kind`` (the engine's name) and the hyperparameters."""

    kind = None

    def __init__(self):
        self._model = None

    def engine_optimizer(self):
        """The engine's optimizer dict."""
        return dict(self.get_config(), kind=self.kind)

    def get_config(self):
        raise NotImplementedError

    @property
    def iterations(self):
        """Optimizer steps taken by the model this optimizer was compiled into."""
        return 0 if self._model is None else self._model._iterations()

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__,
                           ", ".join("%s=%r" % kv for kv in self.get_config().items()))


class Adam(Optimizer):
    """Adam in Keras's form: lr_t = lr sqrt(1 - beta_2^t) / (1 - beta_1^t)."""

    kind = "adam"
    learning_rate = _Hyperparameter(_rate)
    beta_1 = _Hyperparameter(_beta)
    beta_2 = _Hyperparameter(_beta)
    epsilon = _Hyperparameter(_rate)

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7,
                 amsgrad=False, name="Adam"):
        super().__init__()
        self.learning_rate, self.beta_1, self.beta_2 = learning_rate, beta_1, beta_2
        self.epsilon = epsilon
        if boolean(amsgrad, "amsgrad"):
            raise ValueError("amsgrad: expected False (AMSGrad is not supported), got True")
        self.name = name

    def get_config(self):
        return {"learning_rate": self.learning_rate, "beta_1": self.beta_1,
                "beta_2": self.beta_2, "epsilon": self.epsilon}


class SGD(Optimizer):
    """Stochastic gradient descent, with momentum and Nesterov as in Keras."""

    kind = "sgd"
    learning_rate = _Hyperparameter(_rate)
    momentum = _Hyperparameter(lambda value, name: number_in(value, name, 0.0, 1.0))
    nesterov = _Hyperparameter(boolean)

    def __init__(self, learning_rate=0.01, momentum=0.0, nesterov=False, name="SGD"):
        super().__init__()
        self.learning_rate, self.momentum, self.nesterov = learning_rate, momentum, nesterov
        self.name = name

    def get_config(self):
        return {"learning_rate": self.learning_rate, "momentum": self.momentum,
                "nesterov": self.nesterov}


_BY_KIND = {"adam": Adam, "sgd": SGD}


def get(identifier):
    """An Optimizer from 'adam' / 'sgd' (Keras's defaults) or an Optimizer."""
    if isinstance(identifier, Optimizer):
        return identifier
    if isinstance(identifier, str):
        return _BY_KIND[choice(identifier, "optimizer", tuple(_BY_KIND))]()
    raise TypeError("optimizer: expected 'adam', 'sgd' or an optimizer object such as "
                    "Adam(learning_rate=1e-3), got %r" % (identifier,))


def from_config(kind, config):
    """The Optimizer of `kind` with `config` (as a saved model holds them)."""
    if kind not in _BY_KIND:
        raise ValueError("optimizer: expected 'adam' or 'sgd', got %r" % (kind,))
    return _BY_KIND[kind](**config)
