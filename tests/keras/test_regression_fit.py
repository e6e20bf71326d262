"""Regression with the Keras API: a Boston-housing-shaped model (13
features, Dense(1), y of shape (n,) or (n, 1)) compiled with each regression
loss, its History against Keras 3's (same weights, same batches), the
metrics 'mae' / 'mse' / 'accuracy' (Keras's BinaryAccuracy for one output,
CategoricalAccuracy for several), every engine against the numpy engine,
saving and loading, and sample weights refused clearly."""
import json

import numpy as np
import pytest

import cnncuda
from cnncuda import layers, losses, models, optimizers
from conftest import engine_params, run_keras

LOSS_CASES = [  # (cnncuda/Keras loss as a string or "Huber(...)", targets, outputs, metrics)
    ("mse", "price", 1, ["mae"]),
    ("mean_absolute_error", "price_column", 1, ["mse", "mae"]),
    ("Huber(delta=2.0)", "price", 1, ["mae"]),
    ("log_cosh", "price", 1, []),
    ("msle", "price", 1, ["mae"]),
    ("mape", "price", 1, []),
    ("mse", "binary", 1, ["accuracy", "mae"]),
    ("mse", "several", 3, ["accuracy"]),
]


def _housing(n=45, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 13)).astype(np.float32)
    w = rng.standard_normal(13)
    price = (22.0 + 3.0 * np.tanh(x @ w / 3.0) + rng.standard_normal(n)).astype(np.float32)
    return {"x": x, "price": price, "price_column": price.reshape(n, 1),
            "binary": (price > 22.0).astype(np.float32),
            "several": np.eye(3, dtype=np.float32)[rng.integers(0, 3, n)]}


def _loss(name):
    return losses.Huber(delta=2.0) if name.startswith("Huber") else name


def _model(units, loss, metrics, device="cpu", seed=3, lr=0.01):
    model = models.Sequential([layers.Input((13,)), layers.Dense(16, activation="relu"),
                               layers.Dense(units)], seed=seed)
    model.compile(optimizers.SGD(lr), _loss(loss), metrics=metrics, device=device)
    return model


@pytest.mark.keras3
def test_history_matches_keras(tmp_path):
    cnncuda.keras.backend.clear_session()
    data = _housing()
    np.savez(tmp_path / "data.npz", **data)
    ours, weights = [], []
    for i, (loss, target, units, metrics) in enumerate(LOSS_CASES):
        model = _model(units, loss, metrics)
        weights.append([w for w in model.get_weights()])
        np.savez(tmp_path / ("w%d.npz" % i), *weights[-1])
        h = model.fit(data["x"], data[target], batch_size=16, epochs=3, shuffle=False,
                      verbose=0, validation_data=(data["x"][:20], data[target][:20]))
        ours.append((h.history, model.evaluate(data["x"], data[target], verbose=0,
                                               return_dict=True)))
    out = run_keras("""
        import json, os, sys
        import numpy as np, keras
        d, cases = sys.argv[1], json.loads(sys.argv[2])
        data = np.load(os.path.join(d, "data.npz"))
        result = []
        for i, (loss, target, units, metrics) in enumerate(cases):
            w = np.load(os.path.join(d, "w%d.npz" % i))
            model = keras.Sequential([keras.Input((13,)), keras.layers.Dense(16, activation="relu"),
                                      keras.layers.Dense(units)])
            model.set_weights([w["arr_%d" % j] for j in range(4)])
            model.compile(keras.optimizers.SGD(0.01),
                          keras.losses.Huber(delta=2.0) if loss.startswith("Huber") else loss,
                          metrics=metrics)
            x, y = data["x"], data[target]
            h = model.fit(x, y, batch_size=16, epochs=3, shuffle=False, verbose=0,
                          validation_data=(x[:20], y[:20]))
            result.append([h.history, model.evaluate(x, y, verbose=0, return_dict=True)])
        print(json.dumps(result))
        """, tmp_path, json.dumps(LOSS_CASES))
    theirs = json.loads(out.strip().splitlines()[-1])
    for case, (history, logs), (keras_history, keras_logs) in zip(LOSS_CASES, ours, theirs):
        assert sorted(history) == sorted(keras_history), case
        for key in keras_history:
            np.testing.assert_allclose(history[key], keras_history[key], rtol=2e-4, atol=1e-5,
                                       err_msg="%s %s" % (case, key))
        assert sorted(logs) == sorted(keras_logs), case
        for key in keras_logs:
            np.testing.assert_allclose(logs[key], keras_logs[key], rtol=2e-4, atol=1e-5,
                                       err_msg="%s evaluate %s" % (case, key))


@pytest.mark.parametrize("engine", engine_params())
@pytest.mark.parametrize("loss", ["mse", "Huber(delta=2.0)", "mape"])
def test_engines_match_numpy_engine(engine, loss):
    engine = "omp:2" if engine == "omp" else engine
    data = _housing(n=53, seed=1)
    histories = []
    for device in ("numpy", engine):
        model = _model(1, loss, ["accuracy", "mae"], device=device, lr=0.005)
        h = model.fit(data["x"], data["price"], batch_size=8, epochs=2, shuffle=False, verbose=0,
                      validation_split=0.2)
        histories.append(h.history)
    assert list(histories[0]) == list(histories[1])
    for key in histories[0]:
        np.testing.assert_allclose(histories[1][key], histories[0][key], rtol=1e-4, atol=1e-5,
                                   err_msg=key)


@pytest.mark.parametrize("suffix", [".keras", ".h5", ""])
def test_save_and_load_keep_the_loss(tmp_path, suffix):
    data = _housing(n=20)
    model = _model(1, "Huber(delta=2.0)", ["mae"])
    model.fit(data["x"], data["price"], epochs=1, verbose=0)
    path = tmp_path / ("m" + suffix)
    model.save(path)
    loaded = models.load_model(path)
    assert isinstance(loaded.loss, losses.Huber) and loaded.loss.delta == 2.0
    if suffix != ".h5":     # .h5 files give the metric back under its long name (not the loss's)
        assert loaded.metrics_names == ["loss", "mae"]
    np.testing.assert_allclose(loaded.evaluate(data["x"], data["price"], verbose=0),
                               model.evaluate(data["x"], data["price"], verbose=0), rtol=1e-6)
    mse = _model(1, "mse", [])
    mse.save(tmp_path / ("s" + suffix))
    assert models.load_model(tmp_path / ("s" + suffix)).loss.kind == "mean_squared_error"


@pytest.mark.keras3
def test_keras_loads_the_saved_loss(tmp_path):
    data = _housing(n=20)
    model = _model(1, "Huber(delta=2.0)", ["mae"])
    model.save(tmp_path / "m.keras")
    np.save(tmp_path / "x.npy", data["x"])
    np.save(tmp_path / "y.npy", data["price"])
    out = run_keras("""
        import json, sys
        import numpy as np, keras
        d = sys.argv[1]
        model = keras.models.load_model(d + "/m.keras")
        print(json.dumps([type(model.loss).__name__, model.loss.fn.__name__,
                          model.evaluate(np.load(d + "/x.npy"), np.load(d + "/y.npy"),
                                         verbose=0)]))
        """, tmp_path)
    name, fn, values = json.loads(out.strip().splitlines()[-1])
    assert (name, fn) == ("Huber", "huber")
    np.testing.assert_allclose(values, model.evaluate(data["x"], data["price"], verbose=0),
                               rtol=1e-5)


WEIGHT_CASES = [  # (loss, targets, sigmoid output, metrics, weighting)
    ("mse", "price", False, [], "sample"),
    ("Huber(delta=2.0)", "price_column", False, [], "sample"),
    ("mape", "price", False, [], "validation"),
    ("binary_crossentropy", "binary", True, ["accuracy"], "sample"),
    ("binary_crossentropy", "binary", True, ["accuracy"], "class"),
    ("log_cosh", "price", False, [], "class"),
]


def _weighted_model(loss, sigmoid, metrics, device="cpu"):
    model = models.Sequential([layers.Input((13,)), layers.Dense(8, activation="relu"),
                               layers.Dense(1, activation="sigmoid" if sigmoid else None)],
                              seed=5)
    model.compile(optimizers.SGD(0.01), _loss(loss), metrics=metrics, device=device)
    return model


def _weighting(kind, n):
    w = np.random.default_rng(4).random(n).astype(np.float32) * 2.0
    w[3] = 0.0      # a zero weight: allowed (the accuracy is not weighted)
    if kind == "sample":
        return {"sample_weight": w}
    if kind == "class":
        return {"class_weight": {0: 0.5, 1: 2.0, 22: 3.0}}
    return {"validation_data_weights": w[:20]}


@pytest.mark.keras3
def test_weighted_fit_and_evaluate_match_keras(tmp_path):
    """Keras 3: each sample's loss times its weight, divided by the number of
    samples; metrics unweighted; class_weight by the rounded target."""
    cnncuda.keras.backend.clear_session()
    data = _housing()
    np.savez(tmp_path / "data.npz", **data)
    ours = []
    for i, (loss, target, sigmoid, metrics, kind) in enumerate(WEIGHT_CASES):
        model = _weighted_model(loss, sigmoid, metrics)
        np.savez(tmp_path / ("w%d.npz" % i), *model.get_weights())
        how = _weighting(kind, len(data["x"]))
        x, y = data["x"], data[target]
        val = how.pop("validation_data_weights", None)
        validation = (x[:20], y[:20]) if val is None else (x[:20], y[:20], val)
        h = model.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0,
                      validation_data=validation, **how)
        w = _weighting("sample", len(x))["sample_weight"]
        ours.append((h.history, model.evaluate(x, y, sample_weight=w, verbose=0)))
    out = run_keras("""
        import json, os, sys
        import numpy as np, keras
        d, cases = sys.argv[1], json.loads(sys.argv[2])
        data = np.load(os.path.join(d, "data.npz"))
        w_all = np.random.default_rng(4).random(len(data["x"])).astype(np.float32) * 2.0
        w_all[3] = 0.0
        result = []
        for i, (loss, target, sigmoid, metrics, kind) in enumerate(cases):
            w = np.load(os.path.join(d, "w%d.npz" % i))
            model = keras.Sequential([keras.Input((13,)), keras.layers.Dense(8, activation="relu"),
                                      keras.layers.Dense(1, activation="sigmoid" if sigmoid
                                                         else None)])
            model.set_weights([w["arr_%d" % j] for j in range(4)])
            model.compile(keras.optimizers.SGD(0.01),
                          keras.losses.Huber(delta=2.0) if loss.startswith("Huber") else loss,
                          metrics=metrics)
            x, y = data["x"], data[target]
            how, validation = {}, (x[:20], y[:20])
            if kind == "sample":
                how["sample_weight"] = w_all
            elif kind == "class":
                how["class_weight"] = {0: 0.5, 1: 2.0, 22: 3.0}
            else:
                validation = (x[:20], y[:20], w_all[:20])
            h = model.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0,
                          validation_data=validation, **how)
            result.append([h.history, model.evaluate(x, y, sample_weight=w_all, verbose=0)])
        print(json.dumps(result))
        """, tmp_path, json.dumps(WEIGHT_CASES))
    theirs = json.loads(out.strip().splitlines()[-1])
    for case, mine, keras_results in zip(WEIGHT_CASES, ours, theirs):
        (history, values), (keras_history, keras_values) = mine, keras_results
        assert sorted(history) == sorted(keras_history), case
        for key in keras_history:
            np.testing.assert_allclose(history[key], keras_history[key], rtol=2e-4, atol=1e-5,
                                       err_msg="%s %s" % (case, key))
        np.testing.assert_allclose(values, keras_values, rtol=2e-4, atol=1e-5,
                                   err_msg="%s evaluate" % (case,))


@pytest.mark.parametrize("engine", engine_params())
@pytest.mark.parametrize("loss", ["mse", "binary_crossentropy"])
def test_weighted_engines_match_numpy_engine(engine, loss):
    engine = "omp:2" if engine == "omp" else engine
    data = _housing(n=53, seed=2)
    target = "binary" if loss == "binary_crossentropy" else "price"
    w = _weighting("sample", 53)["sample_weight"]
    results = []
    for device in ("numpy", engine):
        model = _weighted_model(loss, loss == "binary_crossentropy", ["accuracy"], device)
        h = model.fit(data["x"], data[target], batch_size=8, epochs=2, shuffle=False,
                      verbose=0, sample_weight=w, validation_split=0.2)
        results.append((h.history, model.evaluate(data["x"], data[target], sample_weight=w,
                                                  verbose=0),
                        model.train_on_batch(data["x"][:9], data[target][:9],
                                             sample_weight=w[:9])))
    for key in results[0][0]:
        np.testing.assert_allclose(results[1][0][key], results[0][0][key], rtol=1e-4,
                                   atol=1e-5, err_msg=key)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(results[1][2], results[0][2], rtol=1e-4, atol=1e-5)


def test_weights_leave_host_metrics_unweighted():
    data = _housing(n=20)
    model = _model(1, "mse", ["mae"])
    w = np.linspace(0.1, 2.0, 20).astype(np.float32)
    weighted = model.evaluate(data["x"], data["price"], sample_weight=w, verbose=0)
    plain = model.evaluate(data["x"], data["price"], verbose=0)
    assert weighted[1] == plain[1] and weighted[0] != plain[0]
    with pytest.raises(ValueError, match=r"sample_weight\[2\]: expected finite weights >= 0"):
        _model(1, "mse", []).fit(data["x"], data["price"],
                                 sample_weight=np.array([1.0, 1.0, -1.0] + [1.0] * 17),
                                 verbose=0)


def test_targets_are_checked():
    data = _housing(n=20)
    model = _model(1, "mse", [])
    with pytest.raises(ValueError, match=r"y: expected shape \(20, 1\), got \(20, 2\)"):
        model.fit(data["x"], np.zeros((20, 2)), verbose=0)
    with pytest.raises(ValueError, match="y: expected finite values"):
        model.fit(data["x"], np.full(20, np.nan), verbose=0)
