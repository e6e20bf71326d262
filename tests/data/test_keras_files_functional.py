"""Functional and nested models in Keras's own files, both ways against real
Keras 3: a functional chain, the probability model (a model inside a
Sequential) and a model called inside a functional model, saved here as
.keras and .h5 open in Keras with our predictions; Keras's load here with
its predictions and weights; graphs (a residual block, branches joined by
Concatenate) both ways, Keras's predictions the check of the engines'
numerics."""
import numpy as np
import pytest

import cnncuda as tf
from cnncuda import keras
from cnncuda.keras import layers
from test_keras_files import run_keras

pytest.importorskip("h5py")
pytestmark = pytest.mark.keras3
RNG = np.random.default_rng(5)
X = RNG.random((24, 8, 8, 2)).astype(np.float32)
Y = RNG.integers(0, 4, 24)


def chain(name="chain"):
    inputs = keras.Input((8, 8, 2), name="pixels")
    x = layers.Conv2D(3, 3, activation="relu")(inputs)
    x = layers.BatchNormalization()(x)
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, layers.Dense(4)(x), name=name, seed=2)


def trained_models():
    inner = chain("inner")
    inner.compile(optimizer="adam", device="cpu",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    inner.fit(X, Y, epochs=2, batch_size=8, verbose=0)
    prob = keras.Sequential([inner, layers.Softmax()], name="prob")
    inputs = keras.Input((8, 8, 2))
    outer = keras.Model(inputs, layers.Dense(2, name="head")(inner(inputs)), name="outer")
    x = layers.Conv2D(3, 3, padding="same", activation="relu")(inputs)
    y = layers.BatchNormalization()(layers.Conv2D(3, 3, padding="same")(x))
    x = layers.ReLU()(layers.Add()([y, x]))
    x = layers.Concatenate()([x, layers.Conv2D(2, 1)(x),
                              layers.AveragePooling2D(3, strides=1, padding="same")(inputs)])
    x = layers.GlobalAveragePooling2D()(x)
    graph = keras.Model(inputs, layers.Concatenate()([inner(inputs), layers.Dense(3)(x)]),
                        name="graph", seed=4)
    graph.compile(optimizer="adam", device="cpu",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    graph.fit(X, Y % 4, epochs=1, batch_size=8, verbose=0)
    return {"inner": inner, "prob": prob, "outer": outer, "graph": graph}


@pytest.mark.parametrize("ext", [".keras", ".h5"])
def test_functional_and_nested_models_saved_here_open_in_keras(ext, tmp_path):
    np.save(tmp_path / "x.npy", X[:6])
    paths = []
    for name, model in trained_models().items():
        path = tmp_path / (name + ext)
        model.save(path)
        back = keras.models.load_model(path)                # and here again
        assert back._class_name == model._class_name
        assert np.array_equal(back.predict(X[:6], verbose=0), model.predict(X[:6], verbose=0))
        np.save(tmp_path / (name + ".npy"), model.predict(X[:6], verbose=0))
        paths.append(str(path))
    out = run_keras("""
        import sys, numpy as np, keras
        x = np.load(sys.argv[1])
        for path in sys.argv[2:]:
            model = keras.models.load_model(path)
            mine = np.load(path.rsplit(".", 1)[0] + ".npy")
            print(type(model).__name__, float(np.abs(model.predict(x, verbose=0) - mine).max()))
    """, tmp_path / "x.npy", *paths)
    rows = [line.split() for line in out.strip().splitlines()]
    assert [r[0] for r in rows] == ["Functional", "Sequential", "Functional", "Functional"]
    assert all(float(r[1]) < 1e-6 for r in rows), rows


@pytest.mark.parametrize("ext", [".keras", ".h5"])
def test_functional_and_nested_models_keras_saves_load_here(ext, tmp_path):
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "y.npy", Y)
    run_keras("""
        import sys, numpy as np, keras
        x, y, out = np.load(sys.argv[1]), np.load(sys.argv[2]), sys.argv[3]
        inputs = keras.Input((8, 8, 2))
        h = keras.layers.Conv2D(3, 3, activation="relu")(inputs)
        h = keras.layers.BatchNormalization()(h)
        h = keras.layers.MaxPooling2D()(h)
        base = keras.Model(inputs, keras.layers.Flatten()(h), name="base")
        top = keras.Sequential([keras.Input((27,)), keras.layers.Dense(6, activation="tanh")],
                               name="top")
        outer_in = keras.Input((8, 8, 2))
        z = keras.layers.Dense(4)(top(base(outer_in)))
        model = keras.Model(outer_in, z, name="outer")
        model.compile(optimizer="adam", metrics=["accuracy"],
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.fit(x, y, epochs=1, verbose=0)
        model.save(out + "/outer" + sys.argv[4])
        np.save(out + "/outer.npy", model.predict(x, verbose=0))
        prob = keras.Sequential([model, keras.layers.Softmax()])
        prob.save(out + "/prob" + sys.argv[4])
        np.save(out + "/prob.npy", prob.predict(x, verbose=0))
        a = keras.Input((8, 8, 2))
        h = keras.layers.Conv2D(2, 3, padding="same", activation="relu")(a)
        h = keras.layers.Add(name="residual")([keras.layers.Conv2D(2, 3, padding="same")(h), a])
        h = keras.layers.Concatenate()([h, keras.layers.MaxPooling2D(2, 1, "same")(a), h])
        z = keras.layers.Dense(4)(keras.layers.Flatten()(h))
        branched = keras.Model(a, z)
        branched.compile(optimizer="sgd", loss="categorical_crossentropy")
        branched.save(out + "/branched" + sys.argv[4])
        np.save(out + "/branched.npy", branched.predict(x, verbose=0))
    """, tmp_path / "x.npy", tmp_path / "y.npy", tmp_path, ext)
    outer = keras.models.load_model(tmp_path / ("outer" + ext))
    assert outer._class_name == "Functional"
    assert [type(l).__name__ for l in outer.layers] == ["InputLayer", "Functional", "Sequential",
                                                        "Dense"]
    np.testing.assert_allclose(outer.predict(X, verbose=0), np.load(tmp_path / "outer.npy"),
                               rtol=0, atol=2e-6)
    assert outer.optimizer.kind == "adam" and outer.metric_name == "accuracy"
    outer.fit(X, Y, epochs=1, verbose=0)                  # and trains on
    prob = keras.models.load_model(tmp_path / ("prob" + ext))
    np.testing.assert_allclose(prob.predict(X, verbose=0), np.load(tmp_path / "prob.npy"),
                               rtol=0, atol=2e-6)
    branched = keras.models.load_model(tmp_path / ("branched" + ext))
    assert branched._is_graph and "residual" in [l.name for l in branched.layers]
    np.testing.assert_allclose(branched.predict(X, verbose=0), np.load(tmp_path / "branched.npy"),
                               rtol=0, atol=2e-6)
    branched.fit(X, np.eye(4, dtype=np.float32)[Y], epochs=1, verbose=0)     # and trains on
