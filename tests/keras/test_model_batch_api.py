"""train_on_batch, test_on_batch, predict_on_batch, model.weights and its
Variables, get_layer, to_json / model_from_json, tf.nn and clear_session
(#24): checked against fit, evaluate and predict on the NumPy reference
engine and on cpu, and Keras's messages where they are Keras's."""
import json
import warnings

import numpy as np
import pytest

import cnncuda as tf
from cnncuda.keras import backend, layers, losses, models, optimizers

ENGINES = ["numpy", "cpu"]


def tiny(seed=0, batchnorm=False):
    extra = [layers.BatchNormalization()] if batchnorm else []
    return models.Sequential([layers.Conv2D(2, 3, activation="relu", input_shape=(5, 6, 2)),
                              *extra, layers.Flatten(), layers.Dense(3)], seed=seed)


def compiled(device, metrics=("accuracy",), **kwargs):
    model = tiny(**kwargs)
    model.compile(optimizer="adam", loss=losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=list(metrics), device=device)
    return model


def data(n=40, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((n, 5, 6, 2)), rng.integers(0, 3, n)


def same_weights(a, b):
    return all(np.array_equal(p, q) for p, q in zip(a.get_weights(), b.get_weights(),
                                                     strict=True))


@pytest.mark.parametrize("device", ENGINES)
def test_train_on_batch_is_one_fit_step(device):
    x, y = data(8)
    one, other = compiled(device), compiled(device)
    result = one.train_on_batch(x, y)
    history = other.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    assert same_weights(one, other)
    assert isinstance(result, list) and len(result) == 2
    assert all(type(v) is float for v in result)
    np.testing.assert_allclose(result, [history.history["loss"][0],
                                        history.history["accuracy"][0]], rtol=1e-6)
    assert one.optimizer.iterations == 1
    logs = one.train_on_batch(x, y, return_dict=True)
    assert list(logs) == ["accuracy", "loss"] and one.optimizer.iterations == 2
    plain = compiled(device, metrics=())
    assert type(plain.train_on_batch(x, y)) is float


@pytest.mark.parametrize("device", ENGINES)
def test_test_and_predict_on_batch_are_evaluate_and_predict(device):
    x, y = data(12)
    model = compiled(device, batchnorm=True)
    model.fit(x, y, epochs=1, verbose=0)
    before = model.get_weights()
    np.testing.assert_allclose(model.test_on_batch(x, y), model.evaluate(x, y, verbose=0),
                               rtol=1e-6)
    assert model.test_on_batch(x, y, return_dict=True) == \
        model.evaluate(x, y, verbose=0, return_dict=True)
    np.testing.assert_array_equal(model.predict_on_batch(x), model.predict(x, verbose=0))
    assert model.predict_on_batch(x).dtype == np.float32
    assert all(np.array_equal(a, b) for a, b in zip(before, model.get_weights()))


@pytest.mark.parametrize("device", ENGINES)
def test_a_refused_batch_leaves_the_model_as_it_was(device):
    x, y = data(8)
    model = compiled(device)
    model.train_on_batch(x, y)
    before = model.get_weights()
    bad = x.copy()
    bad[3, 1, 1, 0] = np.nan
    cases = [(dict(x=bad, y=y), ValueError, r"x: expected finite values, got NaN at flat index"),
             (dict(x=x, y=np.full(8, 5)), ValueError, r"y: expected integer class labels in "
                                                      r"\[0, 3\), got 5"),
             (dict(x=x, y=y, sample_weight=np.ones((8, 2))), ValueError,
              r"sample_weight: expected shape \(8,\) \(a weight per sample\), got \(8, 2\)"),
             (dict(x=x, y=y, class_weight={"a": 2.0}), TypeError,
              r"class_weight: expected int class indices as keys, got 'a'"),
             (dict(x=x, y=y, return_dict="yes"), TypeError, r"return_dict: expected True or "
                                                            r"False, got 'yes'")]
    for arguments, error, message in cases:
        with pytest.raises(error, match=message):
            model.train_on_batch(**arguments)
        assert model.optimizer.iterations == 1
        assert all(np.array_equal(a, b) for a, b in zip(before, model.get_weights()))
    with pytest.raises(RuntimeError, match="compile"):
        tiny().train_on_batch(x, y)


@pytest.mark.parametrize("device", ENGINES)
def test_weights_are_variables_of_the_model(device):
    model = compiled(device, batchnorm=True)
    names = [v.name for v in model.weights]
    assert names == ["kernel", "bias", "gamma", "beta", "moving_mean", "moving_variance",
                     "kernel", "bias"]
    assert [v.path for v in model.weights][:2] == ["%s/%s/kernel" % (model.name,
                                                                     model.layers[0].name),
                                                   "%s/%s/bias" % (model.name,
                                                                   model.layers[0].name)]
    assert [v.name for v in model.non_trainable_weights] == ["moving_mean", "moving_variance"]
    assert len(model.trainable_weights) == 6
    for v, w in zip(model.weights, model.get_weights()):
        assert v.shape == w.shape and v.dtype == "float32"
        np.testing.assert_array_equal(v.numpy(), w)
        np.testing.assert_array_equal(np.asarray(v), w)
    kernel = model.weights[-2]
    x, y = data(8)
    model.fit(x, y, epochs=1, verbose=0)
    np.testing.assert_array_equal(kernel.numpy(), model.get_weights()[-2])  # follows training
    kernel.assign(np.ones(kernel.shape))
    np.testing.assert_array_equal(model.get_weights()[-2], np.ones(kernel.shape, np.float32))
    model.weights[-1].assign_add(np.full(3, 2.0))
    before = model.get_weights()
    with pytest.raises(ValueError, match=r"value: expected shape \(24, 3\) for .*got \(3,\)"):
        kernel.assign(np.ones(3))
    assert all(np.array_equal(a, b) for a, b in zip(before, model.get_weights()))
    assert models.Sequential().weights == []


def test_get_layer_by_name_and_index_with_keras_messages():
    model = tiny()
    assert model.get_layer(index=1) is model.layers[1]
    assert model.get_layer(model.layers[2].name) is model.layers[2]
    assert model.get_layer(index=-1) is model.layers[-1]
    names = [layer.name for layer in model.layers]
    for kwargs, message in [
            ({}, "Provide either a layer name or layer index at `get_layer`."),
            (dict(name="nope"), "No such layer: nope. Existing layers are: %s." % (names,)),
            (dict(index=3), "Was asked to retrieve layer at index 3 but model only has 3 "
                            "layers."),
            (dict(name="x", index=0), "Provide only a layer name or a layer index. Received: "
                                      "index=0, name='x'.")]:
        with pytest.raises(ValueError) as err:
            model.get_layer(**kwargs)
        assert str(err.value) == message
    with pytest.raises(TypeError, match="index: expected an int, got 1.5"):
        model.get_layer(index=1.5)


def test_to_json_and_model_from_json_round_trip():
    model = compiled("numpy", batchnorm=True)
    text = model.to_json()
    config = json.loads(text)
    assert config["class_name"] == "Sequential" and "compile_config" in config
    again = models.model_from_json(text)
    assert [type(l).__name__ for l in again.layers] == [type(l).__name__ for l in model.layers]
    def configs(m):
        return [{k: v for k, v in l.get_config().items() if k != "input_shape"}
                for l in m.layers]
    assert configs(again) == configs(model) and again.input_shape == model.input_shape
    assert again.loss.get_config() == model.loss.get_config()
    assert again.optimizer.get_config() == model.optimizer.get_config()
    assert again.metric_name == "accuracy"
    x, y = data(8)
    again.fit(x, y, epochs=1, verbose=0)
    assert "compile_config" not in json.loads(tiny().to_json())     # Keras leaves it out
    assert models.model_from_json(tiny().to_json()).loss is None
    assert json.loads(model.to_json(indent=2)) == config
    with pytest.raises(ValueError, match="json_string: expected JSON"):
        models.model_from_json("{not json")
    with pytest.raises(ValueError, match="json_string: expected a Sequential or functional "
                                         "model's JSON \\(class_name 'Sequential' or "
                                         "'Functional'\\), got class_name 'Subclassed'"):
        models.model_from_json(json.dumps({"class_name": "Subclassed", "config": {}}))
    with pytest.raises(ValueError, match="json_string: not a model cnncuda can build"):
        models.model_from_json(json.dumps({"class_name": "Functional", "config": {}}))
    with pytest.raises(TypeError, match="json_string: expected the str"):
        models.model_from_json(config)


def test_tf_nn_on_arrays():
    logits = np.array([[1.0, 2.0, 3.0], [1000.0, 0.0, -1000.0]], np.float32)
    score = tf.nn.softmax(logits)
    assert score.dtype == np.float32
    want = np.exp(logits[0] - 3.0) / np.exp(logits[0] - 3.0).sum()
    np.testing.assert_allclose(score[0], want, rtol=1e-6)
    np.testing.assert_allclose(score[1], [1, 0, 0])
    np.testing.assert_allclose(tf.nn.softmax(logits, axis=0).sum(axis=0), [1, 1, 1], rtol=1e-6)
    np.testing.assert_allclose(tf.nn.log_softmax(logits[:1]), np.log(want)[None], rtol=1e-5)
    assert tf.nn.softmax([1.0, 1.0]).tolist() == [0.5, 0.5]
    np.testing.assert_array_equal(tf.nn.relu(np.array([-1.0, 2.0])), [0.0, 2.0])
    s = tf.nn.sigmoid(np.array([-1000.0, 0.0, 1000.0]))
    np.testing.assert_array_equal(s, [0.0, 0.5, 1.0])
    np.testing.assert_allclose(tf.nn.tanh(np.array([0.5])), np.tanh([0.5]))
    with pytest.raises(TypeError, match="logits: expected an array of floats .* got dtype int64"):
        tf.nn.softmax(np.array([1, 2]))
    with pytest.raises(ValueError, match=r"axis: expected an axis in \[-2, 2\) .* got 2"):
        tf.nn.softmax(logits, axis=2)


def test_clear_session_restarts_names():
    backend.clear_session()
    first = layers.Dense(2).name
    assert layers.Dense(2).name == first + "_1"
    backend.clear_session(free_memory=False)
    assert layers.Dense(2).name == first
