"""The cuda engine's side lane (cnn.h: lane_fork, lane_back, lane_join;
cuda/lane.cu): a conv or dense layer's filter gradient runs on a second
stream beside the same layer's data gradient. Same kernels and arguments, so
training with lanes (the default) must give the bits of training without
(CNNCUDA_LANES=0, read when a Net is made): losses, weights, gradients,
optimizer state and the input gradient of a backward, with recorded steps
(CUDA graphs: the side stream joins the capture and must be joined back
before it ends) and without (CNNCUDA_GRAPHS=0), on the default SGEMM (at
batch 32 the convolutions' data gradient gathers its own copy of dy beside
the side lane) and on CNNCUDA_SGEMM=wide (dy read in place; the data
gradient's dcol in its own workspace region).

A failure between fork and join is not provoked here: no op of the cuda
engine can fail inside a Net's backward without a broken device (no
allocation, descriptors checked when the Net is made).
"""
import numpy as np
import pytest

from cnncuda.engine import make_net
from cnncuda.seeds import seed_network, synthetic_data
from conftest import ADAM, SPARSE_LOGITS, engine_params

CUDA = engine_params(("cuda",))
SETTINGS = [(lanes, graphs) for lanes in (True, False) for graphs in (True, False)]


def run(monkeypatch, lanes, graphs, kernel, build, x, y, batch):
    """Resident-data steps (full batches recorded and replayed when graphs,
    then a partial one), a train_batch, and a training forward with a
    backward that returns dx (so the first layer forks too); returns every
    array to compare."""
    monkeypatch.setenv("CNNCUDA_LANES", "1" if lanes else "0")
    monkeypatch.setenv("CNNCUDA_GRAPHS", "1" if graphs else "0")
    monkeypatch.setenv("CNNCUDA_SGEMM", kernel)
    net = build()
    n = len(x)
    net.set_data(x, y)
    net.set_order(np.random.default_rng(3).permutation(n))
    net.train_range(0, n, batch)
    sums = net.read_sums(reset=True)
    step = net.train_batch(x[:batch], y[:batch])
    grads = net.get_gradients()
    out = net.forward(x[:batch], training=True)
    dy = np.random.default_rng(4).standard_normal(out.shape).astype(np.float32)
    dx = net.backward(dy)
    state = net.get_optimizer_state()
    slots = [s for group in state["slots"] for s in group]
    return ([np.array(sums, dtype=np.float64), np.array(step, dtype=np.float64), out, dx]
            + net.get_weights() + grads + net.get_gradients() + slots)


def assert_same_bits(results):
    first = results[0]
    for setting, arrays in results[1:]:
        assert len(arrays) == len(first[1])
        for i, (a, b) in enumerate(zip(first[1], arrays)):
            assert a.shape == b.shape and a.tobytes() == b.tobytes(), \
                "array %d differs between (lanes, graphs) %s and %s" % (i, first[0], setting)


@pytest.mark.parametrize("engine", CUDA)
@pytest.mark.parametrize("kernel", ["auto", "wide"])
@pytest.mark.parametrize("batch", [32, 7])
def test_seed_cnn_same_bits_with_and_without_lanes(engine, kernel, batch, monkeypatch):
    s = seed_network("cifar10_cnn")
    x, y = synthetic_data("cifar10_cnn", 5 * batch + batch // 2 + 1, seed=2)

    def build():
        return make_net(engine, s["layers"], s["input_shape"], batch, s["loss"], s["optimizer"],
                        seed=11)

    results = [((lanes, graphs), run(monkeypatch, lanes, graphs, kernel, build, x, y, batch))
               for lanes, graphs in SETTINGS]
    assert_same_bits(results)


# A dense layer first (its filter gradient on the main lane, the others
# forked), dense layers with and without bias; and a conv net whose first
# layer is a conv without bias after which batchnorm, dropout and pooling
# run between the forked layers.
NETWORKS = {
    "dense_first": ((20,), [{"kind": "dense", "units": 33},
                            {"kind": "activation", "activation": "relu"},
                            {"kind": "dense", "units": 17, "use_bias": False},
                            {"kind": "activation", "activation": "tanh"},
                            {"kind": "dropout", "rate": 0.3},
                            {"kind": "dense", "units": 5}]),
    "conv_first": ((13, 11, 3), [{"kind": "conv2d", "units": 7, "kernel": (3, 3),
                                  "use_bias": False},
                                 {"kind": "batchnorm"},
                                 {"kind": "activation", "activation": "relu"},
                                 {"kind": "conv2d", "units": 9, "kernel": (2, 3),
                                  "strides": (2, 1), "padding": "same"},
                                 {"kind": "maxpool", "kernel": (2, 2)},
                                 {"kind": "dropout", "rate": 0.25},
                                 {"kind": "flatten"},
                                 {"kind": "dense", "units": 12},
                                 {"kind": "activation", "activation": "relu"},
                                 {"kind": "dense", "units": 5}]),
}


@pytest.mark.parametrize("engine", CUDA)
@pytest.mark.parametrize("kernel", ["auto", "wide"])
@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_small_networks_same_bits_with_and_without_lanes(engine, kernel, name, monkeypatch):
    shape, layers = NETWORKS[name]
    batch = 9
    rng = np.random.default_rng(6)
    n = 4 * batch + 5
    x = rng.standard_normal((n,) + shape).astype(np.float32)
    y = rng.integers(0, 5, n).astype(np.int32)

    def build():
        return make_net(engine, layers, shape, batch, SPARSE_LOGITS, ADAM, seed=8)

    results = [((lanes, graphs), run(monkeypatch, lanes, graphs, kernel, build, x, y, batch))
               for lanes, graphs in SETTINGS]
    assert_same_bits(results)


@pytest.mark.parametrize("engine", CUDA)
def test_tile64_and_many_nets_with_lanes(engine, monkeypatch):
    """CNNCUDA_SGEMM=tile64 never forks (its data gradient reads the dy the
    filter gradient rearranges): the same bits as lanes off. Several nets
    with lanes alive at once, each with its own side stream, train apart."""
    s = seed_network("cifar10_cnn")
    x, y = synthetic_data("cifar10_cnn", 3 * 32, seed=9)

    def build():
        return make_net(engine, s["layers"], s["input_shape"], 32, s["loss"], s["optimizer"],
                        seed=12)

    results = [((lanes, True), run(monkeypatch, lanes, True, "tile64", build, x, y, 32))
               for lanes in (True, False)]
    assert_same_bits(results)
    monkeypatch.setenv("CNNCUDA_LANES", "1")
    monkeypatch.setenv("CNNCUDA_SGEMM", "auto")
    nets = [build() for _ in range(3)]
    for net in nets:
        net.set_data(x, y)
        net.set_order(np.arange(len(x)))
    for net in nets:
        net.train_range(0, len(x), 32)
    weights = [net.get_weights() for net in nets]
    for other in weights[1:]:
        for a, b in zip(weights[0], other):
            assert a.tobytes() == b.tobytes()
