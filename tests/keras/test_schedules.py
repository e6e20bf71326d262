"""keras.optimizers.schedules as an optimizer's learning_rate: the values
against Keras 3's, fit on every engine against the rate set by hand before
each step, training against Keras 3 itself, configs and model files both
ways, and the errors."""
import json
import os
import sys

import numpy as np
import pytest

import cnncuda as tf
from cnncuda import chunks, schedules
from cnncuda.callbacks import Callback
from cnncuda.keras import layers, losses, models, optimizers
from conftest import C_ENGINES, same_arrays

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "data"))
from test_keras_files import run_keras  # noqa: E402

S = optimizers.schedules
ENGINES = C_ENGINES + ["numpy"]

CONFIGS = [
    ("ExponentialDecay", {"initial_learning_rate": 0.1, "decay_steps": 3, "decay_rate": 0.5}),
    ("ExponentialDecay", {"initial_learning_rate": 0.05, "decay_steps": 2.5, "decay_rate": 0.7,
                          "staircase": True}),
    ("PiecewiseConstantDecay", {"boundaries": [2, 5, 9], "values": [0.1, 0.05, 0.02, 0.01]}),
    ("PiecewiseConstantDecay", {"boundaries": [3.5], "values": [0.2, 0.1]}),
    ("CosineDecay", {"initial_learning_rate": 0.1, "decay_steps": 7, "alpha": 0.1}),
    ("CosineDecay", {"initial_learning_rate": 0.0, "decay_steps": 6, "warmup_target": 0.1,
                     "warmup_steps": 4}),
    ("InverseTimeDecay", {"initial_learning_rate": 0.1, "decay_steps": 2, "decay_rate": 0.5}),
    ("InverseTimeDecay", {"initial_learning_rate": 0.1, "decay_steps": 3, "decay_rate": 1.5,
                          "staircase": True}),
]
IDS = ["%s-%d" % (name, i) for i, (name, _) in enumerate(CONFIGS)]


def make(name, config):
    return getattr(S, name)(**config)


@pytest.mark.keras3
def test_values_match_keras():
    steps = list(range(0, 30)) + [100, 1001]
    out = run_keras("""
        import json, sys, keras
        configs, steps = json.loads(sys.argv[1]), json.loads(sys.argv[2])
        rows = []
        for name, config in configs:
            s = getattr(keras.optimizers.schedules, name)(**config)
            rows.append([float(s(t)) for t in steps])
        print(json.dumps(rows))
    """, json.dumps(CONFIGS), json.dumps(steps))
    want = json.loads(out.strip().splitlines()[-1])
    for (name, config), row in zip(CONFIGS, want):
        got = [make(name, config)(t) for t in steps]
        np.testing.assert_allclose(got, row, rtol=1e-6, atol=1e-9, err_msg=name)


@pytest.mark.parametrize("name, config", CONFIGS, ids=IDS)
def test_constant_steps_are_plateaus(name, config):
    """constant_steps(t) steps from t keep the rate; a staircase's and a
    piecewise schedule's runs end where the rate changes."""
    s = make(name, config)
    for t in range(40):
        n = s.constant_steps(t)
        assert n >= 1
        assert all(s(u) == s(t) for u in range(t, min(t + n, 60)))
        if name == "PiecewiseConstantDecay" or config.get("staircase"):
            if n < 1 << 20:
                assert s(t + n) != s(t)


def data(n=48, seed=0):
    rng = np.random.RandomState(seed)
    return rng.rand(n, 5, 5, 1).astype("float32"), rng.randint(0, 3, n)


def model(device, learning_rate, kind="sgd", seed=1):
    m = models.Sequential([layers.Conv2D(2, 3, activation="relu", input_shape=(5, 5, 1)),
                           layers.Flatten(), layers.Dense(3)], seed=seed)
    opt = optimizers.SGD(learning_rate) if kind == "sgd" else optimizers.Adam(learning_rate)
    m.compile(optimizer=opt, loss=losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"], device=device)
    return m


class SetRate(Callback):
    """Sets optimizer.learning_rate = schedule(iterations) before each step
    (fit then runs one step per engine call)."""

    def __init__(self, schedule):
        super().__init__()
        self.schedule = schedule

    def on_train_batch_begin(self, batch, logs=None):
        self.model.optimizer.learning_rate = self.schedule(self.model.optimizer.iterations)


@pytest.mark.parametrize("device", ENGINES)
@pytest.mark.parametrize("name, config", CONFIGS, ids=IDS)
def test_fit_equals_the_rate_set_before_each_step(device, name, config):
    """fit with a schedule trains as fit does with optimizer.learning_rate =
    schedule(iterations) set before each step by a callback: the same bits,
    the runs of constant rate in one engine call included; on the host
    engines as train_on_batch does with the rate set so too."""
    x, y = data()
    s = make(name, config)
    a = model(device, s, "adam")
    history = a.fit(x, y, batch_size=8, epochs=3, shuffle=False, verbose=0)
    b = model(device, 0.5, "adam")
    b.fit(x, y, batch_size=8, epochs=3, shuffle=False, verbose=0, callbacks=[SetRate(s)])
    assert a.optimizer.iterations == b.optimizer.iterations == 18
    for u, v in zip(a.get_weights(), b.get_weights()):
        assert same_arrays(u, v)
    assert a.optimizer.learning_rate == s(18)
    assert np.all(np.isfinite(history.history["loss"]))
    if device in ("cpu", "numpy") or device.startswith("omp"):
        c = model(device, 0.5, "adam")
        for _ in range(3):
            for i in range(0, len(x), 8):
                c.optimizer.learning_rate = s(c.optimizer.iterations)
                c.train_on_batch(x[i:i + 8], y[i:i + 8])
        for u, v in zip(a.get_weights(), c.get_weights()):
            assert same_arrays(u, v)


def test_a_user_schedule_and_a_stream():
    """A LearningRateSchedule subclass (its __call__ alone), in fit over a
    generator as over arrays."""
    class Halving(S.LearningRateSchedule):
        def __call__(self, step):
            return 0.1 / (1 + step // 2)

    x, y = data()
    a = model("cpu", Halving())
    a.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    b = model("cpu", Halving())

    def batches():
        while True:
            for i in range(0, len(x), 8):
                yield x[i:i + 8], y[i:i + 8]
    b.fit(batches(), steps_per_epoch=6, epochs=2, verbose=0)
    c = model("cpu", 1.0)
    for _ in range(2):
        for i in range(0, len(x), 8):
            c.optimizer.learning_rate = 0.1 / (1 + c.optimizer.iterations // 2)
            c.train_on_batch(x[i:i + 8], y[i:i + 8])
    for u, v, w in zip(a.get_weights(), b.get_weights(), c.get_weights()):
        assert same_arrays(u, v) and same_arrays(u, w)
    assert a.optimizer.learning_rate == pytest.approx(0.1 / 7)


@pytest.mark.keras3
def test_trains_as_keras_does():
    """SGD with momentum and an ExponentialDecay, in Keras 3 and here from
    the same weights: the step at iterations t uses schedule(t)."""
    rng = np.random.RandomState(3)
    x = rng.rand(40, 6).astype("float32")
    y = rng.randint(0, 4, 40)
    m = models.Sequential([layers.Dense(5, activation="tanh", input_shape=(6,)), layers.Dense(4)],
                          seed=2)
    s = S.ExponentialDecay(0.5, 2, 0.6)
    m.compile(optimizer=optimizers.SGD(s, momentum=0.5), device="cpu",
              loss=losses.SparseCategoricalCrossentropy(from_logits=True))
    start = m.get_weights()
    m.fit(x, y, batch_size=8, epochs=3, shuffle=False, verbose=0)
    out = run_keras("""
        import json, sys, numpy as np, keras
        start = [np.array(w, np.float32) for w in json.loads(sys.argv[1])]
        x = np.array(json.loads(sys.argv[2]), np.float32); y = np.array(json.loads(sys.argv[3]))
        m = keras.Sequential([keras.Input((6,)), keras.layers.Dense(5, activation="tanh"),
                              keras.layers.Dense(4)])
        m.set_weights(start)
        s = keras.optimizers.schedules.ExponentialDecay(0.5, 2, 0.6)
        m.compile(optimizer=keras.optimizers.SGD(s, momentum=0.5),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        m.fit(x, y, batch_size=8, epochs=3, shuffle=False, verbose=0)
        print(json.dumps([w.tolist() for w in m.get_weights()]))
    """, json.dumps([w.tolist() for w in start]), json.dumps(x.tolist()), json.dumps(y.tolist()))
    want = json.loads(out.strip().splitlines()[-1])
    for got, w in zip(m.get_weights(), want):
        np.testing.assert_allclose(got, np.array(w), rtol=1e-4, atol=1e-5)


def test_learning_rate_reads_and_sets_as_keras():
    s = S.PiecewiseConstantDecay([1], [0.1, 0.01])
    opt = optimizers.SGD(s)
    assert opt.learning_rate == pytest.approx(0.1) and opt.learning_rate_schedule is s
    with pytest.raises(TypeError, match="not settable"):
        opt.learning_rate = 0.5
    m = model("cpu", s)
    x, y = data(16)
    m.fit(x, y, batch_size=8, epochs=1, verbose=0)
    assert m.optimizer.iterations == 2 and m.optimizer.learning_rate == pytest.approx(0.01)
    m.optimizer.learning_rate = S.ExponentialDecay(0.2, 1, 0.5)     # another schedule: taken
    assert m.optimizer.learning_rate == pytest.approx(0.05)
    with pytest.raises(TypeError, match="learning_rate: expected a number >= 0 or a keras"):
        optimizers.Adam(lambda: 0.1)


def test_configs_round_trip():
    for name, config in CONFIGS:
        s = make(name, config)
        again = type(s).from_config(s.get_config())
        assert again.get_config() == s.get_config()
        assert [again(t) for t in range(12)] == [s(t) for t in range(12)]
        ser = schedules.serialize(s)
        assert ser["module"] == "keras.optimizers.schedules" and ser["class_name"] == name
        assert schedules.deserialize(ser).get_config() == s.get_config()
    opt = optimizers.Adam(S.CosineDecay(0.1, 10, warmup_target=0.2, warmup_steps=3))
    config = opt.get_config()
    assert config["learning_rate"]["class_name"] == "CosineDecay"
    again = optimizers.from_config("adam", config)
    assert again.learning_rate_schedule.get_config() == opt.learning_rate_schedule.get_config()


@pytest.mark.keras3
def test_keras_configs_are_keras_own():
    """get_config of each schedule and of an optimizer holding one equal
    Keras 3's (its serialized schedule)."""
    out = run_keras("""
        import json, sys, keras
        rows = []
        for name, config in json.loads(sys.argv[1]):
            s = getattr(keras.optimizers.schedules, name)(**config)
            rows.append([s.get_config(), keras.optimizers.SGD(s).get_config()["learning_rate"]])
        print(json.dumps(rows))
    """, json.dumps(CONFIGS))
    want = json.loads(out.strip().splitlines()[-1])
    for (name, config), (keras_config, keras_lr) in zip(CONFIGS, want):
        s = make(name, config)
        assert json.loads(json.dumps(s.get_config())) == keras_config
        assert json.loads(json.dumps(optimizers.SGD(s).get_config()["learning_rate"])) == keras_lr


@pytest.mark.parametrize("ext", [".cnn", ".keras"])
def test_saved_and_loaded_training_goes_on_exactly(ext, tmp_path):
    x, y = data()
    s = S.ExponentialDecay(0.01, 4, 0.5, staircase=True)
    a = model("cpu", s, "adam")
    a.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    path = str(tmp_path / ("m" + ext))
    a.save(path)
    b = tf.keras.models.load_model(path)
    assert b.optimizer.learning_rate_schedule.get_config() == s.get_config()
    assert b.optimizer.iterations == 6
    a.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    b.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    for u, v in zip(a.get_weights(), b.get_weights()):
        assert same_arrays(u, v)


@pytest.mark.keras3
def test_keras_files_both_ways(tmp_path):
    """A .keras file written here opens in Keras 3 with the schedule and its
    iterations; one Keras wrote opens here with them."""
    x, y = data(16)
    m = model("cpu", S.InverseTimeDecay(0.1, 2, 0.5), "adam")
    m.fit(x, y, batch_size=8, epochs=1, verbose=0)
    ours, theirs = str(tmp_path / "ours.keras"), str(tmp_path / "theirs.keras")
    m.save(ours)
    out = run_keras("""
        import json, sys, keras
        m = keras.models.load_model(sys.argv[1])
        s = m.optimizer._learning_rate
        print(json.dumps([type(s).__name__, s.get_config(), int(m.optimizer.iterations),
                          float(m.optimizer.learning_rate)]))
        m2 = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
        m2.compile(optimizer=keras.optimizers.Adam(
            keras.optimizers.schedules.PiecewiseConstantDecay([1], [0.1, 0.01])),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        import numpy as np
        m2.fit(np.ones((8, 4)), np.arange(8) % 2, batch_size=4, verbose=0)
        m2.save(sys.argv[2])
    """, ours, theirs)
    name, config, iterations, rate = json.loads(out.strip().splitlines()[-1])
    assert name == "InverseTimeDecay" and config == m.optimizer.learning_rate_schedule.get_config()
    assert iterations == 2 and rate == pytest.approx(m.optimizer.learning_rate, rel=1e-6)
    back = tf.keras.models.load_model(theirs)
    assert type(back.optimizer.learning_rate_schedule).__name__ == "PiecewiseConstantDecay"
    assert back.optimizer.iterations == 2
    assert back.optimizer.learning_rate == pytest.approx(0.01)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="decay_steps"):
        S.ExponentialDecay(0.1, 0, 0.5)
    with pytest.raises(ValueError, match="length of boundaries"):
        S.PiecewiseConstantDecay([1, 2], [0.1, 0.2])
    with pytest.raises(TypeError, match="staircase"):
        S.InverseTimeDecay(0.1, 2, 0.5, staircase="yes")
    with pytest.raises(ValueError, match="initial_learning_rate"):
        S.CosineDecay(-1.0, 10)
    with pytest.raises(ValueError, match="not one of cnncuda's"):
        schedules.deserialize({"class_name": "Mine", "config": {}})

    class Negative(S.LearningRateSchedule):
        def __call__(self, step):
            return -0.1
    m = model("cpu", 0.1)
    with pytest.raises(ValueError, match="returned -0.1 at step 0"):
        m.optimizer.learning_rate = Negative()
        m.fit(*data(8), verbose=0)


def test_rate_chunker_cuts_at_plateaus():
    class Opt:
        def constant_rate_steps(self):
            return 3
    chunker = chunks.RateChunker(chunks.StepChunker(1.0, 100), Opt())
    chunker.chunker.size = 10
    assert chunker.next(0) == 3
    assert chunks.RateChunker(chunks.StepChunker(1.0, 100), optimizers.SGD(0.1)).next(0) == 1


def test_deepcopy_keeps_a_user_schedule():
    """copy.deepcopy of a model whose optimizer holds a schedule of the
    user's (no get_config): the copy has its own copy and trains on alike."""
    import copy

    class Halving(S.LearningRateSchedule):
        def __call__(self, step):
            return 0.1 / (1 + step // 2)
    x, y = data()
    a = model("cpu", Halving(), "adam")
    a.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    b = copy.deepcopy(a)
    assert type(b.optimizer.learning_rate_schedule).__name__ == "Halving"
    assert b.optimizer.learning_rate_schedule is not a.optimizer.learning_rate_schedule
    for m in (a, b):
        m.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    for u, v in zip(a.get_weights(), b.get_weights()):
        assert same_arrays(u, v)
    with pytest.raises(NotImplementedError, match="get_config"):
        a.save("/nonexistent/m.cnn")


def test_a_strategy_group_follows_the_schedule_and_the_weights():
    """Under MirroredStrategy (two cpu replicas), a schedule and
    sample_weight train as on one model."""
    from cnncuda import distribute
    x, y = data(64)
    w = np.linspace(0.2, 2.0, 64).astype("float32")
    s = S.PiecewiseConstantDecay([3], [0.05, 0.01])
    one = model("cpu", s, "adam")
    h1 = one.fit(x, y, sample_weight=w, batch_size=16, epochs=2, shuffle=False, verbose=0)
    strategy = distribute.MirroredStrategy(devices=["cpu", "cpu"])
    with strategy.scope():
        two = model(None, S.PiecewiseConstantDecay([3], [0.05, 0.01]), "adam")
    h2 = two.fit(x, y, sample_weight=w, batch_size=16, epochs=2, shuffle=False, verbose=0)
    np.testing.assert_allclose(h2.history["loss"], h1.history["loss"], rtol=1e-5)
    for u, v in zip(one.get_weights(), two.get_weights()):
        np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-6)
    assert two.optimizer.iterations == 8 and two.optimizer.learning_rate == pytest.approx(0.01)
