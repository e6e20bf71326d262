"""train_range on the GPU engines records one training step (a CUDA graph)
and replays it for every full batch. A replayed epoch must be the epoch run
one kernel at a time (CNNCUDA_GRAPHS=0), bit for bit: the same kernels in the
same order, with the batch position, dropout's key and Adam's step read from
the engine's counters. Also the engine clock (last_range_seconds), the
memory figure (memory_bytes), and the GPU library versions."""
import re
import time

import numpy as np
import pytest

import cnncuda
from cnncuda.engine import make_net
from conftest import engine_params

# conv, batchnorm, pooling, dropout on images and on features, dense: every
# op whose arguments change from step to step
LAYERS = [
    {"kind": "conv2d", "units": 6, "kernel": (3, 3), "padding": "same"},
    {"kind": "batchnorm"},
    {"kind": "activation", "activation": "relu"},
    {"kind": "maxpool", "kernel": (2, 2)},
    {"kind": "dropout", "rate": 0.25},
    {"kind": "flatten"},
    {"kind": "dense", "units": 16},
    {"kind": "activation", "activation": "relu"},
    {"kind": "dropout", "rate": 0.5},
    {"kind": "dense", "units": 5},
]
SHAPE = (9, 9, 2)
LOSS = {"kind": "sparse_categorical_crossentropy", "from_logits": True}
OPTIMIZERS = {"adam": {"kind": "adam", "learning_rate": 0.01},
              "sgd": {"kind": "sgd", "learning_rate": 0.05, "momentum": 0.9}}


def data(n, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n,) + SHAPE).astype(np.float32),
            rng.integers(0, 5, n).astype(np.int32))


def train(engine, optimizer, monkeypatch, graphs, epochs=3, batch=8, n=45):
    """epochs over n samples in ranges of 3 steps and a rest (a partial
    last batch), new data after the second epoch; returns what to compare."""
    monkeypatch.setenv("CNNCUDA_GRAPHS", "1" if graphs else "0")
    net = make_net(engine, LAYERS, SHAPE, 16, LOSS, OPTIMIZERS[optimizer], seed=5)
    sums = []
    for epoch in range(epochs):
        x, y = data(n, seed=epoch // 2)
        if epoch % 2 == 0:
            net.set_data(x, y)
        net.set_order(np.random.default_rng(epoch).permutation(n))
        net.train_range(0, 3 * batch, batch)
        net.train_range(3 * batch, n - 3 * batch, batch)
        if epoch == epochs - 1:
            net.train_range(0, 2 * batch, batch // 2)  # another batch size: recorded anew
        sums.append(net.read_sums(reset=True))
    state = net.get_optimizer_state()
    return net, sums, net.get_weights(), state


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
@pytest.mark.parametrize("engine", engine_params())
def test_replayed_epochs_equal_eager_epochs(engine, optimizer, monkeypatch):
    a, sums_a, w_a, st_a = train(engine, optimizer, monkeypatch, graphs=True)
    b, sums_b, w_b, st_b = train(engine, optimizer, monkeypatch, graphs=False)
    assert sums_a == sums_b
    for u, v in zip(w_a, w_b):
        np.testing.assert_array_equal(u, v)
    assert (a.steps, a.training_forwards) == (b.steps, b.training_forwards)
    assert st_a["steps"] == st_b["steps"] == a.steps
    for slots_a, slots_b in zip(st_a["slots"], st_b["slots"]):
        for u, v in zip(slots_a, slots_b):
            np.testing.assert_array_equal(u, v)
    # the counters went on: 3 epochs of ceil(45 / 8) steps, then 4 of 4
    assert a.steps == 3 * 6 + 4


@pytest.mark.parametrize("engine", engine_params())
def test_replayed_steps_continue_after_train_batch(engine, monkeypatch):
    """Steps taken one at a time between ranges move the recorded step's
    counters too: Adam's step and dropout's masks go on from there."""
    results = []
    for graphs in (True, False):
        monkeypatch.setenv("CNNCUDA_GRAPHS", "1" if graphs else "0")
        net = make_net(engine, LAYERS, SHAPE, 8, LOSS, OPTIMIZERS["adam"], seed=2)
        x, y = data(40, seed=3)
        net.set_data(x, y)
        net.set_order(np.arange(40))
        net.train_range(0, 24, 8)
        net.train_batch(x[:8], y[:8])
        state = net.get_optimizer_state()
        net.set_optimizer_state(state)  # sets the counters again
        net.train_range(8, 32, 8)
        results.append(net.get_weights())
    for u, v in zip(*results):
        np.testing.assert_array_equal(u, v)


@pytest.mark.parametrize("engine", engine_params())
def test_engine_clock_and_memory(engine):
    net = make_net(engine, LAYERS, SHAPE, 16, LOSS, OPTIMIZERS["adam"])
    empty = net.memory_bytes
    assert empty > 0
    x, y = data(64, seed=0)
    net.set_data(x, y)
    # the data (float32 rows, int32 labels) and the int32 order
    assert net.memory_bytes - empty == 64 * (int(np.prod(SHAPE)) * 4 + 4 + 4)
    net.set_order(np.arange(64))
    assert net.last_range_seconds is None  # nothing timed yet
    start = time.perf_counter()
    net.train_range(0, 64, 16)
    seconds = net.last_range_seconds
    wall = time.perf_counter() - start
    if engine in ("cuda", "cudnn"):
        assert 0.0 < seconds <= wall
    else:
        assert seconds is None


def test_gpu_library_versions():
    versions = cnncuda._C.cuda_versions()
    assert set(versions) <= {"driver", "runtime", "cudnn", "cublas"}
    for value in versions.values():
        assert re.fullmatch(r"\d+\.\d+(\.\d+)?", value), versions
    if "cuda" not in cnncuda.build_info()["engines"]:
        assert versions == {}
    memory = cnncuda._C.cuda_memory()
    if cnncuda.cuda_devices():
        free, total = memory
        assert 0 < free <= total
    else:
        assert memory is None


@pytest.mark.parametrize("engine", engine_params(("cuda", "cudnn")))
def test_device_memory_returns_after_delete(engine):
    """Build, train (recording a step) and delete a network 20 times: the
    GPU's free memory comes back to where it started."""
    import gc
    from cnncuda.seeds import seed_network, synthetic_data
    s = seed_network("cifar10_cnn")
    x, y = synthetic_data("cifar10_cnn", 256)

    def lifetime():
        net = make_net(engine, s["layers"], s["input_shape"], 64, s["loss"], s["optimizer"])
        net.set_data(x, y)
        net.set_order(np.arange(256))
        net.train_range(0, 256, 64)
        net.read_sums()
        del net
        gc.collect()

    lifetime()  # the libraries' one-time setup (cuDNN, cuBLAS handles' first use)
    start = cnncuda._C.cuda_memory()[0]
    for _ in range(20):
        lifetime()
    end = cnncuda._C.cuda_memory()[0]
    # cudaMemGetInfo counts in pages of 2 MiB; one lifetime here allocates ~25 MB
    assert abs(end - start) <= 4 << 20, (start, end)
