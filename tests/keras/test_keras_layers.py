"""Keras layers: arguments and defaults, shape inference and its errors,
summary(), names and parameter counts."""
import numpy as np
import pytest

from cnncuda.keras import backend, layers, models


@pytest.fixture(autouse=True)
def fresh_names():
    backend.clear_session()
    yield
    backend.clear_session()


def cifar_model():
    return models.Sequential([
        layers.Conv2D(32, (3, 3), activation="relu", input_shape=(32, 32, 3)),
        layers.MaxPooling2D((2, 2)),
        layers.Conv2D(64, (3, 3), activation="relu"),
        layers.MaxPooling2D((2, 2)),
        layers.Conv2D(64, (3, 3), activation="relu"),
        layers.Flatten(),
        layers.Dense(64, activation="relu"),
        layers.Dense(10),
    ])


KERAS_CIFAR_SUMMARY = """\
Model: "sequential"
_________________________________________________________________
Layer (type)                 Output Shape              Param #   
=================================================================
conv2d (Conv2D)              (None, 30, 30, 32)        896       
_________________________________________________________________
max_pooling2d (MaxPooling2D) (None, 15, 15, 32)        0         
_________________________________________________________________
conv2d_1 (Conv2D)            (None, 13, 13, 64)        18496     
_________________________________________________________________
max_pooling2d_1 (MaxPooling2 (None, 6, 6, 64)          0         
_________________________________________________________________
conv2d_2 (Conv2D)            (None, 4, 4, 64)          36928     
_________________________________________________________________
flatten (Flatten)            (None, 1024)              0         
_________________________________________________________________
dense (Dense)                (None, 64)                65600     
_________________________________________________________________
dense_1 (Dense)              (None, 10)                650       
=================================================================
Total params: 122,570
Trainable params: 122,570
Non-trainable params: 0
_________________________________________________________________
"""


def test_summary_is_keras_text(capsys):
    cifar_model().summary()
    assert capsys.readouterr().out == KERAS_CIFAR_SUMMARY


def test_summary_with_batchnorm_counts_non_trainable():
    model = models.Sequential([layers.Input(shape=(8, 8, 3)), layers.Conv2D(4, 3, padding="same"),
                               layers.BatchNormalization(), layers.ReLU(), layers.Dropout(0.5),
                               layers.AveragePooling2D(), layers.Flatten(), layers.Dense(2),
                               layers.Activation("softmax")])
    lines = []
    model.summary(print_fn=lines.append)
    # conv 3*3*3*4 + 4 = 112, batchnorm 4 * 4 = 16 (8 of them moving statistics),
    # dense (4*4*4) * 2 + 2 = 130
    assert lines[-4:-1] == ["Total params: 258", "Trainable params: 250",
                            "Non-trainable params: 8"]
    assert [l.name for l in model.layers] == ["conv2d", "batch_normalization", "re_lu", "dropout",
                                             "average_pooling2d", "flatten", "dense", "activation"]
    assert model.count_params() == 258
    assert model.layers[1].count_params() == 16
    assert model.output_shape == (None, 2)


def test_shapes_strides_and_padding():
    model = models.Sequential()
    model.add(layers.Conv2D(5, kernel_size=(3, 5), strides=2, padding="same", input_shape=(9, 10, 2)))
    model.add(layers.MaxPooling2D(pool_size=3, strides=1, padding="valid"))
    model.add(layers.AveragePooling2D(pool_size=2, padding="same"))
    assert [l.output_shape for l in model.layers] == [(None, 5, 5, 5), (None, 3, 3, 5),
                                                      (None, 2, 2, 5)]
    assert model.layers[0].input_shape == (None, 9, 10, 2)
    assert [w.shape for w in model.get_weights()] == [(3, 5, 2, 5), (5,)]


def test_deferred_build_from_data():
    model = models.Sequential([layers.Flatten(), layers.Dense(3)])
    assert not model.built and model.get_weights() == []
    with pytest.raises(ValueError, match="has not yet been built"):
        model.summary()
    out = model.predict(np.zeros((2, 4, 4, 1)), verbose=0)
    assert out.shape == (2, 3) and model.input_shape == (None, 4, 4, 1)
    other = models.Sequential([layers.Dense(3)])
    other.build((None, 7))
    assert other.get_weights()[0].shape == (7, 3)


SHAPE_ERRORS = [
    (lambda: [layers.Dense(4, input_shape=(5, 5, 2))],
     r'Input 0 of layer "dense" is incompatible with the layer: expected ndim=2 \(batch, '
     r'features\), found ndim=4. Full shape received: \(None, 5, 5, 2\). Add a Flatten'),
    (lambda: [layers.Flatten(input_shape=(5, 5, 2)), layers.Conv2D(3, 3)],
     r'Input 0 of layer "conv2d" is incompatible with the layer: expected ndim=4 .*found ndim=2. '
     r'Full shape received: \(None, 50\)'),
    (lambda: [layers.Conv2D(3, 7, input_shape=(5, 6, 2))],
     r'Layer "conv2d": kernel_size \(7, 7\) does not fit its input with padding \'valid\': '
     r'expected height and width >= \(7, 7\), got input shape \(None, 5, 6, 2\)'),
    (lambda: [layers.MaxPooling2D(4, input_shape=(3, 3, 1))],
     r'Layer "max_pooling2d": pool_size \(4, 4\) does not fit'),
    (lambda: [layers.Activation("softmax", input_shape=(3, 3, 1))],
     r'Layer "activation": softmax expects a \(batch, features\) input, got \(None, 3, 3, 1\)'),
]


@pytest.mark.parametrize("make,message", SHAPE_ERRORS)
def test_shape_errors_name_layer_expected_and_given(make, message):
    with pytest.raises(ValueError, match=message):
        models.Sequential(make())


def test_a_layer_that_does_not_fit_leaves_the_model_unchanged():
    model = models.Sequential([layers.Conv2D(2, 3, input_shape=(6, 6, 1)), layers.Flatten()])
    before = model.get_weights()
    with pytest.raises(ValueError, match="Add a Flatten|found ndim"):
        model.add(layers.Conv2D(2, 3))
    assert len(model.layers) == 2
    model.add(layers.Dense(3))
    assert [np.array_equal(a, b) for a, b in zip(model.get_weights(), before)] == [True, True]
    assert model.output_shape == (None, 3)


BAD_ARGUMENTS = [
    (lambda: layers.Conv2D(0, 3), ValueError, r"filters: expected an int >= 1, got 0"),
    (lambda: layers.Conv2D(2.5, 3), TypeError, r"filters: expected an int >= 1, got 2.5"),
    (lambda: layers.Conv2D(2, (3, 3, 3)), TypeError, r"kernel_size: expected an int or a tuple of 2"),
    (lambda: layers.Conv2D(2, 3, padding="full"), ValueError,
     r"padding: expected one of 'valid', 'same', got 'full'"),
    (lambda: layers.Conv2D(2, 3, activation="hard_swish"), ValueError,
     r"activation: expected one of 'linear', 'relu', 'sigmoid', 'tanh', 'softmax', 'elu', .*"
     r"'mish', got 'hard_swish'"),
    (lambda: layers.Conv2D(2, 3, dilation_rate=2), ValueError, r"dilation_rate: expected"),
    (lambda: layers.Conv2D(2, 3, kernel_initializer="he_normel"), ValueError,
     r"kernel_initializer: expected one of .*'he_normal'.*, got 'he_normel'"),
    (lambda: layers.Conv2D(2, 3, kernel_constraint="max_norm"), ValueError,
     r"kernel_constraint: expected None \(constraints are not supported\)"),
    (lambda: layers.Conv2D(2, 3, foo=1), TypeError, r"foo"),
    (lambda: layers.Dense(-1), ValueError, r"units: expected an int >= 1, got -1"),
    (lambda: layers.Dropout(1.0), ValueError, r"rate: expected a number in \[0, 1\), got 1.0"),
    (lambda: layers.Dropout(0.2, seed=3), ValueError, r"seed: expected None"),
    (lambda: layers.MaxPooling2D(0), ValueError, r"pool_size: expected values >= 1"),
    (lambda: layers.Dense(3, input_shape=(0, 2, 2)), ValueError, r"input_shape: expected"),
    (lambda: layers.BatchNormalization(axis=1 + 1), ValueError, r"axis: expected -1"),
    (lambda: models.Sequential([layers.Dense(2), "dense"]), TypeError,
     r"layer: expected a cnncuda layer"),
]


@pytest.mark.parametrize("make,error,message", BAD_ARGUMENTS)
def test_bad_layer_arguments(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_names_are_unique_like_keras():
    a, b = layers.Dense(2), layers.Dense(2)
    assert (a.name, b.name) == ("dense", "dense_1")
    model = models.Sequential([layers.Dense(2, name="x", input_shape=(3,))])
    with pytest.raises(ValueError, match='Name "x" is already the name of a layer'):
        model.add(layers.Dense(2, name="x"))
    with pytest.raises(ValueError, match="already belongs"):
        models.Sequential([model.layers[0]])


def test_layer_weights_and_config():
    model = models.Sequential([layers.Conv2D(2, 3, use_bias=False, input_shape=(4, 4, 1)),
                               layers.Flatten(), layers.Dense(3)])
    conv, _, dense = model.layers
    assert [w.shape for w in conv.get_weights()] == [(3, 3, 1, 2)]
    kernel, bias = dense.get_weights()
    dense.set_weights([kernel * 0 + 1, bias + 2])
    assert np.array_equal(model.get_weights()[1], np.ones((8, 3), np.float32))
    assert np.array_equal(model.get_weights()[2], np.full(3, 2, np.float32))
    with pytest.raises(ValueError, match=r"expected shape \(3,\), got \(4,\)"):
        dense.set_weights([kernel, np.zeros(4)])
    assert np.array_equal(model.get_weights()[2], np.full(3, 2, np.float32))
    assert conv.get_config() == {
        "name": conv.name, "trainable": True, "filters": 2, "kernel_size": [3, 3],
        "strides": [1, 1], "padding": "valid", "activation": "linear", "use_bias": False,
        "kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform",
                               "config": {"seed": None, "input_axes": None, "output_axes": None},
                               "registered_name": None},
        "bias_initializer": {"module": "keras.initializers", "class_name": "Zeros",
                             "config": {}, "registered_name": None},
        "kernel_regularizer": None, "bias_regularizer": None, "input_shape": [4, 4, 1]}


def test_pop_keeps_the_other_weights():
    model = models.Sequential([layers.Dense(4, input_shape=(3,)), layers.Dense(2)])
    first = model.get_weights()[:2]
    model.pop()
    model.add(layers.Dense(5))
    weights = model.get_weights()
    assert all(np.array_equal(a, b) for a, b in zip(weights[:2], first))
    assert weights[2].shape == (4, 5)
