"""Datasets, generators and PyDatasets with sample weights (batches (x, y,
sample_weight)), class_weight= (a Dataset's or PyDataset's, per batch) and
x of several inputs (a tuple or a dict by the Inputs' names): against
Keras 3, and on every engine as fit over the same arrays."""
import json

import numpy as np
import pytest

import cnncuda as tf
from cnncuda.keras import layers, losses, models, optimizers
from conftest import engine_params, run_keras

ENGINES = engine_params()


def device_of(engine):
    return "omp:2" if engine == "omp" else engine


def data(n=40, seed=0):
    rng = np.random.RandomState(seed)
    return (rng.rand(n, 6).astype("float32"), rng.randint(0, 3, n),
            (rng.rand(n) * 2 + 0.1).astype("float32"))


def dense(device="cpu", seed=1, loss="sparse"):
    m = models.Sequential([layers.Dense(5, activation="tanh", input_shape=(6,)),
                           layers.Dense(3)], seed=seed)
    lossobj = (losses.SparseCategoricalCrossentropy(from_logits=True) if loss == "sparse"
               else losses.MeanSquaredError())
    m.compile(optimizer=optimizers.SGD(0.1, momentum=0.5), loss=lossobj, metrics=["accuracy"]
              if loss == "sparse" else None, device=device)
    return m


class Batches(tf.keras.utils.PyDataset):
    def __init__(self, parts, size):
        super().__init__()
        self.parts, self.size = parts, size

    def __len__(self):
        return -(-len(self.parts[0]) // self.size)

    def __getitem__(self, i):
        return tuple(p[i * self.size:(i + 1) * self.size] for p in self.parts)


KERAS_WEIGHTS = """
import json, sys, numpy as np, keras
start = [np.array(w, np.float32) for w in json.loads(sys.argv[1])]
x = np.array(json.loads(sys.argv[2]), np.float32); y = np.array(json.loads(sys.argv[3]))
w = np.array(json.loads(sys.argv[4]), np.float32)

class Batches(keras.utils.PyDataset):
    def __init__(self, parts, size):
        super().__init__()
        self.parts, self.size = parts, size
    def __len__(self):
        return -(-len(self.parts[0]) // self.size)
    def __getitem__(self, i):
        return tuple(p[i * self.size:(i + 1) * self.size] for p in self.parts)

m = keras.Sequential([keras.Input((6,)), keras.layers.Dense(5, activation="tanh"),
                      keras.layers.Dense(3)])
m.set_weights(start)
m.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.5), metrics=["accuracy"],
          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
out = {"eval": m.evaluate(Batches((x, y, w), 8), verbose=0)}
out["fit"] = m.fit(Batches((x, y, w), 8), epochs=2, shuffle=False, verbose=0,
                   validation_data=Batches((x[:16], y[:16], w[:16]), 8)).history
out["class"] = m.fit(Batches((x, y), 8), class_weight={0: 2.0, 2: 0.5}, epochs=1,
                     shuffle=False, verbose=0).history
out["weights"] = [v.tolist() for v in m.get_weights()]
print(json.dumps(out))
"""


@pytest.mark.keras3
def test_weighted_batches_and_class_weight_against_keras():
    x, y, w = data()
    m = dense()
    start = m.get_weights()
    got = {"eval": m.evaluate(Batches((x, y, w), 8), verbose=0)}
    got["fit"] = m.fit(Batches((x, y, w), 8), epochs=2, shuffle=False, verbose=0,
                       validation_data=Batches((x[:16], y[:16], w[:16]), 8)).history
    got["class"] = m.fit(Batches((x, y), 8), class_weight={0: 2.0, 2: 0.5}, epochs=1,
                         shuffle=False, verbose=0).history
    out = run_keras(KERAS_WEIGHTS, json.dumps([a.tolist() for a in start]),
                    json.dumps(x.tolist()), json.dumps(y.tolist()), json.dumps(w.tolist()))
    want = json.loads(out.strip().splitlines()[-1])
    np.testing.assert_allclose(got["eval"], want["eval"], rtol=2e-5)
    for part in ("fit", "class"):
        assert set(got[part]) == set(want[part])
        for key in want[part]:
            np.testing.assert_allclose(got[part][key], want[part][key], rtol=1e-4,
                                       err_msg="%s %s" % (part, key))
    for a, b in zip(m.get_weights(), want["weights"]):
        np.testing.assert_allclose(a, np.array(b), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("loss", ["sparse", "mse"])
def test_weighted_streams_train_as_weighted_arrays(engine, loss):
    """A Dataset of (x, y, w), a generator of weighted batches and
    class_weight with a Dataset give fit over the arrays with
    sample_weight / class_weight (same batches, no shuffle), bit for bit."""
    device = device_of(engine)
    x, labels, w = data(44, seed=3)
    y = labels if loss == "sparse" else np.eye(3, dtype=np.float32)[labels]
    runs = []
    for how in ("arrays", "dataset", "generator"):
        m = dense(device, loss=loss)
        if how == "arrays":
            h = m.fit(x, y, sample_weight=w, batch_size=8, epochs=2, shuffle=False, verbose=0,
                      validation_data=(x[:12], y[:12], w[:12]))
            h2 = m.fit(x, y, class_weight={1: 3.0, 2: 0.25}, batch_size=8, epochs=1,
                       shuffle=False, verbose=0)
            e = m.evaluate(x, y, sample_weight=w, batch_size=8, verbose=0)
        else:
            if how == "dataset":
                stream = tf.data.Dataset.from_tensor_slices((x, y, w)).batch(8)
            else:
                stream = ((x[i:i + 8], y[i:i + 8], w[i:i + 8]) for k in range(2)
                          for i in range(0, 44, 8))
            h = m.fit(stream, epochs=2, verbose=0, steps_per_epoch=None if how == "dataset"
                      else 6, validation_data=(x[:12], y[:12], w[:12]))
            h2 = m.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(8),
                       class_weight={1: 3.0, 2: 0.25}, epochs=1, verbose=0)
            e = m.evaluate(tf.data.Dataset.from_tensor_slices((x, y, w)).batch(8), verbose=0)
        runs.append((h.history, h2.history, e, m.get_weights()))
    for other in runs[1:]:
        assert other[0] == runs[0][0] and other[1] == runs[0][1]
        np.testing.assert_allclose(other[2], runs[0][2], rtol=1e-6)
        assert all(np.array_equal(a, b) for a, b in zip(other[3], runs[0][3]))


def test_weights_in_some_batches_only_and_weights_of_one():
    """Batches without weights among weighted ones count with weight 1, as
    in Keras; weights of one give the unweighted fit."""
    x, y, w = data(32)
    ones = np.ones(32, np.float32)
    a, b, c = dense(), dense(), dense()
    a.fit(x, y, sample_weight=np.concatenate([w[:16], ones[16:]]), batch_size=8, epochs=1,
          shuffle=False, verbose=0)
    mixed = [(x[i:i + 8], y[i:i + 8], w[i:i + 8]) if i < 16 else (x[i:i + 8], y[i:i + 8])
             for i in range(0, 32, 8)]
    b.fit(iter(mixed), epochs=1, verbose=0)
    assert all(np.array_equal(u, v) for u, v in zip(a.get_weights(), b.get_weights()))
    # weights from the third batch on: the network changes to the weighted
    # one within the epoch, the weights and optimizer state carried
    late = [(x[i:i + 8], y[i:i + 8]) if i < 16 else (x[i:i + 8], y[i:i + 8], w[i:i + 8])
            for i in range(0, 32, 8)]
    e, f = dense(), dense()
    he = e.fit(x, y, sample_weight=np.concatenate([ones[:16], w[16:]]), batch_size=8,
               epochs=1, shuffle=False, verbose=0)
    hf = f.fit(iter(late), epochs=1, verbose=0)
    np.testing.assert_allclose(hf.history["loss"], he.history["loss"], rtol=1e-6)
    for u, v in zip(e.get_weights(), f.get_weights()):
        np.testing.assert_allclose(u, v, rtol=1e-6, atol=1e-7)
    c.fit(tf.data.Dataset.from_tensor_slices((x, y, ones)).batch(8), epochs=1, verbose=0)
    d = dense()
    d.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    for u, v in zip(c.get_weights(), d.get_weights()):
        np.testing.assert_allclose(u, v, rtol=1e-6, atol=1e-7)
    # predict ignores a batch's y and weights
    assert np.array_equal(c.predict(tf.data.Dataset.from_tensor_slices((x, y, w)).batch(8),
                                    verbose=0), c.predict(x, verbose=0))


def test_weight_refusals_name_what_is_wrong():
    x, y, w = data(16)
    m = dense()
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(8)
    with pytest.raises(ValueError, match="When providing `x` as a Dataset, `sample_weight` "
                                         "should not be passed"):
        m.fit(ds, sample_weight=w, verbose=0)
    with pytest.raises(ValueError, match="When providing `x` as a PyDataset, `sample_weight`"):
        m.evaluate(Batches((x, y), 8), sample_weight=w, verbose=0)
    with pytest.raises(ValueError, match="Argument `class_weight` is not supported for Python "
                                         "generator inputs"):
        m.fit(iter([(x, y)]), class_weight={0: 1.0}, verbose=0)
    with pytest.raises(TypeError, match="class_weight: expected a dict"):
        m.fit(ds, class_weight=[1.0, 2.0], verbose=0)
    with pytest.raises(ValueError, match="You cannot `class_weight` and `sample_weight` at the "
                                         "same time"):
        m.fit(tf.data.Dataset.from_tensor_slices((x, y, w)).batch(8), class_weight={0: 2.0},
              verbose=0)
    with pytest.raises(ValueError, match=r"x's sample_weight: expected shape \(8,\)"):
        m.fit(iter([(x[:8], y[:8], w[:4])]), verbose=0)
    with pytest.raises(ValueError, match=r"x: expected batches x, \(x,\), \(x, y\) or \(x, y, "
                                         r"sample_weight\), got a tuple of 4"):
        m.fit(iter([(x, y, w, w)]), verbose=0)
    assert m.optimizer.iterations == 0          # nothing trained


def several_inputs(device="cpu", seed=4):
    a = tf.keras.Input((4,), name="a")
    b = tf.keras.Input((3, 2), name="b")
    joined = layers.Concatenate()([layers.Dense(5, activation="relu")(a),
                                   layers.Flatten()(b)])
    m = tf.keras.Model([a, b], layers.Dense(3)(joined), seed=seed)
    m.compile(optimizer=optimizers.Adam(0.01), metrics=["accuracy"], device=device,
              loss=losses.SparseCategoricalCrossentropy(from_logits=True))
    return m


def two_inputs_data(n=30, seed=1):
    rng = np.random.RandomState(seed)
    return (rng.rand(n, 4).astype("float32"), rng.rand(n, 3, 2).astype("float32"),
            rng.randint(0, 3, n), (rng.rand(n) + 0.5).astype("float32"))


@pytest.mark.parametrize("engine", ENGINES)
def test_streams_of_several_inputs_train_as_the_arrays(engine):
    """Batches ((xa, xb), y), ({'a': xa, 'b': xb}, y, w), a PyDataset of
    ([xa, xb], y) and a generator: as fit over the arrays."""
    device = device_of(engine)
    xa, xb, y, w = two_inputs_data()
    runs = []
    for how in ("arrays", "tuple", "dict", "pydataset", "generator"):
        m = several_inputs(device)
        kwargs = dict(epochs=2, verbose=0)
        if how == "arrays":
            h = m.fit([xa, xb], y, batch_size=8, shuffle=False, **kwargs)
            h2 = m.fit({"a": xa, "b": xb}, y, sample_weight=w, batch_size=8, shuffle=False,
                       verbose=0)
        else:
            if how == "tuple":
                s = tf.data.Dataset.from_tensor_slices(((xa, xb), y)).batch(8)
            elif how == "dict":
                s = tf.data.Dataset.from_tensor_slices(({"a": xa, "b": xb}, y)).batch(8)
            elif how == "pydataset":
                class Pairs(tf.keras.utils.PyDataset):
                    def __len__(self):
                        return 4

                    def __getitem__(self, i):
                        rows = slice(8 * i, 8 * i + 8)
                        return [xa[rows], xb[rows]], y[rows]
                s = Pairs()
                kwargs["shuffle"] = False
            else:
                s = (((xa[i:i + 8], xb[i:i + 8]), y[i:i + 8]) for k in range(2)
                     for i in range(0, 30, 8))
                kwargs["steps_per_epoch"] = 4
            h = m.fit(s, **kwargs)
            h2 = m.fit(tf.data.Dataset.from_tensor_slices(({"a": xa, "b": xb}, y, w)).batch(8),
                       verbose=0)
        ds = tf.data.Dataset.from_tensor_slices(((xa, xb), y)).batch(8)
        runs.append((h.history, h2.history, m.get_weights(), m.evaluate(ds, verbose=0),
                     m.predict(tf.data.Dataset.from_tensor_slices(((xa, xb),)).batch(8),
                               verbose=0)))
    first = runs[0]
    for other in runs[1:]:
        assert other[0] == first[0] and other[1] == first[1]
        assert all(np.array_equal(a, b) for a, b in zip(other[2], first[2]))
        assert other[3] == first[3]
        assert np.array_equal(other[4], first[4])
    m = several_inputs(device)
    m.set_weights(first[2])
    again = m.predict([xa, xb], batch_size=8, verbose=0)
    if engine == "cudnn":   # a new network times cuDNN's algorithms again: its own last bits
        np.testing.assert_allclose(again, first[4], rtol=1e-5, atol=1e-6)
    else:
        assert np.array_equal(again, first[4])


KERAS_INPUTS = """
import json, sys, numpy as np, keras
start = [np.array(w, np.float32) for w in json.loads(sys.argv[1])]
xa, xb, y, w = [np.array(v, np.float32) for v in json.loads(sys.argv[2])]
a = keras.Input((4,), name="a"); b = keras.Input((3, 2), name="b")
joined = keras.layers.Concatenate()([keras.layers.Dense(5, activation="relu")(a),
                                     keras.layers.Flatten()(b)])
m = keras.Model([a, b], keras.layers.Dense(3)(joined))
m.set_weights(start)
m.compile(optimizer=keras.optimizers.Adam(0.01), metrics=["accuracy"],
          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))

class Named(keras.utils.PyDataset):
    def __len__(self):
        return 4
    def __getitem__(self, i):
        rows = slice(8 * i, 8 * i + 8)
        return {"a": xa[rows], "b": xb[rows]}, y[rows], w[rows]

out = {"fit": m.fit(Named(), epochs=2, shuffle=False, verbose=0).history}
out["eval"] = m.evaluate(Named(), verbose=0)
out["predict"] = m.predict(Named(), verbose=0).tolist()
out["weights"] = [v.tolist() for v in m.get_weights()]
print(json.dumps(out))
"""


@pytest.mark.keras3
def test_several_inputs_by_name_with_weights_against_keras():
    xa, xb, y, w = two_inputs_data(32)
    m = several_inputs()
    start = m.get_weights()

    class Named(tf.keras.utils.PyDataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            rows = slice(8 * i, 8 * i + 8)
            return {"a": xa[rows], "b": xb[rows]}, y[rows], w[rows]

    got = {"fit": m.fit(Named(), epochs=2, shuffle=False, verbose=0).history}
    got["eval"] = m.evaluate(Named(), verbose=0)
    got["predict"] = m.predict(Named(), verbose=0)
    out = run_keras(KERAS_INPUTS, json.dumps([a.tolist() for a in start]),
                    json.dumps([v.tolist() for v in (xa, xb, y, w)]))
    want = json.loads(out.strip().splitlines()[-1])
    for key in want["fit"]:
        np.testing.assert_allclose(got["fit"][key], want["fit"][key], rtol=1e-4, err_msg=key)
    np.testing.assert_allclose(got["eval"], want["eval"], rtol=1e-4)
    np.testing.assert_allclose(got["predict"], want["predict"], rtol=1e-4, atol=1e-5)
    for a, b in zip(m.get_weights(), want["weights"]):
        np.testing.assert_allclose(a, np.array(b), rtol=1e-4, atol=1e-5)


def test_several_inputs_streams_name_what_is_wrong():
    xa, xb, y, _ = two_inputs_data(16)
    m = several_inputs()
    with pytest.raises(TypeError, match="x: the model has 2 inputs"):
        m.fit(tf.data.Dataset.from_tensor_slices((xa, y)).batch(8), verbose=0)
    with pytest.raises(ValueError, match=r"x: a dict of inputs needs the keys \['a', 'b'\]"):
        m.fit(tf.data.Dataset.from_tensor_slices(({"a": xa}, y)).batch(8), verbose=0)
    with pytest.raises(ValueError, match=r"x\[1\]: expected shape \(None, 3, 2\)"):
        m.evaluate(iter([((xa, xa), y)]), verbose=0)
    assert m.optimizer.iterations == 0
