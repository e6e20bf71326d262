"""Losses over outputs of any shape: Keras takes the loss along the output's
last axis and averages it over every other position and the batch
(sum_over_batch_size). An autoencoder ending in Conv2D(1, 3,
activation='sigmoid') (output (n, h, w, 1)) or in Reshape((h, w)) with
'mse' or 'binary_crossentropy', and per-pixel classification (output (n,
h, w, k), sparse labels (n, h, w) or (n, h, w, 1), or one-hot targets),
against Keras 3's History, every engine against the numpy engine (the GPU
engines keep images NCHW: the loss brings them to Keras's order), and the
errors."""
import json

import numpy as np
import pytest

import cnncuda
from cnncuda import layers, losses, models, optimizers
from conftest import engine_params, run_keras

H, W = 8, 7

CASES = [  # name: (input channels, layers, loss, target, metrics)
    ("autoencoder_mse", 1, [["conv", 3, "relu"], ["conv", 1, "sigmoid"]], "mse", "image",
     ["accuracy", "mae"]),
    ("autoencoder_bce_2d_targets", 1, [["conv", 3, "relu"], ["conv", 1, "sigmoid"]],
     "binary_crossentropy", "image_2d", ["accuracy"]),
    ("reshaped_mse", 1, [["conv", 2, "relu"], ["conv", 1, "sigmoid"], ["reshape"]], "mse",
     "image_2d", ["accuracy", "mse"]),
    # (not 'accuracy': for a last axis of 7 Keras picks CategoricalAccuracy, the
    # engine's binary cross-entropy counts BinaryAccuracy, as for (None, k) outputs)
    ("reshaped_bce", 1, [["conv", 1, "sigmoid"], ["reshape"]], "binary_crossentropy",
     "image_2d", ["binary_accuracy"]),
    ("segmentation_logits", 2, [["conv", 5, "relu"], ["conv", 4, None]], "sparse_logits",
     "labels", ["accuracy"]),
    ("segmentation_labels_1", 2, [["conv", 4, None]], "sparse_logits", "labels_1",
     ["accuracy"]),
    ("segmentation_onehot", 2, [["conv", 4, None]], "categorical_logits", "onehot",
     ["accuracy"]),
    ("segmentation_huber", 2, [["conv", 4, "sigmoid"]], "huber", "onehot", ["accuracy"]),
]


def _data(channels, n=11, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((n, H, W, channels)).astype(np.float32)
    labels = rng.integers(0, 4, (n, H, W))
    image = (x[..., :1] > 0.5).astype(np.float32)
    return {"x": x, "image": image, "image_2d": image[..., 0], "labels": labels,
            "labels_1": labels[..., None], "onehot": np.eye(4, dtype=np.float32)[labels]}


def _loss(name):
    return {"sparse_logits": losses.SparseCategoricalCrossentropy(from_logits=True),
            "categorical_logits": losses.CategoricalCrossentropy(from_logits=True),
            "huber": losses.Huber(delta=0.3)}.get(name, name)


def _model(channels, spec, loss, metrics, device="cpu", seed=2):
    stack = [layers.Input((H, W, channels))]
    for item in spec:
        if item[0] == "conv":
            stack.append(layers.Conv2D(item[1], 3, padding="same", activation=item[2]))
        else:
            stack.append(layers.Reshape((H, W)))
    model = models.Sequential(stack, seed=seed)
    model.compile(optimizers.SGD(0.5), _loss(loss), metrics=metrics, device=device)
    return model


@pytest.mark.keras3
def test_history_matches_keras(tmp_path):
    cnncuda.keras.backend.clear_session()
    ours = []
    for i, (name, channels, spec, loss, target, metrics) in enumerate(CASES):
        data = _data(channels)
        np.savez(tmp_path / ("d%d.npz" % i), **data)
        model = _model(channels, spec, loss, metrics)
        np.savez(tmp_path / ("w%d.npz" % i), *model.get_weights())
        h = model.fit(data["x"], data[target], batch_size=4, epochs=2, shuffle=False, verbose=0,
                      validation_data=(data["x"][:5], data[target][:5]))
        ours.append((h.history, model.evaluate(data["x"], data[target], verbose=0,
                                               return_dict=True)))
    out = run_keras("""
        import json, os, sys
        import numpy as np, keras
        d, cases, h, w = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
        losses = {"sparse_logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  "categorical_logits": keras.losses.CategoricalCrossentropy(from_logits=True),
                  "huber": keras.losses.Huber(delta=0.3)}
        result = []
        for i, (name, channels, spec, loss, target, metrics) in enumerate(cases):
            data = np.load(os.path.join(d, "d%d.npz" % i))
            weights = np.load(os.path.join(d, "w%d.npz" % i))
            stack = [keras.Input((h, w, channels))]
            for item in spec:
                if item[0] == "conv":
                    stack.append(keras.layers.Conv2D(item[1], 3, padding="same",
                                                     activation=item[2]))
                else:
                    stack.append(keras.layers.Reshape((h, w)))
            model = keras.Sequential(stack)
            model.set_weights([weights["arr_%d" % j] for j in range(len(weights.files))])
            model.compile(keras.optimizers.SGD(0.5), losses.get(loss, loss), metrics=metrics)
            x, y = data["x"], data[target]
            hist = model.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0,
                             validation_data=(x[:5], y[:5]))
            result.append([hist.history, model.evaluate(x, y, verbose=0, return_dict=True)])
        print(json.dumps(result))
        """, tmp_path, json.dumps(CASES), H, W)
    theirs = json.loads(out.strip().splitlines()[-1])
    for case, (history, logs), (keras_history, keras_logs) in zip(CASES, ours, theirs):
        assert sorted(history) == sorted(keras_history), case[0]
        for key in keras_history:
            np.testing.assert_allclose(history[key], keras_history[key], rtol=2e-4, atol=2e-5,
                                       err_msg="%s %s" % (case[0], key))
        assert sorted(logs) == sorted(keras_logs), case[0]
        for key in keras_logs:
            np.testing.assert_allclose(logs[key], keras_logs[key], rtol=2e-4, atol=2e-5,
                                       err_msg="%s evaluate %s" % (case[0], key))


@pytest.mark.parametrize("engine", engine_params())
@pytest.mark.parametrize("case", [c for c in CASES if c[0] in (
    "autoencoder_mse", "reshaped_bce", "segmentation_logits", "segmentation_onehot")],
    ids=lambda c: c[0])
def test_engines_match_numpy_engine(engine, case):
    engine = "omp:2" if engine == "omp" else engine
    name, channels, spec, loss, target, metrics = case
    data = _data(channels, n=13, seed=3)
    histories = []
    for device in ("numpy", engine):
        cnncuda.keras.backend.clear_session()      # the same weights on both
        model = _model(channels, spec, loss, metrics, device=device)
        h = model.fit(data["x"], data[target], batch_size=5, epochs=2, shuffle=False,
                      verbose=0, validation_split=0.3)
        histories.append(h.history)
    assert list(histories[0]) == list(histories[1])
    for key in histories[0]:
        np.testing.assert_allclose(histories[1][key], histories[0][key], rtol=1e-4, atol=1e-5,
                                   err_msg=key)


def test_predict_and_train_batch_shapes():
    name, channels, spec, loss, target, metrics = CASES[4]
    data = _data(channels, n=6)
    model = _model(channels, spec, loss, metrics)
    assert model.predict(data["x"], verbose=0).shape == (6, H, W, 4)
    loss_value, accuracy = model.train_on_batch(data["x"], data["labels"])
    assert np.isfinite(loss_value) and 0.0 <= accuracy <= 1.0


def test_target_shapes_are_checked():
    data = _data(2, n=6)
    model = _model(2, [["conv", 4, None]], "sparse_logits", ["accuracy"])
    with pytest.raises(ValueError, match=r"y: expected shape \(6, 8, 7\) or \(6, 8, 7, 1\), "
                                         r"got \(6, 8\)"):
        model.fit(data["x"], data["labels"][:, :, 0], verbose=0)
    with pytest.raises(ValueError, match=r"expected integer class labels in \[0, 4\), got 4"):
        model.fit(data["x"], np.full((6, H, W), 4), verbose=0)
    auto = _model(1, [["conv", 1, "sigmoid"]], "mse", [])
    with pytest.raises(ValueError, match=r"y: expected shape \(6, 8, 7, 1\) or \(6, 8, 7\), "
                                         r"got \(6, 8, 7, 2\)"):
        auto.fit(data["x"][..., :1], np.zeros((6, H, W, 2)), verbose=0)
    with pytest.raises(ValueError, match="sample_weight: weighting samples is supported for "
                                         r"outputs of shape \(None, classes\)"):
        model.fit(data["x"], data["labels"], sample_weight=np.ones(6), verbose=0)
    with pytest.raises(ValueError, match="at least 2 outputs"):
        _model(1, [["conv", 1, None]], "sparse_logits", [])


def test_a_dataset_gives_the_arrays_history():
    """fit over a Dataset of the same batches as the arrays: the same History,
    the host metric ('mse') of a Reshape((h, w)) output included (the stream's
    outputs brought to the model's output shape, as the arrays' are)."""
    name, channels, spec, loss, target, metrics = CASES[2]
    data = _data(channels, n=12)
    x, y = data["x"], data[target]
    arrays = _model(channels, spec, loss, metrics).fit(x, y, batch_size=4, epochs=2,
                                                       shuffle=False, verbose=0).history
    ds = cnncuda.data.Dataset.from_tensor_slices((x, y)).batch(4)
    streamed = _model(channels, spec, loss, metrics).fit(ds, epochs=2, verbose=0).history
    assert sorted(streamed) == sorted(arrays) == ["accuracy", "loss", "mse"]
    for key in arrays:
        np.testing.assert_allclose(streamed[key], arrays[key], rtol=1e-6, err_msg=key)
