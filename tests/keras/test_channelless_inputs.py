"""Images without a channel axis, as TensorFlow's basic classification
tutorial and most first MNIST lessons give them: ``Flatten(input_shape=(28,
28))`` on arrays of shape (n, 28, 28). The engine takes such an image as one
row of `height` pixels by `width` channels (models.Sequential._engine_input_shape),
so Flatten gives Keras's order and BatchNormalization normalises the last
axis, as Keras does; the layers Keras itself refuses on such inputs
(Conv2D, pooling) are refused, and Dense, which Keras would apply to the last
axis, asks for a Flatten."""
import numpy as np
import pytest

from cnncuda import keras
from conftest import engine_params

RNG = np.random.default_rng(0)
X = RNG.random((90, 7, 5)).astype(np.float32)
Y = RNG.integers(0, 4, 90)


def tutorial_model(device, first=None):
    first = first or keras.layers.Flatten(input_shape=(7, 5))
    model = keras.Sequential([first, keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dense(4)], seed=1)
    model.compile(optimizer="adam", metrics=["accuracy"], device=device,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


@pytest.mark.parametrize("engine", engine_params())
def test_the_tutorial_model_matches_the_numpy_engine(engine):
    got, want = tutorial_model(engine), tutorial_model("numpy")
    assert got.input_shape == (None, 7, 5) and got.output_shape == (None, 4)
    assert [w.shape for w in got.get_weights()] == [(35, 16), (16,), (16, 4), (4,)]
    h_got = got.fit(X, Y, batch_size=16, epochs=2, validation_split=0.2, verbose=0).history
    h_want = want.fit(X, Y, batch_size=16, epochs=2, validation_split=0.2, verbose=0).history
    for key in h_want:
        np.testing.assert_allclose(h_got[key], h_want[key], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got.evaluate(X, Y, verbose=0), want.evaluate(X, Y, verbose=0),
                               rtol=1e-4)
    np.testing.assert_allclose(got.predict(X, verbose=0), want.predict(X, verbose=0),
                               rtol=1e-4, atol=1e-5)


def test_flatten_keeps_keras_order():
    """Dense after Flatten sees pixel (i, j) at input i * width + j."""
    model = tutorial_model("cpu")
    w = [np.zeros_like(a) for a in model.get_weights()]
    w[0][2 * 5 + 3, 0] = 1.0          # unit 0 reads pixel (2, 3)
    w[2][0, 0] = 1.0                  # output 0 is unit 0
    model.set_weights(w)
    np.testing.assert_allclose(model.predict(X, verbose=0)[:, 0], X[:, 2, 3], rtol=1e-6)


def test_batch_normalization_normalises_the_last_axis():
    model = keras.Sequential([keras.layers.BatchNormalization(input_shape=(7, 5), epsilon=1e-3),
                              keras.layers.Flatten()], seed=2)
    gamma, beta = RNG.random(5).astype(np.float32) + 0.5, RNG.random(5).astype(np.float32)
    mean, var = RNG.random(5).astype(np.float32), RNG.random(5).astype(np.float32) + 0.1
    assert [a.shape for a in model.get_weights()] == [(5,)] * 4
    model.set_weights([gamma, beta, mean, var])
    want = gamma * (X - mean) / np.sqrt(var + 1e-3) + beta          # over the last axis
    np.testing.assert_allclose(model.predict(X, verbose=0), want.reshape(90, 35), rtol=1e-5,
                               atol=1e-6)
    model.add(keras.layers.Dense(4))
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    model.fit(X, Y, batch_size=90, epochs=1, verbose=0)
    # a training step's batch statistics over the batch and the rows, per last-axis entry
    momentum = 0.99
    np.testing.assert_allclose(model.get_weights()[2],
                               momentum * mean + (1 - momentum) * X.mean(axis=(0, 1)), rtol=1e-5)


def test_a_model_builds_from_channelless_data_and_inputs():
    model = keras.Sequential([keras.layers.Flatten(), keras.layers.Dense(4)], seed=3)
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    model.fit(X, Y, verbose=0)
    assert model.input_shape == (None, 7, 5)
    other = keras.Sequential([keras.Input(shape=(7, 5)), keras.layers.Flatten(),
                              keras.layers.Dense(3)], seed=3)
    assert other.input_shape == (None, 7, 5)
    other.build((None, 7, 5))


def test_layers_keras_refuses_are_refused_and_arrays_checked():
    with pytest.raises(ValueError, match=r"expected ndim=4 \(batch, height, width, channels\), "
                                         r"found ndim=3"):
        keras.Sequential([keras.layers.Conv2D(2, 3, input_shape=(7, 5))])
    with pytest.raises(ValueError, match="found ndim=3.*Add a Flatten layer before it"):
        keras.Sequential([keras.layers.Dense(2, input_shape=(7, 5))])
    with pytest.raises(ValueError, match=r"input_shape: expected \(height, width, channels\), "
                                         r"\(height, width\) or \(features,\), got \(2, 3, 4, 5\)"):
        keras.layers.Flatten(input_shape=(2, 3, 4, 5))
    model = tutorial_model("cpu")
    with pytest.raises(ValueError, match="x: expected"):
        model.predict(X.reshape(90, 7, 5, 1), verbose=0)
    with pytest.raises(ValueError, match="x: expected"):
        model.fit(X.reshape(90, 35), Y, verbose=0)


@pytest.mark.parametrize("suffix", [".cnncuda", ".keras", ".h5"])
def test_saved_and_loaded(tmp_path, suffix):
    if suffix == ".h5":
        pytest.importorskip("h5py")
    model = tutorial_model("cpu")
    model.fit(X, Y, epochs=1, verbose=0)
    path = str(tmp_path / ("m" + suffix))
    model.save(path)
    back = keras.models.load_model(path)
    assert back.input_shape == (None, 7, 5)
    np.testing.assert_array_equal(back.predict(X, verbose=0), model.predict(X, verbose=0))
