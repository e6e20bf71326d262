"""Data sets, loaded in Keras's layout from local files (nothing is downloaded)."""
from . import fashion_mnist

__all__ = ["fashion_mnist"]
