"""RMSprop, Adagrad, Adadelta, Adamax, Nadam and AdamW (Keras 3's forms) on
every C engine against the NumPy reference (cnncuda.reference), the
reference against Keras 3 itself, and the Keras-style classes: names,
defaults, checks, get_config/from_config and state through save and load.

Engine against reference: the engine's own gradients, the reference's
update in float64 from the same start; after each step the weights and
every slot must agree to rtol 1e-5, atol 1e-6 (float32 against float64),
and the engines' omp against cpu bit for bit."""
import importlib.util
import os
import textwrap

import numpy as np
import pytest

import cnncuda as tf
from cnncuda import optimizers
from cnncuda import reference as ref
from cnncuda.engine import make_net
import keras_child
from conftest import C_ENGINES, assert_close

LOSS = {"kind": "sparse_categorical_crossentropy", "from_logits": True}

# (engine dict, number of slots per trainable weight)
SETTINGS = [
    ({"kind": "rmsprop"}, 1),
    ({"kind": "rmsprop", "learning_rate": 0.01, "rho": 0.8, "momentum": 0.7, "epsilon": 1e-4}, 2),
    ({"kind": "rmsprop", "learning_rate": 0.01, "centered": True}, 2),
    ({"kind": "rmsprop", "learning_rate": 0.005, "momentum": 0.5, "centered": True}, 3),
    ({"kind": "adagrad"}, 1),
    ({"kind": "adagrad", "learning_rate": 0.05, "initial_accumulator_value": 0.0,
      "epsilon": 1e-3}, 1),
    ({"kind": "adadelta"}, 2),
    ({"kind": "adadelta", "learning_rate": 1.0, "rho": 0.9, "epsilon": 1e-5}, 2),
    ({"kind": "adamax"}, 2),
    ({"kind": "adamax", "learning_rate": 0.02, "beta_1": 0.8, "beta_2": 0.95, "epsilon": 1e-4}, 2),
    ({"kind": "nadam"}, 2),
    ({"kind": "nadam", "learning_rate": 0.02, "beta_1": 0.85, "beta_2": 0.99, "epsilon": 1e-4}, 2),
    ({"kind": "adamw"}, 2),
    ({"kind": "adamw", "learning_rate": 0.01, "weight_decay": 0.3, "beta_1": 0.8,
      "beta_2": 0.99}, 2),
]
IDS = ["-".join("%s" % v for v in o.values()) for o, _ in SETTINGS]


def reference_step(kind, settings, w, g, slots, step):
    """One reference update of weight w (float64) with its slots."""
    if kind == "rmsprop":
        extra = iter(slots[1:])
        mom = next(extra) if settings.get("momentum") else None
        avg = next(extra) if settings.get("centered") else None
        ref.rmsprop_step(w, g, slots[0], mom, avg, **settings)
    elif kind == "adagrad":
        ref.adagrad_step(w, g, slots[0], **settings)
    elif kind == "adadelta":
        ref.adadelta_step(w, g, slots[0], slots[1], **settings)
    else:
        fn = {"adamax": ref.adamax_step, "nadam": ref.nadam_step, "adamw": ref.adamw_step}[kind]
        fn(w, g, slots[0], slots[1], step, **settings)


def odd_net(engine, optimizer, seed=4):
    """Odd sizes: 7 -> 13 -> 5 (and a block past one thread's grain, 37 x 301)."""
    layers = [{"kind": "dense", "units": 301}, {"kind": "activation", "activation": "tanh"},
              {"kind": "dense", "units": 13}, {"kind": "activation", "activation": "relu"},
              {"kind": "dense", "units": 5}]
    return make_net(engine, layers, (37,), 11, LOSS, optimizer, seed=seed)


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("optimizer,n_slots", SETTINGS, ids=IDS)
def test_steps_and_slots_match_the_reference(engine, optimizer, n_slots):
    net = odd_net(engine, optimizer)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((11, 37)).astype(np.float32)
    labels = rng.integers(0, 5, size=11)
    kind = optimizer["kind"]
    settings = {k: v for k, v in optimizer.items() if k != "kind"}
    full = dict(ref.OPTIMIZER_DEFAULTS[kind], **settings)
    weights = [w.astype(np.float64) for w in net.get_weights()]
    state = net.get_optimizer_state()
    assert [len(s) for s in state["slots"]] == [n_slots] * len(weights)
    start = full["initial_accumulator_value"] if kind == "adagrad" else 0.0
    for per in state["slots"]:                      # the slots' first values
        for a in per:
            assert np.all(a == np.float32(start))
    slots = [[np.full_like(w, start) for _ in range(n_slots)] for w in weights]
    for step in range(1, 5):
        net.compute_gradients(x, labels)
        grads = net.get_gradients()
        net.apply_gradients()
        for w, g, s in zip(weights, grads, slots):
            reference_step(kind, full, w, g.astype(np.float64), s, step)
        for i, (a, b) in enumerate(zip(net.get_weights(), weights)):
            assert_close(a, b, 1e-5, 1e-6, "weight %d after step %d" % (i, step))
        for i, (got, want) in enumerate(zip(net.get_optimizer_state()["slots"], slots)):
            for k, (a, b) in enumerate(zip(got, want)):
                assert_close(a, b, 1e-5, 1e-6, "slot %d of weight %d after step %d" % (k, i, step))
    assert net.steps == 4
    # the weights moved (a step that did nothing would pass the checks above)
    assert not np.allclose(net.get_weights()[0], odd_net(engine, optimizer).get_weights()[0])


@pytest.mark.parametrize("optimizer,n_slots", SETTINGS, ids=IDS)
def test_omp_matches_cpu_bit_for_bit_and_numpy_closely(optimizer, n_slots):
    if "omp" not in tf.build_info()["engines"]:
        pytest.skip("the omp engine is not built")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((11, 37)).astype(np.float32)
    labels = rng.integers(0, 5, size=11)
    nets = {e: odd_net(e, optimizer) for e in ("cpu", "omp:2", "numpy")}
    for _ in range(3):
        for net in nets.values():
            net.train_batch(x, labels)
    for a, b, c in zip(*(n.get_weights() for n in nets.values())):
        np.testing.assert_array_equal(a, b)
        # the numpy engine (float32 NumPy) sums its gradients in another order,
        # which Adam-like updates of near-zero gradients magnify
        assert_close(c, a, 1e-3, 1e-4, "numpy engine against cpu")


def small_net(engine, optimizer, batch=16):
    layers = [{"kind": "conv2d", "units": 3, "kernel": (3, 3)},
              {"kind": "activation", "activation": "relu"}, {"kind": "dropout", "rate": 0.3},
              {"kind": "flatten"}, {"kind": "dense", "units": 3}]
    return make_net(engine, layers, (5, 5, 2), batch, LOSS, optimizer, seed=1)


@pytest.mark.parametrize("engine", C_ENGINES + ["numpy"])
@pytest.mark.parametrize("optimizer,n_slots", SETTINGS[1::2] + SETTINGS[2:3],
                         ids=IDS[1::2] + IDS[2:3])
def test_a_rebuilt_net_continues_exactly(engine, optimizer, n_slots):
    rng = np.random.default_rng(0)
    x = rng.random((64, 5, 5, 2)).astype(np.float32)
    y = rng.integers(0, 3, size=64)
    a = small_net(engine, optimizer)
    for s in range(2):
        a.train_batch(x[16 * s:16 * (s + 1)], y[16 * s:16 * (s + 1)])
    state = a.get_optimizer_state()
    assert [len(s) for s in state["slots"]] == [n_slots] * 4
    b = small_net(engine, optimizer, batch=32)
    b.set_weights(a.get_weights())
    b.set_optimizer_state(state)
    for s in range(2, 4):
        batch = slice(16 * s, 16 * (s + 1))
        assert a.train_batch(x[batch], y[batch]) == b.train_batch(x[batch], y[batch])
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_array_equal(wa, wb)


@pytest.mark.parametrize("engine", C_ENGINES + ["numpy"])
def test_the_nets_checks(engine):
    with pytest.raises(ValueError, match="rmsprop rho must be in"):
        small_net(engine, {"kind": "rmsprop", "rho": 1.5})
    with pytest.raises(ValueError, match="adagrad initial_accumulator_value"):
        small_net(engine, {"kind": "adagrad", "initial_accumulator_value": -1.0})
    with pytest.raises(ValueError, match="adamw weight_decay"):
        small_net(engine, {"kind": "adamw", "weight_decay": -0.1})
    with pytest.raises(ValueError, match="nadam needs beta_1"):
        small_net(engine, {"kind": "nadam", "beta_1": 1.0})
    net = small_net(engine, {"kind": "rmsprop"})
    with pytest.raises(ValueError, match="rmsprop momentum: this network was built without"):
        net.set_optimizer({"kind": "rmsprop", "momentum": 0.5})
    with pytest.raises(ValueError, match="rmsprop centered"):
        net.set_optimizer({"kind": "rmsprop", "centered": True})
    with pytest.raises(ValueError, match="built for rmsprop, got '?adamw"):
        net.set_optimizer({"kind": "adamw"})
    net.set_optimizer({"kind": "rmsprop", "learning_rate": 0.5})      # a good one is taken


# ---------------------------------------------------------------- the classes

KERAS_DEFAULTS = {
    "RMSprop": {"learning_rate": 0.001, "rho": 0.9, "momentum": 0.0, "epsilon": 1e-7,
                "centered": False},
    "Adagrad": {"learning_rate": 0.001, "initial_accumulator_value": 0.1, "epsilon": 1e-7},
    "Adadelta": {"learning_rate": 0.001, "rho": 0.95, "epsilon": 1e-7},
    "Adamax": {"learning_rate": 0.001, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-7},
    "Nadam": {"learning_rate": 0.001, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-7},
    "AdamW": {"learning_rate": 0.001, "weight_decay": 0.004, "beta_1": 0.9, "beta_2": 0.999,
              "epsilon": 1e-7},
}


@pytest.mark.parametrize("name", sorted(KERAS_DEFAULTS))
def test_names_defaults_and_config_round_trip(name):
    cls = getattr(tf.keras.optimizers, name)
    opt = cls()
    assert opt.get_config() == KERAS_DEFAULTS[name]
    for text in (name, name.lower(), name.upper()):
        got = optimizers.get(text)
        assert type(got) is cls and got.get_config() == KERAS_DEFAULTS[name]
    changed = dict(KERAS_DEFAULTS[name], learning_rate=0.25)
    again = optimizers.from_config(opt.kind, changed)
    assert type(again) is cls and again.get_config() == changed
    assert optimizers.from_config(name, changed).get_config() == changed


@pytest.mark.parametrize("make,error,text", [
    (lambda: optimizers.RMSprop(rho=1.5), ValueError,
     r"rho: expected a number in \[0, 1\], got 1.5"),
    (lambda: optimizers.RMSprop(momentum=-0.1), ValueError, r"momentum: expected a number in"),
    (lambda: optimizers.RMSprop(centered="yes"), TypeError,
     r"centered: expected True or False, got 'yes'"),
    (lambda: optimizers.Adagrad(initial_accumulator_value=-1), ValueError,
     r"initial_accumulator_value: expected a number in \[0, inf\], got -1"),
    (lambda: optimizers.Adagrad(epsilon="small"), TypeError, r"epsilon: expected a number"),
    (lambda: optimizers.Adadelta(learning_rate=-1), ValueError, r"learning_rate: expected"),
    (lambda: optimizers.Adamax(beta_2=1.0), ValueError,
     r"beta_2: expected a number in \[0, 1\), got 1"),
    (lambda: optimizers.Nadam(beta_1=float("nan")), ValueError, r"beta_1: expected"),
    (lambda: optimizers.AdamW(weight_decay=None), TypeError,
     r"weight_decay: expected a number, got None"),
    (lambda: optimizers.AdamW(weight_decay=-0.5), ValueError, r"weight_decay: expected"),
    (lambda: optimizers.AdamW(amsgrad=True), ValueError, r"amsgrad: expected False"),
    (lambda: optimizers.get("rmsprops"), ValueError, r"optimizer: expected one of .*'adamw'"),
])
def test_bad_hyperparameters_name_the_argument(make, error, text):
    with pytest.raises(error, match=text):
        make()


def fit_data():
    rng = np.random.default_rng(2)
    return rng.random((48, 6)).astype(np.float32), rng.integers(0, 3, size=48)


def dense_model(optimizer, seed=3):
    model = tf.keras.Sequential([tf.keras.layers.Dense(8, activation="relu", input_shape=(6,)),
                                 tf.keras.layers.Dense(3)], seed=seed)
    model.compile(optimizer=optimizer, device="cpu",
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def test_compile_takes_the_names_in_any_case():
    for name in ["rmsprop", "RMSprop", "adagrad", "Adadelta", "ADAMAX", "Nadam", "adamw"]:
        model = dense_model(name)
        assert type(model.optimizer) is type(optimizers.get(name))


def test_rmsprop_layout_cannot_change_after_compile():
    x, y = fit_data()
    model = dense_model("rmsprop")
    model.fit(x, y, epochs=1, batch_size=16, verbose=0)
    model.optimizer.momentum = 0.5
    with pytest.raises(ValueError, match="optimizer.momentum: the model was compiled with "
                                         "momentum 0"):
        model.fit(x, y, epochs=1, batch_size=16, verbose=0)
    model.optimizer.momentum = 0.0
    model.optimizer.centered = True
    with pytest.raises(ValueError, match="optimizer.centered"):
        model.fit(x, y, epochs=1, batch_size=16, verbose=0)


@pytest.mark.parametrize("make", [
    lambda: optimizers.RMSprop(0.01, momentum=0.5, centered=True),
    lambda: optimizers.Adagrad(0.05), lambda: optimizers.Adadelta(1.0),
    lambda: optimizers.Adamax(0.01), lambda: optimizers.Nadam(0.01),
    lambda: optimizers.AdamW(0.01, weight_decay=0.1)], ids=lambda m: type(m()).__name__)
def test_saved_and_loaded_models_train_on_exactly(tmp_path, make):
    x, y = fit_data()
    whole = dense_model(make())
    whole.fit(x, y, epochs=4, batch_size=16, shuffle=False, verbose=0)
    first = dense_model(make())
    first.fit(x, y, epochs=2, batch_size=16, shuffle=False, verbose=0)
    path = os.path.join(tmp_path, "model.cnncuda")
    first.save(path)
    loaded = tf.keras.models.load_model(path, device="cpu")
    assert type(loaded.optimizer) is type(first.optimizer)
    assert loaded.optimizer.get_config() == first.optimizer.get_config()
    assert loaded.optimizer.iterations == 6
    loaded.fit(x, y, epochs=2, batch_size=16, shuffle=False, verbose=0)
    for a, b in zip(whole.get_weights(), loaded.get_weights()):
        np.testing.assert_array_equal(a, b)


# ------------------------------------------------------- against Keras 3 itself

KERAS_STEPS = """
import sys, numpy as np, keras
data = np.load(sys.argv[1])
name, config = sys.argv[2], eval(sys.argv[3])
model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(7, activation="tanh"),
                          keras.layers.Dense(3)])
model.set_weights([data["w%d" % i] for i in range(4)])
model.compile(optimizer=getattr(keras.optimizers, name)(**config),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
out = {}
for step in range(int(sys.argv[5])):
    model.train_on_batch(data["x"][step], data["y"][step])
for i, w in enumerate(model.get_weights()):
    out["w%d" % i] = w
names = []
for i, v in enumerate(model.optimizer.variables):
    out["v%d" % i] = np.asarray(v)
    names.append(v.path.split("/")[-1])
out["names"] = np.array(names)
np.savez(sys.argv[4], **out)
"""


@pytest.mark.keras3
@pytest.mark.parametrize("name,config", [
    ("RMSprop", {"learning_rate": 0.01}),
    ("RMSprop", {"learning_rate": 0.01, "momentum": 0.6, "centered": True}),
    ("Adagrad", {"learning_rate": 0.05}),
    ("Adadelta", {"learning_rate": 1.0}),
    ("Adamax", {"learning_rate": 0.01}),
    ("Nadam", {"learning_rate": 0.01}),
    ("AdamW", {"learning_rate": 0.01, "weight_decay": 0.1}),
], ids=lambda v: v if isinstance(v, str) else "-".join("%s" % x for x in v.values()))
def test_the_reference_trains_as_keras_3(tmp_path, name, config):
    """Five steps of a Dense model from the same weights and batches: the
    NumPy reference (float64) against Keras 3 (JAX on the CPU, float32)."""
    if importlib.util.find_spec("keras") is None or importlib.util.find_spec("jax") is None:
        pytest.skip("Keras and JAX are not installed (pip install -e '.[test]')")
    steps = 5
    rng = np.random.default_rng(11)
    x = rng.standard_normal((steps, 8, 5)).astype(np.float32)
    y = rng.integers(0, 3, size=(steps, 8))
    layers = [{"kind": "dense", "units": 7}, {"kind": "activation", "activation": "tanh"},
              {"kind": "dense", "units": 3}]
    kind = name.lower()
    net = ref.NumpyNet(layers, (5,), 8, LOSS, dict(config, kind=kind), seed=5, dtype=np.float64)
    start = net.get_weights()
    data = os.path.join(tmp_path, "in.npz")
    np.savez(data, x=x, y=y, **{"w%d" % i: w.astype(np.float32) for i, w in enumerate(start)})
    net.set_weights([w.astype(np.float32).astype(np.float64) for w in start])
    result = os.path.join(tmp_path, "out.npz")
    status, _, err = keras_child.run(textwrap.dedent(KERAS_STEPS),
                                     [data, name, repr(config), result, str(steps)])
    assert status == 0, err[-3000:]
    keras_out = np.load(result)
    for step in range(steps):
        net.train_batch(x[step], y[step])
    moved = 0.0
    for i, w in enumerate(net.get_weights()):
        assert_close(w, keras_out["w%d" % i], 2e-4, 2e-6, "weight %d after %d steps" % (i, steps))
        moved = max(moved, float(np.abs(w - start[i]).max()))
    assert moved > 1e-3                         # the steps changed the weights
    names = list(keras_out["names"])
    assert names[:2] == ["iteration", "learning_rate"]
    assert int(keras_out["v0"]) == net.steps == steps
    # the slots, in Keras's order and with Keras's names (Nadam's u_product,
    # a plain 'variable', follows from the step count here)
    opt = optimizers.from_config(kind, dict(config))
    slots = net.get_optimizer_state()["slots"]
    weight_names = ["dense_kernel", "dense_bias", "dense_1_kernel", "dense_1_bias"]
    order = [(t, k) for t in range(4) for k in range(len(opt.slot_names()))]
    if opt.keras_slot_order == "per_slot":
        order = sorted(order, key=lambda tk: (tk[1], tk[0]))
    assert len(names) == 2 + len(order) + (kind == "nadam")
    for i, (t, k) in enumerate(order):
        assert names[2 + i].endswith("%s_%s" % (weight_names[t], opt.slot_names()[k])), names
        assert_close(slots[t][k], keras_out["v%d" % (2 + i)], 2e-4, 2e-6,
                     "slot %s of weight %d" % (opt.slot_names()[k], t))


KERAS_CONTINUES = """
import sys, numpy as np, keras
data = np.load(sys.argv[1])
model = keras.models.load_model(sys.argv[2])
out = {"iterations": np.asarray(model.optimizer.iterations),
       "config": np.array(repr(type(model.optimizer).__name__))}
model.train_on_batch(data["x"], data["y"])
for i, w in enumerate(model.get_weights()):
    out["w%d" % i] = w
np.savez(sys.argv[3], **out)
"""


@pytest.mark.keras3
@pytest.mark.parametrize("make", [
    lambda: optimizers.RMSprop(0.01, momentum=0.5, centered=True),
    lambda: optimizers.Adagrad(0.05), lambda: optimizers.Adadelta(1.0),
    lambda: optimizers.Adamax(0.01), lambda: optimizers.Nadam(0.01),
    lambda: optimizers.AdamW(0.01, weight_decay=0.1), lambda: optimizers.Adam(0.01),
    lambda: optimizers.SGD(0.05, momentum=0.9)], ids=lambda m: type(m()).__name__)
def test_keras_files_carry_the_optimizer_state_both_ways(tmp_path, make):
    """A model trained here and saved as .keras: Keras 3 loads its optimizer
    variables and its next step is the one this model takes after loading
    the file back (from fresh slots it would not be)."""
    pytest.importorskip("h5py")
    if importlib.util.find_spec("keras") is None or importlib.util.find_spec("jax") is None:
        pytest.skip("Keras and JAX are not installed (pip install -e '.[test]')")
    x, y = fit_data()
    model = dense_model(make())
    model.fit(x, y, epochs=2, batch_size=16, shuffle=False, verbose=0)
    path = os.path.join(tmp_path, "model.keras")
    model.save(path)
    loaded = tf.keras.models.load_model(path, device="cpu")
    assert loaded.optimizer.iterations == 6
    state, want = loaded._optimizer_state(), model._optimizer_state()
    for a, b in zip(sum(state["slots"], []), sum(want["slots"], [])):
        np.testing.assert_array_equal(a, b)
    data, result = os.path.join(tmp_path, "in.npz"), os.path.join(tmp_path, "out.npz")
    np.savez(data, x=x[:16], y=y[:16])
    status, _, err = keras_child.run(textwrap.dedent(KERAS_CONTINUES), [data, path, result])
    assert status == 0, err[-3000:]
    assert "Skipping variable loading" not in err, err[-2000:]
    keras_out = np.load(result)
    assert int(keras_out["iterations"]) == 6
    loaded.fit(x[:16], y[:16], batch_size=16, shuffle=False, verbose=0)
    fresh = dense_model(make())
    fresh.set_weights(model.get_weights())
    fresh.fit(x[:16], y[:16], batch_size=16, shuffle=False, verbose=0)
    for i, (w, f) in enumerate(zip(loaded.get_weights(), fresh.get_weights())):
        assert_close(w, keras_out["w%d" % i], 1e-4, 1e-6, "weight %d after Keras's step" % i)
    assert any(not np.allclose(w, f, rtol=1e-4, atol=1e-6)
               for w, f in zip(loaded.get_weights(), fresh.get_weights()))
