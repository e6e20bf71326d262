"""fit's initial_epoch, steps_per_epoch (arrays), validation_freq,
validation_batch_size and refused sample weights, and the callbacks
ReduceLROnPlateau, LearningRateScheduler, CSVLogger and TerminateOnNaN
(#24): checked against train_on_batch and evaluate on the NumPy reference
engine, and against Keras 3 itself (a child process, JAX on the CPU) where
the behaviour is Keras's."""
import json
import warnings

import numpy as np
import pytest

from cnncuda.keras import callbacks, layers, losses, models, optimizers
from conftest import run_keras


def model_of(seed=0, optimizer="adam"):
    model = models.Sequential([layers.Flatten(input_shape=(4, 4, 1)), layers.Dense(3)],
                              seed=seed)
    model.compile(optimizer=optimizer,
                  loss=losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], device="numpy")
    return model


def data(n=40, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((n, 4, 4, 1)).astype(np.float32), rng.integers(0, 3, n)


def same_weights(a, b):
    return all(np.array_equal(p, q) for p, q in zip(a.get_weights(), b.get_weights(),
                                                     strict=True))


def test_steps_per_epoch_goes_on_through_the_pass_as_keras():
    """40 samples in batches of 8, 2 steps an epoch: epochs take batches
    0-1, 2-3, then 4 alone (the pass ends there: Keras's warning), then a new
    pass. The same steps by train_on_batch give the same weights and losses."""
    x, y = data()
    fitted, stepped = model_of(), model_of()
    with pytest.warns(UserWarning, match="Your input ran out of data") as caught:
        history = fitted.fit(x, y, batch_size=8, epochs=4, steps_per_epoch=2, shuffle=False,
                             verbose=0)
    assert len(caught) == 1
    losses_by_epoch = []
    for batches in ([0, 1], [2, 3], [4], [0, 1]):
        logs = [stepped.train_on_batch(x[8 * b:8 * b + 8], y[8 * b:8 * b + 8]) for b in batches]
        losses_by_epoch.append(np.mean([l[0] for l in logs]))
    assert same_weights(fitted, stepped)
    np.testing.assert_allclose(history.history["loss"], losses_by_epoch, rtol=1e-6)
    assert fitted.optimizer.iterations == 7


def test_steps_per_epoch_without_batch_size_splits_the_data_as_keras():
    x, y = data(10)
    fitted, stepped = model_of(), model_of()
    fitted.fit(x, y, epochs=1, steps_per_epoch=3, shuffle=False, verbose=0)   # batches of 4
    for s in (0, 4, 8):
        stepped.train_on_batch(x[s:s + 4], y[s:s + 4])
    assert same_weights(fitted, stepped)
    with pytest.raises(ValueError, match="steps_per_epoch: expected an int >= 1, got 0"):
        fitted.fit(x, y, steps_per_epoch=0, verbose=0)


def test_initial_epoch_validation_freq_and_batch_size():
    x, y = data()
    model = model_of()
    history = model.fit(x, y, epochs=4, initial_epoch=1, validation_data=(x[:10], y[:10]),
                        validation_freq=2, validation_batch_size=3, verbose=0)
    assert history.epoch == [1, 2, 3]       # validated after epochs 2 and 4 (1-based)
    assert len(history.history["loss"]) == 3 and len(history.history["val_loss"]) == 2
    np.testing.assert_allclose(history.history["val_loss"][-1],
                               model.evaluate(x[:10], y[:10], verbose=0)[0], rtol=1e-6)
    history = model.fit(x, y, epochs=4, validation_split=0.25, validation_freq=[1, 4], verbose=0)
    assert len(history.history["val_accuracy"]) == 2
    before = model.get_weights()
    for kwargs, error, message in [
            (dict(validation_freq=0), ValueError, r"validation_freq: expected an int >= 1, got 0"),
            (dict(validation_freq="2"), TypeError, r"validation_freq: expected an int >= 1 or "
                                                   r"a list of epoch numbers, got '2'"),
            (dict(validation_freq=[1, 0]), ValueError, r"validation_freq\[1\]: expected an int "
                                                       r">= 1, got 0"),
            (dict(validation_batch_size=0), ValueError, r"validation_batch_size: expected an "
                                                        r"int >= 1, got 0"),
            (dict(sample_weight=np.ones(39)), ValueError, r"sample_weight: expected shape "
                                                          r"\(40,\) \(a weight per sample\), "
                                                          r"got \(39,\)"),
            (dict(class_weight={0: -1.0, 1: 2.0, 2: 1.0}), ValueError,
             r"class_weight\[0\]: expected finite weights >= 0")]:
        with pytest.raises(error, match=message):
            model.fit(x, y, epochs=1, verbose=0, **kwargs)
        assert all(np.array_equal(a, b) for a, b in zip(before, model.get_weights()))
    with pytest.raises(ValueError, match=r"sample_weight: expected shape \(40,\)"):
        model.evaluate(x, y, sample_weight=np.ones(41), verbose=0)


def test_learning_rate_scheduler_trains_as_setting_the_rate_by_hand():
    x, y = data()
    scheduled, by_hand = model_of(optimizer=optimizers.SGD(0.1)), \
        model_of(optimizer=optimizers.SGD(0.1))
    history = scheduled.fit(x, y, epochs=3, shuffle=False, verbose=0,
                            callbacks=[callbacks.LearningRateScheduler(
                                lambda epoch, lr: lr if epoch == 0 else lr * 0.5)])
    for epoch, rate in enumerate([0.1, 0.05, 0.025]):
        by_hand.optimizer.learning_rate = float(np.float32(0.1)) * 0.5 ** epoch
        by_hand.fit(x, y, epochs=1, shuffle=False, verbose=0)
    for a, b in zip(scheduled.get_weights(), by_hand.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    np.testing.assert_allclose(history.history["learning_rate"], [0.1, 0.05, 0.025], rtol=1e-7)
    assert list(history.history)[-1] == "learning_rate"
    with pytest.raises(ValueError, match="The output of the `schedule` function should be a "
                                         "float. Got: 1"):
        model_of().fit(x, y, verbose=0,
                       callbacks=[callbacks.LearningRateScheduler(lambda epoch: 1)])
    with pytest.raises(ValueError, match="learning_rate: expected a number in"):
        model_of().fit(x, y, verbose=0,
                       callbacks=[callbacks.LearningRateScheduler(lambda epoch: -1.0)])
    with pytest.raises(TypeError, match="schedule: expected a function"):
        callbacks.LearningRateScheduler(0.1)


def test_reduce_lr_on_plateau_rules(capsys):
    x, y = data()
    # min_delta larger than any change: no epoch after the first improves
    reduce = callbacks.ReduceLROnPlateau(monitor="loss", factor=0.5, patience=1, min_delta=10.0,
                                         cooldown=2, min_lr=0.0003, verbose=1)
    history = model_of().fit(x, y, epochs=6, verbose=0, callbacks=[reduce])
    # reduced after epochs 2 and 4 (1-based): epoch 3 waits out the cooldown
    rates = np.float32(history.history["learning_rate"])
    np.testing.assert_allclose(rates, np.float32([0.001, 0.001, 0.0005, 0.0005, 0.0003, 0.0003]),
                               rtol=1e-6)
    assert [l for l in capsys.readouterr().out.splitlines() if l] == [
        "Epoch 2: ReduceLROnPlateau reducing learning rate to 0.0005000000237487257.",
        "Epoch 4: ReduceLROnPlateau reducing learning rate to 0.0003."]
    for kwargs, error, message in [
            (dict(factor=1.0), ValueError, r"ReduceLROnPlateau does not support a factor >= 1.0"),
            (dict(mode="up"), ValueError, r"mode: expected one of 'auto', 'min', 'max', got 'up'"),
            (dict(patience=-1), ValueError, r"patience: expected an int >= 0, got -1")]:
        with pytest.raises(error, match=message):
            callbacks.ReduceLROnPlateau(**kwargs)
    with pytest.raises(ValueError, match="isn't able to automatically determine"):
        model_of().fit(x, y, verbose=0, callbacks=[callbacks.ReduceLROnPlateau(monitor="f1")])


def test_terminate_on_nan_stops_at_the_first_bad_batch(capsys):
    x, y = data()
    model = model_of(optimizer=optimizers.SGD(1e38))
    history = model.fit(x, y, batch_size=4, epochs=3, verbose=0,
                        callbacks=[callbacks.TerminateOnNaN()])
    out = capsys.readouterr().out
    assert "Invalid loss, terminating training" in out
    batch = int(out.split("Batch ")[1].split(":")[0])
    assert history.epoch == [0] and model.optimizer.iterations == batch + 1 < 10
    with pytest.raises(RuntimeError, match="NaN or Inf loss encountered at batch"):
        model_of(optimizer=optimizers.SGD(1e38)).fit(
            x, y, batch_size=4, epochs=3, verbose=0,
            callbacks=[callbacks.TerminateOnNaN(raise_error=True)])


def test_csv_logger_rows_append_and_separator(tmp_path):
    x, y = data()
    path = tmp_path / "log.csv"
    model_of().fit(x, y, epochs=2, verbose=0, callbacks=[callbacks.CSVLogger(str(path))])
    lines = path.read_bytes().split(b"\r\n")
    assert lines[0] == b"epoch,accuracy,loss,val_accuracy,val_loss"
    assert lines[1].startswith(b"0,") and lines[1].endswith(b",NA,NA") and lines[3] == b""
    model_of().fit(x, y, epochs=3, initial_epoch=2, validation_data=(x, y), verbose=0,
                   callbacks=[callbacks.CSVLogger(path, separator=";", append=True)])
    lines = path.read_bytes().split(b"\r\n")
    assert len(lines) == 5 and lines[3].startswith(b"2;") and lines[3].count(b";") == 4
    assert b"NA" not in lines[3]
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    model_of().fit(x, y, epochs=1, verbose=0,
                   callbacks=[callbacks.CSVLogger(empty, append=True)])
    assert empty.read_bytes().startswith(b"epoch,")


def test_csv_logger_keeps_the_old_file_until_a_row_replaces_it(tmp_path):
    x, y = data()
    path = tmp_path / "log.csv"
    path.write_bytes(b"earlier run\r\n")

    class Fails(callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        model_of().fit(x, y, verbose=0, callbacks=[callbacks.CSVLogger(path), Fails()])
    assert path.read_bytes() == b"earlier run\r\n"
    with pytest.raises(FileNotFoundError, match="filename: the folder"):
        model_of().fit(x, y, verbose=0,
                       callbacks=[callbacks.CSVLogger(tmp_path / "no" / "log.csv")])
    with pytest.raises(ValueError, match="separator: expected one character"):
        callbacks.CSVLogger(path, separator=", ")
    assert [p.name for p in tmp_path.iterdir()] == ["log.csv"]      # no temporary left


KERAS_SCRIPT = """
import io, contextlib, json, os, sys, warnings
import numpy as np, keras
rng = np.random.default_rng(0)
x = rng.random((40, 4, 4, 1)).astype("float32"); y = rng.integers(0, 3, 40)
def model():
    m = keras.Sequential([keras.Input((4, 4, 1)), keras.layers.Flatten(), keras.layers.Dense(3)])
    m.compile(optimizer="adam",
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
    return m
out = {}
buf = io.StringIO()
path = os.path.join(sys.argv[1] if len(sys.argv) > 1 else ".", "keras_log.csv")
with contextlib.redirect_stdout(buf), warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    h = model().fit(x, y, epochs=5, batch_size=8, steps_per_epoch=2, verbose=0,
                    validation_data=(x, y), validation_freq=[2, 3], callbacks=[
        keras.callbacks.ReduceLROnPlateau(monitor="loss", factor=0.5, patience=1,
                                          min_delta=10.0, verbose=1),
        keras.callbacks.CSVLogger(path)])
out["keys"] = list(h.history); out["epoch"] = h.epoch
out["learning_rate"] = h.history["learning_rate"]
out["printed"] = [l for l in buf.getvalue().splitlines() if l]
out["warnings"] = [str(w.message) for w in caught if "ran out" in str(w.message)]
out["csv_header"] = open(path, newline="").read().split("\\r\\n")[0]
h = model().fit(x, y, epochs=3, verbose=0, callbacks=[keras.callbacks.LearningRateScheduler(
    lambda epoch, lr: lr * 0.5)])
out["scheduled"] = h.history["learning_rate"]
m = model()
out["train_on_batch"] = [type(v).__name__ for v in m.train_on_batch(x[:8], y[:8])]
out["json_from_keras"] = m.to_json()
print(json.dumps(out))
"""


@pytest.mark.keras3
def test_fit_callbacks_and_json_as_keras(tmp_path, capsys):
    keras_out = json.loads(run_keras(KERAS_SCRIPT.replace('sys.argv[1] if len(sys.argv) > 1 '
                                                          'else "."', repr(str(tmp_path)))))
    x, y = data()
    model = model_of()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        h = model.fit(x, y, epochs=5, batch_size=8, steps_per_epoch=2, verbose=0,
                      validation_data=(x, y), validation_freq=[2, 3], callbacks=[
                          callbacks.ReduceLROnPlateau(monitor="loss", factor=0.5, patience=1,
                                                      min_delta=10.0, verbose=1),
                          callbacks.CSVLogger(tmp_path / "log.csv")])
    printed = [l for l in capsys.readouterr().out.splitlines() if l]
    # Keras lists accuracy before loss; cnncuda keeps TensorFlow 2's loss first
    assert sorted(h.history) == sorted(keras_out["keys"])
    assert h.epoch == keras_out["epoch"]
    assert h.history["learning_rate"] == keras_out["learning_rate"]
    assert printed == keras_out["printed"]
    assert [str(w.message) for w in caught if "ran out" in str(w.message)] == \
        keras_out["warnings"]
    header = (tmp_path / "log.csv").read_bytes().split(b"\r\n")[0].decode()
    assert header == keras_out["csv_header"]
    h = model_of().fit(x, y, epochs=3, verbose=0, callbacks=[callbacks.LearningRateScheduler(
        lambda epoch, lr: lr * 0.5)])
    assert h.history["learning_rate"] == keras_out["scheduled"]
    assert [type(v).__name__ for v in model_of().train_on_batch(x[:8], y[:8])] == \
        keras_out["train_on_batch"]
    # Keras's JSON builds here, and ours builds in Keras
    ours = models.model_from_json(keras_out["json_from_keras"])
    assert [type(l).__name__ for l in ours.layers] == ["Flatten", "Dense"]
    assert ours.input_shape == (None, 4, 4, 1) and ours.metric_name == "accuracy"
    code = ("import keras, json, sys; m = keras.models.model_from_json(sys.argv[1]); "
            "print(json.dumps([[type(l).__name__ for l in m.layers], list(m.input_shape), "
            "m.compiled, type(m.optimizer).__name__, m.count_params()]))")
    out = run_keras(code, model_of().to_json())
    assert json.loads(out) == [["Flatten", "Dense"], [None, 4, 4, 1], True, "Adam", 51]
