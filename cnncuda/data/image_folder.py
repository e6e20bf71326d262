"""``image_dataset_from_directory``: a folder of images, one subfolder per
class, as a Dataset of (images, labels) batches, with Keras's arguments and
defaults.

As Keras: the class names are the subfolders' names in sorted order (or
`class_names`); the files (.bmp, .gif, .jpeg, .jpg, .png) are listed per
class in sorted order, then shuffled once with `seed` (files and labels
alike); validation_split keeps the last int(split * n) files for
'validation' and the rest for 'training'; a shuffled training set is
reshuffled each epoch in a buffer of 8 batches. Images come as float32 in
0..255, (batch, height, width, channels). They are decoded by Pillow (an
optional dependency) when a batch is drawn, on the process's decoding threads
(one per core, at most 8, made on first use and made again in a forked
child, where the parent's threads do not run), resized with
Pillow's filter of the `interpolation` name (values differ slightly from
TensorFlow's resize of the same name).
"""
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..checks import positive_int
from .dataset import Dataset

__all__ = ["image_dataset_from_directory"]

FORMATS = (".bmp", ".gif", ".jpeg", ".jpg", ".png")
CHANNELS = {"grayscale": 1, "rgb": 3, "rgba": 4}
PIL_MODES = {"grayscale": "L", "rgb": "RGB", "rgba": "RGBA"}
INTERPOLATIONS = ("bilinear", "nearest", "bicubic", "area", "lanczos3", "lanczos5",
                  "gaussian", "mitchellcubic")
# Decoding a JPEG of 213x160 and resizing it holds the GIL for part of the
# work: on one H100 machine's 16 cores (2026-11-27, 1024 images, batches of
# 32) 1 thread decoded 732-776 images/s, 4 threads 1843-1965, 8 threads
# 1654-1963, 16 threads 1620-1656.
MAX_DECODERS = 8

_decoders = {"pid": None, "pool": None}


def _decoder_pool():
    """The decoding threads of this process (a pool per batch cost a thread
    start per image). A pool inherited through fork holds threads that do
    not exist in the child and would never run its work, so a child makes
    its own."""
    if _decoders["pid"] != os.getpid():
        _decoders["pool"] = ThreadPoolExecutor(max(1, min(MAX_DECODERS, os.cpu_count() or 1)),
                                               thread_name_prefix="cnncuda-decode")
        _decoders["pid"] = os.getpid()
    return _decoders["pool"]


def _pillow():
    try:
        from PIL import Image
    except ImportError:
        raise ImportError("image_dataset_from_directory needs Pillow to decode images: "
                          "pip install pillow (or pip install -e \".[data]\")") from None
    return Image


def _filter(Image, interpolation):
    R = Image.Resampling if hasattr(Image, "Resampling") else Image
    return {"bilinear": R.BILINEAR, "nearest": R.NEAREST, "bicubic": R.BICUBIC,
            "area": R.BOX, "lanczos3": R.LANCZOS, "lanczos5": R.LANCZOS,
            "gaussian": R.HAMMING, "mitchellcubic": R.BICUBIC}[interpolation]


def _list_files(directory, class_names, follow_links):
    """(paths, labels) of every image under directory/<class>/, sorted."""
    paths, labels = [], []
    for label, name in enumerate(class_names):
        root = os.path.join(directory, name)
        found = []
        for base, dirs, files in os.walk(root, followlinks=follow_links):
            dirs.sort()
            found.extend(os.path.join(base, f) for f in sorted(files)
                         if f.lower().endswith(FORMATS))
        paths.extend(found)
        labels.extend([label] * len(found))
    return paths, labels


def _flat_files(directory, follow_links):
    found = []
    for base, dirs, files in os.walk(directory, followlinks=follow_links):
        dirs.sort()
        found.extend(os.path.join(base, f) for f in sorted(files) if f.lower().endswith(FORMATS))
    return found


def _decode(path, mode, size, resample, crop, Image):
    with Image.open(path) as image:
        image = image.convert(mode)
        height, width = size
        if crop:
            # the largest window of the target's aspect ratio, centred
            w, h = image.size
            crop_w = min(w, int(round(h * width / height)))
            crop_h = min(h, int(round(w * height / width)))
            left, top = (w - crop_w) // 2, (h - crop_h) // 2
            image = image.crop((left, top, left + crop_w, top + crop_h))
        if image.size != (width, height):
            image = image.resize((width, height), resample)
        array = np.asarray(image, dtype=np.float32)
    return array[..., None] if array.ndim == 2 else array


def image_dataset_from_directory(directory, labels="inferred", label_mode="int",
                                 class_names=None, color_mode="rgb", batch_size=32,
                                 image_size=(256, 256), shuffle=True, seed=None,
                                 validation_split=None, subset=None, interpolation="bilinear",
                                 follow_links=False, crop_to_aspect_ratio=False,
                                 pad_to_aspect_ratio=False, data_format=None, verbose=True):
    """A Dataset of (images, labels) batches read from `directory` (see the
    module's docstring); ``.class_names`` holds the class names. With
    subset='both', a pair (training, validation)."""
    Image = _pillow()
    if not os.path.isdir(directory):
        raise ValueError("directory: expected a folder, got %r (not a folder)" % (directory,))
    if color_mode not in CHANNELS:
        raise ValueError("color_mode: expected 'grayscale', 'rgb' or 'rgba', got %r"
                         % (color_mode,))
    if label_mode not in ("int", "categorical", "binary", None):
        raise ValueError("label_mode: expected 'int', 'categorical', 'binary' or None, got %r"
                         % (label_mode,))
    if interpolation not in INTERPOLATIONS:
        raise ValueError("interpolation: expected one of %s, got %r"
                         % (", ".join(INTERPOLATIONS), interpolation))
    if pad_to_aspect_ratio:
        raise ValueError("pad_to_aspect_ratio: expected False (not supported), got %r"
                         % (pad_to_aspect_ratio,))
    if data_format not in (None, "channels_last"):
        raise ValueError("data_format: expected 'channels_last', got %r" % (data_format,))
    try:
        height, width = (int(v) for v in image_size)
        if height < 1 or width < 1:
            raise ValueError
    except (TypeError, ValueError):
        raise ValueError("image_size: expected (height, width) of positive ints, got %r"
                         % (image_size,)) from None
    if batch_size is not None:
        batch_size = positive_int(batch_size, "batch_size")
    if subset not in (None, "training", "validation", "both"):
        raise ValueError("subset: expected 'training', 'validation', 'both' or None, got %r"
                         % (subset,))
    if validation_split is not None and not 0 < validation_split < 1:
        raise ValueError("validation_split: expected a number in (0, 1), got %r"
                         % (validation_split,))
    if (subset is None) != (validation_split is None):
        raise ValueError("subset and validation_split: give both or neither, got subset=%r, "
                         "validation_split=%r" % (subset, validation_split))
    if validation_split and shuffle and seed is None:
        raise ValueError("If using `validation_split` and shuffling the data, you must provide "
                         "a `seed` argument, to make sure that there is no overlap between "
                         "the training and validation subset.")

    # the files and their labels
    if labels == "inferred":
        subfolders = sorted(d for d in os.listdir(directory)
                            if os.path.isdir(os.path.join(directory, d)))
        if class_names is not None:
            class_names = list(class_names)
            if sorted(class_names) != subfolders:
                raise ValueError("class_names: expected the subfolders of %s (%s), got %s"
                                 % (directory, subfolders, class_names))
        else:
            class_names = subfolders
        paths, file_labels = _list_files(directory, class_names, follow_links)
    else:
        paths = _flat_files(directory, follow_links)
        if labels is None:
            file_labels = None
            label_mode = None
        else:
            file_labels = [int(v) for v in labels]
            if len(file_labels) != len(paths):
                raise ValueError("labels: expected one label per image file (%d files in %s), "
                                 "got %d" % (len(paths), directory, len(file_labels)))
        class_names = None if file_labels is None else \
            [str(i) for i in range(max(file_labels) + 1 if file_labels else 0)]
    classes = len(class_names) if class_names is not None else 0
    if label_mode == "binary" and classes != 2:
        raise ValueError("label_mode: 'binary' needs exactly 2 classes, found %d: %s"
                         % (classes, class_names))
    if verbose:
        if labels == "inferred" or file_labels is not None:
            print("Found %d files belonging to %d classes." % (len(paths), classes))
        else:
            print("Found %d files." % len(paths))
    if not paths:
        raise ValueError("No images found in directory %s. Allowed formats: %s"
                         % (directory, FORMATS))

    if shuffle:
        if seed is None:
            seed = int(np.random.randint(1_000_000))
        order = np.random.RandomState(seed).permutation(len(paths))
        paths = [paths[i] for i in order]
        if file_labels is not None:
            file_labels = [file_labels[i] for i in order]

    def part(name, lo, hi):
        if verbose and validation_split:
            print("Using %d files for %s." % (hi - lo, name))
        return _dataset(paths[lo:hi], None if file_labels is None else file_labels[lo:hi],
                        label_mode, classes, color_mode, (height, width), interpolation,
                        crop_to_aspect_ratio, batch_size, shuffle and name == "training", seed,
                        class_names, Image)

    n = len(paths)
    n_val = int(validation_split * n) if validation_split else 0
    if subset == "both":
        return part("training", 0, n - n_val), part("validation", n - n_val, n)
    if subset == "validation":
        return part("validation", n - n_val, n)
    return part("training", 0, n - n_val)


def _dataset(paths, labels, label_mode, classes, color_mode, size, interpolation, crop,
             batch_size, shuffle, seed, class_names, Image):
    resample = _filter(Image, interpolation)
    mode = PIL_MODES[color_mode]

    def targets(values):
        values = np.asarray(values, dtype=np.int64)
        if label_mode == "int":
            return values.astype(np.int32)
        if label_mode == "categorical":
            return np.eye(classes, dtype=np.float32)[values]
        return values.astype(np.float32).reshape(values.shape + (1,))   # binary

    def decode_batch(batch_paths, *batch_labels):
        files = [p.decode() if isinstance(p, bytes) else str(p)
                 for p in np.atleast_1d(batch_paths)]
        images = list(_decoder_pool().map(
            lambda f: _decode(f, mode, size, resample, crop, Image), files))
        x = np.stack(images)
        if np.ndim(batch_paths) == 0:
            x = x[0]
        if label_mode is None:
            return x
        return x, targets(batch_labels[0])

    index = np.asarray(paths)
    if label_mode is None:
        ds = Dataset.from_tensor_slices(index)
    else:
        ds = Dataset.from_tensor_slices((index, np.asarray(labels, dtype=np.int64)))
    if shuffle:
        ds = ds.shuffle(8 * (batch_size or 32), seed=seed)
    if batch_size is not None:
        ds = ds.batch(batch_size)
    ds = ds.map(decode_batch)
    ds.class_names = class_names
    ds.file_paths = list(paths)
    return ds
