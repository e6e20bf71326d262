"""Models used as layers: TensorFlow's basic classification tutorial's
probability model ``Sequential([model, layers.Softmax()])``, and a model
called on a tensor inside a functional model. The inner model's weights are
shared with the outer one, as in Keras: training either changes the other's
predictions."""
import numpy as np
import pytest

from cnncuda import keras
from cnncuda.keras import layers
from conftest import engine_params

RNG = np.random.default_rng(11)
X = RNG.random((40, 28, 28)).astype(np.float32)
Y = RNG.integers(0, 10, 40)


def softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def tutorial_model(device, seed=0):
    """The tutorial's model (channel-less 28x28 images)."""
    model = keras.Sequential([layers.Flatten(input_shape=(28, 28)),
                              layers.Dense(32, activation="relu"), layers.Dense(10)], seed=seed)
    model.compile(optimizer="adam", metrics=["accuracy"], device=device,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


@pytest.mark.parametrize("engine", engine_params())
def test_the_tutorials_probability_model(engine):
    device = "omp:2" if engine == "omp" else engine
    model = tutorial_model(device)
    model.fit(X, Y, epochs=2, batch_size=8, verbose=0)
    probability_model = keras.Sequential([model, layers.Softmax()])
    assert probability_model.input_shape == (None, 28, 28)
    assert probability_model.output_shape == (None, 10)
    assert [type(l).__name__ for l in probability_model.layers] == ["Sequential", "Softmax"]
    assert probability_model.count_params() == model.count_params()
    with keras_device(device):
        p = probability_model.predict(X, verbose=0)
    logits = model.predict(X, verbose=0)
    np.testing.assert_allclose(p, softmax(logits.astype(np.float64)), rtol=1e-5, atol=1e-6)
    # training the inner model changes the probability model's predictions
    model.fit(X, Y, epochs=1, batch_size=8, verbose=0)
    with keras_device(device):
        p2 = probability_model.predict(X, verbose=0)
    assert not np.array_equal(p, p2)
    np.testing.assert_allclose(p2, softmax(model.predict(X, verbose=0).astype(np.float64)),
                               rtol=1e-5, atol=1e-6)
    # and training the outer model changes the inner one's
    probability_model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy",
                              device=device)
    probability_model.fit(X, Y, epochs=1, batch_size=8, verbose=0)
    for a, b in zip(model.get_weights(), probability_model.get_weights(), strict=True):
        assert np.array_equal(a, b)
    np.testing.assert_allclose(probability_model.predict(X, verbose=0),
                               softmax(model.predict(X, verbose=0).astype(np.float64)),
                               rtol=1e-5, atol=1e-6)


def keras_device(device):
    import cnncuda
    return cnncuda.device(device)


def test_a_model_called_inside_a_functional_model_shares_its_weights():
    inner_in = keras.Input((6,))
    inner = keras.Model(inner_in, layers.Dense(3, name="shared")(
        layers.Dense(8, activation="relu", name="hidden")(inner_in)), name="inner", seed=1)
    inputs = keras.Input((6,))
    outputs = layers.Dense(2, name="head")(inner(inputs))
    outer = keras.Model(inputs, outputs, name="outer", seed=2)
    assert [l.name for l in outer.layers] == [inputs.name, "inner", "head"]
    assert outer.count_params() == inner.count_params() + 3 * 2 + 2
    assert [v.path for v in outer.weights] == ["outer/hidden/kernel", "outer/hidden/bias",
                                               "outer/shared/kernel", "outer/shared/bias",
                                               "outer/head/kernel", "outer/head/bias"]
    x = RNG.random((30, 6)).astype(np.float32)
    y = RNG.integers(0, 2, 30)
    # the outer model starts from the inner one's weights
    for a, b in zip(inner.get_weights(), outer.get_weights()[:4], strict=True):
        assert np.array_equal(a, b)
    outer.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(True),
                  device="cpu")
    before = inner.predict(x, verbose=0)
    outer.fit(x, y, epochs=2, batch_size=8, verbose=0)
    after = inner.predict(x, verbose=0)
    assert not np.array_equal(before, after)
    for a, b in zip(inner.get_weights(), outer.get_weights()[:4], strict=True):
        assert np.array_equal(a, b)
    # set_weights on the inner model reaches the outer one, and a layer's too
    inner.set_weights([np.zeros_like(w) for w in inner.get_weights()])
    assert not outer.get_weights()[0].any()
    inner.get_layer("shared").set_weights([np.ones((8, 3)), np.ones(3)])
    assert outer.get_layer("inner").get_layer("shared").get_weights()[1].tolist() == [1, 1, 1]
    assert np.array_equal(outer.get_weights()[3], np.ones(3, np.float32))
    # the encoder of an autoencoder: two models of one graph share its layers
    a = keras.Input((6,))
    code = layers.Dense(2, name="code")(a)
    encoder = keras.Model(a, code, seed=4)
    autoencoder = keras.Model(a, layers.Dense(6)(code), seed=5)
    autoencoder.compile(optimizer="adam", loss="binary_crossentropy", device="cpu")
    start = encoder.predict(x, verbose=0)
    autoencoder.fit(x, x, epochs=1, batch_size=8, verbose=0)
    assert not np.array_equal(start, encoder.predict(x, verbose=0))
    assert np.array_equal(encoder.get_weights()[0], autoencoder.get_weights()[0])


def test_nested_models_in_files_and_errors(tmp_path):
    model = tutorial_model("cpu", seed=3)
    model.fit(X, Y, epochs=1, batch_size=8, verbose=0)
    prob = keras.Sequential([model, layers.Softmax()], name="prob")
    want = prob.predict(X, verbose=0)
    prob.save(tmp_path / "p.cnn")
    back = keras.models.load_model(tmp_path / "p.cnn")
    assert [type(l).__name__ for l in back.layers] == ["Sequential", "Softmax"]
    assert np.array_equal(back.predict(X, verbose=0), want)
    lines = []
    prob.summary(print_fn=lines.append)
    assert any(line.startswith("%s (Sequential)" % model.name) for line in lines)
    with pytest.raises(ValueError, match="cannot be a layer of itself"):
        prob.add(prob)
    with pytest.raises(ValueError, match="shares layers with model"):
        keras.Sequential([model, model])
    with pytest.raises(ValueError, match="Input 0 of model .* is incompatible with it: expected "
                                         "shape \\(None, 28, 28\\), got \\(None, 5\\)"):
        model(keras.Input((5,)))
    # pop keeps what training the outer model gave the inner one
    prob.compile(optimizer="sgd", loss="sparse_categorical_crossentropy", device="cpu")
    prob.fit(X, Y, epochs=1, batch_size=8, verbose=0)
    trained = prob.get_weights()
    prob.pop()
    prob.pop()
    for a, b in zip(model.get_weights(), trained, strict=True):
        assert np.array_equal(a, b)
