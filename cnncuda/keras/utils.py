"""``cnncuda.keras.utils``: set_random_seed, to_categorical, the data helpers
(image_dataset_from_directory, Sequence, PyDataset)."""
from ..data import PyDataset, Sequence, image_dataset_from_directory  # noqa: F401
from ..utils import set_random_seed, to_categorical  # noqa: F401

__all__ = ["set_random_seed", "to_categorical", "image_dataset_from_directory", "Sequence",
           "PyDataset"]
