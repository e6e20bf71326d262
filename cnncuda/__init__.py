"""cnncuda: Keras-style CNN training on a C/CUDA core.

One model, several engines chosen by name: ``numpy`` (the NumPy reference),
``cpu`` (C, one thread), and, where built, ``omp``, ``cuda`` and ``cudnn``.

A Keras script runs after changing its imports::

    import cnncuda as tf
    from cnncuda.keras import datasets, layers, models

(``tf.keras``, ``tf.config``, ``tf.device``, ``tf.random.set_seed``, ``tf.test``'s
GPU questions).
"""
import os

# The omp engine's threads wait for work by spinning, then sleep. libgomp reads
# how long they spin once, when _C loads it; its default (300,000 turns, some
# milliseconds) made a 2-core machine shared with other busy processes run
# LeNet-5 on omp:2 ten to sixty times slower than on one thread, while 10,000
# turns cost nothing measurable when the cores are free (BENCHMARKS.md). So,
# unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set, _C's libgomp gets 10,000;
# the variable is removed again, so a library loaded later keeps its default.
_SPIN = "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ
if _SPIN:
    os.environ["GOMP_SPINCOUNT"] = "10000"
from . import _preload  # noqa: E402

# cuBLAS, cuDNN and NCCL from this environment's PyTorch or JAX wheels where
# they are there, so that cnncuda and those frameworks share one copy of each
# in either import order (_preload.py says why).
_PRELOADED = _preload.prefer_wheel_libraries(
    _preload.extension_file(os.path.dirname(os.path.abspath(__file__))) or "")
try:
    from . import _C
finally:
    if _SPIN:
        del os.environ["GOMP_SPINCOUNT"]
from ._C import CommError, CudaError, EngineUnavailableError  # noqa: E402

import atexit  # noqa: E402

# At interpreter exit every network still alive (held by a global, a cycle
# or a frame that outlives its function) hands its engine memory, cuDNN and
# cuBLAS handles and CUDA stream back before the CUDA runtime is torn down,
# instead of leaving them to the driver. Registered at import, so it runs
# after the exit handlers registered later (the user's) and before those
# registered earlier: a model's weights and optimizer state are first copied
# to the model (models.park_networks_at_exit), so that such a handler can
# still save it; a raw Net used afterwards raises RuntimeError.


def _release_at_exit():
    from .models import park_networks_at_exit
    park_networks_at_exit()
    _C.release_all_nets()


atexit.register(_release_at_exit)

__version__ = "0.1.0"

ENGINES = ("numpy", "cpu", "omp", "cuda", "cudnn")


def build_info():
    """What this build of cnncuda compiled in, as a dict.

    ``features``: the parts compiled in (``cpu``, ``openmp``, ``cuda-runtime``,
    ``cublas``, ``cudnn``, ``nccl``); ``engines``: the engine tables compiled
    in; ``summary``: the line the build printed (compiler, nvcc, libraries);
    ``wheel_libraries``: the cuBLAS, cuDNN and NCCL files loaded from this
    environment's PyTorch or JAX wheels instead of the system's (_preload.py).
    """
    engines = ["numpy"] + [name for name in ENGINES[1:]
                           if "not available in this build" not in (_C.engine_status(name) or "")]
    return {
        "version": __version__,
        "features": _C.compiled_features().split(),
        "engines": engines,
        "summary": _C.build_summary(),
        "gemm": _C.gemm_path(),
        "wheel_libraries": list(_PRELOADED),
    }


def devices():
    """The engines that can run on this machine now, e.g. ``['numpy', 'cpu']``."""
    return ["numpy"] + [name for name in ENGINES[1:] if _C.engine_status(name) is None]


_omp_threads = [0]  # set_num_threads's value; 0: every core


def _cores():
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def set_num_threads(n):
    """The thread count of the ``omp`` engine when none is given (``device='omp'``);
    0 goes back to the default: OMP_NUM_THREADS when set, else every core this
    process may run on. ``'omp:N'`` always means N threads."""
    from .checks import nonnegative_int
    _omp_threads[0] = nonnegative_int(n, "n")


def get_num_threads():
    """The thread count ``device='omp'`` runs with now (see set_num_threads)."""
    if _omp_threads[0]:
        return _omp_threads[0]
    env = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    return _cores()


def cuda_devices():
    """Names of the CUDA GPUs visible now (empty without a CUDA build or GPU)."""
    return _C.cuda_devices()


def cuda_compute_capabilities():
    """The compute capability of each CUDA GPU visible now as ``(major, minor)``,
    in cuda_devices()'s order, e.g. ``[(7, 5)]`` for a T4 (empty without a CUDA
    build or GPU). ``precision="tf32"`` takes effect from ``(8, 0)`` (Ampere) on."""
    return _C.cuda_compute_capabilities()


# The Keras-style API (after devices(), which config uses).
from . import (activations, callbacks, config, data, datasets, distribute,  # noqa: E402
               layers, losses, models, optimizers, random, test, utils)
from . import keras  # noqa: E402
from .config import device  # noqa: E402

__all__ = ["build_info", "devices", "cuda_devices", "cuda_compute_capabilities",
           "set_num_threads", "get_num_threads",
           "CudaError", "EngineUnavailableError", "CommError",
           "ENGINES", "__version__", "keras", "config", "device", "datasets", "distribute", "layers",
           "models",
           "losses", "optimizers", "callbacks", "activations", "utils", "random", "test"]
