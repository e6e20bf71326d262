"""The activations by name and the activation layers (ReLU with every
argument, LeakyReLU, ELU, PReLU, Softmax's axis) against Keras 3 itself:
values and gradients of keras.activations (float32 tolerance), the layers'
outputs, configs, and .keras / .h5 files both ways; a small model training
with each activation on the cpu engine; and the errors for bad arguments.

Keras runs in one child process per module (JAX on the CPU), as in
tests/data/test_keras_files.py: JAX must not be imported into the test
process."""
import json

import numpy as np
import pytest

import cnncuda as tf
from cnncuda import activations
from cnncuda.engine import make_net
from cnncuda.keras import layers
from conftest import run_keras

NAMES = ["elu", "selu", "gelu", "silu", "swish", "softplus", "softsign", "hard_sigmoid",
         "leaky_relu", "relu6", "exponential", "mish", "relu", "sigmoid", "tanh", "linear"]


def grid():
    """float32 values around 0, in the usual range and of large magnitude."""
    special = [0.0, 1e-4, -1e-4, 1e-20, -1e-20, -3.0, 3.0, 6.0, -30.0, 30.0, -60.0, 40.0]
    x = np.concatenate([np.linspace(-8, 8, 321), special])
    return x.astype(np.float32)


# layers whose outputs are compared: (name, constructor arguments, input shape)
LAYERS = [
    ("ReLU", {}, (6,)),
    ("ReLU", {"max_value": 6.0}, (6,)),
    ("ReLU", {"negative_slope": 0.1}, (6,)),
    ("ReLU", {"max_value": 4.0, "negative_slope": 0.2, "threshold": 1.0}, (6,)),
    ("ReLU", {"max_value": 2.5}, (6,)),
    ("ReLU", {"threshold": 0.5}, (3, 2, 2)),
    ("LeakyReLU", {}, (6,)),
    ("LeakyReLU", {"negative_slope": 0.05}, (3, 2, 2)),
    ("ELU", {}, (6,)),
    ("ELU", {"alpha": 0.5}, (3, 2, 2)),
    ("PReLU", {}, (3, 2, 2)),
    ("PReLU", {"shared_axes": [1, 2]}, (3, 2, 2)),
    ("PReLU", {"shared_axes": [1]}, (6,)),
    ("Softmax", {"axis": -1}, (6,)),
    ("Softmax", {"axis": 1}, (6,)),
]


# keras.activations.relu's arguments, a negative threshold included (the
# function takes one; the ReLU layer refuses it)
RELU_ARGUMENTS = [{"negative_slope": 0.1}, {"max_value": 6.0}, {"max_value": 2.0},
                  {"threshold": 1.5}, {"negative_slope": 0.2, "max_value": 4.0, "threshold": 1.0},
                  {"negative_slope": 0.3, "threshold": -1.0},
                  {"max_value": 3.0, "threshold": -1.0}, {"negative_slope": 0.5, "max_value": 6.0}]


@pytest.fixture(scope="module")
def theirs(tmp_path_factory):
    """Keras's values and gradients of every function on grid(), its
    layers' outputs (PReLU with alpha 0.25 + 0.1 k), and their configs."""
    where = tmp_path_factory.mktemp("keras_activations")
    np.save(where / "x.npy", grid())
    run_keras("""
        import json, sys, numpy as np, jax, keras
        where = sys.argv[1]
        names, layer_cases = json.loads(sys.argv[2]), json.loads(sys.argv[3])
        x = np.load(where + "/x.npy")
        dy = np.random.default_rng(0).standard_normal(x.shape).astype(np.float32)
        out = {}
        for name in names:
            f = keras.activations.get(name)
            y, vjp = jax.vjp(lambda v: f(v), x)
            out["y_" + name] = np.asarray(y)
            out["dx_" + name] = np.asarray(vjp(dy)[0])
        out["y_gelu_tanh"] = np.asarray(keras.activations.gelu(x, approximate=True))
        for k, kw in enumerate(json.loads(sys.argv[4])):
            out["y_relu_%d" % k] = np.asarray(keras.activations.relu(x, **kw))
        out["y_leaky_0.5"] = np.asarray(keras.activations.leaky_relu(x, negative_slope=0.5))
        out["y_elu_0.3"] = np.asarray(keras.activations.elu(x, alpha=0.3))
        configs = []
        rng = np.random.default_rng(1)
        for k, (cls, kwargs, shape) in enumerate(layer_cases):
            layer = getattr(keras.layers, cls)(**kwargs)
            model = keras.Sequential([keras.Input(tuple(shape)), layer])
            for w in layer.weights:
                w.assign((0.25 + 0.1 * np.arange(w.numpy().size)).reshape(w.shape) - 0.5)
            xs = (rng.standard_normal((4,) + tuple(shape)) * 3).astype(np.float32)
            out["in_%d" % k] = xs
            out["out_%d" % k] = np.asarray(model.predict(xs, verbose=0))
            config = layer.get_config()
            configs.append({c: config[c] for c in config if c not in ("name", "dtype",
                                                                      "trainable")})
        np.savez(where + "/theirs.npz", **out)
        dense = keras.layers.Dense(3, activation=keras.layers.LeakyReLU(0.2, name="lr"))
        configs.append(dense.get_config()["activation"])
        with open(where + "/configs.json", "w") as f:
            json.dump(configs, f)
    """, where, json.dumps(NAMES), json.dumps(LAYERS), json.dumps(RELU_ARGUMENTS))
    data = dict(np.load(where / "theirs.npz"))
    with open(where / "configs.json") as f:
        data["configs"] = json.load(f)
    return data


@pytest.mark.keras3
@pytest.mark.parametrize("name", NAMES)
def test_functions_match_keras(theirs, name):
    x = grid()
    ours = activations.get(name)(x)
    assert ours.dtype == np.float32
    np.testing.assert_allclose(ours, theirs["y_" + name], rtol=2e-6, atol=1e-7)


@pytest.mark.keras3
def test_function_arguments_match_keras(theirs):
    x = grid()
    # XLA's float32 tanh reaches -1 sooner than NumPy's: far left, 0 against 1e-7 to 6e-7
    np.testing.assert_allclose(activations.gelu(x, approximate=True), theirs["y_gelu_tanh"],
                               rtol=2e-6, atol=1e-6)
    for k, kw in enumerate(RELU_ARGUMENTS):
        np.testing.assert_allclose(activations.relu(x, **kw), theirs["y_relu_%d" % k],
                                   rtol=1e-6, atol=1e-7, err_msg=str(kw))
    np.testing.assert_allclose(activations.leaky_relu(x, negative_slope=0.5),
                               theirs["y_leaky_0.5"], rtol=1e-6)
    np.testing.assert_allclose(activations.elu(x, alpha=0.3), theirs["y_elu_0.3"], rtol=2e-6,
                               atol=1e-7)


@pytest.mark.keras3
@pytest.mark.parametrize("name", [n for n in NAMES if n != "linear"])
@pytest.mark.parametrize("engine", ["numpy", "cpu"])
def test_engines_match_keras_values_and_gradients(theirs, name, engine):
    """The engine's activation layer against Keras's function and its jax
    gradient, on float32 values around 0 and of large magnitude."""
    x = grid().reshape(1, -1)
    if name == "exponential":
        x = np.minimum(x, 40.0)    # Keras's float32 exp overflows above 88; keep both finite
    net = make_net(engine, layers.Activation(name).engine_layers() or
                   [{"kind": "activation", "activation": "linear"}], (x.shape[1],), 1,
                   {"kind": "sparse_categorical_crossentropy"}, {"kind": "adam"})
    y = net.forward(x, training=True)
    dy = np.random.default_rng(0).standard_normal(x.shape).astype(np.float32)
    dx = net.backward(dy)
    keep = slice(None) if name != "exponential" else grid() <= 40.0
    np.testing.assert_allclose(y[0][keep], theirs["y_" + name][keep], rtol=5e-6, atol=1e-6)
    np.testing.assert_allclose(dx[0][keep], theirs["dx_" + name][keep], rtol=5e-6, atol=1e-6)


def our_layer(cls, kwargs, shape):
    layer = getattr(layers, cls)(**kwargs)
    model = tf.keras.Sequential([tf.keras.Input(shape), layer])
    for w in layer.get_weights():          # PReLU's alpha, as the Keras side sets it
        layer.set_weights([(0.25 + 0.1 * np.arange(w.size)).reshape(w.shape).astype(np.float32)
                           - 0.5])
    return model, layer


@pytest.mark.keras3
@pytest.mark.parametrize("k", range(len(LAYERS)))
def test_layers_match_keras(theirs, k):
    cls, kwargs, shape = LAYERS[k]
    model, layer = our_layer(cls, kwargs, tuple(shape))
    got = model.predict(theirs["in_%d" % k], verbose=0)
    np.testing.assert_allclose(got, theirs["out_%d" % k], rtol=2e-6, atol=1e-6)
    mine = {c: v for c, v in layer.get_config().items()
            if c not in ("name", "input_shape", "trainable")}
    assert mine == theirs["configs"][k]


@pytest.mark.keras3
def test_activation_layers_as_activations(theirs):
    """Dense(activation=LeakyReLU(0.2)), as Keras allows: the layer's
    formula, and Keras's config of it."""
    dense = layers.Dense(3, activation=layers.LeakyReLU(0.2, name="lr"))
    assert dense.get_config()["activation"] == theirs["configs"][-1]
    assert layers.Dense.from_config(dense.get_config()).get_config() == dense.get_config()
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    for act, plain in ((layers.LeakyReLU(0.2), layers.LeakyReLU(0.2)),
                       (layers.ELU(0.4), layers.ELU(0.4)),
                       (layers.ReLU(max_value=1.0), layers.ReLU(max_value=1.0)),
                       (layers.Activation("gelu"), layers.Activation("gelu")),
                       (layers.Softmax(), layers.Softmax())):
        one = tf.keras.Sequential([tf.keras.Input((4,)), layers.Dense(3, activation=act)])
        two = tf.keras.Sequential([tf.keras.Input((4,)), layers.Dense(3), plain])
        two.set_weights(one.get_weights())
        np.testing.assert_array_equal(one.predict(x, verbose=0), two.predict(x, verbose=0))
    image = tf.keras.Sequential([tf.keras.Input((5, 5, 2)),
                                 layers.Conv2D(2, 3, activation=layers.ReLU(6.0))])
    assert image.layers[0].get_config()["activation"]["class_name"] == "ReLU"
    with pytest.raises(ValueError, match="activation: expected a name, a function or a layer "
                                         "of ReLU, LeakyReLU, ELU, Softmax, Activation, got a "
                                         "PReLU layer"):
        layers.Dense(3, activation=layers.PReLU())
    with pytest.raises(ValueError, match="softmax expects a \\(batch, features\\) input"):
        tf.keras.Sequential([tf.keras.Input((5, 5, 2)),
                             layers.Conv2D(2, 3, activation=layers.Softmax())])


def test_activation_names_in_configs():
    """Keras names swish silu in configs; functions go by their name."""
    assert layers.Dense(3, activation="swish").get_config()["activation"] == "silu"
    assert layers.Dense(3, activation=activations.gelu).get_config()["activation"] == "gelu"
    assert layers.Conv2D(2, 3, activation="leaky_relu").get_config()["activation"] == \
        "leaky_relu"
    assert layers.Activation("hard_sigmoid").get_config()["activation"] == "hard_sigmoid"
    with pytest.warns(UserWarning, match="`alpha` is deprecated"):     # Keras's old name
        assert layers.LeakyReLU(alpha=0.1).get_config()["negative_slope"] == 0.1


def model_with_every_activation():
    acts = [n for n in NAMES if n not in ("relu", "sigmoid", "tanh", "linear", "exponential")]
    stack = [layers.Conv2D(3, 3, activation="elu", input_shape=(6, 6, 2)),
             layers.PReLU(shared_axes=[1, 2]), layers.ReLU(max_value=3.0, negative_slope=0.1,
                                                           threshold=0.2),
             layers.Flatten(), layers.Dense(8, activation="gelu"), layers.LeakyReLU(),
             layers.ELU(alpha=0.7), layers.PReLU()]
    stack += [layers.Dense(8, activation=a) for a in acts]
    stack += [layers.Dense(8, activation=layers.LeakyReLU(negative_slope=0.15)),
              layers.Activation(layers.ELU(alpha=0.4))]
    stack += [layers.Dense(3), layers.Softmax()]
    model = tf.keras.Sequential(stack, seed=3)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    rng = np.random.default_rng(0)
    model.set_weights([w + rng.uniform(-0.3, 0.3, w.shape).astype(np.float32)
                       for w in model.get_weights()])
    return model


@pytest.mark.parametrize("ext", [".keras", ".h5", ".cnncuda"])
def test_files_round_trip_here(tmp_path, ext):
    model = model_with_every_activation()
    x = np.random.default_rng(1).standard_normal((5, 6, 6, 2)).astype(np.float32)
    path = str(tmp_path / ("m" + ext))
    model.save(path)
    back = tf.keras.models.load_model(path)
    assert [type(a).__name__ for a in back.layers] == [type(a).__name__ for a in model.layers]
    assert [a.get_config() for a in back.layers][1:] == \
        [a.get_config() for a in model.layers][1:]
    np.testing.assert_array_equal(back.predict(x, verbose=0), model.predict(x, verbose=0))


@pytest.mark.keras3
def test_files_cross_with_keras(tmp_path):
    """Our .keras and .h5 files open in Keras with our predictions, and
    Keras's files of the same model (our weights) load here with Keras's."""
    model = model_with_every_activation()
    x = np.random.default_rng(1).standard_normal((5, 6, 6, 2)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    for ext in (".keras", ".h5"):
        model.save(str(tmp_path / ("ours" + ext)))
    run_keras("""
        import sys, numpy as np, keras
        where = sys.argv[1]
        x = np.load(where + "/x.npy")
        for ext in (".keras", ".h5"):
            m = keras.models.load_model(where + "/ours" + ext)
            np.save(where + "/pred" + ext + ".npy", m.predict(x, verbose=0))
            m.save(where + "/theirs" + ext)
    """, tmp_path)
    ours = model.predict(x, verbose=0)
    for ext in (".keras", ".h5"):
        np.testing.assert_allclose(np.load(tmp_path / ("pred" + ext + ".npy")), ours,
                                   rtol=1e-5, atol=1e-6)
        back = tf.keras.models.load_model(str(tmp_path / ("theirs" + ext)))
        np.testing.assert_allclose(back.predict(x, verbose=0), ours, rtol=1e-5, atol=1e-6)
        assert back.count_params() == model.count_params()


@pytest.mark.parametrize("name", [n for n in NAMES if n not in ("linear", "swish")]
                         + ["prelu", "leaky_layer", "elu_layer", "relu_layer"])
def test_a_small_model_trains_with_each(name):
    """Six epochs on a learnable toy problem (the class is the sign pattern
    of two features) on the cpu engine: the loss falls well below chance,
    ln 4."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((512, 6)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64) + 2 * (x[:, 1] > 0)
    extra = {"prelu": [layers.PReLU()], "leaky_layer": [layers.LeakyReLU()],
             "elu_layer": [layers.ELU()],
             "relu_layer": [layers.ReLU(max_value=6.0, negative_slope=0.05)]}
    hidden = [layers.Dense(32)] + extra[name] if name in extra else \
        [layers.Dense(32, activation=name)]
    model = tf.keras.Sequential([tf.keras.Input((6,))] + hidden + [layers.Dense(4)], seed=1)
    model.compile(optimizer=tf.keras.optimizers.Adam(0.02 if name != "exponential" else 0.005),
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  device="cpu")
    history = model.fit(x, y, epochs=6, batch_size=32, verbose=0)
    losses = history.history["loss"]
    assert np.all(np.isfinite(losses)) and losses[-1] < 0.3 * np.log(4), losses


def test_prelu_is_a_trainable_weight_every_optimizer_updates():
    x = np.random.default_rng(0).standard_normal((16, 4, 4, 2)).astype(np.float32)
    y = np.arange(16) % 3
    for opt in ("adam", "sgd", "rmsprop", "adagrad", "adadelta", "adamax", "nadam", "adamw"):
        model = tf.keras.Sequential([tf.keras.Input((4, 4, 2)), layers.PReLU(shared_axes=[1]),
                                     layers.Flatten(), layers.Dense(3)], seed=1)
        model.compile(optimizer=opt, device="cpu",
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        assert [v.name for v in model.trainable_weights][0] == "alpha"
        assert model.layers[0].get_weights()[0].shape == (1, 4, 2)
        model.fit(x, y, epochs=2, batch_size=4, verbose=0)
        assert np.abs(model.layers[0].get_weights()[0]).max() > 0, opt
    assert model.count_params() == 8 + 32 * 3 + 3


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="activation: expected one of .*'mish'.*got 'nope'"):
        layers.Dense(3, activation="nope")
    with pytest.raises(ValueError, match="activation: expected one of"):
        layers.Activation("hard_swish")
    with pytest.raises(ValueError, match="negative_slope: LeakyReLU expected a finite number "
                                         ">= 0, got -0.1"):
        layers.LeakyReLU(negative_slope=-0.1)
    with pytest.raises(ValueError, match="negative_slope: LeakyReLU expected"), \
            pytest.warns(UserWarning):
        layers.LeakyReLU(alpha=-1)
    with pytest.raises(ValueError, match="negative_slope: ReLU expected a number >= 0, got None"):
        layers.ReLU(negative_slope=None)
    with pytest.raises(ValueError, match="max_value: ReLU expected a finite number >= 0, got -1"):
        layers.ReLU(max_value=-1)
    with pytest.raises(ValueError, match="threshold: ReLU expected a finite number >= 0"):
        layers.ReLU(threshold=-0.5)
    with pytest.raises(TypeError, match="alpha: ELU expected a finite number, got 'x'"):
        layers.ELU(alpha="x")
    with pytest.raises(ValueError, match="alpha_initializer: expected 'zeros'"):
        layers.PReLU(alpha_initializer="ones")
    with pytest.raises(ValueError, match="alpha_regularizer: expected None"):
        layers.PReLU(alpha_regularizer="l2")
    with pytest.raises(ValueError, match="shared_axes: expected axes 1, 2 or 3"):
        layers.PReLU(shared_axes=[0])
    with pytest.raises(ValueError, match="shared_axes .* are not axes of the input"):
        tf.keras.Sequential([tf.keras.Input((5,)), layers.PReLU(shared_axes=[2])])
    with pytest.raises(ValueError, match="PReLU on a \\(height, width\\) input"):
        tf.keras.Sequential([tf.keras.Input((5, 4)), layers.PReLU()])
    with pytest.raises(ValueError, match="axis: expected -1 or 1"):
        layers.Softmax(axis=2)
    with pytest.raises(ValueError, match="activation: expected one of"):
        activations.get("nope")


@pytest.mark.keras3
@pytest.mark.parametrize("name", ["elu", "selu", "gelu", "silu", "swish", "softplus", "softsign",
                                  "leaky_relu", "relu6"])
def test_tf_nn_functions(theirs, name):
    """tf.nn's: Keras's values (TensorFlow's defaults are Keras's here: gelu
    exact, leaky_relu 0.2), the float dtype kept, integers refused."""
    x = grid()
    y = getattr(tf.nn, name)(x)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, theirs["y_" + name], rtol=2e-6, atol=1e-7)
    assert getattr(tf.nn, name)(x.astype(np.float64)).dtype == np.float64
    with pytest.raises(TypeError, match="features: expected an array of floats"):
        getattr(tf.nn, name)(np.arange(3))
    np.testing.assert_allclose(tf.nn.gelu(x, approximate=True), activations.gelu(x, True))
