"""``cnncuda.data``: tf.data's spellings over NumPy arrays (``tf.data`` when
cnncuda is imported as tf).

    ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(1024).batch(32)
    model.fit(ds.prefetch(tf.data.AUTOTUNE), epochs=5)

Dataset (dataset.py), Sequence / PyDataset (sequence.py), fit and evaluate
over them (feed.py), image_dataset_from_directory (image_folder.py), the
legacy ImageDataGenerator (image_generator.py).
"""
import types as _types

from .dataset import AUTOTUNE, INFINITE, UNKNOWN, Dataset
from .image_folder import image_dataset_from_directory
from .image_generator import ImageDataGenerator
from .sequence import PyDataset, Sequence

INFINITE_CARDINALITY = INFINITE
UNKNOWN_CARDINALITY = UNKNOWN
experimental = _types.SimpleNamespace(AUTOTUNE=AUTOTUNE, INFINITE_CARDINALITY=INFINITE,
                                      UNKNOWN_CARDINALITY=UNKNOWN)

__all__ = ["AUTOTUNE", "Dataset", "ImageDataGenerator", "INFINITE_CARDINALITY", "UNKNOWN_CARDINALITY", "PyDataset",
           "Sequence", "experimental", "image_dataset_from_directory"]
