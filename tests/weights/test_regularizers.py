"""Regularizers (cnncuda.regularizers): the engines' regularize op against the
NumPy reference, the penalty in the loss fit and evaluate report, Keras 3's
numbers, configs and errors."""

import numpy as np
import pytest

import cnncuda as tf
from cnncuda import layers, regularizers
from cnncuda.engine import make_net
from cnncuda.models import Sequential

from conftest import run_keras, engine_params

SPARSE = {"kind": "sparse_categorical_crossentropy", "from_logits": True}
NET = [{"kind": "conv2d", "units": 5, "kernel": (3, 3), "kernel_l1": 0.01, "kernel_l2": 0.02,
        "bias_l2": 0.5},
       {"kind": "activation", "activation": "relu"}, {"kind": "flatten"},
       {"kind": "dense", "units": 3, "kernel_l2": 0.1, "bias_l1": 0.3}]


def _data(n=7, shape=(6, 5, 2), seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n,) + shape).astype("f4"), rng.integers(0, 3, n)


def _perturbed(net, seed=1):
    """Weights with nonzero biases (so the bias penalties and signs count)."""
    rng = np.random.default_rng(seed)
    w = [a + rng.standard_normal(a.shape).astype("f4") * 0.1 for a in net.get_weights()]
    w[1][0] = 0.0                        # sign(0) = 0
    return w


@pytest.mark.parametrize("engine", engine_params())
def test_gradients_and_loss_match_the_reference(engine):
    x, y = _data()
    ref = make_net("numpy", NET, (6, 5, 2), 8, SPARSE, {"kind": "sgd"}, seed=4)
    ref64 = tf.reference.NumpyNet(NET, (6, 5, 2), 8, SPARSE, {"kind": "sgd"}, seed=4,
                                  dtype=np.float64)
    net = make_net(engine, NET, (6, 5, 2), 8, SPARSE, {"kind": "sgd"}, seed=4)
    w = _perturbed(ref)
    for n in (ref, ref64, net):
        n.set_weights(w)
    loss_ref, _ = ref.compute_gradients(x, y)
    loss64, _ = ref64.compute_gradients(x, y)
    loss, _ = net.compute_gradients(x, y)
    penalty = sum(l1 * np.abs(a.astype("f8")).sum() + l2 * np.square(a.astype("f8")).sum()
                  for a, l1, l2 in ((w[0], 0.01, 0.02), (w[1], 0, 0.5), (w[2], 0, 0.1),
                                    (w[3], 0.3, 0)))
    plain = make_net("numpy", [{k: v for k, v in d.items() if "_l" not in k} for d in NET],
                     (6, 5, 2), 8, SPARSE, {"kind": "sgd"}, seed=4)
    plain.set_weights(w)
    assert np.isclose(loss_ref, plain.compute_gradients(x, y)[0] + len(x) * penalty, rtol=1e-6)
    assert np.isclose(loss, loss64, rtol=1e-5)
    for g, g_ref, g64 in zip(net.get_gradients(), ref.get_gradients(), ref64.get_gradients()):
        np.testing.assert_allclose(g, g64, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(g_ref, g64, rtol=1e-4, atol=1e-5)
    # the penalty's gradient: l1 sign(w) + 2 l2 w, sign(0) = 0
    grads = plain.get_gradients()
    np.testing.assert_allclose(ref.get_gradients()[1], grads[1] + 2 * 0.5 * w[1], rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(ref.get_gradients()[3], grads[3] + 0.3 * np.sign(w[3]),
                               rtol=1e-5, atol=1e-6)
    # evaluate reports the penalty with the loss (each batch's mean loss + penalty)
    assert np.isclose(net.evaluate(x, y)[0], plain.evaluate(x, y)[0] + len(x) * penalty,
                      rtol=1e-5)


@pytest.mark.parametrize("engine", engine_params())
@pytest.mark.parametrize("units", [1, 37, 1000])
def test_large_weights_penalty_and_gradient(engine, units):
    """Weights of up to 37000 elements (the GPU engines' one-block sum
    strides over them): loss and gradients against the float64 reference."""
    layer_dicts = [{"kind": "dense", "units": units, "kernel_l1": 0.003, "kernel_l2": 0.02,
                    "bias_l1": 0.5, "bias_l2": 0.25},
                   {"kind": "activation", "activation": "tanh"},
                   {"kind": "dense", "units": 3, "kernel_l2": 1e-3}]
    rng = np.random.default_rng(units)
    x = rng.standard_normal((9, 37)).astype("f4")
    y = rng.integers(0, 3, 9)
    ref = tf.reference.NumpyNet(layer_dicts, (37,), 9, SPARSE, {"kind": "sgd"}, seed=1,
                                dtype=np.float64)
    net = make_net(engine, layer_dicts, (37,), 9, SPARSE, {"kind": "sgd"}, seed=1)
    w = [a + rng.standard_normal(a.shape).astype("f4") * 0.2 for a in net.get_weights()]
    ref.set_weights(w)
    net.set_weights(w)
    loss, _ = net.compute_gradients(x, y)
    loss_ref, _ = ref.compute_gradients(x, y)
    assert np.isclose(loss, loss_ref, rtol=1e-5)
    for g, g_ref in zip(net.get_gradients(), ref.get_gradients()):
        np.testing.assert_allclose(g, g_ref, rtol=1e-4, atol=1e-5)
    assert np.isclose(net.evaluate(x, y)[0], ref.evaluate(x, y)[0], rtol=1e-5)


@pytest.mark.parametrize("engine", engine_params(("cpu", "omp")))
def test_omp_gives_the_cpu_bits(engine):
    x, y = _data(n=16)
    out = []
    for device in ("cpu", engine + (":3" if engine == "omp" else "")):
        net = make_net(device, NET, (6, 5, 2), 8, SPARSE, {"kind": "adam"}, seed=4)
        net.set_data(x, y)
        net.set_order(np.arange(16, dtype=np.int32))
        net.train_range(0, 16, 5)
        out.append((net.read_sums(), net.get_weights()))
    assert out[0][0] == out[1][0]
    assert all(np.array_equal(a, b) for a, b in zip(out[0][1], out[1][1]))


@pytest.mark.parametrize("engine", ["numpy"] + engine_params())
def test_fit_trains_with_the_penalty_on_every_engine(engine):
    x, y = _data(n=24)
    runs = {}
    for device in ("numpy", engine):
        m = Sequential([layers.Conv2D(3, 2, kernel_regularizer=regularizers.l1_l2(0.01, 0.02),
                                      bias_regularizer="l2", input_shape=(6, 5, 2)),
                        layers.Flatten(),
                        layers.Dense(3, kernel_regularizer=regularizers.L2(0.05))], seed=2)
        m.compile(optimizer="adam", device=device,
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        h = m.fit(x, y, batch_size=8, epochs=3, verbose=0, shuffle=False)
        runs[device] = (h.history["loss"], m.evaluate(x, y, verbose=0), m.get_weights())
    assert np.isfinite(runs["numpy"][0]).all()
    np.testing.assert_allclose(runs[engine][0], runs["numpy"][0], rtol=1e-5)
    assert np.isclose(runs[engine][1], runs["numpy"][1], rtol=1e-5)
    for a, b in zip(runs[engine][2], runs["numpy"][2]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.keras3
def test_reported_losses_and_training_are_keras_3s(tmp_path):
    """Keras 3 adds the penalties to the loss that fit and evaluate report and
    to the gradient; the same model, weights and SGD steps give its numbers."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((20, 6)).astype("f4")
    y = rng.integers(0, 3, 20)
    m = Sequential([layers.Dense(5, activation="relu", kernel_regularizer=regularizers.l2(0.05),
                                 bias_regularizer=regularizers.l2(0.1), input_shape=(6,)),
                    layers.Dense(3, kernel_regularizer=regularizers.L1L2(l1=0.01, l2=0.03))],
                   seed=3)
    w = [a + 0.05 for a in m.get_weights()]      # nonzero biases, no weight at 0
    m.set_weights(w)
    m.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              device="cpu")
    before = m.evaluate(x, y, verbose=0)
    h = m.fit(x, y, batch_size=8, epochs=2, verbose=0, shuffle=False)
    after = m.evaluate(x, y, verbose=0)
    np.savez(tmp_path / "in.npz", x=x, y=y, *w)
    out = run_keras("""
        import sys, json, numpy as np, keras
        d = np.load(sys.argv[1])
        r = keras.regularizers
        m = keras.Sequential([keras.Input((6,)),
            keras.layers.Dense(5, activation="relu", kernel_regularizer=r.l2(0.05),
                               bias_regularizer=r.l2(0.1)),
            keras.layers.Dense(3, kernel_regularizer=r.L1L2(l1=0.01, l2=0.03))])
        m.set_weights([d["arr_%d" % i] for i in range(4)])
        m.compile(optimizer=keras.optimizers.SGD(0.1), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        before = m.evaluate(d["x"], d["y"], verbose=0)
        h = m.fit(d["x"], d["y"], batch_size=8, epochs=2, verbose=0, shuffle=False)
        after = m.evaluate(d["x"], d["y"], verbose=0)
        np.savez(sys.argv[2], *m.get_weights())
        print(json.dumps([before, h.history["loss"], after]))
    """, tmp_path / "in.npz", tmp_path / "out.npz")
    import json
    k_before, k_loss, k_after = json.loads(out.strip().splitlines()[-1])
    assert np.isclose(before, k_before, rtol=1e-5)
    assert np.isfinite(h.history["loss"]).all()
    np.testing.assert_allclose(h.history["loss"], k_loss, rtol=1e-5)
    assert np.isclose(after, k_after, rtol=1e-5)
    theirs = np.load(tmp_path / "out.npz")
    for i, a in enumerate(m.get_weights()):
        np.testing.assert_allclose(a, theirs["arr_%d" % i], rtol=1e-4, atol=1e-6)


def test_regularizer_objects_configs_and_errors():
    assert regularizers.get("l2").get_config() == {"l2": 0.01}
    assert regularizers.get("l1").get_config() == {"l1": 0.009999999776482582}   # as Keras 3
    assert regularizers.l1_l2().get_config() == {"l1": 0.0, "l2": 0.0}     # Keras 3's
    assert regularizers.l1_l2(0.01, 0.02).get_config() == {"l1": 0.01, "l2": 0.02}
    assert regularizers.L1L2(l2=0.1).get_config() == {"l1": 0.0, "l2": 0.1}
    reg = tf.keras.regularizers.L1L2(0.5, 0.25)
    assert np.isclose(reg(np.array([1.0, -2.0])), 0.5 * 3 + 0.25 * 5)
    assert regularizers.deserialize(regularizers.serialize(reg)) == reg
    layer = layers.Dense(2, kernel_regularizer="l1_l2", bias_regularizer=regularizers.l2(0.3))
    config = layer.get_config()
    assert config["kernel_regularizer"]["class_name"] == "L1L2"
    back = layers.Dense.from_config(config)
    assert back.bias_regularizer == regularizers.L2(0.3)
    with pytest.raises(ValueError, match="kernel_regularizer: expected one of 'l1', 'l2'"):
        layers.Dense(2, kernel_regularizer="l3")
    with pytest.raises(ValueError, match="l2"):
        regularizers.l2(-1.0)
    with pytest.raises(ValueError, match="activity_regularizer: expected None"):
        layers.Conv2D(2, 3, activity_regularizer="l2")
    with pytest.raises(TypeError, match="bias_regularizer: .*custom regularizer functions"):
        layers.Dense(2, bias_regularizer=lambda w: 0.0)
    with pytest.raises(ValueError, match="regularizer factors must be finite"):
        make_net("cpu", [{"kind": "dense", "units": 2, "kernel_l2": -1.0}], (3,), 4, SPARSE,
                 {"kind": "sgd"})
