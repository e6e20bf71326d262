"""Keras 3's mixed precision (``keras.mixed_precision``): dtype policies and
the LossScaleOptimizer, with Keras's names, attributes and defaults.

    from cnncuda.keras import mixed_precision
    mixed_precision.set_global_policy("mixed_bfloat16")   # before the model is built

Policies: 'float32' (the default), 'mixed_float16' and 'mixed_bfloat16'
(``compute_dtype`` float16 / bfloat16, ``variable_dtype`` float32). Keras's
other names ('float16', 'bfloat16', 'float64', ...: variables in that
dtype) are refused: cnncuda's engines keep float32 variables.

What a mixed policy does (docs/semantics.md, "Mixed precision"): a model
whose policy is mixed (the global policy when the model was made) builds
its network on a GPU engine in precision 'fp16' or 'bf16' (engine.py): the
products (convolutions, dense layers) run on tensor cores with operands
rounded to float16 / bfloat16 and float32 sums. Weights, optimizer state and,
in this first stage of issue #29, the activations stay float32 in memory, so
``predict`` returns float32 (Keras returns the last layer's compute dtype,
float16 or bfloat16, unless that layer has ``dtype='float32'``). The CPU
engines (numpy, cpu, omp) compute in float32 under every policy (Keras's own
CPU would compute in 16 bits).

Under 'mixed_float16', ``compile`` wraps the optimizer in a
LossScaleOptimizer, as Keras 3 does: dynamic loss scaling, run inside the
engines' training steps (every engine).
"""
from .checks import positive_int

__all__ = ["Policy", "DTypePolicy", "set_global_policy", "global_policy", "set_dtype_policy",
           "dtype_policy", "LossScaleOptimizer", "POLICIES", "engine_precision"]

# the policies the engines run, and each one's (compute dtype, variable dtype)
POLICIES = {"float32": ("float32", "float32"),
            "mixed_float16": ("float16", "float32"),
            "mixed_bfloat16": ("bfloat16", "float32")}
# the engine precision (engine.py PRECISIONS) a mixed policy asks of the GPU engines
_ENGINE_PRECISION = {"mixed_float16": "fp16", "mixed_bfloat16": "bf16"}


class Policy:
    """Keras's DTypePolicy: ``name``, ``compute_dtype`` (the layers'
    arithmetic) and ``variable_dtype`` (their weights: float32)."""

    def __init__(self, name=None):
        if name is None:
            name = global_policy().name
        if not isinstance(name, str):
            raise TypeError("name: expected a policy name such as 'mixed_float16' (a str), got "
                            "%r (of type %s)" % (name, type(name).__name__))
        if name not in POLICIES:
            raise ValueError("name: expected one of %s, got %r (cnncuda's engines keep float32 "
                             "variables, so Keras's single-dtype policies such as 'float16' or "
                             "'float64' are not supported)" % (", ".join(map(repr, POLICIES)),
                                                               name))
        self._name = name

    @property
    def name(self):
        return self._name

    @property
    def compute_dtype(self):
        return POLICIES[self._name][0]

    @property
    def variable_dtype(self):
        return POLICIES[self._name][1]

    @property
    def quantization_mode(self):
        return None

    def get_config(self):
        return {"name": self._name}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __eq__(self, other):
        return isinstance(other, Policy) and other.name == self.name

    def __hash__(self):
        return hash(self._name)

    def __repr__(self):
        return '<DTypePolicy "%s">' % self._name


DTypePolicy = Policy

_global = {"policy": Policy("float32")}


def policy_of(value, name="dtype"):
    """A Policy from what Keras takes as a layer's ``dtype``: None (the
    global policy), a policy name, a Policy, or a policy as Keras's configs
    serialize it ({'class_name': 'DTypePolicy', 'config': {'name': ...}})."""
    if value is None:
        return global_policy()
    if isinstance(value, Policy):
        return value
    if isinstance(value, dict) and value.get("class_name") == "DTypePolicy" and \
            isinstance(value.get("config"), dict):
        value = value["config"].get("name")
    if isinstance(value, str):
        if value not in POLICIES:
            raise ValueError("%s: expected one of %s or a mixed_precision.Policy, got %r "
                             "(cnncuda's engines keep float32 variables)"
                             % (name, ", ".join(map(repr, POLICIES)), value))
        return Policy(value)
    raise TypeError("%s: expected a policy name such as 'mixed_float16' or a "
                    "mixed_precision.Policy, got %r" % (name, value))


def set_global_policy(policy):
    """Keras's set_global_policy (set_dtype_policy): the policy of the
    layers and models made from now on ('float32', 'mixed_float16',
    'mixed_bfloat16' or a Policy)."""
    if not isinstance(policy, (Policy, str)):
        raise ValueError("policy: expected the name of a policy (such as 'mixed_float16') or a "
                         "DTypePolicy, got %r (of type %s)" % (policy, type(policy).__name__))
    _global["policy"] = policy_of(policy, "policy")


def global_policy():
    """The global policy (Keras's global_policy / dtype_policy)."""
    return _global["policy"]


set_dtype_policy = set_global_policy
dtype_policy = global_policy


def engine_precision(policy):
    """The precision a GPU engine's network is built in under `policy`:
    'fp16', 'bf16', or None for float32 (config.precision_for decides then)."""
    return _ENGINE_PRECISION.get(policy_of(policy).name)


class LossScaleOptimizer:
    """Keras 3's LossScaleOptimizer: dynamic loss scaling around an
    optimizer. The engines multiply the loss's gradient by ``scale`` S,
    check the gradients for inf and NaN and divide them by S before the
    inner optimizer's step; a step with any gradient not finite is skipped
    (weights, optimizer state and ``iterations`` unchanged) and S halves;
    after ``dynamic_growth_steps`` finite steps in a row S doubles. All of it
    runs inside the engines' training steps (a GPU's recorded step included:
    no round trip to the host). Every optimizer of cnncuda may be wrapped."""

    def __init__(self, inner_optimizer, initial_scale=2.0 ** 15, dynamic_growth_steps=2000,
                 name=None, **kwargs):
        from . import optimizers
        from .checks import number_in
        if not kwargs.pop("dynamic", True):
            raise ValueError("LossScaleOptimizer no longer supports `dynamic=False`. Instead, "
                             "simply set `loss_scale_factor` directly on the `inner_optimizer`.")
        if kwargs:
            raise ValueError("LossScaleOptimizer does not support arguments: `%s`."
                             % "`, `".join(kwargs))
        if isinstance(inner_optimizer, LossScaleOptimizer) or \
                not isinstance(inner_optimizer, optimizers.Optimizer):
            raise TypeError("inner_optimizer: expected an optimizer such as "
                            "keras.optimizers.Adam(), got %r" % (inner_optimizer,))
        self.inner_optimizer = inner_optimizer
        self.initial_scale = number_in(initial_scale, "initial_scale", 0.0, float("inf"),
                                       low_open=True)
        self.dynamic_growth_steps = positive_int(dynamic_growth_steps, "dynamic_growth_steps")
        if name is not None and not isinstance(name, str):
            raise TypeError("name: expected a str, got %r" % (name,))
        self.name = name or "loss_scale_optimizer"
        self._made_by_compile = False   # compile wrapped it (mixed_float16)

    # the inner optimizer's face: what the model reads of its optimizer
    def __getattr__(self, attr):
        if attr in ("inner_optimizer", "_made_by_compile"):
            raise AttributeError(attr)
        return getattr(self.inner_optimizer, attr)

    @property
    def _model(self):
        return self.inner_optimizer._model

    @_model.setter
    def _model(self, model):
        self.inner_optimizer._model = model

    @property
    def learning_rate(self):
        return self.inner_optimizer.learning_rate

    @learning_rate.setter
    def learning_rate(self, value):
        self.inner_optimizer.learning_rate = value

    @property
    def iterations(self):
        return self.inner_optimizer.iterations

    @property
    def scale(self):
        """The loss scale of the next step (Keras's ``dynamic_scale``; the
        initial scale before the model has trained)."""
        model = self.inner_optimizer._model
        value = None if model is None else model._loss_scale()
        return float(self.initial_scale) if value is None else value

    loss_scale = scale

    @property
    def dynamic_scale(self):
        return self.scale

    def scale_loss(self, loss):
        """Keras's scale_loss: `loss` times the current scale (for a loop
        of one's own; fit's steps scale the loss's gradient in the engine)."""
        return loss * self.scale

    def engine_optimizer(self):
        """The inner optimizer's engine dict with the loss scaling's."""
        return dict(self.inner_optimizer.engine_optimizer(), loss_scale=float(self.initial_scale),
                    loss_scale_growth_steps=int(self.dynamic_growth_steps))

    def get_config(self):
        from . import keras_files
        return {"name": self.name,
                "inner_optimizer": keras_files.optimizer_keras_config(self.inner_optimizer),
                "initial_scale": self.initial_scale,
                "dynamic_growth_steps": self.dynamic_growth_steps}

    @classmethod
    def from_config(cls, config):
        from . import keras_files
        config = dict(config)
        inner = keras_files.optimizer_from_keras_config(config.pop("inner_optimizer"))
        return cls(inner, **config)

    def __repr__(self):
        return "LossScaleOptimizer(%r, initial_scale=%r, dynamic_growth_steps=%r)" % (
            self.inner_optimizer, self.initial_scale, self.dynamic_growth_steps)
