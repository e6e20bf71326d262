"""Freezing (trainable=False): the optimizer skips a frozen layer's weights on
every engine (values and optimizer slots unchanged), a frozen
BatchNormalization runs in inference mode in training as Keras 3's, and the
model's weight lists and counts are Keras's."""
import json

import numpy as np
import pytest

import cnncuda as tf
from cnncuda import layers
from cnncuda.engine import make_net
from cnncuda.models import Sequential

from conftest import run_keras, engine_params

SPARSE = {"kind": "sparse_categorical_crossentropy", "from_logits": True}


def _data(n=24, shape=(7, 6, 3), seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n,) + shape).astype("f4"), rng.integers(0, 4, n)


def _model(seed=1):
    return Sequential([layers.Conv2D(4, 3, input_shape=(7, 6, 3), trainable=False),
                       layers.BatchNormalization(), layers.Activation("relu"),
                       layers.Flatten(), layers.Dense(6, activation="relu"),
                       layers.Dense(4, activation="softmax")], seed=seed)


@pytest.mark.parametrize("engine", ["numpy"] + engine_params())
@pytest.mark.parametrize("optimizer", ["adam", "sgd", "rmsprop", "adamw"])
def test_the_optimizer_skips_frozen_weights(engine, optimizer):
    x, y = _data()
    m = _model()
    m.layers[4].trainable = False                   # the first Dense, before compile
    m.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy", device=engine)
    before = m.get_weights()
    m.fit(x, y, batch_size=8, epochs=2, verbose=0)
    after = m.get_weights()
    assert all(np.isfinite(a).all() for a in after)
    frozen = {0, 1, 6, 7}                            # conv kernel, bias; dense kernel, bias
    for i, (a, b) in enumerate(zip(before, after)):
        assert np.array_equal(a, b) == (i in frozen), i
    state = m._net.get_optimizer_state()
    assert len(state["slots"]) == len(m.trainable_weights) == 4


@pytest.mark.parametrize("engine", engine_params())
def test_frozen_layers_train_as_the_reference(engine):
    x, y = _data()
    out = {}
    for device in ("numpy", engine):
        m = Sequential([layers.Conv2D(4, 3, input_shape=(7, 6, 3)),
                        layers.BatchNormalization(trainable=False),
                        layers.Activation("relu"), layers.Flatten(),
                        layers.Dense(6, trainable=False),
                        layers.Dense(4, activation="softmax")], seed=3)
        w = m.get_weights()
        w[2] = w[2] + 0.5                              # gamma
        w[4] = w[4] + 0.1                              # moving mean
        w[5] = w[5] * 2.0                              # moving variance
        m.set_weights(w)
        m.compile(optimizer="adam", loss="sparse_categorical_crossentropy", device=device)
        h = m.fit(x, y, batch_size=8, epochs=2, verbose=0, shuffle=False)
        out[device] = (h.history["loss"], m.get_weights(), w)
    assert np.isfinite(out["numpy"][0]).all()
    np.testing.assert_allclose(out[engine][0], out["numpy"][0], rtol=1e-5)
    for a, b in zip(out[engine][1], out["numpy"][1]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    w0, w1 = out[engine][2], out[engine][1]
    for i in (2, 3, 4, 5, 6, 7):                       # the frozen batchnorm and dense
        assert np.array_equal(w0[i], w1[i]), i
    assert not np.array_equal(w0[0], w1[0])


@pytest.mark.parametrize("engine", engine_params())
def test_frozen_batchnorm_backward_matches_the_reference(engine):
    layer_dicts = [{"kind": "conv2d", "units": 3, "kernel": (2, 2)},
                   {"kind": "batchnorm", "trainable": False}, {"kind": "flatten"},
                   {"kind": "dense", "units": 4}]
    x, y = _data(n=5)
    ref = tf.reference.NumpyNet(layer_dicts, (7, 6, 3), 8, SPARSE, {"kind": "sgd"}, seed=2,
                                dtype=np.float64)
    net = make_net(engine, layer_dicts, (7, 6, 3), 8, SPARSE, {"kind": "sgd"}, seed=2)
    w = net.get_weights()
    w[2], w[3] = w[2] * 1.5, w[3] + 0.2
    w[4], w[5] = w[4] - 0.3, w[5] * 0.7
    ref.set_weights(w)
    net.set_weights(w)
    loss, _ = net.compute_gradients(x, y)
    loss_ref, _ = ref.compute_gradients(x, y)
    assert np.isclose(loss, loss_ref, rtol=1e-5)
    assert len(net.get_gradients()) == 4                # conv and dense only
    for g, g_ref in zip(net.get_gradients(), ref.get_gradients()):
        np.testing.assert_allclose(g, g_ref, rtol=1e-4, atol=1e-5)
    # inference mode: the training forward is predict's, moving statistics kept
    np.testing.assert_allclose(net.forward(x, training=True), net.predict(x), rtol=0, atol=0)
    assert all(np.array_equal(a, b) for a, b in zip(net.get_weights(), w))


def test_weight_lists_counts_and_summary():
    m = _model()
    assert [v.name for v in m.trainable_weights] == ["gamma", "beta", "kernel", "bias", "kernel",
                                                     "bias"]
    assert [v.name for v in m.non_trainable_weights] == ["kernel", "bias", "moving_mean",
                                                         "moving_variance"]
    assert m.count_params() == 112 + 16 + 486 + 28
    assert m.layers[0].trainable_weights == [] and len(m.layers[0].non_trainable_weights) == 2
    lines = []
    m.summary(print_fn=lines.append)
    assert "Trainable params: {:,}".format(8 + 486 + 28) in lines
    assert "Non-trainable params: {:,}".format(112 + 8) in lines
    m.trainable = False
    assert not any(layer.trainable for layer in m.layers) and m.trainable_weights == []
    m.trainable = True
    assert all(layer.trainable for layer in m.layers)
    assert m.layers[0].get_config()["trainable"] is True
    with pytest.raises(TypeError, match="trainable: expected"):
        m.layers[0].trainable = "no"


def test_freezing_after_training_needs_a_compile_as_keras_3():
    x, y = _data()
    m = _model()
    m.compile(optimizer="adam", loss="sparse_categorical_crossentropy", device="cpu")
    m.fit(x, y, epochs=1, verbose=0)
    m.layers[5].trainable = False
    m.predict(x, verbose=0)                             # inference is unaffected
    with pytest.raises(ValueError, match="compile the model again"):
        m.fit(x, y, epochs=1, verbose=0)
    m.compile(optimizer="adam", loss="sparse_categorical_crossentropy", device="cpu")
    before = m.layers[5].get_weights()
    m.fit(x, y, epochs=1, verbose=0)
    assert all(np.array_equal(a, b) for a, b in zip(before, m.layers[5].get_weights()))


def test_freezing_after_compile_before_training_takes_effect():
    x, y = _data()
    m = _model()
    m.compile(optimizer="sgd", loss="sparse_categorical_crossentropy", device="cpu")
    m.predict(x, verbose=0)
    m.layers[5].trainable = False
    before = m.layers[5].get_weights()
    m.fit(x, y, epochs=1, verbose=0)
    assert all(np.array_equal(a, b) for a, b in zip(before, m.layers[5].get_weights()))


@pytest.mark.keras3
def test_frozen_training_is_keras_3s(tmp_path):
    """A frozen BatchNormalization (inference mode) and a frozen Dense: the
    same weights and SGD steps give Keras 3's losses and weights."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((16, 5)).astype("f4")
    y = rng.integers(0, 3, 16)
    m = Sequential([layers.Dense(6, input_shape=(5,)), layers.BatchNormalization(trainable=False),
                    layers.Dense(4, activation="relu", trainable=False), layers.Dense(3)], seed=4)
    w = m.get_weights()
    w[2], w[4], w[5] = w[2] * 1.3, w[4] + 0.2, w[5] * 1.5
    m.set_weights(w)
    m.compile(optimizer=tf.keras.optimizers.SGD(0.05), loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              device="cpu")
    h = m.fit(x, y, batch_size=4, epochs=2, verbose=0, shuffle=False)
    np.savez(tmp_path / "in.npz", x=x, y=y, *w)
    out = run_keras("""
        import sys, json, numpy as np, keras
        d = np.load(sys.argv[1])
        m = keras.Sequential([keras.Input((5,)), keras.layers.Dense(6),
                              keras.layers.BatchNormalization(trainable=False),
                              keras.layers.Dense(4, activation="relu", trainable=False),
                              keras.layers.Dense(3)])
        m.set_weights([d["arr_%d" % i] for i in range(10)])
        m.compile(optimizer=keras.optimizers.SGD(0.05), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        h = m.fit(d["x"], d["y"], batch_size=4, epochs=2, verbose=0, shuffle=False)
        np.savez(sys.argv[2], *m.get_weights())
        print(json.dumps([h.history["loss"], len(m.trainable_weights), m.count_params()]))
    """, tmp_path / "in.npz", tmp_path / "out.npz")
    k_loss, k_trainable, k_count = json.loads(out.strip().splitlines()[-1])
    assert np.isfinite(h.history["loss"]).all()
    np.testing.assert_allclose(h.history["loss"], k_loss, rtol=1e-5)
    assert len(m.trainable_weights) == k_trainable and m.count_params() == k_count
    theirs = np.load(tmp_path / "out.npz")
    for i, a in enumerate(m.get_weights()):
        np.testing.assert_allclose(a, theirs["arr_%d" % i], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("engine", ["numpy"] + engine_params())
def test_a_wholly_frozen_model_fits_and_changes_nothing(engine):
    x, y = _data()
    m = _model()
    m.trainable = False
    m.compile(optimizer="adam", loss="sparse_categorical_crossentropy", device=engine)
    before = m.get_weights()
    h = m.fit(x, y, batch_size=8, epochs=1, verbose=0)
    assert np.isfinite(h.history["loss"]).all()
    assert all(np.array_equal(a, b) for a, b in zip(before, m.get_weights()))
    assert m.trainable_weights == [] and m.optimizer.iterations == 3
