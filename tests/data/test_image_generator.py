"""The legacy ImageDataGenerator: flows of arrays and folders as Sequences,
its transforms checked on images whose result is known, and fit on a flow."""
import os

import numpy as np
import pytest

import cnncuda as tf
from cnncuda.keras.preprocessing.image import ImageDataGenerator
from cnncuda.seeds import synthetic_data


def images(n=10, size=8):
    return np.random.default_rng(0).integers(0, 255, (n, size, size, 3)).astype(np.uint8)


def test_no_transform_is_the_identity_and_rescale_exact():
    x, y = images(), np.arange(10)
    batches = list(ImageDataGenerator(rescale=0.5).flow(x, y, batch_size=4, shuffle=False))
    assert [len(b[1]) for b in batches] == [4, 4, 2]
    assert np.array_equal(np.concatenate([b[0] for b in batches]), x.astype(np.float32) * 0.5)
    assert np.concatenate([b[1] for b in batches]).tolist() == list(range(10))


def test_transforms_with_known_results():
    x = images(1)[0].astype(np.float32)
    rng = np.random.default_rng(0)
    flip = ImageDataGenerator(horizontal_flip=True)
    outs = [flip.random_transform(x, rng) for _ in range(20)]
    assert all(np.array_equal(o, x) or np.array_equal(o, x[:, ::-1]) for o in outs)
    assert any(np.array_equal(o, x[:, ::-1]) for o in outs)
    # a shift of exactly 2 rows with nearest fill: rows move down, the top repeats
    shift = ImageDataGenerator(height_shift_range=[2], fill_mode="nearest")
    out = shift.random_transform(x, rng)
    assert np.allclose(out[2:], x[:-2]) or np.allclose(out[:-2], x[2:])
    # a rotation of 90 degrees is a transpose and flip of a square image
    turn = ImageDataGenerator(rotation_range=0)
    turned = turn._affine(x, np.pi / 2, 0, 0, 0, 1.0, 1.0)
    assert np.allclose(turned, np.rot90(x, k=-1), atol=1e-4) or \
        np.allclose(turned, np.rot90(x, k=1), atol=1e-4)
    # constant fill: a zoom out leaves cval around the image
    zoom = ImageDataGenerator(zoom_range=(2.0, 2.0), fill_mode="constant", cval=-1)
    z = zoom.random_transform(x, rng)
    assert z[0, 0, 0] == -1 and z[4, 4, 0] != -1


def test_seeded_flows_repeat_and_epochs_reshuffle():
    x, y = images(), np.arange(10)
    g = ImageDataGenerator(rotation_range=30, zoom_range=0.2, horizontal_flip=True)
    a, b = g.flow(x, y, batch_size=5, seed=3), g.flow(x, y, batch_size=5, seed=3)
    assert np.array_equal(a[0][0], b[0][0]) and np.array_equal(a[0][1], b[0][1])
    first = a[0][1].copy()
    a.on_epoch_end()
    assert not np.array_equal(a[0][1], first) or not np.array_equal(a[1][1], b[1][1])


def test_featurewise_needs_fit_and_subsets():
    x = images()
    g = ImageDataGenerator(featurewise_center=True, featurewise_std_normalization=True,
                           validation_split=0.3)
    with pytest.raises(ValueError, match="hasn't been fit"):
        g.flow(x, batch_size=10)[0]
    g.fit(x)
    out = g.flow(x, batch_size=10, shuffle=False)[0]
    assert np.allclose(out.mean(axis=(0, 1, 2)), 0, atol=1e-4)
    assert g.flow(x, subset="validation").n == 3 and g.flow(x, subset="training").n == 7
    with pytest.raises(ValueError, match="zca_whitening"):
        ImageDataGenerator(zca_whitening=True)


def test_fit_on_a_flow_and_on_a_folder(tmp_path):
    Image = pytest.importorskip("PIL.Image")
    x, y = synthetic_data("lenet5", 40)
    model = tf.keras.Sequential([tf.keras.layers.Flatten(input_shape=(28, 28, 1)),
                                 tf.keras.layers.Dense(10)], seed=0)
    model.compile(optimizer="adam", metrics=["accuracy"],
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(ImageDataGenerator(width_shift_range=0.1).flow(x, y, batch_size=8, seed=0),
                        epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2 and model.optimizer.iterations == 10
    for c, name in enumerate(["a", "b"]):
        os.makedirs(tmp_path / name)
        for i in range(3):
            Image.fromarray(np.full((10, 10), 100 * c, np.uint8)).save(tmp_path / name / ("%d.png" % i))
    it = ImageDataGenerator(rescale=1 / 255.0).flow_from_directory(
        str(tmp_path), target_size=(28, 28), color_mode="grayscale", class_mode="sparse",
        batch_size=4, shuffle=False)
    assert it.class_indices == {"a": 0, "b": 1} and it.samples == 6 and len(it) == 2
    xb, yb = it[0]
    assert xb.shape == (4, 28, 28, 1) and yb.tolist() == [0, 0, 0, 1]
    assert np.allclose(xb[3], 100 / 255.0)
    model.fit(it, epochs=1, verbose=0)
