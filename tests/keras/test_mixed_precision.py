"""keras.mixed_precision against Keras 3: policies (names, compute and
variable dtypes, refusals), the global policy, layers' and models' dtype
attributes, LossScaleOptimizer (defaults, config, compile's wrapping under
mixed_float16), and which engine precision a policy picks. The loss
scaling's numerics are tests/net/test_loss_scaling.py's; the GPU engines'
16-bit products tests/ops/test_gpu_sgemm_16bit.py's and
tests/net/test_gpu_mixed_precision.py's."""
import json

import numpy as np
import pytest

import cnncuda as tf
from cnncuda import config
from cnncuda.keras import layers, mixed_precision
from conftest import run_keras


@pytest.fixture(autouse=True)
def float32_after():
    yield
    mixed_precision.set_global_policy("float32")


def keras_answers(code):
    return json.loads(run_keras(code))


POLICY_PROBE = """
    import json, keras
    out = {}
    for name in ("float32", "mixed_float16", "mixed_bfloat16"):
        p = keras.mixed_precision.Policy(name)
        out[name] = [p.name, p.compute_dtype, p.variable_dtype, p.get_config(), repr(p)]
    print(json.dumps(out))
"""


@pytest.mark.keras3
def test_policies_match_keras():
    want = keras_answers(POLICY_PROBE)
    for name, (kname, compute, variable, cfg, rep) in want.items():
        p = mixed_precision.Policy(name)
        assert [p.name, p.compute_dtype, p.variable_dtype, p.get_config(), repr(p)] == \
            [kname, compute, variable, cfg, rep]
        assert mixed_precision.Policy.from_config(p.get_config()) == p
    assert mixed_precision.DTypePolicy is mixed_precision.Policy


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float64", "int8", "foo"])
def test_other_policies_are_refused(name):
    with pytest.raises(ValueError, match=r"^name: expected one of 'float32', 'mixed_float16', "
                                         r"'mixed_bfloat16', got '%s'" % name):
        mixed_precision.Policy(name)
    with pytest.raises(ValueError, match="policy: expected one of"):
        mixed_precision.set_global_policy(name)
    assert mixed_precision.global_policy().name == "float32"


def test_bad_policy_types():
    with pytest.raises(TypeError, match="name: expected a policy name"):
        mixed_precision.Policy(16)
    with pytest.raises(ValueError, match="policy: expected the name of a policy"):
        mixed_precision.set_global_policy(16)
    with pytest.raises(ValueError, match="dtype: expected one of"):
        layers.Dense(3, dtype="float16")


def test_global_policy():
    assert mixed_precision.global_policy() == mixed_precision.Policy("float32")
    mixed_precision.set_global_policy("mixed_bfloat16")
    assert mixed_precision.global_policy().name == "mixed_bfloat16"
    assert mixed_precision.Policy().name == "mixed_bfloat16"     # None: the global one
    mixed_precision.set_dtype_policy(mixed_precision.Policy("mixed_float16"))
    assert mixed_precision.dtype_policy().name == "mixed_float16"
    assert tf.keras.mixed_precision.global_policy().name == "mixed_float16"


LAYER_PROBE = """
    import json, keras
    keras.mixed_precision.set_global_policy("mixed_float16")
    a = keras.layers.Dense(3)
    b = keras.layers.Dense(2, dtype="float32")
    c = keras.layers.Conv2D(4, 3, dtype="mixed_bfloat16")
    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    m.compile("adam", "mse")
    i = keras.Input((4,))
    x = keras.layers.Dense(3)(i)
    tensors = [i.dtype, x.dtype, keras.layers.Activation("linear", dtype="float32")(x).dtype,
               keras.layers.Flatten()(x).dtype]
    out = {"tensors": tensors,
           "layers": [[l.dtype_policy.name, l.compute_dtype, l.variable_dtype, l.dtype]
                      for l in (a, b, c)],
           "config": a.get_config()["dtype"], "model": m.dtype_policy.name,
           "optimizer": type(m.optimizer).__name__}
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    m.compile("adam", "mse")
    out["bf16_optimizer"] = type(m.optimizer).__name__
    print(json.dumps(out))
"""


@pytest.mark.keras3
def test_layer_and_model_dtype_attributes_match_keras():
    want = keras_answers(LAYER_PROBE)
    mixed_precision.set_global_policy("mixed_float16")
    a = layers.Dense(3)
    b = layers.Dense(2, dtype="float32")
    c = layers.Conv2D(4, 3, dtype="mixed_bfloat16")
    assert [[x.dtype_policy.name, x.compute_dtype, x.variable_dtype, x.dtype]
            for x in (a, b, c)] == want["layers"]
    assert a.get_config()["dtype"] == want["config"]
    assert "dtype" not in b.get_config()          # float32: as before (cnncuda's form)
    i = layers.Input((4,))
    x = layers.Dense(3)(i)
    assert [i.dtype, x.dtype, layers.Activation("linear", dtype="float32")(x).dtype,
            layers.Flatten()(x).dtype] == want["tensors"] == ["float32", "float16", "float32",
                                                              "float16"]
    m = tf.keras.Sequential([layers.Input((4,)), layers.Dense(3)])
    m.compile("adam", "mse")
    assert m.dtype_policy.name == want["model"]
    assert type(m.optimizer).__name__ == want["optimizer"] == "LossScaleOptimizer"
    mixed_precision.set_global_policy("mixed_bfloat16")
    m = tf.keras.Sequential([layers.Input((4,)), layers.Dense(3)])
    m.compile("adam", "mse")
    assert type(m.optimizer).__name__ == want["bf16_optimizer"] == "Adam"


def test_layer_from_config_keeps_the_policy():
    d = layers.Dense(3, dtype="mixed_bfloat16")
    again = layers.Dense.from_config(d.get_config())
    assert again.dtype_policy.name == "mixed_bfloat16"
    assert layers.Dense(3, dtype=mixed_precision.Policy("mixed_float16")).compute_dtype == \
        "float16"


LSO_PROBE = """
    import json, keras
    o = keras.mixed_precision.LossScaleOptimizer(keras.optimizers.SGD(learning_rate=0.05))
    p = keras.optimizers.LossScaleOptimizer(keras.optimizers.Adam(), initial_scale=64.0,
                                            dynamic_growth_steps=7, name="lso")
    c = o.get_config()
    print(json.dumps({"defaults": [o.initial_scale, o.dynamic_growth_steps],
                      "keys": sorted(c), "name": c["name"],
                      "inner": [c["inner_optimizer"]["class_name"],
                                c["inner_optimizer"]["config"]["learning_rate"]],
                      "other": [p.initial_scale, p.dynamic_growth_steps, p.get_config()["name"]],
                      "lr": float(o.learning_rate)}))
"""


@pytest.mark.keras3
def test_loss_scale_optimizer_matches_keras():
    want = keras_answers(LSO_PROBE)
    o = mixed_precision.LossScaleOptimizer(tf.keras.optimizers.SGD(learning_rate=0.05))
    c = o.get_config()
    assert [o.initial_scale, o.dynamic_growth_steps] == want["defaults"] == [32768.0, 2000]
    assert sorted(c) == want["keys"]
    assert c["name"] == want["name"]
    assert [c["inner_optimizer"]["class_name"]] == want["inner"][:1]
    assert c["inner_optimizer"]["config"]["learning_rate"] == pytest.approx(want["inner"][1])
    p = tf.keras.optimizers.LossScaleOptimizer(tf.keras.optimizers.Adam(), initial_scale=64.0,
                                               dynamic_growth_steps=7, name="lso")
    assert [p.initial_scale, p.dynamic_growth_steps, p.get_config()["name"]] == want["other"]
    assert o.learning_rate == pytest.approx(want["lr"])
    o.learning_rate = 0.01                         # the inner optimizer's
    assert o.inner_optimizer.learning_rate == 0.01
    again = mixed_precision.LossScaleOptimizer.from_config(p.get_config())
    assert (again.initial_scale, again.dynamic_growth_steps, again.name) == (64.0, 7, "lso")
    assert type(again.inner_optimizer).__name__ == "Adam"
    assert o.scale == 32768.0 and o.loss_scale == 32768.0      # before any training
    assert o.dynamic_scale == 32768.0 and o.scale_loss(0.5) == 16384.0


def test_loss_scale_optimizer_refusals():
    adam = tf.keras.optimizers.Adam()
    with pytest.raises(ValueError, match="no longer supports `dynamic=False`"):
        mixed_precision.LossScaleOptimizer(adam, dynamic=False)
    with pytest.raises(ValueError, match="does not support arguments: `clipnorm`"):
        mixed_precision.LossScaleOptimizer(adam, clipnorm=1.0)
    with pytest.raises(TypeError, match="inner_optimizer: expected an optimizer"):
        mixed_precision.LossScaleOptimizer("adam")
    with pytest.raises(ValueError, match="initial_scale"):
        mixed_precision.LossScaleOptimizer(adam, initial_scale=0.0)
    with pytest.raises(ValueError, match="dynamic_growth_steps"):
        mixed_precision.LossScaleOptimizer(adam, dynamic_growth_steps=0)


def test_policy_picks_the_engine_precision():
    f16, b16 = mixed_precision.Policy("mixed_float16"), mixed_precision.Policy("mixed_bfloat16")
    for engine in ("cuda", "cudnn", "cuda:1"):
        assert config.precision_for(engine, f16) == "fp16"
        assert config.precision_for(engine, b16) == "bf16"
        assert config.precision_for(engine, mixed_precision.Policy("float32")) == "float32"
    for engine in ("cpu", "omp", "omp:2", "numpy", None):      # the CPU engines: float32
        assert config.precision_for(engine, f16) == "float32"
        assert config.precision_for(engine, b16) == "float32"


def test_mixed_float16_model_trains_with_loss_scaling_on_cpu():
    """compile wraps the optimizer; fit runs with dynamic loss scaling in the
    engine (the scale doubles after dynamic_growth_steps finite steps); the
    CPU engine computes in float32, so predict returns float32 (Keras would
    return float16 here: docs/semantics.md)."""
    mixed_precision.set_global_policy("mixed_float16")
    m = tf.keras.Sequential([layers.Input((6,)), layers.Dense(8, activation="relu"),
                             layers.Dense(3, dtype="float32")])
    opt = mixed_precision.LossScaleOptimizer(tf.keras.optimizers.Adam(), initial_scale=256.0,
                                             dynamic_growth_steps=2)
    m.compile(opt, "mse", device="cpu")
    assert m.optimizer is opt
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((40, 6)).astype(np.float32), rng.standard_normal((40, 3))
    m.fit(x, y, batch_size=8, epochs=1, verbose=0)          # 5 finite steps
    assert m.optimizer.iterations == 5
    assert m.optimizer.scale == 256.0 * 4                   # doubled after steps 2 and 4
    assert m._net_precision == "float32"
    assert m.predict(x[:4], verbose=0).dtype == np.float32
    assert all(w.dtype == np.float32 for w in m.get_weights())


def test_loss_scale_carries_over_a_rebuilt_network():
    mixed_precision.set_global_policy("mixed_float16")
    m = tf.keras.Sequential([layers.Input((6,)), layers.Dense(3)])
    m.compile(mixed_precision.LossScaleOptimizer(tf.keras.optimizers.SGD(), initial_scale=8.0,
                                                 dynamic_growth_steps=3), "mse", device="cpu")
    x, y = np.ones((8, 6), np.float32), np.zeros((8, 3), np.float32)
    m.fit(x, y, batch_size=4, epochs=2, verbose=0)         # 4 steps: doubled once, 1 good
    assert m.optimizer.scale == 16.0
    m.fit(x, y, batch_size=8, epochs=2, verbose=0)         # a larger batch: a new network
    assert m.optimizer.scale == 32.0 and m.optimizer.iterations == 6


@pytest.mark.parametrize("explicit", [False, True])
def test_keras_file_round_trip_keeps_policies_and_the_wrapper(tmp_path, explicit):
    """The model's policy (Keras's config keeps it) makes the loaded model's
    compile wrap the optimizer again; the optimizer's variables in Keras's
    layout (the wrapper's four, then Adam's) carry the scale and slots."""
    mixed_precision.set_global_policy("mixed_float16")
    m = tf.keras.Sequential([layers.Input((6,)), layers.Dense(4),
                             layers.Dense(3, dtype="float32")])
    opt = tf.keras.optimizers.Adam()
    if explicit:
        opt = mixed_precision.LossScaleOptimizer(opt, initial_scale=64.0, dynamic_growth_steps=3)
    m.compile(opt, "mse", device="cpu")
    x, y = np.ones((8, 6), np.float32), np.zeros((8, 3), np.float32)
    m.fit(x, y, batch_size=2, verbose=0)                # 4 steps
    path = str(tmp_path / "m.keras")
    m.save(path)
    mixed_precision.set_global_policy("float32")
    back = tf.keras.models.load_model(path)
    assert [x.dtype_policy.name for x in back.layers] == ["mixed_float16", "float32"]
    assert back.dtype_policy.name == "mixed_float16"
    assert type(back.optimizer).__name__ == "LossScaleOptimizer"
    assert type(back.optimizer.inner_optimizer).__name__ == "Adam"
    assert back.optimizer.iterations == 4
    assert back.optimizer.scale == (128.0 if explicit else 2.0 ** 15)   # 64 doubled after 3
    np.testing.assert_array_equal(back.predict(np.ones((2, 6), np.float32), verbose=0),
                                  m.predict(np.ones((2, 6), np.float32), verbose=0))
    m.fit(x, y, batch_size=2, verbose=0)
    back.fit(x, y, batch_size=2, verbose=0)
    for a, b in zip(m.get_weights(), back.get_weights()):
        np.testing.assert_array_equal(a, b)


@pytest.mark.keras3
def test_real_keras_reads_the_policies_and_the_scale(tmp_path):
    mixed_precision.set_global_policy("mixed_float16")
    m = tf.keras.Sequential([layers.Input((6,)), layers.Dense(4),
                             layers.Dense(3, dtype="float32")])
    m.compile("adam", "mse", device="cpu")
    m.fit(np.ones((8, 6), np.float32), np.zeros((8, 3), np.float32), batch_size=4, verbose=0)
    path = str(tmp_path / "m.keras")
    m.save(path)
    got = run_keras("""
        import json, sys, warnings, keras
        keras.mixed_precision.set_global_policy("mixed_float16")
        with warnings.catch_warnings():
            warnings.simplefilter("error")      # every variable loads
            m = keras.models.load_model(sys.argv[1])
        o = m.optimizer
        print(json.dumps([[l.dtype_policy.name for l in m.layers], type(o).__name__,
                          int(o.iterations), float(o.dynamic_scale)]))
    """, path)
    assert json.loads(got) == [["mixed_float16", "float32"], "LossScaleOptimizer", 2, 32768.0]


def test_model_asks_its_engine_for_the_policys_precision(monkeypatch):
    """The policy a model was made under reaches make_net (as if its engine
    were a GPU one: config.precision_for answers for 'cuda'; the network is
    then built as float32 on the cpu engine, the call recorded)."""
    from cnncuda import models
    real_for, real_make, calls = config.precision_for, models.make_net, []
    monkeypatch.setattr(config, "precision_for",
                        lambda engine, policy=None: real_for("cuda", policy))

    def recording(device, *args, precision="float32", **kwargs):
        calls.append(precision)
        return real_make(device, *args, precision="float32", **kwargs)
    monkeypatch.setattr(models, "make_net", recording)
    x, y = np.ones((8, 6), np.float32), np.zeros((8, 3), np.float32)
    for policy, want in (("mixed_bfloat16", "bf16"), ("mixed_float16", "fp16"),
                         ("float32", "float32")):
        mixed_precision.set_global_policy(policy)
        m = tf.keras.Sequential([layers.Input((6,)), layers.Dense(3)])
        mixed_precision.set_global_policy("float32")     # the model keeps its own
        m.compile("sgd", "mse", device="cpu")
        m.fit(x, y, verbose=0)
        assert calls[-1] == want, policy
