"""``cnncuda.keras.datasets``: the data sets of cnncuda.datasets under Keras's name."""
from ..datasets import cifar10, fashion_mnist, imagenette, mnist  # noqa: F401

__all__ = ["mnist", "fashion_mnist", "cifar10", "imagenette"]
