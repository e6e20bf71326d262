"""``cnncuda.keras.preprocessing.image``: ImageDataGenerator (TensorFlow 2's
legacy augmentation) and image_dataset_from_directory."""
from ...data import image_dataset_from_directory  # noqa: F401
from ...data.image_generator import ImageDataGenerator  # noqa: F401

__all__ = ["ImageDataGenerator", "image_dataset_from_directory"]
