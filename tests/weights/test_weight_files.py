"""Initializers, regularizers and freezing in files: cnncuda's own format, and
Keras 3's .keras and .h5 both ways (Keras in a child process, as
tests/data/test_keras_files.py runs it)."""
import json

import numpy as np
import pytest

import cnncuda as tf
from cnncuda import initializers, layers, regularizers
from cnncuda.models import Sequential, load_model
from conftest import run_keras

pytest.importorskip("h5py")


def _model():
    m = Sequential([
        layers.Conv2D(3, 3, kernel_initializer=initializers.HeNormal(seed=3),
                      kernel_regularizer=regularizers.l2(0.02), input_shape=(6, 6, 2),
                      trainable=False),
        layers.BatchNormalization(trainable=False,
                                  gamma_initializer=initializers.Constant(0.5)),
        layers.Flatten(),
        layers.Dense(4, bias_initializer="ones", bias_regularizer=regularizers.L1L2(0.01, 0.1),
                     kernel_regularizer="l1")], seed=1)
    m.compile(optimizer="adam", device="cpu",
              loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 6, 6, 2)).astype("f4")
    y = rng.integers(0, 4, 16)
    m.fit(x, y, epochs=1, verbose=0)
    return m, x, y


def _check_same_settings(a, b):
    for la, lb in zip(a.layers, b.layers):
        assert la.trainable == lb.trainable
        ca, cb = la.get_config(), lb.get_config()
        ca.pop("input_shape", None)       # a Keras file keeps it in its Input
        cb.pop("input_shape", None)
        assert ca == cb
    assert [v.trainable for v in a.weights] == [v.trainable for v in b.weights]


def test_own_format_round_trip(tmp_path):
    m, x, y = _model()
    m.save(tmp_path / "m.cnn")
    back = load_model(tmp_path / "m.cnn")
    _check_same_settings(m, back)
    assert back.layers[3].kernel_regularizer == regularizers.L1(0.01)
    assert back.layers[0].kernel_initializer == initializers.HeNormal(seed=3)
    assert back.evaluate(x, y, verbose=0) == pytest.approx(m.evaluate(x, y, verbose=0),
                                                            rel=1e-6)
    m.fit(x, y, epochs=1, verbose=0, shuffle=False)
    back.fit(x, y, epochs=1, verbose=0, shuffle=False)
    for a, b in zip(m.get_weights(), back.get_weights()):
        assert np.array_equal(a, b)


@pytest.mark.keras3
@pytest.mark.parametrize("ext", [".keras", ".h5"])
def test_keras_reads_them(ext, tmp_path):
    m, x, y = _model()
    path = str(tmp_path / ("m" + ext))
    m.save(path)
    back = load_model(path)
    _check_same_settings(m, back)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    out = run_keras("""
        import sys, json, numpy as np, keras
        m = keras.models.load_model(sys.argv[1])
        x, y = np.load(sys.argv[2]), np.load(sys.argv[3])
        c = [l.get_config() for l in m.layers]
        print(json.dumps({"trainable": [l.trainable for l in m.layers],
                          "kreg": [c[0]["kernel_regularizer"], c[3]["kernel_regularizer"],
                                   c[3]["bias_regularizer"]],
                          "kinit": c[0]["kernel_initializer"],
                          "gamma": c[1]["gamma_initializer"],
                          "n_trainable": len(m.trainable_weights),
                          "loss": m.evaluate(x, y, verbose=0) if m.compiled else None}))
    """, path, tmp_path / "x.npy", tmp_path / "y.npy")
    got = json.loads(out.strip().splitlines()[-1])
    assert got["trainable"] == [False, False, True, True]
    assert got["kreg"][0]["class_name"] == "L2" and got["kreg"][0]["config"] == {"l2": 0.02}
    assert got["kreg"][1]["class_name"] == "L1"
    assert got["kreg"][2]["config"] == {"l1": 0.01, "l2": 0.1}
    assert got["kinit"]["class_name"] == "HeNormal" and got["kinit"]["config"]["seed"] == 3
    assert got["gamma"]["class_name"] == "Constant"
    assert got["n_trainable"] == len(m.trainable_weights) == 2
    if got["loss"] is not None:       # Keras's loss includes the penalties, as ours
        assert got["loss"] == pytest.approx(m.evaluate(x, y, verbose=0), rel=1e-5)


@pytest.mark.keras3
@pytest.mark.parametrize("ext", [".keras", ".h5"])
def test_keras_files_with_them_load_here(ext, tmp_path):
    path = str(tmp_path / ("k" + ext))
    out = run_keras("""
        import sys, json, numpy as np, keras
        r, i = keras.regularizers, keras.initializers
        m = keras.Sequential([keras.Input((5,)),
            keras.layers.Dense(4, kernel_initializer="he_uniform",
                               bias_initializer=i.Constant(0.3),
                               kernel_regularizer=r.l1_l2(0.01, 0.02), trainable=False),
            keras.layers.BatchNormalization(trainable=False),
            keras.layers.Dense(2, bias_regularizer=r.l2(0.5))])
        m.compile(optimizer="sgd", loss=keras.losses.CategoricalCrossentropy(from_logits=True))
        x = np.linspace(-1, 1, 30, dtype="float32").reshape(6, 5)
        y = np.eye(2, dtype="float32")[[0, 1, 0, 1, 1, 0]]
        m.fit(x, y, verbose=0)
        m.save(sys.argv[1])
        print(json.dumps([m.evaluate(x, y, verbose=0), x.tolist(), y.tolist()]))
    """, path)
    loss, x, y = json.loads(out.strip().splitlines()[-1])
    m = load_model(path)
    assert [l.trainable for l in m.layers] == [False, False, True]
    assert type(m.layers[0].kernel_initializer).__name__ == "HeUniform"
    assert m.layers[0].kernel_regularizer == regularizers.L1L2(0.01, 0.02)
    assert m.layers[2].bias_regularizer == regularizers.L2(0.5)
    assert m.evaluate(np.array(x, "f4"), np.array(y, "f4"), verbose=0) == \
        pytest.approx(loss, rel=1e-5)


def test_json_round_trip_keeps_the_settings():
    m, x, y = _model()
    back = tf.keras.models.model_from_json(m.to_json())
    _check_same_settings(m, back)
