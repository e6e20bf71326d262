"""Keras's own files: models saved by Keras 3 load here with Keras's
predictions (files Keras wrote, kept in tests/data/keras_files and made by
tools/make_keras_fixtures.py; and, where Keras is installed, made anew), and
models saved here as .keras and .h5 open in Keras with the same predictions.

Keras runs in a child process (JAX backend on the CPU): JAX must not be
imported into the test process, where it would take the GPU's memory."""
import os

import numpy as np
import pytest

import cnncuda as tf
from cnncuda.seeds import synthetic_data

from conftest import run_keras  # noqa: E402

pytest.importorskip("h5py")
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "keras_files")


@pytest.mark.parametrize("name", ["keras_cnn.keras", "keras_cnn.h5"])
def test_files_keras_wrote_load_with_its_predictions(name):
    x = np.load(os.path.join(HERE, "inputs.npy"))
    want = np.load(os.path.join(HERE, "keras_predictions.npy"))
    model = tf.keras.models.load_model(os.path.join(HERE, name))
    assert [type(l).__name__ for l in model.layers][-3:] == ["Dense", "Dense", "Activation"]
    np.testing.assert_allclose(model.predict(x, verbose=0), want, rtol=0, atol=2e-6)
    assert model.optimizer.kind == "adam" and np.isclose(model.optimizer.learning_rate, 0.01)
    assert model.metric_name == "accuracy"
    model.fit(x, np.zeros(len(x)), epochs=1, verbose=0)       # and trains on


def trained(tmp_path):
    x, y = synthetic_data("lenet5", 64)
    model = tf.keras.Sequential([
        tf.keras.layers.Conv2D(4, 3, activation="relu", input_shape=(28, 28, 1)),
        tf.keras.layers.BatchNormalization(), tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Flatten(), tf.keras.layers.Dropout(0.2), tf.keras.layers.Dense(10),
        tf.keras.layers.Activation("softmax")], seed=2)
    model.compile(optimizer=tf.keras.optimizers.Adam(0.01), metrics=["accuracy"],
                  loss="sparse_categorical_crossentropy")
    model.fit(x, y, epochs=2, verbose=0)
    return model, x[:8]


@pytest.mark.keras3
@pytest.mark.parametrize("ext", [".keras", ".h5"])
def test_a_model_saved_here_opens_in_keras(ext, tmp_path):
    model, x = trained(tmp_path)
    path = str(tmp_path / ("m" + ext))
    model.save(path)
    with open(path, "rb") as f:
        assert f.read(4) in (b"PK\x03\x04", b"\x89HDF")
    back = tf.keras.models.load_model(path)                 # and here again
    assert np.array_equal(back.predict(x, verbose=0), model.predict(x, verbose=0))
    np.save(tmp_path / "x.npy", x)
    run_keras("""
        import sys, numpy as np, keras
        model = keras.models.load_model(sys.argv[1])
        np.save(sys.argv[3], model.predict(np.load(sys.argv[2]), verbose=0))
    """, path, tmp_path / "x.npy", tmp_path / "theirs.npy")
    np.testing.assert_allclose(np.load(tmp_path / "theirs.npy"), model.predict(x, verbose=0),
                               rtol=0, atol=1e-6)


@pytest.mark.keras3
@pytest.mark.parametrize("ext", [".keras", ".h5"])
def test_a_model_keras_saves_now_loads_here(ext, tmp_path):
    x, y = synthetic_data("lenet5", 32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    path = str(tmp_path / ("k" + ext))
    run_keras("""
        import sys, numpy as np, keras
        keras.utils.set_random_seed(0)
        x, y = np.load(sys.argv[2]), np.load(sys.argv[3])
        model = keras.Sequential([keras.Input((28, 28, 1)),
                                  keras.layers.Conv2D(4, 3, activation="relu"),
                                  keras.layers.AveragePooling2D(2), keras.layers.Flatten(),
                                  keras.layers.Dense(10)])
        model.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.9), metrics=["accuracy"],
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.fit(x, y, epochs=1, verbose=0)
        model.save(sys.argv[1])
        np.save(sys.argv[4], model.predict(x[:8], verbose=0))
    """, path, tmp_path / "x.npy", tmp_path / "y.npy", tmp_path / "theirs.npy")
    mine = tf.keras.models.load_model(path)
    # The same weights, two implementations (XLA's convolution and ours sum in
    # other orders): float32 rounding apart, relative to the logits' size. Keras
    # seeded: its fit shuffles, and an unseeded run drew logits whose rounding
    # crossed a bound of 1e-6 alone once (1.5e-6).
    np.testing.assert_allclose(mine.predict(x[:8], verbose=0), np.load(tmp_path / "theirs.npy"),
                               rtol=1e-5, atol=1e-6)
    assert mine.optimizer.kind == "sgd" and mine.loss.from_logits


def test_what_cannot_load_is_a_model_file_error(tmp_path):
    path = tmp_path / "broken.keras"
    path.write_bytes(b"PK\x03\x04" + b"\0" * 40)
    with pytest.raises(tf.saving.ModelFileError, match="not a loadable Keras .keras file"):
        tf.keras.models.load_model(path)
    other = tmp_path / "own.cnn"
    model, x = trained(tmp_path)
    model.save(other)                                       # cnncuda's own format
    with open(other, "rb") as f:
        assert f.read(2) != b"PK"
    assert np.array_equal(tf.keras.models.load_model(other).predict(x, verbose=0),
                          model.predict(x, verbose=0))
