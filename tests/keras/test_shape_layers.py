"""Rescaling, Reshape, ZeroPadding2D, Cropping2D, UpSampling2D and
SpatialDropout2D as Keras layers: their configs and output shapes against
Keras 3's; a model with every one of them trained on every engine against
the numpy engine; saved in cnncuda's format and in Keras's files, whose
predictions Keras 3 reproduces (a Reshape after a convolution, and to an
image before one, in Keras's element order); a model Keras saved with them
loads here with Keras's predictions; what the engines cannot run is
refused, naming the argument."""
import json

import numpy as np
import pytest

import cnncuda
from cnncuda import keras
from conftest import engine_params

L = keras.layers
RNG = np.random.default_rng(0)
X = RNG.integers(0, 256, (12, 9, 8, 1)).astype(np.float32)
Y = RNG.integers(0, 4, 12)

# (class, arguments, input shape): Keras's configs and output shapes
CASES = [
    ("Rescaling", {"scale": 1 / 255}, (28, 28, 1)),
    ("Rescaling", {"scale": 2.0, "offset": -1.0}, (5,)),
    ("Rescaling", {"scale": 0.5, "offset": 0.25}, (6, 7)),
    ("Rescaling", {"scale": [1.0, 2.0], "offset": [0.0, -1.0]}, (4, 4, 2)),
    ("Rescaling", {"scale": [0.5, 2.0, 4.0]}, (3,)),
    ("Reshape", {"target_shape": (4, -1)}, (2, 3, 4)),
    ("Reshape", {"target_shape": (24,)}, (2, 3, 4)),
    ("Reshape", {"target_shape": (-1, 2, 3)}, (12,)),
    ("Reshape", {"target_shape": (3, 2, 2)}, (4, 3)),
    ("ZeroPadding2D", {}, (5, 6, 2)),
    ("ZeroPadding2D", {"padding": 2}, (5, 6, 2)),
    ("ZeroPadding2D", {"padding": (1, 3)}, (5, 6, 2)),
    ("ZeroPadding2D", {"padding": ((1, 2), (3, 0))}, (5, 6, 2)),
    ("Cropping2D", {}, (5, 6, 2)),
    ("Cropping2D", {"cropping": 1}, (5, 6, 2)),
    ("Cropping2D", {"cropping": (2, 0)}, (5, 6, 2)),
    ("Cropping2D", {"cropping": ((1, 2), (0, 3))}, (7, 8, 3)),
    ("UpSampling2D", {}, (5, 6, 2)),
    ("UpSampling2D", {"size": (3, 1)}, (5, 6, 2)),
    ("UpSampling2D", {"size": 3}, (2, 2, 1)),
    ("UpSampling2D", {"size": (2, 3), "interpolation": "bilinear"}, (4, 5, 2)),
    ("SpatialDropout2D", {"rate": 0.3}, (5, 6, 2)),
]


def _plain(value):
    return json.loads(json.dumps(value))


@pytest.mark.keras3
def test_configs_and_output_shapes_are_keras():
    from data.test_keras_files import run_keras
    out = run_keras("""
        import json, keras
        cases = %r
        rows = []
        for name, kwargs, shape in cases:
            layer = getattr(keras.layers, name)(**kwargs)
            rows.append([layer.get_config(), list(layer.compute_output_shape((None,) + shape))])
        print(json.dumps(rows))
    """ % (CASES,))
    theirs = json.loads(out.strip().splitlines()[-1])
    for (name, kwargs, shape), (config, out_shape) in zip(CASES, theirs):
        model = keras.Sequential([getattr(L, name)(input_shape=shape, **kwargs)])
        layer = model.layers[0]
        assert list(model.output_shape) == out_shape, (name, kwargs)
        mine = _plain(layer.get_config())
        assert mine.pop("input_shape") == list(shape)
        assert mine.pop("name") == layer.name
        for key, value in mine.items():
            assert value == config[key], (name, kwargs, key)
        again = type(layer).from_config(layer.get_config())
        assert _plain(again.get_config()) == _plain(layer.get_config())


def every_layer_model(engine="cpu"):
    """Each layer once: a Reshape after a convolution (to another image and
    to features) and to an image before one; a channel-less (5, 4) shape."""
    model = keras.Sequential([
        L.Rescaling(1 / 255, offset=-0.5, input_shape=(9, 8, 1)),
        L.ZeroPadding2D(((1, 0), (2, 1))),                 # (10, 11, 1)
        L.Conv2D(4, 3, activation="relu"),                 # (8, 9, 4)
        L.Cropping2D(((1, 1), (0, 1))),                    # (6, 8, 4)
        L.Reshape((12, 4, 4)),
        L.Conv2D(2, 3),                                    # (10, 2, 2)
        L.UpSampling2D((1, 2)),                            # (10, 4, 2)
        L.UpSampling2D((2, 1), interpolation="bilinear"),  # (20, 4, 2)
        L.SpatialDropout2D(0.3),
        L.Reshape((-1,)),                                  # (160,)
        L.Dense(20),
        L.Reshape((5, 4)),
        L.Reshape((4, 5, 1)),
        L.Conv2D(3, 2, activation="tanh"),                 # (3, 4, 3)
        L.Flatten(),
        L.Dense(4),
        L.Softmax()], seed=3)
    model.compile(optimizer=keras.optimizers.Adam(0.01), metrics=["accuracy"], device=engine,
                  loss="sparse_categorical_crossentropy")
    return model


@pytest.mark.parametrize("engine", engine_params())
def test_a_model_with_every_layer_trains_as_on_the_numpy_engine(engine):
    got, want = every_layer_model(engine), every_layer_model("numpy")
    h_got = got.fit(X, Y, batch_size=4, epochs=3, verbose=0).history
    h_want = want.fit(X, Y, batch_size=4, epochs=3, verbose=0).history
    np.testing.assert_allclose(h_got["loss"], h_want["loss"], rtol=1e-4)
    assert h_got["loss"][-1] < h_got["loss"][0]
    for a, b in zip(got.get_weights(), want.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(got.predict(X, verbose=0), want.predict(X, verbose=0),
                               rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("ext", [pytest.param(".keras", marks=pytest.mark.keras3),
                                 pytest.param(".h5", marks=pytest.mark.keras3), ".cnncuda"])
def test_saved_here_loads_here_and_in_keras_with_the_same_predictions(ext, tmp_path):
    if ext != ".cnncuda":
        pytest.importorskip("h5py")
    model = every_layer_model()
    model.fit(X, Y, batch_size=4, epochs=1, verbose=0)
    path = str(tmp_path / ("m" + ext))
    model.save(path)
    back = keras.models.load_model(path)
    def configs(m):
        return [{k: v for k, v in _plain(l.get_config()).items() if k != "input_shape"}
                for l in m.layers]
    assert configs(back) == configs(model)
    mine = model.predict(X, verbose=0)
    np.testing.assert_array_equal(back.predict(X, verbose=0), mine)
    if ext == ".cnncuda":
        return
    from data.test_keras_files import run_keras
    np.save(tmp_path / "x.npy", X)
    run_keras("""
        import sys, numpy as np, keras
        model = keras.models.load_model(sys.argv[1])
        np.save(sys.argv[3], model.predict(np.load(sys.argv[2]), verbose=0))
    """, path, tmp_path / "x.npy", tmp_path / "theirs.npy")
    np.testing.assert_allclose(np.load(tmp_path / "theirs.npy"), mine, rtol=0, atol=2e-6)


@pytest.mark.keras3
def test_a_model_keras_saves_with_them_loads_here(tmp_path):
    pytest.importorskip("h5py")
    from data.test_keras_files import run_keras
    x = RNG.random((5, 6, 7, 2)).astype(np.float32) * 255
    np.save(tmp_path / "x.npy", x)
    path = str(tmp_path / "k.keras")
    run_keras("""
        import sys, numpy as np, keras
        keras.utils.set_random_seed(1)
        L = keras.layers
        model = keras.Sequential([keras.Input((6, 7, 2)), L.Rescaling(1 / 127.5, offset=-1),
                                  L.ZeroPadding2D((1, 2)), L.Conv2D(3, 3, activation="relu"),
                                  L.Cropping2D(((0, 1), (1, 1))), L.UpSampling2D(2),
                                  L.UpSampling2D((1, 3), interpolation="bilinear"),
                                  L.SpatialDropout2D(0.5), L.Reshape((-1, 3)),
                                  L.Reshape((14, 30, -1)), L.Conv2D(2, (2, 3)), L.Reshape((728,)),
                                  L.Dense(5, activation="softmax")])
        model.save(sys.argv[1])
        np.save(sys.argv[3], model.predict(np.load(sys.argv[2]), verbose=0))
    """, path, tmp_path / "x.npy", tmp_path / "theirs.npy")
    mine = keras.models.load_model(path)
    assert [type(l).__name__ for l in mine.layers][:8] == [
        "Rescaling", "ZeroPadding2D", "Conv2D", "Cropping2D", "UpSampling2D", "UpSampling2D",
        "SpatialDropout2D", "Reshape"]
    assert mine.layers[5].interpolation == "bilinear"
    np.testing.assert_allclose(mine.predict(x, verbose=0), np.load(tmp_path / "theirs.npy"),
                               rtol=0, atol=2e-6)


@pytest.mark.parametrize("engine", engine_params())
def test_each_layer_is_numpys_operation(engine):
    x = RNG.standard_normal((3, 5, 6, 2)).astype(np.float32)
    cases = [
        (L.Rescaling(1 / 255, offset=0.5), x * np.float32(1 / 255) + np.float32(0.5)),
        (L.Reshape((6, 10)), x.reshape(3, 6, 10)),
        (L.Reshape((2, 15, 2)), x.reshape(3, 2, 15, 2)),
        (L.ZeroPadding2D(((1, 2), (0, 3))), np.pad(x, ((0, 0), (1, 2), (0, 3), (0, 0)))),
        (L.Cropping2D(((1, 2), (0, 3))), x[:, 1:3, 0:3, :]),
        (L.UpSampling2D((2, 3)), x.repeat(2, axis=1).repeat(3, axis=2)),
        (L.UpSampling2D((1, 1), interpolation="bilinear"), x),
        (L.SpatialDropout2D(0.5), x),                      # inference: the identity
    ]
    for layer, want in cases:
        model = keras.Sequential([keras.Input((5, 6, 2)), layer])
        with cnncuda.device(engine):
            got = model.predict(x, verbose=0)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=0, err_msg=layer.name)


def test_arguments_are_checked():
    with pytest.raises(ValueError, match=r"scale: expected 1 value or one per channel of the "
                                         r"input's last axis \(3\), got 2"):
        keras.Sequential([L.Rescaling([1.0, 2.0], input_shape=(4, 4, 3))])
    with pytest.raises(ValueError, match="offset: expected a number or a 1-D sequence"):
        L.Rescaling(1.0, offset=np.zeros((2, 2)))
    with pytest.raises(ValueError, match=r"scale: expected a number in \[-inf, inf\], got nan"):
        L.Rescaling([1.0, float("nan")])
    with pytest.raises(TypeError, match="scale: expected a number or a sequence of numbers, "
                                        "got 'x'"):
        L.Rescaling("x")
    with pytest.raises(ValueError, match=r"interpolation: expected 'nearest' or 'bilinear' "
                                         r"\(the engines' interpolations\), got 'bicubic'"):
        L.UpSampling2D(interpolation="bicubic")
    with pytest.raises(ValueError, match="interpolation: expected one of"):
        L.UpSampling2D(interpolation="cubic")
    with pytest.raises(ValueError, match="target_shape: expected at most one -1"):
        L.Reshape((-1, -1))
    with pytest.raises(ValueError, match="target_shape: expected 1, 2 or 3 axes"):
        L.Reshape((1, 2, 3, 4))
    with pytest.raises(ValueError, match="target_shape: expected a tuple of positive ints"):
        L.Reshape((0, 3))
    with pytest.raises(ValueError, match=r"The total size of the tensor must be unchanged. "
                                         r"Received: input_shape=\(2, 3, 4\), "
                                         r"target_shape=\(5, -1\)"):
        keras.Sequential([L.Reshape((5, -1), input_shape=(2, 3, 4))])
    with pytest.raises(ValueError, match="padding: expected an int, a tuple of 2 ints"):
        L.ZeroPadding2D(((1, 2, 3), (1, 1)))
    with pytest.raises(ValueError, match="cropping: expected an int >= 0|cropping: expected"):
        L.Cropping2D(-1)
    with pytest.raises(ValueError, match=r'Layer "cropping2d.*": cropping \(\(3, 3\), \(0, 0\)\)'
                                         r" leaves no pixel of its input"):
        keras.Sequential([L.Cropping2D(((3, 3), (0, 0)), input_shape=(6, 5, 1))])
    with pytest.raises(ValueError, match="seed: expected None"):
        L.SpatialDropout2D(0.2, seed=4)
    with pytest.raises(ValueError, match=r"rate: expected a number in \[0, 1\)"):
        L.SpatialDropout2D(1.0)
    with pytest.raises(ValueError, match="data_format: expected None or 'channels_last'"):
        L.ZeroPadding2D(data_format="channels_first")
    for layer in (L.ZeroPadding2D(), L.Cropping2D(), L.UpSampling2D(), L.SpatialDropout2D(0.1)):
        with pytest.raises(ValueError, match=r"expected ndim=4 \(batch, height, width, "
                                             r"channels\), found ndim=2"):
            keras.Sequential([keras.Input((5,)), layer])


@pytest.mark.keras3
@pytest.mark.parametrize("engine", engine_params())
def test_per_channel_rescaling_is_keras(engine, tmp_path):
    """Keras's per-channel Rescaling (ImageNet's mean and deviation), saved by
    Keras, loads here with Keras's predictions, and goes back."""
    pytest.importorskip("h5py")
    from data.test_keras_files import run_keras
    x = RNG.random((4, 5, 6, 3)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    path = str(tmp_path / "k.keras")
    run_keras("""
        import sys, numpy as np, keras
        model = keras.Sequential([keras.Input((5, 6, 3)),
                                  keras.layers.Rescaling([1 / 0.229, 1 / 0.224, 1 / 0.225],
                                                         offset=[-0.485, -0.456, -0.406]),
                                  keras.layers.Rescaling(2.0, offset=[0.0, 1.0, -1.0])])
        model.save(sys.argv[1])
        np.save(sys.argv[3], model.predict(np.load(sys.argv[2]), verbose=0))
    """, path, tmp_path / "x.npy", tmp_path / "theirs.npy")
    mine = keras.models.load_model(path)
    assert mine.layers[0].get_config()["offset"] == [-0.485, -0.456, -0.406]
    with cnncuda.device(engine):
        got = mine.predict(x, verbose=0)
    np.testing.assert_allclose(got, np.load(tmp_path / "theirs.npy"), rtol=1e-6, atol=1e-6)


def test_the_keras_namespace_exports_them():
    from cnncuda.keras.layers import (Cropping2D, Rescaling, Reshape,  # noqa: F401
                                      SpatialDropout2D, UpSampling2D, ZeroPadding2D)
    assert cnncuda.keras.layers.Reshape is cnncuda.layers.Reshape


def test_spatial_dropout_masks_are_the_whole_batchs_on_replicas():
    """Under data parallelism each replica draws its rows' channel masks by
    their number in the whole batch (row0), so three replicas with uneven
    shares train as one network."""
    from cnncuda import distribute

    def model():
        m = keras.Sequential([L.Conv2D(4, 3, activation="relu", input_shape=(8, 8, 2)),
                              L.SpatialDropout2D(0.5), L.Flatten(), L.Dense(5)], seed=5)
        m.compile(optimizer="adam", metrics=["accuracy"], device="cpu",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        return m

    rng = np.random.default_rng(3)
    x, y = rng.random((40, 8, 8, 2)).astype(np.float32), rng.integers(0, 5, 40)
    one = model()
    h1 = one.fit(x, y, batch_size=16, epochs=2, verbose=0).history
    with distribute.MirroredStrategy(devices=["cpu", "cpu", "cpu"]).scope():
        three = model()
    h3 = three.fit(x, y, batch_size=16, epochs=2, verbose=0).history
    np.testing.assert_allclose(h3["loss"], h1["loss"], rtol=1e-5)
    for a, b in zip(one.get_weights(), three.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_the_profile_names_their_steps():
    """Each layer is one planned step forward and, but for the first layer
    (no input gradient wanted), one backward; the profile's cost model knows
    their shapes."""
    model = every_layer_model()
    names = [r["step"] for r in model.profile(X, Y, batch_size=4, steps=1).rows]
    for step in ("rescaling_0.forward", "zero_padding2d_1.forward", "zero_padding2d_1.backward",
                 "cropping2d_4.backward", "reshape_5.forward", "reshape_5.backward",
                 "upsampling2d_7.backward", "upsampling2d_8.forward",
                 "spatial_dropout2d_9.backward", "reshape_13.forward"):
        assert step in names, step
    assert "rescaling_0.backward" not in names
    # the Conv2D after the image Reshape: (12, 4, 4) -> (10, 2, 2), 3x3, batch 4
    rows = {r["step"]: r for r in model.profile(X, Y, batch_size=4, steps=1).rows}
    assert rows["conv2d_6.backward_data"]["flops"] == 2 * 4 * 10 * 2 * 2 * 3 * 3 * 4


# Shaped like TensorFlow's image classification tutorial (Rescaling first,
# integer pixels in) and like a convolutional autoencoder (Dense, Reshape to
# an image, UpSampling2D, a convolution back to pixels), imports as users
# change them; run on every engine and on the numpy engine, same histories.
TUTORIAL_SCRIPTS = {
    "image_classification": """
import cnncuda as tf
from cnncuda.keras import layers, models
num_classes, img_height, img_width = 3, 12, 10
model = models.Sequential([
    layers.Rescaling(1./255, input_shape=(img_height, img_width, 3)),
    layers.Conv2D(16, 3, padding='same', activation='relu'),
    layers.MaxPooling2D(),
    layers.Conv2D(32, 3, padding='same', activation='relu'),
    layers.MaxPooling2D(),
    layers.SpatialDropout2D(0.2),
    layers.Flatten(),
    layers.Dense(32, activation='relu'),
    layers.Dense(num_classes)
])
model.compile(optimizer='adam',
              loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=['accuracy'])
history = model.fit(train_images, train_labels, epochs=10, batch_size=8, verbose=0)
""",
    "autoencoder": """
import cnncuda as tf
from cnncuda.keras import layers, models
model = models.Sequential([
    layers.Rescaling(1./255, input_shape=(12, 10, 3)),
    layers.ZeroPadding2D(((0, 0), (1, 1))),
    layers.Conv2D(8, 3, activation='relu', padding='same'),
    layers.MaxPooling2D(),
    layers.Flatten(),
    layers.Dense(16, activation='relu'),
    layers.Dense(6 * 6 * 4, activation='relu'),
    layers.Reshape((6, 6, 4)),
    layers.UpSampling2D((2, 2)),
    layers.Cropping2D(((0, 0), (1, 1))),
    layers.Conv2D(3, 3, padding='same'),
    layers.Flatten(),
    layers.Activation('sigmoid'),
])
model.compile(optimizer='adam', loss='binary_crossentropy')
history = model.fit(train_images, train_images.reshape(len(train_images), -1) / 255.0,
                    epochs=3, batch_size=8, verbose=0)
""",
}


@pytest.mark.parametrize("engine", engine_params())
@pytest.mark.parametrize("name", sorted(TUTORIAL_SCRIPTS))
def test_tutorial_shaped_scripts_run_as_on_the_numpy_engine(engine, name):
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 3, 48)
    images = np.clip(rng.normal(60 + 60 * labels[:, None, None, None], 30, (48, 12, 10, 3)),
                     0, 255).astype(np.uint8)
    histories = {}
    for device in (engine, "numpy"):
        cnncuda.random.set_seed(7)
        scope = {"train_images": images, "train_labels": labels}
        with cnncuda.device(device):
            exec(TUTORIAL_SCRIPTS[name], scope)
        histories[device] = scope["history"].history
    np.testing.assert_allclose(histories[engine]["loss"], histories["numpy"]["loss"], rtol=1e-4)
    assert histories[engine]["loss"][-1] < histories[engine]["loss"][0]
    if name == "image_classification":
        assert histories[engine]["accuracy"][-1] > 0.6
