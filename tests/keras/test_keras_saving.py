"""Model files: save / load_model round trips, and clear errors for files
that are truncated, corrupted, of another version or not model files."""
import os
import struct

import numpy as np
import pytest

from cnncuda import saving
from cnncuda.keras import callbacks, layers, losses, models, optimizers


def trained(tmp_path=None):
    model = models.Sequential([
        layers.Conv2D(3, 3, padding="same", input_shape=(6, 6, 2)), layers.BatchNormalization(),
        layers.Activation("relu"), layers.MaxPooling2D(), layers.Dropout(0.25), layers.Flatten(),
        layers.Dense(4, activation="softmax")], name="net", seed=3)
    model.compile(optimizer=optimizers.Adam(learning_rate=0.01, beta_1=0.8),
                  loss=losses.SparseCategoricalCrossentropy(), metrics=["accuracy"], device="cpu")
    rng = np.random.default_rng(0)
    x, y = rng.random((24, 6, 6, 2)), rng.integers(0, 4, 24)
    model.fit(x, y, batch_size=8, epochs=2, verbose=0)
    return model, x, y


def test_round_trip(tmp_path):
    model, x, y = trained()
    path = tmp_path / "model.cnncuda"
    model.save(path)
    loaded = models.load_model(path, device="cpu")
    assert loaded.name == "net" and loaded.seed == 3
    assert [type(l).__name__ for l in loaded.layers] == [type(l).__name__ for l in model.layers]
    assert [l.name for l in loaded.layers] == [l.name for l in model.layers]
    for a, b in zip(loaded.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))
    assert loaded.optimizer.get_config() == model.optimizer.get_config()
    assert loaded.optimizer.iterations == model.optimizer.iterations == 6
    assert loaded.metrics_names == ["loss", "accuracy"]
    np.testing.assert_allclose(loaded.evaluate(x, y, verbose=0), model.evaluate(x, y, verbose=0),
                               rtol=1e-6)
    loaded.fit(x, y, batch_size=8, epochs=1, verbose=0)
    assert loaded.optimizer.iterations == 9
    assert os.listdir(tmp_path) == ["model.cnncuda"]          # no temporary file left


def test_uncompiled_model_and_weights_files(tmp_path):
    model = models.Sequential([layers.Dense(3, input_shape=(4,))], seed=1)
    model.save(tmp_path / "m")
    loaded = models.load_model(tmp_path / "m")
    assert loaded.loss is None
    np.testing.assert_array_equal(loaded.get_weights()[0], model.get_weights()[0])
    other = models.Sequential([layers.Dense(3, input_shape=(4,))], seed=2)
    other.load_weights(tmp_path / "m")
    np.testing.assert_array_equal(other.get_weights()[0], model.get_weights()[0])
    model.save_weights(tmp_path / "w")
    with pytest.raises(saving.ModelFileError, match="holds only weights"):
        models.load_model(tmp_path / "w")
    wrong = models.Sequential([layers.Dense(2, input_shape=(4,))])
    with pytest.raises(ValueError, match="do not match this model's"):
        wrong.load_weights(tmp_path / "w")
    with pytest.raises(FileExistsError, match="overwrite=False"):
        model.save(tmp_path / "m", overwrite=False)


@pytest.fixture
def saved(tmp_path):
    model, _, _ = trained()
    path = tmp_path / "model.cnncuda"
    model.save(path)
    return path, path.read_bytes()


def test_truncated_files(saved):
    path, data = saved
    for cut in (len(data) - 1, len(data) - 40, 200, 12, 3):
        path.write_bytes(data[:cut])
        with pytest.raises(saving.ModelFileError, match="truncated cnncuda model file"):
            models.load_model(path)


def test_corrupted_files(saved):
    path, data = saved
    flipped = bytearray(data)
    flipped[-100] ^= 0x40                                   # a weight bit
    path.write_bytes(bytes(flipped))
    with pytest.raises(saving.ModelFileError, match="corrupted .* checksum does not match"):
        models.load_model(path)
    path.write_bytes(data + b"\0")
    with pytest.raises(saving.ModelFileError, match="corrupted cnncuda model file: expected"):
        models.load_model(path)
    header_len = struct.unpack_from("<I", data, 12)[0]
    garbled = bytearray(data)
    garbled[16:16 + header_len] = b"{" * header_len
    path.write_bytes(bytes(garbled))
    with pytest.raises(saving.ModelFileError, match="unreadable header"):
        models.load_model(path)


def test_other_versions_and_other_files(saved, tmp_path):
    path, data = saved
    path.write_bytes(data[:8] + struct.pack("<I", 3) + data[12:])
    with pytest.raises(saving.ModelFileError, match="format version 3; this cnncuda reads versions 1 and 2 "
                                                    r"\(the file is newer: upgrade cnncuda\)"):
        models.load_model(path)
    path.write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 100)
    with pytest.raises(saving.ModelFileError, match="not a loadable Keras .h5 file"):
        models.load_model(path)
    path.write_bytes(b"")
    with pytest.raises(saving.ModelFileError, match="not a cnncuda model file"):
        models.load_model(path)
    with pytest.raises(FileNotFoundError):
        models.load_model(tmp_path / "missing")


def test_a_failed_write_leaves_the_old_file(saved, monkeypatch):
    path, data = saved
    model, _, _ = trained()

    def fail(*args):
        raise OSError("disk full")
    monkeypatch.setattr(saving.os, "fsync", fail)
    with pytest.raises(OSError, match="disk full"):
        model.save(path)
    assert path.read_bytes() == data
    assert os.listdir(path.parent) == [path.name]


def test_model_checkpoint(tmp_path, capsys):
    model, x, y = trained()
    checkpoint = callbacks.ModelCheckpoint(str(tmp_path / "m-{epoch:02d}-{loss:.2f}"),
                                           monitor="val_loss", verbose=1)
    best = callbacks.ModelCheckpoint(str(tmp_path / "best"), save_best_only=True,
                                     save_weights_only=True, monitor="loss", verbose=1)
    history = model.fit(x, y, epochs=2, batch_size=8, verbose=0, callbacks=[checkpoint, best])
    names = sorted(os.listdir(tmp_path))
    losses_ = history.history["loss"]
    assert names[:2] == ["best", "m-01-%.2f" % losses_[0]] and len(names) == 3
    out = capsys.readouterr().out
    assert "\nEpoch 1: saving model to %s" % (tmp_path / ("m-01-%.2f" % losses_[0])) in out
    assert "Epoch 1: loss improved from inf to %.5f, saving model to %s" % (
        losses_[0], tmp_path / "best") in out
    reloaded = models.load_model(tmp_path / ("m-02-%.2f" % losses_[1]))
    np.testing.assert_array_equal(reloaded.get_weights()[0], model.get_weights()[0])
