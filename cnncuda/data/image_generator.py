"""``ImageDataGenerator``: TensorFlow 2's legacy augmentation pipeline
(``tf.keras.preprocessing.image.ImageDataGenerator``), kept for the course
scripts written with it. ``flow(x, y)`` and ``flow_from_directory(path)``
give Sequences (sequence.py) that fit, evaluate and predict take.

Each image of a batch gets its own random affine transform (rotation, shift,
shear, zoom, about the image's centre), flips, brightness and channel shift,
drawn from the iterator's generator (seeded by `seed`); it is resampled
bilinearly in NumPy (Keras: scipy's order-1 spline, the same interpolation),
outside points filled by fill_mode. Then the standardization in Keras's
order: preprocessing_function, rescale, sample-wise, then feature-wise
(after ``fit(x)``). Images are float32, (batch, height, width, channels).
"""
import math
import os

import numpy as np

from ..checks import positive_int
from .image_folder import _decode, _filter, _pillow
from .sequence import PyDataset

__all__ = ["ImageDataGenerator"]

_FILL_MODES = ("nearest", "constant", "reflect", "wrap")
_CLASS_MODES = ("categorical", "binary", "sparse", "input", None)


def _range_pair(value, arg, around=0.0):
    """A (low, high) range from a number r (around - r, around + r) or a pair."""
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError("%s: expected a number or a pair (low, high), got %r" % (arg, value))
        return float(value[0]), float(value[1])
    value = float(value)
    if value < 0:
        raise ValueError("%s: expected a number >= 0, got %r" % (arg, value))
    return around - value, around + value


class ImageDataGenerator:
    """Keras's arguments and defaults (see the module's docstring); zca
    whitening is refused."""

    def __init__(self, featurewise_center=False, samplewise_center=False,
                 featurewise_std_normalization=False, samplewise_std_normalization=False,
                 zca_whitening=False, zca_epsilon=1e-6, rotation_range=0, width_shift_range=0.0,
                 height_shift_range=0.0, brightness_range=None, shear_range=0.0, zoom_range=0.0,
                 channel_shift_range=0.0, fill_mode="nearest", cval=0.0, horizontal_flip=False,
                 vertical_flip=False, rescale=None, preprocessing_function=None,
                 data_format=None, validation_split=0.0, interpolation_order=1, dtype=None):
        if zca_whitening:
            raise ValueError("zca_whitening: expected False (ZCA whitening is not supported), "
                             "got True")
        if fill_mode not in _FILL_MODES:
            raise ValueError("fill_mode: expected one of %s, got %r"
                             % (", ".join(_FILL_MODES), fill_mode))
        if data_format not in (None, "channels_last"):
            raise ValueError("data_format: expected 'channels_last', got %r" % (data_format,))
        if interpolation_order not in (0, 1):
            raise ValueError("interpolation_order: expected 0 or 1, got %r"
                             % (interpolation_order,))
        if not 0.0 <= validation_split < 1.0:
            raise ValueError("validation_split: expected a number in [0, 1), got %r"
                             % (validation_split,))
        self.featurewise_center = featurewise_center
        self.samplewise_center = samplewise_center
        self.featurewise_std_normalization = featurewise_std_normalization
        self.samplewise_std_normalization = samplewise_std_normalization
        self.rotation_range = float(rotation_range)
        self.width_shift_range = width_shift_range
        self.height_shift_range = height_shift_range
        self.brightness_range = None if brightness_range is None else \
            _range_pair(brightness_range, "brightness_range")
        self.shear_range = float(shear_range)
        self.zoom_range = (1.0, 1.0) if zoom_range in (0, 0.0) else \
            _range_pair(zoom_range, "zoom_range", 1.0)
        self.channel_shift_range = float(channel_shift_range)
        self.fill_mode, self.cval = fill_mode, float(cval)
        self.horizontal_flip, self.vertical_flip = bool(horizontal_flip), bool(vertical_flip)
        self.rescale = rescale
        self.preprocessing_function = preprocessing_function
        self.validation_split = float(validation_split)
        self.interpolation_order = interpolation_order
        self.mean = self.std = None

    # -- statistics -------------------------------------------------------------------

    def fit(self, x, augment=False, rounds=1, seed=None):
        """The per-channel mean and std of x, for the feature-wise options."""
        x = np.asarray(x, dtype=np.float32)
        if x.ndim != 4:
            raise ValueError("x: expected images (n, height, width, channels), got shape %s"
                             % (x.shape,))
        self.mean = x.mean(axis=(0, 1, 2), keepdims=True)[0]
        self.std = x.std(axis=(0, 1, 2), keepdims=True)[0]

    def standardize(self, x):
        """One image (or a batch) standardized as the module's docstring says."""
        if self.preprocessing_function is not None:
            x = self.preprocessing_function(x)
        if self.rescale:
            x = x * self.rescale
        if self.samplewise_center:
            x = x - np.mean(x, axis=(-3, -2, -1), keepdims=True)
        if self.samplewise_std_normalization:
            x = x / (np.std(x, axis=(-3, -2, -1), keepdims=True) + 1e-6)
        if self.featurewise_center or self.featurewise_std_normalization:
            if self.mean is None:
                raise ValueError("This ImageDataGenerator specifies `featurewise_center` or "
                                 "`featurewise_std_normalization`, but it hasn't been fit on "
                                 "any training data. Fit it first by calling `.fit(numpy_data)`.")
            if self.featurewise_center:
                x = x - self.mean
            if self.featurewise_std_normalization:
                x = x / (self.std + 1e-6)
        return x.astype(np.float32, copy=False)

    # -- one image's random transform ----------------------------------------------------

    def random_transform(self, x, rng):
        """x (height, width, channels) transformed with parameters drawn from rng."""
        h, w = x.shape[0], x.shape[1]
        theta = math.radians(rng.uniform(-self.rotation_range, self.rotation_range)) \
            if self.rotation_range else 0.0
        tx = self._shift(self.height_shift_range, h, rng)
        ty = self._shift(self.width_shift_range, w, rng)
        shear = math.radians(rng.uniform(-self.shear_range, self.shear_range)) \
            if self.shear_range else 0.0
        zx, zy = (1.0, 1.0) if self.zoom_range == (1.0, 1.0) else \
            tuple(rng.uniform(self.zoom_range[0], self.zoom_range[1], 2))
        if theta or tx or ty or shear or zx != 1.0 or zy != 1.0:
            x = self._affine(x, theta, tx, ty, shear, zx, zy)
        if self.channel_shift_range:
            shift = rng.uniform(-self.channel_shift_range, self.channel_shift_range)
            low, high = x.min(), x.max()
            x = np.clip(x + shift, low, high)
        if self.horizontal_flip and rng.random() < 0.5:
            x = x[:, ::-1]
        if self.vertical_flip and rng.random() < 0.5:
            x = x[::-1]
        if self.brightness_range is not None:
            x = x * rng.uniform(*self.brightness_range)
        return np.ascontiguousarray(x, dtype=np.float32)

    @staticmethod
    def _shift(value, size, rng):
        if isinstance(value, (tuple, list, np.ndarray)):
            shift = float(rng.choice(np.asarray(value)))
        elif value:
            shift = rng.uniform(-value, value)
        else:
            return 0.0
        return shift * size if abs(shift) < 1 else shift

    def _affine(self, x, theta, tx, ty, shear, zx, zy):
        """Keras's transform matrix (rows, columns, 1) about the centre: rotate,
        shift, shear, zoom; each output point samples the input at matrix @ p."""
        h, w = x.shape[0], x.shape[1]
        m = np.eye(3)
        if theta:
            c, s = math.cos(theta), math.sin(theta)
            m = m @ np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])
        if tx or ty:
            m = m @ np.array([[1, 0, tx], [0, 1, ty], [0, 0, 1]])
        if shear:
            m = m @ np.array([[1, -math.sin(shear), 0], [0, math.cos(shear), 0], [0, 0, 1]])
        if zx != 1.0 or zy != 1.0:
            m = m @ np.array([[zx, 0, 0], [0, zy, 0], [0, 0, 1]])
        oh, ow = (h - 1) / 2.0, (w - 1) / 2.0
        m = np.array([[1, 0, oh], [0, 1, ow], [0, 0, 1]]) @ m @ \
            np.array([[1, 0, -oh], [0, 1, -ow], [0, 0, 1]])
        rows, cols = np.meshgrid(np.arange(h, dtype=np.float64), np.arange(w, dtype=np.float64),
                                 indexing="ij")
        r = m[0, 0] * rows + m[0, 1] * cols + m[0, 2]
        c = m[1, 0] * rows + m[1, 1] * cols + m[1, 2]
        return self._sample(x, r, c)

    def _sample(self, x, r, c):
        h, w = x.shape[0], x.shape[1]
        inside = (r > -1) & (r < h) & (c > -1) & (c < w) if self.fill_mode == "constant" else None
        r, c = self._fold(r, h), self._fold(c, w)
        if self.interpolation_order == 0:
            out = x[np.clip(np.rint(r), 0, h - 1).astype(int),
                    np.clip(np.rint(c), 0, w - 1).astype(int)]
        else:
            r0 = np.clip(np.floor(r), 0, h - 1).astype(int)
            c0 = np.clip(np.floor(c), 0, w - 1).astype(int)
            r1, c1 = np.minimum(r0 + 1, h - 1), np.minimum(c0 + 1, w - 1)
            fr = np.clip(r - r0, 0.0, 1.0)[..., None]
            fc = np.clip(c - c0, 0.0, 1.0)[..., None]
            out = (x[r0, c0] * (1 - fr) * (1 - fc) + x[r0, c1] * (1 - fr) * fc +
                   x[r1, c0] * fr * (1 - fc) + x[r1, c1] * fr * fc)
        if inside is not None:
            out = np.where(inside[..., None], out, self.cval)
        return out

    def _fold(self, v, size):
        """Coordinates brought inside [0, size - 1] by fill_mode."""
        if self.fill_mode == "wrap":
            return np.mod(v, size)
        if self.fill_mode == "reflect":
            period = 2 * size
            v = np.mod(v + 0.5, period) - 0.5
            return np.where(v > size - 0.5, period - 1 - v, v)
        return np.clip(v, 0, size - 1)

    # -- iterators ---------------------------------------------------------------------------

    def flow(self, x, y=None, batch_size=32, shuffle=True, sample_weight=None, seed=None,
             save_to_dir=None, save_prefix="", save_format="png", ignore_class_split=False,
             subset=None):
        """A Sequence of (x, y) batches of the arrays (x alone without y)."""
        if sample_weight is not None or save_to_dir is not None:
            raise ValueError("sample_weight and save_to_dir: expected None (not supported)")
        x = np.asarray(x)
        if x.ndim != 4:
            raise ValueError("x: expected images (n, height, width, channels), got shape %s"
                             % (x.shape,))
        if y is not None and len(y) != len(x):
            raise ValueError("y: expected %d targets (as many as x), got %d" % (len(x), len(y)))
        index = np.arange(len(x))
        index = self._subset(index, subset)
        return _ArrayIterator(self, x, None if y is None else np.asarray(y), index,
                              positive_int(batch_size, "batch_size"), shuffle, seed)

    def flow_from_directory(self, directory, target_size=(256, 256), color_mode="rgb",
                            classes=None, class_mode="categorical", batch_size=32, shuffle=True,
                            seed=None, save_to_dir=None, save_prefix="", save_format="png",
                            follow_links=False, subset=None, interpolation="nearest",
                            keep_aspect_ratio=False):
        """A Sequence of (images, labels) batches of a folder with one
        subfolder per class; prints Keras's "Found N images belonging to C
        classes."."""
        from .image_folder import _list_files
        Image = _pillow()
        if class_mode not in _CLASS_MODES:
            raise ValueError("class_mode: expected one of categorical, binary, sparse, input or "
                             "None, got %r" % (class_mode,))
        if color_mode not in ("grayscale", "rgb", "rgba"):
            raise ValueError("color_mode: expected 'grayscale', 'rgb' or 'rgba', got %r"
                             % (color_mode,))
        if classes is None:
            classes = sorted(d for d in os.listdir(directory)
                             if os.path.isdir(os.path.join(directory, d)))
        classes = list(classes)
        paths, labels = _list_files(directory, classes, follow_links)
        index = self._subset(np.arange(len(paths)), subset, labels=np.asarray(labels))
        print("Found %d images belonging to %d classes." % (len(index), len(classes)))
        it = _DirectoryIterator(self, [paths[i] for i in index],
                                np.asarray([labels[i] for i in index], np.int64), classes,
                                class_mode, tuple(target_size), color_mode,
                                _filter(Image, "nearest" if interpolation == "nearest"
                                        else "bilinear"),
                                keep_aspect_ratio, positive_int(batch_size, "batch_size"),
                                shuffle, seed, Image)
        return it

    def _subset(self, index, subset, labels=None):
        if subset is None:
            return index
        if subset not in ("training", "validation"):
            raise ValueError("subset: expected 'training' or 'validation', got %r" % (subset,))
        if not self.validation_split:
            raise ValueError("subset: needs a validation_split in ImageDataGenerator")
        if labels is None:
            split = int(self.validation_split * len(index))
            return index[split:] if subset == "training" else index[:split]
        # per class, as Keras splits a folder: the first files of each class validate
        keep = []
        for label in np.unique(labels):
            mine = index[labels == label]
            split = int(self.validation_split * len(mine))
            keep.append(mine[split:] if subset == "training" else mine[:split])
        return np.concatenate(keep) if keep else index[:0]


class _Iterator(PyDataset):
    """Batches of a generator's images, a new shuffled order each epoch."""

    def __init__(self, generator, n, batch_size, shuffle, seed):
        super().__init__()
        self.generator, self.n, self.batch_size, self.shuffle = generator, n, batch_size, shuffle
        self.seed = int(np.random.randint(0, 2 ** 31 - 1)) if seed is None else int(seed)
        self.epoch = 0
        self._order()

    def _order(self):
        rng = np.random.default_rng([self.seed, self.epoch])
        self.index_array = rng.permutation(self.n) if self.shuffle else np.arange(self.n)

    def __len__(self):
        return -(-self.n // self.batch_size)

    def on_epoch_end(self):
        self.epoch += 1
        self._order()

    def _images(self, rows, load):
        rng = np.random.default_rng([self.seed, self.epoch, int(rows[0]) if len(rows) else 0,
                                     len(rows)])
        images = [self.generator.random_transform(load(i).astype(np.float32), rng)
                  for i in rows]
        return self.generator.standardize(np.stack(images))

    def __getitem__(self, i):
        if not 0 <= i < len(self):
            raise IndexError("batch %d of %d" % (i, len(self)))
        rows = self.index_array[i * self.batch_size:(i + 1) * self.batch_size]
        return self._batch(rows)

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]


class _ArrayIterator(_Iterator):
    def __init__(self, generator, x, y, index, batch_size, shuffle, seed):
        self.x, self.y, self.rows = x, y, index
        super().__init__(generator, len(index), batch_size, shuffle, seed)

    def _batch(self, rows):
        source = self.rows[rows]
        x = self._images(source, lambda i: self.x[i])
        return x if self.y is None else (x, self.y[source])


class _DirectoryIterator(_Iterator):
    def __init__(self, generator, paths, labels, classes, class_mode, size, color_mode,
                 resample, keep_aspect, batch_size, shuffle, seed, Image):
        self.filepaths, self.classes = paths, labels.astype(np.int32)
        self.class_indices = {name: i for i, name in enumerate(classes)}
        self.filenames = [os.path.relpath(p, os.path.dirname(os.path.dirname(p)))
                          for p in paths]
        self.samples, self.num_classes = len(paths), len(classes)
        self.class_mode, self.image_shape = class_mode, size
        self._load = lambda i: _decode(paths[i], {"grayscale": "L", "rgb": "RGB",
                                                  "rgba": "RGBA"}[color_mode],
                                       size, resample, keep_aspect, Image)
        super().__init__(generator, len(paths), batch_size, shuffle, seed)

    def _batch(self, rows):
        x = self._images(rows, self._load)
        labels = self.classes[rows]
        if self.class_mode is None:
            return x
        if self.class_mode == "input":
            return x, x.copy()
        if self.class_mode == "sparse":
            return x, labels.astype(np.float32)
        if self.class_mode == "binary":
            return x, labels.astype(np.float32)
        return x, np.eye(self.num_classes, dtype=np.float32)[labels]
