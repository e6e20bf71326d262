"""``cnncuda.keras.preprocessing``: TensorFlow 2's older spelling of
image_dataset_from_directory (``tf.keras.preprocessing.image_dataset_from_directory``)."""
from ..data import image_dataset_from_directory  # noqa: F401

__all__ = ["image_dataset_from_directory"]
