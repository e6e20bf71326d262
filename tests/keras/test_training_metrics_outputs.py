"""The metrics computed on the host in fit and train_on_batch see the
outputs of the step's training forward (Dropout's masks, the batch's
statistics), as Keras 3's training metrics do (training.step_outputs); the
step itself runs as without them, bit for bit. Against Keras 3 where the
training forward is deterministic (BatchNormalization), and on every
engine."""
import copy
import json

import numpy as np
import pytest

import cnncuda as tf
from conftest import engine_params, run_keras

keras = tf.keras
layers = keras.layers


def device_of(engine):
    return "omp:2" if engine == "omp" else engine


def data(n=24, seed=0):
    rng = np.random.RandomState(seed)
    x = rng.rand(n, 5).astype("float32") * 2
    return x, (x[:, :2] * [1.0, -0.5] + 0.3).astype("float32")


def regression(device="cpu", metrics=("mae",), seed=2, dropout=0.5, batchnorm=True):
    m = keras.Sequential([layers.Dense(8, activation="relu", input_shape=(5,))] +
                         ([layers.BatchNormalization()] if batchnorm else []) +
                         [layers.Dropout(dropout), layers.Dense(2)], seed=seed)
    m.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse", metrics=list(metrics),
              device=device)
    return m


@pytest.mark.parametrize("batchnorm", [True, False], ids=["batchnorm", "dropout-only"])
@pytest.mark.parametrize("engine", engine_params())
def test_host_metrics_see_the_steps_training_forward(engine, batchnorm):
    """With a BatchNormalization the forward's moving statistics are put
    back after it; with dropout alone only the engine's counters."""
    device = device_of(engine)
    x, y = data()
    plain = regression(device, metrics=(), batchnorm=batchnorm)
    measured = regression(device, batchnorm=batchnorm)
    before = copy.deepcopy(measured)     # its counters too: the next forward's masks
    h1 = plain.fit(x, y, batch_size=24, epochs=3, shuffle=False, verbose=0)
    h2 = measured.fit(x, y, batch_size=24, epochs=3, shuffle=False, verbose=0)
    # the steps ran as without the metric
    assert h1.history["loss"] == h2.history["loss"]
    assert all(np.array_equal(a, b) for a, b in zip(plain.get_weights(), measured.get_weights()))
    # the first epoch's mae is that of the training forward the first step ran
    out = before(x, training=True)
    np.testing.assert_allclose(h2.history["mae"][0], np.abs(out - y).mean(), rtol=1e-5)
    inference = before.predict(x, verbose=0)
    assert abs(h2.history["mae"][0] - np.abs(inference - y).mean()) > 1e-4


@pytest.mark.parametrize("engine", engine_params())
def test_train_on_batch_metrics_see_the_training_forward(engine):
    device = device_of(engine)
    x, y = data(16)
    plain, measured = regression(device, metrics=()), regression(device)
    before = copy.deepcopy(measured)
    plain.train_on_batch(x, y)
    logs = measured.train_on_batch(x, y, return_dict=True)
    assert all(np.array_equal(a, b) for a, b in zip(plain.get_weights(), measured.get_weights()))
    out = before(x, training=True)
    np.testing.assert_allclose(logs["mae"], np.abs(out - y).mean(), rtol=1e-5)


KERAS = """
import json, sys, numpy as np, keras
from keras import layers
start = [np.array(w, np.float32) for w in json.loads(sys.argv[1])]
x = np.array(json.loads(sys.argv[2]), np.float32); y = np.array(json.loads(sys.argv[3]), np.float32)
m = keras.Sequential([keras.Input((5,)), layers.Dense(8, activation="relu"),
                      layers.BatchNormalization(), layers.Dense(2)])
m.set_weights(start)
m.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse", metrics=["mae"])
print(json.dumps(m.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history))
"""


@pytest.mark.keras3
def test_batch_statistics_metrics_as_keras():
    """BatchNormalization normalizes by the batch in the training forward:
    the training mae is Keras 3's."""
    x, y = data()
    m = keras.Sequential([layers.Dense(8, activation="relu", input_shape=(5,)),
                          layers.BatchNormalization(), layers.Dense(2)], seed=3)
    m.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse", metrics=["mae"])
    start = m.get_weights()
    got = m.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history
    want = json.loads(run_keras(KERAS, json.dumps([a.tolist() for a in start]),
                                json.dumps(x.tolist()), json.dumps(y.tolist())
                                ).strip().splitlines()[-1])
    for key in ("loss", "mae"):
        np.testing.assert_allclose(got[key], want[key], rtol=1e-5, err_msg=key)


def test_a_stream_with_metrics_trains_as_without():
    x, y = data(32)
    runs = []
    for metrics in ((), ("mae",)):
        m = regression(metrics=metrics)
        h = m.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(8), epochs=2, verbose=0)
        runs.append((h.history["loss"], m.get_weights()))
    assert runs[0][0] == runs[1][0]
    assert all(np.array_equal(a, b) for a, b in zip(runs[0][1], runs[1][1]))
