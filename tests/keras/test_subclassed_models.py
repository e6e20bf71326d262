"""Subclassed keras.Model and Layer blocks (cnncuda/subclassing.py): call is
traced once into a functional graph, which runs as keras.Model(inputs,
outputs) would -- the same engine network, weights and bits; model(x,
training=...) called on data; and every refusal's message."""
import copy
import json
import re

import numpy as np
import pytest

import cnncuda
from cnncuda import keras, saving
from cnncuda.keras import layers
from conftest import C_ENGINES, assert_same_weights, random_images, run_keras

LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


class QuickstartModel(keras.Model):
    """TensorFlow's "quickstart for experts" model (smaller)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.conv1 = layers.Conv2D(6, 3, activation="relu")
        self.flatten = layers.Flatten()
        self.d1 = layers.Dense(16, activation="relu")
        self.drop = layers.Dropout(0.2)
        self.d2 = layers.Dense(10)

    def call(self, x, training=False):
        x = self.conv1(x)
        x = self.flatten(x)
        x = self.d1(x)
        x = self.drop(x, training=training)
        return self.d2(x)


def quickstart_functional(seed):
    inputs = keras.Input(shape=(10, 10, 1))
    x = layers.Conv2D(6, 3, activation="relu")(inputs)
    x = layers.Flatten()(x)
    x = layers.Dense(16, activation="relu")(x)
    x = layers.Dropout(0.2)(x)
    return keras.Model(inputs, layers.Dense(10)(x), seed=seed)


def train(model, device, epochs=2):
    x, y = random_images(48, (10, 10, 1), 10, seed=4)
    model.compile(optimizer="adam", loss=LOSS, metrics=["accuracy"], device=device)
    history = model.fit(x, y, epochs=epochs, batch_size=16, verbose=0)
    return history.history, model.predict(x, verbose=0)


@pytest.mark.parametrize("engine", C_ENGINES)
def test_the_quickstart_model_is_its_functional_model_bit_for_bit(engine):
    mine, functional = QuickstartModel(seed=3), quickstart_functional(seed=3)
    h1, p1 = train(mine, engine)
    h2, p2 = train(functional, engine)
    assert h1 == h2
    assert np.array_equal(p1, p2)
    assert_same_weights(mine, functional)
    assert [type(layer).__name__ for layer in mine.layers] == \
        ["Conv2D", "Flatten", "Dense", "Dropout", "Dense"]


def test_the_quickstart_model_agrees_with_the_numpy_engine():
    h1, p1 = train(QuickstartModel(seed=5), "cpu")
    h2, p2 = train(QuickstartModel(seed=5), "numpy")
    for key in h2:
        np.testing.assert_allclose(h1[key], h2[key], rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(p1, p2, rtol=2e-3, atol=2e-4)


def test_build_summary_and_weights_before_and_after():
    model = QuickstartModel()
    # Keras 3 lists the layers the attributes hold, before the model is built
    assert not model.built and model.get_weights() == []
    assert model.layers == [model.conv1, model.flatten, model.d1, model.drop, model.d2]
    model.build((None, 10, 10, 1))
    assert model.built and model.output_shape == (None, 10)
    assert model.input_shape == (None, 10, 10, 1)
    lines = []
    model.summary(print_fn=lines.append)
    assert lines[0] == 'Model: "%s"' % model.name and model.name.startswith("quickstart_model")
    assert any("Conv2D" in line for line in lines)
    assert "Total params: {:,}".format(model.count_params()) in lines
    assert model.count_params() == 6 * 9 + 6 + 384 * 16 + 16 + 16 * 10 + 10


class ConvBlock(layers.Layer):
    """A custom layer whose call only calls layers (a "block")."""

    def __init__(self, filters, **kwargs):
        super().__init__(**kwargs)
        self.conv = layers.Conv2D(filters, 3, padding="same")
        self.bn = layers.BatchNormalization()
        self.act = layers.ReLU()

    def call(self, x, training=None):
        return self.act(self.bn(self.conv(x), training=training))


class BlockModel(keras.Model):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.block1 = ConvBlock(4)
        self.pool = layers.MaxPooling2D()
        self.block2 = ConvBlock(8)
        self.gap = layers.GlobalAveragePooling2D()
        self.out = layers.Dense(10)

    def call(self, x, training=False):
        x = self.pool(self.block1(x, training=training))
        return self.out(self.gap(self.block2(x, training=training)))


def flat_blocks(seed):
    return keras.Sequential([
        keras.Input(shape=(10, 10, 1)),
        layers.Conv2D(4, 3, padding="same"), layers.BatchNormalization(), layers.ReLU(),
        layers.MaxPooling2D(),
        layers.Conv2D(8, 3, padding="same"), layers.BatchNormalization(), layers.ReLU(),
        layers.GlobalAveragePooling2D(), layers.Dense(10)], seed=seed)


@pytest.mark.parametrize("engine", C_ENGINES)
def test_blocks_in_a_subclassed_model_run_as_their_layers(engine):
    mine, flat = BlockModel(seed=2), flat_blocks(seed=2)
    h1, p1 = train(mine, engine)
    h2, p2 = train(flat, engine)
    assert h1 == h2 and np.array_equal(p1, p2)
    assert_same_weights(mine, flat)
    lines = []
    mine.summary(print_fn=lines.append)
    assert any(re.match(r"conv_block(_\d+)? \(ConvBlock\) ", line) for line in lines)


def test_blocks_in_sequential_and_functional_models():
    first = ConvBlock(4)
    seq = keras.Sequential([keras.Input(shape=(10, 10, 1)), first, layers.MaxPooling2D(),
                            ConvBlock(8), layers.GlobalAveragePooling2D(), layers.Dense(10)],
                           seed=2)
    inputs = keras.Input(shape=(10, 10, 1))
    x = layers.MaxPooling2D()(ConvBlock(4)(inputs))
    outputs = layers.Dense(10)(layers.GlobalAveragePooling2D()(ConvBlock(8)(x)))
    func = keras.Model(inputs, outputs, seed=2)
    results = [train(m, "cpu") for m in (seq, func, flat_blocks(seed=2))]
    for h, p in results[:2]:
        assert h == results[2][0] and np.array_equal(p, results[2][1])
    assert seq.layers[0].name == first.name     # the block's traced model stands in its place
    assert first.count_params() == 4 * 9 + 4 + 4 * 4
    assert_same_arrays(first.get_weights(), seq.get_weights()[:6])     # trained: shared
    assert [v.name for v in first.weights] == ["kernel", "bias", "gamma", "beta",
                                               "moving_mean", "moving_variance"]
    first.set_weights([w + 1 for w in first.get_weights()])
    assert_same_arrays(seq.get_weights()[:6], first.get_weights())


def test_a_block_added_before_the_input_shape_is_known_is_refused():
    model = keras.Sequential()
    with pytest.raises(ValueError, match=r'"conv_block.*" \(ConvBlock\): a layer subclass with a '
                                         r"call is traced on its input shape"):
        model.add(ConvBlock(4))


class Residual(keras.Model):
    """A nested subclassed model with a branch (Add) inside."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.c1 = layers.Conv2D(4, 3, padding="same", activation="relu")
        self.c2 = layers.Conv2D(4, 3, padding="same")
        self.add = layers.Add()

    def call(self, x):
        return self.add([x, self.c2(self.c1(x))])


class Outer(keras.Model):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.stem = layers.Conv2D(4, 3, activation="relu")
        self.res = Residual()
        self.flatten = layers.Flatten()
        self.head = layers.Dense(10)

    def call(self, x, training=None):
        return self.head(self.flatten(self.res(self.stem(x), training=training)))


def test_nested_subclassed_models_run_as_the_functional_graph():
    inputs = keras.Input(shape=(10, 10, 1))
    s = layers.Conv2D(4, 3, activation="relu")(inputs)
    r = layers.Add()([s, layers.Conv2D(4, 3, padding="same")(
        layers.Conv2D(4, 3, padding="same", activation="relu")(s))])
    func = keras.Model(inputs, layers.Dense(10)(layers.Flatten()(r)), seed=6)
    mine = Outer(seed=6)
    (h1, p1), (h2, p2) = train(mine, "cpu"), train(func, "cpu")
    assert h1 == h2 and np.array_equal(p1, p2)
    assert_same_weights(mine, func)
    assert isinstance(mine.layers[1], Residual) and mine.layers[1].built


def test_a_subclassed_model_as_a_layer_of_sequential_and_functional_models():
    inner = QuickstartModel(seed=1)
    seq = keras.Sequential([keras.Input(shape=(10, 10, 1)), inner, layers.Softmax()], seed=1)
    x, _ = random_images(5, (10, 10, 1), 10)
    p = seq.predict(x, verbose=0)
    np.testing.assert_allclose(p.sum(axis=1), 1, rtol=1e-5)
    logits = inner.predict(x, verbose=0)
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    np.testing.assert_allclose(p, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


# -- training= -------------------------------------------------------------------------------

def test_model_called_on_data_returns_numpy_as_predict():
    model = QuickstartModel(seed=1)
    x, _ = random_images(7, (10, 10, 1), 10)
    out = model(x)
    assert isinstance(out, np.ndarray) and out.shape == (7, 10)
    assert np.array_equal(out, model.predict(x, verbose=0))
    assert np.array_equal(model(x, training=False), out)


def test_training_true_runs_dropout_without_a_step():
    model = QuickstartModel(seed=1)
    model.compile(optimizer="adam", loss=LOSS, device="cpu")
    x, _ = random_images(40, (10, 10, 1), 10)
    model.build((None, 10, 10, 1))
    before = model.get_weights()
    a, b = model(x, training=True), model(x, training=True)
    assert a.shape == (40, 10) and not np.array_equal(a, b)      # new masks each call
    assert not np.array_equal(a, model(x))
    assert_same_arrays(before, model.get_weights())
    assert model.optimizer.iterations == 0
    again = QuickstartModel(seed=1)
    again.build((None, 10, 10, 1))
    again.set_weights(before)
    assert np.array_equal(again(x, training=True), a)              # the seed's masks


def test_training_calls_of_sequential_models_and_under_a_strategy():
    model = keras.Sequential([keras.Input((5,)), layers.Dense(8), layers.Dropout(0.5)], seed=4)
    x = np.ones((30, 5), np.float32)
    out = model(x, training=True)
    kept = out != 0
    assert 0 < kept.mean() < 1                                   # some dropped, the rest scaled
    np.testing.assert_allclose(out[kept], 2 * model(x)[kept], rtol=1e-6)
    with pytest.raises(ValueError, match=r"x: expected shape \(None, 5\), got \(2, 4\)"):
        model(np.ones((2, 4), np.float32), training=True)
    with cnncuda.distribute.MirroredStrategy(devices=["cpu", "cpu"]).scope():
        grouped = keras.Sequential([keras.Input((5,)), layers.Dense(3)])
    with pytest.raises(ValueError, match="training: calling a model with training=True under a "
                                         "distribution strategy is not supported"):
        grouped(x, training=True)


def assert_same_arrays(a, b):
    assert all(np.array_equal(p, q) for p, q in zip(a, b, strict=True))


class BNModel(keras.Model):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.d1 = layers.Dense(6)
        self.bn = layers.BatchNormalization(momentum=0.9)
        self.d2 = layers.Dense(3)

    def call(self, x, training=False):
        return self.d2(self.bn(self.d1(x), training=training))


KERAS_BN = """
import sys, json
import numpy as np
import keras
from keras import layers

class BNModel(keras.Model):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.d1 = layers.Dense(6)
        self.bn = layers.BatchNormalization(momentum=0.9)
        self.d2 = layers.Dense(3)

    def call(self, x, training=False):
        return self.d2(self.bn(self.d1(x), training=training))

data = np.load(sys.argv[1])
model = BNModel()
model(data["x"][:1])
model.set_weights([data["w%d" % i] for i in range(int(data["n"]))])
out = {"infer": np.asarray(model(data["x"])).tolist(),
       "train": np.asarray(model(data["x"], training=True)).tolist(),
       "weights": [np.asarray(w).tolist() for w in model.get_weights()]}
print(json.dumps(out))
"""


@pytest.mark.keras3
@pytest.mark.parametrize("engine", ["cpu", "numpy"])
def test_training_calls_match_keras3_batchnorm(tmp_path, engine):
    model = BNModel(seed=2)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((12, 5)).astype(np.float32) * 3 + 1
    with cnncuda.device(engine):
        model.build((None, 5))
        weights = model.get_weights()
        path = tmp_path / "bn.npz"
        np.savez(path, x=x, n=len(weights), **{"w%d" % i: w for i, w in enumerate(weights)})
        expected = json.loads(run_keras(KERAS_BN, path).strip().splitlines()[-1])
        infer = model(x)
        trained = model(x, training=True)
        after = model.get_weights()
    np.testing.assert_allclose(infer, expected["infer"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(trained, expected["train"], rtol=1e-4, atol=1e-4)
    for mine, theirs in zip(after, expected["weights"], strict=True):   # moving stats updated
        np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-6)


KERAS_QUICKSTART = """
import sys, json
import numpy as np
import keras
from keras import layers

class QuickstartModel(keras.Model):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.conv1 = layers.Conv2D(6, 3, activation="relu")
        self.flatten = layers.Flatten()
        self.d1 = layers.Dense(16, activation="relu")
        self.drop = layers.Dropout(0.2)
        self.d2 = layers.Dense(10)

    def call(self, x, training=False):
        x = self.conv1(x)
        x = self.flatten(x)
        x = self.d1(x)
        x = self.drop(x, training=training)
        return self.d2(x)

data = np.load(sys.argv[1])
model = QuickstartModel()
model(data["x"][:1])
model.set_weights([data["w%d" % i] for i in range(int(data["n"]))])
print(json.dumps(np.asarray(model(data["x"], training=False)).tolist()))
"""


@pytest.mark.keras3
def test_the_quickstart_model_predicts_as_keras3(tmp_path):
    model = QuickstartModel(seed=9)
    train(model, "cpu", epochs=1)
    x, _ = random_images(6, (10, 10, 1), 10, seed=8)
    weights = model.get_weights()
    path = tmp_path / "q.npz"
    np.savez(path, x=x, n=len(weights), **{"w%d" % i: w for i, w in enumerate(weights)})
    expected = json.loads(run_keras(KERAS_QUICKSTART, path).strip().splitlines()[-1])
    np.testing.assert_allclose(model(x), expected, rtol=1e-4, atol=1e-5)


# -- files, configs, copies ---------------------------------------------------------------

class Scaled(keras.Model):
    def __init__(self, units=8, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.units = units
        self.d1 = layers.Dense(units, activation="relu")
        self.d2 = layers.Dense(3)

    def call(self, x):
        return self.d2(self.d1(x))


def test_get_config_follows_keras_rules():
    model = Scaled(units=5, name="scaled")
    assert model.get_config() == {"name": "scaled", "trainable": True, "units": 5}
    again = Scaled.from_config(model.get_config())
    assert again.units == 5 and again.name == "scaled"

    class Odd(Scaled):
        def __init__(self, thing, **kwargs):
            super().__init__(**kwargs)
            self.thing = thing
    with pytest.raises(NotImplementedError, match="Object Odd was created by passing "
                                                  "non-serializable argument values"):
        Odd(object()).get_config()

    class Own(Scaled):
        def get_config(self):
            return dict(super().get_config(), units=self.units)
    assert Own(units=4, name="own").get_config() == {"name": "own", "trainable": True,
                                                     "units": 4}


def fitted_scaled():
    model = Scaled(units=6, seed=4)
    x = np.random.default_rng(0).standard_normal((32, 4)).astype(np.float32)
    y = np.random.default_rng(1).integers(0, 3, 32)
    model.compile(optimizer="adam", loss=LOSS, device="cpu")
    model.fit(x, y, epochs=1, batch_size=8, verbose=0)
    return model, x, y


def test_save_and_load_in_cnncudas_format(tmp_path):
    model, x, y = fitted_scaled()
    path = tmp_path / "scaled.cnncuda"
    model.save(path)
    with pytest.raises(saving.ModelFileError, match="holds a subclassed model of class Scaled: "
                                                    r"pass its class, load_model\(path, "
                                                    r"custom_objects=\{'Scaled': Scaled\}\)"):
        keras.models.load_model(path)
    loaded = keras.models.load_model(path, custom_objects={"Scaled": Scaled})
    assert type(loaded) is Scaled and loaded.units == 6
    assert np.array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))
    h1 = model.fit(x, y, epochs=1, batch_size=8, verbose=0, shuffle=False).history
    h2 = loaded.fit(x, y, epochs=1, batch_size=8, verbose=0, shuffle=False).history
    assert h1 == h2                 # the optimizer's state came along
    again = keras.models.load_model(path, custom_objects={"Scaled": Scaled,
                                                          "ConvBlock": ConvBlock})
    assert type(again) is Scaled
    with pytest.raises(ValueError, match=r"custom_objects\['f'\]: expected a subclass of "
                                         "keras.Model or of keras.layers.Layer"):
        keras.models.load_model(path, custom_objects={"f": len})


def test_a_model_saved_without_a_config_loads_its_weights_only(tmp_path):
    class Odd(keras.Model):
        def __init__(self, thing):
            super().__init__()
            self.d = layers.Dense(3)

        def call(self, x):
            return self.d(x)
    model = Odd(object())
    model.build((None, 4))
    model.save(tmp_path / "odd.cnncuda")
    with pytest.raises(saving.ModelFileError, match="holds a subclassed model of class Odd "
                                                    "without a config"):
        keras.models.load_model(tmp_path / "odd.cnncuda", custom_objects={"Odd": Odd})
    again = Odd(None)
    again.build((None, 4))
    again.load_weights(tmp_path / "odd.cnncuda")
    assert_same_weights(model, again)
    with pytest.raises(TypeError, match=r"custom_objects: expected a dict \{name: class\}"):
        keras.models.load_model(tmp_path / "odd.cnncuda", custom_objects=[Odd])


def test_save_weights_load_weights_and_copies(tmp_path):
    model, x, y = fitted_scaled()
    path = tmp_path / "w.cnncuda"
    model.save_weights(path)
    other = Scaled(units=6, seed=9)
    other.build((None, 4))
    other.load_weights(path)
    assert_same_weights(model, other)
    fresh = copy.deepcopy(Scaled(units=3, name="fresh"))
    assert type(fresh) is Scaled and not fresh.built and fresh.units == 3
    twin = copy.deepcopy(model)
    assert type(twin) is Scaled
    assert np.array_equal(twin.predict(x, verbose=0), model.predict(x, verbose=0))


def test_keras_files_of_a_subclassed_model(tmp_path):
    """.keras and .h5 are written as Keras 3 writes them
    (tests/data/test_keras_files_subclassed.py: both ways with Keras); to_json
    is refused."""
    pytest.importorskip("h5py")
    model, x, _ = fitted_scaled()
    model.save(tmp_path / "m.keras")
    model.save(tmp_path / "m.h5")
    loaded = keras.models.load_model(tmp_path / "m.keras", custom_objects={"Scaled": Scaled})
    assert type(loaded) is Scaled
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))
    with pytest.raises(NotImplementedError, match=r"Scaled.to_json: a subclassed model has no "
                                                  "Keras JSON"):
        model.to_json()
    functional = keras.Model(model.inputs, model.outputs)      # the escape the message gives
    functional.save(tmp_path / "f.keras")
    loaded = keras.models.load_model(tmp_path / "f.keras")
    np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0),
                               rtol=1e-6)


def test_trainable_false_freezes_the_whole_model():
    inputs = keras.Input(shape=(4,))
    func = keras.Model(inputs, layers.Dense(3)(layers.Dense(5)(inputs)), trainable=False)
    assert not func.trainable and func.trainable_weights == []
    sub = Scaled(trainable=False)
    sub.build((None, 4))
    assert sub.trainable_weights == [] and len(sub.non_trainable_weights) == 4


# -- refusals -------------------------------------------------------------------------------

def subclass(call, init=None, base=keras.Model):
    def __init__(self, **kwargs):
        base.__init__(self, **kwargs)
        self.d = layers.Dense(4)
        self.drop = layers.Dropout(0.5)
        self.flatten = layers.Flatten()
        if init:
            init(self)
    return type("Custom", (base,), {"__init__": __init__, "call": call})


@pytest.mark.parametrize("call, message", [
    (lambda self, x: self.d(np.tanh(x)), "NumPy's tanh on a KerasTensor"),
    (lambda self, x: self.d(x) * 2, r"the operation \* on a KerasTensor has no symbolic form"),
    (lambda self, x: self.d(x) if x else x, "A KerasTensor is symbolic: it has no value to test"),
    (lambda self, x: self.d(x[:, 0]), r"the operation \[\] \(indexing\)"),
    (lambda self, x: np.asarray(x), "it has no values to convert to an array"),
    # a list of outputs traces (tests/keras/test_several_outputs.py), of tensors only
    (lambda self, x: [self.d(x), self.d(x)], r'layer "dense.*" is called more than once'),
    (lambda self, x: [self.d(x), 3], "returned 2 outputs"),
    (lambda self, x: self.d(self.flatten(self.flatten(x))),
     r'layer "flatten.*" is called more than once between the input and the output'),
    (lambda self, x: self.flatten(x) and x, "A KerasTensor is symbolic"),
    (lambda self, x: x, "the model's output is its input"),
    (lambda self, x: 3, "returned int: it must return the output tensor"),
])
def test_what_a_trace_cannot_follow_is_refused_naming_the_class(call, message):
    model = subclass(call)()
    with pytest.raises((TypeError, ValueError), match=r"Custom\.call \(custom.*\)") as err:
        model.build((None, 6))
    assert err.match(message)
    assert not model.built


def test_a_graph_that_depends_on_training_is_refused():
    def call(self, x, training=False):
        return self.d(self.drop(x) if training else x)
    with pytest.raises(ValueError, match=r"Custom.call \(custom.*\) builds a different graph for "
                                         r"training=True than for training=False: with "
                                         r"training=True it runs \['dropout.*', 'dense.*'\], "
                                         r"with training=False \['dense.*'\]"):
        subclass(call)().build((None, 6))

    def call(self, x, training=False):
        return layers.Dense(3)(x)
    with pytest.raises(ValueError, match="it makes new layers each time it runs"):
        subclass(call)().build((None, 6))


def test_a_fixed_training_true_on_dropout_is_refused():
    """training=False fixed runs (tests/keras/test_fixed_training_mode.py);
    training=True would need training mode in predict."""
    def call(self, x, training=False):
        return self.d(self.drop(x, training=True))
    with pytest.raises(ValueError, match=r'training: layer "dropout.*" was called with '
                                         r"training=True, but layer \"dropout.*\" \(Dropout\) "
                                         r"would then run in training mode in evaluate and "
                                         r"predict too"):
        subclass(call)().build((None, 6))

    def inference(self, x, training=False):
        return self.d(self.drop(x, training=False))
    model = subclass(inference)()
    model.build((None, 6))
    assert {"kind": "dropout", "rate": 0.0} in model._engine_layers()


def test_a_custom_layer_with_weights_is_refused_naming_its_class():
    class Linear(layers.Layer):
        def build(self, input_shape):
            self.w = self.add_weight(shape=(input_shape[-1], 4))

        def call(self, x):
            return x

    class Uses(keras.Model):
        def __init__(self):
            super().__init__()
            self.lin = Linear()

        def call(self, x):
            return self.lin(x)
    with pytest.raises(NotImplementedError, match=r"Linear.add_weight: a custom layer with "
                                                  r"weights of its own cannot run"):
        Uses().build((None, 5))

    class Math(layers.Layer):
        def call(self, x):
            return x * 2.0
    inputs = keras.Input(shape=(5,))
    with pytest.raises(TypeError, match=r"Math.call \(math.*\) cannot be traced.*operation \*"):
        Math()(inputs)


@pytest.mark.parametrize("method", ["train_step", "test_step", "predict_step", "compute_loss"])
def test_custom_training_steps_are_refused_at_compile_and_fit(method):
    cls = subclass(lambda self, x: self.d(x))
    custom = type("Stepped", (cls,), {method: lambda self, *a, **k: None})
    model = custom()
    with pytest.raises(NotImplementedError, match=r"Stepped.%s: custom training steps are not "
                                                  r"supported" % method):
        model.compile(optimizer="sgd", loss=LOSS)
    with pytest.raises(NotImplementedError, match=r"Stepped.%s" % method):
        model.predict(np.zeros((2, 6), np.float32), verbose=0)


def test_a_model_without_inputs_or_call_is_refused():
    with pytest.raises(TypeError, match=r"Model: expected inputs and outputs \(keras.Model\("
                                        r"inputs, outputs\)\), or a subclass of keras.Model "
                                        r"that defines call"):
        keras.Model()


# -- a tutorial-shaped script ---------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("engine", [p for p in C_ENGINES if p.id in ("cuda", "cudnn")])
def test_training_calls_on_the_gpu_engines_match_cpu(engine):
    cpu, gpu = BNModel(seed=3), BNModel(seed=3)
    x = np.random.default_rng(2).standard_normal((16, 5)).astype(np.float32)
    with cnncuda.device("cpu"):
        a = cpu(x, training=True)
    with cnncuda.device(engine):
        b = gpu(x, training=True)
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    for p, q in zip(cpu.get_weights(), gpu.get_weights(), strict=True):
        np.testing.assert_allclose(p, q, rtol=1e-4, atol=1e-6)


TRACKING = """
class Block(layers.Layer):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.a, self.b = layers.Dense(2), layers.Dense(3)

    def call(self, x):
        return self.b(self.a(x))


class Tracked(keras.Model):
    def __init__(self):
        super().__init__()
        self.d2 = layers.Dense(3, name="second")
        self.d1 = layers.Dense(4, name="first")
        self.stack = [layers.Dense(5, name="l0"), layers.Dropout(0.1, name="l1")]
        self.named = {"x": layers.Dense(6, name="dx"), "a": layers.Dense(7, name="da")}
        self.inner = keras.Sequential([layers.Dense(2, name="inner_d")], name="inner")
        self.block = Block(name="blk")
        self.count = 3
        self.again = self.d1
        self.stack.append(layers.Dense(5, name="l2"))

    def call(self, x, training=False):
        x = self.d1(x)
        for layer in self.stack:
            x = layer(x)
        x = self.named["a"](self.named["x"](x))
        return self.d2(self.block(self.inner(x)))


m = Tracked()
before = [(layer.name, type(layer).__name__) for layer in m.layers]
m(np.zeros((2, 4), "float32"))
after = [(layer.name, type(layer).__name__) for layer in m.layers]
"""


@pytest.mark.keras3
def test_model_layers_before_and_after_build_as_keras():
    """model.layers of a subclassed model: the layers its attributes hold,
    in the order they were set (lists, dict values, a nested model and a
    block as one entry each, a layer held twice once), before and after it
    is built, as Keras 3."""
    import json
    from conftest import run_keras
    scope = {"keras": keras, "layers": layers, "np": np}
    exec(TRACKING, scope)
    out = run_keras("import json, numpy as np, keras\nfrom keras import layers\n" + TRACKING
                    + "print(json.dumps([before, after]))")
    want = json.loads(out.strip().splitlines()[-1])
    got = [[list(t) for t in scope["before"]], [list(t) for t in scope["after"]]]
    assert got == want
    assert [name for name, _ in want[0]][:3] == ["second", "first", "l0"]
