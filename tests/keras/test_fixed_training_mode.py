"""A fixed training= on a layer call inside a model, as Keras 3.15 runs it:
in a subclassed model's call (and a block's), training=False keeps the
layer in inference mode in fit too (Dropout passes x through, a frozen
BatchNormalization, a nested frozen model); in a functional graph Keras 3
gives every layer the model call's own mode, so the graph's training=
changes nothing. Against Keras 3, and on every engine."""
import json

import numpy as np
import pytest

import cnncuda as tf
from cnncuda.keras import layers, losses, optimizers
from conftest import engine_params, run_keras

keras = tf.keras


def device_of(engine):
    return "omp:2" if engine == "omp" else engine


def data(n=32, seed=0):
    rng = np.random.RandomState(seed)
    return rng.rand(n, 6).astype("float32") * 3, rng.randint(0, 3, n)


def compiled(model, device="cpu"):
    model.compile(optimizer=optimizers.SGD(0.1), device=device,
                  loss=losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


class Fixed(keras.Model):
    """Dropout and a frozen BatchNormalization fixed in inference mode."""

    def __init__(self, fixed=True, **kwargs):
        super().__init__(**kwargs)
        self.fixed = fixed
        self.d1 = layers.Dense(8, activation="relu")
        self.drop = layers.Dropout(0.5)
        self.bn = layers.BatchNormalization(trainable=False)
        self.d2 = layers.Dense(3)

    def call(self, x, training=False):
        mode = False if self.fixed else training
        return self.d2(self.bn(self.drop(self.d1(x), training=mode), training=mode))


KERAS_SUBCLASSED = """
import json, sys, numpy as np, keras
from keras import layers
start = [np.array(w, np.float32) for w in json.loads(sys.argv[1])]
x = np.array(json.loads(sys.argv[2]), np.float32); y = np.array(json.loads(sys.argv[3]))

class Fixed(keras.Model):
    def __init__(self):
        super().__init__()
        self.d1 = layers.Dense(8, activation="relu")
        self.drop = layers.Dropout(0.5)
        self.bn = layers.BatchNormalization(trainable=False)
        self.d2 = layers.Dense(3)
    def call(self, x, training=False):
        return self.d2(self.bn(self.drop(self.d1(x), training=False), training=False))

m = Fixed()
m(x[:1])
m.set_weights(start)
m.compile(optimizer=keras.optimizers.SGD(0.1),
          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
out = {"fit": m.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history}
out["predict"] = m.predict(x, verbose=0).tolist()
out["weights"] = [v.tolist() for v in m.get_weights()]
print(json.dumps(out))
"""


@pytest.mark.keras3
def test_a_subclassed_models_fixed_inference_calls_against_keras():
    x, y = data()
    m = compiled(Fixed())
    m.build((None, 6))
    rng = np.random.RandomState(3)
    start = [w + (rng.rand(*w.shape).astype("float32") * 0.5 if i in (4, 5) else 0)
             for i, w in enumerate(m.get_weights())]        # moving statistics of the BN
    m.set_weights(start)
    got = m.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history
    out = run_keras(KERAS_SUBCLASSED, json.dumps([a.tolist() for a in start]),
                    json.dumps(x.tolist()), json.dumps(y.tolist()))
    want = json.loads(out.strip().splitlines()[-1])
    np.testing.assert_allclose(got["loss"], want["fit"]["loss"], rtol=1e-5)
    np.testing.assert_allclose(m.predict(x, verbose=0), want["predict"], rtol=1e-5, atol=1e-6)
    for a, b in zip(m.get_weights(), want["weights"]):
        np.testing.assert_allclose(a, np.array(b), rtol=1e-5, atol=1e-6)
    assert np.array_equal(m.get_weights()[4], start[4])     # moving mean not updated


@pytest.mark.parametrize("engine", engine_params())
def test_fixed_inference_dropout_trains_as_no_dropout(engine):
    """Dropout fixed in inference mode passes x through in fit: the model
    trains as the same model without the Dropout, bit for bit; the frozen
    BatchNormalization keeps its moving statistics."""
    device = device_of(engine)
    x, y = data(40)

    class Plain(keras.Model):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.d1 = layers.Dense(8, activation="relu")
            self.bn = layers.BatchNormalization(trainable=False)
            self.d2 = layers.Dense(3)

        def call(self, x, training=False):
            return self.d2(self.bn(self.d1(x), training=training))

    runs = []
    for model in (Fixed(seed=2), Plain(seed=2), Fixed(fixed=False, seed=2)):
        model = compiled(model, device)
        model.build((None, 6))
        if not runs:
            start = model.get_weights()
        else:
            model.set_weights(start)
        h = model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
        runs.append((h.history["loss"], model.get_weights(), model.predict(x, verbose=0)))
    (lf, wf, pf), (lp, wp, pp), (lt, wt, _) = runs
    assert lf == lp and all(np.array_equal(a, b) for a, b in zip(wf, wp))
    assert np.array_equal(pf, pp)
    assert lt != lf         # the Dropout that follows the mode drops in fit
    assert np.array_equal(wf[4], start[4]) and np.array_equal(wf[5], start[5])


def test_a_fixed_inference_nested_frozen_model_as_keras_transfer_learning():
    """Keras's transfer-learning guide in a subclassed model: a frozen base
    (Dropout, BatchNormalization inside) called with training=False runs in
    inference mode in fit; a head on it trains."""
    x, y = data(24)
    inp = keras.Input((6,))
    h = layers.BatchNormalization()(layers.Dense(8, activation="relu")(inp))
    base = keras.Model(inp, layers.Dropout(0.5)(h), seed=1)
    base.trainable = False

    class Head(keras.Model):
        def __init__(self, base, **kwargs):
            super().__init__(**kwargs)
            self.base, self.out = base, layers.Dense(3)

        def call(self, x, training=False):
            return self.out(self.base(x, training=False))

    m = compiled(Head(base, seed=4))
    before = base.get_weights()
    features = base.predict(x, verbose=0)
    m.fit(x, y, batch_size=8, epochs=1, verbose=0)
    assert all(np.array_equal(a, b) for a, b in zip(base.get_weights(), before))
    # the head trained on the base's inference-mode features
    head = compiled(keras.Sequential([layers.Dense(3, input_shape=(8,))]))
    head.set_weights(m.get_weights()[-2:])
    np.testing.assert_allclose(m.predict(x, verbose=0), head.predict(features, verbose=0),
                               rtol=1e-6, atol=1e-6)


KERAS_FUNCTIONAL = """
import json, sys, numpy as np, keras
from keras import layers
start = [np.array(w, np.float32) for w in json.loads(sys.argv[1])]
x = np.array(json.loads(sys.argv[2]), np.float32); y = np.array(json.loads(sys.argv[3]))
i = keras.Input((6,))
h = layers.BatchNormalization()(layers.Dense(8, activation="relu")(i), training=False)
m = keras.Model(i, layers.Dense(3)(h))
m.set_weights(start)
m.compile(optimizer=keras.optimizers.SGD(0.1),
          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
out = {"fit": m.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history}
out["weights"] = [v.tolist() for v in m.get_weights()]
print(json.dumps(out))
"""


@pytest.mark.keras3
def test_a_functional_graphs_training_argument_follows_the_mode_as_keras():
    """Keras 3 passes the model call's mode to every layer of a functional
    graph: a BatchNormalization called with training=False there still
    normalizes by the batch and updates its statistics in fit."""
    x, y = data()
    i = keras.Input((6,))
    h = layers.BatchNormalization()(layers.Dense(8, activation="relu")(i), training=False)
    m = compiled(keras.Model(i, layers.Dense(3)(h), seed=5))
    drop = layers.Dropout(0.5)
    j = keras.Input((6,))
    with_true = keras.Model(j, layers.Dense(3)(drop(j, training=True)), seed=5)
    assert with_true._engine_layers()[0] == {"kind": "dropout", "rate": 0.5}
    start = m.get_weights()
    got = m.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history
    out = run_keras(KERAS_FUNCTIONAL, json.dumps([a.tolist() for a in start]),
                    json.dumps(x.tolist()), json.dumps(y.tolist()))
    want = json.loads(out.strip().splitlines()[-1])
    np.testing.assert_allclose(got["loss"], want["fit"]["loss"], rtol=1e-5)
    for a, b in zip(m.get_weights(), want["weights"]):
        np.testing.assert_allclose(a, np.array(b), rtol=1e-4, atol=1e-6)
    assert not np.array_equal(m.get_weights()[4], start[4])     # moving mean updated


def test_fixed_modes_that_cannot_run_are_refused_naming_them():
    x, y = data(8)

    class MonteCarlo(keras.Model):
        def __init__(self):
            super().__init__()
            self.drop, self.d = layers.Dropout(0.5), layers.Dense(3)

        def call(self, x, training=False):
            return self.d(self.drop(x, training=True))

    with pytest.raises(ValueError, match=r"training=True, but layer \"dropout.*\" \(Dropout\) "
                                         r"would then run in training mode in evaluate and "
                                         r"predict too"):
        MonteCarlo().predict(x, verbose=0)

    class Crop(keras.Model):
        def __init__(self):
            super().__init__()
            self.crop, self.f, self.d = (layers.RandomCrop(4, 4), layers.Flatten(),
                                         layers.Dense(2))

        def call(self, x, training=False):
            return self.d(self.f(self.crop(x, training=False)))

    with pytest.raises(ValueError, match=r"RandomCrop\) changes the image's shape"):
        Crop().build((None, 6, 6, 1))


def test_augmentation_fixed_in_inference_passes_x_through():
    class Flip(keras.Model):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.flip, self.f, self.d = (layers.RandomFlip(), layers.Flatten(), layers.Dense(2))

        def call(self, x, training=False):
            return self.d(self.f(self.flip(x, training=False)))

    m = Flip(seed=1)
    m.build((None, 5, 5, 1))
    x = np.random.RandomState(0).rand(6, 5, 5, 1).astype("float32")
    np.testing.assert_array_equal(m(x, training=True), m.predict(x, verbose=0))


def test_fixed_modes_survive_the_models_files(tmp_path):
    """cnncuda's file, a copy and a pickle keep the calls' fixed mode."""
    import copy
    import pickle
    x, y = data(16)
    m = compiled(Fixed(seed=3))
    m.fit(x, y, batch_size=8, epochs=1, verbose=0)
    m.save(tmp_path / "m.cnn")
    back = keras.models.load_model(tmp_path / "m.cnn", custom_objects={"Fixed": Fixed})
    for other in (back, copy.deepcopy(m), pickle.loads(pickle.dumps(m))):
        assert other._engine_layers() == m._engine_layers()
        assert {"kind": "dropout", "rate": 0.0} in other._engine_layers()
        np.testing.assert_array_equal(other(x, training=True), m.predict(x, verbose=0))


KERAS_TRAINABLE_BN = """
import json, sys, numpy as np, keras
from keras import layers
start = [np.array(w, np.float32) for w in json.loads(sys.argv[1])]
x = np.array(json.loads(sys.argv[2]), np.float32); y = np.array(json.loads(sys.argv[3]))

class Head(keras.Model):
    def __init__(self):
        super().__init__()
        self.d1 = layers.Dense(8, activation="relu")
        self.bn = layers.BatchNormalization()
        self.d2 = layers.Dense(3)
    def call(self, x, training=False):
        return self.d2(self.bn(self.d1(x), training=False))

m = Head()
m(x[:1])
m.set_weights(start)
m.compile(optimizer=keras.optimizers.SGD(0.1),
          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
out = {"fit": m.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history}
out["weights"] = [v.tolist() for v in m.get_weights()]
print(json.dumps(out))
"""


class TrainableBN(keras.Model):
    """A trainable BatchNormalization called with training=False: inference
    mode in fit, its gamma and beta trained (Keras's fine-tuning of a base
    model whose call keeps training=False)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.d1 = layers.Dense(8, activation="relu")
        self.bn = layers.BatchNormalization()
        self.d2 = layers.Dense(3)

    def call(self, x, training=False):
        return self.d2(self.bn(self.d1(x), training=False))


@pytest.mark.keras3
def test_a_trainable_batchnorm_in_inference_mode_trains_gamma_and_beta_as_keras():
    x, y = data()
    m = compiled(TrainableBN(seed=6))
    m.build((None, 6))
    rng = np.random.RandomState(1)
    start = [w + (rng.rand(*w.shape).astype("float32") * 0.5 if i in (4, 5) else 0)
             for i, w in enumerate(m.get_weights())]
    m.set_weights(start)
    assert {"kind": "batchnorm", "momentum": 0.99, "epsilon": 1e-3, "inference": True} in \
        m._engine_layers()
    got = m.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history
    out = run_keras(KERAS_TRAINABLE_BN, json.dumps([a.tolist() for a in start]),
                    json.dumps(x.tolist()), json.dumps(y.tolist()))
    want = json.loads(out.strip().splitlines()[-1])
    np.testing.assert_allclose(got["loss"], want["fit"]["loss"], rtol=1e-5)
    for a, b in zip(m.get_weights(), want["weights"]):
        np.testing.assert_allclose(a, np.array(b), rtol=1e-5, atol=1e-6)
    after = m.get_weights()
    assert not np.array_equal(after[2], start[2]) and not np.array_equal(after[3], start[3])
    assert np.array_equal(after[4], start[4]) and np.array_equal(after[5], start[5])


@pytest.mark.parametrize("engine", engine_params())
def test_the_inference_mode_batchnorm_of_a_training_step_agrees_with_the_reference(engine):
    """The engine layer {'kind': 'batchnorm', 'inference': True}: the
    forward, the input's gradient and gamma's and beta's on every engine
    against the NumPy reference (odd sizes; images and features)."""
    from conftest import run_both
    rng = np.random.default_rng(4)
    for shape, layers_ in (((5, 7, 3), [{"kind": "conv2d", "units": 5, "kernel": (3, 3)},
                                        {"kind": "batchnorm", "inference": True},
                                        {"kind": "flatten"}, {"kind": "dense", "units": 3}]),
                           ((11,), [{"kind": "dense", "units": 9},
                                    {"kind": "batchnorm", "inference": True, "epsilon": 0.01},
                                    {"kind": "dense", "units": 3}])):
        from cnncuda.engine import make_net
        from conftest import SPARSE_LOGITS, ADAM
        probe = make_net("numpy", layers_, shape, 7, SPARSE_LOGITS, ADAM, seed=3)
        weights = [w + rng.random(w.shape).astype(np.float32) * 0.5
                   for w in probe.get_weights()]     # moving statistics away from 0 and 1
        run_both(device_of(engine), layers_, shape, 7, weights=weights, rtol=1e-4, atol=1e-5)
