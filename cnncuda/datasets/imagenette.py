"""Imagenette (10 easy ImageNet classes), read from its folder tree of JPEGs.

``load_data(size=160)`` returns ((x_train, y_train), (x_val, y_val)): uint8
images (N, size, size, 3) and uint8 labels (N,), the classes numbered in
the sorted order of their folder names (the WordNet ids in CLASSES; LABELS
gives their names). Each image is scaled so its shorter side is `size`
(bilinear) and its centre size x size square kept. Reading the 13,394 JPEGs
needs Pillow (``pip install pillow``) and takes a while, so the arrays are
cached in cnncuda's data folder as ``imagenette2-<variant>-<size>px.npz``.

The tree ``imagenette2-160/{train,val}/<class>/*.JPEG`` (or -320, or the
full-size ``imagenette2``, the smallest that is not smaller than `size`) is
taken from `path`, cnncuda's data folder or Keras's cache, else extracted
from the fast.ai archive there, else downloaded (checked against the MD5
sum the archive's publisher gives; no SHA-256 is published).
"""
import os

import numpy as np

from ..atomic_file import create_temporary
from ..checks import positive_int
from .cache import data_dir, extract_tar, fetch, find_local, keras_dir

__all__ = ["load_data", "read_folder", "find", "CLASSES", "LABELS", "VARIANTS"]

_BASE = "https://s3.amazonaws.com/fast-ai-imageclas/"
VARIANTS = (  # (native shorter side, folder, MD5 of the .tgz)
    (160, "imagenette2-160", "e793b78cc4c9e9a4ccc0c1155377a412"),
    (320, "imagenette2-320", "3df6f0d01a2c9592104656642f5e78a3"),
    (None, "imagenette2", "fe2fc210e6bb7c5664d602c3cd71e612"),
)
CLASSES = ("n01440764", "n02102040", "n02979186", "n03000684", "n03028079", "n03394916",
           "n03417042", "n03425413", "n03445777", "n03888605")
LABELS = ("tench", "English springer", "cassette player", "chain saw", "church", "French horn",
          "garbage truck", "gas pump", "golf ball", "parachute")
_EXTENSIONS = (".jpeg", ".jpg", ".png")


def _variant(size):
    for native, folder, md5 in VARIANTS:
        if native is None or size <= native:
            return folder, md5
    raise AssertionError("unreachable")


def _load_image(path, size):
    from PIL import Image
    with Image.open(path) as image:
        image = image.convert("RGB")
        w, h = image.size
        scale = size / min(w, h)
        nw, nh = max(size, round(w * scale)), max(size, round(h * scale))
        image = image.resize((nw, nh), Image.BILINEAR)
        left, top = (nw - size) // 2, (nh - size) // 2
        return np.asarray(image.crop((left, top, left + size, top + size)), dtype=np.uint8)


def read_folder(root, size):
    """((x_train, y_train), (x_val, y_val)) from root/{train,val}/<class>/<image>."""
    try:
        import PIL  # noqa: F401
    except ImportError:
        raise ImportError("imagenette: reading the JPEGs needs Pillow: pip install pillow") \
            from None
    train_dir = os.path.join(root, "train")
    if not os.path.isdir(train_dir):
        raise ValueError("imagenette: %s has no train/ folder" % root)
    classes = sorted(d for d in os.listdir(train_dir) if os.path.isdir(os.path.join(train_dir, d)))
    if not classes:
        raise ValueError("imagenette: %s holds no class folders" % train_dir)
    splits = []
    for split in ("train", "val"):
        images, labels = [], []
        for label, name in enumerate(classes):
            folder = os.path.join(root, split, name)
            if not os.path.isdir(folder):
                raise ValueError("imagenette: %s is missing (the classes of train/ are %s)"
                                 % (folder, ", ".join(classes)))
            for fname in sorted(os.listdir(folder)):
                if fname.lower().endswith(_EXTENSIONS):
                    images.append(_load_image(os.path.join(folder, fname), size))
                    labels.append(label)
        x = np.stack(images) if images else np.zeros((0, size, size, 3), np.uint8)
        splits.append((x, np.asarray(labels, dtype=np.uint8)))
    return tuple(splits)


def _local_tree(folder):
    for base in (data_dir(), keras_dir()):
        if os.path.isdir(os.path.join(base, folder, "train")):
            return os.path.join(base, folder)
    return None


def _tree(folder, md5):
    tree = _local_tree(folder)
    if tree is not None:
        return tree
    archive = fetch(folder + ".tgz", _BASE + folder + ".tgz", "imagenette", md5=md5)
    return extract_tar(archive, data_dir(), folder, "imagenette")


def _cache_path(folder, size):
    return os.path.join(data_dir(), "%s-%dpx.npz" % (folder, size))


def find(size=160):
    """Where Imagenette at `size` is on this machine -- the cached arrays,
    else the folder tree, else the archive (checked by MD5) -- or None.
    Never downloads."""
    size = positive_int(size, "size")
    folder, md5 = _variant(size)
    cache = _cache_path(folder, size)
    if os.path.isfile(cache):
        return cache
    return _local_tree(folder) or find_local(folder + ".tgz", md5=md5)


def load_data(size=160, path=None):
    """((x_train, y_train), (x_val, y_val)) of Imagenette at size x size."""
    size = positive_int(size, "size")
    folder, md5 = _variant(size)
    if path is not None:
        if not os.path.isdir(path):
            raise ValueError("path: expected a folder holding train/ and val/, got %r" % (path,))
        return read_folder(path, size)
    cache = _cache_path(folder, size)
    if os.path.isfile(cache):
        with np.load(cache, allow_pickle=False) as f:
            return (f["x_train"], f["y_train"]), (f["x_val"], f["y_val"])
    (x_train, y_train), (x_val, y_val) = read_folder(_tree(folder, md5), size)
    os.makedirs(data_dir(), exist_ok=True)
    # the umask's mode (not mkstemp's 0600), and no partial file left behind
    fd, tmp = create_temporary(data_dir(), os.path.basename(cache))
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, x_train=x_train, y_train=y_train, x_val=x_val, y_val=y_val)
        os.replace(tmp, cache)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise
    return (x_train, y_train), (x_val, y_val)
