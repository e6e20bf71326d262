"""Fashion-MNIST, as ``keras.datasets.fashion_mnist.load_data()`` returns it.

The four IDX files (train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz,
t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz; gzipped or not) are
looked for in $CNNCUDA_FASHION_MNIST, in cnncuda's data folder and Keras's
cache (their ``fashion-mnist`` subfolders), and in
/usr/share/datasets/fashion-mnist (the Debian package
``dataset-fashion-mnist``). When none holds them they are downloaded from
Keras's origin and checked against Zalando's published SHA-256 sums (see
cnncuda.datasets.cache).
"""
import gzip
import os

import numpy as np

from ..switches import fashion_mnist_dir
from .cache import data_dir, fetch, keras_dir

__all__ = ["load_data", "find", "read_idx", "ORIGIN", "SHA256"]

DEFAULT_DIRS = ("/usr/share/datasets/fashion-mnist",)
SUBDIR = "fashion-mnist"
FILES = {
    "x_train": "train-images-idx3-ubyte",
    "y_train": "train-labels-idx1-ubyte",
    "x_test": "t10k-images-idx3-ubyte",
    "y_test": "t10k-labels-idx1-ubyte",
}
ORIGIN = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/"
SHA256 = {
    "train-images-idx3-ubyte.gz": "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",
    "train-labels-idx1-ubyte.gz": "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",
    "t10k-images-idx3-ubyte.gz": "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073",
    "t10k-labels-idx1-ubyte.gz": "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5",
}


def _search_dirs():
    dirs = [fashion_mnist_dir()] if fashion_mnist_dir() else []
    return dirs + [os.path.join(data_dir(), SUBDIR), os.path.join(keras_dir(), SUBDIR)] + \
        list(DEFAULT_DIRS)


def find():
    """The directory holding the four files, or None."""
    for d in _search_dirs():
        if all(os.path.exists(os.path.join(d, f + ".gz")) or os.path.exists(os.path.join(d, f))
               for f in FILES.values()):
            return d
    return None


def read_idx(path):
    """An IDX file (optionally gzipped) as a uint8 array of its stated shape."""
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            data = f.read()
    except (OSError, EOFError) as err:  # a damaged gzip stream
        raise ValueError("%s: unreadable IDX file (%s)" % (path, err)) from None
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise ValueError("%s: not an unsigned-byte IDX file" % path)
    rank = data[3]
    header = 4 + 4 * rank
    if len(data) < header:
        raise ValueError("%s: truncated IDX header" % path)
    shape = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(rank))
    count = int(np.prod(shape))
    if len(data) - header != count:
        raise ValueError("%s: expected %d bytes of data for shape %s, found %d"
                         % (path, count, shape, len(data) - header))
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(shape).copy()


def _paths():
    """{key: path} of the four files: from the first folder holding them all,
    else each fetched (found in cnncuda's or Keras's folder, or downloaded)."""
    d = find()
    if d is not None:
        paths = {}
        for key, name in FILES.items():
            path = os.path.join(d, name + ".gz")
            paths[key] = path if os.path.exists(path) else os.path.join(d, name)
        return paths
    return {key: fetch(name + ".gz", ORIGIN + name + ".gz", "fashion_mnist",
                       sha256=SHA256[name + ".gz"], subdir=SUBDIR)
            for key, name in FILES.items()}


def load_data():
    """((x_train, y_train), (x_test, y_test)) as Keras returns them: uint8
    images (60000, 28, 28) and (10000, 28, 28), uint8 labels (60000,) and (10000,)."""
    arrays = {key: read_idx(path) for key, path in _paths().items()}
    return (arrays["x_train"], arrays["y_train"]), (arrays["x_test"], arrays["y_test"])
