"""Threads: the C core releases the GIL, so two models train at once from two
Python threads, and each gives bit for bit what it gives alone; one Net
refuses a second concurrent call instead of racing."""
import threading
import time

import numpy as np
import pytest

from cnncuda.keras import layers, losses, models, optimizers
from conftest import engine_params

ENGINES = engine_params(("cpu", "omp"))


def image_model(device, seed):
    model = models.Sequential([
        layers.Conv2D(6, 3, padding="same", activation="relu", input_shape=(12, 12, 3)),
        layers.BatchNormalization(), layers.MaxPooling2D(), layers.Dropout(0.25),
        layers.Flatten(), layers.Dense(5)], seed=seed)
    model.compile(optimizer=optimizers.Adam(learning_rate=0.01), metrics=["accuracy"],
                  loss=losses.SparseCategoricalCrossentropy(from_logits=True), device=device)
    return model


def dense_model(device, seed):
    model = models.Sequential([layers.Dense(32, activation="tanh", input_shape=(20,)),
                               layers.Dense(3, activation="softmax")], seed=seed)
    model.compile(optimizer=optimizers.SGD(learning_rate=0.05, momentum=0.9),
                  loss="categorical_crossentropy", metrics=["accuracy"], device=device)
    return model


def jobs(device):
    rng = np.random.default_rng(0)
    xi, yi = rng.random((960, 12, 12, 3)).astype(np.float32), rng.integers(0, 5, 960)
    xd = rng.standard_normal((2000, 20)).astype(np.float32)
    yd = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 2000)]
    return [(lambda: image_model(device, 1), xi, yi, 16),
            (lambda: dense_model(device, 2), xd, yd, 10)]


def train(make, x, y, batch):
    model = make()
    history = model.fit(x, y, batch_size=batch, epochs=8, verbose=0, validation_split=0.2)
    return history.history, model.get_weights(), model.predict(x[:50], verbose=0), \
        model.evaluate(x, y, verbose=0)


def assert_same(a, b):
    history_a, weights_a, predicted_a, evaluated_a = a
    history_b, weights_b, predicted_b, evaluated_b = b
    assert history_a == history_b
    assert evaluated_a == evaluated_b
    assert np.array_equal(predicted_a, predicted_b)
    for wa, wb in zip(weights_a, weights_b, strict=True):
        assert np.array_equal(wa, wb)


@pytest.mark.parametrize("device", ENGINES)
def test_two_models_trained_at_once_give_what_they_give_alone(device):
    alone = [train(*job) for job in jobs(device)]
    results, errors = [None, None], []

    def worker(i, job):
        try:
            results[i] = train(*job)
        except BaseException as err:     # reported below
            errors.append(err)

    for _ in range(2):
        threads = [threading.Thread(target=worker, args=(i, job))
                   for i, job in enumerate(jobs(device))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        assert not errors, errors
        for together, single in zip(results, alone):
            assert_same(together, single)


def test_the_gil_is_released_during_a_core_call():
    """A Python thread keeps counting while the main thread is inside one long
    train_range call; with the GIL held it would get no more than one switch
    interval (5 ms) of it."""
    rng = np.random.default_rng(1)
    x, y = rng.random((4096, 16, 16, 8)).astype(np.float32), rng.integers(0, 5, 4096)
    net = heavy_net(3)
    net.set_data(x, y)
    net.set_order(np.arange(4096))
    counts, stop = [0], threading.Event()

    def count():
        while not stop.is_set():
            counts[0] += 1

    side = threading.Thread(target=count)
    side.start()
    time.sleep(0.05)
    before, began = counts[0], time.perf_counter()
    time.sleep(0.2)                            # the counter alone: its rate
    rate = (counts[0] - before) / (time.perf_counter() - began)
    before, began = counts[0], time.perf_counter()
    net.train_range(0, 4096, 16)               # one C call
    inside = time.perf_counter() - began
    during = counts[0] - before
    stop.set()
    side.join()
    share = during / (rate * inside)
    print("a Python thread ran at %.0f%% of its own rate during a %.2f s core call"
          % (100 * share, inside))
    assert inside > 0.05 and share > 0.2, (during, rate, inside)


def heavy_net(seed):
    model = models.Sequential([
        layers.Conv2D(32, 3, padding="same", activation="relu", input_shape=(16, 16, 8)),
        layers.Flatten(), layers.Dense(5)], seed=seed)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", device="cpu")
    model.build()
    return model._get_net("cpu", "train", 16)


def test_a_second_call_on_a_busy_net_is_refused():
    """While one thread is inside a long train_range, every call on the same
    Net from another thread raises RuntimeError and changes nothing: the
    long call ends with what it gives alone."""
    rng = np.random.default_rng(2)
    x, y = rng.random((4096, 16, 16, 8)).astype(np.float32), rng.integers(0, 5, 4096)
    net, twin = heavy_net(5), heavy_net(5)
    for n in (net, twin):
        n.set_data(x, y)
        n.set_order(np.arange(4096))
    began = time.perf_counter()
    twin.train_range(0, 4096, 16)
    alone = time.perf_counter() - began
    calls = {
        "train_batch": lambda: net.train_batch(x[:16], y[:16]),
        "compute_gradients": lambda: net.compute_gradients(x[:16], y[:16]),
        "apply_gradients": net.apply_gradients,
        "evaluate": lambda: net.evaluate(x[:16], y[:16]),
        "predict": lambda: net.predict(x[:16]),
        "forward": lambda: net.forward(x[:16]),
        "backward": lambda: net.backward(np.zeros((16, 5), np.float32)),
        "set_data": lambda: net.set_data(x[:64], y[:64]),
        "set_order": lambda: net.set_order(np.arange(4096)[::-1]),
        "train_range": lambda: net.train_range(0, 16, 16),
        "read_sums": net.read_sums,
        "get_weights": net.get_weights,
        "get_gradients": net.get_gradients,
        "set_weights": lambda: net.set_weights(twin.get_weights()),
        "get_optimizer_state": net.get_optimizer_state,
        "set_optimizer_state": lambda: net.set_optimizer_state(twin.get_optimizer_state()),
        "weight_info": net.weight_info,
    }
    started, done, error = threading.Event(), threading.Event(), []

    def long_call():
        started.set()
        try:
            net.train_range(0, 4096, 16)
        except BaseException as err:
            error.append(err)
        done.set()

    worker = threading.Thread(target=long_call)
    worker.start()
    started.wait()
    time.sleep(min(0.1, alone / 10))
    refused = []
    for name, call in calls.items():
        with pytest.raises(RuntimeError, match="already running a call on another thread"):
            call()
        refused.append(name)
    finished_first = done.is_set()
    worker.join(timeout=600)
    assert not error, error
    assert not finished_first, ("the long call (%.2f s alone) ended before every call was "
                                "tried: the test proves nothing" % alone)
    assert net.read_sums() == twin.read_sums()
    for a, b in zip(net.get_weights(), twin.get_weights(), strict=True):
        assert np.array_equal(a, b)


def overlapping(calls, rounds):
    """Runs the callables of `calls` at once (a barrier starts them) `rounds`
    times; yields, per round, each call's result or the exception it raised."""
    for _ in range(rounds):
        barrier = threading.Barrier(len(calls))
        outcome = [None] * len(calls)

        def worker(i, call):
            barrier.wait()
            try:
                outcome[i] = ("ok", call())
            except BaseException as err:     # judged by the caller
                outcome[i] = ("raised", err)

        threads = [threading.Thread(target=worker, args=(i, c)) for i, c in enumerate(calls)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        yield outcome


def refused_as_documented(outcome):
    """Every call of a round either returned or raised the documented
    RuntimeError (another call runs on the model); anything else fails."""
    for kind, value in outcome:
        if kind == "raised":
            assert isinstance(value, RuntimeError) and "on another thread" in str(value), value
    return [kind == "ok" for kind, _ in outcome]


@pytest.mark.parametrize("device", ENGINES)
def test_two_fits_on_one_model_at_once_lose_no_update(device):
    """Two threads call fit on one model at once: each fit either trains its
    32 steps or raises the documented RuntimeError, and the step count is 32
    per fit that returned (before the guard, both returned and one fit's
    steps were lost: each thread had built its own network)."""
    rng = np.random.default_rng(3)
    x, y = rng.random((512, 12, 12, 3)).astype(np.float32), rng.integers(0, 5, 512)
    for _ in range(5):
        model = image_model(device, 4)
        fit = lambda: model.fit(x, y, batch_size=16, epochs=1, verbose=0)   # noqa: E731
        for outcome in overlapping([fit, fit], rounds=1):
            returned = refused_as_documented(outcome)
            assert any(returned)
            assert model.optimizer.iterations == 32 * sum(returned), \
                (model.optimizer.iterations, returned)


@pytest.mark.parametrize("device", ENGINES)
@pytest.mark.parametrize("other", ["fit", "predict", "get_weights", "evaluate"])
def test_a_fresh_models_first_fit_beside_another_call(device, other):
    """A fresh model's first fit (which builds its network) beside another
    call on it: each returns or raises the documented RuntimeError (before
    the guard: AttributeError 'NoneType' object has no attribute 'steps'),
    and the weights are then those of the fits that returned."""
    rng = np.random.default_rng(4)
    x, y = rng.random((256, 12, 12, 3)).astype(np.float32), rng.integers(0, 5, 256)
    for _ in range(5):
        model = image_model(device, 5)
        calls = {"fit": lambda: model.fit(x, y, batch_size=16, epochs=1, verbose=0),
                 "predict": lambda: model.predict(x, verbose=0),
                 "get_weights": model.get_weights,
                 "evaluate": lambda: model.evaluate(x, y, verbose=0)}
        for outcome in overlapping([calls["fit"], calls[other]], rounds=1):
            returned = refused_as_documented(outcome)
            fits = returned[0] + (returned[1] if other == "fit" else 0)
            assert model.optimizer.iterations == 16 * fits
