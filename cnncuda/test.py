"""TensorFlow's ``tf.test`` questions about the GPU, as a Colab notebook's
first cell asks them::

    import cnncuda as tf
    tf.test.is_built_with_cuda()      # False for a CPU-only build
    tf.test.is_gpu_available()        # deprecated, as in TensorFlow
    tf.test.gpu_device_name()         # '/device:GPU:0', or '' without a GPU

A GPU is available when a GPU engine (cuda or cudnn) can run here: the same
test as ``tf.config.list_physical_devices('GPU')``.
"""
import numbers
import warnings

from . import _C
from .runtime import cuda_compute_capabilities
from .config import _gpu_engine_runs

__all__ = ["is_built_with_cuda", "is_built_with_gpu_support", "is_gpu_available",
           "gpu_device_name"]


def is_built_with_cuda():
    """Whether this build of cnncuda compiled its CUDA engines in (``cnncuda.
    build_info()['features']`` has 'cuda-runtime'); says nothing about a GPU
    being here (see ``tf.config.list_physical_devices('GPU')``)."""
    return "cuda-runtime" in _C.compiled_features().split()


def is_built_with_gpu_support():
    """Whether this build has GPU support: CUDA, the only GPU platform here."""
    return is_built_with_cuda()


def _capability(value):
    if value is None:
        return None
    if (not isinstance(value, (tuple, list)) or len(value) != 2
            or not all(isinstance(v, numbers.Integral) and not isinstance(v, bool)
                       for v in value)):
        raise TypeError("min_cuda_compute_capability: expected a (major, minor) pair of ints "
                        "such as (7, 0), or None, got %r" % (value,))
    if min(value) < 0:
        raise ValueError("min_cuda_compute_capability: expected major and minor >= 0, got %r"
                         % (value,))
    return (int(value[0]), int(value[1]))


def is_gpu_available(cuda_only=False, min_cuda_compute_capability=None):
    """Whether a GPU engine can run here (and, given a (major, minor)
    `min_cuda_compute_capability`, whether a visible GPU has at least that
    compute capability). Deprecated, as in TensorFlow: use
    ``tf.config.list_physical_devices('GPU')``. Every GPU here is a CUDA GPU,
    so `cuda_only` changes nothing."""
    if not isinstance(cuda_only, bool):
        raise TypeError("cuda_only: expected True or False, got %r" % (cuda_only,))
    wanted = _capability(min_cuda_compute_capability)
    warnings.warn("tf.test.is_gpu_available is deprecated (as in TensorFlow): use "
                  "tf.config.list_physical_devices('GPU') instead", DeprecationWarning,
                  stacklevel=2)
    if not _gpu_engine_runs():
        return False
    return wanted is None or any(tuple(cap) >= wanted for cap in cuda_compute_capabilities())


def gpu_device_name():
    """'/device:GPU:0' when a GPU engine can run here, else '' (TensorFlow's
    answer without a GPU)."""
    return "/device:GPU:0" if _gpu_engine_runs() else ""
