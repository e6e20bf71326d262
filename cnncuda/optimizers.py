"""Keras's Adam and SGD, with Keras's argument names and defaults.

``compile(optimizer='adam')`` or ``compile(optimizer=Adam(learning_rate=1e-4))``.
The engines run the update (one call over every parameter; formulas in
docs/semantics.md). ``optimizer.iterations`` counts the steps taken since
``compile`` (or, for a loaded model, since it was saved and then on).

The moments (Adam's m and v, SGD's velocity) live on the engine; they move
with the model when it changes engine or batch size, and model files keep
them, so training continues exactly.
"""
from .checks import boolean, choice, number_in

__all__ = ["Optimizer", "Adam", "SGD", "get", "from_config"]


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

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7,
                 amsgrad=False, name="Adam"):
        super().__init__()
        self.learning_rate = number_in(learning_rate, "learning_rate", 0.0, float("inf"))
        self.beta_1 = number_in(beta_1, "beta_1", 0.0, 1.0, high_open=True)
        self.beta_2 = number_in(beta_2, "beta_2", 0.0, 1.0, high_open=True)
        self.epsilon = number_in(epsilon, "epsilon", 0.0, float("inf"))
        if boolean(amsgrad, "amsgrad"):
            raise ValueError("amsgrad: expected False (AMSGrad is not supported), got True")
        self.name = name

    def get_config(self):
        return {"learning_rate": self.learning_rate, "beta_1": self.beta_1,
                "beta_2": self.beta_2, "epsilon": self.epsilon}


class SGD(Optimizer):
    """Stochastic gradient descent, with momentum and Nesterov as in Keras."""

    kind = "sgd"

    def __init__(self, learning_rate=0.01, momentum=0.0, nesterov=False, name="SGD"):
        super().__init__()
        self.learning_rate = number_in(learning_rate, "learning_rate", 0.0, float("inf"))
        self.momentum = number_in(momentum, "momentum", 0.0, 1.0)
        self.nesterov = boolean(nesterov, "nesterov")
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
