"""Models of several outputs trained and evaluated (issue #24): a loss per
output (a list, a dict by output name, or one for all), loss_weights,
metrics per output, y as a list or dict, one sample_weight for every
output; the engines compute each output's loss and its gradient
(csrc/net/loss_parts.c). Against Keras 3 on the same initial weights (the
ticket model of Chollet's "Deep Learning with Python" ch. 7, and a
one-input model with a classification and a regression head): History,
evaluate, the batch calls and the weights; each engine against the NumPy
reference; the refusals; saving with the compile settings."""
import json

import numpy as np
import pytest

from cnncuda import keras
from conftest import engine_params, run_keras

# the same architectures here and in Keras 3 (keras is cnncuda.keras or Keras's)
BUILD = """
def ticket(keras):
    title = keras.Input(shape=(12,), name="title")
    body = keras.Input(shape=(9,), name="text_body")
    tags = keras.Input(shape=(5,), name="tags")
    x = keras.layers.Concatenate(name="join")([title, body, tags])
    x = keras.layers.Dense(16, activation="relu", name="hidden")(x)
    priority = keras.layers.Dense(1, activation="sigmoid", name="priority")(x)
    department = keras.layers.Dense(4, activation="softmax", name="department")(x)
    return keras.Model([title, body, tags], [priority, department], name="tickets")


def two_heads(keras):
    image = keras.Input(shape=(6, 6, 2), name="image")
    x = keras.layers.Conv2D(3, 3, activation="relu", name="conv")(image)
    x = keras.layers.Flatten(name="flat")(x)
    x = keras.layers.Dense(10, activation="tanh", name="shared")(x)
    label = keras.layers.Dense(4, name="label")(x)
    score = keras.layers.Dense(2, name="score")(x)
    return keras.Model(image, [label, score], name="heads")


def three(keras):
    features = keras.Input(shape=(7,), name="features")
    h = keras.layers.Dense(9, activation="relu", name="trunk",
                           kernel_regularizer=keras.regularizers.L2(0.01))(features)
    kind = keras.layers.Dense(5, activation="softmax", name="kind")(h)
    size = keras.layers.Dense(3, name="size")(h)
    flags = keras.layers.Dense(2, activation="sigmoid", name="flags")(h)
    model = keras.Model(features, [kind, size, flags], name="three")
    model.compile(optimizer=keras.optimizers.Adam(0.02),
                  loss=["sparse_categorical_crossentropy", keras.losses.Huber(0.5),
                        "binary_crossentropy"],
                  loss_weights=[1.0, 0.5, 2.0],
                  # (for the binary CE of 2 units Keras's 'accuracy' is categorical:
                  # docs/semantics.md, "Accuracy"; binary_accuracy names the count)
                  metrics=[["accuracy"], ["mae"], ["binary_accuracy"]])
    return model
"""
_SPACE = {}
exec(BUILD, _SPACE)     # noqa: S102  (the test's own source text)
ticket, two_heads, three = _SPACE["ticket"], _SPACE["two_heads"], _SPACE["three"]

RNG = np.random.default_rng(7)
N = 29
TITLE, BODY, TAGS = (RNG.random((N, 12)).astype(np.float32),
                     RNG.random((N, 9)).astype(np.float32),
                     (RNG.random((N, 5)) > 0.5).astype(np.float32))
PRIORITY = RNG.random((N, 1)).astype(np.float32)
DEPARTMENT = np.eye(4, dtype=np.float32)[RNG.integers(0, 4, N)]
IMAGE = RNG.random((N, 6, 6, 2)).astype(np.float32)
LABEL = RNG.integers(0, 4, N)
SCORE = RNG.random((N, 2)).astype(np.float32)
WEIGHT = (RNG.random(N) + 0.2).astype(np.float32)


def device_of(engine):
    return "omp:2" if engine == "omp" else engine


def ticket_compiled(device="cpu", seed=3):
    model = ticket(keras)
    model.seed = seed
    model.compile(optimizer=keras.optimizers.Adam(0.01), device=device,
                  loss=["mean_squared_error", "categorical_crossentropy"],
                  metrics=[["mean_absolute_error"], ["accuracy"]])
    return model


def heads_compiled(device="cpu"):
    model = two_heads(keras)
    model.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.5), device=device,
                  loss={"score": "mse",
                        "label": keras.losses.SparseCategoricalCrossentropy(from_logits=True)},
                  loss_weights={"label": 1.0, "score": 0.25}, metrics={"label": ["accuracy"]})
    return model


def _dump(arrays):
    return json.dumps([np.asarray(a).tolist() for a in arrays])


KERAS_RUN = BUILD + """
import json, sys
import numpy as np
import keras
which = sys.argv[1]
start = [np.array(w, np.float32) for w in json.loads(sys.argv[2])]
x = [np.array(a, np.float32) for a in json.loads(sys.argv[3])]
y = [np.array(a) for a in json.loads(sys.argv[4])]
w = np.array(json.loads(sys.argv[5]), np.float32)
if which == "ticket":
    model = ticket(keras)
    model.compile(optimizer=keras.optimizers.Adam(0.01),
                  loss=["mean_squared_error", "categorical_crossentropy"],
                  metrics=[["mean_absolute_error"], ["accuracy"]])
    model.set_weights(start)
    fit = model.fit(x, y, batch_size=8, epochs=3, verbose=0, shuffle=False,
                    validation_split=0.25).history
    out = {"fit": fit, "eval": model.evaluate(x, y, verbose=0),
           "eval_dict": model.evaluate(x, {"priority": y[0], "department": y[1]}, verbose=0,
                                       return_dict=True),
           "train_batch": model.train_on_batch([a[:8] for a in x], [b[:8] for b in y]),
           "test_batch": model.test_on_batch([a[:8] for a in x], [b[:8] for b in y],
                                             return_dict=True)}
else:
    x = x[0]
    model = two_heads(keras)
    model.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.5),
                  loss={"score": "mse",
                        "label": keras.losses.SparseCategoricalCrossentropy(from_logits=True)},
                  loss_weights={"label": 1.0, "score": 0.25}, metrics={"label": ["accuracy"]})
    model.set_weights(start)
    fit = model.fit(x, [y[0], y[1]], batch_size=8, epochs=3, verbose=0,
                    shuffle=False, sample_weight=w,
                    validation_data=(x[:10], {"label": y[0][:10], "score": y[1][:10]})).history
    out = {"fit": fit, "eval": model.evaluate(x, y, verbose=0, sample_weight=w),
           "eval_dict": model.evaluate(x, y, verbose=0, return_dict=True),
           "train_batch": model.train_on_batch(x[:8], [y[0][:8], y[1][:8]]),
           "test_batch": model.test_on_batch(x[:8], [y[0][:8], y[1][:8]], return_dict=True)}
out["weights"] = [a.tolist() for a in model.get_weights()]
print(json.dumps(out, default=float))
"""


def _compare(got, want, rtol=1e-4):
    assert list(got["fit"]) == list(want["fit"])            # Keras 3's names, sorted
    for key in want["fit"]:
        np.testing.assert_allclose(got["fit"][key], want["fit"][key], rtol=rtol, atol=1e-6,
                                   err_msg=key)
    np.testing.assert_allclose(got["eval"], want["eval"], rtol=rtol, atol=1e-6)
    assert list(got["eval_dict"]) == list(want["eval_dict"])
    np.testing.assert_allclose(list(got["eval_dict"].values()),
                               list(want["eval_dict"].values()), rtol=rtol, atol=1e-6)
    np.testing.assert_allclose(got["train_batch"], want["train_batch"], rtol=rtol, atol=1e-6)
    assert list(got["test_batch"]) == list(want["test_batch"])
    np.testing.assert_allclose(list(got["test_batch"].values()),
                               list(want["test_batch"].values()), rtol=rtol, atol=1e-6)
    for a, b in zip(got["weights"], want["weights"], strict=True):
        np.testing.assert_allclose(a, np.array(b, np.float32), rtol=1e-3, atol=1e-5)


@pytest.mark.keras3
def test_ticket_model_trains_as_keras3():
    """Chollet's ticket model: priority regression (mse, mae metric) and
    department classification (categorical CE, accuracy), three inputs."""
    model = ticket_compiled()
    start = model.get_weights()
    x, y = [TITLE, BODY, TAGS], [PRIORITY, DEPARTMENT]
    fit = model.fit(x, y, batch_size=8, epochs=3, verbose=0, shuffle=False,
                    validation_split=0.25).history
    got = {"fit": fit, "eval": model.evaluate(x, y, verbose=0),
           "eval_dict": model.evaluate(x, {"priority": y[0], "department": y[1]}, verbose=0,
                                       return_dict=True),
           "train_batch": model.train_on_batch([a[:8] for a in x], [b[:8] for b in y]),
           "test_batch": model.test_on_batch([a[:8] for a in x], [b[:8] for b in y],
                                             return_dict=True),
           "weights": model.get_weights()}
    assert list(fit) == ["department_accuracy", "department_loss", "loss",
                         "priority_loss", "priority_mean_absolute_error",
                         "val_department_accuracy", "val_department_loss", "val_loss",
                         "val_priority_loss", "val_priority_mean_absolute_error"]
    out = run_keras(KERAS_RUN, "ticket", _dump(start), _dump(x), _dump(y), _dump(WEIGHT))
    _compare(got, json.loads(out.strip().splitlines()[-1]))


@pytest.mark.keras3
def test_one_input_two_heads_train_as_keras3():
    """A classification head (sparse CE from logits) and a regression head
    (mse, loss weight 0.25) on one conv trunk; losses, weights and metrics
    by output name, y as a list and a dict, sample weights."""
    model = heads_compiled()
    start = model.get_weights()
    # (Keras 3.15 fails on a dict y with one sample_weight array; cnncuda takes it)
    val = (IMAGE[:10], {"label": LABEL[:10], "score": SCORE[:10]})
    fit = model.fit(IMAGE, [LABEL, SCORE], batch_size=8, epochs=3, verbose=0,
                    shuffle=False, sample_weight=WEIGHT, validation_data=val).history
    y = [LABEL, SCORE]
    got = {"fit": fit, "eval": model.evaluate(IMAGE, y, verbose=0, sample_weight=WEIGHT),
           "eval_dict": model.evaluate(IMAGE, y, verbose=0, return_dict=True),
           "train_batch": model.train_on_batch(IMAGE[:8], [LABEL[:8], SCORE[:8]]),
           "test_batch": model.test_on_batch(IMAGE[:8], [LABEL[:8], SCORE[:8]],
                                             return_dict=True),
           "weights": model.get_weights()}
    out = run_keras(KERAS_RUN, "heads", _dump(start), _dump([IMAGE]), _dump(y), _dump(WEIGHT))
    _compare(got, json.loads(out.strip().splitlines()[-1]))


def test_loss_is_the_weighted_sum_of_the_outputs_losses():
    model = heads_compiled()
    logs = model.evaluate(IMAGE, [LABEL, SCORE], verbose=0, return_dict=True)
    assert logs["loss"] == pytest.approx(logs["label_loss"] + 0.25 * logs["score_loss"],
                                         rel=1e-6)
    label, score = model.predict(IMAGE, verbose=0)
    z = label.astype(np.float64)
    ce = np.log(np.exp(z).sum(1)) - z[np.arange(N), LABEL]
    assert logs["label_loss"] == pytest.approx(ce.mean(), rel=1e-5)
    assert logs["score_loss"] == pytest.approx(((score - SCORE) ** 2).mean(), rel=1e-5)
    assert logs["label_accuracy"] == np.mean(np.argmax(label, 1) == LABEL)
    # evaluate's list: the loss, the outputs' losses in their order, the metrics
    assert model.metrics_names == ["loss", "label_loss", "score_loss", "label_accuracy"]
    assert model.evaluate(IMAGE, [LABEL, SCORE], verbose=0) == pytest.approx(
        [logs["loss"], logs["label_loss"], logs["score_loss"], logs["label_accuracy"]])


def three_outputs(device, seed=5):
    """Sparse CE (softmax), huber and binary CE (sigmoid) outputs, an odd
    width each, an L2 penalty, a dropout."""
    inp = keras.Input(shape=(7,), name="features")
    h = keras.layers.Dense(9, activation="relu", name="trunk",
                           kernel_regularizer=keras.regularizers.L2(0.01))(inp)
    h = keras.layers.Dropout(0.25, name="drop")(h)
    a = keras.layers.Dense(5, activation="softmax", name="kind")(h)
    b = keras.layers.Dense(3, name="size")(h)
    c = keras.layers.Dense(2, activation="sigmoid", name="flags")(h)
    model = keras.Model(inp, [a, b, c], seed=seed)
    model.compile(optimizer=keras.optimizers.Adam(0.02), device=device,
                  loss=["sparse_categorical_crossentropy", keras.losses.Huber(0.5),
                        "binary_crossentropy"],
                  loss_weights=[1.0, 0.5, 2.0],
                  metrics=[["accuracy"], ["mae"], ["accuracy"]])
    return model


X7 = RNG.random((N, 7)).astype(np.float32)
Y3 = [RNG.integers(0, 5, N), RNG.random((N, 3)).astype(np.float32),
      (RNG.random((N, 2)) > 0.5).astype(np.float32)]


def _three_run(device, weighted):
    model = three_outputs(device)
    kwargs = {"sample_weight": WEIGHT} if weighted else {}
    h = model.fit(X7, Y3, batch_size=6, epochs=2, verbose=0, shuffle=False,
                  validation_data=(X7[:11], [y[:11] for y in Y3]), **kwargs).history
    return model, h, model.evaluate(X7, Y3, verbose=0, **kwargs)


@pytest.mark.parametrize("weighted", [False, True], ids=["plain", "sample_weight"])
@pytest.mark.parametrize("engine", engine_params())
def test_each_engine_trains_several_outputs_as_the_reference(engine, weighted):
    ref, h_ref, e_ref = _three_run("numpy", weighted)
    mine, h, e = _three_run(device_of(engine), weighted)
    gpu = 10 if engine in ("cuda", "cudnn") else 1
    assert list(h) == list(h_ref)
    for key in h_ref:
        np.testing.assert_allclose(h[key], h_ref[key], rtol=1e-5 * gpu, atol=1e-6 * gpu,
                                   err_msg=key)
    np.testing.assert_allclose(e, e_ref, rtol=1e-5 * gpu, atol=1e-6 * gpu)
    for a, b in zip(mine.get_weights(), ref.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4 * gpu, atol=1e-5 * gpu)


def test_omp_equals_cpu_bit_for_bit():
    one, h1, e1 = _three_run("cpu", True)
    other, h2, e2 = _three_run("omp:2", True)
    assert h1 == h2 and e1 == e2
    for a, b in zip(one.get_weights(), other.get_weights(), strict=True):
        assert np.array_equal(a, b)


def conv_and_vector(device):
    image = keras.Input(shape=(5, 5, 2), name="image")
    conv = keras.layers.Conv2D(3, 3, name="map")(image)
    flat = keras.layers.Dense(2, name="vector")(keras.layers.Flatten(name="flat")(conv))
    model = keras.Model(image, [conv, flat], seed=2)
    model.compile(optimizer="sgd", loss="mse", device=device)
    return model


XMAP = RNG.random((N, 5, 5, 2)).astype(np.float32)
YMAP = [RNG.random((N, 3, 3, 3)).astype(np.float32), RNG.random((N, 2)).astype(np.float32)]


def test_one_loss_for_every_output_and_outputs_of_positions():
    """A single loss applies to each output; an output of several
    positions (a conv map) takes its loss along the last axis."""
    model = conv_and_vector("cpu")
    logs = model.evaluate(XMAP, YMAP, verbose=0, return_dict=True)
    conv_out, flat_out = model.predict(XMAP, verbose=0)
    assert logs["map_loss"] == pytest.approx(((conv_out - YMAP[0]) ** 2).mean(), rel=1e-5)
    assert logs["vector_loss"] == pytest.approx(((flat_out - YMAP[1]) ** 2).mean(), rel=1e-5)
    ref = conv_and_vector("numpy")
    h = model.fit(XMAP, YMAP, batch_size=7, epochs=2, verbose=0, shuffle=False).history
    h_ref = ref.fit(XMAP, YMAP, batch_size=7, epochs=2, verbose=0, shuffle=False).history
    assert list(h) == ["loss", "map_loss", "vector_loss"] == list(h_ref)
    for key in h:
        np.testing.assert_allclose(h[key], h_ref[key], rtol=1e-5, err_msg=key)
    for a, b in zip(model.get_weights(), ref.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    with pytest.raises(ValueError, match="sample_weight: weighting samples is supported for "
                                         "outputs of shape .* output 'map' has several "
                                         "positions per sample"):
        model.evaluate(XMAP, YMAP, sample_weight=WEIGHT, verbose=0)


@pytest.fixture
def model():
    return heads_compiled()


@pytest.mark.parametrize("kwargs, message", [
    ({"loss": ["mse"]}, "loss: expected 2 entries, one per output (label, score"),
    ({"loss": ["mse", "mse", "mse"]}, "loss: expected 2 entries"),
    ({"loss": {"label": "mse", "nope": "mse"}}, "loss: unknown output name 'nope'"),
    ({"loss": {"label": "mse"}}, "loss: a dict of losses needs every output's name, "
                                 "missing ['score']"),
    ({"loss": ["mse", "mse"], "loss_weights": [1.0]}, "loss_weights: expected 2 entries"),
    ({"loss": ["mse", "mse"], "loss_weights": {"other": 1.0}},
     "loss_weights: unknown output name 'other'"),
    ({"loss": ["mse", "mse"], "loss_weights": [1.0, -1.0]}, "loss_weights: expected finite"),
    ({"loss": ["mse", "mse"], "loss_weights": {"score": 2.0}},
     "loss_weights: a dict of weights needs every output's name, missing ['label']"),
    ({"loss": ["mse", "mse"], "metrics": ["mae"]}, "metrics: expected a list of 2 entries"),
    ({"loss": ["mse", "mse"], "metrics": {"nope": "mae"}}, "metrics: unknown output name"),
    ({"loss": ["mse", "categorical_crossentropy"]},
     None),
])
def test_compile_refusals_name_the_argument(model, kwargs, message):
    if message is None:     # categorical CE on a 2-unit output is fine
        model.compile(optimizer="sgd", **kwargs)
        return
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("[", r"\[")):
        model.compile(optimizer="sgd", **kwargs)


def test_categorical_loss_on_one_unit_output_refused():
    model = ticket(keras)
    with pytest.raises(ValueError, match=r"loss\[0\]: categorical_crossentropy expects at "
                                         r"least 2 outputs"):
        model.compile(optimizer="sgd", loss=["categorical_crossentropy", "mse"])


@pytest.mark.parametrize("y, message", [
    ([LABEL], r"y: expected 2 target arrays, one per output \(label, score, in that order\), "
              r"got 1"),
    ([LABEL, SCORE, SCORE], "y: expected 2 target arrays"),
    ({"label": LABEL}, r"y: a dict of targets needs the keys \['label', 'score'\].*missing "
                       r"\['score'\]"),
    ({"label": LABEL, "score": SCORE, "extra": SCORE}, r"unknown \['extra'\]"),
    ([LABEL, SCORE[:, :1]], r"y\[1\] \(output 'score'\): expected shape \(29, 2\)"),
    ([LABEL + 4, SCORE], r"y\[0\] \(output 'label'\): expected integer class labels in "
                         r"\[0, 4\)"),
    ([LABEL[:5], SCORE], r"y\[0\] \(output 'label'\): expected 29 samples"),
])
def test_target_refusals_name_the_output(model, y, message):
    before = model.get_weights()
    for call in (lambda: model.fit(IMAGE, y, epochs=1, verbose=0),
                 lambda: model.evaluate(IMAGE, y, verbose=0),
                 lambda: model.train_on_batch(IMAGE, y)):
        with pytest.raises(ValueError, match=message):
            call()
    for a, b in zip(model.get_weights(), before, strict=True):
        assert np.array_equal(a, b)


def test_targets_not_a_list_or_dict_refused(model):
    with pytest.raises(TypeError, match="y: the model has 2 outputs"):
        model.fit(IMAGE, LABEL, epochs=1, verbose=0)


def test_weights_refusals(model):
    with pytest.raises(ValueError, match="class_weight: not supported for a model of several "
                                         "outputs"):
        model.fit(IMAGE, [LABEL, SCORE], class_weight={0: 1.0}, verbose=0)
    with pytest.raises(ValueError, match="sample_weight: one array of weights for every output"):
        model.fit(IMAGE, [LABEL, SCORE], sample_weight=[WEIGHT, WEIGHT], verbose=0)
    with pytest.raises(ValueError, match=r"sample_weight\[3\]: expected finite weights >= 0 "
                                         r"and, with an accuracy compiled for output 'label'"):
        w = WEIGHT.copy()
        w[3] = 0
        model.fit(IMAGE, [LABEL, SCORE], sample_weight=w, verbose=0)


def test_saves_and_loads_compiled(tmp_path):
    model = heads_compiled()
    model.fit(IMAGE, [LABEL, SCORE], batch_size=8, epochs=1, verbose=0)
    for name in ("m.cnn", "m.keras", "m.h5"):
        path = tmp_path / name
        model.save(path)
        back = keras.models.load_model(path, device="cpu")
        assert back.loss.names == ["label", "score"]
        assert back.loss.weights == [1.0, 0.25]
        assert back.evaluate(IMAGE, [LABEL, SCORE], verbose=0, return_dict=True) == \
            pytest.approx(model.evaluate(IMAGE, [LABEL, SCORE], verbose=0, return_dict=True))


KERAS_FILES = BUILD + """
import json, sys
import numpy as np
import keras
path, mine = sys.argv[1], sys.argv[2]
x = np.array(json.loads(sys.argv[3]), np.float32)
y = [np.array(a) for a in json.loads(sys.argv[4])]
theirs = keras.models.load_model(mine)        # cnncuda's file, compiled
got = theirs.evaluate(x, y, verbose=0, return_dict=True)
model = two_heads(keras)
model.compile(optimizer="adam", loss=["sparse_categorical_crossentropy", "mae"],
              loss_weights=[0.5, 2.0], metrics=[["accuracy"], None])
model.save(path)
saved = model.evaluate(x, y, verbose=0, return_dict=True)
model.compile(optimizer="adam", loss={"score": keras.losses.Huber(), "label":
                                      keras.losses.SparseCategoricalCrossentropy(from_logits=True)},
              loss_weights={"label": 0.5, "score": 2.0}, metrics={"score": ["mae"]})
model.save(path + ".dict.keras")
by_name = model.evaluate(x, y, verbose=0, return_dict=True)
print(json.dumps({"loaded": got, "saved": saved, "by_name": by_name}))
"""


@pytest.mark.keras3
def test_keras3_files_of_several_outputs_load_compiled_both_ways(tmp_path):
    model = heads_compiled()
    model.save(tmp_path / "mine.keras")
    mine = model.evaluate(IMAGE, [LABEL, SCORE], verbose=0, return_dict=True)
    out = run_keras(KERAS_FILES, tmp_path / "theirs.keras", tmp_path / "mine.keras",
                    json.dumps(IMAGE.tolist()), _dump([LABEL, SCORE]))
    want = json.loads(out.strip().splitlines()[-1])
    assert list(want["loaded"]) == list(mine)
    np.testing.assert_allclose(list(want["loaded"].values()), list(mine.values()), rtol=1e-5)
    back = keras.models.load_model(tmp_path / "theirs.keras", device="cpu")
    assert [one.kind for one in back.loss.losses] == ["sparse_categorical_crossentropy",
                                                      "mean_absolute_error"]
    assert back.loss.weights == [0.5, 2.0]
    got = back.evaluate(IMAGE, [LABEL, SCORE], verbose=0, return_dict=True)
    assert list(got) == list(want["saved"])
    np.testing.assert_allclose(list(got.values()), list(want["saved"].values()), rtol=1e-5)
    # Keras's dicts by output name (loss, loss_weights, metrics)
    back = keras.models.load_model(str(tmp_path / "theirs.keras") + ".dict.keras", device="cpu")
    assert [one.kind for one in back.loss.losses] == ["sparse_categorical_crossentropy",
                                                      "huber"]
    got = back.evaluate(IMAGE, [LABEL, SCORE], verbose=0, return_dict=True)
    assert list(got) == list(want["by_name"])
    np.testing.assert_allclose(list(got.values()), list(want["by_name"].values()), rtol=1e-5)


def test_one_output_models_keep_their_plans():
    """A model of one output builds the network it always did: no parts."""
    inp = keras.Input(shape=(7,))
    model = keras.Model(inp, keras.layers.Dense(3, name="only")(inp))
    model.compile(optimizer="sgd", loss="mse", device="cpu")
    assert model._engine_loss() == {"kind": "mean_squared_error", "from_logits": False}
    logs = model.evaluate(X7, Y3[1], verbose=0, return_dict=True)
    assert list(logs) == ["loss"]


class TwoHeads(keras.Model):
    """A subclassed model of two outputs, compiled before it is built."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.trunk = keras.layers.Dense(8, activation="relu", name="trunk")
        self.kind = keras.layers.Dense(5, name="kind")
        self.size = keras.layers.Dense(3, name="size")

    def call(self, x, training=False):
        h = self.trunk(x)
        return [self.kind(h), self.size(h)]


def test_subclassed_model_of_two_outputs_compiled_before_it_is_built():
    runs = []
    for device in ("numpy", "cpu"):
        model = TwoHeads(seed=4)
        model.compile(optimizer="adam", device=device, loss_weights={"size": 0.5, "kind": 1.0},
                      loss={"kind": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                            "size": "mae"}, metrics={"kind": ["accuracy"]})
        h = model.fit(X7, {"kind": Y3[0], "size": Y3[1]}, batch_size=8, epochs=2, verbose=0,
                      shuffle=False).history
        runs.append((h, model.get_weights()))
        assert model.loss.names == ["kind", "size"] and model.loss.weights == [1.0, 0.5]
    (h_ref, w_ref), (h, w) = runs
    assert list(h) == ["kind_accuracy", "kind_loss", "loss", "size_loss"] == list(h_ref)
    for key in h:
        np.testing.assert_allclose(h[key], h_ref[key], rtol=1e-5, err_msg=key)
    for a, b in zip(w, w_ref, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_generators_and_datasets_of_several_targets_train_as_arrays():
    """Batches (x, (y1, y2)) and (x, {name: y}) of a generator and a
    Dataset train and evaluate as the arrays do (a learning-rate schedule
    cuts the blocks of batches; a host metric reads its output's targets)."""
    from cnncuda import data

    def model():
        m = two_heads(keras)
        rate = keras.optimizers.schedules.ExponentialDecay(0.1, 1, 0.9)
        m.compile(optimizer=keras.optimizers.SGD(rate), device="cpu",
                  loss=[keras.losses.SparseCategoricalCrossentropy(from_logits=True), "mse"],
                  metrics={"score": ["mae"], "label": ["accuracy"]})
        return m
    arrays = model()
    start = arrays.get_weights()
    h_arrays = arrays.fit(IMAGE, [LABEL, SCORE], batch_size=8, epochs=2, verbose=0,
                          shuffle=False).history

    def batches():
        for _ in range(2):
            for i in range(0, N, 8):
                yield IMAGE[i:i + 8], (LABEL[i:i + 8], SCORE[i:i + 8])
    streamed = model()
    streamed.set_weights(start)
    assert streamed.fit(batches(), epochs=2, steps_per_epoch=4, verbose=0).history == h_arrays
    ds = data.Dataset.from_tensor_slices((IMAGE, {"label": LABEL, "score": SCORE})).batch(8)
    np.testing.assert_allclose(streamed.evaluate(ds, verbose=0),
                               arrays.evaluate(IMAGE, [LABEL, SCORE], batch_size=8, verbose=0),
                               rtol=1e-6)


@pytest.mark.parametrize("engine", engine_params())
def test_each_engines_net_of_several_outputs_agrees_with_the_reference(engine):
    """The Net itself (engine.make_net): train_batch, compute_gradients and
    evaluate give (loss_sum, parts), parts each output's loss sum and
    correct count; labels staged as floats, out of range ones clamped into
    [0, k) by labels_from_floats as the reference does (the Python layer
    refuses them before they get here); one batch past max_batch through
    evaluate's chunks."""
    from cnncuda.engine import make_net
    model = three_outputs("cpu")
    args = (model._engine_layers(), model._engine_input_shape(), 16, model._engine_loss(),
            model._compiled_optimizer)
    ref, net = make_net("numpy", *args, seed=5), make_net(device_of(engine), *args, seed=5)
    net.set_weights(ref.get_weights())
    packed = np.concatenate([Y3[0][:, None].astype(np.float32), Y3[1], Y3[2]], axis=1)
    packed[3, 0], packed[5, 0] = 7.0, -2.0          # clamped to 4 and 0
    gpu = 10 if engine in ("cuda", "cudnn") else 1
    for call in ("compute_gradients", "train_batch"):
        penalty = 16 * 0.01 * float((ref.get_weights()[0].astype(np.float64) ** 2).sum())
        loss_ref, parts_ref = getattr(ref, call)(X7[:16], packed[:16])
        loss, parts = getattr(net, call)(X7[:16], packed[:16])
        assert parts.shape == (6,)
        assert loss == pytest.approx(loss_ref, rel=1e-5 * gpu)
        np.testing.assert_allclose(parts, parts_ref, rtol=1e-5 * gpu, atol=1e-6)
        assert loss == pytest.approx(parts[0] + 0.5 * parts[2] + 2.0 * parts[4] + penalty,
                                     rel=1e-5 * gpu)
    for a, b in zip(net.get_gradients(), ref.get_gradients(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4 * gpu, atol=1e-6 * gpu)
    loss_ref, parts_ref = ref.evaluate(X7, packed)
    loss, parts = net.evaluate(X7, packed)
    assert loss == pytest.approx(loss_ref, rel=1e-5 * gpu)
    np.testing.assert_allclose(parts, parts_ref, rtol=1e-5 * gpu, atol=1e-6)


def test_a_flat_list_of_one_metric_per_output_and_profile():
    """Keras 3 reads a flat list of as many metrics as outputs as one per
    output; profile times a training step of such a model."""
    model = two_heads(keras)
    model.compile(optimizer="sgd", loss=["mse", "mse"], metrics=["mae", "mse"], device="cpu")
    logs = model.evaluate(IMAGE, [np.eye(4)[LABEL], SCORE], verbose=0, return_dict=True)
    assert list(logs) == ["label_loss", "label_mae", "loss", "score_loss", "score_mse"]
    assert logs["score_mse"] == pytest.approx(logs["score_loss"], rel=1e-6)
    profile = model.profile(IMAGE, [np.eye(4)[LABEL], SCORE], batch_size=8, steps=1)
    assert profile is not None


def test_data_parallel_training_of_several_outputs_is_refused():
    from cnncuda import distribute
    with distribute.MirroredStrategy(devices=["cpu", "cpu"]).scope():
        model = heads_compiled()
    with pytest.raises(ValueError, match='fit: model "heads" has 2 outputs; data parallel '
                                         "training .* is not supported"):
        model.fit(IMAGE, [LABEL, SCORE], batch_size=8, epochs=1, verbose=0)


def test_subclassed_model_compiled_with_one_loss_before_build_takes_it_per_output():
    model = TwoHeads(seed=4)
    model.compile(optimizer="sgd", loss="mse", device="cpu")
    logs = model.evaluate(X7, [np.eye(5)[Y3[0]], Y3[1]], verbose=0, return_dict=True)
    assert list(logs) == ["kind_loss", "loss", "size_loss"]
    kind, size = model.predict(X7, verbose=0)
    assert logs["kind_loss"] == pytest.approx(((kind - np.eye(5)[Y3[0]]) ** 2).mean(), rel=1e-5)
    assert logs["loss"] == pytest.approx(logs["kind_loss"] + logs["size_loss"], rel=1e-6)


def test_loss_weights_and_weighted_metrics_for_one_output_refused():
    inp = keras.Input(shape=(7,))
    model = keras.Model(inp, keras.layers.Dense(3)(inp))
    with pytest.raises(ValueError, match="loss_weights: expected None .a weight per output is "
                                         "for a model of several outputs., got"):
        model.compile(optimizer="sgd", loss="mse", loss_weights=[1.0])
    with pytest.raises(ValueError, match="weighted_metrics: expected None"):
        heads_compiled().compile(optimizer="sgd", loss="mse", weighted_metrics=["mae"])


KERAS_THREE = BUILD + """
import json, sys
import numpy as np
import keras
start = [np.array(w, np.float32) for w in json.loads(sys.argv[1])]
x = np.array(json.loads(sys.argv[2]), np.float32)
y = [np.array(a) for a in json.loads(sys.argv[3])]
model = three(keras)
model.set_weights(start)
fit = model.fit(x, y, batch_size=6, epochs=3, verbose=0, shuffle=False,
                validation_split=0.2).history
print(json.dumps({"fit": fit, "eval": model.evaluate(x, y, verbose=0),
                  "weights": [a.tolist() for a in model.get_weights()]}, default=float))
"""


@pytest.mark.keras3
def test_three_outputs_with_huber_binary_weights_and_a_penalty_train_as_keras3():
    model = three(keras)
    model.seed = 6
    start = model.get_weights()
    fit = model.fit(X7, Y3, batch_size=6, epochs=3, verbose=0, shuffle=False,
                    validation_split=0.2).history
    out = run_keras(KERAS_THREE, _dump(start), json.dumps(X7.tolist()), _dump(Y3))
    want = json.loads(out.strip().splitlines()[-1])
    assert list(fit) == list(want["fit"])
    for key in want["fit"]:
        np.testing.assert_allclose(fit[key], want["fit"][key], rtol=1e-4, atol=1e-6, err_msg=key)
    np.testing.assert_allclose(model.evaluate(X7, Y3, verbose=0), want["eval"], rtol=1e-4)
    for a, b in zip(model.get_weights(), want["weights"], strict=True):
        np.testing.assert_allclose(a, np.array(b, np.float32), rtol=1e-3, atol=1e-5)
