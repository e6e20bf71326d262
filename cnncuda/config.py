"""Which engine a model runs on, in cnncuda's names and in TensorFlow's.

Engines by name: ``numpy``, ``cpu``, ``omp`` / ``omp:N``, ``cuda``, ``cudnn``.
TensorFlow's spellings map onto them:

- ``'/GPU:0'`` (also ``'GPU:0'``, ``'/device:GPU:0'``, ``'gpu'``): the GPU
  engine, ``cudnn`` where it can run, else ``cuda``.
- ``'/CPU:0'`` (also ``'CPU:0'``, ``'/device:CPU:0'``): the C engine with the
  thread count that ``threading.set_intra_op_parallelism_threads(n)`` set: 1
  (the default) is the sequential ``cpu`` engine, n > 1 is ``omp:n``. Where the
  ``omp`` engine is not built, n > 1 falls back to ``cpu`` with a warning.
- ``'omp'`` without a count takes that thread count too (when it is 1:
  ``cnncuda.get_num_threads()``, every core unless ``cnncuda.set_num_threads``
  or OMP_NUM_THREADS says otherwise).

The engine a model uses is chosen at each ``fit``, ``evaluate`` and
``predict``: the innermost ``with cnncuda.device(...)`` block, else the
``device=`` given to ``compile``, else Keras's default: the GPU when a GPU
engine can run, else ``'/CPU:0'``. An engine that this build or machine lacks
raises ``cnncuda.EngineUnavailableError`` saying why and what is available.

``list_physical_devices('GPU')`` lists a GPU only when a GPU engine can run
(so a script's ``assert len(gpus) > 0`` means what it meant with TensorFlow);
``list_logical_devices`` lists the same devices under the names ``device``
takes (``'/device:CPU:0'``, ``'/device:GPU:0'``).

TF32, TensorFlow's names: ``experimental.enable_tensor_float_32_execution(True)``
lets the networks that models build from then on, on a GPU engine (``cuda``,
``cudnn``), multiply on TF32 tensor cores (``precision='tf32'`` of
cnncuda.engine.make_net: inputs rounded to a 10-bit mantissa, about 3
decimal digits per product, sums in float32); a model's network built
before the change is rebuilt, weights and optimizer state carried over, at
its next fit, evaluate or predict (a network of replicas under a
distribution strategy at its next fit: inference makes no collective
call). ``tensor_float_32_execution_enabled()``
says whether it is on. Unlike TensorFlow, which turns TF32 on by default on
Ampere and later GPUs, cnncuda computes in strict float32 until the user
opts in (False by default). The CPU engines ignore the setting, as
TensorFlow's CPU kernels do.
"""
import contextlib
import os
import re
import threading as _threading
import types
import warnings

import numpy as np

from . import _C
from .runtime import devices, get_num_threads
from ._C import EngineUnavailableError
from .checks import nonnegative_int
from .engine import TF32_ENGINES

__all__ = ["device", "resolve_device", "engine_for", "current_device_scope", "list_physical_devices",
           "PhysicalDevice", "list_logical_devices", "LogicalDevice", "experimental", "threading",
           "enable_tensor_float_32_execution", "tensor_float_32_execution_enabled", "precision_for"]

GPU_ENGINES = ("cudnn", "cuda")
ENGINE_NAMES = ("numpy", "cpu", "omp", "cuda", "cudnn")
_TF_SPELLING = re.compile(r"^/?(?:job:[^/]*/)?(?:replica:\d+/)?(?:task:\d+/)?(?:device:)?"
                          r"(CPU|GPU|cpu|gpu)(?::(\d+))?$")

_settings = {"intra_op_threads": 1, "inter_op_threads": 0, "tf32": False}
_scope = _threading.local()


def _scope_stack():
    if not hasattr(_scope, "stack"):
        _scope.stack = []
    return _scope.stack


@contextlib.contextmanager
def device(name):
    """``with cnncuda.device('/GPU:0'):`` (TensorFlow's ``tf.device``): the
    models used inside the block run on that engine. The name is checked when
    the block is entered; whether the engine can run is checked when a model
    first uses it, so the error comes with the call that needs it."""
    _parse(name)
    stack = _scope_stack()
    stack.append(name)
    try:
        yield name
    finally:
        stack.pop()


def current_device_scope():
    """The name given to the innermost active ``device`` block, or None."""
    stack = _scope_stack()
    return stack[-1] if stack else None


def _parse(name):
    """('gpu', None) | ('tfcpu', None) | ('engine', 'cpu' | 'omp:4' | ...)."""
    if not isinstance(name, str):
        raise TypeError("device: expected a str such as 'cpu', 'cuda' or '/GPU:0', got %r" % (name,))
    match = _TF_SPELLING.match(name.strip())
    if match and (name.strip().startswith("/") or "device:" in name or match.group(1).isupper()
                  or match.group(1) == "gpu" or match.group(2) == "0"):
        kind, index = match.group(1).upper(), match.group(2)
        if index not in (None, "0"):
            raise ValueError("device: expected %s:0 (cnncuda drives one %s per engine), got %r"
                             % (kind, kind, name))
        return ("gpu", None) if kind == "GPU" else ("tfcpu", None)
    engine, _, threads = name.strip().partition(":")
    if engine not in ENGINE_NAMES:
        raise ValueError("device: expected one of %s, 'omp:N', '/CPU:0' or '/GPU:0', got %r"
                         % (", ".join(repr(e) for e in ENGINE_NAMES), name))
    if threads:
        try:
            count = int(threads)
        except ValueError:
            count = 0
        if count < 1:
            raise ValueError("device: expected 'name:threads' with threads >= 1, got %r" % name)
    return ("engine", name.strip())


def _reason(engine):
    """Why `engine` cannot run here (None when it can)."""
    if engine == "numpy":
        return None
    return _C.engine_status(engine)


def _available():
    return ", ".join(devices())


def _cpu_threads():
    threads = _settings["intra_op_threads"]
    return threads if threads > 0 else (os.cpu_count() or 1)


def resolve_device(explicit=None):
    """The engine string ('cpu', 'omp:4', 'cudnn', ...) a model uses now: the
    innermost ``device`` block, else `explicit` (compile's device), else the
    default. Raises EngineUnavailableError when that engine cannot run."""
    name = current_device_scope() or explicit
    if name is None:
        for engine in GPU_ENGINES:
            if _reason(engine) is None:
                return engine
        return _tf_cpu()
    return engine_for(name)


def _tf_cpu():
    threads = _cpu_threads()
    if threads == 1:
        return "cpu"
    if _reason("omp") is None:
        return "omp:%d" % threads
    warnings.warn("%d intra-op threads were asked for, but the omp engine cannot run (%s); "
                  "running on the sequential 'cpu' engine" % (threads, _reason("omp")),
                  RuntimeWarning, stacklevel=4)
    return "cpu"


def engine_for(name):
    """The engine string for a device name in either spelling; raises
    ValueError for an unknown name and EngineUnavailableError (saying why and
    what is available) for an engine that cannot run here."""
    kind, engine = _parse(name)
    if kind == "gpu":
        for candidate in GPU_ENGINES:
            if _reason(candidate) is None:
                return candidate
        reasons = "; ".join("%s: %s" % (e, _reason(e)) for e in GPU_ENGINES)
        gpus = _C.cuda_devices()
        found = "GPUs found: %s" % ", ".join(gpus) if gpus else "no GPU found"
        raise EngineUnavailableError("device %r: no GPU engine can run here (%s; %s). "
                                     "Available: %s" % (name, found, reasons, _available()))
    if kind == "tfcpu":
        return _tf_cpu()
    base = engine.partition(":")[0]
    if base == "omp" and ":" not in engine:
        threads = _settings["intra_op_threads"]
        engine = "omp:%d" % (threads if threads > 1 else get_num_threads())
    reason = _reason(base)
    if reason is not None:
        raise EngineUnavailableError("device %r: %s. Available: %s" % (name, reason, _available()))
    return engine


class PhysicalDevice(tuple):
    """TensorFlow's PhysicalDevice: ``name`` and ``device_type``."""

    def __new__(cls, name, device_type):
        return super().__new__(cls, (name, device_type))

    name = property(lambda self: self[0])
    device_type = property(lambda self: self[1])

    def __repr__(self):
        return "PhysicalDevice(name=%r, device_type=%r)" % self


def _device_types(device_type):
    """The device types a listing keeps: ('CPU', 'GPU') for None, else the one asked for."""
    if device_type is not None and (not isinstance(device_type, str)
                                    or device_type.upper() not in ("CPU", "GPU")):
        raise ValueError("device_type: expected 'CPU', 'GPU' or None, got %r" % (device_type,))
    return ("CPU", "GPU") if device_type is None else (device_type.upper(),)


def _gpu_engine_runs():
    """Whether a GPU engine (cuda or cudnn) can run here now."""
    return any(_reason(e) is None for e in GPU_ENGINES)


def _device_kinds(device_type):
    wanted = _device_types(device_type)
    return [k for k in ("CPU", "GPU") if k in wanted and (k == "CPU" or _gpu_engine_runs())]


def list_physical_devices(device_type=None):
    """The devices a model can run on: one CPU, and one GPU when a GPU engine
    (cuda or cudnn) can run. ``device_type`` is 'CPU', 'GPU' or None (all)."""
    return [PhysicalDevice("/physical_device:%s:0" % k, k) for k in _device_kinds(device_type)]


class LogicalDevice(tuple):
    """TensorFlow's LogicalDevice: ``name`` (a name ``cnncuda.device`` takes,
    such as '/device:GPU:0') and ``device_type``."""

    def __new__(cls, name, device_type):
        return super().__new__(cls, (name, device_type))

    name = property(lambda self: self[0])
    device_type = property(lambda self: self[1])

    def __repr__(self):
        return "LogicalDevice(name=%r, device_type=%r)" % self


def list_logical_devices(device_type=None):
    """TensorFlow's ``tf.config.list_logical_devices``: the devices of
    list_physical_devices under the names ``with cnncuda.device(d.name):``
    takes, '/device:CPU:0' and, where a GPU engine can run, '/device:GPU:0'.
    ``device_type`` is 'CPU', 'GPU' or None (all)."""
    return [LogicalDevice("/device:%s:0" % k, k) for k in _device_kinds(device_type)]


def set_memory_growth(device, enable):
    """Accepted for TensorFlow scripts; the engines size their memory once per
    model, so there is nothing to grow."""
    if not isinstance(device, PhysicalDevice):
        raise TypeError("device: expected a PhysicalDevice from list_physical_devices, got %r"
                        % (device,))


def set_intra_op_parallelism_threads(num_threads):
    """The CPU thread count of '/CPU:0' (and of 'omp' without a count). 1, the
    default, is the sequential cpu engine; 0 means every core, as in TensorFlow."""
    _settings["intra_op_threads"] = nonnegative_int(num_threads, "num_threads")


def get_intra_op_parallelism_threads():
    """The thread count set by set_intra_op_parallelism_threads (1 by default)."""
    return _settings["intra_op_threads"]


def set_inter_op_parallelism_threads(num_threads):
    """Accepted and kept for TensorFlow scripts; an engine runs one op at a time."""
    _settings["inter_op_threads"] = nonnegative_int(num_threads, "num_threads")


def get_inter_op_parallelism_threads():
    """The value given to set_inter_op_parallelism_threads (0 by default)."""
    return _settings["inter_op_threads"]


def enable_tensor_float_32_execution(enabled):
    """TensorFlow's switch for TF32 (``tf.config.experimental.
    enable_tensor_float_32_execution``): True lets the networks that models
    build on a GPU engine (cuda, cudnn) multiply on TF32 tensor cores (inputs
    rounded to a 10-bit mantissa, sums in float32); False, the default, keeps
    strict float32. A model whose network was built under the other setting
    rebuilds it (weights and optimizer state carried over) when next used.
    CPU engines ignore it. Unlike TensorFlow, TF32 is off until asked for."""
    if not isinstance(enabled, (bool, np.bool_)):
        raise TypeError("enabled: expected a bool (True or False), got %r" % (enabled,))
    _settings["tf32"] = bool(enabled)


def tensor_float_32_execution_enabled():
    """Whether TF32 is on for GPU engines (False unless
    enable_tensor_float_32_execution(True) was called)."""
    return _settings["tf32"]


def precision_for(engine, policy=None):
    """The precision a model's network on `engine` ('cuda', 'cudnn:1', 'cpu',
    'omp:4', ...) is built with now: on a GPU engine 'fp16' or 'bf16' under a
    mixed dtype policy (`policy`, the model's: keras.mixed_precision), else
    'tf32' while TF32 is enabled, else 'float32'; 'float32' on the CPU
    engines."""
    from .mixed_precision import engine_precision
    base = engine.partition(":")[0] if isinstance(engine, str) else None
    if base not in TF32_ENGINES:
        return "float32"
    mixed = engine_precision(policy) if policy is not None else None
    return mixed or ("tf32" if _settings["tf32"] else "float32")


experimental = types.SimpleNamespace(
    list_physical_devices=list_physical_devices,
    list_logical_devices=list_logical_devices,
    set_memory_growth=set_memory_growth,
    enable_tensor_float_32_execution=enable_tensor_float_32_execution,
    tensor_float_32_execution_enabled=tensor_float_32_execution_enabled)
threading = types.SimpleNamespace(
    set_intra_op_parallelism_threads=set_intra_op_parallelism_threads,
    get_intra_op_parallelism_threads=get_intra_op_parallelism_threads,
    set_inter_op_parallelism_threads=set_inter_op_parallelism_threads,
    get_inter_op_parallelism_threads=get_inter_op_parallelism_threads)
