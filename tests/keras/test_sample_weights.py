"""fit(sample_weight=, class_weight=), evaluate(sample_weight=) and the
batch calls' weights: the reported loss and the training against Keras 3
(its 'sum_over_batch_size' reduction: sum(w_i l_i) / n; metrics
unweighted), every engine against the NumPy reference, and the errors."""
import json

import numpy as np
import pytest

from cnncuda.keras import layers, losses, models, optimizers
from conftest import C_ENGINES, same_arrays

from conftest import run_keras  # noqa: E402

ENGINES = C_ENGINES + ["numpy"]


def data(n=40, seed=0):
    rng = np.random.RandomState(seed)
    return (rng.rand(n, 6).astype("float32"), rng.randint(0, 3, n),
            (rng.rand(n) * 2 + 0.1).astype("float32"))


def dense(device="cpu", loss="sparse", seed=1):
    m = models.Sequential([layers.Dense(5, activation="tanh", input_shape=(6,)),
                           layers.Dense(3, activation=None if loss == "sparse" else "softmax")],
                          seed=seed)
    lossobj = (losses.SparseCategoricalCrossentropy(from_logits=True) if loss == "sparse"
               else losses.CategoricalCrossentropy())
    m.compile(optimizer=optimizers.SGD(0.1, momentum=0.5), loss=lossobj, metrics=["accuracy"],
              device=device)
    return m


KERAS = """
import json, sys, numpy as np, keras
start = [np.array(w, np.float32) for w in json.loads(sys.argv[1])]
x = np.array(json.loads(sys.argv[2]), np.float32); y = np.array(json.loads(sys.argv[3]))
w = np.array(json.loads(sys.argv[4]), np.float32); kind = sys.argv[5]
onehot = kind == "categorical"
m = keras.Sequential([keras.Input((6,)), keras.layers.Dense(5, activation="tanh"),
                      keras.layers.Dense(3, activation="softmax" if onehot else None)])
m.set_weights(start)
loss = (keras.losses.CategoricalCrossentropy() if onehot
        else keras.losses.SparseCategoricalCrossentropy(from_logits=True))
m.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.5), loss=loss, metrics=["accuracy"])
out = {"eval": m.evaluate(x, y, sample_weight=w, verbose=0, batch_size=8)}
h = m.fit(x, y, sample_weight=w, batch_size=8, epochs=2, shuffle=False, verbose=0,
          validation_split=0.25)
out["fit"] = h.history
h = m.fit(x, y, class_weight={0: 2.0, 2: 0.5}, batch_size=8, epochs=1, shuffle=False, verbose=0)
out["class"] = h.history
out["batch"] = [m.train_on_batch(x[:8], y[:8], sample_weight=w[:8]),
                m.test_on_batch(x[:8], y[:8], sample_weight=w[:8])]
out["weights"] = [v.tolist() for v in m.get_weights()]
print(json.dumps(out))
"""


@pytest.mark.keras3
@pytest.mark.parametrize("kind", ["sparse", "categorical"])
def test_against_keras(kind):
    x, y, w = data()
    if kind == "categorical":
        y = np.eye(3, dtype=np.float32)[y]
    m = dense(loss=kind)
    start = m.get_weights()
    got = {"eval": m.evaluate(x, y, sample_weight=w, verbose=0, batch_size=8)}
    got["fit"] = m.fit(x, y, sample_weight=w, batch_size=8, epochs=2, shuffle=False, verbose=0,
                       validation_split=0.25).history
    got["class"] = m.fit(x, y, class_weight={0: 2.0, 2: 0.5}, batch_size=8, epochs=1,
                         shuffle=False, verbose=0).history
    got["batch"] = [m.train_on_batch(x[:8], y[:8], sample_weight=w[:8]),
                    m.test_on_batch(x[:8], y[:8], sample_weight=w[:8])]
    out = run_keras(KERAS, json.dumps([a.tolist() for a in start]), json.dumps(x.tolist()),
                    json.dumps(y.tolist()), json.dumps(w.tolist()), kind)
    want = json.loads(out.strip().splitlines()[-1])
    np.testing.assert_allclose(got["eval"], want["eval"], rtol=2e-5)
    for part in ("fit", "class"):
        for key in ("loss", "accuracy", "val_loss", "val_accuracy"):
            if key in want[part]:
                np.testing.assert_allclose(got[part][key], want[part][key], rtol=1e-4,
                                           err_msg="%s %s" % (part, key))
    np.testing.assert_allclose(got["batch"], want["batch"], rtol=1e-4)
    for a, b in zip(m.get_weights(), want["weights"]):
        np.testing.assert_allclose(a, np.array(b), rtol=1e-4, atol=1e-5)


def test_reported_loss_is_the_weighted_sum_over_n():
    x, y, w = data()
    m = dense()
    z = m.predict(x, verbose=0).astype(np.float64)
    per_sample = np.log(np.exp(z).sum(1)) - z[np.arange(len(y)), y]
    loss, acc = m.evaluate(x, y, sample_weight=w, verbose=0)
    assert loss == pytest.approx(float((w * per_sample).sum() / len(y)), rel=1e-5)
    assert acc == m.evaluate(x, y, verbose=0)[1]        # metrics unweighted
    ones = m.evaluate(x, y, sample_weight=np.ones(len(y)), verbose=0)
    assert ones == pytest.approx(m.evaluate(x, y, verbose=0), rel=1e-6)
    # validation_data's third element weights val_loss alone
    h = m.fit(x, y, validation_data=(x[:16], y[:16], w[:16]), batch_size=8, epochs=1,
              verbose=0)
    val_loss, val_acc = m.evaluate(x[:16], y[:16], sample_weight=w[:16], verbose=0)
    assert h.history["val_loss"][0] == pytest.approx(val_loss, rel=1e-6)
    assert h.history["val_accuracy"][0] == m.evaluate(x[:16], y[:16], verbose=0)[1]


@pytest.mark.parametrize("device", C_ENGINES)
@pytest.mark.parametrize("kind", ["sparse", "categorical"])
def test_engines_agree_with_the_reference(device, kind):
    x, y, w = data(48, seed=2)
    if kind == "categorical":
        y = np.eye(3, dtype=np.float32)[y]
    runs = []
    for engine in (device, "numpy"):
        m = dense(engine, kind)
        h = m.fit(x, y, sample_weight=w, batch_size=8, epochs=2, shuffle=False, verbose=0)
        h2 = m.fit(x, y, class_weight={1: 3.0}, batch_size=16, epochs=1, verbose=0,
                   shuffle=False)
        runs.append((m.get_weights(), h.history["loss"] + h2.history["loss"],
                     m.evaluate(x, y, sample_weight=w, verbose=0)))
    (wa, la, ea), (wb, lb, eb) = runs
    for a, b in zip(wa, wb):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(la, lb, rtol=1e-4)
    np.testing.assert_allclose(ea, eb, rtol=1e-4)


def test_weighted_then_unweighted_carries_the_optimizer_state():
    """Weighted calls run on a network built for them (the categorical loss
    of weighted targets): the weights, the optimizer's slots and its
    iterations go on from one kind of call to the other. Weights of 1 train
    as no weights (same bits on cpu)."""
    x, y, w = data()
    a, b = dense(), dense()
    a.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    a.fit(x, y, sample_weight=np.ones(len(x)), batch_size=8, epochs=1, shuffle=False, verbose=0)
    a.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    b.fit(x, y, batch_size=8, epochs=3, shuffle=False, verbose=0)
    assert a.optimizer.iterations == b.optimizer.iterations == 15
    for u, v in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_allclose(u, v, rtol=1e-6, atol=1e-7)


def test_bad_weights_are_named():
    x, y, w = data(16)
    m = dense()
    with pytest.raises(ValueError, match=r"sample_weight: expected shape \(16,\)"):
        m.fit(x, y, sample_weight=w[:5], verbose=0)
    with pytest.raises(ValueError, match=r"sample_weight\[3\]: expected finite weights >= 0"):
        m.fit(x, y, sample_weight=np.where(np.arange(16) == 3, -1.0, 1.0), verbose=0)
    with pytest.raises(ValueError, match=r"sample_weight\[2\].*not 0"):
        m.evaluate(x, y, sample_weight=np.where(np.arange(16) == 2, 0.0, 1.0), verbose=0)
    with pytest.raises(ValueError, match="at the same time"):
        m.fit(x, y, sample_weight=w, class_weight={0: 1.0}, verbose=0)
    with pytest.raises(TypeError, match="class_weight: expected a dict"):
        m.fit(x, y, class_weight=[1.0, 2.0], verbose=0)
    with pytest.raises(ValueError, match=r"class_weight\[%d\]: expected finite" % y[0]):
        m.fit(x, y, class_weight={int(y[0]): float("nan")}, verbose=0)
    with pytest.raises(TypeError, match="sample_weight: expected an array"):
        m.train_on_batch(x, y, sample_weight="heavy")
    with pytest.raises(ValueError, match=r"validation_data\[2\]: expected shape \(4,\)"):
        m.fit(x, y, validation_data=(x[:4], y[:4], w), verbose=0)
    before = m.get_weights()
    assert all(same_arrays(a, b) for a, b in zip(before, m.get_weights()))
    assert m.optimizer.iterations == 0          # nothing ran
    # the binary cross-entropy takes weights too (its loss op weights each row):
    # a zero weight leaves its sample out, the mean still over n
    binary = models.Sequential([layers.Dense(1, activation="sigmoid", input_shape=(6,))])
    binary.compile(optimizer="sgd", loss="binary_crossentropy", metrics=["accuracy"])
    yb, keep = (y > 0).astype("float32"), (np.arange(16) < 8).astype("float32")
    assert binary.evaluate(x, yb, sample_weight=keep, verbose=0)[0] == pytest.approx(
        binary.evaluate(x[:8], yb[:8], verbose=0)[0] / 2, rel=1e-6)

    def gen():
        while True:
            yield x[:8], y[:8]
    # Keras 3 takes class_weight with a Dataset or PyDataset, not a generator
    # (tests/data/test_stream_weights_inputs.py)
    with pytest.raises(ValueError, match="Argument `class_weight` is not supported for Python "
                                         "generator inputs"):
        m.fit(gen(), steps_per_epoch=1, class_weight={0: 2.0}, verbose=0)


def test_zero_weights_without_metrics():
    """Without an accuracy, a weight of 0 leaves its sample out of the
    gradient (its loss counts 0, the mean still over n)."""
    x, y, _ = data(16)
    m = models.Sequential([layers.Dense(3, input_shape=(6,))], seed=3)
    m.compile(optimizer=optimizers.SGD(0.5),
              loss=losses.SparseCategoricalCrossentropy(from_logits=True), device="cpu")
    keep = np.arange(16) < 8
    full = m.evaluate(x[:8], y[:8], verbose=0)
    assert m.evaluate(x, y, sample_weight=keep.astype("float32"), verbose=0) == \
        pytest.approx(full / 2, rel=1e-6)


KERAS_HOST = """
import json, sys, numpy as np, keras
start = [np.array(v, np.float32) for v in json.loads(sys.argv[1])]
x = np.array(json.loads(sys.argv[2]), np.float32); y = np.array(json.loads(sys.argv[3]), np.float32)
w = np.array(json.loads(sys.argv[4]), np.float32)
m = keras.Sequential([keras.Input((6,)), keras.layers.Dense(5, activation="tanh"),
                      keras.layers.Dense(3, activation="softmax")])
m.set_weights(start)
m.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.5),
          loss=keras.losses.CategoricalCrossentropy(), metrics=["accuracy", "mse", "auc"])
out = {"eval": m.evaluate(x, y, sample_weight=w, verbose=0, batch_size=8)}
out["fit"] = m.fit(x, y, sample_weight=w, batch_size=8, epochs=2, shuffle=False, verbose=0,
                   validation_split=0.25).history
out["batch"] = [m.train_on_batch(x[:8], y[:8], sample_weight=w[:8]),
                m.test_on_batch(x[:8], y[:8], sample_weight=w[:8])]
print(json.dumps(out))
"""


@pytest.mark.keras3
def test_weights_with_host_metrics_as_keras():
    """Host-computed metrics ('mse', 'auc') beside sample weights: the loss
    weighted, the metrics given as `metrics=` unweighted, as Keras 3 (fit
    with validation_split, evaluate, the batch calls)."""
    x, y, w = data()
    y = np.eye(3, dtype=np.float32)[y]
    m = dense(loss="categorical")
    m.compile(optimizer=optimizers.SGD(0.1, momentum=0.5), loss=losses.CategoricalCrossentropy(),
              metrics=["accuracy", "mse", "auc"], device="cpu")
    start = m.get_weights()
    got = {"eval": m.evaluate(x, y, sample_weight=w, verbose=0, batch_size=8)}
    got["fit"] = m.fit(x, y, sample_weight=w, batch_size=8, epochs=2, shuffle=False, verbose=0,
                       validation_split=0.25).history
    got["batch"] = [m.train_on_batch(x[:8], y[:8], sample_weight=w[:8]),
                    m.test_on_batch(x[:8], y[:8], sample_weight=w[:8])]
    out = run_keras(KERAS_HOST, json.dumps([a.tolist() for a in start]), json.dumps(x.tolist()),
                    json.dumps(y.tolist()), json.dumps(w.tolist()))
    want = json.loads(out.strip().splitlines()[-1])
    np.testing.assert_allclose(got["eval"], want["eval"], rtol=1e-4)
    assert sorted(got["fit"]) == sorted(want["fit"])
    for key in want["fit"]:
        np.testing.assert_allclose(got["fit"][key], want["fit"][key], rtol=1e-4, err_msg=key)
    np.testing.assert_allclose(got["batch"], want["batch"], rtol=1e-4)
    # unweighted: the metrics of a weighted evaluate are the unweighted ones
    plain = m.evaluate(x, y, verbose=0)
    weighted = m.evaluate(x, y, sample_weight=w, verbose=0)
    assert weighted[1:] == plain[1:] and weighted[0] != plain[0]
