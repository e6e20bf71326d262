"""The data a benchmark row trains on: the seed's real data set when it is on
this machine, otherwise synthetic data of the same shape -- and which one it
was, for every row and table to say.

Nothing is downloaded unless asked (``download=True``, ``--download``): the
data sets are looked for where cnncuda.datasets keeps and finds them (each
module's ``find()``). LeNet-5 and the tiny MNIST net take MNIST, or
Fashion-MNIST (same shape; Debian's ``dataset-fashion-mnist`` package
installs it) when MNIST is not here; the binary 100x100 net has no public
data set (the experiment's images were its own), so its data are always
synthetic.
"""
import numpy as np

from ..checks import choice, nonnegative_int, positive_int
from ..datasets import DatasetNotFoundError, cifar10, data_dir, fashion_mnist, imagenette, mnist
from ..seeds import SEEDS, synthetic_data

__all__ = ["REAL_DATASETS", "DATA_MODES", "BenchData", "bench_data", "check_real", "prepare"]

# The real data sets of each seed, in the order they are tried.
REAL_DATASETS = {
    "cifar10_cnn": ("cifar10",),
    "lenet5": ("mnist", "fashion_mnist"),
    "tiny_mnist": ("mnist", "fashion_mnist"),
    "imagenette_cnn": ("imagenette",),
    "binary_100": (),
}
DATA_MODES = ("auto", "real", "synthetic")
_MODULES = {"cifar10": cifar10, "mnist": mnist, "fashion_mnist": fashion_mnist,
            "imagenette": imagenette}
SYNTHETIC_VALIDATION = 10000  # at most this many held-out synthetic images by default


class BenchData:
    """Training and validation arrays in the form the seed's loss takes, and
    their provenance: ``kind`` 'real' or 'synthetic', ``dataset`` (the data
    set's name, or 'synthetic'), ``note`` (why synthetic, where relevant)."""

    def __init__(self, x, y, x_val, y_val, kind, dataset, note=""):
        self.x, self.y, self.x_val, self.y_val = x, y, x_val, y_val
        self.kind, self.dataset, self.note = kind, dataset, note

    @property
    def label(self):
        """'real: cifar10' or 'synthetic': what tables and plots print."""
        return "real: %s" % self.dataset if self.kind == "real" else "synthetic"

    def __repr__(self):
        return "BenchData(%s, %d training and %d validation images)" % (
            self.label, len(self.x), len(self.x_val))


def _fifth(images):
    return max(1, images // 5)


def _find(name):
    module = _MODULES[name]
    return module.find(160) if name == "imagenette" else module.find()


def _load(name):
    """Keras's ((x, y), (x_test, y_test)) of data set `name`."""
    module = _MODULES[name]
    return module.load_data(160) if name == "imagenette" else module.load_data()


def prepare(model, x, y):
    """uint8 images and integer labels of a data set as seed `model` trains on
    them: float32 in [0, 1], NHWC (a channel axis added to 28x28 digits), and
    labels as its loss takes them (ints, one-hot, or (n, 1) 0/1)."""
    spec = SEEDS[model]
    x = np.asarray(x)
    if x.ndim == 3:
        x = x[..., None]
    if x.shape[1:] != tuple(spec["input_shape"]):
        raise ValueError("x: expected images of shape %s for %s, got %s"
                         % (tuple(spec["input_shape"]), model, x.shape[1:]))
    x = (x.astype(np.float32) / np.float32(255.0))
    labels = np.asarray(y).reshape(-1).astype(np.int64)
    kind = spec["loss"]["kind"]
    if kind == "sparse_categorical_crossentropy":
        y = labels
    elif kind == "categorical_crossentropy":
        y = np.eye(spec["classes"], dtype=np.float32)[labels]
    else:
        y = labels.reshape(-1, 1).astype(np.float32)
    return np.ascontiguousarray(x), y


def _subset(arrays, count, arg, what, name):
    x, y = arrays
    if count is None:
        return x, y
    if count > len(x):
        raise ValueError("%s: expected at most %d (the %s images of %s), got %d"
                         % (arg, len(x), what, name, count))
    return x[:count], y[:count]


def check_real(model, download=False):
    """Raises, naming the argument, where data='real' cannot be had for seed
    `model`: it has no public data set, or none of its data sets is on this
    machine (and `download` is False). Loads nothing."""
    names = REAL_DATASETS[model]
    if not names:
        raise ValueError("data: expected 'auto' or 'synthetic' for %s, which has no public "
                         "data set (the experiment's images were its own), got 'real'" % model)
    if not download and all(_find(n) is None for n in names):
        raise DatasetNotFoundError(
            "data: 'real' asked for %s, but %s is not on this machine (looked in %s, Keras's "
            "cache and the places cnncuda.datasets knows); put it there, or pass "
            "download=True (--download) to fetch it" % (model, " or ".join(names), data_dir()))


def bench_data(model, images=None, val_images=None, data="auto", seed=0, download=False,
               cache=None):
    """BenchData for seed `model`.

    images: training images (default: the whole real training set, or the
    experiment's training-set size for synthetic data); a subset of the real
    data is its first `images` images. val_images: validation images (default:
    the whole real test split for whole epochs; otherwise a fifth of the
    training images, at most the test split's size or, for synthetic data,
    10,000; 0: none). data: 'auto' (real when on this machine, else
    synthetic), 'real' (an error when absent, unless `download`) or
    'synthetic'. cache: a dict keeping loaded data sets between calls."""
    if model not in SEEDS:
        raise ValueError("model: expected one of %s, got %r" % (", ".join(SEEDS), model))
    data = choice(data, "data", DATA_MODES)
    if images is not None:
        images = positive_int(images, "images")
    if val_images is not None:
        val_images = nonnegative_int(val_images, "val_images")
    names = REAL_DATASETS[model]
    note = ""
    if data == "real":
        check_real(model, download)
    if data != "synthetic":
        found = next((n for n in names if _find(n) is not None), None)
        if found is None and download and names:
            found = names[0]
        if found is not None:
            try:
                if cache is not None and found in cache:
                    train, test = cache[found]
                else:
                    train, test = _load(found)
                    if cache is not None:
                        cache[found] = (train, test)
            except ImportError as err:  # Imagenette's JPEGs need Pillow
                if data == "real":
                    raise
                note = "%s is here but cannot be read (%s)" % (found, err)
            else:
                x, y = prepare(model, *_subset(train, images, "images", "training", found))
                if val_images is None and images is not None:
                    val_images = min(len(test[0]), _fifth(images))
                x_val, y_val = prepare(model, *_subset(test, val_images, "val_images", "test",
                                                       found))
                return BenchData(x, y, x_val, y_val, "real", found)
        elif names:
            note = "%s is not on this machine" % " or ".join(names)
        else:
            note = "%s has no public data set" % model
    n = images or SEEDS[model]["train_images"]
    n_val = val_images if val_images is not None else min(SYNTHETIC_VALIDATION, _fifth(n))
    x, y = synthetic_data(model, n + n_val, seed=seed)
    return BenchData(x[:n], y[:n], x[n:], y[n:], "synthetic", "synthetic", note)
