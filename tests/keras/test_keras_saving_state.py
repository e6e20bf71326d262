"""The optimizer's state across a save and load and across a change of engine
network: training goes on as if nothing had happened (bit-exactly on one
engine), version-1 files still load, and a bad slots section is refused."""
import hashlib
import json
import struct
import warnings

import numpy as np
import pytest

import cnncuda
from cnncuda import saving
from cnncuda.keras import layers, losses, models, optimizers
from conftest import assert_same_weights, random_images

OPTIMIZERS = {"adam": lambda: optimizers.Adam(learning_rate=0.01, beta_1=0.8),
              "sgd-momentum": lambda: optimizers.SGD(learning_rate=0.05, momentum=0.9),
              "sgd": lambda: optimizers.SGD(learning_rate=0.05)}


def make(optimizer="adam", device="cpu", conv_bias=True):
    """Dropout and batch normalization: the dropout counter and the moving
    statistics must come along too. (A bias before batch normalization gets
    gradients of rounding noise only, which Adam blows up to full steps: no
    good for comparing two engines.)"""
    model = models.Sequential([
        layers.Conv2D(3, 3, padding="same", input_shape=(6, 6, 2), use_bias=conv_bias),
        layers.BatchNormalization(),
        layers.Activation("relu"), layers.MaxPooling2D(), layers.Dropout(0.25), layers.Flatten(),
        layers.Dense(4)], name="net", seed=3)
    model.compile(optimizer=OPTIMIZERS[optimizer](), metrics=["accuracy"], device=device,
                  loss=losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def data(n=40):
    return random_images(n, (6, 6, 2), 4)


def fit(model, batch_size=8, epochs=2):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)   # no "moments restart" warning
        return model.fit(*data(), batch_size=batch_size, epochs=epochs, verbose=0).history


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_training_after_load_continues_exactly(tmp_path, optimizer):
    original = make(optimizer)
    fit(original)
    original.save(tmp_path / "m")
    loaded = models.load_model(tmp_path / "m", device="cpu")
    assert loaded.optimizer.iterations == original.optimizer.iterations == 10
    assert loaded._net_compile is None            # the state waits for the engine network
    assert fit(loaded) == fit(original)           # shuffled batches, dropout: bit-exact
    assert_same_weights(loaded, original)
    assert loaded.optimizer.iterations == original.optimizer.iterations == 20
    for a, b in zip(loaded._net.get_optimizer_state()["slots"],
                    original._net.get_optimizer_state()["slots"], strict=True):
        assert len(a) == {"adam": 2, "sgd-momentum": 1, "sgd": 0}[optimizer]
        for sa, sb in zip(a, b, strict=True):
            np.testing.assert_array_equal(sa, sb)


def test_without_the_state_training_differs(tmp_path):
    original = make()
    fit(original)
    original.save(tmp_path / "m", include_optimizer=False)
    original.save(tmp_path / "full")
    trainable = sum(int(np.prod(shape)) for _, _, shape, t in original._weight_specs() if t)
    assert ((tmp_path / "full").stat().st_size - (tmp_path / "m").stat().st_size
            > 2 * 4 * trainable)                  # Adam's m and v
    header, _, slots = saving.read_model_file(tmp_path / "m")
    assert header["optimizer_state"] is None and slots == []
    loaded = models.load_model(tmp_path / "m", device="cpu")
    assert loaded.optimizer.iterations == 0 and loaded.optimizer.get_config()["beta_1"] == 0.8
    fit(loaded)
    fit(original)
    assert loaded.optimizer.iterations == 10
    assert not np.array_equal(loaded.get_weights()[0], original.get_weights()[0])


def test_larger_batch_carries_the_state_exactly(tmp_path):
    """A fit with a larger batch rebuilds the engine network; the result is
    the same as on a network built large enough from the start."""
    wide = make()
    fit(wide, batch_size=16, epochs=0)            # builds for batch 16, trains nothing
    narrow = make()
    assert fit(narrow, batch_size=8, epochs=1) == fit(wide, batch_size=8, epochs=1)
    narrow.save(tmp_path / "m")
    loaded = models.load_model(tmp_path / "m", device="cpu")
    assert narrow._net.max_batch == 8 and wide._net.max_batch == 16
    expected = fit(wide, batch_size=16)
    assert fit(narrow, batch_size=16) == expected
    assert fit(loaded, batch_size=16) == expected
    assert narrow._net.max_batch == loaded._net.max_batch == 16
    for model in (narrow, loaded):
        assert_same_weights(model, wide)
        assert model.optimizer.iterations == 5 + 6


@pytest.mark.parametrize("optimizer", ["adam", "sgd-momentum"])
def test_another_engine_carries_the_state(tmp_path, optimizer):
    """cpu -> numpy: the same training up to rounding; restarting the
    optimizer state (what happened before the engines handed it out) is far
    off."""
    reference = make(optimizer, conv_bias=False)
    fit(reference, epochs=1)
    reference.save(tmp_path / "m")
    loaded = models.load_model(tmp_path / "m", device="numpy")
    moved = make(optimizer, conv_bias=False)
    fit(moved, epochs=1)
    restarted = make(optimizer, conv_bias=False)
    fit(restarted, epochs=1)
    fresh = restarted._net.get_optimizer_state()
    restarted._net.set_optimizer_state({"steps": 0, "training_forwards": 0, "slots": [
        [np.zeros_like(a) for a in entry] for entry in fresh["slots"]]})
    fit(restarted)
    expected = fit(reference)
    got = [fit(loaded)]
    with cnncuda.device("numpy"):
        got.append(fit(moved))
    for model, history in zip((loaded, moved), got):
        assert model._net_device == "numpy" and model.optimizer.iterations == 15
        for key in expected:
            np.testing.assert_allclose(history[key], expected[key], rtol=1e-4, atol=1e-6)
        for w, want in zip(model.get_weights(), reference.get_weights(), strict=True):
            np.testing.assert_allclose(w, want, rtol=1e-4, atol=1e-5)
    assert max(np.abs(w - want).max()
               for w, want in zip(restarted.get_weights(), reference.get_weights())) > 1e-2


def test_layers_added_after_training_start_their_moments_at_zero(tmp_path):
    model = make()
    fit(model, epochs=1)
    before = model._net.get_optimizer_state()
    model.pop()
    model.add(layers.Dense(5, name="head"))
    assert model._net is None and model.optimizer.iterations == 5
    trimmed = dict(model._carried_state)          # the state of the layers that stay
    assert len(trimmed["slots"]) == len(before["slots"]) - 2
    model.save(tmp_path / "m")
    header, _, slots = saving.read_model_file(tmp_path / "m")
    assert len(slots) == len(before["slots"])
    header["optimizer_state"]["slots"] = [[list(a.shape) for a in e] for e in trimmed["slots"]]
    write_raw(tmp_path / "short", 2, header,
              list(model.get_weights()) + [a for e in trimmed["slots"] for a in e])
    loaded = models.load_model(tmp_path / "short", device="cpu")
    for m in (model, loaded):
        m.evaluate(*data(), verbose=0)            # builds the network: the state goes in
        state = m._net.get_optimizer_state()
        assert state["steps"] == 5 and len(state["slots"]) == len(before["slots"])
        for a, b in zip(state["slots"][:-2], before["slots"][:-2]):
            for sa, sb in zip(a, b, strict=True):
                np.testing.assert_array_equal(sa, sb)
        assert not state["slots"][-1][0].any()
    assert fit(loaded) == fit(model)
    assert_same_weights(loaded, model)


def write_raw(path, version, header, arrays):
    text = json.dumps(header).encode("utf-8")
    body = struct.pack("<8sII", saving.MAGIC, version, len(text)) + text + b"".join(
        np.ascontiguousarray(a, "<f4").tobytes() for a in arrays)
    path.write_bytes(body + hashlib.sha256(body).digest())


def test_version_1_files_still_load(tmp_path):
    """Version 1 held the step count only: the moments and the engine's
    counters restart at zero, the step count goes on."""
    original = make()
    fit(original)
    original.save(tmp_path / "v2")
    header, weights, _ = saving.read_model_file(tmp_path / "v2")
    header["optimizer_state"] = {"iterations": 10, "moments": "not stored: the engines do not "
                                 "hand out the optimizer's moments"}
    write_raw(tmp_path / "v1", 1, header, weights)
    loaded = models.load_model(tmp_path / "v1", device="cpu")
    assert_same_weights(loaded, original)
    assert loaded.optimizer.iterations == 10
    restarted = make()
    restarted.set_weights(original.get_weights())
    assert fit(loaded, epochs=1) == fit(restarted, epochs=1)
    assert_same_weights(loaded, restarted)
    assert loaded.optimizer.iterations == 15 and loaded._net.steps == 5
    loaded.save(tmp_path / "again")               # and into version 2 with both counts
    header, _, _ = saving.read_model_file(tmp_path / "again")
    assert (header["optimizer_state"]["iterations"], header["optimizer_state"]["steps"]) == (15, 5)
    again = models.load_model(tmp_path / "again", device="cpu")
    assert again.optimizer.iterations == 15
    assert fit(again, epochs=1) == fit(loaded, epochs=1)
    assert again.optimizer.iterations == 20 and again._net.steps == 10


@pytest.fixture
def saved(tmp_path):
    model = make()
    fit(model, epochs=1)
    path = tmp_path / "m"
    model.save(path)
    header, weights, slots = saving.read_model_file(path)
    return path, header, weights, slots


def test_corrupted_slots_section(saved):
    path, header, weights, slots = saved
    data = path.read_bytes()
    flipped = bytearray(data)
    flipped[-40] ^= 0x01                          # the last slot array's last value
    path.write_bytes(bytes(flipped))
    with pytest.raises(saving.ModelFileError, match="checksum does not match"):
        models.load_model(path)
    slot_bytes = 4 * sum(a.size for entry in slots for a in entry)
    path.write_bytes(data[:-32 - slot_bytes] + data[-32:])
    with pytest.raises(saving.ModelFileError, match="truncated cnncuda model file: expected"):
        models.load_model(path)
    flat = [a for entry in slots for a in entry]

    def rewritten(change_header, arrays=flat):
        h = json.loads(json.dumps(header))
        change_header(h["optimizer_state"])
        write_raw(path, 2, h, list(weights) + list(arrays))
        return path

    def transposed_shape(state):                  # the same bytes, another shape
        state["slots"][0] = [shape[::-1] for shape in state["slots"][0]]
    with pytest.raises(saving.ModelFileError, match=r"bad optimizer_state \(slots\[0\]: expected "
                                                    r"2 arrays of shape \(3, 3, 2, 3\)"):
        models.load_model(rewritten(transposed_shape))

    def three_slots(state):
        state["slots"][0] = state["slots"][0] + [state["slots"][0][0]]
    with pytest.raises(saving.ModelFileError, match=r"slots\[0\]: expected 2 arrays"):
        models.load_model(rewritten(three_slots, flat[:2] + [flat[0]] + flat[2:]))

    def too_many(state):
        state["slots"].append([[1], [1]])
    with pytest.raises(saving.ModelFileError, match="slots: 7 entries for 6 trainable weights"):
        models.load_model(rewritten(too_many, flat + [np.zeros(1), np.zeros(1)]))

    def bad_counter(state):
        state["steps"] = -1
    with pytest.raises(saving.ModelFileError, match=r"steps: expected an int >= 0, got -1"):
        models.load_model(rewritten(bad_counter))

    def bad_rng(state):
        state["shuffle_rng"] = {"bit_generator": "MT19937"}
    with pytest.raises(saving.ModelFileError, match="shuffle_rng"):
        models.load_model(rewritten(bad_rng))
    assert models.load_model(rewritten(lambda state: None)).optimizer.iterations == 5
