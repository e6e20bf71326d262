"""``cnncuda.keras.preprocessing``: TensorFlow 2's older spellings:
``image_dataset_from_directory`` and ``image.ImageDataGenerator``."""
from ...data import image_dataset_from_directory  # noqa: F401
from . import image  # noqa: F401

__all__ = ["image", "image_dataset_from_directory"]
