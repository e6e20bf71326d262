"""The augmentation layers as Keras layers: their arguments, configs and
shapes against Keras 3's; their geometry against Keras's own transforms for
a fixed draw; training on, inference off; saving in cnncuda's format and
Keras's .keras / .h5 both ways; a model with RandomFlip and RandomRotation
training on the cpu engine.

Keras runs in a child process (JAX on the CPU), as tests/data/test_keras_files.py
does: JAX must not be imported into the test process."""
import json

import numpy as np
import pytest

import cnncuda as tf
from cnncuda import reference_augment as ra
from cnncuda.keras import layers

KERAS_ARGS = {
    "RandomFlip": [{}, {"mode": "horizontal", "seed": 3}, {"mode": "vertical"}],
    "RandomRotation": [{"factor": 0.2}, {"factor": (-0.1, 0.3), "fill_mode": "constant",
                                         "interpolation": "nearest", "fill_value": 1.5,
                                         "seed": 4}],
    "RandomZoom": [{"height_factor": 0.2}, {"height_factor": (-0.3, 0.1), "width_factor": 0.4,
                                            "fill_mode": "wrap", "seed": 1}],
    "RandomTranslation": [{"height_factor": 0.1, "width_factor": (-0.2, 0.3)},
                          {"height_factor": 0.5, "width_factor": 0.5, "fill_mode": "nearest",
                           "interpolation": "nearest"}],
    "RandomContrast": [{"factor": 0.5}, {"factor": (0.2, 0.7), "value_range": (0, 1),
                                         "seed": 9}],
    "RandomCrop": [{"height": 4, "width": 5, "seed": 2}],
}


# -- arguments and configs ----------------------------------------------------------

@pytest.fixture(scope="module")
def keras_configs():
    out = run_keras("""
        import json, sys, keras
        args = json.loads(sys.argv[1])
        configs = {name: [getattr(keras.layers, name)(**a).get_config() for a in cases]
                   for name, cases in args.items()}
        print(json.dumps(configs, default=list))
    """, json.dumps(KERAS_ARGS))
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.keras3
@pytest.mark.parametrize("name", sorted(KERAS_ARGS))
def test_configs_match_keras(keras_configs, name):
    for args, theirs in zip(KERAS_ARGS[name], keras_configs[name]):
        mine = getattr(layers, name)(**args).get_config()
        for key, value in mine.items():
            if key == "name" or (key == "seed" and value is None):
                continue   # Keras's RandomCrop makes up a seed where none is given
            want = theirs[key]
            if isinstance(value, list):
                np.testing.assert_allclose(value, want, err_msg="%s %s" % (name, key))
            else:
                assert value == want, (name, key, value, want)
        assert set(mine) - {"name"} <= set(theirs), (name, set(mine) - set(theirs))
        again = type(getattr(layers, name)(**args)).from_config(mine)
        assert again.get_config() == mine


@pytest.mark.parametrize("cls,args,match", [
    (layers.RandomFlip, {"mode": "diagonal"}, "mode"),
    (layers.RandomRotation, {"factor": 1.5}, "factor"),
    (layers.RandomRotation, {"factor": 0.1, "fill_mode": "mirror"}, "fill_mode"),
    (layers.RandomRotation, {"factor": 0.1, "interpolation": "bicubic"}, "interpolation"),
    (layers.RandomZoom, {"height_factor": -1.0}, "height_factor"),
    (layers.RandomZoom, {"height_factor": (0.1, 0.2, 0.3)}, "height_factor"),
    (layers.RandomTranslation, {"height_factor": 0.1, "width_factor": 1.2}, "width_factor"),
    (layers.RandomContrast, {"factor": 1.2}, "factor"),
    (layers.RandomContrast, {"factor": 0.2, "value_range": (1, 0)}, "value_range"),
    (layers.RandomCrop, {"height": 0, "width": 3}, "height"),
    (layers.RandomFlip, {"data_format": "channels_first"}, "data_format"),
    (layers.RandomFlip, {"seed": -1}, "seed"),
])
def test_bad_arguments(cls, args, match):
    with pytest.raises((ValueError, TypeError), match=match):
        cls(**args)


def test_shapes_and_placement():
    model = tf.keras.Sequential([layers.Input((9, 11, 3)), layers.RandomFlip(),
                                 layers.RandomCrop(5, 7), layers.Conv2D(2, 3)])
    assert model.layers[1].output_shape == (None, 5, 7, 3)
    assert model.count_params() == 3 * 3 * 3 * 2 + 2
    with pytest.raises(ValueError, match="does not fit"):
        tf.keras.Sequential([layers.Input((4, 4, 1)), layers.RandomCrop(5, 3)])
    with pytest.raises(ValueError, match="ndim=4"):
        tf.keras.Sequential([layers.Input((8,)), layers.RandomFlip()])
    with pytest.raises(ValueError, match="before every layer with weights"):
        tf.keras.Sequential([layers.Input((8, 8, 1)), layers.Conv2D(2, 3),
                             layers.RandomRotation(0.1)])


# -- the geometry against Keras's transforms for fixed draws ----------------------------

def _draws(n):
    rng = np.random.default_rng(5)
    return {"flip": rng.random(n) <= 0.5, "angle": rng.uniform(-180, 180, n).astype(np.float32),
            "zoom": rng.uniform(0.5, 1.6, (n, 2)).astype(np.float32),
            "shift": rng.uniform(-0.6, 0.6, (n, 2)).astype(np.float32),
            "contrast": rng.uniform(0.3, 1.7, n).astype(np.float32),
            "crop": np.stack([rng.integers(0, 4, n), rng.integers(0, 5, n)], 1)}


MODES = [("reflect", "bilinear"), ("constant", "bilinear"), ("nearest", "nearest"),
         ("wrap", "bilinear"), ("reflect", "nearest"), ("constant", "nearest")]


@pytest.fixture(scope="module")
def keras_transforms(tmp_path_factory):
    folder = tmp_path_factory.mktemp("geometry")
    n = 6
    x = np.random.default_rng(3).uniform(0, 1, (n, 7, 9, 2)).astype(np.float32)
    np.savez(folder / "in.npz", x=x, **_draws(n))
    run_keras("""
        import sys, json, numpy as np, keras
        folder = sys.argv[1]
        modes = json.loads(sys.argv[2])
        d = dict(np.load(folder + "/in.npz"))
        x, n = d["x"], len(d["x"])
        h, w = x.shape[1:3]
        out = {}
        flips = d["flip"].reshape(n, 1, 1, 1)
        for mode in ("horizontal", "vertical", "horizontal_and_vertical"):
            layer = keras.layers.RandomFlip(mode)
            out["flip_" + mode] = np.asarray(layer.transform_images(
                x, {"flips": flips, "input_shape": x.shape}, training=True))
        for fill, interp in modes:
            tag = fill + "_" + interp
            rot = keras.layers.RandomRotation(0.5, fill_mode=fill, interpolation=interp,
                                              fill_value=0.25)
            z = np.zeros(n, np.float32)
            m = rot._compute_affine_matrix(center_x=0.5, center_y=0.5, angle=d["angle"],
                                           translate_x=z, translate_y=z, scale=z + 1,
                                           shear_x=z, shear_y=z, height=h, width=w)
            out["rotation_" + tag] = np.asarray(rot.transform_images(
                x, {"rotation_matrix": m}, training=True))
            zoom = keras.layers.RandomZoom(0.5, 0.5, fill_mode=fill, interpolation=interp,
                                           fill_value=0.25)
            out["zoom_" + tag] = np.asarray(zoom.transform_images(
                x, {"height_zoom": d["zoom"][:, :1], "width_zoom": d["zoom"][:, 1:],
                    "input_shape": x.shape}, training=True))
            tr = keras.layers.RandomTranslation(0.5, 0.5, fill_mode=fill, interpolation=interp,
                                                fill_value=0.25)
            px = np.stack([d["shift"][:, 1] * np.float32(w), d["shift"][:, 0] * np.float32(h)], 1)
            out["translation_" + tag] = np.asarray(tr.transform_images(
                x, {"translations": px, "input_shape": x.shape}, training=True))
        con = keras.layers.RandomContrast(0.5, value_range=(0.1, 0.9))
        out["contrast"] = np.asarray(con.transform_images(
            x, {"contrast_factor": d["contrast"].reshape(n, 1, 1, 1)}, training=True))
        crop = keras.layers.RandomCrop(4, 5)
        out["crop"] = np.stack([np.asarray(crop.transform_images(
            x[i:i + 1], (int(d["crop"][i, 0]), int(d["crop"][i, 1])), training=True))[0]
            for i in range(n)])
        np.savez(folder + "/out.npz", **out)
    """, folder, json.dumps(MODES))
    return dict(np.load(folder / "in.npz")), dict(np.load(folder / "out.npz"))


@pytest.mark.keras3
def test_flip_matches_keras(keras_transforms):
    d, keras_out = keras_transforms
    x, flips = d["x"], d["flip"]
    for mode, (fh, fv) in {"horizontal": (1, 0), "vertical": (0, 1),
                           "horizontal_and_vertical": (1, 1)}.items():
        mine = x.copy()
        for i in np.nonzero(flips)[0]:
            mine[i] = x[i][::-1 if fv else 1, ::-1 if fh else 1]
        assert np.array_equal(mine, keras_out["flip_" + mode]), mode
        # and the reference's op, where these are its draws' outcomes
        assert np.array_equal(ra.random_flip(x, 0, fh, fv, training=False), x)


@pytest.mark.keras3
@pytest.mark.parametrize("fill,interp", MODES)
@pytest.mark.parametrize("kind", ["rotation", "zoom", "translation"])
def test_affine_matches_keras(keras_transforms, kind, fill, interp):
    d, keras_out = keras_transforms
    x = d["x"]
    h, w = x.shape[1:3]
    values = {"rotation": np.stack([d["angle"], d["angle"]], 1), "zoom": d["zoom"],
              "translation": d["shift"]}[kind]
    mine = np.stack([ra.affine_transform(x[i], ra.affine_matrix(kind, values[i], h, w), fill,
                                         interp, 0.25) for i in range(len(x))])
    theirs = keras_out["%s_%s_%s" % (kind, fill, interp)]
    if interp == "bilinear":
        np.testing.assert_allclose(mine, theirs, rtol=0, atol=2e-5)
    else:
        # nearest: a coordinate within float32 rounding of .5 may round either
        # way (Keras's cosine and einsum are not ours to the last bit)
        close = np.isclose(mine, theirs, rtol=0, atol=1e-6)
        assert close.mean() > 0.995, close.mean()


@pytest.mark.keras3
def test_contrast_and_crop_match_keras(keras_transforms):
    d, keras_out = keras_transforms
    x = d["x"]
    f = d["contrast"]
    mean = (x.astype(np.float64).sum(axis=(1, 2), keepdims=True) / (7 * 9)).astype(np.float32)
    mine = np.clip((x - mean) * f[:, None, None, None] + mean, np.float32(0.1), np.float32(0.9))
    np.testing.assert_allclose(mine, keras_out["contrast"], rtol=0, atol=1e-6)
    off = d["crop"]
    mine = np.stack([x[i, oy:oy + 4, ox:ox + 5] for i, (oy, ox) in enumerate(off)])
    assert np.array_equal(mine, keras_out["crop"])


def test_reference_contrast_is_the_formula():
    from cnncuda.reference import rng_key
    x = np.random.default_rng(0).uniform(0, 1, (4, 5, 3, 2)).astype(np.float32)
    key = rng_key(1, 2)
    f = ra.draw_values(ra.draws(key, 4), (0.5, 0.5), (1.5, 1.5))[:, 0]
    mean = (x.astype(np.float64).sum(axis=(1, 2), keepdims=True) / 15).astype(np.float32)
    want = np.clip((x - mean) * f[:, None, None, None] + mean, 0, 1)
    assert np.array_equal(ra.random_contrast(x, key, 0.5, 1.5, (0, 1)), want)


# -- in models ---------------------------------------------------------------------------

def _data(n=96, shape=(12, 12, 3), classes=3, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n)
    x = rng.uniform(0, 0.3, (n,) + shape).astype(np.float32)
    for i, c in enumerate(y):   # a bright square whose corner says the class
        x[i, 2 * c:2 * c + 5, 2 * c:2 * c + 5, c % shape[2]] += 0.7
    return x, y


def _model(seed=0, device="cpu", crop=False):
    aug = [layers.RandomFlip("horizontal"), layers.RandomRotation(0.05)]
    if crop:
        aug += [layers.RandomZoom(0.1), layers.RandomTranslation(0.1, 0.1),
                layers.RandomContrast(0.2, value_range=(0, 1)), layers.RandomCrop(10, 10)]
    model = tf.keras.Sequential([layers.Input((12, 12, 3))] + aug + [
        layers.Conv2D(8, 3, activation="relu"), layers.MaxPooling2D(), layers.Flatten(),
        layers.Dense(3)], seed=seed)
    model.compile(optimizer=tf.keras.optimizers.Adam(0.01), metrics=["accuracy"],
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def test_model_with_flip_and_rotation_trains_on_cpu():
    x, y = _data()
    model = _model()
    history = model.fit(x, y, epochs=8, batch_size=16, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < 0.7 * losses[0], losses
    # inference passes the images through: predict is the layers after them
    plain = tf.keras.Sequential([layers.Input((12, 12, 3))] + [
        type(l).from_config(l.get_config()) for l in model.layers[2:]])
    plain.set_weights(model.get_weights())
    np.testing.assert_allclose(model.predict(x, verbose=0), plain.predict(x, verbose=0),
                               rtol=0, atol=0)
    plain.compile(optimizer="adam", metrics=["accuracy"],
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    np.testing.assert_allclose(model.evaluate(x, y, verbose=0), plain.evaluate(x, y, verbose=0),
                               rtol=1e-6)
    # the same seed gives the same training, a different one another
    again = _model()
    again.fit(x, y, epochs=8, batch_size=16, verbose=0)
    assert all(np.array_equal(a, b) for a, b in zip(model.get_weights(), again.get_weights()))


@pytest.mark.parametrize("engine", ["numpy", "omp"])
def test_training_is_the_same_on_every_engine(engine):
    import cnncuda
    if engine not in cnncuda.build_info()["engines"] and engine != "numpy":
        pytest.skip("%s is not in this build" % engine)
    x, y = _data(48)
    a = _model(crop=True, device="cpu")
    b = _model(crop=True)
    b.compile(optimizer=tf.keras.optimizers.Adam(0.01), metrics=["accuracy"], device=engine,
              loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    a.fit(x, y, epochs=2, batch_size=16, verbose=0, shuffle=False)
    b.fit(x, y, epochs=2, batch_size=16, verbose=0, shuffle=False)
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_allclose(wa, wb, rtol=2e-4, atol=2e-5)


def test_cnncuda_file_round_trip(tmp_path):
    """The layers' configs and the training-forward count travel: a loaded
    model trains on with the same augmented batches."""
    x, y = _data(48)
    model = _model(crop=True)
    model.fit(x, y, epochs=1, batch_size=16, verbose=0)
    model.save(tmp_path / "m.cnncuda")
    loaded = tf.keras.models.load_model(tmp_path / "m.cnncuda")
    assert [l.get_config() for l in loaded.layers] == [l.get_config() for l in model.layers]
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))
    model.fit(x, y, epochs=1, batch_size=16, verbose=0)
    loaded.fit(x, y, epochs=1, batch_size=16, verbose=0)
    for a, b in zip(model.get_weights(), loaded.get_weights()):
        np.testing.assert_array_equal(a, b)


@pytest.mark.keras3
@pytest.mark.parametrize("ext", [".keras", ".h5"])
def test_keras_opens_ours(tmp_path, ext):
    """Saved here, opened by Keras 3 with the same layers, configs and
    predictions (inference: the layers pass the images through; RandomCrop,
    which Keras 3 leaves uncropped at inference, is not in this model)."""
    pytest.importorskip("h5py")
    x, y = _data(16)
    model = tf.keras.Sequential([layers.Input((12, 12, 3)), layers.RandomFlip(seed=1),
                                 layers.RandomRotation((-0.1, 0.2), fill_mode="constant"),
                                 layers.RandomZoom(0.1, 0.2, interpolation="nearest"),
                                 layers.RandomTranslation(0.1, 0.2, fill_mode="wrap"),
                                 layers.RandomContrast(0.3, value_range=(0, 1)),
                                 layers.Conv2D(4, 3), layers.Flatten(), layers.Dense(3)], seed=3)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    model.fit(x, y, epochs=1, verbose=0)
    path = tmp_path / ("m" + ext)
    model.save(path)
    np.save(tmp_path / "x.npy", x)
    out = run_keras("""
        import sys, json, numpy as np, keras
        m = keras.models.load_model(sys.argv[1])
        np.save(sys.argv[2], m.predict(np.load(sys.argv[3]), verbose=0))
        print(json.dumps([[type(l).__name__, l.get_config()] for l in m.layers], default=list))
    """, path, tmp_path / "keras.npy", tmp_path / "x.npy")
    configs = json.loads(out.strip().splitlines()[-1])
    assert [c[0] for c in configs] == [type(l).__name__ for l in model.layers]
    for (_, theirs), layer in zip(configs, model.layers):
        for key, value in layer.get_config().items():
            if isinstance(value, list):
                np.testing.assert_allclose(value, theirs[key])
            else:
                assert theirs[key] == value, (key, theirs[key], value)
    np.testing.assert_allclose(np.load(tmp_path / "keras.npy"), model.predict(x, verbose=0),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.keras3
@pytest.mark.parametrize("ext", [".keras", ".h5"])
def test_keras_files_load_here(tmp_path, ext):
    pytest.importorskip("h5py")
    x, _ = _data(8)
    np.save(tmp_path / "x.npy", x)
    run_keras("""
        import sys, numpy as np, keras
        L = keras.layers
        m = keras.Sequential([keras.Input((12, 12, 3)), L.RandomFlip("vertical", seed=2),
                              L.RandomRotation(0.1, fill_mode="nearest"), L.RandomZoom(0.2),
                              L.RandomTranslation((-0.1, 0.2), 0.1, interpolation="nearest"),
                              L.RandomContrast((0.1, 0.4)), L.RandomCrop(8, 9, seed=4),
                              L.Conv2D(3, 3), L.GlobalAveragePooling2D(), L.Dense(2)])
        m.compile("adam", "sparse_categorical_crossentropy")
        m.save(sys.argv[1])
        np.save(sys.argv[2], m.predict(np.load(sys.argv[3]), verbose=0))
    """, tmp_path / ("k" + ext), tmp_path / "keras.npy", tmp_path / "x.npy")
    model = tf.keras.models.load_model(tmp_path / ("k" + ext))
    names = [type(l).__name__ for l in model.layers]
    assert names[:6] == ["RandomFlip", "RandomRotation", "RandomZoom", "RandomTranslation",
                         "RandomContrast", "RandomCrop"]
    assert model.layers[0].mode == "vertical" and model.layers[0].seed == 2
    assert model.layers[1].fill_mode == "nearest" and model.layers[4].factor == (0.1, 0.4)
    assert model.layers[5].get_config()["height"] == 8 and model.layers[5].seed == 4
    # Keras 3 leaves RandomCrop's input uncropped at inference (its global
    # pooling takes any size), this model crops the centre: the same
    # predictions from the layers after it on the centre window
    ours = model.predict(x, verbose=0)
    assert ours.shape == (8, 2) and np.all(np.isfinite(ours))
    tail = tf.keras.Sequential([layers.Input((8, 9, 3))] + [
        type(l).from_config(l.get_config()) for l in model.layers[6:]])
    tail.set_weights(model.get_weights())
    np.testing.assert_array_equal(tail.predict(x[:, 2:10, 1:10], verbose=0), ours)
    model.fit(x, np.zeros(len(x)), epochs=1, verbose=0)   # and trains on


def test_replicas_augment_as_one_network():
    """Data parallel: each replica draws its rows' augmentation by their
    number in the whole batch, so three replicas train as one network."""
    from cnncuda import distribute
    x, y = _data(66)
    one = _model(crop=True)
    h1 = one.fit(x, y, batch_size=32, epochs=2, verbose=0)
    with distribute.MirroredStrategy(devices=["cpu", "cpu", "cpu"]).scope():
        three = _model(crop=True)
    h3 = three.fit(x, y, batch_size=32, epochs=2, verbose=0)
    np.testing.assert_allclose(h3.history["loss"], h1.history["loss"], rtol=1e-5)
    for a, b in zip(one.get_weights(), three.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


from conftest import run_keras, engine_params  # noqa: E402


@pytest.mark.parametrize("engine", engine_params(("cuda", "cudnn")))
def test_gpu_training_matches_cpu(engine):
    """On the GPU engines a recorded training step reads the forward counter
    on the device at each replay: the augmented batches are the cpu
    engine's, step after step (SGD, so that the engines' rounding
    differences stay small: the weights within 1e-3; batches augmented
    differently would differ by far more)."""
    x, y = _data(64)
    cpu, gpu = _model(crop=True), _model(crop=True)
    for model, device in ((cpu, "cpu"), (gpu, engine)):
        model.compile(optimizer=tf.keras.optimizers.SGD(0.05), metrics=["accuracy"],
                      device=device,
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    h_cpu = cpu.fit(x, y, epochs=3, batch_size=16, verbose=0)
    h_gpu = gpu.fit(x, y, epochs=3, batch_size=16, verbose=0)
    np.testing.assert_allclose(h_gpu.history["loss"], h_cpu.history["loss"], rtol=1e-3)
    for a, b in zip(cpu.get_weights(), gpu.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(gpu.predict(x, verbose=0), cpu.predict(x, verbose=0),
                               rtol=1e-3, atol=1e-4)
