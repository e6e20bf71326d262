"""The cuda engine's recorded steps launch each kernel while the one before it
still runs (programmatic dependent launch, record.cu; every kernel starts
with cnn_kernel_begin). A kernel that read its input before waiting would
read the previous step's values: the weights would differ from those of the
same epochs run one kernel at a time, or with early launch off."""
import numpy as np
import pytest

from cnncuda.engine import make_net
from cnncuda.seeds import seed_network, synthetic_data
from conftest import engine_params

CUDA = engine_params(("cuda",))


def train_seed(model, monkeypatch, graphs, early, images=320, batch=32, epochs=2):
    monkeypatch.setenv("CNNCUDA_GRAPHS", "1" if graphs else "0")
    monkeypatch.setenv("CNNCUDA_EARLY_LAUNCH", "1" if early else "0")
    s = seed_network(model)
    net = make_net("cuda", s["layers"], s["input_shape"], batch, s["loss"], s["optimizer"],
                   seed=3)
    x, y = synthetic_data(model, images, seed=1)
    net.set_data(x, y)
    for epoch in range(epochs):
        net.set_order(np.random.default_rng(epoch).permutation(images))
        net.train_range(0, images, batch)
    return net.get_weights()


@pytest.mark.parametrize("model", ["cifar10_cnn", "lenet5", "tiny_mnist"])
@pytest.mark.parametrize("engine", CUDA)
def test_early_launch_replay_equals_kernel_by_kernel(engine, model, monkeypatch):
    eager = train_seed(model, monkeypatch, graphs=False, early=False)
    early = train_seed(model, monkeypatch, graphs=True, early=True)
    plain = train_seed(model, monkeypatch, graphs=True, early=False)
    for e, a, p in zip(eager, early, plain):
        np.testing.assert_array_equal(a, e)
        np.testing.assert_array_equal(p, e)


@pytest.mark.parametrize("engine", CUDA)
def test_early_launch_switch_is_checked(engine, monkeypatch):
    monkeypatch.setenv("CNNCUDA_EARLY_LAUNCH", "yes")
    s = seed_network("tiny_mnist")
    with pytest.raises(ValueError, match=r"CNNCUDA_EARLY_LAUNCH: expected 1, 0, on, off, true or false, got 'yes'"):
        make_net("cuda", s["layers"], s["input_shape"], 8, s["loss"], s["optimizer"])
