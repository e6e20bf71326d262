"""Model files: save and load round-trip bit for bit on every engine; a
truncated, corrupted, forged or other-version file raises ModelFileError
(never loads garbage, never another exception); and a save that fails or is
killed midway leaves the previous checkpoint whole (the file is written to
a temporary name and renamed). tests/keras/test_keras_saving*.py hold the first
cases of each; these go through every byte."""
import hashlib
import json
import os
import signal
import struct
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from cnncuda import saving
from cnncuda.keras import callbacks, layers, losses, models, optimizers
from conftest import engine_params, random_images

ENGINES = engine_params(("cpu", "omp")) + ["numpy"]
ERRORS = ("truncated cnncuda model file", "corrupted cnncuda model file",
          "not a cnncuda model file", "format version")


def make(device, optimizer="adam"):
    model = models.Sequential([
        layers.Conv2D(3, 3, padding="same", input_shape=(6, 6, 2)), layers.BatchNormalization(),
        layers.Activation("relu"), layers.MaxPooling2D(), layers.Dropout(0.25), layers.Flatten(),
        layers.Dense(4)], name="net", seed=3)
    opt = (optimizers.Adam(learning_rate=0.01) if optimizer == "adam"
           else optimizers.SGD(learning_rate=0.05, momentum=0.9))
    model.compile(optimizer=opt, metrics=["accuracy"], device=device,
                  loss=losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def data(n=40):
    return random_images(n, (6, 6, 2), 4)


def same_weights(a, b):
    for wa, wb in zip(a.get_weights(), b.get_weights(), strict=True):
        assert wa.dtype == wb.dtype and np.array_equal(wa, wb)


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
@pytest.mark.parametrize("device", ENGINES)
def test_round_trip_is_bit_exact(tmp_path, device, optimizer):
    x, y = data()
    model = make(device, optimizer)
    model.fit(x, y, batch_size=8, epochs=2, verbose=0)
    model.save(tmp_path / "m")
    loaded = models.load_model(tmp_path / "m", device=device)
    same_weights(loaded, model)
    assert np.array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))
    # (evaluate sums the loss in chunks of the engine network's batch, which
    # differs here: the loaded model's network was built for predict)
    np.testing.assert_allclose(loaded.evaluate(x, y, verbose=0), model.evaluate(x, y, verbose=0),
                               rtol=1e-6)
    # training goes on bit for bit: the optimizer's state came along
    a = loaded.fit(x, y, batch_size=8, epochs=2, verbose=0).history
    b = model.fit(x, y, batch_size=8, epochs=2, verbose=0).history
    assert a == b
    same_weights(loaded, model)
    # and saving the loaded model writes the same bytes
    loaded.save(tmp_path / "again")
    model.save(tmp_path / "first")
    assert (tmp_path / "again").read_bytes() == (tmp_path / "first").read_bytes()


@pytest.fixture(scope="module")
def saved_bytes(tmp_path_factory):
    x, y = data(16)
    model = make("cpu")
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    path = tmp_path_factory.mktemp("saved") / "model.cnncuda"
    model.save(path)
    return path.read_bytes()


def refused(path, data_bytes):
    path.write_bytes(data_bytes)
    with pytest.raises(saving.ModelFileError) as info:
        models.load_model(path)
    message = str(info.value)
    assert str(path) in message and any(e in message for e in ERRORS), message
    return message


def test_every_truncation_is_refused(tmp_path, saved_bytes):
    path = tmp_path / "m"
    kinds = set()
    for cut in range(len(saved_bytes)):
        kinds.add(refused(path, saved_bytes[:cut]).split(": ")[1].split(" (")[0][:40])
    print("%d truncations refused: %s" % (len(saved_bytes), sorted(kinds)))


def test_every_flipped_byte_is_refused(tmp_path, saved_bytes):
    path = tmp_path / "m"
    for at in range(len(saved_bytes)):
        bad = bytearray(saved_bytes)
        bad[at] ^= 1 << (at % 8)
        refused(path, bytes(bad))
    for extra in (b"\0", b"x" * 100):
        refused(path, saved_bytes + extra)


@pytest.mark.parametrize("version", [0, 3, 255, 2**31, 2**32 - 1])
def test_other_format_versions(tmp_path, saved_bytes, version):
    message = refused(tmp_path / "m", saved_bytes[:8] + struct.pack("<I", version)
                      + saved_bytes[12:])
    assert "format version %d; this cnncuda reads versions 1 and 2" % version in message


def forge(header, payload=b""):
    """A file with a well-formed frame and checksum around `header`."""
    text = json.dumps(header).encode()
    body = struct.pack("<8sII", saving.MAGIC, saving.FORMAT_VERSION, len(text)) + text + payload
    return body + hashlib.sha256(body).digest()


def test_forged_files_with_a_good_checksum_are_refused(tmp_path, saved_bytes):
    """The checksum proves a file is whole, not that a program wrote it: a
    header that lies about its contents must still never load garbage."""
    header_len = struct.unpack_from("<I", saved_bytes, 12)[0]
    header = json.loads(saved_bytes[16:16 + header_len])
    payload = saved_bytes[16 + header_len:-32]
    path = tmp_path / "m"

    def variant(change):
        h = json.loads(json.dumps(header))
        change(h)
        return h

    lies = {
        "huge shape": lambda h: h["weights"][0].__setitem__("shape", [2**40]),
        "negative shape": lambda h: h["weights"][0].__setitem__("shape", [-3, 1]),
        "shape not a list": lambda h: h["weights"][0].__setitem__("shape", 7),
        "shape of strings": lambda h: h["weights"][0].__setitem__("shape", ["a"]),
        "no weights": lambda h: h.pop("weights"),
        "weights not a list": lambda h: h.__setitem__("weights", {"a": 1}),
        "slots not a list": lambda h: h["optimizer_state"].__setitem__("slots", 3),
        "one weight less": lambda h: h["weights"].pop(),
    }
    for name, change in lies.items():
        message = refused(path, forge(variant(change), payload))
        assert "truncated" in message or "corrupted" in message, (name, message)
    # a header that is not JSON, not UTF-8, or not an object
    for text in (b"{", b"\xff\xfe", b"[1, 2]", b"null", b"7"):
        body = struct.pack("<8sII", saving.MAGIC, 2, len(text)) + text
        refused(path, body + hashlib.sha256(body).digest())


ARCHITECTURE_LIES = {
    "no model": lambda h: h.pop("model"),
    "no layers": lambda h: h["model"]["config"].pop("layers"),
    "layers not a list": lambda h: h["model"]["config"].__setitem__("layers", 5),
    "unknown layer": lambda h: h["model"]["config"]["layers"][0].__setitem__("class_name", "LSTM"),
    "zero filters": lambda h: h["model"]["config"]["layers"][0]["config"].__setitem__(
        "filters", 0),
    "bad kernel": lambda h: h["model"]["config"]["layers"][0]["config"].__setitem__(
        "kernel_size", "x"),
    "bad input shape": lambda h: h["model"]["config"].__setitem__("input_shape", [-1]),
    "bad seed": lambda h: h["model"]["config"].__setitem__("seed", "s"),
    "bad optimizer": lambda h: h["compile"]["optimizer"].__setitem__("class_name", "Lamb"),
    "bad loss": lambda h: h["compile"]["loss"].__setitem__("class_name", "Huber"),
    "bad learning rate": lambda h: h["compile"]["optimizer"]["config"].__setitem__(
        "learning_rate", -1),
    "bad metrics": lambda h: h["compile"].__setitem__("metrics", ["no_such_metric"]),
    "bad steps": lambda h: h["optimizer_state"].__setitem__("steps", -4),
    "bad shuffle state": lambda h: h["optimizer_state"].__setitem__("shuffle_rng", {"x": 1}),
    # NumPy raises OverflowError for an integer outside uint64 (found by hypothesis)
    "negative shuffle state": lambda h: h["optimizer_state"]["shuffle_rng"]["state"].__setitem__(
        "state", -1),
}


@pytest.mark.parametrize("lie", sorted(ARCHITECTURE_LIES))
def test_forged_architectures_are_refused(tmp_path, saved_bytes, lie):
    header_len = struct.unpack_from("<I", saved_bytes, 12)[0]
    header = json.loads(saved_bytes[16:16 + header_len])
    payload = saved_bytes[16 + header_len:-32]
    try:
        ARCHITECTURE_LIES[lie](header)
    except (KeyError, IndexError, TypeError):
        pytest.skip("this file has no such entry")
    path = tmp_path / "m"
    path.write_bytes(forge(header, payload))
    with pytest.raises(saving.ModelFileError, match="corrupted cnncuda model file"):
        models.load_model(path)


# -------------------------------------------------- a save that goes wrong

class FailingFile:
    """A file object whose writes stop after `limit` bytes with `error`."""

    def __init__(self, f, limit, error):
        self.f, self.limit, self.error = f, limit, error

    def write(self, data):
        room = self.limit - self.f.tell()
        if len(data) > room:
            self.f.write(data[:max(room, 0)])
            raise self.error
        return self.f.write(data)

    def __getattr__(self, name):
        return getattr(self.f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return self.f.__exit__(*exc)


FAILURES = {
    "disk full halfway": lambda: OSError(28, "No space left on device"),
    "Ctrl-C halfway": lambda: KeyboardInterrupt(),
    "rename refused": None,
}


@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_a_failed_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch, failure):
    x, y = data()
    model = make("cpu")
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    path = tmp_path / "checkpoint.cnncuda"
    model.save(path)
    before = path.read_bytes()
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)          # newer weights to save
    if failure == "rename refused":
        def replace(src, dst):
            raise OSError(13, "Permission denied")
        monkeypatch.setattr(saving.os, "replace", replace)
        expected = OSError
    else:
        error = FAILURES[failure]()
        real = os.fdopen
        monkeypatch.setattr(saving.os, "fdopen",
                            lambda fd, mode: FailingFile(real(fd, mode), len(before) // 2, error))
        expected = type(error)
    with pytest.raises(expected):
        model.save(path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == [path.name], "a temporary file was left behind"
    loaded = models.load_model(path)
    assert loaded.optimizer.iterations == 5
    model.save(path)                                  # and the next save works
    assert models.load_model(path).optimizer.iterations == 10


KILLED_SAVE = """
import os, sys, time
import numpy as np
from cnncuda import saving
from cnncuda.keras import models

model = models.load_model(sys.argv[1])
model.set_weights([w + 1 for w in model.get_weights()])
real = os.fdopen

class Slow:
    def __init__(self, f):
        self.f = f
    def write(self, data):
        half = len(data) // 2
        self.f.write(data[:half])
        self.f.flush()
        print("half written", flush=True)
        time.sleep(60)                      # killed here
        return self.f.write(data[half:])
    def __getattr__(self, name):
        return getattr(self.f, name)
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        return self.f.__exit__(*exc)

saving.os.fdopen = lambda fd, mode: Slow(real(fd, mode))
model.save(sys.argv[1])
"""


def test_a_killed_save_keeps_the_previous_checkpoint(tmp_path, saved_bytes):
    """kill -9 in the middle of writing: the target is the old file; the
    half-written temporary file is all that is left of the new one."""
    path = tmp_path / "checkpoint.cnncuda"
    path.write_bytes(saved_bytes)
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(KILLED_SAVE), str(path)],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "half written"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL
    assert path.read_bytes() == saved_bytes
    models.load_model(path)
    left = sorted(set(os.listdir(tmp_path)) - {path.name})
    assert len(left) == 1 and left[0].startswith(".checkpoint.cnncuda.") \
        and left[0].endswith(".tmp"), left
    refused(tmp_path / left[0], (tmp_path / left[0]).read_bytes())   # never a model


def test_model_checkpoint_whose_save_fails_keeps_the_last_one(tmp_path, monkeypatch):
    x, y = data()
    model = make("cpu")
    path = tmp_path / "ckpt"
    saves = []
    real = saving.os.fsync

    def fsync(fd):
        saves.append(fd)
        if len(saves) == 2:
            raise OSError(5, "Input/output error")
        return real(fd)

    monkeypatch.setattr(saving.os, "fsync", fsync)
    with pytest.raises(OSError, match="Input/output error"):
        model.fit(x, y, batch_size=8, epochs=3, verbose=0,
                  callbacks=[callbacks.ModelCheckpoint(str(path))])
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["ckpt"]
    saved = models.load_model(path)
    assert saved.optimizer.iterations == 5                       # the epoch-1 checkpoint
    time.sleep(0)
