"""fit, evaluate and predict take the user's arrays as they are (float64,
uint8, float16, integers, bool, non-contiguous, read-only, memory-mapped,
byte-swapped): the engine converts them to float32 and checks them as it
uploads them. The results are the bits of the same calls on the arrays
converted to float32 by NumPy first (what every call did before), and a
value that is not finite is refused with the argument's name and the flat
index, leaving the model as it was."""
import numpy as np
import pytest

import cnncuda
from cnncuda.keras import layers, models
from cnncuda.engine import make_net
from cnncuda.seeds import seed_network, synthetic_data
from conftest import C_ENGINES

ENGINES = C_ENGINES + ["numpy"]
SHAPE = (9, 7, 3)


def model_on(engine, seed=4):
    model = models.Sequential([
        layers.Conv2D(4, (3, 3), activation="relu", input_shape=SHAPE),
        layers.MaxPooling2D((2, 2)),
        layers.Flatten(),
        layers.Dense(5),
    ], seed=seed)
    model.compile(optimizer="adam",
                  loss=cnncuda.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], device=engine)
    return model


def images(n, seed=0):
    """uint8 images and labels, as datasets give them."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (n,) + SHAPE, dtype=np.uint8), rng.integers(0, 5, (n, 1))


def variants(x8, path):
    """The same images in each form a user may pass ({name: array})."""
    x64 = x8 / 255.0
    mm = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64, shape=x64.shape)
    mm[...] = x64
    mm.flush()
    del mm
    read_only = x64.copy()
    read_only.flags.writeable = False
    return {
        "float64": x64,
        "float32": x64.astype(np.float32),
        "float16": x64.astype(np.float16),
        "uint8": x8,
        "int32": x8.astype(np.int32),
        "int64": x8.astype(np.int64),
        "bool": x8 > 127,
        "big-endian float64": x64.astype(">f8"),
        "fortran-order float64": np.asfortranarray(x64),
        "strided float64": np.repeat(x64, 2, axis=0)[::2],
        "read-only float64": read_only,
        "memory-mapped float64": np.load(path, mmap_mode="r"),
    }


def fit_result(engine, x, y, xv, yv):
    model = model_on(engine)
    history = model.fit(x, y, batch_size=8, epochs=2, validation_data=(xv, yv), verbose=0)
    return (model, history.history, model.evaluate(xv, yv, verbose=0),
            model.predict(xv, batch_size=8, verbose=0))


@pytest.mark.parametrize("engine", ENGINES)
def test_every_input_type_gives_the_float32_bits(engine, tmp_path):
    """Each form of the data trains, validates, evaluates and predicts with
    the bits of NumPy's float32 cast of it (the old path's input)."""
    x8, y = images(40)
    xv8, yv = images(21, seed=1)
    train, val = variants(x8, tmp_path / "x.npy"), variants(xv8, tmp_path / "xv.npy")
    for name, x in train.items():
        xv = val[name]
        ref = fit_result(engine, np.asarray(x).astype(np.float32), y,
                         np.asarray(xv).astype(np.float32), yv)
        got = fit_result(engine, x, y, xv, yv)
        assert got[1] == ref[1], "%s: History differs" % name
        assert got[2] == ref[2], "%s: evaluate differs" % name
        np.testing.assert_array_equal(got[3], ref[3], err_msg="%s: predict differs" % name)
        for a, b in zip(got[0].get_weights(), ref[0].get_weights()):
            np.testing.assert_array_equal(a, b, err_msg="%s: weights differ" % name)


@pytest.mark.parametrize("engine", ENGINES)
def test_validation_resident_gives_evaluate_bits(engine):
    """fit's validation (uploaded once, evaluated on the engine) reports what
    evaluate reports on the same arrays and weights."""
    x8, y = images(30)
    xv, yv = images(17, seed=2)
    xv = xv / 255.0
    model = model_on(engine)
    history = model.fit(x8 / 255.0, y, batch_size=8, epochs=1, validation_data=(xv, yv),
                        verbose=0)
    loss, accuracy = model.evaluate(xv, yv, batch_size=8, verbose=0)
    assert history.history["val_loss"] == [loss]
    assert history.history["val_accuracy"] == [accuracy]


@pytest.mark.parametrize("engine", ENGINES)
def test_evaluate_adds_each_batch_in_double(engine):
    """One evaluate call over many batches gives the sum, in double and in
    batch order, of the batches evaluated alone: the bits of the old path."""
    s = seed_network("tiny_mnist")
    net = make_net(engine, s["layers"], s["input_shape"], 16, s["loss"], s["optimizer"], seed=1)
    x, y = synthetic_data("tiny_mnist", 75, seed=3)
    want = [0.0, 0.0]
    for at in range(0, 75, 16):
        loss, correct = net.evaluate(x[at:at + 16], y[at:at + 16])
        want = [want[0] + loss, want[1] + correct]
    assert net.evaluate(x.astype(np.float64), y) == tuple(want)
    net.set_validation(x, y)
    assert net.evaluate_validation() == tuple(want)
    net.set_validation(None, None)
    with pytest.raises(ValueError, match="set_validation first"):
        net.evaluate_validation()


def poisoned(x8, index, value):
    x = (x8 / 255.0).reshape(-1)
    x[index] = value
    return x.reshape(x8.shape)


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("value,what", [(np.nan, "NaN"), (-np.inf, "infinity"),
                                        (1e300, r"1e\+300 \(infinity in float32\)")])
def test_non_finite_values_are_refused_by_index(engine, value, what):
    x8, y = images(30)
    xv8, yv = images(12, seed=1)
    model = model_on(engine)
    model.fit(x8 / 255.0, y, batch_size=8, epochs=1, verbose=0)
    before = [w.copy() for w in model.get_weights()]
    iterations = int(model.optimizer.iterations)
    bad = poisoned(x8, 1000, value)
    for dtype in (np.float64, np.float32):
        if dtype == np.float32 and value == 1e300:
            continue
        xb = bad.astype(dtype) if value != 1e300 else bad
        with pytest.raises(ValueError, match=r"^x: expected finite values, got %s at flat index "
                                             r"1000$" % what):
            model.fit(xb, y, batch_size=8, epochs=1, verbose=0)
        with pytest.raises(ValueError, match=r"^validation_data\[0\]: expected finite values, "
                                             r"got %s at flat index 1000$" % what):
            model.fit(x8 / 255.0, y, batch_size=8, epochs=1, verbose=0,
                      validation_data=(xb[:12], yv))
        with pytest.raises(ValueError, match=r"^x: expected finite values, got %s at flat "
                                             r"index 1000$" % what):
            model.evaluate(xb, y, verbose=0)
        with pytest.raises(ValueError, match=r"^x: expected finite values, got %s at flat "
                                             r"index 1000$" % what):
            model.predict(xb, verbose=0)
    # in the part validation_split takes: the index in x, as before
    late = poisoned(x8, x8[0].size * 28 + 5, value)
    with pytest.raises(ValueError, match=r"^x: expected finite values, got %s at flat index %d$"
                                         % (what, x8[0].size * 28 + 5)):
        model.fit(late, y, batch_size=8, epochs=1, verbose=0, validation_split=0.2)
    assert int(model.optimizer.iterations) == iterations
    for a, b in zip(model.get_weights(), before):
        np.testing.assert_array_equal(a, b)
    model.fit(x8 / 255.0, y, batch_size=8, epochs=1, verbose=0)     # still trains
    assert int(model.optimizer.iterations) == iterations + 4


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("first,second", [(5, 10 ** 6), (10 ** 6, 3 * 10 ** 6 + 7),
                                          (3 * 10 ** 6 + 7, 3 * 10 ** 6 + 8)])
def test_the_first_of_several_bad_values_is_named(engine, first, second):
    """Across the upload's chunks (2 MiB each on the GPU engines, converted
    by several threads), the smallest flat index is the one reported."""
    s = seed_network("cifar10_cnn")
    net = make_net(engine, s["layers"], s["input_shape"], 32, s["loss"], s["optimizer"], seed=0)
    x, y = synthetic_data("cifar10_cnn", 1100, seed=0)
    x = x.astype(np.float64)
    flat = x.reshape(-1)
    flat[second] = np.inf
    flat[first] = np.nan
    with pytest.raises(ValueError, match=r"^x: expected finite values, got NaN at flat index "
                                         r"%d$" % first):
        net.set_data(x, y)
    with pytest.raises(ValueError, match=r"^x: expected finite values, got NaN at flat index "
                                         r"%d$" % first):
        net.predict(x)
    flat[first] = 0.5
    flat[second] = 0.5
    net.set_data(x, y)          # usable after the refusals
    assert net.predict(x[:3]).shape == (3, 10)


@pytest.mark.parametrize("engine", C_ENGINES)
def test_large_uploads_keep_every_row(engine):
    """Many chunks (several workers on the GPU engines), a last partial one:
    the float64 rows uploaded give the float32 rows' predictions exactly."""
    s = seed_network("cifar10_cnn")
    net = make_net(engine, s["layers"], s["input_shape"], 64, s["loss"], s["optimizer"], seed=2)
    x, y = synthetic_data("cifar10_cnn", 1237, seed=5)
    x64 = x.astype(np.float64) * 1.000001
    want = net.predict(x64.astype(np.float32))
    np.testing.assert_array_equal(net.predict(x64), want)
    assert net.evaluate(x64, y) == net.evaluate(x64.astype(np.float32), y)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", ["cifar10_cnn", "tiny_mnist", "imagenette_cnn"])
def test_validation_passes_follow_the_weights(engine, name):
    """The resident validation pass gives evaluate's bits each time, the
    weights moving between passes; a partial last batch included."""
    if name == "imagenette_cnn" and engine in ("numpy", "cpu", "omp"):
        pytest.skip("a large network: slow on the CPU engines, whose path the others check")
    s = seed_network(name)
    net = make_net(engine, s["layers"], s["input_shape"], 16, s["loss"], s["optimizer"], seed=1)
    n = 70 if name != "imagenette_cnn" else 37
    x, y = synthetic_data(name, n, seed=3)
    xv, yv = synthetic_data(name, n - 21, seed=4)
    net.set_data(x, y)
    net.set_validation(xv.astype(np.float64), yv)
    for epoch in range(4):
        net.set_order(np.random.default_rng(epoch).permutation(n))
        net.train_range(0, n, 16)
        net.read_sums()
        assert net.evaluate_validation() == net.evaluate(xv, yv), "pass %d" % epoch
    net.set_validation(None, None)
