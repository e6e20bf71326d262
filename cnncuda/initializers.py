"""Keras 3's weight initializers: ``Dense(10, kernel_initializer='he_uniform')``.

Each initializer is a callable object ``init(shape, dtype=None)`` that
returns a NumPy float32 array, with Keras 3's arguments, defaults,
``get_config`` / ``from_config`` and names (strings such as
``'glorot_normal'`` or objects such as ``RandomNormal(stddev=0.1, seed=3)``;
``get``, ``serialize`` and ``deserialize`` convert between them).

Fans are Keras's (``compute_fans``): a dense kernel (in, out) has fan_in =
in and fan_out = out; a Conv2D kernel (kh, kw, cin, cout) fan_in = kh kw cin
and fan_out = kh kw cout.

The numbers come from the project's counter-based RNG (docs/semantics.md,
"Initial weights"), drawn here in NumPy once for a model and handed to
whichever engine runs it, so the same seed gives the same initial weights
on every engine:

- uniform draws u_j = uniform(key, j) (24 bits, as the engines' RNG);
  a range [a, b) is a + (b - a) u_j in float64, then float32;
- normal draws (Box-Muller in float64): z_j = sqrt(-2 ln(1 - u_{2j}))
  cos(2 pi u_{2j+1}), with u_c = uniform(key, c);
- truncated normals redraw every value more than two standard deviations
  from the mean: attempt a of element j uses the counters of element
  a n + j (n the element count) until it lands inside;
- Orthogonal: the QR decomposition of a normal matrix, Keras's recipe.

The key: an initializer given ``seed=s`` uses key(s, 0) wherever it is
used (as in Keras, a seeded initializer gives the same values at every
call); an unseeded one inside a model uses the model's seed and the
engine layer i of the weight, key(seed, 2 i) for a kernel (the stream of
the engines' default glorot_uniform, which an unseeded 'glorot_uniform'
kernel is: the engines draw it themselves) and key(key(seed, 2 i), r) for
the layer's other weights (r = 1 bias, 2 gamma, 3 beta, 4 moving mean,
5 moving variance); called on its own, an unseeded initializer gives new
values at each call (keys from cnncuda's global seed and a call counter).
"""
import itertools
import math
import numbers

import numpy as np

from .config_object import ConfigObject

from .reference import rng_key, uniform

__all__ = ["Initializer", "Zeros", "Ones", "Constant", "RandomNormal", "RandomUniform",
           "TruncatedNormal", "VarianceScaling", "GlorotUniform", "GlorotNormal", "HeUniform",
           "HeNormal", "LecunUniform", "LecunNormal", "Orthogonal", "zeros", "ones", "constant",
           "random_normal", "random_uniform", "truncated_normal", "variance_scaling",
           "glorot_uniform", "glorot_normal", "he_uniform", "he_normal", "lecun_uniform",
           "lecun_normal", "orthogonal", "get", "serialize", "deserialize", "compute_fans",
           "ROLE_STREAMS"]

# the stream of each weight role within its layer (semantics.md)
ROLE_STREAMS = {"kernel": 0, "bias": 1, "gamma": 2, "beta": 3, "moving_mean": 4,
                "moving_variance": 5}
_CALLS = itertools.count()           # unseeded calls outside a model


def compute_fans(shape):
    """Keras's (fan_in, fan_out) of a weight shape."""
    shape = tuple(int(d) for d in shape)
    if len(shape) < 1:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    receptive = 1
    for d in shape[:-2]:
        receptive *= d
    return shape[-2] * receptive, shape[-1] * receptive


def _number(value, arg, low=-math.inf, low_open=False):
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or not math.isfinite(value):
        raise ValueError("%s: expected a finite number, got %r" % (arg, value))
    if value < low or (low_open and value == low):
        raise ValueError("%s: expected a number %s %g, got %r"
                         % (arg, ">" if low_open else ">=", low, value))
    return float(value)


def _seed(seed):
    if seed is None:
        return None
    if not isinstance(seed, numbers.Integral) or isinstance(seed, bool) or seed < 0:
        raise ValueError("seed: expected None or an int >= 0, got %r" % (seed,))
    return int(seed)


def _shape(shape):
    if isinstance(shape, numbers.Integral) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)) or not all(
            isinstance(d, numbers.Integral) and not isinstance(d, bool) and d >= 0
            for d in shape):
        raise ValueError("shape: expected a tuple of ints >= 0, got %r" % (shape,))
    return tuple(int(d) for d in shape)


def _dtype(dtype):
    if dtype not in (None, "float32", np.float32) and np.dtype(dtype) != np.float32:
        raise ValueError("dtype: expected None or 'float32' (weights are float32), got %r"
                         % (dtype,))


def _uniforms(key, first, count):
    return uniform(key, np.arange(first, first + count, dtype=np.uint64)).astype(np.float64)


def _normals(key, count, first=0):
    """count standard normal draws (float64) from counters 2 (first + j), +1."""
    u = _uniforms(key, 2 * first, 2 * count)
    u1, u2 = u[0::2], u[1::2]
    return np.sqrt(-2.0 * np.log1p(-u1)) * np.cos(2.0 * np.pi * u2)


def _truncated_normals(key, count):
    """Standard normal draws redrawn while |z| > 2 (attempt a of element j
    from the counters of element a count + j)."""
    z = _normals(key, count)
    bad = np.flatnonzero(np.abs(z) > 2.0)
    attempt = 1
    while bad.size:
        redraw = _normals_at(key, attempt * count + bad)
        z[bad] = redraw
        bad = bad[np.abs(redraw) > 2.0]
        attempt += 1
    return z


def _normals_at(key, elements):
    """Standard normal draws of the given element numbers (float64)."""
    c = np.asarray(elements, dtype=np.uint64)
    u1 = uniform(key, 2 * c).astype(np.float64)
    u2 = uniform(key, 2 * c + np.uint64(1)).astype(np.float64)
    return np.sqrt(-2.0 * np.log1p(-u1)) * np.cos(2.0 * np.pi * u2)


class Initializer(ConfigObject):
    """Base class: ``__call__(shape, dtype=None)``, ``get_config``, ``from_config``."""

    seeded = False     # whether values depend on a key

    def __call__(self, shape, dtype=None):
        _dtype(dtype)
        shape = _shape(shape)
        key = None
        if self.seeded:
            seed = getattr(self, "seed", None)
            if seed is not None:
                key = rng_key(seed, 0)
            else:
                from .utils import get_random_seed
                key = rng_key(get_random_seed(), (1 << 40) + next(_CALLS))
        return self._draw(shape, key)

    def draw(self, shape, key):
        """The values for `shape` under `key` (a seeded initializer's own key
        instead): what a model's layer gets."""
        shape = _shape(shape)
        if self.seeded and getattr(self, "seed", None) is not None:
            key = rng_key(self.seed, 0)
        return self._draw(shape, key)

    def _draw(self, shape, key):
        raise NotImplementedError

    def get_config(self):
        return {}


class Constant(Initializer):
    """Every value ``value``: a number, or as Keras 3 an array broadcast to
    the weight's shape (the imbalanced-data tutorial's
    ``Constant(np.log([pos / neg]))`` for a bias of one unit)."""

    def __init__(self, value=0.0):
        if isinstance(value, (list, tuple, np.ndarray)):
            array = np.asarray(value, np.float64)
            if array.dtype.kind not in "fiu" or not np.isfinite(array).all():
                raise ValueError("value: expected finite numbers, got %r" % (value,))
            self.value = array.astype(np.float32)
        else:
            self.value = _number(value, "value")

    def _draw(self, shape, key):
        if isinstance(self.value, np.ndarray):
            try:
                return np.array(np.broadcast_to(self.value, shape), np.float32)
            except ValueError:
                raise ValueError("value: an array of shape %s does not broadcast to the "
                                 "weight's shape %s" % (self.value.shape, tuple(shape))) from None
        return np.full(shape, self.value, np.float32)

    def get_config(self):
        value = self.value
        return {"value": value.tolist() if isinstance(value, np.ndarray) else value}


class Zeros(Initializer):
    """Every value 0."""

    def _draw(self, shape, key):
        return np.zeros(shape, np.float32)


class Ones(Initializer):
    """Every value 1."""

    def _draw(self, shape, key):
        return np.ones(shape, np.float32)


class _Random(Initializer):
    seeded = True

    def __init__(self, seed=None):
        self.seed = _seed(seed)

    def get_config(self):
        return {"seed": self.seed}


class RandomUniform(_Random):
    """Uniform values in [minval, maxval)."""

    def __init__(self, minval=-0.05, maxval=0.05, seed=None):
        self.minval = _number(minval, "minval")
        self.maxval = _number(maxval, "maxval")
        super().__init__(seed)

    def _draw(self, shape, key):
        u = _uniforms(key, 0, int(np.prod(shape, dtype=np.int64)))
        return (self.minval + (self.maxval - self.minval) * u).astype(np.float32).reshape(shape)

    def get_config(self):
        return {"seed": self.seed, "minval": self.minval, "maxval": self.maxval}


class RandomNormal(_Random):
    """Normal values of mean ``mean`` and standard deviation ``stddev``."""

    def __init__(self, mean=0.0, stddev=0.05, seed=None):
        self.mean = _number(mean, "mean")
        self.stddev = _number(stddev, "stddev", 0.0)
        super().__init__(seed)

    def _draw(self, shape, key):
        z = _normals(key, int(np.prod(shape, dtype=np.int64)))
        return (self.mean + self.stddev * z).astype(np.float32).reshape(shape)

    def get_config(self):
        return {"seed": self.seed, "mean": self.mean, "stddev": self.stddev}


class TruncatedNormal(RandomNormal):
    """Normal values redrawn while more than 2 ``stddev`` from ``mean``."""

    def _draw(self, shape, key):
        z = _truncated_normals(key, int(np.prod(shape, dtype=np.int64)))
        return (self.mean + self.stddev * z).astype(np.float32).reshape(shape)


class VarianceScaling(_Random):
    """Keras's VarianceScaling: scale / n (n = fan_in, fan_out or their mean)
    as the variance of a truncated normal (stddev sqrt(scale / n) /
    0.87962566103423978 before truncation), an untruncated normal, or a
    uniform in [-sqrt(3 scale / n), sqrt(3 scale / n)]."""

    MODES = ("fan_in", "fan_out", "fan_avg")
    DISTRIBUTIONS = ("truncated_normal", "untruncated_normal", "uniform")

    def __init__(self, scale=1.0, mode="fan_in", distribution="truncated_normal", seed=None,
                 input_axes=None, output_axes=None):
        from .checks import choice
        if input_axes is not None or output_axes is not None:
            raise ValueError("input_axes, output_axes: expected None (fans from the shape, as "
                             "Keras's default), got %r, %r" % (input_axes, output_axes))
        self.scale = _number(scale, "scale", 0.0, low_open=True)
        self.mode = choice(mode, "mode", self.MODES)
        distribution = "truncated_normal" if distribution == "normal" else distribution
        self.distribution = choice(distribution, "distribution", self.DISTRIBUTIONS)
        super().__init__(seed)

    def _draw(self, shape, key):
        fan_in, fan_out = compute_fans(shape)
        n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}[self.mode]
        scale = self.scale / max(1.0, n)
        count = int(np.prod(shape, dtype=np.int64))
        if self.distribution == "uniform":
            limit = math.sqrt(3.0 * scale)
            w = (2.0 * _uniforms(key, 0, count) - 1.0) * limit
        elif self.distribution == "untruncated_normal":
            w = math.sqrt(scale) * _normals(key, count)
        else:
            w = math.sqrt(scale) / 0.87962566103423978 * _truncated_normals(key, count)
        return w.astype(np.float32).reshape(shape)

    def get_config(self):
        return {"seed": self.seed, "scale": self.scale, "mode": self.mode,
                "distribution": self.distribution, "input_axes": None, "output_axes": None}


class _Named(VarianceScaling):
    """A VarianceScaling with Keras's fixed settings (GlorotUniform, ...)."""

    settings = None

    def __init__(self, seed=None, input_axes=None, output_axes=None):
        scale, mode, distribution = self.settings
        super().__init__(scale, mode, distribution, seed, input_axes, output_axes)

    def get_config(self):
        return {"seed": self.seed, "input_axes": None, "output_axes": None}


class GlorotUniform(_Named):
    """Uniform in [-sqrt(6 / (fan_in + fan_out)), +]: Keras's default kernel."""
    settings = (1.0, "fan_avg", "uniform")


class GlorotNormal(_Named):
    """Truncated normal of stddev sqrt(2 / (fan_in + fan_out))."""
    settings = (1.0, "fan_avg", "truncated_normal")


class HeUniform(_Named):
    """Uniform in [-sqrt(6 / fan_in), +]."""
    settings = (2.0, "fan_in", "uniform")


class HeNormal(_Named):
    """Truncated normal of stddev sqrt(2 / fan_in)."""
    settings = (2.0, "fan_in", "truncated_normal")


class LecunUniform(_Named):
    """Uniform in [-sqrt(3 / fan_in), +]."""
    settings = (1.0, "fan_in", "uniform")


class LecunNormal(_Named):
    """Truncated normal of stddev sqrt(1 / fan_in)."""
    settings = (1.0, "fan_in", "truncated_normal")


class Orthogonal(_Random):
    """An orthogonal matrix (rows or columns, whichever are fewer) times
    ``gain``, from the QR decomposition of a normal matrix (Keras's recipe);
    shapes of rank 2 or more, all but the last axis flattened."""

    def __init__(self, gain=1.0, seed=None):
        self.gain = _number(gain, "gain")
        super().__init__(seed)

    def _draw(self, shape, key):
        if len(shape) < 2:
            raise ValueError("shape: Orthogonal needs a shape of rank 2 or more, got %r"
                             % (shape,))
        rows = int(np.prod(shape[:-1], dtype=np.int64))
        cols = shape[-1]
        flat = (max(rows, cols), min(rows, cols))
        a = _normals(key, flat[0] * flat[1]).reshape(flat)
        q, r = np.linalg.qr(a)
        q = q * np.where(np.diag(r) < 0, -1.0, 1.0)
        if rows < cols:
            q = q.T
        return (self.gain * q).astype(np.float32).reshape(shape)

    def get_config(self):
        return {"seed": self.seed, "gain": self.gain}


# Keras exports every class under its snake_case name too
zeros, ones, constant = Zeros, Ones, Constant
random_normal, random_uniform, truncated_normal = RandomNormal, RandomUniform, TruncatedNormal
variance_scaling, orthogonal = VarianceScaling, Orthogonal
glorot_uniform, glorot_normal = GlorotUniform, GlorotNormal
he_uniform, he_normal = HeUniform, HeNormal
lecun_uniform, lecun_normal = LecunUniform, LecunNormal

CLASSES = {cls.__name__: cls for cls in (
    Zeros, Ones, Constant, RandomNormal, RandomUniform, TruncatedNormal, VarianceScaling,
    GlorotUniform, GlorotNormal, HeUniform, HeNormal, LecunUniform, LecunNormal, Orthogonal)}
NAMES = {"zeros": Zeros, "ones": Ones, "constant": Constant, "random_normal": RandomNormal,
         "random_uniform": RandomUniform, "truncated_normal": TruncatedNormal,
         "variance_scaling": VarianceScaling, "glorot_uniform": GlorotUniform,
         "glorot_normal": GlorotNormal, "he_uniform": HeUniform, "he_normal": HeNormal,
         "lecun_uniform": LecunUniform, "lecun_normal": LecunNormal, "orthogonal": Orthogonal,
         "uniform": RandomUniform, "normal": RandomNormal, "zero": Zeros, "one": Ones}


def deserialize(config, arg="initializer"):
    """An initializer from ``{'class_name': ..., 'config': {...}}`` (Keras's
    serialized form, 'module' and 'registered_name' allowed) or a name."""
    if isinstance(config, str):
        return get(config, arg)
    if not isinstance(config, dict) or config.get("class_name") not in CLASSES:
        raise ValueError("%s: expected {'class_name': one of %s, 'config': {...}}, got %r"
                         % (arg, ", ".join(CLASSES), config))
    kwargs = dict(config.get("config") or {})
    cls = CLASSES[config["class_name"]]
    if isinstance(kwargs.get("seed"), dict):
        raise ValueError("%s: seed: expected None or an int, got a %s" % (arg, kwargs["seed"]))
    try:
        return cls.from_config(kwargs)
    except TypeError as exc:
        raise ValueError("%s: %s config %r: %s" % (arg, config["class_name"], kwargs, exc))


def serialize(initializer):
    """Keras's serialized form of an initializer."""
    return {"module": "keras.initializers", "class_name": type(initializer).__name__,
            "config": initializer.get_config(), "registered_name": None}


def get(identifier, arg="initializer"):
    """An initializer from a name ('he_normal'), a serialized dict, an
    initializer object, or an initializer class (Keras's ``get``)."""
    if isinstance(identifier, Initializer):
        return identifier
    if isinstance(identifier, type) and issubclass(identifier, Initializer) \
            and identifier is not Initializer:
        return identifier()
    if isinstance(identifier, dict):
        return deserialize(identifier, arg)
    if isinstance(identifier, str):
        cls = NAMES.get(identifier) or NAMES.get(identifier.lower()) or CLASSES.get(identifier)
        if cls is None:
            raise ValueError("%s: expected one of %s or an initializer object, got %r"
                             % (arg, ", ".join(repr(n) for n in NAMES), identifier))
        return cls()
    if type(identifier).__module__.startswith("keras"):
        raise TypeError("%s: expected a cnncuda initializer (cnncuda.keras.initializers), "
                        "got Keras's %s" % (arg, type(identifier).__name__))
    raise TypeError("%s: expected a name such as 'he_normal' or an initializer object, got %r"
                    % (arg, identifier))
