"""The progress bar as Keras prints it (verbose 0, 1, 2; in place in a
terminal or Jupyter; one line per epoch in a file), throttled so the
engine's sums are read rarely; and the callbacks' hooks."""
import re
import sys
import time
import types

import numpy as np
import pytest

from cnncuda import progbar
from cnncuda.keras import callbacks, layers, losses, models, optimizers
from cnncuda.seeds import synthetic_data

FINAL = (r"(\d+)/\1 \[==============================\] - \d+s \d+(ms|us|s)/step - accuracy: "
         r"\d\.\d{4} - loss: \d\.\d{4}")


def lenet(learning_rate=1e-3):
    model = models.Sequential([
        layers.Conv2D(6, 5, padding="same", activation="relu", input_shape=(28, 28, 1)),
        layers.AveragePooling2D(), layers.Conv2D(16, 5, activation="relu"),
        layers.AveragePooling2D(), layers.Flatten(), layers.Dense(120, activation="relu"),
        layers.Dense(84, activation="relu"), layers.Dense(10)])
    model.compile(optimizer=optimizers.Adam(learning_rate), metrics=["accuracy"], device="cpu",
                  loss=losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


class CountingNet:
    """The model's engine network, counting read_sums (each one a device sync)."""

    def __init__(self, net):
        self.net, self.reads = net, 0

    def __getattr__(self, name):
        return getattr(self.net, name)

    def read_sums(self, reset=True):
        self.reads += 1
        return self.net.read_sums(reset)


def counted(model, batch=32):
    net = CountingNet(model._get_net("cpu", "train", batch))
    model._net = net
    return net


def test_verbose_1_in_a_file_prints_keras_lines(capsys):
    x, y = synthetic_data("lenet5", 100)
    lenet().fit(x / 1.0, y, epochs=2, validation_data=(x[:20], y[:20]))
    lines = capsys.readouterr().out.split("\n")
    assert lines[0] == "Epoch 1/2" and lines[2] == "Epoch 2/2" and lines[4] == ""
    for line in (lines[1], lines[3]):
        assert re.fullmatch(r"4/4 \[==============================\] - \d+s \d+ms/step - accuracy: "
                            r"\d\.\d{4} - loss: \d\.\d{4} - val_accuracy: \d\.\d{4} - "
                            r"val_loss: \d\.\d{4}", line), line


def test_verbose_2_and_0(capsys):
    x, y = synthetic_data("lenet5", 100)
    model = lenet()
    model.fit(x, y, epochs=1, verbose=2)           # one epoch: no "Epoch 1/1" line, as Keras
    out = capsys.readouterr().out
    assert re.fullmatch(r"4/4 - \d+s - accuracy: \d\.\d{4} - loss: \d\.\d{4} - \d+m?s/epoch - "
                        r"\d+ms/step\n", out), out
    model.fit(x, y, epochs=2, verbose=0)
    model.evaluate(x, y, verbose=0)
    model.predict(x, verbose=0)
    assert capsys.readouterr().out == ""


def test_evaluate_and_predict_bars(capsys):
    x, y = synthetic_data("lenet5", 100)
    model = lenet()
    model.evaluate(x, y)
    model.predict(x, batch_size=10)
    lines = capsys.readouterr().out.split("\n")
    assert re.fullmatch(FINAL, lines[0]) and lines[0].startswith("4/4 ")
    assert re.fullmatch(r"10/10 \[==============================\] - \d+s \d+(ms|us)/step", lines[1])


def test_in_place_in_jupyter_and_throttled(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))
    x, y = synthetic_data("lenet5", 3000)
    model = lenet()
    net = counted(model)
    import time
    start = time.perf_counter()
    model.fit(x, y, epochs=1)
    seconds = time.perf_counter() - start
    out = capsys.readouterr().out
    frames = out.split("\r")[1:]
    assert len(frames) >= 2 and all(f.startswith(" ") or f[0].isdigit() for f in frames)
    assert "ETA: " in frames[0] and frames[-1].endswith("\n")
    assert re.fullmatch(FINAL + r" *\n", frames[-1]), frames[-1]
    assert net.reads <= seconds / 0.05 + 3, (net.reads, seconds)     # one per redraw at most
    assert 94 > net.reads >= 2


class SlowNet(CountingNet):
    """A CountingNet whose steps each take 30 ms longer."""

    def train_range(self, start, count, batch):
        time.sleep(0.03 * -(-count // batch))
        return self.net.train_range(start, count, batch)


def test_an_epoch_of_seconds_redraws_in_place(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))
    x, y = synthetic_data("lenet5", 40 * 32)
    model = lenet()
    net = SlowNet(model._get_net("cpu", "train", 32))
    model._net = net
    model.fit(x, y, epochs=1)                       # 40 steps of 30 ms or more
    frames = capsys.readouterr().out.split("\r")[1:]
    drawn = frames[:-1]
    assert len(drawn) >= 10, frames                 # redrawn every 0.05 s
    done = [int(re.match(r" *(\d+)/40 \[", f).group(1)) for f in drawn]
    assert done == sorted(set(done)) and done[-1] < 40 and "ETA: " in drawn[-1]
    assert re.fullmatch(FINAL + r" *\n", frames[-1]), frames[-1]
    assert net.reads <= len(drawn) + 1              # one per redraw, one at the end


def test_no_bar_no_reads_but_one_per_epoch(capsys):
    x, y = synthetic_data("lenet5", 600)
    model = lenet()
    net = counted(model)
    model.fit(x, y, epochs=3, verbose=0)
    assert net.reads == 3
    net.reads = 0
    model.fit(x, y, epochs=1, verbose=1)            # a file: only the final line
    assert net.reads == 1


def test_progbar_text():
    bar = progbar.Progbar(1563)
    assert bar._bar(32) == "  32/1563 [..............................]"
    assert bar._bar(800) == " 800/1563 [" + "=" * 14 + ">" + "." * 15 + "]"
    assert bar._bar(1563) == "1563/1563 [" + "=" * 30 + "]"
    assert [progbar.format_time(t, "step") for t in (0.005, 2.0, 0.00004, 0)] == \
        [" 5ms/step", " 2s/step", " 40us/step", " 0s/step"]


def test_callback_hooks_in_keras_order():
    calls = []

    class Recorder(callbacks.Callback):
        pass
    def record(hook):
        def method(self, *args):
            plain = tuple(a for a in args if not isinstance(a, dict))
            keys = tuple(k for a in args if isinstance(a, dict) for k in sorted(a))
            calls.append((hook,) + plain + keys)
        return method
    for hook in ("on_train_begin", "on_train_end", "on_epoch_begin", "on_epoch_end",
                 "on_test_begin", "on_test_end"):
        setattr(Recorder, hook, record(hook))
    x, y = synthetic_data("lenet5", 40)
    recorder = Recorder()
    lenet().fit(x, y, epochs=2, verbose=0, validation_data=(x, y), callbacks=[recorder])
    logs = ("accuracy", "loss", "val_accuracy", "val_loss")
    assert calls == [("on_train_begin",), ("on_epoch_begin", 0), ("on_test_begin",),
                     ("on_test_end", "val_accuracy", "val_loss"), ("on_epoch_end", 0) + logs,
                     ("on_epoch_begin", 1), ("on_test_begin",),
                     ("on_test_end", "val_accuracy", "val_loss"), ("on_epoch_end", 1) + logs,
                     ("on_train_end",) + ("accuracy", "loss", "val_accuracy", "val_loss")]
    assert recorder.params == {"verbose": 0, "epochs": 2, "steps": 2}
    assert not recorder.implements_batch_hooks("train")


def test_early_stopping(capsys):
    x, y = synthetic_data("lenet5", 64)
    model = lenet(learning_rate=0.0)               # the loss cannot improve
    stop = callbacks.EarlyStopping(monitor="loss", patience=1, verbose=1)
    history = model.fit(x, y, epochs=10, verbose=0, callbacks=[stop])
    assert len(history.epoch) == 2 and stop.stopped_epoch == 1
    assert capsys.readouterr().out == "Epoch 2: early stopping\n"


def test_early_stopping_restores_the_best_weights(capsys):
    x, y = synthetic_data("lenet5", 64)
    model = lenet(learning_rate=0.01)
    seen = {}
    keep = callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: seen.setdefault(
        epoch, model.get_weights()))
    stop = callbacks.EarlyStopping(monitor="loss", mode="max", patience=1, verbose=1,
                                   restore_best_weights=True)
    history = model.fit(x, y, epochs=5, verbose=0, callbacks=[keep, stop])
    assert history.history["loss"][1] < history.history["loss"][0]
    assert len(history.epoch) == 2
    for a, b in zip(model.get_weights(), seen[0]):
        np.testing.assert_array_equal(a, b)
    assert capsys.readouterr().out == ("Restoring model weights from the end of the best epoch: 1.\n"
                                       "Epoch 2: early stopping\n")


def test_callback_argument_errors():
    with pytest.raises(ValueError, match=r"mode: expected one of 'auto', 'min', 'max', got 'up'"):
        callbacks.EarlyStopping(mode="up")
    with pytest.raises(ValueError, match=r"patience: expected an int >= 0, got -1"):
        callbacks.EarlyStopping(patience=-1)
    with pytest.raises(ValueError, match=r"save_freq: expected 'epoch'"):
        callbacks.ModelCheckpoint("x", save_freq=10)
