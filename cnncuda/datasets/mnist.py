"""MNIST digits, as ``keras.datasets.mnist.load_data()`` returns them.

The file is Keras's ``mnist.npz`` (same origin, same SHA-256), taken from
cnncuda's data folder, Keras's cache, or downloaded (see
cnncuda.datasets.cache).
"""
import numpy as np

from .cache import fetch, find_local

__all__ = ["load_data", "find", "ORIGIN", "SHA256"]

ORIGIN = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/mnist.npz"
SHA256 = "731c5ac602752760c8e48fbffcf8c3b850d9dc2a2aedcf2cc48468fc17b673d1"


def find(path="mnist.npz"):
    """Where Keras's mnist.npz (checked by hash) is on this machine, or None.
    Never downloads."""
    return find_local(path, sha256=SHA256)


def load_data(path="mnist.npz"):
    """((x_train, y_train), (x_test, y_test)): uint8 images (60000, 28, 28)
    and (10000, 28, 28), uint8 labels (60000,) and (10000,)."""
    if not isinstance(path, str) or not path:
        raise TypeError("path: expected a file name such as 'mnist.npz', got %r" % (path,))
    local = fetch(path, ORIGIN, "mnist", sha256=SHA256)
    try:
        with np.load(local, allow_pickle=False) as f:
            x_train, y_train = f["x_train"], f["y_train"]
            x_test, y_test = f["x_test"], f["y_test"]
    except (KeyError, ValueError, OSError) as err:
        raise ValueError("mnist: %s is not Keras's mnist.npz (%s)" % (local, err)) from None
    return (x_train, y_train), (x_test, y_test)
