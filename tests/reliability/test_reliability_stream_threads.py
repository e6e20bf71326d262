"""Streams read on a producer thread (cnncuda/data/prefetch.py) beside the
engine's calls, which release the GIL: the producer runs during set_data's
upload, the steps, evaluate and predict; several models stream at once,
each giving what it gives alone; a call on a model whose stream fit runs
on another thread is refused; Ctrl-C stops a stream fit at a step
boundary, the producer gone; an array inside a call cannot be resized."""
import os
import signal
import threading
import time

import numpy as np
import pytest

from cnncuda.data import feed
from cnncuda.keras import layers, losses, models, optimizers
from conftest import engine_params

ENGINES = engine_params(("cpu", "omp"))


@pytest.fixture(autouse=True)
def python_handles_ctrl_c():
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def make(device, seed=3):
    model = models.Sequential([
        layers.Conv2D(16, 3, padding="same", activation="relu", input_shape=(16, 16, 4)),
        layers.MaxPooling2D(), layers.Flatten(), layers.Dense(5)], seed=seed)
    model.compile(optimizer=optimizers.Adam(learning_rate=0.003), metrics=["accuracy"],
                  loss=losses.SparseCategoricalCrossentropy(from_logits=True), device=device)
    return model


def data(n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((n, 16, 16, 4)).astype(np.float32), rng.integers(0, 5, n)


def stream_fit(model, batches, overlap=True, **kwargs):
    args = dict(epochs=1, verbose=0, callbacks=[], validation_data=None, shuffle=False,
                initial_epoch=0, steps_per_epoch=None, validation_steps=None,
                validation_batch_size=None, validation_freq=1)
    args.update(kwargs)
    return feed.fit(model, batches, overlap=overlap, **args)


def no_feed_thread():
    return not [t for t in threading.enumerate() if t.name == "cnncuda-feed"]


@pytest.mark.parametrize("call", ["set_data", "evaluate", "predict"])
def test_a_python_thread_runs_during_the_calls_the_feed_makes(call):
    """As train_range (test_reliability_threads): the core call releases the GIL."""
    x, y = data(6000)
    net = make("cpu")._get_net("cpu", "train", 64)
    counts, stop = [0], threading.Event()

    def count():
        while not stop.is_set():
            counts[0] += 1
    side = threading.Thread(target=count)
    side.start()
    time.sleep(0.05)
    before, began = counts[0], time.perf_counter()
    time.sleep(0.2)
    rate = (counts[0] - before) / (time.perf_counter() - began)
    inside = 0.0
    during = 0
    for _ in range(20):           # long enough to measure on a shared machine
        before, began = counts[0], time.perf_counter()
        if call == "set_data":
            net.set_data(x, y)
        elif call == "evaluate":
            net.evaluate(x, y)
        else:
            net.predict(x)
        inside += time.perf_counter() - began
        during += counts[0] - before
        if inside > 0.3:
            break
    stop.set()
    side.join()
    share = during / (rate * inside)
    assert share > 0.2, (call, during, rate, inside)


def batches_of(x, y, batch, delay=0.0):
    for i in range(0, len(x), batch):
        if delay:
            time.sleep(delay)
        yield x[i:i + batch], y[i:i + batch]


@pytest.mark.parametrize("device", ENGINES)
def test_models_streaming_at_once_give_what_they_give_alone(device):
    sets = [data(480, seed) for seed in range(3)]

    def run(k):
        model = make(device, seed=k)
        history = stream_fit(model, batches_of(*sets[k], 16), epochs=1).history
        return history, model.get_weights()
    alone = [run(k) for k in range(3)]
    together, errors = [None] * 3, []

    def job(k):
        try:
            together[k] = run(k)
        except BaseException as error:        # reported below
            errors.append(error)
    threads = [threading.Thread(target=job, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for (ha, wa), (hb, wb) in zip(alone, together, strict=True):
        assert ha == hb
        assert all(np.array_equal(a, b) for a, b in zip(wa, wb, strict=True))
    assert no_feed_thread()


def test_a_call_on_a_model_streaming_on_another_thread_is_refused():
    x, y = data(320)
    model = make("cpu")
    model.fit(x[:16], y[:16], verbose=0)          # built, so the refusal is all we see
    started, release = threading.Event(), threading.Event()

    def slow():
        for i, pair in enumerate(batches_of(x, y, 16)):
            if i == 3:
                started.set()
                release.wait(10)
            yield pair
    errors = []
    fitter = threading.Thread(target=lambda: errors.append(
        model.fit(slow(), verbose=0) and None))
    fitter.start()
    assert started.wait(10)
    for call in (lambda: model.predict(x[:4], verbose=0), lambda: model.get_weights(),
                 lambda: model.fit(x, y, verbose=0)):
        with pytest.raises(RuntimeError, match="runs on another thread"):
            call()
    release.set()
    fitter.join()
    assert errors == [None] and model.optimizer.iterations == 1 + 20
    assert no_feed_thread()


@pytest.mark.parametrize("device", ENGINES)
def test_ctrl_c_stops_a_stream_fit_at_a_step_boundary(device):
    """The main thread waits for the producer (a slow stream) or is in an
    engine call when SIGINT comes: KeyboardInterrupt within a block, the
    weights those of a whole number of steps, the producer gone."""
    x, y = data(16 * 400)
    model = make(device)

    def fire():
        time.sleep(0.6)
        fired.append(time.perf_counter())
        os.kill(os.getpid(), signal.SIGINT)
    fired = []
    timer = threading.Thread(target=fire, daemon=True)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        stream_fit(model, batches_of(x, y, 16, delay=0.005))
    latency = time.perf_counter() - fired[0]
    timer.join()
    steps = model.optimizer.iterations
    assert 0 < steps < 400 and latency < 1.5 and no_feed_thread()
    twin = make(device)
    stream_fit(twin, batches_of(x[:16 * steps], y[:16 * steps], 16), overlap=False)
    assert all(np.array_equal(a, b)
               for a, b in zip(model.get_weights(), twin.get_weights(), strict=True))


@pytest.mark.parametrize("call", ["set_data", "evaluate", "predict"])
def test_an_array_inside_a_core_call_cannot_be_resized(call):
    """The binding holds the array for the call (the GIL released): another
    thread's resize is refused by NumPy, and the call gives what it gives
    undisturbed."""
    x, y = data(6000)
    net = make("cpu")._get_net("cpu", "train", 64)
    alone = net.evaluate(x, y) if call == "evaluate" else \
        net.predict(x) if call == "predict" else None
    inside, outcome = threading.Event(), []

    def resize():
        inside.wait(10)
        time.sleep(0.01)
        try:
            x.resize((10, 16, 16, 4))
            outcome.append("resized")
        except ValueError as error:
            outcome.append(str(error))
    side = threading.Thread(target=resize)
    side.start()
    inside.set()
    # the calls go on until the other thread has tried: it gets the GIL
    # when a call releases it (the Python between two calls is far shorter
    # than the interpreter's 5 ms switch interval)
    while not outcome:
        if call == "set_data":
            net.set_data(x, y)
            net.set_order(np.arange(len(x)))
            got = None
        else:
            got = net.evaluate(x, y) if call == "evaluate" else net.predict(x)
    side.join()
    assert len(outcome) == 1 and outcome[0].startswith("cannot resize"), outcome
    assert x.shape == (6000, 16, 16, 4)
    if call == "evaluate":
        assert got == alone
    elif call == "predict":
        assert np.array_equal(got, alone)
