"""A subclassed model in Keras 3's files (cnncuda/keras_subclassed.py):
.keras both ways with Keras 3 (the class registered or given as
custom_objects; attributes in an order other than call's, a list of
layers, a nested Sequential, a block), training going on from the file's
optimizer state in either; .h5 written as Keras writes it and refused on
load, as Keras 3 cannot load it either."""
import json

import numpy as np
import pytest

import cnncuda as tf
from conftest import run_keras

keras = tf.keras
layers = keras.layers

MODEL = """
@keras.saving.register_keras_serializable(package="demo")
class Block(layers.Layer):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.a = layers.Dense(4, use_bias=False)
        self.b = layers.BatchNormalization()

    def call(self, x, training=False):
        return self.b(self.a(x), training=training)


@keras.saving.register_keras_serializable(package="demo")
class Tickets(keras.Model):
    def __init__(self, units=6, **kw):
        super().__init__(**kw)
        self.units = units
        self.z = layers.Dense(units, activation="relu")
        # (a Dropout of rate 0: no masks, so both sides train alike)
        self.stack = [layers.Dense(5, activation="tanh"), layers.Dropout(0.0)]
        self.inner = keras.Sequential([keras.Input((5,)), layers.Dense(4, activation="relu")])
        self.blk = Block()
        self.head = layers.Dense(3)

    def call(self, x, training=False):
        x = self.z(x)
        for layer in self.stack:
            x = layer(x, training=training)
        return self.head(self.blk(self.inner(x), training=training))

    def get_config(self):
        config = super().get_config()
        config.update(units=self.units)
        return config
"""

scope = {"keras": keras, "layers": layers}
exec(MODEL, scope)
Tickets = scope["Tickets"]


def data(n=24):
    rng = np.random.RandomState(0)
    return rng.rand(n, 7).astype("float32"), rng.randint(0, 3, n)


def compiled(model):
    # SGD with momentum: its step is linear in the gradient, so the two sides agree closely
    model.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.9), metrics=["accuracy"],
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


KERAS_GOES_ON = """
import json, sys, numpy as np, keras
from keras import layers
""" + MODEL + """
x = np.load(sys.argv[2]); y = np.load(sys.argv[3])
m = keras.models.load_model(sys.argv[1])
out = {"class": type(m).__name__, "units": m.units, "name": m.name,
       "layers": [type(layer).__name__ for layer in m.layers],
       "iterations": int(m.optimizer.iterations.numpy()),
       "predict": m.predict(x, verbose=0).tolist()}
m.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
out["after"] = m.predict(x, verbose=0).tolist()
m.save(sys.argv[4])
print(json.dumps(out))
"""


@pytest.mark.keras3
def test_keras_file_both_ways_with_keras_and_training_goes_on(tmp_path):
    pytest.importorskip("h5py")
    x, y = data()
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    m = compiled(Tickets(units=6, name="tickets"))
    m.fit(x, y, batch_size=8, epochs=2, verbose=0)
    m.save(tmp_path / "mine.keras")
    out = run_keras(KERAS_GOES_ON, tmp_path / "mine.keras", tmp_path / "x.npy",
                    tmp_path / "y.npy", tmp_path / "theirs.keras")
    want = json.loads(out.strip().splitlines()[-1])
    assert want["class"] == "Tickets" and want["units"] == 6 and want["name"] == "tickets"
    # (the names are each process's own: Keras makes the layers again)
    assert want["layers"] == [type(layer).__name__ for layer in m.layers]
    assert want["iterations"] == 6
    np.testing.assert_allclose(m.predict(x, verbose=0), want["predict"], rtol=1e-5, atol=1e-6)
    # Keras's step from the file's momentum is cnncuda's next step
    m.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    np.testing.assert_allclose(m.predict(x, verbose=0), want["after"], rtol=1e-4, atol=1e-5)
    # and back: Keras's file (its class registered here too) loads and goes on
    back = keras.models.load_model(tmp_path / "theirs.keras")
    assert type(back) is Tickets and back.units == 6
    np.testing.assert_allclose(back.predict(x, verbose=0), want["after"], rtol=1e-5,
                               atol=1e-6)
    assert back.optimizer.iterations == 9
    back.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    m.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    np.testing.assert_allclose(back.predict(x, verbose=0), m.predict(x, verbose=0),
                               rtol=1e-4, atol=1e-5)


def test_a_class_not_registered_loads_with_custom_objects(tmp_path):
    pytest.importorskip("h5py")

    class Plain(keras.Model):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.d = layers.Dense(2)

        def call(self, x):
            return self.d(x)

    m = Plain()
    x = np.ones((3, 4), np.float32)
    m(x)
    m.save(tmp_path / "p.keras")
    with pytest.raises(Exception, match=r"could not locate class 'Plain'.*custom_objects"):
        keras.models.load_model(tmp_path / "p.keras")
    back = keras.models.load_model(tmp_path / "p.keras", custom_objects={"Plain": Plain})
    assert np.array_equal(back.predict(x, verbose=0), m.predict(x, verbose=0))
    assert back.loss is None        # saved uncompiled


KERAS_H5 = """
import json, sys, numpy as np, keras, h5py
from keras import layers
""" + MODEL + """
m = Tickets(units=6, name="tickets")
m(np.zeros((2, 7), "float32"))
m.save(sys.argv[1])
f = h5py.File(sys.argv[1])
g = f["model_weights"]
print(json.dumps({"config": json.loads(f.attrs["model_config"]),
                  "layers": [n.decode() if isinstance(n, bytes) else n
                             for n in g.attrs["layer_names"]],
                  "names": {k.decode() if isinstance(k, bytes) else k:
                            [n.decode() if isinstance(n, bytes) else n
                             for n in g[k].attrs["weight_names"]]
                            for k in g.attrs["layer_names"]}}))
"""


@pytest.mark.keras3
def test_h5_written_as_keras_writes_it_and_refused_on_load(tmp_path):
    h5py = pytest.importorskip("h5py")
    out = run_keras(KERAS_H5, tmp_path / "theirs.h5")
    want = json.loads(out.strip().splitlines()[-1])
    tf.utils.set_random_seed(1)
    m = Tickets(units=6, name="tickets")
    m(np.zeros((2, 7), np.float32))
    m.save(tmp_path / "mine.h5")
    with h5py.File(tmp_path / "mine.h5") as f:
        config = json.loads(f.attrs["model_config"])
        g = f["model_weights"]
        names = [n.decode() if isinstance(n, bytes) else n for n in g.attrs["layer_names"]]
        weight_names = [[n.decode() if isinstance(n, bytes) else n
                         for n in g[k].attrs["weight_names"]] for k in names]
    assert config["class_name"] == want["config"]["class_name"] == "Tickets"
    assert config["config"]["units"] == 6 and config["config"]["name"] == "tickets"
    assert len(names) == len(want["layers"])
    # the same layers and weights, named by this session's layer names
    assert [len(w) for w in weight_names] == [len(want["names"][k]) for k in want["layers"]]

    def tails(lists):       # each weight's own name (kernel, gamma, ...)
        return [[n.split("/")[-1] for n in group] for group in lists]
    assert tails(weight_names) == tails(want["names"][k] for k in want["layers"])
    assert [len(w[0].split("/")) if w else 0 for w in weight_names] == \
        [len(want["names"][k][0].split("/")) if want["names"][k] else 0 for k in want["layers"]]
    for path in (tmp_path / "mine.h5", tmp_path / "theirs.h5"):
        with pytest.raises(Exception, match="subclassed model .*Keras 3 writes such .h5 files "
                                            "but cannot load them either"):
            keras.models.load_model(path, custom_objects={"Tickets": Tickets})


KERAS_PREDICTS = """
import sys, numpy as np, keras
x = np.load(sys.argv[2])
print(float(np.abs(keras.models.load_model(sys.argv[1]).predict(x, verbose=0)
                   - np.load(sys.argv[3])).max()))
"""


@pytest.mark.keras3
@pytest.mark.parametrize("ext", [".keras", ".h5"])
def test_a_nested_subclassed_model_is_written_as_its_traced_graph(ext, tmp_path):
    """Inside a Sequential or functional model, a subclassed model (a block
    in it, attributes in another order than call's) is written as the
    functional model of its traced graph, its Input first: it loads here and
    in Keras 3 with the same predictions."""
    pytest.importorskip("h5py")

    class Inner(keras.Model):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.head = layers.Dense(3)
            self.blk = scope["Block"]()

        def call(self, x, training=False):
            return self.head(self.blk(x, training=training))

    x = np.random.RandomState(2).rand(6, 5).astype("float32")
    np.save(tmp_path / "x.npy", x)
    i = keras.Input((5,))
    for name, model in (("seq", keras.Sequential([keras.Input((5,)), Inner(),
                                                  layers.Dense(2)])),
                        ("fun", keras.Model(i, layers.Dense(2)(Inner()(i))))):
        path = tmp_path / (name + ext)
        model.save(path)
        mine = model.predict(x, verbose=0)
        np.save(tmp_path / (name + ".npy"), mine)
        back = keras.models.load_model(path)
        np.testing.assert_array_equal(back.predict(x, verbose=0), mine)
        out = run_keras(KERAS_PREDICTS, path, tmp_path / "x.npy", tmp_path / (name + ".npy"))
        assert float(out.strip().splitlines()[-1]) < 1e-5
