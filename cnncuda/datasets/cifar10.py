"""CIFAR-10, as ``keras.datasets.cifar10.load_data()`` returns it.

Images (N, 32, 32, 3) uint8, channels last; labels (N, 1) uint8. The data
come from the ``cifar-10-batches-py`` folder (in cnncuda's data folder or
Keras's cache), or from the archive ``cifar-10-python.tar.gz`` (same origin
and SHA-256 as Keras), extracted once into cnncuda's data folder.

The batches are Python pickles; they are read with an unpickler that builds
only NumPy arrays, lists, bytes and numbers, so a tampered file cannot run
code.
"""
import os
import pickle

import numpy as np

from .cache import data_dir, extract_tar, fetch, find_local, keras_dir

__all__ = ["load_data", "load_batch", "find", "ORIGIN", "SHA256"]

ORIGIN = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
SHA256 = "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce"
FOLDER = "cifar-10-batches-py"
BATCHES = ["data_batch_%d" % i for i in range(1, 6)] + ["test_batch"]

_ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
            ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
            ("numpy", "ndarray"), ("numpy", "dtype"),
            ("_codecs", "encode")}   # how Python 3's protocol 2 writes bytes


class _ArrayUnpickler(pickle.Unpickler):
    """Builds NumPy arrays and plain data, nothing else."""

    def find_class(self, module, name):
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError("refusing to load %s.%s from a data file" % (module, name))
        if module == "numpy.core.multiarray":
            module = "numpy._core.multiarray" if hasattr(np, "_core") else module
        return super().find_class(module, name)


def load_batch(path):
    """(data (N, 3, 32, 32) uint8, labels (N,) uint8) of one CIFAR batch file."""
    try:
        with open(path, "rb") as f:
            batch = _ArrayUnpickler(f, encoding="bytes").load()
        batch = {k.decode("utf8") if isinstance(k, bytes) else k: v for k, v in batch.items()}
        data = np.asarray(batch["data"], dtype=np.uint8)
        labels = np.asarray(batch["labels"], dtype=np.uint8)
        data = data.reshape(data.shape[0], 3, 32, 32)
    except (pickle.UnpicklingError, KeyError, ValueError, EOFError, AttributeError) as err:
        raise ValueError("cifar10: %s is not a CIFAR-10 batch (%s)" % (path, err)) from None
    if len(labels) != len(data):
        raise ValueError("cifar10: %s holds %d images and %d labels" % (path, len(data), len(labels)))
    return data, labels


_ARCHIVE = "cifar-10-python.tar.gz"
_ARCHIVE_NAMES = [_ARCHIVE, FOLDER + ".tar.gz"]


def _local_folder():
    for base in (data_dir(), keras_dir(), os.path.join(keras_dir(), FOLDER + "_extracted")):
        folder = os.path.join(base, FOLDER)
        if all(os.path.isfile(os.path.join(folder, b)) for b in BATCHES):
            return folder
    return None


def find():
    """Where CIFAR-10 is on this machine -- the folder of batches, else the
    archive (checked by hash) -- or None. Never downloads."""
    return _local_folder() or find_local(_ARCHIVE, sha256=SHA256, keras_names=_ARCHIVE_NAMES)


def _folder():
    folder = _local_folder()
    if folder is not None:
        return folder
    archive = fetch(_ARCHIVE, ORIGIN, "cifar10", sha256=SHA256, keras_names=_ARCHIVE_NAMES)
    return extract_tar(archive, data_dir(), FOLDER, "cifar10")


def load_data():
    """((x_train, y_train), (x_test, y_test)): uint8 images (50000, 32, 32, 3)
    and (10000, 32, 32, 3), uint8 labels (50000, 1) and (10000, 1)."""
    folder = _folder()
    parts = [load_batch(os.path.join(folder, b)) for b in BATCHES[:-1]]
    x_train = np.concatenate([p[0] for p in parts])
    y_train = np.concatenate([p[1] for p in parts])
    x_test, y_test = load_batch(os.path.join(folder, BATCHES[-1]))
    x_train = np.ascontiguousarray(x_train.transpose(0, 2, 3, 1))
    x_test = np.ascontiguousarray(x_test.transpose(0, 2, 3, 1))
    return (x_train, y_train.reshape(-1, 1)), (x_test, y_test.reshape(-1, 1))
