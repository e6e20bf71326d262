"""Data sets: what Keras returns, from small format-exact fixtures written
here; downloads (from file:// URLs) checked by hash; clear errors offline."""
import gzip
import hashlib
import io
import os
import pickle
import tarfile
import urllib.error
import urllib.request

import numpy as np
import pytest

from cnncuda.datasets import DatasetNotFoundError, cifar10, fashion_mnist, imagenette, mnist


@pytest.fixture
def folders(tmp_path, monkeypatch):
    """Empty cnncuda and Keras data folders, no Debian Fashion-MNIST, no network."""
    data, keras = tmp_path / "data", tmp_path / "keras"
    monkeypatch.setenv("CNNCUDA_DATA", str(data))
    monkeypatch.setenv("KERAS_HOME", str(keras))
    monkeypatch.delenv("CNNCUDA_FASHION_MNIST", raising=False)
    monkeypatch.setattr(fashion_mnist, "DEFAULT_DIRS", ())

    def offline(url, *args, **kwargs):
        if not str(url).startswith("file:"):
            raise urllib.error.URLError("network is unreachable")
        return real_urlopen(url, *args, **kwargs)
    real_urlopen = urllib.request.urlopen
    monkeypatch.setattr(urllib.request, "urlopen", offline)
    return data, keras / "datasets"


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- MNIST ---------------------------------------------------------------------

def write_mnist(path, n=6):
    rng = np.random.default_rng(0)
    arrays = {"x_train": rng.integers(0, 256, (n, 28, 28), dtype=np.uint8),
              "y_train": rng.integers(0, 10, n).astype(np.uint8),
              "x_test": rng.integers(0, 256, (2, 28, 28), dtype=np.uint8),
              "y_test": rng.integers(0, 10, 2).astype(np.uint8)}
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **arrays)
    return arrays


def test_mnist_from_keras_cache(folders, monkeypatch):
    data, keras = folders
    arrays = write_mnist(keras / "mnist.npz")
    monkeypatch.setattr(mnist, "SHA256", sha256(keras / "mnist.npz"))
    (x, y), (xt, yt) = mnist.load_data()
    assert x.dtype == np.uint8 and x.shape == (6, 28, 28) and y.shape == (6,)
    np.testing.assert_array_equal(xt, arrays["x_test"])
    assert not data.exists()                      # used in place, not copied


def test_mnist_download_checks_the_hash(folders, monkeypatch, tmp_path):
    data, _ = folders
    source = tmp_path / "origin" / "mnist.npz"
    write_mnist(source)
    monkeypatch.setattr(mnist, "ORIGIN", source.as_uri())
    monkeypatch.setattr(mnist, "SHA256", "0" * 64)
    with pytest.raises(ValueError, match=r"mnist: the file downloaded from file:.* has sha256 "
                                         r"[0-9a-f]{64}, expected 0{64}; it was discarded"):
        mnist.load_data()
    assert os.listdir(data) == []                 # no partial file left
    monkeypatch.setattr(mnist, "SHA256", sha256(source))
    (x, _), _ = mnist.load_data()
    assert x.shape == (6, 28, 28) and (data / "mnist.npz").is_file()


def test_offline_errors_name_the_url_and_the_folder(folders):
    data, keras = folders
    cases = [(mnist.load_data, mnist.ORIGIN, data),
             (fashion_mnist.load_data, fashion_mnist.ORIGIN + "train-images-idx3-ubyte.gz",
              data / "fashion-mnist"),
             (cifar10.load_data, cifar10.ORIGIN, data),
             (imagenette.load_data, "https://s3.amazonaws.com/fast-ai-imageclas/imagenette2-160.tgz",
              data)]
    for load, url, folder in cases:
        with pytest.raises(DatasetNotFoundError) as info:
            load()
        message = str(info.value)
        assert "could not download %s (network is unreachable)" % url in message
        assert "put it in %s/" % folder in message and str(keras) in message


# -- Fashion-MNIST ---------------------------------------------------------------

def idx_bytes(array):
    header = bytes([0, 0, 8, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    return header + array.astype(np.uint8).tobytes()


def write_fashion(folder, n=5):
    rng = np.random.default_rng(1)
    arrays = {"train-images-idx3-ubyte": rng.integers(0, 256, (n, 28, 28)),
              "train-labels-idx1-ubyte": rng.integers(0, 10, n),
              "t10k-images-idx3-ubyte": rng.integers(0, 256, (3, 28, 28)),
              "t10k-labels-idx1-ubyte": rng.integers(0, 10, 3)}
    folder.mkdir(parents=True, exist_ok=True)
    for name, array in arrays.items():
        (folder / (name + ".gz")).write_bytes(gzip.compress(idx_bytes(array), mtime=0))
    return arrays


def test_fashion_mnist_from_keras_cache_and_by_download(folders, monkeypatch, tmp_path):
    data, keras = folders
    arrays = write_fashion(keras / "fashion-mnist")
    (x, y), (xt, yt) = fashion_mnist.load_data()
    assert (x.shape, x.dtype, y.shape, y.dtype) == ((5, 28, 28), np.uint8, (5,), np.uint8)
    np.testing.assert_array_equal(yt, arrays["t10k-labels-idx1-ubyte"])
    x[0, 0, 0] = 1                                # writable, as Keras's arrays are
    origin = tmp_path / "origin"
    write_fashion(origin)
    (keras / "fashion-mnist" / "t10k-labels-idx1-ubyte.gz").unlink()
    monkeypatch.setattr(fashion_mnist, "ORIGIN", origin.as_uri() + "/")
    monkeypatch.setattr(fashion_mnist, "SHA256", {p.name: sha256(p) for p in origin.iterdir()})
    (x, _), _ = fashion_mnist.load_data()
    assert x.shape == (5, 28, 28)
    assert os.listdir(data / "fashion-mnist") == ["t10k-labels-idx1-ubyte.gz"]


@pytest.mark.skipif(not os.path.isdir("/usr/share/datasets/fashion-mnist"),
                    reason="Fashion-MNIST not installed (Debian package dataset-fashion-mnist)")
def test_fashion_mnist_debian_package_is_what_keras_returns():
    (x, y), (xt, yt) = fashion_mnist.load_data()
    assert (x.shape, x.dtype, y.shape, y.dtype) == ((60000, 28, 28), np.uint8, (60000,), np.uint8)
    assert (xt.shape, yt.shape) == ((10000, 28, 28), (10000,))
    assert set(np.unique(y)) == set(range(10))


def test_damaged_idx_file(tmp_path):
    bad = tmp_path / "x.gz"
    bad.write_bytes(gzip.compress(idx_bytes(np.zeros((4, 2))))[:-6])
    with pytest.raises(ValueError, match="unreadable IDX file"):
        fashion_mnist.read_idx(str(bad))


# -- CIFAR-10 --------------------------------------------------------------------

def cifar_batch(n, seed):
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
    labels = [int(v) for v in rng.integers(0, 10, n)]
    return pickle.dumps({b"batch_label": b"batch %d" % seed, b"labels": labels, b"data": data,
                         b"filenames": [b"img%d.png" % i for i in range(n)]}, protocol=2), data, labels


def write_cifar_tar(path, n=4):
    """A cifar-10-python.tar.gz of the real layout, with n images per batch."""
    batches = {}
    with tarfile.open(path, "w:gz") as tar:
        for seed, name in enumerate(cifar10.BATCHES):
            blob, data, labels = cifar_batch(n, seed)
            batches[name] = (data, labels)
            info = tarfile.TarInfo("cifar-10-batches-py/" + name)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    return batches


def test_cifar10_download_extract_and_layout(folders, monkeypatch, tmp_path):
    data, _ = folders
    archive = tmp_path / "cifar-10-python.tar.gz"
    batches = write_cifar_tar(archive)
    monkeypatch.setattr(cifar10, "ORIGIN", archive.as_uri())
    monkeypatch.setattr(cifar10, "SHA256", sha256(archive))
    (x, y), (xt, yt) = cifar10.load_data()
    assert (x.shape, x.dtype, y.shape, y.dtype) == ((20, 32, 32, 3), np.uint8, (20, 1), np.uint8)
    assert (xt.shape, yt.shape) == ((4, 32, 32, 3), (4, 1))
    first, labels = batches["data_batch_1"]
    # row layout: 1024 red, 1024 green, 1024 blue, each row-major
    assert x[1, 2, 3, 0] == first[1, 2 * 32 + 3] and x[1, 2, 3, 2] == first[1, 2048 + 2 * 32 + 3]
    assert y[:4, 0].tolist() == labels
    assert (data / "cifar-10-batches-py" / "test_batch").is_file()
    monkeypatch.setattr(cifar10, "ORIGIN", "https://unreachable.invalid/x.tar.gz")
    (x2, _), _ = cifar10.load_data()               # the extracted folder is reused
    np.testing.assert_array_equal(x, x2)


def test_cifar10_from_keras_extracted_folder(folders, tmp_path):
    _, keras = folders
    archive = tmp_path / "c.tar.gz"
    write_cifar_tar(archive, n=2)
    with tarfile.open(archive) as tar:       # filter: Python 3.11.4 and later
        tar.extractall(keras / "cifar-10-batches-py_extracted",
                       **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    (x, y), _ = cifar10.load_data()
    assert x.shape == (10, 32, 32, 3) and y.shape == (10, 1)


def test_cifar10_refuses_code_in_pickles_and_unsafe_archives(folders, tmp_path, monkeypatch):
    evil = tmp_path / "evil"
    evil.write_bytes(pickle.dumps({b"data": os.system, b"labels": []}, protocol=4))
    with pytest.raises(ValueError, match=r"refusing to load (posix|os)\.system"):
        cifar10.load_batch(str(evil))
    archive = tmp_path / "bad.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo("../escape")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    monkeypatch.setattr(cifar10, "ORIGIN", archive.as_uri())
    monkeypatch.setattr(cifar10, "SHA256", sha256(archive))
    with pytest.raises(ValueError, match="unsafe member '../escape'"):
        cifar10.load_data()
    assert not (tmp_path / "escape").exists()


# -- Imagenette --------------------------------------------------------------------

def write_imagenette(root, per_class=2):
    from PIL import Image
    rng = np.random.default_rng(0)
    for split in ("train", "val"):
        for c, wnid in enumerate(imagenette.CLASSES[:3]):
            folder = root / split / wnid
            folder.mkdir(parents=True)
            for i in range(per_class):
                size = (40 + 7 * i, 30 + 5 * c)               # various sizes and aspects
                pixels = rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
                Image.fromarray(pixels).save(folder / ("img%d.JPEG" % i))
            if c == 0:
                Image.fromarray(np.zeros((20, 20), np.uint8)).save(folder / "gray.JPEG")


def test_imagenette_reads_the_folder_tree_and_caches(folders):
    pytest.importorskip("PIL")
    data, _ = folders
    write_imagenette(data / "imagenette2-160")
    (x, y), (xv, yv) = imagenette.load_data(size=24)
    assert (x.shape, x.dtype, y.dtype) == ((7, 24, 24, 3), np.uint8, np.uint8)
    assert y.tolist() == [0, 0, 0, 1, 1, 2, 2] and xv.shape == (7, 24, 24, 3)
    assert (data / "imagenette2-160-24px.npz").is_file()
    import shutil
    shutil.rmtree(data / "imagenette2-160")
    (x2, _), _ = imagenette.load_data(size=24)      # from the cache
    np.testing.assert_array_equal(x, x2)


def test_imagenette_from_a_path(tmp_path):
    pytest.importorskip("PIL")
    write_imagenette(tmp_path / "tree", per_class=1)
    (x, y), _ = imagenette.load_data(size=16, path=str(tmp_path / "tree"))
    assert x.shape == (4, 16, 16, 3) and y.tolist() == [0, 0, 1, 2]
    with pytest.raises(ValueError, match="size: expected an int >= 1, got 0"):
        imagenette.load_data(size=0)
    with pytest.raises(ValueError, match="has no train/ folder"):
        imagenette.load_data(size=16, path=str(tmp_path))
