"""The functional API: keras.Input, layers called on KerasTensors,
keras.Model(inputs, outputs). A chain of layers is the Sequential model of
the same layers underneath: the same initial weights for one seed and the
same bits after training, on every engine; graphs that branch are refused
naming the layer."""
import json

import numpy as np
import pytest

import cnncuda
import cnncuda as tf
from cnncuda import keras
from cnncuda.keras import layers
from conftest import engine_params

RNG = np.random.default_rng(7)
X = RNG.random((37, 9, 9, 3)).astype(np.float32)
Y = RNG.integers(0, 5, 37)


def stack():
    """The layers of a small CNN, fresh."""
    return [layers.Conv2D(6, 3, activation="relu"), layers.BatchNormalization(),
            layers.MaxPooling2D(), layers.Flatten(), layers.Dropout(0.25),
            layers.Dense(16, activation="tanh"), layers.Dense(5)]


def functional(seed=3, name=None):
    inputs = keras.Input(shape=(9, 9, 3))
    x = inputs
    for layer in stack():
        x = layer(x)
    return keras.Model(inputs, x, name=name, seed=seed)


def sequential(seed=3):
    return keras.Sequential([keras.Input(shape=(9, 9, 3))] + stack(), seed=seed)


def compiled(model, device):
    model.compile(optimizer=keras.optimizers.Adam(0.01), metrics=["accuracy"], device=device,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def device_of(engine):
    return "omp:2" if engine == "omp" else engine


@pytest.mark.parametrize("engine", engine_params())
def test_a_chain_trains_as_its_sequential_twin_bit_for_bit(engine):
    device = device_of(engine)
    mine, twin = compiled(functional(), device), compiled(sequential(), device)
    assert all(np.array_equal(a, b) for a, b in zip(mine.get_weights(), twin.get_weights(),
                                                    strict=True))
    h1 = mine.fit(X, Y, batch_size=8, epochs=2, verbose=0, validation_split=0.2)
    h2 = twin.fit(X, Y, batch_size=8, epochs=2, verbose=0, validation_split=0.2)
    assert h1.history == h2.history
    for a, b in zip(mine.get_weights(), twin.get_weights(), strict=True):
        assert np.array_equal(a, b)
    assert np.array_equal(mine.predict(X, verbose=0), twin.predict(X, verbose=0))
    assert mine.evaluate(X, Y, verbose=0) == twin.evaluate(X, Y, verbose=0)
    assert mine.train_on_batch(X[:8], Y[:8]) == twin.train_on_batch(X[:8], Y[:8])


def test_the_keras_names_of_the_model():
    assert keras.Model is tf.keras.models.Model is tf.models.Model
    assert tf.keras.Input is layers.Input
    inputs = keras.Input(shape=(9, 9, 3), name="pixels")
    assert isinstance(inputs, cnncuda.symbolic.KerasTensor)
    assert inputs.shape == (None, 9, 9, 3) and inputs.dtype == "float32"
    x = layers.Conv2D(4, 3, name="c")(inputs)
    assert x.shape == (None, 7, 7, 4) and x.ndim == 4
    outputs = layers.Dense(3, name="d")(layers.Flatten(name="f")(x))
    model = keras.Model(inputs=inputs, outputs=[outputs], name="net")
    assert type(model).__name__ == "Functional" and isinstance(model, keras.Model)
    assert model._class_name == "Functional"
    assert [l.name for l in model.layers] == ["pixels", "c", "f", "d"]
    assert type(model.layers[0]).__name__ == "InputLayer"
    assert model.get_layer(index=1).name == "c" and model.get_layer("d").units == 3
    assert model.input is inputs and model.output is outputs
    assert model.inputs == [inputs] and model.outputs == [outputs]
    assert model.input_shape == (None, 9, 9, 3) and model.output_shape == (None, 3)
    assert model.count_params() == 3 * 3 * 3 * 4 + 4 + 7 * 7 * 4 * 3 + 3
    assert repr(model) == "<Functional name=net, 4 layers>"
    assert keras.Input(4).shape == (None, 4)
    assert keras.Input(batch_shape=(None, 28, 28)).shape == (None, 28, 28)
    lines = []
    model.summary(print_fn=lines.append)
    text = "\n".join(lines)
    assert 'Model: "net"' in text and "pixels (InputLayer)" in text
    assert "(None, 9, 9, 3)" in text and "d (Dense)" in text and "Total params: 703" in text


def test_input_in_a_sequential_and_keras_tensor_misuse():
    model = keras.Sequential([keras.Input((4,)), layers.Dense(2)])
    assert model.input_shape == (None, 4)
    t = keras.Input((4,))
    with pytest.raises(TypeError, match="symbolic"):
        bool(t)
    with pytest.raises(TypeError, match="symbolic"):
        np.asarray(t)
    with pytest.raises(ValueError, match="sparse"):
        keras.Input((4,), sparse=True)
    with pytest.raises(ValueError, match="shape: give shape or batch_shape"):
        keras.Input((4,), batch_shape=(None, 4))


def test_inference_training_and_files_of_a_functional_model(tmp_path):
    model = compiled(functional(seed=1, name="mine"), "cpu")
    model.fit(X, Y, batch_size=8, epochs=1, verbose=0)
    for path in (tmp_path / "m.cnn", tmp_path / "m.keras", tmp_path / "m.h5"):
        model.save(path)
        back = keras.models.load_model(path)
        assert back._class_name == "Functional" and back.name == "mine"
        assert [l.name for l in back.layers] == [l.name for l in model.layers]
        assert np.array_equal(back.predict(X, verbose=0), model.predict(X, verbose=0))
    # cnncuda's own format keeps the optimizer's state and counters: training goes on alike
    back = keras.models.load_model(tmp_path / "m.cnn")
    h1 = back.fit(X, Y, batch_size=8, epochs=1, verbose=0, shuffle=False)
    h2 = model.fit(X, Y, batch_size=8, epochs=1, verbose=0, shuffle=False)
    assert h1.history == h2.history
    assert all(np.array_equal(a, b) for a, b in zip(back.get_weights(), model.get_weights()))
    # get_config / from_config: the same architecture, fresh weights from the seed
    config = model.get_config()
    again = keras.Model.from_config(config)
    assert again._class_name == "Functional" and again.get_config() == config
    assert all(np.array_equal(a, b) for a, b in zip(again.get_weights(),
                                                    functional(seed=1).get_weights()))
    assert json.loads(keras.models.model_from_json(model.to_json()).to_json())["config"] \
        == json.loads(model.to_json())["config"]
    assert model(X[:3]).shape == (3, 5)
    model.save_weights(tmp_path / "w.cnn")
    fresh = functional(seed=9)
    fresh.load_weights(tmp_path / "w.cnn")
    assert np.array_equal(fresh.predict(X, verbose=0), model.predict(X, verbose=0))
    assert model.weights[0].path == "mine/%s/kernel" % model.layers[1].name
    kernel = model.layers[1].get_weights()[0]
    assert np.array_equal(model.weights[0].numpy(), kernel)


def residual_inception(seed=1, name=None, batchnorm=True):
    """A residual block (Conv2D, Conv2D, BatchNormalization, Add with the
    block's input, ReLU), then three branches joined along the channels,
    one of them the block's output itself."""
    inputs = keras.Input((9, 9, 3))
    x = layers.Conv2D(4, 3, padding="same", activation="relu")(inputs)
    y = layers.Conv2D(4, 3, padding="same", activation="relu")(x)
    y = layers.Conv2D(4, 3, padding="same")(y)
    if batchnorm:
        y = layers.BatchNormalization()(y)
    x = layers.ReLU()(layers.Add()([y, x]))
    a = layers.Conv2D(2, 1, activation="relu")(x)
    b = layers.Conv2D(3, 3, padding="same")(x)
    c = layers.MaxPooling2D(3, strides=1, padding="same")(x)
    x = layers.Concatenate()([a, b, c, x])
    x = layers.Dropout(0.2)(layers.GlobalAveragePooling2D()(x))
    return keras.Model(inputs, layers.Dense(5)(x), name=name, seed=seed)


@pytest.mark.parametrize("engine", engine_params())
def test_a_residual_inception_graph_trains_as_the_reference(engine):
    ref, mine = residual_inception(), residual_inception()
    for model, dev in ((ref, "numpy"), (mine, device_of(engine))):
        model.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9), device=dev,
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"])
    h_ref = ref.fit(X, Y, batch_size=8, epochs=2, verbose=0, shuffle=False)
    h = mine.fit(X, Y, batch_size=8, epochs=2, verbose=0, shuffle=False)
    gpu = 10 if engine in ("cuda", "cudnn") else 1      # cuDNN's algorithms round otherwise
    np.testing.assert_allclose(h.history["loss"], h_ref.history["loss"], rtol=1e-5 * gpu)
    for a, b in zip(mine.get_weights(), ref.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4 * gpu, atol=1e-5 * gpu)
    np.testing.assert_allclose(mine.predict(X, verbose=0), ref.predict(X, verbose=0),
                               rtol=1e-4 * gpu, atol=1e-5 * gpu)


def test_a_graph_model_in_its_own_files_and_config(tmp_path):
    model = residual_inception(name="graph")
    assert model._is_graph
    model.compile(optimizer="adam", device="cpu",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(X, Y, batch_size=8, epochs=1, verbose=0)
    assert [type(l).__name__ for l in model.layers][5:8] == ["Add", "ReLU", "Conv2D"]
    lines = []
    model.summary(print_fn=lines.append)
    text = "\n".join(lines)
    assert "Connected to" in text
    add = model.get_layer(index=5)
    assert any(("%s (Add)" % add.name) in line and "[0][0], " in line for line in lines)
    config = model.get_config()
    assert len(config["reads"]) == len(model.layers) - 1
    again = keras.Model.from_config(config)
    assert again.get_config() == config and again._is_graph
    from_json = keras.models.model_from_json(model.to_json())
    assert from_json._is_graph and from_json._reads == model._reads
    assert [l.name for l in from_json.layers] == [l.name for l in model.layers]
    model.save(tmp_path / "g.cnn")
    back = keras.models.load_model(tmp_path / "g.cnn")
    assert np.array_equal(back.predict(X, verbose=0), model.predict(X, verbose=0))
    h1 = back.fit(X, Y, batch_size=8, epochs=1, verbose=0, shuffle=False)
    h2 = model.fit(X, Y, batch_size=8, epochs=1, verbose=0, shuffle=False)
    assert h1.history == h2.history
    # a graph model inside another model, and a graph of models
    prob = keras.Sequential([model, layers.Softmax()])
    np.testing.assert_allclose(prob.predict(X, verbose=0).sum(axis=1), 1, rtol=1e-6)
    inputs = keras.Input((9, 9, 3))
    two = layers.Concatenate()([model(inputs), layers.Dense(3)(layers.Flatten()(inputs))])
    outer = keras.Model(inputs, layers.Dense(2)(two))
    assert outer.output_shape == (None, 2) and outer.predict(X, verbose=0).shape == (37, 2)


def test_graphs_keras_refuses_or_cnncuda_cannot_run_are_refused_naming_the_layer():
    a = keras.Input((4,))
    x = layers.Dense(4)(a)
    y = layers.Dense(4)(a)
    keras.Model(a, [x, y]).compile(optimizer="adam", loss="mse")  # test_several_outputs.py
    b = keras.Input((4,))
    # several inputs run (tests/keras/test_functional_multi.py); one the output
    # does not depend on is refused
    with pytest.raises(ValueError, match=r'inputs\[1\] \(".*"\): the output does not depend'):
        keras.Model([a, b], x)
    with pytest.raises(ValueError, match="Graph disconnected"):
        keras.Model(b, x)
    shared = layers.Dense(4, name="twice")
    with pytest.raises(ValueError, match='layer "twice" is called more than once'):
        keras.Model(a, shared(shared(a)))
    with pytest.raises(ValueError, match='layer "twice" is called more than once'):
        keras.Model(a, layers.Add()([shared(a), shared(x)]))
    images = keras.Input((5, 5, 3))
    cat = layers.Concatenate(axis=1, name="rows")([images, images])
    assert cat.shape == (None, 10, 5, 3)
    with pytest.raises(ValueError, match='layer "rows" \\(Concatenate\\): axis 1; the engines '
                                         "join tensors along their last axis"):
        keras.Model(images, cat)
    assert keras.Model(images, layers.Concatenate(axis=3)([images, images])).output_shape \
        == (None, 5, 5, 6)
    with pytest.raises(ValueError, match='Layer "sum" \\(Add\\): its inputs must have one shape'):
        layers.Add(name="sum")([x, layers.Dense(3)(a)])
    with pytest.raises(TypeError, match="or a subclass of keras.Model that defines call"):
        keras.Model()
    with pytest.raises(ValueError, match="expects a list of at least 2 inputs"):
        keras.Sequential([keras.Input((4,)), layers.Add()])
    with pytest.raises(ValueError, match='layer "d" expects one input tensor, got a list of 2'):
        layers.Dense(2, name="d")([x, y])
    with pytest.raises(TypeError, match='layer "dd" was called on ndarray'):
        layers.Dense(2, name="dd")(np.zeros((2, 4)))
    with pytest.raises(ValueError, match='Input 0 of layer "e" is incompatible'):
        layers.Dense(2, name="e")(keras.Input((3, 3, 1)))
    built = layers.Dense(2, name="built")
    built(a)
    with pytest.raises(ValueError, match='layer "built" was built for inputs of shape \\(None, 4\\) '
                                         "and is now called on \\(None, 5\\)"):
        built(keras.Input((5,)))
    # a functional graph's training= follows the model call's mode, as Keras 3
    # (tests/keras/test_fixed_training_mode.py)
    assert layers.Dropout(0.5, name="drop")(a, training=False).shape == (None, 4)
    assert layers.Dense(2)(a, training=False).shape == (None, 2)
    with pytest.raises(AttributeError, match="'Functional' object has no attribute 'add'"):
        keras.Model(a, x).add(layers.Dense(2))


def test_merge_layers_shapes_and_configs_match_keras():
    assert layers.Add().compute_output_shape([(5, 5, 3), (5, 5, 3)]) == (5, 5, 3)
    assert layers.Concatenate().compute_output_shape([(5, 5, 3), (5, 5, 2)]) == (5, 5, 5)
    assert layers.Concatenate(axis=1).compute_output_shape([(5, 5, 3), (2, 5, 3)]) == (7, 5, 3)
    with pytest.raises(ValueError, match="must match except on axis -1"):
        layers.Concatenate().compute_output_shape([(5, 5, 3), (4, 5, 2)])
    with pytest.raises(ValueError, match="one shape"):
        layers.Add().compute_output_shape([(5,), (4,)])
    assert layers.Concatenate(axis=2, name="c").get_config() == {"name": "c", "trainable": True,
                                                                 "axis": 2}


def test_a_graph_trains_data_parallel_as_one_network():
    # (without batchnorm: each replica normalises its share of the batch)
    from cnncuda import distribute
    one = residual_inception(seed=6, batchnorm=False)
    with distribute.MirroredStrategy(devices=["cpu", "cpu"]).scope():
        two = residual_inception(seed=6, batchnorm=False)
    for model in (one, two):
        model.compile(optimizer=keras.optimizers.SGD(0.05),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    h1 = one.fit(X, Y, batch_size=12, epochs=2, verbose=0, shuffle=False)
    h2 = two.fit(X, Y, batch_size=12, epochs=2, verbose=0, shuffle=False)
    assert isinstance(two._net, distribute.ReplicaGroup)
    np.testing.assert_allclose(h2.history["loss"], h1.history["loss"], rtol=1e-5)
    for a, b in zip(one.get_weights(), two.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
