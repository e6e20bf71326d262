"""Each data set's find(): where it is on this machine, never a download."""
import hashlib
import urllib.request

import numpy as np
import pytest

from cnncuda.datasets import cifar10, fashion_mnist, imagenette, mnist


@pytest.fixture
def empty(tmp_path, monkeypatch):
    data, keras = tmp_path / "data", tmp_path / "keras"
    monkeypatch.setenv("CNNCUDA_DATA", str(data))
    monkeypatch.setenv("KERAS_HOME", str(keras))
    monkeypatch.delenv("CNNCUDA_FASHION_MNIST", raising=False)
    monkeypatch.setattr(fashion_mnist, "DEFAULT_DIRS", ())

    def no_network(*args, **kwargs):
        raise AssertionError("find() tried to download")
    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    return data, keras / "datasets"


def test_nothing_here(empty):
    assert mnist.find() is None and fashion_mnist.find() is None
    assert cifar10.find() is None and imagenette.find() is None


def test_mnist_found_only_with_the_right_hash(empty, monkeypatch):
    data, keras = empty
    keras.mkdir(parents=True)
    path = keras / "mnist.npz"
    np.savez(path, x_train=np.zeros((1, 28, 28), np.uint8))
    assert mnist.find() is None                       # not Keras's file
    monkeypatch.setattr(mnist, "SHA256", hashlib.sha256(path.read_bytes()).hexdigest())
    assert mnist.find() == str(path)


def test_cifar10_folder_and_imagenette_tree_and_cache(empty):
    data, keras = empty
    folder = keras / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    for name in cifar10.BATCHES:
        (folder / name).write_bytes(b"")
    assert cifar10.find() == str(folder)
    tree = data / "imagenette2-160" / "train"
    tree.mkdir(parents=True)
    assert imagenette.find(160) == str(data / "imagenette2-160")
    cache = data / "imagenette2-160-160px.npz"
    cache.write_bytes(b"")
    assert imagenette.find(160) == str(cache)
    assert imagenette.find(200) is None               # a larger size needs the 320 px variant
    with pytest.raises(ValueError, match="size: expected an int >= 1, got 0"):
        imagenette.find(0)
