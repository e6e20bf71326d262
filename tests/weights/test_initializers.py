"""Initializers (cnncuda.initializers): Keras 3's names, objects, configs and
fans; their distributions over large tensors; a model's initial weights the
same on every engine (the NumPy reference included) for the same seed."""
import numpy as np
import pytest

import cnncuda as tf
from cnncuda import initializers, layers
from cnncuda.models import Sequential
from cnncuda.reference import glorot_uniform, rng_key

from conftest import engine_params

N = 200_000


def test_names_and_objects_give_keras_classes():
    for name, cls in (("glorot_uniform", "GlorotUniform"), ("glorot_normal", "GlorotNormal"),
                      ("he_uniform", "HeUniform"), ("he_normal", "HeNormal"),
                      ("lecun_uniform", "LecunUniform"), ("lecun_normal", "LecunNormal"),
                      ("zeros", "Zeros"), ("ones", "Ones"), ("random_normal", "RandomNormal"),
                      ("random_uniform", "RandomUniform"), ("truncated_normal",
                                                            "TruncatedNormal"),
                      ("orthogonal", "Orthogonal"), ("HeNormal", "HeNormal")):
        assert type(initializers.get(name)).__name__ == cls
    init = tf.keras.initializers.RandomNormal(mean=1.0, stddev=0.5, seed=7)
    assert initializers.get(init) is init
    assert init.get_config() == {"seed": 7, "mean": 1.0, "stddev": 0.5}
    back = initializers.deserialize(initializers.serialize(init))
    assert back == init and back is not init
    assert initializers.serialize(initializers.HeUniform()) == {
        "module": "keras.initializers", "class_name": "HeUniform",
        "config": {"seed": None, "input_axes": None, "output_axes": None},
        "registered_name": None}
    assert initializers.Constant(0.5).get_config() == {"value": 0.5}


def test_bad_initializers_name_the_argument():
    with pytest.raises(ValueError, match="kernel_initializer: expected one of .*'he_normal'"):
        layers.Dense(3, kernel_initializer="he_normel")
    with pytest.raises(TypeError, match="bias_initializer: expected a name"):
        layers.Dense(3, bias_initializer=3.5)
    with pytest.raises(ValueError, match="stddev: expected a number >= 0"):
        initializers.RandomNormal(stddev=-1)
    with pytest.raises(ValueError, match="seed: expected None or an int >= 0"):
        initializers.GlorotNormal(seed="a")
    with pytest.raises(ValueError, match="mode: expected one of"):
        initializers.VarianceScaling(mode="fan_sum")
    with pytest.raises(ValueError, match="rank 2 or more"):
        initializers.Orthogonal()((5,))


def test_keras_fans():
    assert initializers.compute_fans((3, 3, 8, 16)) == (72, 144)   # conv: kh kw cin, kh kw cout
    assert initializers.compute_fans((20, 30)) == (20, 30)
    assert initializers.compute_fans((7,)) == (7, 7)


@pytest.mark.parametrize("cls, fans, var", [
    (initializers.GlorotUniform, (40, 60), 2 / 100), (initializers.HeUniform, (40, 60), 2 / 40),
    (initializers.LecunUniform, (40, 60), 1 / 40)])
def test_uniform_variance_scaling_bounds_and_moments(cls, fans, var):
    shape = (fans[0], fans[1] * 100)     # fan_in 40; fan_out of (40, 6000) is 6000
    fan_in, fan_out = initializers.compute_fans(shape)
    mode_n = {"GlorotUniform": (fan_in + fan_out) / 2}.get(cls.__name__, fan_in)
    scale = cls.settings[0]
    w = cls(seed=1)(shape)
    limit = np.sqrt(3 * scale / mode_n)
    assert w.dtype == np.float32 and w.shape == shape
    assert np.abs(w).max() <= limit
    assert np.abs(w).max() > 0.999 * limit
    assert abs(w.mean()) < 0.01 * limit
    assert np.isclose(w.var(), limit ** 2 / 3, rtol=0.02)


@pytest.mark.parametrize("cls, scale_of", [
    (initializers.GlorotNormal, lambda fi, fo: 2 / (fi + fo)),
    (initializers.HeNormal, lambda fi, fo: 2 / fi),
    (initializers.LecunNormal, lambda fi, fo: 1 / fi)])
def test_truncated_variance_scaling_moments_and_bounds(cls, scale_of):
    shape = (5, 5, 8, 1000)                 # fan_in 200, fan_out 25000
    fan_in, fan_out = initializers.compute_fans(shape)
    w = cls(seed=3)(shape).astype(np.float64)
    want = scale_of(fan_in, fan_out)
    stddev = np.sqrt(want) / 0.87962566103423978     # before truncation
    assert np.abs(w).max() <= 2 * stddev * (1 + 1e-6)
    assert abs(w.mean()) < 0.01 * np.sqrt(want)
    assert np.isclose(w.var(), want, rtol=0.02)       # Keras's target variance


def test_random_normal_uniform_truncated_moments():
    z = initializers.RandomNormal(mean=2.0, stddev=3.0, seed=4)((N,)).astype(np.float64)
    assert np.isclose(z.mean(), 2.0, atol=0.03) and np.isclose(z.std(), 3.0, rtol=0.01)
    assert np.abs(z - 2).max() > 4 * 3.0                 # untruncated: tails
    t = initializers.TruncatedNormal(mean=-1.0, stddev=0.5, seed=4)((N,)).astype(np.float64)
    assert np.abs(t + 1).max() <= 2 * 0.5 * (1 + 1e-6)    # each within 2 stddev
    assert np.isclose(t.mean(), -1.0, atol=0.01)
    assert np.isclose(t.std(), 0.5 * 0.87962566103423978, rtol=0.01)
    u = initializers.RandomUniform(-2.0, 6.0, seed=4)((N,))
    assert u.min() >= -2.0 and u.max() < 6.0 and np.isclose(u.mean(), 2.0, atol=0.05)
    assert np.array_equal(initializers.Constant(0.25)((3, 2)), np.full((3, 2), 0.25, "f4"))
    assert not initializers.Zeros()((4,)).any() and (initializers.Ones()((4,)) == 1).all()


def test_constant_takes_an_array_broadcast_to_the_weight_as_keras_3():
    """The imbalanced-data tutorial's Constant(np.log([pos / neg])) bias."""
    bias = np.log([8 / 88])
    model = Sequential([layers.Dense(1, activation="sigmoid", input_shape=(3,),
                                     bias_initializer=initializers.Constant(bias))], seed=0)
    assert np.array_equal(model.get_weights()[1], bias.astype(np.float32))
    assert np.array_equal(initializers.Constant([[1.0, 2.0]])((3, 2)),
                          np.array([[1, 2]] * 3, np.float32))
    assert initializers.Constant(np.array([0.5, 1.5])).get_config() == {"value": [0.5, 1.5]}
    with pytest.raises(ValueError, match=r"value: an array of shape \(3,\) does not broadcast "
                                         r"to the weight's shape \(2,\)"):
        initializers.Constant([1.0, 2.0, 3.0])((2,))
    with pytest.raises(ValueError, match="value: expected finite numbers"):
        initializers.Constant([1.0, np.inf])


def test_orthogonal():
    for shape in ((30, 20), (20, 30), (3, 3, 4, 12)):
        w = initializers.Orthogonal(gain=2.0, seed=5)(shape).reshape(-1, shape[-1])
        small = w.T @ w if w.shape[0] >= w.shape[1] else w @ w.T
        np.testing.assert_allclose(small, 4.0 * np.eye(len(small)), atol=1e-5)


def test_seeds_as_keras():
    a = initializers.HeNormal(seed=9)((4, 5))
    assert np.array_equal(a, initializers.HeNormal(seed=9)((4, 5)))      # a seed repeats
    assert not np.array_equal(a, initializers.HeNormal(seed=10)((4, 5)))
    u = initializers.HeNormal()
    assert not np.array_equal(u((4, 5)), u((4, 5)))      # unseeded: new values each call


def test_explicit_glorot_uniform_is_the_engines_default():
    """An unseeded 'glorot_uniform' kernel is the engines' own draw (the
    reference's glorot_uniform, stream 2 i of the model's seed)."""
    def kernel(**kw):
        m = Sequential([layers.Dense(6, input_shape=(5,), **kw)], seed=11)
        return m.get_weights()[0]
    want = glorot_uniform(11, 0, (5, 6), 5, 6)
    assert np.array_equal(kernel(), want)
    assert np.array_equal(kernel(kernel_initializer="glorot_uniform"), want)
    seeded = kernel(kernel_initializer=initializers.GlorotUniform(seed=2))
    assert np.array_equal(seeded, initializers.GlorotUniform(seed=2)((5, 6)))


def _model(seed=3):
    return Sequential([
        layers.Conv2D(4, 3, kernel_initializer="he_normal",
                      bias_initializer=initializers.RandomUniform(-0.1, 0.1),
                      input_shape=(9, 9, 2)),
        layers.BatchNormalization(gamma_initializer=initializers.Constant(0.5),
                                  moving_variance_initializer="ones",
                                  beta_initializer=initializers.RandomNormal(stddev=0.1)),
        layers.Flatten(),
        layers.Dense(7, kernel_initializer=initializers.Orthogonal(seed=1),
                     bias_initializer="ones"),
        layers.Dense(3, kernel_initializer="lecun_uniform",
                     bias_initializer=initializers.TruncatedNormal(stddev=1.0))], seed=seed)


def test_model_weights_keyed_by_layer_and_role():
    m = _model()
    w = m.get_weights()
    key = rng_key(3, 0)                                   # conv: engine layer 0
    assert np.array_equal(w[0], initializers.HeNormal().draw((3, 3, 2, 4), key))
    assert np.array_equal(w[1], initializers.RandomUniform(-0.1, 0.1).draw((4,), rng_key(key, 1)))
    assert np.array_equal(w[2], np.full(4, 0.5, "f4"))
    assert np.array_equal(w[3], initializers.RandomNormal(stddev=0.1).draw(
        (4,), rng_key(rng_key(3, 2), 3)))                  # batchnorm: engine layer 1
    assert np.array_equal(w[6], initializers.Orthogonal(seed=1)((196, 7)))
    assert (w[7] == 1).all()
    assert not np.array_equal(_model(seed=4).get_weights()[0], w[0])
    assert np.array_equal(_model().get_weights()[0], w[0])


@pytest.mark.parametrize("engine", ["numpy"] + engine_params())
def test_initial_weights_equal_on_every_engine(engine):
    want = _model().get_weights()
    m = _model()
    m.compile(optimizer="sgd", loss="categorical_crossentropy", device=engine)
    x = np.zeros((2, 9, 9, 2), "f4")
    m.predict(x, verbose=0)                               # builds it on the engine
    assert m._net_device.split(":")[0] == engine
    for a, b in zip(m.get_weights(), want):
        assert np.array_equal(a, b)


def test_a_layer_added_later_draws_its_own_initializer():
    m = Sequential([layers.Dense(4, input_shape=(3,))], seed=1)
    first = m.get_weights()
    m.add(layers.Dense(2, kernel_initializer="zeros", bias_initializer="ones"))
    w = m.get_weights()
    assert np.array_equal(w[0], first[0])
    assert not w[2].any() and (w[3] == 1).all()


def test_layer_configs_round_trip():
    layer = layers.Dense(3, kernel_initializer=initializers.HeNormal(seed=4),
                         bias_initializer=initializers.Constant(0.2))
    config = layer.get_config()
    assert config["kernel_initializer"]["class_name"] == "HeNormal"
    assert config["kernel_initializer"]["config"]["seed"] == 4
    back = layers.Dense.from_config(config)
    assert back.kernel_initializer == layer.kernel_initializer
    assert back.bias_initializer == initializers.Constant(0.2)


@pytest.mark.keras3
def test_configs_are_keras_3s():
    """Every initializer's and regularizer's serialized form is the one Keras
    3 writes for the same arguments, and Keras's reads back here equal."""
    import importlib.util
    import json
    import textwrap

    import keras_child
    from cnncuda import regularizers
    if importlib.util.find_spec("keras") is None or importlib.util.find_spec("jax") is None:
        pytest.skip("Keras and JAX are not installed (pip install -e '.[test]')")
    made = """[
        I.VarianceScaling(2.0, "fan_out", "uniform", seed=3), I.Orthogonal(gain=2.0),
        I.RandomUniform(-1.0, 2.0, seed=1), I.TruncatedNormal(0.5, 0.1), I.Constant(0.3),
        I.Ones(), I.Zeros(), I.LecunNormal(seed=4), I.GlorotNormal(), I.HeUniform(seed=2),
        I.RandomNormal(stddev=0.2), R.L1(0.02), R.L2(), R.L1L2(0.1, 0.2), R.l1_l2()]"""
    code = textwrap.dedent("""
        import json, keras
        I, R = keras.initializers, keras.regularizers
        print(json.dumps([keras.saving.serialize_keras_object(o) for o in %s]))
    """) % made
    status, out, err = keras_child.run(code, [])
    assert status == 0, err[-3000:]
    theirs = json.loads(out.strip().splitlines()[-1])
    I, R = initializers, regularizers                    # noqa: E741, N806
    mine = eval(made)
    for obj, want in zip(mine, theirs):
        module = I if isinstance(obj, I.Initializer) else R
        assert module.serialize(obj) == want
        assert module.deserialize(want) == obj
