"""Ctrl-C during fit: KeyboardInterrupt comes out of fit within one chunk of
steps, the weights are those of a step boundary (bit for bit those of a twin
that took exactly as many steps, optimizer state and dropout counter
included), and fit carries on from there.

fit runs the epoch in engine calls of a few steps each (train_range), sized
to about a second without a progress bar; Python sees the signal when the
call returns. A step is never cut in half: a step happens inside one C call,
and the signal only sets a flag there."""
import _thread
import copy
import math
import os
import signal
import threading
import time

import numpy as np
import pytest

from cnncuda.keras import callbacks, layers, losses, models, optimizers
from conftest import engine_params, random_images


@pytest.fixture(autouse=True)
def python_handles_ctrl_c():
    """Python's own SIGINT handler, whatever started the test process: a
    command put in the background by a non-interactive shell starts with
    SIGINT ignored, and then no Ctrl-C reaches Python at all."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)

N, BATCH = 1024, 16
STEPS_PER_EPOCH = N // BATCH


def make(device):
    model = models.Sequential([
        layers.Conv2D(8, 3, padding="same", activation="relu", input_shape=(16, 16, 3)),
        layers.BatchNormalization(), layers.MaxPooling2D(), layers.Dropout(0.25),
        layers.Flatten(), layers.Dense(10)], seed=11)
    model.compile(optimizer=optimizers.Adam(learning_rate=0.003), metrics=["accuracy"],
                  loss=losses.SparseCategoricalCrossentropy(from_logits=True), device=device)
    return model


def data(n=N):
    return random_images(n, (16, 16, 3), 10, seed=5)


def twin_after(device, steps, x, y):
    """A model that took exactly `steps` steps of fit's first epochs (the same
    shuffled orders), through the engine directly."""
    twin = make(device)
    order_rng = np.random.default_rng(twin.seed)     # fit's shuffling
    net = twin._get_net(twin.device, "train", BATCH)
    net.set_data(x, y)
    done, per_epoch = 0, len(x) // BATCH
    while done < steps:
        net.set_order(order_rng.permutation(len(x)))
        take = min(per_epoch, steps - done)
        net.train_range(0, take * BATCH, BATCH)
        done += take
    net.read_sums()                                  # as fit leaves them: read
    return twin


def assert_at_a_step_boundary(model, device, x, y):
    steps = model.optimizer.iterations
    assert steps > 0
    weights = model.get_weights()
    assert all(np.isfinite(w).all() for w in weights)
    twin = twin_after(device, steps, x, y)
    for a, b in zip(weights, twin.get_weights(), strict=True):
        assert np.array_equal(a, b), "the weights are not those of step %d" % steps
    mine, theirs = model._net.get_optimizer_state(), twin._net.get_optimizer_state()
    assert (mine["steps"], mine["training_forwards"]) == (steps, steps)
    assert (theirs["steps"], theirs["training_forwards"]) == (steps, steps)
    for a, b in zip(mine["slots"], theirs["slots"], strict=True):
        for sa, sb in zip(a, b, strict=True):
            assert np.array_equal(sa, sb), "the optimizer state is not that of step %d" % steps
    twin._shuffle_rng = copy.deepcopy(model._shuffle_rng)
    return steps, twin


def interrupt_after(seconds, how):
    def fire():
        time.sleep(seconds)
        fired.append(time.perf_counter())
        if how == "interrupt_main":
            _thread.interrupt_main()
        else:
            os.kill(os.getpid(), signal.SIGINT)      # what Ctrl-C sends
    fired = []
    timer = threading.Thread(target=fire, daemon=True)
    timer.start()
    return timer, fired


class Timed:
    """The engine network with its train_range calls timed."""

    def __init__(self, net):
        self._net, self.calls = net, []

    def __getattr__(self, name):
        return getattr(self._net, name)

    def train_range(self, *args):
        began = time.perf_counter()
        try:
            return self._net.train_range(*args)
        finally:
            self.calls.append((began, time.perf_counter()))


@pytest.mark.parametrize("how", ["SIGINT", "interrupt_main"])
@pytest.mark.parametrize("device", engine_params(("cpu", "omp")))
def test_ctrl_c_during_fit(device, how):
    x, y = data()
    n = len(x)
    model = make(device)
    model._get_net(model.device, "train", BATCH)       # the network fit will use, timed
    model._net = timed = Timed(model._net)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    timer, fired = interrupt_after(0.8, how)
    with pytest.raises(KeyboardInterrupt):
        model.fit(x, y, batch_size=BATCH, epochs=10**6, verbose=0)
    caught = time.perf_counter()
    timer.join()
    latency = caught - fired[0]
    # the engine call running when the signal came (none: it came in Python)
    running = [end for began, end in timed.calls if began <= fired[0] <= end]
    rest_of_chunk = running[0] - fired[0] if running else 0.0
    longest = max(end - began for began, end in timed.calls)
    steps, twin = assert_at_a_step_boundary(model, device, x, y)
    print("%s (%s): interrupted after %d steps in %d engine calls (the longest %.3f s); fit "
          "returned %.3f s after the signal, %.3f s after the call running then"
          % (device, how, steps, len(timed.calls), longest, latency, latency - rest_of_chunk))
    # within the chunk of steps that was running (chunks: about 1 s at most)
    assert latency - rest_of_chunk < 0.25 and longest < 3.0
    # fit goes on, exactly as from a model that was never interrupted (the
    # loss and accuracy sums of the cut epoch are not carried into it)
    history = model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0).history
    assert history == twin.fit(x, y, batch_size=BATCH, epochs=1, verbose=0).history
    assert model.optimizer.iterations == steps + n // BATCH
    assert 0 <= history["accuracy"][0] <= 1
    for a, b in zip(model.get_weights(), twin.get_weights(), strict=True):
        assert np.array_equal(a, b)


class InterruptAt(callbacks.Callback):
    def __init__(self, epoch, batch):
        super().__init__()
        self.at, self.epoch = (epoch, batch), None

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if (self.epoch, batch) == self.at:
            raise KeyboardInterrupt


@pytest.mark.parametrize("device", engine_params(("cpu", "omp")) + ["numpy"])
def test_keyboard_interrupt_from_a_callback(device):
    """Per-batch callbacks run fit one step per engine call: the interrupt
    comes after exactly that step."""
    x, y = data()
    model = make(device)
    with pytest.raises(KeyboardInterrupt):
        model.fit(x, y, batch_size=BATCH, epochs=3, verbose=0,
                  callbacks=[InterruptAt(1, 5)])
    assert model.optimizer.iterations == STEPS_PER_EPOCH + 6
    if device != "numpy":
        assert_at_a_step_boundary(model, device, x, y)
    else:
        assert all(np.isfinite(w).all() for w in model.get_weights())
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0)
    assert model.optimizer.iterations == 2 * STEPS_PER_EPOCH + 6
    assert all(np.isfinite(w).all() for w in model.get_weights())


def test_an_interrupted_model_saves_and_loads(tmp_path):
    """After a Ctrl-C the model is whole: it saves, loads and trains on."""
    x, y = data()
    model = make("cpu")
    timer, _ = interrupt_after(0.5, "SIGINT")
    with pytest.raises(KeyboardInterrupt):
        model.fit(x, y, batch_size=BATCH, epochs=10**6, verbose=0)
    timer.join()
    model.save(tmp_path / "m")
    loaded = models.load_model(tmp_path / "m", device="cpu")
    for a, b in zip(loaded.get_weights(), model.get_weights(), strict=True):
        assert np.array_equal(a, b)
    assert loaded.optimizer.iterations == model.optimizer.iterations
    a = loaded.fit(x, y, batch_size=BATCH, epochs=1, verbose=0).history
    b = model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0).history
    assert a == b and math.isfinite(a["loss"][0])
