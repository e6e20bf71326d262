"""Data sets in Keras's layout: ``mnist``, ``fashion_mnist``, ``cifar10``
(``load_data()`` returns exactly what Keras returns) and ``imagenette``
(``load_data(size=160)``, from its folder tree of JPEGs).

Files are kept in ~/.cnncuda/datasets ($CNNCUDA_DATA overrides); copies in
Keras's cache (~/.keras/datasets) and, for Fashion-MNIST, the Debian package's
/usr/share/datasets/fashion-mnist are used where they are; anything missing
is downloaded from Keras's origin with its checksum verified (see
cnncuda.datasets.cache). Each module's ``find()`` says where the data set is
on this machine (None when it is not) without downloading anything.
"""
from . import cifar10, fashion_mnist, imagenette, mnist
from .cache import DatasetNotFoundError, data_dir

__all__ = ["mnist", "fashion_mnist", "cifar10", "imagenette", "DatasetNotFoundError", "data_dir"]
