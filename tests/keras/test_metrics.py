"""keras.metrics: the objects on NumPy arrays and compiled into fit,
evaluate and the callbacks' logs, against Keras 3 (run in a child process;
skipped without Keras)."""
import json

import numpy as np
import pytest

import cnncuda
from cnncuda import metrics as cm
from cnncuda.data.dataset import Dataset
from cnncuda.keras import callbacks, layers, metrics, models, optimizers

from conftest import engine_params
from data.test_keras_files import run_keras

# (class name, its arguments, kind of targets)
SPECS = [
    ("Accuracy", {}, "labels_as_pred"),
    ("SparseCategoricalAccuracy", {}, "sparse"),
    ("CategoricalAccuracy", {}, "onehot"),
    ("BinaryAccuracy", {}, "binary"),
    ("BinaryAccuracy", {"threshold": 0.3}, "binary"),
    ("TopKCategoricalAccuracy", {}, "onehot"),
    ("TopKCategoricalAccuracy", {"k": 2}, "onehot"),
    ("SparseTopKCategoricalAccuracy", {}, "sparse"),
    ("SparseTopKCategoricalAccuracy", {"k": 3}, "sparse"),
    ("Precision", {}, "binary"),
    ("Precision", {}, "onehot"),
    ("Precision", {"thresholds": 0.7}, "binary"),
    ("Precision", {"top_k": 2}, "onehot"),
    ("Precision", {"class_id": 1}, "onehot"),
    ("Recall", {}, "binary"),
    ("Recall", {}, "onehot"),
    ("Recall", {"thresholds": [0.2, 0.6]}, "binary"),
    ("AUC", {}, "binary"),
    ("AUC", {}, "onehot"),
    ("AUC", {"num_thresholds": 13}, "binary"),
    ("AUC", {"curve": "PR"}, "binary"),
    ("AUC", {"summation_method": "minoring"}, "binary"),
    ("AUC", {"summation_method": "majoring"}, "onehot"),
    ("MeanAbsoluteError", {}, "onehot"),
    ("MeanSquaredError", {}, "binary"),
]


def _arrays(kind, seed):
    rng = np.random.default_rng(seed)
    n, k = 37, 6
    scores = rng.random((n, k)).astype(np.float32)
    scores[3, :2] = scores[3, 2]           # ties
    if kind == "sparse":
        return rng.integers(0, k, n).astype(np.int64), scores / scores.sum(1, keepdims=True)
    if kind == "onehot":
        return np.eye(k, dtype=np.float32)[rng.integers(0, k, n)], scores
    if kind == "binary":
        return rng.integers(0, 2, (n, 1)).astype(np.float32), scores[:, :1]
    labels = rng.integers(0, 3, (n, 1)).astype(np.float32)       # Accuracy: equal values
    return labels, np.where(rng.random((n, 1)) < 0.5, labels, 1.0).astype(np.float32)


def _batches(kind):
    (t1, p1), (t2, p2) = _arrays(kind, 1), _arrays(kind, 2)
    w2 = np.random.default_rng(3).random(len(t2)).astype(np.float32)
    return [(t1, p1, None), (t2, p2, w2)]


@pytest.mark.keras3
def test_the_objects_give_keras_numbers(tmp_path):
    cases = []
    for i, (cls, kwargs, kind) in enumerate(SPECS):
        for j, (t, p, w) in enumerate(_batches(kind)):
            np.save(tmp_path / ("t%d_%d.npy" % (i, j)), t)
            np.save(tmp_path / ("p%d_%d.npy" % (i, j)), p)
            if w is not None:
                np.save(tmp_path / ("w%d_%d.npy" % (i, j)), w)
        cases.append([cls, kwargs])
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    out = run_keras("""
        import json, os, sys
        import numpy as np, keras
        d = sys.argv[1]
        results = []
        for i, (cls, kwargs) in enumerate(json.load(open(os.path.join(d, "cases.json")))):
            m = getattr(keras.metrics, cls)(**kwargs)
            first = None
            for j in range(2):
                w = os.path.join(d, "w%d_%d.npy" % (i, j))
                m.update_state(np.load(os.path.join(d, "t%d_%d.npy" % (i, j))),
                               np.load(os.path.join(d, "p%d_%d.npy" % (i, j))),
                               sample_weight=np.load(w) if os.path.exists(w) else None)
                if first is None:
                    first = np.asarray(m.result()).tolist()
            config = m.get_config()
            config.pop("name")
            results.append([first, np.asarray(m.result()).tolist(), config])
        print(json.dumps(results))
        """, tmp_path)
    wanted = json.loads(out.strip().splitlines()[-1])
    for (cls, kwargs, kind), (first, last, config) in zip(SPECS, wanted):
        metric = getattr(metrics, cls)(**kwargs)
        got = []
        for t, p, w in _batches(kind):
            metric.update_state(t, p, sample_weight=w)
            got.append(np.asarray(metric.result(), np.float64).tolist())
        what = "%s%r on %s" % (cls, kwargs, kind)
        np.testing.assert_allclose(got[0], first, rtol=2e-5, atol=2e-6, err_msg=what)
        np.testing.assert_allclose(got[1], last, rtol=2e-5, atol=2e-6, err_msg=what)
        mine = metric.get_config()
        mine.pop("name")
        assert mine == config, what
        metric.reset_state()
        assert float(np.ravel(metric.result())[0]) == 0.0
        clone = type(metric).from_config(metric.get_config())
        assert clone.get_config() == metric.get_config()


def test_names_and_calls():
    a, b = metrics.Precision(), metrics.Precision()
    assert a.name != b.name and b.name.startswith("precision")
    m = metrics.SparseCategoricalAccuracy(name="sca")
    value = m(np.array([0, 1]), np.array([[0.9, 0.1], [0.8, 0.2]]))
    assert m.name == "sca" and float(value) == 0.5
    assert cm.get("mae").name == "mae" and isinstance(cm.get("mse"), metrics.MeanSquaredError)
    cnncuda.keras.backend.clear_session()
    assert [cm.get(n).name for n in ("auc", "AUC", "recall")] == ["auc", "auc_1", "recall"]
    with pytest.raises(ValueError, match="k: expected an int >= 1, got 0"):
        metrics.TopKCategoricalAccuracy(k=0)
    with pytest.raises(ValueError, match="curve: expected 'ROC' or 'PR', got 'XY'"):
        metrics.AUC(curve="XY")
    with pytest.raises(ValueError, match="multi_label"):
        metrics.AUC(multi_label=True)
    with pytest.raises(ValueError, match="expected y_true of the shape of y_pred"):
        metrics.MeanAbsoluteError()(np.array([0, 1]), np.array([[0.9, 0.1], [0.8, 0.2]]))


def _model(classes=4, loss="categorical_crossentropy", metric_list=None, device="cpu",
           dropout=False, seed=4):
    model = models.Sequential(
        [layers.Input((6,)), layers.Dense(8, activation="relu")]
        + ([layers.Dropout(0.5)] if dropout else [])
        + [layers.Dense(classes, activation="sigmoid" if classes == 1 else "softmax")],
        seed=seed)
    model.compile(optimizers.SGD(0.1), loss, metrics=metric_list, device=device)
    return model


def _data(n=40, classes=4, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((n, 6)).astype(np.float32)
    labels = rng.integers(0, classes, n)
    return x, labels, np.eye(classes, dtype=np.float32)[labels]


KERAS_METRICS = ["accuracy", "mae", "mse", "top_k_categorical_accuracy",
                 "Precision", "Recall", "AUC", "binary_accuracy",
                 "categorical_accuracy"]


def _compiled(names):
    return [getattr(metrics, n)() if n[0].isupper() else n for n in names]


@pytest.mark.keras3
def test_fit_and_evaluate_give_keras_numbers_and_order(tmp_path):
    cnncuda.keras.backend.clear_session()       # the metrics' names as in a new process
    x, _, y = _data()
    model = _model(metric_list=_compiled(KERAS_METRICS))
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    for i, w in enumerate(model.get_weights()):
        np.save(tmp_path / ("w%d.npy" % i), w)
    # batches of 16 in order (the last one short): Keras's training metrics are
    # those of each step's forward, before its update
    out = run_keras("""
        import json, os, sys
        import numpy as np, keras
        d, names = sys.argv[1], json.loads(sys.argv[2])
        x, y = np.load(os.path.join(d, "x.npy")), np.load(os.path.join(d, "y.npy"))
        model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, activation="relu"),
                                  keras.layers.Dense(4, activation="softmax")])
        model.set_weights([np.load(os.path.join(d, "w%d.npy" % i)) for i in range(4)])
        model.compile(keras.optimizers.SGD(0.1), "categorical_crossentropy",
                      metrics=[getattr(keras.metrics, n)() if n[0].isupper() else n
                               for n in names])
        h = model.fit(x, y, batch_size=16, epochs=3, shuffle=False, verbose=0,
                      validation_data=(x, y))
        print(json.dumps([list(h.history), h.history, model.evaluate(x, y, verbose=0),
                          model.evaluate(x, y, verbose=0, return_dict=True)]))
        """, tmp_path, json.dumps(KERAS_METRICS))
    keys, history, values, logs = json.loads(out.strip().splitlines()[-1])
    h = model.fit(x, y, batch_size=16, epochs=3, shuffle=False, verbose=0,
                  validation_data=(x, y))
    assert list(h.history) == keys
    for key in keys:
        np.testing.assert_allclose(h.history[key], history[key], rtol=1e-4, atol=1e-5,
                                   err_msg=key)
    np.testing.assert_allclose(model.evaluate(x, y, verbose=0), values, rtol=1e-4, atol=1e-5)
    got = model.evaluate(x, y, verbose=0, return_dict=True)
    assert list(got) == list(logs)
    np.testing.assert_allclose(list(got.values()), list(logs.values()), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("engine", engine_params())
def test_host_metrics_change_no_training_number(engine):
    engine = "omp:2" if engine == "omp" else engine
    x, labels, _ = _data(n=70)
    plain = _model(loss="sparse_categorical_crossentropy", metric_list=["accuracy"],
                   device=engine, dropout=True)
    more = _model(loss="sparse_categorical_crossentropy",
                  metric_list=["sparse_top_k_categorical_accuracy", "accuracy",
                               metrics.SparseCategoricalAccuracy(name="sca")],
                  device=engine, dropout=True)
    a = plain.fit(x, labels, batch_size=16, epochs=2, verbose=0, validation_split=0.2)
    b = more.fit(x, labels, batch_size=16, epochs=2, verbose=0, validation_split=0.2)
    for key in a.history:
        assert a.history[key] == b.history[key], key
    for w, v in zip(plain.get_weights(), more.get_weights()):
        np.testing.assert_array_equal(w, v)
    # the validation's host accuracy is the engine's
    np.testing.assert_allclose(b.history["val_sca"], b.history["val_accuracy"], atol=1e-7)
    assert list(b.history) == ["accuracy", "loss", "sca", "sparse_top_k_categorical_accuracy",
                               "val_accuracy", "val_loss", "val_sca",
                               "val_sparse_top_k_categorical_accuracy"]
    loss, top_k, accuracy, sca = more.evaluate(x, labels, verbose=0)
    assert top_k == 1.0 and sca == pytest.approx(accuracy, abs=1e-7)


def test_training_metrics_are_those_of_each_steps_outputs_before_its_update():
    x, labels, y = _data(n=50)
    model = _model(metric_list=["mae"])
    mine = _model(metric_list=["mae"])
    mine.set_weights(model.get_weights())
    probe = metrics.MeanAbsoluteError()
    for start in range(0, 50, 16):     # no shuffle: the batches in order
        probe.update_state(y[start:start + 16], mine.predict(x[start:start + 16], verbose=0))
        mine.train_on_batch(x[start:start + 16], y[start:start + 16])
    h = model.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0)
    assert h.history["mae"][0] == pytest.approx(float(probe.result()), rel=1e-6)
    for w, v in zip(model.get_weights(), mine.get_weights()):
        np.testing.assert_allclose(w, v, rtol=1e-6, atol=1e-7)


def test_batch_methods_streams_and_callbacks(tmp_path):
    x, labels, y = _data(n=48)
    model = _model(metric_list=["mse", metrics.AUC(name="auc")])
    logs = model.test_on_batch(x, y, return_dict=True)
    probe = metrics.AUC()
    probe.update_state(y, model.predict(x, verbose=0))
    assert logs["auc"] == pytest.approx(float(probe.result()), abs=1e-6)
    loss, mse, auc = model.evaluate(x, y, verbose=0)
    assert auc == pytest.approx(logs["auc"], abs=1e-6)
    stream = Dataset.from_tensor_slices((x, y)).batch(10)
    assert model.evaluate(stream, verbose=0) == pytest.approx([loss, mse, auc], rel=1e-5)
    seen = []

    class Watch(callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            seen.append(sorted(logs))
    stop = callbacks.EarlyStopping(monitor="val_auc", patience=5)
    keep = callbacks.ModelCheckpoint(str(tmp_path / "m.cnncuda"), monitor="auc",
                                     save_best_only=True)
    h = model.fit(stream, epochs=2, verbose=0, validation_data=stream,
                  callbacks=[Watch(), stop, keep])
    assert stop.mode == "max" and keep.mode == "max"   # Keras 3 asks the metric
    assert seen[0] == ["auc", "loss", "mse"]
    assert list(h.history) == ["auc", "loss", "mse", "val_auc", "val_loss", "val_mse"]
    ok = callbacks.ReduceLROnPlateau(monitor="val_auc")
    ok.set_model(model)
    ok._set_direction()
    assert ok._direction == "max"


def test_bad_metrics_are_refused_by_name():
    with pytest.raises(ValueError, match=r"metrics\[1\]: expected one of .* got 'f1'"):
        _model(metric_list=["accuracy", "f1"])
    with pytest.raises(ValueError, match="two metrics named 'mae'"):
        _model(metric_list=["mae", "mae"])
    with pytest.raises(TypeError, match="metrics: expected a list"):
        _model(metric_list="accuracy")
    x, labels, _ = _data()
    model = _model(loss="sparse_categorical_crossentropy", metric_list=["mae"])
    with pytest.raises(ValueError, match="mean_absolute_error: expected y_true of the shape"):
        model.evaluate(x, labels, verbose=0)


@pytest.mark.parametrize("ext", [pytest.param(".keras", marks=pytest.mark.keras3),
                                 pytest.param(".h5", marks=pytest.mark.keras3), ".cnncuda"])
def test_compiled_metrics_are_saved_and_loaded(ext, tmp_path):
    model = _model(metric_list=["accuracy", "mae", metrics.Precision(name="p", thresholds=0.4),
                                metrics.AUC(num_thresholds=50, name="auc")])
    path = str(tmp_path / ("m" + ext))
    model.save(path)
    back = models.load_model(path)
    if ext != ".h5":
        assert back.metrics_names == model.metrics_names
        assert back._compile_metrics_config() == model._compile_metrics_config()
    x, _, y = _data()
    np.testing.assert_allclose(back.evaluate(x, y, verbose=0), model.evaluate(x, y, verbose=0),
                               rtol=1e-6)
    if ext == ".cnncuda":
        return
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    out = run_keras("""
        import sys, json, numpy as np, keras
        model = keras.models.load_model(sys.argv[1])
        x, y = np.load(sys.argv[2]), np.load(sys.argv[3])
        print(json.dumps(model.evaluate(x, y, verbose=0, return_dict=True)))
        """, path, tmp_path / "x.npy", tmp_path / "y.npy")
    logs = json.loads(out.strip().splitlines()[-1])
    mine = model.evaluate(x, y, verbose=0, return_dict=True)
    if ext == ".h5":    # Keras's legacy loader names 'mae' after its function (its own files too)
        mine = {("mean_absolute_error" if k == "mae" else k): v for k, v in mine.items()}
        assert sorted(logs) == sorted(mine)
        assert back.metrics_names == ["loss", "accuracy", "mean_absolute_error", "p", "auc"]
    else:
        assert list(logs) == list(mine)
    np.testing.assert_allclose([mine[k] for k in logs], list(logs.values()), rtol=1e-4, atol=1e-5)


def test_a_metric_of_several_thresholds_gives_a_list_and_the_bar_its_mean(capsys):
    x, _, y = _data()
    model = _model(metric_list=[metrics.Recall(thresholds=[0.2, 0.6], name="r")])
    h = model.fit(x, y, batch_size=40, epochs=1, verbose=2)
    (first,), = [h.history["r"]]
    assert isinstance(first, list) and len(first) == 2 and first[0] >= first[1]
    assert ("r: %.4f" % (sum(first) / 2)) in capsys.readouterr().out
    loss, r = model.evaluate(x, y, verbose=0)
    assert len(r) == 2


@pytest.mark.keras3
@pytest.mark.parametrize("ext", [".keras", ".h5"])
def test_a_file_keras_compiled_with_metrics_loads_them(ext, tmp_path):
    path = str(tmp_path / ("k" + ext))
    run_keras("""
        import sys, keras
        model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(4, activation="softmax")])
        model.compile("adam", "categorical_crossentropy",
                      metrics=["accuracy", "mse", keras.metrics.Precision(name="p"),
                               keras.metrics.AUC(num_thresholds=20), "recall"])
        model.save(sys.argv[1])
        """, path)
    model = models.load_model(path)
    names = model.metrics_names
    assert names[:4] == ["loss", "accuracy", "mean_squared_error" if ext == ".h5" else "mse", "p"]
    assert names[4].startswith("auc") and names[5].startswith("recall")
    auc = model._host_metrics()[2]
    assert isinstance(auc, metrics.AUC) and auc.num_thresholds == 20
    x, _, y = _data()
    assert len(model.evaluate(x, y, verbose=0)) == 6
