"""Functional models of several inputs (issue #24): keras.Model([a, b, ...],
y) in the style of Chollet's "Deep Learning with Python" ch. 7 (text-like
features and images joined by Concatenate, Dense heads). The engine takes
the inputs packed side by side per sample and an input_slice layer gives
each input to its readers (csrc/net/graph.c); each engine against the NumPy
reference on odd sizes, against Keras 3 for names, shapes, the rules for x
and predictions with the same weights (through .keras and .h5 files both
ways), and the refusals."""
import numpy as np
import pytest

import cnncuda as tf
from cnncuda import keras
from cnncuda.engine import make_net
from cnncuda.keras import layers
from conftest import assert_close, engine_params, run_keras

RNG = np.random.default_rng(24)
N = 23
TITLE = RNG.random((N, 13)).astype(np.float32)
BODY = RNG.random((N, 17)).astype(np.float32)
IMAGE = RNG.random((N, 7, 9, 3)).astype(np.float32)
ROWS = RNG.random((N, 5, 6)).astype(np.float32)       # (height, width): no channel axis
Y = RNG.integers(0, 5, N)
X = [TITLE, BODY, IMAGE, ROWS]
NAMES = ["title", "text_body", "picture", "rows"]


def ticket_model(seed=3, name="tickets"):
    """Four inputs: two rows of features (one read by two layers, one read
    by the Concatenate directly too), an image through a conv branch and a
    channel-less (5, 6) input; Concatenate, Dense heads."""
    title = keras.Input(shape=(13,), name="title")
    body = keras.Input(shape=(17,), name="text_body")
    picture = keras.Input(shape=(7, 9, 3), name="picture")
    rows = keras.Input(shape=(5, 6), name="rows")
    t = layers.Dense(6, activation="relu", name="t_dense")(title)
    t2 = layers.Dense(6, name="t_other")(title)
    p = layers.Conv2D(4, 3, activation="relu", name="conv")(picture)
    p = layers.BatchNormalization(name="bn")(p)
    p = layers.Flatten(name="flat")(layers.MaxPooling2D(name="pool")(p))
    r = layers.Flatten(name="rows_flat")(rows)
    joined = layers.Concatenate(name="join")([layers.Add(name="t_sum")([t, t2]), body, p, r])
    x = layers.Dense(11, activation="tanh", name="hidden")(joined)
    x = layers.Dropout(0.2, name="drop")(x)
    return keras.Model([title, body, picture, rows], layers.Dense(5, name="priority")(x),
                       name=name, seed=seed)


def compiled(model, device, metrics=("accuracy",)):
    model.compile(optimizer=keras.optimizers.Adam(0.01), device=device, metrics=list(metrics),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def device_of(engine):
    return "omp:2" if engine == "omp" else engine


@pytest.mark.parametrize("engine", engine_params())
def test_each_engine_trains_a_model_of_several_inputs_as_the_reference(engine):
    ref, mine = compiled(ticket_model(), "numpy"), compiled(ticket_model(), device_of(engine))
    for a, b in zip(mine.get_weights(), ref.get_weights(), strict=True):
        assert np.array_equal(a, b)
    h_ref = ref.fit(X, Y, batch_size=6, epochs=2, verbose=0, shuffle=False)
    h = mine.fit(X, Y, batch_size=6, epochs=2, verbose=0, shuffle=False)
    gpu = 10 if engine in ("cuda", "cudnn") else 1
    np.testing.assert_allclose(h.history["loss"], h_ref.history["loss"], rtol=1e-5 * gpu)
    assert h.history["accuracy"] == h_ref.history["accuracy"]
    for a, b in zip(mine.get_weights(), ref.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4 * gpu, atol=1e-5 * gpu)
    np.testing.assert_allclose(mine.predict(X, verbose=0), ref.predict(X, verbose=0),
                               rtol=1e-4 * gpu, atol=1e-5 * gpu)
    np.testing.assert_allclose(mine.evaluate(X, Y, verbose=0), ref.evaluate(X, Y, verbose=0),
                               rtol=1e-5 * gpu)


def test_omp_equals_cpu_bit_for_bit():
    one, other = compiled(ticket_model(), "cpu"), compiled(ticket_model(), "omp:2")
    h1 = one.fit(X, Y, batch_size=6, epochs=2, verbose=0, validation_split=0.25)
    h2 = other.fit(X, Y, batch_size=6, epochs=2, verbose=0, validation_split=0.25)
    assert h1.history == h2.history
    for a, b in zip(one.get_weights(), other.get_weights(), strict=True):
        assert np.array_equal(a, b)


def slice_layers():
    """Engine layers of three inputs (an image, a row, a (1, 5, 6) image)
    packed into rows of 7*9*3 + 11 + 30 values."""
    return [{"kind": "input_slice", "offset": 0, "shape": [7, 9, 3], "inputs": [-1]},
            {"kind": "input_slice", "offset": 189, "shape": [11], "inputs": [-1]},
            {"kind": "input_slice", "offset": 200, "shape": [1, 5, 6], "inputs": [-1]},
            {"kind": "conv2d", "units": 4, "kernel": (3, 3), "inputs": [0]},
            {"kind": "flatten"},
            {"kind": "dense", "units": 6, "inputs": [1]},
            {"kind": "flatten", "inputs": [2]},
            {"kind": "concatenate", "inputs": [4, 5, 6, 1]},
            {"kind": "dense", "units": 3}]


@pytest.mark.parametrize("engine", engine_params())
@pytest.mark.parametrize("n", [1, 5])
def test_the_input_slice_op_against_the_reference(engine, n):
    """The engines' input_slice (an image to NCHW, rows, a channel-less
    image) and the gradients above it; no gradient passes back through it."""
    loss = {"kind": "sparse_categorical_crossentropy", "from_logits": True}
    adam = {"kind": "adam", "learning_rate": 0.01}
    x = np.random.default_rng(n).standard_normal((n, 230)).astype(np.float32)
    net = make_net(device_of(engine), slice_layers(), (230,), n, loss, adam, seed=4)
    ref = make_net("numpy", slice_layers(), (230,), n, loss, adam, seed=4)
    ref = type(ref)(slice_layers(), (230,), n, loss, adam, seed=4, dtype=np.float64)
    plan = net.plan()
    names = plan["training"] if isinstance(plan, dict) else plan
    assert any("input_slice_0.forward" in str(s) for s in names)
    for a, b in zip(net.get_weights(), ref.get_weights(), strict=True):
        assert np.array_equal(a, b)
    y = net.forward(x, training=True)
    assert_close(y, ref.forward(x.astype(np.float64), training=True), 1e-5, 1e-5, "forward")
    dy = np.random.default_rng(9).standard_normal(y.shape).astype(np.float32)
    for backend in (net, ref):
        with pytest.raises(ValueError, match=r"through layer 2 \(input_slice\), an input of "
                                             "several"):
            backend.backward(dy)
    labels = np.arange(n) % 3
    for _ in range(2):
        net.train_batch(x, labels)
        ref.train_batch(x.astype(np.float64), labels)
    for a, b in zip(net.get_weights(), ref.get_weights(), strict=True):
        assert_close(a, b, 1e-4, 1e-5, "weights after two steps")


def test_the_engine_refuses_misplaced_slices():
    loss = {"kind": "sparse_categorical_crossentropy", "from_logits": True}
    adam = {"kind": "adam"}
    bad = [{"kind": "dense", "units": 3},
           {"kind": "input_slice", "offset": 0, "shape": [4], "inputs": [-1]}]
    for device in ("cpu", "numpy"):
        with pytest.raises(ValueError, match="input_slice"):
            make_net(device, bad, (9,), 2, loss, adam)
    too_far = [{"kind": "input_slice", "offset": 6, "shape": [4], "inputs": [-1]},
               {"kind": "dense", "units": 3}]
    with pytest.raises(ValueError, match=r"layer 0 \(input_slice\): .* at value 6 does not fit "
                                         "the 9 values"):
        make_net("cpu", too_far, (9,), 2, loss, adam)
    with pytest.raises(ValueError, match="does not fit"):
        make_net("numpy", too_far, (9,), 2, loss, adam)
    with pytest.raises(ValueError, match=r"needs the inputs packed as a \(batch, features\)"):
        make_net("cpu", [{"kind": "input_slice", "offset": 0, "shape": [4], "inputs": [-1]},
                         {"kind": "dense", "units": 3}], (3, 3, 1), 2, loss, adam)


def test_x_as_a_list_a_tuple_or_a_dict_of_the_inputs_names():
    model = compiled(ticket_model(), "cpu", metrics=["accuracy"])
    by_list = model.predict(X, verbose=0)
    as_dict = dict(zip(NAMES, X), unused=np.zeros(3))      # Keras ignores other keys
    assert np.array_equal(model.predict(tuple(X), verbose=0), by_list)
    assert np.array_equal(model.predict(as_dict, verbose=0), by_list)
    assert np.array_equal(model(X), by_list)
    assert np.array_equal(model.predict_on_batch(as_dict), by_list)
    assert model.evaluate(as_dict, Y, verbose=0) == model.evaluate(X, Y, verbose=0)
    x8 = [a[:8] for a in X]
    assert model.test_on_batch(x8, Y[:8]) == model.evaluate(x8, Y[:8], batch_size=8, verbose=0)
    history = model.fit(as_dict, Y, batch_size=8, epochs=1, verbose=0,
                        validation_data=(tuple(X), Y))
    assert sorted(history.history) == ["accuracy", "loss", "val_accuracy", "val_loss"]
    assert np.isfinite(model.train_on_batch(x8, Y[:8])).all()
    report = str(model.profile(as_dict, Y, batch_size=4, steps=1))
    assert "input_slice_2.forward (picture)" in report and "concatenate_" in report


def test_the_models_face_its_config_and_its_own_files(tmp_path):
    model = compiled(ticket_model(name="face"), "cpu")
    assert model.input_shape == [(None, 13), (None, 17), (None, 7, 9, 3), (None, 5, 6)]
    assert model.output_shape == (None, 5)
    assert [t.name for t in model.inputs] == NAMES and len(model.input) == 4
    lines = []
    model.summary(line_length=200, print_fn=lines.append)
    join = next(line for line in lines if line.startswith("join (Concatenate)"))
    assert "t_sum[0][0], text_body[0][0], flat[0][0], rows_flat[0][0]" in join
    assert any(line.startswith("picture (InputLayer)") for line in lines)
    model.fit(X, Y, batch_size=8, epochs=1, verbose=0)
    config = model.get_config()
    assert config["inputs"] == [["title", [13]], ["text_body", [17]], ["picture", [7, 9, 3]],
                                ["rows", [5, 6]]]
    again = keras.Model.from_config(config)
    assert again.get_config() == config
    assert [layer.name for layer in again.layers] == [layer.name for layer in model.layers]
    from_json = keras.models.model_from_json(model.to_json())
    assert from_json._reads == model._reads and from_json.input_shape == model.input_shape
    path = tmp_path / "tickets.cnn"
    model.save(path)
    back = keras.models.load_model(path)
    assert np.array_equal(back.predict(X, verbose=0), model.predict(X, verbose=0))
    h1 = back.fit(X, Y, batch_size=8, epochs=1, verbose=0, shuffle=False)
    h2 = model.fit(X, Y, batch_size=8, epochs=1, verbose=0, shuffle=False)
    assert h1.history == h2.history


KERAS_TICKETS = """
    import keras
    from keras import layers
    title = keras.Input(shape=(13,), name="title")
    body = keras.Input(shape=(17,), name="text_body")
    picture = keras.Input(shape=(7, 9, 3), name="picture")
    rows = keras.Input(shape=(5, 6), name="rows")
    t = layers.Dense(6, activation="relu", name="t_dense")(title)
    t2 = layers.Dense(6, name="t_other")(title)
    p = layers.Conv2D(4, 3, activation="relu", name="conv")(picture)
    p = layers.BatchNormalization(name="bn")(p)
    p = layers.Flatten(name="flat")(layers.MaxPooling2D(name="pool")(p))
    r = layers.Flatten(name="rows_flat")(rows)
    joined = layers.Concatenate(name="join")([layers.Add(name="t_sum")([t, t2]), body, p, r])
    x = layers.Dense(11, activation="tanh", name="hidden")(joined)
    x = layers.Dropout(0.2, name="drop")(x)
    model = keras.Model([title, body, picture, rows], layers.Dense(5, name="priority")(x),
                        name="tickets")
"""


@pytest.mark.keras3
def test_names_shapes_and_weights_match_keras():
    out = run_keras(KERAS_TICKETS + """
    print([l.name for l in model.layers])
    print(model.input_shape, model.output_shape)
    print([tuple(w.shape) for w in model.weights])
    """)
    lines = out.strip().splitlines()
    model = ticket_model()
    assert lines[0] == str([layer.name for layer in model.layers])
    assert lines[1] == "%s %s" % (model.input_shape, model.output_shape)
    assert lines[2] == str([tuple(w.shape) for w in model.get_weights()])


@pytest.mark.keras3
@pytest.mark.parametrize("ext", [".keras", ".h5"])
def test_saved_here_opens_in_keras_with_our_predictions(ext, tmp_path):
    pytest.importorskip("h5py")
    model = compiled(ticket_model(), "cpu")
    model.fit(X, Y, batch_size=8, epochs=2, verbose=0)
    model.save(tmp_path / ("m" + ext))
    np.savez(tmp_path / "x.npz", *X)
    np.save(tmp_path / "mine.npy", model.predict(X, verbose=0))
    back = keras.models.load_model(tmp_path / ("m" + ext))
    assert np.array_equal(back.predict(X, verbose=0), model.predict(X, verbose=0))
    out = run_keras("""
        import sys, numpy as np, keras
        data = np.load(sys.argv[2])
        x = [data["arr_%d" % k] for k in range(4)]
        model = keras.models.load_model(sys.argv[1])
        print([l.name for l in model.layers])
        print(float(np.abs(model.predict(x, verbose=0) - np.load(sys.argv[3])).max()))
        names = ["title", "text_body", "picture", "rows"]
        print(float(np.abs(model.predict(dict(zip(names, x)), verbose=0)
                           - np.load(sys.argv[3])).max()))
    """, tmp_path / ("m" + ext), tmp_path / "x.npz", tmp_path / "mine.npy")
    lines = out.strip().splitlines()
    assert lines[0] == str([layer.name for layer in model.layers])
    assert float(lines[1]) < 1e-5 and float(lines[2]) < 1e-5


@pytest.mark.keras3
@pytest.mark.parametrize("ext", [".keras", ".h5"])
def test_saved_by_keras_loads_here_with_its_predictions(ext, tmp_path):
    pytest.importorskip("h5py")
    np.savez(tmp_path / "x.npz", *X)
    path = tmp_path / ("k" + ext)
    # (a Keras file's dropout node carries training=False, which Keras 3's
    # functional models override with the call's mode, as cnncuda does)
    run_keras(KERAS_TICKETS + """
    import sys, numpy as np
    data = np.load(sys.argv[2])
    x = [data["arr_%d" % k] for k in range(4)]
    model.compile(optimizer="adam", metrics=["accuracy"],
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, np.arange(len(x[0])) % 5, epochs=1, batch_size=8, verbose=0)
    model.save(sys.argv[1])
    np.save(sys.argv[3], model.predict(x, verbose=0))
    """, path, tmp_path / "x.npz", tmp_path / "keras.npy")
    model = keras.models.load_model(path, device="cpu")
    assert [t.name for t in model.inputs] == NAMES
    np.testing.assert_allclose(model.predict(X, verbose=0), np.load(tmp_path / "keras.npy"),
                               rtol=1e-4, atol=1e-5)
    model.fit(X, Y, batch_size=8, epochs=1, verbose=0)      # and trains on
    assert np.isfinite(model.predict(X, verbose=0)).all()


def test_what_is_not_supported_is_refused_naming_it():
    a, b = keras.Input((4,), name="a"), keras.Input((3,), name="b")
    x = layers.Dense(2)(a)
    with pytest.raises(ValueError, match=r'inputs\[1\] \("b"\): the output does not depend on '
                                         "this input"):
        keras.Model([a, b], x)
    with pytest.raises(ValueError, match='input "a" is given twice'):
        keras.Model([a, a], x)
    with pytest.raises(ValueError, match=r"inputs\[1\]: expected the tensor of "
                                         r"keras.Input\(\.\.\.\), got the output of layer"):
        keras.Model([a, x], layers.Dense(1)(x))
    with pytest.raises(ValueError, match="inputs: a dict of tensors is not supported"):
        keras.Model({"a": a, "b": b}, x)
    with pytest.raises(TypeError, match="inputs: expected a KerasTensor"):
        keras.Model([], x)
    two = layers.Concatenate()([x, layers.Dense(2)(b)])
    # several outputs, one read by the other too, train (test_several_outputs.py)
    both = keras.Model([a, b], [x, two])
    both.compile(optimizer="adam", loss="mse", device="cpu")
    logs = both.evaluate([np.ones((3, 4)), np.ones((3, 3))], [np.ones((3, 2)), np.ones((3, 4))],
                         verbose=0, return_dict=True)
    assert sorted(logs) == sorted(["loss", x._layer.name + "_loss",
                                   two._layer.name + "_loss"])
    c = keras.Input((3,), name="a")
    with pytest.raises(ValueError, match='the name "a" is used by inputs 0 and 1'):
        keras.Model([a, c], layers.Concatenate()([x, c]))
    other = keras.Input((5,), name="other")
    with pytest.raises(ValueError, match='Graph disconnected: the output depends on input "other", '
                                         'which is not one of the model\'s inputs \\("a", "b"\\)'):
        keras.Model([a, b], layers.Concatenate()([two, other]))
    model = compiled(keras.Model([a, b], layers.Dense(3)(two)), "cpu")
    xa, xb, y = np.ones((4, 4)), np.ones((4, 3)), np.zeros(4)
    with pytest.raises(ValueError, match=r"x: expected 2 arrays, one per input \(a, b, in that "
                                         r"order\), got 1"):
        model.predict([xa], verbose=0)
    with pytest.raises(TypeError, match="x: the model has 2 inputs"):
        model.fit(xa, y, verbose=0)
    with pytest.raises(ValueError, match=r"x: a dict of inputs needs the keys \['a', 'b'\] "
                                         r"\(the Inputs' names\), missing \['b'\]"):
        model.evaluate({"a": xa}, y, verbose=0)
    with pytest.raises(ValueError, match=r"x\[1\]: expected shape \(None, 3\), got \(4, 4\)"):
        model.predict([xa, xa], verbose=0)
    with pytest.raises(ValueError, match=r"every input needs the same number of samples, got "
                                         r"4 \(a\), 2 \(b\)"):
        model.train_on_batch([xa, xb[:2]], y)
    with pytest.raises(ValueError, match=r"x\['b'\]: expected finite values"):
        model.train_on_batch({"a": xa, "b": xb * np.nan}, y)
    with pytest.raises(ValueError, match=r"validation_data\[0\]\[1\]: expected shape"):
        model.fit([xa, xb], y, verbose=0, validation_data=([xa, xa], y))
    with pytest.raises(TypeError, match="x: the model has 2 inputs"):
        # a stream's x follows the rules of an array x (tests/data/test_stream_weights_inputs.py)
        model.fit(tf.data.Dataset.from_tensor_slices((xa, y)).batch(2), verbose=0)
    with pytest.raises(ValueError, match='model ".*" has 2 inputs and 1 outputs: using a model '
                                         "of several inputs or outputs as a layer"):
        model([keras.Input((4,)), keras.Input((3,))])


# several outputs: predict (the engine's output is the outputs packed side by
# side per sample); training them is refused at compile

def two_headed(seed=5):
    """Ticket-style heads: a priority score, a department (an output read by
    another layer: the department's logits feed a third head too) and a
    per-pixel map of the picture (an image output)."""
    title = keras.Input(shape=(13,), name="title")
    picture = keras.Input(shape=(7, 9, 3), name="picture")
    p = layers.Conv2D(4, 3, activation="relu", name="conv")(picture)
    joined = layers.Concatenate(name="join")([layers.Dense(6, name="t_dense")(title),
                                              layers.GlobalAveragePooling2D(name="gap")(p)])
    priority = layers.Dense(1, activation="sigmoid", name="priority")(joined)
    department = layers.Dense(4, name="department")(joined)
    urgent = layers.Dense(2, name="urgent")(department)
    pixels = layers.Conv2D(2, 1, name="pixels")(p)
    return keras.Model([title, picture], [priority, department, pixels, urgent],
                       name="heads", seed=seed)


KERAS_HEADS = """
    import keras
    from keras import layers
    title = keras.Input(shape=(13,), name="title")
    picture = keras.Input(shape=(7, 9, 3), name="picture")
    p = layers.Conv2D(4, 3, activation="relu", name="conv")(picture)
    joined = layers.Concatenate(name="join")([layers.Dense(6, name="t_dense")(title),
                                              layers.GlobalAveragePooling2D(name="gap")(p)])
    priority = layers.Dense(1, activation="sigmoid", name="priority")(joined)
    department = layers.Dense(4, name="department")(joined)
    urgent = layers.Dense(2, name="urgent")(department)
    pixels = layers.Conv2D(2, 1, name="pixels")(p)
    model = keras.Model([title, picture], [priority, department, pixels, urgent], name="heads")
"""


@pytest.mark.parametrize("engine", engine_params())
def test_several_outputs_predict_on_each_engine_as_the_reference(engine):
    ref, mine = two_headed(), two_headed()
    ref.compile = mine.compile = None       # (not needed: predict runs uncompiled)
    ref._device, mine._device = "numpy", device_of(engine)
    assert mine.output_shape == [(None, 1), (None, 4), (None, 5, 7, 2), (None, 2)]
    expected = ref.predict([TITLE, IMAGE], verbose=0)
    got = mine.predict({"title": TITLE, "picture": IMAGE}, batch_size=7, verbose=0)
    assert isinstance(got, list) and len(got) == 4
    gpu = 10 if engine in ("cuda", "cudnn") else 1
    for a, b in zip(got, expected, strict=True):
        assert a.shape == b.shape and a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=1e-5 * gpu, atol=1e-6 * gpu)
    empty = mine.predict([TITLE[:0], IMAGE[:0]], verbose=0)
    assert [e.shape for e in empty] == [(0, 1), (0, 4), (0, 5, 7, 2), (0, 2)]
    assert all(np.array_equal(a, b) for a, b in zip(mine([TITLE, IMAGE]), got))


@pytest.mark.keras3
def test_several_outputs_names_shapes_and_files_both_ways_with_keras(tmp_path):
    pytest.importorskip("h5py")
    model = two_headed()
    mine = model.predict([TITLE, IMAGE], verbose=0)
    np.savez(tmp_path / "x.npz", TITLE, IMAGE)
    for k, array in enumerate(mine):
        np.save(tmp_path / ("mine%d.npy" % k), array)
    for ext in (".keras", ".h5", ".cnn"):
        model.save(tmp_path / ("m" + ext))
        back = keras.models.load_model(tmp_path / ("m" + ext))
        again = back.predict([TITLE, IMAGE], verbose=0)
        assert all(np.array_equal(a, b) for a, b in zip(again, mine, strict=True))
    config = model.get_config()
    assert config["outputs"] == [model.layers.index(layer) - 2 for layer in
                                 (model.get_layer(n) for n in
                                  ("priority", "department", "pixels", "urgent"))]
    assert keras.Model.from_config(config).get_config() == config
    out = run_keras(KERAS_HEADS + """
    import sys, numpy as np
    print([l.name for l in model.layers])
    print(model.output_shape)
    d = sys.argv[1]
    data = np.load(d + "/x.npz")
    x = [data["arr_0"], data["arr_1"]]
    for ext in (".keras", ".h5"):
        mine = keras.models.load_model(d + "/m" + ext)
        print(max(float(np.abs(a - np.load(d + "/mine%d.npy" % k)).max())
                  for k, a in enumerate(mine.predict(x, verbose=0))))
    model.compile(optimizer="adam", loss=["binary_crossentropy", "mse", "mse", "mse"])
    model.save(d + "/k.keras")
    for k, a in enumerate(model.predict(x, verbose=0)):
        np.save(d + "/keras%d.npy" % k, a)
    """, tmp_path)
    lines = out.strip().splitlines()
    assert lines[0] == str([layer.name for layer in model.layers])
    assert lines[1] == str(model.output_shape)
    assert float(lines[2]) < 1e-5 and float(lines[3]) < 1e-5
    # compiled in Keras with a loss per output: it loads compiled (#24)
    theirs = keras.models.load_model(tmp_path / "k.keras")
    assert [loss.kind for loss in theirs.loss.losses] == [
        "binary_crossentropy", "mean_squared_error", "mean_squared_error", "mean_squared_error"]
    for k, a in enumerate(theirs.predict([TITLE, IMAGE], verbose=0)):
        np.testing.assert_allclose(a, np.load(tmp_path / ("keras%d.npy" % k)), rtol=1e-4,
                                   atol=1e-5)


def test_several_outputs_refusals():
    a = keras.Input((4,), name="a")
    x = layers.Dense(3, name="x")(a)
    y = layers.Dense(2, name="y")(x)
    model = keras.Model(a, [x, y], name="two")
    assert model.output_shape == [(None, 3), (None, 2)] and len(model.output) == 2
    # a loss per output trains (tests/keras/test_several_outputs.py); a wrong count is refused
    with pytest.raises(ValueError, match=r"loss: expected 2 entries, one per output \(x, y, in "
                                         r"that order\), got 3"):
        model.compile(optimizer="adam", loss=["mse", "mse", "mse"], loss_weights=[1.0, 0.5])
    with pytest.raises(ValueError, match='outputs: the output of layer "x" is given twice'):
        keras.Model(a, [x, y, x])
    with pytest.raises(ValueError, match=r'outputs\[1\]: the model\'s output is its input "a"'):
        keras.Model(a, [x, a])
    with pytest.raises(ValueError, match="outputs: a dict of tensors is not supported"):
        keras.Model(a, {"x": x, "y": y})
    one = keras.Model(a, y)     # one input: x may be a dict by its name too (Keras's rule)
    xa = np.ones((3, 4))
    assert np.array_equal(one.predict_on_batch({"a": xa}), one.predict(xa, verbose=0))
    with pytest.raises(ValueError, match=r"x: a dict of inputs needs the keys \['a'\]"):
        one.predict({"b": xa}, verbose=0)
    with pytest.raises(ValueError, match="using a model of several inputs or outputs as a layer"):
        model(keras.Input((4,)))


def test_several_inputs_train_data_parallel_as_one_network():
    # (the replicas gather their shares of the packed rows; without the
    # BatchNormalization, which each replica computes over its share)
    from cnncuda import distribute

    def model():
        title = keras.Input(shape=(13,), name="title")
        picture = keras.Input(shape=(7, 9, 3), name="picture")
        p = layers.Flatten()(layers.Conv2D(3, 3, activation="relu")(picture))
        x = layers.Concatenate()([layers.Dense(5, activation="relu")(title), p])
        return keras.Model([title, picture], layers.Dense(5)(layers.Dropout(0.3)(x)), seed=8)
    one = model()
    with distribute.MirroredStrategy(devices=["cpu", "cpu"]).scope():
        two = model()
    for m in (one, two):
        m.compile(optimizer=keras.optimizers.SGD(0.05),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    h1 = one.fit([TITLE, IMAGE], Y, batch_size=8, epochs=2, verbose=0, shuffle=False)
    h2 = two.fit([TITLE, IMAGE], Y, batch_size=8, epochs=2, verbose=0, shuffle=False)
    assert isinstance(two._net, distribute.ReplicaGroup)
    np.testing.assert_allclose(h2.history["loss"], h1.history["loss"], rtol=1e-5)
    for a, b in zip(one.get_weights(), two.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def augmented(seed=2, late=False):
    """An image branch with augmentation layers that come, in Keras's order,
    after the title branch's Dense layers (allowed: none is upstream of
    them); `late`: a RandomFlip after the image branch's own Conv2D."""
    title = keras.Input(shape=(13,), name="title")
    picture = keras.Input(shape=(7, 9, 3), name="picture")
    t = title
    for k in range(4):
        t = layers.Dense(5, activation="relu", name="t%d" % k)(t)
    p = layers.RandomFlip(seed=3, name="flip")(picture)
    p = layers.RandomContrast(0.3, seed=4, name="contrast")(p)
    p = layers.Conv2D(3, 3, activation="relu", name="conv")(p)
    if late:
        p = layers.RandomFlip(seed=5, name="late_flip")(p)
    p = layers.Flatten(name="flat")(p)
    out = layers.Dense(5, name="head")(layers.Concatenate(name="join")([t, p]))
    return keras.Model([title, picture], out, name="augmented", seed=seed)


@pytest.mark.parametrize("engine", engine_params())
def test_a_branchs_augmentation_after_another_branchs_weights_trains_as_the_reference(engine):
    ref, mine = augmented(), augmented()
    names = [layer.name for layer in mine.layers]
    assert names.index("flip") > names.index("t0")      # after weights, in another branch
    for model, dev in ((ref, "numpy"), (mine, device_of(engine))):
        compiled(model, dev)
    h_ref = ref.fit([TITLE, IMAGE], Y, batch_size=6, epochs=2, verbose=0, shuffle=False)
    h = mine.fit([TITLE, IMAGE], Y, batch_size=6, epochs=2, verbose=0, shuffle=False)
    gpu = 10 if engine in ("cuda", "cudnn") else 1
    np.testing.assert_allclose(h.history["loss"], h_ref.history["loss"], rtol=1e-5 * gpu)
    for a, b in zip(mine.get_weights(), ref.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4 * gpu, atol=1e-5 * gpu)
    t0 = mine.get_layer("t0").get_weights()[0]
    assert not np.array_equal(t0, augmented().get_layer("t0").get_weights()[0])   # trained


@pytest.mark.parametrize("device", ["cpu", "numpy"])
def test_augmentation_downstream_of_weights_is_still_refused(device):
    model = compiled(augmented(late=True), device)
    with pytest.raises(ValueError, match=r"\(random_flip\) follows a layer with weights"):
        model.fit([TITLE, IMAGE], Y, epochs=1, verbose=0)
