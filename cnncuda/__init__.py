"""cnncuda: Keras-style CNN training on a C/CUDA core.

One model, several engines chosen by name: ``numpy`` (the NumPy reference),
``cpu`` (C, one thread), and, where built, ``omp``, ``cuda`` and ``cudnn``.

A Keras script runs after changing its imports::

    import cnncuda as tf
    from cnncuda.keras import datasets, layers, models

(``tf.keras``, ``tf.config``, ``tf.device``, ``tf.random.set_seed``, ``tf.test``'s
GPU questions).
"""
# The C core, loaded by runtime (the omp engine's spin count, the GPU
# libraries of this environment's wheels, then _C), and what it holds.
from .runtime import (ENGINES, __version__, build_info, cuda_compute_capabilities,  # noqa: F401
                      cuda_devices, devices, get_num_threads, set_num_threads)
from . import _C  # noqa: E402
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

# The Keras-style API.
from . import (activations, callbacks, config, data, datasets, distribute,  # noqa: E402
               initializers, layers, losses, metrics, models, nn, optimizers, random, regularizers, test,
               utils)
from . import keras  # noqa: E402
from .config import device  # noqa: E402

__all__ = ["build_info", "devices", "cuda_devices", "cuda_compute_capabilities",
           "set_num_threads", "get_num_threads",
           "CudaError", "EngineUnavailableError", "CommError",
           "ENGINES", "__version__", "keras", "config", "device", "datasets", "distribute", "layers",
           "models", "nn",
           "losses", "optimizers", "callbacks", "activations", "utils", "random", "test",
           "initializers", "regularizers", "metrics"]
