"""Fashion-MNIST from local IDX files.

Looks in $CNNCUDA_FASHION_MNIST, then /usr/share/datasets/fashion-mnist (the
Debian package ``dataset-fashion-mnist``), for train-images-idx3-ubyte.gz,
train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz and
t10k-labels-idx1-ubyte.gz (gzipped or not).
"""
import gzip
import os

import numpy as np

__all__ = ["load_data", "find", "read_idx"]

DEFAULT_DIRS = ("/usr/share/datasets/fashion-mnist",)
FILES = {
    "x_train": "train-images-idx3-ubyte",
    "y_train": "train-labels-idx1-ubyte",
    "x_test": "t10k-images-idx3-ubyte",
    "y_test": "t10k-labels-idx1-ubyte",
}


def find():
    """The directory holding the four files, or None."""
    dirs = [os.environ["CNNCUDA_FASHION_MNIST"]] if os.environ.get("CNNCUDA_FASHION_MNIST") else []
    for d in dirs + list(DEFAULT_DIRS):
        if all(os.path.exists(os.path.join(d, f + ".gz")) or os.path.exists(os.path.join(d, f))
               for f in FILES.values()):
            return d
    return None


def read_idx(path):
    """An IDX file (optionally gzipped) as a uint8 array of its stated shape."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
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
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(shape)


def load_data():
    """((x_train, y_train), (x_test, y_test)) as Keras returns them: uint8
    images (60000, 28, 28) and (10000, 28, 28), uint8 labels."""
    d = find()
    if d is None:
        raise FileNotFoundError(
            "Fashion-MNIST not found: install the Debian package dataset-fashion-mnist or set "
            "CNNCUDA_FASHION_MNIST to a directory holding %s" % ", ".join(FILES.values()))
    arrays = {}
    for key, name in FILES.items():
        path = os.path.join(d, name + ".gz")
        arrays[key] = read_idx(path if os.path.exists(path) else os.path.join(d, name))
    return (arrays["x_train"], arrays["y_train"]), (arrays["x_test"], arrays["y_test"])
